"""The random programs of test_parity_fft_fuzz_round36.py: one seeded call of a torch.fft
function (the 18 transforms, fftfreq/rfftfreq, fftshift/ifftshift) with random arguments, run
in ember and torch side by side.

An input has a random dtype (real floats incl. 16-bit, ints, bool, complex), shape (0-d,
empty dims, size 1), layout (contiguous, transposed, stepped, a conj view); a transform gets a
random n / s (-1 entries, shorter or longer than the input), dim (negative, tuples,
duplicates, out of range) and norm (incl. a bad one). Compared: the values, dtype, shape,
requires_grad, node name, errors (type and message), warnings, the out= variant, and for
float64 / complex128 inputs the gradient of a backward with a random gradient.
"""

import random
import warnings

import numpy as np

import ember

try:
    import torch
except ImportError:     # the test module skips
    torch = None


# The strides of a transform's result are its kernel library's: PyTorch's MKL (x86) kernels
# put the transformed dims innermost, its pocketfft (other CPUs) ones give a contiguous
# result, as ember does; not compared
STRIDES = False


class Diverged(Exception):
    pass


def _msg(text):
    text = str(text).replace("ember.", "torch.").replace("ember", "torch").split("\n")[0]
    return text.split(" (Triggered internally")[0]


_ONCE = ("only appear once", "Casting complex values to real")


def _call(fn, *args, msg=_msg, once=_ONCE, width=60):
    """``((True, fn(*args)) or (False, (error type, msg(error))), the warnings)``: the
    distinct warnings as (category, the first ``width`` characters), those naming an entry of
    ``once`` left out."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = True, fn(*args)
        except Exception as exc:  # noqa: BLE001 - the error itself is compared
            out = False, (type(exc).__name__, msg(exc))
    return out, sorted({(w.category.__name__, msg(w.message)[:width]) for w in caught
                        if not any(m in str(w.message) for m in once)})


_DTYPES = ["float32", "float64", "float64", "float64", "float16", "bfloat16", "int64",
           "int32", "bool", "complex64", "complex128", "complex128", "complex128"]
_TOL = {"float16": 2e-2, "bfloat16": 5e-2, "float32": 1e-4, "complex64": 1e-4,
        "complex32": 2e-2}


def _np_values(lib, x):
    with lib.no_grad():
        y = x.detach()
        if y.dtype in (lib.bfloat16, lib.float16):
            y = y.float()
        if y.dtype == getattr(lib, "complex32", None):
            y = y.to(lib.complex64)
        return y.resolve_conj().resolve_neg().numpy().copy()


def _node(x):
    fn = x.grad_fn
    return None if fn is None else type(fn).__name__


def _same(a, b, tol):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind in "biu":
        return np.array_equal(a, b)
    scale = max(1.0, float(np.nanmax(np.abs(a), initial=0.0)) if np.isfinite(a).all() else 1.0)
    return np.allclose(a, b, rtol=tol, atol=tol * scale, equal_nan=True)


def _describe(lib, out):
    if isinstance(out, lib.Tensor):
        return ("T", tuple(out.shape), out.stride() if STRIDES and out.numel() else None,
                str(out.dtype).split(".")[1], out.requires_grad, _node(out))
    if isinstance(out, (tuple, list)):
        return (type(out).__name__, tuple(_describe(lib, o) for o in out))
    return ("py", type(out).__name__)


def _tensors(lib, out):
    if isinstance(out, lib.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _tensors(lib, o)]
    return []


# --- inputs ----------------------------------------------------------------------------------

def _shape(rng):
    nd = rng.choice([0, 1, 1, 1, 2, 2, 2, 3, 3])
    sizes = [rng.choice([1, 2, 3, 4, 4, 5, 6, 8]) for _ in range(nd)]
    if nd and rng.random() < 0.08:
        sizes[rng.randrange(nd)] = 0
    return tuple(sizes)


def _raw(npr, shape, dtype):
    if dtype == "bool":
        return npr.random(shape) < 0.5
    if dtype.startswith("int"):
        return npr.integers(-3, 4, shape).astype(np.float64)
    a = npr.standard_normal(shape)
    if dtype.startswith("complex"):
        a = a + 1j * npr.standard_normal(shape)
    return a


def make_input(lib, spec):
    dtype, shape, layout, raw, grad = spec
    dt = getattr(lib, dtype)
    if layout == "transposed" and len(shape) >= 2:
        base = lib.tensor(np.ascontiguousarray(np.swapaxes(raw, 0, -1))).to(dt)
        leaf = base.requires_grad_(grad)
        return leaf, leaf.transpose(0, -1)
    if layout == "stepped" and len(shape) >= 1:
        leaf = lib.tensor(np.repeat(raw, 2, axis=-1)).to(dt).requires_grad_(grad)
        return leaf, leaf[..., ::2]
    if layout == "conj" and dtype.startswith("complex"):
        leaf = lib.tensor(np.conj(raw)).to(dt).requires_grad_(grad)
        return leaf, leaf.conj()
    leaf = lib.tensor(raw).to(dt).requires_grad_(grad)
    return leaf, leaf


def _spec(rng, npr):
    dtype = rng.choice(_DTYPES)
    shape = _shape(rng)
    layout = rng.choice(["contiguous", "contiguous", "transposed", "stepped", "conj"])
    grad = dtype in ("float64", "complex128", "float32", "complex64") and rng.random() < 0.6
    return dtype, shape, layout, _raw(npr, shape, dtype), grad


# --- arguments -------------------------------------------------------------------------------

class _Skip:
    def __repr__(self):
        return "-"


SKIP = _Skip()


def _kw(**kw):
    return {k: v for k, v in kw.items() if v is not SKIP}


def _maybe(rng, value, p=0.5):
    return value if rng.random() < p else SKIP


_ONE = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
_TWO = [f + "2" for f in _ONE]
_ND = [f + "n" for f in _ONE]


def _norm(rng):
    return _maybe(rng, rng.choice([None, "forward", "backward", "ortho", "ortho", "bad"]), 0.6)


def _one_dim(rng, nd):
    if rng.random() < 0.04:
        return max(nd, 1) + rng.randrange(2)
    return rng.randrange(-max(nd, 1), max(nd, 1))


def _dims(rng, nd, k):
    dims = [rng.randrange(-max(nd, 1), max(nd, 1)) for _ in range(k)]
    if rng.random() < 0.6:      # mostly distinct
        pool = list(range(nd))
        rng.shuffle(pool)
        dims = [d - nd if rng.random() < 0.4 else d for d in pool[:k]]
    if rng.random() < 0.06 and dims:
        dims.append(dims[0])
    return tuple(dims) if rng.random() < 0.8 else list(dims)


def _size(rng, have):
    return rng.choice([-1, 1, 2, 3, 4, 5, 6, 7, 8, max(have, 1), max(have, 1),
                       max(have, 1) + 1] + ([0] if rng.random() < 0.1 else []))


def _transform(rng, spec):
    shape = spec[1]
    nd = len(shape)
    form = rng.choice([1, 1, 2, "n", "n"])
    name = rng.choice(_ONE if form == 1 else _TWO if form == 2 else _ND)
    norm = _norm(rng)
    if form == 1:
        dim = _maybe(rng, _one_dim(rng, nd), 0.5)
        d = -1 if dim is SKIP else dim
        have = shape[d] if nd and -nd <= d < nd else 1
        n = _maybe(rng, rng.choice([None, _size(rng, have), _size(rng, have)]), 0.5)
        kw = dict(n=n, dim=dim, norm=norm)
    else:
        r = rng.random()
        if form == 2:
            dim = SKIP if r < 0.6 else _dims(rng, nd, 2)
        else:
            dim = SKIP if r < 0.35 else None if r < 0.45 else \
                rng.randrange(-max(nd, 1), max(nd, 1)) if r < 0.55 else \
                _dims(rng, nd, rng.randrange(0, nd + 1))
        if dim is SKIP or dim is None:
            k = 2 if form == 2 else rng.randrange(0, nd + 2)
            axes = list(range(nd - k, nd)) if k <= nd else []
        else:
            axes = [dim] if isinstance(dim, int) else list(dim)
            k = len(axes)
        if rng.random() < 0.5:
            s = SKIP
        else:
            if rng.random() < 0.1:
                k = max(0, k + rng.choice([-1, 1]))
            sizes = [_size(rng, shape[a] if nd and -nd <= a < nd else 1)
                     for a in (axes + [0] * k)[:k]]
            s = tuple(sizes) if rng.random() < 0.8 else list(sizes)
            if form == "n" and k == 1 and rng.random() < 0.2:
                s = sizes[0]
        kw = dict(s=s, dim=dim, norm=norm)
    if rng.random() < 0.06:             # an argument of a wrong type
        key = rng.choice(list(kw))
        kw[key] = rng.choice([1.5, "a", True, (1.5,), [None], 2j, (1, "a")])
    label = f"{name}({', '.join(f'{k}={v}' for k, v in kw.items() if v is not SKIP)})"
    given = {k: v for k, v in kw.items() if v is not SKIP}
    positional = rng.random() < 0.15 and len(given) == len(kw)
    if positional:
        label += " positional"
    return name, label, _caller(name, given, positional)


def _caller(name, given, positional):
    """``lib.fft.<name>(x, ...)`` with ``given`` written out in the call (by keyword or
    position), as a user writes it: the messages of PyTorch's parser name an argument given
    by keyword without its position, and ember reads how the call was made from its
    bytecode, which an unpacked ``**kwargs`` hides."""
    keys = list(given)
    args = ", ".join(f"a{i}" if positional else f"{k}=a{i}" for i, k in enumerate(keys))
    params = "".join(f", a{i}" for i in range(len(keys)))
    sep = ", " if keys else ""
    plain = eval(f"lambda lib, x{params}: lib.fft.{name}(x{sep}{args})")  # noqa: S307
    with_out = eval(f"lambda lib, x, out{params}: lib.fft.{name}(x{sep}{args}, out=out)")  # noqa

    def call(lib, x, out=SKIP):
        if out is SKIP:
            return plain(lib, x, *given.values())
        return with_out(lib, x, out, *given.values())
    return call


def _shift(rng, spec):
    nd = len(spec[1])
    name = rng.choice(["fftshift", "ifftshift"])
    r = rng.random()
    dim = SKIP if r < 0.3 else None if r < 0.4 else _one_dim(rng, nd) if r < 0.7 else \
        _dims(rng, nd, rng.randrange(0, nd + 1))
    return name, f"{name}(dim={dim})", lambda lib, x: getattr(lib.fft, name)(x, **_kw(dim=dim))


def _freq(rng):
    name = rng.choice(["fftfreq", "rfftfreq"])
    n = rng.choice([0, 1, 2, 3, 5, 8, 9])
    d = _maybe(rng, rng.choice([1.0, 0.5, 2, 0.1, -1.0]))
    dtype = _maybe(rng, rng.choice(["float32", "float64", "float16", "bfloat16", "int64",
                                    "complex64"]), 0.4)
    rg = _maybe(rng, rng.random() < 0.5, 0.3)
    dev = _maybe(rng, "cpu", 0.2)

    out = _maybe(rng, rng.choice(["float32", "float64", "int64", "complex64"]), 0.2)
    oshape = rng.choice([(0,), (n,), (2, 3), (n // 2 + 1,)])

    def call(lib, x):
        kw = _kw(dtype=SKIP if dtype is SKIP else getattr(lib, dtype), requires_grad=rg,
                 device=dev, out=SKIP if out is SKIP else lib.full(oshape, 7,
                                                                   dtype=getattr(lib, out)))
        res = getattr(lib.fft, name)(n, *(() if d is SKIP else (d,)), **kw)
        return res if out is SKIP else (res, res is kw["out"])
    return name, f"{name}({n}, d={d}, dtype={dtype}, requires_grad={rg}, device={dev}, " \
        f"out={out}{list(oshape)})", call


def _op(rng, spec):
    r = rng.random()
    if r < 0.82:
        return _transform(rng, spec)
    if r < 0.93:
        return _shift(rng, spec)
    return _freq(rng)


# --- comparing -------------------------------------------------------------------------------

def compare(label, tres, eres, *, describe=None, tensors=None, values=None, tol=None):
    """Raise Diverged where two ``_call`` results differ; the round-37 fuzzers pass their own
    ``describe(lib, out)``, ``tensors(lib, out)``, ``values(lib, t)`` and ``tol(dtype)``."""
    describe, tensors = describe or _describe, tensors or _tensors
    values = values or _np_values
    tol = tol or (lambda dtype: _TOL.get(str(dtype).split(".")[1], 1e-6))
    (tok, tval), twarn = tres
    (eok, evl), ewarn = eres
    if tok != eok:
        raise Diverged((label, "raised", tval if not tok else "ok", evl if not eok else "ok"))
    if not tok:
        if tval != evl:
            raise Diverged((label, "error", tval, evl))
        return
    if twarn != ewarn:
        raise Diverged((label, "warnings", twarn, ewarn))
    td, ed = describe(torch, tval), describe(ember, evl)
    if td != ed:
        raise Diverged((label, "result", td, ed))
    for k, (a, b) in enumerate(zip(tensors(torch, tval), tensors(ember, evl))):
        av, bv = values(torch, a), values(ember, b)
        if not _same(av, bv, tol(a.dtype)):
            raise Diverged((label, f"values[{k}]", av, bv))


def run_both(fn, spec, make=None, call=_call):
    """``{lib: (leaf, call(fn, lib, x))}`` for the leaf and input ``make(lib, spec)`` (by
    default ``make_input``) in torch and in ember."""
    res = {}
    for lib in (torch, ember):
        leaf, x = (make or make_input)(lib, spec)
        res[lib] = (leaf, call(fn, lib, x))
    return res


def compare_out(label, fn, inputs, call=_call):
    """Compare ``call(fn, lib, inputs(lib))`` run under no_grad in torch and in ember (the
    out= variants)."""
    res = {}
    for lib in (torch, ember):
        x = inputs(lib)
        with lib.no_grad():
            res[lib] = call(fn, lib, x)
    compare(label, res[torch], res[ember])


def _grads(label, res, gseed):
    got = {}
    for lib in (torch, ember):
        leaf, ((_, out), _) = res[lib]

        def backward(lib=lib, out=out, leaf=leaf):
            if not (isinstance(out, lib.Tensor) and out.requires_grad):
                return None
            npr = np.random.default_rng(gseed)
            g = npr.standard_normal(tuple(out.shape))
            if out.is_complex():
                g = g + 1j * npr.standard_normal(tuple(out.shape))
            first, = lib.autograd.grad(out, leaf, lib.tensor(g).to(out.dtype),
                                       create_graph=True)
            w = lib.tensor(npr.standard_normal(tuple(first.shape))).to(first.dtype)
            second = None
            if first.requires_grad:     # the gradient's own gradient (double backward)
                second, = lib.autograd.grad((first * w).sum().real, leaf, allow_unused=True)
            return tuple(None if t is None else _np_values(lib, t) for t in (first, second))
        got[lib] = _call(backward)
    tol = 1e-6 if res[torch][0].dtype in (torch.float64, torch.complex128) else 1e-4
    (tok, tg), _ = got[torch]
    (eok, eg), _ = got[ember]
    if tok != eok or (not tok and tg != eg):
        raise Diverged((label, "backward error", tg, eg))
    for k, (a, b) in enumerate(zip(tg or (), eg or ()) if tok else ()):
        if (a is None) != (b is None) or a is not None and not _same(a, b, tol):
            raise Diverged((label, ("grad", "double grad")[k], a, b))


def _modified(label, spec, fn, gseed):
    """The input (a non-leaf) modified in place after the transform, then backward: an
    error where the node saved it."""
    got = {}
    for lib in (torch, ember):
        def run(lib=lib):
            leaf, x = make_input(lib, spec)
            x = x * 1
            out = fn(lib, x)
            with lib.no_grad():
                x.add_(1)
            npr = np.random.default_rng(gseed)
            g = npr.standard_normal(tuple(out.shape))
            if out.is_complex():
                g = g + 1j * npr.standard_normal(tuple(out.shape))
            out.backward(lib.tensor(g).to(out.dtype))
            return _np_values(lib, leaf.grad)
        got[lib] = _call(run)
    (tok, tg), _ = got[torch]
    (eok, eg), _ = got[ember]
    if tok != eok or (not tok and tg[0] != eg[0]):
        raise Diverged((label, "modified input", tg, eg))


def _tangents(label, spec, fn, gseed):
    """Forward-mode AD: the tangent of the result for a random tangent of the input."""
    got = {}
    for lib in (torch, ember):
        def jvp(lib=lib):
            _, x = make_input(lib, spec)
            x = x.detach()
            npr = np.random.default_rng(gseed + 1)
            t = npr.standard_normal(tuple(x.shape))
            if x.is_complex():
                t = t + 1j * npr.standard_normal(tuple(x.shape))
            fw = lib.autograd.forward_ad
            with fw.dual_level():
                out = fn(lib, fw.make_dual(x, lib.tensor(t).to(x.dtype)))
                tangent = fw.unpack_dual(out).tangent
                return None if tangent is None else _np_values(lib, tangent)
        got[lib] = _call(jvp)
    (tok, tt), _ = got[torch]
    (eok, et), _ = got[ember]
    if tok != eok or (not tok and tt != et):
        raise Diverged((label, "jvp error", tt, et))
    if tok and ((tt is None) != (et is None) or tt is not None and not _same(tt, et, 1e-6)):
        raise Diverged((label, "jvp", tt, et))


def _with_out(rng, fn, result):
    kind = rng.choice(["same", "same", "empty", "wrong_shape", "wrong_dtype"])
    dtype = str(result.dtype).split(".")[1]
    if kind == "wrong_dtype":
        dtype = rng.choice(["float32", "float64", "complex64", "complex128", "int64"])
    shape = tuple(result.shape) if kind in ("same", "wrong_dtype") else \
        (0,) if kind == "empty" else (2, 3)

    def call(lib, x):
        out = lib.full(shape, 7, dtype=getattr(lib, dtype))
        res = fn(lib, x, out=out)
        return res, out, res is out
    return f"out={dtype}{list(shape)}", call


def run_program(seed):
    """One random call; None when both agree, else (label, what, torch's, ember's)."""
    rng = random.Random(seed)
    npr = np.random.default_rng(seed)
    spec = _spec(rng, npr)
    name, label, fn = _op(rng, spec)
    label = f"{spec[0]}{list(spec[1])} {spec[2]} grad={spec[4]}: {label}"
    use_out = name in _ONE + _TWO + _ND and rng.random() < 0.25
    oseed, gseed = rng.random(), rng.randrange(1 << 30)
    try:
        res = run_both(fn, spec)
        compare(label, res[torch][1], res[ember][1])
        (tok, tval), _ = res[torch][1]
        if tok and spec[4]:
            _grads(label, res, gseed)
            if spec[0] in ("float64", "complex128") and isinstance(tval, torch.Tensor):
                _tangents(label, spec, fn, gseed)
                if tval.requires_grad and rng.random() < 0.3:
                    _modified(label, spec, fn, gseed)
        if use_out and tok and isinstance(tval, torch.Tensor):
            olabel, ofn = _with_out(random.Random(oseed), fn, tval)
            compare_out(f"{label} {olabel}", ofn, lambda lib: make_input(lib, spec)[1].detach())
    except Diverged as exc:
        return exc.args[0]
    return None


if __name__ == "__main__":
    from tests.parity._fuzz_cli import main
    main(run_program, shown=3)
