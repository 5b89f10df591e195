"""Optimizers against PyTorch's (round 15): a float32 tensor lr's rounding, LBFGS's state
when no iteration runs, its key order and step length, Rprop's ``differentiable=True`` and
``swap_in_optimizer_params_and_state``. Skipped without PyTorch."""

import re

import numpy as np
import pytest

import ember
from tests.optim import trajectories as T

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _trajectory(lib, name, options):
    """Parameters (float64) after six steps on fixed gradients, with a float32 tensor lr."""
    params = [lib.nn.Parameter(lib.tensor(p.copy())) for p in T.initial_params()]
    opt = getattr(lib.optim, name)(params, lr=lib.tensor(0.01), **options)
    for grads in T.gradient_sequence():
        for p, g in zip(params, grads):
            p.grad = lib.tensor(g.copy())
        opt.step()
    return [p.detach().numpy() for p in params]


@pytest.mark.parametrize("name, options", [
    ("Adam", {"amsgrad": True, "weight_decay": 0.1}), ("AdamW", {}), ("Adamax", {}),
    ("NAdam", {"decoupled_weight_decay": True, "weight_decay": 0.1}),
    ("Adagrad", {"lr_decay": 0.01}), ("SGD", {"momentum": 0.9}), ("RMSprop", {}),
    ("RAdam", {}),
])
def test_float32_tensor_lr_rounds_as_in_pytorch(name, options):
    """PyTorch derives step sizes from a float32 lr in float32 (lr / bias correction);
    a float64 trajectory shows it from the first step."""
    for ours, theirs in zip(_trajectory(ember, name, options), _trajectory(torch, name, options)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-13, atol=1e-15)


def _float32_trajectory(lib, name):
    """float32 parameters after six steps under a float64 tensor lr."""
    params = [lib.nn.Parameter(lib.tensor(p.astype(np.float32))) for p in T.initial_params()]
    opt = getattr(lib.optim, name)(params, lr=lib.tensor(0.01, dtype=lib.float64))
    for grads in T.gradient_sequence():
        for p, g in zip(params, grads):
            p.grad = lib.tensor(g.astype(np.float32))
        opt.step()
    return [p.detach().numpy() for p in params]


@pytest.mark.parametrize("name", ["Adam", "AdamW", "RMSprop", "Adagrad", "NAdam", "RAdam"])
def test_float64_tensor_lr_over_float32_params_rounds_as_in_pytorch(name):
    """A 0-d float64 lr does not promote float32 parameters' arithmetic, as in PyTorch."""
    for ours, theirs in zip(_float32_trajectory(ember, name), _float32_trajectory(torch, name)):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-7)    # a few ulp at most


def _lbfgs_state(lib, **options):
    p = lib.nn.Parameter(lib.tensor([1.0, -2.0, 3.0]))
    opt = lib.optim.LBFGS([p], **options)

    def closure():
        opt.zero_grad()
        loss = (p ** 4).sum() + p.prod()
        loss.backward()
        return loss
    losses = [opt.step(closure).item() for _ in range(2)]
    state = opt.state_dict()["state"][0]
    return losses, p.tolist(), list(state), {k: v for k, v in state.items()
                                            if not isinstance(v, (lib.Tensor, list))}


def test_lbfgs_with_max_iter_0_keeps_none_state_like_pytorch():
    ours, theirs = _lbfgs_state(ember, max_iter=0), _lbfgs_state(torch, max_iter=0)
    assert ours == theirs
    assert ours[3]["d"] is None and ours[3]["n_iter"] == 0


def test_lbfgs_state_keys_come_in_pytorchs_order():
    ours, theirs = _lbfgs_state(ember, max_iter=3), _lbfgs_state(torch, max_iter=3)
    assert ours[2] == theirs[2]
    assert ours[2].index("t") == ours[2].index("d") + 1


def test_rprop_differentiable_on_a_leaf_raises_like_pytorch():
    def run(lib):
        p = lib.nn.Parameter(lib.ones(2))
        opt = lib.optim.Rprop([p], differentiable=True)
        p.grad = lib.ones(2)
        with pytest.raises(RuntimeError) as info:
            opt.step()
        return str(info.value)
    assert run(ember) == run(torch)


def test_rprop_differentiable_records_the_step_on_a_non_leaf():
    def run(lib):
        w0 = lib.tensor([1.0, -2.0, 0.5], dtype=lib.float64, requires_grad=True)
        w = w0.clone()
        opt = lib.optim.Rprop([w], lr=0.1, differentiable=True)
        w.grad, = lib.autograd.grad((w ** 3).sum(), w, create_graph=True)
        opt.step()
        return w0, w
    (w0, ours), (_, theirs) = run(ember), run(torch)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-15)
    assert type(ours.grad_fn).__name__ == type(theirs.grad_fn).__name__ == "AddcmulBackward0"
    # the step is constant in the graph (sign() passes no gradient): d w / d w0 = 1. (PyTorch's
    # own backward fails here on a saved tensor its step modified.)
    (ours * ember.tensor([1.0, 2.0, 3.0], dtype=ember.float64)).sum().backward()
    assert w0.grad.tolist() == [1.0, 2.0, 3.0]


def _swap_run(lib):
    """What swap_in_optimizer_params_and_state does and raises, step by step."""
    out = []

    def setup(named=False, groups=False):
        model = lib.nn.Linear(2, 2)
        with lib.no_grad():
            model.weight.copy_(lib.tensor([[1.0, 2.0], [3.0, 4.0]]))
            model.bias.copy_(lib.tensor([0.5, -0.5]))
        params = model.named_parameters() if named else model.parameters()
        if groups:
            params = [{"params": [model.weight]}, {"params": [model.bias], "lr": 0.3}]
        opt = lib.optim.SGD(params, lr=0.1, momentum=0.9)
        model(lib.ones(1, 2)).sum().backward()
        opt.step()
        swapin = {n: p.detach().clone() for n, p in model.named_parameters()}
        for p in swapin.values():
            p.grad = lib.ones_like(p)
        return model, opt, swapin

    def attempt(label, opt, swapin, osd, body=lambda opt: None):
        state, groups, options = opt.state, opt.param_groups, dict(opt.param_groups[0])
        try:
            with lib.optim.swap_in_optimizer_params_and_state(opt, swapin, osd):
                result = body(opt)
        except Exception as e:
            out.append((label, type(e).__name__, re.sub("torch", "ember", str(e))))
            return
        out.append((label, result, opt.state is state, opt.param_groups is groups,
                    opt.param_groups[0] == options))

    def values(tensors):
        return [t.detach().numpy().round(5).tolist() for t in tensors]

    model, opt, swapin = setup()
    sd = opt.state_dict()
    osd = {"state": {k: {"momentum_buffer": v["momentum_buffer"].clone()}
                     for k, v in sd["state"].items()},
           "param_groups": [dict(g, lr=0.5) for g in sd["param_groups"]]}
    attempt("step", opt, swapin, osd,
            lambda opt: (opt.step(), opt.param_groups[0]["lr"], type(opt.state).__name__)[1:])
    out.append(values(swapin.values()) + values(model.parameters())
               + values(osd["state"][i]["momentum_buffer"] for i in (0, 1)))
    groups = osd["param_groups"]
    attempt("two groups", opt, swapin, {"state": osd["state"], "param_groups": groups * 2})
    attempt("short group", opt, swapin,
            {"state": osd["state"], "param_groups": [dict(groups[0], params=[0])]})
    attempt("no state", opt, swapin, {"state": {}, "param_groups": groups},
            lambda opt: [len(v) for v in opt.state.values()])
    attempt("extra key", opt, swapin, {"state": {**osd["state"], 5: {}}, "param_groups": groups})
    attempt("state missing", opt, swapin, {"param_groups": groups})
    attempt("groups missing", opt, swapin, {"state": {}})
    attempt("entry not a dict", opt, swapin, {"state": {0: 5}, "param_groups": groups})
    attempt("too few", opt, dict(list(swapin.items())[:1]), osd)
    attempt("too many", opt, {**swapin, "x": lib.ones(1)}, osd)
    attempt("edits", opt, swapin, osd, lambda opt: (
        opt.param_groups[0].update(lr=9.0, extra=1),
        opt.state[opt.param_groups[0]["params"][0]].update(extra=1)))
    out.append((sorted(osd["state"][0]), osd["param_groups"][0]["lr"]))
    attempt("raises", opt, swapin, osd, lambda opt: 1 / 0)
    out.append(opt.param_groups[0]["params"][0] is model.weight)
    model, opt, swapin = setup(groups=True)
    sd = opt.state_dict()
    crossed = {"state": {0: sd["state"][1], 1: sd["state"][0]},
               "param_groups": [dict(sd["param_groups"][0], params=[1]),
                                dict(sd["param_groups"][1], params=[0])]}
    attempt("crossed ids", opt, swapin, crossed, lambda opt: [
        tuple(opt.state[p]["momentum_buffer"].shape) for g in opt.param_groups
        for p in g["params"]])
    model, opt, swapin = setup(named=True)
    attempt("named", opt, {"a": swapin["weight"], "b": swapin["bias"]}, opt.state_dict(),
            lambda opt: opt.state_dict()["param_groups"][0]["param_names"])
    attempt("uninitialized", lib.optim.SGD(model.parameters(), lr=0.1), swapin, osd)
    return out


def test_swap_in_optimizer_params_and_state_matches_pytorch():
    ours, theirs = _swap_run(ember), _swap_run(torch)
    for got, want in zip(ours, theirs):
        assert got == want
    assert len(ours) == len(theirs) == 18


def test_lbfgs_step_length_under_a_tensor_lr_is_a_tensor_like_pytorchs():
    def run(lib):
        p = lib.nn.Parameter(lib.tensor([1.0, -2.0, 3.0], dtype=lib.float64))
        opt = lib.optim.LBFGS([p], lr=lib.tensor(0.5), max_iter=3)

        def closure():
            opt.zero_grad()
            loss = (p ** 4).sum() + p.prod()
            loss.backward()
            return loss
        for _ in range(2):
            opt.step(closure)
        t = opt.state_dict()["state"][0]["t"]
        return str(t.dtype).split(".")[1], t.item(), p.tolist()
    ours, theirs = run(ember), run(torch)
    assert ours[0] == theirs[0] == "float32"
    np.testing.assert_allclose([ours[1], *ours[2]], [theirs[1], *theirs[2]], rtol=1e-12)
