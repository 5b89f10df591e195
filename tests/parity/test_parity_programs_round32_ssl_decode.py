"""Speech self-supervision and decoding, third part, run with `torch` bound to ember and to
PyTorch from the same NumPy data: HuBERT's k-means cluster targets and codeword usage
(cdist/argmin, bincount, index_put_ with accumulate, histc, repeat_interleave, searchsorted),
a batched CTC/attention beam search with an LSTM LM (proj_size) fused shallowly (topk over
flattened beams, floor division, gather), a data2vec-style EMA through swa_utils.AveragedModel
with the new weight_norm parametrization and an eval-mode TransformerEncoder fast path with a
padding mask, and framing/augmentation corners (Tensor.unfold, reflect padding, antialiased
interpolation, multinomial negatives under manual_seed)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def kmeans_targets_program(torch):
    """HuBERT iteration-1 targets: MFCC-like features clustered by a few Lloyd steps, labels
    from cdist argmin, counts via bincount / index_put_ accumulate / histc, span starts via
    searchsorted on cumulative lengths, per-utterance labels by repeat_interleave."""
    rng = np.random.default_rng(340)
    N, D, K = 40, 3, 4
    feats = normal(torch, rng, N, D)
    feats[:10] += 3
    centroids = feats[torch.tensor([0, 12, 25, 39])].clone()
    res = {}
    for it in range(3):
        d = torch.cdist(feats, centroids, p=2.0)
        labels = d.argmin(-1)
        counts = torch.bincount(labels, minlength=K)
        sums = torch.zeros(K, D).index_add_(0, labels, feats)
        centroids = torch.where(counts.unsqueeze(-1) > 0,
                                sums / counts.clamp(min=1).unsqueeze(-1).float(), centroids)
        res[f"inertia{it}"] = d.gather(1, labels.unsqueeze(1)).pow(2).sum()
    res["labels"] = labels
    acc = torch.zeros(K, dtype=torch.long)
    acc.index_put_((labels,), torch.ones_like(labels), accumulate=True)
    res["acc"] = acc
    res["hist"] = torch.histc(labels.float(), bins=K, min=0, max=K - 1)
    probs = counts.float() / counts.sum()
    res["ppl"] = torch.exp(-(probs * torch.log(probs.clamp(min=1e-10))).sum())
    lengths = torch.tensor([12, 15, 13])
    cum = lengths.cumsum(0)
    res["utt_of_frame"] = torch.searchsorted(cum, torch.arange(N), right=True)
    res["utt_ids"] = torch.repeat_interleave(torch.arange(3), lengths)
    res["split"] = [t.sum() for t in labels.split(lengths.tolist())]
    res["cdist_mm"] = torch.cdist(feats, centroids, compute_mode="use_mm_for_euclid_dist")
    res["cdist_p1"] = torch.cdist(feats[:5], centroids, p=1)
    return res


def fused_beam_program(torch):
    """Batched attention/CTC-style beam search with an LSTM LM (proj_size) in shallow fusion:
    scores (B*beam, V) flattened to (B, beam*V), topk, floor-divided beam index, gather of
    hidden states, EOS masking with masked_fill, and pad_sequence of the finished hypotheses."""
    rng = np.random.default_rng(341)
    nn, F = torch.nn, torch.nn.functional
    B, beam, V, H, steps, eos = 2, 3, 7, 6, 4, 1
    emb = nn.Embedding(V, 5)
    lm = nn.LSTM(5, H, num_layers=2, proj_size=4, batch_first=True)
    lm_out = nn.Linear(4, V)
    am = nn.Linear(3, V)
    fill_(torch, nn.ModuleList([emb, lm, lm_out, am]), rng, 0.6)
    enc = normal(torch, rng, B, steps, 3)
    res = {"shapes": [str(tuple(p.shape)) for p in lm.parameters()]}
    with torch.no_grad():
        tokens = torch.zeros(B * beam, 1, dtype=torch.long)
        scores = torch.zeros(B, beam)
        scores[:, 1:] = float("-inf")
        hx = None
        finished = torch.zeros(B * beam, dtype=torch.bool)
        for t in range(steps):
            out, hx = lm(emb(tokens[:, -1:]), hx)
            lm_lp = F.log_softmax(lm_out(out[:, -1]), dim=-1)
            am_lp = am(enc[:, t]).log_softmax(-1).repeat_interleave(beam, dim=0)
            step_lp = am_lp + 0.3 * lm_lp
            step_lp = step_lp.masked_fill(finished.unsqueeze(-1), float("-inf"))
            step_lp[:, eos] = torch.where(finished, 0.0, step_lp[:, eos])
            cand = (scores.view(-1, 1) + step_lp).view(B, beam * V)
            top_s, top_i = cand.topk(beam, dim=-1)
            beam_idx = torch.div(top_i, V, rounding_mode="floor")
            tok = top_i % V
            flat = (beam_idx + torch.arange(B).unsqueeze(1) * beam).view(-1)
            tokens = torch.cat([tokens[flat], tok.view(-1, 1)], dim=1)
            hx = tuple(h.index_select(1, flat) for h in hx)
            finished = finished[flat] | (tok.view(-1) == eos)
            scores = top_s
            res[f"scores{t}"] = scores.clone()
        lengths = (tokens != eos).long().cumprod(1).sum(1)
        hyps = [tokens[i, 1: lengths[i]] for i in range(B * beam)]
        res["tokens"] = tokens
        res["padded"] = nn.utils.rnn.pad_sequence(hyps, batch_first=True, padding_value=-1)
        res["padded_left"] = nn.utils.rnn.pad_sequence(hyps, batch_first=True,
                                                       padding_value=-1, padding_side="left")
        norm = scores / (lengths.view(B, beam).float() ** 0.6)
        res["best"] = norm.argmax(-1)
    return res


def ema_teacher_program(torch):
    """data2vec/BYOL-style EMA through swa_utils.AveragedModel(get_ema_multi_avg_fn) over a
    model with the new weight_norm parametrization (dim=2), buffers averaged too, and the
    teacher run in eval with a key-padding mask through TransformerEncoder's fast path."""
    rng = np.random.default_rng(342)
    nn, F = torch.nn, torch.nn.functional
    parametrizations, parametrize = nn.utils.parametrizations, nn.utils.parametrize
    swa = torch.optim.swa_utils
    AveragedModel, get_ema_multi_avg_fn = swa.AveragedModel, swa.get_ema_multi_avg_fn
    D, T = 8, 6

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.pos = parametrizations.weight_norm(nn.Conv1d(D, D, 3, padding=1, groups=2),
                                                    name="weight", dim=2)
            layer = nn.TransformerEncoderLayer(D, 2, 16, dropout=0.0, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=True)
            self.bn = nn.BatchNorm1d(D)

        def forward(self, x, pad):
            x = x + F.gelu(self.pos(x.transpose(1, 2))).transpose(1, 2)
            x = self.bn(x.transpose(1, 2)).transpose(1, 2)
            return self.enc(x, src_key_padding_mask=pad)

    student = Net()
    fill_(torch, student, rng, 0.3)
    teacher = AveragedModel(student, multi_avg_fn=get_ema_multi_avg_fn(0.9), use_buffers=True)
    opt = torch.optim.SGD(student.parameters(), lr=0.05)
    x = normal(torch, rng, 2, T, D)
    pad = torch.tensor([[False] * T, [False] * (T - 2) + [True] * 2])
    res = {"names": sorted(n for n, _ in student.named_parameters())}
    for step in range(3):
        student.train()
        out = student(x, pad)
        with torch.no_grad():
            teacher.eval()
            tgt = teacher(x, pad)
        loss = F.mse_loss(out[~pad], tgt[~pad])
        opt.zero_grad()
        loss.backward()
        opt.step()
        teacher.update_parameters(student)
        res[f"loss{step}"] = loss.detach()
        res[f"tgt{step}"] = tgt[~pad]
        res[f"tgt_pad_is_zero{step}"] = bool((tgt[pad] == 0).all())
    res["n_averaged"] = teacher.n_averaged
    res["t_g"] = teacher.module.pos.parametrizations.weight.original0.detach()
    res["t_bn_mean"] = teacher.module.bn.running_mean
    res["t_bn_count"] = teacher.module.bn.num_batches_tracked
    parametrize.remove_parametrizations(student.pos, "weight")
    res["after"] = sorted(n for n, _ in student.pos.named_parameters())
    return res


def framing_program(torch):
    """Waveform framing and augmentation: reflect-padded Tensor.unfold frames times a Hann
    window, antialiased bilinear resize of a spectrogram, linear 1-D interpolation speed
    perturbation, and multinomial negative sampling checked for shape/range/reproducibility."""
    rng = np.random.default_rng(343)
    F = torch.nn.functional
    wav = normal(torch, rng, 2, 1, 40)
    padded = F.pad(wav, (4, 4), mode="reflect")
    frames = padded.squeeze(1).unfold(-1, 8, 4) * torch.hann_window(8, periodic=False)
    power = frames.pow(2).mean(-1).clamp(min=1e-10).log10()
    res = {"frames": frames, "power": power}
    spec = normal(torch, rng, 2, 1, 12, 20).abs()
    res["aa"] = F.interpolate(spec, size=(6, 13), mode="bilinear", antialias=True,
                              align_corners=False)
    res["aa_bicubic"] = F.interpolate(spec, scale_factor=0.5, mode="bicubic", antialias=True)
    res["speed"] = F.interpolate(wav, scale_factor=1.1, mode="linear", align_corners=False,
                                 recompute_scale_factor=True)
    res["speed_nearest_exact"] = F.interpolate(wav, size=33, mode="nearest-exact")
    weights = torch.ones(2, 10)
    weights[:, 3] = 0
    torch.manual_seed(7)
    n1 = torch.multinomial(weights, 5, replacement=False)
    torch.manual_seed(7)
    n2 = torch.multinomial(weights, 5, replacement=False)
    res["neg_same"] = bool(torch.equal(n1, n2))
    res["neg_shape"] = tuple(n1.shape)
    res["neg_no3"] = bool((n1 != 3).all())
    res["neg_unique"] = [len(set(r.tolist())) for r in n1]
    return res


def unit_ctc_program(torch):
    """Discrete-unit ASR: HuBERT units deduplicated with unique_consecutive become CTC targets
    (unit 0, silence, doubles as the blank; see _fixes for a target ending in it), concatenated 1-D
    targets, per-utterance losses, a few Adam steps; then an eval MultiheadAttention over a
    fully padded utterance (NaN rows) and an eval TransformerEncoder fast path beside it."""
    rng = np.random.default_rng(344)
    nn, F = torch.nn, torch.nn.functional
    B, T, D, V = 3, 9, 6, 5
    units = torch.from_numpy(rng.integers(0, V, size=(B, 12)).astype(np.int64))
    units[0] = torch.tensor([3, 3, 0, 0, 1, 1, 1, 4, 4, 0, 0, 0])
    dedup = [torch.unique_consecutive(u) for u in units]
    tl = torch.tensor([min(len(d), 4) for d in dedup])
    targets = torch.cat([d[:n] for d, n in zip(dedup, tl.tolist())])
    il = torch.tensor([T, T - 1, T - 3])
    x = normal(torch, rng, T, B, D)
    head = nn.Sequential(nn.Linear(D, 12), nn.SiLU(), nn.Linear(12, V))
    fill_(torch, head, rng, 0.5)
    opt = torch.optim.Adam(head.parameters(), lr=1e-2)
    res = {"targets": targets, "tl": tl}
    for step in range(3):
        lp = head(x).log_softmax(-1)
        lp.retain_grad()
        loss = F.ctc_loss(lp, targets, il, tl, reduction="none", zero_infinity=True)
        opt.zero_grad()
        (loss / tl).mean().backward()
        opt.step()
        res[f"loss{step}"] = loss.detach()
        res[f"glp{step}"] = lp.grad
    mha = nn.MultiheadAttention(D, 2, batch_first=True)
    fill_(torch, mha, rng, 0.4)
    kpm = torch.tensor([[False] * T, [False] * 4 + [True] * (T - 4), [True] * T])
    h = x.transpose(0, 1)
    out, w = mha(h, h, h, key_padding_mask=kpm, average_attn_weights=False)
    res["mha_nan_rows"] = torch.isnan(out).all(-1).any(-1)
    res["mha_ok"] = out[:2].detach()
    res["w"] = w[:2].detach()
    layer = nn.TransformerEncoderLayer(D, 2, 8, dropout=0.0, batch_first=True)
    enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=True)
    fill_(torch, enc, rng, 0.4)
    enc.eval()
    with torch.no_grad():
        res["enc"] = enc(h[:2], src_key_padding_mask=kpm[:2])
    return res


PROGRAMS = [kmeans_targets_program, fused_beam_program, ema_teacher_program, framing_program,
            unit_ctc_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
