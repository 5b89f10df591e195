"""Depthwise 2-D convolution (groups = input channels, one input channel per group, each
feeding ``MULT`` output channels) computed tap by tap: a depthwise layer does a kernel-area
of multiply-adds per output value, too few for a GEMM to pay for an im2col matrix (the
generic path writes and reads kernel-area copies of the input for each call).

``depthwise2d`` computes the output; ``depthwise2d_input_grad`` the input's gradient (also
a depthwise transposed convolution); ``depthwise2d_weight_grad`` the weight's gradient, in
per-program partial sums the caller adds (no atomics). Inputs are contiguous (B, C, H, W),
weights (C * MULT, 1, KH, KW); ``shape`` is (B, C, H, W, O, OH, OW) and ``geometry`` (SH, SW,
PH, PW, DH, DW, KH, KW) as for ``triton_conv``. Sums are float32.
"""

import triton
import triton.language as tl

from ember.backend.cuda_kernels._launch import guarded

__all__ = ["depthwise2d", "depthwise2d_input_grad", "depthwise2d_weight_grad",
           "weight_grad_scratch"]

PROGRAMS = 1024             # programs the weight gradient aims for: several per SM


def _block(pixels):
    """Pixels per program: the plane's, rounded up to a power of two, within 64 to 1024."""
    return min(1024, max(64, triton.next_power_of_2(pixels)))


@triton.jit
def _depthwise_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C, H, W, OH, OW, MULT, SH, SW, PH, PW, DH,
                      DW, KH, KW, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    plane = tl.program_id(0).to(tl.int64)           # (b, o) output plane
    o = plane % (C * MULT)
    source = (plane // (C * MULT)) * C + o // MULT  # its (b, c) input plane
    p = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inside = p < OH * OW
    top = (p // OW) * SH - PH
    left = (p % OW) * SW - PW
    acc = tl.zeros([BLOCK], tl.float32)
    for kh in range(KH):
        ih = top + kh * DH
        row = inside & (ih >= 0) & (ih < H)
        for kw in range(KW):
            iw = left + kw * DW
            x = tl.load(x_ptr + (source * H + ih) * W + iw, mask=row & (iw >= 0) & (iw < W),
                        other=0.0)
            acc += x.to(tl.float32) * tl.load(w_ptr + (o * KH + kh) * KW + kw).to(tl.float32)
    if HAS_BIAS:
        acc += tl.load(b_ptr + o).to(tl.float32)
    tl.store(y_ptr + plane * (OH * OW) + p, acc.to(y_ptr.dtype.element_ty), mask=inside)


@guarded
def depthwise2d(x, w, bias, y, shape, geometry):
    """``y`` (B, O, OH, OW) = the depthwise convolution of ``x`` (B, C, H, W) with ``w`` (O,
    1, KH, KW), plus ``bias`` (or None)."""
    b, c, h, wd, o, oh, ow = shape
    block = _block(oh * ow)
    _depthwise_kernel[(b * o, triton.cdiv(oh * ow, block))](
        x, w, bias, y, c, h, wd, oh, ow, o // c, *geometry, HAS_BIAS=bias is not None,
        BLOCK=block)


@triton.jit
def _depthwise_input_grad_kernel(g_ptr, w_ptr, b_ptr, dx_ptr, C, H, W, OH, OW, MULT, SH, SW,
                                 PH, PW, DH, DW, KH, KW, HAS_BIAS: tl.constexpr,
                                 BLOCK: tl.constexpr):
    # each input pixel sums, over its channel's MULT outputs and the kernel's offsets, the
    # output gradient at the window that reads it through that offset, where one does
    plane = tl.program_id(0).to(tl.int64)           # (b, c) input plane
    c = plane % C
    p = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inside = p < H * W
    ih = p // W + PH
    iw = p % W + PW
    acc = tl.zeros([BLOCK], tl.float32)
    for j in range(MULT):
        o = c * MULT + j
        outputs = (plane - c) * MULT + o            # the (b, o) output plane
        for kh in range(KH):
            th = ih - kh * DH
            oh = tl.where(th >= 0, th, 0) // SH
            row = inside & (th >= 0) & (th == oh * SH) & (oh < OH)
            for kw in range(KW):
                tw = iw - kw * DW
                ow = tl.where(tw >= 0, tw, 0) // SW
                lands = row & (tw >= 0) & (tw == ow * SW) & (ow < OW)
                g = tl.load(g_ptr + (outputs * OH + oh) * OW + ow, mask=lands, other=0.0)
                acc += g.to(tl.float32) * tl.load(w_ptr + (o * KH + kh) * KW + kw).to(
                    tl.float32)
    if HAS_BIAS:
        acc += tl.load(b_ptr + c).to(tl.float32)
    tl.store(dx_ptr + plane * (H * W) + p, acc.to(dx_ptr.dtype.element_ty), mask=inside)


@guarded
def depthwise2d_input_grad(g, w, bias, dx, shape, geometry):
    """``dx`` (B, C, H, W) = the input gradient of a depthwise convolution with ``w`` (O, 1,
    KH, KW) whose output's gradient is ``g`` (B, O, OH, OW), plus ``bias`` (or None) per
    input channel: a depthwise transposed convolution."""
    b, c, h, wd, o, oh, ow = shape
    block = _block(h * wd)
    _depthwise_input_grad_kernel[(b * c, triton.cdiv(h * wd, block))](
        g, w, bias, dx, c, h, wd, oh, ow, o // c, *geometry, HAS_BIAS=bias is not None,
        BLOCK=block)


@triton.jit
def _depthwise_weight_grad_kernel(x_ptr, g_ptr, partial_ptr, B, C, H, W, OH, OW, MULT, SH,
                                  SW, PH, PW, DH, DW, KH, KW, chunk, TAPS: tl.constexpr,
                                  BLOCK: tl.constexpr):
    # program (o, split): for each kernel offset, the sum over the split's (b, output pixel)
    # positions of the output gradient times the input it read through that offset
    o = tl.program_id(0)
    split = tl.program_id(1)
    pixels = OH * OW
    end = tl.minimum((split + 1).to(tl.int64) * chunk, B * pixels)
    tap = tl.arange(0, TAPS)
    dh = (tap // KW) * DH
    dw = (tap % KW) * DW
    acc = tl.zeros([BLOCK, TAPS], tl.float32)
    for start in range(split.to(tl.int64) * chunk, end, BLOCK):
        j = start + tl.arange(0, BLOCK)
        b = j // pixels
        p = j % pixels
        g = tl.load(g_ptr + (b * (C * MULT) + o) * pixels + p, mask=j < end, other=0.0)
        ih = ((p // OW) * SH - PH)[:, None] + dh[None, :]
        iw = ((p % OW) * SW - PW)[:, None] + dw[None, :]
        reads = ((j < end)[:, None] & (tap < KH * KW)[None, :] & (ih >= 0) & (ih < H)
                 & (iw >= 0) & (iw < W))
        source = (b * C + o // MULT)[:, None]
        x = tl.load(x_ptr + (source * H + ih) * W + iw, mask=reads, other=0.0)
        acc += g.to(tl.float32)[:, None] * x.to(tl.float32)
    at = partial_ptr + (o.to(tl.int64) * tl.num_programs(1) + split) * TAPS + tap
    tl.store(at, tl.sum(acc, axis=0))


def weight_grad_scratch(shape, geometry):
    """(splits, taps): the weight gradient's partial sums are (O, splits, taps) float32,
    of which the caller adds the splits and keeps the first KH * KW taps."""
    b, c, h, wd, o, oh, ow = shape
    taps = triton.next_power_of_2(geometry[-2] * geometry[-1])
    return _weight_grad_split(b * oh * ow, o, taps)[0], taps


def _weight_grad_split(positions, channels, taps):
    """(splits, positions per split, block) of the weight gradient's reduction."""
    block = max(16, 4096 // taps)
    splits = max(1, min(triton.cdiv(positions, block), triton.cdiv(PROGRAMS, channels)))
    chunk = triton.cdiv(triton.cdiv(positions, splits), block) * block
    return triton.cdiv(positions, chunk), chunk, block


@guarded
def depthwise2d_weight_grad(x, g, partial, shape, geometry):
    """``partial`` (O, splits, taps) float32 (``weight_grad_scratch``) = the weight
    gradient of the depthwise convolution of ``x`` (B, C, H, W) whose output's gradient is
    ``g`` (B, O, OH, OW), summed over each split of the (b, output pixel) positions."""
    b, c, h, wd, o, oh, ow = shape
    taps = triton.next_power_of_2(geometry[-2] * geometry[-1])
    splits, chunk, block = _weight_grad_split(b * oh * ow, o, taps)
    _depthwise_weight_grad_kernel[(o, splits)](
        x, g, partial, b, c, h, wd, oh, ow, o // c, *geometry, chunk, TAPS=taps, BLOCK=block)
