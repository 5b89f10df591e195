"""Neural fields written as their reference repositories write them in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy data: NeRF (positional encoding,
volume rendering with an exclusive cumprod, hierarchical sampling by searchsorted on a CDF with
fixed NumPy uniforms), SIREN (sine layers with their uniform init bounds, a Poisson loss on the
field's gradient and Laplacian by autograd.grad with create_graph, an eikonal term), a Fourier
feature network, and a 2-D Gaussian splatting rasteriser (covariance from rotation and scale,
alpha compositing with cumprod)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def nerf_program(torch):
    """NeRF: rays from a pinhole camera, stratified samples (fixed uniforms), the Embedder's
    sin/cos of 2^k x with include_input, a skip-connected MLP, raw2outputs (relu density,
    sigmoid colour, dists with a 1e10 tail, alpha, exclusive cumprod by cat of ones), sample_pdf
    with searchsorted(right=True) and the inverse CDF, a fine pass on the sorted union of
    samples (detached), img2mse and mse2psnr; Adam with an exponential lr decay."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2611)
    n_rays, n_samples, n_importance, multires = 6, 8, 6, 4

    def embed(x):
        freq_bands = 2. ** torch.linspace(0., multires - 1, steps=multires)
        outs = [x]
        for freq in freq_bands:
            for p_fn in (torch.sin, torch.cos):
                outs.append(p_fn(x * freq))
        return torch.cat(outs, -1)

    class NeRF(nn.Module):
        def __init__(self, D=4, W=16, input_ch=3 + 3 * 2 * multires, skips=(2,)):
            super().__init__()
            self.skips = skips
            self.pts_linears = nn.ModuleList(
                [nn.Linear(input_ch, W)] + [nn.Linear(W, W) if i not in skips else
                                            nn.Linear(W + input_ch, W) for i in range(D - 1)])
            self.alpha_linear, self.rgb_linear = nn.Linear(W, 1), nn.Linear(W, 3)

        def forward(self, x):
            h = x
            for i, layer in enumerate(self.pts_linears):
                h = F.relu(layer(h))
                if i in self.skips:
                    h = torch.cat([x, h], -1)
            return torch.cat([self.rgb_linear(h), self.alpha_linear(h)], -1)

    def raw2outputs(raw, z_vals, rays_d, noise):
        raw2alpha = lambda raw, dists, act_fn=F.relu: 1. - torch.exp(-act_fn(raw) * dists)  # noqa
        dists = z_vals[..., 1:] - z_vals[..., :-1]
        dists = torch.cat([dists, torch.Tensor([1e10]).expand(dists[..., :1].shape)], -1)
        dists = dists * torch.norm(rays_d[..., None, :], dim=-1)
        rgb = torch.sigmoid(raw[..., :3])
        alpha = raw2alpha(raw[..., 3] + noise, dists)
        weights = alpha * torch.cumprod(
            torch.cat([torch.ones((alpha.shape[0], 1)), 1. - alpha + 1e-10], -1), -1)[:, :-1]
        rgb_map = torch.sum(weights[..., None] * rgb, -2)
        depth_map = torch.sum(weights * z_vals, -1)
        disp_map = 1. / torch.max(1e-10 * torch.ones_like(depth_map),
                                  depth_map / torch.sum(weights, -1))
        acc_map = torch.sum(weights, -1)
        rgb_map = rgb_map + (1. - acc_map[..., None])
        return rgb_map, disp_map, acc_map, weights, depth_map

    def sample_pdf(bins, weights, u):
        weights = weights + 1e-5
        pdf = weights / torch.sum(weights, -1, keepdim=True)
        cdf = torch.cumsum(pdf, -1)
        cdf = torch.cat([torch.zeros_like(cdf[..., :1]), cdf], -1)
        u = u.contiguous()
        inds = torch.searchsorted(cdf, u, right=True)
        below = torch.max(torch.zeros_like(inds - 1), inds - 1)
        above = torch.min((cdf.shape[-1] - 1) * torch.ones_like(inds), inds)
        inds_g = torch.stack([below, above], -1)
        matched_shape = [inds_g.shape[0], inds_g.shape[1], cdf.shape[-1]]
        cdf_g = torch.gather(cdf.unsqueeze(1).expand(matched_shape), 2, inds_g)
        bins_g = torch.gather(bins.unsqueeze(1).expand(matched_shape), 2, inds_g)
        denom = (cdf_g[..., 1] - cdf_g[..., 0])
        denom = torch.where(denom < 1e-5, torch.ones_like(denom), denom)
        t = (u - cdf_g[..., 0]) / denom
        return bins_g[..., 0] + t * (bins_g[..., 1] - bins_g[..., 0]), inds

    coarse, fine = NeRF(), NeRF()
    fill_(torch, coarse, rng, 0.4)
    fill_(torch, fine, rng, 0.4)
    grad_vars = list(coarse.parameters()) + list(fine.parameters())
    opt = torch.optim.Adam(params=grad_vars, lr=5e-3, betas=(0.9, 0.999))
    img2mse = lambda x, y: torch.mean((x - y) ** 2)  # noqa: E731
    mse2psnr = lambda x: -10. * torch.log(x) / torch.log(torch.Tensor([10.]))  # noqa: E731
    H = W = 4
    focal = 3.0
    c2w = torch.from_numpy(np.array([[1, 0, 0, 0.1], [0, 1, 0, -0.2], [0, 0, 1, 2.0]],
                                    np.float32))
    i, j = torch.meshgrid(torch.linspace(0, W - 1, W), torch.linspace(0, H - 1, H),
                          indexing="ij")
    i, j = i.t(), j.t()
    dirs = torch.stack([(i - W * .5) / focal, -(j - H * .5) / focal, -torch.ones_like(i)], -1)
    rays_d = torch.sum(dirs[..., np.newaxis, :] * c2w[:3, :3], -1)
    rays_o = c2w[:3, -1].expand(rays_d.shape)
    sel = torch.from_numpy(rng.choice(H * W, n_rays, replace=False))
    rays_o, rays_d = rays_o.reshape(-1, 3)[sel], rays_d.reshape(-1, 3)[sel]
    target = torch.from_numpy(rng.uniform(0, 1, (n_rays, 3)).astype(np.float32))
    near, far = 1.0, 3.0
    res = {"losses": [], "psnr": [], "lrs": [], "inds": []}
    for step in range(3):
        t_vals = torch.linspace(0., 1., steps=n_samples)
        z_vals = near * (1. - t_vals) + far * (t_vals)
        z_vals = z_vals.expand([n_rays, n_samples])
        mids = .5 * (z_vals[..., 1:] + z_vals[..., :-1])
        upper = torch.cat([mids, z_vals[..., -1:]], -1)
        lower = torch.cat([z_vals[..., :1], mids], -1)
        z_vals = lower + (upper - lower) * torch.from_numpy(
            rng.uniform(0, 1, (n_rays, n_samples)).astype(np.float32))
        pts = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]
        raw = coarse(embed(pts.reshape(-1, 3))).reshape(n_rays, n_samples, 4)
        noise = normal(torch, rng, n_rays, n_samples) * 0.1
        rgb0, disp0, acc0, weights, _ = raw2outputs(raw, z_vals, rays_d, noise)
        z_vals_mid = .5 * (z_vals[..., 1:] + z_vals[..., :-1])
        u = torch.from_numpy(rng.uniform(0, 1, (n_rays, n_importance)).astype(np.float32))
        z_samples, inds = sample_pdf(z_vals_mid, weights[..., 1:-1], u)
        z_samples = z_samples.detach()
        z_vals, _ = torch.sort(torch.cat([z_vals, z_samples], -1), -1)
        pts = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]
        raw = fine(embed(pts.reshape(-1, 3))).reshape(n_rays, -1, 4)
        rgb, disp, acc, _, depth = raw2outputs(raw, z_vals, rays_d, torch.zeros(()))
        img_loss = img2mse(rgb, target)
        loss = img_loss + img2mse(rgb0, target)
        psnr = mse2psnr(img_loss)
        opt.zero_grad()
        loss.backward()
        opt.step()
        decay_steps = 10
        new_lrate = 5e-3 * (0.1 ** (step / decay_steps))
        for param_group in opt.param_groups:
            param_group["lr"] = new_lrate
        res["losses"].append(loss.item())
        res["psnr"].append(psnr.item())
        res["lrs"].append(new_lrate)
        res["inds"] += inds.flatten().tolist()
    res["maps"] = [rgb, disp, acc, depth, z_vals]
    res["params"] = grad_vars
    return res


def siren_program(torch):
    """SIREN: SineLayer with omega_0=30 and its init bounds (first layer U(-1/in, 1/in), the
    rest U(-sqrt(6/in)/w0, ..)), a field fit to an image's values plus a Poisson loss on the
    Laplacian from autograd.grad(create_graph=True) twice and an eikonal |grad| = 1 term; coords
    are a leaf with requires_grad_ cloned per step, Adam."""
    nn = torch.nn
    rng = np.random.default_rng(2612)

    class SineLayer(nn.Module):
        def __init__(self, in_features, out_features, is_first=False, omega_0=30.):
            super().__init__()
            self.omega_0, self.is_first, self.in_features = omega_0, is_first, in_features
            self.linear = nn.Linear(in_features, out_features)
            self.init_weights()

        def init_weights(self):
            with torch.no_grad():
                if self.is_first:
                    self.linear.weight.uniform_(-1 / self.in_features, 1 / self.in_features)
                else:
                    bound = np.sqrt(6 / self.in_features) / self.omega_0
                    self.linear.weight.uniform_(-bound, bound)

        def forward(self, input):
            return torch.sin(self.omega_0 * self.linear(input))

    class Siren(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(SineLayer(2, 16, is_first=True), SineLayer(16, 16),
                                     nn.Linear(16, 1))
            with torch.no_grad():
                bound = np.sqrt(6 / 16) / 30.
                self.net[-1].weight.uniform_(-bound, bound)

        def forward(self, coords):
            coords = coords.clone().detach().requires_grad_(True)
            return self.net(coords), coords

    res = {}
    torch.manual_seed(0)
    probe = Siren()
    ws = [m.linear.weight for m in probe.net[:2]] + [probe.net[-1].weight]
    bounds = [1 / 2, np.sqrt(6 / 16) / 30, np.sqrt(6 / 16) / 30]
    res["init_in_bounds"] = [bool((w.abs() <= b).all()) and bool(w.abs().max().item() > b / 2)
                             for w, b in zip(ws, bounds)]

    def gradient(y, x, grad_outputs=None):
        if grad_outputs is None:
            grad_outputs = torch.ones_like(y)
        return torch.autograd.grad(y, [x], grad_outputs=grad_outputs, create_graph=True)[0]

    def divergence(y, x):
        div = 0.
        for i in range(y.shape[-1]):
            div += torch.autograd.grad(y[..., i], x, torch.ones_like(y[..., i]),
                                       create_graph=True)[0][..., i:i + 1]
        return div

    model = Siren()
    for layer, scale in zip([model.net[0].linear, model.net[1].linear, model.net[2]],
                            [0.3, 0.012, 0.012]):
        fill_(torch, layer, rng, scale)
    lin = torch.linspace(-1, 1, steps=5)
    mgrid = torch.stack(torch.meshgrid(lin, lin, indexing="ij"), dim=-1).reshape(-1, 2)
    img = torch.from_numpy(rng.uniform(-1, 1, (25, 1)).astype(np.float32))
    lap_target = torch.from_numpy(rng.uniform(-1, 1, (25, 1)).astype(np.float32))
    opt = torch.optim.Adam(lr=1e-3, params=model.parameters())
    losses = []
    for step in range(3):
        out, coords = model(mgrid)
        grad = gradient(out, coords)
        lap = divergence(grad, coords)
        eik = (grad.norm(dim=-1) - 1).abs().mean()
        loss = ((out - img) ** 2).mean() + 1e-4 * ((lap - lap_target) ** 2).mean() + 0.1 * eik
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append([loss.item(), eik.item()])
        if step == 0:
            res["grad"], res["lap"] = grad, lap
            res["leaf"] = [coords.is_leaf, coords.requires_grad, coords.grad is None]
    res["losses"] = losses
    res["params"] = list(model.parameters())
    return res


def fourier_features_program(torch):
    """Fourier feature networks: a fixed Gaussian B (a buffer), [sin(2 pi x B), cos(2 pi x B)]
    features, an MLP trained with Adam on a 2-D image with the PSNR of each step, and the
    registered buffer kept out of parameters but in the state_dict."""
    nn = torch.nn
    rng = np.random.default_rng(2613)

    class FourierFeatures(nn.Module):
        def __init__(self, B):
            super().__init__()
            self.register_buffer("B", B)

        def forward(self, x):
            x_proj = (2. * np.pi * x) @ self.B.T
            return torch.cat([torch.sin(x_proj), torch.cos(x_proj)], dim=-1)

    B = torch.from_numpy((rng.standard_normal((8, 2)) * 3.0).astype(np.float32))
    model = nn.Sequential(FourierFeatures(B), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3),
                          nn.Sigmoid())
    fill_(torch, model, rng, 0.3)
    coords = torch.stack(torch.meshgrid(torch.linspace(0, 1, 6), torch.linspace(0, 1, 6),
                                        indexing="xy"), -1)
    img = torch.from_numpy(rng.uniform(0, 1, (6, 6, 3)).astype(np.float32))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    psnrs = []
    for _ in range(4):
        pred = model(coords)
        loss = .5 * torch.mean((pred - img) ** 2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        psnrs.append((-10 * torch.log10(2. * loss)).item())
    return {"psnrs": psnrs, "params": list(model.parameters()), "pred": pred,
            "state_keys": list(model.state_dict().keys()),
            "n_params": sum(p.numel() for p in model.parameters())}


def gaussian_splatting_program(torch):
    """A 2-D Gaussian splatting rasteriser: per-Gaussian covariance R S S^T R^T from a rotation
    angle and log-scales, its inverse by hand (conic), per-pixel Mahalanobis power with the
    `power > 0` guard, alpha = min(0.99, opacity * exp(power)) by clamp, depth sort by argsort,
    front-to-back compositing with an exclusive cumprod of (1 - alpha), an L1 + SSIM-free loss,
    Adam with per-attribute learning rates, and densification by gradient norm."""
    F = torch.nn.functional
    rng = np.random.default_rng(2614)
    n, Hh, Ww = 5, 6, 7
    means = torch.nn.Parameter(torch.from_numpy(rng.uniform(0, 1, (n, 2)).astype(np.float32)))
    log_scales = torch.nn.Parameter(torch.from_numpy(
        rng.uniform(-2.2, -1.2, (n, 2)).astype(np.float32)))
    rots = torch.nn.Parameter(torch.from_numpy(rng.uniform(-1, 1, n).astype(np.float32)))
    opac = torch.nn.Parameter(torch.from_numpy(rng.uniform(-1, 1, (n, 1)).astype(np.float32)))
    colors = torch.nn.Parameter(normal(torch, rng, n, 3) * 0.5)
    depths = torch.from_numpy(rng.uniform(1, 5, n).astype(np.float32))
    target = torch.from_numpy(rng.uniform(0, 1, (Hh, Ww, 3)).astype(np.float32))
    opt = torch.optim.Adam([{"params": [means], "lr": 1e-2, "name": "xyz"},
                            {"params": [log_scales], "lr": 5e-3, "name": "scaling"},
                            {"params": [rots], "lr": 1e-3, "name": "rotation"},
                            {"params": [opac], "lr": 5e-2, "name": "opacity"},
                            {"params": [colors], "lr": 2.5e-3, "name": "f_dc"}], lr=0.0, eps=1e-15)
    ys, xs = torch.meshgrid(torch.arange(Hh, dtype=torch.float32) / Hh,
                            torch.arange(Ww, dtype=torch.float32) / Ww, indexing="ij")
    pix = torch.stack([xs, ys], -1).reshape(-1, 2)

    def render():
        c, s = torch.cos(rots), torch.sin(rots)
        R = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)
        S = torch.diag_embed(torch.exp(log_scales))
        M = R @ S
        cov = M @ M.transpose(1, 2) + 1e-4 * torch.eye(2)
        det = cov[:, 0, 0] * cov[:, 1, 1] - cov[:, 0, 1] * cov[:, 1, 0]
        conic = torch.stack([cov[:, 1, 1], -cov[:, 0, 1], cov[:, 0, 0]], -1) / det[:, None]
        order = torch.argsort(depths)
        d = pix[:, None, :] - means[order][None]
        con = conic[order]
        power = -0.5 * (con[:, 0] * d[..., 0] ** 2 + con[:, 2] * d[..., 1] ** 2) \
            - con[:, 1] * d[..., 0] * d[..., 1]
        power = torch.where(power > 0, torch.full_like(power, -torch.inf), power)
        alpha = torch.clamp(torch.sigmoid(opac[order]).T * torch.exp(power), max=0.99)
        alpha = alpha * (alpha >= 1. / 255)
        T = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1 - alpha[:, :-1]], 1), 1)
        w = alpha * T
        rgb = w @ torch.sigmoid(colors[order])
        return rgb.view(Hh, Ww, 3), T[:, -1] * (1 - alpha[:, -1]), det

    res = {"losses": []}
    grad_accum = torch.zeros(n)
    for step in range(3):
        image, final_T, det = render()
        loss = F.l1_loss(image, target) + 0.2 * ((image - target) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_accum += torch.norm(means.grad, dim=-1, keepdim=False)
        opt.step()
        res["losses"].append(loss.item())
    res["image"], res["final_T"], res["det"] = image, final_T, det
    res["params"] = [means, log_scales, rots, opac, colors]
    res["group_names"] = [g["name"] for g in opt.param_groups]
    selected = torch.where(grad_accum / 3 >= grad_accum.median(), True, False)
    res["densify"] = selected.tolist()
    # clone the selected Gaussians, extending Adam's state as densify_and_clone does
    new_means = means[selected].detach()
    stored = opt.state.get(opt.param_groups[0]["params"][0], None)
    stored["exp_avg"] = torch.cat((stored["exp_avg"], torch.zeros_like(new_means)), dim=0)
    stored["exp_avg_sq"] = torch.cat((stored["exp_avg_sq"], torch.zeros_like(new_means)), dim=0)
    del opt.state[opt.param_groups[0]["params"][0]]
    grown = torch.nn.Parameter(torch.cat((means, new_means), dim=0).requires_grad_(True))
    opt.param_groups[0]["params"][0] = grown
    opt.state[grown] = stored
    (grown ** 2).sum().backward()
    opt.step()
    res["grown"] = grown
    res["grown_state"] = [opt.state[grown]["exp_avg"], opt.state[grown]["step"]]
    return res


PROGRAMS = [nerf_program, siren_program, fourier_features_program, gaussian_splatting_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
