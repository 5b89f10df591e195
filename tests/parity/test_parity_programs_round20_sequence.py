"""Sequence programs written the way speech, signal and dynamics code writes them, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights and data: a speech
front-end (stft/istft, a hand-built mel filterbank, SpecAugment masks, Conv1d + GRU, Griffin-Lim
by polar phases), a temporal conv net (causal dilated convolutions, both weight_norm forms,
clipping by value, ReduceLROnPlateau), a Mamba-like selective scan (sequential and parallel
cumsum/cumprod/logcumsumexp scans, depthwise Conv1d, RMSNorm, AdamW), a neural ODE (RK4 with
autograd through the steps, jacrev/vmap divergence, a Hutchinson estimator, LBFGS) and a
seq2seq model (packed bidirectional LSTM, Bahdanau attention, label smoothing with
ignore_index, greedy decoding)."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal
from tests.parity.test_parity_programs_round9 import assert_same_results

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def speech_program(torch):
    """Log-mel features from stft, SpecAugment, a Conv1d + GRU frame classifier, Griffin-Lim."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(20)
    sr, n_fft, hop, n_mels = 800, 32, 8, 6
    res = {}
    t = np.arange(160) / sr
    wav = np.sin(2 * np.pi * 60 * t)[None] * np.array([[1.0], [0.5]]) + 0.1 * rng.standard_normal(
        (2, 160))
    wav = torch.from_numpy(wav.astype(np.float32))
    window = torch.hann_window(n_fft)
    res["window"] = window
    spec = torch.stft(wav, n_fft, hop_length=hop, win_length=n_fft, window=window, center=True,
                      pad_mode="reflect", normalized=False, onesided=True, return_complex=True)
    res["spec_meta"] = [str(tuple(spec.shape)), _name(spec.dtype), spec.is_complex()]
    mag = spec.abs()
    phase = spec.angle()
    res["mag"], res["power"] = mag, spec.abs().pow(2)
    res["phase_cos"] = phase.cos() * (mag > 1e-3)
    recon = torch.istft(spec, n_fft, hop_length=hop, win_length=n_fft, window=window,
                        center=True, length=wav.shape[-1])
    res["istft_err"] = (recon - wav).abs().max()
    res["istft_shape"] = [str(tuple(recon.shape)), _name(recon.dtype)]

    # a mel filterbank built by hand (the HTK formula, triangles from linspace points)
    def hz_to_mel(f):
        return 2595.0 * torch.log10(1.0 + f / 700.0)

    def mel_to_hz(m):
        return 700.0 * (10 ** (m / 2595.0) - 1.0)

    n_freqs = n_fft // 2 + 1
    all_freqs = torch.linspace(0, sr // 2, n_freqs)
    m_min, m_max = hz_to_mel(torch.tensor(0.0)), hz_to_mel(torch.tensor(sr / 2.0))
    m_pts = torch.linspace(m_min, m_max, n_mels + 2)
    f_pts = mel_to_hz(m_pts)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1)
    down = (-1.0 * slopes[:, :-2]) / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    fb = torch.max(torch.zeros(1), torch.min(down, up))
    fb = torch.clamp(fb, min=0.0, max=1.0)
    enorm = 2.0 / (f_pts[2:n_mels + 2] - f_pts[:n_mels])
    fb = fb * enorm.unsqueeze(0)
    res["fb"] = fb
    mel = torch.matmul(spec.abs().pow(2.0).transpose(-1, -2), fb).transpose(-1, -2)
    logmel = torch.log(torch.clamp_min(mel, 1e-10))
    logmel = logmel.clamp_min(logmel.amax(dim=(-2, -1), keepdim=True) - 80.0)
    res["logmel"] = logmel
    # normalise per utterance
    mean = logmel.mean(dim=-1, keepdim=True)
    std = logmel.std(dim=-1, keepdim=True)
    feats = (logmel - mean) / (std + 1e-5)

    # SpecAugment: one frequency mask and one time mask per example
    def mask_along(x, axis, starts, widths):
        idx = torch.arange(x.shape[axis], device=x.device)
        shape = [1] * x.dim()
        shape[axis] = -1
        idx = idx.view(shape)
        s = starts.view(-1, *([1] * (x.dim() - 1)))
        w = widths.view(-1, *([1] * (x.dim() - 1)))
        return x.masked_fill((idx >= s) & (idx < s + w), 0.0)

    feats = mask_along(feats, 1, torch.tensor([1, 3]), torch.tensor([2, 1]))
    feats = mask_along(feats, 2, torch.tensor([4, 0]), torch.tensor([3, 5]))
    res["feats"] = feats
    res["mask_frac"] = [(feats == 0).sum().item()]

    class FrameModel(nn.Module):
        def __init__(self, n_classes=4):
            super().__init__()
            self.conv = nn.Conv1d(n_mels, 8, kernel_size=3, padding=1)
            self.bn = nn.BatchNorm1d(8)
            self.gru = nn.GRU(8, 6, num_layers=2, batch_first=True, bidirectional=True)
            self.out = nn.Linear(12, n_classes)

        def forward(self, x):
            x = F.relu(self.bn(self.conv(x)))
            x, h = self.gru(x.transpose(1, 2))
            return self.out(x), h

    model = FrameModel()
    fill_(torch, model, rng, 0.3)
    frames = feats.shape[-1]
    labels = torch.from_numpy(rng.integers(0, 4, (2, frames)))
    labels[1, -2:] = -100
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    res["loss"], res["gnorm"] = [], []
    for _ in range(3):
        logits, h = model(feats)
        loss = F.cross_entropy(logits.reshape(-1, 4), labels.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        res["gnorm"].append(nn.utils.clip_grad_norm_(model.parameters(), 5.0).item())
        opt.step()
        res["loss"].append(loss.item())
    res["h_shape"] = [str(tuple(h.shape))]
    res["gru_w"] = model.gru.weight_hh_l1_reverse
    res["acc"] = [((logits.argmax(-1) == labels) & (labels != -100)).sum().item()]

    # Griffin-Lim: keep the magnitude, iterate the phase
    with torch.no_grad():
        target = spec.abs()
        angles = torch.polar(torch.ones_like(target), torch.zeros_like(target))
        tprev = torch.tensor(0.0, dtype=target.dtype)
        momentum = 0.99
        errs = []
        for _ in range(4):
            inverse = torch.istft(target * angles, n_fft, hop_length=hop, window=window,
                                  length=wav.shape[-1])
            rebuilt = torch.stft(inverse, n_fft, hop_length=hop, window=window,
                                 return_complex=True)
            angles = rebuilt - tprev.mul_(momentum / (1 + momentum))
            angles = angles.div(angles.abs().add(1e-16))
            tprev = rebuilt
            errs.append((rebuilt.abs() - target).pow(2).mean().sqrt().item())
        res["gl_errs"] = errs
        res["gl_wave"] = torch.istft(target * angles, n_fft, hop_length=hop, window=window,
                                     length=wav.shape[-1])
        rot = spec * torch.polar(torch.ones(()), torch.tensor(0.3))
        res["rot"] = torch.view_as_real(rot)
        res["rot_dtype"] = [_name(rot.dtype), _name(torch.view_as_real(rot).dtype)]

    # a multi-resolution STFT loss (vocoder training): gradients flow through stft to the wave
    x = wav.clone().requires_grad_(True)
    y = wav.flip(-1)
    total = 0.0
    for fft_size, shift, win in [(16, 4, 12), (32, 8, 24)]:
        w = torch.hann_window(win, periodic=True, dtype=torch.float32)
        sx = torch.stft(x, fft_size, shift, win, w, return_complex=True)
        sy = torch.stft(y, fft_size, shift, win, w, return_complex=True)
        mx = torch.sqrt(torch.clamp(sx.real ** 2 + sx.imag ** 2, min=1e-7)).transpose(2, 1)
        my = torch.sqrt(torch.clamp(sy.real ** 2 + sy.imag ** 2, min=1e-7)).transpose(2, 1)
        sc = torch.norm(my - mx, p="fro") / torch.norm(my, p="fro")
        mag = F.l1_loss(torch.log(my), torch.log(mx))
        total = total + sc + mag
    total.backward()
    res["mrstft"] = [total.item()]
    res["mrstft_grad"] = x.grad
    # complex autograd: |stft|^2 via abs, and through istft back to the wave
    x.grad = None
    s = torch.stft(x, n_fft, hop, window=window, return_complex=True, normalized=True)
    back = torch.istft(s * 0.5, n_fft, hop, window=window, normalized=True, length=160)
    (s.abs().pow(2).sum() + back.pow(2).sum()).backward()
    res["complex_grad"] = x.grad
    # other windows and framing the way Kaldi-style front ends do it
    res["windows"] = torch.stack([torch.hamming_window(8, periodic=False),
                                  torch.blackman_window(8), torch.bartlett_window(8),
                                  torch.kaiser_window(8, periodic=True, beta=8.0),
                                  torch.hann_window(8, periodic=False)])
    pre = torch.cat([wav[:, :1], wav[:, 1:] - 0.97 * wav[:, :-1]], dim=-1)
    frames = pre.unfold(-1, 20, 10)
    frames = frames - frames.mean(dim=-1, keepdim=True)
    povey = torch.hann_window(20, periodic=False).pow(0.85)
    spec2 = torch.fft.rfft(frames * povey, n=32)
    res["frames_shape"] = [str(tuple(frames.shape)), str(tuple(spec2.shape))]
    energy = torch.log(frames.pow(2).sum(-1).clamp_min(torch.finfo(torch.float32).eps))
    res["energy"] = energy
    res["rfft_power"] = spec2.abs().square()
    res["stft_nocenter"] = torch.stft(wav[0], 16, 4, window=torch.hann_window(16), center=False,
                                      return_complex=True).abs()
    res["stft_onesided_false"] = torch.view_as_real(
        torch.stft(wav[:1], 8, 4, window=torch.ones(8), onesided=False, return_complex=True))
    db = 10.0 * torch.log10(torch.clamp(mel, min=1e-10))
    db = db - 10.0 * math.log10(max(1e-10, 1.0))
    res["db"] = torch.max(db, db.amax(dim=(-2, -1), keepdim=True) - 80.0)
    res["delta"] = torch.diff(logmel, dim=-1, prepend=logmel[..., :1])
    return res



def tcn_program(torch):
    """A temporal conv net: causal dilated Conv1d blocks with both weight_norm forms, residual
    1x1 downsampling, clipping by value and ReduceLROnPlateau."""
    nn, F = torch.nn, torch.nn.functional
    wn_new = torch.nn.utils.parametrizations.weight_norm
    wn_old = torch.nn.utils.weight_norm
    rng = np.random.default_rng(21)
    res = {}

    class Chomp1d(nn.Module):
        def __init__(self, chomp_size):
            super().__init__()
            self.chomp_size = chomp_size

        def forward(self, x):
            return x[:, :, :-self.chomp_size].contiguous()

    class TemporalBlock(nn.Module):
        """Locuslab's block: padding on both sides then a chomp (the old weight_norm)."""
        def __init__(self, n_in, n_out, k, dilation, dropout=0.0):
            super().__init__()
            padding = (k - 1) * dilation
            self.conv1 = wn_old(nn.Conv1d(n_in, n_out, k, stride=1, padding=padding,
                                          dilation=dilation))
            self.chomp1 = Chomp1d(padding)
            self.relu1 = nn.ReLU()
            self.dropout1 = nn.Dropout(dropout)
            self.conv2 = wn_old(nn.Conv1d(n_out, n_out, k, stride=1, padding=padding,
                                          dilation=dilation))
            self.chomp2 = Chomp1d(padding)
            self.net = nn.Sequential(self.conv1, self.chomp1, self.relu1, self.dropout1,
                                     self.conv2, self.chomp2, nn.ReLU(), nn.Dropout(dropout))
            self.downsample = nn.Conv1d(n_in, n_out, 1) if n_in != n_out else None
            self.relu = nn.ReLU()

        def forward(self, x):
            out = self.net(x)
            res_ = x if self.downsample is None else self.downsample(x)
            return self.relu(out + res_)

    class CausalConv1d(nn.Conv1d):
        """WaveNet's form: left padding with F.pad (the parametrized weight_norm)."""
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.left = (self.kernel_size[0] - 1) * self.dilation[0]

        def forward(self, x):
            return super().forward(F.pad(x, (self.left, 0)))

    class GatedBlock(nn.Module):
        def __init__(self, ch, dilation):
            super().__init__()
            self.conv = wn_new(CausalConv1d(ch, 2 * ch, 2, dilation=dilation))
            self.res = nn.Conv1d(ch, ch, 1)
            self.skip = nn.Conv1d(ch, ch, 1)

        def forward(self, x):
            a, b = self.conv(x).chunk(2, dim=1)
            h = torch.tanh(a) * torch.sigmoid(b)
            return (x + self.res(h)) * math.sqrt(0.5), self.skip(h)

    class TCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.Sequential(TemporalBlock(2, 4, 3, 1), TemporalBlock(4, 4, 3, 2))
            self.gated = nn.ModuleList([GatedBlock(4, d) for d in (1, 2, 4)])
            self.head = nn.Linear(4, 1)

        def forward(self, x):
            h = self.blocks(x)
            skips = 0
            for blk in self.gated:
                h, s = blk(h)
                skips = skips + s
            return self.head(F.relu(skips).transpose(1, 2)).squeeze(-1)

    model = TCN()
    res["keys"] = list(model.state_dict().keys())
    res["params"] = [n for n, _ in model.named_parameters()]
    res["parametrized"] = [torch.nn.utils.parametrize.is_parametrized(model.gated[0].conv),
                           torch.nn.utils.parametrize.is_parametrized(model.blocks[0].conv1)]
    res["g_shapes"] = [str(tuple(model.blocks[0].conv1.weight_g.shape)),
                       str(tuple(model.gated[0].conv.parametrizations.weight.original0.shape))]
    fill_(torch, model, rng, 0.4)
    x = normal(torch, rng, 3, 2, 12)
    y = x[:, 0].roll(2, dims=-1) * 0.5
    # causality: the output at t does not depend on inputs after t
    xc = x.clone().requires_grad_(True)
    model(xc)[:, 5].sum().backward()
    res["causal"] = [bool((xc.grad[:, :, 6:] == 0).all()), bool((xc.grad[:, :, :6] != 0).any())]
    res["causal_grad"] = xc.grad
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=1,
                                                       threshold=1e-2, cooldown=1, min_lr=1e-3)
    res["loss"], res["lr"], res["gmax"] = [], [], []
    for step in range(6):
        pred = model(x)
        loss = F.mse_loss(pred, y)
        opt.zero_grad()
        loss.backward()
        res["no_grad"] = [n for n, p in model.named_parameters() if p.grad is None]
        res["gmax"].append(max(p.grad.abs().max().item() for p in model.parameters()
                               if p.grad is not None))
        nn.utils.clip_grad_value_(model.parameters(), clip_value=0.5)
        opt.step()
        res["loss"].append(loss.item())
        # a validation loss that plateaus so the scheduler fires
        sched.step(1.0 if step > 0 else 2.0)
        res["lr"].append(opt.param_groups[0]["lr"])
    res["last_lr"] = sched.get_last_lr()
    res["sched_state"] = sorted(k for k in sched.state_dict().keys())
    res["num_bad"] = [sched.num_bad_epochs, sched.cooldown_counter]
    res["weights"] = [model.blocks[0].conv1.weight_g, model.blocks[1].conv2.weight_v,
                      model.gated[2].conv.parametrizations.weight.original0,
                      model.gated[1].conv.weight, model.blocks[0].conv1.weight]
    res["pred"] = model(x)
    res["nodes"] = [type(model.gated[0].conv.weight.grad_fn).__name__,
                    type(model.blocks[0].conv1.weight.grad_fn).__name__]
    # removing both kinds of weight norm keeps the function
    with torch.no_grad():
        before = model(x)
        torch.nn.utils.remove_weight_norm(model.blocks[0].conv1)
        torch.nn.utils.parametrize.remove_parametrizations(model.gated[0].conv, "weight")
        res["removed_diff"] = (model(x) - before).abs().max()
    res["keys_after"] = list(model.state_dict().keys())
    # weight_norm over dim=None (a scalar g) and another dim
    lin = wn_new(nn.Linear(3, 2), dim=None)
    res["g_none"] = [str(tuple(lin.parametrizations.weight.original0.shape))]
    conv = wn_old(nn.Conv1d(2, 3, 2), name="weight", dim=1)
    res["g_dim1"] = [str(tuple(conv.weight_g.shape))]
    return res



def ssm_program(torch):
    """A Mamba-like block: softplus dt, discretised A, a sequential scan and the parallel
    cumsum/logcumsumexp forms, a diagonal complex (S4D) kernel, depthwise causal Conv1d,
    nn.RMSNorm, SiLU gating and AdamW."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(22)
    d_model, d_inner, d_state, d_conv, dt_rank = 4, 8, 3, 3, 2
    B, L = 2, 6
    res = {}

    class Mamba(nn.Module):
        def __init__(self):
            super().__init__()
            self.in_proj = nn.Linear(d_model, 2 * d_inner, bias=False)
            self.conv1d = nn.Conv1d(d_inner, d_inner, d_conv, groups=d_inner,
                                    padding=d_conv - 1, bias=True)
            self.x_proj = nn.Linear(d_inner, dt_rank + 2 * d_state, bias=False)
            self.dt_proj = nn.Linear(dt_rank, d_inner, bias=True)
            A = torch.arange(1, d_state + 1, dtype=torch.float32).repeat(d_inner, 1)
            self.A_log = nn.Parameter(torch.log(A))
            self.A_log._no_weight_decay = True
            self.D = nn.Parameter(torch.ones(d_inner))
            self.out_proj = nn.Linear(d_inner, d_model, bias=False)
            self.norm = nn.RMSNorm(d_model, eps=1e-5)

        def ssm(self, x, parallel):
            A = -torch.exp(self.A_log.float())
            D = self.D.float()
            dbc = self.x_proj(x)
            delta, Bm, Cm = dbc.split(split_size=[dt_rank, d_state, d_state], dim=-1)
            delta = F.softplus(self.dt_proj(delta))
            dA = torch.exp(torch.einsum("bld,dn->bldn", delta, A))
            dBu = torch.einsum("bld,bln,bld->bldn", delta, Bm, x)
            if parallel:
                # h_t = sum_s exp(sum_{s<r<=t} log dA_r) dBu_s, by cumulative sums in log space
                log_dA = torch.einsum("bld,dn->bldn", delta, A)
                cum = torch.cumsum(log_dA, dim=1)
                w = torch.exp(cum.unsqueeze(2) - cum.unsqueeze(1))
                causal = torch.tril(torch.ones(L, L, dtype=torch.bool))[None, :, :, None, None]
                w = w.masked_fill(~causal, 0.0)
                hs = torch.einsum("btsdn,bsdn->btdn", w, dBu)
            else:
                h = torch.zeros(x.shape[0], d_inner, d_state, device=x.device)
                states = []
                for i in range(x.shape[1]):
                    h = dA[:, i] * h + dBu[:, i]
                    states.append(h)
                hs = torch.stack(states, dim=1)
            y = torch.einsum("bldn,bln->bld", hs, Cm)
            return y + x * D

        def forward(self, u, parallel=False):
            length = u.shape[1]
            xz = self.in_proj(self.norm(u))
            x, z = xz.chunk(2, dim=-1)
            x = x.transpose(1, 2)
            x = self.conv1d(x)[:, :, :length]
            x = F.silu(x.transpose(1, 2))
            y = self.ssm(x, parallel)
            y = y * F.silu(z)
            return u + self.out_proj(y)

    model = Mamba()
    res["A_init"] = model.A_log
    fill_(torch, [p for n, p in model.named_parameters() if n != "A_log"], rng, 0.4)
    res["rms_repr"] = [repr(model.norm), str(tuple(model.norm.weight.shape))]
    u = normal(torch, rng, B, L, d_model)
    seq = model(u)
    par = model(u, parallel=True)
    res["seq"] = seq
    res["seq_vs_par"] = (seq - par).abs().max()
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (no_decay if getattr(p, "_no_weight_decay", False) or p.ndim < 2 else decay).append(p)
    res["groups"] = [len(decay), len(no_decay)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=5e-3, betas=(0.9, 0.95), eps=1e-8)
    target = u.roll(1, dims=1)
    res["loss"] = []
    for step in range(4):
        out = model(u, parallel=step % 2 == 1)
        loss = F.mse_loss(out, target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["A_log"] = model.A_log
    res["conv_w"] = model.conv1d.weight
    res["rms_w"] = model.norm.weight
    res["state"] = sorted(opt.state_dict()["state"][0].keys())
    # mixed precision: bfloat16 matmuls and convolutions, the scan's exp and einsums as they
    # fall, the float32 RMSNorm weight beside bfloat16 activations
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        amp_seq, amp_par = model(u), model(u, parallel=True)
        res["amp_dtypes"] = [_name(amp_seq.dtype), _name(model.in_proj(u).dtype),
                             _name(model.norm(u.bfloat16()).dtype)]
        res["amp_seq"] = amp_seq
        res["amp_par"] = amp_par

    # the multiplicative parallel scan (cumprod) and the log-space one (logcumsumexp)
    a = torch.from_numpy(rng.uniform(0.5, 0.99, (B, L)).astype(np.float32)).requires_grad_()
    bx = normal(torch, rng, B, L).requires_grad_()
    h, seq_h = torch.zeros(B), []
    for t in range(L):
        h = a[:, t] * h + bx[:, t]
        seq_h.append(h)
    seq_h = torch.stack(seq_h, dim=1)
    a_star = torch.cumprod(a, dim=1)
    par_h = a_star * torch.cumsum(bx / a_star, dim=1)
    res["cumprod_scan"] = par_h
    res["cumprod_vs_seq"] = (par_h - seq_h).abs().max()
    ga, gb = torch.autograd.grad(par_h.pow(2).sum(), (a, bx), retain_graph=True)
    res["cumprod_grads"] = [ga, gb]
    # Heinsen's log-space scan: positive values through logcumsumexp
    log_a = torch.log(a)
    log_b = torch.log(bx.abs() + 0.1)
    a_star = torch.cumsum(log_a, dim=1)
    log_h = a_star + torch.logcumsumexp(log_b - a_star, dim=1)
    res["lcse_scan"] = torch.exp(log_h)
    ga, gb = torch.autograd.grad(log_h.sum(), (a, bx))
    res["lcse_grads"] = [ga, gb]
    res["lcse_dtype"] = [_name(log_h.dtype), _name(torch.logcumsumexp(
        torch.tensor([0.0, 1.0], dtype=torch.float64), 0).dtype)]

    # S4D: a complex diagonal A discretised by ZOH, the kernel by Vandermonde and rfft conv
    N, H = 4, 3
    log_dt = torch.from_numpy(np.linspace(math.log(1e-3), math.log(1e-1), H).astype(np.float32))
    log_dt.requires_grad_(True)
    C = torch.view_as_complex(normal(torch, rng, H, N // 2, 2) * 0.5).requires_grad_(True)
    log_A_real = torch.log(0.5 * torch.ones(H, N // 2))
    A_imag = math.pi * torch.arange(N // 2).repeat(H, 1)
    dt = torch.exp(log_dt)
    A = -torch.exp(log_A_real) + 1j * A_imag
    res["A_dtype"] = [_name(A.dtype)]
    dtA = A * dt.unsqueeze(-1)
    K = dtA.unsqueeze(-1) * torch.arange(L, device=A.device)
    Ck = C * (torch.exp(dtA) - 1.0) / A
    K = 2 * torch.einsum("hn, hnl -> hl", Ck, torch.exp(K)).real
    res["s4d_kernel"] = K
    xs = normal(torch, rng, B, H, L)
    k_f = torch.fft.rfft(K, n=2 * L)
    u_f = torch.fft.rfft(xs, n=2 * L)
    y = torch.fft.irfft(u_f * k_f, n=2 * L)[..., :L]
    res["s4d_y"] = y
    gdt, gC = torch.autograd.grad(y.pow(2).sum(), (log_dt, C))
    res["s4d_grads"] = [gdt, torch.view_as_real(gC)]
    return res



def ode_program(torch):
    """A neural ODE: fixed-step RK4 and Dormand-Prince integrators with autograd through the
    steps, the exact divergence by jacrev/vmap and a Hutchinson estimate (FFJORD), and an
    LBFGS fit of the ODE's parameters."""
    nn, F = torch.nn, torch.nn.functional
    func = torch.func
    rng = np.random.default_rng(23)
    res = {}

    class ODEFunc(nn.Module):
        def __init__(self, dim=2, hidden=8):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(dim + 1, hidden), nn.Tanh(),
                                     nn.Linear(hidden, hidden), nn.Softplus(beta=2.0),
                                     nn.Linear(hidden, dim))
            self.nfe = 0

        def forward(self, t, y):
            self.nfe += 1
            tt = torch.ones_like(y[..., :1]) * t
            return self.net(torch.cat([tt, y], dim=-1))

    def rk4(f, y0, t):
        ys = [y0]
        y = y0
        for t0, t1 in zip(t[:-1], t[1:]):
            dt = t1 - t0
            k1 = f(t0, y)
            k2 = f(t0 + dt / 2, y + dt * k1 / 2)
            k3 = f(t0 + dt / 2, y + dt * k2 / 2)
            k4 = f(t1, y + dt * k3)
            y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            ys.append(y)
        return torch.stack(ys)

    # Dormand-Prince 5(4) tableau, fixed steps, with the embedded error estimate
    c = [0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1, 1]
    a = [[], [1 / 5], [3 / 40, 9 / 40], [44 / 45, -56 / 15, 32 / 9],
         [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
         [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
         [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84]]
    b5 = torch.tensor([35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0],
                      dtype=torch.float64)
    b4 = torch.tensor([5179 / 57600, 0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100,
                       1 / 40], dtype=torch.float64)

    def dopri5(f, y0, t0, t1, steps):
        h = (t1 - t0) / steps
        y, t, errs = y0, t0, []
        for _ in range(steps):
            ks = []
            for i in range(7):
                yi = y + h * sum(aij * k for aij, k in zip(a[i], ks)) if i else y
                ks.append(f(t + c[i] * h, yi))
            k = torch.stack(ks, dim=-1)
            y_new = y + h * (k @ b5.to(y.dtype))
            errs.append((h * (k @ (b5 - b4).to(y.dtype))).abs().max())
            y, t = y_new, t + h
        return y, torch.stack(errs)

    f = ODEFunc()
    fill_(torch, f, rng, 0.5)
    y0 = normal(torch, rng, 5, 2)
    t = torch.linspace(0.0, 1.0, 5)
    ys = rk4(f, y0, t)
    res["rk4"] = ys
    res["nfe"] = [f.nfe]
    loss = ys[-1].pow(2).mean()
    grads = torch.autograd.grad(loss, list(f.parameters()))
    res["rk4_grads"] = list(grads)
    yd, errs = dopri5(f, y0, 0.0, 1.0, 3)
    res["dopri"] = yd
    res["dopri_vs_rk4"] = (yd - ys[-1]).abs().max()
    res["dopri_err"] = errs
    # float64 integration of a linear ODE against its exact solution
    A = torch.tensor([[0.0, 1.0], [-1.0, -0.1]], dtype=torch.float64)
    y0d = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    yl, _ = dopri5(lambda t, y: y @ A.T, y0d, 0.0, 2.0, 10)
    exact = y0d @ torch.linalg.matrix_exp(2.0 * A).T
    res["linear_err"] = (yl - exact).abs().max()
    res["linear_dtype"] = [_name(yl.dtype)]

    # FFJORD: log-density change through the trace of df/dy
    params = dict(f.named_parameters())

    def f_single(p, t, y):
        return func.functional_call(f, p, (t, y))

    def exact_div(p, t, y):
        jac = func.vmap(func.jacrev(f_single, argnums=2), in_dims=(None, None, 0))(p, t, y)
        return jac.diagonal(dim1=-2, dim2=-1).sum(-1)

    div = exact_div(params, torch.tensor(0.5), y0)
    res["div_exact"] = div
    # against a loop over autograd.grad
    y_req = y0.clone().requires_grad_(True)
    out = f(torch.tensor(0.5), y_req)
    tr = sum(torch.autograd.grad(out[:, i].sum(), y_req, create_graph=True)[0][:, i]
             for i in range(2))
    res["div_loop"] = tr
    gen = torch.Generator().manual_seed(0)
    n_samples = 4
    eps_all = torch.randn(n_samples, *y0.shape, generator=gen)
    res["eps_shape"] = [str(tuple(eps_all.shape)), _name(eps_all.dtype)]
    # the streams differ between libraries: Rademacher noise from NumPy
    eps_all = torch.from_numpy(np.sign(rng.standard_normal((n_samples, 5, 2))).astype(np.float32))
    est = 0
    for e in eps_all:
        y_req = y0.clone().requires_grad_(True)
        fy = f(torch.tensor(0.5), y_req)
        e_dzdx = torch.autograd.grad(fy, y_req, e, create_graph=True)[0]
        est = est + (e_dzdx * e).sum(-1)
    res["hutchinson"] = est / n_samples
    # vjp form of the same estimator through torch.func
    _, vjp_fn = func.vjp(lambda y: f_single(params, torch.tensor(0.5), y), y0)
    res["hutch_func"] = sum((vjp_fn(e)[0] * e).sum(-1) for e in eps_all) / n_samples
    # randn_like under a seeded generator: same stream twice
    g1 = torch.Generator().manual_seed(3)
    r1 = torch.randn(y0.shape, generator=g1)
    r2 = torch.randn(y0.shape, generator=g1.manual_seed(3))
    res["gen_repeat"] = [bool(torch.equal(r1, r2)), g1.initial_seed()]
    torch.manual_seed(5)
    a1 = torch.randn_like(y0)
    torch.manual_seed(5)
    res["randn_like_repeat"] = [bool(torch.equal(a1, torch.randn_like(y0))),
                                _name(torch.randn_like(y0, dtype=torch.float64).dtype)]

    # fit the ODE's parameters to a trajectory with LBFGS (strong Wolfe line search)
    target = ys.detach() * 0.8
    g = ODEFunc()
    fill_(torch, g, rng, 0.3)
    opt = torch.optim.LBFGS(g.parameters(), lr=1, max_iter=6, history_size=4,
                            line_search_fn="strong_wolfe")
    res["lbfgs"] = []

    def closure():
        opt.zero_grad()
        loss = F.mse_loss(rk4(g, y0, t), target)
        loss.backward()
        return loss

    for _ in range(2):
        res["lbfgs"].append(opt.step(closure).item())
    res["lbfgs_final"] = [F.mse_loss(rk4(g, y0, t), target).item()]
    res["lbfgs_state"] = [opt.state[opt._params[0]]["func_evals"],
                          opt.state[opt._params[0]]["n_iter"]]
    res["lbfgs_w"] = g.net[0].weight
    opt2 = torch.optim.LBFGS(g.parameters(), lr=0.5, max_iter=3)
    res["lbfgs_plain"] = [opt2.step(closure).item()]
    return res



def seq2seq_program(torch):
    """A packed bidirectional LSTM encoder, a Bahdanau-attention GRU decoder with teacher
    forcing, label-smoothed CE with ignore_index, and greedy decoding with early stop."""
    nn, F = torch.nn, torch.nn.functional
    rnn_utils = torch.nn.utils.rnn
    rng = np.random.default_rng(24)
    PAD, SOS, EOS, V, E, H = 0, 1, 2, 10, 6, 5
    res = {}

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V, E, padding_idx=PAD)
            self.rnn = nn.LSTM(E, H, num_layers=2, bidirectional=True, batch_first=False,
                               dropout=0.0)
            self.fc = nn.Linear(2 * H, H)

        def forward(self, src, src_len):
            embedded = self.embedding(src)
            packed = rnn_utils.pack_padded_sequence(embedded, src_len.to("cpu"),
                                                    enforce_sorted=False)
            packed_out, (hidden, cell) = self.rnn(packed)
            outputs, out_len = rnn_utils.pad_packed_sequence(packed_out, padding_value=0.0,
                                                             total_length=src.shape[0])
            hidden = torch.tanh(self.fc(torch.cat((hidden[-2, :, :], hidden[-1, :, :]), dim=1)))
            return outputs, hidden, packed, out_len

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.Linear(2 * H + H, H)
            self.v = nn.Linear(H, 1, bias=False)

        def forward(self, hidden, enc, mask):
            src_len = enc.shape[0]
            hidden = hidden.unsqueeze(1).repeat(1, src_len, 1)
            enc = enc.permute(1, 0, 2)
            energy = torch.tanh(self.attn(torch.cat((hidden, enc), dim=2)))
            attention = self.v(energy).squeeze(2)
            attention = attention.masked_fill(mask == 0, -1e10)
            return F.softmax(attention, dim=1)

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = Attention()
            self.embedding = nn.Embedding(V, E)
            self.rnn = nn.GRU(2 * H + E, H)
            self.fc_out = nn.Linear(2 * H + H + E, V)

        def forward(self, inp, hidden, enc, mask):
            embedded = self.embedding(inp.unsqueeze(0))
            a = self.attention(hidden, enc, mask).unsqueeze(1)
            weighted = torch.bmm(a, enc.permute(1, 0, 2)).permute(1, 0, 2)
            output, hidden = self.rnn(torch.cat((embedded, weighted), dim=2), hidden.unsqueeze(0))
            pred = self.fc_out(torch.cat((output.squeeze(0), weighted.squeeze(0),
                                          embedded.squeeze(0)), dim=1))
            return pred, hidden.squeeze(0), a.squeeze(1)

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder, self.decoder = Encoder(), Decoder()

        def create_mask(self, src):
            return (src != PAD).permute(1, 0)

        def forward(self, src, src_len, trg, teacher):
            trg_len, batch = trg.shape
            outputs = torch.zeros(trg_len, batch, V)
            enc, hidden, _, _ = self.encoder(src, src_len)
            inp = trg[0, :]
            mask = self.create_mask(src)
            for t in range(1, trg_len):
                out, hidden, _ = self.decoder(inp, hidden, enc, mask)
                outputs[t] = out
                inp = trg[t] if teacher[t] else out.argmax(1)
            return outputs

    model = Seq2Seq()
    fill_(torch, model, rng, 0.4)
    with torch.no_grad():
        model.encoder.embedding.weight[PAD].fill_(0)
    lens = [5, 3, 4, 2]
    src = torch.full((5, 4), PAD, dtype=torch.long)
    for j, n in enumerate(lens):
        src[:n, j] = torch.from_numpy(rng.integers(3, V, n))
    src_len = torch.tensor(lens)
    trg = torch.from_numpy(rng.integers(3, V, (6, 4)))
    trg[0] = SOS
    trg[4:, 1] = PAD
    trg[3, 1] = EOS
    enc, hidden, packed, out_len = model.encoder(src, src_len)
    res["packed"] = [str(tuple(packed.data.shape)), type(packed).__name__]
    res["packed_idx"] = [packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices,
                         out_len]
    res["enc"] = enc
    res["enc_pad_zero"] = [bool((enc[3:, 1] == 0).all())]
    res["hidden"] = hidden
    # pack_sequence / pad_sequence / unpad_sequence round trip
    seqs = [torch.arange(n, dtype=torch.float32) + 1 for n in lens]
    res["pad_seq"] = padded = rnn_utils.pad_sequence(seqs, batch_first=True, padding_value=-1.0)
    res["pad_left"] = rnn_utils.pad_sequence(seqs, batch_first=True, padding_side="left")
    ps = rnn_utils.pack_sequence(seqs, enforce_sorted=False)
    res["pack_seq_data"] = ps.data
    back = rnn_utils.unpad_sequence(padded, torch.tensor(lens), batch_first=True)
    res["unpad"] = [str(tuple(b.shape)) for b in back]
    res["unpack"] = torch.cat(rnn_utils.unpack_sequence(ps))

    criterion = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=0.1)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    teacher_plan = [[True, True, False, True, False, True], [True, False, True, True, True, True],
                    [True, True, True, False, False, False]]
    res["loss"], res["gnorm"] = [], []
    model.train()
    for plan in teacher_plan:
        opt.zero_grad()
        output = model(src, src_len, trg, plan)
        out_dim = output.shape[-1]
        loss = criterion(output[1:].view(-1, out_dim), trg[1:].view(-1))
        loss.backward()
        res["gnorm"].append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item())
        opt.step()
        res["loss"].append(loss.item())
    res["ls_sum"] = [F.cross_entropy(output[1:].reshape(-1, V), trg[1:].reshape(-1),
                                     ignore_index=PAD, label_smoothing=0.2,
                                     reduction="sum").item()]
    res["ls_none"] = F.cross_entropy(output[1:].reshape(-1, V), trg[1:].reshape(-1),
                                     ignore_index=PAD, label_smoothing=0.2, reduction="none")
    res["weights"] = [model.encoder.rnn.weight_hh_l1_reverse, model.decoder.attention.v.weight]

    # greedy decoding with early stop once every sequence emitted EOS
    model.eval()
    with torch.no_grad():
        enc, hidden, _, _ = model.encoder(src, src_len)
        mask = model.create_mask(src)
        inp = torch.full((4,), SOS, dtype=torch.long)
        finished = torch.zeros(4, dtype=torch.bool)
        tokens, attns = [], []
        for _ in range(8):
            out, hidden, a = model.decoder(inp, hidden, enc, mask)
            out[:, EOS] += 2.0
            inp = out.argmax(1)
            inp = inp.masked_fill(finished, PAD)
            tokens.append(inp)
            attns.append(a)
            finished |= inp == EOS
            if finished.all():
                break
        res["decoded"], res["steps"] = torch.stack(tokens, dim=1), [len(tokens)]
        res["attn"] = torch.stack(attns, dim=1)
        res["attn_masked"] = [bool((res["attn"][1, :, 3:] < 1e-9).all())]
    return res


PROGRAMS = [speech_program, tcn_program, ssm_program, ode_program,
            seq2seq_program]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    assert_same_results(program(ember), program(torch), rtol=2e-4, atol=2e-5)
