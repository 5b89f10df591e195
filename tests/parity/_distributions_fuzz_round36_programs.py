"""The programs of round 36's distributions fuzzer, run in ember and torch side by side.

``program(seed)``: a random distribution (see the families module), built with
validate_args True / False / None; then batch/event shape, flags, repr, support, the
parameters' constraints, mean / mode / variance / stddev / entropy / perplexity, log_prob /
cdf / support.check on values from torch's sampler (some put out of the support; as the
distribution's dtype, the other float dtype, int64, a Python number or a shape that does not
broadcast), icdf, expand(), enumerate_support, sample / rsample shapes and dtypes for sample
shapes of every kind, float64 gradients of log_prob w.r.t. the parameters and the gradients'
shapes of rsample. ``kl_program(seed)``: kl_divergence of a random pair (values or errors; a
missing pair must be NotImplementedError in both). ``transform_program(seed)``: a random
(composed, inverted, cached, independent, cat/stack) transform's attributes, shapes, forward,
inverse and log |det J|. Each returns (label, mismatches); ``torch_bug`` names the
mismatches where PyTorch 2.13 is wrong and ember is kept.
"""

import random
import re
import warnings

import numpy as np
import torch

import ember
from tests.parity import _distributions_fuzz_round36_families as gen
from tests.parity._distributions_fuzz_round36_families import _GRAD, _LEAVES


def _msg(text):
    text = str(text).replace("ember.", "torch.").replace("ember", "torch").split("\n")[0]
    text = " ".join(text.split())      # (some of torch's messages carry a line's indentation)
    # (float32 values in reprs: one ulp of log / log1p apart between NumPy and PyTorch)
    text = re.sub(r"\d+\.\d+(e[-+]?\d+)?", lambda m: f"{float(m.group(0)):.5g}", text)
    return text.split(" (Triggered internally")[0]


def _call(fn, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = True, fn(*args)
        except Exception as exc:  # noqa: BLE001 - the error itself is compared
            out = False, (type(exc).__name__, _msg(exc))
    return out, sorted({(w.category.__name__, _msg(w.message)[:60]) for w in caught})



GARBAGE = [False]
_TOL = {"float32": 2e-4, "float64": 1e-6}


def _np(lib, x):
    return x.detach().numpy().copy()


def _desc(lib, out, dtype):
    if isinstance(out, lib.Tensor):
        return ("T", tuple(out.shape), str(out.dtype).split(".")[1], out.requires_grad)
    if isinstance(out, (tuple, list)):
        return (type(out).__name__, tuple(_desc(lib, o, dtype) for o in out))
    if isinstance(out, lib.Size):
        return ("Size", tuple(out))
    if isinstance(out, float):
        return ("float", out if out == out else "nan")
    text = re.sub(r"\d+\.\d+(e[-+]?\d+)?", lambda m: f"{float(m.group(0)):.5g}",
                  str(out).replace("ember", "torch"))
    return ("py", type(out).__name__, text)


def _vals(lib, out):
    if isinstance(out, lib.Tensor):
        return [_np(lib, out)]
    if isinstance(out, (tuple, list)):
        return [v for o in out for v in _vals(lib, o)]
    return []


def compare(label, e, t, dtype, problems, values=True):
    values = values and not GARBAGE[0]
    (eok, ev), ew = e
    (tok, tv), tw = t
    if eok != tok:
        problems.append((label, "raise", ev if not eok else "ok", tv if not tok else "ok"))
        return False
    if not eok:
        if ("[py]" in label or "[badshape]" in label) and ev[0] == tv[0]:
            return False    # (the message names internals)
        if ev != tv:
            problems.append((label, "error", ev, tv))
        return False
    de, dt = _desc(ember, ev, dtype), _desc(torch, tv, dtype)
    if de != dt:
        problems.append((label, "desc", de, dt))
        return False
    if values:
        for a, b in zip(_vals(ember, ev), _vals(torch, tv)):
            tol = _TOL["float32" if a.dtype == np.float32 else "float64"]
            if a.dtype.kind == "f" and not np.allclose(a, b, rtol=tol, atol=tol, equal_nan=True):
                problems.append((label, "value", a.ravel()[:6], b.ravel()[:6]))
                return False
            if a.dtype.kind != "f" and not np.array_equal(a, b):
                problems.append((label, "value", a.ravel()[:6], b.ravel()[:6]))
                return False
    if ew != tw and "sample" not in label:     # (a sample's warnings depend on the RNG)
        problems.append((label, "warn", ew, tw))
    return True


def program(seed):
    rng = random.Random(seed)
    npr = np.random.default_rng(seed)
    label, ctor, dtype = gen.make_family(rng, npr)
    validate = rng.choice([True, False, None])
    problems = []
    libs = (ember, torch)
    GARBAGE[0] = False
    r = [_call(ctor, lib, validate) for lib in libs]
    GARBAGE[0] = gen.BAD[0] and validate is False    # (values of out-of-domain parameters)
    libs = (ember, torch)
    if not compare("ctor", *r, dtype, problems) or not r[0][0][0]:
        return label, problems
    de, dt = r[0][0][1], r[1][0][1]
    for attr in ("batch_shape", "event_shape", "has_rsample", "has_enumerate_support"):
        compare(attr, _call(lambda d: getattr(d, attr), de), _call(lambda d: getattr(d, attr), dt),
                dtype, problems)
    compare("repr", _call(repr, de), _call(repr, dt), dtype, problems)
    compare("arg_constraints", _call(lambda d: str(d.arg_constraints), de),
            _call(lambda d: str(d.arg_constraints), dt), dtype, problems)
    compare("support", _call(lambda d: str(d.support), de), _call(lambda d: str(d.support), dt),
            dtype, problems)
    for attr in ("mean", "mode", "variance", "stddev"):
        compare(attr, _call(lambda d: getattr(d, attr), de), _call(lambda d: getattr(d, attr), dt),
                dtype, problems)
    compare("entropy", _call(lambda d: d.entropy(), de), _call(lambda d: d.entropy(), dt),
            dtype, problems)
    # values from torch's sampler
    sshape = rng.choice([(), (2,), (1, 2)])
    torch.manual_seed(seed)
    try:
        with torch.no_grad():
            val = dt.sample(sshape).numpy().astype(np.float64)
    except Exception:  # noqa: BLE001
        val = None
    vmode = "same"
    if val is not None:
        if val.size and rng.random() < 0.35:
            val.reshape(-1)[rng.randrange(val.size)] = rng.choice([-1.0, 0.5, np.nan, 1e3, 2.5])
        if rng.random() < 0.15 and val.ndim and len(val):
            val = val[(0,) * 1]
        vmode = rng.choice(["same"] * 6 + ["f32", "f64", "int", "badshape", "py"])
        if vmode == "badshape":
            val = np.concatenate([val.reshape(-1), [0.0, 1.0, 0.0, 1.0, 0.0]])[:5]
        if vmode == "py":
            val = float(val.reshape(-1)[0]) if val.size else 0.0
        if vmode != "py":     # (of a Python number both fail, in words of their internals)
            compare("support.check", _call(lambda d: d.support.check(lib_t(d, val, vmode)), de),
                    _call(lambda d: d.support.check(lib_t(d, val, vmode)), dt), dtype, problems)
        for meth in ("log_prob", "cdf"):
            compare(f"{meth}[{vmode}]", _call(lambda d: getattr(d, meth)(lib_t(d, val, vmode)), de),
                    _call(lambda d: getattr(d, meth)(lib_t(d, val, vmode)), dt), dtype, problems)
        compare("perplexity", _call(lambda d: d.perplexity(), de),
                _call(lambda d: d.perplexity(), dt), dtype, problems)
        u = np.random.default_rng(seed).uniform(0.05, 0.95, np.shape(val))
        if u.size and rng.random() < 0.3:
            u.reshape(-1)[0] = rng.choice([1.5, -0.2, 0.0, 1.0])
        compare("icdf", _call(lambda d: d.icdf(lib_t(d, u)), de),
                _call(lambda d: d.icdf(lib_t(d, u)), dt), dtype, problems)
    # expand
    new = tuple(rng.choice([2, 3])for _ in range(rng.randrange(0, 2))) + tuple(
        rng.choice([b, b, 1 if b == 1 else 4]) for b in tuple(dt.batch_shape))
    ex = [_call(lambda d: d.expand(new), d) for d in (de, dt)]
    # (the repr of the new one depends on which lazy parameters the steps before computed)
    ex = [((ok, type(v).__name__) if ok else (ok, v), w) for (ok, v), w in ex]
    if compare(f"expand{new}", *ex, dtype, problems, values=False) and ex[0][0][0]:
        exd = (de.expand(new), dt.expand(new))
        for attr in ("batch_shape", "mean", "variance"):
            compare(f"expand.{attr}", _call(lambda d: getattr(d, attr), exd[0]),
                    _call(lambda d: getattr(d, attr), exd[1]), dtype, problems)
    if dt.has_enumerate_support:
        e = rng.random() < 0.5
        compare(f"enumerate_support({e})", _call(lambda d: d.enumerate_support(e), de),
                _call(lambda d: d.enumerate_support(e), dt), dtype, problems)
    shp = rng.choice([(), (3,), (2, 1), 3, [2], "Size", 0, (0,)])
    def sh(d):
        if shp == "Size":
            return (ember if type(d).__module__.startswith("ember") else torch).Size([2])
        return shp
    compare(f"sample{shp}", _call(lambda d: d.sample(sh(d)), de),
            _call(lambda d: d.sample(sh(d)), dt), dtype, problems, values=False)
    compare(f"rsample{shp}", _call(lambda d: d.rsample(sh(d)), de),
            _call(lambda d: d.rsample(sh(d)), dt), dtype, problems, values=False)
    # gradients
    if dtype == "float64" and val is not None and vmode not in ("py", "int"):
        res = []
        for lib in libs:
            _GRAD[0] = True
            del _LEAVES[:]
            try:
                d = ctor(lib, False)
                lp = d.log_prob(lib_t(d, val))
                w = lib.tensor(np.linspace(0.5, 1.5, lp.numel()).reshape(tuple(lp.shape)))
                gs = lib.autograd.grad((lp * w).sum(), list(_LEAVES), allow_unused=True)
                res.append(((True, [g if g is not None else "None" for g in gs]), []))
            except Exception as exc:  # noqa: BLE001
                res.append(((False, (type(exc).__name__, _msg(exc))), []))
            finally:
                _GRAD[0] = False
                del _LEAVES[:]
        compare(f"grad log_prob[{vmode}]", *res, dtype, problems)
        res = []
        for lib in libs:
            _GRAD[0] = True
            del _LEAVES[:]
            try:
                d = ctor(lib, False)
                if not d.has_rsample:
                    res.append(((True, "nors"), []))
                    continue
                s = d.rsample((2,))
                gs = lib.autograd.grad(s.sum(), list(_LEAVES), allow_unused=True)
                res.append(((True, [("shape", tuple(g.shape)) if g is not None else "None"
                                    for g in gs]), []))
            except Exception as exc:  # noqa: BLE001
                res.append(((False, (type(exc).__name__, _msg(exc))), []))
            finally:
                _GRAD[0] = False
                del _LEAVES[:]
        compare("grad rsample", *res, dtype, problems, values=False)
    return label, problems


def lib_t(d, val, vmode="same"):
    lib = ember if type(d).__module__.startswith("ember") else torch
    dt = lib.float64 if "float64" in str(_dtype_of(d)) else lib.float32
    if vmode == "py":
        return val
    if vmode == "f32":
        dt = lib.float32
    elif vmode == "f64":
        dt = lib.float64
    elif vmode == "int":
        return lib.tensor(np.nan_to_num(val, nan=0.0).astype(np.int64))
    return lib.tensor(val, dtype=dt)


def _dtype_of(d):
    for v in vars(d).values():
        if hasattr(v, "dtype") and hasattr(v, "shape"):
            return v.dtype
    base = getattr(d, "base_dist", None) or getattr(d, "_component_distribution", None)
    return _dtype_of(base) if base is not None else "float32"


def kl_program(seed):
    rng = random.Random(seed)
    npr = np.random.default_rng(seed)
    problems = []
    lp, cp, dtp = gen.make_family(rng, npr, good=True)
    if rng.random() < 0.5:
        lq, cq, dtq = lp, cp, dtp
        r2 = random.Random(seed + 10 ** 6)
        lq, cq, dtq = gen.make_family(r2, np.random.default_rng(seed + 10 ** 6), good=True,
                                      fam=lp.split("(")[0], dtype=dtp)
    else:
        lq, cq, dtq = gen.make_family(rng, npr, good=True, dtype=dtp)
    label = f"KL[{lp[:60]} || {lq[:60]}]"
    res = []
    for lib in (ember, torch):
        def f(lib=lib):
            return lib.distributions.kl_divergence(cp(lib, False), cq(lib, False))
        res.append(_call(f))
    (eok, ev), _ = res[0]
    (tok, tv), _ = res[1]
    if not eok and not tok and ev[0] == tv[0] == "NotImplementedError":
        return label, problems
    compare("kl", *res, dtp, problems)
    return label, problems




def make_transform(rng, npr, depth=0):
    """(label, build(lib, dtype) -> transform, input kind, min event dims)"""
    kinds = ["exp", "affine", "sigmoid", "tanh", "softplus", "abs", "power", "softmax",
             "stick", "lowerchol", "posdef", "corrchol", "reshape", "independent", "compose",
             "cat", "stack", "inv"]
    k = rng.choice(kinds if depth < 2 else kinds[:7])
    cache = rng.choice([0, 0, 1])
    if k in ("exp", "sigmoid", "tanh", "softplus", "abs"):
        name = {"exp": "ExpTransform", "sigmoid": "SigmoidTransform", "tanh": "TanhTransform",
                "softplus": "SoftplusTransform", "abs": "AbsTransform"}[k]
        return f"{name}(cache={cache})", lambda lib, dt: getattr(lib.distributions, name)(
            cache_size=cache), 0
    if k == "affine":
        ev = rng.choice([0, 0, 1])
        lt = rng.random() < 0.5
        loc = npr.standard_normal((rng.choice([1, 3]),)) if lt else float(npr.standard_normal())
        sc = rng.choice([2.0, -1.5, 0.5, 0.0, "t"])
        scv = npr.standard_normal((3,)) if sc == "t" else sc

        def b(lib, dt):
            def f(v):
                return lib.tensor(v, dtype=dt) if isinstance(v, np.ndarray) else v
            return lib.distributions.AffineTransform(f(loc), f(scv), event_dim=ev,
                                                     cache_size=cache)
        return f"Affine({loc}, {scv}, ev={ev})", b, ev
    if k == "power":
        e = rng.choice([2.0, 0.5, -1.0, 3, "t"])
        ev = npr.uniform(0.5, 2, (3,)) if e == "t" else e

        def b(lib, dt):
            return lib.distributions.PowerTransform(
                lib.tensor(ev, dtype=dt) if isinstance(ev, np.ndarray) else ev, cache_size=cache)
        return f"Power({ev})", b, 0
    if k in ("softmax", "stick", "lowerchol", "posdef", "corrchol"):
        name = {"softmax": "SoftmaxTransform", "stick": "StickBreakingTransform",
                "lowerchol": "LowerCholeskyTransform", "posdef": "PositiveDefiniteTransform",
                "corrchol": "CorrCholeskyTransform"}[k]
        return f"{name}(cache={cache})", lambda lib, dt: getattr(lib.distributions, name)(
            cache_size=cache), 2 if k in ("lowerchol", "posdef") else 1
    if k == "reshape":
        ins, outs = rng.choice([((6,), (2, 3)), ((2, 3), (6,)), ((3,), (3, 1)), ((4,), (3,))])
        return f"Reshape({ins}, {outs})", lambda lib, dt: lib.distributions.ReshapeTransform(
            lib.Size(ins), lib.Size(outs)), len(ins)
    if k == "independent":
        lb, bb, ev = make_transform(rng, npr, depth + 1)
        r = rng.choice([0, 1, 2])
        return f"Independent({lb}, {r})", lambda lib, dt: lib.distributions.IndependentTransform(
            bb(lib, dt), r), ev + r
    if k == "compose":
        parts = [make_transform(rng, npr, depth + 1) for _ in range(rng.choice([0, 1, 2, 3]))]
        return f"Compose({[p[0] for p in parts]})", lambda lib, dt: \
            lib.distributions.ComposeTransform([p[1](lib, dt) for p in parts],
                                               cache_size=cache), \
            max([p[2] for p in parts] + [0])
    if k in ("cat", "stack"):
        parts = [make_transform(rng, npr, 2) for _ in range(rng.choice([1, 2]))]
        dim = rng.choice([0, -1, 1])
        lens = [rng.choice([1, 2]) for _ in parts]
        if k == "cat":
            return f"Cat({[p[0] for p in parts]}, dim={dim}, {lens})", lambda lib, dt: \
                lib.distributions.CatTransform([p[1](lib, dt) for p in parts], dim, lens), 1
        return f"Stack({[p[0] for p in parts]}, dim={dim})", lambda lib, dt: \
            lib.distributions.StackTransform([p[1](lib, dt) for p in parts], dim), 1
    if k == "inv":
        lb, bb, ev = make_transform(rng, npr, depth + 1)
        return f"({lb}).inv", lambda lib, dt: bb(lib, dt).inv, ev
    raise AssertionError(k)


def transform_program(seed):
    rng = random.Random(seed)
    npr = np.random.default_rng(seed)
    label, build, ev = make_transform(rng, npr)
    dtype = rng.choice(["float32", "float64", "float64"])
    problems = []
    r = [_call(build, lib, getattr(lib, dtype)) for lib in (ember, torch)]
    GARBAGE[0] = False
    if not compare("ctor", *r, dtype, problems, values=False) or not r[0][0][0]:
        return label, problems
    te, tt = r[0][0][1], r[1][0][1]
    for attr in ("event_dim", "domain", "codomain", "bijective", "sign", "inv"):
        def f(t, attr=attr):
            value = getattr(t, attr)
            return str(value) if attr in ("domain", "codomain", "inv") else value
        compare(attr, _call(f, te), _call(f, tt), dtype, problems)
    compare("repr", _call(repr, te), _call(repr, tt), dtype, problems)
    nd = rng.choice([ev, ev, ev + 1, max(ev - 1, 0)])
    shape = tuple(rng.choice([1, 2, 3, 6]) for _ in range(nd))
    if rng.random() < 0.5 and nd:
        shape = shape[:-1] + (rng.choice([3, 6, 1, 2]),)
    for fn in ("forward_shape", "inverse_shape"):
        compare(f"{fn}{shape}", _call(lambda t: getattr(t, fn)(shape), te),
                _call(lambda t: getattr(t, fn)(shape), tt), dtype, problems)
    x = npr.standard_normal(shape)
    if rng.random() < 0.5:
        x = np.abs(x) + 0.1
    xe = ember.tensor(x, dtype=getattr(ember, dtype))
    xt = torch.tensor(x, dtype=getattr(torch, dtype))
    ye, yt = _call(te, xe), _call(tt, xt)
    if not compare("forward", ye, yt, dtype, problems) or not ye[0][0]:
        return label, problems
    ye, yt = ye[0][1], yt[0][1]
    compare("inverse", _call(te.inv, ye), _call(tt.inv, yt), dtype, problems)
    compare("ladj", _call(te.log_abs_det_jacobian, xe, ye),
                _call(tt.log_abs_det_jacobian, xt, yt), dtype, problems)
    # an inverse from a fresh value (no cache)
    yv = yt.detach().numpy().copy()
    compare("inverse(fresh)", _call(te.inv, ember.tensor(yv)),
                _call(tt.inv, torch.tensor(yv)), dtype, problems)
    compare("codomain.check", _call(lambda t, y: t.codomain.check(y), te, ember.tensor(yv)),
                _call(lambda t, y: t.codomain.check(y), tt, torch.tensor(yv)), dtype, problems)
    return label, problems




# --- where PyTorch 2.13 is wrong (ember's result is kept) -------------------------------------

_TORCH_RAISES = (
    "Double did not match Float",           # GeneralizedPareto with a Python-number parameter
    "object has no attribute 'log'",        # RelaxedBernoulli with a Python-number temperature
    "full_like(): argument 'input'",        # RelaxedOneHotCategorical, the same
    "modified by an inplace operation",     # Wishart.rsample's graph cannot be differentiated
    "where() received an invalid",          # HalfNormal.log_prob of a Python number
    "can't be cast to the desired output type Long",    # ContinuousBernoulli of an int value
    "The shape of the mask",                # kl(Bernoulli, Bernoulli) of broadcast batches
    "the number of sizes provided",         # kl(LowRankMVN, MVN) of broadcast batches
    "of distribution Dirichlet(",           # LKJCholesky validates through a Beta, always
)


# ember's differences left as they are (the report lists them): messages naming internals
_LEFT_MESSAGES = (
    "must match the size of tensor b",      # a KL's broadcast error names its operands in order
    "leading minor of order",               # which minor a near-singular Cholesky fails at
)


def left_alone(label, problem):
    step, kind, ours, theirs = problem
    if kind == "error" and any(m in theirs[1] for m in _LEFT_MESSAGES):
        return True
    if kind == "error" and ours[0] == theirs[0] == "NotImplementedError":
        return True     # an integer parameter: the kernel named is the first one that fails
    if "PositiveDefiniteTransform" in label and step.startswith(("inverse", "codomain")):
        return True     # a Cholesky of an ill-conditioned y = L L^T: LAPACK's rounding decides
    # CorrCholeskyTransform.inv of a matrix of the wrong shape: an IndexError of other words
    return kind == "error" and "CorrCholesky" in label and ours[0] == theirs[0] == "IndexError"


def torch_bug(label, problem):
    """Whether a mismatch is one of PyTorch's bugs (listed in the round's report)."""
    fam = label.split("(")[0].split("[")[-1]
    step, kind, ours, theirs = problem
    if kind in ("raise", "error") and isinstance(theirs, tuple) and any(
            m in theirs[1] for m in _TORCH_RAISES):
        return True
    if fam == "Kumaraswamy" and step == "mode":      # torch's mode is NaN everywhere
        return True
    if label.startswith("KL[Wishart") and kind == "value":
        return True     # the exp-family KL sums the df term over the batch dims
    if fam == "ContinuousBernoulliL" or fam == "ContinuousBernoulli":
        # torch's BCE-with-logits gives a float32 log_prob for a float32 value (float64 logits)
        return step.startswith("log_prob[f32]") and kind == "desc"
    if fam == "RelaxedBernoulli" and kind == "value":
        return not np.all(np.isfinite(theirs))      # torch's exp() overflows out of (0, 1)
    if fam == "LKJCholesky" and step == "ctor":
        return True
    return False
