"""ember.func transforms over nn modules (round 36), against torch 2.13: a seeded random
generator of programs that call a small module (Linear, Conv1d/2d, LayerNorm, BatchNorm1d in
eval and train, Embedding, GRUCell/LSTMCell, MultiheadAttention, a Dropout stack, tied
weights) through functional_call (parameter/buffer dicts, tuples of dicts, strict=,
tie_weights=, missing and unexpected keys), grad/grad_and_value (argnums, has_aux),
jacrev/jacfwd/hessian over its parameters, vjp/jvp, vmap over batch dims (in_dims, out_dims,
chunk_size), stack_module_state ensembles under vmap (randomness=) and
replace_all_batch_norm_modules_. Compared: the result's pytree structure (dict key order,
tuple vs list), each tensor's shape, dtype, values (float64, rtol 1e-7) and requires_grad,
errors (type, message), warnings, and that the module's own parameters and buffers are
untouched. ``python -m tests.parity.test_parity_func_modules_fuzz_round36 N`` runs N programs
and buckets what differs."""

import random
import re
import sys
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


# --- modules -------------------------------------------------------------------------------

KINDS = ["linear", "conv1d", "conv2d", "layernorm", "bn_eval", "bn_train", "embedding",
         "gru", "lstm", "mha", "dropout", "tied", "wnorm"]


def _fill(lib, module, rng):
    """Deterministic float64 values for every parameter and float buffer of ``module``."""
    with lib.no_grad():
        for _, t in list(module.named_parameters()) + list(module.named_buffers()):
            if t.dtype.is_floating_point:
                vals = [round(rng.uniform(-1, 1), 3) for _ in range(t.numel())]
                if t.numel():
                    t.copy_(lib.tensor(vals, dtype=t.dtype).reshape(t.shape))


def _build(lib, kind, seed, train_dropout=False):
    nn = lib.nn
    lib.manual_seed(0)
    if kind == "linear":
        m = nn.Linear(3, 2)
    elif kind == "conv1d":
        m = nn.Conv1d(2, 3, 2)
    elif kind == "conv2d":
        m = nn.Conv2d(1, 2, 2)
    elif kind == "layernorm":
        m = nn.LayerNorm(3)
    elif kind in ("bn_eval", "bn_train"):
        m = nn.BatchNorm1d(3)
    elif kind == "embedding":
        m = nn.Embedding(5, 3)
    elif kind == "gru":
        m = nn.GRUCell(3, 2)
    elif kind == "lstm":
        m = nn.LSTMCell(3, 2)
    elif kind == "mha":
        m = nn.MultiheadAttention(4, 2, batch_first=True)
    elif kind == "dropout":
        m = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5), nn.Linear(3, 2))
    elif kind == "wnorm":
        m = nn.utils.parametrizations.weight_norm(nn.Linear(3, 2))
    else:
        m = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 3))
        m[2].weight = m[0].weight
    m = m.double()
    _fill(lib, m, random.Random(seed))
    if kind == "bn_eval" or (kind == "dropout" and not train_dropout):
        m.eval()
    return m


def _input(lib, kind, rng, batch):
    """An input for one sample (``batch`` None) or a batch of ``batch`` samples at dim 0."""
    pre = () if batch is None else (batch,)
    if kind == "embedding":
        n = 1
        for s in pre + (2,):
            n *= s
        return lib.tensor([rng.randrange(5) for _ in range(n)]).reshape(pre + (2,))
    shape = {"conv1d": (2, 4), "conv2d": (1, 3, 3), "mha": (2, 4)}.get(kind, (3,))
    if kind in ("conv1d", "conv2d", "mha") and batch is None:
        shape = (1,) + shape          # these want a batch of their own
    elif kind in ("bn_train", "bn_eval"):
        shape = (4, 3) if batch is None else (2, 3)
    n = 1
    for s in pre + shape:
        n *= s
    return lib.tensor([round(rng.uniform(-1, 1), 3) for _ in range(n)],
                      dtype=lib.float64).reshape(pre + shape)


def _call(lib, kind, m, state, x, **kw):
    args = (x, x, x) if kind == "mha" else (x,)
    out = lib.func.functional_call(m, state, args, **kw)
    if kind == "mha":
        out = out[0]
    elif kind == "lstm":
        out = out[0] + out[1]
    return out


# --- descriptions ----------------------------------------------------------------------------

def _desc(v):
    """A comparable description of a result: structure, and per tensor shape/dtype/values."""
    if isinstance(v, dict):
        return ("dict", [(k, _desc(x)) for k, x in v.items()])
    if isinstance(v, (tuple, list)):
        return (type(v).__name__, [_desc(x) for x in v])
    if hasattr(v, "requires_grad") and hasattr(v, "stride"):
        arr = np.asarray(v.detach().tolist(), dtype=float if v.dtype.is_floating_point
                         else object)
        return ("T", tuple(v.shape), str(v.dtype).split(".")[-1], v.requires_grad, arr)
    if v is None or isinstance(v, (int, float, bool, str)):
        return v
    return type(v).__name__


def _same(a, b, where="r"):
    """Where two descriptions differ (None when they agree)."""
    if isinstance(b, np.ndarray):
        if not isinstance(a, np.ndarray) or a.shape != b.shape:
            return f"{where}: array {a!r} vs {b!r}"
        if a.dtype == object or b.dtype == object:
            return None if (a == b).all() else f"{where}: {a} vs {b}"
        if not np.allclose(a, b, rtol=1e-7, atol=1e-12, equal_nan=True):
            return f"{where}: values {a} vs {b}"
        return None
    if isinstance(b, (tuple, list)):
        if not isinstance(a, (tuple, list)) or len(a) != len(b):
            return f"{where}: {a!r} vs {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = _same(x, y, f"{where}.{i}")
            if d:
                return d
        return None
    return None if a == b else f"{where}: {a!r} vs {b!r}"


def _message(text):
    """The first line (ember adds the module and input below it), torch's names as ember's."""
    text = text.split("\n")[0].split(" (Triggered internally at")[0]
    return re.sub(r"0x[0-9a-f]+", "0x", text.replace("torch.", "ember."))


def _noise(w):
    """Warnings that only say how torch runs (its slow fallbacks, its own deprecations)."""
    text = str(w.message)
    return "performance drop" in text or "jit.script" in text or "get_attr Node" in text


def _run(prog, lib):
    """(result description or ('error', type, message), warnings)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            res = _desc(prog(lib)[0])
        except Exception as e:           # noqa: BLE001 -- compared with torch's
            res = ("error", type(e).__name__, _message(str(e)))
    ws = [(w.category.__name__, _message(str(w.message))) for w in caught if not _noise(w)]
    return res, ws


# --- programs --------------------------------------------------------------------------------

def _params(lib, m, rng_seed, scale=1.0, names=None):
    """New values for ``m``'s parameters (all, or ``names``), in named_parameters order."""
    rng = random.Random(rng_seed)
    out = {}
    for name, p in m.named_parameters():
        if names is None or name in names:
            vals = [round(rng.uniform(-1, 1) * scale, 3) for _ in range(p.numel())]
            out[name] = lib.tensor(vals, dtype=p.dtype).reshape(p.shape)
    return out


def _snapshot(m):
    return [(n, t.detach().clone(), t.requires_grad) for n, t in
            list(m.named_parameters()) + list(m.named_buffers())]


def make(seed):
    """The program for ``seed``: ``prog(lib) -> (result, module)``."""
    rng = random.Random(seed)
    kind = rng.choice(KINDS)
    scen = rng.choice(["fcall", "fcall", "grad", "grad", "jac", "vjp", "jvp", "vmap", "vmap",
                       "ensemble", "ensemble", "bn_replace", "aux", "aux", "dims"])
    r = {k: rng.random() for k in "abcdefghij"}
    pseed = rng.randrange(1000)
    xseed = rng.randrange(1000)
    B = rng.choice([1, 2, 3])

    def prog(lib):
        m = _build(lib, kind, seed, train_dropout=scen == "vmap")
        before = _snapshot(m)
        xr = random.Random(xseed)
        F = lib.func
        if scen == "fcall":
            out = _fcall(lib, kind, m, r, pseed, xr)
        elif scen == "grad":
            out = _grad(lib, kind, m, r, pseed, xr)
        elif scen == "jac":
            out = _jac(lib, kind, m, r, pseed, xr)
        elif scen == "vjp":
            params = _params(lib, m, pseed)
            x = _input(lib, kind, xr, None)

            def f(p, x):
                return _call(lib, kind, m, p, x)
            primals = (params, x) if kind != "embedding" and r["a"] < 0.5 else (params,)
            g = f if len(primals) == 2 else (lambda p: f(p, x))
            y, back = F.vjp(g, *primals)
            out = (y, back(lib.ones_like(y) * 0.5))
        elif scen == "jvp":
            params = _params(lib, m, pseed)
            tang = _params(lib, m, pseed + 1)
            x = _input(lib, kind, xr, None)
            out = F.jvp(lambda p: _call(lib, kind, m, p, x), (params,), (tang,))
        elif scen == "vmap":
            out = _vmap(lib, kind, m, r, pseed, xr, B)
        elif scen == "aux":
            out = _aux(lib, kind, m, r, pseed, xr)
        elif scen == "dims":
            out = _dims(lib, kind, m, r, pseed, xr, B)
        elif scen == "ensemble":
            out = _ensemble(lib, kind, r, seed, xr, B)
        else:
            F.replace_all_batch_norm_modules_(m)
            before = _snapshot(m)
            x = _input(lib, kind, xr, B)
            params = _params(lib, m, pseed)
            in_dims = (None, 0)
            out = F.vmap(lambda p, x: _call(lib, kind, m, p, x), in_dims=in_dims)(params, x)
            out = (out, [n for n, _ in m.named_buffers()], m.training)
        after = _snapshot(m)
        changed = _same(_desc(after), _desc(before)) is not None
        return (out, changed, after if changed else None), m
    prog.kind, prog.scen = kind, scen
    return prog


def _fcall(lib, kind, m, r, pseed, xr):
    names = [n for n, _ in m.named_parameters()]
    if r["a"] < 0.3:
        chosen = names[:max(1, len(names) // 2)]
    else:
        chosen = names
    params = _params(lib, m, pseed, names=chosen)
    if kind == "tied" and r["b"] < 0.4:
        params["2.weight"] = params["0.weight"] if r["c"] < 0.5 else params["0.weight"] * 2
    bufs = {n: b * 1.5 if b.dtype.is_floating_point else b for n, b in m.named_buffers()} \
        if r["d"] < 0.4 else {}
    if r["e"] < 0.1:
        params["bogus"] = lib.zeros(1, dtype=lib.float64)
    elif r["e"] < 0.15:
        params[names[0]] = [1.0, 2.0] if r["j"] < 0.5 else None
    elif r["e"] < 0.2:
        params[names[-1]] = lib.nn.Parameter(params.get(names[-1], lib.zeros(2)) * 1.0)
    if r["e"] > 0.9:
        params["weight.x"] = lib.zeros(1, dtype=lib.float64)
    kw = {}
    if r["f"] < 0.4:
        kw["strict"] = r["f"] < 0.2
    if r["g"] < 0.4:
        kw["tie_weights"] = r["g"] < 0.2
    if r["h"] < 0.4:
        state = (params, bufs)
    elif r["h"] < 0.5:
        state = [params, dict(list(bufs.items()) + list(params.items())[:1])]
    else:
        state = {**params, **bufs}
    x = _input(lib, kind, xr, None)
    if r["i"] < 0.3:
        x.requires_grad_(x.dtype.is_floating_point)
        for v in params.values():
            v.requires_grad_()
    if r["j"] < 0.2:
        kw = {"kwargs": {}, **kw}
    out = _call(lib, kind, m, state, x, **kw)
    extra = [state]                   # (what the call wrote back into the dicts)
    if out.requires_grad:
        extra.append(lib.autograd.grad(out.sum(), list(params.values()), allow_unused=True))
    return out, extra


def _aux(lib, kind, m, r, pseed, xr):
    """vjp/jvp/jacrev/jacfwd/linearize with has_aux, outputs in tuples, lists and dicts."""
    F = lib.func
    params = _params(lib, m, pseed)
    x = _input(lib, kind, xr, None)
    box = [tuple, list, dict][int(r["b"] * 3)]

    def f(p):
        y = _call(lib, kind, m, p, x)
        outs = (y, y.sum() * 2)
        outs = outs if box is tuple else list(outs) if box is list else \
            {"z": outs[0], "a": outs[1]}
        return outs, {"y": y.detach(), "k": (y.sum(),)}
    which = int(r["a"] * 5)
    if which == 4 and kind == "bn_train":
        which = 3     # (torch's linearized function replays the running statistics' update)
    if which == 0:
        outs, back, aux = F.vjp(f, params, has_aux=True)
        return outs, back(_ones_like_tree(lib, outs)), aux
    if which == 1:
        return F.jvp(f, (params,), (_params(lib, m, pseed + 1),), has_aux=True)
    if which == 2:
        return F.jacrev(f, has_aux=True)(params)
    if which == 3:
        return F.jacfwd(f, has_aux=True, randomness="same")(params)
    y, jfn = F.linearize(lambda p: f(p)[0], params)
    return y, jfn(_params(lib, m, pseed + 2))


def _ones_like_tree(lib, t):
    if isinstance(t, dict):
        return {k: _ones_like_tree(lib, v) for k, v in t.items()}
    if isinstance(t, (tuple, list)):
        return type(t)(_ones_like_tree(lib, v) for v in t)
    return lib.ones_like(t)


def _dims(lib, kind, m, r, pseed, xr, B):
    """vmap with in_dims given per parameter (dicts), several outputs and out_dims tuples,
    chunk_size edges and errors of in_dims/out_dims."""
    F = lib.func
    params = _params(lib, m, pseed)
    names = list(params)
    batched = [n for n in names if r["a"] < 0.5 or n == names[0]]
    for n in batched:
        params[n] = lib.stack([params[n] * (i + 1) for i in range(B)], int(r["b"] * 2))
    pd = {n: (int(r["b"] * 2) if n in batched else None) for n in names}
    x = _input(lib, kind, xr, None)
    if r["c"] < 0.1:
        pd[names[0]] = 5                                        # out of range
    elif r["c"] < 0.15:
        pd = {n: 0 for n in names[:1]}                          # structure mismatch
    elif r["c"] < 0.2:
        pd = 1.5                                                # not an int
    kw = {}
    if r["d"] < 0.3:
        kw["chunk_size"] = [0, 1, 2, B + 1][int(r["e"] * 4)]
    od = [0, (0, 1), (1, 0), [0, 0], (0,), (-1, 0)][int(r["f"] * 6)]

    def f(p, x):
        y = _call(lib, kind, m, p, x)
        return y, y.sum()
    return F.vmap(f, in_dims=(pd, None), out_dims=od, **kw)(params, x)


def _loss(lib, kind, m, p, x):
    return (_call(lib, kind, m, p, x) ** 2).sum()


def _grad(lib, kind, m, r, pseed, xr):
    F = lib.func
    params = _params(lib, m, pseed)
    x = _input(lib, kind, xr, None)
    aux = r["a"] < 0.4
    argnums = 0
    if kind != "embedding":
        argnums = [0, 1, (0, 1), (1, 0), (0,), -1][int(r["b"] * 6)]
    if r["c"] < 0.1:
        argnums = 2 if r["c"] < 0.05 else (0, 0)

    def f(p, x):
        loss = _loss(lib, kind, m, p, x)
        return (loss, {"y": loss.detach() * 2, "n": [loss]}) if aux else loss
    fn = F.grad_and_value if r["d"] < 0.5 else F.grad
    if r["e"] < 0.25 and kind != "wnorm":       # gradients for the buffers too
        bufs = {n: b * 1.0 for n, b in m.named_buffers() if b.dtype.is_floating_point}

        def g(p, b, x):
            return f({**p, **b}, x)
        return fn(g, argnums=(0, 1), has_aux=aux)(params, bufs, x)
    return fn(f, argnums=argnums, has_aux=aux)(params, x)


def _jac(lib, kind, m, r, pseed, xr):
    F = lib.func
    params = _params(lib, m, pseed)
    x = _input(lib, kind, xr, None)
    which = int(r["a"] * 3)
    if which == 2 and kind not in ("conv2d", "mha", "dropout", "bn_train"):
        return F.hessian(lambda p: _loss(lib, kind, m, p, x))(params)
    tr = F.jacrev if which == 0 else F.jacfwd
    kw = {}
    if r["b"] < 0.3 and which == 0:
        kw["chunk_size"] = 1 + int(r["c"] * 3)
    if r["d"] < 0.3 and kind != "embedding":
        return tr(lambda p, x: _call(lib, kind, m, p, x), argnums=(0, 1), **kw)(params, x)
    return tr(lambda p: _call(lib, kind, m, p, x), **kw)(params)


def _vmap(lib, kind, m, r, pseed, xr, B):
    F = lib.func
    params = _params(lib, m, pseed)
    x = _input(lib, kind, xr, B)
    dim = 0
    if r["a"] < 0.5 and x.dim() > 1:
        dim = int(r["b"] * x.dim())
        x = x.movedim(0, dim)
    out_dims = 0
    if r["c"] < 0.3:
        out_dims = int(r["d"] * 2)
    kw = {}
    if r["e"] < 0.3:
        kw["chunk_size"] = 1 + int(r["f"] * 2)
    if r["g"] < 0.2:
        kw["randomness"] = ["error", "same", "different"][int(r["h"] * 3)]
    # (not gru/lstm: torch's vmap of their cells' backward fails in an in-place op)
    if r["i"] < 0.3 and kind not in ("embedding", "gru", "lstm"):
        def f(p, x):
            return F.grad(lambda p: _loss(lib, kind, m, p, x))(p)
    else:
        def f(p, x):
            return _call(lib, kind, m, p, x)
    out = F.vmap(f, in_dims=(None, dim), out_dims=out_dims, **kw)(params, x)
    if kind == "dropout" and kw.get("randomness") in ("same", "different"):
        out = (out.shape, out.dtype)                    # random values differ
    return out


def _ensemble(lib, kind, r, seed, xr, B):
    F = lib.func
    models = [_build(lib, kind, seed + i, True) for i in range(B)]
    if r["a"] < 0.2:
        models[-1].eval()
    if r["g"] < 0.2:                  # frozen parameters, in some or all of the models
        for mod in models[:1 + int(r["h"] * B)]:
            next(mod.parameters()).requires_grad_(False)
    elif r["g"] < 0.25:
        models = models[:1] + [lib.nn.Identity()]
    elif r["g"] < 0.28:
        models = []
    elif r["g"] < 0.35:
        models = tuple(models) if r["h"] < 0.5 else iter(models)
    params, bufs = F.stack_module_state(models)
    # (not tied: torch's .to("meta") unties the weights, and its linear then reads garbage)
    base = _build(lib, kind, seed, True).to("meta") if r["b"] < 0.5 and kind != "tied" \
        else models[0]
    shared = r["c"] < 0.5
    x = _input(lib, kind, xr, None if shared else B)
    kw = {}
    if r["d"] < 0.8:
        kw["randomness"] = ["error", "same", "different"][int(r["e"] * 3)]
    if r["f"] < 0.3:
        kw["chunk_size"] = 1
    lib.manual_seed(7)

    def f(p, b, x):
        return _call(lib, kind, base, (p, b), x)
    out = F.vmap(f, in_dims=(0, 0, None if shared else 0), **kw)(params, bufs, x)
    if kind == "dropout" and kw.get("randomness") in ("same", "different"):
        out = (out.shape, out.dtype, (out == 0).any(-1).shape)   # random values differ
    return out, params, bufs


def run_one(seed):
    """Where ember's and torch's runs of program ``seed`` differ (None when they agree)."""
    prog = make(seed)
    e_res, e_ws = _run(prog, ember)
    t_res, t_ws = _run(prog, torch)
    d = _same(e_res, t_res)
    if d:
        return f"{prog.kind}/{prog.scen}: {d}"[:600]
    if e_ws != t_ws:
        return f"{prog.kind}/{prog.scen}: warnings {e_ws} vs {t_ws}"[:600]
    return None


@pytest.mark.parametrize("seed", range(150))
def test_func_modules_fuzz(seed):
    assert run_one(seed) is None


# --- what the generator found (before the fixes), as programs of their own -----------------

def _cell_jacrev(lib):
    """jacrev over an LSTM cell's parameters: vmap of its backward read placeholders (0s)."""
    m = lib.nn.LSTMCell(3, 2).double()
    _fill(lib, m, random.Random(1))
    x = lib.tensor([0.1, 0.2, -0.3], dtype=lib.float64)
    params = {k: v.detach() for k, v in m.named_parameters()}
    return lib.func.jacrev(lambda p: lib.func.functional_call(m, p, (x,))[0])(params)


def _gru_vmap_vjp(lib):
    m = lib.nn.GRUCell(3, 2).double()
    _fill(lib, m, random.Random(2))
    x = lib.tensor([0.1, 0.2, -0.3], dtype=lib.float64)
    params = {k: v.detach() for k, v in m.named_parameters()}
    _, back = lib.func.vjp(lambda p: lib.func.functional_call(m, p, (x,)), params)
    return lib.func.vmap(back)(lib.eye(2, dtype=lib.float64))


def _stack_mixed_requires_grad(lib):
    models = [lib.nn.Linear(3, 2) for _ in range(3)]
    models[2].bias.requires_grad_(False)
    return lib.func.stack_module_state(models)


def _stack_frozen(lib):
    models = [lib.nn.Linear(3, 2).double() for _ in range(2)]
    for mod in models:
        mod.weight.requires_grad_(False)
    _fill(lib, models[0], random.Random(3))
    _fill(lib, models[1], random.Random(4))
    return lib.func.stack_module_state(models)


def _stack_iterator(lib):
    return lib.func.stack_module_state(iter([lib.nn.Linear(3, 2)]))


def _bn_bias_size(lib):
    m = lib.nn.BatchNorm1d(3).double().eval()
    return lib.func.functional_call(m, {"bias": lib.zeros(2)},
                                    (lib.ones(4, 3, dtype=lib.float64),))


def _lstm_bias_dtype(lib):
    m = lib.nn.LSTMCell(3, 2).double()
    return lib.func.functional_call(m, {"bias_hh": lib.zeros(8)},
                                    (lib.ones(3, dtype=lib.float64),))


def _gru_missing_weight(lib):
    m = lib.nn.GRUCell(3, 2).double()
    return lib.func.functional_call(m, {"weight_ih": None}, (lib.ones(3, dtype=lib.float64),))


def _grad_none_input(lib):
    m = lib.nn.Linear(3, 2).double()
    params = {"weight": lib.ones(2, 3, dtype=lib.float64, requires_grad=True), "bias": None}
    out = lib.func.functional_call(m, params, (lib.ones(3, dtype=lib.float64),))
    return lib.autograd.grad(out.sum(), list(params.values()), allow_unused=True)


@pytest.mark.parametrize("case", [_cell_jacrev, _gru_vmap_vjp, _stack_mixed_requires_grad,
                                  _stack_frozen, _stack_iterator, _bn_bias_size,
                                  _lstm_bias_dtype, _gru_missing_weight, _grad_none_input])
def test_found(case):
    def prog(lib):
        return case(lib), None
    e_res, e_ws = _run(prog, ember)
    t_res, t_ws = _run(prog, torch)
    assert _same(e_res, t_res) is None and e_ws == t_ws


if __name__ == "__main__":
    n0, n1 = (int(a) for a in sys.argv[1:3]) if len(sys.argv) > 2 else (0, int(sys.argv[1]))
    bad = {}
    for s in range(n0, n1):
        try:
            d = run_one(s)
        except Exception as exc:      # noqa: BLE001
            d = f"CRASH {type(exc).__name__}: {exc}"[:300]
        if d:
            key = re.sub(r"[-\d.e]+", "#", d.split(":")[0] + ":" + d.split(":")[1])[:80]
            bad.setdefault(key, []).append((s, d))
    for k, v in sorted(bad.items(), key=lambda kv: -len(kv[1])):
        print(len(v), k)
        for s, d in v[:2]:
            print("   ", s, d[:500])
    print("total bad", sum(len(v) for v in bad.values()), "of", n1 - n0)
