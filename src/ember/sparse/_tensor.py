"""The sparse tensor type: COO (indices + values) and compressed tensors (compressed indices +
plain indices + values: CSR, CSC, BSR, BSC; see _compressed.py).

NOTE [Sparse tensors]
A sparse tensor is a private Tensor subclass (so ``isinstance(s, ember.Tensor)`` holds) whose
parts are ordinary ember tensors: indices (int64; int32 or int64 in a compressed tensor, as
given, as PyTorch keeps them) and a values tensor. It has no memory of its own: every op
reaches it through ``__torch_function__`` (the registry hands over any call with
a non-plain subclass operand), whose table (_dispatch.py) sends the ops PyTorch supports on
sparse tensors to _ops.py and _products.py, which run them with ember ops on the parts; the
others raise PyTorch's "Could not run 'aten::<op>' ... 'SparseCPU' backend" error. ``_data``
answers an empty array on the values' device, so that code which only asks an operand's
device (the registry's check for operands on another GPU) works, and code that would take it
for the tensor's elements fails loudly; the Tensor methods that would read it as the tensor's
memory are overridden here (shape, strides, ...) or raise PyTorch's "doesn't have storage"
error (data_ptr, storage, ...).
Autograd needs nothing special: gradients flow through the ops on the values. A sparse leaf
that requires grad owns a leaf values tensor; its ``.grad`` is the sparse tensor with the
same indices and that leaf's gradient (PyTorch's gradient of ``sparse.mm``, ``to_dense``,
...). Where PyTorch gives such a leaf a dense gradient (it is the sparse operand of ``mm``,
``matmul``, ``addmm``, ``mv``), the product takes a dense stand-in leaf instead of the values
(``_dense_grad_anchor``) and ``.grad`` adds that one's gradient. A sparse tensor made from a
dense one that requires grad passes it a dense gradient likewise (NOTE [Dense origins]).
A gradient assigned to ``.grad`` or kept across an in-place op, and the hooks, are in
_leaf_grads.py.
A compressed tensor keeps its compressed indices in ``_crow`` and its plain ones in ``_col``
whatever its layout (for CSC they are the column pointers and the row indices).
"""

import operator

import ember
from ember._creation import check_requires_grad
from ember._dtype import WIDE_UNSIGNED
from ember._set_data import check_new_data
from ember._tensor import Size, Tensor, _make
from ember._values_backed import NO_STORAGE, ValuesBacked, blank
from ember._warn import warn_once
from ember.ops._barebones import refusal
from ember.sparse import _layouts as L
from ember.sparse._constructor_args import NO_SIZE, refuse_none_size
from ember.sparse._invariants import warn_if_implicit
from ember.sparse._versions import adopt, own_counter
from ember.sparse._versions import part as _part

__all__ = ["SparseTensor", "coo", "csr", "compressed", "sparse_coo_tensor"]



def _storage_error(self):
    raise RuntimeError(NO_STORAGE)


class SparseTensor(ValuesBacked, Tensor):
    """A sparse COO or compressed tensor; see NOTE [Sparse tensors]."""

    _non_float_grad_message = ("Only Tensors of floating point and complex dtype can require "
                               "gradients")

    __slots__ = ("_layout", "_i", "_crow", "_col", "_v", "_size", "_coalesced", "_leaf",
                 "_pattern", "_anchor", "_origin", "_grad_via_values", "_retained",
                 "_grad_set", "_grad_seen")

    data_ptr = const_data_ptr = storage_offset = untyped_storage = storage = _storage_error
    set_ = is_set_to = __dlpack__ = _storage_error
    nbytes = property(_storage_error)

    # ----- metadata ---------------------------------------------------------------------

    @property
    def layout(self):
        return self._layout

    is_sparse = property(lambda self: self._layout is L.sparse_coo)
    is_sparse_csr = property(lambda self: self._layout is L.sparse_csr)
    def numel(self):
        """The number of elements, zeros included."""
        return self._size.numel()

    nelement = numel

    def stride(self, dim=None):
        """Strides: a COO tensor answers zeros, as PyTorch does; compressed ones have none."""
        if self._layout is not L.sparse_coo:
            kind = L.short_name(self._layout)[len("Sparse"):].upper()
            raise RuntimeError(f"Sparse {kind} tensors do not have strides")
        strides = (0,) * len(self._size)
        return strides if dim is None else strides[dim]

    def share_memory_(self):
        """Move the parts (indices, values) into shared memory; returns self."""
        for part in (self._i, self._crow, self._col, self._v):
            if part is not None:
                part.share_memory_()
        return self

    def is_shared(self):
        """Whether the values lie in shared memory."""
        return self._v.is_shared()

    def is_contiguous(self, memory_format=None):
        """False for a COO tensor (not laid out densely); compressed ones raise PyTorch's
        error."""
        if self._layout is not L.sparse_coo:
            kind = L.short_name(self._layout)[len("Sparse"):].upper()
            raise RuntimeError(f"Sparse {kind} tensors do not have is_contiguous")
        return False

    def sparse_dim(self):
        """How many leading dimensions are sparse (indexed)."""
        return self._i.shape[0] if self._layout is L.sparse_coo else 2

    def dense_dim(self):
        """How many trailing dimensions each stored value has (besides a block's two)."""
        return self._v.ndim - self._batch_ndim() - (3 if L.blocked(self._layout) else 1)

    def _batch_ndim(self):
        return 0 if self._crow is None else self._crow.ndim - 1

    def _nnz(self):
        """The number of stored elements (duplicates counted; per batch, if batched)."""
        return self._v.shape[self._batch_ndim()]

    # ----- parts ------------------------------------------------------------------------

    def _need(self, layout, name):
        if self._layout is not layout and self._layout not in _BLOCKED_TWIN.get(layout, ()):
            raise RuntimeError(f"{name} expected {L.long_name(layout)} layout but got "
                               f"{L.short_name(self._layout)}")

    def is_coalesced(self):
        """Whether the indices are sorted and free of duplicates."""
        self._need(L.sparse_coo, "is_coalesced")
        return self._coalesced

    def _coalesced_(self, coalesced):
        """Mark the tensor as coalesced (or not) without checking; returns self."""
        if self._layout is not L.sparse_coo:    # (PyTorch's has no compressed kernel)
            from ember.sparse._dispatch import backend_name
            raise NotImplementedError(f"Could not run 'aten::_coalesced_' with arguments from "
                                      f"the '{backend_name((self,))}' backend.")
        self._coalesced = bool(coalesced)
        self._bump_version()                # (an in-place op, as PyTorch's)
        return self

    def indices(self):
        """The (sparse_dim, nnz) indices of a coalesced COO tensor."""
        self._need(L.sparse_coo, "indices")
        if not self._coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call "
                               ".coalesce() first")
        return _part(self, self._i)

    def values(self):
        """The stored values (of a coalesced COO tensor, or of a CSR tensor), differentiable:
        a view with a node of its own (ValuesBackward0) when they require grad."""
        if self._layout is L.sparse_coo and not self._coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call "
                               ".coalesce() first")
        v = self._v
        if v.requires_grad and ember.is_grad_enabled():
            from ember.ops.conversion import _alias
            from ember.sparse._names import freeing
            if self._layout is not L.sparse_coo and self._layout is not L.sparse_csr \
                    and self._leaf:         # (a CSC made from a CSR one passes it on)
                from ember.sparse._refusals import refusing
                kind = L.short_name(self._layout)[len("Sparse"):].upper()
                return refusing(v, "ValuesBackward0", RuntimeError(
                    f"Sparse {kind} tensors do not have is_contiguous"))   # as PyTorch's
            alias = freeing(_alias(v), "ValuesBackward0")     # (it saves self)
            alias.__dict__["_sparse_part"] = True   # (see NOTE [Sparse versions])
            mark_coalesced_grad(alias, self, layouts=(L.sparse_coo, L.sparse_csr))
            return alias
        return _part(self, v)

    def _mark_grad_via_values(self, grad):
        """Note that this leaf's first gradient comes through ``values()`` (for a COO leaf:
        also a whole sum or an add, see mark_coalesced_grad): PyTorch's gradient of a CSR
        leaf then keeps the leaf's own indices (their dtype, int32 included), that of a COO
        leaf is coalesced (unless accumulated)."""
        if self._v.grad is None:
            self._grad_via_values = True
        elif self._layout is L.sparse_coo:
            self._grad_via_values = False

    def _indices(self):
        """The indices, coalesced or not."""
        self._need(L.sparse_coo, "_indices")
        return _part(self, self._i)

    def _values(self):
        """The values, coalesced or not: a view autograd does not track (as PyTorch's; the
        differentiable one is ``values()``)."""
        return _part(self, self._v)

    def crow_indices(self):
        """The compressed row indices of a CSR or BSR tensor."""
        self._need(L.sparse_csr, "crow_indices")
        return _part(self, self._crow)

    def col_indices(self):
        """The column (block) indices of a CSR or BSR tensor."""
        self._need(L.sparse_csr, "col_indices")
        return _part(self, self._col)

    def ccol_indices(self):
        """The compressed column indices of a CSC or BSC tensor."""
        self._need(L.sparse_csc, "ccol_indices")
        return _part(self, self._crow)

    def row_indices(self):
        """The row (block) indices of a CSC or BSC tensor."""
        self._need(L.sparse_csc, "row_indices")
        return _part(self, self._col)

    # ----- autograd ---------------------------------------------------------------------

    @property
    def grad(self):
        if not self._leaf and self._retained is not None:   # see retain_grad
            values, origin = self._retained
            from ember.sparse._origin import in_pattern
            if origin is not None and in_pattern(values):   # the values' went to the origin
                return origin._grad
            return self._gradient_from(values._grad, None if origin is None else origin._grad)
        dense = None if self._anchor is None else self._anchor.grad
        if self._leaf:              # see sparse/_leaf_grads.py
            from ember.sparse._leaf_grads import remember, stored, with_set
            values = self._v.grad
            grad = stored(self, values, dense)
            if grad is None:
                grad = self._gradient_from(values, dense, True)
                remember(self, values, dense, grad)
            return with_set(self, grad)
        return self._gradient_from(None, dense, True)

    def register_hook(self, hook):
        """Call ``hook(grad)`` with this tensor's (sparse) gradient; it may return a new one."""
        from ember.sparse._leaf_grads import register_hook
        return register_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Call ``hook(self)`` after this leaf's gradient was accumulated."""
        from ember.sparse._leaf_grads import register_post_accumulate_hook
        return register_post_accumulate_hook(self, hook)

    def retain_grad(self):
        """Populate ``.grad`` for this non-leaf sparse tensor during backward: its values'
        gradient (sparse, with its indices) plus the dense one products send its origin."""
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._leaf or self._retained is not None:
            return
        from ember.sparse._origin import retained_origin
        self._v.retain_grad()
        self._retained = (self._v, retained_origin(self))

    @property
    def retains_grad(self):
        return self._retained is not None

    def _gradient_from(self, values_grad, dense_grad, accumulated=False):
        """This leaf's gradient from its values' gradient and its dense stand-in's (see
        ``_dense_grad_anchor``), either of them None. A COO gradient is marked coalesced (as
        PyTorch's ops make it, ``autograd.grad``'s and ``retain_grad``'s) unless it is the
        ``accumulated`` ``.grad`` of a leaf (see mark_coalesced_grad)."""
        grad = values_grad
        coalesced = self._grad_via_values if accumulated else True
        if grad is not None:
            if self._layout is L.sparse_coo and not self._coalesced:
                # the duplicates of one element share its gradient: kept once, as in PyTorch
                from ember.sparse._convert import first_of_duplicates
                keep, indices = first_of_duplicates(self)
                grad = coo(indices, grad.index_select(0, keep), self._size, coalesced)
            elif self._layout is L.sparse_coo:
                # PyTorch's is uncoalesced but for a few ops' (see mark_coalesced_grad)
                grad = self._with_values(grad)
                grad._coalesced = coalesced or grad._v.shape[0] <= 1
            elif self._grad_via_values:     # (see _mark_grad_via_values)
                grad = compressed(self._layout, self._crow, self._col, grad, self._size)
            else:       # PyTorch's gradients of compressed tensors have int64 indices
                from ember.sparse._convert import with_index_dtype
                parts = with_index_dtype(self._crow, self._col, ember.int64)
                grad = compressed(self._layout, *parts, grad, self._size)
        if dense_grad is None:
            return grad
        return dense_grad if grad is None else dense_grad + grad

    def _gradient_edges(self):
        """The tensors ``autograd.grad`` differentiates against for this leaf: its values, and
        its dense stand-in when a product used one (for a non-leaf: its dense origin)."""
        if not self._leaf:
            from ember.sparse._origin import origin_of
            origin = origin_of(self)
            return [self._v] if origin is None else [self._v, origin]
        return [self._v] if self._anchor is None else [self._v, self._anchor]

    @grad.setter
    def grad(self, value):
        if value is not None:
            from ember.sparse._leaf_grads import assign_grad
            return assign_grad(self, value)
        self._grad_set = None
        from ember.sparse._leaf_grads import clear_backward_grads
        clear_backward_grads(self)

    def _dense_grad_anchor(self):
        """A dense leaf standing for this sparse leaf in ``mm``, ``matmul``, ``addmm``, ``mv``
        (PyTorch gives the sparse leaf a dense gradient there): its values are zeros that take
        no memory (stride 0), and only its gradient is ever read."""
        if self._anchor is None:
            from ember.backend import xp_of
            array = self._v._data
            xp = xp_of(array)
            self._anchor = _make(xp.broadcast_to(xp.zeros((), array.dtype), tuple(self._size)))
            self._anchor._set_requires_grad()
            if self._leaf:          # (the leaf's hooks run on its dense gradient too)
                from ember.sparse._leaf_grads import anchor_hooks
                anchor_hooks(self, self._anchor)
        return self._anchor

    def detach(self):
        """This sparse tensor cut from the graph (sharing its parts' memory)."""
        return self._with_values(self._v.detach())

    def _set_data(self, value):
        check_new_data(self, value)
        if self._layout is not L.sparse_coo:
            return          # PyTorch's set_data leaves a compressed tensor as it was (sic)
        if self._v.requires_grad:   # the values tensor keeps its gradient and history
            self._v.data = value._v
        else:
            self._v = value._v.detach()
        self._i, self._coalesced, self._pattern = value._i, value._coalesced, value._pattern
        self._origin = None
        if value._size != self._size:
            self._size, self._anchor = value._size, None

    def _get_data(self):
        # (a COO tensor's has a counter of its own; a compressed one's shares its tensor's,
        # as PyTorch's)
        return self._own_data() if self._layout is L.sparse_coo else self.detach()

    data = property(_get_data, _set_data, doc=Tensor.data.__doc__)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Backward from a sparse tensor: not supported (sum it or make it dense first)."""
        raise RuntimeError("ember cannot run backward from a sparse tensor; call .to_dense() "
                           "or ember.sparse.sum() on it first")

    # ----- conversions ------------------------------------------------------------------

    def new_zeros(self, *size, layout=None, **kwargs):
        """An empty sparse tensor of ``size`` in this tensor's layout (int64 indices), as
        PyTorch's ``new_zeros`` of a sparse tensor gives."""
        from ember._creation import _new_factory, empty
        return _new_factory(empty, "new_zeros")(self, *size, layout=layout or self._layout,
                                                **kwargs)

    def new_empty(self, *size, layout=None, **kwargs):
        """An empty sparse tensor of ``size`` in this tensor's layout (as ``new_zeros``)."""
        from ember._creation import _new_factory, empty
        return _new_factory(empty, "new_empty")(self, *size, layout=layout or self._layout,
                                                **kwargs)

    def new(self, *args, **kwargs):
        """The legacy constructor of a COO tensor: ``s.new(indices, values[, size])``,
        ``s.new(*sizes)``, ``s.new()`` (see sparse/_legacy_new.py)."""
        from ember.sparse._legacy_new import sparse_new
        return sparse_new(self, args, kwargs)

    def new_tensor(self, data, **kwargs):
        """``ember.tensor(data)`` with this tensor's dtype and device; PyTorch's error for a
        compressed tensor (its backend maps to no single layout)."""
        if self._layout is not L.sparse_coo:
            from ember.sparse._dispatch import backend_name
            raise RuntimeError(f"Cannot map DispatchKey {backend_name((self,))} to a unique "
                               f"layout.")
        return Tensor.new_tensor(self, data, **kwargs)

    def zero_(self):
        """Store nothing afterwards, in every layout (PyTorch's zero_ drops the indices too,
        unlike a compressed tensor's fill_(0)); returns self."""
        from ember.sparse._inplace import zero_
        from ember.sparse._leaf_grads import emptied
        zero_(self)
        emptied(self)               # (a leaf's .grad: the leaf keeps it, emptied)
        return self

    def sparse_resize_(self, size, sparse_dim, dense_dim):
        """Resize a COO tensor in place to ``size`` with those numbers of sparse and dense
        dims (a non-empty one keeps both counts and grows only); returns self."""
        from ember.sparse._inplace import sparse_resize_
        return sparse_resize_(self, size, sparse_dim, dense_dim)

    def sparse_resize_and_clear_(self, size, sparse_dim, dense_dim):
        """Resize a COO tensor in place as ``sparse_resize_``, storing nothing; returns self."""
        from ember.sparse._inplace import sparse_resize_and_clear_
        return sparse_resize_and_clear_(self, size, sparse_dim, dense_dim)

    def resize_as_(self, the_template, memory_format=None):
        """Resize in place to ``the_template``'s size (a COO one's dims too); returns self."""
        from ember.sparse._inplace import resize_as_
        return resize_as_(self, the_template, memory_format)

    def resize_(self, *sizes, memory_format=None):
        """Resize a 2-D CSR tensor in place (rows freely, columns only up); returns self."""
        from ember.sparse._inplace import resize_
        return resize_(self, *sizes, memory_format=memory_format)

    def _with_values(self, values):
        """A sparse tensor with these indices and ``values`` (same layout and size)."""
        if self._layout is L.sparse_coo:
            out = coo(self._i, values, self._size, self._coalesced)
        else:
            out = compressed(self._layout, self._crow, self._col, values, self._size)
        out._pattern = self._pattern
        return out

    def to(self, *args, **kwargs):
        """This tensor with another dtype and/or device (self when nothing changes)."""
        from ember.ops.conversion import _parse_to_all
        dtype, device, copy, non_blocking, layout = _parse_to_all(args, kwargs)
        values = self._v.to(dtype=dtype, device=device, copy=copy)
        if values is self._v:
            return self
        if self._layout is L.sparse_coo:
            return coo(self._i.to(values.device), values, self._size, self._coalesced)
        return compressed(self._layout, self._crow.to(values.device),
                          self._col.to(values.device), values, self._size)

    def type(self, dtype=None, non_blocking=False, **kwargs):
        """The legacy type name (``ember.sparse.FloatTensor``), or this tensor cast."""
        if dtype is not None:
            return Tensor.type(self, dtype, non_blocking, **kwargs)
        if self._layout is not L.sparse_coo:
            from ember.sparse._dispatch import backend_name
            raise RuntimeError(f"Unimplemented backend {backend_name((self,))}")
        cuda = "cuda." if self.device.type == "cuda" else ""
        return f"ember.{cuda}sparse.{self.dtype._legacy}"

    def to_dense(self, dtype=None, *, masked_grad=None):
        """The strided tensor this sparse tensor stands for (differentiable in the values)."""
        from ember.sparse import _convert
        from ember.sparse._names import named
        if dtype is not None:
            kind = "sparse" if self._layout is L.sparse_coo else "sparse_csr"  # (all compressed)
            raise RuntimeError(f"dtype argument is not supported by {kind}_to_dense")
        if masked_grad is False:
            from ember.sparse._origin import to_dense_unmasked
            return named(to_dense_unmasked(self, _convert.to_dense), "ToDenseBackward0")
        return named(_convert.to_dense(self), "ToDenseBackward0")

    def narrow_copy(self, dim, start, length):
        """A sparse copy of the elements in ``start:start+length`` along ``dim``."""
        from ember.sparse._narrow import narrow_copy
        return narrow_copy(self, dim, start, length)

    def coalesce(self):
        """This COO tensor with sorted indices and duplicates summed (self if it is so)."""
        self._need(L.sparse_coo, "coalesce")
        if self._coalesced:
            return self
        if self._v.dtype in WIDE_UNSIGNED:     # (ops/_barebones.py)
            raise refusal("coalesce", self._v.dtype)
        from ember.sparse import _convert
        from ember.sparse._names import named
        from ember.sparse._origin import carry
        out = carry(named(_convert.coalesce(self), "CoalesceBackward0"), self)
        if self._leaf and out.requires_grad:    # (passes its gradient on as it is: see
            out.__dict__["_coalesce_of"] = self     # mark_coalesced_grad)
        return out

    # ----- Python protocols -------------------------------------------------------------

    def __repr__(self, *, tensor_contents=None):
        from ember.sparse._printing import sparse_repr
        return sparse_repr(self)

    def __format__(self, spec):
        from ember._tensor_str import tensor_format      # f"{loss}" prints 0.25, as in PyTorch
        return tensor_format(self, spec)

    def __len__(self):
        if not self._size:
            raise TypeError("len() of a 0-d tensor")
        return self._size[0]

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous"
                               if self.numel() else
                               "Boolean value of Tensor with no values is ambiguous")
        return bool(self.to_dense())

    def __getitem__(self, index):
        from ember.sparse._indexing import getitem
        return getitem(self, index)

    def item(self):
        """The value of a one-element sparse tensor."""
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to "
                               f"Scalar")
        return self.to_dense().item()

    def tolist(self):
        """Not available for sparse tensors (PyTorch's error)."""
        raise RuntimeError(NO_STORAGE)

    def numpy(self, *, force=False):
        """Not available for sparse tensors: use ``to_dense()`` first."""
        raise TypeError(f"can't convert {L.short_name(self._layout)} layout tensor to numpy. "
                        f"Use Tensor.to_dense() first.")

    __array__ = numpy

    def __reduce_ex__(self, protocol):
        parts = (self._i,) if self._layout is L.sparse_coo else (self._crow, self._col)
        return (_rebuild, (self._layout.name, parts, self._v.detach(), tuple(self._size),
                           self.requires_grad and self._leaf, self._coalesced))

    def __deepcopy__(self, memo):
        if not self.is_leaf:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) "
                               "support the deepcopy protocol at the moment.")
        if id(self) in memo:
            return memo[id(self)]
        rebuild, args = self.__reduce_ex__(2)
        layout, parts, values, size, grad, coalesced = args
        new = rebuild(layout, tuple(p.clone() for p in parts), values.clone(), size, grad,
                      coalesced)
        memo[id(self)] = new
        return new

    _takes_registry_calls = True       # offered op functions, parameters by name (handle_op)
    _takes_like_factories = True       # zeros_like/empty_like of a sparse tensor are sparse

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        from ember.sparse._dispatch import dispatch
        return dispatch(func, args, kwargs or {})


def mark_coalesced_grad(out, *inputs, layouts=(L.sparse_coo,)):
    """``out`` (a dense tensor: a whole sum, an add's values, values()) passes the COO leaves
    among ``inputs`` the gradient PyTorch's marks coalesced (its other ops' are uncoalesced);
    values() also passes it a CSR leaf's (``layouts``), whose gradient then keeps its index
    dtype."""
    if not ember.is_grad_enabled() or not out.requires_grad:
        return
    for t in inputs:
        if type(t) is SparseTensor and not t._leaf:     # coalesce() of a leaf
            t = t.__dict__.get("_coalesce_of", t)
        if type(t) is SparseTensor and t._leaf and t._layout in layouts and t.requires_grad:
            out.register_hook(t._mark_grad_via_values)


def _rebuild(layout, parts, values, size, requires_grad, coalesced=False):
    """Unpickle a sparse tensor (a COO one keeps its coalesced flag, as PyTorch's)."""
    if layout == "sparse_coo":
        out = coo(parts[0], values, size, coalesced)
    else:
        import ember
        out = compressed(getattr(ember, layout), parts[0], parts[1], values, size)
    return out._set_requires_grad() if requires_grad else out


def _blank(layout, values, size):
    t = blank(SparseTensor)
    t._layout = layout
    t._v = values
    t._size = size if type(size) is Size else Size(size)
    t._leaf = False
    t._pattern = None
    t._anchor = None
    t._origin = None                # see NOTE [Dense origins] in _origin.py
    t._grad_via_values = False
    t._retained = None              # (values, dense origin) whose .grad retain_grad keeps
    t._grad_set = None              # see sparse/_leaf_grads.py
    t._grad_seen = None             # (the .grad last read: _leaf_grads.stored)
    t._i = t._crow = t._col = None
    t._coalesced = False
    adopt(t)
    return t


def coo(indices, values, size, coalesced=False):
    """A COO tensor from checked parts (no copies, no checks)."""
    t = _blank(L.sparse_coo, values, size)
    t._i = indices
    t._coalesced = coalesced or values.shape[0] <= 1
    return t


def _warn_beta(layout):
    """PyTorch's warning on its first compressed tensor of the process (whatever the layout)."""
    warn_once(f"Sparse {L.short_name(layout)[6:].upper()} tensor support is in beta state. "
              f"If you miss a functionality in the sparse tensor support, please submit a "
              f"feature request to https://github.com/pytorch/pytorch/issues.",
              key="sparse compressed beta")


def compressed(layout, compressed_indices, plain_indices, values, size):
    """A compressed tensor (CSR, CSC, BSR, BSC) from checked parts (no copies, no checks)."""
    _warn_beta(layout)
    t = _blank(layout, values, size)
    t._crow, t._col = compressed_indices, plain_indices
    return t


def csr(crow, col, values, size):
    """A CSR tensor from checked parts (no copies, no checks)."""
    return compressed(L.sparse_csr, crow, col, values, size)


# the accessors of CSR (CSC) tensors serve BSR (BSC) ones too
_BLOCKED_TWIN = {L.sparse_csr: (L.sparse_bsr,), L.sparse_csc: (L.sparse_bsc,)}


# ----- the public constructors -------------------------------------------------------------

def _as_tensor(data, dtype=None, device=None):
    import ember
    if isinstance(data, SparseTensor):
        raise TypeError("expected a strided tensor, but got a sparse one")
    if isinstance(data, Tensor):
        return data.to(dtype=dtype, device=device)
    return ember.tensor(data, dtype=dtype, device=device)


def _index_tensor(data, device):
    import ember
    t = _as_tensor(data, device=device)
    return t if t.dtype is ember.int64 else t.to(ember.int64)


def _make_leaf(t, requires_grad):
    return t._set_requires_grad() if requires_grad else t


def sparse_coo_tensor(indices=None, values=None, size=NO_SIZE, *, dtype=None, device=None,
                      pin_memory=False, requires_grad=False, check_invariants=None,
                      is_coalesced=None):
    """A sparse COO tensor with the given indices (sparse_dim x nnz) and values (nnz x
    dense dims) (``torch.sparse_coo_tensor``); the size is inferred when not given.
    ``sparse_coo_tensor(size)`` makes an empty one (no stored elements)."""
    if size is None and values is not None:
        refuse_none_size("sparse_coo_tensor")
    size = None if size is NO_SIZE else size
    check_requires_grad(requires_grad, "sparse_coo_tensor", none_ok=False)
    warn_if_implicit(check_invariants)
    if values is None:
        return _empty_coo(indices, size, dtype, device, requires_grad)
    values = _as_tensor(values, dtype, device)
    indices = _index_tensor(indices, values.device)
    if indices.ndim != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: "
                           f"{list(indices.shape)}")
    sparse_dim, nnz = indices.shape
    if values.ndim == 0:
        values = values.reshape(1)              # one value, as PyTorch takes it
    if nnz != values.shape[0]:
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from "
                           f"indices: {nnz}, nnz from values: {values.shape[0]}")
    dense_shape = tuple(values.shape[1:])
    if size is None:
        if nnz:
            top = indices.amax(1).tolist()
        else:
            top = [-1] * sparse_dim
        size = tuple(int(m) + 1 for m in top) + dense_shape
    else:
        size = tuple(operator.index(s) for s in size)
        if len(size) != sparse_dim + len(dense_shape):
            raise RuntimeError(f"'len(size) == sparse_dim + dense_dim' is not satisfied: "
                               f"len(size) = {len(size)}, sparse_dim = {sparse_dim}, "
                               f"dense_dim = {len(dense_shape)}")
        if tuple(size[sparse_dim:]) != dense_shape:
            raise RuntimeError(f"values has incorrect size, expected "
                               f"{[nnz, *size[sparse_dim:]]}, got {list(values.shape)}")
        # meta indices hold no values to check: PyTorch skips them unless asked to check
        if nnz and check_invariants is not False and (
                check_invariants or indices.device.type != "meta"):
            _check_coo_indices(indices, size)
    from ember.ops.underivable import refuse_forward_ad
    refuse_forward_ad("_sparse_coo_tensor_with_dims_and_tensors", values)
    if values.requires_grad and not requires_grad:
        from ember.ops.conversion import _alias
        from ember.sparse._names import freeing
        values = freeing(_alias(values),        # a non-leaf sparse tensor, as in PyTorch
                             "SparseCooTensorWithDimsAndTensorsBackward0")
    else:
        values = own_counter(values)
    out = coo(indices, values, size, bool(is_coalesced))
    return _make_leaf(out, requires_grad)


def _empty_coo(size_arg, size, dtype, device, requires_grad):
    import ember
    if size_arg is not None and size is not None or isinstance(size_arg, Tensor):
        raise TypeError("sparse_coo_tensor() missing required argument 'values'")
    size = size_arg if size is None else size
    if size is None:
        raise TypeError("sparse_coo_tensor() missing required argument 'size'")
    size = tuple(operator.index(s) for s in size)
    indices = ember.zeros((len(size), 0), dtype=ember.int64, device=device)
    values = ember.zeros(0, dtype=dtype, device=device)
    return _make_leaf(coo(indices, values, size, True), requires_grad)


def _check_coo_indices(indices, size):
    low = indices.amin(1).tolist()
    high = indices.amax(1).tolist()
    for d, (lo, hi) in enumerate(zip(low, high)):
        if lo < 0:
            raise RuntimeError(f"found negative index {lo} for dim {d}")
        if hi >= size[d]:
            raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is "
                               f"{size[d]} but found index {hi}")
