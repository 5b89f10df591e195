"""``torch.hspmm`` and ``torch.smm``: a sparse COO matrix times a dense one, the product kept
sparse over the rows the sparse matrix stores (hspmm: one row of values per stored row, a
hybrid tensor with one dense dimension; smm: every element of those rows). PyTorch has no
derivative for either: their results refuse backward (a node named NotImplemented)."""

import ember
from ember._tensor import Tensor
from ember.autograd.grad_mode import no_grad
from ember.ops.random_nodes import NOT_IMPLEMENTED, sampled
from ember.sparse import _layouts as L
from ember.sparse._dispatch import is_sparse
from ember.sparse._tensor import coo

__all__ = ["hspmm", "smm"]


def _check(mat1, mat2, name):
    if mat2.ndim != 2:
        raise RuntimeError(f"{name}: Argument #3: matrices expected, got {mat2.ndim}D tensor")
    if mat2.shape[0] != mat1.shape[1]:
        raise RuntimeError(f"{name}: Argument #3: Expected dim 0 size {mat1.shape[1]}, got "
                           f"{mat2.shape[0]}")
    if mat2.dtype is not mat1.dtype:
        raise RuntimeError(f"expected scalar type {mat1.dtype._torch_name} but found "
                           f"{mat2.dtype._torch_name}")


def _stored_rows(mat1, mat2, kernel):
    """The rows ``mat1`` stores (sorted, once each) and those rows of ``mat1 @ mat2``."""
    _check(mat1, mat2, kernel)
    with no_grad():
        rows = mat1._indices()[0].unique()
        return rows, ember.mm(mat1, mat2).index_select(0, rows)


def _refusing_backward(values, mat1, mat2, kernel):
    """``values``, under a node that refuses backward when ``mat1`` or ``mat2`` needs grad."""
    return sampled([mat1._v, mat2], values, NOT_IMPLEMENTED, kernel)


def hspmm(mat1, mat2):
    """``mat1 @ mat2`` as a hybrid COO tensor: the stored rows of the sparse ``mat1``, each
    with its dense row of the product."""
    if not is_sparse(mat1) or mat1.layout is not L.sparse_coo or is_sparse(mat2):
        backend = "CPU" if not is_sparse(mat1) else \
            "SparseCPU" if mat1.layout is L.sparse_coo else "SparseCsrCPU"
        raise NotImplementedError(f"Could not run 'aten::hspmm' with arguments from the "
                                  f"'{backend}' backend.")
    rows, values = _stored_rows(mat1, mat2, "hspmm")
    values = _refusing_backward(values, mat1, mat2, "hspmm")
    return coo(rows.unsqueeze(0), values, ember.Size([mat1.shape[0], mat2.shape[1]]))


def smm(input, mat):
    """``input @ mat`` as a COO tensor holding every element of the rows the sparse ``input``
    stores."""
    if not is_sparse(input) or input.layout is not L.sparse_coo:
        raise RuntimeError("tensor.sspaddmm(...) can only be called on sparse tensors")
    rows, values = _stored_rows(input, mat, "sspaddmm")
    k = mat.shape[1]
    indices = ember.stack([rows.repeat_interleave(k), ember.arange(k).repeat(rows.numel())])
    values = _refusing_backward(values.reshape(-1), input, mat, "sspaddmm")
    return coo(indices, values, ember.Size([input.shape[0], k]))


Tensor.smm = smm
