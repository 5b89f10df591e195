"""LogisticNormal: a distribution on the simplex, the stick-breaking image of a normal."""

from ember.distributions import constraints
from ember.distributions.independent import Independent
from ember.distributions.normal import Normal
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import StickBreakingTransform

__all__ = ["LogisticNormal"]


class LogisticNormal(TransformedDistribution):
    """The logistic-normal distribution: StickBreakingTransform()(X) with
    X ~ Normal(loc, scale) over the last dimension, so that a parameter of length K gives
    events of K + 1 probabilities on the simplex."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base_dist = Normal(loc, scale, validate_args=validate_args)
        if not base_dist.batch_shape:
            base_dist = base_dist.expand([1])
        super().__init__(Independent(base_dist, 1), StickBreakingTransform(),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogisticNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def loc(self):
        """The mean of the underlying normal."""
        return self.base_dist.base_dist.loc

    @property
    def scale(self):
        """The standard deviation of the underlying normal."""
        return self.base_dist.base_dist.scale
