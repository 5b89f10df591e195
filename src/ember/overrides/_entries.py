"""The public entry point a registry call came through, named as PyTorch names it to
``__torch_function__``, with the arguments as a user would have written them.

A call of ``add`` reaches the registry from ``ember.add`` (kind "function"), ``Tensor.add``
("method"), ``Tensor.add_`` ("inplace"), ``x + y`` ("operator": ``Tensor.add``; ``2 - x``:
``Tensor.__rsub__``) or ``x += y`` ("operator_inplace"). Torch function modes (_switch.py)
and Tensor subclasses (_protocol.py) are both offered the call under that name.
"""

import ast
import sys

from ember._tensor import Tensor
from ember.ops import operators
from ember.ops._inplace import call_inplace
from ember.ops._entry_points import ENTRY_FUNCTIONS
from ember.ops._registry import ENTRY_KINDS, call
from ember.overrides._modes import STACK

__all__ = ["entry", "entry_kind", "pass_through", "arguments"]


def entry(kind, op, inputs, params, out=None, alias=None):
    """``(func, args, kwargs)`` that ``__torch_function__`` receives for a call of the
    registry ``op`` made through an entry point of ``kind`` (an in-place one: named ``alias``
    where it is not the op's, ``greater_``)."""
    if kind == "function":
        return (_function_entry(op), *arguments(op, inputs, params, out))
    if kind == "method":
        func = getattr(Tensor, op.method_name or op.short_name, op.function)
        return (func, *arguments(op, inputs, params, None, method=True))
    if kind == "inplace":
        name = alias or op.method_name or op.short_name     # (copy_'s op is named with its "_")
        func = getattr(Tensor, name if name.endswith("_") else name + "_")
        return (func, *arguments(op, inputs, params, None, method=True))
    if kind == "operator":
        return _operator(op, inputs)
    if kind == "operator_reflected":        # b.__rsub__(a), both tensors
        return _operator(op, inputs, reflected=True)
    if kind == "operator_symmetric":        # b.__radd__(a): add(b, a), offered as Tensor.add
        return getattr(Tensor, op.name), tuple(inputs), {}
    return _operator_inplace(op, inputs)


def _function_entry(op):
    """The function ``op``'s call came through: an alias's own (``ember.special.expit``,
    ``ember.absolute``), which PyTorch offers to ``__torch_function__``, else ``op.function``."""
    frame = sys._getframe(2)
    for _ in range(8):                  # (the innermost generated entry point up the stack)
        if frame is None:
            break
        fn = ENTRY_FUNCTIONS.get(frame.f_code)
        if fn is not None:
            if getattr(fn, "_ember_op", None) is op and ENTRY_KINDS[frame.f_code] == "function":
                return fn
            break
        frame = frame.f_back
    return op.function


# NOTE [Entry points from frames]
# PyTorch offers ``x.add(y)`` to ``__torch_function__`` as ``Tensor.add`` and ``x + y`` as
# ``Tensor.add`` too, ``torch.add(x, y)`` as ``torch.add``. All of them reach ember's
# dispatcher as one ``call(op, ...)``, and the dispatcher only learns that an operand
# overrides the protocol deep inside. Rather than pass the entry's kind down every call (one
# more argument on the hot path), the rare override path looks one frame up, past the
# dispatcher's own frames, at the code that called it: the registry records the code of each
# generated function, method and operator (``_registry.ENTRY_KINDS``). A call from elsewhere
# (ember's hand-written functions) is offered as the op's function.

def entry_kind():
    """The kind of public entry point the current registry call came through, or None."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code in _PASS_THROUGH:
        frame = frame.f_back
    return None if frame is None else ENTRY_KINDS.get(frame.f_code)


_PASS_THROUGH = set()       # the dispatcher's frames between an entry point and handle_op


def pass_through(*functions):
    """Record ``functions`` as frames between an entry point and ``handle_op``."""
    _PASS_THROUGH.update(f.__code__ for f in functions)


# --- operators --------------------------------------------------------------------------------

_DUNDER = {op_name: name for name, op_name in operators._BINARY.items()}
_DUNDER.update(eq="eq", bitwise_not="invert")
# PyTorch reports these operators by their dunder (``x // y``: ``Tensor.__floordiv__``) ...
_BY_DUNDER = {"floor_divide", "eq", "bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor",
              "bitwise_left_shift", "bitwise_right_shift"}
# ... and these reflected ones (``2 + x``) by the op, operands swapped back: ``Tensor.add(x, 2)``
_SYMMETRIC = operators._SYMMETRIC
_IN_PLACE_BY_DUNDER = {"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
                       "bitwise_right_shift"}


def _operator(op, inputs, reflected=False):
    name = op.name
    if reflected or len(inputs) == 2 and not isinstance(inputs[0], Tensor):   # 2 - x
        args = (inputs[1], inputs[0])                                       # x.__rsub__(2)
        attr = name if name in _SYMMETRIC else f"__r{_DUNDER[name]}__"
    else:
        args = tuple(inputs)
        attr = f"__{_DUNDER[name]}__" if name in _BY_DUNDER else name
        if name == "eq" and not STACK.modes:
            attr = "eq"     # x == subclass: Tensor.__eq__ calls x.eq(y), which is offered
    return getattr(Tensor, attr), args, {}


def _operator_inplace(op, inputs):
    name = op.name
    attr = f"__i{_DUNDER[name]}__" if name in _IN_PLACE_BY_DUNDER else name + "_"
    return getattr(Tensor, attr), tuple(inputs), {}


# --- the arguments of a registry call ---------------------------------------------------------

_NO_DEFAULT = object()
_LAYOUTS = {}       # op -> ([(positional name, default)], vararg name, [(keyword-only, default)])


def arguments(op, inputs, params, out, method=False):
    """``(args, kwargs)`` for a registry call: the positional parameters up to the last one
    not at its default, the keyword-only ones not at their default, and ``out``. A method's
    varargs parameter (``x.view(3, 2)``) is spread when it ends the positional ones."""
    positional, vararg, kwonly = _layout(op)
    values = dict(zip(op.input_names, inputs))
    values.update(zip(op.param_names, params))
    names = [name for name, _ in positional]
    last = len(names) if vararg else max(
        (i + 1 for i, (n, d) in enumerate(positional) if not _is_default(values[n], d)),
        default=0)
    args = [values[n] for n in names[:last]]
    kwargs = {}
    spread = op.method_varargs if method else None
    if spread in names[:last]:
        k = names.index(spread)
        if k == last - 1:
            value = values[spread]
            if isinstance(value, (tuple, list)) and value:
                args[k:] = value            # (x.reshape(()) keeps its one argument)
        else:
            del args[k:]
            kwargs.update((n, values[n]) for n in names[k:last])
    if vararg:
        args.extend(values[vararg])
    kwargs.update((n, values[n]) for n, d in kwonly if not _is_default(values[n], d))
    if out is not None:
        kwargs["out"] = out
    return tuple(args), kwargs


def _layout(op):
    layout = _LAYOUTS.get(op)
    if layout is None:
        a = op._args
        defaults = [_NO_DEFAULT] * (len(a.args) - len(a.defaults)) + list(map(_literal,
                                                                           a.defaults))
        layout = _LAYOUTS[op] = (
            [(p.arg, d) for p, d in zip(a.args, defaults)],
            a.vararg.arg if a.vararg else None,
            [(p.arg, _NO_DEFAULT if d is None else _literal(d))
             for p, d in zip(a.kwonlyargs, a.kw_defaults)])
    return layout


def _literal(node):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return _NO_DEFAULT


_PLAIN = (int, float, bool, complex, str, type(None))


def _is_default(value, default):
    if value is default:
        return True
    if default is _NO_DEFAULT or type(value) is not type(default):
        return False
    if type(value) is tuple:
        return all(type(v) in _PLAIN for v in value) and value == default
    return type(value) in _PLAIN and value == default


def _register_dispatcher():
    from ember.overrides._protocol import handle_op
    pass_through(call, call_inplace, handle_op)


_register_dispatcher()
