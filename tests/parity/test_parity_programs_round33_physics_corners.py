"""Odd corners of the neural-SDE, finance and differentiable-physics repositories, run once with
`torch` bound to ember and once to PyTorch from the same NumPy data: an MLS-MPM step (mpm88 in
torch) with particle-to-grid scatters (index_add_, index_put_ accumulate, scatter_reduce) and
APIC outer products; func.vmap/jacrev/jvp over a spring step; a hand-written SDE adjoint as an
autograd.Function; market statistics (quantile modes, logcumsumexp, cummax drawdowns, rolling
windows by unfold, distributions' cdf/icdf); SO(3) by matrix_exp, eigh of inertia tensors and
polar decompositions; grid_sample modes, affine_grid, circular padding and Jacobi pressure."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def mpm_program(torch):
    """taichi's mpm88 ported to torch: quadratic B-spline weights from floor().long(), P2G
    momentum and mass by index_add_ and index_put_(accumulate=True) on flattened cells, grid
    boundary conditions by masked assignment, G2P with APIC C by outer products, J update;
    the loss on the final centre of mass backpropagated to the initial velocity."""
    rng = np.random.default_rng(30)
    n_grid, n_part, dt = 8, 20, 2e-3
    dx = 1 / n_grid
    p_vol, p_rho, E = (dx * 0.5) ** 2, 1.0, 400.0
    p_mass = p_vol * p_rho
    x0 = torch.from_numpy(rng.uniform(0.3, 0.6, (n_part, 2)).astype(np.float32))
    v0 = torch.zeros(n_part, 2, requires_grad=True)
    res = {}

    def step(x, v, C, J):
        base = (x / dx - 0.5).floor().long()
        fx = x / dx - base.float()
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
        stress = -dt * 4 * E * p_vol * (J - 1) / dx ** 2
        affine = torch.eye(2) * stress[:, None, None] + p_mass * C
        grid_v = torch.zeros(n_grid * n_grid, 2)
        grid_m = torch.zeros(n_grid * n_grid)
        for i in range(3):
            for j in range(3):
                offset = torch.tensor([i, j])
                dpos = (offset.float() - fx) * dx
                weight = w[i][:, 0] * w[j][:, 1]
                cell = base + offset
                flat = cell[:, 0] * n_grid + cell[:, 1]
                mom = weight[:, None] * (p_mass * v + (affine @ dpos.unsqueeze(-1)).squeeze(-1))
                grid_v = grid_v.index_add(0, flat, mom)
                grid_m = grid_m.index_put((flat,), weight * p_mass, accumulate=True)
        nonzero = grid_m > 0
        grid_v = torch.where(nonzero[:, None], grid_v / grid_m.clamp(min=1e-10)[:, None],
                             grid_v)
        grid_v = grid_v + dt * torch.tensor([0.0, -9.8]) * nonzero[:, None]
        gv = grid_v.view(n_grid, n_grid, 2).clone()
        # boundary: no flow through the walls (masked assignment on a clone, as repos write)
        idx = torch.arange(n_grid)
        wall_lo = (idx < 2)[:, None] & (gv[..., 0] < 0)
        gv[..., 0] = gv[..., 0].masked_fill(wall_lo, 0.0)
        # clamp saves its input: clamping the slice itself would trip the version check
        gv[:, :2, 1] = gv[:, :2, 1].clone().clamp(min=0)
        gv[-2:, :, 0] = torch.clamp(gv[-2:, :, 0].clone(), max=0)
        grid_v = gv.view(-1, 2)
        new_v = torch.zeros_like(v)
        new_C = torch.zeros_like(C)
        for i in range(3):
            for j in range(3):
                dpos = torch.tensor([i, j]).float() - fx
                weight = w[i][:, 0] * w[j][:, 1]
                flat = (base[:, 0] + i) * n_grid + base[:, 1] + j
                g_v = grid_v[flat]
                new_v = new_v + weight[:, None] * g_v
                new_C = new_C + 4 * weight[:, None, None] * torch.einsum("pi,pj->pij", g_v,
                                                                         dpos) / dx
        J = J * (1 + dt * new_C.diagonal(dim1=-2, dim2=-1).sum(-1))
        return x + dt * new_v, new_v, new_C, J, grid_m

    x, v, C, J = x0, v0 * 1.0, torch.zeros(n_part, 2, 2), torch.ones(n_part)
    for _ in range(4):
        x, v, C, J, grid_m = step(x, v, C, J)
    res["x"], res["J"], res["grid_m"] = x, J, grid_m
    loss = x[:, 1].mean() + (J - 1).pow(2).sum()
    loss.backward()
    res["v0_grad"] = v0.grad
    # the other P2G scatters repositories use, on the final particle state
    base = (x.detach() / dx - 0.5).floor().long().clamp(0, n_grid - 1)
    flat = base[:, 0] * n_grid + base[:, 1]
    speed = v.detach().norm(dim=-1)
    res["amax"] = torch.zeros(n_grid * n_grid).scatter_reduce(0, flat, speed, reduce="amax",
                                                              include_self=False)
    res["mean"] = torch.full((n_grid * n_grid,), -1.0).scatter_reduce(0, flat, speed, "mean")
    res["count"] = torch.bincount(flat, minlength=n_grid * n_grid)
    res["scatter_add"] = torch.zeros(n_grid * n_grid, 2).scatter_add_(
        0, flat[:, None].expand(-1, 2), v.detach())
    return res


def vmap_springs_program(torch):
    """A spring-chain step written once and batched by func.vmap over initial states, its
    Jacobian by jacrev and jacfwd, a jvp through 10 steps, grad with has_aux, and
    functional_call over a stiffness module."""
    rng = np.random.default_rng(31)
    n, dt = 5, 0.05
    edges = torch.tensor([[0, 1], [1, 2], [2, 3], [3, 4]])

    class Stiffness(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.log_k = torch.nn.Parameter(torch.zeros(4))
            self.register_buffer("rest", torch.ones(4))

        def forward(self, x):
            d = x[edges[:, 1]] - x[edges[:, 0]]
            length = d.norm(dim=-1)
            f = (self.log_k.exp() * (length - self.rest)).unsqueeze(-1) * d / length.unsqueeze(-1)
            return torch.zeros_like(x).index_add(0, edges[:, 0], f).index_add(0, edges[:, 1], -f)

    model = Stiffness()
    fill_(torch, model, rng, scale=0.2)

    def step(state):
        x, v = state[:n], state[n:]
        v = v + dt * model(x)
        return torch.cat([x + dt * v, v])

    states = torch.from_numpy(np.concatenate(
        [np.stack([np.arange(n) * 1.1, rng.normal(0, 0.1, n)], 1)[None].repeat(3, 0)
         + rng.normal(0, 0.05, (3, n, 2)), rng.normal(0, 0.1, (3, n, 2))], 1).astype(np.float32))
    res = {"batched": torch.func.vmap(step)(states)}
    res["loop"] = torch.stack([step(s) for s in states])
    res["jacrev"] = torch.func.jacrev(step)(states[0])
    res["jacfwd"] = torch.func.jacfwd(step)(states[0])

    def rollout(s):
        for _ in range(10):
            s = step(s)
        return s
    tangent = torch.zeros_like(states[0])
    tangent[0, 0] = 1.0
    out, jvp_out = torch.func.jvp(rollout, (states[0],), (tangent,))
    res["jvp"], res["rollout"] = jvp_out, out

    def energy_loss(params, s):
        final = torch.func.functional_call(model, params, (s[:n],))
        return final.pow(2).sum(), final.abs().max()

    params = {k: v.detach() for k, v in model.named_parameters()}
    g, aux = torch.func.grad(energy_loss, has_aux=True)(params, states[1])
    res["grad_log_k"], res["aux"] = g["log_k"], aux
    per_sample = torch.func.vmap(torch.func.grad(lambda p, s: energy_loss(p, s)[0]),
                                 in_dims=(None, 0))(params, states)
    res["per_sample"] = per_sample["log_k"]
    return res


class _EulerSDEAdjoint:
    """Builds the hand-written SDE adjoint autograd.Function for a given `torch`."""

    @staticmethod
    def make(torch):
        class SDEAdjoint(torch.autograd.Function):
            @staticmethod
            def forward(ctx, y0, dw, dt, net, *params):
                with torch.no_grad():
                    ys = [y0]
                    for i in range(dw.size(0)):
                        ys.append(ys[-1] + net(ys[-1]) * dt + 0.3 * dw[i])
                ctx.save_for_backward(torch.stack(ys), dw)
                ctx.dt, ctx.net = dt, net
                steps = torch.tensor(dw.size(0))
                ctx.mark_non_differentiable(steps)
                return ys[-1], steps

            @staticmethod
            def backward(ctx, grad_y, _grad_steps):
                ys, dw = ctx.saved_tensors
                params = tuple(ctx.net.parameters())
                adj = grad_y
                grads = [torch.zeros_like(p) for p in params]
                for i in range(dw.size(0) - 1, -1, -1):
                    with torch.enable_grad():
                        y = ys[i].detach().requires_grad_(True)
                        out = y + ctx.net(y) * ctx.dt
                        vjps = torch.autograd.grad(out, (y,) + params, adj, allow_unused=True)
                    adj = vjps[0]
                    grads = [g + (v if v is not None else 0) for g, v in zip(grads, vjps[1:])]
                return (adj, None, None, None, *grads)
        return SDEAdjoint


def sde_adjoint_program(torch):
    """A torchsde-style adjoint by hand: an autograd.Function that integrates under no_grad,
    saves the path, marks the step count non-differentiable, and rebuilds vjps step by step
    in backward with enable_grad; checked against direct backprop through the same steps."""
    rng = np.random.default_rng(32)
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    fill_(torch, net, rng)
    y0 = normal(torch, rng, 4, 3).requires_grad_(True)
    dw = normal(torch, rng, 6, 4, 3) * math.sqrt(0.1)
    SDEAdjoint = _EulerSDEAdjoint.make(torch)
    y_t, steps = SDEAdjoint.apply(y0, dw, 0.1, net, *net.parameters())
    loss = (y_t ** 2).sum()
    loss.backward()
    res = {"y_t": y_t, "steps": steps.item(), "steps_grad": steps.requires_grad,
           "grad_fn": [type(y_t.grad_fn).__name__],
           "y0_grad": y0.grad.clone(), "w_grad": [p.grad.clone() for p in net.parameters()]}
    net.zero_grad()
    y0.grad = None
    y = y0
    for i in range(dw.size(0)):
        y = y + net(y) * 0.1 + 0.3 * dw[i]
    (y ** 2).sum().backward()
    res["direct_y0"], res["direct_w"] = y0.grad, [p.grad for p in net.parameters()]
    # a Brownian motion from a seeded generator: reproducible, right shapes, not values
    g = torch.Generator().manual_seed(7)
    a = torch.randn(5, 3, generator=g)
    g.manual_seed(7)
    b = torch.randn(5, 3, generator=g)
    res["bm_repro"] = bool(torch.equal(a, b))
    res["bm_shape"] = list(torch.randn(2, 3, generator=g).cumsum(0).shape)
    return res


def market_stats_program(torch):
    """What risk repositories compute on return series: VaR by every quantile interpolation,
    nanquantile with gaps, drawdowns by cummax, log-wealth by logcumsumexp, rolling volatility
    by unfold, EWMA by a loop and by conv1d, weighted covariances, Normal cdf/icdf with grads."""
    rng = np.random.default_rng(33)
    rets = torch.from_numpy((rng.standard_t(4, (3, 30)) * 0.01).astype(np.float32))
    res = {}
    for how in ("linear", "lower", "higher", "midpoint", "nearest"):
        res["var_" + how] = torch.quantile(rets, torch.tensor([0.05, 0.5]), dim=1,
                                           interpolation=how)
    gappy = rets.clone()
    gappy[0, ::4] = float("nan")
    res["nanq"] = torch.nanquantile(gappy, 0.1, dim=1, keepdim=True)
    res["nanmean"] = gappy.nanmean(1)
    wealth = torch.cumprod(1 + rets, dim=1)
    peak, peak_idx = torch.cummax(wealth, dim=1)
    res["max_dd"] = ((wealth - peak) / peak).min(dim=1).values
    res["peak_idx"] = peak_idx[:, -5:]
    res["trough"] = torch.cummin(wealth, 1).values[:, -1]
    res["log_wealth"] = torch.logcumsumexp(torch.log1p(rets), dim=1)[:, ::7]
    windows = rets.unfold(1, 5, 1)
    res["roll_vol"] = windows.std(-1)[:, ::5]
    res["roll_mean_var"] = torch.var_mean(windows, dim=-1, correction=0)[0][:, :3]
    lam = 0.9
    ew = rets[:, :1] ** 2
    for t in range(1, rets.size(1)):
        ew = torch.cat([ew, lam * ew[:, -1:] + (1 - lam) * rets[:, t:t + 1] ** 2], 1)
    kernel = (1 - lam) * lam ** torch.arange(9, -1, -1, dtype=torch.float32)
    conv = torch.nn.functional.conv1d(torch.nn.functional.pad(rets.unsqueeze(1) ** 2, (9, 0)),
                                      kernel.view(1, 1, -1))
    res["ewma"], res["ewma_conv"] = ew[:, -5:], conv[:, 0, -5:]
    res["diff"] = torch.diff(rets, n=2, dim=1, prepend=torch.zeros(3, 1),
                             append=torch.ones(3, 1))[:, :4]
    res["cov_w"] = torch.cov(rets, correction=1, fweights=torch.arange(1, 31),
                             aweights=torch.linspace(0.1, 1.0, 30))
    mu = torch.tensor([0.0, 0.01], requires_grad=True)
    dist = torch.distributions.Normal(mu, torch.tensor([1.0, 0.02]))
    p = dist.cdf(torch.tensor([0.5, 0.0]))
    q = dist.icdf(torch.tensor([0.01, 0.99]))
    (p.sum() + q.sum()).backward()
    res["cdf"], res["icdf"], res["mu_grad"] = p, q, mu.grad
    lognorm = torch.distributions.LogNormal(torch.tensor(0.0), torch.tensor(0.25))
    res["lognormal"] = [lognorm.mean, lognorm.variance, lognorm.log_prob(torch.tensor(1.2))]
    x = torch.tensor([-3.0, -0.5, 2.0], requires_grad=True)
    y = torch.special.log_ndtr(x).sum() + torch.special.erfcx(x).sum() + \
        torch.special.ndtr(x).sum()
    y.backward()
    res["special_grad"] = x.grad
    res["searchsorted"] = torch.searchsorted(torch.sort(rets[0]).values,
                                             torch.tensor([-0.01, 0.0, 0.01]), right=True)
    res["bucketize"] = torch.bucketize(rets[1, :6], torch.tensor([-0.01, 0.0, 0.01]),
                                       out_int32=True)
    res["bucket_dtype"] = [str(res["bucketize"].dtype).split(".")[-1]]
    res["softmin"] = torch.nn.functional.softmin(rets[:, :4] * 100, dim=1)
    return res


def rotations_program(torch):
    """SO(3) and inertia: exp of skew matrices by linalg.matrix_exp against Rodrigues, principal
    axes by eigh (compared up to sign), polar decomposition of a deformation gradient by svd
    (R = U Vh with a reflection fix), slerp with an acos clamp, atan2 Euler angles, and
    gradients through matrix_exp."""
    rng = np.random.default_rng(34)
    omega = normal(torch, rng, 4, 3).requires_grad_(True)
    zero = torch.zeros_like(omega[:, 0])
    skew = torch.stack([torch.stack([zero, -omega[:, 2], omega[:, 1]], -1),
                        torch.stack([omega[:, 2], zero, -omega[:, 0]], -1),
                        torch.stack([-omega[:, 1], omega[:, 0], zero], -1)], -2)
    rot = torch.linalg.matrix_exp(skew)
    theta = omega.norm(dim=-1)[:, None, None]
    rod = torch.eye(3) + torch.sin(theta) / theta * skew + \
        (1 - torch.cos(theta)) / theta ** 2 * (skew @ skew)
    res = {"rot": rot, "rod_gap": (rot - rod).abs().max()}
    rot[:, 0, 1].sum().backward()
    res["omega_grad"] = omega.grad
    pts = normal(torch, rng, 30, 3) * torch.tensor([3.0, 1.0, 0.3])
    inertia = (pts.pow(2).sum() * torch.eye(3) - pts.T @ pts) / 30
    evals, evecs = torch.linalg.eigh(inertia)
    res["evals"] = evals
    res["evec_abs"] = evecs.abs()
    res["recon"] = evecs @ torch.diag(evals) @ evecs.T
    F = torch.eye(3) + 0.3 * normal(torch, rng, 3, 3)
    U, S, Vh = torch.linalg.svd(F)
    R = U @ Vh
    if torch.det(R) < 0:
        U = U.clone()
        U[:, -1] = -U[:, -1]
        R = U @ Vh
    res["polar_R"], res["S"] = R, S
    res["polar_P"] = Vh.T @ torch.diag(S) @ Vh
    q0 = torch.nn.functional.normalize(torch.tensor([1.0, 0.2, 0.0, 0.1]), dim=0)
    q1 = torch.nn.functional.normalize(torch.tensor([0.3, 0.9, 0.1, -0.2]), dim=0)
    dot = (q0 * q1).sum().clamp(-1.0, 1.0)
    ang = torch.acos(dot)
    ts = torch.linspace(0, 1, 5)[:, None]
    res["slerp"] = (torch.sin((1 - ts) * ang) * q0 + torch.sin(ts * ang) * q1) / torch.sin(ang)
    res["yaw"] = torch.atan2(rot[:, 1, 0], rot[:, 0, 0]).detach()
    res["pitch"] = torch.asin(torch.clamp(-rot[:, 2, 0], -1, 1)).detach()
    res["cross_dim"] = torch.linalg.cross(omega.detach(), pts[:4], dim=-1)
    return res


def fluid_sampling_program(torch):
    """The grid_sample variants fluid and warping codes use (bilinear/nearest/bicubic; zeros,
    border and reflection padding; both align_corners), affine_grid, a 3-D grid_sample,
    circular padding for periodic Laplacians, Jacobi pressure iterations, and gradients with
    respect to both the field and the grid."""
    rng = np.random.default_rng(35)
    field = normal(torch, rng, 1, 2, 8, 8).requires_grad_(True)
    grid = (torch.from_numpy(rng.uniform(-1.2, 1.2, (1, 5, 5, 2)).astype(np.float32))
            .requires_grad_(True))
    res = {}
    total = 0
    for mode in ("bilinear", "nearest", "bicubic"):
        for pad in ("zeros", "border", "reflection"):
            for ac in (True, False):
                out = torch.nn.functional.grid_sample(field, grid, mode=mode, padding_mode=pad,
                                                      align_corners=ac)
                res[f"{mode}_{pad}_{ac}"] = out.detach()
                total = total + (out * torch.arange(1.0, 26.0).view(1, 1, 5, 5)).sum()
    total.backward()
    res["field_grad"], res["grid_grad"] = field.grad, grid.grad
    theta = torch.tensor([[[0.9, -0.2, 0.1], [0.2, 0.9, -0.05]]], requires_grad=True)
    ag = torch.nn.functional.affine_grid(theta, (1, 2, 6, 6), align_corners=False)
    warped = torch.nn.functional.grid_sample(field.detach(), ag, align_corners=False)
    warped.square().mean().backward()
    res["theta_grad"] = theta.grad
    vol = normal(torch, rng, 1, 1, 4, 5, 6)
    grid3 = torch.from_numpy(rng.uniform(-1, 1, (1, 2, 3, 4, 3)).astype(np.float32))
    res["vol"] = torch.nn.functional.grid_sample(vol, grid3, align_corners=True)
    res["vol_nearest"] = torch.nn.functional.grid_sample(vol, grid3, mode="nearest",
                                                         padding_mode="border",
                                                         align_corners=False)
    div = normal(torch, rng, 1, 1, 8, 8)
    div = div - div.mean()
    lap_k = torch.tensor([[0.0, 1, 0], [1, -4, 1], [0, 1, 0]]).view(1, 1, 3, 3)
    p = torch.zeros_like(div)
    nb_k = torch.tensor([[0.0, 1, 0], [1, 0, 1], [0, 1, 0]]).view(1, 1, 3, 3)
    for _ in range(20):
        p = (torch.nn.functional.conv2d(torch.nn.functional.pad(p, (1, 1, 1, 1),
                                                                mode="circular"), nb_k)
             - div) / 4
    res["jacobi"] = p
    res["residual"] = torch.nn.functional.conv2d(
        torch.nn.functional.pad(p, (1, 1, 1, 1), mode="circular"), lap_k) - div
    res["fftshift"] = torch.fft.fftshift(torch.fft.fft2(div[0, 0]).abs(), dim=(-2, -1))[:3]
    res["rfftn_fwd"] = torch.view_as_real(torch.fft.rfftn(div[0, 0], norm="forward"))[:2]
    res["irfft_odd"] = torch.fft.irfft2(torch.fft.rfft2(div[0, 0, :, :7]), s=(8, 7))[0]
    return res


PROGRAMS = [mpm_program, vmap_springs_program, sde_adjoint_program, market_stats_program,
            rotations_program, fluid_sampling_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
