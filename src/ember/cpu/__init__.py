"""ember.cpu: the CPU as a device module (``torch.cpu``), for code written per device.

``ember.cpu.amp`` holds PyTorch's deprecated autocast aliases; it loads on first use.
"""

import importlib

__all__ = ["is_available", "device_count", "current_device", "set_device", "is_initialized",
           "synchronize", "Stream", "StreamContext", "stream", "current_stream"]


def is_available():
    """Whether the CPU can be used: always True."""
    return True


def device_count():
    """The number of CPU devices: 1."""
    return 1


def current_device():
    """The current CPU device's name: "cpu"."""
    return "cpu"


def set_device(device):
    """Select the CPU device: there is one, so nothing changes."""


def is_initialized():
    """Whether the CPU device is ready: always."""
    return True


def synchronize(device=None):
    """Wait for queued CPU work: there is none (ember's CPU ops run eagerly)."""


class Stream:
    """The CPU's stream (``torch.cpu.Stream``): ops run eagerly, in order, so it never has
    work to wait for."""

    def __init__(self, priority=-1):
        pass

    def wait_stream(self, stream):
        """Wait for ``stream``'s queued work: there is none."""

    def wait_event(self, event):
        """Wait for ``event``: it is done."""

    def record_event(self):
        """Record an event on this stream: CPU events record nothing."""


_CURRENT = [Stream()]


class StreamContext:
    """Make ``stream`` current in the block (the CPU's streams all run eagerly)."""

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        _CURRENT.append(self.stream or _CURRENT[-1])
        return self.stream

    def __exit__(self, *exc):
        _CURRENT.pop()


def stream(stream):
    """``with ember.cpu.stream(s):`` makes ``s`` current inside the block."""
    return StreamContext(stream)


def current_stream(device=None):
    """The CPU stream current now."""
    return _CURRENT[-1]


def __getattr__(name):
    if name == "amp":
        return importlib.import_module("ember.cpu.amp")
    raise AttributeError(f"module 'ember.cpu' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | {"amp"})     # amp is imported on first use
