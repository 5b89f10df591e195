"""PyTorch's legacy tensor types (``torch.FloatTensor``, ``torch.cuda.LongTensor``, ...).

Older programs build tensors with them (``FloatTensor(2, 3)``, ``LongTensor([1, 2])``),
test with them (``isinstance(x, torch.cuda.FloatTensor)``) and cast to them
(``x.type(torch.DoubleTensor)``). Each is a class standing for one dtype on one device
type; tensors are never its instances by construction, only by that check, as in PyTorch.
"""

from ember import _dtype as D
from ember._legacy_new import (DEFAULT_TYPE_DEVICE, NO_SIZE, _checked_device, fold_size,
                               legacy_new)
from ember._device import device as as_device, set_default_device
from ember._tensor import Tensor
from ember._warn import warn_once

class TensorType(type):
    """The class of the legacy types: instances are tensors of its dtype and device type."""

    def __instancecheck__(cls, obj):
        # (PyTorch's types stand for a layout and a device type: CSR, jagged or meta tensors
        # are instances of none)
        return (isinstance(obj, Tensor) and obj.dtype is cls.dtype
                and obj.layout.name == ("sparse_coo" if cls.is_sparse else "strided")
                and obj.device.type == ("cuda" if cls.is_cuda else "cpu"))

    def __repr__(cls):
        return f"<class '{cls.__module__}.{cls.__name__}'>"

    def __call__(cls, *args, device=None, size=NO_SIZE):
        """``Type(*sizes)`` (uninitialized), ``Type(data)``, ``Type(tensor)`` or ``Type()``; a
        sparse type's: ``Type(indices, values[, size])`` or ``Type(*sizes)``; ``size=`` too."""
        if size is not NO_SIZE:
            args = fold_size(args, size, cls.is_sparse)
        if cls.is_sparse:
            from ember.sparse import legacy_sparse_new
            return legacy_sparse_new(args, cls.dtype, cls._device() if device is None
                                     else _checked_device((), cls._device(), device, "new"))
        return legacy_new(args, cls.dtype, cls._device(), name=cls.__name__, given=device)

    def _device(cls):
        if not cls.is_cuda:
            return "cpu"
        from ember import cuda
        if not cuda.is_available():
            raise TypeError(f"type {cls.__module__}.{cls.__name__} not available. ember not "
                            f"compiled with CUDA enabled.")
        return "cuda"


def _types(module, is_cuda, is_sparse=False):
    kinds = (D.float32, D.float64, D.float16, D.bfloat16, D.int64, D.int32, D.int16, D.int8,
             D.uint8) + (() if is_sparse else (D.bool_,))    # (PyTorch has no sparse bool type)
    return {d._legacy: TensorType(d._legacy, (), {"dtype": d, "is_cuda": is_cuda,
                                                  "is_sparse": is_sparse, "__module__": module})
            for d in kinds}


CPU_TYPES = _types("ember", False)
CUDA_TYPES = _types("ember.cuda", True)
SPARSE_TYPES = _types("ember.sparse", False, True)              # (ember.sparse.FloatTensor)
CUDA_SPARSE_TYPES = _types("ember.cuda.sparse", True, True)
globals().update(CPU_TYPES)
__all__ = [*CPU_TYPES, "set_default_tensor_type"]

# a cast to a sparse type's name changes the dtype and device type only, as PyTorch's
_BY_NAME = {f"{prefix}{cuda}{sparse}{d._legacy}": (d, bool(cuda)) for d in D.ALL_DTYPES
            for prefix in ("ember.", "torch.") for cuda in ("", "cuda.")
            for sparse in ("", "sparse.")}


def legacy_type(kind):
    """``(dtype, on_cuda)`` for a legacy type given as a class or its name (``"torch.cuda.
    FloatTensor"``), else None."""
    if isinstance(kind, TensorType):
        return kind.dtype, kind.is_cuda
    if isinstance(kind, str):
        if kind not in _BY_NAME:
            raise ValueError(f"invalid type: '{kind}'")
        return _BY_NAME[kind]
    return None


def set_default_tensor_type(t):
    """Deprecated: make ``t``'s dtype the default and its device type the default device."""
    warn_once("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
              "torch.set_default_dtype() and torch.set_default_device() as alternatives.")
    kind = legacy_type(t)
    if kind is None:
        raise TypeError(f"invalid type object: {t!r}")
    dtype, on_cuda = kind
    if getattr(t, "is_sparse", False) or isinstance(t, str) and ".sparse." in t:
        raise TypeError("only dense types are supported as the default type")
    if not dtype.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    D.set_default_dtype(dtype)
    set_default_device(as_device("cuda") if on_cuda else None)
    DEFAULT_TYPE_DEVICE[0] = "cuda" if on_cuda else "cpu"
