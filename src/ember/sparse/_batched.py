"""Batched compressed tensors: CSR, CSC, BSR and BSC tensors with leading batch dimensions.

Their parts carry the batch dimensions first: compressed indices ``(*batch, n + 1)``, plain
indices ``(*batch, nnz)`` and values ``(*batch, nnz)`` (``(*batch, nnz, rows, cols)`` for
blocks), every batch storing the same number of entries, as in PyTorch. ember builds, checks,
prints and converts them (to and from dense and COO tensors) one batch at a time, through the
2-D code; other ops refuse them (see ``_dispatch.dispatch``).
"""

import math

import ember

__all__ = ["batch_ndim", "is_batched", "batches", "stack_batches", "batched_to_coo",
           "select_batch"]


def batch_ndim(s):
    """How many batch dimensions a compressed tensor has (0 for a COO tensor)."""
    return 0 if s._crow is None else s._crow.ndim - 1


def is_batched(x):
    """Whether ``x`` is a sparse compressed tensor with batch dimensions."""
    from ember.sparse._tensor import SparseTensor
    return isinstance(x, SparseTensor) and x._crow is not None and x._crow.ndim > 1


def batches(s):
    """The 2-D compressed tensors of each batch of ``s``, in row-major batch order."""
    from ember.sparse._tensor import compressed
    batch = tuple(s._size[:batch_ndim(s)])
    count = (math.prod(batch),)
    pointers = s._crow.reshape(count + tuple(s._crow.shape[len(batch):]))
    plain = s._col.reshape(count + tuple(s._col.shape[len(batch):]))
    values = s._v.reshape(count + tuple(s._v.shape[len(batch):]))
    matrix = tuple(s._size[len(batch):])
    return [compressed(s._layout, pointers[b], plain[b], values[b], matrix)
            for b in range(pointers.shape[0])]


def stack_batches(layout, matrices, batch):
    """One batched compressed tensor of shape ``batch + matrix`` from the 2-D ``matrices`` of
    its batches (row-major), which must store the same number of entries."""
    from ember.sparse._tensor import compressed
    if len({m._nnz() for m in matrices}) > 1:
        raise RuntimeError("Expect the same number of specified elements per batch.")

    def stacked(parts):
        return ember.stack(parts).reshape(tuple(batch) + tuple(parts[0].shape))
    return compressed(layout, stacked([m._crow for m in matrices]),
                      stacked([m._col for m in matrices]), stacked([m._v for m in matrices]),
                      tuple(batch) + tuple(matrices[0].shape))


def batched_to_coo(s, to_coo):
    """A batched compressed tensor as a COO one (the batch dims sparse too); ``to_coo``
    converts one 2-D batch."""
    from ember.sparse._convert import unravel
    from ember.sparse._tensor import coo
    batch = tuple(s._size[:batch_ndim(s)])
    indices, values = [], []
    for b, matrix in enumerate(batches(s)):
        c = to_coo(matrix)
        where = unravel(ember.full((c._i.shape[1],), b, dtype=ember.int64,
                                   device=c._i.device), batch)
        indices.append(ember.cat([where, c._i]))
        values.append(c._v)
    return coo(ember.cat(indices, 1), ember.cat(values), s._size,
               s._layout is ember.sparse_csr)


def select_batch(input, dim, index, select):
    """``input.select(dim, index)`` of a batched compressed tensor: a batch dim selects one
    batch (a view of its parts); ``select`` selects a dense dim."""
    from ember._tensor import _wrap_dim
    from ember.sparse._tensor import compressed
    batch = input._crow.ndim - 1
    dim = _wrap_dim(dim, input.ndim)
    if dim >= batch:
        if dim < batch + 2:
            raise RuntimeError("select(): selecting sparse dimensions is not supported for "
                               "batched sparse compressed tensors.")
        return select(input, dim, index)
    size = input.shape[dim]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(input.shape)} at dimension {dim}")
    rest = list(input.shape[:dim]) + list(input.shape[dim + 1:])
    return compressed(input.layout, input._crow.select(dim, index),
                      input._col.select(dim, index), input._v.select(dim, index), rest)
