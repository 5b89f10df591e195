"""Randomized low-rank approximations (Halko, Martinsson and Tropp, 2009, "Finding structure
with randomness"): svd_lowrank and pca_lowrank. They are compositions of ember ops (a
Gaussian sketch, QR, SVD), so gradients flow through them; the random draws are ember's own,
not PyTorch's, so results agree with PyTorch's only up to the approximation.
"""

from ember import _dtype as D
from ember.ops._linalg_utils import mh
from ember.ops.factorizations import qr
from ember.ops.singular import svd

__all__ = ["svd_lowrank", "pca_lowrank"]


def _sketch_dtype(a):
    """The dtype of the Gaussian test matrix: A's (real) float dtype, else float32 (so that
    an integer A fails in the product, as in PyTorch)."""
    if a.is_complex():
        return a.real.dtype
    return a.dtype if a.is_floating_point() else D.float32


def _range_basis(a, q, niter, mean=None):
    """An orthonormal basis (m x k, k <= q) of the approximate range of ``a - mean`` (m x n):
    the range of a Gaussian sketch (A - M) R, refined by ``niter`` subspace iterations."""
    from ember._random import randn
    sketch = randn(a.shape[-1], q, dtype=_sketch_dtype(a), device=a.device)
    # (a real sketch multiplies a complex A; any other dtype mismatch fails in the product, M's
    # too: as PyTorch, A R - M R, not (A - M) R, so M must have the sketch's dtype)
    sketch = sketch.to(a.dtype) if a.is_complex() else sketch
    basis = qr(a @ sketch if mean is None else a @ sketch - mean @ sketch).Q
    a = a if mean is None else a - mean
    for _ in range(niter):
        basis = qr(a @ qr(mh(a) @ basis).Q).Q
    return basis


def svd_lowrank(A, q=6, niter=2, M=None):
    """(U, S, V) of a rank-``q`` approximation of A - M (M: None or a broadcastable mean):
    A - M ~ U diag(S) V^H, by randomized subspace iteration with ``niter`` passes."""
    q = 6 if q is None else q
    niter = 2 if niter is None else niter
    m, n = A.shape[-2:]
    if M is not None:
        M = M.broadcast_to(A.shape)     # (PyTorch's errors for a mean of another shape)
    if m < n or n > q:
        # sketch the range of A^H (n x k): A ~ (A Q) Q^H, and the SVD of the m x k A Q
        basis = _range_basis(mh(A), q, niter, None if M is None else mh(M))
        a = A if M is None else A - M
        u, s, wh = svd(a @ basis, full_matrices=False)
        return u, s, basis @ mh(wh)
    basis = _range_basis(A, q, niter, M)       # A ~ Q (Q^H A), the SVD of the k x n Q^H A
    a = A if M is None else A - M
    w, s, vh = svd(mh(basis) @ a, full_matrices=False)
    return basis @ w, s, mh(vh)


def pca_lowrank(A, q=None, center=True, niter=2):
    """(U, S, V) of a rank-``q`` PCA of the rows of A (columns centred when ``center``): the
    principal directions are V's columns, S**2 / (m - 1) their variances."""
    m, n = A.shape[-2:]
    if q is None:
        q = min(6, m, n)
    elif not 0 <= q <= min(m, n):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than "
                         f"min(m, n)={min(m, n)}")
    if not (isinstance(niter, int) and niter >= 0):
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if center:
        A = A - A.mean(dim=-2, keepdim=True)
    return svd_lowrank(A, q, niter=niter)


for _fn in (svd_lowrank, pca_lowrank):
    _fn.__module__ = "ember"

PUBLIC = {"svd_lowrank": svd_lowrank, "pca_lowrank": pca_lowrank}
