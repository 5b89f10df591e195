"""Separable linear maps over the trailing dims: one small matrix per spatial dim.

Average pooling, adaptive average pooling and every interpolation mode are linear in the
input and act on each spatial dim independently, so each is a matrix per dim applied as a
GEMM. The transpose (the backward) is the same op with the transposed matrices.
"""

import functools

import numpy as np

from ember._memory_format import in_order
from ember.backend import device_constant, device_copy, reads_stall
from ember.ops._registry import op

__all__ = ["Taps", "apply_mats", "built_once", "transposed", "_along_dims"]


def built_once(build):
    """``build`` (a function of a geometry returning per-dim matrices or Taps) memoized, with
    its arrays read-only: calls with one geometry share them, so the host builds each once
    and a GPU keeps one upload of each (``backend.device_copy``)."""
    @functools.lru_cache(maxsize=256)
    def cached(*args):
        return _frozen(build(*args))

    @functools.wraps(build)
    def call(*args):
        return cached(*(tuple(a) if isinstance(a, list) else a for a in args))
    return call


def _frozen(value):
    """``value`` with its arrays (in lists, tuples and Taps) read-only; lists become tuples."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, Taps):
        arrays = [a for a in vars(value).values() if isinstance(a, np.ndarray)]
    else:
        arrays = [value] if isinstance(value, np.ndarray) else []
    for a in arrays:
        a.flags.writeable = False
    return value


class Taps:
    """One dim's map as source taps: output i is the sum over t of weight[i, t] times the
    input at index[i, t], for the taps ``used`` marks (all by default), zero weights included.
    PyTorch's interpolation kernels read their taps that way, so an infinity under a zero
    weight gives NaN; a plain matrix skips zero entries on non-finite inputs instead."""

    def __init__(self, index, weight, size, used=None):
        self.index, self.weight, self.used = index, weight, used
        self.matrix = np.zeros((index.shape[0], size))
        keep = weight if used is None else weight * used
        np.add.at(self.matrix, (np.arange(index.shape[0])[:, None], index), keep)


def apply_mats(xp, x, mats, last_first=False):
    """``x`` with ``mats[i]`` (out_i, in_i) applied along the i-th of its trailing dims
    (``mats``: NumPy matrices or Taps, built on the host from the geometry); ``last_first``:
    the last dim's first (the order of PyTorch's float32 bicubic and antialiased sums)."""
    nd = len(mats)
    dtype = x.dtype
    if dtype.itemsize == 2 and dtype.kind in "fV":      # 16-bit floats compute in float32
        x = x.astype(np.float32)
    # a GEMM would spread a NaN or an infinity through every zero weight of its row (on a GPU
    # the taps are summed without asking: the read would wait for the device)
    finite = x.dtype.kind not in "fc" or (not reads_stall(xp) and bool(xp.isfinite(x).all()))
    for i in reversed(range(nd)) if last_first else range(nd):
        m = mats[i]
        if m is None:
            continue
        axis = x.ndim - nd + i
        if isinstance(m, Taps):
            if not finite:
                x = _tap_sum(xp, x, m.index, m.weight, m.used, axis)
                continue
            m = m.matrix
        shape = x.shape
        if x.size == 0 or m.size == 0:
            x = xp.zeros(shape[:axis] + (m.shape[0],) + shape[axis + 1:], dtype=x.dtype)
            continue
        if not finite:
            x = _by_taps(xp, x, m.astype(x.dtype, copy=False), axis)
            continue
        m = device_copy(x, m, x.dtype)          # the host-built matrix, on x's device
        if axis == x.ndim - 1:
            x = x.reshape(-1, shape[-1]) @ m.T
        else:
            pre = 1
            for s in shape[:axis]:
                pre *= s
            x = m @ xp.ascontiguousarray(x).reshape(pre, shape[axis], -1)
        x = x.reshape(shape[:axis] + (m.shape[0],) + shape[axis + 1:])
    return x if x.dtype == dtype else x.astype(dtype)


def _by_taps(xp, x, m, axis):
    """``m`` applied along ``axis`` as a sum over each row's nonzero weights only."""
    nonzero = m != 0
    taps = int(nonzero.sum(axis=1).max())
    order = np.argsort(~nonzero, axis=1, kind="stable")[:, :taps]   # nonzero columns first
    return _tap_sum(xp, x, order, np.take_along_axis(m, order, axis=1),
                    np.take_along_axis(nonzero, order, axis=1), axis)


def _tap_sum(xp, x, index, weight, used, axis):
    shape = [1] * x.ndim
    shape[axis] = index.shape[0]
    if reads_stall(xp):         # on a GPU: the host tables uploaded once, not a tap at a time
        key = ("taps", x.dtype.str, index.shape, index.tobytes(), weight.tobytes(),
               None if used is None else used.tobytes())
        index, weight, used = device_constant(x, key, lambda: (
            index, weight.astype(x.dtype), np.ones(index.shape, bool) if used is None else used))
    out = xp.zeros(x.shape[:axis] + (index.shape[0],) + x.shape[axis + 1:], dtype=x.dtype)
    for t in range(index.shape[1]):
        term = x.take(xp.asarray(index[:, t]), axis=axis) * \
            xp.asarray(weight[:, t].reshape(shape), dtype=x.dtype)
        out += term if used is None else xp.where(xp.asarray(used[:, t].reshape(shape)), term, 0)
    return out


@op("_along_dims(input, mats, order=None)", method=False, saves_inputs=False)
def _along_dims(xp, x, mats, order=None):
    """``input`` with one matrix per trailing dim applied (``mats``: (out, in) arrays), laid
    out in memory ``order`` when given and of its rank (a pooling backward's channels-last)."""
    out = apply_mats(xp, x, mats)
    return in_order(xp, out, order) if order is not None and len(order) == out.ndim else out


@_along_dims.derivative
def _(grad, x, mats, order=None):
    return _along_dims(grad, transposed(mats))


def transposed(mats):
    """The matrices of the transposed map."""
    return tuple(None if m is None else (m.matrix if isinstance(m, Taps) else m).T
                 for m in mats)
