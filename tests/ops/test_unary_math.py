"""PyTorch behaviours of ops/unary_math.py that the generic OpInfo checks cannot see.

Expected values were taken from PyTorch 2.13 (CPU).
"""

import math

import numpy as np
import pytest

import ember
from ember.testing import assert_close

INF, NAN = math.inf, math.nan


def _grad(fn, x, **kwargs):
    x = x.detach().requires_grad_(True)
    fn(x, **kwargs).sum().backward()
    return x.grad


def test_signed_zero_and_infinity_edges():
    assert np.signbit(ember.erfinv(ember.tensor([-0.0])).item())
    assert ember.lgamma(ember.tensor([-INF])).item() == INF
    assert ember.rsqrt(ember.tensor([-0.0])).item() == -INF
    out = ember.log1p(ember.tensor([complex(-0.0, 0.0)])).numpy()[0]
    assert np.signbit(out.real) and out.imag == 0


def test_sigmoid_does_not_overflow():
    x = ember.tensor([-800.0, 800.0, 0.0], dtype=ember.float64)
    assert ember.sigmoid(x).tolist() == [0.0, 1.0, 0.5]
    tiny = ember.sigmoid(ember.tensor([-40.0], dtype=ember.float64)).item()
    assert tiny == pytest.approx(4.248354255291589e-18, rel=1e-12)


def test_logit_gradient_without_eps_is_nan_outside_unit_interval():
    g = _grad(ember.logit, ember.tensor([-1.5, 0.0, 1.0, 2.0, NAN]))
    assert_close(g, ember.tensor([NAN, INF, INF, NAN, NAN]), equal_nan=True)


def test_logit_gradient_is_zero_where_eps_clamps():
    x = ember.tensor([0.0, 1.0, 0.05, 0.5, 0.95, INF, NAN])
    assert_close(_grad(ember.logit, x, eps=0.1), ember.tensor([0.0, 0, 0, 4, 0, 0, NAN]),
                 equal_nan=True)
    # a negative eps means no clamping
    assert_close(_grad(ember.logit, x, eps=-1.0),
                 ember.tensor([INF, INF, 21.052631, 4.0, 21.052631, NAN, NAN]), equal_nan=True)


def test_logit_second_derivative_at_the_clamp_boundary():
    x = ember.tensor([0.1, 0.9, 0.3], dtype=ember.float64, requires_grad=True)
    g, = ember.autograd.grad(ember.logit(x, eps=0.1).sum(), x, create_graph=True)
    gg, = ember.autograd.grad(g.sum(), x)
    assert_close(g, ember.tensor([100 / 9, 100 / 9, 1 / 0.21], dtype=ember.float64))
    assert_close(gg, ember.tensor([-98.76543209876543, 98.76543209876543, -9.070294784580499],
                                  dtype=ember.float64))


@pytest.mark.parametrize("dtype,big", [(ember.float16, 65504.0), (ember.bfloat16, 3.3895e38),
                                       (ember.float32, 3.4028234663852886e38)])
def test_nan_to_num_defaults_to_the_dtype_range(dtype, big):
    out = ember.nan_to_num(ember.tensor([INF, NAN, -INF], dtype=dtype))
    assert out.dtype is dtype
    assert_close(out.float(), ember.tensor([big, 0.0, -big]), rtol=1e-4, atol=0)


def test_nan_to_num_replacement_is_cast_to_the_input_dtype():
    out = ember.nan_to_num(ember.tensor([INF], dtype=ember.float16), posinf=1e30)
    assert out.item() == INF
    c = ember.nan_to_num(ember.tensor([complex(INF, NAN)]))
    assert c.numpy()[0] == complex(np.finfo(np.float32).max, 0)
    assert ember.nan_to_num(ember.tensor([1, 2]), nan=2.5).tolist() == [1, 2]


def test_nan_to_num_parses_its_replacements_like_pytorch():
    x = ember.tensor([NAN, 1.0])
    assert x.nan_to_num(nan=None).tolist() == [0.0, 1.0]         # None is the default, 0
    assert x.clone().nan_to_num_(nan=ember.tensor(3.0)).tolist() == [3.0, 1.0]
    with pytest.raises(TypeError, match="^nan_to_num\\(\\): argument 'neginf' must be float, "
                       "not list$"):
        x.nan_to_num(neginf=[1.0])
    with pytest.raises(TypeError, match="argument 'posinf' must be float, not Tensor"):
        ember.nan_to_num(x, posinf=ember.tensor([3.0]))


def test_nan_to_num_gradient_is_zero_at_replaced_entries():
    assert _grad(ember.nan_to_num, ember.tensor([1.0, NAN, INF, -INF])).tolist() == [1, 0, 0, 0]


def test_round_decimals():
    x = ember.tensor([25.0, 35.0, -25.0, 0.5, 1.5])
    assert ember.round(x, decimals=-1).tolist() == [20.0, 40.0, -20.0, 0.0, 0.0]
    assert ember.round(x).tolist() == [25.0, 35.0, -25.0, 0.0, 2.0]
    assert math.isnan(ember.round(ember.tensor([1.5]), decimals=400).item())
    assert ember.round(ember.tensor([2.675, 1.005]), decimals=2).tolist() == \
        pytest.approx([2.68, 1.0])


def test_rounding_of_integers_keeps_dtype_and_values():
    x = ember.tensor([2 ** 62 + 1, -3], dtype=ember.int64)
    for name in ("floor", "ceil", "trunc", "round"):
        out = getattr(ember, name)(x)
        assert out.dtype is ember.int64 and out.tolist() == [2 ** 62 + 1, -3]
        y = x.clone()
        assert getattr(y, name + "_")().tolist() == [2 ** 62 + 1, -3]


def test_rounding_gradient_is_zero():
    x = ember.tensor([0.3, 1.7])
    for fn in (ember.floor, ember.ceil, ember.trunc, ember.round):
        assert _grad(fn, x).tolist() == [0.0, 0.0]


def test_inplace_float_op_on_integer_tensor_raises():
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        ember.tensor([1, 2]).exp_()


def test_inplace_variants_write_in_place():
    x = ember.tensor([0.25, 0.5])
    data = x.numpy()
    assert x.sqrt_() is x and x.tolist() == [0.5, pytest.approx(0.70710677)]
    assert x.numpy() is data or np.shares_memory(x.numpy(), data)
    h = ember.tensor([1.0, 2.0], dtype=ember.bfloat16).exp_()
    assert h.dtype is ember.bfloat16 and h.float().tolist() == [2.71875, 7.375]


def test_polygamma_method_inplace_and_higher_order():
    x = ember.tensor([1.0, 2.0], dtype=ember.float64)
    assert_close(x.polygamma(1), ember.tensor([math.pi ** 2 / 6, math.pi ** 2 / 6 - 1],
                                              dtype=ember.float64))
    y = x.clone()
    assert y.polygamma_(1) is y and y.tolist() == x.polygamma(1).tolist()
    x.requires_grad_(True)
    g, = ember.autograd.grad(ember.digamma(x).sum(), x, create_graph=True)
    gg, = ember.autograd.grad(g.sum(), x)
    assert_close(gg, ember.polygamma(2, x.detach()))
    assert gg.tolist()[0] == pytest.approx(-2.404113806319188, rel=1e-12)


def test_isnan_accepts_float8_but_isinf_does_not():
    x = ember.tensor([1.0, NAN]).to(ember.float8_e4m3fn)
    assert ember.isnan(x).tolist() == [False, True]
    with pytest.raises(NotImplementedError, match="\"isinf\" not implemented"):
        ember.isinf(x)


def test_classifiers_have_no_gradient():
    x = ember.tensor([1.0, INF], requires_grad=True)
    for fn in (ember.isnan, ember.isinf, ember.isfinite, ember.isposinf, ember.isneginf):
        out = fn(x)
        assert out.dtype is ember.bool and out.grad_fn is None and not out.requires_grad


def test_positive_shares_memory():
    x = ember.ones(3)
    y = ember.positive(x)
    y.add_(1)
    assert x.tolist() == [2.0, 2.0, 2.0]
    assert (+x).tolist() == [2.0, 2.0, 2.0]


def test_complex_gradients_match_pytorch():
    x = ember.tensor([1 + 1j, 2 - 0.5j], requires_grad=True)
    ember.sigmoid(x).abs().sum().backward()
    assert_close(x.grad, ember.tensor([0.1760 + 0.1631j, 0.0974 - 0.0461j]), atol=1e-4, rtol=0)
    z = ember.tensor([-2 + 0.1j], dtype=ember.complex128, requires_grad=True)
    ember.acosh(z).real.sum().backward()
    assert_close(z.grad, ember.tensor([-0.5744835805339177 + 0.03825658592979294j],
                                      dtype=ember.complex128))


def test_aliases():
    pairs = {"arccos": "acos", "arcsin": "asin", "arctan": "atan", "arccosh": "acosh",
             "arcsinh": "asinh", "arctanh": "atanh", "fix": "trunc"}
    for alias, name in pairs.items():
        assert getattr(ember, alias)._ember_op is getattr(ember, name)._ember_op
        assert getattr(ember.Tensor, alias + "_").__name__ == alias + "_"  # named so


def test_piecewise_constant_gradients_are_zeros_even_for_infinite_upstream_gradients():
    # PyTorch's derivatives of these are zeros: an inf or NaN arriving from above stays out
    upstream = ember.tensor([INF, NAN])
    cases = {"round": ember.round, "floor": ember.floor, "ceil": ember.ceil,
             "trunc": ember.trunc, "sign": ember.sign,
             "pow 0": lambda a: a ** 0, "fill_": lambda a: a.clone().fill_(2.0),
             "trunc div": lambda a: ember.div(a, a.detach() + 1, rounding_mode="trunc")}
    for name, fn in cases.items():
        x = ember.tensor([1.5, -0.5], requires_grad=True)
        (fn(x) * upstream).sum().backward()
        assert x.grad.tolist() == [0.0, 0.0], name
    x, y = ember.tensor([1.5, -0.5], requires_grad=True), ember.tensor([2.0, 1.0],
                                                                        requires_grad=True)
    (x.clone().copy_(y) * upstream).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]
    m = ember.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    (ember.linalg.matrix_power(m, 0) * upstream).sum().backward()
    assert m.grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]
