"""An in-place op that saves its output (exp_, relu_), run on a view of a non-leaf and
differentiated twice: the saved output carries the view's rebuilt history, so the second
backward reaches the base's history (values from NumPy)."""

import numpy as np
import pytest

import ember

W = np.array([[0.5, -1.0, 0.7], [1.5, -0.5, 0.3]], np.float32)
C = np.array([1.0, 2.0, 3.0], np.float32)


@pytest.mark.parametrize("op", ["exp_", "relu_"])
@pytest.mark.parametrize("view", ["t", "slice"])
def test_second_backward_through_an_inplace_op_on_a_view(op, view):
    w = ember.from_numpy(W.copy()).requires_grad_()
    y = w * ember.from_numpy(C)
    v = y.t() if view == "t" else y[:, 1:]
    getattr(v, op)()
    g, = ember.autograd.grad((v ** 2).sum(), w, create_graph=True)
    g.sum().backward()
    z = W * C
    cols = slice(None) if view == "t" else slice(1, None)
    touched = np.zeros_like(W, bool)
    touched[:, cols] = True
    if op == "exp_":
        # out = sum(exp(2 w c)) over the view (nothing outside it): g = 2c exp(2wc),
        # d(sum g)/dw = 4c^2 exp(2wc)
        g_ref = np.where(touched, 2 * C * np.exp(2 * z), 0)
        grad_ref = np.where(touched, 4 * C * C * np.exp(2 * z), 0)
    else:
        # out = sum(relu(wc)^2): g = 2c^2 w [wc > 0], d(sum g)/dw = 2c^2 [wc > 0]
        g_ref = np.where(touched, 2 * C * C * W * (z > 0), 0)
        grad_ref = np.where(touched, 2 * C * C * (z > 0), 0)
    np.testing.assert_allclose(g.detach().numpy(), g_ref, rtol=1e-5)
    np.testing.assert_allclose(w.grad.numpy(), grad_ref, rtol=1e-5)


def test_the_saved_output_keeps_the_view_history_it_was_saved_with():
    w = ember.tensor([[0.5, -1.0], [1.5, -0.5]], requires_grad=True)
    y = w * 2
    v = y.t()
    v.exp_()
    first = v.grad_fn
    g, = ember.autograd.grad(v.sum(), w, create_graph=True)
    assert first.name() == "AsStridedBackward0"
    assert g.grad_fn is not None
    g.sum().backward()          # (raised "backward through the graph a second time")
    np.testing.assert_allclose(w.grad.numpy(), 4 * np.exp(2 * w.detach().numpy()), rtol=1e-5)
