"""Random programs over torch.nn.utils (helpers and the first programs), written once against a
library ``lib`` (ember or torch).

Each program records what is observable after every step (values in float64, dtype, shape,
requires_grad, state_dict keys and order, hook counts, errors and warnings) into a trace; the
parity test runs the same seed in both libraries and compares the traces.
"""

import importlib
import warnings

import numpy as np


class Stop(Exception):
    """The program raised: the error is the last entry of the trace."""


def _msg(text):
    text = str(text).replace("ember.", "torch.").replace("ember", "torch").split("\n")[0]
    return text.split(" (Triggered internally")[0].strip()


_ONCE = ("only appear once", "TypedStorage", "weight_norm is deprecated",
         "is deprecated in favor of", "nn.utils.weight_norm")


def _desc(lib, x):
    if isinstance(x, lib.Tensor):
        with lib.no_grad():
            y = x.detach()
            if y.dtype in (lib.bfloat16, lib.float16):
                y = y.double()
            vals = y.cpu().numpy().astype(np.float64 if y.dtype != lib.bool else bool)
        return ("T", str(x.dtype).split(".")[1], tuple(x.shape), vals, x.requires_grad)
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_desc(lib, v) for v in x])
    if isinstance(x, dict):
        return ("dict", [(k, _desc(lib, v)) for k, v in x.items()])
    if isinstance(x, float):
        return ("float", x if x == x else "nan")
    if x is None or isinstance(x, (int, bool, str)):
        return x
    return ("obj", type(x).__name__)


class Trace:
    def __init__(self, lib):
        self.lib = lib
        self.items = []

    def rec(self, tag, value):
        self.items.append((tag, _desc(self.lib, value)))

    def call(self, tag, fn, *args, **kwargs):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out = fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - the error itself is compared
                self.items.append((tag, ("ERR", type(exc).__name__, _msg(exc))))
                raise Stop from None
        ws = sorted({(w.category.__name__, _msg(w.message)[:60]) for w in caught
                     if not any(m in str(w.message) for m in _ONCE)})
        if ws:
            self.items.append((tag + ":warn", ws))
        return out


def _arr(r, shape, special=False):
    npr = np.random.default_rng(r.randrange(1 << 30))
    a = npr.standard_normal(shape) * r.choice([0.1, 1.0, 5.0])
    if special and a.size and r.random() < 0.3:
        a.reshape(-1)[r.randrange(a.size)] = r.choice([np.nan, np.inf, -np.inf])
    return a


def _t(lib, a, dtype="float64", rg=False):
    return lib.tensor(a, dtype=getattr(lib, dtype), requires_grad=rg)


def _load(lib, m, r):
    """Give the module's floating parameters and buffers seeded values."""
    with lib.no_grad():
        for _, p in list(m.named_parameters()) + list(m.named_buffers()):
            if p.is_floating_point():
                a = _arr(r, tuple(p.shape))
                if "var" in _ or "running_var" in _:
                    a = np.abs(a) + 0.5
                p.copy_(lib.tensor(a, dtype=p.dtype))
    return m


def _keys(m):
    return list(m.state_dict().keys())


def _hooks(m):
    return len(m._forward_pre_hooks)


# --- programs -------------------------------------------------------------------------------

def p_clip(lib, r, tr):
    n = r.choice([0, 1, 2, 3])
    dts = [r.choice(["float64", "float64", "float32"]) for _ in range(n)]
    ps = []
    for i in range(n):
        p = _t(lib, _arr(r, (r.choice([1, 2, 3]), r.choice([2, 3]))), dts[i], rg=True)
        if r.random() < 0.8:
            p.grad = _t(lib, _arr(r, tuple(p.shape), special=True), dts[i])
        ps.append(p)
    norm = r.choice([float("inf"), 2.0, 1.0, 0.5, 0, 3, "inf", -float("inf")])
    eif = r.random() < 0.4
    fe = r.choice([None, None, True, False])
    single = n and r.random() < 0.2
    what = r.choice(["norm", "norm", "value", "total", "with", "gen"])
    arg = ps[0] if single else ps
    maxn = r.choice([0.5, 1.0, 100.0, 0])
    if what in ("norm", "gen"):
        src = iter(arg if not single else [arg]) if what == "gen" else arg
        if what == "gen":
            src = (p for p in (arg if not single else [arg]))
        tot = tr.call("clip", lib.nn.utils.clip_grad_norm_, src, maxn, norm_type=norm,
                      error_if_nonfinite=eif, foreach=fe)
        tr.rec("total", tot)
    elif what == "value":
        tr.call("value", lib.nn.utils.clip_grad_value_, arg, r.choice([0.1, 1.0, 0]),
                foreach=fe)
    else:
        grads = [p.grad for p in ps if p.grad is not None]
        garg = grads[0] if single and grads else grads
        tot = tr.call("total", lib.nn.utils.get_total_norm, garg, norm_type=norm,
                      error_if_nonfinite=eif, foreach=fe)
        tr.rec("total", tot)
        if what == "with":
            tr.call("with", lib.nn.utils.clip_grads_with_norm_, arg, maxn, tot, foreach=fe)
    tr.rec("grads", [p.grad for p in ps])


def p_vec(lib, r, tr):
    shapes = [tuple(r.choice([1, 2, 3]) for _ in range(r.choice([0, 1, 2]))) for _ in
              range(r.choice([0, 1, 2, 3]))]
    ps = [_t(lib, _arr(r, s), rg=r.random() < 0.7) for s in shapes]
    if r.random() < 0.15 and ps:
        ps[r.randrange(len(ps))] = r.choice([3, "x", None])
    v = tr.call("p2v", lib.nn.utils.parameters_to_vector, ps)
    tr.rec("vec", v)
    size = sum(int(np.prod(s)) for s in shapes) + r.choice([0, 0, 0, 1, -1])
    vec = _t(lib, _arr(r, (max(size, 0),)))
    if r.random() < 0.1:
        vec = _t(lib, _arr(r, (1, max(size, 0))))
    if r.random() < 0.1:
        vec = [1.0] * max(size, 0)
    tr.call("v2p", lib.nn.utils.vector_to_parameters, vec, ps)
    tr.rec("params", ps)


def _mod(lib, r):
    kind = r.choice(["lin", "lin", "conv1", "conv2"])
    if kind == "lin":
        m = lib.nn.Linear(r.choice([2, 3]), r.choice([2, 4]), dtype=lib.float64)
        x = (r.choice([1, 3]), m.in_features)
    elif kind == "conv1":
        m = lib.nn.Conv1d(2, 3, 2, dtype=lib.float64)
        x = (2, 2, 5)
    else:
        m = lib.nn.Conv2d(2, 3, 2, dtype=lib.float64)
        x = (1, 2, 3, 4)
    return _load(lib, m, r), x


def _fwd_bwd(lib, r, tr, m, xs, tag="out"):
    x = _t(lib, _arr(r, xs))
    y = tr.call(tag, m, x)
    tr.rec(tag, y)
    y.sum().backward()
    tr.rec(tag + ":grads", [(n, p.grad) for n, p in m.named_parameters()])
    m.zero_grad()


def p_weight_norm(lib, r, tr):
    m, xs = _mod(lib, r)
    dim = r.choice([0, 1, -1, -2, None, 2, 5])
    name = r.choice(["weight", "weight", "bias", "nope"])
    new = r.random() < 0.5
    if new:
        tr.call("wn", lib.nn.utils.parametrizations.weight_norm, m, name=name, dim=dim)
    else:
        tr.call("wn", lib.nn.utils.weight_norm, m, name=name, dim=dim)
    tr.rec("keys", _keys(m))
    tr.rec("sd", dict(m.state_dict()))
    tr.rec("params", [n for n, _ in m.named_parameters()])
    tr.rec("hooks", _hooks(m))
    _fwd_bwd(lib, r, tr, m, xs)
    if r.random() < 0.3:
        _fwd_bwd(lib, r, tr, m, xs, "out2")
    if r.random() < 0.6:
        if new:
            tr.call("rm", lib.nn.utils.parametrize.remove_parametrizations, m, name,
                    leave_parametrized=r.random() < 0.7)
        else:
            tr.call("rm", lib.nn.utils.remove_weight_norm, m, r.choice([name, name, "bias"]))
        tr.rec("keys2", _keys(m))
        tr.rec("sd2", dict(m.state_dict()))
        tr.rec("hooks2", _hooks(m))
    if r.random() < 0.3:
        tr.call("wn2", lib.nn.utils.weight_norm, m, name=name, dim=dim)


def p_spectral(lib, r, tr):
    m, xs = _mod(lib, r)
    new = r.random() < 0.5
    it = r.choice([1, 2, 0, -1])
    dim = r.choice([None, None, 0, 1])
    if new:
        tr.call("sn", lib.nn.utils.parametrizations.spectral_norm, m,
                n_power_iterations=it, dim=dim)
    else:
        tr.call("sn", lib.nn.utils.spectral_norm, m, n_power_iterations=it, dim=dim)
    tr.rec("keys", _keys(m))
    tr.rec("shapes", [(k, tuple(v.shape)) for k, v in m.state_dict().items()])
    tr.rec("params", [n for n, _ in m.named_parameters()])
    tr.rec("hooks", _hooks(m))
    if r.random() < 0.5:
        m.eval()
    x = _t(lib, _arr(r, xs))
    y = tr.call("out", m, x)
    tr.rec("oshape", tuple(y.shape))
    if r.random() < 0.5:
        if new:
            tr.call("rm", lib.nn.utils.parametrize.remove_parametrizations, m, "weight")
        else:
            tr.call("rm", lib.nn.utils.remove_spectral_norm, m)
        tr.rec("keys2", _keys(m))
        tr.rec("hooks2", _hooks(m))


def _pz(lib, kind):
    nn = lib.nn

    class Sym(nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).transpose(-1, -2)

        def right_inverse(self, a):
            return a.triu()

    class Scale(nn.Module):
        def forward(self, x):
            return x * 2

        def right_inverse(self, a):
            return a / 2

    class Pair(nn.Module):
        def forward(self, a, b):
            return a + b

        def right_inverse(self, w):
            return w * 0.25, w * 0.75

    class NoInv(nn.Module):
        def forward(self, x):
            return x.exp()

    class Bad(nn.Module):
        def forward(self, x):
            return x.sum(0)

    return {"sym": Sym, "scale": Scale, "pair": Pair, "noinv": NoInv, "bad": Bad}[kind]()


def p_parametrize(lib, r, tr):
    P = lib.nn.utils.parametrize
    n = r.choice([2, 3])
    m = _load(lib, lib.nn.Linear(n, n, dtype=lib.float64), r)
    kinds = [r.choice(["sym", "scale", "pair", "noinv", "bad", "scale"])
             for _ in range(r.choice([1, 1, 2]))]
    name = r.choice(["weight", "weight", "bias"])
    for k in kinds:
        tr.call("reg", P.register_parametrization, m, name, _pz(lib, k),
                unsafe=r.random() < 0.2)
        tr.rec("keys", _keys(m))
    tr.rec("params", [nm for nm, _ in m.named_parameters()])
    tr.rec("isp", [P.is_parametrized(m), P.is_parametrized(m, name),
                   P.is_parametrized(m, "zzz")])
    tr.rec("val", getattr(m, name))
    tr.rec("orig", [(k, v) for k, v in m.state_dict().items()])
    if r.random() < 0.4:
        new = _arr(r, (n, n) if name == "weight" else (n,))
        if r.random() < 0.2:
            new = _arr(r, (n + 1,))
        with lib.no_grad():
            tr.call("set", setattr, m, name, _t(lib, new))
        tr.rec("val2", getattr(m, name))
        tr.rec("orig2", [(k, v) for k, v in m.state_dict().items()])
    x = _t(lib, _arr(r, (2, n)))
    if r.random() < 0.4:
        with P.cached():
            y = tr.call("cached", m, x)
            tr.rec("y", y)
            y.sum().backward()
    else:
        y = tr.call("fwd", m, x)
        tr.rec("y", y)
        y.sum().backward()
    tr.rec("grads", [(k, p.grad) for k, p in m.named_parameters()])
    if r.random() < 0.7:
        tr.call("rm", P.remove_parametrizations, m, r.choice([name, name, "other"]),
                leave_parametrized=r.random() < 0.6)
        tr.rec("keys2", _keys(m))
        tr.rec("sd2", [(k, v) for k, v in m.state_dict().items()])
        tr.rec("type", type(m).__name__)


def _orth_sd(m):
    """The state dict, with the base's columns past the weight's rank as shapes only (they
    complete it from a random start)."""
    k = min(m.weight.shape)
    return [(n, v[..., :k] if n.endswith(".base") else v) for n, v in m.state_dict().items()]


def p_orth(lib, r, tr):
    shape = r.choice([(3, 3), (2, 4), (4, 2), (3, 2)])
    m = _load(lib, lib.nn.Linear(shape[1], shape[0], bias=False, dtype=lib.float64), r)
    kw = {}
    if r.random() < 0.6:
        kw["orthogonal_map"] = r.choice(["matrix_exp", "cayley", "householder", "bad"])
    if r.random() < 0.4:
        kw["use_trivialization"] = r.random() < 0.5
    tr.call("orth", lib.nn.utils.parametrizations.orthogonal, m, **kw)
    tr.rec("keys", _keys(m))
    w = m.weight
    tr.rec("wshape", tuple(w.shape))
    q = w @ w.T if shape[0] <= shape[1] else w.T @ w
    tr.rec("orthok", bool(lib.allclose(q, lib.eye(min(shape), dtype=lib.float64),
                                       atol=1e-8)))
    tr.rec("w", w)
    tr.rec("sd", _orth_sd(m))
    x = _t(lib, _arr(r, (2, shape[1])))
    m(x).pow(2).sum().backward()
    if shape[0] == shape[1] or not kw.get("use_trivialization", True):
        # (else the gradient reaches the random completion of the base)
        tr.rec("grads", [(n, p.grad) for n, p in m.named_parameters()])
    if r.random() < 0.5:
        a = np.linalg.qr(_arr(r, (max(shape), min(shape))))[0]
        a = a if shape[0] >= shape[1] else a.T
        if r.random() < 0.2:
            a = a * 2
        with lib.no_grad():
            tr.call("set", setattr, m, "weight", _t(lib, a))
        tr.rec("w2", m.weight)
        tr.rec("sd2", _orth_sd(m))


def p_prune(lib, r, tr):
    pr = importlib.import_module(lib.__name__ + ".nn.utils.prune")
    m = _load(lib, lib.nn.Linear(r.choice([3, 4]), r.choice([2, 5]), dtype=lib.float64), r)
    name = r.choice(["weight", "weight", "bias", "nope"])
    amount = r.choice([0, 1, 2, 0.0, 0.3, 0.5, 1.0, 1.5, -1, 100, -0.2, True])
    how = r.choice(["l1", "l1", "rand", "ln", "ln", "custom", "identity", "global", "rs"])
    if how == "l1":
        tr.call("l1", pr.l1_unstructured, m, name, amount=amount)
    elif how == "rand":
        tr.call("rand", pr.random_unstructured, m, name, amount=amount)
    elif how == "rs":
        tr.call("rs", pr.random_structured, m, name, amount=amount, dim=r.choice([0, 1, -1]))
    elif how == "ln":
        tr.call("ln", pr.ln_structured, m, name, amount=amount,
                n=r.choice([1, 2, float("inf"), -float("inf"), "fro"]),
                dim=r.choice([0, 1, -1, 2]))
    elif how == "custom":
        shape = tuple(getattr(m, name).shape) if hasattr(m, name) else (2,)
        mask = (np.random.default_rng(r.randrange(99)).random(shape) < 0.5)
        tr.call("custom", pr.custom_from_mask, m, name, lib.tensor(mask.astype(np.float64)))
    elif how == "identity":
        tr.call("id", pr.identity, m, name)
    else:
        m2 = _load(lib, lib.nn.Linear(3, 2, dtype=lib.float64), r)
        tr.call("global", pr.global_unstructured, [(m, name), (m2, "weight")],
                pruning_method=r.choice([pr.L1Unstructured, pr.RandomUnstructured]),
                amount=amount)
        tr.rec("m2", [(k, tuple(v.shape)) for k, v in m2.state_dict().items()])
        # (how a random global pruning splits between the modules depends on the RNG)
        tr.rec("total_sum", float(m.weight_mask.sum() + m2.weight_mask.sum())
               if name == "weight" else None)
    tr.rec("keys", _keys(m))
    tr.rec("buffers", [n for n, _ in m.named_buffers()])
    tr.rec("hooks", _hooks(m))
    tr.rec("pruned", pr.is_pruned(m))
    mask = getattr(m, name + "_mask")
    if how != "global":
        tr.rec("mask_sum", float(mask.sum()))
    if how in ("l1", "ln", "custom", "identity"):
        tr.rec("mask", mask)
        tr.rec("val", getattr(m, name))
    if r.random() < 0.4:
        tr.call("again", pr.l1_unstructured, m, name, amount=r.choice([1, 0.5]))
        if how != "global":
            tr.rec("mask_sum2", float(getattr(m, name + "_mask").sum()))
        tr.rec("hooks2", _hooks(m))
        tr.rec("buffers2", [n for n, _ in m.named_buffers()])
    if r.random() < 0.6:
        tr.call("remove", pr.remove, m, r.choice([name, name, "bias" if name != "bias" else "x"]))
        tr.rec("keys3", _keys(m))
        tr.rec("hooks3", _hooks(m))
        tr.rec("pruned3", pr.is_pruned(m))


def p_rnn(lib, r, tr):
    U = lib.nn.utils.rnn
    B = r.choice([1, 2, 3, 4])
    F = r.choice([1, 3])
    lens = [r.choice([1, 2, 3, 4]) for _ in range(B)]
    if r.random() < 0.1:
        lens[r.randrange(B)] = r.choice([0, 9])
    T = max(lens)
    bf = r.random() < 0.5
    es = r.random() < 0.5
    x = _t(lib, _arr(r, (B, T, F) if bf else (T, B, F)), rg=True)
    ltype = r.choice(["list", "list", "i64", "i32", "f", "tuple"])
    if ltype == "list":
        L = list(lens)
    elif ltype == "tuple":
        L = tuple(lens)
    elif ltype == "i64":
        L = lib.tensor(lens)
    elif ltype == "i32":
        L = lib.tensor(lens, dtype=lib.int32)
    else:
        L = lib.tensor(lens, dtype=lib.float32)
    what = r.choice(["pack", "pack", "pad", "seq"])
    if what == "pack":
        pk = tr.call("pack", U.pack_padded_sequence, x, L, batch_first=bf, enforce_sorted=es)
    else:
        seqs = [_t(lib, _arr(r, (n, F)), rg=True) for n in lens]
        if what == "pad":
            side = r.choice(["right", "right", "left", "middle"])
            pv = r.choice([0.0, -1.0])
            p = tr.call("pad", U.pad_sequence, seqs, batch_first=bf, padding_value=pv,
                        padding_side=side)
            tr.rec("padded", p)
            if side == "right":
                ups = tr.call("unpad", U.unpad_sequence, p, lib.tensor(lens), batch_first=bf)
                tr.rec("unpad", ups)
            return
        pk = tr.call("packseq", U.pack_sequence, seqs, enforce_sorted=es)
    tr.rec("data", pk.data)
    tr.rec("bs", pk.batch_sizes)
    tr.rec("si", pk.sorted_indices)
    tr.rec("ui", pk.unsorted_indices)
    tr.rec("fields", [type(pk).__name__, len(pk), list(pk._fields)])
    op = r.choice(["unpack", "pad", "lstm", "gru", "rnn", "to"])
    if op == "unpack":
        tr.rec("unpack", tr.call("unpack", U.unpack_sequence, pk))
    elif op == "pad":
        tl = r.choice([None, None, T, T + 2, T - 1])
        out, ln = tr.call("pad_packed", U.pad_packed_sequence, pk,
                          batch_first=r.random() < 0.5, padding_value=r.choice([0.0, 7.0]),
                          total_length=tl)
        tr.rec("padded", out)
        tr.rec("lens", ln)
        out.sum().backward()
        tr.rec("xgrad", x.grad)
    elif op == "to":
        p2 = tr.call("to", pk.to, r.choice([lib.float32, lib.float64, "cpu"]))
        tr.rec("to", [p2.data, p2.batch_sizes, p2.sorted_indices, p2 is pk])
        tr.rec("dbl", [pk.double().data.dtype, pk.float().data.dtype, pk.is_cuda])
    else:
        H = 2
        cls = {"lstm": lib.nn.LSTM, "gru": lib.nn.GRU, "rnn": lib.nn.RNN}[op]
        net = _load(lib, cls(F, H, batch_first=bf, dtype=lib.float64,
                             bidirectional=r.random() < 0.3), r)
        out, h = tr.call("net", net, pk)
        tr.rec("odata", out.data)
        tr.rec("obs", out.batch_sizes)
        tr.rec("h", h)
        o2, ln = U.pad_packed_sequence(out, batch_first=bf)
        tr.rec("opad", o2)
        o2.sum().backward()
        tr.rec("wgrad", [(n, p.grad) for n, p in net.named_parameters()])


def p_fuse(lib, r, tr):
    conv = r.random() < 0.5
    tr_mode = r.random() < 0.15
    if conv:
        c = lib.nn.Conv2d(2, 3, 2, bias=r.random() < 0.5, dtype=lib.float64)
        bn = lib.nn.BatchNorm2d(3 if r.random() < 0.9 else 4, dtype=lib.float64,
                                affine=r.random() < 0.8)
        xs = (1, 2, 3, 3)
    else:
        c = lib.nn.Linear(3, 4, bias=r.random() < 0.5, dtype=lib.float64)
        bn = lib.nn.BatchNorm1d(4 if r.random() < 0.9 else 5, dtype=lib.float64)
        xs = (2, 3)
    _load(lib, c, r)
    _load(lib, bn, r)
    if not tr_mode:
        c.eval()
        bn.eval()
    tp = r.random() < 0.2 and conv
    if conv:
        f = tr.call("fuse", lib.nn.utils.fuse_conv_bn_eval, c, bn, transpose=tp)
    else:
        f = tr.call("fuse", lib.nn.utils.fuse_linear_bn_eval, c, bn)
    tr.rec("keys", _keys(f))
    tr.rec("sd", dict(f.state_dict()))
    x = _t(lib, _arr(r, xs))
    tr.rec("y", f(x))
    if not tp:
        tr.rec("ref", bn(c(x)))
    tr.rec("rg", [p.requires_grad for p in f.parameters()])


def p_misc(lib, r, tr):
    what = r.choice(["skip", "mf", "stateless", "stateless", "clip_alias"])
    if what == "skip":
        m = tr.call("skip", lib.nn.utils.skip_init, lib.nn.Linear, 3, 2,
                    dtype=r.choice([lib.float64, lib.float32]))
        tr.rec("sk", [(k, tuple(v.shape), str(v.dtype)[-7:], str(v.device))
                      for k, v in m.state_dict().items()])
    elif what == "mf":
        m = lib.nn.Conv2d(2, 3, 2) if r.random() < 0.7 else lib.nn.Sequential(
            lib.nn.Conv2d(2, 3, 1), lib.nn.ReLU(), lib.nn.ConvTranspose2d(3, 2, 1))
        fmt = r.choice([lib.channels_last, lib.contiguous_format])
        m2 = tr.call("mf", lib.nn.utils.convert_conv2d_weight_memory_format, m, fmt)
        tr.rec("same", m2 is m)
        tr.rec("strides", [p.stride() for p in m2.parameters()])
    elif what == "clip_alias":
        p = _t(lib, _arr(r, (3,)), rg=True)
        p.grad = _t(lib, _arr(r, (3,)))
        tr.rec("tot", tr.call("alias", lib.nn.utils.clip_grad_norm, [p], 0.1))
        tr.rec("g", p.grad)
    else:
        m = _load(lib, lib.nn.Linear(3, 2, dtype=lib.float64), r)
        w = _t(lib, _arr(r, (2, 3)), rg=True)
        params = {"weight": w}
        if r.random() < 0.3:
            params["bias"] = _t(lib, _arr(r, (2,)))
        if r.random() < 0.15:
            params["zzz"] = _t(lib, _arr(r, (1,)))
        x = _t(lib, _arr(r, (4, 3)))
        sc = r.random() < 0.3
        y = tr.call("fc", lib.func.functional_call, m, params, (x,), strict=sc)
        tr.rec("y", y)
        y.sum().backward()
        tr.rec("wg", w.grad)
        tr.rec("mgrad", [(n, p.grad) for n, p in m.named_parameters()])
        tr.rec("restored", dict(m.state_dict()))
