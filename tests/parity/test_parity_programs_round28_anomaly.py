"""Anomaly detectors written as their reference repositories write them in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights and data: Deep SVDD
(lukasruff's one-class and soft-boundary objectives: a bias-free LeNet with affine-free
BatchNorm, the centre from a no_grad first pass nudged away from zero by masked writes, the
radius updated from a quantile of the distances into ``R.data``), PatchCore (anomalib /
patchcore-inspection: forward hooks on two stages, 3x3 avg-pool neighbourhoods, upsampled and
concatenated embeddings, greedy k-center coreset by norm/minimum/argmax, kNN by cdist + topk,
the anomaly map upsampled and blurred by a Gaussian conv2d with reflect padding) and
FastFlow/CFlow-style 2-D normalising flows (affine couplings with tanh/atan-clamped log-scales,
LayerNorm over (C, H, W), log-likelihood and LogSigmoid of the per-dimension log-density)."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _lenet(torch, rep_dim):
    """Deep-SVDD's MNIST_LeNet: bias-free convs and linear, BatchNorm2d(eps=1e-4, affine=False),
    leaky ReLU and 2x2 max-pooling."""
    nn, F = torch.nn, torch.nn.functional

    class LeNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.rep_dim = rep_dim
            self.pool = nn.MaxPool2d(2, 2)
            self.conv1 = nn.Conv2d(1, 4, 5, bias=False, padding=2)
            self.bn1 = nn.BatchNorm2d(4, eps=1e-04, affine=False)
            self.conv2 = nn.Conv2d(4, 6, 5, bias=False, padding=2)
            self.bn2 = nn.BatchNorm2d(6, eps=1e-04, affine=False)
            self.fc1 = nn.Linear(6 * 3 * 3, self.rep_dim, bias=False)

        def forward(self, x):
            x = self.pool(F.leaky_relu(self.bn1(self.conv1(x))))
            x = self.pool(F.leaky_relu(self.bn2(self.conv2(x))))
            x = x.view(x.size(0), -1)
            return self.fc1(x)
    return LeNet()


def deep_svdd_program(torch):
    """Deep SVDD as lukasruff's trainer runs it: centre c from a no_grad pass over two batches,
    entries within eps of zero pushed to +-eps by masked assignment; one-class and soft-boundary
    losses with Adam(amsgrad) + MultiStepLR; after a warm-up epoch the radius R is set from the
    (1 - nu) quantile of sqrt(dist) into ``R.data``; test scores with no_grad."""
    rng = np.random.default_rng(2811)
    rep_dim, nu, eps = 8, 0.1, 0.1
    batches = [normal(torch, rng, 6, 1, 12, 12) for _ in range(2)]
    res = {}
    for objective in ["one-class", "soft-boundary"]:
        net = _lenet(torch, rep_dim)
        fill_(torch, net, rng, 0.3)
        n_samples = 0
        c = torch.zeros(net.rep_dim)
        net.eval()
        with torch.no_grad():
            for inputs in batches:
                outputs = net(inputs)
                n_samples += outputs.shape[0]
                c += torch.sum(outputs, dim=0)
        c /= n_samples
        c[(abs(c) < eps) & (c < 0)] = -eps
        c[(abs(c) < eps) & (c > 0)] = eps
        R = torch.tensor(0.0)
        opt = torch.optim.Adam(net.parameters(), lr=1e-3, weight_decay=1e-6, amsgrad=True)
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[2], gamma=0.1)
        net.train()
        losses, radii = [], []
        for epoch in range(3):
            loss_epoch = 0.0
            for inputs in batches:
                opt.zero_grad()
                outputs = net(inputs)
                dist = torch.sum((outputs - c) ** 2, dim=1)
                if objective == "soft-boundary":
                    scores = dist - R ** 2
                    loss = R ** 2 + (1 / nu) * torch.mean(torch.max(torch.zeros_like(scores),
                                                                    scores))
                else:
                    loss = torch.mean(dist)
                loss.backward()
                opt.step()
                if objective == "soft-boundary" and epoch >= 1:
                    R.data = torch.tensor(np.quantile(np.sqrt(dist.clone().data.cpu().numpy()),
                                                      1 - nu))
                    radii.append(torch.quantile(dist.detach().sqrt(), 1 - nu))
                loss_epoch += loss.item()
            sched.step()
            losses.append(loss_epoch / len(batches))
        net.eval()
        with torch.no_grad():
            outputs = net(batches[0] * 1.5)
            dist = torch.sum((outputs - c) ** 2, dim=1)
            scores = dist - R ** 2 if objective == "soft-boundary" else dist
        res[objective + "_c"] = c
        res[objective + "_losses"] = losses
        res[objective + "_R"] = [float(R)] + radii
        res[objective + "_scores"] = scores
        res[objective + "_params"] = list(net.parameters())
        res[objective + "_lr"] = [sched.get_last_lr()[0]]
        res[objective + "_nbt"] = [int(net.bn2.num_batches_tracked)]
        res[objective + "_no_affine"] = [net.bn1.weight is None, net.fc1.bias is None]
    return res


def _backbone(torch):
    """A small two-stage CNN standing in for WideResNet50's layer2/layer3."""
    nn = torch.nn

    class Backbone(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4),
                                      nn.ReLU(inplace=True))
            self.layer2 = nn.Sequential(nn.Conv2d(4, 6, 3, stride=2, padding=1), nn.ReLU())
            self.layer3 = nn.Sequential(nn.Conv2d(6, 8, 3, stride=2, padding=1), nn.ReLU())
            self.layer4 = nn.Sequential(nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU())

        def forward(self, x):
            return self.layer4(self.layer3(self.layer2(self.stem(x))))
    return Backbone()


def _gaussian_blur(torch, x, sigma):
    """kornia's GaussianBlur2d as anomalib applies it: a separable normalised kernel, reflect
    padding, a depthwise conv2d."""
    F = torch.nn.functional
    ksize = 2 * int(4.0 * sigma + 0.5) + 1
    xs = torch.arange(ksize, dtype=torch.float32) - ksize // 2
    g = torch.exp(-(xs ** 2.0) / (2 * sigma ** 2))
    g = g / g.sum()
    kernel = torch.matmul(g[:, None], g[None, :])
    c = x.shape[1]
    kernel = kernel.expand(c, 1, ksize, ksize)
    pad = ksize // 2
    x = F.pad(x, [pad, pad, pad, pad], mode="reflect")
    return F.conv2d(x, kernel, groups=c, padding=0, stride=1)


def patchcore_program(torch):
    """PatchCore: features gathered by forward hooks (the last one raises to stop the forward, as
    patchcore-inspection does), AvgPool2d(3, 1, 1) neighbourhoods, layer3 upsampled to layer2's
    size and concatenated, rows permuted to (N*H*W, C); a random projection given from NumPy,
    the greedy k-center coreset; test patches scored by cdist + topk(largest=False), the
    anomalib re-weighting by a softmax over the nearest memory rows' neighbours, the anomaly map
    upsampled bilinearly and blurred; the image score is the max patch score."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2812)
    net = _backbone(torch)
    fill_(torch, net, rng, 0.4)
    net.eval()
    features = {}

    class Stop(Exception):
        pass

    def hook_for(name, last):
        def hook(module, inputs, output):
            features[name] = output
            if last:
                raise Stop()
        return hook

    handles = [net.layer2.register_forward_hook(hook_for("layer2", False)),
               net.layer3.register_forward_hook(hook_for("layer3", True))]
    pooler = nn.AvgPool2d(3, 1, 1)

    def embed(images):
        features.clear()
        try:
            net(images)
        except Stop:
            pass
        f2, f3 = [pooler(features[k]) for k in ("layer2", "layer3")]
        f3 = F.interpolate(f3, size=f2.shape[-2:], mode="bilinear", align_corners=False)
        emb = torch.cat([f2, f3], dim=1)
        n, c, h, w = emb.shape
        return emb.permute(0, 2, 3, 1).reshape(-1, c), (n, h, w)

    res = {}
    with torch.no_grad():
        train, _ = embed(normal(torch, rng, 3, 3, 16, 16))
        proj = torch.from_numpy(rng.standard_normal((14, 6)).astype(np.float32) / math.sqrt(6))
        reduced = train @ proj
        n_coreset = 12
        selected = [0]
        min_distances = torch.linalg.norm(reduced - reduced[0:1], dim=1, keepdims=True)
        for _ in range(n_coreset - 1):
            idx = int(torch.argmax(min_distances).item())
            selected.append(idx)
            distance = torch.linalg.norm(reduced - reduced[idx:idx + 1], dim=1, keepdims=True)
            min_distances = torch.minimum(distance, min_distances)
        memory_bank = train[torch.tensor(selected)]
        res["selected"] = selected
        res["memory_bank"] = memory_bank

        test_images = normal(torch, rng, 2, 3, 16, 16)
        test_images[1, :, 4:8, 4:8] += 3.0
        emb, (n, h, w) = embed(test_images)
        distances = torch.cdist(emb, memory_bank, p=2.0)
        patch_scores, locations = distances.topk(k=1, largest=False, dim=1)
        patch_scores = patch_scores.squeeze(1).reshape(n, -1)
        locations = locations.squeeze(1).reshape(n, -1)
        res["patch_scores"], res["locations"] = patch_scores, locations.flatten().tolist()
        max_idx = torch.argmax(patch_scores, dim=1)
        max_patches = emb.reshape(n, -1, emb.shape[-1])[torch.arange(n), max_idx]
        score = patch_scores[torch.arange(n), max_idx]
        nn_index = locations[torch.arange(n), max_idx]
        nn_sample = memory_bank[nn_index, :]
        mem_dist = torch.cdist(nn_sample, memory_bank)
        _, support = mem_dist.topk(k=3, largest=False, dim=1)
        d = torch.cdist(max_patches.unsqueeze(1), memory_bank[support]).squeeze(1)
        weights = (1 - F.softmax(d, 1))[..., 0]
        res["image_scores"] = weights * score
        amap = patch_scores.reshape(n, 1, h, w)
        amap = F.interpolate(amap, size=(16, 16), mode="bilinear", align_corners=False)
        res["anomaly_map"] = _gaussian_blur(torch, amap, sigma=1.0)
        res["cdist_mm"] = torch.cdist(emb[:5], memory_bank,
                                      compute_mode="use_mm_for_euclid_dist")
        res["cdist_p1"] = torch.cdist(emb[:5], memory_bank, p=1.0)
    for hnd in handles:
        hnd.remove()
    res["hooks_left"] = [len(net.layer2._forward_hooks), len(net.layer3._forward_hooks)]
    return res


def _subnet(torch, c_in, c_out, k):
    """FastFlow's subnet_conv_func: conv-ReLU-conv with 'same' padding."""
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(c_in, c_in, k, padding="same"), nn.ReLU(),
                         nn.Conv2d(c_in, c_out, k, padding="same"))


def fastflow_program(torch):
    """A FastFlow-style 2-D flow over (C, H, W) features: LayerNorm([C, H, W]), affine couplings
    on channel halves with log-scales clamped by 0.636 * clamp * atan(s / clamp) (FrEIA's
    AllInOneBlock) and by clamp * tanh(s / clamp) (CFlow), a fixed channel permutation between
    blocks, loss = mean(0.5 * sum z^2 - log|det J|), Adam with gradient clipping; the anomaly
    map is -exp(-0.5 * mean z^2) upsampled; CFlow's log-likelihood through LogSigmoid."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2813)
    C, H, W, B, clamp = 4, 6, 6, 3, 2.0

    class Coupling(nn.Module):
        def __init__(self, kind, perm):
            super().__init__()
            self.kind = kind
            self.net = _subnet(torch, C // 2, C, 3 if kind == "atan" else 1)
            self.register_buffer("perm", torch.from_numpy(perm))
            self.register_buffer("perm_inv", torch.from_numpy(np.argsort(perm)))

        def forward(self, x):
            x1, x2 = torch.chunk(x, 2, dim=1)
            a = self.net(x1)
            s, t = a[:, 0::2], a[:, 1::2]
            if self.kind == "atan":
                s = clamp * 0.636 * torch.atan(s / clamp)
            else:
                s = clamp * torch.tanh(s / clamp)
            y2 = x2 * torch.exp(s) + t
            out = torch.cat((x1, y2), 1)[:, self.perm]
            return out, torch.sum(s, dim=(1, 2, 3))

        def inverse(self, y):
            y = y[:, self.perm_inv]
            y1, y2 = torch.chunk(y, 2, dim=1)
            a = self.net(y1)
            s, t = a[:, 0::2], a[:, 1::2]
            if self.kind == "atan":
                s = clamp * 0.636 * torch.atan(s / clamp)
            else:
                s = clamp * torch.tanh(s / clamp)
            return torch.cat((y1, (y2 - t) * torch.exp(-s)), 1)

    perms = [np.array([2, 0, 3, 1]), np.array([1, 3, 0, 2]), np.array([3, 2, 1, 0])]
    norm = nn.LayerNorm([C, H, W], elementwise_affine=True)
    blocks = nn.ModuleList([Coupling(k, p) for k, p in zip(["atan", "tanh", "atan"], perms)])
    fill_(torch, blocks, rng, 0.2)
    params = list(norm.parameters()) + list(blocks.parameters())
    opt = torch.optim.Adam(params, lr=1e-3, eps=1e-4, weight_decay=1e-5)
    feats = normal(torch, rng, B, C, H, W)

    def flow(x):
        z, log_jac = norm(x), torch.zeros(x.shape[0])
        for blk in blocks:
            z, lj = blk(z)
            log_jac = log_jac + lj
        return z, log_jac

    res = {"losses": []}
    for _ in range(3):
        opt.zero_grad()
        z, log_jac = flow(feats)
        loss = torch.mean(0.5 * torch.sum(z ** 2, dim=(1, 2, 3)) - log_jac)
        loss.backward()
        nn.utils.clip_grad_norm_(params, max_norm=0.5, error_if_nonfinite=True)
        opt.step()
        res["losses"].append(loss.item())
    res["params"] = params
    with torch.no_grad():
        z, log_jac = flow(feats)
        back = z
        for blk in reversed(blocks):
            back = blk.inverse(back)
        res["inverse_err_small"] = [bool((back - norm(feats)).abs().max() < 1e-4)]
        log_prob = -torch.mean(z ** 2, dim=1, keepdim=True) * 0.5
        prob = torch.exp(log_prob)
        res["anomaly_map"] = F.interpolate(-prob, size=[12, 12], mode="bilinear",
                                           align_corners=False)
        gconst = -0.9189385332046727
        dim = C
        logp = dim * gconst - 0.5 * torch.sum(z ** 2, 1) + log_jac[:, None, None] / (H * W)
        log_theta = nn.LogSigmoid()
        res["cflow_loss"] = -log_theta(logp / dim).mean()
        test_prob = logp - logp.max()
        res["cflow_score"] = test_prob.exp().max() - test_prob.exp()
    return res


PROGRAMS = [deep_svdd_program, patchcore_program, fastflow_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 conv / batch-norm / cdist accumulation order over a few Adam steps
        "deep_svdd_program": (1e-4, 1e-5),
        "patchcore_program": (1e-4, 1e-5),
        "fastflow_program": (1e-4, 1e-5),
    })
