"""StudentT: Student's t distribution with ``df`` degrees of freedom, location ``loc`` and
scale ``scale``."""

import math

import ember
from ember.distributions import constraints
from ember.distributions.chi2 import Chi2
from ember.distributions.distribution import Distribution
from ember.distributions.utils import _standard_normal, broadcast_all

__all__ = ["StudentT"]


class StudentT(Distribution):
    """Student's t distribution: loc + scale * N(0, 1) / sqrt(Chi2(df) / df)."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real,
                       "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)             # validated by default, as in PyTorch
        super().__init__(self.df.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(StudentT, batch_shape, _instance, ("df", "loc", "scale", "_chi2"))

    @property
    def mean(self):
        return ember.where(self.df > 1, self.loc, ember.full_like(self.loc, math.nan))

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        # scale^2 df / (df - 2) for df > 2, infinite for 1 < df <= 2, undefined below
        finite = self.scale.pow(2) * self.df / (self.df - 2)
        return ember.where(self.df > 2, finite,
                           ember.where(self.df > 1, ember.full_like(finite, math.inf),
                                       ember.full_like(finite, math.nan)))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x = _standard_normal(shape, dtype=self.df.dtype, device=self.df.device)
        z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * x * ember.rsqrt(z / self.df)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        log_z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi)
                 + ember.lgamma(0.5 * self.df) - ember.lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * ember.log1p(y.pow(2) / self.df) - log_z

    def entropy(self):
        half_df = 0.5 * self.df
        log_beta = ember.lgamma(half_df) + math.lgamma(0.5) - ember.lgamma(half_df + 0.5)
        return (self.scale.log()
                + (half_df + 0.5) * (ember.digamma(half_df + 0.5) - ember.digamma(half_df))
                + 0.5 * self.df.log() + log_beta)
