"""Bicubic grid sampling on backend arrays, forward and backward.

As the composite in grid_sampling.py (same roundings): the unpadded source coordinate's
floor and fraction give 4 x 4 taps and their cubic weights (a = -0.75); each tap is padded
on its own (an integer: the padding rule moves no weight), so the grid's gradient comes from
the weights' slopes alone and the input's is one scatter of every tap's weighted gradient.
"""


from ember.ops._grid_kernels import (_Layout, _points, _product, _scatter, _seen, _source,
                                     _weighted_sum)

__all__ = ["cubic_arrays", "cubic_backward_arrays"]

_A = -0.75


def _weights(t):
    """The four cubic convolution weights of the fractions ``t`` (taps at -1, 0, 1, 2)."""
    a, s = _A, 1 - t
    u, v = t + 1, 2 - t
    return [((a * u - 5 * a) * u + 8 * a) * u - 4 * a,
            ((a + 2) * t - (a + 3)) * t * t + 1,
            ((a + 2) * s - (a + 3)) * s * s + 1,
            ((a * v - 5 * a) * v + 8 * a) * v - 4 * a]


def _slopes(t):
    """The derivatives of ``_weights`` in ``t``."""
    a, s = _A, 1 - t
    u, v = t + 1, 2 - t
    return [(3 * a * u - 10 * a) * u + 8 * a,
            (3 * (a + 2) * t - 2 * (a + 3)) * t,
            -((3 * (a + 2) * s - 2 * (a + 3)) * s),
            -((3 * a * v - 10 * a) * v + 8 * a)]


def _tap(xp, c, size, padding_mode, align_corners):
    """The integer-valued tap coordinates ``c`` after the padding rule (0 zeros, 1 border,
    2 reflection); NaN is taken as 0 by border and reflection, as the composite's clip."""
    if padding_mode == 0:
        return c
    if padding_mode == 2:
        twice_low, twice_high = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
        if twice_low == twice_high:     # a single pixel: everything maps to it
            return xp.zeros_like(c)
        low, span = twice_low / 2, (twice_high - twice_low) / 2
        c = xp.abs(c - low)
        extra = xp.fmod(c, span)
        even = xp.fmod(xp.floor(c / span), 2) == 0
        c = xp.where(even, extra + low, span - extra + low)
    return xp.fmin(xp.fmax(c, 0.0), size - 1.0)     # (NaN: 0)


def _setup(xp, x, grid, padding_mode, align_corners):
    """(the layout, tap rows (16, N, P), y-major as the composite sums them, and per axis, y
    first: the fractions and the unnormalizing slopes); grid (N, *out, 2)."""
    layout = _Layout(x.shape, 1 if padding_mode == 0 else 0)     # (else every tap is inside)
    g2 = grid.reshape(x.shape[0], _points(grid), 2)
    fracs, terms, scales = [], [], []
    for d, size in enumerate(layout.sizes):
        c, scale = _source(xp, g2[..., 1 - d], size, 0, align_corners)     # (unpadded)
        low = xp.floor(c)
        fracs.append(c - low)
        scales.append(scale)
        # (the taps in the dtype, as PyTorch's kernel: 16-bit floats round them past 256)
        taps = [low + (k - 1) for k in range(4)]
        if padding_mode != 0:
            taps = [_tap(xp, t, size, padding_mode, align_corners) for t in taps]
        terms.append(layout.placed(xp, taps, d))
    return layout, layout.combine(xp, terms), fracs, scales


def cubic_arrays(xp, x, grid, padding_mode, align_corners):
    """Bicubic ``grid_sample`` of x (N, C, H, W) at grid (N, *out, 2)."""
    n, ch = x.shape[:2]
    layout, at, (ty, tx), _ = _setup(xp, x, grid, padding_mode, align_corners)
    out = _weighted_sum(xp, layout.rows(xp, x), at, _product(xp, [_weights(ty), _weights(tx)]))
    return out.reshape((n, ch) + tuple(grid.shape[1:-1]))


def cubic_backward_arrays(xp, grad, x, grid, padding_mode, align_corners):
    """(input gradient, grid gradient) of ``cubic_arrays`` for the output gradient ``grad``."""
    n, ch = x.shape[:2]
    layout, at, (ty, tx), (sy, sx) = _setup(xp, x, grid, padding_mode, align_corners)
    go = grad.reshape(n, ch, at.shape[2])
    wy, wx = _weights(ty), _weights(tx)
    gx = _scatter(xp, go, at, _product(xp, [wy, wx]), layout).astype(x.dtype, copy=False)
    seen = _seen(xp, go, layout.rows(xp, x), at).reshape((4, 4) + at.shape[1:])
    wy, wx, dy, dx = (xp.stack(w).astype(seen.dtype, copy=False)
                      for w in (wy, wx, _slopes(ty), _slopes(tx)))
    gg = xp.empty((n, at.shape[2], 2), dtype=grid.dtype)
    gg[..., 0] = xp.einsum("ijnp,inp,jnp->np", seen, wy, dx) * sx
    gg[..., 1] = xp.einsum("ijnp,inp,jnp->np", seen, dy, wx) * sy
    return gx, gg.reshape(grid.shape)
