"""Categorical: a variable over the categories 0..K-1 of the last dimension of ``probs``."""

import ember
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.utils import lazy_logits_and_probs

__all__ = ["Categorical"]


class Categorical(Distribution):
    """The categorical distribution over the K categories of the last dimension of ``probs``
    (non-negative, normalized to sum to 1) or of ``logits`` (unnormalized log-probabilities,
    normalized with logsumexp); samples are int64 indices."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
            self._param = self.probs
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
            self._param = self.logits
        self._num_events = self._param.size()[-1]
        batch_shape = self._param.size()[:-1] if self._param.dim() > 1 else ()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(Categorical, batch_shape, _instance, ("probs", "logits"),
                             trailing=(self._num_events,))
        new._param = new.probs if "probs" in self.__dict__ else new.logits
        new._num_events = self._num_events
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    logits, probs = lazy_logits_and_probs()

    @property
    def param_shape(self):
        """The shape of the parameter tensor: batch_shape + (K,)."""
        return self._param.size()

    @property
    def mean(self):
        """Undefined for categories: NaN."""
        return ember.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype,
                          device=self.probs.device)

    @property
    def mode(self):
        return self.probs.argmax(dim=-1)

    @property
    def variance(self):
        """Undefined for categories: NaN."""
        return ember.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype,
                          device=self.probs.device)

    def sample(self, sample_shape=()):
        sample_shape = ember.Size(sample_shape)
        with ember.no_grad():
            rows = self.probs.reshape(-1, self._num_events)
            drawn = ember.multinomial(rows, sample_shape.numel(), True).T
            return drawn.reshape(self._extended_shape(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = ember.broadcast_tensors(value, self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self):
        """-sum_k p_k log p_k, with the logs of empty categories clamped so 0 log 0 is 0."""
        logits = self.logits.clamp(min=ember.finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = ember.arange(self._num_events, dtype=ember.int64, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
