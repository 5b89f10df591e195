"""Reading Python data into a host array, as ``tensor(data)`` does: nested sequences,
numbers, NumPy arrays and tensors, PyTorch's dtype inference, and its errors for ragged,
odd or unsupported data."""

import numbers
import warnings

import numpy as np

from ember import _dtype as D
from ember._host_values import _to_host, _warn_scalar_of_grad_tensor
from ember._tensor import Tensor
from ember._warn import outside_level, warn_once

_SUPPORTED_NP = {d.np for d in D.ALL_DTYPES}


def _check_np_dtype(arr):
    if arr.dtype not in _SUPPORTED_NP:
        if not arr.dtype.isnative and arr.dtype.newbyteorder() in _SUPPORTED_NP:
            raise ValueError("given numpy array has byte order different from the native byte "
                             "order. Conversion between byte orders is currently not "
                             "supported.")
        raise TypeError(
            f"can't convert np.ndarray of type numpy.{arr.dtype.type.__name__}. The only "
            f"supported types are: float64, float32, float16, complex64, complex128, int64, "
            f"int32, int16, int8, uint64, uint32, uint16, uint8, and bool.")


def _infer_dtype(arr):
    """PyTorch's dtype for data given as Python numbers: bool, int64, or the defaults."""
    kind = arr.dtype.kind
    if kind == "b":
        return D.bool_
    if kind in "iu":
        return D.int64
    if kind == "f":
        return D.get_default_dtype()
    if kind == "c":
        if D.get_default_dtype() is D.bfloat16:
            raise RuntimeError("invalid default scalar type for complex")
        return D.default_complex_dtype()
    raise TypeError(f"Could not infer dtype of {arr.dtype}")


def _from_data(data, dtype):
    """A host NumPy array of PyTorch's dtype for (nested) Python data or array-likes."""
    if isinstance(data, Tensor):                # a copy, whether or not it requires grad
        arr = _to_host(data._data)
        return arr.copy() if dtype is None else cast_array(arr, dtype.np)
    if isinstance(data, np.ndarray):
        _check_strides(data)                # (before the dtype, as PyTorch's)
        _check_np_dtype(data)
        data = data.view(np.ndarray)        # (a subclass's values: np.matrix, masked arrays)
        return cast_array(data, data.dtype if dtype is None else dtype.np, copy=True,
                          order="C" if 0 in data.strides and _overlaps(data) else "K")
    huge, given = (), dtype                 # (``dtype`` may be inferred below)
    if isinstance(data, (list, tuple)):
        sizes = _leading_sizes(data)
        if 0 in sizes:
            return _empty_from_sizes(data, sizes, dtype)
        if data and isinstance(data[0], np.ndarray):    # once per program, as in PyTorch
            warn_once("Creating a tensor from a list of numpy.ndarrays is extremely slow. "
                      "Please consider converting the list to a single numpy.ndarray with "
                      "numpy.array() before converting to a tensor.")
        typed, huge = [], []
        try:
            unwrapped = _unwrap_scalars(data, typed, huge)
        except _ManyElements:
            raise (None if dtype is not None else _uninferable(data)[0]) or _many_elements(
                data, dtype) from None
        if typed and dtype is None:
            dtype = _sequence_dtype(data)
        if typed:
            _check_indexable(data, dtype, given)
            if "c" in typed and dtype is not None and dtype.is_floating_point:
                unwrapped = _real_parts(unwrapped)
        data = unwrapped
    if data is None:
        raise RuntimeError("Could not infer dtype of NoneType")
    if isinstance(data, (str, bytes)):
        raise TypeError(f"new(): invalid data type '{_tp_name(data)}'")
    if isinstance(data, np.generic):
        _check_np_dtype(np.asarray(data))
        _check_indexable(data, dtype, given)
        if dtype is not None and dtype.is_floating_point:
            data = _real_parts(data)
    try:
        arr = np.array(data)
    except ValueError as e:
        raise _nested_error(data, given) or ValueError(
            f"expected sequence of equal lengths: {e}") from None
    if dtype is D.uint64 and (arr.dtype.kind in "iuO" or _huge_int(data)):
        return _unsigned_64(data)       # (NumPy holds [2**64 - 1, 5] as float64)
    if (arr.dtype == np.uint64 or arr.dtype == object or huge) and _huge_int(data):
        # (NumPy reads [1, 2**63] as float64: PyTorch reads its ints as int64, which refuses)
        floats = _float_reading(data, dtype)
        if floats is None:
            raise ValueError("Overflow when unpacking long long")
        arr = np.array(data, dtype=floats)
    if arr.dtype == object or arr.dtype.kind in "US":
        raise _nested_error(data, given) or RuntimeError(
            f"Could not infer dtype of {_first_odd(data)}")
    if dtype is None:
        if isinstance(data, np.generic) and data.dtype in _SUPPORTED_NP:
            dtype = D.FROM_NUMPY[data.dtype]
        else:
            dtype = _infer_dtype(arr)
    if arr.dtype.kind == "c" and dtype.category < D.COMPLEX:
        arr = _real_from_complex(arr, dtype)
    if dtype.category < D.FLOATING and arr.dtype.kind == "f":
        arr = _integral_from_float(arr, dtype)
    if dtype.category == D.INTEGRAL and arr.dtype.kind in "iu" and arr.size:
        _check_fits(arr, dtype)
    from ember.ops.conversion import cast       # PyTorch's rounding (float8 saturates)
    return cast(np, arr, np.dtype(dtype.np))


def cast_array(arr, np_dtype, **kwargs):
    """``arr.astype(np_dtype, **kwargs)`` warning as PyTorch's (not NumPy's ComplexWarning)
    where complex values are read into a real dtype other than bool."""
    if arr.dtype.kind != "c" or np.dtype(np_dtype).kind in "cb":
        return arr.astype(np_dtype, **kwargs)
    if arr.size:
        warn_once("Casting complex values to real discards the imaginary part")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        return arr.astype(np_dtype, **kwargs)


def _leading_sizes(data):
    """The shape PyTorch reads from nested ``data``: the length of the first item at each
    depth (a 0-d array there has no length, as in PyTorch)."""
    sizes, x = [], data
    while isinstance(x, (list, tuple, range, np.ndarray)) and len(sizes) < _MAX_DIMS:
        if isinstance(x, np.ndarray) and x.ndim == 0:
            raise TypeError("len() of unsized object")
        sizes.append(len(x))
        if not len(x):
            break
        x = x[0]
    return sizes


def _empty_from_sizes(data, sizes, dtype):
    """An empty array of the shape read from ``data``: PyTorch reads no values past the
    first items, only their dtypes (an empty sequence counts as the default dtype)."""
    if dtype is None:
        error, _ = _uninferable(data)
        if error is not None:
            raise error
        found = _sequence_dtype(data)
        dtype = D.promote_types(D.get_default_dtype(), found or D.get_default_dtype())
    return np.empty(sizes, dtype=dtype.np)


class _TensorComplex(complex):
    """A complex tensor's value inside nested data: PyTorch reads it into a real dtype when
    its imaginary part is zero."""


class _ManyElements(Exception):
    """A tensor of more than one element met inside nested data."""


def _many_elements(data, dtype):
    """PyTorch's error for a tensor of several elements inside nested data: it reads each
    element as a number of the (given or inferred) dtype, an index where that is integral."""
    dtype = dtype or _sequence_dtype(data) or D.get_default_dtype()
    if dtype.is_floating_point or dtype.is_complex:
        return ValueError("only one element tensors can be converted to Python scalars")
    return TypeError("only integer tensors of a single element can be converted to an index")


def _unwrap_scalars(data, typed, huge):
    """Replace one-element tensors inside nested sequences by their values; note in ``typed``
    whether tensors or NumPy values (whose dtypes count) were met, in ``huge`` whether Python
    ints outside int64's range were."""
    out = []
    for x in data:
        if type(x) is float:                        # (the common elements: few checks)
            out.append(x)
            continue
        if type(x) is int:
            if not -9223372036854775808 <= x <= 9223372036854775807:
                huge.append(True)
            out.append(x)
            continue
        if isinstance(x, (np.ndarray, np.generic)):
            typed.append("c" if x.dtype.kind == "c" else True)   # ("c": _real_parts)
            _check_np_dtype(np.asarray(x))
        elif isinstance(x, Tensor):
            typed.append(True)
            if x.requires_grad:
                _warn_scalar_of_grad_tensor()
            if x.numel() != 1 or x.ndim != 0:
                if x.ndim == 0 or x.numel() == 1:
                    x = x.reshape(()).item()
                else:
                    raise _ManyElements
            else:
                x = x.item()
            if type(x) is complex:
                x = _TensorComplex(x)
                typed.append("c")
        elif isinstance(x, (list, tuple)):
            inner = _unwrap_scalars(x, typed, huge)
            x = inner if isinstance(x, list) else tuple(inner)   # (errors name the type)
        out.append(x)
    return out


def _sequence_dtype(data):
    """PyTorch's dtype for a nested sequence holding tensors or NumPy values: each element
    counts with its own dtype (Python numbers with the default ones), all promoted together."""
    out = None
    for x in data:
        if isinstance(x, (list, tuple)):
            d = _sequence_dtype(x)
        elif isinstance(x, Tensor):
            d = x.dtype
        elif isinstance(x, (np.ndarray, np.generic)):
            d = D.FROM_NUMPY.get(x.dtype)
        else:
            d = _infer_dtype(np.asarray(x)) if isinstance(x, numbers.Number) else None
        if d is not None:
            out = d if out is None else D.promote_types(out, d)
    return out


# what PyTorch reads as sequences in nested data (strings too: their items are strings)
_SEQUENCES = (list, tuple, range, str, bytes, np.ndarray)
_MAX_DIMS = 64


def _nested_error(data, dtype, kinds=None):
    """PyTorch's error for nested data NumPy cannot read as one array of numbers, or None.

    As in PyTorch: the shape is read along the first item at each depth, then (without a
    ``dtype``) every value must have a dtype, then every sequence must have the length of
    its depth and every value at the last depth must be a number (one with an index where
    its dtype's kind is in ``kinds``: see ``_unindexable``)."""
    sizes, x = [], data
    while isinstance(x, _SEQUENCES) and not (isinstance(x, np.ndarray) and x.ndim == 0):
        if len(sizes) == _MAX_DIMS:
            return ValueError(f"too many dimensions '{type(x).__name__}'")
        sizes.append(len(x))
        if not len(x):
            break
        x = x[0]
    if dtype is None:
        error, kind = _uninferable(data)
        if error is not None:
            return error
    else:
        kind = "bifc"[dtype.category]
    return _misshapen(data, sizes, 0, kind, kinds)


def _uninferable(x):
    """(PyTorch's error for the first value in ``x`` with no dtype or None, the kind of
    number the values infer: "i" (bool, integer), "f" (floating-point) or "c" (complex))."""
    if isinstance(x, (str, bytes)):
        return TypeError(f"new(): invalid data type '{type(x).__name__}'"), "i"
    if isinstance(x, (list, tuple, range)):
        kind = "i" if len(x) else "f"          # (an empty one infers the default dtype)
        for y in x:
            error, y_kind = _uninferable(y)
            if error is not None:
                return error, kind
            kind = max(kind, y_kind, key="ifc".index)
        return None, kind
    if isinstance(x, Tensor):
        return None, "c" if x.is_complex() else "f" if x.is_floating_point() else "i"
    if not isinstance(x, (int, float, complex, np.number, np.bool_, np.ndarray)):
        return RuntimeError(f"Could not infer dtype of {_tp_name(x)}"), "i"
    code = np.asarray(x).dtype.kind
    return None, code if code in "fc" else "i"


def _misshapen(x, sizes, dim, kind, kinds=None):
    """PyTorch's error for the first item of ``x`` (at depth ``dim``) not fitting ``sizes``,
    or None; values are read as bools, integers, floating-point or complex numbers (``kind``
    "b", "i", "f" or "c")."""
    if dim == len(sizes):
        if kinds is not None and isinstance(x, (Tensor, np.generic, np.ndarray)) and (
                x.ndim == 0 or isinstance(x, Tensor) and x.numel() == 1):
            return _unindexable(x, kinds)
        if isinstance(x, (np.ndarray, np.bool_)) and x.ndim == 0 or isinstance(
                x, numbers.Number) and (
                kind in "bc" or not isinstance(x, (complex, np.complexfloating))):
            return None
        if isinstance(x, np.ndarray):           # NumPy's refusal of __index__ / __float__
            return TypeError("only integer scalar arrays can be converted to a scalar index"
                             if kind in "bi" else
                             "only 0-dimensional arrays can be converted to Python scalars")
        name = type(x).__name__
        return TypeError(f"'{name}' object cannot be interpreted as an integer" if kind in "bi"
                         else f"must be real number, not {name}")
    if not isinstance(x, _SEQUENCES) or isinstance(x, np.ndarray) and x.ndim == 0:
        return TypeError("not a sequence")
    if len(x) != sizes[dim]:
        return ValueError(f"expected sequence of length {sizes[dim]} at dim {dim} "
                          f"(got {len(x)})")
    for y in x:
        error = _misshapen(y, sizes, dim + 1, kind, kinds)
        if error is not None:
            return error
    return None


def _real_from_complex(arr, dtype):
    """Complex Python numbers read into a real ``dtype``: PyTorch refuses them (a bool
    takes whether they are nonzero)."""
    if dtype is D.bool_:
        return np.asarray(arr != 0)
    raise TypeError("must be real number, not complex" if dtype.category == D.FLOATING
                    else "'complex' object cannot be interpreted as an integer")


def _integral_from_float(arr, dtype):
    """Python floats read into an integral ``dtype`` (truncated) or bool (nonzero), after
    PyTorch's check that each is a number within the dtype's range."""
    if dtype is D.bool_:
        return np.asarray(arr != 0)
    info = np.iinfo(dtype.np)
    with np.errstate(invalid="ignore"):
        fits = not arr.size or (np.isfinite(arr).all() and arr.min() >= info.min
                                and arr.max() <= info.max)
    if not fits:
        raise RuntimeError(f"value cannot be converted to type {dtype.name} without overflow")
    return np.asarray(np.trunc(arr))


def _check_fits(arr, dtype):
    """PyTorch's range check of integers read into an integral ``dtype``: a signed type takes
    its own range, an unsigned one also the negatives of its values (they wrap)."""
    info = np.iinfo(dtype.np)
    lo = info.min if info.min < 0 else -int(info.max)
    if arr.min() < lo or arr.max() > info.max:
        raise RuntimeError(f"value cannot be converted to type {dtype.name} without overflow")


def _unsigned_64(data):
    """Python ints (nested) as a uint64 array: all of uint64's range, as PyTorch reads them
    for that dtype (other dtypes read ints as int64)."""
    try:
        return np.array(data, dtype=np.uint64)
    except OverflowError as e:
        negative = "-" in str(e)
        raise OverflowError("can't convert negative int to unsigned" if negative
                            else "int too big to convert") from None


def _float_reading(data, dtype):
    """The NumPy dtype PyTorch reads the Python ints in ``data`` as (bool, float64 or
    complex128), from ``dtype`` or, with none, from a float or complex among them; None where
    it reads them as int64."""
    kind = "bifc"[dtype.category] if dtype is not None else _uninferable(data)[1]
    return {"b": np.bool_, "f": np.float64, "c": np.complex128}.get(kind)


def _huge_int(data):
    """Whether (nested) ``data`` holds a Python int outside int64's range."""
    if isinstance(data, (list, tuple)):
        return any(_huge_int(x) for x in data)
    return type(data) is int and not -2 ** 63 <= data < 2 ** 63


def _first_odd(data):
    if isinstance(data, (list, tuple)):
        for x in data:
            found = _first_odd(x)
            if found is not None:
                return found
        return None
    return None if isinstance(data, numbers.Number) else _tp_name(data)


def _overlaps(ndarray):
    """Whether elements of ``ndarray`` share memory (broadcast, stride 0): PyTorch copies
    those into a contiguous tensor, others keep their order of strides."""
    return any(st == 0 and n > 1 for st, n in zip(ndarray.strides, ndarray.shape))


def _check_indexable(data, dtype, given=None):
    """PyTorch's TypeError for a value in ``data`` read into an integral or bool ``dtype``
    that it reads by ``__index__`` and that has none: a floating-point or complex tensor, a
    NumPy bool (but into bool), float or complex scalar (a Python float is read as such).
    PyTorch infers the dtype and checks the shape first: their errors (``given``: the dtype
    asked for) come before."""
    if dtype is None or dtype.is_floating_point or dtype.is_complex:
        return
    kinds = "fc" if dtype is D.bool_ else "bfc"
    error = _unindexable(data, kinds)
    if error is not None:
        raise _nested_error(data, given, kinds) or error


def _unindexable(data, kinds):
    if isinstance(data, (list, tuple)):
        for y in data:
            error = _unindexable(y, kinds)
            if error is not None:
                return error
        return None
    if isinstance(data, Tensor):
        if data.dtype.is_floating_point or data.dtype.is_complex:
            return TypeError("only integer tensors of a single element can be converted to "
                             "an index")
    elif isinstance(data, np.ndarray):                  # read element by element
        return _unindexable(data.reshape(-1)[0], kinds) if data.size else None
    elif isinstance(data, np.generic) and data.dtype.kind in kinds \
            and not isinstance(data, float):
        return TypeError(f"'{_tp_name(data)}' object cannot be interpreted as an integer")
    return None


def _real_parts(data):
    """``data`` with its NumPy complex scalars (and arrays' elements) replaced by their real
    parts: PyTorch reads those into a real dtype by ``__float__`` (with NumPy's warning)."""
    if isinstance(data, (list, tuple)):
        return type(data)(_real_parts(y) for y in data)
    if type(data) is _TensorComplex:
        if data.imag:
            raise RuntimeError("value cannot be converted to type double without overflow")
        return data.real
    if isinstance(data, np.generic) and data.dtype.kind == "c":
        warnings.warn("Casting complex values to real discards the imaginary part",
                      np.exceptions.ComplexWarning, stacklevel=outside_level())
        return float(data.real)
    if isinstance(data, np.ndarray) and data.dtype.kind == "c":
        return [_real_parts(y) for y in data]
    return data


def _tp_name(obj):
    """The type name CPython's C API reports: qualified for static extension types."""
    t = type(obj)
    if t.__module__ == "ember._conj_view":     # a conj or neg view is a plain Tensor to users
        return "Tensor"
    if t.__module__ == "builtins" or t.__flags__ & (1 << 9):     # Py_TPFLAGS_HEAPTYPE
        return t.__name__
    return f"{t.__module__}.{t.__name__}"


def _check_strides(ndarray):
    if any(s < 0 for s in ndarray.strides):
        raise ValueError("At least one stride in the given numpy array is negative, and "
                         "tensors with negative strides are not currently supported. (You can "
                         "probably work around this by making a copy of your array  with "
                         "array.copy().) ")     # (PyTorch's spacing)
