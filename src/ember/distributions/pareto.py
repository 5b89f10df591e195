"""Pareto: the power-law distribution on [scale, inf)."""

import math

import ember
from ember.distributions import constraints
from ember.distributions.exponential import Exponential
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import AffineTransform, ExpTransform
from ember.distributions.utils import broadcast_all

__all__ = ["Pareto"]


class Pareto(TransformedDistribution):
    """The Pareto (type I) distribution with minimum ``scale`` and tail index ``alpha``: the
    law of scale * exp(E) for E ~ Exponential(alpha), with density
    alpha scale**alpha / x**(alpha + 1) on [scale, inf)."""

    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}

    def __init__(self, scale, alpha, validate_args=None):
        self.scale, self.alpha = broadcast_all(scale, alpha)
        base_dist = Exponential(self.alpha, validate_args=validate_args)
        transforms = [ExpTransform(), AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Pareto, _instance)
        new.scale = self.scale.expand(batch_shape)
        new.alpha = self.alpha.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        # alpha scale / (alpha - 1) for alpha > 1, else inf
        finite = self.alpha > 1
        alpha = ember.where(finite, self.alpha, ember.full_like(self.alpha, 2.0))
        value = alpha * self.scale / (alpha - 1)    # (floating for an integer scale too)
        return ember.where(finite, value, ember.full_like(value, math.inf))

    @property
    def mode(self):
        return self.scale

    @property
    def variance(self):
        # scale^2 alpha / ((alpha - 1)^2 (alpha - 2)) for alpha > 2, else inf
        finite = self.alpha > 2
        alpha = ember.where(finite, self.alpha, ember.full_like(self.alpha, 3.0))
        value = self.scale.pow(2) * alpha / ((alpha - 1).pow(2) * (alpha - 2))
        return ember.where(finite, value, ember.full_like(value, math.inf))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.greater_than_eq(self.scale)

    def entropy(self):
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())
