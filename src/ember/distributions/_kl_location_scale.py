"""KL divergences KL(p || q) whose p is a location-scale family (Normal, Uniform, Exponential,
Cauchy, Laplace, Gumbel, HalfNormal, Pareto).

Each closed form is E_p[log p(X)] - E_p[log q(X)] = -H(p) - E_p[log q(X)], with the moments
of p that log q needs; the divergence is infinite where p puts mass outside q's support (or
where a moment E_p[log q] needs is infinite).
"""

import math

import ember
from ember.distributions.beta import Beta
from ember.distributions.cauchy import Cauchy
from ember.distributions.continuous_bernoulli import ContinuousBernoulli
from ember.distributions.exponential import Exponential
from ember.distributions.gamma import Gamma
from ember.distributions.gumbel import Gumbel
from ember.distributions.half_normal import HalfNormal
from ember.distributions.kl import _infinite_like, register_kl
from ember.distributions.laplace import Laplace
from ember.distributions.normal import Normal
from ember.distributions.pareto import Pareto
from ember.distributions.uniform import Uniform
from ember.distributions.utils import euler_constant

__all__ = []

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _inf_where(bad, value):
    """``value`` with inf where ``bad``."""
    return ember.where(bad, _infinite_like(value), value)


def _x_log_x(x):
    """x log x, with 0 log 0 = 0."""
    return ember.xlogy(x, x)


# -- E_p[log q(X)] for each q, from the moments of p that it needs ------------------------

def _expected_log_normal(q, mean, second_central):
    """E log q for q = Normal(mu, sigma): -log sigma - log sqrt(2 pi)
    - (Var X + (E X - mu)^2) / (2 sigma^2)."""
    return (-q.scale.log() - _HALF_LOG_2PI
            - (second_central + (mean - q.loc).pow(2)) / (2 * q.scale.pow(2)))


def _expected_log_gamma(q, mean, mean_log):
    """E log q for q = Gamma(alpha, beta): alpha log beta - lgamma(alpha)
    + (alpha - 1) E log X - beta E X."""
    alpha, beta = q.concentration, q.rate
    return (ember.xlogy(alpha, beta) - ember.lgamma(alpha) + (alpha - 1) * mean_log
            - beta * mean)


def _expected_log_exponential(q, mean):
    """E log q for q = Exponential(lambda): log lambda - lambda E X."""
    return q.rate.log() - q.rate * mean


def _expected_log_gumbel(q, mean, log_mean_exp_neg_z):
    """E log q for q = Gumbel(mu, beta), with z = (X - mu) / beta:
    -log beta - E z - E exp(-z), given ``log_mean_exp_neg_z`` = log E exp(-z)."""
    return -q.scale.log() - (mean - q.loc) / q.scale - ember.exp(log_mean_exp_neg_z)


def _expected_log_pareto(q, mean_log):
    """E log q for q = Pareto(s, alpha): log alpha + alpha log s - (alpha + 1) E log X."""
    return q.alpha.log() + q.alpha * q.scale.log() - (q.alpha + 1) * mean_log


# -- p = Normal -----------------------------------------------------------------------------

@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    # log(s_q / s_p) + (s_p^2 + (m_p - m_q)^2) / (2 s_q^2) - 1/2
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    # E exp(-z) = exp(-(m - mu) / beta + s^2 / (2 beta^2)) for X ~ N(m, s^2)
    log_mgf = (q.loc - p.loc) / q.scale + 0.5 * (p.scale / q.scale).pow(2)
    return -p.entropy() - _expected_log_gumbel(q, p.loc, log_mgf)


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    # E|X - mu_q| for X ~ N(m, s^2), d = m - mu_q:
    # s sqrt(2/pi) exp(-d^2 / (2 s^2)) + d erf(d / (s sqrt 2))
    d = p.loc - q.loc
    mean_abs = (p.scale * math.sqrt(2 / math.pi) * ember.exp(-0.5 * (d / p.scale).pow(2))
                + d * ember.erf(d / (p.scale * math.sqrt(2))))
    return -p.entropy() + ember.log(2 * q.scale) + mean_abs / q.scale


@register_kl(Normal, Beta)
@register_kl(Normal, ContinuousBernoulli)
@register_kl(Normal, Exponential)
@register_kl(Normal, Gamma)
@register_kl(Normal, Pareto)
@register_kl(Normal, Uniform)
def _kl_normal_infinity(p, q):
    return _infinite_like(p.loc)


# -- p = Uniform ----------------------------------------------------------------------------

def _uniform_mean_log(low, high):
    """E log X for X uniform on [low, high], low >= 0: (h log h - l log l) / (h - l) - 1."""
    return (_x_log_x(high) - _x_log_x(low)) / (high - low) - 1


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _inf_where((q.low > p.low) | (q.high < p.high), result)


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    # E log(1 - X) is E log Y for Y = 1 - X uniform on [1 - high, 1 - low]
    low = p.low.clamp(0, 1)
    high = p.high.clamp(0, 1)
    a, b = q.concentration1, q.concentration0
    log_beta = ember.lgamma(a) + ember.lgamma(b) - ember.lgamma(a + b)
    expected = ((a - 1) * _uniform_mean_log(low, high)
                + (b - 1) * _uniform_mean_log(1 - high, 1 - low) - log_beta)
    result = -p.entropy() - expected
    return _inf_where((p.low < 0) | (p.high > 1), result)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_continuous_bernoulli(p, q):
    # log q(x) is affine in x, so E log q(X) = log q(E X). As in PyTorch, a uniform that
    # touches either end of [0, 1] gives inf.
    outside = (p.low <= 0) | (p.high >= 1)
    mean = ember.where(outside, ember.full_like(p.low, 0.5), p.mean)
    with_q = q.log_prob(mean)
    return _inf_where(outside, -p.entropy() - with_q)


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = -p.entropy() - _expected_log_exponential(q, p.mean)
    return _inf_where(p.low < 0, result)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    mean_log = _uniform_mean_log(p.low.clamp(min=0), p.high.clamp(min=0))
    result = -p.entropy() - _expected_log_gamma(q, p.mean, mean_log)
    return _inf_where(p.low < 0, result)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    # with a, b = (low - mu) / beta, (high - mu) / beta:
    # E exp(-z) = (exp(-a) - exp(-b)) / (b - a) = exp(-a) (-expm1(a - b)) / (b - a)
    a = (p.low - q.loc) / q.scale
    b = (p.high - q.loc) / q.scale
    log_mgf = -a + ember.log(-ember.expm1(a - b)) - ember.log(b - a)
    return -p.entropy() - _expected_log_gumbel(q, p.mean, log_mgf)


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    return -p.entropy() - _expected_log_normal(q, p.mean, p.variance)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    outside = p.low < q.scale
    low = ember.where(outside, q.scale, p.low)
    high = ember.where(outside, q.scale + 1, p.high)
    result = -p.entropy() - _expected_log_pareto(q, _uniform_mean_log(low, high))
    return _inf_where(outside, result)


# -- p = Exponential ------------------------------------------------------------------------

@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    # log(l_p / l_q) + l_q / l_p - 1
    rate_ratio = q.rate / p.rate
    return rate_ratio - 1 - rate_ratio.log()


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    # E log X = -gamma - log(rate)
    mean_log = -euler_constant - p.rate.log()
    return -p.entropy() - _expected_log_gamma(q, p.mean, mean_log)


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    # E exp(-X / beta) = rate / (rate + 1 / beta), so
    # E exp(-z) = exp(mu / beta) rate beta / (rate beta + 1)
    rate_scale = p.rate * q.scale
    log_mgf = q.loc / q.scale + ember.log(rate_scale / (rate_scale + 1))
    return -p.entropy() - _expected_log_gumbel(q, p.mean, log_mgf)


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    return -p.entropy() - _expected_log_normal(q, p.mean, p.variance)


@register_kl(Exponential, Beta)
@register_kl(Exponential, ContinuousBernoulli)
@register_kl(Exponential, Pareto)
@register_kl(Exponential, Uniform)
def _kl_exponential_infinity(p, q):
    return _infinite_like(p.rate)


# -- p = Gumbel -----------------------------------------------------------------------------

@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    # with X = mu_p + beta_p G, G standard Gumbel (E G = gamma, E exp(-t G) = Gamma(1 + t)):
    # E exp(-z) = exp((mu_q - mu_p) / beta_q) Gamma(1 + beta_p / beta_q)
    log_mgf = (q.loc - p.loc) / q.scale + ember.lgamma(1 + p.scale / q.scale)
    return -p.entropy() - _expected_log_gumbel(q, p.mean, log_mgf)


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    return -p.entropy() - _expected_log_normal(q, p.mean, p.variance)


@register_kl(Gumbel, Beta)
@register_kl(Gumbel, ContinuousBernoulli)
@register_kl(Gumbel, Exponential)
@register_kl(Gumbel, Gamma)
@register_kl(Gumbel, Pareto)
@register_kl(Gumbel, Uniform)
def _kl_gumbel_infinity(p, q):
    return _infinite_like(p.loc)


# -- p = Laplace ----------------------------------------------------------------------------

@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    # log(b_q / b_p) + |d| / b_q + (b_p / b_q) exp(-|d| / b_p) - 1, d = mu_p - mu_q
    scale_ratio = p.scale / q.scale
    dist = (p.loc - q.loc).abs()
    return (-scale_ratio.log() + dist / q.scale
            + scale_ratio * ember.exp(-dist / p.scale) - 1)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    return -p.entropy() - _expected_log_normal(q, p.mean, p.variance)


@register_kl(Laplace, Beta)
@register_kl(Laplace, ContinuousBernoulli)
@register_kl(Laplace, Exponential)
@register_kl(Laplace, Gamma)
@register_kl(Laplace, Pareto)
@register_kl(Laplace, Uniform)
def _kl_laplace_infinity(p, q):
    return _infinite_like(p.loc)


# -- p = Pareto -----------------------------------------------------------------------------

def _pareto_moments(p, min_alpha):
    """(mean, variance, E log X) of p, with alpha clamped to ``min_alpha`` + 1 where it is at
    most ``min_alpha`` (those entries are set to inf by the caller)."""
    alpha = ember.where(p.alpha > min_alpha, p.alpha, ember.full_like(p.alpha, min_alpha + 1))
    mean = alpha * p.scale / (alpha - 1)
    safe_var = ember.where(alpha > 2, alpha, ember.full_like(alpha, 3.0))
    variance = p.scale.pow(2) * safe_var / ((safe_var - 1).pow(2) * (safe_var - 2))
    return mean, variance, p.scale.log() + alpha.reciprocal()


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    # log(a_p / a_q) + a_q log(s_p / s_q) + a_q / a_p - 1, inf where s_p < s_q
    result = ((p.alpha / q.alpha).log() + q.alpha * (p.scale / q.scale).log()
              + q.alpha / p.alpha - 1)
    return _inf_where(p.scale < q.scale, result)


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    mean, _, _ = _pareto_moments(p, 1)
    result = -p.entropy() - _expected_log_exponential(q, mean)
    return _inf_where(p.alpha <= 1, result)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    mean, _, mean_log = _pareto_moments(p, 1)
    result = -p.entropy() - _expected_log_gamma(q, mean, mean_log)
    return _inf_where(p.alpha <= 1, result)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    mean, variance, _ = _pareto_moments(p, 2)
    result = -p.entropy() - _expected_log_normal(q, mean, variance)
    return _inf_where(p.alpha <= 2, result)


@register_kl(Pareto, Beta)
@register_kl(Pareto, ContinuousBernoulli)
@register_kl(Pareto, Uniform)
def _kl_pareto_infinity(p, q):
    return _infinite_like(p.scale)


# -- Cauchy and HalfNormal ------------------------------------------------------------------

@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    # log(((g_p + g_q)^2 + (m_p - m_q)^2) / (4 g_p g_q))
    num = (p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)
    return (num / (4 * p.scale * q.scale)).log()


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    # as two centred normals: log(s_q / s_p) + s_p^2 / (2 s_q^2) - 1/2
    var_ratio = (p.scale / q.scale).pow(2)
    return 0.5 * (var_ratio - 1 - var_ratio.log())
