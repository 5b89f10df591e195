"""Layouts against PyTorch (round 32): elementwise results whose first operand broadcasts
(the later operands order the dims it repeats, mixed dtypes included), ``out=`` tensors
resized by elementwise ops, nan_to_num's ``empty_like`` layout, and ``numpy()``'s own header.
"""

import random
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_DTYPES = ["float32", "float64", "int64", "float16"]


def _operand(lib, shape, kind, perm, dtype, seed):
    """A tensor of ``shape``: row-major ("c"), dense in ``perm``'s order ("perm"), every other
    element of a row-major one ("step"), or both ("permstep")."""
    base = np.random.default_rng(seed).standard_normal(shape) * 3
    if kind in ("step", "permstep"):
        base = np.repeat(base, 2, axis=-1)
    t = lib.tensor(base).to(getattr(lib, dtype))
    if kind in ("perm", "permstep"):
        t = t.permute(*perm).contiguous().permute(*np.argsort(perm).tolist())
    return t[..., ::2] if kind in ("step", "permstep") else t


def _cases(count, operands, seed):
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        ndim = rng.randint(2, 4)
        full = [rng.randint(2, 5) for _ in range(ndim)]
        case = []
        for _ in range(operands):
            shape = tuple(1 if rng.random() < 0.4 else n
                          for n in full[ndim - rng.randint(1, ndim):])
            case.append((shape, rng.choice(["c", "perm", "step", "permstep"]),
                         tuple(rng.sample(range(len(shape)), len(shape))),
                         rng.choice(_DTYPES)))
        cases.append(case)
    return cases


def _layout(lib, case, fn):
    ts = [_operand(lib, *spec, seed=i) for i, spec in enumerate(case)]
    r = fn(lib, *ts)
    return tuple(r.shape), r.stride(), str(r.dtype).split(".")[-1], r.double().numpy()


_BINARY = {
    "add": lambda lib, a, b: a + b,
    "mul": lambda lib, a, b: lib.mul(a, b),
    "ge": lambda lib, a, b: a >= b,
    "maximum": lambda lib, a, b: lib.maximum(a, b),
}
_TERNARY = {
    "where": lambda lib, c, a, b: lib.where(c > 0, a, b),
    "addcmul": lambda lib, c, a, b: lib.addcmul(c, a, b),
    "lerp": lambda lib, c, a, b: lib.lerp(c.double(), a.double(), b.double()),
}


def _check(case, fn):
    es, ed, et, ev = _layout(ember, case, fn)
    ts, td, tt, tv = _layout(torch, case, fn)
    assert (es, ed, et) == (ts, td, tt), case
    np.testing.assert_allclose(ev, tv, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("name", sorted(_BINARY))
@pytest.mark.parametrize("chunk", range(4))
def test_random_binary_layouts(name, chunk):
    for case in _cases(60, 2, 100 * chunk + len(name)):
        _check(case, _BINARY[name])


@pytest.mark.parametrize("name", sorted(_TERNARY))
@pytest.mark.parametrize("chunk", range(3))
def test_random_ternary_layouts(name, chunk):
    for case in _cases(60, 3, 1000 + 100 * chunk + len(name)):
        _check(case, _TERNARY[name])


@pytest.mark.parametrize("case", [
    # a row-major first operand that broadcasts: the second orders the dims it repeats
    [((3, 4), "step", (0, 1), "int64"), ((3, 5, 1, 4), "perm", (2, 1, 3, 0), "float64")],
    [((1, 3, 1), "perm", (1, 0, 2), "int64"), ((3, 5, 1, 2), "perm", (0, 2, 3, 1), "float16")],
    [((4, 1), "c", (1, 0), "float16"), ((3, 1, 4), "perm", (1, 2, 0), "float64")],
    [((1, 5, 1), "c", (0, 1, 2), "float64"), ((3, 1, 4), "perm", (2, 1, 0), "float32")],
])
def test_broadcast_first_operand(case):
    _check(case, _BINARY["add"])


@pytest.mark.parametrize("case", [
    # three operands, the first row-major: NumPy's layout is not PyTorch's
    [((1, 4, 1), "permstep", (2, 0, 1), "int64"), ((4, 1), "c", (0, 1), "float32"),
     ((1, 1), "step", (0, 1), "int64")],
    [((2, 1), "permstep", (1, 0), "float32"), ((1,), "step", (0,), "float64"),
     ((2, 1), "permstep", (1, 0), "float32")],
])
def test_three_operands_first_row_major(case):
    _check(case, _TERNARY["where"])
    _check(case, _TERNARY["addcmul"])


def _inputs(lib):
    a = lib.tensor(np.linspace(-2, 2, 60).reshape(3, 4, 5), dtype=lib.float32)
    b = lib.tensor(np.linspace(-1, 3, 20).reshape(4, 5), dtype=lib.float32)
    cl = a[None].permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)[0]
    return {"t": a.transpose(0, 2), "perm": a.permute(1, 2, 0), "step": a[:, ::2, :],
            "cl": cl, "size1": a[:, :1, :].transpose(0, 1),
            "odd1": a.transpose(1, 2)[:, :, :1], "c": a, "expanded": b[None].expand(3, 4, 5)}


_OUT_OPS = {
    "abs": lambda lib, x, o: lib.abs(x, out=o),
    "sigmoid": lambda lib, x, o: lib.sigmoid(x, out=o),
    "nan_to_num": lambda lib, x, o: lib.nan_to_num(x, out=o),
    "clamp": lambda lib, x, o: lib.clamp(x, 0, 1, out=o),
    "add_number": lambda lib, x, o: lib.add(x, 1, out=o),
    "atan2": lambda lib, x, o: lib.atan2(x, x.abs() + 1, out=o),
    "pow": lambda lib, x, o: lib.pow(x, 2, out=o),
    "lerp": lambda lib, x, o: lib.lerp(x, x * 2, 0.3, out=o),
    "where": lambda lib, x, o: lib.where(x > 0, x, x.flip(0).contiguous(), out=o),
    "add_mixed": lambda lib, x, o: lib.add(x.half(), x.double(), out=o.double()),
    "mul_int": lambda lib, x, o: lib.mul(x.long(), x, out=o),
    "sub_broadcast": lambda lib, x, o: lib.sub(x[:1], x, out=o),
    "sum": lambda lib, x, o: lib.sum(x, 1, out=o),
    "cumsum": lambda lib, x, o: lib.cumsum(x, 0, out=o),
}


def _out_layout(lib, name, kind, out_shape):
    x = _inputs(lib)[kind]
    o = lib.zeros(out_shape, dtype=lib.float64 if name == "add_mixed" else lib.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # (the resize warning: tested elsewhere)
        r = _OUT_OPS[name](lib, x, o)
    return tuple(r.shape), r.stride(), r.double().numpy()


@pytest.mark.parametrize("name", sorted(_OUT_OPS))
@pytest.mark.parametrize("kind", ["t", "perm", "step", "cl", "size1", "odd1", "c", "expanded"])
@pytest.mark.parametrize("out_shape", [(0,), (7,), (2, 3)])
def test_resized_out_layout(name, kind, out_shape):
    es, ed, ev = _out_layout(ember, name, kind, out_shape)
    ts, td, tv = _out_layout(torch, name, kind, out_shape)
    assert (es, ed) == (ts, td)
    np.testing.assert_allclose(ev, tv, rtol=1e-3, atol=1e-3)


def _nan_to_num_layouts(lib, dtype, shape, perm, step):
    n = int(np.prod(shape))
    base = lib.tensor(np.linspace(-3, 3, n * step).reshape(shape[:-1] + (shape[-1] * step,)))
    base = base.to(getattr(lib, dtype))
    base[..., 0] = float("nan")
    x = base[..., ::step].permute(*perm)
    x = (x.contiguous() if step == 1 else x).permute(*np.argsort(perm).tolist())
    out = lib.empty(0, dtype=x.dtype)
    lib.nan_to_num(x, out=out)
    inplace = x.clone()
    inplace.nan_to_num_(nan=2.0)
    r = lib.nan_to_num(x, posinf=1.0)
    return [t.stride() for t in (x, r, out, inplace)], [str(t.float().tolist()) for t in (r, out)]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("shape,perm", [((1, 3, 1, 2), (0, 3, 1, 2)), ((1, 3, 1, 2), (2, 3, 1, 0)),
                                        ((1, 3, 1, 2), (3, 2, 0, 1)), ((3, 1, 4), (2, 1, 0)),
                                        ((2, 1, 1, 3), (3, 1, 2, 0)), ((1, 4), (1, 0))])
@pytest.mark.parametrize("step", [1, 2])
def test_nan_to_num_layout(dtype, shape, perm, step):
    e = _nan_to_num_layouts(ember, dtype, shape, perm, step)
    assert e == _nan_to_num_layouts(torch, dtype, shape, perm, step)


@pytest.mark.parametrize("kind", ["t", "step", "size1", "c"])
def test_nan_to_num_integer_layout(kind):
    got = []
    for lib in (ember, torch):
        x = (_inputs(lib)[kind] * 10).long()
        out = lib.empty(0, dtype=lib.int64)
        lib.nan_to_num(x, out=out)
        got.append((lib.nan_to_num(x).stride(), out.stride(), out.tolist()))
    assert got[0] == got[1]


@pytest.mark.parametrize("convert", ["numpy", "asarray", "__array__"])
def test_numpy_array_has_its_own_header(convert):
    got = []
    for lib in (ember, torch):
        t = lib.arange(16.).reshape(4, 4)
        n = t.numpy() if convert == "numpy" else \
            np.asarray(t) if convert == "asarray" else t.__array__()
        n.shape = (16,)
        n[5] = -1.0                                 # still the tensor's memory
        frozen = t.numpy() if convert == "numpy" else np.asarray(t)
        frozen.flags.writeable = False
        t.add_(1)                                   # the tensor stays writable
        got.append((tuple(t.shape), t.stride(), t[1, 1].item(), n.shape, n[5]))
    assert got[0] == got[1] == ((4, 4), (4, 1), 0.0, (16,), 0.0)


@pytest.mark.parametrize("make", [lambda lib: lib.empty(3, 0).t(), lambda lib: lib.empty(0, 3).t(),
                                  lambda lib: lib.empty(2, 3, 0).permute(2, 0, 1),
                                  lambda lib: lib.empty(3, 4)[:, :0].t(),
                                  lambda lib: lib.empty(1, 0, 2).transpose(0, 2)])
@pytest.mark.parametrize("out_numel", [0, 5])
def test_nan_to_num_empty_out_layout(make, out_numel):
    got = []
    for lib in (ember, torch):
        out = lib.empty(out_numel)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")         # (the resize warning)
            r = lib.nan_to_num(make(lib), out=out)
        got.append((r is out, tuple(out.shape), out.stride(), lib.nan_to_num(make(lib)).stride()))
    assert got[0] == got[1]
