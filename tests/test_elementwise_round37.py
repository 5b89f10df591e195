"""Regression tests for the elementwise-math bugs the round-37 differential fuzzer found
(tests/parity/_elementwise_fuzz_round37_gen.py), with PyTorch's values and messages."""

import warnings

import pytest

import ember


def _raises(exc, text, fn, *args, **kwargs):
    with pytest.raises(exc) as info:
        fn(*args, **kwargs)
    assert str(info.value).split("\n")[0] == text


# --- out=: the result type's cast (and autograd) are checked before the kernel's dtype --------

def test_out_cast_checked_before_kernel_refusal():
    _raises(RuntimeError, "result type ComplexFloat can't be cast to the desired output type Long",
            ember.special.airy_ai, ember.ones(2, dtype=ember.complex64),
            out=ember.empty(0, dtype=ember.int64))
    _raises(RuntimeError, "result type Long can't be cast to the desired output type Bool",
            ember.special.gammaincc, ember.ones(2, dtype=ember.int64),
            ember.ones(2, dtype=ember.int64), out=ember.empty(0, dtype=ember.bool))
    _raises(RuntimeError, "result type Half can't be cast to the desired output type Long",
            ember.special.modified_bessel_i1, ember.ones(2, dtype=ember.float16),
            out=ember.empty(0, dtype=ember.int64))
    # a castable out: the kernel's own refusal
    _raises(NotImplementedError, "\"airy_ai_cpu\" not implemented for 'ComplexFloat'",
            ember.special.airy_ai, ember.ones(2, dtype=ember.complex64),
            out=ember.empty(0, dtype=ember.complex64))


def test_composite_refuses_before_out_checks():
    # PyTorch's ndtr is a composite of erf: erf's refusal comes before out='s cast
    _raises(NotImplementedError, "\"erf_vml_cpu\" not implemented for 'ComplexFloat'",
            ember.special.ndtr, ember.ones(2, dtype=ember.complex64),
            out=ember.empty(0, dtype=ember.int64))


def test_out_autograd_refusal_comes_first():
    x = ember.ones(2, dtype=ember.complex128, requires_grad=True)
    _raises(RuntimeError, "fmod(): functions with out=... arguments don't support automatic "
            "differentiation, but one of the arguments requires grad.",
            ember.fmod, x, 2, out=ember.empty(0, dtype=ember.bool))
    # gcd has no derivative: its kernel refuses the float first
    y = ember.ones(2, dtype=ember.float64, requires_grad=True)
    _raises(NotImplementedError, "\"gcd_cpu\" not implemented for 'Double'",
            ember.gcd, y, y, out=ember.empty(0))


def test_out_cast_overflow_does_not_warn():
    out = ember.empty(0, dtype=ember.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ember.special.exp2(ember.tensor([4, 63, 1], dtype=ember.uint8), out=out)
    assert out.tolist() == [16.0, float("inf"), 2.0]


# --- names -------------------------------------------------------------------------------------

def test_special_aliases_name_themselves_in_type_errors():
    _raises(TypeError, "special_gammainc(): argument 'other' (position 2) must be Tensor, not str",
            ember.special.gammainc, ember.ones(2), "a")
    _raises(TypeError, "special_expit() takes 1 positional argument but 2 were given",
            ember.special.expit, ember.ones(2), 1)
    _raises(TypeError, "special_round() takes 1 positional argument but 2 were given",
            ember.special.round, ember.ones(2), 1)
    assert ember.special.gammaincc.__name__ == "special_gammaincc"


def test_node_names_title_case_after_digits():
    x = ember.rand(3, dtype=ember.float64, requires_grad=True)
    assert ember.special.i0e(x).grad_fn.name() == "SpecialI0EBackward0"
    assert ember.special.i1e(x).grad_fn.name() == "SpecialI1EBackward0"
    assert ember.special.xlog1py(x, x).grad_fn.name() == "SpecialXlog1PyBackward0"
    assert ember.deg2rad(x).grad_fn.name() == "Deg2RadBackward0"
    assert ember.rad2deg(x).grad_fn.name() == "Rad2DegBackward0"
    assert ember.log1p(x).grad_fn.name() == "Log1PBackward0"


def test_scalar_overload_node_names():
    x = ember.rand(3, dtype=ember.float64, requires_grad=True)
    assert ember.special.xlog1py(2.0, x).grad_fn.name() == "SpecialXlog1PyBackward1"
    assert ember.special.xlog1py(x, 2.0).grad_fn.name() == "SpecialXlog1PyBackward2"
    assert ember.special.zeta(2.0, x).grad_fn.name() == "SpecialZetaBackward1"
    assert ember.special.zeta(x, 2.0).grad_fn.name() == "SpecialZetaBackward2"
    assert ember.xlogy(2, x).grad_fn.name() == "XlogyBackward1"


# --- round, polygamma, multigammaln, clamp: errors in PyTorch's order ------------------------

@pytest.mark.parametrize("dtype, decimals, kernel", [
    (ember.complex64, None, "round_vml_cpu"), (ember.complex64, 0, "round_vml_cpu"),
    (ember.complex64, 2, "round_cpu"), (ember.bool, 2, "round_cpu"),
    (ember.bool, None, "round_vml_cpu"), (ember.int32, 0, "round_vml_cpu"),
    (ember.int32, 3, "round_cpu")])
def test_round_refusals_name_the_decimals_kernel(dtype, decimals, kernel):
    kw = {} if decimals is None else {"decimals": decimals}
    name = str(dtype).split(".")[1]
    torch_name = {"complex64": "ComplexFloat", "bool": "Bool", "int32": "Int"}[name]
    _raises(NotImplementedError, f"\"{kernel}\" not implemented for '{torch_name}'",
            ember.round, ember.ones(2, dtype=dtype), **kw)


def test_round_out_dtype_checked_before_kernel():
    _raises(RuntimeError, "Found dtype Double but expected Int", ember.round,
            ember.ones(2, dtype=ember.int32), decimals=3, out=ember.empty(0, dtype=ember.float64))
    _raises(RuntimeError, "Found dtype Float but expected Long", ember.special.round,
            ember.ones(2, dtype=ember.int64), out=ember.empty(2))
    _raises(NotImplementedError, "\"round_vml_cpu\" not implemented for 'Long'",
            ember.special.round, ember.ones(2, dtype=ember.int64))
    assert ember.round(ember.tensor([3, -2])).tolist() == [3, -2]


def test_polygamma_complex_kernels_and_negative_n_first():
    c = ember.ones(2, dtype=ember.complex64)
    for n, kernel in ((0, "digamma"), (1, "trigamma"), (2, "polygamma")):
        _raises(NotImplementedError, f"\"{kernel}\" not implemented for 'ComplexFloat'",
                ember.special.polygamma, n, c)
    _raises(RuntimeError, "polygamma(n, x) does not support negative n.",
            ember.special.polygamma, -1, c)
    _raises(RuntimeError, "result type ComplexFloat can't be cast to the desired output type "
            "Float", ember.polygamma, 1, c, out=ember.empty(2))


def test_multigammaln_checks_and_layout():
    c = ember.ones(2, dtype=ember.complex64)
    _raises(RuntimeError, "p has to be greater than or equal to 1",
            ember.special.multigammaln, c, -1)
    _raises(NotImplementedError, "\"arange_cpu\" not implemented for 'ComplexFloat'",
            ember.special.multigammaln, c, 1, out=ember.empty(2, dtype=ember.int64))
    _raises(RuntimeError, "mvlgamma: result type Long can't be cast to the desired output type "
            "Float", ember.special.multigammaln, ember.ones(2, dtype=ember.int64), 2,
            out=ember.empty(2, dtype=ember.bool))
    y = ember.special.multigammaln(ember.full((4, 2), 3.0).t(), 2)
    assert y.stride() == (4, 1)
    assert abs(y[0, 0].item() - 1.5501950) < 1e-6     # log(pi)/2 + lgamma(3) + lgamma(2.5)


def test_clamp_complex_errors():
    _raises(RuntimeError, "torch.clamp: At least one of 'min' or 'max' must not be None",
            ember.clamp, ember.ones(2, dtype=ember.complex64))
    _raises(NotImplementedError, "\"clamp_cpu\" not implemented for 'ComplexFloat'",
            ember.clamp, ember.ones(2), min=ember.tensor(1j), max=ember.tensor(2j))


# --- values, layouts, gradients ---------------------------------------------------------------

def test_softmax_of_empty_integer_tensors():
    y = ember.special.softmax(ember.ones(2, 0, dtype=ember.uint8), 1)
    assert y.shape == (2, 0) and y.dtype == ember.uint8
    z = ember.special.log_softmax(ember.ones(2, 0, dtype=ember.bool), 0)
    assert z.shape == (2, 0) and z.dtype == ember.bool
    _raises(NotImplementedError, "\"softmax_lastdim_kernel_impl\" not implemented for 'Byte'",
            ember.softmax, ember.ones(2, 1, dtype=ember.uint8), 1)


def test_integer_pow_by_most_negative_exponent():
    base = ember.tensor([64, 1, -1, 2], dtype=ember.int8)
    got = ember.pow(base, ember.tensor(-128, dtype=ember.int8))
    assert got.tolist() == [0, 1, 1, 0]
    got = ember.pow(base, ember.tensor([-127, -127, -127, -128], dtype=ember.int8))
    assert got.tolist() == [0, 1, -1, 0]


def test_isreal_of_expanded_input_is_row_major():
    x = ember.ones(1, 3, 2).expand(4, 3, 2)
    assert ember.isreal(x).stride() == (6, 2, 1)
    assert ember.isreal(ember.ones(2, 3).t()).stride() == (1, 3)


def test_copysign_double_backward():
    a = ember.tensor([1.5, -2.0, 3.0], dtype=ember.float64, requires_grad=True)
    b = ember.tensor([-1.0, -1.0, 2.0], dtype=ember.float64, requires_grad=True)
    g, = ember.autograd.grad(ember.copysign(a, b).sum(), a, create_graph=True)
    assert g.tolist() == [-1.0, 1.0, 1.0] and g.requires_grad
    gg, = ember.autograd.grad(g.sum(), a)
    assert gg.tolist() == [0.0, 0.0, 0.0]
