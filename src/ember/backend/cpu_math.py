"""Fast float32 special functions for NumPy arrays, and the CPU ``special`` namespace.

SciPy's float32 ``erf`` runs a scalar float64 loop (about 15x the time of ``np.exp``); the erf
here is a piecewise polynomial evaluated with whole-array float32 operations, within 2 ulp of
the float64 erf rounded to float32 (tests/test_cpu_math.py sweeps the float32 line).
"""

import numpy as np

from ember.backend.cpu_kernels import _THREADED_MIN, map_chunks


def _f32(*coefficients):
    """The coefficients as float32 scalars (the in-place steps then stay in float32)."""
    return tuple(np.float32(c) for c in coefficients)


# |x| < _SMALL: erf(x) = x + x * r(x^2). The leading x is exact, so r's rounding errors shrink
# by r's size (|r| < 0.16). Coefficients lowest first, Lawson-weighted least squares over
# [0, _SMALL], absolute error 1.2e-9.
_SMALL = 1.0
_SMALL_F32 = np.float32(_SMALL)
_R_SMALL = _f32(0.12837916591619614, -0.3761262715560195, 0.11283600428795308,
            -0.02685445632679446, 0.005189559750703678, -0.0008021073536056323,
            7.88994299654247e-05)

# |x| >= _SMALL: erf(|x|) = 1 - exp(-x^2) erfcx(|x|), erfcx(a) = P(t), t = 1 / (1 + a / 2),
# fitted over [_SMALL, 6] to a relative error of 7e-9; past 6, exp(-x^2) leaves P no weight.
_ERFCX_T = 0.5
_ERFCX_P = _f32(-8.067065819447798e-05, 0.28375491680396103, 0.2674078093073633,
            0.31954312433114423, -0.04229579805811124, 0.4844089368821043,
            -0.4155261841782698, 0.10270105856701828)
_SIGN_BIT = np.int32(-0x80000000)
_BLOCK = 1 << 16


def _horner(u, coefficients):
    """The polynomial (float32 coefficients, lowest first) at float32 ``u``, as a new array."""
    p = u * coefficients[-1]
    for c in coefficients[-2:0:-1]:
        p += c
        p *= u
    p += coefficients[0]
    return p


def erf_float32(x):
    """erf of a float32 array, within 2 ulp; odd, keeps the sign of zero, erf(nan) is nan."""
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    # blocks that keep the temporaries in cache: 2x faster at 4M values than one pass; the
    # worker threads share them from a million values (they inherit the error state)
    with np.errstate(over="ignore", invalid="ignore"):
        map_chunks(np, flat.size, _BLOCK, lambda lo, hi: _erf_block(flat[lo:hi], out[lo:hi]),
                   threaded_from=_THREADED_MIN)
    return out.reshape(np.shape(x))


def _erf_block(x, out):
    """erf of the 1-D float32 array ``x``, written into ``out``."""
    square = x * x
    small = _horner(square, _R_SMALL)   # overflows to nan for huge |x|: the tail is taken there
    small *= x
    small += x
    t = np.abs(x)
    tail = _bit_mask(t >= _SMALL_F32)   # false at nan, which the small branch keeps
    t *= np.float32(_ERFCX_T)
    t += np.float32(1)
    np.divide(np.float32(1), t, out=t)
    erfc = _horner(t, _ERFCX_P)
    np.negative(square, out=square)
    np.exp(square, out=square)
    erfc *= square
    large = np.subtract(np.float32(1), erfc, out=erfc).view(np.int32)
    large |= x.view(np.int32) & _SIGN_BIT                   # copysign; 1 - erfc is positive
    # select by bits (np.copyto(where=) and np.where are several times slower)
    bits = small.view(np.int32)
    large ^= bits
    large &= tail
    np.bitwise_xor(bits, large, out=out.view(np.int32))


def _bit_mask(condition):
    """An int32 array: all ones where ``condition`` holds, else zero."""
    mask = condition.view(np.int8).astype(np.int32)
    return np.negative(mask, out=mask)


class CpuSpecial:
    """``scipy.special`` with a fast ``erf`` for float16 and float32 arrays (16-bit inputs
    compute in float32 and return float32, as SciPy's do)."""

    def __init__(self, scipy_special):
        self._scipy = scipy_special

    def __getattr__(self, name):
        value = getattr(self._scipy, name)
        setattr(self, name, value)          # found once; later look-ups hit the instance
        return value

    def erf(self, x, *args, **kwargs):
        """erf: the float32 kernel for float16/float32 arrays of at least ``_FAST_SIZE``
        elements (below it SciPy's per-call cost is smaller), else SciPy's."""
        if args or kwargs or getattr(x, "dtype", None) not in _FAST_DTYPES or x.size < _FAST_SIZE:
            return self._scipy.erf(x, *args, **kwargs)
        return erf_float32(x.astype(np.float32, copy=False))


_FAST_DTYPES = (np.dtype(np.float32), np.dtype(np.float16))
_FAST_SIZE = 4096

