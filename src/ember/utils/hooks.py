"""``ember.utils.hooks`` (``torch.utils.hooks``): the handle hook registrations return, and the
marker for hooks that checkpoints need not keep."""

from ember._hook_handles import RemovableHandle

__all__ = ["RemovableHandle", "unserializable_hook"]


def unserializable_hook(f):
    """Mark tensor hook ``f`` as one that pickling a tensor may drop without a warning;
    returns ``f``."""
    f.__torch_unserializable__ = True
    return f
