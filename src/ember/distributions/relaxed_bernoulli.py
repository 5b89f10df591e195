"""RelaxedBernoulli (the binary Concrete distribution) on (0, 1), and LogitRelaxedBernoulli,
the distribution of its logit, from which it is built."""

import math
from numbers import Number

import ember
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import SigmoidTransform
from ember.distributions.utils import broadcast_all, clamp_probs, lazy_logits_and_probs

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli"]


class LogitRelaxedBernoulli(Distribution):
    """The logit of a RelaxedBernoulli: Y = (logits + L) / temperature with L standard
    logistic noise, so that sigmoid(Y) tends to Bernoulli(probs) as temperature -> 0.

    Its density is logistic: log p(y) = log t + d - 2 softplus(d), d = logits - t y."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self.temperature = temperature
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
            self._param = self.probs
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
            self._param = self.logits
        batch_shape = () if is_scalar else self._param.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(LogitRelaxedBernoulli, batch_shape, _instance, ("probs", "logits"))
        new.temperature = self.temperature
        new._param = new.probs if "probs" in self.__dict__ else new.logits
        return new

    logits, probs = lazy_logits_and_probs(is_binary=True)

    @property
    def param_shape(self):
        """The shape of the parameter tensor."""
        return self._param.size()

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = clamp_probs(ember.rand(shape, dtype=self._param.dtype, device=self._param.device))
        logistic = u.log() - (-u).log1p()
        # the logit of probs is taken afresh, as PyTorch does: reusing the cached logits would
        # make a second backward through the samples of one distribution fail
        probs = clamp_probs(self.probs.expand(shape))
        return (probs.log() - (-probs).log1p() + logistic) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        t = self.temperature
        log_t = t.log() if isinstance(t, ember.Tensor) else math.log(t)
        diff = logits - value * t
        return log_t + diff - 2 * ember.nn.functional.softplus(diff)


class RelaxedBernoulli(TransformedDistribution):
    """The binary Concrete (relaxed Bernoulli) distribution on (0, 1): sigmoid of a
    LogitRelaxedBernoulli; reparameterizable, and Bernoulli(probs) as temperature -> 0."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedBernoulli, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def temperature(self):
        """The relaxation temperature."""
        return self.base_dist.temperature

    @property
    def logits(self):
        """The log-odds of the Bernoulli being relaxed."""
        return self.base_dist.logits

    @property
    def probs(self):
        """The probability of the Bernoulli being relaxed."""
        return self.base_dist.probs
