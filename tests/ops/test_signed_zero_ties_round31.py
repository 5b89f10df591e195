"""Round 31: ties of 0. and -0. in clamp with number bounds keep ``input`` (as PyTorch),
NaN still propagates; NumPy scalars into integer tensors; rounding keeps the input's layout."""

import numpy as np
import pytest

import ember

A = [0.0, -0.0, 0.0, -0.0, 1.0, -2.0]
B = [-0.0, 0.0, 0.0, -0.0, 1.0, 3.0]
DTYPES = [ember.float32, ember.float64, ember.float16, ember.bfloat16]


def _signs(t):
    return np.signbit(t.float().numpy()).tolist()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["maximum", "minimum", "fmax", "fmin"])
def test_tensor_pairs_values_on_ties(name, dtype):
    # (which zero a tie of two tensors gives is NumPy's loop's pick, as PyTorch's vectorized
    # loop's: the other operand; PyTorch's scalar loop, on a few elements, keeps input)
    a = ember.tensor(A * 40, dtype=dtype)
    b = ember.tensor(B * 40, dtype=dtype)
    big = name in ("maximum", "fmax")
    expected = np.maximum(A * 40, B * 40) if big else np.minimum(A * 40, B * 40)
    assert getattr(ember, name)(a, b).float().numpy().tolist() == expected.tolist()


@pytest.mark.parametrize("dtype", DTYPES)
def test_clamp_zero_bounds_keep_input(dtype):
    a = ember.tensor(A[:4] * 20, dtype=dtype)
    want = np.signbit(A[:4] * 20).tolist()
    for bound in (0.0, -0.0):
        assert _signs(ember.clamp_min(a, bound)) == want
        assert _signs(ember.clamp_max(a, bound)) == want
        assert _signs(ember.clamp(a, bound, bound)) == want


def test_clamp_in_place_and_out_ties():
    a = ember.tensor([0.0, -0.0, 5.0])
    out = ember.empty(3)
    ember.clamp(a, -0.0, 0.0, out=out)
    assert _signs(out) == [False, True, False] and out.tolist() == [0.0, -0.0, 0.0]
    a.clamp_(min=-0.0)
    assert _signs(a) == [False, True, False]


def test_nan_handling_unchanged():
    nan = float("nan")
    x = ember.tensor([nan, 1.0, nan, -0.0, 2.0])
    y = ember.tensor([1.0, nan, nan, 0.0, -1.0])
    np.testing.assert_array_equal(ember.maximum(x, y).numpy(), [nan, nan, nan, -0.0, 2.0])
    np.testing.assert_array_equal(ember.minimum(x, y).numpy(), [nan, nan, nan, -0.0, -1.0])
    np.testing.assert_array_equal(ember.fmax(x, y).numpy(), [1.0, 1.0, nan, -0.0, 2.0])
    np.testing.assert_array_equal(ember.fmin(x, y).numpy(), [1.0, 1.0, nan, -0.0, -1.0])
    np.testing.assert_array_equal(ember.clamp(x, y).numpy(), [nan, nan, nan, -0.0, 2.0])
    np.testing.assert_array_equal(ember.clamp(x, 0.0, nan).numpy(), [nan] * 5)


def test_integer_and_broadcast_ties():
    a = ember.tensor([[3, -1], [2, 2]])
    assert ember.maximum(a, ember.tensor([2, 0])).tolist() == [[3, 0], [2, 2]]
    z = ember.tensor([[0.0], [-0.0]])
    r = ember.maximum(z, ember.tensor([-0.0, 0.0, 0.0]))
    assert r.tolist() == [[0.0] * 3, [0.0] * 3]


# --- NumPy scalars as setitem values and operands ---------------------------------------------

@pytest.mark.parametrize("value", [np.bool_(True), np.float32(2.5), np.float16(2.5),
                                   np.complex64(1 + 2j), np.longdouble(2)])
@pytest.mark.parametrize("dtype", [ember.int64, ember.float32, ember.bool])
def test_setitem_refuses_numpy_scalars_torch_refuses(value, dtype):
    x = ember.zeros(3, dtype=dtype)
    legacy = {ember.int64: "LongTensor", ember.float32: "FloatTensor",
              ember.bool: "BoolTensor"}[dtype]
    for key in (0, slice(0, 2), ..., ember.tensor([0])):
        with pytest.raises(TypeError, match=rf"^can't assign a numpy\.{type(value).__name__} "
                                            rf"to a torch\.{legacy}$"):
            x[key] = value
    assert x.tolist() == [0, 0, 0]


@pytest.mark.parametrize("value,expected", [(np.float64(2.5), 2), (np.int32(3), 3),
                                            (np.uint8(3), 3), (np.complex128(2 + 0j), 2)])
def test_setitem_takes_numpy_ints_and_python_subclasses(value, expected):
    x = ember.zeros(3, dtype=ember.float64 if type(value) is np.complex128 else ember.int64)
    x[0] = value
    x[1:] = value
    assert x.tolist() == [expected] * 3


def test_numpy_complex64_operand_is_its_real_part():
    v = np.complex64(1 + 2j)
    with pytest.warns(np.exceptions.ComplexWarning):
        r = ember.ones(2, dtype=ember.int64) * v
    assert r.dtype is ember.float32 and r.tolist() == [1.0, 1.0]
    with pytest.warns(np.exceptions.ComplexWarning):
        r = v + ember.ones(2, dtype=ember.complex64)
    assert r.dtype is ember.complex64 and r.tolist() == [2 + 0j, 2 + 0j]
    with pytest.warns(np.exceptions.ComplexWarning):
        r = ember.full((2,), v)
    assert r.dtype is ember.float32 and r.tolist() == [1.0, 1.0]
    with pytest.warns(np.exceptions.ComplexWarning):
        assert ember.zeros(2, dtype=ember.int64).fill_(v).tolist() == [1, 1]
    r = ember.ones(2, dtype=ember.int64) * np.complex128(1 + 2j)   # a Python complex: complex
    assert r.dtype is ember.complex64 and r.tolist() == [1 + 2j, 1 + 2j]


# --- integer rounding keeps the input's layout --------------------------------------------------

@pytest.mark.parametrize("name", ["floor", "ceil", "round", "trunc", "fix"])
@pytest.mark.parametrize("dtype", [ember.int64, ember.int32, ember.uint8])
def test_integer_rounding_copy_keeps_layout(name, dtype):
    base = ember.arange(24, dtype=dtype)
    for view, strides in ((base[:6].reshape(2, 3).t(), (1, 3)),
                          (base.reshape(2, 3, 4).permute(2, 0, 1), (1, 12, 4)),
                          (base.reshape(4, 6)[:, ::2].t(), (1, 3)), (base[::2], (1,))):
        r = getattr(ember, name)(view)
        assert r.stride() == strides and r.dtype is dtype
        assert r.tolist() == view.tolist() and r.data_ptr() != view.data_ptr()


def test_round_decimals_given_on_integers_raises():
    x = ember.tensor([1, 2])
    for d, kernel in ((0, "round_vml_cpu"), (1, "round_cpu")):
        with pytest.raises(NotImplementedError, match=f'"{kernel}" not implemented for \'Long\''):
            ember.round(x, decimals=d)
    assert ember.round(x).tolist() == [1, 2]
    y = ember.tensor([0.5, 1.5, 2.5], requires_grad=True)
    assert ember.round(y, decimals=0).grad_fn.name() == "RoundBackward1"
    assert ember.round(y).grad_fn.name() == "RoundBackward0"
    assert ember.round(y, decimals=0).tolist() == [0.0, 2.0, 2.0]
