"""Samplers: orders, statistics, determinism."""

from collections import Counter

import numpy as np
import pytest

import ember
from ember.utils.data import (BatchSampler, DistributedSampler, RandomSampler,
                              SequentialSampler, SubsetRandomSampler, WeightedRandomSampler)

DATA = list(range(10))


def test_sequential():
    assert list(SequentialSampler(DATA)) == DATA and len(SequentialSampler(DATA)) == 10


def test_random_is_a_permutation_reproducible_under_manual_seed():
    ember.manual_seed(3)
    first = list(RandomSampler(DATA))
    ember.manual_seed(3)
    assert list(RandomSampler(DATA)) == first
    assert sorted(first) == DATA and first != DATA
    g = ember.Generator().manual_seed(5)
    s = RandomSampler(DATA, generator=g)
    assert list(s) != list(s)                  # the generator advances between epochs


def test_random_num_samples_and_replacement():
    s = RandomSampler(DATA, num_samples=25)
    drawn = list(s)
    assert len(s) == 25 and len(drawn) == 25 and Counter(drawn)[0] in (2, 3)
    drawn = list(RandomSampler(DATA, replacement=True, num_samples=5000))
    counts = np.bincount(drawn, minlength=10)
    assert counts.min() > 400 and counts.max() < 600
    with pytest.raises(ValueError, match="num_samples should be a positive integer value, but "
                                         "got num_samples=0"):
        RandomSampler(DATA, num_samples=0)
    with pytest.raises(TypeError, match="replacement should be a boolean value"):
        RandomSampler(DATA, replacement=1)


def test_subset_random():
    s = SubsetRandomSampler([3, 5, 7])
    assert sorted(s) == [3, 5, 7] and len(s) == 3


def test_weighted_frequencies_follow_the_weights():
    ember.manual_seed(0)
    drawn = list(WeightedRandomSampler([0.1, 0.0, 0.3, 0.6], 20000))
    freq = np.bincount(drawn, minlength=4) / 20000
    np.testing.assert_allclose(freq, [0.1, 0.0, 0.3, 0.6], atol=0.015)
    unique = list(WeightedRandomSampler([1, 1, 1, 5], 4, replacement=False))
    assert sorted(unique) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="weights should be a 1d sequence"):
        WeightedRandomSampler([[1.0, 2.0]], 1)


def test_batch_sampler():
    assert list(BatchSampler(range(7), 3, False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(BatchSampler(range(7), 3, True)) == [[0, 1, 2], [3, 4, 5]]
    assert len(BatchSampler(range(7), 3, False)) == 3 and len(BatchSampler(range(7), 3, True)) == 2
    with pytest.raises(ValueError, match="batch_size should be a positive integer value, but "
                                         "got batch_size=0"):
        BatchSampler(range(7), 0, False)
    with pytest.raises(ValueError, match="drop_last should be a boolean value"):
        BatchSampler(range(7), 2, 0)


@pytest.mark.parametrize("n, replicas, drop_last", [(10, 3, False), (10, 3, True), (9, 3, False),
                                                    (2, 4, False)])
def test_distributed_ranks_partition_the_dataset(n, replicas, drop_last):
    data = list(range(n))
    shares = [list(DistributedSampler(data, replicas, rank, shuffle=True, seed=7,
                                      drop_last=drop_last)) for rank in range(replicas)]
    assert len({len(s) for s in shares}) == 1
    combined = sorted(i for s in shares for i in s)
    if drop_last:
        assert len(combined) == replicas * (n // replicas) and len(set(combined)) == len(combined)
    else:
        assert set(combined) == set(data) and len(combined) == replicas * -(-n // replicas)


def test_distributed_epochs_and_errors():
    s = DistributedSampler(list(range(20)), 2, 0, seed=1)
    first = list(s)
    assert list(s) == first
    s.set_epoch(1)
    assert list(s) != first
    assert list(DistributedSampler(list(range(6)), 2, 1, shuffle=False)) == [1, 3, 5]
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval"):
        DistributedSampler(list(range(6)), 2, 2)
