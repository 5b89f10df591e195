"""Bilinear (trilinear) and nearest grid sampling on backend arrays, forward and backward.

The arithmetic follows the composite of ember ops in grid_sampling.py step by step (same
roundings), so the values agree with it; the gradients are written out instead of traced:
the input's by one scatter of every corner's weighted gradient, the grid's from the corner
values times the derivative of each weight and of the padding rule.
"""

import numpy as np

from ember.backend import bincount

__all__ = ["FAST_DTYPES", "sample_arrays", "sample_backward_arrays"]

FAST_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


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
    c = xp.where(inside, c, xp.clip(xp.nan_to_num(c, nan=0.0), 0, size - 1))
    return c, xp.where(inside, slope, 0).astype(c.dtype, copy=False)


def _axis(xp, c, size, stride):
    """(in-bounds mask, flat-index term) of the integer-valued coordinates ``c`` on one axis
    (an out-of-bounds corner reads the zero row whatever its index: only NaN must go)."""
    ok = (c >= 0) & (c <= size - 1)
    return ok, xp.where(ok, c, 0).astype(np.int64) * stride


def _corner(parts):
    """(flat plane index, in-bounds mask) of a corner from its axes' ``_axis`` parts."""
    valid, flat = parts[0]
    for ok, term in parts[1:]:
        valid, flat = valid & ok, flat + term
    return flat, valid


def _taps(xp, grid, sizes, interpolation_mode, padding_mode, align_corners):
    """Per corner: (flat index, mask, weight, per-axis weights, corner bits; the last three
    None when nearest), and the coordinates' slopes; grid (N, P, nd)."""
    nd = len(sizes)
    src = [_source(xp, grid[..., nd - 1 - d], sizes[d], padding_mode, align_corners)
           for d in range(nd)]
    slopes = [s for _, s in src]
    strides = [int(np.prod(sizes[d + 1:], dtype=np.int64)) for d in range(nd)]
    if interpolation_mode == 1:
        flat, valid = _corner([_axis(xp, xp.round(c), size, stride)
                               for (c, _), size, stride in zip(src, sizes, strides)])
        return [(flat, valid, None, None, None)], slopes
    low = [xp.floor(c) for c, _ in src]
    frac = [c - f for (c, _), f in zip(src, low)]
    parts = [[_axis(xp, f + b, size, stride) for b in (0, 1)]
             for f, size, stride in zip(low, sizes, strides)]
    taps = []
    for corner in np.ndindex(*(2,) * nd):
        ws = [t if b else 1 - t for t, b in zip(frac, corner)]
        weight = ws[0]
        for w in ws[1:]:
            weight = weight * w
        flat, valid = _corner([p[b] for p, b in zip(parts, corner)])
        taps.append((flat, valid, weight, ws, corner))
    return taps, slopes


def _rows(xp, x):
    """x (N, C, *in) as rows of channels, (N * (plane + 1), C), with a zero row after each
    example's plane: the value of every out-of-bounds corner."""
    n, ch = x.shape[:2]
    plane = int(np.prod(x.shape[2:], dtype=np.int64))
    rows = xp.empty((n, plane + 1, ch), dtype=x.dtype)
    rows[:, :-1] = x.reshape(n, ch, plane).transpose(0, 2, 1)
    rows[:, -1] = 0
    return rows.reshape(n * (plane + 1), ch)


def _locations(xp, flat, valid, plane):
    """The rows of ``_rows`` (N, P) of the corners at plane index ``flat``."""
    offsets = (xp.arange(flat.shape[0], dtype=np.int64) * (plane + 1))[:, None]
    return xp.where(valid, flat, plane) + offsets


def _points(grid):
    """The number of sampling points per example of ``grid`` (N, *out, nd)."""
    return int(np.prod(grid.shape[1:-1], dtype=np.int64))


def sample_arrays(xp, x, grid, interpolation_mode, padding_mode, align_corners):
    """``grid_sample`` of x (N, C, *in) at grid (N, *out, nd), bilinear (0) or nearest (1)."""
    n, ch, sizes = x.shape[0], x.shape[1], tuple(x.shape[2:])
    plane = int(np.prod(sizes, dtype=np.int64))
    rows = _rows(xp, x)
    taps, _ = _taps(xp, grid.reshape(n, _points(grid), len(sizes)), sizes, interpolation_mode,
                    padding_mode, align_corners)
    out = None
    for flat, valid, weight, _, _ in taps:
        term = rows.take(_locations(xp, flat, valid, plane), axis=0)     # (N, P, C)
        if weight is not None:
            term = term * weight[:, :, None]
        out = term if out is None else out + term
    out = xp.ascontiguousarray(out.transpose(0, 2, 1))
    return out.reshape((n, ch) + tuple(grid.shape[1:-1]))


def sample_backward_arrays(xp, grad, x, grid, interpolation_mode, padding_mode, align_corners):
    """(input gradient, grid gradient) of ``sample_arrays`` for the output gradient ``grad``."""
    n, ch, sizes = x.shape[0], x.shape[1], tuple(x.shape[2:])
    nd, plane = len(sizes), int(np.prod(sizes, dtype=np.int64))
    g2 = grid.reshape(n, _points(grid), nd)
    go = grad.reshape(n, ch, g2.shape[1]).transpose(0, 2, 1)        # (N, P, C)
    taps, slopes = _taps(xp, g2, sizes, interpolation_mode, padding_mode, align_corners)
    places, weights = [], []
    dfrac = [None] * nd
    rows = None if interpolation_mode == 1 else _rows(xp, x)
    for flat, valid, weight, ws, corner in taps:
        at = _locations(xp, flat, valid, plane)
        places.append(at)
        if weight is None:
            continue
        weights.append(weight)
        seen = xp.einsum("npc,npc->np", go, rows.take(at, axis=0))
        for d in range(nd):
            part = seen
            for e in range(nd):
                if e != d:
                    part = part * ws[e]
            if not corner[d]:       # (this corner's weight falls as the coordinate rises)
                part = -part
            dfrac[d] = part if dfrac[d] is None else dfrac[d] + part
    gx = _scatter(xp, go, xp.stack(places), xp.stack(weights) if weights else None,
                  plane).astype(x.dtype, copy=False).reshape(x.shape)
    gg = xp.zeros(g2.shape, dtype=grid.dtype)
    if interpolation_mode != 1:
        for d in range(nd):
            gg[..., nd - 1 - d] = dfrac[d] * slopes[d]
    return gx, gg.reshape(grid.shape)


def _scatter(xp, go, places, weights, plane):
    """The input gradient (N, C, plane): ``go`` (N, P, C) times each corner's ``weights``
    (corners, N, P; None: nearest) summed into its rows ``places`` (corners, N, P)."""
    n, _, ch = go.shape
    bins = n * (plane + 1)          # (each example's zero row is dropped after)
    if ch > 16:     # one weighted count over every (row, channel) bin
        index = places[..., None] * ch + xp.arange(ch, dtype=np.int64)
        amounts = go[None] if weights is None else go[None] * weights[..., None]
        amounts = xp.broadcast_to(amounts, index.shape)
        gx = bincount(xp, index.reshape(-1), amounts.reshape(-1), minlength=bins * ch)
        gx = gx.reshape(n, plane + 1, ch)[:, :-1].transpose(0, 2, 1)
        return xp.ascontiguousarray(gx)
    flat = places.reshape(-1)
    gx = xp.empty((n, ch, plane), dtype=np.float64)
    for c in range(ch):             # a count per channel: no (rows x channels) index
        amounts = go[:, :, c][None] if weights is None else go[:, :, c][None] * weights
        amounts = xp.broadcast_to(amounts, places.shape)
        gx[:, c] = bincount(xp, flat, amounts.reshape(-1), minlength=bins).reshape(
            n, plane + 1)[:, :-1]
    return gx
