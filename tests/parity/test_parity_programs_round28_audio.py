"""Source separation written as asteroid and facebookresearch/demucs write it in torch, run once
with `torch` bound to ember and once to PyTorch from the same NumPy weights and data: asteroid's
Conv-TasNet (free filterbank through F.conv1d / F.conv_transpose1d, cLN and cumLN norms with
gain and bias applied through transposes, TDConvNet, PairwiseNegSDR and PITLossWrapper's
one-hot einsum over permutations with index_select reordering), asteroid's DPRNN (unfold into
overlapping chunks, intra- and inter-chunk BiLSTMs, fold back with overlap-add, tanh/sigmoid
gated output) and Demucs v2 (normalised mono statistics, GLU encoders, BLSTM bottleneck,
center_trim skips, ConvTranspose1d decoders, rescale_conv, L1 loss with flip/shift
augmentation given from NumPy), Demucs v3's DConv branch (GroupNorm, GELU, GLU, LayerScale,
LocalState attention with cos/decay kernels and an eye-masked diagonal, a chunked BLSTM over
unfold frames) and DCCRN's ConvSTFT/ConviSTFT (NumPy rfft and pinv kernels as conv buffers,
atan2 phase, a polar complex ratio mask, window-normalised overlap-add). The
speaker-verification programs are in _speaker."""

import itertools
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

EPS = 1e-8


def _asteroid_norms(torch):
    """asteroid.masknn.norms: gLN, cLN and cumLN with the gain/bias applied via transposes."""
    nn = torch.nn

    class _LayerNorm(nn.Module):
        def __init__(self, channel_size):
            super().__init__()
            self.channel_size = channel_size
            self.gamma = nn.Parameter(torch.ones(channel_size), requires_grad=True)
            self.beta = nn.Parameter(torch.zeros(channel_size), requires_grad=True)

        def apply_gain_and_bias(self, normed_x):
            return (self.gamma * normed_x.transpose(1, -1) + self.beta).transpose(1, -1)

    class GlobLN(_LayerNorm):
        def forward(self, x, EPS=1e-8):
            dims = list(range(1, len(x.shape)))
            mean = x.mean(dim=dims, keepdim=True)
            var = torch.pow(x - mean, 2).mean(dim=dims, keepdim=True)
            return self.apply_gain_and_bias((x - mean) / (var + EPS).sqrt())

    class ChanLN(_LayerNorm):
        def forward(self, x, EPS=1e-8):
            mean = torch.mean(x, dim=1, keepdim=True)
            var = torch.var(x, dim=1, keepdim=True, unbiased=False)
            return self.apply_gain_and_bias((x - mean) / (var + EPS).sqrt())

    class CumLN(_LayerNorm):
        def forward(self, x, EPS=1e-8):
            batch, chan, spec_len = x.size()
            cum_sum = torch.cumsum(x.sum(1, keepdim=True), dim=-1)
            cum_pow_sum = torch.cumsum(x.pow(2).sum(1, keepdim=True), dim=-1)
            cnt = torch.arange(start=chan, end=chan * (spec_len + 1), step=chan,
                               dtype=x.dtype, device=x.device).view(1, 1, -1)
            cum_mean = cum_sum / cnt
            cum_var = cum_pow_sum / cnt - cum_mean.pow(2)
            return self.apply_gain_and_bias((x - cum_mean) / (cum_var + EPS).sqrt())
    return {"gLN": GlobLN, "cLN": ChanLN, "cumLN": CumLN}


def _pit(torch):
    """asteroid's PairwiseNegSDR('sisdr') and PITLossWrapper(pit_from='pw_mtx')."""

    def pairwise_neg_sisdr(est_targets, targets):
        mean_source = torch.mean(targets, dim=2, keepdim=True)
        mean_estimate = torch.mean(est_targets, dim=2, keepdim=True)
        targets = targets - mean_source
        est_targets = est_targets - mean_estimate
        s_target = torch.unsqueeze(targets, dim=1)
        s_estimate = torch.unsqueeze(est_targets, dim=2)
        pair_wise_dot = torch.sum(s_estimate * s_target, dim=3, keepdim=True)
        s_target_energy = torch.sum(s_target ** 2, dim=3, keepdim=True) + EPS
        pair_wise_proj = pair_wise_dot * s_target / s_target_energy
        e_noise = s_estimate - pair_wise_proj
        pair_wise_sdr = torch.sum(pair_wise_proj ** 2, dim=3) / (
            torch.sum(e_noise ** 2, dim=3) + EPS)
        return -10 * torch.log10(pair_wise_sdr + EPS)

    def find_best_perm(pair_wise_losses):
        n_src = pair_wise_losses.shape[-1]
        pwl = pair_wise_losses.transpose(-1, -2)
        perms = pwl.new_tensor(list(itertools.permutations(range(n_src))), dtype=torch.long)
        idx = torch.unsqueeze(perms, 2)
        perms_one_hot = pwl.new_zeros((*perms.size(), n_src)).scatter_(2, idx, 1)
        loss_set = torch.einsum("bij,pij->bp", [pwl, perms_one_hot])
        loss_set /= n_src
        min_loss, min_loss_idx = torch.min(loss_set, dim=1)
        batch_indices = torch.index_select(perms, 0, min_loss_idx)
        return min_loss, batch_indices

    def reorder_source(source, batch_indices):
        return torch.stack([torch.index_select(s, 0, b)
                            for s, b in zip(source, batch_indices)])

    def pit_loss(est_targets, targets, return_est=False):
        pw_losses = pairwise_neg_sisdr(est_targets, targets)
        min_loss, batch_indices = find_best_perm(pw_losses)
        mean_loss = torch.mean(min_loss)
        if not return_est:
            return mean_loss
        return mean_loss, reorder_source(est_targets, batch_indices), batch_indices
    return pit_loss


def _mixtures(torch, rng, batch, n_src, length):
    """Two sources per example: a sine and a square-ish wave of NumPy-chosen scales, plus noise."""
    t = np.arange(length, dtype=np.float32)
    base = np.stack([np.sin(2 * math.pi * t / 7.0), np.sign(np.sin(t / 4.0))]).astype(np.float32)
    scales = rng.uniform(0.3, 1.2, (batch, n_src, 1)).astype(np.float32)
    src = base[None, :n_src] * scales + 0.05 * rng.standard_normal(
        (batch, n_src, length)).astype(np.float32)
    sources = torch.from_numpy(src)
    return sources.sum(1), sources


def conv_tasnet_program(torch):
    """asteroid's ConvTasNet: free filterbank (xavier-initialised Parameter used through
    F.conv1d/F.conv_transpose1d), TDConvNet of Conv1DBlocks with cLN, cumLN in the causal
    variant, ReLU masks viewed per source, PIT with reordered estimates, Adam with
    clip_grad_norm_ and a ReduceLROnPlateau step on a validation loss under no_grad."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2801)
    norms = _asteroid_norms(torch)
    pit_loss = _pit(torch)
    n_src, n_filters, kernel_size, stride = 2, 8, 8, 4

    class FreeFB(nn.Module):
        def __init__(self):
            super().__init__()
            self._filters = nn.Parameter(torch.ones(n_filters, 1, kernel_size))
            for p in self.parameters():
                nn.init.xavier_normal_(p)

        def filters(self):
            return self._filters

    class Encoder(nn.Module):
        def __init__(self, fb):
            super().__init__()
            self.filterbank = fb

        def forward(self, waveform):
            if waveform.ndim == 2:
                waveform = waveform.unsqueeze(1)
            return F.conv1d(waveform, self.filterbank.filters(), stride=stride, padding=0)

    class Decoder(nn.Module):
        def __init__(self, fb):
            super().__init__()
            self.filterbank = fb

        def forward(self, spec):
            view_as = (-1,) + spec.shape[-2:]
            out = F.conv_transpose1d(spec.reshape(view_as), self.filterbank.filters(),
                                     stride=stride, padding=0, output_padding=0)
            return out.view(spec.shape[:-2] + (-1,))

    class Conv1DBlock(nn.Module):
        def __init__(self, in_chan, hid_chan, skip_out_chan, kernel_size, padding, dilation,
                     norm_type, causal):
            super().__init__()
            self.skip_out_chan = skip_out_chan
            depth_conv1d = nn.Conv1d(hid_chan, hid_chan, kernel_size, padding=padding,
                                     dilation=dilation, groups=hid_chan)
            layers = [nn.Conv1d(in_chan, hid_chan, 1), nn.PReLU(), norms[norm_type](hid_chan),
                      depth_conv1d, nn.PReLU(), norms[norm_type](hid_chan)]
            self.causal, self.padding = causal, padding
            self.shared_block = nn.Sequential(*layers)
            self.res_conv = nn.Conv1d(hid_chan, in_chan, 1)
            if skip_out_chan:
                self.skip_conv = nn.Conv1d(hid_chan, skip_out_chan, 1)

        def forward(self, x):
            shared_out = self.shared_block[:3](x)
            shared_out = self.shared_block[3](shared_out)
            if self.causal:
                shared_out = shared_out[..., :-self.padding]
            shared_out = self.shared_block[4:](shared_out)
            res_out = self.res_conv(shared_out)
            if not self.skip_out_chan:
                return res_out
            return res_out, self.skip_conv(shared_out)

    class TDConvNet(nn.Module):
        def __init__(self, in_chan, causal, norm_type, n_blocks=2, n_repeats=2, bn_chan=6,
                     hid_chan=10, skip_chan=6, conv_kernel_size=3):
            super().__init__()
            self.in_chan, self.skip_chan = in_chan, skip_chan
            self.bottleneck = nn.Sequential(norms[norm_type](in_chan),
                                            nn.Conv1d(in_chan, bn_chan, 1))
            self.TCN = nn.ModuleList()
            for _ in range(n_repeats):
                for x in range(n_blocks):
                    if not causal:
                        padding = (conv_kernel_size - 1) * 2 ** x // 2
                    else:
                        padding = (conv_kernel_size - 1) * 2 ** x
                    self.TCN.append(Conv1DBlock(bn_chan, hid_chan, skip_chan,
                                                conv_kernel_size, padding=padding,
                                                dilation=2 ** x, norm_type=norm_type,
                                                causal=causal))
            self.mask_net = nn.Sequential(nn.PReLU(), nn.Conv1d(skip_chan, n_src * in_chan, 1))

        def forward(self, mixture_w):
            batch, _, n_frames = mixture_w.size()
            output = self.bottleneck(mixture_w)
            skip_connection = torch.tensor([0.0], device=output.device)
            for layer in self.TCN:
                residual, skip = layer(output)
                output = output + residual
                skip_connection = skip_connection + skip
            score = self.mask_net(skip_connection)
            score = score.view(batch, n_src, self.in_chan, n_frames)
            return F.relu(score)

    class ConvTasNet(nn.Module):
        def __init__(self, causal):
            super().__init__()
            fb = FreeFB()
            self.encoder = Encoder(fb)
            self.decoder = Decoder(FreeFB())
            self.masker = TDConvNet(n_filters, causal, "cumLN" if causal else "cLN")

        def forward(self, wav):
            tf_rep = self.encoder(wav)
            est_masks = self.masker(tf_rep)
            masked_tf_rep = est_masks * tf_rep.unsqueeze(1)
            decoded = self.decoder(masked_tf_rep)
            # asteroid's pad_x_to_y
            inp_len = wav.shape[-1]
            return F.pad(decoded, [0, inp_len - decoded.shape[-1]])

    res = {}
    mix, sources = _mixtures(torch, rng, 2, n_src, 40)
    val_mix, val_sources = _mixtures(torch, rng, 2, n_src, 40)
    for causal in (False, True):
        tag = "causal_" if causal else ""
        model = ConvTasNet(causal)
        fill_(torch, [p for n, p in model.named_parameters()
                      if not n.endswith(("gamma", "beta"))], rng, 0.3)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=0)
        losses, lrs = [], []
        for _ in range(3):
            model.train()
            opt.zero_grad()
            est = model(mix)
            loss = pit_loss(est, sources)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            model.eval()
            with torch.no_grad():
                val_loss = pit_loss(model(val_mix), val_sources)
            sched.step(val_loss)
            losses.append(loss.item())
            lrs.append(opt.param_groups[0]["lr"])
        res[tag + "losses"], res[tag + "lr"] = losses, lrs
        with torch.no_grad():
            loss, reordered, perm = pit_loss(model(val_mix), val_sources, return_est=True)
        res[tag + "reordered"], res[tag + "perm"] = reordered, perm.tolist()
        res[tag + "grads"] = [p.grad for p in model.parameters() if p.grad is not None]
        res[tag + "no_grad"] = [n for n, p in model.named_parameters() if p.grad is None]
        res[tag + "norm_names"] = [type(m).__name__ for m in model.masker.TCN[0].shared_block]
    return res


def dprnn_program(torch):
    """asteroid's DPRNN: gLN bottleneck, F.unfold into 50%-overlapping chunks, DPRNN blocks
    (intra-chunk BiLSTM over K, inter-chunk BiLSTM over the chunks, Linear back to the
    channels, gLN on the 4-D map, residual adds), PReLU + Conv2d to n_src maps, F.fold with
    overlap-add, tanh and sigmoid gated 1x1 convs, sigmoid masks; two Adam steps of PIT."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2802)
    norms = _asteroid_norms(torch)
    pit_loss = _pit(torch)
    n_src, in_chan, bn_chan, hid_size, chunk_size, hop_size = 2, 6, 4, 3, 6, 3

    class SingleRNN(nn.Module):
        def __init__(self, input_size, hidden_size, bidirectional=True):
            super().__init__()
            self.rnn = getattr(nn, "LSTM")(input_size, hidden_size, num_layers=1,
                                           batch_first=True, bidirectional=bidirectional)

        @property
        def output_size(self):
            return self.rnn.hidden_size * (2 if self.rnn.bidirectional else 1)

        def forward(self, inp):
            output = inp
            rnn_output, _ = self.rnn(output)
            return rnn_output

    class DPRNNBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.intra_RNN = SingleRNN(bn_chan, hid_size)
            self.inter_RNN = SingleRNN(bn_chan, hid_size)
            self.intra_linear = nn.Linear(self.intra_RNN.output_size, bn_chan)
            self.intra_norm = norms["gLN"](bn_chan)
            self.inter_linear = nn.Linear(self.inter_RNN.output_size, bn_chan)
            self.inter_norm = norms["gLN"](bn_chan)

        def forward(self, x):
            B, N, K, L = x.size()
            output = x
            x = x.transpose(1, -1).reshape(B * L, K, N)
            x = self.intra_RNN(x)
            x = self.intra_linear(x)
            x = x.reshape(B, L, K, N).transpose(1, -1)
            x = self.intra_norm(x)
            output = output + x
            x = output.transpose(1, 2).transpose(2, -1).reshape(B * K, L, N)
            x = self.inter_RNN(x)
            x = self.inter_linear(x)
            x = x.reshape(B, K, L, N).transpose(1, -1).transpose(2, -1).contiguous()
            x = self.inter_norm(x)
            return output + x

    class DPRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.in_norm = norms["gLN"](in_chan)
            self.bottleneck = nn.Conv1d(in_chan, bn_chan, 1)
            self.net = nn.Sequential(*[DPRNNBlock() for _ in range(2)])
            self.first_out = nn.Sequential(nn.PReLU(), nn.Conv2d(bn_chan, n_src * bn_chan, 1))
            self.net_out = nn.Sequential(nn.Conv1d(bn_chan, bn_chan, 1), nn.Tanh())
            self.net_gate = nn.Sequential(nn.Conv1d(bn_chan, bn_chan, 1), nn.Sigmoid())
            self.mask_net = nn.Conv1d(bn_chan, in_chan, 1, bias=False)
            self.output_act = nn.Sigmoid()

        def forward(self, mixture_w):
            batch, n_filters, n_frames = mixture_w.size()
            mixture_w = self.bottleneck(self.in_norm(mixture_w))
            output = F.unfold(mixture_w.unsqueeze(-1), kernel_size=(chunk_size, 1),
                              padding=(chunk_size, 0), stride=(hop_size, 1))
            n_chunks = output.shape[-1]
            output = output.reshape(batch, bn_chan, chunk_size, n_chunks)
            output = self.net(output)
            output = self.first_out(output)
            output = output.reshape(batch * n_src, bn_chan, chunk_size, n_chunks)
            to_unfold = bn_chan * chunk_size
            output = F.fold(output.reshape(batch * n_src, to_unfold, n_chunks), (n_frames, 1),
                            kernel_size=(chunk_size, 1), padding=(chunk_size, 0),
                            stride=(hop_size, 1))
            output = output.reshape(batch * n_src, bn_chan, -1)
            output = self.net_out(output) * self.net_gate(output)
            score = self.mask_net(output)
            est_mask = self.output_act(score)
            return est_mask.view(batch, n_src, in_chan, n_frames), n_chunks

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Conv1d(1, in_chan, 4, stride=2, bias=False)
            self.masker = DPRNN()
            self.decoder = nn.ConvTranspose1d(in_chan, 1, 4, stride=2, bias=False)

        def forward(self, wav):
            w = F.relu(self.encoder(wav.unsqueeze(1)))
            masks, n_chunks = self.masker(w)
            est = self.decoder((masks * w.unsqueeze(1)).flatten(0, 1))
            return est.view(wav.shape[0], n_src, -1)[..., :wav.shape[-1]], n_chunks

    model = Model()
    fill_(torch, [p for n, p in model.named_parameters()
                  if not n.endswith(("gamma", "beta"))], rng, 0.4)
    mix, sources = _mixtures(torch, rng, 2, n_src, 30)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-5)
    res = {"losses": []}
    for _ in range(2):
        opt.zero_grad()
        est, n_chunks = model(mix)
        loss = pit_loss(est, sources)
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["n_chunks"] = [n_chunks]
    res["est"] = est
    res["grads"] = [p.grad for p in model.parameters()]
    # fold(unfold(x)) counts each frame once per chunk covering it: 2 with 50% overlap
    x = normal(torch, rng, 1, 3, 11, 1)
    cols = F.unfold(x, kernel_size=(4, 1), padding=(4, 0), stride=(2, 1))
    res["fold_counts"] = F.fold(cols, (11, 1), kernel_size=(4, 1), padding=(4, 0),
                                stride=(2, 1)) / x
    return res


def demucs_program(torch):
    """Demucs v2: normalised by the mono mixture's mean and std, GLU encoder layers, a BLSTM
    bottleneck, decoders adding center_trim-ed skips then GLU and ConvTranspose1d, rescale_conv
    at init (weight.data /= scale), valid_length padding, flip-channel / flip-sign / shift
    augmentation chosen by NumPy, L1 loss and Adam; apply_model with shifts under no_grad."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2803)
    sources, audio_channels, channels, depth, kernel_size, stride, context = 2, 2, 4, 2, 8, 4, 3

    def center_trim(tensor, reference):
        if hasattr(reference, "size"):
            reference = reference.size(-1)
        delta = tensor.size(-1) - reference
        if delta < 0:
            raise ValueError("tensor must be larger than reference. " f"Delta is {delta}.")
        if delta:
            tensor = tensor[..., delta // 2:-(delta - delta // 2)]
        return tensor

    def rescale_conv(conv, reference):
        std = conv.weight.std().detach()
        scale = (std / reference) ** 0.5
        conv.weight.data /= scale
        if conv.bias is not None:
            conv.bias.data /= scale

    def rescale_module(module, reference):
        for sub in module.modules():
            if isinstance(sub, (nn.Conv1d, nn.ConvTranspose1d)):
                rescale_conv(sub, reference)

    class BLSTM(nn.Module):
        def __init__(self, dim, layers=1):
            super().__init__()
            self.lstm = nn.LSTM(bidirectional=True, num_layers=layers, hidden_size=dim,
                                input_size=dim)
            self.linear = nn.Linear(2 * dim, dim)

        def forward(self, x):
            x = x.permute(2, 0, 1)
            x = self.lstm(x)[0]
            x = self.linear(x)
            return x.permute(1, 2, 0)

    class Demucs(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder, self.decoder = nn.ModuleList(), nn.ModuleList()
            in_channels, chans = audio_channels, channels
            for index in range(depth):
                self.encoder.append(nn.Sequential(
                    nn.Conv1d(in_channels, chans, kernel_size, stride), nn.ReLU(),
                    nn.Conv1d(chans, 2 * chans, 1), nn.GLU(dim=1)))
                out_channels = in_channels if index > 0 else sources * audio_channels
                decode = [nn.Conv1d(chans, 2 * chans, context), nn.GLU(dim=1),
                          nn.ConvTranspose1d(chans, out_channels, kernel_size, stride)]
                if index > 0:
                    decode.append(nn.ReLU())
                self.decoder.insert(0, nn.Sequential(*decode))
                in_channels, chans = chans, int(2 * chans)
            self.lstm = BLSTM(in_channels)

        def valid_length(self, length):
            for _ in range(depth):
                length = math.ceil((length - kernel_size) / stride) + 1
                length = max(1, length)
                length += context - 1
            for _ in range(depth):
                length = (length - 1) * stride + kernel_size
            return int(length)

        def forward(self, mix):
            x = mix
            mono = mix.mean(dim=1, keepdim=True)
            mean = mono.mean(dim=-1, keepdim=True)
            std = mono.std(dim=-1, keepdim=True)
            x = (x - mean) / (1e-5 + std)
            saved = []
            for encode in self.encoder:
                x = encode(x)
                saved.append(x)
            x = self.lstm(x)
            for decode in self.decoder:
                skip = center_trim(saved.pop(-1), x)
                x = x + skip
                x = decode(x)
            x = x * std + mean
            return x.view(x.size(0), sources, audio_channels, x.size(-1))

    model = Demucs()
    fill_(torch, model, rng, 0.3)
    rescale_module(model, reference=0.1)
    res = {"rescaled_std": [m.weight.std() for m in model.modules()
                            if isinstance(m, (nn.Conv1d, nn.ConvTranspose1d))]}
    length = 40
    valid = model.valid_length(length)
    res["valid_length"] = [valid]
    wav = normal(torch, rng, 2, sources, audio_channels, valid + 6)
    opt = torch.optim.Adam(model.parameters(), lr=3e-4)
    res["losses"] = []
    for step in range(3):
        # demucs.augment: Shift, FlipChannels, FlipSign, Remix, with NumPy's choices
        offsets = rng.integers(0, 7, size=(2,))
        streams = torch.stack([wav[b, ..., int(o):int(o) + valid]
                               for b, o in enumerate(offsets)])
        left = torch.from_numpy(rng.integers(0, 2, size=(2, sources, 1, 1)))
        left = left.expand(-1, -1, -1, valid)
        right = 1 - left
        streams = torch.cat([streams.gather(2, left), streams.gather(2, right)], dim=2)
        signs = torch.from_numpy(rng.integers(0, 2, size=(2, sources, 1, 1)).astype(np.float32))
        streams = streams * (2 * signs - 1)
        perm = torch.from_numpy(rng.permutation(2))
        streams = torch.stack([streams[:, 0], streams[perm, 1]], dim=1)
        mix = streams.sum(dim=1)
        estimates = model(mix)
        target = center_trim(streams, estimates)
        loss = F.l1_loss(estimates, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["out_len"] = [estimates.shape[-1]]
    res["grads"] = [p.grad for p in model.parameters()]
    try:
        center_trim(torch.zeros(3), 5)
    except ValueError as err:
        res["trim_error"] = [str(err)]

    # demucs.utils.apply_model with shifts: random offsets (NumPy's) then center_trim
    model.eval()
    with torch.no_grad():
        mix = wav[0].sum(0)
        max_shift = 4
        padded = F.pad(mix, (max_shift, max_shift))
        out = 0
        for offset in rng.integers(0, max_shift, size=(2,)):
            shifted = padded[..., int(offset):int(offset) + valid]
            shifted_out = model(shifted.unsqueeze(0))[0]
            keep = shifted_out.shape[-1] - max_shift
            out = out + shifted_out[..., max_shift - int(offset):][..., :keep]
        out /= 2
        res["apply_model"] = center_trim(out, 10)
    return res


def demucs_v3_blocks_program(torch):
    """Demucs v3's residual branch as the repository writes it: DConv layers (dilated Conv1d,
    GroupNorm(1, .), GELU, 1x1 conv to 2x channels, GLU, LayerScale through scale[:, None]),
    with LocalState attention (einsum keys/queries, cos frequency kernels and sigmoid decays
    over |delta|, masked_fill_ of the diagonal by an eye mask, softmax over dim 2) and a
    BLSTM over time chunks; Adam on an L1 loss, gradients of every parameter compared."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2804)

    class LayerScale(nn.Module):
        def __init__(self, channels, init=0):
            super().__init__()
            self.scale = nn.Parameter(torch.zeros(channels, requires_grad=True))
            self.scale.data[:] = init

        def forward(self, x):
            return self.scale[:, None] * x

    class LocalState(nn.Module):
        def __init__(self, channels, heads=2, nfreqs=2, ndecay=3):
            super().__init__()
            self.heads, self.nfreqs, self.ndecay = heads, nfreqs, ndecay
            self.content = nn.Conv1d(channels, channels, 1)
            self.query = nn.Conv1d(channels, channels, 1)
            self.key = nn.Conv1d(channels, channels, 1)
            self.query_freqs = nn.Conv1d(channels, heads * nfreqs, 1)
            self.query_decay = nn.Conv1d(channels, heads * ndecay, 1)
            self.proj = nn.Conv1d(channels + heads * nfreqs, channels, 1)

        def forward(self, x):
            B, C, T = x.shape
            heads = self.heads
            indexes = torch.arange(T, device=x.device, dtype=x.dtype)
            delta = indexes[:, None] - indexes[None, :]
            queries = self.query(x).view(B, heads, -1, T)
            keys = self.key(x).view(B, heads, -1, T)
            dots = torch.einsum("bhct,bhcs->bhts", keys, queries)
            dots /= keys.shape[2] ** 0.5
            periods = torch.arange(1, self.nfreqs + 1, device=x.device, dtype=x.dtype)
            freq_kernel = torch.cos(2 * math.pi * delta / periods.view(-1, 1, 1))
            freq_q = self.query_freqs(x).view(B, heads, -1, T) / self.nfreqs ** 0.5
            dots += torch.einsum("fts,bhfs->bhts", freq_kernel, freq_q)
            decays = torch.arange(1, self.ndecay + 1, device=x.device, dtype=x.dtype)
            decay_q = self.query_decay(x).view(B, heads, -1, T)
            decay_q = torch.sigmoid(decay_q) / 2
            decay_kernel = - decays.view(-1, 1, 1) * delta.abs() / self.ndecay ** 0.5
            dots += torch.einsum("fts,bhfs->bhts", decay_kernel, decay_q)
            dots.masked_fill_(torch.eye(T, device=dots.device, dtype=torch.bool), -100)
            weights = torch.softmax(dots, dim=2)
            content = self.content(x).view(B, heads, -1, T)
            result = torch.einsum("bhts,bhct->bhcs", weights, content)
            time_sig = torch.einsum("bhts,fts->bhfs", weights, freq_kernel)
            result = torch.cat([result, time_sig], 2)
            result = result.reshape(B, -1, T)
            return x + self.proj(result)

    class BLSTM(nn.Module):
        """Demucs v3's BLSTM with max_steps: overlapping frames by unfold, stitched back."""

        def __init__(self, dim, max_steps=8):
            super().__init__()
            self.max_steps = max_steps
            self.lstm = nn.LSTM(bidirectional=True, num_layers=1, hidden_size=dim,
                                input_size=dim)
            self.linear = nn.Linear(2 * dim, dim)

        def forward(self, x):
            B, C, T = x.shape
            y = x
            width = self.max_steps
            stride = width // 2
            frames = F.pad(x, (0, (-T) % stride))
            frames = frames.unfold(-1, width, stride)
            nframes = frames.shape[2]
            x = frames.permute(0, 2, 1, 3).reshape(-1, C, width)
            x = x.permute(2, 0, 1)
            x = self.lstm(x)[0]
            x = self.linear(x)
            x = x.permute(1, 2, 0)
            out = []
            frames = x.reshape(B, -1, C, width)
            limit = stride // 2
            for k in range(nframes):
                if k == 0:
                    out.append(frames[:, k, :, :-limit])
                elif k == nframes - 1:
                    out.append(frames[:, k, :, limit:])
                else:
                    out.append(frames[:, k, :, limit:-limit])
            out = torch.cat(out, -1)
            out = out[..., :T]
            return out + y

    class DConv(nn.Module):
        def __init__(self, channels, compress=2, depth=2, init=1e-1):
            super().__init__()
            hidden = int(channels / compress)
            self.layers = nn.ModuleList([])
            for d in range(depth):
                dilation = 2 ** d
                padding = dilation * (3 // 2)
                mods = [nn.Conv1d(channels, hidden, 3, dilation=dilation, padding=padding),
                        nn.GroupNorm(1, hidden), nn.GELU()]
                if d == depth - 1:
                    mods += [BLSTM(hidden), LocalState(hidden)]
                mods += [nn.Conv1d(hidden, 2 * channels, 1), nn.GroupNorm(1, 2 * channels),
                         nn.GLU(1), LayerScale(channels, init)]
                self.layers.append(nn.Sequential(*mods))

        def forward(self, x):
            for layer in self.layers:
                x = x + layer(x)
            return x

    model = DConv(8)
    fill_(torch, [p for n, p in model.named_parameters() if not n.endswith("scale")], rng, 0.4)
    x = normal(torch, rng, 2, 8, 22)
    target = normal(torch, rng, 2, 8, 22)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    res = {"losses": []}
    for _ in range(3):
        out = model(x)
        loss = F.l1_loss(out, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["out"] = out
    res["grads"] = [p.grad for p in model.parameters()]
    res["scales"] = [layer[-1].scale for layer in model.layers]
    return res


def dccrn_stft_program(torch):
    """DCCRN's ConvSTFT / ConviSTFT: STFT kernels from NumPy (sqrt periodic Hann, rfft basis)
    as a fixed Conv1d weight buffer, F.pad of the window overlap, magnitude and atan2 phase,
    a complex ratio mask (tanh magnitude, phase rotation by atan2 of the mask) applied in polar
    form, F.conv_transpose1d synthesis divided by the conv_transpose1d of the window's enframe
    (coff + 1e-8), and SI-SNR training of the mask estimator with AdamW."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2805)
    win_len, win_inc, fft_len = 16, 4, 16

    def init_kernels(invers=False):
        window = np.hanning(win_len + 1)[:-1] ** 0.5
        fourier_basis = np.fft.rfft(np.eye(fft_len))[:win_len]
        real_kernel, imag_kernel = np.real(fourier_basis), np.imag(fourier_basis)
        kernel = np.concatenate([real_kernel, imag_kernel], 1).T
        if invers:
            kernel = np.linalg.pinv(kernel).T
        kernel = kernel * window
        kernel = kernel[:, None, :]
        return (torch.from_numpy(kernel.astype(np.float32)),
                torch.from_numpy(window[None, :, None].astype(np.float32)))

    class ConvSTFT(nn.Module):
        def __init__(self):
            super().__init__()
            kernel, _ = init_kernels()
            self.register_buffer("weight", kernel)
            self.stride, self.dim = win_inc, fft_len

        def forward(self, inputs):
            if inputs.dim() == 2:
                inputs = torch.unsqueeze(inputs, 1)
            inputs = F.pad(inputs, [win_len - self.stride, win_len - self.stride])
            outputs = F.conv1d(inputs, self.weight, stride=self.stride)
            dim = self.dim // 2 + 1
            real = outputs[:, :dim, :]
            imag = outputs[:, dim:, :]
            mags = torch.sqrt(real ** 2 + imag ** 2)
            phase = torch.atan2(imag, real)
            return mags, phase, real, imag

    class ConviSTFT(nn.Module):
        def __init__(self):
            super().__init__()
            kernel, window = init_kernels(invers=True)
            self.register_buffer("weight", kernel)
            self.register_buffer("window", window)
            self.register_buffer("enframe", torch.eye(win_len)[:, None, :])
            self.stride = win_inc

        def forward(self, mags, phase):
            cspec = torch.cat([mags * torch.cos(phase), mags * torch.sin(phase)], 1)
            outputs = F.conv_transpose1d(cspec, self.weight, stride=self.stride)
            t = self.window.repeat(1, 1, cspec.size(-1)) ** 2
            coff = F.conv_transpose1d(t, self.enframe, stride=self.stride)
            outputs = outputs / (coff + 1e-8)
            outputs = outputs[..., win_len - self.stride:-(win_len - self.stride)]
            return outputs

    class MaskNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stft, self.istft = ConvSTFT(), ConviSTFT()
            dim = fft_len // 2 + 1
            self.net = nn.Sequential(nn.Conv1d(2 * dim, 12, 3, padding=1), nn.PReLU(),
                                     nn.Conv1d(12, 2 * dim, 1))

        def forward(self, x):
            mags, phase, real, imag = self.stft(x)
            specs = torch.cat([real, imag], 1)
            m = self.net(specs)
            mask_real, mask_imag = torch.chunk(m, 2, 1)
            mask_mags = (mask_real ** 2 + mask_imag ** 2) ** 0.5
            real_phase = mask_real / (mask_mags + 1e-8)
            imag_phase = mask_imag / (mask_mags + 1e-8)
            mask_phase = torch.atan2(imag_phase, real_phase)
            mask_mags = torch.tanh(mask_mags)
            est_mags = mask_mags * mags
            est_phase = phase + mask_phase
            return self.istft(est_mags, est_phase).squeeze(1), mags

    def si_snr(s1, s2, eps=1e-8):
        s1 = s1 - torch.mean(s1, dim=-1, keepdim=True)
        s2 = s2 - torch.mean(s2, dim=-1, keepdim=True)
        s1_s2_norm = torch.sum(s1 * s2, -1, keepdim=True)
        s2_s2_norm = torch.sum(s2 * s2, -1, keepdim=True)
        s_target = s1_s2_norm / (s2_s2_norm + eps) * s2
        e_nosie = s1 - s_target
        target_norm = torch.sum(s_target * s_target, -1, keepdim=True)
        noise_norm = torch.sum(e_nosie * e_nosie, -1, keepdim=True)
        snr = 10 * torch.log10((target_norm) / (noise_norm + eps) + eps)
        return torch.mean(snr)

    model = MaskNet()
    fill_(torch, model, rng, 0.3)
    mix, sources = _mixtures(torch, rng, 2, 2, 48)
    clean = sources[:, 0]
    res = {"buffers": sorted(n for n, _ in model.named_buffers()), "losses": []}
    with torch.no_grad():
        # analysis then synthesis with the pinv kernels gives the signal back
        mags, phase, _, _ = model.stft(mix)
        res["roundtrip"] = model.istft(mags, phase).squeeze(1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(3):
        est, mags = model(mix)
        loss = -si_snr(est, clean)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["est"], res["mags"] = est, mags
    res["grads"] = [p.grad for p in model.parameters()]
    return res


PROGRAMS = [conv_tasnet_program, dprnn_program, demucs_program, demucs_v3_blocks_program,
            dccrn_stft_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 LSTM / conv accumulation order over a few Adam steps; PIT losses in dB
        "conv_tasnet_program": (1e-4, 1e-5),
        "dprnn_program": (1e-4, 1e-5),
        "demucs_program": (1e-4, 1e-5),
        "demucs_v3_blocks_program": (1e-4, 1e-5),
        "dccrn_stft_program": (1e-4, 1e-5),
    })
