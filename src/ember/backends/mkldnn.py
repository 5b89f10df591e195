"""``ember.backends.mkldnn``: oneDNN's switches (``torch.backends.mkldnn``). ember's CPU
kernels are NumPy's and its BLAS library's, not oneDNN's: ``is_available()`` is False and the flags
are accepted, type-checked and remembered, changing nothing. ``allow_tf32`` is as in a PyTorch
build without Intel GPU support: it reads None, and setting it warns."""

import contextlib
import sys
import warnings

from ember._warn import outside_level
from ember.backends import _fp32_precision
from ember.backends._flags import Flag, FlagModule, check_bool, flags_in_block

__all__ = ["is_available", "flags", "set_flags"]

_FLAGS = {"enabled": True, "deterministic": False, "allow_tf32": True}
matmul = _fp32_precision.Level("mkldnn.matmul")   # and conv, rnn: their fp32_precision
conv = _fp32_precision.Level("mkldnn.conv")
rnn = _fp32_precision.Level("mkldnn.rnn")
_levels = _fp32_precision       # (set_flags' argument takes the module's name)


def is_available():
    """Whether ember runs on oneDNN: never."""
    return False


def set_flags(_enabled=None, _deterministic=None, _allow_tf32=None, _fp32_precision="none"):
    """Set the flags given (None keeps one) and return the previous ``(enabled, deterministic,
    allow_tf32, fp32_precision)``. As in PyTorch, "none" leaves fp32_precision as it is."""
    module = sys.modules[__name__]
    orig = (module.enabled, module.deterministic, None, _levels.get("mkldnn"))
    for name, value in (("enabled", _enabled), ("deterministic", _deterministic),
                        ("allow_tf32", _allow_tf32)):
        if value is not None:
            setattr(module, name, value)
    if _fp32_precision is not None and _fp32_precision != "none":
        module.fp32_precision = _fp32_precision
    return orig


@contextlib.contextmanager
def flags(enabled=False, deterministic=False, allow_tf32=True, fp32_precision="none"):
    """Set the flags inside a ``with`` block and restore them after it (PyTorch's defaults:
    a bare ``flags()`` turns ``enabled`` off)."""
    saved = _levels.get("mkldnn")
    with flags_in_block(sys.modules[__name__], enabled=enabled, deterministic=deterministic,
                        allow_tf32=allow_tf32):
        if fp32_precision != "none":
            sys.modules[__name__].fp32_precision = fp32_precision
        try:
            yield
        finally:
            _levels.set_precision("mkldnn", saved)


class _OneDnnTf32(Flag):
    """``allow_tf32``: oneDNN's TF32 switch serves Intel GPUs only; PyTorch's CPU build keeps
    no value (None) and warns each time a script sets it."""

    def __get__(self, module, owner=None):
        return self if module is None else None

    def __set__(self, module, value):
        check_bool(self.setter, value)
        warnings.warn("TF32 acceleration on top of oneDNN is available for Intel GPUs. The "
                      "current Torch version does not have Intel GPU Support.", UserWarning,
                      stacklevel=outside_level())


class _MkldnnModule(FlagModule):
    enabled = Flag("set_enabled_mkldnn")
    deterministic = Flag("set_deterministic_mkldnn")
    allow_tf32 = _OneDnnTf32("_set_onednn_allow_tf32")
    fp32_precision = property(lambda self: _fp32_precision.get("mkldnn"),
                              lambda self, value: _fp32_precision.set_precision("mkldnn", value),
                              doc="oneDNN's fp32_precision (see backends/_fp32_precision.py).")


sys.modules[__name__].__class__ = _MkldnnModule
