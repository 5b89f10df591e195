"""ExponentialFamily: distributions whose density is exp(<t(x), theta> - F(theta) + k(x))."""

import ember
from ember.distributions.distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """Base of the exponential-family distributions: from the natural parameters theta and
    the log normalizer F it derives the entropy (and the KL divergence between two members of
    one family) as a Bregman divergence of F."""

    @property
    def _natural_params(self):
        """The natural parameters theta, a tuple of tensors."""
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        """F(theta), the log normalizer, per batch element."""
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        """E[k(x)], the expected carrier measure."""
        raise NotImplementedError

    def entropy(self):
        """The entropy F(theta) - <theta, grad F(theta)> - E[k(x)]."""
        theta = [p.detach().requires_grad_() for p in self._natural_params]
        with ember.enable_grad():
            log_normalizer = self._log_normalizer(*theta)
            grads = ember.autograd.grad(log_normalizer.sum(), theta, create_graph=True)
        result = log_normalizer - self._mean_carrier_measure
        for param, grad in zip(theta, grads):
            result = result - (param * grad).reshape(self._batch_shape + (-1,)).sum(-1)
        return result
