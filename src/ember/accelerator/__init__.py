"""ember.accelerator: the current accelerator, whatever its kind (``torch.accelerator``).

ember's one accelerator is CUDA: these functions act on ``ember.cuda`` when a GPU can be
used. Without one, ``is_available`` is False, ``device_count`` 0 and ``current_accelerator``
None, and the rest raise, as PyTorch's do on a machine without an accelerator. Code written
against this module picks its device with
``torch.accelerator.current_accelerator(check_available=True) or "cpu"`` and runs here.
"""

import warnings

from ember._device import device as _device
from ember.accelerator.memory import (empty_cache, empty_host_cache, get_memory_info,
                                      max_memory_allocated, max_memory_reserved,
                                      memory_allocated, memory_reserved, memory_stats,
                                      reset_accumulated_memory_stats, reset_peak_memory_stats)
from ember.accelerator._current import index_of, require

__all__ = ["current_accelerator", "current_device_idx", "current_device_index",
           "current_stream", "device_count", "device_index", "empty_cache", "empty_host_cache",
           "get_device_capability", "get_memory_info", "is_available", "max_memory_allocated",
           "max_memory_reserved", "memory_allocated", "memory_reserved", "memory_stats",
           "reset_accumulated_memory_stats", "reset_peak_memory_stats", "set_device_idx",
           "set_device_index", "set_stream", "synchronize"]


def _cuda():
    from ember import cuda
    return cuda


def device_count():
    """The number of accelerator devices (0 without one)."""
    return _cuda().device_count()


def is_available():
    """Whether an accelerator can be used now."""
    return _cuda().is_available()


def current_accelerator(check_available=False):
    """The accelerator's device type as a device without an index (``device("cuda")``), or
    None without one. ``check_available`` is accepted for PyTorch's signature: ember counts
    CUDA as its accelerator only when a GPU can be used, so the check is always made."""
    return _device("cuda") if is_available() else None


def current_device_index():
    """The index of the accelerator's current device."""
    require()
    return _cuda().current_device()


def set_device_index(device, /):
    """Make ``device`` (an index, or a device of the accelerator's type) the current one; a
    negative index does nothing."""
    index = index_of(device)
    if index is not None and index >= 0:
        _cuda().set_device(index)


def current_device_idx():
    """Deprecated name of ``current_device_index``."""
    warnings.warn("current_device_idx() is deprecated. Use current_device_index() instead.",
                  FutureWarning, stacklevel=2)
    return current_device_index()


def set_device_idx(device, /):
    """Deprecated name of ``set_device_index``."""
    warnings.warn("set_device_idx() is deprecated. Use set_device_index() instead.",
                  FutureWarning, stacklevel=2)
    set_device_index(device)


class device_index:
    """``with ember.accelerator.device_index(1):`` makes device 1 current inside the block
    and restores the previous one after; None switches nothing."""

    def __init__(self, device, /):
        self.idx = device
        self._switch = None

    def __enter__(self):
        if self.idx is not None:
            require()
            self._switch = _cuda().device(self.idx)
            self._switch.__enter__()

    def __exit__(self, *exc):
        if self._switch is not None:
            self._switch.__exit__(*exc)
        self._switch = None


def current_stream(device=None, /):
    """The stream the accelerator's work is queued on now, on ``device`` (the current one
    by default)."""
    return _cuda().current_stream(index_of(device))


def set_stream(stream):
    """Make ``stream`` the current stream of its device."""
    require()
    _cuda().set_stream(stream)


def synchronize(device=None, /):
    """Wait until all queued work on ``device`` (the current one by default) has finished."""
    _cuda().synchronize(index_of(device))


def get_device_capability(device=None, /):
    """What ``device`` (the current one by default) can hold, as a dict; its key
    ``"supported_dtypes"`` is the set of dtypes its tensors can have."""
    from ember import backend
    index = index_of(device)
    return {"supported_dtypes": backend.cuda_backend().allocatable_dtypes(index)}
