"""Copies and conversions: to, clone, contiguous, copy_, fill_, zero_, resize_, conj, real, imag."""

import math
import warnings

import numpy as np

from ember import _dtype as D
from ember._conj_view import set_memory
from ember._device import as_device
from ember._inference import MADE as _INFERENCE_MADE, check_inplace
from ember._legacy_types import legacy_type
from ember._memory_format import (contiguous_format, laid_like, laid_out, lay_out, memory_order,
                                  preserve_format, preserved, suggested_order)
from ember._tensor import Tensor, _make
from ember._transform_births import STATE as _BIRTHS, refuse_captured
from ember._warn import outside_level, warn_once
from ember.backend import (cuda_backend, cuda_initialized, device_of, loud_fp, quiet_fp,
                           xp_of)
from ember.backend.meta import MetaArray, meta_like
from ember.ops._elementwise import zeros_for
from ember.ops._overlap import check_memory_partial_overlap
from ember.ops.complex_ops import view_as_real
from ember.ops._arg_aliases import MISSING, UNSET
from ember.ops._registry import (broadcast_message, call, method_varargs, op,
                                 rename_node)
from ember.ops._scalars import checked_scalar


_E4M3 = np.dtype(D.float8_e4m3fn.np)
_E4M3_MAX = float(D.finfo(D.float8_e4m3fn).max)
_F16, _F32, _F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
_U8, _I64 = np.dtype(np.uint8), np.dtype(np.int64)


def cast(xp, x, np_dtype):
    """A copy of ``x`` as ``np_dtype``, rounded as PyTorch rounds: float8_e4m3fn has no
    infinity, so values beyond its range (infinities included) saturate to +-448 where NumPy
    gives NaN; float64 reaches float16 through float32 (a rare double rounding). Values out
    of range become inf without NumPy's overflow warning, as in PyTorch. Out-of-range floats
    cast to integers as PyTorch's CPU kernels do: 8/16-bit floats through float32 (ml_dtypes
    would give 0), and to uint8 through int64 (-1.5 -> 255, 5e9 + 7 -> 7)."""
    token = quiet_fp()
    try:
        if np_dtype.kind in "iub" and x.dtype.kind in "fV":
            if x.dtype.itemsize <= 2:
                x = x.astype(_F32)
            if np_dtype == _U8:
                x = x.astype(_I64)
        if np_dtype == _E4M3 and x.dtype != _E4M3:
            x = xp.clip(x.astype(_F32 if x.dtype.kind in "fV" else _F64), -_E4M3_MAX,
                        _E4M3_MAX)
            x = xp.asarray(x)           # (NumPy's clip of a 0-dim array gives a scalar)
        elif np_dtype == _F16 and x.dtype == _F64:
            x = x.astype(_F32)
        return preserved(xp, x, np_dtype)         # laid out as clone's preserve_format
    finally:
        loud_fp(token)


@op("_to_copy(input, dtype, device, non_blocking=False)", grad_fn_name="ToCopyBackward0",
    method=False, saves_inputs=False)
def _to_copy(xp, x, dtype, device, non_blocking):
    """A copy of ``input`` with the given dtype (and device)."""
    if dtype is not None and x.dtype.kind == "c" and dtype.category not in (D.COMPLEX, D.BOOL):
        if x.size:                      # (PyTorch's copy kernel, which warns, skips empties)
            warn_once("Casting complex values to real discards the imaginary part")
        # the real parts, laid out as the complex values are (x.real itself strides by two)
        x = x.real if isinstance(x, MetaArray) else laid_like(xp, x.real, x, copy=True)
    target = x.dtype if dtype is None else np.dtype(dtype.np)
    if device is None or not _moves(device_of(x), device):
        return cast(xp, x, target)
    if device.type == "meta":               # (from meta, ops/_meta.py refuses)
        return meta_like(x, target)
    cuda = cuda_backend()
    if device.type == "cpu":                # cast on the GPU, then download
        return cuda.to_host(x if x.dtype == target else cast(xp, x, target), non_blocking)
    x = cuda.to_device(x, device.index, non_blocking)
    return x if x.dtype == target else cast(cuda.cupy, x, target)


@_to_copy.derivative
def _(grad, x, dtype, device, non_blocking):
    return grad if device is None or grad.device == x.device else grad.to(x.device)


def _moves(src, dst):
    """Whether a tensor on ``src`` must be copied to reach ``dst`` ("cuda" means the current
    GPU, which a CUDA tensor is on already)."""
    return src.type != dst.type or (dst.type != "cpu" and dst.index is not None and
                                    src.index != dst.index)


def _python_type(dtype):
    """A dtype for ``float``, ``int``, ``bool`` and ``complex`` (as PyTorch reads them),
    None for None, or _BAD."""
    if dtype is None or isinstance(dtype, D.dtype):
        return dtype
    return D.PYTHON_DTYPES.get(dtype, _BAD) if dtype.__class__ is type else _BAD


_BAD = object()
_TO_KEYWORDS = frozenset(("dtype", "device", "copy", "non_blocking", "memory_format", "tensor"))


_TAKEN_BY_TENSOR = frozenset(("tensor", "dtype", "device"))
_TAKEN_BY_DEVICE = (frozenset(("tensor", "device")), frozenset(("tensor", "device", "dtype")))


def _parse_to(args, kwargs):
    """Decode the forms of ``Tensor.to`` into (dtype, device, copy)."""
    return _parse_to_all(args, kwargs)[:3]


def _parse_to_all(args, kwargs):
    """Decode the forms of ``Tensor.to``: (dtype), (device[, dtype]), (tensor), keywords;
    returns (dtype, device, copy, non_blocking, memory format). Arguments no form takes
    raise PyTorch's "invalid combination" TypeError."""
    given, dtype, device, copy, non_blocking, layout = args, None, None, False, False, None
    if kwargs:
        if not kwargs.keys() <= _TO_KEYWORDS:
            raise _to_error(given, kwargs)
        dtype = _python_type(kwargs.get("dtype"))
        device = kwargs.get("device")
        copy = kwargs.get("copy", False)
        non_blocking = kwargs.get("non_blocking", False)
        layout = kwargs.get("memory_format")
        if "tensor" in kwargs:                      # to(tensor=other)
            args = (kwargs["tensor"], *args)
    args = list(args)
    taken = 0       # the arguments given by position: none of them again by keyword
    if args and isinstance(args[0], Tensor):
        other = args.pop(0)
        dtype, device = other.dtype, other.device
        taken = _TAKEN_BY_TENSOR
    elif args and isinstance(args[0], (D.dtype, type)):
        dtype = _python_type(args.pop(0))
        taken = _TAKEN_BY_TENSOR        # (the dtype form has no device)
    elif args and (args[0] is None or isinstance(args[0], (str, int)) or
                   hasattr(args[0], "type")):
        device = args.pop(0)
        taken = _TAKEN_BY_DEVICE[0]
        if args and (args[0] is None or isinstance(args[0], (D.dtype, type))):
            dtype = _python_type(args.pop(0))
            taken = _TAKEN_BY_DEVICE[1]
    if args and isinstance(args[0], bool):          # to(dtype, non_blocking, copy)
        non_blocking = args.pop(0)
        taken = taken | {"non_blocking"} if taken else {"non_blocking"}
        if args and isinstance(args[0], bool):
            copy = args.pop(0)
            taken = taken | {"copy"}
    if taken and kwargs and not taken.isdisjoint(kwargs.keys() - {"tensor"}):
        raise _to_error(given, kwargs)
    if args or dtype is _BAD or not (copy is False or copy is True) \
            or not (non_blocking is False or non_blocking is True):
        raise _to_error(given, kwargs)
    return dtype, as_device(device), copy, non_blocking, layout


def _to_error(args, kwargs):
    from ember.ops._overload_table import METHOD_OVERLOADS
    from ember.ops._overloads import combination_error
    return combination_error("to", args, kwargs, METHOD_OVERLOADS["to"])


def to(self, *args, **kwargs):
    """This tensor with another dtype, device and/or memory format (self when nothing
    changes)."""
    dtype, device, copy, non_blocking, layout = _parse_to_all(args, kwargs)
    same_dtype = dtype is None or dtype is self.dtype
    same_device = device is None or not _moves(self.device, device)
    if same_dtype and same_device and not copy:
        out = self
    else:
        if not same_device and "cuda" in (device.type, self.device.type):
            cuda_backend()                  # "not compiled with CUDA" without a GPU
        out = call(_to_copy, (self,), (None if same_dtype else dtype,
                                       None if same_device else device, bool(non_blocking)))
    if layout is None or layout is preserve_format:
        return out
    order = memory_order(layout, out.ndim)
    if order is None and out is not self:
        return contiguous(out, memory_format=layout)
    # as PyTorch: kept when its strides already suggest the format (any strides but
    # channels-last ones suggest contiguous_format), else a fresh copy in it
    return out if suggested_order(out._data) == order else clone(out, memory_format=layout)


def _converter(dtype, name):
    def convert(self, *args, memory_format=preserve_format):
        if args:
            raise TypeError(f"{name}() takes 0 positional arguments but {len(args)} "
                            f"{'was' if len(args) == 1 else 'were'} given")
        return self.to(dtype, memory_format=memory_format)
    convert.__name__ = name
    convert.__doc__ = f"This tensor as {dtype}."
    return convert


for _name, _dt in (("float", D.float32), ("double", D.float64), ("half", D.float16),
                   ("bfloat16", D.bfloat16), ("long", D.int64), ("int", D.int32),
                   ("short", D.int16), ("char", D.int8), ("byte", D.uint8),
                   ("bool", D.bool_), ("cfloat", D.complex64), ("cdouble", D.complex128)):
    setattr(Tensor, _name, _converter(_dt, _name))


def type_(self, dtype=None, non_blocking=False, **kwargs):
    """The legacy type name (no argument), or this tensor cast to ``dtype``: a dtype, or a
    legacy type (``ember.cuda.FloatTensor``, ``"torch.DoubleTensor"``), which names a device
    type too."""
    for key in kwargs:      # (PyTorch's parser: memory_format, and the deprecated async)
        if key not in ("memory_format", "async"):
            raise TypeError(f"type() got an unexpected keyword argument '{key}'")
    if non_blocking is not False and non_blocking is not True:
        raise TypeError(f"type(): argument 'non_blocking' (position 2) must be bool, not "
                        f"{type(non_blocking).__name__}")
    if dtype is None:
        kind = self.device.type         # (a meta tensor's is "ember.meta.FloatTensor")
        return f"ember.{kind + '.' if kind in ('cuda', 'meta') else ''}{self.dtype._legacy}"
    legacy = legacy_type(dtype)
    if legacy is None:
        return self.to(_checked_type_dtype(dtype), non_blocking=non_blocking)
    dtype, on_cuda = legacy
    if self.device.type == ("cuda" if on_cuda else "cpu"):     # (meta: to the CPU, refused)
        return self.to(dtype, non_blocking=non_blocking)
    return self.to("cuda" if on_cuda else "cpu", dtype, non_blocking=non_blocking)


def _checked_type_dtype(dtype):
    """``dtype`` if it is an ember dtype; else type()'s errors: ValueError for another class
    (``float``), TypeError for anything else."""
    if isinstance(dtype, D.dtype):
        return dtype
    if isinstance(dtype, type):
        module = dtype.__module__
        name = dtype.__qualname__ if module == "builtins" else f"{module}.{dtype.__qualname__}"
        raise ValueError(f"invalid type: '{name}'")
    raise TypeError("dtype must be a type, str, or dtype object")


def cpu(self, memory_format=preserve_format):
    """This tensor in host memory."""
    return self.to("cpu", memory_format=memory_format)


def cuda(self, device=None, non_blocking=False, memory_format=preserve_format):
    """This tensor on a CUDA device."""
    return self.to("cuda" if device is None else device, non_blocking=non_blocking,
                   memory_format=memory_format)


def pin_memory(self, device=None):
    """A copy of this CPU tensor in page-locked memory, which uploads to the GPU faster and
    asynchronously (self if it is pinned already)."""
    if self.device.type != "cpu":
        raise RuntimeError(f"cannot pin '{self.type()}' only dense CPU tensors can be pinned")
    if is_pinned(self):
        return self
    pinned = cuda_backend().pin(self._data)
    if not self.requires_grad:
        return _make(pinned)
    out = clone(self)               # attached to the graph; its values move to pinned memory
    out._data = pinned
    return out


def is_pinned(self, device=None):
    """Whether this tensor lives in page-locked host memory."""
    if device is not None:
        warnings.warn("The argument 'device' of Tensor.is_pinned() is deprecated. Please do "
                      "not pass this argument.", DeprecationWarning, stacklevel=outside_level())
    return type(self._data) is np.ndarray and cuda_initialized() and \
        cuda_backend().is_pinned(self._data)


def record_stream(self, stream):
    """Mark this GPU tensor as used by ``stream`` (an ``ember.cuda.Stream``): once it is
    freed, its memory is not reused until the work queued on ``stream`` by then has finished
    (NOTE [Recorded streams] in backend/cuda.py)."""
    if self.device.type != "cuda":
        raise RuntimeError(f"record_stream() expects a CUDA tensor, but got one on "
                           f"{self.device}")
    backend = cuda_backend()
    backend.release_finished()
    backend.keep_for_streams(self, self._data, (stream._stream,))


Tensor.to = to
Tensor.type = type_
Tensor.cpu = cpu
Tensor.cuda = cuda
Tensor.pin_memory = pin_memory
Tensor.is_pinned = is_pinned
Tensor.record_stream = record_stream


@op("_alias(input)", view=True, method=False, saves_inputs=False,
    grad_fn_name="AliasBackward0")
def _alias(xp, x):
    """A view of the whole of ``input`` (what ``as_subclass`` returns)."""
    return x.view()


@_alias.derivative
def _(grad, x):
    return grad


@op("clone(input, *, memory_format=None)", saves_inputs=False)
def clone(xp, x, memory_format):
    """A copy of ``input`` that is still connected to the graph, in ``memory_format`` (by
    default the input's own layout: a transposed or channels-last input keeps its strides)."""
    if memory_format is None or memory_format is preserve_format:
        return preserved(xp, x)
    order = memory_order(memory_format, x.ndim)
    return x.copy() if order is None else lay_out(xp, x, order)


@clone.derivative
def _(grad, x, memory_format):
    return grad


def contiguous(self, *, memory_format=contiguous_format):
    """Self if laid out in ``memory_format`` (row-major by default), else a copy that is."""
    order = memory_order(memory_format, self.ndim)
    if order is None:
        if self.is_contiguous():
            return self
        if memory_format is preserve_format:
            raise RuntimeError("preserve memory format is unsupported by the contiguous "
                               "operator")
        return clone(self, memory_format=contiguous_format)
    return self if laid_out(self._data, order) else clone(self, memory_format=memory_format)


Tensor.contiguous = contiguous


@op("copy_(input, src, non_blocking=False)", inputs=2, method=False, scalars=False,
    saves_inputs=False, grad_fn_name="CopyBackwards")
def _copy(xp, dst, src, non_blocking):
    """``src`` broadcast to ``input``'s shape (the out-of-place form of ``copy_``)."""
    if np.dtype(src.dtype).kind == "c" and np.dtype(dst.dtype).kind not in "cb":
        if dst.size:                    # (PyTorch's copy kernel, which warns, skips empties)
            warn_once("Casting complex values to real discards the imaginary part")
        src = src.real
    try:
        return cast(xp, xp.broadcast_to(src, dst.shape), dst.dtype)
    except ValueError:
        pass
    try:
        joint = np.broadcast_shapes(dst.shape, src.shape)
    except ValueError:
        raise RuntimeError(broadcast_message([dst.shape, src.shape])) from None
    raise RuntimeError(f"output with shape {list(dst.shape)} doesn't match the broadcast shape "
                       f"{list(joint)}")


@_copy.inplace_variant
def _(xp, dst, x, src, non_blocking):
    # same dtype: straight in (NumPy's copyto buffers overlapping memory); else ``cast``'s rules
    xp.copyto(dst, src if src.dtype == dst.dtype else _copy.forward(xp, dst, src, non_blocking))


@_copy.derivative
def _(grad, dst, src, non_blocking):
    return zeros_for(grad), grad


def _device_unoffered(t):
    """``t.device``, read off a NumPy array without offering the read to a subclass's
    ``__torch_function__`` (PyTorch offers ``copy_`` alone)."""
    return _CPU if type(t._data) is np.ndarray else t.device


_CPU = as_device("cpu")


def copy_(self, src, non_blocking=False):
    """Copy ``src`` (broadcast, cast) into this tensor; returns self."""
    if non_blocking is not False and non_blocking is not True:
        from ember.ops._overloads import refuse_bool
        refuse_bool("non_blocking", non_blocking)
    if isinstance(src, (bool, int, float, complex)):
        return fill_(self, src)
    if not isinstance(src, Tensor):
        kind = type(src)
        name = kind.__name__ if kind.__module__ == "builtins" else \
            f"{kind.__module__}.{kind.__qualname__}"
        raise TypeError(f"copy_(): argument 'other' (position 1) must be Tensor, not {name}")
    if _device_unoffered(src) != _device_unoffered(self):     # (load_state_dict onto a GPU)
        src = src.to(self.device, non_blocking=non_blocking)
    from ember.ops._inplace import call_inplace
    return call_inplace(_copy, (self, src), (non_blocking,))


Tensor.copy_ = copy_
# PyTorch's copy kernel reads conjugate and negative views as they lie: their memory overlaps
_copy.overlap_check = check_memory_partial_overlap


def _filled(xp, x, value):
    return xp.full(x.shape, _fill_value(xp, x, value), dtype=x.dtype)


def _fill_value(xp, x, value):
    """``value`` (a number or 0-dim array) checked, as fill writes it into ``x``."""
    if getattr(value, "ndim", 0) != 0:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                           f"{value.ndim} dimensions.")
    if not hasattr(value, "dtype"):
        value = checked_scalar(xp, value, x.dtype, single=x.size == 1)
    elif value.dtype.kind == "c" and x.dtype.kind not in "cb":
        # a tensor's value is cast as copy_ casts, unchecked (a number's is checked above)
        if x.size:
            warn_once("Casting complex values to real discards the imaginary part")
        value = value.real
    if value.dtype != x.dtype:
        value = cast(xp, value, x.dtype)    # PyTorch's rounding (ml_dtypes' differs)
    return value


@op("fill(input, value)", inputs=2, method=False, saves_inputs=False, scalars=True)
def fill(xp, x, value):
    """A tensor of ``input``'s shape and dtype filled with ``value`` (a number or 0-dim
    tensor)."""
    return _filled(xp, x, value)


@op("fill_(input, value)", inputs=2, method=False, saves_inputs=False, scalars=True)
def _fill(xp, x, value):
    """``value`` broadcast to ``input``'s shape and dtype (what ``fill_`` writes)."""
    return _filled(xp, x, value)


def _name_by_value(fill_op, by_number, by_tensor):
    """PyTorch names fill's nodes by whether the value is a number or a tensor."""
    fill_op.named_by(lambda flat, params, out:
                     by_tensor if isinstance(flat[1], Tensor) else by_number)


@_fill.inplace_variant
def _(xp, dst, x, value):
    value = _fill_value(xp, x, value)
    # cast as full casts; a value read off ``dst``'s own memory (``x.fill_(x[0])``) first
    xp.copyto(dst, value.copy() if getattr(value, "base", None) is not None else value,
              casting="unsafe")


# PyTorch reads fill_'s value (a 0-dim tensor) as a number first: no overlap with it to refuse
_fill.overlap_check = lambda dst, inputs: None
_name_by_value(fill, "FillBackward0", "FillBackward1")
_name_by_value(_fill, "FillBackward2", "FillBackward3")       # the in-place nodes
fill.number_overload("value")
_fill.number_overload("value")


def _fill_grad(grad, x, value):
    return zeros_for(grad), (grad.sum() if hasattr(value, "shape") else None)


fill.derivative(_fill_grad)
_fill.derivative(_fill_grad)


def fill_(self, value):
    """Fill with ``value`` (a number or 0-dim tensor); returns self."""
    from ember.ops._inplace import call_inplace
    return call_inplace(_fill, (self, value), ())


def zero_(self):
    """Fill with zeros; returns self."""
    if type(self).zero_ is not zero_:       # ember.zero_(t) of a subclass with its own (sparse)
        return type(self).zero_(self)
    if _BIRTHS.levels:      # (named as PyTorch's, not fill_'s: NOTE [Captured tensors])
        refuse_captured(self, "aten::zero_")
    from ember.autograd.grad_mode import STATE
    recorded = STATE.grad_enabled and self.requires_grad
    fill_(self, 0)
    # (under no_grad, or on a view, the node is not fill_'s: it keeps its name)
    if recorded and type(self._grad_fn).__name__ == "FillBackward2":
        rename_node(self, "ZeroBackward0")
    return self


Tensor.fill_ = fill_
Tensor.zero_ = zero_


def resize_(self, *sizes, size=UNSET, memory_format=None):
    """Give this tensor the shape ``sizes`` (or ``size=``) in place, as PyTorch does: a
    tensor of that shape already is left alone; otherwise it becomes contiguous over its
    memory from its storage offset on, which keeps sharing that memory while it is large
    enough, and else grows into new memory (its new elements as ember's ``empty`` fills them)."""
    shape = resize_shape(sizes, size)
    if _BIRTHS.levels:      # NOTE [Captured tensors]
        refuse_captured(self, "aten::resize_")
    if self.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    if getattr(self, "_forward_primal", False):     # NOTE [Forward-mode primals]
        raise RuntimeError("cannot resize variables that has a forward grad")
    if shape == self._data.shape and memory_format is None:
        return self
    if _INFERENCE_MADE[0] and shape != self._data.shape:    # (PyTorch lays one out anew)
        check_inplace(self)     # (PyTorch resizes an inference tensor first, then refuses)
    if type(self._data) is MetaArray:
        self._data = MetaArray(shape, self._data.dtype)
    else:
        _resize_storage(self, shape)
    order = None if memory_format is None else memory_order(memory_format, len(shape))
    if order is not None:           # the same elements, restrided in that format
        self._data = lay_out(xp_of(self._data), self._data, order)
    self._bump_version()
    return self


def resize_shape(sizes, size=UNSET):
    """The shape a ``resize_(*sizes)`` or ``resize_(size=...)`` call asks for."""
    from ember._sizes import _size
    if size is not UNSET or not sizes:
        sizes = (method_varargs(sizes, size, MISSING, "resize_", "size"),)
    return _size(sizes)


def _resize_storage(t, shape):
    """Lay ``t`` out contiguously as ``shape`` over its memory from its storage offset: a view
    of the memory it lies in when that holds enough elements, else new memory holding its
    elements from there on (ember cannot move the memory of the tensors sharing it)."""
    from ember._storage import UntypedStorage
    from ember._storage_place import _storage_root
    count = math.prod(shape)
    flat = UntypedStorage._of(_storage_root(t))._flat(t._data.dtype)
    offset = t.storage_offset()
    # (set_memory: a conjugate view's memory, not its values)
    if offset + count <= flat.size:
        owns = _storage_root(t) is t
        set_memory(t, flat[offset:offset + count].reshape(shape))
        if owns and count < flat.size:      # its memory keeps its size, as PyTorch's storage
            from ember._creation import _Owner
            from ember._tensor import _make
            t._meta = {**(t._meta or {}), "storage_root": _Owner(_make(flat))}
        return
    from ember._creation import _uninitialized     # NaN-filled under deterministic mode
    grown = _uninitialized(xp_of(flat), count, flat.dtype)
    kept = min(count, flat.size - offset)
    grown[:kept] = flat[offset:offset + kept]
    set_memory(t, grown.reshape(shape))
    t._view = None
    if t._meta is not None:
        t._meta.pop("storage_root", None)


def resize_as_(self, the_template, memory_format=None):
    """``resize_`` to ``the_template``'s shape."""
    if type(self).resize_as_ is not resize_as_:     # ember.resize_as_(t, ...) of a subclass
        return type(self).resize_as_(self, the_template, memory_format)
    if _BIRTHS.levels:
        refuse_captured(self, "aten::resize_as_")
    return resize_(self, *the_template.shape)


def resize(self, *sizes):
    """Deprecated: this tensor viewed as ``sizes`` (same number of elements), with a
    UserWarning."""
    import warnings
    warnings.warn("non-inplace resize is deprecated", UserWarning, stacklevel=2)
    return _autograd_resize(self, sizes)


def resize_as(self, tensor):
    """Deprecated: this tensor viewed as ``tensor``'s shape, with a UserWarning."""
    import warnings
    warnings.warn("non-inplace resize_as is deprecated", UserWarning, stacklevel=2)
    return _autograd_resize(self, tuple(tensor.shape))


def _autograd_resize(t, sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    count = math.prod(sizes)
    if count != t.numel():
        shown = "x".join(str(n) for n in sizes)
        raise RuntimeError(
            f"requested resize to {shown} ({count} elements in total), but the given tensor "
            f"has a size of {'x'.join(str(n) for n in t.shape)} ({t.numel()} elements). "
            f"autograd's resize can only change the shape of a given tensor, while preserving "
            f"the number of elements. ")
    return t.contiguous().view(sizes)


def dim_order(self, *, ambiguity_check=False):
    """The dims from outermost to innermost in memory (by decreasing stride).

    ``ambiguity_check=True`` raises when the order is not unique (a size-1 dim, or two dims
    with one stride); a list of memory formats lets such a tensor through when exactly one
    of them describes it and no two dims share a stride, or when exactly one memory format
    describes it and the list has it."""
    from ember._memory_format import channels_last, channels_last_3d, memory_format
    check = ambiguity_check
    if not (type(check) is bool or type(check) is list
            and all(isinstance(f, memory_format) for f in check)):
        raise TypeError("The ambiguity_check argument must be a bool or a list of memory "
                        "formats.")
    order, strides = _memory_dim_order(self, channels_last), self.stride()
    if check is False or not _order_ambiguous(self.shape, strides):
        return order
    if check is not True:
        if len(set(strides)) == len(strides) and \
                sum(self.is_contiguous(memory_format=f) for f in check) == 1:
            return order
        fitting = [f for f in (contiguous_format, channels_last, channels_last_3d)
                   if self.is_contiguous(memory_format=f)]
        if len(fitting) == 1 and fitting[0] in check:
            return order
    raise RuntimeError("The tensor does not have unique dim order, or cannot map to exact one "
                       "of the given memory formats.")


def _memory_dim_order(t, channels_last):
    """PyTorch's dim order: the dims in order for a contiguous tensor, NCHW -> NHWC for a
    4-D channels-last one, else sorted outermost first, a broadcast (stride-0) dim staying
    where it is and equal strides sorted by size."""
    contiguous = t.is_contiguous()
    last = t.ndim == 4 and t.is_contiguous(memory_format=channels_last)
    if contiguous != last:
        return tuple(range(t.ndim)) if contiguous else (0, 2, 3, 1)
    shape, strides = t.shape, t.stride()

    def inner_first(a, b):            # 1: dim b lies inside dim a; 0: no telling
        if strides[a] == 0 or strides[b] == 0:
            return 0
        return (strides[a] > strides[b]) - (strides[a] < strides[b]) or \
            (shape[a] > shape[b]) - (shape[a] < shape[b])
    perm = list(reversed(range(t.ndim)))          # innermost first
    for i in range(1, t.ndim):      # an insertion sort that steps over ambiguous pairs
        moving = i
        for j in reversed(range(i)):
            order = inner_first(perm[j], perm[moving])
            if order > 0:
                perm[j], perm[moving] = perm[moving], perm[j]
                moving = j
            elif order < 0:
                break
    return tuple(reversed(perm))


def _order_ambiguous(shape, strides):
    """Whether more than one dim order describes the layout: some dim of size 1, two dims
    with one stride, or a broadcast (stride-0) dim beside others."""
    return 1 in shape or len(set(strides)) != len(strides) or len(shape) > 1 and 0 in strides


Tensor.resize_, Tensor.resize_as_, Tensor.dim_order = resize_, resize_as_, dim_order
Tensor.resize, Tensor.resize_as = resize, resize_as


@op("conj(input)", view="maybe", saves_inputs=False)
def conj(xp, x):
    """The complex conjugate: the values here (for every caller of the forward: vmap, forward
    AD, tracing); a call through the dispatcher gets a lazy view of a complex input's memory
    with the conjugate bit set (NOTE [Conjugate views] in _conj_view.py); ``input`` itself
    for real tensors."""
    return xp.conj(x) if x.dtype.kind == "c" else x


@conj.derivative
def _(grad, x):
    return grad.conj()


@op("conj_physical(input)", inplace=True, out=True, saves_inputs=False)
def conj_physical(xp, x):
    """The complex conjugate, computed into new memory (``conj_physical_``: into input's)."""
    return xp.conj(x) if x.dtype.kind == "c" else x.copy()


@conj_physical.derivative
def _(grad, x):
    return grad.conj_physical()


def _real(x, params):
    """A real tensor is its own conjugate, returned itself by PyTorch."""
    return x._data.dtype.kind != "c"


conj.returns_input_when(_real)
conj_physical.returns_input_when(_real)


@op("real(input)", view=True, method=False, saves_inputs=False,
    grad_fn_name="SelectBackward0")         # PyTorch selects from view_as_real
def real(xp, x):
    """The real part (a view)."""
    return x.real


@real.derivative
def _(grad, x):
    return grad


@op("imag(input)", view=True, method=False, saves_inputs=False,
    grad_fn_name="SelectBackward0")         # PyTorch selects from view_as_real
def imag(xp, x):
    """The imaginary part of a complex tensor (a view)."""
    if x.dtype.kind != "c":
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return x.imag


@imag.derivative
def _(grad, x):
    return grad * 1j


@real.composed_when_recording
def _(inputs, params):
    """PyTorch's graph: a select of ``view_as_real``; a real tensor is its own real part."""
    x = inputs[0]
    if x.is_conj():             # the real part of the memory viewed: the same values
        return view_as_real(x.conj()).select(-1, 0)
    return view_as_real(x).select(-1, 0) if x.is_complex() else x


@imag.composed_when_recording
def _(inputs, params):
    """PyTorch's graph: a select of ``view_as_real``."""
    x = inputs[0]
    if not x.is_complex():
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    if x.is_conj():             # a view with the negative bit, as PyTorch's
        return _neg_view(view_as_real(x.conj())).select(-1, 1)
    return view_as_real(x).select(-1, 1)


@op("_neg_view(input)", view="maybe", method=False, saves_inputs=False)
def _neg_view(xp, x):
    """The negation: the values here (for every caller of the forward); a call through the
    dispatcher gets a lazy view of the memory with the negative bit set (``NegView`` in
    _conj_view.py)."""
    return -x


@_neg_view.derivative
def _(grad, x):
    return _neg_view(grad)


def _set_part(part):
    def setter(self, value):
        part(self)[...] = value                 # ``z.real = t`` writes through the view
    return setter


# a real tensor's .real is the tensor itself, as in PyTorch
Tensor.real = property(lambda self: real(self) if self.is_complex() else self,
                       _set_part(real))
Tensor.imag = property(lambda self: imag(self), _set_part(imag))
