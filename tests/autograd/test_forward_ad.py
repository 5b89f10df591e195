"""ember.autograd.forward_ad: dual tensors, checked against finite differences and reverse mode."""

import numpy as np
import pytest

import ember
import ember.autograd.forward_ad as fwAD
import ember.nn.functional as F
from ember import nn


def _rand(*shape, seed=0):
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=ember.float64)


def _jvp(f, primals, tangents):
    """The outputs' tangents of ``f`` at ``primals`` by forward AD."""
    with fwAD.dual_level():
        duals = [fwAD.make_dual(p, t) for p, t in zip(primals, tangents)]
        out = f(*duals)
        outs = out if isinstance(out, tuple) else (out,)
        result = [fwAD.unpack_dual(o) for o in outs]
    return [(r.primal, r.tangent) for r in result]


def _finite_difference(f, primals, tangents, eps=1e-6):
    plus = f(*[p + eps * t for p, t in zip(primals, tangents)])
    minus = f(*[p - eps * t for p, t in zip(primals, tangents)])
    plus = plus if isinstance(plus, tuple) else (plus,)
    minus = minus if isinstance(minus, tuple) else (minus,)
    return [(a - b) / (2 * eps) for a, b in zip(plus, minus)]


def _check(f, *primals, seed=1, atol=1e-6):
    tangents = [_rand(*p.shape, seed=seed + i) for i, p in enumerate(primals)]
    got = _jvp(f, primals, tangents)
    want = _finite_difference(f, primals, tangents)
    expected = f(*primals)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for (primal, tangent), value, w in zip(got, expected, want):
        np.testing.assert_allclose(primal.detach().numpy(), value.detach().numpy(), atol=1e-12)
        assert tangent is not None and tangent.shape == value.shape
        assert type(tangent) is ember.Tensor
        np.testing.assert_allclose(tangent.detach().numpy(), w.detach().numpy(), atol=atol,
                                   rtol=1e-5)


ELEMENTWISE = {
    "sin": lambda x: x.sin(), "exp": ember.exp, "tanh": ember.tanh, "sigmoid": ember.sigmoid,
    "relu": F.relu, "gelu": F.gelu, "softplus": F.softplus, "abs": ember.abs,
    "pow": lambda x: x ** 3, "rsub": lambda x: 2 - x, "div": lambda x: 1 / (x * x + 1),
    "clamp": lambda x: x.clamp(-0.5, 0.5), "where": lambda x: ember.where(x > 0, x, x * x),
}


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise(name):
    _check(ELEMENTWISE[name], _rand(3, 4))


def test_binary_broadcast_and_scalars():
    _check(lambda a, b: a * b + a / (b * b + 1) - 3.5, _rand(3, 1), _rand(4))
    _check(lambda a, b: ember.atan2(a, b), _rand(2, 3), _rand(2, 3, seed=4))
    _check(lambda a: a * ember.ones(3, dtype=ember.float64), _rand())


def test_only_some_inputs_dual():
    x, w = _rand(3, 4), _rand(4, 2, seed=5)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, ember.ones_like(x))
        y = d @ w
        assert fwAD.unpack_dual(w).tangent is None
        np.testing.assert_allclose(fwAD.unpack_dual(y).tangent.numpy(),
                                   (ember.ones_like(x) @ w).numpy())


def test_matmul_and_linalg():
    _check(lambda a, b: a @ b, _rand(3, 4), _rand(4, 5))
    _check(lambda a, b: ember.bmm(a, b), _rand(2, 3, 4), _rand(2, 4, 2))
    _check(lambda a: ember.einsum("ij,jk->ik", a, a.T), _rand(3, 3))
    _check(lambda a: ember.linalg.inv(a + 3 * ember.eye(3, dtype=ember.float64)), _rand(3, 3))


def test_reductions():
    _check(lambda a: a.sum(), _rand(3, 4))
    _check(lambda a: a.mean(dim=1, keepdim=True), _rand(3, 4))
    _check(lambda a: a.var(dim=0), _rand(3, 4))
    _check(lambda a: a.norm(), _rand(3, 4))
    _check(lambda a: ember.logsumexp(a, dim=-1), _rand(3, 4))
    _check(lambda a: a.amax(dim=1), _rand(3, 4))
    _check(lambda a: F.softmax(a, dim=1), _rand(3, 4))
    _check(lambda a: a.cumsum(0), _rand(5))


def test_several_outputs():
    x = _rand(3, 4)
    _check(lambda a: ember.max(a, dim=1).values, x)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, ember.ones_like(x))
        values, indices = ember.max(d, dim=1)
        assert fwAD.unpack_dual(indices).tangent is None
        assert type(indices) is ember.Tensor
        assert fwAD.unpack_dual(values).tangent.shape == (3,)
        parts = d.split(2, dim=1)
        assert all(fwAD.unpack_dual(p).tangent is not None for p in parts)
        assert (d > 0).dtype is ember.bool and type(d > 0) is ember.Tensor
    _check(lambda a: ember.sort(a, dim=1).values, x)
    _check(lambda a: a.unbind(0), x)


def test_views_and_indexing():
    x = _rand(3, 4)
    _check(lambda a: a.T, x)
    _check(lambda a: a.view(12)[2:9:3], x)
    _check(lambda a: a.reshape(2, 6).permute(1, 0).unsqueeze(0), x)
    _check(lambda a: a[1], x)
    _check(lambda a: a[ember.tensor([2, 0, 0])], x)
    _check(lambda a: a[a > 0], x)
    _check(lambda a: a.gather(1, ember.tensor([[0, 1], [2, 3], [1, 1]])), x)
    _check(lambda a, b: ember.cat([a, b, a]), x, _rand(2, 4))
    _check(lambda a, b: ember.stack([a, b], dim=1), x, _rand(3, 4))
    _check(lambda a: a.expand(2, 3, 4), x)


def test_view_tangent_is_a_view():
    x = _rand(3, 4)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, ember.zeros_like(x))
        v = d[1]
        tangent = fwAD.unpack_dual(v).tangent
        tangent.fill_(1.0)              # the view's tangent is a view of the base's tangent
        assert fwAD.unpack_dual(d).tangent[1].sum().item() == 4.0


def test_noncontiguous_and_empty():
    x = _rand(4, 3).T
    _check(lambda a: (a * a).sum(0), x)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, ember.ones(3, 4, dtype=ember.float64))
        assert fwAD.unpack_dual(d).tangent.stride() == x.stride()     # laid out as the primal
        y = d.contiguous().view(-1)
        assert fwAD.unpack_dual(y).tangent.shape == (12,)
    _check(lambda a: a.exp(), _rand(0, 3))
    _check(lambda a: a * 2, _rand())


def test_inplace_on_dual():
    x = _rand(3)
    with fwAD.dual_level():
        tangent = ember.ones(3, dtype=ember.float64)
        d = fwAD.make_dual(x.clone(), tangent)
        d.mul_(d)                               # tangent from the values before the write
        np.testing.assert_allclose(fwAD.unpack_dual(d).tangent.numpy(), 2 * x.numpy())
        assert fwAD.unpack_dual(d).tangent is tangent       # updated in place, as PyTorch
        d.sin_()
        np.testing.assert_allclose(fwAD.unpack_dual(d).primal.numpy(), np.sin(x.numpy() ** 2))
        np.testing.assert_allclose(fwAD.unpack_dual(d).tangent.numpy(),
                                   np.cos(x.numpy() ** 2) * 2 * x.numpy())
        c = d.clone()
        c.add_(1.0)
        c.mul_(3.0)                             # a clone's tangent is its own
        np.testing.assert_allclose(fwAD.unpack_dual(d).tangent.numpy(),
                                   np.cos(x.numpy() ** 2) * 2 * x.numpy())


def test_inplace_makes_plain_tensor_dual():
    x = _rand(3)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, ember.full((3,), 2.0, dtype=ember.float64))
        y = ember.zeros(3, dtype=ember.float64)
        y.add_(d)
        assert fwAD.unpack_dual(y).tangent.tolist() == [2.0, 2.0, 2.0]
        w = ember.zeros(3, dtype=ember.float64)
        w[1] = d[0]                             # through a view: the base gets a tangent
        assert fwAD.unpack_dual(w).tangent.tolist() == [0.0, 2.0, 0.0]
        z = ember.zeros(4, dtype=ember.float64)
        z[1:3] = d[:2] * 3
        assert fwAD.unpack_dual(z).tangent.tolist() == [0.0, 6.0, 6.0, 0.0]
        z.copy_(ember.ones(4, dtype=ember.float64))
        assert fwAD.unpack_dual(z).tangent.tolist() == [0.0] * 4


def test_inplace_through_view_of_dual():
    x = _rand(4)
    with fwAD.dual_level():
        d = fwAD.make_dual(x.clone(), ember.ones(4, dtype=ember.float64))
        d[1:3].mul_(10)
        assert fwAD.unpack_dual(d).tangent.tolist() == [1.0, 10.0, 10.0, 1.0]
        d.t_()
        d.unsqueeze_(0)
        assert d.shape == fwAD.unpack_dual(d).tangent.shape == (1, 4)


def test_out_argument():
    x = _rand(3)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, ember.ones(3, dtype=ember.float64))
        out = ember.empty(3, dtype=ember.float64)
        ember.mul(d, 3, out=out)
        assert fwAD.unpack_dual(out).tangent.tolist() == [3.0] * 3


MODULES = {
    "linear": lambda: nn.Linear(4, 3),
    "conv1d": lambda: nn.Conv1d(2, 3, 3, padding=1),
    "conv2d": lambda: nn.Conv2d(2, 3, 3, stride=2),
    "batchnorm": lambda: nn.BatchNorm1d(4),
    "layernorm": lambda: nn.LayerNorm(4),
    "mlp": lambda: nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)),
    "lstm": lambda: nn.LSTM(4, 3, batch_first=True),
    "attention": lambda: nn.MultiheadAttention(4, 2, batch_first=True),
}
SHAPES = {"conv1d": (2, 2, 5), "conv2d": (2, 2, 5, 5), "lstm": (2, 3, 4), "attention": (2, 3, 4)}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules(name):
    ember.manual_seed(0)
    module = MODULES[name]().double()
    x = _rand(*SHAPES.get(name, (5, 4)))
    if name == "lstm":
        _check(lambda a: module(a)[0], x)
    elif name == "attention":
        _check(lambda a: module(a, a, a)[0], x)
    else:
        _check(module, x)


def test_batchnorm_running_stats_stay_plain():
    bn = nn.BatchNorm1d(4).double()
    with fwAD.dual_level():
        bn(fwAD.make_dual(_rand(5, 4), _rand(5, 4, seed=3)))
        assert type(bn.running_mean) is not type(fwAD.make_dual(_rand(1), _rand(1)))


def test_losses():
    x, target = _rand(5, 3), _rand(5, 3, seed=9)
    _check(lambda a: F.mse_loss(a, target), x)
    _check(lambda a: F.cross_entropy(a, ember.tensor([0, 2, 1, 1, 0])), x)
    _check(lambda a: F.binary_cross_entropy_with_logits(a, target.sigmoid()), x)
    _check(lambda a, b: F.smooth_l1_loss(a, b), x, target)


def test_jvp_matches_reverse_mode_jacobian():
    x = _rand(3)
    f = lambda a: ember.stack([a.prod(), (a * a).sum(), a[0] * a[2].exp()])   # noqa: E731
    jac = ember.autograd.functional.jacobian(f, x)
    t = _rand(3, seed=2)
    (_, tangent), = _jvp(f, [x], [t])
    np.testing.assert_allclose(tangent.numpy(), (jac @ t).numpy(), atol=1e-12)


class _Scale(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, k):
        assert type(x) is ember.Tensor and fwAD.unpack_dual(x).tangent is None
        ctx.save_for_forward(x, y)
        ctx.k = k
        return x * y * k

    @staticmethod
    def jvp(ctx, tx, ty, tk):
        x, y = ctx.saved_tensors
        assert tk is None and fwAD.unpack_dual(x).tangent is None
        return (tx * y + x * ty) * ctx.k

    @staticmethod
    def backward(ctx, g):
        return g, g, None


def test_custom_function_jvp():
    x, y = _rand(3), _rand(3, seed=5)
    with fwAD.dual_level():
        out = _Scale.apply(fwAD.make_dual(x, ember.ones_like(x)), y, 2.0)
        np.testing.assert_allclose(fwAD.unpack_dual(out).tangent.numpy(), 2 * y.numpy())
        out = _Scale.apply(fwAD.make_dual(x, ember.ones_like(x)),
                           fwAD.make_dual(y, 3 * ember.ones_like(y)), 2.0)
        np.testing.assert_allclose(fwAD.unpack_dual(out).tangent.numpy(),
                                   2 * (y + 3 * x).numpy())
    assert type(_Scale.apply(x, y, 2.0)) is ember.Tensor          # no level: plain as ever


def test_custom_function_errors():
    class NoJvp(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    class TooFew(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def jvp(ctx, t):
            return t * 2

    class WrongShape(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def jvp(ctx, t):
            return t[:1]

    class Dirty(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def jvp(ctx, t):
            return t * 2

    class DirtyInPlace(Dirty):
        @staticmethod
        def jvp(ctx, t):
            return t.mul_(2)

    x = _rand(2)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, ember.ones_like(x))
        with pytest.raises(NotImplementedError, match="You must implement the jvp function"):
            NoJvp.apply(d)
        with pytest.raises(RuntimeError, match=r"invalid number of forward gradients \(expected "
                                               r"2 but got 1\)"):
            TooFew.apply(d)
        with pytest.raises(RuntimeError, match="different size"):
            WrongShape.apply(d)
        with pytest.raises(RuntimeError, match="not modifying the forward mode gradients"):
            Dirty.apply(fwAD.make_dual(x.clone(), ember.ones_like(x)))
        a = fwAD.make_dual(x.clone(), ember.ones_like(x))
        assert DirtyInPlace.apply(a) is a
        assert fwAD.unpack_dual(a).tangent.tolist() == [2.0, 2.0]
        ctx = ember.autograd.function.FunctionCtx()
        with pytest.raises(AssertionError, match="save_for_forward expects all arguments"):
            ctx.save_for_forward(x, 3)


def test_reverse_over_forward():
    x = _rand(3).requires_grad_()
    t = _rand(3, seed=2)
    with fwAD.dual_level():
        y = (fwAD.make_dual(x, t) ** 3).sum()
        jvp = fwAD.unpack_dual(y).tangent          # sum(3 x^2 t)
        grad, = ember.autograd.grad(jvp, x)
    np.testing.assert_allclose(grad.detach().numpy(), (6 * x * t).detach().numpy())
    assert type(grad) is ember.Tensor


def test_forward_over_reverse_hvp():
    x = _rand(3).requires_grad_()
    v = _rand(3, seed=2)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, v)
        y = (d.sin() * d).sum()
        g, = ember.autograd.grad(y, d)
        hvp = fwAD.unpack_dual(g).tangent
    xs = x.detach().numpy()
    hessian_diag = 2 * np.cos(xs) - xs * np.sin(xs)
    np.testing.assert_allclose(hvp.numpy(), hessian_diag * v.numpy(), atol=1e-12)


def test_tangent_requiring_grad():
    x = _rand(3)
    t = _rand(3, seed=4).requires_grad_()
    with fwAD.dual_level():
        jvp = fwAD.unpack_dual((fwAD.make_dual(x, t) ** 2).sum()).tangent
    grad, = ember.autograd.grad(jvp, t)
    np.testing.assert_allclose(grad.numpy(), 2 * x.numpy())


def test_levels():
    x = _rand(3)
    assert fwAD.enter_dual_level() == 0
    d = fwAD.make_dual(x, ember.ones_like(x))
    y = d * 2
    with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
        fwAD.enter_dual_level()
    with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
        with fwAD.dual_level():
            pass
    fwAD.exit_dual_level(level=0)
    # the level's duals are plain tensors again
    assert type(d) is ember.Tensor and type(y) is ember.Tensor
    assert fwAD.unpack_dual(y) == (y, None)
    assert repr(y) == repr(x * 2)
    with pytest.raises(RuntimeError, match="Dual level must be a positive number."):
        fwAD.exit_dual_level()
    with fwAD.dual_level() as level:
        assert level == 0
        with pytest.raises(RuntimeError, match="was not the last one that was created"):
            fwAD.exit_dual_level(level=3)
    with fwAD.dual_level():
        assert fwAD.unpack_dual(d).tangent is None

    @fwAD.dual_level()
    def decorated(a):
        return fwAD.unpack_dual(fwAD.make_dual(a, a) * 3).tangent
    assert decorated(x).tolist() == (3 * x).tolist()


def test_make_dual_errors():
    x = _rand(3)
    with pytest.raises(RuntimeError, match="no level exists, make sure to enter_dual_level"):
        fwAD.make_dual(x, x)
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match=r"Tensor is of size \[3\] while the given forward "
                                               r"gradient is of size \[2\]\."):
            fwAD.make_dual(x, ember.ones(2))
        with pytest.raises(ValueError, match="Expected primal to be floating point or complex, "
                                             "but got: ember.int64"):
            fwAD.make_dual(ember.tensor([1, 2]), ember.ones(2))
        with pytest.raises(ValueError, match="Expected tangent to be floating point"):
            fwAD.make_dual(x, ember.tensor([1, 2, 3]))
        with pytest.raises(RuntimeError, match="Invalid level given to _make_dual"):
            fwAD.make_dual(x, x, level=5)
        d = fwAD.make_dual(x, x)
        with pytest.raises(RuntimeError, match="already has a forward gradient at the same "
                                               "level 0"):
            fwAD.make_dual(d, x)
        with pytest.raises(RuntimeError, match="itself has a forward gradient"):
            fwAD.make_dual(x, d)
        with pytest.raises(RuntimeError, match="Invalid level given to _fw_primal"):
            fwAD.unpack_dual(d, level=5)
        with pytest.raises(TypeError, match="must be Tensor, not int"):
            fwAD.unpack_dual(3)
        # float32 primal, float64 tangent: kept as given, as in PyTorch
        mixed = fwAD.make_dual(ember.ones(2), ember.ones(2, dtype=ember.float64))
        assert fwAD.unpack_dual(mixed).tangent.dtype is ember.float64


def test_make_dual_is_a_view():
    x = _rand(3)
    t = _rand(3, seed=3)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, t)
        assert isinstance(d, ember.Tensor)
        primal, tangent = fwAD.unpack_dual(d)
        assert tangent is t and type(primal) is ember.Tensor
        assert primal.data_ptr() == x.data_ptr() == d.data_ptr()
        assert fwAD.make_dual(x.requires_grad_(), t).grad_fn.name() == "ViewBackward0"


def test_printing():
    with fwAD.dual_level():
        d = fwAD.make_dual(ember.tensor([1.0, 2.0, 3.0]), ember.ones(3))
        assert repr(d) == "tensor([1., 2., 3.], tangent=tensor([1., 1., 1.]))"
        assert str(d) == repr(d)
        s = fwAD.make_dual(ember.tensor(1.5), ember.tensor(2.0))
        assert repr(s) == "tensor(1.5000, tangent=2.0)"
        w = fwAD.make_dual(ember.tensor([1.5] * 6), ember.tensor([2.0] * 6))
        assert repr(w) == ("tensor([1.5000, 1.5000, 1.5000, 1.5000, 1.5000, 1.5000],\n"
                           "       tangent=tensor([2., 2., 2., 2., 2., 2.]))")
        g = fwAD.make_dual(ember.tensor([1.5], requires_grad=True), ember.tensor([2.0]))
        assert repr(g) == "tensor([1.5000], grad_fn=<ViewBackward0>, tangent=tensor([2.]))"
        h = fwAD.make_dual(ember.tensor([1.5], dtype=ember.float64),
                           ember.tensor([2.0], dtype=ember.float64))
        assert repr(h) == ("tensor([1.5000], dtype=ember.float64,\n"
                           "       tangent=tensor([2.], dtype=ember.float64))")


def test_unpacked_dual_tensor():
    u = fwAD.UnpackedDualTensor(1, 2)
    assert u.primal == 1 and u.tangent == 2 and tuple(u) == (1, 2)
    assert fwAD.UnpackedDualTensor._fields == ("primal", "tangent")
    assert ember.autograd.forward_ad is fwAD


def test_random_fills_and_unsupported_inplace():
    with fwAD.dual_level():
        d = fwAD.make_dual(_rand(3), ember.ones(3, dtype=ember.float64))
        for fill in ("uniform_", "normal_", "exponential_", "bernoulli_"):
            getattr(d, fill)()
            assert fwAD.unpack_dual(d).tangent.tolist() == [0.0] * 3
            fwAD.unpack_dual(d).tangent.fill_(1.0)
        with pytest.raises(RuntimeError, match="cannot resize variables that has a forward grad"):
            d.resize_(4)
        with pytest.raises(NotImplementedError, match="Trying to use forward AD with set_"):
            d.set_(ember.zeros(3))


def test_no_grad_and_dtype_conversions():
    x = _rand(3)
    with fwAD.dual_level():
        d = fwAD.make_dual(x.float(), ember.ones(3))
        with ember.no_grad():
            y = d.exp()
        np.testing.assert_allclose(fwAD.unpack_dual(y).tangent.numpy(), np.exp(x.numpy()),
                                   rtol=1e-6)
        z = d.double()
        assert fwAD.unpack_dual(z).tangent.dtype is ember.float64
        assert fwAD.unpack_dual(d.detach()).tangent is None
        assert d.tolist() == x.float().tolist() and len(d) == 3


@pytest.mark.cuda
def test_cuda_matches_cpu():
    if not ember.cuda.is_available():
        pytest.skip("needs CuPy and a CUDA GPU")
    x, t = _rand(3, 4), _rand(3, 4, seed=2)
    results = []
    for device in ("cpu", "cuda"):
        with fwAD.dual_level():
            d = fwAD.make_dual(x.to(device), t.to(device))
            y = (d.sin() @ d.T).sum(1)
            z = d.clone()
            z[1:].mul_(2)
            results.append([fwAD.unpack_dual(r).tangent.cpu().numpy() for r in (y, z)])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_vmap_over_duals():
    x, t = _rand(3, 4), _rand(3, 4, seed=2)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, t)
        y = ember.func.vmap(lambda row: row.sin() * row.sum())(d)
        tangent = fwAD.unpack_dual(y).tangent
        with pytest.raises(RuntimeError, match="Batching rule not implemented for "
                                               "aten::_make_dual"):    # (as PyTorch)
            ember.func.vmap(lambda row: fwAD.make_dual(row, row))(x)
    (_, want), = _jvp(lambda a: a.sin() * a.sum(1, keepdim=True), [x], [t])
    np.testing.assert_allclose(tangent.numpy(), want.numpy(), atol=1e-12)


def test_a_dual_tensor_saves_as_its_primal(tmp_path):
    with fwAD.dual_level():
        dual = fwAD.make_dual(ember.ones(3), ember.ones(3)) * 2
        ember.save({"d": dual}, tmp_path / "d.pt")
    loaded = ember.load(tmp_path / "d.pt")["d"]
    assert type(loaded) is ember.Tensor and loaded.tolist() == [2.0, 2.0, 2.0]


class _SquareJvpOnly(ember.autograd.Function):
    """x ** 2 with a jvp rule and no backward, as in the forward-mode AD tutorial."""

    @staticmethod
    def forward(ctx, x):
        ctx.x = x
        return x ** 2

    @staticmethod
    def jvp(ctx, gx):
        return gx * 2 * ctx.x


class _SquareWrongJvp(_SquareJvpOnly):
    @staticmethod
    def jvp(ctx, gx):
        return gx * 3 * ctx.x


def test_gradcheck_checks_forward_ad_only_when_asked():
    x = ember.tensor([1.0, 2.0, -3.0], dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(_SquareJvpOnly.apply, (x,), check_forward_ad=True,
                                    check_backward_ad=False, check_undefined_grad=False)
    assert not ember.autograd.gradcheck(_SquareWrongJvp.apply, (x,), check_forward_ad=True,
                                        check_backward_ad=False, raise_exception=False)
    with pytest.raises(RuntimeError,
                       match="Jacobian computed with forward mode mismatch for output 0"):
        ember.autograd.gradcheck(_SquareWrongJvp.apply, (x,), check_forward_ad=True,
                                 check_backward_ad=False)
    # both modes of a built-in op
    assert ember.autograd.gradcheck(lambda a: (a.sin() * a, a.exp()), (x,), check_forward_ad=True)


def test_batch_norm_on_a_dual_updates_running_statistics_once():
    """The tangent's second run of the op works on copies of the running statistics."""
    bn = nn.BatchNorm1d(2)
    x = ember.tensor([[1.0, 2.0], [3.0, 5.0]])
    with fwAD.dual_level():
        out = bn(fwAD.make_dual(x, ember.ones(2, 2)))
        tangent = fwAD.unpack_dual(out).tangent
    np.testing.assert_allclose(bn.running_mean.numpy(), [0.2, 0.35], rtol=1e-6)
    np.testing.assert_allclose(bn.running_var.numpy(), [1.1, 1.35], rtol=1e-6)
    assert bn.num_batches_tracked.item() == 1
    np.testing.assert_allclose(tangent.detach().numpy(), np.zeros((2, 2)), atol=1e-6)


def test_batch_norm_statistics_held_in_parameters_also_move_once():
    """Running statistics given as Parameters that need no gradient are copied as well."""
    mean = nn.Parameter(ember.zeros(2), requires_grad=False)
    x = ember.tensor([[1.0, 2.0], [3.0, 5.0]])
    with fwAD.dual_level():
        ember.nn.functional.batch_norm(fwAD.make_dual(x, ember.ones(2, 2)), mean,
                                       ember.ones(2), training=True)
    np.testing.assert_allclose(mean.detach().numpy(), [0.2, 0.35], rtol=1e-6)


def test_as_strided_of_a_dual_view_indexes_the_storage():
    """as_strided of a dual transposed view reads the base's storage, as for plain tensors
    (the dual took its input's values as a storage of their own, in the view's order)."""
    x = ember.arange(12.0, dtype=ember.float64).reshape(3, 4)
    with fwAD.dual_level():
        y = fwAD.make_dual(x, x * 10).T
        primal, tangent = fwAD.unpack_dual(y.as_strided((2, 3), (2, 3), 1))
        scattered = fwAD.unpack_dual(ember.as_strided_scatter(
            y, ember.zeros(2, 3, dtype=ember.float64), (2, 3), (2, 3), 1))
    assert primal.tolist() == [[1.0, 4.0, 7.0], [3.0, 6.0, 9.0]]
    assert tangent.tolist() == [[10.0, 40.0, 70.0], [30.0, 60.0, 90.0]]
    assert scattered.primal.tolist() == [[0.0, 0.0, 8.0], [0.0, 5.0, 0.0], [2.0, 0.0, 10.0],
                                         [0.0, 0.0, 11.0]]
    assert scattered.tangent.tolist() == [[0.0, 0.0, 80.0], [0.0, 50.0, 0.0],
                                          [20.0, 0.0, 100.0], [0.0, 0.0, 110.0]]


def test_tangent_of_a_view_primal_has_the_primal_storage_geometry():
    """As PyTorch, make_dual lays the tangent out in a storage like the primal's (offset and
    size), so as_strided reads zeros where the primal's storage lies outside it."""
    base = ember.arange(6.0, dtype=ember.float64)
    with fwAD.dual_level():
        dual = fwAD.make_dual(base[2:], ember.ones(4, dtype=ember.float64))
        tangent = fwAD.unpack_dual(dual).tangent
        window = fwAD.unpack_dual(dual.as_strided((3,), (1,), 1))
    assert tangent.storage_offset() == 2
    assert tangent.untyped_storage().nbytes() == 48
    assert tangent.tolist() == [1.0] * 4
    assert window.primal.tolist() == [1.0, 2.0, 3.0]
    assert window.tangent.tolist() == [0.0, 1.0, 1.0]


def test_logcumsumexp_tangent():
    """The masks of logcumsumexp's log-space gradient cut its dependence on a zero cotangent,
    where forward AD differentiates it: the tangent was 0."""
    x, t = _rand(5), _rand(5, seed=3)
    weights = np.tril(np.exp(x.numpy()[None, :] - np.logaddexp.accumulate(x.numpy())[:, None]))
    for fn in (lambda a: ember.logcumsumexp(a, 0),
               lambda a: ember.logcumsumexp(a.to(ember.complex128), 0).real):
        (_, tangent), = _jvp(fn, [x], [t])
        np.testing.assert_allclose(tangent.numpy(), weights @ t.numpy(), rtol=1e-10)
    _, jvp_out = ember.func.jvp(lambda a: ember.logcumsumexp(a, 0), (x,), (t,))
    np.testing.assert_allclose(jvp_out.numpy(), weights @ t.numpy(), rtol=1e-10)


def test_op_with_a_backward_that_is_not_differentiable_raises():
    """ctc_loss's backward has no derivative: its tangent is unknown (it was silently 0)."""
    log_probs = _rand(5, 2, 4).log_softmax(2)
    targets = ember.tensor([[1, 2], [3, 1]])
    with fwAD.dual_level():
        dual = fwAD.make_dual(log_probs, ember.ones_like(log_probs))
        with pytest.raises(NotImplementedError,
                           match="Trying to use forward AD with _ctc_loss that does not support"):
            F.ctc_loss(dual, targets, [5, 4], [2, 2])
    (_, tangent), = _jvp(lambda a: a.round() * a, [log_probs], [ember.ones_like(log_probs)])
    assert tangent is not None      # a zero derivative (round's) is no such case


def test_embedding_tangent_is_the_lookup_of_the_weight_tangent():
    # PyTorch's forward formula is embedding(weight_t, indices): padding_idx and
    # scale_grad_by_freq shape the backward only (the first pass of the double vjp runs
    # under PULLING, which takes that formula)
    fa = ember.autograd.forward_ad
    idx = ember.tensor([0, 2, 2, 4])
    tangent = ember.arange(15, dtype=ember.float64).reshape(5, 3)
    for kw in [{}, {"padding_idx": 2}, {"scale_grad_by_freq": True, "padding_idx": 0}]:
        with fa.dual_level():
            w = fa.make_dual(ember.zeros(5, 3, dtype=ember.float64), tangent)
            y = ember.nn.functional.embedding(idx, w, **kw)
            got = fa.unpack_dual(y).tangent
        np.testing.assert_array_equal(got.numpy(), tangent.numpy()[[0, 2, 2, 4]])
