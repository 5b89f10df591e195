"""What PyTorch's pickled globals resolve to when ember loads a checkpoint: storages, the
tensor rebuild functions (which check every size and stride against the storage), and the
allow-list of globals ``weights_only`` loading accepts."""

import codecs
import contextlib
import contextvars
from collections import Counter, OrderedDict

import numpy as np

from ember import _dtype as D
from ember._device import device
from ember._creation import _Owner
from ember._tensor import Size, Tensor, _make
from ember.serialization import _names as N


class LoadedStorage:
    """The bytes of one storage read from a checkpoint, and where its tensors should go.

    This is the ``storage`` a ``map_location`` callable receives; return it (or
    ``storage.cpu()``) to keep it on the CPU.
    """

    __slots__ = ("bytes", "dtype", "device", "roots")

    def __init__(self, data, dtype, dev):
        self.bytes = data                # flat uint8 StorageArray
        self.dtype = dtype               # None for untyped storages
        self.device = dev
        self.roots = {}                  # dtype -> the CPU tensor over all the bytes

    def nbytes(self):
        return self.bytes.nbytes

    def size(self):
        return self.bytes.nbytes // (1 if self.dtype is None else self.dtype.itemsize)

    def cpu(self):
        return LoadedStorage(self.bytes, self.dtype, device("cpu"))

    def cuda(self, index=None):
        return LoadedStorage(self.bytes, self.dtype, device("cuda", index or 0))

    def typed(self, dtype):
        """This storage as one reference in a checkpoint names it: PyTorch writes each
        reference's own storage type (``UntypedStorage``, then ``ByteStorage``) under one
        key; the same bytes, device and tensor roots."""
        if dtype is self.dtype:
            return self
        out = LoadedStorage(self.bytes, dtype, self.device)
        out.roots = self.roots
        return out

    def __repr__(self):
        return f"LoadedStorage(nbytes={self.nbytes()}, dtype={self.dtype}, device={self.device})"


def _check_ints(name, values, ndim=None):
    if not isinstance(values, (tuple, list)) or (ndim is not None and len(values) != ndim):
        raise RuntimeError(f"invalid tensor {name} in checkpoint: {values!r}")
    for v in values:
        if type(v) is not int or v < 0:
            raise RuntimeError(f"invalid tensor {name} in checkpoint: {values!r}")
    return tuple(values)


def _tensor_from(storage, offset, size, stride, dtype, requires_grad):
    if not isinstance(storage, LoadedStorage):
        raise RuntimeError(f"invalid tensor storage in checkpoint: {type(storage).__name__}")
    if not isinstance(dtype, D.dtype):
        raise RuntimeError(f"invalid tensor dtype in checkpoint: {dtype!r}")
    size = _check_ints("size", size)
    stride = _check_ints("stride", stride, len(size))
    if type(offset) is not int or offset < 0:
        raise RuntimeError(f"invalid tensor storage offset in checkpoint: {offset!r}")
    item = dtype.itemsize
    have = storage.bytes.nbytes // item
    need = 0 if 0 in size else offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))
    if need > have:
        raise RuntimeError(
            f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset "
            f"{offset}, and itemsize {item} requiring a storage size of {need * item} are out "
            f"of bounds for storage of size {have * item}")
    start = offset * item if need or offset * item <= storage.bytes.nbytes else 0
    arr = np.ndarray(size, dtype.np, buffer=storage.bytes, offset=start,
                     strides=tuple(s * item for s in stride))
    t = _make(arr)
    root = _root_of(storage, dtype)
    if root is not None:
        t._meta = {"storage_root": _Owner(root)}
    if not need:                # empty: the saved strides and offset (NumPy keeps neither)
        t._meta = dict(t._meta or (), empty_geometry=(stride, offset))
    if storage.device.type != "cpu":
        t = _on_device(storage, dtype, t, size, stride, offset)
    if requires_grad:
        t.requires_grad = bool(requires_grad)
    return t


# The legacy format stores the bytes after the pickle: while it is unpickled, work that reads
# them (a copy to a device, resolving a conjugate bit) is queued here and run once they are read.
_PENDING = contextvars.ContextVar("ember_load_pending", default=None)


@contextlib.contextmanager
def bytes_read_later():
    """Queue the rebuilds' reads of storage bytes; the caller runs the queue once read."""
    token = _PENDING.set([])
    try:
        yield _PENDING.get()
    finally:
        _PENDING.reset(token)


def run_pending(pending):
    """Fill the tensors queued while the storage bytes were not read yet."""
    from ember.autograd.grad_mode import no_grad
    with no_grad():
        for fill in pending:
            fill()


def _derived(source, make, dev):
    """``make(source)`` (same shape and dtype, on ``dev``): now, or filled in once the bytes
    ``source`` views are read."""
    pending = _PENDING.get()
    if pending is None:
        return make(source)
    from ember._creation import empty
    out = empty(source.shape, dtype=source.dtype, device=dev)
    pending.append(lambda: out.copy_(make(source)))
    return out


def _on_device(storage, dtype, t, size, stride, offset):
    """CPU tensor ``t`` as the same view of one device copy of its storage: the storage is
    moved once, so views loaded onto a GPU keep sharing memory, strides and offsets."""
    item = dtype.itemsize
    if t.numel() == 0 or storage.bytes.nbytes % item:
        return _derived(t, lambda src: src.to(storage.device), storage.device)
    key = (dtype, str(storage.device))
    root = storage.roots.get(key)
    if root is None:
        flat = np.ndarray((storage.bytes.nbytes // item,), dtype.np, buffer=storage.bytes)
        root = storage.roots[key] = _derived(_make(flat), lambda src: src.to(storage.device),
                                             storage.device)
    return root.as_strided(size, stride, offset)


def _root_of(storage, dtype):
    """The tensor over all of CPU ``storage`` as ``dtype`` that the tensors rebuilt over it
    share as their memory root, so that saved views keep their storage offsets and one
    storage, as in PyTorch. None where the bytes do not hold whole elements."""
    root = storage.roots.get(dtype)
    if root is None and storage.device.type == "cpu" \
            and storage.bytes.nbytes % dtype.itemsize == 0:
        count = storage.bytes.nbytes // dtype.itemsize
        root = storage.roots[dtype] = _make(np.ndarray((count,), dtype.np, buffer=storage.bytes))
    return root


def loose_storages_to_ember(obj, _seen=None):
    """``obj`` with each storage saved by itself (``torch.save(t.untyped_storage())``) as the
    ember ``TypedStorage`` PyTorch returns for it; containers are updated in place."""
    if type(obj) is LoadedStorage:
        return _typed_storage(obj)
    if not isinstance(obj, (dict, list, tuple)):
        return obj
    seen = set() if _seen is None else _seen
    if id(obj) in seen:                 # (weights_only=False files may hold cycles)
        return obj
    seen.add(id(obj))
    if isinstance(obj, dict):
        for key, value in obj.items():
            if isinstance(value, _MAY_HOLD_STORAGES):
                new = loose_storages_to_ember(value, seen)
                if new is not value:
                    obj[key] = new
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            if isinstance(value, _MAY_HOLD_STORAGES):
                new = loose_storages_to_ember(value, seen)
                if new is not value:
                    obj[i] = new
    elif type(obj) is tuple:
        new = tuple(loose_storages_to_ember(v, seen) for v in obj)
        if any(a is not b for a, b in zip(new, obj)):
            return new
    return obj


_MAY_HOLD_STORAGES = (LoadedStorage, dict, list, tuple)


def _typed_storage(loaded):
    from ember._storage import TypedStorage
    dtype = loaded.dtype or D.uint8        # an untyped storage loads as uint8 elements
    if loaded.device.type == "cpu":
        return TypedStorage._of(_root_of(loaded, dtype))
    key = (dtype, str(loaded.device))      # the device root the tensors' views share
    root = loaded.roots.get(key)
    if root is None:
        flat = np.ndarray((loaded.bytes.nbytes // dtype.itemsize,), dtype.np,
                          buffer=loaded.bytes)
        root = loaded.roots[key] = _derived(_make(flat), lambda src: src.to(loaded.device),
                                            loaded.device)
    return TypedStorage._of(root)


def rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                      backward_hooks=None, metadata=None):
    """A tensor over a typed storage (``torch._utils._rebuild_tensor_v2``)."""
    dtype = getattr(storage, "dtype", None)
    if dtype is None:
        raise RuntimeError("invalid checkpoint: an untyped storage without a tensor dtype")
    t = _tensor_from(storage, storage_offset, size, stride, dtype, False)
    return _with_metadata(t, metadata, requires_grad)


def rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks,
                      dtype, metadata=None):
    """A tensor over an untyped storage with its dtype (``torch._utils._rebuild_tensor_v3``)."""
    t = _tensor_from(storage, storage_offset, size, stride, dtype, False)
    return _with_metadata(t, metadata, requires_grad)


def _with_metadata(t, metadata, requires_grad):
    """``t`` with PyTorch's saved conjugate and negative bits applied (a conjugate view of its
    memory; ember has no negative bit: a negated copy), then marked as requiring grad if saved
    so."""
    if isinstance(metadata, dict):
        if metadata.get("conj") and t.is_complex():
            t = t.conj()                # (lazy: reads no bytes, so the legacy format may too)
            from ember._conj_view import written_elsewhere
            written_elsewhere(t)        # (its aliases in the file have their own versions)
        elif metadata.get("conj"):
            t = _derived(t, Tensor.conj_physical, t.device)
        if metadata.get("neg") and not metadata.get("conj") and t.is_floating_point():
            from ember.ops.conversion import _neg_view
            t = _neg_view(t)            # a view with the negative bit (lazy, as conj above)
            from ember._conj_view import written_elsewhere
            written_elsewhere(t)
        elif metadata.get("neg"):
            t = _derived(t, Tensor.neg, t.device)
    if requires_grad:
        t.requires_grad = bool(requires_grad)
    t._backward_hooks = OrderedDict()   # (what PyTorch's rebuilt tensors hold)
    return t


def rebuild_meta_tensor_no_storage(dtype, size, stride, requires_grad=False):
    """A meta tensor (``torch._utils._rebuild_meta_tensor_no_storage``): no bytes were saved."""
    if not isinstance(dtype, D.dtype):
        raise RuntimeError(f"invalid tensor dtype in checkpoint: {dtype!r}")
    size = _check_ints("size", size)
    _check_ints("stride", stride, len(size))
    from ember._creation import empty
    return empty(size, dtype=dtype, device="meta", requires_grad=bool(requires_grad))


def get_layout(name):
    """A layout from its name (``torch.serialization._get_layout``)."""
    import ember
    if type(name) is not str or not name.startswith("torch."):
        raise RuntimeError(f"invalid layout in checkpoint: {name!r}")
    found = getattr(ember, name[len("torch."):], None)
    if not isinstance(found, ember.layout):
        raise RuntimeError(f"invalid layout in checkpoint: {name!r}")
    return found


def rebuild_sparse_tensor(layout, data):
    """A sparse tensor from its component tensors (``torch._utils._rebuild_sparse_tensor``)."""
    import ember
    if layout is ember.sparse_coo and isinstance(data, tuple) and len(data) in (3, 4):
        indices, values, size = data[:3]
        coalesced = data[3] if len(data) == 4 else None

        def build(check):
            return ember.sparse_coo_tensor(indices, values, size, is_coalesced=coalesced,
                                           check_invariants=check)
        return _checked_later(build)
    compressed = (ember.sparse_csr, ember.sparse_csc, ember.sparse_bsr, ember.sparse_bsc)
    if layout in compressed and isinstance(data, tuple) and len(data) == 4:
        return _checked_later(lambda check: ember.sparse_compressed_tensor(
            *data, layout=layout, check_invariants=check))
    raise RuntimeError(f"ember.load: the checkpoint holds a sparse tensor of layout {layout}, "
                       f"which ember cannot rebuild")


def _checked_later(build):
    """``build(check_invariants)``: checked now, or (as PyTorch validates a checkpoint's
    sparse tensors) once the legacy format's storage bytes are read."""
    pending = _PENDING.get()
    if pending is None:
        return build(True)
    pending.append(lambda: build(True))
    return build(False)


def _set_state(obj, state):
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
        state = {**(state or {}), **(slots or {})}
    if not isinstance(state, dict):
        raise RuntimeError(f"invalid state for {type(obj).__name__} in checkpoint")
    cls = type(obj)
    for key, value in state.items():
        # state can add attributes, never replace Tensor's own (methods, _data, ...)
        if type(key) is str and not hasattr(cls, key):
            obj.__dict__[key] = value


def rebuild_parameter(data, requires_grad, backward_hooks=None):
    """A Parameter around a loaded tensor (``torch._utils._rebuild_parameter``)."""
    from ember.nn.parameter import Parameter
    if not isinstance(data, Tensor):
        raise RuntimeError(f"invalid Parameter data in checkpoint: {type(data).__name__}")
    p = Parameter(data, bool(requires_grad))
    p._backward_hooks = OrderedDict()   # (what PyTorch's rebuilt parameters hold)
    return p


def rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    """A Parameter with attributes (``torch._utils._rebuild_parameter_with_state``)."""
    p = rebuild_parameter(data, requires_grad)
    if state:
        _set_state(p, state)
    return p


def rebuild_from_type_v2(func, new_type, args, state):
    """A tensor subclass or a tensor with attributes (``torch._tensor._rebuild_from_type_v2``)."""
    if func is rebuild_njt and isinstance(args, tuple) and new_type is _jagged_class():
        return func(*args)          # (the state repeats the constructor's arguments)
    if func not in (rebuild_tensor_v2, rebuild_tensor_v3, rebuild_meta_tensor_no_storage) \
            or not isinstance(args, tuple):
        raise RuntimeError(f"invalid tensor rebuild function in checkpoint: {func!r}")
    t = func(*args)
    if not (isinstance(new_type, type) and issubclass(new_type, Tensor)):
        raise RuntimeError(f"invalid tensor type in checkpoint: {new_type!r}")
    if new_type is not Tensor:
        t = t.as_subclass(new_type)
    if state:
        _set_state(t, state)
    return t


def _encode(obj, encoding="latin1"):
    # protocol-2 pickles store bytes as _codecs.encode(str, "latin1")
    if type(obj) is not str or encoding not in ("latin1", "latin-1"):
        raise RuntimeError("invalid bytes in checkpoint")
    return codecs.encode(obj, "latin1")


class DimRange:
    """Stands in for ``torch._dynamo.decorators._DimRange`` (a dim's dynamic-shape bounds),
    which PyTorch pickles with a jagged tensor's cached sequence lengths; ember keeps it as
    read and uses none of it."""

    __slots__ = ("dim", "min", "max")

    def __setstate__(self, state):
        values = state if isinstance(state, (list, tuple)) else ()
        for name, value in zip(self.__slots__, values):
            setattr(self, name, value)


def _jagged_class():
    from ember.nested._jagged import JaggedTensor
    return JaggedTensor


def rebuild_njt(kwargs):
    """A jagged tensor from PyTorch's pickled constructor arguments
    (``torch.nested._internal.nested_tensor._rebuild_njt``)."""
    from ember.nested._jagged import rebuild_jagged
    if not isinstance(kwargs, dict) or not isinstance(kwargs.get("values"), Tensor):
        raise RuntimeError("invalid nested tensor in checkpoint")
    ragged_idx = int(kwargs.get("_ragged_idx", 1))
    cache = kwargs.get("_metadata_cache") or {}
    min_len, max_len = (cache[k].shape[0] if k in cache else None
                        for k in ("min_seqlen", "max_seqlen"))
    return rebuild_jagged(kwargs["values"].movedim(ragged_idx - 1, 0), kwargs["offsets"],
                          kwargs.get("lengths"), ragged_idx, min_len, max_len,
                          bool(kwargs.get("requires_grad", False)))


def _parameter_class():
    from ember.nn.parameter import Parameter
    return Parameter


def _torch_globals():
    """PyTorch's global names (as "module.name") -> ember's objects, for every checkpoint."""
    out = {
        "torch._utils._rebuild_tensor_v2": rebuild_tensor_v2,
        "torch._utils._rebuild_tensor_v3": rebuild_tensor_v3,
        "torch._utils._rebuild_meta_tensor_no_storage": rebuild_meta_tensor_no_storage,
        "torch._utils._rebuild_sparse_tensor": rebuild_sparse_tensor,
        "torch.serialization._get_layout": get_layout,
        "torch._utils._rebuild_parameter": rebuild_parameter,
        "torch._utils._rebuild_parameter_with_state": rebuild_parameter_with_state,
        "torch._tensor._rebuild_from_type_v2": rebuild_from_type_v2,
        "torch.nested._internal.nested_tensor._rebuild_njt": rebuild_njt,
        "torch._dynamo.decorators._DimRange": DimRange,
        "torch.nested._internal.nested_tensor.NestedTensor": _jagged_class(),
        "torch.Size": Size,
        "torch.device": device,
        "torch.Tensor": Tensor,
        "torch.nn.parameter.Parameter": _parameter_class(),
        "torch.storage.UntypedStorage": N.UNTYPED,
    }
    out.update((f"torch.{name}", st) for name, st in N.STORAGE_TYPES.items())
    out.update((f"torch.{dt.name}", dt) for dt in D.ALL_DTYPES)
    return out


def allowed_globals():
    """The globals ``ember.load(weights_only=True)`` accepts without add_safe_globals."""
    out = _torch_globals()
    out.update({
        "collections.OrderedDict": OrderedDict,
        "collections.Counter": Counter,
        "_codecs.encode": _encode,
        "builtins.bytearray": bytearray,
        "builtins.set": set,            # (not frozenset: PyTorch's loader refuses it)
        "builtins.complex": complex,
    })
    return out


def unsupported(module, name):
    """A clear error for PyTorch globals ember has no counterpart for, else None."""
    if module == "torch" and name in N.UNSUPPORTED_DTYPES:
        return RuntimeError(f"ember.load: the checkpoint holds a tensor of dtype torch.{name}, "
                            f"which ember does not support")
    if module == "torch" and name in N.UNSUPPORTED_STORAGES:
        return RuntimeError(f"ember.load: the checkpoint holds a quantized storage "
                            f"(torch.{name}), which ember does not support")
    if module == "torch._utils" and name.startswith("_rebuild_"):
        return RuntimeError(f"ember.load: the checkpoint holds a kind of tensor ember cannot "
                            f"rebuild (torch._utils.{name}: quantized or nested)")
    return None
