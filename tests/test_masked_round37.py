"""Regression tests for the round-37 masked-ops fuzzer's findings: ember.masked follows
PyTorch's steps (identity, then the op, then dtype=), and the ops under it (cumsum of a 0-d
bool, vector_norm's check order, amax of an empty complex result)."""

import math

import pytest

import ember
from ember import masked

_X = ember.tensor([[1.0, -2.0, 3.0], [4.0, 0.5, -6.0]])
_M = ember.tensor([[True, False, True], [False, False, False]])


def test_cast_comes_after_the_reduction():
    x = ember.tensor([3, -5, 7], dtype=ember.int8)
    none = ember.tensor([False, False, False])
    out = masked.amax(x, 0, dtype=ember.float64, mask=none)
    assert out.dtype == ember.float64 and out.item() == -128.0    # int8's identity
    out = masked.logsumexp(ember.tensor([1, 2], dtype=ember.int8), 0)
    assert out.dtype == ember.int8 and out.item() == 2            # log(e + e^2) = 2.31
    out = masked.argmin(_X, 1, dtype=ember.bool, mask=_M)
    assert out.dtype == ember.bool and out.tolist() == [False, False]
    out = masked.cumsum(x, 0)
    assert out.dtype == ember.int8 and out.tolist() == [3, -2, 5]
    out = masked.sum(ember.tensor([200, 100], dtype=ember.uint8), 0, dtype=ember.int32)
    assert out.dtype == ember.int32 and out.item() == 300


def test_sum_dtype_refuses_grad():
    x = _X.clone().requires_grad_()
    with pytest.raises(RuntimeError, match="Autograd not support dtype: Int"):
        masked.sum(x, dtype=ember.int32)


def test_identities():
    with pytest.raises(NotImplementedError, match="identity of amax on ember.bool input"):
        masked.amax(_M, 1, mask=_M)
    assert masked.amax(_M, 1).tolist() == [True, False]            # no mask: no identity
    with pytest.raises(TypeError, match=r"iinfo\(\) requires an integer input type"):
        masked.softmin(_X.to(ember.complex64), 0, mask=_M)
    # norm(-inf): masked-out elements are inf, not 0
    out = masked.norm(ember.tensor([0.5, -3.0, 0.0]), -math.inf, 0,
                      mask=ember.tensor([True, True, False]))
    assert out.item() == 0.5


def test_var_of_integers_and_its_node():
    out = masked.var(ember.tensor([1, 2, 3, 4]), 0)
    assert out.dtype == ember.float32 and abs(out.item() - 5 / 3) < 1e-6
    x = _X.clone().requires_grad_()
    out = masked.var(x, 1, mask=_M)
    assert type(out.grad_fn).__name__ == "DivBackward0"
    assert out[0].item() == 2.0 and math.isnan(out[1].item())      # ((1 - 2)^2 + 1) / 1
    with pytest.raises(AssertionError, match="Only one of unbiased and correction"):
        masked.std(_X, 1, True, correction=0)


def test_mask_and_dim_errors():
    with pytest.raises(IndexError, match="_input_mask expected broadcastable mask"):
        masked.sum(_X, 0, mask=ember.ones(2, 2, 3, dtype=ember.bool))
    with pytest.raises(RuntimeError, match="dim=0 appears multiple times in the list of dims"):
        masked.sum(_X, (0, 0))
    with pytest.raises(ValueError, match="mean\\(\\): Could not infer output dtype. Optional"):
        masked.mean(_X, 0, dtype=ember.bool)
    with pytest.raises(TypeError, match="argument 'keepdim' .* must be bool, not int"):
        masked.median(_X, 0, keepdim=1)
    assert masked.median(_X, (1,), mask=ember.tensor([True, True, False])).tolist() == [-2, 0.5]


def test_median_of_integers():
    x = ember.tensor([[5, 1, 3], [2, 2, 9]])
    out = masked.median(x, 1, mask=ember.tensor([True, True, False]))
    assert out.dtype == ember.int64 and out.tolist() == [1, 2]
    with pytest.raises(ValueError, match="expects no fully masked out rows"):
        masked.median(x, 1, mask=ember.tensor([[True] * 3, [False] * 3]))


def test_prod_over_no_dims_is_the_input():
    assert masked.prod(_X, []) is _X
    assert masked.prod(_X, ()).item() == 72.0


def test_cumsum_of_a_0d_bool():
    assert ember.cumsum(ember.tensor(True), 0, dtype=ember.bool).item() is True
    empty = ember.cumprod(ember.tensor([], dtype=ember.bool), 0, dtype=ember.bool)
    assert empty.dtype == ember.bool and empty.shape == (0,)
    with pytest.raises(IndexError, match="Dimension out of range"):       # before the dtype
        ember.cumsum(ember.tensor([True]), 5, dtype=ember.bool)
    with pytest.raises(NotImplementedError, match="cumsum_out_cpu"):
        ember.cumsum(ember.tensor([True]), 0, dtype=ember.bool)


def test_vector_norm_checks_the_empty_dim_before_the_dtype():
    with pytest.raises(RuntimeError, match="cannot compute the inf norm on the dimension -1"):
        ember.linalg.vector_norm(ember.zeros(0), math.inf, -1, dtype=ember.int32)
    with pytest.raises(RuntimeError, match="dtype should be floating point or complex"):
        ember.linalg.vector_norm(ember.zeros(3), math.inf, -1, dtype=ember.int32)


def test_amax_of_an_empty_complex_result():
    z = ember.zeros(5, 0, dtype=ember.complex64)
    assert ember.amax(z, 0).shape == (0,)
    with pytest.raises(IndexError, match="Expected reduction dim 1 to have non-zero size"):
        ember.amin(z, 1)
    with pytest.raises(NotImplementedError, match="max_values_cpu"):
        ember.amax(ember.zeros(5, 1, dtype=ember.complex64), 0)
