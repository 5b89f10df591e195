"""Matrix factorizations: linalg.cholesky, cholesky_ex, qr, eigh, eigvalsh, eig, eigvals, and
what uses a Cholesky factor: cholesky_solve, cholesky_inverse.

Their derivatives follow PyTorch's (documented in ``torch.linalg``): they assume distinct
eigenvalues, and for complex eigenvectors a loss that depends on their arbitrary phase is an
error, as in PyTorch.
"""

import numpy as np

from ember._tensor import Tensor
from ember._warn import warn_once
from ember.autograd._forward_traces import PULLING
from ember.ops._linalg_utils import (check_float, check_kernel, check_matrix, check_rhs_dtype,
                                     check_solve_rows, check_square, checked, column_major,
                                     empty_16bit_in_float32, eye_like, lapack, mh, named_result,
                                     on_host, raise_first_failure, torch_name, undefined_grad)
from ember.ops._out_dtypes import _C_NAMES
from ember.ops._reduce import constant
from ember.ops._registry import broadcast_message, op
from ember.ops.solvers import (singular_inverse, solve, solve_triangular, triangular_grad,
                               triangular_solve)

__all__ = ["cholesky", "cholesky_top", "cholesky_ex", "qr", "eigh", "eigvalsh", "eig", "eigvals",
           "check_phase", "qr_legacy", "cholesky_legacy", "triangular_solve_top",
           "cholesky_solve", "cholesky_inverse"]

cholesky_ex_result = named_result("linalg_cholesky_ex", ("L", "info"))
qr_result = named_result("linalg_qr", ("Q", "R"))
eigh_result = named_result("linalg_eigh", ("eigenvalues", "eigenvectors"))
eig_result = named_result("linalg_eig", ("eigenvalues", "eigenvectors"))


# --- cholesky ---------------------------------------------------------------------------------

def _potrf_each(xp, a, upper):
    """The LAPACK factorization of each matrix, with its info (the order of the first leading
    minor that is not positive-definite): what is left of a failed factorization is kept,
    as PyTorch's ``cholesky_ex`` returns it."""
    flat = a.reshape((-1,) + a.shape[-2:])
    potrf = lapack("potrf", a.dtype)
    out = xp.empty_like(flat)
    info = xp.zeros(flat.shape[0], np.int32)
    for i, m in enumerate(flat):
        c, code = potrf(m, lower=not upper, clean=True)
        out[i] = c
        info[i] = max(code, 0)
    return out.reshape(a.shape), info.reshape(a.shape[:-2])


def _adjoint(a):
    t = a.swapaxes(-1, -2)
    return t.conj() if a.dtype.kind == "c" else t


def _cholesky(xp, a, upper, name="linalg.cholesky"):
    """(factor, info) for a batch of Hermitian matrices (the ``upper`` or lower triangle is
    read)."""
    check_square(name, a)
    check_float(name, a, "cholesky_cpu")
    try:
        with checked(xp):
            if not upper:
                factor = xp.linalg.cholesky(a)
            else:   # U = chol(A^H)^H reads A's upper triangle (CuPy's cholesky has no `upper`)
                factor = _adjoint(xp.linalg.cholesky(_adjoint(a)))
            info = xp.zeros(a.shape[:-2], np.int32)
    except np.linalg.LinAlgError:
        factor, info = on_host(xp, _potrf_each, a, upper=upper)
    factor = column_major(xp, factor)
    return factor, xp.where(info == 0, _nan_info(xp, factor), info)


def _nan_info(xp, factor):
    """The 1-based position of each factor's first NaN diagonal entry (0 for none): LAPACK's
    reference potrf, which PyTorch's message reports, stops there (a NaN pivot is not
    positive), where OpenBLAS's carries on."""
    bad = xp.isnan(xp.diagonal(factor, axis1=-2, axis2=-1))
    if bad.shape[-1] == 0:
        return xp.zeros(bad.shape[:-1], np.int32)
    return xp.where(bad.any(-1), bad.argmax(-1) + 1, 0).astype(np.int32)


def _not_positive_definite(k):
    return (f"The factorization could not be completed because the input is not "
            f"positive-definite (the leading minor of order {k} is not positive-definite).")


def _cholesky_grad(grad, a, upper, *, out):
    # with A = L L^H: gA = L^{-H} Phi L^{-1}, Phi the Hermitian matrix made of the lower
    # triangle of L^H gL with its diagonal halved (Murray, arXiv:1602.07527)
    factor, grad = (out[0], grad[0]) if isinstance(out, tuple) else (out, grad)
    if upper:       # (conj_physical: forward AD's tangent of U, transposed back, is no conj view)
        factor, grad = mh(factor), grad.mT.conj_physical() if grad.is_complex() else grad.mT
    phi = (mh(factor) @ grad).tril()
    if PULLING.depth:
        # forward AD transposes this backward: PyTorch's tangent, dL = L Phi(L^-1 dA L^-H)
        # with Phi the lower triangle, diagonal halved, reads all of dA (not its Hermitian
        # part), so its transpose keeps Phi unsymmetrised
        phi = phi - 0.5 * phi.diagonal(0, -2, -1).diag_embed()
    else:
        phi = 0.5 * (phi + mh(phi.tril(-1)))
    grad_a = solve_triangular(mh(factor), phi, upper=True)
    return solve_triangular(factor, grad_a, upper=False, left=False)


@op("cholesky(input, *, upper=False)", namespace="linalg", out=True,
    grad_fn_name="LinalgCholeskyExBackward0", saves_inputs=False)   # (L alone, as PyTorch)
@empty_16bit_in_float32
def cholesky(xp, a, upper):
    """The Cholesky factor L (A = L L^H) of each Hermitian positive-definite matrix; the
    conjugate transpose U = L^H when ``upper``."""
    factor, info = _cholesky(xp, a, upper)
    raise_first_failure("linalg.cholesky", info, a.shape, _not_positive_definite)
    return factor


cholesky.derivative(_cholesky_grad)


@op("cholesky(input, upper=False)", out=True, method=False, grad_fn_name="CholeskyBackward0",
    saves_inputs=False)
def cholesky_top(xp, a, upper):
    """The factor of ``linalg.cholesky``, under the deprecated top-level op's name (its node's
    and messages'); an empty input is returned unchecked, laid out row-major, as PyTorch's."""
    if a.size == 0:
        return xp.ascontiguousarray(a).copy()
    check_square("cholesky", a)
    check_kernel(a, "cholesky_cpu")         # (no "Expected a floating point" check there)
    factor, info = _cholesky(xp, a, upper, "cholesky")
    raise_first_failure("cholesky", info, a.shape, _not_positive_definite)
    return factor


@cholesky_top.derivative
def _(grad, a, upper, *, out):
    return grad * 0 if out.numel() == 0 else _cholesky_grad(grad, a, upper, out=out)


# (PyTorch's legacy out= is resized row-major, where linalg.cholesky's takes the result's layout)
cholesky_top.out_layout = lambda res, inputs, out: res.copy()


@op("cholesky_ex(input, *, upper=False, check_errors=False)", namespace="linalg",
    out=True, namedtuple=cholesky_ex_result, saves_inputs=False)
@empty_16bit_in_float32
def cholesky_ex(xp, a, upper, check_errors):
    """(L, info): info is the order of the first leading minor that is not positive-definite
    (0 when the factorization succeeded)."""
    factor, info = _cholesky(xp, a, upper)
    if check_errors:
        raise_first_failure("linalg.cholesky_ex", info, a.shape, _not_positive_definite)
    return factor, info


cholesky_ex.derivative(lambda grad, a, upper, check_errors, *, out:
                       _cholesky_grad(grad, a, upper, out=out), outputs=(0,))  # not info


# --- cholesky_solve, cholesky_inverse ---------------------------------------------------------

def _lower(xp, factor, upper):
    """The lower-triangular factor L (A = L L^H) that ``factor`` (L, or U = L^H) holds."""
    return _adjoint(xp.triu(factor)) if upper else xp.tril(factor)


def _check_square(a):
    if a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"A must be batches of square matrices, but they are "
                           f"{a.shape[-2]} by {a.shape[-1]} matrices")


def _check_cholesky_solve(b, factor):
    if b.ndim < 2:
        raise RuntimeError(f"b should have at least 2 dimensions, but has {b.ndim} dimensions "
                           f"instead")
    if factor.ndim < 2:
        raise RuntimeError(f"u should have at least 2 dimensions, but has {factor.ndim} "
                           f"dimensions instead")
    check_rhs_dtype(factor, b)
    _check_square(factor)
    check_solve_rows("cholesky_solve", factor, b)
    try:
        np.broadcast_shapes(b.shape[:-2], factor.shape[:-2])
    except ValueError:
        raise RuntimeError(broadcast_message([b.shape[:-2], factor.shape[:-2]])) from None
    check_kernel(factor, "cholesky_solve_cpu")


@op("cholesky_solve(input, input2, upper=False)", inputs=2, out=True)
def cholesky_solve(xp, b, factor, upper):
    """The solution X of AX = B for Hermitian positive-definite A given by its Cholesky
    factor (L with A = L L^H, or U = L^H when ``upper``; only that triangle is read)."""
    _check_cholesky_solve(b, factor)
    low = _lower(xp, factor, upper)
    y = triangular_solve(xp, low, b, upper=False)
    return triangular_solve(xp, _adjoint(low), y, upper=True)


@cholesky_solve.derivative
def _(grad, b, factor, upper, *, out):
    # X = A^{-1} B with A = L L^H: gB = A^{-1} gX, gA = -gB X^H, and gL = (gA + gA^H) L
    # (U (gA + gA^H) for U), all of the factor's entries, as PyTorch gives them
    grad_b = cholesky_solve(grad, factor, upper)
    grad_a = -(grad_b @ mh(out))
    grad_a = grad_a + mh(grad_a)
    return grad_b, (factor @ grad_a if upper else grad_a @ factor)


@op("cholesky_inverse(input, upper=False)", out=True)
def cholesky_inverse(xp, factor, upper):
    """The inverse of a Hermitian positive-definite matrix A given by its Cholesky factor (L
    with A = L L^H, or U = L^H when ``upper``; only that triangle is read)."""
    name = "cholesky_inverse"
    check_square(name, factor)
    check_kernel(factor, "cholesky_inverse_out_cpu")
    diagonal = xp.diagonal(factor, 0, -2, -1)
    zero = diagonal == 0
    info = xp.where(zero.any(-1), zero.argmax(-1) + 1, 0) if zero.size else \
        xp.zeros(factor.shape[:-2], np.int64)
    raise_first_failure(name, info, factor.shape, singular_inverse)
    low = _lower(xp, factor, upper)
    eye = xp.broadcast_to(xp.eye(factor.shape[-1], dtype=factor.dtype), factor.shape)
    low_inverse = triangular_solve(xp, low, eye, upper=False)
    return column_major(xp, _adjoint(low_inverse) @ low_inverse)


@cholesky_inverse.derivative
def _(grad, factor, upper, *, out):
    # Y = A^{-1} (Hermitian): gA = -Y gY Y, then as for cholesky_solve
    grad_a = -(out @ grad @ out)
    grad_a = grad_a + mh(grad_a)
    return factor @ grad_a if upper else grad_a @ factor


# --- qr ---------------------------------------------------------------------------------------

_QR_MODES = ("reduced", "complete", "r")


# the decompositions save their outputs, not A, as PyTorch's nodes do
@op("qr(A, mode='reduced')", namespace="linalg", out=True, namedtuple=qr_result,
    saves_inputs=False)
def qr(xp, a, mode):
    """(Q, R) with A = QR, Q with orthonormal columns and R upper triangular; ``mode`` is
    'reduced', 'complete' (square Q) or 'r' (R only; Q is empty)."""
    check_matrix("linalg.qr", a)
    if a.dtype.kind not in "fcV" and a.dtype != np.float16:     # (bfloat16's kind is "V")
        check_float("linalg.qr", a)     # an integer dtype, before the mode; a 16-bit one after
    if mode not in _QR_MODES:
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           f"'reduced' (default), 'r', or 'complete'")
    check_float("linalg.qr", a, "geqrf_cpu")
    if mode == "r":
        return xp.zeros(0, a.dtype), column_major(xp, xp.linalg.qr(a, mode="r"))
    return tuple(column_major(xp, f) for f in xp.linalg.qr(a, mode=mode))


@qr.derivative
def _(grads, a, mode, *, out):
    # A = QR with Q^H Q = I: gA = [gQ + Q copyltu(M)] R^{-H}, M = R gR^H - gQ^H Q, where
    # copyltu(M) is the Hermitian matrix with M's lower triangle. A wide A = [X | Y],
    # R = [U | V] reduces to that case for X with gQ + Y gV^H; Y gets Q gV.
    grad_q, grad_r = grads
    q, r = out
    m, n = a.shape[-2], a.shape[-1]
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed "
                           "when mode='r'. Please use linalg.qr(A, mode='reduced') if you are "
                           "going to differentiate through linalg.qr.")
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' "
                           "and nrows > ncols.")
    if m >= n:
        return _qr_square_grad(grad_q, grad_r, q, r)
    x_r = r[..., :m]
    grad_x_r, grad_y_r = grad_r[..., :m], grad_r[..., m:]
    y = q @ r[..., m:]                  # (A's columns past m, from what the node kept)
    grad_x = _qr_square_grad(grad_q + y @ mh(grad_y_r), grad_x_r, q, x_r)
    return _cat_last(grad_x, q @ grad_y_r)


def _qr_square_grad(grad_q, grad_r, q, r):
    m = r @ mh(grad_r) - mh(grad_q) @ q
    low = m.tril(-1)
    herm = low + mh(low) + m.diagonal(0, -2, -1).real.diag_embed()
    b = grad_q + q @ herm
    return solve_triangular(mh(r), b, upper=False, left=False)


def _cat_last(a, b):
    from ember.ops.join import cat
    return cat([a, b], -1)


# --- eigh, eig --------------------------------------------------------------------------------

def _check_uplo(uplo):
    if uplo not in ("L", "U", "l", "u"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {uplo}")


def _check_eigh(xp, a, uplo):
    check_square("linalg.eigh", a)
    _check_uplo(uplo)
    if a.size:                  # (PyTorch returns empty integer input's eigenvalues unchecked)
        check_kernel(a, "linalg_eigh_cpu")


@op("eigh(input, UPLO='L')", namespace="linalg", out=True, namedtuple=eigh_result,
    saves_inputs=False)
@empty_16bit_in_float32
def eigh(xp, a, uplo):
    """(eigenvalues, eigenvectors) of each Hermitian matrix (its ``UPLO`` triangle is read):
    real eigenvalues in ascending order, orthonormal eigenvectors."""
    _check_eigh(xp, a, uplo)
    if a.dtype.kind not in "fc":    # (empty: checked) PyTorch's results keep its dtype
        return xp.zeros(a.shape[:-1], a.dtype), xp.zeros(a.shape, a.dtype)
    w, v = xp.linalg.eigh(a, UPLO=uplo.upper())
    return w, column_major(xp, v)


@op("eigvalsh(input, UPLO='L')", namespace="linalg", out=True,
    grad_fn_name="LinalgEighBackward0")
@empty_16bit_in_float32
def eigvalsh(xp, a, uplo):
    """The real eigenvalues of each Hermitian matrix, in ascending order."""
    _check_eigh(xp, a, uplo)
    if a.dtype.kind not in "fc":    # (empty: checked) PyTorch's result keeps its dtype
        return xp.zeros(a.shape[:-1], a.dtype)
    return xp.linalg.eigvalsh(a, UPLO=uplo.upper())


def check_phase(name, diagonal):
    """PyTorch's error when a loss depends on the arbitrary phase of complex eigenvectors or
    singular vectors: ``diagonal`` holds what must have no imaginary part."""
    if diagonal.is_complex() and bool(constant(
            lambda xp, d: (xp.abs(d.imag) > 1e-2).any(), diagonal)):
        what = "singular vectors" if name == "svd_backward" else "eigenvectors"
        depends = ("depends on this phase term, making it ill-defined" if name == "svd_backward"
                   else "depends on this quantity, so it is ill-defined")
        raise RuntimeError(f"{name}: The {what} in the complex case are specified up to "
                           f"multiplication by e^{{i phi}}. The specified loss function "
                           f"{depends}.")


def _eigen_grad(grad_w, grad_v, w, v, hermitian):
    """gA for A = V diag(w) V^{-1} (V^H for Hermitian A); without a gradient for V (the
    eigenvalues alone), V diag(gw) V^{-1}, finite for repeated eigenvalues too, as
    PyTorch's."""
    vh = mh(v)
    if undefined_grad(grad_v):
        if hermitian:
            return v @ (grad_w.unsqueeze(-1) * vh)
        return solve(vh, grad_w.unsqueeze(-1) * vh)
    vhgv = vh @ grad_v
    diagonal = vhgv.diagonal(0, -2, -1)
    check_phase("linalg_eigh_backward" if hermitian else "linalg_eig_backward", diagonal)
    if hermitian:
        # forward AD transposes this backward (its first pass, PULLING): PyTorch's tangent
        # V (V^H dA V / gaps) reads all of dA, not its Hermitian part, so no projection then
        if not PULLING.depth:
            vhgv = 0.5 * (vhgv - mh(vhgv))      # the skew-Hermitian part: V stays unitary
        gaps = w.unsqueeze(-2) - w.unsqueeze(-1)
    else:                                   # the eigenvectors keep unit norm
        vhgv = vhgv - vh @ (v * diagonal.real.unsqueeze(-2))
        gaps = (w.unsqueeze(-2) - w.unsqueeze(-1)).conj()
    eye = eye_like(vhgv)
    inner = vhgv / (gaps + eye) * (1 - eye) + grad_w.diag_embed()
    if hermitian:
        return v @ inner @ vh
    return solve(vh, inner @ vh)


@eigh.derivative
def _(grads, a, uplo, *, out):
    return _eigen_grad(grads[0], grads[1], out[0], out[1], hermitian=True)


@eigvalsh.composed_when_recording
def _(inputs, params):
    """PyTorch's graph: the eigenvalues (output 0) of an eigh, whose node keeps both
    outputs, not the input."""
    return eigh(inputs[0], params[0])[0]


@eigvalsh.derivative                # (forward-mode AD's)
def _(grad, a, uplo):
    w, v = eigh(a, uplo)
    return v @ (grad.unsqueeze(-1) * mh(v))


def _check_eig(name, a):
    check_square(name, a)
    if a.dtype.kind not in "fcV":
        raise RuntimeError(f"Unknown Complex ScalarType for {torch_name(a)}")
    check_kernel(a, "linalg_eig_out_cpu")


def _complex(a):
    return np.result_type(a.dtype, np.complex64)


# NOTE [eig on the host]: CuPy 14's eig (cuSOLVER's geev, CUDA >= 12.6) loops over a batch
# one matrix at a time and promises no eigenvalue order, so GPU results could come out
# permuted relative to the CPU's; as PyTorch does (MAGMA's geev runs on the host), ember
# computes eig and eigvals with LAPACK and copies the results back.

def _finite_for_eig(xp, a):
    if not xp.isfinite(a).all():    # PyTorch's check (NumPy's message differs)
        raise RuntimeError("torch.linalg.eig: input tensor should not contain infs or NaNs.")


def _eig(xp, a):
    _finite_for_eig(xp, a)
    w, v = xp.linalg.eig(a)
    return w.astype(_complex(a), copy=False), v.astype(_complex(a), copy=False)


def _eigvals(xp, a):
    _finite_for_eig(xp, a)
    return xp.linalg.eigvals(a).astype(_complex(a), copy=False)


@op("eig(input)", namespace="linalg", out=True, namedtuple=eig_result, saves_inputs=False)
def eig(xp, a):
    """(eigenvalues, eigenvectors) of each square matrix, complex; eigenvectors have unit
    norm."""
    _check_eig("linalg.eig", a)
    w, v = on_host(xp, _eig, a)
    return w, column_major(xp, v)


@op("eigvals(input)", namespace="linalg", out=True, grad_fn_name="LinalgEigBackward0")
def eigvals(xp, a):
    """The complex eigenvalues of each square matrix."""
    _check_eig("linalg.eigvals", a)
    return on_host(xp, _eigvals, a)


@eig.derivative
def _(grads, a, *, out):
    return _eigen_grad(grads[0], grads[1], out[0], out[1], hermitian=False)


@eigvals.composed_when_recording
def _(inputs, params):
    """PyTorch's graph: the eigenvalues (output 0) of an eig, whose node keeps both outputs,
    not the input."""
    return eig(inputs[0])[0]


@eigvals.derivative                 # (forward-mode AD's)
def _(grad, a):
    w, v = eig(a)
    vh = mh(v)
    return solve(vh, grad.unsqueeze(-1) * vh)



# --- the deprecated top-level names -----------------------------------------------------------

_QR_DEPRECATED = (
    "torch.qr is deprecated in favor of torch.linalg.qr and will be removed in a future "
    "PyTorch release.\nThe boolean parameter 'some' has been replaced with a string parameter "
    "'mode'.\nQ, R = torch.qr(A, some)\nshould be replaced with\nQ, R = torch.linalg.qr(A, "
    "'reduced' if some else 'complete')")
_CHOLESKY_DEPRECATED = (
    "torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in a "
    "future PyTorch release.\nL = torch.cholesky(A)\nshould be replaced with\nL = "
    "torch.linalg.cholesky(A)\nand\nU = torch.cholesky(A, upper=True)\nshould be replaced "
    "with\nU = torch.linalg.cholesky(A).mH\nThis transform will produce equivalent results for "
    "all valid (symmetric positive definite) inputs.")
qr_top_result = named_result("qr", ("Q", "R"))


def qr_legacy(input, some=True, *, out=None):
    """(Q, R): ``linalg.qr(input, 'reduced' if some else 'complete')`` (deprecated)."""
    warn_once(_QR_DEPRECATED)
    q, r = qr(input, "reduced" if some else "complete", out=out)
    return (qr_top_result if out is None else qr_top_result.out_type)(q, r)


def cholesky_legacy(input, upper=False, *, out=None):
    """The Cholesky factor L (or U = L^H when ``upper``): ``linalg.cholesky`` (deprecated)."""
    warn_once(_CHOLESKY_DEPRECATED)
    return cholesky_top(input, upper, out=out)


_TRIANGULAR_DEPRECATED = (
    "torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangularand will be "
    "removed in a future PyTorch release.\ntorch.linalg.solve_triangular has its arguments "
    "reversed and does not return a copy of one of the inputs.\nX = torch.triangular_solve(B, "
    "A).solution\nshould be replaced with\nX = torch.linalg.solve_triangular(A, B).")
triangular_solve_result = named_result("triangular_solve", ("solution", "cloned_coefficient"))


def _check_triangular_solve(b, a):
    for x, arg in ((b, "b"), (a, "A")):
        if x.ndim < 2:
            raise RuntimeError(f"torch.triangular_solve: Expected {arg} to have at least 2 "
                               f"dimensions, but it has {x.ndim} dimensions instead")
    check_rhs_dtype(a, b)
    _check_square(a)
    check_solve_rows("triangular_solve", a, b)


@op("triangular_solve(input, A, upper=True, transpose=False, unitriangular=False)", inputs=2,
    method=False, namedtuple=triangular_solve_result)
def triangular_solve_top(xp, b, a, upper, transpose, unitriangular):
    """(X, a copy of A) with A X = ``input`` (A^T X = ``input`` when ``transpose``), A
    triangular, under the deprecated op's node (TriangularSolveBackward0, both outputs); the
    copy has the batch dims broadcast, laid out column-major, as PyTorch's."""
    _check_triangular_solve(b, a)
    system = a.swapaxes(-1, -2) if transpose else a
    solution = triangular_solve(xp, system, b, upper != transpose, unitriangular)
    copy = xp.broadcast_to(a, solution.shape[:-2] + a.shape[-2:]).copy()
    return solution, column_major(xp, copy)


@triangular_solve_top.derivative
def _(grads, b, a, upper, transpose, unitriangular, *, out):
    # X = S^{-1} B with S = A (A^T when transposed): linalg.solve_triangular's gradients for
    # S, transposed back to A; the copy's gradient reaches all of A
    grad_x, grad_copy = grads
    grad_b = grad_a = None
    if not undefined_grad(grad_x):
        system = a.mT if transpose else a
        grad_a, grad_b = triangular_grad(grad_x, system, out[0], upper != transpose, True,
                                         unitriangular)
        grad_a = grad_a.mT if transpose else grad_a
    if not undefined_grad(grad_copy):
        grad_a = grad_copy if grad_a is None else grad_a + grad_copy
        if grad_b is None:          # (PyTorch's zeros, not an undefined gradient)
            grad_b = grad_copy.new_zeros(b.shape)
    return grad_b, grad_a


def triangular_solve_legacy(input, A, upper=True, transpose=False, unitriangular=False, *,
                            out=None):
    """(X, a copy of A) with A X = ``input`` (A^T X = ``input`` when ``transpose``), A
    triangular: ``linalg.solve_triangular`` with its arguments reversed (deprecated)."""
    warn_once(_TRIANGULAR_DEPRECATED)
    result = triangular_solve_top(input, A, upper, transpose, unitriangular)
    if out is not None:
        for dst, value in zip(out, result):
            if dst.dtype is not value.dtype:
                raise RuntimeError(f"Expected out tensor to have dtype {_C_NAMES[value.dtype]}, "
                                   f"but got {_C_NAMES[dst.dtype]} instead")
        for dst, value in zip(out, result):
            if dst.shape != value.shape:    # resized column-major, as PyTorch's
                dst.resize_(*value.shape[:-2], value.shape[-1], value.shape[-2]).transpose_(-2, -1)
            dst.copy_(value)
        return triangular_solve_result.out_type(*out)
    return result


for _fn, _name in ((qr_legacy, "qr"), (cholesky_legacy, "cholesky"),
                   (triangular_solve_legacy, "triangular_solve")):
    _fn.__module__, _fn.__name__, _fn.__qualname__ = "ember", _name, _name
    setattr(Tensor, _name, _fn)
PUBLIC = {"qr": qr_legacy, "cholesky": cholesky_legacy,
          "triangular_solve": triangular_solve_legacy}
