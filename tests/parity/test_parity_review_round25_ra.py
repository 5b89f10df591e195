"""Review of bc8ce9a (leaves made inside func transforms; requires_grad_ refused there) against
PyTorch: ember's own code that flags leaves inside a transformed function (Embedding's given
weight, Variable, sparse factories and the sparse requires_grad setter) is not the user's
``requires_grad_()``, and a closed-over tensor whose leaf is gone keeps results in the graph."""

import gc

import numpy as np
import pytest

import ember
from tests.parity._compare import as_array, error
from tests.parity.test_parity_func_closure_round25 import grad_outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

X = np.array([0.5, -1.0, 2.0], dtype=np.float32)


def _embedding_given(L, x):
    m = L.nn.Embedding(4, 3, _weight=L.full((4, 3), 2.0))
    return (m(L.tensor([1])) * x * x).sum()


def _embedding_pretrained(L, x):
    m = L.nn.Embedding.from_pretrained(L.full((4, 3), 2.0), freeze=False)
    return (m(L.tensor([1, 3])).sum(0) * x * x).sum()


def _embedding_bag_pretrained(L, x):
    m = L.nn.EmbeddingBag.from_pretrained(L.full((4, 3), 2.0))
    return (m(L.tensor([[1, 2]])) * x * x).sum()


def _variable(L, x):
    return (L.autograd.Variable(L.full((3,), 2.0), requires_grad=True) * x * x).sum()


def _sparse_factory(L, x):
    s = L.sparse_coo_tensor(L.tensor([[0, 2]]), L.tensor([1.0, 2.0]), (3,), requires_grad=True)
    return (s.to_dense() * x * x).sum()


def _sparse_setter(L, x):
    s = L.sparse_coo_tensor(L.tensor([[0, 2]]), L.tensor([1.0, 2.0]), (3,))
    s.requires_grad = True
    return (s.to_dense() * x * x).sum()


def _sparse_zeros(L, x):
    L.zeros(3, 3, layout=L.sparse_coo, requires_grad=True)
    return (x * x).sum()


ALLOWED = {"embedding_given": _embedding_given, "embedding_pretrained": _embedding_pretrained,
           "embedding_bag_pretrained": _embedding_bag_pretrained, "variable": _variable,
           "sparse_factory": _sparse_factory, "sparse_setter": _sparse_setter,
           "sparse_zeros": _sparse_zeros}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("caller", ["grad", "vmap_grad"])
@pytest.mark.parametrize("case", list(ALLOWED))
def test_library_code_flagging_leaves_inside_transforms(case, caller):
    ours, theirs = (grad_outcome(L, ALLOWED[case], caller) for L in (ember, torch))
    assert ours[0] is theirs[0] is False
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)


@pytest.mark.filterwarnings("ignore")
def test_the_users_requires_grad__on_a_sparse_tensor_is_still_refused():
    def call(L, _):
        def f(x):
            L.sparse_coo_tensor(L.tensor([[0, 2]]), L.tensor([1.0, 2.0]), (3,)).requires_grad_()
            return x.sum()
        return L.func.grad(f)(L.tensor(X))
    theirs = error(call, torch, None)
    assert theirs is not None and theirs[0] == "RuntimeError"
    assert error(call, ember, None) == theirs


def test_a_closed_over_tensor_whose_leaf_is_gone_keeps_results_in_its_graph():
    def run(L):
        def hyper():
            w = L.tensor([1.0, 2.0, 3.0], requires_grad=True)
            return w * 2                        # w is gone once hyper returns
        h = hyper()
        gc.collect()
        g = L.func.grad(lambda x: (x * x * h).sum())(L.tensor(X))
        (dh,) = L.autograd.grad(g.sum(), h)     # d/dh sum(2 x h) = 2 x
        return g.requires_grad, as_array(g), as_array(dh)
    ours, theirs = run(ember), run(torch)
    assert ours[0] is theirs[0] is True
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-6)
