"""Batch norm over spans of samples (round 29): the same bits as in one piece, and an input
gradient that becomes .grad without a copy."""

import numpy as np
import pytest

import ember
from ember.ops import norm_batch


def _forward_backward(x_np, g_np, affine):
    bn = ember.nn.BatchNorm2d(x_np.shape[1], affine=affine)
    if affine:
        with ember.no_grad():
            bn.weight.copy_(ember.linspace(0.5, 1.5, x_np.shape[1]))
            bn.bias.copy_(ember.linspace(-1, 1, x_np.shape[1]))
    x = ember.tensor(x_np, requires_grad=True)
    y = bn(x)
    y.backward(ember.tensor(g_np))
    grads = [x.grad] + ([bn.weight.grad, bn.bias.grad] if affine else [])
    return [t.detach().numpy() for t in [y, bn.running_mean, bn.running_var] + grads], x


@pytest.mark.parametrize("shape", [(32, 32, 32, 32), (33, 16, 20, 20)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_in_spans_matches_one_piece_bitwise(monkeypatch, shape, affine):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    x3 = x.reshape(shape[0], shape[1], -1)
    assert len(norm_batch._sample_spans(np, x3)) > 1          # the spans are taken
    spanned, _ = _forward_backward(x, g, affine)
    monkeypatch.setattr(norm_batch, "_SPAN_BYTES", 1 << 40)
    assert len(norm_batch._sample_spans(np, x3)) == 1
    whole, _ = _forward_backward(x, g, affine)
    for a, b in zip(spanned, whole):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    # against float64 statistics: the output is normalized per channel
    y = spanned[0].astype(np.float64)
    if not affine:
        np.testing.assert_allclose(y.mean(axis=(0, 2, 3)), 0, atol=1e-5)
        np.testing.assert_allclose(y.var(axis=(0, 2, 3)), 1, rtol=1e-3)


@pytest.mark.parametrize("shape", [(8, 4, 16, 16), (32, 32, 32, 32)])
def test_batch_norm_input_gradient_owns_its_memory(shape):
    # the fused backward's input gradient is laid out as the input and owns its memory:
    # .grad takes it as it is (a view of it was copied)
    rng = np.random.default_rng(1)
    x, g = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    c = shape[1]
    mean = x.mean(axis=(0, 2, 3), dtype=np.float32)
    invstd = (1 / np.sqrt(x.var(axis=(0, 2, 3)) + 1e-5)).astype(np.float32)
    gx, gw, gb = norm_batch._batch_norm_arrays(g, x, np.ones(c, np.float32), mean, invstd,
                                               True, (True, True, True))
    assert gx.shape == shape and gx.base is None and gx.flags.owndata
    assert gx.flags.c_contiguous
    np.testing.assert_allclose(gb, g.sum(axis=(0, 2, 3)), rtol=1e-4)


def test_batch_norm_spans_only_for_long_contiguous_rows():
    spans = norm_batch._sample_spans
    assert spans(np, np.zeros((64, 16, 100), np.float32)) == ((0, 64),)     # short rows
    assert spans(np, np.zeros((2, 4, 512), np.float32)) == ((0, 2),)        # small
    t = np.zeros((32, 1024, 32), np.float32).transpose(0, 2, 1)
    assert spans(np, t) == ((0, 32),)                                       # not contiguous
    cut = spans(np, np.zeros((33, 16, 400), np.float32))
    assert cut[0] == (0, 10) and cut[-1] == (30, 33) and len(cut) == 4
