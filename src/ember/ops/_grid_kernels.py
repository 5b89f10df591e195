"""Bilinear (trilinear) and nearest grid sampling on backend arrays, forward and backward.

The arithmetic follows the composite of ember ops in grid_sampling.py step by step (same
roundings), so the values agree with it; the gradients are written out instead of traced:
the input's by one scatter of every corner's weighted gradient, the grid's from the corner
values times the derivative of each weight and of the padding rule.
"""

import math

import ml_dtypes
import numpy as np

from ember.backend import bincount

__all__ = ["FAST_DTYPES", "sample_arrays", "sample_backward_arrays"]

_COUNT_ENTRIES = 2 ** 18    # (measured on CPU between one count per channel and one for all)

# 16-bit floats step by step in their own dtype, as PyTorch's CPU kernel and the composite
# (its values differ from float32 math rounded once in most elements): only the dot products
# and the sums of the backward are float32 and wider
FAST_DTYPES = frozenset(map(np.dtype, (np.float32, np.float64, np.float16, ml_dtypes.bfloat16)))


def _source(xp, g, size, padding_mode, align_corners):
    """The source coordinates of normalized ``g`` along an axis of ``size`` after the padding
    rule (0 zeros, 1 border, 2 reflection), and their derivative in ``g``."""
    if align_corners:
        c, slope = (g + 1) * ((size - 1) / 2), (size - 1) / 2
    else:
        c, slope = ((g + 1) * size - 1) / 2, size / 2
    if padding_mode == 0:
        return c, slope
    if padding_mode == 2:
        twice_low, twice_high = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
        if twice_low == twice_high:     # a single pixel: everything maps to it
            return xp.zeros_like(c), xp.zeros_like(c)
        low, span = twice_low / 2, (twice_high - twice_low) / 2
        c = c - low
        sign = xp.sign(c)               # (|x|' at 0 is 0, as ember's abs)
        c = xp.abs(c)
        extra = xp.fmod(c, span)
        even = xp.fmod(xp.floor(c / span), 2) == 0
        c = xp.where(even, extra + low, span - extra + low)
        slope = xp.where(even, sign, -sign) * slope
    inside = (c > 0) & (c < size - 1)   # no gradient at or beyond the ends; NaN taken as 0
    c = xp.where(inside, c, xp.fmin(xp.fmax(c, 0.0), size - 1.0))   # (NaN: 0)
    return c, xp.where(inside, slope, 0).astype(c.dtype, copy=False)


class _Layout:
    """Where the taps read: x (N, C, *in) as rows of channels in a plane padded by ``pad`` zero
    pixels on every side (an out-of-bounds tap reads a zero without a mask)."""

    def __init__(self, shape, pad):
        self.n, self.sizes, self.pad = shape[0], tuple(shape[2:]), pad
        self.padded = tuple(s + 2 * pad for s in self.sizes)
        self.strides = [math.prod(self.padded[d + 1:])
                        for d in range(len(self.sizes))]
        self.plane = math.prod(self.padded)

    def rows(self, xp, x):
        """x as (N * padded plane, C) rows."""
        rows = xp.zeros((x.shape[0],) + self.padded + (x.shape[1],), dtype=x.dtype)
        rows[self.inner()] = xp.moveaxis(x, 1, -1)
        return rows.reshape(x.shape[0] * self.plane, x.shape[1])

    def inner(self):
        """The index of the unpadded plane in (N, *padded, ...)."""
        return (slice(None),) + (slice(self.pad, -self.pad or None),) * len(self.sizes)

    def shifted(self, xp, base, d, taps):
        """Row terms (T, N, P) on axis ``d`` of the taps ``base + t`` for t in ``taps``:
        ``base`` is clipped (NaN: below) where none of its taps is inside, then read as zeros."""
        low, high = -taps[-1] - 1, self.sizes[d] - taps[0]
        if base.dtype.itemsize == 2:    # (the bounds exactly: 16-bit floats round past 256)
            base = base.astype(np.float32)
        i = xp.fmin(xp.fmax(base, low), high).astype(np.int64) * self.strides[d]
        shifts = xp.asarray([(t + self.pad) * self.strides[d] for t in taps], dtype=np.int64)
        return i + shifts.reshape(-1, 1, 1)

    def placed(self, xp, coords, d):
        """Row terms (T, N, P) on axis ``d`` of the integer-valued ``coords``, clipped to the
        ``pad`` pixels around the plane (NaN: below; a 16-bit last pixel may round up)."""
        c = xp.stack(coords)
        if c.dtype.itemsize == 2:       # (the bounds exactly)
            c = c.astype(np.float32)
        i = xp.fmin(xp.fmax(c, -self.pad), self.sizes[d] - 1 + self.pad).astype(np.int64)
        return (i + self.pad) * self.strides[d]

    def combine(self, xp, terms):
        """Rows (K, N, P) of every corner from each axis' row terms (T_d, N, P), the corners in
        ``np.ndindex`` order over the axes' taps."""
        nd, at = len(terms), None
        for d, t in enumerate(terms):
            t = t.reshape((1,) * d + (t.shape[0],) + (1,) * (nd - 1 - d) + t.shape[1:])
            at = t if at is None else at + t
        at = at + xp.arange(self.n, dtype=np.int64)[:, None] * self.plane
        return at.reshape((int(np.prod(at.shape[:nd])),) + at.shape[nd:])


def _product(xp, ws):
    """The (K, N, P) products of the axes' weights ``ws`` (per axis a list of (N, P) arrays),
    in ``combine``'s corner order, multiplied axis after axis as the composite does."""
    nd, out = len(ws), None
    for d, w in enumerate(ws):
        w = xp.stack(w).reshape((1,) * d + (len(w),) + (1,) * (nd - 1 - d) + w[0].shape)
        out = w if out is None else out * w
    return out.reshape((int(np.prod(out.shape[:nd])),) + out.shape[nd:])


def _taps(xp, grid, layout, interpolation_mode, padding_mode, align_corners):
    """(corner rows (K, N, P), corner weights (K, N, P), per-axis weights: both None when
    nearest) and the coordinates' slopes per axis; grid (N, P, nd)."""
    sizes = layout.sizes
    nd = len(sizes)
    src = [_source(xp, grid[..., nd - 1 - d], sizes[d], padding_mode, align_corners)
           for d in range(nd)]
    slopes = [s for _, s in src]
    if interpolation_mode == 1:
        at = layout.combine(xp, [layout.shifted(xp, xp.round(c), d, (0,))
                                 for d, (c, _) in enumerate(src)])
        return at, None, None, slopes
    low = [xp.floor(c) for c, _ in src]
    at = layout.combine(xp, [layout.shifted(xp, f, d, (0, 1)) for d, f in enumerate(low)])
    ws = [[1 - (c - f), c - f] for (c, _), f in zip(src, low)]
    return at, _product(xp, ws), ws, slopes


def _points(grid):
    """The number of sampling points per example of ``grid`` (N, *out, nd)."""
    return int(np.prod(grid.shape[1:-1], dtype=np.int64))


def sample_arrays(xp, x, grid, interpolation_mode, padding_mode, align_corners):
    """``grid_sample`` of x (N, C, *in) at grid (N, *out, nd), bilinear (0) or nearest (1)."""
    n, ch, nd = x.shape[0], x.shape[1], x.ndim - 2
    layout = _Layout(x.shape, 1 if interpolation_mode == 1 else 2)
    at, weights, _, _ = _taps(xp, grid.reshape(n, _points(grid), nd), layout,
                              interpolation_mode, padding_mode, align_corners)
    out = _weighted_sum(xp, layout.rows(xp, x), at, weights)
    return out.reshape((n, ch) + tuple(grid.shape[1:-1]))


def _weighted_sum(xp, rows, at, weights):
    """(N, C, P): the rows ``at`` (K, N, P) times their ``weights`` (None: one corner), summed
    corner after corner (one (N, P, C) take at a time)."""
    out = None
    for k in range(at.shape[0]):
        term = rows.take(at[k], axis=0)                         # (N, P, C)
        if weights is not None:
            term = term * weights[k][:, :, None]
        out = term if out is None else out + term
    return xp.ascontiguousarray(out.transpose(0, 2, 1))


def sample_backward_arrays(xp, grad, x, grid, interpolation_mode, padding_mode, align_corners):
    """(input gradient, grid gradient) of ``sample_arrays`` for the output gradient ``grad``."""
    n, ch, nd = x.shape[0], x.shape[1], x.ndim - 2
    layout = _Layout(x.shape, 1 if interpolation_mode == 1 else 2)
    g2 = grid.reshape(n, _points(grid), nd)
    go = grad.reshape(n, ch, g2.shape[1])
    at, weights, ws, slopes = _taps(xp, g2, layout, interpolation_mode, padding_mode,
                                    align_corners)
    gx = _scatter(xp, go, at, weights, layout).astype(x.dtype, copy=False)
    gg = xp.zeros(g2.shape, dtype=grid.dtype)
    if interpolation_mode != 1:
        seen = _seen(xp, go, layout.rows(xp, x), at).reshape((2,) * nd + at.shape[1:])
        for d in range(nd):     # the corners' values times the slopes of their weights
            part = xp.take(seen, 1, axis=d) - xp.take(seen, 0, axis=d)
            gg[..., nd - 1 - d] = _contract(xp, part, [w for e, w in enumerate(ws) if e != d]) \
                * slopes[d]
    return gx, gg.reshape(grid.shape)


def _seen(xp, go, rows, at):
    """(K, N, P): the output gradient ``go`` (N, C, P) dotted with each corner's rows ``at``
    (16-bit floats: in float32)."""
    acc = np.float32 if go.dtype.itemsize == 2 else go.dtype
    go = xp.ascontiguousarray(go.transpose(0, 2, 1), dtype=acc)
    seen = xp.empty(at.shape, dtype=acc)
    for k in range(at.shape[0]):
        seen[k] = xp.einsum("npc,npc->np", go, rows.take(at[k], axis=0).astype(acc, copy=False))
    return seen


def _contract(xp, part, ws):
    """``part`` (2, ..., 2, N, P) over the remaining axes times their weights (per axis a list
    of two (N, P) arrays), summed: (N, P)."""
    for w in ws:
        part = part[0] * w[0] + part[1] * w[1]
    return part


def _scatter(xp, go, places, weights, layout):
    """The input gradient (N, C, *in): ``go`` (N, C, P) times each corner's ``weights``
    (K, N, P; None: nearest) summed into its rows ``places`` (K, N, P) of ``layout``: a
    weighted count per block of channels, of about ``_COUNT_ENTRIES`` entries (at least one
    channel): a bounded index and output in cache, yet few counts for many small channels."""
    n, ch, _ = go.shape
    bins = n * layout.plane          # (the padding is dropped after)
    wide = np.float32 if go.dtype.itemsize == 2 else go.dtype   # (counts take no 16-bit)
    gx = xp.empty((n, ch) + layout.sizes, dtype=np.float64)
    block = max(1, _COUNT_ENTRIES // max(places.size, 1))
    for start in range(0, ch, block):
        part = go[:, start:start + block].transpose(0, 2, 1)[None]     # (1, N, P, B)
        b = part.shape[-1]
        index = places[..., None] if b == 1 else \
            places[..., None] * b + xp.arange(b, dtype=np.int64)
        amounts = part if weights is None else part * weights[..., None]
        amounts = xp.broadcast_to(amounts.astype(wide, copy=False), index.shape)
        counted = bincount(xp, index.reshape(-1), amounts.reshape(-1), minlength=bins * b)
        counted = counted.reshape((n,) + layout.padded + (b,))[layout.inner()]
        gx[:, start:start + b] = xp.moveaxis(counted, -1, 1)
    return gx
