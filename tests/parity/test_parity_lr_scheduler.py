"""Every learning-rate schedule against PyTorch's: the same lr (and momentum) at each step.
Skipped when PyTorch is not installed."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

CONFIGS = {
    "LambdaLR": ("SGD", lambda L, o: L.LambdaLR(o, lambda e: 0.95 ** e)),
    "MultiplicativeLR": ("SGD", lambda L, o: L.MultiplicativeLR(o, lambda e: 0.9)),
    "StepLR": ("SGD", lambda L, o: L.StepLR(o, 4, gamma=0.3)),
    "MultiStepLR": ("SGD", lambda L, o: L.MultiStepLR(o, [3, 3, 7, 12], gamma=0.5)),
    "ConstantLR": ("SGD", lambda L, o: L.ConstantLR(o, factor=0.3, total_iters=5)),
    "LinearLR": ("SGD", lambda L, o: L.LinearLR(o, 0.1, 0.9, total_iters=7)),
    "ExponentialLR": ("SGD", lambda L, o: L.ExponentialLR(o, 0.93)),
    "PolynomialLR": ("SGD", lambda L, o: L.PolynomialLR(o, total_iters=9, power=1.5)),
    "CosineAnnealingLR": ("SGD", lambda L, o: L.CosineAnnealingLR(o, T_max=6, eta_min=0.001)),
    "CosineAnnealingWarmRestarts": ("SGD", lambda L, o: L.CosineAnnealingWarmRestarts(
        o, T_0=4, T_mult=2, eta_min=0.002)),
    "CyclicLR-triangular2": ("SGD", lambda L, o: L.CyclicLR(
        o, 0.01, 0.2, step_size_up=3, step_size_down=5, mode="triangular2")),
    "CyclicLR-exp_range-Adam": ("Adam", lambda L, o: L.CyclicLR(
        o, 0.01, 0.2, step_size_up=4, mode="exp_range", gamma=0.9)),
    "OneCycleLR": ("SGD", lambda L, o: L.OneCycleLR(o, max_lr=0.5, total_steps=25)),
    "OneCycleLR-three-phase-linear": ("Adam", lambda L, o: L.OneCycleLR(
        o, max_lr=0.5, epochs=5, steps_per_epoch=5, three_phase=True,
        anneal_strategy="linear")),
    "SequentialLR": ("SGD", lambda L, o: L.SequentialLR(
        o, [L.LinearLR(o, 0.1, total_iters=4), L.CosineAnnealingLR(o, T_max=10)],
        milestones=[5])),
    "ChainedScheduler": ("SGD", lambda L, o: L.ChainedScheduler(
        [L.ConstantLR(o, factor=0.5, total_iters=3), L.ExponentialLR(o, gamma=0.9)])),
}


def _trace(lib, optimizer, make, steps=24):
    p = lib.nn.Parameter(lib.ones(2))
    opt = getattr(lib.optim, optimizer)([p], lr=0.1, **({"momentum": 0.9}
                                                        if optimizer == "SGD" else {}))
    sched = make(lib.optim.lr_scheduler, opt)
    trace = []
    for _ in range(steps):
        group = opt.param_groups[0]
        trace.append((group["lr"], group.get("momentum", group.get("betas", (0,))[0])))
        opt.step()
        sched.step()
    return np.array(trace), sched.state_dict()


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_schedule_matches_pytorch(name):
    optimizer, make = CONFIGS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, our_state = _trace(ember, optimizer, make)
        theirs, their_state = _trace(torch, optimizer, make)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)
    assert our_state.keys() == their_state.keys()
    assert our_state.get("last_epoch") == their_state.get("last_epoch")


def test_reduce_lr_on_plateau_matches_pytorch():
    metrics = [5, 4, 4, 4.1, 4, 4, 3.9999, 4, 4, 4, 4, 4, 2, 2, 2, 2, 2, 2]

    def run(lib):
        opt = lib.optim.SGD([lib.nn.Parameter(lib.ones(2))], lr=0.1)
        sched = lib.optim.lr_scheduler.ReduceLROnPlateau(
            opt, mode="min", factor=0.3, patience=1, threshold=0.01, cooldown=1)
        out = []
        for m in metrics:
            sched.step(m)
            out.append(sched.get_last_lr()[0])
        return out, sched.state_dict()
    (ours, our_state), (theirs, their_state) = run(ember), run(torch)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    assert our_state.keys() == their_state.keys()


@pytest.mark.parametrize("strategy, epochs", [("cos", 5), ("linear", 3), ("cos", 0)])
def test_swalr_matches_pytorch(strategy, epochs):
    def run(lib):
        opt = lib.optim.SGD([lib.nn.Parameter(lib.ones(2))], lr=0.5)
        sched = lib.optim.swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=epochs,
                                          anneal_strategy=strategy)
        out = []
        for _ in range(8):
            out.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        return out
    np.testing.assert_allclose(run(ember), run(torch), rtol=1e-12)


RESUMABLE = {
    "StepLR": lambda L, o, e: L.StepLR(o, 3, last_epoch=e),
    "MultiStepLR": lambda L, o, e: L.MultiStepLR(o, [2, 5], last_epoch=e),
    "ConstantLR": lambda L, o, e: L.ConstantLR(o, 0.5, total_iters=4, last_epoch=e),
    "LinearLR": lambda L, o, e: L.LinearLR(o, 0.2, total_iters=4, last_epoch=e),
    "ExponentialLR": lambda L, o, e: L.ExponentialLR(o, 0.5, last_epoch=e),
    "PolynomialLR": lambda L, o, e: L.PolynomialLR(o, 6, 2.0, last_epoch=e),
    "CosineAnnealingLR": lambda L, o, e: L.CosineAnnealingLR(o, 6, 0.01, last_epoch=e),
    "CosineAnnealingWarmRestarts": lambda L, o, e: L.CosineAnnealingWarmRestarts(
        o, 3, 2, last_epoch=e),
    "LambdaLR": lambda L, o, e: L.LambdaLR(o, lambda k: 0.9 ** k, last_epoch=e),
    "MultiplicativeLR": lambda L, o, e: L.MultiplicativeLR(o, lambda k: 0.9, last_epoch=e),
    "CyclicLR": lambda L, o, e: L.CyclicLR(o, 0.01, 0.1, step_size_up=2, last_epoch=e),
    "OneCycleLR": lambda L, o, e: L.OneCycleLR(o, 1.0, total_steps=20, last_epoch=e),
}


@pytest.mark.parametrize("name", sorted(RESUMABLE))
def test_resuming_with_last_epoch_matches_pytorch(name):
    """A schedule rebuilt with ``last_epoch`` on a loaded optimizer, then stepped, and
    ``get_lr()`` called outside a step (which warns)."""
    make = RESUMABLE[name]

    def run(lib):
        def optimizer():
            return lib.optim.SGD([lib.nn.Parameter(lib.ones(2))], lr=0.1, momentum=0.9)
        opt = optimizer()
        sched = make(lib.optim.lr_scheduler, opt, -1)
        for _ in range(3):
            opt.step()
            sched.step()
        resumed = optimizer()
        resumed.load_state_dict(opt.state_dict())
        sched = make(lib.optim.lr_scheduler, resumed, 3)
        out = [sched.get_last_lr()[0]]
        for _ in range(5):
            resumed.step()
            sched.step()
            out.append(sched.get_last_lr()[0])
        return out + list(sched.get_lr())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(run(ember), run(torch), rtol=1e-12, atol=1e-15)


def test_sequential_lr_restarts_its_next_scheduler_uncounted_like_pytorch():
    def counts(lib):
        L = lib.optim.lr_scheduler
        opt = lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], lr=0.1)
        seq = L.SequentialLR(opt, [L.LinearLR(opt, 0.1, total_iters=3),
                                   L.ExponentialLR(opt, gamma=0.9)], milestones=[3])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(6):
                opt.step()
                seq.step()
        state = seq.state_dict()["_schedulers"]
        return ([(s["_step_count"], s["last_epoch"]) for s in state], seq.get_last_lr(),
                [str(w.message) for w in caught])
    ours, theirs = counts(ember), counts(torch)
    assert ours == theirs
    assert ours[0][1] == (4, 3)     # the milestone's restart is not counted as a step


@pytest.mark.parametrize("name", [
    "StepLR", "CosineAnnealingLR", "SequentialLR", "ChainedScheduler"])
def test_a_tensor_lr_stays_a_tensor_in_base_lrs_like_pytorch(name):
    def run(lib):
        opt = lib.optim.Adam([lib.nn.Parameter(lib.ones(1))], lr=lib.tensor(0.1))
        sched = CONFIGS.get(name, (None, lambda L, o: L.StepLR(o, 2, gamma=0.5)))[1](
            lib.optim.lr_scheduler, opt)
        for _ in range(3):
            opt.step()
            sched.step()
        held = getattr(sched, "_schedulers", [sched])[-1].base_lrs + sched.get_last_lr()
        return [(type(v).__name__, float(v)) for v in held]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs = run(ember), run(torch)
    assert [kind for kind, _ in ours] == ["Tensor", "Tensor"]
    assert [kind for kind, _ in ours] == [kind for kind, _ in theirs]
    np.testing.assert_allclose([v for _, v in ours], [v for _, v in theirs], rtol=1e-6)
