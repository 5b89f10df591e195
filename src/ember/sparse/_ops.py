"""Sparse tensors' shape ops, sums, softmax and elementwise arithmetic, run on the parts with
ember ops (so they work on every device and are differentiable in the values). Their in-place
forms are in _inplace.py, the layout checks they run first in _layout_policy.py."""

import math
import numbers

import ember
from ember import _dtype as D
from ember._tensor import Tensor, _wrap_dim
from ember.autograd.function import Function
from ember.ops._barebones import refusal
from ember.ops.arithmetic import _BOOL_SUB
from ember.sparse import _convert as C
from ember.sparse import _layouts as L
from ember.sparse._dispatch import (ANY_LAYOUT, BATCHED, HANDLERS, backend_name, handles,
                                    is_scalar, is_sparse)
from ember.sparse._layout_policy import (_COO_ONLY, _check_add_layouts, _check_mul_layouts,
                                         _coo_only, _is_compressed, _refuse_compressed,
                                         _refuse_values_op)
from ember.sparse._names import freeing, named
from ember.sparse._origin import carry_linear, carry_view, dense_route
from ember.sparse._refusals import bare_repr, refusing
from ember.sparse._tensor import compressed, coo, mark_coalesced_grad

__all__ = ["sum", "softmax", "log_softmax", "select", "transpose", "as_coo", "index_select"]


@handles("reshape")
def _reshape(input, *args, **kwargs):
    raise RuntimeError("reshape is not implemented for sparse tensors")


@handles("select")
def select(input, dim, index):
    """``input.select(dim, index)`` of a COO tensor: a sparse tensor one dim smaller (dense
    when no sparse dim is left); backward refuses, as PyTorch's (no sparse select_backward).
    A batched compressed tensor's batch dims select one batch (a view of its parts)."""
    if input._crow is not None and input._crow.ndim > 1:
        from ember.sparse._batched import select_batch
        return select_batch(input, dim, index, _select)
    result = _select(input, dim, index)
    if input.layout is not L.sparse_coo:
        return result
    return refusing(result, "SelectBackward0", NotImplementedError(
        f"Could not run 'aten::select_backward' with arguments from the "
        f"'{backend_name((input,))}' backend."))


def _select(input, dim, index):
    from ember._tensor import _wrap_dim
    dim = _wrap_dim(dim, input.ndim)
    size = input.shape[dim]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(input.shape)} at dimension {dim}")
    index %= size
    if L.blocked(input.layout) and not _line_is_a_view(input, dim, index):
        raise RuntimeError("select(): no view exists for the given input, consider using "
                           "ember.select_copy.")
    c = as_coo(input)
    sparse_dim = c.sparse_dim()
    rest = list(c.shape[:dim]) + list(c.shape[dim + 1:])
    # PyTorch's marks a COO tensor's line uncoalesced (unless it stores one element at most)
    if dim >= sparse_dim:
        return coo(c._i, c._v.select(dim - sparse_dim + 1, index), rest,
                   c._coalesced and input.layout is not L.sparse_coo)
    keep = (c._i[dim] == index).nonzero().reshape(-1)
    others = [d for d in range(sparse_dim) if d != dim]
    values = c._v.index_select(0, keep)
    if not others:
        return values.sum(0)
    indices = c._i[others].index_select(1, keep)
    # a line of a 2-D compressed matrix comes out sorted, as PyTorch marks it
    return coo(indices, values, rest, input.layout is not L.sparse_coo)


def _line_is_a_view(s, dim, index):
    """Whether line ``index`` along ``dim`` of the blocked matrix ``s`` lies in its values at
    evenly spaced offsets (PyTorch's select returns a view of the values, so it refuses a
    line that none can show)."""
    from ember.sparse._compressed import block_coordinates, blocksize
    high, wide = blocksize(s)
    step = high if dim == 0 else wide
    blocks = (block_coordinates(s)[dim] == index // step).nonzero().reshape(-1, 1)
    within = index % step
    inner = ember.arange(wide if dim == 0 else high, device=blocks.device).reshape(1, -1)
    if dim == 0:        # row ``within`` of each block, left to right
        offsets = blocks * (high * wide) + within * wide + inner
    else:               # column ``within`` of each block, top to bottom
        offsets = blocks * (high * wide) + inner * wide + within
    gaps = offsets.reshape(-1).diff()
    return gaps.numel() == 0 or bool((gaps == gaps[0]).all())


@handles("unbind")
def _unbind(input, dim=0):
    """``input.unbind(dim)``: each slice along ``dim`` selected (COO slices of a 2-D
    compressed matrix, as PyTorch gives)."""
    from ember._tensor import _wrap_dim
    dim = _wrap_dim(dim, input.ndim)
    return tuple(select(input, dim, i) for i in range(input.shape[dim]))


ANY_LAYOUT.add("unbind")


# ----- shape ---------------------------------------------------------------------------------

@handles("transpose")
def transpose(input, dim0, dim1, name="TransposeBackward0"):
    """``input.transpose(dim0, dim1)`` of a sparse tensor (its dense origin transposed too)."""
    from ember.sparse._origin import carry_view
    result = _own_node(_transpose(input, dim0, dim1), input, name)
    return carry_view(result, input, lambda o: o.transpose(dim0, dim1))


@handles("permute")
def permute(input, dims):
    """``input.permute(dims)`` of a COO tensor: sparse and dense dims each reordered among
    themselves, as PyTorch's (marked uncoalesced when the sparse dims' order changes)."""
    from ember.sparse._origin import carry_view
    if input.layout is not L.sparse_coo:        # (PyTorch's runs as_strided, which they lack)
        raise NotImplementedError(f"Could not run 'aten::as_strided' with arguments from the "
                                  f"'{backend_name((input,))}' backend.")
    ndim, sparse_dim = input.ndim, input.sparse_dim()
    if len(dims) != ndim:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {ndim} is not equal to len(dims) = {len(dims)}")
    order = [_wrap_dim(d, ndim) for d in dims]
    if len(set(order)) != ndim:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    if any((d < sparse_dim) != (k < sparse_dim) for k, d in enumerate(order)):
        raise RuntimeError("permute(sparse_coo): transpositions between sparse and dense "
                           "dimensions are not allowed.Only transpositions within sparse and "
                           "dense dimensions are supported.")
    indices = input._i[order[:sparse_dim]] if order[:sparse_dim] != list(range(sparse_dim)) \
        else input._i
    dense = [d - sparse_dim + 1 for d in order[sparse_dim:]]
    values = input._v.permute(0, *dense) if dense != sorted(dense) else input._v
    result = _own_node(coo(indices, values, [input.shape[d] for d in order], input._coalesced
                           and indices is input._i), input, "PermuteBackward0")
    return carry_view(result, input, lambda o: o.permute(order))


def _own_node(result, input, name):
    """``result``, which holds ``input``'s values, given a node of its own named ``name`` (an
    alias of the values) when they require grad, as PyTorch's transposes have."""
    v = input._v
    if result is not input and result._v is v and v.requires_grad and ember.is_grad_enabled():
        from ember.ops.conversion import _alias
        result._v = _alias(v)
        if result._origin is not None:      # its dense origin stays (NOTE [Dense origins])
            result._origin = (result._origin[0], result._v, result._v._version)
        named(result, name)
    return result


def _transpose(input, dim0, dim1):
    from ember._tensor import _wrap_dim
    ndim = input.ndim
    d0, d1 = _wrap_dim(dim0, ndim), _wrap_dim(dim1, ndim)
    if input.layout is not L.sparse_coo:
        return input if d0 == d1 else _flip_compressed(input)
    sparse_dim = input.sparse_dim()
    if d0 != d1 and max(d0, d1) >= sparse_dim:
        raise RuntimeError(f"sparse transpose: transposed dimensions must be sparse Got "
                           f"sparse_dim: {sparse_dim}, d0: {d0}, d1: {d1}")
    size = list(input.shape)
    size[d0], size[d1] = size[d1], size[d0]
    order = list(range(sparse_dim))
    if d0 != d1:
        order[d0], order[d1] = order[d1], order[d0]
    indices = input._i.index_select(0, ember.tensor(order, device=input.device))
    result = coo(indices, input._v, size)
    # PyTorch drops the flag for any swap of two sparse dims, one entry or not
    result._coalesced = input._coalesced and (d0 == d1 or input._v.shape[0] == 0)
    return result


_FLIPPED = {L.sparse_csr: L.sparse_csc, L.sparse_csc: L.sparse_csr,
            L.sparse_bsr: L.sparse_bsc, L.sparse_bsc: L.sparse_bsr}


def _flip_compressed(s):
    """The transpose of a 2-D compressed matrix: the same indices read the other way (CSR
    becomes CSC, BSR becomes BSC with each block transposed)."""
    values = s._v.transpose(1, 2) if L.blocked(s.layout) else s._v
    return compressed(_FLIPPED[s.layout], s._crow, s._col, values, (s.shape[1], s.shape[0]))


@handles("t")
def _t(input):
    if input.layout is L.sparse_coo and (input.sparse_dim() > 2 or input.dense_dim()):
        raise RuntimeError(f"t() expects a tensor with <= 2 sparse and 0 dense dimensions, "
                           f"but got {input.sparse_dim()} sparse and {input.dense_dim()} "
                           f"dense dimensions")
    return input if input.ndim < 2 else transpose(input, 0, 1, "TBackward0")


@handles("unsqueeze")
def _unsqueeze(input, dim):
    from ember._tensor import _wrap_dim
    _coo_only(input, "unsqueeze")
    dim = _wrap_dim(dim, input.ndim + 1)
    size = list(input.shape)
    size.insert(dim, 1)
    sparse_dim = input.sparse_dim()
    if dim > sparse_dim:
        return coo(input._i, input._v.unsqueeze(dim - sparse_dim + 1), size)
    zeros = input._i.new_zeros((1, input._i.shape[1]))
    indices = ember.cat([input._i[:dim], zeros, input._i[dim:]])
    return coo(indices, input._v, size)


@handles("index_select")
def index_select(input, dim, index):
    """``input.index_select(dim, index)`` of a COO tensor: for each entry of ``index`` in
    turn, the stored elements in that slice (in their stored order); backward refuses, as
    PyTorch's (no sparse index_add_)."""
    out = refusing(_index_select(input, dim, index), "IndexSelectBackward0",
                   NotImplementedError(f"Could not run 'aten::index_add_' with arguments from "
                                       f"the '{backend_name((input,))}' backend."))
    # (a dense gradient, a product's, goes back through PyTorch's index_add_ of a dense one)
    dim = _wrap_dim(dim, input.ndim)
    index = index.reshape(-1).to(ember.int64)
    index = ember.where(index < 0, index + input.shape[dim], index)
    return carry_view(out, input, lambda o: o.index_select(dim, index))


def _index_select(input, dim, index):
    from ember._tensor import _wrap_dim
    _coo_only(input, "index_select")
    if not isinstance(index, Tensor) or is_sparse(index) or index.ndim > 1 or \
            index.dtype not in (ember.int64, ember.int32):
        raise IndexError("index_select() argument index must be 1-D strided (non-sparse) "
                         "long-tensor.")
    dim = _wrap_dim(dim, input.ndim)
    size = input.shape[dim]
    index = index.reshape(-1).to(ember.int64)
    if index.numel():
        bad = index[(index < -size) | (index >= size)]
        if bad.numel():
            raise IndexError(f"index_select(): index contains {int(bad[0])} that is out of "
                             f"range for tensor of size {list(input.shape)} at dimension "
                             f"{dim}")
    index = ember.where(index < 0, index + size, index)
    new_size = list(input.shape)
    new_size[dim] = index.numel()
    sparse_dim = input.sparse_dim()
    if dim >= sparse_dim:
        return coo(input._i, input._v.index_select(dim - sparse_dim + 1, index), new_size)
    order, taken = _matches(input._i[dim], index)
    indices = input._i.index_select(1, order)
    indices[dim] = taken
    return coo(indices, input._v.index_select(0, order), new_size)


def _matches(column, index):
    """For each entry j of ``index`` in turn, the positions k (ascending) where ``column[k]
    == index[j]``: (those positions, the matching j of each)."""
    order = ember.argsort(column, stable=True)
    ordered = column.index_select(0, order)
    lo = ember.searchsorted(ordered, index)
    counts = ember.searchsorted(ordered, index, right=True) - lo
    taken = ember.repeat_interleave(ember.arange(index.numel(), device=index.device), counts)
    starts = counts.cumsum(0) - counts
    within = ember.arange(taken.numel(), device=index.device) - starts.index_select(0, taken)
    return order.index_select(0, lo.index_select(0, taken) + within), taken


# ----- reductions ----------------------------------------------------------------------------

def _sum_dtype(values, dtype):
    if dtype is not None:
        return values.to(dtype)
    if values.dtype.category < ember._dtype.FLOATING:
        return values.to(ember.int64)
    return values


@handles("sum")
def _sum_op(input, dim=None, keepdim=False, *, dtype=None):
    if dim is None:
        return _whole_sum(input, dtype)
    if input.layout not in (L.sparse_coo, L.sparse_csr):
        raise RuntimeError(f"Currently the only compressed sparse format supported for "
                           f"sum.dim_IntList is CSR, but got layout "
                           f"{L.short_name(input.layout)}")
    if input.layout is L.sparse_csr and not keepdim:
        raise RuntimeError("reduction operations on CSR tensors with keepdim=False is "
                           "unsupported")
    if input._batch_ndim():
        raise NotImplementedError("sum: ember sums a batched compressed tensor only whole")
    out = _sparse_sum(as_coo(input), dim, dtype)
    if keepdim:
        for d in _summed_dims(dim, input.ndim):     # put back each summed dim, with size 1
            out = _unsqueeze(out, d) if is_sparse(out) else out.unsqueeze(d)
        if input.layout is L.sparse_csr:     # (PyTorch's take the plain indices' dtype)
            out = C.to_sparse_csr(out)
            out._crow, out._col = C.with_index_dtype(out._crow, out._col, input._col.dtype)
            return out
        return _refused_sum(out, input)
    return out if is_sparse(out) and out._v is input._v else _refused_sum(out, input)


def _refused_sum(out, input):
    """The sum ``out`` of the COO ``input`` over some dims under SumBackward1, whose backward
    refuses when ``out`` is sparse, as PyTorch's (it cannot expand a sparse gradient)."""
    if not is_sparse(out):
        return named(out, "SumBackward1")
    return refusing(out, "SumBackward1",
                    RuntimeError("expand is unsupported for Sparse tensors"))


def _whole_sum(input, dtype):
    """``input.sum()``: PyTorch's SumBackward0 gives a sparse leaf (or the dense tensor it was
    made from) a dense gradient, ones wherever the leaf stores or not."""
    from ember.sparse._products import _anchor
    values = _sum_dtype(input._v, dtype)
    anchor = _anchor(input, True) if values.requires_grad else None
    if anchor is None:
        return values.sum()
    return _DenseSum.apply(values.detach(), anchor)


class _DenseSum(Function):
    """The sum of the values, whose gradient goes densely to ``anchor`` (SumBackward0)."""

    _node_name = "SumBackward0"

    @staticmethod
    def forward(ctx, values, anchor):
        ctx.shape, ctx.dtype = anchor.shape, anchor.dtype
        return values.sum()

    @staticmethod
    def backward(ctx, grad):
        return None, grad.to(ctx.dtype).expand(ctx.shape)


_DenseSum._node_class().__repr__ = bare_repr


def _summed_dims(dim, ndim):
    """The dims a sum over ``dim`` (an int or a sequence) reduces, wrapped and sorted; PyTorch's
    error for a dim given twice."""
    from ember._tensor import _wrap_dim
    dims = [_wrap_dim(d, ndim) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))]
    for d in dims:
        if dims.count(d) > 1:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return sorted(dims)


def sum(input, dim=None, dtype=None):  # noqa: A001  (torch.sparse.sum)
    """The sum of a sparse COO tensor's elements, over all or some dims (dense when every
    sparse dim is summed, else a coalesced sparse tensor)."""
    out = _sparse_sum(input, dim, dtype)
    if dim is None:
        mark_coalesced_grad(out, input)     # (PyTorch's gradient is coalesced)
        return out                  # SumBackward0
    if is_sparse(out) and out._v is input._v:
        return out                  # (no node of its own)
    return named(out, "SparseSumBackward0")


def _sparse_sum(input, dim, dtype):
    if dim is not None and not (is_sparse(input) and input.layout is L.sparse_coo):
        _summed_dims(dim, input.ndim)           # (its dims are checked first)
        backend = "SparseCsrCPU" if is_sparse(input) else input.device.type.upper()
        raise NotImplementedError(f"Could not run 'aten::_indices' with arguments from the "
                                  f"'{backend}' backend.")
    if is_sparse(input) and input.layout is not L.sparse_coo:
        raise RuntimeError(f"coalesce expected sparse coordinate tensor layout but got "
                           f"{L.short_name(input.layout)}")
    if not is_sparse(input):
        raise RuntimeError("coalesce expected sparse coordinate tensor layout but got Strided")
    values = input._v
    if values.dtype in D.WIDE_UNSIGNED and not input._coalesced:   # (ops/_barebones.py)
        raise refusal("coalesce", values.dtype)
    if dim is None and values.requires_grad and ember.is_grad_enabled():
        # PyTorch's sums ``coalesce().values()``, whose node saves (and frees) the input
        from ember.ops.conversion import _alias
        values = freeing(_alias(values), "ValuesBackward0")
    values = _sum_dtype(values, dtype)
    if dim is None:
        return values.sum()
    dims = _summed_dims(dim, input.ndim)
    sparse_dim = input.sparse_dim()
    dense = [d - sparse_dim + 1 for d in dims if d >= sparse_dim]
    if dense:
        values = values.sum(dense)
    kept = [d for d in range(sparse_dim) if d not in dims]
    if len(kept) == sparse_dim:
        out = coo(input._i, values, [n for d, n in enumerate(input.shape) if d not in dims],
                  input._coalesced)
        return out if input._coalesced else C.coalesce(out)     # (PyTorch's sums coalesced)
    if not kept:
        return values.sum(0)
    indices = input._i.index_select(0, ember.tensor(kept, device=input.device))
    size = [n for d, n in enumerate(input.shape) if d not in dims]
    return C.coalesce(coo(indices, values, size))


def _softmax(input, dim, dtype, log):
    name = "log_softmax" if log else "softmax"
    if not is_sparse(input) or input.layout is not L.sparse_coo:
        backend = backend_name((input,)) if is_sparse(input) else input.device.type.upper()
        raise NotImplementedError(f"Could not run 'aten::_sparse_{name}' with arguments from "
                                  f"the '{backend}' backend.")
    if dtype is not None:
        input = input.to(dtype)
    if not input.numel():                       # (PyTorch's kernel returns before its dtypes)
        return C.coalesce(input.clone())
    if not input.is_floating_point():
        raise NotImplementedError(f'"{name}" not implemented for '
                                  f"'{input.dtype._torch_name}'")
    from ember._tensor import _wrap_dim
    dim = _wrap_dim(dim, input.ndim)
    s = input.coalesce()
    sparse_dim = s.sparse_dim()
    values = s._v
    if dim >= sparse_dim:                       # along a dense dim: an ordinary softmax
        fn = ember.log_softmax if log else ember.softmax
        return coo(s._i, fn(values, dim - sparse_dim + 1), s.shape, True)
    if s.dense_dim():
        raise NotImplementedError(f"sparse.{name}: ember supports hybrid tensors only along "
                                  f"a dense dim")
    # each slice along ``dim`` is a group; the stored values of a group share the other indices
    others = [d for d in range(sparse_dim) if d != dim]
    key = C.linear(s._i[others], [s.shape[d] for d in others])
    _, group = ember.unique(key, return_inverse=True)
    n_groups = int(group.max()) + 1 if group.numel() else 0
    top = values.new_zeros(n_groups).scatter_reduce(0, group, values.detach(), "amax",
                                                    include_self=False)
    shifted = values - top.index_select(0, group)
    exp = shifted.exp()
    total = values.new_zeros(n_groups).index_add(0, group, exp).index_select(0, group)
    out = shifted - total.log() if log else exp / total
    return coo(s._i, out, s.shape, True)


def softmax(input, dim, *, dtype=None):
    """Softmax of a sparse COO tensor along ``dim`` over its stored values (the unstored
    elements count as -inf): a sparse tensor with the same indices."""
    return named(_softmax(input, dim, dtype, False), "SparseSoftmaxBackward0")


def log_softmax(input, dim, *, dtype=None):
    """Log-softmax of a sparse COO tensor along ``dim`` (see ``softmax``)."""
    return named(_softmax(input, dim, dtype, True), "SparseLogSoftmaxBackward0")


# ----- elementwise ---------------------------------------------------------------------------

def as_coo(s):
    """A compressed tensor as a COO one; a COO tensor as it is."""
    return s if s.layout is L.sparse_coo else C.to_sparse_coo(s)


def _like_layout(result, like):
    """The COO ``result`` in the layout (and block size) of the sparse tensor ``like``."""
    if like.layout is L.sparse_coo:
        return result
    from ember.sparse._compressed import blocksize
    return C.to_compressed(result, like.layout,
                           blocksize(like) if L.blocked(like.layout) else None)


def _check_same_size(a, b, name):
    if a.shape != b.shape:
        raise RuntimeError(f"{name}: expected sizes of 'self' and 'other' to match, but "
                           f"{list(a.shape)} != {list(b.shape)}")


def _on_values(s, fn):
    return s._with_values(fn(s._v))


@handles("add")
def _add_op(input, other, *, alpha=1, out=None):
    if out is not None:
        from ember.sparse._inplace import write_out
        return write_out(out, _add_op(input, other, alpha=alpha), "add", (input, other))
    check_alpha(input, other, alpha)
    if type(alpha) is bool and isinstance(input, Tensor) and isinstance(other, Tensor) \
            and ember.promote_types(input.dtype, other.dtype) is not ember.bool:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    return named(_add(input, other, alpha=alpha), "AddBackward0")


def check_alpha(input, other, alpha):
    """PyTorch's checks of an out-of-place add's or sub's ``alpha`` against the result dtype
    (in place, ``alpha`` is converted to the dtype of ``self`` instead)."""
    if isinstance(alpha, (float, complex)) and isinstance(input, Tensor) \
            and isinstance(other, Tensor):
        dtype = ember.promote_types(input.dtype, other.dtype)
        if isinstance(alpha, float) and not (dtype.is_floating_point or dtype.is_complex):
            raise RuntimeError("For integral input tensors, argument alpha must not be a "
                               "floating point number.")
        if isinstance(alpha, complex) and not dtype.is_complex:
            raise RuntimeError("For non-complex input tensors, argument alpha must not be a "
                               "complex number.")


def refuse_bool_sub(input, other):
    """PyTorch's errors for a subtraction with a bool operand."""
    bools = [getattr(x, "dtype", None) for x in (input, other)].count(ember.bool)
    if bools == 2:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    if bools:
        raise RuntimeError(_BOOL_SUB)


def _add(input, other, *, alpha=1):
    _check_add_layouts(input, other)
    if is_sparse(input) and is_sparse(other):
        _check_same_size(input, other, "add")
        a, b = as_coo(input), as_coo(other)
        if a.sparse_dim() != b.sparse_dim():
            raise RuntimeError("add: expected the same sparse_dim for both sparse tensors")
        dtype = ember.promote_types(a.dtype, b.dtype)     # scaled in the result dtype
        if input.layout is L.sparse_coo and other.layout is L.sparse_coo:
            _refuse_cpu_kernel(a, b, dtype, alpha)
        b_values = b._v.to(dtype) * alpha if alpha != 1 else b._v
        if a._v.device.type != "cpu" or not (a._v.is_contiguous() and b._v.is_contiguous()):
            out = C.concatenated_sum(a, b, b_values)   # as on CUDA (CPU: values not contiguous)
        elif a._coalesced and b._coalesced:
            out = C.coalesce(coo(ember.cat([a._i, b._i], 1), ember.cat([a._v, b_values]),
                                 a.shape))
        else:
            out = C.merged_sum(a, b, b_values)
        out = C.keep_index_dtype(_like_layout(out, input), input)     # input's, as PyTorch's
        return carry_linear(out, alpha, input, other)
    if is_sparse(input) and input.layout in (L.sparse_csr, L.sparse_csc):   # added densely
        return _csr_plus_dense(input, other, alpha)
    if is_sparse(input) or isinstance(input, numbers.Number):    # (1 + s is s + 1)
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) "
                           "instead.")
    return _dense_plus_sparse(input, other, alpha)


def _refuse_cpu_kernel(a, b, dtype, alpha):
    """PyTorch's CPU errors for adding two COO tensors whose common ``dtype`` its kernel
    lacks (bool, float16): met only when ``b`` has values (else ``a`` is copied), and when
    ``a`` has none, as scaling ``b`` by a long ``alpha`` into bool."""
    if dtype is not ember.bool and dtype is not ember.float16 or not b._nnz() \
            or a._v.device.type != "cpu":
        return
    if a._nnz():
        raise NotImplementedError(f"\"cadd_sparse\" not implemented for '{dtype._torch_name}'")
    if dtype is ember.bool and type(alpha) is not bool:
        raise RuntimeError("result type Long can't be cast to the desired output type Bool")


def _csr_plus_dense(s, dense, alpha):
    """``s + alpha * dense`` for a CSR ``s``: a strided tensor."""
    _check_dense_size(dense, s, "op2-sparse")
    return _dense_plus_sparse(dense if alpha == 1 else dense * alpha, s, 1)


def _check_dense_size(dense, s, kind):
    shape = tuple(dense.shape) if isinstance(dense, Tensor) else ()
    if shape != tuple(s.shape):
        raise RuntimeError(f"add: expected 'self' and 'other' to have same size, but self has "
                           f"size {list(shape)} while other has size {list(s.shape)} (FYI: "
                           f"{kind} addition does not currently support broadcasting)")


def _dense_plus_sparse(dense, s, alpha):
    _check_dense_size(dense, s, "dense-sparse")
    C.refuse_mixed_index_dtypes(s)
    route = dense_route(s)      # PyTorch's add gives the sparse operand a dense gradient
    c = as_coo(s if route is None else s.detach())
    dtype = ember.promote_types(dense.dtype, c.dtype)
    values = (c._v if alpha == 1 else c._v * alpha).to(dtype)
    out = dense.to(dtype).index_put(tuple(c._i), values, accumulate=True)
    if route is None:
        return out
    return out + (route if alpha == 1 else route * alpha)


@handles("sub")
def _sub(input, other, *, alpha=1, out=None):
    if out is not None:
        from ember.sparse._inplace import write_out
        return write_out(out, _sub(input, other, alpha=alpha), "sub", (input, other))
    _refuse_compressed(input, other)
    refuse_bool_sub(input, other)
    check_alpha(input, other, alpha)
    if not is_sparse(input) and not isinstance(input, Tensor):     # 1 - s
        return named(_dense_plus_sparse(input, other, -alpha), "SubBackward0")
    return named(_add(input, other, alpha=-alpha), "SubBackward0")


@handles("mul")
def _mul(input, other):
    from ember.func._batched import BatchedTensor
    if type(other) is BatchedTensor or type(input) is BatchedTensor:
        return NotImplemented       # vmap's rule batches it (ember/func/_batching/elementwise.py)
    if is_scalar(other):
        return carry_linear(_on_values(input, lambda v: v * other), other, input)
    if is_scalar(input):
        return carry_linear(_on_values(other, lambda v: input * v), input, other)
    _check_mul_layouts(input, other)
    if is_sparse(input) and is_sparse(other):
        _check_same_size(input, other, "mul")
        a, b = as_coo(input), as_coo(other)
        product = _intersect(a.coalesce(), b.coalesce())
        if _is_compressed(input):
            return C.to_sparse_csr(product)
        product._coalesced = a._coalesced and b._coalesced     # (as PyTorch marks it)
        return product
    s, dense = (input, other) if is_sparse(input) else (other, input)
    c = as_coo(s)
    sparse_dim = c.sparse_dim()
    picked = dense.expand(s.shape)[tuple(c._i)] if sparse_dim else dense.expand(s.shape)[None]
    out = _like_layout(c._with_values(c._v * picked), s)
    if dense.requires_grad or out.shape != s.shape:
        return out
    # a product's dense gradient goes back times ``dense``, dense, as PyTorch's mul passes it
    return carry_view(out, s, lambda o: o * dense)


def _intersect(a, b):
    """``a * b`` for coalesced COO tensors: the product at the indices both store."""
    sizes = tuple(a.shape[:a.sparse_dim()])
    ka, kb = C.linear(a._i, sizes), C.linear(b._i, sizes)
    if not kb.numel() or not ka.numel():
        return coo(a._i[:, :0], (a._v[:0] * b._v[:0]), a.shape, True)
    at = ember.searchsorted(kb, ka).clamp(max=kb.numel() - 1)
    keep = (kb.index_select(0, at) == ka).nonzero().reshape(-1)
    values = a._v.index_select(0, keep) * b._v.index_select(0, at.index_select(0, keep))
    return coo(a._i.index_select(1, keep), values, a.shape, True)


@handles("div")
def _div(input, other, *, rounding_mode=None):
    _refuse_compressed(input, other)
    if not is_sparse(input) or not is_scalar(other):
        shape = list(other.shape) if isinstance(other, Tensor) else []
        raise RuntimeError(f"Sparse division requires a scalar or zero-dim dense tensor "
                           f"divisor (got shape {shape} for divisor)")
    if rounding_mode is not None and input.layout is L.sparse_coo:
        input = input.coalesce()                # (rounding is not linear)
    result = _on_values(input, lambda v: ember.div(v, other, rounding_mode=rounding_mode))
    if rounding_mode is not None or not isinstance(other, numbers.Number) or not other:
        return result
    return carry_linear(result, 1 / other, input)


@handles("floor_divide")
def _floor_divide(input, other):
    if _is_compressed(input):
        raise NotImplementedError(f"Could not run 'aten::floor_divide' with arguments from the "
                                  f"'{backend_name((input,))}' backend.")
    if not is_sparse(input) or not is_scalar(other):
        shape = list(other.shape) if isinstance(other, Tensor) else []
        raise RuntimeError(f"Sparse floor division requires a scalar or zero-dim dense tensor "
                           f"divisor (got shape {shape} for divisor)")
    input = input.coalesce() if input.layout is L.sparse_coo else input   # floor is not linear
    return _on_values(input, lambda v: ember.floor_divide(v, other))


@handles("pow")
def _pow(input, exponent):
    _refuse_compressed(input, exponent)
    if not is_sparse(input) or not is_scalar(exponent):
        raise RuntimeError("pow: ember raises only a sparse tensor to a scalar power")
    if exponent == 0:
        raise RuntimeError("pow: cannot raise to zeroth power on sparse tensor; it would make "
                           "the result tensor dense")
    input = input.coalesce() if input.layout is L.sparse_coo else input
    return _on_values(input, lambda v: v ** exponent)


# ops that map zero to zero apply to the stored values alone
_ZERO_PRESERVING = ("abs", "neg", "negative", "positive", "sin", "sinh", "tan", "tanh",
                    "asin", "asinh", "atan", "atanh", "sqrt", "expm1", "log1p", "erf",
                    "erfinv", "relu", "sign", "sgn", "trunc", "floor", "ceil", "round",
                    "frac", "square", "deg2rad", "rad2deg", "conj_physical", "isnan",
                    "isinf", "signbit", "nan_to_num", "clone")


_LINEAR = frozenset(("neg", "negative", "positive", "deg2rad", "rad2deg", "conj_physical",
                     "clone"))


def _values_op(name):
    def run(input, *args, **kwargs):
        if name in _COO_ONLY and input.layout is not L.sparse_coo:
            _refuse_values_op(name, input)
        if name == "clone":
            kwargs.pop("memory_format", None)
        if name not in _LINEAR and input.layout is L.sparse_coo:
            input = input.coalesce()            # f(a + b) is not f(a) + f(b)
        result = _on_values(input, lambda v: getattr(ember, name)(v, *args, **kwargs))
        return carry_linear(result, _SCALES[name], input) if name in _SCALES else result
    return run


# the linear ops' factors, by which a product's dense gradient goes back (NOTE [Dense origins])
_SCALES = {"neg": -1, "negative": -1, "positive": 1, "clone": 1, "deg2rad": math.pi / 180,
           "rad2deg": 180 / math.pi}


for _name in _ZERO_PRESERVING:
    HANDLERS[_name] = _values_op(_name)
ANY_LAYOUT.update(_ZERO_PRESERVING)
BATCHED.update(_ZERO_PRESERVING, ("sum",))


@handles("conj")
def _conj(input):
    return _on_values(input, ember.conj_physical) if input.is_complex() else input


@handles("angle")
def _angle(input):
    if input.layout is L.sparse_coo:
        raise NotImplementedError("Could not run 'aten::angle' with arguments from the "
                                  "'SparseCPU' backend.")
    return _on_values(input, ember.angle)


ANY_LAYOUT.update(("conj", "angle", "pow", "floor_divide"))


@handles("_to_copy")
def _to_copy(input, dtype=None, device=None, non_blocking=False):
    return input.to(dtype=dtype, device=device)


@handles("to_dense")
def _to_dense(input, *args, **kwargs):
    return input.to_dense(*args, **kwargs)


# ----- factories ---------------------------------------------------------------------------

@handles("empty_like")
def _empty_like(input, *, layout=None, **kwargs):
    """As ``zeros_like``, but a compressed ``input`` only into its own layout (PyTorch)."""
    if layout is not None and layout is not input.layout and input.layout is not L.sparse_coo:
        raise RuntimeError(f"empty_like with different sparse layout is not supported (self is "
                           f"{L.short_name(input.layout)} but you requested "
                           f"{L.short_name(layout)})")
    return _zeros_like(input, layout=layout, **kwargs)


@handles("zeros_like")
def _zeros_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
                memory_format=None, pin_memory=False):
    """A sparse tensor shaped like ``input`` that stores nothing (a strided zeros tensor for
    a COO ``input`` and ``layout=ember.strided``)."""
    dtype = input.dtype if dtype is None else dtype
    device = input.device if device is None else device
    if layout is ember.strided and input.layout is not L.sparse_coo:
        raise RuntimeError(f"empty_like with different sparse layout is not supported (self is "
                           f"{L.short_name(input.layout)} but you requested Strided)")
    if layout is ember.strided:
        return ember.zeros(input.shape, dtype=dtype, device=device, requires_grad=requires_grad)
    layout = input.layout if layout is None else layout
    if L.blocked(layout) and layout is not input.layout:
        raise RuntimeError(f"zeros_like: ember makes a {layout} tensor only like another one "
                           f"(it takes the block size from it)")
    if layout is L.sparse_coo:
        sparse_dim = input.sparse_dim() if layout is input.layout else 2
        values = ember.zeros((0,) + tuple(input.shape[sparse_dim:]), dtype=dtype,
                             device=device)
        indices = ember.zeros((sparse_dim, 0), dtype=ember.int64, device=device)
        out = coo(indices, values, input.shape, True)
    else:
        out = _empty_compressed(layout, input, dtype, device)
    return out._set_requires_grad() if requires_grad else out


def _empty_compressed(layout, like, dtype, device):
    """A compressed tensor of ``like``'s shape (and blocks) that stores nothing."""
    from ember.sparse._compressed import blocksize
    block = blocksize(like) if L.blocked(layout) else (1, 1)
    d = 0 if L.row_compressed(layout) else 1
    index_dtype = ember.int64 if like._crow is None else like._crow.dtype
    pointers = ember.zeros(like.shape[d] // block[d] + 1, dtype=index_dtype, device=device)
    values = ember.zeros((0,) + (block if L.blocked(layout) else ()), dtype=dtype,
                         device=device)
    return compressed(layout, pointers, pointers[:0], values, like.shape)
