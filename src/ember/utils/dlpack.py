"""Tensors shared with other array libraries through DLPack (``torch.utils.dlpack``)."""

from ember._creation import from_dlpack

__all__ = ["from_dlpack", "to_dlpack"]


def to_dlpack(tensor):
    """A DLPack capsule of ``tensor``'s memory, for a library that takes capsules."""
    return tensor.__dlpack__()
