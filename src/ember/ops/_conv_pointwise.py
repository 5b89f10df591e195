"""Pointwise convolutions (a 1x1 kernel, no padding) on backend arrays: no im2col columns,
but per sample (O, C) @ (C, P) products over the pixels as they lie (strided ones read
through a view), in the layouts of _conv_kernels.py, split over the batch by
map_samples."""

import math

from ember.ops._conv_chunks import map_samples

__all__ = ["is_pointwise", "pointwise_forward", "pointwise_input_grad",
           "pointwise_weight_grad"]


def is_pointwise(kernel, pads):
    """Whether a convolution is pointwise (a 1x1 kernel, no padding): a product of each
    sample's (C, P) pixels as they lie, no columns and no transposes."""
    return all(k == 1 for k in kernel) and not any(lo or hi for lo, hi in pads)


def _subsampled(x, stride, out):
    """The pixels (B, C, *out) a pointwise convolution with ``stride`` reads from ``x``."""
    if all(s == 1 for s in stride) and tuple(x.shape[2:]) == tuple(out):
        return x
    return x[(slice(None), slice(None)) + tuple(slice(0, (p - 1) * s + 1, s)
                                                for p, s in zip(out, stride))]


def _pointwise_product(xp, w, x, groups, target, bias):
    """``target`` (n, O, P) = w (G, O/G, C/G) times x (n, C, P), group by group, plus bias."""
    n, _, p = x.shape
    g, og, cg = w.shape
    if cg == 1:                         # one input channel per group: a broadcast product
        res = x.reshape(n, g, 1, p) * w.reshape(g, og, 1)
    elif groups == 1 and target.dtype == xp.result_type(w, x):
        res = xp.matmul(w[0], x, out=target)
    else:
        res = xp.matmul(w, x.reshape(n, g, cg, p))
    res = res.reshape(target.shape)
    if bias is not None:
        xp.add(res, bias.reshape(-1, 1), out=target)
    elif res is not target:
        target[...] = res


def pointwise_forward(xp, x, w, stride, groups, bias, dst):
    """conv_forward of a pointwise convolution, per chunk of the batch: (O, C) @ (C, P)."""
    b, o, c = x.shape[0], w.shape[0], x.shape[1]
    out = dst.shape[2:]
    xs = _subsampled(x, stride, out)
    wg = w.reshape(groups, o // groups, c // groups)
    npix = math.prod(out)

    def chunk(lo, hi):
        part = xp.ascontiguousarray(xs[lo:hi]).reshape(hi - lo, c, npix)
        _pointwise_product(xp, wg, part, groups, dst[lo:hi].reshape(hi - lo, o, npix), bias)

    map_samples(xp, b, npix * (c + o) * x.itemsize, chunk)
    return dst


def pointwise_input_grad(xp, g, w, size, stride, groups, bias):
    """conv_input_grad of a pointwise convolution: (C, O) @ (O, P) per sample, written to
    the pixels the stride read (the others, zeros), plus bias."""
    b, o = g.shape[:2]
    c = w.shape[1] * groups
    dtype = xp.result_type(g, w) if bias is None else xp.result_type(g, w, bias)
    dst = xp.empty((b, c) + tuple(size), dtype)
    out = g.shape[2:]
    npix = math.prod(out)
    wt = w.reshape(groups, o // groups, c // groups).swapaxes(1, 2)
    whole = _subsampled(dst, stride, out) is dst
    if not whole:
        dst[...] = 0 if bias is None else bias.reshape((-1,) + (1,) * len(size))
        bias = None

    def chunk(lo, hi):
        n = hi - lo
        part = xp.ascontiguousarray(g[lo:hi]).reshape(n, o, npix)
        if whole:
            _pointwise_product(xp, wt, part, groups, dst[lo:hi].reshape(n, c, npix), bias)
            return
        res = xp.empty((n, c, npix), dst.dtype)
        _pointwise_product(xp, wt, part, groups, res, None)
        sub = _subsampled(dst[lo:hi], stride, out)
        sub += res.reshape(sub.shape)

    map_samples(xp, b, npix * (c + o) * g.itemsize, chunk)
    return dst


def pointwise_weight_grad(xp, x, g, stride, groups):
    """conv_weight_grad of a pointwise convolution: per sample (O, P) @ (P, C), summed."""
    b, c = x.shape[:2]
    o = g.shape[1]
    out = g.shape[2:]
    npix = math.prod(out)
    xs = _subsampled(x, stride, out)

    def chunk(lo, hi):
        n = hi - lo
        gs = g[lo:hi].reshape(n, groups, o // groups, npix)
        part = xp.ascontiguousarray(xs[lo:hi]).reshape(n, groups, c // groups, npix)
        return xp.matmul(gs, part.swapaxes(-1, -2)).sum(0)

    parts = map_samples(xp, b, npix * (c + o) * x.itemsize, chunk)
    gw = parts[0] if len(parts) == 1 else sum(parts[1:], parts[0])
    return gw.reshape((o, c // groups) + (1,) * len(out))
