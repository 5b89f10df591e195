"""Elementwise ops at edge values (signed zeros, infinities, NaN, subnormals), as PyTorch
2.13 gives them on the CPU."""

import math

import numpy as np
import pytest

import ember

F = ember.nn.functional
INF, NAN = math.inf, math.nan


def _values(t):
    return np.asarray(t.detach().double()).tolist()


def _signs(t):
    return np.signbit(np.asarray(t.detach().double())).tolist()


def _same(got, want):
    """Equal lists, NaN matching NaN and the sign of zero counted."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if math.isnan(w):
            assert math.isnan(g), (got, want)
        else:
            assert g == w and math.copysign(1, g) == math.copysign(1, w), (got, want)


# --- special functions ------------------------------------------------------------------------

def test_lgamma_at_float64_subnormals_is_minus_log():
    x = ember.tensor([5e-324, -5e-324, -1e-310, 0.0, -INF], dtype=ember.float64)
    out = _values(ember.lgamma(x))
    assert out[:3] == pytest.approx([744.4400719213812, 744.4400719213812, 713.8013788281542])
    assert out[3:] == [INF, INF]
    assert _values(ember.special.gammaln(x))[0] == pytest.approx(744.4400719213812)


def test_mvlgamma_shares_lgamma_edges():
    x = ember.tensor([-INF, 5e-324, 2.0], dtype=ember.float64)
    out = _values(ember.mvlgamma(x, 2))
    assert out[0] == INF
    assert out[1:] == pytest.approx([746.2779489877905, 0.4515827052894548])


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_airy_ai_far_from_zero(dtype):
    x = ember.tensor([1e30, 1e7, -1e7, 1.0, INF, -INF, NAN], dtype=dtype)
    out = _values(ember.special.airy_ai(x))
    assert out[:2] == [0.0, 0.0]                     # Ai decays to 0 (SciPy gives NaN there)
    if dtype == ember.float64:                       # the asymptotic wave
        assert out[2] == pytest.approx(0.0054184733, rel=1e-5)
    assert out[3] == pytest.approx(0.1352924163, rel=1e-6)
    assert all(math.isnan(v) for v in out[4:])


def test_chebyshev_t1_keeps_the_sign_of_zero():
    out = ember.special.chebyshev_polynomial_t(ember.tensor([-0.0, 0.0]), ember.tensor([1.0]))
    assert _signs(out) == [True, False]


# --- activations ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16])
def test_elu_family_keeps_minus_zero(dtype):
    x = ember.tensor([-0.0, 0.0, -1.0], dtype=dtype)
    for f in (F.elu, F.selu, F.celu, lambda t: F.celu(t, alpha=0.5)):
        out = f(x)
        assert _signs(out)[:2] == [True, False]


@pytest.mark.parametrize("name, f, want", [
    ("relu", F.relu, 1.0), ("relu6", F.relu6, 1.0), ("hardtanh", F.hardtanh, 1.0),
    ("threshold", lambda t: F.threshold(t, 0.5, -1.0), 1.0), ("softshrink", F.softshrink, 1.0),
    ("hardswish", F.hardswish, 1.0), ("elu", F.elu, 1.0), ("selu", F.selu, 1.0507009873554805),
    ("celu", F.celu, 1.0), ("hardsigmoid", F.hardsigmoid, 0.0),
    ("clamp", lambda t: t.clamp(-1, 1), 0.0),
])
def test_piecewise_gradients_at_nan(name, f, want):
    # PyTorch's backward kernels test "x <= bound" (or the like), so NaN takes the other branch
    x = ember.tensor([NAN, -20.0, 0.5], dtype=ember.float64, requires_grad=True)
    f(x).sum().backward()
    assert _values(x.grad)[0] == pytest.approx(want)


# --- nextafter --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16, ember.float32])
def test_nextafter_of_equal_values_is_other(dtype):
    a = ember.tensor([-0.0, 0.0, 1.0], dtype=dtype)
    b = ember.tensor([0.0, -0.0, 1.0], dtype=dtype)
    out = ember.nextafter(a, b)
    assert _values(out) == [0.0, 0.0, 1.0] and _signs(out) == [False, True, False]


# --- pow --------------------------------------------------------------------------------------

EDGES = [-INF, -4.0, -0.0, 0.0, 4.0, INF, NAN]


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.bfloat16])
def test_pow_minus_half_is_rsqrt(dtype):
    x = ember.tensor(EDGES, dtype=dtype)
    want = [NAN, NAN, -INF, INF, 0.5, 0.0, NAN]
    _same(_values(x ** -0.5), want)
    _same(_values(ember.pow(x, -0.5)), want)
    _same(_values(ember.float_power(x, -0.5)), want)


def test_pow_float16_half_exponents_are_c_pow():
    x = ember.tensor(EDGES, dtype=ember.float16)
    _same(_values(x ** 0.5), [INF, NAN, 0.0, 0.0, 2.0, INF, NAN])
    _same(_values(x ** -0.5), [0.0, NAN, INF, INF, 0.5, 0.0, NAN])
    _same(_values(x.clone().pow_(0.5)), [INF, NAN, 0.0, 0.0, 2.0, INF, NAN])


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16])
def test_pow_zero_dim_tensor_exponent_is_c_pow(dtype):
    x = ember.tensor(EDGES, dtype=dtype)
    _same(_values(x ** ember.tensor(0.5, dtype=dtype)), [INF, NAN, 0.0, 0.0, 2.0, INF, NAN])
    _same(_values(x ** ember.tensor(0.5, dtype=ember.float64)), [INF, NAN, 0.0, 0.0, 2.0, INF, NAN])


def test_pow_16_bit_number_exponent_must_fit_and_is_rounded():
    h = ember.tensor([2.0], dtype=ember.float16)
    for e in (70000.0, 1e30, 70000):
        with pytest.raises(RuntimeError, match="value cannot be converted to type c10::Half "
                                               "without overflow"):
            h ** e
    with pytest.raises(RuntimeError, match="c10::BFloat16 without overflow"):
        ember.tensor([2.0], dtype=ember.bfloat16) ** 1e300
    assert _values(ember.tensor([1e-30], dtype=ember.bfloat16) ** 0.3333) == \
        [pytest.approx(9.5497e-11, rel=1e-3)]       # 0.3333 rounds to bfloat16's 0.333984375
    assert _values(1e30 ** ember.tensor([0.0, 1.0], dtype=ember.float16)) == [1.0, INF]


def test_pow_number_base_gradients():
    x = ember.tensor([-1.0, -0.0, 0.0, 1.0, INF], dtype=ember.float64, requires_grad=True)
    (0 ** x).sum().backward()
    _same(_values(x.grad), [-INF, 0.0, 0.0, 0.0, 0.0])       # flat in x >= 0 at base 0
    x.grad = None
    ((-2.0) ** x).sum().backward()                  # log(-2) is NaN for a real exponent
    assert all(math.isnan(v) for v in _values(x.grad))


def test_pow_gradient_at_minus_zero_half_power():
    x = ember.tensor([-0.0, 0.0, 4.0, -INF], dtype=ember.float64, requires_grad=True)
    (x ** 0.5).sum().backward()
    _same(_values(x.grad), [-INF, INF, 0.25, NAN])


def test_pow_of_narrow_ints_wraps_a_number_base_and_keeps_a_tensor_exponents_c_semantics():
    exponent = ember.tensor([1, 2], dtype=ember.int8)
    assert ember.pow(300, exponent).tolist() == [44, -112]      # 300 wraps to 44 first
    assert ember.pow(-1, ember.tensor([-1, 2], dtype=ember.int8)).tolist() == [-1, 1]
    base = ember.tensor([2, 3], dtype=ember.int8)
    assert (base ** ember.tensor(-1)).tolist() == [0, 0]        # a tensor exponent: C's pow
    assert (base ** 7).tolist() == [-128, -117]
