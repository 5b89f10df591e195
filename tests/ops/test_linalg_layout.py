"""The memory layout of linalg results, as PyTorch lays them out (tests/parity/
test_linalg_strides.py compares with PyTorch itself): LAPACK-backed results have each matrix
column-major, so ``view`` on them raises and ``.mT`` of them is contiguous."""

import warnings

import numpy as np
import pytest

import ember
from ember.ops._linalg_utils import column_major

LA = ember.linalg


def _square(*batch, n=3):
    a = ember.arange(float(np.prod(batch, dtype=int) * n * n)).reshape(*batch, n, n).sin()
    return a + n * ember.eye(n)


def _spd(*batch, n=3):
    a = _square(*batch, n=n)
    return a @ a.mT


def test_column_major_keeps_values_and_lays_each_matrix_out_by_columns():
    a = np.arange(24.0).reshape(2, 4, 3)
    c = column_major(np, a)
    assert (c == a).all()
    assert c.strides == (96, 8, 32)
    assert column_major(np, c) is c
    empty = column_major(np, np.zeros((3, 0, 2)))
    assert empty.strides == (16, 8, 8)        # PyTorch counts a size 0 as 1


@pytest.mark.parametrize("fn", [LA.inv, ember.inverse, lambda a: LA.inv_ex(a)[0],
                                lambda a: LA.matrix_power(a, -1),
                                lambda a: LA.cholesky(_spd(2)), lambda a: LA.eigh(_spd(2))[1],
                                lambda a: LA.eig(a)[1], lambda a: LA.lu_factor(a)[0],
                                lambda a: LA.qr(a)[0], lambda a: LA.svd(a)[0],
                                lambda a: ember.geqrf(a)[0],
                                lambda a: LA.householder_product(*ember.geqrf(a)),
                                lambda a: LA.ldl_factor(_spd(2))[0],
                                lambda a: ember.cholesky_inverse(LA.cholesky(_spd(2)))])
def test_factorizations_and_inverses_are_column_major(fn):
    out = fn(_square(2))
    assert out.stride() == (9, 1, 3)
    assert not out.is_contiguous() and out.mT.is_contiguous()
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        out.view(-1)


def test_inverse_values_are_unchanged():
    a = _square(2)
    np.testing.assert_allclose((a @ LA.inv(a)).numpy(), np.broadcast_to(np.eye(3), (2, 3, 3)),
                               atol=1e-5)
    np.testing.assert_allclose(LA.inv(a).contiguous().numpy(),
                               np.linalg.inv(a.numpy()), rtol=1e-6)


def test_solves_are_column_major_and_solving_from_the_right_row_major():
    a, b = _square(2), ember.ones(2, 3, 2)
    assert LA.solve(a, b).stride() == (6, 1, 3)
    assert LA.solve_ex(a, b)[0].stride() == (6, 1, 3)
    assert LA.lu_solve(*LA.lu_factor(a), b).stride() == (6, 1, 3)
    assert LA.solve(a, b.mT, left=False).stride() == (6, 3, 1)
    assert LA.lu_solve(*LA.lu_factor(a), b.mT, left=False).stride() == (6, 3, 1)
    assert ember.cholesky_solve(b, LA.cholesky(_spd(2))).stride() == (6, 1, 3)
    assert LA.ldl_solve(*LA.ldl_factor(_spd(2)), b).stride() == (6, 1, 3)
    # a batch of vectors: the 2 x 3 result is itself column-major
    assert LA.solve(a, ember.ones(2, 3)).stride() == (1, 2)
    x = LA.solve(a, b)
    np.testing.assert_allclose((a @ x).numpy(), b.numpy(), atol=1e-5)


def test_triangular_solves_have_no_negative_strides():
    a, b = _square(2).triu(), ember.ones(2, 2, 3)
    x = LA.solve_triangular(a, b, upper=True, left=False)
    assert x.stride() == (6, 1, 2)
    np.testing.assert_allclose((x @ a).numpy(), b.numpy(), atol=1e-5)
    assert LA.solve_triangular(a.mT, b.mT, upper=False).stride() == (6, 1, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        solution, coefficient = ember.triangular_solve(b.mT, a)
    assert solution.stride() == (6, 1, 3) and coefficient.stride() == (9, 1, 3)
    assert ember.equal(coefficient, a)


def test_empty_results_take_pytorch_strides():
    assert LA.inv(ember.zeros(0, 3, 3)).stride() == (9, 1, 3)
    assert LA.solve(ember.zeros(3, 0, 0), ember.zeros(3, 0, 2)).stride() == (2, 1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert ember.cholesky(ember.zeros(0, 3, 3)).stride() == (9, 3, 1)
        assert ember.cholesky(ember.zeros(2, 0)).shape == (2, 0)   # unchecked, as in PyTorch


def test_wide_and_tall_factorizations():
    q, r = LA.qr(ember.ones(2, 4))
    assert q.stride() == (1, 2) and r.stride() == (1, 2)
    u, s, vh = LA.svd(_square(2)[..., :2])           # 2 x 3 x 2
    assert u.stride() == (9, 1, 3) and vh.stride() == (4, 1, 2)
    u, s, v = ember.svd(_square(2))
    assert u.stride() == (9, 1, 3) and v.stride() == (9, 3, 1)
    p, low, up = LA.lu(_square(2))
    assert p.stride() == low.stride() == up.stride() == (9, 3, 1)


def test_lstsq_solution_is_a_view_of_the_column_major_right_side():
    a = _square(2, n=4)[..., :2]                     # 2 x 4 x 2
    b = ember.ones(2, 4, 3)
    x = LA.lstsq(a, b).solution
    assert x.shape == (2, 2, 3) and x.stride() == (12, 1, 4)
    np.testing.assert_allclose(x.contiguous().numpy(),
                               np.linalg.pinv(a.numpy()) @ b.numpy(), rtol=1e-4, atol=1e-5)
