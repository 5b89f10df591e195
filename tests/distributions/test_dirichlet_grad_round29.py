"""``_dirichlet_grad`` and the reparameterized gradient of Dirichlet and Beta samples, checked
without torch: against central differences of SciPy's regularized incomplete beta function
(x's marginal is Beta(alpha, total - alpha); the other concentrations are held)."""

import numpy as np
import pytest

import ember
from tests.ops.opdb.gamma_sampling import _dirichlet_grad_ref as _reference


def _grad(x, alpha, total, dtype=ember.float64):
    return ember._dirichlet_grad(*(ember.tensor(np.asarray(v), dtype=dtype)
                                   for v in (x, alpha, total)))


def test_known_point():
    # torch gives [0.2284, 0.3183] (its approximation agrees to about 1e-4)
    mine = _grad([0.2, 0.5], [1.5, 2.0], [3.5, 3.5]).numpy()
    np.testing.assert_allclose(mine, [0.22839695, 0.31828225], rtol=1e-6)


@pytest.mark.parametrize("low,high", [(0.1, 1.0), (0.5, 20.0), (0.05, 100.0), (10.0, 500.0)])
def test_matches_the_beta_cdf_derivative(low, high):
    rng = np.random.default_rng(int(low * 100 + high))
    alpha, beta = rng.uniform(low, high, 300), rng.uniform(low, high, 300)
    x = np.clip(rng.beta(alpha, beta), 1e-9, 1 - 1e-9)
    expected = _reference(x, alpha, alpha + beta)
    np.testing.assert_allclose(_grad(x, alpha, alpha + beta).numpy(), expected, rtol=1e-5,
                               atol=1e-12)


def test_float32_and_broadcasting():
    x = np.array([[0.1, 0.6, 0.9], [0.3, 0.4, 0.5]])
    alpha = np.array([0.7, 2.0, 5.0])
    mine = _grad(x, alpha, np.array(9.0), ember.float32)
    assert mine.dtype == ember.float32 and mine.shape == (2, 3)
    np.testing.assert_allclose(mine.numpy(), _reference(x, alpha, 9.0), rtol=1e-5)


def test_outside_the_support():
    mine = _grad([0.0, -1.0, float("nan")], [2.0, 2.0, 2.0], [3.0, 3.0, 3.0]).numpy()
    assert mine[0] == 0 and mine[1] == 0 and np.isnan(mine[2])


def test_errors():
    f32, f64 = ember.ones(2), ember.ones(2, dtype=ember.float64)
    with pytest.raises(RuntimeError, match="^Found dtype Float but expected Double$"):
        ember._dirichlet_grad(f64, f32, f64)
    with pytest.raises(RuntimeError, match="^Found dtype Double but expected Float$"):
        ember._dirichlet_grad(f32, f32, f64)
    with pytest.raises(NotImplementedError,
                       match="^\"_dirichlet_grad_cpu\" not implemented for 'Half'$"):
        ember._dirichlet_grad(*(ember.ones(2, dtype=ember.float16),) * 3)


def test_backward_is_not_implemented():
    alpha = ember.tensor([1.5, 2.0], requires_grad=True)
    out = ember._dirichlet_grad(ember.tensor([0.2, 0.5]), alpha, ember.tensor([3.5, 3.5]))
    assert out.grad_fn.name() == "torch::autograd::NotImplemented"
    with pytest.raises(RuntimeError, match="^derivative for aten::_dirichlet_grad is not "
                                           "implemented$"):
        out.sum().backward()


def test_dirichlet_rsample_gradient():
    ember.manual_seed(3)
    c = ember.tensor([1.5, 2.0, 0.7], dtype=ember.float64, requires_grad=True)
    w = np.array([1.0, -2.0, 0.5])
    x = ember.distributions.Dirichlet(c).rsample((5,))
    assert type(x.grad_fn).__name__ == "_DirichletBackward"
    (x * ember.tensor(w)).sum().backward()
    xs = x.detach().numpy()
    d = _reference(xs, c.detach().numpy(), 4.2)
    expected = (d * (w - (xs * w).sum(-1, keepdims=True))).sum(0)
    np.testing.assert_allclose(c.grad.numpy(), expected, rtol=1e-5)


def test_dirichlet_rsample_gradient_is_unbiased():
    # E[d(w . x)/d alpha] = d(w . alpha / sum alpha)/d alpha; 40000 draws land within
    # 1e-3 of it over seeds 0-5
    ember.manual_seed(0)
    alpha = np.array([0.8, 2.0, 3.5])
    w = np.array([1.0, -2.0, 0.5])
    c = ember.tensor(alpha, requires_grad=True)
    x = ember.distributions.Dirichlet(c).rsample((40000,))
    (x * ember.tensor(w)).sum().div(40000).backward()
    total = alpha.sum()
    expected = (w - (w * alpha).sum() / total) / total
    np.testing.assert_allclose(c.grad.numpy(), expected, atol=3e-3)


def test_beta_rsample_gradient():
    ember.manual_seed(5)
    c1 = ember.tensor([1.5, 0.7], dtype=ember.float64, requires_grad=True)
    c0 = ember.tensor([2.0, 3.0], dtype=ember.float64, requires_grad=True)
    x = ember.distributions.Beta(c1, c0).rsample()
    x.sum().backward()
    xs, a, b = x.detach().numpy(), c1.detach().numpy(), c0.detach().numpy()
    np.testing.assert_allclose(c1.grad.numpy(), _reference(xs, a, a + b) * (1 - xs), rtol=1e-5)
    np.testing.assert_allclose(c0.grad.numpy(), -_reference(1 - xs, b, a + b) * xs, rtol=1e-5)
