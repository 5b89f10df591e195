"""Ember-only checks of 16-bit float kernels whose NumPy arithmetic differs from PyTorch's."""

import ember
from ember.ops.padding import _pad_backward


def test_pad_backward_keeps_bfloat16():
    # NumPy's matmul of bfloat16 arrays gives float32
    g = ember.arange(18.0).reshape(1, 2, 9).to(ember.bfloat16)
    out = _pad_backward(g, [1, 2, 6], [2, 1], "reflect")
    assert out.dtype == ember.bfloat16
    assert out[0, 0].tolist() == [2.0, 4.0, 4.0, 5.0, 14.0, 7.0]     # as torch


def test_bfloat16_loss_sum_accumulates_in_float32():
    # adding 1000 ones in bfloat16 stops at 256
    x = ember.zeros(1000, dtype=ember.bfloat16)
    loss = ember.nn.functional.soft_margin_loss(x, ember.ones_like(x), reduction="sum")
    assert loss.dtype == ember.bfloat16
    assert loss.item() == 692.0             # 1000 * log(2), rounded to bfloat16


def test_fused_half_backward_keeps_double_backward():
    x = ember.tensor([0.5, -1.25], dtype=ember.float16, requires_grad=True)
    g, = ember.autograd.grad(ember.tanh(x).sum(), x, create_graph=True)
    assert g.dtype == ember.float16 and g.requires_grad
    gg, = ember.autograd.grad(g.sum(), x)
    expected = (-2 * ember.tanh(x.float()) * (1 - ember.tanh(x.float()) ** 2)).to(ember.float16)
    assert ember.allclose(gg.float(), expected.float(), rtol=4e-3)
