"""``ember.cuda.comm``: the copies and sums across GPUs of ``ember.nn.parallel.comm``, under
their older name (``torch.cuda.comm``)."""

from ember.nn.parallel.comm import (broadcast, broadcast_coalesced, gather, reduce_add,
                                    reduce_add_coalesced, scatter)

__all__ = ["broadcast", "broadcast_coalesced", "reduce_add", "reduce_add_coalesced",
           "scatter", "gather"]
