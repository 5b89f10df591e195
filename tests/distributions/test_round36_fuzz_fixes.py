"""Round 36's distributions-fuzzer fixes, checked without PyTorch."""

import math

import pytest

import ember
from ember import distributions as D


def test_pareto_moments_of_an_integer_scale_are_floating():
    d = D.Pareto(ember.tensor([1, 2]), ember.tensor([0.5, 5.0]), validate_args=False)
    assert d.mean.dtype == ember.float32
    assert d.mean.tolist() == [math.inf, 2.5]
    assert d.variance[0].item() == math.inf
    assert d.variance[1].item() == pytest.approx(4 * 5 / (16 * 3))


def test_generalized_pareto_support_of_an_integer_loc():
    xi = ember.tensor([0.3, -0.5], dtype=ember.float64)
    d = D.GeneralizedPareto(ember.tensor(-2), ember.tensor(1.25, dtype=ember.float64), xi,
                            validate_args=False)
    upper = d.support.upper_bound
    assert upper.dtype == ember.float64
    assert upper.tolist() == [math.inf, 0.5]


def test_laplace_cdf_uses_the_sign_of_value_minus_loc():
    # (the same where scale > 0; for an unvalidated scale < 0, PyTorch's value)
    d = D.Laplace(ember.tensor(0.0), ember.tensor(-0.5), validate_args=False)
    got = d.cdf(ember.tensor(1.0)).item()
    assert got == pytest.approx(0.5 - 0.5 * math.expm1(2.0))
    d = D.Laplace(ember.tensor(0.5), ember.tensor(2.0))
    assert d.cdf(ember.tensor([0.0, 1.5])).tolist() == pytest.approx(
        [0.5 * math.exp(-0.25), 1 - 0.5 * math.exp(-0.5)])


def test_mixture_sample_of_an_int_shape_is_torchs_type_error():
    mix = D.MixtureSameFamily(D.Categorical(probs=ember.tensor([0.3, 0.7])),
                              D.Normal(ember.tensor([0.0, 1.0]), ember.tensor([1.0, 2.0])))
    with pytest.raises(TypeError, match="object of type 'int' has no len()"):
        mix.sample(3)
    assert mix.sample((3,)).shape == (3,)


def test_wishart_expand_error_names_the_matrices_and_expands_them():
    w = D.Wishart(ember.tensor(4.0), covariance_matrix=ember.eye(3).expand(2, 3, 3))
    with pytest.raises(RuntimeError, match=r"Target sizes: \[4, 3, 3\]"):
        w.expand((4,))
    e = w.expand((5, 2))
    assert e.batch_shape == (5, 2) and e.mean.shape == (5, 2, 3, 3)
    assert e.log_prob(ember.eye(3)).shape == (5, 2)
    assert e.rsample().shape == (5, 2, 3, 3)
