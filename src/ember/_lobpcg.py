"""LOBPCG: a few extreme eigenpairs of a symmetric positive definite (generalized) eigenproblem
``A x = λ B x``, by Knyazev's locally optimal block preconditioned conjugate gradient method.

Each step is a Rayleigh-Ritz projection onto the span of the current eigenvector estimates X,
their preconditioned residuals W and the previous step's directions P. "basic" projects
through the Cholesky factor of the Gram matrix of [X, W, P], which fails once that block is
numerically rank deficient; "ortho" first B-orthonormalizes W and P against X and among
themselves by SVQB, dropping the directions they no longer span, so the small eigenproblem
stays well conditioned (Duersch, Shao, Yang and Gu, "A Robust and Efficient Implementation of
LOBPCG", 2018). Everything is written with ember ops, so it runs on any device.

The gradient (for A, with B = I) is that of the exact eigenpairs: see ``LOBPCGAutogradFunction``.
"""

import ember
from ember.autograd.function import Function
from ember.ops._out_dtypes import _C_NAMES

__all__ = ["lobpcg", "LOBPCG"]

_EPS = {ember.float32: 1.2e-07, ember.float64: 2.23e-16}   # the default tol is their root


def lobpcg(A, k=None, B=None, X=None, n=None, iK=None, niter=None, tol=None, largest=None,
           method=None, tracker=None, ortho_iparams=None, ortho_fparams=None,
           ortho_bparams=None):
    """The ``k`` largest (or smallest) eigenvalues ``E`` and eigenvectors ``X`` of the
    symmetric positive definite problem ``A x = λ B x`` (B = I when None), by LOBPCG.

    Args:
        A: (*, m, m) symmetric matrices; B: the same shape, or None for the identity.
        k: how many eigenpairs (default: X's column count, or 1).
        X: (*, m, n) initial eigenvector estimates (default: ``n`` random columns, n = k).
        iK: a (m, m) preconditioner applied to the residuals.
        niter: the most iterations (default 1000; -1 runs until convergence).
        tol: the residual tolerance (default: the square root of A's dtype's epsilon).
        largest: the largest eigenpairs (default) or the smallest.
        method: "ortho" (default, robust) or "basic".
        tracker: called with the ``LOBPCG`` worker after every iteration; setting
            ``worker.bvars["force_stop"] = True`` stops the iterations.
        ortho_iparams, ortho_fparams, ortho_bparams: settings of the "ortho" method:
            ``ortho_i_max`` and ``ortho_j_max`` (rounds of orthogonalization against X and of
            SVQB, 3 each), ``ortho_tol`` (how far from orthonormal is close enough) and
            ``ortho_tol_drop`` (directions below this fraction of the largest are dropped).

    Returns:
        (E, X): (*, k) eigenvalues, in descending order when ``largest`` (else ascending),
        and (*, m, k) B-orthonormal eigenvectors.

    When A (or B) requires grad, the eigenpairs are found for ``(A + A.mT) / 2`` so that A's
    gradient is symmetric; gradients need B to be None.
    """
    settings = (k, X, n, iK, niter, tol, largest, method, tracker,
                ortho_iparams, ortho_fparams, ortho_bparams)
    if A.requires_grad or (B is not None and B.requires_grad):
        A = (A + A.mT) / 2
        B = None if B is None else (B + B.mT) / 2
        return LOBPCGAutogradFunction.apply(A, B, settings)
    with ember.no_grad():
        return _lobpcg(A, B, *settings)


def _lobpcg(A, B, k, X, n, iK, niter, tol, largest, method, tracker, ortho_iparams,
            ortho_fparams, ortho_bparams):
    if A.shape[-2] != A.shape[-1]:
        raise AssertionError(f"A must be square, got shape {A.shape}")
    if B is not None and A.shape != B.shape:
        raise AssertionError(f"A and B must have same shape, got {A.shape} vs {B.shape}")
    dtype = A.dtype if A.dtype.is_floating_point else ember.float32
    tol = _EPS[dtype] ** 0.5 if tol is None else tol
    m = A.shape[-1]
    k = (1 if X is None else X.shape[-1]) if k is None else k
    n = (k if n is None else n) if X is None else X.shape[-1]
    if m < 3 * n:
        raise ValueError(f"LOBPCG algorithm is not applicable when the number of A rows (={m}) "
                         f"is smaller than 3 x the number of requested eigenpairs (={n})")
    method = "ortho" if method is None else method
    iparams = {"m": m, "n": n, "k": k, "niter": 1000 if niter is None else niter}
    fparams = {"tol": tol}
    bparams = {"largest": True if largest is None else largest}
    if method == "ortho":
        iparams.update(ortho_iparams or {})
        fparams.update(ortho_fparams or {})
        bparams.update(ortho_bparams or {})
        for name, default in (("ortho_i_max", 3), ("ortho_j_max", 3)):
            iparams.setdefault(name, default)
        for name in ("ortho_tol", "ortho_tol_drop"):
            fparams.setdefault(name, tol)

    def solve(A_, B_, X_, name):
        X_ = ember.randn((m, n), dtype=dtype, device=A.device) if X_ is None else X_
        if tuple(X_.shape) != (m, n):
            raise AssertionError(f"{name} shape mismatch: got {X_.shape}, expected {(m, n)}")
        worker = LOBPCG(A_, B_, X_, iK, iparams, fparams, bparams, method, tracker)
        worker.run()
        return worker.E[:k], worker.X[:, :k]

    if A.ndim == 2:
        return solve(A, B, X, "X")
    batch = A.shape[:-2]
    flat = A.reshape((-1, m, m))
    Bs = None if B is None else B.reshape((-1, m, m))
    Xs = None if X is None else X.reshape((-1,) + tuple(X.shape[-2:]))
    results = []
    for i in range(flat.shape[0]):
        iparams["batch_index"] = i
        results.append(solve(flat[i], None if Bs is None else Bs[i],
                             None if Xs is None else Xs[i], "X_"))
    E = ember.stack([e for e, _ in results]).reshape(batch + (-1,))
    V = ember.stack([v for _, v in results]).reshape(batch + (m, -1))
    return E, V


def _mm(M, X):
    """``M @ X``; operands of two dtypes are an error (ember would promote)."""
    if M.dtype is not X.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{_C_NAMES.get(M.dtype, M.dtype)} != {_C_NAMES.get(X.dtype, X.dtype)}")
    return M @ X


class LOBPCG:
    """The state of one LOBPCG run, which ``tracker`` sees after every iteration.

    ``iparams``, ``fparams``, ``bparams``: the int, float and bool settings; ``ivars``,
    ``fvars``, ``bvars``, ``tvars``: the int, float, bool and tensor iteration variables
    (``ivars["istep"]``, ``ivars["converged_count"]``, ``tvars["rerr"]``, the relative
    residual of each pair); ``A``, ``B``, ``iK``: the operands; ``E``, ``X``, ``S``, ``R``: the
    eigenvalue and eigenvector estimates, the basis of the last Rayleigh-Ritz projection and
    the residuals.
    """

    def __init__(self, A, B, X, iK, iparams, fparams, bparams, method, tracker):
        self.A, self.B, self.iK = A, B, iK
        self.iparams, self.fparams, self.bparams = iparams, fparams, bparams
        self.method, self.tracker = method, tracker
        self.X = X
        self.E = ember.zeros(iparams["n"], dtype=X.dtype, device=X.device)
        self.R = ember.zeros_like(X)
        self.S = X
        self.P = None                   # the previous step's search directions
        self.ivars = {"istep": 0}
        self.fvars = {}
        self.bvars = {}
        self.tvars = {}

    def run(self):
        """Iterate until ``k`` pairs converged, ``niter`` ran out or the tracker stops it."""
        self.update()
        while not self.stop_iteration():
            self.update()

    def stop_iteration(self):
        """Whether to stop: forced by the tracker, out of iterations, or converged."""
        return (self.bvars.get("force_stop", False) or self.ivars["iterations_left"] == 0
                or self.ivars["converged_count"] >= self.iparams["k"])

    def update(self):
        """One iteration (the first only projects onto the initial X); calls the tracker."""
        if self.ivars["istep"] == 0:
            x_norm = float(ember.linalg.norm(self.X))
            self.fvars["X_norm"] = x_norm
            self.fvars["A_norm"] = float(ember.linalg.norm(_mm(self.A, self.X))) * x_norm ** -1
            self.fvars["B_norm"] = float(ember.linalg.norm(self._b(self.X))) * x_norm ** -1
            self.ivars["iterations_left"] = self.iparams["niter"]
            self.ivars["converged_count"] = 0
            self.S = self.X
            self._project(self.X, gram=True)
        else:
            self._step()
        self._residuals()
        self.ivars["iterations_left"] -= 1
        self.ivars["istep"] += 1
        if self.tracker is not None:
            self.tracker(self)

    def _b(self, U):
        return U if self.B is None else _mm(self.B, U)

    def _step(self):
        """Project onto X and the new directions: the unconverged pairs' (preconditioned)
        residuals and last steps."""
        active = self.ivars["converged_count"]
        W = self.R[:, active:]
        if self.iK is not None:
            W = _mm(self.iK, W)
        new = W if self.P is None else ember.cat([W, self.P[:, active:]], -1)
        if self.method == "ortho":
            self.S = ember.cat([self.X, self._orthonormal(new)], -1)
            self._project(self.S, gram=False)
        else:
            self.S = ember.cat([self.X, new], -1)
            self._project(self.S, gram=True)

    def _project(self, S, gram):
        """Rayleigh-Ritz on the span of S: X, E become the n best Ritz pairs, and P their part
        outside the previous X. ``gram``: S is not B-orthonormal, so the projection goes
        through the Cholesky factor of its (scaled) Gram matrix."""
        n = self.iparams["n"]
        H = S.mT @ _mm(self.A, S)
        if gram:
            G = S.mT @ self._b(S)
            scale = G.diagonal().rsqrt()
            L = ember.linalg.cholesky(G * scale[:, None] * scale)
            H = ember.linalg.solve_triangular(L, H * scale[:, None] * scale, upper=False)
            H = ember.linalg.solve_triangular(L, H.mT, upper=False)
        theta, Z = ember.linalg.eigh((H + H.mT) / 2)
        if self.bparams["largest"]:
            theta, Z = theta.flip(-1), Z.flip(-1)
        Z = Z[:, :n]
        if gram:
            Z = scale[:, None] * ember.linalg.solve_triangular(L.mT, Z, upper=True)
        self.E = theta[:n]
        self.X = S @ Z
        self.P = None if S.shape[-1] == n else S[:, n:] @ Z[n:]

    def _orthonormal(self, U):
        """The span of U outside X's, as B-orthonormal columns B-orthogonal to X."""
        BX = self._b(self.X)
        tol = self.fparams["ortho_tol"]
        for _ in range(self.iparams["ortho_i_max"]):
            U = U - self.X @ (BX.mT @ U)
            for _ in range(self.iparams["ortho_j_max"]):
                U = self._svqb(U)
                eye = ember.eye(U.shape[-1], dtype=U.dtype, device=U.device)
                if float(ember.linalg.norm(U.mT @ self._b(U) - eye)) <= tol:
                    break
            if U.shape[-1] == 0 or float(ember.linalg.norm(BX.mT @ U)) <= tol:
                break
        return U

    def _svqb(self, U):
        """U B-orthonormalized through the eigendecomposition of its scaled Gram matrix,
        without the directions whose eigenvalues fall below ``ortho_tol_drop`` of the
        largest."""
        if U.shape[-1] == 0:
            return U
        G = U.mT @ self._b(U)
        norms = G.diagonal()
        scale = ember.where(norms > 0, norms.clamp_min(ember.finfo(U.dtype).tiny).rsqrt(), 0)
        theta, Z = ember.linalg.eigh(G * scale[:, None] * scale)
        keep = theta > self.fparams["ortho_tol_drop"] * theta[-1].clamp_min(0)
        return (U * scale) @ (Z[:, keep] * theta[keep].rsqrt())

    def _residuals(self):
        """R = A X - B X E, and how many leading pairs have converged: those whose residual
        is small relative to the norms of A, B and X (a backward-stable criterion)."""
        self.R = _mm(self.A, self.X) - self._b(self.X) * self.E
        rerr = ember.linalg.norm(self.R, dim=0) / (ember.linalg.norm(self.X, dim=0) * (
            self.fvars["A_norm"] + self.E.abs() * self.fvars["B_norm"]))
        converged = (rerr < self.fparams["tol"]).tolist()
        count = converged.index(False) if False in converged else len(converged)
        self.ivars["converged_count"] = count
        self.tvars["rerr"] = rerr


class LOBPCGAutogradFunction(Function):
    """LOBPCG's eigenpairs with the gradient of exact ones (see ``_gradient``); named as
    PyTorch's, so that outputs show ``grad_fn=<LOBPCGAutogradFunctionBackward>``."""

    @staticmethod
    def forward(ctx, A, B, settings):
        E, X = _lobpcg(A, B, *settings)
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(A, B, E, X)
        return E, X

    @staticmethod
    def backward(ctx, grad_E, grad_X):
        A, B, E, X = ctx.saved_tensors
        if B is not None:
            raise ValueError("lobpcg.backward does not support backward with B != I yet.")
        return _gradient(A, E, X, grad_E, grad_X), None, None


def _gradient(A, E, U, grad_E, grad_U):
    """The gradient for A of the eigenpairs (E, U) of a symmetric A, for the gradients of E
    and U (either None).

    With eigenpairs (λ_j, u_j) of A, dλ_i = u_i' dA u_i and du_i = Σ_{j≠i} u_j u_j' dA u_i /
    (λ_i - λ_j), over all j, not only the k found. So the gradient is U diag(grad_E) U' +
    Σ_i w_i u_i', where w_i = Σ_{j≠i} u_j u_j' g_i / (λ_i - λ_j) for g_i = grad_U[:, i]: the
    solution of (λ_i - A) w = (I - u_i u_i') g_i orthogonal to u_i, which needs no other
    eigenpair. Written with ember ops, so it is differentiable in turn.
    """
    grad = ember.zeros_like(A)
    if grad_E is not None:
        grad = grad + (U * grad_E.unsqueeze(-2)) @ U.mT
    if grad_U is not None:
        m = A.shape[-1]
        u = U.mT.unsqueeze(-1)                              # (*, k, m, 1): one u_i each
        along = u @ u.mT
        away = ember.eye(m, dtype=A.dtype, device=A.device) - along
        shifted = E[..., None, None] * ember.eye(m, dtype=A.dtype, device=A.device) \
            - A.unsqueeze(-3)
        w = ember.linalg.solve(away @ shifted @ away + along, away @ grad_U.mT.unsqueeze(-1))
        grad = grad + w.squeeze(-1).mT @ U.mT
    return grad
