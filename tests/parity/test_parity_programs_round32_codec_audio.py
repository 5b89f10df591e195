"""Neural audio synthesis, Fourier convolutions and audio classification front ends as their
reference repositories write them in torch, run with `torch` bound to ember and to PyTorch
from the same NumPy weights: DDSP (harmonic oscillator bank with cumsum phase and Nyquist
masking, filtered noise by frequency sampling with irfft and a window, FFT-convolution reverb,
multi-scale spectral loss, frame-to-sample upsampling), LaMa's fast Fourier convolution
(rfftn/irfftn over two dims with norm='ortho', real/imag stacking, local Fourier units), and
AST-style front ends (mel filterbanks built by hand, log-mel with amplitude_to_DB's clamps,
SpecAugment masks, Kaldi-style fbank framing, patch embedding with interpolated positions)."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _dt(t):
    """A tensor's dtype as PyTorch names it without the module: 'complex64'."""
    return str(t.dtype).split(".")[-1]


# ---- DDSP (acids-ircam/ddsp_pytorch core.py) ----

def safe_log(torch, x):
    return torch.log(x + 1e-7)


def multiscale_fft(torch, signal, scales, overlap):
    stfts = []
    for s in scales:
        S = torch.stft(signal, s, int(s * (1 - overlap)), s, torch.hann_window(s).to(signal),
                       True, normalized=True, return_complex=True).abs()
        stfts.append(S)
    return stfts


def scale_function(torch, x):
    return 2 * torch.sigmoid(x) ** (math.log(10)) + 1e-7


def remove_above_nyquist(torch, amplitudes, pitch, sampling_rate):
    n_harm = amplitudes.shape[-1]
    pitches = pitch * torch.arange(1, n_harm + 1).to(pitch)
    aa = (pitches < sampling_rate / 2).float() + 1e-4
    return amplitudes * aa


def upsample(torch, signal, factor):
    signal = signal.permute(0, 2, 1)
    signal = torch.nn.functional.interpolate(signal, size=signal.shape[-1] * factor)
    return signal.permute(0, 2, 1)


def harmonic_synth(torch, pitch, amplitudes, sampling_rate):
    n_harmonic = amplitudes.shape[-1]
    omega = torch.cumsum(2 * math.pi * pitch / sampling_rate, 1)
    omegas = omega * torch.arange(1, n_harmonic + 1).to(omega)
    signal = (torch.sin(omegas) * amplitudes).sum(-1, keepdim=True)
    return signal


def amp_to_impulse_response(torch, amp, target_size):
    amp = torch.stack([amp, torch.zeros_like(amp)], -1)
    amp = torch.view_as_complex(amp)
    amp = torch.fft.irfft(amp)
    filter_size = amp.shape[-1]
    amp = torch.roll(amp, filter_size // 2, -1)
    win = torch.hann_window(filter_size, dtype=amp.dtype, device=amp.device)
    amp = amp * win
    amp = torch.nn.functional.pad(amp, (0, int(target_size) - int(filter_size)))
    amp = torch.roll(amp, -filter_size // 2, -1)
    return amp


def fft_convolve(torch, signal, kernel):
    signal = torch.nn.functional.pad(signal, (0, signal.shape[-1]))
    kernel = torch.nn.functional.pad(kernel, (kernel.shape[-1], 0))
    output = torch.fft.irfft(torch.fft.rfft(signal) * torch.fft.rfft(kernel))
    output = output[..., output.shape[-1] // 2:]
    return output


def _ddsp_classes(torch):
    nn = torch.nn

    def mlp(in_size, hidden_size, n_layers):
        channels = [in_size] + (n_layers) * [hidden_size]
        net = []
        for i in range(n_layers):
            net.append(nn.Linear(channels[i], channels[i + 1]))
            net.append(nn.LayerNorm(channels[i + 1]))
            net.append(nn.LeakyReLU())
        return nn.Sequential(*net)

    def gru(n_input, hidden_size):
        return nn.GRU(n_input * hidden_size, hidden_size, batch_first=True)

    class Reverb(nn.Module):
        def __init__(self, length, sampling_rate, initial_wet=0, initial_decay=5):
            super().__init__()
            self.length = length
            self.sampling_rate = sampling_rate
            self.noise = nn.Parameter((torch.rand(length) * 2 - 1).unsqueeze(-1))
            self.decay = nn.Parameter(torch.tensor(float(initial_decay)))
            self.wet = nn.Parameter(torch.tensor(float(initial_wet)))
            t = torch.arange(self.length) / self.sampling_rate
            t = t.reshape(1, -1, 1)
            self.register_buffer("t", t)

        def build_impulse(self):
            t = torch.exp(-nn.functional.softplus(-self.decay) * self.t * 500)
            noise = self.noise * t
            impulse = noise * torch.sigmoid(self.wet)
            impulse[:, 0] = 1
            return impulse

        def forward(self, x):
            lenx = x.shape[1]
            impulse = self.build_impulse()
            impulse = nn.functional.pad(impulse, (0, 0, 0, lenx - self.length))
            x = fft_convolve(torch, x.squeeze(-1), impulse.squeeze(-1)).unsqueeze(-1)
            return x

    class DDSP(nn.Module):
        def __init__(self, hidden_size, n_harmonic, n_bands, sampling_rate, block_size):
            super().__init__()
            self.register_buffer("sampling_rate", torch.tensor(sampling_rate))
            self.register_buffer("block_size", torch.tensor(block_size))
            self.in_mlps = nn.ModuleList([mlp(1, hidden_size, 3)] * 2)
            self.gru = gru(2, hidden_size)
            self.out_mlp = mlp(hidden_size + 2, hidden_size, 3)
            self.proj_matrices = nn.ModuleList([
                nn.Linear(hidden_size, n_harmonic + 1),
                nn.Linear(hidden_size, n_bands),
            ])
            self.reverb = Reverb(sampling_rate // 100, sampling_rate)
            self.register_buffer("cache_gru", torch.zeros(1, 1, hidden_size))
            self.register_buffer("phase", torch.zeros(1))

        def forward(self, pitch, loudness, noise):
            hidden = torch.cat([self.in_mlps[0](pitch), self.in_mlps[1](loudness)], -1)
            hidden = torch.cat([self.gru(hidden)[0], pitch, loudness], -1)
            hidden = self.out_mlp(hidden)
            # harmonic part
            param = scale_function(torch, self.proj_matrices[0](hidden))
            total_amp = param[..., :1]
            amplitudes = param[..., 1:]
            amplitudes = remove_above_nyquist(torch, amplitudes, pitch, self.sampling_rate)
            amplitudes /= amplitudes.sum(-1, keepdim=True)
            amplitudes *= total_amp
            amplitudes = upsample(torch, amplitudes, self.block_size)
            pitch = upsample(torch, pitch, self.block_size)
            harmonic = harmonic_synth(torch, pitch, amplitudes, self.sampling_rate)
            # noise part
            param = scale_function(torch, self.proj_matrices[1](hidden) - 5)
            impulse = amp_to_impulse_response(torch, param, self.block_size)
            noise = fft_convolve(torch, noise, impulse).contiguous()
            noise = noise.reshape(noise.shape[0], -1, 1)
            signal = harmonic + noise
            # reverb part
            signal = self.reverb(signal)
            return signal

    return DDSP


def ddsp_program(torch):
    rng = np.random.default_rng(3211)
    DDSP = _ddsp_classes(torch)
    sr, block, frames = 1600, 16, 8
    model = DDSP(hidden_size=8, n_harmonic=6, n_bands=9, sampling_rate=sr, block_size=block)
    fill_(torch, model, rng, 0.3)
    res = {"keys": list(model.state_dict().keys()),
           "n_params": [sum(p.numel() for p in model.parameters())],
           "shared": [model.in_mlps[0] is model.in_mlps[1]]}
    pitch = torch.from_numpy((rng.uniform(100, 500, (2, frames, 1))).astype(np.float32))
    loud = torch.from_numpy(rng.standard_normal((2, frames, 1)).astype(np.float32))
    target = normal(torch, rng, 2, frames * block, 1) * 0.1
    noise = torch.from_numpy(rng.uniform(-1, 1, (2, frames, block)).astype(np.float32))
    with torch.no_grad():
        res["y32"] = model(pitch, loud, noise)
    # train in float64: the spectral log loss's gradient through sin of phases of ~250 rad
    # has float32 errors of 5e-4 (PyTorch's own against float64), ember's and PyTorch's alike
    model.double()
    pitch, loud, target = pitch.double(), loud.double(), target.double()
    res["dtypes"] = [_dt(model.reverb.t), _dt(model.sampling_rate), _dt(model.phase)]
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)
    scales, overlap = [64, 32, 16], .75
    for _ in range(2):
        noise = torch.from_numpy(rng.uniform(-1, 1, (2, frames, block)))
        y = model(pitch, loud, noise).squeeze(-1)
        ori_stft = multiscale_fft(torch, target.squeeze(-1), scales, overlap)
        rec_stft = multiscale_fft(torch, y, scales, overlap)
        loss = 0
        for s_x, s_y in zip(ori_stft, rec_stft):
            lin_loss = (s_x - s_y).abs().mean()
            log_loss = (safe_log(torch, s_x) - safe_log(torch, s_y)).abs().mean()
            loss = loss + lin_loss + log_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        scheduler.step()
        res.setdefault("loss", []).append(loss.item())
    res["y"] = y
    res["stft_shapes"] = [str(tuple(s.shape)) for s in rec_stft]
    res["decay_grad"], res["wet_grad"] = model.reverb.decay.grad, model.reverb.wet.grad
    res["noise_grad"] = model.reverb.noise.grad
    res["proj_grad"] = model.proj_matrices[1].weight.grad
    res["gru_grad"] = model.gru.weight_hh_l0.grad
    res["lr"] = [opt.param_groups[0]["lr"]]
    # pieces on their own
    amp = torch.from_numpy(rng.random((2, 3, 5)).astype(np.float32))
    ir = amp_to_impulse_response(torch, amp, 16)
    res["ir"], res["ir_dtype"] = ir, [_dt(ir)]
    sig = normal(torch, rng, 2, 3, 16)
    res["conv"] = fft_convolve(torch, sig, ir)
    res["nyq"] = remove_above_nyquist(torch, torch.ones(1, 2, 6), torch.tensor(
        [[[150.], [300.]]]), 1600)
    res["ups"] = upsample(torch, torch.arange(6.).reshape(1, 3, 2), 4)
    with torch.no_grad():
        # realtime: cached GRU state and running phase, as the exported model does
        model.phase.zero_()
        f0 = pitch[:1, :2] / sr
        phase = torch.cumsum(2 * math.pi * f0.repeat_interleave(block, 1), 1) + model.phase
        model.phase.copy_(phase[:, -1, 0] % (2 * math.pi))
        res["phase"], res["phase_buf"] = phase, model.phase
    return res


# ---- LaMa fast Fourier convolution (advimman/lama ffc.py) ----

def _ffc_classes(torch):
    nn = torch.nn

    class FourierUnit(nn.Module):
        def __init__(self, in_channels, out_channels, groups=1, spectral_pos_encoding=False,
                     fft_norm="ortho"):
            super().__init__()
            self.groups = groups
            self.conv_layer = torch.nn.Conv2d(
                in_channels=in_channels * 2 + (2 if spectral_pos_encoding else 0),
                out_channels=out_channels * 2, kernel_size=1, stride=1, padding=0,
                groups=self.groups, bias=False)
            self.bn = torch.nn.BatchNorm2d(out_channels * 2)
            self.relu = torch.nn.ReLU(inplace=True)
            self.spectral_pos_encoding = spectral_pos_encoding
            self.fft_norm = fft_norm

        def forward(self, x):
            batch = x.shape[0]
            fft_dim = (-2, -1)
            ffted = torch.fft.rfftn(x, dim=fft_dim, norm=self.fft_norm)
            ffted = torch.stack((ffted.real, ffted.imag), dim=-1)
            ffted = ffted.permute(0, 1, 4, 2, 3).contiguous()
            ffted = ffted.view((batch, -1,) + ffted.size()[3:])
            if self.spectral_pos_encoding:
                height, width = ffted.shape[-2:]
                coords_vert = torch.linspace(0, 1, height)[None, None, :, None].expand(
                    batch, 1, height, width).to(ffted)
                coords_hor = torch.linspace(0, 1, width)[None, None, None, :].expand(
                    batch, 1, height, width).to(ffted)
                ffted = torch.cat((coords_vert, coords_hor, ffted), dim=1)
            ffted = self.conv_layer(ffted)
            ffted = self.relu(self.bn(ffted))
            ffted = ffted.view((batch, -1, 2,) + ffted.size()[2:]).permute(
                0, 1, 3, 4, 2).contiguous()
            ffted = torch.complex(ffted[..., 0], ffted[..., 1])
            ifft_shape_slice = x.shape[-2:]
            output = torch.fft.irfftn(ffted, s=ifft_shape_slice, dim=fft_dim, norm=self.fft_norm)
            return output

    class SpectralTransform(nn.Module):
        def __init__(self, in_channels, out_channels, stride=1, groups=1, enable_lfu=True,
                     **fu_kwargs):
            super().__init__()
            self.enable_lfu = enable_lfu
            if stride == 2:
                self.downsample = nn.AvgPool2d(kernel_size=(2, 2), stride=2)
            else:
                self.downsample = nn.Identity()
            self.stride = stride
            self.conv1 = nn.Sequential(
                nn.Conv2d(in_channels, out_channels // 2, kernel_size=1, groups=groups,
                          bias=False),
                nn.BatchNorm2d(out_channels // 2),
                nn.ReLU(inplace=True))
            self.fu = FourierUnit(out_channels // 2, out_channels // 2, groups, **fu_kwargs)
            if self.enable_lfu:
                self.lfu = FourierUnit(out_channels // 2, out_channels // 2, groups)
            self.conv2 = torch.nn.Conv2d(out_channels // 2, out_channels, kernel_size=1,
                                         groups=groups, bias=False)

        def forward(self, x):
            x = self.downsample(x)
            x = self.conv1(x)
            output = self.fu(x)
            if self.enable_lfu:
                n, c, h, w = x.shape
                split_no = 2
                split_s = h // split_no
                xs = torch.cat(torch.split(x[:, :c // 4], split_s, dim=-2), dim=1).contiguous()
                xs = torch.cat(torch.split(xs, split_s, dim=-1), dim=1).contiguous()
                xs = self.lfu(xs)
                xs = xs.repeat(1, 1, split_no, split_no).contiguous()
            else:
                xs = 0
            output = self.conv2(x + output + xs)
            return output

    class FFC(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, ratio_gin, ratio_gout,
                     stride=1, padding=0, dilation=1, groups=1, bias=False, enable_lfu=True,
                     padding_type="reflect", gated=False, **spectral_kwargs):
            super().__init__()
            self.stride = stride
            in_cg = int(in_channels * ratio_gin)
            in_cl = in_channels - in_cg
            out_cg = int(out_channels * ratio_gout)
            out_cl = out_channels - out_cg
            self.ratio_gin = ratio_gin
            self.ratio_gout = ratio_gout
            self.global_in_num = in_cg
            module = nn.Identity if in_cl == 0 or out_cl == 0 else nn.Conv2d
            self.convl2l = module(in_cl, out_cl, kernel_size, stride, padding, dilation, groups,
                                  bias, padding_mode=padding_type)
            module = nn.Identity if in_cl == 0 or out_cg == 0 else nn.Conv2d
            self.convl2g = module(in_cl, out_cg, kernel_size, stride, padding, dilation, groups,
                                  bias, padding_mode=padding_type)
            module = nn.Identity if in_cg == 0 or out_cl == 0 else nn.Conv2d
            self.convg2l = module(in_cg, out_cl, kernel_size, stride, padding, dilation, groups,
                                  bias, padding_mode=padding_type)
            module = nn.Identity if in_cg == 0 or out_cg == 0 else SpectralTransform
            self.convg2g = module(in_cg, out_cg, stride, 1 if groups == 1 else groups // 2,
                                  enable_lfu, **spectral_kwargs)
            self.gated = gated
            module = nn.Identity if in_cg == 0 or out_cl == 0 or not self.gated else nn.Conv2d
            self.gate = module(in_channels, 2, 1)

        def forward(self, x):
            x_l, x_g = x if type(x) is tuple else (x, 0)
            out_xl, out_xg = 0, 0
            if self.gated:
                total_input_parts = [x_l]
                if torch.is_tensor(x_g):
                    total_input_parts.append(x_g)
                total_input = torch.cat(total_input_parts, dim=1)
                gates = torch.sigmoid(self.gate(total_input))
                g2l_gate, l2g_gate = gates.chunk(2, dim=1)
            else:
                g2l_gate, l2g_gate = 1, 1
            if self.ratio_gout != 1:
                out_xl = self.convl2l(x_l) + self.convg2l(x_g) * g2l_gate
            if self.ratio_gout != 0:
                out_xg = self.convl2g(x_l) * l2g_gate + self.convg2g(x_g)
            return out_xl, out_xg

    class FFC_BN_ACT(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, ratio_gin, ratio_gout,
                     stride=1, padding=0, dilation=1, groups=1, bias=False,
                     norm_layer=nn.BatchNorm2d, activation_layer=nn.Identity,
                     padding_type="reflect", enable_lfu=True, **kwargs):
            super().__init__()
            self.ffc = FFC(in_channels, out_channels, kernel_size, ratio_gin, ratio_gout,
                           stride, padding, dilation, groups, bias, enable_lfu,
                           padding_type=padding_type, **kwargs)
            lnorm = nn.Identity if ratio_gout == 1 else norm_layer
            gnorm = nn.Identity if ratio_gout == 0 else norm_layer
            global_channels = int(out_channels * ratio_gout)
            self.bn_l = lnorm(out_channels - global_channels)
            self.bn_g = gnorm(global_channels)
            lact = nn.Identity if ratio_gout == 1 else activation_layer
            gact = nn.Identity if ratio_gout == 0 else activation_layer
            self.act_l = lact(inplace=True)
            self.act_g = gact(inplace=True)

        def forward(self, x):
            x_l, x_g = self.ffc(x)
            x_l = self.act_l(self.bn_l(x_l))
            x_g = self.act_g(self.bn_g(x_g))
            return x_l, x_g

    class FFCResnetBlock(nn.Module):
        def __init__(self, dim, padding_type, norm_layer, activation_layer=nn.ReLU, dilation=1,
                     inline=False, **conv_kwargs):
            super().__init__()
            self.conv1 = FFC_BN_ACT(dim, dim, kernel_size=3, padding=dilation,
                                    dilation=dilation, norm_layer=norm_layer,
                                    activation_layer=activation_layer,
                                    padding_type=padding_type, **conv_kwargs)
            self.conv2 = FFC_BN_ACT(dim, dim, kernel_size=3, padding=dilation,
                                    dilation=dilation, norm_layer=norm_layer,
                                    activation_layer=activation_layer,
                                    padding_type=padding_type, **conv_kwargs)
            self.inline = inline

        def forward(self, x):
            if self.inline:
                x_l = x[:, :-self.conv1.ffc.global_in_num]
                x_g = x[:, -self.conv1.ffc.global_in_num:]
            else:
                x_l, x_g = x if type(x) is tuple else (x, 0)
            id_l, id_g = x_l, x_g
            x_l, x_g = self.conv1((x_l, x_g))
            x_l, x_g = self.conv2((x_l, x_g))
            x_l, x_g = id_l + x_l, id_g + x_g
            out = x_l, x_g
            if self.inline:
                out = torch.cat(out, dim=1)
            return out

    class ConcatTupleLayer(nn.Module):
        def forward(self, x):
            assert isinstance(x, tuple)
            x_l, x_g = x
            assert torch.is_tensor(x_l) or torch.is_tensor(x_g)
            if not torch.is_tensor(x_g):
                return x_l
            return torch.cat(x, dim=1)

    return FourierUnit, FFC_BN_ACT, FFCResnetBlock, ConcatTupleLayer


def lama_ffc_program(torch):
    rng = np.random.default_rng(3212)
    nn = torch.nn
    FourierUnit, FFC_BN_ACT, FFCResnetBlock, ConcatTupleLayer = _ffc_classes(torch)
    res = {}
    fu = FourierUnit(3, 3, spectral_pos_encoding=True)
    fill_(torch, fu, rng, 0.3)
    x = normal(torch, rng, 2, 3, 8, 6).requires_grad_()
    y = fu(x)
    y.sum().backward()
    res["fu"], res["fu_xgrad"], res["fu_wgrad"] = y, x.grad, fu.conv_layer.weight.grad
    res["fu_bn"] = [fu.bn.running_mean, fu.bn.running_var]
    res["fu_tracked"] = [int(fu.bn.num_batches_tracked)]
    # the generator: input FFC, one residual block, output concatenation
    model = nn.Sequential(
        FFC_BN_ACT(4, 16, kernel_size=3, padding=1, ratio_gin=0, ratio_gout=0.5,
                   activation_layer=nn.ReLU),
        FFCResnetBlock(16, padding_type="reflect", norm_layer=nn.BatchNorm2d,
                       ratio_gin=0.5, ratio_gout=0.5),
        FFCResnetBlock(16, padding_type="reflect", norm_layer=nn.BatchNorm2d,
                       ratio_gin=0.5, ratio_gout=0.5, gated=True),
        ConcatTupleLayer(),
        nn.Conv2d(16, 3, 1),
        nn.Sigmoid())
    fill_(torch, model, rng, 0.3)
    res["keys"] = list(model.state_dict().keys())
    img = torch.from_numpy(rng.random((2, 3, 8, 8)).astype(np.float32))
    mask = torch.from_numpy((rng.random((2, 1, 8, 8)) > 0.6).astype(np.float32))
    masked_img = img * (1 - mask)
    masked_img = torch.cat([masked_img, mask], dim=1)
    # SGD, not LaMa's Adam: some BatchNorm biases here get float32-noise gradients (1e-9 about
    # an exact 0) that Adam would scale up to whole steps of lr
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(2):
        pred = model(masked_img)
        inpainted = mask * pred + (1 - mask) * img
        # LaMa's masked L1 with different weights inside and outside the mask
        pixel = torch.abs(pred - img)
        weights = mask * 0 + (1 - mask) * 10
        loss = (pixel * weights).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.setdefault("loss", []).append(loss.item())
    res["pred"], res["inpainted"] = pred, inpainted
    res["g2g_grad"] = model[1].conv1.ffc.convg2g.fu.conv_layer.weight.grad
    res["lfu_grad"] = model[1].conv1.ffc.convg2g.lfu.conv_layer.weight.grad
    res["gate_grad"] = model[2].conv1.ffc.gate.weight.grad
    res["id_types"] = [type(model[0].ffc.convg2l).__name__, type(model[0].ffc.convg2g).__name__]
    model.eval()
    with torch.no_grad():
        res["eval"] = model(masked_img)
    # the inline block takes concatenated channels; irfftn of odd sizes with s=
    block = FFCResnetBlock(4, padding_type="reflect", norm_layer=nn.BatchNorm2d,
                           ratio_gin=0.5, ratio_gout=0.5, inline=True, enable_lfu=False)
    fill_(torch, block, rng, 0.3)
    z = normal(torch, rng, 1, 4, 5, 7)
    res["inline"] = block(z)
    spec = torch.fft.rfftn(z, dim=(-2, -1), norm="ortho")
    res["spec_shape"] = [str(tuple(spec.shape)), _dt(spec)]
    res["roundtrip"] = torch.fft.irfftn(spec, s=z.shape[-2:], dim=(-2, -1), norm="ortho")
    return res


# ---- audio classification front ends (torchaudio functional, AST) ----

def _hz_to_mel(torch, freq, mel_scale="htk"):
    if mel_scale == "htk":
        return 2595.0 * math.log10(1.0 + (freq / 700.0))
    f_min, f_sp = 0.0, 200.0 / 3
    mels = (freq - f_min) / f_sp
    min_log_hz = 1000.0
    min_log_mel = (min_log_hz - f_min) / f_sp
    logstep = math.log(6.4) / 27.0
    if freq >= min_log_hz:
        mels = min_log_mel + math.log(freq / min_log_hz) / logstep
    return mels


def _mel_to_hz(torch, mels, mel_scale="htk"):
    if mel_scale == "htk":
        return 700.0 * (10.0 ** (mels / 2595.0) - 1.0)
    f_min, f_sp = 0.0, 200.0 / 3
    freqs = f_min + f_sp * mels
    min_log_hz = 1000.0
    min_log_mel = (min_log_hz - f_min) / f_sp
    logstep = math.log(6.4) / 27.0
    log_t = mels >= min_log_mel
    freqs[log_t] = min_log_hz * torch.exp(logstep * (mels[log_t] - min_log_mel))
    return freqs


def melscale_fbanks(torch, n_freqs, f_min, f_max, n_mels, sample_rate, norm=None,
                    mel_scale="htk"):
    all_freqs = torch.linspace(0, sample_rate // 2, n_freqs)
    m_min = _hz_to_mel(torch, f_min, mel_scale=mel_scale)
    m_max = _hz_to_mel(torch, f_max, mel_scale=mel_scale)
    m_pts = torch.linspace(m_min, m_max, n_mels + 2)
    f_pts = _mel_to_hz(torch, m_pts, mel_scale=mel_scale)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1)
    zero = torch.zeros(1)
    down_slopes = (-1.0 * slopes[:, :-2]) / f_diff[:-1]
    up_slopes = slopes[:, 2:] / f_diff[1:]
    fb = torch.max(zero, torch.min(down_slopes, up_slopes))
    if norm is not None and norm == "slaney":
        enorm = 2.0 / (f_pts[2:n_mels + 2] - f_pts[:n_mels])
        fb *= enorm.unsqueeze(0)
    if (fb.max(dim=0).values == 0.0).any():
        import warnings
        warnings.warn("At least one mel filterbank has all zero values.")
    return fb


def amplitude_to_DB(torch, x, multiplier, amin, db_multiplier, top_db=None):
    x_db = multiplier * torch.log10(torch.clamp(x, min=amin))
    x_db -= multiplier * db_multiplier
    if top_db is not None:
        shape = x_db.size()
        packed_channels = shape[-3] if x_db.dim() > 2 else 1
        x_db = x_db.reshape(-1, packed_channels, shape[-2], shape[-1])
        x_db = torch.max(x_db, (x_db.amax(dim=(-3, -2, -1)) - top_db).view(-1, 1, 1, 1))
        x_db = x_db.reshape(shape)
    return x_db


def mask_along_axis_iid(torch, specgrams, value, min_value, axis, mask_value=0.0):
    # torchaudio's, with the uniform draws passed in
    device, dtype = specgrams.device, specgrams.dtype
    mask_start = min_value.long()[..., None, None]
    mask_end = (min_value.long() + value.long())[..., None, None]
    mask = torch.arange(0, specgrams.size(axis), device=device, dtype=dtype)
    specgrams = specgrams.transpose(axis, -1)
    specgrams = specgrams.masked_fill((mask >= mask_start) & (mask < mask_end), mask_value)
    specgrams = specgrams.transpose(axis, -1)
    return specgrams


def log_mel_program(torch):
    rng = np.random.default_rng(3213)
    res = {}
    sr, n_fft, hop, n_mels = 8000, 64, 16, 10
    fb_htk = melscale_fbanks(torch, n_fft // 2 + 1, 0.0, sr / 2, n_mels, sr)
    fb_slaney = melscale_fbanks(torch, n_fft // 2 + 1, 20.0, 3800.0, n_mels, sr,
                                norm="slaney", mel_scale="slaney")
    res["fb_htk"], res["fb_slaney"] = fb_htk, fb_slaney
    wave = normal(torch, rng, 2, 1, 800) * 0.1
    window = torch.hann_window(n_fft)
    spec = torch.stft(wave.reshape(-1, 800), n_fft, hop_length=hop, win_length=n_fft,
                      window=window, center=True, pad_mode="reflect", normalized=False,
                      onesided=True, return_complex=True)
    spec = spec.reshape(wave.shape[:-1] + spec.shape[-2:])
    power = spec.abs().pow(2.0)
    mel = torch.matmul(power.transpose(-1, -2), fb_slaney).transpose(-1, -2)
    res["mel"] = mel
    db = amplitude_to_DB(torch, mel, 10.0, 1e-10, math.log10(max(1e-10, 1.0)), top_db=80.0)
    res["db"] = db
    res["db_floor"] = db.amax(dim=(-3, -2, -1)) - db.amin(dim=(-3, -2, -1))
    # SpecAugment: iid frequency and time masks
    v = torch.from_numpy(rng.random((2, 1)).astype(np.float32)) * 4
    mv = torch.from_numpy(rng.random((2, 1)).astype(np.float32)) * (db.size(2) - v)
    masked = mask_along_axis_iid(torch, db, v, mv, 2, mask_value=db.mean())
    v = torch.from_numpy(rng.random((2, 1)).astype(np.float32)) * 12
    mv = torch.from_numpy(rng.random((2, 1)).astype(np.float32)) * (db.size(3) - v)
    masked = mask_along_axis_iid(torch, masked, v, mv, 3)
    res["masked"] = masked
    res["masked_frac"] = [float((masked == 0).float().mean())]
    # torchaudio's single-mask path for one spectrogram (mask_along_axis, in place by index)
    one = db[0].clone()
    value, min_value = 3.0, 2.0
    mask_start = int(min_value)
    mask_end = int(min_value) + int(value)
    mask = torch.arange(0, one.shape[1], device=one.device, dtype=one.dtype)
    mask = (mask >= mask_start) & (mask < mask_end)
    one = one.masked_fill(mask.unsqueeze(-1), 0.0)
    res["one"] = one
    # normalisation AST-style: (fbank - mean) / (std * 2), and gradient through the front end
    w = wave.clone().requires_grad_()
    s = torch.stft(w.squeeze(1), n_fft, hop, window=window, return_complex=True)
    feats = torch.log(torch.matmul(fb_htk.T, s.abs() ** 2) + 1e-6)
    norm = (feats - (-4.27)) / (4.57 * 2)
    norm.mean().backward()
    res["norm"], res["wave_grad"] = norm, w.grad
    return res


def kaldi_fbank_program(torch):
    """Kaldi-compatible fbank framing as torchaudio.compliance.kaldi writes it, by hand."""
    rng = np.random.default_rng(3214)
    res = {}
    sample_frequency, frame_length, frame_shift = 8000, 25.0, 10.0
    waveform = normal(torch, rng, 1, 1200) * 0.2
    window_shift = int(sample_frequency * frame_shift * 0.001)
    window_size = int(sample_frequency * frame_length * 0.001)
    padded_window_size = 1 << (window_size - 1).bit_length()
    res["sizes"] = [window_shift, window_size, padded_window_size]
    # _get_strided, snip_edges=True
    wave = waveform[0]
    num_samples = wave.size(0)
    strides = (window_shift * wave.stride(0), wave.stride(0))
    m = 1 + (num_samples - window_size) // window_shift
    sizes = (m, window_size)
    frames = wave.as_strided(sizes, strides)
    res["frames"], res["frames_view"] = frames, [frames._base is wave or frames._base is
                                                 wave._base, frames.is_contiguous()]
    dither = torch.from_numpy(rng.standard_normal(tuple(frames.shape)).astype(np.float32))
    strided_input = frames + dither * 0.0
    row_means = torch.mean(strided_input, dim=1).unsqueeze(1)
    strided_input = strided_input - row_means
    EPSILON = torch.tensor(torch.finfo(torch.float).eps)
    log_energy = torch.max(strided_input.pow(2).sum(1), EPSILON).log()
    preemphasis_coefficient = 0.97
    offset_strided_input = torch.nn.functional.pad(
        strided_input.unsqueeze(0), (1, 0), mode="replicate").squeeze(0)
    strided_input = strided_input - preemphasis_coefficient * offset_strided_input[:, :-1]
    window_function = torch.hann_window(window_size, periodic=False).pow(0.85)
    strided_input = strided_input * window_function.unsqueeze(0)
    padding_right = padded_window_size - window_size
    strided_input = torch.nn.functional.pad(
        strided_input.unsqueeze(0), (0, padding_right), mode="constant", value=0).squeeze(0)
    spectrum = torch.fft.rfft(strided_input).abs()
    spectrum = spectrum.pow(2.0)
    res["log_energy"], res["spectrum"] = log_energy, spectrum
    # the Kaldi mel bins (inverse-mel triangular, no slaney normalisation)
    num_bins, low_freq, high_freq = 12, 20.0, 3800.0
    num_fft_bins = padded_window_size / 2
    fft_bin_width = sample_frequency / padded_window_size
    mel_low_freq = 1127.0 * math.log(1.0 + low_freq / 700.0)
    mel_high_freq = 1127.0 * math.log(1.0 + high_freq / 700.0)
    mel_freq_delta = (mel_high_freq - mel_low_freq) / (num_bins + 1)
    b = torch.arange(num_bins).unsqueeze(1)
    left_mel = mel_low_freq + b * mel_freq_delta
    center_mel = mel_low_freq + (b + 1.0) * mel_freq_delta
    right_mel = mel_low_freq + (b + 2.0) * mel_freq_delta
    center_freqs = 700.0 * ((center_mel / 1127.0).exp() - 1.0)
    mel = 1127.0 * (1.0 + fft_bin_width * torch.arange(int(num_fft_bins)) / 700.0).log()
    mel = mel.unsqueeze(0)
    up_slope = (mel - left_mel) / (center_mel - left_mel)
    down_slope = (right_mel - mel) / (right_mel - center_mel)
    bins = torch.max(torch.zeros(1), torch.min(up_slope, down_slope))
    res["bins"], res["center"] = bins, center_freqs
    res["bins_dtype"] = [_dt(bins), _dt(b), _dt(left_mel)]
    mel_energies = torch.nn.functional.pad(bins, (0, 1), mode="constant", value=0)
    mel_energies = torch.mm(spectrum, mel_energies.T)
    mel_energies = torch.max(mel_energies, EPSILON).log()
    mel_energies = torch.cat((log_energy.unsqueeze(1), mel_energies), dim=1)
    res["mel_energies"] = mel_energies
    # subtract the utterance mean, then pad/crop to the target length as AST's dataloader
    mel_energies = mel_energies - torch.mean(mel_energies, dim=0)
    target_length = 16
    p = target_length - mel_energies.shape[0]
    if p > 0:
        m = torch.nn.ZeroPad2d((0, 0, 0, p))
        fbank = m(mel_energies)
    else:
        fbank = mel_energies[0:target_length, :]
    res["fbank"] = fbank
    # mixup of two utterances, as AST's loader mixes with lambda from NumPy
    mix_lambda = 0.3
    other = fbank.flip(0)
    res["mix"] = mix_lambda * fbank + (1 - mix_lambda) * other
    return res


def ast_program(torch):
    """AST's patch embedding with overlapping strides, positional embedding interpolation from
    a square grid to the spectrogram's grid, cls/dist tokens, and a BCE multi-label head."""
    rng = np.random.default_rng(3215)
    nn = torch.nn
    F = torch.nn.functional
    res = {}
    embed_dim, fstride, tstride = 8, 4, 4
    input_fdim, input_tdim = 16, 24
    orig_grid = 4  # the ImageNet model's sqrt(num_patches)

    def get_shape(fstride, tstride, input_fdim, input_tdim):
        test_input = torch.zeros(1, 1, input_fdim, input_tdim)
        test_proj = nn.Conv2d(1, embed_dim, kernel_size=(8, 8), stride=(fstride, tstride))
        test_out = test_proj(test_input)
        return test_out.shape[2], test_out.shape[3]

    f_dim, t_dim = get_shape(fstride, tstride, input_fdim, input_tdim)
    num_patches = f_dim * t_dim
    res["dims"] = [f_dim, t_dim, num_patches]
    proj = nn.Conv2d(3, embed_dim, kernel_size=(8, 8), stride=(8, 8))
    fill_(torch, proj, rng, 0.2)
    # sum the RGB filters into one input channel, then a new stride
    new_proj = nn.Conv2d(1, embed_dim, kernel_size=(8, 8), stride=(fstride, tstride))
    new_proj.weight = nn.Parameter(torch.sum(proj.weight, dim=1).unsqueeze(1))
    new_proj.bias = proj.bias
    res["shared_bias"] = [new_proj.bias is proj.bias]
    pos_embed = nn.Parameter(normal(torch, rng, 1, orig_grid * orig_grid + 2, embed_dim))
    new_pos_embed = pos_embed[:, 2:, :].detach().reshape(
        1, orig_grid * orig_grid, embed_dim).transpose(1, 2).reshape(
        1, embed_dim, orig_grid, orig_grid)
    if t_dim <= orig_grid:
        new_pos_embed = new_pos_embed[:, :, :, int(orig_grid / 2) - int(t_dim / 2):
                                      int(orig_grid / 2) - int(t_dim / 2) + t_dim]
    else:
        new_pos_embed = F.interpolate(new_pos_embed, size=(orig_grid, t_dim), mode="bilinear")
    if f_dim <= orig_grid:
        new_pos_embed = new_pos_embed[:, :, int(orig_grid / 2) - int(f_dim / 2):
                                      int(orig_grid / 2) - int(f_dim / 2) + f_dim, :]
    else:
        new_pos_embed = F.interpolate(new_pos_embed, size=(f_dim, t_dim), mode="bilinear")
    new_pos_embed = new_pos_embed.reshape(1, embed_dim, num_patches).transpose(1, 2)
    pos_embed = nn.Parameter(torch.cat([pos_embed[:, :2, :].detach(), new_pos_embed], dim=1))
    res["pos"] = pos_embed
    cls_token = nn.Parameter(normal(torch, rng, 1, 1, embed_dim))
    dist_token = nn.Parameter(normal(torch, rng, 1, 1, embed_dim))
    layer = nn.TransformerEncoderLayer(embed_dim, 2, 16, dropout=0.0, batch_first=True,
                                       norm_first=True, activation="gelu")
    fill_(torch, layer, rng, 0.2)
    head = nn.Sequential(nn.LayerNorm(embed_dim), nn.Linear(embed_dim, 5))
    fill_(torch, head, rng, 0.2)
    params = [new_proj.weight, new_proj.bias, pos_embed, cls_token, dist_token,
              *layer.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=5e-7, betas=(0.95, 0.999))
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, [1], gamma=0.5)
    x_in = normal(torch, rng, 2, input_tdim, input_fdim)
    labels = torch.from_numpy((rng.random((2, 5)) > 0.5).astype(np.float32))
    for _ in range(2):
        x = x_in.unsqueeze(1)
        x = x.transpose(2, 3)
        B = x.shape[0]
        x = new_proj(x).flatten(2).transpose(1, 2)
        cls_tokens = cls_token.expand(B, -1, -1)
        dist_tokens = dist_token.expand(B, -1, -1)
        x = torch.cat((cls_tokens, dist_tokens, x), dim=1)
        x = x + pos_embed
        x = layer(x)
        x = (x[:, 0] + x[:, 1]) / 2
        logits = head(x)
        loss = nn.BCEWithLogitsLoss()(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res.setdefault("loss", []).append(loss.item())
    res["logits"] = logits
    res["pos_grad"], res["proj_grad"] = pos_embed.grad, new_proj.weight.grad
    res["proj_bias"] = proj.bias
    res["lr"] = [g["lr"] for g in opt.param_groups]
    res["probs"] = torch.sigmoid(logits)
    # mAP-ish: ranks of the labels by score
    res["order"] = torch.argsort(logits.detach(), dim=1, descending=True)
    return res


PROGRAMS = [ddsp_program, lama_ffc_program, log_mel_program, kaldi_fbank_program, ast_program]

TOLERANCES = {
    # log mel energies (about -5) less their utterance mean: the logs' float32 ulps (5e-7) stay
    # as absolute error on differences near 0
    "kaldi_fbank_program": (1e-5, 5e-6),
}


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
