"""Signs of zero results where PyTorch (2.13) and NumPy disagree (found by tests/parity)."""

import numpy as np
import pytest

import ember


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16])
def test_remainder_zero_keeps_the_dividend_sign(dtype):
    a = ember.tensor([-0.0, 0.0, -2.0, 2.0, -4.5, 4.5], dtype=dtype)
    b = ember.tensor([3.0, -3.0, 2.0, -2.0, 1.5, -1.5], dtype=dtype)
    out = np.asarray(ember.remainder(a, b).float())
    assert out.tolist() == [0.0] * 6
    assert np.signbit(out).tolist() == [True, False, True, False, True, False]
    by_two = np.asarray((a[:4] % 2).float())          # the operator, a Python number divisor
    assert np.signbit(by_two).tolist() == [True, False, True, False]


def test_rsqrt_of_complex_zero_and_signed_zero_parts():
    out = np.asarray(ember.rsqrt(ember.tensor([0j, 1 + 0j, complex(-1, -0.0)],
                                              dtype=ember.complex128)))
    assert np.isposinf(out[0].real) and np.isnan(out[0].imag)
    assert out[1] == 1 and not np.signbit(out[1].imag)
    assert out[2] == 1j and np.signbit(out[2].real)


def test_nll_and_cross_entropy_give_plus_zero_where_ignored():
    # a kept target whose log-probability is 0 gives -0 (the negated pick); an ignored one +0
    x, t = ember.zeros(3, 4), ember.tensor([0, -100, 1])
    for w in (None, ember.tensor([1., 2., .5, 1.5])):
        nll = np.asarray(ember.nn.functional.nll_loss(x, t, w, reduction="none"))
        assert nll.tolist() == [0, 0, 0] and np.signbit(nll).tolist() == [True, False, True]
        for smoothing in (0.0, 0.2):
            ce = np.asarray(ember.nn.functional.cross_entropy(
                x, t, w, reduction="none", label_smoothing=smoothing))
            assert ce[1] == 0 and not np.signbit(ce[1]) and ce[0] > 1.38
