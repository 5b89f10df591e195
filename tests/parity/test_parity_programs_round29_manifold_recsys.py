"""Sequential recommenders written as their reference repositories (pmixer's SASRec.pytorch,
BERT4Rec-VAE-Pytorch, GRU4Rec_PyTorch_Official, RecBole) write them in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights and data: SASRec (causal
self-attention over item sequences with a padding mask, BCE on one sampled negative), BERT4Rec
(masked item prediction with label -100, eval scoring of candidates), GRU4Rec (session-parallel
mini-batches, hidden state reset by mask, sampled softmax with logQ correction over in-batch
negatives), and recall@k / NDCG@k through topk."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _metrics(torch, scores, target, ks=(1, 3, 5)):
    """Recall@k and NDCG@k of ``target`` (B,) under ``scores`` (B, N), as RecBole computes
    them through topk and the rank of the hit."""
    out = {}
    for k in ks:
        _, top = torch.topk(scores, k, dim=-1)
        hits = (top == target.unsqueeze(-1))
        recall = hits.any(dim=-1).float().mean()
        ranks = torch.arange(1, k + 1, dtype=torch.float32)
        ndcg = (hits.float() / torch.log2(ranks + 1)).sum(-1).mean()
        out[k] = (recall, ndcg)
    rank = (scores > scores.gather(1, target.unsqueeze(1))).sum(1)
    mrr = (1.0 / (rank.float() + 1)).mean()
    return [v for k in ks for v in out[k]] + [mrr]


def sasrec_program(torch):
    """pmixer's SASRec: item + positional embeddings scaled by sqrt(d), timeline mask zeroing
    padded positions, causal attention by ~tril, pre-LN blocks of nn.MultiheadAttention with
    the query layer-normed and (L, B, D) transposes, point-wise Conv1d feed-forward, BCE with
    logits on one sampled negative with indices where pos != 0, Adam with betas (0.9, 0.98),
    then predict() scoring candidate items and recall/NDCG."""
    nn = torch.nn
    rng = np.random.default_rng(2911)
    n_items, L, D, B = 20, 6, 8, 4

    class PointWiseFeedForward(nn.Module):
        def __init__(self, hidden_units, dropout_rate):
            super().__init__()
            self.conv1 = nn.Conv1d(hidden_units, hidden_units, kernel_size=1)
            self.dropout1 = nn.Dropout(p=dropout_rate)
            self.relu = nn.ReLU()
            self.conv2 = nn.Conv1d(hidden_units, hidden_units, kernel_size=1)
            self.dropout2 = nn.Dropout(p=dropout_rate)

        def forward(self, inputs):
            outputs = self.dropout2(self.conv2(self.relu(
                self.dropout1(self.conv1(inputs.transpose(-1, -2))))))
            return outputs.transpose(-1, -2)

    class SASRec(nn.Module):
        def __init__(self):
            super().__init__()
            self.item_emb = nn.Embedding(n_items + 1, D, padding_idx=0)
            self.pos_emb = nn.Embedding(L + 1, D, padding_idx=0)
            self.emb_dropout = nn.Dropout(p=0.0)
            self.attention_layernorms = nn.ModuleList()
            self.attention_layers = nn.ModuleList()
            self.forward_layernorms = nn.ModuleList()
            self.forward_layers = nn.ModuleList()
            self.last_layernorm = nn.LayerNorm(D, eps=1e-8)
            for _ in range(2):
                self.attention_layernorms.append(nn.LayerNorm(D, eps=1e-8))
                self.attention_layers.append(nn.MultiheadAttention(D, 2, 0.0))
                self.forward_layernorms.append(nn.LayerNorm(D, eps=1e-8))
                self.forward_layers.append(PointWiseFeedForward(D, 0.0))

        def log2feats(self, log_seqs):
            seqs = self.item_emb(log_seqs)
            seqs *= self.item_emb.embedding_dim ** 0.5
            poss = np.tile(np.arange(1, log_seqs.shape[1] + 1), [log_seqs.shape[0], 1])
            poss *= (log_seqs.numpy() != 0)
            seqs += self.pos_emb(torch.LongTensor(poss))
            seqs = self.emb_dropout(seqs)
            tl = seqs.shape[1]
            attention_mask = ~torch.tril(torch.ones((tl, tl), dtype=torch.bool))
            for i in range(len(self.attention_layers)):
                seqs = torch.transpose(seqs, 0, 1)
                Q = self.attention_layernorms[i](seqs)
                mha_outputs, _ = self.attention_layers[i](Q, seqs, seqs,
                                                          attn_mask=attention_mask)
                seqs = Q + mha_outputs
                seqs = torch.transpose(seqs, 0, 1)
                seqs = self.forward_layernorms[i](seqs)
                seqs = self.forward_layers[i](seqs)
            return self.last_layernorm(seqs)

        def forward(self, log_seqs, pos_seqs, neg_seqs):
            log_feats = self.log2feats(log_seqs)
            pos_logits = (log_feats * self.item_emb(pos_seqs)).sum(dim=-1)
            neg_logits = (log_feats * self.item_emb(neg_seqs)).sum(dim=-1)
            return pos_logits, neg_logits

        def predict(self, log_seqs, item_indices):
            final_feat = self.log2feats(log_seqs)[:, -1, :]
            item_embs = self.item_emb(item_indices)
            return item_embs.matmul(final_feat.unsqueeze(-1)).squeeze(-1)

    model = SASRec()
    fill_(torch, model, rng, scale=0.2)
    with torch.no_grad():
        model.item_emb.weight[0].zero_()
        model.pos_emb.weight[0].zero_()
    seq = rng.integers(1, n_items + 1, (B, L + 1))
    seq[0, :3] = 0
    seq[2, :1] = 0
    log_seqs = torch.from_numpy(seq[:, :-1].copy())
    pos = torch.from_numpy(seq[:, 1:].copy())
    pos[0, :2] = 0
    neg = torch.from_numpy(rng.integers(1, n_items + 1, (B, L)))
    bce = nn.BCEWithLogitsLoss()
    opt = torch.optim.Adam(model.parameters(), lr=0.01, betas=(0.9, 0.98))
    losses = []
    for _ in range(3):
        pos_logits, neg_logits = model(log_seqs, pos, neg)
        pos_labels = torch.ones(pos_logits.shape)
        neg_labels = torch.zeros(neg_logits.shape)
        opt.zero_grad()
        indices = torch.where(pos != 0)
        loss = bce(pos_logits[indices], pos_labels[indices])
        loss += bce(neg_logits[indices], neg_labels[indices])
        for param in model.item_emb.parameters():
            loss += 1e-3 * torch.norm(param)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        cands = torch.arange(1, n_items + 1).unsqueeze(0).expand(B, -1)
        scores = model.predict(log_seqs, cands)
    target = pos[:, -1] - 1
    return {"losses": losses, "scores": scores,
            "metrics": torch.stack(_metrics(torch, scores, target)),
            "pad_grad": model.item_emb.weight.grad[0], "emb": model.item_emb.weight.detach()}


def bert4rec_program(torch):
    """BERT4Rec-VAE-Pytorch: token + learned positional embeddings, a [MASK] id of
    n_items + 1, a bidirectional encoder with the padding mask as (B, 1, L, L) from
    (x > 0).unsqueeze(1).repeat(1, L, 1).unsqueeze(1), scaled dot-product attention with
    masked_fill(mask == 0, -1e9), GELU feed-forward, CrossEntropyLoss(ignore_index=0) and a
    second loss with label -100 as HF writes it; eval gathers candidate scores."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2912)
    n_items, L, D, H, B = 15, 7, 8, 2, 3
    mask_token = n_items + 1
    vocab = n_items + 2

    class Attention(nn.Module):
        def forward(self, query, key, value, mask=None, dropout=None):
            scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(query.size(-1))
            if mask is not None:
                scores = scores.masked_fill(mask == 0, -1e9)
            p_attn = F.softmax(scores, dim=-1)
            return torch.matmul(p_attn, value), p_attn

    class MultiHeaded(nn.Module):
        def __init__(self):
            super().__init__()
            self.d_k = D // H
            self.linear_layers = nn.ModuleList([nn.Linear(D, D) for _ in range(3)])
            self.output_linear = nn.Linear(D, D)
            self.attention = Attention()

        def forward(self, query, key, value, mask=None):
            batch_size = query.size(0)
            query, key, value = [lin(x).view(batch_size, -1, H, self.d_k).transpose(1, 2)
                                 for lin, x in zip(self.linear_layers, (query, key, value))]
            x, attn = self.attention(query, key, value, mask=mask)
            x = x.transpose(1, 2).contiguous().view(batch_size, -1, H * self.d_k)
            return self.output_linear(x)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = MultiHeaded()
            self.ff = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))
            self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)

        def forward(self, x, mask):
            x = x + self.attention(self.ln1(x), self.ln1(x), self.ln1(x), mask=mask)
            return x + self.ff(self.ln2(x))

    class BERT4Rec(nn.Module):
        def __init__(self):
            super().__init__()
            self.token = nn.Embedding(vocab, D, padding_idx=0)
            self.position = nn.Embedding(L, D)
            self.blocks = nn.ModuleList([Block() for _ in range(2)])
            self.out = nn.Linear(D, n_items + 1)

        def forward(self, x):
            mask = (x > 0).unsqueeze(1).repeat(1, x.size(1), 1).unsqueeze(1)
            pos = self.position.weight.unsqueeze(0).repeat(x.size(0), 1, 1)
            h = self.token(x) + pos
            for blk in self.blocks:
                h = blk(h, mask)
            return self.out(h)

    model = BERT4Rec()
    fill_(torch, model, rng, scale=0.2)
    seqs = rng.integers(1, n_items + 1, (B, L))
    seqs[1, :2] = 0
    probs = rng.random((B, L))
    tokens, labels = seqs.copy(), np.zeros_like(seqs)
    chosen = (probs < 0.3) & (seqs > 0)
    chosen[:, -1] = True
    tokens[chosen] = mask_token
    labels[chosen] = seqs[chosen]
    tokens_t, labels_t = torch.from_numpy(tokens), torch.from_numpy(labels)
    ce = nn.CrossEntropyLoss(ignore_index=0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    losses = []
    for _ in range(3):
        logits = model(tokens_t)
        loss = ce(logits.view(-1, logits.size(-1)), labels_t.view(-1))
        hf_labels = labels_t.masked_fill(labels_t == 0, -100)
        loss_hf = F.cross_entropy(logits.transpose(1, 2), hf_labels)
        opt.zero_grad()
        (loss + 0 * loss_hf).backward()
        opt.step()
        losses.append([loss.item(), loss_hf.item()])
    model.eval()
    with torch.no_grad():
        scores = model(tokens_t)[:, -1, :]
        cands = torch.from_numpy(rng.integers(1, n_items + 1, (B, 6)))
        cands[:, 0] = labels_t[:, -1]
        cand_scores = scores.gather(1, cands)
        labels_c = torch.zeros_like(cand_scores)
        labels_c[:, 0] = 1
    return {"losses": losses, "scores": scores, "cand_scores": cand_scores,
            "metrics": torch.stack(_metrics(torch, cand_scores, torch.zeros(B, dtype=torch.long),
                                            ks=(1, 3))),
            "pad_row": model.token.weight[0], "all_ignored": F.cross_entropy(
                scores, torch.full((B,), -100)).isnan().item()}


def gru4rec_program(torch):
    """GRU4Rec: session-parallel mini-batches (sessions end and the GRU hidden state rows are
    reset by multiplying with a mask), an embedding-free one-hot-by-index_select input,
    sampled softmax over the in-batch targets plus shared negatives with logQ correction
    (log of the popularity-based sampling probability subtracted from the logits),
    BPR-max and TOP1-max losses as the official code writes them, Adagrad."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2913)
    n_items, D, B, n_neg = 12, 6, 3, 4
    pop = rng.random(n_items).astype(np.float32) + 0.1
    q = torch.from_numpy(pop / pop.sum())

    class GRU4Rec(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(n_items, D)
            self.gru = nn.GRU(D, D, batch_first=False)
            self.out = nn.Embedding(n_items, D)
            self.out_b = nn.Embedding(n_items, 1)

        def forward(self, x, h):
            e = self.emb(x).unsqueeze(0)
            o, h = self.gru(e, h)
            return o.squeeze(0), h

        def score(self, o, items):
            return o @ self.out(items).t() + self.out_b(items).t()

    model = GRU4Rec()
    fill_(torch, model, rng, scale=0.3)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.05)
    sessions = [rng.integers(0, n_items, n) for n in (4, 3, 5, 2, 4)]
    iters = list(range(B))
    next_sess = B
    pos = [0] * B
    h = torch.zeros(1, B, D)
    losses = {"xe": [], "bpr": [], "top1": []}
    reset_log = []
    for step in range(6):
        x = torch.tensor([int(sessions[iters[i]][pos[i]]) for i in range(B)])
        y = torch.tensor([int(sessions[iters[i]][pos[i] + 1]) for i in range(B)])
        negs = torch.from_numpy(rng.choice(n_items, n_neg, p=pop / pop.sum()))
        sample = torch.cat([y, negs])
        o, h = model(x, h)
        logits = model.score(o, sample)
        logits_q = logits - torch.log(q[sample]).unsqueeze(0)
        target = torch.arange(B)
        xe = F.cross_entropy(logits_q, target)
        diag = logits.diag().unsqueeze(1)
        softmax_neg = F.softmax(logits - torch.eye(B, B + n_neg) * 1e9, dim=1)
        bpr = -torch.log(torch.sum(torch.sigmoid(diag - logits) * softmax_neg, dim=1)
                         + 1e-24).mean()
        top1 = torch.sum((torch.sigmoid(-diag + logits) + torch.sigmoid(logits ** 2))
                         * softmax_neg, dim=1).mean()
        loss = xe + 0.5 * bpr + 0.1 * top1
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses["xe"].append(xe.item())
        losses["bpr"].append(bpr.item())
        losses["top1"].append(top1.item())
        h = h.detach()
        # advance; finished sessions get the next one and their hidden row is reset
        mask = torch.ones(B)
        for i in range(B):
            pos[i] += 1
            if pos[i] + 1 >= len(sessions[iters[i]]):
                iters[i] = next_sess % len(sessions)
                next_sess += 1
                pos[i] = 0
                mask[i] = 0
        reset_log.append(mask.tolist())
        h = h * mask.view(1, -1, 1)
        h[:, mask == 0, :] = 0
    with torch.no_grad():
        all_scores = model.score(o, torch.arange(n_items))
    return {"losses": [losses["xe"], losses["bpr"], losses["top1"]], "reset": reset_log,
            "h": h, "scores": all_scores,
            "metrics": torch.stack(_metrics(torch, all_scores, y, ks=(1, 5))),
            "state_sum": opt.state[model.gru.weight_hh_l0]["sum"]}


def in_batch_two_tower_seq_program(torch):
    """A RecBole-style sequential model trained with in-batch negatives: mean-pooled history
    through a padding mask, L2-normalised user and item towers, temperature-scaled logits
    with the logQ correction and duplicate items in the batch masked out by
    masked_fill(-inf) off the diagonal; the full-sort eval masks history items with -inf
    via index_put_ before topk."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2914)
    n_items, D, B, L = 14, 6, 5, 4
    item_emb = nn.Embedding(n_items, D, padding_idx=0)
    tower = nn.Sequential(nn.Linear(D, D), nn.Tanh(), nn.Linear(D, D))
    fill_(torch, list(item_emb.parameters()) + list(tower.parameters()), rng)
    hist = torch.from_numpy(rng.integers(1, n_items, (B, L)))
    hist[0, 2:] = 0
    target = torch.from_numpy(rng.integers(1, n_items, B))
    target[3] = target[1]
    logq = torch.log(torch.from_numpy(rng.dirichlet(np.ones(n_items)).astype(np.float32)))
    params = list(item_emb.parameters()) + list(tower.parameters())
    opt = torch.optim.Adam(params, lr=0.02)
    losses = []
    for _ in range(3):
        m = (hist > 0).float().unsqueeze(-1)
        u = (item_emb(hist) * m).sum(1) / m.sum(1).clamp(min=1)
        u = F.normalize(tower(u), dim=-1)
        v = F.normalize(item_emb(target), dim=-1)
        logits = u @ v.t() / 0.1 - logq[target].unsqueeze(0)
        dup = (target.unsqueeze(0) == target.unsqueeze(1)) & ~torch.eye(B, dtype=torch.bool)
        logits = logits.masked_fill(dup, float("-inf"))
        loss = F.cross_entropy(logits, torch.arange(B))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        m = (hist > 0).float().unsqueeze(-1)
        u = F.normalize(tower((item_emb(hist) * m).sum(1) / m.sum(1).clamp(min=1)), dim=-1)
        scores = u @ F.normalize(item_emb.weight, dim=-1).t()
        rows = torch.arange(B).unsqueeze(1).expand_as(hist)
        scores.index_put_((rows.reshape(-1), hist.reshape(-1)),
                          torch.tensor(float("-inf")))
        scores[:, 0] = -float("inf")
        top_v, top_i = scores.topk(5, dim=1)
    return {"losses": losses, "top_v": top_v, "top_i": top_i,
            "metrics": torch.stack(_metrics(torch, scores, target, ks=(1, 5))),
            "n_inf": [int(torch.isinf(scores).sum())]}


def gru4rec_official_program(torch):
    """GRU4Rec_PyTorch_Official's sparse path: the input and output item tables looked up by
    F.embedding(sparse=True) so their gradients are sparse COO tensors, a GRUCell stepped by
    hand, Adagrad on the sparse tables and SGD with momentum on the cell; then Poincare
    embeddings' RSGD on a sparse gradient (coalesce, _indices/_values, index_add_) and
    SparseAdam, and BERT4Rec's cross entropy with label smoothing and ignore_index."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2915)
    res = {}
    W = nn.Parameter(normal(torch, rng, 10, 4))
    Bo = nn.Parameter(torch.zeros(10, 1))
    cell = nn.GRUCell(4, 4)
    fill_(torch, cell, rng)
    opt = torch.optim.Adagrad([W, Bo], lr=0.1)
    opt2 = torch.optim.SGD(cell.parameters(), lr=0.1, momentum=0.5)
    h = torch.zeros(3, 4)
    sparse_flags = []
    for _ in range(3):
        x, y = torch.tensor([1, 4, 4]), torch.tensor([2, 3, 9])
        h = cell(F.embedding(x, W, sparse=True), h)
        scores = h @ F.embedding(y, W, sparse=True).T + F.embedding(y, Bo, sparse=True).T
        loss = F.cross_entropy(scores, torch.arange(3))
        opt.zero_grad()
        opt2.zero_grad()
        loss.backward()
        sparse_flags.append(W.grad.is_sparse)
        opt.step()
        opt2.step()
        h = h.detach()
    res.update(W=W.detach(), Bo=Bo.detach(), cell=cell.weight_hh.detach(),
               acc=opt.state[W]["sum"], sparse=sparse_flags)
    emb = nn.Embedding(8, 3, sparse=True)
    with torch.no_grad():
        emb.weight.copy_(torch.from_numpy(rng.uniform(-0.1, 0.1, (8, 3)).astype(np.float32)))
    idx = torch.tensor([[0, 1, 2], [1, 3, 3]])
    for _ in range(2):
        e = emb(idx)
        loss = (e[:, 0] - e[:, 1:].mean(1)).pow(2).sum()
        emb.weight.grad = None
        loss.backward()
        d_p = emb.weight.grad.coalesce()
        rows, h = d_p._indices()[0], d_p._values()
        p_sqnorm = torch.sum(emb.weight.data[rows] ** 2, dim=-1, keepdim=True)
        emb.weight.data.index_add_(0, rows, -0.5 * h * ((1 - p_sqnorm) ** 2 / 4))
    res["rsgd"] = emb.weight.detach().clone()
    res["sparse_grad"] = [d_p._indices(), d_p._values()]
    sopt = torch.optim.SparseAdam(list(emb.parameters()), lr=0.1)
    for _ in range(2):
        sopt.zero_grad()
        emb(idx).sum().backward()
        sopt.step()
    res["sparse_adam"] = emb.weight.detach()
    logits = normal(torch, rng, 2, 6, 7).requires_grad_()
    lab = torch.tensor([[1, -100, 3, 0, -100, 6], [-100] * 5 + [2]])
    l1 = F.cross_entropy(logits.view(-1, 7), lab.view(-1), label_smoothing=0.1)
    l2 = F.cross_entropy(logits.transpose(1, 2), lab, label_smoothing=0.2, reduction="sum")
    (l1 + l2).backward()
    res["ce"] = [l1, l2, logits.grad]
    return res


def recbole_masks_program(torch):
    """RecBole-style encoders: nn.MultiheadAttention (batch_first) with a bool key padding
    mask and a float causal mask (the mismatched-mask deprecation warning), a
    TransformerEncoder with generate_square_subsequent_mask, src_key_padding_mask and
    is_causal, the output gathered at item_seq_len - 1, and NARM's packed GRU
    (enforce_sorted=False, pad_packed_sequence with total_length)."""
    nn = torch.nn
    rng = np.random.default_rng(2916)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    fill_(torch, mha, rng)
    x = normal(torch, rng, 2, 5, 8)
    kpm = torch.tensor([[True, True, False, False, False], [False] * 5])
    causal = torch.triu(torch.full((5, 5), float("-inf")), diagonal=1)
    o, w = mha(x, x, x, key_padding_mask=kpm, attn_mask=causal, average_attn_weights=False)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True,
                                       activation="gelu")
    fill_(torch, layer, rng)
    enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    mask = nn.Transformer.generate_square_subsequent_mask(5)
    kp2 = torch.tensor([[False, False, False, True, True], [False] * 5])
    y = enc(x, mask=mask, src_key_padding_mask=kp2, is_causal=True)
    lens = torch.tensor([3, 5])
    gi = (lens - 1).view(-1, 1, 1).expand(-1, -1, y.shape[-1])
    last = y.gather(dim=1, index=gi).squeeze(1)
    gru = nn.GRU(8, 4, batch_first=True)
    fill_(torch, gru, rng)
    packed = nn.utils.rnn.pack_padded_sequence(x, lens, batch_first=True, enforce_sorted=False)
    po, hn = gru(packed)
    pad, plen = nn.utils.rnn.pad_packed_sequence(po, batch_first=True, total_length=6)
    (last.sum() + pad.sum() + o.sum()).backward()
    return {"mha": [o, w], "enc": y, "last": last, "gru": [pad, hn], "plen": plen.tolist(),
            "grads": [mha.in_proj_weight.grad, gru.weight_hh_l0.grad,
                      enc.layers[0].linear1.weight.grad]}


PROGRAMS = [sasrec_program, bert4rec_program, gru4rec_program, in_batch_two_tower_seq_program,
            gru4rec_official_program, recbole_masks_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 attention / GRU accumulation order through a few optimizer steps
        "sasrec_program": (1e-4, 1e-5),
        "bert4rec_program": (1e-4, 1e-5),
        "gru4rec_program": (1e-4, 1e-5),
        "recbole_masks_program": (1e-4, 1e-5),
    })
