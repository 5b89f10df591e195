"""A custom Function's ``jvp`` under ember's forward-mode transforms (``func.jvp``,
``linearize``, ``jacfwd``).

NOTE [Function jvp in the double vjp]
Those transforms get ``J t`` as the vjp, with weights ``t``, of ``u -> J^T u`` (NOTE
[Transforms on the tape]): a first backward pass from zero cotangents ``u`` (``PULLING``),
recorded, then a second one through that record. A Function's node reached in the first
pass would record its ``backward``; PyTorch runs its ``jvp`` instead. So a Function applied
while such a transform traces (``ctx._jvp_args`` set) answers the first pass, instead of
calling ``backward``, with zeros (the cotangents there are zero: linear in zeros) recorded
on a ``FunctionJvpBackward`` node whose edges are the cotangents of the Function's outputs.
The second pass brings that node the tangents of the Function's inputs, and it hands the
tangents of its outputs, ``jvp(ctx, *tangents)``, back along those edges: exactly the terms
the transposed backward would have given, from the user's forward rule. Computed with grad
mode on (``create_graph``), the jvp's ops record as any, so the tangent is differentiable
again (reverse over forward) as in PyTorch, and ``backward`` is never needed.
"""


from ember._tensor import Tensor
from ember.autograd.graph import Node, history

__all__ = ["keep_for_jvp", "transposed_jvp"]


def keep_for_jvp(ctx, args, output):
    """Keep on ``ctx``, the node of a call of ``args`` giving ``output``, what its jvp needs:
    per argument, ``(shape, dtype, device)`` for a floating-point or complex tensor (zeros
    stand for its tangent when none comes), None for another tensor, False for anything else
    (jvp gets None for both); per output, whether it is a differentiable tensor (None: no
    tensor)."""
    ctx._jvp_args = tuple(False if not isinstance(a, Tensor) else (a.shape, a.dtype, a.device)
                          if a.is_floating_point() or a.is_complex() else None for a in args)
    ctx._jvp_outputs = tuple(
        None if not isinstance(o, Tensor) else (o.is_floating_point() or o.is_complex())
        and not any(o is t for t in ctx._non_differentiable)
        for o in (output if isinstance(output, tuple) else (output,)))


def transposed_jvp(ctx, grads):
    """The Function node ``ctx``'s answer to a first pass (NOTE above): one zero gradient per
    tensor argument that needs one, recorded on a ``FunctionJvpBackward``."""
    from ember._creation import zeros
    edges = tuple(history(g) if isinstance(g, Tensor) and g.requires_grad else (None, 0)
                  for g in grads)
    node = FunctionJvpBackward(edges, ctx) if any(e[0] is not None for e in edges) else None
    out = []
    nr = 0
    for meta, needed in zip(ctx._jvp_args, ctx.needs_input_grad):
        if meta is False:
            continue
        g = None
        if needed and meta is not None:
            g = zeros(meta[0], dtype=meta[1], device=meta[2])
            if node is not None:
                g._grad_fn, g._output_nr = node, nr
        out.append(g)
        nr += 1
    if node is not None:
        node.n_outputs = nr
    return out


class FunctionJvpBackward(Node):
    """Stands for a Function's backward in a forward-mode transform's first pass; in the
    second, gives the Function's ``jvp`` of the tangents of its inputs (NOTE above)."""

    def __init__(self, edges, ctx):
        Node.__init__(self, edges)
        self.ctx = ctx

    def apply(self, grads):
        """The tangents of the Function's outputs, from those of its tensor inputs."""
        from ember._creation import zeros
        ctx = self.ctx
        given = iter(grads)
        tangents = []
        for meta in ctx._jvp_args:
            t = None if meta is False else next(given)
            if t is None and meta:
                t = zeros(meta[0], dtype=meta[1], device=meta[2])
            tangents.append(t)
        ctx._in_jvp = True
        try:
            pushed = type(ctx)._function.jvp(ctx, *tangents)
        finally:
            ctx._in_jvp = False
        pushed = pushed if isinstance(pushed, tuple) else (pushed,)
        if len(pushed) != len(self.next_functions):
            raise RuntimeError(f"Function's jvp returned an invalid number of forward "
                               f"gradients (expected {len(self.next_functions)} but got "
                               f"{len(pushed)})")
        out = []
        for i, (t, meta, (fn, _)) in enumerate(zip(pushed, ctx._out_meta, self.next_functions)):
            if t is not None and ctx._jvp_outputs[i] is False:
                raise RuntimeError(f"Function's jvp returned a gradient at position {i}, but  "
                                   f"the corresponding forward output is not a differentiable "
                                   f"Tensor.You should return None at that position instead.")
            if fn is None or t is None:
                out.append(None)
                continue
            if tuple(t.shape) != tuple(meta[0]):
                raise RuntimeError(f"Trying to set a forward gradient that has a different "
                                   f"size than that of the original Tensor, this is not "
                                   f"supported. Tensor is of size {list(meta[0])} while the "
                                   f"given forward gradient is of size {list(t.shape)}.")
            out.append(t)
        return out
