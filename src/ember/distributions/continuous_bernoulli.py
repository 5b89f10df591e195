"""ContinuousBernoulli: the distribution on [0, 1] with density proportional to
lambda^x (1 - lambda)^(1 - x), parameterized by ``probs`` lambda or ``logits``.

Its normalizer C(lambda) = 2 atanh(1 - 2 lambda) / (1 - 2 lambda) is 0 / 0 at lambda = 1/2:
inside ``lims`` (around 1/2) the log normalizer, mean and variance come from their Taylor
series in x = lambda - 1/2 instead (log C = log 2 + 4/3 x^2 + 104/45 x^4, mean =
1/2 + x/3 + 16/45 x^3, variance = 1/12 - x^2/15 - 128/945 x^4), and the cdf and icdf are
those of the uniform distribution.
"""

import math
from numbers import Number

import ember
from ember.distributions import constraints
from ember.distributions.exp_family import ExponentialFamily
from ember.distributions.utils import (broadcast_all, clamp_probs, lazy_property,
                                       logits_to_probs, probs_to_logits)

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(ExponentialFamily):
    """The continuous Bernoulli distribution (Loaiza-Ganem and Cunningham, 2019)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
            # checked here, before the clamp below would hide values outside [0, 1]
            if validate_args is not None and not bool(
                    self.arg_constraints["probs"].check(self.probs).all()):
                raise ValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(self.probs)
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        batch_shape = ember.Size() if is_scalar else self._param.size()
        self._lims = lims
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(ContinuousBernoulli, batch_shape, _instance, ("probs", "logits"))
        new._lims = self._lims
        new._param = new.logits if "logits" in self.__dict__ else new.probs
        return new

    def _new(self, *args, **kwargs):
        return self._param.new(*args, **kwargs)

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        """``probs``, with those inside ``lims`` moved to lims[0] (where the exact formulas
        are finite; their values there are replaced by the Taylor series)."""
        return ember.where(self._outside_unstable_region(), self.probs,
                           ember.full_like(self.probs, self._lims[0]))

    def _cont_bern_log_norm(self):
        """log C(probs), the log normalizer."""
        cut = self._cut_probs()
        # 2 atanh(1 - 2 p) = log(1 - p) - log(p); divided by |1 - 2 p|
        cut_below_half = ember.where(cut <= 0.5, cut, ember.zeros_like(cut))
        cut_above_half = ember.where(cut >= 0.5, cut, ember.ones_like(cut))
        log_norm = (ember.log(ember.abs(ember.log1p(-cut) - ember.log(cut)))
                    - ember.where(cut <= 0.5, ember.log1p(-2.0 * cut_below_half),
                                  ember.log(2.0 * cut_above_half - 1.0)))
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return ember.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut = self._cut_probs()
        exact = cut / (2.0 * cut - 1.0) + 1.0 / (ember.log1p(-cut) - ember.log(cut))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return ember.where(self._outside_unstable_region(), exact, taylor)

    @property
    def stddev(self):
        return ember.sqrt(self.variance)

    @property
    def variance(self):
        cut = self._cut_probs()
        exact = (cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2)
                 + 1.0 / (ember.log1p(-cut) - ember.log(cut)).pow(2))
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return ember.where(self._outside_unstable_region(), exact, taylor)

    @lazy_property
    def logits(self):
        """log(probs / (1 - probs))."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        """lambda, in (0, 1)."""
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    @property
    def param_shape(self):
        """The shape of the parameter given."""
        return self._param.size()

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = ember.rand(shape, dtype=self.probs.dtype, device=self.probs.device)
        with ember.no_grad():
            return self.icdf(u)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = ember.rand(shape, dtype=self.probs.dtype, device=self.probs.device)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        # x log(p) + (1 - x) log(1 - p) = x logits - softplus(logits)
        logits, value = broadcast_all(self.logits, value)
        return (value * logits - ember.nn.functional.softplus(logits)
                + self._cont_bern_log_norm())

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        # (p^x (1 - p)^(1 - x) + p - 1) / (2 p - 1); the uniform cdf x near p = 1/2
        cut = self._cut_probs()
        cdfs = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = ember.where(self._outside_unstable_region(), cdfs, value)
        return ember.where(value <= 0.0, ember.zeros_like(value),
                           ember.where(value >= 1.0, ember.ones_like(value), unbounded))

    def icdf(self, value):
        cut = self._cut_probs()
        exact = ((ember.log1p(-cut + value * (2.0 * cut - 1.0)) - ember.log1p(-cut))
                 / (ember.log(cut) - ember.log1p(-cut)))
        return ember.where(self._outside_unstable_region(), exact, value)

    def entropy(self):
        log_probs0 = ember.log1p(-self.probs)
        log_probs1 = ember.log(self.probs)
        return (self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm()
                - log_probs0)

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        """log((e^x - 1) / x) of the natural parameter x = logits; its Taylor series
        x/2 + x^2/24 - x^4/2880 within lims - 1/2 of 0."""
        outside = (x <= self._lims[0] - 0.5) | (x > self._lims[1] - 0.5)
        cut = ember.where(outside, x, ember.full_like(x, self._lims[0] - 0.5))
        exact = ember.log(ember.abs(ember.expm1(cut))) - ember.log(ember.abs(cut))
        taylor = 0.5 * x + x.pow(2) / 24.0 - x.pow(4) / 2880.0
        return ember.where(outside, exact, taylor)
