"""Weight averaging: SWA and EMA averages, SWALR's annealing, update_bn."""

import math

import numpy as np
import pytest

import ember
from ember import nn, optim
from ember.optim import swa_utils as S


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(ember.ones(2))
        self.register_buffer("seen", ember.zeros(()))

    def forward(self, x):
        return x * self.w


def _set(model, value):
    with ember.no_grad():
        model.w.fill_(value)
        model.seen.fill_(value * 10)


def test_swa_average_is_the_running_mean_and_buffers_are_copied():
    model = Scale()
    avg = S.AveragedModel(model)
    for v in (2.0, 4.0, 9.0):
        _set(model, v)
        avg.update_parameters(model)
    np.testing.assert_allclose(avg.module.w.detach().numpy(), [5.0, 5.0])
    assert avg.n_averaged.item() == 3 and avg.n_averaged.dtype == ember.int64
    assert avg.module.seen.item() == 90.0                 # buffers follow the model
    np.testing.assert_allclose(avg(ember.ones(2)).detach().numpy(), [5.0, 5.0])
    assert model.w is not avg.module.w


@pytest.mark.parametrize("multi", [True, False])
def test_ema(multi):
    model = Scale()
    fn = dict(multi_avg_fn=S.get_ema_multi_avg_fn(0.9)) if multi else dict(
        avg_fn=S.get_ema_avg_fn(0.9))
    avg = S.AveragedModel(model, use_buffers=True, **fn)
    want, want_seen = None, None
    for v in (1.0, 3.0, 5.0):
        _set(model, v)
        avg.update_parameters(model)
        want = v if want is None else 0.9 * want + 0.1 * v
        want_seen = 10 * v if want_seen is None else 0.9 * want_seen + 0.1 * 10 * v
    np.testing.assert_allclose(avg.module.w.detach().numpy(), [want] * 2, rtol=1e-6)
    np.testing.assert_allclose(avg.module.seen.item(), want_seen, rtol=1e-6)


def test_swalr_anneals_to_swa_lr_and_holds():
    opt = optim.SGD([nn.Parameter(ember.ones(2))], lr=1.0)
    sched = S.SWALR(opt, swa_lr=0.1, anneal_epochs=4, anneal_strategy="linear")
    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(6):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    np.testing.assert_allclose(lrs, [1.0, 0.775, 0.55, 0.325, 0.1, 0.1, 0.1], rtol=1e-12)
    opt = optim.SGD([nn.Parameter(ember.ones(2))], lr=1.0)
    sched = S.SWALR(opt, swa_lr=0.1, anneal_epochs=2)
    opt.step()
    sched.step()
    np.testing.assert_allclose(opt.param_groups[0]["lr"],
                               0.1 + 0.9 * (1 + math.cos(math.pi / 2)) / 2, rtol=1e-12)
    with pytest.raises(ValueError, match="^anneal_strategy must be one of 'cos' or 'linear', "
                                         "instead got step$"):
        S.SWALR(opt, 0.1, anneal_strategy="step")
    with pytest.raises(ValueError, match=r"^swa_lr must have the same length as "
                                         r"optimizer.param_groups. swa_lr has 2 values, "
                                         r"param_groups has 1.$"):
        S.SWALR(opt, [0.1, 0.2])


@pytest.mark.parametrize("make", [S.get_ema_avg_fn, S.get_ema_multi_avg_fn])
def test_ema_decay_must_lie_in_0_1(make):
    assert callable(make(0.0)) and callable(make(1.0))
    for decay in (-0.1, 1.5):
        with pytest.raises(ValueError, match=rf"^Invalid decay value {decay} provided. Please "
                                             r"provide a value in \[0,1\] range.$"):
            make(decay)


def test_swalr_state_dict_names_its_strategy_and_loads_with_weights_only(tmp_path):
    opt = optim.SGD([nn.Parameter(ember.ones(2))], lr=1.0)
    sched = S.SWALR(opt, swa_lr=0.1, anneal_epochs=4, anneal_strategy="linear")
    opt.step()
    sched.step()
    state = sched.state_dict()
    assert state["_anneal_strategy"] == "linear" and "anneal_func" not in state
    ember.save(state, tmp_path / "s.pt")
    other = S.SWALR(opt, swa_lr=0.1, anneal_epochs=4)             # cos until loaded
    other.load_state_dict(ember.load(tmp_path / "s.pt", weights_only=True))
    assert other.anneal_func(0.25) == 0.25 and other._step_count == 2


class FakeNorm(nn.Module):
    """Tracks the cumulative mean of its inputs, like a batch norm with momentum None."""

    def __init__(self):
        super().__init__()
        self.momentum = 0.1
        self.register_buffer("running_mean", ember.zeros(()))
        self.register_buffer("count", ember.zeros(()))

    def reset_running_stats(self):
        self.running_mean.zero_()
        self.count.zero_()

    def forward(self, x):
        assert self.momentum is None and self.training
        with ember.no_grad():
            self.count.add_(1)
            self.running_mean.add_((x.mean() - self.running_mean) / self.count)
        return x


def test_update_bn_recomputes_running_stats_with_one_pass():
    model = nn.BatchNorm1d(1, momentum=0.1)
    model.eval()
    loader = [(ember.full((3, 1), float(v)), 0) for v in (1, 2, 6)]
    S.update_bn(loader, model)
    assert model.running_mean.item() == 3.0 and model.momentum == 0.1
    assert not model.training


def test_update_bn_leaves_modules_that_are_not_batch_norms_alone():
    # as PyTorch's, only _BatchNorm subclasses count (a look-alike is not reset nor run)
    model = FakeNorm()
    model.running_mean.fill_(5.0)
    S.update_bn([ember.ones(3)], model)
    assert model.running_mean.item() == 5.0 and model.momentum == 0.1


@pytest.mark.skipif(not hasattr(nn, "BatchNorm1d"), reason="BatchNorm1d not built yet")
def test_update_bn_with_batchnorm():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    data = [ember.randn(8, 3) for _ in range(4)]
    S.update_bn(data, model)
    with ember.no_grad():
        feats = model[0](ember.cat(data))
    np.testing.assert_allclose(model[1].running_mean.numpy(), feats.mean(0).numpy(), atol=1e-5)
