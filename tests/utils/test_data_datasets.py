"""Datasets and random_split."""

import pytest

import ember
from ember.utils.data import (ChainDataset, ConcatDataset, IterableDataset, StackDataset, Subset,
                              TensorDataset, random_split)


class Range(IterableDataset):
    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi

    def __iter__(self):
        return iter(range(self.lo, self.hi))


def test_tensor_dataset():
    x, y = ember.arange(12.0).reshape(6, 2), ember.arange(6)
    ds = TensorDataset(x, y)
    assert len(ds) == 6
    a, b = ds[4]
    assert a.tolist() == [8.0, 9.0] and b.item() == 4
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        TensorDataset(x, ember.arange(5))


def test_concat_and_subset_and_stack():
    a, b = list(range(3)), list(range(10, 15))
    cat = ConcatDataset([a, b])
    assert len(cat) == 8 and [cat[i] for i in range(8)] == a + b and cat[-1] == 14
    assert cat.cumulative_sizes == [3, 8]
    sub = Subset(b, [4, 0])
    assert len(sub) == 2 and sub[0] == 14 and sub[1] == 10
    st = StackDataset(a, [x * 2 for x in a])
    assert st[2] == (2, 4)
    assert StackDataset(x=a, y=a)[1] == {"x": 1, "y": 1}
    with pytest.raises(ValueError, match="Size mismatch between datasets"):
        StackDataset(a, b)
    with pytest.raises(ValueError, match="^At least one dataset should be passed$"):
        StackDataset()
    assert StackDataset(x=a, y=b[:3]).__getitems__([2, 0]) == [{"x": 2, "y": 12},
                                                               {"x": 0, "y": 10}]


def test_chain_and_add():
    assert list(ChainDataset([Range(0, 2), Range(5, 7)])) == [0, 1, 5, 6]
    assert list(Range(0, 2) + Range(3, 4)) == [0, 1, 3]


def test_random_split_by_lengths_and_fractions():
    data = list(range(10))
    parts = random_split(data, [3, 7], generator=ember.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [3, 7]
    assert sorted(parts[0].indices + parts[1].indices) == data
    again = random_split(data, [3, 7], generator=ember.Generator().manual_seed(0))
    assert again[0].indices == parts[0].indices
    assert [len(p) for p in random_split(data, [0.33, 0.33, 0.34])] == [4, 3, 3]
    with pytest.raises(ValueError, match="Sum of input lengths does not equal"):
        random_split(data, [3, 3])
    with pytest.raises(ValueError, match="^Fraction at index 0 is not between 0 and 1$"):
        random_split(data, [-0.5, 1.5])


def test_random_split_empty_part_warning_blames_the_caller():
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0") as record:
        parts = random_split(list(range(6)), [0.85, 0.15])
    assert [len(p) for p in parts] == [6, 0]
    assert record[0].filename == __file__


def test_iterable_dataset_is_abstract_and_chain_len_checks_types():
    with pytest.raises(TypeError, match="abstract"):
        IterableDataset()
    with pytest.raises(AssertionError, match="ChainDataset only supports IterableDataset"):
        len(ChainDataset([TensorDataset(ember.arange(3))]))
