"""Which tensors a transformed function made, and PyTorch's refusal to write into the others.

NOTE [Captured tensors]
While ``grad``, ``vjp``, ``jacrev``, ``jvp``, ``jacfwd`` or ``hessian`` runs its function,
PyTorch refuses an in-place write (under ``no_grad`` too) into a tensor made before the
function ran and not given to it: a "captured" tensor, such as a BatchNorm's running
statistics or a global buffer. ``linearize`` and ``vmap`` do not refuse. A tensor a
transform's function makes or is given, or a view or ``detach`` of one, may be written; a
view or ``detach`` of a captured tensor may not, though it too is made inside.

ember knows what a function made by counting each tracing transform as an open inference
block (``_inference.ACTIVE``): ``_make`` already calls ``_inference.mark`` then, and there
the new tensor's id joins the innermost transform's set; a program outside transforms pays
nothing more (but one read of ``ACTIVE`` per ``detach``). When a transform finishes, its set
joins its parent's (what the inner function made, the outer one made too). An id in the set
is one of the function's tensors as long as it lives; a captured tensor is alive, so its id
is in no set. A view is judged by its base; an alias (``detach``, ``.data``, a Parameter
over a tensor's memory) is judged when it is made, by its source (``note_alias``): memory
alone cannot tell ``a.detach()`` of an input ``a = x[0]`` from ``x[0].detach()`` of the
captured ``x``.

``call_inplace`` refuses the registry's in-place calls, naming an alias's call by its own
entry point (``greater_``: an in-place entry named otherwise than its op passes its name to
the call, fixed when the registry generates it); the writes that are no registry call, or
that PyTorch names otherwise (the samplers, ``resize_``, ``set_``, ``detach_``, ``zero_``,
``swapaxes_``, the in-place activations), call ``refuse_captured`` themselves behind one read
of a flag.

The same record makes ``t.requires_grad = True`` inside the function on a captured ``t``
leave ``t`` a closure's tensor (NOTE [Leaves made inside a transform]).
"""

import threading

__all__ = ["STATE", "tracing_births", "note_alias", "note_given", "made_here",
           "check_captured", "refuse_captured", "wrapped_here", "captured_at"]


class _State(threading.local):
    # per transform tracing now, outermost first: [ids of the tensors made in it, ids of its
    # inputs (the fresh copies it hands the function), whether it refuses captured writes]
    levels = ()


STATE = _State()


class tracing_births:
    """Context manager: a transform's function (and the inputs made for it) runs."""

    def __init__(self, refuses):
        self.level = [set(), set(), refuses]

    def __enter__(self):
        from ember import _inference
        STATE.levels = STATE.levels + (self.level,)
        _inference.enter()      # (``_make`` calls ``mark`` while any block is open)
        return self.level

    def __exit__(self, *exc):
        from ember import _inference
        _inference.leave()
        levels = STATE.levels = STATE.levels[:-1]
        if levels:
            levels[-1][0].update(self.level[0])


def note_alias(alias, source):
    """Count ``alias``, made just now over ``source``'s memory, as made by the innermost
    tracing transform that made or was given ``source``, by none if ``source`` is captured
    from outside them all (NOTE above). (Where ``source`` is captured, ``alias``'s id leaves
    the set: it may be that of a tensor made there and collected since.)"""
    for level in reversed(STATE.levels):
        if not _captured(source, level):
            level[0].add(id(alias))
            return
        level[0].discard(id(alias))


def note_given(tensors):
    """Count ``tensors`` as given to the innermost tracing transform's function: the arguments
    ``argnums`` leaves out, which PyTorch wraps too (a BatchNorm buffer passed to
    ``functional_call`` in a ``grad`` may be written). The base of a view is given too:
    PyTorch's wrapper of ``base[0]`` lets ``arg[:2]`` be written (so ember lets the closure
    write ``base``)."""
    if STATE.levels:
        ids = STATE.levels[-1][1]
        for t in tensors:
            ids.add(id(t))
            if t._view is not None:
                ids.add(id(t._view[0]))


def made_here(t):
    """Whether ``t`` was made while the outermost tracing transform ran (or none traces)."""
    levels = STATE.levels
    return not levels or any(id(t) in level[0] for level in levels)


def wrapped_here(t):
    """Whether ``t`` is, in PyTorch, a tensor its transforms wrap (one a transform tracing now
    was given or made): one without storage to its functions that read memory directly."""
    return any(not _captured(t, level) for level in STATE.levels)


def captured_at(t, level):
    """Whether ``t`` is captured by the function of ``level`` (one of ``STATE.levels``)."""
    return _captured(t, level)


def _captured(t, level):
    """Whether ``t`` is a tensor made before ``level``'s function ran, or a view of one."""
    made, inputs, _ = level
    if id(t) in inputs:
        return False
    if t._view is not None:
        t = t._view[0]
        if id(t) in inputs:
            return False
    return id(t) not in made


# PyTorch's overloads of the in-place calls, by whether the last operand is a tensor
# (a Python number is wrapped as one for the first group)
_TENSOR_OVERLOAD = frozenset(("add", "sub", "mul", "div", "true_divide", "multiply",
                              "subtract", "divide", "floor_divide"))
_OVERLOADS = dict.fromkeys(("fill", "lerp", "masked_fill", "pow", "float_power", "fmod",
                            "remainder", "copysign", "eq", "ne", "lt", "le", "gt", "ge",
                            "greater", "greater_equal", "less", "less_equal", "not_equal",
                            "bitwise_and", "bitwise_or", "bitwise_xor"), ("Tensor", "Scalar"))
_OVERLOADS.update(index_fill=("int_Tensor", "int_Scalar"), xlogy=("Tensor", "Scalar_Other"),
                  bitwise_left_shift=("Tensor", "Tensor_Scalar"),
                  bitwise_right_shift=("Tensor", "Tensor_Scalar"))


def _aten_name(op, inputs, params, entry=None):
    """The name PyTorch's error gives the in-place call (``aten::add_.Tensor``); ``entry``:
    the name of the entry point called, where it is not the op's (``greater`` for ``gt``)."""
    from ember._tensor import Tensor
    name = entry or op.name.rstrip("_")
    if name == "_masked_scale":     # (dropout's write: PyTorch's is a mul_)
        return "aten::mul_.Tensor"
    if name == "index_put":
        return "aten::index_put_" if params and params[0] else "aten::copy_"
    if name in _TENSOR_OVERLOAD:
        mode = name in ("div", "divide") and params and params[0] is not None   # rounding_mode
        return f"aten::{name}_.Tensor{'_mode' if mode else ''}"
    last = inputs[-1] if len(inputs) > 1 else (params[-1] if params else None)
    if name in _OVERLOADS:
        return f"aten::{name}_.{_OVERLOADS[name][not isinstance(last, Tensor)]}"
    if name in ("clamp", "clip", "clamp_min", "clamp_max") and any(isinstance(x, Tensor)
                                                           for x in inputs[1:]):
        return f"aten::{name}_.Tensor"
    if name == "scatter":       # (params: dim, ..., reduce)
        kind = ("src", "reduce") if isinstance(last, Tensor) else ("value", "value_reduce")
        return f"aten::scatter_.{kind[params[-1] is not None]}"
    if name == "scatter_reduce":
        return "aten::scatter_reduce_.two"
    return f"aten::{name}_"


def check_captured(op, inputs, params, entry=None):
    """Raise PyTorch's error for an in-place ``op`` into a captured tensor (NOTE above);
    ``entry``: the name of the entry point called, where it is not the op's."""
    levels = STATE.levels
    if not levels or not levels[-1][2] or not _captured(inputs[0], levels[-1]):
        return
    raise RuntimeError(_refusal(_aten_name(op, inputs, params, entry)))


def refuse_captured(t, name):
    """Raise PyTorch's error for the in-place call ``name`` (``aten::uniform_``) that is not a
    registry op, when it writes into a captured ``t`` (NOTE above). Callers test
    ``STATE.levels`` first, so that a program outside transforms pays one read."""
    levels = STATE.levels
    if levels and levels[-1][2] and _captured(t, levels[-1]):
        raise RuntimeError(_refusal(name))


def _refusal(name):
    return (f"During a grad (vjp, jvp, grad, etc) transform, the function provided attempted "
            f"to call in-place operation ({name}) that would mutate a captured Tensor. This is "
            f"not supported; please rewrite the function being transformed to explicitly "
            f"accept the mutated Tensor(s) as inputs.")
