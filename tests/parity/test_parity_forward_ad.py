"""ember.autograd.forward_ad against torch.autograd.forward_ad: the same programs run in both,
primals, tangents, printing and error messages compared."""

import numpy as np
import pytest

import ember
import ember.autograd.forward_ad as efw

torch = pytest.importorskip("torch")
tfw = pytest.importorskip("torch.autograd.forward_ad")
pytestmark = pytest.mark.parity

LIBS = {"ember": (ember, efw), "torch": (torch, tfw)}


def _array(*shape, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _run(program, *arrays):
    """``program(lib, fw, *duals)`` in each library: [(primal, tangent) per output] each."""
    results = {}
    for name, (lib, fw) in LIBS.items():
        with fw.dual_level():
            duals = [fw.make_dual(lib.tensor(p), lib.tensor(t)) for p, t in arrays]
            out = program(lib, fw, *duals)
            outs = out if isinstance(out, (tuple, list)) else (out,)
            results[name] = [fw.unpack_dual(o) for o in outs]
    return results["ember"], results["torch"]


def _close(ours, theirs, atol=1e-10):
    assert len(ours) == len(theirs)
    for (p, t), (tp, tt) in zip(ours, theirs):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), atol=atol)
        assert (t is None) == (tt is None)
        if t is not None:
            assert str(t.dtype).split(".")[1] == str(tt.dtype).split(".")[1]
            np.testing.assert_allclose(t.detach().numpy(), tt.detach().numpy(), atol=atol,
                                       rtol=1e-7)


def _nnf(lib):
    return lib.nn.functional


PROGRAMS = {
    "elementwise": lambda lib, fw, x, y: (x.sin() * y.exp() - x / (y * y + 1)).tanh(),
    "activations": lambda lib, fw, x, y: (_nnf(lib).gelu(x) + _nnf(lib).silu(y)
                                          + _nnf(lib).softplus(x) * _nnf(lib).elu(y)),
    "matmul": lambda lib, fw, x, y: x @ y.T,
    "reductions": lambda lib, fw, x, y: (x.sum(), y.mean(0), x.var(1), lib.logsumexp(y, 1),
                                         x.norm(dim=0), x.amax(1), x.cumprod(1)),
    "max_dim": lambda lib, fw, x, y: tuple(lib.max(x * y, dim=1)),
    "sort": lambda lib, fw, x, y: tuple(lib.sort(x, dim=0)),
    "views": lambda lib, fw, x, y: (x.T, x[1:, ::2], x.reshape(-1), y.unsqueeze(0).expand(2, 3, 4),
                                    x.unbind(1)[2], x.narrow(1, 1, 2), lib.diagonal(x)),
    "indexing": lambda lib, fw, x, y: (x[lib.tensor([2, 0])], x[x > 0], lib.gather(
        y, 1, lib.tensor([[0, 3], [1, 1], [2, 0]])), lib.index_select(x, 1, lib.tensor([3, 0]))),
    "join": lambda lib, fw, x, y: (lib.cat([x, y]), lib.stack([x, y], 2), lib.where(x > y, x, y)),
    "softmax_losses": lambda lib, fw, x, y: (
        _nnf(lib).log_softmax(x, 1), _nnf(lib).mse_loss(x, y),
        _nnf(lib).cross_entropy(x, lib.tensor([0, 3, 1])),
        _nnf(lib).kl_div(_nnf(lib).log_softmax(x, 1), _nnf(lib).softmax(y, 1),
                         reduction="batchmean")),
    "norms": lambda lib, fw, x, y: (
        _nnf(lib).layer_norm(x, (4,)), _nnf(lib).normalize(y, dim=1),
        _nnf(lib).batch_norm(x, None, None, training=True)),
    "comparison_outputs": lambda lib, fw, x, y: (x > y, x.argmax(), x.floor(), x.sign()),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs(name):
    x = (_array(3, 4, seed=1), _array(3, 4, seed=2))
    y = (_array(3, 4, seed=3), _array(3, 4, seed=4))
    _close(*_run(PROGRAMS[name], x, y))


def test_complex():
    x = (_array(3, dtype=np.complex128, seed=1), _array(3, dtype=np.complex128, seed=2))
    r = (_array(3, seed=3), _array(3, seed=4))
    _close(*_run(lambda lib, fw, z, a: (z * z, z.exp(), z.abs(), z.conj() * 1, z.real * 1,
                                        z.angle(), lib.polar(a, a), z * a, z.sqrt(),
                                        lib.view_as_real(z) * 1), x, r))


def test_inplace():
    def program(lib, fw, x, y):
        a = x.clone()
        a.mul_(y)
        a[1:].sin_()
        b = lib.zeros(3, 4, dtype=lib.float64)
        b[1] = y[0] * 2
        c = lib.zeros(3, 4, dtype=lib.float64)
        c.add_(x)
        v = a.view(-1)
        v.mul_(y.reshape(-1))       # (not v.mul_(v): torch reads self after the write there)
        return a, b, c, v
    _close(*_run(program, (_array(3, 4, seed=1), _array(3, 4, seed=2)),
                 (_array(3, 4, seed=3), _array(3, 4, seed=4))))


def _same_module(make):
    """One module in each library with the same parameters."""
    torch.manual_seed(0)
    theirs = make(torch).double()
    ours = make(ember).double()
    ours.load_state_dict({k: ember.tensor(v.detach().numpy())
                          for k, v in theirs.state_dict().items()})
    return ours, theirs


MODULES = {
    "linear": (lambda lib: lib.nn.Linear(4, 3), (5, 4)),
    "conv2d": (lambda lib: lib.nn.Conv2d(2, 3, 3, padding=1), (2, 2, 5, 5)),
    "batchnorm": (lambda lib: lib.nn.BatchNorm2d(2), (3, 2, 4, 4)),
    "groupnorm": (lambda lib: lib.nn.GroupNorm(2, 4), (2, 4, 3)),
    "gru": (lambda lib: lib.nn.GRU(4, 3, batch_first=True), (2, 3, 4)),
    "mlp": (lambda lib: lib.nn.Sequential(lib.nn.Linear(4, 6), lib.nn.ReLU(),
                                          lib.nn.Dropout(0.0), lib.nn.Linear(6, 2)), (5, 4)),
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules(name):
    make, shape = MODULES[name]
    modules = dict(zip(("ember", "torch"), _same_module(make)))
    x = (_array(*shape, seed=1), _array(*shape, seed=2))
    results = {}
    for lib_name, (lib, fw) in LIBS.items():
        with fw.dual_level():
            out = modules[lib_name](fw.make_dual(lib.tensor(x[0]), lib.tensor(x[1])))
            out = out[0] if isinstance(out, tuple) else out
            results[lib_name] = [fw.unpack_dual(out)]
    _close(results["ember"], results["torch"], atol=1e-8)


def _scale(lib):
    class Scale(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_forward(x, y)
            return x * y * 2

        @staticmethod
        def jvp(ctx, tx, ty):
            x, y = ctx.saved_tensors
            return (tx * y + x * ty) * 2
    return Scale


def test_custom_function():
    _close(*_run(lambda lib, fw, x, y: _scale(lib).apply(x, y) + _scale(lib).apply(
        x, lib.ones(3, dtype=lib.float64)), (_array(3, seed=1), _array(3, seed=2)),
        (_array(3, seed=3), _array(3, seed=4))))


def test_reverse_over_forward_and_hvp():
    x0, t0 = _array(3, seed=1), _array(3, seed=2)
    got = {}
    for name, (lib, fw) in LIBS.items():
        x = lib.tensor(x0, requires_grad=True)
        with fw.dual_level():
            d = fw.make_dual(x, lib.tensor(t0))
            jvp = fw.unpack_dual((d.sin() * d.exp()).sum()).tangent
            g, = lib.autograd.grad(jvp, x)
            y = (d.sin() * d * d).sum()
            h, = lib.autograd.grad(y, d)
            got[name] = (fw.unpack_dual(g).primal, fw.unpack_dual(h).tangent)
    for a, b in zip(got["ember"], got["torch"]):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-10)


def _pair(fn):
    """fn(lib, fw) in each library: (result or exception text) for both."""
    out = []
    for lib, fw in LIBS.values():
        try:
            with fw.dual_level():
                out.append(fn(lib, fw))
        except Exception as e:          # noqa: BLE001
            out.append(f"{type(e).__name__}: {e}")
    return out


REPRS = [
    lambda lib, fw: fw.make_dual(lib.tensor([1.0, 2.0, 3.0]), lib.ones(3)),
    lambda lib, fw: fw.make_dual(lib.tensor(1.5), lib.tensor(2.123456789)),
    lambda lib, fw: fw.make_dual(lib.tensor([1.5] * 7), lib.tensor([2.0] * 7)),
    lambda lib, fw: fw.make_dual(lib.tensor([[1.5, 2.0], [3.0, 4.0]]), lib.ones(2, 2)),
    lambda lib, fw: fw.make_dual(lib.tensor([1.5], dtype=lib.float64),
                                 lib.tensor([2.0], dtype=lib.float64)),
    lambda lib, fw: fw.make_dual(lib.tensor([1.5, 3.0], requires_grad=True), lib.ones(2)),
    lambda lib, fw: fw.make_dual(lib.zeros(0), lib.zeros(0)),
    lambda lib, fw: fw.make_dual(lib.arange(2000.0), lib.arange(2000.0)),
    lambda lib, fw: fw.make_dual(lib.tensor([1.0 + 2j]), lib.tensor([1j])),
    lambda lib, fw: fw.make_dual(lib.tensor([1.5], dtype=lib.float16),
                                 lib.tensor([2.0], dtype=lib.float16)),
    lambda lib, fw: fw.make_dual(lib.tensor([1.0, 2.0]), lib.ones(2)).sin(),
]


@pytest.mark.parametrize("index", range(len(REPRS)))
def test_printing(index):
    ours, theirs = _pair(lambda lib, fw: repr(REPRS[index](lib, fw)))
    assert ours.replace("ember.", "torch.") == theirs


ERRORS = [
    lambda lib, fw: fw.make_dual(lib.ones(3), lib.ones(2)),
    lambda lib, fw: fw.make_dual(lib.tensor([1, 2]), lib.ones(2)),
    lambda lib, fw: fw.make_dual(lib.ones(2), lib.tensor([1, 2])),
    lambda lib, fw: fw.make_dual(lib.ones(2), lib.ones(2), level=4),
    lambda lib, fw: fw.make_dual(fw.make_dual(lib.ones(2), lib.ones(2)), lib.ones(2)),
    lambda lib, fw: fw.make_dual(lib.ones(2), fw.make_dual(lib.ones(2), lib.ones(2))),
    lambda lib, fw: fw.unpack_dual(fw.make_dual(lib.ones(2), lib.ones(2)), level=3),
    lambda lib, fw: fw.unpack_dual(3),
    lambda lib, fw: fw.enter_dual_level(),
    lambda lib, fw: fw.exit_dual_level(level=2),
]


@pytest.mark.parametrize("index", range(len(ERRORS)))
def test_errors(index):
    ours, theirs = _pair(ERRORS[index])
    assert isinstance(theirs, str)
    assert ours.replace("ember.", "torch.") == theirs


def test_errors_outside_a_level():
    for lib, fw in LIBS.values():
        with pytest.raises(RuntimeError) as info:
            fw.make_dual(lib.ones(2), lib.ones(2))
        assert "no level exists" in str(info.value)
        with pytest.raises(RuntimeError, match="Dual level must be a positive number."):
            fw.exit_dual_level()
        assert fw.unpack_dual(lib.ones(2)).tangent is None


def test_vmap_over_duals():
    _close(*_run(lambda lib, fw, x: lib.func.vmap(lambda r: r.sin() * r.sum())(x),
                 (_array(3, 4, seed=1), _array(3, 4, seed=2))))
