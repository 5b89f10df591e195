"""Audio, signal-processing and complex-valued programs, written as torchaudio-free research code
writes them, run once with `torch` bound to ember and once to PyTorch from the same NumPy weights
and data: a spectrogram front end (stft/istft round trip, hand-built mel filterbank, log-mel,
SpecAugment masks, MFCC, Griffin-Lim, sinc resampling), a multi-resolution STFT loss training a
conv1d generator, a complex-valued network (complex parameters, modReLU, polar, Wirtinger
gradients, optimizers on complex leaves) and FFT filtering (rfft long convolution, fft2 with
norm="ortho", hfft, learnable frequency-domain filters). The vocoders and the separation
network are in ..._audio_models.py; what the programs found, in ..._signal_fixes.py."""

import math
import warnings

import numpy as np
import pytest

import ember
from tests.parity._compare import ember_names
from tests.parity._programs import fill_, normal
from tests.parity.test_parity_programs_round9 import assert_same_results

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def _real(torch, value):
    """A complex tensor as its (..., 2) real view, so the comparison sees both parts."""
    value = value.detach()
    return torch.view_as_real(value.resolve_conj()) if value.is_complex() else value


def _mel_filterbank(torch, n_mels, n_fft, sample_rate, f_min=0.0, f_max=None):
    """A triangular HTK mel filterbank of shape (n_fft // 2 + 1, n_mels), as hand-rolled
    front ends build it (linspace on the mel scale, clamp of the two slopes)."""
    f_max = f_max or sample_rate / 2
    all_freqs = torch.linspace(0, sample_rate // 2, n_fft // 2 + 1)
    m_min = 2595.0 * math.log10(1.0 + f_min / 700.0)
    m_max = 2595.0 * math.log10(1.0 + f_max / 700.0)
    m_pts = torch.linspace(m_min, m_max, n_mels + 2)
    f_pts = 700.0 * (10 ** (m_pts / 2595.0) - 1.0)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1)
    down = (-1.0 * slopes[:, :-2]) / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    return torch.max(torch.zeros(1), torch.min(down, up))


def spectrogram_program(torch):
    """STFT front end: windows, magnitude/phase, mel filterbank, log-mel, SpecAugment, istft."""
    rng = np.random.default_rng(2201)
    res = {}
    sr, n_fft, hop = 8000, 64, 16
    t = torch.arange(0, 400, dtype=torch.float32) / sr
    chirp = torch.sin(2 * math.pi * (200 * t + 3000 * t ** 2))
    noise = normal(torch, rng, 2, 400) * 0.1
    wav = chirp.unsqueeze(0) + noise
    wav = wav / wav.abs().amax(dim=-1, keepdim=True).clamp(min=1e-8)

    hann = torch.hann_window(n_fft, periodic=True)
    hamming = torch.hamming_window(n_fft)
    res["windows"] = torch.stack([hann, hamming, torch.hann_window(n_fft, periodic=False),
                                  torch.signal.windows.hann(n_fft, sym=False),
                                  torch.signal.windows.hamming(n_fft),
                                  torch.signal.windows.gaussian(n_fft, std=8.0),
                                  torch.signal.windows.kaiser(n_fft, beta=6.0, sym=False)])

    spec = torch.stft(wav, n_fft, hop_length=hop, win_length=n_fft, window=hann, center=True,
                      pad_mode="reflect", normalized=False, onesided=True, return_complex=True)
    res["spec"] = _real(torch, spec)
    res["spec_meta"] = [_name(spec.dtype), str(tuple(spec.shape)), str(spec.is_complex())]
    mag, phase = spec.abs(), spec.angle()
    res["mag"], res["phase_cos"] = mag, torch.cos(phase)
    res["power"] = mag.pow(2)
    res["power_real"] = torch.view_as_real(spec).pow(2).sum(-1)

    spec_n = torch.stft(wav, n_fft, hop_length=hop, window=hamming, center=False,
                        normalized=True, return_complex=True)
    res["spec_norm"] = _real(torch, spec_n)
    spec_const = torch.stft(wav, n_fft, hop_length=hop, window=hann, center=True,
                            pad_mode="constant", return_complex=True)
    res["spec_const"] = spec_const.abs()
    full = torch.stft(wav, n_fft, hop_length=hop, window=hann, onesided=False,
                      return_complex=True)
    res["full_meta"] = [str(tuple(full.shape))]
    # the two-sided spectrum of a real signal is Hermitian: bin k mirrors bin n_fft - k
    mirrored = full[:, n_fft // 2 + 1:].flip(1).conj()
    res["hermitian_gap"] = (full[:, 1:n_fft // 2] - mirrored).abs().max()
    short_win = torch.hann_window(48)
    res["short_win"] = torch.stft(wav, n_fft, hop_length=hop, win_length=48, window=short_win,
                                  return_complex=True).abs()

    fb = _mel_filterbank(torch, 12, n_fft, sr)
    res["fb"] = fb
    mel = torch.matmul(mag.pow(2).transpose(-1, -2), fb).transpose(-1, -2)
    log_mel = mel.clamp(min=1e-5).log()
    res["log_mel"] = log_mel
    db = 10.0 * torch.log10(torch.clamp(mel, min=1e-10))
    db = torch.max(db, db.amax(dim=(-2, -1), keepdim=True) - 80.0)
    res["db"] = db
    mean, std = log_mel.mean(dim=-1, keepdim=True), log_mel.std(dim=-1, keepdim=True)
    normed = (log_mel - mean) / (std + 1e-5)

    # SpecAugment: one frequency and one time mask per example, drawn from a NumPy generator
    n_mels, n_frames = normed.shape[-2:]
    f0 = torch.tensor(rng.integers(0, n_mels - 3, (2, 1)))
    t0 = torch.tensor(rng.integers(0, n_frames - 5, (2, 1)))
    mel_idx = torch.arange(n_mels).unsqueeze(0)
    frame_idx = torch.arange(n_frames).unsqueeze(0)
    fmask = (mel_idx >= f0) & (mel_idx < f0 + 3)
    tmask = (frame_idx >= t0) & (frame_idx < t0 + 5)
    augmented = normed.masked_fill(fmask.unsqueeze(-1), 0.0)
    augmented = augmented.masked_fill(tmask.unsqueeze(1), normed.mean())
    res["augmented"] = augmented
    res["mask_counts"] = [int(fmask.sum()), int(tmask.sum())]

    # round trip: istft with length= restores the waveform
    rec = torch.istft(spec, n_fft, hop_length=hop, win_length=n_fft, window=hann, center=True,
                      length=wav.shape[-1])
    res["rec"] = rec
    res["rec_err"] = (rec - wav).abs().max()
    rec_n = torch.istft(torch.stft(wav, n_fft, hop, window=hamming, normalized=True,
                                   return_complex=True),
                        n_fft, hop, window=hamming, normalized=True, length=390)
    res["rec_norm"] = rec_n
    res["rec_meta"] = [str(tuple(rec.shape)), _name(rec.dtype), str(tuple(rec_n.shape))]
    # phase vocoder style: rebuild the spectrum from magnitude and phase with polar
    rebuilt = torch.polar(mag, phase)
    res["rebuilt"] = torch.istft(rebuilt, n_fft, hop, window=hann, length=400)
    # a batched signal stft'd through reshape, as (batch, channels, time) front ends do
    stereo = wav.reshape(1, 2, 400)
    spec2 = torch.stft(stereo.reshape(-1, 400), n_fft, hop, window=hann, return_complex=True)
    spec2 = spec2.reshape(stereo.shape[:-1] + spec2.shape[-2:])
    res["stereo_meta"] = [str(tuple(spec2.shape))]
    # float64 stft gives complex128
    spec64 = torch.stft(wav.double(), n_fft, hop, window=hann.double(), return_complex=True)
    res["spec64_meta"] = [_name(spec64.dtype), _name(spec64.abs().dtype)]
    res["method_stft"] = wav.stft(32, 8, window=torch.blackman_window(32), center=False,
                                  return_complex=True).abs()
    res["other_windows"] = torch.stack([
        torch.kaiser_window(16, periodic=False, beta=8.0), torch.bartlett_window(16),
        torch.blackman_window(16, periodic=False), torch.signal.windows.nuttall(16),
        torch.signal.windows.cosine(16), torch.signal.windows.exponential(16, tau=3.0),
        torch.signal.windows.general_cosine(16, a=[0.5, 0.3, 0.2]),
        torch.signal.windows.blackman(16, sym=False), torch.signal.windows.bartlett(16)])

    # framing by unfold (as hand-written front ends do) matches stft with center=False
    frames = wav.unfold(-1, n_fft, hop) * hann
    res["unfold_rfft"] = _real(torch, torch.fft.rfft(frames, dim=-1).transpose(-1, -2))
    # overlap-add of the frames by F.fold, normalised by the folded squared window
    n_frames = frames.shape[1]
    out_len = n_fft + hop * (n_frames - 1)
    ola = torch.nn.functional.fold((frames * hann).transpose(1, 2), (1, out_len),
                                   kernel_size=(1, n_fft), stride=(1, hop))
    env = torch.nn.functional.fold((hann ** 2).expand(1, n_frames, n_fft).transpose(1, 2),
                                   (1, out_len), kernel_size=(1, n_fft), stride=(1, hop))
    res["ola"] = (ola / env.clamp(min=1e-8)).squeeze(1).squeeze(1)[:, n_fft:-n_fft]

    # pre-emphasis, MFCC by an orthonormal DCT-II matrix, and delta features
    emph = torch.cat([wav[:, :1], wav[:, 1:] - 0.97 * wav[:, :-1]], dim=-1)
    emph_spec = torch.stft(emph, n_fft, hop, window=hann, return_complex=True).abs() ** 2
    log_mel_e = torch.log(torch.matmul(fb.T, emph_spec) + 1e-6)
    n_mfcc = 6
    n = torch.arange(12, dtype=torch.float32)
    k = torch.arange(n_mfcc, dtype=torch.float32).unsqueeze(1)
    dct = torch.cos(math.pi / 12 * (n + 0.5) * k)
    dct[0] *= 1.0 / math.sqrt(2.0)
    dct *= math.sqrt(2.0 / 12)
    mfcc = torch.einsum("km,bmt->bkt", dct, log_mel_e)
    res["mfcc"] = mfcc
    kernel = torch.arange(-2, 3, dtype=torch.float32).repeat(n_mfcc, 1, 1) / 10.0
    padded = torch.nn.functional.pad(mfcc, (2, 2), mode="replicate")
    res["delta"] = torch.nn.functional.conv1d(padded, kernel, groups=n_mfcc)

    # Griffin-Lim from a fixed initial phase
    angles = torch.polar(torch.ones_like(mag), torch.from_numpy(
        rng.uniform(-math.pi, math.pi, mag.shape).astype(np.float32)))
    tprev = torch.zeros_like(angles)
    for _ in range(4):
        inverse = torch.istft(mag * angles, n_fft, hop, window=hann, length=400)
        rebuilt = torch.stft(inverse, n_fft, hop, window=hann, return_complex=True)
        angles = rebuilt - (0.99 / (1 + 0.99)) * tprev
        tprev = rebuilt
        angles = angles.div(angles.abs().add(1e-16))
    res["griffin_lim"] = torch.istft(mag * angles, n_fft, hop, window=hann, length=400)

    # band-limited resampling (2:3) by a windowed-sinc kernel, as resampy-free code does
    orig, new = 2, 3
    width = 6
    idx = torch.arange(-width, width + orig, dtype=torch.float64)[None, None] / orig
    t_new = torch.arange(0, -new, -1, dtype=torch.float64)[:, None, None] / new + idx
    t_new = t_new.clamp(-width / orig, width / orig)
    win = torch.cos(t_new * math.pi / width / 2) ** 2
    kernels = (torch.special.sinc(t_new) * win * (0.99 / orig)).to(torch.float32)
    res["resample_kernels"] = kernels
    x_pad = torch.nn.functional.pad(wav[:, None], (width, width + orig))
    y = torch.nn.functional.conv1d(x_pad, kernels, stride=orig)
    res["resampled"] = y.transpose(1, 2).reshape(2, -1)[:, :int(math.ceil(new * 400 / orig))]
    res["i0"] = torch.i0(torch.linspace(0, 5, 7))
    return res


def multi_resolution_stft_program(torch):
    """Parallel WaveGAN's multi-resolution STFT loss training a small conv1d generator."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2202)
    res = {}

    class SpectralConvergence(nn.Module):
        def forward(self, x_mag, y_mag):
            return torch.norm(y_mag - x_mag, p="fro") / torch.norm(y_mag, p="fro")

    class LogSTFTMagnitude(nn.Module):
        def forward(self, x_mag, y_mag):
            return F.l1_loss(torch.log(y_mag), torch.log(x_mag))

    def stft_mag(x, fft_size, hop, win_length, window):
        x_stft = torch.stft(x, fft_size, hop, win_length, window, return_complex=True)
        # clamp before the square root keeps the gradient finite at silent bins
        power = x_stft.real ** 2 + x_stft.imag ** 2
        return torch.sqrt(torch.clamp(power, min=1e-7)).transpose(2, 1)

    class STFTLoss(nn.Module):
        def __init__(self, fft_size, shift, win_length, window="hann_window"):
            super().__init__()
            self.fft_size, self.shift, self.win_length = fft_size, shift, win_length
            self.register_buffer("window", getattr(torch, window)(win_length))
            self.sc, self.mag = SpectralConvergence(), LogSTFTMagnitude()

        def forward(self, x, y):
            x_mag = stft_mag(x, self.fft_size, self.shift, self.win_length, self.window)
            y_mag = stft_mag(y, self.fft_size, self.shift, self.win_length, self.window)
            return self.sc(x_mag, y_mag), self.mag(x_mag, y_mag)

    class MultiResolutionSTFTLoss(nn.Module):
        def __init__(self, resolutions, window="hann_window"):
            super().__init__()
            self.losses = nn.ModuleList([STFTLoss(f, s, w, window) for f, s, w in resolutions])

        def forward(self, x, y):
            sc, mag = 0.0, 0.0
            for f in self.losses:
                s, m = f(x, y)
                sc, mag = sc + s, mag + m
            return sc / len(self.losses), mag / len(self.losses)

    class Generator(nn.Module):
        def __init__(self, ch=8):
            super().__init__()
            self.pre = nn.Conv1d(4, ch, 7, padding=3)
            self.up = nn.ConvTranspose1d(ch, ch // 2, 8, stride=4, padding=2)
            self.res = nn.ModuleList([nn.Conv1d(ch // 2, ch // 2, 3, dilation=d, padding=d)
                                      for d in (1, 3)])
            self.post = nn.Conv1d(ch // 2, 1, 7, padding=3)

        def forward(self, c):
            x = F.leaky_relu(self.pre(c), 0.1)
            x = F.leaky_relu(self.up(x), 0.1)
            for conv in self.res:
                x = x + conv(F.leaky_relu(x, 0.1))
            return torch.tanh(self.post(x)).squeeze(1)

    gen = Generator()
    fill_(torch, gen, rng, 0.25)
    cond = normal(torch, rng, 2, 4, 64)
    t = torch.arange(256, dtype=torch.float32)
    target = 0.5 * torch.sin(2 * math.pi * 0.03 * t) + 0.2 * torch.sin(2 * math.pi * 0.11 * t)
    target = (target + normal(torch, rng, 2, 256) * 0.05)
    mr_loss = MultiResolutionSTFTLoss([(64, 16, 48), (32, 8, 32), (128, 32, 96)])
    res["buffers"] = [name for name, _ in mr_loss.named_buffers()]
    opt = torch.optim.Adam(gen.parameters(), lr=2e-3, betas=(0.8, 0.99), eps=1e-6)
    res["sc"], res["mag"], res["grad_norm"] = [], [], []
    for _ in range(4):
        fake = gen(cond)
        sc, mag = mr_loss(fake, target)
        loss = sc + mag + 0.1 * F.l1_loss(fake, target)
        opt.zero_grad()
        loss.backward()
        res["grad_norm"].append(nn.utils.clip_grad_norm_(gen.parameters(), 10.0).item())
        opt.step()
        res["sc"].append(sc.item())
        res["mag"].append(mag.item())

    # gradients through abs() of a complex stft and the Frobenius norm of complex tensors
    x = normal(torch, rng, 2, 128).requires_grad_()
    window = torch.hamming_window(32, periodic=True)
    spec = torch.stft(x, 32, 8, window=window, return_complex=True)
    spec.retain_grad()
    loss = spec.abs().pow(1.5).mean() + torch.linalg.norm(spec, "fro", dim=(-2, -1)).sum() * 1e-2
    loss.backward()
    res["x_grad"], res["spec_grad"] = x.grad, _real(torch, spec.grad)
    res["spec_grad_fn"] = [type(spec.grad_fn).__name__, type(spec.abs().grad_fn).__name__]
    res["complex_norm"] = torch.linalg.norm(spec.detach(), ord="fro", dim=(-2, -1))
    res["complex_vnorm"] = torch.linalg.vector_norm(spec.detach(), ord=2, dim=-1)
    res["norm_meta"] = [_name(res["complex_norm"].dtype), _name(spec.abs().dtype)]
    res["params"] = torch.cat([p.detach().flatten() for p in gen.parameters()])
    return res


def complex_network_program(torch):
    """A complex-valued MLP: complex64 parameters, modReLU/CReLU, polar, Wirtinger gradients."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2204)
    res = {}

    def cnormal(*shape, scale=1.0):
        re = rng.standard_normal(shape).astype(np.float32) * scale
        im = rng.standard_normal(shape).astype(np.float32) * scale
        return torch.complex(torch.from_numpy(re), torch.from_numpy(im))

    class ComplexLinear(nn.Module):
        def __init__(self, fin, fout):
            super().__init__()
            self.weight = nn.Parameter(cnormal(fout, fin, scale=1 / math.sqrt(2 * fin)))
            self.bias = nn.Parameter(torch.zeros(fout, dtype=torch.complex64))

        def forward(self, z):
            return torch.matmul(z, self.weight.t()) + self.bias

    class ModReLU(nn.Module):
        def __init__(self, features):
            super().__init__()
            self.b = nn.Parameter(torch.full((features,), -0.1))

        def forward(self, z):
            mag = torch.abs(z)
            scale = F.relu(mag + self.b) / (mag + 1e-6)
            return z * scale

    def crelu(z):
        return torch.view_as_complex(F.relu(torch.view_as_real(z)).contiguous())

    class ComplexNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.act = ComplexLinear(6, 10), ModReLU(10)
            self.fc2 = ComplexLinear(10, 10)
            self.fc3 = ComplexLinear(10, 3)
            self.phase_shift = nn.Parameter(torch.zeros(3))

        def forward(self, z):
            h = self.act(self.fc1(z))
            h = crelu(self.fc2(h))
            out = self.fc3(h)
            return out * torch.polar(torch.ones_like(self.phase_shift), self.phase_shift)

    model = ComplexNet()
    res["dtypes"] = [_name(p.dtype) for p in model.parameters()]
    res["is_complex"] = [str(p.is_complex()) for p in model.parameters()]
    z = cnormal(16, 6)
    target = cnormal(16, 3, scale=0.5)
    labels = torch.from_numpy(rng.integers(0, 3, 16))

    opt = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-4)
    res["loss"], res["w_grad"], res["b_grad"] = [], [], []
    for step in range(4):
        out = model(z)
        # a real loss of complex outputs: squared error plus a magnitude classifier
        mse = (out - target).abs().pow(2).mean()
        ce = F.cross_entropy(out.abs(), labels)
        phase = torch.angle(out).cos().mean()
        loss = mse + 0.5 * ce + 0.1 * phase
        opt.zero_grad()
        loss.backward()
        if step == 0:
            res["w_grad"] = _real(torch, model.fc1.weight.grad)
            res["b_grad"] = _real(torch, model.fc3.bias.grad)
            res["shift_grad"] = model.phase_shift.grad
            res["grad_dtypes"] = [_name(p.grad.dtype) for p in model.parameters()]
        opt.step()
        res["loss"].append(loss.item())
    res["exp_avg_sq"] = _real(torch, opt.state[model.fc1.weight]["exp_avg_sq"])
    res["exp_avg_sq_meta"] = [_name(opt.state[model.fc1.weight]["exp_avg_sq"].dtype)]

    # Wirtinger: for L = |z|^2 the gradient is 2 z (conjugate Wirtinger, torch's convention)
    w = cnormal(5).requires_grad_()
    (w.abs() ** 2).sum().backward()
    res["wirtinger"] = _real(torch, w.grad)
    w2 = cnormal(5).requires_grad_()
    (w2 * w2).real.sum().backward()
    res["wirtinger_sq"] = _real(torch, w2.grad)
    w3 = cnormal(4).requires_grad_()
    torch.view_as_real(w3.exp() * 1j).pow(2).sum().backward()
    res["wirtinger_exp"] = _real(torch, w3.grad)
    # a complex output needs an explicit complex grad_outputs
    w4 = cnormal(3).requires_grad_()
    y = w4.conj() * (2 - 1j)
    (g,) = torch.autograd.grad(y, w4, grad_outputs=torch.ones_like(y))
    res["conj_grad"] = _real(torch, g)
    try:
        (w4 * 2).sum().backward()
        res["complex_backward_error"] = ["none"]
    except RuntimeError as e:
        res["complex_backward_error"] = [ember_names(str(e))]

    # SGD with momentum on the complex weights too, and clipping of complex gradients
    model.zero_grad()
    model(z).abs().sum().backward()
    res["clip"] = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    sgd = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    sgd.step()
    sgd.step()
    for opt_cls, kw in ((torch.optim.RMSprop, dict(lr=1e-2, momentum=0.5, centered=True)),
                        (torch.optim.Adagrad, dict(lr=0.1)),
                        (torch.optim.AdamW, dict(lr=1e-2, amsgrad=True)),
                        (torch.optim.Adam, dict(lr=1e-2, foreach=False, maximize=True))):
        leaf = nn.Parameter(cnormal(4, 2))
        inner = opt_cls([leaf], **kw)
        for _ in range(3):
            inner.zero_grad()
            (leaf * torch.tensor([1 + 2j, -0.5j])).abs().pow(3).sum().backward()
            inner.step()
        res[f"{opt_cls.__name__}_complex"] = _real(torch, leaf)
    # conjugate views: lazy conj, vdot/dot and complex einsum
    a, b = cnormal(5), cnormal(5)
    ac = a.conj()
    res["vdot"] = _real(torch, torch.stack([torch.vdot(a, b), torch.dot(ac, b),
                                            torch.einsum("i,i->", ac, b),
                                            (ac * b).sum(), ac @ b]))
    zero = torch.zeros(2, dtype=torch.complex64, requires_grad=True)
    (zero.abs().sum() + zero.angle().sum()).backward()
    res["abs_at_zero_grad"] = _real(torch, zero.grad)
    re, im = torch.tensor([1.0, -2.0], requires_grad=True), torch.tensor([0.5, 3.0],
                                                                        requires_grad=True)
    torch.complex(re, im).abs().sum().backward()
    res["complex_parts_grad"] = torch.cat([re.grad, im.grad])
    res["polar_parts"] = _real(torch, torch.polar(torch.tensor([2.0, 0.5]),
                                                 torch.tensor([0.3, -2.0])))
    res["sgn"] = _real(torch, torch.sgn(z[:2]))
    res["params"] = torch.cat([torch.view_as_real(p.detach()).flatten() if p.is_complex()
                               else p.detach().flatten() for p in model.parameters()])
    return res


def fft_filtering_program(torch):
    """Hyena/S4-style FFT long convolution, spectral filters, fft2 with norm="ortho", hfft."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2205)
    res = {}

    def fft_conv(u, k, bias):
        """Causal long convolution of u (B, H, L) with k (H, L) through zero-padded rffts."""
        seqlen = u.shape[-1]
        fft_size = 2 * seqlen
        k_f = torch.fft.rfft(k, n=fft_size) / fft_size
        u_f = torch.fft.rfft(u.to(dtype=k.dtype), n=fft_size)
        y = torch.fft.irfft(u_f * k_f, n=fft_size, norm="forward")[..., :seqlen]
        return (y + u * bias.unsqueeze(-1)).to(dtype=u.dtype)

    class ImplicitFilter(nn.Module):
        """Hyena's filter: an MLP of positional features, times an exponential decay window."""
        def __init__(self, channels, seqlen, emb=5):
            super().__init__()
            t = torch.linspace(0, 1, seqlen)[None, :, None]
            bands = (emb - 1) // 2
            w = 2 * math.pi * torch.arange(1, bands + 1)[None, None, :] / seqlen
            z = torch.exp(-1j * w * torch.arange(seqlen)[None, :, None])
            self.register_buffer("z", torch.cat([t, z.real, z.imag], dim=-1))
            self.mlp = nn.Sequential(nn.Linear(emb, 16), nn.SiLU(), nn.Linear(16, channels))
            decay = torch.linspace(math.log(1e-2) / 1.5, math.log(1e-2) / 0.3, channels)
            self.register_buffer("deltas", decay[None, None, :].abs())
            self.bias = nn.Parameter(torch.zeros(channels))

        def forward(self, seqlen):
            h = self.mlp(self.z[:, :seqlen])
            return (h * torch.exp(-t_grid(seqlen, h) * self.deltas)).squeeze(0).transpose(0, 1)

    def t_grid(seqlen, like):
        return torch.linspace(0, 1, seqlen, dtype=like.dtype)[None, :, None]

    class GlobalFilter(nn.Module):
        """GFNet's learnable frequency-domain filter over a 2-D feature map."""
        def __init__(self, h, w, dim):
            super().__init__()
            self.weight = nn.Parameter(torch.zeros(h, w // 2 + 1, dim, 2))

        def forward(self, x):
            _, a, b, _ = x.shape
            x = torch.fft.rfft2(x, dim=(1, 2), norm="ortho")
            x = x * torch.view_as_complex(self.weight)
            return torch.fft.irfft2(x, s=(a, b), dim=(1, 2), norm="ortho")

    channels, seqlen = 4, 32
    filt = ImplicitFilter(channels, seqlen)
    gf = GlobalFilter(6, 6, 3)
    fill_(torch, list(filt.parameters()) + list(gf.parameters()), rng, 0.3)
    u = normal(torch, rng, 2, channels, seqlen)
    target = torch.roll(u, shifts=3, dims=-1) * 0.5
    img = normal(torch, rng, 2, 6, 6, 3)
    img_target = normal(torch, rng, 2, 6, 6, 3) * 0.1
    params = list(filt.parameters()) + list(gf.parameters())
    opt = torch.optim.AdamW(params, lr=5e-3, weight_decay=0.01)
    res["loss"], res["k_grad_norm"] = [], []
    for step in range(4):
        k = filt(seqlen)
        y = fft_conv(u, k, filt.bias)
        loss = F.mse_loss(y, target) + F.mse_loss(gf(img), img_target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["k_grad_norm"].append(torch.cat([p.grad.flatten() for p in params]).norm().item())
    res["gf_grad"] = gf.weight.grad
    # the FFT convolution agrees with a direct causal conv1d
    with torch.no_grad():
        k = filt(seqlen)
        direct = F.conv1d(F.pad(u, (seqlen - 1, 0)), k.flip(-1).unsqueeze(1), groups=channels)
        res["fftconv"] = fft_conv(u, k, torch.zeros(channels))
        res["direct"] = direct

    # frequency grids and shifts
    res["fftfreq"] = torch.fft.fftfreq(8, d=0.5)
    res["rfftfreq"] = torch.fft.rfftfreq(9, 1 / 16)
    res["freq_meta"] = [_name(torch.fft.fftfreq(4, dtype=torch.float64).dtype),
                        _name(torch.fft.rfftfreq(4).dtype)]
    grid = torch.fft.fftshift(torch.fft.fftfreq(6))
    res["fftshift"], res["ifftshift"] = grid, torch.fft.ifftshift(grid)
    spec2 = torch.fft.fft2(img[..., 0], norm="ortho")
    res["fft2"] = _real(torch, spec2)
    res["fftshift2"] = _real(torch, torch.fft.fftshift(spec2, dim=(-2, -1)))
    res["ifft2_rt"] = _real(torch, torch.fft.ifft2(spec2, norm="ortho"))
    res["fftn"] = _real(torch, torch.fft.fftn(img, s=(4, 8), dim=(1, 2)))
    res["ifftn"] = _real(torch, torch.fft.ifftn(img, dim=(1, 2), norm="forward"))

    # a low-pass filter by a radial frequency mask, with gradients back to the image
    x = img[..., 0].clone().requires_grad_()
    fy, fx = torch.meshgrid(torch.fft.fftfreq(6), torch.fft.fftfreq(6), indexing="ij")
    mask = (fy ** 2 + fx ** 2).sqrt() <= 0.25
    low = torch.fft.ifft2(torch.fft.fft2(x) * mask).real
    low.pow(2).sum().backward()
    res["lowpass"], res["lowpass_grad"] = low, x.grad

    # Hermitian FFTs: hfft of a one-sided spectrum is real; ihfft inverts it
    half = torch.fft.rfft(u[0, 0])
    res["hfft"] = torch.fft.hfft(half, n=seqlen)
    res["ihfft"] = _real(torch, torch.fft.ihfft(u[0, 0]))
    res["hfft_meta"] = [_name(res["hfft"].dtype), str(tuple(res["hfft"].shape))]
    h = half.detach().clone().requires_grad_()
    torch.fft.hfft(h, n=seqlen).pow(2).sum().backward()
    res["hfft_grad"] = _real(torch, h.grad)
    res["irfft_odd"] = torch.fft.irfft(half, n=seqlen - 1)
    # cross-correlation through rfft: the peak lag recovers the shift of the target
    corr = torch.fft.irfft(torch.fft.rfft(target[0]) * torch.fft.rfft(u[0]).conj(), n=seqlen)
    res["corr"] = corr
    res["lag"] = corr.argmax(dim=-1)
    # float64 inputs keep complex128 spectra; integers promote to the default dtype
    res["fft_dtypes"] = [_name(torch.fft.rfft(u.double()).dtype),
                         _name(torch.fft.fft(torch.arange(4)).dtype),
                         _name(torch.fft.irfft(torch.fft.rfft(u.double())).dtype)]
    return res


PROGRAMS = [spectrogram_program, multi_resolution_stft_program, complex_network_program,
            fft_filtering_program]


def _run(lib, program):
    """The program's results and the warnings it raised, as (category, message) pairs."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = program(lib)
    return res, [(w.category.__name__, ember_names(str(w.message))) for w in caught]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    ours, our_warnings = _run(ember, program)
    theirs, their_warnings = _run(torch, program)
    assert our_warnings == their_warnings
    assert_same_results(ours, theirs, rtol=2e-4, atol=2e-5)
