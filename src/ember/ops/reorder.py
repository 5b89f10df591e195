"""Copying rearrangements: flip, fliplr, flipud, roll, repeat, tile.

PyTorch has no negative strides, so flips and rolls always copy into a fresh contiguous
array; NumPy's flipped views never escape.
"""

from ember._tensor import Tensor
from ember.ops._registry import op, varargs
from ember.ops.shape import distinct_dims, int_tuple, wrap_dim_of_tensor

__all__ = ["flip", "fliplr", "flipud", "repeat", "roll", "tile"]


def _contiguous(a):
    return a if a.flags.c_contiguous else a.copy()


def _dims_sequence(dims):
    """Check that ``dims`` is a sequence of ints: ``torch.flip(x, 0)`` is a TypeError (the
    method ``x.flip(0)`` reaches here as ``(0,)``)."""
    if not isinstance(dims, (tuple, list)):
        raise TypeError(f"flip(): argument 'dims' (position 2) must be tuple of ints, not "
                        f"{type(dims).__name__}")
    for pos, d in enumerate(dims):
        if not hasattr(d, "__index__"):
            raise TypeError(f"flip(): argument 'dims' (position 2) must be tuple of ints, but "
                            f"found element of type {type(d).__name__} at pos {pos}")
    return dims


@op("flip(input, dims)", saves_inputs=False, method_varargs="dims")
def flip(xp, x, dims):
    """A copy with the order of elements reversed along ``dims``."""
    dims = distinct_dims(_dims_sequence(dims), x.ndim)
    if x.ndim == 0 or not dims:
        return x.copy()
    return xp.flip(x, axis=dims).copy()


@flip.derivative
def _(grad, x, dims):
    return grad.flip(dims)


def fliplr(input):
    """A copy with the columns (dim 1) in reverse order."""
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return input.flip(1)


def flipud(input):
    """A copy with the rows (dim 0) in reverse order."""
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return input.flip(0)


Tensor.fliplr = fliplr
Tensor.flipud = flipud


@op("roll(input, shifts, dims=None)", saves_inputs=False)
def roll(xp, x, shifts, dims):
    """A copy with elements shifted circularly along ``dims`` (the flattened tensor if None)."""
    shifts = int_tuple(shifts)
    dims = () if dims is None else int_tuple(dims)
    if not shifts:
        raise RuntimeError("`shifts` required")
    if not dims and len(shifts) == 1:
        return xp.roll(x.reshape(-1), shifts[0]).reshape(x.shape)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims:{len(dims)}")
    axes = tuple(wrap_dim_of_tensor(d, x.ndim) for d in dims)
    return _contiguous(xp.roll(x, shifts, axis=axes))


@roll.derivative
def _(grad, x, shifts, dims):
    return grad.roll(tuple(-s for s in int_tuple(shifts)), dims)


def _repeated_shape(shape, repeats):
    if len(repeats) < len(shape):
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    padded = (1,) * (len(repeats) - len(shape)) + tuple(shape)
    out = [r * s for r, s in zip(repeats, padded)]
    for r in repeats:
        if r < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension "
                               f"{min(min(out), r)}: {out}")
    return padded


@op("_repeat(input, repeats)", method="repeat", method_varargs="repeats", saves_inputs=False,
    grad_fn_name="RepeatBackward0")
def repeat(xp, x, repeats):
    """The tensor tiled ``repeats[i]`` times along each dim i (NumPy's ``tile``)."""
    repeats = int_tuple(repeats)
    _repeated_shape(x.shape, repeats)
    return xp.tile(x, repeats) if repeats else x.copy()


@repeat.derivative
def _(grad, x, repeats):
    repeats = int_tuple(repeats)
    split = []
    for r, s in zip(repeats, _repeated_shape(x.shape, repeats)):
        split += [r, s]
    if not split:
        return grad
    return grad.reshape(split).sum(tuple(range(0, len(split), 2))).reshape(x.shape)


def tile(input, dims):
    """The tensor tiled ``dims[i]`` times along each dim i (missing leading dims count as 1)."""
    dims = int_tuple(dims)
    return input.repeat((1,) * (input.ndim - len(dims)) + dims)


def _tile_method(self, *dims):
    return tile(self, varargs(dims))


_tile_method.__doc__ = tile.__doc__
_tile_method.__name__ = "tile"
Tensor.tile = _tile_method

PUBLIC = {"fliplr": fliplr, "flipud": flipud, "tile": tile}
