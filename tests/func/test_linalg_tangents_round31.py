"""Forward-mode tangents of linalg.cholesky and linalg.eigh read all of dA, as PyTorch's
formulas do (not only its Hermitian part, which reverse mode sees): checked against those
formulas written in NumPy, and reverse mode still against the symmetric gradient."""

import numpy as np
import pytest

import ember


def _spd(seed, batch=()):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch + (4, 4))
    return a @ np.swapaxes(a, -1, -2) + 3 * np.eye(4), rng.standard_normal(batch + (4, 4))


def _cholesky_tangent(a, da):
    """dL = L Phi(L^-1 dA L^-T), Phi: the lower triangle with its diagonal halved."""
    factor = np.linalg.cholesky(a)
    inv = np.linalg.inv(factor)
    x = inv @ da @ np.swapaxes(inv, -1, -2)
    phi = np.tril(x) - 0.5 * np.einsum("...ii->...i", x)[..., None] * np.eye(a.shape[-1])
    return factor @ phi


@pytest.mark.parametrize("batch", [(), (3,)])
def test_cholesky_jvp_matches_the_formula(batch):
    a, da = _spd(0, batch)
    _, tangent = ember.func.jvp(ember.linalg.cholesky, (ember.from_numpy(a),),
                                (ember.from_numpy(da),))
    np.testing.assert_allclose(tangent.numpy(), _cholesky_tangent(a, da), rtol=1e-10,
                               atol=1e-12)
    _, upper = ember.func.jvp(lambda x: ember.linalg.cholesky(x, upper=True),
                              (ember.from_numpy(a),), (ember.from_numpy(da),))
    np.testing.assert_allclose(upper.numpy(), np.swapaxes(_cholesky_tangent(a, da), -1, -2),
                               rtol=1e-10, atol=1e-12)


def test_cholesky_jvp_of_a_symmetric_tangent_is_unchanged():
    a, da = _spd(1)
    sym = da + da.T
    _, tangent = ember.func.jvp(ember.linalg.cholesky, (ember.from_numpy(a),),
                                (ember.from_numpy(sym),))
    eps = 1e-6
    numeric = (np.linalg.cholesky(a + eps * sym) - np.linalg.cholesky(a - eps * sym)) / (2 * eps)
    np.testing.assert_allclose(tangent.numpy(), numeric, rtol=1e-6, atol=1e-8)


def test_cholesky_gradient_is_still_symmetric():
    a, g = _spd(2)
    x = ember.from_numpy(a).requires_grad_()
    grad, = ember.autograd.grad(ember.linalg.cholesky(x), x, ember.from_numpy(g))
    np.testing.assert_allclose(grad.numpy(), grad.numpy().T, rtol=1e-12, atol=1e-12)


def test_eigh_jvp_matches_the_formula():
    a, da = _spd(3)
    (w, v), (dw, dv) = ember.func.jvp(ember.linalg.eigh, (ember.from_numpy(a),),
                                      (ember.from_numpy(da),))
    w, v = np.linalg.eigh(a)
    sign = np.sign(v[0]) * np.sign(ember.linalg.eigh(ember.from_numpy(a))[1].numpy()[0])
    dp = v.T @ da @ v
    gaps = w[None, :] - w[:, None]
    np.fill_diagonal(gaps, 1.0)
    expected = v @ (dp / gaps * (1 - np.eye(4)))
    np.testing.assert_allclose(dw.numpy(), np.diag(dp), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dv.numpy() * sign, expected, rtol=1e-9, atol=1e-12)
