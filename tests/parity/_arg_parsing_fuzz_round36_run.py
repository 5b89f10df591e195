"""Runs one call of the round-36 argument-parsing fuzzer in a library and describes what it
gives, so that ember's and PyTorch's answers can be compared (see
tests/parity/test_parity_arg_parsing_fuzz_round36.py)."""

import re
import warnings

import numpy as np

from tests.parity import _arg_parsing_fuzz_round36_gen as gen


def _resolve(lib, v, x):
    if isinstance(v, list):
        return [_resolve(lib, e, x) for e in v]
    if isinstance(v, tuple):
        return tuple(_resolve(lib, e, x) for e in v)
    if not (isinstance(v, str) and v.startswith("_T")):
        return v
    return {
        gen.X: lambda: x,
        gen.Y: lambda: lib.tensor([[0.5, -1.0, 2.0], [3.0, 0.25, -2.0]]),
        gen.IDX: lambda: lib.tensor([1, 0]),
        "_Tgi": lambda: lib.tensor([[0, 2], [1, 1]]),
        gen.T1: lambda: lib.tensor(1),
        gen.T2: lambda: lib.tensor([1, 2]),
        gen.TB: lambda: lib.tensor([[True, False, True], [False, True, False]]),
        gen.F32: lambda: lib.float32,
        gen.F64: lambda: lib.float64,
        gen.I64: lambda: lib.int64,
        gen.BOOL: lambda: lib.bool,
        gen.DEV: lambda: lib.device("cpu"),
        gen.OUT: lambda: lib.empty(0),
        gen.OUTI: lambda: lib.empty(0, dtype=lib.int64),
        gen.OUTBAD: lambda: lib.empty(5, 7),
    }[v]()


def make_x(lib):
    return lib.tensor([[1.0, -2.0, 3.0], [0.5, 4.0, -1.5]])


def run(lib, call):
    kind, name, args = call
    x = make_x(lib)
    pos = [_resolve(lib, a[1], x) for a in args if a[2]]
    kw = {a[0]: _resolve(lib, a[1], x) for a in args if not a[2]}
    if name in ("cat", "stack", "hstack"):
        pos = [[x, x]] + pos
        fn = getattr(lib, name)
    elif kind == "fn":
        pos = [x] + pos
        fn = getattr(lib, name)
    elif kind == "method":
        fn = getattr(x, name)
    else:
        fn = getattr(lib, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = fn(*pos, **kw)
        except Exception as exc:  # noqa: BLE001 - the error is compared
            return ("error", type(exc).__name__, str(exc).split("\n")[0])
    if kind == "factory" and name in ("rand", "randint", "empty") or name in ("new_empty",):
        return ("ok", _describe(lib, out, values=False))
    return ("ok", _describe(lib, out))


def _describe(lib, out, values=True):
    if isinstance(out, lib.Tensor):
        arr = None
        if values and out.dtype not in (lib.bfloat16,):
            arr = out.detach().numpy().tolist()
        return ("T", tuple(out.shape), str(out.dtype).split(".")[-1], _nan(arr))
    if isinstance(out, (tuple, list)):
        return tuple(_describe(lib, o, values) for o in out)
    if isinstance(out, lib.dtype):
        return ("dtype", str(out).split(".")[-1])
    if isinstance(out, float) and out != out:
        return "nan"
    if isinstance(out, str):        # (x.type(): "torch.FloatTensor")
        return out.replace("ember.", "torch.")
    return out


def _nan(v):
    if isinstance(v, list):
        return [_nan(e) for e in v]
    if isinstance(v, float):
        return "nan" if v != v else round(v, 4)
    return v


_FN = re.compile(r"([A-Za-z_][\w.]*)\(\)")
_ARG = re.compile(r"argument '(\w+)'|keyword argument '(\w+)'")


def message_gaps(call, torch_msg, ember_msg):
    """What torch's message names that ember's does not: the function, or (where ember's
    names no argument of its own) the argument. (A call with two faults may be refused for
    either: PyTorch checks types before values, ember sometimes the other way round.)"""
    gaps = []
    t, e = torch_msg.replace("torch.", "ember."), ember_msg
    m = _FN.search(t)
    if m and ("received an invalid" in t or "argument" in t):
        fname = m.group(1).split(".")[-1]
        if fname + "()" not in e:
            gaps.append("function " + fname)
    if not _ARG.search(e) and "invalid combination" not in e:
        for a, b in _ARG.findall(t):
            if (a or b) not in e:
                gaps.append("argument " + (a or b))
    return gaps


def compare(call, torch_res, ember_res):
    """None when the answers agree, else a short class name of the difference."""
    if torch_res[0] != ember_res[0]:
        return "raises" if torch_res[0] == "error" else "accepts"
    if torch_res[0] == "error":
        if torch_res[1] != ember_res[1]:
            return f"type {torch_res[1]}->{ember_res[1]}"
        if message_gaps(call, torch_res[2], ember_res[2]):
            return "message"
        return None
    if not _same(torch_res[1], ember_res[1]):
        return "value"
    return None


def _same(a, b):
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(p, q) for p, q in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return bool(np.isclose(a, b, rtol=1e-3, atol=1e-4))
    return a == b
