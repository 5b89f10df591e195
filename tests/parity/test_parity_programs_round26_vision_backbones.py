"""Modern vision backbones written as timm, ConvNeXt and the detection repositories write them in
torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy data:
ConvNeXt blocks (a channels_first LayerNorm by hand, depthwise 7x7, LayerScale gamma, DropPath
with a fixed keep mask and in eval), trunc_normal_ init ranges, ViT position-embedding
interpolation (bicubic, align_corners=False, with and without antialias), an FPN top-down
path by nearest upsampling, deformable convolution by bilinear sampling with grid_sample and
RoIAlign by grid_sample and by hand."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def convnext_program(torch):
    """ConvNeXt: stem conv 4x4/4 + LayerNorm(channels_first) by hand (mean, pow(2).mean, sqrt,
    weight[:, None, None]), blocks of dwconv 7x7, permute to channels_last, nn.LayerNorm,
    pwconv Linear, GELU, LayerScale gamma, DropPath by a fixed keep mask divided by keep_prob
    (and identity in eval), downsampling, head on global mean; AdamW with a param-group
    no-weight-decay split as timm's, and a cosine schedule with warmup by LambdaLR."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2621)

    class LayerNorm(nn.Module):
        def __init__(self, normalized_shape, eps=1e-6, data_format="channels_last"):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(normalized_shape))
            self.bias = nn.Parameter(torch.zeros(normalized_shape))
            self.eps, self.data_format = eps, data_format
            self.normalized_shape = (normalized_shape, )

        def forward(self, x):
            if self.data_format == "channels_last":
                return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
            u = x.mean(1, keepdim=True)
            s = (x - u).pow(2).mean(1, keepdim=True)
            x = (x - u) / torch.sqrt(s + self.eps)
            return self.weight[:, None, None] * x + self.bias[:, None, None]

    masks = iter([])

    def drop_path(x, drop_prob, training):
        if drop_prob == 0. or not training:
            return x
        keep_prob = 1 - drop_prob
        random_tensor = next(masks).to(x.dtype)
        if keep_prob > 0.0:
            random_tensor.div_(keep_prob)
        return x * random_tensor

    class DropPath(nn.Module):
        def __init__(self, drop_prob):
            super().__init__()
            self.drop_prob = drop_prob

        def forward(self, x):
            return drop_path(x, self.drop_prob, self.training)

        def extra_repr(self):
            return f"drop_prob={round(self.drop_prob, 3):0.3f}"

    class Block(nn.Module):
        def __init__(self, dim, drop_path=0., layer_scale_init_value=1e-6):
            super().__init__()
            self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
            self.norm = LayerNorm(dim, eps=1e-6)
            self.pwconv1, self.act = nn.Linear(dim, 4 * dim), nn.GELU()
            self.pwconv2 = nn.Linear(4 * dim, dim)
            self.gamma = nn.Parameter(layer_scale_init_value * torch.ones((dim)),
                                      requires_grad=True) if layer_scale_init_value > 0 else None
            self.drop_path = DropPath(drop_path) if drop_path > 0. else nn.Identity()

        def forward(self, x):
            input = x
            x = self.dwconv(x)
            x = x.permute(0, 2, 3, 1)
            x = self.act(self.pwconv1(self.norm(x)))
            x = self.pwconv2(x)
            if self.gamma is not None:
                x = self.gamma * x
            x = x.permute(0, 3, 1, 2)
            return input + self.drop_path(x)

    dims = [8, 12]
    dp_rates = [x.item() for x in torch.linspace(0, 0.3, 3)]
    model = nn.ModuleDict({
        "stem": nn.Sequential(nn.Conv2d(3, dims[0], kernel_size=4, stride=4),
                              LayerNorm(dims[0], eps=1e-6, data_format="channels_first")),
        "stage0": nn.Sequential(Block(dims[0], dp_rates[0]), Block(dims[0], dp_rates[1])),
        "down": nn.Sequential(LayerNorm(dims[0], eps=1e-6, data_format="channels_first"),
                              nn.Conv2d(dims[0], dims[1], kernel_size=2, stride=2)),
        "stage1": nn.Sequential(Block(dims[1], dp_rates[2], layer_scale_init_value=0.5)),
        "norm": nn.LayerNorm(dims[1], eps=1e-6), "head": nn.Linear(dims[1], 3)})

    def _init_weights(m):
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.trunc_normal_(m.weight, std=.02)
            nn.init.constant_(m.bias, 0)
    torch.manual_seed(0)
    model.apply(_init_weights)
    ws = [m.weight for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    res = {"trunc_in_range": [bool((w.abs() <= 2).all()) and 0.01 < w.std().item() < 0.03
                              for w in ws if w.numel() > 100],
           "repr_drop": [repr(m) for m in model.modules() if isinstance(m, DropPath)],
           "gamma_init": [model["stage0"][0].gamma, model["stage1"][0].gamma]}
    for name, p in model.named_parameters():
        if "gamma" not in name:
            fill_(torch, [p], rng, 0.3)

    def forward(x):
        x = model["stage0"](model["stem"](x))
        x = model["stage1"](model["down"](x))
        return model["head"](model["norm"](x.mean([-2, -1])))

    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if param.ndim <= 1 or name.endswith(".bias") or "gamma" in name:
            no_decay.append(param)
        else:
            decay.append(param)
    opt = torch.optim.AdamW([{"params": no_decay, "weight_decay": 0.},
                             {"params": decay, "weight_decay": 0.05}], lr=4e-3)
    warmup, total = 1, 4
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warmup if s < warmup else
        0.5 * (1 + math.cos(math.pi * (s - warmup) / (total - warmup))))
    x = normal(torch, rng, 2, 3, 16, 16)
    y = torch.from_numpy(rng.integers(0, 3, 2))
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    res["losses"], res["lrs"] = [], []
    for step in range(3):
        masks = iter([torch.from_numpy((rng.random((2, 1, 1, 1)) < 0.8).astype(np.float32))
                      for _ in range(3)])
        loss = criterion(forward(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
        res["lrs"].append(sched.get_last_lr()[0])
    model.eval()
    with torch.no_grad():
        res["eval_logits"] = forward(x)
    res["params"] = list(model.parameters())
    return res


def pos_embed_fpn_program(torch):
    """timm's resample_abs_pos_embed (class token split off, reshape to a grid, F.interpolate
    bicubic align_corners=False, with and without antialias, back to tokens) under autograd,
    and an FPN's top-down path (lateral 1x1 convs, F.interpolate nearest to the lateral's size
    and scale_factor=2, 3x3 output convs, extra P6 by max_pool2d(kernel 1, stride 2))."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2622)
    res = {}
    pe = nn.Parameter(normal(torch, rng, 1, 1 + 16, 6))
    for name, size, aa in [("up", (6, 5), False), ("up_aa", (6, 5), True),
                           ("down", (3, 3), False), ("down_aa", (3, 3), True)]:
        posemb_prefix, posemb = pe[:, :1], pe[:, 1:]
        embed_dim = posemb.shape[-1]
        posemb = posemb.reshape(1, 4, 4, -1).permute(0, 3, 1, 2)
        posemb = F.interpolate(posemb, size=size, mode="bicubic", antialias=aa,
                               align_corners=False)
        posemb = posemb.permute(0, 2, 3, 1).reshape(1, -1, embed_dim)
        out = torch.cat([posemb_prefix, posemb], dim=1)
        g, = torch.autograd.grad((out * torch.arange(out.numel()).view(out.shape).float()
                                  .sin()).sum(), pe)
        res[name] = [out, g]

    lateral = nn.ModuleList([nn.Conv2d(c, 8, 1) for c in (4, 6, 10)])
    output = nn.ModuleList([nn.Conv2d(8, 8, 3, padding=1) for _ in range(3)])
    fill_(torch, lateral, rng, 0.3)
    fill_(torch, output, rng, 0.2)
    feats = [normal(torch, rng, 2, 4, 11, 13), normal(torch, rng, 2, 6, 6, 7),
             normal(torch, rng, 2, 10, 3, 4)]
    last_inner = lateral[-1](feats[-1])
    results = [output[-1](last_inner)]
    for idx in range(len(feats) - 2, -1, -1):
        inner_lateral = lateral[idx](feats[idx])
        feat_shape = inner_lateral.shape[-2:]
        inner_top_down = F.interpolate(last_inner, size=feat_shape, mode="nearest")
        last_inner = inner_lateral + inner_top_down
        results.insert(0, output[idx](last_inner))
    results.append(F.max_pool2d(results[-1], 1, 2, 0))
    up2 = F.interpolate(results[2], scale_factor=2, mode="nearest")
    up2e = F.interpolate(results[2], scale_factor=1.7, mode="nearest-exact")
    loss = sum((r ** 2).mean() for r in results) + up2.sum() * 0.01 + up2e.mean()
    loss.backward()
    res["fpn"] = results + [up2, up2e]
    res["fpn_grads"] = [p.grad for p in list(lateral.parameters()) + list(output.parameters())]
    return res


def deformable_roi_program(torch):
    """Deformable convolution v2 by bilinear sampling: offsets and a sigmoid modulation mask
    from a conv initialised to zero as the reference does (then filled), sampling points
    p0 + pn + offset normalised to [-1, 1] for grid_sample(align_corners=True, zeros padding),
    gathered into columns and contracted with einsum; RoIAlign (aligned=True, sampling_ratio 2)
    by grid_sample(align_corners=False) on a per-RoI affine grid and by hand with floor/clamp
    bilinear weights; gradients to the features and the offsets."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2623)
    B, C, H, W, k, Co = 2, 3, 6, 7, 3, 4
    x = nn.Parameter(normal(torch, rng, B, C, H, W))
    p_conv = nn.Conv2d(C, 2 * k * k, 3, padding=1)
    m_conv = nn.Conv2d(C, k * k, 3, padding=1)
    nn.init.constant_(p_conv.weight, 0)
    res = {"zero_offsets": [bool(p_conv(x).abs().max() == p_conv.bias.abs().max())]}
    fill_(torch, p_conv, rng, 0.1)
    fill_(torch, m_conv, rng, 0.3)
    weight = nn.Parameter(normal(torch, rng, Co, C, k, k) * 0.3)

    offset = p_conv(x).view(B, k * k, 2, H, W)
    mask = torch.sigmoid(m_conv(x))
    pn_y, pn_x = torch.meshgrid(torch.arange(-(k - 1) // 2, (k - 1) // 2 + 1),
                                torch.arange(-(k - 1) // 2, (k - 1) // 2 + 1), indexing="ij")
    p0_y, p0_x = torch.meshgrid(torch.arange(H), torch.arange(W), indexing="ij")
    py = p0_y[None, None] + pn_y.reshape(1, -1, 1, 1) + offset[:, :, 0]
    px = p0_x[None, None] + pn_x.reshape(1, -1, 1, 1) + offset[:, :, 1]
    grid = torch.stack([px / (W - 1) * 2 - 1, py / (H - 1) * 2 - 1], -1)
    sampled = F.grid_sample(x, grid.view(B, k * k * H, W, 2), mode="bilinear",
                            padding_mode="zeros", align_corners=True).view(B, C, k * k, H, W)
    sampled = sampled * mask[:, None]
    out = torch.einsum("bcnhw,ocn->bohw", sampled, weight.flatten(2))
    (out.tanh().sum()).backward()
    res["deform"] = [out, x.grad, weight.grad, p_conv.weight.grad, m_conv.bias.grad]

    feat = normal(torch, rng, 1, 2, 8, 8).requires_grad_()
    rois = torch.tensor([[0, 0.5, 1.0, 5.5, 6.0], [0, 2.2, 0.3, 7.6, 3.9]])
    out_size, scale, ratio = 2, 1.0, 2

    def roi_align_grid(feat, rois):
        outs = []
        for r in rois:
            x1, y1, x2, y2 = (r[1:] * scale - 0.5).unbind()
            n = out_size * ratio
            ys = y1 + (torch.arange(n) + 0.5) * (y2 - y1) / n
            xs = x1 + (torch.arange(n) + 0.5) * (x2 - x1) / n
            gy, gx = torch.meshgrid(ys, xs, indexing="ij")
            g = torch.stack([(gx + 0.5) / feat.shape[-1] * 2 - 1,
                             (gy + 0.5) / feat.shape[-2] * 2 - 1], -1)[None]
            s = F.grid_sample(feat[r[0].long()][None], g, align_corners=False)
            outs.append(F.avg_pool2d(s, ratio))
        return torch.cat(outs)

    def roi_align_hand(feat, rois):
        outs = []
        Hf, Wf = feat.shape[-2:]
        for r in rois:
            x1, y1, x2, y2 = (r[1:] * scale - 0.5).tolist()
            n = out_size * ratio
            ys = y1 + (torch.arange(n, dtype=torch.float32) + 0.5) * (y2 - y1) / n
            xs = x1 + (torch.arange(n, dtype=torch.float32) + 0.5) * (x2 - x1) / n
            y0 = ys.floor().clamp(0, Hf - 1).long()
            x0 = xs.floor().clamp(0, Wf - 1).long()
            y1_, x1_ = (y0 + 1).clamp(max=Hf - 1), (x0 + 1).clamp(max=Wf - 1)
            ly, lx = (ys - y0).clamp(0, 1), (xs - x0).clamp(0, 1)
            f = feat[int(r[0])]
            v = (f[:, y0][:, :, x0] * ((1 - ly)[:, None] * (1 - lx)) +
                 f[:, y0][:, :, x1_] * ((1 - ly)[:, None] * lx) +
                 f[:, y1_][:, :, x0] * (ly[:, None] * (1 - lx)) +
                 f[:, y1_][:, :, x1_] * (ly[:, None] * lx))
            outs.append(v.unflatten(1, (out_size, ratio)).unflatten(3, (out_size, ratio))
                        .mean((2, 4)))
        return torch.stack(outs)

    a = roi_align_grid(feat, rois)
    b = roi_align_hand(feat, rois)
    g_a, = torch.autograd.grad(a.pow(2).sum(), feat)
    g_b, = torch.autograd.grad(b.pow(2).sum(), feat)
    res["roi"] = [a, b, g_a, g_b]
    res["roi_agree"] = [bool(torch.allclose(a, b, atol=1e-5))]
    return res


def channels_last_gradcam_ema_program(torch):
    """A channels_last classifier as timm trains it (model and input .to(memory_format=
    channels_last), the strides of every activation recorded), a ModelEmaV2 copy updated over
    state_dict values (num_batches_tracked included, truncated back to int64 by copy_), and
    Grad-CAM on the last conv by a forward hook and a full backward hook (with a backward
    pre-hook on the next module), the CAM upsampled bilinearly and min-max normalised."""
    import copy
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2624)
    model = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
                          nn.Conv2d(6, 8, 3, padding=1, groups=2), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3))
    fill_(torch, model, rng, 0.4)
    model = model.to(memory_format=torch.channels_last)
    ema = copy.deepcopy(model)
    for p in ema.parameters():
        p.requires_grad_(False)
    x = normal(torch, rng, 2, 3, 6, 7).contiguous(memory_format=torch.channels_last)
    y = torch.from_numpy(rng.integers(0, 3, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    res = {"losses": [], "strides": []}
    for step in range(3):
        h = x
        for layer in model:
            h = layer(h)
            if step == 0:
                res["strides"].append(str(h.stride()))
        loss = F.cross_entropy(h, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for ema_v, model_v in zip(ema.state_dict().values(), model.state_dict().values()):
                ema_v.copy_(ema_v * 0.9 + (1. - 0.9) * model_v)
        res["losses"].append(loss.item())
    res["ema_state"] = list(ema.state_dict().values())
    res["grad_strides"] = [str(p.grad.stride()) for p in model.parameters()]

    acts, grads, order = [], [], []
    target = model[3]

    def save_grad(module, grad_input, grad_output):
        grads.append(grad_output[0].detach())
        order.append(len(grad_input))

    handles = [target.register_forward_hook(lambda m, i, o: acts.append(o.detach())),
               target.register_full_backward_hook(save_grad),
               model[4].register_full_backward_pre_hook(lambda m, go: order.append(-1))]
    model.eval()
    xg = x.clone().requires_grad_()
    out = model(xg)
    model.zero_grad()
    out[torch.arange(2), out.argmax(1)].sum().backward()
    weights = grads[0].mean(dim=(2, 3), keepdim=True)
    cam = F.relu((weights * acts[0]).sum(1, keepdim=True))
    cam = F.interpolate(cam, size=(12, 14), mode="bilinear", align_corners=False)
    lo, hi = cam.amin(dim=(2, 3), keepdim=True), cam.amax(dim=(2, 3), keepdim=True)
    res["cam"] = (cam - lo) / (hi - lo + 1e-8)
    res["order"] = order
    # (not grads[0]'s: ReLU's input gradient from a row-major grad_output is channels_last in
    # PyTorch, which lays threshold_backward out after the saved output; ember's is row-major)
    res["act_strides"] = [str(acts[0].stride()), str(xg.grad.stride())]
    res["x_grad"] = xg.grad
    for handle in handles:
        handle.remove()
    res["params"] = list(model.parameters())
    return res


PROGRAMS = [convnext_program, pos_embed_fpn_program, deformable_roi_program,
            channels_last_gradcam_ema_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, tolerances={
        # the offset conv's weight gradient sums B*H*W*k*k products of size ~10 that cancel to
        # ~0.02 in some entries: float32 summation order moves those by ~2e-6
        "deformable_roi_program": (1e-5, 1e-5)})
