"""Learned compression and audio programs of round 32, second part: CompressAI's joint
autoregressive model (MaskedConv2d by `weight.data *= mask`, mean-scale Gaussian conditional,
straight-through rounding, the raster-scan decode loop on padded crops, sub-pixel upsampling),
the quantile bisection `_update_quantiles` runs under no_grad, torchlibrosa's STFT as Conv1d
filters built from a NumPy DFT matrix with a log-mel and power_to_db on NumPy scalars, a PANNs
CNN front end (bn0 over mel bins, SpecAugment stripes cut with 0-dim tensor bounds, mixup,
attention pooling, frame-wise upsampling and padding), and Griffin-Lim by hand (torch.polar,
istft, momentum)."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests
from tests.parity.test_parity_programs_round32_codec import (_dt, _entropy_bottleneck_class,
                                                             _gaussian_conditional_class,
                                                             _seed_biases)

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _masked_conv_class(torch):
    class MaskedConv2d(torch.nn.Conv2d):
        def __init__(self, *args, mask_type="A", **kwargs):
            super().__init__(*args, **kwargs)
            if mask_type not in ("A", "B"):
                raise ValueError(f'Invalid "mask_type" value "{mask_type}"')
            self.register_buffer("mask", torch.ones_like(self.weight.data))
            _, _, h, w = self.mask.size()
            self.mask[:, :, h // 2, w // 2 + (mask_type == "B"):] = 0
            self.mask[:, :, h // 2 + 1:] = 0

        def forward(self, x):
            # TODO(begaintj): weight assigment is not supported by torchscript
            self.weight.data *= self.mask
            return super().forward(x)

    return MaskedConv2d


def quantize_ste(torch, x):
    return (torch.round(x) - x).detach() + x


def joint_autoregressive_program(torch):
    rng = np.random.default_rng(3221)
    nn = torch.nn
    MaskedConv2d = _masked_conv_class(torch)
    GC = _gaussian_conditional_class(torch)
    EB = _entropy_bottleneck_class(torch)
    N, M = 4, 6
    res = {}
    ctx = MaskedConv2d(M, 2 * M, kernel_size=5, padding=2, stride=1)
    res["mask"] = ctx.mask
    res["mask_keys"] = list(ctx.state_dict().keys())
    try:
        MaskedConv2d(1, 1, 3, mask_type="C")
    except ValueError as e:
        res["bad_mask"] = [str(e)]
    entropy_parameters = nn.Sequential(
        nn.Conv2d(M * 12 // 3, M * 10 // 3, 1), nn.LeakyReLU(inplace=True),
        nn.Conv2d(M * 10 // 3, M * 8 // 3, 1), nn.LeakyReLU(inplace=True),
        nn.Conv2d(M * 8 // 3, M * 6 // 3, 1))
    h_s = nn.Sequential(
        nn.ConvTranspose2d(N, M, 5, stride=2, output_padding=1, padding=2),
        nn.LeakyReLU(inplace=True),
        nn.Conv2d(M, M * 2, 3, padding=1))
    g_s = nn.Sequential(
        nn.Conv2d(M, 3 * 4, 3, padding=1), nn.PixelShuffle(2))
    eb = EB(N)
    _seed_biases(torch, eb, rng)
    gc = GC(None)
    modules = nn.ModuleList([ctx, entropy_parameters, h_s, g_s, eb])
    fill_(torch, [p for n, p in modules.named_parameters() if "quantiles" not in n
                  and not n.startswith("4.")], rng, 0.2)
    y = normal(torch, rng, 1, M, 4, 4) * 3
    z = normal(torch, rng, 1, N, 2, 2)
    opt = torch.optim.Adam([p for n, p in modules.named_parameters()
                            if not n.endswith("quantiles")], lr=1e-3)
    for _ in range(2):
        n_z = torch.from_numpy(rng.uniform(-0.5, 0.5, (N, 1, 2, 2)).astype(np.float32))
        z_hat, z_lik = eb(z, noise=n_z)
        params = h_s(z_hat)
        y_hat = quantize_ste(torch, y)
        ctx_params = ctx(y_hat)
        gaussian_params = entropy_parameters(torch.cat((params, ctx_params), dim=1))
        scales_hat, means_hat = gaussian_params.chunk(2, 1)
        _, y_lik = gc(y, scales_hat, means=means_hat, training=False)
        x_hat = g_s(y_hat)
        bpp = sum(torch.log(lk).sum() / (-math.log(2) * 64) for lk in (y_lik, z_lik))
        loss = bpp + x_hat.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.setdefault("loss", []).append(loss.item())
    res["x_hat"], res["ctx_grad"], res["ctx_w"] = x_hat, ctx.weight.grad, ctx.weight
    # the masked entries stay zero: the mask multiplies the weight before every forward
    res["masked_zero"] = [bool((ctx.weight * (1 - ctx.mask)).abs().max() > 0)]
    # decompress: raster scan over the padded y_hat, the context from each 5x5 crop
    kernel_size, padding = 5, 2
    with torch.no_grad():
        params = h_s(z_hat)
        y_dec = torch.zeros((1, M, 4 + 2 * padding, 4 + 2 * padding))
        masked_weight = ctx.weight * ctx.mask
        for h in range(4):
            for w in range(4):
                y_crop = y_dec[:, :, h: h + kernel_size, w: w + kernel_size]
                ctx_p = torch.nn.functional.conv2d(y_crop, masked_weight, bias=ctx.bias)
                p = params[:, :, h: h + 1, w: w + 1]
                gaussian_params = entropy_parameters(torch.cat((p, ctx_p), dim=1))
                gaussian_params = gaussian_params.squeeze(3).squeeze(2)
                scales_hat, means_hat = gaussian_params.chunk(2, 1)
                # the symbols a range decoder would return: y rounded about the means
                rv = torch.round(y[0, :, h, w] - means_hat[0]) + means_hat[0]
                hp, wp = h + padding, w + padding
                y_dec[:, :, hp: hp + 1, wp: wp + 1] = rv.reshape(1, -1, 1, 1)
        y_dec = torch.nn.functional.pad(y_dec, (-padding, -padding, -padding, -padding))
    res["y_dec"] = y_dec
    res["dec_shape"] = [str(tuple(y_dec.shape))]
    return res


def update_quantiles_program(torch):
    """_update_quantiles: bisection on the cumulative logits, per channel, under no_grad,
    writing into quantiles.data by index."""
    rng = np.random.default_rng(3222)
    EB = _entropy_bottleneck_class(torch)
    eb = EB(3)
    _seed_biases(torch, eb, rng)
    res = {}
    device = eb.quantiles.device
    shape = eb.quantiles.shape[:1] + (1,)
    low = torch.full(shape, -1e9, device=device)
    high = torch.full(shape, 1e9, device=device)

    def f(y, self=eb):
        return self._logits_cumulative(y, stop_gradient=True)

    with torch.no_grad():
        for i, target in enumerate((-eb.target[2], eb.target[1], eb.target[2])):
            lo, hi = low.clone(), high.clone()
            for _ in range(60):
                mid = (lo + hi) / 2
                below = f(mid.unsqueeze(-1)).squeeze(-1) < target
                lo = torch.where(below, mid, lo)
                hi = torch.where(below, hi, mid)
            eb.quantiles.data[:, :, i] = ((lo + hi) / 2)
            res.setdefault("iters", []).append(float(target))
    res["quantiles"] = eb.quantiles
    res["aux"] = eb.loss()
    res["grad_flag"] = [eb.quantiles.requires_grad, eb.quantiles.grad is None]
    res["medians"] = eb._get_medians()
    return res


def _dft_matrix(n):
    (x, y) = np.meshgrid(np.arange(n), np.arange(n))
    omega = np.exp(-2 * np.pi * 1j / n)
    return np.power(omega, x * y)


def torchlibrosa_program(torch):
    """torchlibrosa: STFT as two Conv1d over a NumPy DFT matrix times a window, log-mel with
    power_to_db subtracting NumPy float64 scalars in place."""
    rng = np.random.default_rng(3223)
    nn = torch.nn
    F = torch.nn.functional
    n_fft, hop, n_mels = 32, 8, 6
    res = {}
    fft_window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft))  # periodic hann
    W = _dft_matrix(n_fft)
    out_channels = n_fft // 2 + 1
    conv_real = nn.Conv1d(1, out_channels, n_fft, stride=hop, bias=False)
    conv_imag = nn.Conv1d(1, out_channels, n_fft, stride=hop, bias=False)
    conv_real.weight.data = torch.Tensor(
        np.real(W[:, 0:out_channels] * fft_window[:, None]).T)[:, None, :]
    conv_imag.weight.data = torch.Tensor(
        np.imag(W[:, 0:out_channels] * fft_window[:, None]).T)[:, None, :]
    res["w_dtype"] = [_dt(conv_real.weight), str(tuple(conv_imag.weight.shape))]
    for param in (conv_real.weight, conv_imag.weight):
        param.requires_grad = False
    x = normal(torch, rng, 2, 400) * 0.1
    inp = x[:, None, :]
    inp = F.pad(inp, pad=(n_fft // 2, n_fft // 2), mode="reflect")
    real = conv_real(inp)[:, None, :, :].transpose(2, 3)
    imag = conv_imag(inp)[:, None, :, :].transpose(2, 3)
    res["real"], res["imag"] = real, imag
    ref = torch.stft(x, n_fft, hop, window=torch.from_numpy(fft_window.astype(np.float32)),
                     pad_mode="reflect", return_complex=True)
    res["vs_stft"] = [float((ref.real.transpose(1, 2) - real[:, 0]).abs().max() < 1e-4)]
    spectrogram = real ** 2 + imag ** 2
    # librosa's slaney mel matrix, computed in NumPy and frozen as a Parameter
    melW = np.maximum(0, 1 - np.abs(np.linspace(0, n_mels + 1, out_channels)[None, :]
                                    - np.arange(1, n_mels + 1)[:, None]))
    melW = nn.Parameter(torch.Tensor(melW.T))
    melW.requires_grad = False
    mel_spectrogram = torch.matmul(spectrogram, melW)
    amin, ref_value, top_db = 1e-10, 1.0, 80.0
    log_spec = 10.0 * torch.log10(torch.clamp(mel_spectrogram, min=amin, max=np.inf))
    log_spec -= 10.0 * np.log10(np.maximum(amin, ref_value))
    log_spec = torch.clamp(log_spec, min=log_spec.max().item() - top_db, max=np.inf)
    res["log_spec"], res["log_dtype"] = log_spec, [_dt(log_spec)]
    # the NumPy-scalar arithmetic keeps float32 and gives tensors
    s = log_spec * np.float64(0.5) + np.float32(1.0)
    res["np_scalars"] = [_dt(s), type(s).__name__, _dt(np.float64(2.0) * log_spec)]
    res["np_left"] = np.float64(2.0) * log_spec[0, 0, :2]
    # the whole front end is differentiable in the waveform
    xg = x.clone().requires_grad_()
    pad = F.pad(xg[:, None, :], pad=(n_fft // 2, n_fft // 2), mode="reflect")
    power = conv_real(pad) ** 2 + conv_imag(pad) ** 2
    db = 10.0 * torch.log10(torch.clamp(torch.matmul(power.transpose(1, 2), melW), min=amin))
    db.mean().backward()
    res["x_grad"] = xg.grad
    res["frozen"] = [conv_real.weight.grad is None, melW.grad is None]
    return res


def panns_program(torch):
    """A PANNs-style CNN: bn0 over mel bins by transposes, SpecAugment DropStripes with 0-dim
    tensor slice bounds, mixup over even/odd pairs, conv blocks with avg pooling, max+mean
    pooling over frequency, attention pooling and frame-wise upsampling."""
    rng = np.random.default_rng(3224)
    nn = torch.nn
    F = torch.nn.functional
    res = {}
    mel_bins, classes = 8, 4

    def init_layer(layer):
        nn.init.xavier_uniform_(layer.weight)
        if hasattr(layer, "bias") and layer.bias is not None:
            layer.bias.data.fill_(0.)

    def init_bn(bn):
        bn.bias.data.fill_(0.)
        bn.weight.data.fill_(1.)

    class ConvBlock(nn.Module):
        def __init__(self, in_channels, out_channels):
            super().__init__()
            self.conv1 = nn.Conv2d(in_channels, out_channels, (3, 3), (1, 1), (1, 1), bias=False)
            self.conv2 = nn.Conv2d(out_channels, out_channels, (3, 3), (1, 1), (1, 1),
                                   bias=False)
            self.bn1 = nn.BatchNorm2d(out_channels)
            self.bn2 = nn.BatchNorm2d(out_channels)
            init_layer(self.conv1)
            init_layer(self.conv2)
            init_bn(self.bn1)
            init_bn(self.bn2)

        def forward(self, input, pool_size=(2, 2), pool_type="avg"):
            x = input
            x = F.relu_(self.bn1(self.conv1(x)))
            x = F.relu_(self.bn2(self.conv2(x)))
            if pool_type == "max":
                x = F.max_pool2d(x, kernel_size=pool_size)
            elif pool_type == "avg":
                x = F.avg_pool2d(x, kernel_size=pool_size)
            elif pool_type == "avg+max":
                x1 = F.avg_pool2d(x, kernel_size=pool_size)
                x2 = F.max_pool2d(x, kernel_size=pool_size)
                x = x1 + x2
            return x

    class AttBlock(nn.Module):
        def __init__(self, n_in, n_out):
            super().__init__()
            self.att = nn.Conv1d(n_in, n_out, 1, bias=True)
            self.cla = nn.Conv1d(n_in, n_out, 1, bias=True)
            self.bn_att = nn.BatchNorm1d(n_out)

        def forward(self, x):
            norm_att = torch.softmax(torch.clamp(self.att(x), -10, 10), dim=-1)
            cla = torch.sigmoid(self.cla(x))
            x = torch.sum(norm_att * cla, dim=2)
            return x, norm_att, cla

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn0 = nn.BatchNorm2d(mel_bins)
            self.conv_block1 = ConvBlock(1, 4)
            self.conv_block2 = ConvBlock(4, 8)
            self.fc1 = nn.Linear(8, 8, bias=True)
            self.att_block = AttBlock(8, classes)

        def forward(self, x, stripes=None, mixup_lambda=None):
            x = x.transpose(1, 3)
            x = self.bn0(x)
            x = x.transpose(1, 3)
            if self.training and stripes is not None:
                for n, (bgn, distance) in enumerate(stripes):
                    x[n, :, bgn: bgn + distance, :] = 0
            if self.training and mixup_lambda is not None:
                x = (x[0::2].transpose(0, -1) * mixup_lambda[0::2]
                     + x[1::2].transpose(0, -1) * mixup_lambda[1::2]).transpose(0, -1)
            x = self.conv_block1(x, pool_size=(2, 2), pool_type="avg")
            x = F.dropout(x, p=0.0, training=self.training)
            x = self.conv_block2(x, pool_size=(1, 2), pool_type="avg+max")
            x = torch.mean(x, dim=3)
            x1 = F.max_pool1d(x, kernel_size=3, stride=1, padding=1)
            x2 = F.avg_pool1d(x, kernel_size=3, stride=1, padding=1)
            x = x1 + x2
            x = x.transpose(1, 2)
            x = F.relu_(self.fc1(x))
            x = x.transpose(1, 2)
            clipwise_output, norm_att, segmentwise_output = self.att_block(x)
            segmentwise_output = segmentwise_output.transpose(1, 2)
            ratio = 2
            b, t, c = segmentwise_output.shape
            framewise = segmentwise_output[:, :, None, :].repeat(1, 1, ratio, 1)
            framewise = framewise.reshape(b, t * ratio, c)
            frames_num = 20
            pad = framewise[:, -1:, :].repeat(1, frames_num - framewise.shape[1], 1)
            framewise = torch.cat((framewise, pad), dim=1)
            return {"clipwise_output": clipwise_output, "framewise_output": framewise,
                    "norm_att": norm_att}

    net = Net()
    fill_(torch, net, rng, 0.3)
    res["keys"] = list(net.state_dict().keys())
    x = normal(torch, rng, 4, 1, 16, mel_bins)
    target = torch.from_numpy((rng.random((2, classes)) > 0.5).astype(np.float32))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-08,
                           weight_decay=0., amsgrad=True)
    lam = np.random.default_rng(7).beta(1.0, 1.0, 2)
    mixup_lambda = torch.from_numpy(np.array([lam[0], 1 - lam[0], lam[1], 1 - lam[1]],
                                             dtype=np.float32))
    net.train()
    for _ in range(2):
        stripes = [(torch.tensor(int(b)), torch.tensor(int(d)))
                   for b, d in zip(rng.integers(0, 10, 4), rng.integers(0, 4, 4))]
        out = net(x, stripes, mixup_lambda)
        loss = F.binary_cross_entropy(out["clipwise_output"], target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.setdefault("loss", []).append(loss.item())
    res["clip"], res["frame"] = out["clipwise_output"], out["framewise_output"]
    res["att"] = out["norm_att"]
    res["bn0"] = [net.bn0.running_mean, net.bn0.running_var]
    res["w_grad"] = net.conv_block1.conv1.weight.grad
    net.eval()
    with torch.no_grad():
        res["eval"] = net(x)["clipwise_output"]
    return res


def griffin_lim_program(torch):
    """torchaudio's griffinlim written out: random-free init (ones phase), istft/stft rounds
    with momentum, then inverse mel by least squares and clamp."""
    rng = np.random.default_rng(3225)
    res = {}
    n_fft, hop = 32, 8
    window = torch.hann_window(n_fft)
    wave = normal(torch, rng, 1, 256) * 0.2
    specgram = torch.stft(wave, n_fft, hop, window=window, return_complex=True).abs().pow(2.0)
    power, momentum, length, n_iter = 2.0, 0.99, 256, 4
    shape = specgram.size()
    specgram = specgram.reshape([-1] + list(shape[-2:]))
    specgram = specgram.pow(1 / power)
    angles = torch.full(specgram.size(), 1, dtype=torch.complex64)
    tprev = torch.tensor(0.0, dtype=specgram.dtype, device=specgram.device)
    for _ in range(n_iter):
        inverse = torch.istft(specgram * angles, n_fft=n_fft, hop_length=hop,
                              win_length=n_fft, window=window, length=length)
        rebuilt = torch.stft(input=inverse, n_fft=n_fft, hop_length=hop, win_length=n_fft,
                             window=window, center=True, pad_mode="reflect",
                             normalized=False, onesided=True, return_complex=True)
        angles = rebuilt
        if momentum:
            angles = angles - tprev.mul_(momentum / (1 + momentum))
        angles = angles.div(angles.abs().add(1e-16))
        tprev = rebuilt
        res.setdefault("err", []).append(
            float((rebuilt.abs() - specgram).pow(2).mean()))
    waveform = torch.istft(specgram * angles, n_fft=n_fft, hop_length=hop, win_length=n_fft,
                           window=window, length=length)
    waveform = waveform.reshape(shape[:-2] + waveform.shape[-1:])
    res["wave"], res["angles_dtype"] = waveform, [_dt(angles)]
    res["angle"] = torch.angle(angles[0, :3, :4])
    # polar from magnitude and phase, phase vocoder-style time stretch of one frame step
    mag, ph = specgram.abs(), torch.angle(rebuilt)
    z = torch.polar(mag, ph)
    res["polar_err"] = (z - specgram * torch.exp(1j * ph)).abs().max()
    # the stretch in double (angles of small bins in float32 are 3e-5 off float64 in PyTorch
    # too, and the phase vocoder accumulates them)
    z = torch.stft(wave.double(), n_fft, hop, window=window.double(), return_complex=True)
    phase_advance = torch.linspace(0, math.pi * hop, z.shape[-2])[..., None]
    time_steps = torch.arange(0, z.size(-1), 1.5, device=z.device, dtype=z.real.dtype)
    alphas = time_steps % 1.0
    phase_0 = z[..., :1].angle()
    z_pad = torch.nn.functional.pad(z, [0, 2])
    z_0 = z_pad.index_select(-1, (time_steps.long()))
    z_1 = z_pad.index_select(-1, (time_steps + 1).long())
    angle_0 = z_0.angle()
    angle_1 = z_1.angle()
    norm_0 = z_0.abs()
    norm_1 = z_1.abs()
    phase = angle_1 - angle_0 - phase_advance
    phase = phase - 2 * math.pi * torch.round(phase / (2 * math.pi))
    phase = phase + phase_advance
    phase = torch.cat([phase_0, phase[..., :-1]], dim=-1)
    phase_acc = torch.cumsum(phase, -1)
    mag = alphas * norm_1 + (1 - alphas) * norm_0
    stretched = torch.polar(mag, phase_acc)
    res["stretched"] = torch.view_as_real(stretched)
    res["stretch_dtype"] = [_dt(stretched), _dt(time_steps), _dt(alphas)]
    return res


PROGRAMS = [joint_autoregressive_program, update_quantiles_program, torchlibrosa_program,
            panns_program, griffin_lim_program]


TOLERANCES = {
    # the masked conv's weight gradient sums 16 positions x 12 channels of products of up to
    # 6: float32 sums in another order, 5e-6 off float64 (PyTorch's 2e-6)
    "joint_autoregressive_program": (1e-5, 5e-6),
}


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
