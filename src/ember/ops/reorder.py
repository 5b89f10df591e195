"""Copying rearrangements: flip, fliplr, flipud, roll, repeat, tile, repeat_interleave.

PyTorch has no negative strides, so flips and rolls always copy into fresh memory (a flip
laid out as its input, a roll contiguous); NumPy's flipped views never escape.
"""

import numpy as np

from ember import _dtype as D
from ember._memory_format import contiguous_format, laid_like
from ember._tensor import Tensor
from ember.ops._dims import int_param, int_sequence, wrap_dim
from ember.ops._arg_aliases import MISSING, UNSET
from ember.ops._barebones import WIDE_UNSIGNED_NP, refusal
from ember.ops._promotion import refuse_kernel
from ember.ops._registry import method_varargs, op
from ember.ops.shape import distinct_dims, int_tuple, wrap_dim_of_tensor

__all__ = ["flip", "fliplr", "flipud", "repeat", "repeat_interleave", "roll", "tile"]


def _contiguous(a):
    return a if a.flags.c_contiguous else a.copy()


def _dims_sequence(dims):
    """Check that ``dims`` is a sequence of ints: ``torch.flip(x, 0)`` is a TypeError (the
    method ``x.flip(0)`` reaches here as ``(0,)``)."""
    return int_sequence(dims, _FLIP_DIMS, scalar=False)


_FLIP_DIMS = ("flip", "dims", 1)


@op("flip(input, dims)", saves_inputs=False, method_varargs="dims")
def flip(xp, x, dims):
    """A copy with the order of elements reversed along ``dims``."""
    dims = distinct_dims(_dims_sequence(dims), x.ndim)
    if x.dtype in _FLOAT8_NP and x.size and dims:
        _check_float8_flip(x, dims)
    elif x.dtype in WIDE_UNSIGNED_NP and x.ndim and any(x.shape[d] > 1 for d in dims) \
            and x.size:
        raise refusal("flip_cpu", D.FROM_NUMPY[x.dtype])   # (ops/_barebones.py)
    # PyTorch writes the flip into ``empty_like(input)``: a preserve_format layout of the input
    return laid_like(xp, xp.flip(x, axis=dims) if dims and x.ndim else x, x, copy=True)


_FLOAT8_NP = frozenset(d.np for d in D.FLOAT8)


def _check_float8_flip(x, dims):
    # PyTorch copies whole rows for a flip that leaves the innermost dim (the smallest
    # nonzero stride of size > 1) alone; its element kernel has no float8 version
    sized = [d for d in range(x.ndim) if x.shape[d] > 1]
    if not any(d in dims for d in sized):
        return
    strides = [abs(x.strides[d]) for d in sized]
    moving = [s for s in strides if s] or [0]
    inner = sized[strides.index(min(moving))]
    if inner in dims:
        refuse_kernel(x, "flip_cpu")


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
    shifts = int_sequence(shifts, ("roll", "shifts", 1))
    dims = () if dims is None else int_sequence(dims, ("roll", "dims", 2))
    if not shifts:
        raise RuntimeError("`shifts` required")
    if (dims or len(shifts) != 1) and len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims:{len(dims)}")
    if not x.size:                      # PyTorch's is a clone (strides kept; dims unchecked)
        return laid_like(xp, x, x, copy=True)
    if not dims:
        return xp.roll(x.reshape(-1), shifts[0]).reshape(x.shape)
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
    repeats = int_sequence(repeats, ("repeat", "repeats", 1))
    _repeated_shape(x.shape, repeats)
    if not repeats:
        return x.copy()
    out = xp.tile(x, repeats)           # (of an empty input: a view of it)
    return xp.ascontiguousarray(out) if out.size else xp.empty(out.shape, out.dtype)


@repeat.derivative
def _(grad, x, repeats):
    # as PyTorch's graph: the new leading dims summed away one at a time, then a view that
    # splits each dim into (repeat, size), summed over the repeats (nothing when every
    # repeat is 1)
    repeats = int_tuple(repeats)
    if 0 in repeats:
        return grad.new_zeros(x.shape)
    lead = len(repeats) - x.ndim
    for _ in range(lead):
        grad = grad.sum(0)
    if all(r == 1 for r in repeats[lead:]):
        return grad
    split = []
    for r, s in zip(repeats[lead:], x.shape):
        split += [r, s]
    return grad.reshape(split).sum(tuple(range(0, len(split), 2)))


def tile(input, dims):
    """The tensor tiled ``dims[i]`` times along each dim i (missing leading dims count as 1)."""
    dims = int_sequence(dims, ("tile", "dims", 1, "function"))
    return input.repeat((1,) * (input.ndim - len(dims)) + dims)


def _tile_method(self, *_args, dims=UNSET):
    dims = method_varargs(_args, dims, MISSING, "tile", "dims")
    return tile(self, int_sequence(dims, ("tile", "dims", 1, "method")))


_tile_method.__doc__ = tile.__doc__
_tile_method.__name__ = "tile"
Tensor.tile = _tile_method


# --- repeat_interleave: NumPy's repeat ----------------------------------------------------------

_COUNT_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


def _check_counts_dtype(repeats):
    if repeats.dtype not in _COUNT_DTYPES:
        raise NotImplementedError(f"\"repeat_interleave_cpu\" not implemented for "
                                  f"'{D.FROM_NUMPY[repeats.dtype]._torch_name}'")


def _positions(xp, counts, output_size):
    """Each index ``i`` of the 1-D ``counts`` repeated ``counts[i]`` times."""
    if counts.size == 0:                # PyTorch ignores output_size here
        return xp.zeros(0, dtype=counts.dtype)
    ends = xp.cumsum(counts)
    total = int(ends[-1])
    if output_size is not None:
        if output_size < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {output_size}: "
                               f"[{output_size}]")
        if output_size != total:
            raise RuntimeError("allocated size does not match required size")
    if bool(counts.min() < 0):
        raise RuntimeError("repeats can not be negative")
    return xp.searchsorted(ends, xp.arange(total), side="right").astype(counts.dtype)


def _repeat_int(xp, x, repeats, dim, output_size):
    if dim is None:
        x, d = x.reshape(-1), 0
    else:
        d = wrap_dim(dim, x.ndim)
    if repeats < 0:
        raise RuntimeError("Repeats must be non-negative")
    if dim is not None and x.ndim == 0:     # PyTorch inserts the copies' dim after ``dim``
        wrap_dim(d + 1, 0)
    total = x.shape[d] * repeats
    if output_size is not None and output_size != total:
        raise RuntimeError(f"repeat_interleave: Invalid output_size, expected {total} but got "
                           f"{output_size}")
    return xp.repeat(x, repeats, axis=d)


def _not_tensor(name, pos, value, allowed="Tensor"):
    return TypeError(f"repeat_interleave(): argument '{name}' (position {pos}) must be "
                     f"{allowed}, not {type(value).__name__}")


@op("repeat_interleave(input, repeats=None, dim=None, *, output_size=None)", inputs=2,
    scalars=True, method=False)
def repeat_interleave(xp, x, repeats, dim, output_size):
    """Each element (or each slice along ``dim``) repeated ``repeats`` times in a row (NumPy's
    ``repeat``); with the flattened input when ``dim`` is None. With one tensor argument, its
    indices ``i`` each repeated ``repeats[i]`` times."""
    if not hasattr(x, "ndim"):
        raise _not_tensor("repeats" if repeats is None else "input", 1, x)
    if repeats is None:                 # repeat_interleave(repeats)
        if dim is not None:
            raise TypeError("repeat_interleave(): the one-argument form repeat_interleave("
                            "repeats) takes no 'dim'")
        _check_counts_dtype(x)
        if x.ndim != 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        return _positions(xp, x, output_size)
    if type(repeats) is int:
        return _repeat_int(xp, x, repeats, dim, output_size)
    if not hasattr(repeats, "ndim"):
        raise _not_tensor("repeats", 2, repeats, "Tensor or int")
    if dim is not None and type(dim) is not int:   # (the parser's check comes first)
        dim = int_param(dim, None, strict=True)
    if repeats.ndim > 1:
        raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
    if dim is None:
        x, d = x.reshape(-1), 0
    elif x.ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    else:
        d = wrap_dim(dim, x.ndim)
    n = x.shape[d]
    if repeats.size not in (1, n):
        raise RuntimeError(f"repeats must have the same size as input along dim, but got "
                           f"repeats.size(0) = {repeats.size} and input.size("
                           f"{0 if dim is None else dim}) = {n}")
    _check_counts_dtype(repeats)
    counts = xp.broadcast_to(repeats.reshape(-1), (n,))
    return xp.take(x, _positions(xp, counts, output_size), axis=d)


repeat_interleave.nondifferentiable("repeats")
repeat_interleave.reads_inputs((), (0,))    # the input's size, not its values


@repeat_interleave.derivative
def _(grad, x, repeats, dim, output_size):
    from ember.ops.index_dim import index_add
    from ember.ops.scatter import zeros_for
    flat = dim is None
    d = 0 if flat else wrap_dim(dim, x.ndim)
    n = x.numel() if flat else x.shape[d]
    if isinstance(repeats, int):        # copies side by side: sum each run of ``repeats``
        if flat:
            return grad.reshape(n, repeats).sum(1).reshape(x.shape), None
        return grad.unflatten(d, (n, repeats)).sum(d + 1), None
    rows = repeat_interleave(repeats.reshape(-1).expand(n))
    if flat:
        return index_add(zeros_for((n,), grad), 0, rows, grad).reshape(x.shape), None
    return index_add(zeros_for(x.shape, grad), d, rows, grad), None


@repeat_interleave.composed_when_recording
def _(inputs, params):
    """PyTorch's graph, which has no node of its own: copies side by side (unsqueeze, expand,
    clone, view) for a number of repeats, an index_select of the repeated positions for a
    tensor of them. Calls the op would refuse are left to it."""
    x, repeats = inputs
    dim, output_size = params
    if not isinstance(x, Tensor) or (dim is not None and x.ndim == 0):
        return NotImplemented
    src, d = (x.flatten(), 0) if dim is None else (x, wrap_dim(dim, x.ndim))
    n = src.shape[d]
    if type(repeats) is int:
        total = n * repeats
        if repeats < 0 or output_size is not None and output_size != total:
            return NotImplemented
        shape = list(src.shape)
        copies = src.unsqueeze(d + 1).expand(*shape[:d + 1], repeats, *shape[d + 1:])
        copies = copies.clone(memory_format=contiguous_format)      # (a transposed input's
        return copies.view(*shape[:d], total, *shape[d + 1:])       # copy would not view)
    if not isinstance(repeats, Tensor) or repeats.ndim > 1 or repeats.numel() not in (1, n) \
            or repeats.dtype not in (D.int64, D.int32):
        return NotImplemented
    rows = repeat_interleave(repeats.reshape(-1).expand(n), output_size=output_size)
    return src.index_select(d, rows)


def _repeat_interleave_method(self, repeats, dim=None, *, output_size=None):
    return repeat_interleave(self, repeats, dim, output_size=output_size)


_repeat_interleave_method.__doc__ = repeat_interleave.__doc__
_repeat_interleave_method.__name__ = "repeat_interleave"
_repeat_interleave_method.__qualname__ = "Tensor.repeat_interleave"
Tensor.repeat_interleave = _repeat_interleave_method

PUBLIC = {"fliplr": fliplr, "flipud": flipud, "tile": tile}
