"""Parity: the pattern and values of sparse COO leaves' gradients through sums of sparse
tensors (``add`` passes its gradient on whole in PyTorch), by backward and autograd.grad."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

W = np.arange(9.0, dtype=np.float32).reshape(3, 3)
CASES = {
    "add_to_dense": lambda m, a, b: ((a + b).to_dense() * m.tensor(W)).sum(),
    "scaled_sum": lambda m, a, b: ((a * 2 + b + a * 3).to_dense() * m.tensor(W)).sum(),
    "sub_alpha": lambda m, a, b: (m.sub(a, b, alpha=2).to_dense() * m.tensor(W)).sum(),
    "sparse_sum": lambda m, a, b: m.sparse.sum(a + b),
    "coalesce_values": lambda m, a, b: ((a + b).coalesce().values()
                                        * m.tensor([1.0, 2.0, 3.0])).sum(),
    "sparse_mm": lambda m, a, b: m.sparse.mm(a + b, m.tensor(W)).sum(),
    "transpose": lambda m, a, b: ((a + b).t().to_dense() * m.tensor(W)).sum(),
    "softmax": lambda m, a, b: (m.sparse.softmax(a + b, 1).to_dense() * m.tensor(W)).sum(),
    "mul_dense": lambda m, a, b: ((a + b) * m.tensor(W)).to_dense().sum(),
    "mixed_mm": lambda m, a, b: m.sparse.mm(a, m.tensor(W)).sum() + (a + b).to_dense().sum(),
    "dense_plus_sum": lambda m, a, b: ((m.tensor(W) + (a + b)) * m.tensor(W)).sum(),
    "dense_minus_scaled": lambda m, a, b: ((m.tensor(W) - a * 2) * m.tensor(W)).sum()
    + (b.to_dense() * m.tensor(W)).sum(),
    "dense_add_alpha_t": lambda m, a, b: (m.add(m.tensor(W), (a + b).t(), alpha=3)
                                          * m.tensor(W)).sum(),
}


def leaves(m):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        make = m.sparse_coo_tensor
        return (make(m.tensor([[0, 1], [0, 1]]), m.tensor([1.0, 2.0]), (3, 3),
                     requires_grad=True),
                make(m.tensor([[1, 2], [1, 0]]), m.tensor([3.0, 4.0]), (3, 3),
                     requires_grad=True))


def summary(g):
    if str(g.layout).endswith("strided"):
        return "strided", g.tolist()
    c = g.coalesce()
    return str(g.layout).split(".")[-1], c._indices().tolist(), g.to_dense().tolist()


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradient_pattern_and_values(name):
    got = []
    for m in (torch, ember):
        a, b = leaves(m)
        out = CASES[name](m, a, b)
        grads = m.autograd.grad(out, [a, b], retain_graph=True)
        out.backward()
        got.append([summary(g) for g in (*grads, a.grad, b.grad)])
    assert got[1] == got[0]


def test_hybrid_sum():
    got = []
    for m in (torch, ember):
        a = m.sparse_coo_tensor(m.tensor([[0, 1]]), m.tensor([[1.0, 2.0], [3.0, 4.0]]), (3, 2),
                                requires_grad=True)
        b = m.sparse_coo_tensor(m.tensor([[2]]), m.tensor([[5.0, 6.0]]), (3, 2),
                                requires_grad=True)
        ((a + b).to_dense() * m.arange(6.0).reshape(3, 2)).sum().backward()
        got.append([summary(g) for g in (a.grad, b.grad)])
    assert got[1] == got[0]
