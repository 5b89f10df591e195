"""16-bit layer and group norm against NumPy references: float32 parameters keep float32
statistics (PyTorch's mixed kernels), and a 16-bit group norm's gradients are the float32
derivative rounded once to each input's dtype."""

import ml_dtypes
import numpy as np
import pytest

import ember


def _group_norm_grads(x, w, gy, groups, low, eps=1e-5):
    """The group norm derivative in float64 for an (N, C, L) input, from the statistics
    rounded to the 16-bit dtype ``low`` (they are saved in the input's dtype)."""
    n, c, length = x.shape
    xg = x.reshape(n, groups, -1)
    k = xg.shape[-1]
    mean = xg.astype(np.float32).mean(-1, keepdims=True).astype(low).astype(np.float64)
    invstd = (1 / np.sqrt(xg.var(-1, keepdims=True) + eps)).astype(low).astype(np.float64)
    xc = xg - mean
    g = (gy * w[:, None]).reshape(n, groups, -1)
    gx = (invstd * g - xc * invstd ** 3 * (g * xc).sum(-1, keepdims=True) / k
          - invstd * g.sum(-1, keepdims=True) / k)
    return gx.reshape(x.shape), (gy * (xc * invstd).reshape(x.shape)).sum((0, 2)), gy.sum((0, 2))


@pytest.mark.parametrize("low", [ember.bfloat16, ember.float16])
def test_mixed_norms_keep_float32_statistics(low):
    x = ember.randn(3, 4, 5).to(low)
    w, b = ember.ones(4), ember.zeros(4)
    assert [t.dtype for t in ember.native_group_norm(x, w, b, 3, 4, 5, 2, 1e-5)] == \
        [low, ember.float32, ember.float32]
    assert [t.dtype for t in ember.native_layer_norm(x, (5,), ember.ones(5), None, 1e-5)] == \
        [low, ember.float32, ember.float32]
    assert [t.dtype for t in ember.native_layer_norm(x, (5,), None, None, 1e-5)] == [low] * 3


@pytest.mark.parametrize("np_low, low", [(ml_dtypes.bfloat16, ember.bfloat16),
                                         (np.float16, ember.float16)])
def test_16bit_group_norm_backward_is_rounded_once(np_low, low):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4, 6)).astype(np_low)
    gy = rng.standard_normal((3, 4, 6)).astype(np_low)
    w = rng.standard_normal(4).astype(np_low)
    xt = ember.from_numpy(x.astype(np.float32)).to(low).requires_grad_()
    wt = ember.from_numpy(w.astype(np.float32)).to(low).requires_grad_()
    bt = ember.zeros(4, dtype=low, requires_grad=True)
    ember.nn.functional.group_norm(xt, 2, wt, bt).backward(
        ember.from_numpy(gy.astype(np.float32)).to(low))
    refs = _group_norm_grads(x.astype(np.float64), w.astype(np.float64),
                             gy.astype(np.float64), 2, np_low)
    for got, ref in zip((xt.grad, wt.grad, bt.grad), refs):
        assert got.dtype == low
        # rounded once from float32 (step-by-step 16-bit arithmetic differs in most entries)
        np.testing.assert_array_equal(got.float().numpy(),
                                      ref.astype(np_low).astype(np.float32))
