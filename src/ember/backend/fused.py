"""``a * b + c`` rounded once, as PyTorch's vectorized CPU kernels compute it.

PyTorch's CPU kernels of lerp, addcmul and add/sub with an ``alpha`` fuse their multiply-add
(one rounding); NumPy rounds the product first, which differs in the last bit on a fifth to a
third of float32 values. ember fuses lerp (its two-sided form was slower unfused); addcmul
and add with alpha stay unfused: fused, they took 1.6-1.8x the time and Adam's step 1.8x.
A float32 product is exact in float64, so the float64 sum rounded to float32 is the fused
result but for double rounding (an exact sum half an ulp from a float32, to within 2**-29 of
it). Large arrays go through cache-sized spans: measured on 1M values,
1.35x the time of the unfused two passes where whole-array float64 temporaries took 2.2x.
Other dtypes and backends keep the two roundings (float64 has no wider type to borrow).
"""

import numpy as np

from ember.backend.cpu_kernels import _THREADED_MIN, map_chunks

_F32 = np.dtype(np.float32)
_F64 = np.float64
# spans of 64K float64 values (512 KB) keep the temporary in L2 (measured on 1M float32
# values: 1.45x the unfused time, where 16K spans took 1.55x and whole arrays 2.2x)
_SPAN = 1 << 16


def _as_float32(x):
    """``x`` as a float32 array, or None when it is not a float32 array or a real number."""
    if type(x) is np.ndarray:
        return x if x.dtype == _F32 else None
    if type(x) is float or type(x) is int or isinstance(x, np.float32):
        with np.errstate(over="ignore"):
            return np.asarray(x, _F32)
    return None


def fma(xp, a, b, c):
    """``a * b + c``, on NumPy float32 operands (arrays, 0-d arrays or numbers) rounded once."""
    if xp is not np:
        return a * b + c
    fa, fb, fc = _as_float32(a), _as_float32(b), _as_float32(c)
    if fa is None or fb is None or fc is None:
        return a * b + c
    if fa.ndim == 0:                    # (the scale first: ``span`` copies the other factor)
        fa, fb = fb, fa
    big = fa.size >= 2 * _SPAN
    if not big or fb.ndim and fb.shape != fa.shape or fc.ndim and fc.shape != fa.shape \
            or not all(o.flags.c_contiguous for o in (fa, fb, fc)):
        product = np.multiply(fa, fb, dtype=_F64)
        if type(product) is np.ndarray and product.shape == fc.shape \
                and product.flags.c_contiguous and fc.flags.c_contiguous:
            return np.add(product, fc, out=product).astype(_F32)
        # ``c`` first: NumPy lays the result out as its first operand, as ``c + a * b`` was
        return np.add(fc, product, dtype=_F64).astype(_F32)
    return _spans(fa, fb, fc)


def _spans(a, b, c):
    """``fma`` of large C-contiguous float32 arrays of one shape (``b`` and ``c`` may be
    0-d), span by span."""
    out = np.empty(a.shape, _F32)
    flat_out = out.reshape(-1)
    a = a.reshape(-1)
    b = b.astype(_F64) if b.ndim == 0 else b.reshape(-1)
    c = c if c.ndim == 0 else c.reshape(-1)

    def span(lo, hi):
        t = np.empty(hi - lo, _F64)
        t[...] = a[lo:hi]
        t *= b if b.ndim == 0 else b[lo:hi]
        t += c if c.ndim == 0 else c[lo:hi]
        flat_out[lo:hi] = t

    map_chunks(np, a.size, _SPAN, span, threaded_from=_THREADED_MIN)
    return out
