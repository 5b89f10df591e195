"""HalfCauchy: the distribution of |X| for a centred Cauchy X."""

import math

import ember
from ember.distributions import _folded, constraints
from ember.distributions.cauchy import Cauchy
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import AbsTransform

__all__ = ["HalfCauchy"]


class HalfCauchy(TransformedDistribution):
    """The half-Cauchy distribution: |X| with X ~ Cauchy(0, scale); its mean and variance
    are infinite."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        base_dist = Cauchy(0, scale, validate_args=False)
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(HalfCauchy, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def scale(self):
        """The scale of the underlying Cauchy distribution."""
        return self.base_dist.scale

    @property
    def mean(self):
        return ember.full(self._extended_shape(), math.inf, dtype=self.scale.dtype,
                          device=self.scale.device)

    @property
    def mode(self):
        return ember.zeros_like(self.scale)

    @property
    def variance(self):
        return self.base_dist.variance

    def log_prob(self, value):
        return _folded.log_prob(self, value)

    def cdf(self, value):
        return _folded.cdf(self, value)

    def icdf(self, prob):
        return _folded.icdf(self, prob)

    def entropy(self):
        return _folded.entropy(self)
