"""Weather and climate models written as their reference repositories write them in torch, run
once with `torch` bound to ember and once to PyTorch from the same NumPy weights and data:
GraphCast's encode-process-decode on a mesh (grid2mesh/mesh2grid bipartite edges with
displacement features, InteractionNetwork updates aggregated by index_add_/scatter_add_ and
scatter_reduce means), Pangu-Weather's 3D Earth-specific window attention (pad to the window
multiple, roll for shifted windows, window partition by view/permute, an earth-specific bias
table indexed per latitude band, shift masks with masked_fill, crop back), ClimaX's variable
tokenisation (one patch embedding per variable, learned variable embeddings, cross-attention
aggregation over variables with nn.MultiheadAttention, lead-time embedding, sin-cos position
table) trained with a latitude-weighted MSE, and WeatherBench/ClimaX metrics (cos-lat weighted
RMSE and ACC against a climatology, fair CRPS, spread/skill, rank histograms, zonal spectra).
The spherical/rollout/regridding programs are in _weather_grid."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _lat_weights(torch, nlat):
    lat = torch.linspace(-90 + 90 / nlat, 90 - 90 / nlat, nlat)
    w = torch.cos(torch.deg2rad(lat))
    return lat, w / w.mean()


def graphcast_program(torch):
    """GraphCast-lite: grid nodes on a lat/lon grid, mesh nodes a subset, grid2mesh edges by
    nearest mesh node (cdist + topk), edge features = 3D displacement and length, processor of
    InteractionNetworks (edge MLP on [e, v_s, v_r], sum aggregation by index_add_), mesh2grid
    decoder, residual prediction, Adam steps."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(340)
    nlat, nlon, C, D = 4, 8, 3, 8
    lat = torch.deg2rad(torch.linspace(-67.5, 67.5, nlat))
    lon = torch.deg2rad(torch.arange(nlon) * (360.0 / nlon))
    glat, glon = torch.meshgrid(lat, lon, indexing="ij")
    xyz = torch.stack([glat.cos() * glon.cos(), glat.cos() * glon.sin(), glat.sin()], -1)
    xyz = xyz.reshape(-1, 3)
    n_grid = xyz.shape[0]
    mesh_idx = torch.arange(0, n_grid, 3)
    jitter = torch.from_numpy(rng.standard_normal((mesh_idx.shape[0], 3)).astype(np.float32))
    mesh_xyz = F.normalize(xyz[mesh_idx] + 0.1 * jitter, dim=-1)
    n_mesh = mesh_xyz.shape[0]
    dist = torch.cdist(xyz, mesh_xyz)
    _, nearest = dist.topk(2, dim=1, largest=False)
    g2m_src = torch.arange(n_grid).repeat_interleave(2)
    g2m_dst = nearest.reshape(-1)
    # mesh edges: k nearest mesh neighbours, both directions, duplicates removed
    md = torch.cdist(mesh_xyz, mesh_xyz) + torch.eye(n_mesh) * 10
    _, nb = md.topk(3, dim=1, largest=False)
    pairs = torch.stack([torch.arange(n_mesh).repeat_interleave(3), nb.reshape(-1)], 1)
    pairs = torch.cat([pairs, pairs.flip(1)], 0)
    pairs = torch.unique(pairs, dim=0)
    m_src, m_dst = pairs[:, 0], pairs[:, 1]

    def edge_feats(sx, dx):
        d = sx - dx
        return torch.cat([d, d.norm(dim=-1, keepdim=True)], -1)

    g2m_e = edge_feats(xyz[g2m_src], mesh_xyz[g2m_dst])
    mm_e = edge_feats(mesh_xyz[m_src], mesh_xyz[m_dst])
    m2g_e = edge_feats(mesh_xyz[g2m_dst], xyz[g2m_src])

    def mlp(i, o):
        return nn.Sequential(nn.Linear(i, D), nn.SiLU(), nn.Linear(D, o), nn.LayerNorm(o))

    class InteractionNetwork(nn.Module):
        def __init__(self, n_recv):
            super().__init__()
            self.n_recv = n_recv
            self.edge_mlp = mlp(3 * D, D)
            self.node_mlp = mlp(2 * D, D)

        def forward(self, v_s, v_r, e, src, dst):
            e = e.expand(v_r.shape[0], -1, -1)
            e_new = self.edge_mlp(torch.cat([e, v_s[:, src], v_r[:, dst]], -1))
            agg = torch.zeros(v_r.shape[0], self.n_recv, D, dtype=e_new.dtype)
            agg = agg.index_add_(1, dst, e_new)
            v_new = self.node_mlp(torch.cat([v_r, agg], -1))
            return v_r + v_new, e + e_new

    class GraphCast(nn.Module):
        def __init__(self):
            super().__init__()
            self.grid_embed = mlp(C + 3, D)
            self.mesh_embed = mlp(3, D)
            self.g2m_embed, self.mm_embed, self.m2g_embed = mlp(4, D), mlp(4, D), mlp(4, D)
            self.encoder = InteractionNetwork(n_mesh)
            self.processor = nn.ModuleList(InteractionNetwork(n_mesh) for _ in range(2))
            self.decoder = InteractionNetwork(n_grid)
            self.out = nn.Linear(D, C)

        def forward(self, x):
            B = x.shape[0]
            vg = self.grid_embed(torch.cat([x, xyz.expand(B, -1, -1)], -1))
            vm = self.mesh_embed(mesh_xyz).unsqueeze(0).expand(B, -1, -1)
            vm, _ = self.encoder(vg, vm, self.g2m_embed(g2m_e), g2m_src, g2m_dst)
            e = self.mm_embed(mm_e)
            for layer in self.processor:
                vm, e = layer(vm, vm, e, m_src, m_dst)
            vg2, _ = self.decoder(vm, vg, self.m2g_embed(m2g_e), g2m_dst, g2m_src)
            return x + self.out(vg2)

    model = GraphCast()
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    res = {"n_mesh_edges": [int(pairs.shape[0])], "pairs": pairs.flatten().tolist(),
           "nearest": nearest.flatten().tolist(), "loss": []}
    for _ in range(3):
        x = normal(torch, rng, 2, n_grid, C)
        y = normal(torch, rng, 2, n_grid, C)
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    # scatter_add_ / scatter_reduce aggregation as the PyG-free repos write it
    vals = normal(torch, rng, g2m_dst.shape[0], 2).requires_grad_()
    idx = g2m_dst.unsqueeze(-1).expand(-1, 2)
    summed = torch.zeros(n_mesh, 2).scatter_add_(0, idx, vals)
    mean = torch.zeros(n_mesh, 2).scatter_reduce(0, idx, vals, "mean", include_self=False)
    amax = torch.full((n_mesh, 2), -1e9).scatter_reduce(0, idx, vals, "amax")
    (summed.sum() + (mean ** 2).sum() + amax.sum()).backward()
    res.update(summed=summed, mean=mean, amax=amax, vals_grad=vals.grad,
               deg=torch.bincount(g2m_dst, minlength=n_mesh).tolist(),
               w=model.out.weight.detach())
    return res


def pangu_program(torch):
    """Pangu-Weather's EarthSpecificBlock on a (Z, H, W) = (2, 5, 6) pressure-level cube:
    pad to windows of (2, 2, 4), roll by half a window, window partition, attention with the
    earth-specific bias (a table per latitude-window type indexed by a position-index buffer),
    shift mask, reverse roll, crop; patch embedding by Conv3d/Conv2d and recovery by
    ConvTranspose."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(341)
    Wz, Wh, Ww = 2, 2, 4
    dim, heads = 8, 2

    def position_index():
        cz, ch, cw = torch.arange(Wz), torch.arange(Wh), torch.arange(Ww)
        c1 = torch.stack(torch.meshgrid(cz, ch, cw, indexing="ij")).flatten(1)
        c2 = torch.stack(torch.meshgrid(cz, -ch * Wh, cw, indexing="ij")).flatten(1)
        coords = c1[:, :, None] - c2[:, None, :]
        coords = coords.permute(1, 2, 0).contiguous()
        coords[:, :, 2] += Ww - 1
        coords[:, :, 1] *= 2 * Ww - 1
        coords[:, :, 0] *= (2 * Ww - 1) * Wh * Wh
        return coords.sum(-1).flatten()

    class EarthAttention3D(nn.Module):
        def __init__(self, n_lat_windows):
            super().__init__()
            self.scale = (dim // heads) ** -0.5
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)
            n_bias = (2 * Ww - 1) * Wh * Wh * Wz * Wz
            self.earth_specific_bias = nn.Parameter(torch.zeros(n_bias, n_lat_windows, heads))
            nn.init.trunc_normal_(self.earth_specific_bias, std=0.02)
            self.register_buffer("position_index", position_index(), persistent=False)

        def forward(self, x, mask, n_lon_windows):
            B_, N, C = x.shape
            qkv = self.qkv(x).reshape(B_, N, 3, heads, C // heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            attn = (q * self.scale) @ k.transpose(-2, -1)
            bias = self.earth_specific_bias[self.position_index]
            bias = bias.reshape(N, N, -1, heads).permute(2, 3, 0, 1).contiguous()
            attn = attn.view(-1, n_lon_windows, bias.shape[0], heads, N, N)
            attn = attn + bias.unsqueeze(0).unsqueeze(0)
            if mask is not None:
                attn = attn + mask.view(1, *mask.shape[:2], 1, N, N)
            attn = attn.softmax(-1).view(B_, heads, N, N)
            return self.proj((attn @ v).transpose(1, 2).reshape(B_, N, C))

    def partition(x):
        B, Z, H, W, C = x.shape
        x = x.view(B, Z // Wz, Wz, H // Wh, Wh, W // Ww, Ww, C)
        # windows ordered (B, lon windows, z*lat windows) so the bias broadcasts per lat band
        x = x.permute(0, 5, 1, 3, 2, 4, 6, 7).contiguous()
        return x.view(-1, Wz * Wh * Ww, C)

    def reverse(w, B, Z, H, W):
        x = w.view(B, W // Ww, Z // Wz, H // Wh, Wz, Wh, Ww, -1)
        x = x.permute(0, 2, 4, 3, 5, 1, 6, 7).contiguous()
        return x.view(B, Z, H, W, -1)

    class EarthSpecificBlock(nn.Module):
        def __init__(self, Z, H, W, roll):
            super().__init__()
            self.roll = roll
            self.pad = (0, 0, 0, (-W) % Ww, 0, (-H) % Wh, 0, (-Z) % Wz)
            self.Zp, self.Hp, self.Wp = Z + self.pad[7], H + self.pad[5], W + self.pad[3]
            self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.attn = EarthAttention3D(self.Zp // Wz * self.Hp // Wh)
            self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Dropout(0.0),
                                     nn.Linear(2 * dim, dim))

        def shift_mask(self):
            img = torch.zeros(1, self.Zp, self.Hp, self.Wp, 1)
            cnt = 0
            for z in (slice(0, -Wz), slice(-Wz, -Wz // 2), slice(-Wz // 2, None)):
                for h in (slice(0, -Wh), slice(-Wh, -Wh // 2), slice(-Wh // 2, None)):
                    img[:, z, h, :, :] = cnt
                    cnt += 1
            mw = partition(img).squeeze(-1)
            mask = mw.unsqueeze(1) - mw.unsqueeze(2)
            mask = mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)
            return mask.view(self.Wp // Ww, -1, mask.shape[1], mask.shape[2])

        def forward(self, x, Z, H, W):
            B, L, C = x.shape
            shortcut = x
            x = self.norm1(x).view(B, Z, H, W, C)
            x = F.pad(x, self.pad)
            if self.roll:
                x = torch.roll(x, shifts=(-Wz // 2, -Wh // 2, -Ww // 2), dims=(1, 2, 3))
                mask = self.shift_mask()
            else:
                mask = None
            w = self.attn(partition(x), mask, self.Wp // Ww)
            x = reverse(w, B, self.Zp, self.Hp, self.Wp)
            if self.roll:
                x = torch.roll(x, shifts=(Wz // 2, Wh // 2, Ww // 2), dims=(1, 2, 3))
            x = x[:, :Z, :H, :W, :].reshape(B, Z * H * W, C)
            x = shortcut + x
            return x + self.mlp(self.norm2(x))

    class Pangu(nn.Module):
        def __init__(self):
            super().__init__()
            self.upper = nn.Conv3d(3, dim, kernel_size=(1, 2, 2), stride=(1, 2, 2))
            self.surface = nn.Conv2d(2, dim, kernel_size=2, stride=2)
            self.blocks = nn.ModuleList([EarthSpecificBlock(3, 3, 4, False),
                                         EarthSpecificBlock(3, 3, 4, True)])
            self.up_out = nn.ConvTranspose3d(dim, 3, kernel_size=(1, 2, 2), stride=(1, 2, 2))
            self.sf_out = nn.ConvTranspose2d(dim, 2, kernel_size=2, stride=2)

        def forward(self, upper, surface):
            u = self.upper(F.pad(upper, (0, 0, 0, 1)))          # H 5 -> 6
            s = self.surface(F.pad(surface, (0, 0, 0, 1))).unsqueeze(2)
            x = torch.cat([s, u], dim=2)                         # (B, dim, 3, 3, 4)
            B, C, Z, H, W = x.shape
            x = x.permute(0, 2, 3, 4, 1).reshape(B, -1, C)
            for blk in self.blocks:
                x = blk(x, Z, H, W)
            x = x.view(B, Z, H, W, C).permute(0, 4, 1, 2, 3)
            up = self.up_out(x[:, :, 1:])[:, :, :, :5, :]
            sf = self.sf_out(x[:, :, 0])[:, :, :5, :]
            return up, sf

    model = Pangu()
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, betas=(0.9, 0.95), weight_decay=3e-6)
    res = {"loss": [], "pos_index": model.blocks[0].attn.position_index.tolist(),
           "mask": model.blocks[1].shift_mask()}
    for _ in range(2):
        upper, surface = normal(torch, rng, 1, 3, 2, 5, 8), normal(torch, rng, 1, 2, 5, 8)
        up, sf = model(upper, surface)
        loss = F.l1_loss(up, upper) + 0.25 * F.l1_loss(sf, surface)
        opt.zero_grad()
        loss.backward()
        res.setdefault("bias_grad", []).append(model.blocks[1].attn.earth_specific_bias.grad)
        opt.step()
        res["loss"].append(loss.item())
    res["out"] = [up.detach(), sf.detach()]
    return res


def _sincos_2d(embed_dim, h, w):
    """ClimaX's get_2d_sincos_pos_embed (NumPy, as the repo builds it)."""
    gh, gw = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    grid = np.stack([gh, gw], 0).reshape(2, 1, h, w)

    def one(d, pos):
        omega = 1.0 / 10000 ** (np.arange(d // 2, dtype=np.float64) / (d / 2.0))
        out = np.einsum("m,d->md", pos.reshape(-1), omega)
        return np.concatenate([np.sin(out), np.cos(out)], axis=1)

    return np.concatenate([one(embed_dim // 2, grid[0]), one(embed_dim // 2, grid[1])], 1)


def climax_program(torch):
    """ClimaX: per-variable PatchEmbed (ModuleList of Conv2d), variables picked by id from a
    lookup, learned var_embed, cross-attention aggregation over variables (a learned query,
    nn.MultiheadAttention batch_first), sin-cos pos embed copied into a frozen Parameter, lead
    time embedding, transformer blocks, unpatchify by einsum, lat-weighted MSE per variable."""
    nn = torch.nn
    rng = np.random.default_rng(342)
    variables = ["t2m", "u10", "v10", "z500"]
    H, W, p, D = 4, 8, 2, 16
    nh, nw = H // p, W // p

    class ClimaX(nn.Module):
        def __init__(self):
            super().__init__()
            self.var_map = {v: i for i, v in enumerate(variables)}
            self.token_embeds = nn.ModuleList(
                nn.Conv2d(1, D, kernel_size=p, stride=p) for _ in variables)
            self.var_embed = nn.Parameter(torch.zeros(1, len(variables), D))
            self.var_query = nn.Parameter(torch.zeros(1, 1, D))
            self.var_agg = nn.MultiheadAttention(D, 2, batch_first=True)
            self.pos_embed = nn.Parameter(torch.zeros(1, nh * nw, D), requires_grad=False)
            self.lead_time_embed = nn.Linear(1, D)
            self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(
                D, 2, 32, dropout=0.0, activation="gelu", batch_first=True, norm_first=True)
                for _ in range(2))
            self.norm = nn.LayerNorm(D)
            self.head = nn.Linear(D, len(variables) * p * p)

        def get_var_ids(self, vars):
            return torch.tensor(np.array([self.var_map[v] for v in vars]))

        def aggregate_variables(self, x):
            b, _, L, _ = x.shape
            x = torch.einsum("bvld->blvd", x).flatten(0, 1)
            q = self.var_query.repeat_interleave(x.shape[0], dim=0)
            x, _ = self.var_agg(q, x, x)
            return x.squeeze().unflatten(dim=0, sizes=(b, L))

        def unpatchify(self, x):
            c = len(variables)
            x = x.reshape(x.shape[0], nh, nw, p, p, c)
            x = torch.einsum("nhwpqc->nchpwq", x)
            return x.reshape(x.shape[0], c, H, W)

        def forward(self, x, lead_times, vars):
            ids = self.get_var_ids(vars)
            embeds = [self.token_embeds[int(ids[i])](x[:, i:i + 1]).flatten(2).transpose(1, 2)
                      for i in range(len(ids))]
            x = torch.stack(embeds, dim=1)
            x = x + self.var_embed[:, ids, :].unsqueeze(2)
            x = self.aggregate_variables(x)
            x = x + self.pos_embed
            x = x + self.lead_time_embed(lead_times.unsqueeze(-1)).unsqueeze(1)
            for blk in self.blocks:
                x = blk(x)
            return self.unpatchify(self.head(self.norm(x)))

    model = ClimaX()
    fill_(torch, model, rng, 0.2)
    model.pos_embed.data.copy_(torch.from_numpy(_sincos_2d(D, nh, nw)).float().unsqueeze(0))
    _, w_lat = _lat_weights(torch, H)
    w_lat = w_lat.view(1, 1, H, 1)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=5e-4)
    res = {"loss": [], "per_var": [], "trainable": sum(p.numel() for p in model.parameters()
                                                       if p.requires_grad)}
    for _ in range(2):
        x, y = normal(torch, rng, 2, 4, H, W), normal(torch, rng, 2, 4, H, W)
        lead = torch.from_numpy(np.array([6.0, 72.0], np.float32)) / 100
        pred = model(x, lead, variables)
        err = (pred - y) ** 2 * w_lat
        per_var = {v: err[:, i].mean() for i, v in enumerate(variables)}
        loss = err.mean(dim=1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["per_var"].append([per_var[v].item() for v in variables])
    res["var_embed_grad"] = model.var_embed.grad
    res["pos_grad_none"] = [model.pos_embed.grad is None]
    return res


def metrics_program(torch):
    """WeatherBench/ClimaX evaluation: cos-lat weighted RMSE and anomaly correlation against a
    climatology, per-variable dicts, fair CRPS of an ensemble, spread/skill ratio, rank
    histogram by bincount, zonal power spectrum by rfft along longitude, nan-masked means."""
    rng = np.random.default_rng(343)
    nlat, nlon, E, B, V = 6, 12, 5, 3, 2
    _, w = _lat_weights(torch, nlat)
    pred = normal(torch, rng, B, V, nlat, nlon)
    y = normal(torch, rng, B, V, nlat, nlon)
    clim = normal(torch, rng, V, nlat, nlon) * 0.1
    wl = w.view(1, 1, -1, 1)
    res = {}
    rmse = torch.mean(torch.sqrt(torch.mean((pred - y) ** 2 * wl, dim=(-2, -1))), dim=0)
    res["rmse"] = rmse
    pa = pred - clim
    ya = y - clim
    pa = pa - pa.mean(dim=(-2, -1), keepdim=True)
    ya = ya - ya.mean(dim=(-2, -1), keepdim=True)
    acc = torch.sum(wl * pa * ya, dim=(-2, -1)) / torch.sqrt(
        torch.sum(wl * pa ** 2, dim=(-2, -1)) * torch.sum(wl * ya ** 2, dim=(-2, -1)))
    res["acc"] = acc.mean(0)
    res["acc_dict"] = sorted({f"w_acc_{v}": round(float(acc[:, i].mean()), 4)
                              for i, v in enumerate(["t2m", "z500"])}.items())
    res["acc_dict"] = [f"{k}={v:.4f}" for k, v in res["acc_dict"]]
    ens = normal(torch, rng, E, B, nlat, nlon).requires_grad_()
    obs = normal(torch, rng, B, nlat, nlon)
    skill = (ens - obs).abs().mean(0)
    spread = (ens.unsqueeze(0) - ens.unsqueeze(1)).abs().sum((0, 1)) / (2 * E * (E - 1))
    crps = ((skill - spread) * w.view(1, -1, 1)).mean()
    crps.backward()
    res["crps"] = crps
    res["crps_grad"] = ens.grad
    ens_mean = ens.detach().mean(0)
    ssr = torch.sqrt((ens.detach().var(0, correction=1) * w.view(1, -1, 1)).mean()) / \
        torch.sqrt((((ens_mean - obs) ** 2) * w.view(1, -1, 1)).mean())
    res["ssr"] = ssr * math.sqrt((E + 1) / E)
    rank = (ens.detach() < obs.unsqueeze(0)).sum(0)
    res["rank_hist"] = torch.bincount(rank.flatten(), minlength=E + 1).tolist()
    spec = torch.fft.rfft(y, dim=-1, norm="forward")
    power = (spec.abs() ** 2)
    power[..., 1:] *= 2
    res["zonal_power"] = (power * w.view(1, 1, -1, 1)).mean((0, 2))
    res["wavenumbers"] = torch.fft.rfftfreq(nlon, d=1.0 / nlon).tolist()
    masked = y.clone()
    masked[:, :, 0, :3] = float("nan")
    res["nanmean"] = torch.nanmean(masked, dim=(-2, -1))
    res["nan_rmse"] = torch.sqrt(torch.nansum((masked - pred) ** 2 * wl, dim=(-2, -1))
                                 / (~masked.isnan() * wl).sum((-2, -1)))
    res["median_err"] = (pred - y).abs().flatten(1).median(dim=1).values
    res["q90"] = torch.quantile((pred - y).abs().flatten(1), 0.9, dim=1)
    return res


PROGRAMS = [graphcast_program, pangu_program, climax_program, metrics_program]

# multi-layer attention/MLP stacks trained with Adam: float32 reassociation noise
TOLERANCES = {"graphcast_program": (1e-4, 1e-5), "pangu_program": (1e-4, 1e-5),
              "climax_program": (1e-4, 1e-5)}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
