"""Example parameters of the discrete distributions (and their relaxations) for the generic
tests."""

import ember
from ember.distributions import (Bernoulli, Binomial, Categorical, Geometric, Multinomial,
                                 NegativeBinomial, OneHotCategorical,
                                 OneHotCategoricalStraightThrough, Poisson, RelaxedBernoulli,
                                 RelaxedOneHotCategorical)
from ember.distributions.relaxed_bernoulli import LogitRelaxedBernoulli
from ember.distributions.relaxed_categorical import ExpRelaxedCategorical


def _t(values, grad=True):
    return ember.tensor(values, dtype=ember.float64, requires_grad=grad)


_CATEGORICAL = [
    {"probs": _t([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]])},
    {"probs": _t([2.0, 1.0, 1.0])},                       # unnormalized: divided by its sum
    {"logits": _t([1.0, -0.5, 0.2, 0.0])},
]

EXAMPLES = [
    (Bernoulli, [
        {"probs": _t([0.2, 0.9])},
        {"logits": _t([[-1.0, 0.5], [2.0, 0.1]])},
        {"probs": 0.3},
    ]),
    (Binomial, [
        {"total_count": _t([4.0, 4.0], grad=False), "probs": _t([0.2, 0.6])},
        {"total_count": 3, "logits": _t([[0.3], [-1.2]])},
        {"total_count": 10, "probs": 0.3},
    ]),
    (Categorical, _CATEGORICAL),
    (OneHotCategorical, _CATEGORICAL),
    (OneHotCategoricalStraightThrough, _CATEGORICAL),
    (Geometric, [
        {"probs": _t([0.3, 0.8])},
        {"logits": _t([[-0.5], [1.0]])},
        {"probs": 0.25},
    ]),
    (Multinomial, [
        {"total_count": 5, "probs": _t([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]])},
        {"total_count": 3, "logits": _t([0.1, -0.4, 1.0, 0.0])},
    ]),
    (NegativeBinomial, [
        {"total_count": _t([2.5, 4.0], grad=False), "probs": _t([0.3, 0.6])},
        {"total_count": 3.0, "logits": _t([[0.2], [-1.0]])},
    ]),
    (Poisson, [
        {"rate": _t([0.5, 3.0, 10.0])},
        {"rate": 2.0},
    ]),
    (LogitRelaxedBernoulli, [
        {"temperature": _t(0.5), "probs": _t([0.3, 0.8])},
        {"temperature": _t([0.7, 1.5]), "logits": _t([[0.2, -1.0], [0.5, 2.0]])},
    ]),
    (RelaxedBernoulli, [
        {"temperature": _t(0.5), "probs": _t([0.3, 0.8])},
        {"temperature": _t([0.7, 1.5]), "logits": _t([[0.2, -1.0], [0.5, 2.0]])},
    ]),
    (ExpRelaxedCategorical, [
        {"temperature": _t(0.5), "probs": _t([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]])},
        {"temperature": _t(1.2), "logits": _t([0.1, -0.4, 1.0])},
    ]),
    (RelaxedOneHotCategorical, [
        {"temperature": _t(0.5), "probs": _t([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]])},
        {"temperature": _t(1.2), "logits": _t([0.1, -0.4, 1.0])},
    ]),
]
