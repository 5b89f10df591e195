"""``ember.backends.mps``: Apple's Metal backend (``torch.backends.mps``), which ember does
not have; the queries let device-picking code fall through to "cpu"."""

__all__ = ["is_available", "is_built"]


def is_available():
    """Whether an MPS device can be used: always False in ember."""
    return False


def is_built():
    """Whether ember was built with MPS support: always False."""
    return False
