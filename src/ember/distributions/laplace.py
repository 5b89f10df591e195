"""Laplace: the double-exponential distribution around ``loc`` with scale ``scale``."""

import math
from numbers import Real

import ember
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.utils import broadcast_all

__all__ = ["Laplace"]


class Laplace(Distribution):
    """The Laplace distribution with density exp(-|x - loc| / scale) / (2 scale)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        both_numbers = isinstance(loc, Real) and isinstance(scale, Real)
        batch_shape = () if both_numbers else self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(Laplace, batch_shape, _instance, ("loc", "scale"))

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return math.sqrt(2) * self.scale

    def rsample(self, sample_shape=()):
        # u uniform on (-1, 1): x = loc - scale * sign(u) * log(1 - |u|)
        shape = self._extended_shape(sample_shape)
        eps = ember.finfo(self.loc.dtype).eps
        u = self.loc.new(shape).uniform_(eps - 1, 1)     # (as PyTorch: unbatched under vmap)
        return self.loc - self.scale * u.sign() * ember.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -ember.log(2 * self.scale) - ember.abs(value - self.loc) / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        # (the sign of value - loc, not of the standardized value: the same where scale > 0,
        # and PyTorch's result for an unvalidated scale <= 0)
        diff = value - self.loc
        return 0.5 - 0.5 * diff.sign() * ember.expm1(-diff.abs() / self.scale)

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * ember.log1p(-2 * term.abs())

    def entropy(self):
        return 1 + ember.log(2 * self.scale)
