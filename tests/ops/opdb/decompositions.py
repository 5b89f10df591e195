"""OpInfo entries for ember.linalg's inverses and solvers (ops/solvers.py, ops/lu.py: with
tensorinv, tensorsolve and lu_unpack), and the matrix samples every decomposition entry uses
(decompositions_*.py).

Samples are well-conditioned (a random matrix plus n times the identity, or A A^H + n I for
Hermitian positive-definite input), so float32 results and float64 gradients are stable.
"""

import re

import numpy as np
import scipy.linalg

import ember
from tests.ops.opdb.core import (COMPLEX, FLOATS, INTS, LOW, ErrorInput, OpInfo, SampleInput,
                                 make)

LINALG = FLOATS + COMPLEX
SQUARE_SHAPES = ((3, 3), (2, 3, 3), (1, 1), (0, 0), (2, 0, 0), (0, 2, 2))


def matrix(shape, dtype, requires_grad=False, kind="invertible", noncontiguous=False):
    """A random matrix (batch): kind "invertible" (A + n I, entries of A in [-1, 1]), "spd"
    (A A^H + n I), "hermitian" (A + A^H), "triangular" (invertible, to be read upper or
    lower) or "any" (A itself)."""
    n = shape[-1]
    x = make(shape, dtype, low=-1, high=1)
    eye = ember.eye(n, dtype=dtype) if n == shape[-2] else 0
    a = {"invertible": lambda: x + n * eye, "triangular": lambda: x + n * eye,
         "spd": lambda: x @ x.mH + n * eye, "hermitian": lambda: x + x.mH,
         "any": lambda: x}[kind]()
    if noncontiguous:
        a = a.mT.contiguous().mT
    return a.detach().requires_grad_(requires_grad and (dtype.is_floating_point
                                                        or dtype.is_complex))


def square_samples(kind="invertible", shapes=SQUARE_SHAPES, kwargs=({},)):
    """One-matrix samples: each shape (empty ones included), a noncontiguous matrix, each
    kwargs variant."""
    def samples(dtype, requires_grad):
        for kw in kwargs:
            for shape in shapes:
                yield SampleInput(matrix(shape, dtype, requires_grad, kind), kwargs=dict(kw),
                                  name=f"{list(shape)} {kw}")
            yield SampleInput(matrix((3, 3), dtype, requires_grad, kind, noncontiguous=True),
                              kwargs=dict(kw), name=f"noncontiguous {kw}")
    return samples


def hermitian_input(fn):
    """``fn`` on (A + A^H) / 2: an op that reads one triangle sees every entry (gradcheck
    perturbs them one at a time), as PyTorch's tests do. Bad inputs pass through as given."""
    def call(a, *args, **kwargs):
        if isinstance(a, ember.Tensor) and a.ndim >= 2 and a.shape[-1] == a.shape[-2] \
                and (a.is_floating_point() or a.is_complex()):
            a = (a + a.mH) / 2
        return fn(a, *args, **kwargs)
    return call


def torch_hermitian_input(name):
    """The same wrapper around ``torch.<name>``, for the parity tests."""
    def call(a, *args, **kwargs):
        import torch
        fn = torch
        for part in name.split("."):
            fn = getattr(fn, part)
        if isinstance(a, torch.Tensor) and a.ndim >= 2 and a.shape[-1] == a.shape[-2] \
                and (a.is_floating_point() or a.is_complex()):
            a = (a + a.mH) / 2
        return fn(a, *args, **kwargs)
    return call


def square_errors(name, call=lambda a: SampleInput(a), low=None, kernel=None,
                  ints="Expected a floating point or complex tensor as input. Got Long"):
    """The bad inputs of an op on square matrices: too few dims, non-square, integer and
    half-precision input (``low``: PyTorch's message, or ``kernel``'s NotImplementedError)."""
    def errors():
        yield ErrorInput(call(ember.ones(3)), RuntimeError,
                         re.escape(f"{name}: The input tensor A must have at least 2 dimensions."))
        yield ErrorInput(call(ember.ones(2, 3)), RuntimeError,
                         re.escape(f"{name}: A must be batches of square matrices, but they are "
                                   f"2 by 3 matrices"))
        yield ErrorInput(call(ember.ones(3, 3, dtype=ember.int64)), RuntimeError,
                         re.escape(f"{name}: {ints}"))
        half = ember.ones(3, 3, dtype=ember.float16)
        if kernel is not None:
            yield ErrorInput(call(half), NotImplementedError,
                             f"\"{kernel}\" not implemented for 'Half'")
        else:
            yield ErrorInput(call(half), RuntimeError, re.escape(
                f"{low or name}: Low precision dtypes not supported. Got Half"))
    return errors


def _chain(*generators):
    def errors():
        for g in generators:
            yield from g()
    return errors


# --- inv --------------------------------------------------------------------------------------

SINGULAR = ember.tensor([[[1., 0, 0], [0, 1, 0], [0, 0, 1]], [[1., 2, 3], [2, 4, 6], [1, 0, 1]]])


def _inv_errors(name, check=None):
    kw = {} if check is None else {"check_errors": True}

    def errors():
        yield ErrorInput(SampleInput(SINGULAR, kwargs=kw), RuntimeError, re.escape(
            f"{check or name}: (Batch element 1): The diagonal element 3 is zero, the "
            f"inversion could not be completed because the input matrix is singular."))
        yield ErrorInput(SampleInput(SINGULAR[1], kwargs=kw), RuntimeError,
                         f"{check or name}: The diagonal element 3 is zero")
    return errors


def _inv_ex_samples(dtype, requires_grad):
    yield from square_samples()(dtype, requires_grad)
    if not requires_grad:               # info of singular matrices (their inverse is garbage)
        yield SampleInput(SINGULAR.to(dtype), name="singular")


def _inv_ex_ref(a, check_errors=False):
    info = np.array([0, 3], np.int32) if a.shape == (2, 3, 3) and not np.all(
        np.linalg.det(a)) else np.zeros(a.shape[:-2], np.int32)
    eye = np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape)
    safe = np.where(info[..., None, None] == 0, a, eye)
    return np.where(info[..., None, None] == 0, np.linalg.inv(safe), 0), info


def _valid_inverse(where, inv_ex):
    """``linalg.inv_ex`` with the garbage of singular matrices (LAPACK's inf and NaN) zeroed:
    only info says anything there."""
    def call(a, **kwargs):
        inverse, info = inv_ex(a, **kwargs)
        return where((info == 0)[..., None, None], inverse, 0), info
    return call


def _torch_valid_inverse(a, **kwargs):
    import torch
    return _valid_inverse(torch.where, torch.linalg.inv_ex)(a, **kwargs)


# --- solve ------------------------------------------------------------------------------------

def _solve_samples(dtype, requires_grad):
    def pair(sa, sb, **kw):
        return SampleInput(matrix(sa, dtype, requires_grad),
                           (make(sb, dtype, requires_grad, low=-1, high=1),), dict(kw),
                           name=f"{list(sa)} {list(sb)} {kw}")
    for left in (True, False):
        k = {"left": left}
        yield pair((3, 3), (3, 2) if left else (2, 3), **k)
        yield pair((2, 3, 3), (2, 3, 3), **k)
        yield pair((2, 3, 3), (4, 1, 3, 3), **k)        # batch dims broadcast
        yield pair((0, 0), (0, 2) if left else (2, 0), **k)
        yield pair((2, 0, 0), (2, 0, 0), **k)
    yield pair((3, 3), (3,))                            # vector right-hand sides
    yield pair((2, 3, 3), (2, 3))
    yield pair((2, 3, 3), (3,))
    yield SampleInput(matrix((3, 3), dtype, requires_grad, noncontiguous=True),
                      (make((2, 3), dtype, requires_grad, low=-1, high=1).mT,), name="noncontig")


def _solve_ref(a, b, left=True, check_errors=None):
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])
    b2 = b[..., None] if vector else b
    if left:
        x = np.linalg.solve(a, b2)
    else:
        x = np.linalg.solve(a.swapaxes(-1, -2), b2.swapaxes(-1, -2)).swapaxes(-1, -2)
    info = np.zeros(a.shape[:-2], np.int32)
    return (x[..., 0] if vector else x) if check_errors is None else \
        (x[..., 0] if vector else x, info)


def _solve_errors(name, check=None):
    one = ember.ones

    def errors():
        kw = {} if check is None else {"check_errors": True}
        yield ErrorInput(SampleInput(SINGULAR, (one(2, 3),), kw), RuntimeError, re.escape(
            f"torch.{check or name}: (Batch element 1): The solver failed because the input "
            f"matrix is singular."))
        yield ErrorInput(SampleInput(one(3), (one(3),)), RuntimeError, re.escape(
            "linalg.solve: The input tensor A must have at least 2 dimensions."))
        yield ErrorInput(SampleInput(one(2, 3), (one(2),)), RuntimeError, re.escape(
            "linalg.solve: A must be batches of square matrices, but they are 2 by 3 matrices"))
        yield ErrorInput(SampleInput(one(3, 3, dtype=ember.int64), (one(3),)), RuntimeError,
                         "linalg.solve: Expected a floating point or complex tensor as input. "
                         "Got Long")
        half = one(3, 3, dtype=ember.float16)
        yield ErrorInput(SampleInput(half, (half,)), NotImplementedError,
                         "\"lu_cpu\" not implemented for 'Half'")
        yield ErrorInput(SampleInput(one(3, 3), (one(3, dtype=ember.float64),)), RuntimeError,
                         "linalg.solve: Expected A and B to have the same dtype, but found A of "
                         "type Float and B of type Double instead")
        yield ErrorInput(SampleInput(ember.eye(3), (one(()),)), RuntimeError, re.escape(
            "linalg.solve: The input tensor B must have at least 2 dimensions."))
        yield ErrorInput(SampleInput(ember.eye(3), (one(4, 2),)), RuntimeError, re.escape(
            "linalg.solve: Incompatible shapes of A and B for the equation AX = B (3x3 and 4x2)"))
        yield ErrorInput(SampleInput(ember.eye(3), (one(3),), {"left": False}), RuntimeError,
                         re.escape("linalg.solve: Incompatible shapes of A and B for the "
                                   "equation XA = B (3x3 and 3x1)"))
        yield ErrorInput(SampleInput(ember.eye(3).expand(2, 3, 3), (one(3, 3, 2),)),
                         RuntimeError, re.escape("The size of tensor a (3) must match the size "
                                                 "of tensor b (2) at non-singleton dimension 0"))
    return errors


# --- solve_triangular -------------------------------------------------------------------------

def _triangular_samples(dtype, requires_grad):
    def pair(sa, sb, noncontiguous=False, **kw):
        a = matrix(sa, dtype, requires_grad, "triangular", noncontiguous)
        return SampleInput(a, (make(sb, dtype, requires_grad, low=-1, high=1),), kw,
                           name=f"{list(sa)} {list(sb)} {kw}")
    for upper in (True, False):
        for unit in (False, True):
            yield pair((3, 3), (3, 2), upper=upper, unitriangular=unit)
            yield pair((3, 3), (2, 3), upper=upper, left=False, unitriangular=unit)
        yield pair((2, 1, 3, 3), (4, 3, 2), upper=upper)
        yield pair((0, 0), (0, 2), upper=upper)
        yield pair((0, 3, 3), (3, 1), upper=upper)
        yield pair((3, 3), (2, 3), noncontiguous=True, upper=upper, left=False)


def _triangular_ref(a, b, *, upper, left=True, unitriangular=False):
    a = np.triu(a) if upper else np.tril(a)
    if unitriangular:
        eye = np.eye(a.shape[-1])
        a = a * (1 - eye) + eye
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a, b = np.broadcast_to(a, batch + a.shape[-2:]), np.broadcast_to(b, batch + b.shape[-2:])
    if a.size == 0 or b.size == 0:
        return np.zeros(b.shape, a.dtype)
    if left:
        return np.linalg.solve(a, b)
    return np.linalg.solve(a.swapaxes(-1, -2), b.swapaxes(-1, -2)).swapaxes(-1, -2)


def _triangular_errors():
    one = ember.ones
    up = {"upper": True}
    yield ErrorInput(SampleInput(ember.eye(3), (one(3),), up), RuntimeError, re.escape(
        "linalg.solve_triangular: The input tensor B must have at least 2 dimensions."))
    yield ErrorInput(SampleInput(one(2, 3), (one(3, 2),), up), RuntimeError, re.escape(
        "linalg.solve_triangular: A must be batches of square matrices, but they are 2 by 3"))
    yield ErrorInput(SampleInput(ember.eye(3), (one(4, 2),), up), RuntimeError, re.escape(
        "linalg.solve_triangular: Incompatible shapes of A and B for the equation AX = B (3x3 "
        "and 4x2)"))
    yield ErrorInput(SampleInput(ember.eye(3), (one(4, 2),), {"upper": True, "left": False}),
                     RuntimeError, re.escape("for the equation XA = B (3x3 and 4x2)"))
    i = one(3, 3, dtype=ember.int64)
    yield ErrorInput(SampleInput(i, (i,), up), NotImplementedError,
                     "\"triangular_solve_cpu\" not implemented for 'Long'")
    yield ErrorInput(SampleInput(ember.eye(3), (one(3, 2),)), TypeError, "upper")


# --- lu_factor, lu_solve ----------------------------------------------------------------------

def _lu_samples(dtype, requires_grad):
    yield from square_samples()(dtype, requires_grad)
    for shape in ((4, 3), (3, 5), (2, 4, 2), (0, 3), (3, 0)):
        yield SampleInput(matrix(shape, dtype, requires_grad, "any"), name=f"{list(shape)}")


def _lu_ref(a, pivot=True, check_errors=None):
    if a.size == 0:
        k = min(a.shape[-2:])
        lu, piv = a.copy(), np.zeros(a.shape[:-2] + (k,), np.int32)
    else:
        lu, piv = scipy.linalg.lu_factor(a)
    out = (lu, (piv + 1).astype(np.int32))
    return out if check_errors is None else out + (np.zeros(a.shape[:-2], np.int32),)


def _lu_errors(name):
    def errors():
        sample = SampleInput(ember.ones(2, 3, 3), kwargs={} if "ex" not in name
                             else {"check_errors": True})
        yield ErrorInput(sample, RuntimeError, re.escape(
            f"torch.linalg.{name}: (Batch element 0): U[2,2] is zero and using it on lu_solve "
            f"would result in a division by zero. If you still want to perform the "
            f"factorization, consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, "
            f"pivot)"))
        yield ErrorInput(SampleInput(ember.ones(3)), RuntimeError, re.escape(
            "torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: [3] instead"))
        yield ErrorInput(SampleInput(ember.ones(3, 3, dtype=ember.int64)), NotImplementedError,
                         "\"lu_cpu\" not implemented for 'Long'")
        yield ErrorInput(SampleInput(ember.eye(3), kwargs={"pivot": False}), RuntimeError,
                         "linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    return errors


def _lu_ex_samples(dtype, requires_grad):
    yield from _lu_samples(dtype, requires_grad)
    if not requires_grad:
        yield SampleInput(ember.ones(2, 3, 3, dtype=dtype), name="singular")
        yield SampleInput(ember.tensor([[0., 0, 1], [0, 0, 2]], dtype=dtype), name="wide zero")


def _lu_ex_ref(a, pivot=True, check_errors=False):
    lu, piv = _lu_ref(a)
    zero = np.diagonal(lu, axis1=-2, axis2=-1) == 0
    first = zero.argmax(-1) if zero.shape[-1] else np.zeros(zero.shape[:-1], int)
    info = np.where(zero.any(-1), first + 1, 0).astype(np.int32)
    return lu, piv, info


def _lu_solve_samples(dtype, requires_grad):
    def sample(sa, sb, **kw):
        a = matrix(sa, dtype)
        lu, piv = ember.linalg.lu_factor(a)
        b = make(sb, dtype, requires_grad, low=-1, high=1)
        return SampleInput(lu.requires_grad_(requires_grad), (piv, b), kw,
                           name=f"{list(sa)} {list(sb)} {kw}")
    for left in (True, False):
        for adjoint in (False, True):
            kw = {"left": left, "adjoint": adjoint}
            yield sample((3, 3), (3, 2) if left else (2, 3), **kw)
            yield sample((2, 3, 3), (4, 1, 3, 3), **kw)
    yield sample((0, 0), (0, 2))
    yield sample((0, 3, 3), (3, 1))


def _lu_solve_ref(lu, piv, b, left=True, adjoint=False):
    batch = np.broadcast_shapes(lu.shape[:-2], b.shape[:-2])
    lu = np.broadcast_to(lu, batch + lu.shape[-2:])
    piv = np.broadcast_to(piv, batch + piv.shape[-1:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    if b.size == 0:
        return np.zeros(b.shape, lu.dtype)
    solve = scipy.linalg.lu_solve
    if left:
        return solve((lu, piv - 1), b, trans=2 if adjoint else 0)
    x = solve((lu, piv - 1), b.conj().swapaxes(-1, -2), trans=0 if adjoint else 2)
    return x.conj().swapaxes(-1, -2)


def _lu_solve_errors():
    one, i32 = ember.ones, ember.int32
    piv = ember.ones(3, dtype=i32)
    yield ErrorInput(SampleInput(ember.eye(3), (piv, one(3, 1, dtype=ember.float64))),
                     RuntimeError, "linalg.lu_solve: Expected LU and B to have the same dtype, "
                     "but found LU of type Float and B of type Double instead")
    yield ErrorInput(SampleInput(ember.eye(3), (piv, one(3))), RuntimeError, re.escape(
        "linalg.lu_solve: The input tensor B must have at least 2 dimensions."))
    yield ErrorInput(SampleInput(ember.eye(3), (piv.long(), one(3, 1))), RuntimeError,
                     "linalg.lu_solve: pivots should be a Tensor of scalar type ember.int32")
    yield ErrorInput(SampleInput(ember.eye(3), (one(2, dtype=i32), one(3, 1))), RuntimeError,
                     "linalg.lu_solve: Number of pivots per batch should be same as the "
                     "dimension of the matrix")
    yield ErrorInput(SampleInput(ember.eye(3).expand(2, 3, 3), (piv, one(3, 1))), RuntimeError,
                     re.escape("linalg.lu_solve: Expected LU.shape[:-1] and pivots.shape to be "
                               "the same, but got pivots with shape [3] instead"))
    yield ErrorInput(SampleInput(ember.eye(3), (piv, one(4, 1))), RuntimeError, re.escape(
        "linalg.lu_solve: Incompatible shapes of A and B for the equation AX = B (3x3 and 4x1)"))
    yield ErrorInput(SampleInput(ember.eye(3), (piv * 0, one(3, 1))), RuntimeError,
                     "Pivots given to lu_solve must all be greater or equal to 1. Did you "
                     "properly pass the result of lu_factor?")
    yield ErrorInput(SampleInput(ember.eye(3), (piv * 5, one(3, 1))), RuntimeError,
                     re.escape("Pivots given to lu_solve must all be smaller or equal to "
                               "LU.size(-2)."))
    i = one(3, 3, dtype=ember.int64)
    yield ErrorInput(SampleInput(i, (piv, i)), RuntimeError, "torch.linalg.lu_solve: Expected "
                     "a floating point or complex tensor as input. Got Long")
    yield ErrorInput(SampleInput(one(2, 3), (one(2, dtype=i32), one(2, 1))), RuntimeError,
                     re.escape("torch.linalg.lu_solve: A must be batches of square matrices, "
                               "but they are 2 by 3 matrices"))


# --- lu_unpack --------------------------------------------------------------------------------

def _lu_unpack_samples(dtype, requires_grad):
    grad = requires_grad and (dtype.is_floating_point or dtype.is_complex)
    for shape in ((3, 3), (4, 3), (3, 5), (2, 4, 2), (2, 3, 3), (0, 3), (3, 0), (2, 0, 0)):
        base = dtype if dtype in (ember.float64, ember.complex64, ember.complex128) \
            else ember.float32
        lu, piv = ember.linalg.lu_factor(matrix(shape, base, kind="any"))
        lu = lu.to(dtype).requires_grad_(grad)
        yield SampleInput(lu, (piv,), name=f"{list(shape)}")
        if shape == (2, 3, 3):
            yield SampleInput(lu, (piv,), {"unpack_pivots": False}, name="no P")
            yield SampleInput(lu, (piv, True, False), name="positional")
            if not requires_grad:       # PyTorch's backward fails without L and U
                for kw in ({"unpack_data": False}, {"unpack_data": False,
                                                    "unpack_pivots": False}):
                    yield SampleInput(lu, (piv,), kw, name=f"{kw}")
    lu, piv = ember.linalg.lu_factor(matrix((3, 3), ember.float64))
    yield SampleInput(lu.to(dtype).mT.contiguous().mT.requires_grad_(grad), (piv,),
                      name="noncontiguous")


def _lu_unpack_ref(lu, pivots, unpack_data=True, unpack_pivots=True):
    m, n = lu.shape[-2:]
    k = min(m, n)
    empty = np.zeros(0, lu.dtype)
    low, up = empty, empty
    if unpack_data:
        low = np.tril(lu[..., :, :k], -1)
        low[..., range(k), range(k)] = 1
        up = np.triu(lu[..., :k, :])
    if not unpack_pivots:
        return empty, low, up
    count = int(np.prod(lu.shape[:-2]))
    pivots = pivots.reshape(count, k)
    perms = np.zeros((pivots.shape[0], m, m), lu.dtype)
    for b, row in enumerate(pivots):
        order = list(range(m))
        for i, j in enumerate(row - 1):
            order[i], order[j] = order[j], order[i]
        perms[b][order, range(m)] = 1          # P^T A = A[order]
    return perms.reshape(lu.shape[:-2] + (m, m)), low, up


def _lu_unpack_errors():
    i32 = ember.int32
    yield ErrorInput(SampleInput(ember.ones(3), (ember.ones(3, dtype=i32),)), RuntimeError,
                     re.escape("torch.lu_unpack: Expected tensor with 2 or more dimensions. Got "
                               "size: [3] instead"))
    for bad in (ember.ones(3, dtype=ember.int64), ember.ones(3)):
        yield ErrorInput(SampleInput(ember.eye(3), (bad,)), RuntimeError, re.escape(
            "torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of ember.int32 "
            "dtype.\nNote: this function is intended to be used with the output produced by "
            "torch.linalg.lu_factor"))
    for bad in (0, 4):
        yield ErrorInput(SampleInput(ember.eye(3), (ember.full((3,), bad, dtype=i32),)),
                         RuntimeError, re.escape(
                             "pivots passed to lu_unpack must be between 1 and LU.size(-2) "
                             "inclusive.Did you properly pass the result of lu_factor?"))
    # (PyTorch reads out of bounds for pivots whose shape does not fit LU, where ember raises:
    # tests/ops/test_linalg_decompositions.py, as PyTorch cannot be called with them)


def _lu_unpack_result(dtype, sample):
    return dtype


# --- tensorinv, tensorsolve -------------------------------------------------------------------

def _tensorinv_samples(dtype, requires_grad):
    for shape, ind in (((4, 6, 8, 3), 2), ((6, 2, 3), 1), ((2, 3, 6), 2), ((3, 3), 1),
                       ((2, 2, 4), None), ((1, 1), 1), ((0, 0), 1), ((2, 0, 0, 2), 2)):
        n = int(np.prod(shape[:ind or 2]))
        a = matrix((n, n), dtype).reshape(shape).detach().requires_grad_(requires_grad)
        yield SampleInput(a, kwargs={} if ind is None else {"ind": ind},
                          name=f"{list(shape)} ind={ind}")
    a = matrix((6, 6), dtype).mT.reshape(2, 3, 6)
    yield SampleInput(a.detach().requires_grad_(requires_grad), (2,), name="positional")
    a = matrix((4, 4), dtype, noncontiguous=True).detach().requires_grad_(requires_grad)
    yield SampleInput(a, kwargs={"ind": 1}, name="noncontiguous")


def _tensorinv_ref(a, ind=2):
    n = int(np.prod(a.shape[:ind]))
    inverse = np.linalg.inv(a.reshape(n, n)) if n else np.zeros((0, 0), a.dtype)
    return inverse.reshape(a.shape[ind:] + a.shape[:ind])


def _tensorinv_errors():
    name = ("Expected self to satisfy the requirement prod(self.shape[ind:]) == "
            "prod(self.shape[:ind])")
    yield ErrorInput(SampleInput(ember.ones(4, 6, 8, 3), kwargs={"ind": 1}), RuntimeError,
                     re.escape(f"{name}, but got 144 != 4"))
    yield ErrorInput(SampleInput(ember.ones(6, 4, 24), kwargs={"ind": 3}), RuntimeError,
                     re.escape(f"{name}, but got 1 != 576"))
    for ind in (0, -1):
        yield ErrorInput(SampleInput(ember.eye(3), kwargs={"ind": ind}), RuntimeError,
                         f"Expected a strictly positive integer for 'ind', but got {ind}")
    yield ErrorInput(SampleInput(ember.eye(3), kwargs={"ind": 1.0}), TypeError,
                     "argument 'ind' must be int, not float")
    yield ErrorInput(SampleInput(ember.eye(3, dtype=ember.int64), (1,)), RuntimeError,
                     "linalg.inv: Expected a floating point or complex tensor as input. Got Long")
    yield ErrorInput(SampleInput(ember.eye(3, dtype=ember.float16), (1,)), RuntimeError,
                     "linalg.inv: Low precision dtypes not supported. Got Half")
    yield ErrorInput(SampleInput(ember.zeros(3, 3), (1,)), RuntimeError, re.escape(
        "inv: The diagonal element 1 is zero, the inversion could not be completed because the "
        "input matrix is singular."))


def _tensorsolve_samples(dtype, requires_grad):
    def sample(a_shape, b_shape, dims=None, *args, moved=None):
        n = int(np.prod(b_shape))
        a = matrix((n, n), dtype).reshape(moved or a_shape)
        if moved is not None:               # dims moved to the end give back the system
            a = a.movedim(tuple(range(len(a_shape) - len(dims), len(a_shape))), dims)
        b = make(b_shape, dtype, requires_grad, low=-1, high=1)
        kw = {} if dims is None else {"dims": dims}
        return SampleInput(a.detach().requires_grad_(requires_grad), (b, *args), kw,
                           name=f"{list(a_shape)} {list(b_shape)} {kw}")
    yield sample((2, 3, 6), (2, 3))
    yield sample((6, 2, 3), (6,))
    yield sample((2, 3, 3, 2), (3, 2))                  # only the sizes must agree
    yield sample((2, 6, 3), (6,), (0,), moved=(6, 3, 2))
    yield sample((3, 8, 4, 6), (4, 6), [0, 1], moved=(4, 6, 3, 8))
    yield sample((2, 2), (2,), ())
    yield sample((), ())
    yield sample((0, 0), (0,))
    yield sample((2, 0, 0), (2, 0))
    a = matrix((4, 4), dtype, noncontiguous=True).detach().requires_grad_(requires_grad)
    b = make((8,), dtype, requires_grad, low=-1, high=1, noncontiguous=True)
    yield SampleInput(a, (b[::2],), name="noncontiguous")


def _tensorsolve_ref(a, b, dims=None):
    if dims is not None:
        a = np.moveaxis(a, dims, range(a.ndim - len(dims), a.ndim))
    n = b.size
    x = np.linalg.solve(a.reshape(n, n), b.reshape(n)) if n else np.zeros(0, a.dtype)
    return x.reshape(a.shape[b.ndim:])


def _tensorsolve_errors():
    one = ember.ones
    name = ("Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
            "prod(self.shape[:other.ndim])")
    big = one(6, 4, 4, 3, 2)
    yield ErrorInput(SampleInput(big, (one(6, 4),), {"dims": (0, 2)}), RuntimeError,
                     re.escape(f"{name}, but got 48 != 24"))
    yield ErrorInput(SampleInput(one(2, 3, 5), (one(2, 3),)), RuntimeError,
                     re.escape(f"{name}, but got 5 != 6"))
    yield ErrorInput(SampleInput(one(2, 3, 6), (one(6),)), RuntimeError,
                     re.escape(f"{name}, but got 18 != 6"))
    yield ErrorInput(SampleInput(one(3, 6), (one(6),)), RuntimeError,
                     re.escape("shape '[6, 6]' is invalid for input of size 18"))
    yield ErrorInput(SampleInput(big, (one(6, 4),), {"dims": 2}), TypeError,
                     "argument 'dims' must be tuple of ints, not int")
    yield ErrorInput(SampleInput(big, (one(6, 4),), {"dims": (0, 0)}), RuntimeError,
                     re.escape("movedim: repeated dim in `source` ([0, 0])"))
    yield ErrorInput(SampleInput(big, (one(6, 4),), {"dims": (0, 7)}), IndexError,
                     re.escape("Dimension out of range (expected to be in range of [-5, 4], but "
                               "got 7)"))
    yield ErrorInput(SampleInput(one(2, 3, 6), (one(2, 3, dtype=ember.float64),)), RuntimeError,
                     "linalg.solve: Expected A and B to have the same dtype, but found A of type "
                     "Float and B of type Double instead")
    i = ember.int64
    yield ErrorInput(SampleInput(one(2, 3, 6, dtype=i), (one(2, 3, dtype=i),)), RuntimeError,
                     "linalg.solve: Expected a floating point or complex tensor as input. Got "
                     "Long")
    h = ember.float16
    yield ErrorInput(SampleInput(one(2, 3, 6, dtype=h), (one(2, 3, dtype=h),)),
                     NotImplementedError, "\"lu_cpu\" not implemented for 'Half'")
    yield ErrorInput(SampleInput(ember.zeros(2, 3, 6), (one(2, 3),)), RuntimeError, re.escape(
        "torch.linalg.solve: The solver failed because the input matrix is singular."))


OPS = [
    OpInfo("linalg.inv", np.linalg.inv, square_samples(), dtypes=LINALG, gradgrad=True,
           error_inputs=_chain(square_errors("linalg.inv"), _inv_errors("linalg.inv"))),
    OpInfo("inverse", np.linalg.inv, square_samples(), dtypes=LINALG, gradgrad=True,
           error_inputs=_chain(square_errors("linalg.inv"), _inv_errors("linalg.inv"))),
    # where info reports a singular matrix, the inverse is garbage (inf and NaN from LAPACK's
    # triangular solves): only info is compared there
    OpInfo("linalg.inv_ex", _inv_ex_ref, _inv_ex_samples, dtypes=LINALG, gradgrad=True,
           op=_valid_inverse(ember.where, ember.linalg.inv_ex), torch_op=_torch_valid_inverse,
           error_inputs=_chain(square_errors("linalg.inv"),
                               _inv_errors("linalg.inv", "linalg.inv_ex"))),
    OpInfo("linalg.solve", _solve_ref, _solve_samples, dtypes=LINALG, gradgrad=True,
           error_inputs=_solve_errors("linalg.solve")),
    OpInfo("linalg.solve_ex", lambda a, b, **kw: _solve_ref(a, b, check_errors=False, **kw),
           _solve_samples, dtypes=LINALG, gradgrad=True,
           error_inputs=_solve_errors("linalg.solve", "linalg.solve_ex")),
    OpInfo("linalg.solve_triangular", _triangular_ref, _triangular_samples, dtypes=LINALG,
           gradgrad=True, error_inputs=_triangular_errors),
    OpInfo("linalg.lu_factor", _lu_ref, _lu_samples, dtypes=LINALG, gradgrad=True,
           error_inputs=_lu_errors("lu_factor")),
    OpInfo("linalg.lu_factor_ex", _lu_ex_ref, _lu_ex_samples, dtypes=LINALG, gradgrad=True,
           error_inputs=_lu_errors("lu_factor_ex")),
    OpInfo("linalg.lu_solve", _lu_solve_ref, _lu_solve_samples, dtypes=LINALG, gradgrad=True,
           error_inputs=_lu_solve_errors),
    # ember.lu_unpack detaches P, as PyTorch does; LU may have any dtype
    OpInfo("lu_unpack", _lu_unpack_ref, _lu_unpack_samples,
           dtypes=LINALG + LOW + INTS + (ember.bool,), gradgrad=True, op=ember.lu_unpack,
           error_inputs=_lu_unpack_errors),
    OpInfo("linalg.tensorinv", _tensorinv_ref, _tensorinv_samples, dtypes=LINALG,
           gradgrad=True, error_inputs=_tensorinv_errors),
    OpInfo("linalg.tensorsolve", _tensorsolve_ref, _tensorsolve_samples, dtypes=LINALG,
           gradgrad=True, error_inputs=_tensorsolve_errors),
]
