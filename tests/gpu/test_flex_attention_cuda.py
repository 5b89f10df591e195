"""flex_attention on a GPU: a block mask and a score_mod reading a captured tensor give the
CPU's values, and gradients reach the captured tensor (tests/nn/test_flex_attention.py has
the rest)."""

import pytest

import ember
from ember.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention
from ember.testing import assert_close
from tests.nn.test_flex_attention import _qkv, causal

pytestmark = pytest.mark.cuda


def test_flex_attention_with_a_captured_bias_and_block_mask_on_cuda():
    q, k, v = (t.to("cuda").requires_grad_() for t in _qkv(L=8, S=8))
    bias = ember.randn(8, 8, device="cuda", requires_grad=True)
    bm = create_block_mask(causal, 1, 1, 8, 8, device="cuda", BLOCK_SIZE=4)
    out, aux = flex_attention(q, k, v, lambda s, b, h, qi, kv: s + bias[qi, kv], bm,
                              return_aux=AuxRequest(lse=True))
    assert out.device.type == "cuda" and aux.lse.device.type == "cuda"
    out.sum().backward()
    assert bias.grad.device.type == "cuda"
    cpu_bias = bias.detach().cpu()
    cpu = flex_attention(*(t.detach().cpu() for t in (q, k, v)),   # (no CPU backward)
                         lambda s, b, h, qi, kv: s + cpu_bias[qi, kv], bm.to("cpu"))
    assert_close(out.cpu(), cpu, rtol=1e-4, atol=1e-5)
