"""Where a tensor's elements lie: their address, the tensor owning the memory they share,
and their place in it."""

import numpy as np

from ember.backend.meta import MetaArray

__all__ = ["_storage_root", "_placement", "_address", "_row_major_strides",
           "keep_empty_geometry", "empty_geometry"]


def _storage_root(t):
    """The tensor whose memory ``t`` lies in: the base ``t`` views, the tensor it was detached
    from (its root), or ``t`` itself."""
    if t._view is not None:
        t = t._view[0]
    meta = t._meta
    if meta is not None and "storage_root" in meta:
        root = meta["storage_root"]()
        if root is not None:
            return root
    return t


def _placement(t):
    """(root, byte offset, byte strides) of CPU tensor ``t``'s elements in the contiguous
    memory of the tensor it shares it with; None when ``t`` is its own root or its memory
    cannot be described so."""
    root = _storage_root(t)
    a, r = t._data, root._data
    if root is t or type(a) is not np.ndarray or type(r) is not np.ndarray or not a.size \
            or not r.flags.c_contiguous or any(s < 0 for s in a.strides):
        return None
    offset = _address(a) - _address(r)
    end = offset + sum((n - 1) * s for n, s in zip(a.shape, a.strides)) + a.itemsize
    return (root, offset, a.strides) if 0 <= offset and end <= r.nbytes else None


def _address(array):
    if type(array) is np.ndarray:
        return array.__array_interface__["data"][0]
    if type(array) is MetaArray:
        return 0
    return array.data.ptr


def _row_major_strides(shape):
    """PyTorch's strides (in elements) for a contiguous tensor of ``shape``."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def keep_empty_geometry(view, source, key):
    """Record on ``view``, the empty ``source[key]`` (a normalized basic key: ints, slices
    and None), the strides and storage offset PyTorch gives it, which NumPy's empty arrays
    lose (their strides ignore the step, their address is their base's)."""
    shape, strides, offset = source.shape, source.stride(), source.storage_offset()
    out, d = [], 0
    for k in key:
        if k is None:                   # PyTorch's unsqueeze stride
            out.append(shape[d] * strides[d] if d < len(shape) else 1)
            continue
        size, stride = shape[d], strides[d]
        d += 1
        if type(k) is int:
            offset += (k + size if k < 0 else k) * stride
        else:                           # a slice's start is clamped into [0, size]
            start, _, step = k.indices(size)
            offset += start * stride
            out.append(stride * step)
    out.extend(strides[d:])
    if view._meta is None:
        view._meta = {}
    view._meta["empty_geometry"] = (tuple(out), offset)


def empty_geometry(t):
    """(strides, storage offset) recorded for empty view ``t``, or None."""
    return None if t._meta is None else t._meta.get("empty_geometry")
