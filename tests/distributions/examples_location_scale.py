"""Example parameters of the location-scale group (Exponential, Cauchy, Laplace, Gumbel,
LogNormal, HalfNormal, HalfCauchy, Weibull, Pareto, Kumaraswamy, LogisticNormal,
GeneralizedPareto) for the generic tests."""

import ember
from ember.distributions import (Cauchy, Exponential, GeneralizedPareto, Gumbel, HalfCauchy,
                                 HalfNormal, Kumaraswamy, Laplace, LogisticNormal, LogNormal,
                                 Pareto, Weibull)


def _t(values, grad=True, dtype=ember.float64):
    return ember.tensor(values, dtype=dtype, requires_grad=grad)


EXAMPLES = [
    (Exponential, [
        {"rate": _t([0.5, 2.0, 7.5])},
        {"rate": _t([[1.0], [0.1]])},
        {"rate": 1.5},
    ]),
    (Cauchy, [
        {"loc": _t([0.0, -2.5]), "scale": _t([1.0, 0.4])},
        {"loc": _t([[0.5], [3.0]]), "scale": _t([0.2, 2.0, 1.0])},
        {"loc": -1.0, "scale": 2.0},
    ]),
    (Laplace, [
        {"loc": _t([0.0, 1.5]), "scale": _t([1.0, 0.3])},
        {"loc": _t([[-1.0], [2.0]]), "scale": _t([0.5, 2.0])},
        {"loc": 0.5, "scale": 1.5},
    ]),
    (Gumbel, [
        {"loc": _t([0.0, -1.0]), "scale": _t([1.0, 2.5])},
        {"loc": _t([[0.5], [3.0]]), "scale": _t([0.3, 1.0])},
        {"loc": 1.0, "scale": 0.5},
    ]),
    (LogNormal, [
        {"loc": _t([0.0, -0.5]), "scale": _t([0.25, 1.0])},
        {"loc": _t([[0.3], [1.0]]), "scale": _t([0.5, 0.8])},
        {"loc": 0.2, "scale": 0.6},
    ]),
    (HalfNormal, [
        {"scale": _t([1.0, 0.3, 2.5])},
        {"scale": _t([[0.5], [4.0]])},
        {"scale": 1.2},
    ]),
    (HalfCauchy, [
        {"scale": _t([1.0, 0.3, 2.5])},
        {"scale": _t([[0.5], [4.0]])},
        {"scale": 0.7},
    ]),
    (Weibull, [
        {"scale": _t([1.0, 2.0, 0.5]), "concentration": _t([0.5, 3.0, 1.0])},
        {"scale": _t([[1.5], [0.8]]), "concentration": _t([1.7, 2.2])},
        {"scale": 2.0, "concentration": 1.5},
    ]),
    (Pareto, [   # alpha <= 1: infinite mean; alpha <= 2: infinite variance
        {"scale": _t([1.0, 2.0, 0.5]), "alpha": _t([0.8, 1.5, 3.0])},
        {"scale": _t([[1.0], [0.2]]), "alpha": _t([2.5, 4.0])},
        {"scale": 1.5, "alpha": 2.5},
    ]),
    (Kumaraswamy, [
        {"concentration1": _t([1.0, 2.0, 0.5]), "concentration0": _t([0.5, 3.0, 0.7])},
        {"concentration1": _t([[2.5], [1.5]]), "concentration0": _t([2.0, 4.0])},
        {"concentration1": 3.0, "concentration0": 2.0},
    ]),
    (LogisticNormal, [
        {"loc": _t([0.0, 1.0, -0.5]), "scale": _t([1.0, 0.5, 2.0])},
        {"loc": _t([[0.2, -0.3], [1.0, 0.0]]), "scale": _t([0.7, 1.3])},
        {"loc": 0.5, "scale": 1.5},
    ]),
    # float32: PyTorch 2.13's GeneralizedPareto.log_prob/cdf raise on float64 parameters
    # ("Double did not match Float"), so these stay in float32 for the parity checks.
    (GeneralizedPareto, [
        {"loc": _t([0.0, 1.0, -1.0, 0.5], dtype=ember.float32),
         "scale": _t([1.0, 2.0, 0.5, 1.5], dtype=ember.float32),
         "concentration": _t([0.0, 0.3, -0.5, 0.8], dtype=ember.float32)},
        {"loc": _t([[0.0], [2.0]], dtype=ember.float32),
         "scale": _t([0.5, 1.0], dtype=ember.float32),
         "concentration": _t([-0.25, 0.2], dtype=ember.float32)},
        {"loc": 0.0, "scale": 1.0, "concentration": -0.4},
    ]),
]
