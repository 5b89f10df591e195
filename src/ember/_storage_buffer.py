"""Storages copied out of a Python buffer: ``UntypedStorage.from_buffer``,
``TypedStorage.from_buffer`` and the legacy classes' (``torch.IntStorage.from_buffer(b,
"big")``), decoding each element in the byte order given and storing it natively."""

import operator
import sys

import numpy as np

from ember import _dtype
from ember._device import as_device
from ember._legacy_storages import _LegacyStorage
from ember._storage import TypedStorage, UntypedStorage, _warn_typed_storage_removal

_ORDERS = ("big", "little", "native")


def _decoded(buffer, byte_order, count, offset, dtype):
    """A new tensor of ``count`` ``dtype`` elements read from ``buffer`` at byte ``offset``."""
    from ember._creation import from_numpy
    count, offset = operator.index(count), operator.index(offset)
    if dtype is None:
        raise RuntimeError("argument 'dtype' cannot be None")
    if dtype in (_dtype.uint16, _dtype.uint32, _dtype.uint64):
        raise RuntimeError(f"Unknown type: UInt{dtype.itemsize * 8}")
    one_byte = dtype in (_dtype.uint8, _dtype.int8)
    if not one_byte:                # (PyTorch ignores the byte order of single bytes)
        if byte_order is None:
            raise RuntimeError("function missing required argument 'byte_order' (pos 2)")
        if byte_order not in _ORDERS:
            raise ValueError(f"invalid byte_order '{byte_order}' (expected 'big', 'little', "
                             f"or 'native')")
    try:
        raw = np.frombuffer(memoryview(buffer).tobytes(), dtype=np.uint8)
    except TypeError:
        raise TypeError(f"a bytes-like object is required, not "
                        f"'{type(buffer).__name__}'") from None
    size, n = dtype.itemsize, len(raw)
    if not 0 <= offset <= n:
        raise ValueError(f"offset must be non-negative and no greater than buffer length ({n}) "
                         f", but got {offset}")
    if count < 0:
        if (n - offset) % size:
            raise ValueError(f"buffer size ({n}) must be a multiple of element size ({size})")
        count = (n - offset) // size
    if offset + count * size > n:
        raise ValueError(f"buffer has only {n - offset} elements after offset {offset}, but "
                         f"specified a size of {count}")
    data = raw[offset:offset + count * size]
    if not one_byte and byte_order != "native" and byte_order != sys.byteorder:
        part = size // 2 if dtype.is_complex else size      # each component swapped
        data = data.reshape(-1, part)[:, ::-1]
    data = np.ascontiguousarray(data).reshape(-1)
    if dtype is _dtype.bool_:
        return from_numpy(data != 0)
    return from_numpy(data.view(dtype.np).copy())


def untyped_from_buffer(buffer, byte_order=None, count=-1, offset=0, dtype=None):
    """An UntypedStorage holding a copy of ``count`` ``dtype`` elements of ``buffer``."""
    return UntypedStorage._of(_decoded(buffer, byte_order, count, offset, dtype))


def typed_from_buffer(buffer, byte_order=None, count=-1, offset=0, *, dtype=None,
                      device=None):
    """A TypedStorage of ``dtype`` (the default dtype if None) copied from ``buffer``."""
    _warn_typed_storage_removal(stacklevel=3)
    if device is not None and as_device(device).type != "cpu":
        raise RuntimeError(f"TypedStorage.from_buffer: Not available for device "
                           f"{as_device(device).type}")
    dtype = _dtype.get_default_dtype() if dtype is None else dtype
    return TypedStorage._of(_decoded(buffer, byte_order, count, offset, dtype))


def legacy_from_buffer(cls, buffer, byte_order=None, count=-1, offset=0, **kwargs):
    """``ember.IntStorage.from_buffer(...)``: a TypedStorage of the class's dtype."""
    for name in ("dtype", "device"):
        if name in kwargs:
            raise RuntimeError(f"from_buffer: '{name}' can only be specified in "
                               f"UntypedStorage.from_buffer and TypedStorage.from_buffer")
    if kwargs:
        raise TypeError(f"from_buffer() got an unexpected keyword argument '{next(iter(kwargs))}'")
    _warn_typed_storage_removal(stacklevel=3)
    return TypedStorage._of(_decoded(buffer, byte_order, count, offset, cls.dtype))


UntypedStorage.from_buffer = staticmethod(untyped_from_buffer)
TypedStorage.from_buffer = staticmethod(typed_from_buffer)
_LegacyStorage.from_buffer = classmethod(legacy_from_buffer)
