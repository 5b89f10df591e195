"""PyTorch's legacy storage classes (``torch.FloatStorage``, ``LongStorage``, ...): calling
one makes a TypedStorage of its dtype, and a TypedStorage of that dtype is an instance of it
(``isinstance(t.storage(), torch.FloatStorage)``), as in PyTorch."""

from ember import _dtype as D
from ember._storage import TypedStorage
from ember._tensor import Tensor

_DTYPES = {"BFloat16Storage": D.bfloat16, "BoolStorage": D.bool_, "ByteStorage": D.uint8,
           "CharStorage": D.int8, "ComplexDoubleStorage": D.complex128,
           "ComplexFloatStorage": D.complex64, "DoubleStorage": D.float64,
           "FloatStorage": D.float32, "HalfStorage": D.float16, "IntStorage": D.int32,
           "LongStorage": D.int64, "ShortStorage": D.int16}

__all__ = list(_DTYPES)


class _LegacyStorageType(type):
    def __instancecheck__(cls, instance):
        return isinstance(instance, TypedStorage) and instance.dtype is cls.dtype


class _LegacyStorage(metaclass=_LegacyStorageType):
    dtype = None

    def __new__(cls, *args, device=None, **kwargs):
        return TypedStorage(*args, dtype=cls.dtype, device=device, **kwargs)


def _legacy_class(name, dtype):
    cls = _LegacyStorageType(name, (_LegacyStorage,), {
        "dtype": dtype, "__doc__": f"A TypedStorage of {dtype} (legacy, deprecated)."})
    cls.__module__ = "ember"
    return cls


globals().update({name: _legacy_class(name, dtype) for name, dtype in _DTYPES.items()})
_BY_DTYPE = {dtype: globals()[name] for name, dtype in _DTYPES.items()}


def storage_type(self):
    """The legacy storage class of this tensor's dtype (``ember.FloatStorage``, ...)."""
    return _BY_DTYPE[self.dtype]


Tensor.storage_type = storage_type
