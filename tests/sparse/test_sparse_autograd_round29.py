"""Sparse graphs freed by backward (a second backward raises, as PyTorch's constructor and
``values()`` nodes save tensors) and forward AD refused by sparse constructors, conversions
and products with PyTorch's errors."""

import warnings

import numpy as np
import pytest

import ember
from ember import func

FREED = "Trying to backward through the graph a second time"
FORWARD = ("Trying to use forward AD with {} that does not support it because it has not been "
           "implemented yet.")
IDX = [[0, 1, 1], [2, 0, 2]]
DENSE = [[0.0, 2.0, 0.0], [1.0, 0.0, 3.0]]


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


def coo(v):
    return ember.sparse_coo_tensor(ember.tensor(IDX), v, (2, 3))


def csr(v):
    return ember.sparse_csr_tensor(ember.tensor([0, 1, 3]), ember.tensor([2, 0, 2]), v, (2, 3))


def values():
    return ember.tensor([3.0, 4.0, 5.0], requires_grad=True)


X = np.arange(6.0, dtype=np.float32).reshape(3, 2)

SECOND_BACKWARD = {
    "sparse.mm": lambda v: ember.sparse.mm(coo(v), ember.tensor(X)).sum(),
    "mm": lambda v: ember.mm(coo(v), ember.tensor(X)).sum(),
    "sparse.addmm": lambda v: ember.sparse.addmm(ember.zeros(2, 2), coo(v),
                                                 ember.tensor(X)).sum(),
    "sparse.sum": lambda v: ember.sparse.sum(coo(v)),
    "Tensor.sum": lambda v: coo(v).sum(),
    "values": lambda v: coo(v).coalesce().values().sum(),
    "csr.values": lambda v: csr(v).values().sum(),
    "csr.sum": lambda v: csr(v).sum(),
    "csr.mm": lambda v: ember.mm(csr(v), ember.tensor(X)).sum(),
}


@pytest.mark.parametrize("name", sorted(SECOND_BACKWARD))
def test_a_second_backward_through_a_sparse_constructor_raises(name):
    v = values()
    out = SECOND_BACKWARD[name](v)
    out.backward()
    first = v.grad.clone()
    with pytest.raises(RuntimeError, match=FREED):
        out.backward()
    np.testing.assert_array_equal(v.grad.numpy(), first.numpy())   # nothing accumulated


def test_retain_graph_still_allows_a_second_backward():
    v = values()
    out = ember.sparse.mm(coo(v), ember.tensor(X)).sum()
    out.backward(retain_graph=True)
    out.backward()
    # d/dv of sum(A @ X): v_k times the row sum of X at the column it stores, twice
    np.testing.assert_allclose(v.grad.numpy(), 2 * X.sum(1)[[2, 0, 2]])


def test_a_sparse_tensor_reused_after_backward_raises():
    # the constructor's node is shared by both graphs, and freed by the first backward
    v = values()
    s = coo(v)
    ember.sparse.mm(s, ember.tensor(X)).sum().backward()
    with pytest.raises(RuntimeError, match=FREED):
        ember.sparse.mm(s, ember.tensor(X)).sum().backward()


def test_sparse_sum_of_a_leaf_frees_its_values_node():
    leaf = ember.tensor(DENSE).to_sparse().requires_grad_()
    out = ember.sparse.sum(leaf)
    out.backward()
    assert leaf.grad.layout is ember.sparse_coo
    np.testing.assert_array_equal(leaf.grad.to_dense().numpy(), np.array(DENSE) != 0)
    with pytest.raises(RuntimeError, match=FREED):
        out.backward()
    again = leaf.sum()          # SumBackward0 alone saves no tensor: a second pass runs
    again.backward()
    again.backward()


def _jvp_error(f, x):
    with pytest.raises(Exception) as info:
        func.jvp(f, (x,), (ember.ones_like(x),))
    return info.value


FORWARD_CASES = [
    ("sparse.mm", lambda y: ember.sparse.mm(ember.tensor(DENSE).to_sparse(), y),
     NotImplementedError, FORWARD.format("_sparse_addmm")),
    ("sparse.addmm", lambda y: ember.sparse.addmm(ember.zeros(2, 2),
                                                  ember.tensor(DENSE).to_sparse(), y),
     NotImplementedError, FORWARD.format("_sparse_addmm")),
    ("mm", lambda y: ember.mm(ember.tensor(DENSE).to_sparse(), y), NotImplementedError,
     "Could not run 'aten::_efficientzerotensor' with arguments from the 'SparseCPU' backend."),
    ("matmul", lambda y: ember.tensor(DENSE).to_sparse() @ y, NotImplementedError,
     "Could not run 'aten::_efficientzerotensor' with arguments from the 'SparseCPU' backend."),
    ("mv", lambda y: ember.mv(ember.tensor(DENSE).to_sparse(), y[:, 0]), NotImplementedError,
     "Could not run 'aten::_efficientzerotensor' with arguments from the 'SparseCPU' backend."),
    ("mm csr", lambda y: ember.mm(ember.tensor(DENSE).to_sparse_csr(), y), RuntimeError,
     "Sparse CSR tensors do not have strides"),
    ("sparse.mm csr", lambda y: ember.sparse.mm(ember.tensor(DENSE).to_sparse_csr(), y),
     RuntimeError, "Sparse CSR tensors do not have strides"),
    ("mm csc", lambda y: ember.mm(ember.tensor(DENSE).to_sparse_csc(), y), RuntimeError,
     "Sparse CSC tensors do not have strides"),
]


@pytest.mark.parametrize("name,f,kind,message", FORWARD_CASES, ids=[c[0] for c in FORWARD_CASES])
def test_forward_ad_through_sparse_products_refuses_with_torchs_error(name, f, kind, message):
    error = _jvp_error(f, ember.tensor(X))
    assert type(error) is kind
    assert str(error).startswith(message)


def test_jacfwd_through_sparse_mm_refuses():
    s = ember.tensor(DENSE).to_sparse()
    with pytest.raises(NotImplementedError, match=FORWARD.format("_sparse_addmm")):
        func.jacfwd(lambda y: ember.sparse.mm(s, y))(ember.tensor(X))


CONVERSIONS = [
    ("sparse_coo_tensor", lambda v: coo(v).to_dense(), "_sparse_coo_tensor_with_dims_and_tensors"),
    ("sparse_csr_tensor", lambda v: csr(v).to_dense(), "sparse_compressed_tensor"),
    ("to_sparse", lambda v: v.reshape(1, 3).to_sparse().to_dense(), "_to_sparse"),
    ("to_sparse_csr", lambda v: v.reshape(1, 3).to_sparse_csr().to_dense(), "_to_sparse_csr"),
    ("to_sparse_csc", lambda v: v.reshape(1, 3).to_sparse_csc().to_dense(), "_to_sparse_csc"),
    ("to_sparse_bsr", lambda v: v.reshape(1, 3).to_sparse_bsr((1, 1)).to_dense(),
     "_to_sparse_bsr"),
]


@pytest.mark.parametrize("name,f,kernel", CONVERSIONS, ids=[c[0] for c in CONVERSIONS])
def test_forward_ad_through_sparse_constructors_refuses(name, f, kernel):
    error = _jvp_error(f, ember.tensor([3.0, 4.0, 5.0]))
    assert type(error) is NotImplementedError
    assert str(error).startswith(FORWARD.format(kernel))


def test_products_without_forward_ad_are_unchanged():
    s = ember.tensor(DENSE).to_sparse()
    out = ember.mm(s, ember.tensor(X))
    np.testing.assert_allclose(out.numpy(), np.array(DENSE) @ X)
    # a forward-mode transform whose inputs do not reach the product leaves it alone
    _, tangent = func.jvp(lambda y: ember.mm(s, ember.tensor(X)) * y, (ember.tensor(2.0),),
                          (ember.tensor(1.0),))
    np.testing.assert_allclose(tangent.numpy(), np.array(DENSE) @ X)
