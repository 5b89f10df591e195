"""Batch normalization's per-channel Triton kernels over contiguous (N, C, L) buffers.

Forward (training): each channel's N*L values are split among programs, which merge their
tiles' means and squared deviations (Chan's pairwise update, exact where sums of squares
cancel); one program per channel then merges its splits into the mean and 1/sqrt(var + eps)
and updates the running statistics in place; a third pass normalizes, scales and shifts.
Backward: per-channel sums of g and g * (x - mean) the same way, then the input gradient
``g*A + (x - mean)*B + C`` (NOTE [Fused normalization backward]) in one pass. Sums are float32
and are taken in a fixed order: no atomics, so results repeat to the bit.
"""

import triton
import triton.language as tl

from ember.backend.cuda_kernels._launch import guarded

__all__ = ["statistics", "normalize", "backward", "scratch_size", "BLOCK"]

BLOCK = 1024
PROGRAMS = 1024             # programs a channel reduction aims for: several per SM


def _splits(channels, per_channel):
    """(splits per channel, elements per split): about PROGRAMS programs, each a whole
    number of blocks, none of them empty."""
    splits = max(1, min(triton.cdiv(per_channel, BLOCK), triton.cdiv(PROGRAMS, channels)))
    chunk = triton.cdiv(triton.cdiv(per_channel, splits), BLOCK) * BLOCK
    return triton.cdiv(per_channel, chunk), chunk


@triton.jit
def _split_range(per_channel, chunk):
    """This program's channel, its split, and the first and end positions of the split
    among the channel's N*L values (64-bit)."""
    first = tl.program_id(1).to(tl.int64) * chunk
    return tl.program_id(0), tl.program_id(1), first, tl.minimum(first + chunk, per_channel)


@triton.jit
def _addresses(c, j, channels, lanes):
    """Element offsets of positions ``j`` (n * L + l) of channel ``c``."""
    return ((j // lanes) * channels + c) * lanes + j % lanes


@triton.jit
def _statistics_kernel(x_ptr, partial_ptr, channels, lanes, per_channel, chunk,
                       BLOCK: tl.constexpr):
    c, split, first, end = _split_range(per_channel, chunk)
    count = tl.full([], 0.0, tl.float32)
    mean = tl.full([], 0.0, tl.float32)
    m2 = tl.full([], 0.0, tl.float32)
    for start in range(first, end, BLOCK):
        j = start + tl.arange(0, BLOCK)
        mask = j < end
        x = tl.load(x_ptr + _addresses(c, j, channels, lanes), mask=mask,
                    other=0.0).to(tl.float32)
        n = tl.minimum(end - start, BLOCK).to(tl.float32)
        tile_mean = tl.sum(x, axis=0) / n
        d = tl.where(mask, x - tile_mean, 0.0)
        total = count + n
        delta = tile_mean - mean
        mean += delta * (n / total)
        m2 += tl.sum(d * d, axis=0) + delta * delta * (count * n / total)
        count = total
    at = partial_ptr + (c * tl.num_programs(1) + split) * 3
    tl.store(at, count)
    tl.store(at + 1, mean)
    tl.store(at + 2, m2)


@triton.jit
def _statistics_finish_kernel(partial_ptr, mean_ptr, invstd_ptr, rm_ptr, rv_ptr, splits, eps,
                              momentum, unbias, RUNNING: tl.constexpr, SPLITS: tl.constexpr):
    c = tl.program_id(0)
    s = tl.arange(0, SPLITS)
    mask = s < splits
    at = partial_ptr + (c * splits + s) * 3
    counts = tl.load(at, mask=mask, other=0.0)
    means = tl.load(at + 1, mask=mask, other=0.0)
    n = tl.sum(counts, axis=0)
    mean = tl.sum(counts * means, axis=0) / n
    d = means - mean
    var = (tl.sum(tl.load(at + 2, mask=mask, other=0.0), axis=0)
           + tl.sum(counts * d * d, axis=0)) / n
    tl.store(mean_ptr + c, mean)
    tl.store(invstd_ptr + c, 1.0 / tl.sqrt(var + eps))
    if RUNNING:
        rm = tl.load(rm_ptr + c).to(tl.float32)
        rv = tl.load(rv_ptr + c).to(tl.float32)
        tl.store(rm_ptr + c, (rm * (1.0 - momentum) + momentum * mean).to(
            rm_ptr.dtype.element_ty))
        tl.store(rv_ptr + c, (rv * (1.0 - momentum) + momentum * unbias * var).to(
            rv_ptr.dtype.element_ty))


@guarded
def statistics(x, partial, mean, invstd, running_mean, running_var, shape, eps, momentum):
    """Each channel's mean and 1/sqrt(biased var + eps) of an (N, C, L) ``shape`` buffer
    into float32 ``mean`` and ``invstd`` (C,); the running statistics (both or neither
    None) move ``momentum`` of the way to the mean and the unbiased variance. ``partial``
    holds ``scratch_size(shape)`` float32 values."""
    batch, channels, lanes = shape
    per_channel = batch * lanes
    splits, chunk = _splits(channels, per_channel)
    _statistics_kernel[(channels, splits)](x, partial, channels, lanes, per_channel, chunk,
                                           BLOCK=BLOCK)
    running = running_mean is not None
    _statistics_finish_kernel[(channels,)](
        partial, mean, invstd, running_mean if running else mean,
        running_var if running else invstd, splits, float(eps), float(momentum),
        per_channel / max(per_channel - 1, 1), RUNNING=running,
        SPLITS=triton.next_power_of_2(splits))


def scratch_size(shape):
    """How many float32 partial sums the reductions of an (N, C, L) buffer take."""
    batch, channels, lanes = shape
    return channels * _splits(channels, batch * lanes)[0] * 3


@triton.jit
def _normalize_kernel(x_ptr, y_ptr, mean_ptr, scale_ptr, w_ptr, b_ptr, n, channels, lanes, eps,
                      FROM_VAR: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                      BLOCK: tl.constexpr):
    at = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = at < n
    c = (at // lanes) % channels
    scale = tl.load(scale_ptr + c, mask=mask, other=1.0).to(tl.float32)
    if FROM_VAR:
        scale = 1.0 / tl.sqrt(scale + eps)
    if HAS_W:
        scale *= tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
    x = tl.load(x_ptr + at, mask=mask, other=0.0).to(tl.float32)
    y = (x - tl.load(mean_ptr + c, mask=mask, other=0.0).to(tl.float32)) * scale
    if HAS_B:
        y += tl.load(b_ptr + c, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + at, y.to(y_ptr.dtype.element_ty), mask=mask)


@guarded
def normalize(x, y, mean, scale, weight, bias, shape, eps=None):
    """``y = (x - mean) * scale * weight + bias`` per channel of an (N, C, L) ``shape``
    buffer (weight and bias may be None). With ``eps``, ``scale`` holds variances, and
    1/sqrt(var + eps) scales."""
    batch, channels, lanes = shape
    n = batch * channels * lanes
    _normalize_kernel[(triton.cdiv(n, BLOCK),)](
        x, y, mean, scale, x if weight is None else weight, x if bias is None else bias, n,
        channels, lanes, 0.0 if eps is None else float(eps), FROM_VAR=eps is not None,
        HAS_W=weight is not None, HAS_B=bias is not None, BLOCK=BLOCK)


@triton.jit
def _gradient_sums_kernel(g_ptr, x_ptr, mean_ptr, partial_ptr, channels, lanes, per_channel,
                          chunk, BLOCK: tl.constexpr):
    c, split, first, end = _split_range(per_channel, chunk)
    mean = tl.load(mean_ptr + c).to(tl.float32)
    sum_g = tl.zeros([BLOCK], tl.float32)
    sum_gx = tl.zeros([BLOCK], tl.float32)
    for start in range(first, end, BLOCK):
        j = start + tl.arange(0, BLOCK)
        mask = j < end
        at = _addresses(c, j, channels, lanes)
        g = tl.load(g_ptr + at, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + at, mask=mask, other=0.0).to(tl.float32)
        sum_g += g
        sum_gx += g * (x - mean)
    at = partial_ptr + (c * tl.num_programs(1) + split) * 2
    tl.store(at, tl.sum(sum_g, axis=0))
    tl.store(at + 1, tl.sum(sum_gx, axis=0))


@triton.jit
def _gradient_finish_kernel(partial_ptr, invstd_ptr, w_ptr, coef_ptr, gw_ptr, gb_ptr, splits,
                            channels, per_channel, eps, FROM_VAR: tl.constexpr,
                            TRAINING: tl.constexpr, HAS_W: tl.constexpr, SPLITS: tl.constexpr):
    c = tl.program_id(0)
    s = tl.arange(0, SPLITS)
    at = partial_ptr + (c * splits + s) * 2
    sum_g = tl.sum(tl.load(at, mask=s < splits, other=0.0), axis=0)
    sum_gx = tl.sum(tl.load(at + 1, mask=s < splits, other=0.0), axis=0)
    invstd = tl.load(invstd_ptr + c).to(tl.float32)
    if FROM_VAR:
        invstd = 1.0 / tl.sqrt(invstd + eps)
    a = invstd
    if HAS_W:
        a = invstd * tl.load(w_ptr + c).to(tl.float32)
    tl.store(coef_ptr + c, a)
    if TRAINING:        # NOTE [Fused normalization backward], the weight folded into A, B, C
        tl.store(coef_ptr + channels + c, -a * invstd * invstd * sum_gx / per_channel)
        tl.store(coef_ptr + 2 * channels + c, -a * sum_g / per_channel)
    tl.store(gw_ptr + c, sum_gx * invstd)
    tl.store(gb_ptr + c, sum_g)


@triton.jit
def _input_gradient_kernel(g_ptr, x_ptr, mean_ptr, coef_ptr, gx_ptr, n, channels, lanes,
                           TRAINING: tl.constexpr, BLOCK: tl.constexpr):
    at = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = at < n
    c = (at // lanes) % channels
    g = tl.load(g_ptr + at, mask=mask, other=0.0).to(tl.float32)
    gx = g * tl.load(coef_ptr + c, mask=mask, other=0.0)
    if TRAINING:
        x = tl.load(x_ptr + at, mask=mask, other=0.0).to(tl.float32)
        centered = x - tl.load(mean_ptr + c, mask=mask, other=0.0).to(tl.float32)
        gx += centered * tl.load(coef_ptr + channels + c, mask=mask, other=0.0)
        gx += tl.load(coef_ptr + 2 * channels + c, mask=mask, other=0.0)
    tl.store(gx_ptr + at, gx.to(gx_ptr.dtype.element_ty), mask=mask)


@guarded
def backward(g, x, mean, invstd, weight, partial, coef, grad_weight, grad_bias, grad_input,
             shape, training, eps=None):
    """Batch norm's gradients from the output's gradient ``g`` of an (N, C, L) ``shape``
    buffer ``x`` normalized by per-channel ``mean`` and ``invstd`` (with ``eps``: variances,
    as in evaluation): the weight's and bias's into float32 (C,) buffers, and the input's
    into ``grad_input`` unless None. ``training`` counts the statistics' own dependence on
    ``x``. Scratch: ``partial`` (``scratch_size(shape)``) and ``coef`` (3 * C) float32."""
    batch, channels, lanes = shape
    per_channel = batch * lanes
    splits, chunk = _splits(channels, per_channel)
    _gradient_sums_kernel[(channels, splits)](g, x, mean, partial, channels, lanes,
                                              per_channel, chunk, BLOCK=BLOCK)
    _gradient_finish_kernel[(channels,)](
        partial, invstd, invstd if weight is None else weight, coef, grad_weight, grad_bias,
        splits, channels, per_channel, 0.0 if eps is None else float(eps),
        FROM_VAR=eps is not None, TRAINING=training, HAS_W=weight is not None,
        SPLITS=triton.next_power_of_2(splits))
    if grad_input is not None:
        n = per_channel * channels
        _input_gradient_kernel[(triton.cdiv(n, BLOCK),)](
            g, x, mean, coef, grad_input, n, channels, lanes, TRAINING=training, BLOCK=BLOCK)
