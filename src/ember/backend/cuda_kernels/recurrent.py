"""The recurrent layers' time loops on a GPU, found by name through
``ember.backend.device_kernel`` (ops/_rnn_kernels.py): all the steps of an LSTM, GRU or
Elman RNN layer and their gradients, each step one launch that sums its recurrent GEMM
itself (triton_rnn_gemm.py); LSTM and GRU steps can instead run a cuBLAS GEMM and then a
cell kernel (triton_rnn.py), which ``RECURRENT_GEMM_IN_KERNEL`` chooses. Each returns False
(nothing done) for layouts its kernels do not cover, and the op runs its generic loop.
"""

import numpy as np

from ember.backend import DEVICE_KERNELS, cuda_backend, low_precision_product, xp_of
from ember.backend.cuda_kernels import fallible
from ember.backend.cuda_kernels import triton_rnn as rnn
from ember.backend.cuda_kernels import triton_rnn_gemm as rnn_gemm
from ember.backend.cuda_kernels._launch import FAST_DTYPES, buffer

__all__ = ["lstm_steps", "lstm_steps_backward", "gru_steps", "gru_steps_backward", "rnn_steps",
           "rnn_steps_backward", "RECURRENT_GEMM_IN_KERNEL"]


def _covered(rows, states, vectors=()):
    """Whether the step kernels take these arrays: ``rows`` (unit-stride rows; the row
    stride is free) and ``states`` (C-contiguous) of one covered dtype, and ``vectors``
    (bias, W_hh; None when absent) C-contiguous in that dtype."""
    arrays = rows + states
    dtype = arrays[0].dtype
    return (dtype in FAST_DTYPES and all(a.dtype == dtype and a.ndim == 2
                                         and a.strides[1] == a.itemsize for a in arrays)
            and all(a.flags.c_contiguous for a in states)
            and all(v is None or (v.dtype == dtype and v.flags.c_contiguous) for v in vectors))


# Whether a recurrent step's GEMM runs inside its kernel (one launch a step) rather than in
# cuBLAS before it (two); benchmarks/cuda.py times both.
RECURRENT_GEMM_IN_KERNEL = True


def _gemm_in_kernel(w, dtype):
    return RECURRENT_GEMM_IN_KERNEL and w.dtype == dtype and w.flags.c_contiguous


def _forward_in_kernel(launch, h, out, steps):
    """``launch(o, rows, src, src_rows, h0)`` for each step: h_prev's first ``src_rows`` rows
    are the last step's output rows ``src``, the others the initial state's (``h0``, a copy,
    as the steps overwrite ``h``)."""
    out_at, out_row = buffer(out), out.strides[0]
    h0 = buffer(h.copy())
    src, src_rows = h0, 0
    for o, rows in steps:
        launch(o, rows, src, src_rows, h0)
        src, src_rows = out_at.at(o * out_row), rows


def _backward_in_kernel(launch, grads, w_hh, dh, steps):
    """``launch(o, rows, following, next_rows)`` for each step, last first, where
    ``following`` holds the next step's recurrent gradients ``grads`` (its first
    ``next_rows`` rows go on into this step); then ``dh`` gets each row's share of the initial
    state, the product with ``w_hh`` of its first step's."""
    xp, at, row = xp_of(grads), buffer(grads), grads.strides[0]
    following, after, next_rows = at, 0, 0
    for o, rows in reversed(steps):
        launch(o, rows, following, next_rows)
        if rows < next_rows:                        # rows the next step started from h0
            dh[rows:next_rows] = _product(xp, grads[after + rows:after + next_rows], w_hh)
        following, after, next_rows = at.at(o * row), o, rows
    dh[:next_rows] = _product(xp, grads[after:after + next_rows], w_hh)


def _product(xp, a, b):
    """``a @ b``, 16-bit operands summed in float32 (natively where CuPy takes them)."""
    return xp.matmul(a, b) if a.dtype == np.float32 else low_precision_product(xp, a, b)


def lstm_steps(x, b, h, c, ws, out, wt, steps, hidden):
    """All the time steps of an LSTM layer (ops/_rnn_kernels: lstm_forward): each one kernel
    with its recurrent GEMM, or a GEMM and one kernel, with the layout checked once and rows
    reached by address, not by slicing; False (nothing done) for layouts the kernels do not
    cover."""
    if not _covered((x, ws), (h, c, out), (b,)):
        return False
    xp, n = xp_of(x), h.shape[0]
    x_at, h_at, c_at, ws_at, out_at = (buffer(a) for a in (x, h, c, ws, out))
    bias = None if b is None else buffer(b)
    x_row, ws_row, out_row = x.strides[0], ws.strides[0], out.strides[0]
    strides = (x_row // x.itemsize, ws_row // ws.itemsize)
    if _gemm_in_kernel(wt.T, x.dtype):
        w_at, ieee = buffer(wt.T), not cuda_backend().tf32_gemms_on()
        _forward_in_kernel(lambda o, rows, src, src_rows, h0: rnn_gemm.lstm_gemm_step(
            src, src_rows, h0, w_at, x_at.at(o * x_row), bias, h_at, c_at, ws_at.at(o * ws_row),
            out_at.at(o * out_row), rows, hidden, *strides, ieee), h, out, steps)
        return True
    gates = xp.empty((n, 4 * hidden), x.dtype)      # each step's, consumed by its kernel
    gates_at = buffer(gates)
    for o, rows in steps:
        xp.matmul(h if rows == n else h[:rows], wt, out=gates if rows == n else gates[:rows])
        rnn.lstm_step(gates_at, x_at.at(o * x_row), bias, h_at, c_at, ws_at.at(o * ws_row),
                      out_at.at(o * out_row), rows, hidden, *strides)
    return True


def lstm_steps_backward(dout, dh, dc, ws, dg, w_hh, steps, hidden):
    """Back through ``lstm_steps``: each step's gate gradients in one kernel, with the
    carried ``dh``'s GEMM inside it or after it straight into place; False (nothing done) for
    layouts the kernels do not cover."""
    dout = xp_of(dout).ascontiguousarray(dout)     # a bidirectional layer's is a slice
    if not _covered((dout, ws), (dh, dc, dg)):
        return False
    xp, n = xp_of(dg), dh.shape[0]
    dout_at, dh_at, dc_at, ws_at, dg_at = (buffer(a) for a in (dout, dh, dc, ws, dg))
    out_row, ws_row, dg_row = dout.strides[0], ws.strides[0], dg.strides[0]
    ws_stride = ws_row // ws.itemsize
    if _gemm_in_kernel(w_hh, dg.dtype):
        w_at, ieee = buffer(w_hh), not cuda_backend().tf32_gemms_on()
        _backward_in_kernel(lambda o, rows, following, next_rows: rnn_gemm.lstm_gemm_step_backward(
            dout_at.at(o * out_row), dh_at, dc_at, ws_at.at(o * ws_row), dg_at.at(o * dg_row),
            following, w_at, rows, next_rows, hidden, ws_stride, ieee), dg, w_hh, dh, steps)
        return True
    for o, rows in reversed(steps):
        rnn.lstm_step_backward(dout_at.at(o * out_row), dh_at, dc_at, ws_at.at(o * ws_row),
                               dg_at.at(o * dg_row), rows, hidden, ws_stride)
        xp.matmul(dg[o:o + rows], w_hh, out=dh if rows == n else dh[:rows])
    return True


def gru_steps(x, b, h, ws, out, wt, steps, hidden):
    """All the time steps of a GRU layer (ops/_rnn_kernels: gru_forward), as ``lstm_steps``;
    False (nothing done) for layouts the kernels do not cover."""
    if not _covered((x, ws), (h, out), (b,)):
        return False
    xp, n = xp_of(x), h.shape[0]
    x_at, h_at, ws_at, out_at = (buffer(a) for a in (x, h, ws, out))
    bias = None if b is None else buffer(b)
    x_row, ws_row, out_row = x.strides[0], ws.strides[0], out.strides[0]
    strides = (x_row // x.itemsize, ws_row // ws.itemsize)
    if _gemm_in_kernel(wt.T, x.dtype):
        w_at, ieee = buffer(wt.T), not cuda_backend().tf32_gemms_on()
        _forward_in_kernel(lambda o, rows, src, src_rows, h0: rnn_gemm.gru_gemm_step(
            src, src_rows, h0, w_at, x_at.at(o * x_row), bias, h_at, ws_at.at(o * ws_row),
            out_at.at(o * out_row), rows, hidden, *strides, ieee), h, out, steps)
        return True
    gates = xp.empty((n, 3 * hidden), x.dtype)      # each step's, consumed by its kernel
    gates_at = buffer(gates)
    for o, rows in steps:
        xp.matmul(h if rows == n else h[:rows], wt, out=gates if rows == n else gates[:rows])
        rnn.gru_step(gates_at, x_at.at(o * x_row), bias, h_at, ws_at.at(o * ws_row),
                     out_at.at(o * out_row), rows, hidden, *strides)
    return True


def gru_steps_backward(dout, dh, ws, dx, dgh, w_hh, steps, hidden):
    """Back through ``gru_steps``: each step's gradients in one kernel, with the carried
    gradient's GEMM part inside it or after it straight into ``dh`` (its z-weighted part kept
    beside it and added once at the end); False (nothing done) for layouts the kernels do not
    cover."""
    dout = xp_of(dout).ascontiguousarray(dout)     # a bidirectional layer's is a slice
    if not _covered((dout, ws), (dh, dx, dgh)):
        return False
    xp, n = xp_of(dgh), dh.shape[0]
    dhz = xp.zeros_like(dh)
    dout_at, dh_at, dhz_at, ws_at, dx_at, dgh_at = (buffer(a)
                                                   for a in (dout, dh, dhz, ws, dx, dgh))
    out_row, ws_row, dx_row = dout.strides[0], ws.strides[0], dx.strides[0]
    ws_stride = ws_row // ws.itemsize
    if _gemm_in_kernel(w_hh, dgh.dtype):
        w_at, ieee = buffer(w_hh), not cuda_backend().tf32_gemms_on()
        _backward_in_kernel(lambda o, rows, following, next_rows: rnn_gemm.gru_gemm_step_backward(
            dout_at.at(o * out_row), dh_at, dhz_at, ws_at.at(o * ws_row), dx_at.at(o * dx_row),
            dgh_at.at(o * dx_row), following, w_at, rows, next_rows, hidden, ws_stride, ieee),
            dgh, w_hh, dh, steps)
    else:
        for o, rows in reversed(steps):
            rnn.gru_step_backward(dout_at.at(o * out_row), dh_at, dhz_at, ws_at.at(o * ws_row),
                                  dx_at.at(o * dx_row), dgh_at.at(o * dx_row), rows, hidden,
                                  ws_stride)
            xp.matmul(dgh[o:o + rows], w_hh, out=dh if rows == n else dh[:rows])
    dh += dhz
    return True


def rnn_steps(x, b, h, ws, out, wt, steps, hidden, relu):
    """All the time steps of an Elman RNN layer (ops/_rnn_kernels: rnn_forward), each one
    kernel with its recurrent GEMM; False (nothing done) for layouts the kernel does not
    cover."""
    if not _covered((x,), (h, ws, out), (b, wt.T)):
        return False
    x_at, h_at, ws_at, out_at, w_at = (buffer(a) for a in (x, h, ws, out, wt.T))
    bias = None if b is None else buffer(b)
    x_row, row = x.strides[0], out.strides[0]
    ieee = not cuda_backend().tf32_gemms_on()
    _forward_in_kernel(lambda o, rows, src, src_rows, h0: rnn_gemm.rnn_gemm_step(
        src, src_rows, h0, w_at, x_at.at(o * x_row), bias, h_at, ws_at.at(o * row),
        out_at.at(o * row), rows, hidden, x_row // x.itemsize, relu, ieee), h, out, steps)
    return True


def rnn_steps_backward(dout, dh, out, dx, w_hh, steps, hidden, relu):
    """Back through ``rnn_steps``: each step's gradient ``dx`` in one kernel with its carried
    GEMM; False (nothing done) for layouts the kernel does not cover."""
    dout = xp_of(dout).ascontiguousarray(dout)     # a bidirectional layer's is a slice
    if not _covered((dout,), (dh, out, dx), (w_hh,)):
        return False
    dout_at, dh_at, out_at, dx_at, w_at = (buffer(a) for a in (dout, dh, out, dx, w_hh))
    row = dx.strides[0]
    ieee = not cuda_backend().tf32_gemms_on()
    _backward_in_kernel(lambda o, rows, following, next_rows: rnn_gemm.rnn_gemm_step_backward(
        dout_at.at(o * row), dh_at, out_at.at(o * row), dx_at.at(o * row), following, w_at,
        rows, next_rows, hidden, relu, ieee), dx, w_hh, dh, steps)
    return True


DEVICE_KERNELS.update({name: fallible(name, kernel) for name, kernel in (
    ("lstm_steps", lstm_steps), ("lstm_steps_backward", lstm_steps_backward),
    ("gru_steps", gru_steps), ("gru_steps_backward", gru_steps_backward),
    ("rnn_steps", rnn_steps), ("rnn_steps_backward", rnn_steps_backward))})
