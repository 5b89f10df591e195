"""Round 28: what a forward-mode transform's function computes reports no requires_grad /
grad_fn (NOTE [Forward-mode primals]) while its tangents stay right (NumPy references), and
a write into a jvp input reaches the caller's tangent."""

import copy
import pickle

import numpy as np
import pytest

import ember
from ember.func import grad, jacfwd, jvp, linearize, vmap

X = np.array([0.5, -1.0, 2.0])
T = np.array([1.0, 2.0, -0.5])


def _x():
    return ember.tensor(X)


def _t():
    return ember.tensor(T)


def test_results_report_no_grad_and_tangents_hold():
    seen = []

    def f(x):
        y = (x * 2).sin()
        seen.append((y.requires_grad, y.grad_fn, y.is_leaf))
        return y
    p, t = jvp(f, (_x(),), (_t(),))
    assert seen == [(False, None, True)]
    np.testing.assert_allclose(p.numpy(), np.sin(2 * X))
    np.testing.assert_allclose(t.numpy(), 2 * np.cos(2 * X) * T)
    assert not p.requires_grad and not t.requires_grad


def test_results_are_plain_after_the_function():
    kept = []

    def f(x):
        kept.append(x * 3)
        return kept[-1]
    jvp(f, (_x(),), (_t(),))
    assert type(kept[0]) is ember.Tensor


def test_jacfwd_values_with_inplace_on_results():
    def f(x):
        y = x * 3
        y.add_(x * x)
        return y
    np.testing.assert_allclose(jacfwd(f)(_x()).numpy(), np.diag(3 + 2 * X))


def test_linearize_result_of_closure_reports_grad():
    w = ember.tensor([1.0, 1.0, 2.0], dtype=ember.float64, requires_grad=True)
    seen = {}

    def f(x):
        seen["closure"] = (x * w).requires_grad
        seen["own"] = (x * 2).requires_grad
        return x * w
    out, fn = linearize(f, _x())
    assert seen == {"closure": True, "own": False}
    np.testing.assert_allclose(fn(_t()).detach().numpy(), T * [1.0, 1.0, 2.0])


@pytest.mark.parametrize("body, msg", [
    (lambda x: ember.autograd.grad((x * x).sum(), x), "element 0 of tensors does not require"),
    (lambda x: (x * x).sum().backward(), "backward() called inside a functorch transform"),
    (lambda x: (x * 2).register_hook(lambda g: g), "cannot register a hook on a tensor"),
    (lambda x: linearize(ember.sin, x * 2), "Nested forward mode AD is not supported"),
])
def test_refusals(body, msg):
    with pytest.raises(RuntimeError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        jvp(body, (_x(),), (_t(),))


def test_write_into_input_updates_callers_tangent():
    x, t = _x(), _t()
    p, out = jvp(lambda a: a.mul_(3), (x,), (t,))
    np.testing.assert_allclose(x.numpy(), 3 * X)
    np.testing.assert_allclose(t.numpy(), 3 * T)
    np.testing.assert_allclose(out.numpy(), 3 * T)


def test_nested_grad_and_vmap_keep_values():
    def f(a):
        return (a.sin() * a).sum()
    p, t = jvp(grad(f), (_x(),), (_t(),))
    np.testing.assert_allclose(p.numpy(), np.sin(X) + X * np.cos(X))
    np.testing.assert_allclose(t.numpy(), (2 * np.cos(X) - X * np.sin(X)) * T)
    g = grad(lambda a: jvp(lambda b: b.sin() * b, (a,), (_t(),))[1].sum())(_x())
    np.testing.assert_allclose(g.numpy(), (2 * np.cos(X) - X * np.sin(X)) * T)
    v = vmap(lambda a: jvp(lambda b: b.exp(), (a,), (ember.ones((), dtype=ember.float64),))[1])
    np.testing.assert_allclose(v(_x()).numpy(), np.exp(X))


def test_results_and_their_views_copy_and_pickle_as_values():
    # (PyTorch refuses these on its wrappers; ember copies the values, and a result being
    # the memory root of its views must not send their copies back through it)
    seen = {}

    def f(x):
        y = x * 2
        v = y[1:]
        seen["copy"] = copy.deepcopy([y, v, x])
        seen["pickle"] = pickle.loads(pickle.dumps([y, v]))
        return y
    jvp(f, (_x(),), (_t(),))
    for got, want in zip(seen["copy"] + seen["pickle"], [2 * X, 2 * X[1:], X, 2 * X, 2 * X[1:]]):
        assert type(got) is ember.Tensor and not got.requires_grad
        np.testing.assert_allclose(got.numpy(), want)


def test_backward_inside_vmap_refuses_but_transforms_inside_it_run():
    w = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    xs = ember.tensor([X, T])

    def calls_backward(x):
        (w * w).sum().backward()
        return x
    with pytest.raises(RuntimeError, match=r"^backward\(\) called inside a functorch transform"):
        vmap(calls_backward)(xs)
    assert w.grad is None
    got = vmap(grad(lambda a: (a * a * a).sum()))(xs)     # (grad's own backward pass runs)
    np.testing.assert_allclose(got.numpy(), 3 * np.stack([X, T]) ** 2)
    (w * w).sum().backward()                              # (and outside vmap again)
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 4.0, 6.0])


def test_grad_input_inside_jvp_is_a_leaf():
    seen = {}

    def f(a):
        seen["flags"] = (a.requires_grad, a.grad_fn, a.is_leaf, a.grad)
        with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad"):
            a.add_(1)
        with ember.no_grad():
            a.mul_(1)
        seen["saved"] = pickle.loads(pickle.dumps(a))
        return (a * a * a).sum()
    g, gt = jvp(grad(f), (_x(),), (_t(),))
    assert seen["flags"] == (True, None, True, None)
    assert type(seen["saved"]) is ember.Tensor
    np.testing.assert_allclose(seen["saved"].numpy(), X)
    np.testing.assert_allclose(g.numpy(), 3 * X ** 2)
    np.testing.assert_allclose(gt.numpy(), 6 * X * T)
    w = ember.tensor(X, requires_grad=True)
    grad(f)(w)
    assert seen["flags"] == (True, None, True, None)


def test_jvp_primal_output_is_an_alias():
    w = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    p, t = jvp(lambda a: a * w * w, (_x(),), (_t(),))
    assert type(p.grad_fn).__name__ == "AliasBackward0" and p._is_view()
    np.testing.assert_allclose(p.detach().numpy(), X * np.array([1.0, 4.0, 9.0]))
    np.testing.assert_allclose(t.detach().numpy(), T * np.array([1.0, 4.0, 9.0]))
    p.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * X * np.array([1.0, 2.0, 3.0]))
    p, _ = jvp(lambda a: a * 2, (_x(),), (_t(),))
    assert p._is_view() and p.grad_fn is None and not p.requires_grad
