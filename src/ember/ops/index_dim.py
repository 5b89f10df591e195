"""Ops on whole slices along one dim at the positions a 1-D index lists (index_select,
index_add, index_reduce, index_copy, index_fill), and on flat positions of the flattened input
(take, put).

Each op checks its index as PyTorch's does, and the rules differ: index_fill, take and put
count negative indices from the end, index_select, index_add, index_reduce and index_copy
reject them; index_copy, index_fill, take and put want int64 indices, the others int32 too.
"""


import numpy as np

from ember import _dtype as D
from ember._memory_format import laid_like
from ember._tensor import Tensor, _make
from ember._warn import warn_once
from ember.backend import combine_at, xp_of
from ember.ops._along import REDUCERS, at_least_1d, check_range, flat_positions, wide
from ember.ops._dims import argument_name, int_param, type_name, wrap_dim
from ember.ops._promotion import refuse_kernel
from ember.ops._registry import _is_tensor, op
from ember.ops._scalars import checked_scalar
from ember.ops.scatter import in_place, out_of_place, require_tensors, zeros_for
from ember.ops.scatter_reduction import _identity as reduce_identity
from ember.ops.scatter_reduction import scatter_reduce

__all__ = ["index_select", "index_add", "index_reduce", "index_copy", "index_fill", "take",
           "put"]

_INDEX_DTYPES = (np.dtype(np.int64), np.dtype(np.int32))


def _name(dtype):
    return D.FROM_NUMPY[dtype]._torch_name


def _along(index, ndim, dim):
    """A 1-D index shaped to broadcast along ``dim`` of an ``ndim``-dim array."""
    return index.reshape([index.size if d == dim else 1 for d in range(ndim)])


def _source_rows(xp, out, index, source, dim):
    """Flat positions in ``out`` (C-contiguous, at least 1-D) of each element of ``source``,
    whose slice ``i`` along ``dim`` goes to slice ``index[i]``."""
    if source.ndim == 1:                # (``index`` is 1-D)
        return index.astype(np.int64, copy=False)
    return flat_positions(xp, _along(index, source.ndim, dim), out.shape, dim, source.shape)


# --- index_select -----------------------------------------------------------------------------

@op("index_select(input, dim, index)", inputs=("input", "index"), out=True)
def index_select(xp, x, index, dim):
    """The slices of ``input`` along ``dim`` at the positions in ``index`` (a 1-D tensor)."""
    dim = wrap_dim(dim, x.ndim, ("index_select", "dim", 1))
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    ix = index.reshape(-1)
    if x.ndim == 0 and ix.size != 1:
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got "
                           f"{ix.size} value(s)")
    if index.dtype not in _INDEX_DTYPES:
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    if x.ndim == 0:
        if ix[0] != 0:
            raise IndexError("index out of range in self")
        return x.copy()
    size = x.shape[dim]
    if size == 0 and ix.size and x.ndim > 1:     # (1-D inputs fail the range check below)
        raise RuntimeError("index_select(): self indexing axis dim should be positive")
    if dim == 1:            # PyTorch's CPU kernel for dim 1 words it differently
        check_range(ix, 0, size, lambda bad: RuntimeError(
            f"INDICES element is out of DATA bounds, id={bad} axis_dim={size}"))
    else:
        check_range(ix, 0, size, lambda bad: IndexError("index out of range in self"))
    return xp.take(x, ix, axis=dim)


index_select.nondifferentiable("index")


@index_select.derivative
def _(grad, x, index, dim):
    return index_add(zeros_for(x.shape, grad), dim, index, grad), None


index_select.reads_inputs((), (0,))    # the gradient reads the index and input's shape only


# --- index_add --------------------------------------------------------------------------------

def _check_vector(name, index):
    """index_add's (and index_reduce's) checks of ``index``."""
    if index.ndim > 1:
        raise IndexError(f"{name}(): Index is supposed to be a vector, but got dim: "
                         f"{index.ndim} with type: {_name(index.dtype)} and size: "
                         f"{list(index.shape)}")
    if index.dtype not in _INDEX_DTYPES:
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index but got: "
                           f"{_name(index.dtype)}")


def _check_source(out, index, source, dim, name="index_add_"):
    """index_add's (and index_reduce's) checks of ``source`` against ``out``."""
    if source.dtype != out.dtype:
        raise RuntimeError(f"{name}(): self ({_name(out.dtype)}) and source "
                           f"({_name(source.dtype)}) must have the same scalar type")
    if source.ndim and dim >= source.ndim:
        raise RuntimeError(f"{name}(): Indexing dim {dim} is out of bounds of the source "
                           f"tensor with dim {source.ndim}")
    rows = source.shape[dim] if source.ndim else 1
    if index.size != rows:
        if not source.ndim:     # PyTorch's message reads source.size(dim)
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        raise RuntimeError(f"{name}(): Number of indices ({index.size}) should be equal to "
                           f"source.size(dim): ({rows}), for dim: {dim}")
    if source.ndim != out.ndim or source.shape[:dim] != out.shape[:dim] \
            or source.shape[dim + 1:] != out.shape[dim + 1:]:
        raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the "
                           f"specified dimension. Got self.shape = {list(out.shape)} "
                           f"source.shape = {list(source.shape)}")


def _write_index_add(xp, out, index, source, dim, alpha, late=None):
    if not isinstance(alpha, (int, float, complex)) and not hasattr(alpha, "dtype"):
        raise TypeError(f"{argument_name(('index_add', 'alpha', None))} must be Number, not "
                        f"{type_name(alpha)}")      # (the parser's check)
    dim = wrap_dim(dim, out.ndim)
    _check_vector("index_add_", index)
    _check_source(out, index, source, dim)
    if late is not None:        # (see scatter.in_place)
        late()
    out1, ix = at_least_1d(out), index.reshape(-1)
    if out.ndim > 1 and out.size == 0:      # PyTorch checks no bounds then
        return
    size = out1.shape[dim]
    # PyTorch adds along the first or last dim of an N-d tensor with an int64 index and an
    # alpha of 1 through scatter_add (its bounds message, and 16-bit floats added in float32
    # and rounded once), else slice by slice (rounding after every step)
    once = out1.ndim > 1 and dim in (0, out1.ndim - 1) and index.dtype == np.int64 \
        and alpha == 1 and type(alpha) is not bool
    check_range(ix, 0, size, lambda bad: RuntimeError(
        f"index {bad} is out of bounds for dimension {dim} with size {size}") if once
        else IndexError("index out of range in self"))
    if source.size == 0:
        return
    refuse_kernel(out, "scatter_gather_tensor_cpu")   # PyTorch adds through scatter_add
    values = at_least_1d(source)
    if out.dtype.kind != "b" and alpha != 1:
        values = values * checked_scalar(xp, alpha, out.dtype)
    work = wide(out1) if once else out1
    combine_at(xp, np.add, work.reshape(-1), _source_rows(xp, out1, ix, values, dim),
               (wide(values) if once else values).reshape(-1))
    if work is not out1:
        out1[...] = work


@op("index_add(input, dim, index, source, *, alpha=1)", inputs=("input", "index", "source"),
    inplace=True, out=True)
def index_add(xp, x, index, source, dim, alpha):
    """``input`` with ``alpha * source`` added to the slices along ``dim`` listed in ``index``
    (repeated indices add up)."""
    return out_of_place(_write_index_add)(xp, x, index, source, dim, alpha)


index_add.inplace_variant(in_place(_write_index_add))


index_add.nondifferentiable("index")
index_add.reads_inputs((), (2,), (2,))      # PyTorch saves the index and source, not input


@index_add.derivative
def _(grad, x, index, source, dim, alpha, *, needs):
    if not needs[2]:
        return grad, None, None
    grad_source = index_select(grad, dim, index)
    if alpha != 1:
        grad_source = grad_source * (alpha.conjugate() if isinstance(alpha, complex) else alpha)
    return grad, None, grad_source


# --- index_reduce -----------------------------------------------------------------------------

_INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")


def _scatter_index(xp, index, source_shape, dim):
    """The scatter index equivalent to a 1-D ``index`` along ``dim``: in ``source_shape``."""
    return xp.broadcast_to(_along(index.reshape(-1), len(source_shape), dim), source_shape)


def _warn_beta():
    """PyTorch's once-per-process warning, pointed at the first caller outside ember."""
    warn_once("index_reduce() is in beta and the API may change at any time.")


def _check_reduce_kernel(out, reduce, include_self, checked=False):
    """The dtypes PyTorch's index_reduce kernels lack, in the order it finds out: those of
    the kernels it enters before it checks the bounds, then (``checked``) the others."""
    kind, name = out.dtype.kind, _name(out.dtype)
    if not checked:
        if not include_self and kind in "bc":
            raise NotImplementedError(f"\"index_reduce_func_exclude_input_init\" not "
                                      f"implemented for '{name}'")
        if out.ndim <= 1 and kind in "bc":        # its kernel for vectors
            raise NotImplementedError(f"\"index_func_\" not implemented for '{name}'")
        return
    if reduce in ("amax", "amin") and kind == "c":
        kernel = "maximum" if reduce == "amax" else "minimum"
        raise NotImplementedError(f"\"{kernel}_cpu\" not implemented for '{name}'")


def _write_index_reduce(xp, out, index, source, dim, reduce, include_self, late=None):
    dim = int_param(dim, ("index_reduce", "dim", 1), strict=True)     # (the parser's check)
    if reduce not in _INDEX_REDUCTIONS:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or "
                           f"amin but got {reduce}.")
    dim = wrap_dim(dim, out.ndim)
    _check_vector("index_reduce_", index)
    _check_source(out, index, source, dim, "index_reduce_")
    if late is not None:        # (see scatter.in_place)
        late()
    _warn_beta()
    out1, ix = at_least_1d(out), index.reshape(-1)
    size = out1.shape[dim]
    if size == 0 and ix.size and out.ndim > 1:     # (PyTorch selects slice 0 first)
        raise IndexError(f"select(): index 0 out of range for tensor of size "
                         f"{list(out1.shape)} at dimension {dim}")
    _check_reduce_kernel(out, reduce, include_self)
    if not include_self:        # PyTorch first fills the indexed slices (index_fill's check)
        check_range(ix, -size, size, lambda bad: IndexError(
            f"index {bad} is out of bounds for dimension {dim} with size {size}"))
    check_range(ix, 0, size, lambda bad: IndexError("index out of range in self"))
    _check_reduce_kernel(out, reduce, include_self, checked=True)
    if ix.size == 0:
        return
    if reduce == "mean" and out.dtype.kind == "b":
        raise NotImplementedError("\"div_floor_cpu\" not implemented for 'Bool'")
    values = at_least_1d(source)
    rows = _source_rows(xp, out1, ix, values, dim)
    target = out1.reshape(-1)
    if not include_self:
        target[rows] = reduce_identity(reduce, out.dtype)
    # unlike scatter_reduce, PyTorch rounds 16-bit floats after every step here
    combine_at(xp, REDUCERS[reduce], target, rows, values.reshape(-1))
    if reduce == "mean":
        counts = xp.bincount(rows, minlength=target.size)
        counts = counts + 1 if include_self else xp.maximum(counts, 1)
        if out.dtype.kind in "iu":
            target[...] = target // counts
        else:
            target[...] = target / counts.astype(target.dtype)


@op("index_reduce(input, dim, index, source, reduce, *, include_self=True)",
    inputs=("input", "index", "source"), inplace=True, out=True)
def index_reduce(xp, x, index, source, dim, reduce, include_self):
    """``input`` with the slices of ``source`` combined by ``reduce`` ("prod", "mean", "amax",
    "amin") into the slices along ``dim`` listed in ``index``; ``include_self=False`` leaves
    input's own values out of the slices that receive any."""
    return out_of_place(_write_index_reduce)(xp, x, index, source, dim, reduce, include_self)


index_reduce.inplace_variant(in_place(_write_index_reduce))


index_reduce.nondifferentiable("index")
index_reduce.refuse_forward_ad("index_reduce")      # PyTorch has no forward derivative
index_reduce.refuse_complex_grad()


@index_reduce.derivative
def _(grad, x, index, source, dim, reduce, include_self, *, out):
    d = wrap_dim(dim, x.ndim)
    if reduce in ("amax", "amin"):
        return _extremum_grads(grad, x, index, source, d, include_self, out)
    # prod and mean: scatter_reduce's gradients, for the scatter index repeating ``index``
    full = _make(_scatter_index(xp_of(index._data), index._data, tuple(source.shape), d))
    return scatter_reduce.vjp(grad, x, full, source, d, reduce, include_self, out=out)


def _extremum_grads(grad, x, index, source, dim, include_self, out):
    """amax/amin: each result's gradient shared evenly by the values equal to it; a NaN
    result, equal to nothing, gets NaN gradients. With ``include_self=False`` input's own
    value gets no share where indexed, but, as in PyTorch (and scatter_reduce), still
    counts among the ties there, so the gradients may sum to less than the incoming one."""
    from ember.ops._reduce import constant
    self_ties = constant(lambda xp, a, r: a == r, x, out).to(grad.dtype)
    src_ties = constant(lambda xp, s, r: s == r, source, index_select(out, dim, index))
    share = grad / index_add(self_ties, dim, index, src_ties.to(grad.dtype))
    grad_x = share * self_ties
    if not include_self:
        grad_x = grad_x.index_fill(dim, index.long(), 0)
    return grad_x, None, index_select(share, dim, index) * src_ties.to(grad.dtype)


# --- index_copy -------------------------------------------------------------------------------

def _write_index_copy(xp, out, index, source, dim, late=None):
    dim = wrap_dim(dim, out.ndim)
    if late is not None:        # (see scatter.in_place: PyTorch's first check after dim's)
        late()
    if index.ndim > 1:
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got "
                         f"{index.ndim})")
    if source.ndim == 0 and index.size != 1:
        raise IndexError(f"index_copy_(): When source is scalar, index should have one element "
                         f"(got {index.size})")
    if source.ndim and out.ndim and source.ndim != out.ndim:
        raise IndexError(f"index_copy_(): When source and destination are not scalars, their "
                         f"dimensionality must match. Source dimensionality ({source.ndim}), "
                         f"destination dimensionality ({out.ndim})")
    if index.dtype != np.int64:
        raise RuntimeError(f"index_copy_(): Expected a long tensor for index, but got "
                           f"{_name(index.dtype)}")
    if source.dtype != out.dtype:
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, "
                           f"but got (self) {_name(out.dtype)} and (source) "
                           f"{_name(source.dtype)}")
    if D.FROM_NUMPY[out.dtype] in D.FLOAT8:
        raise NotImplementedError(f"\"index_copy_cpu\" not implemented for '{_name(out.dtype)}'")
    out1, ix, s1 = at_least_1d(out), index.reshape(-1), at_least_1d(source)
    rest_out = [n for d, n in enumerate(out1.shape) if d != dim]
    rest_src = [n for d, n in enumerate(s1.shape) if d != dim]
    if rest_out != rest_src:
        raise RuntimeError(f"index_copy_(): Source/destination tensor must have same slice "
                           f"shapes. Destination slice shape: {' '.join(map(str, rest_out))} "
                           f"at dimension {dim} and source slice shape: "
                           f"{' '.join(map(str, rest_src))} at dimension 0.")
    if ix.size != s1.shape[dim]:
        raise IndexError(f"index_copy_(): Number of indices ({ix.size}) should be equal to "
                         f"source.size(dim) ({s1.shape[dim]})")
    size = out1.shape[dim]
    if out.size == 0:           # PyTorch checks no bounds then
        return
    check_range(ix, 0, size, lambda bad: IndexError(
        f"index_copy_(): index {bad} is out of bounds for dimension {dim} with size {size}"))
    if s1.size:
        out1.reshape(-1)[_source_rows(xp, out1, ix, s1, dim)] = s1.reshape(-1)


@op("index_copy(input, dim, index, source)", inputs=("input", "index", "source"), inplace=True,
    out=True)
def index_copy(xp, x, index, source, dim):
    """``input`` with the slices of ``source`` copied to the slices along ``dim`` listed in
    ``index`` (which slice wins for a repeated index is unspecified)."""
    return out_of_place(_write_index_copy)(xp, x, index, source, dim)


index_copy.inplace_variant(in_place(_write_index_copy))


index_copy.nondifferentiable("index")
index_copy.reads_inputs((), (0, 2), (2,))   # PyTorch saves the index and source, not input


@index_copy.derivative
def _(grad, x, index, source, dim):
    grad_source = index_select(grad, dim, index)
    if grad_source.ndim != source.ndim:     # a 0-d input's slice, as a 1-element source
        grad_source = grad_source.reshape(source.shape)
    return grad.index_fill(dim, index, 0), None, grad_source


# --- index_fill -------------------------------------------------------------------------------

def _fill_number(x, value):
    """index_fill's ``value`` (a number or a 0-dim tensor) as a checked 0-d array."""
    if hasattr(value, "dtype"):
        value = value.item() if value.dtype.kind != "V" else float(value.astype(np.float32))
    if isinstance(value, complex) and x.dtype.kind != "c":
        raise RuntimeError("index_fill_(): Converting complex Scalar to non-complex type is not "
                           "supported")
    return checked_scalar(np, value, x.dtype)


def _fill_index(index, size, dim):
    """index_fill's 1-D index checked against ``size``, negative entries counted from the
    end."""
    ix = index.reshape(-1)
    check_range(ix, -size, size, lambda bad: IndexError(
        f"index {bad} is out of bounds for dimension {dim} with size {size}"))
    return ix


def _write_index_fill(xp, out, index, value, dim):
    dim = int_param(dim, ("index_fill", "dim", 1), strict=True)      # (the parser's check)
    if hasattr(value, "dtype") and value.ndim != 0:     # PyTorch's order of checks
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {value.ndim} dimension(s).")
    if index.dtype != np.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    dim = wrap_dim(dim, out.ndim)
    if index.ndim > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    number = _fill_number(out, value)
    out1 = at_least_1d(out)
    if out.size == 0:           # PyTorch checks no bounds then
        return
    ix = _fill_index(index, out1.shape[dim], dim)
    refuse_kernel(out, "index_fill_cpu")
    out1[(slice(None),) * dim + (ix,)] = number


@op("index_fill(input, dim, index, value)", inputs=("input", "index", "value"), scalars=True,
    inplace=True, out=False)
def index_fill(xp, x, index, value, dim):
    """``input`` with ``value`` (a number or 0-dim tensor) in the slices along ``dim`` listed
    in ``index``."""
    require_tensors("index_fill", input=x, index=index)
    return out_of_place(_write_index_fill, keep_layout=True)(xp, x, index, value, dim)


@index_fill.inplace_variant
def _(xp, dst, x, index, value, dim):
    _write_index_fill(xp, dst, index, value, dim)     # fancy assignment takes any strides


index_fill.nondifferentiable("index")
index_fill.number_overload("value")
index_fill.reads_inputs((), (0, 2), ())     # PyTorch saves the index alone


@index_fill.named_by
def _(flat, params, out):                    # PyTorch's overloads: Scalar, Tensor value
    return "IndexFillBackward1" if isinstance(flat[2], Tensor) else "IndexFillBackward0"


@index_fill.derivative
def _(grad, x, index, value, dim):
    from ember.ops._reduce import constant
    grad_x = grad.index_fill(dim, index, 0)
    if not _is_tensor(value):
        return grad_x, None, None
    if x.ndim == 0:             # one slice, filled when the index names it
        return grad_x, None, grad if index.numel() else zeros_for((), grad)
    size = x.shape[wrap_dim(dim, x.ndim)]
    rows = constant(lambda xp, i: xp.unique(xp.where(i < 0, i + size, i)).reshape(-1), index)
    return grad_x, None, index_select(grad, dim, rows).sum()


# --- take and put -----------------------------------------------------------------------------

def _flat_index(index, numel):
    """``index`` checked against ``numel`` elements (negative entries count from the end)."""
    check_range(index, -numel, numel, lambda bad: IndexError(
        f"out of range: tried to access index {bad} on a tensor of {numel} elements."))
    return index


def _long_index(name, index):
    if index.dtype != np.int64:
        raise RuntimeError(f"{name}(): Expected a long tensor for index, but got "
                           f"{_name(index.dtype)}")


@op("take(input, index)", inputs=2, out=True)
def take(xp, x, index):
    """The elements of the flattened ``input`` at ``index`` (negative indices count from the
    end), in ``index``'s shape."""
    _long_index("take", index)
    if x.size == 0 and index.size:
        raise IndexError("take(): tried to take from an empty tensor")
    if index.size:
        refuse_kernel(x, "take_cpu")
    out = x.reshape(-1)[_flat_index(index, x.size)]
    # (NumPy's result takes the index's layout; PyTorch's is contiguous)
    return out if out.flags.c_contiguous else out.copy()


take.nondifferentiable("index")
take.packs_reversed = True            # PyTorch packs index, then self


@take.derivative
def _(grad, x, index):
    return put(zeros_for(x.shape, grad), index, grad, accumulate=True), None


def _write_put(xp, out, index, source, accumulate, late=None):
    _long_index("put_", index)
    if source.dtype != out.dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {_name(out.dtype)} and source.dtype = "
                           f"{_name(source.dtype)}")
    if source.size != index.size:
        raise IndexError(f"put_(): Expected source and index to have the same number of "
                         f"elements, but got source.numel() = {source.size}, index.numel() = "
                         f"{index.size}")
    if out.size == 0 and index.size:
        raise IndexError("put_(): Tried to put elements into an empty tensor")
    if late is not None:        # (see scatter.in_place)
        late()
    if index.size:
        refuse_kernel(out, "take_put_cpu")
    ix = _flat_index(index, out.size).reshape(-1)
    if not accumulate:
        out.reshape(-1)[ix] = source.reshape(-1)
        return
    combine_at(xp, np.add, out.reshape(-1), ix, source.reshape(-1))


@op("put(input, index, source, accumulate=False)", inputs=("input", "index", "source"),
    inplace=True, out=False)
def put(xp, x, index, source, accumulate):
    """``input`` with ``source``'s elements written (or added, if ``accumulate``) at the flat
    positions ``index`` (negative indices count from the end)."""
    out = out_of_place(_write_put)(xp, x, index, source, accumulate)    # (writes row-major)
    return laid_like(xp, out, x)


put.inplace_variant(in_place(_write_put))


put.nondifferentiable("index")
put.reads_inputs((), (0, 2), (2,))          # PyTorch saves the index and source, not input


@put.derivative
def _(grad, x, index, source, accumulate, *, needs):
    grad_x = grad if accumulate else grad.put(index, zeros_for(source.shape, grad))
    return grad_x, None, take(grad, index).reshape(source.shape) if needs[2] else None


# they read their inputs while writing out of order: PyTorch refuses any aliasing of the two
for _aliasing_refused in (index_select, index_add, index_reduce, index_copy, take):
    _aliasing_refused.refuse_aliased_inputs()
