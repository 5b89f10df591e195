"""Layouts PyTorch gives (round 32), as strides read from PyTorch 2.13 and values against
NumPy: elementwise results whose first operand broadcasts, out= tensors resized by
elementwise ops, nan_to_num's layout, and numpy()'s own array header."""

import warnings

import numpy as np
import pytest

import ember


def _permuted(a, perm):
    """``a`` (a NumPy array) as a dense tensor laid out in ``perm``'s dim order."""
    t = ember.tensor(np.ascontiguousarray(a.transpose(perm)))
    return t.permute(*np.argsort(perm).tolist())


def test_broadcast_row_major_first_operand_mixed_dtypes():
    a = np.arange(24).reshape(3, 8)[:, ::2]                 # int64, not dense
    b = np.linspace(-1, 1, 60).reshape(3, 5, 1, 4)
    ta, tb = ember.tensor(np.arange(24).reshape(3, 8))[:, ::2], _permuted(b, (2, 1, 3, 0))
    r = ta + tb
    assert r.dtype == ember.float64
    assert r.stride() == (1, 36, 3, 9)
    np.testing.assert_allclose(r.numpy(), a + b)


def test_broadcast_first_operand_float16_second():
    b = np.linspace(-1, 1, 30).reshape(3, 5, 1, 2).astype(np.float16)
    a = np.arange(3).reshape(1, 3, 1)
    r = _permuted(a, (1, 0, 2)) + _permuted(b, (0, 2, 3, 1))
    assert r.dtype == ember.float16 and r.stride() == (30, 1, 5, 15)
    np.testing.assert_allclose(r.numpy(), (a + b).astype(np.float16))


def test_column_plus_permuted():
    x = np.linspace(-1, 1, 12).reshape(3, 1, 4)
    r = ember.tensor(np.arange(5.0).reshape(1, 5, 1)) + _permuted(x, (2, 1, 0)).float()
    assert r.stride() == (1, 3, 15)
    np.testing.assert_allclose(r.numpy(), np.arange(5.0).reshape(1, 5, 1) + x, rtol=1e-6)


def test_three_operands_first_row_major_odd_unit_strides():
    cond = ember.tensor(np.arange(8).reshape(1, 8, 1) % 3 > 0)[:, ::2].permute(0, 1, 2)
    cond = cond.as_strided((1, 4, 1), (4, 1, 4))
    x = ember.tensor(np.arange(4.0, dtype=np.float32).reshape(4, 1))
    y = ember.tensor(np.float32(7.0)).reshape(1, 1)
    r = ember.where(cond, x, y)
    assert r.stride() == (4, 1, 4)
    np.testing.assert_array_equal(r.numpy(), np.where(cond.numpy(), x.numpy(), 7.0))


def test_addcmul_size_one_dim_keeps_operands_stride():
    a = ember.tensor(np.arange(4.0, dtype=np.float32).reshape(2, 2))[:, :1]
    a = a.as_strided((2, 1), (1, 4))
    b = ember.tensor(np.array([3.0]))
    r = ember.addcmul(a, b, a)
    assert r.dtype == ember.float64 and r.stride() == (1, 2)
    np.testing.assert_allclose(r.numpy(), a.numpy() + 3.0 * a.numpy() ** 2)


@pytest.mark.parametrize("out_shape", [(0,), (7,), (2, 3)])
@pytest.mark.parametrize("op,ref", [(ember.abs, np.abs), (ember.sigmoid, None),
                                    (lambda x, out: ember.add(x, 1, out=out), lambda x: x + 1),
                                    (ember.nan_to_num, np.nan_to_num)])
def test_resized_out_takes_the_result_layout(out_shape, op, ref):
    a = ember.tensor(np.linspace(-2, 2, 60, dtype=np.float32).reshape(3, 4, 5))
    for x, strides in [(a.transpose(0, 2), (1, 5, 20)), (a.permute(1, 2, 0), (5, 1, 20)),
                       (a[:, :1, :].transpose(0, 1), (5, 5, 1)),
                       (a.transpose(1, 2)[:, :, :1], (5, 1, 5))]:
        out = ember.zeros(out_shape)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = op(x, out=out)
        assert r is out and out.stride() == strides
        want = 1 / (1 + np.exp(-x.numpy())) if ref is None else ref(x.numpy())
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)


def test_resized_out_of_a_reduction_stays_row_major():
    x = ember.tensor(np.arange(60.0, dtype=np.float32).reshape(3, 4, 5)).transpose(0, 2)
    out = ember.empty(0)
    ember.sum(x, 1, out=out)
    assert out.stride() == (3, 1)
    np.testing.assert_allclose(out.numpy(), x.numpy().sum(1))


@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16, ember.float32])
def test_nan_to_num_keeps_dense_input_strides(dtype):
    x = ember.tensor([[float("nan"), 1.0, float("inf")], [2.0, float("-inf"), 3.0]])
    x = x.to(dtype).t().reshape(1, 3, 1, 2).as_strided((1, 3, 1, 2), (6, 1, 1, 3))
    r = ember.nan_to_num(x, posinf=9.0, neginf=-9.0)
    assert r.stride() == (6, 1, 1, 3)           # empty_like(input)'s
    out = ember.empty(0, dtype=dtype)
    ember.nan_to_num(x, posinf=9.0, neginf=-9.0, out=out)
    assert out.stride() == (6, 1, 6, 3)         # an elementwise op's (channels-last here)
    want = np.nan_to_num(x.float().numpy(), posinf=9.0, neginf=-9.0)
    np.testing.assert_array_equal(r.float().numpy(), want)
    np.testing.assert_array_equal(out.float().numpy(), want)


def test_nan_to_num_integer_out_is_row_major():
    x = ember.tensor(np.arange(12).reshape(3, 4)).t()
    out = ember.empty(0, dtype=ember.int64)
    ember.nan_to_num(x, out=out)
    assert ember.nan_to_num(x).stride() == (1, 4) and out.stride() == (3, 1)
    np.testing.assert_array_equal(out.numpy(), np.arange(12).reshape(3, 4).T)


@pytest.mark.parametrize("convert", [lambda t: t.numpy(), np.asarray, lambda t: t.__array__()])
def test_numpy_arrays_have_their_own_header(convert):
    t = ember.arange(16.).reshape(4, 4)
    n = convert(t)
    assert np.shares_memory(n, t.numpy())
    n.shape = (16,)
    n[5] = -1.0
    frozen = convert(t)
    frozen.flags.writeable = False
    t.add_(1)
    assert tuple(t.shape) == (4, 4) and t.stride() == (4, 1)
    assert t[1, 1].item() == 0.0 and n[5] == 0.0 and n.shape == (16,)


def test_nan_to_num_empty_out_is_row_major():
    # PyTorch 2.13: an empty result's out= is row-major (sizes 0 counted as 1), whatever the
    # input's strides; the plain call keeps them
    for x, strides in [(ember.empty(3, 0).t(), (3, 1)), (ember.empty(0, 3).t(), (1, 1)),
                       (ember.empty(2, 3, 0).permute(2, 0, 1), (6, 3, 1))]:
        for numel in (0, 5):
            out = ember.empty(numel)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                assert ember.nan_to_num(x, out=out) is out
            assert out.shape == x.shape and out.stride() == strides
    assert ember.nan_to_num(ember.empty(3, 0).t()).stride() == (1, 1)
