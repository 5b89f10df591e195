"""GroupNorm's first-order backward on arrays (the CPU fast path) against a float64 NumPy
reference and against the composed derivative that a recorded graph still runs."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def _reference(x, gy, w, groups, eps=1e-5):
    """The input, weight and bias gradients of group_norm in float64."""
    n, c = x.shape[:2]
    x3 = x.reshape(n, groups, -1)
    xc = x3 - x3.mean(-1, keepdims=True)
    invstd = 1 / np.sqrt((xc * xc).mean(-1, keepdims=True) + eps)
    xhat = (xc * invstd).reshape(n, c, -1)
    gy3 = gy.reshape(n, c, -1)
    g = (gy3 if w is None else gy3 * w[:, None]).reshape(x3.shape)
    xh = xhat.reshape(x3.shape)
    gx = invstd * (g - g.mean(-1, keepdims=True) - xh * (g * xh).mean(-1, keepdims=True))
    return gx.reshape(x.shape), (gy3 * xhat).sum((0, 2)), gy3.sum((0, 2))


def _grads(x, gy, w, b, groups, create_graph=False, channels_last=False):
    tx = ember.tensor(x, requires_grad=True)
    if channels_last:
        tx = tx.detach().to(memory_format=ember.channels_last).requires_grad_()
    tw = None if w is None else ember.tensor(w, requires_grad=True)
    tb = None if b is None else ember.tensor(b, requires_grad=True)
    leaves = [t for t in (tx, tw, tb) if t is not None]
    out = F.group_norm(tx, groups, tw, tb)
    grads = ember.autograd.grad(out, leaves, ember.tensor(gy), create_graph=create_graph)
    return [g.detach().numpy() for g in grads]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape,groups,channels_last", [
    ((4, 6, 5, 3), 3, False), ((3, 8, 7), 2, False), ((2, 6, 4, 5), 6, True),
    ((5, 4), 1, False)])
def test_group_norm_backward_matches_a_float64_reference(dtype, affine, shape, groups,
                                                         channels_last):
    # a mean 50 times the spread: x - mean is formed before any product
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) + 50).astype(dtype)
    gy = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(shape[1]).astype(dtype) if affine else None
    b = rng.standard_normal(shape[1]).astype(dtype) if affine else None
    got = _grads(x, gy, w, b, groups, channels_last=channels_last)
    want = _reference(x.astype(np.float64), gy.astype(np.float64),
                      None if w is None else w.astype(np.float64), groups)
    tol = 2e-4 if dtype == np.float32 else 1e-9
    for g, r in zip(got, want):
        assert g.dtype == dtype and g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=tol, atol=tol * np.abs(r).max())


def test_group_norm_backward_on_arrays_agrees_with_the_composed_derivative():
    rng = np.random.default_rng(1)
    x, gy = rng.standard_normal((2, 8, 6, 6)), rng.standard_normal((2, 8, 6, 6))
    w, b = rng.standard_normal(8), rng.standard_normal(8)
    fast = _grads(x, gy, w, b, 4)
    composed = _grads(x, gy, w, b, 4, create_graph=True)
    for f, c in zip(fast, composed):
        np.testing.assert_allclose(f, c, rtol=1e-12, atol=1e-13)


def test_group_norm_backward_with_a_tiny_eps_stays_finite():
    # 1 / sqrt(1e-30) cubed overflows float32; the product is taken in steps
    x = ember.ones(2, 4, 3, requires_grad=True)
    w = ember.ones(4, requires_grad=True)
    F.group_norm(x, 2, w, None, eps=1e-30).sum().backward()
    assert ember.isfinite(x.grad).all() and w.grad.tolist() == [0.0] * 4


def test_group_norm_double_backward_still_composes():
    rng = np.random.default_rng(2)
    x = ember.tensor(rng.standard_normal((2, 4, 3)), requires_grad=True)
    w = ember.tensor(rng.standard_normal(4), requires_grad=True)
    assert ember.autograd.gradgradcheck(lambda a, b: F.group_norm(a, 2, b), (x, w))
