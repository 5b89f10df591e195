"""Gradients PyTorch computes with a backward kernel that has no derivative of its own
(``_cdist_backward``): under ``create_graph`` they hang from a node named as PyTorch names it
(CdistBackwardBackward0) that refuses a further backward in PyTorch's words. And the inputs
of composites standing for PyTorch kernels without a forward derivative (``grid_sample``),
or without a second one (``segment_reduce``): ``_kernel_input`` declares the refusals."""

from ember.autograd._forward_traces import TRACES as _FORWARD_TRACES
from ember.autograd.forward_ad import STATE as _DUAL
from ember.autograd.grad_mode import STATE as _GRAD
from ember.autograd.grad_mode import no_grad
from ember.ops._registry import op
from ember.ops.random_nodes import NOT_IMPLEMENTED, sampled


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
    return tuple(None if g is None else on_values(
        lambda ts, v: _underivable(ts, v._data, node, kernel), tensors, g) for g in grads)


def on_values(fn, tensors, value):
    """``fn(tensors, value)``, which records a node over ``tensors`` passing ``value``'s
    array through; inside vmap (a BatchedTensor among them: jacrev of jacrev), ``fn`` runs on
    the physical values, where autograd happens (NOTE [Batched tensors]), and the result is
    batched again: the node refuses the next backward under vmap too, as PyTorch's does."""
    from ember.func._batched import _levels, active_levels, materialize, rewrap
    batched = set().union(*(_levels(t) for t in tensors), _levels(value))
    if not batched:
        return fn(tensors, value)
    # only the levels they are batched at: outer vmaps' batches are physical here already
    levels = [lv for lv in active_levels() if lv.level in batched]
    return rewrap(fn([materialize(t, levels) for t in tensors], materialize(value, levels)),
                  levels)


@op("_kernel_input(input, kernel, backward=None, saved=True, read=None)", view=True,
    method=False, out=False, grad_fn_name="AliasBackward0")
def _kernel_input(xp, x, kernel, backward, saved, read):
    """``input`` itself (a view) entering a composite of ember ops that stands for PyTorch's
    kernel ``kernel``, which has no forward derivative (nor, where ``backward`` names its
    backward kernel, a second derivative)."""
    return x.view()


_kernel_input.refuse_forward_ad(lambda flat, params: params[0])
# (an unsaved input is kept through an alias of its own: the create_graph refusal's edge)
_kernel_input.aliases_inputs(0, when=lambda flat, params: not params[2])


# the backward kernels whose node PyTorch names (and whose refusal it words as
# ``_underivable``'s); the others' nodes are "NotImplemented"
_NAMED_BACKWARDS = {"_embedding_bag_backward": "EmbeddingBagBackwardBackward0"}


@_kernel_input.derivative
def _(grad, x, kernel, backward, saved, read):
    if backward is None or not _GRAD.grad_enabled:
        return grad
    # create_graph: the composite's gradient, hung from a node refusing the next backward
    with no_grad():
        value = grad.clone()
    node = _NAMED_BACKWARDS.get(backward)
    if node is not None:
        def hang(ts, g):
            return _underivable(ts, g._data, node, backward)
    else:
        def hang(ts, g):
            return sampled(ts, g, NOT_IMPLEMENTED, backward)
    # (the node's edges: the incoming gradient, and the input where the backward kernel
    # takes it: the gradient requires grad, and reaches the input, as PyTorch's)
    edges = [x] if (saved if read is None else read) else []
    if value.is_sparse:         # a sparse gradient (embedding_bag's): its values hang
        return value._with_values(on_values(hang, [grad._v, *edges], value._v))
    return on_values(hang, [grad, *edges], value)


def forward_ad_active():
    """Whether forward AD may reach a call: a forward-mode transform traces (func.jvp,
    jacfwd, linearize, hessian), or a dual level is open."""
    return bool(_FORWARD_TRACES.starts) or _DUAL.level is not None


def refuse_forward_ad(kernel, *tensors):
    """Raise PyTorch's error for its kernel ``kernel``, which has no forward derivative,
    where forward AD reaches any of ``tensors`` (None: absent), the inputs of a composite
    standing for that kernel; nothing to do (nor to spend) otherwise."""
    if forward_ad_active():
        for t in tensors:
            if t is not None:
                _kernel_input(t, kernel)


def kernel_input(x, kernel, backward, saved=True, read=None):
    """``x`` (a view of it where a graph may be recorded or forward AD may reach it) for a
    composite standing for PyTorch's kernel ``kernel``, without a forward derivative, whose
    backward kernel ``backward`` has no derivative: the composite's gradients for ``x``
    refuse a second backward, as PyTorch's (``Op.refuse_forward_ad`` refuses the first).
    ``saved``: False where PyTorch's kernel does not save ``x``, so writing it before
    backward is allowed. ``read``: whether ``backward`` takes ``x`` itself (None: ``saved``),
    so that under create_graph ``x``'s gradient hangs from ``x`` too (the other tensors it
    takes reach it through the incoming gradient)."""
    # (the graph's fields: a forward-mode transform's input reports no requires_grad)
    if x._requires_grad or x._grad_fn is not None or _DUAL.level is not None:
        return _kernel_input(x, kernel, backward, saved, read)
    return x
