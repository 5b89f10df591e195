"""Example parameters of the gamma group (Gamma, Chi2, Beta, Dirichlet, StudentT,
FisherSnedecor, InverseGamma, VonMises, ContinuousBernoulli) for the generic tests."""

import ember
from ember.distributions import (Beta, Chi2, ContinuousBernoulli, Dirichlet, FisherSnedecor,
                                 Gamma, InverseGamma, StudentT, VonMises)


def _t(values, grad=True, dtype=ember.float64):
    return ember.tensor(values, dtype=dtype, requires_grad=grad)


EXAMPLES = [
    (Gamma, [
        {"concentration": _t([0.3, 1.0, 4.5]), "rate": _t([1.0, 0.5, 2.0])},
        {"concentration": _t([[2.0], [0.8]]), "rate": _t([1.5, 3.0])},
        {"concentration": 3.0, "rate": 2.0},
    ]),
    (Chi2, [
        {"df": _t([1.0, 2.5, 10.0])},
        {"df": _t([[0.7], [4.0]])},
        {"df": 3.0},
    ]),
    (Beta, [
        {"concentration1": _t([0.5, 2.0, 1.0]), "concentration0": _t([0.7, 3.5, 1.0])},
        {"concentration1": _t([[4.0], [0.3]]), "concentration0": _t([1.5, 6.0])},
        {"concentration1": 2.0, "concentration0": 5.0},
    ]),
    (Dirichlet, [
        {"concentration": _t([0.6, 1.5, 3.0])},
        {"concentration": _t([[2.0, 2.0], [0.4, 5.0], [1.0, 1.0]])},
        {"concentration": _t([[[1.5, 0.8, 2.5, 4.0]], [[3.0, 1.0, 1.0, 0.5]]])},
    ]),
    (StudentT, [
        {"df": _t([5.0, 9.0]), "loc": _t([0.0, -1.5]), "scale": _t([1.0, 0.4])},
        {"df": _t([[1.5], [7.0]]), "loc": _t([2.0, 0.5]), "scale": _t([0.5, 3.0])},
        {"df": 6.0},
        {"df": 0.8, "loc": 1.0, "scale": 2.0},
    ]),
    (FisherSnedecor, [
        {"df1": _t([3.0, 8.0]), "df2": _t([12.0, 20.0])},
        {"df1": _t([[1.0], [5.0]]), "df2": _t([3.0, 15.0])},
        {"df1": 6.0, "df2": 10.0},
    ]),
    (InverseGamma, [
        {"concentration": _t([5.0, 7.5]), "rate": _t([1.0, 3.0])},
        {"concentration": _t([[1.5], [0.8]]), "rate": _t([2.0, 0.5])},
        {"concentration": 6.0, "rate": 2.0},
    ]),
    (VonMises, [
        {"loc": _t([0.0, 1.0, -2.5]), "concentration": _t([0.5, 4.0, 30.0])},
        {"loc": _t([[3.0], [-0.5]]), "concentration": _t([2.0, 0.05])},
        {"loc": 0.5, "concentration": 8.0},
    ]),
    (ContinuousBernoulli, [
        {"probs": _t([0.1, 0.5, 0.5004, 0.8])},
        {"logits": _t([[-2.0], [0.0005]])},
        {"probs": _t([[0.3, 0.95], [0.499, 0.501]])},
        {"probs": 0.25},
        {"logits": -0.6},
    ]),
]
