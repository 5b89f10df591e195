"""The queries of a device module for a kind of device ember does not run on (``ember.mps``,
``ember.xpu``): code that asks whether one is there is told no, as PyTorch builds without
that device tell it."""

__all__ = ["is_available", "device_count"]


def is_available():
    """Whether a device of this kind can be used: never in ember."""
    return False


def device_count():
    """The number of devices of this kind: 0."""
    return 0
