"""Max and average pooling over the trailing three dims in one pass (1-D and 2-D pooling as
volumes one plane deep and one row high): each program takes a block of output positions and
reads their windows' taps, keeping the maximum and its flat volume index, or the sum. Only
taps inside the input are read, so a NaN or an infinity reaches just the windows that hold
it, as in PyTorch. Average pooling's gradient takes a block of input positions and sums the
output gradients of the windows holding each. Launchers take buffers as objects with
``data_ptr()`` and ``dtype`` and compute in float32; geometry comes as (depth, height,
width) triples."""

import triton
import triton.language as tl

from ember.backend.cuda_kernels._launch import block_of_planes, guarded

__all__ = ["max_pool3d", "avg_pool3d", "avg_pool3d_backward", "MAX_TAPS", "BLOCK"]

BLOCK = 512
MAX_TAPS = 64           # wider windows take the generic code, not a long loop per output
                        # (a guess, to tune on a GPU)


@triton.jit
def _block_of_volumes(n, D, H, W, BLOCK: tl.constexpr):
    """This program's block of the ``n`` flat positions of (D, H, W) volumes: (positions,
    which are in range, their volume, depth, row and column)."""
    at, mask, volume, row, col = block_of_planes(n, D * H, W, BLOCK)
    return at, mask, volume, row // H, row % H, col


@triton.jit
def _max_pool3d_kernel(x_ptr, y_ptr, index_ptr, n, D, H, W, OD, OH, OW, SD, SH, SW, PD, PH,
                       PW, DD, DH, DW, KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
                       BLOCK: tl.constexpr):
    o, mask, volume, od, oh, ow = _block_of_volumes(n, OD, OH, OW, BLOCK)
    start = x_ptr + volume * D * H * W
    best = tl.full([BLOCK], -float("inf"), tl.float32)
    where = tl.full([BLOCK], -1, tl.int64)
    for kd in range(KD):
        iz = od * SD - PD + kd * DD
        for kh in range(KH):
            ih = oh * SH - PH + kh * DH
            for kw in range(KW):
                iw = ow * SW - PW + kw * DW
                inside = (mask & (iz >= 0) & (iz < D) & (ih >= 0) & (ih < H) & (iw >= 0)
                          & (iw < W))
                at = (iz * H + ih) * W + iw
                v = tl.load(start + at, mask=inside, other=-float("inf")).to(tl.float32)
                # PyTorch's rule: the first strict maximum, except that every NaN takes over
                # (so the last NaN wins); the first tap inside the input is taken whatever
                # its value
                take = inside & ((v > best) | (v != v) | (where < 0))
                best = tl.where(take, v, best)
                where = tl.where(take, at, where)
    tl.store(y_ptr + o, best.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(index_ptr + o, where, mask=mask)


@guarded
def max_pool3d(x, y, index, volumes, size, out, kernel, stride, padding, dilation):
    """Max pooling of ``volumes`` contiguous (D, H, W) ``size`` volumes of ``x`` into ``y``
    (``out`` = (OD, OH, OW)), with the maxima's flat volume indices in the int64 ``index``."""
    n = volumes * out[0] * out[1] * out[2]
    _max_pool3d_kernel[(triton.cdiv(n, BLOCK),)](
        x, y, index, n, *size, *out, *stride, *padding, *dilation,
        KD=kernel[0], KH=kernel[1], KW=kernel[2], BLOCK=BLOCK)


@triton.jit
def _extent(o, S, P, K, N, INCLUDE_PAD: tl.constexpr):
    """How many taps along one dim the window of output position ``o`` has within the padded
    input (INCLUDE_PAD), or within the input alone."""
    lo = o * S - P
    hi = tl.minimum(lo + K, N + P)
    if INCLUDE_PAD:
        return hi - lo
    return tl.minimum(hi, N) - tl.maximum(lo, 0)


@triton.jit
def _avg_divisor(od, oh, ow, D, H, W, SD, SH, SW, PD, PH, PW, divisor, KD, KH, KW,
                 INCLUDE_PAD: tl.constexpr, HAS_DIVISOR: tl.constexpr):
    """What the window of output (od, oh, ow) divides its sum by: ``divisor`` when given,
    else its size within the padded input, or within the input alone."""
    if HAS_DIVISOR:
        return (oh * 0).to(tl.float32) + divisor
    return (_extent(od, SD, PD, KD, D, INCLUDE_PAD) * _extent(oh, SH, PH, KH, H, INCLUDE_PAD)
            * _extent(ow, SW, PW, KW, W, INCLUDE_PAD)).to(tl.float32)


@triton.jit
def _avg_pool3d_kernel(x_ptr, y_ptr, n, D, H, W, OD, OH, OW, SD, SH, SW, PD, PH, PW, divisor,
                       KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
                       INCLUDE_PAD: tl.constexpr, HAS_DIVISOR: tl.constexpr,
                       BLOCK: tl.constexpr):
    o, mask, volume, od, oh, ow = _block_of_volumes(n, OD, OH, OW, BLOCK)
    start = x_ptr + volume * D * H * W
    total = tl.zeros([BLOCK], tl.float32)
    for kd in range(KD):
        iz = od * SD - PD + kd
        for kh in range(KH):
            ih = oh * SH - PH + kh
            for kw in range(KW):
                iw = ow * SW - PW + kw
                inside = (mask & (iz >= 0) & (iz < D) & (ih >= 0) & (ih < H) & (iw >= 0)
                          & (iw < W))
                total += tl.load(start + (iz * H + ih) * W + iw, mask=inside,
                                 other=0.0).to(tl.float32)
    count = _avg_divisor(od, oh, ow, D, H, W, SD, SH, SW, PD, PH, PW, divisor, KD, KH, KW,
                         INCLUDE_PAD, HAS_DIVISOR)
    tl.store(y_ptr + o, (total / count).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _window(i, P, k, S, N):
    """The output position whose window holds input position ``i`` as its tap ``k`` along
    one dim, and whether there is one (a stride lets only some taps land)."""
    t = i + P - k                               # o * S for that window
    o = tl.where(t >= 0, t, 0) // S
    return o, (t >= 0) & (t == o * S) & (o < N)


@triton.jit
def _avg_pool3d_backward_kernel(g_ptr, dx_ptr, n, D, H, W, OD, OH, OW, SD, SH, SW, PD, PH, PW,
                                divisor, KD: tl.constexpr, KH: tl.constexpr,
                                KW: tl.constexpr, INCLUDE_PAD: tl.constexpr,
                                HAS_DIVISOR: tl.constexpr, BLOCK: tl.constexpr):
    i, mask, volume, iz, ih, iw = _block_of_volumes(n, D, H, W, BLOCK)
    start = g_ptr + volume * OD * OH * OW
    total = tl.zeros([BLOCK], tl.float32)
    for kd in range(KD):
        od, in_d = _window(iz, PD, kd, SD, OD)
        for kh in range(KH):
            oh, in_h = _window(ih, PH, kh, SH, OH)
            for kw in range(KW):
                ow, in_w = _window(iw, PW, kw, SW, OW)
                held = mask & in_d & in_h & in_w
                g = tl.load(start + (od * OH + oh) * OW + ow, mask=held, other=0.0).to(
                    tl.float32)
                count = _avg_divisor(od, oh, ow, D, H, W, SD, SH, SW, PD, PH, PW, divisor, KD,
                                     KH, KW, INCLUDE_PAD, HAS_DIVISOR)
                total += tl.where(held, g / count, 0.0)
    tl.store(dx_ptr + i, total.to(dx_ptr.dtype.element_ty), mask=mask)


def _avg_constants(kernel, count_include_pad, divisor):
    return dict(KD=kernel[0], KH=kernel[1], KW=kernel[2],
                INCLUDE_PAD=bool(count_include_pad), HAS_DIVISOR=divisor is not None,
                BLOCK=BLOCK)


@guarded
def avg_pool3d(x, y, volumes, size, out, kernel, stride, padding, count_include_pad, divisor):
    """Average pooling of ``volumes`` contiguous (D, H, W) ``size`` volumes of ``x`` into
    ``y`` (``out`` = (OD, OH, OW)); ``divisor`` (or None) replaces each window's count."""
    n = volumes * out[0] * out[1] * out[2]
    _avg_pool3d_kernel[(triton.cdiv(n, BLOCK),)](
        x, y, n, *size, *out, *stride, *padding, float(divisor or 0),
        **_avg_constants(kernel, count_include_pad, divisor))


@guarded
def avg_pool3d_backward(grad, dx, volumes, size, out, kernel, stride, padding,
                        count_include_pad, divisor):
    """``avg_pool3d``'s input gradient ``dx`` from the output gradient ``grad``."""
    n = volumes * size[0] * size[1] * size[2]
    _avg_pool3d_backward_kernel[(triton.cdiv(n, BLOCK),)](
        grad, dx, n, *size, *out, *stride, *padding, float(divisor or 0),
        **_avg_constants(kernel, count_include_pad, divisor))
