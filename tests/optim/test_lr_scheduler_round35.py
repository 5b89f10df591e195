"""LR schedulers with tensor lrs: a chainable ``get_lr()`` gives tensors of the lr's dtype
(as PyTorch's), float lrs stay Python floats, 16-bit lrs round as PyTorch's arithmetic
(bfloat16 cosine annealing no longer raises), and SWALR clones a tensor ``swa_lr``."""

import math
import warnings

import numpy as np
import pytest

import ember
from ember.optim import lr_scheduler as L
from ember.optim.swa_utils import SWALR


def _opt(lr, groups=1):
    params = [ember.nn.Parameter(ember.zeros(2)) for _ in range(groups)]
    return ember.optim.SGD([{"params": [p]} for p in params], lr=lr, momentum=0.9)


def _get_lr(sched):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sched.get_lr()


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_exponential_get_lr_is_tensor_of_lr_dtype(dtype):
    opt = _opt(ember.tensor(0.1, dtype=dtype))
    sched = L.ExponentialLR(opt, 0.9)
    opt.step()
    sched.step()
    got = _get_lr(sched)[0]
    assert isinstance(got, ember.Tensor) and got.dtype == dtype
    np_t = np.float32 if dtype == ember.float32 else np.float64
    step1 = np_t(np_t(0.1) * np_t(0.9))
    assert got.item() == float(np_t(step1 * np_t(0.9)))
    assert sched.get_last_lr()[0].item() == float(step1)
    assert got is not opt.param_groups[0]["lr"]


def test_unchanged_get_lr_is_a_copy_of_the_tensor():
    lr = ember.tensor(0.1)
    opt = _opt(lr)
    sched = L.StepLR(opt, 10, 0.5)
    got = _get_lr(sched)[0]
    assert isinstance(got, ember.Tensor) and got is not lr and got.item() == lr.item()


def test_float_lr_get_lr_stays_python_float():
    opt = _opt(0.1, groups=2)
    sched = L.CosineAnnealingLR(opt, 4, 0.01)
    for _ in range(5):
        opt.step()
        sched.step()
    got = _get_lr(sched)
    assert [type(v) for v in got] == [float, float]
    last = sched.get_last_lr()
    assert last[0] == pytest.approx(0.01 + 0.09 * (1 + math.cos(5 * math.pi / 4)) / 2)
    # (a direct call applies epoch 5's chainable step again, as PyTorch's)
    assert got[0] == got[1] == last[0] + (0.1 - 0.01) * (1 - math.cos(math.pi / 4)) / 2


def test_mixed_groups_only_the_tensor_group_becomes_tensor():
    p, q = ember.nn.Parameter(ember.zeros(2)), ember.nn.Parameter(ember.zeros(2))
    opt = ember.optim.SGD([{"params": [p], "lr": 0.1},
                           {"params": [q], "lr": ember.tensor(0.2, dtype=ember.float64)}])
    sched = L.MultiplicativeLR(opt, lambda e: 0.5)
    opt.step()
    sched.step()
    a, b = _get_lr(sched)
    assert type(a) is float and a == 0.025
    assert isinstance(b, ember.Tensor) and b.dtype == ember.float64 and b.item() == 0.05


@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16])
def test_16bit_lr_rounds_once_per_operation(dtype):
    opt = _opt(ember.tensor(0.1, dtype=dtype))
    sched = L.ExponentialLR(opt, 0.9)
    for _ in range(2):
        opt.step()
        sched.step()
    lr0 = ember.tensor(0.1, dtype=dtype)
    expected = (lr0 * 0.9 * 0.9).item()        # the tensor's own arithmetic (0.9 unrounded)
    assert opt.param_groups[0]["lr"].item() == expected
    if dtype == ember.float16:
        h, f = np.float16, np.float32
        assert expected == float(h(f(h(f(h(0.1)) * f(0.9))) * f(0.9)))
        assert expected != float(h(0.1) * h(0.9) * h(0.9))      # 0.9 rounded to float16


def test_bfloat16_cosine_annealing_steps():
    opt = _opt(ember.tensor(0.1, dtype=ember.bfloat16))
    sched = L.CosineAnnealingLR(opt, 2)
    values = []
    for _ in range(4):
        opt.step()
        sched.step()
        values.append(opt.param_groups[0]["lr"].item())
    assert values[1] == 0.0 and values[3] == pytest.approx(0.1, rel=1e-2)
    assert opt.param_groups[0]["lr"].dtype == ember.bfloat16


def test_swalr_clones_tensor_swa_lr_per_group():
    swa_lr = ember.tensor(0.05)
    opt = _opt(0.1, groups=2)
    SWALR(opt, swa_lr, anneal_epochs=2)
    a, b = (g["swa_lr"] for g in opt.param_groups)
    assert a is not swa_lr and b is not swa_lr and a is not b
    swa_lr.fill_(1.0)
    assert a.item() == b.item() == np.float32(0.05)


def test_swalr_get_lr_types():
    opt = _opt(ember.tensor(0.1, dtype=ember.float64))
    sched = SWALR(opt, ember.tensor(0.05), anneal_epochs=3, anneal_strategy="linear")
    opt.step()
    sched.step()
    got = _get_lr(sched)[0]
    # float64 lr with a float32 swa_lr: 0-dim tensors promote to float64
    assert isinstance(got, ember.Tensor) and got.dtype == ember.float64
    opt = _opt(ember.tensor(0.1))
    sched = SWALR(opt, 0.05, anneal_epochs=1)
    for _ in range(3):
        opt.step()
        sched.step()
    got = _get_lr(sched)[0]            # annealed: from the float swa_lr alone
    assert type(got) is float and got == 0.05
    assert opt.param_groups[0]["lr"].item() == np.float32(0.05)


def test_state_dict_round_trip_keeps_tensor_lrs():
    opt = _opt(ember.tensor(0.1))
    sched = L.StepLR(opt, 1, 0.5)
    opt.step()
    sched.step()
    state = sched.state_dict()
    assert isinstance(state["base_lrs"][0], ember.Tensor)
    assert isinstance(state["_last_lr"][0], ember.Tensor)
    assert state["_last_lr"][0].item() == np.float32(np.float32(0.1) * np.float32(0.5))
    opt2 = _opt(ember.tensor(0.1))
    again = L.StepLR(opt2, 1, 0.5)
    again.load_state_dict(state)
    assert again.get_last_lr()[0].item() == state["_last_lr"][0].item()
    assert again.base_lrs[0].item() == np.float32(0.1)
