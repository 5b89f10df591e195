"""Gradient hooks registered through tensors (``Tensor.register_hook``, ``retain_grad``,
``register_post_accumulate_grad_hook``) and where they are stored (re-exported by graph)."""

import weakref
from collections import OrderedDict

from ember.autograd.graph import _HookDict, _add_hook, history


def register_tensor_hook(t, hook):
    """Store a gradient hook for ``t``: on its grad_fn output, or on the leaf itself. As in
    PyTorch, a non-leaf adds it to the dict its ``_backward_hooks`` holds; when that is None
    the hook goes into a new dict, which its grad_fn runs (besides any earlier one), and a
    dict assigned to the attribute is not run."""
    fn, nr = history(t)
    if t._grad_fn is None:
        return _add_hook(_leaf_hooks(t), hook)
    meta = t._meta
    if meta is not None and "hooks" in meta:    # assigned (see _backward_hooks_attr.py)
        hooks = meta["hooks"]
        if hooks is None:
            from ember.autograd._backward_hooks_attr import bind_hooks
            hooks = meta["hooks"] = OrderedDict()
            bind_hooks(fn, nr, hooks)
        return _add_hook(hooks, hook)
    if fn._tensor_pre_hooks is None:
        fn._tensor_pre_hooks = {}
    hooks = fn._tensor_pre_hooks.setdefault(nr, OrderedDict())
    return _add_hook(hooks, hook)


def tensor_hooks(t):
    """The gradient hooks registered on ``t`` (a dict by handle id), or None."""
    if t._grad_fn is None:
        return None if t._meta is None else t._meta.get("hooks")
    fn, nr = history(t)
    return None if fn._tensor_pre_hooks is None else fn._tensor_pre_hooks.get(nr)


def _leaf_hooks(t):
    if t._meta is None:
        t._meta = {}
    hooks = t._meta.get("hooks")
    if hooks is None:
        hooks = t._meta["hooks"] = OrderedDict()   # (PyTorch's _backward_hooks)
    return hooks


def register_post_accumulate_hook(t, hook):
    """Store a hook run with the tensor after its ``.grad`` was accumulated."""
    if t._meta is None:
        t._meta = {}
    hooks = t._meta.get("post_acc_hooks")
    if hooks is None:
        hooks = t._meta["post_acc_hooks"] = _HookDict()
    return _add_hook(hooks, hook)


def add_retain_grad_hook(t):
    """Make backward populate ``t.grad`` for a non-leaf tensor."""
    fn, nr = history(t)
    if fn._retains is None:
        fn._retains = {}
    fn._retains[nr] = weakref.ref(t)
    if t._meta is None:
        t._meta = {}
    t._meta["retains_grad"] = True


def move_retained_grad(t, old_fn, old_nr):
    """After an in-place op gave ``t`` a new grad_fn, make ``t.grad`` its gradient as of now
    (PyTorch moves the retain_grad hook to the new node; other hooks stay with the old)."""
    meta = t._meta
    if not meta or not meta.get("retains_grad") or old_fn is None:
        return
    retains = old_fn._retains
    if retains is not None and old_nr in retains and retains[old_nr]() is t:
        del retains[old_nr]
    add_retain_grad_hook(t)


def leaf_hooks(t):
    """Hooks registered on a leaf tensor (run before accumulation), or None."""
    meta = t._meta
    return None if meta is None else meta.get("hooks")


def post_accumulate_hooks(t):
    """Post-accumulate hooks of a leaf, or None."""
    meta = t._meta
    return None if meta is None else meta.get("post_acc_hooks")
