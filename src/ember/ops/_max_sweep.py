"""The max-pooling sweep shared by max pooling and (uniform-window) adaptive max pooling."""

import numpy as np

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
    # per dim and kernel offset: the flat-index term and the in-bounds mask of each position
    terms, inside = [], []
    for i in range(nd):
        stride_i = int(np.prod(size[i + 1:], dtype=np.int64))
        shape = (-1,) + (1,) * (nd - 1 - i)
        coords = [np.arange(out[i]) * s[i] - p[i] + j * d[i] for j in range(k[i])]
        terms.append([xp.asarray(np.clip(c, 0, size[i] - 1) * stride_i).reshape(shape)
                      for c in coords])
        inside.append([xp.asarray((c >= 0) & (c < size[i])).reshape(shape) for c in coords])

    def flat_and_valid(js):
        flat, valid = terms[0][js[0]], inside[0][js[0]]
        for i in range(1, nd):
            flat, valid = flat + terms[i][js[i]], valid & inside[i][js[i]]
        return flat, valid

    index = xp.zeros(best.shape, np.int64)
    hit = xp.empty(best.shape, bool)
    for js, view in zip(reversed(offsets), reversed(views)):   # the first match is written last
        flat, valid = flat_and_valid(js)
        xp.equal(view, best, out=hit)
        if padded:
            hit &= valid
        xp.copyto(index, flat, where=hit)
    if x.dtype.kind in "fV" and xp.isnan(best).any():
        for js, view in zip(offsets, views):
            flat, valid = flat_and_valid(js)
            xp.copyto(index, flat, where=xp.isnan(view) & valid)
    return best, index


