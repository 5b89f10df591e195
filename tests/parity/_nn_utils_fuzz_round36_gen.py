"""Random programs over torch.nn.utils, written once against a library ``lib`` (ember or torch).

Each program records what is observable after every step (values in float64, dtype, shape,
requires_grad, state_dict keys and order, hook counts, errors and warnings) into a trace; the
parity test runs the same seed in both libraries and compares the traces. The helpers and the
first programs are in _nn_utils_fuzz_round36_base.py; these are the deeper ones.
"""

import importlib
import random
import warnings

import numpy as np

from tests.parity._nn_utils_fuzz_round36_base import (Stop, Trace, _arr, _hooks, _keys, _load,
                                                      _mod, _msg, _pz, _t, p_clip, p_fuse,
                                                      p_misc, p_orth, p_parametrize, p_prune,
                                                      p_rnn, p_spectral, p_vec, p_weight_norm)

def p_clip2(lib, r, tr):
    dts = [r.choice(["float64", "float32", "float16", "bfloat16"]) for _ in range(2)]
    ps = []
    for dt in dts:
        p = _t(lib, np.round(_arr(r, (r.choice([1, 4]),)), 1), dt, rg=r.random() < 0.9)
        if r.random() < 0.85:
            p.grad = _t(lib, np.round(_arr(r, tuple(p.shape)), 1), dt)
        ps.append(p)
    norm = r.choice([2.0, 1.0, float("inf"), 0.0, -1.0, "fro", "nuc", 2])
    maxn = r.choice([0.5, -1.0, 1e-9, float("inf"), float("nan"), 2])
    fe = r.choice([None, True, False])
    what = r.choice(["norm", "total", "with", "value"])
    if what == "norm":
        tr.rec("tot", tr.call("clip", lib.nn.utils.clip_grad_norm_, ps, maxn, norm, foreach=fe))
    elif what == "value":
        tr.call("value", lib.nn.utils.clip_grad_value_, ps, r.choice([-0.5, 0.5, 2]),
                foreach=fe)
    else:
        grads = [p.grad for p in ps if p.grad is not None]
        tot = tr.call("total", lib.nn.utils.get_total_norm, grads, norm, foreach=fe)
        tr.rec("tot", tot)
        if what == "with":
            if r.random() < 0.3:
                tot = r.choice([1.0, 3])
            tr.call("with", lib.nn.utils.clip_grads_with_norm_, ps, maxn, tot, foreach=fe)
    tr.rec("grads", [None if p.grad is None else p.grad.double() for p in ps])
    tr.rec("dtypes", [None if p.grad is None else str(p.grad.dtype)[-8:] for p in ps])


def p_prune2(lib, r, tr):
    pr = importlib.import_module(lib.__name__ + ".nn.utils.prune")
    m = _load(lib, lib.nn.Conv2d(2, 3, 2, dtype=lib.float64), r)
    for step in range(r.choice([1, 2, 3])):
        how = r.choice(["l1", "ln", "custom", "identity", "l1s"])
        amount = r.choice([1, 2, 0.25, 0.5, 0, 0.9])
        name = r.choice(["weight", "weight", "bias"])
        if how == "l1":
            tr.call("l1", pr.l1_unstructured, m, name, amount=amount)
        elif how == "l1s":
            imp = _t(lib, np.abs(_arr(r, tuple(getattr(m, name).shape))))
            if r.random() < 0.2:
                imp = _t(lib, _arr(r, (1,)))
            tr.call("l1s", pr.l1_unstructured, m, name, amount=amount, importance_scores=imp)
        elif how == "ln":
            tr.call("ln", pr.ln_structured, m, name, amount=amount, n=r.choice([1, 2]),
                    dim=r.choice([0, 1, 2, 3, -1]))
        elif how == "custom":
            shape = tuple(getattr(m, name).shape)
            mask = np.random.default_rng(r.randrange(99)).random(shape) < 0.6
            tr.call("custom", pr.custom_from_mask, m, name, lib.tensor(mask))
        else:
            tr.call("identity", pr.identity, m, name)
        tr.rec("keys", _keys(m))
        tr.rec("hooks", _hooks(m))
        tr.rec("mask", getattr(m, name + "_mask"))
        tr.rec("val", getattr(m, name))
        hook = [h for h in m._forward_pre_hooks.values() if isinstance(h, pr.BasePruningMethod)]
        tr.rec("hook_types", sorted(type(h).__name__ for h in hook))
        cont = [h for h in hook if isinstance(h, pr.PruningContainer)]
        if cont:
            tr.rec("cont", [type(h).__name__ for h in cont[0]._pruning_methods])
    y = m(_t(lib, _arr(r, (1, 2, 3, 3))))
    tr.rec("y", y)
    y.sum().backward()
    tr.rec("grads", [(n, p.grad) for n, p in m.named_parameters()])
    if r.random() < 0.5:
        tr.call("rm", pr.remove, m, r.choice(["weight", "bias"]))
        tr.rec("keys2", _keys(m))
        tr.rec("sd2", dict(m.state_dict()))


def p_rnn2(lib, r, tr):
    U = lib.nn.utils.rnn
    B, F, H = r.choice([2, 3]), 2, 2
    lens = [r.choice([1, 2, 3]) for _ in range(B)]
    seqs = [_t(lib, _arr(r, (n, F)), rg=True) for n in lens]
    es = r.random() < 0.3
    pk = tr.call("packseq", U.pack_sequence, seqs, enforce_sorted=es)
    kind = r.choice(["lstm", "gru", "rnn", "lstm_proj"])
    bi = r.random() < 0.4
    layers = r.choice([1, 2])
    D = 2 if bi else 1
    if kind == "lstm_proj":
        net = lib.nn.LSTM(F, H + 1, num_layers=layers, bidirectional=bi, proj_size=H,
                          dtype=lib.float64)
    else:
        cls = {"lstm": lib.nn.LSTM, "gru": lib.nn.GRU, "rnn": lib.nn.RNN}[kind]
        net = cls(F, H, num_layers=layers, bidirectional=bi, dtype=lib.float64)
    _load(lib, net, r)
    hx = None
    if r.random() < 0.5:
        # (a hidden state of another batch size: torch's LSTM fails in a broadcast, not in
        # its size check, when the pack is sorted; its GRU/RNN and ember check the size)
        hb = r.choice([B, B, B + 1]) if not (es and kind.startswith("lstm")) else B
        h0 = _t(lib, _arr(r, (layers * D, hb, H)))
        if kind.startswith("lstm"):
            c0 = _t(lib, _arr(r, (layers * D, hb, H + (kind == "lstm_proj"))))
            hx = (h0, c0)
        else:
            hx = h0
    out, h = tr.call("net", net, pk, hx)
    tr.rec("odata", out.data)
    tr.rec("meta", [out.batch_sizes, out.sorted_indices, out.unsorted_indices])
    tr.rec("h", h)
    ups = U.unpack_sequence(out)
    tr.rec("ups", ups)
    loss = sum((u * (i + 1)).sum() for i, u in enumerate(ups))
    loss = loss + (h[0].sum() if isinstance(h, tuple) else h.sum())
    loss.backward()
    tr.rec("sgrad", [s_.grad for s_ in seqs])
    tr.rec("wgrad", [(n, p.grad) for n, p in net.named_parameters()])


def p_pack_direct(lib, r, tr):
    U = lib.nn.utils.rnn
    data = _t(lib, _arr(r, (4, 2)))
    bs = lib.tensor(r.choice([[2, 1, 1], [2, 2], [3, 1], [1, 3]]))
    si = r.choice([None, [1, 0], [0, 1, 2], [2, 0, 1]])
    si = None if si is None else lib.tensor(si)
    pk = tr.call("new", U.PackedSequence, data, bs, si)
    tr.rec("pk", [pk.data, pk.batch_sizes, pk.sorted_indices, pk.unsorted_indices])
    what = r.choice(["pad", "unpack", "tuple", "repl"])
    if what == "pad":
        tr.rec("pad", tr.call("pad", U.pad_packed_sequence, pk, batch_first=r.random() < 0.5))
    elif what == "unpack":
        tr.rec("unpack", tr.call("unpack", U.unpack_sequence, pk))
    elif what == "tuple":
        pk2 = tr.call("tuple", U.PackedSequence, (data, bs))
        tr.rec("pk2", [pk2.data, pk2.batch_sizes, pk2.sorted_indices])
    else:
        pk2 = pk._replace(data=data * 2)
        tr.rec("repl", [type(pk2).__name__, pk2.data])


def p_stateless2(lib, r, tr):
    nn = lib.nn
    m = _load(lib, nn.Sequential(nn.Linear(3, 3, dtype=lib.float64),
                                 nn.BatchNorm1d(3, dtype=lib.float64)), r)
    if r.random() < 0.3:
        m[0].extra = m[0].weight            # a tied attribute
    d1 = {"0.weight": _t(lib, _arr(r, (3, 3)), rg=True)}
    d2 = {}
    if r.random() < 0.5:
        d2["1.running_mean"] = _t(lib, _arr(r, (3,)))
    if r.random() < 0.3:
        d2["0.weight"] = _t(lib, _arr(r, (3, 3)))    # the same key twice
    if r.random() < 0.3:
        d2["0.bias"] = r.choice([None, 3])
    arg = (d1, d2) if r.random() < 0.5 else {**d1, **d2}
    kw = {}
    if r.random() < 0.5:
        kw["tie_weights"] = r.random() < 0.5
    if r.random() < 0.4:
        kw["strict"] = r.random() < 0.5
    if r.random() < 0.5:
        m.eval()
    x = _t(lib, _arr(r, (4, 3)))
    y = tr.call("fc", lib.func.functional_call, m, arg, (x,), **kw)
    tr.rec("y", y)
    tr.rec("sd", dict(m.state_dict()))
    tr.rec("training", m.training)




def p_spectral2(lib, r, tr):
    """Spectral norm with its u and v vectors set to the same values in both libraries (their
    random starts differ): the power iterations, values and gradients then agree."""
    m, xs = _mod(lib, r)
    new = r.random() < 0.5
    it = r.choice([1, 2, 3])
    dim = r.choice([None, None, 0, 1]) if not isinstance(m, lib.nn.Linear) else None
    eps = r.choice([1e-12, 1e-3])
    if new:
        tr.call("sn", lib.nn.utils.parametrizations.spectral_norm, m, n_power_iterations=it,
                dim=dim, eps=eps)
        owner, names = m.parametrizations.weight[0], ("_u", "_v")
    else:
        tr.call("sn", lib.nn.utils.spectral_norm, m, n_power_iterations=it, dim=dim, eps=eps)
        owner, names = m, ("weight_u", "weight_v")
    with lib.no_grad():
        for n in names:
            b = getattr(owner, n)
            a = _arr(r, tuple(b.shape))
            b.copy_(lib.tensor(a / np.linalg.norm(a), dtype=b.dtype))
        if not new:
            m.weight_orig.copy_(m.weight_orig)
    tr.rec("sd", dict(m.state_dict()))
    for step in range(r.choice([1, 2])):
        if r.random() < 0.3:
            m.eval()
        x = _t(lib, _arr(r, xs))
        y = tr.call("out", m, x)
        tr.rec("y", y)
        y.pow(2).sum().backward()
        tr.rec("grads", [(n, p.grad) for n, p in m.named_parameters()])
        tr.rec("uv", [getattr(owner, n) for n in names])
        m.zero_grad()
        m.train()
    removed = r.random() < 0.5
    if removed:
        if new:
            tr.call("rm", lib.nn.utils.parametrize.remove_parametrizations, m, "weight")
        else:
            tr.call("rm", lib.nn.utils.remove_spectral_norm, m)
        tr.rec("sd2", dict(m.state_dict()))
    if not new and r.random() < 0.4 and not removed:   # (else u, v keep random starts)
        sd = {k: v.clone() for k, v in m.state_dict().items()}
        m2, _ = _mod(lib, random.Random(0))
        if type(m2) is type(m):
            tr.call("sn2", lib.nn.utils.spectral_norm, m2)
            tr.call("load", m2.load_state_dict, sd, strict=r.random() < 0.5)
            tr.rec("sd3", dict(m2.state_dict()))




def p_parametrize2(lib, r, tr):
    """Several originals, assignments, state-dict round trips and transfers."""
    P = lib.nn.utils.parametrize
    m = _load(lib, lib.nn.Linear(2, 2, dtype=lib.float64), r)
    kinds = r.choice([["pair"], ["pair", "scale"], ["scale", "sym"], ["sym"]])
    for k in kinds:
        tr.call("reg", P.register_parametrization, m, "weight", _pz(lib, k))
    tr.rec("keys", _keys(m))
    tr.rec("sd", dict(m.state_dict()))
    tr.rec("type", [type(m).__name__, P.type_before_parametrizations(m).__name__])
    if r.random() < 0.5:
        v = _t(lib, _arr(r, (2, 2)))
        with lib.no_grad():
            tr.call("set", setattr, m, "weight", v)
        tr.rec("sd2", dict(m.state_dict()))
        tr.rec("w", m.weight)
    if r.random() < 0.5:
        m2 = _load(lib, lib.nn.Linear(2, 2, dtype=lib.float64), r)
        for k in kinds:
            P.register_parametrization(m2, "weight", _pz(lib, k))
        sd = dict(m.state_dict())
        if r.random() < 0.3:
            sd.pop(next(iter(sd)))
        res = tr.call("load", m2.load_state_dict, sd, strict=r.random() < 0.6)
        tr.rec("res", [list(res.missing_keys), list(res.unexpected_keys)])
        tr.rec("w2", m2.weight)
    if r.random() < 0.4:
        m3 = lib.nn.Linear(2, 2, dtype=lib.float64)
        tr.call("transfer", P.transfer_parametrizations_and_params, m, m3)
        tr.rec("keys3", _keys(m3))
        tr.rec("w3", m3.weight)
    x = _t(lib, _arr(r, (3, 2)))
    y = tr.call("fwd", m, x)
    y.sum().backward()
    tr.rec("grads", [(n, p.grad) for n, p in m.named_parameters()])
    lp = r.random() < 0.7
    tr.call("rm", P.remove_parametrizations, m, "weight", leave_parametrized=lp)
    tr.rec("sd4", dict(m.state_dict()))
    tr.rec("rg", [(n, p.requires_grad, type(p).__name__) for n, p in m.named_parameters()])


def p_sn_upgrade(lib, r, tr):
    """Loading a version-0 spectral-norm state dict (``weight`` instead of ``weight_v``)."""
    m = _load(lib, lib.nn.Linear(3, 2, dtype=lib.float64), r)
    lib.nn.utils.spectral_norm(m)
    sd = {"bias": _t(lib, _arr(r, (2,))), "weight_orig": _t(lib, _arr(r, (2, 3))),
          "weight": _t(lib, _arr(r, (2, 3))), "weight_u": _t(lib, _arr(r, (2,)))}
    for k in list(sd):
        if r.random() < 0.15:
            del sd[k]
    res = tr.call("load", m.load_state_dict, sd, strict=r.random() < 0.5)
    tr.rec("res", [list(res.missing_keys), list(res.unexpected_keys)])
    full = all(k in sd for k in ("weight", "weight_u", "weight_orig"))
    tr.rec("sd", dict(m.state_dict()) if full else None)    # (else v keeps its random start)


PROGRAMS = [p_clip, p_clip, p_vec, p_weight_norm, p_spectral, p_parametrize, p_orth,
            p_prune, p_prune, p_rnn, p_rnn, p_rnn, p_fuse, p_misc,
            p_clip2, p_prune2, p_rnn2, p_rnn2, p_pack_direct, p_stateless2,
            p_spectral2, p_spectral2, p_parametrize2, p_parametrize2, p_sn_upgrade]


def run(lib, seed, prog=None):
    """The trace of program ``prog`` (a name; by default one picked by ``seed``)."""
    r = random.Random(seed)
    prog = PROGRAMS[seed % len(PROGRAMS)] if prog is None else globals()[prog]
    tr = Trace(lib)
    tr.items.append(("prog", prog.__name__))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            prog(lib, r, tr)
        except Stop:
            pass
        except Exception as exc:  # noqa: BLE001 - an error outside tr.call is compared too
            tr.items.append(("uncaught", ("ERR", type(exc).__name__, _msg(exc))))
    return tr.items


def _same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return False
        if a.shape != b.shape:
            return False
        if a.dtype == bool or b.dtype == bool:
            return np.array_equal(a, b)
        return np.allclose(a, b, rtol=1e-6, atol=1e-6, equal_nan=True)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-6 * max(1, abs(a)) or (a != a and b != b)
    return a == b


def compare(ember, torch, seed, prog=None):
    """None when the traces agree, else (step, ember's entry, torch's entry)."""
    ember.manual_seed(seed)
    e = run(ember, seed, prog)
    torch.manual_seed(seed)
    t = run(torch, seed, prog)
    for i in range(max(len(e), len(t))):
        a = e[i] if i < len(e) else None
        b = t[i] if i < len(t) else None
        if not _same(a, b):
            return i, a, b
    return None
