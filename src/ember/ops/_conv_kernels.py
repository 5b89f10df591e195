"""N-d convolution kernels on backend arrays: im2col windows + matmul, col2im by kernel offset.

Layouts: input (B, C, *S), weight (O, C/G, *K), output (B, O, *P). ``pads`` is a tuple of
(low, high) zero-padding pairs, one per spatial dim. The convolution kernels copy the input
to channel-last order first, so each im2col row (one output position: kernel offsets x
channels) is gathered from runs of whole pixels, and the product is one GEMM per group,
(B*P, K*C) @ (K*C, O). Pixels with few channels use channel-first columns instead, and small
images with few channels put the batch innermost (_batch_inner), where the copies and the
col2im additions move runs of an output row times the batch. Unit-stride convolutions
with few channels per pixel, or groups, take channel-first columns over the flattened
padded image (_flat_forward): each column row is one long run. Pointwise convolutions
(1x1, unpadded) need no columns (_conv_pointwise.py); depthwise ones at a stride take
their input gradient without columns (_conv_depthwise.py). Work is split into batch chunks of a
few MiB of columns that run on the CPU worker threads (_conv_chunks.py): chunks stay in
cache, and cores share them.
"""

import functools
import math

import numpy as np

from ember import _dtype as D
from ember.backend import device_kernel
from ember.ops._conv_chunks import map_samples
from ember.ops._conv_depthwise import depthwise_input_grad, takes_taps
from ember.ops._conv_pointwise import (is_pointwise, pointwise_forward, pointwise_input_grad,
                                       pointwise_weight_grad)

__all__ = ["output_size", "conv_forward", "conv_input_grad", "conv_weight_grad", "im2col",
           "col2im", "zero_pad"]


_LOW = D.HALF_NP
_F32 = np.dtype(np.float32)


def _device_first(kernel):
    """A convolution's generic code, run after GPU kernel ``kernel`` (``device_kernel``)
    when that declines the call (the kernels take 16-bit floats natively); the generic code
    computes 16-bit floats in float32 copies (NumPy and CuPy have no fast 16-bit GEMM)."""
    def wrap(generic):
        @functools.wraps(generic)
        def run(xp, a, b, *args):
            fast = device_kernel(a, kernel)
            if fast is not None:
                out = fast(a, b, *args)
                if out is not None:
                    return out
            if a.dtype not in _LOW:
                return generic(xp, a, b, *args)
            wide = [x.astype(_F32) if getattr(x, "dtype", None) in _LOW else x
                    for x in (a, b, *args)]
            return generic(xp, *wide).astype(a.dtype)
        return run
    return wrap


def output_size(size, kernel, stride, pad, dilation):
    """Spatial output sizes of a convolution (``pad`` as (low, high) pairs)."""
    return tuple((s + lo + hi - d * (k - 1) - 1) // st + 1
                 for s, k, st, (lo, hi), d in zip(size, kernel, stride, pad, dilation))


def zero_pad(xp, x, pads):
    """``x`` with its trailing len(pads) dims zero-padded by (low, high) pairs."""
    if not any(lo or hi for lo, hi in pads):
        return x
    lead = x.ndim - len(pads)
    shape = x.shape[:lead] + tuple(s + lo + hi for s, (lo, hi) in zip(x.shape[lead:], pads))
    out = xp.zeros(shape, x.dtype)
    out[(Ellipsis,) + tuple(slice(lo, lo + s) for s, (lo, _) in zip(x.shape[lead:], pads))] = x
    return out


def _read_only_view(xp, a, shape, strides):
    """A strided view of ``a``'s memory, read-only where the backend can say so (CuPy's
    as_strided takes no ``writeable``)."""
    if xp is np:
        return np.lib.stride_tricks.as_strided(a, shape, strides, writeable=False)
    return xp.lib.stride_tricks.as_strided(a, shape, strides)


def _windows(xp, xpad, kernel, out, stride, dilation):
    """A strided view (B, C, *K, *P) of the padded input's receptive fields."""
    st = xpad.strides
    nd = len(kernel)
    strides = st[:2] + tuple(s * d for s, d in zip(st[2:], dilation)) + \
        tuple(s * t for s, t in zip(st[2:], stride))
    return _read_only_view(xp, xpad, xpad.shape[:2] + tuple(kernel) + tuple(out),
                           strides[:2 + 2 * nd])


def im2col(xp, x, kernel, stride, pads, dilation):
    """Columns (B, C, *K, *P) (a copy) and the output size P."""
    xpad = zero_pad(xp, x, pads)
    out = output_size(x.shape[2:], kernel, stride, pads, dilation)
    return xp.ascontiguousarray(_windows(xp, xpad, kernel, out, stride, dilation)), out


def col2im(xp, cols, size, stride, pads, dilation):
    """Sum columns (B, C, *K, *P) back into an image (B, C, *size): the adjoint of im2col."""
    nd = len(size)
    kernel = cols.shape[2:2 + nd]
    out = cols.shape[2 + nd:]
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(size, pads))
    img = xp.zeros(cols.shape[:2] + padded, cols.dtype)
    for offset in _offsets(kernel):
        where = tuple(slice(o * d, o * d + (p - 1) * s + 1, s)
                      for o, d, p, s in zip(offset, dilation, out, stride))
        img[(slice(None), slice(None)) + where] += cols[(slice(None), slice(None)) + offset]
    crop = tuple(slice(lo, lo + s) for s, (lo, _) in zip(size, pads))
    return img[(slice(None), slice(None)) + crop]


def _offsets(kernel):
    if not kernel:
        return [()]
    return [(k,) + rest for k in range(kernel[0]) for rest in _offsets(kernel[1:])]


def _channels_last(xp, x, pads):
    """``x`` (B, C, *S) as a zero-padded channel-last copy (B, *S', C)."""
    perm = (0,) + tuple(range(2, x.ndim)) + (1,)
    if not any(lo or hi for lo, hi in pads):
        return xp.ascontiguousarray(x.transpose(perm))
    # one transposing copy into the zeros (padding first, then transposing: 1.3x slower)
    shape = x.shape[:1] + tuple(s + lo + hi for s, (lo, hi) in zip(x.shape[2:], pads))
    out = xp.zeros(shape + x.shape[1:2], x.dtype)
    out[(slice(None),) + tuple(slice(lo, lo + s) for s, (lo, _) in zip(x.shape[2:], pads))] = \
        x.transpose(perm)
    return out


def _group_cols(xp, xn, kernel, out, stride, dilation, groups):
    """im2col of a channel-last padded input: (B*prod(P), G, prod(K)*C/G), the window's
    kernel offsets and channels running along each row (so the copy moves whole rows)."""
    b, c = xn.shape[0], xn.shape[-1]
    cg = c // groups
    st = xn.strides
    shape = (b,) + tuple(out) + (groups,) + tuple(kernel) + (cg,)
    strides = ((st[0],) + tuple(s * t for s, t in zip(st[1:-1], stride)) + (st[-1] * cg,)
               + tuple(s * d for s, d in zip(st[1:-1], dilation)) + (st[-1],))
    view = _read_only_view(xp, xn, shape, strides)
    return xp.ascontiguousarray(view).reshape(b * math.prod(out), groups,
                                              math.prod(kernel) * cg)


def _row_cols(xp, x, kernel, out, stride, pads, dilation, groups):
    """im2col in channel-first order: (G, prod(K)*C/G, B*prod(P)), each row running along
    output rows (the better copy when a pixel has few channels)."""
    b, c = x.shape[:2]
    nd = len(kernel)
    view = _windows(xp, zero_pad(xp, x, pads), kernel, out, stride, dilation)
    order = (1,) + tuple(range(2, 2 + nd)) + (0,) + tuple(range(2 + nd, 2 + 2 * nd))
    cols = xp.ascontiguousarray(view.transpose(order))        # (C, *K, B, *P)
    return cols.reshape(groups, (c // groups) * math.prod(kernel), b * math.prod(out))


def _batch_last(xp, x, pads):
    """``x`` (B, C, *S) as a zero-padded copy (C, *S', B), the batch innermost."""
    perm = tuple(range(1, x.ndim)) + (0,)
    if not any(lo or hi for lo, hi in pads):
        if _aliasing_rows(xp, x):
            return _transpose_in_bands(xp, x.reshape(x.shape[0], -1)).reshape(
                x.shape[1:] + x.shape[:1])
        return xp.ascontiguousarray(x.transpose(perm))
    size = tuple(s + lo + hi for s, (lo, hi) in zip(x.shape[2:], pads))
    out = xp.zeros((x.shape[1],) + size + (x.shape[0],), x.dtype)
    out[(slice(None),) + tuple(slice(lo, lo + s) for s, (lo, _) in zip(x.shape[2:], pads))] = \
        x.transpose(perm)
    return out


def _aliasing_rows(xp, x):
    """Whether ``x`` is a C-contiguous NumPy batch whose samples span a multiple of 4 KiB:
    a plain transposed copy then reads addresses that share cache sets (4x slower)."""
    sample_bytes = x.strides[0] if x.ndim else 0
    return (xp.__name__ == "numpy" and x.flags.c_contiguous and x.shape[0] > _BAND
            and sample_bytes % 4096 == 0 and sample_bytes > 0)


def _transpose_in_bands(xp, rows):
    """``rows.T`` as a new C-contiguous array, copied a band of a few rows at a time."""
    out = xp.empty(rows.shape[::-1], rows.dtype)
    for lo in range(0, rows.shape[0], _BAND):
        out[:, lo:lo + _BAND] = rows[lo:lo + _BAND].T
    return out


def _batch_cols(xp, x, kernel, out, stride, pads, dilation, groups):
    """im2col with the batch innermost: (G, C/G*prod(K), prod(P)*B). For small images: the
    copy moves runs of a whole output row times the batch, where the other layouts move a
    few pixels' channels or one short output row."""
    c, b = x.shape[1], x.shape[0]
    xb = _batch_last(xp, x, pads)
    st = xb.strides
    nd = len(kernel)
    shape = (c,) + tuple(kernel) + tuple(out) + (b,)
    strides = ((st[0],) + tuple(s * d for s, d in zip(st[1:1 + nd], dilation))
               + tuple(s * t for s, t in zip(st[1:1 + nd], stride)) + (st[-1],))
    cols = xp.ascontiguousarray(_read_only_view(xp, xb, shape, strides))
    return cols.reshape(groups, (c // groups) * math.prod(kernel), math.prod(out) * b)


def _from_batch_last(xp, res, dst, bias=None):
    """Write an array (C, *S, B) into ``dst`` (B, C, *S), adding ``bias`` (C,)."""
    moved = xp.moveaxis(res, -1, 0)
    if bias is None:
        dst[...] = moved
    else:
        xp.add(moved, bias.reshape((-1,) + (1,) * (dst.ndim - 2)), out=dst)


def _batch_inner(c, kernel, out):
    """Whether batch-innermost columns beat the others: few output pixels, each with few
    channels per group (the other layouts then copy and add short runs)."""
    return math.prod(out) < _FEW_PIXELS and c * (kernel[-1] if kernel else 1) < _SHORT_RUN


def _pixel_major(c, kernel, out):
    """Whether channel-last columns beat channel-first ones: a pixel's channels times the
    kernel width make longer contiguous runs than an output row."""
    return c * kernel[-1] >= out[-1] if kernel else True


def _weight_rows(xp, w, groups):
    """The weight (O, C/G, *K) as (G, O/G, prod(K)*C/G), columns ordered like _group_cols."""
    o, cg = w.shape[:2]
    nd = w.ndim - 2
    grouped = w.reshape((groups, o // groups, cg) + w.shape[2:])
    order = (0, 1) + tuple(range(3, 3 + nd)) + (2,)
    return xp.ascontiguousarray(grouped.transpose(order)).reshape(
        groups, o // groups, math.prod(w.shape[2:]) * cg)


def _to_channels_first(xp, res, out, dst, bias=None):
    """Write a product (G, B*prod(P), O/G) into ``dst`` (B, O, *P), adding ``bias``."""
    g, _, og = res.shape
    nd = len(out)
    moved = res.reshape((g, dst.shape[0]) + tuple(out) + (og,)).transpose(
        (1, 0, 2 + nd) + tuple(range(2, 2 + nd)))
    grouped = dst.reshape((dst.shape[0], g, og) + tuple(out))
    if bias is None:
        grouped[...] = moved
    else:
        xp.add(moved, bias.reshape((g, og) + (1,) * nd), out=grouped)


_BAND = 8                   # rows per band of a transposed copy (see _transpose_in_bands)
_FEW_PIXELS = 256           # below this many output pixels, per-sample products are too small
_SHORT_RUN = 64             # a pixel's channels times the kernel width below this: a short run


def _write_channels_first(xp, res, target, bias):
    """Write a product (n, G, P, O/G) into ``target`` (n, G, O/G, P), adding ``bias``."""
    moved = res.transpose(0, 1, 3, 2)
    if bias is None:
        target[...] = moved
    else:
        xp.add(moved, bias.reshape(target.shape[1:3] + (1,)), out=target)


def _flat_span(size, out):
    """The padded image's element strides for ``size``, and the span of a flattened padded
    image that the output pixels of a unit-stride convolution start in."""
    strides = [math.prod(size[i + 1:]) for i in range(len(size))]
    return strides, 1 + sum((p - 1) * s for p, s in zip(out, strides))


def _flat_rows(x_shape, o, stride, pads, out, groups, pixel_major, batch_inner):
    """Whether _flat_forward (or _flat_weight_grad) beats the other layouts for ``o`` output
    channels: unit stride, not the small images batch-innermost columns serve, and the
    channel-first product (few channels per pixel, or groups) with little padding."""
    if batch_inner or any(s != 1 for s in stride) or not out or not math.prod(out):
        return False
    if pixel_major and groups == 1:
        return False
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(x_shape[2:], pads))
    npix = math.prod(out)
    if x_shape[1] == o == groups:
        # depthwise: the padding's outputs cost a product per channel too (3x3 on 16x16, 12%
        # of the span: 1.15-1.25x faster; 5x5 on 28x28, 14%: 1.1x slower)
        return 8 * _flat_span(padded, out)[1] <= 9 * npix
    return 2 * _flat_span(padded, out)[1] <= 3 * npix


class _FlatColumns:
    """The channel-first columns of samples [lo, hi) of x over the flattened padded image
    (_flat_forward's and _flat_weight_grad's layout): (n, G, K*C/G, span)."""

    def __init__(self, xp, x, kernel, out, pads, dilation, groups):
        padded = tuple(s + lo + hi for s, (lo, hi) in zip(x.shape[2:], pads))
        self.flat, self.span = _flat_span(padded, out)
        self.kc = (x.shape[1] // groups) * math.prod(kernel)
        self._args = xp, x, tuple(kernel), pads, groups
        self._taps = tuple(s * d * x.itemsize for s, d in zip(self.flat, dilation))

    def __call__(self, lo, hi):
        xp, x, kernel, pads, groups = self._args
        n, c = hi - lo, x.shape[1]
        xpad = xp.ascontiguousarray(zero_pad(xp, x[lo:hi], pads)).reshape(n, c, -1)
        view = _read_only_view(xp, xpad, (n, c) + kernel + (self.span,),
                               xpad.strides[:2] + self._taps + (x.itemsize,))
        return xp.ascontiguousarray(view).reshape(n, groups, self.kc, self.span)


def _flat_forward(xp, x, w, pads, dilation, groups, bias, dst):
    """conv_forward at unit stride with channel-first columns over the flattened padded
    image: each column row is one run of the image (the output rows and the padding
    between them), so the copy moves long runs and the product (O/G, K*C/G) @ (K*C/G, span)
    lands channel-first; the padding's outputs are dropped in the final copy."""
    b, c = x.shape[:2]
    o = w.shape[0]
    kernel, out = w.shape[2:], dst.shape[2:]
    columns = _FlatColumns(xp, x, kernel, out, pads, dilation, groups)
    flat, span = columns.flat, columns.span
    wg = w.reshape(groups, o // groups, columns.kc)

    def chunk(lo, hi):
        n = hi - lo
        res = xp.matmul(wg, columns(lo, hi)).reshape(n, o, span)
        kept = _read_only_view(xp, res, (n, o) + tuple(out),
                               res.strides[:2] + tuple(s * res.itemsize for s in flat))
        if bias is None:
            dst[lo:hi] = kept
        else:
            xp.add(kept, bias.reshape((o,) + (1,) * len(out)), out=dst[lo:hi])

    map_samples(xp, b, c * math.prod(kernel) * span * x.itemsize, chunk)
    return dst


@_device_first("convolution")
def conv_forward(xp, x, w, stride, pads, dilation, groups, bias=None):
    """Cross-correlation of x (B, C, *S) with w (O, C/G, *K), plus bias: (B, O, *P)."""
    b, o = x.shape[0], w.shape[0]
    kernel = w.shape[2:]
    out = output_size(x.shape[2:], kernel, stride, pads, dilation)
    dtype = xp.result_type(x, w) if bias is None else xp.result_type(x, w, bias)
    dst = xp.empty((b, o) + tuple(out), dtype)
    # (a flipped weight's negative strides would make matmul skip BLAS: 2x slower)
    w = xp.ascontiguousarray(w)
    if is_pointwise(kernel, pads):
        return pointwise_forward(xp, x, w, stride, groups, bias, dst)
    pixel_major = _pixel_major(x.shape[1] // groups, kernel, out)
    batch_inner = _batch_inner(x.shape[1] // groups, kernel, out)
    if _flat_rows(x.shape, o, stride, pads, out, groups, pixel_major, batch_inner):
        return _flat_forward(xp, x, w, pads, dilation, groups, bias, dst)
    rows = _weight_rows(xp, w, groups)
    og, kc = rows.shape[1:]
    npix = math.prod(out)

    def chunk(lo, hi):
        n = hi - lo
        if batch_inner:
            cols = _batch_cols(xp, x[lo:hi], kernel, out, stride, pads, dilation, groups)
            res = xp.matmul(w.reshape(groups, og, kc), cols)       # (G, O/G, P*n)
            _from_batch_last(xp, res.reshape((o,) + tuple(out) + (n,)), dst[lo:hi], bias)
            return
        if not pixel_major:
            cols = _row_cols(xp, x[lo:hi], kernel, out, stride, pads, dilation, groups)
            res = xp.matmul(w.reshape(groups, og, kc), cols).transpose(0, 2, 1)
            _to_channels_first(xp, res, out, dst[lo:hi], bias)
            return
        target = dst[lo:hi].reshape(n, groups, og, npix)
        cols = _group_cols(xp, _channels_last(xp, x[lo:hi], pads), kernel, out, stride,
                           dilation, groups).reshape(n, npix, groups, kc)
        if og == 1 and groups > 1:      # depthwise: a product per channel, which matmul loops
            xp.einsum("npgk,gk->ngp", cols, rows[:, 0], out=target[:, :, 0])
            if bias is not None:
                target += bias.reshape(groups, og, 1)
            return
        # (P, K*C/G) @ (K*C/G, O/G) with the columns as they lie, then a transposing copy of
        # the smaller output: BLAS runs the product (O/G, K*C/G) @ columns.T, which needs no
        # copy, 1.7x slower
        if groups == 1:
            res = (cols.reshape(n * npix, kc) @ rows[0].T).reshape(n, 1, npix, og)
        else:
            res = xp.matmul(cols.transpose(0, 2, 1, 3), rows.transpose(0, 2, 1))
        _write_channels_first(xp, res, target, bias)

    per_sample = npix * kc * groups * x.itemsize
    map_samples(xp, b, per_sample, chunk)
    return dst


def _unit_stride_input_grad(xp, g, w, size, pads, dilation, groups, bias):
    """conv_input_grad for unit stride: a convolution of g with the flipped, transposed
    kernel, which needs no col2im; None when padding exceeds the kernel's reach."""
    kernel = w.shape[2:]
    reach = [d * (k - 1) for d, k in zip(dilation, kernel)]
    if any(lo > r or hi > r for (lo, hi), r in zip(pads, reach)):
        return None
    low = [r - lo for (lo, _), r in zip(pads, reach)]
    flipped_pads = tuple((lo, s + r - p - lo)
                         for lo, s, r, p in zip(low, size, reach, g.shape[2:]))
    o, cg = w.shape[:2]
    nd = len(kernel)
    wt = w.reshape((groups, o // groups, cg) + tuple(kernel)).swapaxes(1, 2)
    wt = wt[(Ellipsis,) + (slice(None, None, -1),) * nd].reshape((groups * cg, o // groups)
                                                                  + tuple(kernel))
    return conv_forward(xp, g, wt, (1,) * nd, flipped_pads, dilation, groups, bias)


@_device_first("convolution_input")
def conv_input_grad(xp, g, w, size, stride, pads, dilation, groups, bias=None):
    """The adjoint of conv_forward in its input: (B, C, *size) from g (B, O, *P), plus bias
    (a transposed convolution)."""
    if is_pointwise(w.shape[2:], pads):
        return pointwise_input_grad(xp, g, w, size, stride, groups, bias)
    if all(s == 1 for s in stride) and w.shape[1] * groups >= w.shape[0]:
        # (with fewer input than output channels, the paths below move less data)
        fast = _unit_stride_input_grad(xp, g, w, size, pads, dilation, groups, bias)
        if fast is not None:
            return fast
    if takes_taps(w, groups, g.shape[2:]):      # depthwise, and strided (mostly)
        return depthwise_input_grad(xp, g, w, size, stride, pads, dilation, bias)
    if _batch_inner(w.shape[1], w.shape[2:], g.shape[2:]):
        return _batch_input_grad(xp, g, w, size, stride, pads, dilation, groups, bias)
    if not _pixel_major(w.shape[1], w.shape[2:], g.shape[2:]):
        return _col2im_input_grad(xp, g, w, size, stride, pads, dilation, groups, bias)
    return _scatter_input_grad(xp, g, w, size, stride, pads, dilation, groups, bias)


def _batch_input_grad(xp, g, w, size, stride, pads, dilation, groups, bias):
    """conv_input_grad for small images: columns with the batch innermost, summed into the
    image by kernel offset, each addition over runs of an output row times the batch."""
    b, o = g.shape[:2]
    kernel, out = w.shape[2:], g.shape[2:]
    c = w.shape[1] * groups
    kc = w.shape[1] * math.prod(kernel)
    wt = w.reshape(groups, o // groups, kc).transpose(0, 2, 1)
    dtype = xp.result_type(g, w) if bias is None else xp.result_type(g, w, bias)
    dst = xp.empty((b, c) + tuple(size), dtype)
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(size, pads))
    crop = (slice(None),) + tuple(slice(lo, lo + s) for s, (lo, _) in zip(size, pads))

    windows = [tuple(slice(j * d, j * d + (p - 1) * s + 1, s)
                     for j, d, p, s in zip(offset, dilation, out, stride))
               for offset in _offsets(kernel)]
    # at unit stride, a product per kernel offset added into its window while still in cache
    # (measured 1.25x faster for 64x16x8x8 into 6 channels, 5x5); with larger strides (and
    # depthwise, an outer product which matmul loops) one product into all the columns
    per_offset = o != groups and all(s == 1 for s in stride)
    # per kernel offset, the (C/G, O/G) matrices of each group
    taps = w.reshape(groups, o // groups, w.shape[1], -1).transpose(3, 0, 2, 1)

    def chunk(lo, hi):
        n = hi - lo
        gt = _batch_last(xp, g[lo:hi], ()).reshape(groups, o // groups, -1)
        img = xp.zeros((c,) + padded + (n,), dtype)
        if per_offset:
            for tap, window in zip(taps, windows):
                img[(slice(None),) + window] += xp.matmul(tap, gt).reshape(
                    (c,) + tuple(out) + (n,))
        else:
            cols = wt * gt if o == groups else xp.matmul(wt, gt)      # (G, K*C/G, P*n)
            cols = cols.reshape((c,) + tuple(kernel) + tuple(out) + (n,))
            for offset, window in zip(_offsets(kernel), windows):
                img[(slice(None),) + window] += cols[(slice(None),) + offset]
        _from_batch_last(xp, img[crop], dst[lo:hi], bias)

    if per_offset:  # the image and one offset's product, a quarter of the columns' chunk:
        # the image stays in L2 while every kernel offset adds into it
        per_sample = 4 * (math.prod(padded) + math.prod(out)) * c * g.itemsize
    else:
        per_sample = math.prod(out) * kc * groups * g.itemsize
    map_samples(xp, b, per_sample, chunk)
    return dst


def _col2im_input_grad(xp, g, w, size, stride, pads, dilation, groups, bias):
    """conv_input_grad through channel-first columns and col2im (pixels with few channels)."""
    b, o = g.shape[:2]
    kernel = w.shape[2:]
    nd = len(kernel)
    c = w.shape[1] * groups
    ck = w.shape[1] * math.prod(kernel)
    wt = w.reshape(groups, o // groups, ck).transpose(0, 2, 1)
    dtype = xp.result_type(g, w) if bias is None else xp.result_type(g, w, bias)
    dst = xp.empty((b, c) + tuple(size), dtype)

    def chunk(lo, hi):
        gt = xp.ascontiguousarray(xp.moveaxis(g[lo:hi], 1, 0)).reshape(groups, o // groups, -1)
        # one output channel per group (depthwise): an outer product, which matmul loops
        cols = wt * gt if o == groups else xp.matmul(wt, gt)
        cols = cols.reshape((c,) + tuple(kernel) + (hi - lo,) + g.shape[2:])
        img = col2im(xp, xp.moveaxis(cols, 1 + nd, 1), size, stride, pads, dilation)
        _to_channels_first(xp, img.reshape(1, c, -1).transpose(0, 2, 1), size, dst[lo:hi],
                           bias)

    per_sample = math.prod(g.shape[2:]) * ck * groups * g.itemsize
    map_samples(xp, b, per_sample, chunk)
    return dst


def _scatter_input_grad(xp, g, w, size, stride, pads, dilation, groups, bias):
    """conv_input_grad channel-last: one product per kernel offset, added into its window of
    the image (pixels with many channels make those additions long contiguous runs)."""
    b, o = g.shape[:2]
    kernel = w.shape[2:]
    out = g.shape[2:]
    nd = len(kernel)
    cg, og = w.shape[1], o // groups
    c = cg * groups
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(size, pads))
    # per kernel offset, the (O/G, C/G) matrices of each group
    taps = w.reshape((groups, og, cg, math.prod(kernel))).transpose(3, 0, 1, 2)
    dtype = xp.result_type(g, w) if bias is None else xp.result_type(g, w, bias)
    dst = xp.empty((b, c) + tuple(size), dtype)
    crop = tuple(slice(lo, lo + n) for n, (lo, _) in zip(size, pads))
    order = (0, nd + 1) + tuple(range(1, nd + 1))

    def chunk(lo, hi):
        n = hi - lo
        gn = _channels_last(xp, g[lo:hi], ()).reshape(-1, groups, og).transpose(1, 0, 2)
        img = xp.zeros((n,) + padded + (c,), dtype)        # channel-last
        # scatter each kernel offset's product into its window: whole pixels per copy
        for k, offset in enumerate(_offsets(kernel)):
            part = xp.matmul(gn, taps[k])                  # (G, n*P, C/G)
            part = part[0] if groups == 1 else part.transpose(1, 0, 2)
            window = tuple(slice(j * d, j * d + (p - 1) * s + 1, s)
                           for j, d, p, s in zip(offset, dilation, out, stride))
            img[(slice(None),) + window] += part.reshape((n,) + tuple(out) + (c,))
        inner = img[(slice(None),) + crop].transpose(order)
        if bias is None:
            dst[lo:hi] = inner
        else:
            xp.add(inner, bias.reshape((c,) + (1,) * nd), out=dst[lo:hi])

    per_sample = (math.prod(padded) * c + math.prod(out) * o) * g.itemsize
    map_samples(xp, b, per_sample, chunk)
    return dst


def _product_nt(xp, a, b):
    """``a @ b.mT`` for (G, M, N) and (G, K, N) operands with long rows N. OpenBLAS runs
    such a product with few rows M faster with the operands swapped (the transposed result
    is small): measured 0.39 ms against 0.79 ms for 6 and 25 rows of 36864."""
    if a.shape[-2] >= b.shape[-2]:
        return xp.matmul(a, b.swapaxes(-1, -2))
    return xp.ascontiguousarray(xp.matmul(b, a.swapaxes(-1, -2)).swapaxes(-1, -2))


def _flat_weight_grad(xp, x, g, kernel, pads, dilation, groups):
    """conv_weight_grad at unit stride with _flat_forward's columns: g spread over the
    flattened padded image's span (zeros on the padding), per sample
    (K*C/G, span) @ (span, O/G) (faster in OpenBLAS than the transposed product)."""
    b, c = x.shape[:2]
    o = g.shape[1]
    out = g.shape[2:]
    columns = _FlatColumns(xp, x, kernel, out, pads, dilation, groups)
    flat, span = columns.flat, columns.span

    def chunk(lo, hi):
        n = hi - lo
        cols = columns(lo, hi)
        spread = xp.zeros((n, o, span), g.dtype)
        grid = xp.lib.stride_tricks.as_strided(
            spread, (n, o) + tuple(out), spread.strides[:2] + tuple(s * g.itemsize for s in flat))
        grid[...] = g[lo:hi]
        spread = spread.reshape(n, groups, o // groups, span)
        return xp.matmul(cols, spread.swapaxes(-1, -2)).sum(0)        # (G, K*C/G, O/G)

    parts = map_samples(xp, b, (c * math.prod(kernel) + o) * span * x.itemsize, chunk)
    gw = parts[0] if len(parts) == 1 else sum(parts[1:], parts[0])
    return xp.ascontiguousarray(gw.swapaxes(1, 2)).reshape((o, c // groups) + tuple(kernel))


@_device_first("convolution_weight")
def conv_weight_grad(xp, x, g, kernel, stride, pads, dilation, groups):
    """The adjoint of conv_forward in its weight: (O, C/G, *K) from x and g (B, O, *P)."""
    b, c = x.shape[:2]
    o = g.shape[1]
    out = g.shape[2:]   # may be fewer windows than x allows (a transposed conv's padding)
    if g.size == 0:     # an empty batch (or no windows): nothing reaches the weight
        return xp.zeros((o, c // groups) + tuple(kernel), xp.result_type(x, g))
    if is_pointwise(kernel, pads):
        return pointwise_weight_grad(xp, x, g, stride, groups)

    pixel_major = _pixel_major(c // groups, kernel, out)
    npix = math.prod(out)
    # (on fewer pixels the per-sample products over the span are too short: 1.3x slower)
    if npix >= _FEW_PIXELS and _flat_rows(x.shape, o, stride, pads, out, groups,
                                          pixel_major, _batch_inner(c // groups, kernel, out)):
        return _flat_weight_grad(xp, x, g, kernel, pads, dilation, groups)
    # (one group: the single product below does as well)
    batch_inner = groups > 1 and _batch_inner(c // groups, kernel, out)

    def chunk(lo, hi):
        n = hi - lo
        if batch_inner:
            cols = _batch_cols(xp, x[lo:hi], kernel, out, stride, pads, dilation, groups)
            gt = _batch_last(xp, g[lo:hi], ()).reshape(groups, o // groups, -1)
            return _product_nt(xp, gt, cols).reshape(o, cols.shape[1])
        if not pixel_major:
            cols = _row_cols(xp, x[lo:hi], kernel, out, stride, pads, dilation, groups)
            gt = xp.ascontiguousarray(xp.moveaxis(g[lo:hi], 1, 0)).reshape(groups, o // groups,
                                                                           -1)
            return _product_nt(xp, gt, cols).reshape(o, cols.shape[1])
        cols = _group_cols(xp, _channels_last(xp, x[lo:hi], pads), kernel, out, stride,
                           dilation, groups)
        if groups == 1 and npix < _FEW_PIXELS:
            # one (O, n*P) @ (n*P, K*C) product over a transposed copy of the small g
            gt = xp.ascontiguousarray(g[lo:hi].reshape(n, o, npix).transpose(1, 0, 2))
            return gt.reshape(o, n * npix) @ cols.reshape(n * npix, -1)
        cols = cols.reshape(n, npix, groups, cols.shape[-1]).transpose(0, 2, 1, 3)
        # per sample (O/G, P) @ (P, K*C/G), g in its own layout, summed over the chunk
        gs = g[lo:hi].reshape(n, groups, o // groups, npix)
        if o == groups:
            return xp.einsum("ngp,ngpk->gk", gs[:, :, 0], cols)
        return xp.matmul(gs, cols).sum(0)

    per_sample = math.prod(out) * math.prod(kernel) * c * x.itemsize
    parts = map_samples(xp, b, per_sample, chunk)
    gw = parts[0] if len(parts) == 1 else sum(parts[1:], parts[0])
    if batch_inner or not pixel_major:
        return gw.reshape((o, c // groups) + tuple(kernel))
    nd = len(kernel)
    gw = gw.reshape((o,) + tuple(kernel) + (c // groups,))
    return xp.ascontiguousarray(gw.transpose((0, nd + 1) + tuple(range(1, nd + 1))))
