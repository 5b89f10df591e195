"""float8 on CPU as PyTorch has it, checked against ml_dtypes without torch: the few kernels
that accept float8 (abs, mul of two tensors, eq/ne, cat, stack, where) compute in float32 and
round back, float8_e4m3fn saturating to +-448; the rest raise NotImplementedError; views of
float8 tensors keep their dtype."""

import ml_dtypes
import numpy as np
import pytest

import ember

VALUES = np.array([1.0, -2.0, 0.5, 300.0, -448.0, 0.013, 20.0, 0.0], np.float32)
NP8 = {"float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}


def _pair(name):
    a = np.clip(VALUES, -448, 448).astype(NP8[name])
    b = a[::-1].copy()
    dtype = getattr(ember, name)
    return a, b, ember.tensor(VALUES).to(dtype), ember.tensor(VALUES[::-1].copy()).to(dtype)


@pytest.mark.parametrize("name", sorted(NP8))
def test_float8_kernels_compute_in_float32(name):
    a, b, ta, tb = _pair(name)
    np.testing.assert_array_equal(ta.abs().float().numpy(), np.abs(a.astype(np.float32)))
    product = a.astype(np.float32) * b.astype(np.float32)
    if name == "float8_e4m3fn":
        product = np.clip(product, -448, 448)
    expected = product.astype(NP8[name]).astype(np.float32)
    np.testing.assert_array_equal((ta * tb).float().numpy(), expected)
    np.testing.assert_array_equal(ta.clone().mul_(tb).float().numpy(), expected)
    np.testing.assert_array_equal((ta == tb).numpy(), a.astype(np.float32) == b.astype(np.float32))
    np.testing.assert_array_equal(ember.cat([ta, tb]).view(ember.uint8).numpy(),
                                  np.concatenate([a, b]).view(np.uint8))
    assert ember.stack([ta, tb]).dtype is getattr(ember, name)
    mask = VALUES > 0
    np.testing.assert_array_equal(ember.where(ember.from_numpy(mask), ta, tb).float().numpy(),
                                  np.where(mask, a, b).astype(np.float32))


def test_float8_e4m3fn_product_saturates():
    big = ember.tensor([448.0, -448.0, 300.0]).to(ember.float8_e4m3fn)
    assert (big * big).float().tolist() == [448.0, 448.0, 448.0]
    assert (big * big[[2, 1, 0]]).float().tolist() == [448.0, 448.0, 448.0]
    # 0-dim: a tensor comes back (NumPy's clip of a 0-dim array gives a scalar), and a 0-dim
    # ``self`` may multiply (only a 0-dim ``other`` takes PyTorch's missing scalar path)
    assert big[0].abs().dim() == 0 and big[1].abs().float().item() == 448.0
    assert (big[1] * big).float().tolist() == [-448.0, 448.0, -448.0]


@pytest.mark.parametrize("name", sorted(NP8))
def test_float8_kernels_missing_raise(name):
    _, _, ta, tb = _pair(name)
    torch_name = getattr(ember, name)._torch_name
    with pytest.raises(NotImplementedError, match=f'"add_stub" not implemented for \'{torch_name}'):
        ta + tb
    with pytest.raises(NotImplementedError, match="mul_cpu_reduced_float"):
        ta * 2.0
    with pytest.raises(NotImplementedError, match="index_copy_cpu"):
        ta.clone().index_copy_(0, ember.tensor([1, 0]), tb[:2])


@pytest.mark.parametrize("name", sorted(NP8))
def test_float8_views_keep_dtype(name):
    values = np.array([[1.0, -2.0, 0.5, 3.0], [4.0, 0.25, -8.0, 6.0]], np.float32)
    t = ember.from_numpy(values).to(getattr(ember, name))
    bits = values.astype(NP8[name]).view(np.uint8)
    windows = np.lib.stride_tricks.sliding_window_view(bits, 2, axis=1)
    np.testing.assert_array_equal(t.unfold(1, 2, 1).contiguous().view(ember.uint8).numpy(),
                                  windows)
    np.testing.assert_array_equal(
        t[:, None].expand(2, 3, 4).reshape(6, 4).view(ember.uint8).numpy(),
        np.repeat(bits, 3, axis=0))
    np.testing.assert_array_equal(t.diagonal().view(ember.uint8).numpy(), np.diagonal(bits))
    np.testing.assert_array_equal(
        t.as_strided((3, 2), (1, 2), 1).contiguous().view(ember.uint8).numpy(),
        np.lib.stride_tricks.as_strided(bits.reshape(-1)[1:], (3, 2), (1, 2)))
    assert t[None, :, None].dtype is getattr(ember, name)
