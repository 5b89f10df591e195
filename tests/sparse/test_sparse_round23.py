"""sspaddmm, smm and hspmm values (against NumPy) and their refused backward; sparse
new_zeros, compressed unbind, compressed-to-COO coalesced flags, sum()'s dense gradient, the
refused backwards of COO sum(dim)/index_select/select, and a CSR leaf's gradient indices."""

import numpy as np
import pytest

import ember

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

_INDICES = [[0, 1, 1], [2, 0, 2]]
_VALUES = [3., 4., 5.]


def _coo(requires_grad=False):
    return ember.sparse_coo_tensor(_INDICES, _VALUES, (2, 3), requires_grad=requires_grad)


def _dense_of_coo():
    out = np.zeros((2, 3))
    for (r, c), v in zip(zip(*_INDICES), _VALUES):
        out[r, c] += v
    return out


def test_sspaddmm_keeps_the_scaled_input_then_the_stored_rows_of_the_product():
    inp = ember.sparse_coo_tensor([[1, 0], [1, 0]], [1., 2.], (2, 2))
    d = np.arange(6.).reshape(3, 2)
    out = ember.sspaddmm(inp, _coo(), ember.tensor(d, dtype=ember.float32), beta=2, alpha=3)
    assert not out.is_coalesced()
    assert out._indices().tolist() == [[1, 0, 0, 0, 1, 1], [1, 0, 0, 1, 0, 1]]
    product = 3 * (_dense_of_coo() @ d)
    np.testing.assert_allclose(out._values().numpy(), [2., 4.] + product.reshape(-1).tolist())
    expected = product + 2 * np.array([[2., 0.], [0., 1.]])
    np.testing.assert_allclose(out.to_dense().numpy(), expected)


def test_smm_and_hspmm_hold_the_stored_rows():
    d = ember.arange(6.).reshape(3, 2)
    expected = _dense_of_coo() @ d.numpy()
    np.testing.assert_allclose(ember.smm(_coo(), d).to_dense().numpy(), expected)
    hybrid = ember.hspmm(_coo(), d)
    assert hybrid._indices().tolist() == [[0, 1]] and hybrid.dense_dim() == 1
    np.testing.assert_allclose(hybrid.to_dense().numpy(), expected)


def test_sspaddmm_refuses_backward():
    out = ember.sspaddmm(ember.sparse_coo_tensor([[0], [0]], [1.], (2, 2)), _coo(True),
                         ember.ones(3, 2))
    assert type(out.grad_fn).__name__ == "NotImplemented"
    with pytest.raises(RuntimeError, match="derivative for aten::sspaddmm is not implemented"):
        out.to_dense().sum().backward()


def test_hybrid_product_checks_name_the_argument():
    with pytest.raises(RuntimeError, match="sspaddmm: expected 'mat2' to have strided layout"):
        ember.smm(_coo(), _coo().t())
    with pytest.raises(RuntimeError, match="hspmm: Argument #2: scalar values expected"):
        ember.hspmm(ember.sparse_coo_tensor([[0], [1]], ember.ones(1, 2), (2, 3, 2)),
                    ember.ones(3, 2))


def test_new_zeros_keeps_the_sparse_layout_with_batches():
    csr = ember.tensor([[0., 1.], [2., 0.]]).to_sparse_csr()
    out = csr.new_zeros((2, 2, 3))
    assert out.layout is ember.sparse_csr and out.shape == (2, 2, 3)
    assert out.crow_indices().tolist() == [[0, 0, 0], [0, 0, 0]]
    assert out.to_dense().abs().sum().item() == 0
    assert _coo().new_zeros(4).layout is ember.sparse_coo


def test_unbind_of_a_csr_matrix_gives_coo_rows():
    x = np.array([[0., 1., 0.], [2., 0., 3.]])
    rows = ember.tensor(x).to_sparse_csr().unbind()
    assert [r.layout for r in rows] == [ember.sparse_coo] * 2
    np.testing.assert_allclose(np.stack([r.to_dense().numpy() for r in rows]), x)
    assert all(r.is_coalesced() for r in ember.tensor(x).to_sparse_csc().unbind(1))


@pytest.mark.parametrize("block, coalesced", [((1, 2), True), ((2, 1), False), ((2, 2), False)])
def test_bsr_to_coo_is_coalesced_in_row_order_only(block, coalesced):
    x = ember.tensor([[1., 2., 0., 0.], [3., 4., 0., 5.]])
    assert x.to_sparse_bsr(block).to_sparse().is_coalesced() is coalesced
    assert ember.zeros(2, 2).to_sparse_csc().to_sparse().is_coalesced() is False


def test_whole_sum_of_a_sparse_leaf_gives_ones_everywhere():
    s = ember.tensor([[0., 1.], [2., 0.]]).to_sparse_csr().requires_grad_()
    (s.sum() * 3).backward()
    assert s.grad.layout is ember.strided
    np.testing.assert_allclose(s.grad.numpy(), np.full((2, 2), 3.))


@pytest.mark.parametrize("make, error", [
    (lambda s: s.sum(1), RuntimeError),
    (lambda s: s.index_select(0, ember.tensor([1])), NotImplementedError),
    (lambda s: s[0], NotImplementedError)])
def test_coo_backwards_torch_refuses(make, error):
    out = make(_coo(True))
    with pytest.raises(error):
        ember.sparse.sum(out).backward()


def test_csr_leaf_gradient_through_values_keeps_int32_indices():
    c = ember.sparse_csr_tensor(ember.tensor([0, 1, 2], dtype=ember.int32),
                                ember.tensor([1, 0], dtype=ember.int32), [1., 2.],
                                requires_grad=True)
    c.values().sum().backward()
    assert c.grad.crow_indices().dtype is ember.int32
    c.grad = None
    c.to_dense().sum().backward()
    assert c.grad.crow_indices().dtype is ember.int64
    np.testing.assert_allclose(c.grad.values().numpy(), [1., 1.])


def test_size_none_is_a_type_error():
    with pytest.raises(TypeError, match=r"got \(list, list, list, size=NoneType\), but"):
        ember.sparse_csr_tensor([0, 1], [0], [1.], size=None)
    assert ember.sparse_csr_tensor([0, 1], [0], [1.]).shape == (1, 1)    # no size: inferred


def test_blocked_select_needs_evenly_spaced_values():
    x = ember.arange(16.).reshape(4, 4)
    row = x.to_sparse_bsr((2, 1)).select(0, 1)        # one value of each 2x1 block
    np.testing.assert_allclose(row.to_dense().numpy(), x[1].numpy())
    with pytest.raises(RuntimeError, match="no view exists"):
        x.to_sparse_bsr((2, 1)).select(1, 1)       # two values of each block, blocks apart


def test_compressed_tensors_refuse_partial_slices():
    csr = ember.eye(2).to_sparse_csr()
    with pytest.raises(RuntimeError, match="Sparse CSR tensors do not have strides"):
        csr[0:1]
    with pytest.raises(NotImplementedError, match="aten::as_strided"):
        csr.to_sparse()[0:1]


def test_in_place_ops_keep_each_index_dtype():
    m = ember.sparse_csr_tensor(ember.tensor([0, 1, 3], dtype=ember.int32),
                                ember.tensor([1, 0, 1]), [1., 2., 3.], (2, 2),
                                check_invariants=False)
    m.resize_(3, 2)
    assert (m.crow_indices().dtype, m.col_indices().dtype) == (ember.int32, ember.int64)
    assert m.crow_indices().tolist() == [0, 1, 3, 3]
    with pytest.raises(RuntimeError, match="expected scalar type Int but found Long"):
        m.to_sparse_bsr(1)
