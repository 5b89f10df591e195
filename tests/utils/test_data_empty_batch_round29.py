"""A batch sampler may yield an empty batch (opacus's Poisson sampling): the default collate
raises PyTorch's IndexError, and a custom collate_fn receives the empty list."""

import pytest

import ember
from ember.utils.data import DataLoader, TensorDataset, default_collate


def _dataset():
    return TensorDataset(ember.arange(6.0).view(6, 1), ember.arange(6))


def test_default_collate_of_an_empty_batch_raises_index_error():
    loader = DataLoader(_dataset(), batch_sampler=[[0, 1], []])
    it = iter(loader)
    assert [tuple(t.shape) for t in next(it)] == [(2, 1), (2,)]
    with pytest.raises(IndexError, match="list index out of range"):
        next(it)


def test_custom_collate_receives_the_empty_list():
    seen = []

    def collate(batch):
        seen.append(len(batch))
        return default_collate(batch) if batch else [ember.zeros(0, 1),
                                                     ember.zeros(0, dtype=ember.long)]
    loader = DataLoader(_dataset(), batch_sampler=[[0, 1], [], [4]], collate_fn=collate)
    assert [[tuple(t.shape) for t in b] for b in loader] == [[(2, 1), (2,)], [(0, 1), (0,)],
                                                             [(1, 1), (1,)]]
    assert seen == [2, 0, 1]
