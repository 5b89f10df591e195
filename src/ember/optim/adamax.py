"""Adamax: Adam with the infinity norm (``torch.optim.Adamax``)."""

import functools

import ember
from ember._tensor import Tensor
from ember.backend import xp_of
from ember.optim import _stale_foreach as stale
from ember.optim import _steps16 as s16
from ember.optim._checks import check_betas, check_lr, check_nonnegative
from ember.optim._state import (apply_updates, grads_of, lr_quotient, number_lr, plain_rate,
                                slot, state_like, step_count, step_like, uncounter)
from ember.optim.optimizer import Optimizer, _use_grad_for_differentiable, closure_loss

__all__ = ["Adamax"]


class Adamax(Optimizer):
    """Adamax: m = lerp(m, g, 1 - beta1); u = max(beta2 * u, |g| + eps);
    p -= lr / (1 - beta1^t) * m / u (g includes weight_decay * p)."""

    _LEGACY_DEFAULTS = {"foreach": None, "maximize": False, "differentiable": False,
                        "capturable": False}
    _LEGACY_SCALARS = ("step",)

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        check_lr(lr)
        check_nonnegative(eps=eps)
        check_betas(betas)
        check_nonnegative(weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform one optimization step."""
        loss = closure_loss(closure)
        for group in self.param_groups:
            lr = number_lr(group)
            # a learnable lr (refused at the update, as PyTorch's addcdiv_ refuses it)
            learnable = group["differentiable"] and _learnable(group["lr"])
            beta1, beta2 = group["betas"]
            # (PyTorch's foreach step takes a tensor lr as lr.item(): its rates are doubles)
            rate = float(lr) if group["foreach"] and not group["differentiable"] else lr
            params, updates = [], []
            for p, x, g in grads_of(group, group["maximize"], "Adamax",
                                    graph=group["differentiable"]):
                state = self.state[p]
                if not state:
                    state.update(step=step_like(p, group), exp_avg=state_like(p),
                                 exp_inf=state_like(p))
                t = step_count(state)
                params.append(p)
                updates.append((x, g, slot(state["exp_avg"], group),
                                slot(state["exp_inf"], group),
                                group["lr"] / (1 - beta1 ** t) if learnable
                                else lr_quotient(rate, 1 - beta1 ** t)))
            update = _update
            if group["foreach"] and not group["differentiable"]:
                update = functools.partial(_update, foreach=True)
            if group["foreach"] and not group["differentiable"] and stale.is_stale(updates):
                stale.adamax(params, updates, lr=lr, beta1=beta1, beta2=beta2, eps=group["eps"],
                             weight_decay=group["weight_decay"])
                continue
            apply_updates("adamax", params, updates, update, undo=uncounter(self.state, group),
                          differentiable=group["differentiable"], lr=lr, beta1=beta1,
                          beta2=beta2,
                          eps=group["eps"], weight_decay=group["weight_decay"])
        return loss


def _learnable(lr):
    """Whether ``lr`` is a tensor that requires grad."""
    return isinstance(lr, Tensor) and lr.requires_grad


def _update(x, g, m, u, coef, *, lr, beta1, beta2, eps, weight_decay, foreach=False):
    """One parameter's Adamax step in place, in array operations (``coef``: the learning
    rate over 1 - beta1^t)."""
    if s16.is_16(x):
        return _update_16(x, g, m, u, coef, beta1=beta1, beta2=beta2, eps=eps,
                          weight_decay=weight_decay, foreach=foreach)
    if weight_decay:
        g = g + weight_decay * x
    if isinstance(u, Tensor):       # differentiable=True: PyTorch's ops (which the graph
        _update_graph(x, g, m, u, coef, beta1=beta1, beta2=beta2, eps=eps)     # names)
        return
    m += (1 - beta1) * (g - m)
    u *= beta2
    xp_of(u).maximum(u, abs(g) + eps, out=u)
    x -= coef * m / u


def _update_graph(x, g, m, u, coef, *, beta1, beta2, eps):
    """Adamax's differentiable step as PyTorch's: the infinity norm the maximum of a stack
    of the decayed norm and |g| + eps, copied in."""
    m.lerp_(g, 1 - beta1)
    norms = ember.cat([u.mul_(beta2).unsqueeze(0), (g.abs() + eps).unsqueeze(0)], 0)
    u.copy_(ember.amax(norms, 0))
    x.addcdiv_(m, u, value=-plain_rate(coef, "addcdiv_(): argument 'value'"))


def _update_16(x, g, m, u, coef, *, beta1, beta2, eps, weight_decay, foreach):
    """Adamax on a float16/bfloat16 parameter op by op as PyTorch's CPU kernels run it."""
    if weight_decay:
        g = s16.plus_scaled(g, weight_decay, x)
    s16.lerp(m, g, 1 - beta1)
    s16.mul_(u, s16.factor_of(x, foreach)(beta2))
    xp_of(u).maximum(u, s16.add_(abs(g), eps), out=u)
    s16.addcdiv(x, m, u, -coef, out=x)
