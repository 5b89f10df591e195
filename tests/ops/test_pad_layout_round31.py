"""The layout of a reflect/replicate pad's input gradient (round 31): channels-last like a
channels-last input, as PyTorch's backward kernels give; a circular pad's is row-major."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def _laid(t, fmt):
    if fmt == "cl":
        return t.contiguous(memory_format=ember.channels_last)
    if fmt == "cl3d":
        return t.contiguous(memory_format=ember.channels_last_3d)
    return t


def _ref_grad(x, pad, mode, g):
    """NumPy's adjoint of np.pad: each padded element's gradient summed onto its source."""
    src = np.arange(x.size).reshape(x.shape)
    np_mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    widths = [(0, 0)] * (x.ndim - len(pad) // 2) + [
        (pad[2 * i], pad[2 * i + 1]) for i in reversed(range(len(pad) // 2))]
    index = np.pad(src, widths, mode=np_mode)
    out = np.zeros(x.size)
    np.add.at(out, index.ravel(), g.ravel())
    return out.reshape(x.shape)


@pytest.mark.parametrize("shape,fmt,pad,strides", [
    ((2, 3, 8, 8), "cl", (1, 1, 1, 1), (192, 1, 24, 3)),
    ((2, 3, 4, 5, 6), "cl3d", (1, 2, 1, 1, 2, 1), (360, 1, 90, 18, 3)),
    ((3, 4, 5, 6), "cl", (1, 1, 2, 1, 1, 1), (120, 1, 24, 4)),     # unbatched 3-d pad
    ((2, 3, 8, 8), None, (1, 1, 1, 1), (192, 64, 8, 1)),
    ((2, 3, 8), None, (2, 1), (24, 8, 1)),
])
@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_grad_follows_input_layout(shape, fmt, pad, strides, mode):
    x = _laid(ember.randn(*shape, dtype=ember.float64), fmt).requires_grad_()
    y = F.pad(x, pad, mode=mode)
    g = ember.randn(*y.shape, dtype=ember.float64)           # row-major, unlike y
    gx, = ember.autograd.grad(y, x, g)
    assert gx.stride() == strides
    np.testing.assert_allclose(gx.numpy(), _ref_grad(x.detach().numpy(), pad, mode, g.numpy()))


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_grad_of_transposed_input_is_row_major(mode):
    x = ember.randn(2, 3, 8, 8).transpose(-1, -2).requires_grad_()
    gx, = ember.autograd.grad(F.pad(x, (1, 1, 1, 1), mode=mode).sum(), x)
    assert gx.stride() == (192, 64, 8, 1)


def test_circular_pad_grad_is_row_major():
    x = _laid(ember.randn(2, 3, 8, 8), "cl").requires_grad_()
    y = F.pad(x, (1, 1, 1, 1), mode="circular")
    g = ember.randn(*y.shape)
    gx, = ember.autograd.grad(y, x, g)
    assert gx.stride() == (192, 64, 8, 1)
    np.testing.assert_allclose(gx.numpy(), _ref_grad(x.detach().numpy(), (1, 1, 1, 1),
                                                      "circular", g.numpy()), rtol=1e-5)


def test_reflect_conv_input_grad_is_channels_last():
    conv = ember.nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect")
    x = _laid(ember.randn(2, 3, 8, 8), "cl").requires_grad_()
    x2 = x * 1
    gx, = ember.autograd.grad(conv(x2).sum(), x2)
    assert gx.stride() == (192, 1, 24, 3)


def test_pad_backward_double_backward_keeps_values():
    x = _laid(ember.randn(1, 2, 5, 5, dtype=ember.float64), "cl").requires_grad_()
    assert ember.autograd.gradgradcheck(lambda t: F.pad(t, (1, 2, 2, 1), mode="reflect"), (x,))


def test_constant_crop_keeps_the_input_strides_order():
    # PyTorch narrows and clones (preserve_format) where no pad is positive
    x = ember.arange(60.).reshape(2, 10, 3).transpose(1, 2)          # strides (30, 1, 3)
    out = ember.constant_pad_nd(x, [-2, -1])
    assert out.stride() == (21, 1, 3)
    np.testing.assert_array_equal(out.numpy(), x.numpy()[..., 2:9])
    assert ember.constant_pad_nd(x, [1, -1]).stride() == (30, 10, 1)   # a pad: row-major
