"""A double backward through layer_norm that reaches only its saved statistics (forces of a
potential with a LayerNorm) gives weight and bias no gradient, as PyTorch's does: the bias is
"not used in the graph" and stays without .grad, where a zero gradient would let AdamW decay
it."""

import numpy as np
import pytest

import ember


def _setup():
    rng = np.random.default_rng(7)
    pos = ember.from_numpy(rng.standard_normal((6, 3)).astype(np.float32)).requires_grad_()
    w = ember.from_numpy(rng.standard_normal(3).astype(np.float32)).requires_grad_()
    b = ember.zeros(3, requires_grad=True)
    y = ember.nn.functional.layer_norm(pos * pos, (3,), w, b)
    forces = ember.autograd.grad(y[:, 0].sum(), pos, create_graph=True)[0]
    return pos, w, b, forces


def test_bias_unused_in_force_graph():
    pos, w, b, forces = _setup()
    with pytest.raises(RuntimeError, match="index 2 appears to not have been used"):
        ember.autograd.grad(forces.pow(2).sum(), [pos, w, b], retain_graph=True)
    g_pos, g_w, g_b = ember.autograd.grad(forces.pow(2).sum(), [pos, w, b], allow_unused=True)
    assert g_b is None and g_pos is not None and g_w is not None

