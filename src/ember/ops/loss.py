"""(stub) filled in by the nn work."""

FUNCTIONAL = {}
