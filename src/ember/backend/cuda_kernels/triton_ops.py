"""The Triton kernels registered as CUDA forwards (NOTE [CUDA kernel overrides]): softmax,
log_softmax, layer norm, cross entropy, gelu and its gradient, silu and flash attention; and,
by name in ``DEVICE_KERNELS``, the layer norm, cross entropy and flash attention gradients,
the Adam update and uniform random numbers.

Each override takes the layouts its kernel covers (contiguous, float32/float16/bfloat16,
rows short enough to hold in registers) and returns None for the rest, which the op's
generic CuPy forward then computes. Checks and error messages stay the op's own: an override
runs them first, or hands inputs it would reject to the generic forward.
"""

import math

import ml_dtypes
import numpy as np

from ember.backend import DEVICE_KERNELS, xp_of
from ember.backend.cuda_kernels import fallible, override
from ember.backend.cuda_kernels import triton_attention as attention
from ember.backend.cuda_kernels import triton_pointwise as pointwise
from ember.backend.cuda_kernels import triton_rnn as rnn
from ember.backend.cuda_kernels import triton_rows as rows
from ember.backend.cuda_kernels._launch import buffer
from ember.ops.attention import _check, _groups, _scale
from ember.ops.log_space import _finish, _softmax_input
from ember.ops.loss_ce import _check_class_target
from ember.ops.normalization import check_normalized_shape

_FAST = frozenset(map(np.dtype, (np.float32, np.float16, ml_dtypes.bfloat16)))


def _covered(*arrays):
    return all(a.dtype in _FAST and a.flags.c_contiguous and a.size for a in arrays)


def _softmax(xp, x, dim, dtype, name, log):
    zero_dim = x.ndim == 0
    x, d, result = _softmax_input(xp, name, x, dim, dtype)
    if d != x.ndim - 1 or x.shape[-1] > rows.MAX_ROW or not _covered(x):
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
    if k > rows.MAX_ROW or not _covered(x):
        return None
    n_rows = x.size // k
    y = xp.empty(x.shape, x.dtype)
    mean, invstd = xp.empty(n_rows, x.dtype), xp.empty(n_rows, x.dtype)
    w, b = (None if v is None else buffer(xp.ascontiguousarray(v)) for v in (w, b))
    rows.layer_norm_rows(buffer(x), w, b, buffer(y), buffer(mean), buffer(invstd), n_rows, k,
                         eps)
    stats = x.shape[:x.ndim - len(ns)] + (1,) * len(ns)
    return y, mean.reshape(stats), invstd.reshape(stats)


@override("nn.functional.cross_entropy")
def cross_entropy(xp, x, t, w, size_average, ignore_index, reduce, reduction,
                  label_smoothing):
    """Cross entropy of (N, C) logits and class targets, unweighted and unsmoothed: one pass
    over each row (the targets are checked on the device, with one synchronization)."""
    if (w is not None or label_smoothing or size_average is not None or reduce is not None
            or reduction not in ("mean", "sum", "none") or x.ndim != 2 or t.ndim != 1
            or not _covered(x)):
        return None
    _check_class_target(x, t)
    n, c = x.shape
    t = xp.ascontiguousarray(t, dtype=xp.int64)
    kept = t != ignore_index
    if bool((((t < 0) | (t >= c)) & kept).any()):
        return None                         # the generic forward raises PyTorch's error
    loss = xp.empty(n, xp.float32)
    rows.cross_entropy_rows(buffer(x), buffer(t), buffer(loss), n, c, ignore_index)
    if reduction == "sum":
        loss = loss.sum()
    elif reduction == "mean":
        loss = loss.sum() / kept.sum(dtype=loss.dtype)
    return loss.astype(x.dtype, copy=False)


@override("nn.functional.gelu")
def gelu(xp, x, approximate):
    """gelu of a contiguous array in one pass."""
    if approximate not in ("none", "tanh") or not _covered(x):
        return None
    y = xp.empty(x.shape, x.dtype)
    pointwise.gelu(buffer(x), buffer(y), x.size, approximate)
    return y


@override("_gelu_backward")
def gelu_backward(xp, grad, x, approximate):
    """gelu's gradient in one pass."""
    if (approximate not in ("none", "tanh") or grad.shape != x.shape
            or grad.dtype != x.dtype or not _covered(grad, x)):
        return None
    y = xp.empty(x.shape, x.dtype)
    pointwise.gelu_backward(buffer(grad), buffer(x), buffer(y), x.size, approximate)
    return y


@override("nn.functional.silu")
def silu(xp, x):
    """silu of a contiguous array in one pass."""
    if not _covered(x):
        return None
    y = xp.empty(x.shape, x.dtype)
    pointwise.silu(buffer(x), buffer(y), x.size)
    return y


@override("nn.functional.scaled_dot_product_attention")
def scaled_dot_product_attention(xp, q, k, v, mask, dropout_p, is_causal, scale, enable_gqa):
    """Attention of (B, H, L, E) heads without a mask or dropout (causal or not) through the
    flash kernel; returns (output, log-sum-exp per query), NOTE [SDPA outputs]."""
    if mask is not None or dropout_p > 0 or not q.ndim == k.ndim == v.ndim == 4:
        return None
    _check(q, k, v, mask, dropout_p, is_causal, any(g != 1 for g in _groups(q, k, v,
                                                                             enable_gqa)))
    (B, H, L, E), (S, Ev) = q.shape, v.shape[2:]
    if (not q.dtype == k.dtype == v.dtype or q.dtype not in _FAST or k.shape[:2] != (B, H)
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


def adam(x, g, m, v, vmax, **hyper):
    """The Adam/AdamW update of one float32 parameter in one pass; False (nothing done) for
    other dtypes and layouts, which the optimizer then updates itself."""
    arrays = (x, g, m, v) if vmax is None else (x, g, m, v, vmax)
    if any(a.dtype != np.float32 or not a.flags.c_contiguous for a in arrays) or not x.size:
        return False
    pointwise.adam_update(*(buffer(a) for a in (x, g, m, v)),
                          None if vmax is None else buffer(vmax), x.size, **hyper)
    return True


def layer_norm_backward(gy, x, w, mean, invstd, k, *, need_x, need_w, need_b):
    """(input, weight, bias) gradients of layer norm over the last ``k`` elements, None
    where not needed; None for layouts the kernel does not cover."""
    if (k > rows.MAX_ROW or gy.dtype != x.dtype or not _covered(gy, x)
            or not (mean.flags.c_contiguous and invstd.flags.c_contiguous)):
        return None
    xp = xp_of(x)
    n_rows = x.size // k
    programs = max(1, min(n_rows, rows.PARTIAL_ROWS))
    gx = xp.empty(x.shape, x.dtype) if need_x else None
    partial_w, partial_b = (xp.empty((programs, k), xp.float32) for _ in range(2))
    w_buffer = None if w is None else buffer(xp.ascontiguousarray(w))
    rows.layer_norm_backward_rows(buffer(gy), buffer(x), w_buffer, buffer(mean), buffer(invstd),
                                  None if gx is None else buffer(gx), buffer(partial_w),
                                  buffer(partial_b), n_rows, k, programs)
    gw = partial_w.sum(axis=0).astype(w.dtype) if need_w else None
    gb = partial_b.sum(axis=0).astype(x.dtype) if need_b else None
    return gx, gw, gb


def cross_entropy_backward(x, t, grad, ignore_index, reduction):
    """The gradient of the unweighted, unsmoothed cross entropy of (N, C) logits in one
    kernel; None for layouts it does not cover."""
    if x.ndim != 2 or t.ndim != 1 or not _covered(x):
        return None
    xp = xp_of(x)
    n, c = x.shape
    t = xp.ascontiguousarray(t, dtype=xp.int64)
    scale = grad.astype(xp.float32).reshape(-1)
    if reduction == "mean":             # an ignored row's share is 0, even when all are
        scale = scale / (t != ignore_index).sum(dtype=xp.float32)
    dx = xp.empty(x.shape, x.dtype)
    rows.cross_entropy_backward_rows(buffer(x), buffer(t), buffer(xp.ascontiguousarray(scale)),
                                     buffer(dx), n, c, ignore_index, reduction == "none")
    return dx


def attention_backward(grad, q, k, v, out, lse, causal, scale):
    """(dq, dk, dv) of the flash forward's attention (NOTE [SDPA outputs]) in two kernels,
    from its output and log-sum-exp; None for layouts they do not cover."""
    if (grad.dtype != q.dtype or any(a.strides[3] != a.itemsize for a in (q, k, v))
            or not out.flags.c_contiguous or not lse.flags.c_contiguous):
        return None
    xp = xp_of(q)
    (B, H, L, E), (S, Ev) = q.shape, v.shape[2:]
    grad = xp.ascontiguousarray(grad)
    delta = xp.ascontiguousarray((grad.astype(xp.float32) * out.astype(xp.float32)).sum(-1))
    dq, dk, dv = (xp.empty(a.shape, q.dtype) for a in (q, k, v))
    strides = tuple(tuple(s // a.itemsize for s in a.strides[:3]) for a in (q, k, v))
    attention.attention_backward(*(buffer(a) for a in (q, k, v, grad, lse, delta, dq, dk, dv)),
                                 (B, H, L, S, E, Ev), strides, scale, causal)
    return dq, dk, dv


def _rows_of(*arrays):
    """Whether arrays of one covered dtype are unit-stride rows (the row stride is free)."""
    return len({a.dtype for a in arrays}) == 1 and arrays[0].dtype in _FAST and all(
        a.ndim == 2 and a.strides[1] == a.itemsize for a in arrays)


def lstm_step(gh, x, b, h, c, ws, out, hidden):
    """One LSTM time step after its recurrent GEMM ``gh``, in one kernel (ops/_rnn_kernels:
    lstm_forward); False for layouts it does not cover."""
    if not (_rows_of(gh, x, h, c, ws, out) and gh.flags.c_contiguous and h.flags.c_contiguous
            and c.flags.c_contiguous and out.flags.c_contiguous
            and (b is None or (b.dtype == x.dtype and b.flags.c_contiguous))):
        return False
    item = x.itemsize
    rnn.lstm_step(*(buffer(a) for a in (gh, x)), None if b is None else buffer(b),
                  *(buffer(a) for a in (h, c, ws, out)), gh.shape[0], hidden,
                  x.strides[0] // item, ws.strides[0] // item)
    return True


def lstm_step_backward(dout, dh, dc, ws, dg, hidden):
    """The gate gradients of one LSTM time step in one kernel (lstm_backward); False for
    layouts it does not cover."""
    if not (_rows_of(dout, dh, dc, ws, dg) and all(a.flags.c_contiguous
                                                   for a in (dout, dh, dc, dg))):
        return False
    rnn.lstm_step_backward(*(buffer(a) for a in (dout, dh, dc, ws, dg)), dg.shape[0], hidden,
                           ws.strides[0] // ws.itemsize)
    return True


def softmax_backward(grad, out, log):
    """The input gradient of softmax (``log``: log_softmax) along the last dim, from the
    output and its gradient, in one kernel; None for layouts it does not cover."""
    if (grad.shape != out.shape or grad.dtype != out.dtype or out.shape[-1] > rows.MAX_ROW
            or not _covered(grad, out)):
        return None
    dx = xp_of(out).empty(out.shape, out.dtype)
    n_cols = out.shape[-1]
    rows.softmax_backward_rows(buffer(grad), buffer(out), buffer(dx), out.size // n_cols,
                               n_cols, log)
    return dx


def silu_backward(grad, x):
    """silu's input gradient in one kernel; None for layouts it does not cover."""
    if grad.shape != x.shape or grad.dtype != x.dtype or not _covered(grad, x):
        return None
    dx = xp_of(x).empty(x.shape, x.dtype)
    pointwise.silu_backward(buffer(grad), buffer(x), buffer(dx), x.size)
    return dx


def uniform(like, shape, seed, offset):
    """Uniform [0, 1) float32 numbers of ``shape`` on ``like``'s GPU: elements ``offset``
    onward of the counter-based stream of ``seed``."""
    xp = xp_of(like)
    out = xp.empty(shape, xp.float32)
    if out.size:
        pointwise.uniform(buffer(out), out.size, seed, offset)
    return out


DEVICE_KERNELS.update({name: fallible(name, kernel) for name, kernel in (
    ("adam", adam), ("layer_norm_backward", layer_norm_backward),
    ("cross_entropy_backward", cross_entropy_backward), ("uniform", uniform),
    ("attention_backward", attention_backward), ("lstm_step", lstm_step),
    ("lstm_step_backward", lstm_step_backward), ("softmax_backward", softmax_backward),
    ("silu_backward", silu_backward))})
