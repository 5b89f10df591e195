"""stft and istft under vmap warn as PyTorch's per-example fallback does (once per call it
makes, none when a transform differentiates inside), and the gradients of reflect,
replicate and circular pads batch without a fallback."""

import warnings

import numpy as np
import pytest

import ember

_DROP = "There is a performance drop because we have not yet implemented the batching rule for "


def _warned(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(w.message) for w in caught]


def test_stft_and_istft_warn_once_per_fallback_call():
    x = ember.from_numpy(np.random.default_rng(0).standard_normal((3, 2, 64)).astype(np.float32))
    w = ember.hann_window(16)

    def st(v):
        return ember.stft(v, 16, 4, window=w, return_complex=True)

    _, caught = _warned(lambda: ember.func.vmap(lambda v: ember.istft(
        st(v), 16, 4, window=w, length=64))(x[:, 0]))
    assert [m[len(_DROP):].split(".")[0] for m in caught] == ["aten::stft", "aten::istft"]
    _, caught = _warned(lambda: ember.func.vmap(ember.func.vmap(st), in_dims=1)(x))
    assert len(caught) == 4                 # 1 + 3 calls: the outer loop's and the inner's
    _, caught = _warned(lambda: ember.func.vmap(ember.func.grad(
        lambda v: st(v).abs().sum()))(x[:, 0]))
    assert caught == []
    with pytest.raises(RuntimeError, match="fallback path does not support vmap over dims of "
                                           "size 0"):
        ember.func.vmap(st)(x[:0, 0])


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_gradients_batch_without_a_fallback(mode):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 2, 3, 8)).astype(np.float32)

    def loss(v):
        return (ember.nn.functional.pad(v, (3, 2, 1, 2), mode=mode) ** 2).sum()

    out, caught = _warned(lambda: ember.func.vmap(ember.func.grad(loss))(ember.from_numpy(x)))
    assert caught == []
    for i in range(4):
        v = ember.from_numpy(x[i]).requires_grad_()
        loss(v).backward()
        np.testing.assert_allclose(out[i].numpy(), v.grad.numpy(), rtol=1e-6)
