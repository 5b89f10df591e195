"""Tensor: one backend array plus autograd state. Op methods are attached by the registry."""

import copy
import numbers
import types
import weakref

import numpy as np

from ember import _dtype
from ember import _inference, _transform_births
from ember._host_values import (_NO_HOST_DLPACK, _PYTHON_VIA, _check_numpy_dtype, _real_part,
                                _to_host, _to_python, _warn_scalar_of_grad_tensor)
from ember._inference import ACTIVE as _INFERENCE_ACTIVE
from ember._inference import mark as _mark_inference
from ember._set_data import check_new_data
from ember._shape import Size, _shape
from ember._transform_state import (STATE as _TRANSFORMS, check_requires_grad_allowed,
                                    check_retain_grad_allowed, note_made)
from ember._storage_place import (_address, _placement, _storage_root, born_row_major,
                                  empty_geometry)
from ember.backend import device_of
from ember.backend.meta import MetaArray

__all__ = ["Tensor", "Size"]


class _Version:
    """The version counter a tensor shares with its views; in-place ops bump it."""

    __slots__ = ("value",)

    def __init__(self):
        self.value = 0


DETACH_VIEW = ("Can't detach views in-place. Use detach() instead. If you are using "
               "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set "
               "as True, gradients are views of DDP buckets, and hence detach_() cannot be "
               "called on these gradients. To fix this error, please refer to the "
               "Optimizer.zero_grad() function in ember/optim/optimizer.py as the solution.")


class Tensor:
    """A multi-dimensional array with autograd support (``torch.Tensor``).

    ``_data`` is the backend array; everything else about the values (dtype, shape,
    device, strides) is read from it. ``_view`` is None for tensors that own their
    memory, else ``(base, source, op, params)``: ``base`` is the tensor owning the memory
    and ``op(source, *params)`` recreates this view, which in-place autograd on views
    needs (see NOTE [In-place on views] in ops/_inplace.py).
    """

    __slots__ = ("_data", "_requires_grad", "_grad_fn", "_output_nr", "_grad", "_vc",
                 "_view", "_meta", "__weakref__", "__dict__")

    # ----- construction ---------------------------------------------------------------

    def __new__(cls, *args, **kwargs):
        from ember._legacy_new import legacy_tensor_new
        return legacy_tensor_new(cls, args, kwargs)

    @property
    def data(self):
        """This tensor's values, detached from the graph: the same memory but, unlike
        ``detach()``'s, a version counter of its own, so autograd does not see in-place
        changes made through it (as PyTorch's ``.data``)."""
        out = self.detach()
        out._vc = None                  # a fresh counter, made when first needed
        return out

    @data.setter
    def data(self, value):
        check_new_data(self, value)
        self._data = value._data

    # ----- metadata derived from the array ------------------------------------------------

    @property
    def dtype(self):
        return _dtype.FROM_NUMPY[self._data.dtype]

    @property
    def shape(self):
        return _shape(self._data.shape)

    @property
    def device(self):
        return device_of(self._data)

    @property
    def ndim(self):
        return self._data.ndim

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    @property
    def is_cpu(self):
        return self.device.type == "cpu"

    @property
    def is_leaf(self):
        return self._grad_fn is None if self._view is None else self.grad_fn is None

    @property
    def name(self):
        """Always None: PyTorch's read-only ``Tensor.name`` slot, which no tensor sets."""
        return None

    @property
    def is_meta(self):
        return type(self._data) is MetaArray

    def is_inference(self):
        """Whether this tensor was made in inference mode (or is a view of one that was)."""
        return _inference.is_inference(self)

    # kinds of tensor ember does not have (sparse, quantized, nested, MPS, ...): the checks
    # PyTorch programs make answer no
    is_sparse = is_sparse_csr = is_quantized = is_nested = is_mkldnn = is_mps = \
        is_xpu = is_xla = is_ipu = is_mtia = is_maia = is_vulkan = property(lambda self: False)

    def is_distributed(self):
        """Whether this is a distributed tensor (ember has none)."""
        return False

    def module_load(self, other, assign=False):
        """What ``nn.Module.load_state_dict`` stores for this parameter or buffer: ``other``
        copied into this tensor, or (``assign=True``) ``other`` itself; detached either way."""
        if assign:
            return other.detach()
        return self.copy_(other).detach()

    @property
    def itemsize(self):
        return self._data.itemsize

    @property
    def nbytes(self):
        return self._data.nbytes

    @property
    def layout(self):
        from ember import strided
        return strided

    def size(self, dim=None):
        """The shape, or the length of one dimension."""
        if dim is None:
            return _shape(self._data.shape)
        return self._data.shape[_wrap_dim_of_sized(dim, self._data.ndim,
                                                   ("size", "dim", 1, "method"))]

    def dim(self):
        """The number of dimensions."""
        return self._data.ndim

    ndimension = dim

    def numel(self):
        """The number of elements."""
        return self._data.size

    nelement = numel

    def element_size(self):
        """Bytes per element."""
        return self._data.itemsize

    def stride(self, dim=None):
        """Strides in elements (not bytes), or the stride of one dimension."""
        item = self._data.itemsize
        strides = tuple(s // item for s in self._data.strides)
        if not self._data.size:
            geometry = empty_geometry(self)
            if geometry is not None:        # an empty slice (NumPy loses its strides)
                strides = geometry[0]
        if dim is None:
            return strides
        return strides[_wrap_dim_of_sized(dim, self._data.ndim, ("stride", "dim", 1, "method"))]

    def is_contiguous(self, *, memory_format=None):
        """Whether the elements are laid out densely in row-major order (or in the order of
        ``memory_format``, ``ember.channels_last``...)."""
        if memory_format is not None:
            from ember import _memory_format as M
            if memory_format in (M.channels_last, M.channels_last_3d):
                rank = 4 if memory_format is M.channels_last else 5
                return self.ndim == rank and M.laid_out(
                    self._data, M.memory_order(memory_format, rank))
        if self._data.size == 0:
            return True                 # as in PyTorch (NumPy gives empty arrays 0 strides)
        expected = 1
        item = self._data.itemsize
        for size, stride in zip(reversed(self._data.shape), reversed(self._data.strides)):
            if size == 1:
                continue
            if stride != expected * item:
                return False
            expected *= size
        return True

    def storage_offset(self):
        """Offset in elements from the start of the memory this tensor's base owns."""
        if not self._data.size:
            geometry = empty_geometry(self)
            if geometry is not None:        # an empty slice (NumPy loses its place)
                return geometry[1]
        root = _storage_root(self)
        if root is self:
            return 0
        return (_address(self._data) - _address(root._data)) // self._data.itemsize

    def data_ptr(self):
        """The address of the first element (0 for a tensor with no elements, as PyTorch)."""
        return _address(self._data) if self._data.size else 0

    const_data_ptr = data_ptr

    def share_memory_(self):
        """Move this CPU tensor's memory into shared memory and return self.

        The memory moved is that of the tensor's view root (the view, if any, and its base
        both point at the new memory). Other views taken before the call, and other tensors
        over the old array (``detach()``, ``.data``), keep the old memory: ember cannot move
        an array in place. A no-op for CUDA tensors and for tensors already shared. Shared
        tensors sent to other processes (process arguments, queues) use the same memory
        there. See NOTE [Shared-memory segments] in _shared_memory.py.
        """
        from ember._shared_memory import share
        share(self)
        return self

    def is_shared(self):
        """Whether this tensor's memory is shared memory (always True for CUDA tensors)."""
        from ember._shared_memory import is_shared
        return is_shared(self)

    def untyped_storage(self):
        """The bytes of the memory this tensor's view root owns, as an UntypedStorage."""
        from ember._storage import untyped_storage
        return untyped_storage(self)

    def storage(self):
        """This tensor's memory as a TypedStorage of its dtype (deprecated, as in PyTorch)."""
        from ember._storage import typed_storage
        return typed_storage(self)

    def set_(self, *args, **kwargs):
        """Use ``source``'s memory (a tensor's or a storage's) in place; see ``_storage``."""
        from ember._storage import set_
        return set_(self, *args, **kwargs)

    def is_set_to(self, tensor):
        """Whether both tensors use the same memory with the same shape and strides."""
        from ember._storage import is_set_to
        return is_set_to(self, tensor)

    def is_floating_point(self):
        """Whether the dtype is a floating-point type."""
        return self.dtype.category == _dtype.FLOATING

    def is_complex(self):
        """Whether the dtype is a complex type."""
        return self.dtype.category == _dtype.COMPLEX

    def is_signed(self):
        """Whether the dtype is signed."""
        return self.dtype.is_signed

    def get_device(self):
        """The CUDA device index, or -1 for CPU (and meta) tensors."""
        dev = self.device
        return -1 if dev.type != "cuda" else dev.index

    def _is_view(self):
        return self._base is not None   # (a view set_ elsewhere stays one, as PyTorch's)

    @property
    def _base(self):
        view, meta = self._view, self._meta     # (a view set_ elsewhere keeps its base)
        return view[0] if view is not None else meta.get("set_base") if meta else None

    @property
    def _version(self):
        if _inference.MADE[0] and _inference.is_inference(self):
            raise RuntimeError("Inference tensors do not track version counter.")
        return 0 if self._vc is None else self._vc.value

    def _bump_version(self):
        vc = self._vc
        if vc is None:
            vc = self._vc = _Version()
        vc.value += 1

    # ----- conversion to Python and NumPy -------------------------------------------------

    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted "
                               f"to Scalar")
        return _to_python(self._data.reshape(()))

    def tolist(self):
        """The values as (nested) Python lists of numbers."""
        arr = _to_host(self._data)
        if arr.dtype in _PYTHON_VIA:
            arr = arr.astype(_PYTHON_VIA[arr.dtype])
        return arr.tolist()

    def numpy(self, *, force=False):
        """The values as a NumPy array sharing memory (CPU tensors without grad)."""
        if self.requires_grad and not force and _grad_enabled():
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        if type(self._data) is not np.ndarray and not force:
            raise TypeError(f"can't convert {self.device} device type tensor to numpy. "
                            f"Use Tensor.cpu() to copy the tensor to host memory first.")
        _check_numpy_dtype(self.dtype)
        arr = self._data
        # a header of its own (as PyTorch's): reshaping or freezing the caller's array is harmless
        return arr.view() if type(arr) is np.ndarray else _to_host(arr)

    __array_priority__ = 1000       # ``np.float64(2) * t`` defers to Tensor: a tensor

    def __array__(self, dtype=None, copy=None):
        if self.requires_grad and _grad_enabled():
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        if type(self._data) is MetaArray:
            raise TypeError("can't convert meta device type tensor to numpy. Use Tensor.cpu() "
                            "to copy the tensor to host memory first.")
        _check_numpy_dtype(self.dtype)      # even with dtype=, as PyTorch (ember: host_values)
        arr = _to_host(self._data)
        if dtype is not None and arr.dtype != dtype:
            if copy is False:
                raise ValueError("Unable to avoid copy while creating an array as requested.")
            return arr.astype(dtype)
        # NumPy trusts the copy= it passes: ``np.array(t)`` must not share the tensor's memory
        # (order K: the copy keeps the layout, as NumPy's own copy of a strided array does)
        if arr is not self._data:
            return arr
        return arr.copy(order="K") if copy else arr.view()     # (a header of its own)

    def __array_wrap__(self, array, context=None, return_scalar=False):
        """A NumPy ufunc's result on tensors as a tensor (bool results as uint8, as in
        PyTorch)."""
        if not isinstance(array, np.ndarray):
            from ember._from_data import _tp_name
            raise TypeError(f"expected np.ndarray (got {_tp_name(array)})")
        return _make(array.astype(np.uint8) if array.dtype == np.bool_ else array)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self.requires_grad:
            raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
        asked = {"max_version": max_version, "dl_device": dl_device, "copy": copy}
        try:
            return self._data.__dlpack__(stream=stream,
                                         **{k: v for k, v in asked.items() if v is not None})
        except BufferError:
            if type(self._data) is not np.ndarray or self.dtype not in _NO_HOST_DLPACK:
                raise
        # NOTE: PyTorch exports these; NumPy's DLPack, which ember's CPU tensors use, cannot
        raise BufferError(f"ember cannot export a CPU tensor of dtype {self.dtype} through "
                          f"DLPack (NumPy's DLPack has no such type); convert it first, e.g. "
                          f"with tensor.float()") from None

    def __dlpack_device__(self):
        from ember.utils.dlpack import DLDeviceType
        kind, index = self._data.__dlpack_device__()
        return DLDeviceType(kind), index

    @property
    def __cuda_array_interface__(self):
        """The GPU array's description for other CUDA libraries (Numba, CuPy): only CUDA
        tensors have one, so ``hasattr`` tells them apart."""
        if type(self._data) is np.ndarray:
            raise AttributeError(f"Can't get __cuda_array_interface__ on non-CUDA tensor type: "
                                 f"{self.type()} If CUDA data is required use tensor.cuda() "
                                 f"to copy tensor to device memory.")
        if self.requires_grad:
            raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires "
                               "grad. If gradients aren't required, use var.detach() to get "
                               "Variable that doesn't require grad.")
        return self._data.__cuda_array_interface__

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous"
                               if self._data.size > 1 else
                               "Boolean value of Tensor with no values is ambiguous")
        return bool(_to_python(self._data.reshape(())))    # (a GPU read: sync-debug sees it)

    __nonzero__ = __bool__

    def __float__(self):
        if self.requires_grad:
            _warn_scalar_of_grad_tensor()
        return float(_real_part(self._scalar(), "double"))

    def __int__(self):
        return int(_real_part(self._scalar(), "int64_t"))

    __long__ = __int__

    def _scalar(self):
        """``item()`` for Python's number conversions, which raise ValueError for several
        elements (``item`` raises RuntimeError)."""
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return self.item()

    def __complex__(self):
        if self.requires_grad:
            _warn_scalar_of_grad_tensor()
        return complex(self._scalar())

    def __index__(self):
        if self.dtype.category > _dtype.INTEGRAL or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to "
                            "an index")
        return int(self.item())

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __hash__(self):
        return id(self)

    def __delitem__(self, index):
        raise TypeError("Tensor does not support deleting items")

    def __contains__(self, element):
        if isinstance(element, (Tensor, numbers.Number)):     # NumPy's numbers too
            return bool((self == element).any())
        raise RuntimeError(f"Tensor.__contains__ only supports Tensor or scalar, but you "
                           f"passed in a {type(element)}.")

    def __repr__(self, *, tensor_contents=None):
        from ember._tensor_str import tensor_repr
        return tensor_repr(self, tensor_contents)

    def __format__(self, spec):
        if type(self) is Tensor and self._data.ndim == 0 and type(self._data) is not MetaArray:
            return format(self.item(), spec)    # f"{loss}" prints 0.25, as in PyTorch
        from ember._tensor_str import tensor_format     # (subclasses, meta: their repr)
        return tensor_format(self, spec)

    def __reduce_ex__(self, protocol):
        from ember._creation import _rebuild_from_type, _rebuild_tensor, _rebuild_view
        from ember.utils.hooks import warn_if_has_hooks
        warn_if_has_hooks(self)     # (its gradient hooks stay behind)
        place = _placement(self)
        if place is not None:       # pickled with its storage's owner, so views stay views
            made = (_rebuild_view, (type(self), *place, self._data.shape, self.dtype,
                                    self.requires_grad))
        else:
            args = (type(self), _to_host(self._data), self.requires_grad)
            if self.device.type == "cuda":      # unpickled onto its GPU again, as PyTorch's
                args += (self.device.index,)
            made = (_rebuild_tensor, args)
        # attributes set on the tensor (``t.label = ...``) travel too, as in PyTorch, whose
        # pair a subclass's own __reduce_ex__ unpacks (geoopt's ManifoldTensor)
        return (_rebuild_from_type, (*made, self.__dict__)) if self.__dict__ else made

    def __getstate__(self):
        """The attributes set on the tensor, None when there are none (as PyTorch's, whose
        tensors have no slots)."""
        return self.__dict__ or None

    def __setstate__(self, state):
        """Restore a leaf from a legacy pickle's state: ``(storage, offset, size, stride)``,
        ``(data, _, _, requires_grad, backward_hooks)`` or ``(requires_grad, _,
        backward_hooks)`` (``_rebuild_from_type`` sets attributes itself)."""
        if not self.is_leaf:
            raise RuntimeError("__setstate__ can be only called on leaf Tensors")
        if len(state) == 4:
            self.set_(*state)
            return
        if len(state) == 5:
            self.data = state[0]
            state = (state[3], None, state[4])
        self.requires_grad, _, self._backward_hooks = state

    def __deepcopy__(self, memo):
        if not self.is_leaf:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) "
                               "support the deepcopy protocol at the moment.  If you were "
                               "attempting to deepcopy a module, this may be because of a "
                               "torch.nn.utils.weight_norm usage, see "
                               "https://github.com/pytorch/pytorch/pull/103001")
        if id(self) in memo:
            return memo[id(self)]
        if type(self) is not Tensor and not type(self).__module__.startswith("ember."):
            # as PyTorch's: a user subclass is copied through new_empty, which Tensor's default
            # __torch_function__ (it runs this with subclasses disabled) answers with a Tensor
            if type(self.new_empty(())) is not type(self):
                raise RuntimeError(
                    "The default implementation of __deepcopy__() for non-wrapper subclasses "
                    "only works for subclass types that implement new_empty() and for which "
                    "that function returns another instance of the same subclass. You should "
                    "either properly implement new_empty() for your subclass or override "
                    "__deepcopy__() if it is intended behavior for new_empty() to return an "
                    "instance of a different type.")
        from ember._deepcopy_memory import copied_data
        new = copied_data(self, memo)       # (laid out as self, over its root's copy)
        new._requires_grad = self._requires_grad
        if new._requires_grad and _TRANSFORMS.made is not None:
            note_made(new)
        if self._grad is not None:
            new._grad = self._grad.__deepcopy__(memo)
        if self.__dict__:
            new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        memo[id(self)] = new
        return new

    # ----- autograd state -------------------------------------------------------------------

    @property
    def requires_grad(self):
        return self._requires_grad or self._grad_fn is not None or _view_tracks(self)

    @requires_grad.setter
    def requires_grad(self, flag):
        if type(flag) is not bool:
            raise RuntimeError("requires_grad must be a bool")
        if self._grad_fn is not None or (self._view is not None and not _raw_is_leaf(self, True)):
            # (``requires_grad_(True)`` on a non-leaf is a no-op; the attribute refuses it)
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables." if flag else
                "you can only change requires_grad flags of leaf variables. If you want to use "
                "a computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach().")
        if flag and _dtype.FROM_NUMPY[self._data.dtype].category < _dtype.FLOATING:
            raise RuntimeError("only Tensors of floating point and complex dtype can require "
                               "gradients")
        if flag:
            if _inference.MADE[0]:
                _inference.check_requires_grad(self)
            if _TRANSFORMS.made is not None:    # (NOTE [Leaves made inside a transform])
                note_made(self)
        self._requires_grad = flag

    def requires_grad_(self, requires_grad=True):
        """Set requires_grad in place and return self."""
        if type(requires_grad) is not bool:
            from ember._creation import _tp_name
            raise TypeError(f"requires_grad_(): argument 'requires_grad' (position 1) must be "
                            f"bool, not {_tp_name(requires_grad)}")
        check_requires_grad_allowed()
        return self._set_requires_grad(requires_grad)

    def _set_requires_grad(self, requires_grad=True):
        """``requires_grad_`` for ember's own code, which may flag leaves inside a function
        transform (PyTorch's transforms refuse the user's ``requires_grad_`` there)."""
        if requires_grad and self.dtype.category < _dtype.FLOATING:
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if requires_grad and (self._grad_fn is not None or (
                self._view is not None and not _raw_is_leaf(self, True))):
            return self                             # (True on a non-leaf: a no-op)
        if requires_grad and self._meta is not None and "no_grad_view" in self._meta:
            self._meta["own_leaf"] = True   # (its gradient, dropped until now, accumulates)
        self.requires_grad = requires_grad
        return self

    @property
    def grad_fn(self):
        if self._view is None:
            return self._grad_fn
        from ember.autograd.graph import AccumulateGrad
        from ember.ops._inplace import history
        fn = history(self)[0]
        return None if isinstance(fn, AccumulateGrad) else fn

    @property
    def retains_grad(self):
        return bool(self._meta and self._meta.get("retains_grad"))

    @property
    def output_nr(self):
        return self._output_nr

    def retain_grad(self):
        """Populate ``.grad`` for this non-leaf tensor during backward."""
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        check_retain_grad_allowed()
        if self._grad_fn is None or self.retains_grad:
            return
        from ember.autograd.graph import add_retain_grad_hook
        add_retain_grad_hook(self)

    def register_hook(self, hook):
        """Call ``hook(grad)`` when this tensor's gradient is computed; it may return a new grad."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require "
                               "gradient")
        if _transform_births.STATE.levels or type(self) is not Tensor:
            from ember.func._hooks import scoped_hook     # NOTE [Hooks inside transforms]
            self, hook = scoped_hook(self, hook)
        from ember.autograd.graph import register_tensor_hook
        return register_tensor_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Call ``hook(tensor)`` after the gradient was accumulated into ``.grad`` (leaves)."""
        if self._grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf "
                               "tensors")
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require "
                               "gradient")
        from ember.autograd.graph import register_post_accumulate_hook
        return register_post_accumulate_hook(self, hook)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate the gradient of this tensor into the leaves' ``.grad``."""
        from ember.autograd import backward
        backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def detach(self):
        """A tensor sharing memory and version with this one, cut from the graph; of this
        tensor's subclass if that keeps Tensor's ``__torch_function__`` (as PyTorch's default
        handling re-classes results; Parameter opts out)."""
        cls = type(self)
        if cls is not Tensor and getattr(cls.__torch_function__, "__func__",
                                         None) is not _DEFAULT_TORCH_FUNCTION:
            cls = Tensor
        out = _make(self._data, cls)
        out._vc = self._shared_version()
        # the same memory, but no view for autograd: a weak reference, so that a detached
        # result (a logged loss) does not keep the graph of the tensor it came from alive
        # (the root's array, which out views anyway, stands in for it once it is gone)
        root = _storage_root(self)
        out._meta = {"storage_root": weakref.ref(root), "storage_array": root._data}
        _inference.inherit(out, self)
        return out

    def detach_(self):
        """Cut this tensor from the graph in place."""
        if _INFERENCE_ACTIVE[0]:        # NOTE [Captured tensors]
            _transform_births.refuse_captured(self, "aten::detach_")
        if self._view is not None:      # any view, as PyTorch's (requiring grad or not)
            raise RuntimeError(DETACH_VIEW)
        if self._grad_fn is not None:   # (nodes that saved it may no longer use it)
            from ember.autograd._detached import note_detached
            note_detached(self)
        self._grad_fn = None
        self._requires_grad = False
        return self

    def _shared_version(self):
        vc = self._vc
        if vc is None:
            vc = self._vc = _Version()
        return vc

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not cls.__module__.startswith("ember."):     # ember's own dispatch by registry op
            from ember.overrides._subclass_entries import install_entries
            install_entries(cls)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        from ember.overrides import default_torch_function
        return default_torch_function(cls, func, types, args, kwargs)

    @staticmethod
    def _make_subclass(cls, data, require_grad=False):
        """``data``'s memory as a leaf tensor of subclass ``cls`` (how Parameter-like classes
        build themselves in ``__new__``)."""
        if type(require_grad) is not bool:
            from ember._creation import _tp_name
            raise TypeError(f"_make_subclass(): argument 'require_grad' (position 3) must be "
                            f"bool, not {_tp_name(require_grad)}")
        out = _make(data._data, cls)
        out._vc = data._shared_version()
        out._meta = {"storage_root": weakref.ref(_storage_root(data))}
        _inference.inherit(out, data)
        if require_grad:    # (Tensor's setter, no subclass handler's: as PyTorch's)
            if _dtype.FROM_NUMPY[out._data.dtype].category < _dtype.FLOATING:
                raise RuntimeError("Only Tensors of floating point and complex dtype can "
                                   "require gradients")
            Tensor.requires_grad.fset(out, True)
        return out

    def as_subclass(self, cls):
        """An alias of this tensor (same memory, attached to the graph) of type ``cls``."""
        from ember.ops.conversion import _alias
        from ember.overrides._protocol import DisableTorchFunctionSubclass
        with DisableTorchFunctionSubclass():        # (PyTorch offers a handler nothing)
            out = _alias(self)
        out.__class__ = cls
        return out


_new = object.__new__
_DEFAULT_TORCH_FUNCTION = Tensor.__torch_function__.__func__
_PUBLIC_MODULES = frozenset({"ember", "ember.nn.functional", "ember.linalg", "ember.fft",
                             "ember.special"})


def name_methods():
    """Name each Tensor method written in another module ``Tensor.<name>``, as PyTorch's
    are (a ``__torch_function__`` handler sees them), unless it is also a public function."""
    for name, value in vars(Tensor).items():
        if (type(value) is types.FunctionType and value.__module__ not in _PUBLIC_MODULES
                and not value.__qualname__.startswith("Tensor.")):
            value.__name__ = name
            value.__qualname__ = f"Tensor.{name}"


def _grad_enabled():
    """Whether grad mode is on (PyTorch lets numpy() read a tensor that requires grad under
    no_grad, as a custom Function's forward does; enable_grad inside inference mode turns
    the check back on, though nothing records there)."""
    from ember.autograd.grad_mode import is_grad_enabled
    return is_grad_enabled()


def _raw_is_leaf(t, flag=False):
    """``t.is_leaf`` without offering a subclass's ``__torch_function__`` the property; with
    ``flag``, as requires_grad_ reads it (a no_grad view's node is not rebuilt, as PyTorch's)."""
    if flag and t._grad_fn is None and "no_grad_view" in (t._meta or ()):
        return True
    return t._grad_fn is None if t._view is None else Tensor.grad_fn.fget(t) is None


def _view_tracks(t):
    """Whether ``t`` is a view whose base requires grad: gradient reaches ``t`` through
    its base even when the base gained history (an in-place write through another view,
    ``requires_grad_()``) after ``t`` was made, as PyTorch's view regenerates its grad_fn.
    (``view(dtype)`` makes no differentiable view, nor does anything taken from one.)"""
    view = t._view
    if view is None or t._data.dtype.kind not in "fcV":
        return False
    base = view[0]
    if not (base._requires_grad or base._grad_fn is not None):
        return False
    while view is not None:
        if view[2].name == "_view_dtype":
            return False
        view = view[1]._view
    return True


def _make(array, cls=Tensor, _inference=_INFERENCE_ACTIVE):
    """Wrap a backend array in a fresh tensor with no autograd history (an inference tensor
    in inference mode: see _inference.py). A fresh empty array gets PyTorch's row-major strides
    (see born_row_major)."""
    t = _new(cls)
    t._data = array if array.size else born_row_major(array)
    t._requires_grad = False
    t._grad_fn = None
    t._output_nr = 0
    t._grad = None
    t._vc = None
    t._view = None
    t._meta = None
    if _inference[0]:
        _mark_inference(t)
    return t


def _wrap_dim_of_sized(dim, ndim, arg):
    """``_wrap_dim`` for size(dim) and stride(dim), which any dim of a 0-dim tensor fails;
    ``arg`` names the argument in a TypeError, as ``ops._dims.wrap_dim``'s does."""
    if type(dim) is not int:
        from ember.ops._dims import int_param
        dim = int_param(dim, arg, strict=True)
    if not ndim:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    return _wrap_dim(dim, ndim)


def _wrap_dim(dim, ndim):
    lo = -max(ndim, 1)
    hi = max(ndim, 1) - 1
    if not lo <= dim <= hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], "
                         f"but got {dim})")
    return dim % max(ndim, 1)


from ember import _tensor_grad  # noqa: E402,F401  (installs .grad and .grad_dtype)
