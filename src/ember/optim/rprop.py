"""Rprop: resilient backpropagation (``torch.optim.Rprop``)."""

import numpy as np

from ember._tensor import _make
from ember.backend import xp_of
from ember.optim import _steps16 as s16
from ember.optim._checks import check_lr
from ember.optim._state import (check_shapes, grads_of, step_like, number_lr, plain_rate, real,
                                real_view,
                                stale_in, state_like, step_count)
from ember.optim.optimizer import Optimizer, _use_grad_for_differentiable, closure_loss

__all__ = ["Rprop"]


class Rprop(Optimizer):
    """Rprop: each element's step size grows by eta+ while its gradient keeps its sign and
    shrinks by eta- when it flips (that step is skipped); p -= sign(g) * step size."""

    _LEGACY_DEFAULTS = {"foreach": None, "maximize": False, "differentiable": False,
                        "capturable": False}
    _LEGACY_SCALARS = ("step",)

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, capturable=capturable))

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform one optimization step."""
        loss = closure_loss(closure)
        for group in self.param_groups:
            lo, hi = group["step_sizes"]
            if group["foreach"] and not group["differentiable"] and stale_in(
                    self.state, group, ("prev", "step_size")):
                _stale_multi_step(self.state, group)
                continue
            for p, x, g in grads_of(group, group["maximize"], "Rprop"):
                xp, prev, size, up, down = _stepped_state(self.state[p], p, x, group)
                if not x.shape == prev.shape == size.shape:
                    _raise_stale(xp, x, g, prev, size, (down, up, lo, hi))
                sign = xp.sign(g * prev)
                size *= xp.where(sign > 0, up, xp.where(sign < 0, down, 1.0))
                xp.clip(size, lo, hi, out=size)
                g = xp.where(sign < 0, 0, g)
                if group["differentiable"]:
                    _subtract_recorded(p, xp.sign(g), size)
                else:
                    x -= xp.sign(g) * size
                    p._bump_version()
                prev[...] = g
        return loss


def _stepped_state(state, p, x, group):
    """``(xp, prev, step sizes, eta+, eta-)`` for parameter ``p`` (array ``x``), its state
    made on its first step and its step counted."""
    if not state:
        state.update(step=step_like(p, group), prev=state_like(p))
        # each real component steps by lr; a learnable lr is refused by PyTorch's full_like
        plain_rate(group["lr"], "full_like(): argument 'fill_value' (position 2)")
        lr = number_lr(group)
        state["step_size"] = state_like(p, complex(lr, lr) if p.is_complex() else lr)
    step_count(state)
    down, up = group["etas"]
    if s16.is_16(x):    # PyTorch writes them into a sign tensor of x's dtype
        up, down = (float(np.asarray(e, x.dtype)) for e in (up, down))
    return xp_of(x), real(state["prev"]._data), real(state["step_size"]._data), up, down


def _stale_multi_step(states, group):
    """The multi-tensor step of a group where some state was kept from before its parameter
    changed shape: PyTorch's list ops over all parameters one after another, each shape
    checked, so that its error comes at the same op with what it wrote before."""
    lo, hi = group["step_sizes"]
    items = [(p, x, g, *_stepped_state(states[p], p, x, group))
             for p, x, g in grads_of(group, group["maximize"], "Rprop")]
    signs = []
    for _, _, g, xp, prev, _, _, _ in items:                    # _foreach_mul(grads, prevs)
        check_shapes(None, g.shape, prev.shape)
        signs.append(xp.sign(g * prev))
    flip = group["maximize"]    # g is -grad: PyTorch copies grad, then negates them all
    for _, _, g, _, prev, _, _, _ in items:                     # _foreach_copy_(prevs, grads)
        check_shapes(prev.shape, g.shape)
        prev[...] = -g if flip else g
    for _, _, _, _, prev, _, _, _ in items if flip else ():
        prev *= -1
    for (_, _, _, xp, _, size, up, down), sign in zip(items, signs):
        check_shapes(size.shape, sign.shape)
        size *= xp.where(sign > 0, up, xp.where(sign < 0, down, 1.0))
    for _, _, _, xp, _, size, _, _ in items:
        xp.clip(size, lo, hi, out=size)
    for (_, _, _, xp, prev, _, _, _), sign in zip(items, signs):
        check_shapes(prev.shape, check_shapes(None, sign.shape, prev.shape))
        prev[...] = xp.where(sign < 0, 0, prev)
    for _, x, _, xp, prev, size, _, _ in items:                 # _foreach_addcmul_(params, ...)
        check_shapes(x.shape, prev.shape, size.shape)
        x -= xp.sign(prev) * size
    for p, *_ in items:
        p._bump_version()


def _raise_stale(xp, x, g, prev, size, etas_and_sizes):
    """PyTorch's error for the single-tensor step of a parameter whose state was kept from
    before it changed shape: its ops in its order, each shape checked, so that the error
    comes at the same op, with the step sizes written if it comes after them. (Some op fails
    by the parameter's update at the latest: the shapes differ.)"""
    down, up, lo, hi = etas_and_sizes
    wide = check_shapes(None, g.shape, prev.shape)
    sign = xp.sign(g * prev)
    check_shapes(size.shape, wide)
    size *= xp.where(sign > 0, up, xp.where(sign < 0, down, 1.0))
    xp.clip(size, lo, hi, out=size)
    _check_mask(wide, g.shape)          # grad[sign.eq(etaminus)] = 0
    check_shapes(x.shape, g.shape, size.shape)


def _check_mask(mask, shape):
    """PyTorch's IndexError for a boolean mask of shape ``mask`` indexing one of ``shape``."""
    if len(mask) > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
    for j, (m, n) in enumerate(zip(mask, shape)):
        if m != n:
            raise IndexError(f"The shape of the mask {list(mask)} at index {j} does not match "
                             f"the shape of the indexed tensor {list(shape)} at index {j}")


def _subtract_recorded(p, sign, size):
    """``p -= sign * size`` as an in-place op autograd records (``differentiable=True``,
    PyTorch's addcmul_): constant in the graph, as sign() passes no gradient; on a leaf
    that requires grad it raises PyTorch's error."""
    real_view(p).addcmul_(_make(sign), _make(size), value=-1)
