"""Summaries of data: cov and corrcoef (compositions of existing ops), and aminmax (one op
giving both extremes)."""

import warnings

from ember import _dtype as D
from ember._creation import zeros_like
from ember._tensor import Tensor
from ember._warn import outside_level
from ember.ops import return_types
from ember.ops._reduce import int_dim, rejecting, row_major
from ember.ops._registry import op
from ember.ops._scalars import int_arg
from ember.ops.extrema import _ties_grad
from ember.ops.grids import _tensor_arg

__all__ = ["aminmax", "corrcoef", "cov"]


# --- cov, corrcoef ----------------------------------------------------------------------------

def _check_weights(w, name, observations, integral):
    """PyTorch's checks of ``fweights`` (``integral``) or ``aweights``, in its order."""
    if not isinstance(w, Tensor):
        raise TypeError(f"cov(): argument '{name}' must be Tensor, not {type(w).__name__}")
    if w.ndim > 1:
        raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got "
                           f"{name} with {w.ndim} dimensions")
    kind_ok = (w.dtype.category == D.INTEGRAL) if integral else w.is_floating_point()
    if not kind_ok:
        raise RuntimeError(f"cov(): expected {name} to have "
                           f"{'integral' if integral else 'floating point'} dtype but got "
                           f"{name} with {w.dtype._torch_name} dtype")
    if w.numel() != observations:
        raise RuntimeError(f"cov(): expected {name} to have the same numel as there are "
                           f"observations in the input but got {w.numel()} != {observations}")
    if observations and not bool(w.min() >= 0):
        raise RuntimeError(f"cov(): {name} cannot be negative")


def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the variables in the rows of ``input`` (observations in the
    columns), with frequency and importance weights."""
    _tensor_arg(input, "cov")
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an "
                           f"input with {input.ndim} dimensions")
    if input.dtype is D.bool_:
        raise RuntimeError("cov(): bool dtype is not supported for input")
    correction = int_arg(correction, "cov", "correction")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    n = x.shape[1]
    w = None
    if fweights is not None:
        _check_weights(fweights, "fweights", n, integral=True)
        w = fweights
    if aweights is not None:
        _check_weights(aweights, "aweights", n, integral=False)
        w = aweights if w is None else w * aweights
    if w is None:
        total = n
        mean = x.sum(1) / n
    else:
        total = w.sum()
        if not bool(total != 0):
            raise RuntimeError("cov(): weights sum to zero, can't be normalized")
        mean = (x * w).sum(1) / total
    if w is None or correction == 0 or aweights is None:
        dof = total - correction
    else:
        dof = total - correction * (w * aweights).sum() / total
    if bool(dof <= 0):
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less "
                      "than the number of observations.", UserWarning,
                      stacklevel=outside_level())  # (corrcoef too)
        dof = zeros_like(dof) if isinstance(dof, Tensor) else 0
    centered = x - mean.unsqueeze(1)
    weighted = centered if w is None else centered * w
    return (centered @ weighted.mT.conj()).div(dof).squeeze()


def corrcoef(input):
    """Pearson correlation coefficients of the variables in the rows of ``input``."""
    _tensor_arg(input, "corrcoef")
    if input.ndim > 2:
        raise RuntimeError(f"corrcoef(): expected input to have two or fewer dimensions but got "
                           f"an input with {input.ndim} dimensions")
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = c.diagonal()
    std = (d.real if d.is_complex() else d).sqrt()
    c = c / std.unsqueeze(1) / std.unsqueeze(0)
    if c.is_complex():
        return c.real.clamp(-1, 1) + c.imag.clamp(-1, 1) * 1j
    return c.clamp(-1, 1)


Tensor.cov = cov
Tensor.corrcoef = corrcoef


# --- aminmax ----------------------------------------------------------------------------------

AMINMAX = rejecting("aminmax", (D.COMPLEX,), NotImplementedError,
                    lambda d: f"\"aminmax_cpu\" not implemented for '{d._torch_name}'")


@op("aminmax(input, *, dim=None, keepdim=False)", promote=AMINMAX, upcast=False,
    namedtuple=return_types.aminmax)
def aminmax(xp, x, dim, keepdim):
    """The named tuple (min, max) over ``dim`` (or over everything)."""
    if dim is None:
        if x.size == 0:
            raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as "
                               "the operation has no identity.")
        axis = None
    else:
        d = int_dim("aminmax", dim, x.ndim)
        if x.ndim and x.shape[d] == 0:
            raise IndexError(f"aminmax: Expected reduction dim {d} to have non-zero size.")
        axis = d if x.ndim else None
    return (row_major(x, x.min(axis=axis, keepdims=keepdim)),
            row_major(x, x.max(axis=axis, keepdims=keepdim)))


@aminmax.derivative
def _(grads, x, dim, keepdim, *, out):
    return (_ties_grad(grads[0], x, dim, keepdim, out=out[0])
            + _ties_grad(grads[1], x, dim, keepdim, out=out[1]))


ALIASES = {}
PUBLIC = {"cov": cov, "corrcoef": corrcoef}
