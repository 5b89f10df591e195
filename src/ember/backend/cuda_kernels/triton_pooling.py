"""Max and average pooling over the trailing two dims in one pass: each program takes a block
of output positions and reads their windows' taps, keeping the maximum and its flat plane
index, or the sum. Only taps inside the input are read, so a NaN or an infinity reaches just
the windows that hold it, as in PyTorch. Average pooling's gradient takes a block of input
positions and sums the output gradients of the windows holding each. Launchers take buffers
as objects with ``data_ptr()`` and ``dtype`` and compute in float32."""

import triton
import triton.language as tl

from ember.backend.cuda_kernels._launch import block_of_planes, guarded

__all__ = ["max_pool2d", "avg_pool2d", "avg_pool2d_backward", "MAX_TAPS", "BLOCK"]

BLOCK = 512
MAX_TAPS = 64           # wider windows take the generic code, not a long loop per output
                        # (a guess, to tune on a GPU)


@triton.jit
def _max_pool2d_kernel(x_ptr, y_ptr, index_ptr, n, H, W, OH, OW, SH, SW, PH, PW, DH, DW,
                       KH, KW, BLOCK: tl.constexpr):
    o, mask, plane, oh, ow = block_of_planes(n, OH, OW, BLOCK)
    start = x_ptr + plane * H * W
    best = tl.full([BLOCK], -float("inf"), tl.float32)
    where = tl.full([BLOCK], -1, tl.int64)
    for kh in range(KH):
        ih = oh * SH - PH + kh * DH
        for kw in range(KW):
            iw = ow * SW - PW + kw * DW
            inside = mask & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            v = tl.load(start + ih * W + iw, mask=inside, other=-float("inf")).to(tl.float32)
            # PyTorch's rule: the first strict maximum, except that every NaN takes over (so
            # the last NaN wins); the first tap inside the input is taken whatever its value
            take = inside & ((v > best) | (v != v) | (where < 0))
            best = tl.where(take, v, best)
            where = tl.where(take, ih * W + iw, where)
    tl.store(y_ptr + o, best.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(index_ptr + o, where, mask=mask)


@guarded
def max_pool2d(x, y, index, planes, size, out, kernel, stride, padding, dilation):
    """Max pooling of ``planes`` contiguous (H, W) ``size`` planes of ``x`` into ``y``
    (``out`` = (OH, OW)), with the maxima's flat plane indices in the int64 ``index``."""
    n = planes * out[0] * out[1]
    _max_pool2d_kernel[(triton.cdiv(n, BLOCK),)](
        x, y, index, n, *size, *out, *stride, *padding, *dilation,
        KH=kernel[0], KW=kernel[1], BLOCK=BLOCK)


@triton.jit
def _avg_divisor(oh, ow, H, W, SH, SW, PH, PW, divisor, KH, KW, INCLUDE_PAD: tl.constexpr,
                 HAS_DIVISOR: tl.constexpr):
    """What the window of output (oh, ow) divides its sum by: ``divisor`` when given, else
    its size within the padded input, or within the input alone."""
    h0 = oh * SH - PH
    w0 = ow * SW - PW
    h1 = tl.minimum(h0 + KH, H + PH)
    w1 = tl.minimum(w0 + KW, W + PW)
    if HAS_DIVISOR:
        count = (oh * 0).to(tl.float32) + divisor
    elif INCLUDE_PAD:
        count = ((h1 - h0) * (w1 - w0)).to(tl.float32)
    else:
        count = ((tl.minimum(h1, H) - tl.maximum(h0, 0))
                 * (tl.minimum(w1, W) - tl.maximum(w0, 0))).to(tl.float32)
    return count


@triton.jit
def _avg_pool2d_kernel(x_ptr, y_ptr, n, H, W, OH, OW, SH, SW, PH, PW, divisor,
                       KH, KW, INCLUDE_PAD: tl.constexpr, HAS_DIVISOR: tl.constexpr,
                       BLOCK: tl.constexpr):
    o, mask, plane, oh, ow = block_of_planes(n, OH, OW, BLOCK)
    start = x_ptr + plane * H * W
    total = tl.zeros([BLOCK], tl.float32)
    for kh in range(KH):
        ih = oh * SH - PH + kh
        for kw in range(KW):
            iw = ow * SW - PW + kw
            inside = mask & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            total += tl.load(start + ih * W + iw, mask=inside, other=0.0).to(tl.float32)
    count = _avg_divisor(oh, ow, H, W, SH, SW, PH, PW, divisor, KH, KW, INCLUDE_PAD,
                         HAS_DIVISOR)
    tl.store(y_ptr + o, (total / count).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _avg_pool2d_backward_kernel(g_ptr, dx_ptr, n, H, W, OH, OW, SH, SW, PH, PW, divisor,
                                KH, KW, INCLUDE_PAD: tl.constexpr,
                                HAS_DIVISOR: tl.constexpr, BLOCK: tl.constexpr):
    i, mask, plane, ih, iw = block_of_planes(n, H, W, BLOCK)
    start = g_ptr + plane * OH * OW
    total = tl.zeros([BLOCK], tl.float32)
    for kh in range(KH):
        th = ih + PH - kh                       # oh * SH for the window whose tap kh is ih
        oh = th // SH
        rows = mask & (th >= 0) & (th % SH == 0) & (oh < OH)
        for kw in range(KW):
            tw = iw + PW - kw
            ow = tw // SW
            held = rows & (tw >= 0) & (tw % SW == 0) & (ow < OW)
            g = tl.load(start + oh * OW + ow, mask=held, other=0.0).to(tl.float32)
            count = _avg_divisor(oh, ow, H, W, SH, SW, PH, PW, divisor, KH, KW, INCLUDE_PAD,
                                 HAS_DIVISOR)
            total += tl.where(held, g / count, 0.0)
    tl.store(dx_ptr + i, total.to(dx_ptr.dtype.element_ty), mask=mask)


def _avg_constants(kernel, count_include_pad, divisor):
    return dict(KH=kernel[0], KW=kernel[1], INCLUDE_PAD=bool(count_include_pad),
                HAS_DIVISOR=divisor is not None, BLOCK=BLOCK)


@guarded
def avg_pool2d(x, y, planes, size, out, kernel, stride, padding, count_include_pad, divisor):
    """Average pooling of ``planes`` contiguous (H, W) ``size`` planes of ``x`` into ``y``
    (``out`` = (OH, OW)); ``divisor`` (or None) replaces each window's count."""
    n = planes * out[0] * out[1]
    _avg_pool2d_kernel[(triton.cdiv(n, BLOCK),)](
        x, y, n, *size, *out, *stride, *padding, float(divisor or 0),
        **_avg_constants(kernel, count_include_pad, divisor))


@guarded
def avg_pool2d_backward(grad, dx, planes, size, out, kernel, stride, padding,
                        count_include_pad, divisor):
    """``avg_pool2d``'s input gradient ``dx`` from the output gradient ``grad``."""
    n = planes * size[0] * size[1]
    _avg_pool2d_backward_kernel[(triton.cdiv(n, BLOCK),)](
        grad, dx, n, *size, *out, *stride, *padding, float(divisor or 0),
        **_avg_constants(kernel, count_include_pad, divisor))
