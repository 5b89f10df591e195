"""Regressions from round 35's optimizer x scheduler fuzzer (no PyTorch needed): 0-d
bfloat16 parameters, groups added after a load, LBFGS with a second group, ASGD's eta and mu
as PyTorch rounds them, and schedules and steps over float32 tensor hyperparameters."""

import math

import numpy as np
import pytest

import ember
from ember.optim import lr_scheduler


@pytest.mark.parametrize("name", ["NAdam", "Adamax", "RAdam", "Adam", "RMSprop", "Adagrad",
                                  "Adadelta", "SGD"])
def test_zero_dim_bfloat16_parameter_steps_as_a_one_element_one(name):
    """A 0-d bfloat16 parameter's step raised KeyError (NumPy's 0-d arithmetic gave an
    ml_dtypes scalar, which has no backend); it now steps as a (1,)-shaped one."""
    out = []
    for shape in [(), (1,)]:
        p = ember.nn.Parameter(ember.full(shape, 0.75).to(ember.bfloat16))
        opt = getattr(ember.optim, name)([p], lr=1.0 if name == "Adadelta" else 0.1,
                                         weight_decay=0.01)
        for k in range(3):
            p.grad = ember.full(shape, 0.5 - k).to(ember.bfloat16)
            opt.step()
        out.append(p.detach().float().reshape(-1).tolist())
    assert out[0] == out[1]
    assert out[0] != [0.75]


def test_group_added_after_load_gets_differentiable():
    """PyTorch loads through __setstate__, which adds ``differentiable`` to the defaults of
    an optimizer that has none (Adafactor): a group added after the load has the key."""
    a, b = ember.nn.Parameter(ember.ones(2, 2)), ember.nn.Parameter(ember.ones(2, 2))
    opt = ember.optim.Adafactor([a])
    opt.add_param_group({"params": [ember.nn.Parameter(ember.ones(2))]})
    assert "differentiable" not in opt.param_groups[1]
    opt = ember.optim.Adafactor([a])
    opt.load_state_dict(opt.state_dict())
    opt.add_param_group({"params": [b]})
    assert opt.param_groups[1]["differentiable"] is False


def test_lbfgs_refuses_a_second_group_at_step():
    a, b = ember.nn.Parameter(ember.ones(2)), ember.nn.Parameter(ember.ones(2))
    opt = ember.optim.LBFGS([a])
    opt.add_param_group({"params": [b]})
    with pytest.raises(AssertionError, match="Expected exactly one param_group, but got 2"):
        opt.step(lambda: (a * a).sum())


@pytest.mark.parametrize("foreach", [False, True])
def test_asgd_eta_and_mu_round_as_torch_after_a_load(foreach):
    """Loaded onto a float64 parameter the state is float64, but PyTorch still computes eta
    and mu as default-dtype (float32) tensors before copying them in."""
    p = ember.nn.Parameter(ember.tensor([1.0, 2.0], dtype=ember.float64))
    opt = ember.optim.ASGD([p], lr=0.05, t0=1.0, foreach=foreach)
    for _ in range(2):
        p.grad = ember.tensor([0.5, -1.0], dtype=ember.float64)
        opt.step()
    fresh = ember.optim.ASGD([p], lr=0.05, t0=1.0, foreach=foreach)
    fresh.load_state_dict(opt.state_dict())
    p.grad = ember.tensor([0.5, -1.0], dtype=ember.float64)
    fresh.step()
    state = fresh.state[p]
    assert state["eta"].dtype == ember.float64
    exact = 0.05 / (1 + 1e-4 * 0.05 * 3) ** 0.75
    assert state["eta"].item() != exact
    assert abs(state["eta"].item() - exact) < 1e-8
    assert state["eta"].item() == float(np.float32(state["eta"].item()))
    assert state["mu"].item() == float(np.float32(1 / 2))


def test_schedule_of_a_float32_tensor_lr_computes_in_float32():
    p = ember.nn.Parameter(ember.ones(2))
    opt = ember.optim.SGD([p], lr=ember.tensor(0.05))
    sched = lr_scheduler.ExponentialLR(opt, gamma=0.9)
    opt.step()
    sched.step()
    f = np.float32
    assert opt.param_groups[0]["lr"].item() == float(f(f(0.05) * f(0.9)))
    assert opt.param_groups[0]["lr"].item() != float(f(float(f(0.05)) * 0.9))


def test_plateau_of_a_float32_tensor_lr_reduces_a_python_float():
    p = ember.nn.Parameter(ember.ones(2))
    opt = ember.optim.SGD([p], lr=ember.tensor(0.05))
    sched = lr_scheduler.ReduceLROnPlateau(opt, factor=0.3, patience=0)
    opt.step()
    sched.step(1.0)
    sched.step(2.0)
    assert opt.param_groups[0]["lr"].item() == float(np.float32(float(np.float32(0.05)) * 0.3))


def test_fused_adam_takes_a_tensor_lr_as_a_double():
    out = []
    for lr in [ember.tensor(0.05), float(np.float32(0.05))]:
        p = ember.nn.Parameter(ember.tensor([0.3, -0.7, 1.1], dtype=ember.float64))
        opt = ember.optim.Adam([p], lr=lr, fused=True)
        for k in range(3):
            p.grad = ember.tensor([0.5, -0.25, 1.5], dtype=ember.float64) * (k + 1)
            opt.step()
        out.append(p.tolist())
    assert out[0] == out[1]


def test_adam_float32_tensor_betas_correct_in_float32():
    """PyTorch's bias corrections of float32 tensor betas are float32 tensors: the step
    length lr / (1 - beta1^t) rounds to float32."""
    p = ember.nn.Parameter(ember.tensor([0.3], dtype=ember.float64))
    opt = ember.optim.Adam([p], lr=0.01, betas=(ember.tensor(0.9), ember.tensor(0.99)))
    p.grad = ember.tensor([0.5], dtype=ember.float64)
    opt.step()
    f = np.float32
    b1, b2 = f(0.9), f(0.99)
    m, v = (1 - float(b1)) * 0.5, (1 - float(b2)) * 0.25
    step = (f(1) / (f(1) - b1)) * f(0.01)
    expected = 0.3 - float(step) * m / (math.sqrt(v) / float(np.sqrt(f(1) - b2)) + 1e-8)
    assert p.item() == pytest.approx(expected, rel=1e-15, abs=0)


def test_adafactor_float32_tensor_lr_scales_in_float32():
    out = []
    for lr in [ember.tensor(0.005), float(np.float32(0.005))]:
        p = ember.nn.Parameter(ember.tensor([0.3, -0.7, 1.1], dtype=ember.float64))
        opt = ember.optim.Adafactor([p], lr=lr)
        p.grad = ember.tensor([0.5, -0.25, 1.5], dtype=ember.float64)
        opt.step()
        out.append(p.tolist())
    # a Python lr scales in float64, a float32 tensor's in float32: they differ
    assert out[0] != out[1]
    assert np.allclose(out[0], out[1], rtol=1e-6)
