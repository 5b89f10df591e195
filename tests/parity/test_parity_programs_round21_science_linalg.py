"""Programs from scientific computing (continued from test_parity_programs_round21_science.py), run
once with `torch` bound to ember and once to PyTorch from the same NumPy data: differentiable
linear algebra in float64 (a Kalman filter through cholesky, solve_triangular and
cholesky_solve; least squares by lstsq, normal equations, pinv and QR; rotation learning by
matrix_exp of a skew-symmetric generator; eigh, slogdet and logdet losses; gradcheck of the
pieces; a 1-D Poisson problem by conjugate gradients on a sparse Laplacian) and implicit layers
(log-domain Sinkhorn with cdist costs, a custom Function solving the adjoint fixed point, and
the implicit-layers tutorial's deep-equilibrium model with Anderson acceleration and a
register_hook backward); with what they met: sparse.spdiags and vmap's batching rule for
diagonal_scatter."""

import warnings

import numpy as np
import pytest

import ember
from tests.parity._compare import outcome
from tests.parity._programs import fill_, normal
from tests.parity.test_parity_programs_round21_science import assert_same_results

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def linalg_program(torch):
    """Kalman filter, least squares, rotation learning, eigen/slogdet losses, in float64."""
    rng = np.random.default_rng(24)
    res = {}
    f64 = torch.float64

    def t(*shape, scale=1.0):
        return torch.from_numpy(rng.standard_normal(shape) * scale)

    # --- a Kalman filter with a learnable transition, NLL through cholesky and solves
    n, m, T = 3, 2, 8
    A = (0.9 * torch.eye(n, dtype=f64) + t(n, n, scale=0.05)).requires_grad_()
    H = t(m, n, scale=0.5).requires_grad_()
    log_q = torch.full((n,), -2.0, dtype=f64, requires_grad=True)
    log_r = torch.tensor([-1.0, -1.5], dtype=f64, requires_grad=True)
    ys = t(T, m)

    def kalman_nll():
        Q, R = torch.diag(log_q.exp()), torch.diag_embed(log_r.exp())
        x, P = torch.zeros(n, 1, dtype=f64), torch.eye(n, dtype=f64)
        nll = 0.0
        for k in range(T):
            x = A @ x
            P = A @ P @ A.T + Q
            S = H @ P @ H.mT + R
            L = torch.linalg.cholesky(S)
            innov = ys[k].unsqueeze(-1) - H @ x
            z = torch.linalg.solve_triangular(L, innov, upper=False)
            nll = nll + 0.5 * (z ** 2).sum() + torch.log(torch.diagonal(L)).sum()
            K = torch.cholesky_solve(H @ P, L).mT          # P H^T S^-1
            x = x + K @ innov
            I_KH = torch.eye(n, dtype=f64) - K @ H
            P = I_KH @ P @ I_KH.T + K @ R @ K.T            # Joseph form
        return nll, x, P

    opt = torch.optim.SGD([A, H, log_q, log_r], lr=1e-2, momentum=0.5)
    nlls = []
    for _ in range(3):
        opt.zero_grad()
        nll, x_final, P_final = kalman_nll()
        nll.backward()
        opt.step()
        nlls.append(nll.item())
    res["kalman_nll"] = nlls
    res["kalman_grads"] = [A.grad, H.grad, log_q.grad, log_r.grad]
    res["kalman_state"] = [x_final.detach(), P_final.detach()]

    # --- least squares three ways; gradients of the solution
    X = t(10, 3).requires_grad_()
    y = t(10, 2)
    sol = torch.linalg.lstsq(X, y, driver="gelsd")
    res["lstsq_meta"] = [str(tuple(sol.solution.shape)), str(tuple(sol.residuals.shape)),
                         str(sol.rank.dtype).split(".")[-1], str(int(sol.rank))]
    res["lstsq_sv"] = sol.singular_values
    w_normal = torch.linalg.solve(X.T @ X, X.T @ y)
    w_pinv = torch.linalg.pinv(X) @ y
    Qm, Rm = torch.linalg.qr(X)
    w_qr = torch.linalg.solve_triangular(Rm, Qm.T @ y, upper=True)
    res["w"] = [sol.solution.detach(), w_normal.detach(), w_pinv.detach(), w_qr.detach()]
    loss = sol.solution.square().sum() + w_normal.sum() + w_pinv.norm() + w_qr.abs().sum()
    (gX,) = torch.autograd.grad(loss, X)
    res["lstsq_grad"] = gX
    ridge = torch.linalg.solve(X.T @ X + 0.1 * torch.eye(3, dtype=f64), X.T @ y, left=True)
    res["ridge"] = ridge.detach()
    res["solve_right"] = torch.linalg.solve(t(3, 3) + 3 * torch.eye(3, dtype=f64), t(2, 3),
                                            left=False)
    res["solve_ex"] = [torch.linalg.solve_ex(t(3, 3) + 3 * torch.eye(3, dtype=f64),
                                             t(3))[1].item()]

    # --- rotation learning: matrix_exp of a skew-symmetric generator (Procrustes by descent)
    true_R = torch.linalg.matrix_exp(torch.tensor([[0.0, -0.4, 0.2], [0.4, 0.0, -0.3],
                                                   [-0.2, 0.3, 0.0]], dtype=f64))
    pts = t(20, 3)
    target = pts @ true_R.T
    w = torch.zeros(3, dtype=f64, requires_grad=True)
    opt = torch.optim.Adam([w], lr=0.1)
    rot_losses = []
    for _ in range(6):
        Wm = torch.zeros(3, 3, dtype=f64)
        Wm[0, 1], Wm[0, 2], Wm[1, 2] = -w[2], w[1], -w[0]
        Wm = Wm - Wm.T
        R = torch.linalg.matrix_exp(Wm)
        loss = torch.nn.functional.mse_loss(pts @ R.T, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rot_losses.append(loss.item())
    res["rot_losses"] = rot_losses
    res["rot_w"] = w.detach()
    res["rot_orth"] = (R.T @ R - torch.eye(3, dtype=f64)).abs().max()
    res["rot_det"] = torch.linalg.det(R)
    # closed-form Procrustes by SVD, with the reflection fix
    U, S, Vh = torch.linalg.svd(pts.T @ target)
    d = torch.sign(torch.linalg.det(Vh.T @ U.T))
    Dm = torch.diag(torch.stack([torch.ones((), dtype=f64), torch.ones((), dtype=f64), d]))
    res["procrustes"] = Vh.T @ Dm @ U.T

    # --- spectral losses: eigh values only, with vectors; slogdet; logdet of an SPD
    B = t(5, 5).requires_grad_()
    S = B @ B.mT + 0.5 * torch.eye(5, dtype=f64)
    evals = torch.linalg.eigvalsh(S)
    evals2, evecs = torch.linalg.eigh(S, UPLO="U")
    top = evecs[:, -1]
    spec_loss = evals.max() - evals.min() + (top * torch.arange(5, dtype=f64)).sum() ** 2
    sign, logabsdet = torch.linalg.slogdet(B)
    spec_loss = spec_loss + logabsdet + torch.logdet(S) + 0.1 * torch.trace(S)
    spec_loss.backward()
    res["evals"] = [evals.detach(), evals2.detach()]
    res["slogdet"] = [sign.detach(), logabsdet.detach()]
    res["spec_grad"] = B.grad
    res["cond"] = [torch.linalg.cond(S.detach()).item(),
                   torch.linalg.matrix_rank(S.detach()).item(),
                   torch.linalg.matrix_norm(S.detach(), ord="nuc").item(),
                   torch.linalg.norm(S.detach(), ord=2).item()]
    # Gaussian log-likelihood via MultivariateNormal(scale_tril=...)
    L = torch.linalg.cholesky(S)
    mvn = torch.distributions.MultivariateNormal(torch.zeros(5, dtype=f64), scale_tril=L)
    res["mvn_logp"] = mvn.log_prob(t(4, 5))
    res["inv_ex"] = torch.linalg.inv_ex(S.detach()).inverse
    res["cholesky_ex_info"] = [torch.linalg.cholesky_ex(-S.detach()).info.item()]
    res["dtypes"] = [str(x.dtype).split(".")[-1] for x in (evals, sign, L, sol.rank)]

    # --- a 1-D Poisson problem: the finite-difference Laplacian by spdiags, conjugate
    # gradients by sparse products, the source learned through the solve
    n_grid = 12
    h = 1.0 / (n_grid + 1)
    stencil = torch.tensor([[-1.0] * n_grid, [2.0] * n_grid, [-1.0] * n_grid],
                           dtype=f64) / h ** 2
    lap = torch.sparse.spdiags(stencil, torch.tensor([-1, 0, 1]), (n_grid, n_grid))
    res["laplacian_meta"] = [str(lap.layout).split(".")[-1], str(lap.is_coalesced()),
                             str(lap._nnz())]
    lap = lap.coalesce()
    grid = torch.linspace(h, 1 - h, n_grid, dtype=f64)
    u_true = torch.sin(torch.pi * grid)
    source = torch.ones(n_grid, dtype=f64, requires_grad=True)
    opt = torch.optim.Adam([source], lr=0.5)
    poisson_losses = []
    for _ in range(3):
        u = torch.zeros(n_grid, 1, dtype=f64)
        r = source[:, None] - torch.sparse.mm(lap, u)
        p, rs = r, (r * r).sum()
        for _ in range(n_grid // 2):          # (a full n_grid steps would reach 0 / 0)
            Ap = torch.sparse.mm(lap, p)
            alpha = rs / (p * Ap).sum()
            u, r = u + alpha * p, r - alpha * Ap
            rs_new = (r * r).sum()
            p, rs = r + rs_new / rs * p, rs_new
        loss = (u.squeeze(1) - u_true).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        poisson_losses.append(loss.item())
    res["poisson_losses"] = poisson_losses
    res["poisson_source"] = source.detach()
    csr = lap.to_sparse_csr()
    res["laplacian_csr"] = [csr.crow_indices(), csr.col_indices(), csr.values(),
                            csr @ u_true]
    # gradcheck of the pieces that matter, as such code checks its own derivations
    small = t(3, 3)
    spd = (small @ small.T + torch.eye(3, dtype=f64)).requires_grad_()
    rhs = t(3, 2).requires_grad_()
    def sym(a):                         # cholesky and eigh read one triangle only
        return (a + a.mT) / 2

    res["gradcheck"] = [
        torch.autograd.gradcheck(
            lambda a, b: torch.cholesky_solve(b, torch.linalg.cholesky(sym(a))), (spd, rhs)),
        torch.autograd.gradcheck(lambda a: torch.linalg.eigh(sym(a))[0], (spd,)),
        torch.autograd.gradcheck(lambda a: torch.linalg.eigh(a)[0], (spd,),
                                 raise_exception=False),
        torch.autograd.gradcheck(torch.linalg.matrix_exp, (small.clone().requires_grad_(),)),
    ]
    return res


def implicit_program(torch):
    """Log-domain Sinkhorn between point clouds, and a deep-equilibrium layer whose backward
    solves the adjoint fixed point in a register_hook."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(25)
    res = {}

    # --- entropic optimal transport (as geomloss / POT's torch backend write it by hand)
    def sinkhorn_log(a, b, C, eps, n_iters):
        log_a, log_b = a.log(), b.log()
        f = torch.zeros_like(a)
        g = torch.zeros_like(b)
        for _ in range(n_iters):
            f = -eps * torch.logsumexp((g[..., None, :] - C) / eps + log_b[..., None, :], dim=-1)
            g = -eps * torch.logsumexp((f[..., :, None] - C) / eps + log_a[..., :, None], dim=-2)
        log_P = (f[..., :, None] + g[..., None, :] - C) / eps + log_a[..., :, None] \
            + log_b[..., None, :]
        return f, g, log_P.exp()

    x = normal(torch, rng, 2, 12, 3)
    y = (normal(torch, rng, 2, 9, 3) + 0.5).requires_grad_()
    a = torch.softmax(normal(torch, rng, 2, 12), dim=-1)
    b = torch.full((2, 9), 1.0 / 9)
    C = torch.cdist(x, y, p=2) ** 2
    f, g, P = sinkhorn_log(a, b, C, eps=0.1, n_iters=60)
    cost = (P * C).sum(dim=(-2, -1))
    dual = (f * a).sum(-1) + (g * b).sum(-1)
    cost.sum().backward()
    res["ot_cost"] = cost
    res["ot_dual"] = dual
    res["ot_marginals"] = [P.sum(-1) - a, P.sum(-2) - b]
    res["ot_grad"] = y.grad
    res["ot_plan_argmax"] = P.argmax(dim=-1).flatten().tolist()
    # the L1 cost (Wasserstein-1 on a grid) and a mixed cdist / pdist check
    C1 = torch.cdist(x, y.detach(), p=1)
    res["cdist_p1"] = C1
    res["cdist_pinf"] = torch.cdist(x[0], y[0].detach(), p=float("inf"))
    res["cdist_mm"] = torch.cdist(x, y.detach(), compute_mode="use_mm_for_euclid_dist")
    res["pdist"] = F.pdist(x[0])
    yy = y.detach()[0].clone().requires_grad_()
    xx = x[0].clone().requires_grad_()
    d1 = torch.cdist(xx, yy, p=1)
    d2 = torch.cdist(xx, yy, p=2)
    (d1.sum() + (d2 * torch.arange(9.0)).sum()).backward()
    res["cdist_grads"] = [xx.grad, yy.grad]
    # soft-min barycentric projection and debiased divergence
    _, _, Pxx = sinkhorn_log(a, a, torch.cdist(x, x) ** 2, eps=0.1, n_iters=40)
    res["self_cost"] = (Pxx * torch.cdist(x, x) ** 2).sum(dim=(1, 2))
    bary = (P / P.sum(-1, keepdim=True)) @ y.detach()
    res["bary"] = bary

    # --- implicit differentiation by hand: a custom Function whose backward solves the
    # adjoint fixed point with autograd.grad under enable_grad
    class TanhFixedPoint(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, W):
            z = torch.zeros_like(x)
            for _ in range(60):
                z = torch.tanh(z @ W.T + x)
            ctx.save_for_backward(z, x, W)
            return z

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, grad):
            z, x, W = ctx.saved_tensors
            with torch.enable_grad():
                z0, x0, W0 = (t.detach().requires_grad_() for t in (z, x, W))
                f = torch.tanh(z0 @ W0.T + x0)
            g = grad
            for _ in range(60):
                g = torch.autograd.grad(f, z0, g, retain_graph=True)[0] + grad
            return torch.autograd.grad(f, (x0, W0), g)

    W = (torch.from_numpy(rng.standard_normal((5, 5))) * 0.2).requires_grad_()
    xin = torch.from_numpy(rng.standard_normal((3, 5))).requires_grad_()
    z = TanhFixedPoint.apply(xin, W)
    (z * torch.arange(5.0, dtype=torch.float64)).sum().backward()
    implicit = [xin.grad.clone(), W.grad.clone()]
    xin.grad = W.grad = None
    zu = torch.zeros_like(xin)
    for _ in range(60):
        zu = torch.tanh(zu @ W.T + xin)
    (zu * torch.arange(5.0, dtype=torch.float64)).sum().backward()
    res["implicit_grads"] = implicit
    res["unrolled_gap"] = [(implicit[0] - xin.grad).abs().max().item() < 1e-10,
                           (implicit[1] - W.grad).abs().max().item() < 1e-10]
    res["implicit_fn"] = [type(z.grad_fn).__name__, str(z.dtype).split(".")[-1]]
    res["implicit_gradcheck"] = [torch.autograd.gradcheck(
        TanhFixedPoint.apply, (xin.detach()[:1].requires_grad_(), W.detach().requires_grad_()))]

    # --- deep equilibrium layer (the implicit-layers tutorial's DEQFixedPoint)
    def anderson(fn, x0, m=4, lam=1e-4, max_iter=40, tol=1e-5, beta=1.0):
        bsz, d, L = x0.shape
        X = torch.zeros(bsz, m, d * L, dtype=x0.dtype, device=x0.device)
        Fm = torch.zeros(bsz, m, d * L, dtype=x0.dtype, device=x0.device)
        X[:, 0], Fm[:, 0] = x0.reshape(bsz, -1), fn(x0).reshape(bsz, -1)
        X[:, 1], Fm[:, 1] = Fm[:, 0], fn(Fm[:, 0].reshape_as(x0)).reshape(bsz, -1)
        Hm = torch.zeros(bsz, m + 1, m + 1, dtype=x0.dtype, device=x0.device)
        Hm[:, 0, 1:] = Hm[:, 1:, 0] = 1
        ym = torch.zeros(bsz, m + 1, 1, dtype=x0.dtype, device=x0.device)
        ym[:, 0] = 1
        res_hist = []
        for k in range(2, max_iter):
            n = min(k, m)
            G = Fm[:, :n] - X[:, :n]
            Hm[:, 1:n + 1, 1:n + 1] = torch.bmm(G, G.transpose(1, 2)) + lam * torch.eye(
                n, dtype=x0.dtype, device=x0.device)[None]
            alpha = torch.linalg.solve(Hm[:, :n + 1, :n + 1], ym[:, :n + 1])[:, 1:n + 1, 0]
            X[:, k % m] = beta * (alpha[:, None] @ Fm[:, :n])[:, 0] + (1 - beta) * (
                alpha[:, None] @ X[:, :n])[:, 0]
            Fm[:, k % m] = fn(X[:, k % m].reshape_as(x0)).reshape(bsz, -1)
            res_hist.append((Fm[:, k % m] - X[:, k % m]).norm().item() / (
                1e-5 + Fm[:, k % m].norm().item()))
            if res_hist[-1] < tol:
                break
        return X[:, k % m].view_as(x0), res_hist

    class ResNetLayer(nn.Module):
        def __init__(self, n_channels, n_inner_channels, kernel_size=3, num_groups=4):
            super().__init__()
            self.conv1 = nn.Conv1d(n_channels, n_inner_channels, kernel_size,
                                   padding=kernel_size // 2, bias=False)
            self.conv2 = nn.Conv1d(n_inner_channels, n_channels, kernel_size,
                                   padding=kernel_size // 2, bias=False)
            self.norm1 = nn.GroupNorm(num_groups, n_inner_channels)
            self.norm2 = nn.GroupNorm(num_groups, n_channels)
            self.norm3 = nn.GroupNorm(num_groups, n_channels)
            self.conv1.weight.data.normal_(0, 0.01)
            self.conv2.weight.data.normal_(0, 0.01)

        def forward(self, z, x):
            y = self.norm1(F.relu(self.conv1(z)))
            return self.norm3(F.relu(z + self.norm2(x + self.conv2(y))))

    class DEQFixedPoint(nn.Module):
        def __init__(self, f, solver, **kwargs):
            super().__init__()
            self.f, self.solver, self.kwargs = f, solver, kwargs
            self.forward_res, self.backward_res = [], []

        def forward(self, x):
            with torch.no_grad():
                z, self.forward_res = self.solver(
                    lambda z: self.f(z, x), torch.zeros_like(x), **self.kwargs)
            z = self.f(z, x)
            z0 = z.clone().detach().requires_grad_()
            f0 = self.f(z0, x)

            def backward_hook(grad):
                g, self.backward_res = self.solver(
                    lambda y: torch.autograd.grad(f0, z0, y, retain_graph=True)[0] + grad,
                    grad, **self.kwargs)
                return g

            z.register_hook(backward_hook)
            return z

    layer = ResNetLayer(8, 12, kernel_size=3)
    fill_(torch, [layer.conv1.weight, layer.conv2.weight], rng, scale=0.01)
    deq = DEQFixedPoint(layer, anderson, tol=1e-3, max_iter=30, m=5)
    head = nn.Sequential(nn.Flatten(), nn.Linear(8 * 10, 3))
    fill_(torch, head, rng, scale=0.1)
    stem = nn.Conv1d(2, 8, 3, padding=1)
    fill_(torch, stem, rng, scale=0.3)
    model = nn.Sequential(stem, nn.GroupNorm(4, 8), deq, head)
    inputs = normal(torch, rng, 4, 2, 10)
    labels = torch.tensor([0, 2, 1, 2])
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses, f_iters, b_iters = [], [], []
    for _ in range(3):
        opt.zero_grad()
        logits = model(inputs)
        loss = F.cross_entropy(logits, labels, label_smoothing=0.05)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        f_iters.append(len(deq.forward_res))
        b_iters.append(len(deq.backward_res))
    res["deq_losses"] = losses
    res["deq_iters"] = f_iters + b_iters
    res["deq_params"] = torch.cat([p.detach().flatten() for p in model.parameters()])
    model.eval()                  # the tutorial evaluates with grad mode on: the hook needs it
    z_star = deq(stem(inputs))
    res["deq_residual"] = ((layer(z_star, stem(inputs)) - z_star).norm() / z_star.norm()).item()
    res["deq_forward_res"] = deq.forward_res
    return res



def test_linalg_program_matches_torch():
    # float64 throughout
    assert_same_results(linalg_program(ember), linalg_program(torch), rtol=1e-9, atol=1e-12)


def test_implicit_program_matches_torch():
    # Sinkhorn divides costs by eps = 0.1 over 60 iterations: in float32 both libraries'
    # transport gradients are ~4e-4 from the float64 values, so they are compared at 1e-3;
    # the marginal errors are float32 rounding of sums near 1; the DEQ's Adam steps divide by
    # the square roots of tiny second moments
    looser = {"ot_grad": (1e-3, 1e-5), "bary": (1e-3, 1e-5), "ot_marginals": (0, 1e-5),
              **{k: (1e-4, 1e-6) for k in ("deq_params", "deq_residual", "deq_forward_res")}}
    assert_same_results(implicit_program(ember), implicit_program(torch), rtol=1e-5, atol=1e-6,
                        looser=looser)


def _coo(s):
    """A sparse COO tensor's layout, coalesced flag, raw indices and values, and dense form."""
    return [str(s.layout).rsplit(".", 1)[-1], s.is_coalesced(), s._indices().tolist(),
            s._values().tolist(), s.to_dense().tolist(), str(s.dtype).rsplit(".", 1)[-1]]


@pytest.mark.parametrize("diagonals, offsets, shape", [
    ("arange9", [0, -1, -2], (3, 3)),           # the documented examples
    ("arange9", [0, 1, 2], (5, 5)),
    ("first2", [1, -1], (3, 4)),                # wider than tall
    ("first2", [2, -1], (2, 5)),
    ("arange9_long", [0, 1, 2], (2, 3)),
    ("row0", 1, (3, 3)),                         # a vector of one diagonal, a 0-dim offset
    ("empty", [], (3, 3)),
    ("arange9", [0, 1, 2], (0, 3)),
])
def test_spdiags_matches_torch(diagonals, offsets, shape):
    # (torch writes out of bounds for a negative offset whose diagonal runs past the last
    # column of a tall matrix, e.g. offsets [2, -1] for shape (5, 2); not compared)
    def build(lib):
        d = {"arange9": lib.arange(9.0).reshape(3, 3), "first2": lib.arange(9.0)[:6].reshape(2, 3),
             "arange9_long": lib.arange(9).reshape(3, 3), "row0": lib.arange(3.0),
             "empty": lib.zeros(0, 3)}[diagonals]
        return _coo(lib.sparse.spdiags(d, lib.tensor(offsets, dtype=lib.int64), shape))
    assert build(ember) == build(torch)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta state")
@pytest.mark.parametrize("layout", ["sparse_csr", "sparse_csc"])
def test_spdiags_compressed_layouts_match_torch(layout):
    def build(lib):
        s = lib.sparse.spdiags(lib.arange(9.0).reshape(3, 3), lib.tensor([0, 1, -1]), (3, 3),
                               layout=getattr(lib, layout))
        return [str(s.layout).rsplit(".", 1)[-1], s.values().tolist(), s.to_dense().tolist(),
                *(t.tolist() for t in ((s.crow_indices(), s.col_indices()) if layout ==
                                       "sparse_csr" else (s.ccol_indices(), s.row_indices())))]
    assert build(ember) == build(torch)


@pytest.mark.parametrize("case", ["duplicate offsets", "count mismatch", "2-d offsets",
                                  "float offsets", "int32 offsets", "3-d shape",
                                  "3-d diagonals", "list offsets", "strided layout",
                                  "bsr layout"])
def test_spdiags_errors_match_torch(case):
    def call(lib):
        d, off = lib.arange(9.0).reshape(3, 3), lib.tensor([0, 1, 2])
        args = {"duplicate offsets": (d, lib.tensor([0, 0, 1]), (3, 3)),
                "count mismatch": (d, lib.tensor([0, 1]), (3, 3)),
                "2-d offsets": (d, off[None], (3, 3)),
                "float offsets": (d, off.float(), (3, 3)),
                "int32 offsets": (d, off.int(), (3, 3)),
                "3-d shape": (d, off, (3, 3, 3)),
                "3-d diagonals": (d[None], lib.tensor([0]), (3, 3)),
                "list offsets": (d, [0, 1, 2], (3, 3)),
                "strided layout": (d, off, (3, 3), lib.strided),
                "bsr layout": (d, off, (3, 3), lib.sparse_bsr)}[case]
        return lib.sparse.spdiags(*args)
    ours, theirs = outcome(call, ember), outcome(call, torch)
    assert isinstance(theirs, tuple) and ours == theirs


@pytest.mark.parametrize("batched", ["both", "input", "src"])
@pytest.mark.parametrize("offset, dim1, dim2", [(0, 0, 1), (1, 0, 2), (-1, 2, 1), (0, -1, -2)])
def test_vmap_of_diagonal_scatter_has_a_batching_rule(offset, dim1, dim2, batched):
    # jacfwd(jacrev(...)) of QR's R meets it: PyTorch batches it without the fallback warning
    def run(lib):
        rng = np.random.default_rng(7)
        xs = lib.from_numpy(rng.standard_normal((2, 3, 4, 5)))
        x1 = lib.from_numpy(rng.standard_normal((3, 4, 5)))
        srcs = lib.diagonal(lib.from_numpy(rng.standard_normal((2, 3, 4, 5))), offset,
                            dim1 + 1 if dim1 >= 0 else dim1, dim2 + 1 if dim2 >= 0 else dim2)

        def f(x, src):
            return lib.diagonal_scatter(x, src, offset, dim1, dim2)
        args = {"both": (xs, srcs), "input": (xs, srcs[0]), "src": (x1, srcs)}[batched]
        dims = {"both": (0, 0), "input": (0, None), "src": (None, 0)}[batched]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return lib.func.vmap(f, in_dims=dims)(*args).numpy()
    np.testing.assert_array_equal(run(ember), run(torch))
