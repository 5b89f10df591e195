"""Speech synthesis programs written as the VITS, Glow-TTS and FastSpeech 2 repositories write
them in torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy
weights: monotonic alignment search as a no_grad dynamic programme over tensors, sequence masks
from lengths, WaveNet gated convolutions under weight_norm inside affine coupling flows, the
stochastic duration predictor's rational-quadratic spline flow (searchsorted, softplus, cumsum),
ActNorm with data-dependent init and an invertible 1x1 convolution, and FastSpeech 2's length
regulator (repeat_interleave with tensor repeats) and variance adaptor (bucketized pitch and
energy embeddings, log-domain durations). Siblings: _speech_vocoder (VITS's adversarial half),
_speech_restore (OCR and image restoration); _speech_fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _sequence_mask(torch, length, max_length=None):
    if max_length is None:
        max_length = length.max()
    x = torch.arange(max_length, dtype=length.dtype, device=length.device)
    return x.unsqueeze(0) < length.unsqueeze(1)


def _maximum_path(torch, neg_cent, mask):
    """Monotonic alignment search over [b, t_t, t_s] scores (VITS's monotonic_align, in torch)."""
    with torch.no_grad():
        b, t_t, t_s = neg_cent.shape
        neg_inf = -1e9
        value = neg_cent * mask
        t_t_max = mask.sum(1)[:, 0].long()
        t_s_max = mask.sum(2)[:, 0].long()
        v = torch.full((b, t_s), neg_inf, dtype=value.dtype)
        v[:, 0] = 0.0
        direction = torch.zeros(b, t_t, t_s, dtype=torch.bool)
        idx = torch.arange(t_s)
        for y in range(t_t):
            shifted = torch.nn.functional.pad(v[:, :-1], (1, 0), value=neg_inf)
            stay = v if y > 0 else torch.full_like(v, neg_inf)
            if y == 0:
                stay[:, 0] = 0.0
            take_stay = stay >= shifted
            direction[:, y] = take_stay
            v = torch.where(take_stay, stay, shifted) + value[:, y]
            v = v.masked_fill(idx.unsqueeze(0) > y, neg_inf)
        path = torch.zeros_like(value)
        for i in range(b):
            index = t_s_max[i].item() - 1
            for y in range(t_t_max[i].item() - 1, -1, -1):
                path[i, y, index] = 1
                if index != 0 and (index == y or not direction[i, y, index]):
                    index = index - 1
        return path * mask


def vits_program(torch):
    """VITS training core: text prior, posterior encoder (WaveNet with weight_norm), a residual
    coupling flow, MAS on the prior log-likelihood, duration targets, KL, two Adam steps."""
    rng = np.random.default_rng(0)
    F = torch.nn.functional
    B, V, H, C, Tx, Ty = 2, 12, 8, 6, 5, 9

    class WN(torch.nn.Module):
        def __init__(self, hidden, kernel, dilation_rate, n_layers, gin=0):
            super().__init__()
            self.hidden, self.n_layers = hidden, n_layers
            self.in_layers = torch.nn.ModuleList()
            self.res_skip_layers = torch.nn.ModuleList()
            for i in range(n_layers):
                d = dilation_rate ** i
                pad = int((kernel * d - d) / 2)
                layer = torch.nn.Conv1d(hidden, 2 * hidden, kernel, dilation=d, padding=pad)
                self.in_layers.append(torch.nn.utils.weight_norm(layer, name="weight"))
                out = 2 * hidden if i < n_layers - 1 else hidden
                self.res_skip_layers.append(
                    torch.nn.utils.weight_norm(torch.nn.Conv1d(hidden, out, 1), name="weight"))

        def forward(self, x, x_mask):
            output = torch.zeros_like(x)
            n_channels = torch.IntTensor([self.hidden])
            for i in range(self.n_layers):
                x_in = self.in_layers[i](x)
                acts = fused_add_tanh_sigmoid_multiply(x_in, torch.zeros_like(x_in), n_channels)
                res_skip = self.res_skip_layers[i](acts)
                if i < self.n_layers - 1:
                    x = (x + res_skip[:, :self.hidden, :]) * x_mask
                    output = output + res_skip[:, self.hidden:, :]
                else:
                    output = output + res_skip
            return output * x_mask

    def fused_add_tanh_sigmoid_multiply(input_a, input_b, n_channels):
        n_channels_int = n_channels[0]
        in_act = input_a + input_b
        t_act = torch.tanh(in_act[:, :n_channels_int, :])
        s_act = torch.sigmoid(in_act[:, n_channels_int:, :])
        return t_act * s_act

    class PosteriorEncoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pre = torch.nn.Conv1d(C, H, 1)
            self.enc = WN(H, 3, 2, 2)
            self.proj = torch.nn.Conv1d(H, 2 * H, 1)

        def forward(self, x, x_lengths, eps):
            x_mask = torch.unsqueeze(_sequence_mask(torch, x_lengths, x.size(2)), 1).to(x.dtype)
            x = self.pre(x) * x_mask
            x = self.enc(x, x_mask)
            stats = self.proj(x) * x_mask
            m, logs = torch.split(stats, H, dim=1)
            z = (m + eps * torch.exp(logs)) * x_mask
            return z, m, logs, x_mask

    class ResidualCouplingLayer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.half = H // 2
            self.pre = torch.nn.Conv1d(self.half, H, 1)
            self.enc = WN(H, 3, 1, 2)
            self.post = torch.nn.Conv1d(H, self.half * 2, 1)

        def forward(self, x, x_mask, reverse=False):
            x0, x1 = torch.split(x, [self.half] * 2, 1)
            h = self.pre(x0) * x_mask
            h = self.enc(h, x_mask)
            stats = self.post(h) * x_mask
            m, logs = torch.split(stats, [self.half] * 2, 1)
            if not reverse:
                x1 = m + x1 * torch.exp(logs) * x_mask
                return torch.cat([x0, x1], 1), torch.sum(logs, [1, 2])
            x1 = (x1 - m) * torch.exp(-logs) * x_mask
            return torch.cat([x0, x1], 1)

    class Flip(torch.nn.Module):
        def forward(self, x, *args, reverse=False, **kwargs):
            x = torch.flip(x, [1])
            if not reverse:
                return x, torch.zeros(x.size(0)).to(dtype=x.dtype, device=x.device)
            return x

    class TextEncoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(V, H)
            torch.nn.init.normal_(self.emb.weight, 0.0, H ** -0.5)
            self.conv = torch.nn.Conv1d(H, H, 3, padding=1)
            self.proj = torch.nn.Conv1d(H, 2 * H, 1)

        def forward(self, x, x_lengths):
            x = self.emb(x) * math.sqrt(H)
            x = torch.transpose(x, 1, -1)
            x_mask = torch.unsqueeze(_sequence_mask(torch, x_lengths, x.size(2)), 1).to(x.dtype)
            x = F.relu(self.conv(x * x_mask)) * x_mask
            stats = self.proj(x) * x_mask
            m, logs = torch.split(stats, H, dim=1)
            return x, m, logs, x_mask

    enc_p, enc_q = TextEncoder(), PosteriorEncoder()
    flows = torch.nn.ModuleList([ResidualCouplingLayer(), Flip(), ResidualCouplingLayer(), Flip()])
    dp = torch.nn.Sequential(torch.nn.Conv1d(H, H, 3, padding=1), torch.nn.ReLU(),
                             torch.nn.Conv1d(H, 1, 1))
    modules = torch.nn.ModuleList([enc_p, enc_q, flows, dp])
    fill_(torch, modules, rng, 0.2)
    opt = torch.optim.AdamW(modules.parameters(), 2e-3, betas=(0.8, 0.99), eps=1e-9)
    x = torch.from_numpy(rng.integers(1, V, (B, Tx)))
    x_lengths = torch.tensor([Tx, Tx - 2])
    y = normal(torch, rng, B, C, Ty)
    y_lengths = torch.LongTensor([Ty, Ty - 3])
    eps = normal(torch, rng, B, H, Ty)
    res = {"losses": [], "paths": [], "durations": []}
    for _ in range(2):
        hx, m_p, logs_p, x_mask = enc_p(x, x_lengths)
        z, m_q, logs_q, y_mask = enc_q(y, y_lengths, eps)
        z_p, logdet_tot = z, 0
        for flow in flows:
            z_p, logdet = flow(z_p, y_mask)
            logdet_tot = logdet_tot + logdet
        with torch.no_grad():
            s_p_sq_r = torch.exp(-2 * logs_p)
            neg_cent1 = torch.sum(-0.5 * math.log(2 * math.pi) - logs_p, [1], keepdim=True)
            neg_cent2 = torch.matmul(-0.5 * (z_p ** 2).transpose(1, 2), s_p_sq_r)
            neg_cent3 = torch.matmul(z_p.transpose(1, 2), (m_p * s_p_sq_r))
            neg_cent4 = torch.sum(-0.5 * (m_p ** 2) * s_p_sq_r, [1], keepdim=True)
            neg_cent = neg_cent1 + neg_cent2 + neg_cent3 + neg_cent4
            attn_mask = torch.unsqueeze(x_mask, 2) * torch.unsqueeze(y_mask, -1)
            attn = _maximum_path(torch, neg_cent, attn_mask.squeeze(1)).unsqueeze(1).detach()
        w = attn.sum(2)
        logw_ = torch.log(w + 1e-6) * x_mask
        logw = dp(hx.detach() * x_mask) * x_mask
        l_length = torch.sum((logw - logw_) ** 2, [1, 2]) / torch.sum(x_mask)
        m_p_e = torch.matmul(attn.squeeze(1), m_p.transpose(1, 2)).transpose(1, 2)
        logs_p_e = torch.matmul(attn.squeeze(1), logs_p.transpose(1, 2)).transpose(1, 2)
        kl = logs_p_e - logs_q - 0.5
        kl += 0.5 * ((z_p - m_p_e) ** 2) * torch.exp(-2.0 * logs_p_e)
        kl = torch.sum(kl * y_mask) / torch.sum(y_mask)
        nll = -torch.sum(logdet_tot) / torch.sum(y_mask)
        loss = kl + l_length.sum() + 0.1 * nll
        opt.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(modules.parameters(), 5.0)
        opt.step()
        res["losses"].append(loss.item())
        res["paths"].append(attn.squeeze(1))
        res["durations"].append(w.squeeze(1))
        res.setdefault("grad_norm", []).append(grad_norm.item())
    # inference: reverse the flow from the prior
    with torch.no_grad():
        z_r = flows[0](z_p, y_mask)[0]
        for flow in reversed(flows):
            z_r = flow(z_r, y_mask, reverse=True)
    res["reverse"] = z_r
    res["g"] = enc_q.enc.in_layers[0].weight_g
    res["v"] = enc_q.enc.in_layers[1].weight_v
    res["names"] = sorted(n for n, _ in flows[0].enc.in_layers[0].named_parameters())
    return res


DEFAULT_MIN_BIN_WIDTH = 1e-3
DEFAULT_MIN_BIN_HEIGHT = 1e-3
DEFAULT_MIN_DERIVATIVE = 1e-3


def _searchsorted(torch, bin_locations, inputs, eps=1e-6):
    bin_locations[..., -1] += eps
    return torch.sum(inputs[..., None] >= bin_locations, dim=-1) - 1


def _rq_spline(torch, inputs, uw, uh, ud, inverse=False, tail_bound=5.0, use_searchsorted=False):
    """Unconstrained rational-quadratic spline with linear tails (VITS transforms.py)."""
    F = torch.nn.functional
    inside = (inputs >= -tail_bound) & (inputs <= tail_bound)
    outside = ~inside
    outputs = torch.zeros_like(inputs)
    logabsdet = torch.zeros_like(inputs)
    ud = F.pad(ud, pad=(1, 1))
    constant = np.log(np.exp(1 - DEFAULT_MIN_DERIVATIVE) - 1)
    ud[..., 0] = constant
    ud[..., -1] = constant
    outputs[outside] = inputs[outside]
    logabsdet[outside] = 0
    x, uw, uh, ud = inputs[inside], uw[inside, :], uh[inside, :], ud[inside, :]
    left, right, bottom, top = -tail_bound, tail_bound, -tail_bound, tail_bound
    num_bins = uw.shape[-1]
    widths = F.softmax(uw, dim=-1)
    widths = DEFAULT_MIN_BIN_WIDTH + (1 - DEFAULT_MIN_BIN_WIDTH * num_bins) * widths
    cumwidths = torch.cumsum(widths, dim=-1)
    cumwidths = F.pad(cumwidths, pad=(1, 0), mode="constant", value=0.0)
    cumwidths = (right - left) * cumwidths + left
    cumwidths[..., 0] = left
    cumwidths[..., -1] = right
    widths = cumwidths[..., 1:] - cumwidths[..., :-1]
    derivatives = DEFAULT_MIN_DERIVATIVE + F.softplus(ud)
    heights = F.softmax(uh, dim=-1)
    heights = DEFAULT_MIN_BIN_HEIGHT + (1 - DEFAULT_MIN_BIN_HEIGHT * num_bins) * heights
    cumheights = torch.cumsum(heights, dim=-1)
    cumheights = F.pad(cumheights, pad=(1, 0), mode="constant", value=0.0)
    cumheights = (top - bottom) * cumheights + bottom
    cumheights[..., 0] = bottom
    cumheights[..., -1] = top
    heights = cumheights[..., 1:] - cumheights[..., :-1]
    if use_searchsorted:
        locs = (cumheights if inverse else cumwidths).detach().clone()
        locs[..., -1] += 1e-6
        bin_idx = (torch.searchsorted(locs, x[..., None].contiguous(), right=True) - 1)
    elif inverse:
        bin_idx = _searchsorted(torch, cumheights, x)[..., None]
    else:
        bin_idx = _searchsorted(torch, cumwidths, x)[..., None]
    input_cumwidths = cumwidths.gather(-1, bin_idx)[..., 0]
    input_bin_widths = widths.gather(-1, bin_idx)[..., 0]
    input_cumheights = cumheights.gather(-1, bin_idx)[..., 0]
    delta = heights / widths
    input_delta = delta.gather(-1, bin_idx)[..., 0]
    input_derivatives = derivatives.gather(-1, bin_idx)[..., 0]
    input_derivatives_plus_one = derivatives[..., 1:].gather(-1, bin_idx)[..., 0]
    input_heights = heights.gather(-1, bin_idx)[..., 0]
    if inverse:
        a = ((x - input_cumheights) * (input_derivatives + input_derivatives_plus_one
                                       - 2 * input_delta)
             + input_heights * (input_delta - input_derivatives))
        b = (input_heights * input_derivatives
             - (x - input_cumheights) * (input_derivatives + input_derivatives_plus_one
                                         - 2 * input_delta))
        c = -input_delta * (x - input_cumheights)
        discriminant = b.pow(2) - 4 * a * c
        assert (discriminant >= 0).all()
        root = (2 * c) / (-b - torch.sqrt(discriminant))
        out = root * input_bin_widths + input_cumwidths
        theta_one_minus_theta = root * (1 - root)
        denominator = input_delta + ((input_derivatives + input_derivatives_plus_one
                                      - 2 * input_delta) * theta_one_minus_theta)
        derivative_numerator = input_delta.pow(2) * (
            input_derivatives_plus_one * root.pow(2) + 2 * input_delta * theta_one_minus_theta
            + input_derivatives * (1 - root).pow(2))
        lad = -(torch.log(derivative_numerator) - 2 * torch.log(denominator))
    else:
        theta = (x - input_cumwidths) / input_bin_widths
        theta_one_minus_theta = theta * (1 - theta)
        numerator = input_heights * (input_delta * theta.pow(2)
                                     + input_derivatives * theta_one_minus_theta)
        denominator = input_delta + ((input_derivatives + input_derivatives_plus_one
                                      - 2 * input_delta) * theta_one_minus_theta)
        out = input_cumheights + numerator / denominator
        derivative_numerator = input_delta.pow(2) * (
            input_derivatives_plus_one * theta.pow(2) + 2 * input_delta * theta_one_minus_theta
            + input_derivatives * (1 - theta).pow(2))
        lad = torch.log(derivative_numerator) - 2 * torch.log(denominator)
    outputs[inside], logabsdet[inside] = out, lad
    return outputs, logabsdet


def sdp_spline_program(torch):
    """The stochastic duration predictor's ConvFlow: a DDS conv stack predicts spline parameters
    for half the channels; forward, inverse round trip, logdet, gradients, one Adam step."""
    rng = np.random.default_rng(1)
    F = torch.nn.functional
    B, T, filt, bins, tail = 2, 7, 6, 5, 5.0

    class DDSConv(torch.nn.Module):
        def __init__(self, channels, kernel_size, n_layers):
            super().__init__()
            self.n_layers = n_layers
            self.convs_sep = torch.nn.ModuleList()
            self.convs_1x1 = torch.nn.ModuleList()
            self.norms_1 = torch.nn.ModuleList()
            for i in range(n_layers):
                dilation = kernel_size ** i
                padding = (kernel_size * dilation - dilation) // 2
                self.convs_sep.append(torch.nn.Conv1d(channels, channels, kernel_size,
                                                      groups=channels, dilation=dilation,
                                                      padding=padding))
                self.convs_1x1.append(torch.nn.Conv1d(channels, channels, 1))
                self.norms_1.append(torch.nn.LayerNorm(channels))

        def forward(self, x, x_mask):
            for i in range(self.n_layers):
                y = self.convs_sep[i](x * x_mask)
                y = self.norms_1[i](y.transpose(1, -1)).transpose(1, -1)
                y = F.gelu(y)
                y = self.convs_1x1[i](y)
                x = x + y
            return x * x_mask

    class ConvFlow(torch.nn.Module):
        def __init__(self, in_channels, use_searchsorted):
            super().__init__()
            self.half = in_channels // 2
            self.pre = torch.nn.Conv1d(self.half, filt, 1)
            self.convs = DDSConv(filt, 3, 2)
            self.proj = torch.nn.Conv1d(filt, self.half * (bins * 3 - 1), 1)
            self.use_searchsorted = use_searchsorted

        def forward(self, x, x_mask, reverse=False):
            x0, x1 = torch.split(x, [self.half] * 2, 1)
            h = self.pre(x0)
            h = self.convs(h, x_mask)
            h = self.proj(h) * x_mask
            b, c, t = x0.shape
            h = h.reshape(b, c, -1, t).permute(0, 1, 3, 2)
            uw = h[..., :bins] / math.sqrt(filt)
            uh = h[..., bins:2 * bins] / math.sqrt(filt)
            ud = h[..., 2 * bins:]
            x1, logabsdet = _rq_spline(torch, x1, uw, uh, ud, inverse=reverse, tail_bound=tail,
                                       use_searchsorted=self.use_searchsorted)
            x = torch.cat([x0, x1], 1) * x_mask
            logdet = torch.sum(logabsdet * x_mask, [1, 2])
            if not reverse:
                return x, logdet
            return x

    res = {}
    for use_ss in (False, True):
        flow = ConvFlow(4, use_ss)
        fill_(torch, flow, rng, 0.4)
        opt = torch.optim.Adam(flow.parameters(), 1e-2)
        x = normal(torch, rng, B, 4, T) * 3.0
        x[0, 2, 0] = 6.5  # in the linear tail
        x_mask = _sequence_mask(torch, torch.tensor([T, T - 2]), T).unsqueeze(1).float()
        x.requires_grad_(True)
        z, logdet = flow(x, x_mask)
        nll = torch.sum(0.5 * (math.log(2 * math.pi) + z ** 2) * x_mask, [1, 2]) - logdet
        loss = nll.sum() / x_mask.sum()
        opt.zero_grad()
        loss.backward()
        tag = "ss" if use_ss else "sum"
        res[f"{tag}_z"], res[f"{tag}_logdet"], res[f"{tag}_xgrad"] = z, logdet, x.grad
        res[f"{tag}_proj_grad"] = flow.proj.weight.grad
        opt.step()
        with torch.no_grad():
            z2, _ = flow(x, x_mask)
            back = flow(z2, x_mask, reverse=True)
        res[f"{tag}_roundtrip"] = back
        res[f"{tag}_x"] = x.detach() * x_mask
    return res


def fastspeech2_program(torch):
    """FastSpeech 2's variance adaptor: duration predictor in the log domain, length regulator
    by repeat_interleave with tensor repeats and pad_sequence, pitch and energy bucketized into
    embeddings, masked MSE/MAE losses, a mel decoder, and inference with predicted durations."""
    rng = np.random.default_rng(2)
    F = torch.nn.functional
    B, V, H, M, n_bins = 3, 10, 8, 5, 6

    def get_mask_from_lengths(lengths, max_len=None):
        batch_size = lengths.shape[0]
        if max_len is None:
            max_len = torch.max(lengths).item()
        ids = torch.arange(0, max_len).unsqueeze(0).expand(batch_size, -1)
        return ids >= lengths.unsqueeze(1).expand(-1, max_len)

    class VariancePredictor(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv1d(H, H, 3, padding=1)
            self.ln1 = torch.nn.LayerNorm(H)
            self.conv2 = torch.nn.Conv1d(H, H, 3, padding=1)
            self.ln2 = torch.nn.LayerNorm(H)
            self.linear = torch.nn.Linear(H, 1)

        def forward(self, x, mask):
            x = self.ln1(F.relu(self.conv1(x.transpose(1, 2))).transpose(1, 2))
            x = self.ln2(F.relu(self.conv2(x.transpose(1, 2))).transpose(1, 2))
            out = self.linear(x).squeeze(-1)
            if mask is not None:
                out = out.masked_fill(mask, 0.0)
            return out

    class LengthRegulator(torch.nn.Module):
        def forward(self, x, duration, max_len):
            output, mel_len = [], []
            for batch, expand_target in zip(x, duration):
                expanded = torch.repeat_interleave(batch, expand_target.clamp(min=0), dim=0)
                output.append(expanded)
                mel_len.append(expanded.shape[0])
            output = torch.nn.utils.rnn.pad_sequence(output, batch_first=True)
            if max_len is not None and output.size(1) < max_len:
                output = F.pad(output, (0, 0, 0, max_len - output.size(1)))
            return output, torch.LongTensor(mel_len)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(V, H, padding_idx=0)
            self.enc = torch.nn.TransformerEncoderLayer(H, 2, 16, dropout=0.0, batch_first=True)
            self.duration_predictor = VariancePredictor()
            self.pitch_predictor = VariancePredictor()
            self.energy_predictor = VariancePredictor()
            self.pitch_bins = torch.nn.Parameter(
                torch.exp(torch.linspace(np.log(0.5), np.log(4.0), n_bins - 1)),
                requires_grad=False)
            self.energy_bins = torch.nn.Parameter(torch.linspace(-1.0, 1.0, n_bins - 1),
                                                  requires_grad=False)
            self.pitch_embedding = torch.nn.Embedding(n_bins, H)
            self.energy_embedding = torch.nn.Embedding(n_bins, H)
            self.length_regulator = LengthRegulator()
            self.mel = torch.nn.Linear(H, M)

        def forward(self, src, src_lens, d_target=None, p_target=None, e_target=None,
                    mel_lens=None, d_control=1.0):
            src_mask = get_mask_from_lengths(src_lens)
            x = self.enc(self.emb(src), src_key_padding_mask=src_mask)
            log_d = self.duration_predictor(x, src_mask)
            p_pred = self.pitch_predictor(x, src_mask)
            e_pred = self.energy_predictor(x, src_mask)
            p_src = p_target if p_target is not None else p_pred
            e_src = e_target if e_target is not None else e_pred
            x = x + self.pitch_embedding(torch.bucketize(p_src, self.pitch_bins))
            x = x + self.energy_embedding(torch.bucketize(e_src, self.energy_bins, right=True))
            if d_target is not None:
                x, mel_len = self.length_regulator(x, d_target, None)
                d_rounded = d_target
            else:
                d_rounded = torch.clamp((torch.round(torch.exp(log_d) - 1) * d_control), min=0)
                x, mel_len = self.length_regulator(x, d_rounded.long(), None)
            mel_mask = get_mask_from_lengths(mel_len)
            out = self.mel(x).masked_fill(mel_mask.unsqueeze(-1), 0)
            return out, log_d, p_pred, e_pred, d_rounded, src_mask, mel_mask, mel_len

    model = Model()
    fill_(torch, [p for p in model.parameters() if p.requires_grad], rng, 0.3)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) ** -0.5,
                                                                 (s + 1) * 4 ** -1.5))
    src_lens = torch.tensor([4, 3, 2])
    src = torch.from_numpy(rng.integers(1, V, (B, 4)))
    src = src.masked_fill(get_mask_from_lengths(src_lens), 0)
    d_target = torch.from_numpy(np.array([[1, 3, 0, 2], [2, 2, 1, 0], [1, 4, 0, 0]]))
    p_target = torch.from_numpy(rng.uniform(0.3, 5.0, (B, 4)).astype(np.float32))
    p_target[0, 1] = 1.0  # a boundary value decides left/right
    e_target = torch.from_numpy(rng.uniform(-1.5, 1.5, (B, 4)).astype(np.float32))
    e_target[1, 0] = 0.5
    mel_target = None
    res = {"losses": [], "lr": []}
    for _ in range(3):
        out, log_d, p_pred, e_pred, _, src_mask, mel_mask, mel_len = model(
            src, src_lens, d_target, p_target, e_target)
        if mel_target is None:
            mel_target = torch.from_numpy(
                rng.standard_normal(tuple(out.shape)).astype(np.float32))
        src_masks, mel_masks = ~src_mask, ~mel_mask
        log_d_target = torch.log(d_target.float() + 1)
        log_d_target.requires_grad = False
        mel_loss = F.l1_loss(out.masked_select(mel_masks.unsqueeze(-1)),
                             mel_target.masked_select(mel_masks.unsqueeze(-1)))
        d_loss = F.mse_loss(log_d.masked_select(src_masks), log_d_target.masked_select(src_masks))
        p_loss = F.mse_loss(p_pred.masked_select(src_masks), p_target.masked_select(src_masks))
        e_loss = F.mse_loss(e_pred.masked_select(src_masks), e_target.masked_select(src_masks))
        loss = mel_loss + d_loss + p_loss + e_loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
        res["lr"].append(sched.get_last_lr()[0])
    res["mel_len"] = mel_len
    res["buckets_p"] = torch.bucketize(p_target, model.pitch_bins)
    res["buckets_e"] = torch.bucketize(e_target, model.energy_bins, right=True)
    model.eval()
    with torch.inference_mode():
        out, log_d, _, _, d_rounded, _, mel_mask, mel_len = model(src, src_lens, d_control=1.5)
    res["infer_out"], res["infer_d"], res["infer_len"] = out, d_rounded, mel_len
    res["infer_mask"] = mel_mask
    res["pitch_emb_grad"] = model.pitch_embedding.weight.grad
    res["emb_pad_row_grad"] = model.emb.weight.grad[0]
    return res


def glow_tts_program(torch):
    """Glow-TTS-lite decoder: ActNorm with data-dependent init, invertible 1x1 conv over channel
    groups (slogdet, inverse in reverse), affine coupling; MLE with MAS, then reverse pass."""
    rng = np.random.default_rng(3)
    B, C, T = 2, 4, 6

    class ActNorm(torch.nn.Module):
        def __init__(self, channels, ddi=False):
            super().__init__()
            self.channels, self.initialized = channels, not ddi
            self.logs = torch.nn.Parameter(torch.zeros(1, channels, 1))
            self.bias = torch.nn.Parameter(torch.zeros(1, channels, 1))

        def forward(self, x, x_mask=None, reverse=False):
            if x_mask is None:
                x_mask = torch.ones(x.size(0), 1, x.size(2)).to(device=x.device, dtype=x.dtype)
            x_len = torch.sum(x_mask, [1, 2])
            if not self.initialized:
                self.initialize(x, x_mask)
                self.initialized = True
            if reverse:
                return (x - self.bias) * torch.exp(-self.logs) * x_mask, None
            z = (self.bias + torch.exp(self.logs) * x) * x_mask
            return z, torch.sum(self.logs) * x_len

        def initialize(self, x, x_mask):
            with torch.no_grad():
                denom = torch.sum(x_mask, [0, 2])
                m = torch.sum(x * x_mask, [0, 2]) / denom
                m_sq = torch.sum(x * x * x_mask, [0, 2]) / denom
                v = m_sq - (m ** 2)
                logs = 0.5 * torch.log(torch.clamp_min(v, 1e-6))
                bias_init = (-m * torch.exp(-logs)).view(*self.bias.shape).to(
                    dtype=self.bias.dtype)
                logs_init = (-logs).view(*self.logs.shape).to(dtype=self.logs.dtype)
                self.bias.data.copy_(bias_init)
                self.logs.data.copy_(logs_init)

    class InvConvNear(torch.nn.Module):
        def __init__(self, channels, n_split=4, w_init=None):
            super().__init__()
            self.channels, self.n_split = channels, n_split
            w_init = torch.linalg.qr(w_init)[0]
            if torch.det(w_init) < 0:
                w_init[:, 0] = -1 * w_init[:, 0]
            self.weight = torch.nn.Parameter(w_init)

        def forward(self, x, x_mask=None, reverse=False):
            b, c, t = x.size()
            x_len = torch.sum(x_mask, [1, 2])
            x = x.view(b, 2, c // self.n_split, self.n_split // 2, t)
            x = x.permute(0, 1, 3, 2, 4).contiguous().view(b, self.n_split, c // self.n_split, t)
            if reverse:
                weight = torch.inverse(self.weight.float()).to(dtype=self.weight.dtype)
                logdet = None
            else:
                weight = self.weight
                logdet = torch.logdet(self.weight) * (c / self.n_split) * x_len
            weight = weight.view(self.n_split, self.n_split, 1, 1)
            z = torch.nn.functional.conv2d(x, weight)
            z = z.view(b, 2, self.n_split // 2, c // self.n_split, t)
            z = z.permute(0, 1, 3, 2, 4).contiguous().view(b, c, t) * x_mask
            return z, logdet

    class Coupling(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.start = torch.nn.utils.weight_norm(torch.nn.Conv1d(C // 2, 8, 3, padding=1))
            self.end = torch.nn.Conv1d(8, C, 3, padding=1)

        def forward(self, x, x_mask, reverse=False):
            x_0, x_1 = x[:, :C // 2], x[:, C // 2:]
            out = self.end(torch.tanh(self.start(x_0) * x_mask))
            m, logs = out[:, :C // 2, :], out[:, C // 2:, :]
            if reverse:
                return torch.cat([x_0, (x_1 - m) * torch.exp(-logs) * x_mask], 1), None
            z_1 = (m + torch.exp(logs) * x_1) * x_mask
            return torch.cat([x_0, z_1], 1), torch.sum(logs * x_mask, [1, 2])

    w0 = torch.from_numpy(rng.standard_normal((4, 4)).astype(np.float32))
    flows = torch.nn.ModuleList([ActNorm(C, ddi=True), InvConvNear(C, 4, w0), Coupling(),
                                 ActNorm(C), InvConvNear(C, 4, w0.flip(0)), Coupling()])
    for f in flows:
        if isinstance(f, Coupling):
            fill_(torch, f, rng, 0.2)
    opt = torch.optim.Adam(flows.parameters(), 1e-2)
    y = normal(torch, rng, B, C, T) * 2 + 1
    y_mask = _sequence_mask(torch, torch.tensor([T, T - 2]), T).unsqueeze(1).to(y.dtype)
    x_m = normal(torch, rng, B, C, 3)
    x_logs = normal(torch, rng, B, C, 3) * 0.1
    x_mask = _sequence_mask(torch, torch.tensor([3, 2]), 3).unsqueeze(1).to(y.dtype)
    res = {"losses": [], "logdets": []}
    for _ in range(2):
        z, logdet = y, 0
        for f in flows:
            z, ld = f(z, y_mask)
            logdet = logdet + ld
        with torch.no_grad():
            x_s_sq_r = torch.exp(-2 * x_logs)
            logp1 = torch.sum(-0.5 * math.log(2 * math.pi) - x_logs, [1]).unsqueeze(-1)
            logp2 = torch.matmul(x_s_sq_r.transpose(1, 2), -0.5 * (z ** 2))
            logp3 = torch.matmul((x_m * x_s_sq_r).transpose(1, 2), z)
            logp4 = torch.sum(-0.5 * (x_m ** 2) * x_s_sq_r, [1]).unsqueeze(-1)
            logp = logp1 + logp2 + logp3 + logp4
            attn_mask = torch.unsqueeze(x_mask, -1) * torch.unsqueeze(y_mask, 2)
            attn = _maximum_path(torch, logp.transpose(1, 2),
                                 attn_mask.squeeze(1).transpose(1, 2)).transpose(1, 2)
        z_m = torch.matmul(attn.transpose(1, 2), x_m.transpose(1, 2)).transpose(1, 2)
        z_logs = torch.matmul(attn.transpose(1, 2), x_logs.transpose(1, 2)).transpose(1, 2)
        l_mle = 0.5 * math.log(2 * math.pi) + (
            torch.sum(z_logs) + 0.5 * torch.sum(torch.exp(-2 * z_logs) * (z - z_m) ** 2)
            - torch.sum(logdet)) / (torch.sum(y_mask) * C)
        opt.zero_grad()
        l_mle.backward()
        opt.step()
        res["losses"].append(l_mle.item())
        res["logdets"].append(logdet.detach())
        res["attn"] = attn
    with torch.no_grad():
        y_r = z
        for f in reversed(flows):
            y_r = f(y_r, y_mask, reverse=True)[0]
    res["reverse"] = y_r
    res["actnorm"] = [flows[0].logs, flows[0].bias]
    res["invconv"] = flows[1].weight
    res["invconv_grad"] = flows[4].weight.grad
    return res


PROGRAMS = [vits_program, sdp_spline_program, fastspeech2_program, glow_tts_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # the inverse spline's quadratic root cancels: both libraries' round trips miss x by
        # 1.5e-5 in float32, so they agree with each other only to that
        "sdp_spline_program": (1e-5, 2e-5),
        # 1x1-conv inverse / slogdet and two Adam steps through three flows: float32 LAPACK
        # and accumulation order
        "glow_tts_program": (1e-4, 1e-5),
    })
