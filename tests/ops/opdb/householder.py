"""OpInfo entries for Householder reflectors (ops/householder.py): geqrf, and their product
linalg.householder_product with its top-level name orgqr."""

import re

import numpy as np

import ember
from tests.ops.opdb.core import COMPLEX, FLOATS, ErrorInput, OpInfo, SampleInput, make

_NAME = "torch.linalg.householder_product"

# (shape of A, number of reflectors k): tall and square, all or some of the columns, batches,
# and the empty cases (no reflectors: the first columns of the identity); the small ones are
# what gradgradcheck takes
_CASES = (((5, 3), 3), ((5, 3), 2), ((4, 4), 4), ((4, 4), 3), ((2, 5, 3), 3), ((2, 1, 4, 2), 1),
          ((3, 2), 2), ((3, 3), 2), ((2, 3, 2), 1), ((1, 1), 1), ((3, 0), 0), ((0, 0), 0),
          ((2, 4, 3), 0), ((0, 4, 3), 2))


def _samples(dtype, requires_grad):
    for shape, k in _CASES:
        yield SampleInput(make(shape, dtype, requires_grad, low=-1, high=1),
                          (make(shape[:-2] + (k,), dtype, requires_grad, low=-1, high=1),),
                          name=f"{list(shape)} k={k}")
    a = make((3, 5), dtype, low=-1, high=1).mT.detach().requires_grad_(requires_grad)
    tau = make((6,), dtype, low=-1, high=1)[::2].detach().requires_grad_(requires_grad)
    yield SampleInput(a, (tau,), name="noncontiguous")


def _ref(a, tau):
    m, n = a.shape[-2:]
    out = np.empty(a.shape, np.result_type(a, tau))
    for idx in np.ndindex(a.shape[:-2]):
        q = np.eye(m, dtype=out.dtype)
        for i in range(tau.shape[-1]):
            v = np.zeros(m, out.dtype)
            v[i] = 1
            v[i + 1:] = a[idx][i + 1:, i]
            q = q @ (np.eye(m) - tau[idx][i] * np.outer(v, v.conj()))
        out[idx] = q[:, :n]
    return out


def _errors():
    def bad(a, tau, error, message):
        return ErrorInput(SampleInput(a, (tau,)), error, re.escape(message))
    yield bad(ember.ones(3), ember.ones(1), RuntimeError,
              f"{_NAME}: input must have at least 2 dimensions.")
    yield bad(ember.ones(3, 4), ember.ones(3), RuntimeError,
              f"{_NAME}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    yield bad(ember.ones(4, 3), ember.ones(4), RuntimeError,
              f"{_NAME}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    yield bad(ember.ones(4, 3), ember.tensor(1.), IndexError,
              "Dimension specified as -1 but tensor has no dimensions")
    yield bad(ember.ones(2, 4, 3), ember.ones(3), RuntimeError,
              f"{_NAME}: Expected tau to have one dimension less than input, but got tau.ndim "
              f"equal to 1 and input.ndim is equal to 3")
    yield bad(ember.ones(2, 4, 3), ember.ones(1, 3), RuntimeError,
              f"{_NAME}: Expected batch dimensions of tau to be equal to input.shape[:-2], but "
              f"got [1]")
    yield bad(ember.ones(4, 3), ember.ones(3, dtype=ember.float64), RuntimeError,
              f"{_NAME}: tau dtype Double does not match input dtype Float")
    yield bad(ember.ones(4, 3, dtype=ember.int64), ember.ones(3, dtype=ember.int64),
              NotImplementedError, "\"orgqr_cpu\" not implemented for 'Long'")
    yield bad(ember.ones(4, 3, dtype=ember.float16), ember.ones(3, dtype=ember.float16),
              NotImplementedError, "\"orgqr_cpu\" not implemented for 'Half'")


def _geqrf_samples(dtype, requires_grad):
    for shape in ((5, 3), (3, 5), (4, 4), (2, 4, 3), (1, 1), (0, 3), (3, 0), (2, 0, 0)):
        yield SampleInput(make(shape, dtype, low=-1, high=1), name=str(list(shape)))
    yield SampleInput(make((3, 4), dtype, low=-1, high=1).mT, name="noncontiguous")


def _geqrf_ref(a):
    packed, tau = np.linalg.qr(a, mode="raw")
    return packed.swapaxes(-1, -2), tau


def _geqrf_errors():
    yield ErrorInput(SampleInput(ember.ones(3)), RuntimeError,
                     re.escape("torch.geqrf: input must have at least 2 dimensions."))
    yield ErrorInput(SampleInput(ember.ones(3, 3, dtype=ember.int64)), NotImplementedError,
                     "\"geqrf_cpu\" not implemented for 'Long'")
    yield ErrorInput(SampleInput(ember.ones(3, 3, dtype=ember.bfloat16)), NotImplementedError,
                     "\"geqrf_cpu\" not implemented for 'BFloat16'")


OPS = [
    OpInfo("geqrf", _geqrf_ref, _geqrf_samples, dtypes=FLOATS + COMPLEX, grad=False,
           error_inputs=_geqrf_errors,
           tol={ember.float32: (1e-5, 1e-5), ember.complex64: (1e-5, 1e-5)}),
    OpInfo("linalg.householder_product", _ref, _samples, dtypes=FLOATS + COMPLEX,
           gradgrad=True, error_inputs=_errors,
           tol={ember.float32: (1e-5, 1e-5), ember.complex64: (1e-5, 1e-5)}),
    OpInfo("orgqr", _ref, _samples, dtypes=FLOATS + COMPLEX, gradgrad=True,
           error_inputs=_errors,
           tol={ember.float32: (1e-5, 1e-5), ember.complex64: (1e-5, 1e-5)}),
]
