"""``Tensor._backward_hooks``: the dict of gradient hooks ``register_hook`` fills (None before
the first), which code such as opacus and fairscale reads and assigns.

A leaf runs whatever dict is assigned. As in PyTorch, assigning to a non-leaf only changes what
the attribute reads: the hooks its grad_fn already holds keep running, and an assigned dict is
not run, nor are the hooks ``register_hook`` then adds to it; after None is assigned,
``register_hook`` starts a new dict, which the grad_fn runs after the earlier ones. A tensor
rebuilt by pickle or ``copy.copy`` holds an empty dict (PyTorch's rebuild sets one)."""

from ember._tensor import Tensor
from ember.autograd.graph import tensor_hooks


def _get_backward_hooks(t):
    """The hooks dict of ``t`` (handle id -> fn), or None."""
    meta = t._meta
    if t._grad_fn is not None and meta is not None and "hooks" in meta:
        return meta["hooks"]        # what was assigned to this non-leaf
    return tensor_hooks(t)


def _set_backward_hooks(t, hooks):
    """Make ``hooks`` (a dict of id -> fn, or None) what ``t._backward_hooks`` holds."""
    if t._meta is None:
        if hooks is None and t._grad_fn is None:
            return
        t._meta = {}
    if hooks is None and t._grad_fn is None:
        t._meta.pop("hooks", None)
    else:
        t._meta["hooks"] = hooks


def bind_hooks(fn, nr, hooks):
    """Make node ``fn`` run the dict ``hooks`` on its output ``nr``, after those it runs."""
    if fn._tensor_pre_hooks is None:
        fn._tensor_pre_hooks = {}
    bound = fn._tensor_pre_hooks.get(nr)
    fn._tensor_pre_hooks[nr] = hooks if bound is None else _HookDicts(bound, hooks)


class _HookDicts:
    """Several hook dicts that one node output runs, in order (what the engine reads)."""

    __slots__ = ("dicts",)

    def __init__(self, first, then):
        self.dicts = (first.dicts if type(first) is _HookDicts else (first,)) + (then,)

    def __bool__(self):
        return any(self.dicts)

    def values(self):
        """Every hook, dict by dict."""
        return [fn for d in self.dicts for fn in d.values()]

    def get(self, key, default=None):
        """The hook of handle id ``key``."""
        return next((d[key] for d in self.dicts if key in d), default)


Tensor._backward_hooks = property(_get_backward_hooks, _set_backward_hooks)
