"""ember.cpu: the CPU as a device module (``torch.cpu``), for code written per device.

``ember.cpu.amp`` holds PyTorch's deprecated autocast aliases; it loads on first use.
"""

import importlib

__all__ = ["is_available", "device_count", "current_device", "synchronize"]


def is_available():
    """Whether the CPU can be used: always True."""
    return True


def device_count():
    """The number of CPU devices: 1."""
    return 1


def current_device():
    """The current CPU device's name: "cpu"."""
    return "cpu"


def synchronize(device=None):
    """Wait for queued CPU work: there is none (ember's CPU ops run eagerly)."""


def __getattr__(name):
    if name == "amp":
        return importlib.import_module("ember.cpu.amp")
    raise AttributeError(f"module 'ember.cpu' has no attribute '{name}'")
