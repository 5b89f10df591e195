"""A batch of TensorDataset samples that default_collate stacks with one index per tensor."""

from collections.abc import Sequence

import numpy as np

__all__ = ["StackedSamples"]


class StackedSamples(Sequence):
    """Looks like the list ``[dataset[i] for i in indices]``; ``default_collate`` takes the
    shortcut ``[t[indices] for t in tensors]`` instead of stacking row by row."""

    def __init__(self, tensors, indices):
        self.tensors = tensors
        self.indices = list(indices)

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return tuple(t[self.indices[i]] for t in self.tensors)

    def __iter__(self):     # (not Sequence's: that one ends at a row's IndexError)
        for i in self.indices:
            yield tuple(t[i] for t in self.tensors)

    def __repr__(self):
        return repr(list(self))

    def stacked(self):
        """Each tensor's rows at the batch's indices, as one tensor per tensor; None where the
        shortcut would not give what stacking the rows gives (an index that is not an int in
        range, whose error or shape comes from indexing a row; a tensor that records its
        graph, whose batch's node is PyTorch's stack)."""
        import ember
        if not all(t is int or issubclass(t, np.integer) for t in set(map(type, self.indices))):
            return None                     # (bools, floats, tensors: indexed row by row)
        index = np.asarray(self.indices)
        n = len(self.tensors[0]) if self.tensors and self.tensors[0].ndim else 0
        if index.dtype.kind not in "iu" or not n or index.min() < -n or index.max() >= n:
            return None
        if ember.is_grad_enabled() and any(t.requires_grad for t in self.tensors):
            return None
        index, on = index.astype(np.int64) % n, {}
        for t in self.tensors:              # (the index on each tensor's device)
            if t.device not in on:
                on[t.device] = ember.as_tensor(index, device=t.device)
        return [t.index_select(0, on[t.device]) for t in self.tensors]
