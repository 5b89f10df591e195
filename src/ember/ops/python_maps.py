"""The CPU tensors' in-place methods that take a Python function: apply_, map_, map2_."""

import operator

import numpy as np

from ember import _dtype as D
from ember._tensor import Tensor, _make
from ember._transform_births import STATE as _BIRTHS, wrapped_here
from ember.ops._dispatch import ACTIVE_VMAPS
from ember.ops.conversion import copy_


def _apply_python(self, name, operands, fn):
    """Write ``fn`` of each element of this tensor (and of ``operands``, broadcast to it)
    into it: the CPU tensors' in-place methods that take a Python function."""
    _check_tensor_operands(name, operands)
    if self.is_meta:
        return self                 # nothing to compute, as PyTorch
    if self.device.type != "cpu" or any(o.device.type != "cpu" for o in operands):
        raise TypeError(f"{name} is only implemented on CPU tensors")
    if self.requires_grad or any(o.requires_grad for o in operands):
        raise RuntimeError(f"Can't call {name}() on Variable that requires grad. Use "
                           f"var.detach().{name}() instead.")
    if _BIRTHS.levels or ACTIVE_VMAPS[0]:
        _check_storage(self, operands)
    labels = ("'other'",) if len(operands) == 1 else ("argument 'x'", "argument 'y'")
    for label, o in zip(labels, operands):
        if o.dtype != self.dtype:
            raise TypeError(f"{name}: expected {self.type()} for {label} "
                            f"(got {o.type()})")
    arrays = [self._data] + [o.expand(self.shape)._data for o in operands]
    unpack = _element_unpacker(self.dtype, self._data.dtype)
    values = np.frompyfunc(lambda *xs: unpack(fn(*xs)), len(arrays), 1)(*arrays)
    with np.errstate(over="ignore"):       # a float beyond the dtype's range becomes inf
        values = np.asarray(values, dtype=object).astype(self._data.dtype)
    if _BIRTHS.levels:      # (a captured tensor: PyTorch writes its memory, refusing nothing)
        self._data[...] = values
        self._bump_version()
        return self
    return copy_(self, _make(values))


def _check_storage(self, operands):
    """Inside transforms, PyTorch's error for a tensor they wrap (an input of one, a tensor
    made in grad's or jvp's function, vmap's batched tensors), which has no storage there."""
    from ember.func._batched import BatchedTensor
    for t in (self,) + tuple(operands):
        if isinstance(t, BatchedTensor) or wrapped_here(t):
            raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")


def _check_tensor_operands(name, operands):
    """map_'s and map2_'s tensor arguments are tensors (PyTorch's argument-parser error)."""
    names = ("other",) if len(operands) == 1 else ("x", "y")
    for position, (label, o) in enumerate(zip(names, operands), 1):
        if not isinstance(o, Tensor):
            from ember._creation import _tp_name
            raise TypeError(f"{name}(): argument '{label}' (position {position}) must be "
                            f"Tensor, not {_tp_name(o)}")


def _element_unpacker(dtype, np_dtype):
    """How PyTorch turns a Python callback's result into an element of ``dtype``: floats and
    complex take real numbers (no strings), integers take anything with ``__index__`` or a
    float (truncated), and values out of an integer type's range raise."""
    if dtype.is_complex:
        return lambda v: complex(_real_number(v) if not isinstance(v, complex) else v)
    if dtype.is_floating_point:
        return _real_number
    if dtype == D.bool_:
        return lambda v: bool(v if isinstance(v, float) else operator.index(v))
    if dtype == D.uint64:
        return _unsigned_64
    info = np.iinfo(np_dtype)
    # unsigned types take negatives down to -max too, which wrap (uint8: -1 -> 255)
    low = -int(info.max) if info.min == 0 else int(info.min)
    return lambda v: _checked_integer(v, low, int(info.max), info.min, dtype)


def _real_number(v):
    if isinstance(v, (str, bytes, bytearray, complex)) or v is None:
        raise TypeError(f"must be real number, not {type(v).__name__}")
    return float(v)


def _checked_integer(v, low, high, true_low, dtype):
    if isinstance(v, float):
        if not true_low <= v <= high:        # nan fails this too
            raise RuntimeError(f"value cannot be converted to type {_short(dtype)} "
                               f"without overflow")
        return int(v)
    v = operator.index(v)
    if not -2**63 <= v < 2**63:
        raise ValueError("Overflow when unpacking long long")
    if not low <= v <= high:
        raise RuntimeError(f"value cannot be converted to type {_short(dtype)} without overflow")
    return v % (high + 1) if v < 0 and low == -high else v


def _unsigned_64(v):
    if isinstance(v, float):
        raise TypeError("an integer is required")
    v = operator.index(v)
    if v < 0:
        raise OverflowError("can't convert negative int to unsigned")
    if v >= 2**64:
        raise OverflowError("int too big to convert")
    return v


def _short(dtype):
    return str(dtype).split(".")[-1]


def apply_(self, callable):
    """Replace each element by ``callable(element)`` (CPU tensors)."""
    return _apply_python(self, "apply_", (), callable)


def map_(self, tensor, callable):
    """Replace each element by ``callable(element, other)``, ``tensor`` broadcast to this
    one (CPU tensors)."""
    return _apply_python(self, "map_", (tensor,), callable)


def map2_(self, x, y, callable):
    """Replace each element by ``callable(element, x_element, y_element)`` (CPU tensors)."""
    return _apply_python(self, "map2_", (x, y), callable)


Tensor.apply_, Tensor.map_, Tensor.map2_ = apply_, map_, map2_
