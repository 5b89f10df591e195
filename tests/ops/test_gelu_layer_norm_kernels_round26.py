"""Round 26 kernel paths: gelu's float32 forward (x + |x| taken as x - (0 - |x|), so gelu(-0.0)
is -0.0 as in PyTorch) over the element-wise spans, and layer_norm's in-place steps (the input
gradient planed straight into the array that becomes .grad, the bias added by broadcasting
for rows of 64 or more), each against float64 NumPy/SciPy references."""

import numpy as np
import pytest
import scipy.special as sp

import ember
import ember.nn.functional as F
from ember.backend.cpu_kernels import _ELEMENTWISE_MIN, _ELEMENTWISE_SPAN
from ember.ops.activations_smooth import _gelu_erf_form, _gelu_erf_grad

_SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 1e-45, -1e-45,
                      2.0 ** -126, -(2.0 ** -126), 3e38, -3e38, -12.0, 12.0], np.float32)


def _gelu_reference(x):
    """gelu and its derivative in float64."""
    x = x.astype(np.float64)
    return x * sp.ndtr(x), sp.ndtr(x) + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi)


def _values(n, seed=0):
    """``n`` float32 values over gelu's range, the specials placed at span boundaries."""
    x = (np.random.default_rng(seed).standard_normal(n) * 4).astype(np.float32)
    for at in (0, _ELEMENTWISE_SPAN - 1, _ELEMENTWISE_SPAN, 2 * _ELEMENTWISE_SPAN - 3, n - 15):
        if 0 <= at and at + _SPECIALS.size <= n:
            x[at:at + _SPECIALS.size] = _SPECIALS
    return x


def _check_against_reference(x, y, d, g):
    # (x + |x| overflows past 1.7e38: gelu(3e38) is inf, as PyTorch's float32 gelu gives)
    finite = np.abs(x) < 1e38
    ry, rd = _gelu_reference(x[finite])
    y, d, g = y[finite].astype(np.float64), d[finite].astype(np.float64), g[finite]
    # within one float32 ulp of max(1, |x|), as the round-25 kernels are
    assert np.all(np.abs(y - ry) <= 1e-7 * np.maximum(1, np.abs(x[finite])))
    assert np.all(np.abs(d - g * rd) <= 2.5e-7 * np.abs(g))
    # the sign of every zero and of every other result is the sign of x (x Phi(x), Phi >= 0)
    nonzero = y != 0
    assert np.array_equal(np.signbit(y[nonzero]), np.signbit(x[finite][nonzero]))


@pytest.mark.parametrize("n", [0, 1, 15, _ELEMENTWISE_MIN - 1, _ELEMENTWISE_MIN,
                               _ELEMENTWISE_MIN + 1, 2 * _ELEMENTWISE_SPAN + 7, 300_001])
def test_gelu_over_the_spans_matches_float64(n):
    x = _values(n)
    g = np.linspace(-2, 3, n, dtype=np.float32)
    t = ember.tensor(x, requires_grad=True)
    y = F.gelu(t)
    y.backward(ember.tensor(g))
    y, d = y.detach().numpy(), t.grad.numpy()
    assert y.dtype == d.dtype == np.float32 and y.shape == d.shape == (n,)
    _check_against_reference(x, y, d, g)
    # the spans give the values of the kernels run over the whole array at once
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(y.view(np.uint32), _gelu_erf_form(np, x).view(np.uint32))
        np.testing.assert_array_equal(d.view(np.uint32),
                                      _gelu_erf_grad(np, g, x).view(np.uint32))
    # nan where x is nan or -inf (PyTorch's x * (1 + erf) is -inf * 0 there)
    special = ~np.isfinite(x)
    assert np.isnan(y[special & ~(x == np.inf)]).all()


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16])
@pytest.mark.parametrize("n", [1, 5, 70_000])
def test_gelu_keeps_the_sign_of_zero(dtype, n):
    # PyTorch: gelu(-0.0) is -0.0, gelu(0.0) is 0.0, in every float dtype and every length
    x = ember.zeros(n, dtype=dtype)
    x[::2] = -0.0
    y = F.gelu(x)
    assert y.dtype == dtype and (y == 0).all()
    expected = np.zeros(n, bool)
    expected[::2] = True
    np.testing.assert_array_equal(ember.signbit(y).numpy(), expected)
    assert ember.signbit(F.gelu(ember.tensor(-0.0, dtype=dtype))).item()
    assert not ember.signbit(F.gelu(ember.tensor(0.0, dtype=dtype))).item()


def test_gelu_negative_subnormals_stay_negative_halves():
    x = -(np.float32(2.0) ** -np.arange(126, 150, dtype=np.float32))      # the subnormals
    y = F.gelu(ember.tensor(x)).numpy()
    np.testing.assert_array_equal(y, (x.astype(np.float64) / 2).astype(np.float32))
    assert np.signbit(y).all()


@pytest.mark.parametrize("make", [lambda b: b.mT, lambda b: b[:, ::3], lambda b: b[::2]])
def test_gelu_non_contiguous_inputs_give_the_contiguous_values(make):
    base = ember.tensor(_values(1100 * 96, seed=1).reshape(1100, 96))
    x = make(base).requires_grad_()
    dense = x.detach().contiguous().requires_grad_()
    g = ember.randn(*x.shape)
    for t in (x, dense):
        F.gelu(t).backward(g)
    np.testing.assert_array_equal(F.gelu(x).detach().numpy().view(np.uint32),
                                  F.gelu(dense).detach().numpy().view(np.uint32))
    np.testing.assert_array_equal(x.grad.numpy().view(np.uint32),
                                  dense.grad.numpy().view(np.uint32))


# --- layer_norm -------------------------------------------------------------------------------

def _layer_norm_reference(x, w, b, g, eps=1e-5):
    """Output, mean, rstd and the (input, weight, bias) gradients in float64 over the last
    axis; ``w`` and ``b`` may be None."""
    k = x.shape[-1]
    w1 = np.ones(k) if w is None else w
    mean = x.mean(-1, keepdims=True)
    xc = x - mean
    rstd = 1 / np.sqrt((xc * xc).mean(-1, keepdims=True) + eps)
    xhat = xc * rstd
    gw = g * w1
    gx = rstd * (gw - gw.mean(-1, keepdims=True) - xhat * (gw * xhat).mean(-1, keepdims=True))
    lead = tuple(range(x.ndim - 1))
    y = xhat * w1 + (0 if b is None else b)
    return y, mean, rstd, gx, (g * xhat).sum(lead), g.sum(lead)


# rows of fewer and of 64 or more values; planes under 4096 values, up to 2**17, and above
@pytest.mark.parametrize("shape", [(3, 5), (2, 3, 70), (50, 33), (200, 33), (1024, 128),
                                   (33, 64), (16, 63, 130), (300, 500), (5000, 31), (0, 128),
                                   (4, 0, 96)])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_layer_norm_matches_float64(shape, affine):
    rng = np.random.default_rng(sum(shape))
    k = shape[-1]
    x = (rng.standard_normal(shape) * 3 + 50).astype(np.float32)          # an offset mean
    g = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal(k).astype(np.float32) if affine != "none" else None
    b = rng.standard_normal(k).astype(np.float32) if affine == "both" else None
    xt = ember.tensor(x, requires_grad=True)
    wt = None if w is None else ember.tensor(w, requires_grad=True)
    bt = None if b is None else ember.tensor(b, requires_grad=True)
    y, mean, rstd = ember.native_layer_norm(xt, (k,), wt, bt, 1e-5)
    y.backward(ember.tensor(g))
    ref = _layer_norm_reference(*(None if a is None else a.astype(np.float64)
                                  for a in (x, w, b, g)))
    got = [y, mean, rstd, xt.grad, None if wt is None else wt.grad,
           None if bt is None else bt.grad]
    for have, want in zip(got, ref):
        if have is None:
            continue
        assert have.dtype == ember.float32 and tuple(have.shape) == want.shape
        np.testing.assert_allclose(have.detach().numpy(), want, rtol=2e-5,
                                   atol=2e-5 * np.abs(want).max(initial=1.0))
    data = xt.grad._data               # the input gradient became .grad without a copy
    # (an empty one lies over a one-element buffer: _storage_place.born_row_major)
    assert data.flags.c_contiguous and (not data.size or data.base is None and data.flags.owndata)


def test_layer_norm_non_contiguous_input_and_gradient():
    rng = np.random.default_rng(3)
    base = (rng.standard_normal((128, 300)) * 2 - 7).astype(np.float32)
    gbase = rng.standard_normal((300, 128)).astype(np.float32)
    w, b = rng.standard_normal(128).astype(np.float32), rng.standard_normal(128).astype(np.float32)
    xt = ember.tensor(base).mT.requires_grad_()                  # (300, 128), transposed
    wt, bt = ember.tensor(w, requires_grad=True), ember.tensor(b, requires_grad=True)
    y = F.layer_norm(xt, (128,), wt, bt)
    y.backward(ember.tensor(gbase.T.copy()).mT)                  # a transposed view
    x64 = base.T.astype(np.float64)
    ref = _layer_norm_reference(x64, w.astype(np.float64), b.astype(np.float64),
                                gbase.astype(np.float64))
    for have, want in zip((y, xt.grad, wt.grad, bt.grad), (ref[0], *ref[3:])):
        np.testing.assert_allclose(have.detach().numpy(), want, rtol=2e-5,
                                   atol=2e-5 * np.abs(want).max())


def test_layer_norm_inf_and_nan_rows_stay_in_their_rows():
    x = np.random.default_rng(4).standard_normal((6, 96)).astype(np.float32)
    x[1, 5], x[3, 0] = np.nan, np.inf
    xt = ember.tensor(x, requires_grad=True)
    ln = ember.nn.LayerNorm(96)
    ln(xt).backward(ember.ones(6, 96))
    y = ln(xt).detach().numpy()
    bad = np.zeros(6, bool)
    bad[[1, 3]] = True
    assert np.isnan(y[bad]).all() and np.isfinite(y[~bad]).all()
    assert np.isnan(xt.grad.numpy()[bad]).all() and np.isfinite(xt.grad.numpy()[~bad]).all()
    ref = _layer_norm_reference(x[~bad].astype(np.float64), None, None, np.ones((4, 96)))
    np.testing.assert_allclose(y[~bad], ref[0], rtol=2e-5, atol=2e-5)
