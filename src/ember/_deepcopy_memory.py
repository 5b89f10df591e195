"""The memory of a tensor's ``copy.deepcopy``: as PyTorch's, a copy keeps the strides and storage
offset of the tensor it copies, and the copies of tensors sharing memory (in one deepcopy memo)
share the copy of that memory."""
import copy

import numpy as np

from ember._storage_place import _address, _placement, _storage_root

__all__ = ["copied_data"]


def copied_data(t, memo):
    """A tensor (of ``t``'s type, without autograd state) over a copy of ``t``'s memory, laid
    out as ``t``; over the copy of its memory's owner that ``memo`` holds, when there is one."""
    from ember._creation import _rebuild_view
    from ember._tensor import _make
    place = _placement(t) or _dense_placement(t)
    if place is None:
        return _make(t._data.copy(order="K"), type(t))    # (its own layout, as PyTorch's)
    root, offset, strides = place
    return _rebuild_view(type(t), _copied_root(root, memo), offset, strides, t._data.shape,
                         t.dtype, False, True)


def _copied_root(root, memo):
    """The copy in ``memo`` of the tensor owning some memory; a graph's tensor (a detached
    tensor's root) is copied without its history, once per memo."""
    if root.is_leaf:
        return copy.deepcopy(root, memo)
    key = ("ember.storage_root", id(root))
    new = memo.get(key)
    if new is None:
        from ember._tensor import _make
        new = memo[key] = _make(root._data.copy(order="K"))
        memo.setdefault(id(memo), []).append(root)      # (its id stays its own meanwhile)
    return new


def _dense_placement(t):
    """``_placement`` for a CPU tensor viewing a root laid out densely but not row-major (a
    ``channels_last`` one): None when there is none."""
    root = _storage_root(t)
    a, r = t._data, root._data
    if root is t or type(a) is not np.ndarray or type(r) is not np.ndarray or not a.size \
            or any(s < 0 for s in a.strides) or any(s < 0 for s in r.strides) \
            or _address(r.ravel(order="K")) != _address(r):         # (not dense: a copy)
        return None
    offset = _address(a) - _address(r)
    end = offset + sum((n - 1) * s for n, s in zip(a.shape, a.strides)) + a.itemsize
    return (root, offset, a.strides) if 0 <= offset and end <= r.nbytes else None
