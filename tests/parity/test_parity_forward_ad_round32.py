"""forward_ad tangents whose formula reads a primal that requires grad (round 32): whether the
tangent requires grad, and the double backward through it, against torch."""

import numpy as np
import pytest

import ember
import ember.autograd.forward_ad as efw

torch = pytest.importorskip("torch")
tfw = pytest.importorskip("torch.autograd.forward_ad")
pytestmark = pytest.mark.parity

LIBS = {"ember": (ember, efw), "torch": (torch, tfw)}

_RNG = np.random.default_rng(0)
X = _RNG.standard_normal((3, 4))
Y = np.abs(_RNG.standard_normal((3, 4))) + 0.5
W = _RNG.standard_normal((4, 2))
T = _RNG.standard_normal((3, 4))

# (name, f(lib, x, y, w)): torch's layer_norm / batch_norm / softmax / log_softmax / logsumexp /
# cross_entropy double backward through the tangent is wrong or raises in torch 2.13 (their
# requires_grad still agrees): those are checked for requires_grad only (see NUMERIC_SKIP)
OPS = [
    ("mul_scalar", lambda L, x, y, w: x * 2.0),
    ("mul_int", lambda L, x, y, w: x * 2),
    ("mul_self", lambda L, x, y, w: x * x),
    ("mul_tensor", lambda L, x, y, w: x * y),
    ("rmul_tensor", lambda L, x, y, w: y * x),
    ("mul_0dim", lambda L, x, y, w: x * L.tensor(2.0, dtype=L.float64)),
    ("add", lambda L, x, y, w: x + y),
    ("add_alpha", lambda L, x, y, w: x.add(y, alpha=2.0)),
    ("sub_scalar", lambda L, x, y, w: x - 1),
    ("rsub", lambda L, x, y, w: 2.0 - x),
    ("neg", lambda L, x, y, w: -x),
    ("div_tensor", lambda L, x, y, w: x / y),
    ("rdiv_tensor", lambda L, x, y, w: y / x),
    ("div_scalar", lambda L, x, y, w: x / 3.0),
    ("matmul", lambda L, x, y, w: x @ w),
    ("linear", lambda L, x, y, w: L.nn.functional.linear(x, w.t())),
    ("addmm", lambda L, x, y, w: L.addmm(y[:, :2], x, w)),
    ("dot", lambda L, x, y, w: x[0].dot(y[0])),
    ("addcmul", lambda L, x, y, w: L.addcmul(y, x, y, value=0.5)),
    ("log_mul", lambda L, x, y, w: y.log() * x),
    ("sin", lambda L, x, y, w: x.sin()),
    ("exp", lambda L, x, y, w: x.exp()),
    ("tanh", lambda L, x, y, w: x.tanh()),
    ("sigmoid", lambda L, x, y, w: x.sigmoid()),
    ("relu", lambda L, x, y, w: x.relu()),
    ("abs", lambda L, x, y, w: x.abs()),
    ("pow2", lambda L, x, y, w: x ** 2),
    ("pow_tensor", lambda L, x, y, w: y.pow(x)),
    ("sqrt", lambda L, x, y, w: (x.abs() + 1).sqrt()),
    ("sum", lambda L, x, y, w: x.sum()),
    ("sum_dim", lambda L, x, y, w: x.sum(1)),
    ("mean", lambda L, x, y, w: x.mean()),
    ("prod", lambda L, x, y, w: x.prod()),
    ("amax", lambda L, x, y, w: x.amax(1)),
    ("maximum", lambda L, x, y, w: L.maximum(x, y)),
    ("clamp", lambda L, x, y, w: x.clamp(-0.5, 0.5)),
    ("lerp_scalar", lambda L, x, y, w: x.lerp(y, 0.3)),
    ("where", lambda L, x, y, w: L.where(y > 1, x, y)),
    ("masked_fill", lambda L, x, y, w: x.masked_fill(y > 1, 0.0)),
    ("cat", lambda L, x, y, w: L.cat([x, y])),
    ("view", lambda L, x, y, w: x.view(12)),
    ("clone", lambda L, x, y, w: x.clone()),
    ("cumsum", lambda L, x, y, w: x.cumsum(1)),
    ("norm", lambda L, x, y, w: x.norm()),
    ("std", lambda L, x, y, w: x.std()),
    ("var_dim", lambda L, x, y, w: x.var(1)),
    ("mse", lambda L, x, y, w: L.nn.functional.mse_loss(x, y)),
    ("softmax", lambda L, x, y, w: x.softmax(1)),
    ("log_softmax", lambda L, x, y, w: x.log_softmax(1)),
    ("layer_norm", lambda L, x, y, w: L.nn.functional.layer_norm(x, (4,))),
]
NUMERIC_SKIP = {"softmax", "log_softmax", "layer_norm"}


def _tangent(lib, fw, fn, mode):
    """(tangent, the tensor it is differentiated by) with ``mode`` saying which requires
    grad: "x" (the primal), "t" (the tangent), "y" (the other operands), "" (none)."""
    x, y, w, t = (lib.tensor(a) for a in (X, Y, W, T))
    src = {"x": x, "t": t, "y": y}.get(mode)
    if mode == "y":
        w.requires_grad_()
    if src is not None:
        src.requires_grad_()
    with fw.dual_level():
        out = fn(lib, fw.make_dual(x, t), y, w)
        tangent = fw.unpack_dual(out).tangent
    return tangent, src


def _weighted_grad(lib, tangent, src):
    weights = lib.arange(1.0, tangent.numel() + 1, dtype=lib.float64).reshape(tangent.shape)
    (g,) = lib.autograd.grad((tangent * weights).sum(), src, allow_unused=True)
    return None if g is None else g.detach().numpy(force=True)    # (torch's may be a ZeroTensor)


@pytest.mark.parametrize("mode", ["x", "t", "y", ""])
@pytest.mark.parametrize("name,fn", OPS, ids=[n for n, _ in OPS])
def test_tangent_requires_grad_as_torch(name, fn, mode):
    ours, src = _tangent(ember, efw, fn, mode)
    theirs, tsrc = _tangent(torch, tfw, fn, mode)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), atol=1e-12)
    assert ours.requires_grad == theirs.requires_grad
    if not theirs.requires_grad or name in NUMERIC_SKIP and mode == "x":
        return
    g, tg = _weighted_grad(ember, ours, src), _weighted_grad(torch, theirs, tsrc)
    assert (g is None) == (tg is None)
    if g is not None:
        np.testing.assert_allclose(g, tg, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", ["mul_scalar", "mul_tensor", "matmul", "addcmul", "dot"])
def test_zero_term_node_is_add_backward(name):
    fn = dict(OPS)[name]
    ours, _ = _tangent(ember, efw, fn, "x")
    theirs, _ = _tangent(torch, tfw, fn, "x")
    assert type(ours.grad_fn).__name__ == type(theirs.grad_fn).__name__ == "AddBackward0"


def test_layer_norm_double_backward_matches_finite_differences():
    """torch 2.13's layer_norm tangent gives a wrong gradient for the primal (the tangent of a
    layer norm sums to zero along the normalized dim, so the gradient of its sum is zero)."""
    ours, src = _tangent(ember, efw, dict(OPS)["layer_norm"], "x")
    (g,) = ember.autograd.grad(ours.sum(), src)
    np.testing.assert_allclose(g.numpy(), 0.0, atol=1e-12)


def test_hvp_with_scalar_factor():
    """Forward over reverse through ``x * 2.0`` on a tensor requiring grad: the gradient of
    the tangent is zero, as torch's."""
    for lib, fw in LIBS.values():
        x = lib.tensor(X, requires_grad=True)
        with fw.dual_level():
            tangent = fw.unpack_dual((fw.make_dual(x, lib.tensor(T)) * 2.0).sin()).tangent
        (g,) = lib.autograd.grad(tangent.sum(), x)
        assert g.shape == (3, 4)
    ours = _weighted_grad(ember, *_tangent(ember, efw, lambda L, x, y, w: (x * 2.0).sin(), "x"))
    theirs = _weighted_grad(torch, *_tangent(torch, tfw, lambda L, x, y, w: (x * 2.0).sin(),
                                             "x"))
    np.testing.assert_allclose(ours, theirs, rtol=1e-10)


@pytest.mark.parametrize("name", ["mul_tensor", "div_tensor", "matmul", "pow_tensor"])
def test_primal_reached_only_by_a_zero_term_gets_zeros(name):
    """x and the other operands both require grad: the tangent's gradient for x is zeros
    (torch's zero-tangent term reads x), not an "unused" error."""
    fn = dict(OPS)[name]
    grads = []
    for lib, fw in (LIBS["ember"], LIBS["torch"]):
        x, y, w = (lib.tensor(a, requires_grad=True) for a in (X, Y, W))
        with fw.dual_level():
            tangent = fw.unpack_dual(fn(lib, fw.make_dual(x, lib.tensor(T)), y, w)).tangent
        grads.append([g.detach().numpy(force=True) for g in
                      lib.autograd.grad(tangent.sum(), (x, y, w), allow_unused=True,
                                        materialize_grads=True)])
    for g, tg in zip(*grads):
        np.testing.assert_allclose(g, tg, rtol=1e-10, atol=1e-12)


def _linearize_draws(lib):
    """linearize of a function with dropout: (two jvp_fn results, whether a jvp_fn call
    moves the default generator, the same for a function without random ops)."""
    x = lib.ones(64, dtype=lib.float64)
    ones = lib.ones(64, dtype=lib.float64)

    def after(fn, call):
        lib.manual_seed(0)
        _, jvp_fn = lib.func.linearize(fn, x)
        if call:
            jvp_fn(ones)
        return lib.rand(4)
    dropped = lambda v: lib.nn.functional.dropout(v, 0.5, training=True) * 2      # noqa: E731
    plain = lambda v: v.sin() * 2                                                 # noqa: E731
    _, jvp_fn = lib.func.linearize(dropped, x)
    return ((jvp_fn(ones), jvp_fn(ones)),
            not lib.equal(after(dropped, False), after(dropped, True)),
            not lib.equal(after(plain, False), after(plain, True)))


def test_linearize_jvp_fn_draws_anew_per_call():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = _linearize_draws(torch)
    ours = _linearize_draws(ember)
    for (a, b), moved, moved_plain in (ours, theirs):
        assert set(np.unique(a.numpy())) <= {0.0, 4.0}
        assert not np.array_equal(a.numpy(), b.numpy())
        assert moved and not moved_plain
    assert ours[1:] == theirs[1:]


@pytest.mark.parametrize("case", ["add_one", "add_a", "argnums1", "closure"])
def test_grad_with_a_write_into_an_undifferentiated_argument(case):
    """func.grad(f)(a, b) where f writes into b in place: b keeps the write, the gradient is
    taken at the written values; differentiating by b or writing a closure's tensor raises."""
    results = []
    for lib in (ember, torch):
        a, b, c = lib.tensor([1.0, 2.0]), lib.tensor([3.0, 4.0]), lib.tensor([3.0, 4.0])
        f = {"add_one": lambda a, b: (a * b.add_(1)).sum(),
             "add_a": lambda a, b: (a * b.add_(a)).sum(),
             "argnums1": lambda a, b: (a * b.add_(1)).sum(),
             "closure": lambda a, b: (a * c.add_(1)).sum()}[case]
        try:
            g = lib.func.grad(f, argnums=1 if case == "argnums1" else 0)(a, b)
            results.append((g.tolist(), b.tolist()))
        except RuntimeError as e:
            results.append((type(e).__name__, str(e)))
    assert results[0] == results[1]


@pytest.mark.parametrize("case", ["add", "clone", "identity", "view", "mul"])
def test_func_jvp_tangent_requiring_grad_is_a_new_tensor_but_for_an_identity(case):
    """func.jvp with a tangent that requires grad: an op's tangent output is a new tensor
    (ember's engine handed ``t`` itself back through an identity node); a returned input's
    is ``t`` itself, a view's a view of it, as torch's."""
    f = {"add": lambda a: a + 1, "clone": lambda a: a.clone(), "identity": lambda a: a,
         "view": lambda a: a.view(3), "mul": lambda a: a * 2}[case]
    seen = []
    for lib in (ember, torch):
        t = lib.ones(3, requires_grad=True)
        _, tangent = lib.func.jvp(f, (lib.ones(3),), (t,))
        (g,) = lib.autograd.grad(tangent.sum(), t)
        seen.append((tangent is t, tangent._base is t, tangent.requires_grad, tangent.is_leaf,
                     g.tolist()))
    assert seen[0] == seen[1]
