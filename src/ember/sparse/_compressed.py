"""The compressed sparse layouts CSR, CSC, BSR and BSC, built by one constructor.

A compressed tensor stores ``compressed_indices`` (one pointer per row, or per column, plus
one: where each one's entries start), ``plain_indices`` (the column, or row, of each entry)
and ``values``, one per entry: an element (CSR, CSC) or a block (BSR, BSC, whose values are
``(nnz, block rows, block columns)``, the block size read from them). The layout decides only
which dimension is compressed and whether entries are blocks (``_layouts.row_compressed``,
``_layouts.blocked``); every check and conversion is written once for all four. ember's
compressed tensors have no dense dimensions; leading batch dimensions are in _batched.py.
"""

import math
import operator

from ember._creation import check_requires_grad
from ember.sparse import _layouts as L
from ember.sparse._constructor_args import NO_SIZE, refuse_none_size
from ember.sparse._invariants import check_sparse_tensor_invariants, warn_if_implicit
from ember.sparse._tensor import _as_tensor, _make_leaf, compressed
from ember.sparse._versions import own_counter

__all__ = ["sparse_compressed_tensor", "sparse_csr_tensor", "sparse_csc_tensor",
           "sparse_bsr_tensor", "sparse_bsc_tensor", "expand_pointers", "block_coordinates",
           "blocksize", "crow_indices_copy", "col_indices_copy", "ccol_indices_copy",
           "row_indices_copy", "values_copy", "indices_copy"]


def sparse_compressed_tensor(compressed_indices, plain_indices, values, size=NO_SIZE, *,
                             dtype=None, layout=None, device=None, pin_memory=False,
                             requires_grad=False, check_invariants=None):
    """A sparse tensor in a compressed layout (``torch.sparse_compressed_tensor``):
    ``layout`` is one of ``sparse_csr``, ``sparse_csc``, ``sparse_bsr``, ``sparse_bsc``."""
    if size is None:
        refuse_none_size("sparse_compressed_tensor", L.sparse_csr)
    check_requires_grad(requires_grad, "sparse_compressed_tensor", none_ok=False)
    warn_if_implicit(check_invariants)
    if layout not in L.COMPRESSED:
        got = "none" if layout is None else L.short_name(layout)
        raise RuntimeError(f"sparse_compressed_tensor expected sparse compressed tensor layout "
                           f"but got {got}")
    return _build(layout, compressed_indices, plain_indices, values, size, dtype, device,
                  requires_grad, check_invariants)


def _constructor(layout):
    compressed_name, plain_name = L.index_names(layout)
    name = f"{layout.name}_tensor"

    def make(compressed_indices, plain_indices, values, size=NO_SIZE, *, dtype=None,
             device=None, pin_memory=False, requires_grad=False, check_invariants=None):
        if size is None:
            refuse_none_size(name, layout)
        check_requires_grad(requires_grad, name, none_ok=False)
        warn_if_implicit(check_invariants)
        return _build(layout, compressed_indices, plain_indices, values, size, dtype, device,
                      requires_grad, check_invariants)
    make.__name__ = make.__qualname__ = name
    make.__doc__ = (f"A {layout.name[len('sparse_'):].upper()} tensor from {compressed_name}, "
                    f"{plain_name} and values (``torch.{name}``); the size is inferred when "
                    f"not given.")
    return make


sparse_csr_tensor = _constructor(L.sparse_csr)
sparse_csc_tensor = _constructor(L.sparse_csc)
sparse_bsr_tensor = _constructor(L.sparse_bsr)
sparse_bsc_tensor = _constructor(L.sparse_bsc)


def _build(layout, compressed_indices, plain_indices, values, size, dtype, device,
           requires_grad, check_invariants):
    values = _as_tensor(values, dtype, device)
    pointers = _as_tensor(compressed_indices, device=values.device)
    plain = _as_tensor(plain_indices, device=values.device)
    given = (pointers.dtype, plain.dtype)
    pointers, plain = _index_dtype(pointers), _index_dtype(plain)
    _check_ranks(layout, pointers, plain, values)
    batch = tuple(pointers.shape[:-1])
    block = tuple(values.shape[len(batch) + 1:]) if L.blocked(layout) else (1, 1)
    if size is NO_SIZE:
        _check_estimable(given[1])
        size = _infer_size(layout, pointers, plain, block)
    else:
        size = tuple(operator.index(s) for s in size)
    _check_size(size, block, batch)
    if check_invariants is not False:
        # PyTorch checks the index dtypes only when asked to check invariants
        dtypes = given if check_invariants or check_sparse_tensor_invariants.is_enabled() \
            else None
        count = math.prod(batch)
        for b_pointers, b_plain in zip(pointers.reshape(count, pointers.shape[-1]),
                                       plain.reshape(count, plain.shape[-1])):
            _check_indices(layout, b_pointers, b_plain, values.shape[len(batch)], size[-2:],
                           block, dtypes)
    from ember.ops.underivable import refuse_forward_ad
    refuse_forward_ad("sparse_compressed_tensor", values)
    if values.requires_grad and not requires_grad:
        from ember.ops.conversion import _alias
        from ember.sparse._names import freeing
        values = freeing(_alias(values),        # a non-leaf sparse tensor, as in PyTorch
                             "SparseCompressedTensorBackward0")
    else:
        values = own_counter(values)
    return _make_leaf(compressed(layout, pointers, plain, values, size), requires_grad)


def _index_dtype(t):
    """Index parts keep PyTorch's two index dtypes, int32 (as scipy's indptr/indices are) and
    int64, each as given; ember holds any other dtype as int64 (PyTorch keeps it unchecked)."""
    import ember
    return t if t.dtype is ember.int64 or t.dtype is ember.int32 else t.to(ember.int64)


def _check_index_dtypes(layout, dtypes, n_plain):
    """PyTorch's checks of the index dtypes (as given), and of int32 indices' range."""
    import ember
    compressed_name, plain_name = L.index_names(layout)
    first, second = dtypes
    if first is not second:
        raise RuntimeError(f"{compressed_name} and {plain_name} must have the same dtype, bot "
                           f"got {first._torch_name} and {second._torch_name}, respectively")
    if first is not ember.int32 and first is not ember.int64:
        raise RuntimeError(f"{compressed_name} and {plain_name} dtype must be Int or Long, but "
                           f"got {first._torch_name}")
    if first is ember.int32 and n_plain > _INT32_MAX:
        unit = "column" if L.row_compressed(layout) else "row"
        raise RuntimeError(f"32-bit integer overflow in {unit} dimension = {n_plain}")


_INT32_MAX = 2 ** 31 - 1


def _check_ranks(layout, pointers, plain, values):
    compressed_name, plain_name = L.index_names(layout)
    if pointers.ndim != plain.ndim:
        raise RuntimeError(f"{compressed_name} and {plain_name} dimensionalities must be equal "
                           f"but got {pointers.ndim} and {plain.ndim}, respectively")
    if pointers.ndim < 1:
        raise RuntimeError(f"{compressed_name} must have dimensionality >= 1 but got 0")
    batch = pointers.ndim - 1
    if L.blocked(layout):
        if values.ndim < batch + 3:
            raise RuntimeError(f"values must have dimensionality > sum of batch and block "
                               f"dimensionalities (={batch} + 2) but got {values.ndim}")
        if values.ndim > batch + 3:
            raise RuntimeError("ember's blocked sparse tensors hold 2-D blocks (no dense "
                               "dimensions)")
    elif values.ndim < batch + 1:
        raise RuntimeError(f"values must have dimensionality > sum of batch and block "
                           f"dimensionalities (={batch} + 0) but got {values.ndim}")
    elif values.ndim != batch + 1:
        raise RuntimeError("ember's compressed sparse tensors hold 1-D values (no dense "
                           "dimensions)")
    if tuple(plain.shape[:-1]) != tuple(pointers.shape[:-1]) or \
            tuple(values.shape[:batch]) != tuple(pointers.shape[:-1]):
        raise RuntimeError(f"all batch dimensions of {compressed_name} "
                           f"({list(pointers.shape[:-1])}), {plain_name} "
                           f"({list(plain.shape[:-1])}) and values "
                           f"({list(values.shape[:batch])}) must be equal")


def _check_estimable(plain_dtype):
    """PyTorch infers a size only from plain indices of an integer dtype it reads."""
    import ember
    if plain_dtype not in (ember.int8, ember.int16, ember.int32, ember.int64, ember.uint8):
        raise NotImplementedError(f'"estimate_sparse_compressed_tensor_size" not implemented '
                                  f"for '{plain_dtype._torch_name}'")


def _infer_size(layout, pointers, plain, block):
    n_compressed = pointers.shape[-1] - 1
    n_plain = int(plain.max()) + 1 if plain.numel() else 0
    blocks = (n_compressed, n_plain) if L.row_compressed(layout) else (n_plain, n_compressed)
    return tuple(pointers.shape[:-1]) + (blocks[0] * block[0], blocks[1] * block[1])


def _check_size(size, block, batch):
    if len(size) != len(batch) + 2:
        raise RuntimeError(f"tensor dimensionality must be sum of batch, base, and dense "
                           f"dimensionalities (={len(batch)} + 2 + 0) but got {len(size)}")
    if tuple(size[:len(batch)]) != batch:
        raise RuntimeError(f"batch dimensions of the size {list(size[:len(batch)])} must "
                           f"equal those of the indices {list(batch)}")
    for d in (0, 1):
        n = size[len(batch) + d]
        if block[d] == 0 or n % block[d]:
            raise RuntimeError(f"tensor shape[{len(batch) + d}] (={n}) must be divisible with "
                               f"blocksize[{d}] (={block[d]}) as defined by values shape")


def _check_indices(layout, pointers, plain, nnz, size, block, dtypes=None):
    """PyTorch's invariants of compressed indices, with its messages; ``dtypes``: the index
    dtypes as given, checked when not None."""
    compressed_name, plain_name = L.index_names(layout)
    rows = L.row_compressed(layout)
    n_compressed = size[0 if rows else 1] // block[0 if rows else 1]
    n_plain = size[1 if rows else 0] // block[1 if rows else 0]
    unit = ("row" if rows else "column") + (" blocks" if L.blocked(layout) else "s")
    if pointers.shape[0] != n_compressed + 1:
        raise RuntimeError(f"{compressed_name}.shape[-1] must be equal to the number of {unit} "
                           f"+ 1 (={n_compressed + 1}), but got {pointers.shape[0]}")
    if plain.shape[0] != nnz:
        raise RuntimeError(f"{plain_name}.shape[-1] must be equal to nnz (={nnz}) as defined "
                           f"by values.shape[0], but got {plain.shape[0]}")
    if dtypes is not None:
        _check_index_dtypes(layout, dtypes, n_plain)
    first, last = pointers[[0, -1]].tolist()
    if first != 0:
        raise RuntimeError(f"`{compressed_name}[..., 0] == 0` is not satisfied.")
    if last != nnz:
        raise RuntimeError(f"`{compressed_name}[..., -1] == nnz` is not satisfied.")
    if not nnz:
        return
    bound = "ncols" if rows else "nrows"
    if int(plain.min()) < 0 or int(plain.max()) >= n_plain:  # (n_plain may pass int32's range)
        raise RuntimeError(f"`0 <= {plain_name} < {bound}` is not satisfied.")
    if bool((pointers.diff() < 0).any()) or not _sorted_within(pointers, plain):
        many = "nrows" if rows else "ncols"
        raise RuntimeError(f"`{plain_name}[..., {compressed_name}[..., i - 1]:"
                           f"{compressed_name}[..., i]] for all i = 1, ..., {many} are sorted "
                           f"and distinct along the last dimension values` is not satisfied.")


def _sorted_within(pointers, plain):
    """Whether the plain indices of each compressed slice increase strictly."""
    key = expand_pointers(pointers) * (int(plain.max()) + 1) + plain
    return bool((key[1:] > key[:-1]).all())


def expand_pointers(pointers):
    """The compressed index (row of CSR, column of CSC) of each stored entry."""
    import ember
    n = pointers.shape[0] - 1
    return ember.repeat_interleave(ember.arange(n, device=pointers.device), pointers.diff())


def block_coordinates(s):
    """The (row, column) of each stored entry (block, for BSR/BSC) of a compressed tensor,
    in stored order."""
    expanded = expand_pointers(s._crow)
    return (expanded, s._col) if L.row_compressed(s._layout) else (s._col, expanded)


def blocksize(s):
    """The block size of a compressed tensor ((1, 1) for CSR/CSC)."""
    if not L.blocked(s._layout):
        return (1, 1)
    return tuple(s._v.shape[s._crow.ndim:s._crow.ndim + 2])


# ----- *_copy functions ------------------------------------------------------------------

def _copy_of(method):
    def copy(input):
        return getattr(input, method)().clone()
    copy.__name__ = copy.__qualname__ = f"{method}_copy"
    copy.__doc__ = f"A copy of ``input.{method}()`` (``torch.{method}_copy``)."
    return copy


crow_indices_copy = _copy_of("crow_indices")
col_indices_copy = _copy_of("col_indices")
ccol_indices_copy = _copy_of("ccol_indices")
row_indices_copy = _copy_of("row_indices")
values_copy = _copy_of("values")
indices_copy = _copy_of("indices")
