"""Corners the round-29 probabilistic programs pinned, checked without torch: a user
constraint's repr (torch drops the first character of the class name, its own classes being
``_Name``) and the private helpers pyro-style code imports, against NumPy."""

import numpy as np
import pytest

import ember
from ember.distributions import constraints, kl, transforms, utils


class Above2(constraints.Constraint):
    def check(self, value):
        return value > 2


class _Unit(constraints.Constraint):
    def check(self, value):
        return value.abs() <= 1


def test_constraint_repr_drops_the_first_character():
    assert repr(Above2()) == "bove2()"
    assert repr(_Unit()) == "Unit()"
    assert repr(constraints.real) == "Real()"
    assert repr(constraints.independent(Above2(), 1)) == "IndependentConstraint(bove2(), 1)"


@pytest.mark.parametrize("shape,dim", [((2, 3, 4), 2), ((2, 3), 0), ((5,), 1), ((2, 1, 3), 3)])
def test_sum_rightmost_sums_the_last_dims(shape, dim):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    got = utils._sum_rightmost(ember.from_numpy(x), dim)
    expected = x.sum(tuple(range(x.ndim - dim, x.ndim))) if dim else x
    assert tuple(got.shape) == expected.shape
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert transforms._sum_rightmost is utils._sum_rightmost


def test_batch_trace_xxt_is_the_frobenius_square():
    x = np.random.default_rng(1).standard_normal((4, 2, 3)).astype(np.float32)
    got = kl._batch_trace_XXT(ember.from_numpy(x))
    expected = np.einsum("bij,bij->b", x.astype(np.float64), x.astype(np.float64))
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5)
