"""Wishart: the distribution of sums of outer products X = sum_k x_k x_k^T of ``df`` draws
x_k ~ N(0, Sigma), over symmetric positive-definite matrices (for real ``df`` > p - 1)."""

import math
import warnings
from numbers import Number

import ember
from ember.distributions import constraints
from ember.distributions.chi2 import Chi2
from ember.distributions.exp_family import ExponentialFamily
from ember.distributions.multivariate_normal import (
    _given_matrix, _half_log_det, _precision_to_scale_tril, _scale_tril_to_precision)
from ember.distributions.utils import lazy_property, refuse_vmap_different

__all__ = ["Wishart"]

_ONE_OF_THREE = ("Exactly one of covariance_matrix or precision_matrix or scale_tril may be "
                 "specified.")


def _mvdigamma(x, p):
    """The multivariate digamma psi_p(x) = sum_{i<p} psi(x - i/2)."""
    offsets = ember.arange(p, dtype=x.dtype, device=x.device) / 2
    return ember.digamma(x.unsqueeze(-1) - offsets).sum(-1)


class Wishart(ExponentialFamily):
    """The Wishart distribution W_p(df, Sigma), with Sigma given as ``covariance_matrix``,
    ``precision_matrix`` or ``scale_tril`` (L with Sigma = L L^T).

    Its density at X is |X|^((df - p - 1)/2) exp(-tr(Sigma^-1 X)/2) divided by
    2^(df p/2) |Sigma|^(df/2) Gamma_p(df/2)."""

    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self):
        return {"covariance_matrix": constraints.positive_definite,
                "precision_matrix": constraints.positive_definite,
                "scale_tril": constraints.lower_cholesky,
                "df": constraints.greater_than(self._event_shape[-1] - 1)}

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        given = (covariance_matrix, precision_matrix, scale_tril)
        if sum(m is not None for m in given) != 1:
            raise AssertionError(_ONE_OF_THREE)
        name, matrix = _given_matrix(*given)
        if matrix.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional "
                             "leading batch dimensions")
        if isinstance(df, Number):
            batch_shape = matrix.shape[:-2]
            self.df = ember.tensor(df, dtype=matrix.dtype, device=matrix.device)
        else:
            batch_shape = ember.broadcast_shapes(matrix.shape[:-2], df.shape)
            self.df = df.expand(batch_shape)
        event_shape = matrix.shape[-2:]
        self._batch_dims = [-(x + 1) for x in range(len(batch_shape))]
        setattr(self, name, matrix.expand(batch_shape + (-1, -1)))
        p = event_shape[-1]
        if bool(self.df.le(p - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}.")
        if bool(self.df.lt(p).any()):
            warnings.warn("Low df values detected. Singular samples are highly likely to occur "
                          "for ndim - 1 < df < ndim.", stacklevel=2)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = matrix
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = ember.linalg.cholesky(matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = ember.Size(batch_shape)
        matrix_shape = batch_shape + self.event_shape
        # (the factor first: a batch shape it does not broadcast to names the matrix shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(matrix_shape)
        new.df = self.df.expand(batch_shape)
        new._batch_dims = [-(x + 1) for x in range(len(batch_shape))]
        for name in ("covariance_matrix", "precision_matrix", "scale_tril"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(matrix_shape))
        super(Wishart, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return self._batch_shape + self._event_shape

    @lazy_property
    def scale_tril(self):
        """The lower Cholesky factor L of Sigma = L L^T."""
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        """The scale matrix Sigma = L L^T."""
        tril = self._unbroadcasted_scale_tril
        return (tril @ tril.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        """Sigma^-1 = L^-T L^-1 (by triangular solves)."""
        return _scale_tril_to_precision(self._unbroadcasted_scale_tril).expand(
            self._matrix_shape())

    def _df_matrix(self):
        return self.df.unsqueeze(-1).unsqueeze(-1)

    @property
    def mean(self):
        """df Sigma."""
        return self._df_matrix() * self.covariance_matrix

    @property
    def mode(self):
        """(df - p - 1) Sigma where df > p + 1, NaN elsewhere."""
        factor = self.df - self._event_shape[-1] - 1
        factor = ember.where(factor > 0, factor, ember.full_like(factor, float("nan")))
        return factor.unsqueeze(-1).unsqueeze(-1) * self.covariance_matrix

    @property
    def variance(self):
        """Var(X_ij) = df (Sigma_ij^2 + Sigma_ii Sigma_jj)."""
        cov = self.covariance_matrix
        diag = cov.diagonal(dim1=-2, dim2=-1)
        return self._df_matrix() * (cov.pow(2) + diag.unsqueeze(-1) * diag.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape):
        """Bartlett decomposition: X = L A A^T L^T with A lower triangular, A_ii^2 ~
        chi2(df - i) (i = 0..p-1) and A_ij ~ N(0, 1) below the diagonal."""
        p = self._event_shape[-1]
        tril = self._unbroadcasted_scale_tril
        offsets = ember.arange(p, dtype=tril.dtype, device=tril.device)
        df = self.df.expand(self._batch_shape).unsqueeze(-1)     # a number df stays 0-d
        chi2 = Chi2(df - offsets, validate_args=False)
        diag = chi2.rsample(sample_shape).sqrt()
        shape = self._extended_shape(sample_shape)
        noise = ember.randn(shape, dtype=tril.dtype, device=tril.device).tril(-1)
        factor = tril @ (noise + ember.diag_embed(diag))
        return factor @ factor.mT

    def rsample(self, sample_shape=(), max_try_correction=None):
        """A Bartlett-decomposition sample; samples that come out singular (possible when
        df < p, or by round-off) are redrawn up to ``max_try_correction`` times (3 by default),
        with a warning if some remain singular."""
        sample_shape = ember.Size(sample_shape)
        max_try_correction = 3 if max_try_correction is None else max_try_correction
        refuse_vmap_different("control flow")
        sample = self._bartlett_sampling(sample_shape)
        singular = ember.linalg.cholesky_ex(sample.detach()).info.ne(0)
        for _ in range(max_try_correction):
            if not bool(singular.any()):
                break
            redrawn = self._bartlett_sampling(sample_shape)
            sample = ember.where(singular.unsqueeze(-1).unsqueeze(-1), redrawn, sample)
            singular = ember.linalg.cholesky_ex(sample.detach()).info.ne(0)
        if bool(singular.any()):
            warnings.warn("Singular sample detected.", stacklevel=2)
        return sample

    def log_prob(self, value):
        """((df - p - 1) log|X| - tr(Sigma^-1 X) - df p log 2) / 2 - df log|L|
        - log Gamma_p(df/2)."""
        if self._validate_args:
            self._validate_sample(value)
        nu, p = self.df, self._event_shape[-1]
        tril = self._unbroadcasted_scale_tril
        log_det_value = ember.linalg.slogdet(value).logabsdet
        trace = ember.cholesky_solve(value, tril).diagonal(dim1=-2, dim2=-1).sum(-1)
        return (-nu * p * math.log(2) / 2 - nu * _half_log_det(tril)
                - ember.mvlgamma(nu / 2, p) + (nu - p - 1) / 2 * log_det_value - trace / 2)

    def entropy(self):
        """log Z + df p / 2 - (df - p - 1)/2 E[log|X|], with log Z = df log|L|
        + df p log(2)/2 + log Gamma_p(df/2) and E[log|X|] = psi_p(df/2) + p log 2 + log|Sigma|."""
        nu, p = self.df, self._event_shape[-1]
        half_log_det = _half_log_det(self._unbroadcasted_scale_tril)
        log_normalizer = nu * half_log_det + nu * p * math.log(2) / 2 + ember.mvlgamma(nu / 2, p)
        expected_log_det = _mvdigamma(nu / 2, p) + p * math.log(2) + 2 * half_log_det
        return log_normalizer + nu * p / 2 - (nu - p - 1) / 2 * expected_log_det

    @property
    def _natural_params(self):
        """(-Sigma^-1 / 2, (df - p - 1) / 2)."""
        return -0.5 * self.precision_matrix, 0.5 * (self.df - self._event_shape[-1] - 1)

    def _log_normalizer(self, x, y):
        """-(y + (p+1)/2) log|-x| + log Gamma_p(y + (p+1)/2): with x = -Sigma^-1/2 this is
        (df/2)(p log 2 + log|Sigma|) + log Gamma_p(df/2)."""
        half_df = y + (self._event_shape[-1] + 1) / 2
        return (-half_df * ember.linalg.slogdet(-x).logabsdet
                + ember.mvlgamma(half_df, self._event_shape[-1]))
