"""Example parameters of the wrapper distributions (TransformedDistribution, Independent,
MixtureSameFamily) for the generic tests: each dict builds its inner distribution."""

import ember
from ember.distributions import (Bernoulli, Categorical, Independent, MixtureSameFamily,
                                 Normal, TransformedDistribution, Uniform)
from ember.distributions.transforms import (AffineTransform, ExpTransform,
                                            IndependentTransform, SigmoidTransform,
                                            StickBreakingTransform, TanhTransform)


def _t(values, grad=True):
    return ember.tensor(values, dtype=ember.float64, requires_grad=grad)


EXAMPLES = [
    (TransformedDistribution, [
        {"base_distribution": Normal(_t([0.2, -1.0]), _t([0.5, 1.2])),
         "transforms": [ExpTransform()]},
        {"base_distribution": Uniform(_t([0.0, 1.0]), _t([1.0, 3.0])),
         "transforms": AffineTransform(2.0, -3.0)},
        {"base_distribution": Normal(_t([[0.3, -0.2, 0.1]]), _t([[1.0, 0.5, 2.0]])),
         "transforms": [StickBreakingTransform()]},
        {"base_distribution": Normal(_t([0.0, 1.0, -1.0]), 0.7),
         "transforms": [SigmoidTransform(), AffineTransform(_t([-1.0, 0.0, 2.0]), 3.0)]},
        {"base_distribution": Normal(_t([[0.5, -0.5], [0.0, 0.2]]), _t([0.3, 0.8])),
         "transforms": [IndependentTransform(TanhTransform(), 1)]},
        {"base_distribution": Normal(0.1, 0.4),
         "transforms": [AffineTransform(_t([[1.0], [-1.0]]), _t([2.0, 0.5, 1.5]))]},
    ]),
    (Independent, [
        {"base_distribution": Normal(_t([[0.0, 1.0, -2.0], [0.5, 0.5, 0.5]]),
                                     _t([1.0, 0.2, 3.0])),
         "reinterpreted_batch_ndims": 1},
        {"base_distribution": Normal(_t([[0.0, 1.0], [-0.5, 2.0]]), 0.5),
         "reinterpreted_batch_ndims": 2},
        {"base_distribution": Uniform(_t([0.0, -1.0]), _t([2.0, 0.5])),
         "reinterpreted_batch_ndims": 0},
        {"base_distribution": Bernoulli(probs=_t([0.3, 0.8])), "reinterpreted_batch_ndims": 0},
    ]),
    (MixtureSameFamily, [
        {"mixture_distribution": Categorical(probs=_t([0.3, 0.7])),
         "component_distribution": Normal(_t([-1.0, 2.0]), _t([1.0, 0.5]))},
        {"mixture_distribution": Categorical(logits=_t([[0.0, 1.0, -1.0], [0.5, 0.5, 0.0]])),
         "component_distribution": Independent(
             Normal(_t([[[0.0, 1.0], [2.0, -1.0], [0.5, 0.5]],
                        [[-2.0, 0.0], [1.0, 1.0], [3.0, -3.0]]]), 0.8), 1)},
        {"mixture_distribution": Categorical(probs=_t([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]])),
         "component_distribution": Normal(_t([[0.0, 1.0, -1.0], [4.0, 3.0, 0.5]]),
                                          _t([0.5, 2.0, 1.0]))},
    ]),
]
