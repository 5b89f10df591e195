"""Learning-rate schedules against their closed forms, plus state and warnings."""

import math
import pickle
import warnings

import numpy as np
import pytest

import ember
from ember import nn, optim
from ember.optim import lr_scheduler as L


def _optimizer(lr=0.1, cls=optim.SGD, **kw):
    return cls([nn.Parameter(ember.ones(2))], lr=lr, **kw)


def _curve(scheduler, steps=12):
    """The lr after construction and after each of ``steps`` (optimizer, scheduler) steps."""
    opt = scheduler.optimizer
    lrs = [scheduler.get_last_lr()[0]]
    for _ in range(steps):
        opt.step()
        scheduler.step()
        lrs.append(scheduler.get_last_lr()[0])
        assert opt.param_groups[0]["lr"] == lrs[-1]
    return np.array(lrs)


EPOCHS = np.arange(13)
CLOSED_FORMS = [
    (lambda o: L.LambdaLR(o, lambda e: 1 / (e + 1)), 0.1 / (EPOCHS + 1)),
    (lambda o: L.MultiplicativeLR(o, lambda e: 0.9), 0.1 * 0.9 ** EPOCHS),
    (lambda o: L.StepLR(o, 3, gamma=0.5), 0.1 * 0.5 ** (EPOCHS // 3)),
    (lambda o: L.MultiStepLR(o, [2, 5, 5, 9], gamma=0.5),
     0.1 * 0.5 ** np.searchsorted([2, 5, 5, 9], EPOCHS, side="right")),
    (lambda o: L.ConstantLR(o, factor=0.25, total_iters=4), 0.1 * np.where(EPOCHS < 4, 0.25, 1)),
    (lambda o: L.LinearLR(o, start_factor=0.2, end_factor=0.8, total_iters=6),
     0.1 * (0.2 + 0.6 * np.minimum(EPOCHS, 6) / 6)),
    (lambda o: L.ExponentialLR(o, gamma=0.8), 0.1 * 0.8 ** EPOCHS),
    (lambda o: L.PolynomialLR(o, total_iters=8, power=2.0),
     0.1 * (1 - np.minimum(EPOCHS, 8) / 8) ** 2),
    (lambda o: L.CosineAnnealingLR(o, T_max=5, eta_min=0.01),
     0.01 + 0.09 * (1 + np.cos(np.pi * EPOCHS / 5)) / 2),
    (lambda o: L.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.01),
     0.01 + 0.09 * (1 + np.cos(np.pi * np.array([0, 1, 2, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3])
                               / np.array([3] * 3 + [6] * 6 + [12] * 4))) / 2),
]


@pytest.mark.parametrize("make, want", CLOSED_FORMS,
                         ids=["LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR",
                              "ConstantLR", "LinearLR", "ExponentialLR", "PolynomialLR",
                              "CosineAnnealingLR", "CosineAnnealingWarmRestarts"])
def test_schedule_follows_its_closed_form(make, want):
    np.testing.assert_allclose(_curve(make(_optimizer())), want, rtol=1e-12, atol=1e-15)


def test_cyclic_lr_triangular_and_momentum():
    opt = _optimizer(momentum=0.9)
    sched = L.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=4, step_size_down=2)
    lrs, momenta = [], []
    for _ in range(12):
        lrs.append(opt.param_groups[0]["lr"])
        momenta.append(opt.param_groups[0]["momentum"])
        opt.step()
        sched.step()
    up = [0.01 + 0.09 * k / 4 for k in range(4)]
    down = [0.1 - 0.09 * k / 2 for k in range(2)]
    np.testing.assert_allclose(lrs, (up + down) * 2, rtol=1e-12)
    fraction = (np.array(lrs) - 0.01) / 0.09
    np.testing.assert_allclose(momenta, 0.9 - 0.1 * fraction, rtol=1e-12)


def test_one_cycle_lr_warms_up_then_anneals():
    opt = _optimizer(cls=optim.Adam)
    sched = L.OneCycleLR(opt, max_lr=1.0, total_steps=10, pct_start=0.3)
    lrs = _curve(sched, steps=9)
    np.testing.assert_allclose(lrs[0], 1.0 / 25)
    np.testing.assert_allclose(lrs.max(), 1.0)
    assert lrs.argmax() == 2                      # end of warm-up: 0.3 * 10 - 1
    np.testing.assert_allclose(lrs[-1], 1.0 / 25 / 1e4)
    pct = (np.arange(3) - 0) / 2
    np.testing.assert_allclose(lrs[:3], 1.0 + (0.04 - 1.0) / 2 * (np.cos(np.pi * pct) + 1))
    assert opt.param_groups[0]["betas"][0] == pytest.approx(0.95)
    with pytest.raises(ValueError, match="Tried to step 11 times"):
        for _ in range(2):
            sched.step()


def test_reduce_lr_on_plateau():
    opt = _optimizer()
    sched = L.ReduceLROnPlateau(opt, factor=0.5, patience=2, cooldown=1, min_lr=0.02)
    lrs = []
    for metric in [1.0, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]:
        sched.step(metric)
        lrs.append(sched.get_last_lr()[0])
    # bad epochs 1, 2, 3 -> halve at the 3rd; one cooldown epoch; then 3 more bad epochs
    np.testing.assert_allclose(lrs, [0.1, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.025,
                                     0.025, 0.025])
    for _ in range(8):
        sched.step(1.0)
    assert sched.get_last_lr()[0] == 0.02
    with pytest.raises(ValueError, match="Factor should be < 1.0."):
        L.ReduceLROnPlateau(opt, factor=1.0)


def test_sequential_and_chained():
    opt = _optimizer()
    seq = L.SequentialLR(opt, [L.ConstantLR(opt, factor=0.5, total_iters=2),
                               L.ExponentialLR(opt, gamma=0.9)], milestones=[2])
    np.testing.assert_allclose(_curve(seq, 5), [0.05, 0.05, 0.1, 0.09, 0.081, 0.0729])
    opt = _optimizer()
    chain = L.ChainedScheduler([L.ConstantLR(opt, factor=0.5, total_iters=2),
                                L.ExponentialLR(opt, gamma=0.9)])
    np.testing.assert_allclose(_curve(chain, 3), [0.05, 0.045, 0.081, 0.0729])
    with pytest.raises(ValueError, match="one more than the number of milestone points"):
        L.SequentialLR(opt, [L.ExponentialLR(opt, 0.9)], milestones=[2])
    with pytest.raises(ValueError, match="^ChainedScheduler does not support "
                                         "`ReduceLROnPlateau` scheduler as it requires "
                                         "additional kwargs to be specified when calling "
                                         "`step`, but got one at index 1 in the given "
                                         "schedulers sequence.$"):
        L.ChainedScheduler([L.ExponentialLR(opt, 0.9), L.ReduceLROnPlateau(opt)])


def test_per_group_list_lengths_are_checked_with_pytorchs_words():
    a, b = nn.Parameter(ember.ones(1)), nn.Parameter(ember.ones(1))
    opt = optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="^base_lr must have the same length as optimizer."
                                         "param_groups. base_lr has 1 values, param_groups "
                                         "has 2.$"):
        L.CyclicLR(opt, [0.01], [0.1, 0.2])
    with pytest.raises(ValueError, match="^max_lr must have the same length as optimizer."
                                         "param_groups. max_lr has 3 values, param_groups "
                                         "has 2.$"):
        L.OneCycleLR(opt, max_lr=[1.0, 0.5, 0.1], total_steps=8)


def test_state_dict_resumes_the_schedule():
    opt = _optimizer()
    sched = L.StepLR(opt, 2)
    _curve(sched, 3)
    state = pickle.loads(pickle.dumps(sched.state_dict()))
    assert "optimizer" not in state and state["last_epoch"] == 3
    opt2 = _optimizer()
    resumed = L.StepLR(opt2, 2)
    resumed.load_state_dict(state)
    opt2.param_groups[0]["lr"] = opt.param_groups[0]["lr"]
    np.testing.assert_allclose(_curve(resumed, 3), _curve(sched, 3))


def test_scheduler_before_optimizer_warns_once():
    opt = _optimizer()
    sched = L.StepLR(opt, 2)
    with pytest.warns(UserWarning, match=r"Detected call of `lr_scheduler.step\(\)` before"):
        sched.step()
    opt = _optimizer()
    sched = L.StepLR(opt, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()
        sched.step()


def test_get_lr_outside_step_warns_and_resuming_needs_initial_lr():
    sched = L.ExponentialLR(_optimizer(), 0.5)
    with pytest.warns(UserWarning, match="please use `get_last_lr\\(\\)`"):
        sched.get_lr()
    with pytest.raises(KeyError) as info:
        L.StepLR(_optimizer(), 2, last_epoch=4)
    assert info.value.args[0] == (
        "param 'initial_lr' is not specified in param_groups[0] when resuming scheduler with "
        "last_epoch >= 0.\nThis typically happens when:\n1. You're trying to resume training "
        "from a checkpoint but haven't properly loaded the optimizer state\n2. You're using "
        "last_epoch >= 0 for a fresh training run (not recommended)")


def test_tensor_lr_is_updated_in_place():
    lr = ember.tensor(0.1)
    opt = optim.Adam([nn.Parameter(ember.ones(2))], lr=lr)
    sched = L.ExponentialLR(opt, 0.5)
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] is lr and math.isclose(lr.item(), 0.05, rel_tol=1e-6)


RESUMED = [
    (lambda o, e: L.ExponentialLR(o, 0.5, last_epoch=e), [0.0125, 0.00625, 0.003125]),
    (lambda o, e: L.LinearLR(o, 0.2, total_iters=4, last_epoch=e), [0.08, 0.08, 0.08]),
    (lambda o, e: L.PolynomialLR(o, 6, 2.0, last_epoch=e), [0.025, 0.00625, 0.0]),
    (lambda o, e: L.CosineAnnealingLR(o, 6, 0.01, last_epoch=e),
     [0.055, 0.022057713659400, 0.01]),
    (lambda o, e: L.MultiplicativeLR(o, lambda _: 0.9, last_epoch=e), [0.0729, 0.06561, 0.059049]),
]


@pytest.mark.parametrize("make, expected", RESUMED)
def test_resuming_with_last_epoch_keeps_the_loaded_lr_at_construction(make, expected):
    """As PyTorch: the construction step of a resumed scheduler leaves the lr as loaded."""
    opt = _optimizer()
    sched = make(opt, -1)
    for _ in range(3):
        opt.step()
        sched.step()
    resumed = _optimizer()
    resumed.load_state_dict(opt.state_dict())
    sched = make(resumed, 3)
    lrs = [sched.get_last_lr()[0]]
    for _ in range(2):
        resumed.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    assert sched.last_epoch == 6
    np.testing.assert_allclose(lrs, expected, rtol=1e-12, atol=1e-15)


def test_cosine_get_lr_outside_step_applies_the_chainable_form():
    sched = L.CosineAnnealingLR(_optimizer(), T_max=5)
    with pytest.warns(UserWarning, match="please use `get_last_lr"):
        lrs = sched.get_lr()
    assert lrs == pytest.approx([0.11055728090000843])


def test_get_last_lr_gives_copies_of_tensor_lrs():
    opt = optim.Adam([nn.Parameter(ember.ones(2))], lr=ember.tensor(0.05))
    sched = L.StepLR(opt, 2, gamma=0.5)
    for _ in range(2):
        opt.step()
        sched.step()
    (last,) = sched.get_last_lr()
    assert isinstance(last, ember.Tensor) and last.dim() == 0
    assert last.item() == pytest.approx(0.025)
    assert last is not opt.param_groups[0]["lr"]
    opt.param_groups[0]["lr"].fill_(1.0)
    assert last.item() == pytest.approx(0.025)
    plateau = L.ReduceLROnPlateau(optim.SGD([nn.Parameter(ember.ones(2))],
                                            lr=ember.tensor(0.1)))
    assert isinstance(plateau.get_last_lr()[0], ember.Tensor)


def test_step_with_epoch_uses_a_subclass_closed_form():
    """``step(epoch)`` jumps through ``_get_closed_form_lr`` when a subclass defines it; the
    old base name ``_LRScheduler`` still subclasses."""
    class Decay(L._LRScheduler):
        def get_lr(self):
            return [group["lr"] * 0.9 for group in self.optimizer.param_groups]

        def _get_closed_form_lr(self):
            return [base * 0.9 ** self.last_epoch for base in self.base_lrs]

    opt = _optimizer()
    sched = Decay(opt)
    assert isinstance(sched, L.LRScheduler)
    for _ in range(4):
        opt.step()
        sched.step()
    assert sched.get_last_lr()[0] == pytest.approx(0.059049)     # built with one get_lr
    with pytest.warns(UserWarning, match="The epoch parameter"):
        sched.step(2)
    assert sched.get_last_lr()[0] == pytest.approx(0.081)


def test_replacing_optimizer_step_after_construction_warns_it_was_overridden():
    opt = _optimizer()
    sched = L.StepLR(opt, 2)
    opt.step = lambda: None
    opt.step()
    with pytest.warns(UserWarning, match=r"Seems like `optimizer.step\(\)` has been overridden "
                                         "after learning rate scheduler initialization"):
        sched.step()


def test_plateau_covers_a_group_added_after_construction():
    opt = _optimizer()
    sched = L.ReduceLROnPlateau(opt, patience=0, min_lr=0.01)
    opt.add_param_group({"params": [nn.Parameter(ember.ones(1))], "lr": 0.5})
    for metric in (1.0, 2.0, 3.0):
        opt.step()
        sched.step(metric)
    assert sched.get_last_lr() == pytest.approx([0.01, 0.01])
    assert sched.min_lrs == [0.01, 0.01]
    listed = L.ReduceLROnPlateau(_optimizer(), patience=0, min_lr=[0.01])
    listed.optimizer.add_param_group({"params": [nn.Parameter(ember.ones(1))]})
    listed.step(1.0)
    with pytest.raises(RuntimeError, match=r"The number of param groups in the `optimizer` "
                                           r"\(2\) differs from when `ReduceLROnPlateau` was "
                                           r"initialized \(1\)"):
        listed.step(2.0)


def test_warm_restarts_wraps_t_cur_by_modulo_and_leaves_step_count_alone():
    """As PyTorch: its own step neither counts calls (``_step_count`` stays 0) nor warns,
    and an epoch past the period wraps by modulo."""
    opt = _optimizer(lr=1.0)
    sched = L.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2)
    sched.T_cur = 7
    opt.step()
    sched.step()
    assert (sched.T_cur, sched.T_i, sched._step_count) == (2, 6, 0)
    assert sched.get_last_lr() == [pytest.approx(0.75)]
    assert sched.state_dict()["_step_count"] == 0
