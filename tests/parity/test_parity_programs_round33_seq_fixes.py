"""What the music/video programs of round 33 (test_parity_programs_round33_seq*.py) found,
pinned against PyTorch.

- ``F.pad``/``constant_pad_nd`` with a value that does not fit the tensor's dtype (a pianoroll
  of uint8 padded with 256 or -1, an int8 one with 200, float16 with 1e6) raised NumPy's
  OverflowError or padded with inf; PyTorch raises RuntimeError "value cannot be converted to
  type uint8_t without overflow", and only when the pad grows the tensor (a crop converts
  nothing). ``F.pad`` takes its value as a double, so ``value=-1`` on uint8 raises too, while
  ``constant_pad_nd(x, pad, -1)`` (an integer Scalar) wraps to 255 as a C cast does.
- ``linspace`` in an integer dtype (velocity bins, frame indices) spaced its values in float32,
  so 186 of 3000 small random ranges and any range past 2**24 differed from PyTorch's
  (``linspace(0, 2**24 + 1, 2, dtype=int32)`` ended at 16777216); PyTorch's values are its
  float64 linspace truncated. Its ends were not converted either: ``linspace(0, 256, 3,
  dtype=uint8)`` wrapped instead of raising "value cannot be converted to type uint8_t without
  overflow", and ``linspace(-1, 5, 3, dtype=uint8)`` did not start from 255.

Found and left alone: ``topk`` of an integer tensor with ties returns other indices among the
tied values than PyTorch's CPU kernel (the order of ties is unspecified);
``pack_padded_sequence`` with a length above the padded length raises in ember, PyTorch reads
past the input (undefined)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _run(fn):
    try:
        out = fn()
    except Exception as e:  # noqa: BLE001
        # ember adds a line naming the failing module (NOTE [Module error context])
        return type(e).__name__, str(e).split("\n  in model")[0]
    return str(out.dtype).split(".")[-1], out.tolist()


CASES = [
    ("pad", "uint8", (1, 1), 256), ("pad", "uint8", (1, 1), -1), ("pad", "uint8", (1, 1), 2.7),
    ("pad", "int8", (1, 1), 200), ("pad", "int32", (1, 1), 2 ** 40),
    ("pad", "int64", (1, 1), 2 ** 53 + 1), ("pad", "bool", (1, 1), 2),
    ("pad", "float16", (1, 1), 1e6), ("pad", "float16", (1, 1), float("inf")),
    ("pad", "bfloat16", (1, 1), 1e39), ("pad", "float32", (1, 0), 1e300),
    ("pad", "float32", (-1, 0), 1e300), ("pad", "uint8", (-1, 0), 256),
    ("pad", "uint8", (0, 0), 256), ("pad", "float32", (1, -1), 1e300),
    ("nd", "uint8", (1, 1), -1), ("nd", "uint8", (1, 1), -255), ("nd", "uint8", (1, 1), -256),
    ("nd", "uint8", (1, 1), 256), ("nd", "uint8", (1, 1), -1.0),
    ("nd", "int64", (1, 1), float("nan")),
    ("nd", "float32", (1, 1), 2 + 1j), ("nd", "complex64", (1, 1), 2 + 1j),
    ("nd", "float32", (-1, 0), 1e300), ("nd", "float32", (0, 0, 1, -1), 1e300),
]


@pytest.mark.parametrize("fn,dtype,pad,value", CASES)
def test_constant_pad_value_must_fit_the_dtype(fn, dtype, pad, value):
    def call(lib):
        x = lib.tensor([[1, 2, 3]]).to(getattr(lib, dtype))
        if fn == "pad":
            return _run(lambda: lib.nn.functional.pad(x, pad, value=value))
        return _run(lambda: lib.constant_pad_nd(x, list(pad), value))
    got, want = call(ember), call(torch)
    if want[0] in ("float16", "bfloat16", "float32"):
        assert got[0] == want[0]
        np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(want[1]))
    else:
        assert got == want


def test_pianoroll_pad_modules_raise_on_overflow():
    def call(lib):
        roll = lib.zeros(1, 4, 6, dtype=lib.uint8)
        return (_run(lambda: lib.nn.ConstantPad2d(1, 300)(roll)),
                _run(lambda: lib.nn.ConstantPad1d((0, 2), 127)(roll)),
                _run(lambda: lib.nn.ZeroPad2d((1, 0, 0, 1))(roll)))
    assert call(ember) == call(torch)
    assert call(ember)[0][0] == "RuntimeError"


def test_pad_overflow_is_checked_before_autograd_records():
    x = ember.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="value cannot be converted to type float without"):
        ember.nn.functional.pad(x, (1, 1), value=1e300)
    y = ember.nn.functional.pad(x, (1, 1), value=2.0)
    y.sum().backward()
    assert x.grad.tolist() == [[1.0] * 3] * 2


@pytest.mark.parametrize("start,end,steps,dtype", [
    (-1, 5, 3, "uint8"), (0, 255.5, 3, "uint8"), (0, 300, 1, "uint8"), (300, 0, 1, "uint8"),
    (0, 300, 0, "uint8"), (0, 256, 2, "uint8"), (300, 0, 2, "uint8"), (0, 200, 3, "int8"),
    (-0.5, 3, 3, "uint8"), (0.5, 3.7, 4, "uint8"), (0, 2 ** 40, 3, "int32"),
    (0, 2 ** 24 + 1, 2, "int32"), (3, 2 ** 30 + 7, 5, "int64"), (0, float("nan"), 3, "int32"),
    (-(2 ** 31), 2 ** 31 - 1, 3, "int32"), (0, 2 ** 63, 3, "int64"), (-212, 714, 23, "int64"),
])
def test_integer_linspace_as_pytorch(start, end, steps, dtype):
    def call(lib):
        return _run(lambda: lib.linspace(start, end, steps, dtype=getattr(lib, dtype)))
    assert call(ember) == call(torch)


def test_integer_linspace_random_ranges():
    rng = np.random.default_rng(0)
    for dtype, lo, hi in [("int64", -1000, 1000), ("int64", -2 ** 40, 2 ** 40),
                          ("int16", -2 ** 15, 2 ** 15 - 1), ("uint8", 0, 255)]:
        for _ in range(200):
            s, e = (int(v) for v in rng.integers(lo, hi, 2))
            n = int(rng.integers(2, 40))
            got = ember.linspace(s, e, n, dtype=getattr(ember, dtype)).tolist()
            assert got == torch.linspace(s, e, n, dtype=getattr(torch, dtype)).tolist()
