"""What the function of a forward-mode transform (``func.jvp``, ``linearize``, ``jacfwd``)
receives for each input.

NOTE [Forward-mode primals]
PyTorch hands such a function dual tensors: they carry a tangent, yet report
``requires_grad=False``, ``is_leaf=True`` and no ``grad_fn``, so in-place ops on them run
(the tangent follows the write) and a custom Function's ``needs_input_grad`` is False for
them. ember differentiates the function in reverse mode (NOTE [Transforms on the tape]) with
respect to a fresh leaf, which must keep the value it had before any write. So the function
gets a ``ForwardPrimal`` instead: the same memory and version counter as that leaf, with a
``PrimalBackward`` identity node to it, so a write into it records on its own history and the
leaf stays the point the Jacobian is taken at. While the function runs it reports PyTorch's
flags; afterwards (``release``) it is a plain Tensor again, whose derivatives, recorded then,
read it as the graph has it. ember's own code asks ``tracks_grad`` (the recorded truth), not
the reported ``requires_grad``.

What the function computes is a dual tensor too in PyTorch, whatever it was computed from
(a closure's tensor that requires grad as well): while the innermost transform running a
function is a forward-mode one, every result ember records (``_record``'s outputs, and the
base written in place through a view) becomes a ``ForwardPrimal`` until that function returns
(``showing``). Outside the user's function (ember's own backward passes, a reverse-mode
transform's function nested in it, a native kernel's own differentiation: ``own_pass``)
nothing is re-classed. ``linearize``'s are ``forward_ad``'s dual tensors in PyTorch: one
computed from a tensor that requires grad outside reports it, and is not re-classed; its
traced run's input for such a tensor (PyTorch's second run of the function, after one on the
tensor itself, gets a view of it made dual) is a ``DualViewPrimal``, which reports
``requires_grad=True``, ``is_leaf=False`` and its node ViewBackward0. So,
as in PyTorch, ``autograd.grad``/``backward``/``register_hook``/``retain_grad`` refuse such
results, ``detach_`` runs, and ``.data =`` and a nested ``linearize`` refuse.

NOTE [Leaked forward-mode results]
A result a forward-mode function keeps beyond its return (appended to a list, stored on a
module) is, in PyTorch, a dual tensor whose level has ended: it reports
``requires_grad=False`` and no ``grad_fn`` once the transforms return. ember's is the very
object the graph saved, which the transforms still differentiate after the function returns
(the double vjp, an outer transform's backward). So the frames hand what they re-classed
(and the primals) to the outermost transform (``_FRAMES.dead``), which ``cut``s those still
alive that it made (not a caller's tensor its function wrote into, whose history stays, as
in PyTorch), but what it returns, when it is done. Where its results stay in the caller's
graph (a closure's tensor, or an input, requires grad), the nodes behind them that saved a
tensor being cut, and the results viewing one, get a twin of it first (its history), so
higher derivatives there, and a write into such a view, still reach through it.
(``linearize``'s results of an input that requires grad are not cut: they require grad in
PyTorch too.)
"""

import threading
import weakref

from ember._conj_view import hold_values
from ember._tensor import Tensor, _make
from ember.autograd._forward_traces import FORWARD_SHOWN
from ember.autograd.graph import Node, OpNode, history
from ember.overrides import _disabled_torch_function_impl

__all__ = ["DualPrimal", "DualViewPrimal", "ForwardPrimal", "PrimalBackward",
           "TransformLeaf", "ViewBackward0",
           "forward_running", "leaf_for", "own_pass", "primal_for", "collect_dead", "cut",
           "note_dead", "outer_terms", "own_running", "refuse_backward", "release", "show",
           "showing", "tracks_grad"]


class PrimalBackward(Node):
    """The identity from a forward-mode transform's primal to its leaf."""

    __slots__ = ()

    def apply(self, grads):
        """The gradient, unchanged."""
        return [grads[0]]


def _set_requires_grad(self, flag):
    if flag:        # (False it reports already: PyTorch's dual tensors take that as a no-op)
        Tensor.requires_grad.fset(self, flag)


class ForwardPrimal(Tensor):
    """A forward-mode transform's input while its function runs (NOTE above)."""

    __slots__ = ()
    __torch_function__ = _disabled_torch_function_impl
    _forward_primal = True      # (what ember's checks read: ``tracks_grad`` is the truth)
    requires_grad = property(lambda self: False, _set_requires_grad,
                             doc="False, as for PyTorch's dual tensors.")
    is_leaf = property(lambda self: True, doc="True, as for PyTorch's dual tensors.")
    grad_fn = property(lambda self: None, doc="None, as for PyTorch's dual tensors.")

    # what leaves the function as a value (printed, copied, pickled) is a plain tensor's, of
    # its own memory (a result is its views' memory root: a copy through it would recurse)
    def __repr__(self, *, tensor_contents=None):
        return self.detach().__repr__(tensor_contents=tensor_contents)

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = _make(self._data.copy())
        return memo[id(self)]

    def __reduce_ex__(self, protocol):
        return _make(self._data).__reduce_ex__(protocol)


class DualPrimal(ForwardPrimal):
    """A forward-mode input that reports ``requires_grad=True`` (``linearize``'s, of a tensor
    that requires grad: PyTorch's dual of it does, and what it computes too)."""

    __slots__ = ()
    requires_grad = property(lambda self: True, _set_requires_grad,
                             doc="True, as the tensor PyTorch's linearize passes.")


class ViewBackward0(PrimalBackward):
    """``PrimalBackward`` of a ``DualViewPrimal``: PyTorch's node of its dual's view."""

    __slots__ = ()


class DualViewPrimal(DualPrimal):
    """``linearize``'s input for a tensor that requires grad in its traced run: PyTorch's is a
    view of that tensor made dual, so it is no leaf and shows its node ViewBackward0."""

    __slots__ = ()
    is_leaf = property(lambda self: False, doc="False, as PyTorch's view of the tensor.")
    grad_fn = property(lambda self: self._grad_fn, doc="ViewBackward0, as PyTorch's view.")


class TransformLeaf(Tensor):
    """A reverse-mode transform's input while its function runs, when ember takes it as an
    alias of a tensor with history (the caller's, requiring grad, or an outer transform's):
    PyTorch's is a fresh leaf, so it reports no ``grad_fn`` and refuses in-place writes."""

    __slots__ = ()
    __torch_function__ = _disabled_torch_function_impl
    _transform_leaf = True      # (what ops/_inplace.py's leaf check reads)
    is_leaf = property(lambda self: True, doc="True, as for PyTorch's transform inputs.")
    grad_fn = property(lambda self: None, doc="None, as for PyTorch's transform inputs.")
    grad = property(lambda self: self._grad, Tensor.grad.fset, Tensor.grad.fdel,
                    doc="The leaf's gradient, read without the non-leaf warning.")
    __repr__ = ForwardPrimal.__repr__
    __deepcopy__ = ForwardPrimal.__deepcopy__
    __reduce_ex__ = ForwardPrimal.__reduce_ex__


_PRIMALS = {False: ForwardPrimal, "view": DualViewPrimal}
_RELEASED = frozenset((ForwardPrimal, DualPrimal, DualViewPrimal, TransformLeaf))
# PyTorch's inputs are plain tensors: messages that name an argument's type (``type(x).__name__``,
# e.g. a distribution's validation error) say "Tensor" (__qualname__ keeps the real name)
for _cls in _RELEASED:
    _cls.__name__ = "Tensor"
del _cls


def leaf_for(leaf):
    """``leaf`` as a reverse-mode transform's function receives it (an alias with history is
    re-classed as a ``TransformLeaf`` until ``release``)."""
    if type(leaf) is Tensor and leaf._grad_fn is not None:
        leaf.__class__ = TransformLeaf
    return leaf


def primal_for(leaf, dual=False):
    """The ``ForwardPrimal`` standing for ``leaf`` (memory, version and gradient shared;
    ``dual``: "view" for linearize's ``DualViewPrimal``)."""
    shown = leaf.detach()
    hold_values(shown)          # (NOTE [Conjugate views])
    node = ViewBackward0 if dual == "view" else PrimalBackward
    shown._grad_fn = node((history(leaf),))
    shown._output_nr = 0
    shown.__class__ = _PRIMALS[dual]
    return shown


def release(primals):
    """Make ``primals`` plain tensors again, once the function has run."""
    for t in primals:
        if type(t) in _RELEASED:
            t.__class__ = Tensor


def tracks_grad(t):
    """Whether ``t`` records gradient history, whatever it reports (a ``ForwardPrimal``, or
    vmap's wrapper of one, records)."""
    from ember.func._batched import BatchedTensor
    while type(t) is BatchedTensor:
        t = t._value
    return type(t) is ForwardPrimal or t.requires_grad


class _Frames(threading.local):
    def __init__(self):
        # per function running under a transform, innermost last: a forward-mode one's list
        # of weak references to the results it re-classed, False for any other; None while
        # ember's own code differentiates (a transform's backward passes, a native kernel's)
        self.stack = []
        # weak references to what forward-mode functions re-classed, for the outermost
        # transform to cut (NOTE [Leaked forward-mode results]); None outside transforms
        self.dead = None


_FRAMES = _Frames()


def collect_dead(dead):
    """Make ``dead`` (a list, or None) the list forward-mode frames hand their results to;
    returns the one it replaces."""
    outer, _FRAMES.dead = _FRAMES.dead, dead
    return outer


def note_dead(primals):
    """Hand a forward-mode function's ``primals`` to the outermost transform's list."""
    dead = _FRAMES.dead
    if dead is not None:
        dead.extend([weakref.ref(t) for t in primals])


def cut(refs, made, roots=(), twin=True):
    """Cut the tensors of ``refs`` still alive that the transform ``made`` (ids: not the
    caller's tensors its functions wrote into) from the graph, in place, as PyTorch's dual
    tensors leave theirs when their level ends; ``roots`` (what the transform returns, which
    its caller may still differentiate) stay, and (``twin``: when it is connected to the
    caller's graph) the graph behind them, and the bases they view, keep, in place of the
    others, twins with their history (NOTE [Leaked forward-mode results])."""
    from ember.func._batched import BatchedTensor
    kept = set()
    for t in roots:
        while type(t) is BatchedTensor:
            kept.add(id(t))
            t = t._value
        kept.add(id(t))
    alive = {}
    for ref in refs:
        t = ref()
        if t is not None and type(t) is Tensor and t._grad_fn is not None and id(t) not in kept \
                and id(t if t._view is None else t._view[0]) in made:
            alive[id(t)] = t
    if not alive:
        return
    if twin and roots:
        twins = _twin_saved(alive, roots)
        for t in roots:     # (a write into such a view rebuilds its history from its base)
            while type(t) is BatchedTensor:
                t = t._value
            if isinstance(t, Tensor) and t._view is not None:
                base = t._view[0]
                if alive.get(id(base)) is base:
                    t._view = (_twin(base, twins),) + t._view[1:]
    views = []
    for t in alive.values():
        if t._view is None:
            t._grad_fn = None
            t._output_nr = 0
        else:
            views.append(t)
    for t in views:         # (after their bases: a view's history is rebuilt from its base's)
        view = t._view
        base = view[0]
        if base._grad_fn is None and not base._requires_grad:
            t._grad_fn = None
            t._output_nr = 0
            t._view = view[:4] + (None, view[5], t._vc.value)


def _twin(t, twins):
    """A tensor standing for ``t`` in the graph: its memory, version, view and history."""
    tw = twins.get(id(t))
    if tw is None:
        tw = twins[id(t)] = _make(t._data)
        tw._grad_fn, tw._output_nr, tw._view = t._grad_fn, t._output_nr, t._view
        tw._vc = t._shared_version()
        tw._meta = None if t._meta is None else dict(t._meta)
    return tw


def _twin_saved(alive, roots):
    """Put twins in place of the tensors of ``alive`` ({id: tensor}) that the nodes behind
    ``roots`` saved (op inputs, a custom Function's saved tensors); returns ``{id: twin}``."""
    from ember.autograd.function import BackwardFunction
    from ember.func._batched import BatchedTensor
    from ember.ops._inplace import CopySlices
    twins = {}
    stack = []
    for t in roots:
        while type(t) is BatchedTensor:
            t = t._value
        if isinstance(t, Tensor) and t._grad_fn is not None:
            stack.append(t._grad_fn)
    seen = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if type(node) is CopySlices:
            stack.append(node.fn)
        elif isinstance(node, OpNode):
            inputs = node._inputs
            if inputs is not None and any(id(x) in alive for x in inputs[0]):
                node._inputs = ([_twin(x, twins) if id(x) in alive and x is alive[id(x)]
                                 else x for x in inputs[0]], inputs[1])
        elif isinstance(node, BackwardFunction):
            saved = node._saved
            if saved and any(id(x) in alive for x, _ in saved):
                node._saved = tuple([(_twin(x, twins) if id(x) in alive else x, v)
                                     for x, v in saved])
        stack.extend([fn for fn, _ in node.next_functions if fn is not None])
    return twins


class _TermsFrame(list):
    """A frame of a forward-mode transform whose recorded calls ``terms`` notes, where not
    None (NOTE [Zero-tangent terms in func.jvp])."""

    __slots__ = ("terms",)


class _DualFrame(_TermsFrame):
    """A frame of ``linearize``, whose results are PyTorch's ``forward_ad`` dual tensors: one
    computed from a tensor that requires grad outside the transform does too."""

    __slots__ = ()


def _show(flat, outputs, op=None, lengths=None, params=None, inplace=False):
    """Re-class a recorded call's ``outputs`` (of inputs ``flat``; of ``op`` where an op's,
    ``inplace``: its in-place form) as the running forward-mode function's."""
    stack = _FRAMES.stack
    if not stack:
        return
    shown = stack[-1]
    if not isinstance(shown, list):     # (not a forward-mode transform's function)
        if op is not None and len(stack) > 1:
            _note_terms(stack, op, flat, lengths, params, outputs, inplace)
        return
    if type(shown) is not list and op is not None and shown.terms is not None:
        shown.terms.record(op, (outputs,) + tuple(flat[1:]) if inplace else flat, lengths,
                           params, outputs)
    if type(shown) is _DualFrame:
        for x in flat:
            if isinstance(x, Tensor) and type(x) is not ForwardPrimal and (
                    x._requires_grad or x._grad_fn is not None):
                return
    for o in outputs if type(outputs) is tuple else (outputs,):
        if o._grad_fn is None:          # (not differentiable: nothing recorded for it)
            continue
        if type(o) is Tensor:
            o.__class__ = ForwardPrimal
            shown.append(weakref.ref(o))


def _note_terms(stack, op, flat, lengths, params, outputs, inplace):
    """Note a call recorded in a reverse-mode transform (or in ember's own pass) nested in a
    forward-mode one whose calls are noted: it computes that one's function too (jacfwd's of
    jacrev, hessian's)."""
    for frame in reversed(stack):
        if isinstance(frame, list):
            if type(frame) is not list and frame.terms is not None:
                frame.terms.record(op, (outputs,) + tuple(flat[1:]) if inplace else flat,
                                   lengths, params, outputs)
            return


class showing:
    """Context manager: a function runs under a transform (``forward``: True for a
    forward-mode one, whose results are re-classed, "dual" for ``linearize``, whose results
    are unless computed from a tensor that requires grad; False: another; None: ember's own
    code differentiates, whose results are not; ``terms``: what notes a forward-mode one's
    recorded calls, NOTE [Zero-tangent terms in func.jvp])."""

    __slots__ = ("forward", "terms")

    def __init__(self, forward, terms=None):
        self.forward = forward
        self.terms = terms

    def __enter__(self):
        forward = self.forward
        if not forward:
            frame = forward
        elif forward == "dual" or self.terms is not None:
            frame = _DualFrame() if forward == "dual" else _TermsFrame()
            frame.terms = self.terms
        else:
            frame = []
        _FRAMES.stack.append(frame)
        FORWARD_SHOWN.append(_show)

    def __exit__(self, *exc):
        FORWARD_SHOWN.pop()
        shown = _FRAMES.stack.pop()
        if shown:
            for ref in shown:
                t = ref()
                if t is not None and type(t) is ForwardPrimal:
                    t.__class__ = Tensor
            if _FRAMES.dead is not None:
                _FRAMES.dead.extend(shown)


def own_pass():
    """Context manager for ember's own differentiation inside a user's function (a kernel
    PyTorch has natively): what it records is not re-classed, and it may take gradients."""
    return showing(None)


def own_running():
    """Whether ember's own differentiation (``own_pass``) is the innermost frame."""
    stack = _FRAMES.stack
    return bool(stack) and stack[-1] is None


def show(t):
    """Re-class ``t`` (a native kernel's result, a base written through a view, a nested
    transform's result) as the running forward-mode function's."""
    if FORWARD_SHOWN and t._grad_fn is not None:
        _show((), t)
    return t


def refuse_backward():
    """PyTorch's refusal of ``backward()`` inside a function a transform runs (vmap's
    included, which pushes no frame; ember's own passes, ``own_pass``, may run it)."""
    stack = _FRAMES.stack
    if stack[-1] is not None if stack else _vmapping():
        raise RuntimeError("backward() called inside a functorch transform. This is not "
                           "supported, please use functorch.grad or functorch.vjp instead or "
                           "call backward() outside of functorch transforms.")


def _vmapping():
    from ember.func._batched import STATE
    return bool(STATE.levels)


def forward_running():
    """Whether a forward-mode transform's function runs in this thread (PyTorch's
    ``linearize`` refuses to nest in one)."""
    return any(isinstance(frame, list) for frame in _FRAMES.stack)


def outer_terms():
    """The notes of the innermost forward-mode transform running a function in this thread
    (NOTE [Zero-tangent terms in func.jvp]), or None."""
    for frame in reversed(_FRAMES.stack):
        if isinstance(frame, list):
            return frame.terms if type(frame) is not list else None
    return None


def linearize_running():
    """Whether ``linearize`` traces its function in this thread (PyTorch's traces under a
    dual level: a forward-mode transform nested in it is refused)."""
    return any(type(frame) is _DualFrame for frame in _FRAMES.stack)
