"""Copying a batch into page-locked memory (``DataLoader(pin_memory=True)``)."""

import collections.abc
import copy

from ember._tensor import Tensor

__all__ = ["pin_memory"]


def pin_memory(data):
    """``data`` with every tensor in it replaced by a pinned copy, recursing into mappings,
    named tuples and sequences as PyTorch does (a plain tuple comes back as a list)."""
    if isinstance(data, Tensor):
        return data.pin_memory()
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        pinned = {k: pin_memory(v) for k, v in data.items()}
        try:
            return type(data)(pinned)
        except TypeError:
            return pinned
    if isinstance(data, tuple):
        if hasattr(data, "_fields"):
            return type(data)(*(pin_memory(x) for x in data))
        return [pin_memory(x) for x in data]
    if isinstance(data, collections.abc.MutableSequence):
        out = copy.copy(data)
        for i, x in enumerate(data):
            out[i] = pin_memory(x)
        return out
    if isinstance(data, collections.abc.Sequence):
        try:
            return type(data)([pin_memory(x) for x in data])
        except TypeError:
            return [pin_memory(x) for x in data]
    if hasattr(data, "pin_memory"):             # a custom batch type that pins itself
        return data.pin_memory()
    return data
