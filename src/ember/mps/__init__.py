"""ember.mps: Apple's Metal GPUs (``torch.mps``), which ember does not run on: code that asks
whether they are there is told no, as PyTorch builds without them tell it."""

__all__ = ["is_available", "device_count"]


def is_available():
    """Whether an mps device can be used: never in ember."""
    return False


def device_count():
    """The number of mps devices: 0."""
    return 0
