"""``ember.backends.cudnn``: the cuDNN switches GPU scripts set (``torch.backends.cudnn``).

ember's CUDA backend runs on CuPy, which has no cuDNN: ``is_available()`` is False and
``version()`` is None. ember's convolutions (im2col and a matrix product) and recurrent
layers stand in for cuDNN's, so ``allow_tf32`` (True) governs them as it does cuDNN's: on a
GPU (Ampere and later) their float32 matrix products may use TF32 tensor cores (NOTE [TF32]
in backend/cuda.py; a recurrent layer's input projections are matmuls, outside it); with
``enabled`` False, ``backends.cuda.matmul.allow_tf32`` does instead, as for PyTorch's
convolutions without cuDNN. The other flags are accepted, type-checked and remembered but
change nothing. ``benchmark`` (False): there is one algorithm, nothing to choose or time.
``deterministic`` (False): ember's convolutions are deterministic anyway.
``benchmark_limit`` is None and takes any value, as in PyTorch without cuDNN.
"""

import sys

from ember.backends import _fp32_precision
from ember.backends._flags import Flag, FlagModule, flags_in_block

__all__ = ["is_available", "version", "is_acceptable", "flags"]

_FLAGS = {"enabled": True, "benchmark": False, "deterministic": False, "allow_tf32": True}
benchmark_limit = None
conv = _fp32_precision.Level("cuda.conv")     # conv.fp32_precision, rnn.fp32_precision
rnn = _fp32_precision.Level("cuda.rnn")


def is_available():
    """Whether cuDNN can be used: False, as ember's CUDA backend (CuPy) has none."""
    return False


def version():
    """The cuDNN version: None, as there is no cuDNN."""
    return None


def is_acceptable(tensor):
    """Whether cuDNN would handle ``tensor``: False, as there is no cuDNN."""
    return False


def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False,
          allow_tf32=True):
    """Set the cuDNN flags inside a ``with`` block and restore them after it (note
    PyTorch's defaults: a bare ``flags()`` turns ``enabled`` off). ``benchmark_limit`` is
    ignored without cuDNN, as in PyTorch."""
    return flags_in_block(sys.modules[__name__], enabled=enabled, benchmark=benchmark,
                          deterministic=deterministic, allow_tf32=allow_tf32)


class _CudnnModule(FlagModule):
    enabled = Flag("set_enabled_cudnn")
    benchmark = Flag("set_benchmark_cudnn")
    deterministic = Flag("set_deterministic_cudnn")
    allow_tf32 = Flag("set_allow_tf32_cudnn")
    fp32_precision = property(lambda self: _fp32_precision.get("cuda"),
                              lambda self, value: _fp32_precision.set_precision("cuda", value),
                              doc="cuDNN's fp32_precision (see backends/_fp32_precision.py).")


sys.modules[__name__].__class__ = _CudnnModule
