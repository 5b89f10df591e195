"""Grad modes: no_grad, enable_grad, set_grad_enabled, inference_mode (thread-local)."""

import functools
import inspect
import threading

from ember import _inference

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
           "is_grad_enabled", "is_inference_mode_enabled", "enforce_grad_layout_policy"]


# NOTE [Grad mode inside inference mode]
# Nothing records inside inference mode, even where grad mode is on again (``enable_grad``
# within ``inference_mode``), as in PyTorch. ``grad_enabled`` says whether ops record; outside
# inference mode it is the grad mode itself. Inside, it stays False and the grad mode that
# is_grad_enabled() reports is kept in ``grad_mode`` (read only there). Code that sets the
# grad mode for a while uses swap_grad_mode/restore_grad_mode (or a mode object), not
# ``grad_enabled`` directly; code that must record whatever the caller's mode (the function
# transforms, nn.grad) runs under inference_mode(False), as PyTorch's transforms do.
class _State(threading.local):
    grad_enabled = True         # whether ops record
    grad_mode = True            # the grad mode while inference mode is on
    inference = False
    grad_layout = True          # whether leaves' gradients keep their layout (see graph.py)


STATE = _State()                # the dispatcher reads STATE.grad_enabled on every op
# inference-mode blocks open in any thread: while there are none, the grad modes below skip
# reading the thread-local ``STATE.inference`` (a list item is read several times faster)
_INFERENCE_OPEN = _inference.ACTIVE


def _set_grad_mode(mode):
    """Set the grad mode (see NOTE [Grad mode inside inference mode])."""
    STATE.grad_mode = mode
    STATE.grad_enabled = mode and not STATE.inference


def swap_grad_mode(mode):
    """Set the grad mode to ``mode`` as ``set_grad_enabled`` does (inside inference mode ops
    still record nothing); returns the previous mode, for ``restore_grad_mode``."""
    state = STATE
    if _INFERENCE_OPEN[0] and state.inference:
        prev, state.grad_mode = state.grad_mode, mode
    else:
        prev, state.grad_enabled = state.grad_enabled, mode
    return prev


def restore_grad_mode(prev):
    """Undo ``swap_grad_mode``: set the grad mode back to ``prev``."""
    state = STATE
    if _INFERENCE_OPEN[0] and state.inference:
        state.grad_mode = prev
    else:
        state.grad_enabled = prev


def is_grad_enabled():
    """Whether grad mode is on (operations record the autograd graph, outside inference
    mode)."""
    if _INFERENCE_OPEN[0] and STATE.inference:
        return STATE.grad_mode
    return STATE.grad_enabled


def is_inference_mode_enabled():
    """Whether inference mode is on."""
    return STATE.inference


def entering_clones(manager, fn):
    """``fn`` wrapped so that each call runs inside a fresh ``manager.clone()``: how a context
    manager used as a decorator applies to every call, not once."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with manager.clone():
            return fn(*args, **kwargs)
    return wrapper


class _Mode:
    """A grad mode usable as a context manager and as a decorator."""

    def __call__(self, fn):
        if inspect.isgeneratorfunction(fn):
            return self._wrap_generator(fn)

        return entering_clones(self, fn)

    def _wrap_generator(self, fn):
        """Wrap a generator function so that its body, and only its body, runs in this mode:
        the mode is entered on each resume and left again at each ``yield``."""
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            gen = fn(*args, **kwargs)
            try:
                with self._clone():
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response
                    except GeneratorExit:
                        with self._clone():
                            gen.close()
                        raise
                    except BaseException as exc:        # forwarded into the generator
                        with self._clone():
                            response = gen.throw(exc)
                    else:
                        with self._clone():
                            response = gen.send(request)
            except StopIteration as stop:
                return stop.value
        return wrapper

    def _clone(self):
        return type(self)()

    def clone(self):
        """A fresh copy of this mode (what each call of a decorated function enters)."""
        return self._clone()

    @property
    def mode(self):
        """The mode this object sets (``set_grad_enabled``/``inference_mode``)."""
        return self._mode

    def __enter__(self):
        if _INFERENCE_OPEN[0] and STATE.inference:
            self._prev = STATE.grad_mode
            STATE.grad_mode = self._on
        else:
            self._prev = STATE.grad_enabled
            STATE.grad_enabled = self._on

    def __exit__(self, *exc):
        if _INFERENCE_OPEN[0] and STATE.inference:
            STATE.grad_mode = self._prev
        else:
            STATE.grad_enabled = self._prev


class no_grad(_Mode):
    """Disable graph recording inside the block or decorated function."""

    def __new__(cls, orig_func=None):
        self = super().__new__(cls)
        return self(orig_func) if callable(orig_func) else self

    _on = False                 # the grad mode it sets


class enable_grad(_Mode):
    """Enable graph recording inside the block or decorated function."""

    def __new__(cls, orig_func=None):
        self = super().__new__(cls)
        return self(orig_func) if callable(orig_func) else self

    _on = True


class set_grad_enabled(_Mode):
    """Turn graph recording on or off; takes effect at once, and undoes itself on exit."""

    def __init__(self, mode):
        if type(mode) is not bool:
            raise TypeError(f"set_grad_enabled(): argument 'enabled' (position 1) must be bool, "
                            f"not {type(mode).__name__}")
        self._mode = mode
        if _INFERENCE_OPEN[0] and STATE.inference:     # (swap_grad_mode, inlined)
            self._prev = STATE.grad_mode
            STATE.grad_mode = mode
        else:
            self._prev = STATE.grad_enabled
            STATE.grad_enabled = mode

    def __call__(self, fn):
        _Mode.__exit__(self)                  # decorating must not change the mode now
        return super().__call__(fn)

    def _clone(self):
        return set_grad_enabled(self._mode)

    @property
    def prev(self):
        """The grad mode that was on before this object was made."""
        return self._prev

    def __repr__(self):
        return f"{type(self).__module__}.{type(self).__qualname__}(mode={self._mode})"

    def __enter__(self):
        if _INFERENCE_OPEN[0] and STATE.inference:
            STATE.grad_mode = self._mode
        else:
            STATE.grad_enabled = self._mode


class inference_mode(_Mode):
    """Like no_grad, and marks the block as inference (``torch.inference_mode``)."""

    def __new__(cls, mode=True):
        self = super().__new__(cls)
        if callable(mode):
            self._mode = True
            return self(mode)
        return self

    def __init__(self, mode=True):
        if not callable(mode):
            self._mode = bool(mode)

    def _clone(self):
        return inference_mode(self._mode)

    def _enabled(self):
        # inference_mode(False) is normal mode: grad recording on, even inside no_grad
        return not self._mode

    def __enter__(self):
        self._prev = is_grad_enabled()
        self._prev_inference = STATE.inference
        STATE.inference = self._mode
        if self._mode:
            _inference.enter()          # tensors made from now on are inference tensors
        _set_grad_mode(self._enabled())

    def __exit__(self, *exc):
        if self._mode:
            _inference.leave()
        STATE.inference = self._prev_inference
        _set_grad_mode(self._prev)


class _EngineFlags(threading.local):
    multithreading = True


_ENGINE_FLAGS = _EngineFlags()


def is_multithreading_enabled():
    """Whether backward may run on worker threads (ember's backward always runs on the
    calling thread; the flag is kept for PyTorch's API)."""
    return _ENGINE_FLAGS.multithreading


def is_view_replay_enabled():
    """Whether autograd replays view chains on views' bases: never in ember."""
    return False


class set_multithreading_enabled:
    """Turn the backward engine's multithreading flag on or off: at once, undone on exit."""

    def __init__(self, mode):
        if type(mode) is not bool:
            raise TypeError(f"set_multithreading_enabled(): argument 'enabled' (position 1) "
                            f"must be bool, not {type(mode).__name__}")
        self.mode = mode
        self._prev = _ENGINE_FLAGS.multithreading
        _ENGINE_FLAGS.multithreading = mode

    def __enter__(self):
        _ENGINE_FLAGS.multithreading = self.mode

    def __exit__(self, *exc):
        _ENGINE_FLAGS.multithreading = self._prev

    def __call__(self, fn):
        _ENGINE_FLAGS.multithreading = self._prev     # decorating must not change the flag
        return entering_clones(self, fn)

    def clone(self):
        """A fresh context manager for the same mode."""
        return set_multithreading_enabled(self.mode)


class enforce_grad_layout_policy:
    """Whether a leaf's first gradient, when backward may take over the array it computed,
    must first be laid out like the leaf (the default); off, it is taken as it is. Set at
    once (a function call works too), undone on exit; per thread."""

    def __init__(self, enable=True):
        self.prev = STATE.grad_layout
        STATE.grad_layout = enable
        self.mode = enable

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        STATE.grad_layout = self.prev

    def __call__(self, fn):
        STATE.grad_layout = self.prev     # decorating must not change the policy
        return entering_clones(self, fn)

    def clone(self):
        """A fresh context manager for the same policy."""
        return self.__class__(self.mode)
