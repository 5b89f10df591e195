"""OpInfo entries for ember.linalg's factorizations (ops/factorizations.py, ops/singular.py),
and for cholesky_solve and cholesky_inverse, which take a Cholesky factor.

Eigenvectors and singular vectors are unique only up to a sign (a phase for complex input),
and QR's factors up to the signs of R's diagonal: those entries compare quantities that do
not depend on that choice (absolute values, reconstructions, normalized factors), for ember
(``op``), PyTorch (``torch_op``) and NumPy (``ref``) alike. Gradients are then those of losses
that do not depend on the choice either, the only ones PyTorch defines.
"""

import re
import warnings

import numpy as np

import ember
from ember.ops._registry import REGISTRY
from tests.ops.opdb.core import ErrorInput, OpInfo, SampleInput, make
from tests.ops.opdb.decompositions import (LINALG, hermitian_input, matrix, square_errors,
                                           square_samples, torch_hermitian_input)

# float32 decompositions by different LAPACK builds agree to a few ulps of the largest value
LOOSE = {ember.float32: (1e-4, 1e-5), ember.complex64: (1e-4, 1e-5)}


def _torch(name):
    import torch
    fn = torch
    for part in name.split("."):
        fn = getattr(fn, part)
    return fn


def _mh(x):
    return x.conj().swapaxes(-1, -2)


# --- cholesky ---------------------------------------------------------------------------------

def _cholesky_ref(a, upper=False, check_errors=None):
    factor = np.linalg.cholesky(a, upper=upper)
    return factor if check_errors is None else (factor, np.zeros(a.shape[:-2], np.int32))


NOT_PD = ember.tensor([[[4., 2], [2, 3]], [[1., 2], [2, 1]]])


def _cholesky_errors(name, check=None):
    def errors():
        yield from square_errors("linalg.cholesky", kernel="cholesky_cpu")()
        kw = {} if check is None else {"check_errors": True}
        yield ErrorInput(SampleInput(NOT_PD, kwargs=kw), RuntimeError, re.escape(
            f"{check or name}: (Batch element 1): The factorization could not be completed "
            f"because the input is not positive-definite (the leading minor of order 2 is not "
            f"positive-definite)."))
        yield ErrorInput(SampleInput(-ember.eye(2), kwargs=kw), RuntimeError, re.escape(
            "not positive-definite (the leading minor of order 1 is not positive-definite)."))
    return errors


def _torch_top_cholesky(a, *args, **kwargs):
    """torch.cholesky without its deprecation warning (the op tested is ember's node, which
    warns in the public function alone)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "torch.cholesky is deprecated")
        return torch_hermitian_input("cholesky")(a, *args, **kwargs)


def _top_cholesky_errors():
    yield ErrorInput(SampleInput(ember.ones(3)), RuntimeError,
                     re.escape("cholesky: The input tensor A must have at least 2 dimensions."))
    yield ErrorInput(SampleInput(ember.ones(2, 3, dtype=ember.int64)), RuntimeError, re.escape(
        "cholesky: A must be batches of square matrices, but they are 2 by 3 matrices"))
    for dtype, name in ((ember.int64, "Long"), (ember.float16, "Half")):
        yield ErrorInput(SampleInput(ember.eye(3, dtype=dtype)), NotImplementedError,
                         f"\"cholesky_cpu\" not implemented for '{name}'")
    yield ErrorInput(SampleInput(NOT_PD), RuntimeError, re.escape(
        "cholesky: (Batch element 1): The factorization could not be completed because the "
        "input is not positive-definite (the leading minor of order 2 is not "
        "positive-definite)."))


def _cholesky_ex_samples(dtype, requires_grad):
    yield from square_samples("spd", kwargs=({}, {"upper": True}))(dtype, requires_grad)
    if not requires_grad:               # what LAPACK leaves of a failed factorization
        yield SampleInput(NOT_PD.to(dtype), name="not positive-definite")
        yield SampleInput(NOT_PD.to(dtype), kwargs={"upper": True}, name="upper, not pd")


def _cholesky_ex_ref(a, upper=False, check_errors=False):
    if a.shape == (2, 2, 2) and a[1, 0, 0] == 1:
        factor = np.array([[[2, 0], [1, np.sqrt(2)]], [[1, 0], [2, -3]]], a.dtype)
        return (_mh(factor) if upper else factor), np.array([0, 2], np.int32)
    return _cholesky_ref(a, upper, False)


# --- triangular_solve (deprecated) ------------------------------------------------------------

def _top_triangular_samples(dtype, requires_grad):
    def pair(sb, sa, **kw):
        a = matrix(sa, dtype, requires_grad, "triangular")
        return SampleInput(make(sb, dtype, requires_grad, low=-1, high=1), (a,), kw,
                           name=f"{list(sb)} {list(sa)} {kw}")
    for upper in (True, False):
        for transpose in (False, True):
            yield pair((3, 2), (3, 3), upper=upper, transpose=transpose)
            yield pair((3, 2), (3, 3), upper=upper, transpose=transpose, unitriangular=True)
        yield pair((2, 3, 1), (3, 3), upper=upper)          # A's copy is broadcast
        yield pair((0, 3, 2), (3, 3), upper=upper)


def _top_triangular_ref(b, a, upper=True, transpose=False, unitriangular=False):
    from tests.ops.opdb.decompositions import _triangular_ref
    system = a.swapaxes(-1, -2) if transpose else a
    x = _triangular_ref(system, b, upper=upper != transpose, unitriangular=unitriangular)
    return x, np.broadcast_to(a, x.shape[:-2] + a.shape[-2:])


def _torch_top_triangular(*args, **kwargs):
    import torch
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "torch.triangular_solve is deprecated")
        return torch.triangular_solve(*args, **kwargs)


def _top_triangular_errors():
    one = ember.ones
    yield ErrorInput(SampleInput(one(3), (ember.eye(3),)), RuntimeError, re.escape(
        "torch.triangular_solve: Expected b to have at least 2 dimensions, but it has 1 "
        "dimensions instead"))
    yield ErrorInput(SampleInput(one(3, 2), (one(2, 3),)), RuntimeError, re.escape(
        "A must be batches of square matrices, but they are 2 by 3 matrices"))


# --- qr ---------------------------------------------------------------------------------------

def _qr_samples(dtype, requires_grad):
    shapes = ((3, 3), (4, 2), (2, 4), (2, 3, 2), (0, 3), (3, 0), (2, 0, 0))
    for mode in ("reduced", "complete", "r"):
        if requires_grad and mode == "r":
            continue                        # not differentiable (PyTorch raises too)
        for shape in shapes:
            if requires_grad and mode == "complete" and shape[-2] > shape[-1]:
                continue
            yield SampleInput(matrix(shape, dtype, requires_grad, "any"), (mode,),
                              name=f"{list(shape)} {mode}")
    yield SampleInput(matrix((3, 2), dtype, requires_grad, "any", noncontiguous=True),
                      name="noncontiguous")


def _normalized_qr(sgn, q, r):
    """(Q D, D^H R) for the phases D of R's diagonal: R's diagonal becomes positive. Only the
    first min(m, n) columns of a complete Q are determined by A."""
    k = min(r.shape[-2:])
    d = sgn(r[..., :k, :k].diagonal(0, -2, -1))
    r = d.conj()[..., :, None] * r[..., :k, :]
    return (r if q.ndim == 1 else q[..., :k] * d[..., None, :]), r


def _qr_op(qr, sgn):
    def call(a, *args, **kwargs):
        q, r = qr(a, *args, **kwargs)
        return _normalized_qr(sgn, q, r)
    return call


def _qr_ref(a, mode="reduced"):
    q, r = (None, np.linalg.qr(a, "r")) if mode == "r" else np.linalg.qr(a, mode)
    sgn = np.sign if a.dtype.kind == "f" else (lambda z: np.where(z == 0, 0, z / np.abs(z)))
    return _normalized_qr(sgn, q if q is not None else np.zeros(0), r)


def _torch_qr(a, *args, **kwargs):
    import torch
    return _qr_op(torch.linalg.qr, torch.sgn)(a, *args, **kwargs)


def _qr_errors():
    yield ErrorInput(SampleInput(ember.ones(3)), RuntimeError, re.escape(
        "linalg.qr: The input tensor A must have at least 2 dimensions."))
    yield ErrorInput(SampleInput(ember.ones(3, 3, dtype=ember.int64)), RuntimeError,
                     "linalg.qr: Expected a floating point or complex tensor as input. Got Long")
    yield ErrorInput(SampleInput(ember.ones(3, 3, dtype=ember.float16)), NotImplementedError,
                     "\"geqrf_cpu\" not implemented for 'Half'")
    yield ErrorInput(SampleInput(ember.ones(3, 3), ("foo",)), RuntimeError, re.escape(
        "qr received unrecognized mode 'foo' but expected one of 'reduced' (default), 'r', or "
        "'complete'"))


# --- eigh, eig --------------------------------------------------------------------------------

EIGH_KWARGS = ({}, {"UPLO": "U"})


def _eigh_op(eigh):
    def call(a, *args, **kwargs):
        w, v = eigh(a, *args, **kwargs)
        return w, v.abs(), (v * w.unsqueeze(-2)) @ v.mH
    return call


def _eigh_ref(a, UPLO="L"):
    w, v = np.linalg.eigh(a, UPLO)
    return w, np.abs(v), (v * w[..., None, :]) @ _mh(v)


def _eigh_errors(name):
    def errors():
        yield from square_errors("linalg.eigh", kernel="linalg_eigh_cpu")()
        yield ErrorInput(SampleInput(ember.eye(2), kwargs={"UPLO": "X"}), RuntimeError,
                         "Expected UPLO argument to be 'L' or 'U', but got X")
    return errors


def _int_eigh(errors):
    """PyTorch's eigh dispatches integer input straight to its kernel."""
    def patched():
        for e in errors():
            if e.sample.input.dtype is ember.int64:
                e = ErrorInput(e.sample, NotImplementedError,
                               "\"linalg_eigh_cpu\" not implemented for 'Long'")
            yield e
    return patched


def _eig_op(eig):
    def call(a):
        w, v = eig(a)
        return w, v.abs()
    return call


def _eig_ref(a):
    w, v = np.linalg.eig(a)
    dtype = np.result_type(a.dtype, np.complex64)
    return w.astype(dtype), np.abs(v)


def _eig_errors(name):
    def errors():
        for e in square_errors(name, kernel="linalg_eig_out_cpu")():
            if e.sample.input.dtype is ember.int64:
                e = ErrorInput(e.sample, RuntimeError, "Unknown Complex ScalarType for Long")
            yield e
    return errors


def _complex_result(dtype, sample):
    return {ember.float32: ember.complex64, ember.float64: ember.complex128}.get(dtype, dtype)


# --- svd --------------------------------------------------------------------------------------

SVD_SHAPES = ((3, 3), (4, 2), (2, 4), (2, 3, 2), (1, 1), (0, 3), (3, 0), (2, 0, 0))


def _svd_samples(kwargs):
    def samples(dtype, requires_grad):
        for kw in kwargs:
            for shape in SVD_SHAPES:
                yield SampleInput(matrix(shape, dtype, requires_grad, "any"), kwargs=dict(kw),
                                  name=f"{list(shape)} {kw}")
        yield SampleInput(matrix((3, 2), dtype, requires_grad, "any", noncontiguous=True),
                          name="noncontiguous")
    return samples


def _svd_parts(u, s, vh, absolute):
    """|U|, S, |V^H| (their first min(m, n) columns / rows) and U S V^H."""
    k = s.shape[-1]
    u, vh = u[..., :k], vh[..., :k, :]
    return absolute(u), s, absolute(vh), (u * s[..., None, :]) @ vh


def _svd_op(svd):
    def call(a, *args, **kwargs):
        u, s, vh = svd(a, *args, **kwargs)
        return _svd_parts(u, s, vh, abs)
    return call


def _svd_ref(a, full_matrices=True):
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return _svd_parts(u, s, vh.astype(a.dtype), np.abs)


def _legacy_op(svd):
    def call(a, *args, **kwargs):
        u, s, v = svd(a, *args, **kwargs)
        if not kwargs.get("compute_uv", True):
            return u, s, v                  # zeros
        return _svd_parts(u, s, v.mH, abs)
    return call


def _legacy_ref(a, some=True, compute_uv=True):
    if not compute_uv:
        m, n = a.shape[-2:]
        return (np.zeros(a.shape[:-2] + (m, m)), np.linalg.svd(a, compute_uv=False),
                np.zeros(a.shape[:-2] + (n, n)))
    return _svd_ref(a, full_matrices=not some)


def _svd_errors(name):
    def errors():
        yield ErrorInput(SampleInput(ember.ones(3, 3, dtype=ember.int64)), RuntimeError,
                         "linalg.svd: Expected a floating point or complex tensor as input. "
                         "Got Long")
        yield ErrorInput(SampleInput(ember.ones(3, 3, dtype=ember.float16)), NotImplementedError,
                         "\"linalg_svd_cpu\" not implemented for 'Half'")
        if name == "svd":
            yield ErrorInput(SampleInput(ember.ones(3)), RuntimeError, re.escape(
                "linalg.svd: input should have at least 2 dimensions, but has 1 dimensions "
                "instead"))
            return
        yield ErrorInput(SampleInput(ember.ones(3)), RuntimeError, re.escape(
            "linalg.svd: The input tensor A must have at least 2 dimensions."))
        # a driver is refused on the CPU, and an unknown one on CUDA too (the CUDA run moves
        # this sample there: tests/gpu/test_linalg_cuda.py checks the two cases apart)
        yield ErrorInput(SampleInput(ember.ones(3, 3), kwargs={"driver": "gesvx"}), RuntimeError,
                         re.escape("torch.linalg.svd: keyword argument `driver=` is only "
                                   "supported on CUDA inputs with cuSOLVER backend.") + "|" +
                         re.escape("torch.linalg.svd: unknown svd driver gesvx in svd_cusolver "
                                   "computation."))
    return errors


# --- cholesky_solve, cholesky_inverse ---------------------------------------------------------

def _factor(shape, dtype, requires_grad, upper=False):
    """The Cholesky factor of a well-conditioned Hermitian positive-definite matrix."""
    factor = ember.linalg.cholesky(matrix(shape, dtype, kind="spd"), upper=upper)
    return factor.detach().requires_grad_(requires_grad)


def read_triangle(fn):
    """``fn`` with its factor argument cut to the triangle it reads, as PyTorch's tests do:
    gradcheck perturbs every entry, and the other triangle has no effect on the result (the
    gradients themselves cover all entries, as PyTorch's)."""
    def call(*args, **kwargs):
        args = list(args)
        at = 1 if len(args) > 1 and fn.__name__.endswith("solve") else 0
        upper = (args[at + 1] if len(args) > at + 1 else kwargs.get("upper", False))
        factor = args[at]
        if factor.ndim >= 2 and (factor.is_floating_point() or factor.is_complex()):
            args[at] = factor.triu() if upper else factor.tril()
        return fn(*args, **kwargs)
    call.__name__ = fn.__name__
    return call


def _cholesky_solve_samples(dtype, requires_grad):
    def pair(sb, sl, upper=False, **kw):
        b = make(sb, dtype, requires_grad, low=-1, high=1)
        kw = {"upper": True} if upper else kw
        return SampleInput(b, (_factor(sl, dtype, requires_grad, upper),), kw,
                           name=f"{list(sb)} {list(sl)} {kw}")
    for upper in (False, True):
        yield pair((3, 2), (3, 3), upper)
        yield pair((2, 3, 1), (2, 3, 3), upper)
        yield pair((4, 1, 3, 2), (2, 3, 3), upper)          # batch dims broadcast
        yield pair((3, 2), (2, 3, 3), upper)
        yield pair((0, 2), (0, 0), upper)
        yield pair((2, 3, 0), (3, 3), upper)
    yield SampleInput(make((3, 2), dtype, requires_grad, low=-1, high=1),
                      (_factor((3, 3), dtype, requires_grad, True), True),
                      name="positional upper")
    b = make((2, 3), dtype, low=-1, high=1).mT.detach()
    yield SampleInput(b.requires_grad_(requires_grad), (_factor((3, 3), dtype, requires_grad),),
                      name="noncontiguous")


def _cholesky_solve_ref(b, factor, upper=False):
    a = _mh(factor) @ factor if upper else factor @ _mh(factor)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a, b = np.broadcast_to(a, batch + a.shape[-2:]), np.broadcast_to(b, batch + b.shape[-2:])
    return np.linalg.solve(a, b) if b.size else np.zeros(b.shape, b.dtype)


def _cholesky_solve_errors():
    one, eye = ember.ones, ember.eye
    yield ErrorInput(SampleInput(one(3), (eye(3),)), RuntimeError, re.escape(
        "b should have at least 2 dimensions, but has 1 dimensions instead"))
    yield ErrorInput(SampleInput(one(3, 2), (one(3),)), RuntimeError, re.escape(
        "u should have at least 2 dimensions, but has 1 dimensions instead"))
    yield ErrorInput(SampleInput(one(3, 2, dtype=ember.float64), (eye(3),)), RuntimeError,
                     re.escape("Expected b and A to have the same dtype, but found b of type "
                               "Double and A of type Float instead."))
    yield ErrorInput(SampleInput(one(3, 2), (eye(3, dtype=ember.complex64),)), RuntimeError,
                     "found b of type Float and A of type ComplexFloat instead")
    yield ErrorInput(SampleInput(one(3, 2), (one(2, 3),)), RuntimeError,
                     "^A must be batches of square matrices, but they are 2 by 3 matrices")
    yield ErrorInput(SampleInput(one(4, 2), (eye(3),)), RuntimeError, re.escape(
        "Incompatible matrix sizes for cholesky_solve: each A matrix is 3 by 3 but each b "
        "matrix is 4 by 2"))
    yield ErrorInput(SampleInput(one(2, 3, 2), (eye(3).expand(3, 3, 3),)), RuntimeError,
                     re.escape("The size of tensor a (2) must match the size of tensor b (3) "
                               "at non-singleton dimension 0"))
    for dtype, name in ((ember.int64, "Long"), (ember.float16, "Half"), (ember.bool, "Bool")):
        yield ErrorInput(SampleInput(one(3, 2, dtype=dtype), (eye(3, dtype=dtype),)),
                         NotImplementedError,
                         f"\"cholesky_solve_cpu\" not implemented for '{name}'")


def _cholesky_inverse_samples(dtype, requires_grad):
    for upper in (False, True):
        kw = {"upper": True} if upper else {}
        for shape in ((3, 3), (2, 3, 3), (1, 1), (0, 0), (2, 0, 0)):
            yield SampleInput(_factor(shape, dtype, requires_grad, upper), kwargs=kw,
                              name=f"{list(shape)} {kw}")
    factor = _factor((3, 3), dtype, False)
    yield SampleInput(factor.mT.contiguous().mT.requires_grad_(requires_grad),
                      name="noncontiguous")
    yield SampleInput(_factor((3, 3), dtype, requires_grad, True), (True,), name="positional")


def _cholesky_inverse_ref(factor, upper=False):
    a = _mh(factor) @ factor if upper else factor @ _mh(factor)
    return np.linalg.inv(a) if a.size else a.copy()


def _cholesky_inverse_errors():
    name = "cholesky_inverse"
    yield ErrorInput(SampleInput(ember.ones(3)), RuntimeError, re.escape(
        f"{name}: The input tensor A must have at least 2 dimensions."))
    yield ErrorInput(SampleInput(ember.ones(2, 3)), RuntimeError, re.escape(
        f"{name}: A must be batches of square matrices, but they are 2 by 3 matrices"))
    for dtype, kind in ((ember.int64, "Long"), (ember.float16, "Half"), (ember.bool, "Bool")):
        yield ErrorInput(SampleInput(ember.ones(3, 3, dtype=dtype)), NotImplementedError,
                         f"\"cholesky_inverse_out_cpu\" not implemented for '{kind}'")
    singular = ember.stack([ember.eye(3), ember.tensor([1., 0, 1]).diag()])
    yield ErrorInput(SampleInput(singular), RuntimeError, re.escape(
        f"{name}: (Batch element 1): The diagonal element 2 is zero, the inversion could not "
        f"be completed because the input matrix is singular."))
    yield ErrorInput(SampleInput(ember.tensor([1., 1, 0]).diag(), kwargs={"upper": True}),
                     RuntimeError, re.escape(f"{name}: The diagonal element 3 is zero"))


def _torch_reading_triangle(name):
    def call(*args, **kwargs):
        return read_triangle(_torch(name))(*args, **kwargs)
    return call


def _real_result(dtype, sample):
    return {ember.complex64: ember.float32, ember.complex128: ember.float64}.get(dtype, dtype)


def _legacy_result(dtype, sample):
    return dtype if sample.kwargs.get("compute_uv", True) is False else \
        _real_result(dtype, sample)


OPS = [
    OpInfo("linalg.cholesky", _cholesky_ref, square_samples("spd", kwargs=({}, {"upper": True})),
           dtypes=LINALG, gradgrad=True, op=hermitian_input(ember.linalg.cholesky),
           torch_op=torch_hermitian_input("linalg.cholesky"),
           error_inputs=_cholesky_errors("linalg.cholesky")),
    # the deprecated top-level op: its own node (CholeskyBackward0) and messages
    OpInfo("cholesky", _cholesky_ref, square_samples("spd", kwargs=({}, {"upper": True})),
           dtypes=LINALG, gradgrad=True, op=hermitian_input(REGISTRY["cholesky"].function),
           torch_op=_torch_top_cholesky, error_inputs=_top_cholesky_errors),
    OpInfo("triangular_solve", _top_triangular_ref, _top_triangular_samples, dtypes=LINALG,
           gradgrad=True, op=REGISTRY["triangular_solve"].function,
           torch_op=_torch_top_triangular, error_inputs=_top_triangular_errors),
    OpInfo("linalg.cholesky_ex", _cholesky_ex_ref, _cholesky_ex_samples, dtypes=LINALG,
           gradgrad=True, op=hermitian_input(ember.linalg.cholesky_ex),
           torch_op=torch_hermitian_input("linalg.cholesky_ex"),
           error_inputs=_cholesky_errors("linalg.cholesky", "linalg.cholesky_ex")),
    OpInfo("linalg.qr", _qr_ref, _qr_samples, dtypes=LINALG, gradgrad=True,
           op=_qr_op(ember.linalg.qr, ember.sgn), torch_op=_torch_qr, parity_tol=LOOSE,
           error_inputs=_qr_errors),
    OpInfo("linalg.eigh", _eigh_ref, square_samples("hermitian", kwargs=EIGH_KWARGS),
           dtypes=LINALG, result_dtype=_real_result, gradgrad=True,
           op=hermitian_input(_eigh_op(ember.linalg.eigh)),
           torch_op=_eigh_op(torch_hermitian_input("linalg.eigh")), parity_tol=LOOSE,
           error_inputs=_int_eigh(_eigh_errors("linalg.eigh"))),
    OpInfo("linalg.eigvalsh", lambda a, UPLO="L": np.linalg.eigvalsh(a, UPLO),
           square_samples("hermitian", kwargs=EIGH_KWARGS), dtypes=LINALG,
           result_dtype=_real_result, gradgrad=True, op=hermitian_input(ember.linalg.eigvalsh),
           torch_op=torch_hermitian_input("linalg.eigvalsh"), parity_tol=LOOSE,
           error_inputs=_int_eigh(_eigh_errors("linalg.eigvalsh"))),
    OpInfo("linalg.eig", _eig_ref, square_samples("any"), dtypes=LINALG,
           result_dtype=_complex_result, gradgrad=True, op=_eig_op(ember.linalg.eig),
           torch_op=lambda a: _eig_op(_torch("linalg.eig"))(a), parity_tol=LOOSE,
           error_inputs=_eig_errors("linalg.eig")),
    OpInfo("linalg.eigvals", lambda a: _eig_ref(a)[0], square_samples("any"), dtypes=LINALG,
           result_dtype=_complex_result, gradgrad=True, parity_tol=LOOSE,
           error_inputs=_eig_errors("linalg.eigvals")),
    OpInfo("linalg.svd", _svd_ref, _svd_samples(({}, {"full_matrices": False})), dtypes=LINALG,
           result_dtype=_real_result, gradgrad=True, op=_svd_op(ember.linalg.svd),
           torch_op=lambda a, *args, **kw: _svd_op(_torch("linalg.svd"))(a, *args, **kw),
           parity_tol=LOOSE, error_inputs=_svd_errors("linalg.svd")),
    OpInfo("linalg.svdvals", lambda a: np.linalg.svd(a, compute_uv=False),
           _svd_samples(({},)), dtypes=LINALG, result_dtype=_real_result, gradgrad=True,
           parity_tol=LOOSE, error_inputs=_svd_errors("linalg.svdvals")),
    # ember.svd: without compute_uv, U and V are zeros that need no gradient, as in PyTorch
    OpInfo("svd", _legacy_ref,
           _svd_samples(({}, {"some": False}, {"compute_uv": False})), dtypes=LINALG,
           result_dtype=_legacy_result, gradgrad=True, op=_legacy_op(ember.svd),
           torch_op=lambda a, *args, **kw: _legacy_op(_torch("svd"))(a, *args, **kw),
           parity_tol=LOOSE, error_inputs=_svd_errors("svd")),
    # the factor's other triangle is not read: gradcheck sees the one that is (read_triangle)
    OpInfo("cholesky_solve", _cholesky_solve_ref, _cholesky_solve_samples, dtypes=LINALG,
           gradgrad=True, op=read_triangle(ember.cholesky_solve),
           torch_op=_torch_reading_triangle("cholesky_solve"),
           error_inputs=_cholesky_solve_errors),
    OpInfo("cholesky_inverse", _cholesky_inverse_ref, _cholesky_inverse_samples, dtypes=LINALG,
           gradgrad=True, op=read_triangle(ember.cholesky_inverse),
           torch_op=_torch_reading_triangle("cholesky_inverse"),
           error_inputs=_cholesky_inverse_errors),
]
