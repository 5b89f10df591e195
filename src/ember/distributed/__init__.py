"""``ember.distributed``: not built yet, so it answers as a PyTorch build without distributed
support does: ``is_available()`` is False and nothing else is defined. Training scripts
guard their distributed code with it (``if dist.is_available() and dist.is_initialized()``)."""

__all__ = ["is_available"]


def is_available():
    """Whether the distributed package is available: not in this build of ember."""
    return False
