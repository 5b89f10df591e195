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
forgotten when the values change in place or are replaced. Transposes keep it (a view of it);
conversions keep it, passing the gradient on in their source's layout when they change it
(``_ToLayout``: ``w.to_sparse_csr() @ x`` gives a COO leaf ``w`` a COO gradient at every
position, as PyTorch does); a sparse leaf converted or transposed starts one from its own dense
stand-in. The linear ops by a number (``* 2``, ``/ 2``, ``neg``, ``clone``) and sums of sparse
tensors combine their operands' origins lazily (``_Scaled``); any other op gives a result
without one, whose gradient is the values' (masked, where PyTorch's may be dense).
A COO sum's values send their gradient to its origin too, as a COO tensor in the sum's
pattern (``_InPattern``): PyTorch's add passes it on whole, so ``(a + b).to_dense()`` gives
the leaf ``a`` a gradient at ``b``'s positions as well; ``dense + s`` passes ``s``'s origin a
dense gradient (``dense_route``).
"""

import numbers

import ember
from ember._tensor import Tensor, _make
from ember.autograd.function import Function
from ember.backend import xp_of
from ember.sparse._tensor import SparseTensor

__all__ = ["carry", "carry_linear", "carry_view", "dense_route", "in_layout", "origin_of",
           "retained_origin", "to_dense_unmasked"]


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
        # (to_sparse's backward: dense)
        return grad if grad.layout is ember.strided else grad.to_dense()


class _ToLayout(Function):
    """A stand-in for the origin of a sparse tensor of ``layout`` that was converted (or
    multiplied by a sparse matrix): the gradient goes back to the origin in ``layout`` (a dense
    one's zeros dropped), as PyTorch's conversions pass theirs."""

    @staticmethod
    def forward(ctx, origin, layout):
        ctx.layout = layout
        xp = xp_of(origin._data)
        return _make(xp.broadcast_to(xp.zeros((), origin._data.dtype), origin.shape))

    @staticmethod
    def backward(ctx, grad):
        if grad.layout is ctx.layout:
            return grad, None
        return grad.to_sparse(layout=ctx.layout), None


def in_layout(origin, layout):
    """``origin`` passing its gradient on in ``layout`` (a sparse tensor's: see ``_ToLayout``;
    blocked layouts, which need a block size, get it dense)."""
    if layout is ember.strided or layout in (ember.sparse_bsr, ember.sparse_bsc):
        return origin
    return _ToLayout.apply(origin, layout)


def carry(result, source):
    """Give ``result`` (``source`` converted: the same elements) the dense origin ``source``
    leads to: a stand-in for ``source`` when it is dense and records a graph, its origin (a
    sparse leaf's dense stand-in) when it is sparse, passing its gradient on in ``source``'s
    layout when the conversion changes it."""
    if not isinstance(result, SparseTensor) or result is source or not ember.is_grad_enabled():
        return result
    if isinstance(source, SparseTensor):
        origin = origin_of(source)
        if origin is None and source._leaf and source.requires_grad:
            # (PyTorch's conversions pass it dense), through a node of its own (retain_grad)
            origin = _Scaled.apply(None, source._dense_grad_anchor(), 1)
        if origin is not None and result._layout is not source._layout:
            origin = in_layout(origin, source._layout)
    else:
        origin = _Destination.apply(source) if source.requires_grad else None
    if origin is not None:
        result._origin = (origin, result._v, result._v._version)
    return result


class _Scaled(Function):
    """A stand-in for ``scale`` times (a number) the origin of a sparse tensor, or for the
    sum ``first + scale * second`` of two origins: the dense gradient goes back scaled, as
    PyTorch's ``mul``, ``div``, ``neg`` and ``add`` pass theirs."""

    @staticmethod
    def forward(ctx, first, second, scale):
        ctx.scale = scale.conjugate() if isinstance(scale, complex) else scale
        like = first if first is not None else second
        xp = xp_of(like._data)
        return _make(xp.broadcast_to(xp.zeros((), like._data.dtype), like.shape))

    @staticmethod
    def backward(ctx, grad):
        needs = ctx.needs_input_grad
        scaled = grad if ctx.scale == 1 else grad * ctx.scale
        return grad if needs[0] else None, scaled if needs[1] else None, None


def _route(s):
    """Where a product sends the dense gradient of ``s``: its origin, or its own dense
    stand-in when it is a sparse leaf (None when neither)."""
    origin = origin_of(s)
    if origin is None and s._leaf and s.requires_grad:
        origin = s._dense_grad_anchor()
    return origin


def carry_linear(result, scale, source, other=None):
    """Give ``result`` (``scale * source``, or ``source + scale * other`` of sparse tensors;
    ``scale`` a number) the origins of its operands combined, so that a product takes the
    dense gradient PyTorch's gives (``(w * 2) @ x``); none when an operand that requires grad
    has no origin (the product then differentiates the values, which hold its history)."""
    if isinstance(scale, Tensor) and scale.ndim == 0 and not scale.requires_grad:
        scale = scale.item()                # a constant factor, as a number
    if not ember.is_grad_enabled() or not isinstance(result, SparseTensor) \
            or not isinstance(scale, numbers.Number):
        return result
    routes = []
    for s in (source, other):
        route = None if s is None or not s.requires_grad else _route(s)
        if route is None and s is not None and s.requires_grad:
            return result
        routes.append(route)
    if routes == [None, None]:
        return result
    if other is None:
        routes = [None, routes[0]]
    origin = _Scaled.apply(routes[0], routes[1], scale)
    if other is not None and result._layout is ember.sparse_coo:
        # the values' gradient reaches the operands in the sum's pattern, as PyTorch's add
        # passes it on whole ((a + b).to_dense() gives a b's positions too)
        from ember.ops._recording import rename_node
        name = type(result._v.grad_fn).__name__
        result._v = rename_node(_InPattern.apply(origin, result._v.detach(), result), name)
    result._origin = (origin, result._v, result._v._version)
    return result


class _InPattern(Function):
    """The values of a COO ``result`` whose gradient goes to its origin as a COO tensor with
    the result's (coalesced) indices, not masked to each operand's own pattern."""

    @staticmethod
    def forward(ctx, origin, values, result):
        ctx.pattern = result.detach()
        return values

    @staticmethod
    def backward(ctx, grad):
        from ember.sparse._convert import first_of_duplicates
        from ember.sparse._tensor import coo
        s = ctx.pattern
        if s._coalesced:
            return coo(s._i, grad, s._size, True), None, None
        # duplicates of one element share its gradient: kept once, as in a leaf's gradient
        keep, indices = first_of_duplicates(s)
        return coo(indices, grad.index_select(0, keep), s._size, True), None, None


def dense_route(s):
    """Where a dense gradient of ``s`` goes whole, dense (None when it has no origin and is no
    sparse leaf, or no graph is recorded): ``dense + s`` passes one, as PyTorch's add does."""
    return _route(s) if ember.is_grad_enabled() and s.requires_grad else None


def to_dense_unmasked(s, to_dense):
    """``to_dense(s)`` whose gradient reaches ``s`` whole, not masked to its stored elements
    (``to_dense(masked_grad=False)``), when ``s`` has an origin or is a sparse leaf."""
    route = _route(s) if ember.is_grad_enabled() and s.requires_grad else None
    if route is None:
        return to_dense(s)
    return to_dense(s.detach()) + in_layout(route, s._layout)


def in_pattern(values):
    """Whether a sum's ``values`` send their gradient to its origin (see ``_InPattern``)."""
    node = values.grad_fn
    return node is not None and getattr(node, "_function", None) is _InPattern


def retained_origin(s):
    """The origin of ``s`` (None if none) told to retain its gradient, for ``s.retain_grad()``
    (what reaches it passes through ``s`` in PyTorch: all of it from ``s`` or tensors made
    from ``s``)."""
    origin = origin_of(s)
    if origin is None or origin.grad_fn is None:
        return None
    origin.retain_grad()
    return origin


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
