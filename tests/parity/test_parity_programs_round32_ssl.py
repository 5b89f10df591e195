"""Speech self-supervision and decoding written as the reference repositories write them in
torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy weights:
HuBERT masked prediction (span masks from index arithmetic, cluster targets, cosine logits
over codewords with a temperature, loss on masked frames), wav2vec 2.0's Gumbel vector
quantizer with its diversity loss, data2vec's EMA teacher with instance-normed layer-average
targets, and CTC greedy / prefix beam search with LM shallow fusion after SpecAugment time
warping."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _span_mask(torch, B, T, starts, span):
    # fairseq's compute_mask_indices, the index arithmetic done on tensors
    idx = starts.unsqueeze(-1) + torch.arange(span).view(1, 1, -1)
    idx = idx.clamp(max=T - 1).reshape(B, -1)
    mask = torch.zeros(B, T, dtype=torch.bool)
    mask.scatter_(1, idx, True)
    return mask


def hubert_program(torch):
    """HuBERT: conv feature extractor, span masking with a learned mask embedding, a small
    transformer, projection, cosine similarity logits against label embeddings / 0.1."""
    rng = np.random.default_rng(320)
    nn, F = torch.nn, torch.nn.functional
    B, L, C, K, D = 2, 160, 8, 6, 16
    feat = nn.Sequential(nn.Conv1d(1, C, 10, stride=5), nn.GroupNorm(C, C), nn.GELU(),
                         nn.Conv1d(C, C, 3, stride=2), nn.GELU())
    post = nn.Linear(C, D)
    layer = nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0, batch_first=True,
                                       norm_first=True, activation="gelu")
    enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
    final_proj = nn.Linear(D, 12)
    label_embs = nn.Parameter(torch.empty(K, 12))
    mask_emb = nn.Parameter(torch.empty(D).uniform_())
    mods = nn.ModuleList([feat, post, enc, final_proj])
    fill_(torch, mods, rng, 0.3)
    fill_(torch, [label_embs, mask_emb], rng, 1.0)
    wav = normal(torch, rng, B, 1, L)
    params = list(mods.parameters()) + [label_embs, mask_emb]
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)
    res = {}
    for step in range(2):
        x = feat(wav).transpose(1, 2)
        T = x.shape[1]
        x = F.layer_norm(x, (C,))
        x = post(x)
        starts = torch.from_numpy(rng.integers(0, T - 3, size=(B, 2)).astype(np.int64))
        mask = _span_mask(torch, B, T, starts, 3)
        x = x.clone()
        x[mask] = mask_emb.to(x.dtype)
        y = enc(x)
        targets = torch.from_numpy(rng.integers(0, K, size=(B, T)).astype(np.int64))
        proj = final_proj(y[mask])
        logits = torch.cosine_similarity(proj.float().unsqueeze(1), label_embs.unsqueeze(0),
                                         dim=-1) / 0.1
        loss_m = F.cross_entropy(logits, targets[mask], reduction="sum")
        proj_u = final_proj(y[~mask])
        lu = F.cosine_similarity(proj_u.unsqueeze(1), label_embs.unsqueeze(0), dim=-1) / 0.1
        loss_u = F.cross_entropy(lu, targets[~mask], reduction="sum")
        loss = (loss_m + 0.0 * loss_u) / mask.sum()
        feat_pen = x.float().pow(2).mean()
        total = loss + 10 * feat_pen
        opt.zero_grad()
        total.backward()
        res[f"loss{step}"] = total.detach()
        res[f"acc{step}"] = (logits.argmax(-1) == targets[mask]).float().mean()
        res[f"n_masked{step}"] = int(mask.sum())
        res[f"g_emb{step}"] = label_embs.grad.clone()
        res[f"g_mask{step}"] = mask_emb.grad.clone()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
    res["conv0"] = feat[0].weight.detach()
    res["T"] = T
    return res


def gumbel_vq_program(torch):
    """wav2vec 2.0 GumbelVectorQuantizer: grouped codebooks, hard Gumbel straight-through with
    fixed noise, soft perplexity from averaged probs, diversity loss, contrastive loss with
    sampled negatives and cosine logits / kappa."""
    rng = np.random.default_rng(321)
    nn, F = torch.nn, torch.nn.functional
    B, T, Din, G, V, Dv = 2, 7, 10, 2, 5, 8
    weight_proj = nn.Linear(Din, G * V)
    codevectors = nn.Parameter(torch.empty(1, G * V, Dv // G))
    project_q = nn.Linear(Dv, 6)
    ctx = nn.Linear(Din, 6)
    fill_(torch, nn.ModuleList([weight_proj, project_q, ctx]), rng, 0.4)
    fill_(torch, [codevectors], rng, 1.0)
    params = [*weight_proj.parameters(), codevectors, *project_q.parameters(),
              *ctx.parameters()]
    opt = torch.optim.Adam(params, lr=2e-3, betas=(0.9, 0.98), eps=1e-6)
    x = normal(torch, rng, B, T, Din)
    res = {}
    tau = 2.0
    for step in range(3):
        h = weight_proj(x).view(B * T * G, -1)
        u = torch.from_numpy(rng.uniform(1e-6, 1 - 1e-6, size=h.shape).astype(np.float32))
        gumbels = -torch.log(-torch.log(u))
        y_soft = ((h + gumbels) / tau).softmax(-1)
        index = y_soft.max(-1, keepdim=True)[1]
        y_hard = torch.zeros_like(h).scatter_(-1, index, 1.0)
        hard_x = y_hard - y_soft.detach() + y_soft
        hard_probs = torch.mean(y_hard.view(B * T, G, -1).float(), dim=0)
        code_ppl = torch.exp(-torch.sum(hard_probs * torch.log(hard_probs + 1e-7), dim=-1)).sum()
        avg_probs = torch.softmax(h.view(B * T, G, -1).float(), dim=-1).mean(dim=0)
        prob_ppl = torch.exp(-torch.sum(avg_probs * torch.log(avg_probs + 1e-7), dim=-1)).sum()
        div_loss = (G * V - prob_ppl) / (G * V)
        q = hard_x.view(B * T, -1, 1) * codevectors
        q = q.view(B * T, G, V, -1).sum(-2).view(B, T, -1)
        q = project_q(q)
        c = ctx(x)
        neg_idx = torch.from_numpy(rng.integers(0, T - 1, size=(B, T, 3)).astype(np.int64))
        tszs = torch.arange(T).view(1, T, 1).expand(B, T, 3)
        neg_idx = torch.where(neg_idx >= tszs, neg_idx + 1, neg_idx)
        negs = q[torch.arange(B).view(B, 1, 1), neg_idx]
        targets = torch.cat([q.unsqueeze(2), negs], dim=2)
        logits = torch.cosine_similarity(c.unsqueeze(2), targets, dim=-1) / 0.1
        neg_is_pos = (q.unsqueeze(2) == negs).all(-1)
        logits[..., 1:][neg_is_pos] = float("-inf")
        lp = F.cross_entropy(logits.reshape(-1, 4), torch.zeros(B * T, dtype=torch.long),
                             reduction="sum")
        loss = lp + 0.1 * div_loss * B * T
        opt.zero_grad()
        loss.backward()
        res[f"loss{step}"] = loss.detach()
        res[f"code_ppl{step}"] = code_ppl
        res[f"prob_ppl{step}"] = prob_ppl.detach()
        res[f"codes{step}"] = index.view(B, T, G)
        res[f"g_cb{step}"] = codevectors.grad.clone()
        opt.step()
        tau = max(tau * 0.999995 ** 1000, 0.5)
    res["cb"] = codevectors.detach()
    res["gumbel_fn_shape"] = tuple(F.gumbel_softmax(h, tau=1.0, hard=True).shape)
    return res


def data2vec_program(torch):
    """data2vec: a student and an EMA teacher (deepcopy, requires_grad_(False)), forward hooks
    collect the top-k FFN outputs, instance_norm over time per layer, averaged, a final
    layer_norm-free target, smooth L1 regression on masked steps; EMA with annealed decay."""
    import copy
    rng = np.random.default_rng(322)
    nn, F = torch.nn, torch.nn.functional
    B, T, D, L, topk = 2, 9, 12, 3, 2

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.attn = nn.MultiheadAttention(D, 2, batch_first=True)
            self.ffn = nn.Sequential(nn.Linear(D, 24), nn.GELU(), nn.Linear(24, D))

        def forward(self, x, pad):
            h = self.ln1(x)
            x = x + self.attn(h, h, h, key_padding_mask=pad, need_weights=False)[0]
            r = self.ffn(self.ln2(x))
            return x + r, r

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.mask_emb = nn.Parameter(torch.zeros(D))
            self.register_buffer("pos", torch.linspace(-1, 1, T).unsqueeze(-1))

        def forward(self, x, pad, mask=None):
            if mask is not None:
                x = torch.where(mask.unsqueeze(-1), self.mask_emb.expand_as(x), x)
            x = x + self.pos
            layers = []
            for blk in self.blocks:
                x, r = blk(x, pad)
                layers.append(r)
            return x, layers

    student = Encoder()
    fill_(torch, student, rng, 0.3)
    teacher = copy.deepcopy(student)
    teacher.requires_grad_(False)
    head = nn.Linear(D, D)
    fill_(torch, head, rng, 0.3)
    params = list(student.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=5e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-3, total_steps=10)
    x = normal(torch, rng, B, T, D)
    lengths = torch.tensor([T, T - 2])
    pad = torch.arange(T).unsqueeze(0) >= lengths.unsqueeze(1)
    res = {}
    ema_start, ema_end, n_anneal = 0.9, 0.99, 4
    for step in range(3):
        mask = torch.from_numpy(rng.random((B, T)) < 0.5) & ~pad
        mask[:, 0] = True
        with torch.no_grad():
            teacher.eval()
            _, layers = teacher(x, pad)
            y = layers[-topk:]
            y = [F.instance_norm(t.transpose(1, 2).float()).transpose(1, 2) for t in y]
            y = sum(y) / len(y)
            y = y[mask]
        out, _ = student(x, pad, mask)
        pred = head(out[mask])
        loss = F.smooth_l1_loss(pred.float(), y, reduction="none", beta=0.25).sum(-1)
        scale = 1 / math.sqrt(pred.size(-1))
        loss = loss.sum() * scale
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(params, 5.0)
        opt.step()
        sched.step()
        decay = ema_end - (ema_end - ema_start) * (1 - step / n_anneal)
        with torch.no_grad():
            for pt, ps in zip(teacher.parameters(), student.parameters()):
                pt.mul_(decay).add_(ps.detach(), alpha=1 - decay)
            student.pos.mul_(0.5)
            torch._foreach_lerp_(list(teacher.buffers()), list(student.buffers()), 1 - decay)
        res[f"loss{step}"] = loss.detach()
        res[f"gn{step}"] = gn
        res[f"lr{step}"] = sched.get_last_lr()[0]
        res[f"target_var{step}"] = y.var(0, unbiased=False).mean()
    res["teacher_ffn"] = teacher.blocks[0].ffn[0].weight.clone()
    res["student_ffn"] = student.blocks[0].ffn[0].weight.detach()
    res["teacher_grad"] = [p.requires_grad for p in teacher.parameters()][:3]
    return res


def _time_warp(torch, spec, center, warped):
    # SpecAugment time warping (the interpolate form used by many ASR repos)
    F = torch.nn.functional
    left = F.interpolate(spec[:, :, :, :center], size=(spec.shape[2], warped), mode="bicubic",
                         align_corners=False)
    right = F.interpolate(spec[:, :, :, center:], size=(spec.shape[2], spec.shape[3] - warped),
                          mode="bicubic", align_corners=False)
    return torch.cat([left, right], dim=-1)


def _prefix_beam(torch, log_probs, beam, lm, alpha, beta, blank=0):
    """CTC prefix beam search with bigram LM shallow fusion, scores kept in log space."""
    T, V = log_probs.shape
    neg = float("-inf")
    beams = {(): (0.0, neg)}  # prefix -> (log p_blank, log p_nonblank)

    def lse(*xs):
        return torch.logsumexp(torch.tensor(xs, dtype=torch.float64), 0).item()
    for t in range(T):
        lp = log_probs[t]
        topv, topi = lp.topk(min(3, V))
        nxt = {}
        for prefix, (pb, pnb) in beams.items():
            for v, s in zip(topv.tolist(), topi.tolist()):
                if s == blank:
                    b, nb = nxt.get(prefix, (neg, neg))
                    nxt[prefix] = (lse(b, pb + v, pnb + v), nb)
                    continue
                last = prefix[-1] if prefix else None
                new = prefix + (s,)
                lm_s = alpha * lm[last if last is not None else blank, s].item() + beta
                b, nb = nxt.get(new, (neg, neg))
                if s == last:
                    nxt[new] = (b, lse(nb, pb + v + lm_s))
                    b2, nb2 = nxt.get(prefix, (neg, neg))
                    nxt[prefix] = (b2, lse(nb2, pnb + v))
                else:
                    nxt[new] = (b, lse(nb, pb + v + lm_s, pnb + v + lm_s))
        beams = dict(sorted(nxt.items(), key=lambda kv: -lse(*kv[1]))[:beam])
    best = max(beams.items(), key=lambda kv: lse(*kv[1]))
    return list(best[0]), round(lse(*best[1]), 4)


def ctc_decode_program(torch):
    """An ASR head trained with CTC for two steps after SpecAugment time warping and masking,
    then greedy decoding (argmax, unique_consecutive, drop blanks) and prefix beam search with
    a log-softmaxed bigram LM (shallow fusion)."""
    rng = np.random.default_rng(323)
    nn, F = torch.nn, torch.nn.functional
    B, Fq, T, V = 2, 8, 20, 5
    spec = normal(torch, rng, B, 1, Fq, T).abs().log1p()
    warped = _time_warp(torch, spec, 9, 11)
    fmask = torch.ones_like(warped)
    fmask[:, :, 2:4, :] = 0
    fmask[1, :, :, 5:8] = 0
    x = (warped * fmask).squeeze(1).transpose(1, 2)
    model = nn.Sequential(nn.Linear(Fq, 16), nn.ReLU(), nn.Linear(16, V))
    rnn = nn.GRU(16, 8, batch_first=True, bidirectional=True)
    out_lin = nn.Linear(16, V)
    fill_(torch, nn.ModuleList([model, rnn, out_lin]), rng, 0.5)
    targets = torch.tensor([[1, 2, 2, 3], [4, 1, 3, 0]])
    tgt_len = torch.tensor([4, 3])
    in_len = torch.tensor([T, T - 3])
    params = [*model.parameters(), *rnn.parameters(), *out_lin.parameters()]
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True)
    res = {"warped": warped}
    ctc = nn.CTCLoss(blank=0, zero_infinity=True)
    for step in range(2):
        h = F.relu(model[0](x))
        packed = nn.utils.rnn.pack_padded_sequence(h, in_len, batch_first=True,
                                                   enforce_sorted=True)
        o, _ = rnn(packed)
        o, lens = nn.utils.rnn.pad_packed_sequence(o, batch_first=True, total_length=T)
        logits = out_lin(o) + model(x)
        lp = logits.log_softmax(-1)
        loss = ctc(lp.transpose(0, 1), targets, in_len, tgt_len)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res[f"loss{step}"] = loss.detach()
    res["lens"] = lens
    with torch.inference_mode():
        lp = out_lin(rnn(F.relu(model[0](x)))[0]).log_softmax(-1) + 0
        best = lp.argmax(-1)
        greedy = []
        for b in range(B):
            seq = torch.unique_consecutive(best[b, : in_len[b]])
            greedy.append(seq[seq != 0].tolist())
        res["greedy0"], res["greedy1"] = greedy
        lm = torch.from_numpy(rng.standard_normal((V, V)).astype(np.float32)).log_softmax(-1)
        for b in range(B):
            res[f"beam{b}"], res[f"beam_score{b}"] = _prefix_beam(
                torch, lp[b, : in_len[b]], 3, lm, 0.5, 0.2)
        res["nbest_scores"] = lp.max(-1).values.sum(-1)
        res["is_inference"] = lp.is_inference()
    return res


PROGRAMS = [hubert_program, gumbel_vq_program, data2vec_program, ctc_decode_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
