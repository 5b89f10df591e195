"""The pickler ember.save uses: tensors as PyTorch pickles them, their memory as storages.

Tensors whose arrays share one buffer are written as one storage with offsets and strides, as
PyTorch does, so views load as views (in ember and in PyTorch). The pickle names PyTorch's
globals (``torch._utils _rebuild_tensor_v2``, ``torch FloatStorage``, ...) without importing
PyTorch: the C pickler writes stand-ins for them, which ``dumps`` then renames.
"""

import ctypes
import io
import pickle
import types
from collections import OrderedDict

import numpy as np

from ember import _dtype as D
from ember._api import layout
from ember._device import device
from ember._storage import _Storage as _EmberStorage
from ember._storage_place import hidden_element
from ember._host_values import _to_host
from ember._tensor import Size, Tensor, _make
from ember.serialization import _names as N
from ember.serialization._locations import tag_of
from ember.sparse._tensor import SparseTensor


class StorageArray(np.ndarray):
    """The flat bytes of one storage read by ember.load: saving stops its search for the
    owner of a tensor's memory here (a memory-mapped file is one buffer for many storages)."""


def _address(arr):
    return arr.ctypes.data          # (quicker than __array_interface__, which builds a dict)


def _bounds(arr, address=None):
    """The byte range [lo, hi) an array's elements touch (``address``: where its first
    element is, if known); None when it has no elements."""
    lo = hi = _address(arr) if address is None else address
    for n, st in zip(arr.shape, arr.strides):
        if n == 0:
            return None
        if st > 0:
            hi += (n - 1) * st
        else:
            lo += (n - 1) * st
    return lo, hi + arr.itemsize


def _owner(arr, address):
    """The object that owns an array's memory and the byte range it spans, or (None, None);
    ``address`` is the array's."""
    obj = arr
    while not isinstance(obj, StorageArray):
        base = getattr(obj, "base", None)       # ndarray chains, and as_strided's DummyArray
        if base is None:
            break
        obj = base
    if obj is arr:
        return obj, _bounds(obj, address)
    if isinstance(obj, np.ndarray):
        return obj, _bounds(obj)
    try:
        flat = np.frombuffer(obj, dtype=np.uint8)
    except (TypeError, ValueError, BufferError):
        return None, None
    return obj, _bounds(flat)


_TENSORS = object()         # StorageTable.locate's default: the storage has the tensor's dtype


class _Storage:
    __slots__ = ("key", "dtype", "lo", "nbytes", "keepalive", "location")

    def __init__(self, key, dtype, lo, nbytes, keepalive, location):
        self.key, self.dtype, self.lo, self.nbytes = key, dtype, lo, nbytes
        self.keepalive, self.location = keepalive, location

    def pid(self, dtype=_TENSORS):
        """The persistent id of one reference to this storage, as ``dtype``'s storage
        (default: the storage's own); PyTorch names each reference's type."""
        dtype = self.dtype if dtype is _TENSORS else dtype
        if dtype in N.STORAGE_GLOBALS:
            cls, numel = N.STORAGE_GLOBALS[dtype], self.nbytes // dtype.itemsize
        else:
            cls, numel = N.UNTYPED_GLOBAL, self.nbytes
        return ("storage", cls, self.key, self.location, numel)

    def data(self):
        if isinstance(self.keepalive, np.ndarray) and self.keepalive.flags.c_contiguous \
                and _address(self.keepalive) == self.lo \
                and self.keepalive.nbytes == self.nbytes:
            return self.keepalive.reshape(-1).view(np.uint8)
        return (ctypes.c_ubyte * self.nbytes).from_address(self.lo)


class _StorageRef:
    """Stands for a storage in the pickle; the pickler writes it as a persistent id."""

    __slots__ = ("storage", "dtype")

    def __init__(self, storage, dtype=_TENSORS):
        self.storage, self.dtype = storage, dtype      # (the referring tensor's dtype)


def _byte_class(dtype):
    """What PyTorch compares to refuse one memory saved as two types: the dtype of a typed
    storage; None for bytes (untyped storages, and the uint8, uint16-64 and float8 tensors
    whose memory PyTorch saves as bytes or ByteStorage)."""
    return None if dtype is D.uint8 or dtype not in N.STORAGE_GLOBALS else dtype




class StorageTable:
    """The storages of the tensors pickled so far, keyed by the buffer that owns them."""

    def __init__(self):
        self.storages = []
        self._by_owner = {}

    def _new(self, dtype, lo, nbytes, keepalive, location):
        s = _Storage(str(len(self.storages)), dtype, lo, nbytes, keepalive, location)
        self.storages.append(s)
        return s

    def storage_of(self, st):
        """(the saved storage of ember storage ``st``, its dtype: None if untyped)."""
        from ember._storage import TypedStorage
        dtype = st._root.dtype if isinstance(st, TypedStorage) else None
        return self.locate(st._root, dtype)[0], dtype

    def locate(self, t, dtype=_TENSORS):
        """(storage, offset, size, stride) for tensor ``t``, all in elements; ``dtype`` is the
        storage's (None: untyped), by default t's."""
        arr = _to_host(t._data)
        dtype = t.dtype if dtype is _TENSORS else dtype
        item = arr.itemsize
        location = tag_of(t)
        address = _address(arr)
        owner, extent = _owner(arr, address)
        bounds = _bounds(arr, address)
        if bounds is None and owner is not None:    # an empty view keeps its place, as torch's
            bounds = (address, address)
        fits = (owner is not None and bounds is not None and extent is not None
                and extent[0] <= bounds[0] and bounds[1] <= extent[1]
                and (bounds[0] - extent[0]) % item == 0
                and all(st >= 0 and st % item == 0 for st in arr.strides))
        if fits:
            s = self._by_owner.get(id(owner))
            if s is None:
                nbytes = (extent[1] - extent[0]) // item * item
                if hidden_element(owner):
                    nbytes = 0      # (a fresh empty's element: _storage_place.born_row_major)
                s = self._by_owner[id(owner)] = self._new(dtype, extent[0], nbytes, owner,
                                                          location)
            elif _byte_class(s.dtype) is not _byte_class(dtype):
                raise RuntimeError("Cannot save multiple tensors or storages that view the "
                                   "same data as different types")
            offset = (address - s.lo) // item
            return s, offset, arr.shape, tuple(st // item for st in arr.strides)
        # memory we cannot describe as one storage (negative strides, foreign buffers)
        flat = np.ascontiguousarray(arr)
        s = self._new(dtype, _address(flat), flat.nbytes, flat, location)
        if flat.size == 0:      # NumPy gives empty arrays zero strides; PyTorch keeps its own
            return s, t.storage_offset(), arr.shape, tuple(t.stride())     # (and offset)
        strides = tuple(st // item for st in flat.strides)
        return s, 0, arr.shape, strides


def dumps(obj, protocol=2, pid_suffix=()):
    """(the pickle of ``obj`` as PyTorch writes it, the StorageTable of its storages).

    ``pid_suffix`` extends each storage's persistent id (the legacy format's view slot)."""
    if 0 <= protocol < 4:        # protocol 4 on names globals by STACK_GLOBAL: no line to swap
        table = StorageTable()
        buf = io.BytesIO()
        pickler = Pickler(buf, table, protocol, pid_suffix)
        pickler.dump(obj)
        data = _renamed(buf.getvalue(), pickler.renames.values())
        if data is not None:
            return data, table
    # the stream holds a stand-in's line elsewhere too (in a string, say; user hooks then run
    # a second time), or the protocol has no such lines: the pure-Python pickler writes
    # PyTorch's names directly
    table = StorageTable()
    buf = io.BytesIO()
    PyPickler(buf, table, protocol, pid_suffix).dump(obj)
    return buf.getvalue(), table


def _renamed(data, renames):
    """``data`` with each (stand-in line, PyTorch's line) replaced, or None if a stand-in line
    does not occur exactly once (only then is that one occurrence the pickler's global). One
    copy of the stream, however many lines are swapped."""
    spans = []
    for ours, theirs in renames:
        at = data.find(ours)
        if at < 0 or data.find(ours, at + 1) >= 0:
            return None
        spans.append((at, at + len(ours), theirs))
    if not spans:
        return data
    pieces, start = [], 0
    view = memoryview(data)
    for at, end, theirs in sorted(spans):
        pieces += (view[start:at], theirs)
        start = end
    pieces.append(view[start:])
    return b"".join(pieces)


def _global_line(module, name):
    return b"c" + f"{module}\n{name}\n".encode()


def _persistent_id(self, obj):
    if type(obj) is _StorageRef:
        return obj.storage.pid(obj.dtype) + self.pid_suffix
    if isinstance(obj, _EmberStorage):       # a storage saved by itself, as PyTorch does
        storage, dtype = self.table.storage_of(obj)
        return storage.pid(dtype) + self.pid_suffix
    return None


def _reduce(table, obj):
    """How ember's types pickle (as ``__reduce__`` would say), or NotImplemented."""
    if isinstance(obj, Tensor):
        if isinstance(obj, SparseTensor):
            return _reduce_sparse(obj)
        if obj.is_nested:
            return _reduce_jagged(obj)
        return _reduce_tensor(table, obj)
    if type(obj) is layout:
        return (N.GET_LAYOUT, (f"torch.{obj.name}",))
    if isinstance(obj, device):
        return (N.DEVICE, (str(obj),))
    if type(obj) is Size:
        return (N.SIZE, (tuple(obj),))
    return NotImplemented


class Pickler(pickle.Pickler):
    """The C pickler writing ember tensors, dtypes, devices and sizes as PyTorch does.

    It can write a global only under a name it can look up, so a PyTorch global goes in as a
    stand-in (``ember.serialization._names _torch_global_3``, ``ember float32`` for a dtype)
    and ``renames`` says which line to replace with PyTorch's (``dumps`` does)."""

    def __init__(self, file, table, protocol=2, pid_suffix=()):
        super().__init__(file, protocol=protocol)
        self.table = table
        self.pid_suffix = pid_suffix
        self.renames = {}           # stand-in line -> (stand-in line, PyTorch's line)

    persistent_id = _persistent_id

    def reducer_override(self, obj):
        kind = type(obj)
        if kind is N.TorchGlobal:
            return self._stand_in(obj, N.__name__, obj.stand_in, obj)
        if kind is D.dtype:         # ember.<name> is the dtype: the pickler finds it there
            return self._stand_in(obj, "ember", obj.name, N.DTYPE_GLOBALS[obj])
        return _reduce(self.table, obj)

    def _stand_in(self, obj, module, name, torch_global):
        ours = _global_line(module, name)
        self.renames[ours] = (ours, _global_line(torch_global.module, torch_global.name))
        return name


class PyPickler(pickle._Pickler):
    """The pure-Python pickler writing PyTorch's names directly (``dumps``'s fallback)."""

    dispatch = dict(pickle._Pickler.dispatch)

    def __init__(self, file, table, protocol=2, pid_suffix=()):
        super().__init__(file, protocol=protocol)
        self.table = table
        self.pid_suffix = pid_suffix

    persistent_id = _persistent_id

    def reducer_override(self, obj):
        return _reduce(self.table, obj)

    def _save_torch_global(self, obj):
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
        self.memoize(obj)

    def _save_dtype(self, obj):
        self.save(N.DTYPE_GLOBALS[obj])     # through the memo: each name is written once

    def save_global(self, obj, name=None):
        """Python's ``save_global`` raising the errors of the C pickler PyTorch uses: an
        AttributeError for a local object, "attribute lookup ... failed" for a missing one."""
        qualname = name or getattr(obj, "__qualname__", None) or obj.__name__
        if "<locals>" in qualname.split("."):
            raise AttributeError(f"Can't pickle local object {qualname!r}")
        try:
            super().save_global(obj, name)
        except pickle.PicklingError as e:
            if "it's not found as" not in str(e):
                raise
            module = pickle.whichmodule(obj, qualname)
            raise pickle.PicklingError(f"Can't pickle {obj!r}: attribute lookup {qualname} on "
                                       f"{module} failed") from None

    dispatch[N.TorchGlobal] = _save_torch_global
    dispatch[D.dtype] = _save_dtype
    dispatch[types.FunctionType] = save_global


def _reduce_sparse(t):
    """A sparse tensor as PyTorch pickles it: its layout and its component tensors."""
    if t.is_sparse:
        parts = (t._indices(), t._values().detach(), Size(t.shape), t.is_coalesced())
    else:       # compressed, then plain indices (PyTorch saves no requires_grad for sparse)
        parts = (t._crow, t._col, t._v.detach(), Size(t.shape))
    return (N.REBUILD_SPARSE, (t.layout, parts))


def _seqlen_stand_in(n):
    """PyTorch's pickled form of a cached min/max sequence length: an empty (n, 0) tensor."""
    return _make(np.empty((int(n), 0), dtype=np.float32))


def _reduce_jagged(t):
    """A jagged tensor as PyTorch pickles it: its constructor's arguments (the values as
    ``values()`` shows them, the offsets, lengths, ragged dim and cached lengths)."""
    cache = {name: _seqlen_stand_in(n) for name, n in
             (("min_seqlen", t._min_seqlen), ("max_seqlen", t._max_seqlen)) if n is not None}
    kwargs = {"values": t._v.detach().movedim(0, t._ragged_idx - 1), "offsets": t._offsets,
              "lengths": t._lengths, "_ragged_idx": t._ragged_idx, "_metadata_cache": cache,
              "requires_grad": t.requires_grad}
    return (N.REBUILD_FROM_TYPE, (N.REBUILD_NJT, N.NJT_CLASS, (kwargs,), {}))


def _reduce_tensor(table, t):
    from ember.nn.parameter import Parameter
    if "_fw_tangent" in t.__dict__:     # a forward-AD dual tensor saves as its primal
        primal = _make(t._data)
        primal._requires_grad = t._requires_grad
        t = primal
    elif getattr(t, "_forward_primal", False) or getattr(t, "_transform_leaf", False):
        # saves as the plain tensor it stands for
        t = t.detach()                              # (NOTE [Forward-mode primals])
    conj = t.is_conj()
    if conj:                            # its memory (unconjugated) and the bit, as PyTorch
        memory = t._unconjugated()
        memory._requires_grad = t._requires_grad
        t = memory
    elif t.is_neg():                    # a negative view saves its values (PyTorch: the bit)
        values = _make(t._data)
        values._requires_grad = t._requires_grad
        t = values
    state = t.__dict__
    if type(t) is Parameter:
        data = t.detach()
        if state:
            return (N.REBUILD_PARAMETER_WITH_STATE,
                    (data, t.requires_grad, OrderedDict(), dict(state)))
        return (N.REBUILD_PARAMETER, (data, t.requires_grad, OrderedDict()))
    from ember.utils.hooks import warn_if_has_hooks
    warn_if_has_hooks(t)                # (a Parameter's hooks go unmentioned, as in PyTorch)
    if t.is_meta:                       # no storage: its dtype, size and strides only
        func, args = N.REBUILD_META, (t.dtype, tuple(t.shape), t.stride(), t.requires_grad)
    else:
        storage, offset, size, stride = table.locate(t)
        args = (_StorageRef(storage, t.dtype), offset, tuple(size), stride, t.requires_grad,
                OrderedDict())
        if t.dtype in N.STORAGE_GLOBALS:
            func = N.REBUILD_V2
        else:
            func, args = N.REBUILD_V3, args + (t.dtype,)
        if conj:                        # (PyTorch's tensor metadata argument)
            args += ({"conj": True},)
    if type(t) is Tensor and not state:
        return (func, args)
    cls = N.TENSOR if type(t) is Tensor else type(t)
    return (N.REBUILD_FROM_TYPE, (func, cls, args, dict(state)))
