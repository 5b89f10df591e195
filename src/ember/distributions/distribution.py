"""Distribution: the base class of every probability distribution."""

import warnings

import ember
from ember.distributions import constraints
from ember.distributions.utils import lazy_property

__all__ = ["Distribution"]


class Distribution:
    """A family of probability distributions, batched over ``batch_shape``, each over
    events of ``event_shape``.

    Subclasses set ``arg_constraints`` (parameter name to constraint) and ``support``, and
    define what they can of ``rsample``/``sample``, ``log_prob``, ``cdf``, ``icdf``,
    ``entropy``, ``mean``, ``mode``, ``variance`` and ``expand``.
    """

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value):
        """Turn argument and sample validation on or off for distributions built later."""
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = ember.Size(batch_shape)
        self._event_shape = ember.Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            self._check_parameters()
        super().__init__()

    def _check_parameters(self):
        try:
            arg_constraints = self.arg_constraints
        except NotImplementedError:
            arg_constraints = {}
            warnings.warn(f"{type(self)} does not define `arg_constraints`. Please set "
                          "`arg_constraints = {}` or initialize the distribution with "
                          "`validate_args=False` to turn off validation.", stacklevel=3)
        for param, constraint in arg_constraints.items():
            if constraints.is_dependent(constraint):
                continue
            if param not in self.__dict__ and isinstance(getattr(type(self), param, None),
                                                         lazy_property):
                continue                    # not computed yet: checking would compute it
            value = getattr(self, param)
            if not ember._is_all_true(constraint.check(value)):
                raise ValueError(
                    f"Expected parameter {param} ({type(value).__name__} of shape "
                    f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                    f"constraint {constraint!r}, but found invalid values:\n{value}")

    def expand(self, batch_shape, _instance=None):
        """A view of this distribution with its batch broadcast to ``batch_shape``; new
        parameters are expanded views, not copies."""
        raise NotImplementedError

    @property
    def batch_shape(self):
        """The shape over which parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self):
        """The shape of a single sample, without batching."""
        return self._event_shape

    @property
    def arg_constraints(self):
        """The constraint each parameter must satisfy, by parameter name."""
        raise NotImplementedError

    @property
    def support(self):
        """The constraint the samples satisfy."""
        raise NotImplementedError

    @property
    def mean(self):
        """The mean of the distribution."""
        raise NotImplementedError

    @property
    def mode(self):
        """The mode of the distribution."""
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self):
        """The variance of the distribution."""
        raise NotImplementedError

    @property
    def stddev(self):
        """The standard deviation of the distribution."""
        return self.variance.sqrt()

    def sample(self, sample_shape=()):
        """A sample of shape ``sample_shape + batch_shape + event_shape``, without gradient."""
        with ember.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        """A reparameterized sample: differentiable with respect to the parameters."""
        raise NotImplementedError

    def sample_n(self, n):
        """``n`` samples (deprecated: use ``sample((n,))``)."""
        warnings.warn("`sample_n(n)` will be deprecated. Use `sample((n,))` instead.",
                      FutureWarning, stacklevel=2)
        return self.sample(ember.Size((n,)))

    def log_prob(self, value):
        """The log of the probability density (or mass) at ``value``."""
        raise NotImplementedError

    def cdf(self, value):
        """The cumulative distribution function at ``value``."""
        raise NotImplementedError

    def icdf(self, value):
        """The inverse cumulative distribution function at ``value``."""
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        """Every value of a discrete support, along a new leading dimension; with
        ``expand=False`` the batch dimensions are left as size 1."""
        raise NotImplementedError

    def entropy(self):
        """The entropy, per batch element."""
        raise NotImplementedError

    def perplexity(self):
        """exp(entropy)."""
        return ember.exp(self.entropy())

    def _extended_shape(self, sample_shape=()):
        """``sample_shape + batch_shape + event_shape``."""
        return ember.Size(tuple(sample_shape) + self._batch_shape + self._event_shape)

    def _validate_sample(self, value):
        """Raise unless ``value`` is a tensor broadcastable to the batch and event shapes
        that lies in the support."""
        if not isinstance(value, ember.Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_start = value.dim() - len(self._event_shape)
        if value.size()[event_start:] != self._event_shape:
            raise ValueError("The right-most size of value must match event_shape: "
                             f"{value.size()} vs {self._event_shape}.")
        actual, expected = value.size(), self._batch_shape + self._event_shape
        for got, want in zip(reversed(actual), reversed(expected)):
            if got != 1 and want != 1 and got != want:
                raise ValueError("Value is not broadcastable with batch_shape+event_shape: "
                                 f"{actual} vs {ember.Size(expected)}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{self.__class__} does not define `support` to enable sample "
                          "validation. Please initialize the distribution with "
                          "`validate_args=False` to turn off validation.", stacklevel=3)
            return
        if not ember._is_all_true(support.check(value)):
            raise ValueError(
                f"Expected value argument ({type(value).__name__} of shape "
                f"{tuple(value.shape)}) to be within the support ({support!r}) of the "
                f"distribution {self!r}, but found invalid values:\n{value}")

    def _get_checked_instance(self, cls, _instance=None):
        """A blank instance for ``expand`` to fill; a subclass with its own ``__init__``
        must write its own ``expand``."""
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom "
                "__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def _expanded(self, cls, batch_shape, _instance, params, trailing=()):
        """The common body of ``cls.expand``: a new instance whose attributes named in
        ``params`` (tensors or distributions; those absent from this one's ``__dict__``, such
        as a lazy property not yet computed, are skipped) are expanded to ``batch_shape +
        trailing``, with this event shape and validation setting. The caller copies what
        else the instance needs."""
        new = self._get_checked_instance(cls, _instance)
        batch_shape = ember.Size(batch_shape)
        shape = batch_shape + tuple(trailing)
        for name in params:
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(shape))
        super(cls, new).__init__(batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def __repr__(self):
        shown = []
        for name in self.arg_constraints:
            if name in self.__dict__:
                value = self.__dict__[name]
                shown.append(f"{name}: {value if value.numel() == 1 else value.size()}")
        return f"{self.__class__.__name__}({', '.join(shown)})"
