"""float32 linear interpolation weights from a float32 NumPy reference of PyTorch's kernel:
the source index ``scale * (dst + 0.5) - 0.5`` as one fused multiply-add in float32 (the
scale ``1 / scale_factor`` rounded from double), ``lambda`` and ``1 - lambda`` in float32."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def _reference(n, o, scale, align_corners):
    """(o, n) float32 weight matrix."""
    f = np.float32
    dst = np.arange(o, dtype=f)
    if align_corners:
        src = dst * (f(n - 1) / f(o - 1) if o > 1 else f(0))
    else:
        s = f(1.0 / scale) if scale else f(n) / f(o)
        src = np.maximum((np.float64(s) * (dst + f(0.5)) - 0.5).astype(f), f(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), n - 1)
    lam = src - i0.astype(f)
    w = np.zeros((o, n), f)
    rows = np.arange(o)
    np.add.at(w, (rows, i0), f(1) - lam)
    np.add.at(w, (rows, np.minimum(i0 + 1, n - 1)), lam)
    return w


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("n,scale", [(12, 1.7), (7, 2.5), (25, 0.6), (9, 3.1), (12, None)])
def test_linear_weights_match_float32_reference(n, scale, align_corners):
    o = 19 if scale is None else int(np.floor(n * scale))
    x = ember.eye(n).reshape(n, 1, n)
    kw = dict(size=o) if scale is None else dict(scale_factor=scale)
    y = F.interpolate(x, mode="linear", align_corners=align_corners, **kw)
    np.testing.assert_array_equal(y.numpy()[:, 0, :].T, _reference(n, o, scale, align_corners))


def test_linear_weight_value_from_pytorch():
    # PyTorch 2.13 gives 0.38235298 here (float64 arithmetic gives 0.38235295)
    y = F.interpolate(ember.eye(12).reshape(12, 1, 12), scale_factor=1.7, mode="linear")
    assert y.numpy()[1, 0, 1] == np.float32(0.38235298)


@pytest.mark.parametrize("mode,nd", [("linear", 1), ("bilinear", 2), ("trilinear", 3)])
def test_values_and_grads_from_reference(mode, nd):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3) + (8,) * nd).astype(np.float32)
    w = _reference(8, 13, 1.7, False).astype(np.float64)
    ref = x.astype(np.float64)
    for d in range(nd):
        ref = np.moveaxis(np.tensordot(ref, w, axes=([2 + d], [1])), -1, 2 + d)
    t = ember.tensor(x, requires_grad=True)
    y = F.interpolate(t, scale_factor=1.7, mode=mode)
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-6, atol=1e-6)
    g = rng.standard_normal(y.shape).astype(np.float32)
    y.backward(ember.tensor(g))
    gref = g.astype(np.float64)
    for d in range(nd):
        gref = np.moveaxis(np.tensordot(gref, w, axes=([2 + d], [0])), -1, 2 + d)
    np.testing.assert_allclose(t.grad.numpy(), gref, rtol=1e-5, atol=1e-5)


def test_float64_keeps_double_weights():
    y = F.interpolate(ember.eye(12, dtype=ember.float64).reshape(12, 1, 12), scale_factor=1.7,
                      mode="linear")
    assert y.numpy()[1, 0, 1] == pytest.approx(1 / 1.7 * 1.5 - 0.5, abs=1e-15)
