"""Regressions found by differential fuzzing against PyTorch (audit round 13): unary ops and
their float64 gradients at edge values (subnormals, -0.0, NaN, huge), and the strides of
chains of shape ops."""

import math

import pytest

import ember
from tests.parity._compare import same_floats

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

SUBNORMALS = [0.0, 5e-324, -5e-324, 1e-310, 1e-8, 0.5]


def _same(a, b):
    """Assert two lists of floats agree, NaN matching NaN, inf matching inf exactly."""
    assert same_floats(a, b, rtol=1e-8, atol=1e-300), (a, b)


def _grad(lib, fn, values, dtype, grad_out=None):
    x = lib.tensor(values, dtype=getattr(lib, dtype), requires_grad=True)
    y = fn(lib)(x)
    y.backward(lib.ones_like(y) if grad_out is None else lib.full_like(y, grad_out))
    return x.grad


@pytest.mark.parametrize("grad_out", [1.0, float("nan")])
def test_sinc_gradient_is_zero_where_x_squared_underflows(grad_out):
    # the textbook slope is 0 / 0 at subnormal x; PyTorch gives 0 there, whatever flows in
    def fn(lib):
        return lib.sinc
    got = _grad(ember, fn, SUBNORMALS, "float64", grad_out).tolist()
    _same(got, _grad(torch, fn, SUBNORMALS, "float64", grad_out).tolist())
    assert got[1:4] == [0.0, 0.0, 0.0]


def test_complex_sinc_gradient_is_zero_where_x_squared_underflows():
    def fn(lib):
        return lib.sinc
    got = _grad(ember, fn, [complex(v) for v in SUBNORMALS], "complex128").tolist()
    expected = _grad(torch, fn, [complex(v) for v in SUBNORMALS], "complex128").tolist()
    _same([z.real for z in got], [z.real for z in expected])
    _same([z.imag for z in got], [z.imag for z in expected])


@pytest.mark.parametrize("name", ["i1", "i1e"])
def test_bessel_i1_gradient_takes_its_limit_at_tiny_x(name):
    # I1'(0) = I1e'(0) = 1/2, used wherever |x| <= eps (1 / x overflows at subnormals) and at NaN
    values = [float("nan"), 0.0, 5e-324, -5e-324, 1e-310, 1e-17, 1e-3, 2.0, -3.0]

    def fn(lib):
        return getattr(lib.special, name)
    got = _grad(ember, fn, values, "float64").tolist()
    _same(got, _grad(torch, fn, values, "float64").tolist())
    assert got[:6] == [0.5] * 6


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_tanh_gelu_does_not_overflow_near_the_largest_float(dtype):
    def run(lib):
        x = lib.tensor([3e38, -3e38, 1e38, 2.0], dtype=getattr(lib, dtype))
        return lib.nn.functional.gelu(x, approximate="tanh").float().tolist()
    got = run(ember)
    _same(got, run(torch))
    assert math.isfinite(got[0])


def test_logit_gradient_at_negative_zero_is_positive_infinity():
    def fn(lib):
        return lib.logit
    values = [-0.0, 0.0, 1.0, 0.25]
    got = _grad(ember, fn, values, "float64").tolist()
    _same(got, _grad(torch, fn, values, "float64").tolist())
    assert got[0] == math.inf


EXPAND_CHAINS = {
    "keep_size_one": lambda lib: lib.arange(1.).expand(-1),
    "keep_size_one_new_lead": lambda lib: lib.zeros(2, 1, 3, 0, 2).expand(2, -1, -1, -1, -1),
    "expand_zero_dim": lambda lib: lib.zeros(()).view(1).expand(2, 1),
    "expand_other_dim": lambda lib: lib.zeros(1, 3, 2).expand(-1, -1, 2),
    "expand_leading": lambda lib: lib.zeros(2, 1).unsqueeze(0).expand(2, 2, 1),
    "expand_a_slice": lambda lib: lib.zeros(2, 4, 1)[:, 1:2].expand(2, 1, 3),
}


@pytest.mark.parametrize("name", sorted(EXPAND_CHAINS))
def test_expand_keeps_the_strides_of_the_dims_it_does_not_expand(name):
    # NumPy's broadcast gives every size-1 dim stride 0; PyTorch only the expanded ones
    got, expected = (EXPAND_CHAINS[name](lib) for lib in (ember, torch))
    assert (tuple(got.shape), got.stride()) == (tuple(expected.shape), expected.stride())


def test_expanded_size_one_dim_still_writes_through():
    base = ember.zeros(1, 3)
    view = base.expand(1, 3)
    view[0, 1] = 5.0
    assert base.tolist() == [[0.0, 5.0, 0.0]] and view.stride() == (3, 1)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_polygamma_at_infinities_is_nan_where_pytorch_series_is(n):
    # PyTorch gives NaN at -inf for n = 1 and at +inf for n >= 2, not the limits
    def run(lib):
        x = lib.tensor([math.inf, -math.inf, 1e300, 2.5], dtype=lib.float64)
        return lib.polygamma(n, x).tolist()
    got = run(ember)
    _same(got, run(torch))
    assert math.isnan(got[1] if n == 1 else got[0])


@pytest.mark.parametrize("p", [1, 2])
def test_mvlgamma_gradient_at_negative_zero_is_digamma_at_positive_zero(p):
    def fn(lib):
        return lambda x: lib.mvlgamma(x, p=p)
    values = [-0.0, 0.0, 3.0]
    got = _grad(ember, fn, values, "float64").tolist()
    _same(got, _grad(torch, fn, values, "float64").tolist())
    assert got[0] == -math.inf
