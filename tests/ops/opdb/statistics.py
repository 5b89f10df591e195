"""OpInfo entries for ember/ops/statistics.py."""

import numpy as np

import ember
from tests.ops.opdb.core import COMPLEX, FLOATS, INTS, LOW, ErrorInput, OpInfo, SampleInput, make
from tests.ops.opdb.extrema import INT_DIM_CASES, positional, ties_and_nans
from tests.ops.opdb.reduction import (SHAPE, axis, chain, dims_errors, edited, reduction_samples,
                                      setting)

# --- std, var, std_mean, var_mean ---------------------------------------------------------------

_MOMENT_CASES = [
    (SHAPE, {"dim": 1}), (SHAPE, {"dim": -1, "keepdim": True}), (SHAPE, {"dim": (0, 2)}),
    (SHAPE, {"dim": [-1, 0], "keepdim": True}), (SHAPE, {}), (SHAPE, {"keepdim": True}),
    ((), {"correction": 0}), ((), {"dim": 0, "correction": 0}), ((4,), {"dim": 0}),
    (SHAPE, {"dim": 1, "correction": 0}), (SHAPE, {"dim": 1, "correction": 2}),
    (SHAPE, {"correction": 0.5}), (SHAPE, {"dim": 1, "unbiased": False}),
    (SHAPE, {"unbiased": True}),
]


def _moment_positional(dtype, requires_grad):
    yield SampleInput(make(SHAPE, dtype, requires_grad), (False,), name="unbiased_positional")
    yield SampleInput(make(SHAPE, dtype, requires_grad), (1, False, True), name="positional")


_moment_samples = reduction_samples(cases=_MOMENT_CASES, empty_all=False,
                                    extra=_moment_positional)


def _moments_ref(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    x = np.asarray(x)
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    ddof = correction if correction is not None else (0 if unbiased is False else 1)
    ax = axis(dim, x.ndim)
    return (np.var(x, axis=ax, ddof=ddof, keepdims=keepdim),
            np.mean(x, axis=ax, keepdims=keepdim))


def _var_ref(*args, **kwargs):
    return _moments_ref(*args, **kwargs)[0]


def _std_ref(*args, **kwargs):
    return np.sqrt(_moments_ref(*args, **kwargs)[0])


def _std_mean_ref(*args, **kwargs):
    var, mean = _moments_ref(*args, **kwargs)
    return np.sqrt(var), mean


def _moment_errors(name, kind):
    def errors():
        yield ErrorInput(SampleInput(ember.tensor([1, 2])), RuntimeError,
                         f"{kind} only support floating point and complex dtypes")
        yield ErrorInput(SampleInput(ember.tensor([True])), RuntimeError,
                         f"{kind} only support floating point and complex dtypes")
    return chain(errors, dims_errors())


def _real(dtype, sample):
    return dtype.to_real()


# --- median, nanmedian ----------------------------------------------------------------------------

def _lower_median(values, skip_nan):
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    nan = np.isnan(values)
    if skip_nan:
        values = values[~nan]
    elif nan.any():
        return np.nan
    return np.nan if values.size == 0 else np.sort(values)[(values.size - 1) // 2]


def _median_ref(skip_nan):
    return lambda x: np.asarray(_lower_median(x, skip_nan))


def _median_slice(values, skip_nan):
    """(value, index) for one slice, as PyTorch picks them (stable order, NaN last)."""
    nan = np.isnan(values.astype(np.float64))
    order = sorted(range(len(values)), key=lambda i: (bool(nan[i]), 0 if nan[i] else values[i]))
    if nan.any() and not skip_nan:
        index = int(np.flatnonzero(nan)[0])
    else:
        index = order[max((len(values) - int(nan.sum()) - 1) // 2, 0) if skip_nan
                      else (len(values) - 1) // 2]
    return values[index], index


def _median_dim_ref(skip_nan):
    def ref(x, dim, keepdim=False):
        x = np.asarray(x)
        if x.ndim == 0:
            return x, np.asarray(0)
        d = dim % x.ndim
        moved = np.moveaxis(x, d, -1)
        values = np.empty(moved.shape[:-1], dtype=x.dtype)
        indices = np.empty(moved.shape[:-1], dtype=np.int64)
        for pos in np.ndindex(*moved.shape[:-1]):
            values[pos], indices[pos] = _median_slice(moved[pos], skip_nan)
        if keepdim:
            values, indices = np.expand_dims(values, d), np.expand_dims(indices, d)
        return values, indices
    return ref


def _median_samples(dtype, requires_grad):
    for shape in (SHAPE, (), (1,), (4,)):
        yield SampleInput(make(shape, dtype, requires_grad), name=str(shape))
    yield SampleInput(make((3, 4), dtype, requires_grad, noncontiguous=True), name="noncontig")
    if requires_grad:
        return
    yield from ties_and_nans(dtype, requires_grad, dims=({},))
    if dtype.is_floating_point:
        yield SampleInput(make((0, 3), dtype), name="empty")
        all_nan = edited(make((2,), dtype), setting(float("nan"), 0, 1))
        yield SampleInput(all_nan, name="all_nan")


def _median_dim_samples(dtype, requires_grad):
    yield from reduction_samples(cases=INT_DIM_CASES, no_dim=False, empty_all=False,
                                 extra=positional)(dtype, requires_grad)
    yield SampleInput(make((4, 4), dtype, requires_grad), kwargs={"dim": 1}, name="even")
    yield from ties_and_nans(dtype, requires_grad, dims=({"dim": 1}, {"dim": 0}))
    if dtype.is_floating_point and not requires_grad:
        nans = edited(make((2, 3), dtype), setting(float("nan"), (0, 0), (0, 1), (0, 2), (1, 1)))
        yield SampleInput(nans, kwargs={"dim": 1}, name="nan_rows")


def _median_errors(kernel, **kwargs):
    def errors():
        yield ErrorInput(SampleInput(ember.tensor([True]), kwargs=kwargs), NotImplementedError,
                         f"\"{kernel}\" not implemented for 'Bool'")
        yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.complex64), kwargs=kwargs),
                         NotImplementedError, f"\"{kernel}\" not implemented for 'ComplexFloat'")
    return errors


def _median_dim_errors():
    yield ErrorInput(SampleInput(ember.ones(0, 3), kwargs={"dim": 0}), IndexError,
                     r"median\(\): Expected reduction dim 0 to have non-zero size.")
    yield from _median_errors("median_out", dim=0)()
    yield from dims_errors(tuple_dims=False)()


ORDERED = FLOATS + LOW + INTS

OPS = [
    OpInfo("var", _var_ref, _moment_samples, dtypes=FLOATS + LOW + COMPLEX, result_dtype=_real,
           gradgrad=True, error_inputs=_moment_errors("var", "std and var")),
    OpInfo("std", _std_ref, _moment_samples, dtypes=FLOATS + LOW + COMPLEX, result_dtype=_real,
           gradgrad=True, error_inputs=_moment_errors("std", "std and var")),
    OpInfo("var_mean", _moments_ref, _moment_samples, dtypes=FLOATS + LOW + COMPLEX,
           result_dtype=_real, gradgrad=True,
           error_inputs=_moment_errors("var_mean", "var_mean")),
    OpInfo("std_mean", _std_mean_ref, _moment_samples, dtypes=FLOATS + LOW + COMPLEX,
           result_dtype=_real, gradgrad=True,
           error_inputs=_moment_errors("std_mean", "std_mean")),
    OpInfo("median", _median_ref(False), _median_samples, dtypes=ORDERED, gradgrad=True,
           error_inputs=_median_errors("median_cpu")),
    OpInfo("nanmedian", _median_ref(True), _median_samples, dtypes=ORDERED, gradgrad=True,
           error_inputs=_median_errors("median_cpu")),
    OpInfo("_median_dim", _median_dim_ref(False), _median_dim_samples, dtypes=ORDERED,
           gradgrad=True, error_inputs=_median_dim_errors, torch_name="median"),
    OpInfo("_nanmedian_dim", _median_dim_ref(True), _median_dim_samples, dtypes=ORDERED,
           gradgrad=True, error_inputs=_median_dim_errors, torch_name="nanmedian"),
]
