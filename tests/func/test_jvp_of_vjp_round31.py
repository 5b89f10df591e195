"""jvp over reverse-mode transforms and jvp results' requires_grad, without PyTorch: the
closed forms (sin' = cos, cos' = -sin, exp' = exp) give the expected values."""

import numpy as np
import pytest

import ember
from ember import func

_A = np.array([0.3, 1.0, -2.0], dtype=np.float32)
_B = np.array([0.5, -1.5, 0.7], dtype=np.float32)
_T = np.array([1.0, -0.5, 2.0], dtype=np.float32)
_U = np.array([-1.0, 0.25, 0.5], dtype=np.float32)


def _close(got, want):
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-5, atol=1e-6)


def test_jvp_of_vjp_of_sin():
    a = ember.tensor(_A)
    out, tangent = func.jvp(lambda x: func.vjp(ember.sin, x)[1](ember.ones(3))[0], (a,), (a,))
    _close(out, np.cos(_A))
    _close(tangent, -np.sin(_A) * _A)


def test_jvp_of_vjp_two_inputs_non_scalar_outputs():
    # f(x, y) = (sin(x) y, exp(xy)); its vjp with cotangents (1, v) at (x, y):
    #   gx = cos(x) y + v y exp(xy),  gy = sin(x) + v x exp(xy)
    a, b, ta, tb, v = (ember.tensor(z) for z in (_A, _B, _T, _U, _B))
    f = lambda x, y: (ember.sin(x) * y, (x * y).exp())      # noqa: E731
    (gx, gy), (dgx, dgy) = func.jvp(
        lambda x, y: func.vjp(f, x, y)[1]((ember.ones(3), v)), (a, b), (ta, tb))
    x, y, tx, ty, w = _A, _B, _T, _U, _B
    e = np.exp(x * y)
    _close(gx, np.cos(x) * y + w * y * e)
    _close(gy, np.sin(x) + w * x * e)
    _close(dgx, -np.sin(x) * y * tx + np.cos(x) * ty
           + w * ty * e + w * y * e * (tx * y + x * ty))
    _close(dgy, np.cos(x) * tx + w * tx * e + w * x * e * (tx * y + x * ty))


def test_jvp_of_vjp_with_aux():
    a, b, ta, tb = (ember.tensor(z) for z in (_A, _B, _T, _U))

    def g(x, y):
        _, fn, aux = func.vjp(lambda p, q: (p.sin() * q, (p * 2).cos()), x, y, has_aux=True)
        return fn(ember.ones(3))[1], aux
    out, tangent, aux = func.jvp(g, (a, b), (ta, tb), has_aux=True)
    _close(out, np.sin(_A))
    _close(tangent, np.cos(_A) * _T)
    _close(aux, np.cos(2 * _A))


def test_jvp_of_grad_and_hessian():
    # s(x, y) = sum(sin(x) cos(y)): ds/dx = cos(x) cos(y), d2s/dx2 = -sin(x) cos(y)
    a, b, ta, tb = (ember.tensor(z) for z in (_A, _B, _T, _U))
    s = lambda x, y: (ember.sin(x) * y.cos()).sum()        # noqa: E731
    gx, dgx = func.jvp(func.grad(s), (a, b), (ta, tb))
    _close(gx, np.cos(_A) * np.cos(_B))
    _close(dgx, -np.sin(_A) * np.cos(_B) * _T - np.cos(_A) * np.sin(_B) * _U)
    h = func.jacfwd(func.jacrev(s, argnums=(0, 1)), argnums=(0, 1))(a, b)
    _close(h[0][0], np.diag(-np.sin(_A) * np.cos(_B)))
    _close(h[0][1], np.diag(-np.cos(_A) * np.sin(_B)))
    _close(h[1][1], np.diag(-np.sin(_A) * np.cos(_B)))


def test_jvp_of_jacrev():
    a, ta = ember.tensor(_A), ember.tensor(_T)
    jac, djac = func.jvp(func.jacrev(ember.sin), (a,), (ta,))
    _close(jac, np.diag(np.cos(_A)))
    _close(djac, np.diag(-np.sin(_A) * _T))


def test_vmap_of_jvp_of_vjp():
    m = ember.tensor(np.stack([_A, _B]))
    out, tangent = func.vmap(lambda x, t: func.jvp(
        lambda z: func.vjp(ember.sin, z)[1](ember.ones(3))[0], (x,), (t,)))(m, m * 2)
    x = np.stack([_A, _B])
    _close(out, np.cos(x))
    _close(tangent, -np.sin(x) * 2 * x)


def test_grad_of_jvp_of_vjp():
    a, t = ember.tensor(_A), ember.tensor(_T)
    g = func.grad(lambda x: func.jvp(
        lambda z: func.vjp(ember.sin, z)[1](ember.ones(3))[0], (x,), (t,))[1].sum())(a)
    _close(g, -np.cos(_A) * _T)


def test_autograd_grad_of_a_forward_result_is_still_refused():
    a = ember.tensor(_A)

    def f(x):
        y = x.sin()
        ember.autograd.grad(y.sum(), x)
        return y
    with pytest.raises(RuntimeError, match="does not require grad"):
        func.jvp(f, (a,), (a,))


def test_tangent_that_requires_grad_makes_its_outputs_require_grad():
    p, t = ember.tensor(_A), ember.tensor(_T, requires_grad=True)
    out, (sin_t, exp_t) = func.jvp(lambda x, y: (x.sin(), y.exp()), (p, p), (t, ember.ones(3)))
    assert not out[0].requires_grad and not out[1].requires_grad
    assert sin_t.requires_grad and not sin_t.is_leaf
    assert not exp_t.requires_grad
    sin_t.sum().backward()
    _close(t.grad, np.cos(_A))


def test_input_that_requires_grad_makes_both_outputs_require_grad():
    x, t = ember.tensor(_A, requires_grad=True), ember.tensor(_T)
    out, tangent = func.jvp(ember.sin, (x,), (t,))
    assert out.requires_grad and tangent.requires_grad
    tangent.sum().backward()
    _close(x.grad, -np.sin(_A) * _T)


@pytest.mark.parametrize("api", ["jvp", "vjp", "grad", "jacrev", "jacfwd"])
def test_nothing_requires_grad_under_the_callers_no_grad(api):
    x, t = ember.tensor(_A, requires_grad=True), ember.tensor(_T)
    with ember.no_grad():
        if api == "jvp":
            res = func.jvp(ember.sin, (x,), (t,))
        elif api == "vjp":
            out, fn = func.vjp(ember.sin, x)
            res = (out, fn(t)[0])
        elif api == "grad":
            res = (func.grad(lambda z: z.sin().sum())(x),)
        else:
            res = (getattr(func, api)(ember.sin)(x),)
    assert [(z.requires_grad, z.grad_fn) for z in res] == [(False, None)] * len(res)
    _close(res[-1], np.diag(np.cos(_A)) if api.startswith("jac") else np.cos(_A) * (
        _T if api in ("jvp", "vjp") else 1))


def test_no_grad_inside_grad_makes_a_nested_grad_a_constant():
    def g(a):
        with ember.no_grad():
            h = func.grad(lambda z: z.sin().sum())(a)
        return (h * a).sum()
    _close(func.grad(g)(ember.tensor(_A)), np.cos(_A))
