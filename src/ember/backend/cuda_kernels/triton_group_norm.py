"""Group normalization's Triton kernels over contiguous (N, C, L) buffers, G groups of C / G
channels (``per_group``). Each (sample, group) row of the buffer is contiguous, so its mean
and 1/sqrt(var + eps) come from batch norm's statistics kernels viewing the buffer as (1,
N*G, C/G * L); normalizing with them, and scaling and shifting per channel, is one pass
here.

The gradient takes three launches: each (sample, channel) plane's sums of g and of g times
the centered input in one pass; from them each row's coefficients B and C of NOTE [Fused
normalization backward]; then the input gradient ``g*w*invstd + (x - mean)*B + C`` in one
pass. The caller sums the planes' sums over the samples for the weight's and bias's
gradients. No atomics: the results repeat to the bit.
"""

import triton
import triton.language as tl

from ember.backend.cuda_kernels._launch import guarded

__all__ = ["normalize", "backward", "BLOCK"]

BLOCK = 1024


@triton.jit
def _position(at, C, L, PER_GROUP):
    """(channel, (sample, group) row) of flat positions ``at`` of an (N, C, L) buffer."""
    plane = at // L
    c = plane % C
    return c, (plane // C) * (C // PER_GROUP) + c // PER_GROUP


@triton.jit
def _normalize_kernel(x_ptr, y_ptr, mean_ptr, invstd_ptr, w_ptr, b_ptr, n, C, L, PER_GROUP,
                      HAS_W: tl.constexpr, HAS_B: tl.constexpr, BLOCK: tl.constexpr):
    at = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = at < n
    c, row = _position(at, C, L, PER_GROUP)
    x = tl.load(x_ptr + at, mask=mask, other=0.0).to(tl.float32)
    y = (x - tl.load(mean_ptr + row, mask=mask, other=0.0)) * tl.load(invstd_ptr + row,
                                                                       mask=mask, other=0.0)
    if HAS_W:
        y *= tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
    if HAS_B:
        y += tl.load(b_ptr + c, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + at, y.to(y_ptr.dtype.element_ty), mask=mask)


@guarded
def normalize(x, y, mean, invstd, weight, bias, shape, per_group):
    """``y = (x - mean) * invstd * weight + bias`` of an (N, C, L) ``shape`` buffer, with
    float32 ``mean`` and ``invstd`` per (sample, group) row and weight and bias (or None)
    per channel."""
    batch, channels, lanes = shape
    n = batch * channels * lanes
    _normalize_kernel[(triton.cdiv(n, BLOCK),)](
        x, y, mean, invstd, x if weight is None else weight, x if bias is None else bias, n,
        channels, lanes, per_group, HAS_W=weight is not None, HAS_B=bias is not None,
        BLOCK=BLOCK)


@triton.jit
def _plane_sums_kernel(g_ptr, x_ptr, mean_ptr, sums_ptr, C, L, PER_GROUP, BLOCK: tl.constexpr):
    plane = tl.program_id(0).to(tl.int64)           # (sample, channel)
    c, row = _position(plane * L, C, L, PER_GROUP)
    mean = tl.load(mean_ptr + row)
    sum_g = tl.zeros([BLOCK], tl.float32)
    sum_gx = tl.zeros([BLOCK], tl.float32)
    for start in range(0, L, BLOCK):
        j = start + tl.arange(0, BLOCK)
        mask = j < L
        g = tl.load(g_ptr + plane * L + j, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + plane * L + j, mask=mask, other=0.0).to(tl.float32)
        sum_g += g
        sum_gx += g * (x - mean)
    tl.store(sums_ptr + plane * 2, tl.sum(sum_g, axis=0))
    tl.store(sums_ptr + plane * 2 + 1, tl.sum(sum_gx, axis=0))


@triton.jit
def _row_coefficients_kernel(sums_ptr, w_ptr, invstd_ptr, coef_ptr, C, PER_GROUP, count,
                             HAS_W: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)             # (sample, group)
    groups = C // PER_GROUP
    first = (row // groups) * C + (row % groups) * PER_GROUP     # its first plane
    s0 = tl.zeros([BLOCK], tl.float32)
    s1 = tl.zeros([BLOCK], tl.float32)
    for start in range(0, PER_GROUP, BLOCK):
        k = start + tl.arange(0, BLOCK)
        mask = k < PER_GROUP
        a = tl.load(sums_ptr + (first + k) * 2, mask=mask, other=0.0)
        b = tl.load(sums_ptr + (first + k) * 2 + 1, mask=mask, other=0.0)
        if HAS_W:
            w = tl.load(w_ptr + (row % groups) * PER_GROUP + k, mask=mask, other=0.0).to(
                tl.float32)
            a *= w
            b *= w
        s0 += a
        s1 += b
    invstd = tl.load(invstd_ptr + row)
    # NOTE [Fused normalization backward]: B and C of g*A + (x - mean)*B + C, the weight
    # folded into the sums
    tl.store(coef_ptr + row * 2, -invstd * invstd * invstd * tl.sum(s1, axis=0) / count)
    tl.store(coef_ptr + row * 2 + 1, -invstd * tl.sum(s0, axis=0) / count)


@triton.jit
def _input_gradient_kernel(g_ptr, x_ptr, mean_ptr, invstd_ptr, w_ptr, coef_ptr, gx_ptr, n, C,
                           L, PER_GROUP, HAS_W: tl.constexpr, BLOCK: tl.constexpr):
    at = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = at < n
    c, row = _position(at, C, L, PER_GROUP)
    g = tl.load(g_ptr + at, mask=mask, other=0.0).to(tl.float32)
    if HAS_W:
        g *= tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
    x = tl.load(x_ptr + at, mask=mask, other=0.0).to(tl.float32)
    gx = g * tl.load(invstd_ptr + row, mask=mask, other=0.0)
    gx += (x - tl.load(mean_ptr + row, mask=mask, other=0.0)) * tl.load(
        coef_ptr + row * 2, mask=mask, other=0.0)
    gx += tl.load(coef_ptr + row * 2 + 1, mask=mask, other=0.0)
    tl.store(gx_ptr + at, gx.to(gx_ptr.dtype.element_ty), mask=mask)


def _block(length):
    """Lanes of a program looping over ``length`` values: 16 to BLOCK."""
    return min(BLOCK, max(16, triton.next_power_of_2(length)))


@guarded
def backward(g, x, mean, invstd, weight, sums, coef, grad_input, shape, per_group):
    """Group norm's gradients from the output's gradient ``g`` of an (N, C, L) ``shape``
    buffer ``x`` normalized by float32 ``mean`` and ``invstd`` per (sample, group) row:
    ``sums`` (N, C, 2) float32 gets each plane's sums of g and g * (x - mean), and the
    input's gradient goes into ``grad_input`` unless None. Scratch: ``coef`` (N * G * 2)."""
    batch, channels, lanes = shape
    _plane_sums_kernel[(batch * channels,)](g, x, mean, sums, channels, lanes, per_group,
                                            BLOCK=_block(lanes))
    if grad_input is None:
        return
    rows = batch * (channels // per_group)
    _row_coefficients_kernel[(rows,)](
        sums, invstd if weight is None else weight, invstd, coef, channels, per_group,
        float(per_group * lanes), HAS_W=weight is not None,
        BLOCK=_block(per_group))
    n = batch * channels * lanes
    _input_gradient_kernel[(triton.cdiv(n, BLOCK),)](
        g, x, mean, invstd, invstd if weight is None else weight, coef, grad_input, n, channels,
        lanes, per_group, HAS_W=weight is not None, BLOCK=BLOCK)
