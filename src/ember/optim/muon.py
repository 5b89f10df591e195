"""Muon: momentum orthogonalized by Newton-Schulz iterations (``torch.optim.Muon``)."""

import math

import ml_dtypes
import numpy as np

from ember.backend import xp_of
from ember.optim._state import apply_updates, grads_of, number_lr, scale_, state_like, value
from ember.optim.optimizer import Optimizer, closure_loss

__all__ = ["Muon"]

_ADJUSTMENTS = ("original", "match_rms_adamw")


class Muon(Optimizer):
    """Muon for 2-D parameters: B = lerp(B, g, 1 - momentum); u = lerp(g, B, momentum) with
    Nesterov, else B; O = NS(u), ``ns_steps`` Newton-Schulz iterations in bfloat16 on u /
    max(||u||_F, eps) (transposed when it has more rows than columns); p *= 1 - lr
    weight_decay; p -= adjusted lr O, the lr scaled by sqrt(max(1, rows / cols))
    ("original", the default) or 0.2 sqrt(max(rows, cols)) ("match_rms_adamw").

    B is PyTorch's moving average, (1 - momentum) times the documented mu B + g: the same
    direction, which is all the orthogonalization keeps, and the same state_dict."""

    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                 ns_coefficients=(3.4445, -4.775, 2.0315), eps=1e-7, ns_steps=5,
                 adjust_lr_fn=None):
        if not 0.0 <= value(lr):
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in _ADJUSTMENTS:
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum,
                                      nesterov=nesterov, ns_coefficients=ns_coefficients,
                                      eps=eps, ns_steps=ns_steps, adjust_lr_fn=adjust_lr_fn))
        for group in self.param_groups:
            for p in group["params"]:
                if p.dim() != 2:
                    raise ValueError("Muon only supports 2D parameters whereas we found a "
                                     f"parameter with size: {p.size()}")

    def step(self, closure=None):
        """Perform one optimization step."""
        loss = closure_loss(closure)
        for group in self.param_groups:
            lr = number_lr(group)
            params, updates = [], []
            for p, x, g in grads_of(group, name="Muon"):
                if p.is_complex():
                    raise RuntimeError("Muon does not support complex parameters")
                state = self.state[p]
                if not state:
                    state["momentum_buffer"] = state_like(p)
                params.append(p)
                updates.append((x, g, state["momentum_buffer"]._data,
                                _adjusted_lr(lr, group["adjust_lr_fn"], *x.shape)))
            apply_updates("muon", params, updates, _update, lr=lr,
                          weight_decay=group["weight_decay"], momentum=group["momentum"],
                          nesterov=group["nesterov"], coefficients=group["ns_coefficients"],
                          eps=group["eps"], steps=group["ns_steps"])
        return loss


def _adjusted_lr(lr, adjust_lr_fn, rows, cols):
    """The learning rate of the orthogonalized update of a ``rows`` x ``cols`` matrix."""
    if adjust_lr_fn == "match_rms_adamw":
        return 0.2 * math.sqrt(max(rows, cols)) * lr
    return lr * math.sqrt(max(1, rows / cols))


def lerp_(start, end, weight):
    """``start`` moved to ``lerp(start, end, weight)`` in place, in PyTorch's two-sided form
    (exact at weight 0 and 1); 16-bit floats computed in float32 and rounded once."""
    if start.dtype.itemsize < 4:
        start[...] = lerp_(start.astype(np.float32), end.astype(np.float32), weight)
    elif weight < 0.5:
        start += weight * (end - start)
    else:
        start[...] = end - (end - start) * (1 - weight)
    return start


def _update(x, g, b, lr_adjusted, *, lr, weight_decay, momentum, nesterov, coefficients, eps,
            steps):
    """One parameter's Muon step in place, in array operations."""
    lerp_(b, g, 1 - momentum)
    u = lerp_(g.copy(), b, momentum) if nesterov else b
    o = orthogonalize(u, coefficients, eps, steps)
    decay_and_subtract(x, 1 - lr * weight_decay, lr_adjusted * o.astype(wide_dtype(x)))


def wide_dtype(a):
    """The dtype ``a``'s arithmetic runs in: float32 for 16-bit floats (PyTorch's opmath)."""
    return np.float32 if a.dtype.itemsize < 4 else a.dtype


def decay_and_subtract(x, decay, update):
    """``x *= decay; x -= update`` in place; for 16-bit floats each in float32, rounded once,
    as PyTorch's ops on them (NumPy would round ``decay`` itself to 16 bits)."""
    scale_(x, decay)
    if x.dtype.itemsize < 4:
        x[...] = x.astype(np.float32) - update
    else:
        x -= update


def orthogonalize(u, coefficients, eps, steps):
    """``steps`` Newton-Schulz iterations X <- a X + (b A + c A^2) X, A = X X^T, from
    X = u / max(||u||_F, eps), in bfloat16 as PyTorch runs them: each product accumulates
    in float32 and each line rounds once to bfloat16 (PyTorch's fused ``addmm``)."""
    xp = xp_of(u)
    a, b, c = coefficients
    x = u.astype(np.float32, copy=False).astype(ml_dtypes.bfloat16)   # as a float converts
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    wide = x.astype(np.float32)
    norm = _bf16(xp.sqrt((wide * wide).sum()))
    x = _bf16(wide / xp.maximum(norm.astype(np.float32), eps).astype(ml_dtypes.bfloat16)
              .astype(np.float32))
    for _ in range(steps):
        gram = _bf16(_sums(xp, x, x.T))
        poly = _bf16(b * gram.astype(np.float32) + c * _sums(xp, gram, gram))
        x = _bf16(a * x.astype(np.float32) + _sums(xp, poly, x))
    return x.T if tall else x


def _sums(xp, a, b):
    """``a @ b`` of bfloat16 matrices summed in float32, unrounded (the fused ``addmm`` adds
    to it first). Their float32 copies multiply exactly, in TF32 too, so a GPU's float32
    product is that of its bfloat16 one without the rounding."""
    return xp.matmul(a.astype(np.float32), b.astype(np.float32))


def _bf16(a):
    return a.astype(ml_dtypes.bfloat16)
