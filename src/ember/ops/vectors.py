"""Ops on the vectors along one dim: cross (3-vector cross products) and renorm (rescaling
slices whose p-norm exceeds a bound)."""


import numpy as np

from ember import _dtype as D
from ember._warn import warn_once
from ember.ops._dims import int_param, wrap_dim
from ember.ops._reduce import constant, int_dim, wide
from ember.ops._registry import broadcast_message, op
from ember.ops._scalars import number_arg
from ember.ops.binary_math import where
from ember.ops.reduction import NORM, norm



def _cross_dim(shape, dim):
    """cross's dim: the first of size 3 in the input's shape when not given."""
    if dim is not None:
        return dim
    for i, size in enumerate(shape):
        if size == 3:
            return i
    raise RuntimeError("no dimension of size 3 in input")


@op("cross(input, other, dim=None)", inputs=2, scalars=False, out=True)
def cross(xp, a, b, dim):
    """The cross product of the 3-vectors along ``dim`` (without it: the first dim of size 3,
    a deprecated default that warns once) of two tensors broadcast against each other."""
    if dim is not None and type(dim) is not int:   # (the parser's check comes first)
        dim = int_param(dim, None, strict=True)
    if dim is None:
        # PyTorch's text, so that programs filtering this warning keep working
        warn_once("Using torch.cross without specifying the dim arg is deprecated.\n"
                  "Please either pass the dim explicitly or simply use torch.linalg.cross.\n"
                  "The default value of dim will change to agree with that of linalg.cross "
                  "in a future release.")
    dim = _cross_dim(a.shape, dim)
    if a.ndim != b.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if a.ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    d = wrap_dim(dim, a.ndim)
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{a.shape[d]} and {b.shape[d]}")
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise RuntimeError(broadcast_message([a.shape, b.shape])) from None
    if a.dtype == np.bool_:             # (PyTorch's kernel picks by input's dtype first)
        raise NotImplementedError("\"cross\" not implemented for 'Bool'")
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected scalar type {D.FROM_NUMPY[a.dtype]._torch_name} but found "
                           f"{D.FROM_NUMPY[b.dtype]._torch_name}")
    a0, a1, a2 = (a.take(i, axis=d) for i in range(3))
    b0, b1, b2 = (b.take(i, axis=d) for i in range(3))
    return xp.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=d)


@cross.derivative
def _(grad, a, b, dim):
    d = wrap_dim(_cross_dim(a.shape, dim), a.ndim)
    return cross(b.conj(), grad, d), cross(grad, a.conj(), d)


cross.name_nodes("LinalgCrossBackward0")    # PyTorch computes torch.cross by linalg.cross


# --- renorm -----------------------------------------------------------------------------------

_EPS = 1e-7


def _renorm_args(p, maxnorm, ndim, dim):
    """PyTorch's checks, in its order; returns (p, maxnorm, wrapped dim)."""
    p = number_arg(p, "renorm", "p", 1)
    if type(p) is complex:
        raise RuntimeError("renorm: p must be real-valued")
    p = float(p)
    if not p > 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    maxnorm = number_arg(maxnorm, "renorm", "maxnorm", 3)
    if type(maxnorm) is complex:
        raise RuntimeError("renorm: maxnorm must be real-valued")
    maxnorm = float(maxnorm)
    if not maxnorm >= 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm:g}")
    if ndim < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {ndim} dimensions")
    return p, maxnorm, int_dim("renorm", dim, ndim)


@op("renorm(input, p, dim, maxnorm)", promote=NORM, upcast=False, inplace=True)
def renorm(xp, x, p, dim, maxnorm):
    """``input`` with each slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` scaled down
    to norm ``maxnorm`` (nearly: the norm is offset by 1e-7)."""
    p, maxnorm, d = _renorm_args(p, maxnorm, x.ndim, dim)
    dims = tuple(i for i in range(x.ndim) if i != d)
    # 16-bit floats: the norm and factor in float32, the factor rounded before multiplying
    norms = norm.forward(xp, wide(x), p, dims, True, None)
    real = norms.dtype.type
    factor = xp.where(norms > real(maxnorm), real(maxnorm) / (norms + real(_EPS)), real(1))
    return x * factor.astype(x.real.dtype if x.dtype.kind == "c" else x.dtype, copy=False)


@renorm.derivative
def _(grad, x, p, dim, maxnorm):
    p, maxnorm, d = _renorm_args(p, maxnorm, x.ndim, dim)
    dims = tuple(i for i in range(x.ndim) if i != d)
    norms = norm(x, p, dims, True)
    inner = x.conj() * grad
    if inner.is_complex():
        inner = inner.real
    # the norm's own derivative, applied to the gradient reaching the norm through the factor
    through_norm = norm.vjp(inner.sum(dims, keepdim=True), x, p, dims, True, None, out=norms)
    inverse = 1 / (norms + _EPS)
    factor = inverse * maxnorm
    above = constant(lambda xp, n: n > maxnorm, norms)
    return where(above, factor * grad - factor * inverse * through_norm, grad)


ALIASES = {}
