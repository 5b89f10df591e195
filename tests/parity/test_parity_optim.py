"""Optimizers against PyTorch's: the same gradients give the same trajectories and the same
state_dict layout. Skipped when PyTorch is not installed."""

import numpy as np
import pytest

import ember
from tests.optim import trajectories as T
from tests.optim.test_optimizers import CASES, _ids

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _run_torch(name, options, params0, grads):
    params = [torch.nn.Parameter(torch.tensor(p.copy())) for p in params0]
    opt = getattr(torch.optim, name)(params, **options)
    history = []
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = torch.tensor(g.copy())
            if name == "SparseAdam":
                p.grad = p.grad.to_sparse()
        opt.step()
        history.append([p.detach().numpy().copy() for p in params])
    return history, opt


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_trajectory_and_state_dict_match_pytorch(case):
    cls, _, options = case
    grads, params0 = T.gradient_sequence(sparse=cls is ember.optim.SparseAdam), T.initial_params()
    ours, opt = T.run_ember(lambda ps: cls(ps, **options), params0, grads)
    theirs, topt = _run_torch(cls.__name__, options, params0, grads)
    for a, b in zip(ours[-1], theirs[-1]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert sd["param_groups"] == tsd["param_groups"]
    assert sd["state"].keys() == tsd["state"].keys()
    for i, state in sd["state"].items():
        assert list(state) == list(tsd["state"][i])
        for key, value in state.items():
            want = tsd["state"][i][key]
            if not isinstance(want, torch.Tensor):
                assert value == want
                continue
            assert value.dtype is getattr(ember, str(want.dtype).split(".")[1])
            np.testing.assert_allclose(value.numpy(), want.numpy(), rtol=1e-10)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_matches_pytorch_on_rosenbrock(line_search_fn):
    def run(lib, steps=4 if line_search_fn else 2):   # fixed steps amplify rounding: keep it short
        p = lib.nn.Parameter(lib.tensor([-1.5, 2.0, 0.5], dtype=lib.float64))
        opt = lib.optim.LBFGS([p], lr=0.5 if line_search_fn is None else 1,
                              history_size=4, line_search_fn=line_search_fn)

        def closure():
            opt.zero_grad()
            loss = ((1 - p[:-1]) ** 2 + 100 * (p[1:] - p[:-1] ** 2) ** 2).sum()
            loss.backward()
            return loss
        for _ in range(steps):
            opt.step(closure)
        return p.detach().numpy(), opt.state[p]["func_evals"]
    (ours, our_evals), (theirs, their_evals) = run(ember), run(torch)
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)
    assert our_evals == their_evals
