"""OpInfo entries for ember/ops/unary_math.py."""

import math

import numpy as np
import scipy.special as sp

import ember
from tests.ops.opdb.core import (ALL, ALL_REAL, COMPLEX, FLOATS, INTS, LOW, ErrorInput, OpInfo,
                                 SampleInput, make, unary_samples)

ROUNDABLE = FLOATS + LOW + INTS
NO_BOOL = FLOATS + LOW + INTS + COMPLEX
INF, NAN = math.inf, math.nan
# values where PyTorch and NumPy/SciPy conventions could part: infinities, NaN, signed zeros
SPECIAL = (INF, -INF, NAN, -0.0, 0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.5, 1e-30)


def _as_float(x):
    """Integer and bool inputs compute in the default float dtype (float32), as in PyTorch."""
    x = np.asarray(x)
    return x.astype(np.float32) if x.dtype.kind in "iub" else x


def _float_ref(fn):
    return lambda x, *args, **kwargs: fn(_as_float(x), *args, **kwargs)


def _special(values=SPECIAL):
    """A sample of special values (floating and complex dtypes only)."""
    def sample(dtype, requires_grad):
        if dtype.is_floating_point or dtype.is_complex:
            yield SampleInput(ember.tensor(values, dtype=dtype), name="special")
    return sample


def _complex_grad(low=None, high=None, shapes=((4,), (2, 3))):
    """Complex128 samples for gradcheck (the generic check runs only float64 otherwise)."""
    def sample(dtype, requires_grad):
        for shape in shapes:
            yield SampleInput(make(shape, ember.complex128, requires_grad, low=low, high=high),
                              name=f"complex{list(shape)}")
    return sample


def _chain(*makers):
    def samples(dtype, requires_grad):
        for m in makers:
            yield from m(dtype, requires_grad)
    return samples


def _unary(name, ref, *, low=None, high=None, complex_range=None, **kw):
    """An entry for a FLOAT op (ints and bool compute in float32) on all dtypes."""
    samples = unary_samples(low=low, high=high)
    complex_samples = _complex_grad(*(complex_range or (low, high)))
    return OpInfo(name, _float_ref(ref), _chain(samples, _special()), dtypes=ALL,
                  result_dtype="float", grad_samples=_chain(samples, complex_samples),
                  gradgrad=True, **kw)


def _rsqrt_ref(x):
    return 1 / np.sqrt(x)


def _log1p_ref(x):
    x = np.asarray(x)
    if x.dtype.kind != "c":
        return np.log1p(x)
    wide = x.astype(np.complex128)
    series = wide - wide * wide / 2 + wide ** 3 / 3     # NumPy's complex log1p is inexact here
    return np.where(np.abs(wide) < 1e-4, series, np.log(1 + wide)).astype(x.dtype)


def _log1p_samples(dtype, requires_grad):
    yield from unary_samples(low=-0.5, high=4)(dtype, requires_grad)
    yield from _special()(dtype, requires_grad)
    if dtype.is_complex:
        yield SampleInput(ember.tensor([1e-10 + 1e-10j, -3e-9 + 2e-9j, 1e-30j, 0.4 - 0.2j],
                                       dtype=dtype), name="tiny")


def _sigmoid_ref(x):
    x = np.asarray(x)
    return 1 / (1 + np.exp(-x)) if x.dtype.kind == "c" else sp.expit(x)


def _sigmoid_samples(dtype, requires_grad):
    yield from unary_samples()(dtype, requires_grad)
    yield from _special((INF, -INF, NAN, 0.0, -100.0, 100.0, -1e4, 1e4, 30.0, -30.0))(
        dtype, requires_grad)


def _logit_ref(x, eps=None):
    if eps is not None and eps >= 0:
        x = np.where(x < eps, eps, np.where(x > 1 - eps, 1 - eps, x))     # eps > 0.5: not clip
    return np.log(x / (1 - x))


def _logit_samples(dtype, requires_grad):
    yield from unary_samples(low=0.05, high=0.95)(dtype, requires_grad)
    if dtype is ember.bool or not dtype.is_floating_point:
        yield SampleInput(make((5,), dtype), kwargs={"eps": 0.25}, name="int_eps")
        return
    values = (-0.5, 0.0, 0.05, 0.3, 0.5, 0.7, 0.95, 1.0, 1.5, INF, -INF, NAN)
    yield SampleInput(ember.tensor(values, dtype=dtype), name="special")
    yield SampleInput(ember.tensor(values, dtype=dtype), kwargs={"eps": 0.2}, name="eps")
    yield SampleInput(ember.tensor(values, dtype=dtype), kwargs={"eps": -1.0}, name="neg_eps")
    # eps > 0.5: below eps becomes eps, everything else 1 - eps
    yield SampleInput(ember.tensor((0.1, 0.5, 0.65, 0.75, 0.9, NAN), dtype=dtype),
                      kwargs={"eps": 0.7}, name="eps_above_half")
    # near 0.5 the logarithm cancels: 16-bit results show how the ratio was rounded
    yield SampleInput(ember.tensor((0.46, 0.48, 0.49, 0.4921875, 0.5, 0.51, 0.53), dtype=dtype),
                      name="near_half")


def _logit_grad_samples(dtype, requires_grad):
    yield from unary_samples(low=0.05, high=0.95)(dtype, requires_grad)
    # with eps the gradient is 0 where the input was clamped (away from the kinks)
    t = ember.tensor([-0.5, 0.05, 0.1, 0.3, 0.5, 0.7, 0.9, 0.95, 1.3], dtype=dtype)
    yield SampleInput(t.requires_grad_(requires_grad), kwargs={"eps": 0.2}, name="eps")
    yield SampleInput(make((2, 3), dtype, requires_grad, low=0.25, high=0.75),
                      kwargs={"eps": 0.2}, name="eps_inside")


def _real_unary(name, ref, *, low=None, high=None, **kw):
    """An entry for a real-only FLOAT op (special functions)."""
    samples = unary_samples(low=low, high=high)
    return OpInfo(name, _float_ref(ref), _chain(samples, _special()),
                  dtypes=ALL_REAL, result_dtype="float", grad_samples=samples, gradgrad=True,
                  **kw)


def _complex_error(name, kernel):
    def errors():
        yield ErrorInput(SampleInput(ember.tensor([1 + 1j])), NotImplementedError,
                         f"\"{kernel}\" not implemented for 'ComplexFloat'")
    return errors


def _erfinv_ref(x):
    return np.where(x == 0, x, sp.erfinv(x))


def _lgamma_ref(x):
    return np.where(np.isneginf(x), np.inf, sp.gammaln(x))


def _gamma_samples(dtype, requires_grad):
    yield from unary_samples(low=0.1, high=9)(dtype, requires_grad)
    if dtype.is_floating_point:
        yield SampleInput(ember.tensor([-2.5, -0.5, -1.25, -7.75, 0.0, -0.0, -1.0, -3.0, INF, -INF,
                                        NAN], dtype=dtype), name="negative")


def _gamma_grad_samples(dtype, requires_grad):
    yield from unary_samples(low=0.1, high=9)(dtype, requires_grad)
    yield SampleInput(ember.tensor([-2.5, -0.5, -1.25, -3.75], dtype=dtype)
                      .requires_grad_(requires_grad), name="negative")


def _polygamma_samples(dtype, requires_grad):
    for n in (0, 1, 2, 3):
        for shape in ((4,), (), (0,)):
            yield SampleInput(n, (make(shape, dtype, requires_grad, low=0.5, high=5),),
                              name=f"n{n}{list(shape)}")
    yield SampleInput(1, (make((3, 4), dtype, requires_grad, low=0.5, high=5,
                                noncontiguous=True),), name="noncontiguous")
    if dtype.is_floating_point and not requires_grad:
        yield SampleInput(2, (ember.tensor([-2.5, -0.5, NAN, 0.0, -0.0], dtype=dtype),),
                          name="special")


def _polygamma_ref(n, x):
    return sp.polygamma(n, _as_float(x))


def _polygamma_errors():
    yield ErrorInput(SampleInput(-1, (ember.ones(2),)), RuntimeError,
                     r"polygamma\(n, x\) does not support negative n")
    yield ErrorInput(SampleInput(2, (ember.tensor([1 + 1j]),)), NotImplementedError,
                     "\"polygamma\" not implemented for 'ComplexFloat'")


def _rounding_errors(name):
    def errors():
        yield ErrorInput(SampleInput(ember.tensor([True])), NotImplementedError,
                         f"\"{name}_vml_cpu\" not implemented for 'Bool'")
        if name == "round":
            yield ErrorInput(SampleInput(ember.tensor([1 + 1j])), NotImplementedError,
                             "\"round_vml_cpu\" not implemented for 'ComplexFloat'")
            yield ErrorInput(SampleInput(ember.tensor([1, 2]), kwargs={"decimals": 1}),
                             NotImplementedError, "\"round_cpu\" not implemented for 'Long'")
            # decimals given, even 0, is PyTorch's round.decimals overload: no integer kernel
            yield ErrorInput(SampleInput(ember.tensor([1, 2]), kwargs={"decimals": 0}),
                             NotImplementedError, "\"round_vml_cpu\" not implemented for 'Long'")
        else:
            yield ErrorInput(SampleInput(ember.tensor([1 + 1j])), NotImplementedError,
                             f"{name} is not supported for complex inputs")
        yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.float8_e4m3fn)),
                         NotImplementedError, "not implemented for 'Float8_e4m3fn'")
    return errors


def _round_ref(x, decimals=0):
    return np.round(x, decimals)


def _round_samples(dtype, requires_grad):
    yield from unary_samples()(dtype, requires_grad)
    if dtype.is_floating_point:
        yield from _special((0.5, 1.5, 2.5, -0.5, -2.5, 3.5, INF, -INF, NAN, -0.0))(
            dtype, requires_grad)
        for decimals in (2, -1, 1):
            yield SampleInput(make((2, 5), dtype, requires_grad, low=-300, high=300),
                              kwargs={"decimals": decimals}, name=f"decimals{decimals}")
        yield SampleInput(ember.tensor([25.0, 35.0, -25.0, 0.125, 2.675], dtype=dtype),
                          kwargs={"decimals": -1}, name="tens_half_even")


def _rounding(name, ref, samples=None, **kw):
    return OpInfo(name, ref, samples or _chain(unary_samples(), _special()),
                  dtypes=ROUNDABLE, error_inputs=_rounding_errors(name), **kw)


def _classify_samples(dtype, requires_grad):
    yield from unary_samples()(dtype, requires_grad)
    yield from _special()(dtype, requires_grad)
    if dtype.is_complex:
        yield SampleInput(ember.tensor([complex(INF, 0), complex(0, -INF), complex(NAN, 1),
                                        complex(1, NAN), 1 + 2j], dtype=dtype), name="parts")


def _classify_errors(name, no_float8, complex_ok, kernel=None):
    def errors():
        for dtype in no_float8:
            yield ErrorInput(SampleInput(ember.ones(2, dtype=dtype)), NotImplementedError,
                             f"\"{kernel or name}\" not implemented for '{dtype._torch_name}'")
        if not complex_ok:
            yield ErrorInput(SampleInput(ember.tensor([1 + 1j])), RuntimeError,
                             f"{name} does not support complex inputs")
        yield ErrorInput(SampleInput(1.5), TypeError,
                         fr"{name}\(\): argument 'input' \(position 1\) must be Tensor, not float")
    return errors


def _classifier(name, ref, *, no_float8=(), kernel=None, complex_ok=True, samples=None):
    return OpInfo(name, ref, samples or _classify_samples,
                  dtypes=ALL if complex_ok else ALL_REAL, result_dtype="bool", grad=False,
                  error_inputs=_classify_errors(name, no_float8, complex_ok, kernel))


def _float8_samples(*dtypes):
    """_classify_samples, and (with the float32 ones) float8 inputs of ``dtypes``."""
    def samples(dtype, requires_grad):
        yield from _classify_samples(dtype, requires_grad)
        if dtype is ember.float32:
            for f8 in dtypes:
                yield SampleInput(ember.tensor([1.0, NAN, 0.5, INF, -INF]).to(f8),
                                  name=f"{f8.name}")
    return samples


def _nan_to_num_ref(x, nan=0.0, posinf=None, neginf=None):
    x = np.asarray(x)
    real = x.real.dtype if x.dtype.kind in "fc" else None
    if real is None:
        return x
    info = np.finfo(real)
    return np.nan_to_num(x, nan=nan, posinf=info.max if posinf is None else posinf,
                         neginf=info.min if neginf is None else neginf)


def _nan_to_num_samples(dtype, requires_grad):
    yield from unary_samples()(dtype, requires_grad)
    if dtype.is_floating_point or dtype.is_complex:
        values = (INF, -INF, NAN, 1.0, -0.0, 3.5)
        if dtype.is_complex:
            values = (complex(INF, NAN), complex(NAN, -INF), complex(1, INF), 2 - 1j)
        t = ember.tensor(values, dtype=dtype)
        if dtype in LOW:
            # the reference sees float32, whose max is not the default for 16-bit floats
            yield SampleInput(t, kwargs={"posinf": 100.0, "neginf": -200.0}, name="special")
        else:
            yield SampleInput(t, name="special")
        yield SampleInput(t, kwargs={"nan": 1.5, "posinf": 9.0, "neginf": -9.0}, name="fills")
    else:
        yield SampleInput(make((4,), dtype), kwargs={"nan": 1.5, "posinf": 3}, name="ignored")


def _nan_to_num_torch(x, *args, **kwargs):
    # PyTorch's out-of-place nan_to_num refuses to record complex outputs, while its in-place
    # form differentiates them with the same formula ember uses for both; refusing needs the
    # registry (the forward cannot see requires_grad), so torch is asked in its in-place form
    if x.is_complex() and x.requires_grad:
        return x.clone().nan_to_num_(*args, **kwargs)
    return x.nan_to_num(*args, **kwargs)


def _positive_errors():
    yield ErrorInput(SampleInput(ember.tensor([True, False])), RuntimeError,
                     r"The `\+` operator, on a bool tensor is not supported")


def _float_errors(name):
    def errors():
        yield ErrorInput(SampleInput(2.0), TypeError,
                         fr"{name}\(\): argument 'input' \(position 1\) must be Tensor, not float")
        yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.float8_e5m2)),
                         NotImplementedError, "not implemented for 'Float8_e5m2'")
    return errors


def _backward_samples(low, high):
    """(grad_output, output) samples of a fused backward op: outputs in [low, high]."""
    def samples(dtype, requires_grad):
        for shape in ((5,), (), (0,), (2, 3)):
            yield SampleInput(make(shape, dtype, requires_grad),
                              (make(shape, dtype, requires_grad, low=low, high=high),),
                              name=str(list(shape)))
        yield SampleInput(make((3, 4), dtype, requires_grad, noncontiguous=True),
                          (make((3, 4), dtype, requires_grad, low=low, high=high),),
                          name="noncontiguous")
        yield SampleInput(make((3, 1), dtype, requires_grad),
                          (make((3, 4), dtype, requires_grad, low=low, high=high),),
                          name="broadcast_grad")
    return samples


def _tanh_backward_ref(grad, out):
    return grad * np.conj(1 - out * out)


def _sigmoid_backward_ref(grad, out):
    return grad * np.conj(out * (1 - out))


def _aten(name):
    """A torch ATen op by name (for ops torch has only under torch.ops.aten)."""
    def call(*args):
        import torch
        return getattr(torch.ops.aten, name)(*args)
    return call


OPS = [
    _unary("exp", np.exp, error_inputs=_float_errors("exp")),
    _unary("exp2", np.exp2),
    _unary("expm1", np.expm1),
    _unary("log", np.log, low=0.5, high=4, error_inputs=_float_errors("log")),
    _unary("log2", np.log2, low=0.5, high=4),
    _unary("log10", np.log10, low=0.5, high=4),
    OpInfo("log1p", _float_ref(_log1p_ref), _log1p_samples, dtypes=ALL, result_dtype="float",
           grad_samples=_chain(unary_samples(low=-0.5, high=4), _complex_grad(-0.5, 4)),
           gradgrad=True),
    _unary("sqrt", np.sqrt, low=0.5, high=4),
    _unary("rsqrt", _rsqrt_ref, low=0.5, high=4),
    _unary("sin", np.sin, high=3),
    _unary("cos", np.cos, high=3),
    _unary("tan", np.tan, low=-1.2, high=1.2),
    _unary("asin", np.arcsin, low=-0.9, high=0.9),
    _unary("acos", np.arccos, low=-0.9, high=0.9),
    _unary("atan", np.arctan, low=-3, high=3),
    _unary("sinh", np.sinh, low=-3, high=3),
    _unary("cosh", np.cosh, low=-3, high=3),
    _unary("tanh", np.tanh, low=-3, high=3),
    _unary("asinh", np.arcsinh, low=-3, high=3),
    # complex samples with Re z < 0, where sqrt(z^2 - 1) has the wrong sign for the derivative
    _unary("acosh", np.arccosh, low=1.25, high=4, complex_range=(-3, -0.5)),
    _unary("atanh", np.arctanh, low=-0.9, high=0.9),
    OpInfo("sigmoid", _float_ref(_sigmoid_ref), _sigmoid_samples, dtypes=ALL,
           result_dtype="float", grad_samples=_chain(unary_samples(), _complex_grad(-3, 3)),
           gradgrad=True),
    OpInfo("_tanh_backward", _tanh_backward_ref, _backward_samples(-1, 1),
           dtypes=FLOATS + LOW + COMPLEX, gradgrad=True, torch_op=_aten("tanh_backward")),
    OpInfo("_sigmoid_backward", _sigmoid_backward_ref, _backward_samples(0, 1),
           dtypes=FLOATS + LOW + COMPLEX, gradgrad=True, torch_op=_aten("sigmoid_backward")),
    OpInfo("logit", _float_ref(_logit_ref), _logit_samples, dtypes=ALL_REAL,
           result_dtype="float", grad_samples=_logit_grad_samples, gradgrad=True,
           error_inputs=_complex_error("logit", "logit_cpu")),
    _real_unary("erf", sp.erf, low=-3, high=3, error_inputs=_complex_error("erf", "erf_vml_cpu")),
    _real_unary("erfc", sp.erfc, low=-3, high=3,
                error_inputs=_complex_error("erfc", "erfc_vml_cpu")),
    _real_unary("erfinv", _erfinv_ref, low=-0.9, high=0.9,
                error_inputs=_complex_error("erfinv", "erfinv_vml_cpu")),
    OpInfo("lgamma", _float_ref(_lgamma_ref), _gamma_samples, dtypes=ALL_REAL,
           result_dtype="float", grad_samples=_gamma_grad_samples, gradgrad=True,
           error_inputs=_complex_error("lgamma", "lgamma_vml_cpu")),
    OpInfo("digamma", _float_ref(sp.digamma), _gamma_samples, dtypes=ALL_REAL,
           result_dtype="float", grad_samples=_gamma_grad_samples, gradgrad=True,
           error_inputs=_complex_error("digamma", "digamma")),
    OpInfo("polygamma", _polygamma_ref, _polygamma_samples, dtypes=ALL_REAL,
           result_dtype="float", gradgrad=True, error_inputs=_polygamma_errors),
    _rounding("floor", np.floor),
    _rounding("ceil", np.ceil),
    _rounding("trunc", np.trunc),
    _rounding("round", _round_ref, _round_samples),
    _classifier("isnan", np.isnan,
                samples=_float8_samples(ember.float8_e4m3fn, ember.float8_e5m2)),
    _classifier("isinf", np.isinf, no_float8=(ember.float8_e4m3fn,),
                samples=_float8_samples(ember.float8_e5m2)),
    _classifier("isfinite", np.isfinite, no_float8=(ember.float8_e4m3fn,),
                samples=_float8_samples(ember.float8_e5m2)),
    _classifier("isposinf", np.isposinf, no_float8=(ember.float8_e4m3fn, ember.float8_e5m2),
                kernel="isposinf_cpu", complex_ok=False),
    _classifier("isneginf", np.isneginf, no_float8=(ember.float8_e4m3fn, ember.float8_e5m2),
                kernel="isneginf_cpu", complex_ok=False),
    OpInfo("nan_to_num", _nan_to_num_ref, _nan_to_num_samples, dtypes=ALL,
           grad_samples=unary_samples(), gradgrad=True, torch_op=_nan_to_num_torch,
           skips=("grad_complex",)),       # PyTorch refuses complex gradients of nan_to_num
    OpInfo("positive", np.positive, _chain(unary_samples(), _special()), dtypes=NO_BOOL,
           gradgrad=True, error_inputs=_positive_errors),
]
