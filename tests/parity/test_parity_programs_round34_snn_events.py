"""Event-driven spiking networks written as their reference repositories write them in torch,
run once with `torch` bound to ember and once to PyTorch from the same NumPy weights and data:
tonic-style event transforms (ToFrame by index_put_ with accumulate, a bilinear-in-time voxel
grid by index_add_), snnTorch spikegen.latency and spikegen.delta encodings, a spiking CNN with
SeqToANNContainer and MultiStepLIF, threshold-dependent BatchNorm (tdBN over (T, B) folded),
SLAYER's spike-response kernel as a causal grouped conv1d over time with axonal delays, and
a Spikformer block (spiking self-attention without softmax, SPS patch embedding)."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _atan_spike(torch, alpha=2.0):
    class ATan(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return (x >= 0).to(x)

        @staticmethod
        def backward(ctx, grad_output):
            x, = ctx.saved_tensors
            return alpha / 2 / (1 + (math.pi / 2 * alpha * x).square()) * grad_output
    return ATan.apply


def _multistep_lif(torch, spike, tau=2.0, v_th=1.0, detach_reset=True):
    """SpikingJelly's MultiStepLIFNode (hard reset to 0, decay_input) in its python loop."""
    nn = torch.nn

    class MultiStepLIFNode(nn.Module):
        def __init__(self):
            super().__init__()
            self.v_seq = None

        def forward(self, x_seq):
            v = torch.zeros_like(x_seq[0])
            spikes, vs = [], []
            for t in range(x_seq.shape[0]):
                v = v + (x_seq[t] - v) / tau
                s = spike(v - v_th)
                s_r = s.detach() if detach_reset else s
                v = v * (1. - s_r)
                spikes.append(s)
                vs.append(v)
            self.v_seq = torch.stack(vs)
            return torch.stack(spikes)
    return MultiStepLIFNode


def event_encoding_program(torch):
    """tonic's ToFrame (event count frames by time bins, index_put_ with accumulate=True on
    (bin, polarity, y, x)), ToVoxelGrid (bilinear weights in time, index_add_ on a flattened
    grid), snnTorch spikegen.latency (tau * log(x / (x - threshold)), clipped, normalised,
    linear mode too) and spikegen.delta (threshold on diff with padding, off spikes)."""
    rng = np.random.default_rng(3421)
    n_ev, W, H, n_bins = 60, 5, 4, 4
    ev = np.zeros(n_ev, dtype=[("x", np.int64), ("y", np.int64), ("t", np.int64),
                               ("p", np.int64)])
    ev["x"], ev["y"] = rng.integers(0, W, n_ev), rng.integers(0, H, n_ev)
    ev["t"], ev["p"] = np.sort(rng.integers(0, 1000, n_ev)), rng.integers(0, 2, n_ev)
    x, y = torch.from_numpy(ev["x"]), torch.from_numpy(ev["y"])
    t, p = torch.from_numpy(ev["t"]), torch.from_numpy(ev["p"])
    res = {}
    # ToFrame(n_time_bins)
    t_norm = (t - t[0]).float() / (t[-1] - t[0]).float()
    bins = (t_norm * n_bins).long().clamp_(max=n_bins - 1)
    frames = torch.zeros(n_bins, 2, H, W, dtype=torch.int16)
    frames.index_put_((bins, p, y, x), torch.ones(n_ev, dtype=torch.int16), accumulate=True)
    res["frames"] = frames.sum(dim=(1, 2, 3))
    res["frames_dtype"] = [str(frames.dtype).split(".")[-1]]
    # ToVoxelGrid
    voxel = torch.zeros(n_bins * H * W, dtype=torch.float32)
    ts = (n_bins - 1) * (t - t[0]).double() / (t[-1] - t[0]).double()
    pol = p.float() * 2 - 1
    tis = ts.floor().long()
    dts = (ts - tis).float()
    vals_left = pol * (1.0 - dts)
    vals_right = pol * dts
    valid = (tis >= 0) & (tis < n_bins)
    voxel.index_add_(0, (x + y * W + tis * W * H)[valid], vals_left[valid])
    valid = (tis + 1 >= 0) & (tis + 1 < n_bins)
    voxel.index_add_(0, (x + y * W + (tis + 1) * W * H)[valid], vals_right[valid])
    res["voxel"] = voxel.view(n_bins, H, W)
    # spikegen.latency
    data = torch.from_numpy(rng.random((3, 6)).astype(np.float32))
    num_steps, threshold, tau = 8, 0.01, 5
    data_c = torch.clamp(data, threshold + 1e-7)
    spike_time = tau * torch.log(data_c / (data_c - threshold))
    spike_time = torch.clamp_max(spike_time, num_steps - 1)
    tmax = torch.tensor(tau * math.log(threshold / (threshold - threshold + 1e-7)))
    spike_time = spike_time * (num_steps - 1) / tmax
    spike_time = torch.round(spike_time).long()
    lat = torch.zeros((num_steps,) + tuple(data.shape)).scatter(
        0, spike_time.unsqueeze(0), torch.ones(spike_time.unsqueeze(0).shape))
    res["latency"] = lat
    lin = torch.clamp_max((-tau * (data - 1)), num_steps - 1).round().long()
    res["latency_linear"] = torch.zeros(num_steps, 3, 6).scatter_(0, lin.unsqueeze(0), 1.)
    # spikegen.delta
    seq = normal(torch, rng, 7, 5).cumsum(0)
    data_offset = torch.cat((torch.zeros_like(seq[0]).unsqueeze(0), seq))[:-1]
    on = torch.ones_like(seq) * ((seq - data_offset) >= 0.5)
    off = -torch.ones_like(seq) * ((seq - data_offset) <= -0.5)
    res["delta"] = on + off
    res["delta_pad"] = torch.nn.functional.pad(seq.diff(dim=0), (0, 0, 1, 0)).gt(0.5).sum(0)
    return res


def spiking_cnn_program(torch):
    """SpikingJelly's CIFAR10DVS-style network on event frames: SeqToANNContainer(Conv2d,
    BatchNorm2d) with flatten(0, 1), MultiStepLIFNode, MaxPool2d and AvgPool, Dropout fixed by
    eval, frames normalised by their max, mean firing rate over T as the logits,
    mse to one-hot (SpikingJelly's DVS example), Adam with CosineAnnealingLR."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(3422)
    spike = _atan_spike(torch)
    LIF = _multistep_lif(torch, spike)

    class SeqToANNContainer(nn.Module):
        def __init__(self, *args):
            super().__init__()
            self.module = args[0] if len(args) == 1 else nn.Sequential(*args)

        def forward(self, x_seq):
            y_shape = [x_seq.shape[0], x_seq.shape[1]]
            y_seq = self.module(x_seq.flatten(0, 1).contiguous())
            y_shape.extend(y_seq.shape[1:])
            return y_seq.view(y_shape)

    net = nn.Sequential(
        SeqToANNContainer(nn.Conv2d(2, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4)),
        LIF(), SeqToANNContainer(nn.MaxPool2d(2, 2)),
        SeqToANNContainer(nn.Conv2d(4, 6, 3, padding=1, bias=False), nn.BatchNorm2d(6)),
        LIF(), SeqToANNContainer(nn.AdaptiveAvgPool2d(1), nn.Flatten()),
        SeqToANNContainer(nn.Linear(6, 3)), LIF())
    fill_(torch, [net[0].module[0].weight, net[3].module[0].weight], rng, 0.8)
    fill_(torch, net[6], rng, 4.0)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    T, B = 4, 3
    res = {"loss": [], "fr": [], "lr": []}
    for it in range(3):
        counts = rng.poisson(1.5, (B, T, 2, 8, 8)).astype(np.float32)
        frame = torch.from_numpy(counts)
        frame = frame / frame.amax(dim=(2, 3, 4), keepdim=True).clamp(min=1.)
        frame = frame.transpose(0, 1)
        label = torch.from_numpy(rng.integers(0, 3, B))
        label_onehot = F.one_hot(label, 3).float()
        out_fr = net(frame).mean(0)
        loss = F.mse_loss(out_fr, label_onehot)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["loss"].append(loss.item())
        res["fr"].append(out_fr.detach())
        res["lr"].append(sched.get_last_lr()[0])
    net.eval()
    with torch.no_grad():
        res["eval"] = net(frame).mean(0)
    res["v_seq"] = net[4].v_seq.mean(dim=(1, 2))
    res["running"] = [net[0].module[1].running_mean, net[3].module[1].running_var]
    res["conv_grad"] = net[3].module[0].weight.grad
    return res


def tdbn_program(torch):
    """Threshold-dependent BatchNorm (Zheng et al. 2021) as the STBP-tdBN repos write it: a
    BatchNorm3d subclass over (B, C, T, H, W) after permuting the time axis, normalised by
    alpha * V_th * (x - mean) / sqrt(var + eps), its own running statistics with momentum
    and unbiased running variance, the weight initialised to alpha * V_th; train and eval,
    and a tdLayer wrapper applying a 2-D conv at each step."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(3423)
    Vth = 0.5
    spike = _atan_spike(torch)

    class tdBatchNorm(nn.BatchNorm2d):
        def __init__(self, num_features, eps=1e-05, momentum=0.1, alpha=1, affine=True,
                     track_running_stats=True):
            super().__init__(num_features, eps, momentum, affine, track_running_stats)
            self.alpha = alpha

        def forward(self, input):
            exponential_average_factor = 0.0
            if self.training and self.track_running_stats:
                if self.num_batches_tracked is not None:
                    self.num_batches_tracked += 1
                    if self.momentum is None:
                        exponential_average_factor = 1.0 / float(self.num_batches_tracked)
                    else:
                        exponential_average_factor = self.momentum
            if self.training:
                mean = input.mean([0, 2, 3, 4])
                var = input.var([0, 2, 3, 4], unbiased=False)
                n = input.numel() / input.size(1)
                with torch.no_grad():
                    self.running_mean = exponential_average_factor * mean \
                        + (1 - exponential_average_factor) * self.running_mean
                    self.running_var = exponential_average_factor * var * n / (n - 1) \
                        + (1 - exponential_average_factor) * self.running_var
            else:
                mean = self.running_mean
                var = self.running_var
            input = self.alpha * Vth * (input - mean[None, :, None, None, None]) / (
                torch.sqrt(var[None, :, None, None, None] + self.eps))
            if self.affine:
                input = input * self.weight[None, :, None, None, None] \
                    + self.bias[None, :, None, None, None]
            return input

    class tdLayer(nn.Module):
        def __init__(self, layer, bn=None):
            super().__init__()
            self.layer, self.bn = layer, bn

        def forward(self, x):
            steps = x.shape[-1]
            x_ = torch.zeros(self.layer(x[..., 0]).shape + (steps,), device=x.device)
            for step in range(steps):
                x_[..., step] = self.layer(x[..., step])
            if self.bn is not None:
                x_ = self.bn(x_.permute(0, 1, 4, 2, 3).contiguous()).permute(0, 1, 3, 4, 2)
            return x_

    class LIFSpike(nn.Module):
        def forward(self, x):
            u = torch.zeros(x.shape[:-1], device=x.device)
            out = torch.zeros(x.shape, device=x.device)
            for step in range(x.shape[-1]):
                u = 0.25 * u * (1 - out[..., max(step - 1, 0)]) + x[..., step]
                out[..., step] = spike(u - Vth)
            return out

    bn = tdBatchNorm(4, alpha=1)
    nn.init.constant_(bn.weight, 1 * Vth)
    nn.init.zeros_(bn.bias)
    conv = tdLayer(nn.Conv2d(2, 4, 3, padding=1), bn)
    fc = tdLayer(nn.Linear(4 * 16, 3))
    fill_(torch, conv.layer, rng, 0.5)
    fill_(torch, fc, rng, 0.3)
    params = list(conv.parameters()) + list(fc.parameters())
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=1e-4)
    res = {"loss": [], "rm": []}
    for it in range(3):
        x = normal(torch, rng, 3, 2, 4, 4, 5)
        y = torch.from_numpy(rng.integers(0, 3, 3))
        s = LIFSpike()(conv(x))
        out = fc(s.flatten(1, 3)).mean(-1)
        loss = F.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["rm"].append(bn.running_mean.clone())
    res["rv"] = bn.running_var
    res["nbt"] = [int(bn.num_batches_tracked)]
    bn.eval()
    with torch.no_grad():
        res["eval"] = LIFSpike()(conv(x)).mean(dim=(0, 2, 3))
    res["w_grad"] = bn.weight.grad
    return res


def slayer_program(torch):
    """SLAYER (Shrestha & Orchard) in plain torch: the spike-response kernel
    t/tau * exp(1 - t/tau) sampled on the time grid, convolved causally over time by a
    grouped conv1d (flipped kernel, left padding), dense synapses as a Linear over the neuron
    axis with time last, a refractory kernel applied by a python loop, the spike function with
    an exponential pdf backward, axonal delays by integer shifts (F.pad then narrow) and
    SLAYER's numSpikes loss against a target spike count in a window."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(3424)
    Ts, T, tau_sr, tau_ref, theta = 1.0, 24, 3.0, 2.0, 2.0

    def srm_kernel(tau, mult=1.0, eps=0.01):
        vals, t = [], 0.
        while True:
            v = mult * t / tau * math.exp(1 - t / tau)
            if abs(v) < eps and t > tau:
                break
            vals.append(v)
            t += Ts
        return torch.tensor(vals)

    srm = srm_kernel(tau_sr)
    ref = srm_kernel(tau_ref, mult=-2 * theta)

    class SpikeFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, membrane, theta, scale):
            ctx.save_for_backward(membrane, torch.tensor([theta, scale]))
            return (membrane >= theta).to(membrane.dtype) / Ts

        @staticmethod
        def backward(ctx, grad_output):
            membrane, cfg = ctx.saved_tensors
            theta, scale = cfg.tolist()
            pdf = 1. / scale * torch.exp(-torch.abs(membrane - theta) / scale)
            return grad_output * pdf, None, None

    def psp(spikes):
        n, c, t = spikes.shape
        k = srm.flip(0).view(1, 1, -1).repeat(c, 1, 1)
        out = F.conv1d(F.pad(spikes, (len(srm) - 1, 0)), k, groups=c) * Ts
        return out

    def spike_with_refractory(u):
        u = u.clone()
        out = torch.zeros_like(u)
        steps = u.shape[-1]
        for t in range(steps):
            s = SpikeFunction.apply(u[..., t].clone(), theta, 1.0)
            out[..., t] = s
            n = min(len(ref) - 1, steps - t - 1)
            if n > 0:
                u[..., t + 1:t + 1 + n] = u[..., t + 1:t + 1 + n] \
                    + s.detach().unsqueeze(-1) * ref[1:n + 1]
        return out

    def delay(x, d):
        # d: integer delay per neuron
        out = torch.stack([F.pad(x[:, i], (int(di), 0)).narrow(-1, 0, x.shape[-1])
                           for i, di in enumerate(d.tolist())], dim=1)
        return out

    fc1, fc2 = nn.Linear(6, 8, bias=False), nn.Linear(8, 2, bias=False)
    fill_(torch, [fc1.weight, fc2.weight], rng, 1.5)
    delays = torch.tensor([0, 1, 2, 0, 3, 1, 0, 2])
    opt = torch.optim.Adam(list(fc1.parameters()) + list(fc2.parameters()), lr=0.05,
                           amsgrad=True)
    res = {"loss": [], "counts": []}
    for it in range(3):
        inp = (torch.from_numpy(rng.random((2, 6, T)).astype(np.float32)) < 0.2).float()
        target_count = torch.tensor([[6., 2.], [2., 6.]])
        u1 = fc1(psp(inp).transpose(1, 2)).transpose(1, 2)
        s1 = delay(spike_with_refractory(u1), delays)
        u2 = fc2(psp(s1).transpose(1, 2)).transpose(1, 2)
        s2 = spike_with_refractory(u2)
        # numSpikes: error spread uniformly over the window
        actual = torch.sum(s2[..., 2:T], dim=-1, keepdim=True) * Ts
        err = torch.zeros_like(s2)
        err[..., 2:T] = (actual - target_count.unsqueeze(-1)) / (T - 2)
        loss = 0.5 * torch.sum(err ** 2) * Ts
        opt.zero_grad()
        (err.detach() * s2).sum().backward()
        opt.step()
        res["loss"].append(loss.item())
        res["counts"].append(actual.squeeze(-1))
    res["srm"] = srm
    res["ref"] = ref
    res["psp"] = psp(inp)[0, :2]
    res["g1"] = fc1.weight.grad
    res["g2"] = fc2.weight.grad
    return res


def spikformer_program(torch):
    """Spikformer (Zhou et al. 2023): SPS patch splitting (Conv2d + BatchNorm2d + LIF +
    MaxPool2d over flatten(0, 1)), relative position embedding by a depthwise conv, spiking
    self-attention (Q, K, V spikes by Conv1d + BatchNorm1d + LIF, q @ k^T @ v * 0.125, no
    softmax, an attention LIF with threshold 0.5), MLP block, mean over T and tokens."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(3425)
    spike = _atan_spike(torch)

    def lif(v_th=1.0):
        Node = _multistep_lif(torch, spike, v_th=v_th)
        return Node()

    T, B, C, D, heads = 2, 2, 2, 8, 2

    class SSA(nn.Module):
        def __init__(self, dim, num_heads):
            super().__init__()
            self.num_heads, self.scale = num_heads, 0.125
            for n in ("q", "k", "v"):
                setattr(self, f"{n}_conv", nn.Conv1d(dim, dim, kernel_size=1, stride=1,
                                                     bias=False))
                setattr(self, f"{n}_bn", nn.BatchNorm1d(dim))
                setattr(self, f"{n}_lif", lif())
            self.attn_lif = lif(0.5)
            self.proj_conv = nn.Conv1d(dim, dim, kernel_size=1, stride=1)
            self.proj_bn = nn.BatchNorm1d(dim)
            self.proj_lif = lif()

        def _qkv(self, x_for_qkv, n, T, B, C, N):
            conv, bn, node = (getattr(self, f"{n}_{s}") for s in ("conv", "bn", "lif"))
            out = bn(conv(x_for_qkv)).reshape(T, B, C, N).contiguous()
            out = node(out)
            return out.transpose(-1, -2).reshape(T, B, N, self.num_heads,
                                                 C // self.num_heads).permute(0, 1, 3, 2, 4)

        def forward(self, x):
            T, B, C, N = x.shape
            x_for_qkv = x.flatten(0, 1)
            q, k, v = (self._qkv(x_for_qkv, n, T, B, C, N) for n in ("q", "k", "v"))
            x = k.transpose(-2, -1) @ v
            x = (q @ x) * self.scale
            x = x.transpose(3, 4).reshape(T, B, C, N).contiguous()
            x = self.attn_lif(x)
            x = x.flatten(0, 1)
            x = self.proj_lif(self.proj_bn(self.proj_conv(x)).reshape(T, B, C, N))
            return x

    class MLP(nn.Module):
        def __init__(self, dim, hidden):
            super().__init__()
            self.fc1_conv, self.fc1_bn = nn.Conv1d(dim, hidden, 1), nn.BatchNorm1d(hidden)
            self.fc1_lif = lif()
            self.fc2_conv, self.fc2_bn = nn.Conv1d(hidden, dim, 1), nn.BatchNorm1d(dim)
            self.fc2_lif = lif()

        def forward(self, x):
            T, B, C, N = x.shape
            x = self.fc1_lif(self.fc1_bn(self.fc1_conv(x.flatten(0, 1))).reshape(T, B, -1, N))
            x = self.fc2_lif(self.fc2_bn(self.fc2_conv(x.flatten(0, 1))).reshape(T, B, C, N))
            return x

    class SPS(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj_conv = nn.Conv2d(C, D, 3, 1, 1, bias=False)
            self.proj_bn = nn.BatchNorm2d(D)
            self.proj_lif = lif()
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=1,
                                        ceil_mode=False)
            self.rpe_conv = nn.Conv2d(D, D, 3, 1, 1, bias=False, groups=D)
            self.rpe_bn = nn.BatchNorm2d(D)
            self.rpe_lif = lif()

        def forward(self, x):
            T, B, _, H, W = x.shape
            x = self.proj_bn(self.proj_conv(x.flatten(0, 1))).reshape(T, B, -1, H, W)
            x = self.maxpool(self.proj_lif(x).flatten(0, 1).contiguous())
            x_feat = x.reshape(T, B, -1, H // 2, W // 2).contiguous()
            x = self.rpe_bn(self.rpe_conv(x)).reshape(T, B, -1, H // 2, W // 2)
            x = self.rpe_lif(x) + x_feat
            return x.flatten(-2)

    sps, attn, mlp, head = SPS(), SSA(D, heads), MLP(D, 16), nn.Linear(D, 3)
    mods = nn.ModuleList([sps, attn, mlp, head])
    fill_(torch, [p for n, p in mods.named_parameters() if "bn" not in n], rng, 0.7)
    opt = torch.optim.AdamW(mods.parameters(), lr=5e-3)
    res = {"loss": [], "spk": []}
    for it in range(2):
        img = torch.from_numpy(rng.random((B, C, 8, 8)).astype(np.float32)) * 3
        x = img.unsqueeze(0).repeat(T, 1, 1, 1, 1)
        y = torch.from_numpy(rng.integers(0, 3, B))
        tok = sps(x)
        tok = tok + attn(tok)
        tok = tok + mlp(tok)
        logits = head(tok.flatten(3).mean(3)).mean(0)
        loss = F.cross_entropy(logits, y, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["spk"].append(tok.detach().mean(dim=(0, 1, 3)))
    res["g"] = attn.q_conv.weight.grad
    res["rpe_g"] = sps.rpe_conv.weight.grad
    return res


def snntorch_lstm_program(torch):
    """snnTorch's spiking LSTMs: SLSTM (an nn.LSTMCell whose cell state drives a threshold,
    reset by subtraction of the detached spike) and SConv2dLSTM (a Conv2d over cat of input
    and hidden, split into gates by torch.split, max-pooled spikes), trained with
    mse_membrane_loss (targets_convert on/off levels per step), l1_rate_sparsity, the
    population-code accuracy and snnTorch's state_quant membrane quantiser (argmin over a
    level grid with a straight-through gradient)."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(3426)
    spike = _atan_spike(torch)

    class StateQuant(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input_, levels):
            idx = torch.argmin(torch.abs(input_.unsqueeze(-1) - levels), dim=-1)
            return levels[idx]

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output, None

    class SLSTM(nn.Module):
        def __init__(self, input_size, hidden_size, threshold=1.0):
            super().__init__()
            self.lstm_cell = nn.LSTMCell(input_size, hidden_size)
            self.threshold = threshold

        def forward(self, input_, syn, mem):
            reset = spike(mem - self.threshold).detach()
            mem, syn = self.lstm_cell(input_, (mem, syn))
            mem = mem - reset * self.threshold
            return spike(mem - self.threshold), syn, mem

    class SConv2dLSTM(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, threshold=0.2):
            super().__init__()
            self.out_channels, self.threshold = out_channels, threshold
            self.conv = nn.Conv2d(in_channels + out_channels, 4 * out_channels, kernel_size,
                                  padding=kernel_size // 2)

        def forward(self, input_, syn, mem):
            combined = torch.cat([input_, mem], dim=1)
            cc_i, cc_f, cc_o, cc_g = torch.split(self.conv(combined), self.out_channels, dim=1)
            i, f, o = torch.sigmoid(cc_i), torch.sigmoid(cc_f), torch.sigmoid(cc_o)
            g = torch.tanh(cc_g)
            syn = f * syn + i * g
            mem = o * torch.tanh(syn)
            spk = spike(mem - self.threshold)
            return spk, syn, mem - spk.detach() * self.threshold

    def targets_convert(targets, num_classes, on_target=1., off_target=0.):
        onehot = F.one_hot(targets, num_classes).float()
        return onehot * on_target + (1 - onehot) * off_target

    def population_accuracy(spk_out, targets, num_classes):
        num_steps, num_batch, num_outputs = spk_out.size()
        pop = torch.zeros(num_steps, num_batch, num_classes)
        for idx in range(num_classes):
            pop[:, :, idx] = spk_out[:, :, int(num_outputs * idx / num_classes):
                                     int(num_outputs * (idx + 1) / num_classes)].sum(-1)
        _, idx = pop.sum(dim=0).max(1)
        return torch.mean((targets == idx).float())

    conv_lstm = SConv2dLSTM(1, 2, 3)
    slstm = SLSTM(2 * 3 * 3, 6, threshold=0.3)
    mods = nn.ModuleList([conv_lstm, slstm])
    fill_(torch, mods, rng, 0.6)
    levels = torch.linspace(-1, 1, 9)
    opt = torch.optim.Adagrad(mods.parameters(), lr=0.05, lr_decay=1e-3)
    T, B = 5, 3
    res = {"loss": [], "acc": [], "quant": []}
    for it in range(2):
        x = (torch.from_numpy(rng.random((T, B, 1, 6, 6)).astype(np.float32)) < 0.3).float()
        y = torch.from_numpy(rng.integers(0, 3, B))
        syn1, mem1 = torch.zeros(B, 2, 6, 6), torch.zeros(B, 2, 6, 6)
        syn2, mem2 = torch.zeros(B, 6), torch.zeros(B, 6)
        spk_rec, mem_rec, first = [], [], []
        for t in range(T):
            spk1, syn1, mem1 = conv_lstm(x[t], syn1, mem1)
            first.append(spk1)
            pooled = F.max_pool2d(spk1, 2).flatten(1)
            spk2, syn2, mem2 = slstm(pooled, syn2, mem2)
            mem2 = StateQuant.apply(mem2, levels)
            spk_rec.append(spk2)
            mem_rec.append(mem2)
        spk_rec, mem_rec = torch.stack(spk_rec), torch.stack(mem_rec)
        target = targets_convert(y, 3, on_target=1.0, off_target=-0.5)
        mem_out = mem_rec.view(T, B, 3, 2).mean(-1)
        loss = sum(F.mse_loss(mem_out[t], target) for t in range(T)) / T
        loss = loss + 1e-2 * torch.stack(first).abs().sum() / B
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["acc"].append(population_accuracy(spk_rec.detach(), y, 3))
        res["quant"].append(mem_rec.detach()[-1])
    res["g"] = [conv_lstm.conv.weight.grad, slstm.lstm_cell.weight_hh.grad]
    return res


PROGRAMS = [event_encoding_program, spiking_cnn_program, tdbn_program, slayer_program,
            spikformer_program, snntorch_lstm_program]

# batch statistics over few samples and spike thresholds crossed by BatchNorm outputs:
# float32 reductions differ in the last bits
TOLERANCES = {"spiking_cnn_program": (1e-4, 1e-5), "tdbn_program": (1e-4, 1e-5),
              "spikformer_program": (1e-4, 1e-5), "slayer_program": (1e-4, 1e-5)}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
