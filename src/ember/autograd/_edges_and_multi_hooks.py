"""torch.autograd.graph's helpers over edges and several tensors: GradientEdge,
get_gradient_edge, increment_version and register_multi_grad_hook (re-exported by graph)."""

from typing import NamedTuple

from ember._tensor import Tensor
from ember.autograd.graph import Node, history


class GradientEdge(NamedTuple):
    """Where a tensor's gradient enters the graph: a node and which of its inputs (accepted
    by ``autograd.grad`` in place of the tensor)."""

    node: Node
    output_nr: int
    ownership_token: object = None


def get_gradient_edge(tensor):
    """The ``GradientEdge`` through which ``tensor``'s gradient flows."""
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that does "
                           "not require gradients")
    return GradientEdge(*history(tensor))


def increment_version(tensor):
    """Bump the version counter of ``tensor`` (or of each tensor in an iterable), as an
    in-place write would, so that backward notices the change."""
    for t in (tensor,) if isinstance(tensor, Tensor) else tensor:
        t._bump_version()


class _MultiHandle:
    """The handle of a multi-grad hook: removes the hook from every tensor."""

    def __init__(self, handles):
        self.handles = handles

    def remove(self):
        """Unregister the hook from all its tensors."""
        for handle in self.handles:
            handle.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """Call ``fn`` once per backward over ``tensors``: with all their gradients (None for those
    the backward did not reach) in mode "all", with the first one computed in mode "any"."""
    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    from ember.autograd.engine import queue_callback
    tensors = tuple(tensors)
    if mode == "all" and not all(t.requires_grad for t in tensors):
        raise AssertionError("Expected gradient function to be set")
    grads = [None] * len(tensors)
    started = [False]                   # within the current backward

    def finish():
        got = list(grads)
        started[0] = False
        grads[:] = [None] * len(tensors)
        if mode == "all":
            fn(got)

    def hook_for(i):
        def hook(grad):
            if not started[0]:
                started[0] = True
                queue_callback(finish)
                if mode == "any":
                    fn(grad)
            grads[i] = grad if mode == "all" else None
        return hook

    return _MultiHandle([t.register_hook(hook_for(i)) for i, t in enumerate(tensors)
                         if t.requires_grad])
