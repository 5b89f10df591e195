"""Batch norm's kernels on inputs larger than the OpInfo samples: long rows (per-channel sums
of products as dots by BLAS), rows of one value, short rows and rows too long for (C, L)
planes; the array backward agrees with the composed one; a bfloat16 input's gradients come
from float32."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def _reference(x, w, b, g, eps=1e-5):
    """Training-mode output and (input, weight, bias) gradients in float64."""
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    n = x.size // x.shape[1]
    xc = x - x.mean(axes, keepdims=True)
    invstd = 1 / np.sqrt((xc * xc).mean(axes, keepdims=True) + eps)
    xhat = xc * invstd
    gw, gb = (g * xhat).sum(axes), g.sum(axes)
    gx = w.reshape(shape) * invstd * (g - gb.reshape(shape) / n - xhat * gw.reshape(shape) / n)
    return xhat * w.reshape(shape) + b.reshape(shape), gx, gw, gb


# (samples, channels, *rows) chosen for each kernel path: dots by BLAS (rows of 1024), rows of
# one value, short rows, rows too long for planes
SHAPES = [(32, 32, 32, 32), (512, 64), (64, 16, 24), (4, 8, 8192)]


@pytest.mark.parametrize("shape", SHAPES)
def test_training_matches_float64(shape):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3 + 5).astype(np.float32)    # an offset mean
    w, b = rng.standard_normal(shape[1]), rng.standard_normal(shape[1])
    g = rng.standard_normal(shape).astype(np.float32)
    xt = ember.tensor(x, requires_grad=True)
    wt = ember.tensor(w.astype(np.float32), requires_grad=True)
    bt = ember.tensor(b.astype(np.float32), requires_grad=True)
    rm, rv = ember.zeros(shape[1]), ember.ones(shape[1])
    y = F.batch_norm(xt, rm, rv, wt, bt, training=True)
    y.backward(ember.tensor(g))
    ref = _reference(x.astype(np.float64), w, b, g.astype(np.float64))
    for got, want in zip((y, xt.grad, wt.grad, bt.grad), ref):
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-4,
                                   atol=1e-4 * np.abs(want).max())
    axes = (0,) + tuple(range(2, x.ndim))
    np.testing.assert_allclose(rm.numpy(), 0.1 * x.astype(np.float64).mean(axes), rtol=1e-5)


@pytest.mark.parametrize("training", [True, False])
def test_array_backward_matches_the_composed_one(training):
    rng = np.random.default_rng(1)
    shape = (16, 8, 20, 20)
    x = ember.tensor(rng.standard_normal(shape), requires_grad=True)
    w = ember.tensor(rng.standard_normal(8), requires_grad=True)
    b = ember.tensor(rng.standard_normal(8), requires_grad=True)
    rm, rv = ember.tensor(rng.standard_normal(8)), ember.tensor(rng.uniform(0.5, 2, 8))
    g = ember.tensor(rng.standard_normal(shape))
    y = F.batch_norm(x, rm, rv, w, b, training=training)
    fast = ember.autograd.grad(y, (x, w, b), g, retain_graph=True)
    # create_graph: the derivative composed of ember ops (so that it is differentiable)
    composed = ember.autograd.grad(y, (x, w, b), g, create_graph=True)
    for a, c in zip(fast, composed):
        np.testing.assert_allclose(a.numpy(), c.detach().numpy(), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("create_graph", [False, True])
def test_bfloat16_input_float32_parameters_gradients_from_float32(create_graph):
    # computed in float32 from the float32 statistics (PyTorch's CPU kernel): the weight and
    # bias gradients are not rounded to bfloat16, the input's only once
    rng = np.random.default_rng(2)
    shape = (8, 4, 6, 6)
    x16 = ember.tensor(rng.standard_normal(shape) * 2 + 0.7).bfloat16().requires_grad_()
    g16 = ember.tensor(rng.standard_normal(shape)).bfloat16()
    w = ember.linspace(0.5, 1.5, 4).requires_grad_()
    b = ember.linspace(-0.3, 0.2, 4).requires_grad_()
    y = F.batch_norm(x16, ember.zeros(4), ember.ones(4), w, b, training=True)
    gx, gw, gb = ember.autograd.grad(y, (x16, w, b), g16, create_graph=create_graph)
    x, g = x16.double().detach().numpy(), g16.double().numpy()
    _, rx, rw, rb = _reference(x, w.detach().double().numpy(), np.zeros(4), g)
    assert (gx.dtype, gw.dtype, gb.dtype) == (ember.bfloat16, ember.float32, ember.float32)
    np.testing.assert_allclose(gw.detach().numpy(), rw, rtol=1e-5)
    np.testing.assert_allclose(gb.detach().numpy(), rb, rtol=1e-5)
    want_x = ember.tensor(rx).bfloat16().double().numpy()
    assert np.mean(gx.detach().double().numpy() != want_x) < 0.01
