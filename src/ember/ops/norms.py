"""Norms: linalg.vector_norm, matrix_norm, norm and cond. The vector norm is ``ember.norm``'s
kernel (ops/reduction.py); ``ember.norm`` comes here for the nuclear and other matrix norms.

Matrix norms by ``ord``: 'fro' (the 2-norm of the entries), 'nuc' (the sum of the singular
values), 2 and -2 (the largest and smallest singular value), 1 and -1 (the largest and
smallest absolute column sum), inf and -inf (the same over rows).
"""

import numpy as np

from ember._tensor import Tensor
from ember.ops._dims import wrap_dim
from ember.ops._linalg_utils import (check_float, check_matrix, check_square, checked_svd,
                                     real_dtype)
from ember.ops._reduce import constant
from ember.ops._registry import op
from ember.ops.extrema import amax, amin
from ember.ops.reduction import NORM, norm as _vector_norm
from ember.ops.singular import svd, svdvals
from ember.ops.solvers import inv, inv_ex

__all__ = ["vector_norm", "matrix_norm", "norm", "cond", "matrix_norm_forward",
           "matrix_norm_grad"]

_INF = float("inf")
_ORDERS = ("fro", "nuc", 2, -2, 1, -1, _INF, -_INF)
_SPECTRAL = ("nuc", 2, -2)


# --- vector_norm ------------------------------------------------------------------------------

@op("vector_norm(input, ord=2, dim=None, keepdim=False, *, dtype=None)", namespace="linalg",
    promote=NORM, upcast=False, grad_fn_name="LinalgVectorNormBackward0")
def vector_norm(xp, x, ord, dim, keepdim, dtype):
    """The vector ``ord``-norm over ``dim`` (all elements by default); ord may be inf, -inf
    or 0."""
    if isinstance(ord, str):           # other types: parsed as a Number by the forward
        raise TypeError(f"linalg_vector_norm(): argument 'ord' (position 2) must be Number, "
                        f"not {type(ord).__name__}")
    return _vector_norm.forward(xp, x, ord, dim, keepdim, dtype)


@vector_norm.derivative
def _(grad, x, ord, dim, keepdim, dtype, *, out):
    return _vector_norm.vjp(grad, x, ord, dim, keepdim, dtype, out=out)


# --- matrix_norm ------------------------------------------------------------------------------

def _matrix_dims(dim, ndim):
    """The two wrapped dims of a matrix norm."""
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(dims) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got "
                           f"{' '.join(str(d) for d in dims)}")
    d0, d1 = (wrap_dim(d, ndim) for d in dims)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({d0}, {d1})")
    return d0, d1


def _check_matrix_norm(x, ord, dim, dtype):
    name = "linalg.matrix_norm"
    check_matrix(name, x)
    d0, d1 = _matrix_dims(dim, x.ndim)
    if not any(ord == o and type(ord) is not bool for o in _ORDERS):
        raise RuntimeError(f"{name}: Order {ord} not supported.")
    if x.dtype.kind not in "fcV":
        check_float(name, x)
    if ord in _SPECTRAL:
        check_float(name, x)
    if dtype is not None:
        if not (dtype.is_floating_point or dtype.is_complex):
            raise RuntimeError(f"{name}: dtype should be floating point or complex, but got "
                               f"{dtype._torch_name}")
        from ember.ops.reduction import _norm_dtype
        try:
            x = _norm_dtype(x, dtype)
        except RuntimeError as e:
            raise RuntimeError(str(e).replace("linalg.vector_norm", name)) from None
    return x, d0, d1


def _keep(out, shape, dims, keepdim):
    return out.reshape([1 if d in dims else s for d, s in enumerate(shape)]) if keepdim else out


def _empty_min(shape, along, named=None):
    """amin's error for an empty dim ``along`` (which PyTorch's message calls ``named``)."""
    if shape[along] == 0:
        raise IndexError(f"amin(): Expected reduction dim {along if named is None else named} "
                         f"to have non-zero size.")


def matrix_norm_forward(xp, x, ord, dim, keepdim, dtype):
    """The matrix norm of ``x`` (checked; its dtype= cast applied) over its two ``dim``s."""
    x, d0, d1 = _check_matrix_norm(x, ord, dim, dtype)
    real = real_dtype(x.dtype)
    if ord == "fro":
        return _vector_norm.forward(xp, x, 2, (d0, d1), keepdim, None)
    wide = x.astype(np.float32) if x.dtype.itemsize < 4 and x.dtype.kind != "c" else x
    if ord in _SPECTRAL:
        s = checked_svd(xp, xp.moveaxis(wide, (d0, d1), (-2, -1)), compute_uv=False)
        if ord == -2:
            _empty_min(s.shape, -1)
        out = s.sum(axis=-1) if ord == "nuc" else _extreme(xp, s, -1, ord > 0)
        return _keep(out, x.shape, (d0, d1), keepdim).astype(real, copy=False)
    # 1-norms take column sums (over d0) and inf-norms row sums (over d1), then an extreme
    first, second = (d0, d1) if abs(ord) == 1 else (d1, d0)
    sums = xp.abs(wide).sum(axis=first)
    # (PyTorch sums with keepdim: its amin names the second dim unshifted then)
    named, second = second, second - (second > first)
    if ord < 0:
        _empty_min(sums.shape, second, named if keepdim else second)
    out = _extreme(xp, sums, second, ord > 0)
    return _keep(out, x.shape, (d0, d1), keepdim).astype(real, copy=False)


def _extreme(xp, a, axis, largest):
    if a.shape[axis] == 0:                  # norms are >= 0: the largest of none is 0
        return xp.zeros(a.shape[:axis % a.ndim] + a.shape[axis % a.ndim + 1:], a.dtype)
    return a.max(axis=axis) if largest else a.min(axis=axis)


def matrix_norm_grad(grad, x, ord, dim, keepdim, dtype, out):
    """The derivative of ``matrix_norm_forward``; ties share the gradient evenly."""
    d0, d1 = _matrix_dims(dim, x.ndim)
    if dtype is not None:
        x = x.to(dtype)
    if x.numel() == 0:
        return x * 0
    if ord == "fro":
        return _vector_norm.vjp(grad, x, 2, (d0, d1), keepdim, None, out=out)
    full = grad.reshape([1 if d in (d0, d1) else s for d, s in enumerate(x.shape)])
    if ord in _SPECTRAL:
        moved = x.movedim((d0, d1), (-2, -1))
        u, s, vh = svd(moved, False)
        if ord == "nuc":
            weights = s * 0 + 1
        else:
            weights = constant(lambda xp, v: _ties(xp, v, -1, ord > 0), s)
        weights = weights * grad.reshape(moved.shape[:-2] + (1,))
        return ((u * weights.unsqueeze(-2)) @ vh).movedim((-2, -1), (d0, d1))
    first, second = (d0, d1) if abs(ord) == 1 else (d1, d0)
    sums = x.abs().sum(first, keepdim=True)
    mask = constant(lambda xp, v: _ties(xp, v, second, ord > 0), sums)
    return full * mask * x.sgn()


def _ties(xp, v, axis, largest):
    """Weights that share a max (min) along ``axis`` evenly among its ties."""
    target = v.max(axis=axis, keepdims=True) if largest else v.min(axis=axis, keepdims=True)
    hits = (v == target).astype(v.dtype)
    return hits / hits.sum(axis=axis, keepdims=True)


@op("matrix_norm(input, ord='fro', dim=(-2, -1), keepdim=False, *, dtype=None)",
    namespace="linalg", out=True)
def matrix_norm(xp, a, ord, dim, keepdim, dtype):
    """The matrix norm ``ord`` of each matrix over the two dims ``dim``."""
    return matrix_norm_forward(xp, a, ord, dim, keepdim, dtype)


def matrix_norm_node(ord, keepdim):
    """The node PyTorch's matrix norm ends in: a vector norm ('fro'); the singular values'
    sum ('nuc') or amax/amin (2, -2), permuted back under keepdim; or amax/amin of the column
    or row sums (1, -1, inf, -inf)."""
    if ord == "fro":
        return "LinalgVectorNormBackward0"
    if ord in _SPECTRAL and keepdim:
        return "PermuteBackward0"
    if ord == "nuc":
        return "SumBackward1"
    return "AmaxBackward0" if ord > 0 else "AminBackward0"


@matrix_norm.named_by
def _(flat, params, out):
    return matrix_norm_node(params[0], params[2])


@matrix_norm.derivative
def _(grad, a, ord, dim, keepdim, dtype, *, out):
    return matrix_norm_grad(grad, a, ord, dim, keepdim, dtype, out)


@matrix_norm.composed_when_recording
def _(inputs, params):
    return _composed_sum_norm(inputs[0], *params)


def _composed_sum_norm(a, ord, dim, keepdim, dtype):
    """PyTorch's graph of the matrix norms of ``ord`` 1, -1, inf and -inf: the vector 1-norms
    of the columns (rows), then their amax (amin); and of 'nuc', 2 and -2 (see
    ``_composed_spectral_norm``); NotImplemented for 'fro' and for empty inputs (whose
    extremes PyTorch takes without a graph, or refuses)."""
    if ord == "fro" or type(ord) is bool or a.numel() == 0 or \
            not any(ord == o for o in _ORDERS):
        return NotImplemented
    _check_matrix_norm(a._data, ord, dim, dtype)
    d0, d1 = _matrix_dims(dim, a.ndim)
    if ord in _SPECTRAL:
        return _composed_spectral_norm(a, ord, d0, d1, keepdim, dtype)
    first, second = (d0, d1) if abs(ord) == 1 else (d1, d0)
    if not keepdim:
        second -= second > first
    sums = vector_norm(a, 1, (first,), keepdim, dtype=dtype)
    return (amax if ord > 0 else amin)(sums, (second,), keepdim)


def _composed_spectral_norm(a, ord, d0, d1, keepdim, dtype):
    """The singular values of ``a`` with ``d0, d1`` moved last, then their sum ('nuc'),
    amax (2) or amin (-2), moved back under keepdim: PyTorch's node keeps the
    decomposition's outputs, not ``a``, so writing ``a`` before backward is allowed."""
    if dtype is not None:
        a = a.to(dtype)
    perm = [d for d in range(a.ndim) if d not in (d0, d1)] + [d0, d1]
    s = svdvals(a.permute(perm))
    if ord == "nuc":
        out = s.sum(-1, keepdim)
    else:
        out = (amax if ord > 0 else amin)(s, (-1,), keepdim)
    if not keepdim:
        return out
    return out.unsqueeze(-1).permute([perm.index(d) for d in range(a.ndim)])


# --- norm -------------------------------------------------------------------------------------

def _norm_kind(x, ord, dim):
    """("matrix" or "vector", ord, dim) for linalg.norm's arguments."""
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. "
                               f"Got {list(dims)}")
    elif ord is not None and x.ndim not in (1, 2):
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be "
                           f"1D or 2D. Got {x.ndim}D.")
    if isinstance(ord, str) or (dim is not None and len(dims) == 2) or \
            (dim is None and ord is not None and x.ndim == 2):
        return "matrix", ("fro" if ord is None else ord), ((-2, -1) if dim is None else dim)
    return "vector", (2 if ord is None else ord), dim


@op("norm(input, ord=None, dim=None, keepdim=False, *, dtype=None)", namespace="linalg",
    out=True)
def norm(xp, a, ord, dim, keepdim, dtype):
    """A vector norm (over one dim, or all elements) or a matrix norm (over two dims, or of
    a 2-D input when ``ord`` is given)."""
    kind, ord, dim = _norm_kind(a, ord, dim)
    if kind == "matrix":
        return matrix_norm_forward(xp, a, ord, dim, keepdim, dtype)
    if a.dtype.kind not in "fcV":
        check_float("linalg.vector_norm", a)
    return _vector_norm.forward(xp, a, ord, dim, keepdim, dtype)


@norm.named_by
def _(flat, params, out):
    kind, ord, _ = _norm_kind(flat[0], params[0], params[1])
    return "LinalgVectorNormBackward0" if kind == "vector" else matrix_norm_node(ord, params[2])


@norm.composed_when_recording
def _(inputs, params):
    kind, ord, dim = _norm_kind(inputs[0], params[0], params[1])
    if kind == "vector":
        return NotImplemented
    return _composed_sum_norm(inputs[0], ord, dim, *params[2:])


@norm.derivative
def _(grad, a, ord, dim, keepdim, dtype, *, out):
    kind, ord, dim = _norm_kind(a, ord, dim)
    if kind == "matrix":
        return matrix_norm_grad(grad, a, ord, dim, keepdim, dtype, out)
    return _vector_norm.vjp(grad, a, ord, dim, keepdim, dtype, out=out)


# --- cond -------------------------------------------------------------------------------------

def _check_cond(a, p):
    if a.ndim < 2:
        raise RuntimeError("linalg.cond: The input tensor must have at least 2 dimensions.")
    if not any(p == o and type(p) is not bool for o in _ORDERS + (None,)):
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    if p in ("fro", "nuc") or (p not in (None, 2, -2) and a.size):
        check_square(f"linalg.cond(ord={p})", a)


@op("cond(input, p=None)", namespace="linalg", out=True)
def cond(xp, a, p):
    """The condition number of each matrix in the norm ``p``: the ratio of its extreme
    singular values for p None, 2 or -2 (any shape), ``sum(s) * sum(1 / s)`` for 'nuc', else
    ``norm(A) * norm(inv(A))``, inf for a singular A and where that is NaN."""
    _check_cond(a, p)
    if p in (None, 2, -2, "nuc"):
        s = svdvals.forward(xp, a, None)
        real = s.dtype
        if s.shape[-1] == 0:
            return xp.zeros(s.shape[:-1], real)
        if p == "nuc":
            return xp.asarray(s.sum(axis=-1) * (1 / s).sum(axis=-1)).astype(real, copy=False)
        ratio = s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
        return xp.asarray(ratio).astype(real, copy=False)
    real = real_dtype(a.dtype) if a.dtype.kind in "fc" else a.dtype
    if a.size == 0:
        return xp.zeros(a.shape[:-2], real)
    inverse, info = inv_ex.forward(xp, a, False)
    inverse = xp.where(info[..., None, None] > 0, _INF, inverse)
    dims = (-2, -1)
    out = (matrix_norm_forward(xp, a, p, dims, False, None)
           * matrix_norm_forward(xp, inverse, p, dims, False, None))
    return xp.nan_to_num(out, nan=_INF, posinf=_INF).astype(real, copy=False)


@cond.composed_when_recording
def _(inputs, params):
    """PyTorch's graph of cond: a ratio of slices of the singular values (p None, 2, -2),
    their sum times that of their reciprocals ('nuc'), else the product of the norms of A and
    of its inverse filled with inf where singular, NaN read as inf. PyTorch fills the
    inverse in place, which its backward then refuses (inv_ex saved it); ember fills a copy
    and differentiates."""
    a, p = inputs[0], params[0]
    if a.numel() == 0:
        return NotImplemented
    _check_cond(a._data, p)
    if p in (None, 2, -2, "nuc"):
        s = svdvals(a)
        if p == "nuc":
            return s.sum(-1) * s.reciprocal().sum(-1)
        big, small = s.narrow(-1, 0, 1), s.narrow(-1, s.shape[-1] - 1, 1)
        return (small / big if p == -2 else big / small).squeeze(-1)
    inverse, info = inv_ex(a)
    inverse = inverse.masked_fill((info > 0).unsqueeze(-1).unsqueeze(-1), _INF)
    return (matrix_norm(a, p) * matrix_norm(inverse, p)).nan_to_num(_INF, _INF)


def cond_public(input, p=None, *, out=None):
    """The condition number of each matrix of ``input`` in the norm ``p``; see the
    ``linalg.cond`` op. As in PyTorch, that of an empty input is a fresh tensor of zeros,
    outside the graph."""
    result = cond(input, p, out=out)
    if out is None and isinstance(input, Tensor) and input.numel() == 0:
        return result.detach()
    return result


cond_public.__module__ = "ember.linalg"
cond_public.__name__ = cond_public.__qualname__ = "cond"


@cond.derivative
def _(grad, a, p, *, out):
    if a.numel() == 0:
        return a * 0
    if p in (None, 2, -2):
        s = svdvals(a)
        k = s.shape[-1]
        if k == 0:
            return a * 0
        big, small = s[..., :1], s[..., k - 1:]
        g = grad.unsqueeze(-1)
        if p == -2:                         # s_min / s_max
            first, last = -g * small / (big * big), g / big
        else:                               # s_max / s_min
            first, last = g / small, -g * big / (small * small)
        if k == 1:
            grad_s = first + last
        else:
            from ember.ops.join import cat
            grad_s = cat([first, s[..., 1:k - 1] * 0, last], -1)
        return svdvals.vjp(grad_s, a, None)
    dims = (-2, -1)
    inverse = inv(a)
    norm_a, norm_inv = matrix_norm(a, p), matrix_norm(inverse, p)
    grad_a = matrix_norm_grad(grad * norm_inv, a, p, dims, False, None, norm_a)
    grad_inv = matrix_norm_grad(grad * norm_a, inverse, p, dims, False, None, norm_inv)
    return grad_a + inv.vjp(grad_inv, a, out=inverse)

