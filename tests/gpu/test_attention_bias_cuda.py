"""CausalBias masks on a GPU: the same outputs and gradients as their boolean masks on the
CPU (tests/nn/test_attention_bias.py has the rest)."""

import pytest

from ember.nn.attention.bias import causal_lower_right, causal_upper_left
from ember.testing import assert_close
from tests.nn.test_attention_bias import _attend, _make

pytestmark = pytest.mark.cuda


@pytest.mark.parametrize("factory", [causal_upper_left, causal_lower_right])
@pytest.mark.parametrize("L, S", [(3, 5), (5, 3), (4, 4)])
def test_causal_bias_attention_on_cuda(factory, L, S):
    mask = _make(factory, L, S)
    assert mask._materialize("cuda").device.type == "cuda"
    gpu = _attend(mask, L, S, device="cuda")
    assert all(t.device.type == "cuda" for t in gpu)
    for got, want in zip(gpu, _attend(mask._materialize(), L, S)):
        assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)
