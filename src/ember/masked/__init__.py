"""ember.masked: reductions and normalizations that skip masked-out elements
(``torch.masked.sum(x, dim, mask=m)``). Built from ember ops, so autograd comes for free."""

from ember.masked._ops import (amax, amin, argmax, argmin, cumprod, cumsum, log_softmax,
                               logaddexp, logsumexp, mean, median, norm, normalize, prod, softmax,
                               softmin, std, sum, var)

__all__ = ["amax", "amin", "argmax", "argmin", "cumprod", "cumsum", "log_softmax", "logaddexp",
           "logsumexp", "mean", "median", "norm", "normalize", "prod", "softmax", "softmin",
           "std", "sum", "var"]
