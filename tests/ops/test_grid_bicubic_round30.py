"""Bicubic grid_sample on the arrays (ember/ops/_grid_cubic.py) against a NumPy loop reference
and the composite of ember ops it replaces; the padded-plane layout of _grid_kernels.py."""

import itertools
import math

import numpy as np
import pytest

import ember
from ember.ops.grid_sampling import _grid_sampler, _grid_sampler_backward, _sampled

PADDINGS = ("zeros", "border", "reflection")
CASES = list(itertools.product(range(3), (False, True)))


def _cubic(t, a=-0.75):
    """The cubic convolution weights of the taps at -1, 0, 1, 2 for the fraction t."""
    def near(s):
        return ((a + 2) * s - (a + 3)) * s * s + 1

    def far(s):
        return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _pad(i, size, padding, align_corners):
    """The pixel an integer tap ``i`` reads (None: a zero), by the padding rule."""
    if padding == 0:
        return i if 0 <= i < size else None
    if padding == 2 and size > 1:
        lo, hi = (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)
        span, c = hi - lo, abs(i - lo)
        flips, extra = math.floor(c / span), math.fmod(c, span)
        i = extra + lo if flips % 2 == 0 else span - extra + lo
    return int(min(max(i, 0), size - 1))


def _reference(x, grid, padding, align_corners):
    """Bicubic sampling of x (N, C, H, W) at grid (N, h, w, 2), one point at a time."""
    n, ch, hh, ww = x.shape
    out = np.zeros((n, ch) + grid.shape[1:3])
    for b, i, j in np.ndindex(n, *grid.shape[1:3]):
        src = []
        for g, size in zip(grid[b, i, j][::-1], (hh, ww)):
            src.append((g + 1) / 2 * (size - 1) if align_corners else ((g + 1) * size - 1) / 2)
        (fy, fx) = [math.floor(s) for s in src]
        wy, wx = _cubic(src[0] - fy), _cubic(src[1] - fx)
        for p, q in itertools.product(range(4), range(4)):
            r = _pad(fy - 1 + p, hh, padding, align_corners)
            c = _pad(fx - 1 + q, ww, padding, align_corners)
            if r is not None and c is not None:
                out[b, :, i, j] += wy[p] * wx[q] * x[b, :, r, c]
    return out


def _data(shape, seed=0, points=(3, 4)):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    g = rng.uniform(-1.5, 1.5, (shape[0],) + points + (2,))
    g.reshape(-1, 2)[:3] = [[-1, -1], [1, 1], [0, 0]]
    return x, g


def _run(x0, g0, go, p, ac, dtype=np.float64):
    x = ember.tensor(x0.astype(dtype), requires_grad=True)
    g = ember.tensor(g0.astype(dtype), requires_grad=True)
    y = _grid_sampler(x, g, 2, p, ac)
    y.backward(ember.tensor(go.astype(dtype)))
    return y.detach().numpy(), x.grad.numpy(), g.grad.numpy()


@pytest.mark.parametrize("shape", [(2, 2, 4, 5), (1, 3, 1, 1), (1, 2, 1, 3), (1, 1, 2, 1)])
@pytest.mark.parametrize("p,ac", CASES)
def test_bicubic_matches_the_numpy_reference(shape, p, ac):
    x0, g0 = _data(shape)
    go = np.random.default_rng(1).standard_normal(shape[:2] + g0.shape[1:3])
    y, gx, gg = _run(x0, g0, go, p, ac)
    np.testing.assert_allclose(y, _reference(x0, g0, p, ac), rtol=1e-12, atol=1e-12)
    # the input gradient is linear: the reference's transpose, one unit input at a time
    want_gx = np.zeros(x0.shape)
    for idx in np.ndindex(*x0.shape):
        unit = np.zeros(x0.shape)
        unit[idx] = 1
        want_gx[idx] = (_reference(unit, g0, p, ac) * go).sum()
    np.testing.assert_allclose(gx, want_gx, rtol=1e-12, atol=1e-12)
    # the grid gradient: central differences of the reference (the weights are C1 in t)
    want_gg, h = np.zeros(g0.shape), 1e-6
    for idx in np.ndindex(*g0.shape):
        up, down = g0.copy(), g0.copy()
        up[idx] += h
        down[idx] -= h
        want_gg[idx] = ((_reference(x0, up, p, ac) - _reference(x0, down, p, ac)) * go).sum() \
            / (2 * h)
    np.testing.assert_allclose(gg, want_gg, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("p,ac", CASES)
def test_bicubic_arrays_match_the_composite(p, ac, dtype):
    """Same roundings forward; gradients summed in another order; out-of-range, infinite and
    NaN points included (NaN where the composite gives NaN)."""
    x0, g0 = _data((2, 3, 5, 6), seed=2)
    g0.reshape(-1, 2)[3:6] = [[np.nan, 0.2], [5.0, -7.0], [0.3, np.inf]]
    go = np.random.default_rng(3).standard_normal((2, 3, 3, 4))
    y, gx, gg = _run(x0, g0, go, p, ac, dtype)
    xr = ember.tensor(x0.astype(dtype), requires_grad=True)
    gr = ember.tensor(g0.astype(dtype), requires_grad=True)
    yr = _sampled(xr, gr, "bicubic", PADDINGS[p], ac)
    yr.backward(ember.tensor(go.astype(dtype)))
    np.testing.assert_array_equal(y, yr.detach().numpy())
    # float32: the weights' slopes cancel (as in PyTorch's kernel): an absolute tolerance
    tol = 3e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(gx, xr.grad.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(gg, gr.grad.numpy(), rtol=tol, atol=tol)
    assert np.isnan(y).any() and not np.isnan(y[:, :, 0, :3]).any()


# PyTorch 2.13's values: (output, grid gradient) of the points (NaN, 0), (50, 0), (-3e5, -3e5)
FAR = {"zeros": ([np.nan, 0, 0], [np.nan, np.nan, 0, 0, 0, 0]),
       "border": ([np.nan, 7, 0], [np.nan, np.nan, 0, 6, 0, 0]),
       "reflection": ([np.nan, 5.5, 5.5], [np.nan, np.nan, -1.125, 6, 1.125, 6])}


@pytest.mark.parametrize("padding", PADDINGS)
def test_nan_and_far_points(padding):
    """A NaN point is NaN (its weights are); far outside is zero without padding; the padding
    rules read a NaN tap at pixel 0, so its NaN weights reach that pixel's gradient."""
    x = ember.arange(12.0).reshape(1, 1, 3, 4).requires_grad_()
    g = ember.tensor([[[[float("nan"), 0.0], [50.0, 0.0], [-3e5, -3e5]]]], requires_grad=True)
    y = ember.nn.functional.grid_sample(x, g, "bicubic", padding, align_corners=True)
    y.sum().backward()
    want_y, want_gg = FAR[padding]
    np.testing.assert_allclose(y.detach().numpy().ravel(), want_y, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(g.grad.numpy().ravel(), want_gg, rtol=1e-6, atol=1e-6)
    assert np.isnan(x.grad.numpy()[0, 0, 0, 0]) == (padding != "zeros")


def test_many_channels_one_count():
    x0, g0 = _data((1, 20, 3, 4), seed=4)
    go = np.random.default_rng(5).standard_normal((1, 20, 3, 4))
    gx, gg = _grid_sampler_backward(ember.tensor(go), ember.tensor(x0), ember.tensor(g0), 2, 2,
                                    False)
    _, want_gx, want_gg = _run(x0[:, :16], g0, go[:, :16], 2, False)
    np.testing.assert_allclose(gx.numpy()[:, :16], want_gx, rtol=1e-12, atol=1e-12)
    _, want_gx, _ = _run(x0[:, 16:], g0, go[:, 16:], 2, False)
    np.testing.assert_allclose(gx.numpy()[:, 16:], want_gx, rtol=1e-12, atol=1e-12)


def test_backward_op_refuses_3d_bicubic():
    x, g, go = ember.zeros(1, 1, 2, 2, 2), ember.zeros(1, 1, 1, 1, 3), ember.zeros(1, 1, 1, 1, 1)
    with pytest.raises(RuntimeError, match="2-D bicubic"):
        _grid_sampler_backward(go, x, g, 2, 0, False)


def test_first_order_bicubic_never_builds_the_composite(monkeypatch):
    import ember.ops.grid_sampling as gs

    def refuse(*args):
        raise AssertionError("the composite ran")
    monkeypatch.setattr(gs, "_sampled", refuse)
    x0, g0 = _data((2, 2, 4, 5))
    x = ember.tensor(x0, dtype=ember.float32, requires_grad=True)
    g = ember.tensor(g0, dtype=ember.float32, requires_grad=True)
    y = ember.nn.functional.grid_sample(x, g, "bicubic", "reflection", align_corners=False)
    assert y.grad_fn.name() == "GridSampler2DBackward0"
    y.sum().backward()
    assert x.grad.shape == x.shape and g.grad.shape == g.shape


def test_bicubic_double_backward_goes_through_the_composite():
    x0, g0 = _data((1, 2, 4, 5), seed=6)
    x, g = ember.tensor(x0, requires_grad=True), ember.tensor(g0, requires_grad=True)
    y = ember.nn.functional.grid_sample(x, g, "bicubic", "border", align_corners=False)
    gx, gg = ember.autograd.grad((y * y).sum(), (x, g), create_graph=True)
    hx, hg = ember.autograd.grad(gx.sum() + gg.sum(), (x, g))
    xr, gr = ember.tensor(x0, requires_grad=True), ember.tensor(g0, requires_grad=True)
    yr = _sampled(xr, gr, "bicubic", "border", False)
    gxr, ggr = ember.autograd.grad((yr * yr).sum(), (xr, gr), create_graph=True)
    hxr, hgr = ember.autograd.grad(gxr.sum() + ggr.sum(), (xr, gr))
    for a, b in ((gx, gxr), (gg, ggr), (hx, hxr), (hg, hgr)):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12,
                                   atol=1e-12)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_empty_inputs(mode):
    for xs, gs in (((0, 3, 4, 5), (0, 3, 2, 2)), ((2, 0, 4, 5), (2, 3, 2, 2)),
                   ((2, 3, 4, 5), (2, 0, 3, 2)), ((2, 20, 4, 5), (2, 0, 3, 2))):
        x, g = ember.randn(*xs, requires_grad=True), ember.randn(*gs, requires_grad=True)
        y = ember.nn.functional.grid_sample(x, g, mode, align_corners=False)
        y.sum().backward()
        assert tuple(y.shape) == xs[:2] + gs[1:3] and y.is_contiguous()
        assert x.grad.shape == x.shape and g.grad.shape == g.shape


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("nd,m", [(2, 0), (2, 1), (2, 2), (3, 0), (3, 1)])
@pytest.mark.parametrize("p,ac", CASES)
def test_16_bit_on_the_arrays_round_as_the_composite(dtype, nd, m, p, ac):
    """16-bit sampling runs on the arrays in its own dtype, step by step as the composite (and
    PyTorch's CPU kernel): the same values; the gradients near the composite's."""
    shape, points = ((2, 3, 5, 6), (3, 4)) if nd == 2 else ((1, 2, 3, 4, 5), (2, 3, 2))
    rng = np.random.default_rng(7)
    dt = getattr(ember, dtype)
    x0 = ember.tensor(rng.standard_normal(shape), dtype=dt)
    g0 = ember.tensor(rng.uniform(-1.3, 1.3, (shape[0],) + points + (nd,)), dtype=dt)
    go = ember.tensor(rng.standard_normal(shape[:2] + points), dtype=dt)
    x, g = x0.clone().requires_grad_(), g0.clone().requires_grad_()
    y = _grid_sampler(x, g, m, p, ac)
    y.backward(go)
    xr, gr = x0.clone().requires_grad_(), g0.clone().requires_grad_()
    yr = _sampled(xr, gr, ("bilinear", "nearest", "bicubic")[m], PADDINGS[p], ac)
    yr.backward(go)
    assert y.dtype == dt and x.grad.dtype == dt and g.grad.dtype == dt
    np.testing.assert_array_equal(y.detach().float().numpy(), yr.detach().float().numpy())
    # (bicubic grid gradients: the weights' slopes cancel, to a few 16-bit roundings of the
    # largest, in PyTorch's kernel too)
    tol = 3e-2 if dtype == "bfloat16" else 4e-3
    for a, b in ((x.grad, xr.grad), (g.grad, gr.grad)):
        a, b = a.float().numpy(), b.float().numpy()
        np.testing.assert_allclose(a, b, rtol=tol, atol=3 * tol * max(1.0, np.abs(b).max()))


@pytest.mark.parametrize("mode", ["nearest", "bicubic"])
def test_16_bit_wide_inputs_read_their_own_row(mode):
    """bfloat16 rounds pixel coordinates past 256 (the last pixel 299 to 300): a tap still
    reads its own row, the edge pixel or a zero, never the next row's first pixel."""
    x = ember.zeros(1, 1, 2, 300, dtype=ember.bfloat16)
    x[0, 0, 0, 280:] = 1.0
    x[0, 0, 1, :10] = 100.0                  # (the next row: must not leak)
    g = ember.tensor([[[[0.999, -1.0], [0.999, -0.99], [1.0, -1.0]]]], dtype=ember.bfloat16)
    for padding in PADDINGS:
        y = ember.nn.functional.grid_sample(x, g, mode, padding, align_corners=True)
        assert (y.float().numpy() <= 1.5).all(), padding


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("width", [300, 301, 2049])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_16_bit_wide_composite_samples_as_the_arrays(mode, width, dtype):
    """Past 256 (bfloat16) or 2048 (float16) pixels the dtype holds neither every pixel index
    nor the scale: the composite (double backward's) rounds the scale and the bicubic taps as
    the arrays do, reads exact pixel indices, and raises no IndexError at the last pixel."""
    rng = np.random.default_rng(9)
    dt = getattr(ember, dtype)
    x = ember.tensor(rng.standard_normal((1, 2, 2, width)), dtype=dt)
    g = ember.tensor(rng.uniform(-1.02, 1.02, (1, 1, 200, 2)), dtype=dt)
    g[0, 0, :3, 0] = ember.tensor([1.0, 0.999, -1.0])
    for p, ac in CASES:
        want = _grid_sampler(x, g, ("bilinear", "nearest", "bicubic").index(mode), p, ac)
        got = _sampled(x, g, mode, PADDINGS[p], ac)
        np.testing.assert_array_equal(got.float().numpy(), want.float().numpy(), err_msg=(p, ac))


def test_16_bit_double_backward_of_a_wide_input():
    x = ember.randn(1, 2, 2, 300, dtype=ember.bfloat16, requires_grad=True)
    g = ember.tensor([[[[1.0, 1.0], [0.999, 0.5], [-1.0, -1.0]]]], dtype=ember.bfloat16,
                     requires_grad=True)
    for mode in ("bilinear", "bicubic"):
        for padding in PADDINGS:
            y = ember.nn.functional.grid_sample(x, g, mode, padding, align_corners=True)
            gx, gg = ember.autograd.grad((y * y).sum(), (x, g), create_graph=True)
            hx, hg = ember.autograd.grad(gx.float().sum() + gg.float().sum(), (x, g))
            assert hx.shape == x.shape and hg.shape == g.shape


def test_16_bit_bicubic_taps_round_in_the_dtype():
    """PyTorch 2.13 computes the taps around the point in the dtype: at pixel 262 of a
    bfloat16 row (t = 0) they are 260, 262, 264, 264, so the +-1 neighbours' slopes read
    zeros there and the grid's gradient is 0 (exact taps would give 0.75 * 2 * 149.5)."""
    x = ember.zeros(1, 1, 1, 300, dtype=ember.bfloat16)
    x[0, 0, 0, 261], x[0, 0, 0, 263] = -1.0, 1.0
    g = ember.tensor([[[[0.75390625, 0.0]]]], dtype=ember.bfloat16, requires_grad=True)
    y = ember.nn.functional.grid_sample(x, g, "bicubic", "zeros", align_corners=True)
    y.sum().backward()
    assert y.item() == 0 and g.grad.float().numpy().tolist() == [[[[0.0, 0.0]]]]


@pytest.mark.parametrize("mode", [0, 2])
def test_input_gradient_counts_are_bounded(monkeypatch, mode):
    """The input gradient is counted a block of channels at a time (an index of about
    _COUNT_ENTRIES entries, not corners x points x channels), the same sums in any block."""
    import ember.ops._grid_kernels as kernels
    x0, g0 = _data((2, 40, 6, 7), seed=10, points=(5, 6))
    go = ember.tensor(np.random.default_rng(11).standard_normal((2, 40, 5, 6)))
    args = (go, ember.tensor(x0), ember.tensor(g0), mode, 0, False)
    sizes, count = [], kernels.bincount

    def counting(xp, flat, *rest, **kw):
        sizes.append(flat.size)
        return count(xp, flat, *rest, **kw)
    monkeypatch.setattr(kernels, "bincount", counting)
    monkeypatch.setattr(kernels, "_COUNT_ENTRIES", 2000)
    gx, _ = _grid_sampler_backward(*args)
    corners = (4, 16)[mode // 2] * 2 * 30
    assert max(sizes) <= 2000 and len(sizes) == -(-40 // (2000 // corners))
    monkeypatch.setattr(kernels, "_COUNT_ENTRIES", 1)
    one, _ = _grid_sampler_backward(*args)
    monkeypatch.setattr(kernels, "_COUNT_ENTRIES", 10 ** 9)
    every, _ = _grid_sampler_backward(*args)
    np.testing.assert_array_equal(gx.numpy(), one.numpy())
    np.testing.assert_array_equal(gx.numpy(), every.numpy())
