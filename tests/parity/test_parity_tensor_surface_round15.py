"""The Tensor class's rarer surface against PyTorch (round 15): map_/map2_ argument checks,
``in`` with NumPy numbers, data_ptr of empty tensors, type() with a non-dtype, the legacy
``__setstate__``, the read-only ``name`` slot and Python 2's dunder names."""

import copy
import pickle

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_same, dtype_name, is_tensor

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _same(fn):
    """Assert ``fn(lib)`` gives the same tensor (dtype, requires_grad, values), value or
    error (type, message without library prefixes) in both libraries."""
    assert_same(fn, quiet=True, message=_neutral, describe=lambda out: (
        (dtype_name(out.dtype), out.requires_grad, out.tolist()) if is_tensor(out) else out))


def _neutral(text):
    """The message with both libraries' prefixes dropped."""
    return text.replace("torch.", "").replace("ember.", "")


def _add(*xs):
    return sum(xs)


@pytest.mark.parametrize("fn", [
    lambda T: T.tensor([1.0, 2.0]).map_([3.0, 4.0], _add),
    lambda T: T.tensor([1.0, 2.0]).map2_([3.0, 4.0], T.tensor([1.0]), _add),
    lambda T: T.tensor([1.0, 2.0]).map2_(T.tensor([3.0, 4.0]), 1, _add),
    lambda T: T.tensor([1.0, 2.0]).map_(T.tensor([3.0, 4.0], requires_grad=True), _add),
    lambda T: T.tensor([1.0, 2.0]).map2_(T.tensor([3.0]), T.tensor([1.0], requires_grad=True),
                                         _add),
    lambda T: T.tensor([1.0, 2.0]).map_(T.tensor([3.0, 4.0]), _add),
    lambda T: T.empty(2, device="meta").apply_(_add).shape == (2,),
])
def test_apply_map_argument_checks(fn):
    _same(fn)


@pytest.mark.parametrize("element", [np.float32(2), np.int8(2), np.int64(5), np.bool_(True),
                                     np.array(2), 2, "a"])
def test_contains_takes_numpy_numbers(element):
    _same(lambda T: element in T.tensor([1, 2]))


@pytest.mark.parametrize("make", [lambda T: T.tensor([]), lambda T: T.arange(3.0)[3:],
                                  lambda T: T.empty(0, 4)])
def test_data_ptr_of_an_empty_tensor_is_zero(make):
    _same(lambda T: make(T).data_ptr())


def test_data_ptr_of_an_empty_storage_is_zero():
    _same(lambda T: (T.empty(0, 4).untyped_storage().data_ptr(),
                     T.arange(3.0)[3:].untyped_storage().data_ptr() != 0))


@pytest.mark.parametrize("kind", [5, None.__class__, float, np.float32, object()])
def test_type_refuses_what_is_not_a_type_name_or_dtype(kind):
    _same(lambda T: T.tensor([1.0]).type(kind))


@pytest.mark.parametrize("state", [
    lambda T: (True, None, None),
    lambda T: (T.tensor([5.0]), None, None, True, None),
    lambda T: (T.tensor([5.0]).untyped_storage(), 0, (1,), (1,)),
    lambda T: (1, 2, 3),
    lambda T: (1,),
])
def test_setstate_of_a_legacy_pickle(state):
    def restore(T):
        t = T.tensor([1.0, 2.0])
        t.__setstate__(state(T))
        return t
    _same(restore)


def test_setstate_refuses_a_non_leaf_and_keeps_hooks():
    _same(lambda T: (T.ones(1, requires_grad=True) * 2).__setstate__((True, None, None)))
    t = ember.ones(1)
    t.__setstate__((False, None, {1: 2}))
    assert t._backward_hooks == {1: 2} and not t.requires_grad


def test_name_is_a_read_only_none():
    assert ember.ones(2).name is None and torch.ones(2).name is None
    for lib in (ember, torch):
        with pytest.raises(AttributeError):
            lib.ones(2).name = "w"


def test_python2_dunders():
    _same(lambda T: (T.tensor(3.5).__long__(), T.tensor(0.0).__nonzero__(),
                     T.tensor([2.0]).__div__(4).tolist()))
    _same(lambda T: T.tensor([2.0]).__idiv__(4))
    _same(lambda T: T.tensor([2.0, 3.0]).__delitem__(0))
    assert ember.Tensor.__div__ is ember.Tensor.__truediv__


def test_array_wrap_refuses_a_numpy_scalar():
    _same(lambda T: T.tensor([1.0]).__array_wrap__(np.float64(2.0)))


def test_pickle_and_copy_still_carry_attributes():
    t = ember.tensor([1.0, 2.0], requires_grad=True)
    t.label = "w"
    back = pickle.loads(pickle.dumps(t))
    assert (back.label, back.requires_grad, back.tolist()) == ("w", True, [1.0, 2.0])
    assert copy.copy(t).label == "w"
