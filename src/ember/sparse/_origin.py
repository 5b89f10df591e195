"""Dense origins: how a sparse tensor made from a dense one passes that one a dense gradient.

NOTE [Dense origins]
In PyTorch the gradient ``mm``, ``matmul``, ``addmm`` and ``mv`` give their sparse operand is
dense, and the backward of ``to_sparse`` passes a dense gradient on whole, so
``d.to_sparse() @ w`` gives ``d`` a gradient at every position, not only at the stored ones.
ember's sparse ops are differentiable in the values alone, so a sparse tensor converted from
a dense tensor that records a graph (or from a sparse tensor that has an origin) remembers
that dense tensor, and the products route their sparse operand's gradient to it instead of the
values (``_products._anchor``). The origin is only ever a gradient's destination, never an
operand: it is forgotten when the origin or the values change in place (their versions move)
or the values are replaced. Conversions and transposes (a view of the origin) keep it; any
other op gives a result without one, whose gradient is the values' (masked:
``(d.to_sparse() * 2) @ w`` differs from PyTorch's there; carrying origins through the linear
sparse ops without materialising dense tensors would need them built lazily).
"""

import ember
from ember.sparse._tensor import SparseTensor

__all__ = ["carry", "carry_view", "origin_of"]


def carry(result, source):
    """Give ``result`` (``source`` converted: the same elements) the dense origin ``source``
    leads to: ``source`` itself when it is dense and records a graph, its origin when it is
    sparse."""
    if not isinstance(result, SparseTensor) or result is source:
        return result
    origin = origin_of(source) if isinstance(source, SparseTensor) else (
        source if source.requires_grad and ember.is_grad_enabled() else None)
    if origin is not None:
        result._origin = (origin, origin._version, result._v, result._v._version)
    return result


def carry_view(result, source, view):
    """Give ``result`` (``source`` rearranged without arithmetic: a transpose) the view
    ``view(origin)`` of ``source``'s origin, which costs no copy."""
    origin = origin_of(source)
    if origin is not None and result is not source and ember.is_grad_enabled():
        seen = view(origin)
        result._origin = (seen, seen._version, result._v, result._v._version)
    return result


def origin_of(s):
    """The dense origin of the sparse tensor ``s``, or None when it has none or it, or the
    values of ``s``, changed since ``s`` was made."""
    if s._origin is None:
        return None
    origin, version, values, values_version = s._origin
    if origin._version != version or s._v is not values or values._version != values_version:
        s._origin = None
        return None
    return origin
