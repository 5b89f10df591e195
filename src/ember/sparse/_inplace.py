"""Sparse tensors' in-place ops (what optimizers and ``zero_()`` use): each computes its
result with the out-of-place handler of _ops.py and gives ``self`` the result's parts
(_replace); a scalar ``div_`` (and a compressed tensor's scalar ``mul_``) scales the stored
values in place, as PyTorch's."""

import math

import ember
from ember._tensor import Tensor
from ember.sparse import _layouts as L
from ember.sparse._dispatch import (ANY_LAYOUT, BATCHED, HANDLERS, backend_name, handles,
                                    is_scalar, is_sparse)
from ember.sparse._layout_policy import _check_add_layouts, _check_copy_layouts
from ember.sparse._names import named
from ember.sparse._ops import (_ZERO_PRESERVING, _add, _div, _floor_divide, _mul, as_coo,
                               refuse_bool_sub)
from ember.sparse._tensor import compressed, coo
from ember.sparse._versions import hand_over


def _in_place(name):
    def run(self, *args, **kwargs):
        if self._layout is L.sparse_coo:
            if name == "square":                # (PyTorch's runs pow_, which COO lacks)
                raise NotImplementedError(f"Could not run 'aten::pow_.Scalar' with arguments "
                                          f"from the '{backend_name((self,))}' backend.")
            if not self._coalesced and name not in _ANY_PATTERN:
                raise RuntimeError(f"{name}_ requires coalesced input")
        new = HANDLERS[name](self, *args, **kwargs)
        if new.dtype != self.dtype:
            if self.dtype.is_complex and not new.dtype.is_complex:    # (abs_, as PyTorch's)
                raise RuntimeError(f"In-place {name} is not supported for complex tensors.")
            if not ember.can_cast(new.dtype, self.dtype):
                raise RuntimeError(f"result type {new.dtype._torch_name} can't be cast to "
                                   f"the desired output type {self.dtype._torch_name}")
            new = new.to(self.dtype)
        old = self._v
        _replace(self, new)
        _write_through(old, self._v)
        return self
    return run


# PyTorch's unary in-place ops refuse an uncoalesced COO tensor, but for these linear ones
_ANY_PATTERN = frozenset(("neg", "negative", "conj_physical"))


def _write_through(old, values):
    """``values`` (a unary in-place op's new values) given the memory of ``old``, the values
    the tensor had: PyTorch's op writes them in place, so the tensor the user gave
    ``sparse_coo_tensor`` (or a ``values()`` taken before) sees the change."""
    data = old._data
    if values.shape != old.shape or values._data.dtype != data.dtype \
            or values.device != old.device or old.device.type == "meta":
        return
    try:
        data[...] = values._data
    except ValueError:                          # read-only memory (a broadcast view)
        return
    values._data = data


# their in-place forms (those that have one) give the tensor the new values
_IN_PLACE = [n + "_" for n in _ZERO_PRESERVING
             if n not in ("positive", "isnan", "isinf", "signbit", "clone")]
for _name in _IN_PLACE:
    HANDLERS[_name] = _in_place(_name[:-1])
ANY_LAYOUT.update(_IN_PLACE)

@handles("floor_divide_")
def _floor_divide_(self, other):
    return _replace(self, _floor_divide(self, other))


def _replace(self, new):
    """Give ``self`` the parts of ``new`` (in-place ops on sparse tensors); returns self."""
    if new.layout is not self.layout:
        raise RuntimeError(f"in-place operation on a {self.layout} tensor gave a {new.layout} "
                           f"result")
    values, old = new._v, self._v
    old_dtypes = None if self._crow is None else (self._crow.dtype, self._col.dtype)
    if self._leaf:
        if ember.is_grad_enabled():
            raise RuntimeError("a leaf Variable that requires grad is being used in an "
                               "in-place operation.")
        from ember.sparse._leaf_grads import keep_grad, move_hooks
        keep_grad(self)             # (its gradient and hooks stay, as PyTorch's)
        values = values.detach()._set_requires_grad()
        move_hooks(old, values)
    self._v = values
    self._i, self._crow, self._col = new._i, new._crow, new._col
    if self._crow is not None and old_dtypes is not None:
        # each index part keeps its dtype (mixed int32/int64 ones too), as PyTorch's
        self._crow, self._col = (part if part.dtype is dtype else part.to(dtype) for part, dtype
                                 in zip((self._crow, self._col), old_dtypes))
    self._coalesced = new._coalesced
    self._pattern = new._pattern
    self._origin = None             # (the values changed: see NOTE [Dense origins])
    if new._size != self._size:     # copy_ resizes a COO tensor, as PyTorch's does
        self._size, self._anchor = new._size, None
    hand_over(self, old)
    return self


def write_out(out, result, name, inputs):
    """``result`` (sparse or strided) of the sparse handler of ``name`` written into ``out``,
    with PyTorch's checks of an ``out=`` (autograd, layout, dtype); returns ``out``."""
    if ember.is_grad_enabled() and any(isinstance(t, Tensor) and t.requires_grad
                                       for t in (*inputs, out)):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support "
                           f"automatic differentiation, but one of the arguments requires grad.")
    if is_sparse(result) != is_sparse(out):     # (PyTorch's kernels' own checks)
        raise RuntimeError("Expected !r.is_sparse() to be true, but got false.  (Could this "
                           "error message be improved?  If so, please report an enhancement "
                           "request to PyTorch.)" if is_sparse(out) else
                           "self.is_sparse() INTERNAL ASSERT FAILED: "
                           "_internal_get_SparseTensorImpl: not a sparse tensor")
    if result.dtype is not out.dtype:
        if not ember.can_cast(result.dtype, out.dtype):
            raise RuntimeError(f"Can't convert result type {result.dtype._torch_name} to "
                               f"output {out.dtype._torch_name} in {name} operation")
        result = result.to(out.dtype)
    if is_sparse(out):
        return _replace(out, result)
    if out.shape != result.shape:
        out.resize_(result.shape)
    return out.copy_(result)


@handles("mul_")
def _mul_(self, other):
    if not is_sparse(self):
        raise RuntimeError("mul_: ember cannot multiply a strided tensor by a sparse one in "
                           "place")
    if not is_scalar(other):
        new = _mul(self, other)
        if not is_sparse(other) and new._layout is L.sparse_coo:
            new._coalesced = False              # PyTorch's marks it uncoalesced
        return _replace(self, new)
    if self._layout is not L.sparse_coo:
        self._v.mul_(other)                     # the values in place: autograd as for them
        return self
    values = self._v * other    # a COO tensor takes new values (the given ones kept), as PyTorch's
    if values.dtype is not self.dtype:
        raise RuntimeError(f"dtype of values ({values.dtype._torch_name}) must match dtype of "
                           f"sparse tensor ({self.dtype._torch_name})")
    new = self._with_values(values)
    new._coalesced = False                      # PyTorch's marks it uncoalesced
    return _replace(self, new)


@handles("div_")
def _div_(self, other, *, rounding_mode=None):
    if not is_sparse(self) or not is_scalar(other) or self._layout is not L.sparse_coo:
        _div(self, other)                       # raises PyTorch's error
    self._v.div_(other, rounding_mode=rounding_mode)
    return self


@handles("add_")
def _add_(self, other, *, alpha=1):
    return _add_into(self, other, alpha, "AddBackward0")


@handles("sub_")
def _sub_(self, other, *, alpha=1):
    """``self -= alpha * other``: add_ of the negated term, on COO (and strided) tensors only."""
    first = next(x for x in (self, other) if is_sparse(x))
    if any(is_sparse(x) and x.layout is not L.sparse_coo for x in (self, other)):
        raise RuntimeError(f"unsupported tensor layout: {L.short_name(first.layout)}")
    refuse_bool_sub(self, other)
    return _add_into(self, other, -alpha, "SubBackward0")


def _add_into(self, other, alpha, name):
    """``self += alpha * other`` with a sparse operand, its node named ``name``; ``alpha`` is
    converted to the dtype of ``self`` (truncated for an integer one) as PyTorch's is."""
    if isinstance(alpha, float) and not (self.dtype.is_floating_point or self.dtype.is_complex):
        alpha = int(alpha)
    if not is_sparse(self):                       # dense += sparse: scatter the values in
        _check_add_layouts(self, other)
        if not ember.can_cast(ember.result_type(self, other), self.dtype):
            raise RuntimeError(f"Can't convert result type "
                               f"{ember.result_type(self, other)._torch_name} to output "
                               f"{self.dtype._torch_name} in add operation")
        c = as_coo(other)
        if tuple(self.shape) != tuple(c.shape):
            raise RuntimeError(f"add: expected 'self' and 'other' to have same size, but "
                               f"self has size {list(self.shape)} while other has size "
                               f"{list(c.shape)} (FYI: dense-sparse addition does not "
                               f"currently support broadcasting)")
        values = c._v if alpha == 1 else c._v * alpha
        node = self._grad_fn
        self.index_put_(tuple(c._i), values.to(self.dtype), accumulate=True)
        return self if self._grad_fn is node else named(self, name)   # (none under no_grad)
    if not is_sparse(other):
        if self.layout is not L.sparse_coo:     # (PyTorch's adds densely, into no memory)
            self.is_contiguous()                # raises PyTorch's error
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) "
                           "instead.")
    new = _add(self, other, alpha=alpha)
    if new.dtype != self.dtype:
        if not ember.can_cast(new.dtype, self.dtype):
            raise RuntimeError(f"Can't convert result type {new.dtype._torch_name} to output "
                               f"{self.dtype._torch_name} in add operation")
        new = new.to(self.dtype)
    return _replace(self, named(new, name))


@handles("fill_")
def _fill_(self, value):
    """A compressed tensor fills its stored values (whole blocks) and keeps its indices, as
    PyTorch's; PyTorch has no fill_ for COO tensors, nor one taking a tensor value."""
    if isinstance(value, Tensor) or self._layout is L.sparse_coo:
        overload = "Tensor" if isinstance(value, Tensor) else "Scalar"
        raise NotImplementedError(f"Could not run 'aten::fill_.{overload}' with arguments "
                                  f"from the '{backend_name((self,))}' backend.")
    return _replace(self, self._with_values(ember.full_like(self._v, value)))


def zero_(self):
    """``self.zero_()``: ``self`` stores nothing afterwards, in every layout (PyTorch's drops
    the indices too; fill_(0) keeps a compressed tensor's); returns self."""
    return _replace(self, _emptied(self))


def _emptied(s):
    """A sparse tensor of ``s``'s layout, size and batch dims that stores nothing."""
    v = s._v
    if s._layout is L.sparse_coo:
        return _empty_coo(s, s._size, s.sparse_dim())
    batch = s._crow.ndim - 1
    values = v.new_zeros(tuple(v.shape[:batch]) + (0,) + tuple(v.shape[batch + 1:]))
    return compressed(s._layout, ember.zeros_like(s._crow), s._col[..., :0], values, s._size)


@handles("copy_")
def _copy_(self, src, non_blocking=False):
    """``self.copy_(src)`` between sparse tensors of one layout: ``self`` takes ``src``'s
    indices and values (in its own dtype)."""
    if not is_sparse(self) and src.layout is not L.sparse_coo:
        raise RuntimeError(f"copy_sparse_compressed_ expected sparse compressed tensor layout "
                           f"but got {L.short_name(self.layout)}")
    if not is_sparse(self) or (self.layout is L.sparse_coo and not is_sparse(src)):
        raise RuntimeError(f"copy_() between dense and sparse Tensors is not implemented! "
                           f"Found self type = {self.type()} and src type = {src.type()}")
    _check_copy_layouts(self, src)
    values = src._v.to(self.dtype).clone()
    if src.layout is L.sparse_coo:
        return _replace(self, coo(src._i.clone(), values, src.shape, src._coalesced))
    return _replace(self, compressed(src.layout, src._crow.clone(), src._col.clone(), values,
                                     src.shape))

ANY_LAYOUT.add("copy_")
BATCHED.update(_IN_PLACE, ("fill_",))


# ----- resizing ----------------------------------------------------------------------------

_RESIZE_OPTIONS = (
    "\nYou could try the following options:\n1. If you need an empty sparse tensor of this "
    "size, call `x = ember.sparse_coo_tensor(size)`.\n2. If you need to resize this tensor, you "
    "have the following options:\n    1. For both sparse and dense dimensions, keep the number "
    "of them constant and the size of them non-shrinking, and then try the same call again.\n"
    "    2. Or, create a new sparse tensor with the correct indices and values from this "
    "sparse tensor.")


def sparse_resize_(self, size, sparse_dim, dense_dim):
    """Give a COO tensor ``size`` with ``sparse_dim`` sparse and ``dense_dim`` dense dims in
    place: freely when it stores nothing, else keeping both counts and growing sizes only (the
    values laid out anew over their old elements, as PyTorch's; returns self."""
    size = _checked_resize(self, size, sparse_dim, dense_dim, "sparse_resize_")
    if not self._nnz():
        return _replace(self, _empty_coo(self, size, sparse_dim))
    _check_kept_dims(self, size, sparse_dim, dense_dim)
    values = self._v
    shape = (values.shape[0],) + tuple(size[sparse_dim:])
    if shape != tuple(values.shape):            # PyTorch resizes the values' memory
        flat = values.reshape(-1)
        grown = flat.new_zeros(math.prod(shape) - flat.numel())
        values = ember.cat([flat, grown]).reshape(shape)
    return _replace(self, coo(self._i, values, size, self._coalesced))


def sparse_resize_and_clear_(self, size, sparse_dim, dense_dim):
    """Give a COO tensor ``size`` and those dims, storing nothing; returns self."""
    size = _checked_resize(self, size, sparse_dim, dense_dim, "sparse_resize_and_clear_")
    return _replace(self, _empty_coo(self, size, sparse_dim))


def resize_as_(self, the_template, memory_format=None):
    """``self.resize_as_(template)`` of a sparse tensor: a COO tensor takes a COO template's
    size and dims (sparse_resize_), a compressed one its size (``resize_``)."""
    if self.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    if self._layout is not L.sparse_coo:
        return resize_(self, *the_template.shape)
    if not is_sparse(the_template) or the_template.layout is not L.sparse_coo:
        raise NotImplementedError(f"Could not run 'aten::resize_' with arguments from the "
                                  f"'{backend_name((self,))}' backend.")
    return sparse_resize_(self, the_template.shape, the_template.sparse_dim(),
                          the_template.dense_dim())


def resize_(self, *sizes, memory_format=None):
    """``resize_`` of a 2-D CSR tensor: any number of rows (the pointers cut or extended, the
    indices and values kept), no fewer columns. PyTorch's resize_ of the other compressed
    layouts leaves malformed indices (a BSR's row pointers one too many); ember refuses them."""
    from ember._sizes import _size
    size = _size(sizes)
    if self._layout is not L.sparse_csr or len(size) != 2 or self._crow.ndim != 1:
        raise NotImplementedError(f"Could not run 'aten::resize_' with arguments from the "
                                  f"'{backend_name((self,))}' backend.")
    if self.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    rows, columns = size
    if columns < self.shape[1]:
        raise RuntimeError(f"torch.resize_: Resizing columns of sparse CSR tensors to a "
                           f"smaller value is not supported. The original number of columns "
                           f"is {self.shape[1]} while the requested new number of columns is "
                           f"{columns}.")
    # as PyTorch's: the first ``rows`` pointers kept, the rest (the last included) the new
    # count, the old one cut to the rows * columns places
    nnz = min(self._nnz(), rows * columns)
    kept = self._crow[:rows]
    crow = ember.cat([kept, kept.new_full((rows + 1 - kept.numel(),), nnz)])
    return _replace(self, compressed(self._layout, crow, self._col[:nnz], self._v[:nnz], size))


def _checked_resize(self, size, sparse_dim, dense_dim, name):
    from ember._sizes import _size
    if self._layout is not L.sparse_coo:
        raise NotImplementedError(f"Could not run 'aten::{name}' with arguments from the "
                                  f"'{backend_name((self,))}' backend.")
    size = _size((size,))
    if len(size) != sparse_dim + dense_dim:
        raise RuntimeError(f"'len(size) == sparse_dim + dense_dim' is not satisfied: "
                           f"len(size) = {len(size)}, sparse_dim = {sparse_dim}, dense_dim = "
                           f"{dense_dim}")
    return size


def _check_kept_dims(self, size, sparse_dim, dense_dim):
    """PyTorch's checks of a non-empty COO tensor's resize: the same numbers of sparse and
    dense dims, neither's sizes shrinking."""
    old = (self.sparse_dim(), self.dense_dim())
    for kind, mine, theirs in zip(("sparse", "dense"), old, (sparse_dim, dense_dim)):
        if mine != theirs:
            raise RuntimeError(f"changing the number of {kind} dimensions (from {mine} to "
                               f"{theirs}) on a non-empty sparse tensor is not supported."
                               + _RESIZE_OPTIONS)
    pairs = (("sparse", self.shape[:sparse_dim], size[:sparse_dim]),
             ("dense", self.shape[sparse_dim:], size[sparse_dim:]))
    for kind, mine, theirs in pairs:
        if any(n < m for m, n in zip(mine, theirs)):
            raise RuntimeError(f"shrinking the size of {kind} dimensions (from {list(mine)} "
                               f"to {list(theirs)}) on a non-empty sparse tensor is not "
                               f"supported." + _RESIZE_OPTIONS)


def _empty_coo(self, size, sparse_dim):
    """A COO tensor of ``size`` with ``sparse_dim`` sparse dims that stores nothing."""
    values = self._v.new_zeros((0,) + tuple(size[sparse_dim:]))
    return coo(self._i.new_zeros((sparse_dim, 0)), values, size, True)
