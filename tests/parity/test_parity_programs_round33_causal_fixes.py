"""What the causal discovery / Bayesian optimisation / empirical NTK programs of round 33
(test_parity_programs_round33_causal.py) found, pinned against PyTorch.

- a linearised network trained by hand (``f_lin = out0 + jvp_fn(params - p0)``, a backward
  per step) failed at the second step with "Trying to backward through the graph a second
  time": the backward through jvp_fn's result walked into (and freed) the graph of
  linearize's traced run. PyTorch folds what jvp_fn computes from the primals into
  constants: its results' gradients reach the tangents alone (not a tensor ``func`` closes
  over, nor a primal that requires grad), call after call."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _linearized_steps(lib, primal_requires_grad, closure):
    w0 = lib.tensor([[0.5, -0.3], [0.2, 0.8]], requires_grad=primal_requires_grad)
    x = lib.tensor([[1.0, 2.0], [0.5, -1.0]])
    c = lib.tensor([1.5, -2.0], requires_grad=True)

    def f(w):
        y = lib.tanh(x @ w)
        return y * c if closure else y
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # (PyTorch's fx tracing warns)
        out0, jvp_fn = lib.func.linearize(f, w0)
        w = w0.detach().clone().requires_grad_()
        res = []
        for _ in range(3):
            y = out0.detach() + jvp_fn(w - w0.detach())
            loss = (y ** 2).sum()
            loss.backward()
            res.append([loss.item(), w.grad.tolist(), y.requires_grad])
    res.append([None if c.grad is None else c.grad.tolist(),
                None if w0.grad is None else w0.grad.tolist()])
    return res


@pytest.mark.parametrize("primal_requires_grad", [False, True])
@pytest.mark.parametrize("closure", [False, True])
def test_linearize_jvp_fn_backward_each_step(primal_requires_grad, closure):
    ours = _linearized_steps(ember, primal_requires_grad, closure)
    theirs = _linearized_steps(torch, primal_requires_grad, closure)
    for (lo, go, ro), (lt, gt, rt) in zip(ours[:-1], theirs[:-1]):
        np.testing.assert_allclose(lo, lt, rtol=1e-5)
        np.testing.assert_allclose(go, gt, rtol=1e-5, atol=1e-6)
        assert ro == rt
    assert ours[-1] == theirs[-1]


def test_linearize_jvp_fn_of_a_network_trained_by_sgd():
    def run(lib):
        lin = lib.nn.Linear(3, 2)
        with lib.no_grad():
            lin.weight.copy_(lib.tensor([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]]))
            lin.bias.copy_(lib.tensor([0.05, -0.05]))
        p0 = {k: v.detach().clone() for k, v in lin.named_parameters()}
        x = lib.tensor([[1.0, -1.0, 0.5], [0.2, 0.3, -0.4]])

        def f(p):
            return lib.sin(lib.func.functional_call(lin, p, (x,)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out0, jvp_fn = lib.func.linearize(f, p0)
            p = {k: v.clone().requires_grad_() for k, v in p0.items()}
            opt = lib.optim.SGD(p.values(), lr=0.5)
            losses = []
            for _ in range(3):
                opt.zero_grad()
                y = out0 + jvp_fn({k: p[k] - p0[k] for k in p0})
                loss = y.square().mean()
                loss.backward()
                opt.step()
                losses.append(loss.item())
        return losses, [v.tolist() for v in p.values()], [v.grad is None for v in
                                                          lin.parameters()]
    ours, theirs = run(ember), run(torch)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5)
    for a, b in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert ours[2] == theirs[2]
