"""ember.special as a namespace, and what the OpInfo checks cannot express: gradients that
PyTorch refuses, in-place and out= dtype rules, bit-exact 16-bit results, PyTorch's values
at complex infinities, and softmax at extreme inputs."""

import math

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.special as S
from ember._host_values import host_values

INF, NAN = math.inf, math.nan

# every public name of torch.special (PyTorch 2.13)
TORCH_SPECIAL = """airy_ai bessel_j0 bessel_j1 bessel_y0 bessel_y1 chebyshev_polynomial_t
chebyshev_polynomial_u chebyshev_polynomial_v chebyshev_polynomial_w digamma entr erf erfc
erfcx erfinv exp2 expit expm1 gammainc gammaincc gammaln hermite_polynomial_h
hermite_polynomial_he i0 i0e i1 i1e laguerre_polynomial_l legendre_polynomial_p log1p log_ndtr
log_softmax logit logsumexp modified_bessel_i0 modified_bessel_i1 modified_bessel_k0
modified_bessel_k1 multigammaln ndtr ndtri polygamma psi round scaled_modified_bessel_k0
scaled_modified_bessel_k1 shifted_chebyshev_polynomial_t shifted_chebyshev_polynomial_u
shifted_chebyshev_polynomial_v shifted_chebyshev_polynomial_w sinc softmax spherical_bessel_j0
xlog1py xlogy zeta""".split()


def test_namespace_has_every_torch_special_function():
    missing = [name for name in TORCH_SPECIAL if not callable(getattr(S, name, None))]
    assert not missing


@pytest.mark.parametrize("name,target", [
    ("expit", "sigmoid"), ("gammaln", "lgamma"), ("psi", "digamma"), ("erf", "erf"),
    ("multigammaln", "mvlgamma"), ("gammainc", "igamma"), ("gammaincc", "igammac"),
    ("logsumexp", "logsumexp"), ("softmax", "softmax"), ("i0", "i0"), ("xlogy", "xlogy")])
def test_top_level_ops_are_reexported(name, target):
    # each its own entry point of the same op, whose TypeErrors name special_<name>
    ours, top = getattr(S, name), getattr(ember, target)
    assert getattr(ours, "_ember_op", ours) is getattr(top, "_ember_op", top)
    assert ours.__name__ == f"special_{name}"


def test_special_only_ops_live_in_the_namespace():
    assert ember.special.i0e.__module__ == "ember.special"
    assert not hasattr(ember, "i0e") and not hasattr(ember.Tensor, "i0e")
    assert not hasattr(ember.Tensor, "logaddexp_") and not hasattr(ember.Tensor, "softmax_")


def test_methods_and_inplace_variants():
    x = ember.tensor([0.5, 1.5])
    for name in ("i0", "sinc", "deg2rad", "rad2deg"):
        assert ember.allclose(getattr(x.clone(), name + "_")(), getattr(ember, name)(x))
    assert ember.allclose((x + 1).mvlgamma_(2), ember.mvlgamma(x + 1, 2))
    assert ember.allclose((x + 1).igamma_(x), ember.igamma(x + 1, x))
    assert ember.equal(ember.tensor([4, 6]).gcd_(ember.tensor([6, 9])), ember.tensor([2, 3]))
    assert ember.equal(x.clone().ldexp_(ember.tensor([1, 2])), ember.tensor([1.0, 6.0]))
    assert x.softmax(0).sum().item() == pytest.approx(1.0)
    assert x.frexp().exponent.tolist() == [0, 1]


@pytest.mark.parametrize("fn", [S.bessel_j0, S.airy_ai, S.modified_bessel_k0,
                                lambda x: S.chebyshev_polynomial_t(x, 3),
                                lambda x: S.hermite_polynomial_h(x, x)])
def test_functions_without_derivative_give_outputs_that_need_no_grad(fn):
    x = ember.tensor([0.5, 1.5], dtype=ember.float64, requires_grad=True)
    out = fn(x)
    assert not out.requires_grad and out.grad_fn is None


@pytest.mark.parametrize("fn,message", [
    (S.zeta, "the derivative for 'zeta' is not implemented."),
    (ember.igamma, "the derivative for 'igamma: input' is not implemented."),
    (ember.igammac, "the derivative for 'igammac: input' is not implemented.")])
def test_derivatives_pytorch_does_not_implement(fn, message):
    a = ember.tensor([2.0, 3.0], requires_grad=True)
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(NotImplementedError, match=message):
        fn(a, x).sum().backward()
    out = fn(a.detach(), x)                 # the second argument alone is differentiable
    out.sum().backward()
    assert x.grad is not None and bool((x.grad != 0).all())


def test_float_power_inplace_and_out_need_double_precision():
    with pytest.raises(RuntimeError, match="the base given to float_power_ has dtype Float but "
                                           "the operation's result requires dtype Double"):
        ember.tensor([1.0, 2.0]).float_power_(2)
    x = ember.tensor([1.0, 2.0], dtype=ember.float64)
    assert x.float_power_(2) is x and x.tolist() == [1.0, 4.0]
    with pytest.raises(RuntimeError, match="the output given to float_power has dtype Float but"):
        ember.float_power(x, 2, out=ember.empty(0))
    out = ember.empty(0, dtype=ember.complex128)
    assert ember.float_power(x, 1j, out=out) is out and out.dtype is ember.complex128


@pytest.mark.parametrize("dtype,bits", [(np.float16, np.int16), (ml_dtypes.bfloat16, np.int16)])
def test_nextafter_steps_one_16_bit_ulp(dtype, bits):
    x = np.array([1.0, 1.0, 0.0, 0.0, INF, -INF, 65504.0, NAN], dtype=dtype)
    y = np.array([2.0, 0.0, 1.0, -1.0, 0.0, 0.0, INF, 1.0], dtype=dtype)
    ours = host_values(ember.nextafter(ember.from_numpy(x), ember.from_numpy(y)))
    assert ours.dtype == x.dtype
    want = np.nextafter(x, y)               # native 16-bit arithmetic, no float32 detour
    assert ours.view(bits)[:-1].tolist() == want.view(bits)[:-1].tolist()
    assert np.isnan(ours[-1])
    if dtype is np.float16:     # the values PyTorch gives, as bits
        assert ours.view(bits)[:4].tolist() == [15361, 15359, 1, -32767]


def test_complex_logaddexp_at_infinities_matches_pytorch():
    a = ember.tensor([complex(-INF, 1), complex(INF, INF), complex(INF, 1), complex(INF, 2),
                      complex(-INF, 3), complex(1e3, 2), complex(NAN, 0)], dtype=ember.complex128)
    b = ember.tensor([complex(-INF, 2), 1 + 0j, complex(INF, 2), complex(INF, NAN), 1 + 1j,
                      complex(1e3, -1), 1 + 0j], dtype=ember.complex128)
    got = ember.logaddexp(a, b).tolist()
    want = [complex(-INF, 2), complex(INF, INF), complex(INF, NAN), complex(NAN, NAN), 1 + 1j,
            998.0443635265815 + 0.5000000000000002j, complex(NAN, NAN)]
    for g, w in zip(got, want):
        for part_g, part_w in ((g.real, w.real), (g.imag, w.imag)):
            assert (math.isnan(part_g) and math.isnan(part_w)) or part_g == pytest.approx(part_w)


def test_complex_logcumsumexp_starts_from_log_zero():
    x = ember.tensor([complex(-INF, 1), complex(-INF, 2), 1 + 1j, complex(INF, 0), 2 + 0j])
    assert ember.logcumsumexp(x, 0).tolist() == [complex(-INF, 0), complex(-INF, 0), 1 + 1j,
                                                 complex(INF, 0), complex(INF, 0)]


def test_softmax_is_stable_and_sums_to_one():
    x = ember.tensor([[1e4, 1e4 - 1, -1e4], [-1e4, -1e4, -1e4]])
    out = ember.softmax(x, 1)
    assert ember.isfinite(out).all()
    assert ember.allclose(out.sum(1), ember.ones(2))
    assert out[1].tolist() == pytest.approx([1 / 3] * 3)
    log = ember.log_softmax(x, 1)
    assert log[0, 0].item() == pytest.approx(-math.log1p(math.exp(-1)), rel=1e-6)
    assert log[0, 2].item() == pytest.approx(-2e4 - math.log1p(math.exp(-1)), rel=1e-6)


def test_softmax_dtype_argument_casts_first_and_grads_come_back_in_the_input_dtype():
    x = ember.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    out = ember.softmax(x, -1, dtype=ember.float64)
    assert out.dtype is ember.float64
    out[0, 0].backward()
    p = out.detach()[0]
    want = [p[0] * (1 - p[0]), -p[0] * p[1], -p[0] * p[2]]
    assert x.grad.dtype is ember.float32
    assert x.grad[0].tolist() == pytest.approx([w.item() for w in want], rel=1e-6)
    assert ember.softmax(ember.tensor([1, 2]), 0, dtype=ember.float32).dtype is ember.float32


def test_softmax_double_backward():
    x = ember.tensor([[0.3, -1.2, 2.0], [1.0, 1.0, -0.5]], dtype=ember.float64,
                     requires_grad=True)
    for fn in (ember.softmax, ember.log_softmax):
        assert ember.autograd.gradgradcheck(lambda t, fn=fn: fn(t, 1), [x])
        assert ember.autograd.gradgradcheck(lambda t, fn=fn: fn(t, 0), [x])


def test_log_softmax_gradient_at_minus_infinity():
    x = ember.tensor([-INF, -INF, 1.0], requires_grad=True)
    ember.log_softmax(x, 0).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, -2.0]


def test_frexp_named_result():
    m, e = ember.frexp(ember.tensor([8.0, -0.375]))
    assert m.tolist() == [0.5, -0.75] and e.tolist() == [4, -1] and e.dtype is ember.int32
    result = ember.frexp(ember.tensor([3.0]))
    assert result.mantissa.tolist() == [0.75] and result.exponent.tolist() == [2]
    assert repr(result).startswith("ember.return_types.frexp(\nmantissa=")


def test_ldexp_keeps_integer_exponents_exact():
    x = ember.tensor([1e-30, 1.5], dtype=ember.float32)
    assert ember.ldexp(x, ember.tensor([200, -1])).tolist() == pytest.approx(
        [1e-30 * 2.0 ** 200, 0.75], rel=1e-6)
    assert ember.ldexp(x, ember.tensor(200.0, dtype=ember.float64))[0].item() == INF


def test_polynomial_degrees_truncate_and_invalid_degrees_give_zero():
    x = ember.tensor([0.5] * 6, dtype=ember.float64)
    n = ember.tensor([2.9, -1.0, NAN, INF, -INF, 3.0], dtype=ember.float64)
    assert S.chebyshev_polynomial_t(x, n).tolist() == pytest.approx([-0.5, 0, 0, 0, 0, -1.0])
    # the trigonometric form at high degree agrees with the recurrence
    x = ember.tensor([0.3, -0.7], dtype=ember.float64)
    assert S.chebyshev_polynomial_t(x, 25).tolist() == pytest.approx(
        [math.cos(25 * math.acos(0.3)), math.cos(25 * math.acos(-0.7))], rel=1e-12)


@pytest.mark.parametrize("y,want", [(2.0, math.log(3.0)), (-1.0, 0.0), (-2.0, 0.0), (NAN, 0.0)])
def test_xlog1py_gradient_at_zero_input(y, want):
    x = ember.tensor([0.0], dtype=ember.float64, requires_grad=True)
    S.xlog1py(x, y).sum().backward()
    assert x.grad.item() == pytest.approx(want)
    x.grad = None
    S.xlog1py(x, ember.tensor([y], dtype=ember.float64)).sum().backward()
    if math.isnan(y):           # a NaN element of a tensor is not held at 0, as in PyTorch
        assert math.isnan(x.grad.item())
    else:
        assert x.grad.item() == pytest.approx(want)
