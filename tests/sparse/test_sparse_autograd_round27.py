"""A sparse leaf's gradient through backward(inputs=...), products of transposed, converted
and scaled sparse tensors, retain_grad and to_dense(masked_grad=False), against NumPy (the
layouts are PyTorch's: see tests/parity/test_parity_sparse_autograd_round27.py)."""

import numpy as np
import pytest

import ember

DENSE = np.array([[0.0, 0.0, 1.0], [2.0, 0.0, 3.0]])
STORED = DENSE != 0
X = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
WEIGHTS = np.array([[1.0, -2.0, 3.0], [0.5, 5.0, -6.0]])


def leaf():
    return ember.tensor(DENSE).to_sparse().detach().requires_grad_()


def layout_and_values(g):
    dense = g if g.layout is ember.strided else g.to_dense()
    return g.layout, dense.numpy()


def check(g, layout, expected):
    got_layout, values = layout_and_values(g)
    assert got_layout is layout
    np.testing.assert_allclose(values, expected, rtol=1e-12)


PRODUCT_GRAD = np.ones((2, 2)) @ X.T        # d sum(w @ x) / dw, at every position


def test_backward_inputs_fills_a_sparse_leafs_grad():
    w = leaf()
    x = ember.tensor(X, requires_grad=True)
    (w @ x).sum().backward(inputs=[w])
    check(w.grad, ember.strided, PRODUCT_GRAD)
    assert x.grad is None
    w = leaf()
    (w.to_dense() * ember.tensor(WEIGHTS)).sum().backward(inputs=[w])
    check(w.grad, ember.sparse_coo, np.where(STORED, WEIGHTS, 0))


def test_backward_inputs_of_a_sparse_non_leaf():
    w = leaf()
    s = w * 2
    (s @ ember.tensor(X)).sum().backward(inputs=[s])
    check(s.grad, ember.strided, PRODUCT_GRAD)
    assert w.grad is None


@pytest.mark.parametrize("scale,make", [(2.0, lambda w: w * 2), (0.25, lambda w: w / 4),
                                        (-1.0, lambda w: -w), (-2.0, lambda w: w - w * 3),
                                        (1.0, lambda w: w.clone()),
                                        (2.0, lambda w: 2 * w)])
def test_linear_ops_keep_the_products_gradient_dense(scale, make):
    w = leaf()
    (make(w) @ ember.tensor(X)).sum().backward()
    check(w.grad, ember.strided, scale * PRODUCT_GRAD)


def test_a_factor_that_requires_grad_keeps_the_values_path():
    w = leaf()
    c = ember.tensor(2.0, dtype=ember.float64, requires_grad=True)
    ((w * c) @ ember.tensor(X)).sum().backward()
    check(w.grad, ember.sparse_coo, np.where(STORED, 2 * PRODUCT_GRAD, 0))
    np.testing.assert_allclose(c.grad.item(), (DENSE @ X).sum())


def test_conversions_pass_the_gradient_in_the_leafs_layout():
    small = np.array([[1.0, 0.0], [0.0, 0.0]])
    w = leaf()
    (w.t().to_sparse_csr() @ ember.tensor(small)).sum().backward()
    check(w.grad, ember.sparse_coo, (np.ones((3, 2)) @ small.T).T)
    w = leaf()
    (w.to_sparse_csr() @ ember.tensor(X)).sum().backward()
    check(w.grad, ember.sparse_coo, PRODUCT_GRAD)
    csr = ember.tensor(DENSE).to_sparse_csr().detach().requires_grad_()
    (csr.to_sparse() @ ember.tensor(X)).sum().backward()
    check(csr.grad, ember.sparse_csr, PRODUCT_GRAD)


def test_coalescing_a_leaf_keeps_the_gradient_dense():
    i = ember.tensor([[1, 0, 1], [2, 2, 2]])
    w = ember.sparse_coo_tensor(i, ember.tensor([1.0, 2.0, 3.0]), (2, 3)).requires_grad_()
    (w.coalesce() @ ember.tensor(X, dtype=ember.float32)).sum().backward()
    check(w.grad, ember.strided, PRODUCT_GRAD)


def test_a_product_of_sparse_matrices_gives_an_unmasked_sparse_gradient():
    tall = np.array([[0.0, 5.0], [7.0, 0.0], [1.0, 0.0]])
    grad = ((DENSE @ tall) != 0) @ tall.T      # (to_dense's gradient: the product's pattern)
    w = leaf()
    (w @ ember.tensor(tall).to_sparse()).to_dense().sum().backward()
    check(w.grad, ember.sparse_coo, grad)
    w = leaf()
    ember.sparse.mm(w, ember.tensor(tall).to_sparse()).to_dense().sum().backward()
    check(w.grad, ember.sparse_coo, np.where(STORED, grad, 0))


def test_retain_grad_on_a_sparse_non_leaf():
    w = leaf()
    s = w * 2
    s.retain_grad()
    assert s.retains_grad
    (s @ ember.tensor(X)).sum().backward()
    check(s.grad, ember.strided, PRODUCT_GRAD)
    check(w.grad, ember.strided, 2 * PRODUCT_GRAD)
    w = leaf()
    s = w * 2
    s.retain_grad()
    (s.to_dense() * ember.tensor(WEIGHTS)).sum().backward()
    check(s.grad, ember.sparse_coo, np.where(STORED, WEIGHTS, 0))


def test_retain_grad_refuses_without_grad():
    with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has "
                                           "requires_grad=False"):
        ember.tensor(DENSE).to_sparse().retain_grad()


def test_to_dense_unmasked_gradient():
    w = leaf()
    (w.to_dense(masked_grad=False) * ember.tensor(WEIGHTS)).sum().backward()
    check(w.grad, ember.sparse_coo, WEIGHTS)
    w = leaf()
    (w.to_dense(masked_grad=True) * ember.tensor(WEIGHTS)).sum().backward()
    check(w.grad, ember.sparse_coo, np.where(STORED, WEIGHTS, 0))
    d = ember.tensor(DENSE, requires_grad=True)
    (d.to_sparse().to_dense(masked_grad=False) * ember.tensor(WEIGHTS)).sum().backward()
    check(d.grad, ember.strided, WEIGHTS)
