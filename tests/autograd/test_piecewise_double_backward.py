"""With create_graph, the gradient of a piecewise-linear op depends on the op's input with
derivative 0, as PyTorch's backward kernels do: it requires grad, and a second gradient
through it is zeros rather than an error."""

import pytest

import ember
import ember.nn.functional as F

CASES = {
    "relu": (lambda x: F.relu(x), [0.0, 1.0, 1.0], "ThresholdBackwardBackward0"),
    "relu6": (lambda x: F.relu6(x), [0.0, 1.0, 1.0], "HardtanhBackwardBackward0"),
    "hardtanh": (lambda x: F.hardtanh(x), [0.0, 1.0, 0.0], "HardtanhBackwardBackward0"),
    "threshold": (lambda x: F.threshold(x, 0.1, 20.0), [0.0, 1.0, 1.0],
                  "ThresholdBackwardBackward0"),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.1), [0.1, 1.0, 1.0],
                   "LeakyReluBackwardBackward0"),
    "hardshrink": (lambda x: F.hardshrink(x), [1.0, 0.0, 1.0], "HardshrinkBackwardBackward0"),
    "softshrink": (lambda x: F.softshrink(x), [1.0, 0.0, 1.0], "SoftshrinkBackwardBackward0"),
}


def test_hardsigmoid_second_gradient_is_refused_as_pytorch():
    """PyTorch's hardsigmoid_backward has no derivative: its node NotImplemented raises."""
    x = ember.tensor([-1.0, 0.5, 2.0], requires_grad=True)
    g, = ember.autograd.grad(F.hardsigmoid(x).sum(), x, create_graph=True)
    assert g.tolist() == pytest.approx([1 / 6] * 3)
    assert type(g.grad_fn).__name__ == "NotImplemented"
    with pytest.raises(RuntimeError, match="derivative for aten::hardsigmoid_backward is not"):
        ember.autograd.grad(g.sum(), x)


@pytest.mark.parametrize("name", CASES)
def test_first_gradient_requires_grad_and_second_is_zero(name):
    fn, expected, node = CASES[name]
    x = ember.tensor([-1.0, 0.5, 2.0], requires_grad=True)
    g, = ember.autograd.grad(fn(x).sum(), x, create_graph=True)
    assert g.tolist() == pytest.approx(expected)
    assert g.requires_grad
    if node is not None:
        assert type(g.grad_fn).__name__ == node
    gg, = ember.autograd.grad(g.sum(), x)
    assert gg.tolist() == [0.0, 0.0, 0.0]


def test_nll_loss_gradient_requires_grad_under_create_graph():
    x = ember.tensor([[-1.0, 0.5, 2.0], [0.1, 0.2, 0.3]], requires_grad=True)
    g, = ember.autograd.grad(F.nll_loss(x, ember.tensor([0, 2])), x, create_graph=True)
    assert g.tolist() == [[-0.5, 0.0, 0.0], [0.0, 0.0, -0.5]]
    assert g.requires_grad
    gg, = ember.autograd.grad(g.sum(), x)
    assert gg.tolist() == [[0.0] * 3] * 2


def test_without_create_graph_the_gradient_records_nothing():
    x = ember.tensor([-1.0, 0.5, 2.0], requires_grad=True)
    F.relu(x).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0]
    assert x.grad.grad_fn is None and not x.grad.requires_grad


def test_relu_network_hessian_is_zero_on_its_input():
    w = ember.tensor([[1.0, -2.0], [0.5, 1.0]])
    x = ember.tensor([0.3, 0.7], requires_grad=True)
    h = ember.autograd.functional.hessian(lambda v: F.relu(w @ v).sum(), x)
    assert h.tolist() == [[0.0, 0.0], [0.0, 0.0]]
