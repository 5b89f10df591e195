"""OpInfo entries for ember/ops/arithmetic.py."""

import numpy as np
import scipy  # noqa: F401

import ember
from tests.ops.opdb.core import (ALL, ALL_REAL, COMPLEX, FLOATS, INTS, LOW, ErrorInput, OpInfo,
                                 SampleInput, binary_samples, make, unary_samples)

NUMERIC = FLOATS + LOW + INTS + COMPLEX        # everything but bool
SIGNED = FLOATS + LOW + (ember.int8, ember.int16, ember.int32, ember.int64) + COMPLEX


def _alpha_samples(dtype, requires_grad):
    yield from binary_samples()(dtype, requires_grad)
    if dtype is ember.bool:
        return
    alpha = 2 if not (dtype.is_floating_point or dtype.is_complex) else 0.5
    yield SampleInput(make((2, 3), dtype, requires_grad), (make((3,), dtype, requires_grad),),
                      {"alpha": alpha}, name="alpha")


def _add_ref(a, b, alpha=1):
    return np.add(a, b if alpha == 1 else np.multiply(b, alpha))


def _sub_ref(a, b, alpha=1):
    return np.subtract(a, b if alpha == 1 else np.multiply(b, alpha))


def _sub_errors():
    b = ember.tensor([True, False])
    yield ErrorInput(SampleInput(b, (b,)), RuntimeError, "with two bool tensors")
    yield ErrorInput(SampleInput(ember.tensor([1, 2]), (True,)), RuntimeError,
                     "with a bool tensor")
    # PyTorch subtracts by adding -alpha: -(-128) does not fit int8
    i8 = ember.tensor([1, 2], dtype=ember.int8)
    yield ErrorInput(SampleInput(i8, (i8,), {"alpha": -128}), RuntimeError,
                     "value cannot be converted to type int8_t without overflow")
    yield from _alpha_errors()


def _alpha_errors():
    f = ember.ones(2)
    yield ErrorInput(SampleInput(f, (f,), {"alpha": True}), RuntimeError,
                     "Boolean alpha only supported for Boolean results.")
    yield ErrorInput(SampleInput(f, (1,), {"alpha": 1j}), RuntimeError,
                     "For non-complex input tensors, argument alpha must not be a complex number.")
    yield ErrorInput(SampleInput(ember.tensor([1]), (2,), {"alpha": 1j}), RuntimeError,
                     "For integral input tensors, argument alpha must not be a floating point")
    yield ErrorInput(SampleInput(f, (f,), {"alpha": 1e300}), RuntimeError,
                     "value cannot be converted to type float without overflow")
    i8 = ember.tensor([1, 2], dtype=ember.int8)
    yield ErrorInput(SampleInput(i8, (i8,), {"alpha": 300}), RuntimeError,
                     "value cannot be converted to type int8_t without overflow")


def _rsub_ref(a, b, alpha=1):
    return _sub_ref(b, a, alpha)


def _rsub_samples(dtype, requires_grad):
    yield from _alpha_samples(dtype, requires_grad)
    if dtype is ember.bool:
        return
    yield SampleInput(make((2, 3), dtype, requires_grad), (5,), {"alpha": 2}, name="number_alpha")
    yield SampleInput(make((2, 3), dtype, requires_grad), (5, 3), name="positional_alpha")
    if not (dtype.is_floating_point or dtype.is_complex):
        # the number makes the result float32; alpha is checked against that
        yield SampleInput(make((2, 3), dtype), (2.5,), {"alpha": 2}, name="float_number")
    if dtype is ember.uint8:
        yield SampleInput(make((2, 3), dtype), (7,), {"alpha": 255}, name="wrapping_alpha")


def _rsub_dtype(dtype, sample):
    return ember.float32 if sample is not None and sample.name == "float_number" else dtype


def _rsub_errors():
    b = ember.tensor([True, False])
    yield ErrorInput(SampleInput(b, (b,)), RuntimeError, "with two bool tensors")
    yield ErrorInput(SampleInput(ember.tensor([1, 2]), (True,)), RuntimeError,
                     "with a bool tensor")
    yield ErrorInput(SampleInput(2, (ember.ones(2),)), TypeError,
                     r"rsub\(\): argument 'input' \(position 1\) must be Tensor, not int")
    # ``other`` is tensor a in the message: the result is other - alpha * input
    yield ErrorInput(SampleInput(ember.ones(2), (ember.ones(3),)), RuntimeError,
                     r"size of tensor a \(3\) must match the size of tensor b \(2\)")
    i8 = ember.tensor([1, 2], dtype=ember.int8)
    yield ErrorInput(SampleInput(i8, (i8,), {"alpha": -128}), RuntimeError,
                     "value cannot be converted to type int8_t without overflow")
    yield from _alpha_errors()


def _add_errors():
    i = ember.tensor([1, 2])
    yield ErrorInput(SampleInput(i, (i,), {"alpha": 0.5}), RuntimeError,
                     "alpha must not be a floating point")
    yield ErrorInput(SampleInput(ember.ones(2), (ember.ones(3),)), RuntimeError,
                     r"size of tensor a \(2\) must match the size of tensor b \(3\)")
    yield from _alpha_errors()


def _true_div_ref(a, b, rounding_mode=None):
    a, b = np.asarray(a), np.asarray(b)
    if rounding_mode is None:
        return np.true_divide(a, b)
    if rounding_mode == "trunc":
        if a.dtype.kind in "iu" and b.dtype.kind in "iu":
            return np.trunc(a.astype(np.float64) / b).astype(np.result_type(a, b))
        return np.trunc(np.true_divide(a, b))
    return np.floor_divide(a, b)


def _div_samples(dtype, requires_grad):
    nonzero = dict(exclude_zero=True)
    yield from binary_samples(**nonzero, scalars=(2, -3))(dtype, requires_grad)
    if dtype is not ember.bool and not dtype.is_complex:
        for mode in ("trunc", "floor"):
            yield SampleInput(make((2, 3), dtype, requires_grad),
                              (make((2, 3), dtype, requires_grad, exclude_zero=True),),
                              {"rounding_mode": mode}, name=mode)


def _div_dtype(dtype, sample):
    if sample is not None and sample.kwargs.get("rounding_mode"):
        return dtype
    return dtype if dtype.is_floating_point or dtype.is_complex else ember.float32


def _div_errors():
    i = ember.tensor([1, 2])
    yield ErrorInput(SampleInput(i, (ember.tensor([1, 0]),), {"rounding_mode": "floor"}),
                     RuntimeError, "ZeroDivisionError")
    yield ErrorInput(SampleInput(i, (i,), {"rounding_mode": "round"}), RuntimeError,
                     "rounding_mode to be one of None, 'trunc', or 'floor'")


def _int_divisor_errors(name):
    def errors():
        yield ErrorInput(SampleInput(ember.tensor([3, 4]), (0,)), RuntimeError,
                         "ZeroDivisionError")
    return errors


def _pow_samples(dtype, requires_grad):
    if dtype.is_floating_point or dtype.is_complex:
        yield from binary_samples(low=0.5, high=2, scalars=(2, 0.5, 0, -1.5))(dtype,
                                                                              requires_grad)
        yield SampleInput(make((3,), dtype, requires_grad, low=-2, high=2), (3,),
                          name="negative_base_int_exponent")
    else:
        yield from binary_samples(low=0, high=4, scalars=(2, 0))(dtype, requires_grad)


def _pow_ref(a, b):
    a = np.asarray(a)
    if a.dtype.kind in "iub" and isinstance(b, np.ndarray) and b.dtype.kind in "iub":
        return np.power(a.astype(np.int64), b.astype(np.int64)).astype(
            np.result_type(a, b) if a.dtype != bool else np.int64)
    return np.power(a, b)


def _pow_errors():
    yield ErrorInput(SampleInput(ember.tensor([2, 3]), (-1,)), RuntimeError,
                     "Integers to negative integer powers are not allowed")
    # narrow integer tensors: the Python exponent is checked before it is cast to the dtype
    for dtype in (ember.int8, ember.uint8, ember.int32):
        yield ErrorInput(SampleInput(ember.tensor([2, 3], dtype=dtype), (-1,)), RuntimeError,
                         "Integers to negative integer powers are not allowed")
    yield ErrorInput(SampleInput(ember.tensor([2, 3], dtype=ember.int8), (300,)), RuntimeError,
                     "value cannot be converted to type int8_t without overflow")


def _rsub(name):
    return lambda a, b: getattr(np, name)(a, b)


def _sign_ref(x):
    x = np.asarray(x)
    if x.dtype == bool:
        return x
    out = np.sign(x)
    return np.where(np.isnan(x), 0, out) if x.dtype.kind == "f" else out


def _sgn_ref(x):
    x = np.asarray(x)
    if x.dtype.kind == "c":
        mag = np.abs(x)
        return np.where(mag == 0, 0, x / np.where(mag == 0, 1, mag))
    return _sign_ref(x)


def _remainder_samples(dtype, requires_grad):
    yield from binary_samples(exclude_zero=True, scalars=(3, -2))(dtype, requires_grad)


def _remainder_grad_samples(dtype, requires_grad):
    # away from the jumps of floor(a / b), where finite differences are meaningless
    yield SampleInput(make((2, 3), dtype, requires_grad, low=0.1, high=0.9),
                      (make((2, 3), dtype, requires_grad, low=1.5, high=3),))
    yield SampleInput(make((2, 3), dtype, requires_grad, low=-0.9, high=-0.1),
                      (make((3,), dtype, requires_grad, low=1.5, high=3),))


def _number_operand_samples(dtype, requires_grad):
    """Samples for ``_mul_scalar``/``_div_scalar``/``_sub_scalar``: a tensor and a number."""
    yield SampleInput(make((2, 3), dtype, requires_grad), (2.5,), name="2d")
    yield SampleInput(make((), dtype, requires_grad), (-0.75,), name="0d")
    yield SampleInput(make((0, 3), dtype, requires_grad), (3,), name="empty")
    yield SampleInput(make((3, 4), dtype, requires_grad, noncontiguous=True), (1.5,),
                      name="noncontiguous")
    if dtype.is_complex:
        yield SampleInput(make((2, 3), dtype, requires_grad), (0.5 - 2j,), name="complex")


def _by_number_ref(ufunc):
    return lambda x, s: ufunc(x, s).astype(np.asarray(x).dtype)


OPS = [
    OpInfo("add", _add_ref, _alpha_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_add_errors),
    OpInfo("sub", _sub_ref, _alpha_samples, dtypes=NUMERIC, gradgrad=True,
           error_inputs=_sub_errors),
    OpInfo("rsub", _rsub_ref, _rsub_samples, dtypes=NUMERIC, result_dtype=_rsub_dtype,
           gradgrad=True, error_inputs=_rsub_errors),
    OpInfo("mul", np.multiply, binary_samples(), dtypes=ALL, gradgrad=True),
    OpInfo("_mul_scalar", _by_number_ref(np.multiply), _number_operand_samples,
           dtypes=FLOATS + LOW + COMPLEX, gradgrad=True),
    OpInfo("_div_scalar", _by_number_ref(np.true_divide), _number_operand_samples,
           dtypes=FLOATS + LOW + COMPLEX, gradgrad=True),
    OpInfo("_sub_scalar", _by_number_ref(np.subtract), _number_operand_samples,
           dtypes=FLOATS + LOW + COMPLEX, gradgrad=True),
    OpInfo("div", _true_div_ref, _div_samples, dtypes=FLOATS + LOW + INTS + COMPLEX,
           result_dtype=_div_dtype, gradgrad=True, error_inputs=_div_errors),
    OpInfo("floor_divide", np.floor_divide,
           binary_samples(exclude_zero=True, scalars=(2, -3)), dtypes=FLOATS + LOW + INTS,
           error_inputs=_int_divisor_errors("floor_divide"), grad=False),
    OpInfo("remainder", np.remainder, _remainder_samples, dtypes=FLOATS + LOW + INTS,
           error_inputs=_int_divisor_errors("remainder"), grad_samples=_remainder_grad_samples),
    OpInfo("fmod", np.fmod, _remainder_samples, dtypes=FLOATS + LOW + INTS,
           error_inputs=_int_divisor_errors("fmod"), grad_samples=_remainder_grad_samples),
    OpInfo("pow", _pow_ref, _pow_samples, dtypes=FLOATS + LOW + INTS + COMPLEX,
           gradgrad=True, error_inputs=_pow_errors),
    OpInfo("neg", np.negative, unary_samples(), dtypes=NUMERIC, gradgrad=True),
    OpInfo("abs", np.abs, unary_samples(), dtypes=NUMERIC, gradgrad=True,
           result_dtype=lambda d, s: d.to_real() if d.is_complex else d),
    OpInfo("sign", _sign_ref, unary_samples(), dtypes=ALL_REAL),
    OpInfo("sgn", _sgn_ref, unary_samples(), dtypes=ALL, gradgrad=False),
    OpInfo("reciprocal", np.reciprocal,
           unary_samples(low=0.5, high=4), dtypes=FLOATS + LOW + COMPLEX, gradgrad=True),
    OpInfo("square", np.square, unary_samples(), dtypes=ALL,
           result_dtype=lambda d, s: ember.int64 if d is ember.bool else d, gradgrad=True),
    OpInfo("frac", lambda x: x - np.trunc(x), unary_samples(), dtypes=FLOATS + LOW),
]
