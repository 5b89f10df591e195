"""Triton kernels for one step of an LSTM, GRU or Elman RNN layer's time loop in one launch:
each program sums its tile of the step's recurrent GEMM (h_prev W_hh^T, or in the backward
the next step's gradients times W_hh) and then applies the cell (triton_rnn.py's, for LSTM
and GRU) to it, where a cuBLAS GEMM before a cell kernel takes two launches, twice the host's
work per step (and the generic Elman loop seven).

A step reads what the last launch wrote (h_prev, the next step's gradients) and never what
other programs of its launch write, so the steps need no synchronization beyond launch order."""

import triton
import triton.language as tl

from ember.backend.cuda_kernels._launch import guarded, product
from ember.backend.cuda_kernels.triton_rnn import (gate_input, gru_cell, gru_cell_backward,
                                                    lstm_cell, lstm_cell_backward, tanh)

__all__ = ["lstm_gemm_step", "lstm_gemm_step_backward", "gru_gemm_step",
           "gru_gemm_step_backward", "rnn_gemm_step", "rnn_gemm_step_backward"]


BLOCK_K = 64           # the recurrent product's reduction step


def _on_tiles(kernel, rows, hidden, *args, **constants):
    """Launch ``kernel`` over (BLOCK_M rows, BLOCK_J units) tiles: the batch in one row tile
    up to 64 rows, so that W_hh is read from L2 once per 64 rows, and narrow unit tiles for
    more programs."""
    block_m, block_j = min(64, max(16, triton.next_power_of_2(rows))), 16
    kernel[(triton.cdiv(rows, block_m), triton.cdiv(hidden, block_j))](
        *args, BLOCK_M=block_m, BLOCK_J=block_j, BLOCK_K=BLOCK_K, **constants)



@triton.jit
def _tile(rows, hidden, BLOCK_M: tl.constexpr, BLOCK_J: tl.constexpr):
    """This program's tile: its rows and units (int64), which are in range, and both."""
    r = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    j = (tl.program_id(1) * BLOCK_J + tl.arange(0, BLOCK_J)).to(tl.int64)
    row_in, col_in = r < rows, j < hidden
    return r, j, row_in, col_in, row_in[:, None] & col_in[None, :]


@triton.jit
def _h_rows(src_ptr, h0_ptr, r, src_rows, hidden):
    """Where each row's h_prev starts. Never in ``h``, which other programs of the launch
    overwrite: a row the last step had is its output row in ``src``; a row starting here (all
    at the first step, more in a reversed packed batch) reads the initial state ``h0``."""
    return tl.where((r < src_rows)[:, None], src_ptr, h0_ptr) + r[:, None] * hidden


@triton.jit
def _carried(next_ptr, w_ptr, dh_ptr, r, j, col_in, mask, next_rows, carry_k, hidden,
             IEEE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_J: tl.constexpr,
             BLOCK_K: tl.constexpr):
    """The tile's carried dh, in float32: for a row going on to the next step, that step's
    gradient row in ``next`` (complete from the last launch; ``carry_k`` wide, the gates'
    width, or 0 where no step follows) times W_hh's columns ``j``; for a row whose sequence
    ends here, dh_n's (``dh``, which no launch writes)."""
    carry = tl.zeros((BLOCK_M, BLOCK_J), tl.float32)
    going_on = r < next_rows
    for k0 in range(0, carry_k, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        k_in = k < carry_k
        a = tl.load(next_ptr + r[:, None] * carry_k + k[None, :],
                    mask=going_on[:, None] & k_in[None, :], other=0.0)
        w = tl.load(w_ptr + k.to(tl.int64)[:, None] * hidden + j[None, :],
                    mask=k_in[:, None] & col_in[None, :], other=0.0)
        carry += product(a, w, IEEE)
    ended = mask & (r >= next_rows)[:, None]
    return carry + tl.load(dh_ptr + r[:, None] * hidden + j[None, :], mask=ended,
                           other=0.0).to(tl.float32)


@triton.jit
def _gate_products(h_rows, w_ptr, j, row_in, col_in, hidden, GATES: tl.constexpr,
                   IEEE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_J: tl.constexpr,
                   BLOCK_K: tl.constexpr):
    """The tile's columns of h_prev W_hh^T for each of the layer's GATES (1, 3 or 4) gates,
    in float32 (zeros for the gates past GATES); h_prev's tile is loaded once for all."""
    acc_0 = tl.zeros((BLOCK_M, BLOCK_J), tl.float32)
    acc_1 = tl.zeros((BLOCK_M, BLOCK_J), tl.float32)
    acc_2 = tl.zeros((BLOCK_M, BLOCK_J), tl.float32)
    acc_3 = tl.zeros((BLOCK_M, BLOCK_J), tl.float32)
    w_0 = w_ptr + j[None, :] * hidden           # W_hh^T's columns for each gate's units
    w_1 = w_ptr + (j + hidden)[None, :] * hidden
    w_2 = w_ptr + (j + 2 * hidden)[None, :] * hidden
    w_3 = w_ptr + (j + 3 * hidden)[None, :] * hidden
    for k0 in range(0, hidden, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        k_in = k < hidden
        a = tl.load(h_rows + k[None, :], mask=row_in[:, None] & k_in[None, :], other=0.0)
        w_in = k_in[:, None] & col_in[None, :]
        acc_0 += product(a, tl.load(w_0 + k[:, None], mask=w_in, other=0.0), IEEE)
        if GATES > 1:
            acc_1 += product(a, tl.load(w_1 + k[:, None], mask=w_in, other=0.0), IEEE)
            acc_2 += product(a, tl.load(w_2 + k[:, None], mask=w_in, other=0.0), IEEE)
        if GATES > 3:
            acc_3 += product(a, tl.load(w_3 + k[:, None], mask=w_in, other=0.0), IEEE)
    return acc_0, acc_1, acc_2, acc_3


@triton.jit
def _lstm_gemm_step_kernel(src_ptr, h0_ptr, w_ptr, x_ptr, b_ptr, h_ptr, c_ptr, ws_ptr, out_ptr,
                           rows, src_rows, hidden, x_stride, ws_stride, HAS_B: tl.constexpr,
                           IEEE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_J: tl.constexpr,
                           BLOCK_K: tl.constexpr):
    # a tile of all four gates: its columns of h_prev W_hh^T summed here, then the cell
    r, j, row_in, col_in, mask = _tile(rows, hidden, BLOCK_M, BLOCK_J)
    h_rows = _h_rows(src_ptr, h0_ptr, r, src_rows, hidden)
    acc_i, acc_f, acc_g, acc_o = _gate_products(h_rows, w_ptr, j, row_in, col_in, hidden, 4,
                                                IEEE, BLOCK_M, BLOCK_J, BLOCK_K)
    x = x_ptr + r[:, None] * x_stride + j[None, :]
    b = b_ptr + j[None, :]
    b_in = col_in[None, :]
    pre_i = acc_i + gate_input(x, b, mask, b_in, HAS_B)
    pre_f = acc_f + gate_input(x + hidden, b + hidden, mask, b_in, HAS_B)
    pre_g = acc_g + gate_input(x + 2 * hidden, b + 2 * hidden, mask, b_in, HAS_B)
    pre_o = acc_o + gate_input(x + 3 * hidden, b + 3 * hidden, mask, b_in, HAS_B)
    state = r[:, None] * hidden + j[None, :]
    h_prev = tl.load(h_rows + j[None, :], mask=mask)
    lstm_cell(pre_i, pre_f, pre_g, pre_o, h_prev, c_ptr + state,
              ws_ptr + r[:, None] * ws_stride + j[None, :], out_ptr + state, h_ptr + state,
              mask, hidden)


@guarded
def lstm_gemm_step(src, src_rows, h0, w, x, b, h, c, ws, out, rows, hidden, x_stride,
                   ws_stride, ieee):
    """One LSTM step for ``rows`` sequences in one launch, its recurrent product included:
    h_prev's first ``src_rows`` rows are those of ``src`` (the last step's output), the
    others those of the initial state ``h0`` (not ``h``, which is overwritten); ``w`` is
    W_hh (4 hidden, hidden); otherwise as ``lstm_step``."""
    _on_tiles(_lstm_gemm_step_kernel, rows, hidden, src, h0, w, x, x if b is None else b, h,
              c, ws, out, rows, src_rows, hidden, x_stride, ws_stride, HAS_B=b is not None,
              IEEE=ieee)


@triton.jit
def _lstm_gemm_step_backward_kernel(dout_ptr, dh_ptr, dc_ptr, ws_ptr, dg_ptr, next_ptr, w_ptr,
                                    rows, next_rows, carry_k, hidden, ws_stride,
                                    IEEE: tl.constexpr, BLOCK_M: tl.constexpr,
                                    BLOCK_J: tl.constexpr, BLOCK_K: tl.constexpr):
    r, j, row_in, col_in, mask = _tile(rows, hidden, BLOCK_M, BLOCK_J)
    carry = _carried(next_ptr, w_ptr, dh_ptr, r, j, col_in, mask, next_rows, carry_k, hidden,
                     IEEE, BLOCK_M, BLOCK_J, BLOCK_K)
    state = r[:, None] * hidden + j[None, :]
    dh = tl.load(dout_ptr + state, mask=mask).to(tl.float32) + carry
    lstm_cell_backward(dh, dc_ptr + state, ws_ptr + r[:, None] * ws_stride + j[None, :],
                       dg_ptr + r[:, None] * 4 * hidden + j[None, :], mask, hidden)


@guarded
def lstm_gemm_step_backward(dout, dh, dc, ws, dg, following, w, rows, next_rows, hidden,
                            ws_stride, ieee):
    """Back through one LSTM step in one launch: the carried dh of its first ``next_rows``
    rows is the product of the next step's gate gradients ``following`` and W_hh ``w``,
    summed here; the other rows' is ``dh`` (read, not written); otherwise as
    ``lstm_step_backward``."""
    _on_tiles(_lstm_gemm_step_backward_kernel, rows, hidden, dout, dh, dc, ws, dg, following,
              w, rows, next_rows, 4 * hidden if next_rows else 0, hidden, ws_stride, IEEE=ieee)


@triton.jit
def _gru_gemm_step_kernel(src_ptr, h0_ptr, w_ptr, x_ptr, b_ptr, h_ptr, ws_ptr, out_ptr, rows,
                          src_rows, hidden, x_stride, ws_stride, HAS_B: tl.constexpr,
                          IEEE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_J: tl.constexpr,
                          BLOCK_K: tl.constexpr):
    # as _lstm_gemm_step_kernel, with three gates
    r, j, row_in, col_in, mask = _tile(rows, hidden, BLOCK_M, BLOCK_J)
    h_rows = _h_rows(src_ptr, h0_ptr, r, src_rows, hidden)
    acc_r, acc_z, acc_n, _ = _gate_products(h_rows, w_ptr, j, row_in, col_in, hidden, 3, IEEE,
                                            BLOCK_M, BLOCK_J, BLOCK_K)
    x = x_ptr + r[:, None] * x_stride + j[None, :]
    b = b_ptr + j[None, :]
    b_in = col_in[None, :]
    pre_r = acc_r + gate_input(x, b, mask, b_in, HAS_B)
    pre_z = acc_z + gate_input(x + hidden, b + hidden, mask, b_in, HAS_B)
    hn = acc_n
    if HAS_B:
        hn += tl.load(b + 2 * hidden, mask=b_in).to(tl.float32)
    x_n = tl.load(x + 2 * hidden, mask=mask).to(tl.float32)
    state = r[:, None] * hidden + j[None, :]
    h_prev = tl.load(h_rows + j[None, :], mask=mask)
    gru_cell(pre_r, pre_z, x_n, hn, h_prev, ws_ptr + r[:, None] * ws_stride + j[None, :],
             out_ptr + state, h_ptr + state, mask, hidden)


@guarded
def gru_gemm_step(src, src_rows, h0, w, x, b, h, ws, out, rows, hidden, x_stride, ws_stride,
                  ieee):
    """One GRU step in one launch, its recurrent product included; the arguments as
    ``lstm_gemm_step``'s (``w`` is W_hh, (3 hidden, hidden))."""
    _on_tiles(_gru_gemm_step_kernel, rows, hidden, src, h0, w, x, x if b is None else b, h, ws,
              out, rows, src_rows, hidden, x_stride, ws_stride, HAS_B=b is not None, IEEE=ieee)


@triton.jit
def _gru_gemm_step_backward_kernel(dout_ptr, dh_ptr, dhz_ptr, ws_ptr, dx_ptr, dgh_ptr, next_ptr,
                                   w_ptr, rows, next_rows, carry_k, hidden, ws_stride,
                                   IEEE: tl.constexpr, BLOCK_M: tl.constexpr,
                                   BLOCK_J: tl.constexpr, BLOCK_K: tl.constexpr):
    # as _lstm_gemm_step_backward_kernel; the carried gradient's z-weighted part is added
    # from ``dhz`` (this tile's own, from the last launch; zero for a row not yet seen)
    r, j, row_in, col_in, mask = _tile(rows, hidden, BLOCK_M, BLOCK_J)
    carry = _carried(next_ptr, w_ptr, dh_ptr, r, j, col_in, mask, next_rows, carry_k, hidden,
                     IEEE, BLOCK_M, BLOCK_J, BLOCK_K)
    state = r[:, None] * hidden + j[None, :]
    dh = tl.load(dout_ptr + state, mask=mask).to(tl.float32) + carry + \
        tl.load(dhz_ptr + state, mask=mask).to(tl.float32)
    row3 = r[:, None] * 3 * hidden + j[None, :]
    gru_cell_backward(dh, ws_ptr + r[:, None] * ws_stride + j[None, :], dx_ptr + row3,
                      dgh_ptr + row3, dhz_ptr + state, mask, hidden)


@guarded
def gru_gemm_step_backward(dout, dh, dhz, ws, dx, dgh, following, w, rows, next_rows, hidden,
                           ws_stride, ieee):
    """Back through one GRU step in one launch: the carried gradient of its first
    ``next_rows`` rows is the next step's ``following`` (its ``dgh``) times W_hh ``w`` plus
    ``dhz`` (replaced by this step's), the other rows' ``dh`` (read, not written); otherwise
    as ``gru_step_backward``."""
    _on_tiles(_gru_gemm_step_backward_kernel, rows, hidden, dout, dh, dhz, ws, dx, dgh,
              following, w, rows, next_rows, 3 * hidden if next_rows else 0, hidden, ws_stride,
              IEEE=ieee)


@triton.jit
def _rnn_gemm_step_kernel(src_ptr, h0_ptr, w_ptr, x_ptr, b_ptr, h_ptr, ws_ptr, out_ptr, rows,
                          src_rows, hidden, x_stride, HAS_B: tl.constexpr, RELU: tl.constexpr,
                          IEEE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_J: tl.constexpr,
                          BLOCK_K: tl.constexpr):
    # as _lstm_gemm_step_kernel, with one gate: h = act(x + h_prev W_hh^T + b); the workspace
    # row is h_prev
    r, j, row_in, col_in, mask = _tile(rows, hidden, BLOCK_M, BLOCK_J)
    h_rows = _h_rows(src_ptr, h0_ptr, r, src_rows, hidden)
    acc, _, _, _ = _gate_products(h_rows, w_ptr, j, row_in, col_in, hidden, 1, IEEE, BLOCK_M,
                                  BLOCK_J, BLOCK_K)
    pre = acc + gate_input(x_ptr + r[:, None] * x_stride + j[None, :], b_ptr + j[None, :],
                           mask, col_in[None, :], HAS_B)
    if RELU:
        h = tl.maximum(pre, 0.0)
    else:
        h = tanh(pre)
    state = r[:, None] * hidden + j[None, :]
    kind = out_ptr.dtype.element_ty
    tl.store(ws_ptr + state, tl.load(h_rows + j[None, :], mask=mask), mask=mask)
    tl.store(out_ptr + state, h.to(kind), mask=mask)
    tl.store(h_ptr + state, h.to(kind), mask=mask)


@guarded
def rnn_gemm_step(src, src_rows, h0, w, x, b, h, ws, out, rows, hidden, x_stride, relu, ieee):
    """One Elman RNN step (tanh, or ReLU where ``relu``) in one launch, its recurrent product
    included; the arguments as ``lstm_gemm_step``'s (``w`` is W_hh, (hidden, hidden); the
    workspace rows ``ws`` get h_prev)."""
    _on_tiles(_rnn_gemm_step_kernel, rows, hidden, src, h0, w, x, x if b is None else b, h, ws,
              out, rows, src_rows, hidden, x_stride, HAS_B=b is not None, RELU=relu, IEEE=ieee)


@triton.jit
def _rnn_gemm_step_backward_kernel(dout_ptr, dh_ptr, out_ptr, dx_ptr, next_ptr, w_ptr, rows,
                                   next_rows, carry_k, hidden, RELU: tl.constexpr,
                                   IEEE: tl.constexpr, BLOCK_M: tl.constexpr,
                                   BLOCK_J: tl.constexpr, BLOCK_K: tl.constexpr):
    # as _lstm_gemm_step_backward_kernel, with one gate: dx = dh * act'(h), from the output
    r, j, row_in, col_in, mask = _tile(rows, hidden, BLOCK_M, BLOCK_J)
    carry = _carried(next_ptr, w_ptr, dh_ptr, r, j, col_in, mask, next_rows, carry_k, hidden,
                     IEEE, BLOCK_M, BLOCK_J, BLOCK_K)
    state = r[:, None] * hidden + j[None, :]
    dh = tl.load(dout_ptr + state, mask=mask).to(tl.float32) + carry
    h = tl.load(out_ptr + state, mask=mask).to(tl.float32)
    if RELU:
        d = tl.where(h > 0.0, dh, 0.0)
    else:
        d = dh * (1.0 - h * h)
    tl.store(dx_ptr + state, d.to(dx_ptr.dtype.element_ty), mask=mask)


@guarded
def rnn_gemm_step_backward(dout, dh, out, dx, following, w, rows, next_rows, hidden, relu,
                           ieee):
    """Back through one Elman RNN step in one launch: ``dx`` (the pre-activation's gradient
    rows) from the output's gradient rows ``dout``, the step's output rows ``out`` and the
    carried gradient, as ``lstm_gemm_step_backward`` sums it."""
    _on_tiles(_rnn_gemm_step_backward_kernel, rows, hidden, dout, dh, out, dx, following, w,
              rows, next_rows, hidden if next_rows else 0, hidden, RELU=relu, IEEE=ieee)
