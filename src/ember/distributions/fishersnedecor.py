"""FisherSnedecor: the F distribution with ``df1`` and ``df2`` degrees of freedom."""

import math
from numbers import Real

import ember
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.gamma import Gamma
from ember.distributions.utils import broadcast_all

__all__ = ["FisherSnedecor"]


class FisherSnedecor(Distribution):
    """The F distribution: (Chi2(df1) / df1) / (Chi2(df2) / df2)."""

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        self.df1, self.df2 = broadcast_all(df1, df2)
        # Chi2(df) / (2 df) = Gamma(df / 2, df); the factors 2 cancel in the ratio (both
        # validated by default, as in PyTorch)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)
        both_numbers = isinstance(df1, Real) and isinstance(df2, Real)
        batch_shape = () if both_numbers else self.df1.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(FisherSnedecor, batch_shape, _instance,
                             ("df1", "df2", "_gamma1", "_gamma2"))
        return new

    @property
    def mean(self):
        df2 = self.df2
        return ember.where(df2 > 2, df2 / (df2 - 2), ember.full_like(df2, math.nan))

    @property
    def mode(self):
        df1, df2 = self.df1, self.df2
        mode = (df1 - 2) / df1 * df2 / (df2 + 2)
        return ember.where(df1 > 2, mode, ember.full_like(mode, math.nan))

    @property
    def variance(self):
        df1, df2 = self.df1, self.df2
        var = 2 * df2.pow(2) * (df1 + df2 - 2) / (df1 * (df2 - 2).pow(2) * (df2 - 4))
        return ember.where(df2 > 4, var, ember.full_like(var, math.nan))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x1 = self._gamma1.rsample(sample_shape).view(shape)
        x2 = self._gamma2.rsample(sample_shape).view(shape)
        tiny = ember.finfo(x2.dtype).tiny
        x2.detach().clamp_(min=tiny)
        value = x1 / x2
        value.detach().clamp_(min=tiny)
        return value

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        # log of (d1/d2)^(d1/2) x^(d1/2 - 1) (1 + d1 x / d2)^(-(d1+d2)/2) / B(d1/2, d2/2)
        h1, h2 = self.df1 * 0.5, self.df2 * 0.5
        ratio = self.df1 / self.df2
        log_beta = ember.lgamma(h1) + ember.lgamma(h2) - ember.lgamma(h1 + h2)
        return (h1 * ember.log(ratio) + (h1 - 1) * ember.log(value)
                - (h1 + h2) * ember.log1p(ratio * value) - log_beta)
