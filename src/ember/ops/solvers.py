"""Inverses and linear solves: linalg.inv, inv_ex, solve, solve_ex, solve_triangular,
tensorinv, tensorsolve, and the top-level inverse.

Singular inputs: LAPACK stops at the first exactly-zero pivot of the LU factorization and
reports its (1-based) position; PyTorch's messages and ``info`` outputs carry it, so on
failure the LU factors are recomputed to find it (NumPy only says "Singular matrix").
"""

import math

import numpy as np

from ember._dtype import HALF_NP
from ember._warn import warn_once
from ember.ops._linalg_utils import (check_float, check_kernel, check_matrix, check_same_dtype,
                                     check_square, checked, column_major, empty_16bit_in_float32,
                                     lapack, mh, named_result, on_host, raise_first_failure,
                                     vector_rhs)
from ember.ops._registry import broadcast_message, op
from ember.ops._scalars import int64_arg

__all__ = ["inv", "inv_ex", "inverse", "solve", "solve_ex", "solve_triangular", "tensorinv",
           "tensorsolve", "lu_info", "lu_solve_all", "broadcast_batch", "singular_inverse",
           "triangular_solve"]

inv_ex_result = named_result("linalg_inv_ex", ("inverse", "info"))
solve_ex_result = named_result("linalg_solve_ex", ("result", "info"))


def lu_info(xp, a):
    """(LU, 0-based pivots, info) of each matrix: info is the 1-based position of the first
    zero pivot, 0 when there is none (LAPACK's getrf, one matrix at a time, on the CPU:
    cupyx's lu_factor takes one matrix and reports no info)."""
    return on_host(xp, _lu_info, a)


def _lu_info(xp, a):
    m, n = a.shape[-2:]
    flat = a.reshape((math.prod(a.shape[:-2]), m, n))
    lu = xp.empty_like(flat)
    piv = xp.zeros((flat.shape[0], min(m, n)), np.int32)
    info = xp.zeros(flat.shape[0], np.int32)
    if a.size:
        getrf = lapack("getrf", a.dtype)
        for i, matrix in enumerate(flat):
            if np.isnan(matrix).any():      # (getrf may pivot past the NaN: see nan_matrices)
                lu[i], piv[i] = np.nan, np.arange(min(m, n))
                continue
            lu[i], piv[i], code = getrf(matrix)
            info[i] = max(code, 0)
    batch = a.shape[:-2]
    return lu.reshape(a.shape), piv.reshape(batch + piv.shape[-1:]), info.reshape(batch)


def lu_solve_all(xp, lu, piv, b, trans=0):
    """Solve with LU factors (and 0-based pivots) for every matrix of a batch, singular ones
    included: they give LAPACK's inf and NaN. ``trans`` 0 solves with A, 1 with A^T, 2 with
    A^H. On the CPU (LAPACK's getrs), as ``lu_info``."""
    return on_host(xp, _lu_solve_all, lu, piv, b, trans=trans)


def _lu_solve_all(xp, lu, piv, b, trans):
    if b.size == 0:
        return xp.zeros(b.shape, lu.dtype)
    getrs = lapack("getrs", lu.dtype)
    n, k = b.shape[-2:]
    count = math.prod(b.shape[:-2])
    flat_b = b.reshape((count, n, k))
    flat_lu, flat_piv = lu.reshape((count, n, n)), piv.reshape((count, n))
    x = xp.empty(flat_b.shape, lu.dtype)
    for i in range(flat_b.shape[0]):
        x[i] = getrs(flat_lu[i], flat_piv[i], flat_b[i], trans=trans)[0]
    return x.reshape(b.shape)


# --- inv --------------------------------------------------------------------------------------

def singular_inverse(k):
    return (f"The diagonal element {k} is zero, the inversion could not be completed because "
            f"the input matrix is singular.")


def _inverse(xp, a, name):
    """(inverse, info) of a batch of square matrices."""
    check_square(name, a)
    check_float(name, a)
    info = xp.zeros(a.shape[:-2], np.int32)
    try:
        with checked(xp):
            return column_major(xp, xp.linalg.inv(a)), info
    except np.linalg.LinAlgError:
        lu, piv, info = lu_info(xp, a)
        eye = xp.broadcast_to(xp.eye(a.shape[-1], dtype=a.dtype), a.shape)
        return column_major(xp, lu_solve_all(xp, lu, piv, eye)), info


def _inverse_grad(grad, a, *, out):
    inverse = out[0] if isinstance(out, tuple) else out
    grad = grad[0] if isinstance(grad, tuple) else grad
    h = mh(inverse)
    return -(h @ grad @ h)


@op("inv(A)", namespace="linalg", out=True, grad_fn_name="LinalgInvExBackward0")
def inv(xp, a):
    """The inverse of each square matrix; raises LinAlgError for singular ones."""
    result, info = _inverse(xp, a, "linalg.inv")
    raise_first_failure("linalg.inv", info, a.shape, singular_inverse)
    return result


inv.derivative(_inverse_grad)
inv.reads_inputs(())            # PyTorch saves the inverse alone


@op("inverse(input)", out=True, grad_fn_name="LinalgInvExBackward0")
def inverse(xp, a):
    """The inverse of each square matrix (``linalg.inv``)."""
    return inv.forward(xp, a)


inverse.derivative(_inverse_grad)
inverse.reads_inputs(())


@op("inv_ex(A, *, check_errors=False)", namespace="linalg", out=True, namedtuple=inv_ex_result)
def inv_ex(xp, a, check_errors):
    """(inverse, info): info is nonzero for singular matrices, whose results are not valid."""
    result, info = _inverse(xp, a, "linalg.inv")
    if check_errors:
        raise_first_failure("linalg.inv_ex", info, a.shape, singular_inverse)
    return result, info


inv_ex.derivative(outputs=(0,))(
    lambda grad, a, check_errors, *, out: _inverse_grad(grad, a, out=out))
inv_ex.reads_inputs(())         # the inverse alone: not the input, nor info


# --- solve ------------------------------------------------------------------------------------

def _equation(left):
    return "AX = B" if left else "XA = B"


def _check_rhs(name, a, b, left):
    """B as a batch of matrices (vectors become columns), and whether it was a vector."""
    if b.ndim == 0:
        raise RuntimeError(f"{name}: The input tensor B must have at least 2 dimensions.")
    vector = vector_rhs(a, b)
    b2 = b[..., None] if vector else b
    if (a.shape[-1] != b2.shape[-2]) if left else (a.shape[-2] != b2.shape[-1]):
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation "
                           f"{_equation(left)} ({a.shape[-2]}x{a.shape[-1]} and "
                           f"{b2.shape[-2]}x{b2.shape[-1]})")
    if vector and not left:
        raise RuntimeError(f"{name}: Vector broadcasting of the left hand side is not "
                           f"supported for left=False. In this case linalg.solve is equivalent "
                           f"to B / A.squeeze(-1)")
    return b2, vector


def broadcast_batch(xp, a, b):
    """``a`` and ``b`` with their batch dims (all but the last two) broadcast together."""
    if a.shape[:-2] == b.shape[:-2]:
        return a, b
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        # PyTorch names B's batch first
        raise RuntimeError(broadcast_message([b.shape[:-2], a.shape[:-2]])) from None
    return xp.broadcast_to(a, batch + a.shape[-2:]), xp.broadcast_to(b, batch + b.shape[-2:])


def _solve(xp, a, b, left, name):
    """(X, info) with AX = B (left) or XA = B."""
    if a.dtype.kind not in "fc" and a.dtype not in HALF_NP:    # (bfloat16's NumPy kind is "V")
        check_float(name, a)
    check_same_dtype(name, a, b)            # before the 16-bit kernel's error, as PyTorch
    check_square(name, a)
    check_float(name, a, "lu_cpu")
    b2, vector = _check_rhs(name, a, b, left)
    if not left:                            # XA = B  <=>  A^T X^T = B^T
        a, b2 = a.swapaxes(-1, -2), b2.swapaxes(-1, -2)
    a2, b2 = broadcast_batch(xp, a, b2)
    info = xp.zeros(a.shape[:-2], np.int32)     # A is factored once, before broadcasting
    try:
        with checked(xp):
            x = xp.linalg.solve(a2, b2)
    except np.linalg.LinAlgError:
        lu, piv, info = lu_info(xp, a)
        batch = b2.shape[:-2]
        x = lu_solve_all(xp, xp.broadcast_to(lu, batch + lu.shape[-2:]),
                         xp.broadcast_to(piv, batch + piv.shape[-1:]), b2)
    if not left:        # the transposed system's solution is laid out column-major
        x = column_major(xp, x).swapaxes(-1, -2)
    x = x[..., 0] if vector else x
    return (column_major(xp, x) if left else x), info


def _singular_solve(k):
    return "The solver failed because the input matrix is singular."


def _solve_grad(grad, a, b, left, *, out):
    """AX = B: gB = A^{-H} gX, gA = -gB X^H (and the mirror image for XA = B)."""
    x = out[0] if isinstance(out, tuple) else out
    grad = grad[0] if isinstance(grad, tuple) else grad
    vector = vector_rhs(a, b)
    if vector:
        x, grad = x.unsqueeze(-1), grad.unsqueeze(-1)
    # (solve_ex: a singular A, which solve_ex leaves unchecked, gives inf and NaN, as PyTorch)
    grad_b = solve_ex(mh(a), grad, left=left)[0]
    grad_a = -(grad_b @ mh(x)) if left else -(mh(x) @ grad_b)
    return grad_a, (grad_b.squeeze(-1) if vector else grad_b)


@op("solve(A, B, *, left=True)", inputs=2, namespace="linalg", out=True)
@empty_16bit_in_float32
def solve(xp, a, b, left):
    """The solution X of AX = B (or XA = B when ``left`` is False)."""
    x, info = _solve(xp, a, b, left, "linalg.solve")
    raise_first_failure("torch.linalg.solve", info, info.shape + (0, 0), _singular_solve)
    return x


solve.name_nodes("LinalgSolveExBackward0")   # PyTorch solves by solve_ex


solve.derivative(_solve_grad)
solve.reads_inputs((0, 1), ())      # PyTorch saves A and the solution, B's size alone


@op("solve_ex(A, B, *, left=True, check_errors=False)", inputs=2, namespace="linalg",
    out=True, namedtuple=solve_ex_result)
@empty_16bit_in_float32
def solve_ex(xp, a, b, left, check_errors):
    """(X, info) with AX = B: info is nonzero where A is singular."""
    x, info = _solve(xp, a, b, left, "linalg.solve")
    if check_errors:
        raise_first_failure("torch.linalg.solve_ex", info, info.shape + (0, 0),
                            _singular_solve)
    return x, info


solve_ex.derivative(outputs=(0,))(lambda grad, a, b, left, check_errors, *, out:
                                  _solve_grad(grad, a, b, left, out=out))
solve_ex.reads_inputs((0, 1), ())   # A and the solution: not B, nor info


# --- solve_triangular -------------------------------------------------------------------------

def _back_substitute(xp, u, b):
    """The solution of UX = B by back substitution, row by row: a zero on U's diagonal, or an
    inf or NaN in B, gives inf and NaN where BLAS's trsm does."""
    x = xp.zeros(b.shape, b.dtype)
    for i in range(u.shape[-1] - 1, -1, -1):
        rest = b[..., i, :] - (u[..., i, :, None] * x).sum(axis=-2)
        x[..., i, :] = rest / u[..., i, i, None]
    return x


def _triangular(xp, a, b, upper, left, unit):
    """X with AX = B (left) or XA = B, A triangular."""
    name = "linalg.solve_triangular"
    check_matrix(name, a)
    check_square(name, a)
    check_matrix(name, b, "B")
    if (a.shape[-1] != b.shape[-2]) if left else (a.shape[-2] != b.shape[-1]):
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation "
                           f"{_equation(left)} ({a.shape[-2]}x{a.shape[-1]} and "
                           f"{b.shape[-2]}x{b.shape[-1]})")
    check_kernel(a, "triangular_solve_cpu")
    if b.dtype != a.dtype:                  # PyTorch computes in A's dtype
        if b.dtype.kind == "c" and a.dtype.kind != "c":
            warn_once("Casting complex values to real discards the imaginary part")
            b = b.real
        b = b.astype(a.dtype)
    a, b = broadcast_batch(xp, a, b)
    if not left:                            # XA = B  <=>  A^T X^T = B^T
        a, b, upper = a.swapaxes(-1, -2), b.swapaxes(-1, -2), not upper
    if b.size == 0:
        x = xp.zeros(b.shape, a.dtype)
    else:
        # a lower triangle with rows and columns reversed is an upper one; LU factors of an
        # upper triangle need no pivoting, so the general solver back-substitutes exactly
        if not upper:
            a, b = a[..., ::-1, ::-1], b[..., ::-1, :]
        u = xp.triu(a)
        if unit:
            diagonal = xp.arange(u.shape[-1])
            u[..., diagonal, diagonal] = 1
        # an inf or NaN in B spreads only to the rows substituted after it in BLAS's trsm,
        # but through the unit factor of an LU solve (0 * inf) to every row
        finite = bool(xp.isfinite(b).all())
        try:
            x = xp.linalg.solve(u, b) if finite else _back_substitute(xp, u, b)
        except np.linalg.LinAlgError:
            x = _back_substitute(xp, u, b)
        if not upper:
            x = x[..., ::-1, :]
    return column_major(xp, x if left else x.swapaxes(-1, -2))


def triangular_solve(xp, a, b, upper, unit=False):
    """X with AX = B for (batches of) triangular A, whose ``upper`` (or lower) triangle is
    read (its diagonal taken as ones when ``unit``), on checked operands: zeros on A's
    diagonal give inf and NaN."""
    return _triangular(xp, a, b, upper, True, unit)


@op("solve_triangular(input, B, *, upper, left=True, unitriangular=False)",
    inputs=2, namespace="linalg", out=True)
def solve_triangular(xp, a, b, upper, left, unitriangular):
    """The solution X of AX = B (or XA = B) for triangular A; only its ``upper`` (or lower)
    triangle is read, and its diagonal is taken as ones when ``unitriangular``."""
    return _triangular(xp, a, b, upper, left, unitriangular)


def triangular_grad(grad, a, x, upper, left, unitriangular):
    """(gA, gB) for the solution ``x`` of AX = B (or XA = B), A triangular: gB = A^{-H} gX
    (gX A^{-H}), gA = -gB X^H (-X^H gB) read in A's triangle (its diagonal too unless
    ``unitriangular``); torch.triangular_solve's node shares it."""
    grad_b = solve_triangular(mh(a), grad, upper=not upper, left=left,
                              unitriangular=unitriangular)
    grad_a = -(grad_b @ mh(x)) if left else -(mh(x) @ grad_b)
    grad_a = grad_a.triu(int(unitriangular)) if upper else grad_a.tril(-int(unitriangular))
    return grad_a, grad_b


@solve_triangular.derivative
def _(grad, a, b, upper, left, unitriangular, *, out):
    return triangular_grad(grad, a, out, upper, left, unitriangular)


solve_triangular.reads_inputs((0, 1), ())   # PyTorch saves A and the solution, not B



# --- tensorinv, tensorsolve -------------------------------------------------------------------

def _check_halves(shape, split, rows, what):
    """That the dims of ``shape`` from ``split`` on hold ``rows`` elements."""
    cols = math.prod(shape[split:])
    if rows != cols:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[{what}:]) "
                           f"== prod(self.shape[:{what}]), but got {cols} != {rows}")


def _tensorinv_size(shape, ind):
    ind = int64_arg(ind, "linalg_tensorinv", "ind")
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    n = math.prod(shape[:ind])
    _check_halves(shape, ind, n, "ind")
    return n


@op("tensorinv(input, ind=2)", namespace="linalg", out=True, saves_inputs=False)
def tensorinv(xp, a, ind):
    """The inverse of ``tensordot(input, ., ind)``: the inverse of the square matrix of the
    first ``ind`` dims by the others, reshaped to ``input.shape[ind:] + input.shape[:ind]``."""
    n = _tensorinv_size(a.shape, ind)
    result, info = _inverse(xp, a.reshape(n, n), "linalg.inv")
    raise_first_failure("inv", info, (n, n), singular_inverse)
    return result.reshape(a.shape[ind:] + a.shape[:ind])


@tensorinv.derivative
def _(grad, a, ind, *, out):
    n = math.prod(a.shape[:ind])
    return _inverse_grad(grad.reshape(n, n), None, out=out.reshape(n, n)).reshape(a.shape)


@tensorinv.composed_when_recording
def _(inputs, params):
    """PyTorch's graph: ``inv_ex`` of the input reshaped to a matrix, reshaped back."""
    a, ind = inputs[0], params[0]
    n = _tensorinv_size(a.shape, ind)
    inverse, info = inv_ex(a.reshape(n, n))
    raise_first_failure("inv", info._data, (n, n), singular_inverse)
    return inverse.reshape(a.shape[ind:] + a.shape[:ind])


def _tensorsolve_order(ndim, dims):
    """The permutation of A's dims that moves ``dims`` to the end."""
    from ember.ops.shape import _movedim_order
    if dims is None:
        return tuple(range(ndim))
    if not isinstance(dims, (tuple, list)):
        raise TypeError(f"linalg_tensorsolve(): argument 'dims' must be tuple of ints, not "
                        f"{type(dims).__name__}")
    return _movedim_order(ndim, tuple(dims), tuple(range(ndim - len(dims), ndim)))


@op("tensorsolve(input, other, dims=None)", inputs=2, namespace="linalg", out=True)
@empty_16bit_in_float32
def tensorsolve(xp, a, b, dims):
    """The solution X of ``tensordot(input, X, other.ndim) = other``, after ``input``'s
    ``dims`` are moved to the end."""
    a = a.transpose(_tensorsolve_order(a.ndim, dims))
    n = b.size          # PyTorch compares with B's size, whatever its message says
    _check_halves(a.shape, b.ndim, n, "other.ndim")
    if a.size != n * n:
        raise RuntimeError(f"shape '[{n}, {n}]' is invalid for input of size {a.size}")
    x, info = _solve(xp, a.reshape(n, n), b.reshape(n), True, "linalg.solve")
    raise_first_failure("torch.linalg.solve", info, (0, 0), _singular_solve)
    return x.reshape(a.shape[b.ndim:])


@tensorsolve.composed_when_recording
def _(inputs, params):
    """PyTorch's graph: ``dims`` moved to the end (a permute), ``solve`` of the input
    reshaped to a matrix and ``other`` flattened, the solution reshaped."""
    a, b = inputs
    if params[0] is not None:
        a = a.permute(_tensorsolve_order(a.ndim, params[0]))
    n = b.numel()
    _check_halves(a.shape, b.ndim, n, "other.ndim")
    if a.numel() != n * n:
        return NotImplemented           # the op's error
    flat = b if b.ndim == 1 else b.flatten()        # (PyTorch's flatten of a vector is itself)
    return solve(a.reshape(n, n), flat).reshape(a.shape[b.ndim:])


@tensorsolve.derivative
def _(grad, a, b, dims, *, out):
    order = _tensorsolve_order(a.ndim, dims)
    moved = a.permute(order)
    n = b.numel()
    grad_a, grad_b = _solve_grad(grad.reshape(n), moved.reshape(n, n), b.reshape(n), True,
                                 out=out.reshape(n))
    undo = sorted(range(len(order)), key=order.__getitem__)
    return grad_a.reshape(moved.shape).permute(undo), grad_b.reshape(b.shape)
