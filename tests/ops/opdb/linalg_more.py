"""OpInfo entries for linalg.lu (ops/lu.py), linalg.ldl_factor, ldl_factor_ex, ldl_solve and
linalg.diagonal (ops/ldl.py).

The LDL samples are symmetric (Hermitian for ``hermitian=True``) and indefinite, so that
LAPACK's Bunch-Kaufman pivoting takes 2x2 blocks too; the references call the same LAPACK
routines through SciPy (test_linalg_more.py checks the factors against A itself).
"""

import re

import numpy as np
import scipy.linalg
import scipy.linalg.lapack

import ember
from ember.ops.lu import linalg_lu_public    # ember.linalg.lu (P needs no gradient)
from tests.ops.opdb.core import ALL, COMPLEX, FLOATS, ErrorInput, OpInfo, SampleInput, make
from tests.ops.opdb.decompositions import matrix, square_samples

LINALG = FLOATS + COMPLEX
_TOL = {ember.float32: (1e-4, 1e-5), ember.complex64: (1e-4, 1e-5)}


# --- linalg.lu --------------------------------------------------------------------------------

def _lu_samples(dtype, requires_grad):
    yield from square_samples()(dtype, requires_grad)
    for shape in ((4, 3), (3, 5), (2, 4, 2), (2, 2, 3), (0, 3), (3, 0)):
        yield SampleInput(matrix(shape, dtype, requires_grad, "any"), name=f"{list(shape)}")
    yield SampleInput(matrix((3, 3), dtype, requires_grad), kwargs={"pivot": True},
                      name="pivot=True")
    if not requires_grad:
        yield SampleInput(ember.ones(2, 3, 3, dtype=dtype), name="singular")


def _lu_ref(a, pivot=True):
    m, n = a.shape[-2:]
    k = min(m, n)
    if a.size == 0:
        batch = a.shape[:-2]
        return (np.broadcast_to(np.eye(m, dtype=a.dtype), batch + (m, m)),
                np.zeros(batch + (m, k), a.dtype), np.zeros(batch + (k, n), a.dtype))
    return scipy.linalg.lu(a)


def _lu_errors():
    yield ErrorInput(SampleInput(ember.ones(3)), RuntimeError, re.escape(
        "linalg.lu: Expected tensor with 2 or more dimensions. Got size: [3] instead"))
    for dtype, name in ((ember.int64, "Long"), (ember.float16, "Half"),
                        (ember.bfloat16, "BFloat16")):
        yield ErrorInput(SampleInput(ember.ones(3, 3, dtype=dtype)), NotImplementedError,
                         f"\"lu_cpu\" not implemented for '{name}'")
    yield ErrorInput(SampleInput(ember.eye(3), kwargs={"pivot": False}), RuntimeError,
                     "linalg.lu_factor: LU without pivoting is not implemented on the CPU",
                     cpu_only=True)
    yield ErrorInput(SampleInput(ember.eye(3), (True,)), TypeError,
                     "takes 1 positional argument but 2 were given")


# --- ldl_factor, ldl_factor_ex ----------------------------------------------------------------

_PIVOTS_2X2 = ember.tensor([[0., 1, 2], [1, 0, 3], [2, 3, 0]])     # zero diagonal: 2x2 blocks


def symmetric(shape, dtype, hermitian=False):
    """A random symmetric (``hermitian``: Hermitian) indefinite matrix batch, invertible."""
    x = make(shape, dtype, low=-1, high=1)
    a = x + (x.mH if hermitian else x.mT)
    return a + ember.eye(shape[-1], dtype=dtype) * 0.5 if shape[-1] else a


def _ldl_samples(dtype, requires_grad):
    kinds = (False, True) if dtype.is_complex else (False,)
    for hermitian in kinds:
        kw = {"hermitian": True} if hermitian else {}
        for shape in ((3, 3), (5, 5), (2, 4, 4), (1, 1), (0, 0), (2, 0, 0)):
            yield SampleInput(symmetric(shape, dtype, hermitian), kwargs=dict(kw),
                              name=f"{list(shape)} {kw}")
        yield SampleInput(_PIVOTS_2X2.to(dtype), kwargs=dict(kw), name=f"2x2 pivots {kw}")
        yield SampleInput(symmetric((4, 4), dtype, hermitian).mT.contiguous().mT,
                          kwargs=dict(kw), name=f"noncontiguous {kw}")
    if dtype.is_complex:            # a Hermitian matrix read as complex symmetric
        yield SampleInput(symmetric((3, 3), dtype, True), kwargs={"hermitian": False},
                          name="hermitian=False")


def _ldl_ref(a, hermitian=False, check_errors=None):
    """(LD, pivots), and LAPACK's info when ``check_errors`` is given (ldl_factor_ex)."""
    n = a.shape[-1]
    batch = a.shape[:-2]
    flat = a.reshape((int(np.prod(batch)), n, n))
    ld, piv = np.zeros_like(flat), np.zeros((flat.shape[0], n), np.int32)
    kind = "he" if hermitian and a.dtype.kind == "c" else "sy"
    info = np.zeros(flat.shape[0], np.int32)
    if a.size:
        trf, = scipy.linalg.lapack.get_lapack_funcs((kind + "trf",), dtype=a.dtype)
        for i, m in enumerate(flat):
            packed, piv[i], info[i] = trf(m, lower=1)
            ld[i] = np.tril(packed)
    out = ld.reshape(a.shape), piv.reshape(batch + (n,))
    return out if check_errors is None else out + (info.reshape(batch),)


def _ldl_errors(name, kw=None):
    def errors():
        full = "torch.linalg.ldl_factor_ex"
        yield ErrorInput(SampleInput(ember.ones(3)), RuntimeError, re.escape(
            f"{full}: The input tensor A must have at least 2 dimensions."))
        yield ErrorInput(SampleInput(ember.ones(2, 3)), RuntimeError, re.escape(
            f"{full}: A must be batches of square matrices, but they are 2 by 3 matrices"))
        yield ErrorInput(SampleInput(ember.ones(3, 3, dtype=ember.int64)), RuntimeError,
                         f"{full}: Expected a floating point or complex tensor as input. Got Long")
        for dtype, dname in ((ember.float16, "Half"), (ember.bfloat16, "BFloat16")):
            yield ErrorInput(SampleInput(ember.ones(3, 3, dtype=dtype)), NotImplementedError,
                             f"\"ldl_factor_kernel_cpu\" not implemented for '{dname}'")
        # a zero block of D: PyTorch fails an internal assert, ember says what went wrong
        yield ErrorInput(SampleInput(ember.zeros(2, 3, 3), kwargs=dict(kw or {})),
                         RuntimeError, f"linalg.{name}: ")
    return errors


def _ldl_ex_samples(dtype, requires_grad):
    yield from _ldl_samples(dtype, requires_grad)
    yield SampleInput(ember.zeros(2, 3, 3, dtype=dtype), name="singular")
    yield SampleInput(symmetric((3, 3), dtype), kwargs={"check_errors": True},
                      name="check_errors")


def _ldl_ex_ref(a, hermitian=False, check_errors=False):
    return _ldl_ref(a, hermitian, check_errors)


# --- ldl_solve --------------------------------------------------------------------------------

def _ldl_solve_samples(dtype, requires_grad):
    def sample(a, sb, hermitian=False, name=""):
        ld, piv = ember.linalg.ldl_factor(a, hermitian=hermitian)
        kw = {"hermitian": True} if hermitian else {}
        b = make(sb, dtype, requires_grad, low=-1, high=1)
        return SampleInput(ld, (piv, b), kw, name=f"{list(a.shape)} {list(sb)} {kw} {name}")
    for hermitian in ((False, True) if dtype.is_complex else (False,)):
        yield sample(symmetric((3, 3), dtype, hermitian), (3, 2), hermitian)
        yield sample(symmetric((2, 4, 4), dtype, hermitian), (2, 4, 1), hermitian)
        yield sample(symmetric((3, 3), dtype, hermitian), (2, 1, 3, 2), hermitian, "broadcast")
        yield sample(_PIVOTS_2X2.to(dtype), (3, 3), hermitian, "2x2 pivots")
    ld, piv = ember.linalg.ldl_factor(symmetric((3, 3), dtype))
    yield SampleInput(ld, (piv, make((2, 3), dtype, requires_grad, low=-1, high=1).mT),
                      name="noncontiguous B")
    yield sample(symmetric((0, 0), dtype), (0, 2))
    yield sample(symmetric((3, 3), dtype), (0, 3, 2), name="empty batch")


def _ldl_solve_ref(ld, piv, b, hermitian=False):
    n = ld.shape[-1]
    batch = np.broadcast_shapes(ld.shape[:-2], b.shape[:-2])
    count = int(np.prod(batch))
    ld = np.broadcast_to(ld, batch + (n, n)).reshape((count, n, n))
    piv = np.broadcast_to(piv, batch + (n,)).reshape((count, n))
    shape = batch + b.shape[-2:]
    b = np.broadcast_to(b, shape).reshape((count,) + b.shape[-2:])
    if b.size == 0:
        return np.zeros(shape, ld.dtype)
    kind = "he" if hermitian and ld.dtype.kind == "c" else "sy"
    trs, = scipy.linalg.lapack.get_lapack_funcs((kind + "trs",), dtype=ld.dtype)
    return np.stack([trs(m, p, r, lower=1)[0] for m, p, r in zip(ld, piv, b)]).reshape(shape)


def _ldl_solve_errors():
    name = "torch.linalg.ldl_solve"
    ld, piv = ember.linalg.ldl_factor(ember.eye(3, dtype=ember.float64))
    b = ember.ones(3, 2, dtype=ember.float64)
    yield ErrorInput(SampleInput(ember.ones(3), (piv, b)), RuntimeError, re.escape(
        f"{name}: The input tensor A must have at least 2 dimensions."))
    yield ErrorInput(SampleInput(ld[:2], (piv, b)), RuntimeError, re.escape(
        f"{name}: A must be batches of square matrices, but they are 2 by 3 matrices"))
    yield ErrorInput(SampleInput(ld.long(), (piv, b.long())), RuntimeError,
                     f"{name}: Expected a floating point or complex tensor as input. Got Long")
    yield ErrorInput(SampleInput(ld, (piv, b.float())), RuntimeError, re.escape(
        "Expected b and A to have the same dtype, but found b of type Float and A of type "
        "Double instead."))
    yield ErrorInput(SampleInput(ld, (piv, ember.ones(3, dtype=ember.float64))), IndexError,
                     re.escape("Dimension out of range (expected to be in range of [-1, 0], "
                               "but got -2)"))
    yield ErrorInput(SampleInput(ld, (piv[:2], ember.ones(4, 2, dtype=ember.float64))),
                     RuntimeError, "Incompatible matrix sizes for torch.linalg.ldl_solve: each "
                     "A matrix is 3 by 3 but each b matrix is 4 by 2")
    yield ErrorInput(SampleInput(ld, (piv.float()[:2], b)), RuntimeError, re.escape(
        f"{name}: Expected LD.shape[:-1] and pivots.shape to be the same, but got pivots "
        f"with shape [2] instead"))
    yield ErrorInput(SampleInput(ld, (piv.float(), b)), RuntimeError,
                     f"{name}: Expected pivots to be integers. Got Float")
    yield ErrorInput(SampleInput(ld, (piv * 0, b)), RuntimeError, re.escape(
        "Pivots given to ldl_solve must all satisfy |pivot| >= 1. Did you properly pass the "
        "result of ldl_factor?"))
    yield ErrorInput(SampleInput(ld, (piv * 0 - 5, b)), RuntimeError, re.escape(
        "Pivots given to ldl_solve must all satisfy |pivot| <= LD.size(-2)."))
    half = ember.eye(3, dtype=ember.bfloat16)
    yield ErrorInput(SampleInput(half, (piv, ember.ones(3, 2, dtype=ember.bfloat16))),
                     NotImplementedError,
                     "\"ldl_solve_kernel_cpu\" not implemented for 'BFloat16'")


# --- linalg.diagonal --------------------------------------------------------------------------

def _diagonal_samples(dtype, requires_grad):
    for shape, kw in (((3, 4), {}), ((2, 3, 4), {}), ((2, 3, 4), {"offset": 1}),
                      ((2, 3, 4), {"offset": -2, "dim1": 0, "dim2": 2}),
                      ((3, 3), {"dim1": -1, "dim2": -2}), ((0, 3), {}), ((2, 0, 0), {}),
                      ((3, 3), {"offset": 5})):
        yield SampleInput(make(shape, dtype, requires_grad), kwargs=kw,
                          name=f"{list(shape)} {kw}")
    yield SampleInput(make((3, 4), dtype, requires_grad, noncontiguous=True),
                      name="noncontiguous")


def _diagonal_errors():
    yield ErrorInput(SampleInput(ember.ones(3)), IndexError, re.escape(
        "Dimension out of range (expected to be in range of [-1, 0], but got -2)"))
    yield ErrorInput(SampleInput(ember.ones(3, 3), kwargs={"dim1": 0, "dim2": 0}),
                     RuntimeError, "diagonal dimensions cannot be identical 0, 0")
    yield ErrorInput(SampleInput(ember.ones(3, 3), (1,)), TypeError,
                     "takes 1 positional argument but 2 were given")


OPS = [
    OpInfo("linalg.lu", _lu_ref, _lu_samples, dtypes=LINALG, gradgrad=True,
           op=linalg_lu_public, error_inputs=_lu_errors, tol=_TOL),
    OpInfo("linalg.ldl_factor", _ldl_ref, _ldl_samples, dtypes=LINALG, grad=False,
           error_inputs=_ldl_errors("ldl_factor"), tol=_TOL),
    OpInfo("linalg.ldl_factor_ex", _ldl_ex_ref, _ldl_ex_samples, dtypes=LINALG, grad=False,
           error_inputs=_ldl_errors("ldl_factor_ex", {"check_errors": True}), tol=_TOL),
    OpInfo("linalg.ldl_solve", _ldl_solve_ref, _ldl_solve_samples, dtypes=LINALG, grad=False,
           error_inputs=_ldl_solve_errors, tol=_TOL),
    OpInfo("linalg.diagonal",
           lambda a, offset=0, dim1=-2, dim2=-1: np.diagonal(a, offset, dim1, dim2),
           _diagonal_samples, dtypes=ALL, gradgrad=True, error_inputs=_diagonal_errors),
]
