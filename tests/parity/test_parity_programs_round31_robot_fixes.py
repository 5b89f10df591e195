"""What the robot-learning programs of round 31 (test_parity_programs_round31_robot*.py)
found, each pinned against PyTorch. Forward-mode AD through linalg.cholesky (func.jvp, jacfwd,
hessian, forward_ad duals) gave the tangent of the Hermitian part of dA, where PyTorch's
dL = L Phi(L^-1 dA L^-H) reads all of dA: hessian of a MultivariateNormal log-likelihood in
its covariance differed. Likewise linalg.eigh's eigenvector tangent (PyTorch's
V (V^H dA V / gaps) reads all of dA). A foreach scalar list holding a tensor was accepted
(PyTorch parses it as a tensor list and raises TypeError); MultiheadAttention was not importable
from nn.modules.activation, nor _ConvTransposeNd from nn.modules.conv, nor the Lazy layers from
the modules PyTorch defines them in."""

import importlib

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _spd(lib, n=3, seed=0, batch=()):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch + (n, n))
    a = a @ np.swapaxes(a, -1, -2) + 3 * np.eye(n)
    return lib.from_numpy(a), lib.from_numpy(rng.standard_normal(batch + (n, n)))


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_cholesky_jvp_reads_all_of_the_tangent(upper, batch):
    def run(lib):
        a, da = _spd(lib, batch=batch)
        return (lib.func.jvp(lambda a: lib.linalg.cholesky(a, upper=upper), (a,), (da,))[1],
                lib.func.jvp(lambda a: lib.linalg.cholesky_ex(a, upper=upper).L, (a,),
                             (da,))[1])
    for ours, theirs in zip(run(ember), run(torch)):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10, atol=1e-12)


def test_cholesky_forward_ad_dual():
    def run(lib):
        fwad = importlib.import_module(lib.__name__ + ".autograd.forward_ad")
        a, da = _spd(lib, seed=1)
        with fwad.dual_level():
            out = lib.linalg.cholesky(fwad.make_dual(a, da))
            return fwad.unpack_dual(out).tangent
    np.testing.assert_allclose(run(ember).numpy(), run(torch).numpy(), rtol=1e-10, atol=1e-12)


def test_hessian_through_cholesky():
    def run(lib):
        a, _ = _spd(lib, seed=2)
        b = lib.from_numpy(np.random.default_rng(3).standard_normal(3))

        def nll(a):
            factor = lib.linalg.cholesky(a)
            z = lib.linalg.solve_triangular(factor, b[:, None], upper=False)
            return 0.5 * z.square().sum() + factor.diagonal().log().sum()
        return (lib.func.hessian(nll)(a), lib.func.jacfwd(lib.func.grad(nll))(a),
                lib.func.jacrev(lib.func.grad(nll))(a))
    for ours, theirs in zip(run(ember), run(torch)):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-9, atol=1e-12)


def test_mvn_log_prob_hessian_in_the_covariance():
    def run(lib):
        x = lib.tensor([[0.3, -0.2], [0.1, 0.5]], dtype=lib.float64)
        cov = lib.tensor([[0.26, 0.1], [0.1, 0.26]], dtype=lib.float64)
        return lib.func.hessian(lambda s: lib.distributions.MultivariateNormal(
            lib.zeros(2, dtype=lib.float64), covariance_matrix=s).log_prob(x).mean())(cov)
    np.testing.assert_allclose(run(ember).numpy(), run(torch).numpy(), rtol=1e-9, atol=1e-12)


def test_cholesky_reverse_mode_still_symmetric():
    def run(lib):
        a, g = _spd(lib, seed=4)
        a.requires_grad_()
        return lib.autograd.grad(lib.linalg.cholesky(a), a, g)[0]
    ours, theirs = run(ember), run(torch)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours.numpy(), ours.numpy().T, rtol=1e-12, atol=1e-12)


def test_eigh_jvp_reads_all_of_the_tangent():
    def run(lib):
        a, da = _spd(lib, seed=5)
        (w, v), (dw, dv) = lib.func.jvp(lib.linalg.eigh, (a,), (da,))
        sign = np.sign(v.numpy()[0])        # (eigenvector signs: LAPACK's, either way)
        return dw.numpy(), dv.numpy() * sign, lib.func.jvp(lib.linalg.eigvalsh, (a,),
                                                            (da,))[1].numpy()
    for ours, theirs in zip(run(ember), run(torch)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)


def test_complex_hermitian_tangents_under_vmap():
    """Complex Hermitian inputs, batched by vmap: the cholesky tangent, the eigenvalues' and
    V^H dV (in modulus: its entries carry the eigenvectors' arbitrary phases)."""
    rng = np.random.default_rng(7)
    z = rng.standard_normal((3, 3, 3)) + 1j * rng.standard_normal((3, 3, 3))
    a = z @ np.conj(np.swapaxes(z, -1, -2)) + 3 * np.eye(3)
    da = rng.standard_normal((3, 3, 3)) + 1j * rng.standard_normal((3, 3, 3))

    def run(lib):
        def one(x, d):
            dl = lib.func.jvp(lib.linalg.cholesky, (x,), (d,))[1]
            (_, v), (dw, dv) = lib.func.jvp(lib.linalg.eigh, (x,), (d,))
            return dl, dw, (v.mH @ dv).abs()
        outs = lib.func.vmap(one)(lib.from_numpy(a), lib.from_numpy(da))
        return [o.resolve_conj().numpy() for o in outs]
    for ours, theirs in zip(run(ember), run(torch)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)


def test_upper_cholesky_tangent_of_a_complex_input_is_no_conjugate_view():
    def run(lib):
        a = lib.eye(3, dtype=lib.complex128) * 2
        _, tangent = lib.func.jvp(lambda x: lib.linalg.cholesky(x, upper=True), (a,),
                                  (lib.ones(3, 3, dtype=lib.complex128),))
        return tangent.is_conj(), tangent.numpy()
    (ours_conj, ours), (theirs_conj, theirs) = run(ember), run(torch)
    assert ours_conj is theirs_conj is False
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_hessian_through_eigh():
    def run(lib):
        a, _ = _spd(lib, seed=8)
        return lib.func.hessian(lambda x: (lib.linalg.eigh(x)[0] ** 3).sum() + (
            lib.linalg.eigh(x)[1][:, 0].abs() ** 4).sum())(a).numpy()
    np.testing.assert_allclose(run(ember), run(torch), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", ["_foreach_mul_", "_foreach_add", "_foreach_sub_",
                                  "_foreach_maximum", "_foreach_pow"])
@pytest.mark.parametrize("other", [[0.5, "t"], ["t", 0.5], ["t", 1], ["t", True]])
def test_foreach_number_in_a_tensor_list_raises(name, other):
    def run(lib):
        operand = [lib.tensor(2.0) if o == "t" else o for o in other]
        with pytest.raises(TypeError) as info:
            getattr(lib, name)([lib.ones(2), lib.ones(2)], operand)
        return str(info.value)
    assert run(ember) == run(torch)


def test_foreach_lerp_number_in_weight_list_raises():
    def run(lib):
        a = [lib.ones(2), lib.ones(2)]
        with pytest.raises(TypeError) as info:
            lib._foreach_lerp_(a, a, [0.5, lib.tensor(1.0)])
        return str(info.value)
    assert run(ember) == run(torch)


@pytest.mark.parametrize("name", ["_foreach_addcmul", "_foreach_addcdiv_"])
@pytest.mark.parametrize("where", ["tensor2", "values"])
def test_foreach_pointwise_tensor_in_a_number_list_raises(name, where):
    def run(lib):
        a = [lib.ones(2), lib.ones(2)]
        mixed = [lib.ones(2), 0.5]
        with pytest.raises(TypeError) as info:
            getattr(lib, name)(a, a, mixed, 1.0) if where == "tensor2" else \
                getattr(lib, name)(a, a, a, mixed)
        return str(info.value)
    assert run(ember) == run(torch)


@pytest.mark.parametrize("module, name", [
    ("activation", "MultiheadAttention"), ("activation", "NonDynamicallyQuantizableLinear"),
    ("conv", "_ConvTransposeNd"), ("conv", "LazyConv2d"), ("conv", "LazyConvTranspose1d"),
    ("linear", "LazyLinear"), ("batchnorm", "LazyBatchNorm1d"),
    ("instancenorm", "LazyInstanceNorm3d")])
def test_classes_live_where_pytorch_defines_them(module, name):
    ours = getattr(importlib.import_module(f"ember.nn.modules.{module}"), name)
    assert getattr(importlib.import_module(f"torch.nn.modules.{module}"), name)
    public = getattr(ember.nn, name, None)
    assert public is None or public is ours
    if name == "_ConvTransposeNd":
        assert isinstance(ember.nn.ConvTranspose2d(2, 2, 3), ours)
        assert not isinstance(ember.nn.Conv2d(2, 2, 3), ours)
