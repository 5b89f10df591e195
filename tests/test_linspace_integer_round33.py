"""``linspace`` in an integer dtype (round 33): PyTorch converts the ends to the dtype (raising
when one does not fit, wrapping a negative integer into an unsigned dtype) and truncates its
float64 values; ember spaced them in float32, off by one on ranges past 2**24."""

import numpy as np
import pytest

import ember


def _reference(start, end, steps):
    """float64 linspace (first half up from start, the rest down from end), truncated."""
    step = (np.float64(end) - np.float64(start)) / (steps - 1)
    half = steps // 2
    up = start + step * np.arange(half)
    down = end - step * np.arange(steps - half - 1, -1, -1)
    return np.trunc(np.concatenate([up, down]))


@pytest.mark.parametrize("start,end,steps", [(0, 2 ** 24 + 1, 2), (3, 2 ** 30 + 7, 5),
                                             (-1000, 999, 7), (0, 10, 7)])
def test_large_integer_ranges_keep_their_ends(start, end, steps):
    got = ember.linspace(start, end, steps, dtype=ember.int64).numpy()
    assert got[0] == start and got[-1] == end
    np.testing.assert_allclose(got, _reference(start, end, steps), atol=1)


def test_integer_ends_are_converted_to_the_dtype():
    assert ember.linspace(-1, 5, 3, dtype=ember.uint8).tolist() == [255, 130, 5]
    with pytest.raises(RuntimeError, match="value cannot be converted to type uint8_t"):
        ember.linspace(0, 256, 3, dtype=ember.uint8)
    with pytest.raises(RuntimeError, match="value cannot be converted to type int8_t"):
        ember.linspace(-200, 0, 3, dtype=ember.int8)
    assert ember.linspace(0, 300, 1, dtype=ember.uint8).tolist() == [0]
