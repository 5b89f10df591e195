"""PyTorch's older names for autocast's state, kept for code that still calls them: the
per-device getters and setters (deprecated, warning as PyTorch's do), the cast cache's
switches and the region count (see _cache.py)."""

import warnings

from ember.amp._cache import clear as _clear_cache
from ember.amp._state import STATE
from ember.amp.autocast_mode import (get_autocast_dtype, is_autocast_enabled,
                                     set_autocast_dtype, set_autocast_enabled)

__all__ = ["is_autocast_cpu_enabled", "get_autocast_cpu_dtype", "get_autocast_gpu_dtype",
           "set_autocast_cpu_enabled", "set_autocast_cpu_dtype", "set_autocast_gpu_dtype",
           "is_autocast_cache_enabled", "set_autocast_cache_enabled", "clear_autocast_cache",
           "autocast_increment_nesting", "autocast_decrement_nesting"]


def _deprecated(old, new, device, fn):
    """``fn(device, *args)`` under the old name, warning that ``new`` replaces it."""
    def call(*args):
        warnings.warn(f"torch.{old} is deprecated. Please use torch.{new} instead.",
                      DeprecationWarning, stacklevel=2)
        return fn(device, *args)
    call.__name__ = call.__qualname__ = old.split("(")[0]
    call.__doc__ = f"Deprecated: ``ember.{new}``."
    return call


is_autocast_cpu_enabled = _deprecated("is_autocast_cpu_enabled()",
                                      "is_autocast_enabled('cpu')", "cpu", is_autocast_enabled)
get_autocast_cpu_dtype = _deprecated("get_autocast_cpu_dtype()", "get_autocast_dtype('cpu')",
                                     "cpu", get_autocast_dtype)
get_autocast_gpu_dtype = _deprecated("get_autocast_gpu_dtype()", "get_autocast_dtype('cuda')",
                                     "cuda", get_autocast_dtype)
set_autocast_cpu_enabled = _deprecated("set_autocast_cpu_enabled(enabled)",
                                       "set_autocast_enabled('cpu', enabled)", "cpu",
                                       set_autocast_enabled)
set_autocast_cpu_dtype = _deprecated("set_autocast_cpu_dtype(dtype)",
                                     "set_autocast_dtype('cpu', dtype)", "cpu",
                                     set_autocast_dtype)
set_autocast_gpu_dtype = _deprecated("set_autocast_gpu_dtype(dtype)",
                                     "set_autocast_dtype('cuda', dtype)", "cuda",
                                     set_autocast_dtype)

def is_autocast_cache_enabled():
    """Whether autocast caches the casts of weights (see ``clear_autocast_cache``)."""
    return STATE.cache_enabled


def set_autocast_cache_enabled(enabled):
    """Allow or forbid autocast's cast cache (casts already cached stay until cleared)."""
    if type(enabled) is not bool:
        raise TypeError(f"enabled must be a bool (got {type(enabled).__name__})")
    STATE.cache_enabled = enabled


def clear_autocast_cache():
    """Drop autocast's cached casts of this thread (the outermost region's exit does)."""
    _clear_cache()


def autocast_increment_nesting():
    """Count one more autocast region entered in this thread; returns the new depth."""
    STATE.nesting += 1
    return STATE.nesting


def autocast_decrement_nesting():
    """Count one autocast region left in this thread; returns the new depth (the cache
    stays: ``autocast`` clears it when this reaches 0)."""
    STATE.nesting -= 1
    return STATE.nesting
