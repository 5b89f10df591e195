"""Chi2: the chi-squared distribution with ``df`` degrees of freedom, Gamma(df / 2, 1 / 2)."""

from ember.distributions import constraints
from ember.distributions.gamma import Gamma

__all__ = ["Chi2"]


class Chi2(Gamma):
    """The chi-squared distribution: the sum of ``df`` squared standard normals."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)

    @property
    def df(self):
        """The degrees of freedom, twice the concentration."""
        return self.concentration * 2
