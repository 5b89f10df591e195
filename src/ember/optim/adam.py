"""Adam and AdamW (``torch.optim.Adam``, ``torch.optim.AdamW``)."""

import functools
import math

import numpy as np

from ember._tensor import Tensor
from ember.backend import xp_of
from ember.optim import _stale_foreach as stale
from ember.optim import _fused16
from ember.optim import _steps16 as s16
from ember.optim._checks import check_betas, check_fused, check_tensor_lr
from ember.optim._state import (apply_updates, grads_of, lr_of, lr_quotient, scale_, slot,
                                state_like, step_count, step_like, uncounter, value)
from ember.optim.optimizer import Optimizer, _use_grad_for_differentiable, closure_loss

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """Adam, following PyTorch's documented update:

    g = grad (+ weight_decay * p, or p *= 1 - lr * weight_decay when decoupled);
    m = lerp(m, g, 1 - beta1); v = beta2 * v + (1 - beta2) * g^2 (v_max = max(v_max, v) with
    amsgrad); p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
    """

    _LEGACY_DEFAULTS = {"amsgrad": False, "maximize": False, "foreach": None, "capturable": False,
                        "differentiable": False, "decoupled_weight_decay": False, "fused": None}
    _LEGACY_SCALARS = ("step",)

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        if isinstance(lr, Tensor) and foreach and not capturable:
            raise ValueError("lr as a Tensor is not supported for capturable=False and "
                             "foreach=True")
        check_tensor_lr(lr)
        _check(lr, betas, eps, weight_decay)
        betas = _tensor_betas(betas, foreach, capturable)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, foreach=foreach,
                                      capturable=capturable, differentiable=differentiable,
                                      fused=fused, decoupled_weight_decay=decoupled_weight_decay))
        check_fused(fused, foreach, differentiable)

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform one optimization step."""
        loss = closure_loss(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            if not group["differentiable"]:     # tensor betas keep their graph only then
                # (float32 ones as NumPy float32: PyTorch's bias corrections of them are
                # float32 tensors; its fused kernel takes doubles)
                plain = value if group["fused"] else _beta_number
                beta1, beta2 = plain(beta1), plain(beta2)
            # (PyTorch's fused kernel takes a tensor lr as a double: lr.item())
            lr = value(group["lr"]) if group["fused"] else lr_of(group)
            if type(lr) is float and isinstance(group["lr"], Tensor) \
                    and np.float32 in (type(beta1), type(beta2)):
                lr = np.float64(lr)     # (a float64 tensor: over a float32 beta's correction
                #                          it divides in float64, a number multiplies)
            hyper = dict(lr=lr, beta1=beta1, beta2=beta2, eps=group["eps"],
                         weight_decay=group["weight_decay"],
                         decoupled=group["decoupled_weight_decay"], amsgrad=group["amsgrad"])
            params, updates = [], []
            for p, x, g in grads_of(group, group["maximize"], "Adam",
                                  graph=group["differentiable"]):
                params.append(p)
                updates.append(self._moments(p, x, g, group))
            diff = group["differentiable"]
            if params and group["foreach"] and not (diff or group["capturable"]):
                _refuse_tensor_betas(self.state, params, group["betas"])
            update = (_update_graph if diff else _update_fused if group["fused"]
                      else _update_foreach if group["foreach"] else _update)
            if group["foreach"] and not diff and stale.is_stale(updates, (2, 3, 4)):
                stale.adam(params, updates, **hyper)
                continue
            apply_updates("adam", params, updates, update, differentiable=diff,
                          undo=uncounter(self.state, group), **hyper)
        return loss

    def _moments(self, p, x, g, group):
        """(x, g, m, v, vmax or None, step count) of parameter ``p``, its state made on its
        first step and its step counted."""
        state, amsgrad = self.state[p], group["amsgrad"]
        if not state:
            state["step"] = step_like(p, group)
            state["exp_avg"] = state_like(p)
            state["exp_avg_sq"] = state_like(p)
            if amsgrad:
                state["max_exp_avg_sq"] = state_like(p)
        vmax = slot(state["max_exp_avg_sq"], group) if amsgrad else None
        t = step_count(state)
        if group["differentiable"]:     # the count as a tensor (see _update_graph), copied:
            t = state["step"].clone()   # beta ** t saves it, and later steps increment it
        return x, g, slot(state["exp_avg"], group), slot(state["exp_avg_sq"], group), vmax, t


def moments(x, g, m, v, *, lr, beta1, beta2, weight_decay, decoupled):
    """The Adam family's first step in place: weight decay (decoupled: of ``x``; else added
    to the gradient, which is returned), then the moving averages ``m`` of the gradient and
    ``v`` of its square."""
    if weight_decay:
        if decoupled:
            scale_(x, 1 - lr * weight_decay)
        else:
            g = g + weight_decay * x
    if isinstance(m, Tensor):   # differentiable=True: PyTorch's in-place ops, which the
        m.lerp_(g, 1 - beta1)   # graph names (lerp_, mul_, addcmul_; a learnable beta2's
        if isinstance(beta2, Tensor) and beta2.requires_grad:   # weight through lerp_)
            v.lerp_(g.square(), 1 - beta2)
        else:
            v.mul_(beta2).addcmul_(g, g, value=value(1 - beta2))
        return g
    m += (1 - beta1) * (g - m)
    v *= beta2
    v += (1 - beta2) * g * g
    return g


def _update(x, g, m, v, vmax, t, *, lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad,
            foreach=False):
    """One parameter's Adam step in place, in array operations."""
    if x.dtype.itemsize < 4 and x.dtype.kind in "fV":
        return _update_16(x, g, m, v, vmax, t, lr=lr, beta1=beta1, beta2=beta2, eps=eps,
                          weight_decay=weight_decay, decoupled=decoupled, amsgrad=amsgrad,
                          foreach=foreach)
    moments(x, g, m, v, lr=float(lr) if type(lr) is np.float64 else lr, beta1=beta1,
            beta2=beta2, weight_decay=weight_decay, decoupled=decoupled)
    if amsgrad:
        xp_of(vmax).maximum(vmax, v, out=vmax)
        v = vmax
    denom = v ** 0.5
    if isinstance(beta1, np.float32) or isinstance(beta2, np.float32):
        # float32 tensor betas (one may be a number, as cycled momentum sets): PyTorch's
        # bias corrections of them are 0-d float32 tensors
        denom /= np.sqrt(_bias32(beta2, t)) if isinstance(beta2, np.float32) \
            else math.sqrt(1 - beta2 ** t)
        denom += eps        # (a number over a tensor is its reciprocal times the number)
        if isinstance(beta1, np.float32):
            bias1 = _bias32(beta1, t)
            step = lr / bias1 if isinstance(lr, np.floating) else (1 / bias1) * np.float32(lr)
        else:
            step = lr_quotient(lr, 1 - beta1 ** t)
        x -= float(step) * m / denom    # (addcdiv_'s value: a Python number)
        return
    denom /= math.sqrt(1 - beta2 ** t)
    denom += eps
    x -= lr_quotient(lr, 1 - beta1 ** t) * m / denom


def _beta_number(beta):
    """A beta as the step computes with it: a float32 tensor's as a NumPy float32."""
    if isinstance(beta, Tensor) and beta.dtype.np == np.float32:
        return np.float32(beta.item())
    return value(beta)


def _bias32(beta, t):
    """``1 - beta ** t`` of a float32 ``beta`` as 0-d float32 tensor arithmetic."""
    return np.float32(1) - _pow32(beta, t)


def _pow32(base, t):
    """PyTorch's pow of a 0-d float32 tensor by the number ``t``: x*x and x*x*x for 2 and 3,
    else the correctly rounded power."""
    if t == 2:
        return base * base
    if t == 3:
        return base * base * base
    return np.float32(math.pow(float(base), t))


def _update_16(x, g, m, v, vmax, t, *, lr, beta1, beta2, eps, weight_decay, decoupled,
               amsgrad, foreach):
    """Adam on a float16/bfloat16 parameter op by op as PyTorch's CPU kernels run it
    (``_steps16``: each op in float32 with its scalar in float32, rounded once; NumPy's
    16-bit arithmetic would round the scalars and the partial products)."""
    g = s16.adam_moments(x, g, m, v, lr=lr, beta1=beta1, beta2=beta2,
                         weight_decay=weight_decay, decoupled=decoupled, foreach=foreach)
    if amsgrad:
        xp_of(vmax).maximum(vmax, v, out=vmax)
        v = vmax
    denom = s16.add_(s16.div(s16.sqrt(v), math.sqrt(1 - beta2 ** t)), eps)
    s16.addcdiv(x, m, denom, -(lr / (1 - beta1 ** t)), out=x)


_update_foreach = functools.partial(_update, foreach=True)


def _update_fused(x, g, m, v, vmax, t, **hyper):
    """One parameter's ``fused=True`` Adam step: on the CPU a 16-bit one runs PyTorch's
    fused kernel's float32-inside step (``_fused16``); the rest as unfused."""
    if s16.is_16(x) and xp_of(x) is np:
        return _fused16.adam_(x, g, m, v, vmax, t, **hyper)
    return _update(x, g, m, v, vmax, t, **hyper)


def _update_graph(x, g, m, v, vmax, t, *, lr, beta1, beta2, eps, weight_decay, decoupled,
                  amsgrad):
    """One parameter's Adam step on tensors, recorded by autograd (``differentiable=True``).

    What the graph saves is never modified by a later step, as in PyTorch (which clones
    ``m`` and ``vmax`` for it). ``t`` is the step count tensor: PyTorch computes the bias
    corrections in its dtype (float32 under the default dtype), and so does this."""
    g = moments(x, g, m, v, lr=lr, beta1=beta1, beta2=beta2, weight_decay=weight_decay,
                decoupled=decoupled)
    if amsgrad:
        vmax.copy_(vmax.clone().maximum(v))
        v = vmax
    step_size_neg = -(lr / (1 - beta1 ** t))    # PyTorch's form: the graph ends in addcdiv_
    denom = v.sqrt() / ((1 - beta2 ** t).sqrt() * step_size_neg) + eps / step_size_neg
    x.addcdiv_(m.clone(), denom)


class AdamW(Adam):
    """Adam with decoupled weight decay (``torch.optim.AdamW``): p *= 1 - lr * weight_decay."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def _upgrade(self):
        """As Adam's, and every group's weight decay decoupled (PyTorch sets it so)."""
        super()._upgrade()
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True


def _tensor_betas(betas, foreach, capturable):
    """``betas`` as a tuple, both floats or both one-element tensors (made 0-d)."""
    kinds = [isinstance(b, Tensor) for b in betas]
    # an int such as betas=(0, 0.99) is refused too, as torch's isinstance(float) check does
    if not (all(kinds) or all(isinstance(b, float) for b in betas)):
        raise ValueError("betas must be either both floats or both Tensors")
    if not kinds[0]:
        return tuple(betas)
    for i, b in enumerate(betas):
        if not capturable and foreach:
            raise ValueError(f"betas[{i}] as a Tensor is not supported for capturable=False "
                             "and foreach=True")
        if b.numel() != 1:
            raise ValueError(f"Tensor betas[{i}] must be 1-element")
    return tuple(b.reshape(()) for b in betas)


def _refuse_tensor_betas(states, params, betas):
    """PyTorch's foreach step refuses a group's tensor betas (one a group's own, unchecked at
    construction) once the states are made, the step counts not yet taken."""
    for i, b in enumerate(betas):
        if isinstance(b, Tensor):
            for p in params:
                states[p]["step"]._data -= 1
            raise ValueError(f"beta{i + 1} as a Tensor is not supported for capturable=False "
                             "and foreach=True")


def _check(lr, betas, eps, weight_decay):
    if not 0.0 <= value(lr):
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    check_betas(betas)
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")
