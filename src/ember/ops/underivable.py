"""Gradients PyTorch computes with a backward kernel that has no derivative of its own
(``_cdist_backward``): under ``create_graph`` they hang from a node named as PyTorch names it
(CdistBackwardBackward0) that refuses a further backward in PyTorch's words."""

from ember.autograd.grad_mode import no_grad
from ember.ops._registry import op


@op("_underivable(tensors, value, node, kernel)", inputs=("tensors*",), method=False,
    out=False, scalars=False, saves_inputs=False)
def _underivable(xp, tensors, value, node, kernel):
    """``value``, a backend array PyTorch's backward kernel ``kernel`` computes from
    ``tensors``, recorded as the node ``node``."""
    return value


@_underivable.named_by
def _(flat, params, outputs):
    return params[1]


@_underivable.derivative
def _(grad, tensors, value, node, kernel):
    raise NotImplementedError(f"the derivative for '{kernel}' is not implemented.")


def underivable(tensors, compute, node, kernel):
    """``compute()``'s gradients (a tuple, entries may be None), computed without a graph and
    each hung from one ``node`` over ``tensors`` whose backward raises PyTorch's error for
    ``kernel``."""
    with no_grad():
        grads = compute()
    return tuple(None if g is None else _underivable(tensors, g._data, node, kernel)
                 for g in grads)
