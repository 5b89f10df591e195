"""MultivariateNormal: the Gaussian over vectors, given by a mean and one of a covariance
matrix, a precision matrix or a lower Cholesky factor of the covariance."""

import math

import ember
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.utils import _standard_normal, lazy_property

__all__ = ["MultivariateNormal"]

_ONE_OF_THREE = ("Exactly one of covariance_matrix or precision_matrix or scale_tril may be "
                 "specified.")


def _batch_mv(bmat, bvec):
    """Matrix-vector products ``bmat @ bvec``, batched (and broadcast) over leading dims."""
    return (bmat @ bvec.unsqueeze(-1)).squeeze(-1)


def _whitened_sq_norm(tril, mat):
    """``||tril^-1 mat||^2`` summed over the last two dims: tr(mat^T (tril tril^T)^-1 mat),
    by one triangular solve (no inverse)."""
    return ember.linalg.solve_triangular(tril, mat, upper=False).pow(2).sum((-2, -1))


def _batch_tril_solve(tril, vec):
    """tril^-1 vec for vectors ``vec`` (..., n), batched. The leading dims of ``vec`` beyond
    tril's batch (sample dims) become the columns of one solve instead of copies of tril."""
    n = vec.shape[-1]
    extra = vec.dim() - tril.dim() + 1
    if extra <= 0:
        return ember.linalg.solve_triangular(tril, vec.unsqueeze(-1), upper=False).squeeze(-1)
    outer = vec.shape[:extra]
    batch = ember.broadcast_shapes(tril.shape[:-2], vec.shape[extra:-1])
    columns = vec.expand(outer + batch + (n,)).reshape(-1, *batch, n).movedim(0, -1)
    solved = ember.linalg.solve_triangular(tril, columns, upper=False)    # (batch, n, cols)
    return solved.movedim(-1, 0).reshape(outer + batch + (n,))


def _batch_mahalanobis(tril, diff):
    """The squared Mahalanobis distance ``diff^T (tril tril^T)^-1 diff``, batched."""
    return _batch_tril_solve(tril, diff).pow(2).sum(-1)


def _half_log_det(tril):
    """Half the log-determinant of ``tril tril^T``: the sum of log diag(tril)."""
    return tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)


def _eye_like(mat):
    """The identity with the dtype and device of ``mat`` and its last dim."""
    return ember.eye(mat.shape[-1], dtype=mat.dtype, device=mat.device)


def _precision_to_scale_tril(precision):
    """A lower factor L with L L^T = precision^-1, without inverting precision.

    With J the reversal permutation, chol(J P J) = F gives P = U U^T where U = J F J is
    upper triangular, so P^-1 = U^-T U^-1 and L = U^-T is lower with a positive diagonal."""
    flipped = ember.linalg.cholesky(precision.flip((-2, -1)))
    upper = flipped.flip((-2, -1))
    return ember.linalg.solve_triangular(upper, _eye_like(precision), upper=True).mT


def _scale_tril_to_precision(tril):
    """(L L^T)^-1 = L^-T L^-1 from a lower factor L (triangular solves, not a general
    inverse); like torch, its gradient treats L as a full matrix."""
    return ember.cholesky_inverse(tril)


def _given_matrix(covariance_matrix, precision_matrix, scale_tril):
    """(name, value) of the one matrix parameter that is not None."""
    return next((name, value) for name, value in (("covariance_matrix", covariance_matrix),
                                                   ("precision_matrix", precision_matrix),
                                                   ("scale_tril", scale_tril))
                if value is not None)


class MultivariateNormal(Distribution):
    """The multivariate normal N(loc, Sigma), with Sigma given as ``covariance_matrix``,
    ``precision_matrix`` (Sigma^-1) or ``scale_tril`` (L with Sigma = L L^T); every
    computation goes through L."""

    arg_constraints = {"loc": constraints.real_vector,
                       "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = (covariance_matrix, precision_matrix, scale_tril)
        if sum(m is not None for m in given) != 1:
            raise ValueError(_ONE_OF_THREE)
        name, matrix = _given_matrix(*given)
        if matrix.dim() < 2:
            label = "scale_tril matrix" if name == "scale_tril" else name
            raise ValueError(f"{label} must be at least two-dimensional, with optional "
                             "leading batch dimensions")
        batch_shape = ember.broadcast_shapes(matrix.shape[:-2], loc.shape[:-1])
        setattr(self, name, matrix.expand(batch_shape + (-1, -1)))
        self.loc = loc.expand(batch_shape + (-1,))
        super().__init__(batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = matrix
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = ember.linalg.cholesky(matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = ember.Size(batch_shape)
        matrix_shape = batch_shape + self.event_shape + self.event_shape
        new.loc = self.loc.expand(batch_shape + self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "precision_matrix", "scale_tril"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(matrix_shape))
        super(MultivariateNormal, new).__init__(batch_shape, self.event_shape,
                                                validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return self._batch_shape + self._event_shape + self._event_shape

    @lazy_property
    def scale_tril(self):
        """The lower Cholesky factor L of the covariance, Sigma = L L^T."""
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        """The covariance matrix Sigma = L L^T."""
        tril = self._unbroadcasted_scale_tril
        return (tril @ tril.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        """The precision matrix Sigma^-1 = L^-T L^-1 (by triangular solves)."""
        return _scale_tril_to_precision(self._unbroadcasted_scale_tril).expand(
            self._matrix_shape())

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return (self._unbroadcasted_scale_tril.pow(2).sum(-1)
                .expand(self._batch_shape + self._event_shape))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def log_prob(self, value):
        """-(n log(2 pi) + (x - mu)^T Sigma^-1 (x - mu)) / 2 - log|L|."""
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        maha = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        half_log_det = _half_log_det(self._unbroadcasted_scale_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + maha) - half_log_det

    def entropy(self):
        """n (1 + log(2 pi)) / 2 + log|L|."""
        half_log_det = _half_log_det(self._unbroadcasted_scale_tril)
        value = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + half_log_det
        return value.expand(self._batch_shape)
