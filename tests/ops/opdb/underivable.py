"""OpInfo entries for ember/ops/underivable.py: the pass-through that hangs gradients computed
by a PyTorch backward kernel without a derivative (``_cdist_backward``) from a node that
refuses double backward."""

from tests.ops.opdb.core import FLOATS, LOW, OpInfo, SampleInput, make


def _underivable_ref(tensors, value, node, kernel):
    return value


def _computed(shape, dtype):
    """A backend array of the gradient's dtype, as ember.ops.underivable passes it."""
    return make(shape, dtype, low=-2, high=2)._data


def _underivable_samples(dtype, requires_grad):
    def t(*shape):
        return make(shape, dtype, requires_grad, low=-2, high=2)
    node, kernel = "CdistBackwardBackward0", "_cdist_backward"
    yield SampleInput([t(2, 4), t(2, 3), t(4, 3), t(2, 4)], (_computed((2, 3), dtype), node,
                                                             kernel), name="cdist_x1")
    yield SampleInput([t(2, 2, 4), t(2, 4, 3)], (_computed((2, 4, 3), dtype), node, kernel),
                      name="batched")
    yield SampleInput([t()], (_computed((), dtype), node, kernel), name="0-dim")
    yield SampleInput([t(0, 3)], (_computed((0, 3), dtype), node, kernel), name="empty")


OPS = [
    # the derivative raises PyTorch's NotImplementedError by design: no gradient checks
    # (tests/parity/test_parity_programs_round23_geometry_fixes.py pins the refusal)
    OpInfo("_underivable", _underivable_ref, _underivable_samples, dtypes=FLOATS + LOW,
           grad=False, skips=("cuda",)),    # the value is a CPU array: moved tensors won't match
]
