"""Example parameters of the multivariate distributions (MultivariateNormal,
LowRankMultivariateNormal, Wishart, LKJCholesky) for the generic tests."""

import ember
from ember.distributions import (LKJCholesky, LowRankMultivariateNormal, MultivariateNormal,
                                 Wishart)


def _t(values, grad=True):
    return ember.tensor(values, dtype=ember.float64, requires_grad=grad)


_COV = [[2.0, 0.6, -0.3], [0.6, 1.0, 0.2], [-0.3, 0.2, 0.5]]
_TRIL = [[1.5, 0.0], [-0.4, 0.7]]
_PREC = [[[1.0, 0.3], [0.3, 2.0]], [[0.5, -0.1], [-0.1, 0.4]]]

EXAMPLES = [
    (MultivariateNormal, [
        {"loc": _t([0.5, -1.0, 2.0]), "covariance_matrix": _t(_COV)},
        {"loc": _t([[0.0, 1.0], [2.0, -1.0]]), "scale_tril": _t(_TRIL)},
        {"loc": _t([[[0.3, -0.2]], [[1.0, 0.0]]]), "precision_matrix": _t(_PREC)},
    ]),
    (LowRankMultivariateNormal, [
        {"loc": _t([0.5, -1.0, 2.0]), "cov_factor": _t([[1.0], [0.5], [-0.7]]),
         "cov_diag": _t([0.3, 1.2, 0.8])},
        {"loc": _t([[0.0, 1.0], [2.0, -1.0]]),
         "cov_factor": _t([[[0.4, -1.0], [0.3, 0.2]], [[1.0, 0.0], [0.5, 0.5]]]),
         "cov_diag": _t([0.5, 2.0])},
    ]),
    (Wishart, [
        {"df": _t(4.5), "covariance_matrix": _t(_COV)},
        {"df": _t([3.0, 6.0]), "scale_tril": _t(_TRIL)},
        {"df": _t(5.0), "precision_matrix": _t(_PREC)},
        {"df": 5.0, "precision_matrix": _t(_PREC[0])},
    ]),
    (LKJCholesky, [
        {"dim": 3, "concentration": _t([0.5, 1.0, 3.0])},
        {"dim": 2, "concentration": 2.0},
        {"dim": 4},
    ]),
]
