"""``ufunc.at`` on NumPy arrays, in the one form NumPy runs fast.

NumPy's ``ufunc.at`` has a fast loop only for a 1-D integer index, 1-D values of the target's
dtype and a 1-D target; anything else (a 2-D index, an index that picks rows of an N-d target,
a tuple of index arrays, a Python scalar or 0-d value) takes its generic path, 5 to 50 times
slower. Here such calls are rewritten as a call on the target's flat view at flat positions,
with the values broadcast to the index's shape and flattened. Values that land on one element
still combine one after another in the index's C order, exactly as the generic path combines
them (and as PyTorch's serial CPU kernels do), so results agree to the bit.
"""

import math

import numpy as np

__all__ = ["numpy_at"]

_FULL = slice(None)
_FLAT_FROM = 1024        # values combined, from which flat positions beat the generic path


def numpy_at(ufunc, target, index, values):
    """``ufunc.at(target, index, values)`` for NumPy arrays."""
    if type(index) is np.ndarray and index.ndim == 1 and target.ndim == 1 and \
            type(values) is np.ndarray and values.shape == index.shape:
        ufunc.at(target, index, values)         # the fast loop's form already
        return
    if type(values) is not np.ndarray:
        exact = _exact(values, target.dtype)
        if exact is None:           # NumPy's own conversion (float64 steps) is kept
            ufunc.at(target, index, values)
            return
        values = exact
    if type(index) is tuple and len(index) == 1 and type(index[0]) is np.ndarray:
        index = index[0]
    if type(index) is np.ndarray and target.ndim == 1 and index.dtype.kind in "iu":
        # NumPy checks the positions itself, with the error it gives for the target
        if values.shape != index.shape or index.ndim != 1:
            values = _flat_values(values, index.shape)
            index = index.reshape(-1)
        ufunc.at(target, index, values)
        return
    found = None if type(index) is np.ndarray and _few_rows(target, index) else \
        _flat_positions(target, index)
    if found is None:
        ufunc.at(target, index, values)
        return
    positions, shape = found
    ufunc.at(target.reshape(-1), positions, _flat_values(values, shape))


def _few_rows(target, index):
    """Whether the rows of ``target`` that ``index`` picks hold too few elements for flat
    positions to pay (NumPy's generic path is the faster then)."""
    return not target.shape or not target.shape[0] or \
        index.size * (target.size // target.shape[0]) < _FLAT_FROM


def _exact(number, dtype):
    """A Python number as a 0-d array of ``dtype`` when that holds it exactly (NumPy would
    compute in int64 or float64 and cast back, slowly, rounding the same: one correctly
    rounded step either way), else None."""
    if type(number) in (int, float, bool) and dtype.kind in "iufc":
        try:
            value = np.asarray(number, dtype)
        except (OverflowError, ValueError):
            return None
        if value.item() == number:
            return value
    return None


def _flat_values(values, shape):
    """``values`` broadcast to ``shape`` and flattened."""
    if values.shape != shape:
        values = np.broadcast_to(values, shape)
    return values.reshape(-1) if values.ndim != 1 else values


def _flat_positions(target, index):
    """(flat positions in C-contiguous ``target``, the shape the values broadcast to) for an
    integer array index (rows of ``target``) or a tuple of integer arrays followed by full
    slices; None for any other key, or when an entry is out of range (the generic call then
    raises NumPy's error)."""
    if not target.flags.c_contiguous:
        return None
    if type(index) is np.ndarray:
        index = (index,)
    elif type(index) is not tuple:
        return None
    lead = 0                    # integer arrays first, then only full slices
    while lead < len(index) and type(index[lead]) is np.ndarray and \
            index[lead].dtype.kind in "iu":
        lead += 1
    if not 0 < lead <= target.ndim or any(type(e) is not slice or e != _FULL
                                          for e in index[lead:]):
        return None
    arrays = index[:lead]
    if lead == 1:
        count = arrays[0].size
    else:
        try:
            count = math.prod(np.broadcast_shapes(*(a.shape for a in arrays)))
        except ValueError:
            return None
    shape = target.shape
    inner = 1
    for n in shape[lead:]:
        inner *= n
    if inner * count < _FLAT_FROM:
        return None
    flat = None
    stride = inner
    for d in range(lead - 1, -1, -1):
        a, n = arrays[d], shape[d]
        if a.size:
            low, high = int(a.min()), int(a.max())
            if low < -n or high >= n:
                return None
            if low < 0:
                a = np.where(a < 0, a + n, a)
        term = a.astype(np.int64, copy=False) * stride if stride != 1 else \
            a.astype(np.int64, copy=False)
        flat = term if flat is None else flat + term
        stride *= n
    if inner != 1:
        flat = flat[..., None] + np.arange(inner, dtype=np.int64)
        return flat.reshape(-1), flat.shape[:-1] + shape[lead:]
    return flat.reshape(-1), flat.shape + shape[lead:]
