"""``ember.backends.mkldnn``: oneDNN's switches (``torch.backends.mkldnn``). ember's CPU
kernels are NumPy's and its BLAS library's, not oneDNN's: ``is_available()`` is False and the flags
are accepted, type-checked and remembered, changing nothing."""

import sys

from ember.backends import _fp32_precision
from ember.backends._flags import Flag, FlagModule, flags_in_block

__all__ = ["is_available", "flags"]

_FLAGS = {"enabled": True, "deterministic": False, "allow_tf32": True}
matmul = _fp32_precision.Level("mkldnn.matmul")   # and conv, rnn: their fp32_precision
conv = _fp32_precision.Level("mkldnn.conv")
rnn = _fp32_precision.Level("mkldnn.rnn")


def is_available():
    """Whether ember runs on oneDNN: never."""
    return False


def flags(enabled=False, deterministic=False, allow_tf32=True):
    """Set the flags inside a ``with`` block and restore them after it (PyTorch's defaults:
    a bare ``flags()`` turns ``enabled`` off)."""
    return flags_in_block(sys.modules[__name__], enabled=enabled, deterministic=deterministic,
                          allow_tf32=allow_tf32)


class _MkldnnModule(FlagModule):
    enabled = Flag("set_enabled_mkldnn")
    deterministic = Flag("set_deterministic_mkldnn")
    allow_tf32 = Flag("set_allow_tf32_mkldnn")
    fp32_precision = property(lambda self: _fp32_precision.get("mkldnn"),
                              lambda self, value: _fp32_precision.set_precision("mkldnn", value),
                              doc="oneDNN's fp32_precision (see backends/_fp32_precision.py).")


sys.modules[__name__].__class__ = _MkldnnModule
