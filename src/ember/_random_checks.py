"""Argument checks of the samplers in ``ember._random`` and ``ember._random_inplace``, with
PyTorch's error messages and warnings."""

import math
import warnings

import numpy as np

from ember import _dtype as D
from ember._from_data import _tp_name
from ember._sizes import _size_args
from ember._tensor import Tensor
from ember._warn import outside_level


# PyTorch's CPU-only build refuses a CUDA generator with this message (word for word)
NO_CUDA_GENERATOR = (
    "Cannot get CUDA generator without ATen_cuda library. PyTorch splits its backend into "
    "two shared libraries: a CPU library and a CUDA library; this error has occurred because "
    "you are trying to use some CUDA functionality, but the CUDA library has not been loaded "
    "by the dynamic linker for some reason.  The CUDA library MUST be loaded, EVEN IF you "
    "don't directly use any symbols from the CUDA library! One common culprit is a lack of "
    "-Wl,--no-as-needed in your link arguments; many dynamic linkers will delete dynamic "
    "library dependencies if you don't depend on any of their symbols.  You can check if "
    "this has occurred by using ldd on your binary to see if there is a dependency on "
    "*_cuda.so library.")


def _float_dtype(dtype, name):
    dtype = D.get_default_dtype() if dtype is None else dtype
    if dtype.category not in (D.FLOATING, D.COMPLEX):
        raise NotImplementedError(f"\"{name}\" not implemented for '{dtype._torch_name}'")
    return dtype


def _normal_dtype(dtype, shape):
    """The dtype of normal samples of ``shape`` (None: the default): PyTorch's kernel refuses
    a dtype that is not floating point (and float8) only where it draws elements."""
    if not math.prod(shape):
        return D.get_default_dtype() if dtype is None else dtype
    dtype = _float_dtype(dtype, "normal_kernel_cpu")
    _barebones(dtype, "normal_kernel_cpu", wide_unsigned=False)
    return dtype


def _not_implemented_for(dtype, name, categories):
    """PyTorch's error for a sampling kernel that has no version for ``dtype``."""
    if dtype.category in categories:
        raise NotImplementedError(f"\"{name}\" not implemented for '{dtype._torch_name}'")


def _barebones(dtype, name, wide_unsigned=True):
    """PyTorch's error for a sampling kernel ``name`` that has no float8 (nor, with
    ``wide_unsigned``, uint16/32/64) version."""
    if dtype in D.FLOAT8 or wide_unsigned and dtype in D.WIDE_UNSIGNED:
        raise NotImplementedError(f"\"{name}\" not implemented for '{dtype._torch_name}'")


# the C++ names PyTorch's messages give the unsigned types
_UNSIGNED_C = {D.uint16: "short unsigned int", D.uint32: "unsigned int",
               D.uint64: "long unsigned int"}


def _continuous(t, name, c_name=False):
    """PyTorch's error for filling a non-floating tensor from a continuous distribution."""
    if t.dtype.category != D.FLOATING:
        from ember._storage import _c_type
        kind = (_UNSIGNED_C.get(t.dtype) or _c_type(t.dtype)) if c_name else t.dtype._torch_name
        raise RuntimeError(f"{name} distribution is a continuous probability distribution. "
                           f"dtype must be a floating point but you specified {kind}")


def _check_size_given(sizes, size, name):
    """PyTorch's error for a ``rand``/``randn`` call without a size."""
    if not sizes and size is None:
        raise _parser_error(f"{name}() missing 1 required positional arguments: \"size\"")


def _parser_error(message):
    """The TypeError of PyTorch's parser for the random function being called, which it
    declares several times: ``message`` (a parser's error for one signature), or the
    "invalid combination" listing where several take as many arguments."""
    from ember.ops._overloads import in_parser_words
    return TypeError(in_parser_words(message))


def _check_long(value, argument):
    """``value`` as a Python int, or PyTorch's errors for an ``int`` argument that is no int
    or does not fit 64 bits."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__") or \
            isinstance(value, Tensor) and value.dtype.category != D.INTEGRAL:
        raise TypeError(f"{argument} must be int, not {_tp_name(value)}")
    value = value.__index__()
    if not -2 ** 63 <= value < 2 ** 63:
        raise ValueError("Overflow when unpacking long long")
    return value


def _check_permutation_dtype(dtype, n):
    """PyTorch's errors for a randperm dtype that cannot hold 0..n-1 (or has no kernel)."""
    _not_implemented_for(dtype, "randperm", (D.BOOL, D.COMPLEX))
    _barebones(dtype, "randperm")
    if dtype.category == D.INTEGRAL and n - 1 > D.iinfo(dtype).max:
        from ember.ops._scalars import C_NAMES
        raise RuntimeError(f"value cannot be converted to type {C_NAMES[dtype]} without "
                           f"overflow")
    if dtype is D.float16 and n > 2049:
        raise RuntimeError("n cannot be greater than 2049 for Half type.")


def _check_std(std, values):
    """PyTorch's errors for a negative (or NaN) standard deviation of ``normal``."""
    if isinstance(std, Tensor):
        if std.dtype.is_complex:
            raise RuntimeError("normal expects standard deviation to be non-complex")
        if not bool((values >= 0).all()):
            raise RuntimeError("normal expects all elements of std >= 0.0")
    elif not std >= 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")


def _as_float(value, name, position):
    """``normal``'s ``value`` (its argument ``name``) for the form with a size, where PyTorch
    reads a 0-dim tensor that does not require grad as a float and refuses any other tensor
    (with its "invalid combination" error: its four signatures all take a call with a size)."""
    if not isinstance(value, Tensor):
        return value
    if value.ndim == 0 and not value.requires_grad:
        item = value.item()
        if isinstance(item, complex):
            if item.imag:
                raise RuntimeError("value cannot be converted to type double without overflow")
            item = item.real
        return float(item)
    raise _parser_error(f"normal(): argument '{name}' (position {position}) must be float, not "
                        f"Tensor")


def _check_like_bounds(low, high):
    """PyTorch's error for randint_like bounds that are missing or not ints."""
    given = [b for b in (low, high) if b is not None]
    if not given or any(isinstance(b, (bool, float)) for b in given):
        got = ", ".join(["Tensor"] + [type(b).__name__ for b in given])
        raise TypeError(f"randint_like() received an invalid combination of arguments - got "
                        f"({got}), but expected one of:\n * (Tensor input, int high, *, ...)\n"
                        f" * (Tensor input, int low, int high, *, ...)")


_C_NAMES = {D.bool_: "bool", D.uint8: "unsigned char", D.int8: "signed char",
            D.int16: "short int", D.int32: "int", D.uint16: "short unsigned int",
            D.uint32: "unsigned int", D.float16: "c10::Half"}


def _check_random_bounds(dtype, low, high, given=True):
    """PyTorch's check that [low, high) fits ``dtype`` (no silent wrap-around); ``given``:
    whether ``high`` was (else it is the dtype's default)."""
    if dtype.is_complex:
        raise RuntimeError("check_random_bounds handles only integral, floating-point and "
                           "boolean types")
    if given and dtype in _EXACT_INTEGERS:
        _check_cast_bounds(dtype, low, high)
    name = _C_NAMES.get(dtype)
    if dtype in _EXACT_INTEGERS:
        _warn_inexact(dtype, low, high)
    if name is None:
        return
    if dtype is D.bool_:
        lo, hi = 0, 1
    elif dtype is D.float16:
        lo, hi = -65504, 65504
    else:
        info = np.iinfo(dtype.np)
        lo, hi = int(info.min), int(info.max)
    if not lo <= low <= hi:
        raise RuntimeError(f"from is out of bounds for {name}")
    if not lo <= high - 1 <= hi:
        raise RuntimeError(f"to - 1 is out of bounds for {name}")


# the largest run of exact integers of each float type
_EXACT_INTEGERS = {D.float16: 2 ** 11, D.bfloat16: 2 ** 8, D.float32: 2 ** 24,
                   D.float64: 2 ** 53}


def _check_cast_bounds(dtype, low, high):
    """PyTorch's error for float bounds that meet once cast to ``dtype`` (``_cast_bounds``)."""
    low, high = _cast_bounds(dtype, low, high)
    if not low < high:
        raise RuntimeError(f"random_ expects 'from' casted to dtype to be less than 'to' casted "
                           f"to dtype, but got from={low} >= to={high}")


def _check_from_alone(dtype, low):
    """PyTorch's errors for ``random_(from, None)``, which draws from [from, the top of
    ``dtype``'s run of exact integers (or its max)]."""
    if dtype.is_complex:
        raise RuntimeError("random_from_to_impl handles only integral, floating-point and "
                           "boolean types")
    if dtype not in _EXACT_INTEGERS:
        _check_random_bounds(dtype, low, low + 1, given=False)     # (from's range)
        return
    top = _EXACT_INTEGERS[dtype]
    low = _cast_bounds(dtype, low, top + 1)[0]
    if not low < top:
        raise RuntimeError(f"random_ expects 'from' casted to dtype to be less than or equal to "
                           f"'to_inc' casted to dtype, but got from={low} > to_inc={top}")


def _cast_bounds(dtype, low, high):
    """PyTorch's float ``dtype`` bounds [low, high) as cast: ``low`` moved up to the next
    number above it that ``dtype`` holds where ``low + 1`` rounds below it, ``high`` down
    where ``high - 1`` rounds up to it or above."""
    top = _EXACT_INTEGERS[dtype]
    if abs(low + 1) <= top and abs(high - 1) <= top:    # (exact integers: cast unchanged)
        return low, high
    digits = top.bit_length() - 1

    def cast(v):        # (beyond the dtype's range: unchanged, the range check refuses it)
        with np.errstate(over="ignore"):
            c = float(np.array(v, dtype=np.float64).astype(dtype.np))
        return int(c) if math.isfinite(c) else v

    def step(v):        # the spacing of ``dtype``'s numbers about ``v``
        return 1 << max(abs(v).bit_length() - 1 - digits + 1, 0)

    above = cast(low + 1)
    if above < low:
        low = above + step(low + 1)
    below = cast(high - 1)
    if below >= high:
        high = below - step(high - 1)
    return low, high


def _warn_inexact(dtype, low, high):
    """PyTorch's warnings for integer bounds a float ``dtype`` cannot hold exactly."""
    from ember._storage import _c_type
    digits = _EXACT_INTEGERS[dtype].bit_length() - 1
    for what, bound in (("from", low), ("to - 1", high - 1)):
        if not -(2 ** digits) <= bound <= 2 ** digits:
            warnings.warn(f"{what} is out of bounds [-(2^{digits}), 2^{digits}]. Due to "
                          f"precision limitations {_c_type(dtype)} can support discrete "
                          f"uniform distribution only within this range. This warning will "
                          f"become an error in version 1.7 release, please fix the code in "
                          f"advance", UserWarning, stacklevel=outside_level())


def _random_limit(dtype):
    """PyTorch's default upper bound: the dtype's max, or its largest run of exact ints."""
    if dtype is D.bool_:
        return 2
    if dtype.category == D.INTEGRAL:
        return int(np.iinfo(dtype.np).max) + 1
    return _EXACT_INTEGERS.get(dtype, 2 ** 24)


def _parsed_size(sizes, size, name):
    """The size ``rand``/``randn`` were given (as ``_size`` reads it), or the TypeError of
    PyTorch's parser."""
    _check_size_given(sizes, size, name)
    try:
        return _size_args(sizes, size, name)
    except TypeError as error:
        if "failed to unpack" in str(error):    # (the parser had taken a signature)
            raise
        raise _parser_error(str(error)) from None


_NOT_GIVEN = object()


def _randint_args(low, high, size, more):
    """randint's (low, high, size) from its call (high and size, or low, high and size), or
    the TypeError of PyTorch's parser for the one signature that takes as many."""
    if more:
        raise TypeError("randint() takes from 0 to 3 positional arguments")
    position = ""
    if low is _NOT_GIVEN and high is not None and size is not None:
        low = 0                             # randint(high=high, size=size)
    if size is None:                        # randint(high, size)
        low, high, size, position = 0, low, high, " (position 2)"
    elif high is None:                      # randint(high, size=size)
        low, high = 0, low
    if low is _NOT_GIVEN or high is _NOT_GIVEN:
        raise TypeError("randint() missing 1 required positional arguments: \"high\"")
    if size is None:
        raise TypeError("randint(): missing required argument 'size'")
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"randint(): argument 'size'{position} must be tuple of ints, not "
                        f"{type(size).__name__}")
    if high is None:
        raise TypeError("randint(): missing required argument 'high'")
    for name, bound in (("low", low), ("high", high)):      # a float bound would be drawn
        if type(bound) is not int or not -2 ** 63 <= bound < 2 ** 63:  # (message on demand)
            where = " (position 1)" if position and name == "high" else ""
            _check_long(bound, f"randint(): argument '{name}'{where}")
    return low, high, size
