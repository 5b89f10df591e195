"""More implicit-layer programs, for the autograd tools their repositories reach for, run once
with `torch` bound to ember and once to PyTorch: torch.autograd.functional (hvp, vhp, hessian,
jacobian with vectorize/create_graph) driving an iMAML-style CG, a higher-style unrolled
hypergradient with torch.func.functional_call and torch.func.grad, an autograd.Function with
setup_context and generate_vmap_rule used under vmap/jacrev, Jacobian-free backprop with
spectral_norm, saved_tensors_hooks and a power iteration on jvp/vjp for the spectral radius,
an unrolled ADMM QP on cholesky/cholesky_solve/solve_ex, and a monotone operator layer whose
weight is built by nn.utils.parametrize."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def functional_hvp_program(torch):
    """torch.autograd.functional on a small logistic-regression loss: hvp/vhp, the full hessian
    (vectorize and not), jacobian of the gradient with create_graph=True, and a CG solve of
    (H + lam I) x = g whose matvec is functional.hvp."""
    rng = np.random.default_rng(20)
    A = torch.autograd.functional
    X = normal(torch, rng, 8, 4)
    y = torch.from_numpy((rng.random(8) > 0.5).astype(np.float32))
    w = normal(torch, rng, 4) * 0.5

    def loss(w):
        return torch.nn.functional.binary_cross_entropy_with_logits(X @ w, y) + \
            0.01 * w.pow(4).sum()

    v = normal(torch, rng, 4)
    res = {}
    res["hvp_val"], res["hvp"] = A.hvp(loss, w, v)
    res["vhp_val"], res["vhp"] = A.vhp(loss, w, v)
    res["hess"] = A.hessian(loss, w)
    res["hess_vec"] = A.hessian(loss, w, vectorize=True)
    res["hess_fwd"] = A.hessian(loss, w, vectorize=True, outer_jacobian_strategy="forward-mode")
    wg = w.clone().requires_grad_()
    J = A.jacobian(lambda u: torch.autograd.grad(loss(u), u, create_graph=True)[0], wg,
                   create_graph=True)
    res["jac_trace_grad"] = torch.autograd.grad(J.trace(), wg)[0]
    g = normal(torch, rng, 4)
    x = torch.zeros(4)
    r = g.clone()
    p = r.clone()
    for _ in range(4):
        Ap = A.hvp(loss, w, p)[1] + 0.1 * p
        alpha = r.dot(r) / p.dot(Ap)
        x = x + alpha * p
        r_new = r - alpha * Ap
        p = r_new + (r_new.dot(r_new) / r.dot(r)) * p
        r = r_new
    res["cg"] = x
    res["cg_check"] = torch.linalg.solve(res["hess"] + 0.1 * torch.eye(4), g)
    jac2 = A.jacobian(lambda a, b: (a * b.sum(), a.exp() - b), (w, v), vectorize=True)
    res["jac_tuple"] = [t for row in jac2 for t in row]
    return res


def unrolled_hypergrad_program(torch):
    """higher-style unrolled meta-learning with torch.func: functional_call on a parameter
    dict, inner SGD steps with torch.autograd.grad(create_graph=True), hypergradients with
    respect to a learned per-layer log learning rate and the initialisation; then the same
    inner step via torch.func.grad for a consistency number."""
    rng = np.random.default_rng(21)
    nn = torch.nn
    F = nn.functional
    from_call = torch.func.functional_call
    net = nn.Sequential(nn.Linear(3, 6), nn.ELU(), nn.Linear(6, 1))
    fill_(torch, net, rng, 0.4)
    log_lrs = nn.ParameterDict({k.replace(".", "_"): nn.Parameter(torch.tensor(-2.0))
                                for k, _ in net.named_parameters()})
    meta_opt = torch.optim.Adam(list(net.parameters()) + list(log_lrs.parameters()), lr=1e-2)
    res = {}
    for task in range(2):
        xs, ys = normal(torch, rng, 5, 3), normal(torch, rng, 5, 1)
        xq, yq = normal(torch, rng, 5, 3), normal(torch, rng, 5, 1)
        fast = dict(net.named_parameters())
        for _ in range(3):
            inner = F.smooth_l1_loss(from_call(net, fast, (xs,)), ys)
            grads = torch.autograd.grad(inner, tuple(fast.values()), create_graph=True)
            fast = {k: p - log_lrs[k.replace(".", "_")].exp() * g
                    for (k, p), g in zip(fast.items(), grads)}
        outer = F.smooth_l1_loss(from_call(net, fast, (xq,)), yq)
        meta_opt.zero_grad()
        outer.backward()
        res[f"outer{task}"] = outer.detach()
        res[f"g_lr{task}"] = [p.grad.clone() for p in log_lrs.values()]
        res[f"g_w{task}"] = net[0].weight.grad.clone()
        meta_opt.step()
    params = {k: v.detach() for k, v in net.named_parameters()}
    g_func = torch.func.grad(lambda ps: F.smooth_l1_loss(from_call(net, ps, (xs,)), ys))(params)
    res["func_grad"] = [g_func[k] for k in sorted(g_func)]
    res["buffers_untouched"] = [k for k, _ in net.named_parameters()]
    return res


def vmap_function_program(torch):
    """A fixed-point layer as an autograd.Function in the setup_context style with
    generate_vmap_rule=True, so torch.func.vmap and jacrev reach it: forward iterates
    z = tanh(a*z + x) under no_grad, backward applies the IFT (1 - a*sech^2)^{-1}; plus a
    classic Function using set_materialize_grads(False) and once_differentiable."""
    rng = np.random.default_rng(22)
    from torch.autograd.function import once_differentiable

    class ScalarFixedPoint(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x, a):
            z = torch.zeros_like(x)
            for _ in range(60):
                z = torch.tanh(a * z + x)
            return z

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, a = inputs
            ctx.save_for_backward(output, a)

        @staticmethod
        def backward(ctx, gz):
            z, a = ctx.saved_tensors
            d = 1 - z * z
            u = gz / (1 - a * d)
            return u * d, (u * d * z).sum_to_size(a.shape)

    class ClampGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.set_materialize_grads(False)
            ctx.save_for_backward(x)
            return x * 2, y + 1

        @staticmethod
        @once_differentiable
        def backward(ctx, gx, gy):
            (x,) = ctx.saved_tensors
            out_x = None if gx is None else (gx * 2).clamp(-1, 1)
            return out_x, gy

    x = normal(torch, rng, 4, 3)
    a = torch.tensor(0.5)
    res = {"z": ScalarFixedPoint.apply(x, a)}
    xr = x.clone().requires_grad_()
    ar = a.clone().requires_grad_()
    z = ScalarFixedPoint.apply(xr, ar)
    (z * torch.arange(12.0).view(4, 3)).sum().backward()
    res["gx"], res["ga"] = xr.grad, ar.grad
    res["vmap"] = torch.func.vmap(ScalarFixedPoint.apply, in_dims=(0, None))(x, a)
    res["jacrev"] = torch.func.jacrev(ScalarFixedPoint.apply)(x[0], a)
    res["vmap_grad"] = torch.func.vmap(torch.func.grad(
        lambda xi: ScalarFixedPoint.apply(xi, a).sum()))(x)
    p = normal(torch, rng, 3).requires_grad_()
    q = normal(torch, rng, 3).requires_grad_()
    u, v = ClampGrad.apply(p * 3, q)
    u.sum().backward()
    res["clamp_gp"], res["q_grad_none"] = p.grad, q.grad is None
    return res


def jfb_spectral_program(torch):
    """Jacobian-free backprop (Fung et al.): iterate to a fixed point without grad, then one
    differentiable step; the cell's linear map is spectral-normalised (nn.utils.spectral_norm
    power iteration buffers), saved tensors are packed by saved_tensors_hooks, and the
    Jacobian's spectral radius is estimated by power iteration on func.jvp and func.vjp."""
    rng = np.random.default_rng(23)
    nn = torch.nn

    class Cell(nn.Module):
        def __init__(self, n, d):
            super().__init__()
            self.W = nn.utils.spectral_norm(nn.Linear(n, n, bias=False))
            self.U = nn.Linear(d, n)

        def forward(self, z, x):
            return 0.9 * torch.relu(self.W(z) + self.U(x))

    cell = Cell(6, 3)
    with torch.no_grad():
        cell.W.weight_orig.copy_(normal(torch, rng, 6, 6))
        cell.W.weight_u.copy_(torch.nn.functional.normalize(normal(torch, rng, 6), dim=0))
        cell.W.weight_v.copy_(torch.nn.functional.normalize(normal(torch, rng, 6), dim=0))
    fill_(torch, cell.U, rng, 0.5)
    head = nn.Linear(6, 2)
    fill_(torch, head, rng, 0.5)
    opt = torch.optim.SGD(list(cell.parameters()) + list(head.parameters()), lr=0.1)
    x = normal(torch, rng, 4, 3)
    y = torch.tensor([1, 0, 1, 1])
    packed = []

    def pack(t):
        packed.append(tuple(t.shape))
        return t.clone()

    res = {}
    for it in range(3):
        with torch.no_grad():
            z = torch.zeros(4, 6)
            for _ in range(30):
                z = cell(z, x)
        cell.eval()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t * 1):
            z = cell(z.detach(), x)
            loss = nn.functional.cross_entropy(head(z), y)
        cell.train()
        opt.zero_grad()
        loss.backward()
        res[f"loss{it}"] = loss.detach()
        res[f"g_orig{it}"] = cell.W.weight_orig.grad.clone()
        opt.step()
    res["sigma"] = torch.linalg.matrix_norm(cell.W.weight.detach(), ord=2)
    res["n_packed"] = len(packed)
    cell.eval()
    zf = z.detach()[0]
    f = lambda zz: cell(zz, x[0])  # noqa: E731
    v = torch.ones(6) / 6 ** 0.5
    for _ in range(10):
        _, jv = torch.func.jvp(f, (zf,), (v,))
        _, vjp_fn = torch.func.vjp(f, zf)
        (jtjv,) = vjp_fn(jv)
        v = jtjv / jtjv.norm()
    res["spec_radius"] = torch.func.jvp(f, (zf,), (v,))[1].norm()
    res["u_buffer"] = cell.W.weight_u
    return res


def admm_qp_program(torch):
    """An unrolled ADMM box-QP layer (OSQP-like): min 1/2 x'Px + q'x s.t. l <= x <= u with P
    from a learned factor; each step solves (P + rho I) x = rho(z - w) - q with
    cholesky/cholesky_solve (batched), projects with torch.max/torch.min against tensors, and
    the final iterate's KKT residual comes from linalg.solve_ex."""
    rng = np.random.default_rng(24)
    nn = torch.nn

    class ADMMLayer(nn.Module):
        def __init__(self, n, iters=12, rho=1.0):
            super().__init__()
            self.Lf = nn.Parameter(torch.eye(n) + 0.1 * torch.ones(n, n).tril(-1))
            self.q_net = nn.Linear(3, n)
            self.iters, self.rho = iters, rho

        def forward(self, feats, lo, hi):
            q = self.q_net(feats)
            B, n = q.shape
            P = self.Lf @ self.Lf.mT
            Kc = torch.linalg.cholesky(P + self.rho * torch.eye(n)).expand(B, n, n)
            z = torch.zeros(B, n)
            w = torch.zeros(B, n)
            for _ in range(self.iters):
                rhs = (self.rho * (z - w) - q).unsqueeze(-1)
                xk = torch.cholesky_solve(rhs, Kc).squeeze(-1)
                z = torch.min(torch.max(xk + w, lo), hi)
                w = w + xk - z
            sol, info = torch.linalg.solve_ex(P.expand(B, n, n), (-q - self.rho * w)[..., None])
            return z, sol.squeeze(-1), info

    layer = ADMMLayer(4)
    fill_(torch, layer.q_net, rng, 0.8)
    feats = normal(torch, rng, 3, 3)
    lo = torch.tensor([-0.5, -1.0, 0.0, -0.2])
    hi = torch.tensor([0.5, 0.3, 1.0, 0.2])
    target = normal(torch, rng, 3, 4) * 0.3
    opt = torch.optim.Adagrad(layer.parameters(), lr=0.05)
    res = {}
    for it in range(3):
        z, sol, info = layer(feats, lo, hi)
        loss = torch.nn.functional.huber_loss(z, target) + 1e-3 * sol.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        res[f"loss{it}"] = loss.detach()
        res[f"gL{it}"] = layer.Lf.grad.clone()
        res[f"gq{it}"] = layer.q_net.weight.grad.clone()
        opt.step()
    res["info"] = info.tolist()
    res["z"] = z.detach()
    return res


def parametrized_monotone_program(torch):
    """A monotone-operator layer whose weight W = (1-m)I - A'A + B - B' is a registered
    parametrization (nn.utils.parametrize, with right_inverse unused and cached under
    parametrize.cached()), an orthogonal input map (nn.utils.parametrizations.orthogonal),
    forward by Peaceman-Rachford with a precomputed inverse, and implicit backward by a hook."""
    rng = np.random.default_rng(25)
    nn = torch.nn
    P = nn.utils.parametrize

    class Monotone(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, X):
            n = X.shape[0] // 2
            A, B = X[:n], X[n:]
            return (1 - self.m) * torch.eye(n) - A.T @ A + B - B.T

    n, d = 5, 5  # square: a tall map completes its basis from the global RNG
    layer = nn.Linear(n, 2 * n, bias=False)
    fill_(torch, layer, rng, 0.3)
    P.register_parametrization(layer, "weight", Monotone(0.5), unsafe=True)
    inp = nn.Linear(d, n, bias=False)
    fill_(torch, inp, rng, 0.5)
    inp = nn.utils.parametrizations.orthogonal(inp)
    x = normal(torch, rng, 4, d)
    with P.cached():
        W = layer.weight
        W2 = layer.weight
        bias = inp(x)
        alpha = 0.5
        Vinv = torch.linalg.inv(torch.eye(n) * (1 + alpha) - alpha * W)
        with torch.no_grad():
            z = torch.zeros(4, n)
            u = torch.zeros(4, n)
            for _ in range(80):
                u12 = 2 * z - u
                z12 = (u12 + alpha * bias) @ Vinv.T
                u = 2 * z12 - u12
                zn = torch.relu(u)
                z = zn
        zs = torch.relu(z @ W.T + bias)
        z0 = zs.detach().requires_grad_()
        f0 = torch.relu(z0 @ W.T + bias)

        def hook(g):
            y = g
            for _ in range(40):
                y = torch.autograd.grad(f0, z0, y, retain_graph=True)[0] + g
            return y
        zs.register_hook(hook)
        loss = zs.pow(2).sum() + zs[:, 0].sum()
    loss.backward()
    return {"z": zs.detach(), "same_cached": W is W2, "loss": loss.detach(),
            "g_orig": layer.parametrizations.weight.original.grad,
            "g_inp": inp.parametrizations.weight.original.grad,
            "orth": inp.weight.detach() @ inp.weight.detach().T}


PROGRAMS = [functional_hvp_program, unrolled_hypergrad_program, vmap_function_program,
            jfb_spectral_program, admm_qp_program, parametrized_monotone_program]

# CG, power iterations and unrolled solvers reassociate float32 sums
TOLERANCES = {"functional_hvp_program": (1e-4, 1e-5), "unrolled_hypergrad_program": (1e-4, 1e-5),
              "vmap_function_program": (1e-4, 1e-5), "jfb_spectral_program": (1e-4, 1e-5),
              "admm_qp_program": (1e-4, 1e-5), "parametrized_monotone_program": (1e-4, 1e-5)}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
