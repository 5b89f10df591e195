"""Dimension arguments: wrapping negative dims and validating dim lists, as PyTorch does."""

__all__ = ["wrap_dim", "wrap_dim_of_sized", "reduction_dims"]


def wrap_dim(dim, ndim):
    """``dim`` in ``[0, ndim)``; 0-dim tensors accept -1 and 0."""
    if type(dim) is not int:            # PyTorch refuses bool dims (sort(x, True))
        dim = _index(dim)
    size = ndim if ndim > 0 else 1
    if not -size <= dim < size:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-size}, "
                         f"{size - 1}], but got {dim})")
    return dim + size if dim < 0 else dim


def wrap_dim_of_sized(dim, ndim):
    """``wrap_dim``, then PyTorch's error naming the wrapped dim when the tensor is 0-dim
    (for ops that need a dim to index into: unbind, unflatten, take_along_dim)."""
    d = wrap_dim(dim, ndim)
    if ndim == 0:
        raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
    return d


def _index(dim):
    if isinstance(dim, bool):
        raise TypeError("argument 'dim' must be int, not bool")
    try:
        return dim.__index__()
    except AttributeError:
        raise TypeError(f"argument 'dim' must be int, not {type(dim).__name__}") from None


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
