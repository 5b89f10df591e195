"""The float32 erf kernel of ember.backend.cpu_math and its routing through special_of."""

import numpy as np
import pytest
import scipy.special

import ember
from ember.backend import special_of
from ember.backend.cpu_math import erf_float32


def _ordered(values):
    """float32 bit patterns as integers that order like the values (ulp distance = difference)."""
    bits = values.view(np.int32).astype(np.int64)
    return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)


def _ulps(got, want):
    return np.abs(_ordered(got) - _ordered(want))


def _reference(x):
    return scipy.special.erf(x.astype(np.float64)).astype(np.float32)


def _float32_range(lo, hi, stride):
    """Every ``stride``-th float32 in [lo, hi] (0 <= lo <= hi)."""
    start, stop = np.array([lo, hi], np.float32).view(np.int32)
    return np.arange(start, stop + 1, stride, dtype=np.int32).view(np.float32)


def test_erf_within_two_ulp_on_a_dense_sweep_of_both_signs():
    x = _float32_range(0, 6, 1237)          # ~880,000 values, every binade from 1e-45 to 6
    x = np.concatenate([x, -x])
    assert _ulps(erf_float32(x), _reference(x)).max() <= 2


def test_erf_within_two_ulp_around_the_branch_point_and_where_it_rounds_to_one():
    for lo, hi in ((0.99, 1.01), (3.8, 4.1), (5.9, 1e30)):
        x = _float32_range(lo, hi, 3 if hi < 10 else 4099)
        assert _ulps(erf_float32(x), _reference(x)).max() <= 2, (lo, hi)


def test_erf_of_subnormals_within_one_ulp():
    x = _float32_range(0, 1.2e-38, 997)
    x = np.concatenate([x, -x])
    assert x[1] != 0 and abs(x[1]) < np.finfo(np.float32).tiny
    assert _ulps(erf_float32(x), _reference(x)).max() <= 1


def test_erf_is_exactly_odd():
    x = np.random.default_rng(0).standard_normal(100_000).astype(np.float32) * 2
    assert np.array_equal(erf_float32(-x).view(np.int32), (-erf_float32(x)).view(np.int32))


def test_erf_edges_keep_signs_infinities_and_nan():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.4e38, -3.4e38], np.float32)
    out = erf_float32(x)
    assert out.dtype == np.float32
    assert np.array_equal(np.signbit(out[:2]), [False, True]) and (out[:2] == 0).all()
    assert out[2:4].tolist() == [1.0, -1.0] and out[5:].tolist() == [1.0, -1.0]
    assert np.isnan(out[4])


def test_erf_keeps_shape_for_0d_and_strided_inputs():
    assert erf_float32(np.float32(0.5)).shape == ()
    assert erf_float32(np.array(0.5, np.float32)) == _reference(np.array([0.5], np.float32))[0]
    x = np.linspace(-3, 3, 60, dtype=np.float32).reshape(6, 10).T
    np.testing.assert_array_equal(erf_float32(x), erf_float32(x.copy()))
    assert erf_float32(x).shape == (10, 6)


def test_special_of_numpy_routes_large_float32_erf_to_the_kernel():
    special = special_of(np)
    x = np.random.default_rng(1).standard_normal(8192).astype(np.float32)
    np.testing.assert_array_equal(special.erf(x), erf_float32(x))
    half = special.erf(x.astype(np.float16))
    assert half.dtype == np.float32
    np.testing.assert_array_equal(half, erf_float32(x.astype(np.float16).astype(np.float32)))


@pytest.mark.parametrize("x", [np.linspace(-3, 3, 100, dtype=np.float32),       # small: SciPy
                               np.linspace(-3, 3, 8192, dtype=np.float64)])
def test_special_of_numpy_leaves_small_and_float64_erf_to_scipy(x):
    np.testing.assert_array_equal(special_of(np).erf(x), scipy.special.erf(x))


def test_special_of_numpy_passes_other_functions_through():
    assert special_of(np).gammaln is scipy.special.gammaln
    assert special_of(np) is special_of(np)


def test_ember_erf_of_a_large_float32_tensor_uses_the_kernel():
    x = np.random.default_rng(2).standard_normal(10_000).astype(np.float32)
    np.testing.assert_array_equal(ember.erf(ember.tensor(x)).numpy(), erf_float32(x))
