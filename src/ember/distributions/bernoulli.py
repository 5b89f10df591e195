"""Bernoulli: a 0/1 variable that is 1 with probability ``probs`` (log-odds ``logits``)."""

from numbers import Number

import ember
from ember.distributions import constraints
from ember.distributions.exp_family import ExponentialFamily
from ember.distributions.utils import broadcast_all, lazy_logits_and_probs

__all__ = ["Bernoulli"]


class Bernoulli(ExponentialFamily):
    """The Bernoulli distribution: 1 with probability ``probs``, else 0; parameterized by
    ``probs`` or by ``logits`` (the log-odds), never both."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0

    def __init__(self, probs=None, logits=None, validate_args=None):
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
        new = self._expanded(Bernoulli, batch_shape, _instance, ("probs", "logits"))
        new._param = new.probs if "probs" in self.__dict__ else new.logits
        return new

    logits, probs = lazy_logits_and_probs(is_binary=True)

    @property
    def param_shape(self):
        """The shape of the parameter tensor."""
        return self._param.size()

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        """1 where probs > 1/2, 0 where probs < 1/2, NaN at a tie."""
        mode = (self.probs >= 0.5).to(self.probs)
        return mode.masked_fill(self.probs == 0.5, float("nan"))

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with ember.no_grad():
            return ember.bernoulli(self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        # PyTorch's form, -BCE(l, value) for the log-odds l: exact in the tails, where
        # value * l - softplus(l) cancels to 0 (l = 20: -2e-9)
        return -ember.nn.functional.binary_cross_entropy_with_logits(logits, value,
                                                                      reduction="none")

    def entropy(self):
        """-p log p - (1 - p) log(1 - p), as BCE(l, p) for the log-odds l (PyTorch's)."""
        return ember.nn.functional.binary_cross_entropy_with_logits(self.logits, self.probs,
                                                                     reduction="none")

    def enumerate_support(self, expand=True):
        values = ember.arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        return ember.nn.functional.softplus(x)
