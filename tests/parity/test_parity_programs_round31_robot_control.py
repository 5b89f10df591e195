"""Model-based control written as mpc.pytorch / pytorch-mppi / planning repositories write it
in torch, run with `torch` bound to ember and to PyTorch from the same NumPy values: iLQR by
hand (batched linearisation with torch.func.jacrev under vmap, a backward Riccati recursion
through torch.linalg.solve and cholesky_solve, box constraints by clamp, a line search),
differentiable MPC (gradients through the unrolled solver into learned dynamics), and
sampling planners (CEM with topk elites, MPPI with softmax weights), their noise drawn from
NumPy, and an MBPO/PETS probabilistic dynamics ensemble with elite rollouts."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _pendulum(torch, params):
    """Batched damped pendulum-on-a-cart dynamics x' = f(x, u) with parameters `params`."""
    dt = 0.1

    def f(x, u):
        th, thd, p, pd = x.unbind(-1)
        g, damp = params[0], params[1]
        thdd = -g * torch.sin(th) - damp * thd + u[..., 0] * torch.cos(th)
        pdd = u[..., 0] - 0.1 * pd
        return torch.stack([th + dt * thd, thd + dt * thdd, p + dt * pd, pd + dt * pdd], -1)
    return f


def ilqr_program(torch):
    """iLQR on a batch of pendulums: jacrev(argnums=(0, 1)) under vmap for A_t, B_t, Riccati
    backward pass with linalg.solve and cholesky_solve, control limits by clamp, a
    backtracking line search on the true rollout cost."""
    rng = np.random.default_rng(3)
    jacrev, vmap = torch.func.jacrev, torch.func.vmap
    Bn, H, nx, nu = 3, 6, 4, 1
    params = torch.tensor([9.8, 0.2])
    f = _pendulum(torch, params)
    Q = torch.diag(torch.tensor([10.0, 1.0, 1.0, 0.1]))
    R = 0.1 * torch.eye(nu)
    Qf = 5 * Q
    u_lo, u_hi = -2.0, 2.0
    x0 = normal(torch, rng, Bn, nx) * 0.5
    x0[:, 0] += 3.0
    u = (normal(torch, rng, H, Bn, nu) * 0.1).clamp(u_lo, u_hi)

    def rollout(x0, u):
        xs = [x0]
        for t in range(H):
            xs.append(f(xs[-1], u[t]))
        return torch.stack(xs)

    def cost(xs, u):
        run = torch.einsum("tbi,ij,tbj->b", xs[:-1], Q, xs[:-1])
        run = run + torch.einsum("tbi,ij,tbj->b", u, R, u)
        return 0.5 * (run + torch.einsum("bi,ij,bj->b", xs[-1], Qf, xs[-1]))

    jac = vmap(vmap(jacrev(f, argnums=(0, 1))))
    res = {"costs": [], "alphas": []}
    for it in range(3):
        xs = rollout(x0, u)
        A, Bm = jac(xs[:-1], u)
        Vx = xs[-1] @ Qf
        Vxx = Qf.expand(Bn, nx, nx)
        ks, Ks = [], []
        for t in reversed(range(H)):
            At, Bt = A[t], Bm[t]
            Qx = xs[t] @ Q + (At.transpose(-1, -2) @ Vx.unsqueeze(-1)).squeeze(-1)
            Qu = u[t] @ R + (Bt.mT @ Vx[..., None])[..., 0]
            Qxx = Q + At.mT @ Vxx @ At
            Quu = R + Bt.mT @ Vxx @ Bt + 1e-6 * torch.eye(nu)
            Qux = Bt.mT @ Vxx @ At
            if t % 2:
                k = -torch.linalg.solve(Quu, Qu)
                K = -torch.linalg.solve(Quu, Qux)
            else:
                L = torch.linalg.cholesky(Quu)
                k = -torch.cholesky_solve(Qu.unsqueeze(-1), L).squeeze(-1)
                K = -torch.cholesky_solve(Qux, L)
            Vx = Qx + (K.mT @ Quu @ k[..., None]).squeeze(-1) + (K.mT @ Qu[..., None])[..., 0] \
                + (Qux.mT @ k[..., None])[..., 0]
            Vxx = Qxx + K.mT @ Quu @ K + K.mT @ Qux + Qux.mT @ K
            Vxx = 0.5 * (Vxx + Vxx.transpose(1, 2))
            ks.insert(0, k)
            Ks.insert(0, K)
        old = cost(xs, u)
        for alpha in (1.0, 0.5, 0.25, 0.125):
            x = x0
            new_u = []
            for t in range(H):
                ut = u[t] + alpha * ks[t] + (Ks[t] @ (x - xs[t]).unsqueeze(-1)).squeeze(-1)
                ut = torch.clamp(ut, u_lo, u_hi)
                new_u.append(ut)
                x = f(x, ut)
            new_u = torch.stack(new_u)
            new = cost(rollout(x0, new_u), new_u)
            if bool((new < old).all()):
                break
        u = new_u
        res["costs"].append(new)
        res["alphas"].append(alpha)
    res["u"] = u
    res["A0"], res["B0"] = A[0], Bm[0]
    res["K0"] = Ks[0]
    res["saturated"] = [int((u.abs() >= u_hi).sum())]
    return res


def diff_mpc_program(torch):
    """Learning dynamics parameters through an unrolled, differentiable LQR-style MPC: a
    Riccati recursion in closed form via linalg.solve with create_graph-free backprop into
    the learned (A, B), imitation loss against expert controls, and autograd.grad of the
    first control with respect to the state (the MPC policy's feedback gain)."""
    rng = np.random.default_rng(4)
    nn = torch.nn
    nx, nu, H, Bn = 3, 2, 5, 4

    class LinearMPC(nn.Module):
        def __init__(self):
            super().__init__()
            self.A = nn.Parameter(torch.eye(nx) + 0.1 * normal(torch, rng, nx, nx))
            self.B = nn.Parameter(0.3 * normal(torch, rng, nx, nu))
            self.log_q = nn.Parameter(torch.zeros(nx))
            self.log_r = nn.Parameter(torch.full((nu,), -1.0))

        def forward(self, x0):
            Q, R = torch.diag_embed(self.log_q.exp()), torch.diag(self.log_r.exp())
            P = Q
            Ks = []
            for _ in range(H):
                BtP = self.B.T @ P
                K = torch.linalg.solve(R + BtP @ self.B, BtP @ self.A)
                P = Q + self.A.T @ P @ (self.A - self.B @ K)
                P = (P + P.T) / 2
                Ks.append(K)
            Ks = Ks[::-1]
            x, us = x0, []
            for t in range(H):
                ut = -(x @ Ks[t].T)
                us.append(ut.clamp(-1.5, 1.5))
                x = x @ self.A.T + us[-1] @ self.B.T
            return torch.stack(us, 1)

    mpc = LinearMPC()
    expert = LinearMPC()
    with torch.no_grad():
        expert.A.copy_(torch.eye(nx) + 0.2 * normal(torch, rng, nx, nx))
        expert.log_q.fill_(0.5)
    opt = torch.optim.RMSprop(mpc.parameters(), lr=1e-2, alpha=0.9, centered=True)
    res = {"losses": []}
    for _ in range(4):
        x0 = normal(torch, rng, Bn, nx)
        with torch.no_grad():
            target = expert(x0)
        loss = torch.nn.functional.smooth_l1_loss(mpc(x0), target, beta=0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["A"], res["B"], res["log_q"] = mpc.A, mpc.B, mpc.log_q
    x = normal(torch, rng, 1, nx).requires_grad_()
    u0 = mpc(x)[0, 0]
    gain = torch.stack([torch.autograd.grad(u0[i], x, retain_graph=True)[0][0]
                        for i in range(nu)])
    res["gain"] = gain
    jac = torch.autograd.functional.jacobian(lambda s: mpc(s)[:, 0], x)
    res["jac"] = jac
    return res


def cem_mppi_program(torch):
    """CEM (topk elites, refit mean/std with a momentum, clamp to bounds) and MPPI (softmax
    weights with temperature, noise from NumPy, shift-and-warm-start) on a point mass with an
    obstacle cost; sampled noise comes from NumPy, torch's RNG only drives a shape check."""
    rng = np.random.default_rng(5)
    H, N, nx, nu, elites = 8, 64, 4, 2, 8
    goal = torch.tensor([1.0, -0.5])
    obstacle = torch.tensor([0.5, 0.0])

    def dyn(x, u):
        pos, vel = x[..., :2], x[..., 2:]
        vel = 0.9 * vel + 0.1 * u
        return torch.cat([pos + 0.1 * vel, vel], -1)

    def traj_cost(x0, U):  # U: (N, H, nu)
        x = x0.expand(U.shape[0], -1)
        c = torch.zeros(U.shape[0])
        for t in range(U.shape[1]):
            x = dyn(x, U[:, t])
            d = torch.linalg.vector_norm(x[:, :2] - obstacle, dim=-1)
            c += (x[:, :2] - goal).pow(2).sum(-1) + 0.01 * U[:, t].square().sum(-1)
            c = c + 5.0 * torch.relu(0.3 - d)
        return c

    res = {}
    x0 = torch.zeros(nx)
    mean, std = torch.zeros(H, nu), torch.ones(H, nu)
    costs = []
    for _ in range(4):
        eps = normal(torch, rng, N, H, nu)
        U = (mean + std * eps).clamp(-1, 1)
        c = traj_cost(x0, U)
        top_c, idx = torch.topk(c, elites, largest=False, sorted=True)
        elite = U[idx]
        mean = 0.1 * mean + 0.9 * elite.mean(0)
        std = 0.1 * std + 0.9 * elite.std(0, unbiased=False)
        costs.append(top_c[0])
    res["cem_costs"], res["cem_mean"], res["cem_std"] = costs, mean, std
    res["cem_idx"] = idx.tolist()

    lam, sigma = 0.5, 0.4
    noise_sigma = torch.eye(nu) * sigma ** 2
    noise_sigma_inv = torch.inverse(noise_sigma)
    U = torch.zeros(H, nu)
    x = torch.zeros(nx)
    executed, weights_ent = [], []
    for _ in range(4):
        noise = normal(torch, rng, N, H, nu) @ torch.linalg.cholesky(noise_sigma).T
        perturbed = torch.clamp(U + noise, -1, 1)
        noise = perturbed - U
        cost_total = traj_cost(x, perturbed)
        action_cost = lam * (noise @ noise_sigma_inv * U).sum((-1, -2))
        cost_total = cost_total + action_cost
        beta = torch.min(cost_total)
        omega = torch.exp(-1 / lam * (cost_total - beta))
        eta = torch.sum(omega)
        omega = (1.0 / eta) * omega
        assert torch.allclose(omega, torch.softmax(-(cost_total - beta) / lam, 0), atol=1e-6)
        U = U + torch.sum(omega.view(-1, 1, 1) * noise, dim=0)
        weights_ent.append(-(omega * omega.clamp_min(1e-12).log()).sum())
        action = U[0].clone()
        x = dyn(x, action)
        executed.append(action)
        U = torch.roll(U, -1, dims=0)
        U[-1] = 0.0
    res["mppi_actions"], res["mppi_x"], res["mppi_ent"] = torch.stack(executed), x, weights_ent
    torch.manual_seed(0)
    s = torch.distributions.MultivariateNormal(torch.zeros(nu), covariance_matrix=noise_sigma)
    draw = s.sample((N, H))
    res["mvn_shape"] = list(draw.shape)
    res["mvn_log_prob"] = s.log_prob(torch.ones(3, nu) * 0.1)
    # curvature of the elites' likelihood in the noise covariance (forward-over-reverse through
    # the Cholesky factor MultivariateNormal takes)
    elite_noise = (elite[:, 0] - mean[0]).double()
    res["mvn_cov_hessian"] = torch.func.hessian(
        lambda S: torch.distributions.MultivariateNormal(
            torch.zeros(nu, dtype=torch.float64), covariance_matrix=S).log_prob(
                elite_noise).mean())(noise_sigma.double() + 0.1)
    return res


def pets_ensemble_program(torch):
    """MBPO/PETS probabilistic ensemble: EnsembleFC layers as bmm over (E, in, out) weights,
    swish, soft-bounded log-variance (max_logvar - softplus(max_logvar - logvar)), Gaussian NLL
    with per-layer weight decay, holdout MSE and elite selection by argsort, then model
    rollouts choosing an elite member per sample with NumPy indices and gather."""
    rng = np.random.default_rng(13)
    nn, F = torch.nn, torch.nn.functional
    E, S, A, Hd, N = 5, 4, 2, 16, 12

    class EnsembleFC(nn.Module):
        def __init__(self, in_f, out_f, weight_decay=0.0):
            super().__init__()
            self.in_features, self.out_features = in_f, out_f
            self.weight = nn.Parameter(torch.Tensor(E, in_f, out_f))
            self.weight_decay = weight_decay
            self.bias = nn.Parameter(torch.Tensor(E, out_f))

        def forward(self, x):
            w_times_x = torch.bmm(x, self.weight)
            return torch.add(w_times_x, self.bias[:, None, :])

    class EnsembleModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.output_dim = S + 1
            self.nn1 = EnsembleFC(S + A, Hd, 2.5e-5)
            self.nn2 = EnsembleFC(Hd, Hd, 5e-5)
            self.nn3 = EnsembleFC(Hd, self.output_dim * 2, 1e-4)
            self.max_logvar = nn.Parameter((torch.ones((1, self.output_dim)).float() / 2),
                                           requires_grad=False)
            self.min_logvar = nn.Parameter((-torch.ones((1, self.output_dim)).float() * 10),
                                           requires_grad=False)
            self.swish = lambda x: x * torch.sigmoid(x)

        def forward(self, x, ret_log_var=False):
            out = self.nn3(self.swish(self.nn2(self.swish(self.nn1(x)))))
            mean = out[:, :, :self.output_dim]
            logvar = self.max_logvar - F.softplus(self.max_logvar - out[:, :, self.output_dim:])
            logvar = self.min_logvar + F.softplus(logvar - self.min_logvar)
            return (mean, logvar) if ret_log_var else (mean, torch.exp(logvar))

        def get_decay_loss(self):
            decay_loss = 0.
            for m in self.children():
                if isinstance(m, EnsembleFC):
                    decay_loss += m.weight_decay * torch.sum(torch.square(m.weight)) / 2.
            return decay_loss

        def loss(self, mean, logvar, labels, inc_var_loss=True):
            inv_var = torch.exp(-logvar)
            if inc_var_loss:
                mse_loss = torch.mean(torch.mean(torch.pow(mean - labels, 2) * inv_var,
                                                 dim=-1), dim=-1)
                var_loss = torch.mean(torch.mean(logvar, dim=-1), dim=-1)
                total = torch.sum(mse_loss) + torch.sum(var_loss)
            else:
                mse_loss = torch.mean(torch.pow(mean - labels, 2), dim=(1, 2))
                total = torch.sum(mse_loss)
            return total, mse_loss

    model = EnsembleModel()
    fill_(torch, [model.nn1.weight, model.nn1.bias, model.nn2.weight, model.nn2.bias,
                  model.nn3.weight, model.nn3.bias], rng, 0.3)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    res = {"losses": []}
    for _ in range(3):
        inputs = normal(torch, rng, E, N, S + A)
        labels = normal(torch, rng, E, N, S + 1)
        mean, logvar = model(inputs, ret_log_var=True)
        loss, _ = model.loss(mean, logvar, labels)
        opt.zero_grad()
        loss = loss + 0.01 * torch.sum(model.max_logvar) - 0.01 * torch.sum(model.min_logvar)
        loss = loss + model.get_decay_loss()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    with torch.no_grad():
        hold_in = normal(torch, rng, N, S + A)
        hold_mean, hold_logvar = model(hold_in[None, :, :].repeat([E, 1, 1]), ret_log_var=True)
        _, holdout_mse = model.loss(hold_mean, hold_logvar,
                                    normal(torch, rng, N, S + 1)[None].repeat([E, 1, 1]),
                                    inc_var_loss=False)
        sorted_idx = np.argsort(holdout_mse.cpu().numpy())
        elites = sorted_idx[:3].tolist()
        res["holdout_mse"], res["elites"] = holdout_mse, elites
        # rollout: each sample takes a random elite's prediction, plus NumPy noise * std
        state = normal(torch, rng, N, S)
        rewards = []
        for _ in range(3):
            act = normal(torch, rng, N, A).clamp(-1, 1)
            mean, var = model(torch.cat([state, act], -1)[None].repeat(E, 1, 1))
            mean[:, :, 1:] += state
            std = torch.sqrt(var)
            samples = mean + normal(torch, rng, *mean.shape) * std
            idx = torch.from_numpy(np.asarray(elites)[rng.integers(0, 3, N)])
            chosen = samples[idx, torch.arange(N)]
            chosen2 = samples.permute(1, 0, 2).gather(
                1, idx[:, None, None].expand(N, 1, S + 1)).squeeze(1)
            assert torch.equal(chosen, chosen2)
            rewards.append(chosen[:, :1])
            state = chosen[:, 1:]
        res["rollout_r"], res["state"] = torch.cat(rewards, 1), state
    res["w3"], res["max_logvar"] = model.nn3.weight, model.max_logvar
    return res


PROGRAMS = [ilqr_program, diff_mpc_program, cem_mppi_program, pets_ensemble_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
