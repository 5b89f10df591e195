"""``s[index]`` of a sparse tensor: integers, full slices (``:``), ``...`` and ``None``, run as
``select`` and ``unsqueeze`` on the parts (what PyTorch supports on sparse tensors)."""

import numpy as np

from ember._tensor import Tensor

__all__ = ["getitem"]

_FULL = slice(None)


def getitem(s, index):
    """``s[index]`` where ``index`` is built of ints, ``:``, ``...`` and ``None``."""
    from ember.sparse._ops import _unsqueeze, select
    items = _expanded(index if isinstance(index, tuple) else (index,), s.ndim)
    out, dim, selected = s, 0, 0
    for item in items:
        if isinstance(item, _Unsupported) or item is None and _is_compressed(out):
            _refuse(out, item)
        if item is None:
            out = _unsqueeze(out, dim) if out.is_sparse else out.unsqueeze(dim)
            dim += 1
        elif _is_full(item):
            dim += 1
        else:
            size = out.shape[dim]
            if not -size <= item < size:
                raise IndexError(f"index {item} is out of bounds for dimension "
                                 f"{dim + selected} with size {size}")
            out = select(out, dim, item) if out.is_sparse else out.select(dim, item)
            selected += 1           # (PyTorch numbers dims as they were before selecting)
    return out


def _expanded(items, ndim):
    """``items`` with ints as Python ints and ``...`` spelled out as full slices."""
    items = [_as_item(item) for item in items]
    consumed = sum(1 for item in items if item is not None and item is not Ellipsis)
    if consumed > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at:at + 1] = [_FULL] * (ndim - consumed)
    return items


def _as_item(item):
    if type(item) is int or item is None or item is Ellipsis or _is_full(item):
        return item
    if isinstance(item, np.integer):
        return int(item)
    if isinstance(item, Tensor) and item.ndim == 0 and not item.is_floating_point() \
            and not item.is_sparse and item.dtype.name != "bool":
        return int(item)
    if isinstance(item, float):
        raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or "
                         "byte Variables are valid indices (got float)")
    return _Unsupported(item)


class _Unsupported:
    """An index PyTorch's sparse kernels refuse (a partial slice, a sequence, a tensor)."""

    __slots__ = ("item",)

    def __init__(self, item):
        self.item = item


def _is_compressed(t):
    from ember.sparse._tensor import SparseTensor
    return isinstance(t, SparseTensor) and t._crow is not None


def _refuse(t, item):
    """PyTorch's error for indexing ``t`` with ``item`` (an _Unsupported or None)."""
    from ember.sparse import _layouts as L
    if _is_compressed(t):               # its indexing reads the strides first
        kind = L.short_name(t.layout)[len("Sparse"):].upper()
        raise RuntimeError(f"Sparse {kind} tensors do not have strides")
    kernel = "as_strided" if isinstance(item.item, slice) else "index.Tensor"
    raise NotImplementedError(f"Could not run 'aten::{kernel}' with arguments from the "
                              f"'{'SparseCUDA' if t.is_cuda else 'SparseCPU'}' backend.")


def _is_full(item):
    return isinstance(item, slice) and item == _FULL
