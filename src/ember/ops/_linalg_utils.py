"""What the linalg ops share: PyTorch's input checks and messages, ``LinAlgError``, named
results, and small helpers for their derivatives.

The linalg ops take no dtype policy: PyTorch checks shapes before dtypes, and each routine
names its own kernel in its dtype errors, so every forward checks its operands itself.
"""

import contextlib
import functools

import numpy as np

from ember import _dtype as D
from ember._memory_format import restrided
from ember._storage_place import _row_major_strides
from ember.backend import cuda_backend, host_array, on_device_of
from ember.ops.return_types import named_result  # noqa: F401  (re-exported)

__all__ = ["LinAlgError", "named_result", "torch_name", "check_matrix", "check_square",
           "check_rhs_dtype", "check_solve_rows", "check_float", "check_kernel",
           "check_same_dtype", "batch_prefix", "raise_first_failure", "scipy_linalg", "lapack",
           "on_host", "checked", "checked_svd", "real_dtype", "mh", "eye_like", "vector_rhs",
           "column_major", "empty_16bit_in_float32"]

_LOW = D.HALF_NP


class LinAlgError(RuntimeError):
    """A linear-algebra routine could not complete on its input (a singular matrix, a
    matrix that is not positive-definite, ...)."""


LinAlgError.__module__ = "ember.linalg"
LinAlgError.__name__ = LinAlgError.__qualname__ = "_LinAlgError"    # PyTorch's class name


def torch_name(a):
    """PyTorch's name of an array's dtype ("Float", "Long", ...)."""
    return D.FROM_NUMPY[a.dtype]._torch_name


# --- input checks -----------------------------------------------------------------------------

def check_matrix(name, a, arg="A"):
    """At least two dims (PyTorch's message names the argument)."""
    if a.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor {arg} must have at least 2 dimensions.")


def check_square(name, a, arg="A"):
    """Batches of square matrices."""
    check_matrix(name, a, arg)
    if a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"{name}: {arg} must be batches of square matrices, but they are "
                           f"{a.shape[-2]} by {a.shape[-1]} matrices")


def check_float(name, a, kernel=None):
    """Floating or complex input. 16-bit floats raise too: with PyTorch's "low precision"
    message, or (``kernel`` given) as the LAPACK kernel PyTorch dispatches to."""
    kind = a.dtype.kind
    if a.dtype in _LOW:
        if kernel is not None:
            raise NotImplementedError(f"\"{kernel}\" not implemented for '{torch_name(a)}'")
        raise RuntimeError(f"{name}: Low precision dtypes not supported. Got {torch_name(a)}")
    if kind not in "fc":
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. "
                           f"Got {torch_name(a)}")


def empty_16bit_in_float32(forward):
    """``forward(xp, a, *rest)``, run on float32 copies of its 16-bit arrays when ``a`` is an
    empty 16-bit array, its float32 results cast back: PyTorch never calls these LAPACK kernels
    for empty inputs, so it returns empty 16-bit results instead of the kernel's dtype error."""
    @functools.wraps(forward)
    def run(xp, a, *rest, **params):
        if a.size or a.dtype not in _LOW or any(
                d.kind in "fc" and d != a.dtype for d in (getattr(x, "dtype", a.dtype)
                                                          for x in rest)):
            return forward(xp, a, *rest, **params)      # (mixed dtypes: the forward's error)
        low = a.dtype
        rest = tuple(x.astype(np.float32) if getattr(x, "dtype", None) == low else x
                     for x in rest)
        return _cast_float32(forward(xp, a.astype(np.float32), *rest, **params), low)
    return run


def _cast_float32(out, dtype):
    if isinstance(out, tuple):
        return tuple(_cast_float32(x, dtype) for x in out)
    return out.astype(dtype) if getattr(out, "dtype", None) == np.float32 else out


def check_kernel(a, kernel, kinds="fc"):
    """PyTorch's NotImplementedError for a dtype a CPU kernel has no version for."""
    if a.dtype.kind not in kinds or a.dtype in _LOW:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{torch_name(a)}'")


def check_same_dtype(name, a, b):
    if a.dtype != b.dtype:
        raise RuntimeError(f"{name}: Expected A and B to have the same dtype, but found A of "
                           f"type {torch_name(a)} and B of type {torch_name(b)} instead")


def check_rhs_dtype(a, b):
    """PyTorch's error when a solve's right side ``b`` has another dtype than ``a``."""
    if b.dtype != a.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{torch_name(b)} and A of type {torch_name(a)} instead.")


def check_solve_rows(name, a, b):
    """PyTorch's error when ``b`` has not as many rows as the n x n matrices ``a``."""
    n = a.shape[-1]
    if b.shape[-2] != n:
        raise RuntimeError(f"Incompatible matrix sizes for {name}: each A matrix is {n} by {n} "
                           f"but each b matrix is {b.shape[-2]} by {b.shape[-1]}")


def vector_rhs(a, b):
    """Whether ``b`` is a (batch of) vector(s) for ``a``: PyTorch's rule for ``solve``."""
    return b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])


# --- failures ---------------------------------------------------------------------------------

def batch_prefix(shape, index):
    """"(Batch element i): " for a batch of matrices, nothing for a single one."""
    return f"(Batch element {index}): " if len(shape) > 2 else ""


def raise_first_failure(name, info, shape, message, error=None):
    """Raise ``error`` (LinAlgError) for the first matrix whose LAPACK ``info`` is nonzero;
    ``message(info)`` says what went wrong."""
    flat = host_array(info).reshape(-1)
    bad = np.flatnonzero(flat)
    if bad.size:
        i = int(bad[0])
        raise (error or LinAlgError)(f"{name}: {batch_prefix(shape, i)}{message(int(flat[i]))}")


# --- backends ---------------------------------------------------------------------------------

def scipy_linalg(xp):
    """scipy.linalg, for NumPy arrays only: on a GPU its routines run through ``on_host``."""
    import scipy.linalg
    return scipy.linalg


def nan_matrices(xp, a):
    """Which matrices of a batch hold a NaN. LAPACK's getrf may pivot past a NaN in a column
    and report a finite determinant, or a singular matrix, where PyTorch's results are NaN."""
    return xp.isnan(a).any(axis=(-2, -1))


def on_host(xp, fn, *arrays, **params):
    """``fn(np, *arrays, **params)`` computed on the CPU, its result (an array or a tuple of
    them) put back where ``arrays[0]`` lives; NumPy arrays go straight through. For what
    CuPy lacks or does differently (LAPACK's getrf with its pivots and info, potrf's info,
    general eig, expm): PyTorch computes a few of these on the host too."""
    if xp is np:
        return fn(np, *arrays, **params)
    result = fn(np, *(host_array(a) for a in arrays), **params)
    if isinstance(result, tuple):
        return tuple(on_device_of(r, arrays[0]) for r in result)
    return on_device_of(result, arrays[0])


_UNCHECKED = contextlib.nullcontext()


def checked(xp):
    """A context in which ``xp.linalg`` raises LinAlgError on a singular (or not
    positive-definite) matrix, as NumPy always does. CuPy checks cuSOLVER's status only
    when asked (it costs a device sync, which PyTorch's checked routines pay too)."""
    if xp is np:
        return _UNCHECKED
    return cuda_backend().linalg_checked()


def checked_svd(xp, a, **options):
    """``xp.linalg.svd(a, **options)``, raising PyTorch's LinAlgError when it does not
    converge (NumPy's LAPACK does not for NaN input)."""
    try:
        if xp is np and a.size and not np.isfinite(a).all():
            return _svd_of_infinite(a, **options)
        return xp.linalg.svd(a, **options)
    except np.linalg.LinAlgError:
        why = ("the input matrix contained non-finite values" if not xp.isfinite(a).all() else
               "the input matrix is ill-conditioned or has too many repeated singular values")
        raise LinAlgError(f"linalg.svd: The algorithm failed to converge because {why}.") \
            from None


def _svd_of_infinite(a, full_matrices=True, compute_uv=True):
    """NumPy's SVD where ``a`` has an inf or NaN: its LAPACK never returns on an inf. NaN
    raises (as PyTorch); a matrix with an inf gets what PyTorch's LAPACK gives it, NaN
    singular values and the first min(m, n) unit vectors in reverse order."""
    if np.isnan(a).any():
        raise np.linalg.LinAlgError
    m, n = a.shape[-2:]
    k = min(m, n)
    bad = ~np.isfinite(a).all(axis=(-2, -1))
    finite = np.where(bad[..., None, None], 0, a)
    out = np.linalg.svd(finite, full_matrices=full_matrices, compute_uv=compute_uv)
    s = out if not compute_uv else out[1]
    s[bad] = np.nan
    if not compute_uv:
        return s
    u, vh = out[0], out[2]
    for x, size, rows in ((u, m, False), (vh, n, True)):
        pick = np.eye(size, dtype=x.dtype)
        pick[:k, :k] = pick[:k, :k][::-1]
        x[bad] = pick[:k] if rows and x.shape[-2] == k else pick[:, :k] if not rows and \
            x.shape[-1] == k else pick
    return u, s, vh


@functools.cache
def lapack(name, dtype):
    """The LAPACK routine ``name`` (getrf, potrf, ...) for a NumPy dtype (CPU)."""
    import scipy.linalg
    fn, = scipy.linalg.lapack.get_lapack_funcs((name,), dtype=dtype)
    return fn


def real_dtype(dtype):
    """The real dtype of a NumPy dtype (float64 for complex128)."""
    return np.empty(0, dtype).real.dtype


# --- layout ---------------------------------------------------------------------------------

def _column_major_strides(shape):
    """PyTorch's element strides for ``shape`` laid out as ``t.mT.contiguous().mT``: each
    matrix column-major, the batch row-major (sizes 0 count as 1, as in PyTorch)."""
    if len(shape) < 2:
        return _row_major_strides(shape)
    *batch, m, n = shape
    inner = _row_major_strides((*batch, n, m))
    return inner[:-2] + (1, inner[-2])


def column_major(xp, array):
    """``array`` with each matrix (the last two dims) laid out column-major, as PyTorch's
    LAPACK-backed results are (``linalg.inv(A).stride()`` is (9, 1, 3) for 2 x 3 x 3 ``A``);
    the values are unchanged, and an array already laid out so is returned as it is."""
    if array.ndim >= 2 and array.size:          # (the common case, without as_strided)
        *batch, m, n = array.shape
        out = xp.empty((*batch, n, m), array.dtype).swapaxes(-1, -2)
        if out.strides == array.strides:
            return array
        out[...] = array
        return out
    strides = tuple(s * array.itemsize for s in _column_major_strides(array.shape))
    if array.strides == strides:
        return array
    out = restrided(xp, xp.empty(array.size, array.dtype), array.shape, strides)
    out[...] = array
    return out


# --- tensors in derivatives -------------------------------------------------------------------

def undefined_grad(grad):
    """Whether a derivative's incoming ``grad`` for one of several outputs is one PyTorch
    leaves undefined: None, or the zeros the engine fills in for an output no gradient
    reached (known without reading them)."""
    return grad is None or bool(grad.__dict__.get("_filled_zeros"))


def mh(t):
    """The conjugate transpose of the last two dims of a tensor."""
    return t.mT.conj() if t.is_complex() else t.mT


def eye_like(t, n=None):
    """An identity matrix of ``t``'s dtype (n by n; by default t's last dim)."""
    from ember._creation import eye
    return eye(t.shape[-1] if n is None else n, dtype=t.dtype, device=t.device)
