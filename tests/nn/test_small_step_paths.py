"""The small-step fast paths: SDPA's first-order backward on arrays and its forward's
softmax shortcuts, cross_entropy's mean, against NumPy and against the composed
(create_graph) derivative they stand for."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.autograd import gradgradcheck


def _arrays(*shapes, seed=0, dtype=np.float32):
    gen = np.random.default_rng(seed)
    return [gen.standard_normal(s).astype(dtype) for s in shapes]


def _sdpa_reference(q, k, v, mask, g, scale):
    """Output and (q, k, v) gradients of softmax(q k^T * scale + mask) v, in float64."""
    q, k, v, g = (a.astype(np.float64) for a in (q, k, v, g))
    s = q @ k.swapaxes(-1, -2) * scale + mask
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    out = w @ v
    dw = g @ v.swapaxes(-1, -2)
    ds = w * (dw - (dw * w).sum(-1, keepdims=True))
    return out, ds @ k * scale, ds.swapaxes(-1, -2) @ q * scale, w.swapaxes(-1, -2) @ g


def _leaves(arrays):
    return [ember.tensor(a, requires_grad=True) for a in arrays]


@pytest.mark.parametrize("shape", [(2, 4, 5, 8), (3, 5, 8)])     # flash kernel; math kernel
def test_sdpa_first_order_gradients_match_numpy(shape):
    lq = shape[:-2] + (6, shape[-1])
    qa, ka, va, ga = _arrays(lq, shape, shape, lq)
    mask = np.triu(np.full((6, shape[-2]), -np.inf), 1)
    out_ref, *grads_ref = _sdpa_reference(qa, ka, va, mask, ga, 0.5)
    q, k, v = _leaves((qa, ka, va))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.5)
    out.backward(ember.tensor(ga))
    np.testing.assert_allclose(out.detach().numpy(), out_ref, rtol=1e-5, atol=1e-6)
    for t, ref in zip((q, k, v), grads_ref):
        np.testing.assert_allclose(t.grad.numpy(), ref, rtol=1e-4, atol=1e-5)


_MATH_KERNEL_CASES = {                     # (q, k, v shapes, mask, keywords)
    "plain": (((3, 5, 4), (3, 6, 4), (3, 6, 7)), None, {}),
    "negative scale": (((3, 5, 4), (3, 6, 4), (3, 6, 4)), None, {"scale": -0.3}),
    "float mask": (((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 4)), "float", {}),
    "broadcast batch": (((2, 3, 5, 4), (1, 3, 6, 4), (2, 1, 6, 4)), None, {}),
    "dropout": (((2, 4, 5, 4), (2, 4, 6, 4), (2, 4, 6, 4)), None, {"dropout_p": 0.3}),
    "float64": (((3, 5, 4), (3, 6, 4), (3, 6, 4)), None, {"dtype": np.float64}),
}


@pytest.mark.parametrize("case", sorted(_MATH_KERNEL_CASES))
def test_sdpa_first_order_backward_equals_the_composed_one(case):
    shapes, mask_kind, kw = _MATH_KERNEL_CASES[case]
    kw = dict(kw)
    dtype = kw.pop("dtype", np.float32)
    inputs = _leaves(_arrays(*shapes, seed=1, dtype=dtype))
    if mask_kind == "float":
        inputs.append(ember.tensor(_arrays((5, 6), seed=2, dtype=dtype)[0], requires_grad=True))
    ember.manual_seed(0)
    out = F.scaled_dot_product_attention(*inputs, **kw)
    g = ember.tensor(_arrays(tuple(out.shape), seed=3, dtype=dtype)[0])
    fused = ember.autograd.grad(out, inputs, g, retain_graph=True)          # on arrays
    composed = ember.autograd.grad(out, inputs, g, create_graph=True)       # in ember ops
    assert all(c.grad_fn is not None for c in composed)
    for a, b in zip(fused, composed):
        assert a.grad_fn is None and a.dtype == b.dtype
        np.testing.assert_array_equal(a.numpy(), b.detach().numpy())


def test_sdpa_double_backward_through_the_composed_path():
    inputs = _leaves(_arrays((2, 3, 4), (2, 5, 4), (2, 5, 3), seed=4, dtype=np.float64))
    assert gradgradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), inputs)


@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (3, 5, 4)])
def test_sdpa_rows_masked_throughout_weigh_nothing(shape):
    qa, ka, va = _arrays(shape, shape[:-2] + (6, 4), shape[:-2] + (6, 4), seed=5)
    keep = np.ones((5, 6), dtype=bool)
    keep[1] = False
    keep[3, 2:] = False
    q, k, v = _leaves((qa, ka, va))
    out = F.scaled_dot_product_attention(q, k, v, ember.tensor(keep))
    out.sum().backward()
    result = out.detach().numpy()
    assert not result[..., 1, :].any() and np.isfinite(result).all()
    assert not q.grad.numpy()[..., 1, :].any()
    # a partly masked row is the softmax over the keys it keeps
    s = qa[..., 3:4, :] @ ka[..., :2, :].swapaxes(-1, -2) / 2.0     # scale 1/sqrt(4)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    expected = (w @ va[..., :2, :])[..., 0, :]
    np.testing.assert_allclose(result[..., 3, :], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_cross_entropy_mean(dtype):
    xa = _arrays((6, 5), seed=7, dtype=np.float64)[0]
    target = np.array([0, 4, -100, 2, 2, 1])
    x = ember.tensor(xa, dtype=dtype)
    loss = F.cross_entropy(x, ember.tensor(target))
    logp = xa - np.log(np.exp(xa).sum(1, keepdims=True))
    kept = target != -100
    expected = -logp[np.arange(6)[kept], target[kept]].mean()
    assert loss.dtype == dtype and loss.shape == ()
    np.testing.assert_allclose(loss.item(), expected, rtol=1e-6)
    # every target ignored: the mean over no weight is NaN (0/0), of the input's dtype
    nothing = F.cross_entropy(x, ember.full((6,), -100))
    assert nothing.dtype == dtype and np.isnan(nothing.item())
