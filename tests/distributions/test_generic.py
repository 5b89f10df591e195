"""What every distribution must do, checked on every example of ``examples.py``: sample
shapes and dtypes, samples inside the support, differentiable rsample, expand, enumerate_support
summing to one, and moments and entropy against seeded Monte Carlo estimates."""

import math

import pytest

import ember
import ember.distributions as D
from tests.distributions.examples import CASE_IDS, CASES

N_MC = 20000                 # Monte Carlo samples: estimates within a few standard errors


def _build(cls, params):
    return cls(**params)


def _float_params(params):
    return [v for v in params.values()
            if isinstance(v, ember.Tensor) and v.requires_grad]


def _finite(t):
    return bool(ember.isfinite(t).all())


@pytest.fixture(autouse=True)
def _seeded():
    ember.manual_seed(0)


@pytest.mark.parametrize("cls,params", CASES, ids=CASE_IDS)
def test_sample_and_log_prob_shapes(cls, params):
    d = _build(cls, params)
    full = d.batch_shape + d.event_shape
    assert d.sample().shape == full
    samples = d.sample((3, 2))
    assert samples.shape == (3, 2) + full
    assert not samples.requires_grad
    log_prob = d.log_prob(samples)
    assert log_prob.shape == (3, 2) + d.batch_shape
    assert not bool(ember.isnan(log_prob).any())
    assert bool((log_prob > -math.inf).all()), "a sample outside the support"


@pytest.mark.parametrize("cls,params", CASES, ids=CASE_IDS)
def test_samples_lie_in_the_support(cls, params):
    d = _build(cls, params)
    samples = d.sample((50,))
    assert bool(d.support.check(samples).all())


@pytest.mark.parametrize("cls,params", CASES, ids=CASE_IDS)
def test_sample_dtype_follows_float_parameters(cls, params):
    d = _build(cls, params)
    floats = [p for p in _float_params(params) if p.dtype.is_floating_point]
    sample = d.sample()
    if floats and sample.dtype.is_floating_point:
        assert sample.dtype == floats[0].dtype


@pytest.mark.parametrize("cls,params", CASES, ids=CASE_IDS)
def test_rsample_is_differentiable(cls, params):
    d = _build(cls, params)
    if not d.has_rsample:
        pytest.skip("no reparameterized samples")
    leaves = _float_params(params)
    if not leaves:
        pytest.skip("no parameter requires grad")
    sample = d.rsample((4,))
    assert sample.shape == (4,) + d.batch_shape + d.event_shape
    # weighted, since some samples have a constant sum (one-hot, simplex)
    weights = ember.rand(sample.shape, generator=ember.Generator().manual_seed(1),
                         dtype=sample.dtype)
    grads = ember.autograd.grad((sample * weights).sum(), leaves, allow_unused=True)
    assert any(g is not None and _finite(g) and bool((g != 0).any()) for g in grads)


@pytest.mark.parametrize("cls,params", CASES, ids=CASE_IDS)
def test_expand_broadcasts_the_batch(cls, params):
    d = _build(cls, params)
    new_batch = ember.Size((2,)) + d.batch_shape
    e = d.expand(new_batch)
    assert type(e) is type(d)
    assert e.batch_shape == new_batch and e.event_shape == d.event_shape
    sample = d.sample()
    expected = d.log_prob(sample).expand(new_batch)
    assert ember.allclose(e.log_prob(sample), expected, equal_nan=True)
    assert e.sample().shape == new_batch + d.event_shape
    assert e._validate_args == d._validate_args


@pytest.mark.parametrize("cls,params", CASES, ids=CASE_IDS)
def test_enumerate_support_sums_to_one(cls, params):
    d = _build(cls, params)
    if not d.has_enumerate_support:
        pytest.skip("continuous or unbounded support")
    values = d.enumerate_support()
    n = values.shape[0]
    assert values.shape == (n,) + d.batch_shape + d.event_shape
    compact = d.enumerate_support(expand=False)
    assert compact.shape == (n,) + (1,) * len(d.batch_shape) + d.event_shape
    total = d.log_prob(values).exp().sum(0)
    assert ember.allclose(total, ember.ones_like(total), atol=1e-6)


def _moment_or_skip(d, name):
    try:
        value = getattr(d, name)
    except NotImplementedError:
        pytest.skip(f"{type(d).__name__} has no {name}")
    if not _finite(value):
        pytest.skip(f"{name} is not finite")
    return value.detach()


@pytest.mark.parametrize("cls,params", CASES, ids=CASE_IDS)
def test_mean_and_variance_match_samples(cls, params):
    if cls is D.VonMises:
        pytest.skip("circular moments: tests/distributions/test_gamma.py checks them")
    d = _build(cls, params)
    mean = _moment_or_skip(d, "mean")
    variance = _moment_or_skip(d, "variance")
    samples = d.sample((N_MC,)).double()
    # Six standard errors of the mean (and of the variance, from the fourth moment).
    mean_error = 6 * (variance / N_MC).sqrt() + 1e-9
    assert bool(((samples.mean(0) - mean).abs() <= mean_error).all())
    centered = (samples - samples.mean(0)) ** 2
    fourth = centered.var(0)
    if _finite(fourth):
        variance_error = 6 * (fourth / N_MC).sqrt() + 1e-9
        assert bool(((centered.mean(0) - variance).abs() <= variance_error).all())


@pytest.mark.parametrize("cls,params", CASES, ids=CASE_IDS)
def test_entropy_matches_monte_carlo(cls, params):
    d = _build(cls, params)
    try:
        entropy = d.entropy().detach()
    except NotImplementedError:
        pytest.skip(f"{cls.__name__} has no entropy")
    assert entropy.shape == d.batch_shape
    neg_log_prob = -d.log_prob(d.sample((N_MC,))).detach().double()
    error = 6 * neg_log_prob.std(0) / math.sqrt(N_MC) + 1e-6
    assert bool(((neg_log_prob.mean(0) - entropy).abs() <= error).all())


@pytest.mark.parametrize("cls,params", CASES, ids=CASE_IDS)
def test_icdf_inverts_cdf(cls, params):
    d = _build(cls, params)
    dtype = d.sample().dtype
    u = ember.tensor([0.1, 0.4, 0.75], dtype=dtype).reshape((3,) + (1,) * len(d.batch_shape))
    try:
        x = d.icdf(u.expand((3,) + d.batch_shape))
        back = d.cdf(x)
    except NotImplementedError:
        pytest.skip(f"{cls.__name__} has no cdf or icdf")
    assert ember.allclose(back.detach(), u.expand_as(back), atol=1e-6)


@pytest.mark.parametrize("cls,params", CASES, ids=CASE_IDS)
def test_repr_names_the_class(cls, params):
    assert repr(_build(cls, params)).startswith(cls.__name__ + "(")


def test_every_public_distribution_has_examples():
    covered = {cls for cls, _ in CASES}
    public = {getattr(D, name) for name in D.__all__ if isinstance(getattr(D, name), type)
              and issubclass(getattr(D, name), D.Distribution)}
    abstract = {D.Distribution, D.ExponentialFamily}
    missing = sorted(c.__name__ for c in public - covered - abstract)
    assert not missing, f"no examples for {missing}"


def test_broadcast_all_rejects_other_objects():
    a, b = D.utils.broadcast_all(ember.tensor([1.0, 2.0]), 3.0)
    assert a.tolist() == [1.0, 2.0] and b.tolist() == [3.0, 3.0]
    with pytest.raises(ValueError, match="^Input arguments must all be instances of Number, "
                                         "torch.Tensor or objects implementing "
                                         "__torch_function__.$"):
        D.utils.broadcast_all(ember.tensor([1.0]), "a")


def _leaf(values):
    return ember.tensor(values, dtype=ember.float64, requires_grad=True)


@pytest.mark.parametrize("make", [
    lambda p: D.RelaxedBernoulli(ember.tensor(0.5), probs=p),
    lambda p: D.relaxed_bernoulli.LogitRelaxedBernoulli(ember.tensor(0.5), probs=p),
])
def test_each_rsample_has_its_own_graph(make):
    """A training loop samples one distribution and backpropagates again and again; as in
    PyTorch, a backward must not free what the next sample needs."""
    probs = _leaf([0.3, 0.8])
    d = make(probs)
    grads = [ember.autograd.grad(d.rsample((4,)).sum(), probs)[0] for _ in range(2)]
    assert all(_finite(g) and bool((g > 0).all()) for g in grads)


def test_weibull_mode_after_a_backward_through_the_mean():
    scale, concentration = _leaf([1.0, 2.0]), _leaf([3.0, 1.5])
    d = D.Weibull(scale, concentration)
    ember.autograd.grad(d.mean.sum(), concentration)
    g_scale, g_concentration = ember.autograd.grad(d.mode.sum(), (scale, concentration))
    k = concentration.detach()
    assert ember.allclose(g_scale, ((k - 1) / k) ** (1 / k))
    assert _finite(g_concentration)


def test_uniform_mode_is_nan_and_part_of_the_graph():
    high = _leaf([1.0, 2.0])
    mode = D.Uniform(ember.zeros(2, dtype=ember.float64), high).mode
    assert mode.requires_grad and bool(mode.isnan().all())


def test_half_normal_promotes_the_value_and_half_cauchy_casts_it():
    """As PyTorch: HalfNormal.log_prob promotes float32 parameters with a float64 value,
    HalfCauchy.log_prob converts the value to the dtype of its scale."""
    value = ember.tensor([0.5, 2.0], dtype=ember.float64)
    half_normal = D.HalfNormal(ember.tensor([1.0, 2.0])).log_prob(value)
    assert half_normal.dtype == ember.float64
    expected = [math.log(2 / math.pi) / 2 - 0.125, math.log(2 / math.pi) / 2 - math.log(2) - 0.5]
    assert ember.allclose(half_normal, ember.tensor(expected, dtype=ember.float64))
    assert D.HalfCauchy(ember.tensor([1.0, 2.0])).log_prob(value).dtype == ember.float32
