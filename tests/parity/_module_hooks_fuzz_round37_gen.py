"""The random programs of test_parity_module_hooks_fuzz_round37.py: a small module tree
(Linear / Conv1d / BatchNorm1d / Dropout / ReLU, containers, modules returning tuples or
taking keyword arguments, a module used twice) and a random sequence of calls of the nn.Module
machinery, run in ember and torch side by side.

Steps: forward pre / forward / full backward / full backward pre / deprecated backward hooks
(with_kwargs, prepend, always_call, returning None, replacements, tuples or a wrong count;
raising), global hooks, handles (removed twice, ``with handle``), calls with a backward (the
output modified in place, the module called twice), state_dict / load_state_dict (hooks,
strict, assign, edited dicts, prefix, keep_vars), registration and attribute errors, apply,
train / eval / requires_grad_ / zero_grad, dtype conversions keeping Parameter identity,
lookups, containers (slicing, insert, extend, pop, +, repr). Compared after every step: its
result (or error type and first message line), its warnings, and the log of every hook call
(the module, the hook, and what it was given).
"""

import random
import re
import warnings

import numpy as np

import ember

try:
    import torch
except ImportError:     # the test module skips
    torch = None


class Diverged(Exception):
    pass


def _msg(text):
    text = str(text).replace("torch.", "ember.").replace("torch", "ember")
    # ember names the module a call failed in on lines of its own ("  in model.m0 (...)")
    lines = [ln for ln in text.split("\n") if not ln.startswith("  in ")]
    # the class defining forward (Conv1d's or its base's) is an implementation accident
    text = re.sub(r"[\w.<>]+\.forward\(\)", "forward()", "\n".join(lines))
    if not text.startswith("Error(s) in loading"):     # (load_state_dict's lists count)
        text = text.split("\n")[0]
    return text.split(" (Triggered internally")[0]


def _outcome(fn, *args):
    """``(True, fn(*args))`` or ``(False, (error type, message))``, and the warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = True, fn(*args)
        except Exception as exc:  # noqa: BLE001 - the error itself is compared
            out = False, (type(exc).__name__, _msg(exc))
    return out, [(w.category.__name__, _msg(w.message).split("\n")[0][:90]) for w in caught]


def _d(lib, v, values=True):
    """A library-free description of ``v`` (tensors as shape, dtype, flags and values)."""
    if isinstance(v, lib.Tensor):
        kind = "P" if isinstance(v, lib.nn.Parameter) else "T"
        arr = None
        if values:
            with lib.no_grad():
                arr = v.detach().to(lib.float64).numpy().copy()
        return (kind, tuple(v.shape), str(v.dtype).split(".")[-1], v.requires_grad, arr)
    if isinstance(v, (tuple, list)):
        return (type(v).__name__, tuple(_d(lib, x, values) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple((k, _d(lib, x, values)) for k, x in v.items()))
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, lib.nn.Module):
        return ("M", type(v).__name__)
    return ("py", type(v).__name__)


def _eq(a, b, tol=1e-4):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return False
        if a.shape != b.shape:
            return False
        scale = float(np.nanmax(np.abs(a), initial=1.0)) if np.isfinite(a).all() else 1.0
        return np.allclose(a, b, rtol=tol, atol=tol * scale, equal_nan=True)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_eq(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_eq(x, y, tol) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


# --- the modules -----------------------------------------------------------------------------

_CLASSES = {}


def _classes(lib):
    """The custom module classes, one set per library (same names in both)."""
    if lib in _CLASSES:
        return _CLASSES[lib]
    nn = lib.nn

    class Chain(nn.Module):
        def forward(self, x, scale=None):
            for m in self.children():
                if isinstance(m, nn.ModuleList):
                    for sub in m:
                        x = sub(x)
                elif isinstance(m, Scale) and scale is not None:
                    x = m(x, scale=scale)
                else:
                    x = m(x)
                if isinstance(x, tuple):
                    x = x[0]
            return x

    class Pair(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(x), 2 * x, "tag"

    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(lib.ones(3))
            self.register_buffer("steps", lib.tensor(0))
            self.register_buffer("tmp", lib.zeros(3), persistent=False)

        def forward(self, x, scale=1.0):
            return x * self.w * scale

        def extra_repr(self):
            return "dim=3"

    class Twice(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(self.inner(x))

    class NoGrad(nn.Module):
        def forward(self, x):
            return x.detach() + 1

    _CLASSES[lib] = dict(Chain=Chain, Pair=Pair, Scale=Scale, Twice=Twice, NoGrad=NoGrad)
    return _CLASSES[lib]


_LEAVES = ["linear", "linear", "conv", "conv3", "bn", "drop0", "drop1", "relu", "relu_inplace",
           "pair", "scale", "scale", "twice", "nograd", "identity"]


def _tree_spec(rng, depth=0):
    kinds = _LEAVES + (["seq", "seq", "mlist", "chain"] if depth < 2 else [])
    return [_node_spec(rng, rng.choice(kinds), depth) for _ in range(rng.randrange(1, 4))]


def _node_spec(rng, kind, depth):
    if kind in ("seq", "mlist", "chain"):
        return kind, _tree_spec(rng, depth + 1)
    if kind == "linear":
        return kind, rng.random() < 0.8
    return kind, None


def _build_node(lib, node):
    nn, C = lib.nn, _classes(lib)
    kind, arg = node
    if kind in ("seq", "mlist", "chain"):
        children = [_build_node(lib, c) for c in arg]
        if kind == "seq":
            return nn.Sequential(*children)
        if kind == "mlist":
            return nn.ModuleList(children)
        m = C["Chain"]()
        for i, c in enumerate(children):
            m.add_module(f"c{i}", c)
        return m
    return {"linear": lambda: nn.Linear(3, 3, bias=arg),
            "conv": lambda: nn.Conv1d(3, 3, 1),
            "conv3": lambda: nn.Conv1d(3, 3, 3, padding=1),
            "bn": lambda: nn.BatchNorm1d(3),
            "drop0": lambda: nn.Dropout(0.0),
            "drop1": lambda: nn.Dropout(1.0),
            "relu": lambda: nn.ReLU(),
            "relu_inplace": lambda: nn.ReLU(inplace=True),
            "pair": lambda: C["Pair"](),
            "scale": lambda: C["Scale"](),
            "twice": lambda: C["Twice"](nn.Linear(3, 3)),
            "nograd": lambda: C["NoGrad"](),
            "identity": lambda: nn.Identity()}[kind]()


def build(lib, spec, seed):
    """The tree of ``spec`` with its parameters and buffers set from ``seed``."""
    root = _classes(lib)["Chain"]()
    for i, node in enumerate(spec):
        root.add_module(f"m{i}", _build_node(lib, node))
    npr = np.random.default_rng(seed)
    with lib.no_grad():
        for _, p in sorted(root.named_parameters(), key=lambda kv: kv[0]):
            p.copy_(lib.tensor(npr.standard_normal(tuple(p.shape)) * 0.5).to(p.dtype))
    return root


def _env(lib, spec, seed):
    root = build(lib, spec, seed)
    named = list(root.named_modules(remove_duplicate=False))
    return {"root": root, "mods": [m for _, m in named], "names": [n or "root" for n, _ in named],
            "log": [], "handles": [], "globals": [], "out": None, "sd": None}


def _name_of(env, module):
    for n, m in zip(env["names"], env["mods"]):
        if m is module:
            return n
    return type(module).__name__


# --- hooks -----------------------------------------------------------------------------------

def _scaled(lib, v, k):
    if isinstance(v, lib.Tensor):
        return v * k
    if isinstance(v, tuple):
        return tuple(_scaled(lib, x, k) for x in v)
    return v


def _hook(rng):
    """A random hook registration: ``(label, fn(lib, env) -> result)``."""
    which = rng.choice(["pre", "pre", "pre_kw", "fwd", "fwd", "fwd_kw", "fwd_always", "bw",
                        "bw", "bw", "bw_pre", "bw_pre", "old_bw", "global_pre", "global_fwd",
                        "global_bw", "global_bw_pre", "global_buffer_reg", "global_param_reg",
                        "global_module_reg"])
    ret = rng.choice(["none", "none", "scale", "scale", "single", "wrong", "raise", "remove"])
    prepend = rng.random() < 0.3
    pick = rng.randrange(1 << 20)
    tag = rng.randrange(100)
    label = f"hook {which} ret={ret} prepend={prepend} at {pick}"

    def fn(lib, env):
        mods = env["mods"]
        m = mods[pick % len(mods)]
        log = env["log"]

        def seen(module, *parts):
            log.append((tag, which, _name_of(env, module)) + tuple(_d(lib, p) for p in parts))

        def result(value):
            if ret == "scale":
                return _scaled(lib, value, 2)
            if ret == "single":
                return value[0] if isinstance(value, tuple) and value else value
            if ret == "wrong":
                return (value if isinstance(value, tuple) else (value,)) + (None,)
            if ret == "raise":
                raise ValueError(f"hook {tag} raised")
            if ret == "remove" and box:
                box[0].remove()     # (removing itself while the hooks run)
            return None

        box = []

        if which == "pre":
            h = m.register_forward_pre_hook(lambda mod, a: (seen(mod, a), result(a))[1],
                                            prepend=prepend)
        elif which == "pre_kw":
            def pre_kw(mod, a, kw):
                seen(mod, a, kw)
                if ret == "scale":
                    return _scaled(lib, a, 2), dict(kw)
                return (a, kw, None) if ret == "wrong" else result(a)
            h = m.register_forward_pre_hook(pre_kw, prepend=prepend, with_kwargs=True)
        elif which in ("fwd", "fwd_always"):
            h = m.register_forward_hook(lambda mod, a, o: (seen(mod, a, o), result(o))[1],
                                        prepend=prepend, always_call=which == "fwd_always")
        elif which == "fwd_kw":
            h = m.register_forward_hook(lambda mod, a, kw, o: (seen(mod, a, kw, o),
                                                               result(o))[1],
                                        prepend=prepend, with_kwargs=True)
        elif which == "bw":
            h = m.register_full_backward_hook(lambda mod, gi, go: (seen(mod, gi, go),
                                                                   result(gi))[1],
                                              prepend=prepend)
        elif which == "bw_pre":
            h = m.register_full_backward_pre_hook(lambda mod, go: (seen(mod, go),
                                                                   result(go))[1],
                                                  prepend=prepend)
        elif which == "old_bw":
            h = m.register_backward_hook(lambda mod, gi, go: (seen(mod, gi, go), None)[1])
        else:
            mm = lib.nn.modules.module
            reg = {"global_pre": mm.register_module_forward_pre_hook,
                   "global_fwd": mm.register_module_forward_hook,
                   "global_bw": mm.register_module_full_backward_hook,
                   "global_bw_pre": mm.register_module_full_backward_pre_hook,
                   "global_buffer_reg": mm.register_module_buffer_registration_hook,
                   "global_param_reg": mm.register_module_parameter_registration_hook,
                   "global_module_reg": mm.register_module_module_registration_hook}[which]

            def glob(mod, *parts):
                if any(mod is x for x in env["mods"]):
                    seen(mod, *parts)
                    if which.endswith("_reg"):
                        return _scaled(lib, parts[-1], 2) if ret == "scale" else \
                            result(parts[-1]) if ret == "raise" else None
                    return result(parts[0] if which == "global_bw" else parts[-1])
                return None
            h = reg(glob, **({"always_call": prepend, "with_kwargs": False}
                             if which == "global_fwd" else {}))
            env["globals"].append(h)
            box.append(h)
            return "global"
        env["handles"].append(h)
        box.append(h)
        return type(h).__name__

    return label, fn


def _handle_step(rng):
    how = rng.choice(["remove", "remove_twice", "with", "ids"])
    pick = rng.randrange(1 << 20)

    def fn(lib, env):
        hs = env["handles"]
        if how == "ids":
            return [hs[i].id < hs[i + 1].id for i in range(len(hs) - 1)]
        if not hs:
            return None
        h = hs[pick % len(hs)]
        if how == "with":
            with h:
                pass
            return "with"
        h.remove()
        if how == "remove_twice":
            h.remove()
        return "removed"
    return f"handle {how} {pick}", fn


# --- calls -----------------------------------------------------------------------------------

def _call_step(rng):
    how = rng.choice(["plain", "plain", "plain", "kw", "twice", "inplace_out", "no_grad_x",
                      "eval", "no_grad_mode", "retain_twice", "grad", "create_graph"])
    seed = rng.randrange(1 << 30)
    x_grad = how != "no_grad_x" and rng.random() < 0.7

    def fn(lib, env):
        root = env["root"]
        npr = np.random.default_rng(seed)
        x = lib.tensor(npr.standard_normal((2, 3, 3))).to(lib.float32).requires_grad_(x_grad)
        w = lib.tensor(npr.standard_normal((2, 3, 3))).to(lib.float32)
        if how == "eval":
            root.eval()
        if how == "no_grad_mode":
            with lib.no_grad():
                out = root(x)
        elif how == "kw":
            out = root(x, scale=0.5)
        elif how == "twice":
            out = root(x) + root(x * 2)
        else:
            out = root(x)
        got = [_d(lib, out)]
        if isinstance(out, lib.Tensor):
            got.append(None if out.grad_fn is None else type(out.grad_fn).__name__)
        if how == "inplace_out" and isinstance(out, lib.Tensor):
            out.add_(1)
        if isinstance(out, lib.Tensor) and out.requires_grad and out.shape == w.shape:
            loss = (out * w).sum()
            if how == "grad" and x.requires_grad:
                got.append(_d(lib, lib.autograd.grad(loss, x)))
            elif how == "create_graph" and x.requires_grad:
                g, = lib.autograd.grad(loss, x, create_graph=True)
                got.append(_d(lib, g))
                if g.requires_grad:
                    (g * g).sum().backward()
            else:
                loss.backward(retain_graph=how == "retain_twice")
                if how == "retain_twice":
                    loss.backward()
        got.append(_d(lib, x.grad))
        got.append([(n, _d(lib, p.grad)) for n, p in root.named_parameters()])
        return got
    return f"call {how} x_grad={x_grad}", fn


# --- state dicts -----------------------------------------------------------------------------

def _sd_hook(rng):
    which = rng.choice(["sd_post", "sd_pre", "load_pre", "load_post", "load_post_clear"])
    pick = rng.randrange(1 << 20)
    tag = rng.randrange(100)
    ret_new = rng.random() < 0.3

    def fn(lib, env):
        m = env["mods"][pick % len(env["mods"])]
        log = env["log"]
        name = _name_of(env, m)
        if which == "sd_post":
            def hook(mod, sd, prefix, meta):
                log.append((tag, which, name, prefix, list(sd)))
                if ret_new:
                    new = dict(sd)
                    new[prefix + "extra"] = lib.ones(1)
                    return new
            h = m._register_state_dict_hook(hook)
        elif which == "sd_pre":
            h = m.register_state_dict_pre_hook(
                lambda mod, prefix, keep_vars: log.append((tag, which, name, prefix, keep_vars)))
        elif which == "load_pre":
            def hook(mod, sd, prefix, meta, strict, missing, unexpected, errors):
                log.append((tag, which, name, prefix, strict, sorted(sd)))
            h = m.register_load_state_dict_pre_hook(hook)
        else:
            def hook(mod, keys):
                log.append((tag, which, name, list(keys.missing_keys),
                            list(keys.unexpected_keys)))
                if which == "load_post_clear":
                    keys.missing_keys.clear()
                    keys.unexpected_keys.clear()
            h = m.register_load_state_dict_post_hook(hook)
        env["handles"].append(h)
        return type(h).__name__
    return f"sd hook {which} new={ret_new} at {pick}", fn


def _state_dict_step(rng):
    prefix = rng.choice(["", "", "p.", "q"])
    keep_vars = rng.random() < 0.3

    def fn(lib, env):
        sd = env["root"].state_dict(prefix=prefix, keep_vars=keep_vars)
        return type(sd).__name__, [(k, _d(lib, v)) for k, v in sd.items()]
    return f"state_dict prefix={prefix!r} keep_vars={keep_vars}", fn


def _load_step(rng):
    edit = rng.choice(["none", "drop", "extra", "shape", "double", "notensor", "int", "empty"])
    strict = rng.choice([True, True, False])
    assign = rng.random() < 0.3
    pick = rng.randrange(1 << 20)
    seed = rng.randrange(1 << 30)

    def fn(lib, env):
        root = env["root"]
        npr = np.random.default_rng(seed)
        sd = {k: lib.tensor(npr.standard_normal(tuple(v.shape))).to(v.dtype)
              if v.is_floating_point() else v.clone() for k, v in root.state_dict().items()}
        keys = list(sd)
        key = keys[pick % len(keys)] if keys else None
        if edit == "drop" and key:
            del sd[key]
        elif edit == "extra":
            sd["zz.w"] = lib.ones(3)
        elif edit == "shape" and key:
            sd[key] = lib.zeros(4, 1)
        elif edit == "double" and key:
            sd[key] = sd[key].double()
        elif edit == "int" and key:
            sd[key] = sd[key].to(lib.int64)
        elif edit == "notensor" and key:
            sd[key] = [1.0, 2.0]
        elif edit == "empty":
            sd = {}
        before = {n: p for n, p in root.named_parameters()}
        res = root.load_state_dict(sd, strict=strict, assign=assign)
        after = [(n, p is before.get(n), isinstance(p, lib.nn.Parameter), _d(lib, p))
                 for n, p in root.named_parameters()]
        return repr(res), type(res).__name__, after, [(n, _d(lib, b))
                                                       for n, b in root.named_buffers()]
    return f"load {edit} strict={strict} assign={assign} {pick}", fn


# --- registration, attributes, traversal -----------------------------------------------------

_NAMES = ["a", "a.b", "", "w", "training", "forward", "m0", "weight", "steps", "lin", 3]


def _register_step(rng):
    what = rng.choice(["register_parameter", "register_buffer", "add_module", "register_module",
                       "setattr", "setattr", "delattr"])
    name = rng.choice(_NAMES)
    value = rng.choice(["param", "tensor", "none", "int", "module", "param_int"])
    persistent = rng.random() < 0.7
    pick = rng.randrange(1 << 20)

    def fn(lib, env):
        m = env["mods"][pick % len(env["mods"])]
        v = {"param": lambda: lib.nn.Parameter(lib.ones(2)), "tensor": lambda: lib.ones(2),
             "none": lambda: None, "int": lambda: 3, "module": lambda: lib.nn.Identity(),
             "param_int": lambda: lib.nn.Parameter(lib.ones(2, dtype=lib.int64),
                                                   requires_grad=False)}[value]()
        if what == "register_parameter":
            m.register_parameter(name, v)
        elif what == "register_buffer":
            m.register_buffer(name, v, persistent=persistent)
        elif what in ("add_module", "register_module"):
            getattr(m, what)(name, v)
        elif what == "setattr":
            setattr(m, name, v)
        else:
            delattr(m, name)
        return (sorted(m._parameters), sorted(m._buffers), sorted(m._modules),
                sorted(m._non_persistent_buffers_set), list(m.state_dict()))
    return f"{what}({name!r}, {value}, persistent={persistent}) at {pick}", fn


def _named_step(rng):
    what = rng.choice(["named_parameters", "named_buffers", "named_modules", "named_children",
                       "parameters", "modules"])
    kw = {}
    if what in ("named_parameters", "named_buffers", "named_modules"):
        kw = {"prefix": rng.choice(["", "pre"]), "remove_duplicate": rng.random() < 0.5}
        if what != "named_modules":
            kw["recurse"] = rng.random() < 0.7
    pick = rng.randrange(1 << 20)

    def fn(lib, env):
        m = env["mods"][pick % len(env["mods"])]
        items = list(getattr(m, what)(**kw))
        return [(i[0], _d(lib, i[1], False)) if isinstance(i, tuple) else _d(lib, i, False)
                for i in items]
    return f"{what}({kw}) at {pick}", fn


def _state_step(rng):
    how = rng.choice(["train", "eval", "train_false", "requires_grad_false", "requires_grad",
                      "zero_grad", "zero_grad_keep", "apply", "half", "double", "to_double",
                      "to_float16_kw", "bfloat16", "float"])
    pick = rng.randrange(1 << 20)

    def fn(lib, env):
        m = env["mods"][pick % len(env["mods"])]
        before = [(n, p) for n, p in env["root"].named_parameters()]
        if how == "train":
            r = m.train()
        elif how == "eval":
            r = m.eval()
        elif how == "train_false":
            r = m.train(False)
        elif how == "requires_grad_false":
            r = m.requires_grad_(False)
        elif how == "requires_grad":
            r = m.requires_grad_()
        elif how == "zero_grad":
            r = m.zero_grad()
        elif how == "zero_grad_keep":
            r = m.zero_grad(set_to_none=False)
        elif how == "apply":
            seen = []
            r = m.apply(lambda mm: seen.append(_name_of(env, mm)))
            return seen, r is m
        elif how == "to_double":
            r = m.to(lib.float64)
        elif how == "to_float16_kw":
            r = m.to(dtype=lib.float16)
        else:
            r = getattr(m, how)()
        after = dict(env["root"].named_parameters())
        return (r is m if r is not None else None,
                [(n, after.get(n) is p, _d(lib, p.grad, False)) for n, p in before],
                [(n, _d(lib, mm.training, False)) for n, mm in zip(env["names"], env["mods"])],
                [(n, _d(lib, b, False)) for n, b in env["root"].named_buffers()])
    return f"{how} at {pick}", fn


def _lookup_step(rng):
    what = rng.choice(["get_submodule", "get_parameter", "get_buffer"])
    pick = rng.randrange(1 << 20)

    def fn(lib, env):
        root = env["root"]
        names = [n for n, _ in root.named_modules()] + [n for n, _ in root.named_parameters()]
        names += [n for n, _ in root.named_buffers()] + ["nope", "m0.nope", "m0.training",
                                                         "m0.forward", "", "m0..x"]
        target = names[pick % len(names)]
        return target, _d(lib, getattr(root, what)(target), False)
    return f"{what} {pick}", fn


# --- containers ------------------------------------------------------------------------------

def _container_step(rng):
    kind = rng.choice(["seq", "seq", "mlist", "mdict", "plist", "pdict"])
    op = rng.choice(["repr", "slice", "index", "neg_index", "bad_index", "insert", "extend",
                     "pop", "add", "append", "del", "setitem", "len", "dir", "mul", "iadd",
                     "update", "keys", "plain_value", "bad_key", "odict", "contains"])
    n = rng.randrange(0, 4)
    i = rng.randrange(-5, 6)
    j = rng.randrange(-5, 6)

    def fn(lib, env):
        nn = lib.nn
        leaves = [nn.Linear(3, 2), nn.ReLU(), nn.Dropout(0.1), nn.BatchNorm1d(3),
                  nn.Conv1d(3, 3, 1)][:n]
        if kind == "seq":
            c = nn.Sequential(*leaves)
        elif kind == "mlist":
            c = nn.ModuleList(leaves)
        elif kind == "mdict":
            c = nn.ModuleDict({f"k{k}": m for k, m in enumerate(leaves)})
        elif kind == "plist":
            c = nn.ParameterList([nn.Parameter(lib.ones(k + 1)) for k in range(n)])
        else:
            c = nn.ParameterDict({f"p{k}": nn.Parameter(lib.ones(k + 1)) for k in range(n)})
        keyed = kind in ("mdict", "pdict")
        key = f"{'k' if kind == 'mdict' else 'p'}{i % 4}" if keyed else i
        new = nn.Tanh() if kind in ("seq", "mlist", "mdict") else nn.Parameter(lib.zeros(2))
        r = None
        if op == "slice":
            r = c[i:j] if not keyed else c[key]
        elif op in ("index", "neg_index"):
            r = c[key] if op == "index" or keyed else c[-1]
        elif op == "bad_index":
            r = c["x" if not keyed else 3] if kind != "plist" else c[1.5]
        elif op == "insert":
            r = c.insert(i, new) if kind in ("seq", "mlist") else c.update({"z": new})
        elif op == "extend":
            r = c.extend([new, new]) if not keyed else c.update([("z", new)])
        elif op == "pop":
            r = c.pop(key)
        elif op == "add":
            r = c + c
        elif op == "append":
            r = c.append(new) if not keyed else c.setdefault("z", new)
        elif op == "del":
            del c[key]
        elif op == "setitem":
            c[key] = new
        elif op == "len":
            r = len(c)
        elif op == "dir":
            r = sorted(a for a in dir(c) if not a.startswith("_") and a.isidentifier()
                       and any(a == s for s in list(c._modules) + list(c._parameters)))
        elif op == "mul":
            r = c * 2
        elif op == "iadd":
            c += c
        elif op == "update":
            r = c.update({"u": new}) if keyed else c.extend([new])
        elif op == "keys":
            r = list(c.keys()) if keyed else [type(m).__name__ for m in c]
        elif op == "plain_value":     # a plain tensor or a non-tensor into a container
            value = lib.ones(2) if i % 2 else "text"
            if kind == "plist":
                c.append(value)
            elif kind == "pdict":
                c["v"] = value
            elif kind == "mdict":
                c["v"] = value
            else:
                c.append(value)
            r = [(k, _d(lib, v, False)) for k, v in c.named_parameters()]
        elif op == "bad_key":
            if kind in ("mdict", "pdict"):
                c[i] = new
            else:
                r = c[lib.tensor(0)] if kind != "plist" else c[lib.tensor(1)]
        elif op == "odict":
            from collections import OrderedDict
            r = nn.Sequential(OrderedDict((f"s{k}", m) for k, m in enumerate(leaves)))
        elif op == "contains":
            r = (key in c) if keyed else (new in c if kind == "mlist" else len(c) > 0)
        rep = repr(c).replace("torch", "ember")
        r_rep = repr(r).replace("torch", "ember") if isinstance(r, (nn.Module,)) else \
            _d(lib, r, False)
        return rep, r_rep, list(c.state_dict())
    return f"container {kind}[{n}] {op} i={i} j={j}", fn


def _dir_step(rng):
    pick = rng.randrange(1 << 20)

    def fn(lib, env):
        m = env["mods"][pick % len(env["mods"])]
        names = set(m._parameters) | set(m._buffers) | set(m._modules)
        listed = dir(m)
        return (sorted(n for n in listed if n in names),
                [n in listed for n in ("forward", "training", "__call__", "w", "lin", "m0")],
                listed == sorted(listed))
    return f"dir at {pick}", fn


def _repr_step(rng):
    pick = rng.randrange(1 << 20)

    def fn(lib, env):
        m = env["mods"][pick % len(env["mods"])]
        return repr(m).replace("torch", "ember"), m.extra_repr(), m._get_name()
    return f"repr at {pick}", fn


# --- the program -----------------------------------------------------------------------------

_STEPS = [(_hook, 9), (_handle_step, 2), (_call_step, 7), (_sd_hook, 2), (_state_dict_step, 2),
          (_load_step, 3), (_register_step, 3), (_named_step, 1), (_state_step, 3),
          (_lookup_step, 1), (_container_step, 3), (_repr_step, 1), (_dir_step, 1)]


def program(seed, steps=10):
    """The tree spec and the list of steps of ``seed``."""
    rng = random.Random(seed)
    spec = _tree_spec(rng)
    makers = [m for m, w in _STEPS for _ in range(w)]
    chosen = [rng.choice(makers)(rng) for _ in range(steps)]
    if not any(label.startswith("call") for label, _ in chosen):
        chosen.append(_call_step(rng))
    return spec, chosen


def _global_kind(lib, value=None):
    """The process-wide flag of which backward hooks (full or regular) the global ones are:
    set by the first registered, kept after its removal; read, or restored to ``value``."""
    if lib is ember:
        from ember.nn.modules import _hooks
        if value is not None:
            _hooks.GLOBAL_FULL[0] = value[0]
        return (_hooks.GLOBAL_FULL[0],)
    mm = lib.nn.modules.module
    if value is not None:
        mm._global_is_full_backward_hook = value[0]
    return (mm._global_is_full_backward_hook,)


def _run(lib, spec, steps, seed):
    env = _env(lib, spec, seed)
    got = []
    kind = _global_kind(lib)
    try:
        for _, fn in steps:
            del env["log"][:]
            res = _outcome(fn, lib, env)
            got.append((res, list(env["log"])))
    finally:
        for h in env["globals"]:
            h.remove()
        _global_kind(lib, kind)
    return got


def run_program(seed, steps=10):
    """One random program; None when both agree, else (label, what, torch's, ember's)."""
    spec, chosen = program(seed, steps)
    theirs = _run(torch, spec, chosen, seed)
    ours = _run(ember, spec, chosen, seed)
    for k, ((label, _), t, e) in enumerate(zip(chosen, theirs, ours)):
        label = f"seed {seed}: {label} #{k}"
        (tres, twarn), tlog = t
        (eres, ewarn), elog = e
        if tres[0] != eres[0]:
            return label, "raised", tres, eres
        if not _eq(tres, eres):
            return label, "result" if tres[0] else "error", tres, eres
        if twarn != ewarn:
            return label, "warnings", twarn, ewarn
        if not _eq(tlog, elog):
            k = next((i for i, (a, b) in enumerate(zip(tlog, elog)) if not _eq(a, b)),
                     min(len(tlog), len(elog)))
            return label, "hook log", tlog[k:k + 1], elog[k:k + 1], len(tlog), len(elog)
        if not tres[0] and label.split(": ")[1].startswith("call"):
            break       # the graph a failed call left is not comparable
    return None


if __name__ == "__main__":
    from tests.parity._fuzz_cli import main
    main(run_program, key=lambda m: " ".join(m[0].split(": ")[1].split()[:2]) + " | " + m[1],
         shown=2, width=900)
