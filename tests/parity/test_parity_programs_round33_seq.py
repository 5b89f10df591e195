"""Symbolic-music generation written as its reference repositories write it in torch, run once
with `torch` bound to ember and once to PyTorch from the same NumPy weights: Music Transformer's
relative attention with the skewing trick (pad a column, reshape, slice), MusicGen/audiocraft's
codebook delay pattern (build and revert interleaved sequences with masks and special tokens,
scatter/gather over K codebooks), classifier-free guidance on logits with top-k/top-p filtering,
a REMI-event decoder with tied input/output embeddings trained with Adam, OneCycleLR and
gradient clipping. _fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def music_transformer_program(torch):
    """Huang et al. (2018), relative global attention as in jason9693/MusicTransformer-pytorch."""
    rng = np.random.default_rng(0)
    nn, F = torch.nn, torch.nn.functional
    d, h, max_seq, vocab = 8, 2, 12, 16

    class RelativeGlobalAttention(nn.Module):
        def __init__(self, h, d, max_seq):
            super().__init__()
            self.h, self.d, self.dh, self.max_seq = h, d, d // h, max_seq
            self.Wq, self.Wk, self.Wv = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
            self.fc = nn.Linear(d, d)
            self.E = torch.randn([max_seq, self.dh], requires_grad=False)
            self.E = nn.Parameter(self.E)

        def forward(self, x, mask=None):
            q = self.Wq(x).view(x.size(0), x.size(1), self.h, -1).permute(0, 2, 1, 3)
            k = self.Wk(x).view(x.size(0), x.size(1), self.h, -1).permute(0, 2, 1, 3)
            v = self.Wv(x).view(x.size(0), x.size(1), self.h, -1).permute(0, 2, 1, 3)
            len_k, len_q = k.size(2), q.size(2)
            E = self._get_left_embedding(len_q, len_k).to(x.device)
            QE = torch.einsum("bhld,md->bhlm", [q, E])
            QE = self._qe_masking(QE)
            Srel = self._skewing(QE)
            Kt = k.permute(0, 1, 3, 2)
            QKt = torch.matmul(q, Kt)
            logits = (QKt + Srel) / math.sqrt(self.dh)
            if mask is not None:
                logits = logits + (mask.to(torch.int64) * -1e9).to(logits.dtype)
            attention_weights = F.softmax(logits, -1)
            attention = torch.matmul(attention_weights, v)
            out = attention.permute(0, 2, 1, 3)
            out = torch.reshape(out, (out.size(0), -1, self.d))
            return self.fc(out), attention_weights

        def _get_left_embedding(self, len_q, len_k):
            starting_point = max(0, self.max_seq - len_q)
            return self.E[starting_point:, :]

        @staticmethod
        def _qe_masking(qe):
            mask = sequence_mask(torch.arange(qe.size()[-1] - 1, qe.size()[-1] - qe.size()[-2] - 1,
                                              -1).to(qe.device), qe.size()[-1])
            mask = ~mask.to(mask.device)
            return mask.to(qe.dtype) * qe

        def _skewing(self, tensor):
            padded = F.pad(tensor, [1, 0, 0, 0, 0, 0, 0, 0])
            reshaped = torch.reshape(padded, shape=[padded.size(0), padded.size(1),
                                                    padded.size(-1), padded.size(-2)])
            Srel = reshaped[:, :, 1:, :]
            if self.len_k > self.len_q:
                Srel = F.pad(Srel, [0, 0, 0, 0, 0, 0, 0, self.len_k - self.len_q])
            elif self.len_k < self.len_q:
                Srel = Srel[:, :, :, :self.len_k]
            return Srel

    def sequence_mask(length, max_length=None):
        if max_length is None:
            max_length = length.max()
        x = torch.arange(max_length, dtype=length.dtype, device=length.device)
        return x.unsqueeze(0) < length.unsqueeze(1)

    attn = RelativeGlobalAttention(h, d, max_seq)
    attn.len_k = attn.len_q = 6
    fill_(torch, attn, rng)
    emb = nn.Embedding(vocab, d)
    fill_(torch, emb, rng)
    out_proj = nn.Linear(d, vocab)
    fill_(torch, out_proj, rng)
    params = list(attn.parameters()) + list(emb.parameters()) + list(out_proj.parameters())
    opt = torch.optim.Adam(params, lr=1e-2, betas=(0.9, 0.98), eps=1e-9)
    tokens = torch.from_numpy(rng.integers(0, vocab, (2, 7)))
    x, y = tokens[:, :-1], tokens[:, 1:]
    look_ahead = torch.triu(torch.ones(6, 6), diagonal=1).bool()[None, None]
    res = {"losses": []}
    for _ in range(3):
        z, w = attn(emb(x) * math.sqrt(d), look_ahead)
        logits = out_proj(z)
        loss = F.cross_entropy(logits.transpose(1, 2), y, ignore_index=0)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        res["losses"].append(loss.item())
    res["weights"] = w
    res["E_grad"] = attn.E.grad
    # the skew on its own: Srel[i, j] == QE[i, L - 1 - i + j] below the diagonal
    qe = torch.arange(16.).view(1, 1, 4, 4)
    res["skew"] = attn._skewing.__func__(type("S", (), {"len_k": 4, "len_q": 4})(),
                                         RelativeGlobalAttention._qe_masking(qe))
    attn.len_k = 5
    res["skew_pad"] = attn._skewing(qe)
    attn.len_k, attn.len_q = 3, 4
    res["skew_cut"] = attn._skewing(qe)
    return res


def musicgen_delay_program(torch):
    """audiocraft's DelayedPatternProvider + CodebooksPatternProvider build/revert, simplified
    to a fixed delay pattern, with the special token at the delayed positions."""
    rng = np.random.default_rng(1)
    nn, F = torch.nn, torch.nn.functional
    B, K, T, card, d = 2, 3, 5, 8, 6
    special = card
    delays = [0, 1, 2]
    S = T + max(delays)

    def build_indexes(T, K, S):
        # index into flattened [K * T] codes, with K * T as the "special" slot
        idx = torch.full((K, S), K * T, dtype=torch.long)
        mask = torch.zeros((K, S), dtype=torch.bool)
        for k, dl in enumerate(delays):
            for s in range(S):
                t = s - dl
                if 0 <= t < T:
                    idx[k, s] = k * T + t
                    mask[k, s] = True
        return idx, mask

    def build_pattern_sequence(z, special_token):
        B, K, T = z.shape
        idx, mask = build_indexes(T, K, S)
        z = z.view(B, -1)
        z = torch.cat([z, torch.zeros_like(z[:, :1]) + special_token], dim=1)
        values = z[:, idx.view(-1)]
        values = values.view(B, K, idx.shape[-1])
        return values, idx, mask

    def revert_pattern_sequence(s, special_token):
        B, K, S_ = s.shape
        ridx = torch.full((K, T), S_ * K, dtype=torch.long)
        rmask = torch.zeros((K, T), dtype=torch.bool)
        for k, dl in enumerate(delays):
            ridx[k] = k * S_ + torch.arange(T) + dl
            rmask[k] = True
        s = s.reshape(B, -1)
        s = torch.cat([s, torch.zeros_like(s[:, :1]) + special_token], dim=1)
        return s[:, ridx.view(-1)].view(B, K, T), ridx, rmask

    codes = torch.from_numpy(rng.integers(0, card, (B, K, T)))
    seq, idx, mask = build_pattern_sequence(codes, special)
    back, _, _ = revert_pattern_sequence(seq, special)
    res = {"seq": seq, "mask": mask, "roundtrip": torch.equal(back, codes), "idx": idx}

    # LM over the interleaved stream: sum of K embeddings, K heads; loss on valid positions
    embs = nn.ModuleList([nn.Embedding(card + 1, d) for _ in range(K)])
    heads = nn.ModuleList([nn.Linear(d, card) for _ in range(K)])
    core = nn.GRU(d, d, batch_first=True)
    for m in (embs, heads, core):
        fill_(torch, m, rng)
    params = [p for m in (embs, heads, core) for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-2, total_steps=4)
    inp = torch.cat([torch.full((B, K, 1), special, dtype=torch.long), seq[..., :-1]], dim=-1)
    res["losses"], res["lrs"] = [], []
    for _ in range(3):
        x = sum(embs[k](inp[:, k]) for k in range(K))
        hdn, _ = core(x)
        logits = torch.stack([heads[k](hdn) for k in range(K)], dim=1)  # B K S card
        # revert logits the way audiocraft does: a float "special" of nan, then mask
        lg = logits.permute(0, 3, 1, 2).reshape(B * card, K, S)
        lg_back, _, lmask = revert_pattern_sequence(lg, float("nan"))
        lg_back = lg_back.view(B, card, K, T).permute(0, 2, 3, 1)
        valid = lmask[None].expand(B, -1, -1)
        ce = torch.zeros([], device=codes.device)
        for k in range(K):
            lk = lg_back[:, k].reshape(-1, card)
            tk = codes[:, k].reshape(-1)
            mk = valid[:, k].reshape(-1)
            ce = ce + F.cross_entropy(lk[mk], tk[mk])
        loss = ce / K
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
        res["lrs"].append(sched.get_last_lr()[0])
    res["nan_free"] = bool(torch.isfinite(lg_back).all())
    # scatter the delayed stream back into a [B, K, T] buffer by gather/scatter on K codebooks
    buf = torch.full((B, K, T), -1, dtype=torch.long)
    t_idx = (torch.arange(S)[None] - torch.tensor(delays)[:, None]).clamp(0, T - 1)
    keep = mask[None].expand(B, -1, -1)
    src = torch.where(keep, seq, torch.full_like(seq, -1))
    buf.scatter_(2, t_idx[None].expand(B, -1, -1).masked_fill(~keep, 0),
                 torch.where(keep, src, buf.gather(2, torch.zeros_like(seq))))
    res["scatter_back"] = buf
    res["gather"] = seq.gather(2, (torch.arange(T)[None] + torch.tensor(delays)[:, None])[None]
                               .expand(B, -1, -1))
    return res


def cfg_sampling_program(torch):
    """audiocraft's LMModel._sample_next_token: two-pass CFG (cond + uncond stacked in the
    batch), temperature, top-k and top-p filtering with sort/cumsum/scatter."""
    rng = np.random.default_rng(2)
    F = torch.nn.functional
    B, K, card = 2, 3, 10

    def top_k_logits(logits, k):
        v, _ = torch.topk(logits, k)
        out = logits.clone()
        out[out < v[..., [-1]]] = -float("Inf")
        return out

    def top_p_logits(logits, p, filter_value=-float("Inf")):
        sorted_logits, sorted_indices = torch.sort(logits, descending=True)
        cumulative_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
        sorted_indices_to_remove = cumulative_probs > p
        sorted_indices_to_remove[..., 1:] = sorted_indices_to_remove[..., :-1].clone()
        sorted_indices_to_remove[..., 0] = 0
        indices_to_remove = sorted_indices_to_remove.scatter(-1, sorted_indices,
                                                             sorted_indices_to_remove)
        return logits.masked_fill(indices_to_remove, filter_value)

    def sample_top_p(probs, p):
        probs_sort, probs_idx = torch.sort(probs, dim=-1, descending=True)
        probs_sum = torch.cumsum(probs_sort, dim=-1)
        mask = probs_sum - probs_sort > p
        probs_sort *= (~mask).float()
        probs_sort.div_(probs_sort.sum(dim=-1, keepdim=True))
        return probs_sort, probs_idx

    all_logits = normal(torch, rng, 2 * B, K, card) * 2
    cond_logits, uncond_logits = all_logits.split(B, dim=0)
    cfg_coef = 3.0
    logits = uncond_logits + (cond_logits - uncond_logits) * cfg_coef
    res = {"cfg": logits}
    logits = logits / 0.8
    res["topk"] = top_k_logits(logits, 3)
    res["topp"] = top_p_logits(logits, 0.7)
    probs = torch.softmax(logits, dim=-1)
    ps, pi = sample_top_p(probs.clone(), 0.8)
    res["ps"], res["pi"] = ps, pi
    # greedy decode of the filtered distribution; and multinomial shape/range under a seed
    res["greedy"] = torch.gather(pi, -1, torch.argmax(ps, -1, keepdim=True))
    torch.manual_seed(0)
    draw = torch.multinomial(ps.view(-1, card), num_samples=1)
    torch.manual_seed(0)
    draw2 = torch.multinomial(ps.view(-1, card), num_samples=1)
    res["draw_ok"] = bool((ps.view(-1, card).gather(1, draw) > 0).all())
    res["draw_rep"] = torch.equal(draw, draw2)
    res["draw_shape"] = tuple(draw.shape)
    # cfg of log-probs, as MusicGen does when two_step_cfg is off
    lp = F.log_softmax(all_logits, -1)
    res["cfg_lp"] = lp[B:] + cfg_coef * (lp[:B] - lp[B:])
    res["inf_rows"] = torch.isinf(res["topk"]).sum(-1)
    return res


def remi_tied_program(torch):
    """REMI event embeddings (bar/position/pitch/velocity/duration families), a small
    pre-LN transformer decoder with tied output weights, Adam + OneCycleLR + clipping."""
    rng = np.random.default_rng(3)
    nn, F = torch.nn, torch.nn.functional
    families = {"bar": 1, "position": 4, "pitch": 6, "velocity": 3, "duration": 3}
    offsets, n = {}, 2  # 0 pad, 1 eos
    for k, v in families.items():
        offsets[k] = n
        n += v
    vocab, d = n, 8

    def encode(notes):
        toks = []
        for bar, pos, pitch, vel, dur in notes:
            if bar:
                toks.append(offsets["bar"])
            toks += [offsets["position"] + pos, offsets["pitch"] + pitch,
                     offsets["velocity"] + vel, offsets["duration"] + dur]
        return toks + [1]

    seqs = [encode([(1, 0, 2, 1, 0), (0, 2, 5, 2, 1), (1, 1, 0, 0, 2)]),
            encode([(1, 3, 1, 1, 1), (0, 0, 4, 2, 0)])]
    L = max(map(len, seqs))
    batch = torch.zeros(len(seqs), L, dtype=torch.long)
    for i, s in enumerate(seqs):
        batch[i, :len(s)] = torch.tensor(s)

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d, padding_idx=0)
            self.pos = nn.Embedding(L, d)
            layer = nn.TransformerEncoderLayer(d, 2, 16, dropout=0.0, batch_first=True,
                                               norm_first=True, activation="gelu")
            self.body = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            self.head.weight = self.tok.weight

        def forward(self, x):
            t = x.size(1)
            h = self.tok(x) + self.pos(torch.arange(t, device=x.device))[None]
            causal = nn.Transformer.generate_square_subsequent_mask(t)
            h = self.body(h, mask=causal, is_causal=True, src_key_padding_mask=x == 0)
            return self.head(self.ln(h))

    model = Decoder()
    fill_(torch, model, rng)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=5,
                                                pct_start=0.4, anneal_strategy="linear")
    res = {"losses": [], "lrs": [], "norms": []}
    x, y = batch[:, :-1], batch[:, 1:]
    for _ in range(3):
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1), ignore_index=0,
                               label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        res["norms"].append(nn.utils.clip_grad_norm_(model.parameters(), 0.5))
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
        res["lrs"].append(sched.get_last_lr()[0])
    res["tied"] = model.head.weight is model.tok.weight
    res["n_params"] = sum(p.numel() for p in model.parameters())
    res["pad_row"] = model.tok.weight[0]
    res["emb"] = model.tok.weight
    res["momentum"] = [g["betas"] for g in opt.param_groups]
    # family-restricted greedy step: mask logits outside the pitch family
    with torch.no_grad():
        last = model(x)[:, -1]
        allowed = torch.zeros(vocab, dtype=torch.bool)
        allowed[offsets["pitch"]:offsets["pitch"] + families["pitch"]] = True
        res["pitch_next"] = last.masked_fill(~allowed, float("-inf")).argmax(-1)
    return res


def pianoroll_events_program(torch):
    """A uint8 pianoroll (as pypianoroll/muspy hand it over) turned into REMI-like events by
    tensor ops: pitch-shift augmentation by padding and slicing, velocity bins from an
    integer linspace, onsets by diff, events by nonzero and a stable sort on a time-pitch key,
    then embedded and scored by a small model."""
    rng = np.random.default_rng(4)
    nn, F = torch.nn, torch.nn.functional
    T, P, n_vel = 12, 16, 8
    roll_np = (rng.random((T, P)) > 0.85).astype(np.uint8) * rng.integers(1, 128, (T, P),
                                                                         dtype=np.uint8)
    roll = torch.from_numpy(roll_np)
    res = {}
    # pitch shift by +2 / -3 semitones: pad the pitch axis with silence, then slice
    up = F.pad(roll, (2, 0))[:, :P]
    down = F.pad(roll, (0, 3), value=0)[:, 3:]
    res["shift"] = [up.sum(dtype=torch.int64).item(), down.sum(dtype=torch.int64).item()]
    res["shift_dtype"] = [str(up.dtype).split(".")[-1]]
    res["pad_err"] = [_error(lambda: F.pad(roll, (1, 1), value=256))]
    # velocity bins as miditok builds them
    bins = torch.linspace(0, 127, n_vel, dtype=torch.long)
    res["bins"] = bins
    res["bins_u8"] = torch.linspace(0, 255, 6, dtype=torch.uint8)
    res["bins_big"] = torch.linspace(0, 2 ** 30 + 7, 5, dtype=torch.int64)
    vel_tok = torch.bucketize(roll.long(), bins, right=False).clamp(max=n_vel - 1)
    # onsets: a note starts where the roll goes from silent to sounding
    active = (roll > 0).to(torch.int8)
    onset = torch.diff(active, dim=0, prepend=torch.zeros(1, P, dtype=torch.int8)) == 1
    t_idx, p_idx = torch.nonzero(onset, as_tuple=True)
    key = t_idx * P + (P - 1 - p_idx)         # time ascending, pitch descending
    order = torch.sort(key, stable=True).indices
    t_idx, p_idx = t_idx[order], p_idx[order]
    vel = vel_tok[t_idx, p_idx]
    res["events"] = torch.stack([t_idx, p_idx, vel], 1)
    # duration: run length of each note by cumprod over the following frames
    tail = torch.cat([active, torch.zeros(1, P, dtype=torch.int8)], 0).long()
    frames = torch.arange(T + 1)[:, None]
    after = (frames >= t_idx[None]).long()
    runs = torch.cumprod(torch.where(after.bool(), tail[:, p_idx], torch.ones_like(after)), 0)
    res["dur"] = (runs * after).sum(0)
    # embed (time-shift, pitch, velocity) and score with a tiny model; one Adam step
    emb_t, emb_p, emb_v = nn.Embedding(T, 4), nn.Embedding(P, 4), nn.Embedding(n_vel, 4)
    head = nn.Linear(4, 1)
    mods = nn.ModuleList([emb_t, emb_p, emb_v, head])
    fill_(torch, mods, rng)
    opt = torch.optim.Adam(mods.parameters(), lr=1e-2)
    dt = torch.diff(t_idx, prepend=t_idx[:1])
    for _ in range(2):
        h = emb_t(dt) + emb_p(p_idx) + emb_v(vel)
        score = head(torch.tanh(h)).squeeze(-1)
        loss = F.softplus(-score).mean() + 0.01 * h.pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    res["loss"] = loss
    res["emb_v_g"] = emb_v.weight.grad
    return res


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return type(e).__name__ + ": " + str(e)
    return "no error"


PROGRAMS = [music_transformer_program, musicgen_delay_program, cfg_sampling_program,
            remi_tied_program, pianoroll_events_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
