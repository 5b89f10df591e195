"""Custom Functions under ember's forward-mode transforms (``func.jvp``, ``linearize``,
``jacfwd``). ember computes those in reverse mode (NOTE [Transforms on the tape]), yet runs
a Function's own ``jvp`` there, as PyTorch does (NOTE [Function jvp in the double vjp]), and
refuses a Function without one. While such a transform traces its function,
the graph nodes of its inputs are kept here, so that a Function applied to tensors reached
from them can refuse as PyTorch does; so do registered ops without a forward derivative
(``Op.refuse_forward_ad``) as such a call records, and Functions without a vmap rule under
jacfwd, which PyTorch runs under vmap. The reverse-mode transforms (grad, vjp, jacrev) are
counted here too: under them, as under all of PyTorch's, a Function needs ``setup_context``."""

import threading

from ember.autograd.graph import history

_SETUP_CONTEXT = ("In order to use an autograd.Function with functorch transforms (vmap, grad, "
                  "jvp, jacrev, ...), it must override the setup_context staticmethod. For "
                  "more details, please see https://pytorch.org/docs/main/notes/extending."
                  "func.html")
_NO_VMAP_RULE = ("You tried to vmap over {}, but it does not have vmap support. Please "
                 "override and implement the vmap staticmethod or set generate_vmap_rule=True. "
                 "For more details, please see https://pytorch.org/docs/main/notes/extending."
                 "func.html")
_NO_JVP = ("You must implement the jvp function for custom autograd.Function to use it with "
           "forward mode AD.")


class _Traces(threading.local):
    def __init__(self):
        # per active forward-mode transform: (its inputs' node ids, whether it refuses any
        # Function without setup_context, as PyTorch's jvp does and its linearize does not,
        # whether PyTorch runs the function under vmap, as its jacfwd does, the results it
        # recorded under no_grad)
        self.starts = []
        self.reverse = 0        # how many reverse-mode transforms (grad, vjp, jacrev) trace
        self.forward = []       # per tracing transform, outermost first: is it forward-mode
        # per tracing transform, outermost first: a reverse-mode one's inputs' node ids (None
        # for a forward-mode one, or when not given)
        self.tracked = []
        self.vmaps = []         # per tracing transform, outermost first: the vmaps then active


TRACES = _Traces()


class Passes(threading.local):
    """How many forward-mode transforms run passes of one kind in this thread; entering it
    (reentrant: transforms nest) counts one more while the pass runs."""

    depth = 0

    def __enter__(self):
        self.depth += 1
        return self

    def __exit__(self, *exc):
        self.depth -= 1


# the first backward pass, from zero cotangents (NOTE [Function jvp in the double vjp])
PULLING = Passes()
# both backward passes, which build the tangents (NOTE [Tangents through no_grad])
LINEARIZING = Passes()
# forward-mode transforms tracing in any thread: while there are none, the dispatcher's
# no_grad path skips reading the thread-local ``TRACES`` (NOTE [Tangents through no_grad])
FORWARD_OPEN = [0]
# while any thread runs a function under a transform: what re-classes a forward-mode one's
# results (NOTE [Forward-mode primals] in ember/func/_forward_primal.py); empty else
FORWARD_SHOWN = []


class tracing_forward:
    """Context manager: a forward-mode transform traces its function on ``inputs``."""

    def __init__(self, inputs, needs_setup_context, vmapped=False):
        # (last: what the transform records under no_grad, NOTE [Tangents through no_grad])
        self.entry = ({id(history(x)[0]) for x in inputs if x.requires_grad},
                      needs_setup_context, vmapped, [])

    def __enter__(self):
        TRACES.starts.append(self.entry)
        TRACES.forward.append(True)
        TRACES.tracked.append(None)
        TRACES.vmaps.append(_vmap_depth())
        FORWARD_OPEN[0] += 1

    def __exit__(self, *exc):
        FORWARD_OPEN[0] -= 1
        TRACES.starts.pop()
        TRACES.forward.pop()
        TRACES.tracked.pop()
        TRACES.vmaps.pop()


class tracing_reverse:
    """Context manager: a reverse-mode transform (grad, vjp, jacrev) traces its function on
    ``inputs`` (if given: see ``requires_grad_here``), under which, as under each of
    PyTorch's functorch transforms, a Function without ``setup_context`` refuses."""

    def __init__(self, inputs=None):
        self.tracked = None if inputs is None else {
            id(history(x)[0]) for x in inputs if x.requires_grad}

    def __enter__(self):
        TRACES.reverse += 1
        TRACES.forward.append(False)
        TRACES.tracked.append(self.tracked)
        TRACES.vmaps.append(_vmap_depth())

    def __exit__(self, *exc):
        TRACES.reverse -= 1
        TRACES.forward.pop()
        TRACES.tracked.pop()
        TRACES.vmaps.pop()


_BATCHING = []                  # vmap's thread-local state, once imported (it imports this)


def _vmap_depth():
    if not _BATCHING:
        from ember.func._batched import STATE
        _BATCHING.append(STATE)
    return len(_BATCHING[0].levels)


def vmap_is_innermost():
    """Whether a vmap began inside every transform tracing now: PyTorch's tensors batched by
    it then report no requires_grad (its BatchedTensor wrappers carry no autograd)."""
    depth = _vmap_depth()
    return depth > 0 and (not TRACES.vmaps or TRACES.vmaps[-1] < depth)


def refuses_without_setup_context():
    """Whether a transform under which a Function without ``setup_context`` refuses (vmap
    aside) is tracing."""
    return TRACES.reverse > 0 or any(entry[1] for entry in TRACES.starts)


def check_function(cls, base, args):
    """Raise PyTorch's error when Function ``cls`` (``base``: autograd.Function) lacks a
    ``setup_context`` (under jvp, grad, vjp or jacrev, whatever its inputs) or a ``jvp``
    (when ``args`` depend on a forward-mode transform's inputs)."""
    if cls.setup_context is base.setup_context and refuses_without_setup_context():
        refuse_without_setup_context(cls)
    if runs_under_vmap():
        _refuse_without_vmap_rule(cls, base)
    starts = _start_nodes()
    if cls.jvp is base.jvp and starts and _reaches(args, starts):
        raise NotImplementedError(_NO_JVP)


def check_vmappable(cls, base):
    """Raise PyTorch's error for the Function ``cls`` (``base``: autograd.Function) applied
    under vmap without ``setup_context``, or without a ``vmap`` staticmethod and
    ``generate_vmap_rule``; ember's own Functions (native ops in PyTorch) pass."""
    if cls.setup_context is base.setup_context:
        refuse_without_setup_context(cls)
    else:
        _refuse_without_vmap_rule(cls, base)


def _refuse_without_vmap_rule(cls, base):
    if cls.vmap is base.vmap and not cls.generate_vmap_rule and \
            not cls.__module__.startswith("ember."):
        raise RuntimeError(_NO_VMAP_RULE.format(cls.__name__))


def refuse_without_setup_context(cls):
    """Raise PyTorch's error for the Function ``cls``, which has no ``setup_context``, under
    a functorch transform; ember's own Functions (native ops in PyTorch) pass, except those
    that are Python Functions in PyTorch too (``_python_in_torch``: the full backward hooks')."""
    if not cls.__module__.startswith("ember.") or cls.__dict__.get("_python_in_torch"):
        raise RuntimeError(_SETUP_CONTEXT)


def requires_grad_here(t):
    """Whether ``t`` requires grad as PyTorch's kernel choices read it now (scaled dot-product
    attention's, for its mask): inside functorch transforms, only a tensor computed from the
    inputs of the innermost one, a reverse-mode one, does (what a forward-mode transform
    computes from its inputs requires grad in ember only, where PyTorch's carry tangents; its
    inputs themselves report no requires_grad, NOTE [Forward-mode primals]; tensors of outer
    transforms, or closed over, are constants there); outside them, any whose flag is set. A
    reverse-mode transform that did not give its inputs counts all its tensors."""
    if not t.requires_grad:
        return False
    if not TRACES.forward:
        return True
    if TRACES.forward[-1]:
        return False
    tracked = TRACES.tracked[-1]
    return tracked is None or _reaches((t,), tracked)


def runs_under_vmap():
    """Whether a transform that PyTorch runs under vmap (jacfwd, hessian) is tracing."""
    return any(entry[2] for entry in TRACES.starts)


def _start_nodes():
    """The graph nodes of the inputs of every forward-mode transform tracing now."""
    return set().union(*(entry[0] for entry in TRACES.starts))


def forward_ad_kernel(op, flat, params, inplace=False):
    """The kernel PyTorch's forward-AD error names for this call of ``op`` (``inplace``: its
    in-place form), or None where the call has a forward derivative (``Op.refuse_forward_ad``)."""
    kernel = op.forward_ad_refusal
    kernel = kernel(flat, params) if callable(kernel) else kernel
    if inplace and (op.not_implemented_kernel is not None or kernel == op.name
                    or kernel == f"aten::{op.name}"):   # (scatter_'s reduce overloads)
        return f"{kernel}_"             # aten::floor_divide_, index_reduce_, aten::scatter_
    return kernel


def refuse_traced_forward(op, flat, params, inplace=False):
    """Raise PyTorch's error for a recorded call of ``op``, a kernel without a forward
    derivative, that depends on the inputs of a forward-mode transform tracing now (where
    PyTorch's inputs carry tangents)."""
    kernel = forward_ad_kernel(op, flat, params, inplace)
    if kernel is not None and _reaches(flat, _start_nodes()):
        from ember.ops._op_errors import forward_ad_not_implemented
        raise forward_ad_not_implemented(kernel)


def reaches_forward_inputs(t):
    """Whether ``t`` depends on the inputs of a forward-mode transform tracing now."""
    return _reaches((t,), _start_nodes())


def grad_refused(t, forward):
    """Whether a call refusing the gradient of its tensor argument ``t`` (PyTorch's "not
    differentiable with respect to") refuses it: ``t`` records history (a forward-mode
    transform's input too, which reports no requires_grad), except a tangent of forward-mode
    transforms (all those tracing are) where PyTorch's forward formula takes the argument,
    as a constant or not (``forward``: its tangent is the derivative's, zero if it has none,
    as PyTorch's where no other input carries one)."""
    if not (t._requires_grad or t._grad_fn is not None):
        if t._view is None:
            return False
        from ember._tensor import _view_tracks      # (only on this rare path)
        if not _view_tracks(t):     # (a view whose base gained history since it was made)
            return False
    # (what reaches a leaf other than their inputs, one closed over, requires grad in
    # PyTorch beneath its tangent too)
    return not (forward and TRACES.forward and all(TRACES.forward)
                and reaches_forward_inputs(t) and not _reaches_leaf(t, _start_nodes()))


def _reaches_leaf(t, starts):
    """Whether the graph behind ``t`` holds a leaf not behind a node of ``starts``."""
    todo = [history(t)[0]]
    seen = set()
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen or id(node) in starts:
            continue
        seen.add(id(node))
        if getattr(node, "variable", None) is not None:     # (an AccumulateGrad)
            return True
        todo.extend(edge[0] for edge in getattr(node, "next_functions", ()))
    return False


def _reaches(args, starts):
    """Whether the graph behind any tensor of ``args`` holds a node of ``starts``."""
    todo = [history(a)[0] for a in args if getattr(a, "requires_grad", False)
            or getattr(a, "_forward_primal", False)]    # (NOTE [Forward-mode primals])
    seen = set()
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        if id(node) in starts:
            return True
        seen.add(id(node))
        todo.extend(edge[0] for edge in getattr(node, "next_functions", ()))
    return False
