"""ember.linalg behaviour the OpInfo entries do not reach: error types, gradients at singular
points and through gauge-dependent outputs, out= of the entries that compare through
wrappers, the top-level names and methods."""

import math
import pickle

import numpy as np
import pytest
import scipy.linalg

import ember
from ember.testing import assert_close as _assert_close

L = ember.linalg
F64, C128 = ember.float64, ember.complex128


def assert_close(actual, expected, **kwargs):
    """ember's assert_close, the expected values given as a tensor or an array."""
    if not isinstance(expected, ember.Tensor):
        expected = ember.as_tensor(np.asarray(expected))
    _assert_close(actual, expected, check_dtype=False, **kwargs)


def _randn(*shape, dtype=F64, requires_grad=False):
    ember.manual_seed(sum(shape) + 7)
    return ember.randn(shape, dtype=dtype).requires_grad_(requires_grad)


def _spd(n, dtype=F64):
    x = _randn(n, n, dtype=dtype)
    return x @ x.mH + n * ember.eye(n, dtype=dtype)


# --- errors -----------------------------------------------------------------------------------

def test_linalg_error_is_a_runtime_error_of_the_linalg_namespace():
    assert issubclass(L.LinAlgError, RuntimeError)
    assert L.LinAlgError.__module__ == "ember.linalg"
    assert L.LinAlgError.__name__ == "_LinAlgError"          # what type(e).__name__ shows
    error = pickle.loads(pickle.dumps(L.LinAlgError("singular")))
    assert type(error) is L.LinAlgError and str(error) == "singular"


@pytest.mark.parametrize("call", [
    lambda: L.inv(ember.ones(3, 3)),
    lambda: ember.inverse(ember.ones(3, 3)),
    lambda: L.cholesky(-ember.eye(2)),
    lambda: L.solve(ember.ones(3, 3), ember.ones(3)),
    lambda: L.inv_ex(ember.ones(3, 3), check_errors=True),
    lambda: L.matrix_power(ember.ones(2, 2), -1),
])
def test_failed_factorizations_raise_linalg_error(call):
    with pytest.raises(L.LinAlgError):
        call()


def test_lu_factor_of_a_singular_matrix_raises_a_plain_runtime_error():
    with pytest.raises(RuntimeError) as caught:
        L.lu_factor(ember.ones(3, 3))
    assert type(caught.value) is RuntimeError       # as PyTorch: not a LinAlgError


def test_ex_variants_report_failures_in_info():
    info = L.cholesky_ex(ember.stack([ember.eye(2), -ember.eye(2)])).info
    assert info.dtype is ember.int32 and info.tolist() == [0, 1]
    assert L.solve_ex(ember.ones(3, 3), ember.ones(3)).info.item() == 2
    assert L.lu_factor_ex(ember.ones(3, 3)).info.item() == 2


# --- gradients --------------------------------------------------------------------------------

def test_det_gradient_at_a_singular_matrix_is_the_cofactor_matrix_in_grad_mode():
    a = ember.tensor([[1., 2, 3], [2, 4, 6], [1, 0, 1]], dtype=F64, requires_grad=True)
    (grad,) = ember.autograd.grad(L.det(a), [a], create_graph=True)
    m = a.detach().numpy()
    cofactor = np.array([[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(m, i, 0), j, 1))
                          for j in range(3)] for i in range(3)])
    assert_close(grad, cofactor, atol=1e-12, rtol=1e-10)
    assert_close(ember.func.grad(L.det)(a.detach()), cofactor, atol=1e-12, rtol=1e-10)
    # first order, PyTorch solves A^H X = det(A) I, whose right side is 0 (so is X)
    (first,) = ember.autograd.grad(L.det(a), [a])
    assert_close(first, np.zeros((3, 3)))


@pytest.mark.parametrize("p", ["fro", 1, -1, float("inf"), -float("inf")])
def test_cond_gradient_in_norms_pytorch_cannot_differentiate(p):
    a = (_randn(3, 3) + 3 * ember.eye(3, dtype=F64)).requires_grad_()
    assert ember.autograd.gradcheck(lambda t: L.cond(t, p), [a])
    assert ember.autograd.gradgradcheck(lambda t: L.cond(t, p), [a])


def test_svd_gradient_through_the_determined_columns_of_full_matrices():
    a = _randn(4, 3, requires_grad=True)
    assert ember.autograd.gradcheck(
        lambda t: [x.abs() for x in L.svd(t)[0][..., :3].unbind(-1)], [a])


@pytest.mark.parametrize("call, name", [
    (lambda a: L.eigh(a + a.mH).eigenvectors, "linalg_eigh_backward"),
    (lambda a: L.eig(a).eigenvectors, "linalg_eig_backward"),
    (lambda a: L.svd(a)[0], "svd_backward"),
])
def test_losses_depending_on_the_phase_of_complex_vectors_raise(call, name):
    a = _randn(3, 3, dtype=C128, requires_grad=True)
    loss = call(a).real.sum()
    with pytest.raises(RuntimeError, match=f"{name}: The .* in the complex case are specified "
                                           f"up to multiplication by e\\^{{i phi}}"):
        loss.backward()


def test_qr_derivative_needs_q():
    a = _randn(3, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="depends on Q, which is not computed when mode='r'"):
        L.qr(a, mode="r").R.sum().backward()
    with pytest.raises(RuntimeError, match="not differentiable when mode='complete' and "
                                           "nrows > ncols"):
        L.qr(a, mode="complete").Q.sum().backward()
    wide = _randn(2, 3, requires_grad=True)
    assert ember.autograd.gradcheck(lambda t: L.qr(t, mode="complete"), [wide])


# --- out=, named results, the top-level names -------------------------------------------------

@pytest.mark.parametrize("fn, args", [
    (L.cholesky, (_spd(3),)),
    (L.cholesky_ex, (_spd(3),)),
    (L.inv_ex, (_spd(3),)),
    (L.eigh, (_spd(3),)),
    (L.eig, (_spd(3),)),
    (L.qr, (_randn(4, 3),)),
    (L.svd, (_randn(4, 3),)),
    (L.lstsq, (_randn(4, 3), _randn(4, 2))),
    (ember.svd, (_randn(4, 3),)),
])
def test_out_variants(fn, args):
    expected = fn(*args)
    single = isinstance(expected, ember.Tensor)
    expected = (expected,) if single else expected
    outs = tuple(ember.empty(0, dtype=e.dtype) for e in expected)
    result = fn(*args, out=outs[0] if single else outs)
    for o, r, e in zip(outs, (result,) if single else result, expected):
        assert r is o
        assert_close(o, e)


def test_named_results():
    sign, logabsdet = L.slogdet(-ember.eye(2, dtype=F64) * 2)
    result = L.slogdet(-ember.eye(2, dtype=F64) * 2)
    assert result.sign is result[0] and sign.item() == 1.0
    assert_close(logabsdet, np.log(4.0))
    assert type(result).__name__ == "linalg_slogdet"
    assert "ember.return_types.linalg_slogdet(\nsign=" in repr(result)
    assert L.lu_factor(ember.eye(2)).pivots.tolist() == [1, 2]      # 1-based, as LAPACK


def test_legacy_svd_without_uv_returns_zeros_that_need_no_gradient():
    a = _randn(4, 3, requires_grad=True)
    u, s, v = ember.svd(a, compute_uv=False)
    assert u.shape == (4, 4) and v.shape == (3, 3) and not u.any() and not v.any()
    assert not u.requires_grad and not v.requires_grad and s.requires_grad
    u, s, v = ember.svd(a)
    assert_close((u * s) @ v.mH, a)


def test_lstsq_singular_values_need_no_gradient():
    a, b = _randn(5, 3, requires_grad=True), _randn(5, 2, requires_grad=True)
    result = L.lstsq(a, b, driver="gelsd")
    assert result.solution.requires_grad and result.residuals.requires_grad
    assert not result.singular_values.requires_grad
    assert_close(result.singular_values, np.linalg.svd(a.detach().numpy(), compute_uv=False))


def test_lstsq_rank_and_singular_values_have_the_batch_shape_of_a():
    a = ember.tensor([[[1., 0], [0, 2], [0, 0]]])             # batch (1,), broadcast to (2,)
    b = ember.arange(12.).reshape(2, 3, 2)
    result = L.lstsq(a, b, driver="gelsd")
    assert result.solution.shape == (2, 2, 2)
    assert result.rank.tolist() == [2]
    assert result.singular_values.tolist() == [[2.0, 1.0]]
    assert L.lstsq(a, b).rank.shape == (1,)                  # gelsy


def test_top_level_names_and_methods():
    a = _spd(3)
    n = a.numpy()
    assert_close(ember.det(a), np.linalg.det(n))
    assert_close(a.det(), np.linalg.det(n))
    assert_close(a.logdet(), np.log(np.linalg.det(n)))
    assert_close(a.slogdet().logabsdet, np.log(np.linalg.det(n)))
    assert_close(a.inverse(), np.linalg.inv(n))
    assert_close(a.pinverse(), np.linalg.pinv(n))
    assert_close(a.matrix_power(3), np.linalg.matrix_power(n, 3))
    assert_close(a.matrix_exp(), scipy.linalg.expm(n))
    assert_close(a.svd().S, np.linalg.svd(n, compute_uv=False))
    assert L.matmul is ember.matmul


def test_norm_takes_the_nuclear_norm_of_matrices():
    a = _randn(2, 3, 4, requires_grad=True)
    n = a.detach().numpy()
    assert_close(ember.norm(a[0], "nuc"), np.linalg.norm(n[0], "nuc"))
    assert_close(ember.norm(a, "nuc", dim=(2, 1), keepdim=True),
                 np.linalg.norm(n, "nuc", axis=(2, 1), keepdims=True))
    assert ember.autograd.gradcheck(lambda t: ember.norm(t, "nuc", dim=(0, 2)), [a])
    with pytest.raises(RuntimeError, match="linalg.matrix_norm: dim must be a 2-tuple. Got 0 1 "
                                           "2"):
        ember.norm(a, "nuc")
    assert_close(ember.norm(a, None), np.linalg.norm(n.reshape(-1)))


# --- dtypes -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, tol", [(ember.float16, 2e-3), (ember.bfloat16, 2e-2)])
def test_matrix_exp_in_half_precision(dtype, tol):
    # PyTorch 2.13's CPU kernel is wrong here (see the OpInfo entry): compare with SciPy
    a = _randn(2, 3, 3) * 0.5
    got = L.matrix_exp(a.to(dtype))
    assert got.dtype is dtype
    want = scipy.linalg.expm(a.to(dtype).double().numpy())
    assert_close(got.double(), want, rtol=tol, atol=tol)


def test_solve_triangular_computes_in_the_dtype_of_a(monkeypatch):
    from ember import _warn
    monkeypatch.setattr(_warn, "_WARNED_ONCE", set())
    a = ember.eye(3) * 2
    assert L.solve_triangular(a, ember.ones(3, 2, dtype=F64), upper=True).dtype is ember.float32
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        x = L.solve_triangular(a, ember.ones(3, 2, dtype=ember.complex64), upper=True)
    assert_close(x, np.full((3, 2), 0.5, np.float32))


def test_eig_of_a_real_matrix_is_complex():
    w, v = L.eig(ember.tensor([[0., -1], [1, 0]]))
    assert w.dtype is ember.complex64 and v.dtype is ember.complex64
    assert sorted(w.imag.tolist()) == pytest.approx([-1, 1]) and not w.real.any()


def test_deprecated_qr_and_cholesky_warn_once_and_delegate(monkeypatch):
    from ember import _warn
    monkeypatch.setattr(_warn, "_WARNED_ONCE", set())
    a = _randn(4, 3)
    with pytest.warns(UserWarning, match="torch.qr is deprecated in favor of torch.linalg.qr"):
        q, r = ember.qr(a, some=False)
    assert q.shape == (4, 4) and r.shape == (4, 3)
    assert_close(q @ r, a)
    spd = _spd(3)
    with pytest.warns(UserWarning, match="torch.cholesky is deprecated"):
        u = ember.cholesky(spd, upper=True)
    assert_close(u, L.cholesky(spd).mH)
    _, caught = _warned(lambda: (ember.qr(a), a.qr(), ember.cholesky(spd)))
    assert caught == []                     # once per process, as PyTorch's (TORCH_WARN_ONCE)


# --- cholesky_solve, cholesky_inverse ---------------------------------------------------------

FACTOR = [[2., 0.5, -1.], [0.3, 1.5, 0.7], [-0.4, 0.2, 1.2]]    # its other triangle is not read
RHS = [[1., -1.], [0.5, 2.], [-0.3, 0.4]]
WEIGHTS = ember.arange(9., dtype=F64).reshape(3, 3)
# PyTorch 2.13: values, and gradients of x.sum() and (y * WEIGHTS).sum(), which cover all of
# the factor's entries (the formula's, as PyTorch gives them)
TORCH_CHOLESKY = {
    ("solve", False): (
        [[0.20425925925925925, -0.40657407407407403], [0.16913580246913576, 0.9635802469135801],
         [-0.10185185185185185, -0.06018518518518516]],
        [[0.10115740740740745, -0.4115724879972565, -0.13800208619112941],
         [-0.5663580246913578, -1.2792915523548238, -1.0603968526139305],
         [0.08101851851851848, -1.0604445301783265, -0.4843435642432555]]),
    ("solve", True): (
        [[0.25790895061728397, -0.9924768518518519], [0.08410493827160492, 1.3726851851851851],
         [0.057870370370370385, -0.798611111111111]],
        [[0.36728395061728425, -0.728395061728395, 0.37037037037037],
         [-0.44077717764060353, -0.9595507544581618, -0.6381815843621395],
         [0.7046896433470506, -1.0124828532235937, 0.7512860082304527]]),
    ("inverse", False): (
        [[0.29361111111111116, -0.08703703703703702, 0.1527777777777778],
         [-0.08703703703703702, 0.4567901234567901, -0.0925925925925926],
         [0.1527777777777778, -0.0925925925925926, 0.6944444444444445]],
        [[-0.4370370370370371, -1.7676803840877917, -2.8421554641060824],
         [-0.5432098765432098, -1.6710653863740283, -2.497259564090839],
         [-2.5925925925925934, -6.2120713305898505, -8.447919524462735]]),
    ("inverse", True): (
        [[0.5418595679012347, -0.3109567901234568, 0.4282407407407408],
         [-0.3109567901234568, 0.595679012345679, -0.32407407407407407],
         [0.4282407407407408, -0.32407407407407407, 0.6944444444444445]],
        [[-1.0910493827160508, 0.1049382716049383, -2.1296296296296333],
         [-3.7117551868998637, 0.27713906035665303, -5.624292695473253],
         [-4.264639060356654, 0.3092764060356654, -6.2764917695473255]]),
}


@pytest.mark.parametrize("which, upper", list(TORCH_CHOLESKY))
def test_cholesky_solve_and_inverse_match_pytorch(which, upper):
    factor = ember.tensor(FACTOR, dtype=F64, requires_grad=True)
    if which == "solve":
        out = ember.cholesky_solve(ember.tensor(RHS, dtype=F64), factor, upper)
        loss = out.sum()
    else:
        out = ember.cholesky_inverse(factor, upper)
        loss = (out * WEIGHTS).sum()
    value, grad = TORCH_CHOLESKY[which, upper]
    assert_close(out, value, rtol=1e-12, atol=1e-14)
    assert_close(ember.autograd.grad(loss, factor)[0], grad, rtol=1e-10, atol=1e-12)


def test_cholesky_solve_and_inverse_read_one_triangle_and_take_out():
    spd = _spd(3)
    low = L.cholesky(spd)
    b = _randn(2, 3, 2)
    x = ember.cholesky_solve(b, low)
    assert_close(spd @ x, b)
    assert_close(ember.cholesky_solve(b, low + _randn(3, 3).triu(1)), x)
    assert_close(b.cholesky_solve(low.mH + _randn(3, 3).tril(-1), True), x)
    inverse = ember.cholesky_inverse(low + _randn(3, 3).triu(1))
    assert_close(inverse, L.inv(spd))
    assert_close(low.mH.cholesky_inverse(upper=True), inverse)
    out = ember.empty(0, dtype=F64)
    assert ember.cholesky_solve(b, low, out=out) is out
    assert_close(out, x)
    out = ember.empty(0, dtype=F64)
    assert ember.cholesky_inverse(low, out=out) is out
    assert_close(out, inverse)


# --- lu_unpack, lu, lu_solve ------------------------------------------------------------------

def test_lu_unpack_reconstructs_and_p_needs_no_gradient():
    a = _randn(2, 4, 3, requires_grad=True)
    lu, pivots = L.lu_factor(a)
    p, low, up = ember.lu_unpack(lu, pivots)
    assert type(ember.lu_unpack(lu, pivots)).__name__ == "lu_unpack"
    assert (p.shape, low.shape, up.shape) == ((2, 4, 4), (2, 4, 3), (2, 3, 3))
    assert_close(p @ low @ up, a)
    assert not p.requires_grad and low.requires_grad and up.requires_grad
    (grad,) = ember.autograd.grad((low @ up).sum(), a)       # L U = P^T A: all ones
    assert_close(grad, np.ones((2, 4, 3)), rtol=1e-12, atol=1e-12)
    outs = tuple(ember.empty(0, dtype=F64) for _ in range(3))
    result = ember.lu_unpack(lu.detach(), pivots, out=outs)
    assert all(r is o for r, o in zip(result, outs))
    assert_close(outs[1], low)


@pytest.mark.parametrize("pivots", [ember.ones(2, 3, dtype=ember.int32),
                                    ember.ones(2, dtype=ember.int32),
                                    ember.ones(4, dtype=ember.int32),
                                    ember.ones((), dtype=ember.int32)])
def test_lu_unpack_refuses_pivots_that_do_not_fit(pivots):
    # PyTorch reads out of bounds for these (and may crash): ember raises
    with pytest.raises(RuntimeError, match=r"lu_unpack: Expected LU_pivots of shape \[3\] for "
                                           r"LU of shape \[3, 3\]"):
        ember.lu_unpack(ember.eye(3), pivots)
    assert ember.lu_unpack(ember.eye(3), pivots, unpack_pivots=False).P.shape == (0,)


def _warned(fn):
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    return result, [str(w.message) for w in caught]


def test_deprecated_lu_and_lu_solve_warn_once_and_delegate(monkeypatch):
    a = _randn(2, 3, 3)
    (lu, pivots), caught = _warned(lambda: ember.lu(a))
    assert len(caught) == 1 and caught[0].startswith(
        "torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex")
    want = L.lu_factor(a)
    assert_close(lu, want.LU)
    assert pivots.equal(want.pivots)
    infos, caught = _warned(lambda: ember.lu(ember.ones(2, 3, 3), get_infos=True))
    assert caught == []                     # once per process, as PyTorch's
    assert type(infos).__name__ == "_lu_with_info" and infos.info.tolist() == [2, 2]
    assert type(a.lu(get_infos=True)) is tuple and len(a.lu()) == 2
    b = _randn(2, 3, 2)
    x, caught = _warned(lambda: ember.lu_solve(b, lu, pivots))
    assert len(caught) == 1 and "torch.lu_solve is deprecated in favor of torch.linalg." \
                                "lu_solveand will be removed" in caught[0]
    assert_close(a @ x, b)
    assert_close(b.lu_solve(lu, pivots), x)
    out = ember.empty(0, dtype=F64)
    assert ember.lu_solve(b, lu, pivots, out=out) is out
    outs = (ember.empty(0, dtype=F64), ember.empty(0, dtype=ember.int32))
    assert ember.lu(a, out=outs)[0] is outs[0]
    assert_close(outs[0], lu)


# --- non-finite input -------------------------------------------------------------------------

NAN = float("nan")


@pytest.mark.parametrize("matrix, order", [
    ([[NAN, 1.0], [1.0, 1.0]], 1),
    ([[2.0, NAN], [NAN, 2.0]], 2),
    ([[4.0, 1.0, 0.0], [1.0, 4.0, 1.0], [0.0, 1.0, NAN]], 3),
])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_stops_at_a_nan_pivot(matrix, order, upper):
    # LAPACK's reference potrf (PyTorch's) fails where a pivot is NaN; OpenBLAS's carries on
    a = ember.tensor(matrix)
    with pytest.raises(L.LinAlgError, match=rf"the leading minor of order {order} is not "):
        L.cholesky(a, upper=upper)
    assert L.cholesky_ex(a, upper=upper).info.item() == order
    batch = ember.stack([ember.eye(2), ember.tensor([[1.0, 0.0], [0.0, NAN]]), -ember.eye(2)])
    assert L.cholesky_ex(batch).info.tolist() == [0, 2, 1]


@pytest.mark.parametrize("call", [
    L.svd, L.svdvals, L.pinv, L.matrix_rank, lambda a: L.matrix_norm(a, 2), L.cond,
    lambda a: ember.svd(a), lambda a: L.lstsq(a, ember.ones(2, 1), driver="gelsd"),
])
def test_svd_of_nan_input_raises_pytorchs_error(call):
    with pytest.raises(L.LinAlgError) as info:
        call(ember.tensor([[NAN, 1.0], [1.0, 1.0]]))
    assert str(info.value) == ("linalg.svd: The algorithm failed to converge because the input "
                               "matrix contained non-finite values.")


@pytest.mark.parametrize("call", [L.eig, L.eigvals])
def test_eig_of_non_finite_input_raises_pytorchs_error(call):
    for bad in (NAN, float("inf")):
        with pytest.raises(RuntimeError, match=r"^torch\.linalg\.eig: input tensor should not "
                                               r"contain infs or NaNs\.$"):
            call(ember.tensor([[bad, 1.0], [1.0, 1.0]]))


@pytest.mark.parametrize("nan_at", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_a_nan_anywhere_makes_lu_based_results_nan(nan_at):
    # LAPACK's getrf can pivot past a NaN in the first column and call the matrix singular
    a = ember.tensor([[2.0, 1.0], [1.0, 1.0]], dtype=ember.float64)
    a[nan_at] = float("nan")
    assert math.isnan(ember.linalg.det(a).item())
    sign, logabsdet = ember.linalg.slogdet(a)
    assert sign.item() == 0.0 and math.isnan(logabsdet.item())
    assert ember.linalg.inv(a).isnan().all()
    assert ember.linalg.solve(a, ember.ones(2, 1, dtype=ember.float64)).isnan().all()
    inverse, info = ember.linalg.inv_ex(a)
    assert inverse.isnan().all() and info.item() == 0
    assert ember.linalg.lu_factor_ex(a).info.item() == 0
    batch = ember.stack([a, ember.eye(2, dtype=ember.float64)])
    assert ember.linalg.det(batch)[1].item() == 1.0 and math.isnan(ember.linalg.det(batch)[0])
