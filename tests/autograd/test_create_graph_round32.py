"""First-order gradients under create_graph (round 32): a convolution's gradients require grad
wherever its input or weight does (PyTorch's one convolution_backward node), though a second
backward reaches neither through a gradient computed without it; grid_sample's input gets no
second-order gradient; a linear kernel's input gets zeros, not none. Values from closed forms."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F

_RNG = np.random.default_rng(7)
X = _RNG.standard_normal((2, 3, 4, 4))
W = _RNG.standard_normal((5, 3, 1, 1))
V = _RNG.standard_normal((2, 5, 4, 4))
_UNUSED = ("The differentiated Tensor at index 0 appears to not have been used in the graph. "
           "Set allow_unused=True if this is the desired behavior.")


def _conv(rx, rw, bias=False):
    x = ember.tensor(X, requires_grad=rx)
    w = ember.tensor(W, requires_grad=rw)
    b = ember.tensor(np.arange(5.0), requires_grad=True) if bias else None
    return x, w, b, F.conv2d(x, w, b)


def test_conv_input_gradient_from_the_weight_alone():
    x, w, _, y = _conv(True, False)
    g, = ember.autograd.grad(y, x, ember.tensor(V), create_graph=True)
    assert g.requires_grad and type(g.grad_fn).__name__ == "ConvolutionBackwardBackward0"
    # a 1x1 convolution's input gradient: the weight's transpose applied to each pixel
    np.testing.assert_allclose(g.detach().numpy(), np.einsum("nohw,oc->nchw", V, W[:, :, 0, 0]))
    assert ember.autograd.grad((g * g).sum(), x, allow_unused=True) == (None,)
    with pytest.raises(RuntimeError, match="index 0 appears to not have been used") as err:
        ember.autograd.grad((g * g).sum(), x)
    assert str(err.value) == _UNUSED


def test_conv_weight_gradient_from_the_input_alone():
    x, w, _, y = _conv(False, True)
    g, = ember.autograd.grad(y, w, ember.tensor(V), create_graph=True)
    assert g.requires_grad and type(g.grad_fn).__name__ == "ConvolutionBackwardBackward0"
    np.testing.assert_allclose(g.detach().numpy()[:, :, 0, 0], np.einsum("nchw,nohw->oc", X, V))
    assert ember.autograd.grad(g.sum(), w, allow_unused=True) == (None,)


def test_conv_bias_gradient_follows_the_input():
    """PyTorch's bias gradient comes from the same node: it requires grad where x does."""
    x, w, b, y = _conv(True, False, bias=True)
    gx, gb = ember.autograd.grad(y, (x, b), ember.tensor(V), create_graph=True)
    assert gb.requires_grad and type(gb.grad_fn).__name__ == "ConvolutionBackwardBackward0"
    np.testing.assert_allclose(gb.detach().numpy(), V.sum((0, 2, 3)))
    assert ember.autograd.grad((gx.sum() + gb.sum()), (x, b), allow_unused=True) == (None, None)
    # the bias alone: no input of the node requires grad, nor does its gradient
    x, w, b, y = _conv(False, False, bias=True)
    gb, = ember.autograd.grad(y, b, ember.tensor(V), create_graph=True)
    assert not gb.requires_grad


def test_conv_tied_gradient_keeps_a_path_through_the_incoming_gradient():
    """The second backward through the tied gradient reaches a v that requires grad."""
    x, w, _, y = _conv(True, False)
    v = ember.tensor(V, requires_grad=True)
    g, = ember.autograd.grad(y, x, v, create_graph=True)
    gx, gv = ember.autograd.grad(g.sum(), (x, v), allow_unused=True)
    assert gx is None
    np.testing.assert_allclose(gv.numpy(), np.broadcast_to(W[:, :, 0, 0].sum(1)[None, :, None,
                                                                                  None], V.shape))


def test_conv_plain_backward_records_nothing():
    x, w, _, y = _conv(True, False)
    y.backward(ember.tensor(V))
    assert not x.grad.requires_grad and x.grad.grad_fn is None


def _identity_grid(n, h, w):
    ys, xs = np.meshgrid(np.linspace(-1, 1, h), np.linspace(-1, 1, w), indexing="ij")
    return np.broadcast_to(np.stack([xs, ys], -1), (n, h, w, 2)).copy()


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_input_gets_no_second_order_gradient(mode):
    x = ember.tensor(X, requires_grad=True)
    grid = ember.tensor(_identity_grid(2, 4, 4), requires_grad=True)
    v = ember.tensor(X[::-1].copy(), requires_grad=True)
    y = F.grid_sample(x, grid, mode=mode, align_corners=True)
    gx, gg = ember.autograd.grad(y, (x, grid), v, create_graph=True)
    np.testing.assert_allclose(gx.detach().numpy(), X[::-1], atol=1e-12)   # identity sampling
    sx, sg, sv = ember.autograd.grad((gx * gx).sum(), (x, grid, v), allow_unused=True,
                                     retain_graph=True)
    assert sx is None
    np.testing.assert_allclose(sv.numpy(), 2 * X[::-1], atol=1e-12)
    if mode == "nearest":       # the grid's: zeros (not none); none at all from its gradient
        np.testing.assert_array_equal(sg.numpy(), np.zeros((2, 4, 4, 2)))
        assert gg.requires_grad
        assert ember.autograd.grad(gg.sum(), (x, grid, v), allow_unused=True) == (None,) * 3


def test_grid_sample_input_only_second_order_is_none():
    x = ember.tensor(X, requires_grad=True)
    grid = ember.tensor(_identity_grid(2, 4, 4))
    y = F.grid_sample(x, grid, align_corners=True)
    g, = ember.autograd.grad(y, x, ember.ones_like(y), create_graph=True)
    assert g.requires_grad and type(g.grad_fn).__name__ == "GridSampler2DBackwardBackward0"
    assert ember.autograd.grad(g.sum(), x, allow_unused=True) == (None,)


@pytest.mark.parametrize("pool", ["avg_pool2d", "adaptive_avg_pool2d"])
def test_linear_pool_input_gets_zeros_when_the_incoming_gradient_requires_grad(pool):
    x = ember.tensor(X, requires_grad=True)
    y = F.avg_pool2d(x, 2) if pool == "avg_pool2d" else F.adaptive_avg_pool2d(x, 2)
    vv = _RNG.standard_normal((2, 3, 2, 2))
    v = ember.tensor(vv, requires_grad=True)
    g, = ember.autograd.grad(y, x, v, create_graph=True)
    sx, sv = ember.autograd.grad((g * g).sum(), (x, v))
    np.testing.assert_array_equal(sx.numpy(), np.zeros(X.shape))
    # each window spreads v/4 over 4 inputs: sum(g^2) = sum(v^2)/4
    np.testing.assert_allclose(sv.numpy(), vv / 2)


def test_layer_norm_bias_gradient_follows_its_node():
    """PyTorch's native_layer_norm_backward takes the bias: its gradient requires grad."""
    x = ember.tensor(X)
    b = ember.tensor(np.ones(4), requires_grad=True)
    y = F.layer_norm(x, (4,), None, b)
    g, = ember.autograd.grad(y, b, ember.tensor(X[::-1].copy()), create_graph=True)
    assert g.requires_grad and type(g.grad_fn).__name__ == "NativeLayerNormBackwardBackward0"
    np.testing.assert_allclose(g.detach().numpy(), X[::-1].sum((0, 1, 2)))
    assert ember.autograd.grad(g.sum(), b, allow_unused=True) == (None,)


@pytest.mark.parametrize("fn", [ember.maximum, ember.minimum])
def test_extremum_gradient_node_is_masked_fill(fn):
    a = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    c = ember.tensor([2.0, 2.0, 1.0])
    v = ember.tensor([1.0, 1.0, 1.0], requires_grad=True)
    g, = ember.autograd.grad(fn(a, c), a, v, create_graph=True)
    assert type(g.grad_fn).__name__ == "MaskedFillBackward0"
    wins = [0.0, 0.5, 1.0] if fn is ember.maximum else [1.0, 0.5, 0.0]
    np.testing.assert_array_equal(g.detach().numpy(), wins)


@pytest.mark.parametrize("fn,node", [(F.mse_loss, "MseLossBackwardBackward0"),
                                     (F.huber_loss, "HuberLossBackwardBackward0"),
                                     (F.smooth_l1_loss, "SmoothL1LossBackwardBackward0")])
def test_pointwise_loss_gradient_nodes(fn, node):
    """Small differences (inside the quadratic branch): both gradients are 2(x - t)/n (mse)
    or (x - t)/n, under PyTorch's loss-backward node."""
    x = ember.tensor([0.1, -0.2, 0.3, 0.05], requires_grad=True)
    t = ember.tensor([0.0, 0.1, 0.2, 0.0], requires_grad=True)
    gx, gt = ember.autograd.grad(fn(x, t), (x, t), create_graph=True)
    assert type(gx.grad_fn).__name__ == node and type(gt.grad_fn).__name__ == node
    scale = 2 if fn is F.mse_loss else 1
    diff = np.array([0.1, -0.3, 0.1, 0.05], dtype=np.float32)
    np.testing.assert_allclose(gx.detach().numpy(), scale * diff / 4, rtol=1e-6)
    np.testing.assert_allclose(gt.detach().numpy(), -scale * diff / 4, rtol=1e-6)


def test_binary_cross_entropy_gradient_nodes():
    x = ember.tensor([0.2, 0.5, 0.9], dtype=ember.float64, requires_grad=True)
    t = ember.tensor([0.0, 0.5, 1.0], dtype=ember.float64, requires_grad=True)
    gx, gt = ember.autograd.grad(F.binary_cross_entropy(x, t), (x, t), create_graph=True)
    assert type(gx.grad_fn).__name__ == "BinaryCrossEntropyBackwardBackward0"
    assert type(gt.grad_fn).__name__ == "DivBackward1"
    xs, ts = np.array([0.2, 0.5, 0.9]), np.array([0.0, 0.5, 1.0])
    np.testing.assert_allclose(gx.detach().numpy(), (xs - ts) / (xs * (1 - xs)) / 3)
    np.testing.assert_allclose(gt.detach().numpy(), -np.log(xs / (1 - xs)) / 3)
