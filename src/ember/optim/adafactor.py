"""Adafactor: factored second moments (``torch.optim.Adafactor``)."""

import math

import ml_dtypes
import numpy as np

from ember._tensor import Tensor, _make
from ember.backend import device_guard, gpu_elsewhere, xp_of
from ember.backend.cpu_kernels import TORCH_16_BIT_LANES
from ember.optim._checks import check_tensor_lr
from ember.optim._state import (STEPS_MSG, apply_updates, grads_of, new_step, number_lr,
                                scale_, step_count, value)
from ember.optim.muon import decay_and_subtract, lerp_
from ember.optim.optimizer import Optimizer, closure_loss
from ember.optim.sgd import _plus_scaled

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
            lr = number_lr(group)
            if type(lr) is float and isinstance(group["lr"], Tensor):
                lr = np.float64(lr)     # a float64 tensor lr: what derives from it is unrounded
            apply_updates("adafactor", params, updates, _update, lr=lr,
                          beta2_decay=group["beta2_decay"], eps2=eps2, d=group["d"],
                          weight_decay=group["weight_decay"], foreach=group["foreach"])
        return loss


def _zeros(p, shape):
    """A zero state tensor of ``shape`` in ``p``'s dtype, on its device."""
    with device_guard(gpu_elsewhere(p._data)):
        return _make(xp_of(p._data).zeros(shape, p._data.dtype))


def _rms(xp, a):
    """The root mean square of ``a``, a 0-d array (no host round trip on a GPU)."""
    return xp.sqrt((a * a).sum()) / math.sqrt(a.size)


def _update(x, g, row, col, var, t, eps1, *, lr, beta2_decay, eps2, d, weight_decay,
            foreach=None):
    """One parameter's Adafactor step in place, in array operations."""
    if x.dtype.itemsize < 4:
        return _update_16(x, g, row, col, var, t, eps1, lr=lr, beta2_decay=beta2_decay,
                          eps2=eps2, d=d, weight_decay=weight_decay, foreach=foreach)
    xp = xp_of(x)
    weight = t ** beta2_decay                   # 1 - beta2_t
    rho = min(lr, 1 / math.sqrt(t))
    alpha = xp.maximum(_rms(xp, x), eps2)
    if isinstance(rho, np.floating) and rho.dtype.itemsize < 8:
        alpha = alpha.astype(rho.dtype)     # (a float32 lr tensor: PyTorch's alpha is one)
    alpha = alpha * rho
    square = g * g
    if row is not None:
        lerp_(row, square.mean(-1, keepdims=True), weight)
        lerp_(col, square.mean(-2, keepdims=True), weight)
        var = row * col / xp.maximum(row.mean(-2, keepdims=True), eps1)
    else:
        var = lerp_(var, square, weight)
    u = g / xp.maximum(xp.sqrt(var), eps1)
    # PyTorch's add_(update, alpha=-alpha / denom): the scale divided first (a float32
    # alpha's in float32)
    denom = xp.maximum(_rms(xp, u) / d, 1).astype(alpha.dtype)
    decay_and_subtract(x, 1 - lr * weight_decay, (alpha / denom) * u)


def _update_16(x, g, row, col, var, t, eps1, *, lr, beta2_decay, eps2, d, weight_decay,
               foreach):
    """Adafactor on a 16-bit parameter with PyTorch's roundings: each of its ops computes in
    float32 and rounds its result to the parameter's dtype (norms, squares, means, the
    outer product, rsqrt), and the last add is fused unless the step runs foreach."""
    xp = xp_of(x)
    dt = x.dtype

    def r(a):
        return a.astype(dt).astype(np.float32)

    def norm(a, axis=None):
        return r(xp.sqrt((a * a).sum(axis=axis, keepdims=axis is not None)))

    # PyTorch's CPU foreach ops round a scalar factor to the tensors' dtype first (not
    # lerp's; CUDA's keep it in float32). foreach=None is its single-tensor loop on any device.
    # A factor derived from a tensor lr (a NumPy scalar here) is a 0-d tensor there:
    # mul_ reads it in float32, unrounded
    factor = (lambda f: float(f if isinstance(f, np.generic) else np.asarray(f, dt))) \
        if foreach and xp is np else float
    weight = t ** beta2_decay
    wide = x.astype(np.float32)
    alpha = max(eps2, float(norm(wide)) / math.sqrt(x.size)) * min(lr, 1 / math.sqrt(t))
    if weight_decay != 0:
        scale_(x, factor(1 - lr * weight_decay))
    g = g.astype(np.float32)
    if row is not None:
        lerp_(row, r(r(norm(g, -1) ** 2) / g.shape[-1]), weight)
        lerp_(col, r(r(norm(g, -2) ** 2) / g.shape[-2]), weight)
        row, col = row.astype(np.float32), col.astype(np.float32)
        mean = xp.maximum(r(row.mean(-2, keepdims=True)), r(xp.float32(eps1)))
        var = r(r(row * col) / mean)
    else:
        var = lerp_(var, r(g * g), weight).astype(np.float32)
    var = xp.maximum(var, r(xp.float32(eps1 * eps1)))
    u = r(xp.float32(1) / xp.sqrt(var))
    tail = u.size % TORCH_16_BIT_LANES if xp is np else 0
    if tail:                    # PyTorch's scalar loop rounds the root before inverting it
        flat = u.reshape(-1)
        flat[-tail:] = r(xp.float32(1) / r(xp.sqrt(var.reshape(-1)[-tail:])))
    u = r(u * g)
    step = -alpha / max(1.0, float(norm(u)) / (math.sqrt(u.size) * d))
    if foreach:
        x[...] = x.astype(np.float32) + r(u * np.float32(factor(step)))
    else:
        _plus_scaled(x, step, u.astype(dt), out=x)
