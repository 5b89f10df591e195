"""Sparse COO shape ops that pick elements (index_select, narrow_copy, unsqueeze), the
size-only constructor, legacy type names, node names and saving: values as PyTorch gives
them (expected numbers written out)."""

import io

import pytest

import ember


def uncoalesced():
    return ember.sparse_coo_tensor([[1, 0, 1, 0], [0, 2, 0, 1]], [1.0, 2.0, 3.0, 4.0], (2, 3))


def hybrid():
    return ember.sparse_coo_tensor([[2, 0, 2]], ember.arange(6.0).reshape(3, 2), (4, 2))


def test_size_only_constructor_makes_an_empty_tensor():
    for s in (ember.sparse_coo_tensor((2, 3)), ember.sparse_coo_tensor(size=[2, 3])):
        assert s.shape == (2, 3) and s._nnz() == 0 and s.is_coalesced()
        assert s._indices().shape == (2, 0) and s.dtype is ember.float32
    s = ember.sparse_coo_tensor([2, 3], dtype=ember.float64, requires_grad=True)
    assert s.dtype is ember.float64 and s.requires_grad
    assert s.to_dense().tolist() == [[0.0] * 3] * 2


def test_index_select_along_a_sparse_dim_keeps_index_order_then_stored_order():
    s = uncoalesced()
    out = s.index_select(1, ember.tensor([0, 0, 1]))
    assert out._indices().tolist() == [[1, 1, 1, 1, 0], [0, 0, 1, 1, 2]]
    assert out._values().tolist() == [1.0, 3.0, 1.0, 3.0, 4.0]
    assert out.shape == (2, 3) and not out.is_coalesced()
    rows = ember.index_select(s, 0, ember.tensor([1, -1, 0]))
    assert rows.to_dense().tolist() == [[4.0, 0.0, 0.0], [4.0, 0.0, 0.0], [0.0, 4.0, 2.0]]


def test_index_select_along_a_dense_dim_and_errors():
    out = hybrid().index_select(1, ember.tensor([1, 1, 0]))
    assert out.shape == (4, 3)
    assert out._values().tolist() == [[1.0, 1.0, 0.0], [3.0, 3.0, 2.0], [5.0, 5.0, 4.0]]
    with pytest.raises(IndexError, match=r"index contains 7 that is out of range for tensor "
                                         r"of size \[2, 3\] at dimension 0"):
        uncoalesced().index_select(0, ember.tensor([7]))
    with pytest.raises(IndexError, match="must be 1-D strided"):
        uncoalesced().index_select(0, ember.tensor([[0]]))


def test_index_select_backward_is_refused_as_in_pytorch():
    v = ember.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    s = ember.sparse_coo_tensor([[1, 0, 1, 0], [0, 2, 0, 1]], v, (2, 3))
    out = s.index_select(1, ember.tensor([0, 2, 0]))
    assert out.to_dense().tolist() == [[0.0, 2.0, 0.0], [4.0, 0.0, 4.0]]
    with pytest.raises(NotImplementedError, match="aten::index_add_"):
        out.to_dense().sum().backward()         # PyTorch has no sparse index_add_


def test_narrow_copy():
    s = uncoalesced()
    out = s.narrow_copy(1, 0, 2)
    assert out._indices().tolist() == [[1, 1, 0], [0, 0, 1]]
    assert out._values().tolist() == [1.0, 3.0, 4.0] and out.shape == (2, 2)
    one = ember.narrow_copy(s, 1, 1, 1)        # one element left: still marked uncoalesced
    assert one._nnz() == 1 and not one.is_coalesced()
    assert hybrid().narrow_copy(1, 1, 1).to_dense().tolist() == [[3.0], [0.0], [6.0], [0.0]]
    with pytest.raises(RuntimeError, match=r"must be a subset of range\(0, 3\)"):
        s.narrow_copy(1, 1, 5)
    with pytest.raises(RuntimeError, match="do not have strides"):
        s.to_sparse_csr().narrow_copy(0, 0, 1)
    dense = ember.arange(6.0).reshape(2, 3)
    assert ember.narrow_copy(dense, 1, 1, 2).tolist() == [[1.0, 2.0], [4.0, 5.0]]


def test_unsqueeze():
    s = ember.tensor([[0.0, 1.0, 2.0], [3.0, 0.0, 0.0]]).to_sparse()
    last = s.unsqueeze(-1)
    assert last.shape == (2, 3, 1) and last.sparse_dim() == 3
    assert last._indices().tolist() == [[0, 0, 1], [1, 2, 0], [0, 0, 0]]
    assert s.unsqueeze(1).to_dense().tolist() == [[[0.0, 1.0, 2.0]], [[3.0, 0.0, 0.0]]]
    assert hybrid().unsqueeze(2).shape == (4, 2, 1) and hybrid().unsqueeze(2).sparse_dim() == 1


def test_view_raises_pytorchs_error():
    with pytest.raises(NotImplementedError, match="Could not run 'aten::view'"):
        uncoalesced().view(6)


def test_legacy_type_names():
    assert uncoalesced().type() == "ember.sparse.FloatTensor"
    assert uncoalesced().double().type() == "ember.sparse.DoubleTensor"
    assert uncoalesced().type(ember.float64).dtype is ember.float64
    with pytest.raises(RuntimeError, match="Unimplemented backend SparseCsrCPU"):
        ember.eye(2).to_sparse_csr().type()


def test_sparse_product_node_name():
    x = ember.ones(3, 2, requires_grad=True)
    assert type(ember.sparse.mm(uncoalesced(), x).grad_fn).__name__ == \
        "SparseAddmmBackward0"


def test_saved_sparse_leaf_loads_without_requires_grad():
    s = ember.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2), requires_grad=True)
    buf = io.BytesIO()
    ember.save({"coo": s, "csr": s.detach().to_sparse_csr().requires_grad_()}, buf)
    buf.seek(0)
    loaded = ember.load(buf)
    for t in loaded.values():
        assert not t.requires_grad and t.grad_fn is None and t.is_leaf
    assert loaded["coo"].to_dense().tolist() == [[0.0, 1.0], [2.0, 0.0]]
    assert "grad_fn" not in repr(loaded["coo"])
