"""PyTorch's checked conversion of a Python number to a tensor's dtype (fill values, bounds)."""

import math

import numpy as np

from ember import _dtype as D
from ember._tensor import Tensor
from ember.backend import device_scalar
from ember.ops._dims import int_error, int_param

__all__ = ["checked_scalar", "huge_int_error", "fitted_number", "rounded_number", "ROUNDED",
           "number_arrays", "C_NAMES", "int_arg", "int64_arg", "number_arg", "float_arg",
           "real_number"]

# the C++ type names PyTorch's messages use for the dtypes
C_NAMES = {D.bool_: "bool", D.uint8: "uint8_t", D.int8: "int8_t", D.int16: "int16_t",
           D.int32: "int", D.int64: "int64_t", D.float16: "c10::Half",
           D.bfloat16: "c10::BFloat16", D.float32: "float", D.float64: "double",
           D.complex64: "c10::complex<float>", D.complex128: "c10::complex<double>",
           D.float8_e4m3fn: "c10::Float8_e4m3fn", D.float8_e5m2: "c10::Float8_e5m2",
           D.uint16: "uint16_t", D.uint32: "uint32_t", D.uint64: "uint64_t"}
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def huge_int_error(value):
    """PyTorch's error for a Python int outside ``[-2**63, 2**64)``: its Scalar holds an int64
    or a uint64."""
    return OverflowError("int too big to convert" if value > 0 else
                         "can't convert negative int to unsigned")



def int_arg(value, fname, name, position=None, *, tensors=True):
    """``value`` as an int, or PyTorch's TypeError naming the argument (``fname``'s ``name``,
    at ``position`` in the function form when given): ``_dims.int_param`` with a fixed name.
    One-element integer tensors are ints, unless ``tensors`` is False."""
    if type(value) is int:
        return value
    arg = (fname, name, None if position is None else position - 1, "function")
    if not tensors and isinstance(value, Tensor):
        raise int_error(value, arg)
    return int_param(value, arg)


def int64_arg(value, fname, name, position=None):
    """``value`` as PyTorch parses an ``int`` (not ``SymInt``) argument: a Python or NumPy
    integer, or a 0-dim integer tensor; bools, floats and tensors of other shapes or dtypes
    raise PyTorch's TypeError naming the argument."""
    if isinstance(value, Tensor):
        ok = value.ndim == 0 and value.dtype.category == D.INTEGRAL
    else:
        ok = hasattr(value, "__index__") and not isinstance(value, (bool, np.bool_))
    if not ok:
        from ember._creation import _tp_name
        where = "" if position is None else f" (position {position})"
        raise TypeError(f"{_entry_name(fname)}(): argument '{name}'{where} must be int, not "
                        f"{_tp_name(value)}")
    return value.__index__()


_PLAIN_NUMBERS = frozenset((int, float, bool, complex))


def number_arg(value, fname, name, position=None, kind="Number"):
    """``value`` as PyTorch parses a ``Scalar`` argument (``fname``'s ``name``, at
    ``position`` when it has one): a Python or NumPy number, or a 0-dim tensor that does
    not require grad, as a Python number; anything else (a tensor that requires grad or
    has a dim, a NumPy array) raises PyTorch's TypeError, so no gradient is dropped.
    ``kind="float"`` parses a ``double`` argument, which refuses complex numbers."""
    if type(value) in _PLAIN_NUMBERS:
        if kind == "Number" or type(value) is not complex:
            return value
    elif isinstance(value, Tensor):
        if value.ndim == 0 and not value.requires_grad:
            return value.item()
    elif isinstance(value, (int, float, complex, np.bool_, np.number)) and \
            (kind == "Number" or not isinstance(value, (complex, np.complexfloating))):
        if type(value) is np.bool_:             # PyTorch's parser reads it as a float
            return float(value)
        return value.item() if isinstance(value, np.generic) else value
    from ember._creation import _tp_name
    where = "" if position is None else f" (position {position})"
    raise TypeError(f"{_entry_name(fname)}(): argument '{name}'{where} must be {kind}, not "
                    f"{_tp_name(value)}")


def _entry_name(fname):
    """``fname`` as PyTorch's parser names the entry point running: ``op_`` in place (an
    error path's look at the stack, as ``_dims._argument``'s)."""
    from ember.ops._call_site import call_site
    site = call_site()
    if site is not None and site.kind == "inplace" and site.name == fname:
        return fname + "_"
    return fname


def float_arg(value, fname, name, position=None):
    """``value`` as PyTorch parses a ``double`` argument: ``number_arg`` without complex."""
    return number_arg(value, fname, name, position, "float")


def real_number(value, np_dtype):
    """A Number for a real kernel computing in ``np_dtype``: a complex one without an
    imaginary part as its real part, any other complex one PyTorch's overflow error."""
    if type(value) is not complex:
        return value
    if value.imag:
        _overflow(np.dtype(np_dtype))
    return value.real


def fitted_number(value, np_dtype):
    """``real_number`` that must also fit ``np_dtype``, when a float dtype, as the kernel
    converts it (``leaky_relu(x, 1e39)`` of float32 raises PyTorch's overflow error)."""
    value = real_number(value, np_dtype)
    if type(value) is int and not -2 ** 63 <= value < 2 ** 64:
        raise huge_int_error(value)
    if (type(value) is float or type(value) is int) and np.dtype(np_dtype).kind in "fV":
        top = _FLOAT_MAX.get(np_dtype)
        if top is None:
            top = _FLOAT_MAX[np_dtype] = float(D.finfo(D.FROM_NUMPY[np.dtype(np_dtype)]).max)
        if abs(value) > top and (type(value) is int or math.isfinite(value)):
            _overflow(np.dtype(np_dtype))
    return value


_FLOAT_MAX = {}


ROUNDED = {}        # (number, 16-bit float dtype) -> the number rounded to that dtype
_FLOAT64_MAX = float(np.finfo(np.float64).max)


def rounded_number(number, dtype):
    """A Python number rounded to the NumPy float ``dtype`` (overflowing to infinity), as
    PyTorch's CPU kernels round a number operand of a 16-bit float op; cached."""
    rounded = ROUNDED.get((number, dtype))
    if rounded is not None:
        return rounded
    if not -_FLOAT64_MAX <= number <= _FLOAT64_MAX:
        return number               # (NaN, and ints beyond float64: the op's own checks)
    with np.errstate(over="ignore"):
        rounded = float(np.asarray(float(number), dtype))
    if len(ROUNDED) > 4096:
        ROUNDED.clear()
    ROUNDED[number, dtype] = rounded
    return rounded


def checked_scalar(xp, value, dtype, *, single=False):
    """``value`` as a 0-d array of ``dtype`` (a backend dtype), raising as PyTorch does when
    it does not fit; integers wrap modulo 2**bits like a C cast within the allowed range.
    ``single``: the value fills one element, which PyTorch casts to float16 or bfloat16
    unchecked (a too large value becomes inf)."""
    if isinstance(value, Tensor):
        value = value.item()
    if type(value) is int and not -2 ** 63 <= value < 2 ** 64:
        raise huge_int_error(value)
    kind = dtype.kind
    if kind == "b":
        return device_scalar(xp, np.asarray(bool(value)))
    if kind == "c":
        if dtype == np.complex64 and any(math.isfinite(v) and abs(v) > _FLOAT32_MAX
                                         for v in (value.real, value.imag)):
            _overflow(dtype)
        return device_scalar(xp, np.asarray(value, dtype=dtype))
    if isinstance(value, complex):
        if value.imag != 0:
            _overflow(dtype)
        value = value.real
    if kind in "iu":
        if value != value or value in (float("inf"), float("-inf")):
            _overflow(dtype)
        bits = dtype.itemsize * 8
        lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if kind == "i" else \
            (-(2 ** bits - 1), 2 ** bits - 1)
        if isinstance(value, float) and not (0 if kind == "u" else lo) <= value <= hi:
            _overflow(dtype)            # a float must fit the dtype itself
        value = int(value)
        if not lo <= value <= hi:
            _overflow(dtype)
        return device_scalar(xp, np.asarray(value).astype(dtype))
    ours = D.FROM_NUMPY[dtype]
    # infinity fits every float dtype but float8_e4m3fn, which has none
    unchecked = single and ours in _UNCHECKED_SINGLE
    if unchecked and ours is D.float8_e4m3fn and value == value and abs(value) > _E4M3_MAX:
        value = math.copysign(_E4M3_MAX, value)     # PyTorch saturates (the type has no inf)
    if not unchecked and value == value and \
            (abs(value) != float("inf") or ours is D.float8_e4m3fn):
        top = _FLOAT_MAX.get(dtype)
        if top is None:
            top = _FLOAT_MAX[dtype] = float(D.finfo(ours).max)
        if abs(value) > top:
            _overflow(dtype)
    if unchecked:
        with np.errstate(over="ignore"):        # (the value may become inf)
            return device_scalar(xp, np.asarray(value, dtype=dtype))
    return device_scalar(xp, np.asarray(value, dtype=dtype))


# one element of these is converted without the overflow check, as PyTorch does
_UNCHECKED_SINGLE = (D.float16, D.bfloat16, D.float8_e5m2, D.float8_e4m3fn)
_E4M3_MAX = 448.0


def _overflow(np_dtype):
    name = C_NAMES[D.FROM_NUMPY[np_dtype]]
    raise RuntimeError(f"value cannot be converted to type {name} without overflow")


def number_arrays(xp, *operands):
    """The operands with Python numbers as 0-d arrays of the array operands' (common) dtype,
    so that NumPy and SciPy functions of them (``log(2.0)``) keep it rather than widening
    the result to float64."""
    dtype = next(x.dtype for x in operands if hasattr(x, "dtype"))
    return tuple(x if hasattr(x, "dtype") else device_scalar(xp, np.asarray(x, dtype=dtype))
                 for x in operands)
