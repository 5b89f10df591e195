"""Review of round 25's GELU/LayerNorm speed work: gelu of subnormal float32 inputs, and
gradients taken over as ``.grad`` (they must never share memory with a gradient held
elsewhere)."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.ops.activations_smooth import _gelu_backward


@pytest.mark.parametrize("size", [1, 1000, 70_000])       # direct kernel and the spans
def test_gelu_of_subnormal_float32_is_half_of_it(size):
    # gelu(x) = x Phi(x) rounds to x / 2 for |x| < 2**-126, as PyTorch gives; the tail form
    # took 1 / |x|, which overflows there, and gave x (x > 0) or +0 (x < 0)
    bits = np.linspace(1, (1 << 23) - 1, size).astype(np.uint32)
    sub = bits.view(np.float32)
    x = np.concatenate([sub, -sub])
    y = F.gelu(ember.tensor(x)).numpy()
    np.testing.assert_array_equal(y.view(np.uint32), (x * np.float32(0.5)).view(np.uint32))
    # and the smallest normals keep their values: x / 2 with Phi(x) = 1/2 + x pdf(0)
    normal = np.float32(np.finfo(np.float32).tiny) * np.float32([1, 2, 1024, -1, -3])
    np.testing.assert_array_equal(F.gelu(ember.tensor(normal)).numpy(), normal * np.float32(0.5))


def _gelu_grad(x):
    return _gelu_backward(ember.ones_like(x), x.detach(), "none").numpy()


@pytest.mark.parametrize("shape", [(3, 5), (64, 1100), (1 << 21,)])    # direct, spans, threads
def test_adopted_gelu_gradients_share_no_memory(shape):
    # two leaves receiving one gradient (AddBackward passes it to both)
    a, b = ember.randn(*shape, requires_grad=True), ember.randn(*shape, requires_grad=True)
    F.gelu(a + b).sum().backward()
    assert not np.shares_memory(a.grad._data, b.grad._data)
    expected = _gelu_grad(a.detach() + b.detach())
    a.grad.zero_()
    np.testing.assert_array_equal(b.grad.numpy(), expected)
    # a retained pass-through gradient and the leaf's
    leaf = ember.randn(*shape, requires_grad=True)
    mid = leaf + 0
    mid.retain_grad()
    F.gelu(mid).sum().backward()
    assert not np.shares_memory(leaf.grad._data, mid.grad._data)
    # a hook that keeps the gradient it saw
    leaf, kept = ember.randn(*shape, requires_grad=True), []
    leaf.register_hook(kept.append)
    F.gelu(leaf).sum().backward()
    assert not np.shares_memory(leaf.grad._data, kept[0]._data)
    # autograd.grad's result, then .backward of the same graph; then a second accumulation
    leaf = ember.randn(*shape, requires_grad=True)
    y = F.gelu(leaf).sum()
    (first,) = ember.autograd.grad(y, leaf, retain_graph=True)
    y.backward(retain_graph=True)
    y.backward()
    assert not np.shares_memory(leaf.grad._data, first._data)
    np.testing.assert_allclose(leaf.grad.numpy(), 2 * first.numpy(), rtol=1e-6)
    np.testing.assert_array_equal(first.numpy(), _gelu_grad(leaf))


def test_adopted_gelu_gradient_keeps_a_channels_last_leafs_layout():
    x = ember.randn(4, 64, 64, 64).to(memory_format=ember.channels_last).requires_grad_()
    F.gelu(x).sum().backward()
    assert x.grad.stride() == x.stride()
    np.testing.assert_array_equal(x.grad.numpy(), _gelu_grad(x))


def test_adopted_layer_norm_gradients_share_no_memory():
    x = ember.randn(16, 8, requires_grad=True)
    mid = x + 0
    mid.retain_grad()
    ln = ember.nn.LayerNorm(8)
    ln(mid).sum().backward()
    assert not np.shares_memory(x.grad._data, mid.grad._data)
    # one leaf as both weight and bias: its two gradients add up
    w = ember.randn(8, requires_grad=True)
    y = F.layer_norm(x.detach(), (8,), w, w)
    y.backward(ember.ones_like(y))
    xhat = F.layer_norm(x.detach(), (8,)).numpy()
    np.testing.assert_allclose(w.grad.numpy(), xhat.sum(0) + 16, rtol=1e-5, atol=1e-5)
