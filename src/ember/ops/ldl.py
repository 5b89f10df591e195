"""The LDL factorization of symmetric (or Hermitian) indefinite matrices: linalg.ldl_factor,
ldl_factor_ex, ldl_solve; and linalg.diagonal, which reads the diagonals of such batches.

As in PyTorch, the factorization is LAPACK's sytrf (hetrf for Hermitian complex input) on the
lower triangle, with Bunch-Kaufman pivoting: LD holds L (unit lower triangular, diagonal not
stored) and the 1x1 and 2x2 blocks of D, and the int32 pivots are LAPACK's: 1-based, a
negative pair marking a 2x2 block. PyTorch implements no derivative for these.
"""

import math

import numpy as np

from ember.backend import host_array
from ember.ops._linalg_utils import (batch_prefix, check_float, check_kernel, check_rhs_dtype,
                                     check_solve_rows, check_square, column_major,
                                     empty_16bit_in_float32, lapack, named_result, on_host,
                                     torch_name)
from ember.ops._registry import REGISTRY, op

__all__ = ["ldl_factor", "ldl_factor_ex", "ldl_solve", "linalg_diagonal"]

ldl_factor_result = named_result("linalg_ldl_factor", ("LD", "pivots"))
ldl_factor_ex_result = named_result("linalg_ldl_factor_ex", ("LD", "pivots", "info"))


def _routine(dtype, hermitian):
    """sytrf / sytrs, or hetrf / hetrs for Hermitian complex matrices ("trf" or "trs")."""
    kind = "he" if hermitian and dtype.kind == "c" else "sy"
    return lambda suffix: lapack(kind + suffix, dtype)


def _factor_all(xp, a, hermitian):
    """(LD, pivots, info) of every matrix of a batch, on the host."""
    n = a.shape[-1]
    flat = a.reshape((math.prod(a.shape[:-2]), n, n))
    ld = xp.zeros_like(flat)
    piv = xp.zeros((flat.shape[0], n), np.int32)
    info = xp.zeros(flat.shape[0], np.int32)
    if a.size:
        trf = _routine(a.dtype, hermitian)("trf")
        for i, matrix in enumerate(flat):
            packed, piv[i], code = trf(matrix, lower=1)
            ld[i] = xp.tril(packed)
            info[i] = max(code, 0)
    batch = a.shape[:-2]
    return ld.reshape(a.shape), piv.reshape(batch + (n,)), info.reshape(batch)


def _factor(xp, a, hermitian):
    name = "torch.linalg.ldl_factor_ex"
    check_square(name, a)
    check_float(name, a, "ldl_factor_kernel_cpu")
    ld, piv, info = on_host(xp, _factor_all, a, hermitian=hermitian)
    return column_major(xp, ld), piv, info


def _raise_singular(name, info, shape):
    # PyTorch fails an internal assert here ("Unknown error code"); this says what happened
    flat = host_array(info).reshape(-1)
    bad = np.flatnonzero(flat)
    if bad.size:
        k = int(flat[bad[0]]) - 1
        raise RuntimeError(f"{name}: {batch_prefix(shape, int(bad[0]))}The factorization could "
                           f"not be completed because the block diagonal matrix D is singular: "
                           f"D[{k},{k}] is zero (LAPACK error code {k + 1}).")


@op("ldl_factor(input, *, hermitian=False)", namespace="linalg", out=True,
    namedtuple=ldl_factor_result, grad_fn_name="LinalgLdlFactorExBackward0")
@empty_16bit_in_float32
def ldl_factor(xp, a, hermitian):
    """(LD, pivots): the compact LDL^T (LDL^H when ``hermitian``) factorization of symmetric
    indefinite matrices; raises when D is singular."""
    ld, piv, info = _factor(xp, a, hermitian)
    _raise_singular("torch.linalg.ldl_factor", info, a.shape)
    return ld, piv


@op("ldl_factor_ex(input, *, hermitian=False, check_errors=False)", namespace="linalg",
    out=True, namedtuple=ldl_factor_ex_result)
@empty_16bit_in_float32
def ldl_factor_ex(xp, a, hermitian, check_errors):
    """(LD, pivots, info): ``ldl_factor`` with LAPACK's info (the 1-based position of a zero
    of D, else 0) instead of an error, unless ``check_errors``."""
    ld, piv, info = _factor(xp, a, hermitian)
    if check_errors:
        _raise_singular("torch.linalg.ldl_factor_ex", info, a.shape)
    return ld, piv, info


ldl_factor.not_implemented("linalg_ldl_factor_ex")
ldl_factor_ex.not_implemented("linalg_ldl_factor_ex")


# --- ldl_solve --------------------------------------------------------------------------------

def _check_solve(ld, pivots, b):
    name = "torch.linalg.ldl_solve"
    check_square(name, ld)
    if ld.dtype.kind not in "fcV":
        check_float(name, ld)
    check_rhs_dtype(ld, b)
    if b.ndim < 2:
        dims = max(b.ndim, 1)
        raise IndexError(f"Dimension out of range (expected to be in range of [{-dims}, "
                         f"{dims - 1}], but got -2)")
    check_solve_rows(name, ld, b)
    n = ld.shape[-1]
    if pivots.shape != ld.shape[:-1]:
        raise RuntimeError(f"{name}: Expected LD.shape[:-1] and pivots.shape to be the same, but "
                           f"got pivots with shape {list(pivots.shape)} instead")
    if pivots.dtype.kind not in "iu":
        raise RuntimeError(f"{name}: Expected pivots to be integers. Got {torch_name(pivots)}")
    if pivots.size:
        size = abs(pivots.astype(np.int64))
        for bad, edge in ((size.min() < 1, ">= 1"), (size.max() > n, "<= LD.size(-2)")):
            if bad:
                raise RuntimeError(f"Pivots given to ldl_solve must all satisfy |pivot| {edge}. "
                                   f"Did you properly pass the result of ldl_factor?")
        _check_blocks(host_array(pivots).reshape(-1, n))
    check_kernel(ld, "ldl_solve_kernel_cpu")


def _check_blocks(rows):
    """Refuse pivots whose 2x2 blocks LAPACK's solver would read past the matrix (it writes
    out of bounds, corrupting memory, where PyTorch's reads garbage): negative pivots come in
    pairs, each a 2x2 block (LAPACK's pair holds one value twice), so every run of them has
    an even length."""
    negative = rows < 0
    if not negative.any():
        return
    position = np.arange(rows.shape[-1])
    run_start = np.maximum.accumulate(np.where(negative, -1, position), axis=-1) + 1
    run_end = negative & ~np.concatenate([negative[:, 1:], np.zeros_like(negative[:, :1])],
                                         axis=1)
    if (run_end & ((position - run_start) % 2 == 0)).any():     # a run of odd length
        raise RuntimeError("Pivots given to ldl_solve must describe 1x1 and 2x2 blocks "
                           "(negative pivots in pairs). Did you properly pass the result of "
                           "ldl_factor?")


def _solve_all(xp, ld, piv, b, hermitian):
    if b.size == 0:
        return xp.zeros(b.shape, ld.dtype)
    trs = _routine(ld.dtype, hermitian)("trs")
    n, k = b.shape[-2:]
    count = math.prod(b.shape[:-2])
    flat_b = b.reshape((count, n, k))
    flat_ld, flat_piv = ld.reshape((count, n, n)), piv.reshape((count, n))
    x = xp.empty(flat_b.shape, ld.dtype)
    for i in range(count):
        x[i], code = trs(flat_ld[i], flat_piv[i], flat_b[i], lower=1)
    return x.reshape(b.shape)


@op("ldl_solve(LD, pivots, B, *, hermitian=False)", inputs=3, namespace="linalg", out=True)
def ldl_solve(xp, ld, pivots, b, hermitian):
    """The solution X of AX = B, A given by ``ldl_factor``'s (LD, pivots)."""
    _check_solve(ld, pivots, b)
    batch = np.broadcast_shapes(ld.shape[:-2], b.shape[:-2])
    n = ld.shape[-1]
    ld2 = xp.broadcast_to(ld, batch + (n, n))
    piv = xp.broadcast_to(pivots.astype(np.int32, copy=False), batch + (n,))
    b2 = xp.broadcast_to(b, batch + b.shape[-2:])
    return column_major(xp, on_host(xp, _solve_all, ld2, piv, b2, hermitian=hermitian))


ldl_solve.not_implemented("linalg_ldl_solve")


# --- linalg.diagonal --------------------------------------------------------------------------

@op("diagonal(A, *, offset=0, dim1=-2, dim2=-1)", namespace="linalg", view=True,
    saves_inputs=False, grad_fn_name="DiagonalBackward0")
def linalg_diagonal(xp, a, offset, dim1, dim2):
    """A view of the diagonals of the matrices of a batch: ``diagonal`` with other defaults."""
    return REGISTRY["diagonal"].forward(xp, a, offset, dim1, dim2)


@linalg_diagonal.derivative
def _(grad, a, offset, dim1, dim2):
    return REGISTRY["diagonal"].vjp(grad, a, offset, dim1, dim2)
