"""Cross entropy in Triton, a row of classes per program: with class targets (class
weights, label smoothing, an ignored index) and with class probabilities (mixup's,
distillation's), each forward in one pass over the row (an online log-sum-exp beside the
sums the loss needs) and each gradient in one kernel. Launchers take buffers as objects
with ``data_ptr()`` and ``dtype`` and compute in float32."""

import triton
import triton.language as tl

from ember.backend.cuda_kernels._launch import guarded

__all__ = ["cross_entropy_rows", "cross_entropy_backward_rows", "soft_cross_entropy_rows",
           "soft_cross_entropy_backward_rows"]


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
