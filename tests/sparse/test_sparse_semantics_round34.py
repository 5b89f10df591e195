"""Sparse semantics of round 34 (torch-free): unary in-place ops write into the values the
constructor was given (and refuse an uncoalesced COO tensor), in-place products' and
selections' coalesced flags, leaf gradients' flags, pickling keeps the flag, conversions'
errors from sparse sources, legacy sparse types, jagged detach_/in-place dropout."""

import copy
import pickle
import warnings

import pytest

import ember


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _coo(values, coalesced=True):
    indices = [[0, 1, 2], [0, 1, 2]] if coalesced else [[0, 0, 1], [0, 0, 1]]
    s = ember.sparse_coo_tensor(ember.tensor(indices), values, (3, 3))
    return s._coalesced_(True) if coalesced else s


def test_unary_in_place_writes_the_given_values():
    v = ember.tensor([1.0, -4.0, 9.0])
    s = _coo(v)
    assert s.abs_() is s
    assert v.tolist() == [1.0, 4.0, 9.0] and s.is_coalesced()
    s.sqrt_()
    assert v.tolist() == [1.0, 2.0, 3.0]
    assert s._values().tolist() == [1.0, 2.0, 3.0]
    held = s._values()              # a values() taken before sees the change too
    s.neg_()
    assert held.tolist() == [-1.0, -2.0, -3.0]


def test_unary_in_place_of_uncoalesced_coo():
    v = ember.tensor([1.0, -4.0, 9.0])
    s = _coo(v, coalesced=False)
    with pytest.raises(RuntimeError, match=r"^abs_ requires coalesced input$"):
        s.abs_()
    assert v.tolist() == [1.0, -4.0, 9.0]
    s.neg_()                        # (linear: any pattern)
    assert v.tolist() == [-1.0, 4.0, -9.0] and not s.is_coalesced()
    with pytest.raises(NotImplementedError, match="aten::pow_.Scalar"):
        _coo(ember.tensor([1.0, 2.0, 3.0])).square_()


def test_compressed_unary_in_place_writes_the_given_values():
    v = ember.tensor([1.0, -4.0, 9.0])
    s = ember.sparse_csr_tensor(ember.tensor([0, 1, 2, 3]), ember.tensor([0, 1, 2]), v, (3, 3))
    s.abs_()
    assert v.tolist() == [1.0, 4.0, 9.0]
    with pytest.raises(RuntimeError, match="unsupported tensor layout: SparseCsr"):
        s.div_(2)
    with pytest.raises(NotImplementedError, match="aten::_coalesced_"):
        s._coalesced_(True)


def test_in_place_products_mark_coo_uncoalesced():
    s = _coo(ember.tensor([1.0, 2.0, 3.0]))
    s.mul_(2)
    assert not s.is_coalesced() and s._values().tolist() == [2.0, 4.0, 6.0]
    s = _coo(ember.tensor([1.0, 2.0, 3.0]))
    s.mul_(ember.full((3, 3), 2.0))
    assert not s.is_coalesced() and s.to_dense().diagonal().tolist() == [2.0, 4.0, 6.0]
    s = _coo(ember.tensor([1.0, 2.0, 3.0]))
    s.mul_(_coo(ember.tensor([1.0, 2.0, 3.0])))
    assert s.is_coalesced() and s.to_dense().diagonal().tolist() == [1.0, 4.0, 9.0]
    s = _coo(ember.tensor([1.0, 2.0, 3.0]))
    s.div_(2)
    assert s.is_coalesced()
    dup = ember.sparse_coo_tensor([[0, 0, 1]], [1.0, 2.0, 3.0], (3,))
    product = dup * dup
    assert not product.is_coalesced() and product.to_dense().tolist() == [9.0, 9.0, 0.0]


def test_select_of_coo_is_uncoalesced():
    i = ember.tensor([[0, 1, 2, 2], [0, 1, 0, 2], [1, 0, 1, 1]])
    s = ember.sparse_coo_tensor(i, ember.tensor([1.0, -4.0, 9.0, 2.0]), (3, 3, 2)).coalesce()
    assert not s.select(0, 2).is_coalesced() and s.select(0, 2)._nnz() == 2
    assert s.select(0, 0).is_coalesced()            # (one element)
    assert not s.select(2, 1).is_coalesced()
    assert s.select(2, 1).to_dense().tolist() == s.to_dense()[..., 1].tolist()


def test_leaf_gradient_flags():
    def leaf():
        i = ember.tensor([[0, 1, 2, 2], [0, 1, 0, 2]])
        s = ember.sparse_coo_tensor(i, ember.tensor([1.0, -4.0, 9.0, 2.0]), (3, 3))
        return s.coalesce().requires_grad_()
    w = ember.arange(9.0).reshape(3, 3)
    s = leaf()
    ember.sparse.mm(s, w).sum().backward()
    assert not s.grad.is_coalesced()
    assert s.grad._values().tolist() == [3.0, 12.0, 3.0, 21.0]
    s = leaf()
    s.to_dense().sum().backward()
    assert not s.grad.is_coalesced() and s.grad._values().tolist() == [1.0] * 4
    s = leaf()
    ember.sparse.sum(s).backward()
    assert s.grad.is_coalesced() and s.grad.values().tolist() == [1.0] * 4
    ember.sparse.sum(s).backward()                  # accumulated: uncoalesced
    assert not s.grad.is_coalesced() and s.grad._values().tolist() == [2.0] * 4
    s = leaf()
    (s.values() * 2).sum().backward()
    assert s.grad.is_coalesced() and s.grad.values().tolist() == [2.0] * 4
    s.grad = None
    s.to_dense().sum().backward()
    assert not s.grad.is_coalesced()


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_round_trips_keep_the_coalesced_flag(how):
    for coalesced in (True, False):
        s = _coo(ember.tensor([1.0, 2.0, 3.0]), coalesced)
        r = copy.deepcopy(s) if how == "deepcopy" else pickle.loads(pickle.dumps(s))
        assert r.is_coalesced() is coalesced
        assert r.to_dense().tolist() == s.to_dense().tolist()


def test_conversion_errors_from_sparse_sources():
    d = ember.tensor([[1.0, 0, 2, 0], [0, 3, 0, 4], [5, 0, 0, 6], [0, 7, 8, 0]])
    coo, csr = d.to_sparse(), d.to_sparse_csr()
    with pytest.raises(RuntimeError, match=r"^to_sparse: conversion from Sparse to Sparse "
                                           r"with blocksize argument given is not supported"):
        coo.to_sparse(layout=ember.sparse_coo, blocksize=(2, 2))
    with pytest.raises(RuntimeError, match=r"^sparse_coo_to_sparse: conversion from Sparse to "
                                           r"SparseBsr without blocksize"):
        coo.to_sparse(layout=ember.sparse_bsr)
    with pytest.raises(RuntimeError, match=r"^sparse_compressed_to_sparse: conversion from "
                                           r"SparseCsr to Sparse with blocksize"):
        csr.to_sparse(layout=ember.sparse_coo, blocksize=(2, 2))
    with pytest.raises(RuntimeError, match=r"^to_sparse: conversion from SparseCsr to "
                                           r"SparseCsr with dense_dim argument given"):
        csr.to_sparse(layout=ember.sparse_csr, dense_dim=1)
    with pytest.raises(RuntimeError, match=r"^sparse_coo_to_sparse: tensor sparse size \(4,4\) "
                                           r"must be divisible by given blocksize \(3,3\)"):
        coo.to_sparse(layout=ember.sparse_bsr, blocksize=(3, 3))
    with pytest.raises(RuntimeError, match=r"sparse_dim argument !=self.sparse_dim\(\)"):
        coo.to_sparse(1)
    bsr = coo.to_sparse(layout=ember.sparse_bsr, blocksize=(2, 2))
    assert bsr.layout is ember.sparse_bsr and bsr.to_dense().tolist() == d.tolist()


def test_copy_between_dense_and_sparse_errors():
    d = ember.ones(2, 2)
    with pytest.raises(RuntimeError, match=r"Found self type = ember.FloatTensor and src type "
                                           r"= ember.sparse.FloatTensor$"):
        ember.zeros(2, 2).copy_(d.to_sparse())
    with pytest.raises(RuntimeError, match="^copy_sparse_compressed_ expected sparse "
                                           "compressed tensor layout but got Strided$"):
        ember.zeros(2, 2).copy_(d.to_sparse_csr())


def test_legacy_sparse_types():
    s = ember.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2))
    assert isinstance(s, ember.sparse.FloatTensor)
    assert not isinstance(s, ember.FloatTensor)
    assert not isinstance(s.to_dense(), ember.sparse.FloatTensor)
    assert not isinstance(s.to_sparse_csr(), ember.sparse.FloatTensor)
    assert isinstance(s.to_dense(), ember.FloatTensor)
    assert s.type(ember.sparse.DoubleTensor).type() == "ember.sparse.DoubleTensor"
    assert s.type("torch.sparse.HalfTensor").dtype is ember.float16
    assert repr(ember.cuda.sparse.FloatTensor) == "<class 'ember.cuda.sparse.FloatTensor'>"
    assert ember.cuda.sparse.LongTensor.is_sparse and ember.cuda.sparse.LongTensor.is_cuda
    e = ember.sparse.CharTensor(2, 3)
    assert e.dtype is ember.int8 and e.shape == (2, 3) and e._nnz() == 0
    f = ember.sparse.FloatTensor(ember.tensor([[0], [1]]), ember.tensor([5.0]),
                                 ember.Size([2, 2]))
    assert f.to_dense().tolist() == [[0.0, 5.0], [0.0, 0.0]]
    if not ember.cuda.is_available():
        with pytest.raises(TypeError, match="cuda.sparse.FloatTensor not available"):
            ember.cuda.sparse.FloatTensor(2, 3)


def test_jagged_detach_and_in_place_dropout():
    nt = ember.nested.nested_tensor([ember.ones(2, 3), ember.ones(4, 3)], layout=ember.jagged,
                                    requires_grad=True)
    c = nt * 2
    assert c.detach_() is c
    assert not c.requires_grad and c.grad_fn is None and c.is_leaf
    with pytest.raises(NotImplementedError, match=r"^aten.bernoulli_.float$"):
        ember.nn.functional.dropout(c, 0.5, True, True)
    assert ember.nn.functional.dropout(c, 0.0, True, True) is c
    out = ember.nn.functional.dropout(c, 0.5, True)
    assert out is not c and out.is_nested


def test_coo_permute():
    i = ember.tensor([[0, 1, 2, 2], [0, 1, 0, 2]])
    s = ember.sparse_coo_tensor(i, ember.arange(8.0).reshape(4, 2), (3, 3, 2)).coalesce()
    r = s.permute(1, 0, 2)
    assert not r.is_coalesced() and r.to_dense().tolist() == s.to_dense().permute(1, 0, 2).tolist()
    assert s.permute((0, 1, 2)).is_coalesced()
    with pytest.raises(RuntimeError, match="transpositions between sparse and dense"):
        s.permute(2, 0, 1)
    with pytest.raises(RuntimeError, match="duplicate dims"):
        s.permute(1, 1, 0)
    with pytest.raises(RuntimeError, match=r"unsupported tensor layout: SparseCsr"):
        ember.ones(2, 2).to_sparse_csr().pow_(2)


# ----- review (RC4) -----------------------------------------------------------------------

def _leaf():
    i = ember.tensor([[0, 1, 2, 2], [0, 1, 0, 2]])
    s = ember.sparse_coo_tensor(i, ember.tensor([1.0, -4.0, 9.0, 2.0]), (3, 3))
    return s.coalesce().requires_grad_()


def test_raw_gradients_stay_coalesced():
    # only the accumulated .grad of a leaf is marked uncoalesced (PyTorch's AccumulateGrad
    # rebuilds it): autograd.grad's and retain_grad's keep the ops' coalesced gradient
    w = ember.arange(9.0).reshape(3, 3)
    s = _leaf()
    g, = ember.autograd.grad(ember.sparse.mm(s, w).sum(), s)
    assert g.is_coalesced() and g._values().tolist() == [3.0, 12.0, 3.0, 21.0]
    g, = ember.autograd.grad(s.to_dense().sum(), s)
    assert g.is_coalesced() and s.grad is None
    s2 = s * 2
    s2.retain_grad()
    ember.sparse.mm(s2, w).sum().backward()
    assert s2.grad.is_coalesced() and not s.grad.is_coalesced()
    assert s.grad._values().tolist() == [6.0, 24.0, 6.0, 42.0]


def test_complex_abs_in_place_refused():
    v = ember.tensor([1 + 1j, -2j, 3 + 0j])
    s = _coo(v)
    with pytest.raises(RuntimeError, match=r"^In-place abs is not supported for complex"):
        s.abs_()
    assert v.tolist() == [1 + 1j, -2j, 3 + 0j]
    s.neg_()
    assert v.tolist() == [-1 - 1j, 2j, -3 - 0j]


def test_compressed_permute_refused():
    for s in (ember.ones(2, 2).to_sparse_csr(), ember.ones(2, 2).to_sparse_bsr((1, 1))):
        for dims in ((1, 0), (0, 1)):
            with pytest.raises(NotImplementedError, match=r"^Could not run 'aten::as_strided'"):
                s.permute(*dims)


def test_legacy_types_stand_for_one_layout_and_device_type():
    d = ember.ones(2, 2)
    assert isinstance(d, ember.FloatTensor)
    for t in (d.to_sparse_csr(), d.to_sparse(), ember.ones(2, device="meta"),
              ember.nested.nested_tensor([ember.ones(2), ember.ones(3)], layout=ember.jagged)):
        assert not isinstance(t, ember.FloatTensor)
    assert not isinstance(d.to_sparse_csr(), ember.sparse.FloatTensor)
    assert not isinstance(d.to_sparse().to("meta"), ember.sparse.FloatTensor)
    with pytest.raises(RuntimeError, match="expects device type: cpu but device type: meta"):
        ember.sparse.FloatTensor(2, 3, device="meta")
    assert ember.sparse.FloatTensor(2, 3, device="cpu").shape == (2, 3)


@pytest.mark.parametrize("kind", [ember.sparse.FloatTensor, ember.sparse.LongTensor,
                                  "torch.sparse.DoubleTensor", "ember.sparse.FloatTensor"])
def test_set_default_tensor_type_refuses_sparse_types(kind):
    before = ember.get_default_dtype()
    with pytest.raises(TypeError, match="^only dense types are supported as the default type$"):
        ember.set_default_tensor_type(kind)
    assert ember.get_default_dtype() is before and ember.ones(1).layout is ember.strided
