"""Parameter (a Tensor a Module registers as a learnable weight), Buffer, and the uninitialized
parameters and buffers of lazy modules."""

from ember._tensor import Tensor, _make
from ember.overrides import DisableTorchFunctionSubclass, _disabled_torch_function_impl

__all__ = ["Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer",
           "is_lazy"]


class _ParameterMeta(type):
    """``isinstance(t, Parameter)`` also holds for a tensor subclass instance made a parameter
    by ``Parameter(t)``, which keeps its own class (as in PyTorch)."""

    def __instancecheck__(cls, instance):
        if cls is Parameter and getattr(instance, "_is_param", False) \
                and isinstance(instance, Tensor):
            return True
        return super().__instancecheck__(instance)


class Parameter(Tensor, metaclass=_ParameterMeta):
    """A leaf tensor that ``Module.__setattr__`` registers as a parameter (``torch.nn.Parameter``).

    It shares memory and version counter with ``data``; ops on it return plain Tensors.
    """

    __torch_function__ = _disabled_torch_function_impl

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            from ember._creation import empty
            data = empty(0)
        if requires_grad and not (data.is_floating_point() or data.is_complex()):
            raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                               "gradients")
        if type(data) is Tensor or type(data) is Parameter or not hasattr(data, "__dict__"):
            return Tensor._make_subclass(cls, data, requires_grad)
        # a tensor subclass keeps its class: a detached alias marked as a parameter
        t = data.detach().requires_grad_(requires_grad)
        t._is_param = True
        return t

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        """A new parameter of the same class holding a copy of the data; as in PyTorch, the
        copy keeps ``requires_grad`` but not ``.grad`` or other attributes."""
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.data.clone(), self.requires_grad)
        return memo[id(self)]


class _BufferMeta(type):
    """``isinstance(t, Buffer)`` holds for tensors made by ``Buffer(...)``."""

    def __instancecheck__(cls, instance):
        if cls is Buffer:
            return isinstance(instance, Tensor) and getattr(instance, "_is_buffer", False)
        return super().__instancecheck__(instance)


class Buffer(Tensor, metaclass=_BufferMeta):
    """Marks a tensor to be registered as a buffer when assigned to a Module attribute.

    A Tensor subclass, as PyTorch's, though ``Buffer(t)`` returns a plain Tensor (marked).
    """

    __torch_function__ = _disabled_torch_function_impl

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            from ember._creation import empty
            data = empty(0)
        t = data.detach().requires_grad_(data.requires_grad)
        t.persistent = persistent
        t._is_buffer = True
        return t


_UNINITIALIZED_USE = (
    "Attempted to use an uninitialized parameter in {}. This error happens when you are using "
    "a `LazyModule` or explicitly manipulating `torch.nn.parameter.UninitializedParameter` "
    "objects. When using LazyModules Call `forward` with a dummy batch to initialize the "
    "parameters before calling torch functions")

# what an uninitialized tensor still allows: conversions and moves (whose results stay
# uninitialized) and a few queries; any other op raises
_CONVERSIONS = frozenset({"to", "_to_copy", "cpu", "cuda", "half", "float", "double", "char",
                          "short", "int", "long"})
_ALLOWED = _CONVERSIONS | {"copy_", "size", "is_complex", "is_floating_point", "get_device"}


class UninitializedTensorMixin:
    """A parameter or buffer whose shape is not known yet (lazy modules); ``materialize``
    gives it one and turns it into the class in ``cls_to_become``."""

    cls_to_become = None

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """Refuse every op but conversions and moves, as PyTorch does."""
        name = getattr(func, "__name__", func)
        if name in _ALLOWED:
            with DisableTorchFunctionSubclass():
                out = func(*args, **(kwargs or {}))
            if type(out) is Tensor and name in _CONVERSIONS:
                out.__class__ = cls
            return out
        raise ValueError(_UNINITIALIZED_USE.format(f"<method '{name}' of 'Tensor' objects>"))

    def materialize(self, shape, device=None, dtype=None):
        """Allocate this tensor with ``shape`` (and its dtype/device unless given)."""
        from ember._creation import empty
        if device is None:
            device = self._data_device()
        if dtype is None:
            dtype = Tensor.dtype.__get__(self)
        if isinstance(shape, int):
            shape = (shape,)
        self._data = empty(shape, device=device, dtype=dtype)._data
        self.__class__ = self.cls_to_become

    def _data_device(self):
        return Tensor.device.__get__(self)

    @property
    def shape(self):
        raise RuntimeError(
            "Can't access the shape of an uninitialized parameter or buffer. This error "
            "usually happens in `load_state_dict` when trying to load an uninitialized "
            "parameter into an initialized one. Call `forward` to initialize the parameters "
            "before accessing their attributes.")

    def numel(self):
        """Raises: an uninitialized tensor has no number of elements yet."""
        raise ValueError(_UNINITIALIZED_USE.format("<method 'numel' of 'Tensor' objects>"))

    def dim(self):
        """Raises: an uninitialized tensor has no number of dims yet."""
        raise ValueError(_UNINITIALIZED_USE.format("<method 'dim' of 'Tensor' objects>"))

    def __repr__(self):
        return f"<{type(self).__name__}>"

    def __reduce_ex__(self, protocol):
        return (type(self), (self.requires_grad,))


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A parameter of a lazy module, materialized on the first forward."""

    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        from ember._creation import empty
        return Parameter.__new__(cls, empty(0, device=device, dtype=dtype), requires_grad)

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self._data_device(),
                                        Tensor.dtype.__get__(self))
        return memo[id(self)]


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer of a lazy module, materialized on the first forward."""

    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None):
        from ember._creation import empty
        out = _make(empty(0, device=device, dtype=dtype)._data, cls)
        out.requires_grad = requires_grad
        return out

    def __init__(self, requires_grad=False, device=None, dtype=None):
        pass

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self._data_device(),
                                        Tensor.dtype.__get__(self))
        return memo[id(self)]


def is_lazy(t):
    """Whether ``t`` is an uninitialized parameter or buffer."""
    return isinstance(t, UninitializedTensorMixin)
