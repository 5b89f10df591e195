"""Datasets: map-style (``__getitem__``) and iterable (``__iter__``) sources of samples."""

import bisect
import itertools
import math
import typing
import warnings
from typing import Generic, TypeVar

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset",
           "ChainDataset", "Subset", "random_split"]

T_co = TypeVar("T_co", covariant=True)
T_stack = TypeVar("T_stack", tuple, dict)


class Dataset(Generic[T_co]):
    """A map from keys (usually indices) to samples; subclasses define ``__getitem__`` and
    usually ``__len__``."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co], typing.Iterable[T_co]):    # typing's: Generic goes last
    """A stream of samples; subclasses define ``__iter__`` (abstract, as in PyTorch). With
    several DataLoader workers each worker iterates its own copy: shard with
    ``get_worker_info()``."""

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset[tuple]):
    """Samples are the i-th rows of each tensor (all share their first dimension)."""

    def __init__(self, *tensors):
        if any(t.size(0) != tensors[0].size(0) for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __getitems__(self, indices):
        """A whole batch in one indexing call per tensor (the DataLoader's fast path); a
        subclass's own ``__getitem__`` is called sample by sample, as PyTorch's loader does."""
        if type(self).__getitem__ is not TensorDataset.__getitem__:
            return [self[i] for i in indices]
        from ember.utils.data._stacked import StackedSamples
        return StackedSamples(self.tensors, indices)

    def __len__(self):
        return self.tensors[0].shape[0]


class StackDataset(Dataset[T_stack]):
    """Samples zip several datasets: tuples (positional) or dicts (keyword)."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via "
                             "``kwargs``) like input/output, but both types are given.")
        self.datasets = args or kwargs
        parts = list(args or kwargs.values())
        if not parts:
            raise ValueError("At least one dataset should be passed")
        self._length = len(parts[0])
        if any(len(d) != self._length for d in parts):
            raise ValueError("Size mismatch between datasets")

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices):
        """The samples at ``indices``, as a list (one batch's fetch); each dataset with its
        own ``__getitems__`` is asked for the whole batch at once."""
        if isinstance(self.datasets, dict):
            columns = {k: _fetch_column(d, indices) for k, d in self.datasets.items()}
            return [{k: column[j] for k, column in columns.items()}
                    for j in range(len(indices))]
        columns = [_fetch_column(d, indices) for d in self.datasets]
        return [tuple(column[j] for column in columns) for j in range(len(indices))]

    def __len__(self):
        return self._length


def _fetch_column(dataset, indices):
    """``[dataset[i] for i in indices]``, through ``dataset.__getitems__`` where it has one."""
    if not callable(getattr(dataset, "__getitems__", None)):
        return [dataset[i] for i in indices]
    items = dataset.__getitems__(indices)
    if len(items) != len(indices):
        raise ValueError(f"Nested dataset's output size mismatch. Expected {len(indices)}, "
                         f"got {len(items)}")
    return items


class ConcatDataset(Dataset[T_co]):
    """The concatenation of several map-style datasets."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    @staticmethod
    def cumsum(sequence):
        """The running totals of the lengths of ``sequence``'s datasets."""
        return list(itertools.accumulate(len(d) for d in sequence))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][idx - start]


class ChainDataset(IterableDataset):
    """The chaining of several iterable datasets."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self):
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(d)
        return total


class Subset(Dataset[T_co]):
    """The samples of ``dataset`` at ``indices``."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        inner = [self.indices[i] for i in indices]
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__(inner)
        return [self.dataset[i] for i in inner]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Split ``dataset`` into non-overlapping random Subsets of the given lengths (or
    fractions summing to 1; remainders go round-robin to the first splits)."""
    from ember._random import randperm
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        for i, frac in enumerate(lengths):
            if not 0 <= frac <= 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
        counts = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        for i, count in enumerate(counts):
            if count == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an "
                              "empty dataset.", stacklevel=2)
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = randperm(n, generator=generator).tolist()
    out, start = [], 0
    for length in lengths:
        out.append(Subset(dataset, order[start:start + length]))
        start += length
    return out
