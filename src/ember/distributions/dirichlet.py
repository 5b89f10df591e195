"""Dirichlet: the distribution on the probability simplex with ``concentration`` alpha."""

import ember
from ember.distributions import constraints
from ember.distributions.exp_family import ExponentialFamily
from ember.distributions.utils import refuse_vmap_of_function
from ember.ops.gamma_sampling import _dirichlet_sample

__all__ = ["Dirichlet"]


class Dirichlet(ExponentialFamily):
    """The Dirichlet distribution: density prod_i x_i^(alpha_i - 1) / B(alpha) on the
    simplex over the last dimension of ``concentration``."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        batch_shape, event_shape = concentration.shape[:-1], concentration.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(Dirichlet, batch_shape, _instance, ("concentration",),
                             trailing=self.event_shape)
        return new

    def rsample(self, sample_shape=()):
        refuse_vmap_of_function()
        # the gradient is Jankowiak & Obermeyer's (2018) through the Beta marginals (as
        # PyTorch's _dirichlet_grad), not the one through the normalized gammas
        concentration = self.concentration.expand(self._extended_shape(sample_shape))
        value = ember._sample_dirichlet(concentration.detach())
        return _dirichlet_sample(concentration, value)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return (ember.xlogy(c - 1.0, value).sum(-1) + ember.lgamma(c.sum(-1))
                - ember.lgamma(c).sum(-1))

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        # the interior maximum (alpha_i - 1) / sum(alpha_j - 1); where every alpha_i < 1 the
        # density is unbounded at each vertex, and the mode is the first one, as PyTorch's
        excess = (self.concentration - 1).clamp(min=0.0)
        interior = excess / excess.sum(-1, keepdim=True)
        vertex = ember.zeros_like(interior)
        vertex[..., 0] = 1.0
        below_one = (self.concentration < 1).all(-1, keepdim=True)
        return ember.where(below_one, vertex, interior)

    @property
    def variance(self):
        total = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (total - self.concentration) / (total.pow(2) * (total + 1))

    def entropy(self):
        c = self.concentration
        k = c.size(-1)
        total = c.sum(-1)
        return (ember.lgamma(c).sum(-1) - ember.lgamma(total) - (k - total) * ember.digamma(total)
                - ((c - 1.0) * ember.digamma(c)).sum(-1))

    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return x.lgamma().sum(-1) - ember.lgamma(x.sum(-1))
