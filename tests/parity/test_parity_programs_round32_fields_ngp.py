"""More neural-field programs as torch-ngp, nerfacc, mip-NeRF 360 and EG3D write them: a
truncated-exp autograd.Function under amp's custom_fwd, spherical-harmonics direction encoding,
an occupancy grid over Morton codes (bit shifts, scatter_reduce, bitfield packing), mip-NeRF's
integrated positional encoding, the distortion and proposal losses, and EG3D's ray sampler from
camera intrinsics. Sibling of test_parity_programs_round32_fields.py."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _trunc_exp_class(torch):
    class TruncExp(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.exp(x)

        @staticmethod
        @torch.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            x = ctx.saved_tensors[0]
            return g * torch.exp(x.clamp(-15, 15))
    return TruncExp


def _sh_encode(torch, d):
    # torch-ngp's degree-3 spherical harmonics (first 9 bases)
    x, y, z = d.unbind(-1)
    xy, yz, xz = x * y, y * z, x * z
    x2, y2, z2 = x * x, y * y, z * z
    return torch.stack([
        torch.full_like(x, 0.28209479177387814),
        -0.48860251190291987 * y, 0.48860251190291987 * z, -0.48860251190291987 * x,
        1.0925484305920792 * xy, -1.0925484305920792 * yz,
        0.94617469575755997 * z2 - 0.31539156525251999,
        -1.0925484305920792 * xz, 0.54627421529603959 * x2 - 0.54627421529603959 * y2,
    ], dim=-1)


def ngp_density_program(torch):
    rng = np.random.default_rng(10)
    trunc_exp = _trunc_exp_class(torch).apply
    sigma_net = torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.ReLU(),
                                    torch.nn.Linear(16, 1 + 7))
    color_net = torch.nn.Sequential(torch.nn.Linear(9 + 7, 16), torch.nn.ReLU(),
                                    torch.nn.Linear(16, 3))
    fill_(torch, sigma_net, rng)
    fill_(torch, color_net, rng)
    params = list(sigma_net.parameters()) + list(color_net.parameters())
    opt = torch.optim.Adam(params, lr=1e-2, betas=(0.9, 0.99), eps=1e-15)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda it: 0.1 ** min(it / 30, 1))
    x = normal(torch, rng, 24, 3) * 2
    d = torch.nn.functional.normalize(normal(torch, rng, 24, 3), dim=-1)
    target = torch.from_numpy(rng.uniform(0, 1, (24, 3)).astype(np.float32))
    res = {"losses": [], "lrs": []}
    for _ in range(3):
        h = sigma_net(x)
        sigma = trunc_exp(h[..., 0])
        rgb = torch.sigmoid(color_net(torch.cat([_sh_encode(torch, d), h[..., 1:]], -1)))
        loss = torch.nn.functional.huber_loss(rgb * (1 - torch.exp(-sigma))[:, None], target,
                                              delta=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["losses"].append(loss.detach())
        res["lrs"].append(sched.get_last_lr()[0])
    res["sigma"] = sigma.detach()
    res["params"] = [p.detach() for p in params]
    # the clamp in backward: large inputs still get a finite gradient
    big = torch.tensor([20., -30., 1.], requires_grad=True)
    trunc_exp(big).sum().backward()
    res["big_grad"] = big.grad
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = trunc_exp(torch.ones(3, dtype=torch.bfloat16))
        lin = sigma_net(x)
    res["amp_dtypes"] = [str(t.dtype).split(".")[-1] for t in (y, lin)]
    res["sh"] = _sh_encode(torch, d)
    return res


def _morton3(torch, x):
    # spread the low 10 bits of x over every third bit (nerfacc/torch-ngp's __morton3D)
    x = x & 0x000003FF
    x = (x | (x << 16)) & 0xFF0000FF
    x = (x | (x << 8)) & 0x0300F00F
    x = (x | (x << 4)) & 0x030C30C3
    x = (x | (x << 2)) & 0x09249249
    return x


def occupancy_grid_program(torch):
    rng = np.random.default_rng(11)
    G = 8
    density_grid = torch.zeros(G ** 3)
    X = torch.arange(G, dtype=torch.int32)
    xx, yy, zz = torch.meshgrid(X, X, X, indexing="ij")
    coords = torch.cat([xx.reshape(-1, 1), yy.reshape(-1, 1), zz.reshape(-1, 1)], dim=-1).long()
    indices = _morton3(torch, coords[:, 0]) | (_morton3(torch, coords[:, 1]) << 1) | (
        _morton3(torch, coords[:, 2]) << 2)
    res = {"morton_head": indices[:16], "morton_perm": bool(
        (torch.sort(indices).values == torch.arange(G ** 3)).all())}
    w = normal(torch, rng, 3)
    for step in range(3):
        xyzs = 2 * coords.float() / (G - 1) - 1
        jitter = torch.from_numpy(rng.uniform(0, 1, (G ** 3, 3)).astype(np.float32))
        xyzs = xyzs + (2 * jitter - 1) / G
        sigmas = torch.exp(-(xyzs ** 2).sum(-1) * 4) * 10 + (xyzs @ w).relu()
        tmp = torch.full_like(density_grid, -1.0)
        tmp.scatter_reduce_(0, indices, sigmas, reduce="amax", include_self=False)
        valid = (density_grid >= 0) & (tmp >= 0)
        density_grid[valid] = torch.maximum(density_grid[valid] * 0.95, tmp[valid])
        density_grid[~valid] = tmp[~valid] if step == 0 else density_grid[~valid]
        mean_density = torch.mean(density_grid.clamp(min=0)).item()
        thresh = min(mean_density, 10.0 * 0.05)
        bitfield = (density_grid > thresh).view(-1, 8)
        packed = (bitfield.to(torch.uint8) << torch.arange(8, dtype=torch.uint8)).sum(
            -1, dtype=torch.uint8)
        res[f"packed{step}"] = packed
    res["density"] = density_grid
    res["mean_density"] = mean_density
    res["popcount"] = torch.stack([(packed >> i) & 1 for i in range(8)]).sum(0)
    res["shift_right_neg"] = torch.tensor([-17, 17]) >> 2
    res["bitwise_not"] = ~torch.tensor([0, 5], dtype=torch.uint8)
    res["shift_fn"] = torch.bitwise_left_shift(torch.tensor([1, 3], dtype=torch.int16), 3)
    res["dtypes"] = [str(t.dtype).split(".")[-1] for t in (indices, packed, coords)]
    return res


def _ipe(torch, mean, var, deg=4):
    # mip-NeRF's integrated_pos_enc with diagonal covariance
    scales = 2 ** torch.arange(0, deg, dtype=mean.dtype)
    y = (mean[..., None, :] * scales[:, None]).reshape(*mean.shape[:-1], -1)
    y_var = (var[..., None, :] * scales[:, None] ** 2).reshape(*mean.shape[:-1], -1)
    x = torch.cat([y, y + 0.5 * math.pi], -1)
    x_var = torch.cat([y_var, y_var], -1)
    return torch.exp(-0.5 * x_var) * torch.sin(x)


def _lossfun_distortion(torch, t, w):
    # mip-NeRF 360's distortion loss
    ut = (t[..., 1:] + t[..., :-1]) / 2
    dut = torch.abs(ut[..., :, None] - ut[..., None, :])
    loss_inter = torch.sum(w * torch.sum(w[..., None, :] * dut, dim=-1), dim=-1)
    loss_intra = torch.sum(w ** 2 * (t[..., 1:] - t[..., :-1]), dim=-1) / 3
    return loss_inter + loss_intra


def _lossfun_outer(torch, t, w, t_env, w_env, eps=1e-7):
    # mip-NeRF 360's proposal loss: w must stay under the envelope's bound
    cw_env = torch.cat([torch.zeros_like(w_env[..., :1]), torch.cumsum(w_env, dim=-1)], -1)
    idx_lo = (torch.searchsorted(t_env.contiguous(), t.contiguous(), side="right") - 1).clamp(
        0, w_env.shape[-1])
    idx_hi = torch.searchsorted(t_env.contiguous(), t.contiguous(), side="left").clamp(
        0, w_env.shape[-1])
    lo = torch.gather(cw_env, -1, idx_lo[..., :-1])
    hi = torch.gather(cw_env, -1, idx_hi[..., 1:])
    w_outer = hi - lo
    return torch.clip(w - w_outer, min=0) ** 2 / (w + eps)


def mipnerf360_program(torch):
    rng = np.random.default_rng(12)
    R, S = 5, 9
    # no bias before the softmax: its gradient is 0 up to rounding, which Adam would amplify
    mlp = torch.nn.Sequential(torch.nn.Linear(24, 32), torch.nn.ReLU(),
                              torch.nn.Linear(32, 1, bias=False))
    prop = torch.nn.Sequential(torch.nn.Linear(24, 16), torch.nn.ReLU(),
                               torch.nn.Linear(16, 1, bias=False))
    fill_(torch, mlp, rng)
    fill_(torch, prop, rng)
    opt = torch.optim.AdamW(list(mlp.parameters()) + list(prop.parameters()), lr=2e-3,
                            weight_decay=1e-5)
    means = normal(torch, rng, R, S - 1, 3)
    covs = torch.from_numpy(rng.uniform(0.01, 0.2, (R, S - 1, 3)).astype(np.float32))
    t = torch.sort(torch.from_numpy(rng.uniform(0, 1, (R, S)).astype(np.float32)), -1).values
    t_env = torch.sort(torch.from_numpy(rng.uniform(0, 1, (R, S + 2)).astype(np.float32)),
                       -1).values
    res = {"losses": []}
    for _ in range(3):
        enc = _ipe(torch, means, covs)
        w = torch.softmax(mlp(enc).squeeze(-1), -1)
        w_env = torch.softmax(prop(_ipe(torch, means.mean(1, keepdim=True).expand(-1, S + 1, -1),
                                        covs.mean(1, keepdim=True).expand(-1, S + 1, -1)))
                              .squeeze(-1), -1)
        l_dist = _lossfun_distortion(torch, t, w).mean()
        l_prop = _lossfun_outer(torch, t, w.detach(), t_env, w_env).mean()
        loss = 0.01 * l_dist + l_prop + (w * torch.linspace(0, 1, S - 1)).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(mlp.parameters(), 1e-3)
        opt.step()
        res["losses"].append(loss.detach())
    res["enc"] = enc
    res["w"], res["w_env"] = w.detach(), w_env.detach()
    res["dist"], res["prop"] = l_dist.detach(), l_prop.detach()
    res["params"] = [p.detach() for p in mlp.parameters()]
    return res


def eg3d_rays_program(torch):
    rng = np.random.default_rng(13)
    N, res_ = 2, 4
    # EG3D's LookAtPoseSampler / create_cam2world_matrix + RaySampler
    forward = torch.nn.functional.normalize(normal(torch, rng, N, 3), dim=-1)
    origin = -forward * 2.7
    up = torch.tensor([0, 1, 0], dtype=torch.float).expand_as(forward)
    right = -torch.nn.functional.normalize(torch.cross(up, forward, dim=-1), dim=-1)
    up = torch.nn.functional.normalize(torch.cross(forward, right, dim=-1), dim=-1)
    rot = torch.eye(4).unsqueeze(0).repeat(forward.shape[0], 1, 1)
    rot[:, :3, :3] = torch.stack((right, up, forward), dim=-1)
    trans = torch.eye(4).unsqueeze(0).repeat(forward.shape[0], 1, 1)
    trans[:, :3, 3] = origin
    cam2world = (trans @ rot)[:, :4, :4]
    intr = torch.tensor([[4.2647, 0, 0.5], [0, 4.2647, 0.5], [0, 0, 1]]).expand(N, -1, -1)
    cam_locs = cam2world[:, :3, 3]
    fx, fy = intr[:, 0, 0], intr[:, 1, 1]
    cx, cy, sk = intr[:, 0, 2], intr[:, 1, 2], intr[:, 0, 1]
    uv = torch.stack(torch.meshgrid(torch.arange(res_, dtype=torch.float32),
                                    torch.arange(res_, dtype=torch.float32), indexing="ij"))
    uv = uv * (1. / res_) + (0.5 / res_)
    uv = uv.flip(0).reshape(2, -1).transpose(1, 0)
    uv = uv.unsqueeze(0).repeat(cam2world.shape[0], 1, 1)
    x_cam, y_cam = uv[:, :, 0].view(N, -1), uv[:, :, 1].view(N, -1)
    z_cam = torch.ones((N, res_ * res_))
    x_lift = (x_cam - cx.unsqueeze(-1) + cy.unsqueeze(-1) * sk.unsqueeze(-1) / fy.unsqueeze(-1)
              - sk.unsqueeze(-1) * y_cam / fy.unsqueeze(-1)) / fx.unsqueeze(-1) * z_cam
    y_lift = (y_cam - cy.unsqueeze(-1)) / fy.unsqueeze(-1) * z_cam
    cam_rel = torch.stack((x_lift, y_lift, z_cam, torch.ones_like(z_cam)), dim=-1)
    world_rel = torch.bmm(cam2world, cam_rel.permute(0, 2, 1)).permute(0, 2, 1)[:, :, :3]
    ray_dirs = torch.nn.functional.normalize(world_rel - cam_locs[:, None, :], dim=2)
    ray_origins = cam_locs.unsqueeze(1).repeat(1, ray_dirs.shape[1], 1)
    # EG3D's ImportanceRenderer.sample_stratified (deterministic part) and its MipRayMarcher
    depth = torch.linspace(2.25, 3.3, 6).reshape(1, 1, 6, 1).repeat(N, res_ * res_, 1, 1)
    pts = ray_origins.unsqueeze(-2) + depth * ray_dirs.unsqueeze(-2)
    sigma = (1.2 - pts.norm(dim=-1, keepdim=True)) * 5
    colors = torch.sigmoid(pts)
    deltas = depth[:, :, 1:] - depth[:, :, :-1]
    colors_mid = (colors[:, :, :-1] + colors[:, :, 1:]) / 2
    dens_mid = torch.nn.functional.softplus((sigma[:, :, :-1] + sigma[:, :, 1:]) / 2 - 1)
    depths_mid = (depth[:, :, :-1] + depth[:, :, 1:]) / 2
    alpha = 1 - torch.exp(-dens_mid * deltas)
    alpha_shifted = torch.cat([torch.ones_like(alpha[:, :, :1]), 1 - alpha + 1e-10], -2)
    weights = alpha * torch.cumprod(alpha_shifted, -2)[:, :, :-1]
    composite_rgb = torch.sum(weights * colors_mid, -2)
    weight_total = weights.sum(2)
    composite_depth = torch.sum(weights * depths_mid, -2) / weight_total
    composite_depth = torch.nan_to_num(composite_depth, float("inf"))
    composite_depth = torch.clamp(composite_depth, torch.min(depth), torch.max(depth))
    img = (composite_rgb * 2 - 1).permute(0, 2, 1).reshape(N, 3, res_, res_)
    return {"cam2world": cam2world, "dirs": ray_dirs, "origins": ray_origins, "img": img,
            "depth": composite_depth, "wt": weight_total,
            "lowres": torch.nn.functional.interpolate(img, size=(2, 2), mode="bilinear",
                                                      align_corners=False, antialias=True)}


PROGRAMS = [ngp_density_program, occupancy_grid_program, mipnerf360_program, eg3d_rays_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
