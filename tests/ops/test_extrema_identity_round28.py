"""amax/amin/max/logsumexp on NumPy reduce with the identity as ``initial`` (faster along a short
last axis); where keeps its condition bool. Values at the dtypes' bounds, NaN, -0.0, empty."""

import numpy as np
import pytest

import ember


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.int64])
def test_amax_amin_at_the_integer_bounds(dtype):
    info = np.iinfo(dtype)
    a = np.array([[info.min, info.min], [info.max, info.max], [info.min, info.max]], dtype)
    t = ember.tensor(a)
    np.testing.assert_array_equal(ember.amax(t, -1).numpy(), [info.min, info.max, info.max])
    np.testing.assert_array_equal(ember.amin(t, -1).numpy(), [info.min, info.max, info.min])
    assert t.max().item() == info.max and t.min().item() == info.min
    assert ember.amax(t, -1).dtype == t.dtype


def test_amax_amin_bool():
    t = ember.tensor([[True, True], [False, False], [True, False]])
    assert ember.amax(t, -1).tolist() == [True, False, True]
    assert ember.amin(t, -1).tolist() == [True, False, False]
    assert ember.amax(t, -1).dtype == ember.bool


@pytest.mark.parametrize("dtype", [ember.float16, ember.float32, ember.float64, ember.bfloat16])
def test_amax_amin_nan_infinities_and_signed_zero(dtype):
    t = ember.tensor([[np.nan, 1.0], [-np.inf, -np.inf], [np.inf, np.inf], [-0.0, -0.0],
                      [2.0, np.nan]], dtype=dtype)
    hi, lo = ember.amax(t, -1).float().numpy(), ember.amin(t, -1).float().numpy()
    np.testing.assert_array_equal(hi, np.float32([np.nan, -np.inf, np.inf, 0, np.nan]))
    np.testing.assert_array_equal(lo, np.float32([np.nan, -np.inf, np.inf, 0, np.nan]))
    assert np.signbit(hi[3]) and np.signbit(lo[3])
    assert np.isnan(t.max().item()) and np.isnan(t.min().item())
    assert ember.isneginf(t[1].max()).item() and ember.isposinf(t[2].min()).item()


def test_amax_matches_numpy_along_each_axis():
    a = np.random.default_rng(0).standard_normal((64, 16, 8)).astype(np.float32)
    a[3, 4, 5] = np.nan
    t = ember.tensor(a)
    for dim in (0, 1, 2, -1, (0, 2), ()):
        axis = None if dim == () else dim
        np.testing.assert_array_equal(ember.amax(t, dim).numpy(), a.max(axis=axis))
        np.testing.assert_array_equal(ember.amin(t, dim, keepdim=True).numpy(),
                                      a.min(axis=axis, keepdims=True))


def test_empty_reductions_still_raise():
    t = ember.zeros(3, 0)
    with pytest.raises(IndexError, match="Expected reduction dim 1 to have non-zero size"):
        ember.amax(t, 1)
    with pytest.raises(RuntimeError, match="numel"):
        t.max()
    assert ember.amax(t, 0).shape == (0,)
    assert ember.logsumexp(t, 1).tolist() == [float("-inf")] * 3


def test_logsumexp_rows_with_nan_and_infinities():
    t = ember.tensor([[np.nan, 0.0], [-np.inf, -np.inf], [np.inf, 0.0], [0.0, 0.0]])
    out = ember.logsumexp(t, -1).numpy()
    assert np.isnan(out[0]) and out[1] == -np.inf and out[2] == np.inf
    np.testing.assert_allclose(out[3], np.log(2), rtol=1e-6)


def test_where_values_dtypes_with_a_bool_condition():
    c = ember.tensor([True, False])
    assert ember.where(c, 1.0, 2).dtype == ember.float32
    assert ember.where(c, 1, 2).dtype == ember.int64
    assert ember.where(c, True, False).dtype == ember.bool
    r = ember.where(c, ember.tensor([1, 2], dtype=ember.int8), 2.5)
    assert r.dtype == ember.float32 and r.tolist() == [1.0, 2.5]
    r = ember.where(c, ember.ones(2, dtype=ember.float64), ember.zeros(2, dtype=ember.int32))
    assert r.dtype == ember.float64 and r.tolist() == [1.0, 0.0]
    r = ember.where(c, ember.ones(2), -0.0)
    assert np.signbit(r.numpy()[1]) and r.dtype == ember.float32
    with pytest.raises(RuntimeError, match="without overflow"):
        ember.where(c, ember.ones(2), 1e39)
    with pytest.raises(RuntimeError, match="where expected condition to be a boolean tensor"):
        ember.where(c.float(), ember.ones(2), ember.zeros(2))
