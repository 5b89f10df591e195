"""KL divergences whose p is Independent or TransformedDistribution."""

from ember.distributions.independent import Independent
from ember.distributions.kl import kl_divergence, register_kl
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import _sum_rightmost

__all__ = []


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    """KL of products of independent factors: the factors' KL, summed over the event."""
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    result = kl_divergence(p.base_dist, q.base_dist)
    return _sum_rightmost(result, p.reinterpreted_batch_ndims)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    """KL is invariant under a common bijection: the bases' KL, when the transforms agree."""
    if p.transforms != q.transforms:
        raise NotImplementedError
    if p.event_shape != q.event_shape:
        raise NotImplementedError
    return kl_divergence(p.base_dist, q.base_dist)
