"""Implicit layers written as their reference repositories write them in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights: the implicit-layers
tutorial's DEQ (fixed point under no_grad, Anderson acceleration on batched small systems with
torch.linalg.solve, implicit backward by a hook on the output solving the adjoint fixed point
with autograd.grad(..., retain_graph=True)), Jacobian regularisation with a Hutchinson estimator
(create_graph), OptNet's equality-constrained QP as a custom autograd.Function solving the KKT
system, a monotone operator network (monDEQ forward-backward splitting with lu_factor/lu_solve)
and differentiable convex optimisation by unrolled projected gradient onto the simplex.
The sibling _meta covers implicit MAML, IFT hyperparameter optimisation, learned optimisers and
the hand-written Neural ODE adjoint."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _anderson(torch, f, x0, m=5, lam=1e-4, max_iter=40, tol=1e-5, beta=1.0):
    """The implicit-layers tutorial's Anderson acceleration (batched bmm + linalg.solve)."""
    bsz, n_el = x0.shape[0], x0[0].numel()
    X = torch.zeros(bsz, m, n_el, dtype=x0.dtype, device=x0.device)
    F = torch.zeros(bsz, m, n_el, dtype=x0.dtype, device=x0.device)
    X[:, 0], F[:, 0] = x0.reshape(bsz, -1), f(x0).reshape(bsz, -1)
    X[:, 1], F[:, 1] = F[:, 0], f(F[:, 0].reshape_as(x0)).reshape(bsz, -1)
    H = torch.zeros(bsz, m + 1, m + 1, dtype=x0.dtype, device=x0.device)
    H[:, 0, 1:] = H[:, 1:, 0] = 1
    y = torch.zeros(bsz, m + 1, 1, dtype=x0.dtype, device=x0.device)
    y[:, 0] = 1
    res = []
    k = 1
    for k in range(2, max_iter):
        n = min(k, m)
        G = F[:, :n] - X[:, :n]
        H[:, 1:n + 1, 1:n + 1] = torch.bmm(G, G.transpose(1, 2)) + lam * torch.eye(
            n, dtype=x0.dtype, device=x0.device)[None]
        alpha = torch.linalg.solve(H[:, :n + 1, :n + 1], y[:, :n + 1])[:, 1:n + 1, 0]
        X[:, k % m] = beta * (alpha[:, None] @ F[:, :n])[:, 0] + \
            (1 - beta) * (alpha[:, None] @ X[:, :n])[:, 0]
        F[:, k % m] = f(X[:, k % m].reshape_as(x0)).reshape(bsz, -1)
        res.append((F[:, k % m] - X[:, k % m]).norm().item() /
                   (1e-5 + F[:, k % m].norm().item()))
        if res[-1] < tol:
            break
    return X[:, k % m].view_as(x0), res


def deq_anderson_program(torch):
    """DEQFixedPoint with a ResNet-ish conv cell: forward solve under no_grad, one re-engaged
    step, backward hook solving g = J^T g + grad by Anderson, then two SGD steps."""
    rng = np.random.default_rng(0)
    nn = torch.nn

    class ResNetLayer(nn.Module):
        def __init__(self, n_channels, n_inner_channels, kernel_size=3, num_groups=2):
            super().__init__()
            self.conv1 = nn.Conv2d(n_channels, n_inner_channels, kernel_size,
                                   padding=kernel_size // 2, bias=False)
            self.conv2 = nn.Conv2d(n_inner_channels, n_channels, kernel_size,
                                   padding=kernel_size // 2, bias=False)
            self.norm1 = nn.GroupNorm(num_groups, n_inner_channels)
            self.norm2 = nn.GroupNorm(num_groups, n_channels)
            self.norm3 = nn.GroupNorm(num_groups, n_channels)

        def forward(self, z, x):
            y = self.norm1(torch.relu(self.conv1(z)))
            return self.norm3(torch.relu(z + self.norm2(x + self.conv2(y))))

    class DEQFixedPoint(nn.Module):
        def __init__(self, f, solver, **kwargs):
            super().__init__()
            self.f = f
            self.solver = solver
            self.kwargs = kwargs

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

    C = 4
    f = ResNetLayer(C, 8, kernel_size=3)
    def anderson(f, x0, **kw):
        return _anderson(torch, f, x0, **kw)
    deq = DEQFixedPoint(f, anderson, tol=1e-4, max_iter=25, m=5)
    model = nn.Sequential(nn.Conv2d(1, C, 3, padding=1), nn.BatchNorm2d(C), deq,
                          nn.BatchNorm2d(C), nn.AvgPool2d(2, 2), nn.Flatten(),
                          nn.Linear(C * 3 * 3, 3))
    fill_(torch, model, rng, 0.3)
    fill_(torch, [f.conv1.weight, f.conv2.weight], rng, 0.05)
    X = normal(torch, rng, 4, 1, 6, 6)
    y = torch.tensor([0, 2, 1, 2])
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    res = {}
    for it in range(2):
        yp = model(X)
        loss = nn.CrossEntropyLoss()(yp, y)
        opt.zero_grad()
        loss.backward()
        res[f"loss{it}"] = loss.detach()
        res[f"grad_conv1_{it}"] = f.conv1.weight.grad.clone()
        res[f"grad_in_{it}"] = model[0].weight.grad.clone()
        opt.step()
    res["fwd_iters"] = len(deq.forward_res)
    res["bwd_iters"] = len(deq.backward_res)
    res["fwd_res_last"] = deq.forward_res[-1]
    return res


def jacobian_reg_program(torch):
    """Bai et al.'s Jacobian-regularised DEQ: a tanh cell solved by naive iteration (the
    forward_iteration solver), Hutchinson's estimate ||J||_F^2 ~ ||v^T J||^2 / numel with
    create_graph=True, and an implicit backward via a hook calling the same solver."""
    rng = np.random.default_rng(1)
    nn = torch.nn

    def forward_iteration(f, x0, max_iter=50, tol=1e-4):
        f0 = f(x0)
        res = []
        for k in range(max_iter):
            x = f0
            f0 = f(x)
            res.append((f0 - x).norm().item() / (1e-5 + f0.norm().item()))
            if res[-1] < tol:
                break
        return f0, res

    class TanhFixedPointLayer(nn.Module):
        def __init__(self, out_features):
            super().__init__()
            self.linear = nn.Linear(out_features, out_features, bias=False)

        def forward(self, z, x):
            return torch.tanh(self.linear(z) + x)

    class DEQ(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.inj = nn.Linear(3, n)
            self.f = TanhFixedPointLayer(n)
            self.head = nn.Linear(n, 1)

        def forward(self, x, v):
            x = self.inj(x)
            with torch.no_grad():
                z, self.fres = forward_iteration(lambda z: self.f(z, x), torch.zeros_like(x))
            z = self.f(z, x)
            z0 = z.clone().detach().requires_grad_()
            f0 = self.f(z0, x)
            z1 = z.clone().detach().requires_grad_()
            f1 = self.f(z1, x)
            vJ = torch.autograd.grad(f1, z1, v, create_graph=True)[0]
            jac_loss = vJ.norm() ** 2 / v.numel()

            def backward_hook(grad):
                if self.hook is not None:
                    self.hook.remove()
                new_grad, self.bres = forward_iteration(
                    lambda y: torch.autograd.grad(f0, z0, y, retain_graph=True)[0] + grad, grad)
                return new_grad
            self.hook = z.register_hook(backward_hook)
            return self.head(z).squeeze(-1), jac_loss

    model = DEQ(6)
    fill_(torch, model, rng, 0.25)
    x = normal(torch, rng, 5, 3)
    t = normal(torch, rng, 5)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    res = {}
    for it in range(3):
        v = normal(torch, rng, 5, 6)
        pred, jac_loss = model(x, v)
        loss = torch.nn.functional.mse_loss(pred, t) + 0.5 * jac_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        res[f"loss{it}"] = loss.detach()
        res[f"jac{it}"] = jac_loss.detach()
        res[f"gW{it}"] = model.f.linear.weight.grad.clone()
        res[f"gI{it}"] = model.inj.weight.grad.clone()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    res["hook_gone"] = len(model.fres) > 0 and len(model.bres) > 0
    return res


def optnet_program(torch):
    """OptNet-lite: an equality-constrained QP layer min 1/2 z'Qz + p'z s.t. Az = b as an
    autograd.Function; forward solves the batched KKT system, backward solves it again with the
    incoming gradient and forms dQ, dp, dA, db from the primal/dual sensitivities. Q is built
    as L L^T + eps I from a learned lower-triangular factor (tril + diag_embed(softplus))."""
    rng = np.random.default_rng(2)
    nn = torch.nn

    class EqQPFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, Q, p, A, b):
            nBatch, nz = p.shape
            neq = A.size(1)
            K = torch.cat([torch.cat([Q, A.transpose(1, 2)], 2),
                           torch.cat([A, torch.zeros(nBatch, neq, neq, dtype=Q.dtype)], 2)], 1)
            rhs = torch.cat([-p, b], 1).unsqueeze(2)
            sol = torch.linalg.solve(K, rhs).squeeze(2)
            z, nu = sol[:, :nz], sol[:, nz:]
            ctx.save_for_backward(K, z, nu)
            ctx.nz = nz
            return z

        @staticmethod
        def backward(ctx, dl_dz):
            K, z, nu = ctx.saved_tensors
            nz = ctx.nz
            rhs = torch.cat([-dl_dz, torch.zeros_like(nu)], 1).unsqueeze(-1)
            d = torch.linalg.solve(K.transpose(1, 2), rhs).squeeze(-1)
            dz, dnu = d[:, :nz], d[:, nz:]
            dQ = torch.bmm(dz.unsqueeze(2), z.unsqueeze(1))
            dp = dz
            dA = torch.bmm(dnu.unsqueeze(2), z.unsqueeze(1)) + \
                torch.bmm(nu.unsqueeze(2), dz.unsqueeze(1))
            db = -dnu
            grads = (dQ, dp, dA, db)
            return tuple(g if need else None for g, need in zip(grads, ctx.needs_input_grad))

    class OptNetEq(nn.Module):
        def __init__(self, nFeatures, nHidden, nCls, neq, eps=1e-4):
            super().__init__()
            self.fc1 = nn.Linear(nFeatures, nHidden)
            self.fc2 = nn.Linear(nHidden, nCls)
            self.M = nn.Parameter(torch.tril(torch.ones(nCls, nCls)), requires_grad=False)
            self.L = nn.Parameter(torch.tril(torch.rand(nCls, nCls)))
            self.A = nn.Parameter(torch.Tensor(neq, nCls).uniform_(-1, 1))
            self.b = nn.Parameter(torch.ones(neq))
            self.eps = eps
            self.nCls = nCls

        def forward(self, x):
            nBatch = x.size(0)
            x = torch.relu(self.fc1(x))
            p = self.fc2(x)
            L = self.M * self.L
            Q = L.mm(L.t()) + self.eps * torch.eye(self.nCls)
            Q = Q.unsqueeze(0).expand(nBatch, self.nCls, self.nCls)
            A = self.A.unsqueeze(0).expand(nBatch, *self.A.shape)
            b = self.b.unsqueeze(0).expand(nBatch, self.b.size(0))
            z = EqQPFunction.apply(Q, p, A, b)
            return torch.log_softmax(z, dim=1)

    model = OptNetEq(5, 8, 4, 1)
    fill_(torch, [model.fc1.weight, model.fc1.bias, model.fc2.weight, model.fc2.bias], rng)
    with torch.no_grad():
        model.L.copy_(torch.from_numpy(rng.random((4, 4)).astype(np.float32)) + torch.eye(4))
        model.A.copy_(torch.from_numpy(rng.uniform(-1, 1, (1, 4)).astype(np.float32)))
    x = normal(torch, rng, 6, 5)
    y = torch.tensor([0, 1, 2, 3, 1, 0])
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    res = {}
    for it in range(3):
        out = model(x)
        loss = torch.nn.functional.nll_loss(out, y)
        opt.zero_grad()
        loss.backward()
        res[f"loss{it}"] = loss.detach()
        res[f"gL{it}"] = model.L.grad.clone()
        res[f"gA{it}"] = model.A.grad.clone()
        res[f"gb{it}"] = model.b.grad.clone()
        opt.step()
    res["M_grad_none"] = model.M.grad is None
    # the KKT solution satisfies the constraint
    res["constraint"] = (model.A.detach() @ torch.exp(model(x)).t()).shape[1]
    Qd = torch.eye(3, dtype=torch.float64).expand(2, 3, 3).clone().requires_grad_()
    pd = torch.randn(2, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    pd = torch.from_numpy(rng.standard_normal((2, 3))).requires_grad_()
    Ad = torch.from_numpy(rng.standard_normal((2, 1, 3))).requires_grad_()
    bd = torch.from_numpy(rng.standard_normal((2, 1))).requires_grad_()
    res["gradcheck"] = torch.autograd.gradcheck(EqQPFunction.apply, (Qd, pd, Ad, bd))
    return res


def mondeq_program(torch):
    """monDEQ (Winston & Kolter): W = (1-m)I - A^T A + B - B^T, forward-backward splitting
    z <- relu((1-a)z + a(Wz + Ux + b)) under no_grad, then a custom backward that solves
    (I - W^T D) u = g with lu_factor/lu_solve on the batch's diagonal Jacobians."""
    rng = np.random.default_rng(3)
    nn = torch.nn

    class MONSingleFc(nn.Module):
        def __init__(self, in_dim, out_dim, m=1.0):
            super().__init__()
            self.U = nn.Linear(in_dim, out_dim)
            self.A = nn.Linear(out_dim, out_dim, bias=False)
            self.B = nn.Linear(out_dim, out_dim, bias=False)
            self.m = m

        def x_shape(self, n_batch):
            return (n_batch, self.U.in_features)

        def W(self):
            n = self.A.weight.shape[0]
            return (1 - self.m) * torch.eye(n) - self.A.weight.T @ self.A.weight + \
                self.B.weight - self.B.weight.T

    class Backward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, z_star, W, pre):
            ctx.save_for_backward(W, pre)
            return z_star.clone()

        @staticmethod
        def backward(ctx, g):
            W, pre = ctx.saved_tensors
            D = (pre > 0).to(g.dtype)
            n = W.shape[0]
            # u = (I - D W)^{-T} g per sample, batched via lu
            Mt = torch.eye(n).expand(g.shape[0], n, n) - D[:, :, None] * W[None]
            LU, piv = torch.linalg.lu_factor(Mt.transpose(1, 2))
            u = torch.linalg.lu_solve(LU, piv, g.unsqueeze(-1)).squeeze(-1)
            return None, None, u * D

    class MONDEQ(nn.Module):
        def __init__(self, lin, alpha=0.5, tol=1e-5, max_iter=200):
            super().__init__()
            self.lin = lin
            self.alpha, self.tol, self.max_iter = alpha, tol, max_iter

        def forward(self, x):
            W = self.lin.W()
            bias = self.lin.U(x)
            with torch.no_grad():
                z = torch.zeros(x.shape[0], W.shape[0])
                it = 0
                while it < self.max_iter:
                    zn = torch.relu((1 - self.alpha) * z + self.alpha * (z @ W.T + bias))
                    err = (zn - z).norm() / (1e-6 + zn.norm())
                    z = zn
                    it += 1
                    if err < self.tol:
                        break
                self.iters = it
            pre = z @ W.T + bias
            zz = torch.relu(pre)
            # attach the implicit backward: d z*/d(pre) handled by Backward
            return Backward.apply(zz, W.detach(), pre.detach()), pre

    lin = MONSingleFc(4, 6, m=0.5)
    fill_(torch, lin, rng, 0.3)
    deq = MONDEQ(lin)
    head = nn.Linear(6, 2)
    fill_(torch, head, rng, 0.3)
    x = normal(torch, rng, 5, 4)
    zstar, pre = deq(x)
    res = {"iters": deq.iters, "z": zstar.detach()}
    # implicit gradient of head loss w.r.t. z* pre-activation, through the custom Function
    zs = zstar.detach().requires_grad_()
    out = Backward.apply(zs, lin.W().detach(), pre.detach())
    loss = head(out).logsumexp(1).sum()
    loss.backward()
    res["loss"] = loss.detach()
    res["g_z"] = zs.grad
    res["g_head"] = head.weight.grad
    res["W_eig_max"] = torch.linalg.eigvalsh(
        0.5 * (lin.W() + lin.W().T)).max().detach()
    return res


def projected_gradient_program(torch):
    """Differentiable convex optimisation by unrolling projected gradient: a learned quadratic
    cost minimised over the probability simplex (sort/cumsum/gather projection of Duchi et al.)
    and over a box (clamp with tensor bounds), backpropagated through every step."""
    rng = np.random.default_rng(4)
    nn = torch.nn

    def project_simplex(v, z=1.0):
        n_features = v.size(1)
        u, _ = torch.sort(v, descending=True, dim=1)
        cssv = torch.cumsum(u, dim=1) - z
        ind = torch.arange(1, n_features + 1, dtype=v.dtype)
        cond = u - cssv / ind > 0
        rho = cond.to(torch.int64).cumsum(1).argmax(1, keepdim=True)
        rho = (cond * ind).argmax(1, keepdim=True)
        theta = torch.gather(cssv, 1, rho) / (rho + 1).to(v.dtype)
        return torch.clamp(v - theta, min=0)

    class UnrolledQP(nn.Module):
        def __init__(self, n_in, n, steps=15, lr=0.2):
            super().__init__()
            self.net = nn.Linear(n_in, n)
            self.Lq = nn.Parameter(torch.eye(n) * 0.8)
            self.log_lr = nn.Parameter(torch.tensor(lr).log())
            self.steps = steps

        def forward(self, x, lo, hi):
            p = self.net(x)
            Q = self.Lq @ self.Lq.T + 0.1 * torch.eye(p.shape[1])
            z = torch.full_like(p, 1.0 / p.shape[1])
            zb = torch.zeros_like(p)
            lr = self.log_lr.exp()
            traj = []
            for _ in range(self.steps):
                z = project_simplex(z - lr * (z @ Q + p))
                zb = torch.clamp(zb - lr * (zb @ Q + p), min=lo, max=hi)
                traj.append(z)
            return z, zb, torch.stack(traj, 1)

    model = UnrolledQP(3, 5)
    fill_(torch, model.net, rng, 0.5)
    with torch.no_grad():
        model.Lq.add_(normal(torch, rng, 5, 5) * 0.1)
    x = normal(torch, rng, 4, 3)
    target = torch.softmax(normal(torch, rng, 4, 5), 1)
    lo = -torch.ones(5) * 0.3
    hi = torch.linspace(0.1, 0.5, 5)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-2)
    res = {}
    for it in range(3):
        z, zb, traj = model(x, lo, hi)
        loss = (z - target).pow(2).sum(1).mean() + zb.abs().mean() + 1e-2 * traj.var(1).sum()
        opt.zero_grad()
        loss.backward()
        res[f"loss{it}"] = loss.detach()
        res[f"gnet{it}"] = model.net.weight.grad.clone()
        res[f"gLq{it}"] = model.Lq.grad.clone()
        res[f"glr{it}"] = model.log_lr.grad.clone()
        opt.step()
    res["simplex_sum"] = z.sum(1).detach()
    return res


PROGRAMS = [deq_anderson_program, jacobian_reg_program, optnet_program, mondeq_program,
            projected_gradient_program]

# fixed-point solvers stop on float32 residual thresholds; their iterates differ in the last bits
TOLERANCES = {"deq_anderson_program": (2e-4, 2e-5), "jacobian_reg_program": (1e-4, 1e-5),
              "optnet_program": (1e-4, 1e-5), "mondeq_program": (1e-4, 1e-5),
              "projected_gradient_program": (1e-4, 1e-5)}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
