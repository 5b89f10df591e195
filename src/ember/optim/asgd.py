"""ASGD: averaged stochastic gradient descent (``torch.optim.ASGD``)."""

import math

import numpy as np

from ember._dtype import get_default_dtype
from ember._tensor import Tensor
from ember.backend import xp_of
from ember.backend.fused import fma
from ember.optim import _steps16 as s16
from ember.optim._checks import check_lr, check_nonnegative
from ember.optim._state import (check_shapes, grads_of, new_step, number_lr, scalar_state,
                                scale_, slot, stale_in, state_like, step_count)
from ember.optim.optimizer import Optimizer, _use_grad_for_differentiable, closure_loss

__all__ = ["ASGD"]


class ASGD(Optimizer):
    """ASGD: p = p (1 - lambd eta) - eta g; ax averages p from step t0 on (mu = 1 /
    max(1, t - t0)); eta = lr / (1 + lambd lr t)^alpha. eta and mu are float32 state, as
    in PyTorch."""

    _LEGACY_DEFAULTS = {"foreach": None, "maximize": False, "differentiable": False,
                        "capturable": False}
    _LEGACY_SCALARS = ("step", "eta", "mu")
    _LEGACY_ON_DEVICE = True

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
            multi = group["foreach"] and not group["differentiable"]
            nested = []
            if multi and stale_in(self.state, group, ("ax",)):
                _stale_multi_step(self.state, group, nested)
                grads_of_group = ()
            else:
                grads_of_group = grads_of(group, group["maximize"], "ASGD",
                                          graph=group["differentiable"], nested=nested)
            for p, x, g in grads_of_group:
                t, eta, mu, ax = _stepped_state(self.state[p], p, group)
                try:
                    if multi:
                        _multi_update(x, g, ax, eta, mu, lambd=lambd, weight_decay=wd)
                    else:
                        _single_update(x, g, ax, float(eta), float(mu), lambd=lambd,
                                       weight_decay=wd)
                except ValueError as error:
                    raise _stale_average(error, x.shape, ax.shape,
                                         multi or float(mu) != 1) from None
                # (on the step count's tensor, or as PyTorch's as_tensor of a number: the
                # default dtype's, whatever dtype the state has, e.g. float64 once loaded)
                if multi:
                    eta[...] = _multi_eta(group, lr, t, self.state[p]["step"])
                else:
                    eta[...] = _as_tensor(lr / ((1 + lambd * lr * t) ** group["alpha"]),
                                          group["lr"])
                mu[...] = _as_tensor(1 / max(1, t - group["t0"]))
                if not group["differentiable"]:     # a graph step's ops bump it
                    p._bump_version()
            for p in nested:        # nested tensors (PyTorch steps them with their ops)
                from ember.nested._strided_optim import asgd_step
                asgd_step(p, self.state[p], group)
        return loss


def _stepped_state(state, p, group):
    """``(step count, eta, mu, ax)`` of parameter ``p`` (arrays, ``ax`` a tensor under
    ``differentiable=True``), its state made on its first step and its step counted."""
    if not state:
        state.update(step=new_step(like=p), eta=scalar_state(number_lr(group), like=p),
                     mu=scalar_state(1.0, like=p), ax=state_like(p))     # all on p's device
    t = step_count(state, numbers=True)
    return t, state["eta"]._data, state["mu"]._data, slot(state["ax"], group)


def _stale_multi_step(states, group, nested):
    """The multi-tensor step of a group where some ``ax`` was kept from before its parameter
    changed shape: PyTorch's list ops over all parameters one after another, each shape
    checked, so that its error comes at the same op with what it wrote before (every step
    counted and parameter stepped before ``param - ax``; no ``ax``, eta or mu written)."""
    lr, wd, lambd = number_lr(group), group["weight_decay"], group["lambd"]
    items = [(p, x, g, *_stepped_state(states[p], p, group))
             for p, x, g in grads_of(group, group["maximize"], "ASGD", nested=nested)]
    for _, x, g, _, eta, _, _ in items:
        check_shapes(None, g.shape, x.shape)
        g = _plus_scaled(_plus_scaled(g, wd, x) if wd else g, lambd, x)
        check_shapes(x.shape, g.shape)
        _addcmul_(x, g, eta, -1)
    moves = []
    for _, x, _, _, _, _, ax in items:                          # _foreach_sub(params, axs)
        check_shapes(None, x.shape, ax.shape)
        moves.append(x - ax)
    for (_, _, _, _, _, mu, ax), move in zip(items, moves):
        check_shapes(ax.shape, move.shape)
        _addcmul_(ax, move, mu, 1)
    for p, _, _, t, eta, mu, _ in items:
        eta[...] = _multi_eta(group, lr, t, states[p]["step"])
        mu[...] = _as_tensor(1 / max(1, t - group["t0"]))
        p._bump_version()


def _stale_average(error, shape, ax_shape, moving):
    """PyTorch's RuntimeError for NumPy's ``error`` where ``ax`` was kept from before the
    parameter changed shape (the parameter has stepped by then): ``ax.copy_(param)`` while mu
    is 1, else ``ax.add_(param.sub(ax) * mu)`` (as the multi-tensor step always does); any
    other ``error`` as it was."""
    try:
        if moving:
            check_shapes(ax_shape, check_shapes(None, shape, ax_shape))
        else:
            check_shapes(ax_shape, shape)
    except RuntimeError as stale:
        return stale
    return error


def _plus_scaled(a, scale, b):
    """``a.add(b, alpha=scale)`` (fresh): fused on float32 NumPy arrays as PyTorch's CPU
    kernel runs it, in float32 rounded once on 16-bit ones."""
    if s16.is_16(a):
        return s16.plus_scaled(a, scale, b)
    return fma(xp_of(a), b, np.float32(scale), a) if a.dtype == np.float32 else a + scale * b


def _single_update(x, g, ax, eta, mu, *, lambd, weight_decay):
    """PyTorch's single-tensor step (``foreach=None`` on the CPU) in place on ``x``, ``ax``
    (arrays, or tensors under ``differentiable=True``): decay, then ``add_(g, alpha=-eta)``."""
    if weight_decay:
        g = _plus_scaled(g, weight_decay, x) if hasattr(g, "flags") else g + weight_decay * x
    scale_(x, 1 - lambd * eta)
    if not hasattr(x, "flags"):             # differentiable: recorded tensor ops
        x.add_(g, alpha=-eta)
    else:
        x[...] = _plus_scaled(x, -eta, g)
    if mu == 1 and not hasattr(ax, "flags"):   # differentiable: PyTorch's ax.copy_(param),
        ax.copy_(x)                             # its error where the shapes differ
    elif mu == 1:
        ax[...] = x
    elif s16.is_16(x):                      # mu stays float32 (a CPU scalar)
        ax[...] = ax.astype(s16.f32) + s16.mul(x - ax, mu)
    else:
        ax += (x - ax) * mu


def _multi_update(x, g, ax, eta, mu, *, lambd, weight_decay):
    """PyTorch's multi-tensor step in place on arrays ``x``, ``ax``: the decay folded into
    the gradient (``g + wd x + lambd x``), then ``addcmul`` by the 0-d float32 ``eta``; ``ax``
    moves by ``addcmul`` with ``mu`` even while mu is 1."""
    if weight_decay:
        g = _plus_scaled(g, weight_decay, x)
    g = _plus_scaled(g, lambd, x)
    _addcmul_(x, g, eta, -1)
    _addcmul_(ax, x - ax, mu, 1)


def _addcmul_(a, t, scalar, value):
    """``a.addcmul_(t, scalar, value=value)`` with ``scalar`` a 0-d float32 array: fused on
    float32 ``a``; on 16-bit ``a`` the scalar rounds to its dtype first (PyTorch casts the
    0-d tensor to the common dtype)."""
    if s16.is_16(a):
        s16.addcmul(a, t, scalar.astype(a.dtype), value, out=a)
    elif a.dtype == np.float32:
        a[...] = fma(xp_of(a), t * np.float32(value), scalar, a)
    else:
        a += (t * value) * scalar.astype(a.dtype)


def _multi_eta(group, lr, t, step):
    """eta as the multi-tensor step computes it on the 0-d ``step`` count: in its dtype, or
    a float64 tensor lr's (the two 0-d tensors promote)."""
    dtype = step.dtype.np
    if isinstance(group["lr"], Tensor) and group["lr"].dtype.itemsize == 8:
        dtype = np.dtype(np.float64)
        lr = dtype.type(group["lr"].item())
    return _tensor_eta(lr, group["lambd"], t, group["alpha"], dtype)


def _as_tensor(number, lr=None):
    """``number`` rounded as ``torch.as_tensor`` makes it: the default dtype, or a tensor
    ``lr``'s dtype where the number was computed from it."""
    d = lr.dtype if isinstance(lr, Tensor) else get_default_dtype()
    return float(np.asarray(number, d.np))


def _tensor_eta(lr, lambd, t, alpha, dtype):
    """``lr / ((1 + lambd * lr * step) ** alpha)`` as PyTorch's foreach step computes it on
    the 0-d step tensor (of ``dtype``): each op rounds to it, a number divided by a tensor is
    its reciprocal times the number, and pow by a number exponent on one value is C's
    double pow rounded once (but for the exponents PyTorch multiplies or roots for). ``lr``:
    a number, or a NumPy scalar for a tensor lr."""
    f = np.dtype(dtype).type
    tensor_lr = isinstance(lr, np.generic)  # a tensor lr stays one: divided by, not scaling
    base = f(1) + (f(f(lambd) * f(lr)) if tensor_lr else f(lambd * lr)) * f(t)
    if alpha in (2, 3):
        power = base * base * base if alpha == 3 else base * base
    elif alpha == 0.5:
        power = np.sqrt(base)
    elif alpha == -0.5:
        power = f(1) / np.sqrt(base)
    else:
        power = f(math.pow(float(base), alpha))
    return f(lr) / power if tensor_lr else (f(1) / power) * f(lr)
