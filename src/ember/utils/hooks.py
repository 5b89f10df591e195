"""``ember.utils.hooks`` (``torch.utils.hooks``): the handle hook registrations return, the
helper that runs modules' full backward hooks, and the marker for hooks that checkpoints need
not keep."""

import warnings

from ember._hook_handles import RemovableHandle

__all__ = ["BackwardHook", "RemovableHandle", "unserializable_hook",  # noqa: F822
           "warn_if_has_hooks"]


def __getattr__(name):
    if name == "BackwardHook":       # lives with the module call path (imported late: nn)
        from ember.nn.modules._hooks import BackwardHook
        return BackwardHook
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"BackwardHook"})


def unserializable_hook(f):
    """Mark tensor hook ``f`` as one that pickling a tensor may drop without a warning;
    returns ``f``."""
    f.__torch_unserializable__ = True
    return f


def warn_if_has_hooks(tensor):
    """Warn, once per gradient hook on ``tensor`` not marked ``unserializable_hook``, that
    pickling the tensor leaves the hook behind."""
    from ember.autograd.graph import tensor_hooks
    hooks = tensor_hooks(tensor)
    for hook in () if not hooks else list(hooks.values()):
        if not hasattr(hook, "__torch_unserializable__"):
            warnings.warn(f"backward hook {hook!r} on tensor will not be serialized.  If this "
                          f"is expected, you can decorate the function with "
                          f"@ember.utils.hooks.unserializable_hook to suppress this warning",
                          stacklevel=2)
