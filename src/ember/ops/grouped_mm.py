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


def grouped_mm(mat_a, mat_b, *, offs=None, bias=None, out_dtype=None):
    """Grouped matrix products: 2-D x 3-D (groups of rows of ``mat_a``), 2-D x 2-D (groups
    of the inner dim), 3-D x 2-D (groups of columns of the result), each split by ``offs``,
    or 3-D x 3-D (a batch of products, without ``offs``)."""
    kind = (mat_a.dim(), mat_b.dim())
    if kind not in ((2, 2), (2, 3), (3, 2), (3, 3)):
        raise RuntimeError(f"grouped_mm: mat_a and mat_b must be 2-D or 3-D, got {kind[0]}-D "
                           f"and {kind[1]}-D")
    if (offs is None) != (kind == (3, 3)):
        raise RuntimeError("grouped_mm: offs is required unless both matrices are 3-D" if
                           offs is None else "grouped_mm: offs must be None for 3-D x 3-D")
    if kind == (3, 3):
        out = ember.bmm(mat_a, mat_b)
    else:
        split = {(2, 3): _split_rows, (2, 2): _split_inner, (3, 2): _split_columns}[kind]
        out = split(mat_a, mat_b, offs)
    if bias is not None:
        out = out + bias
    return out if out_dtype is None else out.to(out_dtype)


FUNCTIONAL = {"grouped_mm": grouped_mm}
