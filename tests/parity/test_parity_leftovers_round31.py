"""Round 31 leftovers against PyTorch: ASGD (single-tensor and foreach) and Adafactor with a
tensor lr in 16-bit foreach step to PyTorch's bits; nll_loss on 3-d and 5-d inputs records
PyTorch's graph (views around NllLoss2DBackward0) and packs its saved tensors' shapes;
one-operand pointwise results and mixed-dtype binary results take PyTorch's strides over
non-contiguous, size-1 and broadcast operands; view_as_real of empty tensors."""

import itertools

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _steps(lib, cls, dtype, shapes, steps, kw, lr=None):
    rng = np.random.default_rng(0)
    ps = [lib.from_numpy(rng.standard_normal(s).astype(np.float32)).to(getattr(lib, dtype))
          .requires_grad_() for s in shapes]
    kw = dict(kw, **({} if lr is None else {"lr": lr(lib)}))
    t0 = kw.pop("t0", None)
    opt = getattr(lib.optim, cls)(ps, **kw)
    if t0 is not None:
        for group in opt.param_groups:
            group["t0"] = t0
    grng = np.random.default_rng(1)
    for _ in range(steps):
        for p in ps:
            p.grad = lib.from_numpy(grng.standard_normal(tuple(p.shape)).astype(np.float32)) \
                .to(p.dtype)
        opt.step()
    out = [p.detach().float().numpy() for p in ps]
    for p in ps:
        out += [v.float().numpy() for _, v in sorted(opt.state[p].items())]
    return out


def _same(*args, **kw):
    ours, theirs = _steps(ember, *args, **kw), _steps(torch, *args, **kw)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("wd,maximize,t0", [(0, False, 1e6), (0.1, False, 3), (0.1, True, 3),
                                            (0, True, 1e6)])
def test_asgd_bitwise(dtype, foreach, wd, maximize, t0):
    _same("ASGD", dtype, [(37,), (5, 7), (3,)], 10,
          dict(foreach=foreach, weight_decay=wd, maximize=maximize, t0=t0, lambd=0.05))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("alpha", [0.75, 0.5, 2.0, 0.3])
def test_asgd_tensor_lr_and_alphas_bitwise(dtype, alpha):
    for foreach in (False, True):
        _same("ASGD", dtype, [(37,), (4, 5)], 12,
              dict(foreach=foreach, alpha=alpha, lambd=0.05, t0=3, weight_decay=0.01),
              lr=lambda lib: lib.tensor(0.05))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("wd,lr", [(0, 0.01), (0.1, 0.01), (0, 0.5), (0.1, 0.5)])
@pytest.mark.parametrize("lr_dtype", ["float32", "float64"])
def test_adafactor_tensor_lr_16bit_foreach_bitwise(dtype, wd, lr, lr_dtype):
    _same("Adafactor", dtype, [(37,), (5, 7), (2, 3, 20)], 8,
          dict(foreach=True, weight_decay=wd),
          lr=lambda lib: lib.tensor(lr, dtype=getattr(lib, lr_dtype)))


def _graph(lib, shape, reduction, perm=None):
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal(shape), requires_grad=True)
    xx = x if perm is None else x.permute(*perm)
    t = lib.tensor(rng.integers(0, 3, (xx.shape[0],) + tuple(xx.shape[2:])))
    packed = []
    with lib.autograd.graph.saved_tensors_hooks(lambda a: packed.append(tuple(a.shape)) or a,
                                                lambda a: a):
        y = lib.nn.functional.nll_loss(xx, t, weight=lib.tensor([0.5, 2.0, 1.0],
                                                                dtype=lib.float64),
                                       reduction=reduction)
    names, fn = [], y.grad_fn
    while fn is not None:
        saved = {n: tuple(getattr(fn, n).shape) if hasattr(getattr(fn, n), "shape")
                 else getattr(fn, n) for n in dir(fn) if n.startswith("_saved_")}
        names.append((fn.name(), saved))
        nxt = [f for f, _ in fn.next_functions if f is not None]
        fn = nxt[0] if nxt else None
    grad = lib.autograd.grad(y.sum(), x)[0] if x.numel() else None
    return names, packed, tuple(y.shape), None if grad is None else grad.numpy()


@pytest.mark.parametrize("shape,perm", [((2, 3, 4), None), ((2, 4, 3), (0, 2, 1)),
                                        ((2, 3, 2, 2, 2), None), ((2, 3, 4, 5), None),
                                        ((0, 3, 4), None), ((2, 3, 0, 2, 2), None)])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_nll_loss_graph_and_saved_shapes(shape, perm, reduction):
    ours, theirs = _graph(ember, shape, reduction, perm), _graph(torch, shape, reduction, perm)
    assert ours[:3] == theirs[:3]
    if theirs[3] is not None:
        np.testing.assert_array_equal(ours[3], theirs[3])


def _unary_input(lib, shape, perm, sl, unsq, expand, dtype):
    x = lib.arange(int(np.prod(shape))).reshape(shape).to(getattr(lib, dtype))
    if sl is not None:
        x = x[(slice(None),) * sl + (slice(None, None, 2),)]
    if perm is not None:
        x = x.permute(*perm)
    for u in unsq:
        x = x.unsqueeze(u)
    if expand is not None and expand < x.dim() and x.shape[expand] == 1:
        x = x.expand(*[3 if d == expand else n for d, n in enumerate(x.shape)])
    return x


def _unary_cases():
    for shape in [(4, 6), (3, 1, 5), (1, 4, 6), (2, 3, 4), (2, 1, 3, 1)]:
        perms = list(itertools.permutations(range(len(shape))))[:4]
        for perm, sl, unsq, expand in itertools.product(
                perms, [None, 0, len(shape) - 1], [(), (1,), (0,), (len(shape),)], [None, 1]):
            yield shape, perm, sl, unsq, expand


@pytest.mark.parametrize("dtype,names", [("float32", ("exp", "neg", "sigmoid")),
                                         ("int64", ("exp", "abs")), ("float16", ("exp",)),
                                         ("bool", ("logical_not",))])
def test_unary_strides_table(dtype, names):
    bad = []
    for case in _unary_cases():
        t, e = _unary_input(torch, *case, dtype), _unary_input(ember, *case, dtype)
        assert t.stride() == e.stride(), case
        for name in names:
            if getattr(t, name)().stride() != getattr(e, name)().stride():
                bad.append((case, name))
    assert bad == []


def _binary_operand(lib, spec):
    shape, perm, sl, unsq, expand, dtype = spec
    return _unary_input(lib, shape, perm, sl, unsq, expand, dtype)


def _binary_cases(n, seed=31):
    rng = np.random.default_rng(seed)
    dtypes = ["float32", "float64", "int64", "int32", "float16", "bfloat16", "bool", "uint8"]

    def spec():
        nd = int(rng.integers(1, 4))
        shape = tuple(int(v) for v in rng.choice([1, 2, 3, 4], nd))
        return [shape, tuple(int(v) for v in rng.permutation(nd)),
                int(rng.integers(0, nd)) if rng.random() < 0.3 else None,
                tuple(int(rng.integers(0, nd + 1)) for _ in range(int(rng.integers(0, 2)))),
                int(rng.integers(0, nd + 1)) if rng.random() < 0.3 else None,
                str(rng.choice(dtypes))]
    cases = []
    while len(cases) < n:
        a, b = spec(), spec()
        try:
            torch.add(_binary_operand(torch, a), _binary_operand(torch, b))
        except RuntimeError:
            continue
        cases.append((a, b))
    return cases


def test_mixed_dtype_binary_strides_table():
    """A seeded table of 1500 operand pairs (mostly of two dtypes): add and mul results take
    PyTorch's strides but for the few left (ties PyTorch breaks on the cast copies' layouts,
    listed in the round-31 report: 32 of 3000); there were 618 before."""
    bad, total = [], 0
    for a, b in _binary_cases(1500):
        for name in ("add", "mul"):
            t = getattr(torch, name)(_binary_operand(torch, a), _binary_operand(torch, b))
            e = getattr(ember, name)(_binary_operand(ember, a), _binary_operand(ember, b))
            total += 1
            assert tuple(t.shape) == tuple(e.shape) and str(t.dtype)[6:] == str(e.dtype)[6:]
            if t.stride() != e.stride():
                bad.append((a, b, name))
    assert total == 3000
    assert len(bad) <= 40, bad[:5]


@pytest.mark.parametrize("shape,key", [((0,), None), ((2, 0), None), ((0, 3), None),
                                       ((3, 4), (slice(None), slice(0, 0))),
                                       ((3, 0), "t"), ((5,), slice(0, 0, 2)),
                                       ((3, 4), (slice(0, 0), slice(None, None, 2))),
                                       ((3, 4), (slice(2, 2),))])
def test_view_as_real_of_empty(shape, key):
    def run(lib):
        x = lib.zeros(shape, dtype=lib.complex64)
        x = x.t() if key == "t" else x if key is None else x[key]
        y = lib.view_as_real(x)
        return tuple(y.shape), y.stride(), y.storage_offset(), str(y.dtype)[6:]
    assert run(ember) == run(torch)
