"""Review round 24 (a): func transforms over closures keep their results in the outer graph
without walking that graph once per result."""

import numpy as np
import pytest

import ember
from ember.autograd import graph
from ember.func import functional_call, grad, vjp, vmap


def _mlp(depth):
    ember.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [ember.nn.Linear(4, 4), ember.nn.Tanh()]
    return ember.nn.Sequential(*layers, ember.nn.Linear(4, 1))


@pytest.fixture
def edge_reads(monkeypatch):
    """Counts reads of Node.next_functions and of the engine's alias, Node._edges."""
    slot = graph.Node.__dict__["next_functions"]
    count = [0]

    def read(node):
        count[0] += 1
        return slot.__get__(node)
    counted = property(read, lambda node, v: slot.__set__(node, v))
    monkeypatch.setattr(graph.Node, "next_functions", counted)
    monkeypatch.setattr(graph.Node, "_edges", counted)     # (the engine walks this alias)
    return count


def _reads(edge_reads, depth, lam):
    model = _mlp(depth)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = ember.ones(1, 4)

    def loss(p):
        out = functional_call(model, p, (x,)).sum()
        return out + lam if lam is not None else out
    before = edge_reads[0]
    grads = grad(loss)(params)
    assert not any(g.requires_grad for g in grads.values())     # none depends on lam
    return edge_reads[0] - before


def test_closure_walk_is_linear_in_the_graph(edge_reads):
    # one gradient per parameter: walking each one's double-backward graph separately read
    # ~15x the edges the transform itself reads at depth 40 (quadratic in depth)
    lam = ember.tensor(0.5, requires_grad=True)
    plain, closure = _reads(edge_reads, 40, None), _reads(edge_reads, 40, lam)
    assert closure < 4 * plain, (closure, plain)


def test_results_follow_the_closure():
    w = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = ember.tensor([0.5, -1.0, 2.0])
    out, pull = vjp(lambda x: ((x * w).sin(), x * 2, x.sum() + w.sum()), x)
    assert [y.requires_grad for y in out] == [True, False, True]
    g, = pull((ember.ones(3), ember.ones(3), ember.tensor(1.0)))
    assert g.requires_grad
    g.sum().backward()
    # d/dw sum_i (w_i cos(x_i w_i) + 2 + 1) = cos(x w) - x w sin(x w)
    xn, wn = x.numpy(), w.detach().numpy()
    np.testing.assert_allclose(w.grad.numpy(), np.cos(xn * wn) - xn * wn * np.sin(xn * wn),
                               rtol=1e-5)


def test_vmap_grad_over_closed_model_requires_grad():
    model = _mlp(3)
    xs = ember.ones(5, 4)
    g = vmap(grad(lambda x: model(x).sum()))(xs)
    assert g.requires_grad and g.shape == (5, 4)
    with ember.no_grad():
        assert not vmap(grad(lambda x: model(x).sum()))(xs).requires_grad
