"""OpInfo entries for ember/ops/quantiles.py: quantile and nanquantile."""

import warnings

import numpy as np

import ember
from tests.ops.opdb.core import FLOATS, ErrorInput, OpInfo, SampleInput
from tests.ops.opdb.reduction import edited, setting
from tests.ops.opdb.sorting import NAN, distinct

MODES = ("linear", "lower", "higher", "midpoint", "nearest")


def _ref(reduce):
    def ref(x, q, dim=None, keepdim=False, *, interpolation="linear"):
        x = np.asarray(x)
        axis = None if dim is None or x.ndim == 0 else dim % x.ndim
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)     # all-NaN slices
            out = reduce(x, np.asarray(q, dtype=x.dtype), axis=axis, keepdims=keepdim,
                         method=interpolation)
        return np.asarray(out).astype(x.dtype)
    return ref


def _q(values, dtype, requires_grad):
    q = ember.tensor(values, dtype=dtype)
    return q.requires_grad_() if requires_grad else q


def samples():
    def make_samples(dtype, requires_grad):
        x = distinct((3, 4, 5), dtype, requires_grad)
        qs = _q([0.13, 0.58, 0.91], dtype, requires_grad)
        yield SampleInput(x, (0.37,), name="number_all")
        yield SampleInput(x, (qs,), {"dim": 1}, name="tensor_dim1")
        yield SampleInput(x, (qs,), {"dim": -1, "keepdim": True}, name="tensor_keepdim")
        yield SampleInput(x, (0.7,), {"dim": 0, "keepdim": True}, name="number_keepdim")
        yield SampleInput(x, (qs,), {"keepdim": True}, name="all_keepdim")
        yield SampleInput(x, (_q(0.42, dtype, requires_grad),), {"dim": 2},
                          name="zero_dim_q")
        for mode in MODES:
            yield SampleInput(x, (qs,), {"dim": 2, "interpolation": mode}, name=mode)
            yield SampleInput(x, (0.5,), {"dim": 1, "interpolation": mode},
                              name=f"{mode}_middle")
        # (q at the ends of [0, 1] cannot be perturbed: it takes no gradient here)
        yield SampleInput(x, (_q([0., 1.], dtype, False),), {"dim": 1}, name="ends")
        yield SampleInput(distinct((5, 4), dtype, requires_grad, transpose=True), (qs,),
                          {"dim": 0}, name="noncontig")
        yield SampleInput(x, (qs[::2],), {"dim": 1}, name="noncontig_q")
        yield SampleInput(distinct((), dtype, requires_grad), (0.3,), name="zero_dim")
        yield SampleInput(distinct((), dtype, requires_grad), (qs,), {"dim": 0,
                                                                      "keepdim": True},
                          name="zero_dim_keepdim")
        yield SampleInput(distinct((6,), dtype, requires_grad), (1 / 3,), name="ranks_in_dtype")
        yield SampleInput(x, (0.5, 1), name="positional_dim")
        if requires_grad:
            return
        yield SampleInput(x, (ember.ones(0, dtype=dtype),), {"dim": 1}, name="empty_q")
        yield SampleInput(x, (qs, 1, True), name="positional")
        nans = edited(distinct((3, 5), dtype), setting(NAN, (0, 1), (2, 0), (2, 1), (2, 2),
                                                       (2, 3), (2, 4)))
        for mode in MODES:
            yield SampleInput(nans, (qs,), {"dim": 1, "interpolation": mode}, name=f"nan_{mode}")
        yield SampleInput(nans, (0.5,), name="nan_all")
        inf = float("inf")
        yield SampleInput(ember.tensor([[1., inf], [-inf, inf], [-inf, 2.]], dtype=dtype), (qs,),
                          {"dim": 1}, name="infinities")
    return make_samples


def _nan_grad_samples(dtype, requires_grad):
    yield from samples()(dtype, requires_grad)
    if requires_grad:
        # rows holding NaN: the gradient flows around it, none reaches q through it (for
        # quantile the output is NaN there, which finite differences cannot check: see
        # tests/ops/test_sorting.py)
        nans = edited(distinct((3, 5), dtype), setting(NAN, (0, 1), (2, 0), (2, 2)), True)
        yield SampleInput(nans, (_q([0.2, 0.7], dtype, True),), {"dim": 1}, name="nan_rows")


def _errors():
    x = ember.tensor([1., 2., 3.])
    yield ErrorInput(SampleInput(x, (1.5,)), RuntimeError,
                     r"quantile\(\) q must be in the range \[0, 1\] but got 1.5")
    yield ErrorInput(SampleInput(x, (-0.5,)), RuntimeError,
                     r"quantile\(\) q must be in the range \[0, 1\] but got -0.5")
    yield ErrorInput(SampleInput(x, (ember.tensor([0.5, 1.5]),)), RuntimeError,
                     r"quantile\(\) q values must be in the range \[0, 1\]")
    yield ErrorInput(SampleInput(x, (ember.tensor([[0.5]]),)), RuntimeError,
                     r"quantile\(\) q must be a scalar or 1D tensor")
    yield ErrorInput(SampleInput(x, (ember.tensor([0.5], dtype=ember.float64),)), RuntimeError,
                     r"quantile\(\) q tensor must be same dtype as the input tensor")
    yield ErrorInput(SampleInput(ember.tensor([1, 2]), (0.5,)), RuntimeError,
                     r"quantile\(\) input tensor must be either float or double dtype")
    yield ErrorInput(SampleInput(ember.tensor([1., 2.], dtype=ember.float16), (0.5,)),
                     RuntimeError, r"quantile\(\) input tensor must be either float or double")
    yield ErrorInput(SampleInput(ember.ones(0, 3), (0.5,), {"dim": 1}), RuntimeError,
                     r"quantile\(\) input tensor must be non-empty")
    yield ErrorInput(SampleInput(x, (0.5,), {"interpolation": "cubic"}), RuntimeError,
                     r"quantile\(\) interpolation must be one of linear, lower, higher, midpoint "
                     r"or nearest, but got cubic")
    yield ErrorInput(SampleInput(x, (0.5,), {"dim": 1}), IndexError,
                     r"Dimension out of range \(expected to be in range of \[-1, 0\], but got 1\)")
    yield ErrorInput(SampleInput(x, (ember.tensor([0.5]),), {"dim": (0,)}), TypeError,
                     "'dim' must be int")


OPS = [
    OpInfo("quantile", _ref(np.quantile), samples(), dtypes=FLOATS, gradgrad=True,
           error_inputs=_errors),
    OpInfo("nanquantile", _ref(np.nanquantile), samples(), dtypes=FLOATS, gradgrad=True,
           grad_samples=_nan_grad_samples, error_inputs=_errors),
]
