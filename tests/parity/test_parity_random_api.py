"""The random API's argument checks against torch's: the error type and first line of the
message (or the warning, or the result's dtype and shape) of each call, run in both."""


import pytest

import ember
from tests.parity._compare import dtype_name, first_line, is_tensor, recorded

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

CALLS = [
    "t.rand()", "t.randn()",
    "t.randint(2**63, (3,))", "t.randint(0, 2**63, (3,))", "t.randint(5.5, (3,))",
    "t.randint(5, (3,), requires_grad=True)", "t.randperm(5, requires_grad=True)",
    "t.randperm(5.0)", "t.randperm(True)", "t.randperm(2**63)", "t.randperm(t.tensor(5))",
    "t.rand(2, out=t.empty(3), requires_grad=True)",
    "t.normal(t.zeros(3), t.ones(3), (3,))", "t.normal(t.zeros(3), 1., (3,))",
    "t.normal(t.tensor(0.), t.tensor(1.), (3,))",
    "t.normal(t.zeros(3), 1., out=t.empty(3, dtype=t.int32))",
    "t.bernoulli(t.full((3,), 0.5), 1.3)", "t.bernoulli(t.full((3,), 0.5), float('nan'))",
    "t.bernoulli(t.full((3,), float('nan')))",
    "t.multinomial(t.ones(3), 2.0)", "t.multinomial(t.ones(3), True)",
    "t.multinomial(t.ones(1).expand(2**24 + 1), 1)",
    "t.poisson(t.tensor([float('nan')]))",
    "t.randint_like(t.ones(2, 3), 5, requires_grad=True)", "t.randint_like(t.ones(2, 3))",
    "t.randint_like(t.ones(2, 3), 5.5)", "t.randint_like(t.ones(2, 3), high=5)",
    "t.Generator(device=None).device", "t.Generator('cpu:0').device",
    "t.Generator(device='meta')",
    "t.empty(3).uniform_(0, float('inf'))", "t.empty(3).uniform_(float('nan'), 0)",
    "t.empty(3, dtype=t.float16).uniform_(0, 70000)", "t.empty(3).uniform_(-3e38, 3e38)",
    "t.empty(3, dtype=t.float64).uniform_(-1e308, 1e308)",
    "t.empty(3).uniform_(t.zeros(3), 1.)", "t.empty(3).normal_(0., t.ones(3))",
    "t.empty(3).exponential_(t.ones(3))", "t.empty(3).normal_(t.tensor(0.), 1.)",
    "t.empty(3).cauchy_(0, -1)", "t.empty(3).cauchy_(0, 0)", "t.empty(3).cauchy_(0, float('nan'))",
    "t.empty(3).random_(0)", "t.empty(3).random_(-5)", "t.empty(3).random_(None)",
    "t.empty(3).random_(2.5, 5)", "t.empty(3).random_(1, True)",
    "t.empty(3, dtype=t.int64).random_(0, 2**63)", "t.empty(3, dtype=t.complex64).random_()",
    "t.empty(3, dtype=t.complex64).random_(0, 3)", "t.empty(5, dtype=t.int8).random_(5, None)",
    "t.empty(3).bernoulli_(1.5)", "t.empty(3).bernoulli_(float('nan'))",
    "t.empty(3).bernoulli_(t.full((3,), 1.5))", "t.empty(3).bernoulli_(t.full((3,), float('nan')))",
    "t.empty(3).bernoulli_(t.full((4,), 0.5))", "t.empty(1).bernoulli_(t.full((3,), 0.5))",
    "t.empty(3).bernoulli_(t.full((2, 3), 0.5))", "t.empty(2, 3).bernoulli_(t.full((3,), 0.5))",
    "t.randint(2**40, (3,), dtype=t.float32)", "t.randint(2**60, (3,), dtype=t.float64)",
    "t.empty(3).random_(-2**30, 0)", "t.empty(3, dtype=t.bfloat16).random_(0, 2**10)",
    "t.empty(3, dtype=t.float16).random_(0, 2**12)",
]


def _outcome(lib, call):
    """(dtype, shape and requires_grad of the tensor, or the value; or the error's type and
    first line), and the warnings raised (without PyTorch's "Triggered internally" note)."""
    answer, caught = recorded(eval, call, {"t": lib}, message=first_line, describe=_described)
    return answer, [(kind, text.split(" (Triggered internally")[0]) for kind, text in caught]


def _described(value):
    """The text of a tensor's (dtype name, shape, requires_grad), or of another value."""
    if is_tensor(value):
        value = (dtype_name(value.dtype), tuple(value.shape), value.requires_grad)
    return str(value)


@pytest.mark.parametrize("call", CALLS)
def test_random_call_matches_torch(call):
    assert _outcome(ember, call) == _outcome(torch, call)


def test_inexact_bound_warning_points_at_the_caller():
    with pytest.warns(UserWarning, match=r"to - 1 is out of bounds \[-\(2\^24\)") as caught:
        ember.empty(3).random_(0, 2**40)
    assert caught[0].filename == __file__
