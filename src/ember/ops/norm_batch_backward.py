"""Batch norm's fused backward as an op of its own (PyTorch's native_batch_norm_backward), so
that gradients taken with ``create_graph`` hang from one node, NativeBatchNormBackwardBackward0,
whose derivative is the batch norm double backward written here with ember ops.

In training the saved statistics are functions of the input: the double backward
differentiates through them, as PyTorch's does, although the op reads them as inputs (they
have no edges). With ``xhat = (x - mean) * invstd``, per-channel sums S over the ``n``
elements of a channel, ``A = invstd * weight`` and ``P = S(g * xhat) / n``, the op computes
``gx = A * (g - S(g)/n - xhat * P)``, ``gw = S(g * xhat)``, ``gb = S(g)``; for the
cotangents (u, a, b) of these its derivative gives (in training)
- grad_out: ``A * (u - S(u)/n - xhat * S(u * xhat)/n) + a * xhat + b``;
- weight: ``invstd * R`` with ``R = S(u * (g - S(g)/n - xhat * P))``;
- input: ``invstd * (c - S(c)/n - xhat * S(c * xhat)/n) - weight * R * invstd^2 * xhat / n``
  with ``c = a * g - A * (u * P + g * S(u * xhat)/n)`` (the gradient reaching xhat) and the
  last term the one reaching invstd.
In evaluation the statistics are constants: ``A * u + a * xhat + b``, ``invstd * S(u * g)``
and ``a * invstd * g``.
"""

import numpy as np

from ember import _dtype as D
from ember.ops._norm_shared import _LOW
from ember.ops._registry import op
from ember.ops.norm_batch import _batch_norm_arrays

__all__ = ["_native_batch_norm_backward"]

_F32 = np.dtype(np.float32)


@op("_native_batch_norm_backward(grad_out, input, weight=None, running_mean=None, "
    "running_var=None, save_mean=None, save_invstd=None, train=True, eps=1e-5)", inputs=7,
    method=False, out=False, grad_fn_name="NativeBatchNormBackwardBackward0")
def _native_batch_norm_backward(xp, g, x, w, rm, rv, save_mean, save_invstd, train, eps):
    """The (input, weight, bias) gradients of batch norm from the statistics it normalized
    with: the saved batch ones in training, the running ones in evaluation. 16-bit inputs
    compute in float32, each gradient rounded once."""
    dtype = x.dtype
    compute = _F32 if dtype in _LOW else dtype
    if train:
        mean, invstd = save_mean.astype(compute), save_invstd.astype(compute)
    else:
        mean = rm.astype(compute)
        invstd = 1 / xp.sqrt(rv.astype(compute) + compute.type(eps))
    weight = None if w is None else w.astype(compute, copy=False)
    gx, gw, gb = _batch_norm_arrays(g.astype(compute, copy=False), x.astype(compute, copy=False),
                                    weight, mean, invstd, train, (True, True, True))
    params = w.dtype if w is not None else (save_mean.dtype if train else rm.dtype)
    return gx.astype(dtype, copy=False), gw.astype(params), gb.astype(params)


_native_batch_norm_backward.nondifferentiable("save_mean", "save_invstd")


@_native_batch_norm_backward.derivative
def _(grads, g, x, w, rm, rv, save_mean, save_invstd, train, eps):
    # a cotangent the engine filled in is PyTorch's undefined one; zeros computed upstream
    # are defined, and reach the inputs (as zeros) as PyTorch's do
    u, a, b = (None if t is None or t.__dict__.get("_filled_zeros") else t for t in grads)
    low = x.dtype in D.LOW_PRECISION
    g32, x32, w32 = (None if t is None else t.float() if low else t for t in (g, x, w))
    u, a, b = (None if t is None else t.to(x32.dtype) for t in (u, a, b))
    dg, dx, dw = _double_backward(u, a, b, g32, x32, w32, rm, rv, train, eps)
    return (None if dg is None else dg.to(g.dtype), None if dx is None else dx.to(x.dtype),
            None if dw is None or w is None else dw.to(w.dtype), None, None, None, None)


def _double_backward(u, a, b, g, x, w, rm, rv, train, eps):
    """The gradients (grad_out, input, weight) for the cotangents (u, a, b) of the op's
    (input, weight, bias) gradients: see the module docstring."""
    c = x.shape[1]
    shape = (1, c) + (1,) * (x.ndim - 2)
    dims = [0] + list(range(2, x.ndim))
    n = max(x.numel() // max(c, 1), 1)

    def total(t):
        return t.sum(dims, keepdim=True)
    if train:                       # differentiable statistics of x
        mean = x.mean(dims, keepdim=True)
        invstd = ((x - mean).square().mean(dims, keepdim=True) + eps).rsqrt()
    else:
        mean = rm.detach().to(x.dtype).reshape(shape)
        invstd = (rv.detach().to(x.dtype) + eps).rsqrt().reshape(shape)
    xhat = (x - mean) * invstd
    wv = None if w is None else w.reshape(shape)
    scale = invstd if wv is None else invstd * wv
    a = None if a is None else a.reshape(shape)
    dg = dx = dw = None
    if u is not None:
        dg = scale * (u - total(u) / n - xhat * (total(u * xhat) / n)) if train else scale * u
    if a is not None:
        dg = a * xhat if dg is None else dg + a * xhat
    if b is not None:
        dg = _add(dg, b.reshape(shape))
    if not train:
        if u is not None and wv is not None:
            dw = (invstd * total(u * g)).reshape(-1)
        if a is not None:
            dx = a * invstd * g
        return _full(dg, g), dx, dw
    p = total(g * xhat) / n
    reach = None if a is None else a * g          # the gradient reaching xhat
    if u is not None:
        q = total(u * xhat) / n
        reach = _add(reach, -(scale * (u * p + g * q)))
        r = total(u * (g - total(g) / n - xhat * p))
        if wv is not None:
            dw = (invstd * r).reshape(-1)
    if reach is not None:
        dx = invstd * (reach - total(reach) / n - xhat * (total(reach * xhat) / n))
        if u is not None:
            dx = dx - (r if wv is None else wv * r) * invstd * invstd * xhat / n
    return _full(dg, g), dx, dw


def _add(acc, t):
    return t if acc is None else acc + t


def _full(t, like):
    """``t`` broadcast to ``like``'s shape (a bias cotangent alone is per channel)."""
    if t is None or tuple(t.shape) == tuple(like.shape):
        return t
    return like.new_zeros(like.shape) + t
