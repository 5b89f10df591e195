"""NAdam: Adam with Nesterov momentum (``torch.optim.NAdam``)."""

import functools

from ember._tensor import Tensor
from ember.optim import _stale_foreach as stale
from ember.optim import _steps16 as s16
from ember.optim._checks import check_betas, check_lr, check_nonnegative
from ember.optim._state import (apply_updates, grads_of, lr_of, lr_product, lr_quotient,
                                step_like, scalar_state, slot,
                                state_like, step_count, uncounter)
from ember.optim.adam import moments
from ember.optim.optimizer import Optimizer, _use_grad_for_differentiable, closure_loss

__all__ = ["NAdam"]


class NAdam(Optimizer):
    """NAdam with momentum decay psi: mu_t = beta1 (1 - 0.96^(t psi) / 2);
    p -= lr (1 - mu_t) / (1 - prod mu) g / d + lr mu_(t+1) / (1 - prod mu * mu_(t+1)) m / d,
    with d = sqrt(v / (1 - beta2^t)) + eps."""

    _LEGACY_DEFAULTS = {"maximize": False, "foreach": None, "capturable": False,
                        "differentiable": False, "decoupled_weight_decay": False}
    _LEGACY_SCALARS = ("step", "mu_product")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        check_lr(lr)
        check_nonnegative(eps=eps)
        check_betas(betas)
        check_nonnegative(weight_decay=weight_decay, momentum_decay=momentum_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps,
                                      weight_decay=weight_decay, momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach,
                                      capturable=capturable, differentiable=differentiable))

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform one optimization step."""
        loss = closure_loss(closure)
        for group in self.param_groups:
            lr = lr_of(group)
            beta1, beta2 = group["betas"]
            psi = group["momentum_decay"]
            # (PyTorch's foreach step takes a tensor lr as lr.item(): its rates are doubles)
            rate = float(lr) if group["foreach"] and not group["differentiable"] else lr
            params, updates, kept = [], [], {}
            for p, x, g in grads_of(group, group["maximize"], "NAdam",
                                    graph=group["differentiable"]):
                state = self.state[p]
                if not state:
                    state.update(step=step_like(p, group), mu_product=scalar_state(1.0, like=p),
                                 exp_avg=state_like(p), exp_avg_sq=state_like(p))
                t = step_count(state)
                mu = beta1 * (1.0 - 0.5 * 0.96 ** (t * psi))
                mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * psi))
                product = state["mu_product"]._data
                kept[p] = {"mu_product": float(product)}
                product *= mu               # a float32 running product, as PyTorch keeps it
                params.append(p)
                updates.append((x, g, slot(state["exp_avg"], group),
                                slot(state["exp_avg_sq"], group), 1 - beta2 ** t,
                                *_coefs(rate, mu, mu_next, product, group["differentiable"])))
            update = _update
            if group["foreach"] and not group["differentiable"]:
                update = functools.partial(_update, foreach=True)
            if group["foreach"] and not group["differentiable"] and stale.is_stale(updates):
                stale.nadam(params, updates, [(self.state[p]["mu_product"]._data,
                                               kept[p]["mu_product"]) for p in params],
                            lr=lr, beta1=beta1, beta2=beta2, eps=group["eps"],
                            weight_decay=group["weight_decay"],
                            decoupled=group["decoupled_weight_decay"])
                continue
            apply_updates("nadam", params, updates, update,
                          undo=uncounter(self.state, group, kept),
                          differentiable=group["differentiable"], lr=lr, beta1=beta1,
                          beta2=beta2,
                          eps=group["eps"], weight_decay=group["weight_decay"],
                          decoupled=group["decoupled_weight_decay"])
        return loss


def _coefs(lr, mu, mu_next, product, differentiable):
    """(gradient's, average's) step coefficients; a differentiable step's as PyTorch's
    tensor arithmetic rounds them, in the running product's dtype (float32): a number over
    a tensor is the tensor's reciprocal times the number."""
    if differentiable and not isinstance(lr, Tensor):
        kind = product.dtype.type
        return (float(kind(1.0) / (kind(1.0) - product) * kind(lr * (1.0 - mu))),
                float(kind(1.0) / (kind(1.0) - product * kind(mu_next)) * kind(lr * mu_next)))
    mu_product = float(product)
    return (lr_quotient(lr_product(lr, 1 - mu), 1 - mu_product),
            lr_quotient(lr_product(lr, mu_next), 1 - mu_product * mu_next))


def _update(x, g, m, v, bias_correction2, grad_coef, avg_coef, *, lr, beta1, beta2, eps,
            weight_decay, decoupled, foreach=False):
    """One parameter's NAdam step in place, in array operations: ``grad_coef`` and
    ``avg_coef`` weigh the gradient and the average by this step's momentum schedule."""
    if s16.is_16(x):
        return _update_16(x, g, m, v, bias_correction2, grad_coef, avg_coef, lr=lr,
                          beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay,
                          decoupled=decoupled, foreach=foreach)
    g = moments(x, g, m, v, lr=lr, beta1=beta1, beta2=beta2, weight_decay=weight_decay,
                decoupled=decoupled)
    denom = (v / bias_correction2) ** 0.5
    denom += eps
    if isinstance(x, Tensor):   # differentiable=True: PyTorch's two addcdiv_ of scaled terms
        x.addcdiv_(g * -grad_coef, denom)
        x.addcdiv_(m * -avg_coef, denom)
        return
    x -= grad_coef * g / denom
    x -= avg_coef * m / denom


def _update_16(x, g, m, v, bias_correction2, grad_coef, avg_coef, *, lr, beta1, beta2, eps,
               weight_decay, decoupled, foreach):
    """NAdam on a float16/bfloat16 parameter op by op as PyTorch's CPU kernels run it (the
    foreach form divides the root by sqrt(bias_correction2), the other the root's operand)."""
    g = s16.adam_moments(x, g, m, v, lr=lr, beta1=beta1, beta2=beta2,
                         weight_decay=weight_decay, decoupled=decoupled, foreach=foreach)
    if foreach:
        denom = s16.div(s16.sqrt(v), bias_correction2 ** 0.5)
    else:
        denom = s16.sqrt(s16.div(v, bias_correction2))
    denom = s16.add_(denom, eps)
    s16.addcdiv(x, g, denom, -grad_coef, out=x)
    s16.addcdiv(x, m, denom, -avg_coef, out=x)
