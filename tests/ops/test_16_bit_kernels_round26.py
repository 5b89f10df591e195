"""bfloat16 batch normalization statistics, bfloat16 ``pow`` by 3 and -2 and 16-bit linear
interpolation, against NumPy references that round where PyTorch's CPU kernels round (round
26, speech/text programs)."""

import ml_dtypes
import numpy as np
import pytest

import ember

BF16 = ml_dtypes.bfloat16


def _bf(a):
    return np.asarray(a).astype(BF16).astype(np.float64)


@pytest.mark.parametrize("shape", [(3, 4, 8), (2, 3, 7), (2, 5), (4, 2, 5, 3)], ids=str)
def test_bfloat16_batch_norm_takes_a_bfloat16_variance(shape):
    a = (np.random.default_rng(shape[-1]).standard_normal(shape) * 4 + 1.5).astype(np.float32)
    x = ember.from_numpy(a).to(ember.bfloat16)
    y, mean, invstd = ember.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
    xf = _bf(a)
    dims = (0,) + tuple(range(2, len(shape)))
    n = xf.size // shape[1]
    m = xf.mean(dims)
    squares = ((xf - np.expand_dims(m, dims)) ** 2).sum(dims)
    want_invstd = _bf(1 / np.sqrt(_bf(_bf(squares) / n) + 1e-5))
    np.testing.assert_array_equal(invstd.float().numpy(), want_invstd)
    np.testing.assert_array_equal(mean.float().numpy(), _bf(m))
    want = _bf((xf - np.expand_dims(_bf(m), dims)) * np.expand_dims(want_invstd, dims))
    np.testing.assert_array_equal(y.float().numpy(), want)


def test_float32_weight_keeps_float32_statistics():
    a = np.random.default_rng(1).standard_normal((3, 2, 6)).astype(np.float32) * 3
    x = ember.from_numpy(a).to(ember.bfloat16)
    _, _, invstd = ember.native_batch_norm(x, ember.ones(2), None, None, None, True, 0.1, 1e-5)
    xf = _bf(a)
    assert invstd.dtype == ember.float32
    np.testing.assert_allclose(invstd.numpy(), 1 / np.sqrt(xf.var((0, 2)) + 1e-5), rtol=1e-6)


def test_bfloat16_pow_three_and_minus_two_round_the_square():
    a = (np.random.default_rng(2).standard_normal(400) * 3).astype(np.float32)
    x = ember.from_numpy(a).to(ember.bfloat16)
    xf = _bf(a)
    np.testing.assert_array_equal(x.pow(3).float().numpy(), _bf(_bf(xf * xf) * xf))
    np.testing.assert_array_equal((x ** -2).float().numpy(), _bf(1 / _bf(xf * xf)))
    np.testing.assert_array_equal(x.pow(2).float().numpy(), _bf(xf * xf))
    h = ember.from_numpy(a).to(ember.float16)   # float16 rounds once
    hf = np.asarray(a).astype(np.float16).astype(np.float64)
    np.testing.assert_array_equal(h.pow(3).float().numpy(),
                                  (hf ** 3).astype(np.float16).astype(np.float32))


@pytest.mark.parametrize("low", [BF16, np.float16], ids=["bfloat16", "float16"])
def test_16_bit_linear_interpolation_rounds_lambda(low):
    a = (np.random.default_rng(3).standard_normal((2, 3, 11)) * 3).astype(np.float32)
    x = ember.from_numpy(a).to(ember.bfloat16 if low is BF16 else ember.float16)
    y = ember.nn.functional.interpolate(x, scale_factor=1.5, mode="linear").float().numpy()
    src = np.maximum((np.arange(16) + 0.5) / 1.5 - 0.5, 0)
    i0 = np.floor(src).astype(int)
    i1 = np.minimum(i0 + 1, 10)
    lam1 = (src - i0).astype(np.float32).astype(low).astype(np.float64)
    lam0 = (1 - lam1).astype(np.float32).astype(low).astype(np.float64)
    xf = np.asarray(a).astype(low).astype(np.float64)
    want = (xf[..., i0] * lam0 + xf[..., i1] * lam1).astype(np.float32).astype(low)
    np.testing.assert_array_equal(y, want.astype(np.float32))
