"""Values behind the random API's argument checks: bounds given as ``random_(from, None)``,
``requires_grad`` of like-samplers and ``out=``, generators' devices, and the checks that
refuse probabilities and rates outside their range (NaN included)."""

import math

import pytest

import ember


def test_random_from_with_no_upper_bound_reaches_the_dtype_max():
    drawn = ember.empty(4000, dtype=ember.int8).random_(120, None)
    assert int(drawn.min()) >= 120 and int(drawn.max()) == 127


def test_random_to_zero_is_an_empty_range():
    with pytest.raises(RuntimeError, match="from=0 >= to=0"):
        ember.empty(3).random_(0)


def test_random_node_names_follow_the_overload():
    base = ember.ones(3, requires_grad=True)
    names = [base.clone().random_(*args).grad_fn.name() for args in ((), (5,), (1, 5), (1, None))]
    assert names == ["RandomBackward2", "RandomBackward1", "RandomBackward0", "RandomBackward0"]


def test_randint_like_requires_grad():
    made = ember.randint_like(ember.ones(2, 3), 5, requires_grad=True)
    assert made.requires_grad and made.is_leaf and made.dtype == ember.float32


def test_out_takes_requires_grad():
    out = ember.empty(2)
    assert ember.rand(2, out=out, requires_grad=True) is out and out.requires_grad


def test_generator_devices_are_plain_cpu():
    assert str(ember.Generator(device=None).device) == "cpu"
    assert ember.Generator("cpu:0").device.index is None


@pytest.mark.parametrize("probs", [[0.5, math.nan], [0.5, 1.5]])
def test_bernoulli_refuses_probabilities_outside_unit_range(probs):
    with pytest.raises(RuntimeError, match="p_in >= 0"):
        ember.empty(2).bernoulli_(ember.tensor(probs))
    with pytest.raises(RuntimeError, match="p_in >= 0"):
        ember.bernoulli(ember.tensor(probs))


def test_poisson_refuses_nan_rates():
    with pytest.raises(RuntimeError, match="invalid Poisson rate"):
        ember.poisson(ember.tensor([1.0, math.nan]))


def test_normal_reads_zero_dim_tensors_as_floats_with_a_size():
    drawn = ember.normal(ember.tensor(10.0), ember.tensor(0.0), (3,))
    assert drawn.tolist() == [10.0, 10.0, 10.0]


def test_randint_inexact_bound_warns_at_the_caller():
    with pytest.warns(UserWarning, match=r"double can support") as caught:
        ember.randint(2 ** 60, (3,), dtype=ember.float64)
    assert caught[0].filename == __file__


def test_multinomial_takes_an_integer_tensor_as_num_samples():
    assert ember.multinomial(ember.ones(3), ember.tensor([2])).shape == (2,)
    assert ember.multinomial(ember.ones(2, 3), ember.tensor(3)).shape == (2, 3)
