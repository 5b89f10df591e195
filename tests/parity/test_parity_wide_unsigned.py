"""uint16/32/64 against PyTorch's: results, dtypes and the promotion and overflow errors."""

import pytest

import ember
from tests.parity._compare import dtype_name, is_tensor, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _u(t, dtype="uint16"):
    return t.tensor([1, 2, 3], dtype=getattr(t, dtype))


CASES = {
    "u * u": lambda t: _u(t) * _u(t),
    "u * 2": lambda t: _u(t) * 2,
    "u * -1": lambda t: _u(t, "uint32") * -1,
    "u * 2.5": lambda t: _u(t) * 2.5,
    "u / 2": lambda t: _u(t) / 2,
    "u * 0-dim": lambda t: _u(t) * t.tensor(2),
    "u * float": lambda t: _u(t) * t.ones(3),
    "u * bool": lambda t: _u(t) * t.ones(3, dtype=t.bool),
    "u * uint8": lambda t: _u(t) * t.ones(3, dtype=t.uint8),
    "u * int64": lambda t: _u(t, "uint64") * t.ones(3, dtype=t.int64),
    "u16 * u32": lambda t: _u(t) * _u(t, "uint32"),
    "promote_types": lambda t: t.promote_types(t.uint16, t.int32),
    "where": lambda t: t.where(_u(t) == 2, _u(t), _u(t) * 2),
    "eq": lambda t: _u(t, "uint64") == 2,
    "sort": lambda t: _u(t).sort().values,
    "cat": lambda t: t.cat([_u(t), _u(t)]),
    "to int32": lambda t: _u(t, "uint32").to(t.int32),
    "from int64": lambda t: t.tensor([-1, 5]).to(t.uint32),
    "uint64 max": lambda t: t.tensor([2 ** 64 - 1], dtype=t.uint64),
    "negative uint64": lambda t: t.tensor([-1], dtype=t.uint64),
    "too big": lambda t: t.tensor([65536], dtype=t.uint16),
    "uint8 too big": lambda t: t.tensor([256], dtype=t.uint8),
    "uint8 negative": lambda t: t.tensor([-200], dtype=t.uint8),
    "fill": lambda t: t.zeros(2, dtype=t.uint16).fill_(-1),
    "iinfo": lambda t: repr(t.iinfo(t.uint32)),
    "iinfo int64": lambda t: repr(t.iinfo(t.int64)),
    "type": lambda t: _u(t).type(),
}


def _outcome(lib, case):
    """(values, dtype name) of a tensor, another value's text, or (error type, message)."""
    return outcome(CASES[case], lib, catch=(RuntimeError, OverflowError, TypeError),
                   describe=lambda r: ((r.tolist(), dtype_name(r.dtype)) if is_tensor(r)
                                       else str(r).replace("torch.", "ember.")))


@pytest.mark.parametrize("case", list(CASES))
def test_wide_unsigned_match_pytorch(case):
    assert _outcome(ember, case) == _outcome(torch, case)
