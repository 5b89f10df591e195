"""Storages and shared memory against PyTorch: storage sizes, values and printing, the
TypedStorage deprecation warning, indexing errors, and is_shared answers after
share_memory_ on tensors, views, storages and modules."""

import pickle
import warnings

import numpy as np
import pytest

import ember
from ember import _storage

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

VALUES = {"float32": [0.1, 2.0, -3.5, 1e10], "float64": [0.1, 2.0], "int64": [1, -2, 3],
          "int16": [7, -1], "uint8": [0, 255], "bool": [True, False, True],
          "complex64": [1 + 2j], "float16": [1.5, -0.25], "bfloat16": [1.5, 2.0]}


@pytest.fixture(autouse=True)
def quiet_typed_storage():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "TypedStorage is deprecated", UserWarning)
        yield


def _both(values, dtype, shape=None):
    a, b = ember.tensor(values, dtype=getattr(ember, dtype)), \
        torch.tensor(values, dtype=getattr(torch, dtype))
    return (a, b) if shape is None else (a.reshape(shape), b.reshape(shape))


def _same_text(ours, theirs):
    assert ours.replace("ember", "torch") == theirs


@pytest.mark.parametrize("dtype", sorted(VALUES))
def test_storages_match(dtype):
    a, b = _both(VALUES[dtype], dtype)
    for ours, theirs in ((a.untyped_storage(), b.untyped_storage()),
                         (a.storage(), b.storage())):
        assert ours.nbytes() == theirs.nbytes() and ours.size() == theirs.size()
        assert len(ours) == len(theirs) and ours.element_size() == theirs.element_size()
        assert ours.tolist() == theirs.tolist() and list(ours) == list(theirs)
        assert str(ours.device) == str(theirs.device) and ours.is_shared() == theirs.is_shared()
        _same_text(repr(ours), repr(theirs))
        _same_text(str(ours), str(theirs))
    assert str(a.storage().dtype).replace("ember", "torch") == str(b.storage().dtype)


@pytest.mark.parametrize("view", ["row", "column", "t", "strided", "flat"])
def test_views_see_the_whole_storage(view):
    a, b = _both(list(range(12)), "float32", (3, 4))
    pick = {"row": lambda t: t[1], "column": lambda t: t[:, 2], "t": lambda t: t.t(),
            "strided": lambda t: t[1:, ::2], "flat": lambda t: t.view(-1)}[view]
    va, vb = pick(a), pick(b)
    assert va.untyped_storage().nbytes() == vb.untyped_storage().nbytes()
    assert va.storage().tolist() == vb.storage().tolist()
    assert va.storage_offset() == vb.storage_offset()
    assert va.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    _same_text(repr(va.storage()), repr(vb.storage()))


def test_empty_and_0_dim_storages():
    for make in (lambda lib: lib.zeros(0), lambda lib: lib.tensor(3.0),
                 lambda lib: lib.zeros(2, 0, 3)):
        ours, theirs = make(ember), make(torch)
        _same_text(repr(ours.untyped_storage()), repr(theirs.untyped_storage()))
        _same_text(repr(ours.storage()), repr(theirs.storage()))


def test_the_deprecation_warning():
    caught = {}
    for lib, reset in ((ember, _storage._reset_warn_typed_storage_removal),
                       (torch, torch.storage._reset_warn_typed_storage_removal)):
        reset()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            t = lib.ones(2)
            t.storage()
            t.storage()
            t.untyped_storage()
        caught[lib] = [(x.category, str(x.message)) for x in w]
    assert caught[ember] == caught[torch] and len(caught[torch]) == 1


def test_indexing():
    a, b = _both([1.0, 2.0], "float32")
    for index in (0, 7, -1, -8):
        assert a.untyped_storage()[index] == b.untyped_storage()[index]
    assert a.storage()[1] == b.storage()[1]
    for index in (8, -9):
        with pytest.raises(IndexError) as ours:
            a.untyped_storage()[index]
        with pytest.raises(IndexError) as theirs:
            b.untyped_storage()[index]
        assert str(ours.value) == str(theirs.value)


def _shared_answers(lib):
    answers = []
    t = lib.zeros(4, 3)
    before = t[0]
    answers += [t.is_shared(), t.untyped_storage().is_shared(), t.storage().is_shared()]
    assert t.share_memory_() is t
    answers += [t.is_shared(), t[1:].is_shared(), t.t().is_shared(), t.clone().is_shared(),
                t.untyped_storage().is_shared(), t.storage().is_shared()]
    del before          # views taken before share_memory_ differ: see Tensor.share_memory_
    base = lib.zeros(3, 3)
    row = base[1]
    answers += [row.share_memory_() is row, base.is_shared(), row.is_shared()]
    grad = lib.ones(2, requires_grad=True)
    answers += [grad.share_memory_().is_shared(), grad.requires_grad, grad.is_leaf]
    answers += [lib.zeros(0).share_memory_().is_shared()]
    s = lib.ones(2).untyped_storage()
    answers += [s.share_memory_() is s, s.is_shared()]
    model = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.BatchNorm1d(2))
    model[0].weight.grad = lib.zeros(2, 2)
    answers += [model.share_memory() is model]
    answers += [p.is_shared() for p in model.parameters()]
    answers += [b.is_shared() for b in model.buffers()]
    answers += [model[0].weight.grad.is_shared(), model[0].bias.grad is None]
    answers += [pickle.loads(pickle.dumps(t)).is_shared()]
    return answers


def test_is_shared_answers():
    assert _shared_answers(ember) == _shared_answers(torch)


def test_shared_values_and_layout_survive():
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3).T        # strides (1, 3)
    ours, theirs = ember.from_numpy(x), torch.from_numpy(x)
    ours.share_memory_()
    theirs.share_memory_()
    assert ours.tolist() == theirs.tolist() and ours.stride() == theirs.stride() == (1, 3)
    assert ours.untyped_storage().nbytes() == theirs.untyped_storage().nbytes()
