"""Functions of square matrices: linalg.det, slogdet, matrix_power, matrix_exp, their
top-level names (det, logdet, slogdet, matrix_power, matrix_exp), and linalg.cross."""

import numpy as np

from ember import _dtype as D

from ember.ops._linalg_utils import (check_float, check_square, checked, empty_16bit_in_float32,
                                     eye_like, mh, named_result, nan_matrices, on_host,
                                     scipy_linalg, torch_name)
from ember.ops._barebones import WIDE_UNSIGNED_NP, refusal
from ember.ops._elementwise import zeros_for
from ember.ops._reduce import constant, torch_grad_mode
from ember.ops._registry import broadcast_message, op
from ember.ops._scalars import int64_arg
from ember.ops.linalg import matmul
from ember.ops.singular import svd
from ember.ops.solvers import inv, lu_info, lu_solve_all, solve

__all__ = ["det", "det_top", "slogdet", "slogdet_top", "logdet", "matrix_power",
           "matrix_power_top", "matrix_exp", "matrix_exp_top", "cross"]

slogdet_result = named_result("linalg_slogdet", ("sign", "logabsdet"))
slogdet_top_result = named_result("slogdet", ("sign", "logabsdet"))


# --- det, slogdet, logdet ---------------------------------------------------------------------

def _det(xp, a):
    check_square("linalg.det", a)
    check_float("linalg.det", a, "lu_cpu")
    return xp.where(nan_matrices(xp, a), np.nan, xp.linalg.det(a)).astype(a.dtype, copy=False)


def _det_grad(grad, a, *, out):
    # d det(A) = det(A) tr(A^{-1} dA): gA = g conj(det) A^{-H}. A singular matrix has no
    # inverse but a cofactor matrix all the same, which the SVD A = U S V^H gives:
    # cof(A) = det(U) det(V^H) U diag(prod_{j != i} s_j) V^H
    if a.numel() == 0:          # (no inverse needed: 16-bit empties have none)
        return a.new_zeros(a.shape)
    if a.shape[-1] == 1:        # det is the entry itself: its cofactor is 1, singular or not
        return grad.unsqueeze(-1).unsqueeze(-1).expand(a.shape)
    scale = (grad * out.conj()).unsqueeze(-1).unsqueeze(-1)
    if not bool(constant(lambda xp, d: (d == 0).any(), out)):
        return scale * mh(inv(a))
    if not torch_grad_mode():
        # PyTorch (without create_graph) solves A^H X = g conj(det) I with A's LU factors:
        # for a zero determinant the right side is 0, and so is what LAPACK returns
        singular = (out == 0).unsqueeze(-1).unsqueeze(-1)
        return (scale * mh(inv(a.where(~singular, eye_like(a))))).where(~singular, 0)
    u, s, vh = svd(a, False)
    phase = (det(u) * det(vh)).conj()
    weights = (grad * phase).unsqueeze(-1) * _products_of_others(s)
    return (u * weights.unsqueeze(-2)) @ vh


def _products_of_others(s):
    """For each s_i of the last dim, the product of the others (exact where some are 0)."""
    from ember.ops.join import cat
    ones = s[..., :1] * 0 + 1
    before = cat([ones, s[..., :-1]], -1).cumprod(-1)
    after = cat([s[..., 1:], ones], -1).flip(-1).cumprod(-1).flip(-1)
    return before * after


@op("det(A)", namespace="linalg", out=True)
@empty_16bit_in_float32
def det(xp, a):
    """The determinant of each square matrix."""
    return _det(xp, a)


@op("det(input)", out=False, grad_fn_name="LinalgDetBackward0")
@empty_16bit_in_float32
def det_top(xp, a):
    """The determinant of each square matrix (``linalg.det``)."""
    return _det(xp, a)


det.derivative(_det_grad)
det_top.derivative(_det_grad)


def _slogdet(xp, a, name="linalg.slogdet"):
    check_square(name, a)
    check_float(name, a)
    sign, logabsdet = xp.linalg.slogdet(a)
    nan = nan_matrices(xp, a)               # PyTorch: sign 0 and a NaN log for those
    return (xp.where(nan, 0, sign).astype(sign.dtype, copy=False),
            xp.where(nan, np.nan, logabsdet).astype(logabsdet.dtype, copy=False))


def _slogdet_grad(grads, a, *, out):
    # log det A = logabsdet + i theta (sign = e^{i theta}): the gradient of the holomorphic
    # log det is g A^{-H}, with g = g_logabsdet + i Im(conj(sign) g_sign); the sign of a
    # real determinant is locally constant
    grad_sign, grad_log = grads
    sign = out[0]
    g = grad_log
    if a.is_complex():
        g = g + 1j * (sign.conj() * grad_sign).imag
    return _log_det_grad(g, a)


def _log_det_grad(g, a):
    """g A^{-H} for each matrix, as PyTorch computes it. In grad mode (create_graph, or a torch.func
    transform): a differentiable solve of A^H X = g I, which raises for a singular A as
    PyTorch's does. Otherwise from the LU factors PyTorch's forward keeps, without raising: a
    singular A gives its infinities and NaNs, which depend on the matrix factored (A^T for a
    C-contiguous real A, else A)."""
    g = g.unsqueeze(-1).unsqueeze(-1)
    if torch_grad_mode():
        return solve(mh(a), g * eye_like(a))
    transposed = not a.is_complex() and a.is_contiguous()
    return g * constant(lambda xp, x: _adjoint_inverse(xp, x, transposed), a)


def _adjoint_inverse(xp, a, transposed):
    """A^{-H} of each matrix from the LU factors of A^T (``transposed``) or of A; a singular
    matrix gives LAPACK's inf and NaN, one holding a NaN only NaN."""
    factored = xp.swapaxes(a, -1, -2) if transposed else a
    try:
        with checked(xp):
            inverse = xp.linalg.inv(factored)       # (the batched fast path)
        if not transposed:
            inverse = xp.conj(xp.swapaxes(inverse, -1, -2))
    except np.linalg.LinAlgError:
        lu, piv, _ = lu_info(xp, factored)
        eye = xp.broadcast_to(xp.eye(a.shape[-1], dtype=a.dtype), a.shape)
        inverse = lu_solve_all(xp, lu, piv, eye, trans=0 if transposed else 2)
    return xp.where(nan_matrices(xp, a)[..., None, None], np.nan, inverse)


@op("slogdet(A)", namespace="linalg", out=True, namedtuple=slogdet_result)
def slogdet(xp, a):
    """(sign, logabsdet): the sign (a unit complex number for complex input, else -1, 0 or
    1) and the log of the absolute value of each determinant."""
    return _slogdet(xp, a)


@op("slogdet(input)", out=True, namedtuple=slogdet_top_result,
    grad_fn_name="LinalgSlogdetBackward0")
def slogdet_top(xp, a):
    """(sign, logabsdet) of each determinant (``linalg.slogdet``)."""
    return _slogdet(xp, a)


# PyTorch's node keeps A and the sign, not logabsdet
slogdet.derivative(_slogdet_grad, outputs=(0,))
slogdet_top.derivative(_slogdet_grad, outputs=(0,))


@op("logdet(input)", out=False)
def logdet(xp, a):
    """The log of each determinant: NaN for a negative real determinant, -inf for zero."""
    sign, logabsdet = _slogdet(xp, a, "logdet")
    if a.dtype.kind == "c":           # log(0) has no phase: NaN, as in PyTorch
        return xp.where(sign == 0, complex(-np.inf, np.nan), xp.log(sign) + logabsdet)
    return xp.where(sign < 0, np.nan, logabsdet).astype(a.dtype, copy=False)


# PyTorch composes logdet from slogdet: a where() for real inputs, log(sign) + logabsdet
logdet.named_by(lambda flat, params, out:
                "AddBackward0" if flat[0].is_complex() else "WhereBackward0")


@logdet.derivative
def _(grad, a):
    # a negative determinant (a NaN result) passes nothing; read from A, not the result,
    # which PyTorch's where() does not keep
    if not a.is_complex():
        grad = grad * constant(lambda xp, v: (xp.linalg.slogdet(v)[0] >= 0).astype(v.dtype)
                               .reshape(v.shape[:-2]), a)
    return _log_det_grad(grad, a)


# --- matrix_power -----------------------------------------------------------------------------

def _matrix_power(xp, a, n, fname="linalg_matrix_power"):
    check_square("linalg.matrix_power", a)
    n = int64_arg(n, fname, "n", 2)
    if a.dtype in WIDE_UNSIGNED_NP and (n == 0 or n > 1):       # (ops/_barebones.py)
        kernel = "eye" if n == 0 else "addmm_impl_cpu_" if a.ndim == 2 else "bmm"
        raise refusal(kernel, D.FROM_NUMPY[a.dtype])
    if n == 0:
        return xp.broadcast_to(xp.eye(a.shape[-1], dtype=a.dtype), a.shape).copy()
    if n < 0:
        a, n = inv.forward(xp, a), -n
        if n == 1:
            return a            # a fresh inverse, laid out column-major as PyTorch's
    if n == 1:
        return a.copy()
    if n == 3:                  # PyTorch's one special case: (A A) A
        return matmul.forward(xp, matmul.forward(xp, a, a), a)
    # the binary powers of A, multiplied in as n's bits come up (PyTorch's order)
    result = power = None
    while n:
        bit, n = n & 1, n >> 1
        power = a if power is None else matmul.forward(xp, power, power)
        if bit:
            result = power if result is None else matmul.forward(xp, result, power)
    return result


def _matrix_power_grad(grad, a, n):
    # d(A^n) = sum_k A^k dA A^(n-1-k): gA = sum_k (A^H)^k G (A^H)^(n-1-k); a negative power
    # is a power of the inverse
    n = int64_arg(n, "matrix_power", "n")
    if n == 0:
        return zeros_for(grad)
    if n == 1:                  # (a clone: the input was not saved)
        return grad
    base = inv(a) if n < 0 else a
    m = abs(n)
    h = mh(base)
    powers = [eye_like(h)]
    for _ in range(m - 1):
        powers.append(powers[-1] @ h)
    total = sum(powers[k] @ grad @ powers[m - 1 - k] for k in range(m))
    if n < 0:
        return -(h @ total @ h)
    return total


@op("matrix_power(input, n)", namespace="linalg", out=True)
def matrix_power(xp, a, n):
    """The n-th power of each square matrix (for negative n, of its inverse)."""
    return _matrix_power(xp, a, n)


@op("matrix_power(input, n)", out=True)
def matrix_power_top(xp, a, n):
    """The n-th power of each square matrix (``linalg.matrix_power``)."""
    return _matrix_power(xp, a, n, "matrix_power")


matrix_power.derivative(_matrix_power_grad)
matrix_power_top.derivative(_matrix_power_grad)


def _inverse_power(fname):
    """PyTorch's graph of a negative power: the power of an inverse (whose node saves the
    inverse alone, not the input)."""
    def composed(inputs, params):
        a, n = inputs[0], params[0]
        check_square("linalg.matrix_power", a._data)
        n = int64_arg(n, fname, "n", 2)
        if n >= 0:
            return NotImplemented
        inverse = inv(a)
        return inverse if n == -1 else matrix_power(inverse, -n)
    return composed


for _power, _fname in ((matrix_power, "linalg_matrix_power"), (matrix_power_top, "matrix_power")):
    # PyTorch's copy of I and clone save nothing
    _power.reads_inputs(lambda flat, params: ((),) if int(params[0]) in (0, 1) else ((0,),))
    _power.composed_when_recording(_inverse_power(_fname))


@matrix_power.named_by
@matrix_power_top.named_by
def _(flat, params, out):
    # PyTorch composes the power: a copy of I, a clone, an inverse, or products (mm, or
    # matmul's view of bmm for a batch)
    n = int(params[0])
    if n in (0, 1, -1):
        return ("LinalgInvExBackward0", "CopyBackwards", "CloneBackward0")[n + 1]
    return "MmBackward0" if flat[0].ndim == 2 else "UnsafeViewBackward0"


# --- matrix_exp -------------------------------------------------------------------------------

def _matrix_exp(xp, a):
    name = "linalg.matrix_exp"
    check_square(name, a)
    if a.dtype.kind not in "fcV":
        check_float(name, a)
    if a.size == 0:
        return a.copy()
    # on the CPU for CUDA input too: cupyx's expm takes one matrix, always scales and uses
    # the [13/13] Pade approximant, so its results would drift from the CPU's
    return on_host(xp, _expm, a)


def _expm(xp, a):
    # in double precision: SciPy's single-precision expm is off by tens of ulps
    wide = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    return scipy_linalg(xp).expm(wide).astype(a.dtype, copy=False)


def _matrix_exp_grad(grad, a):
    # the derivative of exp at A in direction G is the top-right block of
    # exp([[A, G], [0, A]]); the adjoint uses A^H
    from ember.ops.join import cat
    n = a.shape[-1]
    ah = mh(a)
    top = cat([ah, grad], -1)
    bottom = cat([ah * 0, ah], -1)
    return matrix_exp(cat([top, bottom], -2))[..., :n, n:]


@op("matrix_exp(input)", namespace="linalg", out=False)
def matrix_exp(xp, a):
    """The matrix exponential of each square matrix."""
    return _matrix_exp(xp, a)


@op("matrix_exp(input)", out=False, grad_fn_name="LinalgMatrixExpBackward0")
def matrix_exp_top(xp, a):
    """The matrix exponential of each square matrix (``linalg.matrix_exp``)."""
    return _matrix_exp(xp, a)


matrix_exp.derivative(_matrix_exp_grad)
matrix_exp_top.derivative(_matrix_exp_grad)


# --- cross ------------------------------------------------------------------------------------

@op("cross(input, other, *, dim=-1)", inputs=2, namespace="linalg", out=True)
def cross(xp, a, b, dim):
    """The cross product of 3-vectors along ``dim`` (other dims broadcast)."""
    from ember.ops._dims import int_param, wrap_dim
    if type(dim) is not int:            # (the parser's check comes first)
        dim = int_param(dim, None, strict=True)
    if a.ndim != b.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if a.ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    d = wrap_dim(dim, a.ndim)
    try:
        shape = a.shape if a.shape == b.shape else np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise RuntimeError(broadcast_message([a.shape, b.shape])) from None
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{a.shape[d]} and {b.shape[d]}")
    if a.dtype == np.bool_:             # (PyTorch's kernel picks by input's dtype first)
        raise NotImplementedError("\"cross\" not implemented for 'Bool'")
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected scalar type {torch_name(a)} but found {torch_name(b)}")
    # by components, as np.cross computes them (its axis moves cost 10x this on small
    # inputs), into a row-major result as PyTorch's
    head = (slice(None),) * d
    a0, a1, a2 = (a[head + (i, ...)] for i in range(3))    # (``...``: 0-d arrays, not scalars)
    b0, b1, b2 = (b[head + (i, ...)] for i in range(3))
    res = xp.empty(shape, a.dtype)
    for i, (p, q, r, s) in enumerate(((a1, b2, a2, b1), (a2, b0, a0, b2), (a0, b1, a1, b0))):
        part = res[head + (i, ...)]
        xp.multiply(p, q, out=part)
        part -= r * s
    return res


@cross.derivative
def _(grad, a, b, dim):
    return cross(b.conj(), grad, dim=dim), cross(grad, a.conj(), dim=dim)
