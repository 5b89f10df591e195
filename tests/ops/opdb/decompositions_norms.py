"""OpInfo entries for norms and least squares (ops/norms.py, ops/least_squares.py):
linalg.vector_norm, matrix_norm, norm, cond, pinv, lstsq, matrix_rank and pinverse."""

import re

import numpy as np

import ember
from tests.ops.opdb.core import COMPLEX, FLOATS, LOW, ErrorInput, OpInfo, SampleInput, make
from tests.ops.opdb.decompositions import LINALG, matrix

INF = float("inf")
MATRIX_ORDERS = ("fro", "nuc", 2, -2, 1, -1, INF, -INF)
# float32 singular values by different LAPACK builds agree to a few ulps
LOOSE = {ember.float32: (1e-4, 1e-5), ember.complex64: (1e-4, 1e-5)}


def _real_result(dtype, sample):
    chosen = sample.kwargs.get("dtype") if sample is not None else None
    return (chosen or dtype).to_real()


# --- vector_norm ------------------------------------------------------------------------------

def _vector_samples(dtype, requires_grad):
    for ord in (2, 1, INF, -INF, 0, 3, 0.5):
        yield SampleInput(make((2, 3, 4), dtype, requires_grad, exclude_zero=True), (ord,),
                          name=f"ord={ord}")
        yield SampleInput(make((2, 3, 4), dtype, requires_grad, exclude_zero=True), (ord,),
                          {"dim": (0, 2), "keepdim": True}, name=f"ord={ord} dims")
    yield SampleInput(make((3,), dtype, requires_grad, exclude_zero=True), (2, 0),
                      name="vector")
    yield SampleInput(make((), dtype, requires_grad, exclude_zero=True), name="0-dim")
    yield SampleInput(make((0, 3), dtype, requires_grad), kwargs={"dim": 0}, name="empty")
    yield SampleInput(make((3, 4), dtype, requires_grad, noncontiguous=True), name="noncontig")
    wider = ember.complex128 if dtype.is_complex else ember.float64
    yield SampleInput(make((2, 3), dtype, requires_grad), kwargs={"dtype": wider},
                      name="dtype")


def _vector_ref(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    a = np.abs(np.asarray(x, dtype=np.complex128 if np.iscomplexobj(x) else np.float64))
    axis = tuple(range(a.ndim)) if dim is None else dim
    if ord == INF:
        return a.max(axis=axis, keepdims=keepdim)
    if ord == -INF:
        return a.min(axis=axis, keepdims=keepdim)
    if ord == 0:
        return (a != 0).sum(axis=axis, keepdims=keepdim).astype(float)
    return (a ** ord).sum(axis=axis, keepdims=keepdim) ** (1 / ord)


def _vector_errors():
    yield ErrorInput(SampleInput(ember.ones(3, dtype=ember.int64)), RuntimeError,
                     "linalg.vector_norm: Expected a floating point or complex tensor as input. "
                     "Got Long")
    yield ErrorInput(SampleInput(ember.ones(3), ("fro",)), TypeError,
                     r"argument 'ord' \(position 2\) must be Number, not str")
    yield ErrorInput(SampleInput(ember.ones(3), kwargs={"dim": 3}), IndexError,
                     re.escape("Dimension out of range (expected to be in range of [-1, 0], but "
                               "got 3)"))
    yield ErrorInput(SampleInput(ember.ones(0, 3), (INF,)), RuntimeError,
                     "cannot compute the inf norm on an empty tensor")


# --- matrix_norm ------------------------------------------------------------------------------

def _matrix_samples(dtype, requires_grad):
    low = dtype in LOW
    for ord in MATRIX_ORDERS:
        if low and ord in ("nuc", 2, -2):
            continue                            # PyTorch has no half-precision SVD
        yield SampleInput(make((3, 4), dtype, requires_grad), (ord,), name=f"ord={ord}")
        yield SampleInput(make((2, 3, 4), dtype, requires_grad), (ord, (2, 0), True),
                          name=f"ord={ord} dims keepdim")
        # PyTorch's largest-value norms of no values are zeros that need no gradient
        if ord in ("fro", "nuc") or (ord in (2, 1, INF) and not requires_grad):
            yield SampleInput(make((2, 0, 0), dtype, requires_grad), (ord,),
                              name=f"ord={ord} empty")
    yield SampleInput(make((4, 3), dtype, requires_grad, noncontiguous=True), name="noncontig")
    if not low:
        wider = ember.complex128 if dtype.is_complex else ember.float64
        for ord in ("fro", "nuc", 1):
            yield SampleInput(make((2, 3), dtype, requires_grad), (ord,), {"dtype": wider},
                              name=f"ord={ord} dtype")


def _matrix_ref(x, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    wide = np.asarray(x, dtype=np.complex128 if np.iscomplexobj(x) else np.float64)
    if wide.size == 0:
        shape = [1 if d % x.ndim in [e % x.ndim for e in dim] else s
                 for d, s in enumerate(x.shape)]
        out = np.zeros(shape)
        return out if keepdim else out.reshape([s for d, s in enumerate(x.shape)
                                                if d % x.ndim not in [e % x.ndim for e in dim]])
    return np.linalg.norm(wide, ord, axis=tuple(dim), keepdims=keepdim)


def _matrix_errors():
    one = ember.ones
    name = "linalg.matrix_norm"
    yield ErrorInput(SampleInput(one(3)), RuntimeError, re.escape(
        f"{name}: The input tensor A must have at least 2 dimensions."))
    yield ErrorInput(SampleInput(one(2, 2, 2), ("fro", (0, 1, 2))), RuntimeError,
                     f"{name}: dim must be a 2-tuple. Got 0 1 2")
    yield ErrorInput(SampleInput(one(2, 2), ("fro", (0, -2))), RuntimeError,
                     re.escape(f"{name}: dims must be different. Got (0, 0)"))
    yield ErrorInput(SampleInput(one(2, 2), ("fro", (0, 2))), IndexError,
                     re.escape("Dimension out of range (expected to be in range of [-2, 1], but "
                               "got 2)"))
    yield ErrorInput(SampleInput(one(2, 2), (3,)), RuntimeError, f"{name}: Order 3 not supported")
    yield ErrorInput(SampleInput(one(2, 2), ("foo",)), RuntimeError,
                     f"{name}: Order foo not supported")
    yield ErrorInput(SampleInput(one(2, 2, dtype=ember.int64)), RuntimeError,
                     f"{name}: Expected a floating point or complex tensor as input. Got Long")
    yield ErrorInput(SampleInput(one(2, 2, dtype=ember.float16), ("nuc",)), RuntimeError,
                     f"{name}: Low precision dtypes not supported. Got Half")
    yield ErrorInput(SampleInput(one(2, 2, dtype=ember.float64), kwargs={"dtype": ember.float32}),
                     RuntimeError, re.escape(f"{name}: the dtype of the input (Double) should "
                                             f"be convertible without narrowing to the "
                                             f"specified dtype (Float)"))
    yield ErrorInput(SampleInput(one(2, 2), kwargs={"dtype": ember.int64}), RuntimeError,
                     f"{name}: dtype should be floating point or complex, but got Long")
    yield ErrorInput(SampleInput(one(2, 2), (1,), kwargs={"dtype": ember.complex128}),
                     RuntimeError, f"{name}: dtype should be real for real inputs, but got "
                                   f"ComplexDouble")
    yield ErrorInput(SampleInput(one(0, 3), (-2,)), IndexError,
                     "amin\\(\\): Expected reduction dim -1 to have non-zero size.")
    yield ErrorInput(SampleInput(one(2, 0, 0), (-INF,)), IndexError,
                     "amin\\(\\): Expected reduction dim 1 to have non-zero size.")


# --- linalg.norm ------------------------------------------------------------------------------

def _norm_samples(dtype, requires_grad):
    def sample(shape, *args, **kwargs):
        return SampleInput(make(shape, dtype, requires_grad, exclude_zero=True), args, kwargs,
                           name=f"{list(shape)} {args} {kwargs}")
    yield sample((2, 3, 4))
    yield sample((3, 4), 1)
    yield sample((3, 4), "nuc")
    yield sample((4,), INF)
    yield sample((2, 3, 4), None, (0, 2), True)
    yield sample((2, 3, 4), 3, 1)
    yield sample((2, 3, 4), -1, (1, 2))
    yield sample((2, 3, 4), "fro", (2, 1))
    yield sample((0, 3), None, 1)


def _norm_ref(x, ord=None, dim=None, keepdim=False):
    wide = np.asarray(x, dtype=np.complex128 if np.iscomplexobj(x) else np.float64)
    if dim is None and ord is None:
        return np.linalg.norm(wide.reshape(-1))
    return np.linalg.norm(wide, ord, axis=dim, keepdims=keepdim)


def _norm_errors():
    one = ember.ones
    yield ErrorInput(SampleInput(one(2, 3, 3), ("fro",)), RuntimeError, re.escape(
        "linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got 3D."))
    yield ErrorInput(SampleInput(one(2, 3, 3), (2, (0, 1, 2))), RuntimeError, re.escape(
        "linalg.norm: If dim is specified, it must be of length 1 or 2. Got [0, 1, 2]"))
    yield ErrorInput(SampleInput(one(3), ("fro",)), RuntimeError, re.escape(
        "linalg.matrix_norm: The input tensor A must have at least 2 dimensions."))
    yield ErrorInput(SampleInput(one(2, 3, 3), ("fro", 1)), RuntimeError,
                     "linalg.matrix_norm: dim must be a 2-tuple. Got 1")
    yield ErrorInput(SampleInput(one(3, dtype=ember.int64)), RuntimeError,
                     "linalg.vector_norm: Expected a floating point or complex tensor")
    yield ErrorInput(SampleInput(one(3, 3, dtype=ember.int64), ("fro",)), RuntimeError,
                     "linalg.matrix_norm: Expected a floating point or complex tensor")


# --- cond -------------------------------------------------------------------------------------

def _cond_samples(dtype, requires_grad):
    for p in (None, 2, -2, "fro", "nuc", 1, -1, INF, -INF):
        if requires_grad and p not in (None, 2, -2, "nuc"):
            # PyTorch 2.13 cannot differentiate these (its backward trips over an in-place
            # change): test_linalg_decompositions.py gradchecks ember's
            continue
        yield SampleInput(matrix((3, 3), dtype, requires_grad), (p,), name=f"p={p}")
        yield SampleInput(matrix((2, 2, 2), dtype, requires_grad), (p,), name=f"p={p} batch")
    for shape in ((4, 2), (2, 4)):
        yield SampleInput(matrix(shape, dtype, requires_grad, "any"), name=f"{list(shape)}")
    if not requires_grad:                   # PyTorch's cond of nothing needs no gradient
        for p in (None, "fro", 1):
            yield SampleInput(matrix((0, 0), dtype), (p,), name=f"empty p={p}")
        singular = ember.stack([ember.eye(2), ember.ones(2, 2)]).to(dtype)
        # (not 'nuc': PyTorch's sum(s) * sum(1 / s) is inf there only when the SVD's smallest
        # value comes out exactly 0, which LAPACK's rounding decides)
        for p in (None, 1):
            yield SampleInput(singular, (p,), name=f"singular p={p}")


def _cond_ref(a, p=None):
    if a.size == 0:
        return np.zeros(a.shape[:-2])
    if p in (None, 2, -2):
        with np.errstate(all="ignore"):
            return np.linalg.cond(a, p)
    if p == "nuc":                  # as PyTorch: sum(s) * sum(1 / s), no inverse
        s = np.linalg.svd(a, compute_uv=False)
        with np.errstate(all="ignore"):
            return s.sum(-1) * (1 / s).sum(-1)
    flat = a.reshape((-1,) + a.shape[-2:])
    out = []
    for m in flat:
        try:
            out.append(np.linalg.norm(m, p) * np.linalg.norm(np.linalg.inv(m), p))
        except np.linalg.LinAlgError:
            out.append(np.inf)              # singular
    return np.array(out).reshape(a.shape[:-2])


def _cond_errors():
    one = ember.ones
    yield ErrorInput(SampleInput(one(3)), RuntimeError, re.escape(
        "linalg.cond: The input tensor must have at least 2 dimensions."))
    yield ErrorInput(SampleInput(one(3, 3), (3,)), RuntimeError,
                     "linalg.cond got an invalid norm type: 3")
    yield ErrorInput(SampleInput(one(3, 3), ("foo",)), RuntimeError,
                     "linalg.cond got an invalid norm type: foo")
    yield ErrorInput(SampleInput(one(2, 3), (1,)), RuntimeError, re.escape(
        "linalg.cond(ord=1): A must be batches of square matrices, but they are 2 by 3 matrices"))
    yield ErrorInput(SampleInput(one(0, 3), ("fro",)), RuntimeError, re.escape(
        "linalg.cond(ord=fro): A must be batches of square matrices, but they are 0 by 3"))
    yield ErrorInput(SampleInput(one(3, 3, dtype=ember.int64)), RuntimeError,
                     "linalg.svd: Expected a floating point or complex tensor as input. Got Long")
    yield ErrorInput(SampleInput(one(3, 3, dtype=ember.int64), (1,)), RuntimeError,
                     "linalg.inv: Expected a floating point or complex tensor as input. Got Long")
    yield ErrorInput(SampleInput(one(3, 3, dtype=ember.float16)), NotImplementedError,
                     "\"linalg_svd_cpu\" not implemented for 'Half'")


# --- pinv, matrix_rank ------------------------------------------------------------------------

DECAYING = np.diag([1.0, 1e-3, 1e-9])       # singular values around every threshold


def _pinv_samples(top):
    """Samples for linalg.pinv (or, ``top``, the top-level pinverse: rcond only)."""
    def samples(dtype, requires_grad):
        for shape in ((3, 3), (4, 2), (2, 4), (2, 3, 2), (0, 0), (3, 0), (2, 0, 3)):
            yield SampleInput(matrix(shape, dtype, requires_grad, "any"), name=f"{list(shape)}")
        yield SampleInput(matrix((2, 3), dtype, requires_grad, "any", noncontiguous=True),
                          name="noncontiguous")
        d = ember.tensor(DECAYING, dtype=dtype)
        if top:
            yield SampleInput(d, (1e-2,), name="rcond")
            return
        if requires_grad:
            return          # hermitian=True reads one triangle; thresholds are not smooth
        yield SampleInput(matrix((3, 3), dtype, kind="hermitian"), kwargs={"hermitian": True},
                          name="hermitian")
        tensor_atol = ember.tensor([1e-2, 1e-4], dtype=d.dtype.to_real())
        for kw in ({}, {"rtol": 1e-4}, {"atol": 1e-2}, {"atol": 1e-5, "rtol": 1e-2},
                   {"atol": tensor_atol}, {"hermitian": True}):
            x = d.expand(2, 3, 3) if kw.get("atol") is tensor_atol else d
            yield SampleInput(x, kwargs=kw, name=f"thresholds {kw}")
        yield SampleInput(d, (1e-2,), name="rcond")
    return samples


def _threshold(s, m, n, atol, rtol, dtype):
    if isinstance(atol, np.ndarray):
        atol = atol[..., None]
    if rtol is None:
        rtol = 0.0 if atol is not None and np.all(np.asarray(atol) > 0) else \
            np.finfo(np.empty(0, dtype).real.dtype).eps * max(m, n)
    tol = rtol * s.max(axis=-1, keepdims=True)
    return tol if atol is None else np.maximum(atol, tol)


def _pinv_ref(a, rcond=None, hermitian=False, *, atol=None, rtol=None):
    m, n = a.shape[-2:]
    if a.size == 0:
        return np.zeros(a.shape[:-2] + (n, m), a.dtype)
    if hermitian:                           # eigh reads the lower triangle
        w, v = np.linalg.eigh(a)
        u, s, vh = v, w, _mh(v)
    else:
        u, s, vh = np.linalg.svd(a, full_matrices=False)
    keep = np.abs(s) > _threshold(np.abs(s), m, n, atol, rtol if rcond is None else rcond,
                                  a.dtype)
    inverse = np.where(keep, 1 / np.where(keep, s, 1), 0)
    return (_mh(vh) * inverse[..., None, :]) @ _mh(u)


def _mh(x):
    return x.conj().swapaxes(-1, -2)


def _pinv_errors(name):
    def errors():
        yield ErrorInput(SampleInput(ember.ones(3)), RuntimeError, re.escape(
            "linalg.pinv(Float{[3]}): expected a tensor with 2 or more dimensions of float, "
            "double, cfloat or cdouble types"))
        yield ErrorInput(SampleInput(ember.ones(3, 3, dtype=ember.int64)), RuntimeError,
                         re.escape("linalg.pinv(Long{[3, 3]}): expected a tensor"))
    return errors


def _rank_samples(dtype, requires_grad):
    def thin(shape, k):
        x, y = make(shape[:-1] + (k,), dtype), make(shape[:-2] + (k, shape[-1]), dtype)
        return x @ y
    yield SampleInput(thin((4, 4), 2), name="rank 2")
    yield SampleInput(thin((2, 5, 3), 1), name="rank 1 batch")
    yield SampleInput(thin((3, 5), 3), name="full rank")
    yield SampleInput(thin((4, 4), 2), kwargs={"hermitian": True}, name="not hermitian")
    yield SampleInput(matrix((3, 3), dtype, kind="hermitian"), kwargs={"hermitian": True},
                      name="hermitian")
    yield SampleInput(make((0, 3), dtype), name="empty")
    d = ember.tensor(DECAYING, dtype=dtype)
    for args, kw in (((), {}), ((1e-2,), {}), ((), {"atol": 1e-2}), ((), {"rtol": 1e-4}),
                     ((), {"atol": ember.tensor([1e-2, 1e-4], dtype=d.dtype.to_real())})):
        x = d.expand(2, 3, 3) if isinstance(kw.get("atol"), ember.Tensor) else d
        yield SampleInput(x, args, kw, name=f"thresholds {args} {kw}")


def _rank_ref(a, tol=None, hermitian=False, *, atol=None, rtol=None):
    if tol is not None:
        atol, rtol = tol, 0.0
    m, n = a.shape[-2:]
    if a.size == 0:
        return np.zeros(a.shape[:-2], np.int64)
    if hermitian:
        a = np.tril(a) + _mh(np.tril(a, -1))        # eigvalsh reads the lower triangle
        s = np.abs(np.linalg.eigvalsh(a))
    else:
        s = np.linalg.svd(a, compute_uv=False)
    return (s > _threshold(s, m, n, atol, rtol, a.dtype)).sum(-1)


def _rank_errors():
    yield ErrorInput(SampleInput(ember.ones(3)), RuntimeError, re.escape(
        "torch.linalg.matrix_rank: The input tensor input must have at least 2 dimensions."))
    yield ErrorInput(SampleInput(ember.ones(3, 3, dtype=ember.int64)), RuntimeError,
                     "This function doesn't handle types other than float and double")


# --- lstsq ------------------------------------------------------------------------------------

def _lstsq_samples(dtype, requires_grad):
    def sample(sa, sb, *args, **kw):
        return SampleInput(matrix(sa, dtype, requires_grad, "any"),
                           (make(sb, dtype, requires_grad, low=-1, high=1),) + args, kw,
                           name=f"{list(sa)} {list(sb)} {args} {kw}")
    for driver in (None, "gels", "gelsy", "gelsd", "gelss"):
        if requires_grad and driver in ("gelsd", "gelss"):
            continue            # they return singular values, which need no gradient
        yield sample((5, 3), (5, 2), driver=driver)
        yield sample((2, 5, 3), (1, 5, 2), driver=driver)
        yield sample((5, 3), (5,), driver=driver)
        yield sample((2, 5, 3), (2, 5), driver=driver)
        if driver != "gels":
            yield sample((3, 5), (3, 2), driver=driver)
    yield sample((0, 3), (0, 2))
    yield sample((3, 0), (3, 2))
    yield sample((2, 0, 0), (2, 0, 1))
    yield SampleInput(matrix((4, 3), dtype, requires_grad, "any", noncontiguous=True),
                      (make((4, 2), dtype, requires_grad, low=-1, high=1),), name="noncontig")
    if not requires_grad:
        # rank-deficient input only with gelsd and gelss: PyTorch 2.13's gelsy sometimes
        # keeps the wrong columns (from run to run: its initial column pivots look
        # uninitialized), e.g. inverting the 1e-9 of diag(1, 1e-3, 1e-9) with rcond=1e-2
        x = make((5, 2), dtype, low=-1, high=1)
        deficient = ember.cat([x, x[:, :1]], 1)         # rank 2: the minimum-norm solution
        for driver in ("gelsd", "gelss"):
            yield SampleInput(deficient, (make((5, 2), dtype),), {"driver": driver},
                              name=f"rank deficient {driver}")
            yield SampleInput(ember.tensor(DECAYING, dtype=dtype),
                              (ember.ones(3, 1, dtype=dtype), 1e-2), {"driver": driver},
                              name=f"rcond {driver}")


def _lstsq_ref(a, b, rcond=None, *, driver=None):
    driver = driver or "gelsy"
    m, n = a.shape[-2:]
    vector = b.ndim == a.ndim - 1
    b2 = b[..., None] if vector else b
    batch = np.broadcast_shapes(a.shape[:-2], b2.shape[:-2])
    a, b2 = np.broadcast_to(a, batch + a.shape[-2:]), np.broadcast_to(b2, batch + b2.shape[-2:])
    real = np.empty(0, a.dtype).real.dtype
    s = np.linalg.svd(a, compute_uv=False) if a.size else np.zeros(batch + (min(m, n),), real)
    rtol = np.finfo(real).eps * max(m, n) if rcond is None else rcond
    rank = (s > _threshold(s, m, n, None, rtol, a.dtype)).sum(-1) if s.size else \
        np.zeros(batch, np.int64)
    x = _pinv_ref(a, rtol=rtol) @ b2 if a.size else np.zeros(batch + (n, b2.shape[-1]), a.dtype)
    if m > n and driver != "gelsy" and (driver == "gels" or np.all(rank == n)):
        residuals = (np.abs(a @ x - b2) ** 2).sum(-2)
    else:
        residuals = np.zeros(0)
    values = s if driver in ("gelsd", "gelss") else np.zeros(0)
    return (x[..., 0] if vector else x), residuals, \
        (np.zeros(0, np.int64) if driver == "gels" else rank), values


def _lstsq_errors():
    one = ember.ones
    name = "torch.linalg.lstsq"
    yield ErrorInput(SampleInput(one(3), (one(3),)), RuntimeError,
                     f"{name}: input must have at least 2 dimensions.")
    yield ErrorInput(SampleInput(one(3, 2), (one(()),)), RuntimeError,
                     f"{name}: other must have at least 1 dimension.")
    yield ErrorInput(SampleInput(one(3, 2), (one(3, 1, dtype=ember.float64),)), RuntimeError,
                     f"{name}: Expected input and other to have the same dtype, but got "
                     f"input's dtype Float and other's dtype Double")
    yield ErrorInput(SampleInput(one(3, 2), (one(4, 3, 1),)), RuntimeError, re.escape(
        f"{name}: input.dim() must be greater or equal to other.dim() and (input.dim() - "
        f"other.dim()) <= 1"))
    yield ErrorInput(SampleInput(one(3, 2), (one(4, 1),)), RuntimeError, re.escape(
        f"{name}: input.size(-2) should match other.size(-2)"))
    yield ErrorInput(SampleInput(one(3, 2), (one(4),)), RuntimeError, re.escape(
        f"{name}: input.size(-2) should match other.size(-1)"))
    # a batch of vectors must be shaped as input without its last dim: else other is a matrix
    yield ErrorInput(SampleInput(one(2, 5, 3), (one(1, 5),)), RuntimeError, re.escape(
        f"{name}: input.size(-2) should match other.size(-2)"))
    yield ErrorInput(SampleInput(one(4, 5, 3), (one(5, 2),)), RuntimeError, re.escape(
        "The size of tensor a (4) must match the size of tensor b (5) at non-singleton "
        "dimension 0"))
    yield ErrorInput(SampleInput(one(3, 2), (one(3, 1),), {"driver": "foo"}), RuntimeError,
                     re.escape(f"{name}: parameter `driver` should be one of (gels, gelsy, "
                               f"gelsd, gelss)"))
    i = one(3, 2, dtype=ember.int64)
    yield ErrorInput(SampleInput(i, (i,)), RuntimeError,
                     "This function doesn't handle types other than float and double")


OPS = [
    OpInfo("linalg.vector_norm", _vector_ref, _vector_samples, dtypes=FLOATS + LOW + COMPLEX,
           result_dtype=_real_result, gradgrad=True, error_inputs=_vector_errors),
    OpInfo("linalg.matrix_norm", _matrix_ref, _matrix_samples, dtypes=FLOATS + LOW + COMPLEX,
           result_dtype=_real_result, gradgrad=True, parity_tol=LOOSE,
           error_inputs=_matrix_errors),
    OpInfo("linalg.norm", _norm_ref, _norm_samples, dtypes=LINALG, result_dtype=_real_result,
           gradgrad=True, parity_tol=LOOSE, error_inputs=_norm_errors),
    OpInfo("linalg.cond", _cond_ref, _cond_samples, dtypes=LINALG, result_dtype=_real_result,
           gradgrad=True, parity_tol=LOOSE, error_inputs=_cond_errors),
    OpInfo("linalg.pinv", _pinv_ref, _pinv_samples(False), dtypes=LINALG, gradgrad=True,
           parity_tol=LOOSE, error_inputs=_pinv_errors("linalg.pinv")),
    OpInfo("pinverse", lambda a, rcond=1e-15: _pinv_ref(a, rtol=rcond), _pinv_samples(True),
           dtypes=LINALG, gradgrad=True, parity_tol=LOOSE,
           error_inputs=_pinv_errors("pinverse")),
    OpInfo("linalg.matrix_rank", _rank_ref, _rank_samples, dtypes=LINALG, result_dtype="int64",
           grad=False, error_inputs=_rank_errors),
    # ember.linalg.lstsq detaches the singular values, as PyTorch does
    OpInfo("linalg.lstsq", _lstsq_ref, _lstsq_samples, dtypes=LINALG, gradgrad=True,
           op=ember.linalg.lstsq, parity_tol=LOOSE, error_inputs=_lstsq_errors),
]
