"""Dense origins: how a sparse tensor made from a dense one passes that one a dense gradient.

NOTE [Dense origins]
In PyTorch the gradient ``mm``, ``matmul``, ``addmm`` and ``mv`` give their sparse operand is
dense, and the backward of ``to_sparse`` (and of the linear sparse ops: ``*``, ``/``, ``+``,
``-``, negation, transposes, coalescing, layout conversions) passes a dense gradient on
whole, so ``(d.to_sparse() * 2) @ w`` gives ``d`` a gradient at every position, not only at the
stored ones. ember's sparse ops are differentiable in the values alone, so a sparse tensor made
from a dense tensor that requires grad also keeps ``_origin``: a dense tensor equal to its
``to_dense()`` whose graph reaches that dense tensor. The linear ops compute the result's
origin from their operands' (``follow``); the products route their sparse operand's gradient
to the origin instead of the values (``_products._anchor``). Any other op drops it, and its
result's gradient is the values' one (``torch.sparse.mm``, ``to_dense``, ``sin``, ... : masked
as in PyTorch, or where PyTorch raises).
"""

import ember
from ember.sparse._tensor import SparseTensor

__all__ = ["stand_in", "follow", "carry", "dense_origin"]


def dense_origin(x):
    """The dense origin a sparse tensor made from ``x`` keeps: ``x`` itself when it is dense
    and records a graph, the origin ``x`` keeps when it is sparse, else None."""
    if isinstance(x, SparseTensor):
        return x._origin
    if x.requires_grad and ember.is_grad_enabled():
        return x
    return None


def carry(result, source):
    """Give ``result`` (``source`` converted, same elements) the origin ``source`` leads to."""
    origin = dense_origin(source)
    if origin is not None and isinstance(result, SparseTensor) and result is not source:
        result._origin = origin
    return result


def stand_in(s):
    """A dense tensor equal to ``s.to_dense()`` whose gradient goes where PyTorch sends the
    dense gradient of ``s``: its origin, the dense stand-in of a leaf, or (masked) its values."""
    if s._origin is not None:
        return s._origin
    dense = s.to_dense()
    if s._leaf and s.requires_grad:
        return s._dense_grad_anchor() + dense.detach()
    return dense


def follow(result, fn, *operands):
    """``result`` of a linear op ``fn`` on ``operands`` that PyTorch differentiates densely in
    its sparse operands, when one of them has an origin: a sparse one gets the origin ``fn``
    computes from the operands' dense stand-ins; a dense one is computed so (same values, the
    gradient routed as in PyTorch). Otherwise ``result`` as it is."""
    if not ember.is_grad_enabled():
        return result
    if not any(isinstance(x, SparseTensor) and x._origin is not None for x in operands):
        return result
    dense = fn(*(stand_in(x) if isinstance(x, SparseTensor) else x for x in operands))
    if not isinstance(result, SparseTensor):
        return dense
    result._origin = dense
    return result
