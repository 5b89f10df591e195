"""Under create_graph, the input gradient of an average pool or a reflect/replicate pad
requires grad wherever the input does (PyTorch's backward kernels take the input), so a
penalty on it backpropagates zeros; a first-order backward records nothing (round 32)."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F

CASES = {
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2), "AvgPool2DBackwardBackward0"),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, 3),
                            "AdaptiveAvgPool2DBackwardBackward0"),
    "reflect": (lambda x: F.pad(x, (1, 1, 2, 1), mode="reflect"),
                "ReflectionPad2DBackwardBackward0"),
    "replicate": (lambda x: F.pad(x, (1, 1, 2, 1), mode="replicate"),
                  "ReplicationPad2DBackwardBackward0"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_penalty_on_linear_kernel_gradient(name):
    fn, node = CASES[name]
    x = ember.randn(2, 3, 6, 6, dtype=ember.float64, requires_grad=True)
    ones = ember.ones_like(fn(x))
    g, = ember.autograd.grad(fn(x), x, ones, create_graph=True)
    assert g.requires_grad and type(g.grad_fn).__name__ == node
    # the value: each input's count of uses (an adjoint of ones), unchanged by the node
    plain, = ember.autograd.grad(fn(x), x, ones)
    assert not plain.requires_grad
    np.testing.assert_array_equal(g.detach().numpy(), plain.numpy())
    second, = ember.autograd.grad((g * g).sum(), x)
    np.testing.assert_array_equal(second.numpy(), np.zeros((2, 3, 6, 6)))


def test_circular_pad_gradient_stays_constant():
    """PyTorch's circular pad is slices and copies: no kernel takes the input."""
    x = ember.randn(1, 2, 4, 4, requires_grad=True)
    y = F.pad(x, (1, 1, 1, 1), mode="circular")
    g, = ember.autograd.grad(y, x, ember.ones_like(y), create_graph=True)
    assert not g.requires_grad


_ADJOINTS = {       # each case's forward on a NumPy array (what the gradient's gradient is)
    "avg_pool2d": lambda a: a.reshape(2, 3, 3, 2, 3, 2).mean((3, 5)),
    "adaptive_avg_pool2d": lambda a: a.reshape(2, 3, 3, 2, 3, 2).mean((3, 5)),
    "reflect": lambda a: np.pad(a, ((0, 0), (0, 0), (2, 1), (1, 1)), mode="reflect"),
    "replicate": lambda a: np.pad(a, ((0, 0), (0, 0), (2, 1), (1, 1)), mode="edge"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_second_order_with_incoming_gradient_requiring_grad(name):
    """The incoming gradient ``v`` requires grad too: the gradient's own gradient is the
    forward for ``v`` and zeros (not None) for the input, as PyTorch's node has an edge to
    both."""
    fn, node = CASES[name]
    rng = np.random.default_rng(4)
    x = ember.from_numpy(rng.standard_normal((2, 3, 6, 6))).requires_grad_()
    out = fn(x)
    v = ember.from_numpy(rng.standard_normal(tuple(out.shape))).requires_grad_()
    g, = ember.autograd.grad(out, x, v, create_graph=True)
    assert type(g.grad_fn).__name__ == node
    w = rng.standard_normal((2, 3, 6, 6))
    gx, gv = ember.autograd.grad((g * ember.from_numpy(w)).sum(), [x, v], allow_unused=True)
    np.testing.assert_array_equal(gx.numpy(), np.zeros((2, 3, 6, 6)))
    np.testing.assert_allclose(gv.numpy(), _ADJOINTS[name](w), rtol=1e-14, atol=1e-14)


def test_embedding_bag_gradients_hang_from_what_their_kernels_read():
    """PyTorch's _embedding_bag_backward reads the per-sample weights, not the weight; its
    _embedding_bag_per_sample_weights_backward the weight, not the per-sample weights."""
    w = ember.randn(4, 3, dtype=ember.float64, requires_grad=True)
    psw = ember.rand(4, dtype=ember.float64, requires_grad=True)
    out = F.embedding_bag(ember.tensor([0, 2, 1, 2]), w, ember.tensor([0, 2]), mode="sum",
                          per_sample_weights=psw)
    gw, gp = ember.autograd.grad(out, [w, psw], ember.ones_like(out), create_graph=True)
    assert type(gw.grad_fn).__name__ == "EmbeddingBagBackwardBackward0"
    assert ember.autograd.grad(gw.sum(), w, retain_graph=True, allow_unused=True) == (None,)
    assert ember.autograd.grad(gp.sum(), psw, retain_graph=True, allow_unused=True) == (None,)
    with pytest.raises(NotImplementedError, match="derivative for '_embedding_bag_backward'"):
        ember.autograd.grad(gw.sum(), psw, retain_graph=True)
    with pytest.raises(RuntimeError, match="aten::_embedding_bag_per_sample_weights_backward"):
        ember.autograd.grad(gp.sum(), w, retain_graph=True)
    # both at once: per_sample_weights' gradient, computed last, refuses first
    with pytest.raises(RuntimeError, match="aten::_embedding_bag_per_sample_weights_backward"):
        ember.autograd.grad(gw.sum() + gp.sum(), [w, psw])
