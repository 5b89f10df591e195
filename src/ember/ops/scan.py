"""Cumulative ops along one dim: cumsum, cumprod, cummax, cummin."""

import numpy as np

from ember import _dtype as D
from ember.backend import accumulate
from ember.ops import return_types
from ember.ops._dims import is_index, wrap_dim
from ember.ops._elementwise import conj_grad
from ember.ops._promotion import SAME
from ember.ops._reduce import SUM, any_zero, cast_input, constant, cpu_wide, grad_enabled
from ember.ops._registry import op
from ember.ops.binary_math import where
from ember.ops.indexing import CTYPE


def _accumulate(xp, name, x, dim, dtype):
    d = wrap_dim(dim, x.ndim, (name, "dim", 1))
    if dtype is D.bool_ and x.ndim and x.size:     # (a 0-d or empty input runs no kernel)
        raise NotImplementedError(f"\"{name}_out_cpu\" not implemented for 'Bool'")
    x = cast_input(x, dtype, name)
    if x.ndim == 0:
        return x.copy()
    x = xp.ascontiguousarray(x)          # PyTorch's scans return row-major results
    return getattr(xp, name)(cpu_wide(xp, x), axis=d).astype(x.dtype, copy=False)


def _accumulate_into(name):
    """The in-place variant of cumsum or cumprod: ``dtype=`` must be the tensor's own."""
    def variant(xp, dst, x, dim, dtype):
        ours = D.FROM_NUMPY[dst.dtype]
        if dtype is not None and dtype is not ours:
            raise RuntimeError(f"Bad in-place call: input tensor dtype {CTYPE[ours]} and output "
                               f"tensor dtype {CTYPE[dtype]} should match")
        xp.copyto(dst, _accumulate(xp, name, x, dim, None), casting="unsafe")
    return variant


def reverse_cumsum(t, dim):
    """Sums from each position to the end along ``dim`` (differentiable, through flips as
    PyTorch's)."""
    return t.flip(dim).cumsum(dim).flip(dim)


def _trivial_scan(x, dim):
    """Whether a running sum or product along ``dim`` passes its gradient through unchanged
    (at most one element, or one along ``dim``: PyTorch returns the gradient itself)."""
    return x.numel() <= 1 or x.shape[wrap_dim(dim, x.ndim)] == 1


@op("cumsum(input, dim, *, dtype=None)", promote=SUM, upcast=False, inplace=True,
    saves_inputs=False)
def cumsum(xp, x, dim, dtype):
    """Running sums along ``dim``."""
    return _accumulate(xp, "cumsum", x, dim, dtype)


cumsum.inplace_variant(_accumulate_into("cumsum"))


cumsum.refuse_integral_results()


@cumsum.derivative
def _(grad, x, dim, dtype):
    if _trivial_scan(x, dim):
        return grad
    return reverse_cumsum(grad, wrap_dim(dim, x.ndim))


@op("cumprod(input, dim, *, dtype=None)", promote=SUM, upcast=False, inplace=True)
def cumprod(xp, x, dim, dtype):
    """Running products along ``dim``."""
    return _accumulate(xp, "cumprod", x, dim, dtype)


cumprod.inplace_variant(_accumulate_into("cumprod"))


cumprod.refuse_integral_results()


@cumprod.derivative
def _(grad, x, dim, dtype, *, out):
    if _trivial_scan(x, dim):
        return grad
    d = wrap_dim(dim, x.ndim)
    if not any_zero(x):
        return reverse_cumsum(conj_grad(out) * grad, d) / conj_grad(x)
    if grad_enabled():
        return _cumprod_grad_exact(grad, x, d)
    return _cumprod_grad_zeros(grad, x, out, d)


def _cumprod_grad_zeros(grad, x, out, d):
    """The gradient where ``x`` has zeros, in O(n) as PyTorch's: before a slice's first zero
    the usual formula; at it, the product before it times the sum over the outputs up to the
    second zero of the running products after it; after it, zero. Masks select rather than
    multiply, so an inf or NaN past a zero does not spread to the entries that cannot see it;
    only the sum at the first zero takes grad as zero past the second, times the running
    product there (NaN where that is inf, as PyTorch's)."""
    seen = constant(lambda xp, a: xp.cumsum(a == 0, axis=d, dtype=xp.int32), x)
    after = seen != 0                                   # from the first zero on
    span = seen == 1                                    # [first zero, second zero)
    first = span & (x == 0)
    prior = conj_grad(x.masked_fill(after, 1))
    early = reverse_cumsum((grad * conj_grad(out)).masked_fill(after, 0), d) / prior
    later = x.masked_fill(~(span ^ first), 1).cumprod(d)        # x_j for first < j <= k
    late = (grad.masked_fill(~span, 0) * conj_grad(later)).sum(d, keepdim=True)
    return where(first, prior.prod(d, keepdim=True) * late, early)    # early: 0 from first on


def _cumprod_grad_exact(grad, x, d):
    """The gradient where ``x`` has zeros, differentiable again (O(n^2) along ``d``): for each i,
    the product of the x_j before it times each running product of those after it, summed over
    the outputs k >= i (selected, not multiplied by masks, so an inf elsewhere gives no NaN)."""
    n = x.shape[d]
    shape = [n if i in (d, d + 1) else 1 for i in range(x.ndim + 1)]
    onward = constant(lambda xp, a: xp.triu(xp.ones((n, n), dtype=bool)).reshape(shape), x)
    rows = x.unsqueeze(d)
    prior = rows.masked_fill(onward, 1).prod(d + 1, keepdim=True)          # x_j for j < i
    after = rows.masked_fill(onward.transpose(d, d + 1), 1)
    partial = prior * after.cumprod(d + 1)                                # x_j for i < j <= k
    # the k < i entries are selected away both before and after they meet grad: an inf in
    # either factor there must reach neither the gradient nor its own derivative (0 * inf)
    partial = conj_grad(partial).masked_fill(~onward, 0)
    return (grad.unsqueeze(d) * partial).masked_fill(~onward, 0).sum(d + 1)


# --- cummax, cummin ---------------------------------------------------------------------------

def _running_extreme(name, ufunc):
    def forward(xp, x, dim):
        if x.ndim == 0:
            if dim not in (-1, 0):
                raise IndexError(f"{name}(): Expected reduction dim -1 or 0 for scalar but got "
                                 f"{dim}")
            return x.copy(), xp.zeros((), dtype=np.int64)
        if x.size == 0 and is_index(dim):   # PyTorch returns before it wraps dim or reads
            return xp.empty(x.shape, x.dtype), xp.empty(x.shape, np.int64)     # the dtype
        d = wrap_dim(dim, x.ndim)
        if x.dtype.kind == "c":
            raise NotImplementedError(f"\"{name}_cpu\" not implemented for "
                                      f"'{D.FROM_NUMPY[x.dtype]._torch_name}'")
        x = xp.ascontiguousarray(x)      # PyTorch's scans return row-major results
        values = accumulate(xp, ufunc, x, d)
        # the index is the last position at or before k that holds the running extreme
        hit = x == values
        if x.dtype.kind == "f":
            hit |= xp.isnan(x)
        shape = [x.shape[d] if i == d else 1 for i in range(x.ndim)]
        positions = xp.where(hit, xp.arange(x.shape[d]).reshape(shape), 0)
        return values, accumulate(xp, "maximum", positions, d).astype(np.int64, copy=False)
    forward.__doc__ = (f"The running {name[3:]}imum along ``dim`` and the index where each was "
                       f"reached (the last among ties).")
    return forward


def _scatter_back(grads, x, dim, *, out):
    """Each gradient added at the index its running extreme came from (PyTorch's node,
    ScatterAddBackward0, for 0-d inputs too); an empty input is its own gradient, as there."""
    if x.numel() == 0:
        return x
    grad = grads[0]
    return grad.new_zeros(x.shape).scatter_add(wrap_dim(dim, x.ndim) if x.ndim else 0,
                                               out[1], grad)


cummax = op("cummax(input, dim)", promote=SAME,
            namedtuple=return_types.cummax)(_running_extreme("cummax", "maximum"))
cummin = op("cummin(input, dim)", promote=SAME,
            namedtuple=return_types.cummin)(_running_extreme("cummin", "minimum"))
cummax.derivative(_scatter_back, outputs=(1,))
cummin.derivative(_scatter_back, outputs=(1,))

ALIASES = {}
