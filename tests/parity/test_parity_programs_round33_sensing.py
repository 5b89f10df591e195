"""Remote sensing programs written as torchgeo / SatMAE / change-detection repositories write
them, run once with `torch` bound to ember and once to PyTorch from the same NumPy weights:
per-band normalisation with running statistics and NDVI/NDWI indices with eps, SatMAE-style
group-channel patch embedding with sin-cos spatial and spectral encodings, a Siamese U-Net for
change detection trained with focal + dice losses, SAR speckle log-transforms with a Lee filter,
and a hyperspectral 3-D conv net. _fixes pins what they found."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _sincos_1d(torch, dim, pos):
    omega = torch.arange(dim // 2, dtype=torch.float64) / (dim / 2.0)
    omega = 1.0 / 10000 ** omega
    out = torch.einsum("m,d->md", pos.reshape(-1).double(), omega)
    return torch.cat([torch.sin(out), torch.cos(out)], dim=1).float()


def multispectral_program(torch):
    """torchgeo-style band normalisation, spectral indices and a small classifier."""
    rng = np.random.default_rng(0)
    nn, F = torch.nn, torch.nn.functional
    bands = 6
    imgs = torch.from_numpy((rng.random((4, bands, 8, 8)) * 3000).astype(np.float32))
    imgs[0, 2, 0, 0] = 0.0
    imgs[0, 3, 0, 0] = 0.0

    class RunningBandStats(nn.Module):
        def __init__(self, c, momentum=0.1):
            super().__init__()
            self.register_buffer("mean", torch.zeros(c))
            self.register_buffer("var", torch.ones(c))
            self.register_buffer("count", torch.tensor(0, dtype=torch.long))
            self.momentum = momentum

        @torch.no_grad()
        def update(self, x):
            m = x.mean(dim=(0, 2, 3))
            v = x.var(dim=(0, 2, 3), unbiased=False)
            if self.count == 0:
                self.mean.copy_(m)
                self.var.copy_(v)
            else:
                self.mean.lerp_(m, self.momentum)
                self.var.mul_(1 - self.momentum).add_(v, alpha=self.momentum)
            self.count += 1

        def forward(self, x):
            std = (self.var[None, :, None, None] + 1e-6).sqrt()
            return (x - self.mean[None, :, None, None]) / std

    def index(a, b, eps=1e-10):
        return (a - b) / (a + b + eps)

    def append_indices(x, red=2, nir=3, green=1, swir=4):
        ndvi = index(x[:, nir], x[:, red]).unsqueeze(1)
        ndwi = index(x[:, green], x[:, nir]).unsqueeze(1)
        ndbi = index(x[:, swir], x[:, nir]).unsqueeze(1)
        return torch.cat([x, ndvi, ndwi, ndbi], dim=1)

    stats = RunningBandStats(bands)
    for i in range(3):
        stats.update(imgs[i:i + 2])
    res = {"mean": stats.mean, "var": stats.var, "count": stats.count.item()}
    x = append_indices(imgs)
    res["ndvi"] = x[:, bands]
    res["ndvi_nan"] = torch.isnan(x).any().item()
    # torchgeo's percentile stretch, clamped
    lo = torch.quantile(imgs.flatten(2), 0.02, dim=2, keepdim=True).unsqueeze(-1)
    hi = torch.quantile(imgs.flatten(2), 0.98, dim=2, keepdim=True).unsqueeze(-1)
    res["stretch"] = ((imgs - lo) / (hi - lo)).clamp_(0, 1)
    norm = torch.cat([stats(imgs), x[:, bands:]], dim=1)
    # no conv bias before BatchNorm: its gradient is rounding noise that AdamW would amplify
    model = nn.Sequential(nn.Conv2d(bands + 3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                          nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3))
    fill_(torch, model, rng)
    y = torch.tensor([0, 1, 2, 1])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.05)
    res["losses"] = []
    for _ in range(3):
        loss = F.cross_entropy(model(norm), y, label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["bn_mean"] = model[1].running_mean
    res["bn_var"] = model[1].running_var
    res["w"] = model[0].weight
    return res


def satmae_program(torch):
    """SatMAE group-channel patch embedding with spatial + spectral (group) encodings, random
    masking by argsort of NumPy noise, MSE on masked patches of normalised targets."""
    rng = np.random.default_rng(1)
    nn, F = torch.nn, torch.nn.functional
    groups = ((0, 1, 2), (3, 4), (5, 6, 7))
    p, d, size = 4, 16, 8

    class GroupPatchEmbed(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.ModuleList([nn.Conv2d(len(g), d, p, stride=p) for g in groups])
            self.channel_embed = nn.Parameter(torch.zeros(1, len(groups), 1, d // 4))

        def forward(self, x):
            xs = [emb(x[:, g, :, :]).flatten(2).transpose(1, 2)
                  for g, emb in zip(groups, self.proj)]
            return torch.stack(xs, dim=1)  # B, G, L, D

    embed = GroupPatchEmbed()
    fill_(torch, embed, rng)
    n = (size // p) ** 2
    side = size // p
    gy, gx = torch.meshgrid(torch.arange(side, dtype=torch.float32),
                            torch.arange(side, dtype=torch.float32), indexing="ij")
    pos = torch.cat([_sincos_1d(torch, 3 * d // 8, gy), _sincos_1d(torch, 3 * d // 8, gx)], 1)
    pos = pos[None, None]  # 1, 1, L, 3D/4
    chan = _sincos_1d(torch, d // 4, torch.arange(len(groups)).float())
    embed.channel_embed.data.copy_(chan[None, :, None, :])
    dec = nn.Linear(d, p * p * 3)
    fill_(torch, dec, rng, 0.1)
    params = list(embed.parameters()) + list(dec.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 2))
    imgs = normal(torch, rng, 2, 8, size, size)
    noise = torch.from_numpy(rng.random((2, len(groups) * n)).astype(np.float32))
    res = {"losses": [], "lrs": []}
    for _ in range(3):
        tok = embed(imgs)
        b, g, L, _ = tok.shape
        pe = torch.cat([pos.expand(b, g, -1, -1), embed.channel_embed.expand(-1, -1, L, -1)
                        .expand(b, -1, -1, -1)], dim=-1)
        tok = (tok + pe).view(b, g * L, d)
        keep = int(g * L * 0.5)
        ids_shuffle = torch.argsort(noise, dim=1)
        ids_restore = torch.argsort(ids_shuffle, dim=1)
        ids_keep = ids_shuffle[:, :keep]
        visible = torch.gather(tok, 1, ids_keep.unsqueeze(-1).repeat(1, 1, d))
        mask = torch.ones(b, g * L)
        mask[:, :keep] = 0
        mask = torch.gather(mask, 1, ids_restore)
        mask_tok = torch.zeros(b, g * L - keep, d)
        full = torch.cat([visible, mask_tok], 1)
        full = torch.gather(full, 1, ids_restore.unsqueeze(-1).expand(-1, -1, d))
        pred = dec(full).view(b, g, L, -1)
        # target: each group's pixels patchified (groups padded to 3 channels)
        tgts = []
        for grp in groups:
            t = imgs[:, grp]
            t = F.pad(t, (0, 0, 0, 0, 0, 3 - len(grp)))
            t = t.unfold(2, p, p).unfold(3, p, p).permute(0, 2, 3, 4, 5, 1).reshape(b, L, -1)
            tgts.append(t)
        tgt = torch.stack(tgts, 1)
        mean, var = tgt.mean(-1, keepdim=True), tgt.var(-1, keepdim=True)
        tgt = (tgt - mean) / (var + 1e-6) ** 0.5
        loss = ((pred - tgt) ** 2).mean(-1).view(b, -1)
        loss = (loss * mask).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
        res["lrs"].append(sched.get_last_lr()[0])
    res["mask"] = mask
    res["pos"] = pos
    res["chan_grad"] = embed.channel_embed.grad
    res["proj_grad"] = embed.proj[1].weight.grad
    return res


def siamese_change_program(torch):
    """FC-Siam-diff (Daudt et al.) with a focal + dice loss, as in change-detection repos."""
    rng = np.random.default_rng(2)
    nn, F = torch.nn, torch.nn.functional

    def block(i, o):
        return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(True))

    class SiamDiff(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc1, self.enc2 = block(4, 6), block(6, 8)
            self.pool = nn.MaxPool2d(2, 2, return_indices=True)
            self.unpool = nn.MaxUnpool2d(2, 2)
            self.up = nn.ConvTranspose2d(8, 6, 3, padding=1)
            self.dec = block(12, 6)
            self.head = nn.Conv2d(6, 2, 1)

        def encode(self, x):
            f1 = self.enc1(x)
            p1, idx = self.pool(f1)
            return f1, self.enc2(p1), idx

        def forward(self, a, b):
            a1, a2, ia = self.encode(a)
            b1, b2, _ = self.encode(b)
            d = self.unpool(self.up(torch.abs(a2 - b2)), ia, output_size=a1.size())
            d = self.dec(torch.cat([d, torch.abs(a1 - b1)], 1))
            return self.head(d)

    def focal_loss(logits, target, gamma=2.0, alpha=0.25):
        logp = F.log_softmax(logits, dim=1)
        logpt = logp.gather(1, target.unsqueeze(1)).squeeze(1)
        pt = logpt.exp()
        at = torch.where(target == 1, torch.tensor(alpha), torch.tensor(1 - alpha))
        return (-at * (1 - pt) ** gamma * logpt).mean()

    def dice_loss(logits, target, smooth=1.0):
        prob = F.softmax(logits, dim=1)
        onehot = F.one_hot(target, 2).permute(0, 3, 1, 2).float()
        inter = (prob * onehot).sum(dim=(2, 3))
        union = prob.sum(dim=(2, 3)) + onehot.sum(dim=(2, 3))
        return 1 - ((2 * inter + smooth) / (union + smooth)).mean()

    model = SiamDiff()
    fill_(torch, model, rng)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                          weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.PolynomialLR(opt, total_iters=5, power=0.9)
    a, b = normal(torch, rng, 2, 4, 8, 8), normal(torch, rng, 2, 4, 8, 8)
    y = torch.from_numpy((rng.random((2, 8, 8)) > 0.7).astype(np.int64))
    res = {"losses": [], "lr": []}
    for _ in range(3):
        out = model(a, b)
        loss = focal_loss(out, y) + dice_loss(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
        res["lr"].append(opt.param_groups[0]["lr"])
    model.eval()
    with torch.inference_mode():
        pred = model(a, b).argmax(1)
        tp = ((pred == 1) & (y == 1)).sum()
        fp = ((pred == 1) & (y == 0)).sum()
        fn = ((pred == 0) & (y == 1)).sum()
        res["f1"] = (2 * tp / (2 * tp + fp + fn).clamp(min=1)).item()
        res["iou"] = (tp.float() / (tp + fp + fn).float().clamp_min(1)).item()
    res["pred"] = pred
    res["up_g"] = model.up.weight.grad
    res["head"] = model.head.weight
    return res


def sar_hyperspectral_program(torch):
    """SAR speckle: dB transform, log-ratio change index, Lee filter by avg_pool; a 3-D conv
    hyperspectral classifier (HybridSN-lite) on PCA-reduced bands, trained a few steps."""
    rng = np.random.default_rng(3)
    nn, F = torch.nn, torch.nn.functional
    inten = torch.from_numpy(rng.gamma(1.0, 1.0, (2, 1, 8, 8)).astype(np.float32))
    inten[0, 0, 0, 0] = 0.0
    db = 10 * torch.log10(inten.clamp(min=1e-6))
    res = {"db": db, "log1p": torch.log1p(inten), "logratio": torch.abs(torch.log(
        (inten[1] + 1e-6) / (inten[0] + 1e-6)))}
    mean = F.avg_pool2d(inten, 3, 1, 1, count_include_pad=False)
    sq = F.avg_pool2d(inten ** 2, 3, 1, 1, count_include_pad=False)
    var = sq - mean ** 2
    noise_var = var.mean(dim=(2, 3), keepdim=True)
    w = var / (var + noise_var)
    res["lee"] = mean + w * (inten - mean)
    # hyperspectral cube: PCA by torch.pca_lowrank-free svd, then 3-D convs
    cube = normal(torch, rng, 2, 12, 7, 7)
    flat = cube.permute(0, 2, 3, 1).reshape(-1, 12)
    flat = (flat - flat.mean(0)).double()  # close singular values: PCA in float64
    u, s, vh = torch.linalg.svd(flat, full_matrices=False)
    k = 6
    proj = flat @ vh[:k].T
    res["explained"] = (s[:k] ** 2).sum() / (s ** 2).sum()
    res["proj_abs"] = proj.abs()  # sign of singular vectors is not unique
    x = (proj.abs().float().reshape(2, 7, 7, k).permute(0, 3, 1, 2)).unsqueeze(1)

    class HybridSN(nn.Module):
        def __init__(self):
            super().__init__()
            self.c3 = nn.Sequential(nn.Conv3d(1, 4, (3, 3, 3)), nn.ReLU(),
                                    nn.Conv3d(4, 4, (3, 3, 3), padding=(1, 0, 0)), nn.ReLU())
            self.c2 = nn.Conv2d(4 * 4, 8, 3)
            self.fc = nn.Linear(8, 4)
            self.drop = nn.Dropout3d(0.0)

        def forward(self, x):
            h = self.drop(self.c3(x))
            b, c, d, hh, ww = h.shape
            h = F.relu(self.c2(h.reshape(b, c * d, hh, ww)))
            return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))

    net = HybridSN()
    fill_(torch, net, rng)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2, amsgrad=True)
    y = torch.tensor([1, 3])
    res["losses"] = []
    for _ in range(3):
        loss = F.nll_loss(F.log_softmax(net(x), 1), y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_value_(net.parameters(), 0.5)
        opt.step()
        res["losses"].append(loss.item())
    res["c3_g"] = net.c3[2].weight.grad
    res["fc"] = net.fc.weight
    return res


PROGRAMS = [multispectral_program, satmae_program, siamese_change_program,
            sar_hyperspectral_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
