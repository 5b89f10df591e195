"""Sparse tensors' shape ops, sums, softmax, elementwise arithmetic and in-place ops, run on
the parts with ember ops (so they work on every device and are differentiable in the values)."""

import numbers

import ember
from ember._tensor import Tensor
from ember.sparse import _convert as C
from ember.sparse import _layouts as L
from ember.sparse._dispatch import (ANY_LAYOUT, BATCHED, HANDLERS, backend_name, handles,
                                    is_scalar, is_sparse)
from ember.sparse._tensor import compressed, coo

__all__ = ["sum", "softmax", "log_softmax", "select", "transpose", "as_coo", "index_select",
           "narrow_copy"]


@handles("reshape")
def _reshape(input, *args, **kwargs):
    raise RuntimeError("reshape is not implemented for sparse tensors")


@handles("select")
def select(input, dim, index):
    """``input.select(dim, index)`` of a COO tensor: a sparse tensor one dim smaller (dense
    when no sparse dim is left)."""
    from ember._tensor import _wrap_dim
    dim = _wrap_dim(dim, input.ndim)
    # PyTorch selects from a blocked tensor only a column of a BSC one
    if L.blocked(input.layout) and not (input.layout is L.sparse_bsc and dim == 1):
        raise RuntimeError("select(): no view exists for the given input, consider using "
                           "ember.select_copy.")
    c = as_coo(input)
    size = c.shape[dim]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(c.shape)} at dimension {dim}")
    index %= size
    sparse_dim = c.sparse_dim()
    rest = list(c.shape[:dim]) + list(c.shape[dim + 1:])
    if dim >= sparse_dim:
        return coo(c._i, c._v.select(dim - sparse_dim + 1, index), rest, c._coalesced)
    keep = (c._i[dim] == index).nonzero().reshape(-1)
    others = [d for d in range(sparse_dim) if d != dim]
    values = c._v.index_select(0, keep)
    if not others:
        return values.sum(0)
    indices = c._i[others].index_select(1, keep)
    return coo(indices, values, rest, c._coalesced)


# ----- shape ---------------------------------------------------------------------------------

@handles("transpose")
def transpose(input, dim0, dim1):
    """``input.transpose(dim0, dim1)`` of a sparse tensor (its dense origin transposed too)."""
    from ember.sparse._origin import carry_view
    return carry_view(_transpose(input, dim0, dim1), input, lambda o: o.transpose(dim0, dim1))


def _transpose(input, dim0, dim1):
    from ember._tensor import _wrap_dim
    ndim = input.ndim
    d0, d1 = _wrap_dim(dim0, ndim), _wrap_dim(dim1, ndim)
    if input.layout is not L.sparse_coo:
        return input if d0 == d1 else _flip_compressed(input)
    sparse_dim = input.sparse_dim()
    if (d0 < sparse_dim) != (d1 < sparse_dim):
        raise RuntimeError(f"transpose(): can't transpose a sparse dimension with a dense "
                           f"one (dims {dim0} and {dim1})")
    size = list(input.shape)
    size[d0], size[d1] = size[d1], size[d0]
    if d0 >= sparse_dim:
        return coo(input._i, input._v.transpose(d0 - sparse_dim + 1, d1 - sparse_dim + 1),
                   size, input._coalesced)
    order = list(range(sparse_dim))
    order[d0], order[d1] = order[d1], order[d0]
    indices = input._i.index_select(0, ember.tensor(order, device=input.device))
    return coo(indices, input._v, size, input._coalesced and d0 == d1)


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
    return input if input.ndim < 2 else transpose(input, 0, 1)


def _coo_only(input, name):
    if input.layout is not L.sparse_coo:
        raise NotImplementedError(f"Could not run 'aten::{name}' with arguments from the "
                                  f"'{backend_name((input,))}' backend.")


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
    turn, the stored elements in that slice (in their stored order)."""
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


def narrow_copy(input, dim, start, length):
    """``input.narrow_copy(dim, start, length)`` of a COO tensor: the stored elements in the
    range, shifted to start at 0 (in their stored order)."""
    from ember._tensor import _wrap_dim
    if input.layout is not L.sparse_coo:
        input.stride()                          # raises PyTorch's error
    dim = _wrap_dim(dim, input.ndim)
    size = input.shape[dim]
    start = start + size if start < 0 else start
    if not (0 <= start and 0 <= length and start + length <= size):
        raise RuntimeError(f"Invalid range to narrow. range(start, start+length) must be a "
                           f"subset of range(0, {size}).")
    new_size = list(input.shape)
    new_size[dim] = length
    sparse_dim = input.sparse_dim()
    if dim >= sparse_dim:
        values = input._v.narrow(dim - sparse_dim + 1, start, length).clone()
        return coo(input._i, values, new_size, input._coalesced)
    column = input._i[dim]
    keep = ((column >= start) & (column < start + length)).nonzero().reshape(-1)
    indices = input._i.index_select(1, keep)
    indices[dim] -= start
    out = coo(indices, input._v.index_select(0, keep), new_size)
    out._coalesced = input._coalesced          # kept as it was, even with one element left
    return out


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
        return _sum_dtype(input._v, dtype).sum()
    if input._batch_ndim():
        raise NotImplementedError("sum: ember sums a batched compressed tensor only whole")
    if input.layout not in (L.sparse_coo, L.sparse_csr):
        raise RuntimeError(f"Currently the only compressed sparse format supported for "
                           f"sum.dim_IntList is CSR, but got layout "
                           f"{L.short_name(input.layout)}")
    if input.layout is L.sparse_csr and not keepdim:
        raise RuntimeError("reduction operations on CSR tensors with keepdim=False is "
                           "unsupported")
    out = sum(as_coo(input), dim, dtype)
    if not keepdim:
        return out
    for d in _summed_dims(dim, input.ndim):     # put back each summed dim, with size 1
        out = _unsqueeze(out, d) if is_sparse(out) else out.unsqueeze(d)
    return C.to_sparse_csr(out) if input.layout is L.sparse_csr else out


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
    if is_sparse(input) and input.layout is not L.sparse_coo:
        raise RuntimeError(f"coalesce expected sparse coordinate tensor layout but got "
                           f"{L.short_name(input.layout)}")
    if not is_sparse(input):
        raise RuntimeError("coalesce expected sparse coordinate tensor layout but got Strided")
    values = _sum_dtype(input._v, dtype)
    if dim is None:
        return values.sum()
    dims = _summed_dims(dim, input.ndim)
    sparse_dim = input.sparse_dim()
    dense = [d - sparse_dim + 1 for d in dims if d >= sparse_dim]
    if dense:
        values = values.sum(dense)
    kept = [d for d in range(sparse_dim) if d not in dims]
    if len(kept) == sparse_dim:
        return coo(input._i, values, [n for d, n in enumerate(input.shape) if d not in dims],
                   input._coalesced)
    if not kept:
        return values.sum(0)
    indices = input._i.index_select(0, ember.tensor(kept, device=input.device))
    size = [n for d, n in enumerate(input.shape) if d not in dims]
    return C.coalesce(coo(indices, values, size))


def _softmax(input, dim, dtype, log):
    name = "log_softmax" if log else "softmax"
    if not is_sparse(input):
        raise RuntimeError(f"sparse.{name}(): expected a sparse COO tensor, but got a strided "
                           f"one")
    if input.layout is not L.sparse_coo:
        raise NotImplementedError(f"Could not run 'aten::_sparse_{name}' with arguments from "
                                  f"the '{backend_name((input,))}' backend.")
    if dtype is not None:
        input = input.to(dtype)
    if not (input.is_floating_point() or input.is_complex()):
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
    return _softmax(input, dim, dtype, False)


def log_softmax(input, dim, *, dtype=None):
    """Log-softmax of a sparse COO tensor along ``dim`` (see ``softmax``)."""
    return _softmax(input, dim, dtype, True)


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


def _is_compressed(x):
    return is_sparse(x) and x.layout is not L.sparse_coo


def _refuse_compressed(*operands):
    """PyTorch's error for an op that has no kernel for compressed layouts (pow, sub, div,
    the comparisons...), naming the first compressed operand's layout."""
    for x in operands:
        if _is_compressed(x):
            raise RuntimeError(f"unsupported tensor layout: {L.short_name(x.layout)}")


@handles("add")
def _add(input, other, *, alpha=1):
    _check_add_layouts(input, other)
    if is_sparse(input) and is_sparse(other):
        _check_same_size(input, other, "add")
        a, b = as_coo(input), as_coo(other)
        if a.sparse_dim() != b.sparse_dim():
            raise RuntimeError("add: expected the same sparse_dim for both sparse tensors")
        scale = alpha
        values = ember.cat([a._v, b._v * scale if scale != 1 else b._v])
        out = coo(ember.cat([a._i, b._i], 1), values, a.shape)
        if a._coalesced and b._coalesced:
            out = C.coalesce(out)
        return _like_layout(out, input)
    if is_sparse(input) and input.layout in (L.sparse_csr, L.sparse_csc):   # added densely
        return _csr_plus_dense(input, other, alpha)
    if is_sparse(input) or isinstance(input, numbers.Number):    # (1 + s is s + 1)
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) "
                           "instead.")
    return _dense_plus_sparse(input, other, alpha)


def _check_add_layouts(input, other):
    """PyTorch adds two compressed tensors only when both are CSR (or a tensor to itself),
    and only CSR and CSC ones to strided tensors."""
    compressed = [x for x in (input, other) if _is_compressed(x)]
    if not compressed:
        return
    if is_sparse(input) and is_sparse(other):
        # PyTorch adds two compressed tensors only as CSR ones (or a tensor to itself)
        if input is other or input.layout is other.layout is L.sparse_csr:
            return
        if input.layout is L.sparse_coo:
            raise RuntimeError("memory format option is only supported by strided tensors")
        columns = [x for x in (other, input) if x.layout in (L.sparse_csc, L.sparse_bsc)]
        if columns:
            raise RuntimeError(f"crow_indices expected sparse row compressed tensor layout "
                               f"but got {L.short_name(columns[0].layout)}")
        raise RuntimeError(f"add: PyTorch has no kernel adding {L.short_name(input.layout)} "
                           f"and {L.short_name(other.layout)} tensors")
    kind = L.short_name(compressed[0].layout)
    if L.blocked(compressed[0].layout):
        raise RuntimeError(f"add: PyTorch has no kernel adding a {kind} tensor and a strided "
                           f"one (only SparseCsr and SparseCsc)")


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
    c = as_coo(s)
    dtype = ember.promote_types(dense.dtype, c.dtype)
    values = (c._v if alpha == 1 else c._v * alpha).to(dtype)
    return dense.to(dtype).index_put(tuple(c._i), values, accumulate=True)


@handles("sub")
def _sub(input, other, *, alpha=1):
    _refuse_compressed(input, other)
    if not is_sparse(input) and not isinstance(input, Tensor):     # 1 - s
        return _dense_plus_sparse(input, other, -alpha)
    return _add(input, other, alpha=-alpha)


@handles("mul")
def _mul(input, other):
    if is_scalar(other):
        return _on_values(input, lambda v: v * other)
    if is_scalar(input):
        return _on_values(other, lambda v: input * v)
    _check_mul_layouts(input, other)
    if is_sparse(input) and is_sparse(other):
        _check_same_size(input, other, "mul")
        product = _intersect(as_coo(input).coalesce(), as_coo(other).coalesce())
        return C.to_sparse_csr(product) if _is_compressed(input) else product
    s, dense = (input, other) if is_sparse(input) else (other, input)
    c = as_coo(s)
    sparse_dim = c.sparse_dim()
    picked = dense.expand(s.shape)[tuple(c._i)] if sparse_dim else dense.expand(s.shape)[None]
    return _like_layout(c._with_values(c._v * picked), s)


def _check_mul_layouts(input, other):
    """PyTorch multiplies a compressed tensor by a tensor (not a scalar) only into a CSR
    result: a CSR ``input`` by a tensor of any layout, or a strided ``input`` by a CSR
    ``other``."""
    if not (_is_compressed(input) or _is_compressed(other)):
        return
    if _is_compressed(input) and L.blocked(input.layout):
        raise RuntimeError(f"empty_sparse_compressed expected sparse compressed (non-block) "
                           f"tensor layout but got {L.short_name(input.layout)}")
    if is_sparse(input):
        s, rest = input, other
        fine = input.layout is L.sparse_csr         # times any sparse or dense other
    else:
        s, rest = other, input
        fine = other.layout is L.sparse_csr
    if not fine:
        raise RuntimeError("Expected result Tensor to be of format CSR")
    if not is_sparse(rest) and tuple(rest.shape) != tuple(s.shape):
        raise RuntimeError(f"sparse_mask(): operands have incompatible sizes; self has size "
                           f"{list(rest.shape)} but mask has size {list(s.shape)}")


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
    return _on_values(input, lambda v: ember.div(v, other, rounding_mode=rounding_mode))


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


@handles("floor_divide_")
def _floor_divide_(self, other):
    return _replace(self, _floor_divide(self, other))


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


# of those, the ones PyTorch computes on COO tensors only
_COO_ONLY = {"square": RuntimeError, "nan_to_num": NotImplementedError}


def _values_op(name):
    def run(input, *args, **kwargs):
        if name in _COO_ONLY and input.layout is not L.sparse_coo:
            _refuse_values_op(name, input)
        if name == "clone":
            kwargs.pop("memory_format", None)
        if name not in _LINEAR and input.layout is L.sparse_coo:
            input = input.coalesce()            # f(a + b) is not f(a) + f(b)
        return _on_values(input, lambda v: getattr(ember, name)(v, *args, **kwargs))
    return run


def _refuse_values_op(name, input):
    if _COO_ONLY[name] is RuntimeError:
        _refuse_compressed(input)
    raise NotImplementedError(f"Could not run 'aten::{name}.out' with arguments from the "
                              f"'{backend_name((input,))}' backend.")


def _in_place(name):
    def run(self, *args, **kwargs):
        new = HANDLERS[name](self, *args, **kwargs)
        if new.dtype != self.dtype:
            if not ember.can_cast(new.dtype, self.dtype):
                raise RuntimeError(f"result type {new.dtype._torch_name} can't be cast to "
                                   f"the desired output type {self.dtype._torch_name}")
            new = new.to(self.dtype)
        return _replace(self, new)
    return run


for _name in _ZERO_PRESERVING:
    HANDLERS[_name] = _values_op(_name)
ANY_LAYOUT.update(_ZERO_PRESERVING)
# their in-place forms (those that have one) give the tensor the new values
_IN_PLACE = [n + "_" for n in _ZERO_PRESERVING
             if n not in ("positive", "isnan", "isinf", "signbit", "clone")]
for _name in _IN_PLACE:
    HANDLERS[_name] = _in_place(_name[:-1])
ANY_LAYOUT.update(_IN_PLACE)
BATCHED.update(_ZERO_PRESERVING, _IN_PLACE, ("sum",))


@handles("conj")
def _conj(input):
    return _on_values(input, ember.conj_physical) if input.is_complex() else input


@handles("angle")
def _angle(input):
    if input.layout is L.sparse_coo:
        raise NotImplementedError("Could not run 'aten::angle' with arguments from the "
                                  "'SparseCPU' backend.")
    return _on_values(input, ember.angle)


ANY_LAYOUT.update(("conj", "angle", "copy_", "pow", "floor_divide"))


# ----- in place (what optimizers and ``zero_()`` use) ----------------------------------------

def _replace(self, new):
    """Give ``self`` the parts of ``new`` (in-place ops on sparse tensors); returns self."""
    if new.layout is not self.layout:
        raise RuntimeError(f"in-place operation on a {self.layout} tensor gave a {new.layout} "
                           f"result")
    values = new._v
    if self._leaf:
        if ember.is_grad_enabled():
            raise RuntimeError("a leaf Variable that requires grad is being used in an "
                               "in-place operation.")
        values = values.detach().requires_grad_()
    self._v = values
    self._i, self._crow, self._col = new._i, new._crow, new._col
    self._coalesced = new._coalesced
    self._pattern = new._pattern
    self._origin = None             # (the values changed: see NOTE [Dense origins])
    if new._size != self._size:     # copy_ resizes a COO tensor, as PyTorch's does
        self._size, self._anchor = new._size, None
    return self


@handles("mul_")
def _mul_(self, other):
    if is_sparse(self) and is_scalar(other):
        self._v.mul_(other)                     # the values in place: autograd as for them
        return self
    if not is_sparse(self):
        raise RuntimeError("mul_: ember cannot multiply a strided tensor by a sparse one in "
                           "place")
    return _replace(self, _mul(self, other))


@handles("div_")
def _div_(self, other, *, rounding_mode=None):
    if not is_sparse(self) or not is_scalar(other):
        _div(self, other)                       # raises PyTorch's error
    self._v.div_(other, rounding_mode=rounding_mode)
    return self


@handles("add_")
def _add_(self, other, *, alpha=1):
    if not is_sparse(self):                       # dense += sparse: scatter the values in
        _check_add_layouts(self, other)
        c = as_coo(other)
        if tuple(self.shape) != tuple(c.shape):
            raise RuntimeError(f"add: expected 'self' and 'other' to have same size, but "
                               f"self has size {list(self.shape)} while other has size "
                               f"{list(c.shape)} (FYI: dense-sparse addition does not "
                               f"currently support broadcasting)")
        values = c._v if alpha == 1 else c._v * alpha
        return self.index_put_(tuple(c._i), values.to(self.dtype), accumulate=True)
    if not is_sparse(other):
        raise RuntimeError("add_: ember adds only a sparse tensor into a sparse one in place")
    return _replace(self, _add(self, other, alpha=alpha))


@handles("fill_")
def _fill_(self, value):
    if value != 0 and self._layout is not L.sparse_coo:
        # a compressed tensor fills its stored values (whole blocks), as in PyTorch
        return _replace(self, self._with_values(ember.full_like(self._v, value)))
    if value != 0:
        raise RuntimeError("fill_: a sparse tensor can be filled only with zero (zero_())")
    values = self._v.new_zeros((0,) + tuple(self._v.shape[1:]))
    if self._layout is L.sparse_coo:
        empty = coo(self._i[:, :0], values, self._size, True)
    else:
        empty = compressed(self._layout, ember.zeros_like(self._crow), self._col[:0], values,
                           self._size)
    return _replace(self, empty)


@handles("copy_")
def _copy_(self, src, non_blocking=False):
    """``self.copy_(src)`` between sparse tensors of one layout: ``self`` takes ``src``'s
    indices and values (in its own dtype)."""
    if not is_sparse(self) or (self.layout is L.sparse_coo and not is_sparse(src)):
        raise RuntimeError("copy_() between dense and sparse Tensors is not implemented!")
    _check_copy_layouts(self, src)
    values = src._v.to(self.dtype).clone()
    if src.layout is L.sparse_coo:
        return _replace(self, coo(src._i.clone(), values, src.shape, src._coalesced))
    return _replace(self, compressed(src.layout, src._crow.clone(), src._col.clone(), values,
                                     src.shape))


def _check_copy_layouts(self, src):
    if self.layout is L.sparse_coo:
        if src.layout is not L.sparse_coo:
            raise RuntimeError(f"copy_: ember copies into a COO tensor only from a COO one, "
                               f"not {L.short_name(src.layout)}")
        return
    if is_sparse(src) and src.layout is L.sparse_coo:
        raise RuntimeError("copy_sparse_compressed_ expected sparse compressed tensor layout "
                           "but got Sparse")
    if not is_sparse(src) or src.layout is not self.layout:
        other = L.short_name(src.layout) if is_sparse(src) else "Strided"
        raise RuntimeError(f"torch.copy_: copy of sparse compressed tensors having different "
                           f"layouts is not supported. self layout is "
                           f"{L.short_name(self.layout)} and src layout is {other}")
    for dim, (mine, theirs) in enumerate(zip(self.shape, src.shape)):
        if mine != theirs:
            raise RuntimeError(f"torch.copy_: expected shapes of self and src to match along "
                               f"dimension {dim} for {L.short_name(self.layout)} layout but "
                               f"the corresponding dimensions of self and src are {mine} and "
                               f"{theirs}, respectively.")
    if src._nnz() != self._nnz():
        raise RuntimeError("torch.copy_: only sparse compressed tensors with the same number "
                           "of specified elements are supported.")


@handles("_to_copy")
def _to_copy(input, dtype=None, device=None, non_blocking=False):
    return input.to(dtype=dtype, device=device)


@handles("to_dense")
def _to_dense(input, *args, **kwargs):
    return input.to_dense(*args, **kwargs)


# ----- factories ---------------------------------------------------------------------------

@handles("zeros_like", "empty_like")
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
    return out.requires_grad_() if requires_grad else out


def _empty_compressed(layout, like, dtype, device):
    """A compressed tensor of ``like``'s shape (and blocks) that stores nothing."""
    from ember.sparse._compressed import blocksize
    block = blocksize(like) if L.blocked(layout) else (1, 1)
    d = 0 if L.row_compressed(layout) else 1
    pointers = ember.zeros(like.shape[d] // block[d] + 1, dtype=ember.int64, device=device)
    values = ember.zeros((0,) + (block if L.blocked(layout) else ()), dtype=dtype,
                         device=device)
    return compressed(layout, pointers, pointers[:0], values, like.shape)
