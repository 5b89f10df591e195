"""Regressions found by the round-37 random ops fuzzer (_random_ops_fuzz_round37_gen.py):
complex uniform_/normal_, the order and wording of the samplers' argument errors, normal's
output rules with a tensor operand, the checks skipped for no elements, and bounds that meet
once cast to a float dtype."""

import warnings

import pytest

import ember


def _first_line(fn):
    with pytest.raises(Exception) as caught:
        fn()
    return type(caught.value).__name__, str(caught.value).split("\n")[0]


# --- complex targets: both parts drawn -------------------------------------------------------

def test_uniform_of_a_complex_tensor_draws_both_parts():
    x = ember.empty(3, dtype=ember.complex64).uniform_(2, 2)
    assert x.tolist() == [2 + 2j] * 3
    ember.manual_seed(0)
    y = ember.empty(4000, dtype=ember.complex128).uniform_(1, 3)
    assert 1 <= float(y.imag.min()) and float(y.imag.max()) < 3
    assert abs(float(y.imag.mean()) - 2) < 0.1


def test_normal_of_a_complex_tensor_gives_each_part_half_the_variance():
    assert ember.empty(2, dtype=ember.complex64).normal_(1.0, 0.0).tolist() == [1 + 1j] * 2
    ember.manual_seed(0)
    x = ember.empty(20000, dtype=ember.complex128).normal_(0.0, 1.0)
    assert abs(float(x.real.var()) - 0.5) < 0.03
    assert abs(float(x.imag.var()) - 0.5) < 0.03


def test_uniform_bounds_of_a_complex_tensor_are_its_parts_dtype():
    assert _first_line(lambda: ember.empty(2, dtype=ember.complex64).uniform_(0, 1e39)) == (
        "RuntimeError", "to is out of bounds for float")


# --- no elements: no kernel, no dtype refusal ------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda: ember.zeros(0, dtype=ember.complex64).bernoulli_(0.0),
    lambda: ember.zeros(0, dtype=ember.complex64).random_(),
    lambda: ember.zeros(0, 5, dtype=ember.complex64).uniform_(3, 1),
    lambda: ember.zeros(0, dtype=ember.complex64).uniform_(0, float("inf")),
    lambda: ember.bernoulli(ember.zeros(0, dtype=ember.bool)),
    lambda: ember.bernoulli(ember.zeros(0, dtype=ember.complex64), 0.5),
    lambda: ember.bernoulli(ember.zeros(0), out=ember.zeros(2, dtype=ember.complex64)),
])
def test_samplers_of_no_elements_refuse_no_dtype(call):
    assert call().numel() == 0


def test_bernoulli_checks_p_before_the_dtype():
    for fn in (lambda: ember.bernoulli(ember.zeros(2, dtype=ember.complex64), 1.5),
               lambda: ember.zeros(2, dtype=ember.complex64).bernoulli_(1.5)):
        assert _first_line(fn) == ("RuntimeError",
                                   "bernoulli_ expects p to be in [0, 1], but got p=1.5")


def test_bernoulli_with_out_checks_autograd_first():
    x = ember.zeros(0, dtype=ember.complex64, requires_grad=True)
    assert _first_line(lambda: ember.bernoulli(x, out=ember.zeros(0, dtype=ember.complex64)))[
        1].startswith("bernoulli(): functions with out=... arguments don't support automatic")


# --- the parser's words ----------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda: ember.bernoulli(ember.zeros(2), 0.5, out=ember.zeros(2)),
     "bernoulli() received an invalid combination of arguments - got (Tensor, float, "
     "out=Tensor), but expected one of:"),
    (lambda: ember.randint(1, 2, 3, dtype=ember.float32),
     "randint() received an invalid combination of arguments - got (int, int, int, "
     "dtype=ember.dtype), but expected one of:"),
    (lambda: ember.randint(100, 4),
     "randint(): argument 'size' (position 2) must be tuple of ints, not int"),
    (lambda: ember.randint(1, 2, (3,), 4),
     "randint() received an invalid combination of arguments - got (int, int, tuple, int), "
     "but expected one of:"),
    (lambda: ember.randint(size=(2,)),
     "randint() received an invalid combination of arguments - got (size=tuple, ), but "
     "expected one of:"),
    (lambda: ember.rand("a", dtype=ember.float32),
     "rand() received an invalid combination of arguments - got (str, dtype=ember.dtype), "
     "but expected one of:"),
    (lambda: ember.randn(dtype=ember.float32, requires_grad=False),
     "randn() received an invalid combination of arguments - got (requires_grad=bool, "
     "dtype=ember.dtype, ), but expected one of:"),
    (lambda: ember.randn(requires_grad=True),
     'randn() missing 1 required positional arguments: "size"'),
    (lambda: ember.randperm(2.0, device="cpu"),
     "randperm() received an invalid combination of arguments - got (float, device=str), but "
     "expected one of:"),
    (lambda: ember.randperm(2.0), "randperm(): argument 'n' (position 1) must be int, not float"),
    (lambda: ember.normal(ember.ones(2), ember.ones(2), (2,), out=ember.ones(2)),
     "normal() received an invalid combination of arguments - got (Tensor, Tensor, tuple, "
     "out=Tensor), but expected one of:"),
    (lambda: ember.normal(1.5, ember.ones(2, 2), (2, 2)),
     "normal() received an invalid combination of arguments - got (float, Tensor, tuple), but "
     "expected one of:"),
    (lambda: ember.zeros(2).geometric_(), 'geometric_() missing 1 required positional '
     'arguments: "p"'),
])
def test_argument_errors_are_the_parsers(call, message):
    assert _first_line(call) == ("TypeError", message)


def test_the_call_of_a_vmap_aware_sampler_is_read_as_a_method_or_a_function():
    x = ember.zeros(2)
    assert _first_line(lambda: x.bernoulli(0.5, out=x))[0] == "TypeError"
    assert x.bernoulli(0.0).tolist() == [0.0, 0.0]


# --- the order of the checks -----------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda: ember.randint(-3, (2,), dtype=ember.int8, out=ember.zeros(2, dtype=ember.float16)),
     "dtype Char does not match dtype of out parameter (Half)"),
    (lambda: ember.rand((2, -1), dtype=ember.bool, out=ember.zeros(5, 0, dtype=ember.int64)),
     "dtype Bool does not match dtype of out parameter (Long)"),
    (lambda: ember.normal(1.5, -1.0, (1, 3), dtype=ember.float16,
                          out=ember.zeros(2, 2, dtype=ember.int64)),
     "dtype Half does not match dtype of out parameter (Long)"),
    (lambda: ember.normal(1.5, -1.0, (1, 3), out=ember.zeros(1, 3, dtype=ember.int64)),
     "normal expects std >= 0.0, but found std -1"),
    (lambda: ember.randperm(-1, out=ember.empty(0)), "n must be non-negative, got-1"),
    (lambda: ember.normal(ember.tensor(1j), ember.tensor(1.0), ()),
     "value cannot be converted to type double without overflow"),
])
def test_checks_come_in_torchs_order(call, message):
    assert _first_line(call) == ("RuntimeError", message)


# --- normal with a tensor operand: its output's rules ----------------------------------------

def test_normal_with_a_float_std_broadcasts_the_mean_with_out():
    out = ember.zeros(0)
    res = ember.normal(ember.tensor(1.0), 0.5, out=out)
    assert res is out and out.shape == (0,)
    out = ember.zeros(0, dtype=ember.int64)
    ember.normal(ember.zeros(0, 2, 1, dtype=ember.int64), 1.0, out=out)
    assert out.shape == (0, 2, 0)
    assert _first_line(lambda: ember.normal(ember.zeros(3), 2.0, out=ember.zeros(0))) == (
        "RuntimeError", "The size of tensor a (3) must match the size of tensor b (0) at "
        "non-singleton dimension 0")


def test_normal_casts_like_its_in_place_steps():
    assert _first_line(lambda: ember.normal(ember.zeros(0, dtype=ember.int64),
                                            ember.zeros(0, dtype=ember.float64))) == (
        "RuntimeError", "result type Double can't be cast to the desired output type Long")
    assert _first_line(lambda: ember.normal(ember.zeros(2, dtype=ember.complex64), ember.ones(2),
                                            out=ember.zeros(2))) == (
        "RuntimeError", "result type ComplexFloat can't be cast to the desired output type "
        "Float")


def test_normal_warns_when_it_resizes_an_out_with_elements():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = ember.zeros(7, dtype=ember.bfloat16)
        ember.normal(3.0, ember.zeros(0, dtype=ember.bfloat16), out=out)
    assert out.shape == (0,)
    assert any("An output with one or more elements was resized" in str(w.message)
               for w in caught)


def test_normal_with_a_zero_std_gives_the_mean_and_its_node():
    mean = ember.tensor([1.0, -2.0], requires_grad=True)
    res = ember.normal(mean, ember.zeros(2))
    assert res.tolist() == [1.0, -2.0]
    assert type(res.grad_fn).__name__ == "NormalBackward3"
    res.sum().backward()
    assert mean.grad.tolist() == [0.0, 0.0]


# --- bounds that meet once cast --------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda: ember.empty(2, dtype=ember.bfloat16).random_(299, 300),
    lambda: ember.randint(299, 300, (2,), dtype=ember.bfloat16),
    lambda: ember.randint_like(ember.empty(2, dtype=ember.bfloat16), 299, 300),
])
def test_bounds_that_meet_once_cast_are_refused(call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _first_line(call) == ("RuntimeError", "random_ expects 'from' casted to dtype to "
                                     "be less than 'to' casted to dtype, but got from=299 >= "
                                     "to=298")


def test_bounds_apart_once_cast_draw():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert ember.empty(2, dtype=ember.bfloat16).random_(300, 302).tolist() == [300.0, 300.0]
        assert ember.empty(2, dtype=ember.float16).random_(2049, 2050).tolist() == [2048.0] * 2


@pytest.mark.parametrize("call, message", [
    (lambda: ember.rand((2, -1), dtype=ember.int64),
     "Trying to create tensor with negative dimension -1: [2, -1]"),
    (lambda: ember.randperm(-1, dtype=ember.int64, out=ember.zeros(0, dtype=ember.float16)),
     "dtype Long does not match dtype of out parameter (Half)"),
    (lambda: ember.empty(4, dtype=ember.uint8).random_(2 ** 40, None),
     "from is out of bounds for unsigned char"),
    (lambda: ember.empty(4, dtype=ember.bfloat16).random_(256, None),
     "random_ expects 'from' casted to dtype to be less than or equal to 'to_inc' casted to "
     "dtype, but got from=256 > to_inc=256"),
    (lambda: ember.empty(2, dtype=ember.complex128).random_(0, None),
     "random_from_to_impl handles only integral, floating-point and boolean types"),
])
def test_more_checks_in_torchs_order(call, message):
    assert _first_line(call) == ("RuntimeError", message)


@pytest.mark.parametrize("call, message", [
    (lambda x, g: x.random_(2.5, 3),
     "random_() received an invalid combination of arguments - got (float, int), but expected "
     "one of:"),
    (lambda x, g: x.random_(2.5, 256, generator=g),
     "random_(): argument 'from' (position 1) must be int, not float"),
    (lambda x, g: x.random_(255, True, generator=g),
     "random_(): argument 'to' (position 2) must be int, not bool"),
    (lambda x, g: x.random_(True, generator=g),
     "random_() received an invalid combination of arguments - got (bool, "
     "generator=ember._C.Generator), but expected one of:"),
])
def test_random_bounds_of_wrong_types_in_the_parsers_words(call, message):
    x, g = ember.empty(3), ember.Generator()
    assert _first_line(lambda: call(x, g)) == ("TypeError", message)


def test_normal_of_meta_tensors_draws_nothing():
    m = ember.zeros(3, device="meta")
    for res in (ember.normal(m, 1.0), ember.normal(m, ember.ones(3, device="meta"))):
        assert res.shape == (3,) and res.device.type == "meta"
