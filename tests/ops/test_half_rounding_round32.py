"""16-bit CPU kernels that round where PyTorch's round (found by the round-32 video programs),
against NumPy/ml_dtypes references written from PyTorch's kernels: 3-D adaptive average pooling
sums each window in the input's dtype and divides by kT, kH, kW in turn; logsumexp rounds
x - max, exp, the sum, log and + max each to the input's dtype."""

import ml_dtypes
import numpy as np
import pytest

import ember

DTYPES = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
X = (np.random.default_rng(7).standard_normal((2, 3, 6, 9, 10)) * 3).astype(np.float32)


def _windows(size, out):
    return [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_adaptive_avg_pool3d_sums_in_the_16_bit_dtype(dtype):
    half = DTYPES[dtype]

    def r(v):
        return np.asarray(v, np.float32).astype(half).astype(np.float32)
    x = X.astype(half).astype(np.float32)
    out = (4, 4, 3)
    want = np.zeros((2, 3) + out, np.float32)
    for d, (d0, d1) in enumerate(_windows(6, 4)):
        for h, (h0, h1) in enumerate(_windows(9, 4)):
            for w, (w0, w1) in enumerate(_windows(10, 3)):
                acc = np.zeros((2, 3), np.float32)
                for value in x[:, :, d0:d1, h0:h1, w0:w1].reshape(2, 3, -1).transpose(2, 0, 1):
                    acc = r(acc + value)
                want[:, :, d, h, w] = r(r(r(acc / (d1 - d0)) / (h1 - h0)) / (w1 - w0))
    got = ember.nn.functional.adaptive_avg_pool3d(
        ember.from_numpy(X).to(getattr(ember, dtype)), out)
    np.testing.assert_array_equal(got.float().numpy(), want)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_logsumexp_rounds_each_step(dtype):
    half = DTYPES[dtype]

    def r(v):
        return np.asarray(v, np.float32).astype(half).astype(np.float32)
    x = X.astype(half).astype(np.float32)
    m = x.max(-1, keepdims=True)
    want = r(r(np.log(r(np.sum(r(np.exp(r(x - m))), -1)))) + m[..., 0])
    once = r(np.log(np.sum(np.exp(x - m), -1)) + m[..., 0])
    got = ember.logsumexp(ember.from_numpy(X).to(getattr(ember, dtype)), -1).float().numpy()
    np.testing.assert_array_equal(got, want)
    assert (got != once).any()        # the case tells the two apart
