"""The small helpers custom layers import from ``torch.nn.modules.utils``: ``_pair`` and its
kin for int-or-tuple arguments, and ``consume_prefix_in_state_dict_if_present``."""

import collections.abc
from itertools import repeat

__all__ = ["consume_prefix_in_state_dict_if_present"]


def _ntuple(n, name="parse"):
    """A function making an ``n``-tuple of one value, or a tuple of an iterable's values."""
    def parse(x):
        if isinstance(x, collections.abc.Iterable):
            return tuple(x)
        return tuple(repeat(x, n))
    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t, n):
    """Each element of ``t`` repeated ``n`` times, last element first (``F.pad``'s order)."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size, defaults):
    """``out_size`` with each None taken from the matching trailing entry of ``defaults``."""
    if isinstance(out_size, (int, float)) or out_size is None:
        return out_size
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [d if v is None else v for v, d in zip(out_size, defaults[-len(out_size):])]


def consume_prefix_in_state_dict_if_present(state_dict, prefix):
    """Strip ``prefix`` from the keys (and metadata) that start with it, in place: for state
    dicts saved from a ``DataParallel`` or compiled model (``module.``, ``_orig_mod.``)."""
    for key in [k for k in state_dict if k.startswith(prefix)]:
        state_dict[key[len(prefix):]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is None:
        return
    for key in [k for k in metadata if k.startswith(prefix) or k == prefix.rstrip(".")]:
        if key == prefix.rstrip("."):
            metadata[""] = metadata.pop(key)
        else:
            metadata[key[len(prefix):]] = metadata.pop(key)
