"""MixtureSameFamily: a finite mixture whose components all belong to one family."""

import ember
from ember.distributions import constraints
from ember.distributions.categorical import Categorical
from ember.distributions.distribution import Distribution

__all__ = ["MixtureSameFamily"]


class MixtureSameFamily(Distribution):
    """A mixture of the components batched along the rightmost batch dimension of
    ``component_distribution``, weighted by the Categorical ``mixture_distribution``:
    p(x) = sum_k pi_k p_k(x)."""

    arg_constraints = {}
    has_rsample = False

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(" The Mixture distribution needs to be an  instance of "
                             "torch.distributions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution needs to be an instance of "
                             "torch.distributions.Distribution")
        mix_batch = mixture_distribution.batch_shape
        comp_batch = component_distribution.batch_shape[:-1]
        for size1, size2 in zip(reversed(mix_batch), reversed(comp_batch)):
            if size1 != 1 and size2 != 1 and size1 != size2:
                raise ValueError(f"`mixture_distribution.batch_shape` ({mix_batch}) is not "
                                 "compatible with `component_distribution.batch_shape`"
                                 f"({comp_batch})")
        mix_k = mixture_distribution.logits.shape[-1]
        comp_k = component_distribution.batch_shape[-1]
        if mix_k != comp_k:
            raise ValueError(f"`mixture_distribution component` ({mix_k}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({comp_k})")
        self._num_component = mix_k
        event_shape = component_distribution.event_shape
        self._event_ndims = len(event_shape)
        super().__init__(comp_batch, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MixtureSameFamily, _instance)
        batch_shape = ember.Size(batch_shape)
        new._component_distribution = self._component_distribution.expand(
            batch_shape + (self._num_component,))
        new._mixture_distribution = self._mixture_distribution.expand(batch_shape)
        new._num_component = self._num_component
        new._event_ndims = self._event_ndims
        super(MixtureSameFamily, new).__init__(batch_shape, self.event_shape,
                                               validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property
    def support(self):
        return constraints.MixtureSameFamilyConstraint(self._component_distribution.support)

    @property
    def mixture_distribution(self):
        """The Categorical over the components."""
        return self._mixture_distribution

    @property
    def component_distribution(self):
        """The components, batched along the rightmost batch dimension."""
        return self._component_distribution

    @property
    def mean(self):
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        return (probs * self.component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self):
        """Total variance: E[Var(X | K)] + Var(E[X | K])."""
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        comp = self.component_distribution
        mean_cond_var = (probs * comp.variance).sum(-1 - self._event_ndims)
        spread = (comp.mean - self._pad(self.mean)).pow(2.0)
        var_cond_mean = (probs * spread).sum(-1 - self._event_ndims)
        return mean_cond_var + var_cond_mean

    def cdf(self, x):
        """sum_k pi_k F_k(x), for scalar events."""
        cdf_x = self.component_distribution.cdf(self._pad(x))
        return (cdf_x * self.mixture_distribution.probs).sum(-1)

    def log_prob(self, x):
        """logsumexp_k (log pi_k + log p_k(x))."""
        if self._validate_args:
            self._validate_sample(x)
        log_prob_x = self.component_distribution.log_prob(self._pad(x))
        log_mix_prob = ember.log_softmax(self.mixture_distribution.logits, dim=-1)
        return ember.logsumexp(log_prob_x + log_mix_prob, dim=-1)

    def sample(self, sample_shape=()):
        """Draw a component index and a sample of every component; keep the chosen one."""
        with ember.no_grad():
            gather_dim = len(sample_shape) + len(self.batch_shape)     # (TypeError for an int)
            sample_shape = ember.Size(sample_shape)
            event_shape = self.event_shape
            mix_sample = self.mixture_distribution.sample(sample_shape)
            comp_samples = self.component_distribution.sample(sample_shape)
            index = mix_sample.reshape(mix_sample.shape + (1,) * (len(event_shape) + 1))
            index = index.expand(mix_sample.shape + (1,) + event_shape)
            return ember.gather(comp_samples, gather_dim, index).squeeze(gather_dim)

    def _pad(self, x):
        """``x`` with a component dimension of size 1 before the event dimensions."""
        return x.unsqueeze(-1 - self._event_ndims)

    def _pad_mixture_dimensions(self, x):
        """Mixture weights reshaped to line up with the components' batch and event
        dimensions (size-1 dimensions where the mixture has no batch dimension)."""
        dist_batch_ndims = len(self.batch_shape)
        cat_batch_ndims = len(self.mixture_distribution.batch_shape)
        pad_ndims = 0 if cat_batch_ndims == 1 else dist_batch_ndims - cat_batch_ndims
        shape = x.shape
        return x.reshape(shape[:-1] + (1,) * pad_ndims + shape[-1:]
                         + (1,) * self._event_ndims)

    def __repr__(self):
        return (f"{self.__class__.__name__}(\n  {self.mixture_distribution},\n  "
                f"{self.component_distribution})")
