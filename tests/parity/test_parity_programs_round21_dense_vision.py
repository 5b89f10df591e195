"""Dense prediction, video and image synthesis programs, written as such repositories write them
by hand (no torchvision), run once with `torch` bound to ember and once to PyTorch from the same
NumPy weights and data: DeepLab-style segmentation (ASPP, GroupNorm, bilinear upsampling, weighted
cross entropy with ignore_index, soft Dice, poly LR, confusion-matrix mIoU), super-resolution and
style transfer (PixelShuffle, ReflectionPad2d, InstanceNorm2d, grouped ConvTranspose2d, Gram and
total-variation losses, optimisation over the image), optical flow and depth (grid_sample warping,
correlation volumes, SSIM, edge-aware smoothness, max_unpool2d), a factorised 3-D video network
(Conv3d, BatchNorm3d, channels_last_3d, temporal shift, mixup) and keypoint heatmaps (soft-argmax,
OHEM by topk, F.fold, AdamW with OneCycleLR, flip-test)."""

import re

import numpy as np
import pytest

import ember
from tests.parity._compare import recorded
from tests.parity._programs import fill_, normal
from tests.parity.test_parity_programs_round9 import assert_same_results

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def segmentation_program(torch):
    """ASPP head, weighted CE with ignore_index, soft Dice, poly LR, nesterov SGD, mIoU."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(21)
    res = {}
    num_classes, ignore = 4, 255

    class ASPPConv(nn.Sequential):
        def __init__(self, cin, cout, dilation):
            super().__init__(
                nn.Conv2d(cin, cout, 3, padding=dilation, dilation=dilation, bias=False),
                nn.GroupNorm(2, cout), nn.ReLU(inplace=True))

    class ASPPPooling(nn.Sequential):
        def __init__(self, cin, cout):
            super().__init__(nn.AdaptiveAvgPool2d(1), nn.Conv2d(cin, cout, 1, bias=False),
                             nn.GroupNorm(2, cout), nn.ReLU())

        def forward(self, x):
            size = x.shape[-2:]
            for mod in self:
                x = mod(x)
            return F.interpolate(x, size=size, mode="bilinear", align_corners=False)

    class ASPP(nn.Module):
        def __init__(self, cin, cout, rates):
            super().__init__()
            mods = [nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.GroupNorm(2, cout),
                                  nn.ReLU())]
            mods += [ASPPConv(cin, cout, r) for r in rates]
            mods.append(ASPPPooling(cin, cout))
            self.convs = nn.ModuleList(mods)
            self.project = nn.Sequential(
                nn.Conv2d(len(self.convs) * cout, cout, 1, bias=False), nn.GroupNorm(2, cout),
                nn.ReLU(), nn.Dropout(0.0))

        def forward(self, x):
            return self.project(torch.cat([conv(x) for conv in self.convs], dim=1))

    class DeepLab(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1),
                                          nn.GroupNorm(4, 8), nn.ReLU(inplace=True))
            self.aspp = ASPP(8, 8, (1, 2, 3))
            self.low = nn.Conv2d(3, 4, 1)
            self.head = nn.Conv2d(12, num_classes, 3, padding=1)

        def forward(self, x):
            size = x.shape[-2:]
            feat = self.aspp(self.backbone(x))
            feat = F.interpolate(feat, scale_factor=2, mode="bilinear", align_corners=True)
            feat = torch.cat([feat, self.low(x)], dim=1)
            return F.interpolate(self.head(feat), size=size, mode="bilinear",
                                 align_corners=False)

    model = DeepLab()
    fill_(torch, model, rng, 0.3)
    images = normal(torch, rng, 2, 3, 12, 12)
    labels = torch.from_numpy(rng.integers(0, num_classes, (2, 12, 12)).astype(np.int64))
    labels[:, :2, :] = ignore
    class_weights = torch.tensor([0.5, 1.0, 1.5, 2.0])

    def dice_loss(logits, target, eps=1.0):
        valid = (target != ignore)
        target = target.clone()
        target[~valid] = 0
        probs = logits.softmax(dim=1)
        onehot = F.one_hot(target, num_classes).permute(0, 3, 1, 2).float()
        mask = valid.unsqueeze(1).float()
        probs, onehot = probs * mask, onehot * mask
        inter = (probs * onehot).sum(dim=(0, 2, 3))
        card = probs.sum(dim=(0, 2, 3)) + onehot.sum(dim=(0, 2, 3))
        return 1 - ((2 * inter + eps) / (card + eps)).mean()

    base_lr, max_iter, steps = 0.05, 10, 4
    opt = torch.optim.SGD(model.parameters(), lr=base_lr, momentum=0.9, nesterov=True,
                          weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda it: (1 - it / max_iter) ** 0.9)
    poly = torch.optim.lr_scheduler.PolynomialLR(
        torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=base_lr), total_iters=max_iter,
        power=0.9)
    criterion = nn.CrossEntropyLoss(weight=class_weights, ignore_index=ignore)
    res["loss"], res["lr"], res["poly_lr"] = [], [], []
    for _ in range(steps):
        logits = model(images)
        ce = criterion(logits, labels)
        loss = ce + 0.5 * dice_loss(logits, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        poly.optimizer.step()
        poly.step()
        res["loss"].append(loss.item())
        res["lr"].append(opt.param_groups[0]["lr"])
        res["poly_lr"].append(poly.get_last_lr()[0])
    res["ce_none"] = F.cross_entropy(logits, labels, weight=class_weights, ignore_index=ignore,
                                     reduction="none")
    res["ce_smooth"] = F.cross_entropy(logits, labels, ignore_index=ignore, label_smoothing=0.1)

    model.eval()
    with torch.no_grad():
        pred = model(images).argmax(1)
        mask = labels != ignore
        hist = torch.bincount(num_classes * labels[mask] + pred[mask],
                              minlength=num_classes ** 2).reshape(num_classes, num_classes)
        iou = torch.diag(hist).float() / (hist.sum(0) + hist.sum(1) - torch.diag(hist)).float()
        res["hist"] = hist
        res["miou"] = torch.nanmean(iou)
        res["pixel_acc"] = (torch.diag(hist).sum() / hist.sum()).item()
    res["meta"] = [_name(hist.dtype), _name(pred.dtype), str(tuple(pred.shape))]
    up = F.interpolate(images, scale_factor=1.5, mode="bilinear", align_corners=False,
                       recompute_scale_factor=True)
    res["up_recompute"] = up
    res["up_nearest"] = F.interpolate(images, scale_factor=0.5, mode="nearest")
    res["up_ac"] = F.interpolate(images, size=(7, 9), mode="bilinear", align_corners=True)
    res["up_bicubic"] = F.interpolate(images, size=(7, 9), mode="bicubic", align_corners=False)
    res["params"] = torch.cat([p.detach().flatten() for p in model.parameters()])
    return res


def super_resolution_program(torch):
    """ESPCN-style upsampler with PixelShuffle, then neural style transfer over the image."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(22)
    res = {}

    class ResBlock(nn.Module):
        def __init__(self, ch, track):
            super().__init__()
            # no conv bias before instance norm: its gradient is zero up to rounding, which
            # Adam would blow up into lr-sized steps that differ between the libraries
            self.body = nn.Sequential(
                nn.ReflectionPad2d(1), nn.Conv2d(ch, ch, 3, bias=False),
                nn.InstanceNorm2d(ch, affine=True, track_running_stats=track), nn.ReLU(),
                nn.ReflectionPad2d((1, 1, 1, 1)), nn.Conv2d(ch, ch, 3, bias=False),
                nn.InstanceNorm2d(ch, affine=True, track_running_stats=track))

        def forward(self, x):
            return x + self.body(x)

    class SRNet(nn.Module):
        def __init__(self, scale=2):
            super().__init__()
            self.down = nn.PixelUnshuffle(2)
            self.head = nn.Conv2d(3 * 4, 8, 3, padding=1, padding_mode="reflect")
            self.res = nn.Sequential(ResBlock(8, False), ResBlock(8, True))
            self.up_t = nn.ConvTranspose2d(8, 8, 3, stride=2, padding=1, output_padding=1,
                                           groups=4)
            self.tail = nn.Conv2d(8, 3 * scale ** 2, 3, padding=1)
            self.shuffle = nn.PixelShuffle(scale)

        def forward(self, x):
            f = self.res(F.leaky_relu(self.head(self.down(x)), 0.2))
            f = F.relu(self.up_t(f))
            return torch.tanh(self.shuffle(self.tail(f)))

    model = SRNet()
    fill_(torch, model, rng, 0.2)
    lr_img = normal(torch, rng, 2, 3, 8, 8)
    hr_img = normal(torch, rng, 2, 3, 16, 16).tanh()
    # VDSR's recipe, SGD with momentum and gradient clipping (Adam would turn the gradients
    # that are zero up to rounding, behind dead ReLUs, into lr-sized steps of either sign)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    res["sr_loss"], res["sr_clip"] = [], []
    for _ in range(3):
        out = model(lr_img)
        loss = F.l1_loss(out, hr_img) + F.mse_loss(out, hr_img)
        opt.zero_grad()
        loss.backward()
        res["sr_clip"].append(nn.utils.clip_grad_norm_(model.parameters(), 0.4).item())
        nn.utils.clip_grad_value_(model.parameters(), 0.05)
        opt.step()
        res["sr_loss"].append(loss.item())
    inorm = model.res[1].body[2]
    res["running"] = [inorm.running_mean.clone(), inorm.running_var.clone()]
    res["tracked"] = [int(inorm.num_batches_tracked)]
    model.eval()
    with torch.no_grad():
        res["sr_eval"] = model(lr_img)
        res["psnr"] = 10 * torch.log10(4.0 / F.mse_loss(res["sr_eval"], hr_img))
    res["shape"] = [str(tuple(res["sr_eval"].shape))]

    # fast-neural-style's loader: a checkpoint without version metadata that still carries
    # running stats for instance norms that no longer track them is refused, then cleaned
    ckpt = {k: v.clone() for k, v in model.state_dict().items()}
    ckpt["res.0.body.2.running_mean"] = torch.zeros(8)
    ckpt["res.0.body.2.running_var"] = torch.ones(8)
    fresh = SRNet()
    try:
        fresh.load_state_dict(ckpt)
        res["ckpt_error"] = ["loaded"]
    except RuntimeError as error:
        res["ckpt_error"] = str(error).split("\n")
    for k in list(ckpt.keys()):
        if re.search(r"res\.0\.body\.\d+\.running_(mean|var)$", k):
            del ckpt[k]
    res["ckpt_keys"] = [str(fresh.load_state_dict(ckpt))]
    fresh.eval()
    with torch.no_grad():
        res["sr_reloaded"] = fresh(lr_img)

    # style transfer: optimise the image itself against a fixed random feature extractor
    feats = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(6, 6, 3, padding=1, stride=2), nn.ReLU())
    fill_(torch, feats, rng, 0.3)
    for p in feats.parameters():
        p.requires_grad_(False)

    def gram(x):
        b, c, h, w = x.size()
        f = x.view(b, c, h * w)
        return torch.bmm(f, f.transpose(1, 2)).div(c * h * w)

    def tv_loss(img):
        dh = torch.pow(img[:, :, 1:, :] - img[:, :, :-1, :], 2).sum()
        dw = torch.pow(img[:, :, :, 1:] - img[:, :, :, :-1], 2).sum()
        return (dh + dw) / img.numel()

    content = normal(torch, rng, 1, 3, 10, 10).clamp(-1, 1)
    style = normal(torch, rng, 1, 3, 10, 10).clamp(-1, 1)
    target_c = feats(content).detach()
    target_s = gram(feats[:2](style)).detach(), gram(feats(style)).detach()
    img = content.clone().requires_grad_(True)
    lbfgs = torch.optim.LBFGS([img], lr=0.5, max_iter=4, history_size=5)

    def style_loss():
        f1 = feats[:2](img)
        f2 = feats[2:](f1)
        s = F.mse_loss(gram(f1), target_s[0]) + F.mse_loss(gram(f2), target_s[1])
        return F.mse_loss(f2, target_c) + 10 * s + 0.1 * tv_loss(img)

    res["style_loss"] = []
    for _ in range(2):
        def closure():
            with torch.no_grad():
                img.clamp_(-1, 1)
            lbfgs.zero_grad()
            loss = style_loss()
            loss.backward()
            return loss
        res["style_loss"].append(lbfgs.step(closure).item())
    with torch.no_grad():
        img.clamp_(-1, 1)
    img2 = content.clone().requires_grad_()
    adam = torch.optim.Adam([img2], lr=0.05)
    for _ in range(3):
        adam.zero_grad()
        loss = F.mse_loss(feats(img2), target_c) + tv_loss(img2)
        loss.backward()
        adam.step()
        with torch.no_grad():
            img2.data.clamp_(min=-1, max=1)
        res["style_loss"].append(loss.item())
    res["images"] = [img.detach(), img2.detach()]
    return res


def optical_flow_program(torch):
    """Photometric warping loss with grid_sample, correlation volume, SSIM, smoothness."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(23)
    res = {}
    b, h, w = 2, 8, 10
    img1 = normal(torch, rng, b, 3, h, w).sigmoid()
    img2 = torch.roll(img1, shifts=(1, -1), dims=(2, 3)) * 0.9 + 0.05

    def warp(x, flow, padding_mode, align_corners):
        n, _, hh, ww = x.shape
        ys, xs = torch.meshgrid(torch.arange(hh), torch.arange(ww), indexing="ij")
        grid = torch.stack((xs, ys), 0).float().unsqueeze(0).repeat(n, 1, 1, 1)
        vgrid = grid + flow
        vx = 2.0 * vgrid[:, 0] / max(ww - 1, 1) - 1.0
        vy = 2.0 * vgrid[:, 1] / max(hh - 1, 1) - 1.0
        vgrid = torch.stack((vx, vy), dim=3)
        out = F.grid_sample(x, vgrid, mode="bilinear", padding_mode=padding_mode,
                            align_corners=align_corners)
        mask = F.grid_sample(torch.ones_like(x), vgrid, align_corners=align_corners)
        return out, (mask > 0.999).float()

    def correlation(f1, f2, max_disp=2):
        f2p = F.pad(f2, [max_disp] * 4)
        hh, ww = f1.shape[-2:]
        vols = []
        for dy in range(2 * max_disp + 1):
            for dx in range(2 * max_disp + 1):
                vols.append((f1 * f2p[:, :, dy:dy + hh, dx:dx + ww]).mean(1, keepdim=True))
        return torch.cat(vols, 1)

    def correlation_unfold(f1, f2, k=3):
        n, c, hh, ww = f1.shape
        patches = F.unfold(f2, kernel_size=k, padding=k // 2).view(n, c, k * k, hh, ww)
        return (f1.unsqueeze(2) * patches).sum(1) / c

    def ssim(x, y):
        c1, c2 = 0.01 ** 2, 0.03 ** 2
        x, y = nn.ReflectionPad2d(1)(x), nn.ReflectionPad2d(1)(y)
        mu_x, mu_y = F.avg_pool2d(x, 3, 1), F.avg_pool2d(y, 3, 1)
        sigma_x = F.avg_pool2d(x ** 2, 3, 1) - mu_x ** 2
        sigma_y = F.avg_pool2d(y ** 2, 3, 1) - mu_y ** 2
        sigma_xy = F.avg_pool2d(x * y, 3, 1) - mu_x * mu_y
        n = (2 * mu_x * mu_y + c1) * (2 * sigma_xy + c2)
        d = (mu_x ** 2 + mu_y ** 2 + c1) * (sigma_x + sigma_y + c2)
        return torch.clamp((1 - n / d) / 2, 0, 1)

    def smoothness(disp, img):
        grad_disp_x = torch.abs(torch.diff(disp, dim=3))
        grad_disp_y = torch.abs(torch.diff(disp, dim=2))
        grad_img_x = torch.mean(torch.abs(torch.diff(img, dim=3)), 1, keepdim=True)
        grad_img_y = torch.mean(torch.abs(torch.diff(img, dim=2)), 1, keepdim=True)
        grad_disp_x = grad_disp_x * torch.exp(-grad_img_x)
        grad_disp_y = grad_disp_y * torch.exp(-grad_img_y)
        return grad_disp_x.mean() + grad_disp_y.mean()

    class FlowNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.LeakyReLU(0.1))
            self.dec = nn.Sequential(nn.Conv2d(25 + 9 + 6, 8, 3, padding=1), nn.LeakyReLU(0.1),
                                     nn.Conv2d(8, 2, 3, padding=1))
            self.disp = nn.Conv2d(8, 1, 3, padding=1, padding_mode="replicate")

        def forward(self, a, b):
            fa, fb = self.enc(a), self.enc(b)
            corr = F.leaky_relu(correlation(fa, fb), 0.1)
            corr2 = correlation_unfold(fa, fb)
            x = torch.cat([corr, corr2, fa], 1)
            hid = self.dec[1](self.dec[0](x))
            return self.dec[2](hid), torch.sigmoid(self.disp(hid)) * 10 + 0.1

    model = FlowNet()
    fill_(torch, model, rng, 0.2)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    res["loss"] = []
    for step in range(3):
        flow, disp = model(img1, img2)
        modes = [("border", True), ("zeros", False), ("reflection", True)]
        pad, ac = modes[step]
        warped, valid = warp(img2, flow, pad, ac)
        photo = 0.85 * ssim(warped, img1).mean(1, keepdim=True) + \
            0.15 * (warped - img1).abs().mean(1, keepdim=True)
        photo = (photo * valid).sum() / valid.sum().clamp(min=1)
        # multi-scale: pooled pyramids
        ms = 0.0
        for s in (2, 4):
            ms = ms + F.l1_loss(F.avg_pool2d(warped, s, ceil_mode=True),
                                F.avg_pool2d(img1, s, ceil_mode=True))
        loss = photo + 0.1 * smoothness(disp, img1) + 0.5 * ms
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["flow"] = flow.detach()
    res["grad_norm"] = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    pooled, idx = F.max_pool2d(img1, 2, stride=2, return_indices=True)
    res["unpool"] = F.max_unpool2d(pooled, idx, 2, stride=2, output_size=img1.shape[-2:])
    res["unpool_idx"] = idx
    res["avg_incl"] = [F.avg_pool2d(img1, 3, 2, padding=1, count_include_pad=True),
                       F.avg_pool2d(img1, 3, 2, padding=1, count_include_pad=False),
                       F.avg_pool2d(img1, 3, 2, padding=1, divisor_override=4)]
    grid = normal(torch, rng, b, 5, 6, 2) * 0.8
    x = img1.clone().requires_grad_()
    outs = []
    for mode in ("bilinear", "nearest", "bicubic"):
        for pad in ("zeros", "border", "reflection"):
            for ac in (True, False):
                outs.append(F.grid_sample(x, grid, mode=mode, padding_mode=pad,
                                          align_corners=ac))
    torch.stack(outs).pow(2).sum().backward()
    res["grid_modes"] = torch.stack(outs).detach()
    res["grid_grad"] = x.grad
    theta = torch.tensor([[[0.9, 0.1, 0.05], [-0.1, 1.1, 0.0]]]).repeat(b, 1, 1)
    res["affine"] = F.grid_sample(img1, F.affine_grid(theta, img1.shape, align_corners=False),
                                  align_corners=False)
    return res


def video_program(torch):
    """Factorised (2+1)-D conv net with temporal shift, channels_last_3d, mixup, smoothing."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(24)
    res = {}
    num_classes = 5

    def temporal_shift(x, n_segment, fold_div=4):
        nt, c, h, w = x.size()
        n_batch = nt // n_segment
        x = x.view(n_batch, n_segment, c, h, w)
        fold = c // fold_div
        out = torch.zeros_like(x)
        out[:, :-1, :fold] = x[:, 1:, :fold]
        out[:, 1:, fold:2 * fold] = x[:, :-1, fold:2 * fold]
        out[:, :, 2 * fold:] = x[:, :, 2 * fold:]
        return out.view(nt, c, h, w)

    def temporal_shift_roll(x, fold_div=4):
        c = x.size(1)
        fold = c // fold_div
        return torch.cat([torch.roll(x[:, :fold], 1, dims=2),
                          torch.roll(x[:, fold:2 * fold], -1, dims=2), x[:, 2 * fold:]], dim=1)

    class R2Plus1D(nn.Module):
        def __init__(self, cin, cout, mid):
            super().__init__()
            self.spatial = nn.Conv3d(cin, mid, (1, 3, 3), padding=(0, 1, 1), bias=False)
            self.bn1 = nn.BatchNorm3d(mid)
            self.temporal = nn.Conv3d(mid, cout, (3, 1, 1), padding=(1, 0, 0), bias=False)
            self.bn2 = nn.BatchNorm3d(cout)

        def forward(self, x):
            x = F.relu(self.bn1(self.spatial(x)), inplace=True)
            return F.relu(self.bn2(self.temporal(x)))

    class VideoNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = R2Plus1D(3, 8, 6)
            self.pool = nn.MaxPool3d(kernel_size=(1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1),
                                     ceil_mode=True)
            self.block = R2Plus1D(8, 8, 8)
            self.pool2 = nn.MaxPool3d(2, ceil_mode=True)
            self.gap = nn.AdaptiveAvgPool3d((1, 1, 1))
            self.fc = nn.Linear(8, num_classes)

        def forward(self, x):
            x = self.pool(self.stem(x))
            x = temporal_shift_roll(x)
            x = self.pool2(x + self.block(x))
            return self.fc(torch.flatten(self.gap(x), 1))

    model = VideoNet()
    fill_(torch, model, rng, 0.3)
    model = model.to(memory_format=torch.channels_last_3d)
    clips = normal(torch, rng, 4, 3, 5, 9, 9).contiguous(memory_format=torch.channels_last_3d)
    res["cl"] = [clips.is_contiguous(memory_format=torch.channels_last_3d),
                 model.stem.spatial.weight.is_contiguous(memory_format=torch.channels_last_3d),
                 clips.is_contiguous()]
    res["strides"] = [str(clips.stride()), str(model.stem.spatial.weight.stride())]
    labels = torch.tensor([0, 3, 1, 4])
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    torch.manual_seed(0)
    beta = torch.distributions.Beta(torch.tensor([0.4]), torch.tensor([0.4]))
    lam_sample = beta.sample()
    res["beta_meta"] = [_name(lam_sample.dtype), str(tuple(lam_sample.shape)),
                        str(tuple(beta.batch_shape))]
    res["beta_logprob"] = beta.log_prob(torch.tensor([0.1, 0.5, 0.9]).unsqueeze(-1))
    res["beta_stats"] = [beta.mean, beta.variance, beta.entropy()]
    lams = [0.7, 0.35, 0.9]
    perms = [torch.tensor([2, 0, 3, 1]), torch.tensor([1, 2, 3, 0]), torch.tensor([3, 2, 1, 0])]
    res["loss"] = []
    for lam, perm in zip(lams, perms):
        mixed = lam * clips + (1 - lam) * clips[perm]
        out = model(mixed)
        loss = lam * F.cross_entropy(out, labels, label_smoothing=0.1) + \
            (1 - lam) * F.cross_entropy(out, labels[perm], label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["out_cl"] = [out.is_contiguous(), str(tuple(out.shape))]
    soft = F.one_hot(labels, num_classes).float() * 0.9 + 0.1 / num_classes
    res["soft_ce"] = F.cross_entropy(out, soft)
    res["bn"] = [model.stem.bn1.running_mean, model.stem.bn1.running_var,
                 model.block.bn2.running_var]
    res["tracked"] = [int(model.block.bn2.num_batches_tracked)]
    model.eval()
    with torch.no_grad():
        feats = model.pool(model.stem(clips))
        res["pool_shape"] = [str(tuple(feats.shape)),
                             str(tuple(model.pool2(feats).shape))]
        res["eval"] = model(clips).softmax(-1)
        x2d = feats.transpose(1, 2).reshape(-1, *feats.shape[1:2], *feats.shape[3:])
        res["tsm"] = temporal_shift(x2d, n_segment=feats.shape[2])
        res["tsm_roll"] = temporal_shift_roll(feats)
        res["adaptive"] = F.adaptive_avg_pool3d(feats, (2, 3, 2))
        res["adaptive_max"] = F.adaptive_max_pool3d(feats, (1, 2, 2))
    idx = torch.randperm(8)
    res["perm"] = [sorted(idx.tolist()) == list(range(8)), _name(idx.dtype)]
    res["params"] = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return res


def keypoint_program(torch):
    """Heatmap regression: Gaussian targets, soft-argmax, OHEM, fold, AdamW + OneCycleLR."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(25)
    res = {}
    num_joints, hm = 3, 12

    def gaussian_heatmaps(coords, size, sigma=1.5):
        xs = torch.arange(size, dtype=torch.float32)
        ys = torch.arange(size, dtype=torch.float32)[:, None]
        x0, y0 = coords[..., 0, None, None], coords[..., 1, None, None]
        return torch.exp(-((xs - x0) ** 2 + (ys - y0) ** 2) / (2 * sigma ** 2))

    def soft_argmax(heatmaps, beta=10.0):
        n, k, h, w = heatmaps.shape
        probs = F.softmax(beta * heatmaps.reshape(n, k, -1), dim=-1).view(n, k, h, w)
        gx, gy = torch.meshgrid(torch.linspace(0, w - 1, w), torch.linspace(0, h - 1, h),
                                indexing="xy")
        gy2, gx2 = torch.meshgrid(torch.linspace(0, h - 1, h), torch.linspace(0, w - 1, w),
                                  indexing="ij")
        assert bool(torch.equal(gx, gx2)) and bool(torch.equal(gy, gy2))
        x = (probs * gx).sum(dim=(-2, -1))
        y = (probs * gy).sum(dim=(-2, -1))
        return torch.stack([x, y], dim=-1)

    class PatchNet(nn.Module):
        """Process overlapping patches and reassemble with F.fold."""

        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False),
                                      nn.BatchNorm2d(8),
                                      nn.ReLU(), nn.Conv2d(8, 8, 3, padding=2, dilation=2),
                                      nn.ReLU())
            self.patch = nn.Linear(8 * 16, 8 * 16)
            self.out = nn.Conv2d(8, num_joints, 1)

        def forward(self, x):
            f = self.body(x)
            n, c, h, w = f.shape
            cols = F.unfold(f, kernel_size=4, stride=2, padding=1)
            cols = self.patch(cols.transpose(1, 2)).transpose(1, 2)
            folded = F.fold(cols, output_size=(h, w), kernel_size=4, stride=2, padding=1)
            norm = F.fold(torch.ones_like(cols), output_size=(h, w), kernel_size=4, stride=2,
                          padding=1)
            return self.out(folded / norm)

    model = PatchNet()
    fill_(torch, model, rng, 0.25)
    images = normal(torch, rng, 2, 3, hm, hm)
    coords = torch.from_numpy(rng.uniform(2, hm - 3, (2, num_joints, 2)).astype(np.float32))
    target = gaussian_heatmaps(coords, hm)
    vis = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
    res["target"] = target
    steps = 5
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 or name.endswith(".bias") else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": no_decay, "weight_decay": 0.0}], lr=1e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=steps,
                                                pct_start=0.3, anneal_strategy="cos",
                                                div_factor=10.0, final_div_factor=100.0)
    res["loss"], res["lr"], res["mom"] = [], [], []
    for _ in range(steps):
        pred = model(images)
        per_pixel = F.mse_loss(pred, target, reduction="none") * vis[..., None, None]
        per_joint = per_pixel.flatten(2).mean(-1)
        topk_val, topk_idx = torch.topk(per_pixel.flatten(), k=50, largest=True, sorted=True)
        ohem = topk_val.mean()
        coord_loss = F.smooth_l1_loss(soft_argmax(pred) * vis[..., None],
                                      coords * vis[..., None], beta=1.0)
        loss = per_joint.sum(1).mean() + ohem + 0.01 * coord_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["loss"].append(loss.item())
        res["lr"].append(sched.get_last_lr()[0])
        res["mom"].append(opt.param_groups[0]["betas"][0])
    res["topk_idx"] = topk_idx
    model.eval()
    flip_pairs = [(0, 1)]
    with torch.no_grad():
        out = model(images)
        flipped = model(torch.flip(images, dims=[3]))
        flipped = torch.flip(flipped, [3])
        for a, b in flip_pairs:
            flipped[:, [a, b]] = flipped[:, [b, a]]
        avg = (out + flipped) * 0.5
        res["flip_avg"] = avg
        res["soft_argmax"] = soft_argmax(avg)
        maxvals, idx = torch.max(avg.reshape(2, num_joints, -1), dim=2)
        preds = torch.stack([idx % hm, torch.div(idx, hm, rounding_mode="floor")], -1)
        res["hard_argmax"] = preds
        res["meta"] = [_name(preds.dtype), _name(maxvals.dtype)]
        res["pck"] = ((res["soft_argmax"] - coords).norm(dim=-1) < 2.0).float().mean()
    res["params"] = torch.cat([p.detach().flatten() for p in model.parameters()])
    return res


PROGRAMS = [segmentation_program, super_resolution_program, optical_flow_program,
            video_program, keypoint_program]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    assert_same_results(program(ember), program(torch), rtol=2e-4, atol=2e-5)


# --- what the programs found ----------------------------------------------------------------

def _stale_instance_norm_load(lib, strict, metadata):
    nn = lib.nn
    model = nn.Sequential(nn.Conv2d(3, 3, 1), nn.InstanceNorm2d(3, affine=True))
    state = model.state_dict() if metadata else dict(model.state_dict())
    state["1.running_mean"] = lib.zeros(3)
    state["1.running_var"] = lib.ones(3)
    state["1.num_batches_tracked"] = lib.tensor(0)
    keys = model.load_state_dict(state, strict=strict)
    return sorted(keys.missing_keys), sorted(keys.unexpected_keys)


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("metadata", [True, False], ids=["versioned", "pre_0_4"])
def test_instance_norm_refuses_stale_running_stats_like_torch(strict, metadata):
    # without version metadata the untracked running stats get an error of their own (even
    # with strict=False) and are not listed as unexpected keys; a versioned state dict lists
    # them as ordinary unexpected keys
    def run(lib):
        return recorded(_stale_instance_norm_load, lib, strict, metadata)
    assert run(ember) == run(torch)


@pytest.mark.parametrize("grid_shape", [(2, 5, 6, 1), (3, 5, 6, 2)])
def test_grid_sample_warns_about_align_corners_before_checking_shapes(grid_shape):
    def run(lib):
        x, grid = lib.zeros(2, 3, 4, 4), lib.zeros(*grid_shape)
        return recorded(lib.nn.functional.grid_sample, x, grid)
    assert run(ember) == run(torch)
