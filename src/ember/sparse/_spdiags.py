"""``torch.sparse.spdiags``: a sparse matrix from diagonals stored row-wise (SciPy's dia
format), as finite-difference operators are built."""

import numpy as np

from ember._tensor import Tensor

_LAYOUTS = {"sparse_coo": "Sparse", "sparse_csr": "SparseCsr", "sparse_csc": "SparseCsc",
            "strided": "Strided", "sparse_bsr": "SparseBsr", "sparse_bsc": "SparseBsc"}


def spdiags(diagonals, offsets, shape, layout=None):
    """A sparse 2-D tensor holding row ``i`` of ``diagonals`` along the diagonal
    ``offsets[i]`` (0 the main one, > 0 above it, < 0 below it); along each diagonal the
    output's column indexes the row of ``diagonals`` (as SciPy's ``spdiags``). ``layout``:
    ``sparse_coo`` (the default; uncoalesced), ``sparse_csr`` or ``sparse_csc``."""
    import ember
    from ember.sparse._tensor import sparse_coo_tensor
    for name, arg in (("diagonals", diagonals), ("offsets", offsets)):
        if not isinstance(arg, Tensor):
            position = 1 if name == "diagonals" else 2
            raise TypeError(f"_spdiags(): argument '{name}' (position {position}) must be "
                            f"Tensor, not {type(arg).__name__}")
    name = None if layout is None else str(layout).rsplit(".", 1)[-1]
    if name not in (None, "sparse_coo", "sparse_csr", "sparse_csc"):
        raise RuntimeError(f"Only output layouts (Sparse, SparseCsc, SparseCsr) are supported, "
                           f"got {_LAYOUTS.get(name, name)}")
    if len(shape) != 2:
        raise RuntimeError("Output shape must be 2d")
    if diagonals.ndim > 2:
        raise RuntimeError("Diagonals must be vector or matrix")
    if offsets.ndim > 1:
        raise RuntimeError("Offsets must be scalar or vector")
    if offsets.dtype != ember.int64:
        raise RuntimeError(f"Offset Tensor must have dtype Long but got "
                           f"{offsets.dtype._torch_name}")
    rows = diagonals.reshape(1, -1) if diagonals.ndim < 2 else diagonals
    ks = [int(k) for k in offsets.reshape(-1).tolist()]
    if rows.shape[0] != len(ks):
        raise RuntimeError(f"Number of diagonals ({rows.shape[0]}) does not match the number "
                           f"of offsets ({len(ks)})")
    if len(set(ks)) != len(ks):
        raise RuntimeError("Offset tensor contains duplicate values")
    n_rows, n_cols = (int(s) for s in shape)
    which, cols = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for i, k in enumerate(ks):       # column j of the diagonal k sits at row j - k
        j = np.arange(max(0, k), min(n_cols, n_rows + k, rows.shape[1]), dtype=np.int64)
        which.append(np.full(len(j), i, dtype=np.int64))
        cols.append(j)
    which, cols = np.concatenate(which), np.concatenate(cols)
    row_of = cols - np.asarray(ks, dtype=np.int64)[which]
    device = diagonals.device
    indices = ember.from_numpy(np.stack([row_of, cols])).to(device)
    values = rows[ember.from_numpy(which).to(device), ember.from_numpy(cols).to(device)]
    out = sparse_coo_tensor(indices, values, (n_rows, n_cols), check_invariants=False,
                            is_coalesced=not len(cols))
    if name == "sparse_csr":
        return out.to_sparse_csr()
    if name == "sparse_csc":
        return out.to_sparse_csc()
    return out

