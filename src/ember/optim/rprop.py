"""Rprop: resilient backpropagation (``torch.optim.Rprop``)."""

import numpy as np

from ember._tensor import _make
from ember.backend import xp_of
from ember.optim import _steps16 as s16
from ember.optim._checks import check_lr
from ember.optim._state import (grads_of, new_step, number_lr, real, real_view, state_like,
                                step_count)
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
            eta_minus, eta_plus = group["etas"]
            lo, hi = group["step_sizes"]
            for p, x, g in grads_of(group, group["maximize"], "Rprop"):
                state = self.state[p]
                if not state:
                    lr = number_lr(group)          # each real component steps by lr
                    state.update(step=new_step(), prev=state_like(p),
                                 step_size=state_like(p, complex(lr, lr) if p.is_complex()
                                                      else lr))
                step_count(state)
                xp = xp_of(x)
                prev, size = real(state["prev"]._data), real(state["step_size"]._data)
                sign = xp.sign(g * prev)
                up, down = eta_plus, eta_minus
                if s16.is_16(x):    # PyTorch writes them into a sign tensor of x's dtype
                    up, down = (float(np.asarray(e, x.dtype)) for e in (up, down))
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


def _subtract_recorded(p, sign, size):
    """``p -= sign * size`` as an in-place op autograd records (``differentiable=True``,
    PyTorch's addcmul_): constant in the graph, as sign() passes no gradient; on a leaf
    that requires grad it raises PyTorch's error."""
    real_view(p).addcmul_(_make(sign), _make(size), value=-1)
