"""``ember.nn.parallel``: data parallelism over the GPUs of one process
(``torch.nn.parallel``)."""

from ember.nn.parallel import comm  # noqa: F401
from ember.nn.parallel.data_parallel import DataParallel, data_parallel
from ember.nn.parallel.scatter_gather import gather, scatter

__all__ = ["DataParallel", "data_parallel", "gather", "scatter"]
