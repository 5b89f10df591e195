"""Weibull: the two-parameter Weibull distribution of lifetimes."""

import ember
from ember.distributions import constraints
from ember.distributions.exponential import Exponential
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import AffineTransform, PowerTransform
from ember.distributions.utils import broadcast_all, euler_constant

__all__ = ["Weibull"]


class Weibull(TransformedDistribution):
    """The Weibull distribution with scale ``scale`` (lambda) and shape ``concentration``
    (k): the law of lambda * E ** (1 / k) for E ~ Exponential(1), with density
    (k / lambda) (x / lambda) ** (k - 1) exp(-(x / lambda) ** k) on (0, inf)."""

    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base_dist = Exponential(ember.ones_like(self.scale), validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration_reciprocal),
                      AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Weibull, _instance)
        new.scale = self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.concentration_reciprocal = new.concentration.reciprocal()
        base_dist = self.base_dist.expand(batch_shape)
        transforms = [PowerTransform(exponent=new.concentration_reciprocal),
                      AffineTransform(loc=0, scale=new.scale)]
        super(Weibull, new).__init__(base_dist, transforms, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        # lambda Gamma(1 + 1/k)
        return self.scale * ember.exp(ember.lgamma(1 + self.concentration_reciprocal))

    @property
    def mode(self):
        # lambda ((k - 1) / k) ** (1 / k), PyTorch's formula: meant for k >= 1 (for k < 1 the
        # mode is 0; the formula gives nan there, or a value where 1 / k is even)
        k = self.concentration      # 1 / k afresh: a backward through it frees nothing shared
        return self.scale * ((k - 1) / k) ** k.reciprocal()

    @property
    def variance(self):
        # lambda^2 (Gamma(1 + 2/k) - Gamma(1 + 1/k)^2)
        inv = self.concentration_reciprocal
        return self.scale.pow(2) * (ember.exp(ember.lgamma(1 + 2 * inv))
                                    - ember.exp(2 * ember.lgamma(1 + inv)))

    def entropy(self):
        # gamma (1 - 1/k) + log(lambda / k) + 1
        return (euler_constant * (1 - self.concentration_reciprocal)
                + ember.log(self.scale * self.concentration_reciprocal) + 1)
