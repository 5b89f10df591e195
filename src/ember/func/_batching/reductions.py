"""Rules for ops that take dims (reductions, scans, sorts, softmax, joins, splits): shift every
dim by one past the batch dim; ``dim=None`` means all logical dims."""

import math

from ember._dtype import bool_
from ember.func._batching import (FALLBACK_NAMES, decompose, differentiated_within,
                                  fallback_aten, handled_level, repeating, rule,
                                  warn_fallback)
from ember.ops._registry import REGISTRY, call

__all__ = ["shift_dim", "expand_unbatched", "rows"]


def shift_dim(dim, ndim):
    """A logical dim (or tuple of dims) of an ``ndim``-dim tensor as a dim of its value."""
    if isinstance(dim, (tuple, list)):
        return tuple(shift_dim(d, ndim) for d in dim)
    lo, hi = -max(ndim, 1), max(ndim, 1) - 1
    if not lo <= dim <= hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], "
                         f"but got {dim})")
    return dim % max(ndim, 1) + 1


def rows(x, size):
    """``x.reshape(size, -1)``: each example's elements in a row, also for an empty batch
    (where -1 is ambiguous: the row keeps the width of ``x``'s other dims)."""
    if size:
        return x.reshape(size, -1)
    return x.reshape(0, math.prod(x.shape[1:]))


def expand_unbatched(x, size):
    """An unbatched tensor as a value with a (broadcast) batch dim in front."""
    return x.unsqueeze(0).expand((size,) + tuple(x.shape))


def _dim_rule(dims=("dim",), none="loop", extra=0, expand=False):
    """A rule shifting the parameters ``dims``; ``none``: what ``dim=None`` means ("all": a
    tuple of every logical dim, "flatten": dim 1 of the value flattened, "loop": no rule);
    ``extra``: how many dims the output adds (dims wrap against ndim + extra); ``expand``:
    every tensor input gets a batch dim (gather's index, cat's tensors)."""
    def batch(op, args, flags, params, size):
        if expand:
            args = [[a if f else expand_unbatched(a, size) for a, f in zip(x, fl)]
                    if isinstance(x, list) else
                    (expand_unbatched(x, size) if not fl and hasattr(x, "ndim") else x)
                    for x, fl in zip(args, flags)]
        elif any(f for f in flags[1:]):
            return NotImplemented
        first = args[0][0] if isinstance(args[0], list) else args[0]
        ndim = first.ndim - 1
        scalar = ndim == 0 and not extra
        if scalar and op.name not in _SCALAR_DIM_OPS:
            return NotImplemented
        if scalar:                      # a 0-dim example takes dim 0 (or -1): one of size 1
            args = [first.reshape(size, 1)] + list(args[1:])
            ndim = 1
        params = list(params)
        keep_shape = None
        for i, name in enumerate(op.param_names):
            if name not in dims:
                continue
            d = params[i]
            if d is None or (d == () and none == "all"):    # amax's dim=() means all dims
                if none == "all":
                    d = tuple(range(ndim))
                elif none == "flatten":
                    keep_shape = (size,) + (1,) * ndim if _keepdim(op, params) else None
                    args = [rows(args[0], size)] + list(args[1:])
                    d, ndim = 0, 1
                else:
                    return NotImplemented
            params[i] = shift_dim(d, ndim + extra)
        out = call(op, args, tuple(params))
        if scalar:
            keep_shape = (size,)
        if keep_shape is None:
            return out
        if isinstance(out, tuple):
            return tuple(o.reshape(keep_shape) for o in out)
        return out.reshape(keep_shape)
    return batch


# ops whose 0-dim input takes dim 0 and gives 0-dim outputs, as a 1-element dim would
_SCALAR_DIM_OPS = frozenset({
    "sum", "mean", "nansum", "nanmean", "amax", "amin", "logsumexp", "all", "any",
    "count_nonzero", "linalg.vector_norm", "var", "std", "var_mean", "std_mean", "prod",
    "argmax", "argmin", "aminmax", "norm", "softmax", "log_softmax", "cumsum", "cumprod",
    "cummax", "cummin", "logcumsumexp", "sort", "argsort", "topk", "kthvalue", "mode",
    "_max_dim", "_min_dim", "_median_dim", "_nanmedian_dim", "flip"})


def _keepdim(op, params):
    return "keepdim" in op.param_names and params[op.param_names.index("keepdim")]


rule("sum", "mean", "nansum", "nanmean", "amax", "amin", "logsumexp", "all", "any",
     "count_nonzero", "linalg.vector_norm")(_dim_rule(none="all"))
_moments_along_dims = _dim_rule(none="all")


@rule("var", "std", "var_mean", "std_mean")
def _moments(op, args, flags, params, size):
    dim, unbiased, keepdim, correction = params
    if isinstance(dim, bool):           # var(x, False): the overload taking unbiased, not dim
        params = (None, dim, keepdim, correction)
    return _moments_along_dims(op, args, flags, params, size)

# norm's p="fro" takes at most two dims: all dims are the flattened one
rule("prod", "argmax", "argmin", "aminmax", "norm")(_dim_rule(none="flatten"))
rule("softmax", "log_softmax", "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "sort",
     "argsort", "topk", "kthvalue", "mode", "_max_dim", "_min_dim", "_median_dim",
     "_nanmedian_dim", "nn.functional.glu", "narrow", "select", "index_select", "split",
     "chunk", "unbind", "tensor_split", "flip", "fft.fft", "fft.ifft", "fft.rfft",
     "fft.irfft", "fft.hfft", "fft.ihfft")(_dim_rule(dims=("dim", "dims")))
rule("transpose")(_dim_rule(dims=("dim0", "dim1")))
rule("movedim")(_dim_rule(dims=("source", "destination")))
rule("flatten")(_dim_rule(dims=("start_dim", "end_dim")))
rule("unflatten")(_dim_rule())
rule("diagonal")(_dim_rule(dims=("dim1", "dim2")))
rule("diagonal_scatter")(_dim_rule(dims=("dim1", "dim2"), expand=True))
rule("select_scatter", "slice_scatter")(_dim_rule(expand=True))
rule("rot90")(_dim_rule(dims=("dims",)))
rule("diag_embed")(_dim_rule(dims=("dim1", "dim2"), extra=1))
rule("unsqueeze")(_dim_rule(extra=1))
rule("stack")(_dim_rule(extra=1, expand=True))
rule("diff", "gather", "_take_along_dim", "scatter", "scatter_add", "scatter_reduce",
     "take_along_dim", "cross", "linalg.cross")(_dim_rule(expand=True))
_join_along_dim = _dim_rule(expand=True)


@rule("cat")
def _cat(op, args, flags, params, size):
    """cat skips 1-D empty examples beside others, as it skips such tensors: each goes in
    as one unbatched 1-D empty tensor (which still takes part in dtype promotion)."""
    tensors, batched = args[0], flags[0]
    legacy = [tuple(t.shape[1:] if f else t.shape) == (0,) for t, f in zip(tensors, batched)]
    if all(legacy) or not any(legacy):
        return _join_along_dim(op, args, flags, params, size)
    values = [t.reshape(0) if skip else t if f else expand_unbatched(t, size)
              for t, f, skip in zip(tensors, batched, legacy)]
    ndim = next(v.ndim for v, skip in zip(values, legacy) if not skip) - 1
    return call(op, [values], (shift_dim(params[0], ndim),))


_roll_along_dims = _dim_rule(dims=("dims",))


@rule("roll")
def _roll(op, args, flags, params, size):
    x, (shifts, dims) = args[0], params
    if dims is None or (isinstance(dims, (tuple, list)) and not dims):
        # rolls the flattened tensor: per sample, along the value's flattened dim 1
        return call(op, [rows(x, size)], (shifts, 1)).reshape(x.shape)
    return _roll_along_dims(op, args, flags, params, size)


@rule("renorm")
def _renorm(op, args, flags, params, size):
    x, (p, dim, maxnorm) = args[0], params
    ndim = x.ndim - 1
    if ndim < 2:
        return NotImplemented           # renorm's own error
    # renorm keeps dim and takes norms over all the others: fold the batch into dim
    moved = x.movedim(shift_dim(dim, ndim), 1)
    folded = (moved.shape[0] * moved.shape[1],) + tuple(moved.shape[2:])
    out = call(op, [moved.reshape(folded)], (p, 0, maxnorm))
    return out.reshape(moved.shape).movedim(1, shift_dim(dim, ndim))


@rule("trace")
def _trace(op, args, flags, params, size):
    x = args[0]
    if x.ndim != 3 or x.dtype is bool_:
        return NotImplemented           # trace's own errors (not a matrix, or bool)
    return x.diagonal(dim1=1, dim2=2).sum(-1)     # integers sum to int64, as trace does


@rule("max", "min", "median", "nanmedian")
def _full_reduction(op, args, flags, params, size):
    import ember
    flat = rows(args[0], size)
    if op.name in ("max", "min"):
        return (ember.amax if op.name == "max" else ember.amin)(flat, 1)
    return (ember.median if op.name == "median" else ember.nanmedian)(flat, 1).values


@rule("squeeze")
def _squeeze(op, args, flags, params, size):
    x, (dim,) = args[0], params
    ndim = x.ndim - 1
    if dim is None:
        dim = tuple(i for i in range(ndim) if x.shape[i + 1] == 1)
    elif ndim == 0:
        return x.reshape(x.shape)
    return call(op, [x], (shift_dim(dim, ndim),))


@decompose("msort")
def _msort(x):
    return x.sort(0).values


@decompose("linalg.vecdot")
def _vecdot(x, y, dim):
    return (x.conj() * y).sum(dim)


@decompose("prelu")
def _prelu(x, weight):
    import ember
    if x.ndim >= 2 and weight.numel() > 1:
        weight = weight.reshape((weight.shape[0],) + (1,) * (x.ndim - 2))
    elif x.ndim == 0 and weight.numel() == 1:       # a 0-dim input keeps its shape
        weight = weight.reshape(())
    return ember.where(x > 0, x, weight * x)


_FFTN = tuple(f"fft.{k}{n}" for k in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
              for n in ("2", "n"))
_fft_along_dims = _dim_rule()


@rule(*_FFTN)
def _fftn(op, args, flags, params, size):
    s, dim, norm = params
    ndim = args[0].ndim - 1
    if dim is None and s is not None:   # no dims: the last len(s) dims
        count = 1 if isinstance(s, int) else len(s)
        if count > ndim:
            return NotImplemented       # the op's own error
        dim = tuple(range(ndim - count, ndim))
    elif dim is None:
        dim = tuple(range(ndim))
    return _fft_along_dims(op, args, flags, (s, dim, norm), size)


@rule("trapezoid", "cumulative_trapezoid")
def _trapezoid(op, args, flags, params, size):
    (y, x), (fy, fx), (dx, dim) = args, flags, params
    ndim = y.ndim - fy
    if ndim == 0 or (x is not None and x.ndim - fx == 0):
        return NotImplemented           # the op's own error
    y = y if fy else expand_unbatched(y, size)
    d = shift_dim(dim, ndim)
    if x is not None:
        x = x if fx else expand_unbatched(x, size)
        if x.ndim == 2:                 # sample points along dim, for every other index
            x = x.reshape((size,) + (1,) * (d - 1) + (x.shape[1],) + (1,) * (ndim - d))
        elif x.ndim < y.ndim:           # broadcasts: 1s after the batch dim
            x = x.reshape((size,) + (1,) * (y.ndim - x.ndim) + tuple(x.shape[1:]))
    return call(op, [y, x], (dx, d))


@rule("dist")
def _dist(op, args, flags, params, size):
    """The p-norm of each example's difference: a vector norm over the flattened rest."""
    import ember
    (a, b), (p,) = args, params
    if a.dtype != b.dtype or not (a.is_floating_point() or a.is_complex()) or \
            isinstance(p, ember.Tensor):
        return NotImplemented           # promotion of mixed dtypes, or the op's own error
    a, b = (x if f else expand_unbatched(x, size) for x, f in zip((a, b), flags))
    diff = a.reshape((size,) + (1,) * (b.ndim - a.ndim) + tuple(a.shape[1:])) - \
        b.reshape((size,) + (1,) * (a.ndim - b.ndim) + tuple(b.shape[1:]))
    if diff.numel() == 0 and (size or diff.ndim < 2):
        return NotImplemented           # (an empty batch of tensors: norms of no rows)
    return ember.linalg.vector_norm(rows(diff, size), p, dim=1)


@rule("quantile", "nanquantile")
def _quantile(op, args, flags, params, size):
    """One shared q over each example's elements (all of them, or along the shifted dim);
    the op puts a 1-D q's dim first, before the batch dim."""
    (x, q), (fx, fq), (dim, keepdim, interpolation) = args, flags, params
    ndim = x.ndim - 1
    if fq or not fx or ndim == 0 or size == 0:
        return NotImplemented           # per-example q, or no examples: the loop
    # PyTorch has no rule: it loops, and warns (the values are the loop's)
    aten = fallback_aten(op, args, params, handled_level())
    if aten is not None:
        warn_fallback(aten)
    with repeating(size):       # (outer levels: PyTorch's loop calls once per example)
        if dim is None:
            out = call(op, [rows(x, size), q], (1, False, interpolation))
        else:
            out = call(op, [x, q], (shift_dim(dim, ndim), keepdim, interpolation))
    if getattr(q, "ndim", 0) == 1:
        out = out.movedim(1, 0)
    if dim is None and keepdim:
        out = out.reshape(tuple(out.shape) + (1,) * ndim)
    return out


def _quantile_name(name):
    def aten(values, params, level):
        """``aten::quantile`` for a tensor q, ``aten::quantile.scalar`` for a number; under a
        transform differentiating inside the vmap at ``level``, PyTorch runs quantile's
        composite body instead, whose in-place ``lerp_`` the linear and midpoint modes loop."""
        from ember._tensor import Tensor
        if level is not None and differentiated_within(level):
            return "aten::lerp_.Tensor" if params[2] in ("linear", "midpoint") else None
        return f"aten::{name}" + ("" if isinstance(values[1], Tensor) else ".scalar")
    return aten


FALLBACK_NAMES["quantile"] = _quantile_name("quantile")
FALLBACK_NAMES["nanquantile"] = _quantile_name("nanquantile")


def _verdict_over_batch(name):
    """PyTorch's rule for a check's verdict (``_is_all_true``): one answer for the whole
    batch, unbatched, so that ``if not ember._is_all_true(valid)`` works inside vmap."""
    def verdict(x):
        return REGISTRY[name].function(x._value)
    return verdict


decompose("_is_all_true")(_verdict_over_batch("_is_all_true"))
decompose("_is_any_true")(_verdict_over_batch("_is_any_true"))
