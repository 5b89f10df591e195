"""Against torch 2.13: API gaps found by programs (round 30): per-sample gradients through
``call_for_per_sample_grads``/ExpandedWeight."""

import importlib

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

LAYERS = [
    ("Linear", (4, 3), {}, (5, 7, 4)),
    ("Conv1d", (4, 6, 3), dict(groups=2, padding=1), (5, 4, 7)),
    ("Conv2d", (2, 3, 3), dict(stride=2, padding=1), (5, 2, 6, 6)),
    ("Conv2d", (2, 3, 3), dict(padding="same"), (3, 2, 5, 5)),
    ("Conv3d", (2, 4, 2), dict(groups=2), (3, 2, 3, 3, 3)),
    ("Embedding", (10, 3), dict(padding_idx=0), (5, 4)),
    ("LayerNorm", ((2, 4),), {}, (5, 2, 4)),
    ("GroupNorm", (2, 4), {}, (5, 4, 3)),
    ("InstanceNorm1d", (4,), dict(affine=True), (5, 4, 3)),
    ("InstanceNorm2d", (4,), dict(affine=True, track_running_stats=True), (5, 4, 3, 3)),
]


def _per_sample(lib, name, args, kwargs, x, g, state, reduction):
    nn = lib.nn
    psg = importlib.import_module(f"{lib.__name__}.nn.utils._per_sample_grad")
    m = getattr(nn, name)(*args, **kwargs)
    m.load_state_dict({k: lib.tensor(v) for k, v in state.items()})
    xt = lib.tensor(x)
    out = psg.call_for_per_sample_grads(m, loss_reduction=reduction)(xt)
    loss = (out * lib.tensor(g)).sum()
    (loss if reduction == "sum" else loss / x.shape[0]).backward()
    grads = {n: p.grad_sample.detach().numpy() for n, p in m.named_parameters()}
    return grads, {n: b.numpy() for n, b in m.named_buffers()}, type(out.grad_fn).__name__


@pytest.mark.parametrize("name,args,kwargs,shape", LAYERS)
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_per_sample_grads_match_torch(name, args, kwargs, shape, reduction):
    rng = np.random.default_rng(0)
    ref = getattr(torch.nn, name)(*args, **kwargs)
    state = {k: v.detach().numpy() + rng.standard_normal(v.shape).astype(v.numpy().dtype)
             * (v.is_floating_point()) for k, v in ref.state_dict().items()}
    x = (rng.integers(0, 10, shape) if name == "Embedding"
         else rng.standard_normal(shape).astype(np.float32))
    g_shape = ref(torch.tensor(x)).shape[1:]
    g = rng.standard_normal(g_shape).astype(np.float32)
    want, want_buf, want_fn = _per_sample(torch, name, args, kwargs, x, g, state, reduction)
    got, got_buf, got_fn = _per_sample(ember, name, args, kwargs, x, g, state, reduction)
    assert got_fn == want_fn
    assert got.keys() == want.keys()
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5)
    for k in want_buf:
        np.testing.assert_allclose(got_buf[k], want_buf[k], rtol=1e-5, atol=1e-6)


def _error(lib, build):
    with pytest.raises(Exception) as info:
        build(lib)
    return type(info.value), str(info.value).split("\n  in model")[0]


@pytest.mark.parametrize("build", [
    lambda lib: lib.nn.utils._per_sample_grad.call_for_per_sample_grads(
        lib.nn.Linear(2, 2), loss_reduction="avg"),
    lambda lib: lib.nn.utils._per_sample_grad.call_for_per_sample_grads(
        lib.nn.Linear(2, 2), batch_size=-1),
    lambda lib: lib.nn.utils._per_sample_grad.call_for_per_sample_grads(
        lib.nn.Linear(2, 2), batch_size="3"),
    lambda lib: lib.nn.utils._per_sample_grad.call_for_per_sample_grads(
        lib.nn.Linear(2, 2))(lib.ones(5, 2), lib.ones(3, 2)),
    lambda lib: lib.nn.utils._per_sample_grad.call_for_per_sample_grads(
        lib.nn.Linear(2, 2))([1.0]),
    lambda lib: lib.nn.utils._per_sample_grad.call_for_per_sample_grads(
        lib.nn.Linear(2, 2), batch_size=4)(lib.ones(5, 2)),
    lambda lib: lib.nn.utils._per_sample_grad.call_for_per_sample_grads(
        lib.nn.BatchNorm1d(2))(lib.ones(5, 2)),
    lambda lib: lib.nn.utils._per_sample_grad.call_for_per_sample_grads(
        lib.nn.ConvTranspose1d(2, 2, 1))(lib.ones(5, 2, 3)),
    lambda lib: lib.nn.utils._per_sample_grad.call_for_per_sample_grads(
        lib.nn.EmbeddingBag(4, 2))(lib.ones(5, 2, dtype=lib.long)),
    lambda lib: lib.nn.utils._per_sample_grad.call_for_per_sample_grads(
        lib.nn.Linear(2, 2), batch_first=False)(lib.ones(3, 5, 2)),
    lambda lib: lib.nn.utils._expanded_weights.ExpandedWeight(lib.ones(2), 3, "sum"),
])
def test_per_sample_errors_match_torch(build):
    importlib.import_module("torch.nn.utils._per_sample_grad")
    importlib.import_module("ember.nn.utils._per_sample_grad")
    assert _error(ember, build) == _error(torch, build)


FOREACH = [
    ("abs", lambda L, x, y, t: (x,)), ("log1p", lambda L, x, y, t: (x,)),
    ("expm1", lambda L, x, y, t: (x,)), ("clone", lambda L, x, y, t: (x,)),
    ("norm", lambda L, x, y, t: (x,)), ("max", lambda L, x, y, t: (x,)),
    ("add", lambda L, x, y, t: (x, y)), ("add", lambda L, x, y, t: (x, 2.0)),
    ("add", lambda L, x, y, t: (x, [2.0, 3.0])), ("add", lambda L, x, y, t: (x, t)),
    ("add", lambda L, x, y, t: (x, L.tensor(2.0, dtype=L.float64))),
    ("sub", lambda L, x, y, t: (x, y)), ("mul", lambda L, x, y, t: (x, t)),
    ("mul", lambda L, x, y, t: (x, [2.0, 3.0])), ("div", lambda L, x, y, t: (x, y)),
    ("div", lambda L, x, y, t: (x, 2.0)), ("div", lambda L, x, y, t: (x, t)),
    ("clamp_max", lambda L, x, y, t: (x, y)), ("clamp_min", lambda L, x, y, t: (x, 0.7)),
    ("clamp_min", lambda L, x, y, t: (x, [0.6, 0.9])), ("maximum", lambda L, x, y, t: (x, y)),
    ("minimum", lambda L, x, y, t: (x, 0.9)), ("maximum", lambda L, x, y, t: (x, [0.6, 0.9])),
    ("pow", lambda L, x, y, t: (x, y)), ("pow", lambda L, x, y, t: (x, 2.0)),
    ("pow", lambda L, x, y, t: (x, [2.0, 3.0])), ("pow", lambda L, x, y, t: (2.0, x)),
    ("addcmul", lambda L, x, y, t: (x, y, y)), ("addcdiv", lambda L, x, y, t: (x, y, y, 0.5)),
    ("addcmul", lambda L, x, y, t: (x, y, y, [0.5, 0.2])),
    ("lerp", lambda L, x, y, t: (x, y, y)), ("lerp", lambda L, x, y, t: (x, y, 0.3)),
    ("lerp", lambda L, x, y, t: (x, y, [0.3, 0.6])),
]


def _foreach(lib, name, make):
    rng = np.random.default_rng(1)
    x = [lib.tensor(rng.random(3) + 0.5, requires_grad=True) for _ in range(2)]
    y = [lib.tensor(rng.random(3) + 0.5, requires_grad=True) for _ in range(2)]
    x[0].requires_grad_(False)          # the shared node still covers this output
    t = lib.tensor(1.5, dtype=lib.float64, requires_grad=True)
    outs = getattr(lib, f"_foreach_{name}")(*make(lib, x, y, t))
    nodes = {id(o.grad_fn) for o in outs}
    try:       # torch's backward fails when a 0-dim tensor operand requires grad
        sum(o.sum() * (i + 1) for i, o in enumerate(outs)).backward()
    except RuntimeError as e:
        assert lib is torch and "inconsistent range for TensorList output" in str(e)
        return outs[0].grad_fn.name(), len(nodes), len(outs[0].grad_fn.next_functions), None
    grads = [None if v.grad is None else v.grad.numpy() for v in (*x, *y, t)]
    return outs[0].grad_fn.name(), len(nodes), len(outs[0].grad_fn.next_functions), grads


@pytest.mark.parametrize("name,make", FOREACH)
def test_foreach_grad_fn_names_match_torch(name, make):
    want = _foreach(torch, name, make)
    got = _foreach(ember, name, make)
    assert got[:3] == want[:3]
    for g, w in zip(got[3] or (), want[3] or ()):
        assert (g is None) == (w is None)
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)


def _graph(fn, depth=0):
    """The names of a graph's nodes, depth first."""
    if fn is None:
        return []
    out = [("  " * depth) + fn.name()]
    for nxt, _ in fn.next_functions:
        out += _graph(nxt, depth + 1)
    return out


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("weighted", [True, False])
def test_fused_rms_norm_graph_matches_torch(dtype, weighted):
    def run(lib):
        rng = np.random.default_rng(3)
        x = lib.tensor(rng.standard_normal((2, 3, 4)), dtype=getattr(lib, dtype),
                       requires_grad=True)
        w = lib.tensor(rng.standard_normal(4), dtype=getattr(lib, dtype), requires_grad=True)
        out, rstd = lib._fused_rms_norm(x, [4], w if weighted else None, 1e-5)
        (gx,) = lib.autograd.grad((out * 2).sum() + rstd.sum(), [x])
        return (_graph(out.grad_fn), _graph(rstd.grad_fn), rstd.dtype == lib.float32,
                gx.float().numpy(), rstd.detach().float().numpy())
    want, got = run(torch), run(ember)
    assert got[:3] == want[:3]
    tol = 1e-5 if dtype == "float32" else 3e-2
    np.testing.assert_allclose(got[3], want[3], rtol=tol, atol=tol)
    np.testing.assert_allclose(got[4], want[4], rtol=tol, atol=tol)


@pytest.mark.parametrize("call", [
    lambda lib, x: lib._fused_rms_norm(x, 4, None, 1e-5),
    lambda lib, x: lib._fused_rms_norm(x, [4], None, "a"),
    lambda lib, x: lib.rms_norm(x, 4),
    lambda lib, x: lib.nn.functional.rms_norm(x, [4], None, "a"),
    lambda lib, x: lib.nn.functional.rms_norm(x, 4),
])
def test_rms_norm_argument_errors_match_torch(call):
    def message(lib):
        with pytest.raises(TypeError) as info:
            call(lib, lib.ones(2, 4, requires_grad=True))
        return str(info.value)
    assert message(ember) == message(torch)


def test_flex_attention_cpu_refusal_and_eager_warning_match_torch():
    from torch.nn.attention import flex_attention as theirs

    from ember.nn.attention import flex_attention as ours
    rng = np.random.default_rng(4)
    qkv = [rng.standard_normal((1, 2, 4, 3)).astype(np.float32) for _ in range(3)]

    def run(lib, module, shown):
        shown.discard("flex_attention_performance")
        shown.discard("eager")
        q, k, v = (lib.tensor(a) for a in qkv)
        with pytest.warns(UserWarning) as record:
            out = module.flex_attention(q, k, v)
        with pytest.raises(NotImplementedError) as info:
            module.flex_attention(q, k.clone().requires_grad_(), v)
        return ([(str(w.message), w.filename.endswith("flex_attention.py")) for w in record],
                str(info.value), out.numpy())
    want = run(torch, theirs, theirs._WARNINGS_SHOWN)
    got = run(ember, ours, ours._WARNED)
    assert got[:2] == want[:2]
    np.testing.assert_allclose(got[2], want[2], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kwargs", [dict(sparse=True), dict(padding_idx=2),
                                    dict(padding_idx=2, sparse=True),
                                    dict(scale_grad_by_freq=True)])
def test_embedding_forward_ad_matches_torch(kwargs):
    """The tangent of a lookup is the lookup of the weight's tangent, whatever padding_idx,
    frequency scaling or sparse gradients say (ember raised for sparse=True and zeroed the
    padding rows)."""
    def run(lib):
        F = lib.nn.functional
        w = lib.arange(15.0, dtype=lib.float64).reshape(5, 3)
        t = lib.cos(lib.arange(15.0, dtype=lib.float64)).reshape(5, 3)
        idx = lib.tensor([[0, 2], [4, 2]])
        out, tan = lib.func.jvp(lambda w: F.embedding(idx, w, **kwargs), (w,), (t,))
        jac = lib.func.jacfwd(lambda w: F.embedding(idx, w, **kwargs))(w)
        with lib.autograd.forward_ad.dual_level():
            dual = lib.autograd.forward_ad.make_dual(w, t)
            fw = lib.autograd.forward_ad.unpack_dual(F.embedding(idx, dual, **kwargs)).tangent
        try:        # (sparse: both refuse the sparse gradient's forward AD)
            hess = lib.func.hessian(lambda w: (F.embedding(idx, w, **kwargs) ** 2).sum())(w)
        except NotImplementedError as e:
            hess = lib.tensor(0.0) if "_sparse_coo_tensor_with_dims_and_tensors" in str(e) \
                else None
        return [a.numpy() for a in (out, tan, jac, fw, hess)]
    for g, w in zip(run(ember), run(torch)):
        np.testing.assert_allclose(g, w, rtol=1e-12)


KWARGS = {"other": "a"}


class _Holder:
    kwargs = {"dim": "a"}


@pytest.mark.parametrize("call", [
    lambda lib, x: lib.add(**{"input": x, "other": "a"}),
    lambda lib, x: lib.add(x, **KWARGS),
    lambda lib, x: lib.add(x, alpha=2, **KWARGS),
    lambda lib, x: lib.add(*[x], **{"alpha": 2}, **KWARGS),
    lambda lib, x: x.add(**KWARGS),
    lambda lib, x: lib.sum(**{"input": x, "dim": "a"}),
    lambda lib, x: x.sum(**_Holder.kwargs),
    lambda lib, x: lib.clamp(x, **{"min": "a"}),
    lambda lib, x: lib.clamp(*[x, "a"]),
    lambda lib, x: lib.mean(x, **{"dtype": "a"}),
    lambda lib, x: x.reshape(**{"shape": "a"}),
    lambda lib, x: lib.mm(x, **{"mat2": 3}),
])
def test_unpacked_keyword_errors_match_torch(call):
    """``f(**kwargs)`` calls: PyTorch words a keyword argument without its position."""
    def message(lib):
        with pytest.raises(TypeError) as info:
            call(lib, lib.ones(2))
        return str(info.value).splitlines()[0]
    assert message(ember) == message(torch)


RAN = []


class _Watched(dict):
    def keys(self):
        RAN.append("keys")
        return dict.keys(self)


class _Listed(list):
    def __len__(self):
        RAN.append("len")
        return list.__len__(self)


class _Guarded:
    @property
    def __class__(self):
        RAN.append("__class__")
        return _Guarded

    def __getattr__(self, name):
        RAN.append(name)
        return {"dim": "a"}

    @property
    def kwargs(self):
        RAN.append("kwargs")
        return {"dim": "a"}


WATCHED = _Watched(dim="a")


def _listed_sum(lib, x):
    args = _Listed([x, "a"])
    return lib.sum(*args)


@pytest.mark.parametrize("call,worded", [
    (lambda lib, x, h: x.sum(**h.kwargs), False),       # a property: run by the call only
    (lambda lib, x, h: lib.sum(x, **h.missing), False),  # __getattr__: likewise
    (lambda lib, x, h: lib.sum(x, **WATCHED), True),     # read without its keys()
    (lambda lib, x, h: _listed_sum(lib, x), True),       # read without its __len__
])
def test_unpacked_call_errors_run_no_user_code(call, worded):
    """The error path reads ``f(*args, **obj.attr)`` without running the objects' code again
    (where it cannot, the message keeps ember's positional wording)."""
    def message(lib):
        RAN.clear()
        with pytest.raises(TypeError) as info:
            call(lib, lib.ones(2), _Guarded())
        return str(info.value).splitlines()[0], list(RAN)
    got, want = message(ember), message(torch)
    assert got[1] == want[1]                    # only the call itself ran any of it
    if worded:
        assert got[0] == want[0]
    else:
        assert got[0].startswith("sum() received an invalid combination of arguments - got (")


DERIVED = [  # operands whose own graphs run through another operand of the same call
    ("add", lambda L, x: (x, [v * 0.5 + 0.9 for v in x[::-1]])),
    ("sub", lambda L, x: (x, [v * 2 for v in x]), dict(alpha=0.5)),
    ("mul", lambda L, x: (x, [v.sin() for v in x[::-1]])),
    ("div", lambda L, x: (x, [v * v + 1 for v in x])),
    ("pow", lambda L, x: (x, [v * 0.5 for v in x[::-1]])),
    ("maximum", lambda L, x: (x, [v * 0.9 + 0.05 for v in x[::-1]])),
    ("exp", lambda L, x: ([v * 2 for v in x] + x,)),
    ("addcmul", lambda L, x: (x, x[::-1], [v + 1 for v in x], 0.3)),
    ("addcdiv", lambda L, x: (x, [v.exp() for v in x], x, [0.3, 0.1, 0.2])),
    ("lerp", lambda L, x: (x, x[::-1], [v * 0.1 for v in x])),
]


def _derived(lib, name, make, kwargs):
    rng = np.random.default_rng(2)
    x = [lib.tensor(rng.random(3) + 0.5, requires_grad=r) for r in (True, False, True)]
    outs = getattr(lib, f"_foreach_{name}")(*make(lib, x), **kwargs)
    loss = sum(o.sum() * (i + 1) for i, o in enumerate(outs))
    leaves = [x[0], x[2]]
    grads = lib.autograd.grad(loss, leaves, create_graph=True)
    again = [] if not any(g.requires_grad for g in grads) else lib.autograd.grad(
        sum((g * g).sum() for g in grads), leaves, allow_unused=True)
    return [g.detach().numpy() for g in grads], [None if g is None else g.numpy() for g in again]


@pytest.mark.parametrize("name,make,kwargs", [d if len(d) == 3 else (*d, {}) for d in DERIVED])
def test_foreach_partial_derivatives_and_double_backward_match_torch(name, make, kwargs):
    want, got = _derived(torch, name, make, kwargs), _derived(ember, name, make, kwargs)
    for g, w in zip(got[0] + got[1], want[0] + want[1]):
        assert (g is None) == (w is None)
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_foreach_node_frees_its_graph_and_sees_inputs_changed_in_place():
    for lib in (torch, ember):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        outs = lib._foreach_mul([x, x * 3], 2.0)
        loss = outs[0].sum() + outs[1].sum()
        loss.backward(retain_graph=True)
        loss.backward()
        np.testing.assert_array_equal(x.grad.numpy(), [16.0, 16.0])
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            loss.backward()
        x.grad = None
        a = x * 1
        (out,) = lib._foreach_exp([a])
        a.mul_(2)                   # exp's gradient reads its result, not its input
        out.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)


def _shared(nn):
    class Twice(nn.Module):         # one parameter used twice in one forward
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(self.lin(x).tanh())
    return Twice()


MODULES = [   # (build, input shape, call_for_per_sample_grads kwargs, calls of one wrapper)
    (lambda nn: nn.Sequential(nn.Sequential(nn.Linear(3, 4), nn.Tanh()), nn.Linear(4, 2)),
     (5, 3), {}, 1),
    (_shared, (4, 3), {}, 1),
    (lambda nn: nn.Linear(3, 2, bias=False), (4, 3), {}, 1),
    (lambda nn: nn.Conv2d(4, 6, 3, stride=2, dilation=2, groups=2, padding=1), (3, 4, 9, 9),
     {}, 1),
    (lambda nn: nn.Linear(3, 2), (4, 3), dict(batch_size=4, loss_reduction="mean"), 1),
    (lambda nn: nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4)), (4, 3), {}, 2),
]


def _module_grad_samples(lib, build, shape, kwargs, calls):
    psg = importlib.import_module(f"{lib.__name__}.nn.utils._per_sample_grad")
    lib.manual_seed(0)
    m = build(lib.nn).double()
    rng = np.random.default_rng(3)
    with lib.no_grad():
        for p in m.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape))))
    f = psg.call_for_per_sample_grads(m, **kwargs)
    for _ in range(calls):
        out = f(lib.tensor(rng.standard_normal(shape)))
        loss = out.mean() if kwargs.get("loss_reduction") == "mean" else out.sum()
        (loss + 0.1 * (out ** 2).sum()).backward()
    return {n: (p.grad_sample.numpy(), p.grad) for n, p in m.named_parameters()}


@pytest.mark.parametrize("build,shape,kwargs,calls", MODULES)
def test_per_sample_grads_of_modules_match_torch(build, shape, kwargs, calls):
    want = _module_grad_samples(torch, build, shape, kwargs, calls)
    got = _module_grad_samples(ember, build, shape, kwargs, calls)
    assert got.keys() == want.keys()
    for name, (w, w_grad) in want.items():
        np.testing.assert_allclose(got[name][0], w, rtol=1e-10, atol=1e-12)
        assert got[name][1] is None and w_grad is None


def test_embedding_max_norm_tangent_is_the_plain_lookup_as_torch():
    """max_norm renormalizes the weight in place on a detached alias: forward AD (func.jvp and
    dual tensors) gives the lookup of the tangent, reverse mode the plain scatter, and the
    weight's version still counts the write (ember's tangent went through the renorm)."""
    def run(lib):
        F = lib.nn.functional
        idx = lib.tensor([0, 2, 2])
        base = lib.arange(12.0, dtype=lib.float64).reshape(4, 3) - 4
        t = lib.cos(lib.arange(12.0, dtype=lib.float64)).reshape(4, 3)
        out, tan = lib.func.jvp(lambda w: F.embedding(idx, w, max_norm=5.0), (base.clone(),),
                                (t,))
        with lib.autograd.forward_ad.dual_level():
            dual = lib.autograd.forward_ad.make_dual(base.clone(), t)
            fw = lib.autograd.forward_ad.unpack_dual(F.embedding(idx, dual, max_norm=5.0))
        w = base.clone().requires_grad_()
        F.embedding(idx, w, max_norm=5.0).pow(2).sum().backward()
        grad = lib.func.grad(lambda w: F.embedding(idx, w, max_norm=5.0).sum())(base.clone())
        leaf = base.clone().requires_grad_()
        versions = leaf._version, (F.embedding(idx, leaf, max_norm=5.0), leaf._version)[1]
        return [a.numpy() for a in (out, tan, fw.primal, fw.tangent, w.grad, grad)], versions
    got, want = run(ember), run(torch)
    assert got[1] == want[1] == (0, 1)
    for g, w in zip(got[0], want[0]):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def _foreach_outcome(lib, name, other, kwargs):
    xs = [lib.ones(2), lib.full((3,), 2.0)]
    try:
        out = getattr(lib, f"_foreach_{name}")(xs, other(lib), **kwargs)
    except Exception as e:      # noqa: BLE001 - the outcome compared is the error
        return type(e), str(e)
    return [o.detach().numpy() for o in (xs if name.endswith("_") else out)]


@pytest.mark.parametrize("name", [n + s for n in ("sub", "pow", "clamp_min", "clamp_max",
                                                    "maximum", "minimum", "add", "mul", "div")
                                  for s in ("", "_")])
@pytest.mark.parametrize("other", [lambda lib: lib.tensor(0.8, requires_grad=True),
                                   lambda lib: lib.tensor(0.8),
                                   lambda lib: lib.tensor([0.8]),
                                   lambda lib: lib.tensor([0.8], requires_grad=True)],
                         ids=["grad", "plain", "1d", "1d-grad"])
def test_foreach_lone_tensor_operand_matches_torch(name, other):
    """sub/pow/clamp_min/clamp_max/maximum/minimum have no one-tensor overload: a tensor that
    requires grad or has dims is refused with torch's TypeError (ember accepted it)."""
    got, want = _foreach_outcome(ember, name, other, {}), _foreach_outcome(torch, name, other, {})
    if isinstance(want, tuple):
        assert got == (want[0], want[1].replace("torch.", "ember."))
    else:
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_foreach_sub_lone_tensor_with_alpha_matches_torch():
    """With alpha, only sub's tensor-list overload is left: its argument error."""
    other = lambda lib: lib.tensor(0.8, requires_grad=True)     # noqa: E731
    for name in ("sub", "sub_"):
        assert _foreach_outcome(ember, name, other, dict(alpha=2)) == \
            _foreach_outcome(torch, name, other, dict(alpha=2))


def test_hardsigmoid_double_backward_refused_forward_ad_kept_as_torch():
    """hardsigmoid's gradient hangs torch's NotImplemented node (no second derivative), and
    forward-over-reverse refuses; its jvp still works (ember computed a second derivative)."""
    def run(lib):
        F = lib.nn.functional
        x = lib.tensor([-4.0, -1.0, 0.5, 2.0, 3.5], requires_grad=True)
        (g,) = lib.autograd.grad(F.hardsigmoid(x).sum(), x, create_graph=True)
        outcomes = [g.grad_fn.name()]
        for fn in (lambda: lib.autograd.grad(g.sum(), x),
                   lambda: lib.func.jacfwd(lib.func.grad(lambda x: F.hardsigmoid(x).sum()))(
                       x.detach()),
                   lambda: lib.func.hessian(lambda x: F.hardsigmoid(x).sum())(x.detach())):
            with pytest.raises(Exception) as info:
                fn()
            outcomes.append((info.type, str(info.value)))
        _, tan = lib.func.jvp(F.hardsigmoid, (x.detach(),), (lib.ones(5),))
        with lib.autograd.forward_ad.dual_level():
            dual = lib.autograd.forward_ad.make_dual(x.detach(), lib.full((5,), 2.0))
            fw = lib.autograd.forward_ad.unpack_dual(F.hardsigmoid(dual)).tangent
        return outcomes, g.detach().numpy(), tan.numpy(), fw.numpy()
    got, want = run(ember), run(torch)
    assert got[0] == want[0]
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_allclose(g, w, rtol=1e-6)
