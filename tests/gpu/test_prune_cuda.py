"""Pruning CUDA tensors: masks on the GPU, the same as the CPU's (tests/nn/test_prune.py has
the rest)."""

import pytest

import ember.nn.utils.prune as prune
from tests.nn.test_prune import linear

pytestmark = pytest.mark.cuda


def test_pruning_cuda_tensors():
    m = linear().cuda()
    prune.l1_unstructured(m, "weight", amount=3)
    prune.ln_structured(m, "weight", amount=1, n=1, dim=0)
    assert m.weight_mask.device.type == "cuda"
    assert m.weight_mask.cpu().tolist() == [[1, 1, 1, 1], [1, 1, 0, 1], [0, 0, 0, 0]]
    prune.remove(m, "weight")
    assert m.weight.device.type == "cuda"
