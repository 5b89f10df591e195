"""Optimizer scalar state on CUDA parameters lives where PyTorch keeps it: ASGD's step, eta
and mu and NAdam's mu_product on the parameter's device always, step counts there under
``capturable`` or ``fused`` (else on the host); the steps match the CPU's."""

import pickle

import numpy as np
import pytest

import ember

pytestmark = pytest.mark.cuda

optim = ember.optim


def _run(device, make, dtype, steps=3):
    rng = np.random.default_rng(3)
    params = [ember.nn.Parameter(ember.tensor(rng.standard_normal(s)).to(dtype).to(device))
              for s in [(5,), (3, 4)]]
    opt = make(params)
    for _ in range(steps):
        for p in params:
            p.grad = ember.tensor(rng.standard_normal(p.shape)).to(dtype).to(device)
        opt.step()
    return opt, [p.detach().cpu().float().numpy() for p in params]


ASGD_CASES = [dict(foreach=f, **extra) for f in (None, True, False)
              for extra in ({}, {"maximize": True}, {"weight_decay": 0.1})]


@pytest.mark.parametrize("kw", ASGD_CASES, ids=str)
@pytest.mark.parametrize("dtype", [ember.float32, ember.float16, ember.bfloat16],
                         ids=str)
def test_asgd_steps_on_cuda_as_on_the_cpu(kw, dtype):
    # foreach=True crashed on its first step ("a host array reached multiply"): eta and mu
    # were host arrays that the multi-tensor addcmul took as its scalar
    make = lambda ps: optim.ASGD(ps, lr=0.05, t0=2, **kw)  # noqa: E731
    opt, got = _run("cuda", make, dtype)
    _, want = _run("cpu", make, dtype)
    tol = 1e-6 if dtype == ember.float32 else 2 ** -7
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    state = next(iter(opt.state.values()))
    assert {k: state[k].device.type for k in ("step", "eta", "mu", "ax")} == dict.fromkeys(
        ("step", "eta", "mu", "ax"), "cuda")
    assert state["step"].item() == 3 and state["mu"].item() == 1.0   # t0=2: 1 / (3 - 2)
    assert state["eta"].dtype == ember.float32


def test_asgd_capturable_runs_on_cuda():
    make = lambda ps: optim.ASGD(ps, lr=0.05, t0=1, capturable=True, foreach=True)  # noqa: E731
    _, got = _run("cuda", make, ember.float32)
    _, want = _run("cpu", lambda ps: optim.ASGD(ps, lr=0.05, t0=1, foreach=True), ember.float32)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name,kw,on_gpu", [
    ("Adam", {}, False), ("Adam", {"capturable": True}, True), ("Adam", {"fused": True}, True),
    ("AdamW", {"capturable": True, "foreach": True}, True), ("Adagrad", {"fused": True}, True),
    ("Adagrad", {}, False), ("Adadelta", {"capturable": True}, True),
    ("Adamax", {"capturable": True}, True), ("RAdam", {"capturable": True}, True),
    ("RMSprop", {"capturable": True}, True), ("Rprop", {"capturable": True}, True),
    ("NAdam", {}, False), ("NAdam", {"capturable": True}, True), ("Rprop", {}, False),
])
def test_step_counts_live_where_pytorch_keeps_them(name, kw, on_gpu):
    cls = getattr(optim, name)
    opt, got = _run("cuda", lambda ps: cls(ps, lr=0.01, **kw), ember.float32)
    state = next(iter(opt.state.values()))
    assert state["step"].device.type == ("cuda" if on_gpu else "cpu")
    assert state["step"].item() == 3 and state["step"].dtype == ember.float32
    if name == "NAdam":         # mu_product: on the parameter's device whatever the group
        assert state["mu_product"].device.type == "cuda"
    plain = {k: v for k, v in kw.items() if k != "capturable"}
    _, want = _run("cpu", lambda ps: cls(ps, lr=0.01, **plain), ember.float32)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_loading_moves_steps_of_capturable_groups_to_the_parameters_device():
    # PyTorch's load_state_dict: steps kept as they are, but float32 on the parameter's
    # device where the saved group is capturable or fused
    for kw, where in [({"capturable": True}, "cuda"), ({}, "cpu")]:
        cpu_opt, _ = _run("cpu", lambda ps: optim.Adam(ps, lr=0.01), ember.float32)
        sd = cpu_opt.state_dict()
        sd["param_groups"][0].update(kw)
        p = [ember.nn.Parameter(ember.zeros(5, device="cuda")),
             ember.nn.Parameter(ember.zeros(3, 4, device="cuda"))]
        opt = optim.Adam(p, lr=0.01, **kw)
        opt.load_state_dict(sd)
        state = opt.state[p[0]]
        assert state["step"].device.type == where and state["step"].item() == 3
        assert state["exp_avg"].device.type == "cuda"


def test_legacy_asgd_scalars_unpickle_onto_the_parameters_device():
    p = ember.nn.Parameter(ember.ones(3, device="cuda"))
    opt = optim.ASGD([p], lr=0.1)
    p.grad = ember.ones(3, device="cuda")
    opt.step()
    state = opt.state[p]
    state.update(step=1.0, eta=0.1, mu=1.0)     # an old checkpoint's numbers
    opt = pickle.loads(pickle.dumps(opt))
    state = next(iter(opt.state.values()))
    assert [state[k].device.type for k in ("step", "eta", "mu")] == ["cuda"] * 3
    assert state["eta"].item() == pytest.approx(0.1)
