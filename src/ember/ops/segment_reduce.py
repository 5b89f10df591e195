"""``torch.segment_reduce`` and ``torch.norm_except_dim``: compositions of ember ops (so their
gradients come from those ops' derivatives). segment_reduce takes its data through
``_kernel_input``, refusing forward AD and a second backward as PyTorch's kernel does."""

import math

import ember
from ember.ops._dims import wrap_dim_of_sized
from ember.ops._registry import rename_node
from ember.ops.underivable import kernel_input

_REDUCTIONS = {"sum": "sum", "prod": "prod", "mean": "mean", "max": "amax", "amax": "amax",
               "min": "amin", "amin": "amin"}


def _segment(piece, reduce, axis, initial):
    """One segment of ``segment_reduce`` reduced over ``axis``, kept as a size-1 dim."""
    count = piece.shape[axis]
    if count == 0:
        empty = {"sum": 0.0, "prod": 1.0, "mean": math.nan, "amax": -math.inf,
                 "amin": math.inf}[reduce]
        fill = empty if initial is None else initial
        shape = piece.shape[:axis] + (1,) + piece.shape[axis + 1:]
        return ember.full(shape, fill, dtype=piece.dtype, device=piece.device)
    if reduce in ("amax", "amin"):
        out = getattr(ember, reduce)(piece, axis, keepdim=True)
        if initial is not None:
            out = (ember.clamp_min if reduce == "amax" else ember.clamp_max)(out, initial)
        return out
    out = ember.sum(piece, axis, keepdim=True) if reduce != "prod" else \
        ember.prod(piece, axis, keepdim=True)
    if initial is not None:
        out = out * initial if reduce == "prod" else out + initial
    return out / count if reduce == "mean" else out


def _reduce_rows(data, reduce, lengths, axis, unsafe, initial):
    """``segment_reduce`` of ``data`` with 1-D ``lengths`` along ``axis``."""
    sizes = [int(n) for n in lengths.tolist()]
    if not unsafe and sum(sizes) != data.shape[axis]:
        raise RuntimeError("segment_reduce(): Expected all rows of lengths along axis to sum "
                           "to data.size(lengths.dim()-1) when !unsafe.")
    if sum(sizes) != data.shape[axis]:            # unsafe: the rows past the lengths go
        data = data.narrow(axis, 0, sum(sizes))
    pieces = ember.split(data, sizes, dim=axis) if sizes else []
    return ember.cat([_segment(p, reduce, axis, initial) for p in pieces], axis)


def segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0,
                   unsafe=False, initial=None):
    """Reduce consecutive segments of ``data`` along ``axis`` (sizes given by ``lengths`` or
    by ``offsets``) with ``reduce``: sum, prod, mean, max or min."""
    if reduce not in _REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, "
                           f"got {reduce}")
    if indices is not None:
        raise RuntimeError("segment_reduce(): indices based reduction is not supported yet.")
    if lengths is None and offsets is None:
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined")
    if not data.dtype.is_floating_point:
        raise NotImplementedError(f"\"_segment_reduce_cpu\" not implemented for "
                                  f"'{data.dtype._torch_name}'")
    axis = axis % data.dim()
    given = ("lengths", lengths) if lengths is not None else ("offsets", offsets)
    if axis != given[1].dim() - 1:
        raise RuntimeError(f"segment_reduce(): Expected axis to be the last dimension of "
                           f"{given[0]} but got {axis}.")
    if lengths is None:
        lengths = offsets[..., 1:] - offsets[..., :-1]
    data = kernel_input(data, "segment_reduce", "_segment_reduce_backward")
    out = _reduce_nested(data, _REDUCTIONS[reduce], lengths, axis, unsafe, initial)
    return rename_node(out, "SegmentReduceBackward0")


def _reduce_nested(data, reduce, lengths, axis, unsafe, initial):
    """Multi-dimensional ``lengths``: one row of lengths per index of the leading dims."""
    if lengths.dim() <= 1:
        return _reduce_rows(data, reduce, lengths, axis, unsafe, initial)
    rows = [_reduce_nested(d, reduce, n, axis - 1, unsafe, initial)
            for d, n in zip(data.unbind(0), lengths.unbind(0))]
    return ember.stack(rows)


def norm_except_dim(v, pow=2, dim=0):  # noqa: A002
    """The ``pow``-norm of ``v`` over every dim but ``dim``, shaped to broadcast against ``v``
    (the whole norm for ``dim=-1``), as weight normalization uses it."""
    if dim == -1:
        return ember.linalg.vector_norm(v, pow)
    dim = wrap_dim_of_sized(dim, v.dim())       # torch's IndexError for a bad dim
    if v.dim() == 1:        # no other dim: each element is its own (one-element) vector
        return ember.linalg.vector_norm(v.unsqueeze(1), pow, 1)
    dim = dim % v.dim()
    others = tuple(d for d in range(v.dim()) if d != dim)
    return ember.linalg.vector_norm(v, pow, others, keepdim=True)


PUBLIC = {"segment_reduce": segment_reduce, "norm_except_dim": norm_except_dim}
