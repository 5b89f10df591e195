"""The gamma group (Gamma, Chi2, Beta, Dirichlet, StudentT, FisherSnedecor, InverseGamma,
VonMises, ContinuousBernoulli), its KL divergences and the sampling primitives
``_standard_gamma`` (with its reparameterized gradient) and ``_sample_dirichlet``: errors,
special values, closed forms, sample moments, gradients, KL against Monte Carlo, expand."""

import math

import numpy as np
import pytest
import scipy.special as sp

import ember
from ember.distributions import (Beta, Chi2, ContinuousBernoulli, Dirichlet, Exponential,
                                 FisherSnedecor, Gamma, Gumbel, InverseGamma, Normal, Pareto,
                                 StudentT, Uniform, VonMises, kl_divergence)
from ember.ops.gamma_sampling import _standard_gamma_grad


def _t(values, grad=False, dtype=ember.float64):
    return ember.tensor(values, dtype=dtype, requires_grad=grad)


def _np(tensor):
    return np.asarray(tensor.detach().numpy())


@pytest.fixture(autouse=True)
def _seeded():
    ember.manual_seed(0)


# --- _standard_gamma and its gradient ---------------------------------------------------------

def _quantile_slope(alpha, x):
    """dx/dalpha at the fixed quantile u = P(alpha, x), by a central difference of SciPy's
    gammaincinv."""
    u = sp.gammainc(alpha, x)
    h = 1e-5 * alpha
    return (sp.gammaincinv(alpha + h, u) - sp.gammaincinv(alpha - h, u)) / (2 * h)


@pytest.mark.parametrize("alpha", [0.05, 0.3, 1.0, 2.5, 10.0, 50.0])
def test_standard_gamma_gradient_is_the_quantile_derivative(alpha):
    concentration = _t([alpha] * 40, grad=True)
    x = ember._standard_gamma(concentration)
    grad, = ember.autograd.grad(x.sum(), concentration)
    xs = _np(x)
    keep = xs > 1e-250              # where the quantile's difference is still resolvable
    expected = _quantile_slope(np.full(keep.sum(), alpha), xs[keep])
    np.testing.assert_allclose(_np(grad)[keep], expected, rtol=1e-5)
    assert keep.sum() >= 20


def test_standard_gamma_grad_in_float32_follows_float64():
    alpha = _t([0.2, 1.0, 3.0, 40.0])
    x = _t([0.01, 1.5, 2.0, 45.0])
    exact = _standard_gamma_grad(alpha, x)
    np.testing.assert_allclose(_np(exact), _quantile_slope(_np(alpha), _np(x)), rtol=1e-6)
    single = _standard_gamma_grad(alpha.float(), x.float())
    assert single.dtype == ember.float32
    np.testing.assert_allclose(_np(single), _np(exact), rtol=1e-5)
    # a tiny x: the series' first term -(x / alpha) (log x - digamma(alpha + 1)) is all
    tiny = _standard_gamma_grad(_t([1e-3]), _t([1e-200])).item()
    assert tiny == pytest.approx(-1e-197 * (math.log(1e-200) - sp.digamma(1.001)), rel=1e-12)
    # Gamma(1, 1) is exponential: x = -log(1 - u), and at x = 1,
    # dx/dalpha = -(dP/dalpha) / f = e (gamma_E + E1(1)) ... = -sum_n (log 1 - psi(n + 2)) / (n+1)!
    series = sum(sp.digamma(n + 2) / math.factorial(n + 1) for n in range(30))
    assert _standard_gamma_grad(_t([1.0]), _t([1.0])).item() == pytest.approx(series, rel=1e-9)


def test_standard_gamma_grad_special_values():
    alpha = _t([2.0, 2.0, 0.0, -1.0, math.nan, 2.0, 2.0])
    x = _t([0.0, -1.0, 1.0, 1.0, 1.0, math.inf, math.nan])
    got = _np(_standard_gamma_grad(alpha, x))
    np.testing.assert_array_equal(got[:2], [0.0, 0.0])
    assert np.isnan(got[2:]).all()


def test_standard_gamma_second_derivative_is_not_implemented():
    alpha = _t([1.5, 3.0], grad=True)
    x = ember._standard_gamma(alpha)
    assert type(x.grad_fn).__name__ == "StandardGammaBackward0"
    grad, = ember.autograd.grad(x.sum(), alpha, create_graph=True)
    with pytest.raises(NotImplementedError,
                       match="the derivative for '_standard_gamma_grad' is not implemented."):
        ember.autograd.grad(grad.sum(), alpha)


@pytest.mark.parametrize("alpha", [0.05, 0.5, 5.0, 50.0])
def test_standard_gamma_moments(alpha):
    n = 40000
    x = _np(ember._standard_gamma(_t([alpha] * n)))
    # mean alpha, variance alpha; the variance of the sample variance is 6 alpha^3 + ...
    assert abs(x.mean() - alpha) < 6 * math.sqrt(alpha / n)
    fourth = 3 * alpha ** 2 + 6 * alpha
    assert abs(x.var() - alpha) < 6 * math.sqrt((fourth - alpha ** 2) / n)


def test_standard_gamma_clamps_to_tiny_and_checks_dtypes():
    tiny32 = ember.finfo(ember.float32).tiny
    x = ember._standard_gamma(ember.tensor([1e-4] * 200 + [0.0, -1.0, math.nan]))
    assert float(x.min()) >= tiny32
    np.testing.assert_array_equal(_np(x)[-3:], [tiny32] * 3)
    assert ember._standard_gamma(ember.tensor([math.inf])).item() == math.inf
    assert ember._standard_gamma(ember.ones(2, 0)).shape == (2, 0)
    assert ember._standard_gamma(ember.tensor(3.0)).shape == ()
    with pytest.raises(NotImplementedError, match="\"gamma_cpu\" not implemented for 'Long'"):
        ember._standard_gamma(ember.tensor([1, 2]))
    with pytest.raises(NotImplementedError, match="\"gamma_cpu\" not implemented for 'Half'"):
        ember._standard_gamma(ember.tensor([1.0], dtype=ember.float16))


def test_standard_gamma_generator_reproduces():
    a = ember._standard_gamma(ember.ones(5), generator=ember.Generator().manual_seed(3))
    b = ember._standard_gamma(ember.ones(5), generator=ember.Generator().manual_seed(3))
    assert ember.equal(a, b)


def test_sample_dirichlet():
    alpha = _t([[0.5, 1.0, 2.5]] * 20000)
    x = ember._sample_dirichlet(alpha)
    assert x.shape == alpha.shape and x.dtype == ember.float64
    np.testing.assert_allclose(_np(x.sum(-1)), 1.0, rtol=1e-12)
    # mean alpha / sum, variance a (s - a) / (s^2 (s + 1)) with s = 4
    mean = np.array([0.5, 1.0, 2.5]) / 4
    var = np.array([0.5, 1.0, 2.5]) * (4 - np.array([0.5, 1.0, 2.5])) / (16 * 5)
    assert (np.abs(_np(x).mean(0) - mean) < 6 * np.sqrt(var / 20000)).all()
    # as in PyTorch, a NotImplemented node that refuses backward
    assert type(ember._sample_dirichlet(_t([1.0, 2.0], grad=True)).grad_fn).__name__ \
        == "NotImplemented"
    assert ember._sample_dirichlet(ember.tensor(2.0)).item() == 1.0
    # both gammas round to the tiny value: an even split, as in PyTorch
    np.testing.assert_array_equal(_np(ember._sample_dirichlet(ember.tensor([1e-30, 1e-30]))),
                                  [0.5, 0.5])
    with pytest.raises(NotImplementedError, match="\"dirichlet\" not implemented for 'Long'"):
        ember._sample_dirichlet(ember.tensor([1, 2]))


# --- Gamma and Chi2 ---------------------------------------------------------------------------

def test_gamma_closed_forms():
    d = Gamma(_t([2.0, 1.0]), _t([3.0, 0.5]))
    x = _t([1.0, 2.0])
    # Gamma(2, 3): 9 x e^(-3x); Gamma(1, 1/2): exponential of rate 1/2
    np.testing.assert_allclose(_np(d.log_prob(x)), [math.log(9) - 3, math.log(0.5) - 1.0])
    np.testing.assert_allclose(_np(d.cdf(x)), [1 - 4 * math.exp(-3), 1 - math.exp(-1)])
    np.testing.assert_allclose(_np(d.mean), [2 / 3, 2.0])
    np.testing.assert_allclose(_np(d.variance), [2 / 9, 4.0])
    np.testing.assert_allclose(_np(d.mode), [1 / 3, 0.0])
    np.testing.assert_allclose(_np(d.entropy()[1:]), [1 - math.log(0.5)])
    # the generic entropy of the exponential family agrees with the closed form
    generic = super(Gamma, d).entropy()
    np.testing.assert_allclose(_np(generic), _np(d.entropy()), rtol=1e-10)
    assert Gamma(1.0, 2.0).log_prob(0.5).item() == pytest.approx(math.log(2) - 1)


def test_gamma_rsample_gradients():
    c, r = _t([0.4, 3.0], grad=True), _t([2.0, 0.5], grad=True)
    x = Gamma(c, r).rsample((20000,))
    gc, gr = ember.autograd.grad(x.sum(0).sum(), [c, r])
    # x = g / rate: dx/drate = -x / rate exactly; E[dx/dc] = dE[x]/dc = 1 / rate
    np.testing.assert_allclose(_np(gr), -_np(x).sum(0) / _np(r), rtol=1e-10)
    np.testing.assert_allclose(_np(gc) / 20000, 1 / _np(r), rtol=0.05)


def test_gamma_errors_and_support():
    with pytest.raises(ValueError, match="Expected parameter concentration"):
        Gamma(-1.0, 1.0)
    with pytest.raises(ValueError, match="Expected parameter rate"):
        Gamma(_t([1.0]), _t([0.0]))
    with pytest.raises(ValueError, match="to be within the support"):
        Gamma(2.0, 1.0).log_prob(ember.tensor(-1.0))
    with pytest.raises(NotImplementedError):
        Gamma(2.0, 1.0).icdf(ember.tensor(0.5))
    assert float(Gamma(_t([1e-3]), 1.0).sample((500,)).min()) > 0


def test_chi2_is_gamma():
    d = Chi2(_t([1.0, 4.0]))
    assert isinstance(d, Gamma) and repr(d) == "Chi2()"
    np.testing.assert_allclose(_np(d.df), [1.0, 4.0])
    x = _t([0.7, 3.0])
    g = Gamma(_t([0.5, 2.0]), 0.5)
    np.testing.assert_allclose(_np(d.log_prob(x)), _np(g.log_prob(x)))
    # chi-squared with 4 degrees of freedom: x e^(-x/2) / 4
    assert d.log_prob(x)[1].item() == pytest.approx(math.log(3.0 / 4) - 1.5)
    np.testing.assert_allclose(_np(d.mean), [1.0, 4.0])
    np.testing.assert_allclose(_np(d.variance), [2.0, 8.0])
    e = d.expand((3, 2))
    assert type(e) is Chi2 and e.batch_shape == (3, 2)
    with pytest.raises(ValueError, match="Expected parameter df"):
        Chi2(-1.0)


# --- Beta and Dirichlet -----------------------------------------------------------------------

def test_beta_closed_forms():
    d = Beta(_t([2.0, 1.0]), _t([3.0, 1.0]))
    x = _t([0.4, 0.3])
    # Beta(2, 3) density 12 x (1 - x)^2; Beta(1, 1) uniform
    np.testing.assert_allclose(_np(d.log_prob(x)), [math.log(12 * 0.4 * 0.36), 0.0],
                               atol=1e-12)
    np.testing.assert_allclose(_np(d.mean), [0.4, 0.5])
    np.testing.assert_allclose(_np(d.variance), [0.04, 1 / 12])
    np.testing.assert_allclose(_np(d.mode[:1]), [1 / 3])
    np.testing.assert_allclose(_np(d.entropy()[1:]), [0.0], atol=1e-12)
    np.testing.assert_allclose(_np(d.concentration1), [2.0, 1.0])
    np.testing.assert_allclose(_np(d.concentration0), [3.0, 1.0])
    assert Beta(2, 3).concentration1.dtype == ember.float32
    # both shapes below 1: the first vertex, as PyTorch
    assert Beta(0.5, 0.4).mode.item() == 1.0


def test_beta_rsample_gradient_and_errors():
    a, b = _t([2.0], grad=True), _t([3.0], grad=True)
    x = Beta(a, b).rsample((20000,))
    ga, gb = ember.autograd.grad(x.sum(), [a, b])
    # d/da a / (a + b) = b / (a + b)^2 = 0.12; d/db = -a / (a + b)^2 = -0.08
    np.testing.assert_allclose(_np(ga) / 20000, [0.12], rtol=0.05)
    np.testing.assert_allclose(_np(gb) / 20000, [-0.08], rtol=0.05)
    with pytest.raises(ValueError, match="of distribution Dirichlet"):
        Beta(-1.0, 2.0)
    with pytest.raises(ValueError, match="to be within the support"):
        Beta(2.0, 2.0).log_prob(ember.tensor(1.5))


def test_dirichlet():
    alpha = _t([[1.0, 2.0, 3.0]], grad=True)
    d = Dirichlet(alpha)
    assert d.batch_shape == (1,) and d.event_shape == (3,)
    # Dirichlet(1, 2, 3): Gamma(6) / (Gamma(2) Gamma(3)) x2 x3^2 = 60 x2 x3^2
    x = _t([0.2, 0.3, 0.5])
    assert d.log_prob(x).item() == pytest.approx(math.log(60 * 0.3 * 0.25))
    np.testing.assert_allclose(_np(d.mean), [[1 / 6, 1 / 3, 1 / 2]])
    np.testing.assert_allclose(_np(d.mode), [[0.0, 1 / 3, 2 / 3]])
    np.testing.assert_allclose(_np(d.variance), [[5 / 252, 8 / 252, 9 / 252]])
    samples = d.rsample((20000,))
    np.testing.assert_allclose(_np(samples.sum(-1)), 1.0, rtol=1e-12)
    # each row sums to one: the gradient of the sum is zero; E[dx_0/dalpha_0] = 5/36
    grad, = ember.autograd.grad(samples.sum(), alpha, retain_graph=True)
    np.testing.assert_allclose(_np(grad), 0.0, atol=1e-8)
    grad0, = ember.autograd.grad(samples[..., 0].sum(), alpha)
    np.testing.assert_allclose(_np(grad0)[0, 0] / 20000, 5 / 36, rtol=0.05)
    with pytest.raises(ValueError, match="`concentration` parameter must be at least "
                                         "one-dimensional."):
        Dirichlet(ember.tensor(1.0))
    with pytest.raises(ValueError, match="Simplex"):
        d.log_prob(_t([0.2, 0.3, 0.4]))
    e = d.expand((4, 1))
    assert e.batch_shape == (4, 1) and e.concentration.shape == (4, 1, 3)


# --- StudentT, FisherSnedecor, InverseGamma ---------------------------------------------------

def test_student_t_special_cases():
    # one degree of freedom: the Cauchy distribution
    d = StudentT(_t([1.0]), _t([0.5]), _t([2.0]))
    x = _t([1.5])
    assert d.log_prob(x).item() == pytest.approx(-math.log(math.pi * 2 * (1 + 0.25)))
    assert d.entropy().item() == pytest.approx(math.log(4 * math.pi * 2))
    many = StudentT(_t([0.8, 1.5, 5.0]), 1.0, 2.0)
    mean, var = _np(many.mean), _np(many.variance)
    assert math.isnan(mean[0]) and mean[1:].tolist() == [1.0, 1.0]
    assert math.isnan(var[0]) and var[1] == math.inf and var[2] == pytest.approx(4 * 5 / 3)
    with pytest.raises(ValueError, match="distribution Chi2"):
        StudentT(-1.0)
    with pytest.raises(ValueError, match="Expected parameter scale"):
        StudentT(1.0, 0.0, -1.0)


def test_student_t_moments_and_gradient():
    df, scale = _t([6.0], grad=True), _t([2.0], grad=True)
    x = StudentT(df, 1.0, scale).rsample((40000,))
    values = _np(x)
    assert abs(values.mean() - 1.0) < 6 * math.sqrt(4 * 1.5 / 40000)
    # x - loc is proportional to scale: dx/dscale = (x - loc) / scale
    _, g = ember.autograd.grad(x.sum(), [df, scale])
    np.testing.assert_allclose(_np(g), (values - 1.0).sum() / 2.0, rtol=1e-8)


def test_fisher_snedecor():
    d = FisherSnedecor(_t([4.0, 2.0, 5.0]), _t([6.0, 3.0, 12.0]))
    # F(2, 3): (2/3) (1 + 2x/3)^(-5/2) / B(1, 3/2), B(1, 3/2) = 2/3
    assert d.log_prob(_t([1.0, 1.0, 1.0]))[1].item() == pytest.approx(-2.5 * math.log(5 / 3))
    np.testing.assert_allclose(_np(d.mean), [1.5, 3.0, 1.2])
    mode = _np(d.mode)
    assert mode[0] == pytest.approx(0.5 * 6 / 8) and math.isnan(mode[1])     # df1 <= 2
    var = _np(d.variance)
    assert var[0] == pytest.approx(2 * 36 * 8 / (4 * 16 * 2)) and math.isnan(var[1])
    assert var[2] == pytest.approx(2 * 144 * 15 / (5 * 100 * 8))
    samples = _np(FisherSnedecor(5.0, 12.0).sample((40000,))).astype(np.float64)
    assert abs(samples.mean() - 1.2) < 6 * math.sqrt(var[2] / 40000)
    with pytest.raises(ValueError, match="distribution Gamma"):
        FisherSnedecor(1.0, -1.0)


def test_inverse_gamma():
    d = InverseGamma(_t([3.0, 1.5]), _t([2.0, 1.0]))
    x = _t([0.5, 2.0])
    # rate^c x^(-c-1) e^(-rate/x) / Gamma(c)
    expected = [3 * math.log(2) - 4 * math.log(0.5) - 4 - math.lgamma(3),
                -2.5 * math.log(2) - 0.5 - math.lgamma(1.5)]
    np.testing.assert_allclose(_np(d.log_prob(x)), expected)
    np.testing.assert_allclose(_np(d.cdf(x)), sp.gammaincc([3.0, 1.5], [4.0, 0.5]))
    np.testing.assert_allclose(_np(d.mean), [1.0, 2.0])
    np.testing.assert_allclose(_np(d.mode), [0.5, 0.4])
    assert _np(d.variance).tolist() == [1.0, math.inf]
    np.testing.assert_allclose(_np(d.concentration), [3.0, 1.5])
    samples = _np(InverseGamma(6.0, 2.0).sample((40000,))).astype(np.float64)
    assert abs(samples.mean() - 0.4) < 6 * math.sqrt(0.04 / 4 / 40000)
    e = d.expand((2, 2))
    assert type(e) is InverseGamma and e.batch_shape == (2, 2)
    with pytest.raises(ValueError, match="distribution Gamma"):
        InverseGamma(-1.0, 1.0)


# --- VonMises ---------------------------------------------------------------------------------

def test_von_mises_density_and_samples():
    loc, kappa = _t([0.5, -3.0, 1.0]), _t([2.0, 0.1, 50.0])
    d = VonMises(loc, kappa)
    grid = _t(np.linspace(-math.pi, math.pi, 4001)).unsqueeze(-1)
    density = _np(d.log_prob(grid).exp())
    np.testing.assert_allclose(np.trapezoid(density, dx=2 * math.pi / 4000, axis=0), 1.0,
                               rtol=1e-6)
    n = 40000
    samples = d.sample((n,))
    assert samples.dtype == ember.float64 and samples.shape == (n, 3)
    values = _np(samples)
    assert values.min() >= -math.pi and values.max() < math.pi
    # circular moments: E[cos(x - loc)] = I1/I0 = 1 - variance, E[sin(x - loc)] = 0
    centered = values - _np(loc)
    r = 1 - _np(d.variance)
    np.testing.assert_allclose(r, sp.i1(_np(kappa)) / sp.i0(_np(kappa)), rtol=1e-10)
    assert (np.abs(np.cos(centered).mean(0) - r) < 6 / math.sqrt(n)).all()
    assert (np.abs(np.sin(centered).mean(0)) < 6 / math.sqrt(n)).all()
    with pytest.raises(NotImplementedError):
        d.rsample()
    with pytest.raises(ValueError, match="Expected parameter concentration"):
        VonMises(0.0, -1.0)
    assert VonMises(0.0, 1.0).sample((3,)).dtype == ember.float32


# --- ContinuousBernoulli ----------------------------------------------------------------------

def test_continuous_bernoulli_errors():
    for args in ({}, {"probs": 0.5, "logits": 0.0}):
        with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, "
                                             "but not both."):
            ContinuousBernoulli(**args)
    with pytest.raises(ValueError, match="The parameter probs has invalid values"):
        ContinuousBernoulli(1.5, validate_args=True)
    # without explicit validation the probabilities are clamped into (0, 1)
    assert ContinuousBernoulli(1.5).probs.item() == pytest.approx(1 - 2 ** -23)


@pytest.mark.parametrize("probs", [0.05, 0.3, 0.4989, 0.4995, 0.5, 0.5008, 0.9])
def test_continuous_bernoulli_normalizes(probs):
    d = ContinuousBernoulli(_t([probs]))
    grid = _t(np.linspace(0.0, 1.0, 20001)).unsqueeze(-1)
    density = _np(d.log_prob(grid).exp())[:, 0]
    assert np.trapezoid(density, dx=1 / 20000) == pytest.approx(1.0, rel=1e-8)
    xs = np.linspace(0.0, 1.0, 20001)
    assert np.trapezoid(xs * density, dx=1 / 20000) == pytest.approx(d.mean.item(), rel=1e-8)
    var = np.trapezoid((xs - d.mean.item()) ** 2 * density, dx=1 / 20000)
    assert var == pytest.approx(d.variance.item(), rel=1e-7)
    x = _t([0.15, 0.7])
    cdf = d.cdf(x.unsqueeze(-1))
    np.testing.assert_allclose(_np(d.icdf(cdf))[:, 0], _np(x), rtol=1e-9)
    entropy = -np.trapezoid(density * np.log(density), dx=1 / 20000)
    assert d.entropy().item() == pytest.approx(entropy, abs=1e-8)


def test_continuous_bernoulli_logits_and_rsample():
    d = ContinuousBernoulli(logits=_t([0.0005, -2.0]))
    np.testing.assert_allclose(_np(d.probs), sp.expit([0.0005, -2.0]))
    # the exponential-family log normalizer log((e^x - 1) / x) and its Taylor series agree
    x = _t([1e-4, 0.0009, 0.3])
    np.testing.assert_allclose(_np(d._log_normalizer(x)),
                               np.log(np.expm1(_np(x)) / _np(x)), rtol=1e-9)
    generic = super(ContinuousBernoulli, d).entropy()
    np.testing.assert_allclose(_np(generic), _np(d.entropy()), rtol=1e-6, atol=1e-9)
    probs = _t([0.2], grad=True)
    u_free = ContinuousBernoulli(probs).rsample((1000,))
    grad, = ember.autograd.grad(u_free.sum(), probs)
    assert bool(ember.isfinite(grad).all()) and grad.item() > 0   # samples grow with probs
    assert ContinuousBernoulli(0.3).batch_shape == ()


# --- KL divergences ---------------------------------------------------------------------------

KL_PAIRS = [
    (lambda: Gamma(_t([0.7, 3.0]), _t([1.5, 0.4])), lambda: Gamma(_t([1.2, 2.0]), _t([1.0, 0.5]))),
    (lambda: Chi2(_t([3.0])), lambda: Gamma(_t([1.0]), _t([0.3]))),
    (lambda: Beta(_t([2.0, 0.7]), _t([3.0, 1.5])), lambda: Beta(_t([1.0, 2.0]), _t([1.5, 2.5]))),
    (lambda: Dirichlet(_t([[1.5, 0.8, 2.5]])), lambda: Dirichlet(_t([[1.0, 2.0, 1.0]]))),
    (lambda: ContinuousBernoulli(_t([0.2, 0.5, 0.9])),
     lambda: ContinuousBernoulli(_t([0.6, 0.3, 0.5]))),
    (lambda: Beta(_t([2.0]), _t([3.0])), lambda: ContinuousBernoulli(_t([0.7]))),
    (lambda: Beta(_t([2.0]), _t([3.0])), lambda: Exponential(_t([2.0]))),
    (lambda: Beta(_t([2.0]), _t([3.0])), lambda: Gamma(_t([2.0]), _t([3.0]))),
    (lambda: Beta(_t([2.0]), _t([3.0])), lambda: Normal(_t([0.3]), _t([0.5]))),
    (lambda: Beta(_t([2.0]), _t([3.0])), lambda: Uniform(_t([-0.5]), _t([1.5]))),
    (lambda: ContinuousBernoulli(_t([0.3])), lambda: Exponential(_t([1.5]))),
    (lambda: ContinuousBernoulli(_t([0.3])), lambda: Normal(_t([0.6]), _t([0.4]))),
    (lambda: ContinuousBernoulli(_t([0.3])), lambda: Uniform(_t([-0.5]), _t([1.5]))),
    (lambda: Gamma(_t([2.5]), _t([1.5])), lambda: Exponential(_t([0.8]))),
    (lambda: Gamma(_t([2.5]), _t([1.5])), lambda: Gumbel(_t([0.3]), _t([0.7]))),
    (lambda: Gamma(_t([2.5]), _t([1.5])), lambda: Normal(_t([1.0]), _t([2.0]))),
]


@pytest.mark.parametrize("make_p,make_q", KL_PAIRS)
def test_kl_matches_monte_carlo(make_p, make_q):
    p, q = make_p(), make_q()
    n = 100000
    x = p.sample((n,))
    diff = _np(p.log_prob(x) - q.log_prob(x)).astype(np.float64)
    kl = _np(kl_divergence(p, q))
    assert kl.shape == tuple(p.batch_shape)
    assert (np.abs(diff.mean(0) - kl) <= 6 * diff.std(0) / math.sqrt(n) + 1e-9).all()


def test_kl_infinite_pairs():
    gamma, beta = Gamma(_t([2.0, 1.0]), 1.0), Beta(_t([2.0, 1.0]), 2.0)
    cb = ContinuousBernoulli(_t([0.3, 0.6]))
    for p, q in [(gamma, Beta(2.0, 3.0)), (gamma, ContinuousBernoulli(0.3)),
                 (gamma, Pareto(1.0, 2.0)), (gamma, Uniform(0.0, 5.0)), (beta, Pareto(1.0, 2.0)),
                 (cb, Pareto(1.0, 2.0)), (beta, Uniform(0.2, 1.0))]:
        kl = kl_divergence(p, q)
        assert kl.shape == (2,) and kl.dtype == ember.float64
        assert (_np(kl) == math.inf).all()
    # as PyTorch: a continuous Bernoulli against a uniform whose interval only touches [0, 1]
    assert kl_divergence(cb, Uniform(0.0, 1.0)).tolist() == [math.inf] * 2
    finite = kl_divergence(beta, Uniform(0.0, 1.0))
    np.testing.assert_allclose(_np(finite), -_np(beta.entropy()))


def test_kl_of_a_distribution_with_itself_is_zero():
    for d in (Gamma(_t([0.7, 3.0]), _t([2.0, 1.0])), Beta(_t([0.5, 4.0]), _t([2.0, 0.3])),
              Dirichlet(_t([[1.0, 2.0, 0.5]])), ContinuousBernoulli(_t([0.1, 0.5, 0.7]))):
        np.testing.assert_allclose(_np(kl_divergence(d, d)), 0.0, atol=1e-12)
