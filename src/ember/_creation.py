"""Making tensors: ``tensor``, ``as_tensor``, ``from_numpy`` and the factory functions."""

import functools
import math
import numbers
import warnings
from collections import OrderedDict

import numpy as np

from ember import _dtype as D
from ember._deterministic import STATE as _DETERMINISM
from ember._device import as_device, chosen_default_device, get_default_device
from ember._host_values import _NO_HOST_DLPACK
from ember._storage_place import born_row_major, numpy_strides
from ember._tensor import Tensor, _make
from ember._transform_state import STATE as _TRANSFORMS
from ember._transform_state import note_made
from ember._warn import warn_once
from ember._creation_layout import check_layout, no_sparse_fill, no_sparse_like, sparse_zeros
from ember._memory_format import (_order_strides, laid_like, lay_out, memory_order,
                                  preserve_format, preserved_strides, row_major)
from ember.backend import array_from_dlpack, cuda_available, cuda_backend, xp_for, xp_of
from ember.backend.meta import MetaArray, meta_like
from ember._sizes import _is_int, _size, _size_args
from ember._from_data import (_check_np_dtype, _check_strides, _from_data, _infer_dtype,
                              _tp_name, cast_array)

__all__ = [
    "tensor", "as_tensor", "asarray", "from_numpy", "from_dlpack", "zeros", "ones", "full",
    "empty", "zeros_like", "ones_like", "full_like", "empty_like", "eye", "empty_strided",
    "empty_permuted", "scalar_tensor", "frombuffer",
]



def _target(device):
    dev = get_default_device() if device is None else as_device(device)
    return xp_for(dev), dev


def _place(array, dev):
    """A host array moved to ``dev`` (itself for cpu; its shape and dtype for meta)."""
    if dev.type == "cpu":
        return array
    if dev.type == "meta":
        return meta_like(array)
    return cuda_backend().to_device(array, dev.index)


def _check_grad_dtype(dtype):
    """PyTorch's factory error for ``requires_grad=True`` with a bool or integer dtype."""
    if dtype.category < D.FLOATING:
        raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                           "gradients")


def check_requires_grad(value, fn, none_ok=True):
    """PyTorch's TypeError for a ``requires_grad`` that is not a bool (``None`` means False,
    except for ``tensor`` and ``new_tensor``)."""
    if value is not False and value is not True and not (none_ok and value is None):
        raise TypeError(f"{fn}(): argument 'requires_grad' must be bool, not {_tp_name(value)}")


def _finish(array, requires_grad):
    t = _make(array)
    if requires_grad:
        _check_grad_dtype(t.dtype)
        t._requires_grad = True
        if _TRANSFORMS.made is not None:     # (NOTE [Leaves made inside a transform])
            note_made(t)
    return t


def _warn_copy_construct(data, call):
    """PyTorch's advice against copy-constructing a tensor from a tensor, at the caller's."""
    if isinstance(data, Tensor):
        warnings.warn("To copy construct from a tensor, it is recommended to use "
                      "sourceTensor.detach().clone() or sourceTensor.detach().clone()"
                      f".requires_grad_(True), rather than {call}(sourceTensor).",
                      UserWarning, stacklevel=3)


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor holding a copy of ``data`` (nested sequences, numbers, arrays)."""
    _warn_copy_construct(data, "ember.tensor")
    check_requires_grad(requires_grad, "tensor", none_ok=False)
    return _tensor(data, dtype, device, requires_grad, pin_memory)


def _tensor(data, dtype, device, requires_grad, pin_memory):
    dtype = _dtype_arg("tensor", dtype)
    arr = _from_data(data, dtype)
    if not arr.size and isinstance(data, np.ndarray):
        arr = numpy_strides(arr, data)
    if device is None and isinstance(data, Tensor):
        device = chosen_default_device() or data.device
    _, dev = _target(device)
    return pinned(_finish(_place(arr, dev), requires_grad), pin_memory)


def as_tensor(data, dtype=None, device=None):
    """``data`` as a tensor, sharing memory when dtype and device already match."""
    return _as_tensor(data, dtype, device, False)


def _as_tensor(data, dtype, device, aliasing):
    """``as_tensor``; for ``asarray`` (``aliasing``), a read-only NumPy array warns only where
    it is aliased, and after the checks (``as_tensor`` warns first, as PyTorch's)."""
    if device is None:
        device = chosen_default_device()
    if isinstance(data, Tensor):
        if dtype is None and (device is None or as_device(device) == data.device):
            return data
        return data.to(device=device, dtype=dtype)
    if isinstance(data, np.ndarray):
        if not aliasing and not data.flags.writeable:
            _warn_read_only(data)       # (before any check, as PyTorch's as_tensor)
        if (device is None or as_device(device).type == "cpu") and (
                type(data) is np.ndarray or not hasattr(data, "__cuda_array_interface__")):
            _check_strides(data)        # (a conversion too: PyTorch's reads the array first)
            _check_np_dtype(data)
            if dtype is None or dtype.np == data.dtype:
                if aliasing and not data.flags.writeable:
                    _warn_read_only(data)
                # (a new header: see from_numpy)
                return _make(numpy_strides(data.view(np.ndarray), data))
            return _make(numpy_strides(cast_array(data.view(np.ndarray), dtype.np), data))
    if hasattr(data, "__cuda_array_interface__"):       # a CuPy (or other GPU) array
        _check_np_dtype(data)
        return as_tensor(_make(cuda_backend().cupy.asarray(data)), dtype, device)
    return tensor(data, dtype=dtype, device=device)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=None):
    """``obj`` as a tensor; shares memory unless ``copy=True`` or a conversion is needed.

    A tensor keeps its autograd history (copies and conversions are differentiable) unless
    ``requires_grad=False`` is given, which detaches it. An object with the buffer protocol
    (``bytearray``, ``array.array``) has its bytes read as elements of ``dtype`` (by default
    the default float dtype), as in PyTorch."""
    check_requires_grad(requires_grad, "asarray")
    if device is None:
        device = chosen_default_device()
    if requires_grad is None and isinstance(obj, Tensor) and obj.requires_grad:
        warn_once("ember.asarray: unspecified requires_grad now defaults to obj.requires_grad "
                  "instead of False. Pass requires_grad=False explicitly to get the old "
                  "behavior and silence this warning.")
    if isinstance(obj, np.generic) and copy is not False:
        obj = np.asarray(obj)           # (read as a 0-dim array, not as tensor() reads it)
    if _is_buffer(obj):
        out = frombuffer(obj, dtype=dtype or D.get_default_dtype())
        out = out.clone() if copy else out
        out = out if device is None else out.to(device)
    elif copy and isinstance(obj, Tensor):
        out = obj.to(device=device, dtype=dtype, copy=True) if (
            dtype is not None and dtype is not obj.dtype
            or device is not None and as_device(device) != obj.device) else obj.clone()
    elif copy:
        out = tensor(obj, dtype=dtype, device=device)
    else:
        if copy is False:
            _check_aliasable(obj, dtype, device)
        out = _as_tensor(obj, dtype, device, True)
    if requires_grad is False and out.requires_grad:
        out = out.detach()
    elif requires_grad:
        _check_grad_dtype(out.dtype)
        out._set_requires_grad(True)
    return out


def _is_buffer(obj):
    """Whether ``asarray`` reads ``obj`` through the buffer protocol: PyTorch's order tries
    tensors, DLPack exporters and NumPy arrays first."""
    if isinstance(obj, (Tensor, np.ndarray, np.generic, list, tuple, numbers.Number)) or \
            hasattr(obj, "__dlpack__"):
        return False
    try:
        memoryview(obj)
    except TypeError:
        return False
    return True


def _check_aliasable(obj, dtype, device):
    """PyTorch's ValueError where ``asarray(obj, copy=False)`` would have to copy."""
    if isinstance(obj, np.ndarray):
        _check_strides(obj)             # (PyTorch's reads the array first)
        have, where = D.FROM_NUMPY.get(obj.dtype), as_device("cpu")
    elif isinstance(obj, np.generic):
        raise RuntimeError("can't alias NumPy scalars. Either remove copy=False or transform "
                           "it in a ndarray. ")     # (PyTorch's spacing)
    elif isinstance(obj, Tensor):
        have, where = obj.dtype, obj.device
    elif isinstance(obj, (list, tuple, numbers.Number)):
        raise ValueError("can't alias arbitrary sequence into a tensor.")
    else:
        return                  # (buffers and DLPack exporters: as_tensor tells)
    if dtype is not None and have is not None and dtype is not have:
        raise ValueError(f"can't alias tensor with dtype '{have._torch_name}' into dtype "
                         f"'{dtype._torch_name}'.")
    if device is not None and as_device(device).type != where.type:
        raise ValueError(f"can't alias tensor from device '{where}' to '{as_device(device)}'.")


def from_numpy(ndarray):
    """A tensor sharing memory with a NumPy array."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {_tp_name(ndarray)})")
    if not ndarray.flags.writeable:
        _warn_read_only(ndarray)                # (before the checks, as PyTorch's)
    _check_strides(ndarray)                     # (before the dtype, as PyTorch's)
    _check_np_dtype(ndarray)
    # a new header on the same memory (a subclass's values): reshaping or restriding the
    # caller's array object afterwards leaves the tensor as it was, as PyTorch's
    return _make(numpy_strides(ndarray.view(np.ndarray), ndarray))


def _warn_read_only(array):
    """PyTorch's warning (once per program) where ``from_numpy``, ``as_tensor``, an aliasing
    ``asarray`` or a legacy constructor is given a read-only NumPy array."""
    if isinstance(array, np.ndarray) and not array.flags.writeable:
        warn_once("The given NumPy array is not writable, and PyTorch does not support "
                  "non-writable tensors. This means writing to this tensor will result in "
                  "undefined behavior. You may want to copy the array to protect its data "
                  "or make it writable before converting it to a tensor. This type of "
                  "warning will be suppressed for the rest of this program.")


def from_dlpack(ext_tensor, *, device=None, copy=None):
    """A tensor sharing memory with ``ext_tensor``: any object with ``__dlpack__`` (a NumPy
    or CuPy array, another framework's tensor) or a DLPack capsule; ``copy=True`` copies it,
    ``device`` moves it."""
    if type(ext_tensor) is Tensor and ext_tensor.dtype in _NO_HOST_DLPACK \
            and type(ext_tensor._data) is np.ndarray and not ext_tensor.requires_grad:
        result = _make(ext_tensor._data)  # (NumPy's DLPack cannot carry these dtypes)
    else:
        array = _array_from_dlpack(ext_tensor)
        _check_np_dtype(array)
        result = _make(array)
    target = as_device(device)
    if target is not None and target != result.device:
        if copy is False:
            raise BufferError(f"from_dlpack(): moving to {target} needs a copy, but "
                              f"copy=False")
        return result.to(target)
    return result.clone() if copy else result


def _array_from_dlpack(producer):
    """The array behind ``producer``; PyTorch's error for anything that is neither a DLPack
    exporter nor an unused capsule."""
    if hasattr(producer, "__dlpack__"):
        return array_from_dlpack(producer)
    try:
        return array_from_dlpack(producer)
    except (TypeError, ValueError, BufferError):
        raise RuntimeError("from_dlpack received an invalid capsule. Note that DLTensor "
                           "capsules can be consumed only once, so you might have already "
                           "constructed a tensor from it once.") from None


_REQUIRED = object()


def frombuffer(buffer, *, dtype=_REQUIRED, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor over the bytes of a Python buffer (``bytearray``, ``array``, ``mmap``),
    sharing its memory; a read-only buffer (``bytes``) is copied, as ember's tensors are
    always writable."""
    if dtype is _REQUIRED:
        raise TypeError('frombuffer() missing 1 required positional arguments: "dtype"')
    check_requires_grad(requires_grad, "frombuffer", none_ok=False)
    try:
        view = memoryview(buffer).cast("B")
    except TypeError:
        raise ValueError("object does not implement Python buffer protocol.") from None
    if view.readonly:
        warn_once("The given buffer is not writable, and PyTorch does not support "
                  "non-writable tensors. This means you can write to the underlying "
                  "(supposedly non-writable) buffer using the tensor. You may want to copy the "
                  "buffer to protect its data or make it writable before converting it to a "
                  "tensor. This type of warning will be suppressed for the rest of this "
                  "program.")
    length, size = view.nbytes, dtype.itemsize
    if length == 0 or count == 0:
        raise ValueError(f"both buffer length ({length}) and count ({count}) must not be 0")
    if not 0 <= offset < length:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than "
                         f"buffer length ({length} bytes) minus 1")
    if count < 0:
        if (length - offset) % size:
            raise ValueError(f"buffer length ({length - offset} bytes) after offset ({offset} "
                             f"bytes) must be a multiple of element size ({size})")
        count = (length - offset) // size
    elif offset + count * size > length:
        raise ValueError(f"requested buffer length ({count} * {size} bytes) after offset "
                         f"({offset} bytes) must not be greater than actual buffer length "
                         f"({length} bytes)")
    array = np.frombuffer(view, dtype=dtype.np, count=count, offset=offset)
    if not array.flags.writeable:
        array = array.copy()
    return _finish(array, requires_grad)


_PYTHON_TYPES = D.PYTHON_DTYPES


def _dtype_arg(fname, dtype):
    """A factory's ``dtype=``: a dtype, None, or a Python number type (``float`` is float64,
    as in PyTorch); anything else (a string, a NumPy type) raises PyTorch's TypeError."""
    if dtype is None or isinstance(dtype, D.dtype):
        return dtype
    found = _PYTHON_TYPES.get(dtype) if dtype.__class__ is type else None
    if found is None:
        raise TypeError(f"{fname}(): argument 'dtype' must be torch.dtype, not "
                        f"{type(dtype).__name__}")
    return found


def _out_dtype(dtype, out, fname=None):
    """A factory's dtype given ``out=``: out's by default; another one raises, as in
    PyTorch. With ``fname``, ``dtype`` is first read as ``_dtype_arg`` reads it."""
    if fname is not None:
        dtype = _dtype_arg(fname, dtype)
    if out is None:
        return dtype
    if dtype is None:
        return out.dtype
    if dtype is not out.dtype:
        raise RuntimeError(f"dtype {dtype._torch_name} does not match dtype of out parameter "
                           f"({out.dtype._torch_name})")
    return dtype


def _out_device(device, out):
    """A factory's device given ``out=``: out's by default."""
    return out.device if device is None and out is not None else device


def _write_out(out, array):
    """``array`` (on out's device) written into ``out`` in place, cast to its dtype; an
    ``out`` of another shape is resized to ``array``'s, as factories' ``out=`` does."""
    if out.shape == array.shape and out.device.type != "meta":
        xp_of(out._data).copyto(out._data, array, casting="unsafe")
    else:
        out._data = array.astype(out._data.dtype, copy=False)
        if not array.size:              # (row-major, as a fresh tensor's)
            out._data = born_row_major(out._data)
    out._bump_version()
    return out


def _alloc(fill, shape, dtype, device, requires_grad, out=None):
    dtype = D.get_default_dtype() if dtype is None else dtype
    xp, dev = _target(_out_device(device, out))
    if dev.type == "meta":
        arr = MetaArray(shape, dtype.np)
    elif xp is np:
        arr = fill(xp, shape, dtype.np)
    else:
        with cuda_backend().device_guard(dev.index):
            arr = fill(xp, shape, dtype.np)
    if out is not None:
        return _write_out(out, arr)
    return _finish(arr, requires_grad)


def zeros(*sizes, size=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
          pin_memory=False):
    """A tensor of zeros."""
    check_requires_grad(requires_grad, "zeros")
    size = _size(_size_args(sizes, size, "zeros"), "zeros" if out is None else None)
    dtype = _out_dtype(_dtype_arg("zeros", dtype), out)
    if check_layout(layout, "zeros"):
        return sparse_zeros(size, layout, dtype, device, requires_grad, "zeros")
    return pinned(_alloc(lambda xp, s, d: xp.zeros(s, d), size, dtype, device,
                         requires_grad, out), pin_memory)


def ones(*sizes, size=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
         pin_memory=False):
    """A tensor of ones."""
    check_requires_grad(requires_grad, "ones")
    size = _size(_size_args(sizes, size, "ones"))
    dtype = _out_dtype(_dtype_arg("ones", dtype), out)
    no_sparse_fill(layout, "ones")
    return pinned(_alloc(lambda xp, s, d: xp.ones(s, d), size, dtype, device,
                         requires_grad, out), pin_memory)


def pinned(t, pin_memory):
    """``t``, moved to page-locked memory when a factory was given ``pin_memory=True``."""
    if not pin_memory:
        return t
    if not cuda_available():
        raise RuntimeError("pin_memory=True requires a CUDA or other accelerator backend; no "
                           "pinned memory allocator is available on this system.")
    leaf = t.detach().pin_memory()
    return leaf._set_requires_grad() if t.requires_grad else leaf


def empty(*sizes, size=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
          pin_memory=False, memory_format=None):
    """An uninitialized tensor (ember fills it with zeros, so results are reproducible; in
    deterministic mode with NaN or the largest integer, as PyTorch does)."""
    check_requires_grad(requires_grad, "empty")
    size = _size(_size_args(sizes, size, "empty"))
    dtype = _out_dtype(_dtype_arg("empty", dtype), out)
    if check_layout(layout, "empty"):
        return sparse_zeros(size, layout, dtype, device, requires_grad, "empty")
    if memory_format is preserve_format:        # there is no tensor to preserve the format of
        raise RuntimeError("unsupported memory format Preserve")
    return pinned(in_format(_alloc(_uninitialized, size, dtype, device, requires_grad,
                                   out), memory_format), pin_memory)


def _uninitialized(xp, shape, dtype):
    if not (_DETERMINISM.enabled and _DETERMINISM.fill_uninitialized_memory):
        return xp.zeros(shape, dtype)
    kind = np.dtype(dtype).kind
    return xp.full(shape, np.nan if kind in "fcV" else True if kind == "b"
                   else np.iinfo(dtype).max, dtype)


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None,
                   requires_grad=False, pin_memory=False):
    """An uninitialized tensor of shape ``size`` whose dims lie in memory in the order
    ``physical_layout`` gives, outermost first (``(0, 2, 3, 1)``: channels last)."""
    check_requires_grad(requires_grad, "empty_permuted")
    shape, order = _size((size,)), tuple(int(d) for d in physical_layout)
    if len(order) != len(shape):
        raise RuntimeError(f"Number of dimensions in size does not match the length of the "
                           f"physical_layout; i.e. len(size) = {len(shape)} is not equal to "
                           f"len(physical_layout) = {len(order)}")
    if sorted(order) != list(range(len(shape))):
        raise RuntimeError("Duplicate dim not allowed")
    physical = empty([shape[d] for d in order], dtype=dtype, device=device,
                     requires_grad=False, pin_memory=pin_memory)
    out = physical.permute(*sorted(range(len(order)), key=order.__getitem__))
    return out._set_requires_grad() if requires_grad else out


def empty_strided(size, stride, *, dtype=None, layout=None, device=None,
                  requires_grad=False, pin_memory=False):
    """An uninitialized tensor of shape ``size`` laid out with strides ``stride`` (in
    elements) over memory just large enough to hold it."""
    from ember.ops._dims import int_sequence
    check_requires_grad(requires_grad, "empty_strided")
    shape = _size((size,))
    strides = int_sequence(stride, ("empty_strided", "stride", 2, "method"), scalar=False)
    if len(strides) != len(shape):
        raise RuntimeError(f"dimensionality of sizes ({len(shape)}) must match dimensionality "
                           f"of strides ({len(strides)})")
    if any(s < 0 for s in strides):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(shape)} and "
                           f"strides={list(strides)}")
    n = 0 if 0 in shape else 1 + sum((d - 1) * s for d, s in zip(shape, strides))
    out = empty(n, dtype=dtype, device=device, pin_memory=pin_memory).as_strided(shape, strides)
    return out._set_requires_grad() if requires_grad else out


def _fill_dtype(value):
    if isinstance(value, Tensor):
        value = value.item()
    elif type(value) is np.bool_:           # PyTorch's parser reads a NumPy bool as a float
        value = float(value)
    if type(value) is int and not -2 ** 63 <= value < 2 ** 64:    # PyTorch's Scalar range
        raise OverflowError("int too big to convert" if value > 0 else
                            "can't convert negative int to unsigned")
    return _infer_dtype(np.asarray(value))


def _number_arg(value, fn, name, position):
    """Check ``value`` as PyTorch's parser checks a Number (a tensor must be 0-dim and not
    require grad)."""
    from ember.ops._scalars import number_arg       # (ember.ops imports this module)
    number_arg(value, fn, name, position)


def _size_sequence(size, fn):
    """PyTorch's error where a factory's one ``size`` argument is not a sequence."""
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"{fn}(): argument 'size' (position 1) must be tuple of ints, not "
                        f"{type(size).__name__}")


def full(size, fill_value, *, out=None, dtype=None, layout=None, device=None,
         requires_grad=False, pin_memory=False):
    """A tensor filled with ``fill_value``; the dtype follows the value's kind."""
    _size_sequence(size, "full")
    check_requires_grad(requires_grad, "full")
    _number_arg(fill_value, "full", "fill_value", 2)
    if isinstance(fill_value, np.complexfloating) and not isinstance(fill_value, complex):
        fill_value = float(fill_value)      # np.complex64 read as PyTorch's parser reads it
    dtype = _out_dtype(_dtype_arg("full", dtype), out)
    no_sparse_fill(layout, "full")
    if dtype is None:
        dtype = _fill_dtype(fill_value)
    # (a NumPy scalar as a Python number: comparing np.float16 with a float32 bound warns)
    value = fill_value.item() if isinstance(fill_value, (Tensor, np.generic)) else fill_value
    from ember.ops._scalars import checked_scalar   # out-of-range values raise, as in PyTorch
    return pinned(_alloc(lambda xp, s, d: xp.full(s, checked_scalar(
                             xp, value, np.dtype(d), single=math.prod(s) == 1), d),
                         _size(_size_args((size,), None, "full")), dtype, device,
                         requires_grad, out), pin_memory)


def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False):
    """A 0-dim tensor holding ``s`` (float dtype by default)."""
    check_requires_grad(requires_grad, "scalar_tensor")
    _number_arg(s, "scalar_tensor", "s", 1)
    return full((), s, dtype=dtype or D.get_default_dtype(), device=device,
                requires_grad=requires_grad)


def in_format(t, memory_format, like=None):
    """``t``, a tensor just made, laid out in ``memory_format`` (by default, or with
    ``preserve_format``, the format of ``like`` when given: the ``*_like`` factories')."""
    if type(t._data) is MetaArray:
        return _meta_in_format(t, memory_format, like)
    if memory_format is None or memory_format is preserve_format:
        if like is not None:
            if not row_major(like._data):           # (the common case: as t was made)
                t._data = laid_like(xp_of(t._data), t._data, like._data)
        return t
    order = memory_order(memory_format, t.ndim)
    if order is not None:
        t._data = lay_out(xp_of(t._data), t._data, order)
    return t


def _meta_in_format(t, memory_format, like):
    """``in_format`` for a meta tensor: its strides alone (it has no memory to lay out)."""
    a = t._data
    if memory_format is None or memory_format is preserve_format:
        strides = None if like is None or row_major(like._data) else \
            preserved_strides(like._data, a.itemsize)
    else:
        order = memory_order(memory_format, t.ndim)
        strides = None if order is None else _order_strides(a.shape, order, a.itemsize)
    if strides is not None and tuple(strides) != a.strides:
        t._data = MetaArray(a.shape, a.dtype, (tuple(strides), 0))
    return t


def check_like_input(input, name):
    """PyTorch's TypeError when a ``*_like`` factory is given something not a Tensor."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{_tp_name(input)}")


def offered_to_overrides(factory):
    """``factory(input, ...)`` (a ``*_like`` factory), first offered to ``input``'s
    ``__torch_function__`` when it is a Tensor subclass or a tensor-like, as PyTorch offers
    its factories: a subclass gets a result of its own type."""
    @functools.wraps(factory)
    def like(input, *args, **kwargs):
        cls = type(input)
        # (ember's own overriding types, batched and dual tensors, dispatch registry ops;
        # sparse tensors also take the factories, which make sparse results)
        if cls is not Tensor and hasattr(cls, "__torch_function__") \
                and (not getattr(cls, "_takes_registry_calls", False)
                     or getattr(cls, "_takes_like_factories", False)):
            from ember.overrides import handle_torch_function, has_torch_function
            if has_torch_function((input,)):
                return handle_torch_function(like, (input,), input, *args, **kwargs)
        return factory(input, *args, **kwargs)
    return like


def _like(input, dtype, device, name):
    """A ``*_like`` factory's dtype and device (``input``'s unless given)."""
    check_like_input(input, name)
    return (input.dtype if dtype is None else _dtype_arg(name, dtype),
            input.device if device is None else device)


@offered_to_overrides
def zeros_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
               memory_format=None, pin_memory=False):
    """Zeros with the shape (and by default dtype and device) of ``input``."""
    if type(input) is Tensor and dtype is None and device is None and layout is None \
            and requires_grad is False and memory_format is None and pin_memory is False:
        a = input._data             # the common call, of a row-major CPU tensor: its steps
        if type(a) is np.ndarray and row_major(a):      # below, inlined
            return _make(np.zeros(a.shape, D.FROM_NUMPY[a.dtype].np))
    dtype, device = _like(input, dtype, device, "zeros_like")
    check_requires_grad(requires_grad, "zeros_like")
    made = zeros(input.shape, dtype=dtype, device=device, requires_grad=requires_grad,
                 layout=layout)
    return pinned(in_format(made, memory_format, input), pin_memory)


@offered_to_overrides
def ones_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None, pin_memory=False):
    """Ones with the shape (and by default dtype and device) of ``input``."""
    dtype, device = _like(input, dtype, device, "ones_like")
    check_requires_grad(requires_grad, "ones_like")
    no_sparse_like(layout, "ones_like")
    made = ones(input.shape, dtype=dtype, device=device, requires_grad=requires_grad)
    return pinned(in_format(made, memory_format, input), pin_memory)


@offered_to_overrides
def empty_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
               memory_format=None, pin_memory=False):
    """An uninitialized tensor shaped like ``input``."""
    dtype, device = _like(input, dtype, device, "empty_like")
    check_requires_grad(requires_grad, "empty_like")
    no_sparse_like(layout, "empty_like")
    made = empty(input.shape, dtype=dtype, device=device, requires_grad=requires_grad)
    return pinned(in_format(made, memory_format, input), pin_memory)


@offered_to_overrides
def full_like(input, fill_value, *, dtype=None, layout=None, device=None,
              requires_grad=False, memory_format=None, pin_memory=False):
    """``fill_value`` everywhere, shaped like ``input``."""
    dtype, device = _like(input, dtype, device, "full_like")
    check_requires_grad(requires_grad, "full_like")
    no_sparse_like(layout, "full_like")
    _number_arg(fill_value, "full_like", "fill_value", 2)
    return pinned(in_format(full(input.shape, fill_value, dtype=dtype, device=device,
                                 requires_grad=requires_grad), memory_format, input),
                  pin_memory)


def eye(n, m=None, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """A 2-D tensor with ones on the diagonal."""
    m = n if m is None else m
    check_requires_grad(requires_grad, "eye")
    for pos, name, v in ((1, "n", n), (2, "m", m)):
        if not _is_int(v):
            raise TypeError(f"eye(): argument '{name}' (position {pos}) must be int, not "
                            f"{type(v).__name__}")
    for name, v in (("n", n), ("m", m)):
        if v < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {v}")
    return _alloc(lambda xp, s, d: xp.eye(s[0], s[1], dtype=d), (n, m),
                  _out_dtype(dtype, out, "eye"), device, requires_grad, out)


# --- Tensor.new_* : factories that default to the tensor's dtype and device -------------------

_NEW_KEYWORDS = frozenset(("size", "layout", "pin_memory"))


def _new_factory(factory, name):
    def method(self, *size, dtype=None, device=None, requires_grad=False, **kwargs):
        check_requires_grad(requires_grad, name)
        for key in kwargs:                  # (the factory's out= & co are not the method's)
            if key not in _NEW_KEYWORDS:
                raise TypeError(f"{name}() got an unexpected keyword argument '{key}'")
        if "size" in kwargs:                # x.new_zeros(size=(2, 3))
            size = _size_args(size, kwargs.pop("size"), name)
        elif not size:
            raise TypeError(f'{name}() missing 1 required positional arguments: "size"')
        else:
            _size_args(size, None, name)
        return factory(*size, dtype=self.dtype if dtype is None else _dtype_arg(name, dtype),
                       device=self.device if device is None else device,
                       requires_grad=requires_grad, **kwargs)
    method.__name__ = name
    method.__doc__ = f"``ember.{factory.__name__}`` with this tensor's dtype and device."
    return method


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False,
              layout=None, pin_memory=False):
    """``ember.full`` with this tensor's dtype and device."""
    _size_sequence(size, "new_full")
    check_requires_grad(requires_grad, "new_full")
    _size_args((size,), None, "new_full")
    _number_arg(fill_value, "new_full", "fill_value", 2)
    return full(size, fill_value, dtype=self.dtype if dtype is None else dtype,
                device=self.device if device is None else device, requires_grad=requires_grad,
                layout=layout, pin_memory=pin_memory)


def _new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
    """``ember.tensor(data)`` with this tensor's dtype and device by default."""
    _warn_copy_construct(data, "tensor.new_tensor")
    check_requires_grad(requires_grad, "new_tensor", none_ok=False)
    return _tensor(data, self.dtype if dtype is None else dtype,
                   self.device if device is None else device, requires_grad, False)


Tensor.new_zeros = _new_factory(zeros, "new_zeros")
Tensor.new_ones = _new_factory(ones, "new_ones")
Tensor.new_empty = _new_factory(empty, "new_empty")
Tensor.new_full = _new_full
Tensor.new_tensor = _new_tensor


# --- Tensor.new_empty_strided and pickling ----------------------------------------------------

def _new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad=False,
                       layout=None, pin_memory=False):
    """``ember.empty_strided`` with this tensor's dtype and device."""
    check_requires_grad(requires_grad, "new_empty_strided")
    return empty_strided(size, stride, dtype=self.dtype if dtype is None else dtype,
                         device=self.device if device is None else device,
                         requires_grad=requires_grad, layout=layout, pin_memory=pin_memory)


Tensor.new_empty_strided = _new_empty_strided


def _rebuild_tensor(cls, array, requires_grad, gpu=None):
    """A pickled tensor made again from its host ``array`` (uploaded to GPU ``gpu``)."""
    if gpu is not None:
        from ember.backend import cuda_backend
        array = cuda_backend().to_device(array, gpu)
    t = _make(array, cls)
    t._requires_grad = requires_grad
    t._meta = {"hooks": OrderedDict()}      # (PyTorch's rebuilt tensors: _backward_hooks)
    return t


_TENSOR_SETSTATE = Tensor.__setstate__


def _rebuild_from_type(func, args, state):
    """``func(*args)`` given the attributes ``state``: a subclass's own ``__setstate__`` sees
    them, Tensor's (legacy states only, as PyTorch's) does not."""
    t = func(*args)
    own = type(t).__setstate__      # (a subclass's entry wraps Tensor's: see overrides)
    if getattr(own, "__wrapped__", own) is _TENSOR_SETSTATE:
        t.__dict__.update(state)
    else:
        t.__setstate__(state)
    return t


def _rebuild_view(cls, root, offset, strides, shape, dtype, requires_grad, copied=False):
    """A tensor over ``root``'s memory (from byte ``offset``, with byte ``strides``): how
    pickle and deepcopy (``copied``) keep tensors that share memory sharing it."""
    memory = root._data.ravel(order="K")      # (a dense root's memory in order: channels_last)
    t = _make(np.ndarray(shape, dtype.np, buffer=memory, offset=offset, strides=strides), cls)
    t._requires_grad = requires_grad
    t._meta = {"storage_root": _Owner(root)}   # (a strong reference: root may be unnamed)
    if not copied:
        t._meta["hooks"] = OrderedDict()        # (as _rebuild_tensor's)
    return t


class _Owner:
    """A strong reference called like a weak one: ``ref()`` is the object."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __call__(self):
        return self.obj
