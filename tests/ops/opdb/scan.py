"""OpInfo entries for ember/ops/scan.py."""

import numpy as np

import ember
from tests.ops.opdb.core import ALL, ALL_REAL, ErrorInput, OpInfo, SampleInput, make
from tests.ops.opdb.reduction import SUM_DTYPE, cast, dims_errors, edited, setting

_SCAN_CASES = [((2, 3, 2), 1), ((2, 3, 2), -1), ((2, 3, 2), 0), ((), 0), ((), -1), ((5,), 0),
               ((0, 3), 0), ((0, 3), 1)]


def scan_samples(*, low=None, high=None, dtype_kwarg=False, extra=None):
    """Samples for ops along one dim: each dim form, 0-dim, empty and noncontiguous inputs."""
    def samples(dtype, requires_grad):
        for shape, dim in _SCAN_CASES:
            yield SampleInput(make(shape, dtype, requires_grad, low=low, high=high), (dim,),
                              name=f"{list(shape)}_dim{dim}")
        yield SampleInput(make((3, 4), dtype, requires_grad, low=low, high=high,
                               noncontiguous=True), kwargs={"dim": 1}, name="noncontig")
        if dtype_kwarg:
            wider = ember.complex128 if dtype.is_complex else ember.float64
            yield SampleInput(make((2, 3), dtype, requires_grad, low=low, high=high), (1,),
                              {"dtype": wider}, name="dtype")
        if extra is not None:
            yield from extra(dtype, requires_grad)
    return samples


def _accumulate_ref(fn):
    def ref(x, dim, *, dtype=None):
        x = cast(x, dtype)
        if x.dtype.kind in "biu" and dtype is None:
            x = x.astype(np.int64)
        return x.copy() if x.ndim == 0 else fn(x, axis=dim % x.ndim)
    return ref


def _cumprod_zeros(dtype, requires_grad):
    grads = requires_grad and (dtype.is_floating_point or dtype.is_complex)
    x = edited(make((2, 6), dtype, low=0.5, high=2), setting(0, (0, 1), (0, 4), (1, 2)), grads)
    yield SampleInput(x, (1,), name="zeros")
    yield SampleInput(x, (0,), name="zeros_dim0")


def _running_ref(better):
    """cummax/cummin as PyTorch defines them: a new extreme, a tie (latest index wins) or a NaN
    takes over."""
    def ref(x, dim):
        x = np.asarray(x)
        if x.ndim == 0:
            return x.copy(), np.asarray(0)
        d = dim % x.ndim
        moved = np.moveaxis(x, d, -1)
        values, indices = np.empty_like(moved), np.zeros(moved.shape, dtype=np.int64)
        for pos in np.ndindex(*moved.shape[:-1]):
            best, at = None, 0
            for k, v in enumerate(moved[pos]):
                if best is None or (best == best and (v != v or better(v, best) or v == best)):
                    best, at = v, k
                elif best != best and v != v:
                    at = k
                values[pos + (k,)], indices[pos + (k,)] = best, at
        return np.moveaxis(values, -1, d), np.moveaxis(indices, -1, d)
    return ref


def _ties_and_nans(dtype, requires_grad):
    if requires_grad:
        return
    ties = ember.tensor([[1, 3, 3, 0, 3], [2, 2, 1, 2, 5]]).to(dtype)
    yield SampleInput(ties, (1,), name="ties")
    if dtype.is_floating_point:
        nan = edited(make((2, 5), dtype), setting(float("nan"), (0, 1), (0, 3)))
        yield SampleInput(nan, (1,), name="nan")


def _running_errors(name):
    def errors():
        yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.complex64), (0,)),
                         NotImplementedError, f"\"{name}_cpu\" not implemented for "
                                              f"'ComplexFloat'")
        yield from dims_errors(tuple_dims=False)()
    return errors


OPS = [
    OpInfo("cumsum", _accumulate_ref(np.cumsum), scan_samples(dtype_kwarg=True), dtypes=ALL,
           result_dtype=SUM_DTYPE, gradgrad=True, error_inputs=dims_errors(tuple_dims=False)),
    OpInfo("cumprod", _accumulate_ref(np.cumprod),
           scan_samples(low=-2, high=2, dtype_kwarg=True, extra=_cumprod_zeros), dtypes=ALL,
           result_dtype=SUM_DTYPE, gradgrad=True,
           error_inputs=dims_errors(tuple_dims=False)),
    # gradgradcheck cannot yet handle an integer output (indices): see test_reduction_grads.py
    OpInfo("cummax", _running_ref(lambda a, b: a > b), scan_samples(extra=_ties_and_nans),
           dtypes=ALL_REAL, gradgrad=True, error_inputs=_running_errors("cummax")),
    OpInfo("cummin", _running_ref(lambda a, b: a < b), scan_samples(extra=_ties_and_nans),
           dtypes=ALL_REAL, gradgrad=True, error_inputs=_running_errors("cummin")),
]
