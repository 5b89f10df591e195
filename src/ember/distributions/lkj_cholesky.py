"""LKJCholesky: the LKJ distribution over lower Cholesky factors L of correlation matrices,
with density proportional to det(L L^T)^(concentration - 1) on correlation matrices."""

import math
import operator

import ember
from ember.distributions import constraints
from ember.distributions.beta import Beta
from ember.distributions.distribution import Distribution
from ember.distributions.utils import broadcast_all

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    """The LKJ distribution of the Cholesky factor L of a ``dim`` x ``dim`` correlation matrix
    M = L L^T, with p(M) proportional to det(M)^(eta - 1), eta = ``concentration``.

    Row k of L (k = 1..dim-1) is (sqrt(y) u, sqrt(1 - y), 0, ...) with u uniform on the unit
    sphere of R^k and y ~ Beta(k/2, b_k), b_k = eta + (dim - 1 - k)/2 (the onion method of
    Lewandowski, Kurowicka and Joe, 2009). Over the strictly lower entries of L this gives the
    density prod_k L_kk^(2 b_k - 2) Gamma(b_k + k/2) / (Gamma(b_k) pi^(k/2))."""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError("Expected dim to be an integer greater than or equal to 2. "
                             f"Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        size = operator.index(dim)                  # an int (or integer tensor), not 2.0
        super().__init__(self.concentration.size(), ember.Size((size, size)),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(LKJCholesky, batch_shape, _instance, ("concentration",))
        new.dim = self.dim
        return new

    def _row_params(self):
        """k = 1..dim-1 and b_k = eta + (dim - 1 - k)/2, the Beta parameters of row k."""
        conc = self.concentration
        dtype = conc.dtype if conc.is_floating_point() else ember.get_default_dtype()
        dim = operator.index(self.dim)
        k = ember.arange(1, dim, dtype=dtype, device=conc.device)
        return k, conc.unsqueeze(-1) + (dim - 1 - k) / 2

    def sample(self, sample_shape=()):
        """Onion method: row k of L is sqrt(y_k) u_k on its first k entries and
        sqrt(1 - y_k) on the diagonal."""
        with ember.no_grad():
            k, b = self._row_params()
            y = Beta(k / 2, b, validate_args=False).sample(sample_shape)
            y = ember.cat([ember.zeros_like(y[..., :1]), y], -1)   # row 0 is (1, 0, ...)
            shape = self._extended_shape(sample_shape)
            u = ember.randn(shape, dtype=y.dtype, device=y.device).tril(-1)
            norm = ember.linalg.vector_norm(u, dim=-1, keepdim=True)
            u = u / norm.clamp(min=ember.finfo(y.dtype).tiny)
            diag = (1 - y).clamp(min=ember.finfo(y.dtype).tiny).sqrt()
            return y.sqrt().unsqueeze(-1) * u + ember.diag_embed(diag)

    def log_prob(self, value):
        """sum_k (2 b_k - 2) log L_kk + log Gamma(b_k + k/2) - log Gamma(b_k)
        - (k/2) log(pi), over rows k = 1..dim-1 (Lebesgue measure on the entries below
        the diagonal)."""
        if self._validate_args:
            self._validate_sample(value)
        k, b = self._row_params()
        log_diag = value.diagonal(dim1=-2, dim2=-1)[..., 1:].log()
        unnormalized = ((2 * b - 2) * log_diag).sum(-1)
        normalizer = (ember.lgamma(b + k / 2) - ember.lgamma(b) - k / 2 * math.log(math.pi))
        return unnormalized + normalizer.sum(-1)
