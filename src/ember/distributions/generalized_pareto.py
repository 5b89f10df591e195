"""GeneralizedPareto: the limit distribution of excesses over a high threshold."""

import math

import ember
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.utils import broadcast_all

__all__ = ["GeneralizedPareto"]


class GeneralizedPareto(Distribution):
    """The generalized Pareto distribution with location ``loc``, scale ``scale`` and shape
    ``concentration`` (xi): its survival function is (1 + xi z) ** (-1 / xi) with
    z = (x - loc) / scale, or exp(-z) when xi = 0.

    Special cases: Exponential (loc = 0, xi = 0), Pareto (xi > 0, loc = scale / xi) and
    Uniform (xi = -1). The support is [loc, inf) for xi >= 0 and [loc, loc - scale / xi]
    for xi < 0.
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive,
                       "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        super().__init__(self.loc.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(GeneralizedPareto, batch_shape, _instance,
                             ("loc", "scale", "concentration"))
        return new

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        bound = self.loc - self.scale / self.concentration   # (floating for an integer loc)
        upper = ember.where(self.concentration < 0, bound, ember.full_like(bound, math.inf))
        return constraints.interval(self.loc, upper)

    def _z(self, x):
        return (x - self.loc) / self.scale

    def _safe_concentration(self):
        """(xi ~ 0, xi with those entries replaced by ones): |xi| <= 1e-8 takes the xi = 0
        formula (the general one loses precision there), and the general branch stays finite
        (and its gradient too) where it is not selected."""
        is_zero = self.concentration.abs() <= 1e-8
        return is_zero, ember.where(is_zero, ember.ones_like(self.concentration),
                                    self.concentration)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = ember.rand(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.icdf(u)

    def log_prob(self, value):
        # log f = -log(scale) - (1 / xi + 1) log1p(xi z)   (-log(scale) - z when xi = 0);
        # the term is 0 where 1 / xi + 1 = 0 (xi = -1, the uniform case).
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        is_zero, xi = self._safe_concentration()
        coef = xi.reciprocal() + 1
        term = ember.where(coef == 0, ember.zeros_like(coef), coef * ember.log1p(xi * z))
        return -self.scale.log() - ember.where(is_zero, z, term)

    def log_survival_function(self, value):
        """log(1 - F(value)) = -log1p(xi z) / xi (-z when xi = 0)."""
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        is_zero, xi = self._safe_concentration()
        return ember.where(is_zero, -z, -ember.log1p(xi * z) / xi)

    def log_cdf(self, value):
        """log F(value) = log(1 - exp(s)), s the log survival, computed as log(-expm1(s))
        near s = 0 and as log1p(-exp(s)) further down (each accurate in its range)."""
        s = self.log_survival_function(value)
        near = s > -math.log(2)
        fill = ember.full_like(s, -1.0)         # keeps the branch not taken finite
        return ember.where(near, ember.log(-ember.expm1(ember.where(near, s, fill))),
                           ember.log1p(-ember.exp(ember.where(near, fill, s))))

    def cdf(self, value):
        return ember.exp(self.log_cdf(value))

    def icdf(self, value):
        # z = ((1 - p) ** -xi - 1) / xi = expm1(-xi log1p(-p)) / xi   (-log1p(-p) when xi = 0)
        log1mp = ember.log1p(-value)
        is_zero, xi = self._safe_concentration()
        z = ember.where(is_zero, -log1mp, ember.expm1(-xi * log1mp) / xi)
        return self.loc + self.scale * z

    @property
    def mean(self):
        xi = self.concentration
        valid = xi < 1
        safe = ember.where(valid, xi, ember.zeros_like(xi))
        return ember.where(valid, self.loc + self.scale / (1 - safe),
                           ember.full_like(xi, math.nan))

    @property
    def variance(self):
        xi = self.concentration
        valid = xi < 0.5
        safe = ember.where(valid, xi, ember.zeros_like(xi))
        return ember.where(valid, self.scale.pow(2) / ((1 - safe).pow(2) * (1 - 2 * safe)),
                           ember.full_like(xi, math.nan))

    @property
    def mode(self):
        return self.loc

    def entropy(self):
        return self.scale.log() + self.concentration + 1
