"""The discrete distributions and their relaxations: errors, closed forms, sample frequencies,
reparameterized gradients, KL divergences against direct sums and Monte Carlo, expand."""

import math

import pytest

import ember
from ember.distributions import (Bernoulli, Binomial, Categorical, Geometric, Multinomial,
                                 NegativeBinomial, OneHotCategorical,
                                 OneHotCategoricalStraightThrough, Poisson, RelaxedBernoulli,
                                 RelaxedOneHotCategorical, kl_divergence)
from ember.distributions.relaxed_bernoulli import LogitRelaxedBernoulli
from ember.distributions.relaxed_categorical import ExpRelaxedCategorical

BOTH_OR_NEITHER = "Either `probs` or `logits` must be specified, but not both."


def _t(values, grad=False):
    return ember.tensor(values, dtype=ember.float64, requires_grad=grad)


def _close(got, expected, atol=1e-10):
    expected = expected if isinstance(expected, ember.Tensor) else _t(expected)
    assert got.shape == expected.shape
    assert ember.allclose(got.detach().double(), expected.double(), atol=atol, rtol=1e-9,
                          equal_nan=True), (got, expected)


@pytest.fixture(autouse=True)
def _seeded():
    ember.manual_seed(0)


# --- errors ------------------------------------------------------------------------------------

PROBS_OR_LOGITS = [
    lambda **kw: Bernoulli(**kw),
    lambda **kw: Geometric(**kw),
    lambda **kw: Binomial(3, **kw),
    lambda **kw: NegativeBinomial(2.0, **kw),
    lambda **kw: LogitRelaxedBernoulli(_t(0.5), **kw),
    lambda **kw: RelaxedBernoulli(_t(0.5), **kw),
]
VECTOR_PROBS_OR_LOGITS = [
    lambda **kw: Categorical(**kw),
    lambda **kw: OneHotCategorical(**kw),
    lambda **kw: Multinomial(3, **kw),
    lambda **kw: ExpRelaxedCategorical(_t(0.5), **kw),
    lambda **kw: RelaxedOneHotCategorical(_t(0.5), **kw),
]


@pytest.mark.parametrize("make", PROBS_OR_LOGITS + VECTOR_PROBS_OR_LOGITS)
def test_exactly_one_of_probs_and_logits(make):
    with pytest.raises(ValueError, match=BOTH_OR_NEITHER.replace("`", ".")):
        make()
    with pytest.raises(ValueError, match=BOTH_OR_NEITHER.replace("`", ".")):
        make(probs=_t([0.3, 0.7]), logits=_t([0.1, 0.2]))


@pytest.mark.parametrize("make", VECTOR_PROBS_OR_LOGITS)
def test_categorical_parameters_need_a_dimension(make):
    with pytest.raises(ValueError, match="`probs` parameter must be at least one-dimensional."):
        make(probs=_t(0.5))
    with pytest.raises(ValueError, match="`logits` parameter must be at least one-dimensional"):
        make(logits=_t(0.5))


@pytest.mark.parametrize("make,name", [
    (lambda: Bernoulli(_t([1.2])), "probs"),
    (lambda: Binomial(_t([1.5]), _t([0.5])), "total_count"),
    (lambda: Binomial(_t([-1.0]), _t([0.5])), "total_count"),
    (lambda: Geometric(_t([1.5])), "probs"),
    (lambda: NegativeBinomial(_t([3.0]), _t([1.0])), "probs"),
    (lambda: NegativeBinomial(_t([-3.0]), _t([0.1])), "total_count"),
    (lambda: Poisson(_t([-1.0])), "rate"),
    (lambda: Categorical(_t([0.5, -0.1])), "probs"),
    (lambda: OneHotCategorical(logits=_t([0.5, math.nan])), "logits"),
    (lambda: RelaxedBernoulli(_t(0.3), _t([1.5])), "probs"),
])
def test_invalid_parameters_raise(make, name):
    with pytest.raises(ValueError, match=f"Expected parameter {name} "):
        make()


def test_validate_args_false_skips_the_checks():
    assert Bernoulli(_t([1.2]), validate_args=False).probs.item() == 1.2
    assert Poisson(_t([-1.0]), validate_args=False).rate.item() == -1.0
    assert Geometric(_t([0.0]), validate_args=False).mean.item() == math.inf


def test_geometric_probs_must_be_positive():
    with pytest.raises(ValueError) as info:
        Geometric(_t([0.0, 0.5]))
    message = str(info.value)
    assert message.startswith("Expected parameter probs (Tensor of shape (2,)) of distribution "
                              "Geometric(probs: ember.Size([2])) to be positive but found")
    assert message.endswith("tensor([0.], dtype=ember.float64)")


def test_multinomial_total_count_must_be_an_int():
    with pytest.raises(NotImplementedError, match="inhomogeneous total_count is not supported"):
        Multinomial(2.5, _t([0.5, 0.5]))
    with pytest.raises(NotImplementedError, match="inhomogeneous total_count"):
        Multinomial(_t(5.0), _t([0.5, 0.5]))


def test_binomial_inhomogeneous_total_count():
    d = Binomial(_t([3.0, 5.0]), _t([0.2, 0.5]))
    with pytest.raises(NotImplementedError, match="by `entropy`."):
        d.entropy()
    with pytest.raises(NotImplementedError, match="by `enumerate_support`."):
        d.enumerate_support()
    _close(d.log_prob(_t([3.0, 5.0])), [3 * math.log(0.2), 5 * math.log(0.5)])


@pytest.mark.parametrize("d,value", [
    (Bernoulli(_t([0.3])), _t([0.5])),
    (Binomial(_t([3.0]), _t([0.3])), _t([4.0])),
    (Categorical(_t([0.5, 0.5])), ember.tensor([2])),
    (OneHotCategorical(_t([0.5, 0.5])), _t([1.0, 1.0])),
    (Geometric(_t([0.3])), _t([-1.0])),
    (Poisson(_t([1.0])), _t([1.5])),
    (Multinomial(3, _t([0.5, 0.5])), _t([2.0, 2.0])),
    (NegativeBinomial(_t([3.0]), _t([0.3])), _t([0.5])),
])
def test_values_outside_the_support_raise(d, value):
    with pytest.raises(ValueError, match="to be within the support"):
        d.log_prob(value)


# --- closed forms ------------------------------------------------------------------------------

def test_bernoulli_closed_forms():
    d = Bernoulli(_t([0.3, 0.5, 0.8]))
    _close(d.log_prob(_t([[0.0], [1.0]])), [[math.log(0.7), math.log(0.5), math.log(0.2)],
                                            [math.log(0.3), math.log(0.5), math.log(0.8)]])
    h = [-(p * math.log(p) + (1 - p) * math.log(1 - p)) for p in (0.3, 0.5, 0.8)]
    _close(d.entropy(), h)
    _close(d.mode, [0.0, math.nan, 1.0])
    _close(d.variance, [0.21, 0.25, 0.16])
    _close(Bernoulli(logits=_t([0.0, math.log(3.0)])).probs, [0.5, 0.75])
    assert Bernoulli(0.3).batch_shape == () and Bernoulli(0.3).probs.dtype == ember.float32


def test_binomial_closed_forms():
    d = Binomial(5, _t(0.3))
    _close(d.log_prob(_t(2.0)), math.log(10 * 0.3 ** 2 * 0.7 ** 3))
    _close(d.mean, 1.5)
    _close(d.variance, 1.05)
    _close(d.mode, 1.0)
    pmf = [math.comb(5, k) * 0.3 ** k * 0.7 ** (5 - k) for k in range(6)]
    _close(d.entropy(), -sum(p * math.log(p) for p in pmf))
    assert isinstance(Binomial.support, ember.distributions.constraints._Dependent)
    assert d.support.upper_bound.item() == 5
    assert Binomial(ember.tensor([3, 4]), _t([0.2, 0.5])).total_count.dtype == ember.float64
    _close(Binomial(_t([4.0, 0.0]), _t([1.0, 0.5])).mode, [4.0, 0.0])


def test_binomial_log_prob_gradient_at_even_odds():
    # d/dp [k log p + (n - k) log(1 - p)] = k/p - (n - k)/(1 - p): 2/0.5 - 3/0.5 = -2 at p = 0.5
    probs = _t([0.2, 0.5, 0.9], grad=True)
    Binomial(5, probs).log_prob(_t([0.0, 2.0, 5.0])).sum().backward()
    _close(probs.grad, [-6.25, -2.0, 50.0 / 9.0])
    logits = _t([0.0], grad=True)
    Binomial(4, logits=logits).log_prob(_t([1.0])).sum().backward()
    _close(logits.grad, [-1.0])                     # k - n sigmoid(0)


def test_categorical_normalizes_its_parameters():
    d = Categorical(_t([[2.0, 1.0, 1.0], [0.0, 0.0, 3.0]]))
    _close(d.probs, [[0.5, 0.25, 0.25], [0.0, 0.0, 1.0]])
    _close(d.log_prob(ember.tensor([0, 2])), [math.log(0.5), 0.0])
    _close(d.log_prob(_t([1.0, 2.0])), [math.log(0.25), 0.0])         # float indices too
    _close(d.mode, ember.tensor([0, 2]))
    _close(d.mean, [math.nan, math.nan])
    logits = Categorical(logits=_t([1.0, 2.0, 3.0])).logits
    _close(logits.exp().sum(), 1.0)
    _close(logits[2] - logits[0], 2.0)
    _close(Categorical(logits=_t([0.0, 0.0, 0.0, 0.0])).entropy(), math.log(4))


def test_categorical_with_impossible_categories():
    d = Categorical(logits=_t([-math.inf, 0.0, 0.0]))
    _close(d.entropy(), math.log(2))
    assert d.log_prob(ember.tensor(0)).item() == -math.inf
    assert set(d.sample((200,)).tolist()) == {1, 2}


def test_geometric_closed_forms():
    d = Geometric(_t([0.25, 1.0]))
    _close(d.log_prob(_t([3.0, 0.0])), [math.log(0.75 ** 3 * 0.25), 0.0])
    assert d.log_prob(_t([0.0, 2.0]))[1].item() == -math.inf
    _close(d.mean, [3.0, 0.0])
    _close(d.variance, [12.0, 0.0])
    _close(d.mode, [0.0, 0.0])
    p = 0.25
    _close(d.entropy()[0], (-(1 - p) * math.log(1 - p) - p * math.log(p)) / p)


def test_poisson_closed_forms():
    d = Poisson(_t([2.0, 0.0]))
    _close(d.log_prob(_t([3.0, 0.0])), [math.log(8 * math.exp(-2) / 6), 0.0])
    assert d.log_prob(_t([1.0, 1.0]))[1].item() == -math.inf
    _close(Poisson(_t([2.5])).mode, [2.0])
    with pytest.raises(NotImplementedError):
        d.entropy()


def test_multinomial_closed_forms():
    d = Multinomial(4, _t([0.2, 0.3, 0.5]))
    _close(d.log_prob(_t([1.0, 1.0, 2.0])), math.log(12 * 0.2 * 0.3 * 0.25))
    _close(d.mean, [0.8, 1.2, 2.0])
    _close(d.variance, [0.64, 0.84, 1.0])
    # the entropy, summed directly over the 15 outcomes
    outcomes = [(a, b, 4 - a - b) for a in range(5) for b in range(5 - a)]
    log_probs = d.log_prob(_t(outcomes))
    _close(d.entropy(), -(log_probs.exp() * log_probs).sum(), atol=1e-9)
    # a category of probability 0 counted 0 times adds nothing
    _close(Multinomial(2, _t([0.0, 1.0])).log_prob(_t([0.0, 2.0])), 0.0)
    with pytest.raises(NotImplementedError, match="does not implement mode"):
        d.mode


def test_negative_binomial_closed_forms():
    d = NegativeBinomial(3.0, _t([0.4]))
    _close(d.log_prob(_t([2.0])), [math.log(6 * 0.6 ** 3 * 0.4 ** 2)])
    _close(d.mean, [2.0])
    _close(d.variance, [2.0 / 0.6])
    _close(d.mode, [1.0])                       # floor(2 * 0.4 / 0.6)
    empty = NegativeBinomial(_t([0.0]), _t([0.5]))
    _close(empty.log_prob(_t([0.0])), [0.0])    # r = 0: all mass at 0
    assert empty.log_prob(_t([2.0])).item() == -math.inf


def _trapezoid(y, x):
    return ((y[1:] + y[:-1]) * (x[1:] - x[:-1])).sum() / 2


def test_relaxed_bernoulli_densities_integrate_to_one():
    x = ember.linspace(-60, 60, 200001, dtype=ember.float64)
    logit = LogitRelaxedBernoulli(_t(0.7), logits=_t(1.5))
    _close(_trapezoid(logit.log_prob(x).exp(), x), 1.0, atol=1e-6)
    y = ember.linspace(1e-9, 1 - 1e-9, 400001, dtype=ember.float64)
    relaxed = RelaxedBernoulli(_t(1.5), probs=_t(0.3))
    _close(_trapezoid(relaxed.log_prob(y).exp(), y), 1.0, atol=1e-4)
    assert relaxed.temperature.item() == 1.5
    _close(relaxed.logits, math.log(0.3 / 0.7))


def test_relaxed_one_hot_density_for_two_categories():
    """With K = 2 the Concrete density is one over x_1 in (0, 1) (x_2 = 1 - x_1); the
    ExpConcrete density of y = log x is it times x_1 x_2 (the Jacobian of exp on both)."""
    d = RelaxedOneHotCategorical(_t(0.8), _t([0.3, 0.7]))
    x1 = ember.linspace(1e-7, 1 - 1e-7, 100001, dtype=ember.float64)
    x = ember.stack([x1, 1 - x1], -1)
    _close(_trapezoid(d.log_prob(x).exp(), x1), 1.0, atol=1e-3)
    base = ExpRelaxedCategorical(_t(0.8), _t([0.3, 0.7]))
    _close(base.log_prob(x.log()), d.log_prob(x) + x.log().sum(-1), atol=1e-9)


# --- sampling ----------------------------------------------------------------------------------

def test_relaxed_one_hot_passes_validate_args_to_its_base():
    """As PyTorch: with validate_args=False the ExpRelaxedCategorical base does not check the
    log of a value off the simplex either, so log_prob gives nan instead of raising."""
    d = RelaxedOneHotCategorical(_t(0.5), _t([0.3, 0.7]), validate_args=False)
    assert d.base_dist._validate_args is False
    assert d.log_prob(_t([-1.0, 0.0])).isnan().item()
    with pytest.raises(ValueError, match="ExpRelaxedCategorical"):
        RelaxedOneHotCategorical(_t(0.5), _t([0.3, 0.7])).base_dist.log_prob(_t([-1.0, 0.0]).log())


def test_sample_dtypes():
    assert Bernoulli(_t([0.3])).sample().dtype == ember.float64
    assert Binomial(3, _t([0.3])).sample().dtype == ember.float64
    assert Poisson(_t([0.3])).sample().dtype == ember.float64
    assert Geometric(_t([0.3])).sample().dtype == ember.float64
    assert NegativeBinomial(3.0, _t([0.3])).sample().dtype == ember.float64
    assert Categorical(_t([0.3, 0.7])).sample().dtype == ember.int64
    assert OneHotCategorical(_t([0.3, 0.7])).sample().dtype == ember.float64
    assert Multinomial(3, _t([0.3, 0.7])).sample().dtype == ember.float64
    assert Bernoulli(0.3).sample().dtype == ember.float32


def test_categorical_frequencies():
    probs = [0.1, 0.6, 0.3]
    n = 20000
    samples = Categorical(_t(probs)).sample((n,))
    for k, p in enumerate(probs):
        freq = (samples == k).double().mean().item()
        assert abs(freq - p) < 6 * math.sqrt(p * (1 - p) / n)


def test_multinomial_samples_sum_to_total_count():
    d = Multinomial(7, _t([[0.2, 0.3, 0.5], [0.0, 0.1, 0.9]]))
    samples = d.sample((500,))
    assert samples.shape == (500, 2, 3)
    assert bool((samples.sum(-1) == 7).all())
    assert bool((samples[:, 1, 0] == 0).all())
    mean = samples.mean(0)
    assert bool(((mean - d.mean).abs() < 6 * (d.variance / 500).sqrt() + 1e-12).all())


def test_geometric_and_negative_binomial_moments():
    n = 20000
    geo = Geometric(_t([0.2, 1.0]))
    samples = geo.sample((n,))
    assert abs(samples[:, 0].mean().item() - 4.0) < 6 * math.sqrt(20.0 / n)
    assert bool((samples[:, 1] == 0).all())
    nb = NegativeBinomial(_t([2.5]), _t([0.6]))
    samples = nb.sample((n,))
    assert abs(samples.mean().item() - nb.mean.item()) < 6 * math.sqrt(nb.variance.item() / n)
    assert abs(samples.var().item() - nb.variance.item()) < 0.1 * nb.variance.item()


def test_relaxed_one_hot_tends_to_one_hot_at_low_temperature():
    d = RelaxedOneHotCategorical(_t(0.05), _t([0.2, 0.8]))
    samples = d.sample((4000,))
    _close(samples.sum(-1), ember.ones(4000, dtype=ember.float64), atol=1e-12)
    assert (samples.max(-1)[0] > 0.99).double().mean().item() > 0.9
    assert abs(samples[:, 1].mean().item() - 0.8) < 0.05


# --- reparameterized gradients -----------------------------------------------------------------

def test_logit_relaxed_bernoulli_rsample_gradient():
    """y = (logits + noise) / t: dy/dlogits = 1 / t and dy/dt = -y / t."""
    t, logits = _t(0.4, grad=True), _t([0.3, -1.0], grad=True)
    y = LogitRelaxedBernoulli(t, logits=logits).rsample((5,))
    grad_logits, grad_t = ember.autograd.grad(y.sum(), [logits, t])
    _close(grad_logits, [5 / 0.4, 5 / 0.4])
    _close(grad_t, -y.detach().sum() / 0.4, atol=1e-9)


def _seeded_rsample(make, value):
    ember.manual_seed(3)
    return make(value).rsample((6,))


@pytest.mark.parametrize("make", [
    lambda t: ExpRelaxedCategorical(t, _t([0.2, 0.5, 0.3])),
    lambda t: RelaxedOneHotCategorical(t, _t([[0.2, 0.5, 0.3], [0.6, 0.2, 0.2]])),
    lambda t: RelaxedBernoulli(t, _t([0.2, 0.7])),
])
def test_relaxed_rsample_temperature_gradient_matches_finite_difference(make):
    weights_shape = _seeded_rsample(make, _t(0.7)).shape
    weights = ember.linspace(-1, 2, math.prod(weights_shape), dtype=ember.float64)
    weights = weights.reshape(weights_shape)
    t = _t(0.7, grad=True)
    (grad,) = ember.autograd.grad((_seeded_rsample(make, t) * weights).sum(), [t])
    h = 1e-6
    plus = (_seeded_rsample(make, _t(0.7 + h)) * weights).sum()
    minus = (_seeded_rsample(make, _t(0.7 - h)) * weights).sum()
    _close(grad, (plus - minus) / (2 * h), atol=1e-5)


def test_straight_through_gradient_is_that_of_the_probabilities():
    logits = _t([0.5, -0.2, 1.0], grad=True)
    weights = _t([1.0, -2.0, 0.5])
    d = OneHotCategoricalStraightThrough(logits=logits)
    sample = d.rsample((4,))
    assert bool((sample.detach().sum(-1) == 1).all())
    (got,) = ember.autograd.grad((sample * weights).sum(), [logits], retain_graph=True)
    (expected,) = ember.autograd.grad(4 * (d.probs * weights).sum(), [logits])
    _close(got, expected)
    assert OneHotCategoricalStraightThrough.has_rsample and not OneHotCategorical.has_rsample


# --- KL divergences ----------------------------------------------------------------------------

def _kl_by_sum(p, q, values):
    """sum over ``values`` (leading dimension) of p(x) (log p(x) - log q(x))."""
    log_p = p.log_prob(values)
    return (log_p.exp() * (log_p - q.log_prob(values))).sum(0)


@pytest.mark.parametrize("p,q,values", [
    (Bernoulli(_t([0.3, 0.9])), Bernoulli(_t([0.6, 0.2])), _t([[0.0], [1.0]])),
    (Binomial(4, _t([0.3, 0.9])), Binomial(4, _t([0.6, 0.2])), _t([[k] for k in range(5)])),
    (Categorical(_t([0.1, 0.6, 0.3])), Categorical(_t([0.4, 0.4, 0.2])), ember.arange(3)),
    (OneHotCategorical(_t([0.1, 0.6, 0.3])), OneHotCategorical(_t([0.4, 0.4, 0.2])),
     ember.eye(3, dtype=ember.float64)),
    (Geometric(_t([0.3])), Geometric(_t([0.6])), _t([[k] for k in range(300)])),
    (Poisson(_t([2.0, 5.0])), Poisson(_t([3.0, 1.0])), _t([[k] for k in range(120)])),
    (Bernoulli(_t([0.3])), Poisson(_t([0.7])), _t([[0.0], [1.0]])),
])
def test_kl_matches_a_direct_sum(p, q, values):
    _close(kl_divergence(p, q), _kl_by_sum(p, q, values), atol=1e-9)


def test_kl_poisson_matches_monte_carlo():
    p, q = Poisson(_t([4.0])), Poisson(_t([2.5]))
    x = p.sample((40000,))
    ratio = p.log_prob(x) - q.log_prob(x)
    assert abs(ratio.mean().item() - kl_divergence(p, q).item()) < 6 * ratio.std().item() / 200


def test_kl_special_values():
    assert kl_divergence(Bernoulli(_t([0.3])), Bernoulli(_t([0.0]))).item() == math.inf
    assert kl_divergence(Bernoulli(_t([0.0])), Bernoulli(_t([0.0]))).item() == 0.0
    inf = kl_divergence(Poisson(_t([1.0, 2.0])), Binomial(3, _t([0.2, 0.5])))
    _close(inf, [math.inf, math.inf])
    _close(kl_divergence(Poisson(_t([1.0])), Bernoulli(_t([0.5]))), [math.inf])
    more_trials = kl_divergence(Binomial(_t([4.0]), _t([0.3])), Binomial(3, _t([0.3])))
    assert more_trials.item() == math.inf
    with pytest.raises(NotImplementedError, match="q.total_count > p.total_count"):
        kl_divergence(Binomial(2, _t([0.3])), Binomial(3, _t([0.3])))
    cat = kl_divergence(Categorical(_t([0.5, 0.5, 0.0])), Categorical(_t([0.5, 0.0, 0.5])))
    assert cat.item() == math.inf


# --- expand and enumerate_support --------------------------------------------------------------

def test_expand_keeps_parameters_and_counts():
    d = Binomial(_t([3.0]), logits=_t([0.2])).expand((4, 1))
    assert d.batch_shape == (4, 1) and d.total_count.shape == (4, 1)
    _close(d.log_prob(_t([1.0])), ember.full((4, 1), math.log(3) + 0.2 - 3 * math.log1p(
        math.exp(0.2)), dtype=ember.float64))
    m = Multinomial(5, _t([0.2, 0.8])).expand((3,))
    assert m.batch_shape == (3,) and m.event_shape == (2,) and m.total_count == 5
    assert m.sample().shape == (3, 2)
    c = Categorical(_t([0.2, 0.8])).expand((2, 3))
    assert c.probs.shape == (2, 3, 2) and c.sample().shape == (2, 3)
    r = RelaxedBernoulli(_t(0.5), _t([0.3, 0.6])).expand((4, 2))
    assert type(r) is RelaxedBernoulli and r.rsample().shape == (4, 2)
    assert r.temperature.item() == 0.5


def test_enumerate_support_values():
    _close(Bernoulli(_t([0.2, 0.7])).enumerate_support(expand=False), [[0.0], [1.0]])
    _close(Binomial(2, _t([0.2, 0.7])).enumerate_support(),
           [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]])
    support = Categorical(_t([[0.2, 0.8]] * 3)).enumerate_support()
    assert support.dtype == ember.int64 and support.tolist() == [[0, 0, 0], [1, 1, 1]]
    one_hot = OneHotCategorical(_t([0.2, 0.3, 0.5])).enumerate_support()
    _close(one_hot, ember.eye(3, dtype=ember.float64))


def test_geometric_entropy_of_probs_below_eps_rounds_as_pytorch():
    # the log-odds are clamped at eps; PyTorch's (1 - p) l - log(sigmoid(l)) then rounds to
    # 0 below eps (or to a few ulps just above it) instead of growing as 1/p
    g = Geometric(ember.tensor([1e-30, 1e-8, 1e-7, 1.3e-7, 0.5], dtype=ember.float32))
    got = [round(v, 3) for v in g.entropy().tolist()]
    assert got == [0.0, 0.0, 19.073, 14.672, 1.386]
    g = Geometric(_t([1e-40, 1e-12, 0.5]))
    assert [round(v, 4) for v in g.entropy().tolist()] == [0.0, 28.6278, 1.3863]
