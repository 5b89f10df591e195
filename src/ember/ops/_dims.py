"""Dimension arguments: wrapping negative dims and validating dim lists, as PyTorch does."""

import sys

__all__ = ["wrap_dim", "wrap_dim_of_sized", "reduction_dims"]


def wrap_dim(dim, ndim, arg=None):
    """``dim`` in ``[0, ndim)``; 0-dim tensors accept -1 and 0. ``arg``, ``(op, name,
    position)`` with the position in the method form, lets a TypeError name the argument
    as PyTorch's parser does."""
    if type(dim) is not int:            # PyTorch refuses bool dims (sort(x, True))
        dim = _index(dim, arg)
    size = ndim if ndim > 0 else 1
    if not -size <= dim < size:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-size}, "
                         f"{size - 1}], but got {dim})")
    return dim + size if dim < 0 else dim


def wrap_dim_of_sized(dim, ndim, arg=None):
    """``wrap_dim``, then PyTorch's error naming the wrapped dim when the tensor is 0-dim
    (for ops that need a dim to index into: unbind, unflatten, take_along_dim)."""
    d = wrap_dim(dim, ndim, arg)
    if ndim == 0:
        raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
    return d


def _index(dim, arg):
    if isinstance(dim, bool) or not hasattr(type(dim), "__index__"):
        raise TypeError(f"{_argument(arg)} must be int, not {type(dim).__name__}")
    return dim.__index__()


def _argument(arg):
    """How PyTorch's parser names a dim argument: ``op(): argument 'dim' (position 1)`` in
    the method form, one position further on in the function form (the tensor comes first),
    ``op_()`` in the in-place form."""
    if arg is None:
        return "argument 'dim'"
    op, name, position = arg
    kind = _entry_kind()
    if kind == "inplace":
        op += "_"
    elif kind != "method":
        position += 1
    return f"{op}(): argument '{name}' (position {position})"


def _entry_kind():
    """The kind of public entry point the registry call running now came through (the
    frames are only looked at on this error path)."""
    from ember.ops._entry_points import ENTRY_KINDS
    frame = sys._getframe(2)
    while frame is not None:
        kind = ENTRY_KINDS.get(frame.f_code)
        if kind is not None:
            return kind
        frame = frame.f_back
    return None


def reduction_dims(dim, ndim):
    """The sorted tuple of dims a reduction covers: all of them when ``dim`` is None or ()."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (tuple, list)):
        if len(dim) == 0:
            return tuple(range(ndim))
        dims = [wrap_dim(d, ndim) for d in dim]
        seen = set()
        for d in dims:
            if d in seen:
                raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
            seen.add(d)
        return tuple(sorted(dims)) if ndim else ()
    d = wrap_dim(dim, ndim)
    return (d,) if ndim else ()
