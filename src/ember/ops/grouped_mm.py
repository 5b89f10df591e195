"""``F.grouped_mm``: several matrix products in one call, the groups given by ``offs`` (the
end offset of each group along the dim being split). A composition of ``matmul``s, so its
gradient comes from theirs."""

import ember


def _bounds(offs):
    ends = [int(e) for e in offs.tolist()]
    return list(zip([0] + ends[:-1], ends))


def _split_rows(mat_a, mat_b, offs):
    """(M, K) @ (G, K, N): rows ``start:end`` of ``mat_a`` times ``mat_b[g]``."""
    pieces = [mat_a[s:e] @ mat_b[g] for g, (s, e) in enumerate(_bounds(offs))]
    tail = mat_a.shape[0] - (int(offs[-1]) if len(offs) else 0)
    if tail > 0:        # rows past the last group are not computed: zeros
        pieces.append(mat_a.new_zeros(tail, mat_b.shape[-1]))
    return ember.cat(pieces, 0)


def _split_inner(mat_a, mat_b, offs):
    """(M, K) @ (K, N): one (M, N) product per slice ``start:end`` of K, stacked."""
    return ember.stack([mat_a[:, s:e] @ mat_b[s:e] for s, e in _bounds(offs)])


def _split_columns(mat_a, mat_b, offs):
    """(G, M, K) @ (K, N): columns ``start:end`` of the result from ``mat_a[g]``."""
    pieces = [mat_a[g] @ mat_b[:, s:e] for g, (s, e) in enumerate(_bounds(offs))]
    return ember.cat(pieces, 1)


_DTYPES = ("float32", "bfloat16", "float16")


def _check_operand(mat, name):
    if str(mat.dtype).split(".")[-1] not in _DTYPES:
        raise RuntimeError(f"Expected {name} to be Float32, BFloat16 or Float16 matrix, got "
                           f"{mat.dtype._torch_name}")


def _check_strides(mat):
    """PyTorch's layout rule: one of the matrix dims is unit-stride, the other a multiple of
    16 bytes."""
    rows, cols = mat.stride()[-2:]
    lead = rows if cols == 1 else cols if rows == 1 else None
    if lead is None:
        raise RuntimeError(f"Invalid strides/sizes, got {list(mat.stride())} for strides and "
                           f"{list(mat.shape)} for sizes")
    if lead * mat.element_size() % 16:
        raise RuntimeError("strides should be multiple of 16 bytes")


def _check_offs(offs, kind):
    if (offs is None) != (kind == (3, 3)):
        raise RuntimeError("Have to provide offsets if there is a 2d matrix, or no offset if "
                           "both matrices are 3d")
    if offs is not None:
        if offs.dim() != 1:
            raise RuntimeError("offs has to be 1D")
        if offs.dtype is not ember.int32:
            raise RuntimeError("Offsets have to be int32")


def _check_groups(mat_a, mat_b, offs, kind):
    if kind == (3, 3) and mat_a.shape[0] != mat_b.shape[0]:
        raise RuntimeError("batched dimension has to match")
    groups = {(2, 3): mat_b, (3, 2): mat_a}.get(kind)
    if groups is not None and offs.numel() != groups.shape[0]:
        raise RuntimeError("matrix batch sizes have to match")


def _check(mat_a, mat_b, offs, bias, out_dtype):
    """PyTorch's checks of grouped_mm's arguments, in its order."""
    _check_operand(mat_a, "mat_a")
    _check_operand(mat_b, "mat_b")
    if mat_a.dim() not in (2, 3):
        raise RuntimeError("mat_a has to be 2 or 3d")
    if mat_b.dim() not in (2, 3):
        raise RuntimeError("mat_b has to be 2 or 3d")
    if mat_a.shape[-1] != mat_b.shape[-2]:
        raise RuntimeError("contraction dimension of mat_a and mat_b must match")
    _check_strides(mat_a)
    _check_strides(mat_b)
    kind = (mat_a.dim(), mat_b.dim())
    _check_offs(offs, kind)
    if bias is not None:
        raise RuntimeError("Bias not supported yet")
    if out_dtype is not None and out_dtype is not mat_a.dtype:
        raise RuntimeError("Grouped gemm output dtype must match `mat_a` dtype")
    _check_groups(mat_a, mat_b, offs, kind)
    return kind


def grouped_mm(mat_a, mat_b, *, offs=None, bias=None, out_dtype=None):
    """Grouped matrix products: 2-D x 3-D (groups of rows of ``mat_a``), 2-D x 2-D (groups
    of the inner dim), 3-D x 2-D (groups of columns of the result), each split by ``offs``
    (int32 end offsets), or 3-D x 3-D (a batch of products, without ``offs``). As PyTorch's,
    takes float32, bfloat16 or float16 matrices, no ``bias``, and an ``out_dtype`` only of
    ``mat_a``'s dtype."""
    kind = _check(mat_a, mat_b, offs, bias, out_dtype)
    if kind == (3, 3):
        return ember.bmm(mat_a, mat_b)
    split = {(2, 3): _split_rows, (2, 2): _split_inner, (3, 2): _split_columns}[kind]
    return split(mat_a, mat_b, offs)


FUNCTIONAL = {"grouped_mm": grouped_mm}
