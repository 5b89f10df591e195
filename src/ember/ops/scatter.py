"""Gather and scatter along one dim: gather, scatter, scatter_add, scatter_reduce and
take_along_dim. The ops that work on whole slices (index_select, index_add, ...) and on flat
positions (take, put) live in index_dim.py; mask ops (masked_select, nonzero) in indexing.py.

As in PyTorch (not NumPy): the index has the input's number of dims and is no larger than
it apart from ``dim`` (no broadcasting; a 0-dim tensor counts as one element of one dim),
and negative indices are out of bounds. Kernels: ops/_along.py.
"""


import numpy as np

from ember import _dtype as D
from ember._memory_format import preserved
from ember._tensor import Tensor
from ember._warn import warn_once
from ember.ops._along import (at_least_1d, check_bounds, check_index_dtype, check_range, region,
                              scatter_into, take_along, wide)
from ember.ops._dims import argument_name, int_param, type_name, wrap_dim, wrap_dim_of_sized
from ember.ops._overlap import check_internal_overlap
from ember.ops._promotion import refuse_kernel
from ember.ops._registry import _is_tensor, broadcast_message, op
from ember.ops._scalars import checked_scalar

__all__ = ["gather", "scatter", "scatter_add", "take_along_dim", "in_place", "out_of_place",
           "pad_to", "check_same_dtype", "check_scatter_args", "check_scatter_kernel",
           "zeros_for",
           "require_tensors"]


def in_place(write):
    """The in-place forward of an op from ``write(xp, target, *args, late=None)``, which
    validates its arguments and writes into ``target``, a C-contiguous array, in place. As
    PyTorch's kernels, it refuses an expanded ``dst`` among the arguments' checks: ``write``
    calls ``late()`` where PyTorch checks (see ``Op.checks_internal_overlap``)."""
    def forward(xp, dst, x, *args):
        if dst.flags.c_contiguous:
            write(xp, dst, *args)
        else:
            out = dst.copy()
            write(xp, out, *args, late=lambda: check_internal_overlap(dst))
            check_internal_overlap(dst)     # (a write that never calls ``late``)
            xp.copyto(dst, out)
    forward.checks_internal_overlap = True      # (the dispatcher leaves the check to it)
    return forward


def out_of_place(write, keep_layout=False):
    """The forward of an op that ``write`` (see ``in_place``) applies to a copy of its input;
    ``keep_layout``: the copy has the input's strides, as PyTorch's ``clone`` gives."""
    def forward(xp, x, *args):
        out = preserved(xp, x) if keep_layout else x.copy()
        write(xp, out, *args)
        return out
    return forward


def require_tensors(name, **arrays):
    """For ops that take numbers for some inputs: the others must still be tensors."""
    for arg, a in arrays.items():
        if not hasattr(a, "shape"):
            raise TypeError(f"{name}(): argument '{arg}' must be Tensor, not "
                            f"{type(a).__name__}")


def zeros_for(shape, like):
    """Zeros of ``shape`` with ``like``'s dtype and device (a gradient's starting point)."""
    from ember._creation import zeros
    return zeros(shape, dtype=like.dtype, device=like.device)


def pad_to(g, shape):
    """``g`` in the leading corner of zeros of ``shape`` (the gradient of src's unread part)."""
    if tuple(g.shape) == tuple(shape) or g.ndim != len(shape):
        return g                 # a 0-dim src gets its (1,)-shaped gradient summed back
    from ember.ops.indexing import _slice_backward
    return _slice_backward(g, tuple(shape), tuple(slice(0, s) for s in g.shape))


# --- checks -----------------------------------------------------------------------------------

def check_same_dtype(x, src):
    if src.dtype != x.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")


def check_scatter_args(x, index, src, dim):
    """PyTorch's checks of a scatter's dtypes, then (for a non-empty index) shapes, in its
    order: an index of another dtype passes when empty; ``index`` is at least 1-D here, ``x``
    and ``src`` (None for a number) as given."""
    given, x = x, at_least_1d(x)
    if index.size:
        check_index_dtype(index, "scatter")
    if src is not None:
        check_same_dtype(x, src)
    if index.size == 0:
        return
    if src is not None and src.ndim == 0 and index.ndim > 1:   # (before anything else)
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    if index.ndim != x.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    shape = index.shape     # (the equal shapes of the common call need no loop)
    wrong = shape != x.shape and any(d != dim and n > x.shape[d] for d, n in enumerate(shape))
    if wrong and src is not None and src.ndim != index.ndim:   # (PyTorch's order)
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    if not wrong and src is not None and src.shape != shape:
        # src's size at each of index's dims (a 0-d src's: 1)
        wrong = any(n > m for n, m in zip(shape, src.shape)) if src.ndim == index.ndim else \
            any(n > (src.shape[wrap_dim(d, src.ndim)] if src.ndim else 1)
                for d, n in enumerate(shape))
    if wrong:
        extra = "" if src is None else f" and to be no larger size than src {list(src.shape)}"
        raise RuntimeError(f"Expected index {list(shape)} to be no larger than self "
                           f"{list(given.shape)} apart from dimension {dim}{extra}")


def check_scatter_kernel(x, index, src, dim):
    """The checks of PyTorch's scatter kernel, after the op's own: src's number of dims,
    then the index's bounds (``x``, ``index`` and ``src`` at least 1-D)."""
    if src is not None and src.ndim != index.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    check_bounds(index, x.shape[dim], dim)


# --- gather -----------------------------------------------------------------------------------

@op("gather(input, dim, index, *, sparse_grad=False)", inputs=("input", "index"), out=True)
def gather(xp, x, index, dim, sparse_grad):
    """The elements of ``input`` at ``index`` along ``dim``: ``out[i][j] = input[index[i][j]][j]``
    for dim 0 (``sparse_grad`` is accepted; the gradient is dense)."""
    dim = wrap_dim(dim, x.ndim, ("gather", "dim", 1))
    if index.size == 0:     # as in PyTorch, before (and instead of) the dtype, shape checks
        return xp.empty(index.shape, dtype=x.dtype)
    check_index_dtype(index, "gather")
    x1, ix = at_least_1d(x), at_least_1d(index)
    if ix.ndim != x1.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input "
                           "tensor")
    for d, n in enumerate(ix.shape):
        if d != dim and n > x1.shape[d]:
            raise RuntimeError(f"Size does not match at dimension {d} expected index "
                               f"{list(ix.shape)} to be no larger than self {list(x1.shape)} "
                               f"apart from dimension {dim}")
    check_bounds(ix, x1.shape[dim], dim)
    refuse_kernel(x, "scatter_gather_tensor_cpu")
    return xp.ascontiguousarray(take_along(xp, x1, ix, dim)).reshape(index.shape)


gather.nondifferentiable("index")
gather.packs_reversed = True          # PyTorch packs index, then self


@gather.derivative
def _(grad, x, index, dim, sparse_grad):
    return scatter_add(zeros_for(x.shape, grad), dim, index, grad), None


# --- scatter ----------------------------------------------------------------------------------

def _warn_src_reduce():
    warn_once("The reduce argument of torch.scatter with Tensor src is deprecated and will be "
              "removed in a future PyTorch release. Use torch.scatter_reduce instead for more "
              "reduction options.")


def _write_scatter(xp, out, index, src, dim, value, reduce, late=None):
    """scatter's checks of its ``src``/``value`` and ``reduce`` forms, then ``_scatter``."""
    tensor_src = hasattr(src, "shape")
    if (src is None) == (value is None):
        raise TypeError("scatter(): expected either a Tensor 'src' or a number 'value'")
    if reduce is not None and not isinstance(reduce, str):      # (the parser's check)
        raise TypeError(f"{argument_name(('scatter', 'reduce', None))} must be str, not "
                        f"{type_name(reduce)}")
    _scatter(xp, out, index, src if tensor_src else None, dim, reduce,
             None if tensor_src else (src if value is None else value), check_reduce=True,
             late=late)


def _check_reduce(reduce, tensor_src):
    if reduce is not None:
        if reduce not in ("add", "multiply"):
            raise RuntimeError("reduce argument must be either add or multiply.")
        if tensor_src:
            _warn_src_reduce()


def _scatter(xp, out, index, src, dim, reduce, number=None, check_reduce=False, late=None):
    """Write (``reduce`` None), add or multiply ``src``, or ``number``, into ``out``
    (``check_reduce``: scatter's own ``reduce``, checked in PyTorch's order; ``late``: see
    ``in_place``)."""
    dim = wrap_dim(dim, out.ndim)
    out1, ix = at_least_1d(out), at_least_1d(index)
    check_scatter_args(out, ix, src, dim)
    if late is not None:
        late()
    if check_reduce:
        _check_reduce(reduce, src is not None)
    if ix.size == 0:
        return
    check_scatter_kernel(out1, ix, None if src is None else at_least_1d(src), dim)
    refuse_kernel(out, "scatter_gather_scalar_cpu" if src is None else
                  "scatter_gather_tensor_cpu")
    if src is not None:
        values = region(at_least_1d(src), ix.shape)
    else:
        values = checked_scalar(xp, number, out.dtype)
    if reduce is None:
        scatter_into(xp, out1, ix, values, dim)
        return
    work = wide(out1)
    scatter_into(xp, work, ix, wide(values), dim, reduce)
    if work is not out1:
        out1[...] = work


@op("scatter(input, dim, index, src=None, *, value=None, reduce=None)",
    inputs=("input", "index", "src"), scalars=True, inplace=True, out=True)
def scatter(xp, x, index, src, dim, value, reduce):
    """``input`` with ``src`` (a tensor, or a number ``value``) written at ``index`` along
    ``dim``; ``reduce`` ("add", "multiply") combines instead of writing."""
    require_tensors("scatter", input=x, index=index)
    return out_of_place(_write_scatter)(xp, x, index, src, dim, value, reduce)


scatter.inplace_variant(in_place(_write_scatter))


scatter.nondifferentiable("index")
scatter.number_overload("src")              # the value overload
scatter.reads_inputs((), (0, 2), ())        # PyTorch saves the index alone


# PyTorch's scatter with ``reduce`` (its scatter.reduce overloads) has no derivative: a
# recorded call's node is NotImplemented (edges to the inputs that require grad), refusing
# backward; forward-mode AD refuses it; out= writes it, recording that node on out
REDUCE_KERNEL = "scatter"


@scatter.refuse_forward_ad
def _(flat, params):
    return None if params[2] is None else f"aten::{REDUCE_KERNEL}"


@scatter.composed_when_recording
def _(flat, params):
    if params[2] is None:
        return NotImplemented
    from ember.autograd.grad_mode import no_grad
    from ember.ops._dispatch import RAW_OUTPUTS, call
    from ember.ops._not_implemented import hang_not_implemented
    with no_grad():
        res = call(scatter, flat, params, RAW_OUTPUTS)
    hang_not_implemented(res, REDUCE_KERNEL, flat)
    return res


@scatter.named_by
def _(flat, params, out):                    # PyTorch's overloads: src, value (in place:
    if params[2] is not None:                # the reduce overloads' node)
        return "NotImplemented"
    return "ScatterBackward0" if isinstance(flat[2], Tensor) else "ScatterBackward1"


@scatter.derivative
def _(grad, x, index, src, dim, value, reduce):
    if reduce is not None:      # (an in-place call's node; PyTorch's names scatter_)
        raise RuntimeError(f"derivative for aten::{REDUCE_KERNEL}_ is not implemented")
    grad_src = pad_to(gather(grad, dim, index), src.shape) if _is_tensor(src) else None
    return grad.scatter(dim, index, 0), None, grad_src


def _write_scatter_add(xp, out, index, src, dim, late=None):
    _scatter(xp, out, index, src, dim, "add", late=late)


@op("scatter_add(input, dim, index, src)", inputs=("input", "index", "src"), inplace=True,
    out=True)
def scatter_add(xp, x, index, src, dim):
    """``input`` with ``src`` added at ``index`` along ``dim`` (repeated indices add up)."""
    return out_of_place(_write_scatter_add)(xp, x, index, src, dim)


scatter_add.inplace_variant(in_place(_write_scatter_add))


scatter_add.nondifferentiable("index")
scatter_add.reads_inputs((), (0, 2), ())    # the index alone (and the source's size)


@scatter_add.derivative
def _(grad, x, index, src, dim):
    return grad, None, pad_to(gather(grad, dim, index), src.shape)


# --- take_along_dim ---------------------------------------------------------------------------

def along_shapes(x_shape, index_shape, dim):
    """(input's, indices') shapes once broadcast against each other apart from ``dim``."""
    a = tuple(1 if d == dim else n for d, n in enumerate(x_shape))
    b = tuple(1 if d == dim else n for d, n in enumerate(index_shape))
    try:
        common = list(np.broadcast_shapes(a, b))
    except ValueError:
        raise RuntimeError(broadcast_message([a, b])) from None
    sx, si = list(common), list(common)
    sx[dim], si[dim] = x_shape[dim], index_shape[dim]
    return tuple(sx), tuple(si)


def wrapped(xp, index, size, dim):
    """``index`` with negative entries counted from the end (checked against ``size``)."""
    check_range(index, -size, size, lambda bad: RuntimeError(
        f"index {bad} is out of bounds for dimension {dim} with size {size}"))
    return xp.where(index < 0, index + size, index) if index.size else index


@op("take_along_dim(input, indices, dim=None)", inputs=2, out=True,
    grad_fn_name="GatherBackward0")           # PyTorch composes it from gather
def take_along_dim(xp, x, indices, dim):
    """The elements of ``input`` at ``indices`` along ``dim`` (input and indices broadcast
    apart from ``dim``; negative indices count from the end); without ``dim``, of the
    flattened input at the flattened indices."""
    if dim is None:     # PyTorch gathers from the flattened input (int32 indices too)
        flat, ix = x.reshape(-1), indices.reshape(-1)
        if ix.size == 0:
            return xp.empty((0,), dtype=x.dtype)
        check_index_dtype(ix, "gather")
        check_bounds(ix, flat.size, 0)
        out = flat[ix]
        return out if out.flags.c_contiguous else out.copy()   # (as below)
    dim = int_param(dim, ("take_along_dim", "dim", 2), strict=True)
    if indices.ndim != x.ndim:
        raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same "
                           f"number of dimensions, but got {x.ndim} dimensions for input, and "
                           f"{indices.ndim} dimensions for indices")
    if indices.dtype != np.int64:
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{D.FROM_NUMPY[indices.dtype]._torch_name}")
    dim = wrap_dim_of_sized(dim, x.ndim)
    sx, si = along_shapes(x.shape, indices.shape, dim)
    ix = wrapped(xp, xp.broadcast_to(indices, si), x.shape[dim], dim)
    out = xp.take_along_axis(xp.broadcast_to(x, sx), ix, axis=dim)
    # (NumPy's result takes the indices' layout; PyTorch's is contiguous)
    return out if out.flags.c_contiguous else out.copy()


take_along_dim.nondifferentiable("indices")
take_along_dim.packs_reversed = True  # PyTorch packs indices, then self
# along a dim PyTorch gathers with indices of its own (broadcast, negative ones wrapped)
take_along_dim.copies_inputs(1, when=lambda flat, params: params[0] is not None)


@take_along_dim.composed_when_recording
def _(inputs, params):
    """PyTorch's graph along a dim: a gather of the input expanded to the broadcast shape
    (ExpandBackward0), its node keeping the broadcast indices, negative ones wrapped."""
    x, indices = inputs
    dim = params[0]
    if dim is None or not isinstance(x, Tensor) or not isinstance(indices, Tensor) \
            or indices.dtype is not D.int64 or indices.ndim != x.ndim:
        return NotImplemented           # (the op itself, and its errors)
    from ember.ops._reduce import constant
    dim = wrap_dim_of_sized(dim, x.ndim)
    sx, si = along_shapes(x.shape, indices.shape, dim)
    size = x.shape[dim]
    index = constant(lambda xp, i: wrapped(xp, xp.broadcast_to(i, si), size, dim), indices)
    return gather(x.expand(sx), dim, index)


@take_along_dim.derivative
def _(grad, x, indices, dim):
    from ember.ops._reduce import constant
    if dim is None:
        flat = scatter_add(zeros_for((x.numel(),), grad), 0, indices.reshape(-1), grad)
        return flat.reshape(x.shape), None
    dim = wrap_dim(dim, x.ndim)
    sx, si = along_shapes(x.shape, indices.shape, dim)
    size = x.shape[dim]
    index = constant(lambda xp, i: wrapped(xp, xp.broadcast_to(i, si), size, dim), indices)
    return scatter_add(zeros_for(sx, grad), dim, index, grad), None


ALIASES = {}

from ember.ops import index_dim, scatter_reduction  # noqa: E402,F401


# they read their inputs while writing out of order: PyTorch refuses any aliasing of the two
for _aliasing_refused in (gather, scatter, scatter_add):
    _aliasing_refused.refuse_aliased_inputs()
