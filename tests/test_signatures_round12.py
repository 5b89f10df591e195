"""Signatures of the public API that PyTorch callers rely on (audit round 12)."""
import ember
import ember.nn.functional as F


def test_lazy_conv_takes_positional_conv_arguments():
    conv = ember.nn.LazyConv2d(4, 3, 2, 1, 1, 1, False)
    out = conv(ember.ones(1, 2, 8, 8))
    assert (conv.stride, conv.padding, conv.dilation, conv.groups) == ((2, 2), (1, 1), (1, 1), 1)
    assert conv.bias is None
    assert tuple(out.shape) == (1, 4, 4, 4)
    assert tuple(conv.weight.shape) == (4, 2, 3, 3)


def test_lazy_conv_transpose_takes_positional_transpose_arguments():
    conv = ember.nn.LazyConvTranspose2d(4, 3, 2, 1, 1, 2, True, 1)
    out = conv(ember.ones(1, 2, 8, 8))
    assert (conv.output_padding, conv.groups, conv.dilation) == ((1, 1), 2, (1, 1))
    assert tuple(out.shape) == (1, 4, 16, 16)
    assert tuple(conv.weight.shape) == (2, 2, 3, 3)
    assert tuple(conv.bias.shape) == (4,)


def test_lazy_conv_keywords_still_work():
    conv = ember.nn.LazyConv1d(out_channels=4, kernel_size=3, padding="same", bias=False)
    assert tuple(conv(ember.ones(1, 2, 8)).shape) == (1, 4, 8)


def test_max_pool1d_with_indices_accepts_return_indices():
    x = ember.arange(12.).reshape(1, 2, 6)
    values, indices = F.max_pool1d_with_indices(x, 2, None, 0, 1, False, False)
    assert values.tolist() == [[[1., 3., 5.], [7., 9., 11.]]]
    assert indices.tolist() == [[[1, 3, 5], [1, 3, 5]]]


def test_adaptive_max_pool_with_indices_accept_return_indices():
    x = ember.arange(12.).reshape(1, 2, 6)
    values, indices = F.adaptive_max_pool1d_with_indices(x, 3, return_indices=False)
    assert values.tolist() == [[[1., 3., 5.], [7., 9., 11.]]]
    assert indices.tolist() == [[[1, 3, 5], [1, 3, 5]]]
    x4 = ember.arange(32.).reshape(1, 2, 4, 4)
    values, indices = F.adaptive_max_pool2d_with_indices(x4, 2, False)
    assert values.tolist() == [[[[5., 7.], [13., 15.]], [[21., 23.], [29., 31.]]]]
    assert indices.tolist() == [[[[5, 7], [13, 15]], [[5, 7], [13, 15]]]]
    x5 = ember.arange(8.).reshape(1, 1, 2, 2, 2)
    values, indices = F.adaptive_max_pool3d_with_indices(input=x5, output_size=1,
                                                         return_indices=True)
    assert values.flatten().tolist() == [7.] and indices.flatten().tolist() == [7]


def test_adaptive_max_pool1d_grad_fn_is_squeeze_backward():
    x = ember.arange(6.).reshape(1, 1, 6).requires_grad_()
    values = F.adaptive_max_pool1d(x, 3)
    assert values.grad_fn.name() == "SqueezeBackward1"
    values.sum().backward()
    assert x.grad.tolist() == [[[0., 1., 0., 1., 0., 1.]]]
