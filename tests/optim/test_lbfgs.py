"""L-BFGS on the Rosenbrock function, with and without the strong-Wolfe line search."""

import warnings

import numpy as np
import pytest

import ember
from ember import nn, optim


def rosenbrock(xy):
    x, y = xy[0], xy[1]
    return (1 - x) ** 2 + 100 * (y - x * x) ** 2


def _minimize(line_search_fn, steps=30, **options):
    p = nn.Parameter(ember.tensor([-1.5, 2.0], dtype=ember.float64))
    opt = optim.LBFGS([p], line_search_fn=line_search_fn, **options)
    losses = []

    def closure():
        opt.zero_grad()
        loss = rosenbrock(p)
        loss.backward()
        return loss
    for _ in range(steps):
        losses.append(opt.step(closure).item())
    return p, opt, losses


def test_strong_wolfe_finds_the_rosenbrock_minimum():
    p, opt, losses = _minimize("strong_wolfe", steps=5)
    np.testing.assert_allclose(p.detach().numpy(), [1.0, 1.0], atol=1e-5)
    state = opt.state[p]
    assert state["func_evals"] > state["n_iter"] > 0
    assert losses[0] > losses[-1]


def test_fixed_step_decreases_the_loss():
    _, _, losses = _minimize(None, steps=20, lr=0.1)
    assert losses[-1] < 0.1 * losses[0]


def test_stops_when_the_gradient_is_already_small():
    p = nn.Parameter(ember.tensor([1.0, 1.0], dtype=ember.float64))
    opt = optim.LBFGS([p])
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = rosenbrock(p)
        loss.backward()
        return loss
    opt.step(closure)
    assert len(calls) == 1


def test_history_is_bounded_and_state_is_in_pytorch_keys():
    p, opt, _ = _minimize("strong_wolfe", steps=2, history_size=3)
    state = opt.state[p]
    assert len(state["old_dirs"]) <= 3
    assert {"func_evals", "n_iter", "d", "t", "old_dirs", "old_stps", "ro", "H_diag",
            "prev_flat_grad", "prev_loss"} <= set(state)


def test_state_keeps_the_two_loop_coefficients_as_pytorch_does():
    x = nn.Parameter(ember.tensor([-1.5, 2.0, 0.5], dtype=ember.float64))
    opt = optim.LBFGS([x], max_iter=4, history_size=6, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()
        loss.backward()
        return loss
    opt.step(closure)
    al = opt.state[x]["al"]                 # one slot per pair it can keep, None where none
    assert len(al) == 6 and al[3:] == [None, None, None]
    np.testing.assert_allclose([a.item() for a in al[:3]],     # PyTorch's values
                               [-0.0056100373822707, 0.0011504672898312, 0.4070128481733085],
                               rtol=1e-9)


def test_line_search_stays_within_max_eval():
    # a far too long first step: the zoom needs more evaluations than max_eval leaves, so the
    # search stops at the budget and keeps its best point (the start), as PyTorch does
    x = ember.tensor([-1.5, 2.0], dtype=ember.float64, requires_grad=True)
    opt = optim.LBFGS([x], lr=1e3, max_iter=3, line_search_fn="strong_wolfe")
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2
        loss.backward()
        return loss
    opt.step(closure)
    assert len(calls) == 4 and opt.state[x]["func_evals"] == 4
    assert x.tolist() == [-1.5, 2.0]


def test_bad_options():
    a, b = nn.Parameter(ember.ones(1)), nn.Parameter(ember.ones(1))
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        optim.LBFGS([{"params": [a]}, {"params": [b]}])
    opt = optim.LBFGS([a], line_search_fn="backtracking")
    a.grad = ember.ones(1)
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt.step(lambda: (a * a).sum())


def test_step_runs_without_grad_mode():
    """PyTorch's step runs under no_grad (only the closure under enable_grad): reading the
    loss as a number warns about nothing."""
    x = nn.Parameter(ember.tensor([1.5, -0.5]))
    opt = optim.LBFGS([x], lr=1)
    modes = []

    def closure():
        opt.zero_grad()
        modes.append(ember.is_grad_enabled())
        loss = ((x - 1) ** 2).sum()
        loss.backward()
        return loss
    opt.register_step_post_hook(lambda *_: modes.append("post"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step(closure)
    assert modes[0] is True and modes[-1] == "post"
    assert x.tolist() == pytest.approx([1.0, 1.0])


def test_complex_parameters_step_as_pairs_of_reals():
    """As PyTorch: a complex parameter is optimized as its (real, imag) pairs, so its path
    is that of the same problem over a real parameter holding the pairs."""
    target = ember.tensor([1.0 + 2.0j, -0.5 + 0.25j], dtype=ember.complex128)

    def run(param, as_complex):
        opt = optim.LBFGS([param], lr=0.5, max_iter=4)

        def closure():
            opt.zero_grad()
            z = param if as_complex else ember.view_as_complex(param)
            diff = ember.view_as_real(z - target)
            loss = (diff ** 2).sum() + (diff ** 4).sum()
            loss.backward()
            return loss
        for _ in range(2):
            opt.step(closure)
        return ember.view_as_real(param.detach()) if as_complex else param.detach()

    z = run(nn.Parameter(ember.zeros(2, dtype=ember.complex128)), True)
    r = run(nn.Parameter(ember.zeros(2, 2, dtype=ember.float64)), False)
    assert z.tolist() == r.tolist()
    assert r.tolist() != [[0.0, 0.0], [0.0, 0.0]]


def test_unknown_line_search_is_only_refused_when_a_search_would_run():
    """As PyTorch: a zero gradient returns before the line search is looked at."""
    a = nn.Parameter(ember.ones(1))
    opt = optim.LBFGS([a], line_search_fn="backtracking")
    assert opt.step(lambda: (a * a).sum()).item() == 1.0     # no backward: no gradient
    assert a.tolist() == [1.0]
