"""Separable resampling of the trailing two dims (interpolate's modes) from per-dim tap tables:
output (oh, ow) is the sum over taps a, b of wh[oh, a] * ww[ow, b] * x[ih[oh, a], iw[ow, b]].
A tap with index -1 is not read. Every other tap is read, zero weights included, as PyTorch's
kernels do (an infinity under a zero weight gives NaN). The gradient adds each output's
gradient into its taps with atomic adds, as PyTorch's CUDA kernels do. Launchers take
buffers as objects with ``data_ptr()`` and ``dtype`` and compute in float32."""

import triton
import triton.language as tl

from ember.backend.cuda_kernels._launch import block_of_planes, guarded

__all__ = ["resample2d", "resample2d_backward", "MAX_TAPS", "BLOCK"]

BLOCK = 512
MAX_TAPS = 64           # taps per output; wider filters (strong antialiased downsampling) take
                        # the generic products, not a long loop per output (to tune on a GPU)


@triton.jit
def _tap(index_ptr, weight_ptr, position, t, TAPS, mask):
    """Tap ``t`` of each output ``position`` along one dim: (input index, -1 for a tap not
    read; weight)."""
    at = position * TAPS + t
    return (tl.load(index_ptr + at, mask=mask, other=-1),
            tl.load(weight_ptr + at, mask=mask, other=0.0))


@triton.jit
def _resample2d_kernel(x_ptr, y_ptr, ih_ptr, wh_ptr, iw_ptr, ww_ptr, n, H, W, OH, OW,
                       TH, TW, BLOCK: tl.constexpr):
    o, mask, plane, oh, ow = block_of_planes(n, OH, OW, BLOCK)
    start = x_ptr + plane * H * W
    total = tl.zeros([BLOCK], tl.float32)
    for a in range(TH):
        ih, wa = _tap(ih_ptr, wh_ptr, oh, a, TH, mask)
        for b in range(TW):
            iw, wb = _tap(iw_ptr, ww_ptr, ow, b, TW, mask)
            read = mask & (ih >= 0) & (iw >= 0)
            v = tl.load(start + ih * W + iw, mask=read, other=0.0).to(tl.float32)
            total += tl.where(read, wa * wb * v, 0.0)
    tl.store(y_ptr + o, total.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _resample2d_backward_kernel(g_ptr, dx_ptr, ih_ptr, wh_ptr, iw_ptr, ww_ptr, n, H, W, OH,
                                OW, TH, TW, BLOCK: tl.constexpr):
    o, mask, plane, oh, ow = block_of_planes(n, OH, OW, BLOCK)
    start = dx_ptr + plane * H * W
    g = tl.load(g_ptr + o, mask=mask, other=0.0).to(tl.float32)
    for a in range(TH):
        ih, wa = _tap(ih_ptr, wh_ptr, oh, a, TH, mask)
        for b in range(TW):
            iw, wb = _tap(iw_ptr, ww_ptr, ow, b, TW, mask)
            tl.atomic_add(start + ih * W + iw, g * wa * wb, mask=mask & (ih >= 0) & (iw >= 0))


def _launch(kernel, src, dst, tables, planes, size, out):
    (ih, wh, th), (iw, ww, tw) = tables
    n = planes * out[0] * out[1]
    kernel[(triton.cdiv(n, BLOCK),)](src, dst, ih, wh, iw, ww, n, *size, *out, th, tw,
                                     BLOCK=BLOCK)


@guarded
def resample2d(x, y, tables, planes, size, out):
    """Resample ``planes`` contiguous ``size`` (H, W) planes of ``x`` into ``out`` (OH, OW)
    planes of ``y``; ``tables`` holds per dim (index buffer, float32 weight buffer, taps)."""
    _launch(_resample2d_kernel, x, y, tables, planes, size, out)


@guarded
def resample2d_backward(grad, dx, tables, planes, size, out):
    """Add ``resample2d``'s input gradient from ``grad`` into the zeroed float32 ``dx``."""
    _launch(_resample2d_backward_kernel, grad, dx, tables, planes, size, out)
