"""The sparse layouts (defined with ``strided`` in ember/_api.py) and their names in errors.

The four compressed layouts differ in two things only: which dimension the compressed indices
run along (rows for CSR/BSR, columns for CSC/BSC) and whether each stored value is one
element or a block (BSR/BSC); ``row_compressed`` and ``blocked`` answer them."""

from ember._api import sparse_bsc, sparse_bsr, sparse_coo, sparse_csc, sparse_csr, strided

__all__ = ["sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "strided",
           "COMPRESSED", "long_name", "short_name", "row_compressed", "blocked",
           "index_names"]

COMPRESSED = (sparse_csr, sparse_csc, sparse_bsr, sparse_bsc)

_LONG = {sparse_coo: "sparse coordinate tensor", sparse_csr: "sparse row compressed tensor",
         sparse_csc: "sparse column compressed tensor", strided: "strided"}
_SHORT = {sparse_coo: "Sparse", sparse_csr: "SparseCsr", sparse_csc: "SparseCsc",
          sparse_bsr: "SparseBsr", sparse_bsc: "SparseBsc", strided: "Strided"}


def long_name(layout):
    """How PyTorch's layout checks name an expected layout ("sparse coordinate tensor")."""
    return _LONG[layout]


def short_name(layout):
    """How PyTorch's errors name a tensor's layout ("Sparse", "SparseCsr")."""
    return _SHORT[layout]


def row_compressed(layout):
    """Whether a compressed layout compresses the rows (CSR, BSR) rather than the columns."""
    return layout is sparse_csr or layout is sparse_bsr


def blocked(layout):
    """Whether a compressed layout stores blocks (BSR, BSC) rather than elements."""
    return layout is sparse_bsr or layout is sparse_bsc


def index_names(layout):
    """The names of a compressed layout's (compressed, plain) indices."""
    return ("crow_indices", "col_indices") if row_compressed(layout) else \
        ("ccol_indices", "row_indices")
