"""What the fused normalization ops share: input and parameter checks, and the input
gradient of every norm (the op _norm_input_grad and _norm_grad, which feeds it).

NOTE [Fused normalization backward]
With ``xc = x - mean``, ``invstd = (var + eps)^-1/2`` (biased variance over ``n`` elements)
and ``g`` the gradient reaching ``xhat = xc * invstd``, the input gradient is
``invstd * (g - sum(g)/n - xhat * sum(g * xhat)/n)``. Written as ``g*A + xc*B + C`` with
per-group constants A, B, C, it costs a handful of passes over the data; the gradients that
reach the saved mean and invstd (double backward) only change B and C. Everything is written
with ember ops on the saved outputs, so the derivative is differentiable again.
"""

import math

import numpy as np

from ember import _dtype as D
from ember.autograd.graph import carries_gradient
from ember.ops._promotion import BINARY
from ember.ops._registry import op

_LOW = D.LOW_PRECISION_NP
_F32 = np.dtype(np.float32)
_FAST_DTYPES = {_F32, np.dtype(np.float64)}


def _name(a):
    return D.FROM_NUMPY[a.dtype]._torch_name


def _float_input(x, kernel):
    if x.dtype.kind not in "fV":
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_name(x)}'")
    return x.astype(_F32) if x.dtype in _LOW else x


def _check_mixed(xp, dtype, *params, search=None):
    """PyTorch's CPU norms take parameters (weight, bias, running stats: in that order) of the
    input's dtype, or all float32 ones for a 16-bit input. Its error for other mixes depends
    on the first parameter given: of the input's dtype, the first odd one in ``search`` (the
    order the kernel reads them in, by default ``params``') is named; else a mix of float32
    parameters is refused as such, any other as not float."""
    if xp is not np:
        return
    given = [p.dtype for p in params if p is not None]
    if all(d == dtype for d in given):
        return
    if all(d == _F32 for d in given):
        if dtype in _LOW:
            return
        raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")
    if given[0] == dtype:
        odd = next(p.dtype for p in (search or params) if p is not None and p.dtype != dtype)
        raise RuntimeError(f"expected scalar type {D.FROM_NUMPY[dtype]._torch_name} but found "
                           f"{D.FROM_NUMPY[odd]._torch_name}")
    raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")


def _vector(v, dtype):
    return None if v is None else (v.astype(dtype) if v.dtype != dtype else v)


@op("_norm_input_grad(grad, a, centered, b, c)", inputs=5, promote=BINARY, method=False)
def _norm_input_grad(xp, g, a, xc, b, c):
    """``grad * a + centered * b + c`` in one op (the input gradient of every norm)."""
    shape = g.shape
    planes = _channel_planes(xp, shape, a, b, c) if shape == xc.shape else None
    if planes is not None:              # batch norm: per-channel constants, see _channel_planes
        a, b, c = planes
        g, xc = g.reshape((shape[0],) + a.shape), xc.reshape((shape[0],) + a.shape)
    out = g * a
    out += xc * b
    out += c
    return out.reshape(shape) if planes is not None else out


def _channel_planes(xp, shape, *vectors):
    """Per-channel vectors of shape (1, C, 1, ...) spread over (C, L) planes for an array of
    ``shape`` (N, C, *S), L = prod(S); None when they are not all such vectors.

    NumPy broadcasts a (1, C, 1, 1) operand with a stride-0 inner loop, two to three times
    slower than an operand that is contiguous along the inner axis: over (N, C, L) views, a
    multiply by a materialized (C, L) plane (C*L values, small next to the data) runs at the
    speed of an ordinary array multiply."""
    if len(shape) < 3 or shape[0] < 2:
        return None
    c = shape[1]
    lanes = math.prod(shape[2:])
    if lanes < 16:
        return None
    planes = []
    for v in vectors:
        if v.ndim != len(shape) or v.shape[1] != c or v.size != c:
            return None
        planes.append(xp.ascontiguousarray(xp.broadcast_to(v.reshape(c, 1), (c, lanes))))
    return planes


@_norm_input_grad.derivative
def _(grad, g, a, xc, b, c):
    def need(t):
        return getattr(t, "requires_grad", False)
    return (grad * a if need(g) else None, grad * g if need(a) else None,
            grad * b if need(xc) else None, grad * xc if need(b) else None,
            grad if need(c) else None)


def _coefficients(sg, sgx, invstd, n, gmean, ginvstd):
    """B and C of NOTE [Fused normalization backward] from the group sums of g and g*xc."""
    inv_n = 1.0 / max(n, 1)           # (empty groups have an empty gradient: any scale does)
    # invstd^3 one factor at a time: it overflows for a tiny eps, and inf * 0 is NaN
    b = sgx * -inv_n * invstd * invstd * invstd
    c = invstd * sg * -inv_n
    if carries_gradient(ginvstd):     # reshaped only here: a reshape would lose the flag
        b = b - ginvstd.reshape(b.shape) * inv_n * invstd * invstd * invstd
    if carries_gradient(gmean):
        c = c + gmean.reshape(c.shape) * inv_n
    return b, c


def _norm_grad(g, xc, invstd, total, n, gmean=None, ginvstd=None):
    """The input gradient of NOTE [Fused normalization backward]; ``g`` reaches xhat and
    ``total(t)`` sums ``t`` over each group (keeping the reduced dims)."""
    b, c = _coefficients(total(g), total(g * xc), invstd, n, gmean, ginvstd)
    return _norm_input_grad(g, invstd, xc, b, c)


def _outside_vmap():
    """Whether no vmap is active: the array fast paths of the backward need real values
    (under vmap, operands are BatchedTensors whose ``_data`` is a placeholder)."""
    from ember.func._batched import STATE
    return not STATE.levels
