"""autograd.Function under vmap: the function's own ``vmap`` staticmethod, or a generated rule.

NOTE [Custom functions under vmap]
A Function applied to BatchedTensors of vmap level L runs, when it overrides ``vmap``, that
rule on the values (batch at dim 0). Otherwise (``generate_vmap_rule = True``, or one of
ember's own Functions: PyTorch refuses any other, see Function.apply), when a graph is being
recorded, it runs as ``Vmapped<Name>``, a Function of the values whose forward is ``vmap``
of the user's forward (and setup_context) and whose backward is ``vmap`` of the user's
backward over the tensors it saved (its ``jvp``, where the user's class has one, ``vmap``
of that ``jvp`` over the tensors saved for forward): the graph node sits on the values,
where the engine runs (NOTE [Batched tensors]), so vmap(grad(f)), grad(vmap(f)), vmap(jvp(f))
and a plain backward after vmap all work. Without a graph being recorded, forward simply
runs on the BatchedTensors.
"""

import collections

from ember.func._forward_primal import tracks_grad
from ember._tensor import Tensor
from ember.autograd.grad_mode import STATE as _GRAD
from ember.func._batched import STATE, BatchedTensor, is_batched_at, wrap
from ember.utils._pytree import broadcast_prefix, tree_flatten, tree_unflatten

__all__ = ["function_vmap", "VmapInfo"]

VmapInfo = collections.namedtuple("VmapInfo", ["batch_size", "randomness"])
_EXTENDING = "For more details, please see https://pytorch.org/docs/main/notes/extending.func.html"


def function_vmap(cls, args, kwargs):
    """``cls.apply(*args, **kwargs)`` when an argument is batched (NotImplemented when none
    is, or when ``forward`` may just run on the batched tensors)."""
    levels = [a._level for a in args if type(a) is BatchedTensor]
    if not levels:
        return NotImplemented
    from ember.autograd.function import Function
    custom = cls.vmap is not Function.vmap
    if custom and cls.generate_vmap_rule:
        raise RuntimeError(f"You tried to vmap over {cls.__name__}, but it has both "
                           f"generate_vmap_rule=True and an overridden vmap staticmethod. "
                           f"Please set generate_vmap_rule=False or delete the overridden vmap "
                           f"staticmethod to avoid ambiguity. {_EXTENDING}")
    records = _GRAD.grad_enabled and any(isinstance(a, Tensor) and tracks_grad(a)
                                         for a in args)
    if not custom and not records:
        return NotImplemented
    level = max(levels)
    lv = next(lv for lv in STATE.levels if lv.level == level)
    in_dims = tuple(0 if is_batched_at(a, level) else None for a in args)
    values = [a._value if is_batched_at(a, level) else a for a in args]
    info = VmapInfo(lv.size, lv.randomness)
    if custom:
        output, out_dims = _user_rule(cls, info, in_dims, values, kwargs)
    else:
        output = _generated(cls).apply(info, in_dims, kwargs, *values)
        out_dims = 0
    flat, spec = tree_flatten(output)
    dims = broadcast_prefix(out_dims, output)
    if dims is None:
        raise RuntimeError(f"The autograd.Function's vmap staticmethod returned an incompatible "
                           f"(output, out_dims) tuple. Expected out_dims={out_dims} to be "
                           f"compatible with the structure of `output`. out_dims has structure "
                           f"{tree_flatten(out_dims)[1]} but output has structure {spec}. "
                           f"{_EXTENDING}")
    return tree_unflatten([x if d is None or not isinstance(x, Tensor) else
                           wrap(x.movedim(d, 0) if d else x, level) for x, d in zip(flat, dims)],
                          spec)


def _user_rule(cls, info, in_dims, values, kwargs):
    result = cls.vmap(info, in_dims, *values, **kwargs)
    if not (isinstance(result, tuple) and len(result) == 2):
        raise RuntimeError(f"Expected the vmap staticmethod to have two returns, an output and "
                           f"out_dims with pytree structure compatible with the output. "
                           f"Got a {type(result)} instead")
    return result


class _VmapCtx:
    """The ctx the user's forward, setup_context and backward see inside the generated rule;
    it keeps their attributes and the tensors saved (logical, then batched again)."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self.to_save = ()
        self.to_save_forward = ()
        self.non_differentiable = ()
        self.materialize = True
        self.saved_tensors = ()

    def save_for_backward(self, *tensors):
        """Keep tensors (or None) for backward."""
        self.to_save = tensors

    def save_for_forward(self, *tensors):
        """Keep tensors (or None) for ``jvp`` (logical, then batched again)."""
        self.to_save_forward = tensors

    def mark_non_differentiable(self, *tensors):
        """Declare outputs that get no gradient."""
        self.non_differentiable = tensors

    def mark_dirty(self, *tensors):
        """In-place functions have no generated vmap rule."""
        raise RuntimeError("vmap: autograd.Function with a generated vmap rule does not "
                           "support ctx.mark_dirty (in-place operations); override the vmap "
                           "staticmethod instead.")

    def set_materialize_grads(self, value):
        """Whether missing output gradients reach backward as zeros."""
        self.materialize = bool(value)


_GENERATED = {}


def _generated(cls):
    """The Function of the values that runs ``cls`` under vmap (NOTE above)."""
    fn = _GENERATED.get(cls)
    if fn is None:
        from ember.autograd.function import Function
        rules = {"forward": staticmethod(_forward_of(cls)),
                 "backward": staticmethod(_backward_of(cls)),
                 "_vmapped_from": cls}      # (func transforms check the user's class, not this)
        if cls.jvp is not Function.jvp:
            rules["jvp"] = staticmethod(_jvp_of(cls))
        fn = type(f"Vmapped{cls.__name__}", (Function,), rules)
        _GENERATED[cls] = fn
    return fn


def _forward_of(cls):
    from ember.autograd.function import Function
    from ember.func._vmap import vmap
    uses_ctx = cls.setup_context is Function.setup_context

    def forward(ctx, info, in_dims, kwargs, *values):
        inner = _VmapCtx(ctx.needs_input_grad[3:])
        marks = {}

        def run(*logical):
            out = cls.forward(inner, *logical, **kwargs) if uses_ctx else cls.forward(
                *logical, **kwargs)
            if not uses_ctx:
                cls.setup_context(inner, logical, out)
            flat = out if isinstance(out, tuple) else (out,)
            marks["non_diff"] = [any(o is t for t in inner.non_differentiable) for o in flat]
            marks["saved"] = [t is None for t in inner.to_save]
            marks["saved_forward"] = [t is None for t in inner.to_save_forward]
            return out, tuple(t for t in inner.to_save if t is not None), tuple(
                t for t in inner.to_save_forward if t is not None)
        out, saved, saved_forward = vmap(run, in_dims=in_dims,
                                         randomness=info.randomness)(*values)
        ctx.inner, ctx.in_dims, ctx.randomness = inner, in_dims, info.randomness
        ctx.none_saved = marks["saved"]
        stored = iter(saved_forward)
        ctx.saved_forward = tuple(None if none else next(stored)
                                  for none in marks["saved_forward"])
        ctx.save_for_backward(*saved)
        flat = out if isinstance(out, tuple) else (out,)
        ctx.mark_non_differentiable(*[o for o, m in zip(flat, marks["non_diff"]) if m])
        ctx.set_materialize_grads(inner.materialize)
        return out
    return forward


def _backward_of(cls):
    from ember.autograd.function import user_backward
    from ember.func._vmap import vmap

    def backward(ctx, *grads):
        inner, in_dims = ctx.inner, ctx.in_dims
        needs = ctx.needs_input_grad[3:]
        stored = iter(ctx.saved_tensors)
        saved = tuple(None if none else next(stored) for none in ctx.none_saved)
        saved_dims = tuple(None if t is None else 0 for t in saved)
        grad_dims = tuple(None if g is None else 0 for g in grads)

        given = []

        def run(saved_logical, *grads_logical):
            inner.saved_tensors = saved_logical
            result = user_backward(cls)(inner, *grads_logical)
            result = result if isinstance(result, tuple) else (result,)
            given[:] = [r is not None and needed for r, needed in zip(result, needs)]
            return tuple(r for r, g in zip(result, given) if g)
        pulled = iter(vmap(run, in_dims=(saved_dims,) + grad_dims,
                           randomness=ctx.randomness)(saved, *grads))
        out = [None, None, None]
        for i, d in enumerate(in_dims):
            g = next(pulled) if i < len(given) and given[i] else None
            out.append(g.sum(0) if g is not None and d is None else g)
        return tuple(out)
    return backward


def _jvp_of(cls):
    """The generated rule's ``jvp``: ``vmap`` of the user's ``jvp`` over the tensors it saved
    for forward and the tangents (NOTE [Function jvp in the double vjp])."""
    from ember.func._vmap import vmap

    def jvp(ctx, info_tangent, in_dims_tangent, kwargs_tangent, *tangents):
        inner, in_dims = ctx.inner, ctx.in_dims
        saved = ctx.saved_forward
        saved_dims = tuple(None if t is None else 0 for t in saved)
        tangent_dims = tuple(None if t is None or d is None else 0
                             for t, d in zip(tangents, in_dims))
        given = []

        def run(saved_logical, *tangents_logical):
            inner.saved_tensors = saved_logical
            result = cls.jvp(inner, *tangents_logical)
            result = result if isinstance(result, tuple) else (result,)
            given[:] = [r is not None for r in result]
            return tuple(r for r in result if r is not None)
        pushed = iter(vmap(run, in_dims=(saved_dims,) + tangent_dims,
                           randomness=ctx.randomness)(saved, *tangents))
        out = tuple(next(pushed) if g else None for g in given)
        return out if len(out) != 1 else out[0]
    return jvp
