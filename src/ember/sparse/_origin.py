"""Dense origins: how a sparse tensor made from a dense one passes that one a dense gradient.

NOTE [Dense origins]
In PyTorch the gradient ``mm``, ``matmul``, ``addmm`` and ``mv`` give their sparse operand is
dense, and the backward of ``to_sparse`` passes a dense gradient on whole, so
``d.to_sparse() @ w`` gives ``d`` a gradient at every position, not only at the stored ones.
ember's sparse ops are differentiable in the values alone, so a sparse tensor converted from
a dense tensor that records a graph (or from a sparse tensor that has an origin) remembers
that dense tensor, and the products route their sparse operand's gradient to it instead of the
values (``_products._anchor``). The origin is a stand-in that only routes a gradient
(``_Destination``): it is never an operand, keeps nothing of the dense tensor alive, and is
forgotten when the values change in place or are replaced. Conversions and transposes (a
view of the origin) keep it; any other op gives a result without one, whose gradient is the
values' (masked: ``(d.to_sparse() * 2) @ w`` differs from PyTorch's there; carrying origins
through the linear sparse ops would need them combined lazily).
"""

import ember
from ember._tensor import _make
from ember.autograd.function import Function
from ember.backend import xp_of
from ember.sparse._tensor import SparseTensor

__all__ = ["carry", "carry_view", "origin_of"]


class _Destination(Function):
    """A stride-0 dense stand-in for a dense tensor whose gradient reaches that tensor's
    history as it was when the stand-in was made, as ``to_sparse``'s backward does: nothing of
    the tensor is kept or read, so changing it in place or detaching it later changes nothing,
    and it is freed when the user drops it."""

    @staticmethod
    def forward(ctx, origin):
        xp = xp_of(origin._data)
        return _make(xp.broadcast_to(xp.zeros((), origin._data.dtype), origin.shape))

    @staticmethod
    def backward(ctx, grad):
        return grad


def carry(result, source):
    """Give ``result`` (``source`` converted: the same elements) the dense origin ``source``
    leads to: a stand-in for ``source`` when it is dense and records a graph, its origin when
    it is sparse."""
    if not isinstance(result, SparseTensor) or result is source or not ember.is_grad_enabled():
        return result
    if isinstance(source, SparseTensor):
        origin = origin_of(source)
    else:
        origin = _Destination.apply(source) if source.requires_grad else None
    if origin is not None:
        result._origin = (origin, result._v, result._v._version)
    return result


def carry_view(result, source, view):
    """Give ``result`` (``source`` rearranged without arithmetic: a transpose) the view
    ``view(origin)`` of ``source``'s origin, which costs no copy."""
    if result is source or not ember.is_grad_enabled():
        return result
    origin = origin_of(source)
    if origin is None and source._leaf and source.requires_grad:
        # a sparse leaf's own dense stand-in, so that ``x @ w.t()`` gives ``w`` a dense
        # gradient as ``w @ x`` does (PyTorch's mm gives one through the transpose too)
        origin = source._dense_grad_anchor()
    if origin is not None:
        result._origin = (view(origin), result._v, result._v._version)
    return result


def origin_of(s):
    """The dense origin of the sparse tensor ``s``: where a product sends its dense gradient
    (None when it has none, or its values changed or were replaced since ``s`` was made)."""
    if s._origin is None:
        return None
    origin, values, values_version = s._origin
    if s._v is not values or values._version != values_version:
        s._origin = None
        return None
    return origin
