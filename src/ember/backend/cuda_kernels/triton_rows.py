"""Triton kernels over the rows of a contiguous (rows, cols) array: softmax, log_softmax,
layer norm and RMS norm, and their gradients (cross entropy's are in triton_losses.py).
Each launcher takes buffers as
objects with ``data_ptr()`` and ``dtype`` (``_launch.buffer`` of a CuPy array on the GPU;
the tests also pass other carriers through Triton's interpreter), computes in float32 and
stores in the output's type.
"""

import triton
import triton.language as tl

from ember.backend.cuda_kernels._launch import guarded, row_tiling

__all__ = ["softmax_rows", "softmax_backward_rows", "layer_norm_rows", "layer_norm_backward_rows",
           "rms_norm_rows", "rms_norm_backward_rows", "MAX_ROW", "PARTIAL_ROWS"]

MAX_ROW = 32768                 # longest row a program holds in registers
PARTIAL_ROWS = 512              # programs (and partial sums) of the layer norm backward


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_rows, n_cols,
                    ROWS: tl.constexpr, BLOCK: tl.constexpr, LOG: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    offsets = rows.to(tl.int64) * n_cols + cols
    x = tl.load(x_ptr + offsets, mask=mask, other=-float("inf")).to(tl.float32)
    shifted = x - tl.max(x, axis=1)[:, None]
    e = tl.exp(shifted)
    total = tl.sum(e, axis=1)[:, None]
    if LOG:
        y = shifted - tl.log(total)
    else:
        y = e / total
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


@guarded
def softmax_rows(x, y, n_rows, n_cols, log=False):
    """``y = softmax(x)`` (or ``log_softmax``) along each of ``n_rows`` rows of ``n_cols``."""
    rows, block, warps = row_tiling(n_cols)
    _softmax_kernel[(triton.cdiv(n_rows, rows),)](
        x, y, n_rows, n_cols, ROWS=rows, BLOCK=block, LOG=log, num_warps=warps)


@triton.jit
def _softmax_backward_kernel(g_ptr, y_ptr, dx_ptr, n_rows, n_cols,
                             ROWS: tl.constexpr, BLOCK: tl.constexpr, LOG: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    offsets = rows.to(tl.int64) * n_cols + cols
    g = tl.load(g_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    y = tl.load(y_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    if LOG:                             # y = log_softmax(x): dx = g - softmax * sum(g)
        dx = g - tl.exp(y) * tl.sum(g, axis=1)[:, None]
    else:                               # y = softmax(x): dx = y * (g - sum(g * y))
        dx = y * (g - tl.sum(g * y, axis=1)[:, None])
    tl.store(dx_ptr + offsets, dx.to(dx_ptr.dtype.element_ty), mask=mask)


@guarded
def softmax_backward_rows(g, y, dx, n_rows, n_cols, log=False):
    """The input gradient ``dx`` of softmax (or log_softmax) along rows, from the output's
    gradient ``g`` and the output ``y``."""
    rows, block, warps = row_tiling(n_cols)
    _softmax_backward_kernel[(triton.cdiv(n_rows, rows),)](
        g, y, dx, n_rows, n_cols, ROWS=rows, BLOCK=block, LOG=log, num_warps=warps)


@triton.jit
def _layer_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, invstd_ptr, n_rows, n_cols, eps,
                       ROWS: tl.constexpr, BLOCK: tl.constexpr,
                       HAS_W: tl.constexpr, HAS_B: tl.constexpr):
    first = tl.program_id(0) * ROWS
    row_ids = first + tl.arange(0, ROWS)
    rows = row_ids[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    col_mask = cols < n_cols
    mask = (rows < n_rows) & col_mask
    offsets = rows.to(tl.int64) * n_cols + cols
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / n_cols
    centered = tl.where(mask, x - mean[:, None], 0.0)
    var = tl.sum(centered * centered, axis=1) / n_cols
    invstd = 1.0 / tl.sqrt(var + eps)
    y = centered * invstd[:, None]
    if HAS_W:
        y = y * tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    if HAS_B:
        y = y + tl.load(b_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)
    row_mask = row_ids < n_rows
    tl.store(mean_ptr + row_ids, mean.to(mean_ptr.dtype.element_ty), mask=row_mask)
    tl.store(invstd_ptr + row_ids, invstd.to(invstd_ptr.dtype.element_ty), mask=row_mask)


@guarded
def layer_norm_rows(x, w, b, y, mean, invstd, n_rows, n_cols, eps):
    """Normalize each row of ``x`` into ``y`` (then scale by ``w`` and shift by ``b`` when not
    None), writing each row's mean and 1/sqrt(var + eps)."""
    rows, block, warps = row_tiling(n_cols)
    _layer_norm_kernel[(triton.cdiv(n_rows, rows),)](
        x, x if w is None else w, x if b is None else b, y, mean, invstd, n_rows, n_cols,
        float(eps), ROWS=rows, BLOCK=block, HAS_W=w is not None, HAS_B=b is not None,
        num_warps=warps)


@triton.jit
def _layer_norm_backward_kernel(gy_ptr, x_ptr, w_ptr, mean_ptr, invstd_ptr, gx_ptr,
                                partial_w_ptr, partial_b_ptr, n_rows, n_cols,
                                BLOCK: tl.constexpr, HAS_W: tl.constexpr,
                                NEED_GX: tl.constexpr):
    program = tl.program_id(0)
    programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    col_mask = cols < n_cols
    if HAS_W:
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    sum_w = tl.zeros([BLOCK], tl.float32)
    sum_b = tl.zeros([BLOCK], tl.float32)
    for row in range(program, n_rows, programs):
        offsets = (tl.full([], 0, tl.int64) + row) * n_cols + cols     # 64-bit offsets
        x = tl.load(x_ptr + offsets, mask=col_mask, other=0.0).to(tl.float32)
        gy = tl.load(gy_ptr + offsets, mask=col_mask, other=0.0).to(tl.float32)
        invstd = tl.load(invstd_ptr + row).to(tl.float32)
        xhat = tl.where(col_mask, (x - tl.load(mean_ptr + row).to(tl.float32)) * invstd, 0.0)
        sum_w += gy * xhat
        sum_b += gy
        if NEED_GX:
            g = gy
            if HAS_W:
                g = gy * w
            mean_g = tl.sum(g, axis=0) / n_cols
            mean_gx = tl.sum(g * xhat, axis=0) / n_cols
            gx = (g - mean_g - xhat * mean_gx) * invstd
            tl.store(gx_ptr + offsets, gx.to(gx_ptr.dtype.element_ty), mask=col_mask)
    partial = program.to(tl.int64) * n_cols + cols
    tl.store(partial_w_ptr + partial, sum_w, mask=col_mask)
    tl.store(partial_b_ptr + partial, sum_b, mask=col_mask)


@guarded
def layer_norm_backward_rows(gy, x, w, mean, invstd, gx, partial_w, partial_b, n_rows, n_cols,
                             programs):
    """The layer norm gradients of ``n_rows`` rows: the input's into ``gx`` (unless None),
    and per-program float32 partial sums of the weight's and bias's into the (programs,
    n_cols) buffers, which the caller sums."""
    block = triton.next_power_of_2(n_cols)
    _layer_norm_backward_kernel[(programs,)](
        gy, x, x if w is None else w, mean, invstd, x if gx is None else gx, partial_w,
        partial_b, n_rows, n_cols, BLOCK=block, HAS_W=w is not None, NEED_GX=gx is not None,
        num_warps=4 if block <= 2048 else 8 if block <= 8192 else 16)


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, n_rows, n_cols, eps, ROWS: tl.constexpr,
                     BLOCK: tl.constexpr, HAS_W: tl.constexpr):
    row_ids = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rows = row_ids[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    col_mask = cols < n_cols
    mask = (rows < n_rows) & col_mask
    offsets = rows.to(tl.int64) * n_cols + cols
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / n_cols + eps)
    y = x * rstd[:, None]
    if HAS_W:
        y = y * tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(rstd_ptr + row_ids, rstd, mask=row_ids < n_rows)


@guarded
def rms_norm_rows(x, w, y, rstd, n_rows, n_cols, eps):
    """Divide each row of ``x`` by its root mean square (``eps`` added to the mean square)
    into ``y``, scaled by ``w`` unless None, computing in float32 and rounding once; each
    row's float32 1/rms into ``rstd``."""
    rows, block, warps = row_tiling(n_cols)
    _rms_norm_kernel[(triton.cdiv(n_rows, rows),)](
        x, x if w is None else w, y, rstd, n_rows, n_cols, float(eps), ROWS=rows, BLOCK=block,
        HAS_W=w is not None, num_warps=warps)


@triton.jit
def _rms_norm_backward_kernel(gy_ptr, x_ptr, w_ptr, rstd_ptr, gx_ptr, partial_w_ptr, n_rows,
                              n_cols, BLOCK: tl.constexpr, HAS_W: tl.constexpr,
                              NEED_GX: tl.constexpr):
    program = tl.program_id(0)
    programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    col_mask = cols < n_cols
    if HAS_W:
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    sum_w = tl.zeros([BLOCK], tl.float32)
    for row in range(program, n_rows, programs):
        offsets = (tl.full([], 0, tl.int64) + row) * n_cols + cols     # 64-bit offsets
        rstd = tl.load(rstd_ptr + row)
        xhat = tl.load(x_ptr + offsets, mask=col_mask, other=0.0).to(tl.float32) * rstd
        gy = tl.load(gy_ptr + offsets, mask=col_mask, other=0.0).to(tl.float32)
        sum_w += gy * xhat
        if NEED_GX:         # dx = rstd (g - xhat mean(g xhat)), g the gradient reaching xhat
            g = gy
            if HAS_W:
                g = gy * w
            gx = rstd * (g - xhat * (tl.sum(g * xhat, axis=0) / n_cols))
            tl.store(gx_ptr + offsets, gx.to(gx_ptr.dtype.element_ty), mask=col_mask)
    tl.store(partial_w_ptr + program.to(tl.int64) * n_cols + cols, sum_w, mask=col_mask)


@guarded
def rms_norm_backward_rows(gy, x, w, rstd, gx, partial_w, n_rows, n_cols, programs):
    """The RMS norm gradients of ``n_rows`` rows: the input's into ``gx`` (unless None), and
    per-program float32 partial sums of the weight's into the (programs, n_cols) buffer,
    which the caller sums."""
    block = triton.next_power_of_2(n_cols)
    _rms_norm_backward_kernel[(programs,)](
        gy, x, x if w is None else w, rstd, x if gx is None else gx, partial_w, n_rows, n_cols,
        BLOCK=block, HAS_W=w is not None, NEED_GX=gx is not None,
        num_warps=4 if block <= 2048 else 8 if block <= 8192 else 16)
