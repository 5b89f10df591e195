"""A sparse tensor's gradient beyond its values' (see NOTE [Sparse tensors]): a gradient
assigned to ``.grad``, or kept when the leaf's parts changed in place (an optimizer's step, a
``zero_()`` under no_grad) or when ``.grad.zero_()`` emptied it, lives in ``_grad_set`` and
the values' gradient of later backwards is added to it (in place, when ``.grad`` is next
read); and the gradient hooks registered on a sparse tensor, which run on its values with
the gradient as the sparse tensor it stands for."""

import ember
from ember.sparse import _layouts as L

__all__ = ["assign_grad", "keep_grad", "with_set", "emptied", "register_hook",
           "register_post_accumulate_hook", "move_hooks"]


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
    if kept.layout is grad.layout and not kept.requires_grad:
        with ember.no_grad():
            kept.add_(grad)
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
        out = hook(t._gradient_from(values_grad, None))
        return None if out is None else _as_values_grad(t, out)
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
