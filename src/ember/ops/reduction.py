"""Reductions over one, several or all dims: sum, mean, prod, ..."""

from ember import _dtype as D
from ember.ops._dims import reduction_dims
from ember.ops._promotion import Policy
from ember.ops._registry import op


def expand_reduced(grad, shape, dims, keepdim):
    """Broadcast a reduction's gradient back over the reduced ``dims`` of ``shape``."""
    if not keepdim and dims:
        kept = list(grad.shape)
        for d in dims:
            kept.insert(d, 1)
        grad = grad.reshape(kept)
    return grad.expand(shape)


def _sum_rule(d, name, operands):
    return D.int64 if d.category <= D.INTEGRAL else d


SUM = Policy("sum", _sum_rule)      # integers and bool accumulate (and return) in int64


@op("sum(input, dim=None, keepdim=False, *, dtype=None)", promote=SUM, saves_inputs=False)
def sum(xp, x, dim, keepdim, dtype):
    """The sum over ``dim`` (all dims by default)."""
    dims = reduction_dims(dim, x.ndim)
    if dtype is not None:
        x = x.astype(dtype.np)
    return xp.sum(x, axis=dims, keepdims=keepdim)


@sum.derivative
def _(grad, x, dim, keepdim, dtype):
    return expand_reduced(grad, x.shape, reduction_dims(dim, x.ndim), keepdim)
