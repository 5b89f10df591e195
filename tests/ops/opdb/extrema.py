"""OpInfo entries for ember/ops/extrema.py (ties get hand-checked gradients in
tests/ops/test_reduction_grads.py: finite differences are meaningless there)."""

import numpy as np

import ember
from tests.ops.opdb.core import ALL_REAL, FLOATS, INTS, LOW, ErrorInput, OpInfo, SampleInput, make
from tests.ops.opdb.reduction import (SHAPE, axis, chain, dims_errors, edited, reduction_samples,
                                      setting)

ORDERED = FLOATS + LOW + INTS


def ties_and_nans(dtype, requires_grad, dims=({"dim": 1},)):
    """Forward-only samples: repeated extremes, and NaN for floating dtypes."""
    if requires_grad:
        return
    ties = ember.tensor([[1, 3, 3, 0], [2, 2, 1, 2], [0, 0, 0, 0]]).to(dtype)
    for kwargs in dims:
        yield SampleInput(ties, kwargs=dict(kwargs), name="ties")
    if dtype.is_floating_point:
        nan = edited(make((3, 4), dtype), setting(float("nan"), (0, 1), (0, 3), (2, 0)))
        for kwargs in dims:
            yield SampleInput(nan, kwargs=dict(kwargs), name="nan")


# --- max(), min() -------------------------------------------------------------------------------

def _whole_samples(dtype, requires_grad):
    for shape in (SHAPE, (), (1,)):
        yield SampleInput(make(shape, dtype, requires_grad), name=str(shape))
    yield SampleInput(make((3, 4), dtype, requires_grad, noncontiguous=True), name="noncontig")
    yield from ties_and_nans(dtype, requires_grad, dims=({},))


def _whole_errors(name):
    def errors():
        yield ErrorInput(SampleInput(ember.ones(0, 3)), RuntimeError,
                         rf"{name}\(\): Expected reduction dim to be specified for "
                         rf"input.numel\(\) == 0. Specify the reduction dim with the 'dim' "
                         rf"argument.")
        yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.complex64)), NotImplementedError,
                         f"\"{name}_all\" not implemented for 'ComplexFloat'")
    return errors


# --- max(dim), min(dim) --------------------------------------------------------------------------

def _dim_ref(reduce, arg):
    def ref(x, dim, keepdim=False):
        x = np.asarray(x)
        if x.ndim == 0:
            return x, np.asarray(0)
        d = dim % x.ndim
        return reduce(x, axis=d, keepdims=keepdim), arg(x, axis=d, keepdims=keepdim)
    return ref


INT_DIM_CASES = [(SHAPE, {"dim": 1}), (SHAPE, {"dim": -1, "keepdim": True}), ((), {"dim": 0}),
                  ((), {"dim": -1, "keepdim": True}), ((4,), {"dim": 0}), (SHAPE, {"dim": 0})]


def positional(dtype, requires_grad):
    yield SampleInput(make(SHAPE, dtype, requires_grad), (2, True), name="positional")


def _dim_samples(dtype, requires_grad):
    yield from reduction_samples(cases=INT_DIM_CASES, no_dim=False, empty_all=False,
                                 extra=positional)(dtype, requires_grad)
    yield from ties_and_nans(dtype, requires_grad, dims=({"dim": 1}, {"dim": 0}))


def _dim_errors(name):
    def errors():
        yield ErrorInput(SampleInput(ember.ones(0, 3), kwargs={"dim": 0}), IndexError,
                         rf"{name}\(\): Expected reduction dim 0 to have non-zero size.")
        yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.complex64), kwargs={"dim": 0}),
                         RuntimeError, rf"{name}\(\): does not support complex input")
        yield from dims_errors(tuple_dims=False)()
    return errors


# --- amax, amin ---------------------------------------------------------------------------------

def _amax_ref(reduce):
    def ref(x, dim=(), keepdim=False):
        x = np.asarray(x)
        return reduce(x, axis=axis(dim, x.ndim), keepdims=keepdim)
    return ref


def _amax_samples(dtype, requires_grad):
    yield from reduction_samples(empty_all=False)(dtype, requires_grad)
    yield SampleInput(make(SHAPE, dtype, requires_grad), kwargs={"dim": ()}, name="dim=()")
    yield from ties_and_nans(dtype, requires_grad, dims=({"dim": 1}, {"dim": (0, 1)}, {}))


def _amax_errors(name):
    kernel = f"{name[1:]}_values_cpu"

    def errors():
        yield ErrorInput(SampleInput(ember.ones(0, 3)), RuntimeError,
                         rf"{name}\(\): Expected reduction dim to be specified for "
                         rf"input.numel\(\) == 0.")
        yield ErrorInput(SampleInput(ember.ones(0, 3), kwargs={"dim": (1, 0)}), IndexError,
                         rf"{name}\(\): Expected reduction dim 0 to have non-zero size.")
        yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.complex64)), NotImplementedError,
                         f"\"{kernel}\" not implemented for 'ComplexFloat'")
    return chain(errors, dims_errors())


# --- argmax, argmin -------------------------------------------------------------------------------

def _arg_ref(arg):
    def ref(x, dim=None, keepdim=False):
        x = np.asarray(x)
        if dim is None:
            out = np.asarray(arg(x.reshape(-1)))
            return out.reshape((1,) * x.ndim) if keepdim else out
        if x.ndim == 0:
            return np.asarray(0)
        return arg(x, axis=dim % x.ndim, keepdims=keepdim)
    return ref


def _arg_samples(dtype, requires_grad):
    yield from reduction_samples(cases=INT_DIM_CASES + [(SHAPE, {}), ((), {}),
                                                         (SHAPE, {"keepdim": True})],
                                 empty_all=False, extra=positional)(dtype, requires_grad)
    yield from ties_and_nans(dtype, requires_grad, dims=({"dim": 1}, {}))


def _arg_errors(name):
    def errors():
        yield ErrorInput(SampleInput(ember.ones(0, 3)), IndexError,
                         rf"{name}\(\): Expected reduction dim to be specified for "
                         rf"input.numel\(\) == 0.")
        yield ErrorInput(SampleInput(ember.ones(0, 3), kwargs={"dim": 0}), IndexError,
                         rf"{name}\(\): Expected reduction dim 0 to have non-zero size.")
        yield ErrorInput(SampleInput(ember.tensor([True])), RuntimeError,
                         rf"{name}\(\): does not support bool input")
        yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.complex64)), RuntimeError,
                         rf"{name}\(\): does not support complex input")
        yield from dims_errors(tuple_dims=False)()
    return errors


OPS = [
    OpInfo("max", np.max, _whole_samples, dtypes=ALL_REAL, gradgrad=True,
           error_inputs=_whole_errors("max")),
    OpInfo("min", np.min, _whole_samples, dtypes=ALL_REAL, gradgrad=True,
           error_inputs=_whole_errors("min")),
    # gradgradcheck cannot yet handle an integer output (indices): see test_reduction_grads.py
    OpInfo("_max_dim", _dim_ref(np.max, np.argmax), _dim_samples, dtypes=ALL_REAL,
           gradgrad=True, error_inputs=_dim_errors("max"), torch_name="max"),
    OpInfo("_min_dim", _dim_ref(np.min, np.argmin), _dim_samples, dtypes=ALL_REAL,
           gradgrad=True, error_inputs=_dim_errors("min"), torch_name="min"),
    OpInfo("amax", _amax_ref(np.amax), _amax_samples, dtypes=ALL_REAL, gradgrad=True,
           error_inputs=_amax_errors("amax")),
    OpInfo("amin", _amax_ref(np.amin), _amax_samples, dtypes=ALL_REAL, gradgrad=True,
           error_inputs=_amax_errors("amin")),
    OpInfo("argmax", _arg_ref(np.argmax), _arg_samples, dtypes=ORDERED, grad=False,
           result_dtype="int64", error_inputs=_arg_errors("argmax")),
    OpInfo("argmin", _arg_ref(np.argmin), _arg_samples, dtypes=ORDERED, grad=False,
           result_dtype="int64", error_inputs=_arg_errors("argmin")),
]
