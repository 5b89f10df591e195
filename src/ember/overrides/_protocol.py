"""The ``__torch_function__`` protocol: Tensor subclasses and tensor-likes may override ops."""

import contextlib
import functools
import threading

from ember._tensor import Tensor
from ember.overrides._modes import STACK, _pop_mode_temporarily, qualified_name

__all__ = ["handle_torch_function", "has_torch_function", "has_torch_function_unary",
           "has_torch_function_variadic", "DisableTorchFunctionSubclass", "DisableTorchFunction",
           "_disabled_torch_function_impl", "is_tensor_like", "wrap_torch_function",
           "enable_reentrant_dispatch"]


class _State(threading.local):
    subclass_disabled = False


_STATE = _State()


def _disabled_torch_function_impl(cls, func, types, args=(), kwargs=None):
    """Assign as ``__torch_function__`` to make a subclass dispatch like a plain Tensor."""
    return func(*args, **(kwargs or {}))


class DisableTorchFunctionSubclass:
    """Within this block Tensor subclasses dispatch like plain tensors."""

    def __enter__(self):
        self._prev = _STATE.subclass_disabled
        _STATE.subclass_disabled = True

    def __exit__(self, *exc):
        _STATE.subclass_disabled = self._prev


class DisableTorchFunction:
    """Within this block neither Tensor subclasses nor torch function modes take calls."""

    def __enter__(self):
        self._prev = _STATE.subclass_disabled
        _STATE.subclass_disabled = True
        self._modes = STACK.modes[:]        # the modes wait, outside the block
        STACK.modes.clear()

    def __exit__(self, *exc):
        _STATE.subclass_disabled = self._prev
        STACK.modes[:0] = self._modes


def is_plain(cls):
    """Whether instances of a Tensor subclass skip ``__torch_function__`` right now."""
    return (_STATE.subclass_disabled
            or getattr(cls, "__torch_function__", None) is _disabled_torch_function_impl)


@functools.cache
def is_foreign_tensor(cls):
    """Whether ``cls`` is PyTorch's own tensor type (or a subclass), met when both libraries
    share a process: ember cannot run on it, and offering it a call (or running PyTorch's
    calls on ember tensors) would bounce between the two handlers without end."""
    return not issubclass(cls, Tensor) and any(
        c.__name__ in _FOREIGN_TENSOR_NAMES and c.__module__.partition(".")[0] == "torch"
        for c in cls.__mro__)


_FOREIGN_TENSOR_NAMES = ("Tensor", "TensorBase")


def has_torch_function(args):
    """Whether an argument overrides the protocol, or, given any argument, a torch function
    mode is active (as in PyTorch, no arguments never do)."""
    return bool(args) and bool(STACK.modes) or any(
        type(a) is not Tensor and hasattr(type(a), "__torch_function__")
        and not (isinstance(a, Tensor) and is_plain(type(a))) for a in args)


def has_torch_function_unary(arg):
    """``has_torch_function((arg,))``."""
    return has_torch_function((arg,))


def has_torch_function_variadic(*args):
    """``has_torch_function(args)``."""
    return has_torch_function(args)


def is_tensor_like(inp):
    """Whether ``inp`` is a Tensor or has a ``__torch_function__`` (a type that does counts)."""
    return type(inp) is Tensor or hasattr(inp, "__torch_function__")


def _overloaded(values):
    """One argument per overriding type: subclasses before superclasses, else left to right."""
    found = []
    for v in values:
        cls = type(v)
        if cls is Tensor or not hasattr(cls, "__torch_function__") \
                or any(type(f) is cls for f in found) or is_foreign_tensor(cls):
            continue
        if isinstance(v, Tensor) and is_plain(cls):
            continue
        for i, other in enumerate(found):
            if issubclass(cls, type(other)):
                found.insert(i, v)
                break
        else:
            found.append(v)
    return found


def handle_torch_function(public_api, relevant_args, *args, **kwargs):
    """Offer ``public_api(*args, **kwargs)`` to the innermost mode, then to each overriding
    argument among ``relevant_args``, as a function that ``has_torch_function`` should."""
    return _handle(public_api, relevant_args, args, kwargs, False)


def handle_native(public_api, relevant_args, *args, **kwargs):
    """``handle_torch_function`` for an entry point that is native code in PyTorch (a Tensor
    method or property), whose TypeError, when no handler takes the call, PyTorch words
    differently."""
    return _handle(public_api, relevant_args, args, kwargs, True)


def _handle(public_api, relevant_args, args, kwargs, native):
    overloaded = _overloaded(relevant_args)
    types = tuple(type(a) for a in overloaded)
    if STACK.modes:
        with _pop_mode_temporarily() as mode:
            result = mode.__torch_function__(public_api, types, args, kwargs)
        if result is not NotImplemented:
            return result
    elif not overloaded:
        return public_api(*args, **kwargs)
    return _offer_in_turn(public_api, overloaded, types, args, kwargs, native)


def _offer_in_turn(func, overloaded, types, args, kwargs, native=True):
    """The first result other than NotImplemented of the ``overloaded`` arguments'
    ``__torch_function__``; PyTorch's TypeError when none takes the call (worded as its
    native functions word it, or as its Python ``handle_torch_function`` does)."""
    for arg in overloaded:
        result = arg.__torch_function__(func, types, args, kwargs)
        if result is not NotImplemented:
            return result
    if not native:
        raise TypeError(f"no implementation found for '{qualified_name(func)}' on types that "
                        f"implement __torch_function__: {list(types)}")
    handlers = "".join(f"  - tensor subclass {t}\n" for t in types)
    raise TypeError(f"Multiple dispatch failed for '{qualified_name(func)}'; all "
                    f"__torch_function__ handlers returned NotImplemented:\n\n{handlers}\n"
                    f"For more information, try re-running with TORCH_LOGS=not_implemented")


def offer_left_operand(func, self, other):
    """``self == other`` (``func``: ``Tensor.__eq__``) offered to ``__torch_function__`` for
    ``self`` alone, as PyTorch offers it; NotImplemented when ``self`` does not override."""
    overloaded = _overloaded((self,))
    if not overloaded or STACK.modes or getattr(type(self), "_takes_registry_calls", False):
        return NotImplemented       # (the modes, and ember's own types, take the registry's)
    return _offer_in_turn(func, overloaded, (type(self),), (self, other), {})


def wrap_torch_function(dispatcher):
    """Decorate a function to honour ``__torch_function__`` on the arguments ``dispatcher``
    (same signature) returns."""
    def decorate(func):
        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            relevant = dispatcher(*args, **kwargs)
            if has_torch_function(relevant):
                return handle_torch_function(wrapped, relevant, *args, **kwargs)
            return func(*args, **kwargs)
        return wrapped
    return decorate


@contextlib.contextmanager
def enable_reentrant_dispatch():
    """A no-op context: ember has no dispatcher below ``__torch_function__`` to re-enter."""
    yield


def handle_op(op, inputs, params, out, inplace=False):
    """Offer a registry op's call to each overriding type in turn, as PyTorch does: under
    the public entry point it came through (``Tensor.add`` for ``x.add(y)``)."""
    from ember.overrides._entries import entry, entry_kind
    kind = entry_kind() or ("inplace" if inplace else "function")
    flat = []
    for x in inputs:
        flat.extend(x if isinstance(x, (list, tuple)) else (x,))
    if kind == "operator_reflected":        # b.__radd__(a): b's type first
        flat.reverse()
    overloaded = _overloaded(flat)
    types = tuple(type(v) for v in overloaded)
    if any(getattr(t, "_takes_registry_calls", False) for t in types):
        func, args, kwargs = _registry_call(op, inputs, params, out, inplace)
    else:
        func, args, kwargs = entry(kind, op, inputs, params, out)
    return _offer_in_turn(func, overloaded, types, args, kwargs)


def _registry_call(op, inputs, params, out, inplace):
    """``(func, args, kwargs)`` for ember's own overriding types (sparse, batched and dual
    tensors), which run the op's parts themselves: the op's function (or in-place method)
    and its parameters by name."""
    if inplace:
        name = op.method_name or op.short_name
        name = name if name.endswith("_") else name + "_"
        func = getattr(Tensor, name, None) or _inplace_stand_in(op, name)
    else:
        func = op.function
    args, kwargs = tuple(inputs), dict(zip(op.param_names, params))
    if _params_between_inputs(op):      # index_put_(indices, values): name all but the first
        kwargs.update(zip(op.input_names[1:], args[1:]))
        args = args[:1]
    if out is not None:
        kwargs["out"] = out
    return func, args, kwargs


@functools.cache
def _inplace_stand_in(op, name):
    """The in-place function offered for an op with no in-place ``Tensor`` method of its own
    (``F.silu(x, inplace=True)``)."""
    def inplace(*args, **kwargs):
        from ember.ops._inplace import call_inplace
        inputs, params = op_arguments(op, args, kwargs)
        return call_inplace(op, inputs, params)
    inplace._ember_op = op
    inplace.__name__ = inplace.__qualname__ = name
    return inplace


def op_arguments(op, args, kwargs):
    """``(inputs, params)`` of a registry op's call as ``handle_op`` offers it (``args``,
    ``kwargs``): for ember's own overriding types, which run the op's parts themselves."""
    if len(args) < len(op.input_names):         # inputs after a parameter come by name
        args = (*args, *(kwargs[n] for n in op.input_names[len(args):] if n in kwargs))
    return list(args), tuple(kwargs[n] for n in op.param_names)


@functools.cache
def _params_between_inputs(op):
    """Whether a parameter of ``op`` comes before one of its tensor inputs in its signature,
    so that the inputs cannot be passed by position alone."""
    names = tuple(a.arg for a in op._args.args)
    return names[:len(op.input_names)] != op.input_names


def default_torch_function(cls, func, types, args, kwargs):
    """Tensor's own ``__torch_function__``: run the op, then return the subclass type."""
    if not all(issubclass(cls, t) for t in types) or _has_foreign_tensor(args):
        return NotImplemented           # (PyTorch's call on an ember tensor, see is_foreign_tensor)
    with DisableTorchFunctionSubclass():
        result = func(*args, **(kwargs or {}))
    if _is_grad_getter(func) or _unswitched(func) is _REDUCE_EX:
        # PyTorch hands .grad back as it is stored; a pickle's recipe is no result (ember's
        # holds the storage's root tensor: converted, pickling it would recurse)
        return result
    return _convert(result, cls, args)


def _has_foreign_tensor(args):
    for a in args:
        if type(a) is list or type(a) is tuple:
            if _has_foreign_tensor(a):
                return True
        elif is_foreign_tensor(type(a)):
            return True
    return False


_GRAD = vars(Tensor)["grad"]
_REDUCE_EX = vars(Tensor)["__reduce_ex__"]


def _unswitched(func):
    return getattr(func, "original", None) or getattr(func, "_ember_mode_original", func)


def _is_grad_getter(func):
    owner = getattr(func, "__self__", None)         # (a mode's stand-in keeps the original)
    return owner is _GRAD or getattr(owner, "original", None) is _GRAD


def _conj_view():
    from ember import _conj_view        # (it imports ember.overrides)
    return _conj_view


def _convert(value, cls, args):
    if cls is Tensor:
        return value
    if type(value) is Tensor:
        # as PyTorch's: an alias of the result even when it is fresh (x.add_(subclass) leaves
        # x a Tensor), so the result is a view with an AliasBackward0 node over the op's
        return value.as_subclass(cls)
    if type(value) is tuple:
        return tuple(_convert(v, cls, args) for v in value)
    if isinstance(value, Tensor) and type(value) is _conj_view().ConjView and not any(
            value is a for a in args):
        _conj_view().hold_values(value)     # m.conj(): the subclass, its values in memory of
        value.__class__ = cls               # its own (PyTorch's keeps the bit and the alias)
        return value
    if isinstance(value, tuple) and hasattr(value, "_fields"):     # named results (max)
        return type(value)(*(_convert(v, cls, args) for v in value))
    if type(value) is list:
        return [_convert(v, cls, args) for v in value]
    return value

