"""The Triton cross_entropy on inputs of 3 or more dims checks its class weight and target as
the CPU code does (round 27): a (C, 1) weight counts as (C,), a wrong count gets nll_loss2d's
short message, and a Byte target is refused."""

import pytest

import ember
import ember.nn.functional as F
from tests.gpu import test_cuda_kernels as kernels

overrides = kernels.overrides        # the Triton kernels' fixture

pytestmark = pytest.mark.cuda


@pytest.mark.parametrize("shape, smoothing, reduction", [
    ((4, 3, 9), 0.0, "mean"), ((4, 3, 9), 0.0, "none"), ((2, 3, 4, 5), 0.0, "mean"),
    ((2, 3, 4, 5), 0.0, "sum"), ((2, 3, 2, 2, 2), 0.2, "sum"), ((2, 3, 2, 2, 2), 0.2, "none")])
def test_column_weight_on_the_kernel(overrides, monkeypatch, shape, smoothing, reduction):
    forward = kernels._count_launches(monkeypatch, "triton_losses", "cross_entropy_rows")
    ember.manual_seed(0)
    host = ember.randn(shape)
    target = ember.randint(0, 3, shape[:1] + shape[2:])
    weight = ember.tensor([[0.5], [1.0], [2.0]])
    loss = [F.cross_entropy(x, target.to(x.device), weight=weight.to(x.device),
                            reduction=reduction, label_smoothing=smoothing)
            for x in (host, host.cuda())]
    kernels._same(loss[1], loss[0], atol=1e-5, rtol=1e-5)
    assert forward


@pytest.mark.parametrize("weight, target, message", [
    (ember.ones(4), ember.zeros(2, 2, 2, 2, dtype=ember.long),
     "weight tensor should be defined either for all or no classes"),
    (None, ember.zeros(2, 2, 2, 2, dtype=ember.uint8), "expected scalar type Long but found Byte"),
    (ember.ones(3, 1), ember.zeros(2, 2, 2, 2, dtype=ember.long),
     "Index tensor must have the same number of dimensions as input tensor"),
])
def test_errors_as_on_the_cpu(overrides, weight, target, message):
    x = ember.zeros(2, 3, 2, 2, 2)
    for device in ("cpu", "cuda"):
        with pytest.raises(RuntimeError, match=f"^{message}$"):
            F.cross_entropy(x.to(device), target.to(device), label_smoothing=0.1,
                            weight=None if weight is None else weight.to(device))
