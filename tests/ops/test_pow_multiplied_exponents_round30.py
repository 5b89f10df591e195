"""``x ** 3`` and ``x ** -2`` of float32 / float64 tensors are computed as PyTorch computes them,
by multiplying (``x * x * x``, ``1 / (x * x)``), not by NumPy's pow, which is an ulp off for
many float32 inputs."""

import numpy as np
import pytest

import ember

_X = np.concatenate([(np.random.default_rng(1).random(2048) * 3 - 1),
                     [-np.inf, -4.0, -0.0, 0.0, 4.0, np.inf, np.nan]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pow_three_and_minus_two_multiply(dtype):
    a = _X.astype(dtype)
    x = ember.from_numpy(a.copy())
    with np.errstate(all="ignore"):
        cube, inv_square = a * a * a, 1 / (a * a)
    for exponent, want in [(3, cube), (3.0, cube), (-2, inv_square), (-2.0, inv_square)]:
        for got in (x ** exponent, ember.pow(x, exponent), x.clone().pow_(exponent)):
            assert got.dtype == x.dtype
            assert got.numpy().tobytes() == want.tobytes()


def test_pow_three_gradient_is_three_squares():
    x = ember.tensor([0.3, -1.5, 2.0], requires_grad=True)
    (x ** 3).sum().backward()
    a = np.array([0.3, -1.5, 2.0], np.float32)
    np.testing.assert_array_equal(x.grad.numpy(), (a * a) * np.float32(3))


@pytest.mark.parametrize("exponent", [3, -2.0, -0.5])
def test_float_power_in_place_takes_pows_edges(exponent):
    # float_power_ computes as float_power does (and pow on float64): by multiplying for 3
    # and -2, and as rsqrt for -0.5 (-inf at -0.0, NaN at -inf)
    a = _X.astype(np.float64)
    got = ember.from_numpy(a.copy()).float_power_(exponent)
    with np.errstate(all="ignore"):
        want = {3: a * a * a, -2.0: 1 / (a * a), -0.5: 1 / np.sqrt(a)}[exponent]
    assert got.numpy().tobytes() == want.tobytes()
    assert ember.float_power(ember.from_numpy(a), exponent).numpy().tobytes() == want.tobytes()
