"""``s.norm(p)`` of a sparse COO tensor, as PyTorch's norm_sparse: a full reduction over the
stored values once coalesced (so implicit zeros count for nothing, even for p <= 0), under a
NormBackward1 node whose backward works for p = 0 and 1 only (PyTorch's derivative formulas
for the other orders call ops that have no sparse kernel)."""

import math
import numbers

import ember
from ember.autograd.function import Function
from ember.sparse import _layouts as L
from ember.sparse._dispatch import backend_name, handles
from ember.sparse._refusals import bare_repr

__all__ = ["norm"]


@handles("norm")
def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """The ``p``-norm of all the values a COO tensor stores (``dim``, if given, names all its
    dims); PyTorch's errors for a ``dtype``, ``keepdim=True`` or a partial reduction."""
    backend = backend_name((input,))
    if input.layout is not L.sparse_coo:
        raise NotImplementedError(f"Could not run 'aten::norm.out' with arguments from the "
                                  f"'{backend}' backend.")
    if isinstance(p, str) and p not in ("fro", "nuc"):
        raise RuntimeError(f"only valid string values are 'fro' and 'nuc', found {p}")
    if p == "nuc":
        raise NotImplementedError(f"Could not run 'aten::_linalg_svd' with arguments from the "
                                  f"'{backend}' backend.")
    if dtype is not None:
        if p == "fro":
            raise ValueError("dtype argument is not supported in frobenius norm")
        raise RuntimeError("norm_sparse currently does not support 'dtype' argument")
    _check_full(dim, input.ndim)
    if keepdim:
        raise RuntimeError("norm_sparse currently does not support keepdim=True")
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(f"norm(): input dtype should be either floating point or complex. "
                           f"Got {input.dtype._torch_name} instead.")
    order = 2.0 if p == "fro" else float(p)
    return _SparseNorm.apply(input.coalesce()._v, order, p == "fro", input.ndim, backend)


def _check_full(dim, ndim):
    if dim is None:
        return
    dims = [dim] if isinstance(dim, numbers.Integral) else list(dim)
    if dims and sorted(d % ndim if ndim else d for d in dims) != list(range(ndim)):
        raise RuntimeError("norm_sparse currently only supports full reductions, so 'dim' must "
                           "either be empty or contain all dimensions of the input")


class _SparseNorm(Function):
    """The ``order``-norm of the coalesced ``values``; the gradient goes back through them."""

    _node_name = "NormBackward1"

    @staticmethod
    def forward(ctx, values, order, fro, ndim, backend):
        ctx.order, ctx.fro, ctx.ndim, ctx.backend = order, fro, ndim, backend
        ctx.save_for_backward(values)
        return ember.linalg.vector_norm(values, order)

    @staticmethod
    def backward(ctx, grad):
        order = ctx.order
        if order == 0:
            return None, None, None, None, None
        if order == 1:
            values, = ctx.saved_tensors
            return grad * values.sgn(), None, None, None, None
        if order == 2 and not ctx.fro:
            raise RuntimeError(f"Sparse division requires a scalar or zero-dim dense tensor "
                               f"divisor (got shape {[1] * ctx.ndim} for divisor)")
        missing = ("masked_fill_.Scalar" if ctx.fro else
                   "eq.Tensor" if math.isinf(order) else "pow_.Scalar")
        raise NotImplementedError(f"Could not run 'aten::{missing}' with arguments from the "
                                  f"'{ctx.backend}' backend.")


_SparseNorm._node_class().__repr__ = bare_repr
