"""``cat`` and ``stack`` of sparse COO tensors, run on their indices and values (PyTorch's
results: indices offset along a sparse dim, values padded with zeros along a dense one)."""

import ember
from ember.sparse import _layouts as L
from ember.sparse._dispatch import handles, is_sparse
from ember.sparse._ops import _unsqueeze
from ember.sparse._tensor import coo

__all__ = ["cat", "stack"]


@handles("cat", "concat", "concatenate")
def cat(tensors, dim=0, *, out=None):
    """``ember.cat`` of COO tensors with the same sparse and dense dims."""
    tensors = list(tensors)
    _check_joinable(tensors, "cat", out)
    from ember._tensor import _wrap_dim
    first = tensors[0]
    dim = _wrap_dim(dim, first.ndim)
    _check_sizes(tensors, dim)
    sparse_dim = first.sparse_dim()
    size = list(first.shape)
    size[dim] = sum(t.shape[dim] for t in tensors)
    if dim < sparse_dim:
        indices, values, offset = [], [], 0
        for t in tensors:
            shift = t._i.new_zeros((sparse_dim, 1))
            shift[dim] = offset
            indices.append(t._i + shift)
            values.append(t._v)
            offset += t.shape[dim]
    else:
        indices = [t._i for t in tensors]
        values = _padded_values(tensors, dim - sparse_dim + 1, size[dim])
    return coo(ember.cat(indices, 1), ember.cat(values), size)


@handles("stack")
def stack(tensors, dim=0, *, out=None):
    """``ember.stack`` of COO tensors: each gets a new dim ``dim``, then they are joined."""
    tensors = list(tensors)
    _check_joinable(tensors, "stack", out)
    from ember._tensor import _wrap_dim
    dim = _wrap_dim(dim, tensors[0].ndim + 1)
    return cat([_unsqueeze(t, dim) for t in tensors], dim)


def _check_joinable(tensors, name, out):
    """PyTorch's errors for sparse tensors ``name`` (cat, stack) cannot join, and for
    ``out=``, which its sparse kernels lack."""
    if out is not None:
        raise NotImplementedError(f"Could not run 'aten::{name}.out' with arguments from the "
                                  f"'SparseCPU' backend.")
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    for at, t in enumerate(tensors):
        if not is_sparse(t):
            raise RuntimeError(f"Concatenating sparse tensors, but a dense tensor was found at "
                               f"position {at}.")
        if t.layout is not L.sparse_coo:
            raise NotImplementedError("cat: ember joins only sparse_coo tensors; convert with "
                                      ".to_sparse_coo() first")
    first = tensors[0]
    for at, t in enumerate(tensors[1:], 1):
        if (t.sparse_dim(), t.dense_dim()) != (first.sparse_dim(), first.dense_dim()):
            raise RuntimeError(f"All tensors must have the same sparse_dim and dense_dim: "
                               f"{first.sparse_dim()}, {first.dense_dim()}, but tensor at "
                               f"position {at} has {t.sparse_dim()}, {t.dense_dim()}.")


def _check_sizes(tensors, dim):
    first = tensors[0]
    for at, t in enumerate(tensors[1:], 1):
        if any(d != dim and a != b for d, (a, b) in enumerate(zip(first.shape, t.shape))):
            raise RuntimeError(f"All tensors must have the same shape: {list(first.shape)} "
                               f"(except in the concatenating dimension), but found shape: "
                               f"{list(t.shape)} at position {at}.")


def _padded_values(tensors, axis, total):
    """Each tensor's values, placed at its offset along dense ``axis`` of length ``total``."""
    padded, offset = [], 0
    for t in tensors:
        v = t._v
        parts = []
        for length in (offset, total - offset - v.shape[axis]):
            if length:
                shape = list(v.shape)
                shape[axis] = length
                parts.append(v.new_zeros(shape))
        parts.insert(1 if offset else 0, v)
        padded.append(ember.cat(parts, axis) if len(parts) > 1 else v)
        offset += v.shape[axis]
    return padded
