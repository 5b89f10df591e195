"""Regression tests for the fixes the round-34 weather/climate programs needed: ``torch.bmm``
of a batch of COO matrices (sparse_dim 3) by a dense batch, as batched conservative-remap
weights are applied (ember refused it)."""

import numpy as np
import pytest

import ember


def _batch():
    idx = ember.tensor([[0, 0, 1, 1, 0], [0, 1, 1, 2, 0], [1, 0, 2, 1, 1]])   # (0,0,1) twice
    return idx, ember.tensor([1.0, 2.0, 3.0, 4.0, 0.5])


def test_sparse_bmm_values_and_gradients_as_dense_bmm():
    idx, vals = _batch()
    v = vals.clone().requires_grad_()
    s = ember.sparse_coo_tensor(idx, v, (2, 3, 3), check_invariants=False)
    d = ember.arange(12.0).view(2, 3, 2).requires_grad_()
    out = ember.bmm(s, d)
    assert out.layout is ember.strided and out.grad_fn.name() == "BmmBackward0"
    dense = np.zeros((2, 3, 3))
    np.add.at(dense, tuple(idx.numpy()), vals.numpy())
    expected = dense @ np.arange(12.0).reshape(2, 3, 2)
    np.testing.assert_allclose(out.detach().numpy(), expected)
    out.pow(2).sum().backward()
    g = 2 * expected
    np.testing.assert_allclose(d.grad.numpy(), dense.transpose(0, 2, 1) @ g)
    dd = np.arange(12.0).reshape(2, 3, 2)
    np.testing.assert_allclose(v.grad.numpy(), [(g[b, i] * dd[b, j]).sum()
                                                for b, i, j in idx.numpy().T])


def test_sparse_bmm_leaf_and_dense_origin_get_dense_gradients():
    idx, vals = _batch()
    leaf = ember.sparse_coo_tensor(idx, vals, (2, 3, 3), check_invariants=False)
    leaf.requires_grad_()
    ember.bmm(leaf, ember.ones(2, 3, 2) * 2).sum().backward()
    assert leaf.grad.layout is ember.strided
    np.testing.assert_allclose(leaf.grad.numpy(), np.full((2, 3, 3), 4.0))
    origin = ember.arange(18.0).view(2, 3, 3).requires_grad_()
    ember.bmm((origin * (origin > 7)).to_sparse(), ember.ones(2, 3, 1)).sum().backward()
    np.testing.assert_allclose(origin.grad.numpy(),
                               (np.arange(18.0).reshape(2, 3, 3) > 7).astype(float))


@pytest.mark.parametrize("args, message", [
    (lambda s: (s, ember.ones(2, 3)), "Tensor 'mat2' must have 3 dims, but has 2"),
    (lambda s: (ember.ones(2, 3, 3), s), "Tensor 'mat2' must be dense"),
    (lambda s: (s, ember.ones(3, 3, 2)), "'self.size(0)' and 'mat2.size(0)' must match"),
    (lambda s: (s, ember.ones(2, 4, 2)), "'self.size(2)' and 'mat2.size(1)' must match"),
    (lambda s: (s.to_dense()[0].to_sparse(), ember.ones(2, 3, 2)),
     "Tensor 'self' must have 3 sparse dims, but has 2"),
    (lambda s: (s, ember.ones(2, 3, 2, dtype=ember.float64)),
     "expected scalar type Float but found Double"),
])
def test_sparse_bmm_refusals_as_torch(args, message):
    s = ember.sparse_coo_tensor(*_batch(), (2, 3, 3), check_invariants=False)
    with pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ember.bmm(*args(s))
