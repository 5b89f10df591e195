"""The memory layout of linalg results against PyTorch: LAPACK-backed results come back with
each matrix column-major (``linalg.inv(A).stride()`` is (9, 1, 3) for 2 x 3 x 3 A), some
row-major, a few as views; ember must give the same strides (so ``is_contiguous`` and
``view`` behave alike) for contiguous, transposed and empty inputs."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

SHAPES = [(3, 3), (2, 3, 3), (4, 2), (2, 4, 2), (2, 4), (0, 3, 3), (3, 0, 0), (1, 3, 3)]


def _matrix(shape, dtype, kind):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape)
    if dtype.startswith("complex"):
        a = a + 1j * rng.standard_normal(shape)
    n = shape[-1]
    if shape[-1] == shape[-2]:
        if kind == "spd":
            a = a @ np.conj(np.swapaxes(a, -1, -2))
        elif kind == "tri":
            a = np.triu(a)
        a = a + n * np.eye(n)
    return a.astype(dtype)


def _tensor(lib, a, transposed):
    """``a`` as a row-major tensor, or as the transposed view of a row-major tensor."""
    if transposed:
        a = np.ascontiguousarray(np.swapaxes(a, -1, -2))
    t = lib.empty(a.shape, dtype=getattr(lib, str(a.dtype))).copy_(lib.from_numpy(a))
    return t.mT if transposed else t


def _rhs(lib, a, k=2):
    return lib.ones(a.shape[:-1] + (k,), dtype=a.dtype)


def _geqrf(lib, a):
    return lib.geqrf(a)


CASES = {
    "linalg.inv": ("gen", lambda lib, a: lib.linalg.inv(a)),
    "linalg.inv_ex": ("gen", lambda lib, a: lib.linalg.inv_ex(a)),
    "inverse": ("gen", lambda lib, a: lib.inverse(a)),
    "linalg.cholesky": ("spd", lambda lib, a: lib.linalg.cholesky(a)),
    "linalg.cholesky_upper": ("spd", lambda lib, a: lib.linalg.cholesky(a, upper=True)),
    "linalg.cholesky_ex": ("spd", lambda lib, a: lib.linalg.cholesky_ex(a)),
    "cholesky": ("spd", lambda lib, a: lib.cholesky(a)),
    "cholesky_inverse": ("tri", lambda lib, a: lib.cholesky_inverse(a, upper=True)),
    "cholesky_solve": ("tri", lambda lib, a: lib.cholesky_solve(_rhs(lib, a), a)),
    "linalg.qr": ("gen", lambda lib, a: lib.linalg.qr(a)),
    "linalg.qr_complete": ("gen", lambda lib, a: lib.linalg.qr(a, mode="complete")),
    "linalg.qr_r": ("gen", lambda lib, a: lib.linalg.qr(a, mode="r")),
    "qr": ("gen", lambda lib, a: lib.qr(a)),
    "linalg.svd": ("gen", lambda lib, a: lib.linalg.svd(a)),
    "linalg.svd_reduced": ("gen", lambda lib, a: lib.linalg.svd(a, full_matrices=False)),
    "svd": ("gen", lambda lib, a: lib.svd(a)),
    "svd_full": ("gen", lambda lib, a: lib.svd(a, some=False)),
    "svd_no_uv": ("gen", lambda lib, a: lib.svd(a, compute_uv=False)),
    "linalg.eig": ("gen", lambda lib, a: lib.linalg.eig(a)),
    "linalg.eigh": ("spd", lambda lib, a: lib.linalg.eigh(a)),
    "linalg.lu_factor": ("gen", lambda lib, a: lib.linalg.lu_factor(a)),
    "linalg.lu_factor_ex": ("gen", lambda lib, a: lib.linalg.lu_factor_ex(a)),
    "linalg.lu": ("gen", lambda lib, a: lib.linalg.lu(a)),
    "lu": ("gen", lambda lib, a: lib.lu(a)),
    "lu_unpack": ("gen", lambda lib, a: lib.lu_unpack(*lib.linalg.lu_factor(a))),
    "linalg.lu_solve": ("gen", lambda lib, a: lib.linalg.lu_solve(*lib.linalg.lu_factor(a),
                                                                   _rhs(lib, a))),
    "linalg.lu_solve_right": ("gen", lambda lib, a: lib.linalg.lu_solve(
        *lib.linalg.lu_factor(a), _rhs(lib, a).mT, left=False)),
    "lu_solve": ("gen", lambda lib, a: lib.lu_solve(_rhs(lib, a), *lib.linalg.lu_factor(a))),
    "linalg.ldl_factor": ("spd", lambda lib, a: lib.linalg.ldl_factor(a)),
    "linalg.ldl_factor_ex": ("spd", lambda lib, a: lib.linalg.ldl_factor_ex(a)),
    "linalg.ldl_solve": ("spd", lambda lib, a: lib.linalg.ldl_solve(*lib.linalg.ldl_factor(a),
                                                                     _rhs(lib, a))),
    "linalg.lstsq": ("gen", lambda lib, a: lib.linalg.lstsq(a, _rhs(lib, a))),
    "linalg.lstsq_gelsd": ("gen", lambda lib, a: lib.linalg.lstsq(a, _rhs(lib, a),
                                                                  driver="gelsd")),
    "linalg.solve": ("gen", lambda lib, a: lib.linalg.solve(a, _rhs(lib, a))),
    "linalg.solve_vector": ("gen", lambda lib, a: lib.linalg.solve(
        a, lib.ones(a.shape[:-1], dtype=a.dtype))),
    "linalg.solve_right": ("gen", lambda lib, a: lib.linalg.solve(a, _rhs(lib, a).mT,
                                                                  left=False)),
    "linalg.solve_ex": ("gen", lambda lib, a: lib.linalg.solve_ex(a, _rhs(lib, a))),
    "linalg.solve_triangular": ("tri", lambda lib, a: lib.linalg.solve_triangular(
        a, _rhs(lib, a), upper=True)),
    "linalg.solve_triangular_right": ("tri", lambda lib, a: lib.linalg.solve_triangular(
        a, _rhs(lib, a).mT, upper=True, left=False)),
    "linalg.solve_triangular_lower": ("tri", lambda lib, a: lib.linalg.solve_triangular(
        a.mT, _rhs(lib, a), upper=False, unitriangular=True)),
    "triangular_solve": ("tri", lambda lib, a: lib.triangular_solve(_rhs(lib, a), a)),
    "triangular_solve_transpose": ("tri", lambda lib, a: lib.triangular_solve(
        _rhs(lib, a), a, transpose=True)),
    "linalg.matrix_exp": ("gen", lambda lib, a: lib.linalg.matrix_exp(a)),
    "linalg.pinv": ("gen", lambda lib, a: lib.linalg.pinv(a)),
    "linalg.pinv_hermitian": ("spd", lambda lib, a: lib.linalg.pinv(a, hermitian=True)),
    "geqrf": ("gen", _geqrf),
    "linalg.householder_product": ("gen", lambda lib, a: lib.linalg.householder_product(
        *_geqrf(lib, a))),
    "orgqr": ("gen", lambda lib, a: lib.orgqr(*_geqrf(lib, a))),
    "ormqr": ("gen", lambda lib, a: lib.ormqr(*_geqrf(lib, a), _rhs(lib, a))),
    "ormqr_right": ("gen", lambda lib, a: lib.ormqr(
        *_geqrf(lib, a), _rhs(lib, a).mT, left=False, transpose=True)),
    "linalg.matrix_power_inverse": ("gen", lambda lib, a: lib.linalg.matrix_power(a, -1)),
    "linalg.matrix_power": ("gen", lambda lib, a: lib.linalg.matrix_power(a, -3)),
    "linalg.tensorinv": ("gen", lambda lib, a: lib.linalg.tensorinv(a, ind=a.ndim - 1)),
    "linalg.slogdet": ("gen", lambda lib, a: lib.linalg.slogdet(a)),
}


def _strides(lib, fn, a):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = fn(lib, a)
    except RuntimeError:
        return "error"
    results = result if isinstance(result, tuple) else (result,)
    return [r.stride() for r in results]


@pytest.mark.parametrize("name", sorted(CASES))
def test_linalg_results_have_pytorch_strides(name):
    kind, fn = CASES[name]
    for dtype in ("float64", "complex64"):
        for shape in SHAPES:
            for transposed in (False, True):
                a = _matrix(shape, dtype, kind)
                expected = _strides(torch, fn, _tensor(torch, a, transposed))
                got = _strides(ember, fn, _tensor(ember, a, transposed))
                assert got == expected, (shape, dtype, transposed)


def test_results_still_hold_the_same_values():
    tall = _matrix((2, 4, 3), "float64", "gen")
    square = _matrix((2, 3, 3), "float64", "gen")
    for name, a in (("linalg.qr", tall), ("linalg.lu_factor", tall), ("linalg.lstsq", tall),
                    ("linalg.solve_right", square), ("linalg.inv", square)):
        fn = CASES[name][1]
        expected = fn(torch, _tensor(torch, a, True))
        got = fn(ember, _tensor(ember, a, True))
        pairs = zip(expected, got) if isinstance(got, tuple) else [(expected, got)]
        for e, g in pairs:
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-10, atol=1e-12)
