"""Torch function modes: objects whose ``__torch_function__`` sees every call of a block.

NOTE [Modes at no cost]
The mode stack is per thread, as in PyTorch. Nothing on the dispatch path looks at it while
no thread has a mode: the first ``_push_mode`` switches ember's entry points to mode-aware
stand-ins (see _switch.py), and the ``_pop_mode`` that leaves no mode on any thread switches
them back. A stand-in offers its call to the innermost mode of its thread, with that mode
popped while its ``__torch_function__`` runs (so ``func(*args, **kwargs)`` reaches the next
mode, then the op); on a thread without modes it runs the call as before.
"""

import contextlib
import threading
import warnings

__all__ = ["TorchFunctionMode", "BaseTorchFunctionMode", "_push_mode", "_pop_mode",
           "_pop_mode_temporarily", "_get_current_function_mode",
           "_get_current_function_mode_stack", "_get_function_stack_at",
           "_len_torch_function_stack", "_is_torch_function_mode_enabled", "mode_dispatch"]


class _Stack(threading.local):
    def __init__(self):
        self.modes = []


STACK = _Stack()
_LOCK = threading.Lock()
_PUSHED = [0]               # modes pushed and not yet popped, on all threads together


class TorchFunctionMode:
    """A context manager whose ``__torch_function__`` takes every ember call in its block."""

    def __init__(self):
        pass

    def __torch_function__(self, func, types, args=(), kwargs=None):
        """Handle ``func(*args, **kwargs)``; the mode is popped while this runs."""
        raise NotImplementedError

    def __enter__(self):
        _push_mode(self)
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        _pop_mode()

    @classmethod
    def push(cls, *args, **kwargs):
        """Deprecated: a new mode (enter it with ``with``)."""
        warnings.warn("`Mode.push()` is no longer necessary and can be replaced with just "
                      "`with Mode()`", stacklevel=2)
        return cls(*args, **kwargs)


class BaseTorchFunctionMode(TorchFunctionMode):
    """A mode that runs every call unchanged: subclass it to override a few."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        """Run the call (reaching the next mode, if any)."""
        return func(*args, **(kwargs or {}))


def _push_mode(mode):
    """Make ``mode`` this thread's innermost mode."""
    with _LOCK:
        if _PUSHED[0] == 0:
            from ember.overrides._switch import install
            install()
        _PUSHED[0] += 1
    STACK.modes.append(mode)


def _pop_mode():
    """Remove and return this thread's innermost mode."""
    if not STACK.modes:
        raise RuntimeError("trying to pop from empty mode stack")
    mode = STACK.modes.pop()
    with _LOCK:
        _PUSHED[0] -= 1
        if _PUSHED[0] == 0:
            from ember.overrides._switch import uninstall
            uninstall()
    return mode


@contextlib.contextmanager
def _pop_mode_temporarily():
    """Pop the innermost mode for the block (yielding it), then push it back."""
    mode = STACK.modes.pop()
    try:
        yield mode
    finally:
        STACK.modes.append(mode)


def _get_current_function_mode():
    """This thread's innermost mode, or None."""
    modes = STACK.modes
    return modes[-1] if modes else None


def _get_current_function_mode_stack():
    """This thread's modes, outermost first."""
    return list(STACK.modes)


def _get_function_stack_at(i):
    """This thread's ``i``-th mode from the outermost."""
    return STACK.modes[i]


def _len_torch_function_stack():
    """How many modes this thread has."""
    return len(STACK.modes)


def _is_torch_function_mode_enabled():
    """Whether this thread has a mode."""
    return bool(STACK.modes)


def mode_dispatch(func, types, args, kwargs, overloaded=()):
    """Offer a call to this thread's innermost mode (popped meanwhile), then, if it returns
    NotImplemented, to the ``overloaded`` tensor-likes, as PyTorch does."""
    modes = STACK.modes
    mode = modes.pop()
    try:
        result = mode.__torch_function__(func, types, args, kwargs)
    finally:
        modes.append(mode)
    if result is not NotImplemented:
        return result
    for arg in overloaded:
        result = arg.__torch_function__(func, types, args, kwargs)
        if result is not NotImplemented:
            return result
    handlers = "".join(f"  - tensor subclass {type(a)}\n" for a in overloaded)
    raise TypeError(f"Multiple dispatch failed for '{qualified_name(func)}'; all "
                    f"__torch_function__ handlers returned NotImplemented:\n\n  - mode object "
                    f"{mode!r}\n{handlers}\nFor more information, try re-running with "
                    f"TORCH_LOGS=not_implemented")


def qualified_name(func):
    """``module.qualname`` of a function, as PyTorch's messages name it (``ember.Tensor.x``
    for a Tensor method, wherever it is written)."""
    qualname = getattr(func, "__qualname__", func)
    owner = getattr(func, "__self__", None)
    if isinstance(owner, property):             # a Tensor property's __get__ / __set__
        from ember._tensor import Tensor
        owner = getattr(owner, "original", owner)
        names = [n for n, v in vars(Tensor).items() if getattr(v, "original", v) is owner]
        qualname = f"Tensor.{names[0] if names else '?'}.{func.__name__}"
    if isinstance(qualname, str) and qualname.startswith("Tensor."):
        return f"ember.{qualname}"
    return f"{getattr(func, '__module__', None)}.{qualname}"
