"""safetensors files for ember tensors (``safetensors.torch``'s functions, on NumPy).

A safetensors file is a JSON header and raw little-endian tensor bytes: it holds only named
tensors, so loading one can never run code. ``Module.load_state_dict(load_file(path))``
restores a model.
"""

import os

import ml_dtypes
import numpy as np

from ember._host_values import _to_host
from ember._tensor import Tensor, _make

__all__ = ["save", "save_file", "load", "load_file"]

_DTYPES = {
    "BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16, "I32": np.int32,
    "I64": np.int64, "U16": np.uint16, "U32": np.uint32, "U64": np.uint64, "F16": np.float16,
    "BF16": ml_dtypes.bfloat16, "F32": np.float32, "F64": np.float64, "C64": np.complex64,
    "F8_E4M3": ml_dtypes.float8_e4m3fn, "F8_E5M2": ml_dtypes.float8_e5m2,
}

_SUPPORTED = {np.dtype(d) for d in _DTYPES.values()}


def _arrays(tensors):
    if not isinstance(tensors, dict):       # ValueError, as safetensors.torch raises
        raise ValueError(f"Expected a dict of [str, ember.Tensor] but received "
                         f"{type(tensors)}")
    out = {}
    for name, t in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"tensor names must be str, got {name!r}")
        if not isinstance(t, Tensor):
            raise ValueError(f"Key `{name}` is invalid, expected ember.Tensor but received "
                            f"{type(t)}")
        if t.dtype.np not in _SUPPORTED:
            raise TypeError(f"safetensors cannot store tensor `{name}` of dtype {t.dtype}")
        arr = _to_host(t._data)
        out[name] = np.ascontiguousarray(arr).reshape(arr.shape)    # (which makes 0-d 1-d)
    return out


def save(tensors, metadata=None):
    """The bytes of a safetensors file holding ``tensors`` (a dict of name -> Tensor)."""
    import safetensors.numpy          # imported on use: ember imports without it
    return safetensors.numpy.save(_arrays(tensors), metadata=metadata)


def save_file(tensors, filename, metadata=None):
    """Write ``tensors`` to a safetensors file (atomically, like ``ember.save``)."""
    from ember.serialization import _atomic_write
    data = save(tensors, metadata)
    _atomic_write(os.fspath(filename), lambda fp: fp.write(data))


def load(data):
    """The tensors of a safetensors file given as bytes (a dict of name -> Tensor)."""
    import safetensors
    try:
        entries = safetensors.deserialize(bytes(data))
    except safetensors.SafetensorError as e:
        raise RuntimeError(f"invalid safetensors data: {e}") from None
    out = {}
    for name, info in entries:
        np_dtype = _DTYPES.get(info["dtype"])
        if np_dtype is None:
            raise RuntimeError(f"safetensors tensor `{name}` has dtype {info['dtype']}, which "
                               f"ember does not support")
        buf = bytearray(info["data"])           # writable memory the tensor owns
        arr = np.frombuffer(buf, np_dtype).reshape(info["shape"])
        out[name] = _make(arr)
    return out


def load_file(filename, device="cpu"):
    """The tensors of a safetensors file (a dict of name -> Tensor) on ``device``."""
    with open(filename, "rb") as f:
        out = load(f.read())
    if str(device) != "cpu":
        out = {k: v.to(device) for k, v in out.items()}
    return out
