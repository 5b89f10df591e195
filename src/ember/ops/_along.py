"""Kernels for ops that read or write along one dim at positions an index tensor names (gather,
scatter and their kin): backend arrays in and out, no autograd.

NOTE [Flat scatter]
Writes go through a 1-D view of a C-contiguous result at flat positions computed once per
call: ``ufunc.at`` with flat indices is an order of magnitude faster than with a tuple of
index arrays, and faster than ``bincount`` for every size ratio between index and result.

As PyTorch's CPU kernels do, the scatter ops accumulate 16-bit floats in float32 and round
once (``wide``), while put and index_add (except along the first or last dim of an N-d
tensor) round after every step (NumPy computes a float16 or bfloat16 step in float32 and
rounds it).
"""

import functools
import math

import numpy as np

from ember import _dtype as D
from ember.backend import combine_at, device_assert

__all__ = ["at_least_1d", "check_index_dtype", "check_bounds", "check_range", "first_outside",
           "flat_positions", "region", "take_along", "wide", "scatter_into", "line_of", "REDUCERS"]

_INDEX_DTYPES = (np.dtype(np.int64), np.dtype(np.int32))
_UNSIGNED = {8: np.dtype(np.uint64), 4: np.dtype(np.uint32)}
_MAX = np.maximum.reduce        # (a NumPy array's .max() goes through a Python wrapper)
_WIDEN = {D.float16.np: np.dtype(np.float32), D.bfloat16.np: np.dtype(np.float32)}

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
    """PyTorch's RuntimeError when ``index`` has an entry outside ``[0, size)`` (raised as
    ``check_range`` raises)."""
    check_range(index, 0, size, lambda bad: RuntimeError(
        f"index {bad} is out of bounds for dimension {dim} with size {size}"))


def check_range(index, lo, hi, error):
    """Check that every entry of ``index`` lies in ``[lo, hi)``; ``error(first entry
    outside)`` is the exception otherwise, raised at once on the CPU and at the next wait
    for the device on a GPU (NOTE [Deferred device checks] in backend/cuda.py)."""
    if not index.size:
        return
    unsigned = _UNSIGNED.get(index.dtype.itemsize) if lo == 0 else None
    if unsigned is not None:    # one pass: seen as unsigned, negative entries are huge
        seen = index.view(unsigned)
        failed = (_MAX(seen, axis=None) if type(seen) is np.ndarray else seen.max()) >= hi
    else:
        failed = (index.min() < lo) | (index.max() >= hi)
    device_assert(failed, lambda: error(first_outside(index, lo, hi)))


def first_outside(index, lo, hi):
    """The first entry of ``index`` outside ``[lo, hi)`` (there must be one)."""
    flat = index.reshape(-1)
    return int(flat[(flat < lo) | (flat >= hi)][0])


def _offsets(xp, index_shape, shape, dim):
    """(stride of ``dim``, the flat offset of each position from its other coordinates) in a
    C-contiguous array of ``shape``; the offsets are 1 along ``dim`` and broadcast."""
    strides, step = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = step
        step *= shape[d]
    offsets = None
    ndim = len(index_shape)
    for d, n in enumerate(index_shape):
        if d != dim and n > 1:
            # (a stride is 0 in an empty array: no arange with that step)
            term = (xp.arange(n, dtype=np.int64) * strides[d]).reshape(
                [n if k == d else 1 for k in range(ndim)])
            offsets = term if offsets is None else offsets + term
    return strides[dim], offsets


_cached_offsets = functools.lru_cache(maxsize=256)(_offsets)
_CACHED = 1 << 14           # index sizes whose offsets are cached (at most 128 KiB each)


def _compact(index, dim):
    """``index`` with every broadcast (stride 0) dim but ``dim`` cut to size 1: a view."""
    if 0 not in index.strides:
        return index
    return index[tuple(slice(0, 1) if d != dim and n > 1 and not st else slice(None)
                       for d, (st, n) in enumerate(zip(index.strides, index.shape)))]


def flat_positions(xp, index, shape, dim, full=None):
    """Flat positions in a C-contiguous array of ``shape`` of the elements ``index`` names
    along ``dim`` (every other coordinate is the element's own): a 1-D int64 array.
    ``full``: the shape ``index`` broadcasts to, when it is not its own."""
    full = index.shape if full is None else tuple(full)
    if len(full) == 1:
        return index.reshape(-1).astype(np.int64, copy=False)
    offsets = _cached_offsets if math.prod(full) <= _CACHED else _offsets
    stride, base = offsets(xp, full, tuple(shape), dim)
    # an expanded index (embedding lookups, message passing) is scaled before it is broadcast
    flat = _compact(index, dim).astype(np.int64, copy=False) * stride
    if base is not None:
        flat = flat + base
    return xp.broadcast_to(flat, full).reshape(-1) if flat.shape != full else flat.reshape(-1)


def line_of(index, dim):
    """The 1-D index along ``dim`` when ``index`` repeats it across every other dim (an
    expanded index), else None."""
    if 0 not in index.strides or index.ndim < 2 or any(st and n > 1 for d, (st, n) in
                             enumerate(zip(index.strides, index.shape)) if d != dim):
        return None
    return index[tuple(slice(None) if d == dim else 0 for d in range(index.ndim))]


def region(a, shape):
    """The leading ``shape`` corner of ``a`` (a view): the part of src a scatter reads."""
    if a.shape == tuple(shape):
        return a
    return a[tuple(slice(0, s) for s in shape)]


def take_along(xp, x, index, dim):
    """``x``'s elements at ``index`` along ``dim`` (checked: index fits inside ``x``)."""
    corner = list(index.shape)
    corner[dim] = x.shape[dim]
    line = line_of(index, dim)
    if line is not None:                # whole slices: one vectorized copy per slice
        return xp.take(region(x, corner), line, axis=dim)
    if x.flags.c_contiguous:
        return x.reshape(-1)[flat_positions(xp, index, x.shape, dim)].reshape(index.shape)
    return xp.take_along_axis(region(x, corner), index, axis=dim)


def wide(a):
    """``a`` in the dtype to accumulate in: 16-bit floats in float32 (a copy)."""
    to = _WIDEN.get(a.dtype)
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
        combine_at(xp, REDUCERS[reduce], out.reshape(-1), flat, values)
    return flat
