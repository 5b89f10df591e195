"""The random programs of test_parity_random_ops_fuzz_round37.py: one seeded call of a random
sampler (rand/randn/randint/randperm, the *_like factories, normal's four overloads,
bernoulli, multinomial, poisson, the in-place samplers) or a few calls of the Generator /
rng-state API, with random arguments, run in ember and torch side by side.

The two libraries draw from different generators, so values are compared only where they are
determined (p = 0 / 1, std = 0, from == to - 1, a degenerate multinomial, a permutation's
sorted values) and otherwise through properties both must satisfy (the range [low, high),
finiteness, integrality); each library must reproduce its own draw after ``manual_seed``.
Compared besides: dtype, shape, strides, requires_grad, node name, errors (type and first line
of the message), warnings, the out= variant and the identity of an in-place result.
"""

import random
import warnings

import numpy as np

import ember

try:
    import torch
except ImportError:     # the test module skips
    torch = None

from tests.parity._fft_fuzz_round36_gen import (SKIP, Diverged, _call, _describe, _kw,
                                                _maybe, _np_values, _tensors)


def _summary(lib, out):
    """``_describe`` with strides of non-empty tensors (each sampler's layout is defined)."""
    desc = _describe(lib, out)
    if isinstance(out, lib.Tensor):
        return desc[:2] + (out.stride() if out.numel() else None,) + desc[3:]
    return desc


_ALL = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
        "float64", "float64", "complex64", "complex128"]
_FLOATS = ["float16", "bfloat16", "float32", "float64", "float64"]


def _dt(lib, name):
    return None if name is None or name is SKIP else getattr(lib, name)


def _shape(rng):
    nd = rng.choice([0, 1, 1, 2, 2, 3])
    sizes = [rng.choice([1, 2, 3, 4, 5]) for _ in range(nd)]
    if nd and rng.random() < 0.1:
        sizes[rng.randrange(nd)] = 0
    return tuple(sizes)


def make_input(lib, raw, dtype, layout, grad=False):
    """A tensor of ``raw``'s values (a NumPy array) as ``dtype`` laid out as ``layout``."""
    dt = getattr(lib, dtype)
    grad = grad and dtype.startswith(("float", "complex"))
    shape = raw.shape
    if layout == "transposed" and len(shape) >= 2:
        # (a copy: NumPy's strides of size-1 dims, which torch.tensor keeps, are arbitrary)
        leaf = lib.tensor(np.swapaxes(raw, 0, -1).copy()).to(dt)
        return leaf.requires_grad_(grad).transpose(0, -1)
    if layout == "stepped" and len(shape) >= 1:
        leaf = lib.tensor(np.repeat(raw, 2, axis=-1)).to(dt).requires_grad_(grad)
        return leaf[..., ::2]
    if layout == "expanded" and len(shape) >= 1:
        leaf = lib.tensor(raw[..., :1].copy()).to(dt).requires_grad_(grad)
        return leaf.expand(shape)
    return lib.tensor(raw).to(dt).requires_grad_(grad)


def _seen(raw, layout):
    """The values an input of ``layout`` holds (an expanded one repeats its first column)."""
    if layout == "expanded" and raw.ndim:
        return np.broadcast_to(raw[..., :1], raw.shape)
    return raw


def _layout(rng):
    return rng.choice(["contiguous", "contiguous", "transposed", "stepped", "expanded"])


def _inside(low, high, closed=False):
    """A check: whether every value lies in [low, high) (``closed``: [low, high])."""
    def check(a):
        if a.size == 0:
            return True
        a = a.astype(np.float64)
        return bool(((a >= low) & ((a <= high) if closed else (a < high))).all())
    return check


def _finite(a):
    return bool(np.isfinite(a.astype(np.complex128)).all())


def _exact(a):
    return a.tolist()


# --- factories -------------------------------------------------------------------------------

def _size_args(rng, shape):
    """How a size is passed: varargs, a tuple, a list, size=, or a bad one."""
    form = rng.choice(["varargs", "tuple", "tuple", "list", "kw", "bad"])
    if form == "bad":
        bad = rng.choice([(2, -1), (2.0, 3), ("a",), (2, None), (-1,)])
        return f"{bad}", bad, {}
    if form == "varargs":
        return ", ".join(map(str, shape)), tuple(shape), {}
    if form == "kw":
        return f"size={shape}", (), {"size": tuple(shape)}
    value = tuple(shape) if form == "tuple" else list(shape)
    return repr(value), (value,), {}


def _common_kw(rng, dtypes):
    dtype = _maybe(rng, rng.choice(dtypes), 0.6)
    rg = _maybe(rng, rng.random() < 0.4, 0.3)
    dev = _maybe(rng, "cpu", 0.15)
    return dtype, rg, dev


def _out_kw(rng, shape, dtype):
    """out=: None, or a tensor of the right / another dtype, the right / another shape."""
    if rng.random() > 0.2:
        return None
    odt = dtype if dtype not in (None, SKIP) and rng.random() < 0.6 else \
        rng.choice(["float32", "float64", "int64", "float16"])
    oshape = tuple(shape) if rng.random() < 0.6 else rng.choice([(0,), (7,), (2, 2)])
    return odt, oshape


def _factory(rng, npr):
    name = rng.choice(["rand", "randn", "randint", "randint", "randperm"])
    shape = _shape(rng)
    gen = rng.random() < 0.2
    if name == "randperm":
        n = rng.choice([0, 1, 2, 5, 9, 130, 300, -1, 2.0])
        dtype, rg, dev = _common_kw(rng, ["int64", "int32", "int8", "uint8", "int16",
                                          "float32", "float64", "float16", "bfloat16",
                                          "bool"])
        args, kw, text = (n,), {}, f"{n}"
        shape = (n,) if isinstance(n, int) and n >= 0 else ()
    else:
        text, args, kw = _size_args(rng, shape)
        if name == "randint" and len(args) > 1 and rng.random() < 0.8:   # no varargs form
            text, args, kw = repr(tuple(shape)), (tuple(shape),), {}
        floats = ["float32", "float64", "float16", "bfloat16", "complex64", "int64", "bool"]
        dtype, rg, dev = _common_kw(rng, floats if name != "randint" else _ALL)
        if name == "randint":
            high = rng.choice([1, 2, 3, 10, 100, 200, 300, 2**31, 0, -3])
            low = _maybe(rng, rng.choice([0, -5, 1, 2, 3, high - 1, high, -200, -129]), 0.6)
            bounds = (high,) if low is SKIP else (low, high)
            args = bounds + (args if args else ())
            if not args[len(bounds):] and not kw:
                kw = {"size": tuple(shape)}
            text = f"{', '.join(map(str, bounds))}, {text}"
    out = _out_kw(rng, shape, dtype)

    def call(lib):
        g = lib.Generator().manual_seed(7) if gen else SKIP
        extra = _kw(dtype=_dt(lib, dtype) if dtype is not SKIP else SKIP, requires_grad=rg,
                    device=dev, generator=g)
        if out is not None:
            extra["out"] = lib.full(out[1], 3, dtype=getattr(lib, out[0]))
        res = getattr(lib, name)(*args, **kw, **extra)
        return (res, res is extra["out"]) if out is not None else res

    if name == "rand":
        check = _inside(0.0, 1.0, closed=True)
    elif name == "randn":
        check = _finite
    elif name == "randperm":
        def check(a):
            return sorted(a.astype(np.float64).tolist())
    else:
        lo = 0 if low is SKIP else low
        check = _inside(lo, high) if high - lo != 1 else _exact
    label = f"{name}({text}, dtype={dtype}, requires_grad={rg}, device={dev}, " \
        f"generator={gen}, out={out})"
    return name, label, call, check


def _like(rng, npr):
    name = rng.choice(["rand_like", "randn_like", "randint_like", "randint_like"])
    shape = _shape(rng)
    src = rng.choice(_ALL)
    layout = _layout(rng)
    raw = npr.standard_normal(shape)
    grad = rng.random() < 0.3
    dtype, rg, _ = _common_kw(rng, _ALL)
    mf = _maybe(rng, rng.choice(["preserve_format", "contiguous_format"]), 0.2)
    bounds = ()
    if name == "randint_like":
        high = rng.choice([1, 2, 5, 100, 300, 0])
        low = _maybe(rng, rng.choice([0, -3, 1, high - 1, high]), 0.5)
        bounds = (high,) if low is SKIP else (low, high)

    def call(lib):
        x = make_input(lib, raw, src, layout, grad)
        mfv = SKIP if mf is SKIP else getattr(lib, mf)
        kw = _kw(dtype=_dt(lib, dtype) if dtype is not SKIP else SKIP, requires_grad=rg,
                 memory_format=mfv)
        return getattr(lib, name)(x, *bounds, **kw)

    if name == "rand_like":
        check = _inside(0.0, 1.0, closed=True)
    elif name == "randn_like":
        check = _finite
    else:
        lo = 0 if len(bounds) == 1 else bounds[0]
        check = _exact if bounds[-1] - lo == 1 else _inside(lo, bounds[-1])
    label = f"{name}({src}{list(shape)} {layout} grad={grad}, {bounds}, dtype={dtype}, " \
        f"requires_grad={rg}, memory_format={mf})"
    return name, label, call, check


# --- samplers of tensors ---------------------------------------------------------------------

def _normal(rng, npr):
    form = rng.choice(["tt", "tf", "ft", "ff"])
    shape = _shape(rng)
    mdt, sdt = rng.choice(_FLOATS + ["int64", "complex64"]), rng.choice(_FLOATS + ["int64"])
    mraw = npr.standard_normal(shape)
    sraw = np.abs(npr.standard_normal(shape if rng.random() < 0.8 else shape[1:]))
    zero = rng.random() < 0.3
    if zero:
        sraw = sraw * 0
    if rng.random() < 0.1:
        sraw = -sraw - 1
    mean_f = rng.choice([0.0, 1.5, -2.0, 3])
    std_f = rng.choice([1.0, 0.0, 0.5, -1.0, 2]) if not zero else 0.0
    layout = _layout(rng)
    grad = rng.random() < 0.4
    size = shape if form == "ff" else SKIP
    if form != "ff" and rng.random() < 0.1:
        size = shape
    out = _out_kw(rng, shape, mdt if form[0] == "t" else sdt)
    gen = rng.random() < 0.2
    dtype = _maybe(rng, rng.choice(_FLOATS + ["int64"]), 0.2) if form == "ff" else SKIP

    def call(lib):
        mean = make_input(lib, mraw, mdt, layout, grad) if form[0] == "t" else mean_f
        std = make_input(lib, sraw, sdt, "contiguous", grad) if form[1] == "t" else std_f
        kw = _kw(generator=lib.Generator().manual_seed(3) if gen else SKIP,
                 dtype=_dt(lib, dtype) if dtype is not SKIP else SKIP)
        if out is not None:
            kw["out"] = lib.full(out[1], 3, dtype=getattr(lib, out[0]))
        args = (mean, std) if size is SKIP else (mean, std, size)
        res = lib.normal(*args, **kw)
        return (res, res is kw["out"]) if out is not None else res

    def check(a):
        if zero or (form[1] == "f" and std_f == 0):
            return a.astype(np.complex128).round(3).tolist()
        return _finite(a)
    label = f"normal[{form}](mean={mdt if form[0] == 't' else mean_f}{list(shape)} {layout}," \
        f" std={sdt if form[1] == 't' else std_f}{list(sraw.shape)}, size={size}, " \
        f"grad={grad}, dtype={dtype}, out={out}, generator={gen})"
    return "normal", label, call, check


def _bernoulli(rng, npr):
    shape = _shape(rng)
    dtype = rng.choice(_ALL)
    layout = _layout(rng)
    det = rng.random() < 0.4
    raw = (npr.random(shape) < 0.5).astype(np.float64) if det else npr.random(shape)
    if rng.random() < 0.08:
        raw = raw + rng.choice([1.0, -1.5, np.nan])
    p = _maybe(rng, rng.choice([0.0, 1.0, 0.5, 1.5, -0.1, 1, 0]), 0.3)
    grad = rng.random() < 0.3
    out = _out_kw(rng, shape, dtype)

    def call(lib):
        x = make_input(lib, raw, dtype, layout, grad)
        kw = {}
        if out is not None:
            kw["out"] = lib.full(out[1], 3, dtype=getattr(lib, out[0]))
        res = lib.bernoulli(x, *(() if p is SKIP else (p,)), **kw)
        return (res, res is kw["out"]) if out is not None else res

    def check(a):
        if a.shape != raw.shape:
            return a.shape
        if p is not SKIP and p in (0, 1):
            return a.astype(np.float64).tolist()
        if p is SKIP and det:
            return (a.astype(np.float64) == _seen(raw, layout)).tolist()
        return _inside(0, 1, closed=True)(a)
    label = f"bernoulli({dtype}{list(shape)} {layout} det={det} grad={grad}, p={p}, out={out})"
    return "bernoulli", label, call, check


def _multinomial(rng, npr):
    nd = rng.choice([0, 1, 1, 2, 2, 3])
    cats = rng.choice([0, 1, 2, 3, 5])
    shape = tuple([rng.choice([0, 1, 2, 3])] * (nd == 2) + [cats] * (nd >= 1) +
                  [2] * (nd == 3))
    dtype = rng.choice(["float32", "float64", "float64", "float16", "bfloat16", "int64",
                        "bool"])
    kind = rng.choice(["random", "onehot", "sparse", "zero", "negative", "inf", "nan"])
    raw = np.asarray(npr.random(shape) + 0.1)
    if kind in ("onehot", "sparse") and raw.ndim and raw.size:
        mask = npr.random(shape) < (0.3 if kind == "sparse" else 0.0)
        mask[..., 0] = True
        raw = raw * mask
    elif kind not in ("random", "onehot", "sparse") and raw.size:
        idx = tuple(rng.randrange(s) for s in shape)
        raw[idx] = {"zero": 0.0, "negative": -1.0, "inf": np.inf, "nan": np.nan}[kind]
        if kind == "zero":
            raw[...] = 0.0
    n = rng.choice([1, 1, 2, 3, 5, 0, -1])
    replacement = _maybe(rng, rng.random() < 0.5, 0.7)
    layout = _layout(rng)
    out = rng.random() < 0.15

    def call(lib):
        x = make_input(lib, raw, dtype, layout)
        kw = _kw(replacement=replacement)
        if out:
            kw["out"] = lib.full((2,), 3, dtype=lib.int64)
        res = lib.multinomial(x, n, **kw)
        return (res, res is kw["out"]) if out else res

    def check(a):
        support = _seen(raw, layout)
        support = support.reshape(-1, cats if cats else 1) > 0 if raw.ndim else raw > 0
        rows = a.reshape(-1, a.shape[-1]) if a.ndim else a.reshape(1, -1)
        if not raw.ndim or support.shape[0] != rows.shape[0]:
            return a.shape
        # (without replacement, categories of weight 0 come once the others are drawn)
        ok = all(bool(support[i][rows[i]].all()) for i in range(rows.shape[0])
                 if replacement is True or support[i].sum() >= a.shape[-1])
        sets = [sorted(r.tolist()) if support[i].sum() == a.shape[-1] or support[i].sum() == 1
                and (replacement is True or a.shape[-1] == 1) else None
                for i, r in enumerate(rows)]
        if replacement is True:
            sets = [sorted(set(s)) if s is not None and support[i].sum() == 1 else None
                    for i, s in enumerate(sets)]
        return ok, sets
    label = f"multinomial({dtype}{list(shape)} {kind} {layout}, {n}, " \
        f"replacement={replacement}, out={out})"
    return "multinomial", label, call, check


def _poisson(rng, npr):
    shape = _shape(rng)
    dtype = rng.choice(_FLOATS + ["int64", "complex64"])
    raw = np.abs(npr.standard_normal(shape)) * rng.choice([0, 1, 5])
    if rng.random() < 0.15 and raw.size:
        raw.flat[0] = rng.choice([-1.0, np.inf, np.nan])
    layout = _layout(rng)
    grad = rng.random() < 0.3
    gen = rng.random() < 0.2

    def call(lib):
        x = make_input(lib, raw, dtype, layout, grad)
        return lib.poisson(x, *((lib.Generator().manual_seed(2),) if gen else ()))

    def check(a):
        a = a.astype(np.float64)
        zero = _seen(raw, layout) == 0
        return bool((a[zero] == 0).all() and (a == np.round(a)).all())
    label = f"poisson({dtype}{list(shape)} {layout} grad={grad}, generator={gen})"
    return "poisson", label, call, check


# --- in-place samplers -----------------------------------------------------------------------

def _bounds(rng, dtype):
    pool = [0, 1, 2, 5, -3, 100, 127, 128, 200, 255, 256, -129, 2**15, 2**31, 2**40, 2**63 - 1,
            2.5, True]
    if rng.random() < 0.3:
        return ()
    frm = rng.choice(pool)
    if rng.random() < 0.3:
        return (frm,)
    to = rng.choice(pool + [None, frm + 1, frm + 1])
    return frm, to


def _inplace(rng, npr):
    name = rng.choice(["random_", "random_", "uniform_", "normal_", "exponential_",
                       "geometric_", "cauchy_", "log_normal_", "bernoulli_"])
    shape = _shape(rng)
    dtype = rng.choice(_ALL)
    layout = rng.choice(["contiguous", "contiguous", "transposed", "stepped"])
    raw = npr.standard_normal(shape)
    if name == "random_":
        args = _bounds(rng, dtype)
    elif name == "uniform_":
        args = rng.choice([(), (0, 1), (-2, 3), (2, 2), (3, 1), (0, float("inf")), (-1,)])
    elif name in ("normal_", "log_normal_"):
        args = rng.choice([(), (0.0, 1.0), (1.0, 0.0), (0, -1.0), (2,), (0.5, 2)])
    elif name == "exponential_":
        args = rng.choice([(), (1.0,), (0.0,), (-1.0,), (2,), (float("inf"),)])
    elif name == "geometric_":
        args = rng.choice([(0.5,), (1.0,), (0.0,), (1.5,), (-0.1,), ()])
    elif name == "cauchy_":
        args = rng.choice([(), (0.0, 1.0), (1.0, 0.0), (0.0, -1.0)])
    else:
        args = rng.choice([(), (0.0,), (1.0,), (0.5,), (1.5,), (-0.5,)])
    gen = rng.random() < 0.2

    def call(lib):
        x = make_input(lib, raw, dtype, layout)
        kw = _kw(generator=lib.Generator().manual_seed(5) if gen else SKIP)
        res = getattr(x, name)(*args, **kw)
        return res, res is x

    def check(a):
        v = a.astype(np.complex128) if a.dtype.kind == "c" else a.astype(np.float64)
        if name == "random_" and len(args) == 2 and args[1] is not None and \
                args[1] - args[0] == 1:
            return v.tolist()
        if name == "random_" and len(args) >= 1:
            lo, hi = (0, args[0]) if len(args) == 1 else (args[0], args[1])
            return _inside(lo, hi)(v) if hi is not None else bool((v >= lo).all())
        if name == "uniform_" and len(args) == 2 and args[0] == args[1]:
            return v.tolist()
        if name in ("normal_", "cauchy_") and len(args) == 2 and args[1] == 0.0:
            return np.round(v, 3).tolist()
        if name == "bernoulli_" and args and args[0] in (0, 1):
            return v.tolist()
        if name == "geometric_" and args and args[0] == 1.0:
            return v.tolist()
        if name == "exponential_":
            return bool((v.real >= 0).all())
        return bool((~np.isnan(v)).all())
    label = f"{name}({dtype}{list(shape)} {layout}, {args}, generator={gen})"
    return name, label, call, check


# --- the generator API -----------------------------------------------------------------------

def _generator_api(rng, npr):
    steps = [rng.choice(["manual_seed", "initial_seed", "seed_type", "get_state",
                         "set_state_bad", "set_state_good", "clone_state", "device",
                         "global_state", "fork_rng", "manual_seed_bad", "global_set_bad"])
             for _ in range(rng.randrange(1, 4))]
    seed = rng.choice([0, 1, 42, 2**32, 2**63, -1, 2**64 - 1, 2**64, -(2**63) - 1])
    bad = rng.choice(["float", "short", "long", "int64", "list"])
    bad_seed = rng.choice(["1", 1.5, None, 2**64 + 1])

    def bad_state(lib, like):
        if bad == "float":
            return like.float()
        if bad == "short":
            return like[:10]
        if bad == "long":
            return lib.cat([like, like[:3]])
        if bad == "int64":
            return like.long()
        return like.tolist()

    def call(lib):
        g = lib.Generator()
        results = []
        for step in steps:
            if step == "manual_seed":
                r = g.manual_seed(seed)
                results.append((type(r).__name__, r is g, g.initial_seed()))
            elif step == "manual_seed_bad":
                results.append(_call(g.manual_seed, bad_seed)[0])
            elif step == "initial_seed":
                results.append(g.initial_seed() if steps[0] == "manual_seed" else "x")
            elif step == "seed_type":
                results.append(type(g.seed()).__name__)
            elif step == "get_state":
                s = g.get_state()
                results.append((_summary(lib, s), s is g.get_state()))
            elif step == "set_state_bad":
                results.append(_call(g.set_state, bad_state(lib, g.get_state()))[0])
            elif step == "set_state_good":
                s = g.get_state()
                a = lib.rand(4, generator=g)
                r = g.set_state(s)
                b = lib.rand(4, generator=g)
                results.append((r is g, bool((a == b).all())))
            elif step == "clone_state":
                c = g.clone_state()
                a, b = lib.rand(3, generator=g), lib.rand(3, generator=c)
                results.append((type(c).__name__, c is g, bool((a == b).all())))
            elif step == "device":
                results.append(str(g.device))
            elif step == "global_state":
                s = lib.get_rng_state()
                a = lib.randn(3)
                lib.set_rng_state(s)
                results.append((_summary(lib, s), bool((lib.randn(3) == a).all())))
            elif step == "global_set_bad":
                results.append(_call(lib.set_rng_state, bad_state(lib, lib.get_rng_state()))
                               [0])
            else:
                before = lib.random.get_rng_state()
                with lib.random.fork_rng(devices=[]):
                    lib.rand(5)
                results.append(bool((lib.random.get_rng_state() == before).all()))
        return tuple(results)
    return "Generator", f"Generator({steps} seed={seed} bad={bad} bad_seed={bad_seed})", call, None


_KINDS = [_factory, _factory, _like, _normal, _normal, _bernoulli, _multinomial, _multinomial,
          _poisson, _inplace, _inplace, _inplace, _generator_api]


# --- comparing -------------------------------------------------------------------------------

def _values(lib, res):
    return [_np_values(lib, t) for t in _tensors(lib, res)]


def _run(lib, fn, seed):
    lib.manual_seed(seed)
    return _call(fn, lib)


def run_program(seed):
    """One random program; None when both agree, else (label, what, torch's, ember's)."""
    rng = random.Random(seed)
    npr = np.random.default_rng(seed)
    name, label, fn, check = rng.choice(_KINDS)(rng, npr)
    label = f"seed {seed}: {label}"
    states = torch.get_rng_state(), ember.get_rng_state()
    try:
        res = {}
        with warnings.catch_warnings():
            for lib in (torch, ember):
                res[lib] = _run(lib, fn, seed)
        (tok, tval), twarn = res[torch]
        (eok, evl), ewarn = res[ember]
        if tok != eok:
            raise Diverged((label, "raised", tval if not tok else "ok", evl if not eok else "ok"))
        if not tok:
            if tval != evl:
                raise Diverged((label, "error", tval, evl))
            return None
        if twarn != ewarn:
            raise Diverged((label, "warnings", twarn, ewarn))
        td, ed = _summary(torch, tval), _summary(ember, evl)
        if check is None:
            td, ed = tval, evl
        if td != ed:
            raise Diverged((label, "result", td, ed))
        if check is None:
            return None
        tv, ev = _values(torch, tval)[:1], _values(ember, evl)[:1]
        if tv and [check(a) for a in tv] != [check(a) for a in ev]:
            raise Diverged((label, "values", [check(a) for a in tv], [check(a) for a in ev]))
        if ev:      # each library reproduces its own draw after manual_seed
            (ok2, again), _ = _run(ember, fn, seed)
            if not ok2 or not np.array_equal(_values(ember, again)[0], ev[0], equal_nan=True):
                raise Diverged((label, "reproducible", True, False))
    except Diverged as exc:
        return exc.args[0]
    finally:
        torch.set_rng_state(states[0])
        ember.set_rng_state(states[1])
    return None


if __name__ == "__main__":
    from tests.parity._fuzz_cli import main
    main(run_program, shown=3)
