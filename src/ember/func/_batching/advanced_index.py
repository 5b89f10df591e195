"""Rules for advanced indexing with per-example indices (``x[i]``, ``x[i] = v`` with a
batched ``i``): an arange over the batch becomes one more index, in front of the example's.

Each example's result puts the index dims where its indices are when they are next to each
other, else first. The batched call puts them after the batch dim (its arange is never next
to an index that follows a slice), so indices after a slice have their dims moved back.
"""

import ember
from ember.func._batched import is_batched_at
from ember.func._batching import RULES, handled_level, rule
from ember.func._batching.reductions import expand_unbatched
from ember.func._batching.shape import _BOOL_MASK
from ember.ops._registry import call

_SHARED_INDICES = {name: RULES[name] for name in ("_index", "index_put")}
_MASK_DTYPES = (ember.bool, ember.uint8)


def _layout(indices):
    """(the dims before the indices when they are next to each other, else 0; the rank of
    their broadcast shape), or None for the loop to decide (masks). Indices of other dtypes
    go to the batched call, which raises the op's error."""
    used = [i for i, k in enumerate(indices) if k is not None]
    ranks = []
    for k in (indices[i] for i in used):
        if not isinstance(k, ember.Tensor) or k.dtype in _MASK_DTYPES:
            return None
        ranks.append(k.ndim)
    adjacent = used[-1] - used[0] + 1 == len(used)
    return (used[0] if adjacent else 0), max(ranks)


def _batched_entries(indices, level, size, rank, device=None):
    """Each index with a batch dim (of size 1 when unbatched), all of ``rank`` + 1 dims;
    with ``device``, a batch arange first (for a value that has a batch dim)."""
    entries = [] if device is None else [
        ember.arange(size, device=device).reshape((size,) + (1,) * rank)]
    for k in indices:
        if k is None:
            entries.append(None)
            continue
        k = k._value if is_batched_at(k, level) else k.unsqueeze(0)
        entries.append(k.reshape((k.shape[0],) + (1,) * (rank + 1 - k.ndim) +
                                 tuple(k.shape[1:])))
    return type(indices)(entries) if isinstance(indices, tuple) else tuple(entries)


def _per_example(indices, level):
    """The indices' layout when one is batched at ``level``, else None."""
    if not any(is_batched_at(k, level) for k in indices):
        return None
    return _layout(indices)


@rule("_index")
def _index(op, args, flags, params, size):
    """Out-of-range indices raise from the batched call, naming dims as PyTorch does."""
    indices, level = params[0], handled_level()
    layout = _per_example(indices, level)
    if layout is None:
        return _SHARED_INDICES[op.name](op, args, flags, params, size)
    (x,), (batched,) = args, flags
    lead, rank = layout
    if not batched:                     # every example reads the same tensor: no arange
        out = call(op, [x], (_batched_entries(indices, level, size, rank),))
        return out.movedim(lead, 0) if lead else out
    out = call(op, [x], (_batched_entries(indices, level, size, rank, x.device),))
    if lead:                            # the index dims go back after the leading dims
        out = out.movedim(tuple(range(1, 1 + rank)), tuple(range(1 + lead, 1 + lead + rank)))
    return out


@rule("index_put")
def _index_put(op, args, flags, params, size):
    batched = batched_put(args, flags, params, size, handled_level())
    if batched is None:
        return _SHARED_INDICES[op.name](op, args, flags, params, size)
    return call(op, *batched)


def batched_put(args, flags, params, size, level):
    """The inputs and parameters of one ``index_put`` on the values for indices batched at
    ``level`` (``x`` given a batch dim), or None without such indices."""
    indices, accumulate = params
    if any(is_batched_at(k, level) and k.dtype is ember.bool for k in indices):
        raise RuntimeError(_BOOL_MASK)  # each example would write a different number of places
    layout = _per_example(indices, level)
    if layout is None:
        return None
    (x, values), (fx, fv) = args, flags
    x = x if fx else expand_unbatched(x, size)
    if isinstance(values, ember.Tensor):
        values = _region_values(x.ndim - 1, indices, layout, values, fv, size)
    return [x, values], (_batched_entries(indices, level, size, layout[1], x.device), accumulate)


def _region_values(ndim, indices, layout, values, batched, size):
    """``values`` laid out as the batched call's region: batch dim, index dims, the rest
    (unchanged when they have more dims than an example's region: the op's own error)."""
    lead, rank = layout
    region = ndim - sum(k is not None for k in indices) + rank
    logical = values.ndim - batched
    if logical > region:
        return values if batched else expand_unbatched(values, size)
    body = tuple(values.shape[1:] if batched else values.shape)
    values = values.reshape((values.shape[0] if batched else 1,) + (1,) * (region - logical) +
                            body)
    if lead:                            # the example's index dims follow its leading dims
        values = values.movedim(tuple(range(1 + lead, 1 + lead + rank)),
                                tuple(range(1, 1 + rank)))
    return values
