"""The random programs of test_parity_scatter_fuzz_round37.py: one seeded call of the
gather / scatter family (gather, scatter with a src / value / reduce, scatter_add,
scatter_reduce, index_add / copy / fill / reduce / select, masked_fill / scatter / select,
take, take_along_dim, put) with random arguments, run in ember and torch side by side.

The self tensor has a random dtype (bool, uint8, int8..int64, 16-bit floats, float32/64,
complex), shape (0-d, empty dims, size 1) and layout (contiguous, transposed, stepped,
expanded); indices are int64 / int32 or of a wrong dtype, in range, negative or out of range,
duplicated only where the result is defined (reductions, or writes of equal values), smaller
or larger than self; a call is a function, a method or an in-place method, with arguments by
keyword or position and an out= of a right or wrong dtype and shape. Compared: the values,
dtype, shape, strides, requires_grad, node name, errors and warnings, and for float inputs
that need a gradient the gradient w.r.t. self and src (one leaf holds both), the double
backward, the forward-mode tangent and the error of a backward through a modified input.
"""

import random
import warnings

import numpy as np

import ember
from tests.parity._fft_fuzz_round36_gen import (SKIP, Diverged, _call, _grads, _modified,
                                                _tangents, _with_out, compare, compare_out,
                                                make_input)

try:
    import torch
except ImportError:     # the test module skips
    torch = None


_DTYPES = ["float64", "float64", "float64", "float32", "float32", "float16", "bfloat16",
           "int64", "int32", "int16", "int8", "uint8", "bool", "complex64", "complex128"]
_FLOAT = ("float64", "float32", "complex128", "complex64")
# Warnings PyTorch gives once per process (the deprecated reduce= of scatter, beta ops)
_ONCE_MESSAGES = (".*reduce argument of torch.scatter.*", ".*is in beta.*",
                  ".*index_reduce.*", ".*scatter_reduce.*")


# --- data ------------------------------------------------------------------------------------

def _shape(rng, nd=None):
    nd = rng.choice([0, 1, 1, 2, 2, 2, 3]) if nd is None else nd
    sizes = [rng.choice([1, 2, 3, 3, 4, 5]) for _ in range(nd)]
    if nd and rng.random() < 0.08:
        sizes[rng.randrange(nd)] = 0
    return tuple(sizes)


def _values(rng, npr, n, dtype):
    """n raw values for ``dtype``: small integers (ties, zeros) or normals, with NaN, inf and
    -0.0 now and then."""
    if dtype == "bool":
        return (npr.random(n) < 0.5).astype(np.float64)
    if dtype == "uint8":
        return npr.integers(0, 7, n).astype(np.float64)
    if dtype.startswith("int"):
        return npr.integers(-3, 4, n).astype(np.float64)
    a = npr.integers(-2, 3, n).astype(np.float64) if rng.random() < 0.3 else \
        np.round(npr.standard_normal(n), 3)
    if n and rng.random() < 0.12:
        a[npr.integers(0, n, 2)] = rng.choice([np.nan, np.inf, -np.inf, -0.0])
    if dtype.startswith("complex"):
        a = a + 1j * np.round(npr.standard_normal(n), 3)
    return a


def _need(shape, layout):
    n = int(np.prod(shape)) if shape else 1
    return 2 * n if layout == "stepped" else n // max(shape[0], 1) if layout == "expanded" \
        else n


def _layout(rng, shape, writable=True):
    options = ["contiguous", "contiguous", "contiguous"]
    if len(shape) >= 2:
        options.append("transposed")
    if len(shape) >= 1:
        options.append("stepped")
        if not writable or rng.random() < 0.2:
            options += ["expanded"] if shape[0] > 1 else []
    return rng.choice(options)


def _view(flat, offset, shape, layout):
    """The elements of 1-D ``flat`` from ``offset`` as a tensor of ``shape`` in ``layout``."""
    part = flat[offset:offset + _need(shape, layout)]
    if layout == "transposed":
        return part.reshape((shape[-1],) + shape[1:-1] + (shape[0],)).transpose(0, -1)
    if layout == "stepped":
        return part.reshape(shape[:-1] + (2 * shape[-1],))[..., ::2]
    if layout == "expanded":
        return part.reshape((1,) + shape[1:]).expand(shape)
    return part.reshape(shape)


class Role:
    """One tensor argument: its dtype, shape, layout and raw values; ``joined``: a part of
    the leaf (self's dtype, needing grad), else built fresh in each library."""

    def __init__(self, dtype, shape, layout, raw, joined=False):
        self.dtype, self.shape, self.layout, self.raw = dtype, shape, layout, raw
        self.joined, self.offset = joined, 0

    def __repr__(self):
        lay = "" if self.layout == "contiguous" else f" {self.layout}"
        return f"{self.dtype}{list(self.shape)}{lay}"

    def make(self, lib, leaf):
        if self.joined:
            return _view(leaf, self.offset, self.shape, self.layout)
        t = lib.tensor(self.raw).to(getattr(lib, self.dtype))
        return _view(t, 0, self.shape, self.layout)


def _role(rng, npr, dtype, shape, writable=True, layout=None):
    layout = layout or _layout(rng, shape, writable)
    return Role(dtype, shape, layout, _values(rng, npr, _need(shape, layout), dtype))


def _index_dtype(rng):
    r = rng.random()
    return "int64" if r < 0.78 else "int32" if r < 0.93 else \
        rng.choice(["float32", "uint8", "bool", "int16"])


def _spoil(rng, a, size, negative_ok=False):
    """Now and then an index out of range (or a negative one) in ``a`` (in place)."""
    if a.size and rng.random() < 0.08:
        a.flat[rng.randrange(a.size)] = rng.choice([-1, size, size + 2, -size - 1] +
                                                   ([-size] * 2 if negative_ok and size else []))
    return a


def _unique_along(npr, size, shape, dim):
    """Indices of ``shape`` in [0, size) distinct along ``dim`` (shape[dim] <= size)."""
    wide = list(shape)
    wide[dim] = size
    order = npr.random(wide).argsort(axis=dim)
    return np.take(order, np.arange(shape[dim]), axis=dim)


def _index_role(rng, raw, dtype=None):
    dtype = dtype or _index_dtype(rng)
    shape = raw.shape
    layout = "transposed" if len(shape) >= 2 and rng.random() < 0.15 else "contiguous"
    if layout == "transposed":
        raw = np.ascontiguousarray(np.swapaxes(raw, 0, -1))
    return Role(dtype, shape, layout, raw.reshape(-1).astype(np.float64))


# --- calls -----------------------------------------------------------------------------------

def _quiet(fn):
    with warnings.catch_warnings():
        for m in _ONCE_MESSAGES:
            warnings.filterwarnings("ignore", message=m)
        return fn()


def _caller(form, name, args):
    """``lib.name(s, ...)``, ``s.name(...)`` or ``s.name_(...)`` with ``args`` ((keyword or
    None, value) pairs) written out in the call, as a user writes it (ember reads how a call
    was made from its bytecode)."""
    written = ", ".join(f"a{i}" if k.startswith("@") else f"{k}=a{i}"
                        for i, (k, _) in enumerate(args))
    params = "".join(f", a{i}" for i in range(len(args)))
    sep = ", " if args else ""
    target = {"fn": f"lib.{name}(s{sep}", "method": f"s.{name}(",
              "inplace": f"s.{name}_("}[form]
    body = target + written
    plain = eval(f"lambda lib, s{params}: {body})")  # noqa: S307
    with_out = eval(f"lambda lib, s, out{params}: {body}{', ' if args or form == 'fn' else ''}"
                    "out=out)")  # noqa: S307
    values = [v for _, v in args]

    def call(lib, s, out=SKIP):
        vals = [v(lib) if callable(v) else v for v in values]
        if out is SKIP:
            res = _quiet(lambda: plain(lib, s, *vals))
        else:
            res = _quiet(lambda: with_out(lib, s, out, *vals))
        if form == "inplace" and res is not s:
            return res, "not self"
        return res
    return call


class Program:
    """A call and the tensors it reads: ``roles`` (self first), ``args`` the call's
    arguments, tensors among them given as callables of the library."""

    def __init__(self, rng, npr, self_role):
        self.rng, self.npr, self.me = rng, npr, self_role
        self.roles = [self_role]
        self.made = {}
        self.tangents = True

    def tensor(self, role):
        self.roles.append(role)

        def get(lib):
            return self.made[lib][role]
        get.role = role
        return get

    def arg(self, key, value, positional_ok=True, keyword_ok=True):
        rng = self.rng
        if not keyword_ok or positional_ok and rng.random() < 0.5:
            return "@" + key, value     # by position
        return key, value


def _dim(rng, nd):
    if rng.random() < 0.05:
        return rng.choice([max(nd, 1), -max(nd, 1) - 1, 1.5, "0", None])
    return rng.randrange(-max(nd, 1), max(nd, 1))


def _wrapped(d, nd):
    if not isinstance(d, int) or isinstance(d, bool) or not -max(nd, 1) <= d < max(nd, 1):
        return None
    return d % max(nd, 1)


def _along_index(rng, npr, me, dim, unique, larger=0.06):
    """An index for gather / scatter along ``dim``: self's ndim (now and then not), no larger
    than self apart from dim (now and then larger), distinct along dim when ``unique``."""
    shape = me.shape
    nd = len(shape)
    d = _wrapped(dim, nd)
    base = shape if nd else (1,)
    ishape = [rng.randint(min(1, n), n) if rng.random() < 0.7 else n for n in base]
    if d is not None and not unique:
        ishape[d] = rng.randint(0, base[d] + 2)
    if rng.random() < larger:
        ishape[rng.randrange(len(ishape))] += 1
    if unique and d is not None and len(ishape) > d:
        ishape[d] = min(ishape[d], base[d])
    if rng.random() < 0.05:
        ishape = ishape[:-1] if rng.random() < 0.5 else ishape + [1]
    if nd == 0 and rng.random() < 0.7:
        ishape = []
    size = base[d] if d is not None else 1
    if unique and d is not None and len(ishape) == len(base) and ishape[d] <= size:
        raw = _unique_along(npr, size, tuple(ishape), d)
    else:
        raw = npr.integers(0, max(size, 1), ishape)
    return _index_role(rng, _spoil(rng, raw, size))


def _src_role(rng, npr, prog, shape, grad_ok=True, equal=False):
    """A src of ``shape`` (self's dtype and part of the leaf mostly; another dtype now and
    then); ``equal``: all its values equal (written to duplicate places)."""
    me = prog.me
    dtype = me.dtype if rng.random() < 0.9 else rng.choice(_DTYPES)
    role = _role(rng, npr, dtype, tuple(shape), writable=False)
    if equal:
        role.raw[:] = role.raw[0] if role.raw.size else 0
    role.joined = grad_ok and dtype == me.dtype and me.joined and not equal
    return role


def _expands(shape, target):
    try:
        return np.broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        return False


def _value_role(rng, npr, prog, shape):
    """A tensor value to fill with: part of the leaf (a gradient) when of self's dtype."""
    role = _role(rng, npr, rng.choice([prog.me.dtype, "float64", "int64"]), shape)
    role.joined = prog.me.joined and role.dtype == prog.me.dtype
    return role


def _bigger(rng, shape):
    return tuple(n + (rng.random() < 0.3) for n in shape)


# --- the ops ---------------------------------------------------------------------------------

def _gather(rng, npr, prog, nd):
    dim = _dim(rng, nd)
    idx = prog.tensor(_along_index(rng, npr, prog.me, dim, unique=False))
    # (PyTorch's sparse gradient is another layout: only without grad)
    sparse = [("sparse_grad", rng.random() < 0.3 and not prog.me.joined)] \
        if rng.random() < 0.2 else []
    return [prog.arg("dim", dim), prog.arg("index", idx)] + sparse, True


def _scatter(rng, npr, prog, nd, name):
    dim = _dim(rng, nd)
    reduce = SKIP
    kind = rng.choice(["src", "src", "value", "reduce"]) if name == "scatter" else "src"
    if name == "scatter_reduce":
        reduce = rng.choice(["sum", "prod", "mean", "amax", "amin", "max"])
        # PyTorch's backward refuses the reduce="max" its forward takes: no gradient
        prog.me.joined = prog.me.joined and reduce != "max"
        # and its forward-mode prod drops the tangent (in place: refuses an undefined src)
        prog.tangents = reduce != "prod"
    elif kind == "reduce":
        reduce = rng.choice(["add", "multiply", "multiply", "mean"])
        kind = rng.choice(["src", "value"])
    dups = reduce is not SKIP or name == "scatter_add" or kind == "value"
    equal = not dups and rng.random() < 0.2
    iroleraw = _along_index(rng, npr, prog.me, dim, unique=not (dups or equal))
    idx = prog.tensor(iroleraw)
    args = [prog.arg("dim", dim), prog.arg("index", idx)]
    if kind == "value":
        value = rng.choice([1.5, 2, -1, True, 0.0, float("nan")])
        if rng.random() < 0.2:
            value = prog.tensor(Role(rng.choice(["float64", "int64", "float32"]), (),
                                     "contiguous", np.array([2.0])))
        args.append(prog.arg("value", value, positional_ok=False))
    else:
        shape = _bigger(rng, iroleraw.shape) if rng.random() < 0.4 else iroleraw.shape
        if rng.random() < 0.04:
            shape = shape[:-1]
        # PyTorch's gradient of a src larger than the index has the index's shape, which
        # its engine refuses
        grad_ok = _expands(shape, iroleraw.shape)
        src = prog.tensor(_src_role(rng, npr, prog, shape, grad_ok=grad_ok, equal=equal))
        if rng.random() < 0.03:       # (the value overload, by position)
            args = [("@dim", dim), ("@index", idx), ("@src", rng.choice([1.5, 2]))]
        else:
            args.append(prog.arg("src", src))
    if reduce is not SKIP:
        args.append(prog.arg("reduce", reduce, positional_ok=name == "scatter_reduce",
                             keyword_ok=True))
    if name == "scatter_reduce" and rng.random() < 0.6:
        args.append(("include_self", rng.random() < 0.5))
    return args, True


def _slice_index(rng, npr, size, unique, negative_ok=False):
    n = rng.choice([0, 1, 2, 3, size, size + 1]) if not unique else rng.randint(0, size)
    if rng.random() < 0.1:
        raw = np.array(rng.randrange(max(size, 1)))     # a 0-d index
    elif unique:
        raw = npr.permutation(size)[:n]
    else:
        raw = npr.integers(0, max(size, 1), n)
    if rng.random() < 0.04:
        raw = raw.reshape(1, -1)
    return _index_role(rng, _spoil(rng, raw, size, negative_ok))


def _index_op(rng, npr, prog, nd, name):
    """index_add / index_copy / index_reduce / index_fill / index_select."""
    me = prog.me
    dim = _dim(rng, nd)
    d = _wrapped(dim, nd)
    size = (me.shape[d] if nd else 1) if d is not None else 1
    equal = name == "index_copy" and rng.random() < 0.3
    unique = name == "index_copy" and not equal
    irole = _slice_index(rng, npr, size, unique)
    idx = prog.tensor(irole)
    args = [prog.arg("dim", dim), prog.arg("index", idx)]
    if name == "index_fill":
        value = rng.choice([1.5, 2, -1, True, float("inf")])
        if rng.random() < 0.3:
            value = prog.tensor(_value_role(rng, npr, prog, rng.choice([(), (), (1,)])))
        args.append(prog.arg("value", value))
        return args, True
    if name == "index_select":
        return args, True
    k = irole.raw.size if len(irole.shape) <= 1 else irole.shape[-1]
    sshape = list(me.shape) if nd else []
    if d is not None and nd:
        sshape[d] = k
    if rng.random() < 0.05:
        sshape = sshape + [1] if rng.random() < 0.5 else [n + 1 for n in sshape]
    src = prog.tensor(_src_role(rng, npr, prog, sshape, equal=equal))
    args.append(prog.arg("source", src))
    if name == "index_add" and rng.random() < 0.4:
        args.append(("alpha", rng.choice([2, -1, 0.5, 1, True])))
    if name == "index_reduce":
        args.append(prog.arg("reduce", rng.choice(["prod", "mean", "amax", "amin", "sum"])))
        if rng.random() < 0.6:
            args.append(("include_self", rng.random() < 0.5))
    return args, True


def _mask_role(rng, npr, shape):
    """A mask broadcastable to ``shape`` (now and then not, or of a wrong dtype)."""
    mshape = list(shape)
    for i in range(len(mshape)):
        if rng.random() < 0.25:
            mshape[i] = 1
    while mshape and rng.random() < 0.2:
        mshape = mshape[1:]
    if rng.random() < 0.1:
        mshape = [1] + mshape
    if rng.random() < 0.04:
        mshape = [n + 1 for n in mshape] or [2]
    dtype = "bool" if rng.random() < 0.93 else rng.choice(["uint8", "int64", "float32"])
    return _role(rng, npr, dtype, tuple(mshape), writable=False)


def _masked(rng, npr, prog, nd, name):
    mrole = _mask_role(rng, npr, prog.me.shape)
    mask = prog.tensor(mrole)
    args = [prog.arg("mask", mask)]
    if name == "masked_fill":
        value = rng.choice([1.5, 2, -1, True, float("nan"), 0])
        if rng.random() < 0.3:
            value = prog.tensor(_value_role(rng, npr, prog, rng.choice([(), (), (1,), (2,)])))
        args.append(prog.arg("value", value))
    elif name == "masked_scatter":
        n = int(np.prod(np.broadcast_shapes(prog.me.shape, mrole.shape))) \
            if _broadcasts(prog.me.shape, mrole.shape) else 4
        shape = rng.choice([(n,), (n + 1,), (max(n - 1, 0),), prog.me.shape, (n, 1)])
        args.append(prog.arg("source", prog.tensor(_src_role(rng, npr, prog, shape))))
    return args, name != "masked_scatter"


def _broadcasts(a, b):
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


def _flat_index(rng, npr, prog, name):
    """take / put: positions in the flattened self, negatives counting from the end."""
    numel = int(np.prod(prog.me.shape)) if prog.me.shape else 1
    accumulate = name == "put" and rng.random() < 0.5
    shape = _shape(rng, rng.choice([0, 1, 1, 2]))
    count = int(np.prod(shape)) if shape else 1
    equal = False
    if name == "put" and not accumulate and count <= numel and rng.random() < 0.7:
        raw = npr.permutation(numel)[:count].reshape(shape)
    else:
        raw = npr.integers(0, max(numel, 1), shape)
        equal = name == "put" and not accumulate
    raw = np.where(npr.random(raw.shape) < 0.3, raw - numel, raw) if numel else raw
    idx = prog.tensor(_index_role(rng, _spoil(rng, raw, numel, negative_ok=True)))
    args = [prog.arg("index", idx)]
    if name == "put":
        sshape = shape if rng.random() < 0.8 else rng.choice([(count,), (count + 1,),
                                                               (max(count - 1, 0),)])
        args.append(prog.arg("source", prog.tensor(_src_role(rng, npr, prog, sshape,
                                                             equal=equal))))
        if accumulate or rng.random() < 0.3:
            args.append(prog.arg("accumulate", accumulate))
    return args, True


def _take_along(rng, npr, prog, nd):
    me = prog.me
    if rng.random() < 0.3:
        numel = int(np.prod(me.shape)) if me.shape else 1
        raw = npr.integers(0, max(numel, 1), rng.choice([(), (2,), (numel,), (2, 2)]))
        return [prog.arg("indices", prog.tensor(_index_role(rng, _spoil(rng, raw, numel))))], \
            True
    dim = _dim(rng, nd)
    d = _wrapped(dim, nd)
    base = list(me.shape) or [1]
    ishape = [rng.choice([n, n, 1]) for n in base]     # broadcasts against self
    size = base[d] if d is not None else 1
    if d is not None:
        ishape[d] = rng.randint(0, size + 1)
    if nd == 0 and rng.random() < 0.5:
        ishape = []
    # (PyTorch wraps indices past the end modulo the size: only negative ones here)
    raw = npr.integers(0, max(size, 1), ishape)
    raw = np.where(npr.random(raw.shape) < 0.3, raw - size, raw)
    idx = prog.tensor(_index_role(rng, raw))
    return [prog.arg("indices", idx), prog.arg("dim", dim)], True


_OPS = {
    "gather": (6, ("fn", "method"), True),
    "scatter": (8, ("fn", "method", "inplace"), True),
    "scatter_add": (5, ("fn", "method", "inplace"), True),
    "scatter_reduce": (8, ("fn", "method", "inplace"), True),
    "index_add": (5, ("fn", "method", "inplace"), True),
    "index_copy": (4, ("fn", "method", "inplace"), True),
    "index_fill": (4, ("fn", "method", "inplace"), False),
    "index_reduce": (6, ("fn", "method", "inplace"), True),
    "index_select": (4, ("fn", "method"), True),
    "masked_fill": (5, ("fn", "method", "inplace"), False),
    "masked_scatter": (4, ("fn", "method", "inplace"), False),
    "masked_select": (4, ("fn", "method"), True),
    "take": (4, ("fn", "method"), True),
    "take_along_dim": (5, ("fn", "method"), True),
    "put": (5, ("fn", "method", "inplace"), False),
}


def _pick_op(rng):
    names = list(_OPS)
    name = rng.choices(names, weights=[_OPS[n][0] for n in names])[0]
    return name, rng.choice(_OPS[name][1])


def _build(rng, npr, prog, name):
    nd = len(prog.me.shape)
    if name == "gather":
        return _gather(rng, npr, prog, nd)
    if name.startswith("scatter"):
        return _scatter(rng, npr, prog, nd, name)
    if name.startswith("index_"):
        return _index_op(rng, npr, prog, nd, name)
    if name.startswith("masked_"):
        return _masked(rng, npr, prog, nd, name)
    if name in ("take", "put"):
        return _flat_index(rng, npr, prog, name)
    return _take_along(rng, npr, prog, nd)


# --- running ---------------------------------------------------------------------------------

def _program(seed):
    rng = random.Random(seed)
    npr = np.random.default_rng(seed)
    name, form = _pick_op(rng)
    dtype = rng.choice(_DTYPES)
    shape = _shape(rng)
    writes = form == "inplace"
    me = _role(rng, npr, dtype, shape, writable=not writes or rng.random() < 0.1)
    me.joined = dtype in _FLOAT and rng.random() < 0.6
    prog = Program(rng, npr, me)
    args, has_out = _build(rng, npr, prog, name)
    if rng.random() < 0.03 and args:      # an argument of a wrong type
        k = rng.randrange(len(args))
        args[k] = (args[k][0], rng.choice([1.5, "a", [0, 1], None, (1,)]))
        args[0] = ("@" + args[0][0].lstrip("@"), args[0][1])   # (all by keyword: another order)
    keyword = False
    for k, (key, v) in enumerate(args):     # no position after a keyword
        keyword = keyword or not key.startswith("@")
        args[k] = (key.lstrip("@") if keyword else key, v)
    joined = [r for r in prog.roles if r.joined]
    offset = 0
    for r in joined:
        r.offset = offset
        offset += r.raw.size
    raw = np.concatenate([r.raw for r in joined]) if joined else np.zeros(0)
    spec = (dtype, (raw.size,), "contiguous", raw, bool(joined))
    # In place on a view of the leaf is an error; mostly work on a copy
    copy_first = writes and (bool(joined) and rng.random() < 0.9 or rng.random() < 0.5)
    call = _caller(form, name, args)

    def fn(lib, leaf, out=SKIP):
        made = prog.made.setdefault(lib, {})
        for r in prog.roles:
            made[r] = r.make(lib, leaf)
        s = made[me]
        if copy_first:
            s = s.clone() if me.layout != "expanded" else s * 1
        return call(lib, s, out)
    form_label = {"fn": f"{name}(self, ", "method": f"self.{name}(",
                  "inplace": f"self.{name}_("}[form]
    shown = ", ".join(("" if k.startswith("@") else f"{k}=") + _show(v) for k, v in args)
    label = f"{me} grad={bool(joined)}: {form_label}{shown})"
    use_out = has_out and _OPS[name][2] and form == "fn" and rng.random() < 0.25
    return spec, fn, label, use_out, rng, prog.tangents


def _show(v):
    return repr(v.role) if callable(v) else repr(v)


def run_program(seed):
    """One random call; None when both agree, else (label, what, torch's, ember's)."""
    spec, fn, label, use_out, rng, tangents = _program(seed)
    oseed, gseed = rng.random(), rng.randrange(1 << 30)
    try:
        res = {}
        for lib in (torch, ember):
            leaf = make_input(lib, spec)[0]
            res[lib] = (leaf, _call(fn, lib, leaf))
        compare(label, res[torch][1], res[ember][1])
        _strides(label, res[torch][1], res[ember][1])
        (tok, tval), _ = res[torch][1]
        if tok and spec[4]:
            _grads(label, res, gseed)
            if spec[0] in ("float64", "complex128") and isinstance(tval, torch.Tensor):
                if tangents:
                    _tangents(label, spec, fn, gseed)
                if tval.requires_grad and rng.random() < 0.3:
                    _modified(label, spec, fn, gseed)
        if use_out and tok and isinstance(tval, torch.Tensor):
            olabel, ofn = _with_out(random.Random(oseed), fn, tval)
            compare_out(f"{label} {olabel}", ofn, lambda lib: make_input(lib, spec)[0].detach())
    except Diverged as exc:
        return exc.args[0]
    return None


def _strides(label, tres, eres):
    (tok, tval), _ = tres
    (_, evl), _ = eres
    if tok and isinstance(tval, torch.Tensor) and tval.numel() > 1:
        if tval.stride() != evl.stride():
            raise Diverged((label, "strides", tval.stride(), evl.stride()))


if __name__ == "__main__":
    from tests.parity._fuzz_cli import main
    main(run_program, shown=3)
