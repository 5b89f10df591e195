"""Neural fields and 3-D-aware generation written as the reference repositories write them in
torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy weights:
instant-NGP's multiresolution hash encoding by hand (primes, xor, modulo, trilinear weights,
an embedding table), NeRF volume rendering with hierarchical sampling (exclusive cumprod,
searchsorted inverse CDF), TensoRF's VM factorisation through grid_sample, EG3D tri-planes
with a small decoder, and Plenoxels-style total-variation losses."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

PRIMES = (1, 2654435761, 805459861)


def _hash_grid_class(torch):
    class HashGrid(torch.nn.Module):
        def __init__(self, levels=4, log2_size=6, feats=2, base=4, growth=1.6):
            super().__init__()
            self.levels, self.size, self.feats = levels, 2 ** log2_size, feats
            self.res = [int(base * growth ** i) for i in range(levels)]
            self.embeddings = torch.nn.Embedding(levels * self.size, feats)
            self.register_buffer("primes", torch.tensor(PRIMES, dtype=torch.int64),
                                 persistent=False)
            offs = torch.tensor([[(i >> 2) & 1, (i >> 1) & 1, i & 1] for i in range(8)])
            self.register_buffer("offsets", offs, persistent=False)

        def hash(self, coords):
            x = coords * self.primes
            h = x[..., 0] ^ x[..., 1] ^ x[..., 2]
            return h % self.size

        def forward(self, x):
            outs = []
            for lvl, res in enumerate(self.res):
                scaled = x * res
                lo = torch.floor(scaled).long()
                frac = scaled - lo.float()
                corners = lo.unsqueeze(-2) + self.offsets  # [N, 8, 3]
                idx = self.hash(corners) + lvl * self.size
                emb = self.embeddings(idx)  # [N, 8, F]
                w = torch.where(self.offsets.bool(), frac.unsqueeze(-2),
                                1 - frac.unsqueeze(-2)).prod(-1, keepdim=True)
                outs.append((w * emb).sum(-2))
            return torch.cat(outs, dim=-1)
    return HashGrid


def hash_encoding_program(torch):
    rng = np.random.default_rng(0)
    grid = _hash_grid_class(torch)()
    with torch.no_grad():
        grid.embeddings.weight.copy_(torch.from_numpy(
            rng.uniform(-1e-1, 1e-1, tuple(grid.embeddings.weight.shape)).astype(np.float32)))
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    fill_(torch, mlp, rng)
    opt = torch.optim.Adam([{"params": grid.parameters(), "eps": 1e-15},
                            {"params": mlp.parameters(), "weight_decay": 1e-6}],
                           lr=1e-2, betas=(0.9, 0.99))
    x = torch.from_numpy(rng.uniform(0, 1, (32, 3)).astype(np.float32))
    target = torch.sin(3 * x).sum(-1, keepdim=True)
    res = {"losses": []}
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(mlp(grid(x)), target)
        loss.backward()
        opt.step()
        res["losses"].append(loss.detach())
    res["table"] = grid.embeddings.weight.detach().clone()
    res["grad_rows"] = (grid.embeddings.weight.grad.abs().sum(-1) > 0).sum()
    res["hash"] = grid.hash(torch.tensor([[1, 2, 3], [7, 0, 5]]))
    res["hash_dtype"] = [str(res["hash"].dtype).split(".")[-1]]
    res["state_keys"] = sorted(grid.state_dict().keys())
    res["xor_int32"] = torch.tensor([5, -3], dtype=torch.int32) ^ torch.tensor(
        [2654435761 % 2 ** 31, 7], dtype=torch.int32)
    res["mod_neg"] = torch.tensor([-7, 9]) % 4
    res["remainder_neg"] = torch.remainder(torch.tensor([-7.5, 3.0]), 2)
    res["fmod_neg"] = torch.fmod(torch.tensor([-7.5, 3.0]), 2)
    return res


def _sample_pdf(torch, bins, weights, n, det=True):
    # nerf-pytorch's sample_pdf
    weights = weights + 1e-5
    pdf = weights / torch.sum(weights, -1, keepdim=True)
    cdf = torch.cumsum(pdf, -1)
    cdf = torch.cat([torch.zeros_like(cdf[..., :1]), cdf], -1)
    if det:
        u = torch.linspace(0., 1., steps=n)
        u = u.expand(list(cdf.shape[:-1]) + [n])
    u = u.contiguous()
    inds = torch.searchsorted(cdf, u, right=True)
    below = torch.max(torch.zeros_like(inds - 1), inds - 1)
    above = torch.min((cdf.shape[-1] - 1) * torch.ones_like(inds), inds)
    inds_g = torch.stack([below, above], -1)
    matched_shape = [inds_g.shape[0], inds_g.shape[1], cdf.shape[-1]]
    cdf_g = torch.gather(cdf.unsqueeze(1).expand(matched_shape), 2, inds_g)
    bins_g = torch.gather(bins.unsqueeze(1).expand(matched_shape), 2, inds_g)
    denom = cdf_g[..., 1] - cdf_g[..., 0]
    denom = torch.where(denom < 1e-5, torch.ones_like(denom), denom)
    t = (u - cdf_g[..., 0]) / denom
    return bins_g[..., 0] + t * (bins_g[..., 1] - bins_g[..., 0])


def _render(torch, raw, z_vals, rays_d, white_bkgd=True):
    # nerf-pytorch's raw2outputs
    raw2alpha = lambda raw, dists, act_fn=torch.nn.functional.relu: 1. - torch.exp(  # noqa: E731
        -act_fn(raw) * dists)
    dists = z_vals[..., 1:] - z_vals[..., :-1]
    dists = torch.cat([dists, torch.Tensor([1e10]).expand(dists[..., :1].shape)], -1)
    dists = dists * torch.norm(rays_d[..., None, :], dim=-1)
    rgb = torch.sigmoid(raw[..., :3])
    alpha = raw2alpha(raw[..., 3], dists)
    weights = alpha * torch.cumprod(
        torch.cat([torch.ones((alpha.shape[0], 1)), 1. - alpha + 1e-10], -1), -1)[:, :-1]
    rgb_map = torch.sum(weights[..., None] * rgb, -2)
    depth_map = torch.sum(weights * z_vals, -1)
    disp_map = 1. / torch.max(1e-10 * torch.ones_like(depth_map),
                              depth_map / torch.sum(weights, -1))
    acc_map = torch.sum(weights, -1)
    if white_bkgd:
        rgb_map = rgb_map + (1. - acc_map[..., None])
    return rgb_map, disp_map, acc_map, weights, depth_map


def volume_render_program(torch):
    rng = np.random.default_rng(1)
    n_rays, n_c, n_f = 6, 8, 12
    net = torch.nn.Sequential(torch.nn.Linear(3, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    fill_(torch, net, rng, 0.5)
    opt = torch.optim.Adam(net.parameters(), lr=5e-4, betas=(0.9, 0.999))
    rays_o = normal(torch, rng, n_rays, 3) * 0.1
    rays_d = normal(torch, rng, n_rays, 3)
    rays_d = rays_d / rays_d.norm(dim=-1, keepdim=True)
    target = torch.from_numpy(rng.uniform(0, 1, (n_rays, 3)).astype(np.float32))
    near, far = 2., 6.
    t_vals = torch.linspace(0., 1., steps=n_c)
    z_vals = near * (1. - t_vals) + far * t_vals
    z_vals = z_vals.expand([n_rays, n_c])
    res = {"losses": [], "psnr": []}
    for _ in range(2):
        pts = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]
        raw = net(pts)
        rgb0, disp0, acc0, weights, _ = _render(torch, raw, z_vals, rays_d)
        z_mid = .5 * (z_vals[..., 1:] + z_vals[..., :-1])
        z_samples = _sample_pdf(torch, z_mid, weights[..., 1:-1], n_f).detach()
        z_all, _ = torch.sort(torch.cat([z_vals, z_samples], -1), -1)
        pts_f = rays_o[..., None, :] + rays_d[..., None, :] * z_all[..., :, None]
        rgb, disp, acc, w_f, depth = _render(torch, net(pts_f), z_all, rays_d)
        img_loss = torch.mean((rgb - target) ** 2)
        loss = img_loss + torch.mean((rgb0 - target) ** 2)
        psnr = -10. * torch.log(img_loss) / torch.log(torch.Tensor([10.]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.detach())
        res["psnr"].append(psnr.detach())
    res.update(z_samples=z_samples, depth=depth.detach(), disp=disp.detach(),
               acc=acc.detach(), w_f=w_f.detach(), params=[p.detach() for p in net.parameters()])
    # random (stratified) sampling: shapes and ranges only
    torch.manual_seed(0)
    mids = .5 * (z_vals[..., 1:] + z_vals[..., :-1])
    upper = torch.cat([mids, z_vals[..., -1:]], -1)
    lower = torch.cat([z_vals[..., :1], mids], -1)
    z_rand = lower + (upper - lower) * torch.rand(z_vals.shape)
    res["strat_ok"] = bool(((z_rand >= lower) & (z_rand <= upper)).all())
    res["strat_sorted"] = bool((z_rand[..., 1:] >= z_rand[..., :-1]).all())
    res["searchsorted_left"] = torch.searchsorted(
        torch.tensor([[0., .2, .2, .9, 1.]]), torch.tensor([[.2, .95, 0.]]))
    res["searchsorted_side"] = torch.searchsorted(
        torch.tensor([0., .2, .2, .9, 1.]), torch.tensor([.2, 1.5]), side="right")
    res["bucketize"] = torch.bucketize(torch.tensor([0.1, 0.2, 2.]),
                                       torch.tensor([0., .2, 1.]), right=True, out_int32=True)
    return res


def tensorf_program(torch):
    F = torch.nn.functional
    rng = np.random.default_rng(2)
    R, C = 8, 3
    mat_ids, vec_ids = [[0, 1], [0, 2], [1, 2]], [2, 1, 0]
    planes = torch.nn.ParameterList([torch.nn.Parameter(0.1 * normal(torch, rng, 1, C, R, R))
                                     for _ in range(3)])
    lines = torch.nn.ParameterList([torch.nn.Parameter(0.1 * normal(torch, rng, 1, C, R, 1))
                                    for _ in range(3)])
    basis = torch.nn.Linear(3 * C, 4, bias=False)
    fill_(torch, basis, rng)
    opt = torch.optim.Adam([{"params": list(planes) + list(lines), "lr": 0.02},
                            {"params": basis.parameters(), "lr": 1e-3}], betas=(0.9, 0.99))
    xyz = torch.from_numpy(rng.uniform(-1, 1, (40, 3)).astype(np.float32))
    target = torch.from_numpy(rng.uniform(0, 1, (40, 4)).astype(np.float32))
    res = {"losses": []}
    for step in range(3):
        coord_plane = torch.stack((xyz[..., mat_ids[0]], xyz[..., mat_ids[1]],
                                   xyz[..., mat_ids[2]])).detach().view(3, -1, 1, 2)
        coord_line = torch.stack((xyz[..., vec_ids[0]], xyz[..., vec_ids[1]],
                                  xyz[..., vec_ids[2]]))
        coord_line = torch.stack((torch.zeros_like(coord_line), coord_line),
                                 dim=-1).detach().view(3, -1, 1, 2)
        plane_feat, line_feat = [], []
        for i in range(3):
            plane_feat.append(F.grid_sample(planes[i], coord_plane[[i]], align_corners=True)
                              .view(-1, *xyz.shape[:1]))
            line_feat.append(F.grid_sample(lines[i], coord_line[[i]], align_corners=True)
                             .view(-1, *xyz.shape[:1]))
        plane_feat, line_feat = torch.cat(plane_feat), torch.cat(line_feat)
        feats = basis((plane_feat * line_feat).T)
        sigma = F.softplus(feats[:, 0] - 1.0)
        loss = F.mse_loss(torch.cat([sigma[:, None], torch.sigmoid(feats[:, 1:])], -1), target)
        # TensoRF's L1 on the vectors and its TV on the planes
        l1 = sum(torch.mean(torch.abs(v)) for v in lines)
        tv = 0
        for p in planes:
            h_tv = torch.pow(p[:, :, 1:, :] - p[:, :, :-1, :], 2).sum()
            w_tv = torch.pow(p[:, :, :, 1:] - p[:, :, :, :-1], 2).sum()
            tv = tv + 2 * (h_tv / (C * (R - 1) * R) + w_tv / (C * R * (R - 1))) / 1
        total = loss + 8e-5 * l1 + 1e-2 * tv
        opt.zero_grad()
        total.backward()
        opt.step()
        res["losses"].append(total.detach())
        if step == 1:
            # upsample the grids like TensoRF's upsample_volume_grid
            with torch.no_grad():
                for i in range(3):
                    planes[i] = torch.nn.Parameter(F.interpolate(
                        planes[i].data, size=(R + 4, R + 4), mode="bilinear",
                        align_corners=True))
                    lines[i] = torch.nn.Parameter(F.interpolate(
                        lines[i].data, size=(R + 4, 1), mode="bilinear", align_corners=True))
            R = R + 4
            opt = torch.optim.Adam([{"params": list(planes) + list(lines), "lr": 0.02},
                                    {"params": basis.parameters(), "lr": 1e-3}],
                                   betas=(0.9, 0.99))
    res["planes"] = [p.detach() for p in planes]
    res["lines"] = [v.detach() for v in lines]
    res["basis"] = basis.weight.detach()
    res["n_params"] = sum(p.numel() for p in list(planes) + list(lines))
    return res


def eg3d_triplane_program(torch):
    F = torch.nn.functional
    rng = np.random.default_rng(3)
    N, C, H = 2, 4, 8

    def generate_planes():
        return torch.tensor([[[1, 0, 0], [0, 1, 0], [0, 0, 1]],
                             [[1, 0, 0], [0, 0, 1], [0, 1, 0]],
                             [[0, 0, 1], [0, 1, 0], [1, 0, 0]]], dtype=torch.float32)

    def project_onto_planes(planes, coordinates):
        n, m, _ = coordinates.shape
        n_planes, _, _ = planes.shape
        coordinates = coordinates.unsqueeze(1).expand(-1, n_planes, -1, -1).reshape(
            n * n_planes, m, 3)
        inv_planes = torch.linalg.inv(planes).unsqueeze(0).expand(n, -1, -1, -1).reshape(
            n * n_planes, 3, 3)
        projections = torch.bmm(coordinates, inv_planes)
        return projections[..., :2]

    def sample_from_planes(plane_axes, plane_features, coordinates, box_warp=2.0):
        n, n_planes, c, h, w = plane_features.shape
        _, m, _ = coordinates.shape
        plane_features = plane_features.view(n * n_planes, c, h, w)
        coordinates = (2 / box_warp) * coordinates
        proj = project_onto_planes(plane_axes, coordinates).unsqueeze(1)
        out = F.grid_sample(plane_features, proj.float(), mode="bilinear",
                            padding_mode="zeros", align_corners=False)
        return out.permute(0, 3, 2, 1).reshape(n, n_planes, m, c)

    class OSGDecoder(torch.nn.Module):
        def __init__(self, n_features, hidden=16, out=3):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(n_features, hidden),
                                           torch.nn.Softplus(),
                                           torch.nn.Linear(hidden, 1 + out))

        def forward(self, sampled_features):
            x = sampled_features.mean(1)
            n, m, c = x.shape
            x = self.net(x.view(n * m, c)).view(n, m, -1)
            rgb = torch.sigmoid(x[..., 1:]) * (1 + 2 * 0.001) - 0.001
            return {"rgb": rgb, "sigma": x[..., 0:1]}

    planes_p = torch.nn.Parameter(0.5 * normal(torch, rng, N, 3 * C, H, H))
    dec = OSGDecoder(C)
    fill_(torch, dec, rng)
    opt = torch.optim.Adam([planes_p] + list(dec.parameters()), lr=2e-3, betas=(0.0, 0.99),
                           eps=1e-8)
    coords = torch.from_numpy(rng.uniform(-1.2, 1.2, (N, 10, 3)).astype(np.float32))
    axes = generate_planes()
    target = torch.from_numpy(rng.uniform(0, 1, (N, 10, 3)).astype(np.float32))
    res = {"losses": []}
    for _ in range(3):
        feats = sample_from_planes(axes, planes_p.view(N, 3, C, H, H), coords)
        out = dec(feats)
        # EG3D's density regularisation: perturbed points should agree
        pert = coords + torch.from_numpy(
            rng.standard_normal(coords.shape).astype(np.float32)) * 0.004
        sig_p = dec(sample_from_planes(axes, planes_p.view(N, 3, C, H, H), pert))["sigma"]
        reg = F.l1_loss(out["sigma"], sig_p)
        loss = F.mse_loss(out["rgb"], target) + 0.25 * reg
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.detach())
    res["rgb"], res["sigma"] = out["rgb"].detach(), out["sigma"].detach()
    res["planes"] = planes_p.detach()
    res["inv_axes"] = torch.linalg.inv(axes)
    # Plenoxels-style TV on a dense voxel grid with a neighbour mask
    grid = torch.nn.Parameter(normal(torch, rng, 5, 5, 5, 2))
    mask = torch.from_numpy(rng.uniform(0, 1, (4, 4, 4)) > 0.3)
    dx = grid[1:, :-1, :-1] - grid[:-1, :-1, :-1]
    dy = grid[:-1, 1:, :-1] - grid[:-1, :-1, :-1]
    dz = grid[:-1, :-1, 1:] - grid[:-1, :-1, :-1]
    tv = torch.sqrt(dx ** 2 + dy ** 2 + dz ** 2 + 1e-8)[mask].mean()
    tv.backward()
    res["tv"], res["tv_grad"] = tv.detach(), grid.grad
    res["tv_grad_nz"] = torch.count_nonzero(grid.grad, dim=-1)
    return res


PROGRAMS = [hash_encoding_program, volume_render_program, tensorf_program,
            eg3d_triplane_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
