"""ember.lobpcg: eigenpairs against SciPy's dense solvers, the tracker, argument errors (as
PyTorch words them) and gradients (against eigh's, and finite differences in float64)."""

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse.linalg

import ember


def _spd(m, seed=0, spectrum=None, batch=()):
    """Symmetric positive definite matrices with a well-separated spectrum (1..m)**1.5."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal(batch + (m, m)))
    spectrum = np.arange(1., m + 1) ** 1.5 if spectrum is None else spectrum
    return (q * spectrum) @ np.swapaxes(q, -1, -2)


def _expected(A, k, largest=True, B=None):
    values, vectors = scipy.linalg.eigh(A, B)
    if largest:
        values, vectors = values[::-1], vectors[:, ::-1]
    return values[:k], vectors[:, :k]


def _assert_eigenvectors(got, want, atol):
    """Columns equal up to sign."""
    got = np.asarray(got, dtype=np.float64)
    signs = np.sign((got * want).sum(0))
    np.testing.assert_allclose(got * signs, want, atol=atol)


@pytest.mark.parametrize("method", [None, "ortho", "basic"])
@pytest.mark.parametrize("largest", [None, True, False])
def test_eigenpairs_match_scipy(method, largest):
    A = _spd(40)
    ember.manual_seed(0)
    E, X = ember.lobpcg(ember.tensor(A), k=3, method=method, largest=largest)
    values, vectors = _expected(A, 3, largest is not False)
    assert E.shape == (3,) and X.shape == (40, 3) and E.dtype is X.dtype is ember.float64
    np.testing.assert_allclose(np.asarray(E), values, rtol=1e-10)
    _assert_eigenvectors(X, vectors, 1e-6)


def test_float32_meets_its_default_tolerance():
    A = _spd(60, seed=1)
    ember.manual_seed(0)
    E, X = ember.lobpcg(ember.tensor(A, dtype=ember.float32), k=4)
    values, vectors = _expected(A, 4)
    assert E.dtype is X.dtype is ember.float32
    np.testing.assert_allclose(np.asarray(E), values, rtol=1e-5)
    # the tolerance bounds residuals, about 1e-4 of A's norm: vectors err by residual / gap
    _assert_eigenvectors(X, vectors, 2e-2)


@pytest.mark.parametrize("method", ["ortho", "basic"])
def test_generalized_problem_gives_b_orthonormal_vectors(method):
    A, B = _spd(30, seed=2), _spd(30, seed=3, spectrum=np.linspace(1., 3., 30))
    ember.manual_seed(0)
    E, X = ember.lobpcg(ember.tensor(A), k=2, B=ember.tensor(B), method=method, largest=False)
    values, vectors = _expected(A, 2, False, B)
    np.testing.assert_allclose(np.asarray(E), values, rtol=1e-10)
    _assert_eigenvectors(X, vectors, 1e-6)
    x = np.asarray(X)
    np.testing.assert_allclose(x.T @ B @ x, np.eye(2), atol=1e-10)


def test_agrees_with_scipy_lobpcg():
    A = _spd(50, seed=4)
    x0 = np.random.default_rng(5).standard_normal((50, 3))
    want, _ = scipy.sparse.linalg.lobpcg(A, x0, largest=True, tol=1e-10, maxiter=500)
    E, _ = ember.lobpcg(ember.tensor(A), X=ember.tensor(x0), tol=1e-10)
    np.testing.assert_allclose(np.asarray(E), np.sort(want)[::-1], rtol=1e-8)


def test_batches_and_given_initial_vectors():
    A = _spd(24, seed=6, batch=(2, 3))
    X0 = np.random.default_rng(7).standard_normal((2, 3, 24, 3))
    E, X = ember.lobpcg(ember.tensor(A), k=2, X=ember.tensor(X0))
    assert E.shape == (2, 3, 2) and X.shape == (2, 3, 24, 2)
    np.testing.assert_allclose(np.asarray(E), np.linalg.eigvalsh(A)[..., ::-1][..., :2],
                               rtol=1e-10)


def test_sizes_k_and_n():
    A = ember.tensor(_spd(30))
    X0 = ember.randn(30, 4, dtype=ember.float64)
    assert ember.lobpcg(A)[1].shape == (30, 1)                  # k defaults to 1
    assert ember.lobpcg(A, X=X0)[1].shape == (30, 4)            # or X's columns
    assert ember.lobpcg(A, k=2, X=X0)[1].shape == (30, 2)
    assert ember.lobpcg(A, k=6, X=X0, niter=20)[0].shape == (4,)    # at most n pairs
    E, _ = ember.lobpcg(A, k=2, n=5, largest=False)             # a wider block
    np.testing.assert_allclose(np.asarray(E), np.arange(1., 3.) ** 1.5, rtol=1e-10)


def test_preconditioner():
    A = _spd(60, seed=8)
    iK = ember.tensor(np.linalg.inv(A + 0.5 * np.eye(60)))
    for method in ("ortho", "basic"):
        steps = []
        E, _ = ember.lobpcg(ember.tensor(A), k=2, iK=iK, largest=False, method=method,
                            tracker=lambda w: steps.append(1))
        np.testing.assert_allclose(np.asarray(E), np.arange(1., 3.) ** 1.5, rtol=1e-10)
        assert len(steps) < 20          # exact inverse-like preconditioning converges fast


def test_tracker_sees_each_iteration_and_can_stop_it():
    A = ember.tensor(_spd(30))
    seen = []

    def tracker(worker):
        seen.append((worker.ivars["istep"], worker.ivars["converged_count"],
                     tuple(worker.tvars["rerr"].shape), tuple(worker.X.shape)))
        assert set(worker.iparams) >= {"m", "n", "k", "niter"}
        assert worker.A is A and worker.B is None and worker.E.shape == (2,)
    ember.lobpcg(A, k=2, tracker=tracker)
    assert [s[0] for s in seen] == list(range(1, len(seen) + 1))
    assert seen[-1][1] >= 2 and seen[-1][2:] == ((2,), (30, 2))

    def stop(worker):
        worker.bvars["force_stop"] = worker.ivars["istep"] == 3
    calls = []
    ember.lobpcg(A, k=2, tracker=lambda w: (calls.append(1), stop(w)))
    assert len(calls) == 3
    calls.clear()
    ember.lobpcg(A, k=2, niter=2, tracker=lambda w: calls.append(1))
    assert len(calls) == 2


def test_ortho_parameters_reach_the_worker():
    seen = {}
    ember.lobpcg(ember.tensor(_spd(30)), k=2, ortho_iparams={"ortho_i_max": 5},
                 ortho_fparams={"ortho_tol": 1e-12}, tracker=lambda w: seen.update(
                     i=w.iparams["ortho_i_max"], j=w.iparams["ortho_j_max"],
                     tol=w.fparams["ortho_tol"]))
    assert seen == {"i": 5, "j": 3, "tol": 1e-12}


def test_argument_errors():
    A = ember.tensor(_spd(20))
    with pytest.raises(AssertionError, match=r"A must be square, got shape ember.Size\(\[20, "
                                             r"19\]\)"):
        ember.lobpcg(A[:, :19])
    with pytest.raises(AssertionError, match=r"A and B must have same shape, got ember.Size\("
                                             r"\[20, 20\]\) vs ember.Size\(\[19, 19\]\)"):
        ember.lobpcg(A, B=A[:19, :19])
    with pytest.raises(ValueError, match=r"LOBPCG algorithm is not applicable when the number "
                                         r"of A rows \(=20\) is smaller than 3 x the number of "
                                         r"requested eigenpairs \(=7\)"):
        ember.lobpcg(A, k=7)
    with pytest.raises(ValueError, match=r"requested eigenpairs \(=8\)"):
        ember.lobpcg(A, k=1, n=8)
    with pytest.raises(AssertionError, match=r"X shape mismatch: got ember.Size\(\[19, 3\]\), "
                                             r"expected \(20, 3\)"):
        ember.lobpcg(A, X=ember.ones(19, 3, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, but "
                                           "got: double != float"):
        ember.lobpcg(A, X=ember.ones(20, 2))
    with pytest.raises(RuntimeError, match="but got: float != double"):
        ember.lobpcg(A, k=2, B=A.float())
    with pytest.raises(RuntimeError, match="but got: long int != float"):
        ember.lobpcg(A.long(), k=2)
    with pytest.raises(KeyError):                       # no default tol for 16-bit floats
        ember.lobpcg(A.half(), k=2)
    with pytest.raises(IndexError):
        ember.lobpcg(ember.ones(20, dtype=ember.float64))


def _eigh_gradient(A, k, largest, X, grad_E, grad_X):
    """The gradient of (E, X) through linalg.eigh, its vectors' signs those of X's columns."""
    a = ember.tensor(A, requires_grad=True)
    values, vectors = ember.linalg.eigh((a + a.mT) / 2)
    if largest:
        values, vectors = values.flip(0), vectors.flip(1)
    E, V = values[:k], vectors[:, :k]
    V = V * (V.detach() * X).sum(0).sign()
    (grad,) = ember.autograd.grad((E * grad_E).sum() + (V * grad_X).sum(), a)
    return np.asarray(grad)


@pytest.mark.parametrize("largest", [True, False])
def test_gradient_is_that_of_the_exact_eigenpairs(largest):
    A0 = _spd(12, seed=9)
    rng = np.random.default_rng(10)
    grad_E, grad_X = ember.tensor(rng.standard_normal(2)), ember.tensor(
        rng.standard_normal((12, 2)))
    A = ember.tensor(A0, requires_grad=True)
    E, X = ember.lobpcg(A, k=2, largest=largest, tol=1e-13, niter=-1)
    (grad,) = ember.autograd.grad((E * grad_E).sum() + (X * grad_X).sum(), A)
    want = _eigh_gradient(A0, 2, largest, X.detach(), grad_E, grad_X)
    np.testing.assert_allclose(np.asarray(grad), want, atol=1e-9)
    np.testing.assert_allclose(np.asarray(grad), np.asarray(grad).T, atol=1e-12)   # symmetric


def test_gradcheck_and_gradgradcheck():
    def pairs(a):
        E, X = ember.lobpcg(a, k=2, tol=1e-14, niter=-1)
        return E, X * X[:1].sign()          # a sign convention, for finite differences

    A = ember.tensor(_spd(6, seed=11), requires_grad=True)
    assert ember.autograd.gradcheck(pairs, (A,), atol=1e-6, rtol=1e-5)
    A = ember.tensor(_spd(4, seed=11), requires_grad=True)
    assert ember.autograd.gradgradcheck(lambda a: ember.lobpcg(a, tol=1e-14, niter=-1)[0],
                                        (A,), atol=1e-6, rtol=1e-5)


def test_gradients_of_batches_and_the_limits():
    A = ember.tensor(_spd(15, seed=12, batch=(2,)), requires_grad=True)
    E, X = ember.lobpcg(A, k=2)
    # PyTorch's node name, which programs print and compare
    assert type(E.grad_fn).__name__ == type(X.grad_fn).__name__ == \
        "LOBPCGAutogradFunctionBackward"
    E.sum().backward()
    assert A.grad.shape == (2, 15, 15)
    for i in range(2):
        _, vectors = _expected(np.asarray(A.detach())[i], 2)
        np.testing.assert_allclose(np.asarray(A.grad[i]), vectors @ vectors.T, atol=1e-7)
    a = ember.tensor(_spd(15), requires_grad=True)
    E, _ = ember.lobpcg(a, k=2, B=ember.eye(15, dtype=ember.float64))
    assert E.requires_grad
    with pytest.raises(ValueError, match="lobpcg.backward does not support backward with B "
                                         "!= I yet."):
        E.sum().backward()
    E, X = ember.lobpcg(ember.tensor(_spd(15)), k=2)
    assert not (E.requires_grad or X.requires_grad)


@pytest.mark.cuda
@pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA GPU")
def test_runs_on_cuda():
    A0 = _spd(30, seed=13)
    A = ember.tensor(A0, device="cuda", requires_grad=True)
    E, X = ember.lobpcg(A, k=2)
    assert E.device == X.device == A.device
    np.testing.assert_allclose(np.asarray(E.detach().cpu()), _expected(A0, 2)[0], rtol=1e-10)
    E.sum().backward()
    _, vectors = _expected(A0, 2)
    np.testing.assert_allclose(np.asarray(A.grad.cpu()), vectors @ vectors.T, atol=1e-7)
