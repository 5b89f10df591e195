"""InverseGamma: the distribution of 1 / X for X ~ Gamma(concentration, rate)."""

import math

import ember
from ember.distributions import constraints
from ember.distributions.gamma import Gamma
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import PowerTransform

__all__ = ["InverseGamma"]


class InverseGamma(TransformedDistribution):
    """The inverse gamma distribution: density rate^c x^(-c-1) e^(-rate / x) / Gamma(c) on
    (0, inf), c = ``concentration``."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        base_dist = Gamma(concentration, rate, validate_args=validate_args)
        minus_one = -base_dist.rate.new_ones(())
        super().__init__(base_dist, PowerTransform(minus_one), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(InverseGamma, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def concentration(self):
        """The shape c of the gamma distribution inverted."""
        return self.base_dist.concentration

    @property
    def rate(self):
        """The rate of the gamma distribution inverted: the scale of this one."""
        return self.base_dist.rate

    @property
    def mean(self):
        c = self.concentration
        finite = self.rate / (c - 1)
        return ember.where(c > 1, finite, ember.full_like(finite, math.inf))

    @property
    def mode(self):
        return self.rate / (self.concentration + 1)

    @property
    def variance(self):
        c = self.concentration
        finite = self.rate.pow(2) / ((c - 1).pow(2) * (c - 2))
        return ember.where(c > 2, finite, ember.full_like(finite, math.inf))

    def entropy(self):
        c = self.concentration
        return c + self.rate.log() + ember.lgamma(c) - (1 + c) * ember.digamma(c)
