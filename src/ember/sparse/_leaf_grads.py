"""A sparse tensor's gradient beyond its values' (see NOTE [Sparse tensors]): a gradient
assigned to ``.grad``, or kept when the leaf's parts changed in place (an optimizer's step, a
``zero_()`` under no_grad) or when ``.grad.zero_()`` emptied it, lives in ``_grad_set`` and
the values' gradient of later backwards is added to it (in place, when ``.grad`` is next
read); and the gradient hooks registered on a sparse tensor, which run on its values with
the gradient as the sparse tensor it stands for."""

import weakref

import ember
from ember.sparse import _layouts as L

__all__ = ["assign_grad", "keep_grad", "with_set", "emptied", "register_hook",
           "register_post_accumulate_hook", "move_hooks", "anchor_hooks", "stored"]


def assign_grad(t, value):
    """``t.grad = value`` with PyTorch's checks (a sparse leaf takes a sparse gradient of its
    size, dtype and device type, whatever its layout, as PyTorch's)."""
    from ember._tensor_grad import _set_grad
    if isinstance(value, ember.Tensor) and value.layout is L.strided:
        raise RuntimeError("attempting to assign a gradient to a tensor that has data of a "
                           "different type")
    saved = t._grad
    _set_grad(t, value)                 # (the checks of a dense tensor's setter)
    t._grad = saved
    if value.device.type != t.device.type:
        raise RuntimeError(f"attempting to assign a gradient with device type "
                           f"'{value.device.type}' to a tensor with device type "
                           f"'{t.device.type}'. Please ensure that the gradient and the "
                           f"tensor are on the same device")
    clear_backward_grads(t)
    t._grad_set = value


def clear_backward_grads(t):
    """Drop the gradients backward left on leaf ``t``'s values and its dense anchor."""
    if t._leaf:
        t._v.grad = None
    t._grad_via_values = False
    if t._anchor is not None:
        t._anchor.grad = None


def keep_grad(t):
    """Before a leaf ``t`` takes new parts in place: its gradient as of now kept aside (it
    was its old values')."""
    if t._leaf and (t._v.grad is not None or t._anchor is not None
                    and t._anchor.grad is not None):
        grad = t.grad
        clear_backward_grads(t)
        t._grad_set = grad


def with_set(t, grad):
    """The leaf's ``.grad``: ``grad`` (from the last backwards) added to the kept one."""
    kept = t._grad_set
    if kept is None:
        if grad is not None and type(grad) is type(t):
            grad.__dict__["_grad_of"] = t       # (so that grad.zero_() empties t's)
        return grad
    if grad is None:
        return kept
    # the gradient of later backwards goes into the kept one, in place (as PyTorch's
    # accumulation into a sparse .grad; out of place where it cannot)
    if not kept.requires_grad and (kept.layout is grad.layout or kept.layout is L.strided):
        with ember.no_grad():
            kept.add_(grad)
    elif grad.layout is L.strided:      # (sparse + dense refuses; PyTorch adds it this way)
        kept = grad + kept
    else:
        kept = kept + grad
    clear_backward_grads(t)
    t._grad_set = kept
    return kept


def emptied(grad):
    """After ``grad.zero_()``: when ``grad`` was a leaf's ``.grad``, the leaf keeps it."""
    owner = grad.__dict__.pop("_grad_of", None)
    if owner is not None:
        clear_backward_grads(owner)
        owner._grad_set = grad


def _as_values_grad(t, grad):
    """``grad`` (what a hook returned for sparse ``t``) as the gradient of ``t``'s values."""
    if not isinstance(grad, ember.Tensor):
        return grad
    if grad.layout is not L.strided and grad._v.shape == t._v.shape and (
            t._layout is not L.sparse_coo or t._coalesced and ember.equal(grad._i, t._i)):
        return grad._v
    if t._layout is L.sparse_coo:       # the new gradient at the stored elements
        dense = grad.to_dense() if grad.layout is not L.strided else grad
        return dense[tuple(t._i)]
    raise RuntimeError("ember: a hook on a compressed sparse tensor must return a gradient "
                       "with its indices")


def register_hook(t, hook):
    """``t.register_hook(hook)``: run on its values' gradient, as the sparse gradient."""
    if not t.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")

    def on_values(values_grad):
        grad = t._gradient_from(values_grad, None)
        out = hook(grad)
        if out is None:
            return None
        if out is not grad and t._layout is L.sparse_coo:
            t._grad_via_values = False      # (PyTorch stores a new one uncoalesced)
        return _as_values_grad(t, out)
    on_values.sparse_hook = hook        # (run on the dense stand-in too: see anchor_hooks)
    return t._v.register_hook(on_values)


def register_post_accumulate_hook(t, hook):
    """``t.register_post_accumulate_grad_hook(hook)``: run with ``t`` after its values'
    gradient was accumulated."""
    if not t.is_leaf:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf "
                           "tensors")
    if not t.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    return t._v.register_post_accumulate_grad_hook(lambda _values: hook(t))


def move_hooks(old, new):
    """A leaf's hooks go with it when it takes new values in place."""
    meta = old._meta
    if not meta:
        return
    for key in ("hooks", "post_acc_hooks"):
        if meta.get(key) is not None:
            if new._meta is None:
                new._meta = {}
            new._meta[key] = meta[key]


class _AnchorHooks:
    """The hooks of a sparse leaf as its dense stand-in (``_dense_grad_anchor``) runs them:
    a live view of those registered on the leaf's values (so a handle's ``remove()`` and
    ``move_hooks`` hold for both), each called with the dense gradient PyTorch's products
    give the leaf; a sparse result is made dense."""

    __slots__ = ("_leaf", "_key")

    def __init__(self, leaf, key):
        self._leaf, self._key = weakref.ref(leaf), key

    def _hooks(self):
        leaf = self._leaf()
        meta = None if leaf is None else leaf._v._meta
        return None if not meta else meta.get(self._key)

    def __len__(self):
        hooks = self._hooks()
        return 0 if not hooks else len(hooks)

    def values(self):
        hooks = self._hooks()
        if not hooks:
            return []
        if self._key == "post_acc_hooks":
            return list(hooks.values())     # (they call the user's hook with the leaf)
        return [_dense_hook(fn) for fn in hooks.values()]


def _dense_hook(fn):
    hook = getattr(fn, "sparse_hook", fn)

    def on_dense(grad):
        out = hook(grad)
        if isinstance(out, ember.Tensor) and out.layout is not L.strided:
            out = out.to_dense()
        return out
    return on_dense


def anchor_hooks(t, anchor):
    """Give sparse leaf ``t``'s dense stand-in ``anchor`` the leaf's hooks (live views)."""
    if anchor._meta is None:
        anchor._meta = {}
    anchor._meta["hooks"] = _AnchorHooks(t, "hooks")
    anchor._meta["post_acc_hooks"] = _AnchorHooks(t, "post_acc_hooks")


def stored(t, values_grad, dense_grad):
    """``t.grad`` as last read when neither ``values_grad`` nor ``dense_grad`` (the
    gradients of its values and dense stand-in) changed since (or only through it), so that
    ``t.grad is t.grad``, as PyTorch's stored gradient; else None."""
    seen = t._grad_seen
    if seen is None or t._grad_set is not None:
        return None
    vg, v_version, dg, d_version, grad = seen
    if vg is not values_grad or dg is not dense_grad:
        return None
    if dg is not None and dg._version != d_version:
        return None
    if vg is not None and vg._version != v_version:
        if getattr(grad, "_v", None) is not vg:
            return None
        # backward added to the values' gradient in place (the user's .grad shares it)
        if grad.layout is L.sparse_coo:
            grad._coalesced = t._grad_via_values or grad._v.shape[0] <= 1
        t._grad_seen = (vg, vg._version, dg, d_version, grad)
    return grad


def remember(t, values_grad, dense_grad, grad):
    """Note ``grad`` as ``t.grad`` made from these gradients (see ``stored``)."""
    if grad is None or values_grad is None and dense_grad is None:
        t._grad_seen = None
        return
    t._grad_seen = (values_grad, None if values_grad is None else values_grad._version,
                    dense_grad, None if dense_grad is None else dense_grad._version, grad)
