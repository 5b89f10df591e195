"""OpInfo entries for ember/ops/log_space.py: logaddexp, logaddexp2, logcumsumexp, softmax,
log_softmax."""

import math

import numpy as np

import ember
from tests.ops.opdb.core import (COMPLEX, FLOATS, INTS, LOW, ErrorInput, OpInfo, SampleInput,
                                 binary_samples, make)
from tests.ops.opdb.special_math import float8_error

INF, NAN = math.inf, math.nan


def _complex_logaddexp(a, b):
    """log(exp(a) + exp(b)) from the operand of larger real part (finite operands)."""
    hi = np.where(a.real >= b.real, a, b)
    lo = np.where(a.real >= b.real, b, a)
    return hi + np.log1p(np.exp(lo - hi))


def _logaddexp_ref(a, b):
    with np.errstate(all="ignore"):
        if np.iscomplexobj(a) or np.iscomplexobj(b):
            return _complex_logaddexp(np.asarray(a), np.asarray(b))
        return np.logaddexp(a, b)


def _quiet(fn):
    def ref(*args):
        with np.errstate(all="ignore"):
            return fn(*args)
    return ref


def _logaddexp_samples(dtype, requires_grad, complex_grad=True):
    yield from binary_samples(low=-5, high=5, scalars=())(dtype, requires_grad)
    if requires_grad:
        if dtype is ember.float64 and complex_grad:
            yield SampleInput(make((4,), ember.complex128, True, low=-3, high=3),
                              (make((4,), ember.complex128, True, low=-3, high=3),),
                              name="complex")
        return
    big = [1000.0, -1000.0, 80.0, -50.0]
    yield SampleInput(ember.tensor(big, dtype=dtype), (ember.tensor([999.0, -1001.0, -80.0,
                                                                     -50.0], dtype=dtype),),
                      name="large")
    if dtype.is_floating_point:
        a = [INF, -INF, INF, -INF, NAN, 1.0, 0.0, -0.0, INF, -INF]
        b = [INF, -INF, -INF, INF, 1.0, NAN, -0.0, -0.0, 2.0, 2.0]
        yield SampleInput(ember.tensor(a, dtype=dtype), (ember.tensor(b, dtype=dtype),),
                          name="special")
    # a 0-dim operand of a wider dtype does not widen the result
    yield SampleInput(make((3,), dtype, low=-2, high=2), (ember.tensor(1.5, dtype=ember.float64)
                                                          if dtype.is_floating_point else
                                                          ember.tensor(1.5 + 1j),),
                      name="zero_dim_other")


def _logaddexp_errors(name, complex_ok):
    def errors():
        for dtype in (ember.int64, ember.bool, ember.uint8):
            t = ember.ones(2, dtype=dtype)
            yield ErrorInput(SampleInput(t, (t,)), NotImplementedError,
                             f"\"{name}_cpu\" not implemented for '{dtype._torch_name}'")
        yield ErrorInput(SampleInput(ember.ones(2), (2.0,)), TypeError,
                         fr"{name}\(\): argument 'other' \(position 2\) must be Tensor, not float")
        yield ErrorInput(SampleInput(ember.ones(2), (ember.ones(3),)), RuntimeError,
                         r"size of tensor a \(2\) must match the size of tensor b \(3\)")
        yield float8_error(f"{name}_cpu", inputs=2)
        if not complex_ok:
            c = ember.ones(2, dtype=ember.complex64)
            yield ErrorInput(SampleInput(c, (c,)), NotImplementedError,
                             f"\"{name}_cpu\" not implemented for 'ComplexFloat'")
    return errors


# --- logcumsumexp -----------------------------------------------------------------------------

def _logcumsumexp_ref(x, dim):
    x = np.asarray(x)
    if x.ndim == 0:
        return x
    with np.errstate(all="ignore"):
        if x.dtype.kind != "c":
            return np.logaddexp.accumulate(x.astype(np.float64), axis=dim).astype(x.dtype)
        src = np.moveaxis(x.astype(np.complex128), dim, 0)
        out = np.empty_like(src)
        for k in range(len(src)):
            out[k] = src[k] if k == 0 else _complex_logaddexp(out[k - 1], src[k])
        return np.moveaxis(out, 0, dim).astype(x.dtype)


def _logcumsumexp_samples(dtype, requires_grad):
    for shape, dim in (((5,), 0), ((), 0), ((0,), 0), ((2, 3, 4), 1), ((2, 3, 4), -1),
                       ((3, 0), 0)):
        yield SampleInput(make(shape, dtype, requires_grad, low=-4, high=4), (dim,),
                          name=f"{list(shape)}_dim{dim}")
    yield SampleInput(make((4, 3), dtype, requires_grad, low=-4, high=4, noncontiguous=True),
                      (0,), name="noncontiguous")
    if requires_grad:
        # gradients of opposite signs, and inputs of very different sizes
        x = ember.tensor([1000.0, -1000.0, 3.0, 2.0], dtype=dtype, requires_grad=True)
        yield SampleInput(x, (0,), name="spread")
        if dtype is ember.float64:
            yield SampleInput(make((2, 3), ember.complex128, True, low=-2, high=2), (1,),
                              name="complex")
        return
    low = -50.0 if dtype.is_complex else -INF      # the complex reference takes no infinity
    yield SampleInput(ember.tensor([[1000.0, -1000.0, 500.0], [low, low, 1.0]], dtype=dtype),
                      (1,), name="large")
    if dtype.is_floating_point:
        yield SampleInput(ember.tensor([-INF, -INF, 1.0, INF, 2.0, NAN, 3.0], dtype=dtype), (0,),
                          name="special")


def _logcumsumexp_errors():
    f8 = float8_error("logcumsumexp_out_cpu")
    yield ErrorInput(SampleInput(f8.sample.input, (0,)), f8.error_type, f8.match)
    yield ErrorInput(SampleInput(ember.tensor([1, 2]), (0,)), NotImplementedError,
                     "\"logcumsumexp_out_cpu\" not implemented for 'Long'")
    yield ErrorInput(SampleInput(ember.ones(2), (1,)), IndexError,
                     r"Dimension out of range \(expected to be in range of \[-1, 0\], but got 1\)")


# --- softmax, log_softmax ---------------------------------------------------------------------

def _log_softmax(x, axis):
    """x - logsumexp(x): NaN for a row holding +inf or only -inf (scipy's softmax would give
    the limits there; PyTorch, NaN)."""
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _softmax(x, axis):
    return np.exp(_log_softmax(x, axis))


def _softmax_ref(fn):
    def ref(x, dim, dtype=None):
        x = np.asarray(x)
        out_dtype = x.dtype if dtype is None else np.dtype(dtype.np)
        if out_dtype.itemsize == 2:
            out_dtype = np.dtype(np.float32)        # the check sees 16-bit results as float32
        if x.size == 0:
            return x.astype(out_dtype)
        with np.errstate(all="ignore"):
            return fn(x.astype(np.float64), axis=dim if x.ndim else None).astype(out_dtype)
    return ref


def _softmax_samples(dtype, requires_grad):
    is_float = dtype.is_floating_point
    kwargs = {} if is_float else {"dtype": ember.float32}
    for shape, dim in (((5,), 0), ((), 0), ((), -1), ((0,), 0), ((0, 3), 1), ((2, 3, 4), 1),
                       ((2, 3, 4), -1), ((2, 3, 4), 0)):
        yield SampleInput(make(shape, dtype, requires_grad, low=-5, high=5), (dim,), kwargs,
                          name=f"{list(shape)}_dim{dim}")
    yield SampleInput(make((3, 4), dtype, requires_grad, low=-5, high=5, noncontiguous=True),
                      (1,), kwargs, name="noncontiguous")
    if requires_grad or not is_float:
        return
    # shifts: huge values, rows that are all -inf or hold +inf or NaN
    rows = [[1000.0, 0.0, -1000.0], [-INF, -INF, 1.0], [-INF, -INF, -INF], [INF, 1.0, 2.0],
            [NAN, 1.0, 2.0], [-1000.0, -1001.0, -1002.0]]
    yield SampleInput(ember.tensor(rows, dtype=dtype), (1,), name="special")
    wider = ember.float64 if dtype is not ember.float64 else ember.float32
    yield SampleInput(make((2, 3), dtype, low=-5, high=5), (-1,), {"dtype": wider},
                      name="dtype")
    yield SampleInput(make((2, 3), dtype, low=-5, high=5), (0, wider), name="dtype_positional")


def _softmax_result(dtype, sample):
    chosen = sample.kwargs.get("dtype", sample.args[1] if len(sample.args) > 1 else None)
    return chosen or dtype


def _softmax_errors(name):
    def errors():
        yield ErrorInput(SampleInput(ember.tensor([1, 2]), (0,)), NotImplementedError,
                         f"\"{name}_lastdim_kernel_impl\" not implemented for 'Long'")
        yield ErrorInput(SampleInput(ember.tensor([[1, 2]]), (0,)), NotImplementedError,
                         f"\"{name}_kernel_impl\" not implemented for 'Long'")
        yield ErrorInput(SampleInput(ember.ones(2, 2), (0,), {"dtype": ember.complex64}),
                         NotImplementedError,
                         f"\"{name}_kernel_impl\" not implemented for 'ComplexFloat'")
        yield ErrorInput(SampleInput(ember.ones(2, 2), (2,)), IndexError,
                         r"Dimension out of range \(expected to be in range of \[-2, 1\], "
                         r"but got 2\)")
        yield ErrorInput(SampleInput(ember.ones(2, 2), (None,)), TypeError,
                         fr"{name}\(\): argument 'dim' \(position 2\) must be int, not NoneType")
    return errors


def _softmax_entry(name, fn, **kw):
    return OpInfo(name, _softmax_ref(fn), _softmax_samples, dtypes=FLOATS + LOW + INTS,
                  result_dtype=_softmax_result, gradgrad=True, error_inputs=_softmax_errors(name),
                  tol={d: (1.3e-5, 1e-6) for d in INTS}, **kw)


def _log_softmax_backward_samples(dtype, requires_grad):
    """(grad_output, output = log_softmax(x, dim), dim, dtype) samples."""
    for shape, dim in (((5,), 0), ((2, 3, 4), 1), ((2, 3, 4), -1), ((0, 3), 1)):
        x = make(shape, dtype, low=-3, high=3)
        out = ember.log_softmax(x, dim).detach().requires_grad_(requires_grad)
        yield SampleInput(make(shape, dtype, requires_grad), (out, dim, dtype),
                          name=f"{list(shape)}_dim{dim}")


def _log_softmax_backward_ref(grad, out, dim, dtype):
    return grad - np.exp(out) * grad.sum(dim, keepdims=True)


def _log_softmax_backward_torch(grad, out, dim, dtype):
    import torch
    return torch._log_softmax_backward_data(grad, out, dim, out.dtype)


def _softmax_backward_samples(dtype, requires_grad):
    """(grad_output, output = softmax(x, dim), dim, dtype) samples."""
    for shape, dim in (((5,), 0), ((2, 3, 4), 1), ((2, 3, 4), -1), ((0, 3), 1), ((), 0)):
        x = make(shape, dtype, low=-3, high=3)
        out = ember.softmax(x, dim).detach().requires_grad_(requires_grad)
        yield SampleInput(make(shape, dtype, requires_grad), (out, dim, dtype),
                          name=f"{list(shape)}_dim{dim}")


def _softmax_backward_ref(grad, out, dim, dtype):
    return out * (grad - (grad * out).sum(dim, keepdims=True))


def _softmax_backward_torch(grad, out, dim, dtype):
    import torch
    return torch._softmax_backward_data(grad, out, dim, out.dtype)


OPS = [
    # softmax's backward kernel (torch._softmax_backward_data, which DeBERTa's XSoftmax calls)
    OpInfo("_softmax_backward_data", _softmax_backward_ref, _softmax_backward_samples,
           dtypes=FLOATS + LOW, gradgrad=True, torch_op=_softmax_backward_torch),
    # log_softmax's backward kernel, an op so that its double backward is PyTorch's node
    OpInfo("_log_softmax_backward_data", _log_softmax_backward_ref,
           _log_softmax_backward_samples, dtypes=FLOATS + LOW, gradgrad=True,
           torch_op=_log_softmax_backward_torch),
    OpInfo("logaddexp", _logaddexp_ref, _logaddexp_samples, dtypes=FLOATS + LOW + COMPLEX,
           gradgrad=True, error_inputs=_logaddexp_errors("logaddexp", True)),
    OpInfo("logaddexp2", _quiet(np.logaddexp2),
           lambda dtype, rg: _logaddexp_samples(dtype, rg, False), dtypes=FLOATS + LOW,
           gradgrad=True,
           error_inputs=_logaddexp_errors("logaddexp2", False)),
    OpInfo("logcumsumexp", _logcumsumexp_ref, _logcumsumexp_samples,
           dtypes=FLOATS + LOW + COMPLEX, gradgrad=True, error_inputs=_logcumsumexp_errors),
    _softmax_entry("softmax", _softmax),
    # PyTorch's 16-bit log_softmax over the last dim is off by up to about 4e-4 (float16) and
    # 4e-3 (bfloat16) absolute; ember's rounds the float32 result once
    _softmax_entry("log_softmax", _log_softmax,
                   parity_tol={ember.float16: (2e-3, 1e-3), ember.bfloat16: (1.6e-2, 1e-2)}),
]
