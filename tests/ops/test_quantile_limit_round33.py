"""quantile/nanquantile refuse more than 2**24 elements along the reduced dim, as PyTorch does
("quantile() input tensor is too large"); the other dims do not count. The limit is lowered
here so that the tests sort small arrays; the parity tests check the real one."""

import numpy as np
import pytest

import ember
from ember.ops import quantiles


@pytest.fixture
def limit_8(monkeypatch):
    monkeypatch.setattr(quantiles, "_MAX_REDUCED", 8)


def test_real_limit_is_2_pow_24():
    assert quantiles._MAX_REDUCED == 2 ** 24
    with pytest.raises(RuntimeError, match=r"^quantile\(\) input tensor is too large$"):
        ember.quantile(ember.zeros(1).expand(2 ** 24 + 1), 0.5)


@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
@pytest.mark.parametrize("shape, dim", [((9,), None), ((9,), 0), ((3, 3), None), ((9, 2), 0),
                                        ((2, 9), -1)])
def test_more_than_the_limit_along_the_reduced_dim_raises(limit_8, fn, shape, dim):
    with pytest.raises(RuntimeError, match=r"^quantile\(\) input tensor is too large$"):
        getattr(ember, fn)(ember.zeros(shape), 0.5, dim=dim)


@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
@pytest.mark.parametrize("shape, dim", [((8,), None), ((9, 2), 1), ((2, 9), 0), ((16, 1), 1),
                                        ((4, 2), None)])
def test_many_rows_each_within_the_limit_are_fine(limit_8, fn, shape, dim):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    got = getattr(ember, fn)(ember.from_numpy(x), 0.3, dim=dim)
    want = getattr(np, fn)(x, 0.3, axis=dim)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)


def test_other_checks_come_first(limit_8):
    x = ember.zeros(9)
    with pytest.raises(RuntimeError, match=r"q must be in the range \[0, 1\] but got 1.5"):
        ember.quantile(x, 1.5)
    with pytest.raises(RuntimeError, match="must be either float or double dtype"):
        ember.quantile(x.long(), 0.5)
    with pytest.raises(RuntimeError, match=r"q values must be in the range \[0, 1\]"):
        ember.quantile(x, ember.tensor([2.0]))
    with pytest.raises(IndexError, match="Dimension out of range"):
        ember.quantile(x, 0.5, dim=1)
