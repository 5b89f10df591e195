"""Example parameters of the base distributions (Normal, Uniform) for the generic tests."""

import ember
from ember.distributions import Normal, Uniform


def _t(values, grad=True):
    return ember.tensor(values, dtype=ember.float64, requires_grad=grad)


EXAMPLES = [
    (Normal, [
        {"loc": _t([0.2, -1.5]), "scale": _t([1.0, 0.3])},
        {"loc": _t([[0.0], [2.0]]), "scale": _t([0.5, 2.0])},
        {"loc": 1.0, "scale": 2.0},
    ]),
    (Uniform, [
        {"low": _t([0.0, -1.0]), "high": _t([1.0, 3.5])},
        {"low": -2.0, "high": 4.0},
    ]),
]
