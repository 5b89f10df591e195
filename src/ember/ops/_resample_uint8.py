"""uint8 bilinear and bicubic interpolation as PyTorch's CPU kernels compute it: separable
passes (width first, then height) in fixed point, like Pillow's resampler.

Each resized dim's float weights (the same taps as the float kernels') become integers
scaled by 2**p, p the largest precision that keeps the biggest scaled weight under 2**15
(int16); each output is (sum of input times weight + 2**(p-1)) >> p, clamped to [0, 255],
and the next pass reads those rounded bytes. Dims whose size does not change are not
resampled.
"""

import numpy as np

from ember.ops._separable import Taps

__all__ = ["resample_uint8"]


def _fixed_point(matrix):
    """The (out, in) weights as integers (in float64, where sums stay exact) and the shift."""
    top = matrix.max()
    precision = 0
    while precision < 22 and int(0.5 + top * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    scaled = matrix * float(1 << precision)
    return np.trunc(scaled + np.where(scaled < 0, -0.5, 0.5)), precision


def resample_uint8(xp, x, in_sizes, out_sizes, mats):
    """``x`` (N, C, H, W) uint8 resampled by ``mats`` (a Taps or matrix per spatial dim)."""
    y = x
    for axis in (3, 2):
        n, o, m = in_sizes[axis - 2], out_sizes[axis - 2], mats[axis - 2]
        if n == o:
            continue
        weights, precision = _fixed_point(m.matrix if isinstance(m, Taps) else m)
        moved = xp.moveaxis(y, axis, -1).astype(np.float64)
        acc = moved @ xp.asarray(weights.T) + float(1 << precision >> 1)
        acc = xp.floor(acc * (1.0 / (1 << precision)))
        y = xp.moveaxis(acc.clip(0, 255).astype(np.uint8), -1, axis)
    # the height pass leaves H innermost; PyTorch's result is row-major (like_input then
    # gives a channels-last input's layout)
    return xp.ascontiguousarray(y) if y is not x else x.copy()
