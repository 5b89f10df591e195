"""Binomial: the number of successes in ``total_count`` independent Bernoulli trials."""

import ember
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.utils import broadcast_all, lazy_logits_and_probs

__all__ = ["Binomial"]


def _homogeneous_count(total_count, what):
    """The one value of ``total_count`` as an int; raises when it varies over the batch."""
    count = int(total_count.max())
    if not bool((total_count == count).all()):
        raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
    return count


class Binomial(Distribution):
    """The binomial distribution of ``total_count`` trials, each a success with probability
    ``probs`` (or log-odds ``logits``, never both); ``total_count`` may be a tensor
    broadcastable with them."""

    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval, "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self._param = self.probs
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self._param = self.logits
        self.total_count = self.total_count.type_as(self._param)
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(Binomial, batch_shape, _instance, ("total_count", "probs", "logits"))
        new._param = new.probs if "probs" in self.__dict__ else new.logits
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    logits, probs = lazy_logits_and_probs(is_binary=True)

    @property
    def param_shape(self):
        """The shape of the parameter tensor."""
        return self._param.size()

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        """floor((n + 1) p), at most n."""
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with ember.no_grad():
            return ember.binomial(self.total_count.expand(shape), self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        log_choose = ember.lgamma(n + 1) - ember.lgamma(value + 1) - ember.lgamma(n - value + 1)
        # k log p + (n - k) log(1 - p) = k l - n softplus(l); softplus overflows for neither
        # sign of l and its derivative is sigmoid(l), also at l = 0 where max(l, 0) has a kink
        return log_choose + value * logits - n * ember.nn.functional.softplus(logits)

    def entropy(self):
        """-sum_k P(k) log P(k) over k = 0..total_count (one count for the whole batch)."""
        _homogeneous_count(self.total_count, "entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(ember.exp(log_prob) * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        count = _homogeneous_count(self.total_count, "enumerate_support")
        values = ember.arange(1 + count, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
