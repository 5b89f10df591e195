"""Global average pooling of a channels_last input under autograd (round 26, vision programs):
the mean over H and W restrided in place to channels_last, as PyTorch's adaptive_avg_pool2d
gives it, with a gradient of 1 / (H W) to every input element."""

import numpy as np
import pytest

import ember


@pytest.mark.parametrize("requires_grad", [False, True])
def test_channels_last_global_avg_pool_strides_and_values(requires_grad):
    data = np.sin(np.arange(2 * 4 * 3 * 5)).astype(np.float32).reshape(2, 4, 3, 5)
    x = ember.from_numpy(data).contiguous(memory_format=ember.channels_last)
    x.requires_grad_(requires_grad)
    y = ember.nn.functional.adaptive_avg_pool2d(x, 1)
    assert y.stride() == (4, 1, 4, 4)
    assert y.is_contiguous(memory_format=ember.channels_last)
    np.testing.assert_allclose(y.detach().numpy(), data.mean((2, 3), keepdims=True),
                               rtol=1e-6, atol=1e-7)
    if requires_grad:
        assert type(y.grad_fn).__name__ == "AsStridedBackward1"
        assert type(y.grad_fn.next_functions[0][0]).__name__ == "MeanBackward1"
        y.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.full(data.shape, 1 / 15, np.float32),
                                   rtol=1e-6)


def test_row_major_global_avg_pool_is_a_plain_mean():
    x = ember.ones(2, 4, 3, 5, requires_grad=True)
    y = ember.nn.functional.adaptive_avg_pool2d(x, (1, 1))
    assert y.stride() == (4, 1, 1, 1)
    assert type(y.grad_fn).__name__ == "MeanBackward1"


def test_channels_last_3d_global_avg_pool_strides():
    x = ember.ones(2, 4, 3, 5, 2).contiguous(memory_format=ember.channels_last_3d)
    assert ember.nn.functional.adaptive_avg_pool3d(x, 1).stride() == (4, 1, 4, 4, 4)
    assert ember.nn.functional.adaptive_avg_pool3d(x, (1, 2, 2)).stride() == (16, 4, 4, 2, 1)
    y = ember.nn.functional.adaptive_avg_pool3d(x.requires_grad_(), 1)
    assert y.stride() == (4, 1, 4, 4, 4)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(x.shape, 1 / 30, np.float32), rtol=1e-6)
