"""RMSprop (``torch.optim.RMSprop``)."""

import functools

from ember.optim import _stale_foreach as stale
from ember.optim import _steps16 as s16
from ember.optim._checks import check_lr, check_nonnegative
from ember.optim._state import (apply_updates, grads_of, lr_of, plain_rate, step_like, slot,
                                state_like,
                                step_count, uncounter)
from ember.optim.optimizer import Optimizer, _use_grad_for_differentiable, closure_loss

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop: v = alpha v + (1 - alpha) g^2; d = sqrt(v - gbar^2) + eps when centered
    (gbar = lerp(gbar, g, 1 - alpha)) else sqrt(v) + eps; b = momentum b + g / d and
    p -= lr b with momentum, else p -= lr g / d."""

    _LEGACY_DEFAULTS = {"momentum": 0, "centered": False, "foreach": None, "maximize": False,
                        "differentiable": False, "capturable": False}
    _LEGACY_SCALARS = ("step",)

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        check_lr(lr)
        check_nonnegative(eps=eps, momentum=momentum, weight_decay=weight_decay, alpha=alpha)
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps,
                                      centered=centered, weight_decay=weight_decay,
                                      capturable=capturable, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable))

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform one optimization step."""
        loss = closure_loss(closure)
        for group in self.param_groups:
            hyper = dict(lr=lr_of(group), alpha=group["alpha"], eps=group["eps"],
                         weight_decay=group["weight_decay"], momentum=group["momentum"],
                         centered=group["centered"])
            params, updates = [], []
            for p, x, g in grads_of(group, group["maximize"], "RMSprop",
                                  graph=group["differentiable"]):
                params.append(p)
                updates.append((x, g) + self._averages(p, group))
            diff = group["differentiable"]
            update = _update_graph if diff else _update_foreach if group["foreach"] else _update
            if group["foreach"] and not diff and stale.is_stale(updates, (2, 3, 4)):
                stale.rmsprop(params, updates, **hyper)
                continue
            apply_updates("rmsprop", params, updates, update, differentiable=diff,
                          undo=uncounter(self.state, group), **hyper)
        return loss

    def _averages(self, p, group):
        """(square average, gradient average or None, momentum buffer or None) of ``p``,
        its state made on its first step and its step counted."""
        state = self.state[p]
        if not state:
            state.update(step=step_like(p, group), square_avg=state_like(p))
            if group["momentum"] > 0:
                state["momentum_buffer"] = state_like(p)
            if group["centered"]:
                state["grad_avg"] = state_like(p)
        step_count(state)
        return tuple(None if name not in state else slot(state[name], group)
                     for name in ("square_avg", "grad_avg", "momentum_buffer"))


def _update(x, g, v, gbar, b, *, lr, alpha, eps, weight_decay, momentum, centered,
            foreach=False):
    """One parameter's RMSprop step in place, in array operations."""
    if s16.is_16(x):
        return _update_16(x, g, v, gbar, b, lr=lr, alpha=alpha, eps=eps,
                          weight_decay=weight_decay, momentum=momentum, centered=centered,
                          foreach=foreach)
    if weight_decay:
        g = g + weight_decay * x
    v *= alpha
    v += (1 - alpha) * g * g
    if centered:
        gbar += (1 - alpha) * (g - gbar)
        avg = (v - gbar * gbar) ** 0.5
    else:
        avg = v ** 0.5
    avg += eps
    if momentum > 0:
        b *= momentum
        b += g / avg
        x -= lr * b
    else:
        x -= lr * g / avg


def _update_16(x, g, v, gbar, b, *, lr, alpha, eps, weight_decay, momentum, centered,
               foreach):
    """RMSprop on a float16/bfloat16 parameter op by op as PyTorch's CPU kernels run it."""
    factor = s16.factor_of(x, foreach)
    if weight_decay:
        g = s16.plus_scaled(g, weight_decay, x)
    s16.mul_(v, factor(alpha))
    s16.addcmul(v, g, g, 1 - alpha, out=v)
    if centered:
        s16.lerp(gbar, g, 1 - alpha)
        avg = s16.sqrt(s16.addcmul(v, gbar, gbar, -1))
    else:
        avg = s16.sqrt(v)
    avg = s16.add_(avg, eps)
    if momentum > 0:
        s16.mul_(b, factor(momentum))
        s16.addcdiv(b, g, avg, 1, out=b)
        s16.plus_scaled(x, -lr, b, out=x)
    else:
        s16.addcdiv(x, g, avg, -lr, out=x)


_update_foreach = functools.partial(_update, foreach=True)


def _update_graph(x, g, v, gbar, b, *, lr, alpha, eps, weight_decay, momentum, centered):
    """One parameter's RMSprop step on tensors, recorded by autograd
    (``differentiable=True``)."""
    if weight_decay:
        g = g.add(x, alpha=weight_decay)
    v.mul_(alpha).addcmul_(g, g, value=1 - alpha)
    if centered:
        gbar.lerp_(g, 1 - alpha)
        avg = v.addcmul(gbar, gbar, value=-1).sqrt() + eps
    else:
        avg = v.sqrt() + eps
    if momentum > 0:
        b.mul_(momentum).addcdiv_(g, avg)
        x.add_(b, alpha=-lr)
    else:
        x.addcdiv_(g, avg, value=-plain_rate(lr, "addcdiv_(): argument 'value'"))
