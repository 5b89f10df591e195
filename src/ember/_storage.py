"""Storages (``torch.UntypedStorage``, ``torch.TypedStorage``): the memory of a tensor's view
root, as bytes or as elements of the tensor's dtype.

ember keeps no storage objects of its own: a storage is a handle on the tensor that owns the
memory (a view's ``_view[0]``, else the tensor itself), and reads its address, size and
values from that tensor's array. A view and its base therefore give storages with the same
``data_ptr()`` and ``nbytes()``.
"""

import operator
import warnings

import numpy as _np

from ember import _dtype
from ember._conj_view import memory, set_memory
from ember._host_values import _to_host
from ember._storage_place import _address, _row_major_strides, _storage_root, born_row_major
from ember._tensor import _make
from ember._transform_births import STATE as _BIRTHS, refuse_captured
from ember.backend import on_device_of, xp_of

__all__ = ["UntypedStorage", "TypedStorage", "untyped_storage", "typed_storage", "from_file"]

_TYPED_STORAGE_WARNING = (
    "TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be "
    "the only storage class. This should only matter to you if you are using storages "
    "directly.  To access UntypedStorage directly, use tensor.untyped_storage() instead of "
    "tensor.storage()")
_warned = [False]


def _warn_typed_storage_removal(stacklevel=2):
    """Warn that TypedStorage is deprecated, once per process (as PyTorch)."""
    if not _warned[0]:
        warnings.warn(_TYPED_STORAGE_WARNING, UserWarning, stacklevel=stacklevel + 1)
        _warned[0] = True


def _reset_warn_typed_storage_removal():
    """Let the next TypedStorage use warn again."""
    _warned[0] = False


def extent(array):
    """The byte range ``[lo, hi)`` an array's elements span (``lo == hi`` when empty)."""
    lo = hi = _address(array)
    if array.size == 0:
        return lo, lo
    for n, st in zip(array.shape, array.strides):
        if st > 0:
            hi += (n - 1) * st
        else:
            lo += (n - 1) * st
    return lo, hi + array.itemsize


def _root(t):
    return _storage_root(t)


class _Storage:
    __slots__ = ("_root",)

    @classmethod
    def _of(cls, root):
        s = object.__new__(cls)
        s._root = root
        return s

    def data_ptr(self):
        """The address of the first byte (0 for an empty storage, as PyTorch)."""
        lo, hi = extent(self._root._data)
        return lo if hi > lo else 0

    def nbytes(self):
        """The size in bytes."""
        lo, hi = extent(self._root._data)
        return hi - lo

    @property
    def device(self):
        return self._root.device

    @property
    def is_cuda(self):
        return self._root.is_cuda

    def is_shared(self):
        """Whether the memory is shared memory (always True on CUDA)."""
        return self._root.is_shared()

    def share_memory_(self):
        """Move the memory into shared memory (see ``Tensor.share_memory_``); returns self."""
        self._root.share_memory_()
        return self

    def _flat(self, np_dtype):
        """The whole memory as a flat backend array of ``np_dtype``."""
        arr = self._root._data
        xp = xp_of(arr)
        # flip the axes walked backwards so the first element is the lowest address
        arr = arr[tuple(slice(None, None, -1) if st < 0 else slice(None)
                        for st in arr.strides)]
        if arr.itemsize == 1:       # (NumPy cannot rebuild float8's '<f1' from its interface)
            arr = arr.view(xp.uint8)
        n = self.nbytes() // arr.itemsize
        flat = xp.lib.stride_tricks.as_strided(arr, shape=(n,), strides=(arr.itemsize,))
        return flat.view(np_dtype)

    def _fill(self, np_dtype, value):
        """Set each element, the memory read as ``np_dtype``, to ``value`` (assigned as to a
        tensor's elements, with its errors); the tensors over this memory see the new values,
        their version unchanged, as PyTorch's."""
        flat = _make(self._flat(np_dtype))
        flat[:] = value
        return self

    def __len__(self):
        return self.size()

    def __iter__(self):
        return iter(self.tolist())

    def __getitem__(self, index):
        if not hasattr(index, "__index__"):
            raise TypeError(f"can't index a ember.{type(self).__name__} with "
                            f"{type(index).__name__}")
        n = self.size()
        i = operator.index(index)
        i = i + n if i < 0 else i
        if not 0 <= i < n:
            raise IndexError(f"index {i} out of range for storage of size {n}")
        return self.tolist()[i]

    def __repr__(self):
        if self.device.type == "meta":      # no values to show
            body = "..."
        else:
            body = " " + "\n ".join(map(str, self.tolist()))
        return (f"{body}\n[ember.storage.{type(self).__name__}({self._describe()}) "
                f"of size {self.size()}]")

    __str__ = __repr__


class UntypedStorage(_Storage):
    """The bytes of a tensor's memory (``torch.UntypedStorage``); ``UntypedStorage(n)`` makes
    ``n`` new zero bytes."""

    __slots__ = ()

    def __new__(cls, size=0, *, device=None):
        from ember._creation import zeros
        return cls._of(zeros(size, dtype=_dtype.uint8, device=device))

    def size(self):
        """The size in bytes."""
        return self.nbytes()

    def element_size(self):
        """Bytes per element: 1."""
        return 1

    def untyped(self):
        """This storage."""
        return self

    def fill_(self, value):
        """Set every byte to ``value``; returns self."""
        return self._fill(_dtype.uint8.np, value)

    def tolist(self):
        """The bytes as a list of ints."""
        return _to_host(self._flat(_dtype.uint8.np)).tolist()

    def _describe(self):
        return f"device={self.device}"


class TypedStorage(_Storage):
    """A tensor's memory as elements of its dtype (``torch.TypedStorage``, deprecated);
    ``TypedStorage(n or sequence, dtype=...)`` makes a new one."""

    __slots__ = ()

    def __new__(cls, data=0, *, dtype=None, device=None):
        from ember._creation import tensor, zeros
        _warn_typed_storage_removal()
        if isinstance(data, int):
            return cls._of(zeros(data, dtype=dtype, device=device))
        return cls._of(tensor(list(data), dtype=dtype, device=device))

    @property
    def dtype(self):
        return self._root.dtype

    def element_size(self):
        """Bytes per element."""
        return self._root.element_size()

    def size(self):
        """The number of elements."""
        return self.nbytes() // self.element_size()

    def untyped(self):
        """The same memory as an UntypedStorage."""
        return UntypedStorage._of(self._root)

    def fill_(self, value):
        """Set every element to ``value``; returns self."""
        return self._fill(self._root._data.dtype, value)

    def tolist(self):
        """The elements as a list of Python numbers."""
        return _make(self._flat(self._root._data.dtype)).tolist()

    def _describe(self):
        return f"dtype={self.dtype}, device={self.device}"


def untyped_storage(t):
    """The UntypedStorage of tensor ``t``'s memory."""
    return UntypedStorage._of(_root(t))


def typed_storage(t):
    """The TypedStorage of tensor ``t``'s memory (warns as deprecated, once)."""
    _warn_typed_storage_removal(stacklevel=3)
    return TypedStorage._of(_root(t))


def from_file(filename, shared=None, size=0, *, dtype=None, layout=None, device=None,
              pin_memory=False):
    """A 1-D CPU tensor of ``size`` elements over the memory-mapped file ``filename``.

    ``shared=True`` writes changes through to the file (created or grown as needed); otherwise
    the mapping is private (copy on write) and the file must hold ``size`` elements."""
    import os

    import numpy as np
    dtype = _dtype.get_default_dtype() if dtype is None else dtype
    if device is not None and str(device) != "cpu":
        raise RuntimeError("from_file: only CPU tensors can be mapped to files")
    nbytes = size * dtype.itemsize
    if shared:
        with open(filename, "ab") as f:         # create it, or open it without truncating
            if f.tell() < nbytes:
                f.truncate(nbytes)
    elif not os.path.exists(filename):
        raise RuntimeError(f"unable to open file <{filename}> in read-only mode: No such file "
                           f"or directory (2)")
    elif os.path.getsize(filename) < nbytes:
        raise RuntimeError(f"file <{filename}> size <{os.path.getsize(filename)}> is smaller "
                           f"than the required mapping size <{nbytes}>")
    if size == 0:
        return _make(np.empty(0, dtype.np))
    mapped = np.memmap(filename, dtype=dtype.np, mode="r+" if shared else "c", shape=(size,))
    return _make(mapped.view(np.ndarray))       # keeps the mapping alive through .base


# --- Tensor.set_: point a tensor at other memory ----------------------------------------------

def set_(self, *args, **kwargs):
    """Make this tensor use other memory, in place: ``source``'s (a tensor's, with its shape
    and strides), a storage's (from ``storage_offset``, with ``size`` and ``stride``, in
    elements; for a tensor, counted from its own offset), or none (an empty tensor)."""
    from ember._inference import MADE, check_inplace
    from ember._tensor import Tensor
    from ember.autograd.grad_mode import STATE
    source, storage_offset, size, stride = _set_arguments(args, kwargs)
    if MADE[0]:
        check_inplace(self)     # (PyTorch points an inference tensor elsewhere, then refuses)
    if STATE.grad_enabled and self._view is not None:
        from ember.ops._inplace import _check_leaf
        _check_leaf(self)       # a view of a leaf that requires grad: PyTorch's error
    if self._requires_grad and STATE.grad_enabled:
        if self._grad_fn is None:
            raise RuntimeError("a leaf Variable that requires grad is being used in an "
                               "in-place operation.")
        raise RuntimeError("set_(): cannot give new memory to a tensor that is part of an "
                           "autograd graph; call it on a detached tensor or under no_grad()")
    dtype = self._data.dtype
    if isinstance(source, Tensor) and size is None:
        _check_dtype(source.dtype, self.dtype)
        array, root = memory(source), _storage_root(source)     # (memory, not values)
    elif source is not None:
        if isinstance(source, Tensor):
            _check_dtype(source.dtype, self.dtype)
            storage_offset += source.storage_offset()
            source = source.untyped_storage()
        elif isinstance(source, TypedStorage):
            _check_dtype(source.dtype, self.dtype)
        array = _strided_in(source, dtype, storage_offset, size, stride)
        root = source._root
    else:
        # row-major (as a fresh one's: _storage_place.born_row_major), on its device
        array, root = born_row_major(on_device_of(_np.zeros(0, dtype), self._data)), None
    if _BIRTHS.levels:      # NOTE [Captured tensors]
        refuse_captured(self, _set_overload(args, kwargs, size))
    old_root, old_base, old_memory = _storage_root(self), self._base, memory(self)
    set_memory(self, array)         # (a conjugate view keeps conjugating: as PyTorch's)
    if self._view is not None or self._meta is not None and "set_base" in self._meta:
        # PyTorch's tensor stays a view of its base (``_base``), over the new memory
        self._meta = {**(self._meta or {}), "set_base": old_base}
    self._view = None
    if old_memory.size:             # its views made so far keep the memory they view
        _keep_former_root(self, old_memory if old_root is self else old_root._data,
                          None if old_root is self else old_root)
    if root is not None and root is not self:
        import weakref
        # (and its memory: the root may go, as a temporary source's base does)
        self._meta = {**(self._meta or {}), "storage_root": weakref.ref(root),
                      "storage_array": root._data}
    elif root is self and old_root is self and array is not old_memory:
        # a part of its own memory (``b.set_(b[2:])``): that memory stays its storage
        self._meta = {**(self._meta or {}), "storage_root": _no_tensor,
                      "storage_array": old_memory}
    elif self._meta is not None:
        self._meta.pop("storage_root", None)
        self._meta.pop("storage_array", None)
    self._bump_version()
    if STATE.grad_enabled and (self._grad_fn is not None or isinstance(source, Tensor)
                               and source.requires_grad):
        from ember.ops._not_implemented import hang_not_implemented   # (PyTorch's set_ has
        hang_not_implemented(self, "set_", [self, source])              # no derivative)
    return self


def _no_tensor():
    return None                         # (a storage root no tensor holds: _storage_root)


def _keep_former_root(t, array, root):
    """Note on ``t``, about to use other memory, the memory ``array`` it used (``root``'s, or
    its own when None) for ``_storage_root`` of its views made so far. Weakly: held by those
    views alone, it goes with them; the notes of gone memory are dropped here."""
    import weakref
    former = [f for f in (t._meta or {}).get("former_roots", ()) if f[0]() is not None]
    former.append((weakref.ref(array), None if root is None else weakref.ref(root)))
    t._meta = {**(t._meta or {}), "former_roots": tuple(former)}


def _set_overload(args, kwargs, size):
    """The name PyTorch's error gives a ``set_`` call (``aten::set_.source_Tensor``)."""
    from ember._tensor import Tensor
    source = args[0] if args else kwargs.get("source")
    if source is None:
        return "aten::set_"
    kind = "Tensor" if isinstance(source, Tensor) else "Storage"
    offset = size is not None or len(args) > 1 or "storage_offset" in kwargs
    return f"aten::set_.source_{kind}{'_storage_offset' if offset else ''}"


def _strided_in(storage, dtype, offset, size, stride):
    """The array of ``dtype`` that ``size``, ``stride`` and ``offset`` (in elements; all of
    the storage when ``size`` is None) lay out in ``storage``."""
    flat = storage._flat(dtype)
    shape = (len(flat) - offset,) if size is None else size
    strides = _row_major_strides(shape) if not stride else stride
    if len(strides) != len(shape):
        raise RuntimeError(f"unequal size length ({len(shape)}) and stride length "
                           f"({len(strides)})")
    needed = 0 if 0 in shape else offset + 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    if needed > len(flat) or offset < 0:
        raise RuntimeError(f"setStorage: sizes {list(shape)}, strides {list(strides)}, "
                           f"storage offset {offset}, and itemsize {dtype.itemsize} "
                           f"requiring a storage size of {needed * dtype.itemsize} are "
                           f"out of bounds for storage of size {storage.nbytes()}")
    return xp_of(flat).lib.stride_tricks.as_strided(
        flat[offset:], shape=shape, strides=tuple(s * dtype.itemsize for s in strides))


_SET_NAMES = ("source", "storage_offset", "size", "stride")
_SET_SIGNATURES = (
    " * ()\n * (torch.Storage source)\n * (torch.Storage source, int storage_offset, tuple of "
    "ints size, tuple of ints stride = None)\n * (Tensor source)\n * (Tensor source, int "
    "storage_offset, tuple of ints size, tuple of ints stride = None)\n")


def _set_arguments(args, kwargs):
    """``(source, storage_offset, size, stride)`` of a ``set_`` call, checked as PyTorch's
    parser checks its five forms; ``size`` is None for all of a source, and ``source`` None
    for none."""
    from ember._tensor import Tensor
    given = dict(zip(_SET_NAMES, args))
    if len(args) > 4 or any(k not in _SET_NAMES or k in given for k in kwargs):
        raise _invalid_set(args, kwargs)
    given.update(kwargs)
    if not given:
        return None, 0, None, None
    source = given.get("source")
    if not isinstance(source, (Tensor, _Storage)):
        raise _invalid_set(args, kwargs)
    if len(given) == 1:
        return source, 0, None, None
    offset, size, stride = (given.get(n) for n in _SET_NAMES[1:])
    if "storage_offset" not in given or "size" not in given or not _is_int(offset) \
            or not _is_ints(size) or not (stride is None or _is_ints(stride)):
        raise _invalid_set(args, kwargs)
    stride = None if stride is None else tuple(map(operator.index, stride))
    return source, operator.index(offset), tuple(map(operator.index, size)), stride


def _is_int(value):
    return not isinstance(value, bool) and hasattr(value, "__index__")


def _is_ints(value):
    return isinstance(value, (tuple, list)) and all(map(_is_int, value))


def _invalid_set(args, kwargs):
    got = ", ".join(map(_arg_type_name, args))
    for name, value in kwargs.items():
        got += f"{', ' if got else ''}{name}={_arg_type_name(value)}"
    if not args:
        got += ", "                     # (PyTorch's wording when all come by name)
    return TypeError(f"set_() received an invalid combination of arguments - got ({got}), "
                     f"but expected one of:\n{_SET_SIGNATURES}")


def _arg_type_name(value):
    cls = type(value)
    if isinstance(value, _Storage):
        return f"ember.storage.{cls.__name__}"
    return cls.__name__


def _check_dtype(source, target):
    if source != target:
        raise RuntimeError(f"Could not set tensor of type {_c_type(source)} to a tensor of "
                           f"type {_c_type(target)}")


def _c_type(dtype):
    names = {"Float": "float", "Double": "double", "Long": "long int", "Int": "int",
             "Short": "short int", "Char": "signed char", "Byte": "unsigned char",
             "Half": "c10::Half", "BFloat16": "c10::BFloat16", "Bool": "bool",
             "ComplexFloat": "c10::complex<float>", "ComplexDouble": "c10::complex<double>"}
    return names.get(dtype._torch_name, dtype._torch_name)


def is_set_to(self, tensor):
    """Whether both tensors use the same memory the same way: address, storage offset,
    shape and strides (in elements; the dtypes may differ, as for ``x.view(ember.int32)``)."""
    return (self.device == tensor.device and self.shape == tensor.shape
            and self.stride() == tensor.stride()
            and _address(self._data) == _address(tensor._data)
            and self.storage_offset() == tensor.storage_offset())
