"""Python's operators on Tensor (``a + b``, ``2 ** t``, ``a @ b``, ``a += b``), from the ops."""

import ast

import numpy as np

from ember._creation import as_tensor
from ember._tensor import Tensor
from ember.ops._inplace import call_inplace
from ember.ops._registry import ENTRY_KINDS, REGISTRY, call
from ember.overrides import is_plain
from ember.overrides._modes import STACK

# operator -> op name; each binary op gets __op__, __rop__ (swapped) and __iop__ (in place)
_BINARY = {
    "add": "add", "sub": "sub", "mul": "mul", "truediv": "div", "floordiv": "floor_divide",
    "mod": "remainder", "pow": "pow", "matmul": "matmul", "and": "bitwise_and",
    "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "bitwise_left_shift",
    "rshift": "bitwise_right_shift",
}
_COMPARISONS = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}
_UNARY = {"neg": "neg", "pos": "positive", "abs": "abs", "invert": "bitwise_not"}

_OPERAND_TYPES = frozenset((Tensor, int, float, bool, complex))
# ops whose reflected operator is the op itself, the tensor first (2 + t is t + 2)
_SYMMETRIC = frozenset(("add", "mul", "bitwise_and", "bitwise_or", "bitwise_xor"))


def _is_operand(x):
    return isinstance(x, (Tensor, np.number, np.bool_))


def _param_defaults(op):
    """The default value of every non-tensor parameter, in dispatch order."""
    args = op._args
    positional = [a.arg for a in args.args]
    defaults = dict(zip(positional[len(positional) - len(args.defaults):],
                        (ast.literal_eval(d) for d in args.defaults)))
    defaults.update((a.arg, ast.literal_eval(d)) for a, d in
                    zip(args.kwonlyargs, args.kw_defaults) if d is not None)
    return tuple(defaults.get(name) for name in op.param_names)


# NOTE [Tensor and NumPy array operands]: as in PyTorch, ``t + array`` (and ``t += array``,
# ``t < array``, ``t @ array``) is left to NumPy: the operator returns NotImplemented, NumPy
# computes on ``np.asarray(t)`` (which refuses a tensor that requires grad) with NumPy's
# promotion, and ``Tensor.__array_wrap__`` makes the result a tensor; ``t += array`` rebinds
# ``t`` to that new tensor. Only ``==`` and ``!=`` read the array as a tensor (PyTorch's
# ``t != array`` falls back to Python's identity test, True: ember compares elementwise).
# With the array on the left, NumPy defers to Tensor (``__array_priority__``) and every
# reflected operator returns NotImplemented, so ``array + t`` raises TypeError as in PyTorch,
# except ``array / t``: PyTorch's ``__rdiv__`` is ``t.reciprocal() * array``, left to NumPy.


# NOTE [Operators no handler takes]: as PyTorch's binary operators do, a TypeError inside
# one (every ``__torch_function__`` of two unrelated subclasses returned NotImplemented, or
# ``t @ 2``) makes it return NotImplemented, so that Python tries the reflected operator (or
# ``+`` for ``+=``) and raises its own "unsupported operand type(s)" (``!=`` falls back to
# identity). A ``try`` costs nothing until something raises.

def _operator(op, reflected):
    # three definitions rather than one with a flag: each kind of entry point needs code of
    # its own (NOTE [Entry points from frames] in overrides/_entries.py), and a flag would
    # cost every operator call a test
    params = _param_defaults(op)
    if reflected and op.name in _SYMMETRIC:
        def method(self, other):        # 2 * t is t * 2 in PyTorch (t's dtype rounds 2 or not)
            if type(other) not in _OPERAND_TYPES and not _is_operand(other):
                return NotImplemented
            try:
                return call(op, (self, other), params)
            except TypeError:
                return NotImplemented
    elif reflected:
        def method(self, other):
            if type(other) not in _OPERAND_TYPES and not _is_operand(other):
                return NotImplemented
            try:
                return call(op, (other, self), params)
            except TypeError:
                return NotImplemented
    else:
        def method(self, other):
            if type(other) not in _OPERAND_TYPES and not _is_operand(other):
                return NotImplemented
            try:
                return call(op, (self, other), params)
            except TypeError:
                return NotImplemented
    return method


def _overriding(x):
    """Whether ``x`` is a tensor whose type overrides ``__torch_function__``."""
    return isinstance(x, Tensor) and type(x) is not Tensor and not is_plain(type(x))


def _reciprocal_times(div):
    """``number / t`` (and ``t.__rtruediv__(other)`` called directly with a tensor), which
    PyTorch computes as ``t.reciprocal() * other``: its values (rounded twice), its dtype
    (an integer ``t`` gives a float32 reciprocal) and its graph. Overriding operands and torch
    function modes are offered the one call ``Tensor.__rdiv__``, as in PyTorch."""
    params = _param_defaults(div)
    reciprocal, mul = REGISTRY["reciprocal"], REGISTRY["mul"]

    def method(self, other):
        if type(other) not in _OPERAND_TYPES and not _is_operand(other):
            if isinstance(other, np.ndarray):   # see NOTE [Tensor and NumPy array operands]
                return call(reciprocal, (self,), ()) * other
            return NotImplemented
        try:
            if STACK.modes or (type(self) is not Tensor and _overriding(self)) or (
                    type(other) not in _OPERAND_TYPES and _overriding(other)):
                return call(div, (other, self), params)
            return call(mul, (call(reciprocal, (self,), ()), other), ())
        except TypeError:
            return NotImplemented
    return method


def _equality(op):
    """``==`` / ``!=``: the operator methods, also reading a NumPy array as a tensor; as in
    PyTorch, ``==`` is offered to ``__torch_function__`` for its left operand alone."""
    params = _param_defaults(op)
    alone = op.name == "eq"

    def method(self, other):
        if type(other) is np.ndarray:
            other = as_tensor(other, device="cpu")   # (NumPy data stays on the host)
        elif type(other) not in _OPERAND_TYPES and not _is_operand(other):
            return NotImplemented
        try:
            if alone and type(self) is not Tensor:
                from ember.overrides._protocol import offer_left_operand
                result = offer_left_operand(method, self, other)
                if result is not NotImplemented:
                    return result
            return call(op, (self, other), params)
        except TypeError:
            return NotImplemented
    return method


def _inplace_operator(op):
    params = _param_defaults(op)

    def method(self, other):
        if type(other) not in _OPERAND_TYPES and not _is_operand(other):
            return NotImplemented
        try:
            return call_inplace(op, (self, other), params)
        except TypeError:
            return NotImplemented
    return method


def _unary_operator(op):
    params = _param_defaults(op)

    def method(self):
        return call(op, (self,), params)
    return method


def _invert(op):
    params = _param_defaults(op)

    def __invert__(self):
        if self._data.dtype.kind not in "biu":
            raise TypeError("~ (operator.invert) is only implemented on integer and "
                            "Boolean-type tensors")
        return call(op, (self,), params)
    return __invert__


def install():
    """Attach the operator methods for every op that is registered."""
    for name, op_name in _BINARY.items():
        op = REGISTRY.get(op_name)
        if op is None:
            continue
        _attach(f"__{name}__", _operator(op, False))
        if name == "truediv":
            _attach("__rtruediv__", _reciprocal_times(op), kind="operator_reflected")
        else:
            _attach(f"__r{name}__", _operator(op, True), kind=(
                "operator_symmetric" if op_name in _SYMMETRIC else "operator_reflected"))
        if name != "matmul":            # PyTorch has no in-place @=: it rebinds the name
            _attach(f"__i{name}__", _inplace_operator(op), inplace=True)
    for name, op_name in _COMPARISONS.items():
        if op_name in REGISTRY:
            op = REGISTRY[op_name]
            method = _equality(op) if name in ("eq", "ne") else _operator(op, False)
            _attach(f"__{name}__", method)
    for name, op_name in _UNARY.items():
        if op_name in REGISTRY:
            make = _invert if name == "invert" else _unary_operator
            _attach(f"__{name}__", make(REGISTRY[op_name]))


def _attach(name, method, inplace=False, kind="operator"):
    """``Tensor.<name> = method``, named so (a torch function mode sees ``__rsub__``;
    ``__rtruediv__`` is also ``__rdiv__``, its name in PyTorch)."""
    ENTRY_KINDS[method.__code__] = "operator_inplace" if inplace else kind
    method.__name__ = "__rdiv__" if name == "__rtruediv__" else name
    method.__qualname__ = f"Tensor.{method.__name__}"
    setattr(Tensor, name, method)
    if name == "__rtruediv__":
        Tensor.__rdiv__ = method
    elif name in ("__truediv__", "__itruediv__"):   # PyTorch keeps Python 2's names too
        setattr(Tensor, name.replace("truediv", "div"), method)
