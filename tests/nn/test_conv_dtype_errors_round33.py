"""Convolution dtype errors in PyTorch's wording and order (round 33, from the sensing
programs): complex and half inputs name the tensor types, the other kernels compare dtypes
only after the argument and shape checks, and bool/narrow-int inputs name the missing kernel."""

import pytest

import ember

F = ember.nn.functional


def _ones(dtype, *shape):
    return ember.ones(*shape, dtype=dtype)


def test_complex_input_names_the_tensor_types():
    with pytest.raises(RuntimeError, match=r"^Input type \(CPUComplexFloatType\) and weight type "
                                           r"\(ember.FloatTensor\) should be the same$"):
        F.conv1d(_ones(ember.complex64, 1, 2, 5), _ones(ember.float32, 2, 2, 3), padding=-1)


def test_half_input_mentions_mkldnn():
    with pytest.raises(RuntimeError, match=r"^Input type \(ember.HalfTensor\) and weight type "
                                           r"\(ember.DoubleTensor\) should be the same or input "
                                           r"should be a MKLDNN tensor and weight is a dense "
                                           r"tensor$"):
        F.conv2d(_ones(ember.float16, 1, 2, 5, 5), _ones(ember.float64, 2, 2, 3, 3))


def test_float_kernels_check_arguments_and_shapes_before_dtypes():
    x = _ones(ember.float32, 1, 2, 5)
    with pytest.raises(RuntimeError, match="^negative padding is not supported$"):
        F.conv1d(x, _ones(ember.float64, 2, 2, 3), padding=-1)
    with pytest.raises(RuntimeError, match="to have 3 channels, but got 2 channels"):
        F.conv1d(x, _ones(ember.float64, 2, 3, 3))
    with pytest.raises(RuntimeError, match="^expected scalar type Float but found Double$"):
        F.conv1d(x, _ones(ember.float64, 2, 2, 3))


@pytest.mark.parametrize("call, kernel", [
    (lambda: F.conv3d(_ones(ember.bool, 1, 2, 4, 4, 4), _ones(ember.float32, 2, 2, 2, 2, 2)),
     "compute_columns3d"),
    (lambda: F.conv2d(_ones(ember.bool, 1, 2, 4, 4), _ones(ember.bool, 2, 2, 2, 2), dilation=2),
     "slow_conv_dilated<>"),
    (lambda: F.conv_transpose1d(_ones(ember.bool, 1, 2, 4), _ones(ember.bool, 2, 2, 2)),
     "slow_conv_transpose2d_out_cpu"),
    (lambda: F.conv_transpose3d(_ones(ember.int32, 1, 2, 3, 3, 3),
                                _ones(ember.float32, 2, 2, 2, 2, 2)),
     "slow_conv_transpose3d_out_cpu"),
])
def test_missing_kernels_are_named(call, kernel):
    with pytest.raises(NotImplementedError, match=f"^\"{kernel}\" not implemented for"):
        call()


def test_missing_kernel_comes_after_the_shape_check():
    with pytest.raises(RuntimeError, match="to have 3 channels, but got 2 channels"):
        F.conv1d(_ones(ember.bool, 1, 2, 5), _ones(ember.float32, 2, 3, 2))
