"""What the OpInfo entries of linalg_more.py cannot say: linalg.lu's out= and constant P, the
LDL factors checked against A, linalg.diagonal as a view, and the randomized svd_lowrank and
pca_lowrank (their draws are ember's own, so results are compared up to the approximation)."""

import numpy as np
import pytest

import ember
from ember.ops.lu import linalg_lu_public as linalg_lu
from ember.testing import assert_close

F64 = ember.float64


def _low_rank(m, n, rank, dtype=F64, batch=()):
    left = ember.randn(*batch, m, rank, dtype=dtype)
    return left @ ember.randn(*batch, rank, n, dtype=dtype)


# --- linalg.lu --------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 5), (2, 3, 4)])
def test_lu_reconstructs_and_p_needs_no_gradient(shape):
    a = ember.randn(shape, dtype=F64, requires_grad=True)
    p, low, up = linalg_lu(a)
    k = min(shape[-2:])
    assert (low.shape[-1], up.shape[-2]) == (k, k)
    assert_close(p @ low @ up, a)
    assert not p.requires_grad and low.grad_fn.name() == "LinalgLuBackward0"
    assert ember.autograd.gradcheck(lambda x: linalg_lu(x)[1:], (a,))


def test_lu_out_and_named_result():
    a = ember.randn(3, 4)
    outs = tuple(ember.empty(0) for _ in range(3))
    result = ember.linalg.lu(a, out=outs)
    assert all(r is o for r, o in zip(result, outs))
    named = linalg_lu(a)
    assert type(named).__name__ == "linalg_lu" and named._fields == ("P", "L", "U")
    assert_close(outs[0] @ outs[1] @ outs[2], a)


def test_lu_of_a_singular_matrix_does_not_raise():
    p, low, up = linalg_lu(ember.ones(3, 3))
    assert_close(p @ low @ up, ember.ones(3, 3))


# --- ldl_factor, ldl_solve --------------------------------------------------------------------

@pytest.mark.parametrize("dtype,hermitian", [(F64, False), (ember.float32, False),
                                             (ember.complex128, False),
                                             (ember.complex128, True)])
def test_ldl_solve_inverts_the_factored_matrix(dtype, hermitian):
    x = ember.randn(2, 5, 5, dtype=dtype)
    a = x + (x.mH if hermitian else x.mT)
    ld, pivots = ember.linalg.ldl_factor(a, hermitian=hermitian)
    assert pivots.dtype is ember.int32
    assert_close(ld, ld.tril())
    b = ember.randn(3, 1, 5, 2, dtype=dtype)
    x = ember.linalg.ldl_solve(ld, pivots, b, hermitian=hermitian)
    tol = 1e-4 if dtype is ember.float32 else 1e-10
    assert_close(a @ x, b.expand(3, 2, 5, 2), rtol=tol, atol=tol)


def test_ldl_factor_takes_2x2_pivots_as_lapack_does():
    a = ember.tensor([[0., 1, 2], [1, 0, 3], [2, 3, 0]], dtype=F64)
    ld, pivots = ember.linalg.ldl_factor(a)
    assert pivots.tolist() == [-3, -3, 3]       # PyTorch's (sytrf's) pivots for this matrix
    assert_close(ld, ember.tensor([[0., 0, 0], [2, 0, 0], [1.5, 0.5, -3]], dtype=F64))
    eye = ember.eye(3, dtype=F64)
    assert_close(a @ ember.linalg.ldl_solve(ld, pivots, eye), eye)


def test_ldl_factor_reads_the_lower_triangle_only():
    a = ember.tensor([[4., 1], [1, 3]], dtype=F64)
    assert_close(ember.linalg.ldl_factor(a + ember.tensor([[0., 99], [0, 0]], dtype=F64)).LD,
                 ember.linalg.ldl_factor(a).LD)


def test_ldl_factor_ex_reports_a_singular_d_in_info():
    ld, pivots, info = ember.linalg.ldl_factor_ex(ember.zeros(2, 3, 3))
    assert info.tolist() == [1, 1] and info.dtype is ember.int32
    with pytest.raises(RuntimeError, match=r"ldl_factor: \(Batch element 0\).*D\[0,0\] is zero"):
        ember.linalg.ldl_factor(ember.zeros(2, 3, 3))


def test_ldl_has_no_derivative_as_in_pytorch():
    a = ember.eye(3, dtype=F64, requires_grad=True)
    ld, pivots = ember.linalg.ldl_factor(a)
    with pytest.raises(RuntimeError, match="derivative for aten::linalg_ldl_factor_ex is not "
                       "implemented"):
        ld.sum().backward()
    b = ember.ones(3, 1, dtype=F64, requires_grad=True)
    with pytest.raises(RuntimeError, match="derivative for aten::linalg_ldl_solve is not "
                       "implemented"):
        ember.linalg.ldl_solve(ld.detach(), pivots, b).sum().backward()


# --- linalg.diagonal --------------------------------------------------------------------------

def test_linalg_diagonal_is_a_view_with_keyword_only_options():
    a = ember.zeros(2, 3, 3)
    d = ember.linalg.diagonal(a)
    d.fill_(1)
    assert_close(a, ember.eye(3).expand(2, 3, 3))
    assert ember.linalg.diagonal(a, offset=1, dim1=0, dim2=2).shape == (3, 2)
    with pytest.raises(TypeError):
        ember.linalg.diagonal(a, 1)


# --- svd_lowrank, pca_lowrank -----------------------------------------------------------------

# (shape, q) -> shapes of (U, S, V), as PyTorch 2.13 gives them
@pytest.mark.parametrize("shape,q,want", [
    ((5, 7), 6, ((5, 5), (5,), (7, 5))), ((5, 7), 3, ((5, 3), (3,), (7, 3))),
    ((5, 7), 9, ((5, 5), (5,), (7, 5))), ((7, 5), 6, ((7, 5), (5,), (5, 5))),
    ((2, 5, 4), 2, ((2, 5, 2), (2, 2), (2, 4, 2))), ((0, 4), 2, ((0, 0), (0,), (4, 0)))])
def test_svd_lowrank_shapes(shape, q, want):
    u, s, v = ember.svd_lowrank(ember.randn(shape), q=q)
    assert (tuple(u.shape), tuple(s.shape), tuple(v.shape)) == want


@pytest.mark.parametrize("dtype", [F64, ember.float32, ember.complex128])
@pytest.mark.parametrize("shape", [(8, 12), (12, 8), (2, 10, 9)])
def test_svd_lowrank_recovers_a_low_rank_matrix(shape, dtype):
    ember.manual_seed(0)
    a = _low_rank(*shape[-2:], 3, dtype, shape[:-2])
    u, s, v = ember.svd_lowrank(a, q=5)
    tol = 1e-3 if dtype is ember.float32 else 1e-8
    assert_close(u @ ember.diag_embed(s).to(dtype) @ v.mH, a, rtol=tol, atol=tol)
    want = np.linalg.svd(np.asarray(a), compute_uv=False)[..., :5]
    assert_close(s, ember.tensor(want).to(s.dtype), rtol=tol, atol=tol)
    assert_close(u.mH @ u, ember.eye(u.shape[-1], dtype=dtype).expand_as(u.mH @ u),
                 rtol=tol, atol=tol)


def test_svd_lowrank_subtracts_m_and_is_reproducible():
    ember.manual_seed(1)
    a = _low_rank(9, 6, 2)
    mean = ember.randn(1, 6, dtype=F64)
    u, s, v = ember.svd_lowrank(a + mean, q=4, M=mean)
    assert_close(u @ ember.diag(s) @ v.mT, a)
    ember.manual_seed(3)
    first = ember.svd_lowrank(ember.randn(6, 6, dtype=F64), q=2, niter=0)
    ember.manual_seed(3)
    assert_close(ember.svd_lowrank(ember.randn(6, 6, dtype=F64), q=2, niter=0)[0], first[0])


def test_svd_lowrank_gradient_of_exact_singular_values():
    ember.manual_seed(0)
    a = _low_rank(6, 5, 2).requires_grad_()

    def singular_values(x):
        ember.manual_seed(0)            # the same sketch for every evaluation
        return ember.svd_lowrank(x, q=3)[1][:2]
    assert ember.autograd.gradcheck(singular_values, (a,))


def test_pca_lowrank_matches_the_svd_of_the_centred_matrix():
    ember.manual_seed(0)
    a = _low_rank(20, 6, 3) + ember.randn(1, 6, dtype=F64) * 5
    u, s, v = ember.pca_lowrank(a, q=3)
    centred = np.asarray(a) - np.asarray(a).mean(0)
    _, want, vh = np.linalg.svd(centred)
    assert_close(s, ember.tensor(want[:3]))
    assert_close(abs(v.mT @ ember.tensor(vh[:3].T)), ember.eye(3, dtype=F64), atol=1e-8,
                 rtol=0)                # the same principal directions, up to sign
    assert [tuple(x.shape) for x in ember.pca_lowrank(a)] == [(20, 6), (6,), (6, 6)]
    b = _low_rank(20, 6, 3)
    u, s, v = ember.pca_lowrank(b, q=3, center=False)
    assert_close(u @ ember.diag(s) @ v.mT, b)


def test_pca_lowrank_errors():
    a = ember.randn(5, 4)
    with pytest.raises(ValueError, match=r"q\(=5\) must be non-negative integer and not "
                       r"greater than min\(m, n\)=4"):
        ember.pca_lowrank(a, q=5)
    with pytest.raises(ValueError, match=r"q\(=-1\)"):
        ember.pca_lowrank(a, q=-1)
    with pytest.raises(ValueError, match=r"niter\(=-1\) must be non-negative integer"):
        ember.pca_lowrank(a, niter=-1)
    with pytest.raises(RuntimeError, match="mean\\(\\): could not infer output dtype"):
        ember.pca_lowrank(a.long())
    with pytest.raises(ValueError, match="not enough values to unpack"):
        ember.svd_lowrank(ember.randn(5))


@pytest.mark.parametrize("pivots", [[1, -1], [-1, 1], [2, -1], [1, 2, -3], [-1, -1, -1]])
def test_ldl_solve_refuses_pivots_lapack_would_read_past_the_matrix_with(pivots):
    # an unpaired negative pivot makes LAPACK's sytrs solve a 2x2 block beyond the last row
    # (it corrupted memory); PyTorch reads garbage there
    n = len(pivots)
    with pytest.raises(RuntimeError, match="negative pivots in pairs"):
        ember.linalg.ldl_solve(ember.eye(n) * 2, ember.tensor(pivots, dtype=ember.int32),
                               ember.ones(n, 1))
    ld, piv = ember.linalg.ldl_factor(ember.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0],
                                                    [0.0, 0.0, 2.0]]))
    assert (piv < 0).sum().item() == 2     # one 2x2 block: accepted
    x = ember.linalg.ldl_solve(ld, piv, ember.tensor([[1.0], [2.0], [4.0]]))
    assert x.flatten().tolist() == [2.0, 1.0, 2.0]
