"""The singular value decomposition: linalg.svd, linalg.svdvals and the older top-level svd.

The derivative assumes distinct nonzero singular values (PyTorch documents the same limit);
for complex inputs a loss that depends on the phase of the singular vectors raises, as in
PyTorch.
"""

from ember._tensor import _make
from ember.backend import device_of, xp_of
from ember.ops._linalg_utils import (check_float, check_matrix, checked_svd, column_major,
                                     empty_16bit_in_float32, eye_like, mh, named_result,
                                     undefined_grad)
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
    gVh) outside the span of U (or V). Without gradients for U and Vh (svdvals), it is
    U diag(gS) Vh, finite for repeated singular values too, as PyTorch's."""
    if undefined_grad(grad_u) and undefined_grad(grad_vh):
        return (u * grad_s.unsqueeze(-2)) @ vh
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


# the decompositions save their outputs, not A (PyTorch's LinalgSvdBackward0 keeps U, S, Vh)
@op("svd(A, full_matrices=True, *, driver=None)", namespace="linalg", out=True,
    namedtuple=svd_result, saves_inputs=False)
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
        u, vh = u[..., :k], vh[..., :k, :]
        if not (undefined_grad(grad_u) and undefined_grad(grad_vh)):
            grad_u, grad_vh = grad_u[..., :k], grad_vh[..., :k, :]
    return svd_grad(grad_u, grad_s, grad_vh, u, s, vh)


@op("svdvals(A, *, driver=None)", namespace="linalg", out=True,
    grad_fn_name="LinalgSvdBackward0")
@empty_16bit_in_float32
def svdvals(xp, a, driver):
    """The singular values of each matrix, in descending order."""
    _check(a, driver)
    return checked_svd(xp, a, compute_uv=False)


@svdvals.composed_when_recording
def _(inputs, params):
    """PyTorch's graph: the singular values (output 1) of an svd, whose node keeps U, S and
    Vh, not A."""
    return svd(inputs[0], False, driver=params[0])[1]


@svdvals.derivative                 # (forward-mode AD's)
def _(grad, a, driver):
    u, s, vh = svd(a, False)
    if a.shape[-2] >= a.shape[-1]:
        return u @ (grad.unsqueeze(-1) * vh)
    return (u * grad.unsqueeze(-2)) @ vh


# --- torch.svd --------------------------------------------------------------------------------

@op("svd(input, some=True, compute_uv=True)", out=True, namedtuple=legacy_result,
    grad_fn_name="LinalgSvdBackward0", saves_inputs=False)
@empty_16bit_in_float32
def svd_legacy(xp, a, some, compute_uv):
    """(U, S, V) with A = U diag(S) V^H (``linalg.svd`` returns V^H): reduced unless ``some``
    is False; without ``compute_uv``, U and V are zeros (m x m and n x n), which need no
    gradient."""
    _check_legacy(a)
    if not compute_uv:
        return _with_zero_vectors(xp, a, checked_svd(xp, a, compute_uv=False))
    u, s, vh = checked_svd(xp, a, full_matrices=not some)
    return column_major(xp, u), s, xp.conj(column_major(xp, vh).swapaxes(-1, -2))


def _check_legacy(a):
    if a.ndim < 2:
        raise RuntimeError(f"linalg.svd: input should have at least 2 dimensions, but has "
                           f"{a.ndim} dimensions instead")
    _check(a, None)


def _with_zero_vectors(xp, a, s):
    """(U, S, V) of ``torch.svd(a, compute_uv=False)``: zero m x m U and n x n V."""
    m, n = a.shape[-2:]
    return (xp.zeros(a.shape[:-2] + (m, m), a.dtype), s,
            column_major(xp, xp.zeros(a.shape[:-2] + (n, n), a.dtype)))


@svd_legacy.composed_when_recording
def _(inputs, params):
    """PyTorch's graph: linalg.svd's (its node keeps U, S and Vh, not the input), V being
    Vh's ``mH`` (TransposeBackward0); without ``compute_uv``, the zero U and V need no
    gradient."""
    a = inputs[0]
    _check_legacy(a._data)
    if params[1]:
        u, s, vh = svd(a, not params[0])
        return legacy_result(u, s, vh.mH)
    s = svd(a, False)[1]
    u, _, v = _with_zero_vectors(xp_of(a._data), a._data, None)
    return legacy_result(_make(u), s, _make(v))


@svd_legacy.derivative
def _(grads, a, some, compute_uv, *, out):
    grad_u, grad_s, grad_v = grads
    u, s, v = out
    if not compute_uv:                          # (forward-mode AD's)
        return svdvals.vjp(grad_s, a, None)
    k = s.shape[-1]
    if not (undefined_grad(grad_u) and undefined_grad(grad_v)):
        grad_u, grad_v = grad_u[..., :k], mh(grad_v[..., :k])
    return svd_grad(grad_u, grad_s, grad_v, u[..., :k], s,
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
