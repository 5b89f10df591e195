"""Nested func transforms (round 34): a captured tensor given to an inner transform, forward
mode inside ``linearize``, and ``linearize``'s folded constants of a closure."""

import numpy as np
import pytest

import ember
from ember.func import grad, jacfwd, jacrev, jvp, linearize, vjp, vmap

X = np.array([0.3, 0.7, -0.2])
G = np.array([1.5, -0.5, 0.25])
W = np.array([0.5, -1.0, 2.0])


def _ones():
    return ember.ones(3, dtype=ember.float64)


def _loss(b, g):
    return (b * g).sin().sum()


def test_a_captured_tensor_given_to_inner_grads_leaves_no_graph():
    x, g = ember.tensor(X), ember.tensor(G)
    double = grad(lambda b: grad(_loss, 1)(b, g).sum())(x)
    triple = grad(lambda a: grad(lambda b: grad(_loss, 1)(b, g).sum())(a).sum())(x)
    for r in (double, triple):
        assert not r.requires_grad and r.grad_fn is None
    # d/db sum(b cos(bg)) = cos(bg) - bg sin(bg); d/da of the sum of that over a = b
    np.testing.assert_allclose(double.numpy(), np.cos(X * G) - X * G * np.sin(X * G),
                               rtol=1e-6)
    np.testing.assert_allclose(triple.numpy(), -2 * G * np.sin(X * G)
                               - X * G ** 2 * np.cos(X * G), rtol=1e-5)


def test_a_captured_tensor_that_requires_grad_keeps_its_graph():
    x, g = ember.tensor(X), ember.tensor(G, requires_grad=True)
    r = grad(lambda b: grad(_loss, 1)(b, g).sum())(x)
    assert r.requires_grad
    (gg,) = ember.autograd.grad(r.sum(), g)
    # d/dg of (cos(xg) - xg sin(xg)) = -2x sin(xg) - x^2 g cos(xg)
    np.testing.assert_allclose(gg.numpy(), -2 * X * np.sin(X * G) - X ** 2 * G * np.cos(X * G),
                               rtol=1e-5)


@pytest.mark.parametrize("api", ["jacrev", "vmap"])
def test_inner_transforms_of_a_captured_tensor_follow_only_the_closure(api):
    def run(w):
        g = ember.tensor(G)
        inner = lambda b: (lambda g: (b * g * w).sin().sum())     # noqa: E731
        if api == "jacrev":
            return jacrev(lambda b: jacrev(inner(b))(g))(ember.tensor(X))
        return vmap(lambda b: grad(inner(b))(g))(ember.tensor(np.stack([X, 2 * X])))
    w = ember.tensor(W)
    assert not run(w).requires_grad
    assert run(w.requires_grad_()).requires_grad


@pytest.mark.parametrize("inner", [
    lambda f: (lambda x: jvp(f, (x,), (_ones(),))[1]),
    jacfwd,
    lambda f: jacfwd(jacrev(lambda x: f(x).sum())),
])
def test_forward_mode_inside_linearize_is_refused(inner):
    w = ember.tensor(W)
    with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
        linearize(inner(lambda x: (x * w).sin() * x), ember.tensor(X))
    # and reverse mode is not
    out, fn = linearize(jacrev(lambda x: (x * w).sin() * x), ember.tensor(X))
    assert fn(_ones()).shape == (3, 3)


@pytest.mark.parametrize("inner", ["vjp", "grad"])
def test_linearize_folds_a_closure_of_an_inner_reverse_transform(inner):
    w = ember.tensor(W, requires_grad=True)
    f = lambda x: (x * w).sin() * x                                 # noqa: E731
    h = grad(lambda x: f(x).sum()) if inner == "grad" else \
        (lambda x: vjp(f, x)[1](_ones())[0])
    out, fn = linearize(h, ember.tensor(X))
    r = fn(_ones())
    assert r.requires_grad          # (its constants do)
    assert ember.autograd.grad(r.sum(), w, allow_unused=True) == (None,)
    # H @ 1 of sum(x sin(xw)): diagonal 2w cos(xw) - x w^2 sin(xw)
    np.testing.assert_allclose(r.detach().numpy(), 2 * W * np.cos(X * W)
                               - X * W ** 2 * np.sin(X * W), rtol=1e-5)
    # the constants are made once: a second call gives the same
    np.testing.assert_allclose(fn(_ones()).detach().numpy(), r.detach().numpy())
    (go,) = ember.autograd.grad(out.sum(), w)       # (the output keeps its graph)
    assert go.shape == (3,)


def test_vmap_of_jvp_links_the_zero_term_of_an_input_that_requires_grad():
    xs = ember.tensor(np.stack([X, 2 * X]), requires_grad=True)
    c = ember.tensor(W)
    tan = vmap(lambda x: jvp(lambda x: x * c, (x,), (_ones(),))[1])(xs)
    assert tan.requires_grad       # (as outside vmap: x * c's tangent formula reads x)
    np.testing.assert_allclose(tan.detach().numpy(), np.stack([W, W]))
    (g,) = ember.autograd.grad(tan.sum(), xs)
    np.testing.assert_allclose(g.numpy(), np.zeros((2, 3)))
    # a tangent that depends on x keeps its real gradient
    tan = vmap(lambda x: jvp(lambda x: x * x, (x,), (_ones(),))[1])(xs)
    np.testing.assert_allclose(ember.autograd.grad(tan.sum(), xs)[0].numpy(), np.full((2, 3), 2.0))


@pytest.mark.parametrize("outer", ["grad", "jacrev"])
def test_inner_grad_over_detached_module_parameters_leaves_no_graph(outer):
    # (review RC3) a module's detached parameters given to an inner grad through
    # functional_call: the outer result is in no graph (it was, through the inner copies)
    ember.manual_seed(0)
    m = ember.nn.Sequential(ember.nn.Linear(3, 2), ember.nn.Tanh(), ember.nn.Linear(2, 1)).double()
    params = {k: v.detach() for k, v in m.named_parameters()}

    def inner(x):
        gs = grad(lambda p: ember.func.functional_call(m, p, (x,)).sin().sum())(params)
        return sum(g.sum() for g in gs.values())
    r = (grad(inner) if outer == "grad" else jacrev(inner))(ember.tensor(X))
    assert not r.requires_grad and r.grad_fn is None
    # the same through autograd: d/dx of the sum of d/dp sin(m(x))
    x = ember.tensor(X, requires_grad=True)
    ps = list(m.parameters())
    gs = ember.autograd.grad(m(x).sin().sum(), ps, create_graph=True)
    (want,) = ember.autograd.grad(sum(g.sum() for g in gs), x)
    np.testing.assert_allclose(r.numpy(), want.numpy(), rtol=1e-10)
