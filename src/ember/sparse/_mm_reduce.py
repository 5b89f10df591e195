"""``torch.sparse.mm(csr, dense, reduce)``: each output element reduces the products of one
row's stored entries with the dense matrix by sum, mean, amax or amin (rows without entries
give 0), as graph libraries aggregate neighbours. PyTorch computes it for CSR matrices only.

The forward and backward are ember ops on the CSR parts; 16-bit inputs are computed in float32
and rounded once (PyTorch's kernel rounds its accumulator to the dtype after each entry, so
16-bit results may differ from its by a unit in the last place). For amax/amin the gradient
goes to the first entry of the row that attains the extreme (the one PyTorch's kernel
records)."""

import ember
from ember.autograd.function import Function
from ember.sparse import _layouts as L
from ember.sparse._convert import pattern
from ember.sparse._dispatch import is_sparse

__all__ = ["mm_reduce"]

_KINDS = {"sum": "sum", "mean": "mean", "amax": "amax", "max": "amax", "amin": "amin",
          "min": "amin", "prod": "prod"}


def mm_reduce(mat1, mat2, reduce):
    """``mat1 @ mat2`` with the products of each row reduced by ``reduce``, for a CSR
    ``mat1`` and a dense ``mat2``; differentiable in both."""
    if not isinstance(reduce, str):
        raise TypeError(f"_sparse_mm(): argument 'reduce' (position 3) must be str, not "
                        f"{type(reduce).__name__}")
    kind = _KINDS.get(reduce)
    if kind is None:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    _check(mat1, mat2, kind)
    return SparseMmReduce.apply(mat1._v, mat2, pattern(mat1), kind)


def _check(mat1, mat2, kind):
    if not is_sparse(mat1) or mat1.layout is L.sparse_coo:
        backend = "SparseCPU" if is_sparse(mat1) else "CPU"
        raise NotImplementedError(f"Could not run 'aten::_sparse_mm_reduce_impl' with "
                                  f"arguments from the '{backend}' backend: it is computed for "
                                  f"sparse_csr matrices only")
    if mat1.layout is not L.sparse_csr:
        raise RuntimeError(f"sparse_mm_reduce: expect self to be SparseCsr, got "
                           f"{L.short_name(mat1.layout)}")
    if is_sparse(mat2):
        raise RuntimeError(f"Expected tensor to have Strided Layout, but got tensor with "
                           f"{L.short_name(mat2.layout)} Layout (while checking arguments for "
                           f"sparse_mm_reduce)")
    if mat1.ndim != 2:
        raise RuntimeError(f"sparse_mm_reduce: expected self to be a 2-D tensor, got "
                           f"{mat1.ndim}-D tensor.")
    if mat2.ndim != 2 or mat2.shape[0] != mat1.shape[1]:
        size0 = mat2.shape[0] if mat2.ndim else 0
        raise RuntimeError(f"Expected a tensor of dimension 2 and tensor.size[0] == "
                           f"{mat1.shape[1]} but got: dimension {mat2.ndim} and tensor.size[0] "
                           f"= {size0}")
    if mat2.dtype is not mat1.dtype:
        raise RuntimeError(f"Expected tensor for argument #1 'other' to have scalar type "
                           f"{mat1.dtype._torch_name}; but got ember.{mat2.dtype._legacy} "
                           f"instead (while checking arguments for sparse_mm_reduce)")
    if kind == "prod":
        raise RuntimeError("sparse_mm_reduce: reduce type of prod has not been enabled.")
    if not mat1.dtype.is_floating_point:
        raise NotImplementedError(f"\"spmm_reduce_kernel\" not implemented for "
                                  f"'{mat1.dtype._torch_name}'")


def _wide(t):
    return t.float() if t.dtype.itemsize == 2 else t


class SparseMmReduce(Function):
    """The reduced product of a CSR pattern with ``values`` and a dense matrix (its node is
    named after PyTorch's, SparseMmReduceImplBackward0)."""

    _node_name = "SparseMmReduceImplBackward0"

    @staticmethod
    def forward(ctx, values, dense, p, kind):
        ctx.pattern, ctx.kind = p, kind
        products = _wide(dense).index_select(0, p.col) * _wide(values).unsqueeze(1)
        rows = p.rows.unsqueeze(1).expand_as(products)
        out = products.new_zeros((p.shape[0], dense.shape[1]))
        out = out.scatter_reduce(0, rows, products, kind, include_self=False).to(dense.dtype)
        ctx.save_for_backward(values, dense, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        values, dense, out = ctx.saved_tensors
        p, kind = ctx.pattern, ctx.kind
        grad, values16, dense16 = _wide(grad), values, dense
        values, dense = _wide(values), _wide(dense)
        picked = dense.index_select(0, p.col)
        grad_rows = grad.index_select(0, p.rows)            # (nnz, columns)
        counts = None
        if kind == "mean":
            counts = p.crow.diff().clamp(min=1).to(grad.dtype).index_select(0, p.rows)
        elif kind != "sum":
            grad_rows = grad_rows * _first_extremes(picked * values.unsqueeze(1), out, p)
        grad_values = grad_dense = None
        if ctx.needs_input_grad[0]:
            grad_values = (grad_rows * picked).sum(1)
            if counts is not None:                  # divided after the sum, as PyTorch
                grad_values = grad_values / counts
            grad_values = grad_values.to(values16.dtype)
        if ctx.needs_input_grad[1]:
            weights = values                        # the mean's are values / counts, rounded
            if counts is not None:                  # to the values' dtype, as PyTorch's
                weights = _wide(values16 / counts.to(values16.dtype))
            grad_dense = ember.zeros_like(dense).index_add(0, p.col,
                                                            grad_rows * weights.unsqueeze(1))
            grad_dense = grad_dense.to(dense16.dtype)
        return grad_values, grad_dense, None, None


def _first_extremes(products, out, p):
    """1 where an entry's product is its row's result and no earlier entry of the row's is,
    else 0 (per column)."""
    nnz = products.shape[0]
    hit = products.to(out.dtype) == out.index_select(0, p.rows)     # as rounded in forward
    position = ember.arange(nnz, device=products.device).unsqueeze(1).expand_as(hit)
    candidate = ember.where(hit, position, nnz)
    rows = p.rows.unsqueeze(1).expand_as(hit)
    first = ember.full(out.shape, nnz, device=products.device).scatter_reduce(
        0, rows, candidate, "amin")
    return (position == first.index_select(0, p.rows)).to(products.dtype)
