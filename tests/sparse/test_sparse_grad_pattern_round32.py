"""Gradients of sparse COO leaves through sums of sparse tensors keep the sum's pattern, as
PyTorch's: ``add`` passes its gradient on whole, so a leaf's gradient has entries at the other
operand's positions too (references: dense NumPy gradients)."""

import warnings

import numpy as np
import pytest

import ember

W = np.arange(9.0, dtype=np.float32).reshape(3, 3)
A_IDX, A_VAL = [[0, 1], [0, 1]], [1.0, 2.0]
B_IDX, B_VAL = [[1, 2], [1, 0]], [3.0, 4.0]
UNION = [[0, 1, 2], [0, 1, 0]]
UNION_MASK = np.zeros((3, 3), dtype=bool)
UNION_MASK[tuple(UNION)] = True


def leaf(idx, val, shape=(3, 3)):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ember.sparse_coo_tensor(ember.tensor(idx), ember.tensor(val), shape,
                                       requires_grad=True)


def leaves():
    return leaf(A_IDX, A_VAL), leaf(B_IDX, B_VAL)


def check(g, pattern, dense):
    assert g.layout is ember.sparse_coo
    c = g.coalesce()
    assert c._indices().tolist() == pattern
    np.testing.assert_allclose(g.to_dense().numpy(), dense)


def test_add_to_dense_gives_each_leaf_the_sums_pattern():
    a, b = leaves()
    ((a + b).to_dense() * ember.tensor(W)).sum().backward()
    expected = np.where(UNION_MASK, W, 0)
    check(a.grad, UNION, expected)
    check(b.grad, UNION, expected)


def test_scaled_sums_and_sub_scale_the_whole_pattern():
    a, b = leaves()
    ((a * 2 + b + a * 3).to_dense() * ember.tensor(W)).sum().backward()
    check(a.grad, UNION, np.where(UNION_MASK, 5 * W, 0))     # 2 + 3 at every position
    check(b.grad, UNION, np.where(UNION_MASK, W, 0))
    a, b = leaves()
    (ember.sub(a, b, alpha=2).to_dense() * ember.tensor(W)).sum().backward()
    check(a.grad, UNION, np.where(UNION_MASK, W, 0))
    check(b.grad, UNION, np.where(UNION_MASK, -2 * W, 0))


@pytest.mark.parametrize("reduce", ["sparse_sum", "coalesce_values", "mm", "t"])
def test_other_consumers_of_a_sum(reduce):
    a, b = leaves()
    s = a + b
    if reduce == "sparse_sum":
        out, expected = ember.sparse.sum(s), np.where(UNION_MASK, 1.0, 0)
    elif reduce == "coalesce_values":
        out = (s.coalesce().values() * ember.tensor([1.0, 2.0, 3.0])).sum()
        expected = np.zeros((3, 3))
        expected[tuple(UNION)] = [1.0, 2.0, 3.0]
    elif reduce == "mm":
        out = ember.sparse.mm(s, ember.tensor(W)).sum()
        expected = np.where(UNION_MASK, np.ones((3, 3)) @ W.T, 0)
    else:
        out = (s.t().to_dense() * ember.tensor(W)).sum()
        expected = np.where(UNION_MASK, W.T, 0)
    ga, gb = ember.autograd.grad(out, [a, b], retain_graph=True)
    check(ga, UNION, expected)
    check(gb, UNION, expected)
    out.backward()
    check(a.grad, UNION, expected)
    check(b.grad, UNION, expected)


def test_hybrid_sum_keeps_the_sums_pattern():
    a = leaf([[0, 1]], [[1.0, 2.0], [3.0, 4.0]], (3, 2))
    b = leaf([[2]], [[5.0, 6.0]], (3, 2))
    weights = np.arange(6.0).reshape(3, 2)
    ((a + b).to_dense() * ember.tensor(weights)).sum().backward()
    check(a.grad, [[0, 1, 2]], weights)
    check(b.grad, [[0, 1, 2]], weights)


def test_uncoalesced_sum_gives_each_position_once():
    a = leaf([[0, 0], [1, 1]], [1.0, 2.0])          # a duplicate position
    b = leaf([[2], [2]], [5.0])
    ((a + b).to_dense() * ember.tensor(W)).sum().backward()
    expected = np.zeros((3, 3))
    expected[0, 1], expected[2, 2] = W[0, 1], W[2, 2]
    check(a.grad, [[0, 2], [1, 2]], expected)
    check(b.grad, [[0, 2], [1, 2]], expected)


def test_retained_sum_gradient_is_not_counted_twice():
    a, b = leaves()
    s = a + b
    s.retain_grad()
    ((s.to_dense()) * ember.tensor(W)).sum().backward()
    check(s.grad, UNION, np.where(UNION_MASK, W, 0))
    check(a.grad, UNION, np.where(UNION_MASK, W, 0))


def test_sum_of_a_leaf_and_a_sparse_product():
    a, b = leaves()
    x = ember.tensor(W)
    (ember.sparse.mm(a, x).sum() + (a + b).to_dense().sum()).backward()
    # sparse.mm's gradient is masked to a's own pattern; the sum's covers b's positions too
    expected = np.where(np.isin(np.arange(9).reshape(3, 3), [0, 4]), np.ones((3, 3)) @ W.T, 0)
    check(a.grad, UNION, expected + UNION_MASK)


@pytest.mark.parametrize("alpha", [1, 3, -2])
def test_dense_plus_sparse_gives_the_sparse_leaf_a_dense_gradient(alpha):
    a, b = leaves()
    (ember.add(ember.tensor(W), a + b, alpha=alpha) * ember.tensor(W)).sum().backward()
    for g in (a.grad, b.grad):
        assert g.layout is ember.strided
        np.testing.assert_allclose(g.numpy(), alpha * W)


def test_dense_plus_compressed_leaf_gives_a_dense_gradient():
    c = ember.tensor([[1.0, 0, 0], [0, 2, 0], [0, 0, 0]]).to_sparse_csr().requires_grad_()
    ((ember.tensor(W) + c) * ember.tensor(W)).sum().backward()
    assert c.grad.layout is ember.strided
    np.testing.assert_allclose(c.grad.numpy(), W)


def test_dense_plus_sparse_without_grad_is_unchanged():
    a = leaf(A_IDX, A_VAL).detach()
    out = ember.tensor(W) + a
    assert not out.requires_grad
    np.testing.assert_allclose(out.numpy(), W + np.diag([1.0, 2.0, 0.0]))
