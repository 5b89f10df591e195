"""Argument checks and window geometry shared by the pooling ops (PyTorch's messages)."""

import operator

import numpy as np

from ember import _dtype as D
from ember.ops._separable import built_once

__all__ = ["tuple_arg", "pool_geometry", "check_window_padding", "output_sizes", "check_rank",
           "reject_dtype", "window_mats", "adaptive_bounds", "adaptive_mats", "output_size_arg"]

_COUNT = {1: "one int", 2: "two ints", 3: "three ints"}
_NAMES = {1: ("",), 2: ("H", "W"), 3: ("T", "H", "W")}


def tuple_arg(name, what, value, nd, *, optional=False, style=None):
    """``value`` (an int or a sequence of ``nd`` ints) as a tuple of ``nd`` ints."""
    if optional and (value is None or (isinstance(value, (tuple, list)) and len(value) == 0)):
        return None
    try:
        if not isinstance(value, (tuple, list)):
            return (operator.index(value),) * nd
        value = tuple(operator.index(v) for v in value)
    except TypeError:
        bad = next(v for v in (value if isinstance(value, (tuple, list)) else (value,))
                   if not hasattr(type(v), "__index__"))
        raise TypeError(f"{name}(): argument '{what}' must be tuple of ints, not "
                        f"{type(bad).__name__}") from None
    if len(value) == 1:
        return value * nd
    if len(value) == nd:
        return value
    if style == "arg":
        raise RuntimeError(f"{name}() argument '{what}' should contain one int "
                           f"(got {len(value)})")
    if optional:
        raise RuntimeError(f"{name}: {what} must either be omitted, a single int, or a tuple "
                           f"of {_COUNT[nd]}")
    either = "be" if style == "be" else "either be"
    raise RuntimeError(f"{name}: {what} must {either} a single int, or a tuple of {_COUNT[nd]}")


def check_rank(shape, nd, message):
    """Raise ``message`` unless ``shape`` has nd+1 or nd+2 dims with non-empty non-batch dims."""
    if len(shape) not in (nd + 1, nd + 2) or 0 in shape[len(shape) - nd - 1:]:
        raise RuntimeError(message.format(list(shape)))


def reject_dtype(kernel, dtype, kinds, extra=()):
    """PyTorch's NotImplementedError unless ``dtype`` (NumPy) is of one of the ``kinds`` or
    among the ``extra`` dtypes."""
    if dtype.kind in kinds or dtype in extra:
        return
    raise NotImplementedError(f"\"{kernel}\" not implemented for "
                              f"'{D.FROM_NUMPY[dtype]._torch_name}'")


def _check_padding(kernel, padding, dilation):
    """PyTorch's per-dim padding checks: non-negative, and at most half the effective window."""
    for k, p, d in zip(kernel, padding, dilation):
        if p < 0:
            raise RuntimeError(f"pad must be non-negative, but got pad: {p}")
        if p > int((d * (k - 1) + 1) / 2):
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={p}, kernel_size={k} and dilation={d}")


def check_window_padding(kernel, stride, padding, dilation):
    """PyTorch's first checks of a window sweep: a zero stride, then the padding."""
    if any(s == 0 for s in stride):
        raise RuntimeError("stride should not be zero")
    _check_padding(kernel, padding, dilation)


def _half_kernel_pads(nd, kernel, padding):
    if nd == 3:
        (kt, kh, kw), (pt, ph, pw) = kernel, padding
        return f"kT: {kt} kW: {kw} kH: {kh} padT: {pt} padW: {pw} padH: {ph}"
    (kh, kw), (ph, pw) = ((1, *kernel), (0, *padding)) if nd == 1 else (kernel, padding)
    return f"padW = {pw}, padH = {ph}, kW = {kw}, kH = {kh}"


def output_sizes(sizes, kernel, stride, padding, dilation, ceil_mode):
    """Output sizes of a window sweep over ``sizes`` (unchecked; may be <= 0)."""
    out = []
    for size, k, s, p, d in zip(sizes, kernel, stride, padding, dilation):
        span = size + 2 * p - d * (k - 1) - 1
        o = (span + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (o - 1) * s >= size + p:
            o -= 1
        out.append(o)
    return tuple(out)


def pool_geometry(shape, nd, kernel, stride, padding, dilation, ceil_mode):
    """Output spatial sizes of a pooling window sweep, checked as PyTorch checks them (1-D
    pooling runs as 2-D pooling over a height of one, and its messages say so)."""
    check_window_padding(kernel, stride, padding, dilation)    # PyTorch checks these first
    names = _NAMES[nd] if nd > 1 else ("H", "W")
    lead = (1,) if nd == 1 else ()
    if any(k <= 0 for k in kernel):
        raise RuntimeError("kernel size should be greater than zero, but got " + " ".join(
            f"k{n}: {k}" for n, k in zip(names, lead + tuple(kernel))))
    if any(d <= 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero, but got " + " ".join(
            f"dilation{n}: {d}" for n, d in zip(names, lead + tuple(dilation))))
    if any(p > k // 2 for k, p in zip(kernel, padding)):   # and again, ignoring dilation
        raise RuntimeError("pad should be smaller than or equal to half of kernel size, but "
                           "got " + _half_kernel_pads(nd, kernel, padding))
    out = output_sizes(shape[-nd:], kernel, stride, padding, dilation, ceil_mode)
    if any(o <= 0 for o in out):
        plane = tuple(shape[-nd - 1:-nd]) + ((1,) if nd == 1 else ())
        given = "x".join(str(v) for v in plane + tuple(shape[-nd:]))
        calc = "x".join(str(v) for v in plane + tuple(out))
        raise RuntimeError(f"Given input size: ({given}). Calculated output size: ({calc}). "
                           f"Output size is too small")
    return tuple(out)


@built_once
def window_mats(shape, kernel, stride, padding, out, count_include_pad, divisor_override):
    """Per-dim (out, in) matrices of average pooling; the product of their entries over dims
    is 1/divisor. With ``divisor_override`` the first matrix carries it."""
    mats, counts = [], []
    for i, (size, k, s, p, o) in enumerate(zip(shape, kernel, stride, padding, out)):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, size + p)
        pool = end - start
        lo, hi = np.maximum(start, 0), np.minimum(end, size)
        pos = np.arange(size)
        mask = (pos >= lo[:, None]) & (pos < hi[:, None])
        count = pool if count_include_pad else hi - lo
        counts.append(count)
        mats.append(mask.astype(np.float64))
    for i, m in enumerate(mats):
        if divisor_override is not None:
            if i == 0:
                m /= divisor_override
        else:
            m /= counts[i][:, None]
    return mats, counts


def adaptive_bounds(size, out):
    """Start and end (exclusive) of each adaptive window along one dim."""
    o = np.arange(out)
    return (o * size) // out, -((-(o + 1) * size) // out)


@built_once
def adaptive_mats(shape, out):
    """Per-dim (out, in) averaging matrices of adaptive average pooling."""
    mats = []
    for size, o in zip(shape, out):
        lo, hi = adaptive_bounds(size, o)
        pos = np.arange(size)
        mask = (pos >= lo[:, None]) & (pos < hi[:, None])
        mats.append(mask / np.maximum(hi - lo, 1)[:, None])
    return mats


def output_size_arg(name, output_size, shape, nd):
    """An adaptive pool's ``output_size`` as a tuple (None keeps the input's size), refused
    with PyTorch's TypeErrors when it is not an int or a sequence of ints."""
    if _is_int(output_size):
        return _nonnegative(name, (operator.index(output_size),) * nd)
    if not isinstance(output_size, (tuple, list)):
        # (PyTorch's 1-d pools parse it natively; the others in Python, where a bool is an int)
        if nd == 1 or isinstance(output_size, bool):
            raise TypeError(f"{name}(): argument 'output_size' (position 2) must be tuple of "
                            f"ints, not {type(output_size).__name__}")
        if not hasattr(output_size, "__len__"):
            raise TypeError(f"object of type '{type(output_size).__name__}' has no len()")
        output_size = list(output_size)
    for i, v in enumerate(output_size):
        if not _is_int(v) and (v is not None or nd == 1):
            kind = type(v).__name__
            if i:           # (PyTorch's parser words a later element's type differently)
                raise TypeError(f"{name}(): argument 'output_size' failed to unpack the object "
                                f"at pos {i + 1} with error \"type must be tuple of ints,but "
                                f"got {kind}\"")
            raise TypeError(f"{name}(): argument 'output_size' (position 2) must be tuple of "
                            f"ints, but found element of type {kind} at pos 0")
    if len(output_size) != nd:
        if nd == 1:
            raise RuntimeError(f"{name}() argument 'output_size' should contain one int "
                               f"(got {len(output_size)})")
        raise RuntimeError(f"{name}: output_size must be {nd}")
    return _nonnegative(name, tuple(shape[len(shape) - nd + i] if v is None else
                                    operator.index(v) for i, v in enumerate(output_size)))


def _is_int(value):
    return not isinstance(value, bool) and hasattr(type(value), "__index__")


def _nonnegative(name, sizes):
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"{name}: elements of output_size must be greater than or equal to 0 "
                           f"but received {{{', '.join(str(s) for s in sizes)}}}")
    return sizes
