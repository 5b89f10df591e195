"""Speech programs written as ESPnet / torchaudio / NVIDIA Tacotron 2 / fairseq wav2vec 2.0 write
them in torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy
weights and data: a Conformer block (macaron half-step FFNs, relative-position self-attention
with the pad-and-view rel_shift, a GLU / depthwise-conv / BatchNorm1d / SiLU convolution module,
masks from lengths), an RNN-T loss by hand (alpha recursion over the lattice with logsumexp)
beside a greedy transducer decode, Tacotron 2 (always-on prenet dropout from fixed masks,
location-sensitive attention, stop-token BCE, postnet residual) and wav2vec 2.0 pretraining
(span masking, a hard Gumbel quantizer with injected noise, diversity and contrastive losses)."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _make_pad_mask(torch, lengths, maxlen):
    """ESPnet's make_pad_mask: True at padded frames."""
    seq = torch.arange(0, maxlen, dtype=torch.int64)
    return seq.unsqueeze(0).expand(lengths.size(0), maxlen) >= lengths.unsqueeze(-1)


def conformer_program(torch):
    """One Conformer encoder layer (ESPnet style) trained for a few Adam steps on a masked
    CTC-free frame loss: macaron FFNs with 0.5 residual factor, RelPositionMultiHeadedAttention
    with pos_bias_u/v and rel_shift, the convolution module with a pad mask, a final LayerNorm."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2601)
    B, T, D, H, K = 2, 7, 8, 2, 5
    d_k = D // H

    class RelPositionalEncoding(nn.Module):
        def __init__(self, d_model, max_len=16):
            super().__init__()
            self.d_model = d_model
            self.xscale = math.sqrt(d_model)
            pos = torch.arange(0, max_len, dtype=torch.float32).unsqueeze(1)
            div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32)
                            * -(math.log(10000.0) / d_model))
            pe_pos = torch.zeros(max_len, d_model)
            pe_neg = torch.zeros(max_len, d_model)
            pe_pos[:, 0::2] = torch.sin(pos * div)
            pe_pos[:, 1::2] = torch.cos(pos * div)
            pe_neg[:, 0::2] = torch.sin(-1 * pos * div)
            pe_neg[:, 1::2] = torch.cos(-1 * pos * div)
            pe_pos = torch.flip(pe_pos, [0]).unsqueeze(0)
            pe_neg = pe_neg[1:].unsqueeze(0)
            self.register_buffer("pe", torch.cat([pe_pos, pe_neg], dim=1), persistent=False)

        def forward(self, x):
            x = x * self.xscale
            c = self.pe.size(1) // 2
            pos_emb = self.pe[:, c - x.size(1) + 1: c + x.size(1)]
            return x, pos_emb

    class RelMHA(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear_q, self.linear_k = nn.Linear(D, D), nn.Linear(D, D)
            self.linear_v, self.linear_out = nn.Linear(D, D), nn.Linear(D, D)
            self.linear_pos = nn.Linear(D, D, bias=False)
            self.pos_bias_u = nn.Parameter(torch.Tensor(H, d_k))
            self.pos_bias_v = nn.Parameter(torch.Tensor(H, d_k))
            torch.nn.init.xavier_uniform_(self.pos_bias_u)
            torch.nn.init.xavier_uniform_(self.pos_bias_v)

        @staticmethod
        def rel_shift(x):
            zero_pad = torch.zeros((*x.size()[:3], 1), device=x.device, dtype=x.dtype)
            x_padded = torch.cat([zero_pad, x], dim=-1)
            x_padded = x_padded.view(*x.size()[:2], x.size(3) + 1, x.size(2))
            return x_padded[:, :, 1:].view_as(x)[:, :, :, : x.size(-1) // 2 + 1]

        def forward(self, x, pos_emb, mask):
            n = x.size(0)
            q = self.linear_q(x).view(n, -1, H, d_k).transpose(1, 2)
            k = self.linear_k(x).view(n, -1, H, d_k).transpose(1, 2)
            v = self.linear_v(x).view(n, -1, H, d_k).transpose(1, 2)
            q = q.transpose(1, 2)
            p = self.linear_pos(pos_emb).view(pos_emb.size(0), -1, H, d_k).transpose(1, 2)
            q_u = (q + self.pos_bias_u).transpose(1, 2)
            q_v = (q + self.pos_bias_v).transpose(1, 2)
            ac = torch.matmul(q_u, k.transpose(-2, -1))
            bd = self.rel_shift(torch.matmul(q_v, p.transpose(-2, -1)))
            scores = (ac + bd) / math.sqrt(d_k)
            mask = mask.unsqueeze(1).eq(0)
            min_value = torch.finfo(scores.dtype).min
            scores = scores.masked_fill(mask, min_value)
            attn = torch.softmax(scores, dim=-1).masked_fill(mask, 0.0)
            out = torch.matmul(attn, v).transpose(1, 2).contiguous().view(n, -1, D)
            return self.linear_out(out), attn

    class ConvModule(nn.Module):
        def __init__(self):
            super().__init__()
            self.pointwise_conv1 = nn.Conv1d(D, 2 * D, 1)
            # torchaudio's default bias=False: before BatchNorm a bias gets only a float-noise
            # gradient, which Adam would blow up to lr-sized steps
            self.depthwise_conv = nn.Conv1d(D, D, K, padding=(K - 1) // 2, groups=D, bias=False)
            self.norm = nn.BatchNorm1d(D)
            self.pointwise_conv2 = nn.Conv1d(D, D, 1)
            self.activation = nn.SiLU()

        def forward(self, x, mask_pad):
            x = x.transpose(1, 2)
            x.masked_fill_(~mask_pad, 0.0)
            x = F.glu(self.pointwise_conv1(x), dim=1)
            x = self.depthwise_conv(x)
            x = self.activation(self.norm(x))
            x = self.pointwise_conv2(x)
            x.masked_fill_(~mask_pad, 0.0)
            return x.transpose(1, 2)

    def ffn():
        return nn.Sequential(nn.Linear(D, 16), nn.SiLU(), nn.Dropout(0.0), nn.Linear(16, D))

    class ConformerLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(4, D)
            self.pos = RelPositionalEncoding(D)
            self.ff_macaron, self.ff = ffn(), ffn()
            self.attn, self.conv = RelMHA(), ConvModule()
            self.norm_ff_macaron, self.norm_mha = nn.LayerNorm(D, eps=1e-12), nn.LayerNorm(D)
            self.norm_ff, self.norm_conv = nn.LayerNorm(D), nn.LayerNorm(D)
            self.norm_final = nn.LayerNorm(D)
            self.out = nn.Linear(D, 3)

        def forward(self, feats, lengths):
            masks = ~_make_pad_mask(torch, lengths, feats.size(1)).unsqueeze(1)
            x, pos_emb = self.pos(self.embed(feats))
            x = x + 0.5 * self.ff_macaron(self.norm_ff_macaron(x))
            att, w = self.attn(self.norm_mha(x), pos_emb, masks)
            x = x + att
            x = x + self.conv(self.norm_conv(x), masks)
            x = x + 0.5 * self.ff(self.norm_ff(x))
            return self.out(self.norm_final(x)), masks, w

    model = ConformerLayer()
    fill_(torch, model, rng, 0.3)
    feats = normal(torch, rng, B, T, 4)
    lengths = torch.tensor([7, 5])
    target = torch.from_numpy(rng.integers(0, 3, (B, T)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, betas=(0.9, 0.98), eps=1e-9)
    res = {"losses": []}
    for _ in range(3):
        logits, masks, w = model(feats, lengths)
        valid = masks.squeeze(1)
        loss = F.cross_entropy(logits[valid], target[valid], label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        res["losses"].append(loss.item())
    res["attn"] = w.detach()
    res["pos_bias_u_grad"] = model.attn.pos_bias_u.grad
    res["dw_grad"] = model.conv.depthwise_conv.weight.grad
    res["running"] = [model.conv.norm.running_mean, model.conv.norm.running_var,
                      model.conv.norm.num_batches_tracked]
    model.eval()
    with torch.no_grad():
        res["eval_logits"] = model(feats, lengths)[0]
    res["pe_shape"] = tuple(model.pos.pe.shape)
    res["state_keys"] = sorted(model.state_dict().keys())[:6]
    shift_in = torch.arange(24.0).view(1, 1, 3, 8)[..., :5]
    res["rel_shift"] = RelMHA.rel_shift(torch.arange(30.0).view(1, 2, 3, 5))
    res["noncontig_view_err"] = None
    try:
        shift_in.view(15)
    except RuntimeError as e:
        res["noncontig_view_err"] = [str(e)[:60]]
    return res


def rnnt_program(torch):
    """A transducer (encoder LSTM, prediction net with a blank-prefixed embedding, additive joint)
    trained with an RNN-T loss written by hand: log_softmax over (B, T, U+1, V), blank and label
    log-probs gathered, the alpha recursion along anti-diagonals with logsumexp, per-utterance
    lengths; then a greedy decode with at most one symbol per frame."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2602)
    B, T, U, V, D = 2, 5, 3, 5, 6
    blank = 0

    class Transducer(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.LSTM(3, D, batch_first=True)
            self.embed = nn.Embedding(V, D, padding_idx=blank)
            self.pred = nn.GRU(D, D, batch_first=True)
            self.lin_enc, self.lin_dec = nn.Linear(D, D), nn.Linear(D, D, bias=False)
            self.joint = nn.Linear(D, V)

        def forward(self, x, ys):
            enc, _ = self.enc(x)
            ys_in = F.pad(ys, (1, 0), value=blank)
            dec, _ = self.pred(self.embed(ys_in))
            h = self.lin_enc(enc).unsqueeze(2) + self.lin_dec(dec).unsqueeze(1)
            return self.joint(torch.tanh(h))

    def rnnt_loss(logits, targets, t_lens, u_lens):
        log_probs = logits.log_softmax(dim=-1)
        b, t_max, u1, _ = log_probs.shape
        blank_lp = log_probs[..., blank]
        idx = targets.unsqueeze(1).expand(b, t_max, u1 - 1).unsqueeze(-1)
        label_lp = torch.gather(log_probs[:, :, :-1, :], 3, idx).squeeze(-1)
        alpha = log_probs.new_full((b, t_max, u1), float("-inf"))
        alpha[:, 0, 0] = 0.0
        alphas = [[None] * u1 for _ in range(t_max)]
        alphas[0][0] = log_probs.new_zeros(b)
        for t in range(t_max):
            for u in range(u1):
                if t == 0 and u == 0:
                    continue
                terms = []
                if t > 0:
                    terms.append(alphas[t - 1][u] + blank_lp[:, t - 1, u])
                if u > 0:
                    terms.append(alphas[t][u - 1] + label_lp[:, t, u - 1])
                alphas[t][u] = torch.logsumexp(torch.stack(terms), dim=0)
        grid = torch.stack([torch.stack(row, dim=1) for row in alphas], dim=1)
        ar = torch.arange(b)
        final = grid[ar, t_lens - 1, u_lens] + blank_lp[ar, t_lens - 1, u_lens]
        return -final, grid

    model = Transducer()
    fill_(torch, model, rng, 0.4)
    x = normal(torch, rng, B, T, 3)
    ys = torch.from_numpy(rng.integers(1, V, (B, U)))
    t_lens, u_lens = torch.tensor([5, 4]), torch.tensor([3, 2])
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    res = {"losses": []}
    for _ in range(3):
        nll, grid = rnnt_loss(model(x, ys), ys, t_lens, u_lens)
        loss = (nll / u_lens.float()).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(nll.detach())
    res["alpha_grid"] = grid.detach()
    res["joint_grad"] = model.joint.weight.grad
    res["embed_pad_grad_row"] = model.embed.weight.grad[blank]

    @torch.no_grad()
    def greedy(x):
        enc, _ = model.enc(x)
        hyps = []
        for bi in range(x.size(0)):
            hyp, state = [], None
            dec, state = model.pred(model.embed(torch.tensor([[blank]])), state)
            for t in range(enc.size(1)):
                h = model.lin_enc(enc[bi, t]) + model.lin_dec(dec[0, -1])
                k = int(model.joint(torch.tanh(h)).argmax())
                if k != blank:
                    hyp.append(k)
                    dec, state = model.pred(model.embed(torch.tensor([[k]])), state)
            hyps.append(hyp)
        return hyps

    res["greedy"] = greedy(x)
    return res


def tacotron2_program(torch):
    """Tacotron 2 with teacher forcing: a prenet whose dropout stays on at inference (fixed NumPy
    masks through F.dropout-free multiplication and through F.dropout(training=True) checked by
    its zero fraction), location-sensitive attention over cumulative weights, an LSTMCell
    decoder, stop-token BCEWithLogits with pos_weight, a postnet residual, masked MSE."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2603)
    B, N, T_out, n_mels, E = 2, 6, 4, 5, 8

    class LocationLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.location_conv = nn.Conv1d(2, 4, kernel_size=3, padding=1, bias=False)
            self.location_dense = nn.Linear(4, E, bias=False)

        def forward(self, cat_weights):
            return self.location_dense(self.location_conv(cat_weights).transpose(1, 2))

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.query_layer = nn.Linear(E, E, bias=False)
            self.memory_layer = nn.Linear(E, E, bias=False)
            self.v = nn.Linear(E, 1, bias=False)
            self.location_layer = LocationLayer()
            self.score_mask_value = -float("inf")

        def forward(self, query, memory, processed_memory, cat_weights, mask):
            pq = self.query_layer(query.unsqueeze(1))
            energies = self.v(torch.tanh(pq + self.location_layer(cat_weights)
                                         + processed_memory)).squeeze(-1)
            energies.data.masked_fill_(mask, self.score_mask_value)
            weights = F.softmax(energies, dim=1)
            return torch.bmm(weights.unsqueeze(1), memory).squeeze(1), weights

    class Taco(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(10, E)
            self.prenet = nn.ModuleList([nn.Linear(n_mels, E, bias=False),
                                         nn.Linear(E, E, bias=False)])
            self.attention = Attention()
            self.attention_rnn = nn.LSTMCell(2 * E, E)
            self.proj = nn.Linear(2 * E, n_mels)
            self.gate = nn.Linear(2 * E, 1)
            self.postnet = nn.Sequential(nn.Conv1d(n_mels, E, 5, padding=2), nn.BatchNorm1d(E),
                                         nn.Tanh(), nn.Conv1d(E, n_mels, 5, padding=2))

    model = Taco()
    fill_(torch, model, rng, 0.3)
    text = torch.from_numpy(rng.integers(1, 10, (B, N)))
    in_lens = torch.tensor([6, 4])
    mels = normal(torch, rng, B, n_mels, T_out)
    out_lens = torch.tensor([4, 3])
    gate_target = (torch.arange(T_out).unsqueeze(0) >= (out_lens - 1).unsqueeze(1)).float()
    masks = [torch.from_numpy((rng.random((B, E)) > 0.5).astype(np.float32)) for _ in range(2)]
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-6)
    res = {"losses": []}

    def prenet(x, step):
        for i, linear in enumerate(model.prenet):
            x = F.relu(linear(x)) * masks[i] / 0.5 * (1.0 + 0.1 * step)
        return x

    def decode(memory, mask):
        b = memory.size(0)
        h, c = memory.new_zeros(b, E), memory.new_zeros(b, E)
        w, w_cum = memory.new_zeros(b, N), memory.new_zeros(b, N)
        ctx = memory.new_zeros(b, E)
        processed = model.attention.memory_layer(memory)
        frame = memory.new_zeros(b, n_mels)
        outs, gates, aligns = [], [], []
        for t in range(T_out):
            h, c = model.attention_rnn(torch.cat((prenet(frame, t), ctx), -1), (h, c))
            cat_w = torch.cat((w.unsqueeze(1), w_cum.unsqueeze(1)), dim=1)
            ctx, w = model.attention(h, memory, processed, cat_w, mask)
            w_cum += w
            hc = torch.cat((h, ctx), dim=1)
            outs.append(model.proj(hc))
            gates.append(model.gate(hc).squeeze(1))
            aligns.append(w)
            frame = mels[:, :, t]
        return (torch.stack(outs).transpose(0, 1).transpose(1, 2).contiguous(),
                torch.stack(gates).transpose(0, 1).contiguous(),
                torch.stack(aligns).transpose(0, 1))

    max_len = int(torch.max(in_lens).item())
    ids = torch.arange(0, max_len, out=torch.LongTensor(max_len))
    pad_mask = ~(ids < in_lens.unsqueeze(1)).bool()
    for _ in range(3):
        memory = model.embedding(text)
        mel_out, gate_out, align = decode(memory, pad_mask)
        post = mel_out + model.postnet(mel_out)
        frame_mask = (torch.arange(T_out).unsqueeze(0) < out_lens.unsqueeze(1))
        fm = frame_mask.unsqueeze(1).expand_as(mels)
        mel_loss = nn.MSELoss()(mel_out.masked_select(fm), mels.masked_select(fm)) + \
            nn.MSELoss()(post.masked_select(fm), mels.masked_select(fm))
        gate_loss = nn.BCEWithLogitsLoss(pos_weight=torch.tensor(3.0))(
            gate_out.view(-1, 1), gate_target.view(-1, 1))
        loss = mel_loss + gate_loss
        opt.zero_grad()
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        res["losses"].append([mel_loss.item(), gate_loss.item(), gn.item()])
    res["align"] = align.detach()
    res["loc_conv_grad"] = model.attention.location_layer.location_conv.weight.grad
    res["pad_mask"] = pad_mask
    torch.manual_seed(0)
    d = F.dropout(torch.ones(400), 0.5, training=True)
    res["dropout_vals"] = sorted(set(d.tolist()))
    res["dropout_frac_ok"] = 0.35 < float((d == 0).float().mean()) < 0.65
    return res


def wav2vec2_program(torch):
    """wav2vec 2.0 pretraining: a conv feature encoder with GroupNorm, span masking from fixed
    NumPy starts filled with a learned mask embedding, a 2-group Gumbel vector quantizer with
    hard straight-through one-hots from injected noise, the codebook diversity loss from the
    soft average probabilities, contrastive InfoNCE over cosine logits with fixed negatives."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2604)
    B, L, C, G, Vq, T_ = 2, 40, 8, 2, 4, 0.5

    feature_extractor = nn.Sequential(
        nn.Conv1d(1, C, 10, stride=5, bias=False), nn.GroupNorm(C, C, affine=True), nn.GELU(),
        nn.Conv1d(C, C, 3, stride=2, bias=False), nn.GELU())
    proj = nn.Linear(C, C)
    mask_emb = nn.Parameter(torch.FloatTensor(C).uniform_())
    ctx = nn.TransformerEncoderLayer(C, 2, 16, dropout=0.0, batch_first=True, norm_first=True)
    weight_proj = nn.Linear(C, G * Vq)
    codevectors = nn.Parameter(torch.FloatTensor(1, G * Vq, C // G))
    final_proj, project_q = nn.Linear(C, 6), nn.Linear(C, 6)
    modules = nn.ModuleList([feature_extractor, proj, ctx, weight_proj, final_proj, project_q])
    fill_(torch, modules, rng, 0.3)
    with torch.no_grad():
        mask_emb.copy_(torch.from_numpy(rng.random(C).astype(np.float32)))
        codevectors.copy_(normal(torch, rng, 1, G * Vq, C // G))
    params = list(modules.parameters()) + [mask_emb, codevectors]
    opt = torch.optim.AdamW(params, lr=5e-3, eps=1e-6, weight_decay=0.01)
    wav = normal(torch, rng, B, L)
    res = {"losses": [], "ppl": []}
    for step in range(3):
        feats = feature_extractor(wav.unsqueeze(1)).transpose(1, 2)
        Tf = feats.size(1)
        x = proj(F.layer_norm(feats, (C,)))
        mask = np.zeros((B, Tf), dtype=bool)
        for b in range(B):
            for s in rng.choice(Tf - 2, 1, replace=False):
                mask[b, s:s + 2] = True
        mask_t = torch.from_numpy(mask)
        x = x.clone()
        x[mask_t] = mask_emb.to(x.dtype)
        c = ctx(x)
        # quantizer
        logits = weight_proj(feats).view(B * Tf * G, -1)
        u = torch.from_numpy(rng.uniform(1e-6, 1 - 1e-6, logits.shape).astype(np.float32))
        gumbels = -torch.log(-torch.log(u))
        y_soft = ((logits.float() + gumbels) / 2.0).softmax(-1)
        index = y_soft.max(-1, keepdim=True)[1]
        y_hard = torch.zeros_like(logits).scatter_(-1, index, 1.0)
        hard_x = (y_hard - y_soft.detach() + y_soft).type_as(logits)
        avg_probs = torch.softmax(logits.view(B * Tf, G, -1).float(), dim=-1).mean(dim=0)
        prob_ppl = torch.exp(-torch.sum(avg_probs * torch.log(avg_probs + 1e-7), dim=-1)).sum()
        q = hard_x.view(B * Tf, -1).unsqueeze(-1) * codevectors
        q = q.view(B * Tf, G, Vq, -1).sum(-2).view(B, Tf, -1)
        qp = project_q(q)
        cp = final_proj(c)
        # negatives: fixed indices of other masked-or-not frames of the same utterance
        n_neg = 3
        neg_idx = rng.integers(0, Tf - 1, (B, Tf, n_neg))
        neg_idx = neg_idx + (neg_idx >= np.arange(Tf)[None, :, None])
        negs = qp[torch.arange(B).view(B, 1, 1), torch.from_numpy(neg_idx)]
        targets = torch.cat([qp.unsqueeze(2), negs], dim=2)
        logits_c = torch.cosine_similarity(cp.unsqueeze(2).float(), targets.float(), dim=-1)
        neg_is_pos = (qp.unsqueeze(2) == negs).all(-1)
        logits_c = logits_c / 0.1
        logits_c[..., 1:][neg_is_pos] = float("-inf")
        lc = logits_c[mask_t]
        contrastive = F.cross_entropy(lc, lc.new_zeros(lc.size(0), dtype=torch.long),
                                      reduction="sum")
        diversity = (G * Vq - prob_ppl) / (G * Vq)
        loss = contrastive + 0.1 * diversity * mask_t.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append([contrastive.item(), diversity.item()])
        res["ppl"].append(prob_ppl.item())
    res["codevector_grad"] = codevectors.grad
    res["mask_emb_grad"] = mask_emb.grad
    res["hard_rows"] = hard_x.sum(-1)
    res["hard_grad_fn"] = [type(hard_x.grad_fn).__name__]
    g = F.gumbel_softmax(torch.zeros(5, 3), tau=T_, hard=True)
    res["gumbel_hard_rows"] = g.sum(-1)
    res["gumbel_hard_values"] = sorted(set(g.flatten().tolist()))
    res["gumbel_grad_fn"] = [type(F.gumbel_softmax(torch.zeros(2, 3, requires_grad=True),
                                                   hard=True).grad_fn).__name__]
    return res


PROGRAMS = [conformer_program, rnnt_program, tacotron2_program, wav2vec2_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
