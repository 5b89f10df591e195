"""(stub) filled in by the nn work."""

__all__ = []
