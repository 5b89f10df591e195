"""The float32 matmul precision (``torch.set_float32_matmul_precision``).

One setting backs both ``ember.get_float32_matmul_precision()`` and
``ember.backends.cuda.matmul.allow_tf32`` (which is ``precision != "highest"``), as PyTorch
documents. On a GPU (Ampere and later), "high" and "medium" let float32 matrix products use
TF32 tensor cores (NOTE [TF32] in backend/cuda.py); "highest", the default, keeps them in full
float32 precision. The CPU computes in full precision in every case, which each setting
permits.
"""

import warnings

from ember import backend
from ember.backends import _fp32_precision

__all__ = ["set_float32_matmul_precision", "get_float32_matmul_precision"]

_PRECISIONS = ("highest", "high", "medium")
# the fp32_precision of oneDNN's matmuls each precision stands for
_MKLDNN_MATMUL = {"highest": "ieee", "high": "tf32", "medium": "bf16"}
_STATE = {"precision": "highest"}


def set_float32_matmul_precision(precision):
    """Set the internal precision float32 matrix products may use: "highest" (full
    precision), "high" or "medium" (TF32 tensor cores on a GPU)."""
    if not isinstance(precision, str):
        raise RuntimeError(f"set_float32_matmul_precision expects a str, but got "
                           f"{type(precision).__name__}")
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      f"set_float32_matmul_precision call has no effect.", UserWarning,
                      stacklevel=2)
        return
    _STATE["precision"] = precision
    _fp32_precision.note_legacy("cuda.matmul", "ieee" if precision == "highest" else "tf32")
    _fp32_precision.note_legacy("mkldnn.matmul", _MKLDNN_MATMUL[precision])
    backend.matmul_precision_changed(allow_tf32())


def get_float32_matmul_precision():
    """The float32 matmul precision set last ("highest" by default)."""
    return _STATE["precision"]


def allow_tf32():
    """Whether TF32 is permitted for float32 matmuls (any precision but "highest")."""
    return _STATE["precision"] != "highest"


def set_allow_tf32(allowed):
    """``matmul.allow_tf32 = allowed``: "high" when allowed, "highest" when not."""
    if allowed != allow_tf32():
        _STATE["precision"] = "high" if allowed else "highest"
        backend.matmul_precision_changed(allowed)
    _fp32_precision.note_legacy("cuda.matmul", "tf32" if allowed else "ieee")
