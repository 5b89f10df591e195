"""OpInfo entries for ember/ops/binary_math.py."""

import numpy as np

import ember
from tests.ops.opdb.core import (ALL, COMPLEX, FLOATS, INTS, LOW, ErrorInput, OpInfo,
                                 SampleInput, binary_samples, make)

REAL = FLOATS + LOW + INTS + (ember.bool,)
NAN, INF = float("nan"), float("inf")


def _f64(x):
    """Integer and bool arrays as float64 (NumPy's ufuncs would compute them in float16)."""
    return x.astype(np.float64) if isinstance(x, np.ndarray) and x.dtype.kind in "biu" else x


def _special(dtype):
    """Operand pairs at NaN, infinities and signed zeros, where libraries disagree."""
    a = ember.tensor([0., -0., 0., 1., -1., NAN, NAN, INF, -INF, 2., 0.], dtype=dtype)
    b = ember.tensor([-0., 0., 0., NAN, -1., 1., NAN, INF, 1., -INF, 3.], dtype=dtype)
    return a, b


def _pairs(scalars=(), special=True, number_input=None, **kw):
    """binary_samples, plus NaN/inf operands and a Python number as ``input``."""
    base = binary_samples(scalars=scalars, **kw)

    def samples(dtype, requires_grad):
        yield from base(dtype, requires_grad)
        if requires_grad:
            return
        if special and dtype.is_floating_point:
            a, b = _special(dtype)
            yield SampleInput(a, (b,), name="nan_inf")
        if number_input is not None:
            yield SampleInput(number_input, (make((2, 3), dtype, low=kw.get("rhs_low"),
                                                  high=kw.get("rhs_high")),),
                              name="number_input")
    return samples


def _only_tensors(name, arg="other"):
    return ErrorInput(SampleInput(ember.ones(3), (2,)), TypeError,
                      rf"{name}\(\): argument '{arg}' \(position 2\) must be Tensor, not int")


def _complex_error(name, exc=NotImplementedError, match=None):
    c = ember.ones(3, dtype=ember.complex64)
    return ErrorInput(SampleInput(c, (c,)), exc,
                      match or f"\"{name}_cpu\" not implemented for 'ComplexFloat'")


def _mismatch():
    return ErrorInput(SampleInput(ember.ones(2), (ember.ones(3),)), RuntimeError,
                      r"size of tensor a \(2\) must match the size of tensor b \(3\)")


# --- atan2, hypot, xlogy, copysign ------------------------------------------------------------

def _atan2_errors():
    yield _complex_error("atan2")
    yield _only_tensors("atan2")
    yield _mismatch()


def _hypot_errors():
    yield ErrorInput(SampleInput(ember.tensor([3]), (ember.tensor([4]),)), NotImplementedError,
                     "\"hypot_cpu\" not implemented for 'Long'")
    u8 = ember.tensor([3], dtype=ember.uint8)
    yield ErrorInput(SampleInput(u8, (ember.tensor([4], dtype=ember.int8),)),
                     NotImplementedError, "\"hypot_cpu\" not implemented for 'Short'")
    yield _complex_error("hypot")
    yield _only_tensors("hypot")


def _xlogy_ref(x, y):
    x, y = _f64(x), _f64(y)
    with np.errstate(all="ignore"):
        out = np.multiply(x, np.log(y))
    return np.where((np.asarray(x) == 0) & ~np.isnan(y), 0, out)


def _xlogy_errors():
    yield _complex_error("xlogy")
    yield ErrorInput(SampleInput(ember.ones(2), (ember.ones(3),)), RuntimeError,
                     "must match the size")


def _copysign_errors():
    yield _complex_error("copysign")
    yield ErrorInput(SampleInput(2, (ember.ones(3),)), TypeError,
                     r"copysign\(\): argument 'input' \(position 1\) must be Tensor, not int")


# --- heaviside --------------------------------------------------------------------------------

def _heaviside_ref(x, values):
    return np.where(x == 0, values, x > 0).astype(np.result_type(x, values))


def _heaviside_samples(dtype, requires_grad):
    yield from binary_samples(scalars=(), low=-2, high=3)(dtype, requires_grad)
    yield SampleInput(make((6,), dtype, low=-1, high=2), (make((1,), dtype),),
                      name="values_broadcast")
    if dtype.is_floating_point:
        a, b = _special(dtype)
        yield SampleInput(a, (b,), name="nan_inf")


def _heaviside_errors():
    f, d = ember.ones(3), ember.ones(3, dtype=ember.float64)
    yield ErrorInput(SampleInput(f, (d,)), RuntimeError,
                     "heaviside is not yet implemented for tensors with different dtypes")
    yield ErrorInput(SampleInput(f, (ember.tensor(1., dtype=ember.float64),)), RuntimeError,
                     "heaviside is not yet implemented for tensors with different dtypes")
    yield _complex_error("heaviside", RuntimeError,
                         "heaviside is not yet implemented for complex tensors")
    yield _only_tensors("heaviside", "values")


# --- minimum, maximum, fmin, fmax -------------------------------------------------------------

def _ordered_errors(name):
    def errors():
        yield _complex_error(name, RuntimeError, f"{name} not implemented for complex tensors")
        yield _only_tensors(name)
        yield _mismatch()
    return errors


def _extremum(name, ref):
    return OpInfo(name, ref, _pairs(), dtypes=REAL, gradgrad=True,
                  error_inputs=_ordered_errors(name))


# --- lerp -------------------------------------------------------------------------------------

def _lerp_ref(x, end, weight):
    diff = end - x
    return np.where(np.abs(weight) < 0.5, x + weight * diff, end - diff * (1 - weight))


def _lerp_samples(dtype, requires_grad):
    def m(shape, **kw):
        return make(shape, dtype, requires_grad, **kw)
    yield SampleInput(m((5,)), (m((5,)), 0.3), name="number_weight")
    yield SampleInput(m((5,)), (m((5,)), 0.8), name="number_weight_above_half")
    yield SampleInput(m((2, 3)), (m((2, 3)), 1), name="weight_one_is_end")
    yield SampleInput(m((2, 3)), (m((3,)), m((2, 1), low=0, high=1)), name="broadcast")
    yield SampleInput(m(()), (m(()), m(())), name="0dim")
    yield SampleInput(m((3,)), (m(()), m((2, 3))), name="weight_broadcasts_input")
    yield SampleInput(m((0, 3)), (m((3,)), 0.5), name="empty")
    yield SampleInput(m((3, 4), noncontiguous=True),
                      (m((3, 4), noncontiguous=True), m((3, 4), noncontiguous=True)),
                      name="noncontiguous")
    if dtype.is_complex:
        yield SampleInput(m((4,)), (m((4,)), 0.25 + 0.5j), name="complex_weight")
    if dtype is ember.float32 and not requires_grad:
        yield SampleInput(m((3,)), (m((3,)), ember.tensor(0.25, dtype=ember.float64)),
                          name="0dim_weight_of_other_dtype")


def _lerp_errors():
    f = ember.ones(3)
    yield ErrorInput(SampleInput(f, (ember.ones(3, dtype=ember.int64), 0.5)), RuntimeError,
                     "expected dtype float for `end` but got dtype long int")
    yield ErrorInput(SampleInput(f, (ember.tensor(2., dtype=ember.float64), 0.5)),
                     RuntimeError, "expected dtype float for `end` but got dtype double")
    yield ErrorInput(SampleInput(f, (f, ember.ones(3, dtype=ember.float64))), RuntimeError,
                     "expected dtype float for `weight` but got dtype double")
    i = ember.tensor([1, 2])
    yield ErrorInput(SampleInput(i, (i, 0.5)), NotImplementedError,
                     "\"lerp_kernel_scalar\" not implemented for 'Long'")
    yield ErrorInput(SampleInput(i, (i, i)), NotImplementedError,
                     "\"lerp_kernel_tensor\" not implemented for 'Long'")
    yield ErrorInput(SampleInput(f, (2.0, 0.5)), TypeError,
                     r"lerp\(\): argument 'end' \(position 2\) must be Tensor, not float")
    yield ErrorInput(SampleInput(f, (f, 0.5j)), RuntimeError,
                     "value cannot be converted to type float without overflow")
    yield ErrorInput(SampleInput(f, (f, 1e300)), RuntimeError,
                     "value cannot be converted to type float without overflow")
    yield ErrorInput(SampleInput(f, (ember.ones(2), 0.5)), RuntimeError, "must match the size")


# --- addcmul, addcdiv -------------------------------------------------------------------------

def _addc_ref(op):
    def ref(x, t1, t2, value=1):
        return x + value * op(t1, t2)
    return ref


def _addc_samples(divide):
    def samples(dtype, requires_grad):
        def m(shape, **kw):
            return make(shape, dtype, requires_grad, **kw)
        div = dict(low=0.5, high=3) if divide else {}
        value = 2 if dtype in INTS else (0.5 - 1j if dtype.is_complex else 0.5)
        yield SampleInput(m((2, 3)), (m((2, 3)), m((2, 3), **div)), name="plain")
        yield SampleInput(m((2, 3)), (m((3,)), m((2, 1), **div)), {"value": value},
                          name="broadcast_value")
        yield SampleInput(m((3,)), (m((2, 3)), m((3,), **div)), name="input_broadcasts")
        yield SampleInput(m(()), (m(()), m((), **div)), {"value": value}, name="0dim")
        yield SampleInput(m((0, 3)), (m((0, 3)), m((3,), **div)), name="empty")
        yield SampleInput(m((3, 4), noncontiguous=True),
                          (m((3, 4), noncontiguous=True), m((3, 4), noncontiguous=True, **div)),
                          name="noncontiguous")
    return samples


def _addcmul_errors():
    b = ember.tensor([True, False])
    yield ErrorInput(SampleInput(b, (b, b)), NotImplementedError,
                     "\"addcmul_cpu_out\" not implemented for 'Bool'")
    f = ember.ones(3)
    yield ErrorInput(SampleInput(f, (f, 2)), TypeError,
                     r"addcmul\(\): argument 'tensor2' \(position 3\) must be Tensor, not int")
    yield ErrorInput(SampleInput(f, (f, f), {"value": 1j}), RuntimeError,
                     "value cannot be converted to type float without overflow")
    u8 = ember.tensor([1, 2], dtype=ember.uint8)
    yield ErrorInput(SampleInput(u8, (u8, u8), {"value": 300}), RuntimeError,
                     "value cannot be converted to type uint8_t without overflow")


def _addcdiv_errors():
    i, f = ember.tensor([1, 2]), ember.ones(2)
    for args in ((i, (i, i)), (f, (i, i)), (f, (ember.tensor([True]), i))):
        yield ErrorInput(SampleInput(args[0], args[1]), RuntimeError,
                         "Integer division with addcdiv is no longer supported")
    yield ErrorInput(SampleInput(f, (f, f), {"value": 1j}), RuntimeError,
                     "value cannot be converted to type float without overflow")


# --- clamp ------------------------------------------------------------------------------------

def _clamp_ref(x, min=None, max=None):
    if min is not None:
        x = np.maximum(x, min)
    if max is not None:
        x = np.minimum(x, max)
    return x


def _bounds(dtype):
    if dtype is ember.uint8:
        return 2, 6
    return (-2.5, 3.5) if dtype.is_floating_point else (-2, 3)


def _clamp_samples(dtype, requires_grad):
    def m(shape, **kw):
        return make(shape, dtype, requires_grad, **kw)
    lo, hi = _bounds(dtype)
    yield SampleInput(m((5,)), (lo, hi), name="numbers")
    yield SampleInput(m((5,)), (lo,), name="min_only")
    yield SampleInput(m((5,)), (), {"max": hi}, name="max_only")
    yield SampleInput(m((5,)), (hi, lo), name="min_above_max")
    yield SampleInput(m((2, 3)), (m((3,)), m((2, 1))), name="tensor_bounds")
    yield SampleInput(m(()), (m((2, 3)),), name="0dim_input_tensor_min")
    yield SampleInput(m((4,)), (), {"max": m(())}, name="0dim_tensor_max")
    yield SampleInput(m((0, 3)), (lo, hi), name="empty")
    yield SampleInput(m((3, 4), noncontiguous=True),
                      (m((3, 4), noncontiguous=True), m((3, 4), noncontiguous=True)),
                      name="noncontiguous")
    if dtype.is_floating_point and not requires_grad:
        x = ember.tensor([NAN, 1., 5., -INF, INF], dtype=dtype)
        yield SampleInput(x, (0., 2.), name="nan_input")
        yield SampleInput(x, (NAN,), name="nan_min")
        yield SampleInput(x, (ember.tensor([NAN, 0., 0., NAN, 0.], dtype=dtype),
                              ember.tensor([1., NAN, 9., 1., 1.], dtype=dtype)),
                          name="nan_tensor_bounds")


def _one_bound_samples(name):
    def samples(dtype, requires_grad):
        def m(shape, **kw):
            return make(shape, dtype, requires_grad, **kw)
        bound = _bounds(dtype)[0 if name == "clamp_min" else 1]
        yield SampleInput(m((5,)), (bound,), name="number")
        yield SampleInput(m((2, 3)), (m((3,)),), name="tensor_broadcast")
        yield SampleInput(m(()), (m(()),), name="0dim")
        yield SampleInput(m((0, 3)), (bound,), name="empty")
        yield SampleInput(m((3, 4), noncontiguous=True), (m((3, 4), noncontiguous=True),),
                          name="noncontiguous")
        if dtype.is_floating_point and not requires_grad:
            yield SampleInput(ember.tensor([NAN, 1., INF, -INF], dtype=dtype), (bound,),
                              name="nan_inf")
    return samples


def _clamp_errors():
    f = ember.ones(3)
    yield ErrorInput(SampleInput(f), RuntimeError,
                     "torch.clamp: At least one of 'min' or 'max' must not be None")
    yield ErrorInput(SampleInput(f, (None, None)), RuntimeError, "At least one of")
    yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.complex64), (1, 2)),
                     NotImplementedError, "clamp is not supported for complex types")
    b = ember.tensor([True, False])
    yield ErrorInput(SampleInput(b, (False, True)), NotImplementedError,
                     "\"clamp_scalar_cpu\" not implemented for 'Bool'")
    yield ErrorInput(SampleInput(f, (ember.ones(3), 2)), TypeError,
                     "received an invalid combination of arguments")
    yield ErrorInput(SampleInput(f, (ember.ones(2),)), RuntimeError, "must match the size")
    yield ErrorInput(SampleInput(f, (), {"max": 1e300}), RuntimeError,
                     "value cannot be converted to type float without overflow")


def _one_bound_errors(name):
    def errors():
        b = ember.tensor([True, False])
        yield ErrorInput(SampleInput(b, (True,)), NotImplementedError,
                         f"\"{name}_scalar_cpu\" not implemented for 'Bool'")
        yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.complex64), (1,)),
                         NotImplementedError, "clamp is not supported for complex types")
    return errors


# --- where ------------------------------------------------------------------------------------

def _where_number(dtype):
    if dtype is ember.bool:
        return True
    return 0.5 if dtype.is_floating_point or dtype.is_complex else 2


def _where_samples(dtype, requires_grad):
    def m(shape, **kw):
        return make(shape, dtype, requires_grad, **kw)

    def cond(shape, **kw):
        return make(shape, ember.bool, **kw)
    number = _where_number(dtype)
    yield SampleInput(cond((5,)), (m((5,)), m((5,))), name="plain")
    yield SampleInput(cond((2, 3)), (m((3,)), m((2, 1))), name="broadcast")
    yield SampleInput(cond((3,)), (m((2, 1)), m(())), name="cond_broadcasts")
    yield SampleInput(cond(()), (m(()), m(())), name="0dim")
    yield SampleInput(cond((0, 3)), (m((0, 3)), m((3,))), name="empty")
    yield SampleInput(cond((3, 4), noncontiguous=True),
                      (m((3, 4), noncontiguous=True), m((3, 4), noncontiguous=True)),
                      name="noncontiguous")
    yield SampleInput(cond((2, 3)), (m((2, 3)), number), name="number_other")
    yield SampleInput(cond((2, 3)), (number, m((2, 3))), name="number_input")
    # only a condition, of any dtype: the indices of its nonzero elements, one tensor per dim
    for shape in ((3, 4), (5,), (0, 2)):
        yield SampleInput(make(shape, ember.int64, low=-1, high=2).to(dtype),
                          name=f"condition only {list(shape)}")


def _where_errors():
    f = ember.ones(3)
    yield ErrorInput(SampleInput(ember.tensor([1, 0, 1]), (f, f)), RuntimeError,
                     "where expected condition to be a boolean tensor, but got a tensor with "
                     "dtype Long")
    yield ErrorInput(SampleInput(True, (f, f)), TypeError,
                     r"where\(\): argument 'condition' \(position 1\) must be Tensor, not bool")
    yield ErrorInput(SampleInput(ember.tensor([True, False]), (ember.ones(2), 1e300)),
                     RuntimeError, "value cannot be converted to type float without overflow")
    yield ErrorInput(SampleInput(ember.tensor([True, False]), (f, f)), RuntimeError,
                     "must match the size")


def _real_float(d, s):
    return d if d.is_floating_point else ember.get_default_dtype()


OPS = [
    OpInfo("atan2", lambda a, b: np.arctan2(_f64(a), _f64(b)), _pairs(), dtypes=REAL,
           result_dtype=_real_float, gradgrad=True, error_inputs=_atan2_errors),
    OpInfo("hypot", np.hypot, _pairs(), dtypes=FLOATS + LOW, gradgrad=True,
           error_inputs=_hypot_errors),
    OpInfo("xlogy", _xlogy_ref,
           _pairs(scalars=(2, 0.5), number_input=2.5, rhs_low=0.5, rhs_high=4),
           dtypes=REAL, result_dtype=_real_float, gradgrad=True,
           grad_samples=binary_samples(rhs_low=0.5, rhs_high=4, scalars=(0.5,)),
           error_inputs=_xlogy_errors),
    OpInfo("copysign", lambda a, b: np.copysign(_f64(a), _f64(b)),
           _pairs(scalars=(-2, 0.5, -0.0)), dtypes=REAL, result_dtype=_real_float,
           gradgrad=True, error_inputs=_copysign_errors),
    OpInfo("heaviside", _heaviside_ref, _heaviside_samples, dtypes=REAL, grad=False,
           error_inputs=_heaviside_errors),
    _extremum("maximum", np.maximum),
    _extremum("minimum", np.minimum),
    _extremum("fmax", np.fmax),
    _extremum("fmin", np.fmin),
    OpInfo("lerp", _lerp_ref, _lerp_samples, dtypes=FLOATS + LOW + COMPLEX, gradgrad=True,
           error_inputs=_lerp_errors),
    OpInfo("addcmul", _addc_ref(np.multiply), _addc_samples(False),
           dtypes=FLOATS + LOW + INTS + COMPLEX, gradgrad=True, error_inputs=_addcmul_errors),
    OpInfo("addcdiv", _addc_ref(np.true_divide), _addc_samples(True),
           dtypes=FLOATS + LOW + COMPLEX, gradgrad=True, error_inputs=_addcdiv_errors),
    OpInfo("clamp", _clamp_ref, _clamp_samples, dtypes=FLOATS + LOW + INTS, gradgrad=True,
           error_inputs=_clamp_errors),
    OpInfo("clamp_min", np.maximum, _one_bound_samples("clamp_min"),
           dtypes=FLOATS + LOW + INTS, gradgrad=True,
           error_inputs=_one_bound_errors("clamp_min")),
    OpInfo("clamp_max", np.minimum, _one_bound_samples("clamp_max"),
           dtypes=FLOATS + LOW + INTS, gradgrad=True,
           error_inputs=_one_bound_errors("clamp_max")),
    OpInfo("where", np.where, _where_samples, dtypes=ALL, gradgrad=True,
           result_dtype=lambda d, s: d if s.args else ember.int64, error_inputs=_where_errors),
]
