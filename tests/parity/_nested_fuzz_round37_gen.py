"""The random programs of test_parity_nested_fuzz_round37.py: a nested tensor (strided or
jagged layout) built one of several ways, then one or two ops on it, run in ember and torch
side by side.

A nested tensor has a random dtype (floats incl. 16-bit, ints, bool, complex), 0 to 3
components of 1 to 3 dims (sizes 0, 1 and up, ragged in the first dim for the jagged layout,
in any dims for the strided one), built by ``nested_tensor`` (maybe requiring grad),
``as_nested_tensor`` of leaves (maybe non-contiguous), ``nested_tensor_from_jagged`` or
``narrow``. The ops: elementwise unary and binary ones (with a scalar, a nested tensor of the
same or another structure, a dense tensor broadcast), matmul / bmm / linear, softmax /
log_softmax, sum / mean, reshape / view / transpose, chunk / split / unbind, cat, where,
layer_norm, dropout in eval, SDPA, clone / detach / to(dtype), to_padded_tensor, size / dim,
with dims in and out of range (the ragged and the batch dim too). Compared: each result's kind,
dtype, components' shapes and values, requires_grad and node name, the errors (type and first
line) and the warnings, and, for float inputs that need grad, the gradients of the leaves.
"""

import random
import re

import numpy as np

import ember
from tests.parity._fft_fuzz_round36_gen import Diverged, _call, _node, _np_values, _same
from tests.parity._fft_fuzz_round36_gen import compare as base_compare

try:
    import torch
except ImportError:     # the test module skips
    torch = None


_DTYPES = ["float32", "float32", "float64", "float64", "float64", "float16", "bfloat16",
           "int64", "int32", "bool", "complex64"]
_TOL = {"float16": 2e-2, "bfloat16": 5e-2, "float32": 1e-4, "complex64": 1e-4}
_QUIET = ("prototype stage",)


def _norm(text):
    """A message as comparable text: ember's names as torch's, ragged sizes as ``j``."""
    text = re.sub(r"\bj\d+\b", "j", str(text)).split(" If you are a Facebook employee")[0]
    return text.replace("ember.", "torch.").replace("ember", "torch")


def _run(fn, *args):
    (ok, val), warns = _call(fn, *args)
    if not ok:
        val = (val[0], _norm(val[1]))
    return (ok, val), sorted((c, _norm(m)) for c, m in warns
                             if not any(q in m for q in _QUIET))


# --- inputs ----------------------------------------------------------------------------------

def _spec(rng, npr):
    layout = rng.choice(["strided", "jagged", "jagged"])
    dtype = rng.choice(_DTYPES)
    n = rng.choice([1, 2, 2, 3, 3] + ([0] if layout == "strided" and rng.random() < 0.1
                                      else []))
    nd = rng.choice([1, 2, 2, 2, 3]) if layout == "strided" else rng.choice([1, 2, 2, 2, 3])
    fixed = [rng.choice([1, 2, 3, 4]) for _ in range(nd)]
    shapes = []
    for _ in range(n):
        s = list(fixed)
        if layout == "jagged" or rng.random() < 0.7:
            s[0] = rng.choice([0, 1, 2, 3, 4, 5] if rng.random() < 0.1 else [1, 2, 3, 4, 5])
        if layout == "strided" and nd > 1 and rng.random() < 0.2:
            s[-1] = rng.choice([1, 2, 3, 4])
        shapes.append(tuple(s))
    # (PyTorch's jagged tensors refuse complex gradients: not compared)
    grad = dtype in ("float32", "float64") and rng.random() < 0.6
    how = rng.choice(["nested_tensor", "nested_tensor", "as_nested", "as_nested"]
                     + (["from_jagged", "narrow"] if layout == "jagged" and n else []))
    raws = []
    for s in shapes:
        if dtype == "bool":
            raws.append(npr.random(s) < 0.5)
        elif dtype.startswith("int"):
            raws.append(npr.integers(-3, 4, s).astype(np.float64))
        else:
            a = npr.standard_normal(s)
            if rng.random() < 0.05 and a.size:
                a.flat[0] = rng.choice([np.nan, np.inf, -0.0])
            raws.append(a + 1j * npr.standard_normal(s) if dtype == "complex64" else a)
    trans = nd >= 2 and rng.random() < 0.25
    return dict(layout=layout, dtype=dtype, shapes=shapes, grad=grad, how=how, raws=raws,
                trans=trans, nd=nd)


def _dense(lib, raw, dtype):
    return lib.tensor(raw).to(getattr(lib, dtype))


def make_input(lib, spec):
    """(the leaves whose gradients are compared, the nested tensor)."""
    dt = getattr(lib, spec["dtype"])
    layout = getattr(lib, spec["layout"])
    grad, how = spec["grad"], spec["how"]
    raws = spec["raws"]
    if how == "nested_tensor":
        comps = [_dense(lib, r, spec["dtype"]) for r in raws]
        nt = lib.nested.nested_tensor(comps, layout=layout, dtype=dt, requires_grad=grad)
        return [nt], nt
    if how == "as_nested":
        leaves, comps = [], []
        for r in raws:
            if spec["trans"]:
                leaf = _dense(lib, np.ascontiguousarray(np.swapaxes(r, 0, -1)),
                              spec["dtype"]).requires_grad_(grad)
                comps.append(leaf.transpose(0, -1))
            else:
                leaf = _dense(lib, r, spec["dtype"]).requires_grad_(grad)
                comps.append(leaf)
            leaves.append(leaf)
        return leaves, lib.nested.as_nested_tensor(comps, layout=layout)
    values = _dense(lib, np.concatenate(raws, 0), spec["dtype"]).requires_grad_(grad)
    lengths = [r.shape[0] for r in raws]
    offsets = lib.tensor(np.cumsum([0] + lengths))
    if how == "from_jagged":
        return [values], lib.nested.nested_tensor_from_jagged(values, offsets)
    # narrow: each component a window of a dense (batch, max length, ...) tensor
    width = max(lengths)
    pad = np.zeros((len(raws), width) + raws[0].shape[1:], dtype=raws[0].dtype)
    for i, r in enumerate(raws):
        pad[i, :len(r)] = r
    base = _dense(lib, pad, spec["dtype"]).requires_grad_(grad)
    nt = lib.nested.narrow(base, 1, lib.tensor([0] * len(raws)), lib.tensor(lengths),
                           layout=lib.jagged)
    return [base], nt


# --- ops -------------------------------------------------------------------------------------

_UNARY = ["abs", "neg", "sin", "exp", "tanh", "sigmoid", "relu", "sqrt", "sgn", "floor",
          "logical_not", "isnan", "square", "reciprocal"]
_FUNC = ["gelu", "silu", "relu", "softplus", "elu", "leaky_relu"]
_BINARY = ["add", "sub", "mul", "div", "maximum", "pow", "eq", "atan2"]


def _dim(rng, nd):
    """A dim of a nested tensor of ``nd`` dims: mostly in range, at times out of it."""
    if rng.random() < 0.06:
        return rng.choice([nd, -nd - 1])
    return rng.randrange(-nd, nd)


def _other(rng, npr, spec, same=True):
    """Raw values of a second nested tensor (of the same structure when ``same``)."""
    shapes = list(spec["shapes"])
    if not same and shapes:
        i = rng.randrange(len(shapes))
        shapes[i] = (shapes[i][0] + 1,) + shapes[i][1:]
    return [npr.standard_normal(s) for s in shapes]


def _second(lib, spec, x, raws, share):
    """The second nested tensor: sharing x's offsets (jagged) when ``share``."""
    dt = x.dtype
    if spec["layout"] == "jagged" and share:
        vals = lib.tensor(np.concatenate(raws, 0)).to(dt)
        return lib.nested.nested_tensor_from_jagged(vals, x.offsets())
    return lib.nested.nested_tensor([lib.tensor(r).to(dt) for r in raws],
                                    layout=getattr(lib, spec["layout"]))


def _op(rng, npr, spec):
    nd = spec["nd"] + 1
    last = spec["shapes"][0][-1] if spec["shapes"] else 2
    k = rng.randrange(30)
    if k < 4:
        name = rng.choice(_UNARY)
        if rng.random() < 0.3:
            return f"x.{name}()", lambda lib, x: getattr(x, name)()
        return f"torch.{name}(x)", lambda lib, x: getattr(lib, name)(x)
    if k < 6:
        name = rng.choice(_FUNC)
        return f"F.{name}(x)", lambda lib, x: getattr(lib.nn.functional, name)(x)
    if k < 11:
        name = rng.choice(_BINARY)
        kind = rng.choice(["scalar", "nested", "nested", "other", "dense", "dense"])
        if kind == "scalar":
            c = rng.choice([2, 0.5, -1.5, True])
            return f"torch.{name}(x, {c})", lambda lib, x: getattr(lib, name)(x, c)
        if kind in ("nested", "other"):
            raws = _other(rng, npr, spec, same=kind == "nested")
            share = kind == "nested" and rng.random() < 0.8
            return (f"torch.{name}(x, nested {kind} share={share})",
                    lambda lib, x: getattr(lib, name)(x, _second(lib, spec, x, raws, share)))
        shape = rng.choice([(last,), (1, last), (1, 1, last), (2, 1, last), (1,), (last + 1,),
                            ()])
        raw = npr.standard_normal(shape)
        swap = rng.random() < 0.3
        return (f"torch.{name}(x, dense{list(shape)} swap={swap})",
                lambda lib, x: getattr(lib, name)(*((lib.tensor(raw).to(x.dtype), x) if swap
                                                    else (x, lib.tensor(raw).to(x.dtype)))))
    if k < 13:
        kind = rng.choice(["matmul", "linear", "linear_b", "bmm", "matmul_nt"])
        e = rng.choice([1, 2, 3])
        d = last if rng.random() < 0.9 else last + 1
        w = npr.standard_normal((e, d))
        b = npr.standard_normal((e,))

        def call(lib, x):
            W = lib.tensor(w).to(x.dtype)
            if kind == "matmul":
                return lib.matmul(x, W.t())
            if kind == "linear":
                return lib.nn.functional.linear(x, W)
            if kind == "linear_b":
                return lib.nn.functional.linear(x, W, lib.tensor(b).to(x.dtype))
            y = x.transpose(-1, -2)
            return lib.bmm(x, y) if kind == "bmm" else lib.matmul(x, y)
        return f"{kind}(x, [{e}, {d}])", call
    if k < 15:
        name = rng.choice(["softmax", "log_softmax"])
        dim = _dim(rng, nd)
        if rng.random() < 0.5:
            return f"x.{name}({dim})", lambda lib, x: getattr(x, name)(dim)
        return (f"F.{name}(x, dim={dim})",
                lambda lib, x: getattr(lib.nn.functional, name)(x, dim=dim))
    if k < 18:
        name = rng.choice(["sum", "mean", "amax"])
        r = rng.random()
        dim = None if r < 0.15 else _dim(rng, nd) if r < 0.7 else \
            [_dim(rng, nd) for _ in range(rng.choice([1, 2]))]
        keep = rng.random() < 0.5
        if dim is None:
            return f"x.{name}()", lambda lib, x: getattr(x, name)()
        return (f"torch.{name}(x, {dim}, keepdim={keep})",
                lambda lib, x: getattr(lib, name)(x, dim, keepdim=keep))
    if k < 20:
        kind = rng.choice(["reshape", "view", "transpose", "unsqueeze", "squeeze", "flatten"])
        if kind == "transpose":
            a, b2 = _dim(rng, nd), _dim(rng, nd)
            return f"x.transpose({a}, {b2})", lambda lib, x: x.transpose(a, b2)
        if kind in ("unsqueeze", "squeeze"):
            dim = _dim(rng, nd + (kind == "unsqueeze"))
            return f"x.{kind}({dim})", lambda lib, x: getattr(x, kind)(dim)
        if kind == "flatten":
            a = rng.choice([-2, -1, 1, 2])
            return f"x.flatten({a}, -1)", lambda lib, x: x.flatten(a, -1)
        n = len(spec["shapes"])
        shape = rng.choice([(n, -1, last), (n, -1), (-1, last), (n, -1, 1, last),
                            (n, -1, last, 1)])
        return f"x.{kind}{shape}", lambda lib, x: getattr(x, kind)(*shape)
    if k < 22:
        kind = rng.choice(["chunk", "split", "unbind", "unbind_dim"])
        dim = _dim(rng, nd)
        if kind == "chunk":
            c = rng.choice([1, 2, 3])
            return f"x.chunk({c}, {dim})", lambda lib, x: x.chunk(c, dim)
        if kind == "split":
            c = rng.choice([1, 2, [1, last - 1], [last]])
            return f"x.split({c}, {dim})", lambda lib, x: x.split(c, dim)
        if kind == "unbind_dim":
            return f"x.unbind({dim})", lambda lib, x: x.unbind(dim)
        return "x.unbind()", lambda lib, x: x.unbind()
    if k < 23:
        dim = _dim(rng, nd)
        raws = _other(rng, npr, spec)
        share = rng.random() < 0.7
        return (f"torch.cat([x, y], {dim}) share={share}",
                lambda lib, x: lib.cat([x, _second(lib, spec, x, raws, share)], dim))
    if k < 24:
        raws = _other(rng, npr, spec)
        scalar = rng.random() < 0.5

        def call(lib, x):
            cond = x > 0
            other = 0.0 if scalar else _second(lib, spec, x, raws, True)
            return lib.where(cond, x, other)
        return f"torch.where(x > 0, x, {'0.0' if scalar else 'y'})", call
    if k < 25:
        norm = last if rng.random() < 0.85 else last + 1
        affine = rng.random() < 0.5
        w, b = npr.standard_normal(norm), npr.standard_normal(norm)

        def call(lib, x):
            wt = lib.tensor(w).to(x.dtype) if affine else None
            bt = lib.tensor(b).to(x.dtype) if affine else None
            return lib.nn.functional.layer_norm(x, (norm,), wt, bt)
        return f"F.layer_norm(x, ({norm},), affine={affine})", call
    if k < 26:
        kind = rng.choice(["dropout", "clone", "detach", "to", "contiguous", "float"])
        if kind == "dropout":
            return ("F.dropout(x, 0.5, training=False)",
                    lambda lib, x: lib.nn.functional.dropout(x, 0.5, training=False))
        if kind == "to":
            dt = rng.choice(["float64", "float32", "int64", "bool", "float16"])
            return f"x.to({dt})", lambda lib, x: x.to(getattr(lib, dt))
        return f"x.{kind}()", lambda lib, x: getattr(x, kind)()
    # (PyTorch's unflatten of a ragged dim fails inside, and its jagged attention of more
    # than the (batch, heads, ragged, features) dims reads them otherwise)
    if k < 27 and spec["nd"] == 2 and spec["dtype"].startswith("float"):
        heads = rng.choice([1, 2])
        causal = rng.random() < 0.2

        def call(lib, x):
            # components (L, heads * d) -> (B, heads, j, d)
            q = x.unflatten(-1, (heads, -1)).transpose(1, 2)
            out = lib.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=causal)
            return out.transpose(1, 2)
        return f"sdpa(x, heads={heads}, causal={causal})", call
    if k < 29:
        pad = rng.choice([0.0, -1.0, 7.0])
        size = None
        if rng.random() < 0.3:
            size = [8] * nd if rng.random() < 0.8 else [1] * nd
        return (f"to_padded_tensor(x, {pad}, {size})",
                lambda lib, x: lib.nested.to_padded_tensor(x, pad, size))
    kind = rng.choice(["size", "dim", "is_nested", "numel", "shape"])
    dim = _dim(rng, nd)
    if kind == "size":
        return f"x.size({dim})", lambda lib, x: x.size(dim)
    return f"x.{kind}", lambda lib, x: getattr(x, kind)() if kind in ("dim", "numel") else \
        getattr(x, kind)


# --- comparing -------------------------------------------------------------------------------

def _describe(lib, out):
    if getattr(out, "is_nested", False) is True:
        try:
            comps = tuple(tuple(c.shape) for c in out.unbind())
        except Exception as exc:  # noqa: BLE001
            comps = (type(exc).__name__,)
        return ("N", str(out.layout).split(".")[-1], out.dim(), str(out.dtype).split(".")[1],
                out.requires_grad, _node(out), comps)
    if isinstance(out, lib.Tensor):
        return ("T", tuple(out.shape), str(out.dtype).split(".")[1], out.requires_grad,
                _node(out))
    if isinstance(out, (tuple, list)) and not isinstance(out, lib.Size):
        return (type(out).__name__, tuple(_describe(lib, o) for o in out))
    return ("py", _norm(out))


def _tensors(lib, out):
    if getattr(out, "is_nested", False) is True:
        try:
            return list(out.unbind())
        except Exception:  # noqa: BLE001
            return []
    if isinstance(out, lib.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _tensors(lib, o)]
    return []


def compare(label, tres, eres):
    """The FFT fuzzer's comparison, with nested results described and unbound."""
    base_compare(label, tres, eres, describe=_describe, tensors=_tensors,
                 tol=lambda dtype: _TOL.get(str(dtype).split(".")[1], 1e-6))


def _loss(lib, out, gseed):
    """A scalar from the result: each tensor of it times fixed random weights, summed."""
    npr = np.random.default_rng(gseed)
    total = None
    for t in _tensors(lib, out):
        if not t.requires_grad:
            continue
        w = npr.standard_normal(tuple(t.shape))
        if t.is_complex():
            w = w + 1j * npr.standard_normal(tuple(t.shape))
        term = (t * lib.tensor(w).to(t.dtype)).sum()
        term = term.real if t.is_complex() else term
        total = term if total is None else total + term
    return total


def _grads(label, spec, fn, gseed):
    got = {}
    for lib in (torch, ember):
        def run(lib=lib):
            leaves, x = make_input(lib, spec)
            out = fn(lib, x)
            loss = _loss(lib, out, gseed)
            if loss is None:
                return None
            loss.backward()
            return [None if g is None else [_np_values(lib, c) for c in _tensors(lib, g)]
                    for g in (leaf.grad for leaf in leaves)]
        got[lib] = _run(run)
    (tok, tg), _ = got[torch]
    (eok, eg), _ = got[ember]
    if tok != eok or (not tok and tg != eg):
        raise Diverged((label, "backward error", tg, eg))
    if not tok or tg is None or eg is None:
        if tok and (tg is None) != (eg is None):
            raise Diverged((label, "backward", tg, eg))
        return
    tol = 1e-6 if spec["dtype"] == "float64" else 1e-3
    for a, b in zip(tg, eg):
        if (a is None) != (b is None) or a is not None and (
                len(a) != len(b) or not all(_same(p, q, tol) for p, q in zip(a, b))):
            raise Diverged((label, "grad", a, b))


def run_program(seed):
    """One random program; None when both agree, else (label, what, torch's, ember's)."""
    rng = random.Random(seed)
    npr = np.random.default_rng(seed)
    spec = _spec(rng, npr)
    ops = [_op(rng, npr, spec)]
    if rng.random() < 0.25:
        ops.append(_op(rng, npr, spec))
    label = (f"{spec['layout']} {spec['dtype']}{[list(s) for s in spec['shapes']]} "
             f"{spec['how']}{' T' if spec['trans'] else ''} grad={spec['grad']}: "
             + " ; ".join(name for name, _ in ops))

    def fn(lib, x):
        for _, op in ops:
            if getattr(x, "is_nested", False) is not True:
                break
            x = op(lib, x)
        return x
    gseed = rng.randrange(1 << 30)
    try:
        res = {}
        for lib in (torch, ember):
            res[lib] = _run(lambda lib=lib: fn(lib, make_input(lib, spec)[1]))
        compare(label, res[torch], res[ember])
        # (PyTorch crashes (SIGSEGV) in the backward of a jagged split_with_sizes)
        crashes = spec["layout"] == "jagged" and ".split([" in label
        if res[torch][0][0] and spec["grad"] and not crashes:
            _grads(label, spec, fn, gseed)
    except Diverged as exc:
        return exc.args[0]
    return None


def _key(mismatch):
    """The bucket of a mismatch: the layout, the first op and what differed."""
    head, ops = mismatch[0].split(": ", 1)
    return head.split(" ")[0] + " " + ops.split("(")[0].split(" ")[0] + " | " + mismatch[1]


if __name__ == "__main__":
    from tests.parity._fuzz_cli import main
    main(run_program, key=_key, shown=3)
