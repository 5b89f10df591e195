"""KL divergences KL(p || q) whose p is a gamma-group family (Gamma and so Chi2, Beta,
Dirichlet, ContinuousBernoulli).

Most are -H(p) - E_p[log q(X)], with the moments of p that log q needs (psi is the digamma
function: E[log X] = psi(c) - log(rate) for X ~ Gamma(c, rate), psi(a) - psi(a + b) for
X ~ Beta(a, b)); the divergence is infinite where p puts mass outside q's support.
"""

import math

import ember
from ember.distributions.beta import Beta
from ember.distributions.continuous_bernoulli import ContinuousBernoulli
from ember.distributions.dirichlet import Dirichlet
from ember.distributions.exponential import Exponential
from ember.distributions.gamma import Gamma
from ember.distributions.gumbel import Gumbel
from ember.distributions.kl import _infinite_like, register_kl
from ember.distributions.normal import Normal
from ember.distributions.pareto import Pareto
from ember.distributions.uniform import Uniform

__all__ = []


def _normal_cross_entropy(mean, variance, q):
    """-E[log q(X)] for q normal and X of the given mean and variance."""
    var_q = q.scale.pow(2)
    return (0.5 * ember.log(2 * math.pi * var_q)
            + (variance + (mean - q.loc).pow(2)) / (2 * var_q))


# --- p = Beta ---------------------------------------------------------------------------------

@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    a1, b1 = p.concentration1, p.concentration0
    a2, b2 = q.concentration1, q.concentration0
    log_beta_p = ember.lgamma(a1) + ember.lgamma(b1) - ember.lgamma(a1 + b1)
    log_beta_q = ember.lgamma(a2) + ember.lgamma(b2) - ember.lgamma(a2 + b2)
    return (log_beta_q - log_beta_p + (a1 - a2) * ember.digamma(a1)
            + (b1 - b2) * ember.digamma(b1) + (a2 - a1 + b2 - b1) * ember.digamma(a1 + b1))


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_continuous_bernoulli(p, q):
    # log q(x) = x logit(q) + log(1 - q) + log C(q)
    return (-p.entropy() - p.mean * q.logits - ember.log1p(-q.probs)
            - q._cont_bern_log_norm())


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    # -log q(x) = lgamma(c) - c log(rate) - (c - 1) log x + rate x
    mean_log = ember.digamma(p.concentration1) - ember.digamma(
        p.concentration1 + p.concentration0)
    return (-p.entropy() + ember.lgamma(q.concentration)
            - q.concentration * q.rate.log() - (q.concentration - 1) * mean_log
            + q.rate * p.mean)


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    return -p.entropy() + _normal_cross_entropy(p.mean, p.variance, q)


@register_kl(Beta, Pareto)
def _kl_beta_pareto(p, q):
    # Pareto's support [scale, inf) never covers (0, scale)
    return _infinite_like(p.concentration1)


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    outside = (q.low > 0) | (q.high < 1)
    return ember.where(outside, _infinite_like(result), result)


# --- p = ContinuousBernoulli ------------------------------------------------------------------

@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    # log p(x) - log q(x) = x (logit p - logit q) + log((1 - p) / (1 - q)) + log(C(p) / C(q))
    log_terms_p = p._cont_bern_log_norm() + ember.log1p(-p.probs)
    log_terms_q = q._cont_bern_log_norm() + ember.log1p(-q.probs)
    return p.mean * (p.logits - q.logits) + log_terms_p - log_terms_q


@register_kl(ContinuousBernoulli, Exponential)
def _kl_continuous_bernoulli_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_continuous_bernoulli_normal(p, q):
    return -p.entropy() + _normal_cross_entropy(p.mean, p.variance, q)


@register_kl(ContinuousBernoulli, Pareto)
def _kl_continuous_bernoulli_pareto(p, q):
    return _infinite_like(p.probs)


@register_kl(ContinuousBernoulli, Uniform)
def _kl_continuous_bernoulli_uniform(p, q):
    # as PyTorch: infinite unless q's interval strictly contains [0, 1]
    result = -p.entropy() + (q.high - q.low).log()
    outside = (q.low >= 0) | (q.high <= 1)
    return ember.where(outside, _infinite_like(result), result)


# --- p = Dirichlet ----------------------------------------------------------------------------

@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    cp, cq = p.concentration, q.concentration
    total_p, total_q = cp.sum(-1), cq.sum(-1)
    log_norms = (ember.lgamma(total_p) - ember.lgamma(total_q)
                 - (ember.lgamma(cp) - ember.lgamma(cq)).sum(-1))
    mean_log = ember.digamma(cp) - ember.digamma(total_p).unsqueeze(-1)
    return log_norms + ((cp - cq) * mean_log).sum(-1)


# --- p = Gamma (and Chi2) ---------------------------------------------------------------------

@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    cp, rp, cq, rq = p.concentration, p.rate, q.concentration, q.rate
    return (cq * ember.log(rp / rq) + ember.lgamma(cq) - ember.lgamma(cp)
            + (cp - cq) * ember.digamma(cp) + (rq - rp) * (cp / rp))


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    # -log q(x) = log scale + (x - loc) / scale + exp(-(x - loc) / scale), and
    # E[exp(-x / scale)] = (1 + 1 / (scale rate))^(-c), the gamma's moment generating function
    c, rate, loc, scale = p.concentration, p.rate, q.loc, q.scale
    return (-p.entropy() + scale.log() + (p.mean - loc) / scale
            + ember.exp(loc / scale) * (1 + (scale * rate).reciprocal()).pow(-c))


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    return -p.entropy() + _normal_cross_entropy(p.mean, p.variance, q)


@register_kl(Gamma, Beta)
@register_kl(Gamma, ContinuousBernoulli)
@register_kl(Gamma, Pareto)
@register_kl(Gamma, Uniform)
def _kl_gamma_infinity(p, q):
    # q's support is bounded (or bounded below by a positive scale): p's mass outside it
    return _infinite_like(p.concentration)
