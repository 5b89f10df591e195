"""The graph of func.jvp / jacfwd / hessian / linearize results when primals or closed-over
tensors require grad (round 33): zero-tangent terms link the tangent to the primals they read
(zero gradients, not None), checked against closed forms."""

import numpy as np
import pytest

import ember
from ember.func import hessian, jacfwd, jvp, linearize

X = np.array([[0.5, -1.5, 2.0], [1.0, 0.25, -0.75]])
T = np.array([[1.0, 0.5, -2.0], [0.25, -1.0, 3.0]])
W = np.array([[1.0, -2.0], [0.5, 0.0], [3.0, 1.5]])


def _x(rg=True):
    return ember.tensor(X, requires_grad=rg)


def test_scalar_multiple_tangent_requires_grad_with_zero_gradient():
    x = _x()
    out, tan = jvp(lambda x: x * 2.0, (x,), (ember.tensor(T),))
    assert out.requires_grad and tan.requires_grad
    np.testing.assert_array_equal(tan.detach().numpy(), 2.0 * T)
    (g,) = ember.autograd.grad(tan.sum(), [x])
    np.testing.assert_array_equal(g.numpy(), np.zeros_like(X))


def test_matmul_tangent_links_the_primal_and_reads_the_closure():
    x, w = _x(), ember.tensor(W, requires_grad=True)
    _, tan = jvp(lambda x: x @ w, (x,), (ember.tensor(T),))
    np.testing.assert_allclose(tan.detach().numpy(), T @ W)
    gx, gw = ember.autograd.grad(tan.sum(), [x, w])
    np.testing.assert_array_equal(gx.numpy(), np.zeros_like(X))
    # d/dW sum(T @ W) = T^T @ ones
    np.testing.assert_allclose(gw.numpy(), T.T @ np.ones((2, 2)))


def test_closure_only_primal_not_requiring_grad_gets_none():
    x, w = _x(False), ember.tensor(W, requires_grad=True)
    _, tan = jvp(lambda x: x @ w, (x,), (ember.tensor(T),))
    (gw,) = ember.autograd.grad(tan.sum(), [w])
    np.testing.assert_allclose(gw.numpy(), T.T @ np.ones((2, 2)))


@pytest.mark.parametrize("f", [lambda x, y: x + y, lambda x, y: ember.cat([x, y]),
                               lambda x, y: x.clone(), lambda x, y: x.view(6)])
def test_tangents_of_ops_reading_no_primal_do_not_require_grad(f):
    x, y = _x(), ember.tensor(X + 1, requires_grad=True)
    out, tan = jvp(lambda x: f(x, y), (x,), (ember.tensor(T),))
    assert out.requires_grad and not tan.requires_grad


def test_sum_of_a_product_links_what_the_zero_term_reads():
    x, y = _x(), ember.tensor(X + 1, requires_grad=True)
    _, tan = jvp(lambda x: (x * y).sum(), (x,), (ember.tensor(T),))
    assert float(tan.detach()) == pytest.approx(float((T * (X + 1)).sum()))
    gx, gy = ember.autograd.grad(tan, [x, y])
    np.testing.assert_array_equal(gx.numpy(), np.zeros_like(X))
    np.testing.assert_allclose(gy.numpy(), T)


def test_nonlinear_tangent_keeps_its_own_gradient():
    x = _x()
    _, tan = jvp(lambda x: ember.exp(x) * 2.0, (x,), (ember.tensor(T),))
    (g,) = ember.autograd.grad(tan.sum(), [x])
    np.testing.assert_allclose(g.numpy(), 2.0 * np.exp(X) * T)
    assert type(tan.grad_fn).__name__ != "AddBackward0"     # (already reaches x: no link)


def test_a_model_built_inside_adds_no_link():
    def f(x):
        lin = ember.nn.Linear(3, 2).double()
        return lin(x)
    _, tan = jvp(f, (_x(False),), (ember.tensor(T),))
    assert not tan.requires_grad


def test_jacfwd_of_a_linear_map_requires_grad_with_zero_gradient():
    x = _x()
    jac = jacfwd(lambda x: x * 3.0)(x)
    assert jac.requires_grad
    np.testing.assert_array_equal(jac.detach().numpy().reshape(6, 6), 3.0 * np.eye(6))
    (g,) = ember.autograd.grad(jac.sum(), [x])
    np.testing.assert_array_equal(g.numpy(), np.zeros_like(X))


def test_hessian_of_a_quadratic_requires_grad_with_zero_gradient():
    x = _x()
    h = hessian(lambda x: (x * x).sum())(x)
    assert h.requires_grad
    np.testing.assert_array_equal(h.detach().numpy().reshape(6, 6), 2.0 * np.eye(6))
    (g,) = ember.autograd.grad(h.sum(), [x])
    np.testing.assert_array_equal(g.numpy(), np.zeros_like(X))


def test_hessian_of_a_cubic_keeps_its_gradient():
    x = _x()
    h = hessian(lambda x: (x ** 3).sum())(x)
    (g,) = ember.autograd.grad(h.sum(), [x])
    np.testing.assert_allclose(g.numpy(), np.full_like(X, 6.0))


def test_linearize_links_its_own_constants_not_the_caller():
    x, w = _x(), ember.tensor(W)
    _, fn = linearize(lambda x: x @ w, x)
    tan = fn(ember.tensor(T))
    assert tan.requires_grad
    np.testing.assert_allclose(tan.detach().numpy(), T @ W)
    assert ember.autograd.grad(tan.sum(), [x], allow_unused=True) == (None,)
    _, fn = linearize(lambda x: x * 2.0, x)     # (PyTorch folds the number's term)
    assert not fn(ember.tensor(T)).requires_grad


@pytest.mark.parametrize("make, expect", [
    (lambda x: x * ember.tensor([1, 2, 3]), True),
    (lambda x: x * ember.tensor([True, False, True]), True),
    (lambda x: x * True, True),
    (lambda x: x / ember.tensor([1, 2, 4]), True),
    (lambda x: x + ember.tensor([1, 2, 3]), False),
    (lambda x: ember.where(ember.tensor([True, False, True]), x, ember.tensor([1, 2, 3])), False),
])
@pytest.mark.parametrize("api", ["forward_ad", "jvp"])
def test_integer_operand_terms(make, expect, api):
    x = ember.tensor([0.5, -1.5, 2.0], dtype=ember.float64, requires_grad=True)
    t = ember.tensor([1.0, 0.25, -2.0], dtype=ember.float64)
    if api == "jvp":
        _, tan = jvp(make, (x,), (t,))
    else:
        fw = ember.autograd.forward_ad
        with fw.dual_level():
            tan = fw.unpack_dual(make(fw.make_dual(x, t))).tangent
    assert tan.requires_grad is expect
    if expect:
        (g,) = ember.autograd.grad(tan.sum(), [x])
        np.testing.assert_array_equal(g.numpy(), np.zeros(3))


def test_jvp_values_match_finite_differences():
    w = ember.tensor(W, requires_grad=True)

    def f(x):
        return ember.tanh(x @ w) * 2.0 + (x * x).sum()
    _, tan = jvp(f, (_x(),), (ember.tensor(T),))
    eps = 1e-6
    fd = (f(ember.tensor(X + eps * T)) - f(ember.tensor(X - eps * T))).detach().numpy() / (2 * eps)
    np.testing.assert_allclose(tan.detach().numpy(), fd, rtol=1e-6, atol=1e-8)


def test_stand_in_runs_are_cached_for_a_view_to_a_size(monkeypatch):
    # a view's shape param is an ember.Size: the key must hold it, or every jvp of the same
    # function runs the op again on stand-ins; and those runs are not noted as the function's
    from ember.func import _zero_terms
    runs, noted = [], []
    both, record = _zero_terms._both_reads, _zero_terms.Terms.record
    monkeypatch.setattr(_zero_terms, "_both_reads", lambda *a: runs.append(a[0]) or both(*a))
    monkeypatch.setattr(_zero_terms.Terms, "record", lambda self, op, *a: (
        self.paused or noted.append(op)) or record(self, op, *a))
    w = ember.tensor(W[:, :1].repeat(2, 1).T.copy(), requires_grad=True)    # (2, 3)

    def f(x):
        return (x * w).view(ember.Size([6])).tanh().view(ember.Size([3, 2]))
    tans = [jvp(f, (_x(),), (ember.tensor(T),))[1] for _ in range(3)]
    first = len(runs)
    assert first > 0 and len(runs) == first    # (all in the first call)
    assert len(noted) == 3 * 4                 # (mul, view, tanh, view per call: no stand-in's)
    want = ((1 - np.tanh((X * w.detach().numpy()).reshape(6)) ** 2)
            * (T * w.detach().numpy()).reshape(6)).reshape(3, 2)
    for tan in tans:
        np.testing.assert_allclose(tan.detach().numpy(), want)
        assert tan.requires_grad

