"""float16/bfloat16 bilinear interpolation on the CPU, against NumPy references that round
where PyTorch's two CPU kernels round (round 32, diffusion programs): small outputs and
channels-last input with more than 3 channels sum float32 weights in float32 and round once;
the rest round each weight to the input's dtype first."""

import ml_dtypes
import numpy as np
import pytest

import ember

LOW = {"bfloat16": (ember.bfloat16, ml_dtypes.bfloat16), "float16": (ember.float16, np.float16)}


def _source(n, o):
    # float32 source coordinates (align_corners=False, no scale factor)
    s = np.float32(n) / np.float32(o)
    src = (np.float64(s) * (np.arange(o, dtype=np.float32) + np.float32(0.5)) - 0.5)
    src = np.maximum(src.astype(np.float32), np.float32(0))
    i0 = np.minimum(np.floor(src).astype(int), n - 1)
    return i0, np.minimum(i0 + 1, n - 1), (src - i0).astype(np.float32)


def _reference(x, out, low, rounded_weights):
    (h0, h1, lh), (w0, w1, lw) = _source(x.shape[2], out[0]), _source(x.shape[3], out[1])
    if rounded_weights:
        far_h, far_w = (lam.astype(low).astype(np.float32) for lam in (lh, lw))
        near_h, near_w = ((1 - far).astype(low).astype(np.float32) for far in (far_h, far_w))
    else:
        far_h, far_w, near_h, near_w = lh, lw, 1 - lh, 1 - lw
    xf = x.astype(np.float64)
    top = xf[:, :, h0][..., w0] * near_w + xf[:, :, h0][..., w1] * far_w
    bottom = xf[:, :, h1][..., w0] * near_w + xf[:, :, h1][..., w1] * far_w
    if rounded_weights:
        return (top * near_h[:, None] + bottom * far_h[:, None]).astype(np.float32).astype(low)
    w00, w01 = near_h[:, None] * near_w, near_h[:, None] * far_w
    w10, w11 = far_h[:, None] * near_w, far_h[:, None] * far_w
    return (xf[:, :, h0][..., w0] * w00 + xf[:, :, h0][..., w1] * w01 + xf[:, :, h1][..., w0]
            * w10 + xf[:, :, h1][..., w1] * w11).astype(np.float32).astype(low)


@pytest.mark.parametrize("name", sorted(LOW))
def test_large_output_rounds_the_weights_to_the_input_dtype(name):
    dtype, low = LOW[name]
    a = np.random.default_rng(32).standard_normal((1, 2, 5, 9)).astype(np.float32).astype(low)
    y = ember.nn.functional.interpolate(ember.from_numpy(a.astype(np.float32)).to(dtype),
                                        size=(23, 130), mode="bilinear")
    want = _reference(a, (23, 130), low, True)
    assert (y.float().numpy() != want.astype(np.float32)).mean() < 1e-3


@pytest.mark.parametrize("name", sorted(LOW))
@pytest.mark.parametrize("channels_last", [False, True])
def test_small_output_or_channels_last_keeps_float32_weights(name, channels_last):
    dtype, low = LOW[name]
    a = np.random.default_rng(33).standard_normal((2, 5, 7, 6)).astype(np.float32).astype(low)
    out = (90, 70) if channels_last else (11, 13)
    x = ember.from_numpy(a.astype(np.float32)).to(dtype)
    if channels_last:
        x = x.contiguous(memory_format=ember.channels_last)
    y = ember.nn.functional.interpolate(x, size=out, mode="bilinear")
    want = _reference(a, out, low, False)
    assert (y.float().numpy() != want.astype(np.float32)).mean() < 1e-3


def test_float16_values_pinned():
    # PyTorch 2.13's values: the generic kernel's rounded weights move these off the float32
    # result rounded once
    x = ember.tensor([[[[0.1, 0.7, -0.3]]]], dtype=ember.float16)
    y = ember.nn.functional.interpolate(x, size=(1, 130), mode="bilinear").flatten()
    assert y[35:50:3].tolist() == [0.291748046875, 0.3330078125, 0.374755859375,
                                   0.416259765625, 0.457763671875]
    small = ember.nn.functional.interpolate(x, size=(1, 61), mode="bilinear")
    want = ember.nn.functional.interpolate(x.float(), size=(1, 61), mode="bilinear").half()
    assert ember.equal(small, want)
