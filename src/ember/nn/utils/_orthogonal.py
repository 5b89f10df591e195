"""The orthogonal parametrization: a matrix (or batch) kept orthogonal, or unitary, by
computing it from an unconstrained tensor.

A tall weight Q (m >= n) gets orthonormal columns, a wide one orthonormal rows (the maps
work on the transpose). The unconstrained tensor X becomes Q through

- "matrix_exp" / "cayley": the skew-Hermitian A = L - L^H, L the lower triangle of X padded
  with zero columns to a square, mapped to exp(A) or (I - A/2)^{-1} (I + A/2); Q is its first
  n columns;
- "householder": the reflectors of the columns of X below the diagonal, each with the scalar
  that makes it a reflection, with column i's sign taken from X[i, i] (real only).

With ``use_trivialization`` (the default) Q is ``base @ map(X)``: assigning a weight stores its
orthogonal part (its QR factor with a non-negative diagonal in R, completed with random
columns to a square when not square) as the buffer ``base`` and sets X to minus the identity,
where every map gives the identity, so the weight reads back as that orthogonal part.
"""

from ember._tensor import Tensor
from ember.autograd.grad_mode import no_grad
from ember.nn.modules.module import Module
from ember.nn.utils import parametrize

__all__ = ["orthogonal"]

_MAPS = ("matrix_exp", "cayley", "householder")


def _orthonormal_part(a):
    """The Q of A = QR with R's diagonal real and non-negative (A tall)."""
    from ember import linalg
    q, r = linalg.qr(a)
    return q * r.diagonal(0, -2, -1).sgn().unsqueeze(-2)


def _is_orthonormal(q):
    import ember
    n, k = q.shape[-2:]
    eye = ember.eye(k, dtype=q.dtype)
    return ember.allclose(q.mH @ q, eye, atol=10.0 * n * ember.finfo(q.dtype).eps)


def _skew_map(x, kind):
    """The first columns of exp(A) or cayley(A), A built from x's lower triangle (x tall)."""
    import ember
    n, k = x.shape[-2:]
    lower = x.tril()
    if n != k:
        lower = ember.cat([lower, lower.new_zeros(lower.shape[:-1] + (n - k,))], -1)
    a = lower - lower.mH
    if kind == "matrix_exp":
        q = ember.linalg.matrix_exp(a)
    else:
        eye = ember.eye(n, dtype=a.dtype)
        q = ember.linalg.solve(eye - 0.5 * a, eye + 0.5 * a)
    return q[..., :k] if n != k else q


def _reflections(x):
    """The product of the reflections along x's columns below the diagonal (unit diagonal
    entries), column i's sign given by the integer part of x[i, i] (x tall, real)."""
    import ember
    v = x.tril(-1)
    q = ember.linalg.householder_product(v, 2.0 / (1.0 + (v * v).sum(-2)))
    return q * x.diagonal(0, -2, -1).int().unsqueeze(-2)


class _Orthogonal(Module):
    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        if weight.is_complex() and orthogonal_map == "householder":
            raise ValueError("The householder parametrization does not support complex "
                             "tensors.")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, x):
        wide = x.shape[-2] < x.shape[-1]
        if wide:
            x = x.mT
        if self.orthogonal_map == "householder":
            q = _reflections(x)
        else:
            q = _skew_map(x, self.orthogonal_map)
        if hasattr(self, "base"):
            q = self.base @ q
        return q.mT if wide else q

    def right_inverse(self, q):
        if q.shape != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                             f"Got a tensor of shape {q.shape}.")
        with no_grad():
            return self._inverse(q)

    def _inverse(self, weight):
        import ember
        wide = weight.shape[-2] < weight.shape[-1]
        q = weight.mT if wide else weight
        n, k = q.shape[-2:]
        if not hasattr(self, "base"):
            if self.orthogonal_map != "householder":
                raise NotImplementedError("It is not possible to assign to the matrix "
                                          "exponential or the Cayley parametrizations when "
                                          "use_trivialization=False.")
            # the reflectors of Q's QR, each column's sign in the diagonal: the sign of R's
            # entry, flipped where LAPACK skipped the reflection (tau = 0) that the forward,
            # whose scalar is never 0, applies anyway
            a, tau = ember.geqrf(q)
            sign = a.diagonal(0, -2, -1).sign()
            a.diagonal(0, -2, -1).copy_(ember.where(tau == 0, -sign, sign))
            return a.mT if wide else a
        if n != k:
            filler = ember.randn(q.shape[:-2] + (n, n - k), dtype=q.dtype)
            base = _orthonormal_part(ember.cat([q, filler], -1))
        else:
            base = q.clone() if _is_orthonormal(q) else _orthonormal_part(q)
        self.base = base
        minus_eye = ember.zeros_like(weight)
        minus_eye.diagonal(0, -2, -1).fill_(-1)
        return minus_eye


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Reparametrize ``module.<name>`` (a matrix or batch of matrices) as an orthogonal or
    unitary one: orthonormal columns if tall, rows if wide. ``orthogonal_map`` is
    "matrix_exp", "cayley" or "householder" (default: "matrix_exp" for square or complex
    weights, else "householder"); ``use_trivialization`` keeps the assigned weight's
    orthogonal part in the buffer ``base`` and parametrizes around it."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of "
                         f"{weight.ndim} dimensions.")
    if orthogonal_map is None:
        square = weight.shape[-2] == weight.shape[-1]
        orthogonal_map = "matrix_exp" if square or weight.is_complex() else "householder"
    if orthogonal_map not in _MAPS:
        raise ValueError(f'orthogonal_map has to be one of "matrix_exp", "cayley", '
                         f'"householder". Got: {orthogonal_map}')
    parametrization = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, parametrization, unsafe=True)
    return module
