"""ember.autograd.functional: jacobian, hessian, vjp, jvp, vhp, hvp."""

import numpy as np
import pytest

import ember
from ember.autograd import functional as AF


def _randn(*shape):
    return ember.randn(shape, dtype=ember.float64)


def test_jacobian_shapes_and_values():
    x = _randn(3)
    J = AF.jacobian(lambda a: a.exp(), x)
    assert ember.allclose(J, ember.diag(x.exp())) and not J.requires_grad
    J = AF.jacobian(lambda a, b: (a * b, a.sum()), (x, x * 2))
    assert J[0][0].shape == (3, 3) and J[1][1].shape == (3,)
    assert ember.allclose(J[0][1], ember.diag(x)) and ember.allclose(J[1][0], ember.ones_like(x))


def test_jacobian_strict_and_create_graph():
    x = _randn(2)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not"):
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


def test_strict_and_argument_errors_use_pytorch_wording():
    x, v = _randn(3), _randn(3)

    def raises(exc, text, fn):
        with pytest.raises(exc) as info:
            fn()
        assert str(info.value) == text

    ones = lambda a: ember.ones(2, dtype=ember.float64)  # noqa: E731
    raises(RuntimeError, "Output 0 of the user-provided function does not require gradients. "
           "The outputs must be computed in a differentiable manner from the input when "
           "running in strict mode.", lambda: AF.jacobian(ones, x, strict=True))
    raises(RuntimeError, "Output 0 of the user-provided function is independent of input 1. "
           "This is not allowed in strict mode.",
           lambda: AF.jacobian(lambda a, b: a * 2, (x, x), strict=True))
    raises(RuntimeError, "The output of the user-provided function is independent of input 1. "
           "This is not allowed in strict mode.",
           lambda: AF.vjp(lambda a, b: a * 2, (x, x), x, strict=True))
    hess = ("While computing the hessian, found that the jacobian of the user-provided function "
            "with respect to input 0 is independent of the input.")
    with pytest.raises(RuntimeError, match=hess):
        AF.hessian(lambda a: a.sum(), x, strict=True)
    with pytest.raises(RuntimeError, match=hess):
        AF.hvp(lambda a: a.sum(), x, v, strict=True)
    with pytest.raises(RuntimeError, match="`strict=True` and `vectorized=True` are not"):
        AF.jacobian(lambda a: a * 2, x, strict=True, vectorize=True)
    with pytest.raises(NotImplementedError, match="only implemented for `vectorize=True`"):
        AF.jacobian(lambda a: a * 2, x, strategy="forward-mode")
    with pytest.raises(AssertionError, match="Expected strategy to be either"):
        AF.jacobian(lambda a: a * 2, x, strategy="foo")
    raises(RuntimeError, "v has invalid size: should be ember.Size([3]) but got "
           "ember.Size([2]).", lambda: AF.vjp(lambda a: a * 2, x, v[:2]))
    raises(RuntimeError, "v is a tuple of invalid length: should be 2 but got 1.",
           lambda: AF.jvp(lambda a, b: a, (x, x), (v,)))
    raises(RuntimeError, "The Tensor returned by the function given to hessian should contain "
           "a single element", lambda: AF.hessian(lambda a: a * 2, x))
    raises(RuntimeError, "The function given to hvp should return a single Tensor",
           lambda: AF.hvp(lambda a: (a.sum(),), x, v))
    with pytest.raises(RuntimeError, match="can only be None if the input"):
        AF.vhp(lambda a: (a ** 3).sum(), x)
    with pytest.raises(RuntimeError, match="^The gradient with respect to input 0 is "
                                           "independent of the inputs of the user-provided "
                                           "function. This is not allowed in strict mode.$"):
        AF.jvp(lambda a: a.round(), x, v, strict=True)
    assert ember.equal(AF.jvp(lambda a: a * 2, x, v, strict=True)[1], 2 * v)
    _, hv = AF.hvp(lambda a: (a ** 3).sum(), x[:1])
    assert ember.allclose(hv, 6 * x[:1])
    assert ember.allclose(AF.hessian(lambda a: (a ** 3).sum(), x, vectorize=True,
                                     outer_jacobian_strategy="forward-mode"), ember.diag(6 * x))


def test_hessian_forward_over_reverse_couples_inputs():
    """Forward-over-reverse Hessians of functions whose gradient mixes the inputs (the inner
    reverse jacobian used to call requires_grad_ inside jacfwd's trace and raise)."""
    xn = np.array([0.3, -1.2, 0.7], dtype=np.float64)
    x = ember.from_numpy(xn)
    h = AF.hessian(lambda a: a.sum() ** 3, x, vectorize=True,
                   outer_jacobian_strategy="forward-mode")
    np.testing.assert_allclose(h.numpy(), np.full((3, 3), 6 * xn.sum()), rtol=1e-12)
    hs = AF.hessian(lambda a, c: (a * c).sum() ** 2, (x, x + 1), vectorize=True,
                    outer_jacobian_strategy="forward-mode")
    assert type(hs) is list and type(hs[0]) is list
    np.testing.assert_allclose(hs[0][1].numpy(),
                               2 * np.outer(xn + 1, xn) + 2 * (xn * (xn + 1)).sum() * np.eye(3),
                               rtol=1e-12)
