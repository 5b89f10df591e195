"""Frequency-domain forecasters and probabilistic forecasting heads written as
Time-Series-Library and neuralforecast write them in torch, run once with `torch` bound to ember
and once to PyTorch from the same NumPy weights and data: FITS (rfft, a complex-dtype
nn.Linear on the low frequencies, irfft with a length ratio), ETSformer (Fourier layer of topk
amplitudes gathered by meshgrid indices, conj/angle extrapolation; exponential smoothing as an
FFT convolution), TimeMixer's DFT decomposition (boolean-mask zeroing of a complex spectrum),
neuralforecast's scalers (robust TemporalNorm with nanmedian of a masked series) and heads
(StudentT through TransformedDistribution/AffineTransform, MixtureSameFamily GMM, MQLoss), and
TSLib's M4 losses (divide_no_nan by masked assignment) and imputation masks. See
test_parity_programs_round27_forecasting.py for the transformers."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def fits_program(torch):
    """FITS: RevIN-style normalisation by hand, rfft, a complex nn.Linear(dtype=cfloat) on the
    cut-off frequencies, a cfloat zeros buffer filled by slice assignment, irfft scaled by the
    length ratio, Adam (complex parameters included) and the complex gradients."""
    nn = torch.nn
    rng = np.random.default_rng(2721)
    B, L, C, pred, cut = 3, 16, 2, 8, 5
    length_ratio = (L + pred) / L

    class FITS(nn.Module):
        def __init__(self):
            super().__init__()
            self.dominance_freq = cut
            self.freq_upsampler = nn.Linear(cut, int(cut * length_ratio)).to(torch.cfloat)

        def forward(self, x):
            x_mean = torch.mean(x, dim=1, keepdim=True)
            x = x - x_mean
            x_var = torch.var(x, dim=1, keepdim=True) + 1e-5
            x = x / torch.sqrt(x_var)
            low_specx = torch.fft.rfft(x, dim=1)
            low_specx[:, self.dominance_freq:] = 0
            low_specx = low_specx[:, 0:self.dominance_freq, :]
            low_specxy_ = self.freq_upsampler(low_specx.permute(0, 2, 1)).permute(0, 2, 1)
            low_specxy = torch.zeros([low_specxy_.size(0), int((L + pred) / 2 + 1),
                                      low_specxy_.size(2)], dtype=low_specxy_.dtype)
            low_specxy[:, 0:low_specxy_.size(1), :] = low_specxy_
            low_xy = torch.fft.irfft(low_specxy, dim=1) * length_ratio
            return low_xy * torch.sqrt(x_var) + x_mean

    model = FITS()
    lin = model.freq_upsampler
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy((rng.standard_normal(lin.weight.shape)
                                           + 1j * rng.standard_normal(lin.weight.shape))
                                          .astype(np.complex64) * 0.2))
        lin.bias.copy_(torch.from_numpy((0.1j * rng.standard_normal(lin.bias.shape))
                                        .astype(np.complex64)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    series = normal(torch, rng, B, L + pred, C).cumsum(1)
    res = {"losses": [], "dtypes": [str(p.dtype).rsplit(".", 1)[-1]
                                    for p in model.parameters()]}
    for _ in range(3):
        opt.zero_grad()
        out = model(series[:, :L])
        loss = torch.nn.functional.mse_loss(out[:, -pred:], series[:, L:])
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["out"] = out
    res["grads"] = [torch.view_as_real(p.grad) for p in model.parameters()]
    # the series is centred, so its DC term is float noise: the weights it multiplies get
    # noise gradients that Adam turns into +-lr steps; those elements are left out
    res["params"] = [torch.view_as_real(p)[torch.view_as_real(p.grad).abs() > 1e-4]
                     for p in model.parameters()]
    res["noise"] = [int((torch.view_as_real(p.grad).abs() <= 1e-4).sum())
                    for p in model.parameters()]
    return res


def etsformer_program(torch):
    """ETSformer's FourierLayer (rfft without DC and Nyquist, topk amplitudes, meshgrid index
    tuple, conj mirror, cos extrapolation from abs and angle) and ExponentialSmoothing (a
    learned sigmoid alpha, powers flipped into a kernel, conv1d_fft by rfft/irfft of length
    2L and roll), trained with Adam."""
    nn = torch.nn
    rng = np.random.default_rng(2722)
    B, L, D, pred, k = 2, 12, 3, 4, 2

    class FourierLayer(nn.Module):
        def forward(self, x):
            b, t, d = x.shape
            x_freq = torch.fft.rfft(x, dim=1)
            x_freq, f = x_freq[:, 1:-1], torch.fft.rfftfreq(t)[1:-1]
            values, indices = torch.topk(x_freq.abs(), k, dim=1, largest=True, sorted=True)
            mesh_a, mesh_b = torch.meshgrid(torch.arange(x_freq.size(0)),
                                            torch.arange(x_freq.size(2)), indexing="ij")
            index_tuple = (mesh_a.unsqueeze(1), indices, mesh_b.unsqueeze(1))
            x_freq = x_freq[index_tuple]
            f = f.unsqueeze(0).unsqueeze(-1).expand(b, f.shape[0], d)[index_tuple]
            x_freq = torch.cat([x_freq, x_freq.conj()], dim=1)
            f = torch.cat([f, -f], dim=1).unsqueeze(2)
            tt = torch.arange(t + pred, dtype=torch.float).reshape(1, 1, -1, 1)
            amp = (x_freq.abs() / t).unsqueeze(2)
            phase = x_freq.angle().unsqueeze(2)
            return (amp * torch.cos(2 * math.pi * f * tt + phase)).sum(dim=1)

    class ExponentialSmoothing(nn.Module):
        def __init__(self):
            super().__init__()
            self._smoothing_weight = nn.Parameter(torch.randn(1, 1))
            self.v0 = nn.Parameter(torch.randn(1, 1, D))

        def forward(self, values):
            b, t, d = values.shape
            alpha = torch.sigmoid(self._smoothing_weight)
            powers = torch.arange(t, dtype=torch.float)
            weight = (1 - alpha) * (alpha ** torch.flip(powers, dims=(0,)))
            init_weight = alpha ** (powers + 1)
            N = values.size(1)
            f_sig = torch.fft.rfft(values, n=2 * N, dim=1)
            f_w = torch.fft.rfft(weight.reshape(1, -1, 1), n=2 * N, dim=1)
            out = torch.fft.irfft(f_sig * f_w.conj(), dim=1).roll(-1, dims=1)
            out = out[:, N - 1:].narrow(1, 0, N)
            return init_weight.reshape(1, -1, 1) * self.v0 + out

    fourier, smooth, proj = FourierLayer(), ExponentialSmoothing(), nn.Linear(D, D)
    fill_(torch, list(smooth.parameters()) + list(proj.parameters()), rng)
    opt = torch.optim.Adam(list(smooth.parameters()) + list(proj.parameters()), lr=1e-2)
    x = normal(torch, rng, B, L + pred, D)
    res = {"losses": []}
    for _ in range(3):
        opt.zero_grad()
        h = proj(x[:, :L])
        season = fourier(h)
        level = smooth(h - season[:, :L])
        forecast = season[:, L:] + level[:, -1:]
        loss = (forecast - x[:, L:]).pow(2).mean()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["params"] = list(smooth.parameters()) + list(proj.parameters())
    res["season"] = season
    return res


def timemixer_decomp_program(torch):
    """TimeMixer's DFT_series_decomp: abs() of the spectrum, its DC zeroed in place, topk, the
    complex spectrum zeroed where the amplitude is under the k-th by boolean-mask assignment,
    irfft back; multi-scale inputs from AvgPool1d, a mixing Linear per scale and Adam."""
    nn = torch.nn
    rng = np.random.default_rng(2723)
    B, T, C = 2, 16, 3

    def dft_decomp(x, top_k=3):
        xf = torch.fft.rfft(x)
        freq = abs(xf)
        freq[0] = 0
        top_k_freq, top_list = torch.topk(freq, top_k)
        xf[freq <= top_k_freq.min()] = 0
        x_season = torch.fft.irfft(xf)
        return x_season, x - x_season

    pool = nn.AvgPool1d(2)
    mix = nn.ModuleList([nn.Linear(T // 2 ** i, T // 2 ** i) for i in range(3)])
    fill_(torch, mix, rng)
    opt = torch.optim.Adam(mix.parameters(), lr=1e-2)
    x = normal(torch, rng, B, T, C).cumsum(1)
    res = {"losses": []}
    for _ in range(3):
        opt.zero_grad()
        xs = [x.permute(0, 2, 1)]
        for _ in range(2):
            xs.append(pool(xs[-1]))
        loss = 0
        for i, xi in enumerate(xs):
            season, trend = dft_decomp(mix[i](xi))
            loss = loss + season.pow(2).mean() + (trend - xi).abs().mean()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["params"] = list(mix.parameters())
    return res


def probabilistic_heads_program(torch):
    """neuralforecast's probabilistic training: a robust TemporalNorm (nanmedian of the series
    with masked points set to NaN, nan_to_num, median absolute deviation), a StudentT head whose
    scale is decoupled through TransformedDistribution and AffineTransform, a GMM head as
    MixtureSameFamily, MQLoss over quantiles made from levels, TSLib's M4 losses (mase, smape,
    mape with divide_no_nan) and an imputation mask set by masked assignment; Adam steps."""
    nn, F, D = torch.nn, torch.nn.functional, torch.distributions
    rng = np.random.default_rng(2724)
    B, L, h, K = 4, 12, 3, 2
    y = normal(torch, rng, B, L + h).cumsum(1) * 2 + 3
    mask = torch.from_numpy((rng.random((B, L)) > 0.2).astype(np.float32))
    enc = nn.Sequential(nn.Linear(L, 16), nn.ReLU(), nn.Linear(16, h * (3 + 3 * K + 3)))
    fill_(torch, enc, rng, 0.2)
    opt = torch.optim.Adam(enc.parameters(), lr=1e-3)
    levels = torch.tensor([80., 90.])
    alpha_l = 1 - levels / 100
    quantiles = torch.cat([alpha_l / 2, 1 - alpha_l / 2]).sort().values[1:]

    def divide_no_nan(a, b):
        result = a / b
        result[result != result] = .0
        result[result == np.inf] = .0
        return result

    res = {"losses": [], "quantiles": quantiles}
    for step in range(3):
        opt.zero_grad()
        x = y[:, :L]
        x_nan = x.masked_fill(mask < 1, float("nan"))
        x_median, _ = x_nan.nanmedian(dim=1, keepdim=True)
        x_median = torch.nan_to_num(x_median, nan=0.0)
        x_mad = torch.nan_to_num((x_nan - x_median).abs().nanmedian(dim=1, keepdim=True)[0],
                                 nan=1.0) + 1e-3
        z = (x - x_median) / x_mad * mask
        out = enc(z).reshape(B, h, -1)
        df = F.softplus(out[..., 0]) + 2.0
        base = D.StudentT(df=df, loc=out[..., 1], scale=F.softplus(out[..., 2]) + 1e-3)
        distr = D.TransformedDistribution(base, [D.AffineTransform(loc=x_median,
                                                                   scale=x_mad)])
        target = y[:, L:]
        student_nll = -distr.log_prob(target).mean()
        gmm = D.MixtureSameFamily(D.Categorical(logits=out[..., 3:3 + K]),
                                  D.Normal(out[..., 3 + K:3 + 2 * K] * x_mad.unsqueeze(-1)
                                           + x_median.unsqueeze(-1),
                                           (F.softplus(out[..., 3 + 2 * K:3 + 3 * K]) + 0.1)
                                           * x_mad.unsqueeze(-1)))
        gmm_nll = -gmm.log_prob(target).mean()
        yq = out[..., -3:] * x_mad.unsqueeze(-1) + x_median.unsqueeze(-1)
        error = yq - target.unsqueeze(-1)
        sq = torch.maximum(-error, torch.zeros_like(error))
        s1_q = torch.maximum(error, torch.zeros_like(error))
        mq = (quantiles * sq + (1 - quantiles) * s1_q).mean()
        forecast = yq[..., 1]
        freq = 2
        masep = torch.mean(torch.abs(x[:, freq:] - x[:, :-freq]), dim=1)
        fmask = torch.ones_like(target)
        fmask[0, :2] = 0
        mase = torch.mean(torch.abs(target - forecast) * divide_no_nan(fmask, masep[:, None]))
        smape = 200 * torch.mean(divide_no_nan(torch.abs(forecast - target),
                                               torch.abs(forecast.data) + torch.abs(target.data))
                                 * fmask)
        mape = torch.mean(torch.abs((forecast - target) * divide_no_nan(fmask, target)))
        loss = student_nll + gmm_nll + mq + 0.01 * (mase + smape + mape)
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
        res[f"parts{step}"] = [student_nll.item(), gmm_nll.item(), mq.item(), mase.item(),
                               smape.item(), mape.item()]
    res["scaler"] = [x_median, x_mad]
    res["student"] = [base.mean, base.variance, gmm.mean, gmm.variance, gmm.cdf(target)]
    errors = []     # what neither library implements: StudentT's cdf and icdf, the mean
    for fn in (lambda: distr.cdf(target), lambda: distr.mean, lambda: base.icdf(target)):
        try:
            fn()
            errors.append("ok")
        except NotImplementedError as e:
            errors.append("NotImplementedError: " + str(e))
    res["errors"] = errors
    res["params"] = list(enc.parameters())
    imp = torch.from_numpy(rng.random((B, L)).astype(np.float32))
    imp[imp <= 0.3] = 0
    imp[imp > 0.3] = 1
    res["imputed"] = [y[:, :L].masked_fill(imp == 0, 0), y[:, :L][imp == 0]]
    return res


PROGRAMS = [fits_program, etsformer_program, timemixer_decomp_program,
            probabilistic_heads_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 FFT accumulation order over a few Adam steps; ETSformer's cos of
        # 2*pi*f*t + phase amplifies the phase's last bits
        "fits_program": (1e-4, 1e-5),
        "etsformer_program": (1e-4, 1e-5),
        "timemixer_decomp_program": (1e-4, 1e-5),
        "probabilistic_heads_program": (1e-4, 1e-5),
    })
