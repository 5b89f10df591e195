"""A constant pad's value must fit the tensor's dtype, as PyTorch checks it (round 33: a uint8
pianoroll padded with 256 raised NumPy's OverflowError): ``F.pad`` takes the value as a
double, ``constant_pad_nd`` as a Scalar (an integer wraps like a C cast), and only a pad that
grows the tensor converts it."""

import numpy as np
import pytest

import ember

F = ember.nn.functional


@pytest.mark.parametrize("dtype,value", [(ember.uint8, 256), (ember.uint8, -1),
                                         (ember.int8, 200), (ember.float16, 1e6),
                                         (ember.float32, 1e300)])
def test_pad_value_out_of_range_raises(dtype, value):
    x = ember.ones(2, 3).to(dtype)
    with pytest.raises(RuntimeError, match="value cannot be converted to type .* without "
                                           "overflow"):
        F.pad(x, (1, 1), value=value)


def test_constant_pad_nd_integer_value_wraps_and_float_truncates():
    x = ember.tensor([1, 2], dtype=ember.uint8)
    assert ember.constant_pad_nd(x, [1, 1], -1).tolist() == [255, 1, 2, 255]
    assert ember.constant_pad_nd(x, [1, 0], -255).tolist() == [1, 1, 2]
    assert F.pad(x, (0, 1), value=2.7).tolist() == [1, 2, 2]
    with pytest.raises(RuntimeError, match="uint8_t without overflow"):
        ember.constant_pad_nd(x, [1, 1], -1.0)


def test_crop_and_zero_pad_convert_nothing():
    x = ember.arange(6, dtype=ember.uint8).view(2, 3)
    np.testing.assert_array_equal(F.pad(x, (-1, 0), value=256).numpy(),
                                  np.arange(6, dtype=np.uint8).reshape(2, 3)[:, 1:])
    np.testing.assert_array_equal(F.pad(x, (0, 0), value=1e300).numpy(),
                                  np.arange(6, dtype=np.uint8).reshape(2, 3))
    inf = F.pad(ember.ones(2, dtype=ember.float16), (1, 0), value=float("inf"))
    assert inf.tolist() == [float("inf"), 1.0, 1.0]
