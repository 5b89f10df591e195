"""Samplers with parameters that require grad record PyTorch's nodes: NormalBackward1/2/3,
BernoulliBackward0 and PoissonBackward0 pass zero gradients back; binomial, bernoulli with a
scalar p and _sample_dirichlet record a NotImplemented node that refuses backward."""

import pytest

import ember


def _names(t):
    return type(t.grad_fn).__name__, [(None if n is None else type(n).__name__, i)
                                      for n, i in t.grad_fn.next_functions]


def _leaf(values):
    return ember.tensor(values, requires_grad=True)


@pytest.mark.parametrize("args, node, edges", [
    (lambda m, s: (m, s), "NormalBackward3", 2),
    (lambda m, s: (m, 1.0), "NormalBackward1", 1),
    (lambda m, s: (0.0, s), "NormalBackward2", 1),
])
def test_normal_records_a_zero_gradient_node(args, node, edges):
    m, s = _leaf([0.5, -1.0, 2.0]), _leaf([1.0, 0.5, 2.0])
    out = ember.normal(*args(m, s))
    assert out.requires_grad
    assert _names(out) == (node, [("AccumulateGrad", 0)] * edges)
    out.sum().backward()
    for leaf in args(m, s):
        if isinstance(leaf, ember.Tensor):
            assert leaf.grad.tolist() == [0.0, 0.0, 0.0]


def test_normal_edges_list_a_parameter_without_grad_and_broadcast_gradients():
    m, s = ember.tensor([[0.5], [1.0]]), _leaf([1.0, 0.5, 2.0])
    out = ember.normal(m, s)
    assert out.shape == (2, 3)
    assert _names(out) == ("NormalBackward3", [(None, 0), ("AccumulateGrad", 0)])
    out.sum().backward()
    assert s.grad.tolist() == [0.0, 0.0, 0.0]


def test_bernoulli_and_poisson_nodes():
    p = _leaf([0.2, 0.7, 1.0])
    for out, node in ((ember.bernoulli(p), "BernoulliBackward0"),
                      (p.bernoulli(), "BernoulliBackward0"),
                      (ember.poisson(p * 3), "PoissonBackward0")):
        assert type(out.grad_fn).__name__ == node
        out.sum().backward()
        assert p.grad.tolist() == [0.0, 0.0, 0.0]
        assert set(out.tolist()) <= ({0.0, 1.0} if node[0] == "B" else set(range(20)))


@pytest.mark.parametrize("draw, kernel", [
    (lambda p: ember.bernoulli(p, 0.3), "bernoulli"),
    (lambda p: ember.binomial(p * 4, p), "binomial"),
    (lambda p: ember._sample_dirichlet(p), "_sample_dirichlet"),
])
def test_samplers_without_a_derivative_refuse_backward(draw, kernel):
    out = draw(_leaf([0.2, 0.7, 0.9]))
    assert type(out.grad_fn).__name__ == "NotImplemented"
    with pytest.raises(RuntimeError, match=f"^derivative for aten::{kernel} is not "
                                           f"implemented$"):
        out.sum().backward()


def test_the_zero_gradients_of_a_double_backward_have_no_history():
    m, s = _leaf([0.5, -1.0]), _leaf([1.0, 0.5])
    (g,) = ember.autograd.grad(ember.normal(m, s).sum(), m, create_graph=True)
    assert g.tolist() == [0.0, 0.0] and not g.requires_grad


def test_no_node_without_grad_and_out_refuses_grad():
    p = _leaf([0.5, 0.5])
    with ember.no_grad():
        assert not ember.normal(p, 1.0).requires_grad
    assert not ember.bernoulli(p.detach()).requires_grad
    out = ember.empty(2)
    assert ember.normal(p.detach(), 1.0, out=out) is out
    for call, name in ((lambda: ember.normal(p, 1.0, out=ember.empty(2)), "normal"),
                       (lambda: ember.bernoulli(p, out=ember.empty(2)), "bernoulli")):
        with pytest.raises(RuntimeError, match=rf"^{name}\(\): functions with out=\.\.\. "
                                               r"arguments don't support automatic"):
            call()
