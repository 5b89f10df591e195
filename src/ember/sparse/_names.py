"""PyTorch's names for the backward nodes of the sparse ops ember writes as composites of
dense ones: the node that made a result's values (or a strided result) is renamed after
PyTorch's kernel (CoalesceBackward0, ToDenseBackward0, MmBackward0, ...). Only a node the op
itself made may be renamed, never one the result shares with an input."""

from ember.ops._recording import rename_node
from ember.sparse._tensor import SparseTensor

__all__ = ["named"]


def named(result, name):
    """``result``, the node of its values (a sparse result) or its own node named ``name``
    (nothing to name when it has none)."""
    rename_node(result._v if isinstance(result, SparseTensor) else result, name)
    return result
