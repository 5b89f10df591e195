"""The location-scale group (Exponential, Cauchy, Laplace, Gumbel, LogNormal, HalfNormal,
HalfCauchy, Weibull, Pareto, Kumaraswamy, LogisticNormal, GeneralizedPareto) and its KL
divergences: errors, special values, closed forms, sample moments, reparameterized
gradients, KL against Monte Carlo, expand."""

import math

import numpy as np
import pytest

import ember
from ember.distributions import (Beta, Cauchy, ContinuousBernoulli, Exponential, Gamma,
                                 GeneralizedPareto, Gumbel, HalfCauchy, HalfNormal, Kumaraswamy,
                                 Laplace, LogisticNormal, LogNormal, Normal, Pareto,
                                 TransformedDistribution, Uniform, Weibull, kl_divergence)
from ember.distributions.kl import _KL_REGISTRY

EULER = 0.5772156649015329


def _t(values, grad=False):
    return ember.tensor(values, dtype=ember.float64, requires_grad=grad)


def _np(tensor):
    return np.asarray(tensor.detach().numpy())


# The scalar families, built on float64 parameters, with a point inside the support.
SCALAR = [
    (Exponential, {"rate": [0.5, 2.0]}),
    (Cauchy, {"loc": [0.0, -2.0], "scale": [1.0, 0.4]}),
    (Laplace, {"loc": [0.0, 1.5], "scale": [1.0, 0.3]}),
    (Gumbel, {"loc": [0.0, -1.0], "scale": [1.0, 2.5]}),
    (LogNormal, {"loc": [0.0, -0.5], "scale": [0.25, 1.0]}),
    (HalfNormal, {"scale": [1.0, 0.3]}),
    (HalfCauchy, {"scale": [1.0, 2.5]}),
    (Weibull, {"scale": [1.0, 2.0], "concentration": [0.7, 3.0]}),
    (Pareto, {"scale": [1.0, 0.5], "alpha": [1.5, 3.0]}),
    (Kumaraswamy, {"concentration1": [2.0, 0.5], "concentration0": [3.0, 0.7]}),
    (GeneralizedPareto, {"loc": [0.0, 1.0], "scale": [1.0, 2.0],
                         "concentration": [-0.5, 0.3]}),
]
IDS = [cls.__name__ for cls, _ in SCALAR]


def _build(cls, params, grad=False):
    return cls(**{k: _t(v, grad) for k, v in params.items()})


# -- errors -----------------------------------------------------------------------------------

@pytest.mark.parametrize("cls, params, name, owner", [
    (Exponential, {"rate": [1.0, -1.0]}, "rate", "Exponential"),
    (Cauchy, {"loc": [0.0], "scale": [0.0]}, "scale", "Cauchy"),
    (Laplace, {"loc": [math.nan], "scale": [1.0]}, "loc", "Laplace"),
    (Gumbel, {"loc": [0.0], "scale": [-2.0]}, "scale", "Gumbel"),
    (LogNormal, {"loc": [0.0], "scale": [-1.0]}, "scale", "Normal"),     # the base's check
    (HalfNormal, {"scale": [0.0]}, "scale", "HalfNormal"),
    (HalfCauchy, {"scale": [-1.0]}, "scale", "HalfCauchy"),
    (Weibull, {"scale": [1.0], "concentration": [0.0]}, "concentration", "Weibull"),
    (Weibull, {"scale": [-1.0], "concentration": [1.0]}, "scale", "Weibull"),
    (Pareto, {"scale": [1.0], "alpha": [-1.0]}, "rate", "Exponential"),  # the base's check
    (Pareto, {"scale": [-1.0], "alpha": [1.0]}, "scale", "Pareto"),
    (Kumaraswamy, {"concentration1": [0.0], "concentration0": [1.0]}, "concentration1",
     "Kumaraswamy"),
    (LogisticNormal, {"loc": [0.0, 1.0], "scale": [1.0, -1.0]}, "scale", "Normal"),
    (GeneralizedPareto, {"loc": [0.0], "scale": [-1.0], "concentration": [0.1]}, "scale",
     "GeneralizedPareto"),
])
def test_invalid_parameters_raise(cls, params, name, owner):
    with pytest.raises(ValueError, match=rf"Expected parameter {name} \(Tensor of shape "
                                         rf"\(\d?,?\)\) of distribution {owner}\("):
        _build(cls, params)
    cls(**{k: _t(v) for k, v in params.items()}, validate_args=False)    # unchecked: fine


@pytest.mark.parametrize("dist, value", [
    (Exponential(_t([1.0, 2.0])), [-1.0, 1.0]),
    (HalfNormal(_t([1.0, 2.0])), [-0.5, 1.0]),
    (HalfCauchy(_t([1.0, 2.0])), [1.0, -3.0]),
    (LogNormal(_t([0.0, 0.0]), 1.0), [0.0, 1.0]),
    (Weibull(_t([1.0, 2.0]), 1.0), [0.0, 1.0]),
    (Pareto(_t([1.0, 2.0]), 1.0), [1.5, 1.5]),
    (Kumaraswamy(_t([1.0, 2.0]), 1.0), [0.5, 1.1]),
    (GeneralizedPareto(0.0, 1.0, -0.5), 2.5),
    (GeneralizedPareto(_t([1.0]), 1.0, 0.5), [0.5]),
])
def test_value_outside_support_raises(dist, value):
    with pytest.raises(ValueError, match="to be within the support"):
        dist.log_prob(_t(value))


def test_value_checks_of_log_prob():
    with pytest.raises(ValueError, match="The value argument to log_prob must be a Tensor"):
        Gumbel(_t([0.0, 1.0]), 1.0).log_prob(1.0)
    with pytest.raises(ValueError, match="within the support"):
        LogisticNormal(_t([0.0, 1.0]), 1.0).log_prob(_t([0.5, 0.6, 0.1]))
    with pytest.raises(ValueError, match="within the support"):
        Pareto(_t([1.0, 2.0]), 1.0).cdf(_t([3.0, 1.0]))
    # validation off: no error, and the formulas' own values outside the support
    assert _np(Exponential(2.0, validate_args=False).log_prob(_t(-1.0))) == pytest.approx(
        math.log(2) + 2)
    assert _np(HalfNormal(1.0, validate_args=False).log_prob(_t(-1.0))) == -math.inf
    assert _np(HalfCauchy(1.0, validate_args=False).log_prob(-1.0)) == -math.inf


def test_custom_init_subclass_must_define_expand():
    class MyGumbel(Gumbel):
        def __init__(self, loc):
            super().__init__(loc, 1.0)

    with pytest.raises(NotImplementedError, match="must also define a custom .expand"):
        MyGumbel(_t([0.0])).expand((3, 1))


# -- structure ------------------------------------------------------------------------------

def test_class_hierarchy_and_flags():
    transformed = [Gumbel, LogNormal, HalfNormal, HalfCauchy, Weibull, Pareto, Kumaraswamy,
                   LogisticNormal]
    for cls in transformed:
        assert issubclass(cls, TransformedDistribution)
    for cls in [Cauchy, Laplace, GeneralizedPareto]:
        assert not issubclass(cls, TransformedDistribution)
    assert Exponential.__mro__[1].__name__ == "ExponentialFamily"
    for cls, params in SCALAR:
        dist = _build(cls, params)
        assert dist.has_rsample is True and dist.has_enumerate_support is False
    assert repr(Pareto(_t([1.0, 2.0]), 1.0)) == (
        "Pareto(alpha: ember.Size([2]), scale: ember.Size([2]))")
    assert repr(HalfNormal(_t([1.0]))) == "HalfNormal()"


def test_transformed_structure():
    g = Gumbel(0.0, 1.0)
    finfo = ember.finfo(ember.float32)
    assert isinstance(g.base_dist, Uniform) and g.batch_shape == ()
    assert float(g.base_dist.low) == finfo.tiny
    assert float(g.base_dist.high) == pytest.approx(1 - finfo.eps)
    w = Weibull(_t([1.0, 2.0]), _t([0.5, 4.0]))
    assert isinstance(w.base_dist, Exponential)
    assert _np(w.concentration_reciprocal).tolist() == [2.0, 0.25]
    p = Pareto(_t([1.0, 2.0]), _t([0.5, 4.0]))
    assert _np(p.base_dist.rate).tolist() == [0.5, 4.0]
    ln = LogNormal(_t([0.0, 1.0]), 2.0)
    assert _np(ln.loc).tolist() == [0.0, 1.0] and _np(ln.scale).tolist() == [2.0, 2.0]
    lg = LogisticNormal(1.0, 2.0)
    assert lg.batch_shape == () and lg.event_shape == (2,)
    assert _np(lg.loc).tolist() == [1.0] and _np(lg.scale).tolist() == [2.0]
    lg = LogisticNormal(_t([[0.0, 1.0, 2.0]] * 4), 1.0)
    assert lg.batch_shape == (4,) and lg.event_shape == (4,)
    assert Exponential(2).rate.dtype == ember.get_default_dtype()


# -- special values ---------------------------------------------------------------------------

def test_infinite_and_undefined_moments():
    c = Cauchy(_t([0.0, 1.0]), _t([1.0, 2.0]))
    assert np.isnan(_np(c.mean)).all() and np.isinf(_np(c.variance)).all()
    assert _np(c.mode).tolist() == [0.0, 1.0]
    h = HalfCauchy(_t([1.0, 2.0]))
    assert np.isposinf(_np(h.mean)).all() and np.isposinf(_np(h.variance)).all()
    assert _np(h.mode).tolist() == [0.0, 0.0]
    p = Pareto(1.0, _t([0.5, 1.0, 1.5, 2.0, 3.0]))
    assert _np(p.mean)[:2].tolist() == [math.inf, math.inf]
    np.testing.assert_allclose(_np(p.mean)[2:], [3.0, 2.0, 1.5])
    assert _np(p.variance)[:4].tolist() == [math.inf] * 4
    assert _np(p.variance)[4] == pytest.approx(0.75)
    g = GeneralizedPareto(0.0, 1.0, _t([0.25, 0.5, 1.0, 2.0]))
    np.testing.assert_allclose(_np(g.mean), [4 / 3, 2.0, math.nan, math.nan])
    np.testing.assert_allclose(_np(g.variance), [32 / 9, math.nan, math.nan, math.nan])
    w = Weibull(2.0, _t([0.9, 1.0, 2.0]))
    np.testing.assert_allclose(_np(w.mode), [math.nan, 0.0, 2 * math.sqrt(0.5)])


def test_kumaraswamy_mode():
    # ((a - 1) / (a b - 1)) ** (1 / a) where a, b >= 1; nan where the density is unbounded
    k = Kumaraswamy(_t([2.0, 3.0, 1.0, 3.0, 0.5, 2.0, 1.0]),
                    _t([3.0, 2.0, 2.0, 1.0, 2.0, 0.5, 1.0]))
    np.testing.assert_allclose(_np(k.mode), [math.sqrt(0.2), 0.4 ** (1 / 3), 0.0, 1.0,
                                             math.nan, math.nan, math.nan])


def test_icdf_ends_and_outside_values():
    lap = Laplace(0.0, 1.0)
    assert _np(lap.icdf(_t([0.0, 1.0]))).tolist() == [-math.inf, math.inf]
    assert _np(Exponential(1.0).icdf(_t(1.0))) == math.inf
    assert _np(HalfNormal(1.0).icdf(_t(0.0))) == 0.0
    g = GeneralizedPareto(0.0, 1.0, _t([-1.0, -0.5, 0.0, 0.5]))
    np.testing.assert_allclose(_np(g.icdf(_t(1.0))), [1.0, 2.0, math.inf, math.inf])
    np.testing.assert_allclose(_np(g.icdf(_t(0.0))), [0.0] * 4)
    # no support masking in the cdf formulas, as in PyTorch
    assert _np(Exponential(1.0, validate_args=False).cdf(_t(-1.0))) == pytest.approx(
        1 - math.e)
    assert _np(HalfNormal(1.0, validate_args=False).cdf(_t(-1.0))) == pytest.approx(
        -0.6826894921370859)


def test_generalized_pareto_special_cases():
    x = _t([0.1, 0.5, 1.3, 4.0])
    # xi = 0 is Exponential(1 / scale) shifted by loc
    g = GeneralizedPareto(0.0, 2.0, 0.0)
    np.testing.assert_allclose(_np(g.log_prob(x)), _np(Exponential(0.5).log_prob(x)))
    np.testing.assert_allclose(_np(g.cdf(x)), _np(Exponential(0.5).cdf(x)))
    # xi > 0 with loc = scale / xi is Pareto(scale / xi, 1 / xi)
    g = GeneralizedPareto(4.0, 2.0, 0.5)
    y = _t([4.0, 4.5, 7.0, 20.0])
    np.testing.assert_allclose(_np(g.log_prob(y)), _np(Pareto(4.0, 2.0).log_prob(y)))
    np.testing.assert_allclose(_np(g.cdf(y)), _np(Pareto(4.0, 2.0).cdf(y)))
    # xi = -1 is Uniform(loc, loc + scale): the log density is exactly -log(scale)
    g = GeneralizedPareto(1.0, 3.0, -1.0)
    np.testing.assert_allclose(_np(g.log_prob(_t([1.0, 2.0, 4.0]))), [-math.log(3)] * 3)
    np.testing.assert_allclose(_np(g.cdf(_t([1.0, 2.5, 4.0]))), [0.0, 0.5, 1.0])
    # |xi| <= 1e-8 takes the exponential formula
    g = GeneralizedPareto(0.0, 1.0, _t([1e-8, -1e-8, 0.0]))
    np.testing.assert_allclose(_np(g.icdf(_t(0.5))), [math.log(2)] * 3, rtol=1e-15)


def test_generalized_pareto_log_cdf_is_accurate_in_both_tails():
    g = GeneralizedPareto(0.0, 1.0, 0.0)
    got = _np(g.log_cdf(_t([50.0, 1e-10])))
    np.testing.assert_allclose(got, [-math.exp(-50.0), math.log(1e-10)], rtol=1e-9)
    np.testing.assert_allclose(_np(g.log_survival_function(_t([3.0]))), [-3.0])


def test_generalized_pareto_support():
    g = GeneralizedPareto(_t([0.0, 1.0]), _t([1.0, 2.0]), _t([-2.0, 0.5]))
    support = g.support
    np.testing.assert_allclose(_np(support.lower_bound), [0.0, 1.0])
    np.testing.assert_allclose(_np(support.upper_bound), [0.5, math.inf])


# -- closed forms ---------------------------------------------------------------------------

def test_known_values():
    assert float(Exponential(2.0).entropy()) == pytest.approx(1 - math.log(2))
    assert float(Exponential(_t(2.0)).log_prob(_t(1.5))) == pytest.approx(math.log(2) - 3)
    assert float(Cauchy(1.0, 2.0).cdf(_t(3.0))) == pytest.approx(0.75)
    assert float(Cauchy(0.0, 1.0).entropy()) == pytest.approx(math.log(4 * math.pi))
    assert float(Laplace(1.0, 2.0).log_prob(_t(3.0))) == pytest.approx(-math.log(4) - 1)
    assert float(Laplace(1.0, 2.0).cdf(_t(3.0))) == pytest.approx(1 - 0.5 / math.e)
    assert float(Gumbel(0.0, 1.0).mean) == pytest.approx(EULER)
    assert float(Gumbel(0.0, 1.0).cdf(_t(0.0))) == pytest.approx(math.exp(-1))
    assert float(Gumbel(0.0, 1.0).variance) == pytest.approx(math.pi ** 2 / 6)
    assert float(LogNormal(0.0, 1.0).mean) == pytest.approx(math.exp(0.5))
    assert float(LogNormal(0.0, 1.0).variance) == pytest.approx((math.e - 1) * math.e)
    assert float(LogNormal(0.0, 1.0).cdf(_t(1.0))) == pytest.approx(0.5)
    assert float(HalfNormal(2.0).mean) == pytest.approx(2 * math.sqrt(2 / math.pi))
    assert float(HalfNormal(1.0).cdf(_t(1.0))) == pytest.approx(math.erf(1 / math.sqrt(2)))
    assert float(HalfCauchy(1.0).cdf(_t(1.0))) == pytest.approx(0.5)
    assert float(HalfCauchy(1.0).entropy()) == pytest.approx(math.log(2 * math.pi))
    assert float(Weibull(2.0, 2.0).mean) == pytest.approx(math.sqrt(math.pi))
    assert float(Weibull(2.0, 2.0).cdf(_t(2.0))) == pytest.approx(1 - math.exp(-1))
    assert float(Pareto(1.0, 3.0).cdf(_t(2.0))) == pytest.approx(1 - 1 / 8)
    assert float(Pareto(2.0, 1.0).entropy()) == pytest.approx(math.log(2) + 2)
    assert float(Kumaraswamy(1.0, 1.0).entropy()) == pytest.approx(0.0, abs=1e-12)
    assert float(Kumaraswamy(2.0, 1.0).cdf(_t(0.5))) == pytest.approx(0.25)
    assert float(Kumaraswamy(2.0, 1.0).mean) == pytest.approx(2 / 3)
    assert float(Kumaraswamy(1.0, 3.0).mean) == pytest.approx(0.25)
    assert float(GeneralizedPareto(0.0, 2.0, 0.5).entropy()) == pytest.approx(
        math.log(2) + 1.5)
    # LogisticNormal: the density of the stick-breaking image at (0.5, 0.5) of N(0, 1)
    lg = LogisticNormal(_t([0.0]), _t([1.0]))
    expected = -0.5 * math.log(2 * math.pi) - 2 * math.log(0.5)
    assert float(lg.log_prob(_t([0.5, 0.5]))) == pytest.approx(expected)


def test_exponential_family_entropy_matches_closed_form():
    rate = _t([0.3, 1.0, 4.0])
    dist = Exponential(rate)
    from ember.distributions.exp_family import ExponentialFamily
    np.testing.assert_allclose(_np(ExponentialFamily.entropy(dist)), _np(dist.entropy()))


@pytest.mark.parametrize("cls, params", SCALAR, ids=IDS)
def test_density_integrates_to_one_and_matches_cdf(cls, params):
    dist = _build(cls, params)
    probs = _t(np.linspace(1e-4, 1 - 1e-4, 20001).repeat(2).reshape(-1, 2))
    x = dist.icdf(probs)
    np.testing.assert_allclose(_np(dist.cdf(x)), _np(probs), atol=1e-9)
    # int f dx over [x(p0), x(p1)] = p1 - p0 (trapezoid on the quantile grid)
    dens = np.exp(_np(dist.log_prob(x)))
    mass = np.trapezoid(dens, _np(x), axis=0)
    np.testing.assert_allclose(mass, 1 - 2e-4, rtol=2e-4)


@pytest.mark.parametrize("cls, params", SCALAR, ids=IDS)
def test_entropy_against_quadrature(cls, params):
    # H = -E[log f(X)] = -int_0^1 log f(F^-1(u)) du, by the midpoint rule on a fine grid
    dist = _build(cls, params)
    n = 200000
    u = _t(((np.arange(n) + 0.5) / n).repeat(2).reshape(-1, 2))
    estimate = -_np(dist.log_prob(dist.icdf(u))).mean(0)
    np.testing.assert_allclose(estimate, _np(dist.entropy()), atol=2e-3)


# -- sampling ---------------------------------------------------------------------------------

@pytest.mark.parametrize("cls, params", SCALAR, ids=IDS)
def test_sample_distribution_matches_cdf(cls, params):
    # the empirical cdf at the quartiles, within 6 standard errors of F
    ember.manual_seed(0)
    dist = _build(cls, params)
    n = 40000
    samples = _np(dist.sample((n,)))
    assert samples.shape == (n, 2)
    assert bool(dist.support.check(_t(samples)).all())
    for q in (0.1, 0.25, 0.5, 0.75, 0.9):
        edge = _np(dist.icdf(_t([q, q])))
        frac = (samples <= edge).mean(0)
        assert np.all(np.abs(frac - q) < 6 * math.sqrt(q * (1 - q) / n))


@pytest.mark.parametrize("cls, params", [
    (Exponential, {"rate": [0.5, 2.0]}),
    (Laplace, {"loc": [0.0, 1.5], "scale": [1.0, 0.3]}),
    (Gumbel, {"loc": [0.0, -1.0], "scale": [1.0, 2.5]}),
    (LogNormal, {"loc": [0.0, -0.5], "scale": [0.25, 0.5]}),
    (HalfNormal, {"scale": [1.0, 0.3]}),
    (Weibull, {"scale": [1.0, 2.0], "concentration": [1.5, 3.0]}),
    (Pareto, {"scale": [1.0, 0.5], "alpha": [5.0, 9.0]}),
    (Kumaraswamy, {"concentration1": [2.0, 0.5], "concentration0": [3.0, 0.7]}),
    (GeneralizedPareto, {"loc": [0.0, 1.0], "scale": [1.0, 2.0], "concentration": [-0.5, 0.1]}),
], ids=lambda v: v.__name__ if isinstance(v, type) else "")
def test_sample_moments(cls, params):
    # the sample mean within 6 standard errors; the sample variance within 10%
    ember.manual_seed(1)
    dist = _build(cls, params)
    n = 100000
    samples = _np(dist.sample((n,)))
    mean, var = _np(dist.mean), _np(dist.variance)
    assert np.all(np.abs(samples.mean(0) - mean) < 6 * np.sqrt(var / n))
    np.testing.assert_allclose(samples.var(0), var, rtol=0.1)
    np.testing.assert_allclose(_np(dist.stddev), np.sqrt(var))


def test_logistic_normal_samples():
    ember.manual_seed(2)
    loc, scale = _t([0.3, -0.4]), _t([0.5, 1.2])
    dist = LogisticNormal(loc, scale)
    samples = dist.sample((50000,))
    assert samples.shape == (50000, 3)
    assert bool(dist.support.check(samples).all())
    # the first stick: x1 = sigmoid(z1 - log 2) with z1 ~ N(loc1, scale1), z1 = logit(x1) + log 2
    z1 = _np(ember.log(samples[:, 0] / (1 - samples[:, 0]))) + math.log(2)
    assert abs(z1.mean() - 0.3) < 6 * 0.5 / math.sqrt(50000)
    assert z1.std() == pytest.approx(0.5, rel=0.05)


@pytest.mark.parametrize("cls, params", SCALAR, ids=IDS)
def test_rsample_gradient_by_implicit_differentiation(cls, params):
    # x = F^-1(u; theta) gives dx/dtheta = -(dF/dtheta)(x) / f(x)
    ember.manual_seed(3)
    leaves = [_t(v, True) for v in params.values()]
    dist = cls(**dict(zip(params, leaves)))
    x = dist.rsample((5,))
    grads = ember.autograd.grad(x.sum(), leaves, retain_graph=True)
    x0 = x.detach()
    cdf = dist.cdf(x0)
    density = ember.exp(dist.log_prob(x0)).detach()
    for leaf, grad in zip(leaves, grads):
        expected = np.zeros(2)
        for i in range(5):
            (d,) = ember.autograd.grad(cdf[i].sum(), [leaf], retain_graph=True)
            expected += _np(-d / density[i])
        np.testing.assert_allclose(_np(grad), expected, rtol=1e-6, atol=1e-9)


def test_rsample_known_derivatives():
    ember.manual_seed(4)
    rate = _t([0.5, 2.0], True)
    x = Exponential(rate).rsample()
    (g,) = ember.autograd.grad(x.sum(), [rate])
    np.testing.assert_allclose(_np(g), _np(-x / rate))
    loc, scale = _t([0.5, -1.0], True), _t([2.0, 0.5], True)
    x = Laplace(loc, scale).rsample()
    gl, gs = ember.autograd.grad(x.sum(), [loc, scale])
    np.testing.assert_allclose(_np(gl), [1.0, 1.0])
    np.testing.assert_allclose(_np(gs), _np((x - loc) / scale))
    scale, alpha = _t([1.0, 2.0], True), _t([1.5, 3.0], True)
    x = Pareto(scale, alpha).rsample()
    gs, ga = ember.autograd.grad(x.sum(), [scale, alpha])
    np.testing.assert_allclose(_np(gs), _np(x / scale))
    np.testing.assert_allclose(_np(ga), _np(-x * ember.log(x / scale) / alpha))


def test_samples_have_no_grad_and_param_dtype():
    dist = Gumbel(_t([0.0, 1.0], True), _t([1.0, 2.0], True))
    assert not dist.sample((3,)).requires_grad and dist.rsample((3,)).requires_grad
    assert dist.sample().dtype == ember.float64
    assert GeneralizedPareto(0.0, 1.0, 0.2).sample((2,)).dtype == ember.float32
    assert Laplace(0.0, 1.0).sample((2,)).dtype == ember.float32


# -- expand -----------------------------------------------------------------------------------

@pytest.mark.parametrize("cls, params", SCALAR + [
    (LogisticNormal, {"loc": [0.0, 1.0], "scale": [1.0, 0.5]})], ids=IDS + ["LogisticNormal"])
def test_expand(cls, params):
    dist = _build(cls, params)
    big = dist.expand((3,) + tuple(dist.batch_shape))
    assert type(big) is cls and big.batch_shape == (3,) + tuple(dist.batch_shape)
    assert big.event_shape == dist.event_shape
    assert big._validate_args == dist._validate_args
    value = dist.sample()
    expected = np.broadcast_to(_np(dist.log_prob(value)), big.batch_shape)
    np.testing.assert_allclose(_np(big.log_prob(value)), expected)
    assert big.sample((4,)).shape == (4,) + tuple(big.batch_shape) + tuple(big.event_shape)
    if cls is not LogisticNormal:
        np.testing.assert_allclose(_np(big.mean), np.broadcast_to(_np(dist.mean), (3, 2)))
        np.testing.assert_allclose(_np(big.entropy()),
                                   np.broadcast_to(_np(dist.entropy()), (3, 2)))
        for name in params:
            assert getattr(big, name).shape == (3, 2)


# -- KL divergence ----------------------------------------------------------------------------

KL_P = {
    "Normal": lambda: Normal(_t([0.2, -0.5]), _t([0.8, 1.3])),
    "Uniform": lambda: Uniform(_t([0.2, 1.5]), _t([0.9, 2.5])),
    "Exponential": lambda: Exponential(_t([1.5, 0.8])),
    "Cauchy": lambda: Cauchy(_t([0.0, 1.0]), _t([1.0, 0.5])),
    "Laplace": lambda: Laplace(_t([0.3, -1.0]), _t([0.7, 1.2])),
    "Gumbel": lambda: Gumbel(_t([0.3, -1.0]), _t([0.7, 1.2])),
    "HalfNormal": lambda: HalfNormal(_t([0.7, 1.6])),
    "Pareto": lambda: Pareto(_t([1.2, 2.0]), _t([4.5, 6.0])),
}
KL_Q = {
    "Normal": lambda: Normal(_t([0.0, 0.5]), _t([1.0, 2.0])),
    "Uniform": lambda: Uniform(_t([0.0, 1.0]), _t([1.0, 3.0])),
    "Exponential": lambda: Exponential(_t([1.0, 0.6])),
    "Cauchy": lambda: Cauchy(_t([0.5, 0.0]), _t([2.0, 1.0])),
    "Laplace": lambda: Laplace(_t([0.0, -0.5]), _t([1.0, 2.0])),
    "Gumbel": lambda: Gumbel(_t([0.0, -0.5]), _t([1.0, 2.0])),
    "HalfNormal": lambda: HalfNormal(_t([1.0, 0.9])),
    "Pareto": lambda: Pareto(_t([1.0, 1.5]), _t([2.0, 3.0])),
    "Gamma": lambda: Gamma(_t([2.0, 3.0]), _t([1.5, 2.0])),
    "Beta": lambda: Beta(_t([2.0, 0.7]), _t([1.5, 1.2])),
    "ContinuousBernoulli": lambda: ContinuousBernoulli(_t([0.3, 0.8])),
}


OUR_P = [cls.__name__ for cls in (Normal, Uniform, Exponential, Cauchy, Laplace, Gumbel,
                                  HalfNormal, Pareto)]
PAIRS = sorted((p.__name__, q.__name__) for p, q in _KL_REGISTRY if p.__name__ in OUR_P)


def test_registered_pairs():
    # every pair PyTorch 2.13 registers whose p is one of these families
    assert len(PAIRS) == 50
    assert ("Normal", "Gumbel") in PAIRS and ("Uniform", "Beta") in PAIRS
    assert ("Cauchy", "Cauchy") in PAIRS and ("HalfNormal", "HalfNormal") in PAIRS


@pytest.mark.parametrize("p_name, q_name", PAIRS)
def test_kl_against_monte_carlo(p_name, q_name):
    p, q = KL_P[p_name](), KL_Q[q_name]()
    kl = _np(kl_divergence(p, q))
    assert kl.shape == (2,) and kl.dtype == np.float64
    ember.manual_seed(5)
    x = p.sample((100000,))
    inside = _np(q.support.check(x)).all(0)
    if not inside.all():
        # p puts mass where q has none
        assert np.isposinf(kl[~inside]).all()
    if not inside.any():
        return
    q_safe = type(q)(**{k: getattr(q, k) for k in _init_args(q)}, validate_args=False)
    ratio = _np(p.log_prob(x)) - _np(q_safe.log_prob(x))
    est, err = ratio.mean(0), ratio.std(0) / math.sqrt(ratio.shape[0])
    assert np.all(np.abs(est - kl)[inside] <= 6 * err[inside] + 1e-9)
    assert np.all(kl[inside] >= 0)


def _init_args(dist):
    names = {"Normal": ["loc", "scale"], "Uniform": ["low", "high"], "Exponential": ["rate"],
             "Cauchy": ["loc", "scale"], "Laplace": ["loc", "scale"],
             "Gumbel": ["loc", "scale"], "HalfNormal": ["scale"], "Pareto": ["scale", "alpha"],
             "Gamma": ["concentration", "rate"],
             "Beta": ["concentration1", "concentration0"], "ContinuousBernoulli": ["probs"]}
    return names[type(dist).__name__]


def test_kl_edge_cases():
    # Uniform: inf unless q's interval contains p's
    p = Uniform(_t([0.0, 0.0, 0.5]), _t([1.0, 1.0, 2.0]))
    q = Uniform(_t([0.0, -1.0, 0.6]), _t([1.0, 3.0, 2.0]))
    np.testing.assert_allclose(_np(kl_divergence(p, q)), [0.0, math.log(4), math.inf])
    # Pareto vs Pareto: inf where p's minimum is below q's
    p = Pareto(_t([1.0, 2.0]), _t([2.0, 2.0]))
    q = Pareto(_t([1.5, 1.0]), _t([2.0, 3.0]))
    np.testing.assert_allclose(_np(kl_divergence(p, q)),
                               [math.inf, math.log(2 / 3) + 3 * math.log(2) + 0.5])
    # Pareto vs Exponential / Normal: inf where the needed moment is infinite
    p = Pareto(1.0, _t([0.8, 1.5, 2.0, 3.0]))
    k_exp = _np(kl_divergence(p, Exponential(_t([1.0] * 4))))
    k_norm = _np(kl_divergence(p, Normal(_t([0.0] * 4), 1.0)))
    assert np.isposinf(k_exp[:1]).all() and np.isfinite(k_exp[1:]).all()
    assert np.isposinf(k_norm[:3]).all() and np.isfinite(k_norm[3:]).all()
    # an infinite pair keeps p's batch shape and dtype
    k = kl_divergence(Normal(_t([0.0, 1.0]), 1.0), Uniform(_t([[0.0] * 2] * 3), 1.0))
    assert k.shape == (2,) and k.dtype == ember.float64 and np.isposinf(_np(k)).all()
    # a distribution against itself
    for make in KL_P.values():
        dist = make()
        np.testing.assert_allclose(_np(kl_divergence(dist, dist)), [0.0, 0.0], atol=1e-12)


def test_kl_closed_forms():
    kl = kl_divergence(Normal(0.0, 1.0), Normal(1.0, 2.0))
    assert float(kl) == pytest.approx(math.log(2) + 2 / 8 - 0.5)
    kl = kl_divergence(Exponential(2.0), Exponential(1.0))
    assert float(kl) == pytest.approx(math.log(2) + 0.5 - 1)
    kl = kl_divergence(Cauchy(0.0, 1.0), Cauchy(0.0, 2.0))
    assert float(kl) == pytest.approx(math.log(9 / 8))
    kl = kl_divergence(Laplace(0.0, 1.0), Laplace(1.0, 1.0))
    assert float(kl) == pytest.approx(1 + math.exp(-1) - 1)
    kl = kl_divergence(HalfNormal(1.0), HalfNormal(2.0))
    assert float(kl) == pytest.approx(math.log(2) + 1 / 8 - 0.5)
    # Gumbel(0, 1) against itself through the Gamma function: Gamma(2) = 1
    assert float(kl_divergence(Gumbel(0.0, 1.0), Gumbel(0.0, 1.0))) == pytest.approx(0.0)


def test_kl_gradients_are_finite():
    loc, scale = _t([0.2, -0.5], True), _t([0.8, 1.3], True)
    kl = kl_divergence(Normal(loc, scale), Gumbel(_t([0.0, 0.5]), _t([1.0, 2.0])))
    grads = ember.autograd.grad(kl.sum(), [loc, scale])
    assert all(np.isfinite(_np(g)).all() for g in grads)
    alpha = _t([0.5, 3.0], True)
    kl = kl_divergence(Pareto(1.0, alpha), Normal(_t([0.0, 0.0]), 1.0))
    (g,) = ember.autograd.grad(kl[1], [alpha])
    assert np.isfinite(_np(g)).all()
