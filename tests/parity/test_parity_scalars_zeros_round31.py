"""Round 31 against PyTorch: ties of 0. and -0. in clamp with number bounds keep the input
(NaN still propagates); NumPy scalars that PyTorch refuses as setitem values; NumPy
complex64 operands read as their real part; integer floor/ceil/round/trunc copies keep the
input's layout; round with decimals given on integers."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

NAN = float("nan")
DTYPES = ["float32", "float64", "float16", "bfloat16"]
# Two tensors: PyTorch's scalar loop keeps ``input`` on ties, its vectorized loop (from two
# SIMD vectors on, a width that depends on the CPU) mostly the other operand; ember keeps
# NumPy's loops' pick, so ties of tensors are compared by value, not by the sign of zeros.
TIES_A, TIES_B = [0.0, -0.0, 0.0, -0.0], [-0.0, 0.0, 0.0, -0.0]
NAN_A = [NAN, 1.0, NAN, -2.0, 3.0, 0.0, NAN]
NAN_B = [1.0, NAN, NAN, -2.0, -3.0, NAN, 0.0]


def _bits(t, signs=True):
    """Values with NaN positions and (optionally) the sign of zeros, comparable across
    libraries (a NaN's sign bit is not compared)."""
    v = np.array(t.float().tolist(), dtype=np.float64)
    return np.where(np.isnan(v), 7.0, v).tolist(), \
        (np.signbit(v) & ~np.isnan(v)).tolist() if signs else None


TENSOR_CASES = {
    "maximum": lambda lib, a, b: lib.maximum(a, b),
    "minimum": lambda lib, a, b: lib.minimum(a, b),
    "fmax": lambda lib, a, b: lib.fmax(a, b),
    "fmin": lambda lib, a, b: lib.fmin(a, b),
    "clamp_min_t": lambda lib, a, b: lib.clamp_min(a, b),
    "clamp_max_t": lambda lib, a, b: lib.clamp_max(a, b),
    "clamp_t": lambda lib, a, b: lib.clamp(a, b, b),
    "clamp_min_only_t": lambda lib, a, b: a.clamp(min=b),
    "clamp_max_only_t": lambda lib, a, b: a.clamp(max=b),
    "broadcast": lambda lib, a, b: lib.maximum(a[:2].reshape(2, 1), b[:2]),
    "out": lambda lib, a, b: lib.minimum(a, b, out=lib.empty(0, dtype=a.dtype)),
}
# a number bound: PyTorch keeps ``input`` on ties at every size
NUMBER_CASES = {
    "clamp_zero": lambda lib, a: lib.clamp(a, 0.0, 0.0),
    "clamp_negzero": lambda lib, a: lib.clamp(a, -0.0, -0.0),
    "clamp_min_negzero": lambda lib, a: lib.clamp_min(a, -0.0),
    "clamp_max_zero": lambda lib, a: lib.clamp_max(a, 0.0),
    "clamp_min_kw": lambda lib, a: a.clamp(min=0.0),
    "clamp_inplace": lambda lib, a: a.clone().clamp_(-0.0, 0.0),
    "clip_nan_bound": lambda lib, a: lib.clip(a, NAN, 1.0),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sorted(TENSOR_CASES))
def test_signed_zero_ties_of_tensors(case, dtype):
    if dtype == "bfloat16" and case in ("fmax", "fmin"):
        pytest.skip("PyTorch's bfloat16 fmax/fmin keep ``other`` on ties at every size")
    def run(lib, a, b, signs=True):
        d = getattr(lib, dtype)
        return _bits(TENSOR_CASES[case](lib, lib.tensor(a, dtype=d), lib.tensor(b, dtype=d)),
                     signs)
    # (values only: which zero a tie gives follows NumPy's loops, PyTorch's vary with size)
    assert run(ember, TIES_A, TIES_B, False) == run(torch, TIES_A, TIES_B, False)
    for n in (1, 40):
        assert run(ember, NAN_A * n, NAN_B * n, False) == run(torch, NAN_A * n, NAN_B * n, False)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 50])
@pytest.mark.parametrize("case", sorted(NUMBER_CASES))
def test_signed_zero_ties_of_number_bounds(case, n, dtype):
    def run(lib):
        return _bits(NUMBER_CASES[case](lib, lib.tensor((TIES_A + NAN_A) * n,
                                                        dtype=getattr(lib, dtype))))
    assert run(ember) == run(torch)


def _outcome(lib, fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            r = fn()
            got = (str(r.dtype).split(".")[-1], r.tolist())
        except Exception as e:          # noqa: BLE001 (the error itself is compared)
            got = (type(e).__name__, str(e).replace("ember.", "torch."))
    return got, sorted({w.category.__name__ for w in caught})


NP_VALUES = [np.bool_(True), np.float32(2.5), np.float16(2.5), np.float64(2.5), np.int32(3),
             np.uint8(3), np.int8(-1), np.complex64(1 + 2j), np.complex128(1 + 2j),
             np.longdouble(2)]


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool", "float32", "float16",
                                   "complex64"])
@pytest.mark.parametrize("value", NP_VALUES, ids=lambda v: type(v).__name__)
def test_numpy_scalar_setitem(value, dtype):
    def assign(lib, key):
        def run():
            x = lib.zeros(3, dtype=getattr(lib, dtype))
            x[key(lib)] = value
            return x
        return run
    for key in (lambda lib: 0, lambda lib: slice(0, 2), lambda lib: ...,
                lambda lib: lib.tensor([0, 2])):
        assert _outcome(ember, assign(ember, key)) == _outcome(torch, assign(torch, key))


COMPLEX_FORMS = {
    "mul": lambda lib, x, v: x * v, "rmul": lambda lib, x, v: v * x,
    "add": lambda lib, x, v: x + v, "sub": lambda lib, x, v: x - v,
    "div": lambda lib, x, v: x / v, "eq": lambda lib, x, v: x == v,
    "torch_add": lambda lib, x, v: lib.add(x, v), "full": lambda lib, x, v: lib.full((2,), v),
    "full_int": lambda lib, x, v: lib.full((2,), v, dtype=lib.int64),
    "fill_": lambda lib, x, v: x.fill_(v), "where": lambda lib, x, v: lib.where(x.bool(), x, v),
    "clamp": lambda lib, x, v: x.clamp(v),
}


@pytest.mark.parametrize("dtype", ["int64", "float32", "float64", "complex64", "bool"])
@pytest.mark.parametrize("value", [np.complex64(1 + 2j), np.complex128(1 + 2j)],
                         ids=["complex64", "complex128"])
@pytest.mark.parametrize("form", sorted(COMPLEX_FORMS))
def test_numpy_complex_scalar_operands(form, value, dtype):
    def run(lib):
        return lambda: COMPLEX_FORMS[form](lib, lib.ones(2, dtype=getattr(lib, dtype)), value)
    assert _outcome(ember, run(ember)) == _outcome(torch, run(torch))


@pytest.mark.parametrize("name", ["floor", "ceil", "round", "trunc", "fix"])
@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "uint8"])
@pytest.mark.parametrize("view", ["t", "permute", "strided_t", "step", "channels_last"])
def test_integer_rounding_layout(view, dtype, name):
    def make(lib):
        base = lib.arange(120).to(getattr(lib, dtype))
        return {"t": lambda: base[:6].reshape(2, 3).t(),
                "permute": lambda: base[:24].reshape(2, 3, 4).permute(2, 0, 1),
                "strided_t": lambda: base[:24].reshape(4, 6)[:, ::2].t(),
                "step": lambda: base[::3],
                "channels_last": lambda: base.reshape(2, 3, 4, 5).to(
                    memory_format=lib.channels_last)}[view]()
    r, q = getattr(ember, name)(make(ember)), getattr(torch, name)(make(torch))
    assert r.stride() == q.stride() and r.tolist() == q.tolist()
    assert str(r.dtype).split(".")[-1] == str(q.dtype).split(".")[-1]
    out_e, out_t = ember.empty(0, dtype=r.dtype), torch.empty(0, dtype=q.dtype)
    getattr(ember, name)(make(ember), out=out_e)
    getattr(torch, name)(make(torch), out=out_t)
    assert out_e.stride() == out_t.stride()


@pytest.mark.parametrize("decimals", [0, 1, -1])
@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "float32"])
def test_round_decimals_given(dtype, decimals):
    def run(lib):
        def go():
            x = lib.tensor([1.5, 2.5, 3.0], requires_grad=dtype == "float32")
            r = lib.round(x.to(getattr(lib, dtype)) if dtype != "float32" else x,
                          decimals=decimals)
            if r.grad_fn is not None:
                assert r.grad_fn.name() == "RoundBackward1"
            return r.detach()
        return go
    assert _outcome(ember, run(ember)) == _outcome(torch, run(torch))
