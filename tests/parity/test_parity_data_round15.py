"""ember.utils.data against torch.utils.data (audit round 15): collation of NumPy scalars that
are not numbers, the pin_memory_device warning, Sampler and BatchSampler arguments, an empty
DistributedSampler, TensorDataset of 0-dim tensors, ConcatDataset.cumsum, StackDataset's
nested ``__getitems__``, subscripting the generic classes and the multiprocessing_context
setter."""

import warnings

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_same, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _same(fn):
    """``fn(lib.utils.data)``'s outcome, asserted equal for both libraries."""
    return assert_same(lambda lib: fn(lib.utils.data))


def test_numpy_str_scalars_collate_as_a_list():
    batch = [np.str_("a"), np.str_("b")]
    out = _same(lambda data: data.default_collate(batch))
    assert out == ["a", "b"] and type(out[0]) is np.str_


def test_numpy_datetime_scalars_raise_the_collate_error():
    batch = [np.datetime64("2020-01-01"), np.datetime64("2020-01-02")]
    kind, message = _same(lambda data: data.default_collate(batch))
    assert kind == "TypeError" and "numpy.datetime64" in message


def _warnings_of_an_epoch(lib):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        list(lib.utils.data.DataLoader([1], pin_memory=True, pin_memory_device="cuda"))
    return [str(w.message) for w in caught]


def test_pin_memory_device_is_deprecated_at_each_epoch():
    if ember.cuda.is_available() != torch.cuda.is_available():
        pytest.skip("the accelerator warning depends on the machine")
    ours = _warnings_of_an_epoch(ember)
    assert ours == _warnings_of_an_epoch(torch)
    assert any("pin_memory_device is deprecated" in m for m in ours)


def test_sampler_takes_no_arguments():
    assert _same(lambda data: data.Sampler([1, 2]))[0] == "TypeError"


class _IndexOnly:
    """A sampler that iterates through ``__getitem__`` only (not a collections Iterable)."""

    def __getitem__(self, i):
        if i >= 5:
            raise IndexError(i)
        return i

    def __len__(self):
        return 5


def test_batch_sampler_takes_a_getitem_only_sampler():
    assert _same(lambda data: list(data.BatchSampler(_IndexOnly(), 2, False))) == \
        [[0, 1], [2, 3], [4]]


def test_distributed_sampler_of_an_empty_dataset():
    assert _same(lambda data: [list(data.DistributedSampler([], num_replicas=2, rank=r,
                                                             shuffle=False))
                               for r in range(2)]) == [[], []]


def test_tensor_dataset_of_a_zero_dim_tensor():
    out = outcome(lambda data: data.TensorDataset(ember.tensor(1.0)), ember.utils.data)
    assert out == outcome(lambda data: data.TensorDataset(torch.tensor(1.0)), torch.utils.data)
    assert out[0] == "IndexError"


def test_concat_dataset_cumsum():
    assert _same(lambda data: data.ConcatDataset.cumsum([[1, 2], [], [3]])) == [2, 2, 3]


class _Batched:
    """A dataset whose ``__getitems__`` gives ``10 * i`` (``__getitem__`` gives ``i``)."""

    def __init__(self, size=None):
        self.size = size

    def __len__(self):
        return 3

    def __getitem__(self, i):
        return i

    def __getitems__(self, indices):
        return [10 * i for i in indices][:self.size]


@pytest.mark.parametrize("keyword", [False, True])
def test_stack_dataset_asks_nested_getitems(keyword):
    def fetch(data):
        parts = {"a": _Batched(), "b": ["x", "y", "z"]}
        stacked = data.StackDataset(**parts) if keyword else data.StackDataset(*parts.values())
        return stacked.__getitems__([2, 0])
    out = _same(fetch)
    assert out == ([{"a": 20, "b": "z"}, {"a": 0, "b": "x"}] if keyword
                   else [(20, "z"), (0, "x")])


def test_stack_dataset_nested_getitems_of_the_wrong_size():
    kind, message = _same(lambda data: data.StackDataset(_Batched(1), [5, 6, 7])
                          .__getitems__([0, 1]))
    assert kind == "ValueError" and "Expected 2, got 1" in message


_CLASSES = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset",
            "ChainDataset", "Subset", "Sampler", "SequentialSampler", "RandomSampler",
            "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler",
            "DistributedSampler", "DataLoader"]


@pytest.mark.parametrize("name", _CLASSES)
def test_generic_classes_subscript_as_torch(name):
    def subscript(data):
        try:
            getattr(data, name)[int]
        except TypeError:
            return "not generic"
        return "subscriptable"
    _same(subscript)


def test_typed_dataset_subclass_works_in_a_loader():
    class Squares(ember.utils.data.Dataset[int]):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return i * i

    assert [b.tolist() for b in ember.utils.data.DataLoader(Squares(), batch_size=2)] == \
        [[0, 1], [4]]


@pytest.mark.parametrize("num_workers,context", [(1, "spawn"), (1, "bad"), (0, "fork"),
                                                 (1, 3)])
def test_multiprocessing_context_setter_checks(num_workers, context):
    def assign(data):
        loader = data.DataLoader([1], num_workers=num_workers)
        loader.multiprocessing_context = context
        return type(loader.multiprocessing_context).__name__
    _same(assign)


def test_dataset_kind_and_worker_number_check_as_torch():
    def kinds(data):
        class Stream(data.IterableDataset):
            def __iter__(self):
                return iter([1])
        loaders = data.DataLoader([1]), data.DataLoader(Stream())
        return [d._dataset_kind for d in loaders], \
            callable(loaders[0].check_worker_number_rationality)
    assert _same(kinds) == ([0, 1], True)


def test_collate_functions_have_torch_names():
    def names(data):
        table = data._utils.collate
        return sorted(f.__name__ for f in set(table.default_collate_fn_map.values()))
    assert "collate_tensor_fn" in _same(names)
