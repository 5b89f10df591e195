"""The float32 matmul precision (``torch.set_float32_matmul_precision``).

One setting backs both ``ember.get_float32_matmul_precision()`` and
``ember.backends.cuda.matmul.allow_tf32`` (which is ``precision != "highest"``), as PyTorch
documents. ember accepts every setting and always multiplies float32 matrices in full float32
precision (NumPy, and cuBLAS as CuPy calls it), which each setting permits: "high" and
"medium" allow faster, less precise internal arithmetic but do not require it.
"""

import warnings

__all__ = ["set_float32_matmul_precision", "get_float32_matmul_precision"]

_PRECISIONS = ("highest", "high", "medium")
_STATE = {"precision": "highest"}


def set_float32_matmul_precision(precision):
    """Set the internal precision float32 matrix products may use: "highest", "high" or
    "medium" (accepted; ember computes them in full float32 precision in every case)."""
    if not isinstance(precision, str):
        raise RuntimeError(f"set_float32_matmul_precision expects a str, but got "
                           f"{type(precision).__name__}")
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      f"set_float32_matmul_precision call has no effect.", UserWarning,
                      stacklevel=2)
        return
    _STATE["precision"] = precision


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
