"""Products of a CSR matrix with a dense one, on the library each device has.

NumPy arrays go to SciPy's CSR product; CuPy arrays to cupyx.scipy.sparse's (cuSPARSE) when
it takes their dtype. Anything else (float16 on a GPU, a CuPy without cupyx.scipy.sparse) runs
a gather and an ``add.at`` over the nonzeros, which every backend has.

Measured (10k x 10k, 100k nonzeros, times a 10k x 64 float32 matrix, one CPU core): SciPy
3.4 ms, while the same product from ember ops (index_select, mul, index_add) takes 37 ms.
"""

import numpy as np

from ember.backend import combine_at

__all__ = ["csr_times_dense"]

_SCIPY_KINDS = frozenset("fciu")


def csr_times_dense(xp, crow, col, values, dense, n_rows):
    """``A @ dense`` for the ``n_rows`` x ``dense.shape[0]`` CSR matrix A = (crow, col,
    values), duplicates summed; ``dense`` is 1-D or 2-D; the result has ``values``' dtype."""
    shape = (n_rows, dense.shape[0])
    dtype = values.dtype
    if xp is np:
        if dtype.kind in _SCIPY_KINDS and dtype.itemsize >= 4 and dtype == dense.dtype:
            import scipy.sparse
            matrix = scipy.sparse.csr_matrix((values, col, crow), shape=shape)
            return np.asarray(matrix @ dense, dtype=dtype)
    elif dtype in (np.float32, np.float64, np.complex64, np.complex128):
        try:
            import cupyx.scipy.sparse as gpu_sparse
        except ImportError:
            gpu_sparse = None
        if gpu_sparse is not None:
            matrix = gpu_sparse.csr_matrix((values, col, crow), shape=shape)
            product = matrix @ xp.ascontiguousarray(dense, dtype=dtype)
            return xp.asarray(product).astype(dtype, copy=False)
    return _gathered(xp, crow, col, values, dense, n_rows)


def _gathered(xp, crow, col, values, dense, n_rows):
    """The product as a gather of ``dense``'s rows and a scatter-add into the result's."""
    # (CuPy's repeat takes no array of counts: each element's row by a search instead)
    rows = xp.searchsorted(crow, xp.arange(col.shape[0]), side="right") - 1
    wide = np.float32 if values.dtype.itemsize < 4 and values.dtype.kind in "fV" else None
    vals = values if wide is None else values.astype(wide)
    picked = dense[col] if wide is None else dense[col].astype(wide)
    scale = vals if dense.ndim == 1 else vals[:, None]
    out = xp.zeros((n_rows,) + dense.shape[1:], dtype=picked.dtype)
    combine_at(xp, np.add, out, rows, picked * scale)
    return out.astype(values.dtype, copy=False)
