"""A param group added after its lr scheduler was made: PyTorch's schedulers zip the groups
with their new lrs strictly, so where those lrs come from base_lrs or lr_lambdas (one per
group known at construction) a step raises Python's zip ValueError; the recursive forms
(StepLR, CosineAnnealingLR between restarts, ...) carry the new group along (round 27)."""

import pytest

import ember
from ember.optim import lr_scheduler as S


def _late_group(make):
    opt = ember.optim.SGD([ember.nn.Parameter(ember.ones(2))], lr=0.1)
    sched = make(opt)
    opt.add_param_group({"params": [ember.nn.Parameter(ember.ones(2))], "lr": 0.01})
    return opt, sched


@pytest.mark.parametrize("make, step, message", [
    (lambda o: S.LambdaLR(o, lambda e: 0.5), lambda s: s.step(),
     "zip() argument 2 is shorter than argument 1"),
    (lambda o: S.MultiplicativeLR(o, lambda e: 0.5), lambda s: s.step(),
     "zip() argument 2 is longer than argument 1"),
    (lambda o: S.StepLR(o, 1), lambda s: s.step(2),
     "zip() argument 2 is shorter than argument 1"),
    (lambda o: S.CosineAnnealingWarmRestarts(o, 2), lambda s: s.step(),
     "zip() argument 2 is shorter than argument 1"),
    (lambda o: S.CyclicLR(o, 0.01, 0.1), lambda s: s.step(),
     "zip() argument 2 is shorter than argument 1"),
])
@pytest.mark.filterwarnings("ignore")
def test_lrs_from_base_lrs_refuse_a_late_group(make, step, message):
    opt, sched = _late_group(make)
    opt.step()
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        step(sched)


def test_cosine_restart_branch_refuses_a_late_group():
    opt, sched = _late_group(lambda o: S.CosineAnnealingLR(o, 1))
    opt.step()
    sched.step()                    # between restarts: recursive, both groups go to 0
    assert [g["lr"] for g in opt.param_groups] == [0.0, 0.0]
    opt.step()
    with pytest.raises(ValueError, match=r"zip\(\) argument 2 is longer than argument 1"):
        sched.step()                # the restart adds (base - eta_min) per base_lr


def test_recursive_forms_carry_a_late_group():
    opt, sched = _late_group(lambda o: S.StepLR(o, 1, gamma=0.5))
    for _ in range(2):
        opt.step()
        sched.step()
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.025, 0.0025])
    assert sched.get_last_lr() == pytest.approx([0.025, 0.0025])
