"""A batch of TensorDataset samples that default_collate stacks with one index per tensor."""

from collections.abc import Sequence

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

    def __repr__(self):
        return repr(list(self))

    def stacked(self):
        """Each tensor's rows at the batch's indices, as one tensor per tensor."""
        from ember._creation import tensor
        index = tensor(self.indices)
        return [t.index_select(0, index) for t in self.tensors]
