"""OpInfo entries for ember/ops/reduction.py and _reduce.py, and the sample helpers every
reduction entry (extrema.py, statistics.py, scan.py here) shares."""

import re
import warnings

import numpy as np
import scipy.special

import ember
from ember._host_values import host_values
from tests.ops.opdb.core import (ALL, ALL_REAL, COMPLEX, FLOATS, INTS, LOW, ErrorInput, OpInfo,
                                 SampleInput, make)

SHAPE = (2, 3, 2)       # 12 elements: small enough for gradgradcheck

# Double backward through pow (norm, logsumexp) needs ember.where, which pow's derivative imports
# and which another module provides; until it is there these second derivatives cannot run.


def axis(dim, ndim):
    """NumPy's ``axis`` for an ember ``dim`` argument (None for all dims)."""
    if dim is None or ndim == 0 or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return None
    if isinstance(dim, (tuple, list)):
        return tuple(d % ndim for d in dim)
    return dim % ndim


def dim_cases(*, tuple_dims=True, no_dim=True):
    """(shape, kwargs) pairs covering each dim form, keepdim, and 0-dim input."""
    cases = [(SHAPE, {"dim": 1}), (SHAPE, {"dim": -1, "keepdim": True}), ((), {"dim": 0}),
             ((), {"dim": -1, "keepdim": True}), ((4,), {"dim": 0})]
    if tuple_dims:
        cases += [(SHAPE, {"dim": (0, 2)}), (SHAPE, {"dim": [-1, 0], "keepdim": True})]
    if no_dim:
        cases += [(SHAPE, {}), (SHAPE, {"dim": None, "keepdim": True}), ((), {})]
    return cases


def reduction_samples(*, low=None, high=None, tuple_dims=True, no_dim=True, empty_all=True,
                      dtypes_kwarg=False, extra=None, cases=None):
    """Samples for a reduction with ``dim``/``keepdim``: every dim form, 0-dim, empty and
    noncontiguous inputs. ``empty_all``: the op reduces an empty dim (it has an identity);
    ``dtypes_kwarg``: also pass ``dtype=``; ``extra(dtype, requires_grad)``: more samples."""
    def samples(dtype, requires_grad):
        def mk(shape, **kw):
            return make(shape, dtype, requires_grad, low=low, high=high, **kw)
        for shape, kwargs in (cases or dim_cases(tuple_dims=tuple_dims, no_dim=no_dim)):
            yield SampleInput(mk(shape), kwargs=dict(kwargs), name=f"{list(shape)}")
        yield SampleInput(mk((3, 4), noncontiguous=True), kwargs={"dim": 1}, name="noncontig")
        yield SampleInput(mk((0, 3)), kwargs={"dim": 1}, name="empty_output")
        if empty_all:
            yield SampleInput(mk((0, 3)), kwargs={"dim": 0}, name="empty_dim")
            if no_dim:
                yield SampleInput(mk((0, 3)), name="empty_all")
        if dtypes_kwarg:
            wider = ember.complex128 if dtype.is_complex else ember.float64
            yield SampleInput(mk(SHAPE), kwargs={"dim": 1, "dtype": wider}, name="dtype")
        if extra is not None:
            yield from extra(dtype, requires_grad)
    return samples


def with_dtype_kwarg(rule):
    """A result_dtype callable: the ``dtype=`` argument when given, else ``rule(dtype)``."""
    def result(dtype, sample):
        if sample is not None and sample.kwargs.get("dtype") is not None:
            return sample.kwargs["dtype"]
        return rule(dtype)
    return result


def int64_for_integral(dtype):
    return ember.int64 if not (dtype.is_floating_point or dtype.is_complex) else dtype


def cast(x, dtype):
    """A reference input cast as the op's ``dtype=`` argument casts it."""
    x = np.asarray(x)
    if dtype is None:
        return x
    return x.astype(np.float32 if dtype in LOW else dtype.np)


def dims_errors(*, tuple_dims=True):
    """The errors every reduction raises for bad dims."""
    def errors():
        x = ember.ones(2, 3)
        yield ErrorInput(SampleInput(x, kwargs={"dim": 2}), IndexError,
                         r"Dimension out of range \(expected to be in range of \[-2, 1\], but "
                         r"got 2\)")
        yield ErrorInput(SampleInput(x, kwargs={"dim": -3}), IndexError, "but got -3")
        if tuple_dims:
            yield ErrorInput(SampleInput(x, kwargs={"dim": (0, -2)}), RuntimeError,
                             "dim 0 appears multiple times in the list of dims")
    return errors


def edited(t, edit, requires_grad=False):
    """A copy of ``t`` with ``edit(array)`` applied to its values (NaNs, zeros, ties)."""
    arr = host_values(t.detach()).copy()
    edit(arr)
    out = ember.from_numpy(arr)
    return out.requires_grad_() if requires_grad else out


def setting(value, *positions):
    """An ``edit`` for ``edited`` that writes ``value`` at ``positions``."""
    def edit(arr):
        for p in positions:
            arr[p] = value
    return edit


def chain(*error_fns):
    def errors():
        for fn in error_fns:
            yield from fn()
    return errors


# --- sum, mean, nansum, nanmean, prod -------------------------------------------------------------

def _sum_ref(x, dim=None, keepdim=False, *, dtype=None):
    x = cast(x, dtype)
    out = np.sum(x, axis=axis(dim, x.ndim), keepdims=keepdim)
    return out.astype(np.int64) if out.dtype.kind in "biu" and dtype is None else out


def _mean_ref(x, dim=None, keepdim=False, *, dtype=None):
    x = cast(x, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)      # empty slices
        return np.mean(x, axis=axis(dim, x.ndim), keepdims=keepdim)


def _nansum_ref(x, dim=None, keepdim=False, *, dtype=None):
    x = np.asarray(x)
    x = cast(np.where(np.isnan(x), 0, x) if x.dtype.kind == "f" else x, dtype)
    return np.nansum(x, axis=axis(dim, x.ndim), keepdims=keepdim)


def _nanmean_ref(x, dim=None, keepdim=False, *, dtype=None):
    x = cast(x, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)      # all-NaN and empty slices
        return np.nanmean(x, axis=axis(dim, x.ndim), keepdims=keepdim)


def _prod_ref(x, dim=None, keepdim=False, *, dtype=None):
    x = cast(x, dtype)
    return np.prod(x, axis=axis(dim, x.ndim), keepdims=keepdim)


def _with_nans(to_int):
    def samples(dtype, requires_grad):
        if requires_grad or not dtype.is_floating_point:
            return
        x = edited(make(SHAPE, dtype), setting(float("nan"), (0, 1, 0), (1, 1, 1)))
        yield SampleInput(x, kwargs={"dim": 1}, name="nan")
        yield SampleInput(x, name="nan_all")
        if to_int:
            yield SampleInput(x, kwargs={"dim": 1, "dtype": ember.int32}, name="nan_to_int")
    return samples


def _zeros_in(shape, positions):
    def extra(dtype, requires_grad):
        grads = requires_grad and (dtype.is_floating_point or dtype.is_complex)
        x = edited(make(shape, dtype, low=0.5, high=2), setting(0, *positions), grads)
        yield SampleInput(x, kwargs={"dim": 1}, name="zeros")
        yield SampleInput(x, name="zeros_all")
    return extra


def _mean_errors():
    yield ErrorInput(SampleInput(ember.tensor([1, 2])), RuntimeError,
                     r"mean\(\): could not infer output dtype. Input dtype must be either a "
                     r"floating point or complex dtype. Got: Long")
    yield ErrorInput(SampleInput(ember.ones(2), kwargs={"dtype": ember.int64}), RuntimeError,
                     "Optional dtype must be either a floating point or complex dtype. Got: Long")


def _nanmean_errors():
    yield ErrorInput(SampleInput(ember.tensor([1, 2])), RuntimeError,
                     r"nanmean\(\): expected input to have floating point or complex dtype but got "
                     r"Long")
    yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.complex64)), RuntimeError,
                     "nansum on CPU does not support complex inputs")


def _nansum_errors():
    yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.complex64)), RuntimeError,
                     "nansum on CPU does not support complex inputs")


# prod(input) takes no keepdim: dim=None with keepdim=True is an error (see _prod_errors)
_PROD_CASES = [c for c in dim_cases(tuple_dims=False)
               if not ("dim" in c[1] and c[1]["dim"] is None)]


def _prod_errors():
    x = ember.ones(2, 3)
    yield ErrorInput(SampleInput(x, kwargs={"dim": 2}), IndexError, "Dimension out of range")
    yield ErrorInput(SampleInput(x, kwargs={"dim": None, "keepdim": True}), TypeError,
                     r"prod\(\): argument 'dim' must be int, not NoneType")
    yield ErrorInput(SampleInput(x, kwargs={"dim": (0, 1)}), TypeError,
                     r"prod\(\): argument 'dim' must be int, not tuple")


def _float8_errors():
    yield ErrorInput(SampleInput(ember.ones(2, 3, dtype=ember.float8_e4m3fn)),
                     NotImplementedError, "\"sum_cpu\" not implemented for 'Float8_e4m3fn'")
    yield ErrorInput(SampleInput(ember.ones(2, 3), kwargs={"dtype": ember.float8_e4m3fn}),
                     NotImplementedError, "\"sum_cpu\" not implemented for 'Float8_e4m3fn'")


SUM_DTYPE = with_dtype_kwarg(int64_for_integral)
SAME_DTYPE = with_dtype_kwarg(lambda d: d)


# --- trace ----------------------------------------------------------------------------------------

def _trace_ref(x):
    x = np.asarray(x)
    wide = np.int64 if x.dtype.kind in "iu" else None
    return np.asarray(np.trace(x, dtype=wide))


def _trace_samples(dtype, requires_grad):
    for shape in ((3, 3), (2, 4), (5, 2), (1, 1), (0, 3), (0, 0)):
        yield SampleInput(make(shape, dtype, requires_grad), name=f"{list(shape)}")
    yield SampleInput(make((4, 3), dtype, requires_grad, noncontiguous=True),
                      name="noncontiguous")
    yield SampleInput(make((3, 5), dtype, requires_grad).t(), name="transposed")


def _trace_errors():
    for shape in ((3,), (), (2, 2, 2)):
        yield ErrorInput(SampleInput(ember.ones(shape)), RuntimeError,
                         f"trace: expected a matrix, but got tensor with dim {len(shape)}")
    yield ErrorInput(SampleInput(ember.ones(2, 2, dtype=ember.bool)), NotImplementedError,
                     "\"trace\" not implemented for 'Bool'")
    yield ErrorInput(SampleInput(ember.ones(2, 2, dtype=ember.float8_e4m3fn)),
                     NotImplementedError, "\"trace\" not implemented for 'Float8_e4m3fn'")


# --- logsumexp ------------------------------------------------------------------------------------

def _logsumexp_ref(x, dim, keepdim=False):
    x = np.asarray(x)
    if x.dtype.kind in "biu":
        x = x.astype(np.float64)
    if x.ndim == 0:
        return scipy.special.logsumexp(x.reshape(1), axis=0)
    return scipy.special.logsumexp(x, axis=axis(dim, x.ndim), keepdims=keepdim)


def _logsumexp_extra(dtype, requires_grad):
    if requires_grad or not dtype.is_floating_point:
        return
    inf = float("inf")
    yield SampleInput(ember.tensor([[1000., 1000.], [-inf, -inf], [inf, 1.], [-inf, 0.]],
                                   dtype=dtype), kwargs={"dim": 1}, name="extremes")


_LSE_CASES = [(SHAPE, {"dim": 1}), (SHAPE, {"dim": -1, "keepdim": True}), ((), {"dim": 0}),
              (SHAPE, {"dim": (0, 2)}), (SHAPE, {"dim": [-1, 0], "keepdim": True}),
              ((4,), {"dim": 0})]


# --- hash_tensor ----------------------------------------------------------------------------------

def _hash_ref(x, dim=None, keepdim=False, mode=0):
    x = np.asarray(x)
    wide = x.astype(np.float64 if x.dtype.kind in "fV" else np.int64)
    return np.bitwise_xor.reduce(wide.view(np.uint64), axis=axis(dim, x.ndim), keepdims=keepdim)


def _hash_samples(dtype, requires_grad):
    for shape, kwargs in ((SHAPE, {}), (SHAPE, {"dim": 1}), (SHAPE, {"dim": (0, -1)}),
                          (SHAPE, {"dim": -1, "keepdim": True}), ((), {}), ((0, 3), {"dim": 1})):
        yield SampleInput(make(shape, dtype), kwargs=kwargs, name=f"{shape}{kwargs}")
    yield SampleInput(make((3, 4), dtype, noncontiguous=True), kwargs={"dim": 0},
                      name="noncontiguous")


def _hash_errors():
    x = ember.ones(2, 3)
    yield ErrorInput(SampleInput(x, kwargs={"mode": 1}), RuntimeError,
                     "Unknown hash_tensor mode: 1")
    yield ErrorInput(SampleInput(ember.ones(0, 3)), RuntimeError,
                     "Expected reduction dim to be specified for input.numel\\(\\) == 0")
    yield ErrorInput(SampleInput(ember.ones(2, 0), kwargs={"dim": (0, 1)}), IndexError,
                     "Expected reduction dim 1 to have non-zero size")
    yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.complex64)), NotImplementedError,
                     "\"xor_sum_cpu\" not implemented for 'ComplexFloat'")
    yield from dims_errors()()


# --- all, any, count_nonzero ----------------------------------------------------------------------

def _logical_ref(fn):
    def ref(x, dim=None, keepdim=False):
        x = np.asarray(x)
        ax = () if isinstance(dim, (tuple, list)) and not dim else axis(dim, x.ndim)
        out = fn(x != 0, axis=ax, keepdims=keepdim)
        return out.astype(np.uint8) if x.dtype == np.uint8 else out
    return ref


def _logical_samples(dtype, requires_grad):
    yield from reduction_samples()(dtype, requires_grad)
    x = make(SHAPE, dtype)
    yield SampleInput(x, kwargs={"dim": ()}, name="no_dims")
    ones = ember.ones(SHAPE, dtype=dtype)
    yield SampleInput(ones, kwargs={"dim": 1}, name="all_nonzero")
    yield SampleInput(ember.zeros(SHAPE, dtype=dtype), kwargs={"dim": 1}, name="all_zero")


def _verdict_samples(dtype, requires_grad):
    for shape in (SHAPE, (), (0,), (4,)):
        yield SampleInput(make(shape, dtype), name=str(shape))
    yield SampleInput(ember.ones(SHAPE, dtype=dtype), name="all_true")
    yield SampleInput(ember.zeros(SHAPE, dtype=dtype), name="all_false")


def _verdict_errors():
    yield ErrorInput(SampleInput(ember.ones(2)), RuntimeError,
                     re.escape("self.scalar_type() == at::kBool INTERNAL ASSERT FAILED"))


def _count_ref(x, dim=None):
    x = np.asarray(x)
    return np.asarray(np.count_nonzero(x, axis=axis(dim, x.ndim))).astype(np.int64)


def _count_samples(dtype, requires_grad):
    for shape, kwargs in ((SHAPE, {}), (SHAPE, {"dim": 1}), (SHAPE, {"dim": (0, -1)}),
                          (SHAPE, {"dim": [2]}), ((), {}), ((), {"dim": 0})):
        yield SampleInput(make(shape, dtype, low=0, high=2), kwargs=kwargs, name=str(shape))
    yield SampleInput(make((3, 4), dtype, low=0, high=2, noncontiguous=True), kwargs={"dim": 1},
                      name="noncontig")
    yield SampleInput(make((0, 3), dtype), kwargs={"dim": 0}, name="empty")


# --- norm -----------------------------------------------------------------------------------------

def _norm_ref(x, p="fro", dim=None, keepdim=False, *, dtype=None):
    x = cast(x, dtype)
    ax = axis(dim, x.ndim)
    a = np.abs(x).astype(np.float64)
    p = 2.0 if p == "fro" else float(p)
    if p == np.inf:
        return np.max(a, axis=ax, keepdims=keepdim)
    if p == -np.inf:
        return np.min(a, axis=ax, keepdims=keepdim)
    if p == 0:
        return np.sum(a != 0, axis=ax, keepdims=keepdim).astype(np.float64)
    with np.errstate(divide="ignore"):
        return np.sum(a ** p, axis=ax, keepdims=keepdim) ** (1 / p)


_NORM_ORDERS = ("fro", 2, 1, 3, 0.5, -1, 0, float("inf"), -float("inf"))


def _norm_samples(dtype, requires_grad):
    yield from reduction_samples(empty_all=False)(dtype, requires_grad)
    for p in _NORM_ORDERS:
        yield SampleInput(make(SHAPE, dtype, requires_grad, exclude_zero=True), (p, 1),
                          name=f"p={p}")
        yield SampleInput(make(SHAPE, dtype, requires_grad, exclude_zero=True), (p,),
                          {"dim": (0, 2), "keepdim": True}, name=f"p={p}_dims")
    yield SampleInput(make((0, 3), dtype, requires_grad), kwargs={"dim": 0}, name="empty_dim")
    yield SampleInput(make((0, 3), dtype, requires_grad), (0,), name="empty_p0")
    wider = ember.complex128 if dtype.is_complex else ember.float64
    yield SampleInput(make(SHAPE, dtype, requires_grad), kwargs={"dtype": wider}, name="dtype")
    if not requires_grad:
        x = edited(make((2, 3), dtype), setting(0, 0))
        for p in _NORM_ORDERS:
            yield SampleInput(x, (p, 1), name=f"zero_row_p={p}")


def _norm_dtype(dtype, sample):
    chosen = sample.kwargs.get("dtype") if sample is not None else None
    return (chosen or dtype).to_real()


def _norm_errors():
    yield ErrorInput(SampleInput(ember.tensor([1, 2])), RuntimeError,
                     "linalg.vector_norm: Expected a floating point or complex tensor as input. "
                     "Got Long")
    yield ErrorInput(SampleInput(ember.ones(2), kwargs={"dtype": ember.int64}), RuntimeError,
                     "dtype should be floating point or complex, but got Long")
    yield ErrorInput(SampleInput(ember.ones(2), kwargs={"dtype": ember.float16}), RuntimeError,
                     r"the dtype of the input \(Float\) should be convertible without narrowing "
                     r"to the specified dtype \(Half\)")
    yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.complex64),
                                 kwargs={"dtype": ember.float64}), RuntimeError,
                     "dtype should be complex for complex inputs, but got Double")
    yield ErrorInput(SampleInput(ember.ones(2), kwargs={"dtype": ember.complex64}), RuntimeError,
                     "dtype should be real for real inputs, but got ComplexFloat")
    yield ErrorInput(SampleInput(ember.ones(2, 3), ("abc",)), RuntimeError,
                     "linalg.matrix_norm: Order abc not supported.")
    inf = float("inf")
    yield ErrorInput(SampleInput(ember.ones(0, 3), (inf,)), RuntimeError,
                     "cannot compute the inf norm on an empty tensor")
    yield ErrorInput(SampleInput(ember.ones(0, 3), (-inf, 0)), RuntimeError,
                     "cannot compute the -inf norm on the dimension 0")
    # every negative order lacks an identity too
    yield ErrorInput(SampleInput(ember.ones(0, 3), (-1,)), RuntimeError,
                     "cannot compute the -1 norm on an empty tensor")
    yield ErrorInput(SampleInput(ember.ones(0, 3), (-0.5, 0)), RuntimeError,
                     "cannot compute the -0.5 norm on the dimension 0")
    yield from dims_errors()()


# --- the index-routing internals ------------------------------------------------------------------

def _take_samples(dtype, requires_grad):
    x = make((3, 4), dtype, requires_grad)
    yield SampleInput(x, (ember.tensor([[2, 0, 1, 1], [0, 0, 2, 1]]), 0), name="dim0")
    yield SampleInput(make((3, 4), dtype, requires_grad, noncontiguous=True),
                      (ember.tensor([[3, 3], [0, 1], [2, 2]]), 1), name="dim1")
    yield SampleInput(make((2, 0), dtype, requires_grad),
                      (ember.zeros(2, 0, dtype=ember.int64), 1), name="empty")


def _index_grad_samples(dtype, requires_grad):
    yield SampleInput(make((2, 4), dtype, requires_grad),
                      (ember.tensor([[2, 0, 1, 2], [0, 0, 2, 1]]), 0, (3, 4)), name="repeats")
    yield SampleInput(make((3, 1), dtype, requires_grad),
                      (ember.tensor([[3], [0], [2]]), 1, (3, 4)), name="one_per_slice")
    yield SampleInput(make((3, 2), dtype, requires_grad, noncontiguous=True),
                      (ember.tensor([[1, 1], [0, 1], [3, 3]]), 1, (3, 4)), name="noncontig")


def _index_grad_ref(grad, index, dim, shape):
    out = np.zeros(shape, dtype=grad.dtype)
    for pos in np.ndindex(*index.shape):
        target = list(pos)
        target[dim] = index[pos]
        out[tuple(target)] += grad[pos]
    return out


# PyTorch keeps the partial sums of a 16-bit nansum over several dims in 16 bits, so its
# result errs by an ulp of those sums (the samples' values stay below 10) where ember rounds
# the exact sum once
_PARTIAL_SUMS_TOL = {ember.float16: (2e-3, 1e-2), ember.bfloat16: (1.6e-2, 6.25e-2)}

OPS = [
    OpInfo("sum", _sum_ref, reduction_samples(dtypes_kwarg=True), dtypes=ALL,
           result_dtype=SUM_DTYPE, gradgrad=True,
           error_inputs=chain(dims_errors(), _float8_errors)),
    OpInfo("mean", _mean_ref, reduction_samples(dtypes_kwarg=True), dtypes=FLOATS + LOW + COMPLEX,
           result_dtype=SAME_DTYPE, gradgrad=True,
           error_inputs=chain(dims_errors(), _mean_errors)),
    OpInfo("nansum", _nansum_ref, reduction_samples(dtypes_kwarg=True, extra=_with_nans(True)),
           dtypes=ALL_REAL, result_dtype=SUM_DTYPE, gradgrad=True,
           error_inputs=chain(dims_errors(), _nansum_errors), parity_tol=_PARTIAL_SUMS_TOL),
    OpInfo("nanmean", _nanmean_ref, reduction_samples(dtypes_kwarg=True, extra=_with_nans(False)),
           dtypes=FLOATS + LOW, result_dtype=SAME_DTYPE, gradgrad=True,
           error_inputs=chain(dims_errors(), _nanmean_errors), parity_tol=_PARTIAL_SUMS_TOL),
    OpInfo("prod", _prod_ref,
           reduction_samples(low=-2, high=2, cases=_PROD_CASES, dtypes_kwarg=True,
                             extra=_zeros_in((2, 3, 2), [(0, 1, 0), (1, 0, 1), (1, 2, 1)])),
           dtypes=ALL, result_dtype=SUM_DTYPE, gradgrad=True, error_inputs=_prod_errors),
    OpInfo("trace", _trace_ref, _trace_samples, dtypes=FLOATS + LOW + INTS + COMPLEX,
           result_dtype=lambda d, s: int64_for_integral(d), gradgrad=True,
           error_inputs=_trace_errors),
    OpInfo("logsumexp", _logsumexp_ref,
           reduction_samples(cases=_LSE_CASES, empty_all=False, extra=_logsumexp_extra),
           dtypes=ALL, result_dtype="float", gradgrad=True,
           error_inputs=dims_errors(),
           # PyTorch rounds max + log(sum) in 16 bits: near 0 its result is off by an ulp of
           # the log, far above the relative tolerance
           parity_tol={ember.float16: (2e-3, 1e-3), ember.bfloat16: (1.6e-2, 1e-2)}),
    OpInfo("all", _logical_ref(np.all), _logical_samples, dtypes=ALL, grad=False,
           result_dtype=lambda d, s: ember.uint8 if d is ember.uint8 else ember.bool,
           error_inputs=dims_errors()),
    OpInfo("any", _logical_ref(np.any), _logical_samples, dtypes=ALL, grad=False,
           result_dtype=lambda d, s: ember.uint8 if d is ember.uint8 else ember.bool,
           error_inputs=dims_errors()),
    OpInfo("_is_all_true", lambda x: np.all(x), _verdict_samples, dtypes=(ember.bool,),
           grad=False, result_dtype="bool", error_inputs=_verdict_errors,
           torch_name="_is_all_true"),
    OpInfo("_is_any_true", lambda x: np.any(x), _verdict_samples, dtypes=(ember.bool,),
           grad=False, result_dtype="bool", error_inputs=_verdict_errors,
           torch_name="_is_any_true"),
    OpInfo("count_nonzero", _count_ref, _count_samples, dtypes=ALL, grad=False,
           result_dtype="int64", error_inputs=dims_errors()),
    OpInfo("hash_tensor", _hash_ref, _hash_samples, dtypes=ALL_REAL, grad=False,
           result_dtype=lambda d, s: ember.uint64, error_inputs=_hash_errors),
    OpInfo("norm", _norm_ref, _norm_samples, dtypes=FLOATS + LOW + COMPLEX,
           result_dtype=_norm_dtype, gradgrad=True, error_inputs=_norm_errors,
           tol={ember.float16: (2e-3, 2e-3)}),
    OpInfo("_take_along_dim", lambda x, index, dim: np.take_along_axis(x, index, dim),
           _take_samples, dtypes=FLOATS + COMPLEX + INTS, gradgrad=True,
           torch_name="take_along_dim"),
    OpInfo("_index_grad", _index_grad_ref, _index_grad_samples, dtypes=FLOATS + COMPLEX,
           gradgrad=True, torch_op=lambda g, index, dim, shape:
           g.new_zeros(shape).scatter_add(dim, index, g)),
]
