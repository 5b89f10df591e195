"""The random programs of test_parity_dunders_fuzz_round37.py: one seeded use of the Python
protocol of Tensor, run in ember and torch side by side.

An input has a random dtype (bool, uint8, int8..int64, float16, bfloat16, float32, float64,
complex), shape (0-d, empty dims, size 1), layout (contiguous, transposed, stepped, expanded)
and values (NaN, inf, -0.0 among floats). A probe is a binary dunder (arithmetic, comparison,
bitwise, matmul; plain, reflected or in place) against a Python number (huge ints too), a
NumPy scalar or array on either side, a list, None, a string or another tensor; a unary dunder;
a conversion (bool/int/float/complex/index, len, iter, contains, hash, format, reversed); a
round trip (pickle, deepcopy, DLPack, numpy, tolist, item); or a property (ndim, T, mT, H, mH,
is_leaf, itemsize, nbytes, stride(dim), data_ptr of views, is_contiguous(memory_format),
is_set_to, is_same_size, dim_order). Compared: the values (type, dtype, shape, value),
requires_grad and node names, errors (type and first line of the message), warnings, and for
float64 inputs needing grad the gradient of a backward.
"""

import copy
import math
import operator
import pickle
import random

import numpy as np

import ember
from tests.parity._compare import dtype_name
from tests.parity._fft_fuzz_round36_gen import (Diverged, _node, _np_values, _same, _tensors,
                                                run_both)
from tests.parity._fft_fuzz_round36_gen import _call as base_call
from tests.parity._fft_fuzz_round36_gen import compare as base_compare

try:
    import torch
except ImportError:     # the test module skips
    torch = None


def _msg(text):
    text = str(text).replace("ember.", "torch.").replace("ember", "torch").split("\n")[0]
    text = text.replace("ComplexHalf", "ComplexFloat")     # (see _dtype_name)
    return text.split(" (Triggered internally")[0]


# PyTorch warns of these once per process (ember too, but each test may run first); and
# NumPy 2's deprecation of PyTorch's __array_wrap__ signature (ember's takes the arguments)
_ONCE = ("The use of `x.T`", "is deprecated on 0-D tensors", "__array_wrap__ must accept",
         "ComplexHalf support is experimental",
         "Converting a tensor with requires_grad=True to a scalar")


def _call(fn, *args):
    """The FFT fuzzer's ``_call`` with this fuzzer's messages and once-warnings."""
    return base_call(fn, *args, msg=_msg, once=_ONCE, width=70)


_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "int64", "float16", "bfloat16",
           "float32", "float32", "float64", "float64", "float64", "complex64", "complex128"]
_TOL = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-5, "complex64": 1e-5}


# --- inputs ----------------------------------------------------------------------------------

def _shape(rng):
    nd = rng.choice([0, 0, 1, 1, 1, 2, 2, 2, 3])
    sizes = [rng.choice([1, 1, 2, 3, 4]) for _ in range(nd)]
    if nd and rng.random() < 0.1:
        sizes[rng.randrange(nd)] = 0
    return tuple(sizes)


def _raw(npr, shape, dtype):
    if dtype == "bool":
        return npr.random(shape) < 0.5
    if dtype == "uint8":
        return npr.integers(0, 6, shape).astype(np.uint8)
    if dtype.startswith("int"):
        return npr.integers(-4, 5, shape).astype(np.int64)
    a = npr.choice([-2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 2.0, 3.0, 1.5, np.nan, np.inf, -np.inf],
                   shape, p=[.1, .1, .05, .1, .1, .15, .1, .1, .1, .03, .04, .03])
    if dtype.startswith("complex"):
        a = a + 1j * npr.choice([0.0, 1.0, -2.0, 0.5], shape)
    return np.asarray(a)


def _fresh(a):
    """``a`` in a row-major array of its own (NumPy keeps odd strides of size-1 dims, which
    PyTorch's ``tensor`` copies and ember's does not: a creation detail, not compared)."""
    out = np.empty(a.shape, a.dtype)
    out[...] = a
    return out


def make_input(lib, spec):
    """(leaf, the tensor the probe sees) for ``spec`` in ``lib``."""
    dtype, shape, layout, raw, grad = spec
    dt = getattr(lib, dtype)
    if layout == "transposed" and len(shape) >= 2:
        leaf = lib.tensor(_fresh(np.swapaxes(raw, 0, -1))).to(dt)
        leaf.requires_grad_(grad)
        return leaf, leaf.transpose(0, -1)
    if layout == "stepped" and len(shape) >= 1:
        leaf = lib.tensor(np.repeat(raw, 2, axis=-1)).to(dt).requires_grad_(grad)
        return leaf, leaf[..., ::2]
    if layout == "expanded" and len(shape) >= 1:
        leaf = lib.tensor(_fresh(raw[..., :1])).to(dt).requires_grad_(grad)
        return leaf, leaf.expand(*shape)
    leaf = lib.tensor(raw).to(dt).requires_grad_(grad)
    return leaf, leaf


def _spec(rng, npr, dtype=None, shape=None):
    dtype = dtype or rng.choice(_DTYPES)
    shape = _shape(rng) if shape is None else shape
    layout = rng.choice(["contiguous", "contiguous", "contiguous", "transposed", "stepped",
                         "expanded"])
    grad = dtype in ("float64", "float32", "complex128") and rng.random() < 0.35
    return dtype, shape, layout, _raw(npr, shape, dtype), grad


# --- the other operand -----------------------------------------------------------------------

def _other(rng, npr, spec):
    """A description of the other operand and a builder ``lib -> operand``."""
    r = rng.random()
    if r < 0.3:
        v = rng.choice([True, False, 0, 1, 2, -3, 7, 2.5, -0.5, 0.0, float("nan"), float("inf"),
                        1j, 2 + 1j, 2 ** 63, -(2 ** 63) - 1, 2 ** 70, 300, -129])
        return repr(v), lambda lib: v
    if r < 0.42:
        kind = rng.choice(["float64", "float32", "int8", "int64", "bool_", "complex64",
                           "uint8", "float16"])
        v = getattr(np, kind)(rng.choice([2, 1, 0, 3]))
        return f"np.{kind}({v})", lambda lib: v
    if r < 0.48:
        shape = rng.choice([spec[1], (), (1,), (2,)])
        a = np.asarray(npr.integers(-2, 3, shape)).astype(rng.choice(["float64", "int64",
                                                                      "float32"]))
        return f"ndarray{list(shape)}:{a.dtype}", lambda lib: a.copy()
    if r < 0.53:
        v = rng.choice([[1, 2], (1.0,), None, "a", [1.5], object()])
        return type(v).__name__, lambda lib: v
    dtype = rng.choice(_DTYPES)
    shape = spec[1]
    s = rng.random()
    if s < 0.3:
        shape = ()
    elif s < 0.4 and shape:
        shape = shape[1:]
    elif s < 0.45:
        shape = (3,) + shape
    elif s < 0.5 and len(shape) >= 2:
        shape = shape[::-1]
    ospec = _spec(rng, npr, dtype, shape)
    return f"tensor:{dtype}{list(shape)}:{ospec[2]}:g={ospec[4]}", \
        lambda lib: make_input(lib, ospec)[1]


# --- probes ----------------------------------------------------------------------------------

_BIN = ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
        "lshift", "rshift", "eq", "ne", "lt", "le", "gt", "ge", "matmul"]
_NO_REFLECT = {"eq", "ne", "lt", "le", "gt", "ge"}


def _binary(rng, npr, spec):
    name = rng.choice(_BIN)
    desc, other = _other(rng, npr, spec)
    form = rng.choice(["plain", "plain", "reflected", "inplace", "dunder"])
    if name in _NO_REFLECT and form in ("reflected", "inplace"):
        form = "plain"
    if form == "dunder":        # a direct call: NotImplemented shows
        def fn(lib, x):
            return getattr(x, f"__{name}__")(other(lib))
    elif form == "inplace":
        iop = getattr(operator, f"i{name}")

        def fn(lib, x):
            y = x.clone() if x.requires_grad else x
            res = iop(y, other(lib))
            return res, res is y
    else:
        op = getattr(operator, name if name not in ("and", "or") else f"{name}_")
        if form == "reflected":
            def fn(lib, x):
                return op(other(lib), x)
        else:
            def fn(lib, x):
                return op(x, other(lib))
    return f"{form} {name} {desc}", fn


def _divmod(rng, npr, spec):
    desc, other = _other(rng, npr, spec)
    if rng.random() < 0.5:
        return f"divmod(x, {desc})", lambda lib, x: divmod(x, other(lib))
    return f"divmod({desc}, x)", lambda lib, x: divmod(other(lib), x)


def _unary(rng, npr, spec):
    name = rng.choice(["neg", "pos", "abs", "invert"])
    return name, lambda lib, x: getattr(operator, name)(x)


_FORMATS = ["", ".2f", "e", ">10", "d", "g", "+.3", "x", ".1%", "s", "10.4f"]


def _convert(rng, npr, spec):
    name = rng.choice(["bool", "int", "float", "complex", "index", "len", "iter", "contains",
                       "hash", "format", "reversed", "item", "tolist", "repr_len"])
    if name == "bool":
        return name, lambda lib, x: bool(x)
    if name == "int":
        return name, lambda lib, x: int(x)
    if name == "float":
        return name, lambda lib, x: float(x)
    if name == "complex":
        return name, lambda lib, x: complex(x)
    if name == "index":
        return name, lambda lib, x: operator.index(x)
    if name == "len":
        return name, lambda lib, x: len(x)
    if name == "iter":
        def it(lib, x):
            parts = list(iter(x))
            return parts, [p.data_ptr() == x.data_ptr() + i * x.stride(0) * x.element_size()
                           for i, p in enumerate(parts)]
        return name, it
    if name == "contains":
        desc, other = _other(rng, npr, spec)
        return f"contains {desc}", lambda lib, x: other(lib) in x
    if name == "hash":
        return name, lambda lib, x: hash(x) == id(x)
    if name == "format":
        f = rng.choice(_FORMATS)
        return f"format {f!r}", lambda lib, x: format(x, f) if spec[1] == () else \
            (format(x, f) == repr(x))
    if name == "reversed":
        return name, lambda lib, x: reversed(x)
    if name == "item":
        return name, lambda lib, x: x.item()
    if name == "tolist":
        return name, lambda lib, x: x.tolist()
    return name, lambda lib, x: x.__repr__().count("\n")


def _pickled(lib, x):
    x2 = x.view(x.shape)        # a view over the leaf's storage
    back, back2 = pickle.loads(pickle.dumps((x, x2)))
    # (the views' shared memory is not compared: PyTorch's plain pickle gives each its own)
    return back, back2, _strides(back), back.storage_offset(), back.is_leaf


def _strides(x):
    # (an empty tensor's strides are its maker's accident: PyTorch's copies keep a 0)
    return x.stride() if x.numel() else None


def _roundtrip(rng, npr, spec):
    name = rng.choice(["pickle", "deepcopy", "deepcopy_nonleaf", "dlpack", "numpy",
                       "numpy_force", "array", "array_dtype", "setstate", "reduce_ex",
                       "getstate", "setstate_legacy"])
    if name == "getstate":
        return name, lambda lib, x: x.__getstate__()
    if name == "setstate_legacy":
        def legacy(lib, x):
            y = x.detach().clone()
            y.__setstate__((True, None, None))
            return y.requires_grad, y._backward_hooks
        return name, legacy
    if name == "pickle":
        return name, _pickled
    if name == "deepcopy":
        return name, lambda lib, x: (copy.deepcopy(x), _strides(copy.deepcopy(x)))
    if name == "deepcopy_nonleaf":
        return name, lambda lib, x: copy.deepcopy(x * 2)
    if name == "dlpack":
        def dl(lib, x):
            y = lib.from_dlpack(x)
            return y, y.data_ptr() == x.data_ptr(), y.stride()
        return name, dl
    if name == "numpy":
        return name, lambda lib, x: x.numpy()
    if name == "numpy_force":
        return name, lambda lib, x: x.numpy(force=True)
    if name == "array":
        return name, lambda lib, x: np.asarray(x)
    if name == "array_dtype":
        return name, lambda lib, x: np.asarray(x, dtype=np.float64)
    if name == "setstate":
        def st(lib, x):
            y = x * 1
            y.__setstate__({"tag": 1})
            return y.tag
        return name, st
    return name, lambda lib, x: type(x.__reduce_ex__(2)).__name__


def _property(rng, npr, spec):
    name = rng.choice(["ndim", "T", "mT", "H", "mH", "is_leaf", "itemsize", "nbytes",
                       "element_size", "shape", "stride", "storage_offset", "data_ptr",
                       "contiguous_cl", "is_set_to", "is_same_size", "dim_order",
                       "dim_order_amb"])
    nd = len(spec[1])
    if name in ("ndim", "T", "mT", "H", "mH", "is_leaf", "itemsize", "nbytes"):
        return name, lambda lib, x: getattr(x, name)
    if name == "element_size":
        return name, lambda lib, x: x.element_size()
    if name == "shape":
        return name, lambda lib, x: (tuple(x.shape), x.shape == x.size(), type(x.shape).__name__)
    if name == "stride":
        d = rng.randrange(-nd - 1, nd + 1)
        return f"stride({d})", lambda lib, x: x.stride(d)
    if name == "storage_offset":
        return name, lambda lib, x: x[..., 1:].storage_offset() if nd else x.storage_offset()
    if name == "data_ptr":
        return name, lambda lib, x: (x.view(-1).data_ptr() == x.data_ptr()
                                     if x.is_contiguous() else x.data_ptr() != 0)
    if name == "contiguous_cl":
        fmt = rng.choice(["channels_last", "channels_last_3d", "contiguous_format",
                          "preserve_format"])
        return f"is_contiguous({fmt})", \
            lambda lib, x: x.is_contiguous(memory_format=getattr(lib, fmt))
    if name == "is_set_to":
        return name, lambda lib, x: (x.is_set_to(x), x.is_set_to(x.detach()),
                                     x.is_set_to(x.clone()))
    if name == "is_same_size":
        desc, other = _other(rng, npr, spec)
        return f"is_same_size {desc}", lambda lib, x: x.is_same_size(other(lib))
    if name == "dim_order_amb":
        return name, lambda lib, x: x.dim_order(ambiguity_check=True)
    return name, lambda lib, x: x.dim_order()


def _builtin(rng, npr, spec):
    """Python's and NumPy's functions that go through the protocol: round/math on a tensor,
    copy.copy, builtins that iterate, NumPy ufuncs and array conversions."""
    name = rng.choice(["round", "round_n", "floor", "ceil", "trunc", "copy", "sum", "max",
                       "sorted", "np_sin", "np_add", "np_array_nocopy", "array_priority",
                       "abs_builtin", "pow3"])
    if name == "round":
        return name, lambda lib, x: round(x)
    if name == "round_n":
        n = rng.choice([0, 1, 2, -1])
        return f"round(x, {n})", lambda lib, x: round(x, n)
    if name in ("floor", "ceil", "trunc"):
        return name, lambda lib, x: getattr(math, name)(x)
    if name == "copy":
        return name, lambda lib, x: (copy.copy(x), copy.copy(x).data_ptr() == x.data_ptr())
    if name in ("sum", "max", "sorted"):
        return name, lambda lib, x: {"sum": sum, "max": max, "sorted": sorted}[name](x)
    if name == "np_sin":
        return name, lambda lib, x: np.sin(x)
    if name == "np_add":
        return name, lambda lib, x: np.add(x, 1)
    if name == "np_array_nocopy":
        return name, lambda lib, x: np.array(x, copy=False)
    if name == "array_priority":
        return name, lambda lib, x: x.__array_priority__
    if name == "abs_builtin":
        return name, lambda lib, x: abs(x)
    return name, lambda lib, x: pow(x, 3)


def _op(rng, npr, spec):
    r = rng.random()
    if r < 0.08:
        return _builtin(rng, npr, spec)
    if r < 0.5:
        return _binary(rng, npr, spec)
    if r < 0.53:
        return _divmod(rng, npr, spec)
    if r < 0.6:
        return _unary(rng, npr, spec)
    if r < 0.77:
        return _convert(rng, npr, spec)
    if r < 0.88:
        return _roundtrip(rng, npr, spec)
    return _property(rng, npr, spec)


# --- comparing -------------------------------------------------------------------------------

def _dtype_name(dtype):
    # ember has no complex32: float16 with a complex number gives complex64 there
    return dtype_name(dtype).replace("complex32", "complex64")


def _describe(lib, out):
    if isinstance(out, lib.Tensor):
        return ("T", tuple(out.shape), _dtype_name(out.dtype), out.requires_grad,
                _node(out), out.is_leaf)
    if isinstance(out, (tuple, list)):
        return (type(out).__name__, tuple(_describe(lib, o) for o in out))
    if isinstance(out, np.ndarray):
        return ("nd", out.dtype.str, out.shape, tuple(map(repr, out.ravel().tolist())))
    if isinstance(out, lib.Size):
        return ("Size", tuple(out))
    if isinstance(out, (float, complex)) and out != out:
        return (type(out).__name__, "nan")
    if isinstance(out, (bool, int, float, complex, str, type(None))):
        return (type(out).__name__, out)
    if out is NotImplemented:
        return ("NotImplemented",)
    name = type(out).__name__
    return ("py", name.replace("ember", "torch"))


def _values(lib, x):
    if x.dtype == lib.bool:
        return _np_values(lib, x.to(lib.uint8)).astype(bool)
    return _np_values(lib, x)


def compare(label, tres, eres):
    """The FFT fuzzer's comparison, with this fuzzer's descriptions and tolerances."""
    base_compare(label, tres, eres, describe=_describe, values=_values,
                 tol=lambda dtype: _TOL.get(_dtype_name(dtype), 1e-7))


def _grads(label, res, gseed):
    got = {}
    for lib in (torch, ember):
        leaf, ((_, out), _) = res[lib]
        outs = [o for o in _tensors(lib, out) if o.requires_grad and o.is_floating_point()]

        def backward(lib=lib, outs=outs, leaf=leaf):
            if not outs:
                return None
            npr = np.random.default_rng(gseed)
            loss = sum((o * lib.tensor(npr.standard_normal(tuple(o.shape))).to(o.dtype)).sum()
                       for o in outs)
            g, = lib.autograd.grad(loss, leaf, allow_unused=True)
            return None if g is None else _values(lib, g)
        got[lib] = _call(backward)
    (tok, tg), _ = got[torch]
    (eok, eg), _ = got[ember]
    if tok != eok or (not tok and tg != eg):
        raise Diverged((label, "backward error", tg, eg))
    if tok and ((tg is None) != (eg is None) or tg is not None and not _same(tg, eg, 1e-5)):
        raise Diverged((label, "grad", tg, eg))


def run_program(seed):
    """One random probe; None when both agree, else (label, what, torch's, ember's)."""
    rng = random.Random(seed)
    npr = np.random.default_rng(seed)
    spec = _spec(rng, npr)
    label, fn = _op(rng, npr, spec)
    label = f"{spec[0]}{list(spec[1])} {spec[2]} grad={spec[4]}: {label}"
    gseed = rng.randrange(1 << 30)
    try:
        res = run_both(fn, spec, make_input, _call)
        compare(label, res[torch][1], res[ember][1])
        (tok, _), _ = res[torch][1]
        if tok and spec[4]:
            _grads(label, res, gseed)
    except Diverged as exc:
        return exc.args[0]
    return None


def _key(mismatch):
    parts = mismatch[0].split(": ", 1)[1].split(" ")
    return " ".join(parts[:2]) + " | " + mismatch[1]


if __name__ == "__main__":
    from tests.parity._fuzz_cli import main
    main(run_program, key=_key, shown=3)
