"""Round 28 kernel paths: gelu's tanh approximation in place over the element-wise spans
(forward and fused backward), and softmax/log_softmax's row maxima taken with
``initial=-inf`` (NumPy's fast loop along a short last axis), each against float64 NumPy
references."""

import math

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.backend.cpu_kernels import _ELEMENTWISE_MIN, _ELEMENTWISE_SPAN
from ember.ops.activations_smooth import _gelu_tanh_form, _gelu_tanh_grad
from ember.ops.log_space import row_max

_K, _C = math.sqrt(2 / math.pi), 0.044715
_SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 2.0 ** -126,
                      3e38, -3e38, 1e20, -1e20, -12.0, 12.0, -30.0], np.float32)


def _reference(x):
    """gelu's tanh approximation and its derivative in float64."""
    x = x.astype(np.float64)
    t = np.tanh(_K * (x + _C * x ** 3))
    return 0.5 * x * (1 + t), 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _K * (1 + 3 * _C * x * x)


def _values(n, seed=0):
    x = (np.random.default_rng(seed).standard_normal(n) * 4).astype(np.float32)
    for at in (0, _ELEMENTWISE_SPAN - 1, _ELEMENTWISE_SPAN, n - _SPECIALS.size):
        if 0 <= at and at + _SPECIALS.size <= n:
            x[at:at + _SPECIALS.size] = _SPECIALS
    return x


@pytest.mark.parametrize("n", [1, 15, _ELEMENTWISE_MIN + 1, 2 * _ELEMENTWISE_SPAN + 7])
def test_gelu_tanh_over_the_spans_matches_float64(n):
    x = _values(n)
    g = np.linspace(-2, 3, n, dtype=np.float32)
    t = ember.tensor(x, requires_grad=True)
    y = F.gelu(t, approximate="tanh")
    y.backward(ember.tensor(g))
    y, d = y.detach().numpy(), t.grad.numpy()
    assert y.dtype == d.dtype == np.float32 and y.shape == d.shape == (n,)
    finite = np.abs(x) < 1e10          # (x^2 overflows float32 beyond: d is nan, as PyTorch's)
    with np.errstate(all="ignore"):
        ry, rd = _reference(x[finite])
    assert np.all(np.abs(y[finite] - ry) <= 2.5e-7 * np.maximum(1, np.abs(x[finite])))
    assert np.all(np.abs(d[finite] - g[finite] * rd) <= 2e-6 * np.maximum(np.abs(g[finite]), 1))
    # the spans give the values of the kernels run over the whole array at once
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(y.view(np.uint32), _gelu_tanh_form(np, x).view(np.uint32))
        np.testing.assert_array_equal(d.view(np.uint32),
                                      _gelu_tanh_grad(np, g, x).view(np.uint32))


def test_gelu_tanh_specials_as_pytorch():
    # values PyTorch's float32 kernel gives: the product with x taken after halving (no
    # overflow at 3e38), -0.0 kept, nan at -inf and nan, 0 (not -0) gradients in the far
    # lower tail
    x = ember.tensor([0.0, -0.0, 3e38, -3e38, np.inf, -np.inf, np.nan, -30.0, 30.0],
                     requires_grad=True)
    y = F.gelu(x, approximate="tanh")
    y.backward(ember.ones_like(y))
    yv, dv = y.detach().numpy(), x.grad.numpy()
    np.testing.assert_array_equal(yv[[0, 2, 4, 8]], np.float32([0, 3e38, np.inf, 30]))
    assert np.signbit(yv[[1, 3, 7]]).all() and (yv[[1, 3, 7]] == 0).all()
    assert np.isnan(yv[[5, 6]]).all()
    np.testing.assert_array_equal(dv[[0, 1, 7, 8]], np.float32([0.5, 0.5, 0, 1]))
    assert not np.signbit(dv[7])


@pytest.mark.parametrize("dtype", [ember.float64, ember.float16, ember.bfloat16])
def test_gelu_tanh_other_dtypes_and_zero_dim(dtype):
    x = np.float32([-3.5, -1.0, -0.25, 0.0, 0.5, 2.0, 7.0])
    t = ember.tensor(x, dtype=dtype, requires_grad=True)
    y = F.gelu(t, approximate="tanh")
    y.backward(ember.ones_like(y))
    ry, rd = _reference(t.detach().double().numpy())
    tol = 1e-12 if dtype is ember.float64 else 1e-2
    assert y.dtype == t.grad.dtype == dtype
    np.testing.assert_allclose(y.double().detach().numpy(), ry, rtol=tol, atol=tol)
    np.testing.assert_allclose(t.grad.double().numpy(), rd, rtol=tol, atol=tol)
    z = ember.tensor(-0.75, dtype=dtype, requires_grad=True)
    F.gelu(z, approximate="tanh").backward()
    assert z.grad.shape == () and abs(z.grad.item() - _reference(np.float64([-0.75]))[1][0]) < tol


def test_row_max_matches_max_with_nan_and_inf_rows():
    a = np.random.default_rng(3).standard_normal((4096, 64)).astype(np.float32)
    a[1, 5] = np.nan
    a[2] = -np.inf
    a[3, 7] = np.inf
    for d in (0, 1):
        got = row_max(np, a, d)
        np.testing.assert_array_equal(got, a.max(axis=d, keepdims=True))
    assert np.isnan(row_max(np, a, 1)[1, 0]) and row_max(np, a, 1)[2, 0] == -np.inf


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_softmax_rows_match_float64(fn):
    x = (np.random.default_rng(4).standard_normal((16, 4, 64, 64)) * 8).astype(np.float32)
    x[0, 0, 0, :] = -np.inf              # a row of -inf: nan throughout, as PyTorch
    x[0, 0, 1, 3] = np.nan               # a row with a nan: nan throughout
    x[0, 0, 2, :] = 1e30                 # a row far from 0: uniform
    got = getattr(ember, fn)(ember.tensor(x), -1).numpy()
    w = x.astype(np.float64)
    with np.errstate(all="ignore"):
        s = w - w.max(-1, keepdims=True)
        ref = s - np.log(np.exp(s).sum(-1, keepdims=True))
    ref = np.exp(ref) if fn == "softmax" else ref
    assert np.isnan(got[0, 0, :2]).all()
    np.testing.assert_allclose(got[0, 0, 2], ref[0, 0, 2], rtol=1e-6)
    np.testing.assert_allclose(got.reshape(-1, 64)[3:], ref.reshape(-1, 64)[3:], rtol=1e-5,
                               atol=1e-6)
