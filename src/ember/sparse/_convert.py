"""Conversions between dense, COO and CSR tensors, and coalescing, written with ember ops (so
they run on every device and are differentiable in the values)."""

import ember
from ember._tensor import Tensor
from ember.sparse import _layouts as L
from ember.sparse._tensor import SparseTensor, coo, csr

__all__ = ["to_dense", "coalesce", "first_of_duplicates", "to_sparse", "to_sparse_coo",
           "to_sparse_csr", "linear", "unravel", "row_indices", "Pattern", "pattern"]


def _int_zeros(n, device):
    return ember.zeros(n, dtype=ember.int64, device=device)


def linear(indices, sizes):
    """The row-major position of each column of ``indices`` in a tensor of ``sizes``."""
    if not len(sizes):
        return _int_zeros(indices.shape[1], indices.device)
    out = indices[0]
    for d in range(1, len(sizes)):
        out = out * sizes[d] + indices[d]
    return out


def unravel(positions, sizes):
    """The (len(sizes), n) indices of row-major ``positions`` (``linear``'s inverse)."""
    rows = []
    for n in reversed(sizes):
        rows.append(positions % n)
        positions = positions // n
    return ember.stack(rows[::-1]) if rows else positions.new_zeros((0, positions.shape[0]))


def row_indices(crow):
    """The row of each stored element of a CSR matrix."""
    n_rows = crow.shape[0] - 1
    return ember.repeat_interleave(ember.arange(n_rows, device=crow.device), crow.diff(),
                                   output_size=None)


def to_dense(s):
    """The strided tensor a sparse one stands for (duplicates summed)."""
    values = s._v
    if s._layout is L.sparse_csr:
        indices = ember.stack([row_indices(s._crow), s._col])
    else:
        indices = s._i
    sparse_dim = indices.shape[0]
    sizes = tuple(s._size[:sparse_dim])
    flat_shape = (_numel(sizes),) + tuple(s._size[sparse_dim:])
    if values.dtype is ember.bool:
        counts = ember.zeros(flat_shape, dtype=ember.int64, device=values.device)
        counts = counts.index_add(0, linear(indices, sizes), values.to(ember.int64))
        return (counts != 0).reshape(s._size)
    out = ember.zeros(flat_shape, dtype=values.dtype, device=values.device)
    return out.index_add(0, linear(indices, sizes), values).reshape(s._size)


def _numel(sizes):
    n = 1
    for k in sizes:
        n *= k
    return n


def coalesce(s):
    """A COO tensor's coalesced form: sorted unique indices, their values summed."""
    sparse_dim = s._i.shape[0]
    sizes = tuple(s._size[:sparse_dim])
    keys, inverse = ember.unique(linear(s._i, sizes), return_inverse=True)
    values = s._v
    summed = ember.zeros((keys.shape[0],) + tuple(values.shape[1:]), dtype=values.dtype,
                         device=values.device)
    if values.dtype is ember.bool:
        summed = summed.to(ember.int64).index_add(0, inverse, values.to(ember.int64)) != 0
    else:
        summed = summed.index_add(0, inverse, values)
    return coo(unravel(keys, sizes), summed, s._size, True)


def first_of_duplicates(s):
    """For an uncoalesced COO tensor: the position of the first stored entry of each distinct
    index (in sorted order), and those distinct indices."""
    sparse_dim = s._i.shape[0]
    sizes = tuple(s._size[:sparse_dim])
    keys, inverse = ember.unique(linear(s._i, sizes), return_inverse=True)
    where = ember.arange(inverse.shape[0], device=inverse.device)
    first = where.new_zeros(keys.shape[0]).scatter_reduce(0, inverse, where, "amin",
                                                         include_self=False)
    return first, unravel(keys, sizes)


def _dense_to_coo(x, sparse_dim):
    ndim = x.ndim
    if sparse_dim is None:
        sparse_dim = ndim
    if not 0 <= sparse_dim <= ndim:
        raise RuntimeError(f"dense_to_sparse: sparse_dim argument must be in [0,{ndim}] "
                           f"range, but {sparse_dim} is given")
    mask = x != 0
    if sparse_dim < ndim:
        mask = mask.reshape(tuple(x.shape[:sparse_dim]) + (-1,)).any(-1)
    if sparse_dim == 0:
        keep = mask.reshape(1)
        indices = ember.zeros((0, int(keep.sum())), dtype=ember.int64, device=x.device)
        values = x.reshape((1,) + tuple(x.shape))[keep]
        return coo(indices, values, x.shape, True)
    indices = mask.nonzero().t()
    values = x[tuple(indices)] if indices.shape[1] or ndim == sparse_dim else \
        x.new_zeros((0,) + tuple(x.shape[sparse_dim:]))
    return coo(indices.contiguous(), values, x.shape, True)


def to_sparse_coo(x, sparse_dim=None):
    """``x`` (dense, COO or CSR) as a coalesced COO tensor."""
    if isinstance(x, SparseTensor):
        if sparse_dim is not None and sparse_dim != x.sparse_dim():
            raise RuntimeError(f"to_sparse: conversion from {L.short_name(x.layout)} to "
                               f"Sparse with sparse_dim argument != self.sparse_dim() is not "
                               f"supported")
        if x.layout is L.sparse_coo:
            return x
        out = coo(ember.stack([row_indices(x._crow), x._col]), x._v, x._size, True)
        return out
    return _dense_to_coo(x, sparse_dim)


def to_sparse_csr(x, dense_dim=None):
    """``x`` (dense, COO or CSR) as a CSR matrix (2-D, no dense dimensions)."""
    if dense_dim:
        raise RuntimeError("ember's CSR tensors have no dense dimensions (dense_dim must be "
                           "None or 0)")
    if isinstance(x, SparseTensor) and x.layout is L.sparse_csr:
        return x
    if x.ndim != 2:
        raise RuntimeError(f"to_sparse_csr: ember has only 2-D CSR tensors (no batches), but "
                           f"got a {x.ndim}-D tensor")
    c = to_sparse_coo(x).coalesce()
    if c.dense_dim():
        raise RuntimeError("to_sparse_csr: ember's CSR tensors have no dense dimensions")
    rows, cols = c._i[0], c._i[1]
    crow = ember.searchsorted(rows, ember.arange(x.shape[0] + 1, device=rows.device))
    return csr(crow, cols.contiguous(), c._v, x.shape)


def to_sparse(x, *args, layout=None, blocksize=None, dense_dim=None):
    """``Tensor.to_sparse(sparse_dim)`` or ``Tensor.to_sparse(*, layout=..., dense_dim=...)``."""
    if len(args) > 1:
        raise TypeError(f"to_sparse() takes at most 1 positional argument ({len(args)} given)")
    if blocksize is not None:
        raise RuntimeError("ember has no blocked sparse layouts (sparse_bsr, sparse_bsc)")
    if args:
        if layout is not None:
            raise TypeError("to_sparse(): the sparse_dim form takes no layout")
        return to_sparse_coo(x, args[0])
    if layout is None or layout is L.sparse_coo:
        dims = None if dense_dim is None else x.ndim - dense_dim
        return to_sparse_coo(x, dims)
    if layout is L.sparse_csr:
        return to_sparse_csr(x, dense_dim)
    if layout is L.strided:
        raise RuntimeError("to_sparse: layout must be a sparse layout, not ember.strided")
    raise RuntimeError(f"to_sparse: ember has no {layout} layout (only sparse_coo and "
                       f"sparse_csr)")


def _to_sparse_method(self, *args, sparse_dim=None, **kwargs):
    if sparse_dim is not None:
        args = args + (sparse_dim,)
    return to_sparse(self, *args, **kwargs)


def _to_sparse_coo_method(self):
    return to_sparse_coo(self)


def _to_sparse_csr_method(self, dense_dim=None):
    return to_sparse_csr(self, dense_dim)


def _sparse_mask(self, mask):
    """A sparse tensor (of ``mask``'s layout) holding this strided tensor's elements at
    ``mask``'s indices (``mask``'s values are not read)."""
    if not isinstance(mask, SparseTensor):
        raise RuntimeError("sparse_mask(): expected mask to be a sparse tensor")
    if tuple(self.shape) != tuple(mask.shape):
        raise RuntimeError(f"sparse_mask(): operands have incompatible sizes; self has size "
                           f"{list(self.shape)} but mask has size {list(mask.shape)}")
    if isinstance(self, SparseTensor):
        self = self.to_dense()
    if mask.layout is L.sparse_csr:
        values = self[row_indices(mask._crow), mask._col]
        return csr(mask._crow, mask._col, values, mask.shape)
    return coo(mask._i, self[tuple(mask._i)], mask.shape, mask._coalesced)


Tensor.sparse_mask = _sparse_mask


# what a strided tensor answers to the sparse tensors' methods, as in PyTorch
def _wrong_layout(name, expected):
    def method(self):
        raise RuntimeError(f"{name} expected {expected} layout but got Strided")
    return method


def _no_kernel(name):
    def method(self):
        raise NotImplementedError(f"Could not run 'aten::{name}' with arguments from the "
                                  f"'{'CUDA' if self.is_cuda else 'CPU'}' backend: it is for "
                                  f"sparse tensors.")
    return method


for _name, _expected in (("coalesce", "sparse coordinate tensor"),
                         ("is_coalesced", "sparse coordinate tensor"),
                         ("indices", "sparse coordinate tensor"), ("values", "sparse tensor"),
                         ("crow_indices", "sparse row compressed tensor"),
                         ("col_indices", "sparse row compressed tensor")):
    setattr(Tensor, _name, _wrong_layout(_name, _expected))
for _name in ("_indices", "_values", "_nnz"):
    setattr(Tensor, _name, _no_kernel(_name))
Tensor.sparse_dim = lambda self: 0
Tensor.dense_dim = lambda self: self.ndim
_to_sparse_method.__doc__ = "This tensor as a sparse (COO by default) tensor."
_to_sparse_coo_method.__doc__ = "This tensor as a sparse COO tensor."
_to_sparse_csr_method.__doc__ = "This tensor as a sparse CSR matrix."
for _name, _fn in (("to_sparse", _to_sparse_method), ("to_sparse_coo", _to_sparse_coo_method),
                   ("to_sparse_csr", _to_sparse_csr_method)):
    _fn.__name__ = _fn.__qualname__ = _name
    setattr(Tensor, _name, _fn)


class Pattern:
    """A 2-D sparse matrix's nonzeros in CSR order, for products: ``perm`` (the values'
    order, None when already so), ``rows``, ``crow``, ``col``; ``transposed()`` gives the
    pattern of the transpose and the order its values take from these."""

    __slots__ = ("perm", "rows", "crow", "col", "shape", "_t")

    def __init__(self, perm, rows, crow, col, shape):
        self.perm, self.rows, self.crow, self.col, self.shape = perm, rows, crow, col, shape
        self._t = None

    def ordered(self, values):
        """The values in this pattern's order."""
        return values if self.perm is None else values.index_select(0, self.perm)

    def transposed(self):
        if self._t is None:
            order = ember.argsort(self.col, stable=True)
            rows = self.col.index_select(0, order)
            crow = ember.searchsorted(rows, ember.arange(self.shape[1] + 1,
                                                         device=rows.device))
            self._t = Pattern(order, rows, crow, self.rows.index_select(0, order),
                              (self.shape[1], self.shape[0]))
        return self._t


def pattern(s):
    """The (cached) product pattern of a 2-D sparse matrix ``s``."""
    if s._pattern is None:
        if s._layout is L.sparse_csr:
            s._pattern = Pattern(None, row_indices(s._crow), s._crow, s._col, tuple(s._size))
        else:
            rows, cols = s._i[0], s._i[1]
            perm = None
            if not s._coalesced:
                perm = ember.argsort(linear(s._i, tuple(s._size)), stable=True)
                rows, cols = rows.index_select(0, perm), cols.index_select(0, perm)
            crow = ember.searchsorted(rows, ember.arange(s._size[0] + 1, device=rows.device))
            s._pattern = Pattern(perm, rows, crow, cols, tuple(s._size))
    return s._pattern
