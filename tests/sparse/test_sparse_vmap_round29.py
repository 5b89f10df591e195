"""Sparse products under vmap against NumPy: sparse.mm, sparse.addmm, mm and mv of a shared
sparse matrix by a batched dense operand (they read the operand's placeholder and gave zeros),
dense examples times a shared sparse matrix (refused before),
their gradients into the dense examples and the sparse values, nested vmap, and the fallback
warning PyTorch gives for sparse.mm (see tests/parity/
test_parity_programs_round29_geometry_fixes.py)."""

import warnings

import numpy as np
import pytest

import ember

INDICES = np.array([[0, 1, 1, 2], [1, 0, 2, 2]])
VALUES = np.array([2.0, -3.0, 4.0, 0.5])
DENSE = np.zeros((3, 3))
DENSE[INDICES[0], INDICES[1]] = VALUES
X = np.arange(24.0).reshape(2, 3, 4) / 7 - 1


def sparse(layout="coo", values=None):
    s = ember.sparse_coo_tensor(ember.tensor(INDICES), ember.tensor(VALUES)
                                if values is None else values, (3, 3))
    return s.to_sparse_csr() if layout == "csr" else s


@pytest.mark.parametrize("layout", ["coo", "csr"])
@pytest.mark.parametrize("how", ["sparse.mm", "mm", "matmul"])
def test_batched_product_values(layout, how):
    s = sparse(layout)
    fn = {"sparse.mm": ember.sparse.mm, "mm": ember.mm, "matmul": ember.matmul}[how]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = ember.vmap(lambda v: fn(s, v))(ember.tensor(X))
    np.testing.assert_allclose(out.numpy(), DENSE @ X, rtol=1e-12)
    fallback = [w for w in caught if "batching rule for aten::_sparse_mm" in str(w.message)]
    assert len(fallback) == (how == "sparse.mm")


def test_batched_addmm_mv_and_in_dims():
    x = ember.tensor(X)
    out = ember.vmap(lambda v: ember.sparse.addmm(v, sparse(), v, beta=0.5, alpha=2.0))(x)
    np.testing.assert_allclose(out.numpy(), 0.5 * X + 2.0 * DENSE @ X, rtol=1e-12)
    mv = ember.vmap(lambda v: ember.mv(sparse(), v))(ember.tensor(X[:, :, 0]))
    np.testing.assert_allclose(mv.numpy(), X[:, :, 0] @ DENSE.T, rtol=1e-12)
    moved = ember.vmap(lambda v: ember.sparse.mm(sparse(), v), in_dims=2, out_dims=1)(
        ember.tensor(np.moveaxis(X, 0, 2).copy()))
    np.testing.assert_allclose(moved.numpy(), np.moveaxis(DENSE @ X, 0, 1), rtol=1e-12)


def test_nested_vmap():
    inner = ember.vmap(lambda v: ember.sparse.mm(sparse(), v[:, None]))
    out = ember.vmap(inner, in_dims=2)(ember.tensor(X))          # (4, 2, 3, 1)
    expected = np.einsum("ij,bjk->kbi", DENSE, X)[..., None]
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12)


def test_batched_gradients():
    vals = ember.tensor(VALUES, requires_grad=True)
    x = ember.tensor(X, requires_grad=True)
    y = ember.vmap(lambda v: ember.sparse.mm(sparse(values=vals), v))(x)
    (y * y).sum().backward()
    y_np = DENSE @ X
    np.testing.assert_allclose(x.grad.numpy(), 2 * DENSE.T @ y_np, rtol=1e-12)
    # d/dA_ij of sum (A x_b)^2 = sum_b 2 (A x_b)_i x_b[j]
    full = 2 * np.einsum("bik,bjk->ij", y_np, X)
    np.testing.assert_allclose(vals.grad.numpy(), full[INDICES[0], INDICES[1]], rtol=1e-12)
    grads = ember.vmap(ember.func.grad(lambda v: ember.sparse.mm(sparse(), v).pow(2).sum()))(
        ember.tensor(X))
    np.testing.assert_allclose(grads.numpy(), 2 * DENSE.T @ y_np, rtol=1e-12)


def test_empty_batch_refused():
    with pytest.warns(UserWarning, match="aten::_sparse_mm"), \
            pytest.raises(RuntimeError, match="does not support vmap over dims of size 0"):
        ember.vmap(lambda v: ember.sparse.mm(sparse(), v))(ember.zeros(0, 3, 4,
                                                                         dtype=ember.float64))


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_batched_dense_times_sparse(layout):
    xt = np.ascontiguousarray(X.transpose(0, 2, 1))            # (2, 4, 3) @ (3, 3)
    x = ember.tensor(xt, requires_grad=True)
    y = ember.vmap(lambda v: v @ sparse(layout))(x)
    np.testing.assert_allclose(y.detach().numpy(), xt @ DENSE, rtol=1e-12)
    rows = ember.vmap(lambda v: ember.mm(v[:1], sparse(layout)))(x)
    np.testing.assert_allclose(rows.detach().numpy(), xt[:, :1] @ DENSE, rtol=1e-12)
    (y * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (xt @ DENSE) @ DENSE.T, rtol=1e-12)


@pytest.mark.parametrize("layout", ["coo", "csr"])
@pytest.mark.parametrize("dense_batched", [False, True])
def test_batched_sparse_values(layout, dense_batched):
    # (PyTorch refuses a sparse tensor built from batched values; ember runs one product per
    # example, and the values' gradient is per example too)
    vv = ember.tensor(np.stack([VALUES, -2 * VALUES]), requires_grad=True)
    x = ember.tensor(X, requires_grad=True)
    y = ember.vmap(lambda v, d: ember.sparse.mm(sparse(layout, v), d),
                   in_dims=(0, 0 if dense_batched else None))(vv, x if dense_batched else x[0])
    mats = [DENSE, -2 * DENSE]
    xs = X if dense_batched else [X[0], X[0]]
    expected = np.stack([a @ d for a, d in zip(mats, xs)])
    np.testing.assert_allclose(y.detach().numpy(), expected, rtol=1e-12)
    (y * y).sum().backward()
    full = [2 * e @ d.T for e, d in zip(expected, xs)]
    np.testing.assert_allclose(vv.grad.numpy(), [f[INDICES[0], INDICES[1]] for f in full],
                               rtol=1e-12)
    grad_x = np.stack([2 * a.T @ e for a, e in zip(mats, expected)])
    np.testing.assert_allclose(x.grad.numpy(), grad_x if dense_batched else
                               np.concatenate([grad_x.sum(0, keepdims=True), np.zeros((1, 3, 4))]),
                               rtol=1e-12)
