"""PyTorch's gradient layout contract: the strides a leaf's accumulated ``.grad`` gets."""


def layout_copy(g, v):
    """A copy of the gradient array ``g`` laid out as PyTorch's gradient layout contract asks:
    with the strides of the leaf's array ``v`` when ``v`` is dense (a channels-last or
    transposed leaf gets a gradient like it, to the strides of its size-1 dims), else
    row-major. A gradient of another shape (the leaf was reshaped under no_grad) is
    broadcast to the leaf's, or refused as PyTorch's copy refuses it."""
    if g.strides == v.strides and g.flags.c_contiguous and g.shape == v.shape \
            or not dense_leaf(v):
        return g.copy()
    if g.shape != v.shape:
        _check_copy(g.shape, v.shape)
    from ember.backend import xp_of
    xp = xp_of(g)
    laid = xp.empty_like(v, dtype=g.dtype, order="K")
    strides = tuple(s // v.itemsize * laid.itemsize for s in v.strides)
    if laid.strides != strides:         # (order "K" moves size-1 dims' strides)
        laid = xp.lib.stride_tricks.as_strided(laid, strides=strides)
    laid[...] = g
    return laid


def _check_copy(src, dst):
    """PyTorch's error for copying a gradient of shape ``src`` into a leaf of shape ``dst``
    (``copy_``'s: the shapes do not broadcast, or only to a larger one)."""
    import numpy as np
    try:
        joint = np.broadcast_shapes(dst, src)
    except ValueError:
        from ember.ops._op_errors import broadcast_message
        raise RuntimeError(broadcast_message([dst, src])) from None
    if joint != tuple(dst):
        raise RuntimeError(f"output with shape {list(dst)} doesn't match the broadcast shape "
                           f"{list(joint)}")


def owned_in_layout(g, v, enforce=True, owned=True):
    """Whether the gradient array ``g`` owns its memory (unless not ``owned``: a conjugate
    view's), may be written, and already has the layout layout_copy would give it (or, not
    ``enforce``-d, any layout)."""
    flags = g.flags                     # (CuPy's lack some: a missing one is read safely)
    if not (not owned or g.base is None and getattr(flags, "owndata", False)) \
            or not getattr(flags, "writeable", True):
        return False
    return not enforce or _obeys_layout(g, v)


def _obeys_layout(g, v):
    """PyTorch's gradient layout contract: a dense leaf's strides (at its size-1 dims, any
    but 0), else row-major."""
    if g.strides == v.strides and g.flags.c_contiguous:
        return True                     # (the common case, without dense_leaf's import)
    if not dense_leaf(v):
        return g.flags.c_contiguous
    return all(gs // g.itemsize == vs // v.itemsize if n != 1 else gs != 0
               for n, gs, vs in zip(g.shape, g.strides, v.strides))


def dense_leaf(array):
    from ember._memory_format import dense
    return dense(array)


def empty_grad_like(t, dtype):
    from ember._creation import empty_like
    return empty_like(t, dtype=dtype)
