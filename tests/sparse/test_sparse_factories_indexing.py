"""zeros_like of sparse tensors, CSR + dense, sparse.sampled_addmm and sparse indexing, checked
against values worked out by hand (tests/parity/test_parity_sparse_more.py checks torch)."""

import numpy as np
import pytest

import ember

DENSE = [[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]]


def test_zeros_like_of_a_coo_tensor_is_an_empty_coo_tensor():
    z = ember.zeros_like(ember.tensor(DENSE).to_sparse(), dtype=ember.int64)
    assert (z.layout, tuple(z.shape), z.dtype, z._nnz()) == (ember.sparse_coo, (2, 3),
                                                            ember.int64, 0)
    assert np.array_equal(z.to_dense().numpy(), np.zeros((2, 3)))


def test_empty_like_of_a_csr_tensor_is_an_empty_csr_tensor():
    z = ember.empty_like(ember.tensor(DENSE).to_sparse_csr())
    assert z.layout is ember.sparse_csr
    assert z.crow_indices().tolist() == [0, 0, 0] and z._nnz() == 0


def test_csr_plus_dense_adds_alpha_times_the_dense_operand():
    s = ember.tensor(DENSE).to_sparse_csr()
    out = ember.add(s, ember.ones(2, 3), alpha=2)
    assert out.layout is ember.strided
    assert out.tolist() == [[2.0, 3.0, 2.0], [4.0, 2.0, 5.0]]


def test_sampled_addmm_computes_the_product_only_at_stored_elements():
    c = ember.sparse_csr_tensor([0, 1, 2], [1, 0], [10.0, 20.0], (2, 2))
    m1 = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    m2 = ember.tensor([[1.0, 0.0], [0.0, 1.0]])
    out = ember.sparse.sampled_addmm(c, m1, m2, beta=0.5, alpha=2.0)
    assert out.layout is ember.sparse_csr
    assert out.col_indices().tolist() == [1, 0]
    assert out.values().tolist() == [0.5 * 10 + 2 * 2.0, 0.5 * 20 + 2 * 3.0]


def test_sampled_addmm_rejects_a_coo_input():
    with pytest.raises(NotImplementedError, match="sparse_sampled_addmm"):
        ember.sparse.sampled_addmm(ember.tensor(DENSE).to_sparse(), ember.ones(2, 2),
                                   ember.ones(2, 3))


def test_indexing_selects_along_every_dim():
    s = ember.tensor(DENSE).to_sparse()
    assert s[:, 2].to_dense().tolist() == [0.0, 3.0]
    assert s[..., 0].to_dense().tolist() == [0.0, 2.0]
    assert s[1, 2].item() == 3.0
    assert tuple(s[None, :, 1, None].shape) == (1, 2, 1)


def test_indexing_past_the_end_names_the_dim():
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 1 with size 3"):
        ember.tensor(DENSE).to_sparse()[0, 3]


def test_sum_keepdim_keeps_the_summed_dim_with_size_one():
    out = ember.tensor(DENSE).to_sparse().sum(1, keepdim=True)
    assert out.is_sparse and out.to_dense().tolist() == [[1.0], [5.0]]


def test_cat_along_a_sparse_dim_offsets_the_indices():
    s = ember.tensor(DENSE).to_sparse()
    out = ember.cat([s, s * 2], 1)
    assert out.is_sparse and tuple(out.shape) == (2, 6)
    assert out.to_dense().tolist() == [[0.0, 1.0, 0.0, 0.0, 2.0, 0.0],
                                       [2.0, 0.0, 3.0, 4.0, 0.0, 6.0]]


def test_cat_gradient_reaches_the_values():
    v = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    s = ember.sparse_coo_tensor([[0, 1, 1], [1, 0, 2]], v, (2, 3))
    (ember.cat([s, s * 2], 1).to_dense() * ember.arange(12.0).reshape(2, 6)).sum().backward()
    assert v.grad.tolist() == [1.0 + 2 * 4.0, 6.0 + 2 * 9.0, 8.0 + 2 * 11.0]


def test_floor_divide_coalesces_first():
    s = ember.sparse_coo_tensor([[0, 0]], [1.0, 1.0], (2,))
    assert (s // 2).to_dense().tolist() == [1.0, 0.0]


def test_numpy_integers_index_and_out_is_refused_by_joins():
    s = ember.tensor([[0.0, 1.0], [2.0, 0.0]]).to_sparse()
    assert s[np.int64(1)].to_dense().tolist() == [2.0, 0.0]
    for join in (ember.cat, ember.stack):
        with pytest.raises(NotImplementedError, match="SparseCPU"):
            join([s, s], 0, out=ember.empty(0))
