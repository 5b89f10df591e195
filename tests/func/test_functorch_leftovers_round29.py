"""Round 29: retain_grad inside transforms is refused, results leaked out of a forward-mode
transform's function are cut from the graph afterwards (higher derivatives through a closure
kept), linearize and forward_ad refuse vmap's batched tensors, and a tensor hook registered
inside a transformed function runs in that transform's backward only (NumPy references)."""

import numpy as np
import pytest

import ember
from ember.autograd import forward_ad as fwAD
from ember.func import grad, hessian, jacfwd, jacrev, jvp, linearize, vjp, vmap

X = np.array([1.0, 2.0])
T = np.array([1.0, -0.5])
XX = np.array([[1.0, 2.0], [3.0, -0.5]])
_RETAIN = ("You are attempting to call Tensor.retain_grad() inside of a function being "
           "transformed by a functorch transform. This is unsupported, please attempt to use "
           "the functorch transforms (e.g. grad, vjp, jacrev, jacfwd, hessian) or call "
           "retain_grad() outside of a function being transformed instead.")
_MAKE_DUAL = ("Batching rule not implemented for aten::_make_dual; the fallback path doesn't "
              "work on out= or view ops.")


def _x(requires_grad=False):
    return ember.tensor(X, requires_grad=requires_grad)


def _retaining(target):
    w = ember.tensor(X, requires_grad=True)

    def f(x):
        y = x * 3
        {"y": y, "x": x, "w": w}[target].retain_grad()
        return (y * w).sum()
    return f


_RUNS = {"grad": lambda f: grad(f)(_x()), "vjp": lambda f: vjp(f, _x()),
         "jacrev": lambda f: jacrev(f)(_x()), "hessian": lambda f: hessian(f)(_x()),
         "jacfwd": lambda f: jacfwd(f)(_x()), "vmap": lambda f: vmap(f)(_x()[None])}


@pytest.mark.parametrize("target", ["y", "x", "w"])
@pytest.mark.parametrize("api", list(_RUNS))
def test_retain_grad_inside_a_transform_is_refused(api, target):
    with pytest.raises(RuntimeError) as info:
        _RUNS[api](_retaining(target))
    if target != "w" and api in ("jacfwd", "vmap"):
        # (their function's own tensors report no requires_grad: that check comes first)
        assert str(info.value) == "can't retain_grad on Tensor that has requires_grad=False"
    else:
        assert str(info.value) == _RETAIN


def test_retain_grad_in_linearize_runs_and_outside_keeps_working():
    w = ember.tensor(X, requires_grad=True)

    def f(x):
        w.retain_grad()         # (a leaf: nothing to do, as in PyTorch)
        return (x * w).sum()
    out, _ = linearize(f, _x())
    np.testing.assert_allclose(out.item(), (X * X).sum())
    y = w * 3
    y.retain_grad()
    y.sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), np.ones(2))


def _leaky(leak, closure=None):
    def f(x):
        y = x.exp()
        leak.extend([y, y[0], y.view(2)])
        return (y * closure).sum() if closure is not None else y.sum()
    return f


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("closure", [False, True])
@pytest.mark.parametrize("api", ["jvp", "jacfwd"])
def test_leaked_forward_mode_results_are_cut(api, closure, requires_grad):
    leak = []
    w = ember.tensor([3.0, 4.0], requires_grad=True) if closure else None
    f = _leaky(leak, w)
    x = _x(requires_grad)
    if api == "jvp":
        jvp(f, (x,), (ember.ones_like(x),))
    else:
        jacfwd(f)(x)
    for t in leak:
        assert (t.requires_grad, t.grad_fn, t.is_leaf) == (False, None, True)
    np.testing.assert_allclose(leak[0].numpy(), np.exp(X))
    np.testing.assert_allclose(leak[1].item(), np.exp(X[0]))
    used = leak[0] * 2      # a plain tensor now: nothing records
    assert used.grad_fn is None and not used.requires_grad


@pytest.mark.parametrize("api", ["grad", "vjp", "jacrev", "hessian"])
def test_leaked_reverse_mode_results_keep_their_history(api):
    leak = []
    f = _leaky(leak)
    {"grad": lambda: grad(f)(_x()), "vjp": lambda: vjp(f, _x()),
     "jacrev": lambda: jacrev(f)(_x()), "hessian": lambda: hessian(f)(_x())}[api]()
    assert leak[0].requires_grad and type(leak[0].grad_fn).__name__ == "ExpBackward0"


def test_nested_forward_mode_leaks_are_cut_by_the_outermost_transform():
    leak = []
    f = _leaky(leak)
    t = ember.ones(2, dtype=ember.float64)
    g = grad(lambda x: jvp(f, (x,), (t,))[1])(_x())
    np.testing.assert_allclose(g.numpy(), np.exp(X))
    assert leak[0].grad_fn is None and not leak[0].requires_grad
    leak.clear()
    jvp(grad(f), (_x(),), (t,))         # (grad's own results: reverse mode's, kept)
    assert leak[0].requires_grad


def test_leaked_input_of_jvp_is_cut():
    leak = []

    def f(x):
        leak.append(x)
        return x.sin()
    jvp(f, (_x(),), (ember.ones(2, dtype=ember.float64),))
    assert leak[0].grad_fn is None and not leak[0].requires_grad


def test_cut_leaks_keep_second_derivatives_through_a_closure():
    w0 = np.array([3.0, 4.0])
    w = ember.tensor(w0, requires_grad=True)
    leak = []

    def f(x):
        y = x * w
        leak.append(y)
        return (y ** 3).sum()
    _, tangent = jvp(f, (_x(),), (ember.tensor(T),))
    # tangent = sum(3 (x w)^2 w t) = sum(3 x^2 w^3 t): d/dw = 9 x^2 w^2 t, d2/dw2 = 18 x^2 w t
    gw, = ember.autograd.grad(tangent, w, create_graph=True)
    ggw, = ember.autograd.grad(gw.sum(), w)
    np.testing.assert_allclose(gw.detach().numpy(), 9 * X ** 2 * w0 ** 2 * T)
    np.testing.assert_allclose(ggw.numpy(), 18 * X ** 2 * w0 * T)
    assert leak[0].grad_fn is None


def test_linearize_refuses_a_batched_primal():
    xs = ember.tensor(XX)
    with pytest.raises(RuntimeError) as info:
        vmap(lambda t: linearize(ember.sin, t)[0])(xs)
    assert str(info.value) == _MAKE_DUAL
    c = ember.tensor(T)
    got = vmap(lambda t: linearize(ember.sin, c)[1](t))(xs)       # batched tangents run
    np.testing.assert_allclose(got.numpy(), np.cos(T) * XX)
    got = vmap(lambda t: jvp(ember.sin, (t,), (t,))[1])(xs)       # vmap(jvp) runs
    np.testing.assert_allclose(got.numpy(), np.cos(XX) * XX)


def test_forward_ad_refuses_batched_tensors():
    xs = ember.tensor(XX)
    with fwAD.dual_level():
        with pytest.raises(RuntimeError) as info:
            vmap(lambda t: fwAD.make_dual(t, t))(xs)
        assert str(info.value) == _MAKE_DUAL
        with pytest.raises(RuntimeError, match="aten::_unpack_dual"):
            vmap(lambda t: fwAD.unpack_dual(t).primal)(xs)
    got = vmap(lambda t: fwAD.unpack_dual(t).primal)(xs)      # no level: no dual op runs
    np.testing.assert_allclose(got.numpy(), XX)


def _hooked(seen, where="y"):
    def hook(g):
        seen.append(tuple(g.shape))
        return g * 2

    def f(x):
        if where == "x":
            x.register_hook(hook)
        y = x * x
        if where == "y":
            y.register_hook(hook)
        return (y * y.sin()).sum()
    return f


def _grad_ref(x):
    y = x * x
    return (np.sin(y) + y * np.cos(y)) * 2 * x


def _hess_diag_ref(x):
    y = x * x
    return (2 * np.cos(y) - y * np.sin(y)) * 4 * x * x + (np.sin(y) + y * np.cos(y)) * 2


@pytest.mark.parametrize("where", ["x", "y"])
@pytest.mark.parametrize("api", ["hessian", "jacfwd(grad)", "jacrev(jacrev)", "grad(grad)",
                                 "jvp(grad)"])
def test_a_hook_runs_once_in_its_own_transform(api, where):
    seen = []
    f = _hooked(seen, where)
    x = _x()
    t = ember.tensor(T)
    out = {"hessian": lambda: ember.diagonal(hessian(f)(x)),
           "jacfwd(grad)": lambda: ember.diagonal(jacfwd(grad(f))(x)),
           "jacrev(jacrev)": lambda: ember.diagonal(jacrev(jacrev(f))(x)),
           "grad(grad)": lambda: grad(lambda x: grad(f)(x).sum())(x),
           "jvp(grad)": lambda: jvp(grad(f), (x,), (t,))[1] / t}[api]()
    # the hook doubles the gradient once; its doubling is differentiated as recorded
    np.testing.assert_allclose(out.detach().numpy(), 2 * _hess_diag_ref(X), rtol=1e-12)
    assert len(seen) == 1


def test_a_hook_inside_vmap_of_grad_sees_per_example_gradients():
    seen = []
    f = _hooked(seen)
    got = vmap(grad(f))(ember.tensor(XX))
    np.testing.assert_allclose(got.numpy(), 2 * _grad_ref(XX), rtol=1e-12)
    assert seen == [(2,)]


def test_a_hook_on_a_tensor_batched_inside_grad_is_refused():
    f = _hooked([])
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't "
                                           "require gradient"):
        grad(lambda xs: vmap(f)(xs).sum())(ember.tensor(XX))


def test_a_write_into_a_returned_view_of_a_cut_result_keeps_its_history():
    w0, x0 = np.array([3.0, 4.0]), np.array([0.3, 0.7])
    w = ember.tensor(w0, requires_grad=True)
    leak = []

    def f(x):
        h = x * w
        leak.append(h)
        return h[:1], h
    (p, q), t = jvp(f, (ember.tensor(x0),), (ember.tensor(T),))
    q.mul_(2)           # (through its base: the cut result's twin, with its history)
    (p.sum() * 3 + (q * q).sum() + t[0].sum() + t[1].sum()).backward()
    want = np.array([6 * x0[0], 0.0]) + 8 * x0 ** 2 * w0 + T + np.array([T[0], 0.0])
    np.testing.assert_allclose(w.grad.numpy(), want)
    np.testing.assert_allclose(p.detach().numpy(), 2 * x0[:1] * w0[:1])
    assert leak[0].grad_fn is None and p.requires_grad


@pytest.mark.parametrize("how", ["linearize", "jacfwd"])
def test_the_callers_tensor_written_by_a_forward_mode_function_keeps_its_history(how):
    p = ember.tensor(X, requires_grad=True)
    buf = p * 1
    x = ember.tensor([0.3, 0.7], dtype=ember.float64)
    if how == "linearize":
        linearize(lambda x: buf[0:1].copy_(x[0:1]) * x, x)
    else:
        jacfwd(lambda x, b: b.add_(x) * x)(x, buf)
    assert buf.grad_fn is not None
    (buf * buf).sum().backward()
    want = 2 * np.array([0.3, X[1]]) * np.array([0.0, 1.0]) if how == "linearize" \
        else 2 * (X + np.array([0.3, 0.7]))
    np.testing.assert_allclose(p.grad.numpy(), want)
