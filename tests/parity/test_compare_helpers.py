"""The shared parity comparison (tests/parity/_compare.py) must fail on a wrong outcome: a
different value, dtype, stride, error type or message, shape, or warning."""

import warnings

import pytest

import ember
from tests.parity._compare import assert_close, assert_same, error, outcome, recorded, same_floats

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

WRONG = {
    "value": lambda L: (L.tensor([1.0, 2.0]).sum() + (L is ember)).item(),
    "dtype": lambda L: L.ones(2, dtype=L.float64 if L is ember else L.float32).dtype,
    "strides": lambda L: (L.ones(2, 3).t() if L is ember else L.ones(3, 2)).stride(),
    "message": lambda L: L.ones(2)[5 if L is ember else 7],
    "error type": lambda L: L.ones(2)[5] if L is ember else L.ones(2).no_such_attribute,
}


def test_same_outcomes_pass():
    assert assert_same(lambda L: L.tensor([1.0, 2.0]).sum().item()) == 3.0
    assert assert_same(lambda L: L.ones(2)[5])[0] == "IndexError"


@pytest.mark.parametrize("name", sorted(WRONG))
def test_a_wrong_outcome_fails(name):
    with pytest.raises(AssertionError):
        assert_same(WRONG[name])


def test_assert_close_checks_values_shape_and_dtype():
    assert_close(ember.tensor([1.0, float("nan")]), torch.tensor([1.0, float("nan")]))
    with pytest.raises(AssertionError):
        assert_close(ember.tensor([1.0, 2.0]), torch.tensor([1.0, 2.001]), 1e-6)
    with pytest.raises(AssertionError):
        assert_close(ember.tensor([1.0, 2.0]), torch.tensor([[1.0, 2.0]]))
    with pytest.raises(AssertionError):
        assert_close(ember.tensor([1.0]), torch.tensor([1.0], dtype=torch.float64),
                     same_dtype=True)


def test_same_floats_matches_nan_and_only_the_same_inf():
    inf, nan = float("inf"), float("nan")
    assert same_floats([inf, nan, 1.0], [inf, nan, 1.0])
    assert not same_floats([inf], [-inf])
    assert not same_floats([nan], [1.0])
    assert not same_floats([1.0], [1.0, 2.0])


def test_error_outcome_and_recorded_warnings():
    assert error(lambda: 1) is None
    assert error(lambda: [][1]) == ("IndexError", "list index out of range")
    assert outcome(lambda: [][1], message=None) == "IndexError"
    answer, caught = recorded(lambda: warnings.warn("old", DeprecationWarning) or 3)
    assert (answer, caught) == (3, [("DeprecationWarning", "old")])
