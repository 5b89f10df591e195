"""LowRankMultivariateNormal: a multivariate normal whose covariance is a low-rank matrix plus
a diagonal, W W^T + diag(D), handled through the small "capacitance" matrix."""

import math

import ember
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.multivariate_normal import (_batch_mv, _batch_tril_solve,
                                                     _eye_like, _half_log_det)
from ember.distributions.utils import _standard_normal, lazy_property

__all__ = ["LowRankMultivariateNormal"]


def _capacitance_tril(cov_factor, cov_diag):
    """The Cholesky factor A of the capacitance matrix C = I + W^T D^-1 W (m x m)."""
    scaled = cov_factor / cov_diag.unsqueeze(-1)
    capacitance = cov_factor.mT @ scaled
    return ember.linalg.cholesky(capacitance + _eye_like(capacitance))


def _woodbury_whiten(cov_factor, cov_diag, capacitance_tril, mat):
    """A^-1 W^T D^-1 mat: what the Woodbury identity subtracts from D^-1 in
    (W W^T + D)^-1 = D^-1 - D^-1 W C^-1 W^T D^-1, with C = A A^T."""
    projected = (cov_factor / cov_diag.unsqueeze(-1)).mT @ mat
    return ember.linalg.solve_triangular(capacitance_tril, projected, upper=False)


def _lowrank_whitened_sq_norm(cov_factor, cov_diag, capacitance_tril, mat):
    """tr(mat^T (W W^T + D)^-1 mat), per batch element, by the Woodbury identity."""
    diag_term = (mat.pow(2) / cov_diag.unsqueeze(-1)).sum((-2, -1))
    low_rank_term = _woodbury_whiten(cov_factor, cov_diag, capacitance_tril, mat)
    return diag_term - low_rank_term.pow(2).sum((-2, -1))


def _lowrank_log_det(cov_diag, capacitance_tril):
    """log|W W^T + D| = log|C| + log|D| (matrix determinant lemma)."""
    return 2 * _half_log_det(capacitance_tril) + cov_diag.log().sum(-1)


class LowRankMultivariateNormal(Distribution):
    """The multivariate normal N(loc, cov_factor @ cov_factor.T + diag(cov_diag)); the
    determinant and inverse of the covariance come from the rank x rank capacitance matrix
    I + cov_factor.T @ diag(cov_diag)^-1 @ cov_factor."""

    arg_constraints = {"loc": constraints.real_vector,
                       "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = loc.shape[-1:]
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional "
                             "leading batch dimensions")
        if cov_factor.shape[-2:-1] != event_shape:
            raise ValueError("cov_factor must be a batch of matrices with shape "
                             f"{event_shape[0]} x m")
        if cov_diag.shape[-1:] != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {event_shape}")
        try:
            loc_, self.cov_factor, cov_diag_ = ember.broadcast_tensors(
                loc.unsqueeze(-1), cov_factor, cov_diag.unsqueeze(-1))
        except RuntimeError as e:
            raise ValueError(f"Incompatible batch shapes: loc {loc.shape}, cov_factor "
                             f"{cov_factor.shape}, cov_diag {cov_diag.shape}") from e
        self.loc = loc_[..., 0]
        self.cov_diag = cov_diag_[..., 0]
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        # factored before the arguments are validated: a cov_diag that leaves the capacitance
        # indefinite fails in the Cholesky factorization, as in PyTorch
        self._capacitance_tril = _capacitance_tril(cov_factor, cov_diag)
        super().__init__(self.loc.shape[:-1], event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(LowRankMultivariateNormal, batch_shape, _instance,
                             ("loc", "cov_diag"), trailing=self.event_shape)
        new.cov_factor = self.cov_factor.expand(new.loc.shape + self.cov_factor.shape[-1:])
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        return new

    def _matrix_shape(self):
        return self._batch_shape + self._event_shape + self._event_shape

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        """diag(W W^T) + D."""
        factor, diag = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        return (factor.pow(2).sum(-1) + diag).expand(self._batch_shape + self._event_shape)

    @lazy_property
    def scale_tril(self):
        """The Cholesky factor of W W^T + D, as D^1/2 chol(I + D^-1/2 W W^T D^-1/2): the
        scaled matrix is well conditioned."""
        diag_sqrt = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        scaled = self._unbroadcasted_cov_factor / diag_sqrt
        inner = scaled @ scaled.mT
        tril = ember.linalg.cholesky(inner + _eye_like(inner)) * diag_sqrt
        return tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        """W W^T + diag(D)."""
        factor = self._unbroadcasted_cov_factor
        covariance = factor @ factor.mT + ember.diag_embed(self._unbroadcasted_cov_diag)
        return covariance.expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        """(W W^T + D)^-1 = D^-1 - (A^-1 W^T D^-1)^T (A^-1 W^T D^-1) (Woodbury)."""
        factor, diag = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        whitened = ember.linalg.solve_triangular(
            self._capacitance_tril, (factor / diag.unsqueeze(-1)).mT, upper=False)
        precision = ember.diag_embed(diag.reciprocal()) - whitened.mT @ whitened
        return precision.expand(self._matrix_shape())

    def rsample(self, sample_shape=()):
        """loc + W z1 + D^1/2 z2 with z1 ~ N(0, I_rank), z2 ~ N(0, I_n)."""
        shape = self._extended_shape(sample_shape)
        rank = self.cov_factor.shape[-1]
        options = {"dtype": self.loc.dtype, "device": self.loc.device}
        eps_factor = _standard_normal(shape[:-1] + (rank,), **options)
        eps_diag = _standard_normal(shape, **options)
        return (self.loc + _batch_mv(self._unbroadcasted_cov_factor, eps_factor)
                + self._unbroadcasted_cov_diag.sqrt() * eps_diag)

    def log_prob(self, value):
        """-(n log(2 pi) + log|Sigma| + (x - mu)^T Sigma^-1 (x - mu)) / 2 via Woodbury."""
        if self._validate_args:
            self._validate_sample(value)
        factor, diag = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        diff = value - self.loc
        projected = _batch_mv((factor / diag.unsqueeze(-1)).mT, diff)         # W^T D^-1 diff
        whitened = _batch_tril_solve(self._capacitance_tril, projected)
        maha = (diff.pow(2) / diag).sum(-1) - whitened.pow(2).sum(-1)
        log_det = _lowrank_log_det(diag, self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + log_det + maha)

    def entropy(self):
        """(n (1 + log(2 pi)) + log|Sigma|) / 2."""
        log_det = _lowrank_log_det(self._unbroadcasted_cov_diag, self._capacitance_tril)
        value = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + log_det)
        return value.expand(self._batch_shape)
