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


def _dirichlet_grad_ref(x, alpha, total):
    """(dx/dalpha at a fixed quantile I_x(alpha, total - alpha), total - alpha held) / (1 - x):
    a central difference of SciPy's regularized incomplete beta function in float64."""
    x, alpha, total = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (x, alpha, total)))
    beta = total - alpha
    h = 1e-6 * alpha
    d_cdf = (sp.betainc(alpha + h, beta, x) - sp.betainc(alpha - h, beta, x)) / (2 * h)
    # above the mean the complement keeps its digits where the CDF rounds to 1
    d_sf = (sp.betaincc(alpha + h, beta, x) - sp.betaincc(alpha - h, beta, x)) / (2 * h)
    d_cdf = np.where(x * total > alpha, -d_sf, d_cdf)
    log_pdf = sp.xlogy(alpha - 1, x) + sp.xlog1py(beta - 1, -x) - sp.betaln(alpha, beta)
    return -d_cdf / np.exp(log_pdf) / (1 - x)


def _dirichlet_grad_samples(dtype, requires_grad):
    # x below and above the mean alpha / total (the two tails), alpha below and above 1
    alpha = make((6,), dtype, low=0.3, high=4.0)
    yield SampleInput(make((6,), dtype, requires_grad, low=0.05, high=0.95),
                      (alpha, alpha + make((6,), dtype, low=0.3, high=4.0)), name="1d")
    yield SampleInput(make((), dtype, requires_grad, low=0.05, high=0.95),
                      (make((), dtype, low=1.0, high=2.0), make((), dtype, low=3.0, high=4.0)),
                      name="0d")
    yield SampleInput(make((0, 3), dtype, requires_grad), (make((0, 3), dtype),
                                                           make((0, 3), dtype)), name="empty")
    alpha = make((3, 4), dtype, low=0.5, high=20.0, noncontiguous=True)
    yield SampleInput(make((3, 4), dtype, requires_grad, low=0.02, high=0.98,
                           noncontiguous=True),
                      (alpha, alpha + make((4,), dtype, low=0.5, high=30.0)), name="broadcast")


def _dirichlet_grad_errors():
    f32, f64 = ember.float32, ember.float64
    yield ErrorInput(SampleInput(make((2,), f64, low=0.1, high=0.9),
                                 (make((2,), f32, low=1, high=2), make((2,), f64, low=3, high=4))),
                     RuntimeError, "Found dtype Float but expected Double")
    yield ErrorInput(SampleInput(make((2,), ember.float16, low=0.1, high=0.9),
                                 (make((2,), ember.float16, low=1, high=2),
                                  make((2,), ember.float16, low=3, high=4))),
                     NotImplementedError,
                     "\"_dirichlet_grad_c(pu|uda)\" not implemented for 'Half'")


def _gamma_sample_samples(dtype, requires_grad):
    yield SampleInput(make((5,), dtype, requires_grad, low=0.5, high=3.0),
                      (make((5,), dtype, low=0.1, high=4.0),), name="1d")
    yield SampleInput(make((), dtype, requires_grad, low=0.5, high=3.0),
                      (make((), dtype, low=0.1, high=4.0),), name="0d")
    yield SampleInput(make((0, 2), dtype, requires_grad), (make((0, 2), dtype),), name="empty")


def _dirichlet_sample_samples(dtype, requires_grad):
    """Concentrations and points on the simplex over the last dimension."""
    for shape, name in (((4,), "1d"), ((3, 4), "batched"), ((0, 3), "empty")):
        sample = make(shape, dtype, low=0.1, high=1.0)
        sample = sample / sample.sum(-1, keepdim=True) if sample.numel() else sample
        yield SampleInput(make(shape, dtype, requires_grad, low=0.5, high=3.0), (sample,),
                          name=name)


OPS = [
    # torch's own gradient is an approximation good to about 1e-3 for these alphas
    OpInfo("_standard_gamma_grad", _gamma_grad_ref, _gamma_grad_samples, dtypes=FLOATS,
           grad=False, error_inputs=_gamma_grad_errors, torch_name="_standard_gamma_grad",
           tol={ember.float64: (1e-6, 1e-9), ember.float32: (1e-4, 1e-6)},
           parity_tol={ember.float64: (5e-3, 1e-6), ember.float32: (5e-3, 1e-6)}),
    # torch's is an approximation good to about 1e-3 (see _standard_gamma_grad)
    OpInfo("_dirichlet_grad", _dirichlet_grad_ref, _dirichlet_grad_samples, dtypes=FLOATS,
           grad=False, error_inputs=_dirichlet_grad_errors, torch_name="_dirichlet_grad",
           tol={ember.float64: (1e-6, 1e-9), ember.float32: (1e-4, 1e-6)},
           parity_tol={ember.float64: (5e-3, 1e-6), ember.float32: (5e-3, 1e-6)}),
    # the forward passes the drawn samples through; the gradient (checked against the
    # quantile's finite difference in tests/distributions/test_gamma.py) is not a
    # derivative of the forward, so gradcheck does not apply
    OpInfo("_standard_gamma_sample", lambda alpha, sample: sample, _gamma_sample_samples,
           dtypes=FLOATS, grad=False),
    # likewise for Dirichlet samples (the gradient is checked in
    # tests/distributions/test_dirichlet_grad_round29.py)
    OpInfo("_dirichlet_sample", lambda alpha, sample: sample, _dirichlet_sample_samples,
           dtypes=FLOATS, grad=False),
]
