"""ember.utils.data: datasets, samplers, collation and the DataLoader
(``torch.utils.data``)."""

from ember.utils.data import _utils  # noqa: F401  (torch.utils.data._utils.collate)
from ember.utils.data._worker import get_worker_info
from ember.utils.data.collate import default_collate, default_convert
from ember.utils.data.dataloader import DataLoader
from ember.utils.data.dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset,
                                      StackDataset, Subset, TensorDataset, random_split)
from ember.utils.data.distributed import DistributedSampler
from ember.utils.data.sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                                      SubsetRandomSampler, WeightedRandomSampler)
