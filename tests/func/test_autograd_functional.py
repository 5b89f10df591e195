"""ember.autograd.functional: jacobian, hessian, vjp, jvp, vhp, hvp."""

import pytest

import ember
from ember.autograd import functional as AF


def _randn(*shape):
    return ember.randn(*shape, dtype=ember.float64)


def test_jacobian_shapes_and_values():
    x = _randn(3)
    J = AF.jacobian(lambda a: a.exp(), x)
    assert ember.allclose(J, ember.diag(x.exp())) and not J.requires_grad
    J = AF.jacobian(lambda a, b: (a * b, a.sum()), (x, x * 2))
    assert J[0][0].shape == (3, 3) and J[1][1].shape == (3,)
    assert ember.allclose(J[0][1], ember.diag(x)) and ember.allclose(J[1][0], ember.ones_like(x))


def test_jacobian_strict_and_create_graph():
    x = _randn(2)
    with pytest.raises(RuntimeError, match="independent of input 0"):
        AF.jacobian(lambda a: ember.ones(2, dtype=ember.float64) * 1, x, strict=True)
    assert ember.equal(AF.jacobian(lambda a: ember.ones(2, dtype=ember.float64), x),
                       ember.zeros(2, 2, dtype=ember.float64))
    y = x.clone().requires_grad_()
    J = AF.jacobian(lambda a: a ** 3, y, create_graph=True)
    J.sum().backward()
    assert ember.allclose(y.grad, 6 * x)


def test_hessian_vhp_hvp():
    A, x, v = _randn(3, 3), _randn(3), _randn(3)

    def f(a):
        return a @ A @ a + a.sin().sum()
    H = AF.hessian(f, x)
    want = A + A.T - ember.diag(x.sin())
    assert ember.allclose(H, want)
    out, vh = AF.vhp(f, x, v)
    assert ember.allclose(out, f(x)) and ember.allclose(vh, v @ want)
    assert ember.allclose(AF.hvp(f, x, v)[1], want @ v)


def test_vjp_jvp():
    x, v = _randn(3), _randn(3)
    out, g = AF.vjp(lambda a: a * a, x, v)
    assert ember.allclose(g, 2 * x * v)
    out, t = AF.jvp(lambda a: a * a, x, v)
    assert ember.allclose(t, 2 * x * v)
    with pytest.raises(RuntimeError, match="can only be None"):
        AF.vjp(lambda a: a * a, x)
    with pytest.raises(TypeError, match="must be either a Tensor or a tuple of Tensors"):
        AF.vjp(lambda a: a, [x], v)
