"""OpInfo entries for ember/ops/gamma_sampling.py: the pass-through behind ``_standard_gamma``
and its reparameterization gradient ``_standard_gamma_grad``."""

import numpy as np
import scipy.special as sp

import ember
import ember.ops.gamma_sampling  # noqa: F401  (registers the ops where ember.ops does not)
from tests.ops.opdb.core import FLOATS, ErrorInput, OpInfo, SampleInput, make


def _gamma_grad_ref(alpha, x):
    """dx/dalpha at a fixed quantile u = P(alpha, x): a central difference of the quantile
    function gammaincinv(alpha, u) in float64."""
    alpha, x = np.broadcast_arrays(np.asarray(alpha, np.float64), np.asarray(x, np.float64))
    u = sp.gammainc(alpha, x)
    h = 1e-5 * alpha
    return (sp.gammaincinv(alpha + h, u) - sp.gammaincinv(alpha - h, u)) / (2 * h)


def _gamma_grad_samples(dtype, requires_grad):
    # x below and above 1 (the series and the quadrature), alpha below and above x
    yield SampleInput(make((6,), dtype, requires_grad, low=0.2, high=5.0),
                      (make((6,), dtype, low=0.1, high=4.0),), name="1d")
    yield SampleInput(make((), dtype, requires_grad, low=0.2, high=5.0),
                      (make((), dtype, low=0.1, high=4.0),), name="0d")
    yield SampleInput(make((0, 3), dtype, requires_grad), (make((0, 3), dtype),), name="empty")
    yield SampleInput(make((3, 4), dtype, requires_grad, low=0.5, high=20.0, noncontiguous=True),
                      (make((3, 4), dtype, low=0.05, high=30.0, noncontiguous=True),),
                      name="noncontiguous")


def _gamma_grad_errors():
    f32, i64 = ember.float32, ember.int64
    yield ErrorInput(SampleInput(make((2,), i64, low=1, high=3), (make((2,), i64, low=1,
                                                                       high=3),)),
                     NotImplementedError,
                     "\"_standard_gamma_grad_c(pu|uda)\" not implemented for 'Long'")
    yield ErrorInput(SampleInput(make((2,), f32, low=1, high=3), (make((2,), i64, low=1,
                                                                       high=3),)),
                     RuntimeError, "Found dtype Long but expected Float")


def _gamma_sample_samples(dtype, requires_grad):
    yield SampleInput(make((5,), dtype, requires_grad, low=0.5, high=3.0),
                      (make((5,), dtype, low=0.1, high=4.0),), name="1d")
    yield SampleInput(make((), dtype, requires_grad, low=0.5, high=3.0),
                      (make((), dtype, low=0.1, high=4.0),), name="0d")
    yield SampleInput(make((0, 2), dtype, requires_grad), (make((0, 2), dtype),), name="empty")


OPS = [
    # torch's own gradient is an approximation good to about 1e-3 for these alphas
    OpInfo("_standard_gamma_grad", _gamma_grad_ref, _gamma_grad_samples, dtypes=FLOATS,
           grad=False, error_inputs=_gamma_grad_errors, torch_name="_standard_gamma_grad",
           tol={ember.float64: (1e-6, 1e-9), ember.float32: (1e-4, 1e-6)},
           parity_tol={ember.float64: (5e-3, 1e-6), ember.float32: (5e-3, 1e-6)}),
    # the forward passes the drawn samples through; the gradient (checked against the
    # quantile's finite difference in tests/distributions/test_gamma.py) is not a
    # derivative of the forward, so gradcheck does not apply
    OpInfo("_standard_gamma_sample", lambda alpha, sample: sample, _gamma_sample_samples,
           dtypes=FLOATS, grad=False),
]
