"""Regression tests for the bugs the round-37 dunder fuzzer found (Tensor's Python protocol)."""

import pickle

import numpy as np
import pytest

import ember


def _expanded(dtype):
    return ember.zeros(1, dtype=dtype).expand(2, 3)


# --- Python ints beyond int64 / uint64 -------------------------------------------------------

@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.int64, ember.bool,
                                   ember.complex64, ember.bfloat16])
@pytest.mark.parametrize("fn", [lambda x, n: x + n, lambda x, n: n - x, lambda x, n: x < n,
                                lambda x, n: x == n, lambda x, n: x * n])
def test_huge_int_operand_overflows(dtype, fn):
    x = ember.ones(3, dtype=dtype)
    with pytest.raises(OverflowError, match="^int too big to convert$"):
        fn(x, 2 ** 70)
    with pytest.raises(OverflowError, match="^int too big to convert$"):
        fn(x, 2 ** 64)
    with pytest.raises(OverflowError, match="^can't convert negative int to unsigned$"):
        fn(x, -(2 ** 63) - 1)


def test_huge_int_in_place_and_bitwise_overflow():
    x = ember.ones(2, dtype=ember.int32)
    with pytest.raises(OverflowError, match="^int too big to convert$"):
        x |= 2 ** 70
    with pytest.raises(OverflowError, match="^can't convert negative int to unsigned$"):
        ember.ones(2).bitwise_or(-(2 ** 63) - 1)    # (before the kernel's refusal of float)
    assert x.tolist() == [1, 1]


def test_ints_at_the_int64_uint64_edges_still_work():
    assert (ember.ones(2) + 2 ** 63).tolist() == [9.223372036854776e18] * 2
    assert (ember.ones(2) - 2 ** 63).tolist() == [-9.223372036854776e18] * 2
    assert (ember.ones(2, dtype=ember.int64) + (2 ** 64 - 1)).tolist() == [0, 0]


# --- in-place writes into an expanded tensor: the overlap error comes first ------------------

def test_overlap_error_before_cast_error():
    x = _expanded(ember.bool)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        x |= ember.ones(2, 3, dtype=ember.complex64)


def test_overlap_error_before_kernel_refusal():
    x = _expanded(ember.bool)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        x >>= np.bool_(True)


def test_overlap_error_before_broadcast_error():
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        _expanded(ember.float32).add_(ember.ones(4))
    x = _expanded(ember.bool)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        x >>= ember.ones(5)


def test_bool_subtraction_error_before_overlap_error():
    x = _expanded(ember.bool)
    with pytest.raises(RuntimeError, match="^Subtraction, the `-` operator, with a bool tensor"):
        x -= ember.ones(3, dtype=ember.float16)


def test_fill_of_expanded_still_allowed():
    assert _expanded(ember.int64).fill_(2).tolist() == [[2, 2, 2], [2, 2, 2]]


# --- in-place cast errors come before kernel checks ------------------------------------------

def test_in_place_mod_by_zero_checks_the_cast_first():
    x = ember.ones(1, 1, dtype=ember.bool)
    with pytest.raises(RuntimeError, match="^result type Long can't be cast to the desired "
                                           "output type Bool$"):
        x %= 0
    y = ember.ones(2, dtype=ember.int8)
    with pytest.raises(RuntimeError, match="^ZeroDivisionError$"):
        y %= 0


def test_in_place_cast_error_with_numpy_number():
    x = ember.ones(1, dtype=ember.int8)
    with pytest.raises(RuntimeError, match="^result type Float can't be cast to the desired "
                                           "output type Char$"):
        x >>= np.float32(0.0)
    x >>= np.int16(1)
    assert x.tolist() == [0]


# --- bmm refuses a bool batch1 before the dtype mismatch -------------------------------------

def test_bmm_bool_refused_before_dtype_mismatch():
    b = ember.ones(2, 1, 1, dtype=ember.bool)
    f = ember.ones(2, 1, 1, dtype=ember.float64)
    with pytest.raises(NotImplementedError, match="^\"bmm\" not implemented for 'Bool'$"):
        b @ f
    with pytest.raises(NotImplementedError, match="^\"bmm\" not implemented for 'Bool'$"):
        ember.bmm(b, f)
    with pytest.raises(RuntimeError, match="^expected scalar type Double but found Bool$"):
        ember.bmm(f, b)


# --- is_same_size names NumPy types as CPython does ------------------------------------------

def test_is_same_size_type_error_names_numpy_types():
    x = ember.ones(2)
    with pytest.raises(TypeError, match=r"must be Tensor, not numpy\.int8$"):
        x.is_same_size(np.int8(2))
    with pytest.raises(TypeError, match=r"must be Tensor, not numpy\.ndarray$"):
        x.is_same_size(np.ones(2))
    with pytest.raises(TypeError, match=r"must be Tensor, not list$"):
        x.is_same_size([1, 2])
    assert x.is_same_size(ember.zeros(2)) is True


# --- __setstate__ and pickling attributes ----------------------------------------------------

def test_setstate_takes_legacy_states_only():
    x = ember.ones(2)
    with pytest.raises(ValueError, match=r"not enough values to unpack \(expected 3, got 1\)"):
        x.__setstate__({"tag": 1})
    x.__setstate__((True, None, None))
    assert x.requires_grad is True


def test_pickle_keeps_attributes():
    x = ember.ones(2)
    x.label = "a"
    back = pickle.loads(pickle.dumps(x))
    assert back.label == "a" and back.tolist() == [1.0, 1.0]


class _Sub(ember.Tensor):
    pass


class _OwnState(ember.Tensor):
    seen = []

    def __setstate__(self, state):
        type(self).seen.append(sorted(state))
        self.__dict__.update(state)


def test_pickle_of_subclass_with_attributes():
    s = ember.tensor([1.0, 2.0]).as_subclass(_Sub)
    s.q = 3
    back = pickle.loads(pickle.dumps(s))
    assert type(back) is _Sub and back.q == 3 and back.tolist() == [1.0, 2.0]


def test_pickle_calls_a_subclass_own_setstate():
    s = ember.tensor([1.0]).as_subclass(_OwnState)
    s.q = 4
    back = pickle.loads(pickle.dumps(s))
    assert _OwnState.seen[-1] == ["q"] and back.q == 4


# --- NumPy numbers are saved for backward as the parser reads them ---------------------------

@pytest.mark.parametrize("number", [np.float32(2), np.int64(2), np.complex64(2)])
def test_reflected_remainder_of_numpy_number_has_no_derivative(number):
    t = ember.tensor([1.5, 2.5], dtype=ember.float64, requires_grad=True)
    r = number % t
    assert r.tolist() == [0.5, 2.0]
    with pytest.raises(RuntimeError, match="^derivative for aten::remainder is not implemented"):
        r.sum().backward()


def test_gradients_through_numpy_number_operands():
    t = ember.tensor([1.5, 2.5], dtype=ember.float64, requires_grad=True)
    g, = ember.autograd.grad((np.float64(2) / t).sum(), t)
    assert g.tolist() == pytest.approx([-2 / 1.5 ** 2, -2 / 2.5 ** 2])
    g, = ember.autograd.grad((t ** np.int64(2)).sum(), t)
    assert g.tolist() == [3.0, 5.0]
    g, = ember.autograd.grad(t.remainder(np.float32(2)).sum(), t)
    assert g.tolist() == [1.0, 1.0]


# --- pow reads an int exponent as an int64 before the tensor's dtype -------------------------

@pytest.mark.parametrize("dtype", [ember.uint8, ember.int8, ember.int32, ember.int64])
def test_pow_exponent_beyond_int64(dtype):
    x = ember.ones(2, dtype=dtype)
    with pytest.raises(RuntimeError, match="^value cannot be converted to type int64_t without "
                                           "overflow$"):
        x ** 2 ** 63
    with pytest.raises(RuntimeError, match="^value cannot be converted to type int64_t without "
                                           "overflow$"):
        x.pow(2 ** 64 - 1)


def test_pow_exponent_beyond_narrow_dtype():
    with pytest.raises(RuntimeError, match="^value cannot be converted to type uint8_t without "
                                           "overflow$"):
        ember.ones(2, dtype=ember.uint8) ** 300
    assert (ember.ones(2, dtype=ember.int32) ** 300).tolist() == [1, 1]


# --- an int in [2**63, 2**64) is a uint64 number: it promotes a bool tensor ------------------

_UINT64_REFUSED = ("^Promotion for uint16, uint32, uint64 types is not supported, attempted to "
                   "promote Bool and UInt64$")


@pytest.mark.parametrize("fn", [lambda b: b * 2 ** 63, lambda b: b < 2 ** 63,
                                lambda b: b >> 2 ** 63, lambda b: b.add_(2 ** 63)])
def test_uint64_number_with_bool_tensor_is_refused(fn):
    with pytest.raises(RuntimeError, match=_UINT64_REFUSED):
        fn(ember.ones(2, dtype=ember.bool))


def test_uint64_number_with_other_tensors():
    assert (ember.ones(2, dtype=ember.int8) * 2 ** 63).tolist() == [0, 0]
    assert (ember.ones(2, dtype=ember.uint8) + 2 ** 63).tolist() == [1, 1]
    assert (ember.ones(2, dtype=ember.int64) * 0x9E3779B97F4A7C15).tolist() == \
        [-7046029254386353131] * 2
    assert (ember.ones(2, dtype=ember.float16) + 2 ** 63).tolist() == [float("inf")] * 2
    assert (ember.ones(2) < 2 ** 63).tolist() == [True, True]


# --- __getstate__: the attributes, None without any ------------------------------------------

def test_getstate_is_the_attributes_or_none():
    x = ember.ones(2)
    assert x.__getstate__() is None
    x.a = 1
    assert x.__getstate__() == {"a": 1}
    assert ember.nn.Parameter(ember.ones(2)).__getstate__() is None
