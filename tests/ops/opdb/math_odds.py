"""OpInfo entries for ember/ops/math_odds.py: float_power, ldexp, frexp, gcd, lcm, deg2rad,
rad2deg, nextafter, signbit, isreal."""

import math

import numpy as np

import ember
from tests.ops.opdb.core import (ALL, COMPLEX, FLOATS, INTS, LOW, ErrorInput, OpInfo,
                                 SampleInput, binary_samples, make, unary_samples)
from tests.ops.opdb.special_math import (REAL, as_float, chain, float8_error, float_ref,
                                         special_values)

INF, NAN = math.inf, math.nan


def _tensors_only(name, value=2, arg="other"):
    return ErrorInput(SampleInput(ember.ones(3), (value,)), TypeError,
                      fr"{name}\(\): argument '{arg}' \(position 2\) must be Tensor, not "
                      fr"{type(value).__name__}")


# --- float_power ------------------------------------------------------------------------------

def _is_complex(x):
    return isinstance(x, complex) or (isinstance(x, ember.Tensor) and x.is_complex())


def _float_power_result(dtype, sample):
    operands = (sample.input,) + sample.args
    return ember.complex128 if any(_is_complex(x) for x in operands) else ember.float64


def _float_power_ref(a, b):
    wide = np.complex128 if any(np.iscomplexobj(x) for x in (a, b)) else np.float64
    with np.errstate(all="ignore"):
        return np.power(np.asarray(a, dtype=wide), np.asarray(b, dtype=wide))


def _float_power_samples(dtype, requires_grad):
    yield from binary_samples(low=0.5, high=3, scalars=(2, 0.5, -1))(dtype, requires_grad)
    if requires_grad:
        return
    yield SampleInput(2.5, (make((2, 3), dtype, low=-2, high=3),), name="number_input")
    yield SampleInput(make((3,), dtype, low=0.5, high=3), (1j,), name="complex_exponent")
    if dtype.is_floating_point:
        base = ember.tensor([0.0, 0.0, -1.0, -8.0, 2.0, INF, NAN, 1.0], dtype=dtype)
        exponent = ember.tensor([0.0, -1.0, 0.5, 1 / 3, -INF, -0.5, 0.0, NAN], dtype=dtype)
        yield SampleInput(base, (exponent,), name="special")


def _float_power_errors():
    yield ErrorInput(SampleInput(2, (3,)), TypeError, "expected at least one Tensor")


# --- ldexp ------------------------------------------------------------------------------------

def _ldexp_result(dtype, sample):
    result = ember.result_type(sample.input, sample.args[0])
    return result if result.is_floating_point or result.is_complex else \
        ember.get_default_dtype()


def _ldexp_ref(x, e):
    x, e = np.asarray(x), np.asarray(e)
    with np.errstate(all="ignore"):
        if e.dtype.kind in "biu":
            # exact scaling, rounded once to the input's (floating) dtype
            dtype = x.dtype if x.dtype.kind in "fc" else np.float32
            if x.dtype.kind == "c":
                return (np.ldexp(x.real.astype(np.float64), e) +
                        1j * np.ldexp(x.imag.astype(np.float64), e)).astype(dtype)
            return np.ldexp(x.astype(np.float64), e).astype(dtype)
        # PyTorch multiplies by 2 ** other computed in other's dtype
        wide = np.complex128 if np.iscomplexobj(x) or np.iscomplexobj(e) else np.float64
        return np.asarray(x, dtype=wide) * np.exp2(e).astype(wide)


def _ldexp_samples(dtype, requires_grad):
    # PyTorch's gradient for an integer exponent is 2 ** other computed in integers, 0 for a
    # negative one (ember gives 2.0 ** other): the gradient samples keep exponents >= 0
    low = 0 if requires_grad else -10
    for sx, se in (((5,), (5,)), ((), ()), ((2, 3), (3,)), ((4, 5), (4, 1)), ((0, 3), (3,))):
        yield SampleInput(make(sx, dtype, requires_grad, low=-4, high=4),
                          (make(se, ember.int64, low=low, high=10),), name=f"int{list(sx)}")
    yield SampleInput(make((3, 4), dtype, requires_grad, noncontiguous=True),
                      (make((3, 4), ember.int32, low=low, high=5, noncontiguous=True),),
                      name="noncontiguous")
    if dtype.is_floating_point or dtype.is_complex:
        yield SampleInput(make((2, 3), dtype, requires_grad, low=-4, high=4),
                          (make((2, 3), dtype, requires_grad, low=-6, high=6),),
                          name="same_dtype")
    if requires_grad:
        if dtype is ember.float64:
            x = make((4,), ember.complex128, requires_grad, low=-2, high=2)
            yield SampleInput(x, (make((4,), ember.int64, low=0, high=3),), name="complex")
        return
    yield SampleInput(make((3,), dtype, low=-4, high=4), (ember.tensor(3.5),), name="zero_dim")
    if dtype in (ember.float32, ember.float64):
        # an integer exponent scales exactly where 2 ** e itself would overflow
        yield SampleInput(ember.tensor([1e-30, 1.0, 3.0, 0.0, INF, NAN], dtype=dtype),
                          (ember.tensor([100, 128, -150, 5000, -5000, 1]),), name="extreme")
        yield SampleInput(ember.tensor([1e-30, 1.0], dtype=ember.float64),
                          (ember.tensor([100.0, 128.0], dtype=ember.float32),),
                          name="float32_exponent")


def _ldexp_errors():
    yield _tensors_only("ldexp")
    f8 = float8_error("ldexp_cpu")
    yield ErrorInput(SampleInput(f8.sample.input, (ember.tensor([1, 2]),)), f8.error_type,
                     f8.match)


# --- frexp ------------------------------------------------------------------------------------

def _frexp_samples(dtype, requires_grad):
    yield from unary_samples()(dtype, requires_grad)
    if not requires_grad:
        tiny = 1e-6 if dtype in LOW else 1e-40      # subnormal in the 16-bit dtypes / float32
        values = [0.0, -0.0, 1.0, -3.0, 0.75, INF, -INF, NAN, tiny, 1000.0]
        yield SampleInput(ember.tensor(values, dtype=dtype), name="special")


def _frexp_errors():
    yield float8_error("frexp_cpu")
    for dtype in (ember.int64, ember.bool, ember.complex64):
        yield ErrorInput(SampleInput(ember.ones(2, dtype=dtype)), RuntimeError,
                         r"torch.frexp\(\) only supports floating-point dtypes")


# --- gcd, lcm ---------------------------------------------------------------------------------

def _gcd_samples(dtype, requires_grad):
    yield from binary_samples(low=-30, high=30, scalars=())(dtype, requires_grad)
    low = 0 if dtype is ember.uint8 else -12
    a = ember.tensor([0, 0, 12, low, 7, 9, 100, 27], dtype=dtype)
    b = ember.tensor([0, 5, 0, 18, 7, 1, 75, 45], dtype=dtype)
    yield SampleInput(a, (b,), name="special")
    yield SampleInput(a, (ember.tensor(6),), name="zero_dim_int64")
    if dtype in (ember.int8, ember.int64):
        info = ember.iinfo(dtype)
        extremes = ember.tensor([info.min, info.min, 100, 127], dtype=dtype)
        yield SampleInput(extremes, (ember.tensor([0, -1, 3, 2], dtype=dtype),),
                          name="wrapping")


def _integer_ref(fn):
    def ref(a, b):
        # a 0-dim operand takes the tensor's dtype (and wraps in it, as C does)
        return fn(a, b.astype(a.dtype) if b.ndim == 0 and a.ndim else b)
    return ref


def _integer_errors(name):
    def errors():
        for dtype in (ember.bool, ember.float32):
            t = ember.ones(2, dtype=dtype)
            yield ErrorInput(SampleInput(t, (t,)), NotImplementedError,
                             f"\"{name}_cpu\" not implemented for '{dtype._torch_name}'")
        yield ErrorInput(SampleInput(ember.tensor([4]), (6,)), TypeError,
                         fr"{name}\(\): argument 'other' \(position 2\) must be Tensor, not int")
    return errors


# --- deg2rad, rad2deg -------------------------------------------------------------------------

def _angle_errors(name):
    def errors():
        yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.complex64)), RuntimeError,
                         f"{name} is not supported for complex tensors.")
    return errors


def _angle(name, ref):
    return OpInfo(name, float_ref(ref), chain(unary_samples(low=-400, high=400),
                                              special_values()),
                  dtypes=REAL, result_dtype="float", grad_samples=unary_samples(),
                  gradgrad=True, error_inputs=_angle_errors(name))


def _rad2deg_ref(x):
    """PyTorch's rad2deg: a product with 180/pi rounded to float32 unless ``x`` is float64
    (NumPy's float32 loop uses another constant, 180 over a rounded pi)."""
    if x.dtype == np.float64:
        return x * (180 / np.pi)
    return x.astype(np.float32) * np.float32(180 / np.pi)


# --- nextafter --------------------------------------------------------------------------------

def _nextafter_samples(dtype, requires_grad):
    yield from binary_samples(scalars=())(dtype, requires_grad)
    if requires_grad or dtype in LOW:       # see the entry
        return
    a = ember.tensor([0.0, 1.0, 1.0, INF, NAN, -0.0, 0.0, 1.0, -INF], dtype=dtype)
    b = ember.tensor([1.0, 2.0, 0.0, 0.0, 1.0, 0.0, -0.0, NAN, 0.0], dtype=dtype)
    yield SampleInput(a, (b,), name="special")


def _nextafter_errors():
    t = ember.tensor([1, 2])
    yield ErrorInput(SampleInput(t, (t,)), NotImplementedError,
                     "\"nextafter_cpu\" not implemented for 'Long'")
    yield _tensors_only("nextafter", 2.0)


# --- signbit, isreal --------------------------------------------------------------------------

def _signbit_samples(dtype, requires_grad):
    yield from unary_samples()(dtype, requires_grad)
    if dtype.is_floating_point:
        yield SampleInput(ember.tensor([-0.0, 0.0, NAN, -NAN, -INF, INF, 1.0, -1e-30],
                                       dtype=dtype), name="special")


def _isreal_samples(dtype, requires_grad):
    yield from unary_samples()(dtype, requires_grad)
    if dtype.is_complex:
        values = [1 + 0j, 1 + 1j, complex(NAN, 0), complex(0, -0.0), complex(1, NAN),
                  complex(INF, 0), complex(0, INF)]
        yield SampleInput(ember.tensor(values, dtype=dtype), name="special")


def _isreal_ref(x):
    return np.isreal(x) if np.iscomplexobj(x) else np.ones(np.shape(x), dtype=bool)


def _signbit_errors():
    yield float8_error("signbit_cpu")
    yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.complex64)), NotImplementedError,
                     "signbit is not implemented for complex tensors.")


OPS = [
    OpInfo("float_power", _float_power_ref, _float_power_samples, dtypes=ALL,
           result_dtype=_float_power_result, gradgrad=True, error_inputs=_float_power_errors),
    OpInfo("ldexp", _ldexp_ref, _ldexp_samples, dtypes=ALL, result_dtype=_ldexp_result,
           gradgrad=True,
           error_inputs=_ldexp_errors,
           tol={d: (1.3e-5, 1e-5) for d in INTS + (ember.bool,)}),
    OpInfo("frexp", np.frexp, _frexp_samples, dtypes=FLOATS + LOW, gradgrad=True,
           error_inputs=_frexp_errors),
    OpInfo("gcd", _integer_ref(np.gcd), _gcd_samples, dtypes=INTS, grad=False,
           error_inputs=_integer_errors("gcd")),
    OpInfo("lcm", _integer_ref(np.lcm), _gcd_samples, dtypes=INTS, grad=False,
           error_inputs=_integer_errors("lcm")),
    _angle("deg2rad", np.deg2rad),
    _angle("rad2deg", _rad2deg_ref),
    # the reference sees 16-bit inputs as float32, whose next value is nearer: one 16-bit
    # step is within the tolerance, and special values go untested here
    # (tests/ops/test_special.py checks 16-bit results bit for bit)
    OpInfo("nextafter", np.nextafter, _nextafter_samples, dtypes=FLOATS + LOW, gradgrad=True,
           error_inputs=_nextafter_errors, tol={ember.float16: (2e-3, 1e-3)}),
    OpInfo("signbit", lambda x: np.signbit(as_float(x)), _signbit_samples, dtypes=REAL,
           result_dtype="bool", grad=False, error_inputs=_signbit_errors),
    OpInfo("isreal", _isreal_ref, _isreal_samples, dtypes=ALL, result_dtype="bool",
           grad=False),
]

__all__ = ["OPS", "COMPLEX"]
