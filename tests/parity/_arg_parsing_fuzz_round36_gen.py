"""The generator of tests/parity/test_parity_arg_parsing_fuzz_round36.py: calls of torch
functions and Tensor methods, each a valid call mutated one way (an argument dropped, added,
moved between positional and keyword, given a value of a wrong type, renamed to a NumPy alias),
run in ember and in PyTorch with the same arguments.

A call is ``(kind, name, args)``: ``kind`` is "fn" (``lib.name(x, ...)``) or "method"
(``x.name(...)``), ``args`` a list of ``(keyword, value, positional)``; values are plain Python
values or markers (``_T``-prefixed strings) that each library resolves to its own objects.
"""

import random

# markers resolved per library
X, Y, IDX, T1, T2, TB = "_Tx", "_Ty", "_Tidx", "_T1", "_T2", "_Tb"
F32, F64, I64, BOOL, DEV = "_Tf32", "_Tf64", "_Ti64", "_Tbool", "_Tcpu"
OUT, OUTI, OUTBAD = "_Tout", "_Touti", "_Toutbad"


def P(name, value):
    return (name, value, True)


def K(name, value):
    return (name, value, False)


# valid calls: (kind, name, [args]) with x a 2x3 float32 tensor
_RED = ["sum", "mean", "std", "var", "prod", "amax", "amin", "argmax", "argmin", "logsumexp",
        "nansum", "all", "any", "count_nonzero", "median", "nanmedian", "mode", "max", "min",
        "norm", "cumsum", "cumprod", "softmax", "log_softmax", "nanmean", "std_mean",
        "var_mean", "aminmax", "logcumsumexp", "cummax", "cummin", "sort", "argsort"]

BASE = []
for _n in _RED:
    for _kind in ("fn", "method"):
        if _kind == "method" and _n in ("std_mean", "var_mean"):
            continue
        BASE.append((_kind, _n, [P("dim", 1)]))
        BASE.append((_kind, _n, [K("dim", 0), K("keepdim", True)]))
        BASE.append((_kind, _n, [P("dim", 1), P("keepdim", True)]))
        BASE.append((_kind, _n, []))
BASE += [
    ("fn", "sum", [P("dim", (0, 1)), K("dtype", F64)]),
    ("method", "sum", [K("dtype", F64)]),
    ("method", "std", [P("dim", 1), K("unbiased", False), K("keepdim", True)]),
    ("method", "std", [K("correction", 0)]),
    ("method", "var", [P("dim", 0), K("correction", 2)]),
    ("fn", "quantile", [P("q", 0.5), P("dim", 1), K("keepdim", True)]),
    ("method", "quantile", [P("q", 0.5), K("interpolation", "lower")]),
    ("fn", "norm", [K("p", 1), K("dim", 1)]),
    ("method", "norm", [P("p", 2), P("dim", 0), P("keepdim", True)]),
    ("fn", "max", [P("other", Y)]),
    ("fn", "min", [P("other", Y)]),
    ("fn", "count_nonzero", [K("dim", (0, 1))]),
    ("method", "mean", [K("dtype", F64)]),
    ("method", "prod", [P("dim", 0), K("dtype", F64)]),
    ("method", "cumsum", [P("dim", 0), K("dtype", F64)]),
    ("method", "softmax", [P("dim", 0), K("dtype", F64)]),
    ("method", "topk", [P("k", 2), P("dim", 1)]),
    ("method", "kthvalue", [P("k", 2), P("dim", 1), K("keepdim", True)]),
    # shape ops
    ("method", "view", [P(None, 3), P(None, 2)]),
    ("method", "view", [P("size", (3, 2))]),
    ("method", "view", [P("dtype", I64)]),
    ("method", "view", [P(None, -1)]),
    ("method", "reshape", [P(None, 3), P(None, 2)]),
    ("method", "reshape", [P("shape", (6,))]),
    ("fn", "reshape", [P("shape", (3, -1))]),
    ("method", "expand", [P(None, 4), P(None, 2), P(None, 3)]),
    ("method", "expand", [K("size", (2, 2, 3))]),
    ("method", "repeat", [P(None, 2), P(None, 1)]),
    ("method", "repeat", [P("repeats", [1, 2])]),
    ("method", "permute", [P(None, 1), P(None, 0)]),
    ("method", "permute", [P("dims", [1, 0])]),
    ("fn", "permute", [P("dims", (1, 0))]),
    ("method", "transpose", [P("dim0", 0), P("dim1", 1)]),
    ("fn", "transpose", [P("dim0", 0), P("dim1", 1)]),
    ("method", "flatten", [P("start_dim", 0), P("end_dim", -1)]),
    ("fn", "flatten", [K("start_dim", 1)]),
    ("method", "unflatten", [P("dim", 1), P("sizes", (3, 1))]),
    ("method", "squeeze", [P("dim", 0)]),
    ("method", "squeeze", []),
    ("fn", "squeeze", [P("dim", (0, 1))]),
    ("method", "unsqueeze", [P("dim", 0)]),
    ("fn", "unsqueeze", [K("dim", -1)]),
    ("method", "split", [P("split_size", 1), P("dim", 1)]),
    ("fn", "split", [P("split_size_or_sections", [1, 2]), K("dim", 1)]),
    ("method", "chunk", [P("chunks", 2), P("dim", 1)]),
    ("fn", "chunk", [P("chunks", 2)]),
    ("method", "narrow", [P("dim", 1), P("start", 0), P("length", 2)]),
    ("fn", "narrow", [P("dim", 1), P("start", 1), K("length", 2)]),
    ("method", "select", [P("dim", 1), P("index", 0)]),
    ("fn", "select", [P("dim", 0), P("index", 1)]),
    ("method", "index_select", [P("dim", 1), P("index", IDX)]),
    ("fn", "index_select", [P("dim", 0), K("index", IDX)]),
    ("method", "movedim", [P("source", 0), P("destination", 1)]),
    ("method", "flip", [P("dims", (0,))]),
    ("method", "roll", [P("shifts", 1), P("dims", 1)]),
    ("method", "tile", [P("dims", (2,))]),
    ("method", "swapaxes", [P("axis0", 0), P("axis1", 1)]),
    ("method", "diagonal", [K("offset", 0), K("dim1", 0), K("dim2", 1)]),
    ("method", "tril", [P("diagonal", 1)]),
    ("method", "gather", [P("dim", 1), P("index", "_Tgi")]),
    # elementwise
    ("fn", "add", [P("other", Y), K("alpha", 2)]),
    ("method", "add", [P("other", Y)]),
    ("method", "add", [P("other", 1.5), K("alpha", 2)]),
    ("fn", "sub", [P("other", Y), K("alpha", 0.5)]),
    ("method", "sub", [P("other", 2)]),
    ("fn", "div", [P("other", Y), K("rounding_mode", "floor")]),
    ("method", "div", [P("other", 2), K("rounding_mode", "trunc")]),
    ("fn", "mul", [P("other", Y)]),
    ("fn", "pow", [P("exponent", 2)]),
    ("fn", "clamp", [K("min", 0.5)]),
    ("fn", "clamp", [K("min", T1), K("max", Y)]),
    ("method", "clamp", [P("min", 0), P("max", 2)]),
    ("fn", "where", [P("condition", TB), P("input", Y)]),
    ("fn", "lerp", [P("end", Y), P("weight", 0.5)]),
    ("fn", "addcmul", [P("tensor1", Y), P("tensor2", Y), K("value", 2)]),
    ("method", "masked_fill", [P("mask", TB), P("value", 0.0)]),
    ("fn", "round", [K("decimals", 1)]),
    ("fn", "remainder", [P("other", 2)]),
    ("fn", "fmod", [P("other", 1.5)]),
    ("fn", "atan2", [P("other", Y)]),
    ("fn", "eq", [P("other", 1)]),
    ("method", "eq", [P("other", Y)]),
    ("fn", "isclose", [P("other", Y), K("rtol", 0.1)]),
    ("fn", "allclose", [P("other", Y)]),
    ("fn", "equal", [P("other", Y)]),
    ("fn", "cat", [K("dim", 1)]),
    ("fn", "stack", [P("dim", 0)]),
    ("fn", "hstack", []),
    ("fn", "nan_to_num", [K("nan", 0.0), K("posinf", 1.0)]),
    # conversions
    ("method", "to", [P("dtype", F64)]),
    ("method", "to", [P("device", DEV), P("dtype", F64)]),
    ("method", "to", [P("other", Y)]),
    ("method", "to", [K("dtype", I64), K("copy", True)]),
    ("method", "type", [P("dtype", F64)]),
    ("method", "type", [P("dtype", "torch.DoubleTensor")]),
    ("method", "new_zeros", [P("size", (2,))]),
    ("method", "new_ones", [P(None, 2), P(None, 3)]),
    ("method", "new_full", [P("size", (2,)), P("fill_value", 3)]),
    ("method", "new_empty", [P("size", (2,)), K("dtype", I64)]),
    ("method", "new_tensor", [P("data", [1, 2])]),
    ("method", "fill_", [P("value", 2)]),
    ("method", "float", []),
    ("method", "int", []),
]
# factories: lib.name(...) with no input tensor
FACT = [
    ("factory", "zeros", [P(None, 2), P(None, 3)]),
    ("factory", "zeros", [P("size", (2, 3)), K("dtype", I64)]),
    ("factory", "ones", [P("size", [2]), K("dtype", BOOL)]),
    ("factory", "full", [P("size", (2,)), P("fill_value", 1), K("dtype", F64)]),
    ("factory", "full", [P("size", (2,)), P("fill_value", 1.5)]),
    ("factory", "empty", [P(None, 0)]),
    ("factory", "arange", [P("end", 5)]),
    ("factory", "arange", [P("start", 1), P("end", 5), P("step", 2)]),
    ("factory", "arange", [P("start", 0), K("end", 3), K("dtype", F64)]),
    ("factory", "linspace", [P("start", 0), P("end", 1), P("steps", 5)]),
    ("factory", "logspace", [P("start", 0), P("end", 1), K("steps", 3), K("base", 2)]),
    ("factory", "eye", [P("n", 2), P("m", 3)]),
    ("factory", "tensor", [P("data", [1, 2]), K("dtype", F64)]),
    ("factory", "zeros_like", [P("input", X), K("dtype", I64)]),
    ("factory", "full_like", [P("input", X), P("fill_value", 2)]),
    ("factory", "rand", [P(None, 2), P(None, 2)]),
    ("factory", "randint", [P("low", 0), P("high", 3), P("size", (2,))]),
    ("factory", "randint", [P("high", 3), P("size", (2,))]),
    ("factory", "tril_indices", [P("row", 3), P("col", 3)]),
]
ALL = BASE + FACT

# (PyTorch's parser also takes x for input and x2 for other everywhere; ember only where the
# documentation names them so: see NOTE [NumPy argument names])
_ALIAS = {"dim": "axis", "keepdim": "keepdims"}


def _bad_values(rng, value):
    """Values of a wrong (or other) type for an argument currently ``value``."""
    if isinstance(value, bool):
        return [1, 0, "a", None, 1.0, T1]
    if isinstance(value, int):
        return [float(value), value + 0.5, T2, T1, [value], None, "a", True, (value,), F64,
                -value - 7]
    if isinstance(value, float):
        return [int(value), T1, "a", None, [value], True]
    if isinstance(value, (tuple, list)):
        return [list(value) if isinstance(value, tuple) else tuple(value),
                value[0] if value else 1, [float(v) for v in value if isinstance(v, int)],
                None, (), T1, [T1, 1], "ab"]
    if value in (F64, I64, BOOL, F32):
        return ["float64", 1, None, X, DEV]
    if value == DEV:
        return ["cpu", 0, None, "cuda:x"]
    if isinstance(value, str) and value.startswith("_T"):
        return [1, 1.0, None, [1, 2], T1, "a", TB]
    if isinstance(value, str):
        return [None, 1, "bogus"]
    return [None, 1]


def mutate(rng, call):
    """One mutation of ``call``: returns a new call and a label."""
    kind, name, args = call
    args = list(args)
    choices = ["extra_pos", "unknown_kw", "swap_mode", "bad_value", "drop", "alias",
               "dup", "none_value", "out", "valid"]
    if not args:
        choices = ["extra_pos", "unknown_kw", "out", "valid", "kw_dim", "none_dim"]
    what = rng.choice(choices)
    label = what
    if what == "extra_pos":
        args.append((None, rng.choice([1, 0, True, None, 2.5, X]), True))
    elif what == "unknown_kw":
        args.append((rng.choice(["foo", "dims", "size_", "dtype_", "keepdims", "axis"]),
                     rng.choice([1, True, None]), False))
    elif what == "kw_dim":
        args.append((rng.choice(["dim", "keepdim", "dtype", "out", "unbiased"]),
                     rng.choice([0, True, None, F64]), False))
    elif what == "none_dim":
        args.append(("dim", None, rng.random() < 0.5))
    elif what == "swap_mode":
        named = [i for i, a in enumerate(args) if a[0] is not None]
        if not named:
            return mutate(rng, call)
        i = rng.choice(named)
        a = args[i]
        args[i] = (a[0], a[1], not a[2])
        if not a[2]:        # keyword -> positional: positionals must stay in front
            args.insert(sum(1 for b in args if b[2] and b is not args[i]), args.pop(i))
        else:
            args.append(args.pop(i))
        label += ":" + a[0]
    elif what in ("bad_value", "none_value"):
        i = rng.randrange(len(args))
        a = args[i]
        v = None if what == "none_value" else rng.choice(_bad_values(rng, a[1]))
        args[i] = (a[0], v, a[2])
        label += f":{a[0]}={v!r}"
    elif what == "drop":
        i = rng.randrange(len(args))
        label += ":" + str(args[i][0])
        args.pop(i)
    elif what == "alias":
        named = [i for i, a in enumerate(args) if a[0] in _ALIAS]
        if not named:
            return mutate(rng, call)
        i = rng.choice(named)
        a = args[i]
        args[i] = (_ALIAS[a[0]], a[1], False)
        if a[2]:
            args.append(args.pop(i))
        label += ":" + a[0]
    elif what == "dup":
        named = [a for a in args if a[0] is not None and a[2]]
        if not named:
            return mutate(rng, call)
        a = rng.choice(named)
        args.append((a[0], a[1], False))
    elif what == "out":
        args.append(("out", rng.choice([OUT, OUTI, OUTBAD, None]), False))
    return (kind, name, args), label


def programs(seed, count):
    rng = random.Random(seed)
    for _ in range(count):
        base = rng.choice(ALL)
        call, label = mutate(rng, base)
        if rng.random() < 0.15:
            call, label2 = mutate(rng, call)
            label += "+" + label2
        yield call, label
