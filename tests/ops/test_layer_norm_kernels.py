"""Layer norm's array kernels on inputs larger than the OpInfo samples (short, medium and long
rows, no rows), the planes they spread per-row and per-column vectors on, and the array
backward against the composed one."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.ops.normalization import _spread


def _reference(x, w, b, g, eps=1e-5):
    """Output and (input, weight, bias) gradients in float64, over the last axis."""
    xc = x - x.mean(-1, keepdims=True)
    invstd = 1 / np.sqrt((xc * xc).mean(-1, keepdims=True) + eps)
    xhat = xc * invstd
    gw = g * w
    gx = invstd * (gw - gw.mean(-1, keepdims=True)
                   - xhat * (gw * xhat).mean(-1, keepdims=True))
    lead = tuple(range(x.ndim - 1))
    return xhat * w + b, gx, (g * xhat).sum(lead), g.sum(lead)


@pytest.mark.parametrize("shape", [(16, 64, 128), (512, 16), (4, 4096), (0, 8)])
def test_layer_norm_matches_float64(shape):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3 + 5).astype(np.float32)    # an offset mean
    w, b = rng.standard_normal(shape[-1]), rng.standard_normal(shape[-1])
    g = rng.standard_normal(shape).astype(np.float32)
    xt = ember.tensor(x, requires_grad=True)
    wt = ember.tensor(w.astype(np.float32), requires_grad=True)
    bt = ember.tensor(b.astype(np.float32), requires_grad=True)
    y = F.layer_norm(xt, shape[-1:], wt, bt)
    y.backward(ember.tensor(g))
    ref = _reference(x.astype(np.float64), w, b, g.astype(np.float64))
    for got, want in zip((y, xt.grad, wt.grad, bt.grad), ref):
        assert got.dtype == ember.float32 and got.shape == want.shape
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-4,
                                   atol=1e-4 * np.abs(want).max(initial=1.0))


@pytest.mark.parametrize("affine", [(True, True), (True, False), (False, False)])
def test_layer_norm_array_backward_matches_the_composed_one(affine):
    rng = np.random.default_rng(1)
    x = ember.tensor(rng.standard_normal((6, 5, 24)), requires_grad=True)
    w = ember.tensor(rng.standard_normal(24), requires_grad=True) if affine[0] else None
    b = ember.tensor(rng.standard_normal(24), requires_grad=True) if affine[1] else None
    g = ember.tensor(rng.standard_normal((6, 5, 24)))
    y = F.layer_norm(x, (24,), w, b)
    wanted = [t for t in (x, w, b) if t is not None]
    fast = ember.autograd.grad(y, wanted, g, retain_graph=True)
    # create_graph: the derivative composed of ember ops (so that it is differentiable)
    composed = ember.autograd.grad(y, wanted, g, create_graph=True)
    for a, c in zip(fast, composed):
        np.testing.assert_allclose(a.numpy(), c.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_layer_norm_without_weight_is_the_centered_input_times_invstd():
    # no weight: each output is one rounding of xc * invstd, as before the planes
    x = np.random.default_rng(2).standard_normal((7, 33)).astype(np.float32)
    y, mean, invstd = ember.native_layer_norm(ember.tensor(x), (33,), None, None, 1e-5)
    want = (x - mean.numpy()) * invstd.numpy()
    assert np.array_equal(y.numpy(), want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_spread_gives_each_product_exactly(dtype):
    rng = np.random.default_rng(3)
    col = rng.standard_normal(373).astype(dtype)        # 373 x 11: a plane (>= 2**12)
    row = rng.standard_normal(11).astype(dtype)
    col[[3, 4, 5]] = [np.inf, -np.inf, np.nan]
    row[2] = 0.0
    got = _spread(np, (373, 11), col, row)
    with np.errstate(invalid="ignore"):
        want = np.multiply.outer(col, row)
    assert got.dtype == dtype and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)      # (NaN where inf * 0 or NaN, as NumPy)
    np.testing.assert_array_equal(_spread(np, (373, 11), col), np.repeat(col[:, None], 11, 1))
    np.testing.assert_array_equal(_spread(np, (373, 11), row=row), np.tile(row, (373, 1)))
    assert _spread(np, (0, 11), col[:0], row).shape == (0, 11)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_spread_broadcasts_below_its_plane_size(dtype):
    # a small plane costs more array calls than broadcasting saves: the broadcasting
    # operand, with the same values as the plane
    rng = np.random.default_rng(3)
    col, row = rng.standard_normal(37).astype(dtype), rng.standard_normal(11).astype(dtype)
    col[[3, 4, 5]] = [np.inf, -np.inf, np.nan]
    assert _spread(np, (37, 11), col).shape == (37, 1)
    assert _spread(np, (37, 11), row=row) is row
    got = _spread(np, (37, 11), col, row)
    with np.errstate(invalid="ignore"):
        want = np.multiply.outer(col, row)
    assert got.dtype == dtype and got.shape == (37, 11)
    np.testing.assert_array_equal(got, want)


def test_spread_broadcasts_past_its_plane_size():
    # large planes: the broadcasting operand (OpenBLAS would thread the product)
    col, row = np.arange(1024.0), np.arange(1.0, 257.0)
    assert _spread(np, (1024, 256), col).shape == (1024, 1)
    assert _spread(np, (1024, 256), row=row) is row
    np.testing.assert_array_equal(_spread(np, (1024, 256), col, row), np.outer(col, row))


@pytest.mark.parametrize("shape", [(16, 64, 128), (64, 64, 128), (2, 3, 40000)])
def test_layer_norm_planes_and_broadcasts_agree(shape):
    # the same rows normalized on planes (a small input) and broadcasts (a large one)
    rng = np.random.default_rng(4)
    x = rng.standard_normal(shape)
    w, b = rng.standard_normal(shape[-1]), rng.standard_normal(shape[-1])
    small = F.layer_norm(ember.tensor(x[:1, :2]), shape[-1:], ember.tensor(w),
                         ember.tensor(b)).numpy()
    large = F.layer_norm(ember.tensor(x), shape[-1:], ember.tensor(w), ember.tensor(b)).numpy()
    np.testing.assert_allclose(large[:1, :2], small, rtol=1e-13, atol=1e-13)
