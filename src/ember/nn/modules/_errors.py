"""Naming the failing module in forward errors (beyond PyTorch).

NOTE [Module error context]
When ember raises RuntimeError/ValueError/TypeError/IndexError inside a module's forward (a
shape, dtype or device mismatch in an op, a functional or a module's own check), the innermost
module whose call it leaves records itself on the exception and appends one line to its
message: ``in model.encoder.layers.2.linear1 (Linear(in_features=128, ...)) with input of
shape [4, 64, 256]``. Each enclosing ``Module.__call__`` the exception passes through only
rewrites that line's path so it ends up relative to the outermost module called. An exception
raised by the user's code (a forward's own ``raise``, a hook, an ``autograd.Function``, a loss)
passes through untouched, as in PyTorch: "raised by ember" means the innermost frame of its
traceback that is not NumPy's, SciPy's, CuPy's or the standard library's (which ember calls)
belongs to the ``ember`` package. So ember's error from an op that a user's Function.forward
calls is annotated (it is ember's check that failed), while the user's raise beside it is not.
Nothing is kept on the success path: the work happens in ``except`` clauses, which cost
nothing until they run.
"""

import sys

from ember._tensor import Tensor

ANNOTATED = (RuntimeError, ValueError, TypeError, IndexError)


class _Where:
    __slots__ = ("top", "path", "tail", "message")

    def __init__(self, top, tail, message):
        self.top = top          # the outermost module the path is relative to so far
        self.path = ""          # dotted path from ``top`` to the failing module
        self.tail = tail        # " (Linear(...)) with input ..."
        self.message = message  # the original message

    def __reduce__(self):       # a pickled exception carries its message, not the model
        return (_Where, (None, self.tail, self.message))


def annotate(module, exc, args):
    """Add (or re-root) the failing module's path in ``exc``'s message."""
    where = getattr(exc, "_ember_where", None)
    if where is None:
        if len(exc.args) != 1 or not isinstance(exc.args[0], str) or not _raised_by_ember(exc):
            return
        where = _Where(module, _describe(module, args, exc.args[0]), exc.args[0])
        try:
            exc._ember_where = where
        except AttributeError:
            return
    else:
        if where.top is None or where.top is module:
            return
        name = _find(module, where.top)
        if name is None:                 # called outside this module's tree: keep the path
            where.top = None
            return
        where.top = module
        where.path = name + "." + where.path if where.path else name
    path = "model." + where.path if where.path else "model"
    exc.args = (f"{where.message}\n  in {path}{where.tail}",)


# libraries ember calls into: their frames stand for the ember frame that called them
_CALLEES = frozenset(sys.stdlib_module_names) | {"numpy", "scipy", "cupy", "cupyx", "cupy_backends",
                                                 "ml_dtypes", "triton", "fastrlock"}


def _raised_by_ember(exc):
    """Whether ember's code raised ``exc`` (not the user's): see NOTE [Module error context]."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        name = frame.f_globals.get("__name__")
        if name is None:        # code ember generates (the ops' entry points) runs in its own
            name = "ember" if frame.f_code.co_filename.startswith("<ember ") else ""  # globals
        top = name.partition(".")[0]
        if top not in _CALLEES:
            return top == "ember"
    return False


def _find(root, target):
    for name, m in root.named_modules():
        if m is target:
            return name
    return None


def _describe(module, args, message):
    extra = module.extra_repr().replace("\n", ", ")
    text = f" ({module._get_name()}({extra}))"
    tensors = [a for a in args if isinstance(a, Tensor)]
    if tensors:
        shapes = ", ".join(str(list(t.shape)) for t in tensors)
        dtypes = ", ".join(str(t.dtype) for t in tensors)
        noun = "input" if len(tensors) == 1 else "inputs"
        text += f" with {noun} of shape {shapes} and dtype {dtypes}"
        if "device" in message:
            text += _device_culprits(module, tensors[0].device)
    return text


def _device_culprits(module, device):
    named = [*module.named_parameters(), *module.named_buffers()]
    off = [f"{name} ({t.device})" for name, t in named if t.device != device]
    if not off:
        return f" on device {device}"
    return f" on device {device}; on other devices: {', '.join(off)}"
