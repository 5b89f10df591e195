"""Optimizers against PyTorch's: the same gradients give the same trajectories and the same
state_dict layout. Skipped when PyTorch is not installed."""

import re

import numpy as np
import pytest

import ember
from tests.optim import trajectories as T
from tests.optim.test_optimizers import CASES, SHAPES, _ids

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
    shapes = SHAPES.get(cls, T.SHAPES)
    grads = T.gradient_sequence(shapes=shapes, sparse=cls is ember.optim.SparseAdam)
    params0 = T.initial_params(shapes=shapes)
    ours, opt = T.run_ember(lambda ps: cls(ps, **options), params0, grads,
                            sparse=cls is ember.optim.SparseAdam)
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


def _to_ember(state_dict):
    """A PyTorch optimizer state_dict with ember tensors in place of PyTorch's."""
    return {"state": {i: {k: ember.tensor(v.numpy()) for k, v in s.items()}
                      for i, s in state_dict["state"].items()},
            "param_groups": state_dict["param_groups"]}


@pytest.mark.parametrize("name, options, shapes", [
    ("Muon", dict(lr=0.02, adjust_lr_fn="match_rms_adamw"), ((3, 4), (6, 2))),
    ("Adafactor", dict(lr=0.1, weight_decay=0.1), ((3, 4), (4,), (2, 3, 4))),
])
def test_a_pytorch_checkpoint_resumes_in_ember(name, options, shapes):
    grads, params0 = T.gradient_sequence(shapes=shapes), T.initial_params(shapes=shapes)
    first, topt = _run_torch(name, options, params0, grads[:3])
    params = [ember.nn.Parameter(ember.tensor(p.copy())) for p in first[-1]]
    opt = getattr(ember.optim, name)(params, **options)
    opt.load_state_dict(_to_ember(topt.state_dict()))
    tparams = [p for g in topt.param_groups for p in g["params"]]
    for step_grads in grads[3:]:
        for p, tp, g in zip(params, tparams, step_grads):
            p.grad, tp.grad = ember.tensor(g.copy()), torch.tensor(g.copy())
        opt.step()
        topt.step()
    for p, tp in zip(params, tparams):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)


# how far, as a fraction of how far the parameters moved, the trajectories may part: products
# summed in another order, or 16-bit roundings, may round a bfloat16 Newton-Schulz entry the
# other way (and Muon's polynomial amplifies it)
DRIFT = {("Muon", "float32"): 0.02, ("Muon", "bfloat16"): 0.15,
         ("Adafactor", "float32"): 1e-5, ("Adafactor", "bfloat16"): 0.1}


@pytest.mark.parametrize("name, dtype", sorted(DRIFT))
def test_muon_and_adafactor_match_pytorch_on_larger_and_16_bit_parameters(name, dtype):
    shapes = ((32, 64), (96, 48))
    grads = T.gradient_sequence(shapes=shapes)
    params0 = [0.05 * p for p in T.initial_params(shapes=shapes)]   # finer bfloat16 steps
    runs = []
    for lib in (ember, torch):
        params = [lib.nn.Parameter(lib.tensor(p).to(getattr(lib, dtype))) for p in params0]
        opt = getattr(lib.optim, name)(params, lr=0.02 if name == "Muon" else 0.05)
        for step_grads in grads:
            for p, g in zip(params, step_grads):
                p.grad = lib.tensor(g).to(getattr(lib, dtype))
            opt.step()
        runs.append([p.detach().float().numpy().astype(np.float64) for p in params])
    for ours, theirs, start in zip(*runs, params0):
        moved = np.abs(theirs - start).max()
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=DRIFT[name, dtype] * moved)


@pytest.mark.parametrize("name, options", [
    ("Adam", {"amsgrad": True}), ("AdamW", {}), ("NAdam", {}), ("ASGD", {"t0": 1}),
    ("Adagrad", {"fused": True}), ("Adam", {"fused": True}),
])
def test_float64_default_dtype_scalar_state_matches_pytorch(name, options):
    """Step counts and scalar state follow a float64 default dtype (not when fused)."""
    ember.set_default_dtype(ember.float64)
    torch.set_default_dtype(torch.float64)
    try:
        grads, params0 = T.gradient_sequence(), T.initial_params()
        theirs, topt = _run_torch(name, options, params0, grads)
        ours, opt = T.run_ember(lambda ps: getattr(ember.optim, name)(ps, **options),
                                params0, grads)
    finally:
        ember.set_default_dtype(ember.float32)
        torch.set_default_dtype(torch.float32)
    for mine, yours in zip(opt.state_dict()["state"].values(),
                           topt.state_dict()["state"].values()):
        scalars = {k: str(v.dtype).split(".")[-1] for k, v in yours.items() if v.dim() == 0}
        assert {k: str(mine[k].dtype).split(".")[-1] for k in scalars} == scalars
    np.testing.assert_allclose(ours[-1][0], theirs[-1][0], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", ["Adam", "AdamW", "SGD", "RMSprop", "NAdam", "Adagrad"])
def test_an_older_checkpoint_loads_like_pytorchs(name):
    """Groups without the options newer PyTorch added, steps as Python numbers: both fill
    them in alike."""
    grads, params0 = T.gradient_sequence(), T.initial_params()
    _, topt = _run_torch(name, {"lr": 0.1}, params0, grads[:2])
    sd = topt.state_dict()
    for group in sd["param_groups"]:
        for key in ("maximize", "foreach", "differentiable", "fused", "capturable",
                    "decoupled_weight_decay"):
            group.pop(key, None)
    for state in sd["state"].values():
        if "step" in state:
            state["step"] = state["step"].item()
    params = [ember.nn.Parameter(ember.tensor(p.copy())) for p in params0]
    opt = getattr(ember.optim, name)(params, lr=0.1)
    opt.load_state_dict({"state": {i: {k: v if k == "step" else ember.tensor(v.numpy())
                                       for k, v in s.items()} for i, s in sd["state"].items()},
                         "param_groups": sd["param_groups"]})
    fresh = getattr(torch.optim, name)(topt.param_groups[0]["params"], lr=0.1)
    fresh.load_state_dict(sd)
    assert opt.param_groups[0].keys() == fresh.param_groups[0].keys()
    assert all(opt.param_groups[0][k] == v for k, v in fresh.param_groups[0].items()
               if k != "params")


def _failure(fn):
    """(exception type name, message with the library's name and addresses masked)."""
    with pytest.raises(Exception) as info:
        fn()
    message = re.sub(r" at 0x[0-9a-f]+", "", str(info.value)).replace("torch", "ember")
    return type(info.value).__name__, message


@pytest.mark.parametrize("name, options", [
    ("SparseAdam", {"lr": 0.0}), ("SparseAdam", {"eps": 0.0}),
    ("Adam", {"betas": (0.9,)}), ("NAdam", {"betas": (0.9,)}), ("RAdam", {"betas": (0.9,)}),
    ("Adamax", {"betas": (0.9,)}),
])
def test_constructor_errors_match_pytorch(name, options):
    def build(lib):
        return lambda: getattr(lib.optim, name)([lib.nn.Parameter(lib.ones(2))], **options)
    assert _failure(build(ember)) == _failure(build(torch))


def test_step_pre_hook_with_a_bad_result_names_the_step_like_pytorch():
    def run(lib):
        opt = lib.optim.SGD([lib.nn.Parameter(lib.ones(2))], lr=0.1)
        opt.register_step_pre_hook(lambda optimizer, args, kwargs: 5)
        return opt.step
    ours, theirs = _failure(run(ember)), _failure(run(torch))
    assert ours == theirs
    assert ours[1].startswith("<function SGD.step>")


def test_hook_tables_carry_pytorchs_attribute_names():
    tables = ["_optimizer_step_pre_hooks", "_optimizer_step_post_hooks",
              "_optimizer_state_dict_pre_hooks", "_optimizer_state_dict_post_hooks",
              "_optimizer_load_state_dict_pre_hooks", "_optimizer_load_state_dict_post_hooks"]

    def sizes(lib):
        opt = lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], lr=0.1)
        opt.register_step_pre_hook(lambda *args: None)
        opt.register_load_state_dict_post_hook(lambda optimizer: None)
        return [len(getattr(opt, name)) for name in tables]
    assert sizes(ember) == sizes(torch) == [1, 0, 0, 0, 0, 1]
