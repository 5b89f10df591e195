"""PyTorch's names for the backward nodes of the sparse ops ember writes as composites of
dense ones: the node that made a result's values (or a strided result) is renamed after
PyTorch's kernel (CoalesceBackward0, ToDenseBackward0, MmBackward0, ...). Only a node the op
itself made may be renamed, never one the result shares with an input."""

from ember.ops._recording import rename_node
from ember.sparse._tensor import SparseTensor

__all__ = ["named", "freeing"]


def named(result, name):
    """``result``, the node of its values (a sparse result) or its own node named ``name``
    (nothing to name when it has none)."""
    rename_node(result._v if isinstance(result, SparseTensor) else result, name)
    return result


def freeing(t, name):
    """``t`` (a dense tensor: a sparse tensor's values), its node named ``name`` and freed by a
    backward without ``retain_graph`` as PyTorch's node of that name, which saves tensors, is
    (a second backward through it raises): the alias it is saves nothing of its own."""
    rename_node(t, name)
    node = t._grad_fn
    if node is not None:
        cls = type(node)
        freed = _FREEING.get(cls)
        if freed is None:
            freed = _FREEING[cls] = type(name, (cls,), {"__slots__": (),
                                                        "_release": _release_all})
        node.__class__ = freed
    return t


def _release_all(node):
    # what the node's apply unpacks then raises PyTorch's "backward ... a second time"
    node._released = True


_FREEING = {}                   # renamed node class -> its subclass that frees at backward
