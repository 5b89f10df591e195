"""Products of sparse matrices with dense ones (and with each other): ``sparse.mm``, ``mm``,
``matmul``, ``mv``, ``addmm``. The product itself runs on the device's sparse library
(backend/sparse_products.py); the gradients are ember ops, so they are differentiable too."""

import ember
from ember._tensor import _make
from ember.autograd._forward_traces import FORWARD_OPEN, reaches_forward_inputs
from ember.autograd.function import Function
from ember.backend import xp_of
from ember.backend.sparse_products import csr_times_dense
from ember.ops._barebones import refusal
from ember.ops._op_errors import forward_ad_not_implemented
from ember.sparse import _convert as C
from ember.sparse import _layouts as L
from ember.sparse._compressed import expand_pointers
from ember.sparse._dispatch import (ANY_LAYOUT, HANDLERS, backend_name, handles, is_sparse,
                                   refuse_batched)
from ember.sparse._names import named as _named
from ember.sparse._ops import as_coo, transpose
from ember.sparse._origin import in_layout, origin_of
from ember.sparse._refusals import bare_repr
from ember.sparse._tensor import _warn_beta, coo, csr

__all__ = ["SparseAddmm", "mm", "matmul", "addmm", "sampled_addmm"]


class SparseAddmm(Function):
    """``A @ dense`` for a CSR-ordered pattern A with ``values``; differentiable in both
    (its node is named after PyTorch's, SparseAddmmBackward0)."""

    _node_name = "SparseAddmmBackward0"    # ember's own functions may name their node

    @staticmethod
    def forward(ctx, values, dense, pattern, anchor=None):
        ctx.pattern = pattern
        ctx.anchor = anchor
        ctx.save_for_backward(values, dense)
        xp = xp_of(values._data)
        return _make(csr_times_dense(xp, pattern.crow._data, pattern.col._data, values._data,
                                     dense._data, pattern.shape[0]))

    @staticmethod
    def backward(ctx, grad):
        values, dense = ctx.saved_tensors
        p = ctx.pattern
        grad_values = grad_dense = None
        if ctx.needs_input_grad[0]:
            picked = dense.index_select(0, p.col)
            picked = picked.conj() if picked.is_complex() else picked
            grad_values = grad.index_select(0, p.rows) * picked
            if grad_values.ndim == 2:
                grad_values = grad_values.sum(1)
        if ctx.needs_input_grad[1]:
            t = p.transposed()
            flipped = t.ordered(values.conj() if values.is_complex() else values)
            grad_dense = SparseAddmm.apply(flipped, grad, t, _adjoint(ctx.anchor))
        grad_anchor = None
        if ctx.needs_input_grad[3]:         # the dense gradient of a sparse leaf or origin
            other = dense.conj() if dense.is_complex() else dense
            grad_anchor = grad.outer(other) if dense.ndim == 1 else grad @ other.t()
        return grad_values, grad_dense, None, grad_anchor

    @staticmethod
    def vmap(info, in_dims, values, dense, pattern, anchor=None):
        """Under vmap (the dense operand read through ``_data`` would be a placeholder): a
        batched dense operand's examples side by side as columns of one product (an
        unbatched sparse operand's gradient then sums over them, as it must); batched
        sparse values, one product per example."""
        v_dim, d_dim, _, a_dim = in_dims
        if v_dim is not None or a_dim is not None:
            def pick(x, dim, b):
                return x if dim is None else x.select(dim, b)
            outs = [SparseAddmm.apply(pick(values, v_dim, b), pick(dense, d_dim, b), pattern,
                                      pick(anchor, a_dim, b)) for b in range(info.batch_size)]
            return ember.stack(outs), 0
        columns = dense.movedim(d_dim, -1)                  # (n, B) or (n, k, B)
        out = SparseAddmm.apply(values, columns.reshape(columns.shape[0], -1), pattern, anchor)
        out = out.reshape((out.shape[0],) + tuple(columns.shape[1:]))
        return out, out.ndim - 1


SparseAddmm._node_class().__repr__ = bare_repr     # <SparseAddmmBackward0 object at ...>


def _adjoint(anchor):
    """The anchor of the adjoint of the sparse operand whose anchor is ``anchor`` (so that the
    input gradient's own gradient reaches it densely, as the first one does)."""
    if anchor is None:
        return None
    return anchor.conj().t() if anchor.is_complex() else anchor.t()


def _check_product(s, dense, name="addmm"):
    if s.layout is L.sparse_coo and s.sparse_dim() != 2:   # (PyTorch's COO kernels are addmm)
        raise RuntimeError(f"addmm: matrices expected, got {s.sparse_dim()}D tensor")
    if s.layout is L.sparse_coo and s.dense_dim():
        raise RuntimeError(f"addmm: scalar values expected, got {s.dense_dim()}D values")
    if s.ndim != 2 or s.dense_dim():
        raise RuntimeError(f"{name}: expected a 2-D sparse matrix (sparse_dim 2, dense_dim "
                           f"0), but got size {tuple(s.shape)} with dense_dim "
                           f"{s.dense_dim()}")
    if dense.ndim == 0:
        raise IndexError("Dimension specified as -1 but tensor has no dimensions")
    if dense.ndim > 2:
        raise RuntimeError(f"{name}: matrices expected, got {dense.ndim}D tensor")
    if dense.shape[0] != s.shape[1]:
        if name == "mv":
            raise RuntimeError("mv: expected self.size(-1) == vec.size(-1)")
        raise RuntimeError(f"{name}: Argument #3 (dense): Expected dim 0 size {s.shape[1]}, "
                           f"got {dense.shape[0]}")
    if dense.dtype is not s.dtype:
        raise RuntimeError(f"expected scalar type {s.dtype._torch_name} but found "
                           f"{dense.dtype._torch_name}")
    if dense.device != s.device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at "
                           f"least two devices, {s.device} and {dense.device}!")


def _anchor(s, dense_grad):
    """Where the dense gradient of ``s`` goes when it is to be dense, else None: its dense
    origin (NOTE [Dense origins] in _origin.py), or the dense stand-in of a sparse leaf (see
    ``SparseTensor._dense_grad_anchor``)."""
    if not (dense_grad and ember.is_grad_enabled()):
        return None
    origin = origin_of(s)
    if origin is not None:
        return origin
    return s._dense_grad_anchor() if s._leaf else None


_MKL_DTYPES = frozenset({"float32", "float64", "complex64", "complex128"})


def _refuse_dtype(s, other):
    """PyTorch's CPU kernels' dtype refusals for a product with the sparse ``s``: a COO
    matrix by a dense one has no bool kernel, compressed (MKL) ones and products of two sparse
    matrices compute in float32/float64/complex64/complex128 only (the kernels return before
    dispatching on the dtype where ``s`` stores nothing, but that of two COO matrices)."""
    dtype = s.dtype
    if s.device.type != "cpu":                  # (CUDA's kernels are others)
        return
    if is_sparse(other) and s.layout is L.sparse_coo:
        if dtype.name not in _MKL_DTYPES:
            raise refusal("sparse_matmul", dtype)
    elif not s._nnz():
        return
    elif is_sparse(other):
        if dtype.name not in _MKL_DTYPES:
            raise refusal("addmm_out_sparse_csr_impl_mkl_sparse", dtype)
    elif s.layout is L.sparse_coo:
        if dtype is ember.bool:
            raise refusal("addmm_sparse_dense", dtype)
    elif dtype.name not in _MKL_DTYPES:
        raise refusal("addmv_out_sparse_csr_impl_mkl" if other.ndim == 1
                      else "addmm_out_sparse_csr_impl_mkl", dtype)


def _sparse_times_dense(s, dense, name="addmm", anchor=None):
    _check_product(s, dense, name)
    if s.layout is L.sparse_coo:
        _refuse_dtype(s, dense)
    if s.layout is not L.sparse_coo and s.layout is not L.sparse_csr:
        s = as_coo(s)                       # CSC, BSR, BSC: through their COO form
    p = C.pattern(s)
    values = s._v if anchor is None else s._v.detach()     # the gradient goes to one of them
    return SparseAddmm.apply(p.ordered(values), dense, p, anchor)


def _origin_anchor(s, dense_grad):
    """``_anchor`` for the first of two sparse operands: its gradient arrives in its layout,
    unmasked (PyTorch's is the product of sparse matrices), as ``sparse.mm``'s (None) does not."""
    anchor = _anchor(s, dense_grad)
    return None if anchor is None else in_layout(anchor, s.layout)


def _product(a, b, name="addmm", dense_grad=False):
    """``a @ b`` for operands of which at least one is sparse (a vector ``b`` allowed);
    ``dense_grad``: a sparse leaf gets a dense gradient (``mm``), not a sparse one with its
    indices (``sparse.mm``)."""
    _check_product_layouts(a, b)
    _check_compressed_shapes(a, b)
    if FORWARD_OPEN[0]:
        _refuse_forward_ad(a, b, dense_grad)
    if is_sparse(a) and is_sparse(b):
        _refuse_dtype(a, b)
        if a.layout is L.sparse_coo:
            _warn_beta(L.sparse_csr)        # PyTorch multiplies COO matrices as CSR ones
        # no sparse-times-sparse kernel: the product through the second operand made dense
        product = _sparse_times_dense(a, b.to_dense(), name, _origin_anchor(a, dense_grad))
        return product.to_sparse() if a.layout is L.sparse_coo else C.to_sparse_csr(product)
    if is_sparse(a):
        if a.layout is not L.sparse_coo:
            _refuse_dtype(a, b)
        return _sparse_times_dense(a, b, name, _anchor(a, dense_grad))
    # dense @ sparse = (sparse^T @ dense^T)^T
    if a.ndim not in (1, 2):
        raise RuntimeError(f"{name}: matrices expected, got {a.ndim}D tensor")
    if b.layout is not L.sparse_coo:
        _refuse_dtype(b, a)
    anchor = _anchor(b, dense_grad)
    flipped = _sparse_times_dense(transpose(as_coo(b), 0, 1), a.t() if a.ndim == 2 else a,
                                  name, None if anchor is None else anchor.t())
    return flipped.t() if a.ndim == 2 else flipped


def _refuse_forward_ad(a, b, dense_grad):
    """PyTorch's errors where a forward-mode transform's inputs reach a product with a sparse
    operand: its compressed operands have no strides for the tangent, its COO ``mm`` makes a
    zero tangent in a layout without that kernel, and ``sparse.mm`` and ``sparse.addmm`` (its
    ``_sparse_addmm``) have no forward derivative."""
    if not any(reaches_forward_inputs(x._v if is_sparse(x) else x) for x in (a, b)):
        return
    for x in (a, b):
        if is_sparse(x) and x.layout is not L.sparse_coo:
            kind = L.short_name(x.layout)[len("Sparse"):].upper()
            raise RuntimeError(f"Sparse {kind} tensors do not have strides")
    if dense_grad:
        raise NotImplementedError(f"Could not run 'aten::_efficientzerotensor' with arguments "
                                  f"from the '{backend_name((a, b))}' backend.")
    raise forward_ad_not_implemented("_sparse_addmm")


def _check_compressed_shapes(a, b):
    """PyTorch's shape errors where its compressed kernels (or its sparse-by-sparse ones) run
    the product: the operands as given, a vector on the left as a row (a COO matrix by a
    dense one keeps addmm's wording, in _check_product)."""
    if not any(is_sparse(x) and x.layout is not L.sparse_coo for x in (a, b)) \
            and not (is_sparse(a) and is_sparse(b)):
        return
    if a.ndim == 2 and b.ndim == 1 and a.shape[1] != b.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({a.shape[0]}), mat "
                           f"({a.shape[0]}x{a.shape[1]}), vec ({b.shape[0]})")
    if a.ndim in (1, 2) and b.ndim == 2 and a.shape[-1] != b.shape[0]:
        rows = a.shape[0] if a.ndim == 2 else 1
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{a.shape[-1]} "
                           f"and {b.shape[0]}x{b.shape[1]})")


_NON_BLOCKED = (L.sparse_csr, L.sparse_csc)


def _layout_name(x):
    return L.short_name(x.layout) if is_sparse(x) else "Strided"


def _check_product_layouts(a, b, adding=False):
    """PyTorch's errors for the layouts its CPU products lack: a BSC matrix times a dense
    one (a BSR one on the right), and any product of two sparse matrices other than COO by
    COO or CSR/CSC by CSR/CSC (``adding``, as ``addmm``: not CSC by CSR, and no COO
    ``mat2``)."""
    if adding and is_sparse(b) and b.layout is L.sparse_coo and \
            (not is_sparse(a) or a.layout is L.sparse_coo):
        raise RuntimeError(f"addmm_sparse_dense: expected either 'mat1' to have sparse layout "
                           f"and 'mat2' to have strided layout, got 'mat1' with layout "
                           f"{_layout_name(a)} and 'mat2' with layout Sparse")
    if is_sparse(a) and is_sparse(b):
        if a.layout is L.sparse_coo and b.layout is L.sparse_coo:
            return
        if L.blocked(a.layout) and not adding:
            raise RuntimeError(f"zeros_sparse_compressed expected sparse compressed "
                               f"(non-block) tensor layout but got {_layout_name(a)}")
        if a.layout in _NON_BLOCKED and b.layout in _NON_BLOCKED and \
                not (adding and a.layout is L.sparse_csc and b.layout is L.sparse_csr):
            return
        added = "Strided" if adding else _layout_name(a)
        raise RuntimeError(f"addmm: computation on CPU is not implemented for {added} + "
                           f"{_layout_name(a)} @ {_layout_name(b)}")
    if is_sparse(a) and a.layout is L.sparse_bsc:
        if b.ndim == 1:
            raise RuntimeError("torch.addmv: operation not supported for mat with SparseBsc "
                               "layout")
        raise RuntimeError("addmm: computation on CPU is not implemented for Strided + "
                           "SparseBsc @ Strided")
    if is_sparse(b) and b.layout is L.sparse_bsr:
        raise RuntimeError("addmm: computation on CPU is not implemented for Strided + "
                           "Strided @ SparseBsr")


def mm(input, mat2, dense_grad=True):
    """``input @ mat2`` where either is sparse (``torch.mm``, ``torch.spmm``; with
    ``dense_grad=False``, ``torch.sparse.mm``)."""
    if not (is_sparse(input) or is_sparse(mat2)):
        return ember.mm(input, mat2)
    if is_sparse(input) and input.layout is L.sparse_coo and input.ndim == 1:
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got "
                         "-2)")
    if not dense_grad:
        _check_compressed_matrix(input)
    if not (is_sparse(input) or dense_grad) and input.ndim == 1:
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got "
                         "-2)")
    if is_sparse(input) and not is_sparse(mat2) and mat2.ndim == 1:
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got "
                         "1)")
    _check_compressed_matrix(input)
    _check_coo_rows(input, mat2)
    refuse_batched("mm", (input, mat2))         # (PyTorch's errors above; ember's here)
    result = _product(input, mat2, dense_grad=dense_grad)
    if dense_grad:
        return _named(result, "MmBackward0")
    if is_sparse(input) and is_sparse(mat2):    # sparse.mm's own sparse-by-sparse kernels
        return _named(result, "SparseSparseMatmulBackward0" if input.layout is L.sparse_coo
                      else "SparseAddmmBackward0")
    return result                               # SparseAddmmBackward0 already


HANDLERS["mm"] = HANDLERS["spmm"] = mm


def _check_compressed_matrix(x):
    """PyTorch's error where its compressed product kernels meet a batched operand."""
    if is_sparse(x) and x.layout is not L.sparse_coo and x.ndim != 2:
        raise RuntimeError(f"mat1 must be a matrix, got {x.ndim}-D tensor")


def _check_coo_rows(input, mat2):
    """PyTorch's error where its COO ``mm`` of more than 2 dims (a matrix as addmm's ``input``
    made from its first dim) broadcasts that matrix to one from its second."""
    if is_sparse(input) and input.layout is L.sparse_coo and input.ndim > 2 and \
            not is_sparse(mat2) and mat2.ndim == 2 and input.shape[0] != input.shape[1]:
        target = [input.shape[0], mat2.shape[1]]
        raise RuntimeError(f"The expanded size of the tensor ({target[0]}) must match the "
                           f"existing size ({input.shape[1]}) at non-singleton dimension 0.  "
                           f"Target sizes: {target}.  Tensor sizes: "
                           f"{[input.shape[1], mat2.shape[1]]}")


def _refuse_batched_matmul(input, other):
    """PyTorch's errors where matmul folds or expands a sparse operand of more than 2 dims
    (it has no kernel for either)."""
    for x in (input, other):
        if not (is_sparse(x) and x.ndim > 2):
            continue
        kind = L.short_name(x.layout)
        if max(input.ndim, other.ndim) > 2 and min(input.ndim, other.ndim) > 2:
            raise RuntimeError(f"expand is unsupported for {kind} tensors")
        if x.layout is L.sparse_coo:
            raise RuntimeError("reshape is not implemented for sparse tensors")
        raise RuntimeError(f"Sparse {kind[len('Sparse'):].upper()} tensors do not have strides")

@handles("mv")
def _mv(input, vec):
    if is_sparse(vec):
        raise RuntimeError("mv: the vector must be dense")
    if vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, 2, {vec.ndim}")
    return _named(_product(input, vec, "mv", dense_grad=True), "MvBackward0")


@handles("matmul")
def matmul(input, other):
    """``input @ other`` with a sparse operand: 2-D by 2-D or by a vector."""
    _refuse_batched_matmul(input, other)
    if input.ndim == 1 and other.ndim == 1:
        raise NotImplementedError(f"Could not run 'aten::dot' with arguments from the "
                                  f"'{backend_name((input, other))}' backend.")
    vector = other if other.ndim == 1 else input if input.ndim == 1 else None
    if (input.ndim, other.ndim) in ((2, 2), (2, 1), (1, 2)) and not is_sparse(vector):
        # PyTorch: mm, mv, or a vector on the left unsqueezed into mm and squeezed back
        name = {2: "MmBackward0", 1: "MvBackward0"}[other.ndim] if input.ndim == 2 \
            else "SqueezeBackward4"
        kernel = "mv" if other.ndim == 1 else "addmm"   # whose error a bad shape raises
        return _named(_product(input, other, kernel, dense_grad=True), name)
    raise NotImplementedError(f"matmul: ember multiplies sparse tensors only as 2-D matrices "
                              f"(by a matrix or a vector), not {input.ndim}-D by "
                              f"{other.ndim}-D")


def addmm(input, mat1, mat2, *, beta=1, alpha=1, dense_grad=False):
    """``beta * input + alpha * (mat1 @ mat2)`` with a sparse ``mat1``
    (``torch.sparse.addmm``; ``torch.addmm`` with ``dense_grad=True``)."""
    if is_sparse(input):
        _refuse_sparse_input(input, mat1, mat2)
    elif not (is_sparse(mat1) or is_sparse(mat2)):       # (sparse.addmm of dense matrices)
        return ember.addmm(input, mat1, mat2, beta=beta, alpha=alpha)
    _check_compressed_matrix(mat1)
    _check_product_layouts(mat1, mat2, adding=True)
    product = _product(mat1, mat2, "addmm", dense_grad=dense_grad)
    if alpha != 1:
        product = product * alpha
    if beta != 0:
        product = (input if beta == 1 else input * beta) + product
    return _named(product, "AddmmBackward0" if dense_grad else "SparseAddmmBackward0")


def _refuse_sparse_input(input, mat1, mat2):
    """PyTorch's CPU errors for a sparse matrix added (its only kernel with one adds CSR
    products of CSR matrices, which ember lacks)."""
    if input.layout is L.sparse_coo and (not is_sparse(mat1) or mat1.layout is L.sparse_coo):
        raise RuntimeError("addmm_sparse_dense: expected strided result tensor, got tensor "
                           "with layout Sparse")
    if L.blocked(input.layout):
        raise RuntimeError(f"empty_sparse_compressed expected sparse compressed (non-block) "
                           f"tensor layout but got {_layout_name(input)}")
    if input.layout is L.sparse_coo or not all(is_sparse(m) for m in (mat1, mat2)):
        raise RuntimeError(f"addmm: computation on CPU is not implemented for "
                           f"{_layout_name(input)} + {_layout_name(mat1)} @ {_layout_name(mat2)}")
    raise NotImplementedError("addmm: ember needs a dense input (the matrix added)")


HANDLERS["addmm"] = lambda *args, **kwargs: addmm(*args, **kwargs, dense_grad=True)


@handles("bmm")
def _bmm(input, mat2):
    """``torch.bmm`` of a batch of COO matrices (sparse_dim 3) by a dense batch: one product
    of the block-diagonal matrix the batch makes with the dense batch stacked by rows. A
    sparse leaf's gradient is dense, as ``mm``'s."""
    if is_sparse(mat2):
        raise RuntimeError("bmm_sparse: Tensor 'mat2' must be dense")
    if input.layout is not L.sparse_coo:
        raise NotImplementedError(f"Could not run 'aten::bmm' with arguments from the "
                                  f"'{backend_name((input,))}' backend: ember multiplies "
                                  f"batches of COO matrices only (convert with .to_dense() "
                                  f"first).")
    if input.sparse_dim() != 3:
        raise RuntimeError(f"bmm_sparse: Tensor 'self' must have 3 sparse dims, but has "
                           f"{input.sparse_dim()}")
    if mat2.ndim != 3:
        raise RuntimeError(f"bmm_sparse: Tensor 'mat2' must have 3 dims, but has {mat2.ndim}")
    batch, n, m = input.shape
    if mat2.shape[0] != batch:
        raise RuntimeError("bmm_sparse: 'self.size(0)' and 'mat2.size(0)' must match")
    if mat2.shape[1] != m:
        raise RuntimeError("bmm_sparse: 'self.size(2)' and 'mat2.size(1)' must match")
    if FORWARD_OPEN[0]:
        _refuse_forward_ad(input, mat2, True)
    b, i, j = input._i.unbind(0)
    blocks = coo(ember.stack([b * n + i, b * m + j]), input._v, (batch * n, batch * m),
                 input._coalesced)
    anchor = _anchor(input, True)
    if anchor is not None:
        anchor = ember.block_diag(*anchor.unbind(0))
    out = _sparse_times_dense(blocks, mat2.reshape(batch * m, mat2.shape[2]), "addmm", anchor)
    return _named(out.reshape(batch, n, mat2.shape[2]), "BmmBackward0")


@handles("nn.functional.linear")
def _linear(input, weight, bias=None):
    """``F.linear`` with a sparse weight (a pruned layer made sparse) or a sparse 2-D input,
    decomposed as PyTorch does: with a bias, a 2-D input through ``addmm`` (which refuses a
    dense-by-COO product, as there) and other contiguous inputs through the transposed
    ``addmm`` of the weight by the rows; otherwise the product of the rows with the transposed
    weight, plus the bias. A sparse weight's gradient is dense."""
    if is_sparse(bias):
        raise NotImplementedError("linear: ember needs a dense bias")
    if input.ndim == 0 or weight.ndim == 0:
        raise RuntimeError(f"both arguments to linear need to be at least 1D, but they are "
                           f"{input.ndim}D and {weight.ndim}D")
    transposed = bias is not None and input.ndim != 2 and not is_sparse(input) \
        and input.is_contiguous()
    if bias is not None and input.ndim == 2:
        return HANDLERS["addmm"](bias, input, weight.t())
    shape = tuple(input.shape[:-1]) + (weight.shape[0],)
    if transposed:
        rows = input.reshape(-1, input.shape[-1])
        out = HANDLERS["addmm"](bias.unsqueeze(-1), weight, rows.t()).t()
        return _named(out.reshape(shape), "ViewBackward0")
    if is_sparse(input) or input.ndim <= 2:
        out = matmul(input, weight.t())
    else:
        rows = input.reshape(-1, input.shape[-1])
        out = _named(matmul(rows, weight.t()).reshape(shape), "UnsafeViewBackward0")
    return out if bias is None else out + bias


ANY_LAYOUT.add("nn.functional.linear")


@handles("addmv")
def _addmv(input, mat, vec, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat @ vec)`` for a compressed ``mat`` (PyTorch has no COO
    kernel)."""
    if not is_sparse(mat) or mat.layout is L.sparse_coo or is_sparse(input) or is_sparse(vec):
        raise NotImplementedError(f"Could not run 'aten::addmv' with arguments from the "
                                  f"'{'SparseCPU' if is_sparse(mat) else 'CPU'}' backend.")
    product = _mv(mat, vec)
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return (input if beta == 1 else input * beta) + product


ANY_LAYOUT.add("addmv")


def sampled_addmm(input, mat1, mat2, *, beta=1.0, alpha=1.0, out=None):
    """``torch.sparse.sampled_addmm``: ``beta * input + alpha * (mat1 @ mat2)`` computed only
    where the CSR matrix ``input`` stores elements (a CSR result with ``input``'s pattern)."""
    _check_sampled(input, mat1, mat2)
    rows = expand_pointers(input._crow)
    products = (mat1.index_select(0, rows) * mat2.t().index_select(0, input._col)).sum(-1)
    values = input._v * beta + products * alpha
    # int64 indices, as PyTorch gives (an ``out`` keeps its own: _replace)
    crow, col = C.with_index_dtype(input._crow, input._col, ember.int64)
    result = _named(csr(crow, col, values, input.shape), "SparseSampledAddmmBackward0")
    if out is not None:
        from ember.sparse._inplace import _replace
        return _replace(out, result)
    return result


def _check_sampled(input, mat1, mat2):
    if not is_sparse(input) or input.layout is not L.sparse_csr:
        backend = "SparseCPU" if is_sparse(input) else "CPU"
        raise NotImplementedError(f"Could not run 'aten::sparse_sampled_addmm' with arguments "
                                  f"from the '{backend}' backend: ember computes it only for a "
                                  f"sparse_csr input")
    for name, m in (("mat1", mat1), ("mat2", mat2)):
        if is_sparse(m):
            raise RuntimeError(f"sampled_addmm: Expected {name} to have strided layout, but "
                               f"got {'Sparse' if m.is_sparse else 'SparseCsr'}")
        if m.ndim != 2:
            raise RuntimeError(f"sampled_addmm: Expected {name} to be a matrix, got "
                               f"{m.ndim}-D tensor")
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(f"sparse_sampled_addmm: Expected self to be a floating-point or "
                           f"complex tensor, but got {input.dtype._torch_name}")
    if mat1.dtype is not mat2.dtype:
        raise RuntimeError(f"sampled_addmm: Expected mat1 and mat2 to have the same dtype, but "
                           f"got {mat1.dtype._torch_name} and {mat2.dtype._torch_name}")
    if mat1.dtype is not input.dtype:
        raise RuntimeError(f"sampled_addmm: Expected mat1 and self to have the same dtype, but "
                           f"got {mat1.dtype._torch_name} and {input.dtype._torch_name}")
    if input.shape[0] != mat1.shape[0]:
        raise RuntimeError("sampled_addmm: self.shape[-2] must match mat1.shape[-2]")
    if input.shape[1] != mat2.shape[1]:
        raise RuntimeError("sampled_addmm: self.shape[-1] must match mat2.shape[-1]")
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"sampled_addmm: mat1 and mat2 shapes cannot be multiplied "
                           f"({mat1.shape[0]}x{mat1.shape[1]} and {mat2.shape[0]}x"
                           f"{mat2.shape[1]})")
