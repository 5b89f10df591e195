"""The array paths of softmax, log_softmax and layer_norm (forward shifts, first-order
backward on arrays) against float64 NumPy references."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def _softmax64(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _ulps(got, want):
    return np.abs(got.astype(np.float64) - want) / np.spacing(want.astype(np.float32))


@pytest.mark.parametrize("scale", [1.0, 4.0])
def test_softmax_keeps_each_row_accurate_far_below_the_global_max(scale):
    # rows 30 * scale below the top one: the global-max shift must give way to each row's
    x = np.random.default_rng(0).standard_normal((6, 50)).astype(np.float32) * scale
    x[3:] -= 30 * scale
    got = F.softmax(ember.tensor(x), -1).numpy()
    want = _softmax64(x.astype(np.float64), -1)
    normal = want > np.finfo(np.float32).tiny
    assert _ulps(got[normal], want[normal]).max() < 8 * scale


def test_softmax_rows_of_minus_inf_and_inf_give_nan_as_pytorch():
    inf = float("inf")
    x = ember.tensor([[0.0, -inf, 1.0], [-inf, -inf, -inf], [inf, 0.0, 1.0]])
    got = F.softmax(x, 1).numpy()
    np.testing.assert_allclose(got[0], _softmax64(np.array([0.0, -inf, 1.0]), 0), rtol=1e-6)
    assert np.isnan(got[1]).all() and np.isnan(got[2]).all()


def test_log_softmax_near_zero_keeps_its_precision():
    # the likely class's log-probability is near 0: the second row shifted by the first
    # row's max (30 above) would lose digits to cancellation
    x = np.array([[0.0, -8.0, -9.0], [30.0, 22.0, 21.5]], np.float32)[::-1].copy()
    got = F.log_softmax(ember.tensor(x), 1).numpy()
    want = x - x.max(1, keepdims=True) - np.log(np.exp(x - x.max(1, keepdims=True)).sum(
        1, keepdims=True, dtype=np.float64))
    np.testing.assert_allclose(got[:, 0], want[:, 0], rtol=0, atol=2e-7)


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_backward_on_arrays_matches_the_formula(fn, dim):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4, 5))
    g = rng.standard_normal((3, 4, 5))
    t = ember.tensor(x, requires_grad=True)
    getattr(F, fn)(t, dim).backward(ember.tensor(g))
    s = _softmax64(x, dim)
    if fn == "softmax":
        want = s * (g - (g * s).sum(dim, keepdims=True))
    else:
        want = g - s * g.sum(dim, keepdims=True)
    np.testing.assert_allclose(t.grad.numpy(), want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_softmax_double_backward_still_composes(fn):
    x = ember.tensor(np.random.default_rng(2).standard_normal((2, 5)), requires_grad=True)
    assert ember.autograd.gradgradcheck(lambda t: getattr(F, fn)(t, -1), (x,))


@pytest.mark.parametrize("affine", [(True, True), (True, False), (False, False)])
def test_layer_norm_backward_with_a_large_mean(affine):
    # x - mean is formed before any product: a mean 100 times the spread loses no digits
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 6, 16)) + 100.0
    gy = rng.standard_normal((4, 6, 16))
    w = rng.standard_normal(16) if affine[0] else None
    b = rng.standard_normal(16) if affine[1] else None
    tx = ember.tensor(x.astype(np.float32), requires_grad=True)
    tw = None if w is None else ember.tensor(w.astype(np.float32), requires_grad=True)
    tb = None if b is None else ember.tensor(b.astype(np.float32), requires_grad=True)
    F.layer_norm(tx, (16,), tw, tb).backward(ember.tensor(gy.astype(np.float32)))
    x = tx.detach().numpy().astype(np.float64)
    xc = x - x.mean(-1, keepdims=True)
    invstd = 1 / np.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5)
    xhat = xc * invstd
    g = gy if w is None else gy * tw.detach().numpy()
    want = invstd * (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True))
    np.testing.assert_allclose(tx.grad.numpy(), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    if w is not None:
        np.testing.assert_allclose(tw.grad.numpy(), (gy * xhat).sum((0, 1)), rtol=1e-4,
                                   atol=1e-4)
    if b is not None:
        np.testing.assert_allclose(tb.grad.numpy(), gy.sum((0, 1)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_cross_entropy_of_a_likely_class_keeps_its_digits(label_smoothing):
    # the first row's max is 30 below the global one: its loss near 0 must not cancel
    x = np.array([[30.0, 22.0, 21.5], [0.0, -8.0, -9.0]], np.float32)
    got = F.cross_entropy(ember.tensor(x), ember.tensor([0, 0]), reduction="none",
                          label_smoothing=label_smoothing).numpy()
    xd = x.astype(np.float64)
    logp = xd - xd.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    want = -(1 - label_smoothing) * logp[:, 0] - label_smoothing / 3 * logp.sum(1)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=0, atol=5e-8)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 4)])
@pytest.mark.parametrize("fn", [ember.softmax, ember.log_softmax])
def test_softmax_backward_of_empty_tensors(fn, shape):
    x = ember.zeros(shape, requires_grad=True)
    fn(x, -1).sum().backward()
    assert x.grad.shape == shape


def test_cross_entropy_of_confident_rows_is_never_negative():
    # log(sum of exp) rounds: the picked log-probability must still stay at or below 0
    x = ember.tensor([[80.0, 0.0, 0.0], [55.0, 0.0, 0.0]])
    assert F.cross_entropy(x, ember.tensor([0, 0]), reduction="none").tolist() == [0.0, 0.0]
    g = ember.Generator().manual_seed(0)
    logits = ember.randn(2000, 20, generator=g) * 30
    assert (F.cross_entropy(logits, logits.argmax(1), reduction="none") >= 0).all()


def test_layer_norm_backward_with_a_tiny_eps_stays_finite():
    # 1 / sqrt(1e-30) cubed overflows float32; the product is taken in steps
    x = ember.ones(1, 4, requires_grad=True)
    F.layer_norm(x, (4,), ember.ones(4), None, eps=1e-30).sum().backward()
    assert ember.isfinite(x.grad).all()
