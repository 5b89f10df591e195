"""Triton kernels over the rows of a contiguous (rows, cols) array: softmax, log_softmax,
layer norm and cross entropy, and the last two's gradients. Each launcher takes buffers as
objects with ``data_ptr()`` and ``dtype`` (``_launch.buffer`` of a CuPy array on the GPU;
the tests also pass other carriers through Triton's interpreter), computes in float32 and
stores in the output's type.
"""

import triton
import triton.language as tl

from ember.backend.cuda_kernels._launch import guarded, row_tiling

__all__ = ["softmax_rows", "softmax_backward_rows", "layer_norm_rows", "layer_norm_backward_rows",
           "rms_norm_rows", "rms_norm_backward_rows", "soft_cross_entropy_rows",
           "soft_cross_entropy_backward_rows",
           "cross_entropy_rows", "cross_entropy_backward_rows", "MAX_ROW", "PARTIAL_ROWS"]

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
def _row_max_and_sum(start, n_cols, BLOCK: tl.constexpr):
    """(m, sum of exp(x - m)) over a row of ``n_cols`` at ``start``: an online log-sum-exp
    over blocks of the row. The running maximum starts finite so that no inf - inf appears."""
    top = tl.full([], -3.0e38, tl.float32)
    total = tl.full([], 0.0, tl.float32)
    for first in range(0, n_cols, BLOCK):
        cols = first + tl.arange(0, BLOCK)
        x = tl.load(start + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        new_top = tl.maximum(top, tl.max(x, axis=0))
        total = total * tl.exp(top - new_top) + tl.sum(tl.exp(x - new_top), axis=0)
        top = new_top
    return top, total


@triton.jit
def _row_dot(start, w_ptr, n_cols, HAS_W: tl.constexpr, BLOCK: tl.constexpr):
    """The sum over a row of ``x_c``, or of ``w_c x_c`` with class weights."""
    total = tl.full([], 0.0, tl.float32)
    for first in range(0, n_cols, BLOCK):
        cols = first + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(start + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_W:
            x = x * tl.load(w_ptr + cols, mask=mask, other=0.0)
        total += tl.sum(x, axis=0)
    return total


@triton.jit
def _cross_entropy_kernel(x_ptr, t_ptr, w_ptr, w_sum_ptr, loss_ptr, n_cols, ignore_index,
                          smoothing, HAS_W: tl.constexpr, SMOOTH: tl.constexpr,
                          BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    start = x_ptr + row * n_cols
    top, total = _row_max_and_sum(start, n_cols, BLOCK)
    target = tl.load(t_ptr + row).to(tl.int64)
    ignored = target == ignore_index
    outside = (target < 0) | (target >= n_cols)     # an error the host raises later
    safe = tl.where(ignored | outside, 0, target)
    lse = top + tl.log(total)
    loss = lse - tl.load(start + safe).to(tl.float32)
    if HAS_W:
        loss = loss * tl.load(w_ptr + safe)
    if SMOOTH:      # (1 - s) w_t (lse - x_t) + s / C sum_c w_c (lse - x_c)
        if HAS_W:
            spread = lse * tl.load(w_sum_ptr) - _row_dot(start, w_ptr, n_cols, True, BLOCK)
        else:
            spread = lse * n_cols - _row_dot(start, w_ptr, n_cols, False, BLOCK)
        loss = (1.0 - smoothing) * loss + smoothing / n_cols * spread
    tl.store(loss_ptr + row, tl.where(ignored, 0.0, loss))


@guarded
def cross_entropy_rows(x, target, loss, n_rows, n_cols, ignore_index, smoothing=0.0,
                       weight=None, weight_sum=None):
    """The cross entropy of each row, in float32: ``w_t (logsumexp(x) - x_t)``, with label
    smoothing ``s`` ``(1 - s)`` times that plus ``s / n_cols`` times the sum over classes of
    ``w_c (logsumexp(x) - x_c)``; 0 where target is ignore_index. ``weight``: float32 class
    weights (None: all 1) and ``weight_sum`` their 1-element sum. A target outside
    [0, n_cols) reads column 0: the caller reports it."""
    block = min(triton.next_power_of_2(n_cols), 4096)
    _cross_entropy_kernel[(n_rows,)](
        x, target, loss if weight is None else weight,
        loss if weight_sum is None else weight_sum, loss, n_cols, int(ignore_index),
        float(smoothing), HAS_W=weight is not None, SMOOTH=smoothing > 0, BLOCK=block,
        num_warps=4 if block <= 1024 else 8)


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


@triton.jit
def _cross_entropy_backward_kernel(x_ptr, t_ptr, w_ptr, w_sum_ptr, scale_ptr, dx_ptr, n_cols,
                                   ignore_index, smoothing, HAS_W: tl.constexpr,
                                   PER_ROW: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    start = x_ptr + row * n_cols
    top, total = _row_max_and_sum(start, n_cols, BLOCK)
    target = tl.load(t_ptr + row).to(tl.int64)
    if PER_ROW:
        scale = tl.load(scale_ptr + row).to(tl.float32)
    else:
        scale = tl.load(scale_ptr).to(tl.float32)
    scale = tl.where(target == ignore_index, 0.0, scale)
    # d/dx_c = p_c ((1 - s) w_t + s W / C) - (1 - s) w_t [c == t] - s w_c / C
    if HAS_W:
        w_t = tl.load(w_ptr + tl.where((target < 0) | (target >= n_cols), 0, target))
        p_weight = (1.0 - smoothing) * w_t + smoothing * tl.load(w_sum_ptr) / n_cols
    else:
        w_t = 1.0
        p_weight = 1.0
    for first in range(0, n_cols, BLOCK):
        cols = first + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        if HAS_W:
            w_c = tl.load(w_ptr + cols, mask=mask, other=0.0)
        else:
            w_c = 1.0
        hot = tl.where(cols == target, (1.0 - smoothing) * w_t, 0.0) + smoothing / n_cols * w_c
        d = tl.exp(x - top) * (p_weight / total) - hot
        tl.store(dx_ptr + row * n_cols + cols, (d * scale).to(dx_ptr.dtype.element_ty),
                 mask=mask)


@guarded
def cross_entropy_backward_rows(x, target, scale, dx, n_rows, n_cols, ignore_index, per_row,
                                smoothing=0.0, weight=None, weight_sum=None):
    """``dx`` of ``cross_entropy_rows`` times ``scale`` (float32: one per row, or one for all
    when ``per_row`` is False); 0 where the target is ignore_index. Without weights:
    ``(softmax(x) - (1 - s) onehot(t) - s / n_cols) * scale``."""
    block = min(triton.next_power_of_2(n_cols), 4096)
    _cross_entropy_backward_kernel[(n_rows,)](
        x, target, scale if weight is None else weight,
        scale if weight_sum is None else weight_sum, scale, dx, n_cols, int(ignore_index),
        float(smoothing), HAS_W=weight is not None, PER_ROW=per_row, BLOCK=block,
        num_warps=4 if block <= 1024 else 8)


@triton.jit
def _soft_target(t_ptr, w_ptr, cols, mask, n_cols, smoothing, HAS_W: tl.constexpr):
    """A block of a row's target distribution as the loss weighs it: the probabilities
    smoothed toward uniform, times the class weights (0 past the row)."""
    q = tl.load(t_ptr + cols, mask=mask, other=0.0).to(tl.float32) * (1.0 - smoothing) \
        + smoothing / n_cols
    if HAS_W:
        q = q * tl.load(w_ptr + cols, mask=mask, other=0.0)
    return tl.where(mask, q, 0.0)


@triton.jit
def _soft_cross_entropy_kernel(x_ptr, t_ptr, w_ptr, loss_ptr, n_cols, smoothing,
                               HAS_W: tl.constexpr, BLOCK: tl.constexpr):
    # loss = sum_c q_c (logsumexp(x) - x_c) = logsumexp(x) sum_c q_c - sum_c q_c x_c, in one
    # pass: an online log-sum-exp beside the two sums
    row = tl.program_id(0).to(tl.int64)
    top = tl.full([], -3.0e38, tl.float32)
    total = tl.full([], 0.0, tl.float32)
    q_sum = tl.full([], 0.0, tl.float32)
    qx = tl.full([], 0.0, tl.float32)
    for first in range(0, n_cols, BLOCK):
        cols = first + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
        q = _soft_target(t_ptr + row * n_cols, w_ptr, cols, mask, n_cols, smoothing, HAS_W)
        new_top = tl.maximum(top, tl.max(x, axis=0))
        total = total * tl.exp(top - new_top) + tl.sum(tl.exp(x - new_top), axis=0)
        top = new_top
        q_sum += tl.sum(q, axis=0)
        qx += tl.sum(q * tl.where(mask, x, 0.0), axis=0)
    tl.store(loss_ptr + row, (top + tl.log(total)) * q_sum - qx)


@guarded
def soft_cross_entropy_rows(x, target, weight, loss, n_rows, n_cols, smoothing=0.0):
    """The cross entropy of each row of logits ``x`` with the same row of class probabilities
    ``target``, smoothed by ``smoothing`` and weighted by float32 class weights ``weight``
    (or None), into float32 ``loss``."""
    block = min(triton.next_power_of_2(n_cols), 4096)
    _soft_cross_entropy_kernel[(n_rows,)](
        x, target, loss if weight is None else weight, loss, n_cols, float(smoothing),
        HAS_W=weight is not None, BLOCK=block, num_warps=4 if block <= 1024 else 8)


@triton.jit
def _soft_cross_entropy_backward_kernel(x_ptr, t_ptr, w_ptr, scale_ptr, dx_ptr, n_cols,
                                        smoothing, HAS_W: tl.constexpr,
                                        PER_ROW: tl.constexpr, BLOCK: tl.constexpr):
    # dx_c = (softmax(x)_c sum_q - q_c) * scale: the log-sum-exp and sum_q first, then dx
    row = tl.program_id(0).to(tl.int64)
    top, total = _row_max_and_sum(x_ptr + row * n_cols, n_cols, BLOCK)
    lse = top + tl.log(total)
    q_sum = tl.full([], 0.0, tl.float32)
    for first in range(0, n_cols, BLOCK):
        cols = first + tl.arange(0, BLOCK)
        q_sum += tl.sum(_soft_target(t_ptr + row * n_cols, w_ptr, cols, cols < n_cols, n_cols,
                                     smoothing, HAS_W), axis=0)
    if PER_ROW:
        scale = tl.load(scale_ptr + row).to(tl.float32)
    else:
        scale = tl.load(scale_ptr).to(tl.float32)
    for first in range(0, n_cols, BLOCK):
        cols = first + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        q = _soft_target(t_ptr + row * n_cols, w_ptr, cols, mask, n_cols, smoothing, HAS_W)
        dx = (tl.exp(x - lse) * q_sum - q) * scale
        tl.store(dx_ptr + row * n_cols + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)


@guarded
def soft_cross_entropy_backward_rows(x, target, weight, scale, dx, n_rows, n_cols, per_row,
                                     smoothing=0.0):
    """``dx`` of ``soft_cross_entropy_rows`` times ``scale`` (float32: one per row, or one for
    all when ``per_row`` is False)."""
    block = min(triton.next_power_of_2(n_cols), 4096)
    _soft_cross_entropy_backward_kernel[(n_rows,)](
        x, target, scale if weight is None else weight, scale, dx, n_cols, float(smoothing),
        HAS_W=weight is not None, PER_ROW=per_row, BLOCK=block,
        num_warps=4 if block <= 1024 else 8)
