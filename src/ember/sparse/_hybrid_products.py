"""``torch.hspmm``, ``torch.smm`` and ``torch.sspaddmm``: a sparse COO matrix times a dense
one, the product kept sparse over the rows the sparse matrix stores (hspmm: one row of values
per stored row, a hybrid tensor with one dense dimension; smm: every element of those rows;
sspaddmm: those elements after the scaled elements of a sparse ``input``, uncoalesced).
PyTorch has no derivative for any of them: their results refuse backward (a node named
NotImplemented). The argument checks run in PyTorch's order, with its messages."""

import ember
from ember._tensor import Tensor
from ember.autograd.grad_mode import no_grad
from ember.ops.random_nodes import NOT_IMPLEMENTED, sampled
from ember.sparse import _layouts as L
from ember.sparse._dispatch import is_sparse
from ember.sparse._tensor import coo

__all__ = ["hspmm", "smm", "sspaddmm"]


def _layout_name(x):
    return L.short_name(x.layout) if is_sparse(x) else "Strided"


def _is_compressed(x):
    return is_sparse(x) and x.layout is not L.sparse_coo


def _no_kernel(kernel, operands):
    """PyTorch's error when no operand is sparse (its CPU kernel) or one is compressed."""
    if any(_is_compressed(x) for x in operands):
        backend = "SparseCsrCPU"
    elif not any(is_sparse(x) for x in operands):
        backend = "CPU"
    else:
        return None
    return NotImplementedError(f"Could not run 'aten::{kernel}' with arguments from the "
                               f"'{backend}' backend.")


def _check_matrix(mat1, mat2, kernel):
    """The shape and dtype checks of PyTorch's hybrid products (``mat1`` sparse)."""
    if mat1.sparse_dim() != 2:
        raise RuntimeError(f"{kernel}: Argument #2: matrices expected, got "
                           f"{mat1.sparse_dim()}D tensor")
    if mat1.dense_dim():
        raise RuntimeError(f"{kernel}: Argument #2: scalar values expected, got "
                           f"{mat1.dense_dim()}D values")
    if mat2.ndim != 2:
        raise RuntimeError(f"{kernel}: Argument #3: matrices expected, got {mat2.ndim}D tensor")
    if mat2.shape[0] != mat1.shape[1]:
        raise RuntimeError(f"{kernel}: Argument #3: Expected dim 0 size {mat1.shape[1]}, got "
                           f"{mat2.shape[0]}")


def _check_dtype(mat1, mat2):
    if mat2.dtype is not mat1.dtype:
        raise RuntimeError(f"expected scalar type {mat1.dtype._torch_name} but found "
                           f"{mat2.dtype._torch_name}")


def _refuse_dtype(kernel, dtype, refused):
    if dtype in refused:
        raise NotImplementedError(f'"{kernel}" not implemented for \'{dtype._torch_name}\'')


def _stored_rows(mat1, mat2):
    """The rows ``mat1`` stores (sorted, once each) and those rows of ``mat1 @ mat2``."""
    with no_grad():
        rows = mat1._indices()[0].unique()
        return rows, ember.mm(mat1, mat2).index_select(0, rows)


def _refusing_backward(values, tensors, kernel):
    """``values``, under a node that refuses backward when one of ``tensors`` needs grad."""
    return sampled(tensors, values, NOT_IMPLEMENTED, kernel)


def hspmm(mat1, mat2):
    """``mat1 @ mat2`` as a hybrid COO tensor: the stored rows of the sparse ``mat1``, each
    with its dense row of the product."""
    refused = _no_kernel("hspmm", (mat1, mat2))
    if refused is not None:
        raise refused
    _check_matrix(mat1, mat2, "hspmm")
    if is_sparse(mat2):
        raise RuntimeError("addmm_sparse_dense: expected strided result tensor, got tensor "
                           "with layout Sparse")
    _check_dtype(mat1, mat2)
    _refuse_dtype("addmm_sparse_dense", mat1.dtype, (ember.bool,))
    rows, values = _stored_rows(mat1, mat2)
    values = _refusing_backward(values, [mat1._v, mat2], "hspmm")
    return coo(rows.unsqueeze(0), values, ember.Size([mat1.shape[0], mat2.shape[1]]))


def _check_sspaddmm_layouts(input, mat1, mat2):
    if not any(is_sparse(x) for x in (input, mat1, mat2)):
        raise RuntimeError("tensor.sspaddmm(...) can only be called on sparse tensors")
    refused = _no_kernel("sspaddmm.out", (input, mat1, mat2))
    if refused is not None:
        raise refused
    if not is_sparse(mat1):
        raise RuntimeError(f"sspaddmm: expected 'mat1' to have sparse layout, got 'mat1' with "
                           f"layout {_layout_name(mat1)}")
    if is_sparse(mat2):
        raise RuntimeError(f"sspaddmm: expected 'mat2' to have strided layout, got 'mat2' with "
                           f"layout {_layout_name(mat2)}")


# the dtypes PyTorch's CPU kernel (``sspmm``) has no code for
_NO_SSPMM = (ember.float16, ember.bfloat16, ember.bool)


def _product_part(mat1, mat2, alpha):
    """The (indices, values) of the stored rows of ``alpha * (mat1 @ mat2)``: every column of
    each row ``mat1`` stores."""
    rows, values = _stored_rows(mat1, mat2)
    k = mat2.shape[1]
    device = rows.device
    indices = ember.stack([rows.repeat_interleave(k),
                           ember.arange(k, device=device).repeat(rows.numel())])
    values = values.reshape(-1)
    return indices, values if alpha == 1 else values.mul_(alpha)


def smm(input, mat):
    """``input @ mat`` as a COO tensor holding every element of the rows the sparse ``input``
    stores."""
    if _is_compressed(input):
        raise RuntimeError("ember.empty: Only batched sparse compressed (non-block) tensors are "
                           "supported, but got size [0]")
    _check_sspaddmm_layouts(input, input, mat)
    _check_matrix(input, mat, "sspaddmm")
    _check_dtype(input, mat)
    _refuse_dtype("sspmm", input.dtype, _NO_SSPMM)
    indices, values = _product_part(input, mat, 1)
    values = _refusing_backward(values, [input._v, mat], "sspaddmm")
    return coo(indices, values, ember.Size([input.shape[0], mat.shape[1]]))


def sspaddmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * (mat1 @ mat2)`` for sparse COO ``input`` and ``mat1`` and a
    strided ``mat2`` (``torch.sspaddmm``): an uncoalesced COO tensor holding ``input``'s
    stored elements (scaled) and then every element of the rows ``mat1`` stores."""
    if _is_compressed(input):
        raise RuntimeError("ember.empty: Only batched sparse compressed (non-block) tensors are "
                           "supported, but got size [0]")
    _check_sspaddmm_layouts(input, mat1, mat2)
    if not is_sparse(input):
        raise RuntimeError("self.is_sparse() INTERNAL ASSERT FAILED: "
                           "_internal_get_SparseTensorImpl: not a sparse tensor")
    _check_matrix(mat1, mat2, "sspaddmm")
    _check_input_size(input, mat1, mat2)
    _check_dtype(mat1, mat2)
    if input.dtype is not mat1.dtype:
        raise RuntimeError(f"dtype of values ({mat1.dtype._torch_name}) must match dtype of "
                           f"sparse tensor ({input.dtype._torch_name})")
    with no_grad():
        kept = input._v.clone().mul_(beta)      # (the in-place casting rules, as PyTorch's)
    _refuse_dtype("sspmm", mat1.dtype, _NO_SSPMM)
    indices, values = _product_part(mat1, mat2, alpha)
    if input._nnz() and (input.sparse_dim() != 2 or input.dense_dim()):
        raise RuntimeError("sspaddmm: ember adds only a 2-D sparse input with scalar values")
    if input._nnz():
        indices = ember.cat([input._i, indices], 1)
        values = ember.cat([kept, values])
    values = _refusing_backward(values, [input._v, mat1._v, mat2], "sspaddmm")
    result = coo(indices, values, ember.Size([mat1.shape[0], mat2.shape[1]]))
    result._coalesced = False               # even with one element, as PyTorch's
    if out is not None:
        from ember.sparse._inplace import _replace
        return _replace(out, result)
    return result


def _check_input_size(input, mat1, mat2):
    if input.ndim < 2:
        raise IndexError(f"Dimension out of range (expected to be in range of [-{input.ndim}, "
                         f"{input.ndim - 1}], but got 1)")
    for d, n in enumerate((mat1.shape[0], mat2.shape[1])):
        if input.shape[d] != n:
            raise RuntimeError(f"sspaddmm: Argument #1: Expected dim {d} size {n}, got "
                               f"{input.shape[d]}")


def _sspaddmm_method(self, mat1, mat2, *, beta=1, alpha=1):
    """``ember.sspaddmm(self, mat1, mat2, beta=beta, alpha=alpha)``."""
    return sspaddmm(self, mat1, mat2, beta=beta, alpha=alpha)


_sspaddmm_method.__name__ = _sspaddmm_method.__qualname__ = "sspaddmm"
Tensor.smm = smm
Tensor.sspaddmm = _sspaddmm_method
