"""The engine's hook semantics: AccumulateGrad runs as soon as it is ready, node hooks must
return one value per gradient, AccumulateGrad's own hooks run, backward(create_graph=True)
warns of its reference cycle, and backward(inputs=[non-leaf]) retains that tensor's grad."""

import warnings

import pytest

import ember

nn = ember.nn


def test_a_leaf_accumulates_before_the_nodes_created_after_its_consumer():
    log = []
    net = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))
    net[0].register_full_backward_hook(lambda m, gi, go: log.append("first layer"))
    net[2].weight.register_hook(lambda g: log.append("tensor hook"))
    net[2].weight.register_post_accumulate_grad_hook(lambda p: log.append("accumulated"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # the input needs no grad: PyTorch warns
        net(ember.ones(3, 4)).sum().backward()
    assert log == ["tensor hook", "accumulated", "first layer"]


def test_node_hooks_must_return_one_value_per_gradient():
    x = ember.ones(2, requires_grad=True)
    y = x * 2
    y.grad_fn.register_prehook(lambda go: (go[0], go[0]))
    with pytest.raises(RuntimeError, match=r"hook '<lambda>' has returned an incorrect number "
                                           r"of values \(got 2, but expected 1\)"):
        y.sum().backward()
    z = x * 3
    z.grad_fn.register_hook(lambda gi, go: ())
    with pytest.raises(RuntimeError, match=r"\(got 0, but expected 2\)"):
        z.sum().backward()


def test_accumulate_grad_node_hooks_see_the_incoming_gradient():
    x = ember.ones(2, requires_grad=True)
    node = (x * 1).grad_fn.next_functions[0][0]
    seen = []
    node.register_hook(lambda gi, go: seen.append((gi, [g.tolist() for g in go])))
    (x * 5).sum().backward()
    assert seen == [((), [[5.0, 5.0]])]


def test_backward_with_create_graph_warns_only_when_a_grad_keeps_a_graph():
    a, b = ember.ones(2, requires_grad=True), ember.ones(2, requires_grad=True)
    with pytest.warns(UserWarning, match="create a reference cycle"):
        (a * a).sum().backward(create_graph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (b * 2).sum().backward(create_graph=True)       # its grad 2 keeps no graph


def test_backward_inputs_retain_a_non_leafs_grad_for_later_passes():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    y = (h * h).sum()
    y.backward(inputs=[h], retain_graph=True)
    assert h.retains_grad and h.grad.tolist() == [6.0, 12.0] and x.grad is None
    y.backward(retain_graph=True)
    assert h.grad.tolist() == [12.0, 24.0] and x.grad.tolist() == [18.0, 36.0]
    y.backward(inputs=[h, x])
    assert h.grad.tolist() == [18.0, 36.0] and x.grad.tolist() == [36.0, 72.0]
