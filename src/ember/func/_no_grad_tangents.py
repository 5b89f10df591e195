"""``no_grad`` inside ember's forward-mode transforms (``func.jvp``, ``jacfwd``, ``linearize``).

NOTE [Tangents through no_grad]
PyTorch's forward AD ignores grad mode: a value computed under ``no_grad`` inside ``jvp``
still carries its tangent, while reverse mode (``backward``, ``grad``, an outer transform)
sees it as a constant, and sees its tangent's computation as a constant too. ember computes
forward-mode transforms in reverse mode (NOTE [Transforms on the tape]), so a call recording
nothing would cut the tangent. Inside such a transform's trace, a call under ``no_grad`` whose
inputs require grad (an op's, or a custom Function's with a ``jvp``) therefore records after
all, on *gated* copies of those inputs: each
copy's node passes gradient only while a forward-mode transform runs the backward passes
that build its Jacobian-vector products (``LINEARIZING``). Every other backward, the user's
or an outer transform's, finds the gate closed, so the region stays constant to it, and the
derivative formulas of the region, which read the gated copies, are constants to it as well.
An in-place write there into a tensor with history (or into a view of one) records too, and
the tensor's node then switches: to the write for the transform's passes, past it for any
other backward, so that later ops on the tensor record, for reverse mode, on the history it
had, as PyTorch's. What differs from PyTorch: results computed under ``no_grad`` inside the
transform report ``requires_grad=True`` there, and so does a leaf written into there (it has
the write's node until the transform is done); writes under ``no_grad``
into a view of a leaf, into one of several views an op returned, or into a view of a view
made under ``no_grad`` carry no tangent; and a write that changes values a recorded op saved
raises, at the transform's backward pass, PyTorch's "modified by an inplace operation".
"""

import weakref

from ember._tensor import Tensor
from ember.autograd._forward_traces import LINEARIZING, TRACES as FORWARD_TRACES
from ember.autograd.grad_mode import STATE as _GRAD
from ember.autograd.graph import Node, history
from ember.ops._recording import in_multi_output_view

__all__ = ["call_recording_tangents", "call_function_recording_tangents",
           "call_inplace_recording_tangents", "settle"]


class NoGradGateBackward(Node):
    """The gate in front of an input read under ``no_grad`` in a forward-mode transform."""

    __slots__ = ()

    def apply(self, grads):
        """The gradient, passed on only while a forward-mode transform linearizes."""
        return [grads[0] if LINEARIZING.depth else None]


class NoGradInplaceBackward(Node):
    """The history of a tensor written in place under ``no_grad`` in a forward-mode transform:
    the write's node (edge 0) while the transform linearizes, and the history the tensor had
    before (edge 1) for every other backward, to which, as in PyTorch, the write never
    happened (later ops on the tensor record on this node)."""

    __slots__ = ()

    def apply(self, grads):
        """The gradient, to the write while a forward-mode transform linearizes, else past it."""
        return [grads[0], None] if LINEARIZING.depth else [None, grads[0]]


def _gated(x):
    """``x`` itself, or for a tensor with history, a copy of it (same memory and version)
    whose gradient goes through a gate to ``x``'s history."""
    if not isinstance(x, Tensor):
        if type(x) is list or type(x) is tuple:
            return type(x)(_gated(v) for v in x)
        return x
    if not (x._requires_grad or x._grad_fn is not None):
        return x
    copy = x.detach()
    copy._grad_fn = NoGradGateBackward((history(x),))
    if copy._meta is None:
        copy._meta = {}
    copy._meta["no_grad_source"] = x    # (views of the copy write into x: see below)
    return copy


def call_recording_tangents(op, inputs, params):
    """``op``'s call under ``no_grad`` inside a forward-mode transform's trace, recorded on
    gated inputs so that the transform's tangents flow through it (see the NOTE above)."""
    from ember.ops._dispatch import call
    _GRAD.grad_enabled = True
    try:
        out = call(op, [_gated(x) for x in inputs], params)
    finally:
        _GRAD.grad_enabled = False
    results = _innermost_results()
    for t in out if isinstance(out, tuple) else (out,):
        if isinstance(t, Tensor) and t._grad_fn is not None:
            results.append((weakref.ref(t), t._grad_fn, None, 0))
    return out


def call_function_recording_tangents(cls, args, kwargs):
    """A custom Function's call under ``no_grad`` inside a forward-mode transform's trace,
    recorded on gated inputs as ``call_recording_tangents`` records an op's, so that its
    ``jvp`` gives the tangent (NOTE [Function jvp in the double vjp])."""
    from ember.autograd._function_jvp import keep_for_jvp
    _GRAD.grad_enabled = True
    try:
        ctx, out = cls._apply_ctx(tuple(_gated(a) for a in args), kwargs)
    finally:
        _GRAD.grad_enabled = False
    keep_for_jvp(ctx, args, out)
    results = _innermost_results()
    for t in out if isinstance(out, tuple) else (out,):
        if isinstance(t, Tensor) and t._grad_fn is ctx:
            results.append((weakref.ref(t), ctx, None, 0))
    return out


def call_inplace_recording_tangents(op, inputs, params):
    """An in-place call under ``no_grad`` inside a forward-mode transform's trace, writing
    into a tensor (a leaf too), or into a view of one with history (made before the region or
    in it): recorded behind gates, as ``call_recording_tangents``, and the written tensor (the
    view's base) gets a ``NoGradInplaceBackward`` that shows any other backward the history it
    had; once the transform is done, it gets that history back, as PyTorch's in-place calls
    under ``no_grad`` leave it. NotImplemented where the call carries no tangent (a view of a
    leaf, of a view, or one of several views an op returned): the caller runs it as any call
    under no_grad."""
    from ember.ops._inplace import call_inplace
    self = inputs[0]
    target = self
    if self._view is not None:
        if in_multi_output_view(self) or self._meta is not None \
                and "no_grad_view" in self._meta:
            return NotImplemented
        target = _source(self._view[0])
    if target._view is not None or target._grad_fn is None and self is not target:
        return NotImplemented
    # (a leaf's history: its accumulator if it requires grad, and no node once the
    # transform is done)
    had = target._grad_fn, target._output_nr
    before = history(target) if had[0] is None else had
    written = self if self._view is None else self._view[0]     # (the base: target or its copy)
    viewed = self._grad_fn, self._output_nr
    kept = written._grad_fn, written._output_nr
    written._grad_fn = NoGradGateBackward((before,))
    written._output_nr = 0
    _GRAD.grad_enabled = True
    shown = type(self)      # (a reverse-mode transform's input, written under no_grad, may be)
    if getattr(self, "_transform_leaf", False):
        self.__class__ = Tensor
    try:
        out = call_inplace(op, [self] + [_gated(x) for x in inputs[1:]], params)
    except BaseException:
        written._grad_fn, written._output_nr = kept
        raise
    finally:
        _GRAD.grad_enabled = False
        self.__class__ = shown
    target._grad_fn = NoGradInplaceBackward(((written._grad_fn, written._output_nr), before))
    target._output_nr = 0
    results = _innermost_results()
    if self is not target:      # (a view: it gets back the history it had, too)
        results.append((weakref.ref(self), self._grad_fn) + viewed)
    results.append((weakref.ref(target), target._grad_fn) + had)
    return out


def _source(t):
    """The tensor that ``t``, a gated copy, stands for in the region; else ``t`` itself."""
    meta = t._meta
    source = meta.get("no_grad_source") if meta is not None else None
    return t if source is None else source


def _innermost_results():
    """Where the innermost forward-mode transform keeps what it recorded under ``no_grad``:
    ``(weakref to tensor, node recorded, history before)`` per result."""
    return FORWARD_TRACES.starts[-1][3]


def settle(results):
    """After a forward-mode transform's last backward pass: the results it recorded under
    ``no_grad`` get back the history they had without it (none, for a new tensor), so that
    nothing outlives the transform requiring grad where PyTorch's would not; an outer
    forward-mode transform still tracing takes them over instead."""
    if FORWARD_TRACES.starts:
        _innermost_results().extend(results)
        return
    for ref, node, fn, nr in reversed(results):     # (the last write undone first)
        t = ref()
        if t is not None and t._grad_fn is node:
            t._grad_fn, t._output_nr = fn, nr
    results.clear()
