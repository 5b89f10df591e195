"""What ``func.linearize``'s ``jvp_fn`` folds as PyTorch's traced graph does: the edges into
the traced run's graph, the zero-tangent links' roots as constants of their own, and whether
the traced run drew random numbers (then each call traces anew)."""

from ember._tensor import Tensor
from ember.utils._pytree import tree_flatten

__all__ = ["draws", "fold_constants", "folded_links"]


def folded_links(traced):
    """``traced.links`` with each root as a constant of its own, made once: PyTorch's traced
    graph folds the tensors it reads (a closure's included) into constants that require grad
    where they did, so that jvp_fn's results reach none of the caller's."""
    folded = getattr(traced, "folded_links", None)
    if folded is None:
        consts = {}
        for roots in traced.links:
            for r in roots or ():
                if id(r) not in consts:
                    consts[id(r)] = r.detach()._set_requires_grad()
        folded = traced.folded_links = [tuple([consts[id(r)] for r in roots]) if roots
                                        else roots for roots in traced.links]
    return folded


def fold_constants(out, traced, lin, start):
    """``out`` (jvp_fn's results) with the edges that the nodes its push made lead into the
    traced run's graph or the linear map's cut: PyTorch folds what jvp_fn computes from the
    primals into constants, so that a backward through its results reaches the tangents alone
    and frees nothing that the next call needs."""
    from ember.autograd.engine import _discover
    internal = getattr(lin, "internal", None)
    if internal is None:
        roots = [(y.grad_fn, 0) for y in list(traced.outputs) + list(lin.pulled)
                 if isinstance(y, Tensor) and y.grad_fn is not None]
        internal = lin.internal = _discover(roots)[1] if roots else set()
    stack = [y.grad_fn for y in tree_flatten(out)[0]
             if isinstance(y, Tensor) and y.grad_fn is not None]
    seen = set()
    while stack:
        node = stack.pop()
        if node in seen or node in internal or node._seq < start:
            continue            # (older nodes: the tangents' own history)
        seen.add(node)
        edges = node._edges
        if any(nxt in internal for nxt, _ in edges):
            node._edges = tuple((None, 0) if nxt in internal else (nxt, nr)
                                for nxt, nr in edges)
        stack.extend(nxt for nxt, _ in edges if nxt is not None)


def draws():
    """Where the default generators' streams stand (each draw moves them): the CPU one's, and
    each GPU's (whose kernels' draws move its offset)."""
    from ember._random import default_generator
    from ember.cuda.random import _GENERATORS
    return [(g._offset, g._rng.bit_generator.state["state"]["state"])
            for g in (default_generator, *_GENERATORS.values())]
