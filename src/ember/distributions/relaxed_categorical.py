"""RelaxedOneHotCategorical (the Concrete or Gumbel-softmax distribution) on the simplex, and
ExpRelaxedCategorical, the distribution of its log, from which it is built."""

import math
from numbers import Number

import ember
from ember.distributions import constraints
from ember.distributions.categorical import Categorical
from ember.distributions.distribution import Distribution
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import ExpTransform
from ember.distributions.utils import clamp_probs

__all__ = ["ExpRelaxedCategorical", "RelaxedOneHotCategorical"]


class ExpRelaxedCategorical(Distribution):
    """The log of a RelaxedOneHotCategorical: Y = log_softmax((logits + G) / temperature)
    with G independent standard Gumbel noise (the ExpConcrete distribution).

    For K categories and t = temperature its density is
    log p(y) = log (K - 1)! + (K - 1) log t + sum_k s_k - K logsumexp_k s_k,
    s_k = logits_k - t y_k."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(ExpRelaxedCategorical, batch_shape, _instance, ("_categorical",))
        new.temperature = self.temperature
        return new

    @property
    def param_shape(self):
        """The shape of the parameter tensor: batch_shape + (K,)."""
        return self._categorical.param_shape

    @property
    def logits(self):
        """The normalized log-probabilities of the categories."""
        return self._categorical.logits

    @property
    def probs(self):
        """The normalized probabilities of the categories."""
        return self._categorical.probs

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        logits = self.logits
        u = clamp_probs(ember.rand(shape, dtype=logits.dtype, device=logits.device))
        gumbels = -((-(u.log())).log())
        scores = (logits + gumbels) / self.temperature
        return scores - scores.logsumexp(dim=-1, keepdim=True)

    def log_prob(self, value):
        k = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        t = self.temperature
        if isinstance(t, Number):
            log_scale = math.lgamma(k) + (k - 1) * math.log(t)
        else:
            log_scale = ember.full_like(t, float(k)).lgamma() + (k - 1) * t.log()
        scores = self.logits - value * t
        scores = (scores - scores.logsumexp(dim=-1, keepdim=True)).sum(-1)
        return scores + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    """The Concrete (Gumbel-softmax) distribution on the simplex: exp of an
    ExpRelaxedCategorical; reparameterizable, and OneHotCategorical as temperature -> 0."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedOneHotCategorical, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def temperature(self):
        """The relaxation temperature."""
        return self.base_dist.temperature

    @property
    def logits(self):
        """The normalized log-probabilities of the categories."""
        return self.base_dist.logits

    @property
    def probs(self):
        """The normalized probabilities of the categories."""
        return self.base_dist.probs
