"""The graph shape of mse_loss and of samplers with parameters that require grad, against
PyTorch's: node names, edges (next_functions) and gradients."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _shape(t):
    node = t.grad_fn
    return type(node).__name__, [(None if n is None else type(n).__name__, i)
                                 for n, i in node.next_functions]


def _mse_cases(lib):
    F = lib.nn.functional
    w = lib.tensor([[0.5, -1.0, 2.0], [0.1, 0.2, 0.3]], requires_grad=True)
    t = lib.tensor([1.0, 0.0, 1.0])
    return w, [F.mse_loss(w * 2, t.expand(2, 3), reduction=r) for r in ("mean", "sum", "none")] \
        + [F.mse_loss(w.double(), t.expand(2, 3)), F.mse_loss(t.expand(2, 3), w + 1)]


def test_mse_loss_graph_and_gradients():
    (tw, theirs), (ew, ours) = _mse_cases(torch), _mse_cases(ember)
    for a, b in zip(ours, theirs):
        assert _shape(a) == _shape(b)
        assert np.allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)
        (ga,) = ember.autograd.grad(a.sum(), ew, create_graph=True)
        (gb,) = torch.autograd.grad(b.sum(), tw, create_graph=True)
        assert np.allclose(ga.detach().numpy(), gb.detach().numpy(), rtol=1e-6)
        (ha,) = ember.autograd.grad((ga * ga).sum(), ew)
        (hb,) = torch.autograd.grad((gb * gb).sum(), tw)
        assert np.allclose(ha.numpy(), hb.numpy(), rtol=1e-6)


def _samplers(lib):
    m = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
    s = lib.tensor([1.0, 0.5, 0.2], requires_grad=True)
    return m, s, [lib.normal(m, s), lib.normal(m, 1.0), lib.normal(0.0, s),
                  lib.normal(m.detach(), s), lib.bernoulli(s), s.bernoulli(),
                  lib.poisson(s * 3), lib.bernoulli(s, 0.5), lib.binomial(s * 3, s)]


def test_sampler_nodes_and_zero_gradients():
    tm, ts, theirs = _samplers(torch)
    em, es, ours = _samplers(ember)
    for a, b in zip(ours, theirs):
        assert _shape(a) == _shape(b)
        if _shape(b)[0] == "NotImplemented":
            with pytest.raises(RuntimeError, match="derivative for aten::"):
                a.sum().backward()
            continue
        a.sum().backward()
        b.sum().backward()
    assert em.grad.tolist() == tm.grad.tolist() and es.grad.tolist() == ts.grad.tolist()
