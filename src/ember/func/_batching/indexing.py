"""Rules for index ops with a per-example index (index_select, index_add, take, searchsorted):
each example's indices select from its own row of the value, found by offsetting the indices
by the example's position or by indexing the batch dim with an arange."""

import math

import ember
from ember.func._batching import (RULES, differentiated_within, handled_level, rule,
                                  warn_fallback, warn_outer_levels)
from ember.func._batching.reductions import expand_unbatched, shift_dim
from ember.ops._registry import call

_SHARED_INDEX = {name: RULES[name] for name in ("index_select", "index_add", "index_copy",
                                                "index_fill", "index_reduce")}


def _rows(size, device, ndim):
    """An arange over the batch, shaped to index the batch dim beside ``ndim`` more dims."""
    return ember.arange(size, device=device).reshape((size,) + (1,) * ndim)


def _rowwise(index, size):
    """Each example's values as one row (explicit sizes: -1 is ambiguous with none)."""
    return index.reshape(size, math.prod(index.shape[1:]))


def _in_range(index, low, high, dtypes=(ember.int64, ember.int32)):
    """Whether every index is in [low, high) (else the loop raises the op's own error); not
    checked for indices batched at an outer level, whose values a rule cannot read."""
    if index.dtype not in dtypes:
        return False
    if type(index) is not ember.Tensor or index.numel() == 0:
        return True
    return bool(((index >= low) & (index < high)).all())


@rule("index_select")
def _index_select(op, args, flags, params, size):
    (x, index), (fx, fi), (dim,) = args, flags, params
    if not fi:
        return _SHARED_INDEX[op.name](op, args, flags, params, size)
    ndim = x.ndim - fx
    if ndim == 0:
        return NotImplemented
    x = x if fx else expand_unbatched(x, size)
    d = shift_dim(dim, ndim)
    if index.ndim > 2 or not _in_range(index, 0, x.shape[d]):
        return NotImplemented
    x = x.movedim(d, 1)
    index = _rowwise(index, size)
    index = index.reshape(tuple(index.shape) + (1,) * (x.ndim - 2))
    index = index.expand((size, index.shape[1]) + tuple(x.shape[2:]))
    return ember.gather(x, 1, index).movedim(1, d)


@rule("index_add", "index_copy", "index_fill", "index_reduce")
def _index_along_dim(op, args, flags, params, size):
    """A per-example index: fold the batch into ``dim``, offsetting each example's indices."""
    (x, index, source), (fx, fi, fs) = args, flags
    if not fi:
        return _SHARED_INDEX[op.name](op, args, flags, params, size)
    ndim = x.ndim - fx
    if ndim == 0 or (fs and op.name == "index_fill") or (
            op.name == "index_reduce" and (x.dtype.is_complex or x.dtype is ember.bool)):
        return NotImplemented
    x = x if fx else expand_unbatched(x, size)
    d = shift_dim(params[0], ndim)
    n = x.shape[d]
    if index.ndim > 2 or not _in_range(index, 0, n):
        return NotImplemented
    x = x.movedim(d, 1)
    rest = tuple(x.shape[2:])
    index = _rowwise(index, size)
    flat_index = (index + _rows(size, index.device, 1) * n).reshape(-1)
    if op.name != "index_fill":
        if not isinstance(source, ember.Tensor) or source.ndim - fs != ndim:
            return NotImplemented
        source = (source if fs else expand_unbatched(source, size)).movedim(d, 1)
        if tuple(source.shape[1:2]) != tuple(index.shape[1:2]) or tuple(source.shape[2:]) != rest:
            return NotImplemented
        source = source.reshape((size * source.shape[1],) + rest)   # -1: ambiguous if empty
    out = call(op, [x.reshape((size * n,) + rest), flat_index, source], (0,) + tuple(params[1:]))
    return out.reshape((size, n) + rest).movedim(1, d)


def _take_flat(x, index, size):
    """Each example's ``x.flatten()[index]`` (indices already checked to be in range)."""
    flat = _rowwise(x, size)
    wrapped = _rowwise(index, size) % max(flat.shape[1], 1)     # take wraps negatives
    return ember.gather(flat, 1, wrapped).reshape(index.shape)


@rule("take")
def _take(op, args, flags, params, size):
    (x, index), (fx, fi) = args, flags
    x = x if fx else expand_unbatched(x, size)
    index = index if fi else expand_unbatched(index, size)
    extent = math.prod(x.shape[1:])
    if not _in_range(index, -extent, extent, (ember.int64,)):
        return NotImplemented
    return _take_flat(x, index, size)


_ALONG_DIM = RULES["take_along_dim"]


@rule("take_along_dim")
def _take_along_dim(op, args, flags, params, size):
    if params[0] is not None:
        return _ALONG_DIM(op, args, flags, params, size)
    (x, index), (fx, fi) = args, flags
    x = x if fx else expand_unbatched(x, size)
    index = index if fi else expand_unbatched(index, size)
    if not _in_range(index, 0, math.prod(x.shape[1:]), (ember.int64,)):
        return NotImplemented
    return _take_flat(x, _rowwise(index, size), size)


@rule("bucketize")
def _bucketize(op, args, flags, params, size):
    (x, boundaries), (fx, fb) = args, flags
    if not fb:
        return call(op, [x, boundaries], params)
    if boundaries.ndim != 2 or not isinstance(x, ember.Tensor):
        return NotImplemented           # bucketize's own error
    x = x if fx else expand_unbatched(x, size)
    out_int32, right = params
    values = _rowwise(x, size)
    out = ember.searchsorted(boundaries, values, out_int32=out_int32, right=right)
    return out.reshape(x.shape)


@rule("searchsorted")
def _searchsorted(op, args, flags, params, size):
    (seq, x), (fs, fx) = args, flags
    sorter = params[3]
    if not isinstance(x, ember.Tensor) or sorter is not None:
        return NotImplemented
    if not fs and seq.ndim == 1:
        return call(op, [seq, x], params)
    seq = seq if fs else expand_unbatched(seq, size).contiguous()
    x = x if fx else expand_unbatched(x, size).contiguous()
    if seq.ndim == 2:                   # one sequence per example: its values flattened
        return call(op, [seq, _rowwise(x, size)], params).reshape(x.shape)
    return call(op, [seq, x], params)


@rule("isin")
def _isin(op, args, flags, params, size):
    """Batched elements against shared test elements: one call (the result has the
    elements' shape); batched test elements take the loop."""
    if flags[1] or not isinstance(args[0], ember.Tensor):
        return NotImplemented
    return call(op, args, params)


@rule("diag")
def _diag(op, args, flags, params, size):
    x, (diagonal,) = args[0], params
    if x.ndim == 2:
        return ember.diag_embed(x, diagonal)
    if x.ndim == 3:
        return x.diagonal(diagonal, 1, 2)
    return NotImplemented               # diag's own error


@rule("put")
def _put(op, args, flags, params, size):
    """Each example's flat indices, wrapped and offset into the flattened batch."""
    x, index, source = (a if f else expand_unbatched(a, size) for a, f in zip(args, flags))
    extent = math.prod(x.shape[1:])
    if extent == 0 or math.prod(index.shape[1:]) != math.prod(source.shape[1:]) or \
            source.dtype != x.dtype or not _in_range(index, -extent, extent, (ember.int64,)):
        return NotImplemented           # the op's own error
    flat = (_rowwise(index, size) % extent + _rows(size, index.device, 1) * extent).reshape(-1)
    out = call(op, [x.reshape(-1), flat, source.reshape(-1)], params)
    return out.reshape(x.shape)


def _warn_source_backward(grad):
    """masked_scatter's source gradient under vmap: PyTorch's fallback warning for it."""
    warn_fallback("aten::masked_scatter_backward")


@rule("masked_scatter")
def _masked_scatter(op, args, flags, params, size):
    """Each example's k-th masked position takes the k-th element of its own source."""
    from ember.func._batching.elementwise import align
    level = handled_level()
    (x, mask, source), (fx, fm, fs) = args, flags
    if mask.dtype is not ember.bool or source.dtype != x.dtype:
        return NotImplemented           # the op's own error
    x, mask = ember.broadcast_tensors(*align([x, mask], [fx, fm], size))
    mask = _rowwise(mask, size)
    source = _rowwise(source if fs else expand_unbatched(source, size), size)
    position = ember.where(mask, mask.cumsum(1) - 1, 0)
    if size == 0 or not _in_range(position, 0, source.shape[1]):
        return NotImplemented           # too few source elements: the op's own error
    warn_fallback("aten::masked_scatter")   # PyTorch loops (the values are the loop's)
    warn_outer_levels("aten::masked_scatter", args, size)
    taken = ember.gather(source, 1, position)
    if source.requires_grad and differentiated_within(level):
        taken.register_hook(_warn_source_backward)  # PyTorch loops the source's backward too
    return ember.where(mask, taken, _rowwise(x, size)).reshape(x.shape)
