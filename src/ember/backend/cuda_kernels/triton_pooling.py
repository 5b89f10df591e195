"""Max pooling over the trailing two dims in one pass: each program takes a block of output
positions, reads their windows' taps and keeps the maximum and its flat plane index.
Launchers take buffers as objects with ``data_ptr()`` and ``dtype``."""

import triton
import triton.language as tl

from ember.backend.cuda_kernels._launch import guarded

__all__ = ["max_pool2d", "MAX_TAPS", "BLOCK"]

BLOCK = 512
MAX_TAPS = 64           # larger windows unroll into too long a kernel: the generic sweep runs


@triton.jit
def _max_pool2d_kernel(x_ptr, y_ptr, index_ptr, n, H, W, OH, OW, SH, SW, PH, PW, DH, DW,
                       KH: tl.constexpr, KW: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = o < n
    ow = o % OW
    oh = (o // OW) % OH
    plane = x_ptr + (o // (OW * OH)) * H * W
    best = tl.full([BLOCK], -float("inf"), tl.float32)
    where = tl.full([BLOCK], -1, tl.int64)
    for kh in tl.static_range(KH):
        ih = oh * SH - PH + kh * DH
        for kw in tl.static_range(KW):
            iw = ow * SW - PW + kw * DW
            inside = mask & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            v = tl.load(plane + ih * W + iw, mask=inside, other=-float("inf")).to(tl.float32)
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
