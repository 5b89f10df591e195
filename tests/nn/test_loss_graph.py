"""The graph of losses PyTorch computes with one kernel: one node named after it, whose edges
are the loss's operands (the 60-minute blitz walks ``loss.grad_fn.next_functions``)."""

import pytest

import ember

F = ember.nn.functional


def _edges(node):
    return [(None if n is None else type(n).__name__, i) for n, i in node.next_functions]


def _network_output():
    lin = ember.nn.Linear(3, 2)
    with ember.no_grad():
        lin.weight.copy_(ember.tensor([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]]))
        lin.bias.copy_(ember.tensor([0.05, -0.05]))
    return lin, lin(ember.linspace(-1, 1, 12).reshape(4, 3))


TARGET = [[0.2, 0.1], [0.0, -0.3], [0.5, 0.4], [-0.2, 0.9]]


@pytest.mark.parametrize("reduction, value", [("mean", 0.228864), ("sum", 1.830909),
                                              ("none", 1.830909)])
def test_mse_loss_is_one_node_over_the_network_output(reduction, value):
    _, out = _network_output()
    loss = F.mse_loss(out, ember.tensor(TARGET), reduction=reduction)
    assert type(loss.grad_fn).__name__ == "MseLossBackward0"
    assert _edges(loss.grad_fn) == [("AddmmBackward0", 0), (None, 0)]
    assert loss.grad_fn.next_functions[0][0] is out.grad_fn
    assert loss.sum().item() == pytest.approx(value, rel=1e-5)


def test_mse_loss_gradients_and_double_backward():
    lin, out = _network_output()
    ember.nn.MSELoss()(out, ember.tensor(TARGET)).backward()
    assert lin.bias.grad.tolist() == pytest.approx([-0.038636, -0.506818], abs=1e-5)
    w = ember.tensor([0.5, -1.0, 2.0], requires_grad=True)
    t = ember.tensor([1.0, 0.0, 1.0])
    expected = {"mean": ([-0.5, -1.33333, 8.0], [-0.33333, 4.0, 14.66667]),
                "sum": ([-1.5, -4.0, 24.0], [-1.0, 12.0, 44.0])}
    for reduction, (grad, second) in expected.items():
        (g,) = ember.autograd.grad(F.mse_loss(w * w, t, reduction=reduction), w,
                                   create_graph=True)
        assert g.tolist() == pytest.approx(grad, abs=1e-4)
        (h,) = ember.autograd.grad(g.sum(), w)
        assert h.tolist() == pytest.approx(second, abs=1e-4)


def test_mse_loss_edges_for_promoted_broadcast_and_weighted_operands():
    w = ember.tensor([0.5, -1.0, 2.0], requires_grad=True)
    t = ember.tensor([1.0, 0.0, 1.0], requires_grad=True)
    loss = F.mse_loss(w, t.double())
    assert loss.dtype == ember.float64
    assert _edges(loss.grad_fn) == [("AccumulateGrad", 0), ("ToCopyBackward0", 0)]
    loss.backward()
    assert w.grad.dtype == ember.float32
    assert w.grad.tolist() == pytest.approx([-1 / 3, -2 / 3, 2 / 3])
    assert t.grad.tolist() == pytest.approx([1 / 3, 2 / 3, -2 / 3])
    with pytest.warns(UserWarning, match="Using a target size"):
        loss = F.mse_loss(ember.zeros(2, 3), w * 2)
    assert _edges(loss.grad_fn) == [(None, 0), ("ExpandBackward0", 0)]
    loss = F.mse_loss(w, ember.ones(3), weight=ember.tensor([1.0, 2.0, 3.0]))
    assert type(loss.grad_fn).__name__ == "DivBackward0"      # PyTorch's composite
    assert loss.item() == pytest.approx(1.875)


def test_mse_loss_of_nothing_is_nan():
    x = ember.zeros(0, requires_grad=True)
    loss = F.mse_loss(x, ember.zeros(0))
    assert loss.isnan().item() and type(loss.grad_fn).__name__ == "MseLossBackward0"
    loss.backward()
    assert x.grad.shape == (0,)


@pytest.mark.parametrize("loss, node", [
    (lambda x, t: F.huber_loss(x, t, delta=0.7), "HuberLossBackward0"),
    (lambda x, t: F.smooth_l1_loss(x, t, beta=0.5), "SmoothL1LossBackward0"),
])
def test_huber_and_smooth_l1_are_one_node(loss, node):
    _, out = _network_output()
    value = loss(out, ember.tensor(TARGET))
    assert type(value.grad_fn).__name__ == node
    assert _edges(value.grad_fn) == [("AddmmBackward0", 0), (None, 0)]


def test_huber_and_smooth_l1_second_derivatives_at_the_boundary():
    x = ember.tensor([0.5, -1.0, 2.0, 1.3, -0.2], requires_grad=True)
    t = ember.tensor([1.0, 0.0, 1.0, 0.3, 0.1])
    # x * x - t is 1 (delta) at x = -1: the linear branch's derivative, 0, as PyTorch
    for loss, grad, second in (
            (F.huber_loss, [-0.15, -0.4, 0.8, 0.52, 0.0048], [-0.1, 0.4, 0.4, 0.4, 0.008]),
            (lambda a, b: F.smooth_l1_loss(a, b, beta=0.5),
             [-0.2, -0.4, 0.8, 0.52, 0.0096], [-0.4, 0.4, 0.4, 0.4, 0.016])):
        (g,) = ember.autograd.grad(loss(x * x, t), x, create_graph=True)
        (h,) = ember.autograd.grad(g.sum(), x)
        assert g.tolist() == pytest.approx(grad, abs=1e-4)
        assert h.tolist() == pytest.approx(second, abs=1e-4)


def test_weighted_huber_and_smooth_l1_without_beta_are_composites():
    x = ember.tensor([0.5, -1.0, 2.0], requires_grad=True)
    t = ember.tensor([1.0, 0.0, 1.0])
    weighted = F.huber_loss(x, t, weight=ember.tensor([1.0, 2.0, 3.0]))
    assert (type(weighted.grad_fn).__name__, _edges(weighted.grad_fn)) == \
        ("MeanBackward0", [("MulBackward0", 0)])
    l1 = F.smooth_l1_loss(x, t, beta=0.0)
    assert (type(l1.grad_fn).__name__, _edges(l1.grad_fn)) == \
        ("MeanBackward0", [("AbsBackward0", 0)])
    assert l1.item() == pytest.approx(5 / 6)
