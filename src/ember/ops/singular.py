"""The singular value decomposition: linalg.svd, linalg.svdvals and the older top-level svd.

The derivative assumes distinct nonzero singular values (PyTorch documents the same limit);
for complex inputs a loss that depends on the phase of the singular vectors raises, as in
PyTorch.
"""

from ember.backend import device_of
from ember.ops._linalg_utils import (check_float, check_matrix, checked_svd, column_major,
                                     empty_16bit_in_float32, eye_like, mh, named_result)
from ember.ops._registry import op
from ember.ops.factorizations import check_phase

__all__ = ["svd", "svdvals", "svd_legacy", "svd_public", "svd_grad"]

svd_result = named_result("linalg_svd", ("U", "S", "Vh"))
legacy_result = named_result("svd", ("U", "S", "V"))


_DRIVERS = ("gesvd", "gesvdj", "gesvda")


def _check(a, driver):
    check_matrix("linalg.svd", a)
    check_float("linalg.svd", a, "linalg_svd_cpu")
    if driver is None:
        return
    if device_of(a).type != "cuda":
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on "
                           "CUDA inputs with cuSOLVER backend.")
    if driver not in _DRIVERS:                  # a valid one is a hint CuPy does not take
        raise RuntimeError(f"torch.linalg.svd: unknown svd driver {driver} in svd_cusolver "
                           f"computation. Check doc at "
                           f"https://pytorch.org/docs/stable/generated/torch.linalg.svd.html")


def svd_grad(grad_u, grad_s, grad_vh, u, s, vh):
    """gA for the reduced SVD A = U diag(S) Vh (U: m x k, Vh: k x n, k = min(m, n)).

    With J = U^H gU and K = Vh gVh^H, the off-diagonal part is (skew(J) S + S skew(K)) / E,
    E_ij = s_j^2 - s_i^2; the diagonal is gS, plus i Im(J_ii) / s_i for complex inputs (the
    phase shared by a pair of singular vectors). Rectangular inputs add the parts of gU (or
    gVh) outside the span of U (or V)."""
    m, n = u.shape[-2], vh.shape[-1]
    j = mh(u) @ grad_u
    k = vh @ mh(grad_vh)
    skew_j, skew_k = j - mh(j), k - mh(k)
    if u.is_complex():
        check_phase("svd_backward", (skew_j + skew_k).diagonal(0, -2, -1))
    s2 = s * s
    gaps = s2.unsqueeze(-2) - s2.unsqueeze(-1) + eye_like(s2.unsqueeze(-1), s.shape[-1])
    inner = (skew_j * s.unsqueeze(-2) + s.unsqueeze(-1) * skew_k) / gaps + grad_s.diag_embed()
    if u.is_complex():
        inner = inner + (1j * j.diagonal(0, -2, -1).imag / s).diag_embed()
    if m > n:
        grad_u_s = grad_u / s.unsqueeze(-2)
        outer = u @ inner + grad_u_s - u @ (mh(u) @ grad_u_s)
        return outer @ vh
    if m < n:
        s_grad_vh = grad_vh / s.unsqueeze(-1)
        outer = inner @ vh + s_grad_vh - (s_grad_vh @ mh(vh)) @ vh
        return u @ outer
    return u @ inner @ vh


@op("svd(A, full_matrices=True, *, driver=None)", namespace="linalg", out=True,
    namedtuple=svd_result)
@empty_16bit_in_float32
def svd(xp, a, full_matrices, driver):
    """(U, S, Vh) with A = U diag(S) Vh: singular values in descending order; U and Vh are
    square when ``full_matrices``, else with min(m, n) columns (rows)."""
    _check(a, driver)
    u, s, vh = checked_svd(xp, a, full_matrices=full_matrices)
    return column_major(xp, u), s, column_major(xp, vh)


@svd.derivative
def _(grads, a, full_matrices, driver, *, out):
    grad_u, grad_s, grad_vh = grads
    u, s, vh = out
    if full_matrices:       # the extra columns are arbitrary: the loss may not depend on them
        k = s.shape[-1]
        u, vh, grad_u, grad_vh = u[..., :k], vh[..., :k, :], grad_u[..., :k], grad_vh[..., :k, :]
    return svd_grad(grad_u, grad_s, grad_vh, u, s, vh)


@op("svdvals(A, *, driver=None)", namespace="linalg", out=True,
    grad_fn_name="LinalgSvdBackward0")
@empty_16bit_in_float32
def svdvals(xp, a, driver):
    """The singular values of each matrix, in descending order."""
    _check(a, driver)
    return checked_svd(xp, a, compute_uv=False)


@svdvals.derivative
def _(grad, a, driver):
    u, s, vh = svd(a, False)
    if a.shape[-2] >= a.shape[-1]:
        return u @ (grad.unsqueeze(-1) * vh)
    return (u * grad.unsqueeze(-2)) @ vh


# --- torch.svd --------------------------------------------------------------------------------

@op("svd(input, some=True, compute_uv=True)", out=True, namedtuple=legacy_result,
    grad_fn_name="LinalgSvdBackward0")
@empty_16bit_in_float32
def svd_legacy(xp, a, some, compute_uv):
    """(U, S, V) with A = U diag(S) V^H (``linalg.svd`` returns V^H): reduced unless ``some``
    is False; without ``compute_uv``, U and V are zeros (m x m and n x n).

    Unlike PyTorch, those zero U and V require grad when the input does (their gradient is
    ignored)."""
    if a.ndim < 2:
        raise RuntimeError(f"linalg.svd: input should have at least 2 dimensions, but has "
                           f"{a.ndim} dimensions instead")
    _check(a, None)
    m, n = a.shape[-2:]
    if not compute_uv:
        s = checked_svd(xp, a, compute_uv=False)
        return (xp.zeros(a.shape[:-2] + (m, m), a.dtype), s,
                column_major(xp, xp.zeros(a.shape[:-2] + (n, n), a.dtype)))
    u, s, vh = checked_svd(xp, a, full_matrices=not some)
    return column_major(xp, u), s, xp.conj(column_major(xp, vh).swapaxes(-1, -2))


@svd_legacy.derivative
def _(grads, a, some, compute_uv, *, out):
    grad_u, grad_s, grad_v = grads
    u, s, v = out
    if not compute_uv:
        return svdvals.vjp(grad_s, a, None)
    k = s.shape[-1]
    return svd_grad(grad_u[..., :k], grad_s, mh(grad_v[..., :k]), u[..., :k], s,
                    mh(v[..., :k]))



def svd_public(input, some=True, compute_uv=True, *, out=None):
    """(U, S, V) with A = U diag(S) V^H (``linalg.svd`` returns V^H): reduced unless ``some``
    is False; without ``compute_uv``, U and V are zeros (m x m and n x n)."""
    result = svd_legacy(input, some, compute_uv, out=out)
    if compute_uv or out is not None:
        return result
    u, s, v = result
    return legacy_result(u.detach(), s, v.detach())


svd_public.__module__ = "ember"
svd_public.__name__ = svd_public.__qualname__ = "svd"
PUBLIC = {"svd": svd_public}
