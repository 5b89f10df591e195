"""Where a tensor's elements lie: their address, the tensor owning the memory they share,
and their place in it."""

import weakref

import numpy as np

from ember.backend.meta import MetaArray

__all__ = ["_storage_root", "_placement", "_address", "_row_major_strides",
           "keep_empty_geometry", "empty_geometry", "empty_at", "slice_along",
           "empty_slice_geometry", "born_row_major", "numpy_strides", "over_own_memory",
           "hidden_element"]


def _storage_root(t):
    """The tensor whose memory ``t`` lies in: the base ``t`` views, the tensor it was detached
    from (its root), or ``t`` itself."""
    if t._view is not None:
        view, t = t, t._view[0]
        meta = t._meta
        if meta is not None and "former_roots" in meta:     # the base was set_ elsewhere
            return _former_root(view, _storage_root(t), meta["former_roots"])
    meta = t._meta
    if meta is not None and "storage_root" in meta:
        root = meta["storage_root"]()
        if root is not None:
            former = root._meta
            if former is not None and "former_roots" in former:    # set_ elsewhere since
                return _former_root(t, _storage_root(root), former["former_roots"])
            return root
        if "storage_array" in meta:         # the root is gone, not its memory: stand in
            return _stand_in_root(meta)
    return t


def _former_root(view, root, former):
    """The root of ``view``'s memory when its base was pointed at other memory (``set_``)
    after some views were made: those keep the memory they view, as PyTorch's do; the base's
    present root, or the root it had when the view was made."""
    address = _address(view._data)
    for array_ref, root_ref in (None, None), *reversed(former):
        array = root._data if array_ref is None else array_ref()
        start = -1 if array is None else _address(array)
        if start <= address < start + max(array.nbytes, 1):
            if array_ref is None:
                return root
            was = None if root_ref is None else root_ref()
            if was is None or was._data is not array:
                from ember._tensor import _make
                was = _make(array)      # (the memory, when no tensor owns it now)
            return was
    return root


def _stand_in_root(meta):
    """A tensor over the memory of a detached tensor's collected root, kept in ``meta`` (the
    root's graph may go; its memory, which the detached tensor views, stays)."""
    from ember._tensor import _make
    root = _make(meta.pop("storage_array"))
    meta["storage_root"] = lambda: root
    return root


def _placement(t):
    """(root, byte offset, byte strides) of CPU tensor ``t``'s elements in the contiguous
    memory of the tensor it shares it with; None when ``t`` is its own root or its memory
    cannot be described so."""
    root = _storage_root(t)
    a, r = t._data, root._data
    if root is t or type(a) is not np.ndarray or type(r) is not np.ndarray \
            or not r.flags.c_contiguous or any(s < 0 for s in a.strides):
        return None
    offset = _address(a) - _address(r)
    if not a.size:      # an empty view (placed by empty_at) reaches no element
        return (root, offset, a.strides) if 0 <= offset <= r.nbytes else None
    end = offset + sum((n - 1) * s for n, s in zip(a.shape, a.strides)) + a.itemsize
    return (root, offset, a.strides) if 0 <= offset and end <= r.nbytes else None


def _address(array):
    if type(array) is np.ndarray:
        return array.__array_interface__["data"][0]
    if type(array) is MetaArray:
        return array.offset             # (a view's place; PyTorch's meta memory is at 0)
    return array.data.ptr


def _row_major_strides(shape):
    """PyTorch's strides (in elements) for a contiguous tensor of ``shape``."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def born_row_major(array):
    """``array``, an empty array becoming a tensor's (``_make``); when it is a fresh one (over
    no memory), the same over memory of its own, with PyTorch's row-major strides in place of
    the zero strides NumPy 2 and CuPy give a fresh empty array. Afterwards an empty array's
    zero strides are real, an expanded or ``as_strided`` view's, which its views keep, and a
    view of a fresh one gets PyTorch's strides from the backend (``zeros(0, 3).t()`` has
    strides (1, 3))."""
    if type(array) is MetaArray or _memory_bytes(array):
        return array                    # (a view of some memory: its strides are its own)
    strides = array.strides
    if not any(strides):
        strides = tuple(s * array.itemsize for s in _row_major_strides(array.shape))
    return over_own_memory(array, strides)


def numpy_strides(array, source):
    """``array``, an empty copy or view of NumPy array ``source`` that a tensor takes
    (``from_numpy``, ``tensor``), with ``source``'s strides (in elements), as PyTorch's tensor
    keeps them: NumPy gives a fresh empty array zero strides, which ``_make`` would take for
    any fresh array's (``born_row_major``); a copy loses them."""
    if array.size or not array.ndim:
        return array
    strides = tuple(s // source.itemsize * array.itemsize for s in source.strides)
    if array.strides == strides and (any(strides) or _memory_bytes(array)):
        return array
    return over_own_memory(array, strides)


def _memory_bytes(array):
    """The size in bytes of the memory ``array`` views (its own, or its first base's)."""
    owner = array
    while getattr(owner, "base", None) is not None:
        owner = owner.base
    return getattr(owner, "nbytes", 1)


_HIDDEN = weakref.WeakValueDictionary()     # id -> the element an empty array lies over


def hidden_element(owner):
    """Whether ``owner`` is the memory of one element ``over_own_memory`` gave an empty array
    (not its storage's: ``untyped_storage().nbytes()`` is 0, and so is a saved one's)."""
    return _HIDDEN.get(id(owner)) is owner


def over_own_memory(array, strides):
    """Empty ``array`` over new memory of one element, on its device, with byte ``strides``."""
    from ember._memory_format import restrided
    from ember.backend import XP_BY_ARRAY_TYPE, device_guard, on_device_of
    one = on_device_of(np.empty(1, array.dtype), array)
    _HIDDEN[id(one)] = one
    if type(array) is np.ndarray:
        return restrided(np, one, array.shape, strides)
    with device_guard(array.device.id):     # (where CuPy's stand-in places a view it makes)
        return restrided(XP_BY_ARRAY_TYPE[type(array)], one, array.shape, strides)


def keep_empty_geometry(view, source, key):
    """Record on ``view``, the empty ``source[key]`` (a normalized basic key: ints, slices
    and None), the strides and storage offset PyTorch gives it, which NumPy's empty arrays
    lose (their strides ignore the step, their address is their base's)."""
    if view._meta is None:
        view._meta = {}
    view._meta["empty_geometry"] = empty_slice_geometry(
        source.shape, source.stride(), source.storage_offset(), key)


def empty_slice_geometry(shape, strides, offset, key, itemsize=1):
    """(strides, offset) PyTorch gives the empty slice ``key`` of a (shape, strides, offset)
    geometry: in elements, or in bytes given the ``itemsize``."""
    out, d = [], 0
    for k in key:
        if k is None:                   # PyTorch's unsqueeze stride
            out.append(shape[d] * strides[d] if d < len(shape) else itemsize)
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
    return tuple(out), offset


def slice_along(xp, array, dim, start, stop):
    """``array[..., start:stop]`` along ``dim``; when empty, placed at ``start`` as PyTorch
    places it (NumPy puts an empty slice at the array's first element)."""
    out = array[(slice(None),) * dim + (slice(start, stop),)]
    if out.size or not start:
        return out
    return empty_at(xp, out, array, start * array.strides[dim], array.strides)


class _Interface:
    """An array interface over another array's memory (what ``as_strided`` builds on)."""

    def __init__(self, interface, base):
        self.__array_interface__ = interface
        self.base = base


def empty_at(xp, empty, source, offset, strides):
    """``empty``, an empty view of NumPy array ``source``, moved to byte ``offset`` from
    ``source``'s first element with byte ``strides``: so that views and copies of its
    geometry (detach, transpose, pickle, as_strided) see PyTorch's. Other backends' arrays
    are returned unchanged (their tensors keep the geometry recorded by
    keep_empty_geometry)."""
    if xp is not np or type(source) is not np.ndarray:
        return empty
    bits = source
    if source.dtype.type.__module__ != "numpy":     # ml_dtypes: the interface loses them
        bits = source.view(f"u{source.itemsize}")
    interface = dict(bits.__array_interface__, shape=empty.shape, strides=tuple(strides),
                     data=(_address(source) + offset, not source.flags.writeable))
    out = np.asarray(_Interface(interface, source))
    return out if bits is source else out.view(source.dtype)


def empty_geometry(t):
    """(strides, storage offset) recorded for empty view ``t``, or None."""
    return None if t._meta is None else t._meta.get("empty_geometry")
