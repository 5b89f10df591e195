"""The handle every hook registration returns (``torch.utils.hooks.RemovableHandle``): the
hooks of modules, tensors, autograd nodes and optimizers live in dicts keyed by its id."""

import weakref
from collections import OrderedDict

__all__ = ["RemovableHandle"]


class RemovableHandle:
    """Returned by hook registrations; ``remove()`` (or leaving a ``with`` block) unregisters."""

    next_id = 0                         # the id the next handle gets (shared by all hooks)

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        extra = () if extra_dict is None else (
            extra_dict if isinstance(extra_dict, (list, tuple)) else (extra_dict,))
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extra)

    def remove(self):
        """Unregister the hook (from every table it was added to)."""
        for ref in (self.hooks_dict_ref, *self.extra_dict_ref):
            table = ref()
            if table is not None:
                table.pop(self.id, None)

    def __getstate__(self):              # copies follow the copied tables (deepcopy, pickle)
        return (self.hooks_dict_ref(), self.id, tuple(r() for r in self.extra_dict_ref))

    def __setstate__(self, state):
        table, self.id, extra = state
        self.hooks_dict_ref = weakref.ref(OrderedDict() if table is None else table)
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extra if d is not None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
