"""uint8 bilinear / bicubic resizing returns a row-major result, as PyTorch's: the height pass
left H innermost, so a one-channel image came back non-contiguous (strides (.., .., 1, H)) and
``.view`` of it failed."""

import numpy as np
import pytest

import ember

F = ember.nn.functional
_IMG = (np.random.default_rng(5).random((2, 3, 11, 13)) * 255).astype(np.uint8)


@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("size", [(5, 7), (17, 9), (11, 6), (6, 13)])
def test_uint8_resize_of_one_channel_is_row_major(mode, antialias, size):
    x = ember.from_numpy(_IMG[:, :1].copy())
    out = F.interpolate(x, size=size, mode=mode, antialias=antialias)
    assert out.is_contiguous()
    assert out.stride() == (size[0] * size[1], size[0] * size[1], size[1], 1)
    assert tuple(out.view(2, -1).shape) == (2, size[0] * size[1])
    # the same bytes as channel 0 of the three-channel resize
    three = F.interpolate(ember.from_numpy(_IMG), size=size, mode=mode, antialias=antialias)
    np.testing.assert_array_equal(out.numpy()[:, 0], three.numpy()[:, 0])


def test_uint8_resize_of_channels_last_stays_channels_last():
    x = ember.from_numpy(_IMG).contiguous(memory_format=ember.channels_last)
    out = F.interpolate(x, size=(5, 7), mode="bilinear", antialias=True)
    assert out.is_contiguous(memory_format=ember.channels_last)
    assert out.stride() == (105, 1, 21, 3)
