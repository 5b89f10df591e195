"""Gradients that PyTorch computes with a backward kernel taking the forward's input
(avg_pool2d_backward, adaptive_avg_pool2d_backward, reflection_pad2d_backward, ...), though
the value does not depend on it: under create_graph PyTorch's gradient requires grad wherever
that input does (its derivative there 0), so a penalty on it backpropagates (zeros) instead
of raising "element 0 of tensors does not require grad". A kernel that takes several
(convolution_backward: the input and the weight) gives each gradient that requires grad
where any of them does, though a second backward reaches none through one computed without
it (``tied_to``)."""

from ember.autograd.grad_mode import STATE as _GRAD
from ember.backend import xp_of
from ember.ops._registry import op, rename_node


def through_input(g, x, name):
    """``g``, the gradient for ``x``; under create_graph, where ``x`` requires grad, hung
    from a node ``name`` with an edge of derivative 0 to ``x`` (zeros, not none, there when
    ``g`` requires grad through the incoming gradient too)."""
    if not _GRAD.grad_enabled or not x.requires_grad:
        return g
    from ember.ops.activations import masked      # (activations imports the pooling ops)
    return masked(g, xp_of(g._data).ones((), g._data.dtype), x, name)


@op("_tied_grad(grad, input)", inputs=2, method=False, saves_inputs=False)
def _tied_grad(xp, g, x):
    """``grad`` itself, with an edge to ``input`` of no derivative."""
    return g


@_tied_grad.derivative
def _(grad, g, x):
    return grad, None


def tied_to(g, sources, name):
    """``g``, a gradient from a backward kernel taking ``sources``; under create_graph, where
    nothing in ``g`` requires grad but a source does, hung from a node ``name`` with an edge
    to that source of no derivative (a second backward gives it none)."""
    if g is None or not _GRAD.grad_enabled or g.requires_grad:
        return g
    for source in sources:
        if source is not None and source.requires_grad:
            return rename_node(_tied_grad(g, source), name)
    return g
