"""OpInfo entries for ember/ops/random_nodes.py: the pass-through that gives samples drawn
from distributions with tensor parameters PyTorch's zero-gradient sampler nodes."""

from tests.ops.opdb.core import FLOATS, LOW, OpInfo, SampleInput, make


def _sampled_ref(tensors, sample, node, kernel):
    return sample


def _draw(shape, dtype):
    """A backend array of the sample's dtype, as ember._random passes it."""
    return make(shape, dtype, low=-2, high=2)._data


def _sampled_samples(dtype, requires_grad):
    def p(*shape):
        return make(shape, dtype, requires_grad, low=0.1, high=2)
    yield SampleInput([p(4), p(4)], (_draw((4,), dtype), "NormalBackward3", "normal"),
                      name="two_parameters")
    yield SampleInput([p(2, 1), p(3)], (_draw((2, 3), dtype), "NormalBackward3", "normal"),
                      name="broadcast")
    yield SampleInput([p(2, 3)], (_draw((2, 3), dtype), "PoissonBackward0", "poisson"),
                      name="one_parameter")
    yield SampleInput([p()], (_draw((), dtype), "BernoulliBackward0", "bernoulli"),
                      name="0-dim")
    yield SampleInput([p(0, 2)], (_draw((0, 2), dtype), "NormalBackward1", "normal"),
                      name="empty")


OPS = [
    # the output is the drawn sample: its derivative (zero) is gradchecked exactly
    OpInfo("_sampled", _sampled_ref, _sampled_samples, dtypes=FLOATS + LOW, gradgrad=True,
           skips=("cuda",)),             # its samples draw on the CPU
]
