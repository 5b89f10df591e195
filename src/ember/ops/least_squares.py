"""Pseudoinverses and least squares: linalg.pinv, linalg.lstsq, linalg.matrix_rank and the
top-level pinverse. All three threshold the singular values (the eigenvalues' absolute values
for Hermitian input) at max(atol, rtol * largest)."""

import numpy as np

from ember._tensor import Tensor
from ember.ops._call_site import call_shape, call_site
from ember.ops._linalg_utils import (check_float, check_kernel, checked_svd, check_square,
                                     column_major, mh, named_result, real_dtype, torch_name,
                                     undefined_grad)
from ember.ops._overloads import in_parser_words
from ember.ops._registry import op
from ember.ops.solvers import broadcast_batch

__all__ = ["pinv", "pinverse", "lstsq", "lstsq_public", "matrix_rank", "pinv_grad"]

lstsq_result = named_result("linalg_lstsq", ("solution", "residuals", "rank", "singular_values"))
_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _double_or_float(a):
    if a.dtype.kind not in "fc" or a.dtype.itemsize < 4:
        raise RuntimeError("This function doesn't handle types other than float and double")


def _tolerance(xp, s_max, m, n, dtype, atol, rtol):
    """max(atol, rtol * s_max) per matrix (PyTorch's defaults: rtol = eps * max(m, n) unless
    only a positive atol is given)."""
    def value(t):
        return t._data[..., None] if isinstance(t, Tensor) else t
    atol, rtol = value(atol), value(rtol)
    if rtol is None:
        positive_atol = atol is not None and bool((xp.asarray(atol) > 0).all())
        rtol = 0.0 if positive_atol else np.finfo(real_dtype(dtype)).eps * max(m, n)
    tol = rtol * s_max
    return tol if atol is None else xp.maximum(atol, tol)


def _spectrum(xp, a, hermitian):
    """(left vectors, values, right vectors^H) with A = U diag(s) Vh; for Hermitian input the
    eigen-decomposition, with signed eigenvalues (its lower triangle is read)."""
    if hermitian:
        check_square("linalg.eigh", a)
        w, v = xp.linalg.eigh(a)
        return v, w, xp.conj(v.swapaxes(-1, -2))
    return checked_svd(xp, a, full_matrices=False)


def _pinv(xp, a, atol, rtol, hermitian):
    m, n = a.shape[-2:]
    if a.size == 0:
        return xp.zeros(a.shape[:-2] + (n, m), a.dtype)
    u, s, vh = _spectrum(xp, a, hermitian)
    mag = xp.abs(s)
    tol = _tolerance(xp, mag.max(axis=-1, keepdims=True), m, n, a.dtype, atol, rtol)
    keep = mag > tol
    inverse = xp.where(keep, 1 / xp.where(keep, s, 1), 0).astype(s.dtype, copy=False)
    return (xp.conj(vh.swapaxes(-1, -2)) * inverse[..., None, :]) @ xp.conj(u.swapaxes(-1, -2))


def _refuse_old_and_new_tolerances(op_name, old):
    """Raise PyTorch's TypeError when the call gave the older tolerance ``old`` (``rcond``,
    ``tol``; by position or keyword, None included) with ``atol`` or ``rtol``: no signature
    takes both."""
    shape = call_shape(op_name)
    if shape is None or not (shape[0] > 1 or old in shape[1]) or \
            "atol" not in shape[1] and "rtol" not in shape[1]:
        return
    site = call_site()
    raise TypeError(in_parser_words(f"{site.parser_name}() received an invalid combination of "
                                    f"arguments - got ({site.got()}), but expected one of:"))


def _check_pinv(a):
    if a.ndim < 2 or a.dtype.kind not in "fc" or a.dtype.itemsize < 4:
        raise RuntimeError(f"linalg.pinv({torch_name(a)}{{{list(a.shape)}}}): expected a tensor "
                           f"with 2 or more dimensions of float, double, cfloat or cdouble types")


def pinv_grad(grad, p, a):
    """gA for P = pinv(A) (A of locally constant rank): with the differential
    dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P,
    gA = -P^H G P^H + (I - A P) G^H P P^H + P^H P G^H (I - P A)."""
    ph, gh = mh(p), mh(grad)
    return (-(ph @ grad @ ph) + (gh - a @ (p @ gh)) @ (p @ ph)
            + (ph @ p) @ (gh - (gh @ p) @ a))


@op("pinv(input, rcond=None, hermitian=False, *, atol=None, rtol=None)", namespace="linalg",
    out=True)
def pinv(xp, a, rcond, hermitian, atol, rtol):
    """The Moore-Penrose pseudoinverse of each matrix; singular values at most
    max(atol, rtol * largest) count as zero (``rcond`` is rtol's older name)."""
    _refuse_old_and_new_tolerances("linalg.pinv", "rcond")
    _check_pinv(a)
    return _pinv(xp, a, atol, rtol if rcond is None else rcond, hermitian)


@pinv.derivative
def _(grad, a, rcond, hermitian, atol, rtol, *, out):
    return pinv_grad(grad, out, a)


@op("pinverse(input, rcond=1e-15)", out=False, grad_fn_name="LinalgPinvBackward0")
def pinverse(xp, a, rcond):
    """The pseudoinverse, singular values below ``rcond`` times the largest discarded."""
    _check_pinv(a)
    return _pinv(xp, a, None, rcond, False)


@pinverse.derivative
def _(grad, a, rcond, *, out):
    return pinv_grad(grad, out, a)


# --- matrix_rank ------------------------------------------------------------------------------

@op("matrix_rank(input, tol=None, hermitian=False, *, atol=None, rtol=None)", namespace="linalg",
    out=True)
def matrix_rank(xp, a, tol, hermitian, atol, rtol):
    """The number of singular values above max(atol, rtol * largest) (``tol`` is an older
    name for atol, with rtol 0), as int64."""
    _refuse_old_and_new_tolerances("linalg.matrix_rank", "tol")
    if a.ndim < 2:
        raise RuntimeError("torch.linalg.matrix_rank: The input tensor input must have at least "
                           "2 dimensions.")
    if tol is not None:
        atol, rtol = tol, 0.0
    if rtol is None:            # PyTorch's default rtol reads the dtype's epsilon
        _double_or_float(a)
    m, n = a.shape[-2:]
    if a.size == 0:
        return xp.zeros(a.shape[:-2], np.int64)
    if hermitian:
        check_square("linalg.eigh", a)
        check_kernel(a, "linalg_eigh_cpu")
    else:
        check_float("linalg.svd", a, "linalg_svd_cpu")
    s = xp.abs(xp.linalg.eigvalsh(a)) if hermitian else checked_svd(xp, a, compute_uv=False)
    limit = _tolerance(xp, s.max(axis=-1, keepdims=True), m, n, a.dtype, atol, rtol)
    return (s > limit).sum(axis=-1).astype(np.int64)


# --- lstsq ------------------------------------------------------------------------------------

def _check_lstsq(a, b, driver, rcond):
    name = "torch.linalg.lstsq"
    if a.ndim < 2:
        raise RuntimeError(f"{name}: input must have at least 2 dimensions.")
    if b.ndim < 1:
        raise RuntimeError(f"{name}: other must have at least 1 dimension.")
    if a.dtype != b.dtype:
        raise RuntimeError(f"{name}: Expected input and other to have the same dtype, but got "
                           f"input's dtype {torch_name(a)} and other's dtype {torch_name(b)}")
    if rcond is None:           # PyTorch's default rcond reads the dtype's epsilon
        _double_or_float(a)
    if not (a.ndim >= b.ndim and a.ndim - b.ndim <= 1):
        raise RuntimeError(f"{name}: input.dim() must be greater or equal to other.dim() and "
                           f"(input.dim() - other.dim()) <= 1")
    # other is a (batch of) vector(s) only when shaped as input without its last dim
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])
    if (b.shape[-1] if vector else b.shape[-2]) != a.shape[-2]:
        raise RuntimeError(f"{name}: input.size(-2) should match other.size"
                           f"({-1 if vector else -2})")
    if not vector and b.ndim == a.ndim - 1:     # PyTorch matches input's batch to other's
        for i, (x, y) in enumerate(zip(a.shape[:-2], b.shape[:-1])):      # leading dims
            if x != y and 1 not in (x, y):
                raise RuntimeError(f"The size of tensor a ({x}) must match the size of "
                                   f"tensor b ({y}) at non-singleton dimension {i}")
    if driver is not None and driver not in _DRIVERS:
        raise RuntimeError(f"{name}: parameter `driver` should be one of (gels, gelsy, gelsd, "
                           f"gelss)")
    check_kernel(a, "linalg_lstsq_cpu")
    return vector


@op("lstsq(input, b, rcond=None, *, driver=None)", inputs=2, namespace="linalg", out=True,
    namedtuple=lstsq_result, differentiable_outputs=(0, 1))
def lstsq(xp, a, b, rcond, driver):
    """(solution, residuals, rank, singular_values): the least-squares (minimum-norm)
    solution X of AX = B. residuals (squared column norms of AX - B) are computed when A is
    tall and of full rank, except by the default driver 'gelsy'; rank by all drivers but
    'gels'; singular values by 'gelsd' and 'gelss'.

    Every driver is computed through the SVD: 'gelsy' determines the rank from it rather
    than from a pivoted QR, which differs only for singular values near the threshold."""
    vector = _check_lstsq(a, b, driver, rcond)
    driver = driver or "gelsy"
    m, n = a.shape[-2:]
    b2 = b[..., None] if vector else b
    a_batch = a.shape[:-2]
    a, b2 = broadcast_batch(xp, a, b2)
    real = real_dtype(a.dtype)
    u, s, vh = checked_svd(xp, a, full_matrices=False)
    s_max = s.max(axis=-1, keepdims=True) if s.size else xp.zeros(s.shape[:-1] + (1,), real)
    eps = np.finfo(real).eps
    ratio = eps * max(m, n) if rcond is None else (eps if rcond < 0 else rcond)
    keep = s > ratio * s_max
    inverse = xp.where(keep, 1 / xp.where(keep, s, 1), 0).astype(real, copy=False)
    uh_b = xp.conj(u.swapaxes(-1, -2)) @ b2
    x = xp.conj(vh.swapaxes(-1, -2)) @ (inverse[..., :, None] * uh_b)
    rank = keep.sum(axis=-1).astype(np.int64)
    full = driver == "gels" or bool((rank == n).all())
    if m > n and driver != "gelsy" and full:
        residuals = (xp.abs(a @ x - b2) ** 2).sum(axis=-2).astype(real, copy=False)
    else:
        residuals = xp.zeros(0, real)
    values = _of_a(s, a_batch, 1) if driver in ("gelsd", "gelss") else xp.zeros(0, real)
    rank = xp.zeros(0, np.int64) if driver == "gels" else _of_a(rank, a_batch, 0)
    x = _solution_layout(xp, x, m)
    return (x[..., 0] if vector else x), residuals, rank, values


def _solution_layout(xp, x, m):
    """``x`` (n x k solutions) laid out as PyTorch's: the first n rows of a column-major
    max(m, n) x k matrix (LAPACK overwrites the m x k right side with the solution)."""
    n, k = x.shape[-2:]
    if m <= n:
        return column_major(xp, x)
    whole = column_major(xp, xp.zeros(x.shape[:-2] + (m, k), x.dtype))
    whole[..., :n, :] = x
    return whole[..., :n, :]


def _of_a(t, a_batch, tail):
    """``t`` (one entry per broadcast matrix, ``tail`` dims each) back to A's own batch
    shape: rank and singular values describe A alone, whatever B broadcast it to."""
    t = t[(0,) * (t.ndim - tail - len(a_batch))]
    return t[tuple(slice(None) if n != 1 else slice(0, 1) for n in a_batch)]


@lstsq.derivative(outputs=(0,))    # the solution (and A and B), as PyTorch's node keeps
def _(grads, a, b, rcond, driver, *, out):
    # X = pinv(A) B; the residuals |AX - B|^2 are stationary in X, so only their explicit
    # dependence on A and B counts
    grad_x, grad_res = grads[0], grads[1]
    x = out[0]
    vector = b.ndim == a.ndim - 1
    if vector:
        x, grad_x, b = x.unsqueeze(-1), grad_x.unsqueeze(-1), b.unsqueeze(-1)
    p = pinv(a)
    grad_b = mh(p) @ grad_x
    grad_a = pinv_grad(grad_x @ mh(b), p, a)
    if not undefined_grad(grad_res) and grad_res.numel():   # (residuals were computed)
        grad_r = 2 * (a @ x - b) * grad_res.unsqueeze(-2)
        grad_a = grad_a + grad_r @ mh(x)
        grad_b = grad_b - grad_r
    return grad_a, (grad_b.squeeze(-1) if vector else grad_b)



def lstsq_public(input, b, rcond=None, *, driver=None, out=None):
    """(solution, residuals, rank, singular_values): the least-squares (minimum-norm)
    solution X of AX = B; see the ``linalg.lstsq`` op (its singular values, as PyTorch's,
    need no gradient: ``differentiable_outputs``)."""
    return lstsq(input, b, rcond, driver=driver, out=out)


lstsq_public.__module__ = "ember.linalg"
lstsq_public.__name__ = lstsq_public.__qualname__ = "lstsq"
