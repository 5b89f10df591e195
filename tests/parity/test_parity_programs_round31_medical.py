"""Medical imaging and weather programs written as nnU-Net, MONAI, GraphCast and Pangu-Weather
write them in torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy
weights: 3-D conv blocks with InstanceNorm3d and LeakyReLU, deep supervision on nearest-downsampled
targets with weighted Dice + CE losses, a poly schedule through LambdaLR on nesterov SGD,
sliding-window inference with a gaussian importance map and test-time mirroring, MONAI-style
tensor transforms (foreground crops from nonzero, per-channel normalisation, scatter_ one-hot),
mesh message passing with index_add_ / scatter_add_, an Earth-specific 3-D positional bias table
and a latitude-weighted RMSE. _medical_fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _conv_block(torch, cin, cout, stride):
    return torch.nn.Sequential(
        torch.nn.Conv3d(cin, cout, 3, stride=stride, padding=1, bias=True),
        torch.nn.InstanceNorm3d(cout, eps=1e-5, affine=True),
        torch.nn.LeakyReLU(negative_slope=1e-2, inplace=True))


def _soft_dice(torch, x, y_onehot, loss_mask=None, smooth=1e-5, batch_dice=True):
    axes = [0] + list(range(2, x.ndim)) if batch_dice else list(range(2, x.ndim))
    tp = (x * y_onehot).sum(axes)
    fp = (x * (1 - y_onehot)).sum(axes)
    fn = ((1 - x) * y_onehot).sum(axes)
    dc = (2 * tp + smooth) / torch.clip(2 * tp + fp + fn + smooth, 1e-8)
    return -dc[1:].mean() if batch_dice else -dc[:, 1:].mean()


def _poly_scheduler_class(torch):
    from importlib import import_module
    base = import_module(torch.__name__ + ".optim.lr_scheduler")._LRScheduler

    class PolyLRScheduler(base):
        """nnU-Net v2's scheduler: a _LRScheduler subclass that sets the lr itself."""

        def __init__(self, optimizer, initial_lr, max_steps, exponent=0.9, current_step=None):
            self.optimizer, self.initial_lr = optimizer, initial_lr
            self.max_steps, self.exponent, self.ctr = max_steps, exponent, 0
            # nnU-Net passes verbose=False third; torch 2.13's LRScheduler no longer takes it
            super().__init__(optimizer, current_step if current_step is not None else -1)

        def step(self, current_step=None):
            if current_step is None or current_step == -1:
                current_step = self.ctr
                self.ctr += 1
            new_lr = self.initial_lr * (1 - current_step / self.max_steps) ** self.exponent
            for group in self.optimizer.param_groups:
                group["lr"] = new_lr
            self._last_lr = [group["lr"] for group in self.optimizer.param_groups]
    return PolyLRScheduler


def _robust_ce_class(torch):
    class RobustCrossEntropyLoss(torch.nn.CrossEntropyLoss):
        def forward(self, input, target):
            if target.ndim == input.ndim:
                assert target.shape[1] == 1
                target = target[:, 0]
            return super().forward(input, target.long())
    return RobustCrossEntropyLoss


def nnunet_program(torch):
    """A two-level nnU-Net: strided 3-D conv encoder, transposed-conv decoder with skip cat,
    deep-supervision heads, DC+CE on nearest-downsampled targets with halving weights, poly
    LambdaLR on SGD(nesterov, momentum 0.99), grad clipping, three steps."""
    rng = np.random.default_rng(0)
    F = torch.nn.functional
    C, K = 1, 3

    class UNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.enc0 = torch.nn.Sequential(_conv_block(torch, C, 4, 1),
                                            _conv_block(torch, 4, 4, 1))
            self.enc1 = torch.nn.Sequential(_conv_block(torch, 4, 8, 2),
                                            _conv_block(torch, 8, 8, 1))
            self.up = torch.nn.ConvTranspose3d(8, 4, 2, stride=2, bias=False)
            self.dec0 = _conv_block(torch, 8, 4, 1)
            self.seg = torch.nn.ModuleList([torch.nn.Conv3d(4, K, 1), torch.nn.Conv3d(8, K, 1)])

        def forward(self, x):
            s0 = self.enc0(x)
            s1 = self.enc1(s0)
            d0 = self.dec0(torch.cat((self.up(s1), s0), 1))
            return [self.seg[0](d0), self.seg[1](s1)]

    net = UNet()
    fill_(torch, net, rng, 0.3)
    opt = torch.optim.SGD(net.parameters(), lr=1e-2, momentum=0.99, nesterov=True,
                          weight_decay=3e-5)
    sched = _poly_scheduler_class(torch)(opt, 1e-2, 10)
    warm = torch.optim.lr_scheduler.LambdaLR(opt, lambda ep: min(1.0, (ep + 1) / 2))
    weights = np.array([1 / (2 ** i) for i in range(2)])
    weights = weights / weights.sum()
    x = normal(torch, rng, 2, C, 8, 8, 8)
    y = torch.from_numpy(rng.integers(0, K, (2, 1, 8, 8, 8)))
    targets = [y] + [F.interpolate(y.float(), scale_factor=0.5, mode="nearest").long()]
    ce = _robust_ce_class(torch)()
    res = {"loss": [], "lr": [], "dc": [], "gn": []}
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        outs = net(x)
        total = 0
        for w, o, t in zip(weights, outs, targets):
            probs = torch.softmax(o, 1)
            onehot = torch.zeros(o.shape, dtype=torch.bool)
            onehot.scatter_(1, t, 1)
            dc = _soft_dice(torch, probs, onehot.float())
            total = total + w * (ce(o, t.float()) + dc)
            res["dc"].append(dc.detach())
        total.backward()
        res["gn"].append(torch.nn.utils.clip_grad_norm_(net.parameters(), 12))
        opt.step()
        sched.step()
        warm.step()
        res["loss"].append(total.item())
        res["lr"] += [sched.get_last_lr()[0], warm.get_last_lr()[0], sched.ctr]
    res["params"] = [p.detach().clone() for p in net.parameters()]
    res["norm_stats"] = [str(net.enc0[0][1].running_mean), net.enc0[0][1].track_running_stats]
    with torch.no_grad():
        out = net(x)[0]
        res["pred"] = out.argmax(1)
        res["dtype"] = [str(total.dtype).split(".")[-1]]
    return res


def _gaussian_importance(torch, patch, sigma_scale=1 / 8, value_scaling_factor=1):
    center = [i // 2 for i in patch]
    coords = [torch.arange(s, dtype=torch.float32) - c for s, c in zip(patch, center)]
    grids = torch.meshgrid(*coords, indexing="ij")
    sq = sum((g / (s * sigma_scale)) ** 2 for g, s in zip(grids, patch))
    g = torch.exp(-0.5 * sq)
    g = g / (torch.max(g) / value_scaling_factor)
    g[g == 0] = torch.min(g[g != 0])
    return g


def _steps(image_size, patch, step_size):
    out = []
    for dim in range(len(patch)):
        n = int(math.ceil((image_size[dim] - patch[dim]) / (patch[dim] * step_size))) + 1
        max_step = image_size[dim] - patch[dim]
        actual = max_step / (n - 1) if n > 1 else 99999999
        out.append([int(np.round(actual * i)) for i in range(n)])
    return out


def sliding_window_program(torch):
    """nnU-Net's predict_sliding_window_return_logits: pad to the patch, gaussian map, overlapping
    tiles accumulated by slicing, mirroring over all axis combinations with torch.flip, then
    MONAI-style post-processing (argmax, scatter_ one-hot, per-class volumes, nonzero bbox)."""
    rng = np.random.default_rng(1)
    F = torch.nn.functional
    K = 3
    net = torch.nn.Sequential(torch.nn.Conv3d(2, 4, 3, padding=1), torch.nn.InstanceNorm3d(4),
                              torch.nn.LeakyReLU(0.01), torch.nn.Conv3d(4, K, 1))
    fill_(torch, net, rng, 0.4)
    net.eval()
    img = normal(torch, rng, 2, 9, 7, 6)
    patch = (6, 6, 6)
    pad = [0, max(0, patch[2] - img.shape[3]), 0, max(0, patch[1] - img.shape[2]),
           0, max(0, patch[0] - img.shape[1])]
    data = F.pad(img, pad, mode="constant", value=0)
    res = {"padded": tuple(data.shape)}
    gauss = _gaussian_importance(torch, patch)
    res["gauss"] = gauss
    steps = _steps(data.shape[1:], patch, 0.5)
    res["steps"] = [str(steps)]
    gauss = gauss.to(device=torch.device("cpu"), dtype=torch.half)
    logits = torch.zeros((K, *data.shape[1:]), dtype=torch.half)
    nmap = torch.zeros(data.shape[1:], dtype=torch.half)
    mirror_axes = (0, 1, 2)
    import itertools
    combos = [c for i in range(len(mirror_axes)) for c in
              itertools.combinations([m + 2 for m in mirror_axes], i + 1)]
    with torch.inference_mode():
        for sx in steps[0]:
            for sy in steps[1]:
                for sz in steps[2]:
                    sl = (slice(None), slice(sx, sx + patch[0]), slice(sy, sy + patch[1]),
                          slice(sz, sz + patch[2]))
                    x = data[sl][None]
                    pred = net(x)
                    for axes in combos:
                        pred += torch.flip(net(torch.flip(x, axes)), axes)
                    pred /= len(combos) + 1
                    pred = pred[0] * gauss
                    logits[sl] += pred
                    nmap[sl[1:]] += gauss
        torch.div(logits, nmap, out=logits)
        res["inference"] = [torch.is_inference(logits), bool(torch.any(torch.isinf(logits))),
                            str(logits.dtype).split(".")[-1]]
    logits = logits[(slice(None), *[slice(0, s) for s in img.shape[1:]])]
    res["logits"] = logits.float()
    seg = logits.argmax(0)
    onehot = torch.zeros((K, *seg.shape), dtype=torch.float32).scatter_(0, seg[None], 1.0)
    res["onehot_sum"] = onehot.sum((1, 2, 3))
    fg = torch.nonzero(seg > 0)
    res["bbox"] = [fg.min(0).values, fg.max(0).values + 1] if fg.numel() else []
    res["nz_tuple"] = [t.shape for t in torch.nonzero(seg == 1, as_tuple=True)]
    return res


def monai_transforms_program(torch):
    """MONAI transforms on tensors: NormalizeIntensity(nonzero, channel_wise), ScaleIntensityRange
    with clip, RandCropByPosNegLabel's centre choice from torch.nonzero with a NumPy rng, spatial
    crop by slicing with border clamping, AsDiscrete(to_onehot) via scatter_, then a DiceCE step
    on the crops with include_background=False."""
    rng = np.random.default_rng(2)
    img = normal(torch, rng, 2, 10, 9, 8) * 50 + 100
    img[:, :2] = 0
    label = torch.from_numpy(rng.integers(0, 3, (1, 10, 9, 8))).to(torch.uint8)
    label[:, :3] = 0
    res = {}
    out = img.clone()
    for c in range(out.shape[0]):
        slc = out[c]
        mask = slc != 0
        vals = slc[mask]
        mean, std = vals.mean(), vals.std(unbiased=False)
        std = std if std != 0 else torch.tensor(1.0)
        slc[mask] = (vals - mean) / std
    res["norm"] = out
    a_min, a_max, b_min, b_max = -57.0, 164.0, 0.0, 1.0
    scaled = (img - a_min) / (a_max - a_min) * (b_max - b_min) + b_min
    res["scaled"] = torch.clamp(scaled, b_min, b_max)
    fg = torch.nonzero(label[0] > 0)
    bg = torch.nonzero(label[0] == 0)
    res["n_fg_bg"] = (fg.shape[0], bg.shape[0])
    roi = (4, 4, 4)
    crops_i, crops_l = [], []
    for k in range(4):
        pool = fg if rng.random() < 0.5 else bg
        centre = pool[int(rng.integers(0, pool.shape[0]))]
        starts = [int(min(max(int(centre[d]) - roi[d] // 2, 0), label.shape[d + 1] - roi[d]))
                  for d in range(3)]
        sl = tuple(slice(s, s + r) for s, r in zip(starts, roi))
        crops_i.append(out[(slice(None), *sl)])
        crops_l.append(label[(slice(None), *sl)])
    xi = torch.stack(crops_i)
    yl = torch.stack(crops_l).long()
    res["crop_shapes"] = [tuple(xi.shape), tuple(yl.shape)]
    onehot = torch.zeros((yl.shape[0], 3, *yl.shape[2:]), dtype=torch.float32)
    onehot.scatter_(1, yl, 1)
    res["onehot"] = onehot.sum((2, 3, 4))
    conv = torch.nn.Conv3d(2, 3, 3, padding=1, padding_mode="replicate")
    fill_(torch, conv, rng, 0.2)
    opt = torch.optim.AdamW(conv.parameters(), lr=1e-3, weight_decay=1e-5, amsgrad=True)
    res["loss"] = []
    for _ in range(2):
        opt.zero_grad()
        logit = conv(xi)
        p = torch.softmax(logit, 1)[:, 1:]
        t = onehot[:, 1:]
        red = list(range(2, p.ndim))
        inter = torch.sum(t * p, dim=red)
        denom = torch.sum(t, dim=red) + torch.sum(p, dim=red)
        dice = 1.0 - (2.0 * inter + 1e-5) / (denom + 1e-5)
        ce = torch.nn.functional.cross_entropy(logit, torch.argmax(onehot, dim=1),
                                               label_smoothing=0.1)
        loss = torch.mean(dice) + ce
        loss.backward()
        opt.step()
        res["loss"].append(loss.detach())
    res["weight"] = conv.weight
    return res


def weather_program(torch):
    """GraphCast-lite mesh processor (edge MLP on gathered sender/receiver features, index_add_
    and scatter_add_ aggregation, residual node updates), a Pangu 3-D window attention with an
    Earth-specific bias table indexed by relative coordinates, and a cos-latitude weighted RMSE
    trained two Adam steps."""
    rng = np.random.default_rng(3)
    F = torch.nn.functional
    Nlat, Nlon, V, H = 6, 8, 3, 8
    lat = torch.linspace(-75.0, 75.0, Nlat)
    w_lat = torch.cos(torch.deg2rad(lat))
    w_lat = w_lat / w_lat.mean()
    n_nodes = Nlat * Nlon
    senders = torch.from_numpy(rng.integers(0, n_nodes, 120))
    receivers = torch.from_numpy(rng.integers(0, n_nodes, 120))
    edge_feat = normal(torch, rng, 120, 4)

    class Processor(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Linear(V, H)
            self.edge_embed = torch.nn.Linear(4, H)
            self.edge_mlp = torch.nn.Sequential(torch.nn.Linear(3 * H, H), torch.nn.SiLU(),
                                                torch.nn.Linear(H, H), torch.nn.LayerNorm(H))
            self.node_mlp = torch.nn.Sequential(torch.nn.Linear(2 * H, H), torch.nn.SiLU(),
                                                torch.nn.Linear(H, H), torch.nn.LayerNorm(H))
            self.out = torch.nn.Linear(H, V)

        def forward(self, x):
            h = self.embed(x)
            e = self.edge_embed(edge_feat)
            for step in range(2):
                e_in = torch.cat([e, h[senders], h.index_select(0, receivers)], -1)
                e = e + self.edge_mlp(e_in)
                if step == 0:
                    agg = torch.zeros_like(h).index_add_(0, receivers, e)
                else:
                    idx = receivers.unsqueeze(-1).expand(-1, H)
                    agg = torch.zeros_like(h).scatter_add_(0, idx, e)
                h = h + self.node_mlp(torch.cat([h, agg], -1))
            return x + self.out(h)

    # Pangu's earth-specific bias: window (2, 2, 4) over (pl, lat, lon); table per lat-window type
    win = (2, 2, 4)
    heads, type_of_windows = 2, Nlat // win[1]
    coords_zi = torch.arange(win[0])
    coords_zj = -torch.arange(win[0]) * win[0]
    coords_hi = torch.arange(win[1])
    coords_hj = -torch.arange(win[1]) * win[1]
    coords_w = torch.arange(win[2])
    coords_1 = torch.stack(torch.meshgrid([coords_zi, coords_hi, coords_w], indexing="ij"))
    coords_2 = torch.stack(torch.meshgrid([coords_zj, coords_hj, coords_w], indexing="ij"))
    coords = coords_1.flatten(1)[:, :, None] - coords_2.flatten(1)[:, None, :]
    coords = coords.permute(1, 2, 0).contiguous()
    coords[:, :, 2] += win[2] - 1
    coords[:, :, 1] *= 2 * win[2] - 1
    coords[:, :, 0] *= (2 * win[2] - 1) * win[1] * win[1]
    position_index = coords.sum(-1)
    table_size = win[0] ** 2 * win[1] ** 2 * (win[2] * 2 - 1)

    class EarthAttention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.Linear(H, 3 * H)
            self.proj = torch.nn.Linear(H, H)
            self.earth_bias = torch.nn.Parameter(torch.zeros(table_size, type_of_windows, heads))
            self.register_buffer("position_index", position_index, persistent=False)

        def forward(self, x):
            # x: [B*nLon, nW(lat types), N, C]
            b, nw, n, c = x.shape
            qkv = self.qkv(x).reshape(b, nw, n, 3, heads, c // heads).permute(3, 0, 4, 1, 2, 5)
            q, k, v = qkv[0], qkv[1], qkv[2]
            q = q * (c // heads) ** -0.5
            attn = q @ k.transpose(-2, -1)
            bias = self.earth_bias[self.position_index.view(-1)].reshape(n, n, nw, heads)
            bias = bias.permute(3, 2, 0, 1).contiguous()
            attn = (attn + bias.unsqueeze(0)).softmax(-1)
            out = (attn @ v).permute(0, 2, 3, 1, 4).reshape(b, nw, n, c)
            return self.proj(out)

    proc, att = Processor(), EarthAttention()
    fill_(torch, proc, rng, 0.3)
    fill_(torch, att, rng, 0.1)
    x0 = normal(torch, rng, n_nodes, V)
    target = normal(torch, rng, n_nodes, V)
    params = list(proc.parameters()) + list(att.parameters())
    opt = torch.optim.Adam(params, lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    res = {"loss": [], "position_index": position_index}
    for _ in range(2):
        opt.zero_grad()
        pred = proc(x0)                                  # [lat*lon, V]
        grid = pred.view(Nlat, Nlon, V)
        hidden = grid.unsqueeze(0).expand(win[0], -1, -1, -1)
        hidden = F.pad(hidden, (0, H - V))               # [pl, lat, lon, H]
        hw = hidden.reshape(win[0], type_of_windows, win[1], Nlon // win[2], win[2], H)
        hw = hw.permute(3, 1, 0, 2, 4, 5).reshape(Nlon // win[2], type_of_windows, -1, H)
        mixed = att(hw).reshape(Nlon // win[2], type_of_windows, win[0], win[1], win[2], H)
        mixed = mixed.permute(2, 1, 3, 0, 4, 5).reshape(win[0], Nlat, Nlon, H)[0, ..., :V]
        final = grid + 0.1 * mixed
        err = (final - target.view(Nlat, Nlon, V)) ** 2
        per_var = torch.sqrt((err * w_lat[:, None, None]).mean((0, 1)))
        loss = per_var.mean()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["per_var"] = per_var.detach()
    res["earth_bias_grad"] = att.earth_bias.grad
    res["edge_grad"] = proc.edge_mlp[0].weight.grad
    res["w_lat"] = w_lat
    return res


PROGRAMS = [nnunet_program, sliding_window_program, monai_transforms_program, weather_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
