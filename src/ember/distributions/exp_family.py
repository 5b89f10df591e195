"""ExponentialFamily: distributions whose density is exp(<t(x), theta> - F(theta) + k(x))."""

import ember
from ember.distributions.distribution import Distribution
from ember.distributions.kl import register_kl

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


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    """KL(p || q) of two members of one family, the Bregman divergence of the log normalizer
    F: F(theta_q) - F(theta_p) - <theta_q - theta_p, grad F(theta_p)>."""
    if type(p) is not type(q):
        raise NotImplementedError("The cross KL-divergence between different exponential "
                                  "families cannot be computed using Bregman divergences")
    # parameters that carry no graph get a fresh leaf; the others keep theirs so that the
    # divergence stays differentiable in p's parameters
    p_params = [t if t.requires_grad else t.detach().requires_grad_()
                for t in p._natural_params]
    q_params = q._natural_params
    with ember.enable_grad():
        p_normalizer = p._log_normalizer(*p_params)
        grads = ember.autograd.grad(p_normalizer.sum(), p_params, create_graph=True)
    result = q._log_normalizer(*q_params) - p_normalizer
    batch_dims = len(ember.broadcast_shapes(p.batch_shape, q.batch_shape))
    for p_param, q_param, grad in zip(p_params, q_params, grads):
        term = (q_param - p_param) * grad
        # each parameter's own event dims follow the batch dims
        event_dims = tuple(range(batch_dims, term.dim()))
        result = result - (term.sum(event_dims) if event_dims else term)
    return result
