"""Autocast's per-thread state, read by the dispatcher and the autograd engine."""

import threading

__all__ = ["STATE", "suspended"]


class _State(threading.local):
    def __init__(self):
        self.enabled = {}           # device type -> True while autocast is on for it
        self.dtype = {}             # device type -> the lower-precision dtype in use


STATE = _State()


class suspended:
    """A context with autocast off for every device type (backward passes run in it)."""

    __slots__ = ("_prev",)

    def __enter__(self):
        self._prev = STATE.enabled
        STATE.enabled = {}

    def __exit__(self, *exc):
        STATE.enabled = self._prev
