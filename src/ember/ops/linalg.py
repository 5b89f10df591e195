"""Matrix products: matmul, mm, bmm, mv, dot, outer; and linalg.vander (powers, by cumulative
products).

The operands of a product must share one dtype (no promotion, as in PyTorch). NumPy has no
fast 16-bit GEMM, so float16 and bfloat16 products run in float32 and are rounded back.
Each op checks shapes first, then dtypes, with the message of the PyTorch kernel that would
run (``matmul`` reuses those of ``dot``, ``mv``, ``mm`` and ``bmm``, like PyTorch's).
"""

import math

import numpy as np

from ember import _dtype as D
from ember._tensor import _make
from ember.backend import XP_BY_ARRAY_TYPE, low_precision_product
from ember.backend.blas_threads import follow_load
from ember.ops._elementwise import conj_grad
from ember.ops._promotion import BINARY
from ember.ops._recording import _mark_view, _record, rename_node
from ember.ops._registry import broadcast_message, op
from ember.ops.indexing import CTYPE
from ember.ops.shape import _unsafe_view, squeeze as _squeeze, unsqueeze as _unsqueeze

_LOW = D.LOW_PRECISION_NP
_GEMM = {np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128)}


def _name(a):
    return D.FROM_NUMPY[a.dtype]._torch_name


def _no_bool(a, kernel):
    if a.dtype == np.bool_:
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")


def matrix_product(xp, a, b):
    """``a @ b`` (NumPy broadcasting), 16-bit floats accumulated in float32."""
    follow_load(xp)
    if a.dtype in _LOW:
        return low_precision_product(xp, a, b)
    return xp.matmul(a, b)


def _rows(t):
    """``t`` (an array or a tensor) as a matrix: all leading dims folded into the rows."""
    return t.reshape(math.prod(t.shape[:-1]), t.shape[-1])


def _h(t):
    """The conjugate transpose of the last two dims (just the transpose for real tensors)."""
    return t.mT.conj() if t.is_complex() else t.mT


def _ht(t):
    """The conjugate transpose of a matrix as PyTorch's derivative of mm takes it: ``t()``
    (TBackward0), then ``conj()`` for complex tensors (mv's conjugates first)."""
    return conj_grad(t.t())


# --- checks shared by the products and matmul -------------------------------------------------

def check_mm_shapes(a, b):
    """Raise PyTorch's error where matrices ``a`` and ``b`` cannot be multiplied."""
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x"
                           f"{a.shape[1]} and {b.shape[0]}x{b.shape[1]})")


def _check_mm(a, b):
    check_mm_shapes(a, b)
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{CTYPE[D.FROM_NUMPY[a.dtype]]} != {CTYPE[D.FROM_NUMPY[b.dtype]]}")
    _no_bool(a, "addmm_impl_cpu_")


def _check_mv(a, b):
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({a.shape[0]}), mat ({a.shape[0]}x"
                           f"{a.shape[1]}), vec ({b.shape[0]})")
    if a.dtype != b.dtype:
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got "
                           f"{_name(b)}, {_name(a)}, and {_name(b)}")
    _no_bool(a, "addmv_impl_cpu")


def _check_dot(a, b):
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.dtype != b.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{_name(a)} and {_name(b)}")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src "
                           f"[{b.shape[0]}] to have the same number of elements, but got "
                           f"{a.shape[0]} and {b.shape[0]} elements respectively")
    _no_bool(a, "dot")


def _check_bmm(a, b, batch):
    if b.shape[-2] != a.shape[-1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{batch}, {a.shape[-1]}] but got: [{batch}, {b.shape[-2]}].")
    _no_bool(a, "bmm")          # (PyTorch's kernel refuses a bool batch1 before the mismatch)
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected scalar type {_name(a)} but found {_name(b)}")


# --- the products -----------------------------------------------------------------------------

@op("mm(input, mat2)", inputs=2, out=True)
def mm(xp, a, b):
    """The matrix product of two 2-D tensors."""
    if a.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if b.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    _check_mm(a, b)
    return matrix_product(xp, a, b)


@mm.derivative
def _(grad, a, b, *, needs=(True, True)):
    return grad.mm(_ht(b)) if needs[0] else None, _ht(a).mm(grad) if needs[1] else None


@op("bmm(input, mat2)", inputs=2, out=True)
def bmm(xp, a, b):
    """Batched matrix products of two 3-D tensors with the same batch size."""
    if a.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if b.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if b.shape[0] != a.shape[0]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, "
                           f"{b.shape[1]}].")
    _check_bmm(a, b, a.shape[0])
    return matrix_product(xp, a, b)


@bmm.derivative
def _(grad, a, b, *, needs=(True, True)):
    return grad.bmm(_h(b)) if needs[0] else None, _h(a).bmm(grad) if needs[1] else None


@op("mv(input, vec)", inputs=2, out=True)
def mv(xp, a, b):
    """The product of a matrix and a vector."""
    if a.ndim == 0:                 # PyTorch sizes the result from input.size(0) first
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    if a.ndim != 2 or b.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {a.ndim}, {b.ndim}")
    _check_mv(a, b)
    return matrix_product(xp, a, b)


@mv.derivative
def _(grad, a, b, *, needs=(True, True)):
    # PyTorch's: an outer product (grad viewed as a column), and the t() of the conjugate
    # times grad
    return (grad.reshape(grad.shape[0], 1) * conj_grad(b) if needs[0] else None,
            conj_grad(a).t().mv(grad) if needs[1] else None)


@op("dot(input, tensor)", inputs=2, out=True)
def dot(xp, a, b):
    """The inner product of two 1-D tensors (no conjugation)."""
    _check_dot(a, b)
    return matrix_product(xp, a, b)


@dot.derivative
def _(grad, a, b, *, needs=(True, True)):
    return grad * conj_grad(b) if needs[0] else None, grad * conj_grad(a) if needs[1] else None


def _outer(xp, a, b):
    """The outer product of two 1-D tensors (``ger`` is the same op)."""
    if a.ndim != 1:
        raise RuntimeError(f"outer: Expected 1-D argument self, but got {a.ndim}-D")
    if b.ndim != 1:
        raise RuntimeError(f"outer: Expected 1-D argument vec2, but got {b.ndim}-D")
    return xp.multiply(a[:, None], b[None, :])


outer = op("outer(input, vec2)", inputs=2, promote=BINARY, scalars=False)(_outer)
outer.name_nodes("MulBackward0")       # PyTorch multiplies to outer

# each factor of a product is read only by the other's gradient
for _product in (mm, bmm, mv, dot, outer):
    _product.reads_inputs((1,), (0,))


@outer.derivative
def _(grad, a, b, *, needs=(True, True)):
    return ((grad * conj_grad(b)).sum(1) if needs[0] else None,
            (grad * conj_grad(a).unsqueeze(1)).sum(0) if needs[1] else None)


# --- matmul -----------------------------------------------------------------------------------

@op("matmul(input, other)", inputs=2, out=True)
def matmul(xp, a, b):
    """The matrix product with NumPy's rules: 1-D operands promoted, batch dims broadcast."""
    da, db = a.ndim, b.ndim
    if da == 2 and db == 2 and a.dtype is b.dtype and a.dtype in _GEMM:
        follow_load(xp)
        try:                    # the common case, checked by NumPy: its only error is shapes
            return xp.matmul(a, b)
        except ValueError:
            pass
    if da == 0 or db == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{da}D and {db}D")
    if db == 1 and da <= 2:
        if da == 1:
            _check_dot(a, b)
        else:
            _check_mv(a, b)
        return matrix_product(xp, a, b)
    if da <= 2 and db == 2:
        _check_mm(a[None] if da == 1 else a, b)
        return matrix_product(xp, a, b)
    if db <= 2:                 # fold the batch dims of a into its rows: one GEMM
        if a.size and not _folds_without_copy(a):
            # PyTorch multiplies such a batch by b expanded to it (bmm): its checks
            _check_bmm(a, b if db == 2 else b[:, None], math.prod(a.shape[:-2]))
        rows = _rows(a)
        if db == 1:
            _check_mv(rows, b)
        else:
            _check_mm(rows, b)
        return matrix_product(xp, rows, b).reshape(a.shape[:-1] + b.shape[1:])
    a2 = a[None] if da == 1 else a
    batch_a, batch_b = a2.shape[:-2], b.shape[:-2]
    try:
        batch = np.broadcast_shapes(batch_a, batch_b)
    except ValueError:
        raise RuntimeError(broadcast_message([batch_a, batch_b])) from None
    _check_bmm(a2, b, math.prod(batch))
    return matrix_product(xp, a, b)


matmul.reads_inputs((1,), (0,))


def _folds_without_copy(a):
    """Whether the leading dims of array ``a`` (3-D or more) view as one without a copy, as
    PyTorch's matmul folds them (else it takes a bmm)."""
    shape, strides = a.shape, a.strides
    return all(strides[i] == strides[i + 1] * shape[i + 1] for i in range(a.ndim - 2))


@matmul.named_by
def _(flat, params, out):
    da, db = flat[0]._data.ndim, flat[1]._data.ndim     # the op PyTorch's matmul computes it by
    if da <= 2 and db <= 2:
        return _MATMUL_NODES[da, db]
    return "CloneBackward0" if da == 2 else "UnsafeViewBackward0"


_MATMUL_NODES = {(1, 1): "DotBackward0", (2, 1): "MvBackward0", (1, 2): "SqueezeBackward4",
                 (2, 2): "MmBackward0"}


@matmul.composed_when_recording
def _(inputs, params):
    """PyTorch's graph of a vector times a matrix (an mm of it unsqueezed), and of a vector
    times a batch of matrices (either side): an mv of the batch folded into rows, where
    folding needs no copy or the vector requires grad, else a bmm of both operands expanded
    to the batch; then a view to the result's shape. Other products keep one node (named by
    ``named_by``)."""
    a, b = inputs
    da, db = a._data.ndim, b._data.ndim
    if da == 1 and db == 2:
        return _vector_matrix(a, b)
    if da == 1 and db >= 3:
        vector, batch = a, b.mT
    elif db == 1 and da >= 3:
        vector, batch = b, a
    else:
        va, vb = a._data, b._data
        if db == 2 and da >= 3 and b.requires_grad and (va.shape[-1] != vb.shape[0]
                                                         or va.dtype != vb.dtype):
            _check_mm(_rows(va), vb)        # PyTorch folds a then, whatever its layout
        return NotImplemented
    # (operands that do not fit raise the error of the kernel PyTorch reaches: mv's, bmm's)
    lead, rows, inner = tuple(batch.shape[:-2]), batch.shape[-2], batch.shape[-1]
    if vector.requires_grad or batch.numel() == 0 or _foldable(batch):
        folded = batch.reshape(math.prod(lead) * rows, inner)
        return _unsafe_view(folded.mv(vector), lead + (rows,))
    count, m = math.prod(lead), vector.shape[0]
    if da == 1:         # a as a batch of (1, m) rows times b's matrices
        product = a.expand(lead + (1, m)).reshape(count, 1, m).bmm(
            b.expand(b.shape).reshape((count,) + tuple(b.shape[-2:])))
    else:               # a's matrices times b as a batch of (m, 1) columns
        product = a.expand(a.shape).reshape((count,) + tuple(a.shape[-2:])).bmm(
            b.expand(lead + (m,)).reshape(count, m).unsqueeze(2)).squeeze(-1)
    return _unsafe_view(product, lead + (rows,))


def _vector_matrix(a, b):
    """PyTorch's graph of a vector times a matrix: an mm of the vector unsqueezed to a row,
    squeezed in place (SqueezeBackward4 over MmBackward0 over UnsqueezeBackward0). Its three
    nodes are recorded here on one product, without further dispatch (each would cost what
    the whole call did), for the dtypes computed as they are and a contiguous vector (whose
    row NumPy strides as PyTorch does); other calls compose the ops, and raise mm's errors."""
    va, vb = a._data, b._data
    if va.dtype == vb.dtype and va.dtype in _GEMM and va.flags.c_contiguous:
        xp = XP_BY_ARRAY_TYPE[type(va)]
        follow_load(xp)
        try:
            product = xp.matmul(va, vb)         # (NumPy's only error here is the shapes')
        except ValueError:
            product = None
        if product is not None:
            row = _make(va.reshape(1, va.shape[0]))
            _mark_view(_unsqueeze, a, (0,), row)
            if a._requires_grad or a._grad_fn is not None:
                _record(_unsqueeze, (a,), None, (0,), row)
            matrix = _make(product.reshape(1, product.shape[0]))
            _record(mm, (row, b), None, (), matrix)
            out = _make(product)
            _record(_squeeze, (matrix,), None, (0,), out)
            return rename_node(out, "SqueezeBackward4")
    return rename_node(a.unsqueeze(0).mm(b).squeeze(0), "SqueezeBackward4")


def _foldable(t):
    """Whether ``t``'s batch dims and rows fold into one dim without a copy (each of those
    dims' stride is the next one's times its size)."""
    shape, strides = t.shape, t.stride()
    return all(strides[i] == strides[i + 1] * shape[i + 1] for i in range(len(shape) - 2))


@matmul.derivative
def _(grad, a, b, *, needs=(True, True)):
    need_a, need_b = needs
    if a.ndim == 1 and b.ndim == 1:
        return (grad * conj_grad(b) if need_a else None,
                grad * conj_grad(a) if need_b else None)
    if a.ndim == 2 and b.ndim <= 2:     # PyTorch's mv and mm, with their derivatives' graphs
        return (mv if b.ndim == 1 else mm).vjp(grad, a, b, needs=needs)
    if b.ndim == 1:
        return (grad.unsqueeze(-1) * conj_grad(b) if need_a else None,
                _h(_rows(a)).mv(grad.reshape(-1)) if need_b else None)
    if a.ndim == 1:
        # PyTorch's products, which autocast casts in a backward or not: 1-D @ 2-D is an mm,
        # 1-D @ N-D an mv of b's rows (b^T folded) by a, whose derivatives are an mv and an
        # outer product (no autocast op on the CPU)
        if b.ndim == 2:
            return ((conj_grad(b) @ grad.unsqueeze(-1)).squeeze(-1) if need_a else None,
                    conj_grad(a).unsqueeze(-1) @ grad.unsqueeze(-2) if need_b else None)
        return (_h(_rows(b.mT)).mv(grad.reshape(-1)) if need_a else None,
                conj_grad(a).unsqueeze(-1) * grad.unsqueeze(-2) if need_b else None)
    grad_a = grad @ _h(b) if need_a else None
    if not need_b:
        return grad_a, None
    if b.ndim == 2 and a.ndim > 2:      # fold the batch into one GEMM instead of summing
        return grad_a, _h(_rows(a)).mm(_rows(grad))
    return grad_a, _h(a) @ grad


# --- linalg.vander ----------------------------------------------------------------------------

@op("vander(x, *, N=None)", namespace="linalg")
def vander(xp, x, n):
    """The Vandermonde matrix of ``x`` (batches of vectors): columns x^0, x^1, ..., x^(N-1),
    N by default ``x.size(-1)``; integer input gives int64."""
    if x.dtype.kind == "b" or x.dtype in _LOW:
        raise RuntimeError(f"linalg.vander supports floating point, complex, and integer "
                           f"tensors, but got {_name(x)}")
    if n is None:
        n = x.shape[-1] if x.ndim else 1
    elif isinstance(n, bool) or not hasattr(n, "__index__"):
        raise TypeError(f"linalg_vander(): argument 'N' must be int, not {type(n).__name__}")
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    if x.ndim == 0:
        x = x[None]
    if x.dtype.kind in "iu":
        x = x.astype(np.int64)
    powers = xp.cumprod(xp.broadcast_to(x[..., None], x.shape + (n - 1,)), axis=-1)
    return xp.concatenate([xp.ones(x.shape + (1,), x.dtype), powers], axis=-1)


@vander.derivative
def _(grad, x, n, *, out):
    # d x^k / dx = k x^(k - 1), the powers read from the output
    from ember._ranges import arange
    k = arange(1, out.shape[-1], dtype=out.real.dtype, device=out.device)
    return (grad[..., 1:] * (out[..., :-1] * k).conj()).sum(-1).reshape(x.shape)


vander.name_nodes("CatBackward0")       # PyTorch's: a cat of ones and cumulative products


ALIASES = {"ger": "outer"}
