"""Weather and climate models, second file (see _weather): torch-harmonics-style spherical
harmonic transforms (Gauss-Legendre quadrature, associated Legendre tables built in float64,
rfft along longitude then a Legendre matmul, and back) and a spherical FNO layer with complex
weights trained by Adam; autoregressive rollouts with gradient through several steps,
detach-every-k, torch.utils.checkpoint per step and residual normalisation statistics; mixed
lat/lon padding (circular on longitude, reflect/replicate on latitude, pole flip-and-roll) ahead
of unpadded convolutions; regridding by grid_sample on lat/lon coordinates, bicubic/area
F.interpolate, antialiased downsampling and sparse conservative-remap matrices (sparse.mm, and
per variable torch.bmm of a batch of COO matrices)."""

import io
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _legendre(torch, lmax, mmax, x):
    """Orthonormal associated Legendre P_l^m(x) as torch-harmonics' legpoly: (mmax, lmax, n),
    by the three-term recursion in float64."""
    assert lmax == mmax
    vdm = torch.zeros(lmax, lmax, x.shape[0], dtype=torch.float64)
    vdm[0, 0, :] = 1 / math.sqrt(4 * math.pi)
    for l in range(1, lmax):                      # noqa: E741
        vdm[l - 1, l, :] = math.sqrt(2 * l + 1) * x * vdm[l - 1, l - 1, :]
        vdm[l, l, :] = torch.sqrt((2 * l + 1) * (1 + x) * (1 - x) / 2 / l) * vdm[l - 1, l - 1, :]
    for l in range(2, lmax):                      # noqa: E741
        for m in range(0, l - 1):
            a = math.sqrt((2 * l - 1) / (l - m) * (2 * l + 1) / (l + m))
            b = math.sqrt((l + m - 1) / (l - m) * (2 * l + 1) / (2 * l - 3) * (l - m - 1)
                          / (l + m))
            vdm[m, l, :] = x * a * vdm[m, l - 1, :] - b * vdm[m, l - 2, :]
    return vdm


def sht_program(torch):
    """RealSHT/InverseRealSHT on an 8 x 16 Gaussian grid, a spectral filter layer (SFNO-style,
    complex weights as a cfloat Parameter, einsum on complex tensors), round trip and Adam."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(344)
    nlat, nlon, C = 8, 16, 3
    lmax = mmax = nlat
    nodes, qw = np.polynomial.legendre.leggauss(nlat)
    cost = torch.from_numpy(nodes[::-1].copy())
    weights = torch.from_numpy(qw[::-1].copy())

    class RealSHT(nn.Module):
        def __init__(self):
            super().__init__()
            pct = _legendre(torch, lmax, mmax, cost)
            w = torch.einsum("mlk,k->mlk", pct, weights)
            self.register_buffer("weights", w.float(), persistent=False)

        def forward(self, x):
            x = 2.0 * math.pi * torch.fft.rfft(x, dim=-1, norm="forward")
            x = torch.view_as_real(x[..., :mmax])
            xs = torch.zeros(*x.shape[:-3], lmax, mmax, 2, dtype=x.dtype)
            xs[..., 0] = torch.einsum("...km,mlk->...lm", x[..., 0], self.weights)
            xs[..., 1] = torch.einsum("...km,mlk->...lm", x[..., 1], self.weights)
            return torch.view_as_complex(xs)

    class InverseRealSHT(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("pct", _legendre(torch, lmax, mmax, cost).float(),
                                 persistent=False)

        def forward(self, x):
            x = torch.view_as_real(x)
            re = torch.einsum("...lm,mlk->...km", x[..., 0], self.pct)
            im = torch.einsum("...lm,mlk->...km", x[..., 1], self.pct)
            x = torch.stack((re, im), -1)
            return torch.fft.irfft(torch.view_as_complex(x), n=nlon, dim=-1, norm="forward")

    class SpectralFilter(nn.Module):
        def __init__(self):
            super().__init__()
            self.sht, self.isht = RealSHT(), InverseRealSHT()
            w = torch.from_numpy(rng.standard_normal((C, C, lmax, 2)).astype(np.float32)) * 0.3
            self.weight = nn.Parameter(torch.view_as_complex(w))
            self.mlp = nn.Sequential(nn.Conv2d(C, 2 * C, 1), nn.GELU(), nn.Conv2d(2 * C, C, 1))

        def forward(self, x):
            res = x
            coeffs = self.sht(x)
            coeffs = torch.einsum("bilm,iol->bolm", coeffs, self.weight)
            x = self.isht(coeffs)
            return res + self.mlp(F.gelu(x))

    sht, isht = RealSHT(), InverseRealSHT()
    res = {}
    # band-limited field: synthesise from random coefficients, analyse, compare
    co = torch.from_numpy(rng.standard_normal((lmax, mmax, 2)).astype(np.float32))
    co = torch.tril(co.permute(2, 0, 1)).permute(1, 2, 0).contiguous()
    co[:, 0, 1] = 0
    field = isht(torch.view_as_complex(co))
    back = sht(field)
    res["roundtrip"] = torch.view_as_real(back)
    res["coeff_dtype"] = [str(back.dtype).split(".")[-1]]
    res["power"] = (back.abs() ** 2).sum(-1)
    model = SpectralFilter()
    fill_(torch, model.mlp, rng, 0.3)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    res["loss"] = []
    for _ in range(3):
        x, y = normal(torch, rng, 2, C, nlat, nlon), normal(torch, rng, 2, C, nlat, nlon)
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        res.setdefault("wgrad", []).append(torch.view_as_real(model.weight.grad.clone()))
        opt.step()
        res["loss"].append(loss.item())
    res["weight"] = torch.view_as_real(model.weight.detach())
    res["exp_avg_sq"] = opt.state[model.weight]["exp_avg_sq"]
    res["exp_avg_sq_dtype"] = [str(opt.state[model.weight]["exp_avg_sq"].dtype).split(".")[-1]]
    return res


def rollout_program(torch):
    """A FourCastNet/GraphCast-style training step over a multi-step rollout: inputs/targets
    normalised by mean/std buffers, the model predicts the normalised residual (diff stats),
    loss summed over steps with per-step weights, gradient detached every k steps, each step
    wrapped in torch.utils.checkpoint (use_reentrant=False), clip_grad_norm_, OneCycleLR;
    then an inference rollout under torch.inference_mode."""
    nn, F = torch.nn, torch.nn.functional
    checkpoint = torch.utils.checkpoint.checkpoint
    rng = np.random.default_rng(345)
    C, H, W, T = 3, 6, 8, 7
    data = torch.from_numpy(np.cumsum(rng.standard_normal((T, C, H, W)), 0).astype(np.float32))
    mean, std = data.mean(dim=(0, 2, 3)), data.std(dim=(0, 2, 3))
    diffs = data[1:] - data[:-1]
    d_std = torch.std(diffs, dim=(0, 2, 3), unbiased=False)

    class Stepper(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", mean.view(1, C, 1, 1))
            self.register_buffer("std", std.view(1, C, 1, 1))
            self.register_buffer("diff_std", d_std.view(1, C, 1, 1))
            self.net = nn.Sequential(
                nn.Conv2d(C, 8, 3, padding=1, padding_mode="circular"), nn.GroupNorm(2, 8),
                nn.SiLU(), nn.Conv2d(8, C, 3, padding=1, padding_mode="circular"))

        def forward(self, x):
            xn = (x - self.mean) / self.std
            return x + self.net(xn) * self.diff_std

    model = Stepper()
    fill_(torch, model.net, rng, 0.2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=4)
    step_w = torch.tensor([1.0, 0.8, 0.6, 0.4])
    res = {"loss": [], "lr": [], "gnorm": []}
    for epoch in range(3):
        x = data[0:1] + 0.1 * epoch
        loss = 0.0
        for k in range(4):
            if k > 0 and k % 2 == 0:
                x = x.detach()
            x = checkpoint(model, x, use_reentrant=False)
            target = data[k + 1:k + 2]
            loss = loss + step_w[k] * F.mse_loss((x - model.mean) / model.std,
                                                 (target - model.mean) / model.std)
        opt.zero_grad()
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
        opt.step()
        sched.step()
        res["loss"].append(loss.item())
        res["gnorm"].append(gn.item())
        res["lr"].append(sched.get_last_lr()[0])
    with torch.inference_mode():
        x = data[0:1]
        traj = [x]
        for _ in range(5):
            x = model(x)
            traj.append(x)
        traj = torch.stack(traj, 1)
    res["traj"] = traj
    res["traj_flags"] = [traj.is_inference(), traj.requires_grad]
    # stats saved/restored the way the repos ship them (a .pt of tensors)
    buf = io.BytesIO()
    torch.save({"mean": mean, "std": std, "diff_std": d_std}, buf)
    buf.seek(0)
    stats = torch.load(buf, weights_only=True)
    res["stats"] = [stats["mean"], stats["std"], stats["diff_std"]]
    res["w"] = model.net[0].weight.detach()
    return res


def padding_program(torch):
    """Spherical padding as the climate CNN repos do it: circular along longitude, reflect or
    replicate along latitude (two F.pad calls), or a pole pad that flips latitude and rolls the
    longitude by half the circle; then unpadded convolutions; gradients to the input."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(346)
    B, C, H, W = 2, 2, 5, 8

    def lonlat_pad(x, p, lat_mode):
        x = F.pad(x, (p, p, 0, 0), mode="circular")
        return F.pad(x, (0, 0, p, p), mode=lat_mode)

    def pole_pad(x, p):
        top = x[..., :p, :].flip(-2).roll(W // 2, dims=-1)
        bottom = x[..., -p:, :].flip(-2).roll(W // 2, dims=-1)
        x = torch.cat([top, x, bottom], dim=-2)
        return torch.cat([x[..., -p:], x, x[..., :p]], dim=-1)

    conv = nn.Conv2d(C, 3, 3)
    conv5 = nn.Conv2d(C, 3, 5)
    fill_(torch, [conv.weight, conv.bias, conv5.weight, conv5.bias], rng, 0.3)
    x = normal(torch, rng, B, C, H, W).requires_grad_()
    outs = {"reflect": conv(lonlat_pad(x, 1, "reflect")),
            "replicate": conv5(lonlat_pad(x, 2, "replicate")),
            "pole": conv(pole_pad(x, 1)),
            "pole2": conv5(pole_pad(x, 2)),
            "circ3d": F.pad(x.unsqueeze(2), (1, 1, 1, 1, 0, 0), mode="circular").squeeze(2),
            "const": F.pad(x, (1, 2, 0, 1), value=-1.5)}
    res = {}
    for name, out in outs.items():
        g = torch.from_numpy(rng.standard_normal(tuple(out.shape)).astype(np.float32))
        (gx,) = torch.autograd.grad(out, x, g, retain_graph=True)
        res[name] = out
        res[name + "_grad"] = gx
    same = nn.Conv2d(C, 3, 3, padding="same", padding_mode="circular")
    fill_(torch, same, rng, 0.3)
    res["same_circular"] = same(x)
    res["conv_grad"] = torch.autograd.grad(res["pole"].square().sum(), conv.weight)[0]
    return res


def regrid_program(torch):
    """Interpolation between grids: a 1-degree-like lat/lon source sampled by grid_sample at
    target (lat, lon) normalised to [-1, 1] with the longitude wrapped by a circular pad
    column, bilinear/nearest/bicubic, align_corners both ways, border padding; F.interpolate
    bicubic up, area down, bilinear antialiased down; conservative remap as a sparse matrix
    (torch.sparse.mm); gradients through grid_sample to both field and coordinates."""
    F = torch.nn.functional
    rng = np.random.default_rng(347)
    C, H, W = 2, 6, 12
    src = normal(torch, rng, 1, C, H, W).requires_grad_()
    tlat = torch.linspace(-80.0, 80.0, 4)
    tlon = torch.linspace(0.0, 345.0, 9)
    glat, glon = torch.meshgrid(tlat, tlon, indexing="ij")
    # source centres: lat -75..75 step 30 (H=6), lon 0..330 step 30, plus one wrapped column
    src_w = torch.cat([src, src[..., :1]], dim=-1)
    gx = glon / 360.0 * 2 - 1
    gy = glat / 75.0
    grid = torch.stack([gx, gy], -1).unsqueeze(0).clone().requires_grad_()
    res = {}
    for mode in ("bilinear", "nearest", "bicubic"):
        for ac in (True, False):
            out = F.grid_sample(src_w, grid, mode=mode, padding_mode="border",
                                align_corners=ac)
            res[f"gs_{mode}_{ac}"] = out
    out = F.grid_sample(src_w, grid, mode="bilinear", padding_mode="zeros", align_corners=True)
    gsrc, ggrid = torch.autograd.grad((out ** 2).sum(), (src, grid))
    res["gs_grad_src"], res["gs_grad_grid"] = gsrc, ggrid
    up = F.interpolate(src, scale_factor=2, mode="bicubic", align_corners=False)
    area = F.interpolate(src, size=(3, 4), mode="area")
    aa = F.interpolate(src, size=(3, 5), mode="bilinear", antialias=True, align_corners=False)
    bil = F.interpolate(src, size=(4, 7), mode="bilinear", align_corners=True)
    res.update(up=up, area=area, aa=aa, bil=bil)
    gs = torch.autograd.grad(up.sum() + (area ** 2).sum() + (aa * bil[..., :3, :5]).sum(), src)
    res["interp_grad"] = gs[0]
    # conservative remap 12 -> 4 longitudes per latitude row (overlap weights), as a sparse COO
    rows, cols, vals = [], [], []
    for j in range(4):
        for i in range(W):
            lo, hi = max(i / W, j / 4), min((i + 1) / W, (j + 1) / 4)
            if hi > lo:
                rows.append(j)
                cols.append(i)
                vals.append((hi - lo) * 4)
    M = torch.sparse_coo_tensor(torch.tensor([rows, cols]), torch.tensor(vals), (4, W))
    M = M.coalesce()
    flat = src.reshape(-1, W).t()
    remap = torch.sparse.mm(M, flat).t().reshape(1, C, H, 4)
    res["remap"] = remap
    res["remap_grad"] = torch.autograd.grad(remap.pow(2).sum(), src)[0]
    res["remap_nnz"] = [M._nnz()]
    res["dense_equal"] = [bool(torch.allclose(M.to_dense() @ flat, torch.sparse.mm(M, flat)))]
    # one remap matrix per variable (a land mask zeroing some weights), applied by torch.bmm
    idx = M.indices()
    keep = torch.tensor([[True] * idx.shape[1], [i % 3 != 0 for i in range(idx.shape[1])]])
    b_idx = torch.cat([torch.stack([torch.full_like(idx[0], c)[keep[c]], idx[0][keep[c]],
                                    idx[1][keep[c]]]) for c in range(C)], 1)
    b_vals = torch.cat([M.values()[keep[c]] for c in range(C)]).requires_grad_()
    MB = torch.sparse_coo_tensor(b_idx, b_vals, (C, 4, W), check_invariants=False)
    rows = src.reshape(C, H, W).transpose(1, 2)                   # (C, W, H)
    bremap = torch.bmm(MB, rows)
    res["bmm_remap"] = bremap
    res["bmm_grads"] = list(torch.autograd.grad(bremap.pow(2).sum(), (src, b_vals)))
    return res


PROGRAMS = [sht_program, rollout_program, padding_program, regrid_program]

# Legendre quadrature in float32 einsums and a Conv/GroupNorm rollout trained with AdamW:
# float32 reassociation noise
TOLERANCES = {"sht_program": (1e-4, 1e-5), "rollout_program": (1e-4, 1e-5),
              "regrid_program": (1e-4, 1e-5)}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
