"""Custom Functions under ember's forward-mode transforms (``func.jvp``, ``linearize``,
``jacfwd``). ember computes those in reverse mode (NOTE [Transforms on the tape]), so a
Function would get a tangent from its ``backward``; PyTorch instead runs the Function's own
``jvp`` and refuses a Function without one. While such a transform traces its function,
the graph nodes of its inputs are kept here, so that a Function applied to tensors reached
from them can refuse as PyTorch does. The reverse-mode transforms (grad, vjp, jacrev) are
counted here too: under them, as under all of PyTorch's, a Function needs ``setup_context``."""

import threading

from ember.autograd.graph import history

_SETUP_CONTEXT = ("In order to use an autograd.Function with functorch transforms (vmap, grad, "
                  "jvp, jacrev, ...), it must override the setup_context staticmethod. For "
                  "more details, please see https://pytorch.org/docs/main/notes/extending."
                  "func.html")
_NO_JVP = ("You must implement the jvp function for custom autograd.Function to use it with "
           "forward mode AD.")


class _Traces(threading.local):
    def __init__(self):
        # per active forward-mode transform: (its inputs' node ids, whether it refuses any
        # Function without setup_context, as PyTorch's jvp does and its linearize does not)
        self.starts = []
        self.reverse = 0        # how many reverse-mode transforms (grad, vjp, jacrev) trace


TRACES = _Traces()


class tracing_forward:
    """Context manager: a forward-mode transform traces its function on ``inputs``."""

    def __init__(self, inputs, needs_setup_context):
        self.entry = ({id(history(x)[0]) for x in inputs if x.requires_grad},
                      needs_setup_context)

    def __enter__(self):
        TRACES.starts.append(self.entry)

    def __exit__(self, *exc):
        TRACES.starts.pop()


class tracing_reverse:
    """Context manager: a reverse-mode transform (grad, vjp, jacrev) traces its function,
    under which, as under each of PyTorch's functorch transforms, a Function without
    ``setup_context`` refuses."""

    def __enter__(self):
        TRACES.reverse += 1

    def __exit__(self, *exc):
        TRACES.reverse -= 1


def refuses_without_setup_context():
    """Whether a transform under which a Function without ``setup_context`` refuses (vmap
    aside) is tracing."""
    return TRACES.reverse > 0 or any(s for _, s in TRACES.starts)


def check_function(cls, base, args):
    """Raise PyTorch's error when Function ``cls`` (``base``: autograd.Function) lacks a
    ``setup_context`` (under jvp, grad, vjp or jacrev, whatever its inputs) or a ``jvp``
    (when ``args`` depend on a forward-mode transform's inputs)."""
    if cls.setup_context is base.setup_context and refuses_without_setup_context():
        refuse_without_setup_context(cls)
    starts = set().union(*(i for i, _ in TRACES.starts))
    if cls.jvp is base.jvp and starts and _reaches(args, starts):
        raise NotImplementedError(_NO_JVP)


def refuse_without_setup_context(cls):
    """Raise PyTorch's error for the Function ``cls``, which has no ``setup_context``, under
    a functorch transform; ember's own Functions (native ops in PyTorch) pass."""
    if not cls.__module__.startswith("ember."):
        raise RuntimeError(_SETUP_CONTEXT)


def _reaches(args, starts):
    """Whether the graph behind any tensor of ``args`` holds a node of ``starts``."""
    todo = [history(a)[0] for a in args if getattr(a, "requires_grad", False)]
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
