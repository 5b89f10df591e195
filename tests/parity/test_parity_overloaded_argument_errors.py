"""Argument TypeErrors of ops PyTorch declares with several signatures, compared whole with
PyTorch's: the "invalid combination" listing of every signature, with why each that takes
as many arguments did not match, or the one plausible signature's own words (see NOTE
[Overloaded signatures in TypeErrors]); and the errors of an op's other names, which name
the function called."""

import pytest

import ember
from tests.parity._compare import assert_same_error

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_OVERLOADED = {
    "std(x, 'a')": lambda L, x: L.std(x, "a"),
    "x.std('a')": lambda L, x: x.std("a"),
    "x.std(0, True, 1.5)": lambda L, x: x.std(0, True, 1.5),
    "x.std((0, 1), [1, 'a'], [])": lambda L, x: x.std((0, 1), [1, "a"], []),
    "std(x, dim='a')": lambda L, x: L.std(x, dim="a"),
    "x.var(correction=tensor)": lambda L, x: x.var(correction=L.tensor([1])),
    "var_mean(x, 1.5)": lambda L, x: L.var_mean(x, 1.5),
    "x.prod(0, 'a')": lambda L, x: x.prod(0, "a"),
    "prod(x, 0, keepdim='a')": lambda L, x: L.prod(x, 0, keepdim="a"),
    "x.prod((0,))": lambda L, x: x.prod((0,)),
    "x.all('a', True)": lambda L, x: x.all("a", True),
    "all(x, 0, 'a')": lambda L, x: L.all(x, 0, "a"),
    "x.any(dim=1.5, keepdim=True)": lambda L, x: x.any(dim=1.5, keepdim=True),
    "x.max('a')": lambda L, x: x.max("a"),
    "x.max(dim='a')": lambda L, x: x.max(dim="a"),
    "min(x, 'a')": lambda L, x: L.min(x, "a"),
    "x.sort(1.5, stable=True)": lambda L, x: x.sort(1.5, stable=True),
    "sort(x, 'a')": lambda L, x: L.sort(x, "a"),
    "quantile(x, 0.5, 'a')": lambda L, x: L.quantile(x, 0.5, "a"),
    "x.nanquantile('a')": lambda L, x: x.nanquantile("a"),
    "x.sum('a')": lambda L, x: x.sum("a"),
    "x.sum(0, 'a')": lambda L, x: x.sum(0, "a"),
    "x.squeeze('a')": lambda L, x: x.squeeze("a"),
    "count_nonzero(x, 'a')": lambda L, x: L.count_nonzero(x, "a"),
    "divide(x, 'a')": lambda L, x: L.divide(x, "a"),
    "x.clamp('a')": lambda L, x: x.clamp("a"),
    "masked_fill(x, True, 1.0)": lambda L, x: L.masked_fill(x, True, 1.0),
    "repeat_interleave(3, x)": lambda L, x: L.repeat_interleave(3, x),
    "x.std(0, True, keepdim='a')": lambda L, x: x.std(0, True, keepdim="a"),
}

_ALIASED = {
    "swapaxes(x, 'a', 1)": lambda L, x: L.swapaxes(x, "a", 1),
    "x.swapaxes(0, 1.5)": lambda L, x: x.swapaxes(0, 1.5),
    "x.swapaxes_(axis0='a', axis1=1)": lambda L, x: x.swapaxes_(axis0="a", axis1=1),
    "swapdims(x, 'a', 1)": lambda L, x: L.swapdims(x, "a", 1),
    "x.moveaxis('a', 1)": lambda L, x: x.moveaxis("a", 1),
    "absolute(x, 1)": lambda L, x: L.absolute(x, 1),
    "arccos(x, 1)": lambda L, x: L.arccos(x, 1),
    "multiply(x, 'a')": lambda L, x: L.multiply(x, "a"),
    "true_divide(x, 'a')": lambda L, x: L.true_divide(x, "a"),
    "greater(x, 'a')": lambda L, x: L.greater(x, "a"),
    "x.greater_equal('a')": lambda L, x: x.greater_equal("a"),
    "clip(x, 'a')": lambda L, x: L.clip(x, "a"),
    "x.clip_('a')": lambda L, x: x.clip_("a"),
}


def _matrix(lib):
    return lib.arange(16.).reshape(4, 4)


@pytest.mark.parametrize("name", list(_OVERLOADED))
def test_overloaded_argument_errors_match(name):
    assert_same_error(_OVERLOADED[name], _matrix)


@pytest.mark.parametrize("name", list(_ALIASED))
def test_alias_argument_errors_name_the_alias(name):
    assert_same_error(_ALIASED[name], _matrix)


def test_valid_calls_of_overloaded_ops_and_aliases_still_work():
    x = ember.arange(6.).reshape(2, 3)
    assert x.std(0, True, True).shape == (1, 3) and x.prod(1, True).shape == (2, 1)
    assert ember.divide(x, 2).tolist() == ember.div(x, 2).tolist()
    assert ember.swapaxes(x, 0, 1).shape == (3, 2) and x.swapdims(1, 0).shape == (3, 2)
