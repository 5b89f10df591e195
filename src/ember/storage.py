"""``torch.storage``: the storage classes (see ember/_storage.py)."""

from ember._storage import TypedStorage, UntypedStorage  # noqa: F401

__all__ = ["TypedStorage", "UntypedStorage"]
