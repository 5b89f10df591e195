"""Regression tests for the convolution and pooling differences from PyTorch found by round 36's
fuzzer (tests/parity/test_parity_conv_pool_fuzz_round36.py); the expected errors, layouts and
values are PyTorch 2.13's."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def _raises(message, fn, error=RuntimeError):
    with pytest.raises(error) as info:
        fn()
    assert str(info.value) == message


def test_transposed_convolution_refuses_an_output_of_no_size():
    _raises("Given input size per channel: (5 x 1). Calculated output size per channel: "
            "(3 x -2). Output size is too small",
            lambda: F.conv_transpose2d(ember.ones(3, 2, 5, 1, dtype=ember.float64),
                                       ember.ones(2, 2, 3, 2, dtype=ember.float64), padding=2))
    _raises("Given input size per channel: (1 x 1). Calculated output size per channel: "
            "(1 x 0). Output size is too small",     # (1-d: as 2-d of unit height)
            lambda: F.conv_transpose1d(ember.ones(3, 1, 1, dtype=ember.float64),
                                       ember.ones(1, 1, 2, dtype=ember.float64), padding=1))
    # an empty batch only sizes its result: empty dims pass, negative ones do not
    out = F.conv_transpose1d(ember.ones(0, 1, 1, dtype=ember.float64),
                             ember.ones(1, 1, 2, dtype=ember.float64), padding=1)
    assert tuple(out.shape) == (0, 1, 0)
    _raises("invalid shape dimension -3 at index 3 of shape [0, 2, 1, -3]",
            lambda: F.conv_transpose1d(ember.ones(0, 1, 1, dtype=ember.float64),
                                       ember.ones(1, 2, 1, dtype=ember.float64), padding=2))


def test_transposed_convolution_checks_weight_and_bias_before_output_padding():
    _raises("Given groups=5, expected weight to be at least 5 at dimension 0, but got weight "
            "of size [3, 1, 1, 3, 2] instead",
            lambda: F.conv_transpose3d(ember.ones(1, 3, 3, 1, 4), ember.ones(3, 1, 1, 3, 2),
                                       padding=(2, 1, 1), output_padding=(2, 2, 0),
                                       stride=(2, 1, 3), groups=5))
    _raises("Given transposed=1, weight of size [2, 2, 2], expected bias to be 1-dimensional "
            "with 2 elements, but got bias of size [4] instead",
            lambda: F.conv_transpose1d(ember.ones(1, 2, 1), ember.ones(2, 2, 2), ember.ones(4),
                                       output_padding=1))


def test_float32_convolution_with_a_weight_of_another_dtype_names_tensor_types():
    # (PyTorch's MKLDNN path, for grouped, batched or wide float32 convolutions)
    _raises("Input type (ember.FloatTensor) and weight type (ember.DoubleTensor) should be the "
            "same or input should be a MKLDNN tensor and weight is a dense tensor",
            lambda: F.conv2d(ember.ones(2, 2, 3, 7), ember.ones(4, 1, 2, 3,
                                                                  dtype=ember.float64),
                             groups=2))


def test_same_padding_checks_groups_and_stride_first_and_shows_the_padded_input():
    _raises("non-positive groups is not supported",
            lambda: F.conv1d(ember.ones(3, 1, 3), ember.ones(1, 1, 2), padding="same",
                             stride=2, groups=0))
    _raises("Given groups=1, weight of size [2, 2, 2, 1], expected input[3, 1, 5, 4] to have 2 "
            "channels, but got 1 channels instead",
            lambda: F.conv2d(ember.ones(3, 1, 4, 4), ember.ones(2, 2, 2, 1), padding="same"))


def test_max_pool_padding_is_at_most_half_the_undilated_kernel():
    _raises("pad should be smaller than or equal to half of kernel size, but got padW = 1, "
            "padH = 2, kW = 2, kH = 3",
            lambda: F.max_pool2d(ember.ones(2, 1, 7, 7), (3, 2), padding=(2, 1), dilation=2))
    _raises("pad should be smaller than or equal to half of kernel size, but got kT: 3 kW: 3 "
            "kH: 3 padT: 2 padW: 2 padH: 2",
            lambda: F.max_pool3d(ember.ones(1, 2, 5, 3, 3), 3, padding=2, dilation=2))
    _raises("pad should be smaller than or equal to half of kernel size, but got padW = 2, "
            "padH = 0, kW = 3, kH = 1",
            lambda: F.max_pool1d(ember.ones(0, 2, 6), 3, padding=2, dilation=2,
                                 return_indices=True))


def test_avg_pool3d_checks_padding_and_sizes_before_the_dtype():
    _raises("pad should be at most half of effective kernel size, but got pad=2, "
            "kernel_size=2 and dilation=1",
            lambda: F.avg_pool3d(ember.ones(3, 2, 2, 1, 7), 2, padding=2))
    _raises("input image (T: 2 H: 1 W: 5) smaller than kernel size (kT: 2 kH: 2 kW: 2)",
            lambda: F.avg_pool3d(ember.ones(3, 1, 2, 1, 5, dtype=ember.bfloat16), 2))


def test_fractional_max_pool_size_checks_and_empty_batch():
    x = ember.arange(96.0).reshape(2, 3, 4, 4)
    samples = ember.full((2, 3, 2), 0.5)
    # 2-d: a last window ending at the edge is fine; height is checked first
    out = F.fractional_max_pool2d(x, (1, 3), output_size=(3, 2), _random_samples=samples)
    assert tuple(out.shape) == (2, 3, 3, 2)
    _raises("fractional_max_pool2d(): pool width 3 too large relative to input width 4",
            lambda: F.fractional_max_pool2d(x, (1, 3), output_size=(4, 4),
                                            _random_samples=samples))
    _raises("fractional_max_pool2d(): pool height 3 too large relative to input height 4",
            lambda: F.fractional_max_pool2d(x, (3, 3), output_size=(4, 4),
                                            _random_samples=samples))
    # 3-d: strictly inside, checked time, width, height
    _raises("fractional_max_pool3d_out(): pool width 1 too large relative to input width 6",
            lambda: F.fractional_max_pool3d(ember.ones(2, 1, 3, 2, 6), (1, 2, 1),
                                            output_size=(2, 1, 6),
                                            _random_samples=ember.full((2, 1, 3), 0.5)))
    values, indices = F.fractional_max_pool2d(ember.ones(0, 1, 7, 7), 2, output_size=(3, 3),
                                              return_indices=True,
                                              _random_samples=ember.rand(0, 1, 2))
    assert tuple(values.shape) == tuple(indices.shape) == (0, 1, 3, 3)


def test_max_unpool_output_size_message_layout_node_and_dtypes():
    out, idx = F.max_pool2d(ember.arange(40.0).reshape(2, 1, 4, 5), 2, return_indices=True)
    _raises('invalid output_size "[7, 4]" (dim 0 must be between 2 and 6)',
            lambda: F.max_unpool2d(out, idx, 2, output_size=[7, 4]), ValueError)
    x = ember.arange(24.0).reshape(1, 3, 2, 4).contiguous(memory_format=ember.channels_last)
    out, idx = F.max_pool2d(x, 2, return_indices=True)
    assert F.max_unpool2d(out, idx, 2).stride() == (24, 1, 12, 3)
    x = ember.arange(6.0, dtype=ember.float64).reshape(1, 1, 6).requires_grad_()
    out, idx = F.max_pool1d(x, 2, return_indices=True)
    assert type(F.max_unpool1d(out, idx, 2).grad_fn).__name__ == "SqueezeBackward1"
    _raises("\"max_unpool2d\" not implemented for 'Long'",
            lambda: F.max_unpool2d(ember.ones(1, 1, 2, 2, dtype=ember.int64),
                                   ember.zeros(1, 1, 2, 2, dtype=ember.int64), 2),
            NotImplementedError)


def test_adaptive_pooling_dtype_refusals_and_global_mean_node():
    _raises("\"adaptive_max_pool2d\" not implemented for 'Long'",
            lambda: F.adaptive_max_pool2d(ember.ones(0, 3, 3, 6, dtype=ember.int64), 3),
            NotImplementedError)
    x = ember.ones(2, 3, 7, 2, dtype=ember.int64).contiguous(memory_format=ember.channels_last)
    _raises("\"adaptive_max_pool2d_channels_last\" not implemented for 'Long'",
            lambda: F.adaptive_max_pool2d(x, (None, 3)), NotImplementedError)
    x = ember.ones(3, 1, 1, 1, dtype=ember.float64, requires_grad=True)
    assert type(F.adaptive_avg_pool2d(x, (None, None)).grad_fn).__name__ == "MeanBackward1"


def test_lp_pool_gradient_of_a_zero_window_is_zero():
    x = ember.tensor([[1.0, -1.0, 2.0, 3.0]], dtype=ember.float64, requires_grad=True)
    F.lp_pool1d(x, 3, 2).sum().backward()
    g = np.asarray(x.grad)
    assert g[0, 0] == 0 and g[0, 1] == 0 and np.isfinite(g).all()
