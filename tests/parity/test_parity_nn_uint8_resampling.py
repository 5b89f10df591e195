"""uint8 bilinear and bicubic ``F.interpolate`` against PyTorch's CPU kernels: the exact
bytes, over sizes up and down, scale factors, align_corners and antialias both ways."""

import itertools

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

# PyTorch 2.13 fails on two kinds of shape ember computes correctly (see the float path):
# a 1 by 1 output of at most 4 channels trips an internal assert, and a width-1 output of
# more channels repeats the first row's result in every row. Neither is sampled here.
_SIZES = [dict(size=s) for s in ((5, 7), (13, 17), (9, 6), (4, 11), (9, 11), (2, 30), (31, 2),
                                 (1, 5), (5, 2))]
_SIZES += [dict(scale_factor=s) for s in (0.5, 1.5, 2, 1.05, (0.7, 1.3))]
_SIZES += [dict(scale_factor=s, recompute_scale_factor=True) for s in (0.5, 1.7)]


@pytest.mark.parametrize("mode, antialias, align_corners",
                         list(itertools.product(("bilinear", "bicubic"), (False, True),
                                                (False, True))))
@pytest.mark.parametrize("channels", (3, 5))
def test_uint8_interpolate_bytes_match_torch(mode, antialias, align_corners, channels):
    x = np.random.default_rng(channels).integers(0, 256, (2, channels, 9, 11), dtype=np.uint8)
    for kwargs in _SIZES:
        kwargs = dict(kwargs, mode=mode, antialias=antialias, align_corners=align_corners)
        want = torch.nn.functional.interpolate(torch.from_numpy(x), **kwargs).numpy()
        got = ember.nn.functional.interpolate(ember.from_numpy(x), **kwargs)
        assert got.dtype is ember.uint8, kwargs
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=str(kwargs))


def test_uint8_interpolate_differs_from_rounded_float():
    """The check above can fail: bicubic rounds and clamps its first pass to bytes, so it is
    not the float result rounded."""
    x = np.random.default_rng(0).integers(0, 256, (1, 3, 9, 11), dtype=np.uint8)
    kwargs = dict(size=(13, 17), mode="bicubic")
    got = np.asarray(ember.nn.functional.interpolate(ember.from_numpy(x), **kwargs))
    rounded = torch.nn.functional.interpolate(torch.from_numpy(x).double(), **kwargs)
    rounded = rounded.round().clamp(0, 255).numpy()
    assert np.abs(got - rounded).max() > 3
