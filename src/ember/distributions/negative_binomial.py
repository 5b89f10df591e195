"""NegativeBinomial: the successes before ``total_count`` failures of Bernoulli trials."""

import ember
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.gamma import Gamma
from ember.distributions.utils import broadcast_all, lazy_logits_and_probs, lazy_property

__all__ = ["NegativeBinomial"]


class NegativeBinomial(Distribution):
    """The negative binomial distribution: the number of successes, each of probability
    ``probs`` (or log-odds ``logits``, never both), before ``total_count`` failures;
    ``total_count`` may be any non-negative real."""

    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
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
        new = self._expanded(NegativeBinomial, batch_shape, _instance,
                             ("total_count", "probs", "logits"))
        new._param = new.probs if "probs" in self.__dict__ else new.logits
        return new

    logits, probs = lazy_logits_and_probs(is_binary=True)

    @property
    def param_shape(self):
        """The shape of the parameter tensor."""
        return self._param.size()

    @property
    def mean(self):
        """r p / (1 - p) = r exp(logits)."""
        return self.total_count * ember.exp(self.logits)

    @property
    def mode(self):
        """floor((r - 1) p / (1 - p)), at least 0."""
        return ((self.total_count - 1) * ember.exp(self.logits)).floor().clamp(min=0.0)

    @property
    def variance(self):
        """r p / (1 - p)^2."""
        return self.mean / ember.sigmoid(-self.logits)

    @lazy_property
    def _gamma(self):
        """Gamma(r, (1 - p) / p): the Poisson rates whose mixture is this distribution."""
        return Gamma(concentration=self.total_count, rate=ember.exp(-self.logits),
                     validate_args=False)

    def sample(self, sample_shape=()):
        """A Poisson draw at a Gamma(r, (1 - p) / p) rate (the Gamma-Poisson mixture)."""
        with ember.no_grad():
            return ember.poisson(self._gamma.sample(sample_shape))

    def log_prob(self, value):
        """log C(k + r - 1, k) + r log(1 - p) + k log p."""
        if self._validate_args:
            self._validate_sample(value)
        logsigmoid = ember.nn.functional.logsigmoid
        log_unnormalized = (self.total_count * logsigmoid(-self.logits)
                            + value * logsigmoid(self.logits))
        log_normalization = (-ember.lgamma(self.total_count + value) + ember.lgamma(1.0 + value)
                             + ember.lgamma(self.total_count))
        # r = k = 0 is the point mass at 0: probability 1 (not inf - inf)
        log_normalization = log_normalization.masked_fill(self.total_count + value == 0, 0.0)
        return log_unnormalized - log_normalization
