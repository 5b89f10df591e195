"""Dense prediction, second wave, written as HRNet / mmpose, Mask2Former, PSPNet and SegFormer
write it in torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy
weights and data: an HRNet-style two-branch network (strided-conv downsampling, interpolate by
scale_factor upsampling, summed fusion) predicting keypoint heatmaps trained against Gaussian
targets made with meshgrid, decoded by soft-argmax (integral regression), flip-test averaged
with torch.flip and a flip-pair index, scored by an OKS loss; Mask2Former's Hungarian matcher
(class, sigmoid-BCE and dice costs built in torch, matched by
scipy.optimize.linear_sum_assignment on .cpu().numpy(), point-sampled masks by grid_sample);
PSPNet's pyramid pooling (adaptive_avg_pool2d to 1, 2, 3, 6 bins on odd sizes, bilinear
upsampling with align_corners=True); SegFormer's efficient attention (a spatial-reduction conv
on keys and values), Mix-FFN with a depthwise conv, and the all-MLP decoder."""

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def pose_program(torch):
    """A small HRNet predicting 4 keypoint heatmaps, soft-argmax + OKS loss, flip test."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(294)
    K, H, W = 4, 12, 10

    def conv_bn(cin, cout, stride=1):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
                             nn.BatchNorm2d(cout, momentum=0.1), nn.ReLU(inplace=True))

    class Fuse(nn.Module):
        def __init__(self, c_hi, c_lo):
            super().__init__()
            self.up = nn.Sequential(nn.Conv2d(c_lo, c_hi, 1, bias=False), nn.BatchNorm2d(c_hi))
            self.down = nn.Sequential(nn.Conv2d(c_hi, c_lo, 3, 2, 1, bias=False),
                                      nn.BatchNorm2d(c_lo))
            self.relu = nn.ReLU(False)

        def forward(self, hi, lo):
            up = F.interpolate(self.up(lo), scale_factor=2, mode="nearest")
            up = up[:, :, :hi.shape[2], :hi.shape[3]]
            return self.relu(hi + up), self.relu(lo + self.down(hi))

    class HRNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = conv_bn(3, 6)
            self.hi = conv_bn(6, 6)
            self.lo = conv_bn(6, 8, 2)
            self.fuse = Fuse(6, 8)
            self.final = nn.Conv2d(6 + 8, K, 1)

        def forward(self, x):
            x = self.stem(x)
            hi, lo = self.fuse(self.hi(x), self.lo(x))
            lo_up = F.interpolate(lo, size=hi.shape[-2:], mode="bilinear", align_corners=False)
            return self.final(torch.cat([hi, lo_up], 1))

    def soft_argmax(heat, beta=5.0):
        B, Kk, h, w = heat.shape
        prob = F.softmax(beta * heat.reshape(B, Kk, -1), dim=-1).reshape(B, Kk, h, w)
        xs = torch.arange(w, dtype=heat.dtype)
        ys = torch.arange(h, dtype=heat.dtype)
        x = (prob.sum(dim=2) * xs).sum(-1)
        y = (prob.sum(dim=3) * ys).sum(-1)
        return torch.stack([x, y], dim=-1)

    def gaussian_targets(joints, sigma=1.5):
        yy, xx = torch.meshgrid(torch.arange(H, dtype=torch.float32),
                                torch.arange(W, dtype=torch.float32), indexing="ij")
        dx = xx[None, None] - joints[..., 0, None, None]
        dy = yy[None, None] - joints[..., 1, None, None]
        return torch.exp(-(dx ** 2 + dy ** 2) / (2 * sigma ** 2))

    kpt_sigmas = torch.tensor([0.26, 0.25, 0.35, 0.35]) / 10.0

    def oks_loss(pred, gt, vis, area):
        d2 = (pred - gt).pow(2).sum(-1)
        e = d2 / (2 * area[:, None] * (2 * kpt_sigmas) ** 2 + 1e-9)
        oks = (torch.exp(-e) * vis).sum(-1) / vis.sum(-1).clamp(min=1)
        return (1 - oks).mean(), oks

    flip_pairs = [(0, 1), (2, 3)]
    flip_index = list(range(K))
    for i, j in flip_pairs:
        flip_index[i], flip_index[j] = j, i

    net = HRNet()
    fill_(torch, net, rng, 0.3)
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[2], gamma=0.1)
    res = {"loss": [], "oks": []}
    joints = torch.from_numpy((rng.random((2, K, 2)) * [W - 1, H - 1]).astype(np.float32))
    vis = torch.tensor([[1.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    area = torch.tensor([30.0, 50.0])
    target = gaussian_targets(joints)
    for step in range(3):
        img = normal(torch, rng, 2, 3, H, W)
        heat = net(img)
        coords = soft_argmax(heat)
        l_heat = F.mse_loss(heat * vis[..., None, None], target * vis[..., None, None])
        l_oks, oks = oks_loss(coords, joints, vis, area)
        loss = l_heat + 0.1 * l_oks
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["loss"].append(loss.item())
        res["oks"].append(oks.detach())
    net.eval()
    with torch.no_grad():
        img = normal(torch, rng, 2, 3, H, W)
        heat = net(img)
        heat_f = net(torch.flip(img, dims=[3]))
        heat_f = torch.flip(heat_f, [3])[:, flip_index]
        heat_avg = (heat + heat_f) * 0.5
        res["heat_avg"] = heat_avg
        res["coords"] = soft_argmax(heat_avg)
        flat = heat_avg.flatten(2)
        maxvals, idx = flat.max(dim=2)
        res["argmax_xy"] = torch.stack([idx % W, torch.div(idx, W, rounding_mode="floor")], -1)
        res["maxvals"] = maxvals
    res["bn_stats"] = [net.stem[1].running_mean.clone(), net.stem[1].running_var.clone(),
                       net.stem[1].num_batches_tracked.clone()]
    res["lr"] = [g["lr"] for g in opt.param_groups]
    res["params"] = [p.detach().clone() for p in net.parameters()]
    return res


def mask2former_program(torch):
    """Mask2Former's set criterion: Hungarian matching on class/mask/dice costs over sampled
    points, then matched CE (with an eos weight), sigmoid-BCE and dice losses."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(295)
    Q, C, Hm, Wm, P = 5, 3, 8, 8, 12

    def point_sample(inp, coords):
        out = F.grid_sample(inp, 2.0 * coords.unsqueeze(2) - 1.0, align_corners=False)
        return out.squeeze(3)

    def dice_cost(inputs, targets):
        inputs = inputs.sigmoid().flatten(1)
        numerator = 2 * torch.einsum("nc,mc->nm", inputs, targets)
        denominator = inputs.sum(-1)[:, None] + targets.sum(-1)[None, :]
        return 1 - (numerator + 1) / (denominator + 1)

    def bce_cost(inputs, targets):
        hw = inputs.shape[1]
        pos = F.binary_cross_entropy_with_logits(inputs, torch.ones_like(inputs),
                                                 reduction="none")
        neg = F.binary_cross_entropy_with_logits(inputs, torch.zeros_like(inputs),
                                                 reduction="none")
        loss = torch.einsum("nc,mc->nm", pos, targets) + torch.einsum("nc,mc->nm", neg,
                                                                      1 - targets)
        return loss / hw

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.query = nn.Embedding(Q, 8)
            self.cls = nn.Linear(8, C + 1)
            self.mask_embed = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 6))
            self.pix = nn.Conv2d(3, 6, 3, padding=1)

        def forward(self, img):
            q = self.query.weight.unsqueeze(0).expand(img.shape[0], -1, -1)
            feats = self.pix(img)
            masks = torch.einsum("bqc,bchw->bqhw", self.mask_embed(q), feats)
            return self.cls(q), masks

    head = Head()
    fill_(torch, head, rng, 0.4)
    empty_weight = torch.ones(C + 1)
    empty_weight[-1] = 0.1
    opt = torch.optim.AdamW(head.parameters(), lr=1e-2, weight_decay=1e-4)
    res = {"loss": [], "indices": []}
    for step in range(3):
        img = normal(torch, rng, 2, 3, Hm, Wm)
        targets = []
        for b, n_obj in enumerate([2, 3]):
            labels = torch.from_numpy(rng.integers(0, C, n_obj))
            masks = torch.from_numpy(rng.random((n_obj, Hm, Wm)) > 0.5).float()
            targets.append({"labels": labels, "masks": masks})
        logits, pred_masks = head(img)
        coords = torch.from_numpy(rng.random((1, P, 2)).astype(np.float32))
        indices = []
        with torch.no_grad():
            for b, tgt in enumerate(targets):
                prob = logits[b].softmax(-1)
                cost_class = -prob[:, tgt["labels"]]
                out_mask = point_sample(pred_masks[b][:, None], coords.repeat(Q, 1, 1))[:, 0]
                tgt_mask = point_sample(tgt["masks"][:, None], coords.repeat(
                    tgt["masks"].shape[0], 1, 1))[:, 0]
                cost = 5.0 * bce_cost(out_mask, tgt_mask) + 2.0 * cost_class \
                    + 5.0 * dice_cost(out_mask, tgt_mask)
                cost = cost.reshape(Q, -1).cpu()
                i, j = linear_sum_assignment(cost.numpy())
                indices.append((torch.as_tensor(i, dtype=torch.int64),
                                torch.as_tensor(j, dtype=torch.int64)))
        res["indices"].append([int(v) for i, j in indices for v in (*i.tolist(), *j.tolist())])
        batch_idx = torch.cat([torch.full_like(src, b) for b, (src, _) in enumerate(indices)])
        src_idx = torch.cat([src for src, _ in indices])
        target_classes = torch.full(logits.shape[:2], C, dtype=torch.int64)
        target_classes[batch_idx, src_idx] = torch.cat(
            [t["labels"][j] for t, (_, j) in zip(targets, indices)])
        loss_ce = F.cross_entropy(logits.transpose(1, 2), target_classes, empty_weight)
        src_masks = pred_masks[batch_idx, src_idx][:, None]
        tgt_masks = torch.cat([t["masks"][j] for t, (_, j) in zip(targets, indices)])[:, None]
        pl = point_sample(src_masks, coords.repeat(src_masks.shape[0], 1, 1)).squeeze(1)
        pt = point_sample(tgt_masks, coords.repeat(src_masks.shape[0], 1, 1)).squeeze(1)
        num_masks = max(float(src_masks.shape[0]), 1.0)
        loss_mask = F.binary_cross_entropy_with_logits(pl, pt, reduction="none").mean(1)
        loss_mask = loss_mask.sum() / num_masks
        s = pl.sigmoid()
        loss_dice = (1 - (2 * (s * pt).sum(-1) + 1) / (s.sum(-1) + pt.sum(-1) + 1)).sum()
        loss = loss_ce + 5 * loss_mask + 5 * loss_dice / num_masks
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["target_classes"] = target_classes
    res["params"] = [p.detach().clone() for p in head.parameters()]
    return res


def psp_segformer_program(torch):
    """A SegFormer stage (overlapping patch embed, efficient attention with spatial reduction,
    Mix-FFN) feeding PSPNet's pyramid pooling module and an all-MLP decode, trained with
    cross-entropy ignoring label 255, and PSP on odd input sizes."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(296)
    classes = 3

    class EfficientAttention(nn.Module):
        def __init__(self, dim, heads, sr):
            super().__init__()
            self.heads, self.scale = heads, (dim // heads) ** -0.5
            self.q = nn.Linear(dim, dim)
            self.kv = nn.Linear(dim, dim * 2)
            self.proj = nn.Linear(dim, dim)
            self.sr = nn.Conv2d(dim, dim, sr, sr)
            self.norm = nn.LayerNorm(dim)

        def forward(self, x, H, W):
            B, N, C = x.shape
            q = self.q(x).reshape(B, N, self.heads, C // self.heads).permute(0, 2, 1, 3)
            x_ = x.permute(0, 2, 1).reshape(B, C, H, W)
            x_ = self.norm(self.sr(x_).reshape(B, C, -1).permute(0, 2, 1))
            kv = self.kv(x_).reshape(B, -1, 2, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
            k, v = kv[0], kv[1]
            attn = (q @ k.transpose(-2, -1)) * self.scale
            attn = attn.softmax(dim=-1)
            x = (attn @ v).transpose(1, 2).reshape(B, N, C)
            return self.proj(x)

    class MixFFN(nn.Module):
        def __init__(self, dim, hidden):
            super().__init__()
            self.fc1 = nn.Linear(dim, hidden)
            self.dwconv = nn.Conv2d(hidden, hidden, 3, 1, 1, bias=True, groups=hidden)
            self.fc2 = nn.Linear(hidden, dim)

        def forward(self, x, H, W):
            x = self.fc1(x)
            B, N, C = x.shape
            x = self.dwconv(x.transpose(1, 2).view(B, C, H, W)).flatten(2).transpose(1, 2)
            return self.fc2(F.gelu(x))

    class PPM(nn.ModuleList):
        def __init__(self, cin, cout, bins=(1, 2, 3, 6)):
            super().__init__([nn.Sequential(nn.AdaptiveAvgPool2d(b), nn.Conv2d(cin, cout, 1),
                                            nn.ReLU(inplace=True)) for b in bins])

        def forward(self, x):
            outs = [x]
            for stage in self:
                outs.append(F.interpolate(stage(x), size=x.shape[2:], mode="bilinear",
                                          align_corners=True))
            return torch.cat(outs, 1)

    class Net(nn.Module):
        def __init__(self, dim=8):
            super().__init__()
            self.patch = nn.Conv2d(3, dim, 7, 4, 3)
            self.norm0 = nn.LayerNorm(dim)
            self.n1, self.attn = nn.LayerNorm(dim), EfficientAttention(dim, 2, 2)
            self.n2, self.ffn = nn.LayerNorm(dim), MixFFN(dim, 16)
            self.ppm = PPM(dim, 4)
            self.linear_fuse = nn.Conv2d(dim + 16, 8, 1)
            self.cls = nn.Conv2d(8, classes, 1)

        def forward(self, img):
            x = self.patch(img)
            B, C, H, W = x.shape
            x = self.norm0(x.flatten(2).transpose(1, 2))
            x = x + self.attn(self.n1(x), H, W)
            x = x + self.ffn(self.n2(x), H, W)
            x = x.transpose(1, 2).reshape(B, C, H, W)
            x = self.cls(F.relu(self.linear_fuse(self.ppm(x))))
            return F.interpolate(x, size=img.shape[2:], mode="bilinear", align_corners=False)

    net = Net()
    fill_(torch, net, rng, 0.3)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    poly = torch.optim.lr_scheduler.LambdaLR(opt, lambda it: (1 - it / 10) ** 0.9)
    res = {"loss": []}
    for step in range(3):
        img = normal(torch, rng, 2, 3, 24, 24)
        label = torch.from_numpy(rng.integers(0, classes, (2, 24, 24)))
        label[:, :2] = 255
        out = net(img)
        loss = F.cross_entropy(out, label, ignore_index=255)
        opt.zero_grad()
        loss.backward()
        opt.step()
        poly.step()
        res["loss"].append(loss.item())
    res["lr"] = [opt.param_groups[0]["lr"]]
    with torch.no_grad():
        odd = normal(torch, rng, 1, 8, 13, 11)
        res["ppm_odd"] = net.ppm(odd)
        res["pools"] = [F.adaptive_avg_pool2d(odd, b) for b in (1, 2, 3, 6, (5, 4))]
        res["pred"] = net(normal(torch, rng, 1, 3, 21, 19)).argmax(1)
    res["params"] = [p.detach().clone() for p in net.parameters()]
    return res


PROGRAMS = [pose_program, mask2former_program, psp_segformer_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
