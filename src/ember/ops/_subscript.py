"""``Tensor.__getitem__`` and ``Tensor.__setitem__``: PyTorch's subscript rules on the indexing ops.

A subscript is read left to right. Ints, slices, None and Ellipsis form the basic key, applied
first as one view; integer tensors, masks, lists and arrays become advanced indices on the
dims of that view (NumPy's placement rules from there on). Unlike NumPy, an int next to an
advanced index is a plain ``select``: ``x[0, :, [1, 2]]`` has shape ``(4, 2)`` for a
``(3, 4, 5)`` tensor, as in PyTorch.
"""

import operator
import warnings

import numpy as np

from ember._tensor import Tensor, _make
from ember._warn import outside_level
from ember.backend import xp_of
from ember.ops._inplace import call_inplace
from ember.ops._registry import call
from ember.ops.indexing import (SubscriptIndices, _check_values_shape, _getitem_slice, _index,
                                basic_view, index_put, scalar_array)
from ember.ops.subscript_views import _steps

_FULL = slice(None)
_SEQUENCE_WARNING = (
    "Using a non-tuple sequence for multidimensional indexing is deprecated and will be changed "
    "in pytorch 2.9; use x[tuple(seq)] instead of x[seq]. In pytorch 2.9 this will be "
    "interpreted as tensor index, x[torch.tensor(seq)], which will result either in an error "
    "or a different result")
_INT_INDEX = (np.dtype(np.int64), np.dtype(np.int32))


def _invalid(k):
    if isinstance(k, (str, bytes)):     # a sequence to PyTorch, whose data it cannot read
        raise TypeError(f"new(): invalid data type '{type(k).__name__}'")
    kind = type(k)
    name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
    raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                     f"Variables are valid indices (got {name})")


def _check_bare_key_of_scalar(key):
    """PyTorch's errors for a lone int or slice subscript of a 0-dim tensor (inside a tuple,
    or of any other kind, it is one index too many)."""
    if type(key) is int or isinstance(key, np.integer):
        if key == 0:
            raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python "
                             "or `tensor.item<T>()` in C++ to convert a 0-dim tensor to a "
                             "number")
        raise _out_of_bounds(int(key), 0, 0)
    if type(key) is slice:
        _slice(key)
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")


def _out_of_bounds(index, dim, size):
    """PyTorch's error for an int subscript outside the dim (or outside int64)."""
    if not -2 ** 63 <= index < 2 ** 63:
        return ValueError("Overflow when unpacking long long")
    return IndexError(f"index {index} is out of bounds for dimension {dim} with size {size}")


def _as_tuple(key):
    """PyTorch's rule for which subscripts are several indices rather than one."""
    if type(key) is tuple:
        return key
    if (type(key) is list or type(key) is str) and len(key) < 32:     # a str: of strs
        for k in key:
            if k is None or k is Ellipsis or isinstance(k, (slice, Tensor, list, tuple, range,
                                                            str, bytes)):
                warnings.warn(_SEQUENCE_WARNING, UserWarning, stacklevel=4)
                return tuple(key)
    return (key,)


def _classify(k):
    """("int", i) | ("slice", s) | ("none",) | ("ellipsis",) | ("bool", b) | ("tensor", t)
    | ("invalid", k), for a kind of key that indexes nothing."""
    t = type(k)
    if t is int:
        return "int", k
    if t is slice:
        return "slice", k
    if k is None:
        return "none", None
    if k is Ellipsis:
        return "ellipsis", None
    if t is bool:
        return "bool", k
    if isinstance(k, Tensor):
        return _classify_tensor(k)
    if isinstance(k, np.integer):
        return "int", int(k)
    if isinstance(k, (list, tuple, range, np.ndarray)):     # PyTorch takes any sequence
        from ember._creation import tensor
        arr = np.asarray(k)
        dtype = arr.dtype
        if dtype is not _INT64 and dtype is not _BOOL and dtype is not _UINT8:
            arr = _long_indices(k, arr)
        return _classify_tensor(tensor(arr))
    return "invalid", k


_INT64, _BOOL, _UINT8 = np.dtype(np.int64), np.dtype(np.bool_), np.dtype(np.uint8)


def _long_indices(k, arr):
    """A sequence subscript that is not a mask, read as int64 as PyTorch reads it: floats are
    truncated (``x[np.array([1.0, 2.0])]`` is ``x[[1, 2]]``), whatever their container."""
    kind = arr.dtype.kind
    if type(k) is not np.ndarray and (arr.dtype == np.uint64 or kind == "O" and arr.size and all(
            type(v) is int for v in arr.flat)):     # Python ints beyond int64
        raise ValueError("Overflow when unpacking long long")
    if kind in "iu":
        return arr.astype(np.int64, copy=False)
    if kind == "f":
        # Python floats are range-checked (2**63 itself passes, as in PyTorch's check)
        if type(k) is not np.ndarray and not (np.abs(arr) <= 2.0 ** 63).all():
            raise RuntimeError("value cannot be converted to type int64 without overflow")
        with np.errstate(invalid="ignore"):
            return arr.astype(np.int64)
    if kind == "c" and type(k) is np.ndarray:
        warnings.warn("Casting complex values to real discards the imaginary part",
                      UserWarning, stacklevel=outside_level())
        return arr.real.astype(np.int64)
    if kind == "c":
        raise TypeError("'complex' object cannot be interpreted as an integer")
    if kind in "US" and type(k) is not np.ndarray:
        raise TypeError(f"new(): invalid data type '{'str' if kind == 'U' else 'bytes'}'")
    raise IndexError("tensors used as indices must be long, int, byte or bool tensors")


def _classify_tensor(k):
    dtype = k._data.dtype
    if dtype == np.bool_ or dtype == np.uint8:
        if k.ndim == 0:
            return "bool", bool(k._data)
        return "tensor", k
    if k.ndim == 0 and dtype in _INT_INDEX and not _batched(k):
        return "int", int(k._data)
    return "tensor", k            # other dtypes are rejected with the advanced indices


def _batched(k):
    """Whether ``k`` is a vmap BatchedTensor: one integer per batch element, so an advanced
    index rather than a number."""
    if type(k) is Tensor:
        return False
    from ember.func._batched import BatchedTensor
    return type(k) is BatchedTensor


def _slice(s):
    start, stop, step = s.start, s.stop, s.step
    if step is not None:
        step = operator.index(step)
        if step == 0:
            raise ValueError("slice step cannot be zero")
        if step < 0:
            raise ValueError("step must be greater than zero")
        if step == 1:
            step = None
    if start is not None:
        start = operator.index(start)
    if stop is not None:
        stop = operator.index(stop)
    return slice(start, stop, step)


def parse(t, key):
    """Split a subscript into (basic key, advanced indices or None) for tensor ``t``.

    The basic key is a tuple of ints, slices and None covering ``t``'s dims in order; the
    advanced indices are one entry per leading dim of ``t[basic key]`` (None: not indexed).
    """
    ndim = t.ndim
    if ndim == 0:
        _check_bare_key_of_scalar(key)
    items = [_classify(k) for k in _as_tuple(key)]
    consumed = 0
    for kind, v in items:
        if kind in ("int", "slice", "invalid"):
            consumed += 1
        elif kind == "tensor":
            consumed += v.ndim if v._data.dtype.kind in "bu" else 1
    if consumed > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    for kind, v in items:           # PyTorch counts the dims before it checks the kinds
        if kind == "invalid":
            _invalid(v)
    basic = []
    indices = []            # one entry per dim of t[basic]; a k-dim mask covers k dims
    advanced = False
    dim = 0                 # the next dim of t
    spare = ndim - consumed
    shape = t.shape
    for position, (kind, v) in enumerate(items):
        if kind == "int":
            size = shape[dim]
            if not -size <= v < size:       # PyTorch names the int's place in the subscript
                raise _out_of_bounds(v, position, size)
            basic.append(v)
            dim += 1
        elif kind == "slice":
            basic.append(_slice(v))
            indices.append(None)
            dim += 1
        elif kind == "none":
            basic.append(None)
            indices.append(None)
        elif kind == "ellipsis":
            basic.extend([_FULL] * spare)
            indices.extend([None] * spare)
            dim += spare
            spare = 0
        elif kind == "bool":
            basic.append(None)
            indices.append(np.zeros(1 if v else 0, dtype=np.int64))
            advanced = True
        else:
            n = v.ndim if v._data.dtype.kind in "bu" else 1
            basic.extend([_FULL] * n)
            indices.append(v)
            advanced = True
            dim += n
    if not advanced:
        return tuple(basic), None
    while indices[-1] is None:
        indices.pop()
    return tuple(basic), SubscriptIndices(indices)


def _is_trivial(basic):
    for k in basic:
        if k is None or type(k) is int or k != _FULL:
            return False
    return True


def getitem(self, key):
    """``self[key]``: a view for ints, slices, None and Ellipsis; a copy for advanced keys."""
    kind = type(key)
    if self._data.ndim:                 # the common single-key forms, without parsing
        if kind is int:
            size = self._data.shape[0]
            if not -size <= key < size:
                raise _out_of_bounds(key, 0, size)
            return basic_view(self, (key,))
        if kind is slice:                   # a slice, even of the whole dim (SliceBackward0)
            return basic_view(self, (_slice(key),), _getitem_slice)
        if kind is Tensor and key._data.dtype in _INT_INDEX and key._data.ndim:
            return call(_index, (self,), (SubscriptIndices((key,)),))
    basic, indices = parse(self, key)
    # one view node, named after the last step (PyTorch records a node per step: a chain
    # would cost a dispatch per step on every recorded subscript)
    if indices is None:
        return basic_view(self, basic)
    view = self if _is_trivial(basic) else basic_view(self, basic)
    return call(_index, (view,), (indices,))


def setitem(self, key, value):
    """``self[key] = value``, in place; ``value`` (a number or tensor) broadcasts to the region."""
    number = not isinstance(value, Tensor)
    if number:                              # PyTorch reads the value before the key
        value = _value_for(self, value, False)
    if key is False:                        # (PyTorch writes nothing, not even a version)
        return
    if key is True:                         # a view (not an advanced index): copy_ casts
        _copy_to(basic_view(self, (None,)), value)
        return
    basic, indices = parse(self, key)
    # slices of whole dims (from 0, step 1) are no view: PyTorch writes into ``self`` itself
    target = self if _is_trivial(basic) or not _steps(basic, self.shape) else \
        basic_view(self, basic)
    if indices is None:
        _copy_to(target, value, number)
        return
    if not number:                          # (a number's 0-dim tensor is ready)
        value = _value_for(target, value, True)
    call_inplace(index_put, (target, value), (indices or (), False))


def _copy_to(dst, value, number=False):
    """``dst[...] = value``: a copy, or a fill of a 0-dim value, as PyTorch's (its nodes:
    CopyBackwards, FillBackward3); ``number``: the value is one made of a Python number."""
    if not value._data.ndim:
        if not number and value.device != dst.device:
            value = value.to(dst.device)
        (dst.fill_ if dst._data.ndim else dst.copy_)(value)
        return
    value = _value_for(dst, value, True)        # (leading 1s dropped; copy_ casts the dtype)
    shape = dst._data.shape
    if value._data.shape != shape:
        _check_values_shape(value._data, shape, False, value._data.dtype)
        if value._vc is not None and value._vc is dst._vc:
            value = value.expand(shape)         # as PyTorch's: no partial overlap then
    dst.copy_(value)


def _value_for(target, value, advanced):
    if isinstance(value, Tensor):
        shape = value._data.shape
        if not shape and value.device != target.device:
            value = value.to(target.device)
        lead = 0
        while lead < len(shape) and shape[lead] == 1:
            lead += 1
        if lead:
            value = value.reshape(shape[lead:])
        if value.dtype is not target.dtype and not advanced:
            # (the shape is refused in the value's dtype; index_put checks the others)
            _check_values_shape(value._data, target._data.shape, False, value._data.dtype)
            value = value.to(target.dtype)
        return value
    # NumPy's integers and its float64/complex128 (Python float/complex subclasses) only: PyTorch
    # refuses np.bool_, np.float32, np.float16 ... even into a tensor of that very dtype
    if isinstance(value, (int, float, complex, np.integer)):
        return _make(scalar_array(xp_of(target._data), value, target.dtype))
    kind = type(value)
    name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
    raise TypeError(f"can't assign a {name} to a torch.{target.dtype._legacy}")


Tensor.__getitem__ = getitem
Tensor.__setitem__ = setitem
