"""Speaker verification written as speechbrain, wespeaker/wenet and the GE2E repositories write
it in torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy weights
and data: ECAPA-TDNN (reflect-padded 'same' Conv1d, SE-Res2Blocks with chunk/cat, length masks,
multi-layer feature aggregation, attentive statistics pooling with global context and a -inf
masked softmax) trained with speechbrain's AdditiveAngularMargin through LogSoftmaxWrapper's
KLDivLoss; wespeaker's ArcMarginProduct (easy and hard margin, torch.where on the cos
threshold, scatter_ one-hot, margin scheduler); GE2E (3-layer LSTM embedder, centroids with and
without the utterance, a similarity matrix written by index_put, learned w and b whose grads
are scaled in place, EER from NumPy); an x-vector TDNN built on F.unfold with statistics
pooling; SpecAugment on torch.stft log-mel features (wenet's slice masks, speechbrain's
arange-compare masks with masked_fill_ of the mean); SphereFace, CosFace, AdaCos and
sub-center heads with EER/minDCF sweeps and AS-norm scoring."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _length_to_mask(torch, length, max_len=None, dtype=None, device=None):
    """speechbrain.dataio.dataio.length_to_mask."""
    assert len(length.shape) == 1
    if max_len is None:
        max_len = length.max().long().item()
    mask = torch.arange(max_len, device=length.device, dtype=length.dtype).expand(
        len(length), max_len) < length.unsqueeze(1)
    if dtype is None:
        dtype = length.dtype
    if device is None:
        device = length.device
    return torch.as_tensor(mask, dtype=dtype, device=device)


def _ecapa(torch, n_mels, channels, lin_neurons):
    """speechbrain.lobes.models.ECAPA_TDNN at toy sizes."""
    nn, F = torch.nn, torch.nn.functional

    class Conv1d(nn.Module):
        """speechbrain's Conv1d: padding='same' by reflect padding, channels-first input."""

        def __init__(self, in_channels, out_channels, kernel_size, dilation=1):
            super().__init__()
            self.kernel_size, self.dilation = kernel_size, dilation
            self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, dilation=dilation,
                                  padding=0)

        def forward(self, x):
            L_in = x.shape[-1]
            padding = self.dilation * (self.kernel_size - 1) // 2
            L_out = (L_in - self.dilation * (self.kernel_size - 1) - 1) + 1 + 2 * padding
            padding = [math.floor((L_in - L_out) / 2), math.floor((L_in - L_out) / 2)]
            pad = self.dilation * (self.kernel_size - 1)
            padding = [pad // 2, pad // 2] if padding == [0, 0] else padding
            x = F.pad(x, padding, mode="reflect")
            return self.conv(x)

    class TDNNBlock(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, dilation):
            super().__init__()
            self.conv = Conv1d(in_channels, out_channels, kernel_size, dilation)
            self.activation = nn.ReLU()
            self.norm = nn.BatchNorm1d(out_channels)

        def forward(self, x):
            return self.norm(self.activation(self.conv(x)))

    class Res2NetBlock(nn.Module):
        def __init__(self, in_channels, out_channels, scale, kernel_size, dilation):
            super().__init__()
            in_channel, hidden_channel = in_channels // scale, out_channels // scale
            self.blocks = nn.ModuleList([TDNNBlock(in_channel, hidden_channel, kernel_size,
                                                   dilation) for _ in range(scale - 1)])
            self.scale = scale

        def forward(self, x):
            y = []
            for i, x_i in enumerate(torch.chunk(x, self.scale, dim=1)):
                if i == 0:
                    y_i = x_i
                elif i == 1:
                    y_i = self.blocks[i - 1](x_i)
                else:
                    y_i = self.blocks[i - 1](x_i + y_i)
                y.append(y_i)
            return torch.cat(y, dim=1)

    class SEBlock(nn.Module):
        def __init__(self, in_channels, se_channels, out_channels):
            super().__init__()
            self.conv1 = nn.Conv1d(in_channels, se_channels, 1)
            self.relu = torch.nn.ReLU(inplace=True)
            self.conv2 = nn.Conv1d(se_channels, out_channels, 1)
            self.sigmoid = torch.nn.Sigmoid()

        def forward(self, x, lengths=None):
            L = x.shape[-1]
            if lengths is not None:
                mask = _length_to_mask(torch, lengths * L, max_len=L, device=x.device)
                mask = mask.unsqueeze(1)
                total = mask.sum(dim=2, keepdim=True)
                s = (x * mask).sum(dim=2, keepdim=True) / total
            else:
                s = x.mean(dim=2, keepdim=True)
            s = self.relu(self.conv1(s))
            s = self.sigmoid(self.conv2(s))
            return s * x

    class SERes2NetBlock(nn.Module):
        def __init__(self, in_channels, out_channels, res2net_scale, se_channels, kernel_size,
                     dilation):
            super().__init__()
            self.tdnn1 = TDNNBlock(in_channels, out_channels, 1, 1)
            self.res2net_block = Res2NetBlock(out_channels, out_channels, res2net_scale,
                                              kernel_size, dilation)
            self.tdnn2 = TDNNBlock(out_channels, out_channels, 1, 1)
            self.se_block = SEBlock(out_channels, se_channels, out_channels)

        def forward(self, x, lengths=None):
            residual = x
            x = self.tdnn1(x)
            x = self.res2net_block(x)
            x = self.tdnn2(x)
            x = self.se_block(x, lengths)
            return x + residual

    class AttentiveStatisticsPooling(nn.Module):
        def __init__(self, channels, attention_channels, global_context=True):
            super().__init__()
            self.eps = 1e-12
            self.global_context = global_context
            self.tdnn = TDNNBlock(channels * 3 if global_context else channels,
                                  attention_channels, 1, 1)
            self.tanh = nn.Tanh()
            self.conv = Conv1d(attention_channels, channels, 1)

        def forward(self, x, lengths=None):
            L = x.shape[-1]

            def _compute_statistics(x, m, dim=2, eps=self.eps):
                mean = (m * x).sum(dim)
                std = torch.sqrt((m * (x - mean.unsqueeze(dim)).pow(2)).sum(dim).clamp(eps))
                return mean, std

            if lengths is None:
                lengths = torch.ones(x.shape[0], device=x.device)
            mask = _length_to_mask(torch, lengths * L, max_len=L, device=x.device)
            mask = mask.unsqueeze(1)
            if self.global_context:
                total = mask.sum(dim=2, keepdim=True).float()
                mean, std = _compute_statistics(x, mask / total)
                mean = mean.unsqueeze(2).repeat(1, 1, L)
                std = std.unsqueeze(2).repeat(1, 1, L)
                attn = torch.cat([x, mean, std], dim=1)
            else:
                attn = x
            attn = self.conv(self.tanh(self.tdnn(attn)))
            attn = attn.masked_fill(mask == 0, float("-inf"))
            attn = F.softmax(attn, dim=2)
            mean, std = _compute_statistics(x, attn)
            pooled_stats = torch.cat((mean, std), dim=1)
            return pooled_stats.unsqueeze(2)

    class ECAPA_TDNN(nn.Module):
        def __init__(self):
            super().__init__()
            kernel_sizes, dilations = [5, 3, 3, 3], [1, 2, 3, 4]
            self.blocks = nn.ModuleList()
            self.blocks.append(TDNNBlock(n_mels, channels[0], kernel_sizes[0], dilations[0]))
            for i in range(1, len(channels) - 1):
                self.blocks.append(SERes2NetBlock(channels[i - 1], channels[i], 4, 4,
                                                  kernel_sizes[i], dilations[i]))
            self.mfa = TDNNBlock(channels[-2] * (len(channels) - 2), channels[-1],
                                 kernel_sizes[-1], dilations[-1])
            self.asp = AttentiveStatisticsPooling(channels[-1], 4, global_context=True)
            self.asp_bn = nn.BatchNorm1d(channels[-1] * 2)
            self.fc = Conv1d(channels[-1] * 2, lin_neurons, 1)

        def forward(self, x, lengths=None):
            x = x.transpose(1, 2)
            xl = []
            for layer in self.blocks:
                try:
                    x = layer(x, lengths=lengths)
                except TypeError:
                    x = layer(x)
                xl.append(x)
            x = torch.cat(xl[1:], dim=1)
            x = self.mfa(x)
            x = self.asp(x, lengths=lengths)
            x = self.asp_bn(x)
            x = self.fc(x)
            return x.transpose(1, 2)
    return ECAPA_TDNN()


def ecapa_aam_program(torch):
    """ECAPA-TDNN on (batch, time, mel) features with relative lengths, speechbrain's Classifier
    (cosine of normalised embedding and weights), AdditiveAngularMargin (margin 0.2, scale 30)
    through LogSoftmaxWrapper (one_hot targets, KLDivLoss(reduction='sum') / targets.sum()),
    Adam with a few steps; eval embeddings under inference_mode and cosine scoring."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2811)
    n_mels, channels, lin, n_spk = 8, [16, 16, 16, 48], 6, 3
    model = _ecapa(torch, n_mels, channels, lin)

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.FloatTensor(n_spk, lin))
            nn.init.xavier_uniform_(self.weight)

        def forward(self, x):
            return F.linear(F.normalize(x.squeeze(1)), F.normalize(self.weight)).unsqueeze(1)

    class AdditiveAngularMargin(nn.Module):
        def __init__(self, margin=0.0, scale=1.0, easy_margin=False):
            super().__init__()
            self.margin, self.scale, self.easy_margin = margin, scale, easy_margin
            self.cos_m = math.cos(self.margin)
            self.sin_m = math.sin(self.margin)
            self.th = math.cos(math.pi - self.margin)
            self.mm = math.sin(math.pi - self.margin) * self.margin

        def forward(self, outputs, targets):
            cosine = outputs.float()
            cosine = torch.clamp(cosine, -1 + 1e-7, 1 - 1e-7)
            sine = torch.sqrt(1.0 - torch.pow(cosine, 2))
            phi = cosine * self.cos_m - sine * self.sin_m
            if self.easy_margin:
                phi = torch.where(cosine > 0, phi, cosine)
            else:
                phi = torch.where(cosine > self.th, phi, cosine - self.mm)
            outputs = (targets * phi) + ((1.0 - targets) * cosine)
            return self.scale * outputs

    class LogSoftmaxWrapper(nn.Module):
        def __init__(self, loss_fn):
            super().__init__()
            self.loss_fn = loss_fn
            self.criterion = torch.nn.KLDivLoss(reduction="sum")

        def forward(self, outputs, targets, length=None):
            outputs = outputs.squeeze(1)
            targets = targets.squeeze(1)
            targets = F.one_hot(targets.long(), outputs.shape[1]).float()
            predictions = self.loss_fn(outputs, targets)
            predictions = F.log_softmax(predictions, dim=1)
            return self.criterion(predictions, targets) / targets.sum()

    classifier = Classifier()
    fill_(torch, [p for n, p in model.named_parameters() if "norm" not in n], rng, 0.3)
    fill_(torch, classifier, rng, 0.5)
    feats = normal(torch, rng, 4, 20, n_mels)
    lens = torch.tensor([1.0, 0.8, 1.0, 0.6])
    spk = torch.tensor([[0], [1], [2], [1]])
    compute_cost = LogSoftmaxWrapper(AdditiveAngularMargin(margin=0.2, scale=30))
    params = list(model.parameters()) + list(classifier.parameters())
    opt = torch.optim.Adam(params, lr=1e-3, weight_decay=2e-6)
    res = {"losses": []}
    for _ in range(3):
        model.train()
        emb = model(feats, lens)
        loss = compute_cost(classifier(emb), spk)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["emb_shape"] = list(emb.shape)
    res["grads"] = [p.grad for p in params]
    res["running"] = [model.asp_bn.running_mean, model.asp_bn.running_var,
                      model.blocks[1].res2net_block.blocks[0].norm.running_var]
    res["tracked"] = [model.asp_bn.num_batches_tracked.item()]
    model.eval()
    with torch.inference_mode():
        emb = model(feats, lens).squeeze(1)
        score = F.cosine_similarity(emb[:, None], emb[None], dim=-1, eps=1e-6)
    res["scores"] = score
    res["inference"] = [emb.is_inference(), emb.requires_grad]
    easy = AdditiveAngularMargin(margin=0.3, scale=10, easy_margin=True)
    cos = torch.tensor([[-0.9, 0.5, 0.99], [0.2, -1.0, 1.0]])
    tgt = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    res["easy_margin"] = easy(cos, tgt)
    res["hard_margin"] = AdditiveAngularMargin(margin=0.3, scale=10)(cos, tgt)
    return res


def arcmargin_program(torch):
    """wespeaker's ArcMarginProduct: cosine by F.linear of normalised rows, sine clamped, phi
    chosen by torch.where on the cos threshold (hard margin) or on cos > 0 (easy margin), one-hot
    by input.new_zeros + scatter_, output *= scale in place; the margin scheduler raising the
    margin over steps; SGD with momentum and nesterov on a linear embedder."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2812)

    class ArcMarginProduct(nn.Module):
        def __init__(self, in_features, out_features, scale=32.0, margin=0.2,
                     easy_margin=False):
            super().__init__()
            self.scale, self.margin = scale, margin
            self.weight = nn.Parameter(torch.FloatTensor(out_features, in_features))
            nn.init.xavier_uniform_(self.weight)
            self.easy_margin = easy_margin
            self.update(margin)

        def update(self, margin=0.2):
            self.margin = margin
            self.cos_m = math.cos(margin)
            self.sin_m = math.sin(margin)
            self.th = math.cos(math.pi - margin)
            self.mm = math.sin(math.pi - margin) * margin
            self.m = self.margin
            self.mmm = 1.0 + math.cos(math.pi - margin)

        def forward(self, input, label):
            cosine = F.linear(F.normalize(input), F.normalize(self.weight))
            sine = torch.sqrt((1.0 - torch.mul(cosine, cosine)).clamp(0, 1))
            phi = cosine * self.cos_m - sine * self.sin_m
            if self.easy_margin:
                phi = torch.where(cosine > 0, phi, cosine)
            else:
                phi = torch.where(cosine > self.th, phi, cosine - self.mmm)
            one_hot = input.new_zeros(cosine.size())
            one_hot.scatter_(1, label.view(-1, 1).long(), 1)
            output = (one_hot * phi) + ((1.0 - one_hot) * cosine)
            output *= self.scale
            return output

    res = {}
    x = normal(torch, rng, 6, 5)
    label = torch.from_numpy(rng.integers(0, 4, size=(6,)))
    for easy in (False, True):
        tag = "easy_" if easy else "hard_"
        embed = nn.Linear(5, 5)
        head = ArcMarginProduct(5, 4, easy_margin=easy)
        fill_(torch, embed, rng, 0.6)
        fill_(torch, head, rng, 0.6)
        opt = torch.optim.SGD(list(embed.parameters()) + list(head.parameters()), lr=0.05,
                              momentum=0.9, nesterov=True, weight_decay=1e-4)
        losses, margins = [], []
        for step in range(4):
            # wespeaker's MarginScheduler: linear increase from 0 to the final margin
            head.update(0.2 * min(1.0, step / 2))
            out = head(embed(x), label)
            loss = F.cross_entropy(out, label)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            margins.append(head.m)
        res[tag + "losses"], res[tag + "margins"] = losses, margins
        res[tag + "out"] = out
        res[tag + "grads"] = [embed.weight.grad, head.weight.grad]
        res[tag + "momentum"] = opt.state[head.weight]["momentum_buffer"]
    # near-antipodal cosines take the cos - mmm branch; the derivative through the clamp
    w = torch.tensor([[0.6, 0.8], [-1.0, 1e-2]], requires_grad=True)
    head = ArcMarginProduct(2, 2, margin=0.5)
    with torch.no_grad():
        head.weight.copy_(torch.eye(2))
    out = head(w, torch.tensor([0, 0]))
    out.sum().backward()
    res["edge_out"], res["edge_grad"] = out, w.grad
    return res


def ge2e_program(torch):
    """GE2E as Real-Time-Voice-Cloning's encoder writes it: a 3-layer batch-first LSTM, ReLU
    Linear on hidden[-1], L2 normalised embeddings, centroids including and excluding each
    utterance, a similarity matrix written column by column into torch.zeros with index
    assignments, learned w (init 10) and b (init -5), cross entropy against np.repeat labels,
    grads of w and b scaled by 0.01 in place and clip_grad_norm_ (norm 3); EER from NumPy."""
    nn = torch.nn
    rng = np.random.default_rng(2813)
    S, U, T, n_mels, hidden, emb = 3, 4, 6, 5, 6, 4

    class SpeakerEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(input_size=n_mels, hidden_size=hidden, num_layers=3,
                                batch_first=True)
            self.linear = nn.Linear(in_features=hidden, out_features=emb)
            self.relu = torch.nn.ReLU()
            self.similarity_weight = nn.Parameter(torch.tensor([10.0]))
            self.similarity_bias = nn.Parameter(torch.tensor([-5.0]))
            self.loss_fn = nn.CrossEntropyLoss()

        def do_gradient_ops(self):
            self.similarity_weight.grad *= 0.01
            self.similarity_bias.grad *= 0.01
            nn.utils.clip_grad_norm_(self.parameters(), 3, norm_type=2)

        def forward(self, utterances, hidden_init=None):
            out, (hidden, cell) = self.lstm(utterances, hidden_init)
            embeds_raw = self.relu(self.linear(hidden[-1]))
            return embeds_raw / (torch.norm(embeds_raw, dim=1, keepdim=True) + 1e-5)

        def similarity_matrix(self, embeds):
            speakers_per_batch, utterances_per_speaker = embeds.shape[:2]
            centroids_incl = torch.mean(embeds, dim=1, keepdim=True)
            centroids_incl = centroids_incl.clone() / (
                torch.norm(centroids_incl, dim=2, keepdim=True) + 1e-5)
            centroids_excl = (torch.sum(embeds, dim=1, keepdim=True) - embeds)
            centroids_excl /= (utterances_per_speaker - 1)
            centroids_excl = centroids_excl.clone() / (
                torch.norm(centroids_excl, dim=2, keepdim=True) + 1e-5)
            sim_matrix = torch.zeros(speakers_per_batch, utterances_per_speaker,
                                     speakers_per_batch)
            mask_matrix = 1 - np.eye(speakers_per_batch, dtype=np.int64)
            for j in range(speakers_per_batch):
                mask = np.where(mask_matrix[j])[0]
                sim_matrix[mask, :, j] = (embeds[mask] * centroids_incl[j]).sum(dim=2)
                sim_matrix[j, :, j] = (embeds[j] * centroids_excl[j]).sum(dim=1)
            return sim_matrix * self.similarity_weight + self.similarity_bias

        def loss(self, embeds):
            speakers_per_batch, utterances_per_speaker = embeds.shape[:2]
            sim_matrix = self.similarity_matrix(embeds)
            sim_matrix = sim_matrix.reshape((speakers_per_batch * utterances_per_speaker,
                                             speakers_per_batch))
            ground_truth = np.repeat(np.arange(speakers_per_batch), utterances_per_speaker)
            target = torch.from_numpy(ground_truth).long()
            loss = self.loss_fn(sim_matrix, target)
            with torch.no_grad():
                labels = np.array([np.eye(speakers_per_batch, dtype=np.int64)[i]
                                   for i in ground_truth])
                preds = sim_matrix.detach().cpu().numpy()
                # EER: the threshold where false accepts equal false rejects
                thresholds = np.sort(preds.flatten())
                fars = np.array([((preds >= t) & (labels == 0)).sum() / (labels == 0).sum()
                                 for t in thresholds])
                frrs = np.array([((preds < t) & (labels == 1)).sum() / (labels == 1).sum()
                                 for t in thresholds])
                k = int(np.argmin(np.abs(fars - frrs)))
                eer = float((fars[k] + frrs[k]) / 2)
            return loss, eer

    model = SpeakerEncoder()
    fill_(torch, [p for n, p in model.named_parameters() if "similarity" not in n], rng, 0.5)
    base = rng.standard_normal((S, 1, 1, n_mels)).astype(np.float32)
    data = base + 0.5 * rng.standard_normal((S, U, T, n_mels)).astype(np.float32)
    inputs = torch.from_numpy(data).reshape(S * U, T, n_mels)
    opt = torch.optim.Adam(model.parameters(), lr=4e-3)
    res = {"losses": [], "eer": []}
    for _ in range(3):
        embeds = model(inputs)
        embeds = embeds.view((S, U, -1))
        loss, eer = model.loss(embeds)
        model.zero_grad()
        loss.backward()
        model.do_gradient_ops()
        opt.step()
        res["losses"].append(loss.item())
        res["eer"].append(eer)
    # b shifts every logit of a row alike: its gradient is rounding noise that Adam's
    # normalisation turns into +-lr steps, so b is left out of the compared values
    res["sim"] = model.similarity_matrix(embeds.detach()) - model.similarity_bias
    res["w"] = model.similarity_weight
    res["b_grad_is_noise"] = [bool(model.similarity_bias.grad.abs() < 1e-6)]
    res["grads"] = [p.grad for n, p in model.named_parameters() if n != "similarity_bias"]
    res["sim_grad_fn"] = [type(model.similarity_matrix(embeds).grad_fn).__name__]
    return res


def xvector_specaug_program(torch):
    """Log-mel features from torch.stft (hann window, reflect centre padding, power, a NumPy mel
    matrix, log(x + 1e-6), per-utterance CMVN), SpecAugment as wenet writes it (clone().detach()
    then slice assignments of 0 at NumPy-chosen spans) and as speechbrain writes it (arange
    compared with start/length, any over masks, masked_fill_ with the mean), and an x-vector of
    cvqluu-style TDNN layers (F.unfold over (context, feat) windows with dilation, Linear,
    ReLU, BatchNorm1d through transposes) with mean+std statistics pooling; Adam, a StepLR."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2814)
    n_fft, hop, n_mels = 32, 8, 6

    wave = normal(torch, rng, 4, 200) * 0.3
    window = torch.hann_window(n_fft)
    spec = torch.stft(wave, n_fft, hop_length=hop, win_length=n_fft, window=window,
                      center=True, pad_mode="reflect", normalized=False, onesided=True,
                      return_complex=True)
    power = spec.abs().pow(2.0)
    mel_fb = torch.from_numpy(np.abs(rng.standard_normal((n_fft // 2 + 1, n_mels))
                                     ).astype(np.float32))
    mel = torch.matmul(power.transpose(1, 2), mel_fb)
    feats = torch.log(mel + 1e-6)
    feats = feats - feats.mean(dim=1, keepdim=True)
    res = {"feats": feats, "stft_shape": list(spec.shape),
           "stft_dtype": [str(spec.dtype).rsplit(".", 1)[-1]]}

    # wenet.dataset.processor.spec_aug on each utterance
    augmented = []
    for x in feats:
        y = x.clone().detach()
        max_frames, max_freq = y.size(0), y.size(1)
        for _ in range(2):
            start = int(rng.integers(0, max_frames))
            length = int(rng.integers(1, 5))
            end = min(max_frames, start + length)
            y[start:end, :] = 0
        for _ in range(1):
            start = int(rng.integers(0, max_freq))
            length = int(rng.integers(1, 3))
            end = min(max_freq, start + length)
            y[:, start:end] = 0
        augmented.append(y)
    batch = torch.stack(augmented)
    res["wenet_zeros"] = [int((batch == 0).sum())]

    # speechbrain SpectrogramDrop along time (dim=1), replaced by the batch mean
    mask_len = torch.from_numpy(rng.integers(1, 4, size=(4, 2, 1)))
    mask_pos = torch.from_numpy(rng.integers(0, batch.shape[1] - 3, size=(4, 2, 1)))
    arange = torch.arange(batch.shape[1]).view(1, 1, -1)
    mask = (mask_pos <= arange) * (arange < (mask_pos + mask_len))
    mask = mask.any(dim=1).unsqueeze(2)
    batch = batch.clone()
    batch.masked_fill_(mask, batch.mean())
    res["specaug"] = batch

    class TDNN(nn.Module):
        def __init__(self, input_dim, output_dim, context_size, dilation):
            super().__init__()
            self.context_size, self.dilation, self.input_dim = context_size, dilation, input_dim
            self.kernel = nn.Linear(input_dim * context_size, output_dim)
            self.nonlinearity = nn.ReLU()
            self.bn = nn.BatchNorm1d(output_dim)

        def forward(self, x):
            _, _, d = x.shape
            assert d == self.input_dim, (
                f"Input dimension was wrong. Expected ({self.input_dim}), got ({d})")
            x = x.unsqueeze(1)
            x = F.unfold(x, (self.context_size, self.input_dim), stride=(1, self.input_dim),
                         dilation=(self.dilation, 1))
            x = x.transpose(1, 2)
            x = self.kernel(x)
            x = self.nonlinearity(x)
            x = x.transpose(1, 2)
            x = self.bn(x)
            return x.transpose(1, 2)

    class XVector(nn.Module):
        def __init__(self, n_spk):
            super().__init__()
            self.frames = nn.Sequential(TDNN(n_mels, 8, 5, 1), TDNN(8, 8, 3, 2),
                                        TDNN(8, 8, 3, 3), TDNN(8, 12, 1, 1))
            self.segment6 = nn.Linear(24, 6)
            self.segment7 = nn.Linear(6, 6)
            self.output = nn.Linear(6, n_spk)

        def forward(self, x):
            x = self.frames(x)
            stats = torch.cat((x.mean(dim=1), x.std(dim=1)), dim=1)
            xvec = self.segment6(stats)
            return self.output(F.relu(self.segment7(F.relu(xvec)))), xvec

    model = XVector(3)
    fill_(torch, [p for n, p in model.named_parameters() if ".bn." not in n], rng, 0.4)
    labels = torch.tensor([0, 1, 2, 1])
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    res["losses"], res["lr"] = [], []
    for _ in range(3):
        logits, xvec = model(batch)
        loss = F.cross_entropy(logits, labels, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
        res["lr"].append(sched.get_last_lr()[0])
    res["xvec"] = xvec
    res["grads"] = [p.grad for p in model.parameters()]
    try:
        model.frames[1](batch)
    except AssertionError as err:
        res["dim_error"] = [str(err)]
    return res


def margin_heads_scoring_program(torch):
    """The other margin heads of the speaker repositories and the back-end scoring: SphereFace
    (Chebyshev cos(m theta) on cos_theta, k from acos of .data floored, lambda annealing, rows
    scaled by the feature norms), CosFace with label smoothing, AdaCos (dynamic scale from
    exp-sums and the median theta of the targets under no_grad), sub-center ArcFace (max over
    K sub-centres), trained together for a few Adam steps; then EER and minDCF by threshold
    sweeps on sorted scores, searchsorted, and adaptive s-norm with topk cohorts."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2815)
    n_spk, dim = 5, 4

    def sphereface(x, W, label, it):
        cos_theta = F.linear(F.normalize(x), F.normalize(W)).clamp(-1, 1)
        cos_m_theta = 8 * cos_theta ** 4 - 8 * cos_theta ** 2 + 1
        theta = cos_theta.data.acos()
        k = (4 * theta / 3.14159265).floor()
        phi_theta = ((-1.0) ** k) * cos_m_theta - 2 * k
        norm_of_feature = torch.norm(x, 2, 1)
        one_hot = torch.zeros(cos_theta.size())
        one_hot.scatter_(1, label.view(-1, 1), 1)
        lamb = max(5.0, 1000.0 * (1 + 0.12 * it) ** -1)
        output = (one_hot * (phi_theta - cos_theta) / (1 + lamb)) + cos_theta
        output *= norm_of_feature.view(-1, 1)
        return output

    def cosface(x, W, label):
        cosine = F.linear(F.normalize(x), F.normalize(W))
        phi = cosine - 0.35
        one_hot = torch.zeros(cosine.size(), device=x.device)
        one_hot.scatter_(1, label.view(-1, 1).long(), 1)
        return ((one_hot * phi) + ((1.0 - one_hot) * cosine)) * 30

    def adacos(x, W, label, s):
        logits = F.linear(F.normalize(x), F.normalize(W))
        theta = torch.acos(torch.clamp(logits, -1.0 + 1e-7, 1.0 - 1e-7))
        one_hot = torch.zeros_like(logits)
        one_hot.scatter_(1, label.view(-1, 1).long(), 1)
        with torch.no_grad():
            B_avg = torch.where(one_hot < 1, torch.exp(s * logits), torch.zeros_like(logits))
            B_avg = torch.sum(B_avg) / x.size(0)
            theta_med = torch.median(theta[one_hot == 1])
            s = torch.log(B_avg) / torch.cos(torch.min(math.pi / 4 * torch.ones_like(theta_med),
                                                       theta_med))
        return s * logits, s

    def subcenter(x, W, K=3):
        cosine = F.linear(F.normalize(x), F.normalize(W))
        cosine = torch.reshape(cosine, (-1, n_spk, K))
        cosine, _ = torch.max(cosine, 2)
        return cosine * 16

    embed = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, dim))
    heads = nn.ParameterDict({name: nn.Parameter(torch.empty(rows, dim)) for name, rows in
                              [("sphere", n_spk), ("cos", n_spk), ("ada", n_spk),
                               ("sub", 3 * n_spk)]})
    fill_(torch, embed, rng, 0.5)
    fill_(torch, heads, rng, 0.5)
    feats = normal(torch, rng, 10, 6)
    label = torch.from_numpy(rng.integers(0, n_spk, size=(10,)))
    opt = torch.optim.Adam(list(embed.parameters()) + list(heads.parameters()), lr=5e-3)
    ce = nn.CrossEntropyLoss(label_smoothing=0.1)
    res = {"losses": [], "ada_s": []}
    s = math.sqrt(2) * math.log(n_spk - 1)
    for it in range(3):
        x = embed(feats)
        ada_out, s = adacos(x, heads["ada"], label, s)
        parts = [F.cross_entropy(sphereface(x, heads["sphere"], label, it), label),
                 ce(cosface(x, heads["cos"], label), label),
                 F.cross_entropy(ada_out, label),
                 F.cross_entropy(subcenter(x, heads["sub"]), label)]
        loss = sum(parts)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append([p.item() for p in parts])
        res["ada_s"].append(float(s))
    res["grads"] = [p.grad for p in embed.parameters()] + [heads[k].grad for k in heads]

    # back-end: cosine scores of trials, EER / minDCF by a threshold sweep, AS-norm
    with torch.no_grad():
        e = F.normalize(embed(normal(torch, rng, 12, 6)), dim=-1)
        cohort = F.normalize(embed(normal(torch, rng, 20, 6)), dim=-1)
    enrol, test = e[:6], e[6:]
    scores = (enrol * test).sum(-1)
    scores = torch.cat([scores, (enrol * test.roll(1, 0)).sum(-1)])
    lab = torch.cat([torch.ones(6, dtype=torch.bool), torch.zeros(6, dtype=torch.bool)])
    thr = torch.sort(scores).values
    far = ((scores[None, :] >= thr[:, None]) & ~lab[None, :]).sum(1).float() / (~lab).sum()
    frr = ((scores[None, :] < thr[:, None]) & lab[None, :]).sum(1).float() / lab.sum()
    i = torch.argmin(torch.abs(far - frr))
    res["eer"] = [float((far[i] + frr[i]) / 2)]
    res["min_dcf"] = torch.min(0.01 * frr + 0.99 * far)
    res["bins"] = torch.searchsorted(thr, torch.tensor([0.0, 0.5])).tolist()
    top_e = torch.topk(torch.cat([enrol, enrol]) @ cohort.T, 5, dim=1).values
    top_t = torch.topk(torch.cat([test, test.roll(1, 0)]) @ cohort.T, 5, dim=1).values
    res["asnorm"] = (0.5 * (scores - top_e.mean(1)) / top_e.std(1)
                     + 0.5 * (scores - top_t.mean(1)) / top_t.std(1))
    return res


PROGRAMS = [ecapa_aam_program, arcmargin_program, ge2e_program, xvector_specaug_program,
            margin_heads_scoring_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 conv/LSTM accumulation order over a few Adam steps; scale-30 AAM logits
        "ecapa_aam_program": (1e-4, 1e-5),
        # scale-32 margins and SGD at lr 0.05: first-step losses agree to 1e-7 relative
        "arcmargin_program": (1e-4, 1e-5),
        "ge2e_program": (1e-4, 1e-5),
        "xvector_specaug_program": (1e-4, 1e-5),
        "margin_heads_scoring_program": (1e-4, 1e-5),
    })
