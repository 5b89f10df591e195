"""OpInfo entries for ``_kernel_input`` (ember/ops/underivable.py): the view through which a
composite standing for one of PyTorch's kernels (grid_sample, embedding_bag, segment_reduce)
takes its inputs, refusing forward AD (and, with a backward kernel named, double backward)
as that kernel does."""

from tests.ops.opdb.core import ALL, OpInfo, SampleInput, make


def _kernel_input_ref(x, kernel, backward=None):
    return x


def _kernel_input_samples(dtype, requires_grad):
    def t(*shape):
        return make(shape, dtype, requires_grad and (dtype.is_floating_point or dtype.is_complex))
    yield SampleInput(t(3, 4), ("grid_sampler_2d",), name="forward_only")
    yield SampleInput(t(2, 3, 1), ("segment_reduce", None), name="no_backward_kernel")
    yield SampleInput(t(), ("_embedding_bag",), name="0-dim")
    yield SampleInput(t(0, 2), ("segment_reduce",), name="empty")
    yield SampleInput(t(4, 3).t(), ("grid_sampler_3d",), name="noncontiguous")


OPS = [
    # the identity: its derivative (the gradient itself) is gradchecked; the refusals are
    # pinned in tests/func/test_forward_ad_round24.py and the parity tests of round 24
    OpInfo("_kernel_input", _kernel_input_ref, _kernel_input_samples, dtypes=ALL),
]
