"""``normal`` with tensor operands: its one-pass route gives the step-by-step route's samples
(normal_, mul_, add_) bit for bit, and overflow to inf stays silent."""

import warnings

import numpy as np
import pytest

import ember
import ember._random_inplace as R


def _draw(monkeypatch, one_pass, mean, std):
    if not one_pass:
        monkeypatch.setattr(R, "_PLAIN_FLOATS", ())
    ember.manual_seed(11)
    out = ember.normal(mean, std)
    monkeypatch.undo()
    return out


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("shape", [(8, 8), (), (0,), (2, 3, 4)])
@pytest.mark.parametrize("form", ["tt", "tf", "ft", "ti", "grad"])
def test_one_pass_matches_the_steps(monkeypatch, dtype, shape, form):
    ember.manual_seed(0)
    m = ember.randn(shape, dtype=dtype) * 3
    s = ember.rand(shape, dtype=dtype) * 2
    mean, std = {"tt": (m, s), "tf": (m, 0.7), "ft": (-1.5, s), "ti": (m, 2),
                 "grad": (m.clone().requires_grad_(), s)}[form]
    fast, slow = _draw(monkeypatch, True, mean, std), _draw(monkeypatch, False, mean, std)
    assert type(fast._data) is np.ndarray
    assert fast.dtype is slow.dtype is dtype and fast.shape == slow.shape == shape
    assert fast.stride() == slow.stride()
    assert np.array_equal(fast.detach().numpy(), slow.detach().numpy())
    assert type(fast.grad_fn).__name__ == type(slow.grad_fn).__name__
    if shape == (8, 8):
        assert fast.std().item() > 0.1          # drawn, not a copy of the mean


def test_zero_dim_sample_is_a_tensor_of_an_array():
    out = ember.normal(ember.tensor(1.0), ember.tensor(2.0))
    assert out.shape == () and bool(out == out)


def test_overflow_is_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isinf(ember.normal(ember.zeros(4), 1e300).numpy()).all()
        assert np.isinf(ember.zeros(4).normal_(0.0, 1e300).numpy()).all()
        assert np.isinf(ember.normal(ember.zeros(4), ember.full((4,), 1e300,
                                                          dtype=ember.float64)).numpy()).all()


def test_mean_beyond_the_dtype_still_refused():
    with pytest.raises(RuntimeError, match="cannot be converted to type float without overflow"):
        ember.normal(1e300, ember.rand(3))
