"""Grid- and SDF-based neural fields as DVGO, K-Planes, D-NeRF and NeuS write them in torch:
dense voxel grids read through 5-D grid_sample (gradients to the grid and to the points),
trilinear rescaling and max_pool3d masks, a custom alpha autograd.Function, K-Planes' space-time
planes with border/reflection padding and torch.diff smoothness, and NeuS with weight_norm,
geometric init, the eikonal loss through create_graph and its logistic-density renderer.
Sibling of test_parity_programs_round32_fields.py."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _raw2alpha_class(torch):
    class Raw2Alpha(torch.autograd.Function):
        @staticmethod
        def forward(ctx, density, shift, interval):
            exp = torch.exp(density + shift)
            alpha = 1 - torch.pow(1 + exp, -interval)
            ctx.save_for_backward(exp)
            ctx.interval = interval
            return alpha

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, grad_back):
            exp, = ctx.saved_tensors
            interval = ctx.interval
            return grad_back * torch.pow(1 + exp, -interval) * exp * interval / (1 + exp), \
                None, None
    return Raw2Alpha


def dvgo_program(torch):
    F = torch.nn.functional
    rng = np.random.default_rng(20)
    raw2alpha = _raw2alpha_class(torch).apply
    density = torch.nn.Parameter(normal(torch, rng, 1, 1, 6, 6, 6))
    k0 = torch.nn.Parameter(0.5 * normal(torch, rng, 1, 3, 6, 6, 6))
    xyz_min, xyz_max = torch.tensor([-1., -1, -1]), torch.tensor([1., 1, 1])
    opt = torch.optim.Adam([{"params": [density], "lr": 0.1}, {"params": [k0], "lr": 0.05}])
    pts = torch.from_numpy(rng.uniform(-1.1, 1.1, (30, 3)).astype(np.float32))
    target = torch.from_numpy(rng.uniform(0, 1, (30, 3)).astype(np.float32))
    act_shift = math.log(1 / (1 - 1e-2) - 1)
    res = {"losses": []}
    for _ in range(3):
        shape = pts.shape[:-1]
        ind = ((pts - xyz_min) / (xyz_max - xyz_min)).flip((-1,)) * 2 - 1
        g = ind.reshape(1, 1, 1, -1, 3)
        dens = F.grid_sample(density, g, mode="bilinear", align_corners=True).reshape(*shape)
        rgb = torch.sigmoid(F.grid_sample(k0, g, mode="bilinear", align_corners=True)
                            .reshape(3, -1).T)
        alpha = raw2alpha(dens, act_shift, 0.5)
        loss = F.mse_loss(rgb * alpha[:, None], target) + 1e-3 * (
            density.diff(dim=2).abs().mean() + density.diff(dim=3).abs().mean())
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.detach())
    res["density"], res["k0"] = density.detach(), k0.detach()
    # scale_volume_grid and the mask cache
    with torch.no_grad():
        up = F.interpolate(density.data, size=(9, 9, 9), mode="trilinear", align_corners=True)
        res["up"] = up
        res["mask"] = F.max_pool3d(up, kernel_size=3, padding=1, stride=1) > 0.5
        res["mask_sum"] = res["mask"].sum()
    # grid_sample's gradient with respect to the sampling grid (D-NeRF-style deformation)
    gp = torch.from_numpy(rng.uniform(-0.9, 0.9, (1, 2, 3, 4, 3)).astype(np.float32))
    gp.requires_grad_(True)
    vol = normal(torch, rng, 1, 2, 4, 5, 3).requires_grad_(True)
    for pad in ("zeros", "border", "reflection"):
        out = F.grid_sample(vol, gp * 1.2, mode="bilinear", padding_mode=pad,
                            align_corners=False)
        gx, gv = torch.autograd.grad((out ** 2).sum(), (gp, vol))
        res[f"gs_{pad}"], res[f"gs_{pad}_gp"], res[f"gs_{pad}_gv"] = out.detach(), gx, gv
    res["nearest"] = F.grid_sample(vol.detach(), gp.detach(), mode="nearest",
                                   align_corners=True)
    return res


def kplanes_program(torch):
    F = torch.nn.functional
    rng = np.random.default_rng(21)
    coo_combs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    reso, C = [6, 6, 6, 4], 4
    grids = torch.nn.ParameterList()
    for comb in coo_combs:
        shape = [1, C] + [reso[cc] for cc in comb[::-1]]
        p = torch.nn.Parameter(torch.empty(shape))
        if 3 in comb:
            torch.nn.init.ones_(p)
        else:
            with torch.no_grad():
                p.copy_(torch.from_numpy(rng.uniform(0.1, 0.5, shape).astype(np.float32)))
        grids.append(p)
    dec = torch.nn.Sequential(torch.nn.Linear(C, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    fill_(torch, dec, rng)
    opt = torch.optim.Adam(list(grids.parameters()) + list(dec.parameters()), lr=1e-2,
                           eps=1e-15)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5, eta_min=1e-4)
    pts = torch.from_numpy(rng.uniform(-1, 1, (25, 4)).astype(np.float32))
    target = torch.from_numpy(rng.uniform(0, 1, (25, 4)).astype(np.float32))
    res = {"losses": [], "lr": []}
    for _ in range(3):
        interp = 1.
        for ci, comb in enumerate(coo_combs):
            coords = pts[..., comb].view(1, 1, -1, 2)
            feat = F.grid_sample(grids[ci], coords, align_corners=True, mode="bilinear",
                                 padding_mode="border")
            interp = interp * feat.view(C, -1).transpose(-1, -2)
        out = dec(interp)
        loss = F.smooth_l1_loss(out, target, beta=0.5)
        # plane TV on space planes and smoothness (second difference) on time planes
        tv, smooth = 0., 0.
        for ci, comb in enumerate(coo_combs):
            g = grids[ci]
            if 3 in comb:
                first = g[..., 1:, :] - g[..., :-1, :]
                second = first[..., 1:, :] - first[..., :-1, :]
                smooth = smooth + torch.square(second).mean()
                tv = tv + torch.abs(1 - g).mean()
            else:
                _, c, h, w = g.shape
                h_tv = torch.square(g[..., 1:, :] - g[..., :-1, :]).sum()
                w_tv = torch.square(g[..., :, 1:] - g[..., :, :-1]).sum()
                tv = tv + 2 * (h_tv / ((h - 1) * w) + w_tv / (h * (w - 1))) / c
        total = loss + 1e-3 * tv + 1e-2 * smooth
        opt.zero_grad()
        total.backward()
        opt.step()
        sched.step()
        res["losses"].append(total.detach())
        res["lr"].append(sched.get_last_lr()[0])
    res["grids"] = [g.detach() for g in grids]
    res["diff2"] = torch.diff(grids[2].detach(), n=2, dim=-2)
    res["diff_pre"] = torch.diff(torch.tensor([1., 4, 9]), prepend=torch.tensor([0.]),
                                 append=torch.tensor([16., 25]))
    return res


def _sdf_net(torch, rng, d_in=3, hidden=32, n_layers=3, bias=0.5):
    # NeuS's SDFNetwork: geometric init then weight_norm
    layers = []
    dims = [d_in] + [hidden] * n_layers + [1 + 8]
    for i in range(len(dims) - 1):
        lin = torch.nn.Linear(dims[i], dims[i + 1])
        if i == len(dims) - 2:
            torch.nn.init.normal_(lin.weight, mean=np.sqrt(np.pi) / np.sqrt(dims[i]), std=1e-4)
            torch.nn.init.constant_(lin.bias, -bias)
        else:
            torch.nn.init.constant_(lin.bias, 0.0)
            torch.nn.init.normal_(lin.weight, 0.0, np.sqrt(2) / np.sqrt(dims[i + 1]))
        # the random inits above are replaced by NumPy draws of the same scale
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(
                (rng.standard_normal(tuple(lin.weight.shape)) * np.sqrt(2 / dims[i + 1])
                 + (np.sqrt(np.pi / dims[i]) if i == len(dims) - 2 else 0)).astype(np.float32)))
        layers.append(torch.nn.utils.weight_norm(lin))
    return torch.nn.ModuleList(layers)


def neus_program(torch):
    F = torch.nn.functional
    rng = np.random.default_rng(22)
    layers = _sdf_net(torch, rng)
    variance = torch.nn.Parameter(torch.tensor(0.3))
    softplus = torch.nn.Softplus(beta=100)

    def sdf_fn(x):
        h = x
        for i, lin in enumerate(layers):
            h = lin(h)
            if i < len(layers) - 1:
                h = softplus(h)
        return h

    params = list(layers.parameters()) + [variance]
    opt = torch.optim.Adam(params, lr=5e-4)
    rays_o = normal(torch, rng, 4, 3) * 0.1
    rays_d = F.normalize(normal(torch, rng, 4, 3), dim=-1)
    z_vals = torch.linspace(0.2, 1.8, 8)[None, :].expand(4, 8)
    target = torch.from_numpy(rng.uniform(0, 1, (4, 3)).astype(np.float32))
    res = {"losses": []}
    for step in range(2):
        dists = z_vals[..., 1:] - z_vals[..., :-1]
        dists = torch.cat([dists, torch.Tensor([1 / 8]).expand(dists[..., :1].shape)], -1)
        mid_z = z_vals + dists * 0.5
        pts = (rays_o[:, None, :] + rays_d[:, None, :] * mid_z[..., :, None]).reshape(-1, 3)
        dirs = rays_d[:, None, :].expand(-1, 8, -1).reshape(-1, 3)
        pts.requires_grad_(True)
        out = sdf_fn(pts)
        sdf, feat = out[:, :1], out[:, 1:]
        gradients = torch.autograd.grad(sdf, pts, torch.ones_like(sdf, requires_grad=False),
                                        create_graph=True, retain_graph=True,
                                        only_inputs=True)[0]
        inv_s = torch.ones([1, 1]) * torch.exp(variance * 10.0).clip(1e-6, 1e6)
        inv_s = inv_s.expand(pts.shape[0], 1)
        true_cos = (dirs * gradients).sum(-1, keepdim=True)
        iter_cos = -(F.relu(-true_cos * 0.5 + 0.5) * (1.0 - 0.7) + F.relu(-true_cos) * 0.7)
        est_next = sdf + iter_cos * dists.reshape(-1, 1) * 0.5
        est_prev = sdf - iter_cos * dists.reshape(-1, 1) * 0.5
        prev_cdf, next_cdf = torch.sigmoid(est_prev * inv_s), torch.sigmoid(est_next * inv_s)
        alpha = ((prev_cdf - next_cdf + 1e-5) / (prev_cdf + 1e-5)).reshape(4, 8).clip(0.0, 1.0)
        weights = alpha * torch.cumprod(torch.cat([torch.ones([4, 1]), 1. - alpha + 1e-7], -1),
                                        -1)[:, :-1]
        color = torch.sigmoid(feat[:, :3]).reshape(4, 8, 3)
        rgb = (color * weights[:, :, None]).sum(dim=1)
        eik = ((torch.linalg.norm(gradients.reshape(4, 8, 3), ord=2, dim=-1) - 1.0) ** 2).mean()
        loss = F.l1_loss(rgb, target, reduction="sum") / 4 + 0.1 * eik
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.detach())
    res["weights"], res["grad"] = weights.detach(), gradients.detach()
    res["params"] = [p.detach() for p in params]
    res["names"] = [n for n, _ in layers.named_parameters()]
    res["g_norm"] = layers[0].weight_g.detach()
    return res


PROGRAMS = [dvgo_program, kplanes_program, neus_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
