"""Distances: dist (the p-norm of a difference), cdist (between the rows of two batches of
matrices) and pdist (between the rows of one matrix).

The p-norm gradients follow PyTorch's subgradients: 0 where a distance is 0, and for p < 1
no contribution from coordinates that agree; for p = inf every coordinate that attains the
maximum gets the full gradient.
"""

import math

import numpy as np

from ember import _dtype as D
from ember._creation import tensor, zeros
from ember.amp._state import suspended
from ember.autograd.grad_mode import STATE as _GRAD
from ember.ops._reduce import constant
from ember.ops._promotion import Policy
from ember.ops._registry import broadcast_message, op
from ember.ops.arithmetic import SUB
from ember.ops.grids import _tensor_arg
from ember.ops.indexing import index_put
from ember.ops.reduction import norm
from ember.ops.underivable import underivable

__all__ = ["cdist", "dist", "pdist"]


# --- dist -------------------------------------------------------------------------------------

def _dist_rule(d, name, operands):
    SUB.rule(d, name, operands)                 # input - other comes first
    if d.category < D.FLOATING:
        raise RuntimeError(f"norm(): input dtype should be either floating point or complex. "
                           f"Got {d._torch_name} instead.")
    return d


def _dist_order(p):
    """``p`` as a float, checked as PyTorch does (a number or a 0-dim tensor)."""
    if isinstance(p, complex):
        raise RuntimeError("linalg.vector_norm: Expected a non-complex scalar as the order of "
                           "norm.")
    if not isinstance(p, (int, float)) and getattr(p, "ndim", None) != 0:
        raise TypeError(f"dist(): argument 'p' (position 3) must be Number, not "
                        f"{type(p).__name__}")
    return float(p)


@op("dist(input, other, p=2)", inputs=2, promote=Policy("dist", _dist_rule), upcast=False,
    scalars=False, out=False)
def dist(xp, a, b, p):
    """The p-norm of ``input - other`` (broadcast): p may be 0, fractional, inf or -inf."""
    return norm.forward(xp, a - b, _dist_order(p), None, False, None)


@dist.derivative
def _(grad, a, b, p, *, out):
    # norm's subgradients: 0 where the difference is 0, ties share inf and -inf evenly
    diff = a - b
    order = _dist_order(p)
    if order == 0:          # (PyTorch's backward fails here; the count is locally constant)
        g = zeros(diff.shape, dtype=diff.dtype, device=diff.device)
    else:
        g = norm.vjp(grad, diff, order, None, False, None, out=out)
    return g, -g


# --- cdist ------------------------------------------------------------------------------------

_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
          "donot_use_mm_for_euclid_dist")
_MM_THRESHOLD = 25                      # rows above which "if necessary" means "use mm"
_PDIST = "pdist"                        # pdist's mode: no matrix products, pdist's node names


def _uses_mm(p, compute_mode, rows1, rows2):
    if p != 2:
        return False
    if compute_mode == _MODES[0]:
        return rows1 > _MM_THRESHOLD or rows2 > _MM_THRESHOLD
    return compute_mode == _MODES[1]


def _check_p(p, name):
    if isinstance(p, complex):
        raise TypeError(f"{name}(): argument 'p' (position {3 if name == 'cdist' else 2}) "
                        f"must be float, not complex")
    if not p >= 0:                      # NaN fails too
        raise RuntimeError(f"{name} only supports non-negative p values")


def _torch_name(a):
    return D.FROM_NUMPY[a.dtype]._torch_name


_MM_NAMES = {"float64": "double", "float32": "float", "float16": "c10::Half",
             "bfloat16": "c10::BFloat16"}


def _check_cdist(xp, a, b, p):
    """PyTorch's checks, in PyTorch's order (compute_mode is checked before the op runs);
    returns the shape of the result."""
    for name, x in (("X1", a), ("X2", b)):
        if x.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: "
                               f"{x.ndim}D")
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{a.shape[-1]} X2: {b.shape[-1]}")
    for name, x in (("X1", a), ("X2", b)):
        if x.dtype.kind not in "fV":
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: "
                               f"{_torch_name(x)}")
    _check_p(p, "cdist")
    try:
        batch = xp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise RuntimeError(broadcast_message([a.shape[:-2], b.shape[:-2]])) from None
    return batch + (a.shape[-2], b.shape[-2])


def _check_kernel(a, b, mm):
    """The checks PyTorch's kernels make: only when there is something to compute."""
    if mm:
        if a.dtype != b.dtype:
            raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                               f"{_MM_NAMES[a.dtype.name]} != {_MM_NAMES[b.dtype.name]}")
        return
    if a.dtype.itemsize == 2:
        raise NotImplementedError(f"\"cdist\" not implemented for '{_torch_name(a)}'")
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected scalar type {_torch_name(a)} but found {_torch_name(b)}")


def _euclidean_mm(xp, a, b):
    """sqrt(|a|^2 + |b|^2 - 2 a.b), clamped at 0, less exact near 0 (16-bit floats compute
    in float32). As PyTorch does, the norms ride in the one matrix product, as rows
    [-2a, |a|^2, 1] and [b, 1, |b|^2], so that the rounding near 0 is PyTorch's."""
    dtype = a.dtype
    if dtype.itemsize == 2:
        a, b = a.astype(xp.float32), b.astype(xp.float32)
    ones_a = xp.ones(a.shape[:-1] + (1,), dtype=a.dtype)
    ones_b = xp.ones(b.shape[:-1] + (1,), dtype=b.dtype)
    a_pad = xp.concatenate([-2 * a, (a * a).sum(-1, keepdims=True), ones_a], axis=-1)
    b_pad = xp.concatenate([b, ones_b, (b * b).sum(-1, keepdims=True)], axis=-1)
    return xp.sqrt(xp.maximum(a_pad @ xp.swapaxes(b_pad, -1, -2), 0)).astype(dtype)


def _norms(xp, a, b, p):
    """The p-norms of all row differences, from their (..., P, R, M) absolute values."""
    diff = xp.abs(a[..., :, None, :] - b[..., None, :, :])
    if p == 0:
        return (diff != 0).sum(-1).astype(a.dtype)
    if p == 1:
        return diff.sum(-1)
    if p == 2:
        return xp.sqrt((diff * diff).sum(-1))
    if math.isinf(p):
        return diff.max(-1, initial=0)
    return (diff ** p).sum(-1) ** (1 / p)


_BLOCK = 1 << 22                        # elements of the differences computed at once


@op("cdist(x1, x2, p=2.0, compute_mode='use_mm_for_euclid_dist_if_necessary')", inputs=2,
    method=False)
def cdist(xp, a, b, p, compute_mode):
    """The p-norm distance between each row of ``x1`` and each row of ``x2`` (batched)."""
    shape = _check_cdist(xp, a, b, p)
    mm = _uses_mm(p, compute_mode, a.shape[-2], b.shape[-2])
    if 0 in shape or (not a.shape[-1] and not mm):
        return xp.zeros(shape, dtype=a.dtype)
    _check_kernel(a, b, mm)
    if mm:
        return _euclidean_mm(xp, a, b)
    rows = a.shape[-2]
    step = max(1, _BLOCK * rows // (math.prod(shape) * a.shape[-1]))
    if step >= rows:
        return _norms(xp, a, b, p)
    return xp.concatenate([_norms(xp, a[..., i:i + step, :], b, p)
                           for i in range(0, rows, step)], axis=-2)


@cdist.named_by
def _(flat, params, out):
    # PyTorch computes the matrix-product form as a kernel of its own whose result it views
    a, b = flat
    if params[1] == _PDIST:
        return "_pdist_forward"
    mm = _uses_mm(params[0], params[1], a.shape[-2], b.shape[-2])
    if mm and a.shape[-1] and a.shape[-2] and b.shape[-2]:
        return "ViewBackward0"
    return "CdistBackward0"


@cdist.refuse_forward_ad
def _(flat, params):
    # neither of PyTorch's kernels (the matrix-product form's, the direct one) has a forward
    # derivative
    a, b = flat
    if params[1] == _PDIST:
        return "_pdist_forward"
    mm = _uses_mm(params[0], params[1], a.shape[-2], b.shape[-2])
    return "_euclidean_dist" if mm and a.shape[-1] and a.shape[-2] and b.shape[-2] else \
        "_cdist_forward"


def _public_cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance between each row of ``x1`` and each row of ``x2`` (batched)."""
    if compute_mode not in _MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    return cdist(x1, x2, p, compute_mode)


def _safe(t, bad):
    """``t`` with 1 where ``bad`` (a constant mask): keeps powers and quotients finite, and
    their derivatives too, where the result is masked out anyway."""
    return t + bad.to(t.dtype)


@cdist.derivative
def _(grad, a, b, p, compute_mode, *, out):
    if _uses_mm(p, compute_mode, a.shape[-2], b.shape[-2]):
        return _cdist_grad(grad, a, b, p, out)
    # PyTorch's kernel for it (_cdist_backward) is no autocast op: a backward run inside an
    # autocast region computes it in the gradients' dtypes
    with suspended():
        if _GRAD.grad_enabled:
            # create_graph: PyTorch's kernel has no derivative, its gradients refuse a second
            # backward (under vmap too: jacrev of jacrev refuses, as PyTorch's)
            node, kernel = ("PdistBackwardBackward0", "_pdist_backward") \
                if compute_mode == _PDIST else ("CdistBackwardBackward0", "_cdist_backward")
            return underivable([grad, a, b, out], lambda: _cdist_grad(grad, a, b, p, out),
                               node, kernel)
        return _cdist_grad(grad, a, b, p, out)


def _cdist_grad(grad, a, b, p, out):
    if p == 0 or grad.numel() == 0:
        return (zeros(a.shape, dtype=a.dtype, device=a.device),
                zeros(b.shape, dtype=b.dtype, device=b.device))
    zero = constant(lambda xp, d: d == 0, out)
    if p == 2:
        # (x1_i - x2_j) / d_ij summed as matrix products, without the (P, R, M) differences
        w = grad / _safe(out, zero) * (~zero).to(grad.dtype)
        return (w.sum(-1, keepdim=True) * a - w @ b,
                w.sum(-2).unsqueeze(-1) * b - w.mT @ a)
    diff = a.unsqueeze(-2) - b.unsqueeze(-3)
    if p == 1:
        g = grad.unsqueeze(-1) * diff.sign()
    elif math.isinf(p):
        top = constant(lambda xp, d, m: xp.abs(d) == m[..., None], diff, out)
        g = grad.unsqueeze(-1) * diff.sign() * top.to(grad.dtype)
    else:
        size = diff.abs()
        ratio = _safe(size, constant(lambda xp, s: s == 0, size)) / _safe(out, zero).unsqueeze(-1)
        g = grad.unsqueeze(-1) * diff.sign() * ratio ** (p - 1)
    return g.sum(-2), -g.sum(-3)


def pdist(input, p=2):
    """The p-norm distances between the rows of a matrix: the upper triangle of
    ``cdist(input, input)``, row by row."""
    _tensor_arg(input, "pdist")
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if not input.is_floating_point():
        raise RuntimeError("pdist only supports floating-point dtypes")
    _check_p(p, "pdist")
    n, m = input.shape
    if input.dtype.itemsize == 2:
        if n > 1 and m:
            raise NotImplementedError(f"\"pdist\" not implemented for "
                                      f"'{input.dtype._torch_name}'")
        return _pdist_forward(input.float(), p).to(input.dtype)    # nothing to compute
    return _pdist_forward(input.contiguous(), p)    # (a CloneBackward0 first, as PyTorch's)


@op("_pdist_forward(input, p=2)", method=False, grad_fn_name="PdistBackward0")
def _pdist_forward(xp, x, p):
    """pdist's kernel: the distances of the row pairs i < j, in row-major order."""
    rows, cols = np.triu_indices(x.shape[0], 1)
    return cdist.forward(xp, x, x, p, _PDIST)[rows, cols]


_pdist_forward.refuse_forward_ad("_pdist_forward")        # as PyTorch's kernel


@_pdist_forward.derivative
def _(grad, x, p, *, out):
    with suspended():       # (see cdist's derivative)
        if _GRAD.grad_enabled:
            return underivable([grad, x, out], lambda: (_pdist_grad(grad, x, p, out),),
                               "PdistBackwardBackward0", "_pdist_backward")[0]
        return _pdist_grad(grad, x, p, out)


def _pdist_grad(grad, x, p, out):
    """The gradient of pdist: cdist's, of the distances and gradients of the pairs put in
    the upper triangle of (n, n) matrices (zeros below, whose gradients add nothing)."""
    n = x.shape[0]
    pairs = _upper_pairs(n, x.device)

    def square(t):
        return index_put(zeros((n, n), dtype=t.dtype, device=t.device), pairs, t)
    ga, gb = _cdist_grad(square(grad), x, x, p, square(out))
    return ga + gb


def _upper_pairs(n, device):
    """Row and column indices of the pairs i < j, in row-major order."""
    rows, cols = np.triu_indices(n, 1)
    return (tensor(rows, dtype=D.int64, device=device),
            tensor(cols, dtype=D.int64, device=device))


_public_cdist.__name__ = _public_cdist.__qualname__ = "cdist"

ALIASES = {}
PUBLIC = {"cdist": _public_cdist, "pdist": pdist}
