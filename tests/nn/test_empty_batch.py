"""Layers on an empty batch (or empty normalized dims): outputs of the right shape, and a
backward through them that gives zero (or empty) gradients, as in PyTorch."""

import pytest

import ember
import ember.nn.functional as F


def _grads(fn, *shapes):
    xs = [ember.ones(*s, requires_grad=True) for s in shapes]
    out = fn(*xs)
    out.sum().backward()
    return out, [x.grad for x in xs]


@pytest.mark.parametrize("fn, x_shape, w_shape, out_shape", [
    (F.conv1d, (0, 2, 5), (3, 2, 3), (0, 3, 3)),
    (lambda x, w: F.conv2d(x, w, padding=1), (0, 2, 4, 4), (3, 2, 3, 3), (0, 3, 4, 4)),
    (lambda x, w: F.conv2d(x, w, groups=2), (0, 4, 3, 3), (4, 2, 2, 2), (0, 4, 2, 2)),
    (F.conv3d, (0, 1, 3, 3, 3), (2, 1, 2, 2, 2), (0, 2, 2, 2, 2)),
    (F.conv_transpose2d, (0, 2, 4, 4), (2, 3, 3, 3), (0, 3, 6, 6)),
    (lambda x, w: F.conv_transpose1d(x, w, stride=2), (0, 3, 3), (3, 2, 2), (0, 2, 6)),
])
def test_conv_on_empty_batch_gives_zero_weight_grad(fn, x_shape, w_shape, out_shape):
    out, (gx, gw) = _grads(fn, x_shape, w_shape)
    assert tuple(out.shape) == out_shape
    assert tuple(gx.shape) == x_shape
    assert tuple(gw.shape) == w_shape and gw.dtype == ember.float32
    assert not gw.any()


def test_conv_module_on_empty_batch_backward():
    m = ember.nn.Conv2d(2, 3, 3)
    m(ember.zeros(0, 2, 5, 5)).sum().backward()
    assert m.weight.grad.tolist() == ember.zeros(3, 2, 3, 3).tolist()
    assert m.bias.grad.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("shape", [(0, 3, 2), (2, 3, 0)])
def test_group_norm_empty_backward(shape):
    w = ember.ones(3, requires_grad=True)
    b = ember.zeros(3, requires_grad=True)
    x = ember.zeros(*shape, requires_grad=True)
    out = F.group_norm(x, 1, w, b)
    out.sum().backward()
    assert tuple(out.shape) == shape and tuple(x.grad.shape) == shape
    assert w.grad.tolist() == [0.0, 0.0, 0.0] and b.grad.tolist() == [0.0, 0.0, 0.0]


def test_group_norm_module_empty_batch():
    m = ember.nn.GroupNorm(1, 3)
    m(ember.zeros(0, 3, 2)).sum().backward()
    assert m.weight.grad.tolist() == [0.0, 0.0, 0.0]


def test_layer_norm_over_an_empty_dim_backward():
    w = ember.ones(0, requires_grad=True)
    x = ember.zeros(2, 0, requires_grad=True)
    out = F.layer_norm(x, (0,), w)
    out.sum().backward()
    assert tuple(out.shape) == (2, 0)
    assert tuple(x.grad.shape) == (2, 0) and tuple(w.grad.shape) == (0,)


@pytest.mark.parametrize("fn, shape, message", [
    (F.adaptive_avg_pool1d, (1, 2, 0), r"^adaptive_avg_pool2d\(\): .* sizes \[1, 2, 1, 0\] with "
                                       r"dimension 3 being empty$"),
    (F.adaptive_avg_pool1d, (2, 0), r"^adaptive_avg_pool2d\(\): .* sizes \[2, 1, 0\] with "
                                    r"dimension 2 being empty$"),
    (F.adaptive_max_pool1d, (1, 2, 0), r"^adaptive_max_pool1d\(\): .* sizes \[1, 2, 0\] with "
                                       r"dimension 2 being empty$"),
])
def test_adaptive_pool1d_of_an_empty_length_names_the_kernel(fn, shape, message):
    with pytest.raises(RuntimeError, match=message):
        fn(ember.zeros(*shape), 2)
    assert tuple(fn(ember.zeros(0, 3), 2).shape) == (0, 2)
