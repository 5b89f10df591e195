"""The random programs of test_parity_shape_ops_fuzz_round37.py: one seeded call of an op that
builds a new tensor from pieces (cat / stack families, splits, tile / repeat, roll / flip /
rot90, tril / triu, the diag family and the scatters, block_diag, cartesian_prod,
combinations, meshgrid, atleast_*d, broadcasting, kron, cross, trace, vander, tril_indices),
run in ember and torch side by side.

Inputs have a random dtype (bool, uint8, int8..int64, float16, bfloat16, float32, float64,
complex), shape (0-d, empty and size-1 dims), layout (contiguous, transposed, stepped,
expanded, a conj view) and special values (NaN, inf, -0.0); arguments are drawn in and out of
range, of wrong types, by keyword or position. Compared: values, dtype, shape, strides (of the
dims longer than 1), requires_grad, node names, errors, warnings, out=, and for inputs needing
a gradient the gradient, the double-backward gradient and (float64) forward-mode tangents.
"""

import random

import numpy as np

import ember
from tests.parity._fft_fuzz_round36_gen import (SKIP, Diverged, _call, _np_values, _same,
                                                _tensors, _with_out, compare, compare_out,
                                                make_input)

try:
    import torch
except ImportError:     # the test module skips
    torch = None

# once-per-process warnings (PyTorch's TORCH_WARN_ONCE): order-dependent, not compared
_ONCE = ("torch.meshgrid: in an upcoming release", "Using torch.cross without specifying",
         "Using linalg.cross without")

_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "int64", "float16", "bfloat16",
           "float32", "float32", "float64", "float64", "float64", "complex64", "complex128"]
_GRADABLE = ("float32", "float64", "complex64", "complex128")


# --- inputs ----------------------------------------------------------------------------------

def _sizes(rng, nd=None, zero=0.08):
    nd = rng.choice([0, 1, 1, 2, 2, 2, 3, 3]) if nd is None else nd
    sizes = [rng.choice([1, 2, 2, 3, 3, 4, 5]) for _ in range(nd)]
    if nd and rng.random() < zero:
        sizes[rng.randrange(nd)] = 0
    return sizes


def _raw(rng, npr, shape, dtype):
    if dtype == "bool":
        return npr.random(shape) < 0.5
    if dtype == "uint8":
        return npr.integers(0, 7, shape).astype(np.float64)
    if dtype.startswith("int"):
        return npr.integers(-4, 5, shape).astype(np.float64)
    a = np.round(npr.standard_normal(shape) * 4) / 4
    if dtype.startswith("complex"):
        a = a + 1j * np.round(npr.standard_normal(shape) * 4) / 4
    if a.size and rng.random() < 0.15:
        flat = a.reshape(-1)
        flat[rng.randrange(flat.size)] = rng.choice([np.nan, np.inf, -np.inf, -0.0])
    return a


def spec(rng, npr, shape, dtype=None, grad_p=0.6):
    """An input's description: (dtype, shape, layout, values, needs grad)."""
    dtype = dtype or rng.choice(_DTYPES)
    layout = rng.choice(["contiguous"] * 4 + ["transposed", "stepped", "expanded", "conj"])
    grad = dtype in _GRADABLE and rng.random() < grad_p
    return dtype, tuple(shape), layout, _raw(rng, npr, tuple(shape), dtype), grad


def make(lib, sp):
    """(leaf, the input as the program sees it) in ``lib``."""
    dtype, shape, layout, raw, grad = sp
    if layout == "expanded" and shape:
        leaf = lib.tensor(raw[:1]).to(getattr(lib, dtype)).requires_grad_(grad)
        return leaf, leaf.expand(*shape)
    return make_input(lib, sp)


# --- programs --------------------------------------------------------------------------------

class Lib:
    """An argument built per library (a tensor, a dtype), shown as ``text``."""

    def __init__(self, build, text):
        self.build, self.text = build, text

    def __repr__(self):
        return self.text


def tensor_arg(values, dtype="int64"):
    return Lib(lambda lib: lib.tensor(values, dtype=getattr(lib, dtype)),
               f"tensor({values}, {dtype})")


def dtype_arg(name):
    return Lib(lambda lib: getattr(lib, name), name)


def program(name, expr, vals, outable=False):
    """(name, label, call): ``expr`` reads ``lib``, ``xs`` (the inputs) and ``a0``.. (the
    values), with ``{out}`` where an out= argument goes; the call is written out so that the
    libraries' parsers see keywords and positions as a user writes them."""
    params = "".join(f", a{i}" for i in range(len(vals)))
    plain = eval(f"lambda lib, xs{params}: {expr.format(out='')}")  # noqa: S307
    with_out = outable and eval(f"lambda lib, xs, out{params}: "  # noqa: S307
                                f"{expr.replace('({out})', '(out=out)').format(out=', out=out')}")
    label = expr.format(out="")
    for i in reversed(range(len(vals))):
        label = label.replace(f"a{i}", repr(vals[i]))

    def call(lib, xs, out=SKIP):
        args = [v.build(lib) if isinstance(v, Lib) else v for v in vals]
        if out is SKIP:
            return plain(lib, xs, *args)
        return with_out(lib, xs, out, *args)
    return name, label, call, outable


def _args(rng, pairs, positional_p=0.3):
    """Argument text for ``pairs`` [(keyword, value or SKIP)]: positional while no earlier one
    was skipped (sometimes), else by keyword; returns (text, values)."""
    pos = rng.random() < positional_p
    parts, vals = [], []
    for key, value in pairs:
        if value is SKIP:
            pos = False
            continue
        parts.append(f"a{len(vals)}" if pos or key is None else f"{key}=a{len(vals)}")
        vals.append(value)
    return parts, vals


def _call_expr(head, first, rng, pairs, positional_p=0.3):
    """``head(first, <pairs>{out})`` with the values renumbered; returns (expr, values)."""
    parts, vals = _args(rng, pairs, positional_p)
    return f"{head}({', '.join([first] + parts) if first else ', '.join(parts)}{{out}})", vals


def _dim(rng, nd, extra=0):
    """A dim of an nd-dim input (``extra`` more at the top, as stack's), rarely out of range
    or of a wrong type."""
    r = rng.random()
    n = max(nd + extra, 1)
    if r < 0.04:
        return rng.choice([n, -n - 1, n + 2])
    if r < 0.07:
        return rng.choice([1.5, None, True, "0", (0,)])
    return rng.randrange(-n, n)


def _seq(n, kind):
    items = ", ".join(f"xs[{i}]" for i in range(n))
    return f"[{items}]" if kind == "list" else f"({items}{',' if n == 1 else ''})"


def _dtype_for(rng, common):
    return common if rng.random() < 0.6 else rng.choice(_DTYPES)


def _cat(rng, npr):
    name = rng.choice(["cat", "cat", "concat", "concatenate", "stack", "stack", "hstack",
                       "vstack", "dstack", "column_stack", "row_stack"])
    nd = rng.choice([0, 1, 1, 2, 2, 3]) if name != "cat" else rng.choice([1, 1, 2, 2, 3])
    base = _sizes(rng, nd)
    joined = name in ("cat", "concat", "concatenate")
    dim = _dim(rng, nd, 0 if joined else 1)
    n = rng.choice([1, 2, 2, 3, 4] + ([0] if rng.random() < 0.05 else []))
    common = rng.choice(_DTYPES)
    specs = []
    for _ in range(n):
        sh = list(base)
        if joined and isinstance(dim, int) and -nd <= dim < nd:
            sh[dim] = rng.choice([0, 1, 2, 3])
        if rng.random() < 0.06:
            sh = [0]                # a legacy empty tensor
        elif rng.random() < 0.05 and sh:
            sh[rng.randrange(len(sh))] += 1
        elif rng.random() < 0.03:
            sh = sh + [2]
        specs.append(spec(rng, npr, sh, _dtype_for(rng, common)))
    seq = _seq(n, rng.choice(["list", "tuple"]))
    pairs = [("dim", SKIP if name not in ("cat", "concat", "concatenate", "stack")
              or rng.random() < 0.3 else dim)]
    expr, vals = _call_expr(f"lib.{name}", seq, rng, pairs)
    if rng.random() < 0.05:     # a bare tensor, not a sequence
        expr = expr.replace(seq, "xs[0]") if specs else expr
    return specs, program(name, expr, vals, outable=True)


def _split_arg(rng, size):
    r = rng.random()
    if r < 0.5:
        return rng.choice([1, 1, 2, 2, 3, 4, 0, -1] if rng.random() < 0.1 else [1, 2, 2, 3, 4])
    parts, left = [], size
    while left > 0:
        parts.append(rng.randrange(0, left + 1))
        left -= parts[-1]
    if rng.random() < 0.15:
        parts.append(rng.choice([1, -1]))
    return parts if rng.random() < 0.7 else tuple(parts)


def _indices(rng, size):
    k = rng.randrange(0, 4)
    idx = sorted(rng.randrange(-1, size + 2) for _ in range(k))
    if rng.random() < 0.2:
        rng.shuffle(idx)
    return idx


def _split(rng, npr):
    name = rng.choice(["split", "split", "tensor_split", "tensor_split", "tensor_split",
                       "hsplit", "vsplit", "dsplit", "chunk", "chunk", "unbind"])
    sh = _sizes(rng, rng.choice([0, 1, 1, 2, 2, 3, 3]))
    nd = len(sh)
    specs = [spec(rng, npr, sh)]
    dim = _dim(rng, nd)
    d = dim if isinstance(dim, int) and -max(nd, 1) <= dim < max(nd, 1) else 0
    size = sh[d] if nd else 1
    method = rng.random() < 0.3
    head, first = (f"xs[0].{name}", "") if method else (f"lib.{name}", "xs[0]")
    if name == "split":
        pairs = [("split_size_or_sections" if not method else "split_size",
                  _split_arg(rng, size)), ("dim", dim)]
    elif name == "tensor_split":
        r = rng.random()
        if r < 0.4:
            arg = ("sections", rng.choice([1, 2, 3, 4, 5, 0, -1] if rng.random() < 0.15
                                          else [1, 2, 3, 4]))
        elif r < 0.75:
            arg = ("indices", _indices(rng, size))
        else:
            idx = _indices(rng, size)
            if rng.random() < 0.2 and idx:
                arg = ("tensor_indices_or_sections", tensor_arg(idx[0]))
            else:
                arg = ("tensor_indices_or_sections",
                       tensor_arg(idx, rng.choice(["int64", "int64", "int32", "float32"])))
        pairs = [arg, ("dim", dim)]
    elif name in ("hsplit", "vsplit", "dsplit"):
        k = {"hsplit": 1 if nd != 1 else 0, "vsplit": 0, "dsplit": 2}[name]
        have = sh[k] if k < nd else 1
        arg = rng.choice([1, 2, 3, have, 0]) if rng.random() < 0.5 else _indices(rng, have)
        pairs = [("indices_or_sections" if isinstance(arg, list) else "sections", arg)]
        pairs = [(None, arg)]
    elif name == "chunk":
        pairs = [("chunks", rng.choice([1, 2, 3, 4, 5] + ([0, -1] if rng.random() < 0.1
                                                          else []))), ("dim", dim)]
    else:
        pairs = [("dim", dim)]
    if rng.random() < 0.3 and len(pairs) > 1:
        pairs[-1] = (pairs[-1][0], SKIP)
    expr, vals = _call_expr(head, first, rng, pairs)
    return specs, program(name, expr, vals)


def _tile(rng, npr):
    name = rng.choice(["tile", "repeat", "repeat_interleave", "repeat_interleave"])
    sh = _sizes(rng, rng.choice([0, 1, 1, 2, 2, 3]))
    nd = len(sh)
    specs = [spec(rng, npr, sh)]
    reps = [rng.choice([1, 1, 2, 3, 0] if rng.random() < 0.2 else [1, 2, 3])
            for _ in range(max(0, nd + rng.choice([-1, 0, 0, 0, 1, 2])))]
    if name == "tile":
        expr, vals = _call_expr("lib.tile", "xs[0]", rng, [("dims", tuple(reps))])
        if rng.random() < 0.3:
            expr, vals = f"xs[0].tile({', '.join(map(str, reps))}{{out}})", []
    elif name == "repeat":
        if rng.random() < 0.5:
            expr, vals = f"xs[0].repeat({', '.join(map(str, reps))}{{out}})", []
        else:
            expr, vals = _call_expr("xs[0].repeat", "", rng, [("repeats", reps)], 0.5)
    else:
        dim = SKIP if rng.random() < 0.3 else _dim(rng, nd)
        d = dim if isinstance(dim, int) and -max(nd, 1) <= dim < max(nd, 1) else 0
        n = 1 if dim is SKIP else (sh[d] if nd else 1)
        n = int(np.prod(sh)) if dim is SKIP else n
        r = rng.random()
        if r < 0.4:
            reps = rng.choice([0, 1, 2, 3] + ([-1] if rng.random() < 0.1 else []))
        else:
            vals_ = [rng.randrange(0, 4) for _ in range(n if rng.random() < 0.9 else n + 1)]
            if rng.random() < 0.05 and vals_:
                vals_[0] = -1
            reps = tensor_arg(vals_, rng.choice(["int64", "int64", "int32"])) \
                if rng.random() < 0.85 else tensor_arg(rng.randrange(0, 3))
        total = SKIP
        if rng.random() < 0.25 and isinstance(reps, int):
            total = reps * n + rng.choice([0, 0, 1])
        elif rng.random() < 0.25:
            total = rng.randrange(0, 8)
        if rng.random() < 0.08 and isinstance(reps, Lib):       # the repeats-only form
            return [], program(name, "lib.repeat_interleave(a0)", [reps])
        method = rng.random() < 0.3
        head, first = ("xs[0].repeat_interleave", "") if method else \
            ("lib.repeat_interleave", "xs[0]")
        expr, vals = _call_expr(head, first, rng, [("repeats", reps), ("dim", dim)], 0.4)
        if total is not SKIP:           # (keyword-only)
            expr = expr.replace("{out}", f", output_size=a{len(vals)}{{out}}")
            vals.append(total)
    return specs, program(name, expr, vals)


def _reorder(rng, npr):
    name = rng.choice(["roll", "roll", "flip", "flip", "fliplr", "flipud", "rot90", "rot90"])
    sh = _sizes(rng, rng.choice([0, 1, 1, 2, 2, 3, 3]))
    nd = len(sh)
    specs = [spec(rng, npr, sh)]
    method = rng.random() < 0.3
    head, first = (f"xs[0].{name}", "") if method else (f"lib.{name}", "xs[0]")
    if name == "roll":
        k = rng.choice([1, 1, 2, 3])
        shifts = [rng.randrange(-7, 8) for _ in range(k)]
        r = rng.random()
        if r < 0.3:
            pairs = [("shifts", shifts[0]), ("dims", SKIP if rng.random() < 0.5 else None)]
        elif r < 0.5:
            pairs = [("shifts", shifts[0]), ("dims", _dim(rng, nd))]
        else:
            dims = [_dim(rng, nd) for _ in range(k if rng.random() < 0.9 else k + 1)]
            pairs = [("shifts", tuple(shifts) if rng.random() < 0.7 else shifts),
                     ("dims", tuple(dims))]
    elif name == "flip":
        dims = [_dim(rng, nd) for _ in range(rng.randrange(1, nd + 2))]
        if rng.random() < 0.08 and dims:
            dims.append(dims[0])
        dims = dims if rng.random() < 0.5 else tuple(dims)
        if rng.random() < 0.15:
            parts = ([first] if first else []) + [repr(d) for d in dims]
            return specs, program(name, f"{head}({', '.join(parts)}{{out}})", [])
        pairs = [("dims", dims)]
    elif name == "rot90":
        dims = (_dim(rng, nd), _dim(rng, nd))
        if rng.random() < 0.6 and nd >= 2:
            a, b = rng.sample(range(nd), 2)
            dims = (a - nd if rng.random() < 0.3 else a, b)
        if rng.random() < 0.05:
            dims = (0, 1, 2)
        pairs = [("k", rng.randrange(-5, 6)), ("dims", dims if rng.random() < 0.8
                                                  else list(dims))]
        if rng.random() < 0.3:
            pairs = pairs[:1] if rng.random() < 0.5 else []
    else:
        pairs = []
    expr, vals = _call_expr(head, first, rng, pairs)
    return specs, program(name, expr, vals)


def _tri(rng, npr):
    name = rng.choice(["tril", "triu"])
    sh = _sizes(rng, rng.choice([1, 2, 2, 2, 3, 3, 4] if rng.random() < 0.9 else [0]))
    specs = [spec(rng, npr, sh)]
    diag = SKIP if rng.random() < 0.3 else rng.randrange(-5, 6)
    if rng.random() < 0.04:
        diag = rng.choice([1.5, None, "1"])
    form = rng.choice(["fn", "fn", "method", "inplace"])
    if form == "inplace":
        expr, vals = _call_expr(f"xs[0].clone().{name}_", "", rng, [("diagonal", diag)])
        return specs, program(name + "_", expr, vals)
    head, first = (f"xs[0].{name}", "") if form == "method" else (f"lib.{name}", "xs[0]")
    expr, vals = _call_expr(head, first, rng, [("diagonal", diag)])
    return specs, program(name, expr, vals, outable=form == "fn")


def _diag_src(shape, offset, d1, d2):
    try:
        return np.diagonal(np.empty(shape), offset, d1, d2).shape
    except (ValueError, TypeError):
        return (2,)


def _diag(rng, npr):
    name = rng.choice(["diag", "diag", "diag_embed", "diagflat", "diagonal_scatter",
                       "diagonal_scatter", "select_scatter", "slice_scatter", "slice_scatter"])
    off = rng.randrange(-3, 4)
    if name == "diag":
        sh = _sizes(rng, rng.choice([1, 1, 2, 2] if rng.random() < 0.9 else [0, 3]))
        specs = [spec(rng, npr, sh)]
        expr, vals = _call_expr("lib.diag", "xs[0]", rng,
                                [("diagonal", off if rng.random() < 0.7 else SKIP)])
        return specs, program(name, expr, vals, outable=True)
    if name == "diagflat":
        specs = [spec(rng, npr, _sizes(rng))]
        expr, vals = _call_expr("lib.diagflat", "xs[0]", rng,
                                [("offset", off if rng.random() < 0.7 else SKIP)])
        return specs, program(name, expr, vals)
    if name == "diag_embed":
        sh = _sizes(rng, rng.choice([0, 1, 1, 2, 2, 3]))
        nd = len(sh) + 1
        d1, d2 = _dim(rng, nd), _dim(rng, nd)
        if rng.random() < 0.5 and nd >= 2:
            d1, d2 = rng.sample(range(-nd, 0), 2)
        specs = [spec(rng, npr, sh)]
        pairs = [("offset", off), ("dim1", d1), ("dim2", d2)]
        if rng.random() < 0.3:
            pairs = pairs[:rng.randrange(3)]
        expr, vals = _call_expr("lib.diag_embed", "xs[0]", rng, pairs)
        return specs, program(name, expr, vals, outable=True)
    sh = _sizes(rng, rng.choice([1, 2, 2, 3, 3]))
    nd = len(sh)
    if name == "diagonal_scatter":
        d1, d2 = (0, 1) if nd >= 2 and rng.random() < 0.5 else (_dim(rng, nd), _dim(rng, nd))
        pairs = [("offset", off), ("dim1", d1), ("dim2", d2)]
        src = _diag_src(sh, off, d1, d2) if all(isinstance(d, int) for d in (d1, d2)) else (1,)
        if rng.random() < 0.3:
            pairs, src = [], _diag_src(sh, 0, 0, 1)
    elif name == "select_scatter":
        dim = _dim(rng, nd)
        d = dim if isinstance(dim, int) and -nd <= dim < nd else 0
        index = rng.randrange(-sh[d] - 1, sh[d] + 1) if rng.random() < 0.15 else \
            rng.randrange(-sh[d], max(sh[d], 1))
        pairs = [("dim", dim), ("index", index)]
        src = tuple(s for i, s in enumerate(sh) if i != d % nd)
    else:
        dim = _dim(rng, nd)
        d = dim if isinstance(dim, int) and -nd <= dim < nd else 0
        start = rng.choice([SKIP, None, 0, 1, -1, -2, 2, 7])
        end = rng.choice([SKIP, None, 1, 2, -1, 3, 9])
        step = rng.choice([SKIP, 1, 1, 2, 3] + ([0, -1] if rng.random() < 0.1 else []))
        pairs = [("dim", dim), ("start", start), ("end", end), ("step", step)]
        n = len(range(sh[d])[slice(None if start in (SKIP, None) else start,
                                   None if end in (SKIP, None) else end,
                                   1 if step in (SKIP, 0) or step < 0 else step)])
        src = tuple(n if i == d % nd else s for i, s in enumerate(sh))
    src = list(src)
    if rng.random() < 0.06:
        src = src + [1] if rng.random() < 0.5 else [s + 1 for s in src]
    common = rng.choice(_DTYPES)
    specs = [spec(rng, npr, sh, common), spec(rng, npr, src, _dtype_for(rng, common))]
    expr, vals = _call_expr(f"lib.{name}", "xs[0], xs[1]", rng, pairs)
    return specs, program(name, expr, vals, outable=True)


def _grids(rng, npr):
    name = rng.choice(["block_diag", "cartesian_prod", "combinations", "meshgrid",
                       "meshgrid", "atleast_1d", "atleast_2d", "atleast_3d"])
    common = rng.choice(_DTYPES)
    n = rng.choice([1, 2, 2, 3])
    if name == "block_diag":
        specs = [spec(rng, npr, _sizes(rng, rng.choice([0, 1, 2, 2, 2, 3] if rng.random()
                                                       < 0.9 else [3])),
                      _dtype_for(rng, common)) for _ in range(rng.choice([0, 1, 2, 2, 3]))]
        return specs, program(name, f"lib.block_diag({_seq(len(specs), 'list')[1:-1]}{{out}})",
                              [])
    if name in ("cartesian_prod", "meshgrid"):
        specs = [spec(rng, npr, _sizes(rng, 1 if rng.random() < 0.85 else rng.choice([0, 2])),
                      _dtype_for(rng, common)) for _ in range(n)]
        seq = _seq(n, "list")[1:-1]
        if name == "cartesian_prod":
            return specs, program(name, f"lib.cartesian_prod({seq}{{out}})", [])
        if rng.random() < 0.3:
            seq = _seq(n, rng.choice(["list", "tuple"]))
        indexing = rng.choice(["ij", "xy", "xy", SKIP, "bad"] if rng.random() < 0.1
                              else ["ij", "xy", "xy"])
        expr, vals = _call_expr("lib.meshgrid", seq, rng, [("indexing", indexing)], 0)
        return specs, program(name, expr, vals)
    if name == "combinations":
        specs = [spec(rng, npr, _sizes(rng, 1 if rng.random() < 0.9 else rng.choice([0, 2])))]
        pairs = [("r", rng.choice([0, 1, 2, 2, 3, 4] + ([-1] if rng.random() < 0.1 else []))),
                 ("with_replacement", rng.choice([True, False]))]
        if rng.random() < 0.3:
            pairs = pairs[:rng.randrange(2)]
        expr, vals = _call_expr("lib.combinations", "xs[0]", rng, pairs)
        return specs, program(name, expr, vals)
    specs = [spec(rng, npr, _sizes(rng), _dtype_for(rng, common)) for _ in range(n)]
    form = rng.choice(["one", "varargs", "tuple", "list"])
    if form == "one":
        specs = specs[:1]
        first = "xs[0]"
    else:
        first = _seq(n, form) if form != "varargs" else _seq(n, "list")[1:-1]
    return specs, program(name, f"lib.{name}({first}{{out}})", [])


def _broadcast_shapes(rng, base, n):
    shapes = []
    for _ in range(n):
        sh = list(base[rng.randrange(len(base) + 1):])
        sh = [1 if rng.random() < 0.3 else s for s in sh]
        if rng.random() < 0.05 and sh:
            sh[rng.randrange(len(sh))] += 1
        shapes.append(sh)
    return shapes


def _binary(rng, npr):
    name = rng.choice(["broadcast_tensors", "broadcast_to", "broadcast_to", "kron", "kron",
                       "cross", "cross", "linalg.cross", "trace", "vander", "tril_indices",
                       "triu_indices"])
    common = rng.choice(_DTYPES)
    if name == "broadcast_tensors":
        base = _sizes(rng, rng.choice([0, 1, 2, 3]))
        specs = [spec(rng, npr, sh, _dtype_for(rng, common))
                 for sh in _broadcast_shapes(rng, base, rng.choice([1, 2, 2, 3]))]
        return specs, program(name, f"lib.broadcast_tensors({_seq(len(specs), 'l')[1:-1]})",
                              [])
    if name == "broadcast_to":
        base = _sizes(rng, rng.choice([0, 1, 2, 3]))
        sh, = _broadcast_shapes(rng, base, 1)
        target = list(base)
        for i in range(len(target)):
            if rng.random() < 0.15:
                target[i] = -1
        if rng.random() < 0.2:
            target = [rng.choice([1, 2])] + target
        method = rng.random() < 0.3
        head, first = ("xs[0].broadcast_to", "") if method else ("lib.broadcast_to", "xs[0]")
        expr, vals = _call_expr(head, first, rng, [("size", tuple(target) if rng.random() < 0.8
                                                    else list(target))])
        return [spec(rng, npr, sh)], program(name, expr, vals)
    if name == "kron":
        specs = [spec(rng, npr, _sizes(rng), _dtype_for(rng, common)) for _ in range(2)]
        method = rng.random() < 0.2
        expr = "xs[0].kron(xs[1]{out})" if method else "lib.kron(xs[0], xs[1]{out})"
        return specs, program(name, expr, [], outable=not method)
    if name in ("cross", "linalg.cross"):
        sh = _sizes(rng, rng.choice([1, 2, 2, 3]))
        k = rng.randrange(len(sh))
        if rng.random() < 0.9:
            sh[k] = 3
        shapes = _broadcast_shapes(rng, sh, 2) if rng.random() < 0.3 else [sh, list(sh)]
        specs = [spec(rng, npr, s, _dtype_for(rng, common)) for s in shapes]
        dim = rng.choice([SKIP, SKIP, k, k - len(sh), _dim(rng, len(sh))])
        if name == "cross" and dim is SKIP:
            dim = rng.choice([SKIP, None])
        expr, vals = _call_expr(f"lib.{name}", "xs[0], xs[1]", rng, [("dim", dim)],
                                0 if name == "linalg.cross" else 0.3)   # (a keyword-only dim)
        return specs, program(name, expr, vals, outable=True)
    if name == "trace":
        specs = [spec(rng, npr, _sizes(rng, 2 if rng.random() < 0.9 else rng.choice([0, 1, 3])))]
        return specs, program(name, rng.choice(["lib.trace(xs[0])", "xs[0].trace()"]), [])
    if name == "vander":
        specs = [spec(rng, npr, _sizes(rng, 1 if rng.random() < 0.9 else rng.choice([0, 2])))]
        pairs = [("N", rng.choice([SKIP, None, 0, 1, 2, 3, 5] + ([-1] if rng.random() < 0.1
                                                                 else []))),
                 ("increasing", rng.choice([SKIP, True, False]))]
        expr, vals = _call_expr("lib.vander", "xs[0]", rng, pairs, 0)
        return specs, program(name, expr, vals)
    row, col = rng.randrange(0, 6), rng.randrange(0, 6)
    if rng.random() < 0.05:
        row = -1
    dtype = rng.choice([SKIP, SKIP, dtype_arg("int32"), dtype_arg("int64"),
                        dtype_arg("float32") if rng.random() < 0.3 else SKIP])
    pairs = [("row", row), ("col", col), ("offset", rng.choice([SKIP, 0, 1, -1, 2, -3, 7]))]
    parts, vals = _args(rng, pairs)
    if dtype is not SKIP:
        parts.append(f"dtype=a{len(vals)}")
        vals.append(dtype)
    return [], program(name, f"lib.{name}({', '.join(parts)}{{out}})", vals)


_FAMILIES = [(_cat, 4), (_split, 3), (_tile, 2), (_reorder, 3), (_tri, 2), (_diag, 3),
             (_grids, 3), (_binary, 3)]


# --- comparing -------------------------------------------------------------------------------

# Strides that are PyTorch's implementation accidents, not compared: kron's come from the
# views its kernel reshapes; the scatters (below) copy a stepped input with its storage's
# strides (clone_preserve_strides), where a preserve_format copy is dense
_ODD_STRIDES = ("kron",)


def _strides(lib, out):
    """The strides of each result's dims longer than 1 (those of size-1 dims are arbitrary)."""
    return [tuple(s for s, n in zip(t.stride(), t.shape) if n > 1)
            for t in _tensors(lib, out) if t.numel()]


def _quiet(result):
    (ok, value), warns = result
    return (ok, value), [w for w in warns if not any(m in w[1] for m in _ONCE)]


def _backward(lib, leaves, out, gseed):
    """The gradients (and double-backward gradients) of the grad-needing leaves for random
    output gradients."""
    outs = [t for t in _tensors(lib, out) if t.requires_grad]
    leaves = [leaf for leaf in leaves if leaf.requires_grad]
    if not outs or not leaves:
        return None
    npr = np.random.default_rng(gseed)
    grads = []
    for t in outs:
        g = npr.standard_normal(tuple(t.shape))
        if t.is_complex():
            g = g + 1j * npr.standard_normal(tuple(t.shape))
        grads.append(lib.tensor(g).to(t.dtype))
    first = lib.autograd.grad(outs, leaves, grads, create_graph=True, allow_unused=True)
    total = None
    for f in first:
        if f is not None and f.requires_grad:
            w = lib.tensor(npr.standard_normal(tuple(f.shape))).to(f.dtype)
            term = (f * w).sum().real
            total = term if total is None else total + term
    second = (None,) * len(leaves) if total is None else \
        lib.autograd.grad(total, leaves, allow_unused=True)
    return [None if t is None else _np_values(lib, t) for t in list(first) + list(second)]


def _agree(label, what, got, tol):
    (tok, tv), _ = got[torch]
    (eok, ev), _ = got[ember]
    if tok != eok or (not tok and tv != ev):
        raise Diverged((label, what + " error", tv, ev))
    if not tok or tv is None or ev is None:
        if tok and (tv is None) != (ev is None):
            raise Diverged((label, what, tv, ev))
        return
    if len(tv) != len(ev):
        raise Diverged((label, what, tv, ev))
    for k, (a, b) in enumerate(zip(tv, ev)):
        if (a is None) != (b is None) or a is not None and not _same(a, b, tol):
            raise Diverged((label, f"{what}[{k}]", a, b))


def _tangents(lib, specs, fn, gseed):
    npr = np.random.default_rng(gseed + 1)
    fw = lib.autograd.forward_ad
    with fw.dual_level():
        xs = []
        for sp in specs:
            x = make(lib, sp)[1].detach()
            if sp[4]:
                t = npr.standard_normal(tuple(x.shape))
                if x.is_complex():
                    t = t + 1j * npr.standard_normal(tuple(x.shape))
                x = fw.make_dual(x, lib.tensor(t).to(x.dtype))
            xs.append(x)
        out = fn(lib, xs)
        return [None if fw.unpack_dual(t).tangent is None else
                _np_values(lib, fw.unpack_dual(t).tangent) for t in _tensors(lib, out)]


def run_program(seed):
    """One random call; None when both agree, else (label, what, torch's, ember's)."""
    rng = random.Random(seed)
    npr = np.random.default_rng(seed)
    family = rng.choices([f for f, _ in _FAMILIES], [w for _, w in _FAMILIES])[0]
    specs, (name, label, fn, outable) = family(rng, npr)
    shown = ", ".join(f"{sp[0]}{list(sp[1])}{'' if sp[2] == 'contiguous' else ' ' + sp[2]}"
                      f"{' g' if sp[4] else ''}" for sp in specs)
    label = f"seed {seed}: {name}({label} | {shown})"
    use_out = outable and rng.random() < 0.3
    oseed, gseed = rng.random(), rng.randrange(1 << 30)
    grad = any(sp[4] for sp in specs)
    try:
        res = {}
        for lib in (torch, ember):
            pairs = [make(lib, sp) for sp in specs]
            res[lib] = ([p[0] for p in pairs],
                        _quiet(_call(fn, lib, [p[1] for p in pairs])))
        compare(label, res[torch][1], res[ember][1])
        (tok, tval), _ = res[torch][1]
        if not tok:
            return None
        ts, es = _strides(torch, tval), _strides(ember, res[ember][1][0][1])
        if ts != es and name not in _ODD_STRIDES and \
                not (name.endswith("_scatter") and specs[0][2] == "stepped"):
            raise Diverged((label, "strides", ts, es))
        if grad:
            tol = 1e-6 if all(sp[0] in ("float64", "complex128") for sp in specs if sp[4]) \
                else 1e-4
            got = {lib: _call(_backward, lib, res[lib][0], res[lib][1][0][1], gseed)
                   for lib in (torch, ember)}
            _agree(label, "grad", got, tol)
            if all(sp[0] in ("float64", "complex128") for sp in specs if sp[4]) \
                    and rng.random() < 0.5:
                got = {lib: _call(_tangents, lib, specs, fn, gseed) for lib in (torch, ember)}
                _agree(label, "jvp", got, 1e-6)
        if use_out and isinstance(tval, torch.Tensor):
            olabel, ofn = _with_out(random.Random(oseed), fn, tval)
            compare_out(f"{label} {olabel}", ofn,
                        lambda lib: [make(lib, sp)[1].detach() for sp in specs],
                        lambda *args: _quiet(_call(*args)))
    except Diverged as exc:
        return exc.args[0]
    return None


if __name__ == "__main__":
    from tests.parity._fuzz_cli import main
    main(run_program, shown=3)
