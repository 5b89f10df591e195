"""ASGD: averaged stochastic gradient descent (``torch.optim.ASGD``)."""

from ember.optim import _steps16 as s16
from ember.optim._checks import check_lr, check_nonnegative
from ember.optim._state import (grads_of, new_step, number_lr, scalar_state, scale_, slot,
                                state_like, step_count)
from ember.optim.optimizer import Optimizer, _use_grad_for_differentiable, closure_loss

__all__ = ["ASGD"]


class ASGD(Optimizer):
    """ASGD: p = p (1 - lambd eta) - eta g; ax averages p from step t0 on (mu = 1 /
    max(1, t - t0)); eta = lr / (1 + lambd lr t)^alpha. eta and mu are float32 state, as
    in PyTorch."""

    _LEGACY_DEFAULTS = {"foreach": None, "maximize": False, "differentiable": False,
                        "capturable": False}
    _LEGACY_SCALARS = ("step", "eta", "mu")

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        check_lr(lr)
        check_nonnegative(weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform one optimization step."""
        loss = closure_loss(closure)
        for group in self.param_groups:
            lr, wd, lambd = number_lr(group), group["weight_decay"], group["lambd"]
            for p, x, g in grads_of(group, group["maximize"], "ASGD",
                                    graph=group["differentiable"]):
                state = self.state[p]
                if not state:
                    state.update(step=new_step(), eta=scalar_state(lr), mu=scalar_state(1.0),
                                 ax=state_like(p))
                t = step_count(state, numbers=True)
                eta, mu = state["eta"]._data, state["mu"]._data
                half = s16.is_16(x)     # its add(alpha=) in float32, rounded once
                if wd:
                    g = s16.plus_scaled(g, wd, x) if half else g + wd * x
                scale_(x, 1 - lambd * float(eta))
                if half:
                    s16.plus_scaled(x, -float(eta), g, out=x)
                else:
                    x -= float(eta) * g
                ax = slot(state["ax"], group)
                if float(mu) != 1 and half:     # mu stays float32 (a CPU scalar)
                    ax[...] = ax.astype(s16.f32) + s16.mul(x - ax, float(mu))
                elif float(mu) != 1:
                    ax += (x - ax) * float(mu)
                else:
                    ax[...] = x
                eta[...] = lr / ((1 + lambd * lr * t) ** group["alpha"])
                mu[...] = 1 / max(1, t - group["t0"])
                if not group["differentiable"]:     # a graph step's ops bump it
                    p._bump_version()
        return loss
