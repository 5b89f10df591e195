"""Autocast's cast cache on CUDA (float16): one copy of a weight per region, shared by its
uses and by a CPU region nested in it (the cache is keyed by the weight alone)."""

import numpy as np
import pytest

import ember
from ember.amp._state import STATE

pytestmark = pytest.mark.cuda


def _cast_node(y):
    node = y.grad_fn
    while type(node).__name__ != "ToCopyBackward0":
        node = [n for n, _ in node.next_functions if n is not None][-1]
    return node


def test_a_cuda_weight_is_cast_to_float16_once_per_region():
    ember.manual_seed(0)
    w = ember.randn(3, 3, device="cuda", requires_grad=True)
    x = ember.eye(3, device="cuda")
    with ember.autocast("cuda"):
        a, b = ember.mm(x, w), ember.nn.functional.linear(x, w)
        assert a.dtype is ember.float16
        assert _cast_node(a) is _cast_node(b)
        with ember.no_grad():
            w.mul_(2)
        np.testing.assert_array_equal(ember.mm(x, w).cpu().float().detach().numpy(),
                                      a.cpu().float().detach().numpy())
    assert STATE.casts == {}
    (a.float().sum() + b.float().sum()).backward()
    np.testing.assert_array_equal(w.grad.cpu().numpy(), np.full((3, 3), 2.0, np.float32))


def test_a_cuda_gru_casts_each_weight_once():
    ember.manual_seed(0)
    m = ember.nn.GRUCell(3, 4).cuda()
    x = ember.randn(5, 2, 3, device="cuda")
    with ember.autocast("cuda"):
        h = None
        for t in range(5):
            h = m(x[t], h)
        assert len(STATE.casts) == 4      # W_ih, W_hh, b_ih, b_hh: once for the 5 steps


def test_a_cuda_lstm_casts_its_biases_once_each():
    ember.manual_seed(0)
    m = ember.nn.LSTM(3, 4).cuda()
    x = ember.randn(5, 2, 3, device="cuda")
    with ember.autocast("cuda"):
        y = m(x)[0]
        assert y.dtype is ember.float16
        assert len(STATE.casts) == 4      # W_ih, W_hh, b_ih, b_hh (the biases not summed first)
    y.float().sum().backward()
    assert all(p.grad.dtype is ember.float32 for p in m.parameters())
