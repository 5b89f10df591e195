"""``Tensor._backward_hooks``: the dict of gradient hooks ``register_hook`` fills (None before
the first), which code such as opacus and fairscale reads and assigns.

A leaf runs whatever dict is assigned. As in PyTorch, assigning to a non-leaf only changes what
the attribute reads: the hooks its grad_fn already holds keep running, and an assigned dict is
not run."""

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


Tensor._backward_hooks = property(_get_backward_hooks, _set_backward_hooks)
