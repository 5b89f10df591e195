"""Geometric: the number of failures before the first success of Bernoulli(probs) trials."""

from numbers import Number

import ember
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.utils import broadcast_all, lazy_logits_and_probs

__all__ = ["Geometric"]


class Geometric(Distribution):
    """The geometric distribution P(k) = (1 - p)^k p on k = 0, 1, 2, ...: the failures before
    the first success; parameterized by ``probs`` (> 0) or ``logits``, never both."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            param = self.probs
        else:
            (self.logits,) = broadcast_all(logits)
            param = self.logits
        is_scalar = isinstance(probs if probs is not None else logits, Number)
        super().__init__(() if is_scalar else param.size(), validate_args=validate_args)
        if self._validate_args and probs is not None:
            value, positive = self.probs, self.probs > 0
            if not bool(positive.all()):
                raise ValueError(
                    f"Expected parameter probs ({type(value).__name__} of shape "
                    f"{tuple(value.shape)}) of distribution {self!r} to be positive but found "
                    f"invalid values:\n{value[~positive]}")

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(Geometric, batch_shape, _instance, ("probs", "logits"))
        return new

    logits, probs = lazy_logits_and_probs(is_binary=True)

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return ember.zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=()):
        """floor(log U / log(1 - p)) for U uniform on (0, 1): inversion of the cdf."""
        shape = self._extended_shape(sample_shape)
        tiny = ember.finfo(self.probs.dtype).tiny
        with ember.no_grad():
            # drawn in place into a new tensor, as PyTorch draws it (vmap refuses it alike)
            u = self.probs.new(shape).uniform_(tiny, 1)
            return (u.log() / ember.log1p(-self.probs)).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        # k log(1 - p) is 0 at k = 0 even where p = 1 (not 0 * -inf, in value or gradient)
        safe = probs.masked_fill((probs == 1) & (value == 0), 0.0)
        return value * ember.log1p(-safe) + ember.log(probs)

    def entropy(self):
        """(-(1 - p) log(1 - p) - p log p) / p, the Bernoulli entropy over p, whose numerator
        is (1 - p) l - log(sigmoid(l)) for the log-odds l."""
        # PyTorch's form (binary_cross_entropy_with_logits(l, p) / p): below eps, where the
        # log-odds are clamped, its numerator rounds to 0 rather than blowing up over p
        logits, probs = self.logits, self.probs
        return ((1 - probs) * logits - ember.nn.functional.logsigmoid(logits)) / probs
