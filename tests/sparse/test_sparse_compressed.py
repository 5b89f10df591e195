"""The compressed layouts CSC, BSR and BSC: parts against SciPy's csc/bsr matrices, round
trips through every layout, products and their gradients (gradcheck in float64), pickling,
in-place zeroing and the constructors' checks."""

import copy
import pickle

import numpy as np
import pytest
import scipy.sparse as sp

import ember
from ember.autograd import gradcheck

DENSE = np.array([[1.0, 0, 2, 0, 0, 0], [0, 0, 3, 4, 0, 0], [5, 6, 0, 0, 0, 8],
                  [0, 0, 0, 7, 0, 9]], dtype=np.float32)


def dense():
    return ember.tensor(DENSE)


def test_to_sparse_csc_holds_scipys_csc_parts():
    s = dense().to_sparse_csc()
    ref = sp.csc_matrix(DENSE)
    assert s.layout is ember.sparse_csc and s._nnz() == ref.nnz
    assert s.ccol_indices().tolist() == ref.indptr.tolist()
    assert s.row_indices().tolist() == ref.indices.tolist()
    assert s.values().tolist() == ref.data.tolist()


@pytest.mark.parametrize("blocksize", [(2, 2), (2, 3), (1, 2), (4, 1)])
def test_to_sparse_bsr_holds_scipys_bsr_parts(blocksize):
    s = dense().to_sparse_bsr(blocksize)
    ref = sp.bsr_matrix(DENSE, blocksize=blocksize)
    ref.eliminate_zeros()                       # scipy may keep all-zero blocks
    ref.sort_indices()
    assert s.crow_indices().tolist() == ref.indptr.tolist()
    assert s.col_indices().tolist() == ref.indices.tolist()
    np.testing.assert_array_equal(s.values().numpy(), ref.data)


def test_to_sparse_bsc_is_the_bsr_of_the_transpose_read_by_columns():
    s = dense().to_sparse_bsc((2, 3))
    ref = sp.bsr_matrix(DENSE.T, blocksize=(3, 2))
    assert s.ccol_indices().tolist() == ref.indptr.tolist()
    assert s.row_indices().tolist() == ref.indices.tolist()
    np.testing.assert_array_equal(s.values().numpy(), ref.data.transpose(0, 2, 1))


CONVERSIONS = [lambda x: x.to_sparse(), lambda x: x.to_sparse_csr(),
               lambda x: x.to_sparse_csc(), lambda x: x.to_sparse_bsr(2),
               lambda x: x.to_sparse_bsc((2, 3)),
               lambda x: x.to_sparse(layout=ember.sparse_bsr, blocksize=(1, 3))]


@pytest.mark.parametrize("first", range(len(CONVERSIONS)))
@pytest.mark.parametrize("second", range(len(CONVERSIONS)))
def test_every_round_trip_through_two_layouts_keeps_the_values(first, second):
    x = CONVERSIONS[first](dense())
    try:
        y = CONVERSIONS[second](x)
    except RuntimeError as e:                   # PyTorch's refusals: blocked to CSR/CSC, ...
        assert "is not supported" in str(e) or "expected SparseCsr or SparseCsc" in str(e)
        return
    np.testing.assert_array_equal(y.to_dense().numpy(), DENSE)


def test_transposes_swap_csr_and_csc_and_transpose_blocks():
    csr = dense().to_sparse_csr()
    csc = csr.t()
    assert csc.layout is ember.sparse_csc and csc.shape == (6, 4)
    assert csc.ccol_indices().data_ptr() == csr.crow_indices().data_ptr()   # the same arrays
    np.testing.assert_array_equal(csc.to_dense().numpy(), DENSE.T)
    assert csc.transpose(0, 1).layout is ember.sparse_csr
    bsc = dense().to_sparse_bsr((2, 3)).transpose(-1, 0)
    assert bsc.layout is ember.sparse_bsc and tuple(bsc.values().shape[1:]) == (3, 2)
    np.testing.assert_array_equal(bsc.to_dense().numpy(), DENSE.T)


@pytest.mark.parametrize("convert", CONVERSIONS[2:], ids=["csc", "bsr", "bsc", "bsr 1x3"])
def test_products_with_dense_operands_match_the_dense_product(convert):
    s = convert(dense())
    x = ember.tensor(np.arange(18, dtype=np.float32).reshape(6, 3))
    vec = ember.tensor([1.0, -1.0, 2.0, 0.5, 3.0, -2.0])
    left = ember.tensor(np.arange(8, dtype=np.float32).reshape(2, 4))
    if s.layout is not ember.sparse_bsc:        # (PyTorch has no BSC @ dense on the CPU)
        np.testing.assert_allclose((s @ x).numpy(), DENSE @ x.numpy())
        np.testing.assert_allclose(ember.addmm(ember.ones(4, 3), s, x, alpha=2).numpy(),
                                   1 + 2 * DENSE @ x.numpy())
        np.testing.assert_allclose(ember.mv(s, vec).numpy(), DENSE @ vec.numpy())
    if s.layout is not ember.sparse_bsr:        # (nor dense @ BSR)
        np.testing.assert_allclose((left @ s).numpy(), left.numpy() @ DENSE)


def test_products_torch_lacks_on_the_cpu_raise_its_errors():
    x = ember.ones(6, 3)
    with pytest.raises(RuntimeError, match="not implemented for Strided [+] SparseBsc @ Strided"):
        dense().to_sparse_bsc(2) @ x
    with pytest.raises(RuntimeError, match="operation not supported for mat with SparseBsc"):
        ember.mv(dense().to_sparse_bsc(2), ember.ones(6))
    with pytest.raises(RuntimeError, match="not implemented for Strided [+] Strided @ SparseBsr"):
        ember.ones(2, 4) @ dense().to_sparse_bsr(2)
    with pytest.raises(RuntimeError, match="non-block"):
        ember.mm(dense().to_sparse_bsr(2), dense().t().to_sparse_bsr(2))


@pytest.mark.parametrize("convert", CONVERSIONS[2:4], ids=["csc", "bsr"])
def test_products_are_differentiable_in_values_and_dense_operand(convert):
    base = ember.tensor(DENSE, dtype=ember.float64)

    def product(values, x):
        s = convert(base)
        return (s._with_values(values) @ x).sum(0)

    values = convert(base).values().clone().requires_grad_()
    x = ember.randn(6, 3, dtype=ember.float64, requires_grad=True)
    assert gradcheck(product, (values, x))


def test_a_csc_leaf_gets_the_dense_gradient_of_mm():
    s = dense().to_sparse_csc().requires_grad_()
    x = ember.ones(6, 2)
    (s @ x).sum().backward()
    assert s.grad.layout is ember.strided
    np.testing.assert_array_equal(s.grad.numpy(), np.full((4, 6), 2.0))


def test_to_dense_of_a_bsr_leaf_gives_a_bsr_gradient_with_its_indices():
    s = dense().to_sparse_bsr(2).requires_grad_()
    weights = np.arange(24.0, dtype=np.float32).reshape(4, 6)
    (s.to_dense() * ember.tensor(weights)).sum().backward()
    assert s.grad.layout is ember.sparse_bsr
    assert s.grad.col_indices().tolist() == s.col_indices().tolist()
    stored = np.kron(np.abs(DENSE).reshape(2, 2, 3, 2).sum((1, 3)) != 0, np.ones((2, 2)))
    np.testing.assert_array_equal(s.grad.to_dense().numpy(), weights * stored)


@pytest.mark.parametrize("convert", CONVERSIONS[2:], ids=["csc", "bsr", "bsc", "bsr 1x3"])
def test_pickle_and_deepcopy_keep_layout_blocks_and_values(convert):
    s = convert(dense())
    for twin in (pickle.loads(pickle.dumps(s)), copy.deepcopy(s)):
        assert twin.layout is s.layout and twin.values().shape == s.values().shape
        np.testing.assert_array_equal(twin.to_dense().numpy(), DENSE)


def test_zero_and_scalar_ops_keep_the_compressed_layout():
    s = dense().to_sparse_bsc(2)
    doubled = s * 2
    assert doubled.layout is ember.sparse_bsc
    np.testing.assert_array_equal(doubled.to_dense().numpy(), 2 * DENSE)
    assert s.to(ember.float64).layout is ember.sparse_bsc
    s.zero_()
    assert s._nnz() == 0 and s.ccol_indices().tolist() == [0, 0, 0, 0]
    assert not s.to_dense().numpy().any()
    empty = ember.zeros_like(dense().to_sparse_csc())
    assert empty.layout is ember.sparse_csc and empty.ccol_indices().tolist() == [0] * 7


def test_ops_written_for_coo_and_csr_refuse_the_other_layouts():
    with pytest.raises(NotImplementedError, match="aten::index_select"):
        dense().to_sparse_csc().index_select(0, ember.tensor([0]))
    with pytest.raises(RuntimeError, match="only compressed sparse format supported for "
                                           "sum.dim_IntList is CSR"):
        dense().to_sparse_bsr(2).sum(1)
    assert dense().to_sparse_bsr(2).sum().item() == DENSE.sum()


def test_copy_functions_copy_the_parts():
    s = dense().to_sparse_csc()
    ccol = ember.ccol_indices_copy(s)
    assert ccol.tolist() == s.ccol_indices().tolist() and ccol is not s.ccol_indices()
    assert ember.row_indices_copy(s).tolist() == s.row_indices().tolist()
    assert ember.values_copy(s).tolist() == s.values().tolist()
    r = s.t()
    assert ember.crow_indices_copy(r).tolist() == ccol.tolist()
    assert ember.col_indices_copy(r).tolist() == s.row_indices().tolist()


def test_constructors_infer_the_size_from_blocks_and_check_by_default():
    b = ember.sparse_bsc_tensor([0, 1, 2], [0, 1], ember.ones(2, 2, 3))
    assert b.shape == (4, 6) and b.dense_dim() == 0 and b.sparse_dim() == 2
    assert b.to_dense().sum().item() == 12.0
    with pytest.raises(RuntimeError, match=r"0 <= row_indices < nrows"):
        ember.sparse_csc_tensor([0, 1, 2], [0, 3], [1.0, 2.0], (2, 2))
    unchecked = ember.sparse_csc_tensor([0, 1, 2], [0, 3], [1.0, 2.0], (2, 2),
                                        check_invariants=False)
    assert unchecked._nnz() == 2
    with pytest.raises(RuntimeError, match=r"dense dimensionalities \(=1 \+ 2 \+ 0\)"):
        ember.sparse_csc_tensor([[0, 1]], [[0]], [[1.0]], (1, 1))     # a batch: 3-D


@pytest.mark.parametrize("convert", CONVERSIONS[2:4], ids=["csc", "bsr"])
def test_assert_close_compares_compressed_values_and_indices(convert):
    s = convert(dense())
    ember.testing.assert_close(s, s.clone())
    name = s.layout.name[len("sparse_"):].upper()
    with pytest.raises(AssertionError, match=f"^Sparse {name} values are not close!"):
        ember.testing.assert_close(s, s * 2)


def test_csc_select_and_dense_sum_read_the_right_elements():
    s = dense().to_sparse_csc()
    np.testing.assert_array_equal(s.select(1, 2).to_dense().numpy(), DENSE[:, 2])
    np.testing.assert_array_equal(s[2].to_dense().numpy(), DENSE[2])
    np.testing.assert_array_equal((s + ember.ones(4, 6)).numpy(), DENSE + 1)
    with pytest.raises(RuntimeError, match="^Sparse CSC tensors do not have is_contiguous$"):
        s.is_contiguous()
    with pytest.raises(RuntimeError, match="^Sparse BSR tensors do not have strides$"):
        dense().to_sparse_bsr(2).narrow_copy(0, 0, 2)
    like = ember.zeros_like(dense().to_sparse_bsr((2, 3)))
    assert like.layout is ember.sparse_bsr and tuple(like.values().shape) == (0, 2, 3)
    assert like.crow_indices().tolist() == [0, 0, 0]


def test_sums_and_products_of_csr_tensors_keep_the_layout_in_place_or_not():
    s = dense().to_sparse_csr()
    for result, expected in ((s + s, 2 * DENSE), (s + dense().to_sparse_csr(), 2 * DENSE),
                             (s * s, DENSE * DENSE), (s * dense(), DENSE * DENSE),
                             (dense() * s, DENSE * DENSE)):
        assert result.layout is ember.sparse_csr
        np.testing.assert_array_equal(result.to_dense().numpy(), expected)
    for method, expected in (("add_", 2 * DENSE), ("mul_", DENSE * DENSE)):
        t = dense().to_sparse_csr()
        assert getattr(t, method)(dense().to_sparse_csr()) is t and t.layout is ember.sparse_csr
        np.testing.assert_array_equal(t.to_dense().numpy(), expected)


@pytest.mark.parametrize("convert", CONVERSIONS[2:], ids=["csc", "bsr", "bsc", "bsr 1x3"])
def test_other_layouts_add_only_to_themselves_and_multiply_by_scalars(convert):
    s = convert(dense())
    block = s.values().shape[1:]
    for result, expected in ((s + s, 2 * DENSE), (s * 3, 3 * DENSE)):
        assert result.layout is s.layout and result.values().shape[1:] == block
        np.testing.assert_array_equal(result.to_dense().numpy(), expected)
    # as in PyTorch: no kernels for these (a tensor added to itself is doubled instead)
    for refused in (lambda: s + convert(dense()), lambda: s * s, lambda: s - s,
                    lambda: s / 2, lambda: s.clone().add_(s), lambda: s.clone().mul_(s)):
        with pytest.raises(RuntimeError):
            refused()


def test_fill_keeps_the_compressed_pattern_and_zero_drops_it():
    s = dense().to_sparse_bsr(2)
    assert s.fill_(0) is s and s._nnz() == 5 and s.crow_indices().tolist() == [0, 2, 5]
    assert s.values().shape == (5, 2, 2) and not s.values().any()
    batched = ember.stack([dense(), 2 * dense()]).to_sparse_csr()
    assert batched.fill_(3)._nnz() == 9 and batched.values().unique().tolist() == [3.0]
    assert ember.zero_(batched) is batched and batched._nnz() == 0
    assert batched.crow_indices().tolist() == [[0] * 5] * 2
    assert batched.col_indices().shape == batched.values().shape == (2, 0)


def test_fill_refuses_coo_tensors_and_tensor_values_as_pytorch():
    with pytest.raises(NotImplementedError, match=r"aten::fill_\.Scalar' .* 'SparseCPU'"):
        dense().to_sparse().fill_(0)
    with pytest.raises(NotImplementedError, match=r"aten::fill_\.Tensor' .* 'SparseCsrCPU'"):
        dense().to_sparse_csc().fill_(ember.tensor(1.0))
