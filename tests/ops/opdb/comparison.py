"""OpInfo entries for ember/ops/comparison.py."""

import numpy as np

import ember
from tests.ops.opdb.core import (ALL, ALL_REAL, FLOATS, INTS, LOW, ErrorInput, OpInfo,
                                 SampleInput, binary_samples, make, unary_samples)

NAN, INF = float("nan"), float("inf")
INTEGRAL = INTS + (ember.bool,)


def _special(dtype):
    a = ember.tensor([0., -0., 1., NAN, NAN, INF, -INF, INF, 2.], dtype=dtype)
    b = ember.tensor([-0., 0., NAN, 1., NAN, INF, INF, 1., 2.], dtype=dtype)
    return a, b


def _compare_samples(dtype, requires_grad):
    yield from binary_samples(scalars=(2, 0.5, -1))(dtype, requires_grad)
    yield SampleInput(make((2, 3), dtype, low=0, high=3), (make((2, 3), dtype, low=0, high=3),),
                      name="many_ties")
    if dtype.is_floating_point:
        a, b = _special(dtype)
        yield SampleInput(a, (b,), name="nan_inf")
        yield SampleInput(a, (NAN,), name="nan_number")
    if dtype is not ember.bool:
        yield SampleInput(make((3,), dtype, low=0, high=5), (make((3,), ember.float64),),
                          name="other_float64")
        yield SampleInput(make((4,), dtype, low=0, high=5), (2.5,), name="fractional_number")


def _compare_errors(name, ordered):
    def errors():
        c = ember.ones(3, dtype=ember.complex64)
        if ordered:
            yield ErrorInput(SampleInput(c, (c,)), NotImplementedError,
                             f"\"{name}_cpu\" not implemented for 'ComplexFloat'")
            yield ErrorInput(SampleInput(ember.ones(3), (1j,)), NotImplementedError,
                             f"\"{name}_cpu\" not implemented for 'ComplexFloat'")
        yield ErrorInput(SampleInput(2, (ember.ones(3),)), TypeError,
                         rf"{name}\(\): argument 'input' \(position 1\) must be Tensor, not int")
        yield ErrorInput(SampleInput(ember.ones(2), (ember.ones(3),)), RuntimeError,
                         r"size of tensor a \(2\) must match the size of tensor b \(3\)")
    return errors


def _comparison(name, ref, ordered):
    return OpInfo(name, ref, _compare_samples, dtypes=ALL_REAL if ordered else ALL,
                  result_dtype="bool", grad=False, error_inputs=_compare_errors(name, ordered))


# --- isclose ----------------------------------------------------------------------------------

def _isclose_ref(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    kind = np.complex128 if np.asarray(a).dtype.kind == "c" else np.float64
    return np.isclose(np.asarray(a, kind), np.asarray(b, kind), rtol, atol, equal_nan)


def _isclose_samples(dtype, requires_grad):
    def near(x, scale):
        noise = make(x.shape, ember.float64, low=-1, high=1) * scale
        wide = ember.complex128 if dtype.is_complex else ember.float64
        return (x.to(wide) + noise).to(dtype)
    floating = dtype.is_floating_point or dtype.is_complex
    x = make((4, 5), dtype, low=1, high=9)
    yield SampleInput(x, (x.clone(),), name="equal")
    yield SampleInput(x, (make((4, 5), dtype, low=1, high=9),), name="random")
    yield SampleInput(make((2, 3), dtype), (make((3,), dtype),), name="broadcast")
    yield SampleInput(make((), dtype), (make((), dtype),), name="0dim")
    yield SampleInput(make((0, 3), dtype), (make((3,), dtype),), name="empty")
    yield SampleInput(make((3, 4), dtype, noncontiguous=True),
                      (make((3, 4), dtype, noncontiguous=True),), name="noncontiguous")
    if floating and dtype not in LOW:
        yield SampleInput(x, (near(x, 1e-7),), name="within_default_tolerance")
        yield SampleInput(x, (near(x, 0.1),), {"rtol": 0.01}, name="rtol")
        yield SampleInput(x, (near(x, 0.1),), {"rtol": 0, "atol": 0.05}, name="atol")
    if not floating:
        yield SampleInput(x, (x + 1 if dtype is not ember.bool else ~x,), {"atol": 1},
                          name="off_by_one_atol")
        yield SampleInput(x, (x,), {"rtol": 0, "atol": 0}, name="zero_tolerance")
    if dtype.is_floating_point:
        a, b = _special(dtype)
        yield SampleInput(a, (b,), name="nan_inf")
        yield SampleInput(a, (b,), {"equal_nan": True}, name="equal_nan")


def _isclose_errors():
    f = ember.ones(3)
    yield ErrorInput(SampleInput(f, (ember.tensor([1, 1, 1]),)), RuntimeError,
                     "Float did not match Long")
    yield ErrorInput(SampleInput(f, (ember.tensor(1., dtype=ember.float64),)), RuntimeError,
                     "Float did not match Double")
    yield ErrorInput(SampleInput(f, (2,)), TypeError,
                     r"isclose\(\): argument 'other' \(position 2\) must be Tensor, not int")
    yield ErrorInput(SampleInput(f, (f,), {"rtol": -1}), RuntimeError,
                     "rtol must be greater than or equal to zero, but got -1")
    yield ErrorInput(SampleInput(f, (f,), {"atol": -0.5}), RuntimeError,
                     "atol must be greater than or equal to zero, but got -0.5")
    yield ErrorInput(SampleInput(f, (ember.ones(2),)), RuntimeError, "must match the size")


# --- isin -------------------------------------------------------------------------------------

def _isin_ref(elements, test, assume_unique=False, invert=False):
    array = elements if isinstance(elements, np.ndarray) else test

    def operand(x):             # a Python int wraps to an integer tensor's dtype, as in PyTorch
        if isinstance(x, int) and array.dtype.kind in "iu":
            return np.array(x).astype(array.dtype)
        return np.asarray(x)
    a, b = operand(elements), operand(test)
    found = (a.reshape(-1, 1) == b.reshape(1, -1)).any(1).reshape(a.shape)
    return ~found if invert else found


def _isin_samples(dtype, requires_grad):
    def small(shape, **kw):
        return make(shape, dtype, low=0, high=6, **kw)
    yield SampleInput(small((2, 3)), (small((4,)),), name="matrix")
    yield SampleInput(small((3, 4), noncontiguous=True), (small((2, 3), noncontiguous=True),),
                      name="noncontiguous")
    yield SampleInput(small(()), (small((5,)),), name="0dim_elements")
    yield SampleInput(small((4,)), (small(()),), name="0dim_test")
    yield SampleInput(small((0, 3)), (small((4,)),), name="empty_elements")
    yield SampleInput(small((2, 3)), (small((0,)),), {"invert": True}, name="empty_test")
    yield SampleInput(small((5,)), (small((3,)),), {"invert": True, "assume_unique": True},
                      name="invert")
    yield SampleInput(small((3, 4)), (2,), name="number_test")
    yield SampleInput(3, (small((5,)),), name="number_elements")
    yield SampleInput(small((20,)), (make((300,), dtype, low=0, high=40),), name="many_tests")
    yield SampleInput(small((2, 3)), (make((5,), ember.int64, low=0, high=6),),
                      name="int64_test")
    if dtype.is_floating_point:
        specials = ember.tensor([0., -0., NAN, INF, -INF, 1.5], dtype=dtype)
        yield SampleInput(specials, (ember.tensor([0., NAN, INF], dtype=dtype),), name="nan")
        yield SampleInput(specials, (1.5,), name="float_number")
    if dtype in (ember.uint8, ember.int8):
        yield SampleInput(ember.tensor([44, 1, 2], dtype=dtype), (300,), name="wrapped_number")


def _isin_errors():
    f = ember.ones(3)
    yield ErrorInput(SampleInput(ember.tensor([True]), (f,)), RuntimeError,
                     r"Unsupported input type encountered for isin\(\): Bool")
    yield ErrorInput(SampleInput(f, (ember.ones(2, dtype=ember.complex64),)), RuntimeError,
                     r"Unsupported input type encountered for isin\(\): ComplexFloat")
    yield ErrorInput(SampleInput(f, (True,)), RuntimeError,
                     r"Unsupported input type encountered for isin\(\): Bool")
    yield ErrorInput(SampleInput(1j, (f,)), RuntimeError,
                     r"Unsupported input type encountered for isin\(\): ComplexDouble")
    yield ErrorInput(SampleInput(2, (3,)), TypeError, r"isin\(\)")
    yield ErrorInput(SampleInput(f, ([1, 2],)), TypeError, r"isin\(\)")


# --- logical and bitwise ops ------------------------------------------------------------------

def _logical_samples(dtype, requires_grad):
    yield from binary_samples(scalars=(), low=-1, high=2)(dtype, requires_grad)
    yield SampleInput(make((2, 3), dtype, low=-1, high=2), (make((3,), ember.float32, low=-1,
                                                                 high=2),),
                      name="other_float32")
    yield SampleInput(make((4,), dtype, low=-1, high=2), (make((4,), ember.bool),),
                      name="other_bool")
    if dtype.is_floating_point:
        a, b = _special(dtype)
        yield SampleInput(a, (b,), name="nan_inf")


def _logical_errors(name):
    def errors():
        b = ember.tensor([True, False])
        yield ErrorInput(SampleInput(b, (2,)), TypeError,
                         rf"{name}\(\): argument 'other' \(position 2\) must be Tensor, not int")
        yield ErrorInput(SampleInput(2, (b,)), TypeError,
                         rf"{name}\(\): argument 'input' \(position 1\) must be Tensor, not int")
    return errors


def _logical(name):
    return OpInfo(name, getattr(np, name), _logical_samples, dtypes=ALL, result_dtype="bool",
                  grad=False, error_inputs=_logical_errors(name))


def _bitwise_samples(dtype, requires_grad):
    yield from binary_samples(scalars=(2, -3, 300))(dtype, requires_grad)
    if dtype is ember.bool:
        yield SampleInput(make((5,), dtype), (True,), name="bool_number")
    yield SampleInput(5, (make((2, 3), dtype),), name="number_input")


def _bitwise_ref(fn):
    def ref(a, b):
        dtype = (a if isinstance(a, np.ndarray) else b).dtype
        if dtype.kind in "iu" and isinstance(b, int) and not isinstance(b, bool):
            b = np.array(b).astype(dtype)          # PyTorch wraps the number to the dtype
        if dtype.kind in "iu" and isinstance(a, int):
            a = np.array(a).astype(dtype)
        return fn(a, b)
    return ref


def _bitwise_errors(name):
    def errors():
        f = ember.ones(3)
        yield ErrorInput(SampleInput(f, (f,)), NotImplementedError,
                         f"\"{name}_cpu\" not implemented for 'Float'")
        yield ErrorInput(SampleInput(ember.tensor([1, 2]), (2.5,)), NotImplementedError,
                         f"\"{name}_cpu\" not implemented for 'Float'")
    return errors


def _bitwise_dtype(dtype, sample):
    """A Python int operand makes a bool op int64; everything else keeps the dtype."""
    numbers = [x for x in (sample.input, *sample.args) if not isinstance(x, ember.Tensor)]
    return ember.int64 if dtype is ember.bool and int in map(type, numbers) else dtype


def _bitwise(name):
    return OpInfo(name, _bitwise_ref(getattr(np, name)), _bitwise_samples, dtypes=INTEGRAL,
                  result_dtype=_bitwise_dtype, grad=False, error_inputs=_bitwise_errors(name))


def _bitwise_not_errors():
    yield ErrorInput(SampleInput(ember.ones(3)), NotImplementedError,
                     "\"bitwise_not_cpu\" not implemented for 'Float'")
    yield ErrorInput(SampleInput(ember.ones(3, dtype=ember.complex64)), NotImplementedError,
                     "\"bitwise_not_cpu\" not implemented for 'ComplexFloat'")


# --- shifts -----------------------------------------------------------------------------------

def _shift_ref(left):
    """PyTorch's shifts on Python ints: amounts outside [0, bits) shift every bit out."""
    def ref(a, s):
        dtype = (a if isinstance(a, np.ndarray) else s).dtype
        bits = dtype.itemsize * 8
        out = []
        for x, n in np.broadcast(a, s):
            x, n = int(x), int(n)
            if 0 <= n < bits:
                r = x << n if left else x >> n
            else:
                r = 0 if left or x >= 0 else -1
            r &= (1 << bits) - 1
            if dtype.kind == "i" and r >= 1 << (bits - 1):
                r -= 1 << bits
            out.append(r)
        return np.array(out, dtype=dtype).reshape(np.broadcast(a, s).shape)
    return ref


def _shift_samples(dtype, requires_grad):
    bits = dtype.itemsize * 8
    low = 0 if dtype is ember.uint8 else -100
    yield SampleInput(make((6,), dtype, low=low, high=100), (3,), name="number")
    yield SampleInput(make((6,), dtype, low=low, high=100), (bits - 1,), name="top_bit")
    yield SampleInput(make((6,), dtype, low=low, high=100), (bits,), name="width")
    yield SampleInput(make((6,), dtype, low=low, high=100), (70,), name="beyond_width")
    amounts = make((4, 6), dtype, low=0 if dtype is ember.uint8 else -2, high=bits + 3)
    yield SampleInput(make((6,), dtype, low=low, high=100), (amounts,), name="tensor_amounts")
    yield SampleInput(make((), dtype, low=low, high=100), (make((), dtype, low=0, high=5),),
                      name="0dim")
    yield SampleInput(make((0, 3), dtype), (make((3,), dtype, low=0, high=5),), name="empty")
    yield SampleInput(make((3, 4), dtype, noncontiguous=True, low=low, high=100),
                      (make((3, 4), dtype, noncontiguous=True, low=0, high=bits),),
                      name="noncontiguous")
    yield SampleInput(2, (make((5,), dtype, low=0, high=bits + 2),), name="number_input")


def _shift_errors(kernel):
    def errors():
        yield ErrorInput(SampleInput(ember.ones(3), (2,)), NotImplementedError,
                         f"\"{kernel}_cpu\" not implemented for 'Float'")
        b = ember.tensor([True, False])
        yield ErrorInput(SampleInput(b, (b,)), NotImplementedError,
                         f"\"{kernel}_cpu\" not implemented for 'Bool'")
        yield ErrorInput(SampleInput(ember.tensor([1, 2]), (1.5,)), NotImplementedError,
                         f"\"{kernel}_cpu\" not implemented for 'Float'")
    return errors


OPS = [
    _comparison("eq", np.equal, False),
    _comparison("ne", np.not_equal, False),
    _comparison("lt", np.less, True),
    _comparison("le", np.less_equal, True),
    _comparison("gt", np.greater, True),
    _comparison("ge", np.greater_equal, True),
    OpInfo("isin", _isin_ref, _isin_samples, dtypes=FLOATS + LOW + INTS, result_dtype="bool",
           grad=False, error_inputs=_isin_errors),
    OpInfo("isclose", _isclose_ref, _isclose_samples, dtypes=ALL, result_dtype="bool",
           grad=False, error_inputs=_isclose_errors),
    _logical("logical_and"),
    _logical("logical_or"),
    _logical("logical_xor"),
    OpInfo("logical_not", np.logical_not, unary_samples(low=-1, high=2), dtypes=ALL,
           result_dtype="bool", grad=False),
    _bitwise("bitwise_and"),
    _bitwise("bitwise_or"),
    _bitwise("bitwise_xor"),
    OpInfo("bitwise_not", np.invert, unary_samples(), dtypes=INTEGRAL, grad=False,
           error_inputs=_bitwise_not_errors),
    OpInfo("bitwise_left_shift", _shift_ref(True), _shift_samples, dtypes=INTS, grad=False,
           error_inputs=_shift_errors("lshift")),
    OpInfo("bitwise_right_shift", _shift_ref(False), _shift_samples, dtypes=INTS, grad=False,
           error_inputs=_shift_errors("rshift")),
]
