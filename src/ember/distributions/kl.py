"""kl_divergence and register_kl: KL(p || q) by the most specific registered pair of types."""

import math
import warnings

import ember
from ember.distributions.distribution import Distribution

__all__ = ["register_kl", "kl_divergence"]

_KL_REGISTRY = {}          # (type_p, type_q) -> function, as registered
_KL_MEMOIZE = {}           # (type_p, type_q) -> function, as dispatched


def _batch_trace_XXT(bmat):
    """tr(X X^T) of each matrix in a batch: the sum of squares over the last two dims."""
    n = bmat.size(-1)
    m = bmat.size(-2)
    return bmat.reshape(bmat.shape[:-2] + (m * n,)).pow(2).sum(-1)


def _infinite_like(tensor):
    """inf, in the shape, dtype and device of ``tensor``: the KL divergence where p puts mass
    outside q's support."""
    return ember.full_like(tensor, math.inf)


def register_kl(type_p, type_q):
    """Decorator registering ``fn(p, q)`` as KL(p || q) for instances of ``type_p`` and
    ``type_q`` (and their subclasses, unless a more specific pair is registered)."""
    if not (isinstance(type_p, type) and issubclass(type_p, Distribution)):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not (isinstance(type_q, type) and issubclass(type_q, Distribution)):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fn):
        _KL_REGISTRY[type_p, type_q] = fn
        _KL_MEMOIZE.clear()
        return fn

    return decorator


def _dispatch_kl(type_p, type_q):
    """The function of the most specific registered pair; warns when ordering by p first
    and by q first disagree."""
    mro_p, mro_q = type_p.__mro__, type_q.__mro__
    matches = [(mro_p.index(p), mro_q.index(q), fn) for (p, q), fn in _KL_REGISTRY.items()
               if issubclass(type_p, p) and issubclass(type_q, q)]
    if not matches:
        return NotImplemented
    by_p = min(matches, key=lambda m: (m[0], m[1]))
    by_q = min(matches, key=lambda m: (m[1], m[0]))
    if by_p[2] is not by_q[2]:
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). "
                      f"Please register_kl({type_p.__name__}, {type_q.__name__})",
                      RuntimeWarning, stacklevel=3)
    return by_p[2]


def kl_divergence(p, q):
    """KL(p || q) = E_p[log p(x) - log q(x)], batched over the distributions' batch shape.

    Raises NotImplementedError when no function is registered for the pair's types."""
    key = type(p), type(q)
    fn = _KL_MEMOIZE.get(key)
    if fn is None:
        fn = _KL_MEMOIZE[key] = _dispatch_kl(*key)
    if fn is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                                  f"{type(p).__name__} and q type {type(q).__name__}")
    return fn(p, q)
