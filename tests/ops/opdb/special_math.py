"""OpInfo entries for ember/ops/special_math.py (and helpers the other special entries share)."""

import math

import numpy as np
import scipy.special as sp

import ember
from tests.ops.opdb.core import (ALL, COMPLEX, FLOATS, INTS, LOW, ErrorInput, OpInfo,
                                 SampleInput, binary_samples, make, unary_samples)

INF, NAN = math.inf, math.nan
REAL = FLOATS + LOW + INTS + (ember.bool,)
NO_HALF = FLOATS + INTS + (ember.bool,)
# where PyTorch and SciPy could part: infinities, NaN, signed zeros, poles, big and tiny values
SPECIAL = (INF, -INF, NAN, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.5, -3.0, 1e-30, 30.0,
           -30.0, 700.0, -700.0)


def as_float(x):
    """Integer and bool inputs compute in the default float dtype (float32), as in PyTorch."""
    if isinstance(x, np.ndarray) and x.dtype.kind in "iub":
        return x.astype(np.float32)
    return x


def float_ref(fn):
    """``fn`` on its array arguments, integer ones taken as float32; errors silenced."""
    def ref(*args, **kwargs):
        with np.errstate(all="ignore"):
            return fn(*(as_float(a) for a in args), **kwargs)
    return ref


def chain(*makers):
    def samples(dtype, requires_grad):
        for m in makers:
            yield from m(dtype, requires_grad)
    return samples


def special_values(values=SPECIAL):
    """A sample of special values (floating dtypes only; no gradient)."""
    def sample(dtype, requires_grad):
        if dtype.is_floating_point and not requires_grad:
            if dtype in LOW:        # the float32 reference would not overflow
                values_ = [v for v in values if not 3 < abs(v) < INF]
            yield SampleInput(ember.tensor(values_ if dtype in LOW else values, dtype=dtype),
                              name="special")
    return sample


def complex_error(kernel, dtype=ember.complex64, inputs=1):
    c = ember.ones(2, dtype=dtype)
    return ErrorInput(SampleInput(c, (c,) * (inputs - 1)), NotImplementedError,
                      f"\"{kernel}\" not implemented for '{dtype._torch_name}'")


def half_error(kernel):
    return ErrorInput(SampleInput(ember.ones(2, dtype=ember.float16)), NotImplementedError,
                      f"\"{kernel}\" not implemented for 'Half'")


def number_error(name, arg="input"):
    return ErrorInput(SampleInput(1.5), TypeError,
                      fr"{name}\(\): argument '{arg}' \(position 1\) must be Tensor, not float")


def float8_error(kernel, inputs=1):
    f8 = ember.ones(2).to(ember.float8_e5m2)
    return ErrorInput(SampleInput(f8, (f8,) * (inputs - 1)), NotImplementedError,
                      f"\"{kernel}\" not implemented for 'Float8_e5m2'")


def _errors(name, kernel, half=True, complex_kernel=None, arg="input"):
    def errors():
        yield complex_error(complex_kernel or kernel)
        yield complex_error(complex_kernel or kernel, ember.complex128)
        if not half:
            yield half_error(kernel)
        yield float8_error(kernel if complex_kernel is None else "mul_cpu_reduced_float")
        yield number_error(name, arg)
    return errors


def _unary(name, ref, *, low=None, high=None, half=True, grad=True, gradgrad=True,
           kernel=None, complex_kernel=None, arg="input", **kw):
    """An entry for a real special function (integers compute in float32)."""
    short = name.split(".")[-1]
    samples = unary_samples(low=low, high=high)
    return OpInfo(name, float_ref(ref), chain(samples, special_values()),
                  dtypes=REAL if half else NO_HALF, result_dtype="float", grad=grad,
                  grad_samples=samples, gradgrad=grad and gradgrad,
                  error_inputs=_errors(name, kernel or f"{short}_cpu", half, complex_kernel, arg),
                  **kw)


# --- sinc -------------------------------------------------------------------------------------

def _sinc_ref(x):
    x = np.asarray(x)
    return np.sinc(x).astype(x.dtype)


def _sinc_samples(dtype, requires_grad):
    yield from unary_samples(low=-3, high=3)(dtype, requires_grad)
    if (dtype.is_floating_point or dtype.is_complex) and not requires_grad:
        yield SampleInput(ember.tensor([0.0, -0.0, 1.0, -2.0, 0.5, INF, -INF, NAN, 1e-20],
                                       dtype=dtype), name="special")
    if dtype is ember.float64 and requires_grad:
        yield SampleInput(make((4,), ember.complex128, requires_grad, low=-2, high=2),
                          name="complex")


# --- xlog1py, zeta ----------------------------------------------------------------------------

def _pair_samples(low, high, rhs_low, rhs_high, special=None, number_input=None,
                  scalars=(2, 0.5)):
    base = binary_samples(low=low, high=high, rhs_low=rhs_low, rhs_high=rhs_high,
                          scalars=scalars)

    def samples(dtype, requires_grad):
        yield from base(dtype, requires_grad)
        if requires_grad:
            return
        if special is not None and dtype.is_floating_point:
            a, b = special
            yield SampleInput(ember.tensor(a, dtype=dtype), (ember.tensor(b, dtype=dtype),),
                              name="special")
        if number_input is not None:
            yield SampleInput(number_input, (make((2, 3), dtype, low=rhs_low, high=rhs_high),),
                              name="number_input")
    return samples


_XLOG1PY_SPECIAL = ([0.0, 0.0, 0.0, 0.0, 1.0, 2.0, -1.0, NAN, INF, 0.0, 3.0],
                    [-1.0, -2.0, NAN, 0.0, -1.0, INF, NAN, 1.0, 0.0, INF, -0.5])


def _xlog1py_grad_samples(dtype, requires_grad):
    yield from binary_samples(low=-3, high=3, rhs_low=-0.5, rhs_high=4)(dtype, requires_grad)
    # zero inputs: the derivative in x is log1p(y) there, in y it is 0
    x = ember.tensor([0.0, 0.0, 1.5], dtype=dtype, requires_grad=requires_grad)
    y = ember.tensor([0.5, 2.0, 1.0], dtype=dtype, requires_grad=requires_grad)
    yield SampleInput(x, (y,), name="zeros")


def _zeta_ref(x, q):
    x, q = as_float(x), as_float(q)
    dtype = next(a.dtype for a in (x, q) if isinstance(a, np.ndarray))
    with np.errstate(all="ignore"):
        out = np.where(np.isposinf(q) & (x > 1), NAN, sp.zeta(x, q))
    return out.astype(dtype)


_ZETA_SPECIAL = ([1.0, 0.5, 2.0, 2.0, 2.0, 2.0, 3.0, INF, NAN, 2.0, 4.0, 2.0],
                 [1.0, 1.0, 0.0, -1.0, -1.5, INF, -INF, 2.0, 1.0, NAN, 1e-3, 30.0])


def _zeta_grad_samples(dtype, requires_grad):
    for sx, sq in (((4,), (4,)), ((2, 3), (3,)), ((), ())):
        yield SampleInput(make(sx, dtype, low=1.5, high=4),
                          (make(sq, dtype, requires_grad, low=0.5, high=3),), name="q")
    yield SampleInput(2.5, (make((3,), dtype, requires_grad, low=0.5, high=3),),
                      name="number_x")


def _zeta_errors():
    yield complex_error("zeta_cpu", inputs=2)
    yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.float16),
                                 (ember.ones(2, dtype=ember.float16),)),
                     NotImplementedError, "\"zeta_cpu\" not implemented for 'Half'")


# --- igamma, igammac --------------------------------------------------------------------------

def _igamma_ref(upper):
    def ref(a, x):
        with np.errstate(all="ignore"):
            lo, hi = (1.0, 0.0) if upper else (0.0, 1.0)
            out = (sp.gammaincc if upper else sp.gammainc)(a, x)
            # PyTorch tests in order: a negative argument, a == 0, x == 0, inf a, inf x
            for cond, value in reversed([
                    ((x < 0) | (a < 0), NAN),
                    (a == 0, np.where(x > 0, hi, NAN)),
                    (x == 0, lo),
                    (np.isinf(a), np.where(np.isinf(x), NAN, lo)),
                    (np.isinf(x), hi)]):
                out = np.where(cond, value, out)
        return out
    return ref


_IGAMMA_SPECIAL = ([INF, NAN, NAN, 0.0, 0.0, 1.0, -1.0, 2.0, INF, 3.0, 0.5, 1e-3],
                   [NAN, INF, 0.0, 1.0, 0.0, -1.0, 1.0, INF, INF, 0.0, 1e-3, 5.0])


def _igamma_grad_samples(dtype, requires_grad):
    for sa, sx in (((4,), (4,)), ((2, 3), (3,)), ((3,), ())):
        yield SampleInput(make(sa, dtype, low=0.5, high=4),
                          (make(sx, dtype, requires_grad, low=0.2, high=5),), name="x")


def _igamma_errors(name):
    def errors():
        yield ErrorInput(SampleInput(ember.tensor([1, 2]), (ember.tensor([1, 2]),)),
                         NotImplementedError, f"\"{name}_cpu\" not implemented for 'Long'")
        c = ember.ones(2, dtype=ember.complex64)
        yield ErrorInput(SampleInput(c, (c,)), NotImplementedError,
                         f"\"{name}_cpu\" not implemented for 'ComplexFloat'")
        yield ErrorInput(SampleInput(ember.ones(2), (1.5,)), TypeError,
                         fr"{name}\(\): argument 'other' \(position 2\) must be Tensor, "
                         fr"not float")
    return errors


# --- mvlgamma ---------------------------------------------------------------------------------

def _mvlgamma_ref(x, p):
    x = as_float(x)
    with np.errstate(all="ignore"):
        return sp.multigammaln(x, p) if np.all(x > (p - 1) / 2) else np.sum(
            [sp.gammaln(x - i / 2) for i in range(p)], axis=0) + p * (p - 1) / 4 * np.log(np.pi)


def _mvlgamma_samples(dtype, requires_grad):
    for p in (1, 2, 4):
        for shape in ((5,), (), (0,), (2, 3)):
            yield SampleInput(make(shape, dtype, requires_grad, low=(p - 1) / 2 + 0.25,
                                   high=6), (p,), name=f"p{p}{list(shape)}")
    yield SampleInput(make((3, 4), dtype, requires_grad, low=2, high=5, noncontiguous=True),
                      (3,), name="noncontiguous")
    if dtype.is_floating_point and not requires_grad:
        yield SampleInput(ember.tensor([INF, NAN, 1.0, 0.5, -0.5, 2.0], dtype=dtype), (2,),
                          name="special")


def _mvlgamma_errors():
    yield ErrorInput(SampleInput(ember.ones(2), (0,)), RuntimeError,
                     "p has to be greater than or equal to 1")
    yield ErrorInput(SampleInput(ember.tensor([True]), (1,)), RuntimeError,
                     "The input tensor may not be a boolean tensor.")
    yield ErrorInput(SampleInput(ember.ones(2), (2.0,)), TypeError,
                     r"mvlgamma\(\): argument 'p' \(position 2\) must be int, not float")


# PyTorch's Bessel functions of the first and second kind are accurate to about 1e-6 only
_BESSEL_TOL = {ember.float64: (1e-5, 1e-6)}


def _airy_ref(x):
    return sp.airy(x)[0]


OPS = [
    _unary("i0", sp.i0, low=-5, high=5, kernel="i0_vml_cpu"),
    _unary("special.i0e", sp.i0e, low=0.2, high=6),
    _unary("special.i1", sp.i1, low=-5, high=5),
    _unary("special.i1e", sp.i1e, low=-5, high=5),
    _unary("special.bessel_j0", sp.j0, half=False, grad=False, parity_tol=_BESSEL_TOL),
    _unary("special.bessel_j1", sp.j1, half=False, grad=False, parity_tol=_BESSEL_TOL),
    _unary("special.bessel_y0", sp.y0, low=0.1, high=9, half=False, grad=False,
           parity_tol=_BESSEL_TOL),
    _unary("special.bessel_y1", sp.y1, low=0.1, high=9, half=False, grad=False,
           parity_tol=_BESSEL_TOL),
    _unary("special.modified_bessel_i0", sp.i0, low=-5, high=5, half=False, grad=False),
    _unary("special.modified_bessel_i1", sp.i1, low=-5, high=5, half=False, grad=False),
    _unary("special.modified_bessel_k0", sp.k0, low=0.1, high=9, half=False, grad=False),
    _unary("special.modified_bessel_k1", sp.k1, low=0.1, high=9, half=False, grad=False),
    _unary("special.scaled_modified_bessel_k0", sp.k0e, low=0.1, high=9, half=False,
           grad=False, arg="x"),
    _unary("special.scaled_modified_bessel_k1", sp.k1e, low=0.1, high=9, half=False,
           grad=False, arg="x"),
    _unary("special.spherical_bessel_j0", lambda x: sp.spherical_jn(0, x), half=False,
           grad=False, arg="x"),
    # PyTorch's Airy function is accurate to about 1e-6 only (SciPy's to 1e-15)
    _unary("special.airy_ai", _airy_ref, low=-5, high=5, half=False, grad=False, arg="x",
           parity_tol={ember.float64: (1e-5, 1e-6), ember.float32: (1e-4, 1e-5)}),
    # PyTorch's ndtr is (1 + erf(x / sqrt 2)) / 2, 0 below about -8.3 where SciPy's is exact
    # and, in 16-bit floats, rounds after each of its steps
    _unary("special.ndtr", sp.ndtr, low=-5, high=5, complex_kernel="erf_vml_cpu",
           parity_tol={ember.float16: (1e-2, 1e-3), ember.bfloat16: (8e-2, 1e-2)}),
    _unary("special.ndtri", sp.ndtri, low=0.05, high=0.95, half=False),
    _unary("special.log_ndtr", sp.log_ndtr, low=-10, high=5, half=False),
    _unary("special.erfcx", sp.erfcx, low=-3, high=10, half=False),
    _unary("special.entr", sp.entr, low=0.1, high=5),
    OpInfo("sinc", float_ref(_sinc_ref), _sinc_samples, dtypes=ALL, result_dtype="float",
           gradgrad=True, error_inputs=lambda: [number_error("sinc")]),
    OpInfo("special.xlog1py", float_ref(sp.xlog1py),
           _pair_samples(-3, 3, -0.5, 4, _XLOG1PY_SPECIAL, number_input=2.5),
           dtypes=REAL, result_dtype="float", grad_samples=_xlog1py_grad_samples,
           gradgrad=True, error_inputs=lambda: [complex_error("xlog1py_cpu", inputs=2),
                                 float8_error("xlog1py_cpu", inputs=2)]),
    OpInfo("special.zeta", _zeta_ref,
           _pair_samples(1.5, 5, 0.5, 4, _ZETA_SPECIAL, number_input=3.0), dtypes=NO_HALF,
           result_dtype="float", grad_samples=_zeta_grad_samples, gradgrad=True,
           error_inputs=_zeta_errors),
    OpInfo("igamma", _igamma_ref(False), _pair_samples(0.5, 5, 0.1, 6, _IGAMMA_SPECIAL, scalars=()),
           dtypes=FLOATS + LOW, grad_samples=_igamma_grad_samples, gradgrad=True,
           error_inputs=_igamma_errors("igamma"), tol={ember.float32: (1e-4, 1e-5)}),
    OpInfo("igammac", _igamma_ref(True), _pair_samples(0.5, 5, 0.1, 6, _IGAMMA_SPECIAL, scalars=()),
           dtypes=FLOATS + LOW, grad_samples=_igamma_grad_samples, gradgrad=True,
           error_inputs=_igamma_errors("igammac"), tol={ember.float32: (1e-4, 1e-5)}),
    OpInfo("mvlgamma", _mvlgamma_ref, _mvlgamma_samples, dtypes=FLOATS + LOW + INTS,
           result_dtype="float", gradgrad=True, error_inputs=_mvlgamma_errors,
           tol={d: (1.3e-5, 1e-5) for d in INTS}),     # computed in float32
]

__all__ = ["OPS", "REAL", "NO_HALF", "SPECIAL", "as_float", "float_ref", "chain",
           "special_values", "complex_error", "half_error", "float8_error", "number_error",
           "COMPLEX", "ALL"]
