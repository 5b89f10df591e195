"""The sparse layouts (defined with ``strided`` in ember/_api.py) and their names in errors."""

from ember._api import sparse_coo, sparse_csr, strided

__all__ = ["sparse_coo", "sparse_csr", "strided", "long_name", "short_name"]

_LONG = {sparse_coo: "sparse coordinate tensor", sparse_csr: "sparse row compressed tensor",
         strided: "strided"}
_SHORT = {sparse_coo: "Sparse", sparse_csr: "SparseCsr", strided: "Strided"}


def long_name(layout):
    """How PyTorch's layout checks name an expected layout ("sparse coordinate tensor")."""
    return _LONG[layout]


def short_name(layout):
    """How PyTorch's errors name a tensor's layout ("Sparse", "SparseCsr")."""
    return _SHORT[layout]
