"""The max-pooling sweep shared by max pooling and (uniform-window) adaptive max pooling."""

import numpy as np

from ember.backend import device_constant, reads_stall

__all__ = ["max_sweep"]


def _lowest(dtype):
    return -np.inf if dtype.kind in "fV" else np.iinfo(dtype).min


def max_sweep(xp, x, nd, k, s, p, d, out):
    """(values, flat plane indices) of max pooling ``x`` over its trailing ``nd`` dims with
    checked kernel ``k``, stride ``s``, padding ``p``, dilation ``d`` and output size ``out``.

    The maximum is a running ``maximum`` over the kernel offsets' strided views (NaN wins);
    the index is then the first in-bounds offset equal to it, except that a NaN maximum takes
    the last NaN, as PyTorch's kernel does.
    """
    size = x.shape[-nd:]
    need = [(o - 1) * si + di * (ki - 1) + 1 - (n + pi)
            for o, si, di, ki, n, pi in zip(out, s, d, k, size, p)]
    padded = any(p) or any(v > 0 for v in need)
    if padded:
        pads = [(0, 0)] * (x.ndim - nd) + [(pi, max(v, 0)) for pi, v in zip(p, need)]
        x = xp.pad(x, pads, constant_values=_lowest(x.dtype))
    offsets = list(np.ndindex(*k))
    views = [x[(Ellipsis,) + tuple(slice(j * di, j * di + (o - 1) * si + 1, si)
                                   for j, di, si, o in zip(js, d, s, out))] for js in offsets]
    best = views[0].copy()
    for view in views[1:]:
        xp.maximum(best, view, out=best)
    geometry = (size,) + tuple(tuple(v) for v in (k, s, p, d, out))
    start, delta, *inside = device_constant(x, ("max_sweep",) + geometry,
                                            lambda: _index_tables(*geometry))

    def valid(js):
        mask = inside[0][js[0]]
        for i in range(1, nd):
            mask = mask & inside[i][js[i]]
        return mask

    # which = the first offset whose view equals the maximum, in arithmetic (copyto with a
    # where= mask is ten times slower)
    itype = np.min_scalar_type(len(offsets))
    which = xp.zeros(best.shape, itype)
    found = xp.zeros(best.shape, bool)
    hit = xp.empty(best.shape, bool)
    for n, view in enumerate(views):
        xp.equal(view, best, out=hit)
        if padded:
            hit &= valid(offsets[n])
        if n:
            xp.greater(hit, found, out=hit)         # hit and not found before
            which += hit * itype.type(n)
        found |= hit
    # a NaN maximum takes the last NaN's offset (on a GPU without asking whether there is
    # one: the read would wait for the device)
    if x.dtype.kind in "fV" and (reads_stall(xp) or xp.isnan(best).any()):
        for n, view in enumerate(views):
            xp.copyto(which, n, where=xp.isnan(view) & valid(offsets[n]))
    return best, delta.take(which) + start


def _index_tables(size, k, s, p, d, out):
    """The host tables that turn a sweep's kernel offsets into flat plane indices: the flat
    index is start[o] + delta[j] (output position o, kernel offset j; the sweep records only
    j, in the narrowest integer type, and looks up delta once), and inside[i][j] marks the
    positions o whose offset j along dim i lies inside the unpadded input."""
    nd = len(size)
    start, delta, inside = 0, np.zeros(k, np.int64), []
    for i in range(nd):
        stride_i = int(np.prod(size[i + 1:], dtype=np.int64))
        shape = (-1,) + (1,) * (nd - 1 - i)
        first = np.arange(out[i]) * s[i] - p[i]
        start = start + (first * stride_i).reshape(shape)
        delta += (np.arange(k[i]) * d[i] * stride_i).reshape(shape)
        taps = first + np.arange(k[i])[:, None] * d[i]
        inside.append(((taps >= 0) & (taps < size[i])).reshape((k[i],) + shape))
    return (np.asarray(start, np.int64), delta.reshape(-1)) + tuple(inside)
