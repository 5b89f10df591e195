"""Regressions found by the reductions / sorting / scans fuzzer of round 35 (see
tests/parity/test_parity_reduction_fuzz_round35.py); expected values are PyTorch 2.13's."""

import math
import warnings

import pytest

import ember


def test_sort_results_keep_a_transposed_inputs_layout():
    x = ember.arange(15.).reshape(3, 5).t()                      # (5, 3), strides (1, 5)
    values, indices = ember.sort(x, 0)
    assert values.stride() == (1, 5) and indices.stride() == (1, 5)
    assert ember.argsort(x, 0).stride() == (1, 5)
    assert ember.msort(x).stride() == (1, 5)
    assert values.tolist() == x.tolist() and indices.tolist() == [[k] * 3 for k in range(5)]
    stepped = ember.arange(60.).reshape(3, 20)[:, ::2].t()       # not dense: (1, 10)
    assert ember.sort(stepped, 1).values.stride() == (1, 10)
    permuted = ember.arange(60.).reshape(3, 4, 5).permute(1, 2, 0)[:, ::2]
    assert ember.sort(permuted, 0).values.stride() == (3, 1, 12)
    assert ember.sort(ember.ones(3, 4), 1).values.stride() == (4, 1)


def test_selected_indices_have_fresh_strides():
    x = ember.ones(1, 4, dtype=ember.int32).t()                  # (4, 1), strides (1, 1)
    assert ember.topk(x, 1, dim=0).indices.stride() == (1, 1)
    assert ember.kthvalue(ember.ones(1, 4).t(), 1, dim=0, keepdim=True).indices.stride() == (1, 1)
    assert ember.kthvalue(ember.ones(1, 3), 1, dim=1).indices.stride() == (1,)
    for r in (ember.kthvalue(ember.tensor([3., 1., 2.]), 2), ember.mode(ember.tensor([1, 2]))):
        assert r.indices.shape == () and r.values.shape == ()
    assert ember.kthvalue(ember.tensor([3., 1., 2.]), 2).indices.item() == 2


def test_complex_reduced_as_bool_counts_the_imaginary_part():
    z = ember.tensor([[1j, 2 + 0j], [0j, 1 + 1j]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # and no complex-to-real warning
        assert ember.prod(z, 1, dtype=ember.bool).tolist() == [True, False]
        assert ember.prod(z, dtype=ember.bool).item() is False
        assert ember.sum(z, 1, dtype=ember.bool).tolist() == [True, True]


def test_logcumsumexp_of_a_leading_negative_zero_is_positive_zero():
    assert math.copysign(1, ember.logcumsumexp(ember.tensor([-0.0, 1.0]), 0)[0].item()) == 1
    assert math.copysign(1, ember.logcumsumexp(ember.tensor([-0.0, -0.0]), 0)[1].item()) == 1
    assert math.copysign(1, ember.cumprod(ember.tensor([-0.0, 1.0]), 0)[0].item()) == -1
    assert math.copysign(1, ember.logcumsumexp(ember.tensor(-0.0), 0).item()) == -1  # a copy


def test_svd_of_a_matrix_with_an_inf_returns():
    # NumPy's LAPACK never returned on it (matrix_norm 'nuc' hung); PyTorch's gives NaN
    # singular values and reversed unit vectors
    a = ember.ones(3, 4, dtype=ember.float64)
    a[0, 0] = -math.inf
    u, s, vh = ember.linalg.svd(a)
    assert all(math.isnan(v) for v in s.tolist())
    assert u.tolist() == [[0., 0., 1.], [0., 1., 0.], [1., 0., 0.]]
    assert vh.tolist() == [[0., 0., 1., 0.], [0., 1., 0., 0.], [1., 0., 0., 0.],
                           [0., 0., 0., 1.]]
    tall = ember.ones(4, 3, dtype=ember.float64)
    tall[0, 0] = math.inf
    u, s, vh = ember.linalg.svd(tall, full_matrices=False)
    assert u.tolist() == [[0., 0., 1.], [0., 1., 0.], [1., 0., 0.], [0., 0., 0.]]
    batch = ember.stack([a, ember.eye(3, 4, dtype=ember.float64) * 2])
    norms = ember.linalg.matrix_norm(batch, "nuc")
    assert math.isnan(norms[0].item()) and norms[1].item() == pytest.approx(6.0)
    assert ember.linalg.svdvals(batch)[1].tolist() == pytest.approx([2., 2., 2.])
    with pytest.raises(ember.linalg.LinAlgError, match="non-finite values"):
        ember.linalg.svd(ember.tensor([[math.nan, 1.], [2., math.inf]]))


def test_zero_norm_has_no_gradient():
    x = ember.tensor([1., 0., 2.], requires_grad=True)
    ember.linalg.vector_norm(x, 0).backward()
    assert x.grad is None
    y = ember.tensor([[1., 0.], [2., 3.]], requires_grad=True)
    (ember.norm(y, 0, dim=1).sum() + y.sum()).backward()
    assert y.grad.tolist() == [[1., 1.], [1., 1.]]


def test_unique_consecutive_of_complex_along_a_dim_names_unique_dim():
    with pytest.raises(NotImplementedError, match='"unique_dim" not implemented for'):
        ember.unique_consecutive(ember.ones(2, 2, dtype=ember.complex64), dim=0)
    with pytest.raises(NotImplementedError, match='"unique_dim" not implemented for'):
        ember.unique_consecutive(ember.ones(2, dtype=ember.complex64), dim=-1)
    with pytest.raises(NotImplementedError, match='"unique" not implemented for'):
        ember.unique_consecutive(ember.ones(2, 2, dtype=ember.complex64))
    with pytest.raises(NotImplementedError, match='"unique" not implemented for'):
        ember.unique_consecutive(ember.ones(2, dtype=ember.complex64), dim=0)


def test_diff_layouts():
    x = ember.arange(24.).reshape(2, 3, 4).permute(2, 0, 1)
    assert ember.diff(x, n=0).stride() == (1, 12, 4)           # a clone: the input's layout
    assert ember.diff(x, append=x, dim=0).stride() == (6, 3, 1)   # a cat's: row-major
    assert ember.diff(x, append=x, dim=1).stride() == (9, 3, 1)
    t = ember.ones(4, 3).t()
    assert ember.diff(t, append=ember.ones(3, 2), dim=1).stride() == (5, 1)
    y = ember.ones(2, 3, 4, 5).to(memory_format=ember.channels_last)
    assert ember.diff(y, append=y, dim=1).stride() == (100, 1, 25, 5)
