"""The distribution of |X| for X symmetric about 0 (HalfNormal, HalfCauchy): its density is
twice X's on [0, inf) and 0 below, its cdf is 2 F - 1, and its entropy is X's minus log 2.
Shared as functions: the classes must keep PyTorch's hierarchy, so no common base."""

import math

import ember

__all__ = []


def log_prob(d, value, cast_value=True):
    """log density at ``value`` of ``d``, |X| for X = ``d.base_dist``; ``cast_value`` first
    converts ``value`` to the dtype of the scale (as PyTorch's HalfCauchy, not its HalfNormal,
    which promotes)."""
    if d._validate_args:
        d._validate_sample(value)
    if cast_value or not isinstance(value, ember.Tensor):
        value = ember.as_tensor(value, dtype=d.scale.dtype, device=d.scale.device)
    density = d.base_dist.log_prob(value) + math.log(2)
    return ember.where(value >= 0, density, -math.inf)


def cdf(d, value):
    """P(|X| <= value) = 2 F(value) - 1."""
    if d._validate_args:
        d._validate_sample(value)
    return 2 * d.base_dist.cdf(value) - 1


def icdf(d, prob):
    """The inverse of ``cdf``."""
    return d.base_dist.icdf((prob + 1) / 2)


def entropy(d):
    """X's entropy minus log 2."""
    return d.base_dist.entropy() - math.log(2)
