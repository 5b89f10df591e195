"""Round 29: float32 lerp rounds its multiply-add once, as PyTorch's CPU kernel (fused
multiply-add) does; the reference is the float64 value (exact product) rounded to float32.
addcdiv keeps its two roundings (addcmul and add with alpha too: see fused.py)."""

import numpy as np
import pytest

import ember
from ember.backend.fused import _SPAN, fma

F32, F64 = np.float32, np.float64


def _fused(a, b, c):
    return (np.asarray(a, F64) * np.asarray(b, F64) + np.asarray(c, F64)).astype(F32)


def _arrays(n, seed=0, count=3):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n).astype(F32) for _ in range(count)]


def _bits(t):
    return np.asarray(t.detach().numpy() if isinstance(t, ember.Tensor) else t).view(np.int32)


# sizes below and above the span path (2 * _SPAN), and 0-d
@pytest.mark.parametrize("n", [1, 37, 2 * _SPAN + 5])
def test_fma_kernel_rounds_once(n):
    a, b, c = _arrays(n)
    got = fma(np, a, b, c)
    assert got.dtype == F32 and got.shape == (n,)
    np.testing.assert_array_equal(_bits(got), _bits(_fused(a, b, c)))
    # the fused value differs from NumPy's two roundings somewhere (the test can fail)
    if n > 1:
        assert (_bits(a * b + c) != _bits(got)).any()


def test_fma_kernel_scalars_broadcast_and_other_dtypes():
    a, b, c = _arrays(2 * _SPAN + 3)
    w = np.asarray(0.3, F32)
    np.testing.assert_array_equal(_bits(fma(np, w, b, c)), _bits(_fused(w, b, c)))
    np.testing.assert_array_equal(_bits(fma(np, b, 1.7, c)), _bits(_fused(b, F32(1.7), c)))
    m = a[:12].reshape(3, 4)
    np.testing.assert_array_equal(_bits(fma(np, m, b[:4], c[:3, None])),
                                  _bits(_fused(m, b[:4], c[:3, None])))
    sliced = fma(np, a[::2], b[::2], c[::2])         # not contiguous: one whole-array call
    np.testing.assert_array_equal(_bits(sliced), _bits(_fused(a[::2], b[::2], c[::2])))
    x = a.astype(F64)                                 # float64: NumPy's own rounding
    np.testing.assert_array_equal(fma(np, x, x, x), x * x + x)


@pytest.mark.parametrize("weight", [0.3, 0.7, 0.99, 0.5, -0.2, 1.5])
def test_lerp_scalar_weight(weight):
    x, y, _ = _arrays(4097, seed=1)
    w = F32(weight)
    d = y - x
    want = _fused(w, d, x) if abs(weight) < 0.5 else _fused(w - F32(1), d, y)
    got = ember.lerp(ember.tensor(x), ember.tensor(y), weight)
    np.testing.assert_array_equal(_bits(got), _bits(want))
    t = ember.tensor(x)
    t.lerp_(ember.tensor(y), weight)
    np.testing.assert_array_equal(_bits(t), _bits(want))


def test_lerp_tensor_weight_and_ends_exact():
    x, y, z = _arrays(3001, seed=2)
    w = (np.abs(z) % 1).astype(F32)
    w[:4] = [0.0, 1.0, 0.5, np.nan]
    d = y - x
    want = np.where(np.abs(w) < 0.5, _fused(w, d, x), _fused(w - F32(1), d, y))
    got = ember.lerp(ember.tensor(x), ember.tensor(y), ember.tensor(w))
    np.testing.assert_array_equal(_bits(got), _bits(want))
    out = got.numpy()
    assert out[0] == x[0] and out[1] == y[1] and np.isnan(out[3])


def test_addcdiv_keeps_two_roundings():
    x, y, z = _arrays(3001, seed=4)
    got = ember.addcdiv(ember.tensor(x), ember.tensor(y), ember.tensor(z), value=0.3)
    np.testing.assert_array_equal(_bits(got), _bits(x + F32(0.3) * y / z))


def test_integer_and_complex_alpha_unchanged():
    i = ember.tensor([1, 2, 3])
    assert ember.add(i, i, alpha=3).tolist() == [4, 8, 12]
    c = ember.tensor([1 + 2j, -3j])
    assert ember.add(c, c, alpha=2).tolist() == [3 + 6j, -9j]
