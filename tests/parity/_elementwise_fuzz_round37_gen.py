"""The random programs of test_parity_elementwise_fuzz_round37.py: one seeded call of an
elementwise math function (torch.special.*, the division family, pow, bitwise ops, clamp,
nan_to_num, rounding, classification) on hard inputs, run in ember and torch side by side.

An input has a random dtype (bool, uint8, int8..int64, float16, bfloat16, float32, float64,
complex), shape (0-d, empty and size-1 dims), layout (contiguous, transposed, stepped,
expanded) and values drawn from NaN, +-inf, -0.0, subnormals, huge values and ints at their
limits; a second operand is a tensor (broadcast, 0-d) or a Python scalar on either side. The
call is a function, a method, an in-place method or an out= call, its arguments by keyword or
position. Compared: values, dtype, shape, strides, requires_grad, node name, errors (type and
first line), warnings, and for float inputs needing grad the gradient and double gradient.
"""

import random

import numpy as np

import ember
from tests.parity._fft_fuzz_round36_gen import Diverged, _call, _node, _np_values, _same

try:
    import torch
except ImportError:     # the test module skips
    torch = None

_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "int64", "float16", "bfloat16",
           "float32", "float32", "float64", "float64", "float64", "float64", "complex64",
           "complex128"]
_TOL = {"float16": 2e-2, "bfloat16": 5e-2, "float32": 2e-4, "complex64": 2e-4,
        "float64": 1e-7, "complex128": 1e-7}
_FLOATS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, -1e-310, 1e-40, 1e300, -1e300, 4e38,
           0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 3.0, 0.1, 10.0, -7.5, 100.0, 1e-8, 709.0, 89.0,
           0.99, -0.99, 1e-3, 30.0]


def _int_pool(dtype):
    info = np.iinfo(dtype)
    return [v for v in (0, 1, -1, 2, -2, 3, 7, -8, 8, 31, 32, 63, 64, 100, info.min,
                        info.max, info.min + 1) if info.min <= v <= info.max]


# --- inputs ----------------------------------------------------------------------------------

def _shape(rng):
    nd = rng.choice([0, 0, 1, 1, 1, 2, 2, 3])
    sizes = [rng.choice([1, 2, 3, 4, 5]) for _ in range(nd)]
    if nd and rng.random() < 0.06:
        sizes[rng.randrange(nd)] = 0
    return tuple(sizes)


def _raw(rng, npr, shape, dtype):
    n = int(np.prod(shape))
    if dtype == "bool":
        return (npr.random(shape) < 0.5)
    if dtype.startswith(("int", "uint")):
        pool = _int_pool(dtype)
        vals = [rng.choice(pool) if rng.random() < 0.5 else int(npr.integers(-5, 6))
                for _ in range(n)]
        vals = [v if np.iinfo(dtype).min <= v else -v for v in vals]
        return np.array(vals, dtype=dtype).reshape(shape)
    special = rng.random() < 0.7

    def one():
        if special and rng.random() < 0.45:
            return rng.choice(_FLOATS)
        return float(npr.standard_normal() * rng.choice([1, 1, 3, 0.3]))
    a = np.array([one() for _ in range(n)], dtype=np.float64).reshape(shape)
    if dtype.startswith("complex"):
        a = a + 1j * np.array([one() for _ in range(n)], dtype=np.float64).reshape(shape)
    return a


class Spec:
    """A tensor argument: dtype, shape, layout, values, whether it needs grad."""

    def __init__(self, rng, npr, shape=None, dtype=None, grad=None):
        self.dtype = dtype or rng.choice(_DTYPES)
        self.shape = _shape(rng) if shape is None else shape
        self.layout = rng.choice(["contiguous", "contiguous", "contiguous", "transposed",
                                  "stepped", "expanded"])
        self.raw = _raw(rng, npr, self.shape, self.dtype)
        self.grad = (self.dtype in ("float64", "float32", "complex128") and rng.random() < 0.5
                     if grad is None else grad)

    def __repr__(self):
        return f"{self.dtype}{list(self.shape)}{self.layout[0]}{'g' * self.grad}"

    def make(self, lib):
        """(leaf, the tensor used) in ``lib``."""
        dt = getattr(lib, self.dtype)
        raw, shape, nd = self.raw, self.shape, len(self.shape)

        def leaf(a):
            t = lib.tensor(np.ascontiguousarray(a))
            return t.to(dt).requires_grad_(self.grad)
        if self.layout == "transposed" and nd >= 2:
            lf = leaf(np.swapaxes(raw, 0, -1))
            return lf, lf.transpose(0, -1)
        if self.layout == "stepped" and nd >= 1:
            lf = leaf(np.repeat(raw, 2, axis=-1))
            return lf, lf[..., ::2]
        if self.layout == "expanded" and nd >= 1 and shape[0] > 1:
            lf = leaf(raw[:1])
            return lf, lf.expand(shape)
        lf = leaf(raw)
        return lf, lf


class DType:
    """A dtype argument, named."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


def _scalar(rng, kinds="bifc"):
    kind = rng.choice(kinds)
    if kind == "b":
        return rng.random() < 0.5
    if kind == "i":
        return rng.choice([0, 1, -1, 2, -3, 5, 64, 100, -(1 << 63), (1 << 63) - 1, 300])
    if kind == "c":
        return complex(rng.choice([0.5, -1.0, 0.0]), rng.choice([1.0, -2.0]))
    return rng.choice(_FLOATS)


def _broadcast_shape(rng, shape):
    r = rng.random()
    if r < 0.5:
        return shape
    if r < 0.65:
        return ()
    if r < 0.85:
        return tuple(1 if rng.random() < 0.5 else s for s in shape)
    return tuple(shape[1:]) if shape else (rng.choice([1, 2]),)


def _other(rng, npr, first, scalar_kinds="bifc", p_scalar=0.3):
    """A second operand: a Python scalar or a tensor broadcasting with ``first``."""
    # (float16 with a complex number or 0-dim tensor is complex32 in PyTorch: ember, by
    # design, has no complex32 and computes complex64)
    if first.dtype == "float16":
        scalar_kinds = scalar_kinds.replace("c", "f")
    if rng.random() < p_scalar:
        return _scalar(rng, scalar_kinds)
    same = rng.random() < 0.5
    other = Spec(rng, npr, shape=_broadcast_shape(rng, first.shape),
                 dtype=first.dtype if same else None)
    if first.dtype == "float16" and other.dtype.startswith("complex"):
        other = Spec(rng, npr, shape=other.shape, dtype="float32")
    return other


# --- the ops ---------------------------------------------------------------------------------

_SPECIAL_UNARY = (
    "erf erfc erfcx erfinv expit i0 i0e i1 i1e ndtr ndtri log_ndtr digamma psi gammaln sinc "
    "entr log1p expm1 exp2 bessel_j0 bessel_j1 bessel_y0 bessel_y1 modified_bessel_i0 "
    "modified_bessel_i1 modified_bessel_k0 modified_bessel_k1 scaled_modified_bessel_k0 "
    "scaled_modified_bessel_k1 spherical_bessel_j0 airy_ai").split()
_SPECIAL_BINARY = "xlogy xlog1py gammainc gammaincc zeta".split()
_POLY = ("chebyshev_polynomial_t chebyshev_polynomial_u chebyshev_polynomial_v "
         "chebyshev_polynomial_w shifted_chebyshev_polynomial_t hermite_polynomial_h "
         "hermite_polynomial_he laguerre_polynomial_l legendre_polynomial_p").split()
_TORCH_UNARY = ("sgn sign signbit trunc frac ceil floor round isfinite isnan isinf isposinf "
                "isneginf isreal bitwise_not frexp exp2 log1p expm1 erf erfinv").split()
_TORCH_BINARY = ("div floor_divide fmod remainder true_divide pow float_power copysign "
                 "nextafter ldexp hypot logaddexp logaddexp2 atan2 arctan2 heaviside gcd lcm "
                 "bitwise_and bitwise_or bitwise_xor bitwise_left_shift bitwise_right_shift "
                 "xlogy").split()
# binary ops whose Python-scalar first operand PyTorch takes
_SCALAR_FIRST = {"pow", "float_power", "xlogy", "bitwise_left_shift", "bitwise_right_shift",
                 "bitwise_and", "bitwise_or", "bitwise_xor", "remainder", "special.xlogy",
                 "special.xlog1py", "special.zeta"}
# functions with no Tensor method
_NO_METHOD = {"isposinf", "isneginf", "isreal"}


def _args_for(rng, npr, name, x):
    """The arguments after ``x``: a list of (keyword or None, value)."""
    if name in ("special.logit", "logit"):
        return [("eps", rng.choice([None, 1e-6, 0.1, 0.5, 0.6, -0.1]))] \
            if rng.random() < 0.7 else []
    if name in ("special.round", "round"):
        return [("decimals", rng.choice([0, 1, 2, -1, 3]))] if rng.random() < 0.6 else []
    if name == "special.multigammaln":
        return [("p", rng.choice([1, 2, 3, 0, -1]))]
    if name in ("special.softmax", "special.log_softmax"):
        nd = max(len(x.shape), 1)
        out = [("dim", rng.randrange(-nd, nd) if rng.random() < 0.95 else nd)]
        if rng.random() < 0.4:
            out.append(("dtype", DType(rng.choice(["float64", "float32", "int64", "float16"]))))
        return out
    if name.startswith("special.") and name[8:] in _POLY:
        if rng.random() < 0.5:
            return [("n", rng.choice([0, 1, 2, 3, 5, -1, 7, 2.5]))]
        n = Spec(rng, npr, shape=_broadcast_shape(rng, x.shape),
                 dtype=rng.choice(["int64", "float64", "float32", "int32"]), grad=False)
        # (a degree of 2**31 runs the recurrence that many times, in either library)
        n.raw = np.clip(np.nan_to_num(n.raw), -3, 40).astype(n.raw.dtype)
        return [("n", n)]
    if name == "clamp" or name == "clip":
        def bound():
            r = rng.random()
            if r < 0.25:
                return None
            if r < 0.6:
                return _scalar(rng, "iif")
            return Spec(rng, npr, shape=_broadcast_shape(rng, x.shape),
                        dtype=x.dtype if rng.random() < 0.6 else None)
        return [("min", bound()), ("max", bound())]
    if name == "nan_to_num":
        return [(k, rng.choice([0.0, 1.5, -2, 1e40, np.nan])) for k in ("nan", "posinf", "neginf")
                if rng.random() < 0.3]
    if name == "isclose":
        out = [("other", _other(rng, npr, x, "if", 0.1))]
        for k, vals in (("rtol", [1e-5, 0.0, 0.5, -1.0]), ("atol", [1e-8, 0.0, 1.0, -1.0]),
                        ("equal_nan", [True, False])):
            if rng.random() < 0.35:
                out.append((k, rng.choice(vals)))
        return out
    if name in ("div", "true_divide") or name in _TORCH_BINARY or \
            name[8:] in _SPECIAL_BINARY:
        kinds = "ii" if name.startswith(("gcd", "lcm", "bitwise")) else "bifc"
        key = {"pow": "exponent", "float_power": "exponent", "heaviside": "values"}.get(
            name, "other")
        out = [(key, _other(rng, npr, x, kinds))]
        if name == "div" and rng.random() < 0.6:
            out.append(("rounding_mode", rng.choice([None, "floor", "trunc", "trunc", "bad"])))
        return out
    return []


def _pick(rng):
    r = rng.random()
    if r < 0.35:
        return "special." + rng.choice(_SPECIAL_UNARY + ["logit", "round", "multigammaln",
                                                          "softmax", "log_softmax"])
    if r < 0.45:
        return "special." + rng.choice(_SPECIAL_BINARY + ["polygamma"])
    if r < 0.52:
        return "special." + rng.choice(_POLY)
    if r < 0.72:
        return rng.choice(_TORCH_BINARY + ["isclose"])
    if r < 0.85:
        return rng.choice(_TORCH_UNARY + ["logit", "clamp", "clip", "nan_to_num"])
    return rng.choice(["div", "remainder", "fmod", "floor_divide", "pow", "clamp", "round",
                       "bitwise_left_shift", "bitwise_right_shift", "gcd"])


def _program(rng, npr):
    name = _pick(rng)
    x = Spec(rng, npr)
    if name.startswith(("gcd", "lcm", "bitwise")) and rng.random() < 0.7:
        x = Spec(rng, npr, dtype=rng.choice(["int64", "int32", "uint8", "int8", "bool"]))
    args = _args_for(rng, npr, name, x)
    if name in ("lcm", "gcd"):  # PyTorch's lcm of an int's minimum dies of SIGFPE, its gcd
        # overflows |min| (torch bugs)
        for spec in [x] + [v for _, v in args if isinstance(v, Spec)]:
            if spec.raw.dtype.kind == "i":
                spec.raw[spec.raw == np.iinfo(spec.raw.dtype).min] += 1
    lead = []       # arguments before x (polygamma's n, a scalar first operand)
    if name == "special.polygamma":
        lead = [rng.choice([0, 1, 2, 3, -1])]
    elif args and args[0][0] in ("other", "exponent") and not isinstance(args[0][1], Spec) and \
            name in _SCALAR_FIRST and rng.random() < 0.4:
        lead, args = [args[0][1]], args[1:]
    short = name.split(".")[-1]
    variants = ["function", "function", "function"]
    if not name.startswith("special.") and short not in _NO_METHOD and not lead:
        variants += ["method", "inplace"]
    if (not lead or name == "special.polygamma") and "softmax" not in name:
        variants.append("out")
    variant = rng.choice(variants)
    if rng.random() < 0.04 and args:    # an argument of a wrong type
        i = rng.randrange(len(args))
        args[i] = (args[i][0], rng.choice(["a", [1.5], (1, 2), 1j if args[i][0] == "dim"
                                           else object]))
    positional = rng.random() < 0.3
    return name, variant, lead, x, args, positional


def _source(name, variant, nlead, keys, positional):
    """A lambda calling the op as a user writes it (ember reads keywords from the call site)."""
    parts = [f"a{i}" if positional and k not in ("out", "dtype", "eps", "decimals")
             or k is None else f"{k}=a{i}" for i, k in enumerate(keys)]
    lead = [f"l{i}" for i in range(nlead)]
    params = ", ".join(["lib", "x"] + lead + [f"a{i}" for i in range(len(keys))] + ["o"])
    if variant == "method":
        call = f"x.{name}({', '.join(parts)})"
    elif variant == "inplace":
        call = f"x.{name}_({', '.join(parts)})"
    else:
        rest = ", ".join(lead + ["x"] + parts + (["out=o"] if variant == "out" else []))
        call = f"lib.{name}({rest})"
    return eval(f"lambda {params}: {call}")  # noqa: S307


def _value(lib, v, made):
    if isinstance(v, Spec):
        leaf, t = v.make(lib)
        made.append((v, leaf))
        return t
    if isinstance(v, DType):
        return getattr(lib, v.name)
    if v is object:
        return lib
    return v


# --- comparing -------------------------------------------------------------------------------

def _describe(lib, out):
    if isinstance(out, lib.Tensor):
        # a size-1 dim's stride is an implementation accident
        strides = tuple(st for st, n in zip(out.stride(), out.shape) if n > 1)
        return ("T", tuple(out.shape), strides if out.numel() > 1 else None,
                str(out.dtype).split(".")[1], out.requires_grad, _node(out))
    if isinstance(out, (tuple, list)):
        return (type(out).__name__, tuple(_describe(lib, o) for o in out))
    return ("py", type(out).__name__, out if isinstance(out, (bool, int)) else None)


def _flat(lib, out):
    if isinstance(out, lib.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(lib, o)]
    return []


def _compare(label, what, tres, eres):
    (tok, tval), twarn = tres
    (eok, evl), ewarn = eres
    if tok != eok:
        raise Diverged((label, what + " raised", tval if not tok else "ok",
                        evl if not eok else "ok"))
    if not tok:
        if tval != evl:
            raise Diverged((label, what + " error", tval, evl))
        return
    if twarn != ewarn:
        raise Diverged((label, what + " warnings", twarn, ewarn))
    td, ed = _describe(torch, tval), _describe(ember, evl)
    if td != ed:
        raise Diverged((label, what + " result", td, ed))
    for k, (a, b) in enumerate(zip(_flat(torch, tval), _flat(ember, evl))):
        av, bv = _np_values(torch, a), _np_values(ember, b)
        tol = _TOL.get(str(a.dtype).split(".")[1], 1e-7)
        if not _same(av, bv, tol) or (av.dtype.kind == "f" and not np.array_equal(
                np.signbit(av[av == 0]), np.signbit(bv[av == 0]))):
            raise Diverged((label, f"{what} values[{k}]", av, bv))


def _run(lib, prog, fn, out_dtype):
    """Build the inputs in ``lib`` and call; (leaves made, result of _call)."""
    name, variant, lead, x, args, positional = prog
    made = []
    xt = _value(lib, x, made)
    if variant == "inplace" and x.grad and made:
        xt = xt.clone()
    vals = [_value(lib, v, made) for _, v in args]
    o = None
    if variant == "out":
        o = lib.full(out_dtype[1], 7, dtype=getattr(lib, out_dtype[0]))
    return made, _call(fn, lib, xt, *lead, *vals, o)


def _grads(label, runs, gseed):  # noqa: C901 - one branch per outcome
    got = {}
    for lib in (torch, ember):
        made, ((_, out), _) = runs[lib]
        leaves = [leaf for spec, leaf in made if spec.grad]

        def backward(lib=lib, out=out, leaves=leaves):
            if not (isinstance(out, lib.Tensor) and out.requires_grad) or not leaves:
                return None
            npr = np.random.default_rng(gseed)
            g = npr.standard_normal(tuple(out.shape))
            if out.is_complex():
                g = g + 1j * npr.standard_normal(tuple(out.shape))
            firsts = lib.autograd.grad(out, leaves, lib.tensor(g).to(out.dtype),
                                       create_graph=True, allow_unused=True)
            # (PyTorch's sgn of real input gives a ZeroTensor, which has no numpy())
            res = [None if f is None else _np_values(lib, lib.zeros(f.shape, dtype=f.dtype) + f)
                   for f in firsts]
            used = [(f, lf) for f, lf in zip(firsts, leaves) if f is not None and f.requires_grad]
            if used:
                total = sum((f * lib.tensor(npr.standard_normal(tuple(f.shape))).to(f.dtype))
                            .sum().real for f, _ in used)
                seconds = lib.autograd.grad(total, leaves, allow_unused=True)
                res += [None if s is None else _np_values(lib, s) for s in seconds]
            return res
        got[lib] = _call(backward)
    (tok, tg), _ = got[torch]
    (eok, eg), _ = got[ember]
    if tok != eok or (not tok and tg != eg):
        raise Diverged((label, "backward error", tg, eg))
    if not tok or tg is None or eg is None:
        if tg is not eg and tok:
            raise Diverged((label, "backward none", tg, eg))
        return
    if len(tg) != len(eg):
        raise Diverged((label, "double grad exists", len(tg), len(eg)))
    for k, (a, b) in enumerate(zip(tg, eg)):
        tol = 1e-6 if a is None or a.dtype != np.float32 else 1e-3
        if (a is None) != (b is None) or a is not None and not _same(a, b, tol):
            raise Diverged((label, f"grad[{k}]", a, b))


def run_program(seed):
    """One random call; None when both agree, else (label, what, torch's, ember's)."""
    rng = random.Random(seed)
    npr = np.random.default_rng(seed)
    prog = _program(rng, npr)
    name, variant, lead, x, args, positional = prog
    keys = [k for k, _ in args]
    fn = _source(name, variant, len(lead), keys, positional)
    out_dtype = (rng.choice(["float32", "float64", "int64", "bool", "complex64", "float16",
                             "uint8"]), rng.choice([(0,), (0,), (), (2,)]))
    argtext = ", ".join([repr(v) for v in lead] + [repr(x)] + [f"{k}={v!r}" for k, v in args])
    label = (f"seed {seed}: {name}({argtext}) {variant}"
             + (f" out={out_dtype[0]}{list(out_dtype[1])}" if variant == "out" else "")
             + (" positional" if positional else ""))
    gseed = rng.randrange(1 << 30)
    try:
        runs = {lib: _run(lib, prog, fn, out_dtype) for lib in (torch, ember)}
        _compare(label, "call", runs[torch][1], runs[ember][1])
        (tok, _), _ = runs[torch][1]
        if tok and any(s.grad for s, _ in runs[torch][0]):
            _grads(label, runs, gseed)
    except Diverged as exc:
        return exc.args[0]
    return None


def _key(mismatch):
    head = mismatch[0].split(": ", 1)[1]
    return head.split("(")[0] + " " + head.rsplit(") ", 1)[-1].split(" ")[0] + " | " + \
        mismatch[1]


if __name__ == "__main__":
    from tests.parity._fuzz_cli import main
    main(run_program, key=_key, shown=3)
