"""func.rearrange on a GPU: the same values, gradients on the GPU (tests/func/test_rearrange.py
has the rest)."""

import numpy as np
import pytest

import ember
from ember.func import rearrange
from tests.func.test_rearrange import _arange

pytestmark = pytest.mark.cuda


def test_rearrange_on_cuda():
    x = _arange(2, 6, 4)
    t = ember.tensor(x, device="cuda", requires_grad=True)
    got = rearrange(t, "b (h w) c -> b c h w", h=3)
    assert got.device.type == "cuda"
    np.testing.assert_array_equal(got.detach().cpu().numpy(),
                                  x.reshape(2, 3, 2, 4).transpose(0, 3, 1, 2))
    got.sum().backward()
    assert t.grad.device.type == "cuda"
    np.testing.assert_array_equal(t.grad.cpu().numpy(), np.ones((2, 6, 4), np.float32))
