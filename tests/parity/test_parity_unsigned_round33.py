"""uint16/uint32/uint64 are "barebones" dtypes in PyTorch 2.13: ember refuses the ops PyTorch
refuses, with its kernel's error, and computes the others with PyTorch's values and dtypes.

The cases (the spec generator) are in ``tests/parity/unsigned_table_round33.py``.
"""

import warnings

import pytest

import ember
from tests.parity.unsigned_table_round33 import answer, cases

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

CASES = cases()


def _answer(lib, name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return answer(lib, CASES[name])


@pytest.mark.parametrize("name", list(CASES))
def test_unsigned_case_matches_pytorch(name):
    assert _answer(ember, name) == _answer(torch, name)


def test_table_has_refusals_and_supported_ops():
    # the table exercises both sides: a broken torch import or a blanket gate would show here
    answers = [_answer(torch, n) for n in CASES]
    refused = sum(1 for a in answers if a[0] == "NotImplementedError")
    assert refused > 200 and len(answers) - refused > 300


@pytest.mark.parametrize("a, b", [("uint16", "float32"), ("uint32", "float64"),
                                  ("uint64", "float16"), ("uint32", "bool"),
                                  ("uint16", "int64"), ("uint32", "uint64")])
def test_result_type_matches_pytorch(a, b):
    def result(lib):
        try:
            return str(lib.result_type(lib.ones(2, dtype=getattr(lib, a)),
                                       lib.ones(2, dtype=getattr(lib, b)))).split(".")[-1]
        except RuntimeError as error:
            return str(error)
    assert result(ember) == result(torch)
