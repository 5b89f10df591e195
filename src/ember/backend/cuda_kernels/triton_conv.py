"""2-D convolution as an implicit GEMM: the product of the im2col matrix (one row per output
pixel, one column per (channel, kernel row, kernel column)) with the weight, each tile of the
matrix read from the input where it is needed and never written out. im2col + cuBLAS writes
and reads that matrix, kernel-area times the input's size, for each call.

``conv2d`` computes the output; ``conv2d_input_grad`` the input's gradient (a transposed
convolution); ``conv2d_weight_grad`` the weight's gradient, split over the output pixels into
partial sums that the caller adds (no atomics: the sum is deterministic).
Inputs are contiguous (B, C, H, W), weights (OC, C / G, KH, KW) for G groups: each group is
its own GEMM, on its slice of the channels (a program's tile stays inside one group).
Launchers take buffers as objects with ``data_ptr()`` and ``dtype``; products sum in
float32.
"""

import triton
import triton.language as tl

from ember.backend.cuda_kernels._launch import guarded, product

__all__ = ["conv2d", "conv2d_input_grad", "conv2d_weight_grad", "weight_grad_splits", "tiles",
           "BLOCK_K"]

BLOCK_K = 32            # reduced (channel, kernel offset) columns per step


def tiles(channels):
    """(output pixels, output channels) of a program's tile: as many channels as there are, up
    to 128, and 8192 products in all (a first choice, to tune on a GPU)."""
    n = min(128, max(32, triton.next_power_of_2(channels)))
    return 8192 // n, n


@triton.jit
def _patches(x_ptr, m, k, M, K, C, H, W, OH, OW, SH, SW, PH, PW, DH, DW, KH, KW, c0):
    """Rows ``m`` and columns ``k`` of the im2col matrix of the channels from ``c0`` on
    (zeros outside the input, past M rows and past K columns)."""
    pixels = OH * OW
    b = m // pixels
    p = m % pixels
    c = k // (KH * KW)
    r = k % (KH * KW)
    ih = ((p // OW) * SH - PH)[:, None] + ((r // KW) * DH)[None, :]
    iw = ((p % OW) * SW - PW)[:, None] + ((r % KW) * DW)[None, :]
    inside = ((m[:, None] < M) & (k[None, :] < K) & (ih >= 0) & (ih < H) & (iw >= 0)
              & (iw < W))
    plane = (b.to(tl.int64) * C + c0)[:, None] + c[None, :]
    return tl.load(x_ptr + (plane * H + ih) * W + iw, mask=inside, other=0.0)


@triton.jit
def _group_tile(tile, count, BLOCK: tl.constexpr):
    """(group, the tile's indices within the group's ``count`` channels) of a program
    ``tile`` of those numbering the groups' tiles in turn."""
    per_group = tl.cdiv(count, BLOCK)
    return tile // per_group, (tile % per_group) * BLOCK + tl.arange(0, BLOCK)


@triton.jit
def _conv2d_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, OC, K, C, H, W, OH, OW, SH, SW, PH, PW, DH,
                   DW, KH, KW, G, HAS_BIAS: tl.constexpr, IEEE: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # K = (C / G) KH KW: the columns of one group's im2col matrix
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    g, o_in = _group_tile(tl.program_id(1), OC // G, BLOCK_N)
    o = g * (OC // G) + o_in
    kept = o_in < OC // G
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        a = _patches(x_ptr, m, k, M, K, C, H, W, OH, OW, SH, SW, PH, PW, DH, DW, KH, KW,
                     g * (C // G))
        w = tl.load(w_ptr + o[None, :].to(tl.int64) * K + k[:, None],
                    mask=(k[:, None] < K) & kept[None, :], other=0.0)
        acc += product(a, w, IEEE)
    if HAS_BIAS:
        acc += tl.load(b_ptr + o, mask=kept, other=0.0).to(tl.float32)[None, :]
    pixels = OH * OW
    plane = ((m // pixels).to(tl.int64) * OC)[:, None] + o[None, :]
    tl.store(y_ptr + plane * pixels + (m % pixels)[:, None], acc.to(y_ptr.dtype.element_ty),
             mask=(m[:, None] < M) & kept[None, :])


@guarded
def conv2d(x, w, bias, y, shape, geometry, ieee, groups=1):
    """``y`` (B, OC, OH, OW) = the convolution of ``x`` (B, C, H, W) with ``w`` (OC, C /
    groups, KH, KW) plus ``bias`` (or None); ``shape`` is (B, C, H, W, OC, OH, OW),
    ``geometry`` (SH, SW, PH, PW, DH, DW, KH, KW); ``ieee``: float32 products in full
    precision, not TF32."""
    b, c, h, wd, o, oh, ow = shape
    kh, kw = geometry[-2:]
    m, k = b * oh * ow, c // groups * kh * kw
    block_m, block_n = tiles(o // groups)
    grid = (triton.cdiv(m, block_m), groups * triton.cdiv(o // groups, block_n))
    _conv2d_kernel[grid](x, w, bias, y, m, o, k, c, h, wd, oh, ow, *geometry, groups,
                         HAS_BIAS=bias is not None, IEEE=bool(ieee), BLOCK_M=block_m,
                         BLOCK_N=block_n, BLOCK_K=BLOCK_K)


@triton.jit
def _conv2d_input_grad_kernel(g_ptr, w_ptr, b_ptr, dx_ptr, M, C, K, OC, H, W, OH, OW, SH, SW,
                              PH, PW, DH, DW, KH, KW, G, HAS_BIAS: tl.constexpr,
                              IEEE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                              BLOCK_K: tl.constexpr):
    # rows: input pixels (b, ih, iw); columns: input channels; reduced: (output channel,
    # kernel offset), each term the output gradient at the window position that reads this
    # pixel through that offset, where there is one (with a stride, only some offsets land)
    # (K = (OC / G) KH KW: one group's output channels and offsets)
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    grp, c_in = _group_tile(tl.program_id(1), C // G, BLOCK_N)
    c = grp * (C // G) + c_in
    kept = c_in < C // G
    pixels = H * W
    b = m // pixels
    ih = (m % pixels) // W + PH
    iw = (m % pixels) % W + PW
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        o = grp * (OC // G) + k // (KH * KW)
        r = k % (KH * KW)
        th = ih[:, None] - ((r // KW) * DH)[None, :]
        tw = iw[:, None] - ((r % KW) * DW)[None, :]
        oh = th // SH
        ow = tw // SW
        lands = ((m[:, None] < M) & (k[None, :] < K) & (th >= 0) & (tw >= 0)
                 & (th - oh * SH == 0) & (tw - ow * SW == 0) & (oh < OH) & (ow < OW))
        plane = (b.to(tl.int64) * OC)[:, None] + o[None, :]
        a = tl.load(g_ptr + (plane * OH + oh) * OW + ow, mask=lands, other=0.0)
        w = tl.load(w_ptr + (o[:, None].to(tl.int64) * (C // G) + c_in[None, :]) * (KH * KW)
                    + r[:, None], mask=(k[:, None] < K) & kept[None, :], other=0.0)
        acc += product(a, w, IEEE)
    if HAS_BIAS:
        acc += tl.load(b_ptr + c, mask=kept, other=0.0).to(tl.float32)[None, :]
    plane = (b.to(tl.int64) * C)[:, None] + c[None, :]
    tl.store(dx_ptr + plane * pixels + (m % pixels)[:, None], acc.to(dx_ptr.dtype.element_ty),
             mask=(m[:, None] < M) & kept[None, :])


@guarded
def conv2d_input_grad(g, w, bias, dx, shape, geometry, ieee, groups=1):
    """``dx`` (B, C, H, W) = the input gradient of a convolution with ``w`` (OC, C / groups,
    KH, KW) whose output's gradient is ``g`` (B, OC, OH, OW), plus ``bias`` (or None): a
    transposed convolution. ``shape`` and ``geometry`` as for ``conv2d``."""
    b, c, h, wd, o, oh, ow = shape
    kh, kw = geometry[-2:]
    m, k = b * h * wd, o // groups * kh * kw
    block_m, block_n = tiles(c // groups)
    grid = (triton.cdiv(m, block_m), groups * triton.cdiv(c // groups, block_n))
    _conv2d_input_grad_kernel[grid](g, w, bias, dx, m, c, k, o, h, wd, oh, ow, *geometry,
                                    groups, HAS_BIAS=bias is not None, IEEE=bool(ieee),
                                    BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=BLOCK_K)


@triton.jit
def _conv2d_weight_grad_kernel(x_ptr, g_ptr, dw_ptr, M, OC, K, C, H, W, OH, OW, SH, SW, PH, PW,
                               DH, DW, KH, KW, G, rows_per_split, IEEE: tl.constexpr,
                               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                               BLOCK_K: tl.constexpr):
    # (K = (C / G) KH KW: the weight's columns, one group's channels and offsets)
    grp, o_in = _group_tile(tl.program_id(0), OC // G, BLOCK_N)
    o = grp * (OC // G) + o_in
    kept = o_in < OC // G
    k = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    split = tl.program_id(2)
    start = split * rows_per_split
    end = tl.minimum(start + rows_per_split, M)
    pixels = OH * OW
    acc = tl.zeros((BLOCK_N, BLOCK_K), tl.float32)
    for m0 in range(start, end, BLOCK_M):
        m = m0 + tl.arange(0, BLOCK_M)
        a = _patches(x_ptr, m, k, end, K, C, H, W, OH, OW, SH, SW, PH, PW, DH, DW, KH, KW,
                     grp * (C // G))
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
    per_split = groups * triton.cdiv(o // groups, tiles(o // groups)[1]) * triton.cdiv(k, BLOCK_K)
    splits = max(1, min(triton.cdiv(programs, per_split), triton.cdiv(m, _GRAD_ROWS)))
    rows = triton.cdiv(triton.cdiv(m, splits), _GRAD_ROWS) * _GRAD_ROWS
    return triton.cdiv(m, rows), rows


@guarded
def conv2d_weight_grad(x, g, partial, shape, geometry, splits, rows, ieee, groups=1):
    """``partial`` (splits, O, C/groups*KH*KW) float32 = the weight gradient of the
    convolution of ``x`` (B, C, H, W) whose output's gradient is ``g`` (B, OC, OH, OW),
    summed over each split's ``rows`` output pixels; the caller adds the splits. ``shape``
    and ``geometry`` as for ``conv2d``."""
    b, c, h, wd, o, oh, ow = shape
    kh, kw = geometry[-2:]
    m, k = b * oh * ow, c // groups * kh * kw
    block_n = tiles(o // groups)[1]
    grid = (groups * triton.cdiv(o // groups, block_n), triton.cdiv(k, BLOCK_K), splits)
    _conv2d_weight_grad_kernel[grid](x, g, partial, m, o, k, c, h, wd, oh, ow, *geometry,
                                     groups, rows, IEEE=bool(ieee), BLOCK_M=_GRAD_ROWS,
                                     BLOCK_N=block_n, BLOCK_K=BLOCK_K)
