"""Autocast's per-thread state, read by the dispatcher and the autograd engine."""

import threading

__all__ = ["STATE", "suspended"]


class _State(threading.local):
    def __init__(self):
        self.enabled = {}           # device type -> True while autocast is on for it
        self.dtype = {}             # device type -> the lower-precision dtype in use
        self.nesting = 0            # autocast regions entered and not yet left
        self.cache_enabled = True   # the cast cache's switch
        self.casts = {}             # id(weight) -> (weight, its cached cast): see _cache.py


STATE = _State()


class suspended:
    """A context with autocast off for ``device_types`` (all of them by default): the inner
    ops of a composition autocast already cast for run in it, and so do derivatives that
    stand for a backward kernel autocast does not list (backward passes themselves run
    under the caller's autocast state, as PyTorch's do)."""

    __slots__ = ("_device_types", "_prev")

    def __init__(self, device_types=None):
        self._device_types = device_types

    def __enter__(self):
        self._prev = STATE.enabled
        if self._device_types is None:
            STATE.enabled = {}
        else:
            STATE.enabled = {d: on for d, on in self._prev.items()
                             if d not in self._device_types}

    def __exit__(self, *exc):
        STATE.enabled = self._prev
