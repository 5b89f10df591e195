"""The switch that routes ember's entry points to torch function modes while any is active.

See NOTE [Modes at no cost] in _modes.py. While installed:

- the generated functions, methods and in-place methods of the op registry (which look up
  ``_call`` / ``_call_inplace`` in namespaces they share, ``_registry.GENERATED``) and the
  Python operators (ops/operators.py) call the stand-ins below; a mode receives the public
  function (``ember.add``), the method (``Tensor.add``) or, for operators, what PyTorch names
  (``x + y``: ``Tensor.add``, ``2 - x``: ``Tensor.__rsub__``, ``x == y``: ``Tensor.__eq__``);
- every other public function of ember, ember.nn.functional, .linalg, .fft, .special, the
  autograd entry points (``backward``, ``grad``), every hand-written Tensor method and every
  Tensor property is replaced by a stand-in (made once, so a mode may keep and compare it),
  which the mode receives as ``func`` (a property's: its ``__get__`` / ``__set__``, as in
  PyTorch); the calls such a function makes run with the mode popped, as in PyTorch, where
  ``loss.backward()`` shows the mode ``backward`` and nothing of the gradient computation.

Functions PyTorch's modes do not see (``manual_seed``, ``is_grad_enabled``) are left alone,
and so are the registry's private ops (``_alias``): ember's internals, like PyTorch's C++.
"""

import functools
import types

from ember._tensor import Tensor
from ember.ops import _registry, operators
from ember.ops._inplace import call_inplace as _call_inplace
from ember.overrides._catalog import NAMESPACES, namespace_object, unseen_by_modes
from ember.overrides._entries import entry, entry_kind, pass_through
from ember.overrides._modes import STACK, mode_dispatch
from ember.overrides._protocol import _overloaded, handle_torch_function

__all__ = ["install", "uninstall", "original_of"]

_call = _registry.call
_INSTALLED = []             # (target, name, original, replacement) while installed


def install():
    """Route the entry points to the modes (called when the first mode is pushed)."""
    generated = _registry.GENERATED
    module = vars(operators)
    swaps = [(generated["function"], "_call", _call, _function_call),
             (generated["method"], "_call", _call, _method_call),
             (generated["inplace"], "_call_inplace", _call_inplace, _inplace_call),
             (module, "call", _call, _operator_call),
             (module, "call_inplace", _call_inplace, _operator_inplace_call)]
    for target, name, original, replacement in swaps + _stand_ins():
        if isinstance(target, dict):
            if target.get(name) is original:
                target[name] = replacement
                _INSTALLED.append((target, name, original, replacement))
        elif vars(target).get(name) is original:
            setattr(target, name, replacement)
            _INSTALLED.append((target, name, original, replacement))


def uninstall():
    """Put every entry point back (called when the last mode is popped)."""
    for target, name, original, replacement in reversed(_INSTALLED):
        if isinstance(target, dict):
            if target.get(name) is replacement:     # (not replaced by someone else since)
                target[name] = original
        elif vars(target).get(name) is replacement:
            setattr(target, name, original)
    _INSTALLED.clear()


def original_of(func):
    """The function a stand-in stands for (any other object: itself)."""
    owner = getattr(func, "__self__", None)
    if isinstance(owner, _ModeProperty):            # a stand-in property's __get__ / __set__
        return getattr(owner.original, func.__name__)
    return getattr(func, "_ember_mode_original", func)


# --- registry calls ---------------------------------------------------------------------------

def _function_call(op, inputs, params, out=None):
    if not STACK.modes or op.short_name[0] == "_":      # private ops: ember's internals
        return _call(op, inputs, params, out)
    return _offer(inputs, *entry("function", op, inputs, params, out))


def _method_call(op, inputs, params, out=None):
    if not STACK.modes:
        return _call(op, inputs, params, out)
    return _offer(inputs, *entry("method", op, inputs, params))


def _inplace_call(op, inputs, params, entry_name=None):
    if not STACK.modes:
        return _call_inplace(op, inputs, params, entry_name)
    return _offer(inputs, *entry("inplace", op, inputs, params, alias=entry_name))


def _offer(inputs, func, args, kwargs):
    flat = []
    for x in inputs:
        flat.extend(x if isinstance(x, (list, tuple)) else (x,))
    overloaded = _overloaded(flat)
    return mode_dispatch(func, tuple(type(a) for a in overloaded), args, kwargs, overloaded)


# --- operators --------------------------------------------------------------------------------

def _operator_call(op, inputs, params, out=None):
    if not STACK.modes:
        return _call(op, inputs, params, out)
    return _offer(inputs, *entry(entry_kind() or "operator", op, inputs, params))


def _operator_inplace_call(op, inputs, params):
    if not STACK.modes:
        return _call_inplace(op, inputs, params)
    return _offer(inputs, *entry("operator_inplace", op, inputs, params))


# --- every other entry point ------------------------------------------------------------------

def _make_stand_in(owner, name, original):
    """A function that offers ``owner.name``'s calls to the innermost mode, if any."""
    @functools.wraps(original)
    def stand_in(*args, **kwargs):
        flat = []
        for x in (*args, *kwargs.values()):
            flat.extend(x if isinstance(x, (list, tuple)) else (x,))
        overloaded = _overloaded(flat)
        if STACK.modes:
            return mode_dispatch(stand_in, tuple(type(a) for a in overloaded), args, kwargs,
                                 overloaded)
        if overloaded:      # called by a mode's handler: the subclasses' turn, as in PyTorch
            return handle_torch_function(stand_in, overloaded, *args, **kwargs)
        return original(*args, **kwargs)
    stand_in._ember_mode_original = original
    if owner is Tensor:             # Tensor.__getitem__, not the function's own name
        stand_in.__name__ = name
        stand_in.__qualname__ = f"Tensor.{name}"
    return stand_in


class _ModeProperty(property):
    """A Tensor property whose getter and setter offer the access to the innermost mode (as
    ``func``: this property's ``__get__`` / ``__set__``, as PyTorch passes)."""


def _property_stand_in(prop):
    def fget(self):
        if STACK.modes:
            return _offer((self,), stand_in.__get__, (self,), {})
        if _overloaded((self,)):
            return handle_torch_function(stand_in.__get__, (self,), self)
        return prop.fget(self)

    def fset(self, value):
        if STACK.modes:
            return _offer((self,), stand_in.__set__, (self, value), {})
        if _overloaded((self,)):
            return handle_torch_function(stand_in.__set__, (self,), self, value)
        prop.fset(self, value)

    stand_in = _ModeProperty(fget, fset if prop.fset else None, prop.fdel, prop.__doc__)
    stand_in.original = prop
    return stand_in


@functools.cache
def _stand_ins():
    """(target, name, original, stand-in) for every entry point a mode should see, made
    once; a module's target is its dict (faster to write than with setattr)."""
    import ember
    points = [(ember.autograd, "backward"), (ember.autograd, "grad")]
    for namespace in NAMESPACES:
        owner = namespace_object(namespace)
        skip = unseen_by_modes(namespace)
        points += [(owner, name) for name, value in vars(owner).items()
                   if name not in skip and _wanted(namespace, name, value)]
    made, swaps = {}, []            # one stand-in per function: ember.bilinear is F.bilinear
    for owner, name in points:
        value = vars(owner)[name]
        if value not in made:
            made[value] = (_property_stand_in(value) if type(value) is property
                           else _make_stand_in(owner, name, value))
        swaps.append((owner if owner is Tensor else vars(owner), name, value, made[value]))
    return swaps


def _wanted(namespace, name, value):
    """Whether ``namespace.name`` needs a stand-in: a hand-written public function, or a
    Tensor's public property or hand-written method (dunders too, but the operators)."""
    if namespace != "Tensor":
        return not name.startswith("_") and _hand_written(value)
    if type(value) is property:
        return not name.startswith("_")
    return ((not name.startswith("_") or name.endswith("__")) and _hand_written(value)
            and value.__module__ != operators.__name__)        # (routed apart)


def _hand_written(value):
    return (type(value) is types.FunctionType
            and (value.__module__ or "").startswith("ember")
            and not value.__code__.co_filename.startswith("<ember op "))


pass_through(_function_call, _method_call, _inplace_call, _operator_call, _operator_inplace_call)
