"""``no_grad`` inside ember's forward-mode transforms (``func.jvp``, ``jacfwd``, ``linearize``).

NOTE [Tangents through no_grad]
PyTorch's forward AD ignores grad mode: a value computed under ``no_grad`` inside ``jvp``
still carries its tangent, while reverse mode (``backward``, ``grad``, an outer transform)
sees it as a constant, and sees its tangent's computation as a constant too. ember computes
forward-mode transforms in reverse mode (NOTE [Transforms on the tape]), so a call recording
nothing would cut the tangent. Inside such a transform's trace, a call under ``no_grad`` whose
inputs require grad therefore records after all, on *gated* copies of those inputs: each
copy's node passes gradient only while a forward-mode transform runs the backward passes
that build its Jacobian-vector products (``linearizing``). Every other backward, the user's
or an outer transform's, finds the gate closed, so the region stays constant to it, and the
derivative formulas of the region, which read the gated copies, are constants to it as well.
What differs from PyTorch: results computed under ``no_grad`` inside the transform report
``requires_grad=True``, and in-place calls under ``no_grad`` there carry no tangent.
"""

import threading
import weakref

from ember._tensor import Tensor
from ember.autograd._forward_traces import TRACES as FORWARD_TRACES
from ember.autograd.grad_mode import STATE as _GRAD
from ember.autograd.graph import Node, history

__all__ = ["call_recording_tangents", "call_inplace_recording_tangents", "linearizing",
           "settle"]


class _Linearizing(threading.local):
    depth = 0               # how many forward-mode transforms are running their passes


_LINEARIZING = _Linearizing()


class linearizing:
    """Context manager: a forward-mode transform's backward passes, which open the gates."""

    def __enter__(self):
        _LINEARIZING.depth += 1

    def __exit__(self, *exc):
        _LINEARIZING.depth -= 1


class NoGradGateBackward(Node):
    """The gate in front of an input read under ``no_grad`` in a forward-mode transform."""

    __slots__ = ()

    def apply(self, grads):
        """The gradient, passed on only while a forward-mode transform linearizes."""
        return [grads[0] if _LINEARIZING.depth else None]


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


def call_inplace_recording_tangents(op, inputs, params):
    """An in-place call under ``no_grad`` inside a forward-mode transform's trace, writing
    into a tensor with history there (not a leaf, not a view): recorded behind gates, as
    ``call_recording_tangents``; once the transform is done, the tensor gets back the
    history it had, as PyTorch's in-place calls under ``no_grad`` leave it."""
    from ember.ops._inplace import call_inplace
    self = inputs[0]
    before = self._grad_fn, self._output_nr
    self._grad_fn = NoGradGateBackward((before,))
    self._output_nr = 0
    _GRAD.grad_enabled = True
    try:
        out = call_inplace(op, [self] + [_gated(x) for x in inputs[1:]], params)
    except BaseException:
        self._grad_fn, self._output_nr = before
        raise
    finally:
        _GRAD.grad_enabled = False
    _innermost_results().append((weakref.ref(self), self._grad_fn) + before)
    return out


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
    for ref, node, fn, nr in results:
        t = ref()
        if t is not None and t._grad_fn is node:
            t._grad_fn, t._output_nr = fn, nr
    results.clear()
