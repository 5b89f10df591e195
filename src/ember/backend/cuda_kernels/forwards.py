"""The Triton kernels registered as CUDA forwards of ops (NOTE [CUDA kernel overrides]):
softmax, log_softmax, layer norm, cross entropy, gelu and its gradient, silu, flash
attention, 1-D/2-D max, average and (equal-window) adaptive average pooling, and 1-D/2-D
interpolation.

Each override takes the layouts its kernel covers (contiguous, float32/float16/bfloat16,
rows short enough to hold in registers) and returns None for the rest, which the op's
generic CuPy forward then computes. Checks and error messages stay the op's own: an override
runs them first, or hands inputs it would reject to the generic forward.
"""

import math

import numpy as np

from ember.backend.cuda_kernels import override
from ember.backend.cuda_kernels import triton_attention as attention
from ember.backend.cuda_kernels import triton_pointwise as pointwise
from ember.backend.cuda_kernels import triton_pooling as pooling
from ember.backend.cuda_kernels import triton_resample as resample
from ember.backend.cuda_kernels import triton_rows as rows
from ember.backend import device_copy
from ember.backend.cuda_kernels._launch import FAST_DTYPES, buffer, buffers, covered
from ember.backends.cuda import flash_sdp_enabled
from ember.ops import resampling
from ember.ops._separable import Taps, built_once
from ember.ops.attention import _check, _groups, _scale
from ember.ops.adaptive_pooling import _check as _adaptive_args
from ember.ops.log_space import _finish, _softmax_input
from ember.ops.loss_ce import _check_class_target, _check_weight, check_class_range
from ember.ops.normalization import check_normalized_shape
from ember.ops.pooling import _avg_args, _max_args


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
    smoothing: one pass over each row of classes (two with smoothing). The targets are
    checked on the device (NOTE [Deferred device checks])."""
    if (size_average is not None or reduce is not None
            or reduction not in ("mean", "sum", "none") or x.ndim < 2 or t.ndim != x.ndim - 1
            or not 0.0 <= label_smoothing <= 1.0 or not covered(x)):
        return None
    _check_class_target(x, t)
    logits, c = class_rows(xp, x)
    _check_weight(w, c, x.dtype)
    n = logits.shape[0]
    targets = xp.ascontiguousarray(t.reshape(-1), dtype=xp.int64)
    kept = targets != ignore_index
    check_class_range(xp.where(kept, targets, 0), c)
    weight, weight_sum, divisor = class_weights(xp, w, targets, kept)
    loss = xp.empty(n, xp.float32)
    rows.cross_entropy_rows(buffer(logits), buffer(targets), buffer(loss), n, c, ignore_index,
                            label_smoothing, *buffers(weight, weight_sum))
    if reduction == "sum":
        loss = loss.sum()
    elif reduction == "mean":
        loss = loss.sum() / divisor
    else:
        loss = loss.reshape(t.shape)
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


@override("nn.functional.scaled_dot_product_attention")
def scaled_dot_product_attention(xp, q, k, v, mask, dropout_p, is_causal, scale, enable_gqa):
    """Attention of (B, H, L, E) heads without a mask or dropout (causal or not) through the
    flash kernel; returns (output, log-sum-exp per query), NOTE [SDPA outputs]."""
    if (not flash_sdp_enabled() or mask is not None or dropout_p > 0
            or not q.ndim == k.ndim == v.ndim == 4):
        return None
    _check(q, k, v, mask, dropout_p, is_causal, any(g != 1 for g in _groups(q, k, v,
                                                                             enable_gqa)))
    (B, H, L, E), (S, Ev) = q.shape, v.shape[2:]
    if (not q.dtype == k.dtype == v.dtype or q.dtype not in FAST_DTYPES or k.shape[:2] != (B, H)
            or v.shape[:3] != k.shape[:3] or k.shape[3] != E or not L or not S
            or max(E, Ev) > attention.MAX_HEAD
            or any(a.strides[3] != a.itemsize for a in (q, k, v))):
        return None
    out = xp.empty((B, H, L, Ev), q.dtype)
    lse = xp.empty((B, H, L), xp.float32)
    strides = tuple(tuple(s // a.itemsize for s in a.strides[:3]) for a in (q, k, v))
    attention.attention_forward(buffer(q), buffer(k), buffer(v), buffer(out), buffer(lse),
                                (B, H, L, S, E, Ev), strides, _scale(E, scale), is_causal)
    return out, lse


def _max_pool(xp, x, nd, kernel_size, stride, padding, dilation, ceil_mode):
    k, s, p, d, out = _max_args(nd, x, kernel_size, stride, padding, dilation, ceil_mode)
    if not covered(x) or math.prod(k) > pooling.MAX_TAPS:
        return None
    lead = x.shape[:x.ndim - nd]
    y = xp.empty(lead + tuple(out), x.dtype)
    index = xp.empty(y.shape, xp.int64)
    if y.size:
        pooling.max_pool2d(buffer(x), buffer(y), buffer(index), math.prod(lead),
                           *as_2d(nd, x.shape[x.ndim - nd:], out, k, s, p),
                           (1,) * (2 - nd) + tuple(d))
    return y, index


@override("max_pool1d_with_indices")
def max_pool1d_with_indices(xp, x, kernel_size, stride, padding, dilation, ceil_mode):
    """1-D max pooling of a contiguous array in one pass (values, flat indices)."""
    return _max_pool(xp, x, 1, kernel_size, stride, padding, dilation, ceil_mode)


@override("nn.functional.max_pool2d_with_indices")
def max_pool2d_with_indices(xp, x, kernel_size, stride, padding, dilation, ceil_mode,
                            *unused):
    """2-D max pooling of a contiguous array in one pass (values, flat indices); no read of
    the maxima to find NaNs, which the generic sweep makes."""
    return _max_pool(xp, x, 2, kernel_size, stride, padding, dilation, ceil_mode)


def _avg_pool(xp, x, nd, k, s, p, out, count_include_pad, divisor):
    """Average pooling of checked geometry through the kernel; None for what it leaves."""
    if not covered(x) or math.prod(k) > pooling.MAX_TAPS:
        return None
    lead = x.shape[:x.ndim - nd]
    y = xp.empty(lead + tuple(out), x.dtype)
    if y.size:
        pooling.avg_pool2d(buffer(x), buffer(y), math.prod(lead),
                           *as_2d(nd, x.shape[x.ndim - nd:], out, k, s, p),
                           count_include_pad, divisor)
    return y


def uniform_windows(size, out):
    """The kernel of adaptive pooling from ``size`` to ``out`` when its windows are equal and
    disjoint (each size a multiple of its output's, not all outputs 1), else None."""
    if all(o == 1 for o in out) or any(o == 0 or n % o for n, o in zip(size, out)):
        return None
    return tuple(n // o for n, o in zip(size, out))


def as_2d(nd, size, out, kernel, stride, padding):
    """1-D pooling geometry as 2-D pooling of planes one row high (2-D as it is)."""
    one, zero = (1,) * (2 - nd), (0,) * (2 - nd)
    return (one + tuple(size), one + tuple(out), one + tuple(kernel), one + tuple(stride),
            zero + tuple(padding))


@override("avg_pool1d")
def avg_pool1d(xp, x, kernel_size, stride, padding, ceil_mode, count_include_pad):
    """1-D average pooling of a contiguous array in one pass."""
    k, s, p, out = _avg_args(1, x, kernel_size, stride, padding, ceil_mode, None)
    return _avg_pool(xp, x, 1, k, s, p, out, count_include_pad, None)


@override("nn.functional.avg_pool2d")
def avg_pool2d(xp, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
               divisor_override=None):
    """2-D average pooling of a contiguous array in one pass, reading only each window's
    taps (the generic matrices read whether the input is finite first)."""
    k, s, p, out = _avg_args(2, x, kernel_size, stride, padding, ceil_mode, divisor_override)
    return _avg_pool(xp, x, 2, k, s, p, out, count_include_pad, divisor_override)


def _adaptive_avg_pool(xp, x, nd, output_size):
    out = _adaptive_args("avg", nd, x, output_size)
    k = uniform_windows(x.shape[x.ndim - nd:], out)
    return None if k is None else _avg_pool(xp, x, nd, k, k, (0,) * nd, out, True, None)


@override("adaptive_avg_pool1d")
def adaptive_avg_pool1d(xp, x, output_size):
    """1-D adaptive average pooling with equal windows, as average pooling, in one pass."""
    return _adaptive_avg_pool(xp, x, 1, output_size)


@override("nn.functional.adaptive_avg_pool2d")
def adaptive_avg_pool2d(xp, x, output_size):
    """2-D adaptive average pooling with equal windows (sizes that are multiples of the
    output's), as average pooling, in one pass."""
    return _adaptive_avg_pool(xp, x, 2, output_size)


def _taps_of(m):
    """A dim's map (Taps, or a matrix read at its nonzero entries) as (index, weight) tables
    of shape (outputs, taps): int64 indices, -1 for a tap not read; float32 weights."""
    if isinstance(m, Taps):
        used = np.ones(m.index.shape, bool) if m.used is None else m.used
        index, weight = np.where(used, m.index, -1), m.weight * used
    else:
        nonzero = m != 0
        taps = max(int(nonzero.sum(axis=1).max()), 1)
        order = np.argsort(~nonzero, axis=1, kind="stable")[:, :taps]   # nonzero columns first
        read = np.take_along_axis(nonzero, order, axis=1)
        index, weight = np.where(read, order, -1), np.take_along_axis(m, order, axis=1) * read
    return index.astype(np.int64), weight.astype(np.float32)


@built_once
def _tap_tables(shape, out, scales, mode, align_corners, antialias):
    """interpolate's geometry as (index, weight) tap tables per dim, two dims (a 1-D
    geometry gets a one-row identity dim first)."""
    tables = [_taps_of(m) for m in resampling._mats(shape, out, scales, mode, align_corners,
                                                    antialias)]
    if len(tables) == 1:
        tables.insert(0, (np.zeros((1, 1), np.int64), np.ones((1, 1), np.float32)))
    return tuple(tables)


def resample_tables(like, shape, out, scales, mode, align_corners, antialias):
    """The tap tables on ``like``'s GPU as (index, weight, taps) buffers per dim, uploaded
    once per geometry; None when there are too many taps for the kernel."""
    tables = _tap_tables(shape, out, scales, mode, align_corners, antialias)
    if math.prod(index.shape[1] for index, _ in tables) > resample.MAX_TAPS:
        return None
    return tuple((buffer(device_copy(like, index, index.dtype)),
                  buffer(device_copy(like, weight, weight.dtype)), index.shape[1])
                 for index, weight in tables)


def as_planes(shape, out):
    """(planes, (H, W), (OH, OW)) of an (N, C, *spatial) resampling with 1 or 2 dims."""
    one = (1,) * (4 - len(shape))
    return shape[0] * shape[1], one + tuple(shape[2:]), one + tuple(out)


@override("nn.functional.interpolate")
def interpolate(xp, x, size, scale_factor, mode, align_corners, recompute_scale_factor,
                antialias):
    """1-D and 2-D interpolation of a contiguous array in one pass over the output, reading
    each output's taps (the generic matrices read whether the input is finite first)."""
    resampling._check(x, mode, antialias)
    out, scales = resampling._spatial_args(x, size, scale_factor, mode, align_corners,
                                           recompute_scale_factor, antialias)
    if x.ndim > 4 or not covered(x):
        return None
    tables = resample_tables(x, tuple(x.shape[2:]), out, scales, mode, align_corners,
                             antialias)
    if tables is None:
        return None
    y = xp.empty(x.shape[:2] + tuple(out), x.dtype)
    resample.resample2d(buffer(x), buffer(y), tables, *as_planes(x.shape, out))
    return y
