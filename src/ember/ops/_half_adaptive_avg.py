"""Adaptive average pooling of 16-bit floats on the CPU, rounded where PyTorch's CPU kernels
round: the 3-D kernel sums each window in the input's dtype, in (t, h, w) order, and divides
the sum by kT, kH and kW in turn, each step rounded; the 2-D (and 1-D) kernel sums in float32
and divides by kH then kW before one rounding; every backward adds grad / kT / kH / kW (each
division rounded) into each window in output order, rounding each add. A product with 1/k
weights misses the ties these exact sums land on (a float32 sum, the 3-D kernel's roundings)."""

import itertools

import numpy as np

from ember.ops._pool_args import adaptive_bounds
from ember.ops._separable import apply_mats


def is_half_cpu(xp, dtype):
    """Whether an array of ``dtype`` in namespace ``xp`` takes these kernels."""
    return xp is np and dtype.itemsize == 2 and dtype.kind in "fV"


def _windows(shape, out):
    """Per dim: window starts and sizes."""
    return [(lo, hi - lo) for lo, hi in (adaptive_bounds(s, o) for s, o in zip(shape, out))]


def _divided(acc, sizes, dtype, each_rounded):
    """``acc`` divided by each dim's window sizes in turn (the sizes as ``dtype`` holds them)."""
    nd = len(sizes)
    for i, size in enumerate(sizes):
        shape = [1] * nd
        shape[i] = -1
        acc = acc / size.astype(dtype).astype(np.float32).reshape(shape)
        if each_rounded:
            acc = acc.astype(dtype).astype(np.float32)
    return acc.astype(dtype)


def pool2d(x, out):
    """The 2-D (and 1-D) kernel's forward: float32 window sums, then / kH / kW, rounded once."""
    spatial = x.shape[x.ndim - len(out):]
    wins = _windows(spatial, out)
    masks = []
    for size, (lo, k) in zip(spatial, wins):
        pos = np.arange(size)
        masks.append(((pos >= lo[:, None]) & (pos < (lo + k)[:, None])).astype(np.float32))
    sums = apply_mats(np, x.astype(np.float32), masks)
    return _divided(sums, [k for _, k in wins], x.dtype, False)


def pool3d(x, out):
    """The 3-D kernel's forward, each window summed in ``x``'s dtype."""
    dtype, spatial = x.dtype, x.shape[-3:]
    wins = _windows(spatial, out)
    xf = x.astype(np.float32)
    acc = np.zeros(x.shape[:-3] + tuple(out), np.float32)
    (lt, kt), (lh, kh), (lw, kw) = wins
    for a in range(int(kt.max())):
        it, mt = np.minimum(lt + a, spatial[0] - 1), a < kt
        for b in range(int(kh.max())):
            ih, mh = np.minimum(lh + b, spatial[1] - 1), b < kh
            for c in range(int(kw.max())):
                iw, mw = np.minimum(lw + c, spatial[2] - 1), c < kw
                vals = xf[..., it[:, None, None], ih[None, :, None], iw[None, None, :]]
                mask = mt[:, None, None] & mh[None, :, None] & mw[None, None, :]
                acc = np.where(mask, (acc + vals).astype(dtype).astype(np.float32), acc)
    return _divided(acc, [kt, kh, kw], dtype, True)


def pool_backward(grad, in_shape):
    """The 1-, 2- and 3-D kernels' backward: grad / kT / kH / kW (each step rounded) added into
    each window in output order, each add rounded."""
    dtype, nd = grad.dtype, len(in_shape)
    out = grad.shape[-nd:]
    wins = _windows(in_shape, out)
    delta = _divided(grad.astype(np.float32), [k for _, k in wins], dtype, True)
    delta = delta.astype(np.float32)
    gx = np.zeros(grad.shape[:-nd] + tuple(in_shape), np.float32)
    new = (None,) * nd
    for pos in itertools.product(*(range(o) for o in out)):
        window = (...,) + tuple(slice(lo[i], lo[i] + k[i]) for i, (lo, k) in zip(pos, wins))
        step = gx[window] + delta[(...,) + pos + new]
        gx[window] = step.astype(dtype).astype(np.float32)
    return gx.astype(dtype)
