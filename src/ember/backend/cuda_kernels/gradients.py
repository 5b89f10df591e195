"""The Triton kernels registered as CUDA derivatives of ops (NOTE [CUDA kernel overrides]):
the first-order gradients of softmax, log_softmax, silu, layer norm, RMS norm, batch norm,
group norm, cross entropy and flash attention, each in one pass (two kernels for attention,
three for batch and group norm); pooling's and interpolation's are in spatial.py.

An override takes the derivative's own arguments (Tensors) and returns its result, or None
for what its kernel does not cover: then the op's derivative runs, as it also does whenever
a graph is being recorded (double backward differentiates the compositions in ``ops/``).
"""

import math

import numpy as np

from ember._tensor import _make
from ember.autograd.graph import carries_gradient
from ember.backend import xp_of
from ember.backend.cuda_kernels import override_derivative
from ember.backend.cuda_kernels import triton_attention as attention
from ember.backend.cuda_kernels import triton_batch_norm as batch_norm
from ember.backend.cuda_kernels import triton_group_norm as group_norm
from ember.backend.cuda_kernels import triton_losses as losses
from ember.backend.cuda_kernels import triton_pointwise as pointwise
from ember.backend.cuda_kernels import triton_rows as rows
from ember.backend.cuda_kernels._launch import FAST_DTYPES, buffer, buffers, covered
from ember.backend.cuda_kernels.forwards import (channel_vectors, class_rows, class_weights,
                                                 flash_mask, one_head)
from ember.ops._dims import wrap_dim
from ember.ops._loss_common import reduction_of
from ember.ops.attention import _groups, _scale
from ember.ops.normalization import _channel_rows


def _softmax_backward(grad, out, dim, log):
    y, g = out._data, grad._data
    if (wrap_dim(dim, y.ndim) != y.ndim - 1 or g.shape != y.shape or g.dtype != y.dtype
            or y.shape[-1] > rows.MAX_ROW or not covered(g, y)):
        return None
    dx = xp_of(y).empty(y.shape, y.dtype)
    n_cols = y.shape[-1]
    rows.softmax_backward_rows(buffer(g), buffer(y), buffer(dx), y.size // n_cols, n_cols, log)
    return _make(dx)


@override_derivative("softmax")
def softmax(grad, x, dim, dtype, *, out):
    """softmax's input gradient along the last dim in one pass."""
    return _softmax_backward(grad, out, dim, False)


@override_derivative("log_softmax")
def log_softmax(grad, x, dim, dtype, *, out):
    """log_softmax's input gradient along the last dim in one pass."""
    return _softmax_backward(grad, out, dim, True)


@override_derivative("nn.functional.silu")
def silu(grad, x):
    """silu's input gradient in one pass."""
    g, a = grad._data, x._data
    if g.shape != a.shape or g.dtype != a.dtype or not covered(g, a):
        return None
    dx = xp_of(a).empty(a.shape, a.dtype)
    pointwise.silu_backward(buffer(g), buffer(a), buffer(dx), a.size)
    return _make(dx)


@override_derivative("native_layer_norm")
def native_layer_norm(grads, x, w, b, normalized_shape, eps, *, out):
    """Layer norm's (input, weight, bias) gradients: the input's in one pass over the rows,
    the weight's and bias's from per-program partial sums."""
    gy, gmean, ginvstd = grads
    k = math.prod(normalized_shape)
    a, g, mean, invstd = x._data, gy._data, out[1]._data, out[2]._data
    if (carries_gradient(gmean) or carries_gradient(ginvstd) or k > rows.MAX_ROW
            or g.dtype != a.dtype or not covered(g, a)
            or not (mean.flags.c_contiguous and invstd.flags.c_contiguous)):
        return None
    xp = xp_of(a)
    need_w, need_b = (v is not None and v.requires_grad for v in (w, b))
    n_rows = a.size // k
    programs = max(1, min(n_rows, rows.PARTIAL_ROWS))
    gx = xp.empty(a.shape, a.dtype) if x.requires_grad else None
    partial_w, partial_b = (xp.empty((programs, k), xp.float32) for _ in range(2))
    rows.layer_norm_backward_rows(
        buffer(g), buffer(a), None if w is None else buffer(xp.ascontiguousarray(w._data)),
        buffer(mean), buffer(invstd), None if gx is None else buffer(gx), buffer(partial_w),
        buffer(partial_b), n_rows, k, programs)
    return (None if gx is None else _make(gx),
            _make(partial_w.sum(axis=0).astype(w._data.dtype).reshape(w.shape)) if need_w else None,
            _make(partial_b.sum(axis=0).astype(b._data.dtype).reshape(b.shape)) if need_b else None)


@override_derivative("_fused_rms_norm")
def fused_rms_norm(grads, x, w, normalized_shape, eps, *, out):
    """RMS norm's (input, weight) gradients: the input's in one pass over the rows, the
    weight's from per-program partial sums."""
    gy, grstd = grads
    if carries_gradient(grstd):
        return None
    a, g, rstd = x._data, gy._data, out[1]._data
    weight = None if w is None else w._data
    k = math.prod((normalized_shape,) if isinstance(normalized_shape, int)
                  else normalized_shape)
    if (k > rows.MAX_ROW or g.dtype != a.dtype or not covered(g, a)
            or rstd.dtype != np.float32 or not rstd.flags.c_contiguous
            or (weight is not None and weight.dtype not in FAST_DTYPES)):
        return None
    xp = xp_of(a)
    n_rows = a.size // k
    programs = max(1, min(n_rows, rows.PARTIAL_ROWS))
    gx = xp.empty(a.shape, a.dtype) if x.requires_grad else None
    partial_w = xp.empty((programs, k), xp.float32)
    rows.rms_norm_backward_rows(buffer(g), buffer(a), *buffers(
        None if weight is None else xp.ascontiguousarray(weight)), buffer(rstd),
        *buffers(gx), buffer(partial_w), n_rows, k, programs)
    gw = None
    if w is not None and w.requires_grad:
        gw = _make(partial_w.sum(axis=0).astype(weight.dtype).reshape(w.shape))
    return None if gx is None else _make(gx), gw


@override_derivative("native_batch_norm")
def native_batch_norm(grads, x, w, b, rm, rv, training, momentum, eps, *, out):
    """Batch norm's (input, weight, bias) gradients: per-channel sums of the gradient and of
    its product with the centered input in one pass, the input's gradient in another."""
    gy, gmean, ginvstd = grads
    if gy is None or carries_gradient(gmean) or carries_gradient(ginvstd):
        return None
    a, g = x._data, gy._data
    if training:
        mean, scale = out[1]._data, out[2]._data
    elif rm is None or rv is None:
        return None
    else:                               # evaluation: the running statistics normalized
        mean, scale = rm._data, rv._data
    weight = None if w is None else w._data
    if (a.ndim < 2 or g.dtype != a.dtype or g.shape != a.shape or not covered(g, a)
            or not channel_vectors(a.shape[1], mean, scale, weight)):
        return None
    xp = xp_of(a)
    shape = _channel_rows(a.shape)
    c = shape[1]
    gx = xp.empty(a.shape, a.dtype) if x.requires_grad else None
    gw, gb, coef = xp.empty(c, xp.float32), xp.empty(c, xp.float32), xp.empty(3 * c, xp.float32)
    partial = xp.empty(batch_norm.scratch_size(shape), xp.float32)
    batch_norm.backward(buffer(g), buffer(a), buffer(mean), buffer(scale), *buffers(weight),
                        buffer(partial), buffer(coef), buffer(gw), buffer(gb), *buffers(gx),
                        shape, training, None if training else eps)
    need_w, need_b = (v is not None and v.requires_grad for v in (w, b))
    return (None if gx is None else _make(gx),
            _make(gw.astype(weight.dtype, copy=False)) if need_w else None,
            _make(gb.astype(b._data.dtype, copy=False)) if need_b else None, None, None)


@override_derivative("native_group_norm")
def native_group_norm(grads, x, w, b, n, c, hxw, group, eps, *, out):
    """Group norm's (input, weight, bias) gradients: each (sample, channel) plane's sums in
    one pass, each row's coefficients from them, the input's gradient in one more pass."""
    gy, gmean, ginvstd = grads
    if gy is None or carries_gradient(gmean) or carries_gradient(ginvstd):
        return None
    a, g, mean, invstd = x._data, gy._data, out[1]._data, out[2]._data
    weight = None if w is None else w._data
    if (g.dtype != a.dtype or g.shape != a.shape or not covered(g, a) or a.size != n * c * hxw
            or not channel_vectors(c, weight)):
        return None
    xp = xp_of(a)
    mean32, invstd32 = (xp.ascontiguousarray(v, dtype=xp.float32).reshape(-1)
                        for v in (mean, invstd))
    sums = xp.empty((n, c, 2), xp.float32)
    coef = xp.empty(n * group * 2, xp.float32)
    gx = xp.empty(a.shape, a.dtype) if x.requires_grad else None
    group_norm.backward(buffer(g), buffer(a), buffer(mean32), buffer(invstd32),
                        *buffers(weight), buffer(sums), buffer(coef), *buffers(gx),
                        (n, c, hxw), c // group)
    gw = gb = None
    if w is not None and w.requires_grad:           # sum over samples of g * xhat per channel
        spread = xp.repeat(invstd32.reshape(n, group), c // group, axis=1)
        gw = _make((sums[:, :, 1] * spread).sum(0).astype(weight.dtype, copy=False))
    if b is not None and b.requires_grad:
        gb = _make(sums[:, :, 0].sum(0).astype(b._data.dtype, copy=False))
    return None if gx is None else _make(gx), gw, gb


@override_derivative("nn.functional.cross_entropy")
def cross_entropy(grad, x, t, w, size_average, ignore_index, reduce, reduction,
                  label_smoothing, *, kept=None):
    """The gradient of the cross entropy of (N, C, *d) logits and class targets, class
    weights and label smoothing included, in one kernel over the rows of classes (also of
    (N, C) or (C,) logits and class probabilities)."""
    if kept is not None:                # (the input not saved: the op's derivative reads e)
        return None
    a, targets = x._data, t._data
    reduction = reduction_of(size_average, reduce, reduction, emit_warning=False)
    if a.shape == targets.shape:
        return _soft_cross_entropy(grad, x, t, w, reduction, label_smoothing)
    if a.ndim < 2 or targets.ndim != a.ndim - 1 or not covered(a):
        return None
    xp = xp_of(a)
    logits, c = class_rows(xp, a)
    n = logits.shape[0]
    targets = xp.ascontiguousarray(targets.reshape(-1), dtype=xp.int64)
    kept = targets != ignore_index
    weight, weight_sum, divisor = class_weights(xp, None if w is None else w._data, targets,
                                                kept)
    scale = grad._data.astype(xp.float32).reshape(-1)
    if reduction == "mean":             # an ignored row's share is 0, even when all are
        scale = scale / divisor
    dx = xp.empty(logits.shape, a.dtype)
    losses.cross_entropy_backward_rows(buffer(logits), buffer(targets),
                                       buffer(xp.ascontiguousarray(scale)), buffer(dx), n, c,
                                       ignore_index, reduction == "none", label_smoothing,
                                       *buffers(weight, weight_sum))
    if a.ndim > 2:                      # back to (N, C, *d)
        dx = xp.moveaxis(dx.reshape(a.shape[:1] + a.shape[2:] + (c,)), -1, 1)
    return _make(dx), None, None


def _soft_cross_entropy(grad, x, t, w, reduction, label_smoothing):
    """The logits' gradient of the cross entropy with class probabilities, a row per program
    (the targets' gradient, when they need one, is the generic code's)."""
    a, target = x._data, t._data
    if (a.ndim > 2 or t.requires_grad or target.dtype != a.dtype or not covered(a, target)
            or grad._data.dtype != a.dtype):
        return None
    xp = xp_of(a)
    c = a.shape[-1]
    n = a.size // c
    scale = grad._data.astype(xp.float32).reshape(-1)
    if reduction == "mean":
        scale = scale / n
    dx = xp.empty(a.shape, a.dtype)
    losses.soft_cross_entropy_backward_rows(
        buffer(a), buffer(target), *buffers(None if w is None else xp.ascontiguousarray(
            w._data, dtype=xp.float32)), buffer(xp.ascontiguousarray(scale)), buffer(dx), n, c,
        reduction == "none", label_smoothing)
    return _make(dx), None, None


@override_derivative("nn.functional.scaled_dot_product_attention")
def scaled_dot_product_attention(grads, q, k, v, mask, dropout_p, is_causal, scale,
                                 enable_gqa, *, out, needs=None):
    """The flash backward: dK and dV over key blocks, dQ over query blocks, recomputing the
    weights from the forward's log-sum-exp, and the dropout mask from its Philox numbers
    (NOTE [SDPA outputs]); a key/value head's gradients sum over the query heads it serves."""
    grad, lse = grads[0]._data, out[1]._data
    qa, ka, va, result = q._data, k._data, v._data, out[0]._data
    mask_array = None if mask is None else mask._data
    one = qa.ndim == 3 and lse.ndim == 2    # (B, L, E) attention: as one head
    if one:
        grad, lse, qa, ka, va, result = (a[:, None] for a in (grad, lse, qa, ka, va, result))
        mask_array = one_head(mask_array)
    gk, gv = _groups(q, k, v, enable_gqa)
    if (qa.ndim != 4 or lse.ndim == qa.ndim or carries_gradient(grads[1]) or gk != gv
            or grad.dtype != qa.dtype or any(a.strides[3] != a.itemsize for a in (qa, ka, va))
            or not result.flags.c_contiguous or not lse.flags.c_contiguous
            or (mask is not None and mask.requires_grad)):
        return None                     # not a flash forward's output, or double backward
    xp = xp_of(qa)
    (B, H, L, E), (S, Ev) = qa.shape, va.shape[2:]
    masked = flash_mask(xp, mask_array, (B, H, L, S))
    dropout = None if dropout_p <= 0 else (*out[2]._data.tolist(), dropout_p)   # on the host
    grad = xp.ascontiguousarray(grad)
    delta = xp.ascontiguousarray((grad.astype(xp.float32) * result.astype(xp.float32)).sum(-1))
    dq, dk, dv = (xp.empty(a.shape, qa.dtype) for a in (qa, ka, va))
    strides = tuple(tuple(s // a.itemsize for s in a.strides[:3]) for a in (qa, ka, va))
    attention.attention_backward(*(buffer(a) for a in (qa, ka, va, grad, lse, delta, dq, dk, dv)),
                                 (B, H, L, S, E, Ev), strides, _scale(E, scale), is_causal,
                                 masked, dropout, gk)
    if one:
        dq, dk, dv = dq[:, 0], dk[:, 0], dv[:, 0]
    return _make(dq), _make(dk), _make(dv), None
