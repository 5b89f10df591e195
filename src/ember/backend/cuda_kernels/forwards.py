"""The Triton kernels registered as CUDA forwards of ops (NOTE [CUDA kernel overrides]):
softmax, log_softmax, layer norm, RMS norm, batch norm, group norm, cross entropy, gelu and
its gradient, silu and flash attention (pooling's and interpolation's are in spatial.py).

Each override takes the layouts its kernel covers (contiguous, float32/float16/bfloat16,
rows short enough to hold in registers) and returns None for the rest, which the op's
generic CuPy forward then computes. Checks and error messages stay the op's own: an override
runs them first, or hands inputs it would reject to the generic forward.
"""

import math

import numpy as np

from ember.backend.cuda_kernels import override
from ember.backend.cuda_kernels import triton_attention as attention
from ember.backend.cuda_kernels import triton_batch_norm as batch_norm
from ember.backend.cuda_kernels import triton_group_norm as group_norm
from ember.backend.cuda_kernels import triton_losses as losses
from ember.backend.cuda_kernels import triton_pointwise as pointwise
from ember.backend.cuda_kernels import triton_rows as rows
from ember.backend.cuda_kernels._launch import FAST_DTYPES, buffer, buffers, covered
from ember._random import _philox_reserved
from ember.backend import DEVICE_KERNELS, device_of
from ember.backends.cuda import flash_sdp_enabled
from ember.ops.attention import _check, _groups, _scale
from ember.ops.log_space import _finish, _softmax_input
from ember.ops.loss_ce import (_check_class_target, _check_smoothed, _check_weight,
                                _class_weight, check_class_range)
from ember.ops.normalization import (_channel_rows, _check_group_norm, _stats_dtype,
                                     check_normalized_shape)


def _softmax(xp, x, dim, dtype, name, log):
    zero_dim = x.ndim == 0
    x, d, result = _softmax_input(xp, name, x, dim, dtype)
    if d != x.ndim - 1 or x.shape[-1] > rows.MAX_ROW or not covered(x):
        return None
    y = xp.empty(x.shape, result)
    n_cols = x.shape[-1]
    rows.softmax_rows(buffer(x), buffer(y), x.size // n_cols, n_cols, log)
    return _finish(y, result, zero_dim)


@override("softmax")
def softmax(xp, x, dim, dtype):
    """softmax along the last dim of a contiguous array: one pass."""
    return _softmax(xp, x, dim, dtype, "softmax", False)


@override("log_softmax")
def log_softmax(xp, x, dim, dtype):
    """log_softmax along the last dim of a contiguous array: one pass."""
    return _softmax(xp, x, dim, dtype, "log_softmax", True)


@override("native_layer_norm")
def native_layer_norm(xp, x, w, b, normalized_shape, eps):
    """Layer norm of contiguous rows: statistics, normalization, scale and shift in one pass."""
    ns = check_normalized_shape(x, normalized_shape, w, b)
    k = math.prod(ns)
    if k > rows.MAX_ROW or not covered(x):
        return None
    n_rows = x.size // k
    y = xp.empty(x.shape, x.dtype)
    mean, invstd = xp.empty(n_rows, x.dtype), xp.empty(n_rows, x.dtype)
    w, b = (None if v is None else buffer(xp.ascontiguousarray(v)) for v in (w, b))
    rows.layer_norm_rows(buffer(x), w, b, buffer(y), buffer(mean), buffer(invstd), n_rows, k,
                         eps)
    stats = x.shape[:x.ndim - len(ns)] + (1,) * len(ns)
    return y, mean.reshape(stats), invstd.reshape(stats)


@override("_fused_rms_norm")
def fused_rms_norm(xp, x, w, normalized_shape, eps):
    """RMS norm of contiguous rows: the mean square, normalization and scale in one pass."""
    ns = check_normalized_shape(x, normalized_shape, w, None, batch_dims="*")
    k = math.prod(ns)
    if k > rows.MAX_ROW or not covered(x) or (w is not None and w.dtype not in FAST_DTYPES):
        return None                     # (a float64 weight computes in float64)
    n_rows = x.size // k
    y, rstd = xp.empty(x.shape, x.dtype), xp.empty(n_rows, xp.float32)
    rows.rms_norm_rows(buffer(x), None if w is None else buffer(xp.ascontiguousarray(w)),
                       buffer(y), buffer(rstd), n_rows, k,
                       float(np.finfo(np.float32).eps) if eps is None else eps)
    return y, rstd.reshape(x.shape[:x.ndim - len(ns)] + (1,) * len(ns))


def channel_vectors(channels, *vectors):
    """Whether batch norm's per-channel vectors (None for absent ones) are all contiguous
    float vectors of ``channels`` values, as the kernels read them."""
    return all(v is None or (v.ndim == 1 and v.size == channels and v.dtype.kind in "fV"
                             and v.flags.c_contiguous) for v in vectors)


@override("native_batch_norm")
def native_batch_norm(xp, x, w, b, rm, rv, training, momentum, eps):
    """Batch norm of a contiguous (N, C, *) array: each channel's statistics in one pass
    (and a merge that also moves the running statistics), then normalization, scale and
    shift in another."""
    if (x.ndim < 2 or not covered(x) or not channel_vectors(x.shape[1], w, b, rm, rv)
            or (rm is None) != (rv is None) or (rm is None and not training)
            or (rm is not None and training and momentum is None)):
        return None                     # the generic forward computes or rejects these
    shape = _channel_rows(x.shape)
    y = xp.empty(x.shape, x.dtype)
    weight, bias = buffers(w, b)
    if not training:
        batch_norm.normalize(buffer(x), buffer(y), buffer(rm), buffer(rv), weight, bias, shape,
                             eps)
        stats = xp.zeros(0, x.dtype)
        return y, stats, stats
    mean, invstd = xp.empty(shape[1], xp.float32), xp.empty(shape[1], xp.float32)
    partial = xp.empty(batch_norm.scratch_size(shape), xp.float32)
    batch_norm.statistics(buffer(x), buffer(partial), buffer(mean), buffer(invstd),
                          *buffers(rm, rv), shape, eps, momentum or 0.0)
    batch_norm.normalize(buffer(x), buffer(y), buffer(mean), buffer(invstd), weight, bias,
                         shape)
    saved = _stats_dtype(x.dtype, w, b, rm, rv)      # float32 beside float32 parameters
    return y, mean.astype(saved, copy=False), invstd.astype(saved, copy=False)


@override("native_group_norm")
def native_group_norm(xp, x, w, b, n, c, hxw, group, eps):
    """Group norm of a contiguous (N, C, *) array: each (sample, group)'s statistics with
    batch norm's kernels, then normalization, scale and shift in one pass."""
    _check_group_norm(x, w, b, c, group)
    if not covered(x) or not channel_vectors(c, w, b) or x.size != n * c * hxw:
        return None
    rows, per_group = n * group, c // group
    stats = (1, rows, per_group * hxw)              # the rows as batch norm's channels
    mean, invstd = xp.empty(rows, xp.float32), xp.empty(rows, xp.float32)
    partial = xp.empty(batch_norm.scratch_size(stats), xp.float32)
    batch_norm.statistics(buffer(x), buffer(partial), buffer(mean), buffer(invstd), None, None,
                          stats, eps, 0.0)
    y = xp.empty(x.shape, x.dtype)
    group_norm.normalize(buffer(x), buffer(y), buffer(mean), buffer(invstd), *buffers(w, b),
                         (n, c, hxw), per_group)
    return (y, mean.reshape(n, group).astype(x.dtype, copy=False),
            invstd.reshape(n, group).astype(x.dtype, copy=False))


def class_rows(xp, x):
    """(N, C, *d) logits as contiguous (rows, C): the class dim moved last (a copy beyond 2-D),
    the rows in the order of the flattened (N, *d) targets."""
    c = x.shape[1]
    if x.ndim == 2:
        return x, c
    return xp.ascontiguousarray(xp.moveaxis(x, 1, -1)).reshape(-1, c), c


def class_weights(xp, w, targets, kept):
    """(float32 class weights, their 1-element sum, the mean's divisor: the summed weights
    of the kept targets) on the device; (None, None, the kept count) without weights."""
    if w is None:
        return None, None, kept.sum(dtype=xp.float32)
    weight = xp.ascontiguousarray(w, dtype=xp.float32)
    picked = weight[xp.where(kept, targets, 0)]     # safe: the targets are checked already
    return weight, weight.sum(keepdims=True), xp.where(kept, picked, 0).sum()


@override("nn.functional.cross_entropy")
def cross_entropy(xp, x, t, w, size_average, ignore_index, reduce, reduction,
                  label_smoothing):
    """Cross entropy of (N, C, *d) logits and class targets, with class weights and label
    smoothing: one pass over each row of classes (two with smoothing); of (N, C) or (C,)
    logits and class probabilities (mixup's, distillation's) in one pass. The targets are
    checked on the device (NOTE [Deferred device checks])."""
    if (size_average is not None or reduce is not None
            or reduction not in ("mean", "sum", "none") or not 0.0 <= label_smoothing <= 1.0
            or not covered(x)):
        return None
    if x.shape == t.shape:      # the generic code raises for an ignore_index it can't apply
        return None if ignore_index >= 0 else _soft_cross_entropy(xp, x, t, w, reduction,
                                                                  label_smoothing)
    if x.ndim < 2 or t.ndim != x.ndim - 1:
        return None
    _check_class_target(x, t)
    logits, c = class_rows(xp, x)
    w = _class_weight(x, t, w, c, label_smoothing, reduction)
    n = logits.shape[0]
    targets = xp.ascontiguousarray(t.reshape(-1), dtype=xp.int64)
    kept = targets != ignore_index
    check_class_range(xp.where(kept, targets, 0), c)
    _check_smoothed(x, t, w, label_smoothing, reduction)
    weight, weight_sum, divisor = class_weights(xp, w, targets, kept)
    loss = xp.empty(n, xp.float32)
    losses.cross_entropy_rows(buffer(logits), buffer(targets), buffer(loss), n, c, ignore_index,
                              label_smoothing, *buffers(weight, weight_sum))
    if reduction == "sum":
        loss = loss.sum()
    elif reduction == "mean":       # a zero divisor (no weight kept) gives NaN, smoothed or not
        loss = xp.where(divisor == 0, xp.nan, loss.sum() / divisor)
    else:
        loss = loss.reshape(t.shape)
    return loss.astype(x.dtype, copy=False)


def _soft_cross_entropy(xp, x, t, w, reduction, label_smoothing):
    """The cross entropy of (N, C) or (C,) logits and same-dtype class probabilities, a row
    per program; None for what the generic code computes (other layouts and dtypes)."""
    if x.ndim > 2 or t.dtype != x.dtype or not covered(t):
        return None
    c = x.shape[-1]
    if w is not None and w.dtype != x.dtype:        # the weight promotes: the generic code
        return None
    _check_weight(w, c, None, "cross_entropy: ")
    n = x.size // c
    loss = xp.empty(n, xp.float32)
    losses.soft_cross_entropy_rows(buffer(x), buffer(t), *buffers(
        None if w is None else xp.ascontiguousarray(w, dtype=xp.float32)), buffer(loss), n, c,
        label_smoothing)
    if reduction == "sum":
        loss = loss.sum()
    elif reduction == "mean":
        loss = loss.sum() / n
    else:
        loss = loss.reshape(x.shape[:-1])
    return loss.astype(x.dtype, copy=False)


@override("nn.functional.gelu")
def gelu(xp, x, approximate):
    """gelu of a contiguous array in one pass."""
    if approximate not in ("none", "tanh") or not covered(x):
        return None
    y = xp.empty(x.shape, x.dtype)
    pointwise.gelu(buffer(x), buffer(y), x.size, approximate)
    return y


@override("_gelu_backward")
def gelu_backward(xp, grad, x, approximate):
    """gelu's gradient in one pass."""
    if (approximate not in ("none", "tanh") or grad.shape != x.shape
            or grad.dtype != x.dtype or not covered(grad, x)):
        return None
    y = xp.empty(x.shape, x.dtype)
    pointwise.gelu_backward(buffer(grad), buffer(x), buffer(y), x.size, approximate)
    return y


@override("nn.functional.silu")
def silu(xp, x):
    """silu of a contiguous array in one pass."""
    if not covered(x):
        return None
    y = xp.empty(x.shape, x.dtype)
    pointwise.silu(buffer(x), buffer(y), x.size)
    return y


def one_head(mask):
    """A mask of 3-D attention (B, L, S), or None, as one for a head dim of 1."""
    return mask[:, None] if mask is not None and mask.ndim == 3 else mask


def flash_mask(xp, mask, shape):
    """An ``attn_mask`` as the flash kernels read it: (its buffer, a boolean one as bytes, and
    its strides over the (B, H, L, S) ``shape`` in elements, 0 where it broadcasts); None
    without a mask, False for one that does not broadcast (the generic code reports it)."""
    if mask is None:
        return None
    try:
        view = xp.broadcast_to(mask, shape)
    except ValueError:
        return False
    if view.dtype == np.bool_:
        view = view.view(np.uint8)
    return buffer(view), tuple(s // view.itemsize for s in view.strides)


@override("nn.functional.scaled_dot_product_attention")
def scaled_dot_product_attention(xp, q, k, v, mask, dropout_p, is_causal, scale, enable_gqa):
    """Attention of (B, H, L, E) heads (causal, under an ``attn_mask``, or neither; with
    dropout; grouped-query heads) through the flash kernel; returns (output, log-sum-exp per
    query), and with dropout the (seed, offset) of its Philox numbers on the host, NOTE
    [SDPA outputs]."""
    if not flash_sdp_enabled() or dropout_p >= 1 or not q.ndim == k.ndim == v.ndim:
        return None
    if q.ndim == 3 and not enable_gqa:      # (B, L, E): one head
        lifted = scaled_dot_product_attention(
            xp, q[:, None], k[:, None], v[:, None], one_head(mask), dropout_p, is_causal,
            scale, enable_gqa)
        return None if lifted is None else (lifted[0][:, 0], lifted[1][:, 0], *lifted[2:])
    if q.ndim != 4:
        return None
    gk, gv = _groups(q, k, v, enable_gqa)
    _check(q, k, v, mask, dropout_p, is_causal, gk != 1 or gv != 1)
    (B, H, L, E), (S, Ev) = q.shape, v.shape[2:]
    if (not q.dtype == k.dtype == v.dtype or q.dtype not in FAST_DTYPES or gk != gv
            or k.shape[:2] != (B, H // gk) or v.shape[:3] != k.shape[:3] or k.shape[3] != E
            or not L or not S
            or max(E, Ev) > attention.MAX_HEAD
            or any(a.strides[3] != a.itemsize for a in (q, k, v))):
        return None
    masked = flash_mask(xp, mask, (B, H, L, S))
    if masked is False:
        return None
    dropout = None
    if dropout_p > 0:
        if "random" not in DEVICE_KERNELS:      # the generic backward could not redraw it
            return None
        dropout = (*_philox_reserved(device_of(q), B * H * L * S), dropout_p)
    out = xp.empty((B, H, L, Ev), q.dtype)
    lse = xp.empty((B, H, L), xp.float32)
    strides = tuple(tuple(s // a.itemsize for s in a.strides[:3]) for a in (q, k, v))
    attention.attention_forward(buffer(q), buffer(k), buffer(v), buffer(out), buffer(lse),
                                (B, H, L, S, E, Ev), strides, _scale(E, scale), is_causal,
                                masked, dropout, gk)
    if dropout is None:
        return out, lse
    return out, lse, np.array(dropout[:2], np.int64)
