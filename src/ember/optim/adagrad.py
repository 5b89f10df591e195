"""Adagrad (``torch.optim.Adagrad``)."""

import functools

import numpy as np

from ember.backend import xp_of
from ember.optim import _stale_foreach as stale
from ember.optim import _fused16
from ember.optim import _steps16 as s16
from ember.optim._checks import check_fused, check_lr, check_nonnegative
from ember.optim._state import (apply_updates, grads_of, lr_of, lr_quotient, plain_rate,
                                sparse_param,
                                step_like, slot,
                                state_like, step_count, uncounter, value)
from ember.optim.optimizer import Optimizer, _use_grad_for_differentiable, closure_loss
from ember.sparse._invariants import warn_if_implicit

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """Adagrad: s += g^2; p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(s) + eps).

    Its state exists from construction (``sum`` starts at initial_accumulator_value), as
    in PyTorch.
    """

    _LEGACY_DEFAULTS = {"foreach": None, "maximize": False, "differentiable": False,
                        "fused": None}
    _LEGACY_SCALARS = ("step",)

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0,
                 initial_accumulator_value=0, eps=1e-10, foreach=None, *, maximize=False,
                 differentiable=False, fused=None):
        check_lr(lr)
        check_nonnegative(lr_decay=lr_decay, weight_decay=weight_decay,
                          initial_accumulator_value=initial_accumulator_value, eps=eps)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps,
                                      weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, fused=fused))
        check_fused(fused, foreach, differentiable)
        for group in self.param_groups:
            for p in group["params"]:
                _init_state(self.state[p], p, group)

    def share_memory(self):
        """Move each parameter's ``sum`` to shared memory (for Hogwild-style workers)."""
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["sum"].share_memory_()

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform one optimization step."""
        loss = closure_loss(closure)
        for group in self.param_groups:
            # (PyTorch's fused kernel takes a tensor lr as a double: lr.item())
            lr = value(group["lr"]) if group["fused"] else lr_of(group)
            decay = group["lr_decay"]
            params, updates = [], []
            for p, x, g in grads_of(group, group["maximize"], "Adagrad", takes_sparse=True,
                                  graph=group["differentiable"]):
                if group["weight_decay"] and p._grad.is_sparse:
                    raise RuntimeError("weight_decay option is not compatible with sparse "
                                       "gradients")
                if p._grad.is_sparse:       # PyTorch builds its sparse update with
                    warn_if_implicit(None)  # sparse_coo_tensor, which warns
                state = self.state[p]
                if not state:       # a parameter of a group added after construction
                    _init_state(state, p, group)
                t = step_count(state)
                params.append(p)
                updates.append((x, g, slot(state["sum"], group),
                                lr_quotient(lr, 1 + (t - 1) * decay)))
            diff = group["differentiable"]
            update = _update_graph if diff else _update_fused if group["fused"] else _update
            if group["foreach"] and not diff:
                update = functools.partial(_update, foreach=True, maximize=group["maximize"])
            if group["foreach"] and not diff and stale.is_stale(updates, (2,)):
                stale.adagrad(params, updates, eps=group["eps"],
                              weight_decay=group["weight_decay"])
                continue
            apply_updates("adagrad", params, updates, update, differentiable=diff,
                          undo=uncounter(self.state, group),
                          eps=group["eps"], weight_decay=group["weight_decay"])
        return loss


def _init_state(state, p, group):
    """A step count of 0 and ``sum`` filled with the group's initial_accumulator_value (in
    both parts of a complex parameter, which steps as pairs of reals)."""
    v = group["initial_accumulator_value"]
    if sparse_param(p):     # PyTorch's full_like(p, memory_format=...) of a sparse one
        raise RuntimeError("memory format option is only supported by strided tensors")
    state.update(step=step_like(p, group),
                 sum=state_like(p, complex(v, v) if p.is_complex() else v))


def _update(x, g, s, rate, *, eps, weight_decay, foreach=False, maximize=False):
    """One parameter's Adagrad step in place (``rate``: its decayed learning rate)."""
    if s16.is_16(x):
        return _update_16(x, g, s, rate, eps=eps, weight_decay=weight_decay, foreach=foreach,
                          maximize=maximize)
    if weight_decay:
        g = g + weight_decay * x
    s += g * g
    std = s ** 0.5
    std += eps
    x -= rate * g / std


def _update_fused(x, g, s, rate, *, eps, weight_decay):
    """One parameter's ``fused=True`` Adagrad step: on the CPU a 16-bit one runs PyTorch's
    fused kernel's float32-inside step (``_fused16``); the rest as unfused."""
    if s16.is_16(x) and xp_of(x) is np:
        return _fused16.adagrad_(x, g, s, rate, eps=eps, weight_decay=weight_decay)
    return _update(x, g, s, rate, eps=eps, weight_decay=weight_decay)


def _update_16(x, g, s, rate, *, eps, weight_decay, foreach, maximize):
    """Adagrad on a float16/bfloat16 parameter op by op as PyTorch's CPU kernels run it:
    the foreach form scales the gradient by -rate before dividing (in place, its factor
    rounded to the dtype, when weight decay or maximize made the gradient its own)."""
    if weight_decay:
        g = s16.plus_scaled(g, weight_decay, x)
    s16.addcmul(s, g, g, 1, out=s)
    std = s16.add_(s16.sqrt(s), eps)
    if not foreach:
        s16.addcdiv(x, g, std, -rate, out=x)
        return
    own = weight_decay or maximize
    g = s16.mul_(g.copy(), s16.factor_of(x, own)(-rate))
    s16.addcdiv(x, g, std, 1, out=x)


def _update_graph(x, g, s, rate, *, eps, weight_decay):
    """One parameter's Adagrad step on tensors, recorded by autograd
    (``differentiable=True``)."""
    if weight_decay:
        g = g.add(x, alpha=weight_decay)
    s.addcmul_(g, g, value=1)
    x.addcdiv_(g, s.sqrt() + eps, value=-plain_rate(rate, "addcdiv_(): argument 'value'"))
