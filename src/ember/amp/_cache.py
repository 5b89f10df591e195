"""Autocast's cast cache: the low-precision copy of a weight, made once per region.

As PyTorch's: while the cache is enabled, the cast of a float32 leaf tensor that requires grad
(a weight; not a view) to the autocast dtype is kept, keyed by the tensor itself, and every
later cast of that tensor returns the same copy (one ToCopyBackward0 node, one tensor), even
in a nested region of another dtype, and even after the weight is modified in place. The copy
is made with grad mode on, so one made under ``no_grad`` still leads back to the weight; none
is cached in inference mode. The outermost autocast region drops the cache when it exits,
and so does ``clear_autocast_cache()``.
"""

from ember import _dtype as D
from ember.amp._state import STATE
from ember.autograd.grad_mode import STATE as _GRAD
from ember.autograd.grad_mode import restore_grad_mode, swap_grad_mode

__all__ = ["cast_to_lower", "cast_weight", "clear"]


def cast_to_lower(x, dtype):
    """``x.to(dtype)`` (``dtype`` autocast's lower-precision one), through the cache when
    ``x`` is a weight the cache keeps."""
    if (x._requires_grad and x._grad_fn is None and x.dtype is D.float32 and x._view is None
            and STATE.cache_enabled and not _GRAD.inference):
        casts = STATE.casts
        hit = casts.get(id(x))
        if hit is not None and hit[0] is x:
            return hit[1]
        prev = swap_grad_mode(True)
        try:
            cast = x.to(dtype)
        finally:
            restore_grad_mode(prev)
        casts[id(x)] = (x, cast)        # (the weight held, so its id is not reused)
        return cast
    return x.to(dtype)


def clear():
    """Drop every cached cast of this thread."""
    STATE.casts.clear()


def cast_weight(w):
    """``w`` as autocast's matrix products take it: its (cached) copy in the autocast dtype
    while autocast is on for its device, else ``w`` itself. For compositions that transpose a
    weight before their product: PyTorch's ``linear`` casts the weight, then transposes it,
    so the cast is of the weight itself and the cache keeps it."""
    enabled = STATE.enabled
    if not enabled or not enabled.get(w.device.type):
        return w
    dtype = STATE.dtype.get(w.device.type)
    if dtype is None:
        from ember.amp.autocast_mode import get_autocast_dtype
        dtype = get_autocast_dtype(w.device.type)
    if w.dtype.is_floating_point and w.dtype is not D.float64 and w.dtype is not dtype:
        return cast_to_lower(w, dtype)
    return w
