"""scatter_reduce: sum, prod, mean, amax or amin of src's values scattered along a dim, and
its gradients (PyTorch's: ties share the gradient of amax/amin evenly, prod handles zeros)."""

import math

import numpy as np

from ember import _dtype as D
from ember._tensor import _make
from ember.backend import bincount, combine_at, xp_of
from ember.ops._along import REDUCERS, at_least_1d, flat_positions, region, wide
from ember.ops._dims import argument_name, int_param, type_name, wrap_dim
from ember.ops._promotion import refuse_kernel
from ember.ops._registry import op
from ember.ops.binary_math import where
from ember.ops.scatter import (check_scatter_args, check_scatter_kernel, gather, in_place,
                               out_of_place, pad_to)

__all__ = ["scatter_reduce"]

_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")
_ALIASES = {"max": "amax", "min": "amin"}      # accepted by PyTorch, though not in its message


def _identity(reduce, dtype):
    """The value an element starts from when ``include_self=False``."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind == "b":
        return reduce == "amin"
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min if reduce == "amax" else info.max
    return -np.inf if reduce == "amax" else np.inf


def _write(xp, out, index, src, dim, reduce, include_self, late=None):
    dim = int_param(dim, ("scatter_reduce", "dim", 1), strict=True)    # (the parser's checks)
    if not isinstance(reduce, str):
        raise TypeError(f"{argument_name(('scatter_reduce', 'reduce', 4))} must be str, not "
                        f"{type_name(reduce)}")
    dim = wrap_dim(dim, out.ndim)
    out1, ix, src1 = at_least_1d(out), at_least_1d(index), at_least_1d(src)
    check_scatter_args(out, ix, src, dim)       # PyTorch's order: these, self's overlap, reduce
    if late is not None:                        # (see scatter.in_place)
        late()
    reduce = _ALIASES.get(reduce, reduce)
    if reduce not in _REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    kind, name = out.dtype.kind, D.FROM_NUMPY[out.dtype]._torch_name
    if ix.size == 0:
        if reduce == "mean" and kind == "b":    # (it still divides by the counts)
            raise NotImplementedError(f"\"div_floor_cpu\" not implemented for '{name}'")
        return
    if not include_self:        # PyTorch first scatters the start values: the bounds first
        check_scatter_kernel(out1, ix, src1, dim)
    if (reduce == "mean" and kind == "b") or (reduce in ("amax", "amin") and kind == "c"):
        raise NotImplementedError(f"\"scatter_gather_tensor_cpu_reduce_{reduce}\" not "
                                  f"implemented for '{name}'")
    check_scatter_kernel(out1, ix, src1, dim)
    refuse_kernel(out, "scatter_reduce_exclude_input_init" if not include_self else
                  "scatter_gather_tensor_cpu" if reduce in ("sum", "prod") else
                  f"scatter_gather_tensor_cpu_reduce_{reduce}")
    flat = flat_positions(xp, ix, out1.shape, dim)
    work = wide(out1)
    target = work.reshape(-1)
    if not include_self:
        target[flat] = _identity(reduce, work.dtype)
    combine_at(xp, REDUCERS[reduce], target, flat, wide(region(src1, ix.shape)).reshape(-1))
    if work is not out1:
        out1[...] = work                # a mean divides the sum rounded to out's dtype
    if reduce == "mean":
        target = out1.reshape(-1)
        counts = xp.bincount(flat, minlength=target.size)
        if include_self:
            counts += 1
        else:
            counts[counts == 0] = 1
        target[...] = target // counts if kind in "iu" else target / counts


@op("scatter_reduce(input, dim, index, src, reduce, *, include_self=True)",
    inputs=("input", "index", "src"), inplace=True, out=True)
def scatter_reduce(xp, x, index, src, dim, reduce, include_self):
    """``input`` with ``src`` combined in at ``index`` along ``dim`` by ``reduce`` ("sum",
    "prod", "mean", "amax", "amin"); ``include_self=False`` leaves input's own values out
    wherever something is scattered."""
    return out_of_place(_write)(xp, x, index, src, dim, reduce, include_self)


scatter_reduce.inplace_variant(in_place(_write))


# --- gradients --------------------------------------------------------------------------------

class _Hits:
    """Constants of one scatter: flat positions, and per-element counts of what landed."""

    def __init__(self, x, index, dim):
        a, i = at_least_1d(x._data), at_least_1d(index._data)
        self.xp = xp = xp_of(a)
        self.dim = wrap_dim(dim, a.ndim)
        self.shape = a.shape
        self.flat = flat_positions(xp, i, a.shape, self.dim)
        self.index_shape = i.shape

    def count(self, weights=None):
        """How many scattered elements (or how much ``weights``) landed on each element."""
        return bincount(self.xp, self.flat, weights, minlength=math.prod(self.shape)
                                ).reshape(self.shape)

    def scattered(self):
        mask = self.xp.zeros(math.prod(self.shape), dtype=bool)
        mask[self.flat] = True
        return mask.reshape(self.shape)

    def at_index(self, a):
        """``a`` (of the input's shape) read at the scattered positions: index's shape."""
        return self.xp.ascontiguousarray(a).reshape(-1)[self.flat].reshape(self.index_shape)


def _const(array, like, shape=None):
    """A constant tensor of ``like``'s dtype (or bool) holding ``array``, reshaped."""
    array = xp_of(like._data).asarray(array)
    if array.dtype != np.bool_:
        array = array.astype(like._data.dtype)
    return _make(array.reshape(tuple(like.shape) if shape is None else shape))


scatter_reduce.nondifferentiable("index")
scatter_reduce.refuse_complex_grad()


@scatter_reduce.derivative
def _(grad, x, index, src, dim, reduce, include_self, *, out):
    hits = _Hits(x, index, dim)
    src_part = src
    if src.ndim == index.ndim and tuple(src.shape) != tuple(index.shape):
        src_part = src[tuple(slice(0, s) for s in index.shape)]
    if reduce == "sum":
        grad_x, grad_src = grad, gather(grad, dim, index)
    elif reduce == "mean":
        n = hits.count() + 1 if include_self else hits.xp.maximum(hits.count(), 1)
        grad_x = grad / _const(n, grad)
        grad_src = gather(grad_x, dim, index)
    elif reduce == "prod":
        grad_x, grad_src = _prod_grads(grad, x, index, src, src_part, dim, include_self, out,
                                       hits)
    else:
        grad_x, grad_src = _extremum_grads(grad, x, src_part, dim, index, include_self, out,
                                           hits)
    if not include_self:
        grad_x = grad_x.masked_fill(_const(hits.scattered(), grad), 0)
    return grad_x, None, pad_to(grad_src, src.shape)


def _extremum_grads(grad, x, src_part, dim, index, include_self, out, hits):
    """amax/amin: every element equal to the result shares its gradient evenly. With
    ``include_self=False`` input's own value gets no share where scattered, but PyTorch
    still counts it among the ties there when it equals the result."""
    result = out._data.reshape(hits.shape)
    self_ties = x._data.reshape(hits.shape) == result
    self_wins = self_ties if include_self else self_ties & ~hits.scattered()
    src_wins = at_least_1d(src_part._data) == hits.at_index(result)
    n = self_ties + hits.count(src_wins.reshape(-1))
    share = grad / _const(n, grad)        # (a NaN result, equal to nothing: NaN gradients)
    return (share * _const(self_wins, grad),
            gather(share, dim, index) * _const(src_wins, grad, tuple(index.shape)))


def _prod_grads(grad, x, index, src, src_part, dim, include_self, out, hits):
    """prod: the product of the other factors, computed without dividing by a zero."""
    masked_x = x.masked_fill(_const(x._data == 0, x), 1)
    grad_x = grad * scatter_reduce(masked_x, dim, index, src, "prod",
                                   include_self=include_self) / masked_x
    zero = at_least_1d(src_part._data) == 0
    zeros_in_group = hits.at_index(hits.count(zero.reshape(-1)))
    single = zero & (zeros_in_group == 1)
    full = hits.xp.zeros(at_least_1d(src._data).shape, dtype=bool)
    full[tuple(slice(0, s) for s in single.shape)] = single
    masked_src = src.masked_fill(_const(full, src), 1)
    without_zero = scatter_reduce(x, dim, index, masked_src, "prod", include_self=include_self)
    shape = tuple(index.shape)
    grad_src = where(_const(single, grad, shape), gather(grad * without_zero, dim, index),
                     gather(grad * out, dim, index)
                     / src_part.masked_fill(_const(zero, src_part, shape), 1))
    return grad_x, grad_src


scatter_reduce.refuse_aliased_inputs()      # as scatter (see ops/scatter.py)
