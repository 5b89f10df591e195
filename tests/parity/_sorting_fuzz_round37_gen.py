"""The random programs of test_parity_sorting_fuzz_round37.py: one seeded call of a sorting,
searching, unique or histogram function with random arguments, run in ember and torch side by
side.

An input has a random dtype (bool, uint8, int8..int64, float16, bfloat16, float32, float64,
complex), shape (0-d, empty dims, size 1), layout (contiguous, transposed, stepped, expanded)
and values full of ties, NaN, inf and -0.0. The call is one of sort / argsort / msort, topk,
kthvalue, mode, median / nanmedian, unique / unique_consecutive, searchsorted / bucketize, histc /
histogram / bincount, count_nonzero, isin, cummax / cummin, min / max / aminmax / amin / amax,
as a function or a method, by keyword or position, sometimes with out= (a tuple for the
two-output ones). Compared: values, dtypes, shapes, requires_grad, node names, the result's
named-tuple type and fields, errors (type and message), warnings, and for float inputs needing
a gradient the gradient and double gradient of the values output and its forward-mode tangent.
"""

import random

import numpy as np

import ember
from tests.parity import _fft_fuzz_round36_gen as base
from tests.parity._fft_fuzz_round36_gen import SKIP, Diverged, _maybe, compare

torch = base.torch

_DTYPES = ["float32", "float64", "float64", "float64", "float16", "bfloat16", "int64",
           "int32", "int16", "int8", "uint8", "bool", "complex64", "complex128"]
_FLOATS = ("float32", "float64", "float16", "bfloat16")


# --- inputs ----------------------------------------------------------------------------------

def _raw(rng, npr, shape, dtype):
    if dtype == "bool":
        return npr.random(shape) < 0.5
    lo = 0 if dtype == "uint8" else -3
    a = npr.integers(lo, 4, shape).astype(np.float64)
    if dtype.startswith("complex"):
        return a + 1j * npr.integers(-1, 2, shape)
    if dtype in _FLOATS:
        if rng.random() < 0.5:          # distinct values
            a = a + npr.random(shape)
        elif rng.random() < 0.5:
            a = a / 2
        special = rng.random()
        if special < 0.4 and a.size:
            flat = a.reshape(-1)
            for _ in range(rng.randrange(1, 3)):
                flat[npr.integers(0, flat.size)] = rng.choice(
                    [np.nan, np.inf, -np.inf, -0.0, 0.0, np.nan])
    return a


def _shape(rng):
    nd = rng.choice([0, 1, 1, 1, 2, 2, 2, 3])
    sizes = [rng.choice([1, 2, 3, 4, 5, 6]) for _ in range(nd)]
    if nd and rng.random() < 0.08:
        sizes[rng.randrange(nd)] = 0
    return tuple(sizes)


def make_input(lib, spec):
    """The leaf and the input (a view of it) of ``spec`` in ``lib``."""
    dtype, shape, layout, raw, grad = spec
    if layout == "expanded" and shape and shape[0]:
        leaf = lib.tensor(raw[:1]).to(getattr(lib, dtype)).requires_grad_(grad)
        return leaf, leaf.expand(shape)
    return base.make_input(lib, spec)


def _spec(rng, npr):
    dtype = rng.choice(_DTYPES)
    shape = _shape(rng)
    layout = rng.choice(["contiguous", "contiguous", "transposed", "stepped", "expanded"])
    grad = dtype in ("float64", "float32") and rng.random() < 0.5
    return dtype, shape, layout, _raw(rng, npr, shape, dtype), grad


# --- calls -----------------------------------------------------------------------------------

def _dim(rng, nd, p=0.06):
    if rng.random() < p:
        return rng.choice([max(nd, 1), -max(nd, 1) - 1, 1.5])
    return rng.randrange(-max(nd, 1), max(nd, 1))


def _caller(name, given, positional, method, pre=0):
    """``lib.<name>(x, ...)`` (or ``x.<name>(...)``) with ``given`` written out in the call."""
    keys = list(given)
    args = ", ".join(f"a{i}" if positional and i >= pre or i < pre else f"{k}=a{i}"
                     for i, k in enumerate(keys))
    params = "".join(f", a{i}" for i in range(len(keys)))
    sep = ", " if keys else ""
    head = f"x.{name}(" if method else f"lib.{name}(x{sep}"
    code = f"lambda lib, x{params}: {head}{args})"
    plain = eval(code)  # noqa: S307
    wout = eval(f"lambda lib, x, out{params}: lib.{name}(x{sep}{args}, out=out)")  # noqa: S307

    def call(lib, x, out=SKIP):
        vals = [v(lib) if callable(v) else v for v in given.values()]
        if out is SKIP:
            return plain(lib, x, *vals)
        return wout(lib, x, out(lib), *vals)
    return call


class _T:
    """A tensor argument built the same way in each library from a NumPy array."""

    def __init__(self, arr, dtype):
        self.arr, self.dtype = arr, dtype

    def __call__(self, lib):
        return lib.tensor(self.arr).to(getattr(lib, self.dtype))

    def __repr__(self):
        return f"T({self.dtype}{list(self.arr.shape)})"


def _other(rng, npr, shape=None, dtype=None):
    dtype = dtype or rng.choice(["float32", "float64", "int64", "int32", "float64"])
    shape = _shape(rng) if shape is None else shape
    return _T(_raw(rng, npr, shape, dtype), dtype)


def _sorting(rng, npr, spec):
    nd = len(spec[1])
    name = rng.choice(["sort", "sort", "argsort", "msort", "topk", "topk", "kthvalue", "mode",
                       "median", "nanmedian", "cummax", "cummin", "max", "min", "aminmax",
                       "amax", "amin"])
    kw = {}
    if name in ("sort", "argsort"):
        kw = dict(dim=_maybe(rng, _dim(rng, nd)), descending=_maybe(rng, rng.random() < 0.5),
                  stable=_maybe(rng, rng.choice([True, False, None])))
    elif name == "topk":
        d = _dim(rng, nd)
        have = spec[1][d] if nd and isinstance(d, int) and -nd <= d < nd else 1
        kw = dict(k=rng.choice([0, 1, have, have, max(have - 1, 0), have + 1, -1]),
                  dim=_maybe(rng, d), largest=_maybe(rng, rng.random() < 0.5),
                  sorted=_maybe(rng, rng.random() < 0.7))
    elif name == "kthvalue":
        d = _dim(rng, nd)
        have = spec[1][d] if nd and isinstance(d, int) and -nd <= d < nd else 1
        kw = dict(k=rng.choice([1, have, have, max(have // 2, 1), have + 1, 0]),
                  dim=_maybe(rng, d), keepdim=_maybe(rng, rng.random() < 0.5))
    elif name in ("mode", "cummax", "cummin"):
        kw = dict(dim=(_maybe(rng, _dim(rng, nd)) if name == "mode" else _dim(rng, nd)))
        if name == "mode":
            kw["keepdim"] = _maybe(rng, rng.random() < 0.5)
    elif name in ("median", "nanmedian", "max", "min"):
        if rng.random() < 0.7:
            kw = dict(dim=_dim(rng, nd), keepdim=_maybe(rng, rng.random() < 0.5))
    elif name == "aminmax":
        kw = dict(dim=_maybe(rng, _dim(rng, nd)), keepdim=_maybe(rng, rng.random() < 0.5))
    elif name in ("amax", "amin"):
        r = rng.random()
        dim = SKIP if r < 0.3 else _dim(rng, nd) if r < 0.7 else \
            tuple(rng.sample(range(nd), rng.randrange(0, nd + 1)))
        kw = dict(dim=dim, keepdim=_maybe(rng, rng.random() < 0.5))
    return name, kw


def _unique(rng, npr, spec):
    nd = len(spec[1])
    name = rng.choice(["unique", "unique", "unique_consecutive"])
    kw = dict(return_inverse=_maybe(rng, rng.random() < 0.5),
              return_counts=_maybe(rng, rng.random() < 0.5),
              dim=_maybe(rng, _dim(rng, nd, 0.03), 0.4))
    if name == "unique":
        kw = dict(sorted=_maybe(rng, rng.random() < 0.8, 0.3), **kw)
    return name, kw


def _search(rng, npr, spec):
    nd = len(spec[1])
    name = rng.choice(["searchsorted", "searchsorted", "bucketize"])
    right = _maybe(rng, rng.random() < 0.5)
    out_int32 = _maybe(rng, rng.random() < 0.5, 0.3)
    if name == "bucketize":
        bounds = np.sort(_raw(rng, npr, (rng.choice([0, 1, 3, 5]),), "float64"))
        bdt = rng.choice(["float32", "float64", "int64"])
        if rng.random() < 0.1:
            bounds = bounds.reshape(1, -1)
        return name, dict(boundaries=_T(bounds, bdt), out_int32=out_int32, right=right)
    shape = spec[1]
    if rng.random() < 0.5 or not nd:
        vshape = _shape(rng)
    else:
        vshape = shape[:-1] + (rng.choice([0, 1, 3]),)
    if rng.random() < 0.15:
        values = rng.choice([0, 1.5, -2, True, float("nan")])
    else:
        values = _other(rng, npr, vshape, rng.choice(["float32", "float64", "int64",
                                                      spec[0], spec[0]]))
    kw = dict(values=values, out_int32=out_int32, right=right,
              side=_maybe(rng, rng.choice(["left", "right", "right", "middle"]), 0.3),
              sorter=SKIP)
    return name, kw


def _hist(rng, npr, spec):
    name = rng.choice(["histc", "histogram", "histogram", "bincount", "bincount"])
    if name == "histc":
        lo = rng.choice([0, 0, -1.0, 2, 1])
        return name, dict(bins=_maybe(rng, rng.choice([1, 3, 5, 0, -1])),
                          min=_maybe(rng, lo), max=_maybe(rng, lo + rng.choice([0, 1, 3, -1])))
    if name == "histogram":
        bins = rng.choice([1, 3, 4, 0, "t", "t"])
        if bins == "t":
            edges = np.sort(npr.integers(-3, 4, rng.choice([1, 2, 4])).astype(np.float64))
            if rng.random() < 0.7:
                edges = np.unique(edges)
            bins = _T(edges, rng.choice([spec[0], "float32", "float64"]))
        rg = _maybe(rng, rng.choice([(-1.0, 2.0), (0.0, 0.0), (2.0, -1.0), (0, 3),
                                     (float("nan"), 1.0)]), 0.4)
        weight = _maybe(rng, _other(rng, npr, spec[1], rng.choice([spec[0], "float64"])), 0.3)
        return name, dict(bins=bins, range=rg, weight=weight,
                          density=_maybe(rng, rng.random() < 0.5))
    n = rng.choice([0, 1, 3, 6])
    weights = _maybe(rng, _other(rng, npr, (n,), rng.choice(["float32", "float64", "int64",
                                                             "float16", "bool"])), 0.4)
    return name, dict(weights=weights, minlength=_maybe(rng, rng.choice([0, 2, 8, -1]), 0.4))


def _misc(rng, npr, spec):
    nd = len(spec[1])
    name = rng.choice(["count_nonzero", "isin", "isin"])
    if name == "count_nonzero":
        r = rng.random()
        dim = SKIP if r < 0.3 else _dim(rng, nd) if r < 0.7 else \
            tuple(rng.sample(range(nd), rng.randrange(0, nd + 1)))
        return name, dict(dim=dim)
    if rng.random() < 0.15:
        test = rng.choice([0, 1, 2.5, True, float("nan")])
    else:
        test = _other(rng, npr, dtype=rng.choice([spec[0], spec[0], "float64", "int64"]))
    # (assume_unique with duplicates is undefined: its result is the kernel's accident)
    unique = isinstance(test, _T) and np.unique(test.arr).size == test.arr.size and \
        np.unique(spec[3]).size == spec[3].size and spec[2] != "expanded"
    return name, dict(test_elements=test, assume_unique=_maybe(rng, unique and rng.random() < 0.5),
                      invert=_maybe(rng, rng.random() < 0.5))


_METHODS = {"sort", "argsort", "msort", "topk", "kthvalue", "mode", "median", "nanmedian",
            "unique", "unique_consecutive", "histc", "histogram", "bincount", "count_nonzero",
            "cummax", "cummin", "max", "min", "aminmax", "amax", "amin"}
_POSITIONAL = {"sort": ["dim", "descending"], "argsort": ["dim", "descending"],
               "topk": ["k", "dim", "largest", "sorted"], "kthvalue": ["k", "dim", "keepdim"],
               "mode": ["dim", "keepdim"], "median": ["dim", "keepdim"],
               "nanmedian": ["dim", "keepdim"], "max": ["dim", "keepdim"],
               "min": ["dim", "keepdim"], "cummax": ["dim"], "cummin": ["dim"],
               "amax": ["dim", "keepdim"], "amin": ["dim", "keepdim"],
               "histc": ["bins", "min", "max"], "bincount": ["weights", "minlength"],
               "count_nonzero": ["dim"], "unique_consecutive": [], "unique": ["sorted"],
               "searchsorted": ["values"], "bucketize": ["boundaries"],
               "isin": ["test_elements"], "histogram": ["bins"]}
_TWO_OUT = {"sort", "topk", "kthvalue", "mode", "median", "nanmedian", "cummax", "cummin",
            "max", "min", "aminmax"}


def _call_of(rng, spec, name, kw):
    given = {k: v for k, v in kw.items() if v is not SKIP}
    order = _POSITIONAL.get(name, [])
    pre = 0
    if rng.random() < 0.3:      # the leading positional arguments by position
        while pre < len(given) and pre < len(order) and list(given)[pre] == order[pre]:
            pre += 1
        if pre < len(given) and list(given)[pre] in order:
            pre = 0     # keep the order; only a prefix goes by position
    method = name in _METHODS and rng.random() < 0.25 and "out" not in given
    if name == "searchsorted" and rng.random() < 0.3 and len(spec[1]) >= 1:
        given["sorter"] = "argsort"
    label = f"{'x.' if method else ''}{name}(" + ", ".join(
        f"{k}={v}" for k, v in given.items()) + (f" pos={pre}" if pre else "") + ")"
    fn = _caller(name, given, False, method, pre)
    if name == "searchsorted":
        fn = _searchsorted(given)
    return label, fn


def _searchsorted(given):
    """``lib.searchsorted(seq, values, ...)``, seq the input sorted along its last dim (or
    the input itself with sorter= its argsort)."""
    rest = {k: v for k, v in given.items() if k != "values"}

    def call(lib, x, out=SKIP):
        vals = given["values"](lib) if callable(given["values"]) else given["values"]
        kw = {k: v(lib) if callable(v) else v for k, v in rest.items()}
        if kw.get("sorter") == "argsort":
            kw["sorter"] = lib.argsort(x.detach(), dim=-1, stable=True)
            seq = x
        else:
            seq = lib.sort(x, dim=-1, stable=True).values if x.dim() else x
        if out is not SKIP:
            kw["out"] = out(lib)
        return lib.searchsorted(seq, vals, **kw)
    return call


def _op(rng, npr, spec):
    r = rng.random()
    pick = _sorting if r < 0.55 else _unique if r < 0.7 else _search if r < 0.82 else \
        _hist if r < 0.92 else _misc
    name, kw = pick(rng, npr, spec)
    if name == "bincount" and rng.random() < 0.6:
        spec = ("int64", (rng.choice([0, 1, 3, 6]),), "contiguous",
                npr.integers(0, 5, rng.choice([0, 1, 3, 6])).astype(np.float64), False)
        spec = spec[:1] + (spec[3].shape,) + spec[2:]
        if kw["weights"] is not SKIP:
            kw["weights"] = _T(npr.standard_normal(spec[1]), kw["weights"].dtype)
    if rng.random() < 0.04 and kw:             # an argument of a wrong type
        key = rng.choice(list(kw))
        kw[key] = rng.choice([1.5, "a", (1,), None, [0]])
    label, fn = _call_of(rng, spec, name, kw)
    if name in _TIES:
        plain = fn

        def fn(lib, x, out=SKIP):
            return _tie_free(lib, name, kw, x, plain(lib, x, out))
    return spec, name, label, fn


# --- comparing -------------------------------------------------------------------------------

def _fields(value):
    """The named-tuple type of a result: its repr's qualified name and its field names."""
    if isinstance(value, tuple) and hasattr(type(value), "__match_args__"):
        head = repr(value).split("(")[0].replace("torch.", "ember.")
        return head, type(value).__match_args__
    return None


def _values_of(lib, out):
    """The float tensor of a result to differentiate (the values of a (values, indices))."""
    if isinstance(out, tuple) and out:
        out = out[0]
    return out if isinstance(out, lib.Tensor) and out.requires_grad else None


# The ops whose index among equal elements is PyTorch's kernel's accident (nth_element,
# partial sorts): their indices are compared by the elements they pick
_TIES = {"topk", "kthvalue", "mode", "median", "nanmedian"}


def _tie_free(lib, name, kw, x, out):
    """A (values, indices) result as (values, the elements its indices pick, zeros like the
    indices)."""
    dim = kw.get("dim", -1)
    dim = -1 if dim is SKIP else dim
    if not (isinstance(out, tuple) and len(out) == 2 and x.dim() and isinstance(dim, int)):
        return out
    values, idx = out
    keep = name == "topk" or kw.get("keepdim") is True
    picked = x.detach().gather(dim, idx if keep else idx.unsqueeze(dim))
    if name == "topk" and kw.get("sorted") is False:    # (in the kernel's order)
        values, order = values.sort(dim, stable=True)
        picked = picked.gather(dim, order)
    return values, picked if keep else picked.squeeze(dim), idx * 0


def _first(out):
    """The first output of a result (the values of a (values, indices))."""
    return out[0] if isinstance(out, tuple) else out


def _with_out(rng, name, result):
    """An out= argument (a tuple for the two-output ops) of the result's or another layout."""
    kind = rng.choice(["same", "same", "empty", "wrong_shape", "wrong_dtype", "count"])
    parts = list(result) if isinstance(result, tuple) else [result]
    if name in _TIES and len(parts) == 3:       # (see _tie_free)
        parts = [parts[0], parts[2]]
    specs = []
    for t in parts:
        dtype = str(t.dtype).split(".")[1]
        if kind == "wrong_dtype" and rng.random() < 0.6:
            dtype = rng.choice(["float32", "float64", "int32", "int64", "bool"])
        shape = tuple(t.shape) if kind in ("same", "wrong_dtype") else \
            (0,) if kind == "empty" else (2, 3)
        specs.append((dtype, shape))
    as_tuple = isinstance(result, tuple)
    if kind == "count":     # one out too many or too few, or a tensor for a tuple
        specs = specs + specs[:1] if rng.random() < 0.5 else specs[:1]
        as_tuple = as_tuple and rng.random() < 0.7

    def make(lib):
        outs = tuple(lib.full(s, 7, dtype=getattr(lib, d)) for d, s in specs)
        return outs if as_tuple or len(outs) > 1 else outs[0]
    return f"out={specs}", make


def run_program(seed):
    """One random call; None when both agree, else (label, what, torch's, ember's)."""
    rng = random.Random(seed)
    npr = np.random.default_rng(seed)
    spec = _spec(rng, npr)
    spec, name, label, fn = _op(rng, npr, spec)
    label = f"{spec[0]}{list(spec[1])} {spec[2]} grad={spec[4]}: {label}"
    use_out = rng.random() < 0.2 and name not in ("unique", "unique_consecutive", "msort",
                                                 "count_nonzero")
    oseed, gseed = rng.random(), rng.randrange(1 << 30)
    try:
        res = base.run_both(fn, spec, make_input)
        compare(label, res[torch][1], res[ember][1])
        (tok, tval), _ = res[torch][1]
        (_, evl), _ = res[ember][1]
        if tok and _fields(tval) != _fields(evl):
            raise Diverged((label, "named tuple", _fields(tval), _fields(evl)))
        ties = name in _TIES and np.unique(spec[3]).size < spec[3].size or \
            spec[2] == "expanded" and name in _TIES
        if tok and spec[4] and _values_of(torch, tval) is not None and not ties:
            picked = {lib: (res[lib][0], ((True, _values_of(lib, res[lib][1][0][1])), []))
                      for lib in (torch, ember)}
            base._grads(label, picked, gseed)
            if spec[0] == "float64" and spec[2] != "expanded":
                base._tangents(label, spec, lambda lib, x: _first(fn(lib, x)), gseed)
        if use_out and tok and (isinstance(tval, torch.Tensor) or isinstance(tval, tuple)
                                and all(isinstance(t, torch.Tensor) for t in tval)):
            olabel, make = _with_out(random.Random(oseed), name, tval)

            def ofn(lib, x):
                out = make(lib)
                res = fn(lib, x, out=lambda _lib: out)
                same = [a is b for a, b in zip(res, out)] if isinstance(out, tuple) \
                    else res is out
                return (res, same) if name in _TIES else (res, out, same)
            base.compare_out(f"{label} {olabel}", ofn,
                             lambda lib: make_input(lib, spec)[1].detach())
    except Diverged as exc:
        return exc.args[0]
    return None


if __name__ == "__main__":
    from tests.parity._fuzz_cli import main
    main(run_program, shown=3)
