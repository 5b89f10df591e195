"""Memory formats: ``channels_last`` tensors and modules, ``contiguous``/``is_contiguous``/
``to``/``clone``/factories with ``memory_format=``, and values that do not change."""

import pickle

import pytest

import ember
import ember.nn as nn

CHANNELS_LAST = (60, 1, 15, 3)          # strides of a (2, 3, 4, 5) tensor stored NHWC


def test_the_formats():
    assert repr(ember.channels_last) == "ember.channels_last"
    assert isinstance(ember.preserve_format, ember.memory_format)
    assert pickle.loads(pickle.dumps(ember.channels_last_3d)) is ember.channels_last_3d


def test_contiguous_to_and_is_contiguous():
    x = ember.randn(2, 3, 4, 5)
    y = x.contiguous(memory_format=ember.channels_last)
    assert y.stride() == CHANNELS_LAST and ember.equal(y, x)
    assert y.is_contiguous(memory_format=ember.channels_last) and not y.is_contiguous()
    assert y.contiguous(memory_format=ember.channels_last) is y
    assert y.contiguous().stride() == (60, 20, 5, 1)
    assert x.to(memory_format=ember.channels_last).stride() == CHANNELS_LAST
    assert x.to(ember.float64, memory_format=ember.channels_last).stride() == CHANNELS_LAST
    assert x.to(memory_format=ember.contiguous_format) is x
    assert not ember.ones(2, 3).is_contiguous(memory_format=ember.channels_last)
    z = ember.randn(2, 3, 4, 5, 6).contiguous(memory_format=ember.channels_last_3d)
    assert z.stride() == (360, 1, 90, 18, 3)
    with pytest.raises(RuntimeError, match="^required rank 4 tensor to use channels_last "
                                           "format$"):
        ember.ones(2, 3).contiguous(memory_format=ember.channels_last)
    with pytest.raises(RuntimeError, match="required rank 5 tensor to use channels_last_3d"):
        x.to(memory_format=ember.channels_last_3d)


def test_copies_and_factories_keep_or_take_the_format():
    y = ember.randn(2, 3, 4, 5).to(memory_format=ember.channels_last)
    assert y.clone().stride() == CHANNELS_LAST
    assert y.clone(memory_format=ember.contiguous_format).is_contiguous()
    for like in (ember.empty_like, ember.zeros_like, ember.ones_like, ember.rand_like,
                 ember.randn_like):
        assert like(y).stride() == CHANNELS_LAST
    assert ember.full_like(y, 2.0).stride() == CHANNELS_LAST
    assert ember.zeros_like(y, memory_format=ember.contiguous_format).is_contiguous()
    made = ember.empty(2, 3, 4, 5, memory_format=ember.channels_last, requires_grad=True)
    assert made.stride() == CHANNELS_LAST and made.is_leaf and made.requires_grad


def test_modules_and_gradients_in_channels_last():
    ember.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3)
    x = ember.randn(2, 3, 8, 8, requires_grad=True)
    expected = conv(x)
    expected.sum().backward()
    grad = x.grad.clone()
    x.grad = None
    weight = conv.weight
    conv.to(memory_format=ember.channels_last)
    assert conv.weight is weight and conv.weight.stride() == (27, 1, 9, 3)
    assert conv.bias.stride() == (1,)
    out = conv(x.to(memory_format=ember.channels_last))
    assert ember.allclose(out, expected, atol=1e-6)
    out.sum().backward()
    assert ember.allclose(x.grad, grad, atol=1e-6) and x.grad.shape == x.shape


def test_converting_only_the_convolutions_weights():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Linear(2, 2), nn.ConvTranspose2d(4, 3, 2),
                          nn.Sequential(nn.Conv3d(2, 2, 2)))
    weight = model[0].weight
    assert nn.utils.convert_conv2d_weight_memory_format(model, ember.channels_last) is model
    assert model[0].weight is weight and weight.stride() == (27, 1, 9, 3)
    assert model[2].weight.stride() == (12, 1, 6, 3) and model[1].weight.is_contiguous()
    assert not model[3][0].weight.is_contiguous(memory_format=ember.channels_last_3d)
    nn.utils.convert_conv3d_weight_memory_format(model, ember.channels_last_3d)
    assert model[3][0].weight.is_contiguous(memory_format=ember.channels_last_3d)


@pytest.mark.parametrize("make, strides", [
    (lambda: ember.zeros(3, 2).t(), (1, 2)),
    (lambda: ember.zeros(2, 3, 4, 5).permute(0, 2, 3, 1), (60, 5, 1, 20)),
    (lambda: ember.zeros(4, 6)[:, ::2], (3, 1)),                  # not dense: packed
    (lambda: ember.zeros(1, 4).expand(3, 4), (4, 1)),             # overlapping: row-major
])
def test_preserve_format_keeps_the_inputs_layout(make, strides):
    x = make()
    assert x.clone().stride() == strides and ember.empty_like(x).stride() == strides
    assert ember.zeros_like(x).stride() == strides and ember.equal(x.clone(), x)


def test_empty_strided_has_the_strides_asked_for():
    x = ember.empty_strided((3, 2), (1, 3))
    assert x.stride() == (1, 3) and not x.is_contiguous()
    x.copy_(ember.arange(6.0).view(3, 2))
    assert x.tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    with pytest.raises(RuntimeError, match=r"dimensionality of sizes \(2\) must match "
                                           r"dimensionality of strides \(1\)"):
        ember.empty_strided((3, 2), (1,))


def _cl(*shape):
    """A channels-last tensor of ``shape`` holding fixed values."""
    n = 1
    for s in shape:
        n *= s
    x = ember.linspace(-1.0, 1.0, n).reshape(shape)
    return x.contiguous(memory_format=ember.channels_last_3d if len(shape) == 5
                        else ember.channels_last)


F = nn.functional


@pytest.mark.parametrize("name, f, strides", [
    ("conv2d", lambda x: F.conv2d(x, ember.ones(5, 4, 3, 3)), (80, 1, 20, 5)),
    ("conv_transpose2d", lambda x: F.conv_transpose2d(x, ember.ones(4, 3, 3, 3)),
     (192, 1, 24, 3)),
    ("max_pool2d", lambda x: F.max_pool2d(x, 2), (36, 1, 12, 4)),
    ("max_pool2d indices", lambda x: F.max_pool2d(x, 2, return_indices=True)[1],
     (36, 1, 12, 4)),
    ("avg_pool2d", lambda x: F.avg_pool2d(x, 2), (36, 1, 12, 4)),
    ("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, 3), (36, 1, 12, 4)),
    ("global avg pool", lambda x: F.adaptive_avg_pool2d(x, 1), (4, 1, 4, 4)),
    ("adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x, 4), (64, 1, 16, 4)),
    ("batch_norm", lambda x: nn.BatchNorm2d(4)(x), (144, 1, 24, 4)),
    ("batch_norm eval", lambda x: nn.BatchNorm2d(4).eval()(x), (144, 1, 24, 4)),
    ("group_norm", lambda x: nn.GroupNorm(2, 4)(x), (144, 1, 24, 4)),
    ("instance_norm", lambda x: nn.InstanceNorm2d(4)(x), (144, 36, 6, 1)),   # as PyTorch
    ("bilinear", lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
     (576, 1, 48, 4)),
    ("nearest", lambda x: F.interpolate(x, scale_factor=2), (576, 1, 48, 4)),
    ("pixel_unshuffle", lambda x: F.pixel_unshuffle(x, 2), (144, 1, 48, 16)),
    ("pad", lambda x: F.pad(x, (1, 1, 1, 1)), (256, 1, 32, 4)),
    ("reflection pad", lambda x: F.pad(x, (1, 1, 1, 1), mode="reflect"), (256, 1, 32, 4)),
])
def test_cnn_ops_give_channels_last_for_channels_last_input(name, f, strides):
    x = _cl(2, 4, 6, 6)
    out = f(x)
    assert out.stride() == strides
    # the same values (batch norm's and global pooling's sums may run in another order)
    assert ember.allclose(out, f(x.contiguous()), rtol=1e-6, atol=1e-6)


def test_convolution_is_channels_last_when_its_weight_is():
    x = ember.linspace(-1.0, 1.0, 2 * 4 * 6 * 6).reshape(2, 4, 6, 6)
    w = ember.linspace(-1.0, 1.0, 5 * 4 * 9).reshape(5, 4, 3, 3)
    out = F.conv2d(x, w.contiguous(memory_format=ember.channels_last))
    assert out.stride() == (80, 1, 20, 5) and ember.equal(out, F.conv2d(x, w))
    assert F.conv2d(x, w).stride() == (80, 16, 4, 1)
    x3 = _cl(2, 3, 4, 4, 4)
    out3 = F.conv3d(x3, ember.ones(5, 3, 3, 3, 3), padding=1)
    assert out3.stride() == (320, 1, 80, 20, 5)
    assert F.max_pool3d(x3, 2).stride() == (24, 1, 12, 6, 3)
    assert F.avg_pool3d(x3, 2).stride() == (24, 8, 4, 2, 1)     # PyTorch's: row-major


def test_gradients_follow_the_layout_of_their_leaves():
    x = _cl(2, 4, 6, 6).requires_grad_()
    w = ember.linspace(-1.0, 1.0, 6 * 4 * 9).reshape(6, 4, 3, 3)
    w = w.contiguous(memory_format=ember.channels_last).requires_grad_()
    out = F.conv2d(x, w, padding=1)
    out.backward(ember.linspace(-1.0, 1.0, out.numel()).reshape(out.shape))   # row-major
    assert x.grad.stride() == (144, 1, 24, 4) and w.grad.stride() == (36, 1, 12, 4)
    y = _cl(2, 4, 6, 6).requires_grad_()
    (y * ember.ones(2, 4, 6, 6)).sum().backward()
    assert y.grad.stride() == (144, 1, 24, 4) and y.grad.sum().item() == 288.0
    t = ember.zeros(3, 2).t().requires_grad_()
    (t * ember.ones(2, 3)).sum().backward()
    assert t.grad.stride() == (1, 2)
    s = ember.zeros(4, 6)[:, ::2].requires_grad_()          # not dense: row-major
    (s * 2).sum().backward()
    assert s.grad.stride() == (3, 1) and s.grad.tolist() == [[2.0] * 3] * 4


def test_convolution_input_gradient_is_channels_last():
    x = _cl(2, 4, 6, 6)
    xc = x.contiguous()
    w = ember.linspace(-1.0, 1.0, 6 * 4 * 9).reshape(6, 4, 3, 3)
    g = ember.linspace(-1.0, 1.0, 2 * 6 * 6 * 6).reshape(2, 6, 6, 6)
    gx, = ember.autograd.grad(F.conv2d(x.requires_grad_(), w, padding=1), x, g)
    gxc, = ember.autograd.grad(F.conv2d(xc.requires_grad_(), w, padding=1), xc, g)
    assert gx.stride() == (144, 1, 24, 4) and gxc.stride() == (144, 36, 6, 1)
    assert ember.equal(gx, gxc)


def test_channels_last_with_one_channel_has_the_strides_pytorch_gives():
    x = ember.arange(32.0).reshape(2, 1, 4, 4)
    assert x.to(memory_format=ember.channels_last).stride() == (16, 1, 4, 1)
    assert x.clone(memory_format=ember.channels_last).stride() == (16, 1, 4, 1)
    assert x.contiguous(memory_format=ember.channels_last) is x     # is_contiguous already
    assert ember.empty(2, 4, 1, 1, memory_format=ember.channels_last).stride() == (4, 1, 4, 4)
    out = F.conv2d(x.to(memory_format=ember.channels_last), ember.ones(3, 1, 1, 1))
    assert out.stride() == (48, 1, 12, 3)


def test_empty_rejects_preserve_format_and_resize_takes_a_format():
    with pytest.raises(RuntimeError, match="^unsupported memory format Preserve$"):
        ember.empty(2, 3, memory_format=ember.preserve_format)
    r = ember.empty(0)
    r.resize_(2, 3, 4, 5, memory_format=ember.channels_last)
    assert r.stride() == CHANNELS_LAST


def test_resampling_and_padding_never_return_the_inputs_memory():
    x = ember.arange(8.0).reshape(1, 2, 2, 2)
    for out in (F.interpolate(x, size=(2, 2)), F.pad(x, (0, 0, 0, 0), mode="reflect")):
        out += 100
        assert x.sum().item() == 28.0
