"""Round 36's linalg fuzzer finds, as plain tests (PyTorch 2.13's behaviour, observed)."""

import warnings

import numpy as np
import pytest

import ember


def _node(t):
    return type(t.grad_fn).__name__


def _spd():
    return ember.tensor([[4., 1, 0.5], [1, 3, 0.2], [0.5, 0.2, 2]], dtype=ember.float64)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# --- torch.cholesky: its own node and messages ------------------------------------------------

def test_top_level_cholesky_node_and_messages():
    a = _spd().requires_grad_()
    factor = ember.cholesky(a)
    assert _node(factor) == "CholeskyBackward0"
    assert factor.stride() == (1, 3)
    factor.sum().backward()
    b = _spd().requires_grad_()
    ember.linalg.cholesky(b).sum().backward()
    assert np.allclose(a.grad.numpy(), b.grad.numpy())
    empty = ember.zeros(2, 0, 0, dtype=ember.float64, requires_grad=True)
    assert _node(ember.cholesky(empty)) == "CholeskyBackward0"
    with pytest.raises(RuntimeError, match=r"^cholesky: A must be batches of square matrices"):
        ember.cholesky(ember.ones(2, 3))
    with pytest.raises(NotImplementedError, match="\"cholesky_cpu\" not implemented for 'Long'"):
        ember.cholesky(ember.eye(3, dtype=ember.int64))
    with pytest.raises(ember.linalg.LinAlgError, match=r"^cholesky: The factorization could"):
        ember.cholesky(-ember.eye(2))


# --- torch.triangular_solve -------------------------------------------------------------------

def test_triangular_solve_node_copy_and_gradients():
    a = (ember.tensor([[2., 1, 0.5], [0, 3, 1], [0, 0, 4]], dtype=ember.float64)
         .requires_grad_())
    b = ember.ones(2, 3, 1, dtype=ember.float64, requires_grad=True)
    x, copy = ember.triangular_solve(b, a)
    assert _node(x) == _node(copy) == "TriangularSolveBackward0"
    assert copy.shape == (2, 3, 3) and copy.stride() == (9, 1, 3)     # broadcast, column-major
    copy.sum().backward()       # the copy alone: b's gradient is zeros, A's all ones per batch
    assert np.array_equal(b.grad.numpy(), np.zeros((2, 3, 1)))
    assert np.array_equal(a.grad.numpy(), np.full((3, 3), 2.0))
    out = (ember.empty(0, dtype=ember.float64), ember.empty(0, dtype=ember.float64))
    result = ember.triangular_solve(b.detach(), a.detach(), out=out)
    assert type(result).__name__ == "triangular_solve_out"
    assert type(ember.qr(a.detach(), out=out)).__name__ == "qr_out"


# --- lu ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(0, 3, 3), (3, 0), (0, 0)])
def test_lu_without_pivoting_of_empty_input(shape):
    a = ember.zeros(shape, dtype=ember.float64, requires_grad=True)
    p, low, up = ember.linalg.lu(a, pivot=False)
    assert p.shape == (0,)
    (low.sum() + up.sum()).backward()
    assert a.grad.shape == shape
    lu, piv = ember.linalg.lu_factor(a.detach(), pivot=False)
    assert lu.shape == shape and piv.dtype == ember.int32
    with pytest.raises(RuntimeError, match="LU without pivoting is not implemented on the CPU"):
        ember.linalg.lu_factor(ember.eye(2), pivot=False)


def test_empty_integer_factorizations_keep_their_dtype():
    a = ember.zeros(0, 4, 4, dtype=ember.int64)
    lu, piv = ember.linalg.lu_factor(a)
    assert lu.dtype == ember.int64 and piv.shape == (0, 4)
    w, v = ember.linalg.eigh(a)
    assert (w.dtype, w.shape, v.dtype) == (ember.int64, (0, 4), ember.int64)
    assert ember.linalg.eigvalsh(ember.zeros(0, 0, dtype=ember.bool)).dtype == ember.bool
    with pytest.raises(NotImplementedError, match="\"lu_cpu\" not implemented for 'Long'"):
        ember.linalg.lu_factor(ember.eye(2, dtype=ember.int64))


def test_integer_dtype_checked_first():
    i = ember.ones(3, 3, dtype=ember.int64)
    with pytest.raises(RuntimeError, match="Expected UPLO argument to be 'L' or 'U', but got x"):
        ember.linalg.eigh(i, UPLO="x")
    with pytest.raises(RuntimeError, match="linalg.qr: Expected a floating point or complex"):
        ember.linalg.qr(i, mode="bad")
    with pytest.raises(RuntimeError, match="qr received unrecognized mode 'bad'"):
        ember.linalg.qr(ember.ones(3, 3), mode="bad")
    with pytest.raises(RuntimeError, match="linalg.solve: Expected a floating point or complex"):
        ember.linalg.solve(ember.ones(3, 0, dtype=ember.int64), ember.ones(3, 1))
    with pytest.raises(RuntimeError, match="Expected A and B to have the same dtype"):
        ember.linalg.solve(ember.ones(3, 0), ember.ones(3, 1, dtype=ember.float64))
    piv = ember.zeros(0, dtype=ember.int32)
    with pytest.raises(RuntimeError, match="lu_solve: Expected a floating point or complex"):
        ember.linalg.lu_solve(ember.zeros(0, 0, dtype=ember.int64), piv,
                              ember.zeros(0, 1, dtype=ember.float64))


# --- solve ------------------------------------------------------------------------------------

def test_solve_vector_rhs_with_left_false():
    with pytest.raises(RuntimeError, match="Vector broadcasting of the left hand side is not "
                                           "supported for left=False"):
        ember.linalg.solve(ember.ones(1, 1), ember.ones(1), left=False)
    with pytest.raises(RuntimeError, match=r"equation XA = B \(3x3 and 3x1\)"):
        ember.linalg.solve(ember.eye(3), ember.ones(3), left=False)


def test_solve_ex_backward_through_a_singular_matrix():
    a = ember.zeros(3, 3, dtype=ember.float64, requires_grad=True)
    x, info = ember.linalg.solve_ex(a, ember.ones(3, 2, dtype=ember.float64))
    assert info.item() == 1
    x.sum().backward()      # no LinAlgError: LAPACK's inf and NaN, as PyTorch's
    assert not np.isfinite(a.grad.numpy()).any()


# --- nodes, gradients, messages ---------------------------------------------------------------

def test_top_level_cross_and_vander_nodes():
    a = ember.randn(3, 3, dtype=ember.float64, requires_grad=True)
    assert _node(ember.cross(a, a.flip(-1), dim=0)) == "LinalgCrossBackward0"
    assert _node(ember.linalg.vander(a[0])) == "CatBackward0"


@pytest.mark.parametrize("create_graph", [False, True])
def test_det_gradient_of_a_1x1_zero_matrix(create_graph):
    for fn in (ember.det, ember.linalg.det):
        z = ember.zeros(2, 1, 1, dtype=ember.float64, requires_grad=True)
        grad, = ember.autograd.grad(fn(z).sum(), z, create_graph=create_graph)
        assert grad.flatten().tolist() == [1.0, 1.0]      # the cofactor of a 1x1 matrix


def test_matrix_norm_empty_amin_names_the_unshifted_dim_under_keepdim():
    with pytest.raises(IndexError, match="amin\\(\\): Expected reduction dim 1 to have"):
        ember.linalg.matrix_norm(ember.zeros(3, 0), ord=-1, keepdim=True)
    with pytest.raises(IndexError, match="amin\\(\\): Expected reduction dim 0 to have"):
        ember.linalg.matrix_norm(ember.zeros(3, 0), ord=-1)


def test_out_cast_refusals_name_the_output():
    a = ember.eye(3, dtype=ember.float64) * 2
    i = ember.empty(3, 3, dtype=ember.int64)
    f0 = ember.empty(0, dtype=ember.float64)
    cases = [
        (lambda: ember.cholesky_solve(a, a, out=i), "cholesky_solve: Expected result to be "
         "safely castable from Double dtype, but got result with dtype Long"),
        (lambda: ember.cholesky_inverse(a, out=i), "cholesky_inverse: Expected result"),
        (lambda: ember.linalg.eig(a, out=(f0, ember.empty(0, dtype=ember.complex128))),
         "torch.linalg.eig: Expected eigenvalues to be safely castable from ComplexDouble "
         "dtype, but got eigenvalues with dtype Double"),
        (lambda: ember.linalg.lstsq(a, a, out=(a.clone(), f0, ember.empty((), dtype=ember.int64),
                                               ember.empty(0, dtype=ember.int64))),
         "torch.linalg.lstsq: Expected singular_values to be safely castable"),
        (lambda: ember.svd(a, out=(i, f0, f0)),
         "Expected out tensor to have dtype double, but got long int instead"),
    ]
    for call, message in cases:
        with pytest.raises(RuntimeError, match=message.replace("(", r"\(")):
            call()


# --- review (rg4): the deprecated ops as complete registered ops ------------------------------

def _upper():
    return ember.tensor([[2., 1, 0.5], [0, 3, 1], [0, 0, 4]], dtype=ember.float64)


@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("unit", [False, True])
def test_triangular_solve_gradients_are_solve_triangulars(transpose, upper, unit):
    # the node shares linalg.solve_triangular's derivative: A's gradient is read in the
    # triangle used (transposed back when ``transpose``), b's is A^{-H} (A^{-*}) gX
    base = _upper() if upper else _upper().mT
    a = base.clone().requires_grad_()
    b = ember.tensor([[1., -2], [0.5, 3], [2, 1]], dtype=ember.float64, requires_grad=True)
    x, _ = ember.triangular_solve(b, a, upper=upper, transpose=transpose, unitriangular=unit)
    (x * x).sum().backward()
    a2 = base.clone().requires_grad_()
    b2 = b.detach().clone().requires_grad_()
    y = ember.linalg.solve_triangular(a2.mT if transpose else a2, b2, upper=upper != transpose,
                                      unitriangular=unit)
    (y * y).sum().backward()
    np.testing.assert_allclose(x.detach().numpy(), y.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(a.grad.numpy(), a2.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), b2.grad.numpy(), rtol=1e-12)
    keep = np.triu if upper else np.tril
    off = keep(np.ones((3, 3)), 1 if upper else -1) if unit else keep(np.ones((3, 3)))
    assert np.array_equal(a.grad.numpy() != 0, off.astype(bool))      # only the triangle read


def test_triangular_solve_forward_ad_matches_finite_differences():
    # (PyTorch 2.13's tangent of X takes dA X, not its triangle, and not dA^T X when
    # ``transpose``: wrong, e.g. -0.0589 where finite differences give 0.4673; not copied)
    a = _upper()
    b = ember.tensor([[1., -2], [0.5, 3], [2, 1]], dtype=ember.float64)
    da = ember.tensor([[0.3, -1, 2], [0.7, 0.2, -0.4], [1, 1, 0.5]], dtype=ember.float64)

    def f(m):
        return ember.triangular_solve(b, m, transpose=True)[0]

    tangent = ember.func.jvp(f, (a,), (da,))[1]
    fd = (f(a + 1e-6 * da) - f(a - 1e-6 * da)) / 2e-6
    np.testing.assert_allclose(tangent.numpy(), fd.numpy(), rtol=1e-6, atol=1e-8)
    copy_tangent = ember.func.jvp(lambda m: ember.triangular_solve(b, m)[1], (a,), (da,))[1]
    assert np.array_equal(copy_tangent.numpy(), da.numpy())         # the copy's: all of dA


def test_cholesky_runs_in_float32_under_cpu_autocast():
    # torch.cholesky is on PyTorch's CPU fp32 list (its own op now, no longer linalg.cholesky)
    a = (ember.eye(3) * 4).to(ember.bfloat16)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        factor = ember.cholesky(a)
    assert factor.dtype is ember.float32
    assert np.array_equal(factor.numpy(), 2 * np.eye(3, dtype=np.float32))


@pytest.mark.parametrize("batch", [(), (2,), (0,)])
def test_resized_out_layouts(batch):
    # torch.cholesky resizes out= row-major; torch.triangular_solve both outs column-major
    spd = _spd().expand(*batch, 3, 3)
    out = ember.empty(0, dtype=ember.float64)
    ember.cholesky(spd, upper=True, out=out)
    assert out.is_contiguous() and out.shape == spd.shape
    np.testing.assert_allclose(out.numpy(), ember.linalg.cholesky(spd, upper=True).numpy())
    b = ember.ones(*batch, 3, 2, dtype=ember.float64)
    outs = (ember.empty(0, dtype=ember.float64), ember.empty(0, dtype=ember.float64))
    ember.triangular_solve(b, _upper(), out=outs)
    assert outs[0].shape == (*batch, 3, 2) and outs[1].shape == (*batch, 3, 3)
    assert outs[0].mT.is_contiguous() and outs[1].mT.is_contiguous()
    np.testing.assert_allclose(outs[0].numpy(), ember.linalg.solve_triangular(
        _upper(), b, upper=True).numpy())
    assert np.array_equal(outs[1].numpy(), np.broadcast_to(_upper().numpy(), (*batch, 3, 3)))


def test_vmap_batches_the_deprecated_ops_without_a_loop(monkeypatch):
    import ember.func._batching as batching
    looped = []
    loop = batching._loop
    monkeypatch.setattr(batching, "_loop", lambda op, *a, **k: (looped.append(op.name),
                                                                 loop(op, *a, **k))[1])
    spd = ember.stack([_spd(), 2 * _spd()])
    got = ember.func.vmap(lambda m: ember.cholesky(m, upper=True))(spd)
    np.testing.assert_allclose(got.numpy(), ember.linalg.cholesky(spd, upper=True).numpy())
    b = ember.ones(2, 3, 2, dtype=ember.float64)
    x, copy = ember.func.vmap(ember.triangular_solve, in_dims=(0, None))(b, _upper())
    assert copy.shape == (2, 3, 3)
    np.testing.assert_allclose(x.numpy(), ember.triangular_solve(b, _upper())[0].numpy())
    x, copy = ember.func.vmap(ember.triangular_solve, in_dims=(None, 0))(
        b[0], ember.stack([_upper(), 2 * _upper()]))
    np.testing.assert_allclose(x[1].numpy(), 0.5 * x[0].numpy(), rtol=1e-12)
    assert looped == []
