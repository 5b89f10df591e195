"""Slices and diagonals: narrow, select, unfold, diagonal (views); diagonal_scatter, diag,
diag_embed, tril, triu (copies)."""

from ember._creation import zeros
from ember._memory_format import contiguous_format, preserved, restrided
from ember._storage_place import slice_along
from ember._tensor import Tensor, _view_tracks
from ember.ops._dims import int_param, invalid_combination, wrap_dim
from ember.ops._promotion import refuse_kernel
from ember.ops._registry import op
from ember.ops._scalars import int_arg
from ember.ops.subscript_views import _slice_backward

__all__ = [
    "diag",
    "diag_embed",
    "diagonal",
    "diagonal_scatter",
    "narrow",
    "select",
    "select_scatter",
    "slice_scatter",
    "tril",
    "triu",
    "unfold",
]


def _index(value, fname="narrow", name="start", position=2):
    """An int from an int or a one-element integer tensor (``narrow(x, 0, tensor(1), 2)``)."""
    return value if type(value) is int else int_arg(value, fname, name, position)


def _check_narrow_args(dim, start, length):
    """PyTorch's errors for arguments neither overload of narrow takes (ints, or a tensor
    ``start``)."""
    ints = [_is_int(v) for v in (dim, start, length)]
    if ints[0] and ints[2] and isinstance(start, Tensor):
        if start.ndim or start.dtype.is_floating_point or start.dtype.is_complex:
            raise RuntimeError("start must be an 0-dim integral Tensor.")
    elif not all(ints):
        raise invalid_combination("narrow", (dim, start, length))


def _is_int(value):
    return not isinstance(value, (bool, Tensor)) and hasattr(type(value), "__index__") \
        or isinstance(value, Tensor) and value.ndim == 0 and not value.dtype.is_floating_point


@op("narrow(input, dim, start, length)", view=True, saves_inputs=False,
    grad_fn_name="SliceBackward0")
def narrow(xp, x, dim, start, length):
    """A view of ``length`` elements of ``dim`` from ``start``."""
    if type(dim) is not int or type(start) is not int or type(length) is not int:
        _check_narrow_args(dim, start, length)
    if x.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    start, length = _index(start), _index(length, name="length", position=3)
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    d = wrap_dim(dim, x.ndim)
    n = x.shape[d]
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], but got "
                         f"{start})")
    start = start + n if start < 0 else start
    if start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    out = x[(slice(None),) * d + (slice(start, start + length),)]
    if out.size:
        return out
    return slice_along(xp, x, d, start, start + length)


@narrow.derivative
def _(grad, x, dim, start, length):
    d = wrap_dim(dim, x.ndim)
    n = x.shape[d]
    start, length = _index(start), _index(length)
    start = start + n if start < 0 else start
    # PyTorch's slice_backward (SliceBackwardBackward0 in a graph)
    return _slice_backward(grad, x.shape, (slice(None),) * d + (slice(start, start + length),))


@op("select(input, dim, index)", view=True, saves_inputs=False)
def select(xp, x, dim, index):
    """A view of position ``index`` of ``dim``, that dim removed."""
    if x.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, x.ndim, ("select", "dim", 1))
    index = _index(index, "select", "index")
    if not -x.shape[d] <= index < x.shape[d]:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(x.shape)} at dimension {d}")
    return x[(slice(None),) * d + (index, Ellipsis)]


@select.derivative
def _(grad, x, dim, index):
    d = wrap_dim(dim, x.ndim)
    # PyTorch's select_backward (SelectBackwardBackward0 in a graph)
    return _slice_backward(grad, x.shape, (slice(None),) * d + (_index(index) % x.shape[d],))


def _windows(shape, dimension, size, step):
    """(wrapped dim, number of windows, size, step) of ``unfold``, checked as PyTorch does."""
    d = wrap_dim(int_arg(dimension, "unfold", "dimension", 1), len(shape))
    size, step = int_arg(size, "unfold", "size", 2), int_arg(step, "unfold", "step", 3)
    n = shape[d] if shape else 1
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    return d, (n - size) // step + 1, size, step


@op("_unfold(input, dimension, size, step)", method="unfold", view=True, saves_inputs=False,
    grad_fn_name="UnfoldBackward0")
def unfold(xp, x, dimension, size, step):
    """A view of all slices of ``size`` elements along ``dimension``, ``step`` apart: that dim
    counts the slices and a new last dim holds each slice."""
    d, windows, size, step = _windows(x.shape, dimension, size, step)
    if x.ndim == 0:
        return restrided(xp, x, (size,), (x.itemsize,))
    shape = x.shape[:d] + (windows,) + x.shape[d + 1:] + (size,)
    strides = x.strides[:d] + (x.strides[d] * step,) + x.strides[d + 1:] + (x.strides[d],)
    return restrided(xp, x, shape, strides)


@unfold.derivative
def _(grad, x, dimension, size, step):
    if x.ndim == 0:
        return grad.sum()
    d, windows, size, step = _windows(x.shape, dimension, size, step)
    return unfold_backward(grad, tuple(x.shape), d, size, step)


@op("_unfold_backward(grad_in, input_sizes, dim, size, step)", method=False,
    saves_inputs=False, grad_fn_name="UnfoldBackwardBackward0")
def unfold_backward(xp, g, input_sizes, dim, size, step):
    """``unfold``'s gradient: the windows of ``grad_in`` (windows along ``dim``, each along a
    last dim) added back into a tensor of ``input_sizes``; overlapping windows add up (an
    overlap-add)."""
    shape = tuple(int(n) for n in input_sizes)
    if not shape:
        return g.sum()
    d = wrap_dim(dim, len(shape))
    out = xp.zeros(shape, dtype=g.dtype)
    flat = xp.moveaxis(out, d, -1)              # (..., n): a view of out
    parts = xp.moveaxis(g, d, -2)               # (..., windows, size)
    windows = parts.shape[-2]
    if size <= windows:                         # each pass writes distinct positions
        for k in range(size):
            flat[..., k:k + step * (windows - 1) + 1:step] += parts[..., k]
    else:
        for w in range(windows):
            flat[..., w * step:w * step + size] += parts[..., w, :]
    return out


@unfold_backward.derivative
def _(grad, g, input_sizes, dim, size, step):
    return grad.unfold(dim, size, step) if grad.ndim else grad.expand(g.shape)


def diagonal_view(xp, x, offset, dim1, dim2):
    """The writable strided view of a diagonal (NumPy's own ``diagonal`` is read-only)."""
    d1, d2 = wrap_dim(dim1, x.ndim), wrap_dim(dim2, x.ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n1, n2 = x.shape[d1], x.shape[d2]
    length = max(min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2), 0)
    index = [slice(None)] * x.ndim
    if length:
        index[d1 if offset < 0 else d2] = slice(abs(offset), None)
    start = x[tuple(index)]
    rest = [i for i in range(x.ndim) if i not in (d1, d2)]
    shape = tuple(x.shape[i] for i in rest) + (length,)
    strides = tuple(x.strides[i] for i in rest) + (x.strides[d1] + x.strides[d2],)
    return restrided(xp, start, shape, strides)


@op("diagonal(input, offset=0, dim1=0, dim2=1)", view=True, saves_inputs=False)
def diagonal(xp, x, offset, dim1, dim2):
    """A view of the diagonal of the ``dim1`` x ``dim2`` matrices (as the last dim)."""
    if type(offset) is not int or type(dim1) is not int or type(dim2) is not int:
        offset = int_param(offset, ("diagonal", "offset", 1))
        dim1 = int_param(dim1, ("diagonal", "dim1", 2))
        dim2 = int_param(dim2, ("diagonal", "dim2", 3))
    return diagonal_view(xp, x, offset, dim1, dim2)


@diagonal.derivative
def _(grad, x, offset, dim1, dim2):
    return diagonal_scatter(zeros(x.shape, dtype=grad.dtype, device=grad.device), grad,
                            offset, dim1, dim2)


@op("diagonal_scatter(input, src, offset=0, dim1=0, dim2=1)", inputs=2, saves_inputs=False)
def diagonal_scatter(xp, x, src, offset, dim1, dim2):
    """A copy of ``input`` with the diagonal (as ``diagonal`` selects it) set to ``src``."""
    if type(offset) is not int or type(dim1) is not int or type(dim2) is not int:
        offset = int_param(offset, ("diagonal_scatter", "offset", 2))
        dim1 = int_param(dim1, ("diagonal_scatter", "dim1", 3))
        dim2 = int_param(dim2, ("diagonal_scatter", "dim2", 4))
    out = preserved(xp, x)          # (a preserve_format copy, as PyTorch's clone)
    view = diagonal_view(xp, out, offset, dim1, dim2)
    if view.shape != src.shape:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(view.shape)}")
    view[...] = src.real if src.dtype.kind == "c" and out.dtype.kind != "c" else src
    return out


@diagonal_scatter.derivative
def _(grad, x, src, offset, dim1, dim2):
    blank = zeros(src.shape, dtype=grad.dtype, device=grad.device)
    return (diagonal_scatter(grad, blank, offset, dim1, dim2),
            grad.diagonal(offset, dim1, dim2))


@op("diag(input, diagonal=0)", out=True, saves_inputs=False)
def diag(xp, x, diagonal):
    """The matrix with ``input`` (1-D) on a diagonal, or a copy of a matrix's diagonal."""
    if x.ndim == 1:
        n = x.shape[0] + abs(diagonal)
        out = xp.zeros((n, n), dtype=x.dtype)
        diagonal_view(xp, out, diagonal, 0, 1)[...] = x
        return out
    if x.ndim != 2:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {x.ndim}D")
    return diagonal_view(xp, x, diagonal, 0, 1).copy()


@diag.named_by
def _(flat, params, out):
    # PyTorch builds a matrix by diag_embed, and copies a matrix's diagonal by diagonal_copy
    return "DiagEmbedBackward0" if flat[0].ndim == 1 else "DiagonalBackward0_copy"


@diag.derivative
def _(grad, x, diagonal):
    if x.ndim == 1:
        return grad.diagonal(diagonal)
    return diagonal_scatter(zeros(x.shape, dtype=grad.dtype, device=grad.device), grad,
                            diagonal)


@op("diag_embed(input, offset=0, dim1=-2, dim2=-1)", saves_inputs=False)
def diag_embed(xp, x, offset, dim1, dim2):
    """Tensors whose ``dim1`` x ``dim2`` matrices have the last dim of ``input`` on a diagonal."""
    if type(offset) is not int or type(dim1) is not int or type(dim2) is not int:
        offset = int_param(offset, ("diag_embed", "offset", 1))
        dim1 = int_param(dim1, ("diag_embed", "dim1", 2))
        dim2 = int_param(dim2, ("diag_embed", "dim2", 3))
    ndim = x.ndim + 1
    d1, d2 = wrap_dim(dim1, ndim), wrap_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = x.shape[-1] + abs(offset)
    batch = iter(x.shape[:-1])
    out = xp.zeros(tuple(n if i in (d1, d2) else next(batch) for i in range(ndim)),
                   dtype=x.dtype)
    diagonal_view(xp, out, offset, d1, d2)[...] = x
    return out


@diag_embed.derivative
def _(grad, x, offset, dim1, dim2):
    return grad.diagonal(offset, dim1, dim2)


def _need_matrix(x, name):
    if x.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")


@op("tril(input, diagonal=0)", inplace=True, out=True, saves_inputs=False)
def tril(xp, x, diagonal):
    """The lower triangle (on and below ``diagonal``) of the last two dims, the rest zeroed."""
    diagonal = int_param(diagonal, ("tril", "diagonal", 1))     # (the parser's check first)
    _need_matrix(x, "tril")
    if x.size:
        refuse_kernel(x, "tril")
    return xp.ascontiguousarray(xp.tril(x, diagonal))       # (row-major, as PyTorch's)


@tril.derivative
def _(grad, x, diagonal):
    return grad.tril(diagonal)


@op("triu(input, diagonal=0)", inplace=True, out=True, saves_inputs=False)
def triu(xp, x, diagonal):
    """The upper triangle (on and above ``diagonal``) of the last two dims, the rest zeroed."""
    diagonal = int_param(diagonal, ("triu", "diagonal", 1))     # (the parser's check first)
    _need_matrix(x, "triu")
    if x.size:
        refuse_kernel(x, "triu")
    return xp.ascontiguousarray(xp.triu(x, diagonal))       # (row-major, as PyTorch's)


@triu.derivative
def _(grad, x, diagonal):
    return grad.triu(diagonal)


# --- scatters into copies, and copies of slices ----------------------------------------------

def _write_into(xp, x, src, view_of):
    """A preserve_format copy of ``x`` (as PyTorch's clone) with ``src`` written where
    ``view_of(copy)`` lies (the real part of a complex ``src`` into a real copy)."""
    out = preserved(xp, x)
    view = view_of(out)
    if view.shape != src.shape:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(view.shape)}")
    view[...] = src.real if src.dtype.kind == "c" and out.dtype.kind != "c" else src
    return out


@op("select_scatter(input, src, dim, index)", inputs=2, saves_inputs=False, out=False)
def select_scatter(xp, x, src, dim, index):
    """A copy of ``input`` whose ``input.select(dim, index)`` is ``src``."""
    if type(dim) is not int or type(index) is not int:
        dim = int_param(dim, ("select_scatter", "dim", 2))
        index = int_param(index, ("select_scatter", "index", 3))
    return _write_into(xp, x, src, lambda a: select.forward(xp, a, dim, index))


@select_scatter.derivative
def _(grad, x, src, dim, index):
    blank = zeros(src.shape, dtype=grad.dtype, device=grad.device)
    return grad.select_scatter(blank, dim, index), grad.select(dim, index)


def _slice_key(shape, dim, start, end, step):
    """The subscript of ``slice_scatter``'s slice, its arguments checked as PyTorch's slice."""
    if not shape:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, len(shape), ("slice_scatter", "dim", 2))
    start, end, step = (None if v is None else int_param(v, ("slice_scatter", name, k))
                        for v, name, k in ((start, "start", 3), (end, "end", 4),
                                           (step, "step", 5)))
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    return (slice(None),) * d + (slice(start, end, step),)


@op("slice_scatter(input, src, dim=0, start=None, end=None, step=1)", inputs=2,
    saves_inputs=False, out=True)
def slice_scatter(xp, x, src, dim, start, end, step):
    """A copy of ``input`` whose slice ``start:end:step`` along ``dim`` is ``src``."""
    key = _slice_key(x.shape, dim, start, end, step)
    return _write_into(xp, x, src, lambda a: a[key])


@slice_scatter.derivative
def _(grad, x, src, dim, start, end, step):
    blank = zeros(src.shape, dtype=grad.dtype, device=grad.device)
    return (grad.slice_scatter(blank, dim, start, end, step),
            grad[_slice_key(tuple(x.shape), dim, start, end, step)])


# PyTorch's derivatives of these are real only, and its kernels make no integral result that
# requires grad (an integer input with a float src that requires grad)
for _scatter in (select_scatter, slice_scatter):
    _scatter.refuse_complex_grad(result_of=0)
    _scatter.refuse_integral_results()
diagonal_scatter.refuse_integral_results()


def narrow_copy(input, dim, start, length):
    """A contiguous copy of ``input.narrow(dim, start, length)``."""
    return input.narrow(dim, start, length).clone(memory_format=contiguous_format)


Tensor.narrow_copy = narrow_copy


def _narrow_copy_function(input, dim, start, length, *, out=None):
    """A contiguous copy of ``input.narrow(dim, start, length)`` (``torch.narrow_copy``)."""
    result = input.narrow_copy(dim, start, length)   # the method: sparse tensors have their own
    return result if out is None else _narrow_copy_into(out, input, result)


def _narrow_copy_into(out, input, result):
    """``result`` written into ``out`` (resized without a warning, as PyTorch's kernel does)."""
    from ember.autograd.grad_mode import STATE, no_grad
    if not isinstance(out, Tensor):
        raise TypeError(f"narrow_copy(): argument 'out' must be Tensor, not "
                        f"{type(out).__name__}")
    if STATE.grad_enabled and any(t._requires_grad or t._grad_fn is not None  # (records)
                                  or _view_tracks(t) for t in (input, out)):
        raise RuntimeError("narrow_copy(): functions with out=... arguments don't support "
                           "automatic differentiation, but one of the arguments requires grad.")
    if out.dtype is not result.dtype:
        raise RuntimeError("Expected self.dtype() == output.dtype() to be true, but got false.  "
                           "(Could this error message be improved?  If so, please report an "
                           "enhancement request to PyTorch.)")
    with no_grad():
        out.resize_(result.shape)
        out.copy_(result)
    return out


_narrow_copy_function.__name__ = "narrow_copy"

PUBLIC = {"narrow_copy": _narrow_copy_function}
