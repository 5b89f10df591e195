"""ember.utils.data fixes of audit round 15, checked without PyTorch (the comparisons with
PyTorch are in tests/parity/test_parity_data_round15.py)."""

import dataclasses

import numpy as np
import pytest

import ember
from ember.utils import data


def test_numpy_str_scalars_collate_as_a_list():
    out = data.default_collate([np.str_("a"), np.str_("b")])
    assert out == ["a", "b"]


def test_numpy_datetime_scalars_are_refused_by_collate():
    with pytest.raises(TypeError, match="found <class 'numpy.datetime64'>"):
        data.default_collate([np.datetime64("2020-01-01"), np.datetime64("2020-01-02")])


def test_numpy_number_scalars_still_collate():
    out = data.default_collate([np.float32(1), np.float32(2)])
    assert out.dtype is ember.float32 and out.tolist() == [1.0, 2.0]


def test_sampler_takes_no_arguments():
    with pytest.raises(TypeError):
        data.Sampler([1, 2])


def test_batch_sampler_takes_a_getitem_only_sampler():
    class IndexOnly:
        def __getitem__(self, i):
            if i >= 3:
                raise IndexError(i)
            return i

        def __len__(self):
            return 3

    sampler = data.BatchSampler(IndexOnly(), 2, False)
    assert list(sampler) == [[0, 1], [2]] and len(sampler) == 2


def test_distributed_sampler_of_an_empty_dataset():
    sampler = data.DistributedSampler([], num_replicas=2, rank=1, shuffle=False)
    assert list(sampler) == [] and len(sampler) == 0


def test_stack_dataset_uses_and_checks_nested_getitems():
    class Batched:
        def __init__(self, size):
            self.size = size

        def __len__(self):
            return 3

        def __getitem__(self, i):
            return i

        def __getitems__(self, indices):
            return [10 * i for i in indices][:self.size]

    assert data.StackDataset(Batched(None), "abc").__getitems__([2, 1]) == [(20, "c"), (10, "b")]
    with pytest.raises(ValueError, match="Expected 2, got 1"):
        data.StackDataset(Batched(1), "abc").__getitems__([2, 1])


def test_concat_dataset_cumsum():
    assert data.ConcatDataset.cumsum([[1], [], [2, 3]]) == [1, 1, 3]


def test_typed_subclasses_of_the_generic_classes():
    class Squares(data.Dataset[int]):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return i * i

    class Reversed(data.Sampler[int]):
        def __iter__(self):
            return iter([2, 1, 0])

    loader = data.DataLoader[int](Squares(), sampler=Reversed(), batch_size=2)
    assert [b.tolist() for b in loader] == [[4, 1], [0]]


def test_multiprocessing_context_assigned_later_is_checked_and_converted():
    loader = data.DataLoader([1], num_workers=1)
    loader.multiprocessing_context = "spawn"
    assert loader.multiprocessing_context.get_start_method() == "spawn"
    with pytest.raises(ValueError, match="valid start method"):
        loader.multiprocessing_context = "nope"
    with pytest.raises(ValueError, match="num_workers=0"):
        data.DataLoader([1]).multiprocessing_context = "spawn"


class _Info(data.Dataset):
    def __len__(self):
        return 1

    def __getitem__(self, i):
        info = data.get_worker_info()
        return (info.rng, info.worker_method, [f.name for f in dataclasses.fields(info)],
                hasattr(info, "__dict__"))


def test_worker_info_fields():
    (out,) = data.DataLoader(_Info(), batch_size=None, num_workers=1)
    assert out == [None, "multiprocessing",
                   ["id", "num_workers", "seed", "dataset", "rng", "worker_method"], False]
