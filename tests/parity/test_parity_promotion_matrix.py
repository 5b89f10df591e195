"""Type promotion against PyTorch's, as a matrix: every dtype pair (n-dim and 0-dim operands)
and every tensor dtype with Python numbers, for the binary ops, comparing result dtypes,
values and errors; plus the edges of scalar conversion (clamp bounds, where values, complex
add) the matrix found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._compare import ok, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
          "float16", "bfloat16", "float32", "float64", "complex64", "complex128"]
# PyTorch's CPU kernels skip most ops for these: pairs with them are checked by promote_types
NARROW = [d for d in DTYPES if d not in ("uint16", "uint32", "uint64")]
_VALUES = {"bool": [True, False, True], "u": [3, 1, 5], "i": [3, -2, 5], "f": [1.5, -2.0, 3.0],
           "c": [1 + 2j, -2.5 + 0j, 0.5 - 1j]}


def _make(lib, name, zero_dim):
    key = "bool" if name == "bool" else name[0] if name[0] in "uifc" else "f"
    values = _VALUES["f" if name == "bfloat16" else key]
    return lib.tensor(values[2] if zero_dim else values, dtype=getattr(lib, name))


def _same(expected, got):
    """Equal outcomes: the same error type name, or dtype names, shapes and values."""
    if isinstance(expected, str) or isinstance(got, str):
        return expected == got
    (_, expected), (_, got) = expected, got
    if not isinstance(expected, torch.Tensor):
        return str(expected).split(".")[-1] == str(got).split(".")[-1]
    if str(expected.dtype).split(".")[-1] != str(got.dtype).split(".")[-1]:
        return False
    a = np.asarray(expected.to(torch.float32 if expected.dtype == torch.bfloat16 else
                               expected.dtype).tolist(), dtype=np.complex128)
    b = np.asarray(got.tolist(), dtype=np.complex128)
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-2, atol=1e-3, equal_nan=True)


def _mismatches(fn, cases):
    bad = []
    for case in cases:
        expected = outcome(fn, torch, *case, describe=ok, message=None)
        got = outcome(fn, ember, *case, describe=ok, message=None)
        if not _same(expected, got):
            bad.append((case, expected, got))
    return bad


def test_promote_types_and_can_cast_match_for_every_pair():
    bad = []
    for a in DTYPES:
        for b in DTYPES:
            for fn in ("promote_types", "can_cast"):
                try:
                    expected = str(getattr(torch, fn)(getattr(torch, a), getattr(torch, b)))
                except RuntimeError as e:
                    expected = str(e)
                try:
                    got = str(getattr(ember, fn)(getattr(ember, a), getattr(ember, b)))
                except RuntimeError as e:
                    got = str(e)
                if expected.replace("torch.", "") != got.replace("ember.", ""):
                    bad.append((fn, a, b, expected, got))
    assert not bad, bad[:5]


def test_wide_unsigned_with_complex_refuses_promotion():
    with pytest.raises(RuntimeError, match="attempted to promote UInt16 and ComplexFloat"):
        ember.promote_types(ember.uint16, ember.complex64)
    with pytest.raises(RuntimeError, match="Promotion for uint16, uint32, uint64"):
        ember.tensor([1], dtype=ember.uint32) + ember.tensor([1j])
    assert ember.promote_types(ember.uint64, ember.float16) is ember.float16


_BINARY = {
    "add": lambda L: L.add, "mul": lambda L: L.mul, "div": lambda L: L.div,
    "floor_divide": lambda L: L.floor_divide, "eq": lambda L: L.eq,
    "maximum": lambda L: L.maximum, "atan2": lambda L: L.atan2,
    "bitwise_and": lambda L: L.bitwise_and, "pow": lambda L: L.pow,
}


def _complex_half(a, b, za, zb):
    # PyTorch promotes float16 with a weaker complex operand to complex32, which ember lacks
    return "float16" in (a, b) and any(d.startswith("complex") for d in (a, b)) and za != zb


@pytest.mark.parametrize("name", sorted(_BINARY))
def test_binary_op_dtype_pairs(name):
    cases = [(a, b, za, zb) for a in NARROW for b in NARROW
             for za, zb in ((False, False), (False, True), (True, False))
             if not _complex_half(a, b, za, zb)]

    def run(lib, a, b, za, zb):
        return _BINARY[name](lib)(_make(lib, a, za), _make(lib, b, zb))
    bad = _mismatches(run, cases)
    assert not bad, bad[:5]


_SCALARS = [True, 0, 2, -3, 2 ** 40, 2 ** 63 - 1, 2.5, -0.0, math.inf, math.nan, 1j, 1.5 - 2j]
_WITH_SCALAR = {
    "add": lambda a, s: a + s, "radd": lambda a, s: s + a, "rsub": lambda a, s: s - a,
    "mul": lambda a, s: a * s, "rtruediv": lambda a, s: s / a, "lt": lambda a, s: a < s,
    "pow": lambda a, s: a ** s, "rpow": lambda a, s: s ** a, "and": lambda a, s: a & s,
    "iadd": lambda a, s: a.__iadd__(s), "imul": lambda a, s: a.__imul__(s),
    "itruediv": lambda a, s: a.__itruediv__(s),
}


@pytest.mark.parametrize("name", sorted(_WITH_SCALAR))
def test_tensor_with_python_number(name):
    cases = [(d, z, s) for d in NARROW for z in (False, True) for s in _SCALARS
             if not (d == "float16" and isinstance(s, complex))]

    def run(lib, d, z, s):
        return _WITH_SCALAR[name](_make(lib, d, z), s)
    bad = _mismatches(run, cases)
    assert not bad, bad[:5]


def test_clamp_checks_bounds_against_the_tensor_dtype():
    half = ember.tensor([1.0, 2.0], dtype=ember.float16)
    with pytest.raises(RuntimeError, match="to type c10::Half without overflow"):
        ember.clamp(half, max=1e300)
    with pytest.raises(RuntimeError, match="to type c10::Half without overflow"):
        ember.clamp(half, min=2 ** 40)
    with pytest.raises(RuntimeError, match="to type c10::BFloat16 without overflow"):
        half.bfloat16().clamp_max(1e300)
    assert ember.clamp(half, 1.25, 1.75).tolist() == [1.25, 1.75]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_where_lets_a_number_overflow_a_16_bit_float_to_inf(dtype):
    x = ember.tensor([1.0, 2.0], dtype=getattr(ember, dtype))
    got = ember.where(ember.tensor([True, False]), x, 1e300)
    assert got.dtype is getattr(ember, dtype)
    assert got.tolist() == [1.0, math.inf]
    with pytest.raises(RuntimeError, match="to type float without overflow"):
        ember.where(ember.tensor([True, False]), x.float(), 1e300)


def test_complex_add_and_sub_scale_an_infinite_operand_as_torch_does():
    for lib in (torch, ember):
        x = lib.tensor([1 + 2j])
        inf = lib.tensor([complex(math.inf, 0)])
        results = [x + math.inf, math.inf + x, x - math.inf, x + inf, x + 1e300, math.inf - x]
        flat = [complex(r.item()) for r in results]
        if lib is torch:
            expected = flat
    for e, g in zip(expected, flat):
        assert (e.real, math.isnan(e.imag)) == (g.real, math.isnan(g.imag))
    assert math.isnan(flat[0].imag) and flat[-1].imag == -2.0


def test_clamp_reads_complex_number_bounds_of_a_real_tensor_as_doubles():
    x = ember.tensor([1.0, 3.0])
    assert ember.clamp(x, max=2 + 0j).tolist() == [1.0, 2.0]
    assert ember.clamp(x, max=2 + 0j).dtype is ember.float32
    with pytest.raises(RuntimeError, match="to type double without overflow"):
        ember.clamp(x, 0.5j)
    with pytest.raises(NotImplementedError, match="clamp is not supported for complex types"):
        ember.clamp(ember.tensor([1, 3]), 0.5j)


@pytest.mark.parametrize("args", [("tensor", "a"), (None, 1), (1, [1])])
def test_result_type_rejects_non_numbers_with_torch_message(args):
    args = tuple(torch.tensor([1]) if a == "tensor" else a for a in args)
    with pytest.raises(TypeError) as expected:
        torch.result_type(*args)
    ours = tuple(ember.tensor([1]) if isinstance(a, torch.Tensor) else a for a in args)
    with pytest.raises(TypeError) as got:
        ember.result_type(*ours)
    assert str(got.value).splitlines()[0] == str(expected.value).splitlines()[0].replace(
        "list of [int]", "list")
