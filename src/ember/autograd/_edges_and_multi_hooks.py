"""torch.autograd.graph's helpers over edges and several tensors: GradientEdge,
get_gradient_edge, increment_version and register_multi_grad_hook (re-exported by graph)."""

import threading
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
    """Call ``fn`` once per backward over ``tensors``: in mode "all" with all their gradients
    (None for those the backward does not reach) once the last one the backward reaches is
    computed, in mode "any" with the first one computed."""
    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    from ember.autograd.engine import engine_will_run, hook_state
    tensors = tuple(tensors)
    if mode == "all" and not all(t.requires_grad for t in tensors):
        raise AssertionError("Expected gradient function to be set")
    nodes = [history(t)[0] if t.requires_grad else None for t in tensors]
    lock = threading.Lock()             # (backwards in several threads: one state each)
    key = object()

    def all_state():
        # [gradients so far, how many the backward computes]
        return [[None] * len(tensors), sum(engine_will_run(n) for n in nodes if n is not None)]

    def hook_for(i):
        def hook(grad):
            with lock:
                if mode == "any":
                    first = hook_state(key, list)
                    if first:
                        return
                    first.append(True)
                else:
                    state = hook_state(key, all_state)
                    grads = state[0]
                    grads[i] = grad
                    state[1] -= 1
                    if state[1]:
                        return
            fn(grads if mode == "all" else grad)
        return hook

    return _MultiHandle([t.register_hook(hook_for(i)) for i, t in enumerate(tensors)
                         if t.requires_grad])
