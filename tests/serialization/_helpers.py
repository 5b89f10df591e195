"""Shared helpers: the committed PyTorch fixtures and a way to wrap any pickle in a checkpoint."""

import io
import os
import pickle

import ml_dtypes
import numpy as np

import ember
from ember.serialization._zip import write_archive

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures", "checkpoints")
RAW = {"bfloat16": ml_dtypes.bfloat16, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
       "float8_e5m2": ml_dtypes.float8_e5m2}


def fixture(name):
    return os.path.join(FIXTURES, f"{name}.pt")


def expected(name):
    """{"a/b/0": (ndarray, dtype name or None)} as recorded when the fixture was made."""
    out = {}
    with np.load(os.path.join(FIXTURES, f"{name}.npz")) as data:
        for key in data.files:
            arr = data[key]
            if "@" in key:
                key, dtype = key.split("@")
                arr = arr.view(RAW[dtype])
            out[key] = arr
    return out


def lookup(obj, key):
    for part in key.split("/"):
        if isinstance(obj, (list, tuple)):
            obj = obj[int(part)]
        elif part not in obj and part.lstrip("-").isdigit():
            obj = obj[int(part)]
        else:
            obj = obj[part]
    return obj


def assert_tensor_equal(t, arr):
    assert isinstance(t, ember.Tensor), type(t)
    assert t._data.dtype == arr.dtype, (t._data.dtype, arr.dtype)
    assert t.shape == arr.shape
    if arr.dtype in [np.dtype(d) for d in RAW.values()]:      # compare the bits
        bits = np.dtype(f"u{arr.dtype.itemsize}")
        np.testing.assert_array_equal(t._data.view(bits), arr.view(bits))
    else:
        np.testing.assert_array_equal(t._data, arr)


def checkpoint(payload, records=()):
    """A zip checkpoint (bytes) whose data.pkl is ``payload``, plus extra ``(name, bytes)``."""
    buf = io.BytesIO()
    write_archive(buf, [("data.pkl", payload), *records, ("version", b"3\n")])
    return buf.getvalue()


def pickled(obj):
    return pickle.dumps(obj, protocol=2)
