"""Numbers and 0-dim tensors beside float16/bfloat16 tensors against PyTorch's CPU kernels:
~40 ops, numbers on either side, chosen where rounding them to the 16-bit dtype shows."""


import pytest

import ember
from tests.parity._compare import dtype_name, outcome, same_floats

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

NUMBERS = {"float16": [70000.0, 0.1, 1 / 3, 257.0, -0.3, 2049],
           "bfloat16": [257.0, 0.1, 1 / 3, 1e39, 3.0078125, 255]}
VALUES = [-65504.0, 256.0, 1.0, 3.0, 0.5, 255.0]

CASES = {
    "add": lambda L, x, s: x + s, "radd": lambda L, x, s: s + x,
    "sub": lambda L, x, s: x - s, "rsub": lambda L, x, s: s - x,
    "mul": lambda L, x, s: x * s, "rmul": lambda L, x, s: s * x,
    "div": lambda L, x, s: x / s, "rdiv": lambda L, x, s: s / x,
    "floordiv": lambda L, x, s: x // s, "rfloordiv": lambda L, x, s: s // x,
    "mod": lambda L, x, s: x % s, "rpow": lambda L, x, s: s ** x,
    "pow": lambda L, x, s: x ** s, "fmod": lambda L, x, s: L.fmod(x, s),
    "lt": lambda L, x, s: x < s, "le": lambda L, x, s: x <= s, "gt": lambda L, x, s: x > s,
    "ge": lambda L, x, s: x >= s, "eq": lambda L, x, s: x == s, "ne": lambda L, x, s: x != s,
    "add_": lambda L, x, s: x.clone().add_(s), "mul_": lambda L, x, s: x.clone().mul_(s),
    "div_": lambda L, x, s: x.clone().div_(s), "sub_": lambda L, x, s: x.clone().sub_(s),
    "where": lambda L, x, s: L.where(x > 1, x, s),
    "clamp": lambda L, x, s: L.clamp(x, max=s), "clamp_min": lambda L, x, s: L.clamp(x, min=s),
    "lerp": lambda L, x, s: L.lerp(x, x * 2, s),
    "copysign": lambda L, x, s: L.copysign(x, s),
    "masked_fill": lambda L, x, s: x.masked_fill(x > 1, s),
    "full_like": lambda L, x, s: L.full_like(x, s),
    "hardtanh": lambda L, x, s: L.nn.functional.hardtanh(x, -abs(s), abs(s)),
    "threshold": lambda L, x, s: L.nn.functional.threshold(x, 1.0, s),
    "leaky_relu": lambda L, x, s: L.nn.functional.leaky_relu(x, s),
    "addcmul": lambda L, x, s: L.addcmul(x, x, x, value=s),
}
# a 0-dim float32 tensor in place of the number (the tensor's dtype still wins)
ZERO_DIM = {
    "add0d": lambda L, x, s: x + L.tensor(s), "mul0d": lambda L, x, s: x * L.tensor(s),
    "rmul0d": lambda L, x, s: L.tensor(s) * x, "div0d": lambda L, x, s: x / L.tensor(s),
    "rdiv0d": lambda L, x, s: L.tensor(s) / x, "lt0d": lambda L, x, s: x < L.tensor(s),
    "atan2": lambda L, x, s: L.atan2(x, L.tensor(s)),
    "hypot": lambda L, x, s: L.hypot(x, L.tensor(s)),
    "maximum": lambda L, x, s: L.maximum(x, L.tensor(s)),
    "lerp0d": lambda L, x, s: L.lerp(x, x * 2, L.tensor(s)),
    "logaddexp": lambda L, x, s: L.logaddexp(x, L.tensor(s)),
}
CASES.update(ZERO_DIM)


def _outcome(lib, dtype, name, number):
    """(dtype name, values as floats) of the case's result, or (error type, message)."""
    x = lib.tensor(VALUES, dtype=getattr(lib, dtype))
    return outcome(CASES[name], lib, x, number, message=lambda text: text.replace("c10::", ""),
                   describe=lambda r: (dtype_name(r.dtype), [float(v) for v in r.float().tolist()]))


def _same(a, b):
    """The same dtype and values (NaN matching NaN), or the same error type (messages differ)."""
    if a[0] != b[0] or isinstance(a[1], str) != isinstance(b[1], str):
        return False
    return isinstance(a[1], str) or same_floats(a[1], b[1])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_numbers_beside_16_bit_floats_match_torch(dtype, name):
    for number in NUMBERS[dtype]:
        ours, theirs = _outcome(ember, dtype, name, number), _outcome(torch, dtype, name, number)
        assert _same(ours, theirs), (number, ours, theirs)
