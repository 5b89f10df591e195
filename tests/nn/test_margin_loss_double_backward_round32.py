"""multi_margin_loss and multilabel_margin_loss: float64 gradients in float64 (the p=1 slope
was float32), and, as PyTorch's backward kernels have no derivative, gradients taken with
create_graph that refuse a second backward with PyTorch's message (round 32)."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def _multi_margin_grad_ref(x, y, p=1, margin=1.0):
    """NumPy gradient of the mean multi-margin loss."""
    n, c = x.shape
    g = np.zeros_like(x)
    for i in range(n):
        for j in range(c):
            if j == y[i]:
                continue
            m = margin - x[i, y[i]] + x[i, j]
            if m > 0:
                slope = 1.0 if p == 1 else 2 * m
                g[i, j] += slope / c / n
                g[i, y[i]] -= slope / c / n
    return g


@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin_float64_gradient(p):
    x = np.random.default_rng(0).standard_normal((3, 5))
    y = np.array([0, 3, 4])
    xt = ember.from_numpy(x.copy()).requires_grad_()
    F.multi_margin_loss(xt, ember.from_numpy(y), p=p).backward()
    assert xt.grad.dtype == ember.float64
    np.testing.assert_allclose(xt.grad.numpy(), _multi_margin_grad_ref(x, y, p), rtol=1e-14,
                               atol=1e-15)


@pytest.mark.parametrize("loss,kernel", [
    (lambda x: F.multi_margin_loss(x, ember.tensor([0, 3])), "multi_margin_loss_backward"),
    (lambda x: F.multilabel_margin_loss(x, ember.tensor([[0, 3, -1, 0, 0], [1, -1, 0, 0, 0]])),
     "multilabel_margin_loss_backward")])
def test_margin_loss_second_backward_refused(loss, kernel):
    x = ember.randn(2, 5, dtype=ember.float64, requires_grad=True)
    g, = ember.autograd.grad(loss(x), x, create_graph=True)
    assert g.requires_grad and type(g.grad_fn).__name__ == "NotImplemented"
    with pytest.raises(RuntimeError, match=f"derivative for aten::{kernel} is not implemented"):
        (g * g).sum().backward()
    g, = ember.autograd.grad(loss(x), x)        # first order only: no node
    assert not g.requires_grad
