"""Round 36 leftovers against PyTorch: ops on a view taken before its base required grad,
out= of ops without a derivative into tensors with history, view(dtype)'s base, storage
fill_, normal samples of empty integer shapes, complex powers of a zero base."""

import math
import warnings

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _outcome(lib, fn):
    """``fn(lib)``'s result, or (exception type name, message with the library's name)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(lib)
    except Exception as e:          # noqa: BLE001 (the error is the answer)
        return type(e).__name__, str(e).replace("ember", "torch")


def _both(fn):
    return _outcome(ember, fn), _outcome(torch, fn)


def _names(node):
    return None if node is None else (type(node).__name__, tuple(
        None if f is None else type(f).__name__ for f, _ in node.next_functions))


# --- a view made before its base required grad ---------------------------------------------

_VIEWS = {"mT": lambda t: t.mT, "select": lambda t: t[0], "view": lambda t: t.view(9),
          "expand": lambda t: t[:1].expand(3, 3)}
_OPS = {"solve": lambda lib, x: lib.linalg.solve(x, lib.ones(3, 2, dtype=lib.float64)),
        "inv": lambda lib, x: lib.linalg.inv(x), "mul": lambda lib, x: x * 2,
        "matmul": lambda lib, x: x @ x, "sum": lambda lib, x: x.sum(),
        "index": lambda lib, x: x[0], "svdvals": lambda lib, x: lib.linalg.svdvals(x)}


@pytest.mark.parametrize("view", sorted(_VIEWS))
@pytest.mark.parametrize("op", sorted(_OPS))
def test_ops_on_late_views(view, op):
    def run(lib):
        t = lib.arange(9, dtype=lib.float64).reshape(3, 3) + lib.eye(3, dtype=lib.float64)
        x = _VIEWS[view](t)
        t.requires_grad_()
        y = _OPS[op](lib, x)
        meta = (x.requires_grad, x.grad_fn is None, x.is_leaf, _names(y.grad_fn))
        y.sum().backward()
        return meta + (t.grad, x.grad)
    assert _both(run)[0] == _both(run)[1]


# --- out= of ops without a derivative ---------------------------------------------------------

_OUT_OPS = {"floor_divide": lambda lib, x, o: lib.floor_divide(x, 2, out=o),
            "heaviside": lambda lib, x, o: lib.heaviside(x, lib.ones(4), out=o),
            "log_softmax": lambda lib, x, o: lib.log_softmax(x, 0, out=o)}
_OUTS = {"leaf": lambda lib: lib.zeros(4, requires_grad=True),
         "nonleaf": lambda lib: lib.zeros(4, requires_grad=True).sin(),
         "plain": lambda lib: lib.zeros(4),
         "view": lambda lib: lib.zeros(2, 4, requires_grad=True).sin()[0],
         "leaf view": lambda lib: lib.zeros(2, 4, requires_grad=True)[0]}


@pytest.mark.parametrize("op", sorted(_OUT_OPS))
@pytest.mark.parametrize("out", sorted(_OUTS))
@pytest.mark.parametrize("input_grad", [True, False])
def test_out_without_derivative(op, out, input_grad):
    def run(lib):
        x = lib.tensor([0.5, -1.5, 2.5, 3.0], requires_grad=input_grad)
        x = x.exp() if input_grad else x
        o = _OUTS[out](lib)
        _OUT_OPS[op](lib, x, o)
        base = o._base
        found = (o.requires_grad, _names(o.grad_fn),
                 None if base is None else _names(base.grad_fn),
                 [round(v, 4) for v in o.detach().tolist()])
        return found + (_outcome(lib, lambda lib: o.sum().backward()),)
    ours, theirs = _both(run)
    assert ours == theirs


# --- view(dtype) ------------------------------------------------------------------------------

@pytest.mark.parametrize("src, dst", [("float32", "int32"), ("float32", "float32"),
                                      ("float64", "int16"), ("int8", "int32")])
def test_dtype_view(src, dst):
    def run(lib):
        x = lib.zeros(2, 8, dtype=getattr(lib, src))
        v = x[1].view(getattr(lib, dst))
        w = v[:2]
        found = (v._base is None, v._is_view(), w._base is v, v.storage_offset(),
                 v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr())
        w.fill_(1)
        return found + (x._version, v._version, x.view(lib.uint8).tolist())
    ours, theirs = _both(run)
    assert ours == theirs


def test_dtype_view_grad():
    def run(lib):
        x = lib.zeros(4, requires_grad=True)
        with lib.no_grad():
            a = x.view(lib.float32)
        y = x.clone()
        y.view(lib.int32).fill_(0)
        return (x.view(lib.float32).requires_grad, a.requires_grad, a._base is None,
                _names(y.grad_fn), y._version)
    ours, theirs = _both(run)
    assert ours == theirs


# --- storage fill_ ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "int32", "bool", "complex64"])
@pytest.mark.parametrize("value", [2.5, 3, True, 1 + 2j, "a"])
def test_storage_fill(dtype, value):
    def run(lib):
        x = lib.zeros(2, 3, dtype=getattr(lib, dtype))
        s = x[1].storage()
        r = s.fill_(value)
        return r is s, x.tolist(), x._version
    ours, theirs = _both(run)
    assert ours == theirs


def test_untyped_storage_fill():
    def run(lib):
        x = lib.zeros(2)
        x.untyped_storage().fill_(63)
        return x.tolist()
    ours, theirs = _both(run)
    assert ours == theirs


# --- normal samples of empty integer shapes ---------------------------------------------------

_SAMPLERS = {
    "randn_like": lambda lib, d, n: lib.randn_like(lib.empty(n, 3, dtype=d)),
    "randn": lambda lib, d, n: lib.randn(n, dtype=d),
    "rand_like": lambda lib, d, n: lib.rand_like(lib.empty(n, dtype=d)),
    "normal size": lambda lib, d, n: lib.normal(0.0, 1.0, (n,), dtype=d),
    "normal tensor": lambda lib, d, n: lib.normal(lib.zeros(n, dtype=d), 1.0),
    "normal out": lambda lib, d, n: lib.normal(lib.zeros(n), 1.0, out=lib.empty(n, dtype=d)),
    "randn grad": lambda lib, d, n: lib.randn(n, dtype=d, requires_grad=True)}


@pytest.mark.parametrize("sampler", sorted(_SAMPLERS))
@pytest.mark.parametrize("dtype", ["int64", "bool", "uint16", "float8_e4m3fn"])
@pytest.mark.parametrize("n", [0, 2])
def test_empty_integer_samples(sampler, dtype, n):
    def run(lib):
        r = _SAMPLERS[sampler](lib, getattr(lib, dtype), n)
        return tuple(r.shape), str(r.dtype).replace("ember", "torch")
    ours, theirs = _both(run)
    assert ours == theirs


# --- complex powers of a zero base ------------------------------------------------------------

def _parts(values):
    return [[("nan", 0) if math.isnan(p) else (p, math.copysign(1, p))
             for p in (z.real, z.imag)] for z in values]


_EXPONENTS = [0j, 0.5j, -0.5j, 1 + 0j, -1 + 0j, 2 + 1j, -2 + 1j, 1 - 1j, 0.5 + 0j, -0.5 + 0j,
              3 + 0j, 4 + 0j, -3 + 0j, complex(math.inf, 0), complex(-math.inf, 0),
              complex(1, math.inf), complex(math.nan, 0), complex(0, math.nan)]
_BASES = [0j, complex(0, -0.0), complex(-0.0, -0.0)]
# (not the number exponents 1, 2, 3 and 0.5, which PyTorch's own exact kernels take: the
# signs of their zeros are not this file's matter)
_NUMBER_EXPONENTS = [c for c in _EXPONENTS if c not in (1, 2, 3, 0.5)]


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("form", ["tensor", "complex number", "real number", "number base",
                                  "float_power", "float_power number", "real base"])
def test_zero_base_powers(dtype, form):
    def run(lib):
        d = getattr(lib, dtype)
        e = lib.tensor(_EXPONENTS, dtype=d)
        out = []
        for base in _BASES:
            b = lib.full((len(_EXPONENTS),), base, dtype=d)
            if form == "tensor":
                out += lib.pow(b, e).tolist()
            elif form == "complex number":
                out += [lib.pow(b[:1], c).item() for c in _NUMBER_EXPONENTS]
            elif form == "real number":
                out += [lib.pow(b[:1], c.real).item() for c in _NUMBER_EXPONENTS
                        if c.real not in (1, 2, 3, 0.5)]
            elif form == "number base":
                out += lib.pow(base, e).tolist()
            elif form == "float_power":
                out += lib.float_power(b, e).tolist()
            elif form == "float_power number":
                out += [lib.float_power(b[:1], c).item() for c in _NUMBER_EXPONENTS]
            else:
                out += lib.pow(lib.zeros(len(_EXPONENTS)), e).tolist()
        return _parts(out)
    ours, theirs = _both(run)
    assert ours == theirs
