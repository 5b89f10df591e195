"""OpInfo entries for Householder reflectors (ops/householder.py): geqrf, and their product
linalg.householder_product with its top-level name orgqr, and ormqr (a product by their Q)."""

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


def _full_q(a, tau):
    """The m x m products H_0 ... H_{k-1} of the reflectors, per batch entry."""
    m = a.shape[-2]
    out = np.empty(a.shape[:-2] + (m, m), np.result_type(a, tau))
    for idx in np.ndindex(a.shape[:-2]):
        q = np.eye(m, dtype=out.dtype)
        for i in range(tau.shape[-1]):
            v = np.zeros(m, out.dtype)
            v[i] = 1
            v[i + 1:] = a[idx][i + 1:, i]
            q = q @ (np.eye(m) - tau[idx][i] * np.outer(v, v.conj()))
        out[idx] = q
    return out


def _ref(a, tau):
    return _full_q(a, tau)[..., :a.shape[-1]]


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


_ORMQR = "torch.ormqr"

# (shape of A, columns of the other matrix, left): tall, square and wide factorisations,
# batches and empty cases; every case runs with transpose False and True
_ORMQR_CASES = (((4, 3), 2, True), ((4, 3), 3, False), ((3, 3), 1, True), ((3, 5), 2, True),
                ((3, 5), 2, False), ((2, 4, 2), 3, True), ((2, 3, 2), 2, False),
                ((1, 1), 1, True), ((4, 3), 0, True), ((0, 0), 2, True), ((0, 3, 2), 2, False))


def _ormqr_samples(dtype, requires_grad):
    for shape, cols, left in _ORMQR_CASES:
        m, k = shape[-2], min(shape[-2:])
        other = shape[:-2] + ((m, cols) if left else (cols, m))
        for transpose in (False, True):
            yield SampleInput(make(shape, dtype, requires_grad, low=-1, high=1),
                              (make(shape[:-2] + (k,), dtype, requires_grad, low=-1, high=1),
                               make(other, dtype, requires_grad, low=-1, high=1)),
                              dict(left=left, transpose=transpose),
                              name=f"{list(shape)} other={list(other)}")
    a = make((3, 4), dtype, low=-1, high=1).mT.detach().requires_grad_(requires_grad)
    tau = make((6,), dtype, low=-1, high=1)[::2].detach().requires_grad_(requires_grad)
    c = make((2, 4), dtype, low=-1, high=1).mT.detach().requires_grad_(requires_grad)
    yield SampleInput(a, (tau, c), dict(transpose=True), name="noncontiguous")


def _ormqr_ref(a, tau, c, left=True, transpose=False):
    q = _full_q(a, tau)
    if transpose:
        q = q.conj().swapaxes(-1, -2)
    return q @ c if left else c @ q


def _ormqr_errors():
    def bad(a, tau, c, error, message, **kwargs):
        return ErrorInput(SampleInput(a, (tau, c), kwargs), error, re.escape(message))
    one, f64 = ember.ones, ember.float64
    yield bad(one(3), one(1), one(3, 1), RuntimeError,
              f"{_ORMQR}: input must have at least 2 dimensions.")
    yield bad(one(4, 3), one(3), one(4), RuntimeError,
              f"{_ORMQR}: other must have at least 2 dimensions.")
    yield bad(one(4, 3), one(3), one(5, 2), RuntimeError,
              f"{_ORMQR}: other.shape[-2] must be equal to input.shape[-2]")
    yield bad(one(4, 3), one(3), one(2, 5), RuntimeError,
              f"{_ORMQR}: other.shape[-1] must be equal to input.shape[-2]", left=False)
    yield bad(one(4, 3), ember.tensor(1.), one(4, 2), IndexError,
              "Dimension specified as -1 but tensor has no dimensions")
    for k in (0, 2, 4):
        yield bad(one(4, 3), one(k), one(4, 2), RuntimeError,
                  f"{_ORMQR}: tau.shape[-1] must be equal to min(other.shape[-2], "
                  f"input.shape[-1])")
    yield bad(one(2, 4, 3), one(3), one(2, 4, 3), RuntimeError,
              f"{_ORMQR}: Expected tau to have one dimension less than input, but got "
              f"tau.ndim equal to 1 and input.ndim is equal to 3")
    yield bad(one(2, 4, 3), one(2, 3), one(4, 3), RuntimeError,
              f"{_ORMQR}: Expected other to have the same number of dimensions as input, but "
              f"got other.ndim equal to 2 and input.ndim is equal to 3")
    yield bad(one(2, 4, 3), one(1, 3), one(1, 4, 3), RuntimeError,
              f"{_ORMQR}: Expected batch dimensions of tau to be equal to input.shape[:-2], "
              f"but got [1]")
    yield bad(one(2, 4, 3), one(2, 3), one(1, 4, 3), RuntimeError,
              f"{_ORMQR}: Expected batch dimensions of other to be equal to input.shape[:-2], "
              f"but got [1]")
    yield bad(one(4, 3), one(3, dtype=f64), one(4, 3), RuntimeError,
              f"{_ORMQR}: Expected input and tau to have the same dtype, but input has "
              f"dtypeFloat and tau has dtype Double")
    yield bad(one(4, 3), one(3), one(4, 3, dtype=f64), RuntimeError,
              f"{_ORMQR}: Expected input and other to have the same dtype, but input has "
              f"dtypeFloat and other has dtype Double")
    for dtype, name in ((ember.int64, "Long"), (ember.float16, "Half")):
        yield bad(one(4, 3, dtype=dtype), one(3, dtype=dtype), one(4, 3, dtype=dtype),
                  NotImplementedError, f"\"ormqr_cpu\" not implemented for '{name}'")


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
    OpInfo("ormqr", _ormqr_ref, _ormqr_samples, dtypes=FLOATS + COMPLEX, gradgrad=True,
           error_inputs=_ormqr_errors,
           tol={ember.float32: (1e-5, 1e-5), ember.complex64: (1e-5, 1e-5)}),
]
