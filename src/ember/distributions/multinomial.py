"""Multinomial: the counts of each category in ``total_count`` categorical draws."""

import ember
from ember.distributions import constraints
from ember.distributions.binomial import Binomial
from ember.distributions.categorical import Categorical
from ember.distributions.distribution import Distribution
from ember.distributions.utils import broadcast_all, refuse_vmap_different

__all__ = ["Multinomial"]


class Multinomial(Distribution):
    """The multinomial distribution: counts over the categories of the last dimension of
    ``probs`` or ``logits`` after ``total_count`` (one int for the whole batch) draws.

    ``log_prob`` does not need ``total_count``: it takes n = sum of the counts."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(Multinomial, batch_shape, _instance, ("_categorical",))
        new.total_count = self.total_count
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def probs(self):
        """The normalized probabilities of the categories."""
        return self._categorical.probs

    @property
    def logits(self):
        """The normalized log-probabilities of the categories."""
        return self._categorical.logits

    @property
    def param_shape(self):
        """The shape of the parameter tensor: batch_shape + (K,)."""
        return self._categorical.param_shape

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        """``total_count`` categorical draws, counted per category."""
        sample_shape = ember.Size(sample_shape)
        refuse_vmap_different("scatter_add_")
        with ember.no_grad():
            draws = self._categorical.sample(ember.Size((self.total_count,)) + sample_shape)
            draws = draws.permute(*range(1, draws.dim()), 0)   # the draws last
            counts = ember.zeros(self._extended_shape(sample_shape), dtype=self.probs.dtype,
                                 device=self.probs.device)
            return counts.scatter_add_(-1, draws, ember.ones_like(draws, dtype=counts.dtype))

    def entropy(self):
        """-log n! + sum_k E[log x_k!] + n H(categorical), each count x_k being
        Binomial(n, p_k), whose support is summed over."""
        n = ember.tensor(self.total_count, dtype=self.probs.dtype, device=self.probs.device)
        binomial = Binomial(n, probs=self.probs, validate_args=False)
        support = binomial.enumerate_support()
        binomial_probs = binomial.log_prob(support).exp()
        expected_log_factorials = (ember.lgamma(support + 1) * binomial_probs).sum([0, -1])
        return (self.total_count * self._categorical.entropy() - ember.lgamma(n + 1)
                + expected_log_factorials)

    def log_prob(self, value):
        """log n! - sum_k log x_k! + sum_k x_k log p_k, with n = sum_k x_k."""
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        # categories of probability 0 seen 0 times add 0 (not 0 * -inf)
        terms = ember.where((value == 0) & (logits == float("-inf")), ember.zeros_like(logits),
                            value * logits)
        log_factorial_n = ember.lgamma(value.sum(-1) + 1)
        log_factorial_xs = ember.lgamma(value + 1).sum(-1)
        return log_factorial_n - log_factorial_xs + terms.sum(-1)
