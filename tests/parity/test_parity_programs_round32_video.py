"""Video understanding models written as their reference repositories write them in torch, run
once with `torch` bound to ember and once to PyTorch from the same NumPy weights: I3D inflation
of 2-D weights into Conv3d (repeat then divide by the temporal size), SlowFast with a strided
Conv3d lateral connection, TSM temporal shift by slicing and zero fill, TimeSformer divided
space-time attention by rearranges, and X3D depthwise 3-D convolutions with squeeze-excite,
AvgPool3d / AdaptiveAvgPool3d heads and a CPU autocast bfloat16 forward, and Video Swin's
shifted 3-D windows (roll, masks by slice assignment, a relative position bias table). Sibling
_video_fold covers AlphaFold/OpenFold-style structure modules; _video_fixes pins what they
found."""

from functools import reduce
from operator import mul

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def i3d_inflate_program(torch):
    """I3D: inflate a 2-D stem and block (Conv2d, BatchNorm2d) into Conv3d/BatchNorm3d by
    unsqueeze/repeat/divide, check the inflated net reproduces the 2-D output on a static clip,
    then train a few SGD-momentum steps with MaxPool3d and an AdaptiveAvgPool3d head."""
    rng = np.random.default_rng(0)
    nn = torch.nn
    res = {}
    conv2 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
    bn2 = nn.BatchNorm2d(8)
    fill_(torch, conv2, rng)
    with torch.no_grad():
        bn2.running_mean.copy_(normal(torch, rng, 8) * 0.1)
        bn2.running_var.copy_(normal(torch, rng, 8).abs() + 0.5)
        bn2.weight.copy_(normal(torch, rng, 8))
    T = 3
    conv3 = nn.Conv3d(3, 8, (T, 3, 3), stride=(1, 2, 2), padding=(1, 1, 1), bias=False)
    bn3 = nn.BatchNorm3d(8)
    with torch.no_grad():
        w = conv2.weight.data.unsqueeze(2).repeat(1, 1, T, 1, 1) / T
        conv3.weight.copy_(w)
        sd = {k: v for k, v in bn2.state_dict().items()}
        res["bn_keys"] = sorted(sd)
        bn3.load_state_dict(sd)
    img = normal(torch, rng, 2, 3, 8, 8)
    clip = img.unsqueeze(2).expand(-1, -1, 4, -1, -1).contiguous()
    conv2.eval(), bn2.eval(), conv3.eval(), bn3.eval()
    with torch.no_grad():
        y2 = bn2(conv2(img))
        y3 = bn3(conv3(clip))
    # float32 sums over 3 taps differ by rounding only, so the check is a flag
    res["static_clip_matches_2d"] = bool((y3[:, :, 1:-1] - y2.unsqueeze(2)).abs().max() < 1e-5)
    res["y3_edge"] = y3[:, :, 0]
    net = nn.Sequential(conv3, bn3, nn.ReLU(inplace=True),
                        nn.MaxPool3d((1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1)),
                        nn.Conv3d(8, 8, (3, 1, 1), padding=(1, 0, 0)),
                        nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Dropout(0.0), nn.Linear(8, 5))
    fill_(torch, net[4], rng)
    fill_(torch, net[-1], rng)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4,
                          nesterov=True)
    x = normal(torch, rng, 2, 3, 4, 8, 8)
    y = torch.tensor([1, 3])
    res["loss"] = []
    for _ in range(3):
        loss = torch.nn.functional.cross_entropy(net(x), y, label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["conv3_w"] = conv3.weight
    res["bn_mean"], res["bn_var"] = bn3.running_mean, bn3.running_var
    res["bn_tracked"] = bn3.num_batches_tracked
    res["maxpool_shape"] = tuple(net[:4](x).shape)
    return res


def slowfast_program(torch):
    """SlowFast: a slow pathway on every alpha-th frame by index_select, a fast pathway with
    beta-times fewer channels, a time-strided Conv3d lateral fused by cat, per-pathway
    AvgPool3d over the whole clip, and AdamW with a cosine schedule."""
    rng = np.random.default_rng(1)
    nn = torch.nn
    alpha, cs, cf = 4, 8, 2      # (beta = cs / cf = 4: the fast path's channel ratio)

    class FuseFastToSlow(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv_f2s = nn.Conv3d(cf, cf * 2, kernel_size=(5, 1, 1), stride=(alpha, 1, 1),
                                      padding=(2, 0, 0), bias=False)
            self.bn = nn.BatchNorm3d(cf * 2, eps=1e-5, momentum=0.1)
            self.relu = nn.ReLU(True)

        def forward(self, x):
            x_s, x_f = x
            fuse = self.relu(self.bn(self.conv_f2s(x_f)))
            return [torch.cat([x_s, fuse], 1), x_f]

    class SlowFast(nn.Module):
        def __init__(self):
            super().__init__()
            self.s_stem = nn.Conv3d(3, cs, (1, 3, 3), padding=(0, 1, 1), bias=False)
            self.f_stem = nn.Conv3d(3, cf, (5, 3, 3), padding=(2, 1, 1), bias=False)
            self.fuse = FuseFastToSlow()
            self.s_res = nn.Conv3d(cs + 2 * cf, cs, (1, 3, 3), padding=(0, 1, 1))
            self.f_res = nn.Conv3d(cf, cf, (3, 3, 3), padding=1)
            self.head = nn.Linear(cs + cf, 4)

        def forward(self, frames):
            T = frames.shape[2]
            idx = torch.linspace(0, T - 1, T // alpha).long()
            slow = torch.index_select(frames, 2, idx)
            x = [self.s_stem(slow), self.f_stem(frames)]
            x = self.fuse(x)
            s, f = torch.relu(self.s_res(x[0])), torch.relu(self.f_res(x[1]))
            ps = nn.functional.avg_pool3d(s, kernel_size=s.shape[2:], stride=1)
            pf = nn.AvgPool3d(f.shape[2:], stride=1)(f)
            feat = torch.cat([ps, pf], dim=1).permute(0, 2, 3, 4, 1)
            return self.head(feat).mean([1, 2, 3])

    model = SlowFast()
    fill_(torch, model, rng, 0.2)
    x = normal(torch, rng, 2, 3, 8, 6, 6)
    y = torch.tensor([0, 2])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=1e-4)
    res = {"loss": [], "lr": []}
    for _ in range(3):
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        res["loss"].append(loss.item())
        res["lr"].append(sched.get_last_lr()[0])
    res["lateral_w"] = model.fuse.conv_f2s.weight
    res["bn_rm"] = model.fuse.bn.running_mean
    res["fused_shape"] = tuple(model.fuse([torch.zeros(1, cs, 2, 3, 3),
                                           torch.zeros(1, cf, 8, 3, 3)])[0].shape)
    return res


def tsm_program(torch):
    """TSM: the temporal shift by view to (n, t, c, h, w), zeros_like and slice assignment
    (the reference's `out[:, :-1, :fold] = x[:, 1:, :fold]`), and the in-place variant
    through a custom autograd.Function, inside a residual block of a 2-D ResNet."""
    rng = np.random.default_rng(2)
    nn = torch.nn
    n_seg, fold_div = 4, 4

    def shift(x, n_segment, fold_div=3):
        nt, c, h, w = x.size()
        n_batch = nt // n_segment
        x = x.view(n_batch, n_segment, c, h, w)
        fold = c // fold_div
        out = torch.zeros_like(x)
        out[:, :-1, :fold] = x[:, 1:, :fold]
        out[:, 1:, fold: 2 * fold] = x[:, :-1, fold: 2 * fold]
        out[:, :, 2 * fold:] = x[:, :, 2 * fold:]
        return out.view(nt, c, h, w)

    class InplaceShift(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input, fold):
            ctx.fold_ = fold
            n, t, c, h, w = input.size()
            buffer = input.data.new(n, t, fold, h, w).zero_()
            buffer[:, :-1] = input.data[:, 1:, :fold]
            input.data[:, :, :fold] = buffer
            buffer.zero_()
            buffer[:, 1:] = input.data[:, :-1, fold: 2 * fold]
            input.data[:, :, fold: 2 * fold] = buffer
            return input

        @staticmethod
        def backward(ctx, grad_output):
            fold = ctx.fold_
            n, t, c, h, w = grad_output.size()
            buffer = grad_output.data.new(n, t, fold, h, w).zero_()
            buffer[:, 1:] = grad_output.data[:, :-1, :fold]
            grad_output.data[:, :, :fold] = buffer
            buffer.zero_()
            buffer[:, :-1] = grad_output.data[:, 1:, fold: 2 * fold]
            grad_output.data[:, :, fold: 2 * fold] = buffer
            return grad_output, None

    class TemporalShift(nn.Module):
        def __init__(self, net, inplace=False):
            super().__init__()
            self.net, self.inplace = net, inplace

        def forward(self, x):
            if self.inplace:
                nt, c, h, w = x.size()
                x5 = x.view(nt // n_seg, n_seg, c, h, w)
                x = InplaceShift.apply(x5, c // fold_div).view(nt, c, h, w)
            else:
                x = shift(x, n_seg, fold_div)
            return self.net(x)

    res = {}
    for inplace in (False, True):
        block = TemporalShift(nn.Conv2d(8, 8, 3, padding=1, bias=False), inplace)
        fill_(torch, block, rng, 0.2)
        bn = nn.BatchNorm2d(8)
        x0 = normal(torch, rng, 2 * n_seg, 8, 5, 5).requires_grad_()
        x = x0 * 1.0
        out = torch.relu(bn(block(x)) + x0)
        feat = out.mean([2, 3]).view(2, n_seg, 8).mean(1)
        loss = (feat ** 2).sum()
        loss.backward()
        res[f"loss_{inplace}"] = loss
        res[f"gx_{inplace}"] = x0.grad
        res[f"gw_{inplace}"] = block.net.weight.grad
    x = torch.arange(2 * 4 * 4.0).view(2 * 4, 4, 1, 1)
    res["shift_exact"] = shift(x, 4, 4)
    return res


def timesformer_program(torch):
    """TimeSformer divided space-time attention: patch embedding by Conv2d on (b t) frames,
    temporal attention on ((b n) t d), spatial attention with the cls token repeated per frame
    (repeat_interleave), and the averaged cls tokens put back; einops-style rearranges done
    with reshape/permute, attention by scaled_dot_product_attention and by hand."""
    rng = np.random.default_rng(3)
    nn = torch.nn
    F = nn.functional
    B, T, C, H, P, D, heads = 2, 3, 3, 8, 4, 16, 2
    N = (H // P) ** 2

    class Attn(nn.Module):
        def __init__(self, manual):
            super().__init__()
            self.qkv = nn.Linear(D, 3 * D)
            self.proj = nn.Linear(D, D)
            self.manual = manual

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = self.qkv(x).reshape(b, n, 3, heads, D // heads).permute(2, 0, 3, 1, 4)
            if self.manual:
                a = (q @ k.transpose(-2, -1)) * (D // heads) ** -0.5
                o = a.softmax(dim=-1) @ v
            else:
                o = F.scaled_dot_product_attention(q, k, v)
            return self.proj(o.transpose(1, 2).reshape(b, n, D))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm_t, self.attn_t = nn.LayerNorm(D), Attn(True)
            self.temporal_fc = nn.Linear(D, D)
            self.norm_s, self.attn_s = nn.LayerNorm(D), Attn(False)
            self.norm2 = nn.LayerNorm(D)
            self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))

        def forward(self, x):
            b = x.size(0)
            xt = x[:, 1:]
            xt = xt.reshape(b, N, T, D).reshape(b * N, T, D)
            rt = self.temporal_fc(self.attn_t(self.norm_t(xt)))
            xt = x[:, 1:] + rt.reshape(b, N * T, D)
            cls = x[:, 0:1].repeat_interleave(T, dim=0)  # (b t) 1 d
            xs = xt.reshape(b, N, T, D).permute(0, 2, 1, 3).reshape(b * T, N, D)
            xs = torch.cat((cls, xs), 1)
            rs = self.attn_s(self.norm_s(xs))
            cls_out = rs[:, 0].reshape(b, T, D).mean(1, keepdim=True)
            rs = rs[:, 1:].reshape(b, T, N, D).permute(0, 2, 1, 3).reshape(b, N * T, D)
            x = torch.cat((x[:, 0:1], xt), 1) + torch.cat((cls_out, rs), 1)
            return x + self.mlp(self.norm2(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch = nn.Conv2d(C, D, P, stride=P)
            self.cls = nn.Parameter(torch.zeros(1, 1, D))
            self.pos = nn.Parameter(torch.zeros(1, N + 1, D))
            self.time = nn.Parameter(torch.zeros(1, T, D))
            self.block = Block()
            self.head = nn.Linear(D, 5)

        def forward(self, v):
            b = v.shape[0]
            x = self.patch(v.transpose(1, 2).flatten(0, 1)).flatten(2).transpose(1, 2)
            x = torch.cat((self.cls.expand(x.size(0), -1, -1), x), dim=1) + self.pos
            cls = x[:b, 0, :].unsqueeze(1)
            x = x[:, 1:].reshape(b, T, N, D).permute(0, 2, 1, 3).reshape(b * N, T, D)
            x = (x + self.time).reshape(b, N * T, D)
            x = torch.cat((cls, x), dim=1)
            return self.head(self.block(x)[:, 0])

    model = Model()
    fill_(torch, model, rng, 0.2)
    decay = [p for n, p in model.named_parameters() if p.ndim > 1 and "pos" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.ndim > 1 and "pos" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": no_decay, "weight_decay": 0.0}], lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 2))
    v = normal(torch, rng, B, C, T, H, H)
    y = torch.tensor([4, 1])
    res = {"loss": []}
    for _ in range(3):
        loss = F.cross_entropy(model(v), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["loss"].append(loss.item())
    res["cls_grad"] = model.cls.grad
    res["time"] = model.time
    res["tfc"] = model.block.temporal_fc.weight
    return res


def x3d_program(torch):
    """X3D: a bottleneck with a depthwise 3x3x3 Conv3d (groups=channels), squeeze-excite by
    AdaptiveAvgPool3d, Swish, a strided temporal-preserving stage, the head's AvgPool3d, and
    inference under CPU autocast bfloat16 (Conv3d and linear cast to bfloat16)."""
    rng = np.random.default_rng(4)
    nn = torch.nn

    class SE(nn.Module):
        def __init__(self, c, r=0.25):
            super().__init__()
            self.avg = nn.AdaptiveAvgPool3d((1, 1, 1))
            self.fc1 = nn.Conv3d(c, int(c * r), 1)
            self.fc2 = nn.Conv3d(int(c * r), c, 1)

        def forward(self, x):
            s = self.fc2(torch.relu(self.fc1(self.avg(x))))
            return x * s.sigmoid()

    class XBlock(nn.Module):
        def __init__(self, cin, inner, cout, stride):
            super().__init__()
            self.a = nn.Conv3d(cin, inner, 1, bias=False)
            self.a_bn = nn.BatchNorm3d(inner)
            self.b = nn.Conv3d(inner, inner, 3, stride=(1, stride, stride), padding=1,
                               groups=inner, bias=False)
            self.b_bn = nn.BatchNorm3d(inner)
            self.se = SE(inner)
            self.swish = nn.SiLU()
            self.c = nn.Conv3d(inner, cout, 1, bias=False)
            self.c_bn = nn.BatchNorm3d(cout)
            self.short = nn.Conv3d(cin, cout, 1, stride=(1, stride, stride), bias=False)

        def forward(self, x):
            y = torch.relu(self.a_bn(self.a(x)))
            y = self.swish(self.se(self.b_bn(self.b(y))))
            return torch.relu(self.c_bn(self.c(y)) + self.short(x))

    net = nn.Sequential(
        nn.Conv3d(3, 6, (1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1), bias=False),
        nn.Conv3d(6, 6, (5, 1, 1), padding=(2, 0, 0), groups=6, bias=False),
        XBlock(6, 12, 8, 2), XBlock(8, 16, 8, 1),
        nn.AvgPool3d((4, 2, 2), stride=1), nn.Flatten(1), nn.Linear(8, 3))
    fill_(torch, net, rng, 0.3)
    x = normal(torch, rng, 2, 3, 4, 8, 8)
    opt = torch.optim.SGD(net.parameters(), lr=0.02, momentum=0.9)
    res = {"loss": []}
    for _ in range(2):
        loss = net(x).logsumexp(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["dw_grad"] = net[2].b.weight.grad
    res["dw_t"] = net[1].weight
    net.eval()
    with torch.no_grad():
        ref = net(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = net[0](x)
            out = net(x)
            pooled = nn.functional.adaptive_avg_pool3d(h, 1)
            res["amp_pool"] = nn.functional.adaptive_avg_pool3d(h, (3, 3, 2))
    res["eval"] = ref
    res["amp_dtypes"] = [str(t.dtype).split(".")[-1] for t in (h, out, pooled)]
    res["amp_close"] = (out.float() - ref).abs().max().item() < 0.2
    return res


def video_swin_program(torch):
    """Video Swin: 3-D patch embedding (Conv3d with F.pad to a multiple of the patch), window
    partition by view/permute of 8-D tensors, the shifted-window mask built by slice assignment
    and masked_fill(!= 0, -100), torch.roll shifts, a relative position bias table indexed by
    a meshgrid-built buffer, DropPath via new_empty().bernoulli_ (drop prob 0 in train, so the
    scaling path runs), patch merging by strided slicing, and AdamW steps."""
    rng = np.random.default_rng(5)
    nn = torch.nn
    F = nn.functional
    ws, ss, C, heads = (2, 2, 2), (1, 1, 1), 8, 2

    def window_partition(x, window_size):
        B, D, H, W, C = x.shape
        x = x.view(B, D // window_size[0], window_size[0], H // window_size[1], window_size[1],
                   W // window_size[2], window_size[2], C)
        return x.permute(0, 1, 3, 5, 2, 4, 6, 7).contiguous().view(-1, reduce(mul, window_size), C)

    def window_reverse(windows, window_size, B, D, H, W):
        x = windows.view(B, D // window_size[0], H // window_size[1], W // window_size[2],
                         window_size[0], window_size[1], window_size[2], -1)
        return x.permute(0, 1, 4, 2, 5, 3, 6, 7).contiguous().view(B, D, H, W, -1)

    def compute_mask(D, H, W, window_size, shift_size):
        img_mask = torch.zeros((1, D, H, W, 1))
        cnt = 0
        spans = [(slice(-w), slice(-w, -s), slice(-s, None))
                 for w, s in zip(window_size, shift_size)]
        for d in spans[0]:
            for h in spans[1]:
                for w in spans[2]:
                    img_mask[:, d, h, w, :] = cnt
                    cnt += 1
        mask_windows = window_partition(img_mask, window_size).squeeze(-1)
        attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)
        attn_mask = attn_mask.masked_fill(attn_mask != 0, float(-100.0))
        return attn_mask.masked_fill(attn_mask == 0, float(0.0))

    class DropPath(nn.Module):
        def __init__(self, p):
            super().__init__()
            self.p = p

        def forward(self, x):
            if self.p == 0.0 or not self.training:
                return x
            keep = 1 - self.p
            shape = (x.shape[0],) + (1,) * (x.ndim - 1)
            mask = x.new_empty(shape).bernoulli_(keep)
            return x * mask.div_(keep)

    class WindowAttention3D(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = (C // heads) ** -0.5
            self.relative_position_bias_table = nn.Parameter(torch.zeros(
                (2 * ws[0] - 1) * (2 * ws[1] - 1) * (2 * ws[2] - 1), heads))
            coords = torch.stack(torch.meshgrid(torch.arange(ws[0]), torch.arange(ws[1]),
                                                torch.arange(ws[2]), indexing="ij"))
            coords_flatten = torch.flatten(coords, 1)
            rel = coords_flatten[:, :, None] - coords_flatten[:, None, :]
            rel = rel.permute(1, 2, 0).contiguous()
            rel[:, :, 0] += ws[0] - 1
            rel[:, :, 1] += ws[1] - 1
            rel[:, :, 2] += ws[2] - 1
            rel[:, :, 0] *= (2 * ws[1] - 1) * (2 * ws[2] - 1)
            rel[:, :, 1] *= (2 * ws[2] - 1)
            self.register_buffer("relative_position_index", rel.sum(-1))
            self.qkv = nn.Linear(C, 3 * C)
            self.proj = nn.Linear(C, C)

        def forward(self, x, mask=None):
            B_, N, _ = x.shape
            qkv = self.qkv(x).reshape(B_, N, 3, heads, C // heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            attn = (q * self.scale) @ k.transpose(-2, -1)
            bias = self.relative_position_bias_table[
                self.relative_position_index[:N, :N].reshape(-1)].reshape(N, N, -1)
            attn = attn + bias.permute(2, 0, 1).contiguous().unsqueeze(0)
            if mask is not None:
                nW = mask.shape[0]
                attn = attn.view(B_ // nW, nW, heads, N, N) + mask.unsqueeze(1).unsqueeze(0)
                attn = attn.view(-1, heads, N, N)
            attn = F.softmax(attn, dim=-1)
            return self.proj((attn @ v).transpose(1, 2).reshape(B_, N, C))

    class Block(nn.Module):
        def __init__(self, shift):
            super().__init__()
            self.shift = shift
            self.norm1, self.attn = nn.LayerNorm(C), WindowAttention3D()
            self.drop_path = DropPath(0.0 if not shift else 1e-7)
            self.norm2 = nn.LayerNorm(C)
            self.mlp = nn.Sequential(nn.Linear(C, 2 * C), nn.GELU(approximate="tanh"),
                                     nn.Linear(2 * C, C))

        def forward(self, x, mask):
            B, D, H, W, _ = x.shape
            sc = x
            x = self.norm1(x)
            pad_d1, pad_b, pad_r = (-D) % ws[0], (-H) % ws[1], (-W) % ws[2]
            x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b, 0, pad_d1))
            _, Dp, Hp, Wp, _ = x.shape
            if self.shift:
                x = torch.roll(x, shifts=(-ss[0], -ss[1], -ss[2]), dims=(1, 2, 3))
            aw = self.attn(window_partition(x, ws), mask=mask if self.shift else None)
            x = window_reverse(aw.view(-1, *(ws + (C,))), ws, B, Dp, Hp, Wp)
            if self.shift:
                x = torch.roll(x, shifts=ss, dims=(1, 2, 3))
            x = x[:, :D, :H, :W, :].contiguous()
            x = sc + self.drop_path(x)
            return x + self.drop_path(self.mlp(self.norm2(x)))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Conv3d(3, C, (2, 2, 2), stride=(2, 2, 2))
            self.blocks = nn.ModuleList([Block(False), Block(True)])
            self.reduction = nn.Linear(4 * C, 2 * C, bias=False)
            self.norm = nn.LayerNorm(4 * C)
            self.head = nn.Linear(2 * C, 4)

        def forward(self, x):
            _, _, D, H, W = x.size()
            if W % 2 != 0:
                x = F.pad(x, (0, 2 - W % 2))
            if H % 2 != 0:
                x = F.pad(x, (0, 0, 0, 2 - H % 2))
            x = self.proj(x).permute(0, 2, 3, 4, 1)
            B, D, H, W, _ = x.shape
            Dp, Hp, Wp = (int(np.ceil(s / w)) * w for s, w in zip((D, H, W), ws))
            mask = compute_mask(Dp, Hp, Wp, ws, ss)
            for blk in self.blocks:
                x = blk(x, mask)
            x = F.pad(x, (0, 0, 0, W % 2, 0, H % 2))
            x0, x1 = x[:, :, 0::2, 0::2, :], x[:, :, 1::2, 0::2, :]
            x2, x3 = x[:, :, 0::2, 1::2, :], x[:, :, 1::2, 1::2, :]
            x = self.reduction(self.norm(torch.cat([x0, x1, x2, x3], -1)))
            return self.head(x.mean([1, 2, 3]))

    model = Model()
    fill_(torch, model, rng, 0.2)
    x = normal(torch, rng, 2, 3, 4, 6, 5)
    y = torch.tensor([3, 0])
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.9, 0.999), weight_decay=0.02)
    res = {"loss": []}
    model.train()
    for _ in range(3):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["mask"] = compute_mask(2, 4, 4, ws, ss)
    res["rpi"] = model.blocks[0].attn.relative_position_index
    res["table_grad"] = model.blocks[1].attn.relative_position_bias_table.grad
    res["proj_w"] = model.proj.weight
    return res


PROGRAMS = [i3d_inflate_program, slowfast_program, tsm_program, timesformer_program,
            x3d_program, video_swin_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
