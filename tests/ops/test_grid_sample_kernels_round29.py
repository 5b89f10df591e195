"""grid_sample's array kernels (ember/ops/_grid_kernels.py) against the composite of ember ops
they replace, and ``_grid_sampler_backward`` against a NumPy reference."""

import itertools

import numpy as np
import pytest

import ember
from ember.ops.grid_sampling import (_INTERPOLATION, _PADDING, _grid_sampler,
                                     _grid_sampler_backward, _sampled)
from tests.ops.opdb.resampling import _grid_sampler_backward_ref

CASES = list(itertools.product((2, 3), (0, 1), (0, 1, 2), (False, True)))


def _data(nd, ch, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, ch) + ((5, 6) if nd == 2 else (3, 4, 5))).astype(dtype)
    g = rng.uniform(-1.4, 1.4, (2, 4, 3, nd) if nd == 2 else (2, 2, 3, 2, nd)).astype(dtype)
    g.reshape(-1, nd)[:3] = [[-1] * nd, [1] * nd, [0] * nd]     # edges and centre, exactly
    return x, g


def _composite(x0, g0, go, m, p, ac):
    x, g = ember.tensor(x0, requires_grad=True), ember.tensor(g0, requires_grad=True)
    y = _sampled(x, g, _INTERPOLATION[m], _PADDING[p], ac)
    y.backward(go)
    return y.detach().numpy(), x.grad.numpy(), g.grad.numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nd,m,p,ac", CASES)
def test_kernels_match_the_composite(nd, m, p, ac, dtype):
    x0, g0 = _data(nd, 3, dtype)
    x, g = ember.tensor(x0, requires_grad=True), ember.tensor(g0, requires_grad=True)
    y = _grid_sampler(x, g, m, p, ac)
    go = ember.tensor(np.random.default_rng(1).standard_normal(tuple(y.shape)).astype(dtype))
    y.backward(go)
    want_y, want_gx, want_gg = _composite(x0, g0, go, m, p, ac)
    assert y.grad_fn.name() == f"GridSampler{nd}DBackward0"
    np.testing.assert_array_equal(y.detach().numpy(), want_y)      # the same roundings
    tol = 2e-6 if dtype == np.float32 else 1e-13        # (gradients: summed in another order)
    np.testing.assert_allclose(x.grad.numpy(), want_gx, rtol=tol, atol=tol)
    np.testing.assert_allclose(g.grad.numpy(), want_gg, rtol=tol, atol=tol)
    if m == 1:
        assert not g.grad.numpy().any()


@pytest.mark.parametrize("m,p", [(0, 0), (0, 2), (1, 1)])
def test_many_channels_scatter_in_one_count(m, p):
    """Over 16 channels the input gradient takes one weighted count, not one per channel."""
    x0, g0 = _data(2, 20, np.float64, seed=2)
    go = np.random.default_rng(3).standard_normal((2, 20, 4, 3))
    gx, gg = _grid_sampler_backward(ember.tensor(go), ember.tensor(x0), ember.tensor(g0), m, p,
                                    True)
    _, want_gx, want_gg = _composite(x0, g0, ember.tensor(go), m, p, True)
    np.testing.assert_allclose(gx.numpy(), want_gx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gg.numpy(), want_gg, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("nd,m,p,ac", [c for c in CASES if c[2] != 2])
def test_backward_op_matches_numpy(nd, m, p, ac):
    x0, g0 = _data(nd, 2, np.float64, seed=4)
    go = np.random.default_rng(5).standard_normal((2, 2) + g0.shape[1:-1])
    gx, gg = _grid_sampler_backward(ember.tensor(go), ember.tensor(x0), ember.tensor(g0), m, p,
                                    ac)
    want_gx, want_gg = _grid_sampler_backward_ref(go, x0, g0, m, p, ac)
    np.testing.assert_allclose(gx.numpy(), want_gx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gg.numpy(), want_gg, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_out_of_range_and_nan_points(mode, padding):
    """As PyTorch's: outside is zero without padding; a NaN point is NaN bilinear (its weights
    are), zero nearest; the padding rules take NaN as 0."""
    x = ember.ones(1, 2, 3, 3)
    g = ember.tensor([[[[5.0, 0.0], [float("nan"), 0.0], [0.0, -3.0]]]])
    y = ember.nn.functional.grid_sample(x, g, mode, padding, align_corners=True).numpy()
    if padding != "zeros":
        np.testing.assert_array_equal(y, np.ones((1, 2, 1, 3)))
    else:
        nan = np.nan if mode == "bilinear" else 0.0
        np.testing.assert_array_equal(y, np.array([0.0, nan, 0.0]).reshape(1, 1, 1, 3)
                                      .repeat(2, axis=1))


@pytest.mark.parametrize("xs,gs", [((0, 3, 4, 5), (0, 3, 2, 2)), ((2, 0, 4, 5), (2, 3, 2, 2)),
                                   ((2, 3, 4, 5), (2, 0, 3, 2)), ((2, 20, 4, 5), (2, 0, 3, 2))])
def test_empty_batches_channels_and_grids(xs, gs):
    x, g = ember.randn(*xs, requires_grad=True), ember.randn(*gs, requires_grad=True)
    y = ember.nn.functional.grid_sample(x, g, align_corners=False)
    y.sum().backward()
    assert tuple(y.shape) == xs[:2] + gs[1:3] and y.is_contiguous()
    assert x.grad.shape == x.shape and g.grad.shape == g.shape


def test_first_order_backward_keeps_no_composite_graph_and_reruns():
    x0, g0 = _data(2, 3, np.float32)
    x, g = ember.tensor(x0, requires_grad=True), ember.tensor(g0, requires_grad=True)
    y = ember.nn.functional.grid_sample(x, g, align_corners=False)
    assert [n.name() for n, _ in y.grad_fn.next_functions] == \
        ["torch::autograd::AccumulateGrad"] * 2
    y.sum().backward(retain_graph=True)
    first = x.grad.clone(), g.grad.clone()
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), 2 * first[0].numpy())
    np.testing.assert_array_equal(g.grad.numpy(), 2 * first[1].numpy())


def test_double_backward_still_goes_through_the_composite():
    x0, g0 = _data(2, 2, np.float64)
    x, g = ember.tensor(x0, requires_grad=True), ember.tensor(g0, requires_grad=True)
    y = ember.nn.functional.grid_sample(x, g, align_corners=False)
    gx, gg = ember.autograd.grad((y * y).sum(), (x, g), create_graph=True)
    (hx, hg) = ember.autograd.grad(gx.sum() + gg.sum(), (x, g))
    xr, gr = ember.tensor(x0, requires_grad=True), ember.tensor(g0, requires_grad=True)
    yr = _sampled(xr, gr, "bilinear", "zeros", False)
    gxr, ggr = ember.autograd.grad((yr * yr).sum(), (xr, gr), create_graph=True)
    (hxr, hgr) = ember.autograd.grad(gxr.sum() + ggr.sum(), (xr, gr))
    np.testing.assert_allclose(hx.numpy(), hxr.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(hg.numpy(), hgr.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_first_order_sampling_never_builds_the_composite(monkeypatch, mode):
    import ember.ops.grid_sampling as gs

    def refuse(*args):
        raise AssertionError("the composite ran")
    monkeypatch.setattr(gs, "_sampled", refuse)
    x0, g0 = _data(3, 2, np.float32)
    x, g = ember.tensor(x0, requires_grad=True), ember.tensor(g0, requires_grad=True)
    ember.nn.functional.grid_sample(x, g, mode, align_corners=False).sum().backward()
    assert x.grad.shape == x.shape and g.grad.shape == g.shape
