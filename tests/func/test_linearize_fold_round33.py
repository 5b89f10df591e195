"""func.linearize's jvp_fn differentiated once per call (a linearised network trained by
hand): each backward reaches the tangents alone and frees nothing the next call needs."""

import numpy as np

import ember


def test_jvp_fn_backward_every_step_matches_numpy():
    w0n = np.array([[0.5, -0.3], [0.2, 0.8]], np.float32)
    xn = np.array([[1.0, 2.0], [0.5, -1.0]], np.float32)
    x = ember.from_numpy(xn)
    c = ember.tensor([1.5, -2.0], requires_grad=True)
    w0 = ember.from_numpy(w0n).requires_grad_()
    out0, jvp_fn = ember.func.linearize(lambda w: ember.tanh(x @ w) * c, w0)
    scale = (1 - np.tanh(xn @ w0n) ** 2) * np.array([1.5, -2.0], np.float32)
    w = ember.from_numpy(w0n + 0.1).requires_grad_()
    for step in range(1, 4):
        y = jvp_fn(w - w0.detach())
        y.sum().backward()
        np.testing.assert_allclose(y.detach().numpy(), scale * (xn @ np.full((2, 2), 0.1)),
                                   rtol=1e-5)
        np.testing.assert_allclose(w.grad.numpy(), step * xn.T @ scale, rtol=1e-5)
    assert c.grad is None and w0.grad is None
