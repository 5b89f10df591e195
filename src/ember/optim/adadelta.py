"""Adadelta (``torch.optim.Adadelta``)."""

import functools

from ember.optim import _stale_foreach as stale
from ember.optim import _steps16 as s16
from ember.optim._checks import check_lr, check_nonnegative
from ember.optim._state import (apply_updates, descend_, grads_of, lr_of, step_like, number_lr,
                                slot, state_like, step_count, uncounter)
from ember.optim.optimizer import Optimizer, _use_grad_for_differentiable, closure_loss

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """Adadelta: v = rho v + (1 - rho) g^2; d = sqrt(u + eps) / sqrt(v + eps) * g;
    u = rho u + (1 - rho) d^2; p -= lr * d."""

    _LEGACY_DEFAULTS = {"foreach": None, "maximize": False, "differentiable": False,
                        "capturable": False}
    _LEGACY_SCALARS = ("step",)

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        check_nonnegative(eps=eps, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, capturable=capturable,
                                      foreach=foreach, differentiable=differentiable))

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform one optimization step."""
        loss = closure_loss(closure)
        for group in self.param_groups:
            params, updates = [], []
            for p, x, g in grads_of(group, group["maximize"], "Adadelta",
                                    graph=group["differentiable"]):
                state = self.state[p]
                if not state:
                    state.update(step=step_like(p, group), square_avg=state_like(p),
                                 acc_delta=state_like(p))
                step_count(state)
                params.append(p)
                updates.append((x, g, slot(state["square_avg"], group),
                                slot(state["acc_delta"], group)))
            update = _update
            if group["foreach"] and not group["differentiable"]:
                update = functools.partial(_update, foreach=True)
            if group["foreach"] and not group["differentiable"] and stale.is_stale(updates):
                stale.adadelta(params, updates, lr=number_lr(group), rho=group["rho"],
                               eps=group["eps"], weight_decay=group["weight_decay"])
                continue
            apply_updates("adadelta", params, updates, update, undo=uncounter(self.state, group),
                          differentiable=group["differentiable"],
                          lr=lr_of(group) if group["differentiable"] else number_lr(group),
                          rho=group["rho"], eps=group["eps"],
                          weight_decay=group["weight_decay"])
        return loss


def _update(x, g, v, u, *, lr, rho, eps, weight_decay, foreach=False):
    """One parameter's Adadelta step in place, in array operations."""
    if s16.is_16(x):
        return _update_16(x, g, v, u, lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                          foreach=foreach)
    if weight_decay:
        g = g + weight_decay * x
    v *= rho
    v += (1 - rho) * g * g
    delta = ((u + eps) ** 0.5) / ((v + eps) ** 0.5) * g
    u *= rho
    u += (1 - rho) * delta * delta
    try:        # (a learnable lr: PyTorch's add_(delta, alpha=-lr) refuses it)
        descend_(x, delta, lr, refuse="add_(): argument 'alpha'")
    except ValueError as error:     # PyTorch's op on a complex parameter itself
        error.on_param = True
        raise


def _update_16(x, g, v, u, *, lr, rho, eps, weight_decay, foreach):
    """Adadelta on a float16/bfloat16 parameter op by op as PyTorch's CPU kernels run it."""
    factor = s16.factor_of(x, foreach)
    if weight_decay:
        g = s16.plus_scaled(g, weight_decay, x)
    s16.mul_(v, factor(rho))
    s16.addcmul(v, g, g, 1 - rho, out=v)
    std = s16.sqrt(s16.add_(v, eps))
    delta = s16.mul(s16.div(s16.sqrt(s16.add_(u, eps)), std), g)
    s16.mul_(u, factor(rho))
    s16.addcmul(u, delta, delta, 1 - rho, out=u)
    s16.plus_scaled(x, -lr, delta, out=x)
