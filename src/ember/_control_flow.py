"""``cond`` and ``while_loop``: PyTorch's structured control-flow operators, run eagerly
(as PyTorch runs them outside ``torch.compile``), with the checks PyTorch makes then.

``cond`` checks only its predicate and calls one branch. PyTorch's ``while_loop`` traces its
functions even in eager mode and refuses what its compiler cannot carry: leaves other than
tensors and ints, a ``cond_fn`` that gives no bool, a ``body_fn`` whose outputs differ from
the carried inputs in number, kind, shape, dtype or device, or that returns an input itself.
ember checks the same, on the real values of each iteration, and raises
``UncapturedHigherOrderOpError`` (a RuntimeError, as in PyTorch) with the explanation
PyTorch gives.
"""

from ember._tensor import Tensor

__all__ = ["cond", "while_loop", "UncapturedHigherOrderOpError"]


class UncapturedHigherOrderOpError(RuntimeError):
    """A control-flow operator's functions do something it cannot carry
    (``torch._dynamo.exc.UncapturedHigherOrderOpError``)."""


def cond(pred, true_fn, false_fn, operands=()):
    """``true_fn(*operands)`` if ``pred`` (a bool or a one-element tensor) holds, else
    ``false_fn(*operands)``."""
    if isinstance(pred, Tensor):
        if pred.numel() != 1:
            raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got "
                               f"{pred}.")
        pred = bool(pred.item())
    elif not isinstance(pred, (bool, int, float)):
        raise RuntimeError(f"Expected pred to be bool or tensor, but got {pred}.")
    return true_fn(*operands) if pred else false_fn(*operands)


def _leaves(tree):
    """The leaves of nested tuples, lists and dicts, in order."""
    if isinstance(tree, (tuple, list)):
        return [leaf for item in tree for leaf in _leaves(item)]
    if isinstance(tree, dict):
        return [leaf for item in tree.values() for leaf in _leaves(item)]
    return [tree]


def _hop_error(explanation):
    return UncapturedHigherOrderOpError(
        f"This higher order operator doesn't work unless it is captured completely with "
        f"ember.compile. Got graph break/error:\n\n{explanation}\n  Higher Order Operator: "
        f"ember.while_loop")


def _holds(value):
    """Whether ``cond_fn``'s result asks for another iteration."""
    if isinstance(value, Tensor):
        if value.ndim != 0 or value.dtype.name != "bool":
            raise _hop_error(f"ember.while_loop: unsupported cond_fn return type\n  "
                             f"Explanation: Expected cond_fn to return a scalar tensor or a "
                             f"bool but got {value.shape}.")
        return bool(value.item())
    if isinstance(value, int):              # bool included
        return bool(value)
    raise _hop_error(f"ember.while_loop: unsupported cond_fn return type\n  Explanation: "
                     f"Expected cond_fn to return a scalar tensor or a bool but got "
                     f"{type(value).__name__}.")


def _difference(out, carried):
    """How one body output differs from its carried input, or None."""
    if isinstance(out, Tensor) != isinstance(carried, Tensor) or not isinstance(
            out, (Tensor, int)):
        return f"type: {out!r} vs {carried!r}"
    if not isinstance(out, Tensor):
        return None
    for what in ("shape", "dtype", "device"):
        a, b = getattr(out, what), getattr(carried, what)
        if a != b:
            return f"'{what}: {a} vs {b}'"
    return None


def _check_body(outputs, inputs):
    outs, ins = _leaves(outputs), _leaves(inputs)
    if len(outs) != len(ins):
        raise UncapturedHigherOrderOpError(
            f"Expected body_fn_output and carried_inputs to have same number of outputs but "
            f"got lhs:{outs} and rhs:{ins}\n  Higher Order Operator: ember.while_loop")
    found = [f"pair[{i}] differ in {d}" for i, d in
             enumerate(_difference(o, c) for o, c in zip(outs, ins)) if d is not None]
    if found:
        raise UncapturedHigherOrderOpError(
            "Expected body_fn_output and carried_inputs to have same metadata but found:\n"
            + "\n".join(found) + "\n  Higher Order Operator: ember.while_loop")
    tensors = [t for t in ins if isinstance(t, Tensor)]
    for o in outs:
        if isinstance(o, Tensor) and any(o is t or o._base is t or
                                         (o._base is not None and o._base is t._base)
                                         for t in tensors):
            raise _hop_error("Encountered aliasing during higher order op tracing\n  "
                             "Explanation: Higher order ops do not support aliasing.\n  "
                             "Hint: Replace `return input` with `return input.clone()` to "
                             "avoid aliasing.")


def while_loop(cond_fn, body_fn, carried_inputs):
    """Run ``carried_inputs = body_fn(*carried_inputs)`` while ``cond_fn(*carried_inputs)``
    holds; the last ``body_fn`` result, or the inputs as a tuple if it never ran."""
    if not (callable(cond_fn) and callable(body_fn)):
        raise RuntimeError("Expect cond_fn and body_fn to be callable.")
    if not isinstance(carried_inputs, (tuple, list)):
        raise _hop_error(f"Expected carried_inputs to be a tuple or a list but got "
                         f"{type(carried_inputs).__name__}.")
    leaves = _leaves(carried_inputs)
    if not all(isinstance(v, (Tensor, int)) for v in leaves):
        raise AssertionError(f"{leaves} can only be of {(Tensor, int)} but got "
                             f"{tuple(type(v) for v in leaves)}")
    result = values = tuple(carried_inputs)
    while _holds(cond_fn(*values)):
        result = body_fn(*values)
        # one carried value may come back bare (PyTorch returns it so)
        outputs = result if isinstance(result, (tuple, list)) else (result,)
        _check_body(outputs, values)
        values = tuple(outputs)
    return result
