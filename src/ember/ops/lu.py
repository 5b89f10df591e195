"""The LU factorization with partial pivoting: linalg.lu, lu_factor, lu_factor_ex, lu_solve,
lu_unpack, and the deprecated top-level lu and lu_solve.

As in PyTorch (and LAPACK), LU packs L (unit lower triangular, its diagonal not stored) and
U, and the int32 pivots are 1-based: row i was swapped with row pivots[i] - 1.
"""


import numpy as np

from ember import _dtype as D
from ember._tensor import Tensor, _make
from ember._warn import warn_once
from ember.backend import xp_of
from ember.ops._linalg_utils import (check_float, check_kernel, check_square, column_major,
                                     empty_16bit_in_float32, mh, named_result, raise_first_failure,
                                     torch_name)
from ember.ops._registry import op
from ember.ops.solvers import broadcast_batch, lu_info, lu_solve_all, solve_triangular

__all__ = ["lu_factor", "lu_factor_ex", "lu_solve", "lu_unpack", "lu_legacy",
           "lu_solve_legacy", "linalg_lu", "linalg_lu_public"]

lu_factor_result = named_result("linalg_lu_factor", ("LU", "pivots"))
lu_factor_ex_result = named_result("linalg_lu_factor_ex", ("LU", "pivots", "info"))
lu_unpack_result = named_result("lu_unpack", ("P", "L", "U"))
linalg_lu_result = named_result("linalg_lu", ("P", "L", "U"))
lu_with_info_result = named_result("_lu_with_info", ("LU", "pivots", "info"))


def _zero_pivot(k):
    return (f"U[{k},{k}] is zero and using it on lu_solve would result in a division by zero. "
            f"If you still want to perform the factorization, consider calling "
            f"linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")


def _factor(xp, a, pivot):
    if a.ndim < 2:
        raise RuntimeError(f"torch.lu_factor: Expected tensor with 2 or more dimensions. Got "
                           f"size: {list(a.shape)} instead")
    if a.size:                  # (PyTorch factors empty integer input unchecked)
        check_kernel(a, "lu_cpu")
    if not pivot and a.size:            # (PyTorch factors an empty input either way)
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the "
                           "CPU")
    lu, piv, info = lu_info(xp, a)
    return column_major(xp, lu), (piv + 1).astype(np.int32, copy=False), info


# the factorizations save their outputs, not A, as PyTorch's nodes do
@op("lu_factor(A, *, pivot=True)", namespace="linalg", out=True, namedtuple=lu_factor_result,
    grad_fn_name="LinalgLuFactorExBackward0", saves_inputs=False)
@empty_16bit_in_float32
def lu_factor(xp, a, pivot):
    """(LU, pivots) of each matrix: A = P L U; raises for a zero pivot (singular A)."""
    lu, piv, info = _factor(xp, a, pivot)
    raise_first_failure("torch.linalg.lu_factor", info, a.shape, _zero_pivot, RuntimeError)
    return lu, piv


@op("lu_factor_ex(A, *, pivot=True, check_errors=False)", namespace="linalg", out=True,
    namedtuple=lu_factor_ex_result, saves_inputs=False)
@empty_16bit_in_float32
def lu_factor_ex(xp, a, pivot, check_errors):
    """(LU, pivots, info): info is the 1-based position of the first zero pivot, else 0."""
    lu, piv, info = _factor(xp, a, pivot)
    if check_errors:
        raise_first_failure("torch.linalg.lu_factor_ex", info, a.shape, _zero_pivot,
                            RuntimeError)
    return lu, piv, info


# --- unpacking, for the derivatives -----------------------------------------------------------

def _permutation_array(xp, piv, m):
    """The (bool) permutation matrix P (A = P L U) of 0-based pivots: the row swaps i <->
    piv[i], in order."""
    perm = xp.broadcast_to(xp.arange(m), piv.shape[:-1] + (m,)).copy()
    for i in range(piv.shape[-1]):
        j = piv[..., i:i + 1]
        row_i = perm[..., i:i + 1].copy()
        perm[..., i:i + 1] = xp.take_along_axis(perm, j, -1)
        xp.put_along_axis(perm, j, row_i, -1)
    # P^T A = A[perm]: P^T has a one at (r, perm[r])
    p_t = perm[..., :, None] == xp.arange(m)
    return xp.ascontiguousarray(p_t.swapaxes(-1, -2))


def _permutation(pivots, m):
    """The permutation matrix P (A = P L U) of 1-based LAPACK pivots, as a constant tensor."""
    return _make(_permutation_array(xp_of(pivots._data), pivots._data - 1, m))


def _unpack(lu, pivots):
    """(P, L, U) of a packed factorization (L and U differentiable in LU)."""
    from ember._creation import eye
    m, n = lu.shape[-2], lu.shape[-1]
    k = min(m, n)
    p = _permutation(pivots, m).to(lu.dtype)
    low = lu[..., :, :k].tril(-1) + eye(m, k, dtype=lu.dtype, device=lu.device)
    return p, low, lu[..., :k, :].triu()


# --- lu_factor derivative ---------------------------------------------------------------------

def _square_factor_grad(grad_l, grad_u, low, up):
    # A = L U (square, L unit lower): gA = L^{-H} [tril(L^H gL, -1) + triu(gU U^H)] U^{-H}
    m = (mh(low) @ grad_l).tril(-1) + (grad_u @ mh(up)).triu()
    x = solve_triangular(mh(low), m, upper=True, unitriangular=True)
    return solve_triangular(mh(up), x, upper=False, left=False)


def _factor_grad(grads, a, pivot, *, out):
    return _unpacked_factor_grad(grads[0], *_unpack(out[0], out[1]))


def _unpacked_factor_grad(grad_lu, p, low, up):
    """The gradient for A = P L U of the gradient for the packed LU."""
    from ember.ops.join import cat
    m, n = low.shape[-2], up.shape[-1]
    if m == n:
        grad = _square_factor_grad(grad_lu.tril(-1), grad_lu.triu(), low, up)
    elif m > n:
        # P^T A = [L1 U; L2 U]: L2 = (P^T A)_2 U^{-1} passes its gradient on through U
        grad_l1, grad_l2 = grad_lu[..., :n, :].tril(-1), grad_lu[..., n:, :]
        l1, l2 = low[..., :n, :], low[..., n:, :]
        grad_a2 = solve_triangular(mh(up), grad_l2, upper=False, left=False)
        grad_u = grad_lu[..., :n, :].triu() - mh(l2) @ grad_a2
        grad = cat([_square_factor_grad(grad_l1, grad_u, l1, up), grad_a2], -2)
    else:
        # P^T A = [L U1 | L U2]: U2 = L^{-1} (P^T A)_2 passes its gradient on through L
        grad_u1, grad_u2 = grad_lu[..., :m].triu(), grad_lu[..., m:]
        u1, u2 = up[..., :m], up[..., m:]
        grad_a2 = solve_triangular(mh(low), grad_u2, upper=True, unitriangular=True)
        grad_l = grad_lu[..., :m].tril(-1) - grad_a2 @ mh(u2)
        grad = cat([_square_factor_grad(grad_l, grad_u1, low, u1), grad_a2], -1)
    return p @ grad


lu_factor.derivative(_factor_grad)
lu_factor_ex.derivative(lambda grads, a, pivot, check_errors, *, out:
                        _factor_grad(grads, a, pivot, out=out), outputs=(0, 1))  # not info


# --- lu_solve ---------------------------------------------------------------------------------

def _check_solve(lu, pivots, b, left):
    name = "linalg.lu_solve"
    if lu.dtype.kind not in "fcV":
        check_float("torch.linalg.lu_solve", lu)
    if lu.dtype != b.dtype:
        raise RuntimeError(f"{name}: Expected LU and B to have the same dtype, but found LU of "
                           f"type {torch_name(lu)} and B of type {torch_name(b)} instead")
    check_square("torch.linalg.lu_solve", lu)
    if b.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor B must have at least 2 dimensions.")
    if pivots.dtype != np.int32:
        raise RuntimeError(f"{name}: pivots should be a Tensor of scalar type ember.int32")
    if pivots.shape[-1:] != lu.shape[-1:]:
        raise RuntimeError(f"{name}: Number of pivots per batch should be same as the "
                           f"dimension of the matrix")
    if pivots.shape != lu.shape[:-1]:
        raise RuntimeError(f"{name}: Expected LU.shape[:-1] and pivots.shape to be the same, but "
                           f"got pivots with shape {list(pivots.shape)} instead")
    n = lu.shape[-1]
    if (b.shape[-2] if left else b.shape[-1]) != n:
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and "
                           f"{b.shape[-2]}x{b.shape[-1]})")
    if pivots.size and (pivots.min() < 1 or pivots.max() > n):
        edge = "greater or equal to 1" if pivots.min() < 1 else "smaller or equal to LU.size(-2)"
        raise RuntimeError(f"Pivots given to lu_solve must all be {edge}. Did you properly "
                           f"pass the result of lu_factor?")
    check_kernel(lu, "linalg.lu_solve_cpu")     # last: PyTorch checks all of the above first


@op("lu_solve(LU, pivots, B, *, left=True, adjoint=False)", inputs=3, namespace="linalg",
    out=True)
@empty_16bit_in_float32
def lu_solve(xp, lu, pivots, b, left, adjoint):
    """The solution X of AX = B (XA = B when not ``left``; with A^H when ``adjoint``), A
    given by ``lu_factor``'s (LU, pivots)."""
    _check_solve(lu, pivots, b, left)
    batch = np.broadcast_shapes(lu.shape[:-2], b.shape[:-2])
    lu2, b2 = broadcast_batch(xp, lu, b)
    piv = xp.broadcast_to(pivots, batch + pivots.shape[-1:]) - 1
    if left:                    # LAPACK's trans: 0 solves with A, 2 with A^H
        return column_major(xp, lu_solve_all(xp, lu2, piv, b2, trans=2 if adjoint else 0))
    # XA = B <=> A^H X^H = B^H; XA^H = B <=> A X^H = B^H
    bh = xp.conj(b2.swapaxes(-1, -2))
    x = lu_solve_all(xp, lu2, piv, bh, trans=0 if adjoint else 2)
    return xp.conj(column_major(xp, x).swapaxes(-1, -2))


@lu_solve.derivative
def _(grad, lu, pivots, b, left, adjoint, *, out):
    # the gradients of the solve for A (as in linalg.solve), then of A = P L U for LU
    x = out
    grad_b = lu_solve(lu, pivots, grad, left=left, adjoint=not adjoint)
    if left:
        grad_a = -(x @ mh(grad_b)) if adjoint else -(grad_b @ mh(x))
    else:
        grad_a = -(mh(grad_b) @ x) if adjoint else -(mh(x) @ grad_b)
    p, low, up = _unpack(lu, pivots)
    pt_grad = p.mT @ grad_a
    grad_lu = (pt_grad @ mh(up)).tril(-1) + (mh(low) @ pt_grad).triu()
    return grad_lu, None, grad_b


# --- lu_unpack --------------------------------------------------------------------------------

def _check_unpack(lu, pivots, unpack_pivots):
    if lu.ndim < 2:
        raise RuntimeError(f"torch.lu_unpack: Expected tensor with 2 or more dimensions. Got "
                           f"size: {list(lu.shape)} instead")
    if not unpack_pivots:
        return
    if pivots.dtype != np.int32:
        raise RuntimeError("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of "
                           "ember.int32 dtype.\nNote: this function is intended to be used with "
                           "the output produced by torch.linalg.lu_factor")
    m, n = lu.shape[-2:]
    shape = lu.shape[:-2] + (min(m, n),)
    if pivots.shape != shape:       # PyTorch reads out of bounds for these
        raise RuntimeError(f"lu_unpack: Expected LU_pivots of shape {list(shape)} for LU of "
                           f"shape {list(lu.shape)}, but got {list(pivots.shape)}")
    if pivots.size and (pivots.min() < 1 or pivots.max() > m):
        raise RuntimeError("pivots passed to lu_unpack must be between 1 and LU.size(-2) "
                           "inclusive.Did you properly pass the result of lu_factor?")


@op("lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True)", inputs=2,
    method=False, out=True, namedtuple=lu_unpack_result, saves_inputs=False)
def lu_unpack(xp, lu, pivots, unpack_data, unpack_pivots):
    """(P, L, U) of a packed LU factorization (A = P L U); each part is empty when not
    asked for."""
    _check_unpack(lu, pivots, unpack_pivots)
    m, n = lu.shape[-2:]
    k = min(m, n)
    if unpack_data:
        low = xp.tril(lu[..., :, :k], -1)
        diagonal = xp.arange(k)
        low[..., diagonal, diagonal] = 1
        # row-major, whatever LU's layout (tril and triu keep it)
        low, up = xp.ascontiguousarray(low), xp.ascontiguousarray(xp.triu(lu[..., :k, :]))
    else:
        low, up = xp.zeros(0, lu.dtype), xp.zeros(0, lu.dtype)
    if unpack_pivots:
        p = _permutation_array(xp, pivots - 1, m).astype(lu.dtype)
    else:
        p = xp.zeros(0, lu.dtype)
    return p, low, up


@lu_unpack.derivative
def _(grads, lu, pivots, unpack_data, unpack_pivots):
    from ember.ops.join import pad_along
    if not unpack_data:
        return None, None
    m, n = lu.shape[-2], lu.shape[-1]
    k = min(m, n)
    grad_l, grad_u = grads[1].tril(-1), grads[2].triu()
    return pad_along(grad_l, -1, 0, n - k) + pad_along(grad_u, -2, 0, m - k), None


def lu_unpack_public(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    """(P, L, U) of a packed LU factorization (A = P L U); see the ``lu_unpack`` op. As in
    PyTorch, the permutation P needs no gradient."""
    result = lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots, out=out)
    if out is not None:
        return result
    return lu_unpack_result(result[0].detach(), *result[1:])


# --- linalg.lu --------------------------------------------------------------------------------

@op("lu(A, *, pivot=True)", namespace="linalg", out=True, namedtuple=linalg_lu_result,
    saves_inputs=False)
@empty_16bit_in_float32
def linalg_lu(xp, a, pivot):
    """(P, L, U) with A = P L U: ``lu_factor_ex`` then ``lu_unpack``; a singular matrix does
    not raise."""
    if a.ndim < 2:
        raise RuntimeError(f"linalg.lu: Expected tensor with 2 or more dimensions. Got size: "
                           f"{list(a.shape)} instead")
    lu, piv, _ = _factor(xp, a, pivot)
    p, low, up = lu_unpack.forward(xp, lu, piv, True, True)
    return (p if pivot else xp.empty((0,), p.dtype)), low, up    # no P without pivoting


@linalg_lu.derivative
def _(grads, a, pivot, *, out):
    # P is constant; L and U take their gradients back into the packed LU, as lu_unpack's
    p, low, up = out
    if not pivot:       # (an empty input: no P)
        return low.new_zeros(low.shape[:-1] + up.shape[-1:])
    grad_lu, _ = lu_unpack.vjp(grads, a, None, True, True)
    return _unpacked_factor_grad(grad_lu, p, low, up)


def linalg_lu_public(A, *, pivot=True, out=None):
    """(P, L, U) with A = P L U; see the ``linalg.lu`` op. As in PyTorch, the permutation P
    needs no gradient."""
    result = linalg_lu(A, pivot=pivot, out=out)
    if out is not None:
        return result
    return linalg_lu_result(result[0].detach(), *result[1:])


linalg_lu_public.__module__ = "ember.linalg"
linalg_lu_public.__name__ = linalg_lu_public.__qualname__ = "lu"


# --- the deprecated top-level names -----------------------------------------------------------

_LU_DEPRECATED = (
    "torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex and "
    "will be removed in a future PyTorch release.\nLU, pivots = torch.lu(A, compute_pivots)\n"
    "should be replaced with\nLU, pivots = torch.linalg.lu_factor(A, compute_pivots)\nand\n"
    "LU, pivots, info = torch.lu(A, compute_pivots, get_infos=True)\nshould be replaced with\n"
    "LU, pivots, info = torch.linalg.lu_factor_ex(A, compute_pivots)")
# (PyTorch's message lacks the space after "lu_solve")
_LU_SOLVE_DEPRECATED = (
    "torch.lu_solve is deprecated in favor of torch.linalg.lu_solveand will be removed in a "
    "future PyTorch release.\nNote that torch.linalg.lu_solve has its arguments reversed.\n"
    "X = torch.lu_solve(B, LU, pivots)\nshould be replaced with\n"
    "X = torch.linalg.lu_solve(LU, pivots, B)")


def lu_legacy(A, pivot=True, get_infos=False, out=None):
    """(LU, pivots) of ``linalg.lu_factor_ex``, and its info when ``get_infos``
    (deprecated); a singular matrix does not raise."""
    warn_once(_LU_DEPRECATED)         # once per process, as PyTorch (TORCH_WARN_ONCE)
    if out is not None and not get_infos:
        from ember._creation import empty
        out = (*out, empty(0, dtype=D.int32, device=out[0].device))
    lu, pivots, info = lu_factor_ex(A, pivot=pivot, out=out)
    return lu_with_info_result(lu, pivots, info) if get_infos else (lu, pivots)


def lu_solve_legacy(input, LU_data, LU_pivots, *, out=None):
    """The solution X of AX = B (B is ``input``), A given by ``lu_factor``'s (LU, pivots):
    ``linalg.lu_solve`` with its arguments reversed (deprecated)."""
    warn_once(_LU_SOLVE_DEPRECATED)
    return lu_solve(LU_data, LU_pivots, input, out=out)


def _lu_method(self, pivot=True, get_infos=False):
    return tuple(lu_legacy(self, pivot, get_infos))     # a plain tuple, as PyTorch's


for _fn, _name in ((lu_unpack_public, "lu_unpack"), (lu_legacy, "lu"),
                   (lu_solve_legacy, "lu_solve"), (_lu_method, "lu")):
    _fn.__module__, _fn.__name__, _fn.__qualname__ = "ember", _name, _name
_lu_method.__doc__ = lu_legacy.__doc__
Tensor.lu = _lu_method
Tensor.lu_solve = lu_solve_legacy      # the same function, so that autocast wraps both

PUBLIC = {"lu_unpack": lu_unpack_public, "lu": lu_legacy, "lu_solve": lu_solve_legacy}
