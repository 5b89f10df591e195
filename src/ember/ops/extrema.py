"""Extrema: max, min (whole tensor, or values and indices along a dim), amax, amin, argmax,
argmin. NaN wins every comparison, as in PyTorch."""

import numpy as np

from ember import _dtype as D
from ember._tensor import Tensor
from ember.ops import return_types
from ember.ops._dims import reduction_dims
from ember.ops._promotion import SAME
from ember.ops._reduce import (as_written, constant, extreme, int_dim, is_all, rejecting,
                               require_nonempty, route_to_indices, row_major, spread, view_reduced,
                               with_optional_dim)
from ember.ops._registry import op

_COMPLEX = (D.COMPLEX,)


def _not_implemented(kernel):
    return lambda d: f"\"{kernel}\" not implemented for '{d._torch_name}'"


def _unsupported(name):
    return lambda d: f"{name}(): does not support {'bool' if d is D.bool_ else 'complex'} input"


MAX_ALL = rejecting("max_all", _COMPLEX, NotImplementedError, _not_implemented("max_all"))
MIN_ALL = rejecting("min_all", _COMPLEX, NotImplementedError, _not_implemented("min_all"))
MAX_DIM = rejecting("max_dim", _COMPLEX, RuntimeError, _unsupported("max"))
MIN_DIM = rejecting("min_dim", _COMPLEX, RuntimeError, _unsupported("min"))
ARGMAX = rejecting("argmax", (D.BOOL, D.COMPLEX), RuntimeError, _unsupported("argmax"))
ARGMIN = rejecting("argmin", (D.BOOL, D.COMPLEX), RuntimeError, _unsupported("argmin"))


# --- max(), min() over everything -------------------------------------------------------------

def _extreme_all(name):
    def forward(xp, x):
        require_nonempty(name, x.shape, (), full=True)
        return extreme(xp, x, name)
    forward.__doc__ = f"The {'largest' if name == 'max' else 'smallest'} element (NaN if any)."
    return forward


_max_all = op("max(input)", promote=MAX_ALL, grad_fn_name="MaxBackward1")(
    _extreme_all("max"))
_min_all = op("min(input)", promote=MIN_ALL, grad_fn_name="MinBackward1")(
    _extreme_all("min"))
_max_all.derivative(lambda grad, x, *, out: spread(grad, x, out))
_min_all.derivative(lambda grad, x, *, out: spread(grad, x, out))


# --- max(dim), min(dim): values and indices ---------------------------------------------------

def _extreme_dim(name, arg):
    def forward(xp, x, dim, keepdim):
        d = int_dim(name, dim, x.ndim)
        if x.ndim == 0:
            return x.copy(), xp.zeros((), dtype=np.int64)
        require_nonempty(name, x.shape, (d,), full=False)
        index = getattr(xp, arg)(x, axis=d, keepdims=True)
        values = xp.take_along_axis(x, index, axis=d)
        if not keepdim:
            index, values = xp.squeeze(index, axis=d), xp.squeeze(values, axis=d)
        return values, index.astype(np.int64, copy=False)
    forward.__doc__ = f"The {name}imum along ``dim`` and its (first) index."
    return forward


_max_dim = op("_max_dim(input, dim, keepdim=False)", promote=MAX_DIM, method=False,
              namedtuple=return_types.max, grad_fn_name="MaxBackward0")(
    _extreme_dim("max", "argmax"))
_min_dim = op("_min_dim(input, dim, keepdim=False)", promote=MIN_DIM, method=False,
              namedtuple=return_types.min, grad_fn_name="MinBackward0")(
    _extreme_dim("min", "argmin"))
_max_dim.derivative(route_to_indices, outputs=(1,))
_min_dim.derivative(route_to_indices, outputs=(1,))
_max_dim.reads_inputs(())       # the indices and the input's size: PyTorch saves no input
_min_dim.reads_inputs(())


max = with_optional_dim("max", _max_all, _max_dim, "maximum")
min = with_optional_dim("min", _min_all, _min_dim, "minimum")
Tensor.max = max
Tensor.min = min


# --- amax, amin -------------------------------------------------------------------------------

def _amax_like(name):
    kernel = _not_implemented(f"{name[1:]}_values_cpu")

    def forward(xp, x, dim, keepdim):
        dims = reduction_dims(dim, x.ndim)
        require_nonempty(name, x.shape, as_written(dim, dims), full=is_all(dim))
        # complex input: refused by the kernel, which an empty result does not run
        if x.dtype.kind == "c" and all(s for d, s in enumerate(x.shape) if d not in dims):
            raise NotImplementedError(kernel(D.FROM_NUMPY[x.dtype]))
        return row_major(x, extreme(xp, x, name[1:], dims, keepdim))
    forward.__doc__ = (f"The {name[1:]}imum over ``dim`` (all dims by default); the gradient is "
                       f"shared evenly by ties.")
    return forward


def _ties_grad(grad, x, dim, keepdim, *, out):
    dims = reduction_dims(dim, x.ndim)
    # as PyTorch's: (grad / count) * ties, grad viewed with size-1 reduced dims to broadcast
    kept = [1 if d in dims else n for d, n in enumerate(x.shape)]
    ties = constant(lambda xp, a, v: a == v.reshape(kept), x, out)
    count = constant(lambda xp, t: t.sum(axis=dims, keepdims=True), ties)
    return (view_reduced(grad, x.shape, dims, keepdim) / count) * ties


amax = op("amax(input, dim=(), keepdim=False)", promote=SAME)(_amax_like("amax"))
amin = op("amin(input, dim=(), keepdim=False)", promote=SAME)(_amax_like("amin"))
amax.derivative(_ties_grad)
amin.derivative(_ties_grad)


# --- argmax, argmin ---------------------------------------------------------------------------

def _arg_like(name, arg):
    def forward(xp, x, dim, keepdim):
        if dim is None:
            require_nonempty(name, x.shape, (), full=True, error=IndexError)
            index = getattr(xp, arg)(x.reshape(-1))
            return xp.asarray(index, dtype=np.int64).reshape((1,) * x.ndim if keepdim else ())
        d = int_dim(name, dim, x.ndim, 1)
        if x.ndim == 0:
            return xp.zeros((), dtype=np.int64)
        require_nonempty(name, x.shape, (d,), full=False)
        return getattr(xp, arg)(x, axis=d, keepdims=keepdim).astype(np.int64, copy=False)
    forward.__doc__ = (f"The index of the (first) {name[3:]}imum over ``dim``, or of the "
                       f"flattened tensor.")
    return forward


argmax = op("argmax(input, dim=None, keepdim=False)", promote=ARGMAX, differentiable=False)(
    _arg_like("argmax", "argmax"))
argmin = op("argmin(input, dim=None, keepdim=False)", promote=ARGMIN, differentiable=False)(
    _arg_like("argmin", "argmin"))

ALIASES = {}
PUBLIC = {"max": max, "min": min}
