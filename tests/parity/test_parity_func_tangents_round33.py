"""func.jvp / jacfwd / hessian / linearize results when the primals or the closure's tensors
require grad (round 33): whether the tangent (or Jacobian) requires grad, and the gradients of
it for each leaf (None, zeros or values), against torch; forward_ad's integer operands."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_RNG = np.random.default_rng(3)
X = _RNG.standard_normal((3, 4))
W = _RNG.standard_normal((4, 4))
B = _RNG.standard_normal(4)
Y = np.abs(_RNG.standard_normal((3, 4))) + 0.5
T = _RNG.standard_normal((3, 4))
MASK = [[True, False, True, False]] * 3


def _conv(L, x, w, b, y):
    weight = w[:2, :3].reshape(2, 3, 1) + y[:2, :1].reshape(2, 1, 1)
    return L.nn.functional.conv1d(x.reshape(1, 3, 4), weight, b[:2])


OPS = [
    ("mul_scalar", lambda L, x, w, b, y: x * 2.0),
    ("mul", lambda L, x, w, b, y: x * y),
    ("add", lambda L, x, w, b, y: x + y),
    ("div", lambda L, x, w, b, y: x / y),
    ("matmul", lambda L, x, w, b, y: x @ w),
    ("matmul_left", lambda L, x, w, b, y: w @ x.T),
    ("linear", lambda L, x, w, b, y: L.nn.functional.linear(x, w, b)),
    ("linear_nobias", lambda L, x, w, b, y: L.nn.functional.linear(x, w)),
    ("addmm", lambda L, x, w, b, y: L.addmm(b, x, w)),
    ("softmax", lambda L, x, w, b, y: L.softmax(x * y, -1)),
    ("layer_norm", lambda L, x, w, b, y: L.nn.functional.layer_norm(x, (4,), b, b)),
    ("sum", lambda L, x, w, b, y: (x * y).sum()),
    ("mean", lambda L, x, w, b, y: (x * y).mean()),
    ("where", lambda L, x, w, b, y: L.where(L.tensor(MASK), x, y)),
    ("index", lambda L, x, w, b, y: (x * y)[L.tensor([0, 2])]),
    ("cat", lambda L, x, w, b, y: L.cat([x, y])),
    ("stack", lambda L, x, w, b, y: L.stack([x, y])),
    ("conv1d", _conv),
    ("exp", lambda L, x, w, b, y: L.exp(x)),
    ("tanh_mul", lambda L, x, w, b, y: L.tanh(x) * y),
    ("square", lambda L, x, w, b, y: x ** 2),
    ("pow_tensor", lambda L, x, w, b, y: x.abs() ** y),
    ("relu", lambda L, x, w, b, y: L.relu(x)),
    ("mse", lambda L, x, w, b, y: L.nn.functional.mse_loss(x, y)),
    ("clone", lambda L, x, w, b, y: x.clone()),
    ("view", lambda L, x, w, b, y: x.view(12)),
    ("add_bias", lambda L, x, w, b, y: x + b),
    ("sigmoid_bias", lambda L, x, w, b, y: L.sigmoid(x) * b),
    ("lerp", lambda L, x, w, b, y: L.lerp(x, y, 0.3)),
    ("maximum", lambda L, x, w, b, y: L.maximum(x, y)),
    ("identity", lambda L, x, w, b, y: x),
    ("closure_only", lambda L, x, w, b, y: y * 2),
]


def _np(v):
    """``v``'s values (torch's gradients may be ZeroTensors)."""
    v = v.detach()
    return v.numpy(force=True) if isinstance(v, torch.Tensor) else v.numpy()


def _run(L, f, rx, rc, api):
    x = L.tensor(X, requires_grad=rx)
    w, b, y = [L.tensor(v, requires_grad=rc) for v in (W, B, Y)]
    leaves = [v for v in (x, w, b, y) if v.requires_grad]
    g = lambda x: f(L, x, w, b, y)          # noqa: E731
    if api == "jvp":
        out, tan = L.func.jvp(g, (x,), (L.tensor(T),))
    elif api == "jacfwd":
        out, tan = g(x), L.func.jacfwd(g)(x)
    else:
        out, tan = g(x), L.func.hessian(lambda x: g(x).sum())(x)
    flags = (out.requires_grad, tan.requires_grad)
    grads = None
    if leaves and tan.requires_grad:
        grads = L.autograd.grad(tan.sum(), leaves, allow_unused=True)
        grads = [None if v is None else _np(v) for v in grads]
    return flags, grads, _np(tan)


# torch 2.13's double backward through layer_norm's jvp tangent is wrong (off by up to 0.5 from
# finite differences): its gradients are checked against finite differences instead
TORCH_WRONG = {"layer_norm"}


def _finite_differences(f, tangent_sum_at, eps=1e-6):
    """Central differences of ``tangent_sum_at(x values)`` for X."""
    fd = np.zeros_like(X)
    for idx in np.ndindex(X.shape):
        d = np.zeros_like(X)
        d[idx] = eps
        fd[idx] = (tangent_sum_at(X + d) - tangent_sum_at(X - d)) / (2 * eps)
    return fd


@pytest.mark.parametrize("api", ["jvp", "jacfwd", "hessian"])
@pytest.mark.parametrize("rx, rc", [(False, True), (True, False), (True, True)])
@pytest.mark.parametrize("name, f", OPS, ids=[n for n, _ in OPS])
def test_transform_results_requires_grad_and_gradients(name, f, rx, rc, api):
    e_flags, e_grads, e_val = _run(ember, f, rx, rc, api)
    t_flags, t_grads, t_val = _run(torch, f, rx, rc, api)
    assert e_flags == t_flags
    np.testing.assert_allclose(e_val, t_val, rtol=1e-7, atol=1e-9)
    assert (e_grads is None) == (t_grads is None)
    if name in TORCH_WRONG and api == "jvp" and rx:
        b = ember.tensor(B)

        def tangent_sum_at(xv):
            return float(ember.func.jvp(lambda x: f(ember, x, None, b, None),
                                        (ember.tensor(xv),), (ember.tensor(T),))[1].sum())
        np.testing.assert_allclose(e_grads[0], _finite_differences(f, tangent_sum_at),
                                   atol=1e-6)
        return
    for eg, tg in zip(e_grads or (), t_grads or ()):
        assert (eg is None) == (tg is None)
        if eg is not None:
            np.testing.assert_allclose(eg, tg, rtol=1e-6, atol=1e-8)


def test_jvp_tangent_of_a_scalar_multiple_links_its_primal():
    for L in (ember, torch):
        x = L.tensor(X, requires_grad=True)
        _, tan = L.func.jvp(lambda x: x * 2.0, (x,), (L.tensor(T),))
        assert tan.requires_grad
        (g,) = L.autograd.grad(tan.sum(), [x])
        assert not g.any()


def test_mlp_jvp_parameters_gradients_through_the_tangent():
    res = {}
    for L in (ember, torch):
        L.manual_seed(0)
        layers = [L.nn.Linear(4, 5).double(), L.nn.Tanh(), L.nn.Linear(5, 2).double()]
        with L.no_grad():
            for i, p in enumerate(q for m in layers for q in m.parameters()):
                p.copy_(L.tensor(np.random.default_rng(i).standard_normal(tuple(p.shape))))
        mlp = L.nn.Sequential(*layers)
        _, tan = L.func.jvp(mlp, (L.tensor(X),), (L.tensor(T),))
        gs = L.autograd.grad((tan ** 2).sum(), list(mlp.parameters()), allow_unused=True)
        res[L.__name__] = [None if g is None else _np(g) for g in gs]
    assert res["ember"][-1] is None and res["torch"][-1] is None     # (the last bias)
    for eg, tg in zip(res["ember"][:-1], res["torch"][:-1]):
        np.testing.assert_allclose(eg, tg, rtol=1e-7, atol=1e-10)


INT_OPS = [
    ("mul_int", lambda L, x, i, m: x * i),
    ("rmul_int", lambda L, x, i, m: i * x),
    ("mul_bool", lambda L, x, i, m: x * m),
    ("mul_true", lambda L, x, i, m: x * True),
    ("mul_int_0dim", lambda L, x, i, m: x * L.tensor(2)),
    ("add_int", lambda L, x, i, m: x + i),
    ("sub_int", lambda L, x, i, m: x - i),
    ("div_int", lambda L, x, i, m: x / i),
    ("rdiv_int", lambda L, x, i, m: i / x),
    ("pow_int", lambda L, x, i, m: x.abs() ** i),   # (torch: NaN for a negative base)
    ("where_int", lambda L, x, i, m: L.where(m, x, i)),
    ("atan2_int", lambda L, x, i, m: L.atan2(x, i)),
    ("maximum_int", lambda L, x, i, m: L.maximum(x, i)),
]


@pytest.mark.parametrize("api", ["forward_ad", "jvp"])
@pytest.mark.parametrize("name, f", INT_OPS, ids=[n for n, _ in INT_OPS])
def test_integer_and_bool_operands_zero_tangent_terms(name, f, api):
    res = {}
    for L in (ember, torch):
        x = L.tensor([0.5, -1.5, 2.0], dtype=L.float64, requires_grad=True)
        t = L.tensor([1.0, 0.25, -2.0], dtype=L.float64)
        i, m = L.tensor([1, 2, 3]), L.tensor([True, False, True])
        if api == "jvp":
            _, tan = L.func.jvp(lambda x: f(L, x, i, m), (x,), (t,))
        else:
            fw = L.autograd.forward_ad
            with fw.dual_level():
                tan = fw.unpack_dual(f(L, fw.make_dual(x, t), i, m)).tangent
        g = _np(L.autograd.grad(tan.sum(), [x])[0]) if tan.requires_grad else None
        res[L.__name__] = (tan.requires_grad, _np(tan), g)
    (er, ev, eg), (tr, tv, tg) = res["ember"], res["torch"]
    assert er == tr
    np.testing.assert_allclose(ev, tv, rtol=1e-12, atol=1e-12)
    if tg is not None:
        np.testing.assert_allclose(eg, tg, rtol=1e-10, atol=1e-12)


LIN_OPS = [
    ("mul_scalar", lambda L, x, w: x * 2.0),
    ("matmul", lambda L, x, w: x @ w),
    ("add", lambda L, x, w: x + w[0]),
    ("square_sum", lambda L, x, w: (x * x).sum()),
]


@pytest.mark.parametrize("name, f", LIN_OPS, ids=[n for n, _ in LIN_OPS])
def test_linearize_tangent_of_a_primal_that_requires_grad(name, f):
    """Only the primal requires grad (a closure's tensor that does: see the report)."""
    res = {}
    for L in (ember, torch):
        x = L.tensor(X, requires_grad=True)
        w = L.tensor(W)
        _, fn = L.func.linearize(lambda x: f(L, x, w), x)
        tan = fn(L.tensor(T))
        g = L.autograd.grad(tan.sum(), [x], allow_unused=True)[0] if tan.requires_grad \
            else "none"
        res[L.__name__] = (tan.requires_grad, _np(tan), g is None)
    assert res["ember"][0] == res["torch"][0]
    assert res["ember"][2] == res["torch"][2]
    np.testing.assert_allclose(res["ember"][1], res["torch"][1], rtol=1e-10)
