"""KL divergences whose p is a (low-rank) multivariate normal.

For Gaussians p = N(mu_p, S_p) and q = N(mu_q, S_q) over R^n,

    KL(p || q) = (tr(S_q^-1 S_p) + (mu_q - mu_p)^T S_q^-1 (mu_q - mu_p) - n
                  + log|S_q| - log|S_p|) / 2.

Both quadratic terms are tr(M^T S_q^-1 M): M = F_p for any factor with S_p = F_p F_p^T
(L_p, or [W_p, D_p^1/2] for a low-rank p), and M = mu_q - mu_p. That is a triangular solve
against L_q for a full q, and the Woodbury identity for a low-rank q.
"""

import ember
from ember.distributions.kl import register_kl
from ember.distributions.lowrank_multivariate_normal import (
    LowRankMultivariateNormal, _lowrank_log_det, _lowrank_whitened_sq_norm)
from ember.distributions.multivariate_normal import (
    MultivariateNormal, _half_log_det, _whitened_sq_norm)

__all__ = []


def _factor(p):
    """A matrix F with F F^T the covariance of ``p`` (unbroadcast)."""
    if isinstance(p, LowRankMultivariateNormal):
        factor, diag = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag
        batch = ember.broadcast_shapes(factor.shape[:-2], diag.shape[:-1])
        diag_sqrt = ember.diag_embed(diag.sqrt()).expand(batch + diag.shape[-1:] * 2)
        return ember.cat([factor.expand(batch + factor.shape[-2:]), diag_sqrt], -1)
    return p._unbroadcasted_scale_tril


def _log_det(p):
    """log|covariance| of ``p``."""
    if isinstance(p, LowRankMultivariateNormal):
        return _lowrank_log_det(p._unbroadcasted_cov_diag, p._capacitance_tril)
    return 2 * _half_log_det(p._unbroadcasted_scale_tril)


def _quadratic(q, mat):
    """tr(mat^T S_q^-1 mat) per batch element."""
    if isinstance(q, LowRankMultivariateNormal):
        return _lowrank_whitened_sq_norm(q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag,
                                         q._capacitance_tril, mat)
    return _whitened_sq_norm(q._unbroadcasted_scale_tril, mat)


def _kl_gaussians(p, q, kind):
    if p.event_shape != q.event_shape:
        raise ValueError(f"KL-divergence between two {kind} with different event shapes "
                         "cannot be computed")
    n = p.event_shape[0]
    trace = _quadratic(q, _factor(p))
    maha = _quadratic(q, (q.loc - p.loc).unsqueeze(-1))
    return 0.5 * (trace + maha - n + _log_det(q) - _log_det(p))


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    return _kl_gaussians(p, q, "Multivariate Normals")


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_lowrank(p, q):
    return _kl_gaussians(p, q, "Low Rank Multivariate Normals")


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_mixed_gaussians(p, q):
    return _kl_gaussians(p, q, "(Low Rank) Multivariate Normals")
