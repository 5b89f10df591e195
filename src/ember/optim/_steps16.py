"""PyTorch's CPU kernels on float16/bfloat16 optimizer state, op by op: each computes in
float32 with its scalar in float32 and rounds its result to the array's dtype once (NumPy's
16-bit arithmetic would round the scalars and every partial result). The foreach forms differ
where PyTorch's multi-tensor kernels do: ``_foreach_mul_`` rounds its scalar to the dtype
first (``mul_`` does not; ``add`` of a scalar does in both)."""

import numpy as np

from ember._tensor import Tensor
from ember.backend import xp_of
from ember.optim._state import scale_
from ember.optim.muon import lerp_
from ember.optim.sgd import _plus_scaled

__all__ = ["is_16", "factor_of", "mul_", "add_", "plus_scaled", "addcmul", "addcdiv", "div",
           "mul", "reciprocal", "sqrt", "lerp", "fused_lerp_", "decay_or_plus"]

f32 = np.float32


def is_16(a):
    """Whether ``a`` is a float16 or bfloat16 array (not a tensor: ``differentiable=True``
    steps record their ops instead)."""
    return not isinstance(a, Tensor) and a.dtype.itemsize < 4 and a.dtype.kind in "fV"


def decay_or_plus(x, g, *, lr, weight_decay, decoupled, factor):
    """The Adam family's weight decay on 16-bit ``x``: decoupled, ``x.mul_(1 - lr * wd)``
    in place; else ``g.add(x, alpha=wd)``, returned (else ``g``)."""
    if not weight_decay:
        return g
    if decoupled:
        mul_(x, factor(1 - lr * weight_decay))
        return g
    return plus_scaled(g, weight_decay, x)


def factor_of(x, foreach):
    """How a step's scalars reach a multiply or add on 16-bit ``x``: rounded to its dtype by
    the CPU foreach kernels, else as float32 (PyTorch's opmath)."""
    if foreach and xp_of(x) is np:
        return lambda f: float(np.asarray(f, x.dtype))
    return float


def adam_moments(x, g, m, v, *, lr, beta1, beta2, weight_decay, decoupled, foreach):
    """The Adam family's common start on a 16-bit parameter: weight decay, then the moving
    averages ``m`` (lerp) and ``v`` (scaled, plus the squared gradient); returns the gradient
    as decayed."""
    factor = factor_of(x, foreach)
    g = decay_or_plus(x, g, lr=lr, weight_decay=weight_decay, decoupled=decoupled,
                      factor=factor)
    lerp(m, g, 1 - beta1)
    mul_(v, factor(beta2))
    addcmul(v, g, g, 1 - beta2, out=v)
    return g


def _array(r):
    """``r`` as an array: NumPy's arithmetic on 0-d arrays gives scalars (a 0-d 16-bit
    parameter's step went on with an ``ml_dtypes`` scalar, which has no backend)."""
    return np.asarray(r) if isinstance(r, np.generic) else r


def mul_(a, factor):
    """``a.mul_(factor)`` (``factor`` already through ``factor_of``)."""
    scale_(a, factor)
    return a


def add_(a, scalar):
    """``a.add(scalar)`` (fresh): on the CPU the scalar rounds to ``a``'s dtype first, foreach
    or not (an eps of 1e-3 is 0.0010004 in float16)."""
    a = _array(a)       # (abs() of a 0-d array is a scalar)
    if xp_of(a) is np:
        scalar = np.asarray(scalar, a.dtype)
    return _array((a.astype(f32) + f32(scalar)).astype(a.dtype))


def plus_scaled(a, scale, b, out=None):
    """``a.add(b, alpha=scale)``, into ``out`` if given."""
    return _plus_scaled(a, scale, b, out=out)


def addcmul(a, t1, t2, value, out=None):
    """``a.addcmul(t1, t2, value=value)``, into ``out`` if given: ``(value * t1) * t2``
    fused with the add (one rounding), as the CPU kernel's vectorized loop runs it."""
    scaled = (f32(value) * t1.astype(f32)).astype(np.float64)
    result = (a.astype(np.float64) + scaled * t2.astype(f32)).astype(f32)
    if out is None:
        return _array(result.astype(a.dtype))
    out[...] = result
    return out


def addcdiv(a, t1, t2, value, out=None):
    """``a.addcdiv(t1, t2, value=value)``, into ``out`` if given: ``a + (value * t1) / t2``
    in float32, rounded once (the product first, as PyTorch's kernel for 16-bit types)."""
    result = a.astype(f32) + (f32(value) * t1.astype(f32)) / t2.astype(f32)
    if out is None:
        return _array(result.astype(a.dtype))
    out[...] = result
    return out


def div(a, b):
    """``a / b`` (fresh) of a 16-bit array and a float32 scalar (foreach or not) or another
    such array."""
    b = b.astype(f32) if hasattr(b, "dtype") else f32(b)
    return _array((a.astype(f32) / b).astype(a.dtype))


def mul(a, b):
    """``a * b`` (fresh) of a 16-bit array and a float32 scalar or another such array."""
    b = b.astype(f32) if hasattr(b, "dtype") else f32(b)
    return _array((a.astype(f32) * b).astype(a.dtype))


def reciprocal(a):
    """``a.reciprocal()`` (fresh)."""
    return _array((f32(1) / a.astype(f32)).astype(a.dtype))


def sqrt(a):
    """``a.sqrt()`` (fresh)."""
    return _array(xp_of(a).sqrt(a.astype(f32)).astype(a.dtype))


def lerp(start, end, weight):
    """``start.lerp_(end, weight)``, foreach or not: on the CPU PyTorch fuses its
    multiply-add (``lerp_`` and ``_foreach_lerp_`` alike; an unfused one is off by an ulp
    in about one element of a thousand)."""
    if xp_of(start) is np:
        fused_lerp_(start, end, weight)
    else:
        lerp_(start, end, weight)
    return start


def fused_lerp_(start, end, weight):
    """``start`` moved to ``lerp(start, end, weight)`` of 16-bit arrays as PyTorch's CPU
    kernels compute it: the difference in float32, then one fused multiply-add (a
    cancelling sum stays a tiny nonzero where an unfused one gives 0)."""
    a, b, w = start.astype(f32), end.astype(f32), f32(weight)
    d = (b - a).astype(np.float64)
    out = a + float(w) * d if w < 0.5 else b - d * float(f32(1 - w))
    start[...] = out.astype(f32)
