"""Triton kernels for one step of an LSTM or GRU layer's time loop (ops/_rnn_kernels.py): after
the step's recurrent GEMM, one kernel applies the gates, updates the states and fills the
workspace, and one computes the gates' gradients in the backward; the generic loop takes a
dozen array operations for each. The cells' math is written once, in jit helpers that
triton_rnn_gemm.py's one-launch steps share."""

import triton
import triton.language as tl

from ember.backend.cuda_kernels._launch import guarded

__all__ = ["lstm_step", "lstm_step_backward", "gru_step", "gru_step_backward", "BLOCK",
           "gate_input", "tanh", "lstm_cell", "lstm_cell_backward", "gru_cell",
           "gru_cell_backward"]

BLOCK = 256


@triton.jit
def tanh(z):
    """tanh through the sigmoid (Triton's language has no tanh of its own in every version)."""
    return 2.0 * tl.sigmoid(2.0 * z) - 1.0


@triton.jit
def gate_input(x, b, mask, b_mask, HAS_B: tl.constexpr):
    """One gate's input projection ``x`` plus its bias ``b`` (pointer blocks), in float32."""
    pre = tl.load(x, mask=mask).to(tl.float32)
    if HAS_B:
        pre += tl.load(b, mask=b_mask).to(tl.float32)
    return pre


@triton.jit
def lstm_cell(pre_i, pre_f, pre_g, pre_o, h_prev, c_at, ws, out_at, h_at, mask, hidden):
    """Apply the gates to their pre-activations: ``c`` (at ``c_at``) and ``h`` (at ``h_at``
    and ``out_at``) updated, the workspace row ``ws`` filled (pointer blocks alike)."""
    i = tl.sigmoid(pre_i)
    f = tl.sigmoid(pre_f)
    g = tanh(pre_g)
    o = tl.sigmoid(pre_o)
    c_prev = tl.load(c_at, mask=mask)
    c = f * c_prev.to(tl.float32) + i * g
    tc = tanh(c)
    h = o * tc
    # workspace columns: i, f, g, o | c | tanh(c) | c_prev | h_prev (see _lstm_columns)
    kind = out_at.dtype.element_ty
    tl.store(ws, i.to(kind), mask=mask)
    tl.store(ws + hidden, f.to(kind), mask=mask)
    tl.store(ws + 2 * hidden, g.to(kind), mask=mask)
    tl.store(ws + 3 * hidden, o.to(kind), mask=mask)
    tl.store(ws + 4 * hidden, c.to(kind), mask=mask)
    tl.store(ws + 5 * hidden, tc.to(kind), mask=mask)
    tl.store(ws + 6 * hidden, c_prev, mask=mask)
    tl.store(ws + 7 * hidden, h_prev, mask=mask)
    tl.store(out_at, h.to(kind), mask=mask)
    tl.store(h_at, h.to(kind), mask=mask)
    tl.store(c_at, c.to(kind), mask=mask)


@triton.jit
def lstm_cell_backward(dh, dc_at, ws, dg, mask, hidden):
    """The gates' gradients (at ``dg``) from the step's ``dh``, the workspace row ``ws`` and
    the carried ``dc`` (at ``dc_at``, replaced by the previous step's)."""
    i = tl.load(ws, mask=mask).to(tl.float32)
    f = tl.load(ws + hidden, mask=mask).to(tl.float32)
    g = tl.load(ws + 2 * hidden, mask=mask).to(tl.float32)
    o = tl.load(ws + 3 * hidden, mask=mask).to(tl.float32)
    tc = tl.load(ws + 5 * hidden, mask=mask).to(tl.float32)
    c_prev = tl.load(ws + 6 * hidden, mask=mask).to(tl.float32)
    dc = dh * o * (1.0 - tc * tc) + tl.load(dc_at, mask=mask).to(tl.float32)
    kind = dg.dtype.element_ty
    tl.store(dg, (dc * g * i * (1.0 - i)).to(kind), mask=mask)
    tl.store(dg + hidden, (dc * c_prev * f * (1.0 - f)).to(kind), mask=mask)
    tl.store(dg + 2 * hidden, (dc * i * (1.0 - g * g)).to(kind), mask=mask)
    tl.store(dg + 3 * hidden, (dh * tc * o * (1.0 - o)).to(kind), mask=mask)
    tl.store(dc_at, (dc * f).to(kind), mask=mask)


@triton.jit
def _lstm_step_kernel(gh_ptr, x_ptr, b_ptr, h_ptr, c_ptr, ws_ptr, out_ptr, hidden, x_stride,
                      ws_stride, HAS_B: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = j < hidden
    gh = gh_ptr + row * 4 * hidden + j
    x = x_ptr + row * x_stride + j
    b = b_ptr + j
    pre_i = tl.load(gh, mask=mask).to(tl.float32) + gate_input(x, b, mask, mask, HAS_B)
    pre_f = tl.load(gh + hidden, mask=mask).to(tl.float32) + \
        gate_input(x + hidden, b + hidden, mask, mask, HAS_B)
    pre_g = tl.load(gh + 2 * hidden, mask=mask).to(tl.float32) + \
        gate_input(x + 2 * hidden, b + 2 * hidden, mask, mask, HAS_B)
    pre_o = tl.load(gh + 3 * hidden, mask=mask).to(tl.float32) + \
        gate_input(x + 3 * hidden, b + 3 * hidden, mask, mask, HAS_B)
    state = row * hidden + j
    h_prev = tl.load(h_ptr + state, mask=mask)
    lstm_cell(pre_i, pre_f, pre_g, pre_o, h_prev, c_ptr + state, ws_ptr + row * ws_stride + j,
               out_ptr + state, h_ptr + state, mask, hidden)


@guarded
def lstm_step(gh, x, b, h, c, ws, out, rows, hidden, x_stride, ws_stride):
    """One LSTM step for ``rows`` sequences: gates from the recurrent product ``gh`` (rows,
    4 hidden), the input projection rows ``x`` and bias ``b`` (or None); ``h`` and ``c`` are
    updated in place, ``out`` and the workspace rows ``ws`` written."""
    _lstm_step_kernel[(rows, triton.cdiv(hidden, BLOCK))](
        gh, x, x if b is None else b, h, c, ws, out, hidden, x_stride, ws_stride,
        HAS_B=b is not None, BLOCK=BLOCK)


@triton.jit
def _lstm_step_backward_kernel(dout_ptr, dh_ptr, dc_ptr, ws_ptr, dg_ptr, hidden, ws_stride,
                               BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = j < hidden
    state = row * hidden + j
    dh = tl.load(dout_ptr + state, mask=mask).to(tl.float32) + \
        tl.load(dh_ptr + state, mask=mask).to(tl.float32)
    lstm_cell_backward(dh, dc_ptr + state, ws_ptr + row * ws_stride + j,
                        dg_ptr + row * 4 * hidden + j, mask, hidden)


@guarded
def lstm_step_backward(dout, dh, dc, ws, dg, rows, hidden, ws_stride):
    """The gates' gradients ``dg`` (rows, 4 hidden) of one LSTM step from the output's
    gradient rows ``dout``, the carried ``dh`` and ``dc`` (``dc`` becomes the previous
    step's, in place) and the workspace rows ``ws``."""
    _lstm_step_backward_kernel[(rows, triton.cdiv(hidden, BLOCK))](
        dout, dh, dc, ws, dg, hidden, ws_stride, BLOCK=BLOCK)


@triton.jit
def gru_cell(pre_r, pre_z, x_n, hn, h_prev, ws, out_at, h_at, mask, hidden):
    """Apply the gates: ``pre_r`` and ``pre_z`` are the r and z pre-activations, ``x_n`` the
    n gate's input projection and ``hn`` its recurrent product with bias; ``h`` (at ``h_at``
    and ``out_at``) updated, the workspace row ``ws`` filled."""
    r = tl.sigmoid(pre_r)
    z = tl.sigmoid(pre_z)
    n = tanh(x_n + r * hn)
    h = (h_prev.to(tl.float32) - n) * z + n
    # workspace columns: r, z | n | h W_hn^T + b_hn | h_prev (see gru_forward)
    kind = out_at.dtype.element_ty
    tl.store(ws, r.to(kind), mask=mask)
    tl.store(ws + hidden, z.to(kind), mask=mask)
    tl.store(ws + 2 * hidden, n.to(kind), mask=mask)
    tl.store(ws + 3 * hidden, hn.to(kind), mask=mask)
    tl.store(ws + 4 * hidden, h_prev, mask=mask)
    tl.store(out_at, h.to(kind), mask=mask)
    tl.store(h_at, h.to(kind), mask=mask)


@triton.jit
def gru_cell_backward(dh, ws, dx, dgh, dhz_at, mask, hidden):
    """The gradients of a step's input projections (at ``dx``) and recurrent products (at
    ``dgh``) from its ``dh`` and workspace row ``ws``; the carried gradient's z-weighted part
    stored at ``dhz_at``."""
    r = tl.load(ws, mask=mask).to(tl.float32)
    z = tl.load(ws + hidden, mask=mask).to(tl.float32)
    n = tl.load(ws + 2 * hidden, mask=mask).to(tl.float32)
    hn = tl.load(ws + 3 * hidden, mask=mask).to(tl.float32)
    h_prev = tl.load(ws + 4 * hidden, mask=mask).to(tl.float32)
    dn = dh * (1.0 - z) * (1.0 - n * n)
    dr = dn * hn * (r - r * r)
    dz = dh * (h_prev - n) * (z - z * z)
    kind = dx.dtype.element_ty
    tl.store(dx, dr.to(kind), mask=mask)
    tl.store(dx + hidden, dz.to(kind), mask=mask)
    tl.store(dx + 2 * hidden, dn.to(kind), mask=mask)
    tl.store(dgh, dr.to(kind), mask=mask)
    tl.store(dgh + hidden, dz.to(kind), mask=mask)
    tl.store(dgh + 2 * hidden, (dn * r).to(kind), mask=mask)
    tl.store(dhz_at, (dh * z).to(kind), mask=mask)


@triton.jit
def _gru_step_kernel(gh_ptr, x_ptr, b_ptr, h_ptr, ws_ptr, out_ptr, hidden, x_stride, ws_stride,
                     HAS_B: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = j < hidden
    gh = gh_ptr + row * 3 * hidden + j
    x = x_ptr + row * x_stride + j
    b = b_ptr + j
    pre_r = tl.load(gh, mask=mask).to(tl.float32) + gate_input(x, b, mask, mask, HAS_B)
    pre_z = tl.load(gh + hidden, mask=mask).to(tl.float32) + \
        gate_input(x + hidden, b + hidden, mask, mask, HAS_B)
    hn = gate_input(gh + 2 * hidden, b + 2 * hidden, mask, mask, HAS_B)
    x_n = tl.load(x + 2 * hidden, mask=mask).to(tl.float32)
    state = row * hidden + j
    h_prev = tl.load(h_ptr + state, mask=mask)
    gru_cell(pre_r, pre_z, x_n, hn, h_prev, ws_ptr + row * ws_stride + j, out_ptr + state,
              h_ptr + state, mask, hidden)


@guarded
def gru_step(gh, x, b, h, ws, out, rows, hidden, x_stride, ws_stride):
    """One GRU step for ``rows`` sequences: gates from the recurrent product ``gh`` (rows,
    3 hidden), the input projection rows ``x`` and bias ``b`` (or None); ``h`` is updated in
    place, ``out`` and the workspace rows ``ws`` written."""
    _gru_step_kernel[(rows, triton.cdiv(hidden, BLOCK))](
        gh, x, x if b is None else b, h, ws, out, hidden, x_stride, ws_stride,
        HAS_B=b is not None, BLOCK=BLOCK)


@triton.jit
def _gru_step_backward_kernel(dout_ptr, dh_ptr, dhz_ptr, ws_ptr, dx_ptr, dgh_ptr, hidden,
                              ws_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = j < hidden
    state = row * hidden + j
    # the carried gradient comes in two parts: the last GEMM's and the z-weighted one
    dh = (tl.load(dout_ptr + state, mask=mask).to(tl.float32)
          + tl.load(dh_ptr + state, mask=mask).to(tl.float32)
          + tl.load(dhz_ptr + state, mask=mask).to(tl.float32))
    gru_cell_backward(dh, ws_ptr + row * ws_stride + j, dx_ptr + row * 3 * hidden + j,
                       dgh_ptr + row * 3 * hidden + j, dhz_ptr + state, mask, hidden)


@guarded
def gru_step_backward(dout, dh, dhz, ws, dx, dgh, rows, hidden, ws_stride):
    """The gradients of one GRU step: ``dx`` (rows, 3 hidden) of the input projections and
    ``dgh`` of the recurrent products, from the output's gradient rows ``dout``, the carried
    gradient in two parts, ``dh`` (the last step's GEMM) and ``dhz`` (its z-weighted part,
    replaced in place by this step's), and the workspace rows ``ws``."""
    _gru_step_backward_kernel[(rows, triton.cdiv(hidden, BLOCK))](
        dout, dh, dhz, ws, dx, dgh, hidden, ws_stride, BLOCK=BLOCK)
