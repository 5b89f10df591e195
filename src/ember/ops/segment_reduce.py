"""``torch.segment_reduce`` and ``torch.norm_except_dim``: compositions of ember ops (so their
gradients come from those ops' derivatives). segment_reduce takes its data through
``_kernel_input``, refusing forward AD and a second backward as PyTorch's kernel does."""

import math

import ember
from ember.ops._dims import wrap_dim, wrap_dim_of_sized
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


def _reduce_rows(data, reduce, bounds, axis, initial):
    """``segment_reduce`` of ``data`` over the segments ``bounds`` (1-D: each segment's start
    and end) along ``axis``."""
    starts, ends = bounds.tolist()
    if not starts:
        return data.narrow(axis, 0, 0).clone()
    if any(end < start for start, end in zip(starts, ends)):
        raise RuntimeError(_CHECK.format("segment_length >= 0"))
    pieces = [data.narrow(axis, start, end - start) for start, end in zip(starts, ends)]
    return ember.cat([_segment(p, reduce, axis, initial) for p in pieces], axis)


_CHECK = ("Expected {} to be true, but got false.  (Could this error message be improved?  If "
          "so, please report an enhancement request to PyTorch.)")


def _check_segments(data, axis, name, given, unsafe):
    """PyTorch's checks of ``lengths`` (``offsets``: ``given``), in its order."""
    if data.dim() < given.dim():
        raise RuntimeError(_CHECK.format(f"data.dim() >= {name}_value.dim()"))
    if axis != given.dim() - 1:
        raise RuntimeError(f"segment_reduce(): Expected axis to be the last dimension of "
                           f"{name} but got {axis}.")
    if name == "lengths" and not unsafe:
        if given.min().item() < 0:      # (min of no lengths: PyTorch's error, as its own)
            raise RuntimeError("lengths contains negative value!")
        if not bool((given.sum(-1) == data.shape[axis]).all()):
            raise RuntimeError("segment_reduce(): Expected all rows of lengths along axis to "
                               "sum to data.size(lengths.dim()-1) when !unsafe.")
    if name == "offsets" and given.shape[-1] == 0:
        shape = list(data.shape)
        shape[axis] = -1
        raise RuntimeError(f"Trying to create tensor with negative dimension -1: {shape}")
    if given.dtype not in (ember.int32, ember.int64):
        raise NotImplementedError(f"\"_segment_reduce_{name}_cpu_kernel1\" not implemented "
                                  f"for '{given.dtype._torch_name}'")
    if not data.dtype.is_floating_point:
        raise NotImplementedError(f"\"_segment_reduce_cpu\" not implemented for "
                                  f"'{data.dtype._torch_name}'")


def segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0,
                   unsafe=False, initial=None):
    """Reduce consecutive segments of ``data`` along ``axis`` (sizes given by ``lengths``, or
    bounds by ``offsets``: segment i runs from offsets[i] to offsets[i + 1]) with ``reduce``:
    sum, prod, mean, max or min."""
    axis = wrap_dim(axis, data.dim())
    if indices is not None:
        raise RuntimeError("segment_reduce(): indices based reduction is not supported yet.")
    if lengths is None and offsets is None:
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined.")
    if reduce not in _REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, "
                           f"got {reduce}")
    # PyTorch takes offsets where both are given
    name, given = ("offsets", offsets) if offsets is not None else ("lengths", lengths)
    _check_segments(data, axis, name, given, unsafe)
    if name == "offsets":
        bounds = ember.stack([offsets[..., :-1], offsets[..., 1:]], -2)
    else:
        ends = lengths.cumsum(-1)
        bounds = ember.stack([ends - lengths, ends], -2)
    data = kernel_input(data, "segment_reduce", "_segment_reduce_backward")
    out = _reduce_nested(data, _REDUCTIONS[reduce], bounds, axis, initial)
    return rename_node(out, "SegmentReduceBackward0")


def _reduce_nested(data, reduce, bounds, axis, initial):
    """Multi-dimensional ``bounds``: one row of segments per index of the leading dims."""
    if bounds.dim() <= 2:
        return _reduce_rows(data, reduce, bounds, axis, initial)
    rows = [_reduce_nested(d, reduce, n, axis - 1, initial)
            for d, n in zip(data.unbind(0), bounds.unbind(0))]
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
