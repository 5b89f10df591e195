"""Adafactor: factored second moments (``torch.optim.Adafactor``)."""

import math

import ml_dtypes

from ember._tensor import _make
from ember.backend import device_guard, gpu_elsewhere, xp_of
from ember.optim._checks import check_tensor_lr
from ember.optim._state import (STEPS_MSG, apply_updates, grads_of, new_step, number_lr,
                                step_count, value)
from ember.optim.muon import decay_and_subtract, lerp_, wide_dtype
from ember.optim.optimizer import Optimizer, closure_loss

__all__ = ["Adafactor"]


class Adafactor(Optimizer):
    """Adafactor: beta2_t = 1 - t^beta2_decay; rho = min(lr, 1 / sqrt(t)); alpha =
    max(eps2, RMS(p)) rho; p *= 1 - lr weight_decay. A parameter of 2 or more dims keeps
    row and column means of g^2 (R, C: lerp(., mean g^2, 1 - beta2_t) over its last two dims)
    and V = R C / max(mean R, eps1); others keep V = lerp(V, g^2, 1 - beta2_t). Then
    U = g / max(sqrt(V), eps1), U /= max(1, RMS(U) / d) and p -= alpha U. eps1 defaults to
    the machine epsilon of the parameter's dtype."""

    _LEGACY_DEFAULTS = {"foreach": None}
    _LEGACY_SCALARS = ("step",)

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                 weight_decay=0.0, *, foreach=None, maximize=False):
        check_tensor_lr(lr)
        if not 0.0 <= value(lr):
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize))

    def step(self, closure=None):
        """Perform one optimization step."""
        loss = closure_loss(closure)
        for group in self.param_groups:
            eps1, eps2 = group["eps"]
            params, updates = [], []
            for p, x, g in grads_of(group, group["maximize"], "Adafactor"):
                if p.is_complex():
                    raise RuntimeError("Adafactor does not support complex parameters")
                state = self.state[p]
                if not state:
                    state["step"] = new_step()
                    if p.dim() >= 2:
                        state["row_var"] = _zeros(p, p.shape[:-1] + (1,))
                        state["col_var"] = _zeros(p, p.shape[:-2] + (1, p.shape[-1]))
                    else:
                        state["variance"] = _zeros(p, p.shape)
                t = step_count(state, message=STEPS_MSG)
                if x.size == 0:         # nothing to update (PyTorch divides by zero here)
                    continue
                moments = tuple(state[k]._data if k in state else None
                                for k in ("row_var", "col_var", "variance"))
                params.append(p)
                updates.append((x, g) + moments + (
                    t, ml_dtypes.finfo(x.dtype).eps if eps1 is None else eps1))
            apply_updates("adafactor", params, updates, _update, lr=number_lr(group),
                          beta2_decay=group["beta2_decay"], eps2=eps2, d=group["d"],
                          weight_decay=group["weight_decay"])
        return loss


def _zeros(p, shape):
    """A zero state tensor of ``shape`` in ``p``'s dtype, on its device."""
    with device_guard(gpu_elsewhere(p._data)):
        return _make(xp_of(p._data).zeros(shape, p._data.dtype))


def _rms(xp, a):
    """The root mean square of ``a``, a 0-d array (no host round trip on a GPU)."""
    return xp.sqrt((a * a).sum()) / math.sqrt(a.size)


def _update(x, g, row, col, var, t, eps1, *, lr, beta2_decay, eps2, d, weight_decay):
    """One parameter's Adafactor step in place, in array operations (for 16-bit floats in
    float32, the state and parameter rounded as they are written)."""
    xp = xp_of(x)
    wide = wide_dtype(x)
    g = g.astype(wide, copy=False)
    weight = 1 - (1 - t ** beta2_decay)         # 1 - beta2_t, as PyTorch rounds it
    alpha = xp.maximum(_rms(xp, x.astype(wide, copy=False)), eps2) * min(lr, 1 / math.sqrt(t))
    square = g * g
    if row is not None:
        lerp_(row, square.mean(-1, keepdims=True), weight)
        lerp_(col, square.mean(-2, keepdims=True), weight)
        row, col = row.astype(wide, copy=False), col.astype(wide, copy=False)
        var = row * col / xp.maximum(row.mean(-2, keepdims=True), eps1)
    else:
        var = lerp_(var, square, weight).astype(wide, copy=False)
    u = g / xp.maximum(xp.sqrt(var), eps1)
    u /= xp.maximum(_rms(xp, u) / d, 1)
    decay_and_subtract(x, 1 - lr * weight_decay, alpha * u)
