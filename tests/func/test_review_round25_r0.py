"""Review of the tangents through no_grad (NOTE [Tangents through no_grad]): in-place writes
under no_grad inside ``jvp``, into a tensor or a slice of it, carry their tangent, while any
other backward sees the tensor's history as it was, checked against closed forms."""

import numpy as np

import ember
from ember.func import grad, jacfwd, jvp

X = np.array([0.5, 1.0, 2.0, -0.7])
T = np.array([1.0, -0.5, 0.25, 2.0])


def test_slice_assignment_under_no_grad_carries_the_assigned_tangent():
    def f(x):
        y = x * 2
        with ember.no_grad():
            y[1:3] = x[:2] * 5
            y[0] = 0
        return y
    out, tangent = jvp(f, (ember.tensor(X),), (ember.tensor(T),))
    np.testing.assert_allclose(out.numpy(), [0, 5 * X[0], 5 * X[1], 2 * X[3]], rtol=1e-15)
    np.testing.assert_allclose(tangent.numpy(), [0, 5 * T[0], 5 * T[1], 2 * T[3]], rtol=1e-15)
    np.testing.assert_allclose(jacfwd(f)(ember.tensor(X)).numpy(),
                               [[0, 0, 0, 0], [5, 0, 0, 0], [0, 5, 0, 0], [0, 0, 0, 2]])


def test_a_write_into_a_view_made_before_the_region_reaches_its_base():
    def f(x):
        y = x * x
        v = y[1:3]
        with ember.no_grad():
            v.mul_(3)
        return y
    _, tangent = jvp(f, (ember.tensor(X),), (ember.tensor(T),))
    np.testing.assert_allclose(tangent.numpy(), 2 * X * T * [1, 3, 3, 1], rtol=1e-15)


def test_later_ops_on_a_written_tensor_record_on_its_history_for_backward():
    x = ember.tensor(X, requires_grad=True)

    def f(x):
        y = x * x
        with ember.no_grad():
            y.mul_(3)
            y[1:3] = 0
            y.add_(1)
        return y * x
    out, tangent = jvp(f, (x,), (ember.tensor(T),))
    y = (3 * X * X) * [1, 0, 0, 1] + 1
    np.testing.assert_allclose(out.detach().numpy(), y * X, rtol=1e-15)
    np.testing.assert_allclose(tangent.detach().numpy(), (y + 6 * X * X * [1, 0, 0, 1]) * T,
                               rtol=1e-15)
    out.sum().backward()
    # backward sees y = x * x (the writes are not in its history) and y's values: y + 2 x^2
    np.testing.assert_allclose(x.grad.numpy(), y + 2 * X * X, rtol=1e-15)


def test_an_outer_grad_sees_the_written_tensor_as_before_the_writes():
    t = ember.tensor(T)

    def f(x):
        y = x * x
        with ember.no_grad():
            y.mul_(3)
            y.add_(1)
        return y

    def primal_sum(x):
        return jvp(f, (x,), (t,))[0].sum()
    np.testing.assert_allclose(grad(primal_sum)(ember.tensor(X)).numpy(), 2 * X, rtol=1e-15)
