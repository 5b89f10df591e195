"""OpInfo entries for ember/ops/batch_norm_stats.py: batch_norm_update_stats (the others of
that module are CUDA-only compositions, tested in tests/nn/test_batch_norm_stats.py)."""

import numpy as np

import ember
from tests.ops.opdb.core import FLOATS, LOW, ErrorInput, OpInfo, SampleInput, make


def _s(x, *args, name=""):
    return SampleInput(x, args, name=name)


def _update_stats_ref(x, rm, rv, momentum):
    axes = (0,) + tuple(range(2, x.ndim))
    x = x.astype(np.float64)
    return x.mean(axes), x.var(axes)


def _update_stats_samples(dtype, rg):
    def stats(c):
        return make((c,), dtype, low=-1, high=1), make((c,), dtype, low=0.5, high=2)
    yield _s(make((4, 3), dtype, rg), *stats(3), 0.1, name="2d")
    yield _s(make((2, 3, 5), dtype, rg), *stats(3), 0.5, name="3d")
    yield _s(make((2, 2, 3, 2), dtype, rg), None, None, 0.1, name="no_running_stats")
    yield _s(make((3, 2, 4), dtype, rg, noncontiguous=True), *stats(2), 1.0,
             name="noncontiguous")
    yield _s(make((1, 3), dtype, rg), *stats(3), 0.1, name="one_sample")


def _update_stats_errors():
    f = ember.ones
    yield ErrorInput(_s(f(4), None, None, 0.1), IndexError,
                     r"Dimension out of range \(expected to be in range of \[-1, 0\], but got 1\)")
    yield ErrorInput(_s(f(0, 3), None, None, 0.1), RuntimeError,
                     r"input tensor must have at least one element, but got input_sizes = "
                     r"\[0, 3\]")
    yield ErrorInput(_s(f(2, 3, dtype=ember.int32), None, None, 0.1), NotImplementedError,
                     "\"batch_norm_update_stats_cpu\" not implemented for 'Int'")
    yield ErrorInput(_s(f(2, 3), f(3, dtype=ember.float16), None, 0.1), RuntimeError,
                     r"mixed dtype \(CPU\): expect parameter to have scalar type of Float",
                     cpu_only=True)
    yield ErrorInput(_s(f(2, 3, dtype=ember.float64), f(3), None, 0.1), RuntimeError,
                     r"mixed dtype \(CPU\): all inputs must share same datatype.",
                     cpu_only=True)
    yield ErrorInput(_s(f(2, 3), None, None, "a"), TypeError,
                     r"batch_norm_update_stats\(\): argument 'momentum' \(position 4\) must be "
                     r"float, not str")


OPS = [
    OpInfo("batch_norm_update_stats", _update_stats_ref, _update_stats_samples,
           dtypes=FLOATS + LOW, grad=False, error_inputs=_update_stats_errors,
           tol={ember.float32: (1e-5, 1e-5)},
           parity_tol={ember.float16: (5e-3, 5e-3), ember.bfloat16: (4e-2, 4e-2)}),
]
