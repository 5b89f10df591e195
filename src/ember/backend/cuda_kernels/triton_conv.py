"""2-D convolution as an implicit GEMM: the product of the im2col matrix (one row per output
pixel, one column per (channel, kernel row, kernel column)) with the weight, each tile of the
matrix read from the input where it is needed and never written out. im2col + cuBLAS writes
and reads that matrix, kernel-area times the input's size, for each call.

``conv2d`` computes the output; ``conv2d_input_grad`` the input's gradient (a transposed
convolution); ``conv2d_weight_grad`` the weight's gradient, split over the output pixels into
partial sums that the caller adds (no atomics: the sum is deterministic).
Inputs are contiguous (B, C, H, W), weights (OC, C, KH, KW), one group. Launchers take buffers
as objects with ``data_ptr()`` and ``dtype``; products sum in float32.
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
def _patches(x_ptr, m, k, M, K, C, H, W, OH, OW, SH, SW, PH, PW, DH, DW, KH, KW):
    """Rows ``m`` and columns ``k`` of the im2col matrix (zeros outside the input, past M
    rows and past K columns)."""
    pixels = OH * OW
    b = m // pixels
    p = m % pixels
    c = k // (KH * KW)
    r = k % (KH * KW)
    ih = ((p // OW) * SH - PH)[:, None] + ((r // KW) * DH)[None, :]
    iw = ((p % OW) * SW - PW)[:, None] + ((r % KW) * DW)[None, :]
    inside = ((m[:, None] < M) & (k[None, :] < K) & (ih >= 0) & (ih < H) & (iw >= 0)
              & (iw < W))
    plane = (b.to(tl.int64) * C)[:, None] + c[None, :]
    return tl.load(x_ptr + (plane * H + ih) * W + iw, mask=inside, other=0.0)


@triton.jit
def _conv2d_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, OC, K, C, H, W, OH, OW, SH, SW, PH, PW, DH,
                   DW, KH, KW, HAS_BIAS: tl.constexpr, IEEE: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    o = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        a = _patches(x_ptr, m, k, M, K, C, H, W, OH, OW, SH, SW, PH, PW, DH, DW, KH, KW)
        w = tl.load(w_ptr + o[None, :].to(tl.int64) * K + k[:, None],
                    mask=(k[:, None] < K) & (o[None, :] < OC), other=0.0)
        acc += product(a, w, IEEE)
    if HAS_BIAS:
        acc += tl.load(b_ptr + o, mask=o < OC, other=0.0).to(tl.float32)[None, :]
    pixels = OH * OW
    plane = ((m // pixels).to(tl.int64) * OC)[:, None] + o[None, :]
    tl.store(y_ptr + plane * pixels + (m % pixels)[:, None], acc.to(y_ptr.dtype.element_ty),
             mask=(m[:, None] < M) & (o[None, :] < OC))


@guarded
def conv2d(x, w, bias, y, shape, geometry, ieee):
    """``y`` (B, OC, OH, OW) = the convolution of ``x`` (B, C, H, W) with ``w`` (OC, C, KH, KW)
    plus ``bias`` (or None); ``shape`` is (B, C, H, W, OC, OH, OW), ``geometry`` (SH, SW, PH,
    PW, DH, DW, KH, KW); ``ieee``: float32 products in full precision, not TF32."""
    b, c, h, wd, o, oh, ow = shape
    kh, kw = geometry[-2:]
    m, k = b * oh * ow, c * kh * kw
    block_m, block_n = tiles(o)
    grid = (triton.cdiv(m, block_m), triton.cdiv(o, block_n))
    _conv2d_kernel[grid](x, w, bias, y, m, o, k, c, h, wd, oh, ow, *geometry,
                         HAS_BIAS=bias is not None, IEEE=bool(ieee), BLOCK_M=block_m,
                         BLOCK_N=block_n, BLOCK_K=BLOCK_K)


@triton.jit
def _conv2d_input_grad_kernel(g_ptr, w_ptr, b_ptr, dx_ptr, M, C, K, OC, H, W, OH, OW, SH, SW,
                              PH, PW, DH, DW, KH, KW, HAS_BIAS: tl.constexpr,
                              IEEE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                              BLOCK_K: tl.constexpr):
    # rows: input pixels (b, ih, iw); columns: input channels; reduced: (output channel,
    # kernel offset), each term the output gradient at the window position that reads this
    # pixel through that offset, where there is one (with a stride, only some offsets land)
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    c = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    pixels = H * W
    b = m // pixels
    ih = (m % pixels) // W + PH
    iw = (m % pixels) % W + PW
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        o = k // (KH * KW)
        r = k % (KH * KW)
        th = ih[:, None] - ((r // KW) * DH)[None, :]
        tw = iw[:, None] - ((r % KW) * DW)[None, :]
        oh = th // SH
        ow = tw // SW
        lands = ((m[:, None] < M) & (k[None, :] < K) & (th >= 0) & (tw >= 0)
                 & (th - oh * SH == 0) & (tw - ow * SW == 0) & (oh < OH) & (ow < OW))
        plane = (b.to(tl.int64) * OC)[:, None] + o[None, :]
        a = tl.load(g_ptr + (plane * OH + oh) * OW + ow, mask=lands, other=0.0)
        w = tl.load(w_ptr + (o[:, None].to(tl.int64) * C + c[None, :]) * (KH * KW) + r[:, None],
                    mask=(k[:, None] < K) & (c[None, :] < C), other=0.0)
        acc += product(a, w, IEEE)
    if HAS_BIAS:
        acc += tl.load(b_ptr + c, mask=c < C, other=0.0).to(tl.float32)[None, :]
    plane = (b.to(tl.int64) * C)[:, None] + c[None, :]
    tl.store(dx_ptr + plane * pixels + (m % pixels)[:, None], acc.to(dx_ptr.dtype.element_ty),
             mask=(m[:, None] < M) & (c[None, :] < C))


@guarded
def conv2d_input_grad(g, w, bias, dx, shape, geometry, ieee):
    """``dx`` (B, C, H, W) = the input gradient of a convolution with ``w`` (OC, C, KH, KW)
    whose output's gradient is ``g`` (B, OC, OH, OW), plus ``bias`` (or None): a transposed
    convolution. ``shape`` and ``geometry`` as for ``conv2d``."""
    b, c, h, wd, o, oh, ow = shape
    kh, kw = geometry[-2:]
    m, k = b * h * wd, o * kh * kw
    block_m, block_n = tiles(c)
    grid = (triton.cdiv(m, block_m), triton.cdiv(c, block_n))
    _conv2d_input_grad_kernel[grid](g, w, bias, dx, m, c, k, o, h, wd, oh, ow, *geometry,
                                    HAS_BIAS=bias is not None, IEEE=bool(ieee),
                                    BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=BLOCK_K)


@triton.jit
def _conv2d_weight_grad_kernel(x_ptr, g_ptr, dw_ptr, M, OC, K, C, H, W, OH, OW, SH, SW, PH, PW,
                               DH, DW, KH, KW, rows_per_split, IEEE: tl.constexpr,
                               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                               BLOCK_K: tl.constexpr):
    o = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    k = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    split = tl.program_id(2)
    start = split * rows_per_split
    end = tl.minimum(start + rows_per_split, M)
    pixels = OH * OW
    acc = tl.zeros((BLOCK_N, BLOCK_K), tl.float32)
    for m0 in range(start, end, BLOCK_M):
        m = m0 + tl.arange(0, BLOCK_M)
        a = _patches(x_ptr, m, k, end, K, C, H, W, OH, OW, SH, SW, PH, PW, DH, DW, KH, KW)
        plane = ((m // pixels).to(tl.int64) * OC)[:, None] + o[None, :]
        g = tl.load(g_ptr + plane * pixels + (m % pixels)[:, None],
                    mask=(m[:, None] < end) & (o[None, :] < OC), other=0.0)
        acc += product(tl.trans(g), a, IEEE)
    at = (split.to(tl.int64) * OC + o[:, None]) * K + k[None, :]
    tl.store(dw_ptr + at, acc, mask=(o[:, None] < OC) & (k[None, :] < K))


_GRAD_ROWS = 64         # output pixels the weight gradient reduces per step


def weight_grad_splits(m, o, k, programs=528):
    """(splits, rows per split) of the weight gradient's M output-pixel rows: enough splits
    that about ``programs`` programs run (4 per SM of an H100/H200), none of them empty."""
    per_split = triton.cdiv(o, tiles(o)[1]) * triton.cdiv(k, BLOCK_K)
    splits = max(1, min(triton.cdiv(programs, per_split), triton.cdiv(m, _GRAD_ROWS)))
    rows = triton.cdiv(triton.cdiv(m, splits), _GRAD_ROWS) * _GRAD_ROWS
    return triton.cdiv(m, rows), rows


@guarded
def conv2d_weight_grad(x, g, partial, shape, geometry, splits, rows, ieee):
    """``partial`` (splits, O, C*KH*KW) float32 = the weight gradient of the convolution of
    ``x`` (B, C, H, W) whose output's gradient is ``g`` (B, OC, OH, OW), summed over each
    split's ``rows`` output pixels; the caller adds the splits. ``shape`` and ``geometry`` as
    for ``conv2d``."""
    b, c, h, wd, o, oh, ow = shape
    kh, kw = geometry[-2:]
    m, k = b * oh * ow, c * kh * kw
    block_n = tiles(o)[1]
    grid = (triton.cdiv(o, block_n), triton.cdiv(k, BLOCK_K), splits)
    _conv2d_weight_grad_kernel[grid](x, g, partial, m, o, k, c, h, wd, oh, ow, *geometry, rows,
                                     IEEE=bool(ieee), BLOCK_M=_GRAD_ROWS, BLOCK_N=block_n,
                                     BLOCK_K=BLOCK_K)
