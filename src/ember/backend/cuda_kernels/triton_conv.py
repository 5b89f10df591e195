"""Convolution as an implicit GEMM: the product of the im2col matrix (one row per output
pixel, one column per (channel, kernel offset)) with the weight, each tile of the matrix read
from the input where it is needed and never written out. im2col + cuBLAS writes and reads
that matrix, kernel-volume times the input's size, for each call.

The kernels work on volumes: (B, C, D, H, W) inputs, (OC, C / G, KD, KH, KW) weights for G
groups; a 2-D convolution is a 3-D one of depth 1 (and a 1-D one of height 1 too). Each group
is its own GEMM on its slice of the channels (a program's tile stays inside one group).
``conv3d`` computes the output; ``conv3d_input_grad`` the input's gradient (a transposed
convolution); ``conv3d_weight_grad`` the weight's gradient, split over the output pixels
into partial sums that the caller adds (no atomics: the sum is deterministic).

``shape`` is (B, C, D, H, W, OC, OD, OH, OW) and ``geometry`` (SD, SH, SW, PD, PH, PW, DD,
DH, DW, KD, KH, KW): strides, leading paddings, dilations and kernel sizes. Launchers take
buffers as objects with ``data_ptr()`` and ``dtype``; products sum in float32.
"""

import triton
import triton.language as tl

from ember.backend.cuda_kernels._launch import guarded, product

__all__ = ["conv3d", "conv3d_input_grad", "conv3d_weight_grad", "weight_grad_splits",
           "tiles", "BLOCK_K"]

BLOCK_K = 32            # reduced (channel, kernel offset) columns per step


def tiles(channels):
    """(output pixels, output channels) of a program's tile: as many channels as there are, up
    to 128, and 8192 products in all (a first choice, to tune on a GPU)."""
    n = min(128, max(32, triton.next_power_of_2(channels)))
    return 8192 // n, n


@triton.jit
def _split3(i, H, W):
    """(depth, row, column) of flat positions ``i`` of (., H, W) volumes."""
    return i // (H * W), (i // W) % H, i % W


@triton.jit
def _patches(x_ptr, m, k, M, K, C, D, H, W, OD, OH, OW, SD, SH, SW, PD, PH, PW, DD, DH, DW,
             KD, KH, KW, c0):
    """Rows ``m`` and columns ``k`` of the im2col matrix of the channels from ``c0`` on
    (zeros outside the input, past M rows and past K columns)."""
    pixels = OD * OH * OW
    b = m // pixels
    od, oh, ow = _split3(m % pixels, OH, OW)
    c = k // (KD * KH * KW)
    kd, kh, kw = _split3(k % (KD * KH * KW), KH, KW)
    iz = (od * SD - PD)[:, None] + (kd * DD)[None, :]
    ih = (oh * SH - PH)[:, None] + (kh * DH)[None, :]
    iw = (ow * SW - PW)[:, None] + (kw * DW)[None, :]
    inside = ((m[:, None] < M) & (k[None, :] < K) & (iz >= 0) & (iz < D) & (ih >= 0)
              & (ih < H) & (iw >= 0) & (iw < W))
    plane = (b.to(tl.int64) * C + c0)[:, None] + c[None, :]
    return tl.load(x_ptr + ((plane * D + iz) * H + ih) * W + iw, mask=inside, other=0.0)


@triton.jit
def _group_tile(tile, count, BLOCK: tl.constexpr):
    """(group, the tile's indices within the group's ``count`` channels) of a program
    ``tile`` of those numbering the groups' tiles in turn."""
    per_group = tl.cdiv(count, BLOCK)
    return tile // per_group, (tile % per_group) * BLOCK + tl.arange(0, BLOCK)


@triton.jit
def _conv3d_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, OC, K, C, D, H, W, OD, OH, OW, SD, SH, SW,
                   PD, PH, PW, DD, DH, DW, KD, KH, KW, G, HAS_BIAS: tl.constexpr,
                   IEEE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr):
    # K = (C / G) KD KH KW: the columns of one group's im2col matrix
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    g, o_in = _group_tile(tl.program_id(1), OC // G, BLOCK_N)
    o = g * (OC // G) + o_in
    kept = o_in < OC // G
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        a = _patches(x_ptr, m, k, M, K, C, D, H, W, OD, OH, OW, SD, SH, SW, PD, PH, PW, DD,
                     DH, DW, KD, KH, KW, g * (C // G))
        w = tl.load(w_ptr + o[None, :].to(tl.int64) * K + k[:, None],
                    mask=(k[:, None] < K) & kept[None, :], other=0.0)
        acc += product(a, w, IEEE)
    if HAS_BIAS:
        acc += tl.load(b_ptr + o, mask=kept, other=0.0).to(tl.float32)[None, :]
    pixels = OD * OH * OW
    plane = ((m // pixels).to(tl.int64) * OC)[:, None] + o[None, :]
    tl.store(y_ptr + plane * pixels + (m % pixels)[:, None], acc.to(y_ptr.dtype.element_ty),
             mask=(m[:, None] < M) & kept[None, :])


@guarded
def conv3d(x, w, bias, y, shape, geometry, ieee, groups=1):
    """``y`` (B, OC, OD, OH, OW) = the convolution of ``x`` (B, C, D, H, W) with ``w`` (OC, C /
    groups, KD, KH, KW) plus ``bias`` (or None); ``ieee``: float32 products in full
    precision, not TF32."""
    b, c, d, h, wd, o, od, oh, ow = shape
    m, k = b * od * oh * ow, c // groups * geometry[-3] * geometry[-2] * geometry[-1]
    block_m, block_n = tiles(o // groups)
    grid = (triton.cdiv(m, block_m), groups * triton.cdiv(o // groups, block_n))
    _conv3d_kernel[grid](x, w, bias, y, m, o, k, c, d, h, wd, od, oh, ow, *geometry, groups,
                         HAS_BIAS=bias is not None, IEEE=bool(ieee), BLOCK_M=block_m,
                         BLOCK_N=block_n, BLOCK_K=BLOCK_K)


@triton.jit
def _landing(t, S, N):
    """The output positions ``t // S`` that input offsets ``t`` reach through a stride
    ``S`` (t divisible by S, within 0..N-1), and where there is one."""
    o = tl.where(t >= 0, t, 0) // S
    return o, (t >= 0) & (t == o * S) & (o < N)


@triton.jit
def _conv3d_input_grad_kernel(g_ptr, w_ptr, b_ptr, dx_ptr, M, C, K, OC, D, H, W, OD, OH, OW,
                              SD, SH, SW, PD, PH, PW, DD, DH, DW, KD, KH, KW, G,
                              HAS_BIAS: tl.constexpr, IEEE: tl.constexpr,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                              BLOCK_K: tl.constexpr):
    # rows: input pixels (b, iz, ih, iw); columns: input channels; reduced: (output channel,
    # kernel offset), each term the output gradient at the window position that reads this
    # pixel through that offset, where there is one (with a stride, only some offsets land)
    # (K = (OC / G) KD KH KW: one group's output channels and offsets)
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    grp, c_in = _group_tile(tl.program_id(1), C // G, BLOCK_N)
    c = grp * (C // G) + c_in
    kept = c_in < C // G
    pixels = D * H * W
    b = m // pixels
    iz, ih, iw = _split3(m % pixels, H, W)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        o = grp * (OC // G) + k // (KD * KH * KW)
        r = k % (KD * KH * KW)
        kd, kh, kw = _split3(r, KH, KW)
        oz, on_z = _landing((iz + PD)[:, None] - (kd * DD)[None, :], SD, OD)
        oh, on_h = _landing((ih + PH)[:, None] - (kh * DH)[None, :], SH, OH)
        ow, on_w = _landing((iw + PW)[:, None] - (kw * DW)[None, :], SW, OW)
        lands = (m[:, None] < M) & (k[None, :] < K) & on_z & on_h & on_w
        plane = (b.to(tl.int64) * OC)[:, None] + o[None, :]
        a = tl.load(g_ptr + ((plane * OD + oz) * OH + oh) * OW + ow, mask=lands, other=0.0)
        w = tl.load(w_ptr + (o[:, None].to(tl.int64) * (C // G) + c_in[None, :])
                    * (KD * KH * KW) + r[:, None], mask=(k[:, None] < K) & kept[None, :],
                    other=0.0)
        acc += product(a, w, IEEE)
    if HAS_BIAS:
        acc += tl.load(b_ptr + c, mask=kept, other=0.0).to(tl.float32)[None, :]
    plane = (b.to(tl.int64) * C)[:, None] + c[None, :]
    tl.store(dx_ptr + plane * pixels + (m % pixels)[:, None], acc.to(dx_ptr.dtype.element_ty),
             mask=(m[:, None] < M) & kept[None, :])


@guarded
def conv3d_input_grad(g, w, bias, dx, shape, geometry, ieee, groups=1):
    """``dx`` (B, C, D, H, W) = the input gradient of a convolution with ``w`` (OC, C /
    groups, KD, KH, KW) whose output's gradient is ``g`` (B, OC, OD, OH, OW), plus ``bias``
    (or None): a transposed convolution."""
    b, c, d, h, wd, o, od, oh, ow = shape
    m, k = b * d * h * wd, o // groups * geometry[-3] * geometry[-2] * geometry[-1]
    block_m, block_n = tiles(c // groups)
    grid = (triton.cdiv(m, block_m), groups * triton.cdiv(c // groups, block_n))
    _conv3d_input_grad_kernel[grid](g, w, bias, dx, m, c, k, o, d, h, wd, od, oh, ow,
                                    *geometry, groups, HAS_BIAS=bias is not None,
                                    IEEE=bool(ieee), BLOCK_M=block_m, BLOCK_N=block_n,
                                    BLOCK_K=BLOCK_K)


@triton.jit
def _conv3d_weight_grad_kernel(x_ptr, g_ptr, dw_ptr, M, OC, K, C, D, H, W, OD, OH, OW, SD, SH,
                               SW, PD, PH, PW, DD, DH, DW, KD, KH, KW, G, rows_per_split,
                               IEEE: tl.constexpr, BLOCK_M: tl.constexpr,
                               BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # (K = (C / G) KD KH KW: the weight's columns, one group's channels and offsets)
    grp, o_in = _group_tile(tl.program_id(0), OC // G, BLOCK_N)
    o = grp * (OC // G) + o_in
    kept = o_in < OC // G
    k = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    split = tl.program_id(2)
    start = split * rows_per_split
    end = tl.minimum(start + rows_per_split, M)
    pixels = OD * OH * OW
    acc = tl.zeros((BLOCK_N, BLOCK_K), tl.float32)
    for m0 in range(start, end, BLOCK_M):
        m = m0 + tl.arange(0, BLOCK_M)
        a = _patches(x_ptr, m, k, end, K, C, D, H, W, OD, OH, OW, SD, SH, SW, PD, PH, PW, DD,
                     DH, DW, KD, KH, KW, grp * (C // G))
        plane = ((m // pixels).to(tl.int64) * OC)[:, None] + o[None, :]
        g = tl.load(g_ptr + plane * pixels + (m % pixels)[:, None],
                    mask=(m[:, None] < end) & kept[None, :], other=0.0)
        acc += product(tl.trans(g), a, IEEE)
    at = (split.to(tl.int64) * OC + o[:, None]) * K + k[None, :]
    tl.store(dw_ptr + at, acc, mask=kept[:, None] & (k[None, :] < K))


_GRAD_ROWS = 64         # output pixels the weight gradient reduces per step


def weight_grad_splits(m, o, k, programs=528, groups=1):
    """(splits, rows per split) of the weight gradient's M output-pixel rows: enough splits
    that about ``programs`` programs run (4 per SM of an H100/H200), none of them empty."""
    per_split = groups * triton.cdiv(o // groups, tiles(o // groups)[1]) \
        * triton.cdiv(k, BLOCK_K)
    splits = max(1, min(triton.cdiv(programs, per_split), triton.cdiv(m, _GRAD_ROWS)))
    rows = triton.cdiv(triton.cdiv(m, splits), _GRAD_ROWS) * _GRAD_ROWS
    return triton.cdiv(m, rows), rows


@guarded
def conv3d_weight_grad(x, g, partial, shape, geometry, splits, rows, ieee, groups=1):
    """``partial`` (splits, O, C/groups*KD*KH*KW) float32 = the weight gradient of the
    convolution of ``x`` (B, C, D, H, W) whose output's gradient is ``g`` (B, OC, OD, OH,
    OW), summed over each split's ``rows`` output pixels; the caller adds the splits."""
    b, c, d, h, wd, o, od, oh, ow = shape
    m, k = b * od * oh * ow, c // groups * geometry[-3] * geometry[-2] * geometry[-1]
    block_n = tiles(o // groups)[1]
    grid = (groups * triton.cdiv(o // groups, block_n), triton.cdiv(k, BLOCK_K), splits)
    _conv3d_weight_grad_kernel[grid](x, g, partial, m, o, k, c, d, h, wd, od, oh, ow,
                                     *geometry, groups, rows, IEEE=bool(ieee),
                                     BLOCK_M=_GRAD_ROWS, BLOCK_N=block_n, BLOCK_K=BLOCK_K)
