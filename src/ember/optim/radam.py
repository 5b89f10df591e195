"""RAdam: Adam with a rectified adaptive learning rate (``torch.optim.RAdam``)."""

import functools
import math

from ember._tensor import Tensor
from ember.optim import _stale_foreach as stale
from ember.optim import _steps16 as s16
from ember.optim._checks import check_betas, check_lr, check_nonnegative
from ember.optim._state import (apply_updates, descend_, grads_of, lr_product, lr_quotient,
                                number_lr, step_like,
                                root_plus, slot, state_like, step_count, value, uncounter)
from ember.optim.adam import moments
from ember.optim.optimizer import Optimizer, _use_grad_for_differentiable, closure_loss

__all__ = ["RAdam"]


class RAdam(Optimizer):
    """RAdam: while the variance estimate is tractable (rho_t > 5) the Adam step is scaled
    by the rectification term r_t; before that, p -= lr * m / (1 - beta1^t)."""

    _LEGACY_DEFAULTS = {"foreach": None, "maximize": False, "differentiable": False,
                        "decoupled_weight_decay": False, "capturable": False}
    _LEGACY_SCALARS = ("step",)

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        check_lr(lr)
        check_nonnegative(eps=eps)
        check_betas(betas)
        check_nonnegative(weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps,
                                      weight_decay=weight_decay, maximize=maximize,
                                      foreach=foreach, capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      differentiable=differentiable))

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform one optimization step."""
        loss = closure_loss(closure)
        for group in self.param_groups:
            # a tensor lr multiplies the float64 terms as a number does, as PyTorch's does
            lr = group["lr"] if group["differentiable"] else value(group["lr"])
            # (but a float32 one's decoupled decay 1 - lr * wd is float32, and the foreach
            # step computes its step sizes from it in float32, as PyTorch's tensor ops do)
            fast = group["foreach"] and not group["differentiable"]
            rate = lr if group["differentiable"] else number_lr(group)
            beta1, beta2 = group["betas"]
            rho_inf = 2 / (1 - beta2) - 1
            params, updates = [], []
            for p, x, g in grads_of(group, group["maximize"], "RAdam",
                                    graph=group["differentiable"]):
                state = self.state[p]
                if not state:
                    state.update(step=step_like(p, group), exp_avg=state_like(p),
                                 exp_avg_sq=state_like(p))
                t = step_count(state)
                bias_correction1 = 1 - beta1 ** t
                bias_correction2 = 1 - beta2 ** t
                rho_t = rho_inf - 2 * t * beta2 ** t / bias_correction2
                rectified, rect = rho_t > 5.0, 0.0
                if rectified:
                    rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                                     / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                    coef = lr * rect * math.sqrt(bias_correction2) / bias_correction1
                    if fast:
                        coef = float(lr_product(lr_quotient(lr_product(rate, rect),
                                                            bias_correction1),
                                                bias_correction2 ** 0.5))
                else:
                    coef = float(lr_quotient(rate, bias_correction1)) if fast \
                        else lr / bias_correction1
                params.append(p)
                updates.append((x, g, slot(state["exp_avg"], group),
                                slot(state["exp_avg_sq"], group), coef, rectified,
                                (bias_correction1, bias_correction2, rect)))
            update = _update
            if group["foreach"] and not group["differentiable"]:
                update = functools.partial(_update, foreach=True)
            if group["foreach"] and not group["differentiable"] and stale.is_stale(updates):
                stale.radam(params, updates, lr=rate, beta1=beta1, beta2=beta2, eps=group["eps"],
                            weight_decay=group["weight_decay"],
                            decoupled=group["decoupled_weight_decay"])
                continue
            apply_updates("radam", params, updates, update, undo=uncounter(self.state, group),
                          differentiable=group["differentiable"], lr=rate, beta1=beta1,
                          beta2=beta2,
                          eps=group["eps"], weight_decay=group["weight_decay"],
                          decoupled=group["decoupled_weight_decay"])
        return loss


def _update(x, g, m, v, coef, rectified, terms, *, lr, beta1, beta2, eps, weight_decay,
            decoupled, foreach=False):
    """One parameter's RAdam step in place, in array operations: ``coef`` scales the
    average, divided by sqrt(v) + eps only when the step is ``rectified`` (``terms``: the
    bias corrections and rectification term it derives from, for 16-bit steps)."""
    if s16.is_16(x):
        return _update_16(x, g, m, v, rectified, *terms, lr=lr, beta1=beta1, beta2=beta2,
                          eps=eps, weight_decay=weight_decay, decoupled=decoupled,
                          foreach=foreach)
    g = moments(x, g, m, v, lr=lr, beta1=beta1, beta2=beta2, weight_decay=weight_decay,
                decoupled=decoupled)
    if isinstance(m, Tensor):   # a tensor lr's product saves m, which the next step modifies
        m = m.clone()
    descend_(x, coef * m / root_plus(v, eps) if rectified else coef * m, 1)


def _update_16(x, g, m, v, rectified, bias_correction1, bias_correction2, rect, *, lr, beta1,
               beta2, eps, weight_decay, decoupled, foreach):
    """RAdam on a float16/bfloat16 parameter op by op as PyTorch's CPU kernels run it: the
    foreach form folds both cases into one buffer, sqrt(bc2) * step / (sqrt(v) + eps) (or the
    unrectified step), that multiplies the average."""
    g = s16.adam_moments(x, g, m, v, lr=lr, beta1=beta1, beta2=beta2,
                         weight_decay=weight_decay, decoupled=decoupled, foreach=foreach)
    if foreach:
        root = s16.add_(s16.sqrt(v), eps)
        step = -(bias_correction2 ** 0.5 * (lr * rect / bias_correction1))
        buffer = s16.reciprocal(s16.div(root, step))
        buffer = s16.add_(buffer, -(lr * (0.0 if rectified else 1.0) / bias_correction1))
        s16.addcmul(x, buffer, m, 1, out=x)
        return
    step = s16.mul(s16.div(m, bias_correction1), lr)
    if rectified:
        adaptive = s16.mul(s16.reciprocal(s16.add_(s16.sqrt(v), eps)), bias_correction2 ** 0.5)
        step = s16.mul(s16.mul(step, adaptive), rect)
    s16.plus_scaled(x, -1.0, step, out=x)
