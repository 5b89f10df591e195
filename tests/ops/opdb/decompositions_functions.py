"""OpInfo entries for functions of square matrices (ops/matrix_functions.py): determinants,
powers, the exponential, and linalg.cross."""

import re

import numpy as np
import scipy.linalg

import ember
from tests.ops.opdb.core import (COMPLEX, FLOATS, INTS, LOW, ErrorInput, OpInfo, SampleInput,
                                 make)
from tests.ops.opdb.decompositions import LINALG, matrix, square_errors, square_samples

SINGULAR = ((4., 2, 2), (2, 1, 1), (1, 0, 1))       # rank 2: its determinant is exactly 0
# (its elimination multipliers, of A and of A^T, are powers of two: with thirds, PyTorch's LU
# leaves a zero pivot on one CPU and a rounding residue on another)
# 16-bit results round each product (as PyTorch does; cross products cancel), while the
# reference computes in float64: a few ulps of the largest values
ROUNDED_PRODUCTS = {ember.float16: (1e-2, 5e-2), ember.bfloat16: (6e-2, 5e-1)}


def _det_samples(dtype, requires_grad):
    yield from square_samples()(dtype, requires_grad)
    a = matrix((2, 3, 3), dtype, requires_grad=False)
    yield SampleInput(a.flip(-2).detach().requires_grad_(requires_grad),
                      name="negative determinant")
    if not requires_grad:
        # the gradient at a singular matrix is its cofactor matrix (tested in
        # test_linalg_decompositions.py): PyTorch 2.13 gives zeros at this one
        yield SampleInput(ember.tensor(SINGULAR, dtype=dtype), name="singular")


def _slogdet_samples(dtype, requires_grad):
    yield from square_samples()(dtype, requires_grad)
    a = matrix((2, 3, 3), dtype, requires_grad=False)
    yield SampleInput(a.flip(-2).detach().requires_grad_(requires_grad),
                      name="negative determinant")
    if not requires_grad:
        yield SampleInput(ember.tensor(SINGULAR, dtype=dtype), name="singular")


def _logdet_samples(dtype, requires_grad):
    for sample in _slogdet_samples(dtype, requires_grad):
        if not (requires_grad and not dtype.is_complex and "negative" in sample.name):
            yield sample                    # NaN for a negative real determinant


def _slogdet_ref(a):
    sign, logabsdet = np.linalg.slogdet(a)
    return sign, logabsdet


def _logdet_ref(a):
    sign, logabsdet = np.linalg.slogdet(a)
    if a.dtype.kind == "c":
        return np.where(sign == 0, complex(-np.inf, np.nan), np.log(sign) + logabsdet)
    return np.where(sign < 0, np.nan, logabsdet)


# --- matrix_power -----------------------------------------------------------------------------

def _power_samples(dtype, requires_grad):
    floating = dtype.is_floating_point or dtype.is_complex
    exact = floating and dtype not in LOW
    for n in (0, 1, 2, 3, 5, -1, -3):
        if n < 0 and not exact:
            continue                        # negative powers invert: floating input only
        for shape in ((3, 3), (2, 2, 2), (0, 0), (2, 0, 0)):
            yield SampleInput(matrix(shape, dtype, requires_grad), (n,),
                              name=f"{list(shape)} n={n}")
    yield SampleInput(matrix((3, 3), dtype, requires_grad, noncontiguous=True), (2,),
                      name="noncontiguous")


def _power_ref(a, n):
    if a.dtype.kind in "iu":
        return np.linalg.matrix_power(a.astype(np.int64), n).astype(a.dtype)
    wide = a.astype(np.float64) if a.dtype.itemsize < 4 else a
    return np.linalg.matrix_power(wide, n)


def _power_errors(name):
    def errors():
        one = ember.ones
        yield ErrorInput(SampleInput(one(3), (2,)), RuntimeError, re.escape(
            "linalg.matrix_power: The input tensor A must have at least 2 dimensions."))
        yield ErrorInput(SampleInput(one(2, 3), (2,)), RuntimeError, re.escape(
            "linalg.matrix_power: A must be batches of square matrices, but they are 2 by 3 "
            "matrices"))
        yield ErrorInput(SampleInput(one(3, 3), (2.0,)), TypeError, "must be int, not float")
        yield ErrorInput(SampleInput(one(2, 3, 3), (-1,)), RuntimeError, re.escape(
            "linalg.inv: (Batch element 0): The diagonal element 2 is zero, the inversion "
            "could not be completed because the input matrix is singular."))
        yield ErrorInput(SampleInput(one(3, 3, dtype=ember.int64), (-1,)), RuntimeError,
                         "linalg.inv: Expected a floating point or complex tensor as input. "
                         "Got Long")
        yield ErrorInput(SampleInput(one(2, 2, 2, dtype=ember.bool), (2,)), NotImplementedError,
                         "\"bmm\" not implemented for 'Bool'")
    return errors


# --- matrix_exp, cross ------------------------------------------------------------------------

def _exp_ref(a):
    return scipy.linalg.expm(a) if a.size else a.copy()


def _exp_errors():
    for e in square_errors("linalg.matrix_exp")():
        if e.sample.input.dtype is not ember.float16:       # PyTorch computes half too
            yield e


def _cross_samples(dtype, requires_grad):
    def pair(sa, sb, **kw):
        return SampleInput(make(sa, dtype, requires_grad, low=-3, high=3),
                           (make(sb, dtype, requires_grad, low=-3, high=3),), kw,
                           name=f"{list(sa)} {list(sb)} {kw}")
    yield pair((3,), (3,))
    yield pair((4, 3), (4, 3))
    yield pair((1, 3), (4, 3))                  # broadcasting
    yield pair((2, 3, 4), (2, 3, 1), dim=1)
    yield pair((3, 2), (3, 2), dim=-2)
    yield pair((0, 3), (0, 3))
    yield SampleInput(make((3, 4), dtype, requires_grad, noncontiguous=True).mT,
                      (make((4, 3), dtype, requires_grad),), name="noncontiguous")


def _cross_ref(a, b, dim=-1):
    return np.cross(a, b, axis=dim)


def _cross_errors():
    one = ember.ones
    yield ErrorInput(SampleInput(one(3, 2), (one(3, 2),)), RuntimeError, re.escape(
        "linalg.cross: inputs dimension -1 must have length 3. Got 2 and 2"))
    yield ErrorInput(SampleInput(one(3, 2), (one(3, 2),), {"dim": 1}), RuntimeError, re.escape(
        "linalg.cross: inputs dimension 1 must have length 3. Got 2 and 2"))
    yield ErrorInput(SampleInput(one(3), (one(2, 3),)), RuntimeError,
                     "linalg.cross: inputs must have the same number of dimensions.")
    yield ErrorInput(SampleInput(one(2, 3), (one(3, 3),)), RuntimeError, re.escape(
        "The size of tensor a (2) must match the size of tensor b (3) at non-singleton "
        "dimension 0"))
    yield ErrorInput(SampleInput(one(2, 3), (one(2, 3, dtype=ember.float64),)), RuntimeError,
                     "expected scalar type Float but found Double")
    yield ErrorInput(SampleInput(one(3, dtype=ember.bool), (one(3, dtype=ember.bool),)),
                     NotImplementedError, "\"cross\" not implemented for 'Bool'")
    yield ErrorInput(SampleInput(one(3, 3), (one(3, 3),), {"dim": 5}), IndexError,
                     re.escape("Dimension out of range (expected to be in range of [-2, 1], but "
                               "got 5)"))


OPS = [
    OpInfo("linalg.det", np.linalg.det, _det_samples, dtypes=LINALG, gradgrad=True,
           error_inputs=square_errors("linalg.det", kernel="lu_cpu")),
    OpInfo("det", np.linalg.det, _det_samples, dtypes=LINALG, gradgrad=True,
           error_inputs=square_errors("linalg.det", kernel="lu_cpu")),
    OpInfo("linalg.slogdet", _slogdet_ref, _slogdet_samples, dtypes=LINALG, gradgrad=True,
           error_inputs=square_errors("linalg.slogdet")),
    OpInfo("slogdet", _slogdet_ref, _slogdet_samples, dtypes=LINALG, gradgrad=True,
           error_inputs=square_errors("linalg.slogdet")),
    OpInfo("logdet", _logdet_ref, _logdet_samples, dtypes=LINALG, gradgrad=True,
           error_inputs=square_errors("logdet")),
    OpInfo("linalg.matrix_power", _power_ref, _power_samples,
           dtypes=LINALG + LOW + INTS, gradgrad=True, tol=ROUNDED_PRODUCTS,
           error_inputs=_power_errors("linalg")),
    OpInfo("matrix_power", _power_ref, _power_samples, dtypes=LINALG + LOW + INTS,
           gradgrad=True, tol=ROUNDED_PRODUCTS, error_inputs=_power_errors("top")),
    # PyTorch 2.13's CPU matrix_exp returns garbage for float16 (exp of [[.3, .3], [.3, .3]]
    # gives entries near -2e4): half precision is not compared
    OpInfo("linalg.matrix_exp", _exp_ref, square_samples("any"), dtypes=LINALG, gradgrad=True,
           error_inputs=_exp_errors),
    OpInfo("matrix_exp", _exp_ref, square_samples("any"), dtypes=LINALG, gradgrad=True,
           error_inputs=_exp_errors),
    OpInfo("linalg.cross", _cross_ref, _cross_samples, dtypes=FLOATS + LOW + INTS + COMPLEX,
           gradgrad=True, tol=ROUNDED_PRODUCTS, error_inputs=_cross_errors),
]
