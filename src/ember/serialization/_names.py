"""The names PyTorch's pickles use for tensors, storages, dtypes and devices, mapped to ember's.

A checkpoint refers to its tensors through a few PyTorch globals (``torch._utils
_rebuild_tensor_v2``, ``torch FloatStorage``, ``torch float32``, ...). ember writes those same
names, so PyTorch can read ember's files, and resolves them to its own objects when reading.
"""

from ember import _dtype as D

# Legacy typed-storage classes, one per dtype that has one; other dtypes (float8) are written
# as an UntypedStorage plus an explicit dtype (``_rebuild_tensor_v3``).
STORAGE_OF = {
    D.bool_: "BoolStorage", D.uint8: "ByteStorage", D.int8: "CharStorage",
    D.int16: "ShortStorage", D.int32: "IntStorage", D.int64: "LongStorage",
    D.float16: "HalfStorage", D.bfloat16: "BFloat16Storage", D.float32: "FloatStorage",
    D.float64: "DoubleStorage", D.complex64: "ComplexFloatStorage",
    D.complex128: "ComplexDoubleStorage",
}

# PyTorch dtype names ember lacks: a checkpoint holding them fails with a clear message.
UNSUPPORTED_DTYPES = ("complex32", "quint8", "qint8", "qint32", "quint4x2", "quint2x4",
                      "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2",
                      "bits8", "bits16", "bits1x8", "bits2x4", "bits4x2")
UNSUPPORTED_STORAGES = ("QInt8Storage", "QUInt8Storage", "QInt32Storage", "QUInt4x2Storage",
                        "QUInt2x4Storage")


class StorageType:
    """What a pickled ``torch.FloatStorage`` (or ``UntypedStorage``) global stands for.

    ``dtype`` is None for untyped storages, whose element type comes with the tensor.
    """

    __slots__ = ("name", "dtype")

    def __init__(self, name, dtype=None, *, _by_name=True):
        if dtype is None and _by_name:      # PyTorch's StorageType(name): the dtype it names
            dtype = next((dt for dt, n in STORAGE_OF.items() if n == name), None)
            if dtype is None:
                raise KeyError(f'pickle storage type "{name}" is not recognized')
        self.name = name
        self.dtype = dtype

    def __repr__(self):
        return f"StorageType(dtype={self.dtype})"


STORAGE_TYPES = {name: StorageType(name, dt) for dt, name in STORAGE_OF.items()}
UNTYPED = StorageType("UntypedStorage", None, _by_name=False)


_ALL_GLOBALS = []


class TorchGlobal:
    """A PyTorch global written by name into ember's pickles (PyTorch need not be installed)."""

    __slots__ = ("module", "name", "stand_in")

    def __init__(self, module, name):
        self.module = module
        self.name = name
        # the name this module gives it: the C pickler writes a global as a module and a name
        # it can look up, which ember's pickler then rewrites to PyTorch's (see _pickler.py)
        self.stand_in = f"_torch_global_{len(_ALL_GLOBALS)}"
        _ALL_GLOBALS.append(self)

    def __repr__(self):
        return f"{self.module}.{self.name}"

    def __call__(self, *args):          # pickle requires a reduce function to be callable
        raise TypeError(f"{self!r} is a name written into checkpoints, not a function")


REBUILD_V2 = TorchGlobal("torch._utils", "_rebuild_tensor_v2")
REBUILD_V3 = TorchGlobal("torch._utils", "_rebuild_tensor_v3")
REBUILD_PARAMETER = TorchGlobal("torch._utils", "_rebuild_parameter")
REBUILD_PARAMETER_WITH_STATE = TorchGlobal("torch._utils", "_rebuild_parameter_with_state")
REBUILD_FROM_TYPE = TorchGlobal("torch._tensor", "_rebuild_from_type_v2")
REBUILD_META = TorchGlobal("torch._utils", "_rebuild_meta_tensor_no_storage")
REBUILD_SPARSE = TorchGlobal("torch._utils", "_rebuild_sparse_tensor")
REBUILD_NJT = TorchGlobal("torch.nested._internal.nested_tensor", "_rebuild_njt")
NJT_CLASS = TorchGlobal("torch.nested._internal.nested_tensor", "NestedTensor")
GET_LAYOUT = TorchGlobal("torch.serialization", "_get_layout")
ORDERED_DICT = TorchGlobal("collections", "OrderedDict")
SIZE = TorchGlobal("torch", "Size")
DEVICE = TorchGlobal("torch", "device")
TENSOR = TorchGlobal("torch", "Tensor")
PARAMETER = TorchGlobal("torch.nn.parameter", "Parameter")
STORAGE_GLOBALS = {dt: TorchGlobal("torch", name) for dt, name in STORAGE_OF.items()}
UNTYPED_GLOBAL = TorchGlobal("torch.storage", "UntypedStorage")
DTYPE_GLOBALS = {dt: TorchGlobal("torch", dt.name) for dt in D.ALL_DTYPES}
globals().update((g.stand_in, g) for g in _ALL_GLOBALS)
