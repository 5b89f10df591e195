"""Kernels for ops that read or write along one dim at positions an index tensor names (gather,
scatter and their kin): backend arrays in and out, no autograd.

NOTE [Flat scatter]
Writes go through a 1-D view of a C-contiguous result at flat positions computed once per
call: ``ufunc.at`` with flat indices is an order of magnitude faster than with a tuple of
index arrays, and faster than ``bincount`` for every size ratio between index and result.

As PyTorch's CPU kernels do, the scatter ops accumulate 16-bit floats in float32 and round
once (``wide``), while index_add and put round after every step (NumPy computes a float16 or
bfloat16 step in float32 and rounds it).
"""

import numpy as np

__all__ = ["at_least_1d", "check_index_dtype", "check_bounds", "flat_positions", "region",
           "take_along", "wide", "scatter_into", "REDUCERS"]

_INDEX_DTYPES = (np.dtype(np.int64), np.dtype(np.int32))
_WIDEN = {"float16": np.dtype(np.float32), "bfloat16": np.dtype(np.float32)}

# scatter reductions: the ufunc that combines, applied with ``ufunc.at``
REDUCERS = {"sum": np.add, "mean": np.add, "add": np.add, "prod": np.multiply,
            "multiply": np.multiply, "amax": np.maximum, "amin": np.minimum}


def at_least_1d(a):
    """``a`` with a 0-dim array seen as shape (1,), as PyTorch's scatter/gather checks do."""
    return a.reshape(1) if a.ndim == 0 else a


def check_index_dtype(index, name):
    """PyTorch's check that a gather/scatter index holds int32 or int64."""
    if index.dtype not in _INDEX_DTYPES:
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index")


def check_bounds(index, size, dim):
    """Raise PyTorch's RuntimeError when ``index`` has an entry outside ``[0, size)``."""
    if index.size and (index.min() < 0 or index.max() >= size):
        flat = index.reshape(-1)
        bad = int(flat[(flat < 0) | (flat >= size)][0])
        raise RuntimeError(f"index {bad} is out of bounds for dimension {dim} with size {size}")


def _c_strides(shape):
    strides, step = [], 1
    for s in reversed(shape):
        strides.append(step)
        step *= s
    return strides[::-1]


def flat_positions(xp, index, shape, dim):
    """Flat positions in a C-contiguous array of ``shape`` of the elements ``index`` names
    along ``dim`` (every other coordinate is the element's own): a 1-D int64 array."""
    strides = _c_strides(shape)
    flat = index.astype(np.int64, copy=False) * strides[dim]
    ndim = index.ndim
    for d, n in enumerate(index.shape):
        if d != dim and n > 1:
            step = strides[d]
            flat = flat + xp.arange(0, n * step, step, dtype=np.int64).reshape(
                [n if k == d else 1 for k in range(ndim)])
    return flat.reshape(-1)


def region(a, shape):
    """The leading ``shape`` corner of ``a`` (a view): the part of src a scatter reads."""
    if a.shape == tuple(shape):
        return a
    return a[tuple(slice(0, s) for s in shape)]


def take_along(xp, x, index, dim):
    """``x``'s elements at ``index`` along ``dim`` (checked: index fits inside ``x``)."""
    if x.flags.c_contiguous:
        return x.reshape(-1)[flat_positions(xp, index, x.shape, dim)].reshape(index.shape)
    corner = list(index.shape)
    corner[dim] = x.shape[dim]
    return xp.take_along_axis(region(x, corner), index, axis=dim)


def wide(a):
    """``a`` in the dtype to accumulate in: 16-bit floats in float32 (a copy)."""
    to = _WIDEN.get(a.dtype.name)
    return a if to is None else a.astype(to)


def scatter_into(xp, out, index, values, dim, reduce=None):
    """Write (``reduce`` None) or combine ``values`` into ``out`` (C-contiguous, written in
    place) at ``index`` along ``dim``; ``values`` has index's shape or is a 0-d array."""
    flat = flat_positions(xp, index, out.shape, dim)
    if values.ndim:
        values = values.reshape(-1)
    if reduce is None:
        out.reshape(-1)[flat] = values
    else:
        REDUCERS[reduce].at(out.reshape(-1), flat, values)
    return flat
