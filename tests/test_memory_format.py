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
