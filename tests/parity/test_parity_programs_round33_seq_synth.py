"""More music and video programs written as their reference repositories write them in torch,
run once with `torch` bound to ember and once to PyTorch from the same NumPy weights:
Jukebox-lite (EMA-updated VQ bottleneck with codebook reset, multi-scale spectral loss on STFT
magnitudes, commit loss, straight-through), MIDI-DDSP-lite (harmonic synthesiser by cumulative
phase, linear upsampling of controls, filtered noise by rfft/irfft, exp_sigmoid), E3D-LSTM
(Conv3d gates, recall attention over the memory history) and MCVD-lite (masked conditional
denoiser over past/future frames with a cosine noise schedule)."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def jukebox_vq_program(torch):
    """openai/jukebox vqvae/bottleneck.py BottleneckBlock (simplified sizes)."""
    rng = np.random.default_rng(0)
    nn, F = torch.nn, torch.nn.functional
    k_bins, emb_width, mu = 6, 4, 0.9

    class BottleneckBlock(nn.Module):
        def __init__(self, k_bins, emb_width, mu):
            super().__init__()
            self.k_bins, self.emb_width, self.mu = k_bins, emb_width, mu
            self.threshold = 1.0
            self.register_buffer("k", torch.zeros(self.k_bins, self.emb_width))

        def init_k(self, x):
            self.init = True
            self.k = x[:self.k_bins].clone()
            self.k_sum = self.k.clone()
            self.k_elem = torch.ones(self.k_bins, device=self.k.device)

        def update_k(self, x, x_l, y_rand):
            mu, emb_width, k_bins = self.mu, self.emb_width, self.k_bins
            with torch.no_grad():
                x_l_onehot = torch.zeros(k_bins, x.shape[0], device=x.device)
                x_l_onehot.scatter_(0, x_l.view(1, x.shape[0]), 1)
                _k_sum = torch.matmul(x_l_onehot, x)
                _k_elem = x_l_onehot.sum(dim=-1)
                old_k = self.k
                self.k_sum = mu * self.k_sum + (1. - mu) * _k_sum
                self.k_elem = mu * self.k_elem + (1. - mu) * _k_elem
                usage = (self.k_elem.view(k_bins, 1) >= self.threshold).float()
                self.k = usage * (self.k_sum.view(k_bins, emb_width)
                                  / self.k_elem.view(k_bins, 1)) + (1 - usage) * y_rand
                _k_prob = _k_elem / torch.sum(_k_elem)
                entropy = -torch.sum(_k_prob * torch.log(_k_prob + 1e-8))
                used_curr = (_k_elem >= self.threshold).sum()
                usage = torch.sum(usage)
                dk = torch.norm(self.k - old_k) / np.sqrt(np.prod(old_k.shape))
            return dict(entropy=entropy, used_curr=used_curr, usage=usage, dk=dk)

        def preprocess(self, x):
            x = x.permute(0, 2, 1).contiguous()
            x = x.view(-1, x.shape[-1])
            prenorm = torch.norm(x - torch.mean(x)) / np.sqrt(np.prod(x.shape))
            return x, prenorm

        def quantise(self, x):
            k_w = self.k.t()
            distance = torch.sum(x ** 2, dim=-1, keepdim=True) - 2 * torch.matmul(x, k_w) + \
                torch.sum(k_w ** 2, dim=0, keepdim=True)
            min_distance, x_l = torch.min(distance, dim=-1)
            fit = torch.mean(min_distance)
            return x_l, fit

        def forward(self, x, y_rand, update_k=True):
            N, width, T = x.shape
            x, prenorm = self.preprocess(x)
            if update_k and not self.init:
                self.init_k(x)
            x_l, fit = self.quantise(x)
            x_d = F.embedding(x_l, self.k)
            update_metrics = self.update_k(x, x_l, y_rand) if update_k else {}
            commit_loss = torch.norm(x_d.detach() - x) ** 2 / np.prod(x.shape)
            x_d = x + (x_d - x).detach()
            x_d = x_d.view(N, T, -1).permute(0, 2, 1).contiguous()
            x_l = x_l.view(N, T)
            return x_l, x_d, commit_loss, dict(fit=fit, pn=prenorm, **update_metrics)

    def spec(x, n_fft, hop):
        return torch.stft(x, n_fft, hop, window=torch.hann_window(n_fft, device=x.device),
                          return_complex=True).abs()

    def multispectral_loss(x_in, x_out):
        losses = []
        for n_fft, hop in ((16, 4), (8, 2)):
            s_in, s_out = spec(x_in, n_fft, hop), spec(x_out, n_fft, hop)
            losses.append(torch.norm(s_in - s_out, p=2, dim=(1, 2)).mean() /
                          torch.norm(s_in, dim=(1, 2)).clamp(min=1e-3).mean())
        return sum(losses) / len(losses)

    block = BottleneckBlock(k_bins, emb_width, mu)
    block.init = False
    enc = nn.Conv1d(1, emb_width, 4, stride=2, padding=1)
    dec = nn.ConvTranspose1d(emb_width, 1, 4, stride=2, padding=1)
    fill_(torch, enc, rng)
    fill_(torch, dec, rng)
    params = [*enc.parameters(), *dec.parameters()]
    opt = torch.optim.Adam(params, lr=3e-3, betas=(0.9, 0.999), weight_decay=0.0)
    audio = normal(torch, rng, 2, 1, 32)
    res = {"losses": [], "metrics": []}
    for step in range(3):
        y_rand = normal(torch, rng, k_bins, emb_width)
        z = enc(audio)
        x_l, x_d, commit, metrics = block(z, y_rand)
        out = dec(x_d)
        recons = F.mse_loss(out, audio)
        spec_loss = multispectral_loss(audio.squeeze(1), out.squeeze(1))
        loss = recons + 0.02 * commit + spec_loss
        opt.zero_grad()
        loss.backward()
        gn = nn.utils.clip_grad_norm_(params, 100.0)
        opt.step()
        res["losses"].append(loss.item())
        res["metrics"].append([float(v) for v in metrics.values()])
        res["gn"] = gn
    res["codes"] = x_l
    res["k"] = block.k
    res["k_elem"] = block.k_elem
    res["enc_g"] = enc.weight.grad
    return res


def ddsp_program(torch):
    """magenta/midi-ddsp style synthesis (re-written in torch as acids-ircam/ddsp_pytorch
    does): harmonic oscillator bank and filtered noise."""
    rng = np.random.default_rng(1)
    nn, F = torch.nn, torch.nn.functional
    sr, block, n_harm, n_bands, frames = 64, 8, 4, 5, 4

    def scale_function(x):
        return 2 * torch.sigmoid(x) ** (math.log(10)) + 1e-7

    def remove_above_nyquist(amplitudes, pitch, sampling_rate):
        n_harm = amplitudes.shape[-1]
        pitches = pitch * torch.arange(1, n_harm + 1).to(pitch)
        aa = (pitches < sampling_rate / 2).float() + 1e-4
        return amplitudes * aa

    def upsample(signal, factor):
        signal = signal.permute(0, 2, 1)
        signal = nn.functional.interpolate(signal, size=signal.shape[-1] * factor)
        return signal.permute(0, 2, 1)

    def harmonic_synth(pitch, amplitudes, sampling_rate):
        n_harmonic = amplitudes.shape[-1]
        omega = torch.cumsum(2 * math.pi * pitch / sampling_rate, 1)
        omegas = omega * torch.arange(1, n_harmonic + 1).to(omega)
        return (torch.sin(omegas) * amplitudes).sum(-1, keepdim=True)

    def amp_to_impulse_response(amp, target_size):
        amp = torch.stack([amp, torch.zeros_like(amp)], -1)
        amp = torch.view_as_complex(amp)
        amp = torch.fft.irfft(amp)
        filter_size = amp.shape[-1]
        amp = torch.roll(amp, filter_size // 2, -1)
        win = torch.hann_window(filter_size, dtype=amp.dtype, device=amp.device)
        amp = amp * win
        amp = nn.functional.pad(amp, (0, int(target_size) - int(filter_size)))
        return torch.roll(amp, -filter_size // 2, -1)

    def fft_convolve(signal, kernel):
        signal = nn.functional.pad(signal, (0, signal.shape[-1]))
        kernel = nn.functional.pad(kernel, (kernel.shape[-1], 0))
        output = torch.fft.irfft(torch.fft.rfft(signal) * torch.fft.rfft(kernel))
        return output[..., output.shape[-1] // 2:]

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.in_mlp = nn.Sequential(nn.Linear(2, 8), nn.LayerNorm(8), nn.LeakyReLU())
            self.gru = nn.GRU(8, 8, batch_first=True)
            self.proj = nn.ModuleList([nn.Linear(8, n_harm + 1), nn.Linear(8, n_bands)])
            self.register_buffer("cache_gru", torch.zeros(1, 1, 8))

        def forward(self, pitch, loudness):
            hidden = self.in_mlp(torch.cat([pitch / 100, loudness], -1))
            hidden = self.gru(hidden)[0]
            param = scale_function(self.proj[0](hidden))
            total_amp, amplitudes = param[..., :1], param[..., 1:]
            amplitudes = remove_above_nyquist(amplitudes, pitch, sr)
            amplitudes /= amplitudes.sum(-1, keepdim=True)
            amplitudes *= total_amp
            amplitudes = upsample(amplitudes, block)
            pitch_up = upsample(pitch, block)
            harmonic = harmonic_synth(pitch_up, amplitudes, sr)
            param = scale_function(self.proj[1](hidden) - 5)
            impulse = amp_to_impulse_response(param, block)
            noise = self.noise.to(impulse)
            noise = fft_convolve(noise, impulse).contiguous()
            noise = noise.reshape(noise.shape[0], -1, 1)
            return harmonic + noise

    model = Decoder()
    fill_(torch, model, rng)
    model.noise = torch.from_numpy(rng.uniform(-1, 1, (1, frames, block)).astype(np.float32))
    pitch = torch.from_numpy((rng.uniform(4, 40, (1, frames, 1))).astype(np.float32))
    loud = normal(torch, rng, 1, frames, 1)
    target = normal(torch, rng, 1, frames * block)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.99)
    res = {"losses": []}
    for _ in range(3):
        y = model(pitch, loud).squeeze(-1)
        loss = 0
        for n_fft in (16, 8):
            S_x = torch.stft(target, n_fft, n_fft // 4, window=torch.hann_window(n_fft),
                             center=True, normalized=True, return_complex=True).abs()
            S_y = torch.stft(y, n_fft, n_fft // 4, window=torch.hann_window(n_fft),
                             center=True, normalized=True, return_complex=True).abs()
            loss = loss + (S_x - S_y).abs().mean()
            loss = loss + (torch.log(S_x + 1e-7) - torch.log(S_y + 1e-7)).abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
    res["y"] = y
    res["gru_g"] = model.gru.weight_hh_l0.grad
    res["ir"] = amp_to_impulse_response(torch.ones(1, 2, 3), 8)
    res["interp_lin"] = F.interpolate(pitch.permute(0, 2, 1), scale_factor=2, mode="linear",
                                      align_corners=False)
    return res


def e3d_lstm_program(torch):
    """google/e3d_lstm (PyTorch ports): Conv3d gates over a short temporal window and the
    recall gate attending over the history of cell states."""
    rng = np.random.default_rng(2)
    nn, F = torch.nn, torch.nn.functional
    B, C, nh, tau, H, W = 2, 1, 4, 2, 5, 5

    class E3DLSTMCell(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv_x = nn.Conv3d(C, 7 * nh, (2, 3, 3), padding=(0, 1, 1))
            self.conv_h = nn.Conv3d(nh, 4 * nh, (2, 3, 3), padding=(0, 1, 1), bias=False)
            self.conv_m = nn.Conv3d(nh, 3 * nh, (2, 3, 3), padding=(0, 1, 1), bias=False)
            self.conv_o = nn.Conv3d(2 * nh, nh, (1, 3, 3), padding=(0, 1, 1))
            self.conv_1x1 = nn.Conv3d(2 * nh, nh, 1)
            self.ln = nn.LayerNorm([nh, 1, H, W], elementwise_affine=True)

        def self_attention(self, q, k, v):
            q_ = q.reshape(q.shape[0], -1)
            k_ = k.reshape(k.shape[0], k.shape[1], -1)
            v_ = v.reshape(v.shape[0], v.shape[1], -1)
            attn = torch.einsum("bd,btd->bt", q_, k_) / math.sqrt(q_.shape[-1])
            attn = F.softmax(attn, dim=1)
            return torch.einsum("bt,btd->bd", attn, v_).view(q.shape)

        def forward(self, x, c_history, m, h):
            i_x, g_x, r_x, o_x, temp_i_x, temp_g_x, temp_f_x = torch.split(
                self.conv_x(x), nh, dim=1)
            i_h, g_h, r_h, o_h = torch.split(self.conv_h(h), nh, dim=1)
            temp_i_m, temp_g_m, temp_f_m = torch.split(self.conv_m(m), nh, dim=1)
            r = torch.sigmoid(r_x + r_h)
            i = torch.sigmoid(i_x + i_h)
            g = torch.tanh(g_x + g_h)
            recall = self.self_attention(r, c_history, c_history)
            c = self.ln(c_history[:, -1] + recall) + i * g
            temp_i = torch.sigmoid(temp_i_x + temp_i_m)
            temp_g = torch.tanh(temp_g_x + temp_g_m)
            temp_f = torch.sigmoid(temp_f_x + temp_f_m + 1.0)
            m_new = temp_f * m[:, :, -1:] + temp_i * temp_g
            o = torch.sigmoid(o_x + o_h + self.conv_o(torch.cat([c, m_new], 1)))
            h_new = o * torch.tanh(self.conv_1x1(torch.cat([c, m_new], 1)))
            return h_new, c, m_new

    cell = E3DLSTMCell()
    head = nn.Conv3d(nh, C, 1)
    fill_(torch, cell, rng)
    fill_(torch, head, rng)
    params = [*cell.parameters(), *head.parameters()]
    opt = torch.optim.Adam(params, lr=1e-3)
    video = torch.sigmoid(normal(torch, rng, B, C, 6, H, W))
    res = {"losses": []}
    for _ in range(2):
        h = torch.zeros(B, nh, tau, H, W)
        m = torch.zeros(B, nh, tau, H, W)
        c_hist = torch.zeros(B, 1, nh, 1, H, W)
        preds = []
        for t in range(4 - tau + 1):
            x = video[:, :, t:t + tau]
            h1, c, m1 = cell(x, c_hist, m, h)
            c_hist = torch.cat([c_hist, c.unsqueeze(1)], dim=1)
            h = torch.cat([h[:, :, 1:], h1], dim=2)
            m = torch.cat([m[:, :, 1:], m1], dim=2)
            preds.append(torch.sigmoid(head(h1)))
        pred = torch.cat(preds, dim=2)
        loss = F.mse_loss(pred, video[:, :, tau:tau + pred.shape[2]]) + \
            F.l1_loss(pred, video[:, :, tau:tau + pred.shape[2]])
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        opt.step()
        res["losses"].append(loss.item())
    res["pred"] = pred
    res["ln_g"] = cell.ln.weight.grad
    res["convx_g"] = cell.conv_x.weight.grad
    res["hist"] = list(c_hist.shape)
    return res


def mcvd_program(torch):
    """voletiv/mcvd-pytorch: past/future frames as conditioning channels, masked at random
    (masks from NumPy), noise prediction with a cosine schedule; one DDIM-style sample step."""
    rng = np.random.default_rng(3)
    nn, F = torch.nn, torch.nn.functional
    B, C, H, W, n_past, n_fut, n_pred, T = 2, 1, 6, 6, 2, 1, 1, 20

    def cosine_alphas(T, s=0.008):
        steps = torch.arange(T + 1, dtype=torch.float64) / T
        f = torch.cos((steps + s) / (1 + s) * math.pi / 2) ** 2
        alphas_cumprod = f / f[0]
        betas = 1 - alphas_cumprod[1:] / alphas_cumprod[:-1]
        return torch.cumprod(1 - betas.clamp(max=0.999), 0).float()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            ch = C * (n_past + n_fut + n_pred)
            self.temb = nn.Sequential(nn.Linear(8, 16), nn.SiLU(), nn.Linear(16, 8))
            self.conv_in = nn.Conv2d(ch, 8, 3, padding=1)
            self.norm = nn.GroupNorm(4, 8)
            self.conv_out = nn.Conv2d(8, C * n_pred, 3, padding=1)

        def forward(self, x, cond, t):
            half = 4
            freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
            e = t.float()[:, None] * freqs[None]
            e = torch.cat([torch.sin(e), torch.cos(e)], dim=1)
            h = self.conv_in(torch.cat([x, cond], dim=1))
            h = h + self.temb(e)[:, :, None, None]
            return self.conv_out(F.silu(self.norm(h)))

    net = Net()
    fill_(torch, net, rng)
    ema = {k: v.clone() for k, v in net.state_dict().items()}
    opt = torch.optim.Adam(net.parameters(), lr=2e-3, amsgrad=True)
    abar = cosine_alphas(T)
    frames = normal(torch, rng, B, n_past + n_pred + n_fut, C, H, W)
    res = {"losses": []}
    for _ in range(3):
        past, x0, fut = frames[:, :n_past], frames[:, n_past:n_past + n_pred], \
            frames[:, n_past + n_pred:]
        prob_mask_p = torch.from_numpy(rng.random(B) < 0.5)
        prob_mask_f = torch.from_numpy(rng.random(B) < 0.5)
        past = past * (~prob_mask_p)[:, None, None, None, None]
        fut = fut * prob_mask_f.logical_not().float().view(B, 1, 1, 1, 1)
        cond = torch.cat([past.flatten(1, 2), fut.flatten(1, 2)], dim=1)
        t = torch.from_numpy(rng.integers(0, T, B))
        noise = normal(torch, rng, *x0.flatten(1, 2).shape)
        a = abar.index_select(0, t).view(B, 1, 1, 1)
        xt = a.sqrt() * x0.flatten(1, 2) + (1 - a).sqrt() * noise
        loss = (net(xt, cond, t) - noise).square().sum(dim=(1, 2, 3)).mean(dim=0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for k, v in net.state_dict().items():
                ema[k].mul_(0.9).add_(v, alpha=0.1)
        res["losses"].append(loss.item())
    res["abar"] = abar
    res["ema_w"] = ema["conv_in.weight"]
    net.load_state_dict(ema)
    with torch.inference_mode():
        x = normal(torch, rng, B, C * n_pred, H, W)
        for i in reversed(range(0, T, 5)):
            tt = torch.full((B,), i, dtype=torch.long)
            eps = net(x, cond, tt)
            a = abar[i]
            a_prev = abar[i - 5] if i >= 5 else torch.tensor(1.0)
            x0_hat = ((x - (1 - a).sqrt() * eps) / a.sqrt()).clamp(-3, 3)
            x = a_prev.sqrt() * x0_hat + (1 - a_prev).sqrt() * eps
        res["sample"] = x
        res["inf"] = x.is_inference()
    return res


PROGRAMS = [jukebox_vq_program, ddsp_program, e3d_lstm_program, mcvd_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
