"""The Triton kernels that ops and optimizers find by name through
``ember.backend.device_kernel`` (they are not an op's forward): the gradients of layer norm,
cross entropy, flash attention, softmax and silu for first-order backwards, an LSTM time
step and its gradient, the Adam update, and dropout's uniform random numbers.

Each returns None (False for the in-place ones) for layouts its kernel does not cover, and
the caller runs its generic code; ``fallible`` makes a kernel that cannot run here do the
same, after switching it off.
"""

import numpy as np

from ember.backend import DEVICE_KERNELS, xp_of
from ember.backend.cuda_kernels import fallible
from ember.backend.cuda_kernels import triton_attention as attention
from ember.backend.cuda_kernels import triton_pointwise as pointwise
from ember.backend.cuda_kernels import triton_rnn as rnn
from ember.backend.cuda_kernels import triton_rows as rows
from ember.backend.cuda_kernels._launch import FAST_DTYPES, buffer, covered


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
    if (k > rows.MAX_ROW or gy.dtype != x.dtype or not covered(gy, x)
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
    if x.ndim != 2 or t.ndim != 1 or not covered(x):
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
    return len({a.dtype for a in arrays}) == 1 and arrays[0].dtype in FAST_DTYPES and all(
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
            or not covered(grad, out)):
        return None
    dx = xp_of(out).empty(out.shape, out.dtype)
    n_cols = out.shape[-1]
    rows.softmax_backward_rows(buffer(grad), buffer(out), buffer(dx), out.size // n_cols,
                               n_cols, log)
    return dx


def silu_backward(grad, x):
    """silu's input gradient in one kernel; None for layouts it does not cover."""
    if grad.shape != x.shape or grad.dtype != x.dtype or not covered(grad, x):
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
