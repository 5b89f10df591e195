"""Round 36: sparse layouts' conversions and products, as a differential fuzzer against
PyTorch found them (tests/parity/test_parity_sparse_ops_fuzz_round36.py); PyTorch's results
and errors written out."""

import pytest

import ember as torch


def _coo_dup():
    i = torch.tensor([[1, 0, 1], [0, 1, 0]])
    return torch.sparse_coo_tensor(i, torch.tensor([1., 2., 3.]), (2, 2))


def test_floor_division_of_uncoalesced_coo_rounds_the_sums():
    # floor(1/2) + floor(3/2) = 1, floor((1 + 3)/2) = 2: duplicates are summed first
    r = _coo_dup().div(2, rounding_mode="floor")
    assert r.to_dense().tolist() == [[0.0, 1.0], [2.0, 0.0]]
    assert r.is_coalesced() and r._nnz() == 2
    r = (-_coo_dup()).div(2, rounding_mode="floor")
    assert r.to_dense().tolist() == [[0.0, -1.0], [-2.0, 0.0]]
    assert not (_coo_dup() / 2).is_coalesced()


def test_sparse_sum_over_dense_dims_coalesces():
    i = torch.tensor([[0, 1, 0]])
    s = torch.sparse_coo_tensor(i, torch.ones(3, 1, 2), (2, 1, 2))
    r = torch.sparse.sum(s, 2)
    assert r.is_coalesced() and r._nnz() == 2
    assert r._indices().tolist() == [[0, 1]]
    assert r.to_dense().tolist() == [[4.0], [2.0]]


@pytest.mark.parametrize("layout", ["coo", "csr", "csc", "bsr"])
@pytest.mark.parametrize("dtype", ["bool", "int64", "float32", "complex64"])
def test_products_refuse_dtypes_without_kernels(layout, dtype):
    dt = getattr(torch, dtype)
    d = torch.ones(2, 2, dtype=dt)
    s = d.to_sparse() if layout == "coo" else d.to_sparse(
        layout=getattr(torch, "sparse_" + layout), blocksize=(1, 1) if layout == "bsr" else None)
    refused = dtype == "bool" or (layout != "coo" and dtype == "int64")
    kernel = "addmm_sparse_dense" if layout == "coo" else "addmm_out_sparse_csr_impl_mkl"
    name = {"bool": "Bool", "int64": "Long"}.get(dtype)
    for f, value in ((lambda: torch.mm(s, d), 2), (lambda: s @ d, 2),
                     (lambda: torch.sparse.mm(s, d), 2), (lambda: torch.addmm(d, s, d), 3),
                     (lambda: torch.sparse.addmm(d, s, d), 3)):
        if refused:
            with pytest.raises(NotImplementedError, match=f'"{kernel}" not implemented for '
                                                          f"'{name}'"):
                f()
        else:
            assert f().tolist() == torch.full((2, 2), value, dtype=dt).tolist()
    if refused:
        kernel = "addmm_sparse_dense" if layout == "coo" else "addmv_out_sparse_csr_impl_mkl"
        with pytest.raises(NotImplementedError, match=kernel):
            torch.mv(s, d[0])


def test_products_of_matrices_storing_nothing_run_in_any_dtype():
    for s in (torch.zeros(4, 2, dtype=torch.bool).to_sparse(),
              torch.zeros(4, 2, dtype=torch.int64).to_sparse_csr()):
        assert torch.mm(s, torch.ones(2, 3, dtype=s.dtype)).tolist() == [[0] * 3] * 4
    with pytest.raises(NotImplementedError, match='"sparse_matmul" not implemented for'):
        s = torch.zeros(2, 2, dtype=torch.bool).to_sparse()
        torch.mm(s, s)


def test_product_shape_errors():
    s3 = torch.ones(2, 2, 4).to_sparse()
    with pytest.raises(RuntimeError, match="^addmm: matrices expected, got 3D tensor$"):
        torch.mm(s3, torch.ones(4, 2))
    with pytest.raises(RuntimeError, match=r"expanded size of the tensor \(3\) must match the "
                                           r"existing size \(4\)"):
        torch.mm(torch.ones(3, 4, 4).to_sparse(), torch.ones(4, 2))
    with pytest.raises(RuntimeError, match="^addmm: matrices expected, got 1D tensor$"):
        torch.mm(torch.ones(3, 2).to_sparse(1), torch.ones(2, 2))
    with pytest.raises(RuntimeError, match="^addmm: scalar values expected, got 1D values$"):
        torch.addmm(torch.ones(4, 2), torch.ones(4, 4, 2).to_sparse(2), torch.ones(4, 2))
    with pytest.raises(RuntimeError, match="^reshape is not implemented for sparse tensors$"):
        s3 @ torch.ones(4, 2)
    with pytest.raises(RuntimeError, match="^expand is unsupported for Sparse tensors$"):
        torch.ones(2, 3, 4).to_sparse() @ torch.ones(2, 4, 2)
    b = torch.ones(2, 2, 4).to_sparse_csc()
    with pytest.raises(RuntimeError, match="^Sparse CSC tensors do not have strides$"):
        b @ torch.ones(4, 2)
    with pytest.raises(RuntimeError, match="^mat1 must be a matrix, got 3-D tensor$"):
        torch.sparse.mm(b, torch.ones(4,))
    with pytest.raises(IndexError, match="but got 1"):
        torch.mm(b, torch.ones(4,))
    with pytest.raises(IndexError, match="but got -2"):
        torch.mm(torch.ones(4).to_sparse(), torch.ones(4, 2))
    with pytest.raises(NotImplementedError, match="aten::dot' with arguments from the "
                                                  "'SparseCPU' backend"):
        torch.ones(4).to_sparse() @ torch.ones(4)


def test_sparse_addmm_of_dense_matrices_is_addmm():
    a = torch.ones(2, 3, dtype=torch.float64)
    r = torch.sparse.addmm(torch.ones(2, 2, dtype=torch.float64), a, a.t())
    assert r.layout == torch.strided and r.tolist() == [[4.0, 4.0], [4.0, 4.0]]


CONVERSIONS = [
    (lambda: torch.ones(3).to_sparse_csr(0), RuntimeError,
     r"dense_to_sparse_csr: dense_dim argument must be in \[0,-1\] range, but 0 is given"),
    (lambda: torch.ones(3).to_sparse_csr(), IndexError,
     r"select\(\): index 1 out of range for tensor of size \[3, 1\] at dimension 1"),
    (lambda: torch.tensor([0, 2, 0, 0]).to_sparse(layout=torch.sparse_csr), IndexError,
     r"tensor of size \[1, 1\] at dimension 1"),
    (lambda: torch.ones(4, 3, 3).to_sparse(2).to_sparse_bsr((2, 2)), RuntimeError,
     r"^coo_to_sparse_bsr: tensor sparse size \(4,3\) must be divisible"),
    (lambda: torch.ones(3).to_sparse_csc(), IndexError,
     r"expected to be in range of \[-1, 0\], but got 1\)"),
    (lambda: torch.ones(3).to_sparse_bsr((1, 1)), IndexError,
     r"expected to be in range of \[-1, 0\], but got -2\)"),
    (lambda: torch.tensor(1.).to_sparse_bsc((1, 1)), IndexError,
     "Dimension specified as -2 but tensor has no dimensions"),
    (lambda: torch.ones(3, 4).to_sparse(layout=torch.sparse_bsr, blocksize=(2, 1)),
     RuntimeError, r"^dense_to_sparse: tensor sparse size \(3,4\) must be divisible"),
    (lambda: torch.ones(3, 4).to_sparse_bsr((2, 1)), RuntimeError,
     r"^dense_to_sparse_bsr: tensor sparse size \(3,4\)"),
    (lambda: torch.ones(3, 4).to_sparse(layout=torch.sparse_csr, dense_dim=1), RuntimeError,
     r"^dense_to_sparse: dense_dim argument must be in \[0,0\] range, but 1 is given"),
    (lambda: torch.ones(3, 2).to_sparse().to_sparse_csr(0), RuntimeError,
     "^coo_to_sparse_csr: conversion from Sparse to SparseCsr with dense_dim argument given"),
    (lambda: torch.ones(3, 2).to_sparse().to_sparse_bsr((2, 2), 0), RuntimeError,
     r"^coo_to_sparse_bsr: tensor sparse size \(3,2\) must be divisible"),
    (lambda: torch.ones(3, 2).to_sparse_csr().to_sparse_csc(0), RuntimeError,
     "^sparse_compressed_to_sparse_csc: conversion from SparseCsr to SparseCsc with dense_dim"),
    (lambda: torch.ones(3, 2).to_sparse_csr().to_sparse_csr(0), RuntimeError,
     "^to_sparse_csr: conversion from SparseCsr to SparseCsr with dense_dim"),
    (lambda: torch.ones(3, 2).to_sparse_csr().to_sparse(dense_dim=0), RuntimeError,
     "^sparse_compressed_to_sparse: conversion from SparseCsr to Sparse with dense_dim"),
    (lambda: torch.ones(3, 2).to_sparse().to_sparse(dense_dim=1), RuntimeError,
     "^to_sparse: conversion from Sparse to Sparse with dense_dim"),
    (lambda: torch.ones(3).to_sparse().to_sparse_csc(0), RuntimeError,
     r"^coo_to_sparse_csc: conversion from Sparse to SparseCsc for input tensors with "
     r"sparse_dim\(\)!=2"),
    (lambda: torch.ones(3, 4).to_sparse(1).to_sparse(layout=torch.sparse_csc, dense_dim=0),
     RuntimeError, r"^sparse_coo_to_sparse: conversion from Sparse to SparseCsc for input "
                   r"tensors with sparse_dim\(\)!=2"),
    (lambda: torch.ones(3, 3, 4).to_sparse(2).to_sparse(layout=torch.sparse_bsr,
                                                        blocksize=(2, 1)),
     RuntimeError, r"tensor sparse size \(3,3\) must be divisible"),
    (lambda: torch.ones(2, 4, 4).to_sparse_csr().to_sparse(layout=torch.sparse_bsr,
                                                           blocksize=(2, 2)),
     RuntimeError, "^sparse_compressed_to_sparse: conversion from SparseCsr to SparseBsr for "
                   "batched inputs"),
]


@pytest.mark.parametrize("k", range(len(CONVERSIONS)))
def test_conversion_errors(k):
    f, error, message = CONVERSIONS[k]
    with pytest.raises(error, match=message):
        f()


def test_softmax_refusals():
    with pytest.raises(NotImplementedError, match="aten::_sparse_softmax' with arguments from "
                                                  "the 'CPU' backend"):
        torch.sparse.softmax(torch.ones(2, 2), 0)
    with pytest.raises(NotImplementedError, match="\"log_softmax\" not implemented for "
                                                  "'ComplexFloat'"):
        torch.sparse.log_softmax(torch.ones(2, 2, dtype=torch.complex64).to_sparse(), 0)
    r = torch.sparse.softmax(torch.ones(0, 2, dtype=torch.bool).to_sparse(), 0)
    assert r.dtype == torch.bool and r.shape == (0, 2) and r.is_coalesced() and r._nnz() == 0


def test_sparse_sum_and_mask_of_dense_tensors():
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times"):
        torch.sparse.sum(torch.ones(2, 2), (0, 0))
    with pytest.raises(NotImplementedError, match="aten::_indices' with arguments from the "
                                                  "'CPU' backend"):
        torch.sparse.sum(torch.ones(2, 2), 0)
    with pytest.raises(NotImplementedError, match="aten::sparse_mask' with arguments from the "
                                                  "'CPU' backend"):
        torch.ones(2, 2).sparse_mask(torch.ones(2, 2))
    with pytest.raises(RuntimeError, match="keepdim=False is unsupported"):
        torch.ones(2, 3, 2).to_sparse_csr().sum(0)
