"""TransformedDistribution: the distribution of f(X) for X from a base distribution and f a
composition of transforms, with its density by the change-of-variables formula."""

import ember
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.independent import Independent
from ember.distributions.transforms import ComposeTransform, Transform, _sum_rightmost

__all__ = ["TransformedDistribution"]


class TransformedDistribution(Distribution):
    """Samples ``x`` of ``base_distribution`` pushed through ``transforms`` in order:
    log p(y) = log p_base(x) - sum of the transforms' log|det J| along the way.

    The base is expanded (and wrapped in Independent) where the transforms need more batch
    or event dimensions than it has."""

    arg_constraints = {}

    def __init__(self, base_distribution, transforms, validate_args=None):
        if isinstance(transforms, Transform):
            self.transforms = [transforms]
        elif isinstance(transforms, list):
            if not all(isinstance(t, Transform) for t in transforms):
                raise ValueError("transforms must be a Transform or a list of Transforms")
            self.transforms = transforms
        else:
            raise ValueError(f"transforms must be a Transform or list, but was {transforms}")

        base_shape = base_distribution.batch_shape + base_distribution.event_shape
        base_event_dim = len(base_distribution.event_shape)
        transform = ComposeTransform(self.transforms)
        in_event_dim = transform.domain.event_dim
        if len(base_shape) < in_event_dim:
            raise ValueError("base_distribution needs to have shape with size at least "
                             f"{in_event_dim}, but got {base_shape}.")
        forward_shape = transform.forward_shape(base_shape)
        expanded_base_shape = transform.inverse_shape(forward_shape)
        if base_shape != expanded_base_shape:       # the transforms broadcast the batch
            cut = len(expanded_base_shape) - base_event_dim
            base_distribution = base_distribution.expand(expanded_base_shape[:cut])
        if in_event_dim > base_event_dim:
            base_distribution = Independent(base_distribution, in_event_dim - base_event_dim)
        self.base_dist = base_distribution

        out_event_dim = transform.codomain.event_dim
        event_dim = max(out_event_dim, base_event_dim + out_event_dim - in_event_dim)
        cut = len(forward_shape) - event_dim
        super().__init__(forward_shape[:cut], forward_shape[cut:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(TransformedDistribution, _instance)
        batch_shape = ember.Size(batch_shape)
        shape = batch_shape + self.event_shape
        for transform in reversed(self.transforms):
            shape = transform.inverse_shape(shape)
        base_batch_shape = shape[:len(shape) - len(self.base_dist.event_shape)]
        new.base_dist = self.base_dist.expand(base_batch_shape)
        new.transforms = self.transforms
        super(TransformedDistribution, new).__init__(batch_shape, self.event_shape,
                                                     validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=False)
    def support(self):
        if not self.transforms:
            return self.base_dist.support
        support = self.transforms[-1].codomain
        if len(self.event_shape) > support.event_dim:
            support = constraints.independent(support, len(self.event_shape) - support.event_dim)
        return support

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    def sample(self, sample_shape=()):
        with ember.no_grad():
            x = self.base_dist.sample(sample_shape)
            for transform in self.transforms:
                x = transform(x)
            return x

    def rsample(self, sample_shape=()):
        x = self.base_dist.rsample(sample_shape)
        for transform in self.transforms:
            x = transform(x)
        return x

    def log_prob(self, value):
        """log p_base(x) - sum_i log|det J_i|, inverting the transforms from the last."""
        if self._validate_args:
            self._validate_sample(value)
        event_dim = len(self.event_shape)
        log_prob = 0.0
        y = value
        for transform in reversed(self.transforms):
            x = transform.inv(y)
            event_dim += transform.domain.event_dim - transform.codomain.event_dim
            log_det = transform.log_abs_det_jacobian(x, y)
            log_prob = log_prob - _sum_rightmost(log_det, event_dim - transform.domain.event_dim)
            y = x
        base_log_prob = self.base_dist.log_prob(y)
        return log_prob + _sum_rightmost(base_log_prob,
                                         event_dim - len(self.base_dist.event_shape))

    def _monotonize_cdf(self, value):
        """For a decreasing composition, P(Y <= y) = 1 - P(X <= x): flip the cdf where the
        transforms' total sign is -1."""
        sign = 1
        for transform in self.transforms:
            sign = sign * transform.sign
        if isinstance(sign, int) and sign == 1:
            return value
        return sign * (value - 0.5) + 0.5

    def cdf(self, value):
        """The base cdf at the pre-image, for monotone scalar transforms."""
        for transform in self.transforms[::-1]:
            value = transform.inv(value)
        if self._validate_args:
            self.base_dist._validate_sample(value)
        value = self.base_dist.cdf(value)
        return self._monotonize_cdf(value)

    def icdf(self, value):
        """The transformed base icdf, for monotone scalar transforms."""
        value = self._monotonize_cdf(value)
        value = self.base_dist.icdf(value)
        for transform in self.transforms:
            value = transform(value)
        return value
