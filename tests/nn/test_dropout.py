"""Dropout: statistics, the mask identity between forward and backward, modes and errors."""

import math

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F


def test_dropout_zeroes_about_p_and_scales_the_rest():
    ember.manual_seed(0)
    x = ember.ones(200, 100)
    y = F.dropout(x, 0.3)
    a = np.asarray(y)
    assert abs((a == 0).mean() - 0.3) < 0.01
    np.testing.assert_allclose(a[a != 0], 1 / 0.7, rtol=1e-6)


def test_dropout_gradient_reuses_the_mask():
    ember.manual_seed(1)
    x = ember.randn(50, 40, requires_grad=True)
    y = F.dropout(x, 0.5)
    y.backward(ember.ones_like(y))
    kept = np.asarray(y.detach()) != 0
    np.testing.assert_allclose(np.asarray(x.grad), kept * 2.0)
    assert y.grad_fn.name() == "MulBackward0"


def test_dropout_is_reproducible_under_manual_seed():
    x = ember.randn(10, 10)
    ember.manual_seed(5)
    a = np.asarray(F.dropout(x))
    ember.manual_seed(5)
    np.testing.assert_array_equal(a, np.asarray(F.dropout(x)))


def test_eval_p0_and_p1():
    x = ember.randn(4, 5)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    assert not np.asarray(F.dropout(x, 1.0)).any()
    assert F.alpha_dropout(x, 0.5) is x            # training defaults to False
    m = nn.Dropout(0.5).eval()
    assert m(x) is x


def test_inplace_dropout_writes_into_the_input():
    ember.manual_seed(2)
    x = ember.ones(30, 30)
    y = F.dropout(x, 0.5, inplace=True)
    assert y is x
    assert set(np.unique(np.asarray(x))) <= {0.0, 2.0}


def test_feature_dropout_drops_whole_channels():
    ember.manual_seed(3)
    x = ember.ones(8, 16, 5, 5)
    a = np.asarray(F.dropout2d(x, 0.5))
    per_channel = a.reshape(8, 16, -1)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2).all(-1))
    b = np.asarray(F.dropout1d(ember.ones(16, 7), 0.5))     # unbatched (C, L)
    assert b.shape == (16, 7) and np.all((b == 0).all(-1) | (b == 2).all(-1))
    c = np.asarray(F.dropout3d(ember.ones(6, 2, 2, 2), 0.5))  # unbatched (C, D, H, W)
    assert np.all((c.reshape(6, -1) == 0).all(-1) | (c.reshape(6, -1) == 2).all(-1))


def test_alpha_dropout_keeps_zero_mean_unit_variance():
    ember.manual_seed(4)
    x = ember.randn(400, 250)
    a = np.asarray(F.alpha_dropout(x, 0.2, training=True))
    assert abs(a.mean()) < 0.02 and abs(a.std() - 1) < 0.02
    alpha = 1.7580993408473766
    coef = 1 / math.sqrt((alpha ** 2 * 0.2 + 1) * 0.8)
    dropped = np.isclose(a, -alpha * coef * 0.8, atol=1e-6)
    assert abs(dropped.mean() - 0.2) < 0.01


def test_errors_and_warnings():
    x = ember.randn(2, 3)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, "
                                         "but got 1.5"):
        F.dropout(x, 1.5)
    with pytest.raises(ValueError, match="but got -0.1"):
        nn.Dropout(-0.1)
    with pytest.raises(RuntimeError, match="dropout probability has to be between 0 and 1"):
        ember.dropout(x, 1.5, True)
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input, but received "
                                           "a 4D input"):
        F.dropout1d(ember.randn(1, 2, 3, 4))
    with pytest.raises(RuntimeError, match="Feature dropout requires at least 2 dimensions"):
        ember.feature_dropout(ember.randn(3), 0.5, True)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        F.dropout(ember.tensor([1, 2]), 0.5)
    with pytest.warns(UserWarning, match="Received a 2-D input to dropout2d"):
        F.dropout2d(x)
    with pytest.warns(UserWarning, match="Received a 3D input to dropout2d"):
        F.dropout2d(ember.randn(2, 3, 4))


def test_module_reprs_and_modes():
    assert repr(nn.Dropout()) == "Dropout(p=0.5, inplace=False)"
    assert repr(nn.Dropout2d(0.2, True)) == "Dropout2d(p=0.2, inplace=True)"
    assert repr(nn.FeatureAlphaDropout()) == "FeatureAlphaDropout(p=0.5, inplace=False)"
    ember.manual_seed(0)
    m = nn.Dropout(0.5)
    x = ember.ones(20, 20)
    assert (np.asarray(m(x)) == 0).any()
    assert list(m.named_parameters()) == []


def test_p_one_multiplies_by_zero_without_dtype_or_rank_checks():
    # PyTorch's p == 1 path draws nothing: complex and integer inputs give zeros
    z = ember.tensor([1 + 2j, -1j])
    assert F.dropout(z, 1.0).tolist() == [0j, 0j]
    assert F.alpha_dropout(ember.tensor([3, 4]), 1.0, True).tolist() == [0, 0]
    assert ember.feature_dropout(ember.ones(3), 1.0, True).tolist() == [0.0] * 3
    assert ember.feature_dropout(ember.ones(3), 0.0, True).tolist() == [1.0] * 3
    with pytest.raises(NotImplementedError, match="bernoulli_scalar_cpu_"):
        F.dropout(z, 0.5)
    with pytest.raises(RuntimeError, match="Feature dropout requires at least 2 dimensions"):
        ember.feature_dropout(ember.ones(3), 0.5, True)
