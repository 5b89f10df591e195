"""Neural SDE and CDE programs written as torchsde and torchcde users write them in torch, run
once with `torch` bound to ember and once to PyTorch from the same NumPy weights and Brownian
increments: Euler-Maruyama, Milstein (diagonal noise, derivative by autograd) and an SRK-lite
two-stage step; a latent SDE whose KL term comes from the drift difference over the diffusion;
natural cubic spline coefficients through a tridiagonal solve (Thomas algorithm by hand and
linalg.solve), a neural CDE integrated over the spline's derivative, and logsignature-lite
(level-2 Levy area) features. _physics_fixes pins what they found."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _mlp(torch, sizes, act="tanh", final=None):
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(torch.nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(torch.nn.Tanh() if act == "tanh" else torch.nn.Softplus())
    if final is not None:
        layers.append(final)
    return torch.nn.Sequential(*layers)


def sde_solvers_program(torch):
    """Euler-Maruyama, Milstein and SRK-lite steps of a neural SDE with diagonal noise."""
    rng = np.random.default_rng(0)
    f_net = _mlp(torch, [3, 16, 3])
    g_net = _mlp(torch, [3, 16, 3], final=torch.nn.Sigmoid())
    fill_(torch, f_net, rng)
    fill_(torch, g_net, rng)
    batch, n, dt = 5, 12, 0.05
    dw = torch.from_numpy((rng.standard_normal((n, batch, 3)) * np.sqrt(dt)).astype(np.float32))
    y0 = normal(torch, rng, batch, 3)
    res = {}

    def em(y):
        path = [y]
        for i in range(n):
            y = y + f_net(y) * dt + g_net(y) * dw[i]
            path.append(y)
        return torch.stack(path)

    def milstein(y):
        for i in range(n):
            with torch.enable_grad():
                y_ = y if y.requires_grad else y.detach().requires_grad_(True)
                g = g_net(y_)
                # diagonal noise: g * dg/dy through a vjp with g as the vector
                gdg, = torch.autograd.grad(g, y_, grad_outputs=g, create_graph=True)
            y = y + f_net(y) * dt + g * dw[i] + 0.5 * gdg * (dw[i] ** 2 - dt)
        return y

    def srk(y):
        for i in range(n):
            k1 = f_net(y)
            y_mid = y + k1 * dt + g_net(y) * np.sqrt(dt)
            g_half = 0.5 * (g_net(y_mid) - g_net(y)) / np.sqrt(dt)
            k2 = f_net(y + k1 * dt + g_net(y) * dw[i])
            y = y + 0.5 * (k1 + k2) * dt + g_net(y) * dw[i] + g_half * (dw[i] ** 2 - dt)
        return y

    with torch.no_grad():
        res["em_path"] = em(y0)
    ys = em(y0)
    loss = (ys[-1] ** 2).mean() + ys.var(dim=0).mean()
    loss.backward()
    res["em_loss"] = loss
    res["em_grads"] = [p.grad.clone() for p in f_net.parameters()]
    f_net.zero_grad(set_to_none=True)
    g_net.zero_grad(set_to_none=True)
    y_m = milstein(y0.clone())
    y_m.pow(2).sum().backward()
    res["milstein"] = y_m
    res["milstein_g_grad"] = [p.grad for p in g_net.parameters()]
    y_s = srk(y0)
    res["srk"] = y_s
    # the strong-order check torchsde users run: coarse (summed increments) vs fine paths
    dw_coarse = dw.view(n // 2, 2, batch, 3).sum(1)
    y_c = y0
    with torch.no_grad():
        for i in range(n // 2):
            y_c = y_c + f_net(y_c) * (2 * dt) + g_net(y_c) * dw_coarse[i]
    res["coarse_err"] = (y_c - res["em_path"][-1]).abs().max()
    # Brownian bridge at the midpoint of each interval, from a second NumPy draw
    z = torch.from_numpy(rng.standard_normal((n, batch, 3)).astype(np.float32))
    w = torch.cat([torch.zeros(1, batch, 3), dw.cumsum(0)])
    mid = 0.5 * (w[:-1] + w[1:]) + 0.5 * np.sqrt(dt) * z
    res["bridge"] = mid[::3]
    res["bridge_qv"] = torch.diff(w, dim=0).square().sum(0).mean()
    return res


def latent_sde_program(torch):
    """A latent SDE (torchsde's latent_sde example): posterior drift with a context, prior
    drift, shared diagonal diffusion, KL accumulated from the drift difference over the
    diffusion, trained a few Adam steps with a KL annealing schedule."""
    rng = np.random.default_rng(1)
    latent, ctx_size, hidden, batch, n, dt = 4, 3, 16, 6, 10, 0.1
    xs = normal(torch, rng, n, batch, 2)
    encoder = torch.nn.GRU(2, ctx_size, batch_first=False)
    qz0_net = torch.nn.Linear(ctx_size, 2 * latent)
    f_net = _mlp(torch, [latent + ctx_size, hidden, latent], act="softplus")
    h_net = _mlp(torch, [latent, hidden, latent], act="softplus")
    g_nets = torch.nn.ModuleList(
        [_mlp(torch, [1, 8, 1], act="softplus", final=torch.nn.Sigmoid()) for _ in range(latent)])
    projector = torch.nn.Linear(latent, 2)
    pz0_mean = torch.nn.Parameter(torch.zeros(1, latent))
    pz0_logstd = torch.nn.Parameter(torch.zeros(1, latent))
    modules = torch.nn.ModuleList([encoder, qz0_net, f_net, h_net, g_nets, projector])
    fill_(torch, modules, rng, scale=0.4)
    params = list(modules.parameters()) + [pz0_mean, pz0_logstd]
    opt = torch.optim.Adam(params, lr=1e-2)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
    eps0 = normal(torch, rng, 4, batch, latent)
    dws = torch.from_numpy(
        (rng.standard_normal((4, n, batch, latent)) * np.sqrt(dt)).astype(np.float32))
    res = {"loss": [], "kl": [], "lr": []}

    def g(y):
        ys = torch.split(y, split_size_or_sections=1, dim=1)
        return torch.cat([net(y_i) for net, y_i in zip(g_nets, ys)], dim=1)

    for step in range(4):
        ctx, _ = encoder(torch.flip(xs, dims=(0,)))
        ctx = torch.flip(ctx, dims=(0,))
        qz0_mean, qz0_logstd = qz0_net(ctx[0]).chunk(chunks=2, dim=1)
        z = qz0_mean + qz0_logstd.exp() * eps0[step]
        log_ratio = torch.zeros(batch)
        zs = [z]
        for i in range(n - 1):
            c = ctx[min(i, n - 1)]
            f = f_net(torch.cat((z, c), dim=1))
            h = h_net(z)
            gz = g(z)
            u = torch.linalg.solve_triangular(
                torch.diag_embed(gz), (f - h).unsqueeze(-1), upper=False).squeeze(-1)
            log_ratio = log_ratio + 0.5 * (u ** 2).sum(dim=1) * dt
            z = z + f * dt + gz * dws[step, i]
            zs.append(z)
        zs = torch.stack(zs)
        px = torch.distributions.Normal(loc=projector(zs), scale=0.1)
        log_px = px.log_prob(xs).sum(dim=(0, 2)).mean(dim=0)
        qz0 = torch.distributions.Normal(loc=qz0_mean, scale=qz0_logstd.exp())
        pz0 = torch.distributions.Normal(loc=pz0_mean, scale=pz0_logstd.exp())
        logqp0 = torch.distributions.kl_divergence(qz0, pz0).sum(dim=1).mean(dim=0)
        logqp_path = log_ratio.mean(dim=0)
        kl_coeff = min(1.0, (step + 1) / 3)
        loss = -log_px + kl_coeff * (logqp0 + logqp_path)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, max_norm=50.0)
        opt.step()
        sched.step()
        res["loss"].append(loss.item())
        res["kl"].append((logqp0 + logqp_path).item())
        res["lr"].append(sched.get_last_lr()[0])
    res["pz0"] = pz0_logstd.detach()
    res["proj"] = projector.weight.detach()
    return res


def _natural_cubic_coeffs_thomas(torch, t, x):
    """torchcde-style natural cubic spline coefficients with the tridiagonal system solved by
    the Thomas algorithm written in torch (x: (..., length, channels))."""
    length = x.size(-2)
    dt = t[1:] - t[:-1]
    dx = x[..., 1:, :] - x[..., :-1, :]
    recip = dt.reciprocal()
    three_path = 3 * dx * recip.unsqueeze(-1) ** 2
    diag = torch.empty(length, dtype=x.dtype)
    diag[:-1] = recip
    diag[-1] = 0
    diag[1:] += recip
    diag = diag * 2
    rhs = torch.zeros_like(x)
    rhs[..., :-1, :] = three_path
    rhs[..., 1:, :] += three_path
    # forward sweep on (diag, off = recip), rhs along dim -2
    a = [diag[0]]
    b = [rhs[..., 0, :]]
    for i in range(1, length):
        w = recip[i - 1] / a[i - 1]
        a.append(diag[i] - w * recip[i - 1])
        b.append(rhs[..., i, :] - w * b[i - 1])
    sol = [b[-1] / a[-1]]
    for i in range(length - 2, -1, -1):
        sol.insert(0, (b[i] - recip[i] * sol[0]) / a[i])
    knot_derivs = torch.stack(sol, dim=-2)
    deriv_lo = knot_derivs[..., :-1, :]
    deriv_hi = knot_derivs[..., 1:, :]
    inv = recip.unsqueeze(-1)
    two_c = (6 * dx * inv - 4 * deriv_lo - 2 * deriv_hi) * inv
    three_d = (-6 * dx * inv + 3 * (deriv_lo + deriv_hi)) * inv ** 2
    return x[..., :-1, :], deriv_lo, two_c, three_d


def _tridiag_dense(torch, t, x):
    """The same knot derivatives through a dense tridiagonal matrix and linalg.solve."""
    length = x.size(-2)
    dt = torch.diff(t)
    recip = 1.0 / dt
    main = torch.zeros(length, dtype=x.dtype)
    main[:-1] += 2 * recip
    main[1:] += 2 * recip
    mat = torch.diag(main) + torch.diag(recip, 1) + torch.diag(recip, -1)
    three_path = 3 * torch.diff(x, dim=-2) * (recip ** 2).unsqueeze(-1)
    rhs = torch.nn.functional.pad(three_path, (0, 0, 0, 1)) + \
        torch.nn.functional.pad(three_path, (0, 0, 1, 0))
    return torch.linalg.solve(mat, rhs)


def _spline_eval(torch, t, coeffs, s):
    a, b, two_c, three_d = coeffs
    idx = torch.bucketize(s.detach(), t[1:-1])
    frac = s - t[idx]
    inner = 0.5 * two_c[..., idx, :] + three_d[..., idx, :] * frac.unsqueeze(-1) / 3
    value = a[..., idx, :] + (b[..., idx, :] + inner * frac.unsqueeze(-1)) * frac.unsqueeze(-1)
    deriv = b[..., idx, :] + (two_c[..., idx, :] + three_d[..., idx, :] * frac.unsqueeze(-1)) \
        * frac.unsqueeze(-1)
    return value, deriv


def neural_cde_program(torch):
    """A neural CDE (torchcde's time_series_classification example) on spline coefficients:
    z' = f(z) dX/dt integrated by RK4-lite midpoint steps, a BCE head, two Adam steps; the
    Thomas solve checked against linalg.solve and gradients w.r.t. the data."""
    rng = np.random.default_rng(2)
    batch, length, ch, hidden = 4, 7, 3, 8
    t = torch.linspace(0, 1, length)
    x_np = np.cumsum(rng.standard_normal((batch, length, ch - 1)) * 0.3, axis=1)
    x = torch.cat([t.expand(batch, length).unsqueeze(-1),
                   torch.from_numpy(x_np.astype(np.float32))], dim=-1)
    x.requires_grad_(True)
    coeffs = _natural_cubic_coeffs_thomas(torch, t, x)
    res = {"b": coeffs[1], "three_d": coeffs[3]}
    res["dense"] = _tridiag_dense(torch, t, x)
    res["knot_gap"] = (res["dense"][..., :-1, :] - coeffs[1]).abs().max()
    s = torch.tensor([0.0, 0.1, 0.5, 0.55, 0.99, 1.0])
    val, der = _spline_eval(torch, t, coeffs, s)
    res["interp"], res["deriv"] = val, der
    (val.sum() + der.pow(2).sum()).backward(retain_graph=True)
    res["x_grad"] = x.grad

    class CDEFunc(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear1 = torch.nn.Linear(hidden, 16)
            self.linear2 = torch.nn.Linear(16, hidden * ch)

        def forward(self, t, z):
            z = self.linear1(z).relu()
            z = self.linear2(z).tanh()
            return z.view(z.size(0), hidden, ch)

    func = CDEFunc()
    initial = torch.nn.Linear(ch, hidden)
    readout = torch.nn.Linear(hidden, 1)
    model = torch.nn.ModuleList([func, initial, readout])
    fill_(torch, model, rng)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    labels = torch.tensor([1.0, 0.0, 1.0, 0.0])
    coeffs_d = tuple(c.detach() for c in coeffs)
    grid = torch.linspace(0, 1, 9)
    res["losses"] = []
    for _ in range(2):
        z = initial(x.detach()[:, 0])
        for i in range(len(grid) - 1):
            h = grid[i + 1] - grid[i]
            _, d0 = _spline_eval(torch, t, coeffs_d, grid[i:i + 1])
            _, dm = _spline_eval(torch, t, coeffs_d, (grid[i] + h / 2).reshape(1))
            k1 = (func(grid[i], z) @ d0[:, 0].unsqueeze(-1)).squeeze(-1)
            zm = z + 0.5 * h * k1
            k2 = torch.bmm(func(grid[i] + h / 2, zm), dm[:, 0, :, None]).squeeze(-1)
            z = z + h * k2
        pred = readout(z).squeeze(-1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(pred, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["readout"] = readout.weight.detach()
    return res


def logsignature_program(torch):
    """Signature-lite features: level-1 increments, level-2 signature by the Chen identity,
    Levy areas (the antisymmetric part) as logsignature features, a linear model on top."""
    rng = np.random.default_rng(3)
    batch, length, ch = 3, 9, 3
    path = torch.from_numpy(np.cumsum(rng.standard_normal((batch, length, ch)), 1)
                            .astype(np.float32)).requires_grad_(True)
    inc = path[:, 1:] - path[:, :-1]
    level1 = inc.sum(1)
    # level 2 by Chen: S2 = sum_k (X_{k-1} - X_0) (x) dX_k + 1/2 dX_k (x) dX_k
    start = path[:, :-1] - path[:, :1]
    level2 = torch.einsum("bki,bkj->bij", start, inc) + 0.5 * torch.einsum("bki,bkj->bij",
                                                                           inc, inc)
    area = 0.5 * (level2 - level2.transpose(1, 2))
    iu = torch.triu_indices(ch, ch, offset=1)
    logsig = torch.cat([level1, area[:, iu[0], iu[1]]], dim=-1)
    res = {"level2": level2, "logsig": logsig, "iu": iu}
    # shuffle identity: the symmetric part of level 2 is half the outer square of level 1
    res["chen_sym"] = (level2 + level2.transpose(1, 2)
                       - level1.unsqueeze(2) * level1.unsqueeze(1)).abs().max()
    # windowed logsignature (torchcde.logsig_windows-lite) via unfold
    windows = path.unfold(1, 3, 2).permute(0, 1, 3, 2)
    w_inc = torch.diff(windows, dim=2)
    w_area = torch.einsum("bwki,bwkj->bwij", torch.cumsum(w_inc, 2) - w_inc, w_inc)
    res["win"] = (w_area - w_area.transpose(-1, -2))[..., iu[0], iu[1]]
    head = torch.nn.Linear(logsig.shape[-1], 2)
    fill_(torch, head, rng)
    out = head(logsig).log_softmax(-1)
    loss = torch.nn.functional.nll_loss(out, torch.tensor([0, 1, 1]))
    loss.backward()
    res["loss"] = loss
    res["path_grad"] = path.grad
    return res


PROGRAMS = [sde_solvers_program, latent_sde_program, neural_cde_program, logsignature_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
