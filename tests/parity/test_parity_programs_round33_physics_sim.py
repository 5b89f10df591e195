"""Differentiable-physics programs written as DiffTaichi-style torch ports, phiflow-lite and
jax-md-lite write them, run once with `torch` bound to ember and once to PyTorch from the same
NumPy data: a mass-spring robot with semi-implicit Euler and a loss through 100 steps, initial
velocities optimised through the simulator; SPH density and pressure forces from pairwise cdist
with poly6/spiky kernels; stable-fluids advection by grid_sample and pressure projection by
rfft2/irfft2 over frequency grids; rigid-body quaternion integration; Lennard-Jones molecular
dynamics with periodic displacements, forces by autograd.grad and velocity Verlet."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def mass_spring_program(torch):
    """DiffTaichi's mass_spring in torch: springs with rest lengths and actuation from a small
    sine-feature controller, ground contact by clamping, semi-implicit Euler for 100 steps, the
    loss (negative x of the centre of mass) backpropagated to the controller and to v0."""
    rng = np.random.default_rng(20)
    pos0 = torch.tensor([[0.0, 0.1], [0.1, 0.1], [0.2, 0.1], [0.0, 0.2], [0.1, 0.2], [0.2, 0.2]])
    springs = torch.tensor([[0, 1], [1, 2], [3, 4], [4, 5], [0, 3], [1, 4], [2, 5], [0, 4],
                            [1, 5], [1, 3], [2, 4]])
    rest = (pos0[springs[:, 0]] - pos0[springs[:, 1]]).norm(dim=1)
    actuated = torch.tensor([1.0, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0])
    n_sin, dt, steps, k_spring, damping, gravity = 4, 4e-3, 100, 300.0, 0.8, -4.8
    ctrl = torch.nn.Linear(n_sin, len(springs))
    fill_(torch, ctrl, rng, scale=0.5)
    v0 = torch.zeros(6, 2, requires_grad=True)
    opt = torch.optim.SGD([{"params": ctrl.parameters()}, {"params": [v0], "lr": 0.5}],
                          lr=0.1, momentum=0.5)
    res = {"loss": [], "height": []}
    for _ in range(3):
        x, v = pos0.clone(), v0 * 1.0
        heights = []
        for t in range(steps):
            phases = torch.arange(n_sin, dtype=torch.float32) * (2 * math.pi / n_sin)
            act = torch.tanh(ctrl(torch.sin(10.0 * t * dt + phases))) * actuated
            a, b = springs[:, 0], springs[:, 1]
            d = x[a] - x[b]
            length = torch.linalg.vector_norm(d, dim=1, keepdim=True) + 1e-4
            target = rest.unsqueeze(1) * (1.0 + 0.2 * act.unsqueeze(1))
            f = -k_spring * (length - target) * d / length
            force = torch.zeros_like(x).index_add_(0, a, f).index_add_(0, b, -f)
            v = v * math.exp(-dt * damping) + dt * (force + torch.tensor([0.0, gravity]))
            # ground at y = 0: kill the downward velocity of particles about to cross it
            below = (x[:, 1:] + dt * v[:, 1:]) < 0
            v = torch.where(below, torch.cat([v[:, :1] * 0.5, v[:, 1:].clamp(min=0)], 1), v)
            x = x + dt * v
            heights.append(x[:, 1].mean())
        loss = -x[:, 0].mean() + 0.1 * torch.stack(heights).var()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["height"].append(torch.stack(heights)[::25].detach())
    res["v0"] = v0.detach()
    res["ctrl_w"] = ctrl.weight.detach()
    res["x_final"] = x.detach()
    return res


def _poly6(torch, r, h):
    return 315.0 / (64 * math.pi * h ** 9) * torch.clamp(h ** 2 - r ** 2, min=0) ** 3


def _spiky_grad(torch, r, h):
    return -45.0 / (math.pi * h ** 6) * torch.clamp(h - r, min=0) ** 2


def sph_program(torch):
    """SPH (Mueller et al. 2003): densities by poly6 over torch.cdist, pressure by the
    equation of state, symmetric pressure and viscosity forces by the spiky kernels with the
    diagonal masked, a few symplectic steps, and d(kinetic energy)/d(positions)."""
    rng = np.random.default_rng(21)
    n, h, mass, k_eos, rho0, mu, dt = 24, 0.35, 0.02, 3.0, 1.0, 0.1, 5e-3
    x = torch.from_numpy(rng.uniform(0, 1, (n, 2)).astype(np.float32)).requires_grad_(True)
    v = torch.zeros(n, 2)
    res = {"rho": [], "ke": []}
    pos = x
    for _ in range(4):
        r = torch.cdist(pos, pos)
        rho = mass * _poly6(torch, r, h).sum(1)
        p = k_eos * (rho - rho0)
        diff = pos.unsqueeze(1) - pos.unsqueeze(0)
        eye = torch.eye(n, dtype=torch.bool)
        r_safe = r.masked_fill(eye, 1.0)
        dirs = diff / r_safe.unsqueeze(-1)
        w_grad = _spiky_grad(torch, r, h).masked_fill(eye, 0.0)
        pair_p = mass * (p.unsqueeze(1) + p.unsqueeze(0)) / (2 * rho.unsqueeze(0))
        f_press = -(pair_p * w_grad).unsqueeze(-1).mul(dirs).sum(1)
        lap = (45.0 / (math.pi * h ** 6) * (h - r).clamp(min=0)).masked_fill(eye, 0.0)
        f_visc = mu * mass * ((v.unsqueeze(0) - v.unsqueeze(1)) / rho[None, :, None]
                              * lap.unsqueeze(-1)).sum(1)
        acc = (f_press + f_visc) / rho.unsqueeze(1) + torch.tensor([0.0, -1.0])
        v = v + dt * acc
        pos = pos + dt * v
        # reflecting walls
        pos = pos.clamp(0.0, 1.0)
        res["rho"].append(rho.detach())
        res["ke"].append(0.5 * mass * (v ** 2).sum())
    ke = res["ke"][-1]
    ke.backward()
    res["x_grad"] = x.grad
    res["ke"] = [e.item() for e in res["ke"]]
    res["neighbours"] = (torch.cdist(pos, pos) < h).sum(1).tolist()
    res["p2"] = torch.cdist(pos, pos, p=1)[:3, :5]
    return res


def _freq_grid(torch, n):
    ky = torch.fft.fftfreq(n) * 2 * math.pi
    kx = torch.fft.rfftfreq(n) * 2 * math.pi
    return torch.meshgrid(ky, kx, indexing="ij")


def stable_fluids_program(torch):
    """Stam's stable fluids on a periodic grid: semi-Lagrangian advection of velocity and dye
    by grid_sample along back-traced coordinates, a spectral pressure projection
    (rfft2, divide by |k|^2 with the zero mode kept, irfft2), and the initial velocity
    optimised by Adam so that the dye reaches a target after a few steps."""
    rng = np.random.default_rng(22)
    n, steps, dt = 16, 4, 0.5
    ky, kx = _freq_grid(torch, n)
    k2 = kx ** 2 + ky ** 2
    k2[0, 0] = 1.0
    lin = torch.linspace(-1, 1, n)
    gy, gx = torch.meshgrid(lin, lin, indexing="ij")
    base = torch.stack([gx, gy], dim=-1).unsqueeze(0)
    dye0 = torch.exp(-((gx + 0.4) ** 2 + gy ** 2) / 0.05).view(1, 1, n, n)
    target = torch.exp(-((gx - 0.2) ** 2 + gy ** 2) / 0.05).view(1, 1, n, n)

    def project(u):
        uh = torch.fft.rfft2(u)
        div = 1j * (kx * uh[0] + ky * uh[1])
        p_hat = div / k2
        uh = uh - 1j * torch.stack([kx, ky]) * p_hat
        return torch.fft.irfft2(uh, s=(n, n))

    def advect(field, u):
        coords = base - dt * u.permute(1, 2, 0).unsqueeze(0) * (2.0 / n)
        coords = torch.remainder(coords + 1, 2) - 1
        return torch.nn.functional.grid_sample(field, coords, mode="bilinear",
                                               padding_mode="border", align_corners=True)

    u0 = torch.from_numpy(rng.standard_normal((2, n, n)).astype(np.float32) * 0.1)
    u0.requires_grad_(True)
    opt = torch.optim.Adam([u0], lr=0.2)
    res = {"loss": [], "div": []}
    for _ in range(3):
        u = project(u0 + torch.tensor([1.0, 0.0]).view(2, 1, 1))
        dye = dye0
        for _ in range(steps):
            dye = advect(dye, u)
            u = advect(u.unsqueeze(0), u)[0]
            u = project(u)
        div = torch.fft.irfft2(1j * (kx * torch.fft.rfft2(u)[0] + ky * torch.fft.rfft2(u)[1]),
                               s=(n, n))
        res["div"].append(div.abs().max().item() < 1e-4)
        loss = torch.nn.functional.mse_loss(dye, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["u0"] = u0.detach()[:, ::4, ::4]
    res["dye"] = dye.detach()[0, 0, ::3, ::3]
    res["vorticity"] = (torch.roll(u[1], -1, 1) - torch.roll(u[1], 1, 1)
                        - torch.roll(u[0], -1, 0) + torch.roll(u[0], 1, 0)).detach()[::4, ::4]
    return res


def _quat_mul(torch, q, r):
    w1, x1, y1, z1 = q.unbind(-1)
    w2, x2, y2, z2 = r.unbind(-1)
    return torch.stack([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
                        w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
                        w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2], dim=-1)


def _quat_to_matrix(torch, q):
    w, x, y, z = q.unbind(-1)
    two_s = 2.0 / (q * q).sum(-1)
    o = torch.stack((1 - two_s * (y * y + z * z), two_s * (x * y - z * w),
                     two_s * (x * z + y * w), two_s * (x * y + z * w),
                     1 - two_s * (x * x + z * z), two_s * (y * z - x * w),
                     two_s * (x * z - y * w), two_s * (y * z + x * w),
                     1 - two_s * (x * x + y * y)), -1)
    return o.reshape(q.shape[:-1] + (3, 3))


def rigid_body_program(torch):
    """Rigid bodies with a body-frame inertia tensor: Euler's equations for the angular
    velocity, quaternion integration q += 0.5 dt q * (0, w) then renormalisation, the world
    inertia R I R^T, energy drift, and the initial angular velocity fitted to a target
    orientation by LBFGS through the integrator."""
    rng = np.random.default_rng(23)
    inertia = torch.tensor([[1.0, 2.0, 3.0], [2.0, 2.5, 0.5]])
    q0 = torch.nn.functional.normalize(normal(torch, rng, 2, 4), dim=-1)
    w_init = normal(torch, rng, 2, 3)
    dt, steps = 0.01, 50

    def simulate(w):
        q = q0
        energies = []
        for _ in range(steps):
            lw = inertia * w
            w = w + dt * (-torch.linalg.cross(w, lw)) / inertia
            q = q + 0.5 * dt * _quat_mul(torch, q, torch.nn.functional.pad(w, (1, 0)))
            q = q / q.norm(dim=-1, keepdim=True)
            energies.append(0.5 * (inertia * w * w).sum(-1))
        return q, w, torch.stack(energies)

    q, w, e = simulate(w_init)
    res = {"q": q, "w": w, "drift": e[-1] - e[0]}
    rot = _quat_to_matrix(torch, q)
    res["orth"] = (rot @ rot.transpose(-1, -2) - torch.eye(3)).abs().max()
    res["det"] = torch.linalg.det(rot)
    res["world_inertia"] = rot @ torch.diag_embed(inertia) @ rot.mT
    q_target = torch.nn.functional.normalize(q.detach() + 0.1, dim=-1)
    w_fit = w_init.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([w_fit], lr=0.5, max_iter=4, line_search_fn="strong_wolfe")
    losses = []

    def closure():
        opt.zero_grad()
        qf, _, _ = simulate(w_fit)
        # the double cover: 1 - <q, q*>^2 is sign-invariant
        loss = (1 - (qf * q_target).sum(-1) ** 2).sum()
        loss.backward()
        losses.append(loss.item())
        return loss

    opt.step(closure)
    res["fit_losses"] = losses
    res["w_fit"] = w_fit.detach()
    res["n_evals"] = len(losses)
    return res


def md_program(torch):
    """jax-md-lite in torch: periodic displacement by remainder (minimum image), a neighbour
    mask, a smoothly truncated Lennard-Jones energy, forces as -autograd.grad, velocity Verlet
    for a few steps in float64, and the pressure-like virial via create_graph."""
    rng = np.random.default_rng(24)
    n, box, sigma, eps_lj, r_cut, dt = 12, 3.0, 1.0, 1.0, 2.5, 1e-3
    grid = np.stack(np.meshgrid(np.arange(3), np.arange(2), np.arange(2), indexing="ij"),
                    -1).reshape(-1, 3).astype(np.float64) * [1.0, 1.5, 1.5] + 0.2
    pos = torch.from_numpy(grid + rng.normal(0, 0.05, (n, 3)))
    vel = torch.from_numpy(rng.normal(0, 0.3, (n, 3)))
    vel = vel - vel.mean(0)

    def displacement(r):
        d = r.unsqueeze(1) - r.unsqueeze(0)
        return torch.remainder(d + box / 2, box) - box / 2

    def energy(r):
        d = displacement(r)
        dist2 = (d ** 2).sum(-1)
        mask = (~torch.eye(n, dtype=torch.bool, device=r.device)) & (dist2 < r_cut ** 2)
        dist2 = torch.where(mask, dist2, torch.ones_like(dist2))
        inv6 = (sigma ** 2 / dist2) ** 3
        e = 4 * eps_lj * (inv6 ** 2 - inv6)
        shift = 4 * eps_lj * ((sigma / r_cut) ** 12 - (sigma / r_cut) ** 6)
        return 0.5 * torch.where(mask, e - shift, torch.zeros_like(e)).sum()

    def forces(r, create_graph=False):
        r = r if r.requires_grad else r.requires_grad_(True)
        e = energy(r)
        g, = torch.autograd.grad(e, r, create_graph=create_graph)
        return -g, e

    res = {"energy": [], "kinetic": []}
    f, e = forces(pos.clone())
    for _ in range(8):
        vel = vel + 0.5 * dt * f
        pos = torch.remainder(pos + dt * vel, box).detach()
        f, e = forces(pos.clone())
        vel = vel + 0.5 * dt * f
        res["energy"].append(e.item())
        res["kinetic"].append((0.5 * (vel ** 2).sum()).item())
    res["pos"], res["vel"] = pos, vel
    res["nbrs"] = ((displacement(pos) ** 2).sum(-1) < r_cut ** 2).sum(1).tolist()
    # virial and its derivative w.r.t. positions (Hessian-vector product through forces)
    r = pos.clone().requires_grad_(True)
    f, _ = forces(r, create_graph=True)
    virial = (r * f).sum()
    hvp, = torch.autograd.grad(virial, r)
    res["virial"], res["hvp"] = virial, hvp
    res["hess_sym"] = torch.autograd.functional.hessian(energy, pos[:2].clone().repeat(6, 1)
                                                        + torch.arange(12.0, dtype=torch.float64)
                                                        .unsqueeze(1) * 0.25)[0, 0]
    return res


PROGRAMS = [mass_spring_program, sph_program, stable_fluids_program, rigid_body_program,
            md_program]

TOLERANCES = {
    # vorticity is a difference of rolled velocities: cancellation leaves float32 noise at 2e-5
    "stable_fluids_program": (1e-4, 1e-5),
}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
