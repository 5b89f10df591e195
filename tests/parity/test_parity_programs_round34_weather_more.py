"""Weather and climate models, third file (see _weather and _weather_grid): FuXi's cube
embedding and Swin-V2 blocks (cosine attention with a clamped learned logit scale, continuous
position bias MLP over log-spaced relative coordinates, res-post-norm) in a small U-transformer
trained with gradient accumulation; an AFNO over (time, lat, lon) with complex Parameters,
rfftn/irfftn, a complex block-diagonal MLP by complex einsum and a bfloat16 autocast projection;
normalisation statistics gathered by Welford updates over a DataLoader into buffers, saved and
reloaded; cyclone detection (local minima by max_pool2d with indices, nonzero, unravel_index,
vorticity by torch.gradient, haversine matching); a Bernoulli-Gamma precipitation head with
quantile mapping; overlapped-patch inference with unfold/fold and a PixelShuffle downscaler."""

import io
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def fuxi_program(torch):
    """FuXi-lite: Conv3d cube embedding, GroupNorm, Swin-V2 window blocks (cosine attention,
    logit scale clamped at log(100), CPB MLP with 16*sigmoid, log-spaced coords table), a
    down/up U-structure with a skip concat, AdamW + CosineAnnealingLR, two micro-batches per
    step."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(350)
    D, ws, heads = 8, 2, 2

    class WindowAttentionV2(nn.Module):
        def __init__(self):
            super().__init__()
            self.logit_scale = nn.Parameter(torch.log(10 * torch.ones((heads, 1, 1))))
            self.cpb_mlp = nn.Sequential(nn.Linear(2, 16, bias=True), nn.ReLU(inplace=True),
                                         nn.Linear(16, heads, bias=False))
            rh = torch.arange(-(ws - 1), ws, dtype=torch.float32)
            table = torch.stack(torch.meshgrid([rh, rh], indexing="ij")).permute(1, 2, 0)
            table = table.contiguous().unsqueeze(0) / (ws - 1) * 8
            table = torch.sign(table) * torch.log2(torch.abs(table) + 1.0) / np.log2(8)
            self.register_buffer("relative_coords_table", table, persistent=False)
            coords = torch.stack(torch.meshgrid([torch.arange(ws), torch.arange(ws)],
                                                indexing="ij"))
            flat = torch.flatten(coords, 1)
            rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0).contiguous()
            rel[:, :, 0] += ws - 1
            rel[:, :, 1] += ws - 1
            rel[:, :, 0] *= 2 * ws - 1
            self.register_buffer("relative_position_index", rel.sum(-1), persistent=False)
            self.qkv = nn.Linear(D, 3 * D, bias=False)
            self.q_bias = nn.Parameter(torch.zeros(D))
            self.v_bias = nn.Parameter(torch.zeros(D))
            self.proj = nn.Linear(D, D)

        def forward(self, x):
            B_, N, C = x.shape
            qkv_bias = torch.cat((self.q_bias, torch.zeros_like(self.v_bias,
                                                                requires_grad=False),
                                  self.v_bias))
            qkv = F.linear(input=x, weight=self.qkv.weight, bias=qkv_bias)
            qkv = qkv.reshape(B_, N, 3, heads, -1).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
            logit_scale = torch.clamp(self.logit_scale, max=torch.log(torch.tensor(1. / 0.01)))
            attn = attn * logit_scale.exp()
            table = self.cpb_mlp(self.relative_coords_table).view(-1, heads)
            bias = table[self.relative_position_index.view(-1)].view(N, N, -1)
            attn = attn + 16 * torch.sigmoid(bias.permute(2, 0, 1).contiguous()).unsqueeze(0)
            x = (attn.softmax(-1) @ v).transpose(1, 2).reshape(B_, N, C)
            return self.proj(x)

    class SwinV2Block(nn.Module):
        def __init__(self, shift):
            super().__init__()
            self.shift = shift
            self.attn = WindowAttentionV2()
            self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))

        def forward(self, x):
            B, H, W, C = x.shape
            s = torch.roll(x, (-self.shift, -self.shift), (1, 2)) if self.shift else x
            w = s.view(B, H // ws, ws, W // ws, ws, C).permute(0, 1, 3, 2, 4, 5)
            w = w.reshape(-1, ws * ws, C)
            a = self.attn(w).view(B, H // ws, W // ws, ws, ws, C).permute(0, 1, 3, 2, 4, 5)
            a = a.reshape(B, H, W, C)
            if self.shift:
                a = torch.roll(a, (self.shift, self.shift), (1, 2))
            x = x + self.norm1(a)
            return x + self.norm2(self.mlp(x))

    class FuXi(nn.Module):
        def __init__(self):
            super().__init__()
            self.cube = nn.Conv3d(3, D, kernel_size=(2, 2, 2), stride=(2, 2, 2))
            self.norm = nn.GroupNorm(2, D)
            self.down = nn.Conv2d(D, D, 3, stride=2, padding=1)
            self.blocks = nn.Sequential(SwinV2Block(0), SwinV2Block(1))
            self.up = nn.ConvTranspose2d(D, D, 2, stride=2)
            self.fuse = nn.Conv2d(2 * D, D, 1)
            self.head = nn.Linear(D, 3 * 4)

        def forward(self, x):                          # (B, 3 vars, 2 times, 8, 16)
            x = self.norm(self.cube(x).squeeze(2))    # (B, D, 4, 8)
            skip = x
            x = self.down(x)                          # (B, D, 2, 4)
            x = self.blocks(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
            x = self.fuse(torch.cat([self.up(x), skip], 1))
            x = self.head(x.permute(0, 2, 3, 1))      # (B, 4, 8, 12)
            B, h, w, _ = x.shape
            x = x.view(B, h, w, 3, 2, 2).permute(0, 3, 1, 4, 2, 5).reshape(B, 3, 8, 16)
            return x

    model = FuXi()
    fill_(torch, model, rng, 0.2)
    for blk in model.blocks:
        blk.attn.logit_scale.data.fill_(math.log(10.0))
    model.blocks[1].attn.logit_scale.data[0] = 5.0      # above the clamp
    opt = torch.optim.AdamW(model.parameters(), lr=2.5e-4, betas=(0.9, 0.95), weight_decay=0.1)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=1e-6)
    res = {"loss": [], "lr": []}
    for _ in range(2):
        opt.zero_grad()
        for _ in range(2):
            x = normal(torch, rng, 1, 3, 2, 8, 16)
            y = normal(torch, rng, 1, 3, 8, 16)
            loss = F.l1_loss(model(x), y) / 2
            loss.backward()
            res["loss"].append(loss.item())
        res.setdefault("ls_grad", []).append(model.blocks[1].attn.logit_scale.grad.clone())
        opt.step()
        sched.step()
        res["lr"].append(sched.get_last_lr()[0])
    res["cpb_grad"] = model.blocks[0].attn.cpb_mlp[2].weight.grad
    res["table"] = model.blocks[0].attn.relative_coords_table
    res["keys"] = sorted(model.state_dict().keys())[:6]
    return res


def afno3d_program(torch):
    """An AFNO over (time, lat, lon): rfftn on three dims, modes kept by a hard-threshold
    fraction, complex weights as cfloat Parameters, complex einsum, ReLU on real and imaginary
    parts by torch.complex, softshrink on view_as_real, irfftn back; the token projection runs
    under bfloat16 autocast; Adam on complex parameters."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(351)
    T, H, W, C, nb = 2, 4, 6, 4, 2
    bs = C // nb

    def cparam(*shape):
        w = rng.standard_normal(shape + (2,)).astype(np.float32) * 0.3
        return nn.Parameter(torch.view_as_complex(torch.from_numpy(w)))

    class AFNO3D(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1, self.b1 = cparam(nb, bs, 2 * bs), cparam(nb, 2 * bs)
            self.w2, self.b2 = cparam(nb, 2 * bs, bs), cparam(nb, bs)
            self.proj = nn.Linear(C, C)

        def forward(self, x):
            B = x.shape[0]
            with torch.autocast("cpu", dtype=torch.bfloat16):
                x = self.proj(x)
            bias = x = x.float()
            X = torch.fft.rfftn(x, dim=(1, 2, 3), norm="ortho")
            X = X.reshape(B, T, H, W // 2 + 1, nb, bs)
            kept = H // 2
            out = torch.zeros_like(X)
            sub = X[:, :, :kept, :kept]
            o1 = torch.einsum("...bi,bio->...bo", sub, self.w1) + self.b1
            o1 = torch.complex(F.relu(o1.real), F.relu(o1.imag))
            o2 = torch.einsum("...bi,bio->...bo", o1, self.w2) + self.b2
            out[:, :, :kept, :kept] = o2
            out = torch.view_as_complex(F.softshrink(torch.view_as_real(out), 0.01))
            out = out.reshape(B, T, H, W // 2 + 1, C)
            x = torch.fft.irfftn(out, s=(T, H, W), dim=(1, 2, 3), norm="ortho")
            return x + bias

    model = AFNO3D()
    fill_(torch, model.proj, rng, 0.4)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    res = {"loss": []}
    for _ in range(3):
        x = normal(torch, rng, 2, T, H, W, C)
        y = normal(torch, rng, 2, T, H, W, C)
        loss = (model(x) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        res.setdefault("w1_grad", []).append(torch.view_as_real(model.w1.grad.clone()))
        res.setdefault("proj_grad", []).append(model.proj.weight.grad.clone())
        opt.step()
        res["loss"].append(loss.item())
    res["w2"] = torch.view_as_real(model.w2.detach())
    res["state_dtypes"] = [str(v.dtype).split(".")[-1] for v in opt.state[model.w2].values()]
    res["grad_dtype"] = [str(model.w1.grad.dtype).split(".")[-1]]
    return res


def stats_program(torch):
    """Normalisation statistics as the data pipelines gather them: a Dataset of NumPy samples
    with a NaN ocean mask, a DataLoader, Welford updates of mean/M2 buffers in place (mul_,
    add_, addcmul_), nan_to_num, the result against var_mean over everything, time features
    in float64, a Normalizer module's buffers through state_dict save/load (non-persistent
    ones excluded, strict=False reporting keys)."""
    nn = torch.nn
    rng = np.random.default_rng(352)
    C, H, W, N = 3, 4, 5, 7
    raw = (rng.standard_normal((N, C, H, W)) * [[[2.0]], [[0.5]], [[10.0]]]).astype(np.float32)
    raw[:, 1, 0, :2] = np.nan                             # masked cells of one variable
    hours = np.arange(N) * 6

    class ERA5(torch.utils.data.Dataset):
        def __len__(self):
            return N

        def __getitem__(self, i):
            return raw[i], hours[i]

    class Normalizer(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros(C, 1, 1))
            self.register_buffer("mean", torch.zeros(C, 1, 1))
            self.register_buffer("m2", torch.zeros(C, 1, 1))
            self.register_buffer("scratch", torch.zeros(1), persistent=False)

        @torch.no_grad()
        def update(self, x):
            valid = ~torch.isnan(x)
            x = torch.nan_to_num(x, nan=0.0)
            n = valid.sum((0, 2, 3), keepdim=True).squeeze(0).float()
            bmean = x.sum((0, 2, 3), keepdim=True).squeeze(0) / n
            diff = (x - bmean) * valid
            bm2 = diff.pow(2).sum((0, 2, 3), keepdim=True).squeeze(0)
            delta = bmean - self.mean
            tot = self.count + n
            self.mean.add_(delta * n / tot)
            self.m2.add_(bm2).addcmul_(delta.pow(2), self.count * n / tot)
            self.count.copy_(tot)

        def forward(self, x):
            std = (self.m2 / (self.count - 1)).sqrt()
            return torch.nan_to_num((x - self.mean) / std, nan=0.0)

    norm = Normalizer()
    loader = torch.utils.data.DataLoader(ERA5(), batch_size=3, shuffle=False)
    res = {"hours": []}
    for x, h in loader:
        norm.update(x)
        res["hours"] += h.tolist()
        res.setdefault("dtypes", []).append(f"{str(x.dtype)[-7:]}/{str(h.dtype)[-5:]}")
    t = torch.from_numpy(raw).transpose(0, 1).reshape(C, -1)
    ref_mean = torch.nanmean(t, dim=1)
    ref_var = torch.stack([torch.var_mean(r[~r.isnan()], correction=1)[0] for r in t])
    res["mean"], res["ref_mean"] = norm.mean.flatten(), ref_mean
    res["var"], res["ref_var"] = (norm.m2 / (norm.count - 1)).flatten(), ref_var
    z = norm(torch.from_numpy(raw))
    res["z_mean"] = z.mean((0, 2, 3))
    doy = torch.from_numpy(hours.astype(np.float64)) / 24.0 + 31
    res["time_feats"] = torch.stack([torch.sin(2 * math.pi * doy / 365.25),
                                     torch.cos(2 * math.pi * doy / 365.25),
                                     torch.sin(2 * math.pi * torch.remainder(doy, 1.0))], -1)
    res["time_dtype"] = [str(res["time_feats"].dtype).split(".")[-1]]
    buf = io.BytesIO()
    torch.save(norm.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf)
    res["sd_keys"] = sorted(sd.keys())
    fresh = Normalizer()
    sd["extra"] = torch.ones(1)
    del sd["m2"]
    r = fresh.load_state_dict(sd, strict=False)
    res["missing"], res["unexpected"] = list(r.missing_keys), list(r.unexpected_keys)
    res["loaded_mean"] = fresh.mean.flatten()
    return res


def cyclone_program(torch):
    """Tropical cyclone detection and tracking: MSLP local minima by max_pool2d(-p) with
    return_indices, below a threshold, nonzero + unravel_index to lat/lon, relative vorticity
    by torch.gradient with physical spacing, max_unpool2d of the minima, nearest-neighbour
    track matching by great-circle distance, and a gradient of a soft minimum position."""
    F = torch.nn.functional
    rng = np.random.default_rng(353)
    H, W = 8, 10
    lat = torch.linspace(30.0, 2.0, H)
    lon = torch.linspace(120.0, 156.0, W)
    yy, xx = torch.meshgrid(lat, lon, indexing="ij")
    centres = [(20.0, 130.0), (10.0, 148.0)]
    frames = []
    for t in range(2):
        p = torch.full((H, W), 1010.0)
        for la, lo in centres:
            d2 = (yy - la + 2 * t) ** 2 + (xx - lo - 3 * t) ** 2
            p = p - 30 * torch.exp(-d2 / 40)
        frames.append(p + torch.from_numpy(rng.standard_normal((H, W)).astype(np.float32)))
    mslp = torch.stack(frames).unsqueeze(1)                    # (T, 1, H, W)
    pooled, idx = F.max_pool2d(-mslp, 3, stride=1, padding=1, return_indices=True)
    is_min = (pooled == -mslp) & (mslp < 995)
    res = {"n_min": is_min.sum((1, 2, 3)).tolist()}
    tracks = []
    for t in range(2):
        flat = torch.nonzero(is_min[t, 0].flatten()).squeeze(1)
        r, c = torch.unravel_index(flat, (H, W))
        tracks.append(torch.stack([lat[r], lon[c]], -1))
        res[f"pos{t}"] = tracks[-1]
    la1, lo1 = torch.deg2rad(tracks[0]).unbind(-1)
    la2, lo2 = torch.deg2rad(tracks[1]).unbind(-1)
    dlat = la2[None, :] - la1[:, None]
    dlon = lo2[None, :] - lo1[:, None]
    a = torch.sin(dlat / 2) ** 2 + torch.cos(la1)[:, None] * torch.cos(la2)[None, :] * \
        torch.sin(dlon / 2) ** 2
    dist = 2 * 6371.0 * torch.asin(torch.sqrt(a))
    res["dist_km"] = dist
    res["match"] = dist.argmin(1).tolist()
    u = normal(torch, rng, H, W)
    v = normal(torch, rng, H, W)
    dy = 111e3 * (lat[1] - lat[0]).abs().item()
    dx = (111e3 * torch.cos(torch.deg2rad(lat)) * (lon[1] - lon[0])).tolist()
    dvdx = torch.stack([torch.gradient(v[i], spacing=dx[i])[0] for i in range(H)])
    dudy = torch.gradient(u, spacing=(-dy,), dim=0)[0]
    res["vort"] = (dvdx - dudy) * 1e5
    res["edge2"] = torch.gradient(u, spacing=[lat, lon], edge_order=2)[1]
    res["unpool"] = F.max_unpool2d(pooled * is_min, idx, 3, stride=1, padding=1)
    p = mslp[0, 0].clone().requires_grad_()
    wts = torch.softmax(-p.flatten() / 2.0, 0)
    soft_lat = (wts * yy.flatten()).sum()
    soft_lat.backward()
    res["soft_lat"] = soft_lat
    res["soft_grad"] = p.grad
    return res


def precip_program(torch):
    """A Bernoulli-Gamma precipitation head (rain probability by logits, Gamma shape/rate by
    softplus) trained on log1p targets by negative log-likelihood through torch.distributions,
    the expected value and a closed-form Gaussian CRPS (erf, exp), and quantile mapping of
    the predictions to observations by sort, searchsorted and a linear interpolation."""
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    rng = np.random.default_rng(354)
    n = 24
    feats = normal(torch, rng, n, 5)
    rain = np.where(rng.random(n) < 0.4, 0.0, rng.gamma(2.0, 3.0, n)).astype(np.float32)
    y = torch.from_numpy(rain)
    head = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 3))
    fill_(torch, head, rng, 0.3)
    opt = torch.optim.Adam(head.parameters(), lr=1e-2)
    res = {"nll": []}
    for _ in range(3):
        out = head(feats)
        logit, shape_raw, rate_raw = out.unbind(-1)
        wet = y > 0
        p_wet = D.Bernoulli(logits=logit)
        gamma = D.Gamma(F.softplus(shape_raw[wet]) + 1e-3, F.softplus(rate_raw[wet]) + 1e-3)
        nll = -(p_wet.log_prob(wet.float()).sum() + gamma.log_prob(y[wet]).sum()) / n
        opt.zero_grad()
        nll.backward()
        opt.step()
        res["nll"].append(nll.item())
    with torch.no_grad():
        logit, shape_raw, rate_raw = head(feats).unbind(-1)
        mean = torch.sigmoid(logit) * F.softplus(shape_raw) / F.softplus(rate_raw)
    res["mean"] = mean
    mu, sigma = torch.log1p(mean), torch.full_like(mean, 0.5)
    z = (torch.log1p(y) - mu) / sigma
    pdf = torch.exp(-0.5 * z ** 2) / math.sqrt(2 * math.pi)
    cdf = 0.5 * (1 + torch.erf(z / math.sqrt(2)))
    res["crps"] = (sigma * (z * (2 * cdf - 1) + 2 * pdf - 1 / math.sqrt(math.pi))).mean()
    obs_sorted, _ = torch.sort(y)
    pred_sorted, order = torch.sort(mean, stable=True)
    q = torch.linspace(0, 1, n)
    pos = torch.searchsorted(pred_sorted.contiguous(), mean, right=False).clamp(1, n - 1)
    lo, hi = pred_sorted[pos - 1], pred_sorted[pos]
    frac = ((mean - lo) / (hi - lo).clamp_min(1e-6)).clamp(0, 1)
    qq = torch.lerp(q[pos - 1], q[pos], frac)
    res["qmapped"] = torch.quantile(obs_sorted, qq.clamp(0, 1))
    res["order"] = order.tolist()
    res["expm1"] = torch.expm1(torch.log1p(y))
    return res


def patches_program(torch):
    """Overlapped-patch inference as big-domain FourCastNet/downscaling scripts run it: unfold
    the field into overlapping tiles, run a model per tile (eval mode, no_grad), fold back
    and divide by the fold of ones; a PixelShuffle downscaler with a bicubic residual,
    trained one step, and its output against the tiled run."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(355)
    C, H, W, k, s = 2, 8, 12, 4, 2

    class Downscaler(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(C, 8, 3, padding=1), nn.PReLU(8),
                                      nn.Dropout2d(0.5), nn.Conv2d(8, C * 4, 3, padding=1))
            self.shuffle = nn.PixelShuffle(2)

        def forward(self, x):
            base = F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=False)
            return base + self.shuffle(self.body(x))

    model = Downscaler()
    fill_(torch, model, rng, 0.2)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x = normal(torch, rng, 1, C, H, W)
    hi = normal(torch, rng, 1, C, 2 * H, 2 * W)
    model.eval()
    loss = F.smooth_l1_loss(model(x), hi, beta=0.5)
    opt.zero_grad()
    loss.backward()
    opt.step()
    res = {"loss": loss.item()}
    with torch.no_grad():
        full = model(x)
        cols = F.unfold(x, kernel_size=k, stride=s)                 # (1, C*k*k, L)
        L = cols.shape[-1]
        tiles = cols.transpose(1, 2).reshape(L, C, k, k)
        outs = model(tiles)                                          # (L, C, 2k, 2k)
        ocols = outs.reshape(L, -1).t().unsqueeze(0)
        num = F.fold(ocols, (2 * H, 2 * W), kernel_size=2 * k, stride=2 * s)
        den = F.fold(torch.ones_like(ocols), (2 * H, 2 * W), kernel_size=2 * k, stride=2 * s)
        tiled = num / den
    res.update(full=full, tiled=tiled, den=den[0, 0], n_tiles=[L],
               interior_gap=(full - tiled)[..., 4:-4, 4:-4].abs().max(),
               prelu=model.body[1].weight.detach())
    return res


PROGRAMS = [fuxi_program, afno3d_program, stats_program, cyclone_program, precip_program,
            patches_program]

# attention/conv stacks trained with Adam and bfloat16 autocast projections: float32/bf16
# reassociation noise
TOLERANCES = {"fuxi_program": (1e-4, 1e-5), "afno3d_program": (1e-4, 1e-5),
              "precip_program": (1e-4, 1e-5), "patches_program": (1e-4, 1e-5),
              "cyclone_program": (1e-4, 1e-5)}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
