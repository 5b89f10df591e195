"""KL divergences whose first distribution is discrete (Bernoulli, Binomial, Categorical,
OneHotCategorical, Geometric, Poisson)."""

import ember
from ember.distributions.bernoulli import Bernoulli
from ember.distributions.binomial import Binomial
from ember.distributions.categorical import Categorical
from ember.distributions.geometric import Geometric
from ember.distributions.kl import _infinite_like, register_kl
from ember.distributions.one_hot_categorical import OneHotCategorical
from ember.distributions.poisson import Poisson

__all__ = []

_INF = float("inf")


def _bernoulli_terms(p, q):
    """p (l_p - l_q) + log(1 - p) - log(1 - q), l the log-odds: the KL of Bernoulli(p) from
    Bernoulli(q), p log(p / q) + (1 - p) log((1 - p) / (1 - q)), regrouped."""
    return p.probs * (p.logits - q.logits) + ember.log1p(-p.probs) - ember.log1p(-q.probs)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    """p log(p / q) + (1 - p) log((1 - p) / (1 - q)): inf where q gives 0 to an outcome of
    p; a term of an outcome p never gives is 0."""
    soft_p = ember.nn.functional.softplus
    ones = p.probs * (soft_p(-q.logits) - soft_p(-p.logits))          # p log(p / q)
    zeros = (1 - p.probs) * (soft_p(q.logits) - soft_p(p.logits))     # (1-p) log((1-p)/(1-q))
    ones = ember.where(q.probs == 0, _INF, ones)
    ones = ember.where(p.probs == 0, 0.0, ones)
    zeros = ember.where(q.probs == 1, _INF, zeros)
    zeros = ember.where(p.probs == 1, 0.0, zeros)
    return ones + zeros


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    """n times the Bernoulli KL for equal counts; inf where p has more trials than q (p
    reaches counts q cannot); fewer trials in p than in q is not implemented."""
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count "
                                  "is not implemented")
    kl = p.total_count * _bernoulli_terms(p, q)
    return ember.where(p.total_count > q.total_count, _INF, kl)


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    """sum_k p_k (log p_k - log q_k): inf where q_k = 0 < p_k; 0 terms where p_k = 0."""
    t = p.probs * (p.logits - q.logits)
    t = ember.where((q.probs == 0).expand_as(t), _INF, t)
    t = ember.where((p.probs == 0).expand_as(t), 0.0, t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    """The KL of the underlying categorical distributions."""
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    """-H(p) - E_p[log q(X)], E_p[log q(X)] = log q + E_p[X] log(1 - q) with
    E_p[X] = (1 - p) / p, written logit(q) + log(1 - q) / p."""
    return -p.entropy() - ember.log1p(-q.probs) / p.probs - q.logits


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    """r_p log(r_p / r_q) - (r_p - r_q)."""
    return p.rate * (ember.log(p.rate) - ember.log(q.rate)) - (p.rate - q.rate)


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    """-H(p) - E_p[log q(X)], E_p[log q(X)] = p log r - r (log 0! = log 1! = 0)."""
    return -p.entropy() - (p.probs * ember.log(q.rate) - q.rate)


@register_kl(Poisson, Bernoulli)
@register_kl(Poisson, Binomial)
def _kl_poisson_infinity(p, q):
    """inf: p puts mass on every count, q on finitely many."""
    return _infinite_like(p.rate)
