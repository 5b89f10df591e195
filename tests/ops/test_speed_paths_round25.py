"""Round 25 speed paths: gelu's float32 kernels (a pass fewer each way) and gradients that
become ``.grad`` without a copy (gelu's spans, layer_norm's array backward), checked against
float64 references and the composed derivative."""

import numpy as np
import pytest
import scipy.special as sp

import ember
import ember.nn.functional as F
from ember.autograd import graph, gradcheck, gradgradcheck
from ember.ops.activations_smooth import _gelu_erf_form, _gelu_erf_grad

_EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e-40, -1e-40, 3e38,
                   -3e38], np.float32)


def _grid():
    """float32 inputs over gelu's whole range, with powers of two down to the subnormals."""
    powers = np.float32(2.0) ** -np.arange(1, 120, dtype=np.float32)
    return np.concatenate([np.linspace(-12, 12, 240_001, dtype=np.float32), powers, -powers])


@pytest.fixture
def copies(monkeypatch):
    """The shapes of the gradients AccumulateGrad copies (instead of taking them over)."""
    shapes = []
    copy = graph.layout_copy

    def counted(g, v):
        shapes.append(g.shape)
        return copy(g, v)
    monkeypatch.setattr(graph, "layout_copy", counted)
    return shapes


def _gelu_reference(x):
    x = x.astype(np.float64)
    return x * sp.ndtr(x), sp.ndtr(x) + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi)


def test_gelu_float32_kernels_are_within_rounding_of_float64():
    x = _grid()
    with np.errstate(all="ignore"):
        y = _gelu_erf_form(np, x).astype(np.float64)
        d = _gelu_erf_grad(np, np.ones_like(x), x).astype(np.float64)
    ry, rd = _gelu_reference(x)
    # under one float32 ulp of max(1, |x|) (PyTorch's (1 + erf) form errs up to 6e-8 of 1)
    assert np.all(np.abs(y - ry) <= 1e-7 * np.maximum(1, np.abs(x)))
    assert np.all(np.abs(d - rd) <= 2.5e-7)
    # relative accuracy where gelu is x / 2 + ...: a few ulps, the tail form has no 1 + erf
    small = (np.abs(x) < 1e-3) & (np.abs(ry) > 1e-36)
    assert np.all(np.abs(y - ry)[small] <= 3e-7 * np.abs(ry[small]))
    # and in the lower tail, where (1 + erf) keeps no digits: relative error under 2e-4
    tail = (x > -5) & (x < -1)
    assert np.all(np.abs(y - ry)[tail] <= 2e-4 * np.abs(ry[tail]))


def test_gelu_edges():
    with np.errstate(all="ignore"):
        y = _gelu_erf_form(np, _EDGES)
        d = _gelu_erf_grad(np, np.ones_like(_EDGES), _EDGES)
    # gelu(inf) = inf; -inf gives nan as PyTorch's x * (1 + erf) does; nan stays nan; the
    # gradient at +-inf is nan, as PyTorch's x * pdf(x) = inf * 0 makes it
    np.testing.assert_array_equal(y[[0, 1, 2]], [0.0, 0.0, np.inf])
    assert np.isnan(y[3]) and np.isnan(y[4]) and np.isnan(d[[2, 3, 4]]).all()
    np.testing.assert_allclose(d[[0, 1, 5, 6, 7, 8]], 0.5, atol=1e-7)
    np.testing.assert_array_equal(y[[9, 10]], [np.inf, 0.0])     # (x + |x| overflows, as
    # PyTorch's x * (1 + erf) does)


def test_gelu_float32_matches_the_float64_path_through_autograd():
    x64 = ember.tensor(np.random.default_rng(0).standard_normal((64, 1100)) * 3,
                       requires_grad=True)            # 70400 values: the spans' path
    x32 = x64.detach().float().requires_grad_()
    g = ember.tensor(np.random.default_rng(1).standard_normal((64, 1100)))
    for x, gy in ((x64, g), (x32, g.float())):
        F.gelu(x).backward(gy)
    x = x32.detach().numpy().astype(np.float64)
    np.testing.assert_allclose(F.gelu(x32).detach().numpy(), F.gelu(x64.detach().float()
                                                                    .double()).numpy(),
                               atol=1e-7 * max(1, np.abs(x).max()), rtol=0)
    np.testing.assert_allclose(x32.grad.numpy(), (g.numpy() * _gelu_reference(x)[1]),
                               atol=2.5e-7 * np.abs(g.numpy()).max(), rtol=0)


@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16])
def test_gelu_16_bit_rounds_the_float32_result_once(dtype):
    # every 16-bit value: PyTorch computes in float32 and rounds once, as ember must
    bits = np.arange(1 << 16, dtype=np.uint16)
    x = ember.tensor(bits.view(np.int16)).view(dtype).requires_grad_()
    y = F.gelu(x)
    g = ember.full_like(y, 0.75)
    (gx,) = ember.autograd.grad(y, x, g)
    wide = x.detach().float()
    assert y.dtype == gx.dtype == dtype
    np.testing.assert_array_equal(y.detach().view(ember.int16).numpy(),
                                  F.gelu(wide).to(dtype).view(ember.int16).numpy())
    (gw,) = ember.autograd.grad(F.gelu(wide.requires_grad_()), wide, g.float())
    np.testing.assert_array_equal(gx.view(ember.int16).numpy(),
                                  gw.to(dtype).view(ember.int16).numpy())


def test_gelu_non_contiguous_input_gives_the_contiguous_values():
    base = ember.randn(1100, 64) * 4             # 70400 values; the transpose is computed whole
    x = base.mT.requires_grad_()
    dense = base.mT.contiguous().requires_grad_()
    g = ember.randn(64, 1100)
    for t in (x, dense):
        F.gelu(t).backward(g)
    np.testing.assert_array_equal(F.gelu(x).detach().numpy(), F.gelu(dense).detach().numpy())
    np.testing.assert_array_equal(x.grad.numpy(), dense.grad.numpy())


@pytest.mark.parametrize("shape", [(16, 64, 512), (3, 5)])
def test_gelu_gradient_becomes_grad_without_a_copy(shape, copies):
    x = ember.randn(*shape, requires_grad=True)
    g = ember.randn(*shape)
    F.gelu(x).backward(g)
    assert copies == []
    data = x.grad._data
    assert data.base is None and data.flags.owndata and data.shape == shape
    assert not np.shares_memory(data, g._data)
    expected = g.numpy() * _gelu_reference(x.detach().numpy())[1]
    np.testing.assert_allclose(data, expected, atol=2.5e-7 * np.abs(g.numpy()).max(), rtol=0)
    F.gelu(x).backward(g)                       # a second backward accumulates into it
    np.testing.assert_allclose(x.grad.numpy(), 2 * expected, atol=5e-7 * np.abs(g.numpy()).max(),
                               rtol=0)


def test_gelu_zero_size_double_backward_and_vmap():
    x = ember.zeros(0, 3, requires_grad=True)
    F.gelu(x).sum().backward()
    assert x.grad.shape == (0, 3)
    x64 = ember.randn(4, 3, dtype=ember.float64, requires_grad=True)
    assert gradcheck(F.gelu, (x64,))
    assert gradgradcheck(F.gelu, (x64,))
    batch = ember.randn(5, 70, 1000)             # per sample above the spans' threshold
    np.testing.assert_array_equal(ember.func.vmap(F.gelu)(batch).numpy(),
                                  ember.stack([F.gelu(b) for b in batch]).numpy())


# --- layer_norm's array backward --------------------------------------------------------------

def _layer_norm_grads(x, w, b, gy, create_graph):
    """The gradients of layer_norm (over the last dim) for x, w, b: the array path, or the
    composed derivative when ``create_graph`` (the graph being built)."""
    inputs = [t for t in (x, w, b) if t is not None]
    y = F.layer_norm(x, x.shape[-1:], w, b)
    return ember.autograd.grad(y, inputs, gy, create_graph=create_graph)


@pytest.mark.parametrize("dtype,tol", [(ember.float32, 2e-5), (ember.float64, 1e-12)])
@pytest.mark.parametrize("shape", [(16, 64, 128), (7, 5)])
def test_layer_norm_array_backward_matches_the_composed_one(dtype, tol, shape):
    gen = ember.Generator().manual_seed(0)
    x = (ember.randn(*shape, generator=gen, dtype=dtype) * 3 + 100).requires_grad_()
    w = ember.randn(shape[-1], generator=gen, dtype=dtype).requires_grad_()
    b = ember.randn(shape[-1], generator=gen, dtype=dtype).requires_grad_()
    gy = ember.randn(*shape, generator=gen, dtype=dtype)
    fast = _layer_norm_grads(x, w, b, gy, False)
    composed = _layer_norm_grads(x, w, b, gy, True)
    for f, c in zip(fast, composed):
        assert f.dtype == dtype and f.shape == c.shape
        scale = np.abs(c.detach().numpy()).max()
        np.testing.assert_allclose(f.numpy(), c.detach().numpy(), rtol=tol, atol=tol * scale)


def test_layer_norm_gradients_become_grad_without_a_copy(copies):
    x = ember.randn(16, 64, 128, requires_grad=True)
    ln = ember.nn.LayerNorm(128)
    g = ember.randn(16, 64, 128)
    ln(x).backward(g)
    assert copies == []
    for t in (x, ln.weight, ln.bias):
        data = t.grad._data
        assert data.base is None and data.flags.owndata and data.shape == tuple(t.shape)
        assert not np.shares_memory(data, g._data)
    first = x.grad.clone()
    ln(x).backward(g)                            # accumulates into the array it took over
    np.testing.assert_allclose(x.grad.numpy(), 2 * first.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16])
def test_layer_norm_16_bit_array_backward(dtype):
    gen = ember.Generator().manual_seed(1)
    x32 = ember.randn(8, 32, generator=gen)
    gy32 = ember.randn(8, 32, generator=gen)
    x = x32.to(dtype).requires_grad_()
    w = ember.ones(32, requires_grad=True)           # float32 parameters of a 16-bit input
    b = ember.zeros(32, requires_grad=True)
    gx, gw, gb = _layer_norm_grads(x, w, b, gy32.to(dtype), False)
    assert gx.dtype == dtype and gw.dtype == gb.dtype == ember.float32
    xr = x.detach().double().requires_grad_()
    wr, br = w.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    ref = _layer_norm_grads(xr, wr, br, gy32.to(dtype).double(), False)
    eps = 8e-3 if dtype is ember.bfloat16 else 1e-3
    for got, want in zip((gx, gw, gb), ref):
        scale = np.abs(want.numpy()).max()
        np.testing.assert_allclose(got.double().numpy(), want.numpy(), atol=eps * scale,
                                   rtol=eps)


def test_layer_norm_non_contiguous_and_empty_inputs():
    base = ember.randn(128, 48)
    x, dense = base.mT.requires_grad_(), base.mT.contiguous().requires_grad_()
    g = ember.randn(48, 128)
    for t in (x, dense):
        F.layer_norm(t, (128,)).backward(g)
    np.testing.assert_array_equal(x.grad.numpy(), dense.grad.numpy())
    empty = ember.zeros(0, 4, requires_grad=True)
    ln = ember.nn.LayerNorm(4)
    ln(empty).sum().backward()
    assert empty.grad.shape == (0, 4)
    np.testing.assert_array_equal(ln.weight.grad.numpy(), np.zeros(4, np.float32))


def test_layer_norm_double_backward_and_vmap():
    gen = ember.Generator().manual_seed(2)
    x = ember.randn(3, 5, generator=gen, dtype=ember.float64, requires_grad=True)
    w = ember.randn(5, generator=gen, dtype=ember.float64, requires_grad=True)
    b = ember.randn(5, generator=gen, dtype=ember.float64, requires_grad=True)

    def fn(x, w, b):
        return F.layer_norm(x, (5,), w, b)
    assert gradcheck(fn, (x, w, b))
    assert gradgradcheck(fn, (x, w, b))
    xs = ember.randn(4, 3, 5, generator=gen, dtype=ember.float64)
    grads = ember.func.vmap(ember.func.grad(lambda t: fn(t, w.detach(), b.detach())
                                            .pow(2).sum()))(xs)
    for xi, gi in zip(xs, grads):
        xi = xi.clone().requires_grad_()
        fn(xi, w.detach(), b.detach()).pow(2).sum().backward()
        np.testing.assert_allclose(gi.numpy(), xi.grad.numpy(), rtol=1e-12, atol=1e-12)
