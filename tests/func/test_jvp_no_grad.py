"""``no_grad`` inside forward-mode transforms: tangents flow through the region, reverse mode
sees it as a constant (NOTE [Tangents through no_grad]), checked against closed forms."""

import numpy as np

import ember
from ember.func import grad, hessian, jacfwd, jvp, linearize

X = np.array([0.5, 1.0, 2.0, -0.7])
T = np.array([1.0, -0.5, 0.25, 2.0])


def _times_const_exp(x):
    with ember.no_grad():
        e = x.exp()
    return x * e


def test_jvp_carries_the_tangent_of_the_no_grad_region():
    out, tangent = jvp(_times_const_exp, (ember.tensor(X),), (ember.tensor(T),))
    np.testing.assert_allclose(out.numpy(), X * np.exp(X), rtol=1e-15)
    # the product rule, both terms: (e^x + x e^x) t
    np.testing.assert_allclose(tangent.numpy(), (np.exp(X) + X * np.exp(X)) * T, rtol=1e-14)


def test_jacfwd_and_linearize_agree_with_the_closed_form():
    diag = np.exp(X) + X * np.exp(X)
    np.testing.assert_allclose(jacfwd(_times_const_exp)(ember.tensor(X)).numpy(), np.diag(diag),
                               rtol=1e-14)
    _, jvp_fn = linearize(_times_const_exp, ember.tensor(X))
    np.testing.assert_allclose(jvp_fn(ember.tensor(T)).numpy(), diag * T, rtol=1e-14)
    np.testing.assert_allclose(jvp_fn(ember.tensor(2 * T)).numpy(), 2 * diag * T, rtol=1e-14)


def test_an_outer_grad_sees_the_region_and_its_tangent_as_constants():
    t = ember.tensor(T)
    g = grad(lambda x: jvp(_times_const_exp, (x,), (t,))[1].sum())(ember.tensor(X))
    # tangent = e'(x) t x + e t with e, e' = exp(x) constant: d/dx = e' t
    np.testing.assert_allclose(g.numpy(), np.exp(X) * T, rtol=1e-14)


def test_backward_after_jvp_skips_the_region_and_nothing_keeps_requiring_grad():
    x = ember.tensor(X, requires_grad=True)
    kept = []

    def f(x):
        with ember.no_grad():
            kept.append(x.exp())
        return x * kept[-1]
    out, tangent = jvp(f, (x,), (ember.tensor(T),))
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(X), rtol=1e-15)
    assert out.requires_grad and not kept[0].requires_grad and kept[0].grad_fn is None


def test_in_place_under_no_grad_carries_the_tangent_and_keeps_the_history():
    x = ember.tensor(X, requires_grad=True)

    def f(x):
        y = x * x
        with ember.no_grad():
            y.mul_(3)
        return y
    out, tangent = jvp(f, (x,), (ember.tensor(T),))
    np.testing.assert_allclose(tangent.detach().numpy(), 6 * X * T, rtol=1e-15)
    assert type(out.grad_fn).__name__ == "AliasBackward0"     # (PyTorch's unwrapped view)
    out.sum().backward()            # as PyTorch: the in-place call left y = x * x's history
    np.testing.assert_allclose(x.grad.numpy(), 2 * X, rtol=1e-15)


def test_hessian_differentiates_the_region_in_its_forward_pass_only():
    def loss(x):
        with ember.no_grad():
            c = x.cos()
        return (c * x * x).sum()
    # jacrev sees c constant: g = 2 c x; jacfwd's tangent goes through c: dg = 2 (c - s x)
    h = hessian(loss)(ember.tensor(X))
    np.testing.assert_allclose(h.numpy(), np.diag(2 * (np.cos(X) - np.sin(X) * X)), rtol=1e-14)


def test_grad_alone_still_respects_no_grad():
    g = grad(lambda x: _times_const_exp(x).sum())(ember.tensor(X))
    np.testing.assert_allclose(g.numpy(), np.exp(X), rtol=1e-15)
