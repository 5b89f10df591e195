"""The random programs of test_parity_masked_fuzz_round37.py: one seeded call of a
torch.masked function (the reductions, normalizations and scans) with random arguments, run
in ember and torch side by side.

An input has a random dtype (floats incl. 16-bit, ints, uint8, bool, complex), shape (0-d,
empty and size-1 dims), layout (contiguous, transposed, stepped) and values (NaN, inf, -0.0
sprinkled in); a mask is None, a bool tensor of the input's shape or a broadcastable one
(fewer dims, size-1 dims, an expanded view), with all-False slices, of another dtype, or of a
shape that does not broadcast. A call gets a random dim (None, negative, tuples, lists,
duplicates, out of range), keepdim, dtype=, unbiased/correction, ord and eps, by keyword or
position. Compared: values, dtype, shape, requires_grad, errors, warnings and, for float
inputs that need a gradient, the gradient, double-backward gradient and forward tangent.
"""

import random

import numpy as np

from tests.parity._fft_fuzz_round36_gen import (SKIP, Diverged, _grads, _raw, _same, _shape,
                                                _tangents, compare, run_both)

try:
    import torch
except ImportError:     # the test module skips
    torch = None

import ember

_DTYPES = ["float32", "float64", "float64", "float64", "float16", "bfloat16", "int64",
           "int32", "int8", "uint8", "bool", "complex64", "complex128"]

_REDUCE = ["sum", "prod", "amax", "amin", "mean", "logsumexp", "norm", "var", "std"]
_ONE_DIM = ["argmax", "argmin", "median", "softmax", "log_softmax", "softmin", "normalize",
            "cumsum", "cumprod"]


def _spec(rng, npr):
    dtype = rng.choice(_DTYPES)
    shape = _shape(rng)
    layout = rng.choice(["contiguous", "contiguous", "transposed", "stepped"])
    raw = _raw(npr, shape, dtype)
    if dtype[0] in "fc" and raw.size and rng.random() < 0.25:   # NaN, inf, -0.0
        flat = raw.reshape(-1)
        for _ in range(rng.randrange(1, 3)):
            flat[rng.randrange(flat.size)] = rng.choice([np.nan, np.inf, -np.inf, -0.0])
    if dtype == "uint8":
        raw = np.abs(raw)
    grad = dtype in ("float64", "complex128", "float32") and rng.random() < 0.6
    return dtype, shape, layout, raw, grad


def _mask_spec(rng, npr, shape):
    """(kind, shape, raw bools, dtype) of a mask, or None."""
    r = rng.random()
    if r < 0.15:
        return None
    mshape = list(shape)
    kind = "full"
    if r < 0.35 and mshape:         # broadcastable: size-1 dims or fewer leading dims
        kind = "broadcast"
        for i in range(len(mshape)):
            if rng.random() < 0.5:
                mshape[i] = 1
        if rng.random() < 0.4:
            mshape = mshape[rng.randrange(len(mshape) + 1):]
    elif r < 0.4:
        kind = "bad"
        mshape = rng.choice([mshape + [2], [3] + mshape, [7] * max(len(mshape), 1)])
    raw = npr.random(tuple(mshape)) < rng.choice([0.3, 0.6, 0.9])
    if raw.ndim and raw.size and rng.random() < 0.4:   # an all-False hyperplane
        axis = rng.randrange(raw.ndim)
        raw = np.moveaxis(raw.copy(), axis, 0)
        raw[rng.randrange(raw.shape[0])] = False
        raw = np.moveaxis(raw, 0, axis)
    if rng.random() < 0.05:
        raw = np.zeros_like(raw)
    dtype = "bool" if rng.random() < 0.9 else rng.choice(["int64", "uint8", "float32"])
    if rng.random() < 0.03:
        kind = "list"                   # a Python list, not a tensor
    expanded = kind == "full" and rng.random() < 0.15 and mshape and mshape[0] > 1
    return kind, tuple(mshape), raw, dtype, expanded


def make_mask(lib, mspec):
    if mspec is None:
        return None
    kind, mshape, raw, dtype, expanded = mspec
    m = lib.tensor(raw).to(getattr(lib, dtype))
    if expanded:    # the first row expanded over the first dim (stride 0)
        m = m[:1].expand(*mshape)
    return m


def _dim(rng, nd, many):
    r = rng.random()
    if many and r < 0.25:
        return SKIP
    if many and r < 0.32:
        return None
    if r < 0.04:
        return max(nd, 1) + rng.randrange(2)
    if many and r < 0.6:
        pool = list(range(nd))
        rng.shuffle(pool)
        dims = [d - nd if rng.random() < 0.4 else d for d in pool[:rng.randrange(nd + 1)]]
        if rng.random() < 0.06 and dims:
            dims.append(dims[0])
        return tuple(dims) if rng.random() < 0.8 else list(dims)
    return rng.randrange(-max(nd, 1), max(nd, 1))


def _args(rng, name, nd):
    """(positional args after the input, keyword args) of one call."""
    pos, kw = [], {}
    many = name in _REDUCE
    if name in ("norm", "normalize"):
        ordv = rng.choice([2.0, 1.0, 0.0, 3.0, -1.0, float("inf"), float("-inf"), 2, 0.5])
        if name == "norm" and rng.random() < 0.3:
            kw["ord"] = ordv
        else:
            pos.append(ordv)
    dim = _dim(rng, nd, many)
    if name in ("argmax", "argmin") and rng.random() < 0.3:
        dim = SKIP if rng.random() < 0.5 else None
    if name == "median" and rng.random() < 0.2:
        dim = SKIP
    if dim is not SKIP:
        if rng.random() < 0.7 and "ord" not in kw:
            pos.append(dim)
        else:
            kw["dim"] = dim
    if name in ("var", "std"):
        c = rng.random()
        if c < 0.3:
            (pos.append if "dim" not in kw and dim is not SKIP else
             lambda v: kw.__setitem__("unbiased", v))(rng.random() < 0.5)
        elif c < 0.6:
            kw["correction"] = rng.choice([0, 1, 2, 0.5, 5])
    if name not in _ONE_DIM[3:] and rng.random() < 0.4:
        kw["keepdim"] = rng.choice([True, False, True, 1])
    if name == "normalize" and rng.random() < 0.3:
        kw["eps"] = rng.choice([1e-12, 0.5, 10.0])
    if rng.random() < 0.2:
        kw["dtype"] = rng.choice(["float32", "float64", "float16", "int64", "complex128",
                                  "bfloat16", "int32", "bool"])
    if rng.random() < 0.07:             # an argument of a wrong type (or one too many)
        bad = rng.choice([1.5, "a", (1.5,), [None], 2j, (0, "a"), True])
        if pos and rng.random() < 0.5:
            pos[rng.randrange(len(pos))] = bad
        elif rng.random() < 0.3:
            pos.extend([0, 0, 0][:3 - len(pos)])
        else:
            kw[rng.choice(["dim", "keepdim", "correction", "eps", "ord", "dtype_"])] = bad
    return pos, kw


def _caller(name, pos, kw, mspec, mspec2, explicit_none):
    def call(lib, x):
        kwargs = {k.rstrip("_"): (getattr(lib, v) if k == "dtype" else v)
                  for k, v in kw.items()}
        if name == "logaddexp":
            other = x.flip(0) if x.ndim else x * 0.5
            return lib.masked.logaddexp(x, other, input_mask=make_mask(lib, mspec),
                                        other_mask=make_mask(lib, mspec2), **kwargs)
        if mspec is not None and mspec[0] == "list":
            kwargs["mask"] = mspec[2].tolist()
        elif mspec is not None or explicit_none:
            kwargs["mask"] = make_mask(lib, mspec)
        return getattr(lib.masked, name)(x, *pos, **kwargs)
    return call


def _op(rng, npr, spec):
    shape = spec[1]
    name = rng.choice(_REDUCE + _ONE_DIM + ["sum", "mean", "amax", "softmax", "var", "logaddexp"])
    mspec = _mask_spec(rng, npr, shape)
    mspec2 = _mask_spec(rng, npr, shape) if name == "logaddexp" else None
    if name == "logaddexp":
        pos, kw = [], ({"dtype": rng.choice(["float32", "float64"])} if rng.random() < 0.2
                       else {})
    else:
        pos, kw = _args(rng, name, len(shape))
    explicit_none = mspec is None and rng.random() < 0.3
    mdesc = None if mspec is None else f"{mspec[0]}{list(mspec[1])}:{mspec[3]}" + \
        ("x" if mspec[4] else "")
    label = f"{name}({', '.join(map(repr, pos))}, {kw}, mask={mdesc})"
    return name, label, _caller(name, pos, kw, mspec, mspec2, explicit_none), kw.get("dtype")


def _strictly(check, *args):
    check(*args)


def _loosely(check, *args):
    """``check(label, ...)`` (``_grads``, ``_tangents``) for a call computed in a 16-bit
    ``dtype=``: its gradients and tangents round there, in an order that differs by an ulp
    or so."""
    try:
        check(*args)
    except Diverged as exc:
        what, a, b = exc.args[0][1:]
        if what not in ("grad", "double grad", "jvp") or a is None or b is None or \
                not _same(a, b, 2e-2):
            raise


def run_program(seed):
    """One random call; None when both agree, else (label, what, torch's, ember's)."""
    rng = random.Random(seed)
    npr = np.random.default_rng(seed)
    spec = _spec(rng, npr)
    name, label, fn, dtype = _op(rng, npr, spec)
    label = f"{spec[0]}{list(spec[1])} {spec[2]} grad={spec[4]}: {label}"
    gseed = rng.randrange(1 << 30)
    try:
        res = run_both(fn, spec)
        compare(label, res[torch][1], res[ember][1])
        (tok, tval), _ = res[torch][1]
        if tok and spec[4]:
            run = _loosely if dtype in ("float16", "bfloat16") else _strictly
            run(_grads, label, res, gseed)
            if spec[0] in ("float64", "complex128") and isinstance(tval, torch.Tensor):
                run(_tangents, label, spec, fn, gseed)
    except Diverged as exc:
        return exc.args[0]
    return None


if __name__ == "__main__":
    from tests.parity._fuzz_cli import main
    main(run_program, shown=3)
