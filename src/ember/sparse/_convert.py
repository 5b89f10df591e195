"""Conversions between dense, COO and compressed (CSR, CSC, BSR, BSC) tensors, and coalescing,
written with ember ops (so they run on every device and are differentiable in the values)."""

import math

import numpy as np

import ember
from ember import _dtype as D
from ember._tensor import Tensor
from ember.ops._barebones import refusal
from ember.sparse import _layouts as L
from ember.sparse._batched import batched_to_coo, is_batched, stack_batches
from ember.sparse._compressed import block_coordinates, blocksize, expand_pointers
from ember.sparse._merge import merge_slots
from ember.sparse._origin import carry
from ember.sparse._tensor import SparseTensor, compressed, coo

__all__ = ["to_dense", "coalesce", "merged_sum", "concatenated_sum", "first_of_duplicates",
           "to_sparse", "to_sparse_coo", "to_sparse_csr", "to_compressed", "keep_index_dtype",
           "with_index_dtype", "linear", "unravel", "Pattern", "pattern",
           "refuse_mixed_index_dtypes"]


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


def to_dense(s):
    """The strided tensor a sparse one stands for (duplicates summed)."""
    if s._v.dtype in D.WIDE_UNSIGNED and _refuse_unsigned_dense(s):
        return ember.zeros(s._size, dtype=s._v.dtype, device=s._v.device)
    if s._layout is not L.sparse_coo:
        s = to_sparse_coo(s)
    values = s._v
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


def _refuse_unsigned_dense(s):
    """PyTorch's refusal of a uint16/32/64 sparse tensor's densifying kernel
    (ops/_barebones.py); True where it takes none (nothing stored in COO or blocks)."""
    if s._layout is L.sparse_coo:
        if not s._v.shape[0]:
            return True
        kernel = "add_dense_sparse_worker_non_coalesced" if not s._coalesced else \
            "add_dense_sparse_hybrid" if s._v.ndim > 1 else "add_dense_sparse_non_hybrid"
    elif L.blocked(s._layout):
        if not s._v.shape[-3]:
            return True
        kernel = "scatter_gather_tensor_cpu"
    else:
        kernel = "index_add_"
    raise refusal(kernel, s._v.dtype)


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


def merged_sum(a, b, b_values):
    """``a + b`` (``b`` carrying ``b_values``) for COO tensors of which one is uncoalesced, stored
    as PyTorch's CPU kernel stores it: one merge pass over both entry lists in their stored
    order, the smaller index first, adding the two entries whose indices meet at the heads."""
    sizes = tuple(a._size[:a._i.shape[0]])
    slots_a, slots_b, n = merge_slots(linear(a._i, sizes).cpu().numpy(),
                                      linear(b._i, sizes).cpu().numpy())
    target = ember.from_numpy(np.concatenate([slots_a, slots_b])).to(a._i.device)
    values = ember.cat([a._v, b_values])
    summed = ember.zeros((n,) + tuple(values.shape[1:]), dtype=values.dtype,
                         device=values.device)
    if values.dtype is ember.bool:
        summed = summed.to(ember.int64).index_add(0, target, values.to(ember.int64)) != 0
    else:
        summed = summed.index_add(0, target, values)
    indices = a._i.new_zeros((a._i.shape[0], n))
    indices[:, target] = ember.cat([a._i, b._i.to(a._i.dtype)], 1)
    return coo(indices, summed, a._size)


def concatenated_sum(a, b, b_values):
    """``a + b`` (``b`` carrying ``b_values``) as PyTorch stores it where it does not merge (on
    CUDA, or values not contiguous): both entry lists one after the other, coalesced only when
    that holds more entries than the tensor has elements (yet flagged so only under two
    entries); an operand without entries gives the other one's entries (and flag)."""
    if not b._i.shape[1] or not a._i.shape[1]:
        kept = a if not b._i.shape[1] else b
        values = ember.cat([a._v, b_values])
        return coo(ember.cat([a._i, b._i.to(a._i.dtype)], 1), values, a._size, kept._coalesced)
    out = coo(ember.cat([a._i, b._i.to(a._i.dtype)], 1), ember.cat([a._v, b_values]), a._size)
    if out._i.shape[1] <= _numel(a._size):
        return out
    out = coalesce(out)
    return coo(out._i, out._v, a._size, out._i.shape[1] < 2)


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
    if sparse_dim == 0 and ndim:
        raise RuntimeError("dense_to_sparse: sparse_dim argument must be in >0 when "
                           "self.dim()>0")
    if x.dtype in D.WIDE_UNSIGNED:      # (ops/_barebones.py: PyTorch's kernel for the indices)
        raise refusal("nonzero_count_cpu", x.dtype)
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
    """``x`` (dense or sparse) as a COO tensor."""
    if isinstance(x, SparseTensor):
        if sparse_dim is not None and sparse_dim != x.sparse_dim():
            raise RuntimeError(f"sparse_compressed_to_sparse: conversion from "
                               f"{L.short_name(x.layout)} to Sparse with sparse_dim argument "
                               f"!=2 is not supported")
        if x.layout is L.sparse_coo:
            return x
        if is_batched(x):
            return batched_to_coo(x, _compressed_to_coo)
        return carry(_compressed_to_coo(x), x)
    return carry(_dense_to_coo(x, sparse_dim), x)


def _compressed_to_coo(s):
    """A compressed tensor as a COO one, its elements in stored order (every element of a
    stored block kept); marked coalesced as PyTorch marks it: in row order (CSR, BSR with
    one-row blocks) or holding a single block, even an empty one otherwise not."""
    rows, cols = block_coordinates(s)
    values = s._v
    in_row_order = L.row_compressed(s._layout) and blocksize(s)[0] == 1
    coalesced = in_row_order or values.shape[0] == 1
    if L.blocked(s._layout):
        high, wide = blocksize(s)
        within_r = ember.arange(high, device=rows.device).reshape(1, high, 1)
        within_c = ember.arange(wide, device=rows.device).reshape(1, 1, wide)
        shape = (rows.shape[0], high, wide)
        rows = (rows.reshape(-1, 1, 1) * high + within_r).expand(shape).reshape(-1)
        cols = (cols.reshape(-1, 1, 1) * wide + within_c).expand(shape).reshape(-1)
        values = values.reshape(-1)
    indices = ember.stack([rows.to(ember.int64), cols.to(ember.int64)])    # COO's are int64
    out = coo(indices, values, s._size, coalesced)
    out._coalesced = coalesced
    return out


def to_sparse_csr(x, dense_dim=None):
    """``x`` (dense, COO, CSR or CSC) as a CSR matrix (2-D, no dense dimensions)."""
    return to_compressed(x, L.sparse_csr, None, dense_dim)


def to_compressed(x, layout, block=None, dense_dim=None, caller=None):
    """``x`` (dense or sparse) in a compressed ``layout`` (2-D, no dense dimensions); the
    blocked layouts need ``block``, an int or a pair; ``caller``: the name errors give (by
    default ``to_<layout>``). A compressed ``x`` passes on its index dtype (int32 or int64),
    as in PyTorch; dense and COO tensors give int64 indices."""
    out = _to_compressed(x, layout, block, dense_dim, caller)
    return out if out is x else keep_index_dtype(out, x)


def keep_index_dtype(out, like):
    """The new compressed tensor ``out`` with the index dtype of ``like`` (that of its
    compressed indices) when ``like`` is compressed too; ``out`` itself, changed in place."""
    if isinstance(like, SparseTensor) and like._crow is not None and out._crow is not None:
        out._crow, out._col = with_index_dtype(out._crow, out._col, like._crow.dtype)
    return out


def refuse_mixed_index_dtypes(s):
    """PyTorch's error where a kernel reads both index parts of a compressed tensor given
    with mixed int32/int64 indices (unchecked constructors allow them)."""
    if isinstance(s, SparseTensor) and s._crow is not None and s._crow.dtype is not s._col.dtype:
        raise RuntimeError(f"expected scalar type {s._crow.dtype._torch_name} but found "
                           f"{s._col.dtype._torch_name}")


def with_index_dtype(compressed_indices, plain_indices, dtype):
    """Both index parts in ``dtype`` (each left as it is when already so)."""
    return tuple(t if t.dtype is dtype else t.to(dtype)
                 for t in (compressed_indices, plain_indices))


def _to_compressed(x, layout, block, dense_dim, caller):
    name = layout.name[len("sparse_"):]
    prefix = _prefix(x, layout, caller == "to_sparse")
    if isinstance(x, SparseTensor):
        _check_coo_matrix(x, layout, prefix, hybrid=False)
        if block is not None and L.blocked(layout) and not L.blocked(x.layout) and x.ndim >= 2:
            _check_divisible(x.shape[:x.sparse_dim()] if x.layout is L.sparse_coo else x.shape,
                             block, prefix)
        if dense_dim is not None:
            raise RuntimeError(f"{prefix}: conversion from {L.short_name(x.layout)} to "
                               f"{L.short_name(layout)} with dense_dim argument given is not "
                               f"supported")
        _check_coo_matrix(x, layout, prefix)
    else:
        _check_dense_source(x, layout, dense_dim, prefix)
    if L.blocked(layout):
        return carry(_to_blocked(x, layout, block, caller or f"to_{layout.name}", prefix), x)
    if isinstance(x, SparseTensor) and x.layout is layout:
        return x
    if isinstance(x, SparseTensor) and L.blocked(x.layout):
        raise RuntimeError(f"sparse_compressed_to_sparse_{name}: expected SparseCsr or "
                           f"SparseCsc layout but got {L.short_name(x.layout)}")
    if not isinstance(x, SparseTensor) and x.dtype in D.WIDE_UNSIGNED:     # (ops/_barebones.py)
        raise refusal("index_select", x.dtype)
    if x.ndim > 2:
        return _to_batched(x, lambda m: to_compressed(m, layout), f"to_sparse_{name}")
    c = to_sparse_coo(x).coalesce()            # (a COO x was checked to be a matrix)
    rows, cols, values = c._i[0], c._i[1], c._v
    if not L.row_compressed(layout):           # into column-major order
        order = ember.argsort(cols * x.shape[0] + rows, stable=True)
        rows, cols = cols.index_select(0, order), rows.index_select(0, order)
        values = values.index_select(0, order)
    n = x.shape[0 if L.row_compressed(layout) else 1]
    pointers = ember.searchsorted(rows, ember.arange(n + 1, device=rows.device))
    return carry(compressed(layout, pointers, cols.contiguous(), values, x.shape), x)


def _prefix(x, layout, via_layout):
    """The name PyTorch's conversion errors start with: its kernel for ``x``'s layout, reached
    through ``to_sparse(layout=...)`` (``via_layout``) or through ``to_sparse_<layout>``."""
    name = "" if via_layout else "_" + layout.name[len("sparse_"):]
    if not isinstance(x, SparseTensor):
        return "dense_to_sparse" + name
    if x.layout is layout:
        return "to_sparse" + name
    return ("sparse_coo_to_sparse" if via_layout else "coo_to_sparse" + name) \
        if x.layout is L.sparse_coo else "sparse_compressed_to_sparse" + name


def _check_dense_source(x, layout, dense_dim, prefix):
    """PyTorch's errors converting a dense ``x`` of too few dims (for its dense dims) into a
    compressed layout (PyTorch's indexing errors where its kernels read the rows and
    columns); ember's compressed tensors have no dense dims."""
    nd = x.ndim
    if L.blocked(layout):
        dim = -2 - (dense_dim or 0)
        if nd == 0:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        if dim < -nd:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, "
                             f"{nd - 1}], but got {dim})")
    else:
        if dense_dim is not None and not 0 <= dense_dim <= nd - 2:
            raise RuntimeError(f"{prefix}: dense_dim argument must be in [0,{nd - 2}] range, "
                               f"but {dense_dim} is given")
        if nd < 2 and L.row_compressed(layout):     # (its nonzero()'s indices: [nnz, ndim])
            raise IndexError(f"select(): index 1 out of range for tensor of size "
                             f"[{int(ember.count_nonzero(x))}, {nd}] at dimension 1")
        if nd < 2:
            raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but "
                             "got 1)")
    if dense_dim:
        raise RuntimeError(f"to_{layout.name}: ember's compressed tensors have no dense "
                           f"dimensions")


def _check_divisible(shape, block, prefix):
    high, wide = (block, block) if isinstance(block, int) else tuple(block)
    n_rows, n_cols = shape[-2:]
    if n_rows % high or n_cols % wide:
        raise RuntimeError(f"{prefix}: tensor sparse size ({n_rows},{n_cols}) must be "
                           f"divisible by given blocksize ({high},{wide})")


def _check_coo_matrix(x, layout, prefix=None, hybrid=True):
    """PyTorch converts a COO tensor to a compressed layout only from two sparse dims (and
    ember's compressed tensors have no dense dims: checked where ``hybrid``)."""
    if not isinstance(x, SparseTensor) or x.layout is not L.sparse_coo:
        return
    name = layout.name[len("sparse_"):]
    if x.sparse_dim() != 2:
        raise RuntimeError(f"{prefix or 'coo_to_sparse_' + name}: conversion from Sparse to "
                           f"{L.short_name(layout)} for input tensors with "
                           f"sparse_dim()!=2 is not supported")
    if hybrid and x.dense_dim():
        raise RuntimeError(f"to_sparse_{name}: ember's compressed tensors have no dense "
                           f"dimensions")


def _to_blocked(x, layout, block, caller, prefix=None):
    name = layout.name[len("sparse_"):]
    if block is None:
        raise RuntimeError(f"dense_to_sparse: conversion from {L.short_name(x.layout)} to "
                           f"{L.short_name(layout)} without blocksize argument given is not "
                           f"supported")
    high, wide = (block, block) if isinstance(block, int) else tuple(block)
    if isinstance(x, SparseTensor) and x.layout in L.COMPRESSED and \
            L.row_compressed(x.layout) == L.row_compressed(layout):
        refuse_mixed_index_dtypes(x)        # (PyTorch's direct CSR->BSR, CSC->BSC kernel)
    if isinstance(x, SparseTensor):
        if L.blocked(x.layout) and blocksize(x) != (high, wide):
            if x.layout is not layout:
                caller = "sparse_compressed_" + caller
            raise RuntimeError(f"{caller}: conversion from {L.short_name(x.layout)} to "
                               f"{L.short_name(layout)} with blocksize changed from "
                               f"{list(blocksize(x))} to {[high, wide]} is not supported")
        if x.layout is layout:
            return x
        if is_batched(x):
            kernel = prefix or "sparse_compressed_to_sparse_" + name
            raise RuntimeError(f"{kernel}: conversion from {L.short_name(x.layout)} to "
                               f"{L.short_name(layout)} for batched inputs is not supported")
        if L.blocked(x.layout):
            return _flip_blocked(x, layout)
        _check_coo_matrix(x, layout, prefix)
        x = x.to_dense()
    if x.ndim > 2:
        return _to_batched(x, lambda m: _to_blocked(m, layout, (high, wide), caller, prefix),
                           f"to_sparse_{name}")
    _check_divisible(x.shape, (high, wide), prefix or f"dense_to_sparse_{name}")
    n_rows, n_cols = x.shape
    blocks = x.reshape(n_rows // high, high, n_cols // wide, wide).transpose(1, 2)
    stored = (blocks != 0).any(-1).any(-1)
    if not L.row_compressed(layout):
        stored = stored.t()
    major, minor = stored.nonzero().t()
    rows, cols = (major, minor) if L.row_compressed(layout) else (minor, major)
    pointers = ember.searchsorted(major, ember.arange(stored.shape[0] + 1,
                                                      device=major.device))
    return compressed(layout, pointers, minor.contiguous(), blocks[rows, cols], x.shape)


def _to_batched(x, convert, caller):
    """A dense (or sparse) tensor of more than 2 dims as a batched compressed tensor, each
    2-D batch converted by ``convert``; ``caller``: the name errors give."""
    if isinstance(x, SparseTensor):
        x = x.to_dense()
    batch = tuple(x.shape[:-2])
    if not math.prod(batch):
        raise RuntimeError(f"{caller}: Expected product of batch dimensions to be non-zero.")
    flat = x.reshape((math.prod(batch),) + tuple(x.shape[-2:]))
    matrices = [convert(flat[b]) for b in range(flat.shape[0])]
    return stack_batches(matrices[0].layout, matrices, batch)


def _flip_blocked(s, layout):
    """A BSR tensor as BSC or the reverse, without a dense intermediate: the same blocks
    (each kept as it is, all-zero ones too) in the other order."""
    rows, cols = block_coordinates(s)
    major, minor = (rows, cols) if L.row_compressed(layout) else (cols, rows)
    high, wide = blocksize(s)
    n_minor = s.shape[1] // wide if L.row_compressed(layout) else s.shape[0] // high
    n_major = s.shape[0] // high if L.row_compressed(layout) else s.shape[1] // wide
    order = ember.argsort(major * n_minor + minor, stable=True)
    major = major.index_select(0, order)
    pointers = ember.searchsorted(major, ember.arange(n_major + 1, device=major.device))
    return compressed(layout, pointers, minor.index_select(0, order),
                      s._v.index_select(0, order), s.shape)


def to_sparse(x, *args, layout=None, blocksize=None, dense_dim=None):
    """``Tensor.to_sparse(sparse_dim)`` or ``Tensor.to_sparse(*, layout=..., dense_dim=...)``."""
    if len(args) > 1:
        raise TypeError(f"to_sparse() takes at most 1 positional argument ({len(args)} given)")
    if args:
        if layout is not None:
            raise TypeError("to_sparse(): the sparse_dim form takes no layout")
        if isinstance(x, SparseTensor) and x.layout is L.sparse_coo \
                and args[0] != x.sparse_dim():
            raise RuntimeError("to_sparse: conversion from Sparse to Sparse with sparse_dim "
                               "argument !=self.sparse_dim() is not supported")
        return to_sparse_coo(x, args[0])
    if isinstance(x, SparseTensor):
        _check_sparse_source(x, L.sparse_coo if layout is None else layout, blocksize,
                             dense_dim)
    if layout is None or layout is L.sparse_coo:
        if dense_dim is not None and dense_dim == x.ndim > 0:
            raise RuntimeError("dense_to_sparse: dense_dim argument must be !=self.dim() when "
                               "self.dim()>0")
        dims = None if dense_dim is None else x.ndim - dense_dim
        return to_sparse_coo(x, dims)
    if layout in L.COMPRESSED:
        return to_compressed(x, layout, blocksize, dense_dim, "to_sparse")
    raise RuntimeError("to_sparse: layout must be a sparse layout, not ember.strided")


def _check_sparse_source(x, layout, block, dense_dim):
    """PyTorch's errors of ``x.to_sparse(layout=...)`` for a sparse ``x``: a blocksize only
    for a blocked layout (and then one dividing the matrix), no dense_dim for a COO one (a
    compressed one's is refused in ``_to_compressed``, after the checks PyTorch makes first)."""
    caller = ("to_sparse" if layout is x.layout else "sparse_coo_to_sparse"
              if x.layout is L.sparse_coo else "sparse_compressed_to_sparse")
    names = f"from {L.short_name(x.layout)} to {L.short_name(layout)}"
    if L.blocked(layout) != (block is not None):
        given = "with" if block is not None else "without"
        raise RuntimeError(f"{caller}: conversion {names} {given} blocksize argument given is "
                           f"not supported")
    if dense_dim is not None and layout is L.sparse_coo:
        raise RuntimeError(f"{caller}: conversion {names} with dense_dim argument given is not "
                           f"supported")
    if block is not None and not L.blocked(x.layout) and x.ndim >= 2:
        high, wide = (block, block) if isinstance(block, int) else tuple(block)
        ends = x.sparse_dim() if x.layout is L.sparse_coo and x.sparse_dim() >= 2 else x.ndim
        rows, cols = x.shape[ends - 2:ends]             # (its last two sparse dims)
        if rows % high or cols % wide:
            raise RuntimeError(f"{caller}: tensor sparse size ({rows},{cols}) must be "
                               f"divisible by given blocksize ({high},{wide})")


def _from_dense(x, out, name):
    """``out``, converted from ``x``, under PyTorch's node name (a sparse ``out`` holding a
    sparse ``x``'s values gets a node of its own; ``x`` itself returned is left alone)."""
    if isinstance(x, SparseTensor):
        from ember.sparse._ops import _own_node
        return _own_node(out, x, name)
    from ember.sparse._names import named
    return named(out, name)


def _to_sparse_method(self, *args, sparse_dim=None, **kwargs):
    if sparse_dim is not None:
        args = args + (sparse_dim,)
    # PyTorch's overloads: to_sparse(sparse_dim) and to_sparse(*, layout, ...)
    _refuse_forward_ad(self, "_to_sparse")
    return _from_dense(self, to_sparse(self, *args, **kwargs),
                       "ToSparseBackward0" if args else "ToSparseBackward1")


def _to_sparse_coo_method(self):
    _refuse_forward_ad(self, "_to_sparse")
    return _from_dense(self, to_sparse_coo(self), "ToSparseBackward1")


def _to_sparse_csr_method(self, dense_dim=None):
    _refuse_forward_ad(self, "_to_sparse_csr")
    return _from_dense(self, to_sparse_csr(self, dense_dim), "ToSparseCsrBackward0")


def _to_sparse_csc_method(self, dense_dim=None):
    _refuse_forward_ad(self, "_to_sparse_csc")
    return _from_dense(self, to_compressed(self, L.sparse_csc, None, dense_dim),
                       "ToSparseCscBackward0")


def _blocked_method(layout):
    def method(self, *args, **kwargs):
        if not args and "blocksize" not in kwargs:
            raise TypeError(f'to_{layout.name}() missing 1 required positional arguments: '
                            f'"blocksize"')
        return _blocked_call(self, layout, *args, **kwargs)
    return method


def _blocked_call(self, layout, blocksize, dense_dim=None):
    _refuse_forward_ad(self, f"_to_{layout.name}")
    return to_compressed(self, layout, blocksize, dense_dim)


def _refuse_forward_ad(x, kernel):
    """PyTorch's error where forward AD reaches the conversion ``kernel`` of ``x``, which has
    no forward derivative."""
    from ember.ops.underivable import refuse_forward_ad
    refuse_forward_ad(kernel, x._v if isinstance(x, SparseTensor) else x)


def _sparse_mask(self, mask):
    """A sparse tensor (of ``mask``'s layout) holding this strided tensor's elements at
    ``mask``'s indices (``mask``'s values are not read)."""
    from ember.sparse._names import named
    return named(_masked(self, mask), "SparseMaskBackward0")


def _masked(self, mask):
    if not isinstance(mask, SparseTensor):
        raise NotImplementedError(f"Could not run 'aten::sparse_mask' with arguments from the "
                                  f"'{mask.device.type.upper()}' backend.")
    if tuple(self.shape) != tuple(mask.shape):
        raise RuntimeError(f"sparse_mask(): operands have incompatible sizes; self has size "
                           f"{list(self.shape)} but mask has size {list(mask.shape)}")
    if isinstance(self, SparseTensor):
        if L.blocked(self.layout) and L.blocked(mask.layout):
            raise RuntimeError(f"empty_sparse_compressed expected sparse compressed "
                               f"(non-block) tensor layout but got {L.short_name(self.layout)}")
        self = self.to_dense()
    if mask.layout is L.sparse_coo:
        return coo(mask._i, self[tuple(mask._i)], mask.shape, mask._coalesced)
    if L.blocked(mask.layout):
        high, wide = blocksize(mask)
        n_rows, n_cols = self.shape
        blocks = self.reshape(n_rows // high, high, n_cols // wide, wide).transpose(1, 2)
        values = blocks[block_coordinates(mask)]        # whole blocks
    else:
        values = self[block_coordinates(mask)]
    crow, col = with_index_dtype(mask._crow, mask._col, ember.int64)     # as PyTorch's
    return compressed(mask.layout, crow, col, values, mask.shape)


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
                         ("col_indices", "sparse row compressed tensor"),
                         ("ccol_indices", "sparse column compressed tensor"),
                         ("row_indices", "sparse column compressed tensor")):
    setattr(Tensor, _name, _wrong_layout(_name, _expected))
for _name in ("_indices", "_values", "_nnz"):
    setattr(Tensor, _name, _no_kernel(_name))
Tensor.sparse_dim = lambda self: 0
Tensor.dense_dim = lambda self: self.ndim
_to_sparse_method.__doc__ = "This tensor as a sparse (COO by default) tensor."
_to_sparse_coo_method.__doc__ = "This tensor as a sparse COO tensor."
_to_sparse_csr_method.__doc__ = "This tensor as a sparse CSR matrix."
_to_sparse_csc_method.__doc__ = "This tensor as a sparse CSC matrix."
_to_sparse_bsr_method = _blocked_method(L.sparse_bsr)
_to_sparse_bsr_method.__doc__ = "This tensor as a sparse BSR matrix of ``blocksize`` blocks."
_to_sparse_bsc_method = _blocked_method(L.sparse_bsc)
_to_sparse_bsc_method.__doc__ = "This tensor as a sparse BSC matrix of ``blocksize`` blocks."
for _name, _fn in (("to_sparse", _to_sparse_method), ("to_sparse_coo", _to_sparse_coo_method),
                   ("to_sparse_csr", _to_sparse_csr_method),
                   ("to_sparse_csc", _to_sparse_csc_method),
                   ("to_sparse_bsr", _to_sparse_bsr_method),
                   ("to_sparse_bsc", _to_sparse_bsc_method)):
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
            s._pattern = Pattern(None, expand_pointers(s._crow), s._crow, s._col, tuple(s._size))
        else:
            rows, cols = s._i[0], s._i[1]
            perm = None
            if not s._coalesced:
                perm = ember.argsort(linear(s._i, tuple(s._size)), stable=True)
                rows, cols = rows.index_select(0, perm), cols.index_select(0, perm)
            crow = ember.searchsorted(rows, ember.arange(s._size[0] + 1, device=rows.device))
            s._pattern = Pattern(perm, rows, crow, cols, tuple(s._size))
    return s._pattern
