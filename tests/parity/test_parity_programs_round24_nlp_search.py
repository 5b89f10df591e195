"""Classic NLP written by hand in torch, run once with `torch` bound to ember and once to
PyTorch from the same NumPy data: word2vec skip-gram with negative sampling (sparse embeddings
under SparseAdam and SGD, unigram^0.75 noise drawn by multinomial from a Generator,
subsampling, the usual gradient-norm logging, which meets sparse gradients) and GloVe with
Adagrad; a TextCNN over pad_sequence batches and a hierarchical attention network (packed
bidirectional GRUs, masked attention, an adaptive-softmax LM head); a pointer network, REINFORCE
over a Categorical with masked logits, and a pointer-generator (scatter_add_ into an extended
vocabulary). The architecture and hyper-parameter search programs of this round are in
test_parity_programs_round24_nlp_search_hyper.py; what they found is pinned in
test_parity_programs_round24_nlp_search_fixes.py."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def word2vec_program(torch):
    """Skip-gram with negative sampling (sparse embeddings with SparseAdam and SGD), unigram^0.75
    noise drawn by multinomial from a Generator, subsampling by torch.rand, and GloVe with
    Adagrad."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(241)
    res = {}
    vocab, dim, window, n_neg = 12, 6, 2, 4
    corpus = rng.zipf(1.6, 80) % vocab
    counts = torch.bincount(torch.from_numpy(corpus), minlength=vocab).float()
    res["counts"] = counts

    # noise distribution and multinomial draws
    noise = counts.pow(0.75)
    noise = noise / noise.sum()
    res["noise"] = noise
    gen = torch.Generator().manual_seed(5)
    draws_a = torch.multinomial(noise, 40, replacement=True, generator=gen)
    gen.manual_seed(5)
    draws_b = torch.multinomial(noise, 40, replacement=True, generator=gen)
    res["draws_meta"] = [_name(draws_a.dtype), list(draws_a.shape),
                         bool(torch.equal(draws_a, draws_b)), bool((noise[draws_a] > 0).all())]
    batch_draws = torch.multinomial(noise.expand(3, -1), n_neg, replacement=True, generator=gen)
    res["batch_draws_shape"] = list(batch_draws.shape)

    # Mikolov subsampling: keep probability, then random mask (only shapes compare)
    freq = counts / counts.sum()
    t = 1e-2
    keep_prob = torch.clamp((torch.sqrt(freq / t) + 1) * t / freq.clamp(min=1e-12), max=1.0)
    res["keep_prob"] = keep_prob
    tokens = torch.from_numpy(corpus)
    mask = torch.rand(len(tokens), generator=gen) < keep_prob[tokens]
    res["mask_meta"] = [_name(mask.dtype), list(mask.shape)]

    # skip-gram pairs from a fixed window
    centers, contexts = [], []
    for i in range(len(corpus)):
        for j in range(max(0, i - window), min(len(corpus), i + window + 1)):
            if j != i:
                centers.append(corpus[i])
                contexts.append(corpus[j])
    centers = torch.tensor(centers)
    contexts = torch.tensor(contexts)
    p = noise.numpy().astype(np.float64)
    negatives = torch.from_numpy(rng.choice(vocab, size=(len(centers), n_neg), p=p / p.sum()))

    class SkipGram(nn.Module):
        def __init__(self, sparse):
            super().__init__()
            self.in_embed = nn.Embedding(vocab, dim, sparse=sparse)
            self.out_embed = nn.Embedding(vocab, dim, sparse=sparse)

        def forward(self, center, context, negs):
            v = self.in_embed(center)                                  # (B, D)
            u = self.out_embed(context)                                # (B, D)
            u_neg = self.out_embed(negs)                               # (B, K, D)
            pos = F.logsigmoid((v * u).sum(-1))
            neg = F.logsigmoid(-torch.bmm(u_neg, v.unsqueeze(2)).squeeze(2)).sum(1)
            return -(pos + neg).mean()

    for sparse, opt_name in [(True, "SparseAdam"), (True, "SGD"), (False, "Adam")]:
        model = SkipGram(sparse)
        fill_(torch, model, rng, 0.1)
        if opt_name == "SparseAdam":
            opt = torch.optim.SparseAdam(list(model.parameters()), lr=0.05)
        elif opt_name == "SGD":
            opt = torch.optim.SGD(model.parameters(), lr=0.5)
        else:
            opt = torch.optim.Adam(model.parameters(), lr=0.05)
        losses = []
        for step in range(4):
            sl = slice(step * 32, (step + 1) * 32)
            loss = model(centers[sl], contexts[sl], negatives[sl])
            opt.zero_grad()
            loss.backward()
            # the classic logging of gradient norms, sparse gradients included
            res.setdefault(f"grad_norms_{opt_name}", []).append(
                sum(p.grad.norm(2).item() ** 2 for p in model.parameters()) ** 0.5)
            if step == 0:
                g = model.in_embed.weight.grad
                res[f"grad_meta_{opt_name}"] = [bool(g.is_sparse), str(g.layout).rsplit(".", 1)[-1]]
                dense = g.to_dense() if g.is_sparse else g
                res[f"grad_{opt_name}"] = dense
                if g.is_sparse:
                    gc = g.coalesce()
                    res[f"grad_nnz_{opt_name}"] = [int(gc._nnz()), int(gc.indices().shape[1])]
                    res[f"grad_norm1_{opt_name}"] = g.norm(1)
            opt.step()
            losses.append(loss.item())
        res[f"loss_{opt_name}"] = losses
        res[f"in_{opt_name}"] = model.in_embed.weight
        res[f"out_{opt_name}"] = model.out_embed.weight
        # nearest neighbours by cosine similarity
        W = F.normalize(model.in_embed.weight.detach(), dim=1)
        sims = W @ W.T
        sims.fill_diagonal_(-float("inf"))
        res[f"nn_{opt_name}"] = sims.topk(2, dim=1).indices

    # GloVe on the co-occurrence matrix
    X = torch.zeros(vocab, vocab)
    X.index_put_((centers, contexts), torch.ones(len(centers)), accumulate=True)
    rows, cols = X.nonzero(as_tuple=True)
    x = X[rows, cols]
    x_max, alpha = 5.0, 0.75
    weight = torch.clamp(x / x_max, max=1.0).pow(alpha)
    res["glove_weight"] = weight
    W = nn.Embedding(vocab, dim)
    Wc = nn.Embedding(vocab, dim)
    b = nn.Embedding(vocab, 1)
    bc = nn.Embedding(vocab, 1)
    for m in (W, Wc, b, bc):
        fill_(torch, m, rng, 0.1)
    params = [*W.parameters(), *Wc.parameters(), *b.parameters(), *bc.parameters()]
    opt = torch.optim.Adagrad(params, lr=0.1, initial_accumulator_value=0.1)
    glove = []
    for _ in range(5):
        pred = (W(rows) * Wc(cols)).sum(1) + b(rows).squeeze(1) + bc(cols).squeeze(1)
        loss = (weight * (pred - torch.log(x)) ** 2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        glove.append(loss.item())
    res["glove_loss"] = glove
    res["glove_vectors"] = W.weight + Wc.weight
    res["glove_state"] = opt.state[params[0]]["sum"]

    # vocabulary building: unique with inverse, frequency order (stable argsort), from_pretrained
    words, inverse, freq_counts = torch.unique(tokens, return_inverse=True, return_counts=True)
    order = torch.argsort(freq_counts, descending=True, stable=True)
    res["vocab"] = [words[order], inverse[:10], freq_counts[order]]
    emb = nn.Embedding.from_pretrained(res["glove_vectors"].detach(), freeze=False, sparse=True,
                                       padding_idx=0, max_norm=1.0)
    out = emb(torch.tensor([[0, 3, 3, 5], [5, 0, 7, 3]]))
    out.pow(2).sum().backward()
    res["pretrained_out"] = out
    res["pretrained_weight_renormed"] = emb.weight
    res["pretrained_grad"] = emb.weight.grad.to_dense()
    gc = emb.weight.grad.coalesce()
    res["pretrained_grad_coalesced"] = [gc.indices(), gc.values()]
    res["pretrained_meta"] = [bool(emb.weight.requires_grad), repr(emb)]
    # torch.multinomial refuses to draw more distinct samples than categories with mass
    try:
        torch.multinomial(torch.tensor([0.5, 0.5, 0.0]), 3)
        res["multinomial_error"] = ["none"]
    except RuntimeError as e:
        res["multinomial_error"] = [str(e)]
    res["sparse_sum"] = torch.sparse.sum(emb.weight.grad, dim=0).to_dense()
    return res


def text_classifier_program(torch):
    """TextCNN over pad_sequence batches (several kernel sizes, max over time two ways) and a
    hierarchical attention network (packed bidirectional GRUs, enforce_sorted=False, masked
    attention)."""
    nn, F = torch.nn, torch.nn.functional
    rnn_utils = torch.nn.utils.rnn
    rng = np.random.default_rng(242)
    res = {}
    vocab, emb_dim, n_cls, pad = 20, 8, 3, 0
    lengths = [7, 3, 5, 9, 4]
    seqs = [torch.from_numpy(rng.integers(1, vocab, n)) for n in lengths]
    labels = torch.from_numpy(rng.integers(0, n_cls, len(seqs)))
    batch = rnn_utils.pad_sequence(seqs, batch_first=True, padding_value=pad)
    res["batch"] = batch
    res["batch_meta"] = [_name(batch.dtype), list(batch.shape)]
    res["time_major"] = rnn_utils.pad_sequence(seqs, padding_value=-1)[:, 1]
    res["left_padded"] = rnn_utils.pad_sequence(seqs, batch_first=True, padding_side="left")
    lens = torch.tensor(lengths)
    mask = torch.arange(batch.shape[1])[None, :] < lens[:, None]
    res["mask_equal"] = [bool(torch.equal(mask, batch != pad))]

    class TextCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(vocab, emb_dim, padding_idx=pad)
            self.convs = nn.ModuleList([nn.Conv1d(emb_dim, 4, k, padding=k // 2)
                                        for k in (2, 3, 4)])
            self.dropout = nn.Dropout(0.5)
            self.fc = nn.Linear(12, n_cls)

        def forward(self, x):
            e = self.embedding(x).permute(0, 2, 1)                  # (B, E, T)
            feats = []
            for i, conv in enumerate(self.convs):
                h = F.relu(conv(e))
                if i % 2 == 0:
                    feats.append(F.max_pool1d(h, kernel_size=h.shape[2]).squeeze(2))
                else:
                    feats.append(h.amax(dim=2))
            return self.fc(self.dropout(torch.cat(feats, 1)))

    model = TextCNN()
    fill_(torch, model, rng, 0.3)
    with torch.no_grad():
        model.embedding.weight[pad].zero_()
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    model.eval()                        # dropout off: the masks would not match across libraries
    cnn = []
    for _ in range(4):
        logits = model(batch)
        loss = F.cross_entropy(logits, labels, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step()
        cnn.append(loss.item())
    res["cnn_loss"] = cnn
    res["cnn_pad_row"] = model.embedding.weight[pad]
    res["cnn_conv_w"] = model.convs[1].weight
    res["cnn_shapes"] = [list(c(torch.zeros(1, emb_dim, 9)).shape) for c in model.convs]
    pooled, where = F.max_pool1d(torch.arange(12.).reshape(1, 2, 6).flip(-1), 6,
                                 return_indices=True)
    res["pool_indices"] = [pooled, where]
    res["adaptive"] = F.adaptive_max_pool1d(
        model.convs[0](model.embedding(batch).transpose(1, 2)), 1)

    # hierarchical attention network: documents of sentences of words
    max_words, hid = 6, 5
    sent_counts = [4, 2, 3]
    doc_words = []
    for n in sent_counts:
        doc_words.append([torch.from_numpy(rng.integers(1, vocab, rng.integers(1, max_words + 1)))
                          for _ in range(n)])
    flat_sents = [s for d in doc_words for s in d]
    word_lens = torch.tensor([len(s) for s in flat_sents])
    words = rnn_utils.pad_sequence(flat_sents, batch_first=True)          # (S, W)

    class Attention(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.proj = nn.Linear(d, d)
            self.context = nn.Parameter(torch.empty(d))

        def forward(self, h, mask):
            u = torch.tanh(self.proj(h))
            scores = (u @ self.context).masked_fill(~mask, float("-inf"))
            alpha = torch.softmax(scores, dim=-1)
            return torch.einsum("bt,btd->bd", alpha, h), alpha

    class HAN(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(vocab, emb_dim, padding_idx=0)
            self.word_gru = nn.GRU(emb_dim, hid, batch_first=True, bidirectional=True)
            self.word_att = Attention(2 * hid)
            self.sent_gru = nn.GRU(2 * hid, hid, batch_first=True, bidirectional=True)
            self.sent_att = Attention(2 * hid)
            self.fc = nn.Linear(2 * hid, n_cls)

        def forward(self, words, word_lens, sent_counts):
            e = self.embedding(words)
            packed = rnn_utils.pack_padded_sequence(e, word_lens, batch_first=True,
                                                    enforce_sorted=False)
            out, h_n = self.word_gru(packed)
            out, out_lens = rnn_utils.pad_packed_sequence(out, batch_first=True,
                                                          total_length=words.shape[1])
            wmask = torch.arange(words.shape[1])[None] < out_lens[:, None]
            sent_vecs, walpha = self.word_att(out, wmask)
            per_doc = torch.split(sent_vecs, sent_counts)
            docs = rnn_utils.pad_sequence(per_doc, batch_first=True)
            packed = rnn_utils.pack_sequence(per_doc, enforce_sorted=False)
            sout, _ = self.sent_gru(packed)
            sout, slens = rnn_utils.pad_packed_sequence(sout, batch_first=True)
            smask = torch.arange(docs.shape[1])[None] < slens[:, None]
            doc_vecs, salpha = self.sent_att(sout, smask)
            return self.fc(doc_vecs), walpha, salpha, h_n, packed

    han = HAN()
    fill_(torch, han, rng, 0.3)
    doc_labels = torch.tensor([0, 2, 1])
    opt = torch.optim.RMSprop(han.parameters(), lr=0.01, momentum=0.9, centered=True)
    han_losses = []
    for step in range(3):
        logits, walpha, salpha, h_n, packed = han(words, word_lens, sent_counts)
        loss = F.cross_entropy(logits, doc_labels)
        opt.zero_grad()
        loss.backward()
        if step == 0:
            res["han_word_grad"] = han.word_gru.weight_hh_l0_reverse.grad
            res["han_walpha"] = walpha
            res["han_salpha"] = salpha
            res["han_h_n"] = h_n
            res["han_packed"] = [packed.batch_sizes, packed.sorted_indices,
                                 packed.unsorted_indices]
        opt.step()
        han_losses.append(loss.item())
    res["han_loss"] = han_losses
    res["han_fc"] = han.fc.weight
    res["walpha_rows_sum"] = walpha.sum(-1)

    # a word-level language-model head with an adaptive softmax over the word states
    lm_vocab = 30
    head = nn.AdaptiveLogSoftmaxWithLoss(2 * hid, lm_vocab, cutoffs=[6, 15], div_value=2.0)
    fill_(torch, head, rng, 0.3)
    states = han.word_gru(han.embedding(words))[0].detach()                # (S, W, 2H)
    keep = torch.arange(words.shape[1])[None] < word_lens[:, None]
    next_words = torch.from_numpy(rng.integers(0, lm_vocab, int(keep.sum())))
    opt = torch.optim.Adam(head.parameters(), lr=0.01)
    lm_losses = []
    for _ in range(3):
        out = head(states[keep], next_words)
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        lm_losses.append(out.loss.item())
    res["lm_loss"] = lm_losses
    res["lm_target_logp"] = out.output
    res["lm_log_prob"] = head.log_prob(states[keep][:4])
    res["lm_predict"] = head.predict(states[keep][:6])
    res["lm_tail_grad"] = head.tail[1][1].weight.grad
    res["walpha_zero_at_pad"] = [bool((walpha[~(torch.arange(words.shape[1])[None]
                                                < word_lens[:, None])] == 0).all())]
    return res


def pointer_program(torch):
    """A pointer network sorting numbers (additive attention over encoder states as the output
    distribution, teacher forcing, greedy decoding that masks chosen positions with scatter_ of
    -inf) and a pointer-generator (copy probabilities scatter_add_-ed into an extended
    vocabulary)."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(243)
    res = {}
    B, n, hid = 4, 6, 8
    xs = torch.from_numpy(rng.random((B, n, 1)).astype(np.float32))
    target = torch.argsort(xs.squeeze(-1), dim=1)

    class PointerNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.LSTM(1, hid, batch_first=True)
            self.decoder = nn.LSTMCell(1, hid)
            self.W1 = nn.Linear(hid, hid, bias=False)
            self.W2 = nn.Linear(hid, hid, bias=False)
            self.v = nn.Linear(hid, 1, bias=False)
            self.start = nn.Parameter(torch.zeros(1))

        def forward(self, x, target=None):
            enc, (h, c) = self.encoder(x)
            h, c = h[0], c[0]
            inp = self.start.expand(x.shape[0], 1)
            mask = torch.zeros(x.shape[0], x.shape[1])
            logps, picks = [], []
            for t in range(x.shape[1]):
                h, c = self.decoder(inp, (h, c))
                scores = self.v(torch.tanh(self.W1(enc) + self.W2(h).unsqueeze(1))).squeeze(-1)
                logp = F.log_softmax(scores + mask, dim=-1)
                logps.append(logp)
                idx = target[:, t] if target is not None else logp.argmax(-1)
                picks.append(idx)
                mask = mask.scatter(1, idx.unsqueeze(1), float("-inf"))
                inp = torch.gather(x.squeeze(-1), 1, idx.unsqueeze(1))
            return torch.stack(logps, 1), torch.stack(picks, 1)

    net = PointerNet()
    fill_(torch, net, rng, 0.4)
    opt = torch.optim.Adam(net.parameters(), lr=0.02, amsgrad=True)
    losses = []
    for _ in range(4):
        logps, _ = net(xs, target)                                     # teacher forcing
        nll = -torch.gather(logps, 2, target.unsqueeze(-1)).squeeze(-1)
        loss = nll.sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res["ptr_loss"] = losses
    res["ptr_nll_loss"] = F.nll_loss(logps.flatten(0, 1), target.flatten(), reduction="sum")
    net.eval()
    with torch.no_grad():
        logps, picks = net(xs)
    res["greedy_picks"] = picks
    res["greedy_logps"] = logps.clamp(min=-1e4)
    res["greedy_perm"] = [bool((picks.sort(1).values == torch.arange(n)).all())]
    res["greedy_is_finite"] = torch.isfinite(logps).sum(-1)

    # REINFORCE on tour lengths (Kool et al.): tanh-clipped compatibilities, a Categorical over
    # the unvisited cities, actions fixed from NumPy, the greedy rollout as the baseline
    cities = torch.from_numpy(rng.random((B, n, 2)).astype(np.float32))
    proj = nn.Linear(2, hid)
    query = nn.Linear(hid, hid)
    modules = nn.ModuleList([proj, query])
    fill_(torch, modules, rng, 0.4)
    opt = torch.optim.Adam(modules.parameters(), lr=0.01)
    actions = torch.from_numpy(np.stack([rng.permutation(n) for _ in range(B)]))

    def rollout(actions=None):
        emb = proj(cities)                                          # (B, n, H)
        visited = torch.zeros(B, n, dtype=torch.bool)
        ctx = emb.mean(1)
        logps, tour = [], []
        for t in range(n):
            u = 10.0 * torch.tanh((query(ctx).unsqueeze(1) @ emb.transpose(1, 2)).squeeze(1)
                                  / hid ** 0.5)
            dist = torch.distributions.Categorical(logits=u.masked_fill(visited, float("-inf")))
            a = dist.probs.argmax(-1) if actions is None else actions[:, t]
            logps.append(dist.log_prob(a))
            tour.append(a)
            visited = visited.scatter(1, a.unsqueeze(1), True)
            ctx = emb[torch.arange(B), a]
        tour = torch.stack(tour, 1)
        ordered = cities.gather(1, tour.unsqueeze(-1).expand(-1, -1, 2))
        length = (ordered - ordered.roll(-1, dims=1)).norm(p=2, dim=-1).sum(1)
        return torch.stack(logps, 1).sum(1), length, tour

    rl = []
    for _ in range(3):
        logp, length, _ = rollout(actions)
        with torch.no_grad():
            _, baseline, greedy_tour = rollout()
        loss = ((length - baseline) * logp).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(modules.parameters(), 1.0, norm_type=2)
        opt.step()
        rl.append([loss.item(), length.mean().item(), baseline.mean().item()])
    res["reinforce"] = rl
    res["greedy_tour"] = greedy_tour

    # in-place masking of chosen positions, the way decoders written without a graph do it
    mask = torch.zeros(B, n, dtype=torch.bool)
    scores = normal(torch, rng, B, n)
    order = []
    for _ in range(3):
        s = scores.masked_fill(mask, float("-inf"))
        idx = s.argmax(-1, keepdim=True)
        mask.scatter_(1, idx, True)
        scores.scatter_(1, idx, float("-inf"))
        order.append(idx)
    res["inplace_order"] = torch.cat(order, 1)
    res["inplace_scores"] = scores.isinf()

    # pointer-generator: p_gen mixes the vocabulary softmax with copy attention
    V, n_oov, T, E = 10, 3, 5, 6
    src_ext = torch.from_numpy(rng.integers(0, V + n_oov, (B, n)))    # OOVs get ids >= V
    tgt_ext = torch.from_numpy(rng.integers(0, V + n_oov, (B, T)))
    src_in = src_ext.masked_fill(src_ext >= V, 1)                     # <unk> = 1
    emb = nn.Embedding(V, E)
    enc = nn.GRU(E, hid, batch_first=True)
    dec = nn.GRUCell(E, hid)
    attn = nn.Bilinear(hid, hid, 1)
    out = nn.Linear(2 * hid, V)
    gen = nn.Linear(2 * hid + E, 1)
    modules = nn.ModuleList([emb, enc, dec, attn, out, gen])
    fill_(torch, modules, rng, 0.3)
    opt = torch.optim.Adagrad(modules.parameters(), lr=0.1, lr_decay=0.01)
    pg_losses = []
    for step in range(3):
        enc_out, h = enc(emb(src_in))
        h = h[0]
        prev = torch.full((B,), 2, dtype=torch.long)                  # <s>
        step_losses, coverage = [], torch.zeros(B, n)
        for t in range(T):
            x = emb(prev)
            h = dec(x, h)
            e = attn(enc_out, h.unsqueeze(1).expand_as(enc_out).contiguous()).squeeze(-1)
            a = F.softmax(e, dim=-1)
            ctx = torch.bmm(a.unsqueeze(1), enc_out).squeeze(1)
            p_vocab = F.softmax(out(torch.cat([h, ctx], -1)), dim=-1)
            p_gen = torch.sigmoid(gen(torch.cat([h, ctx, x], -1)))
            extended = torch.cat([p_gen * p_vocab, torch.zeros(B, n_oov)], dim=1)
            final = extended.scatter_add(1, src_ext, (1 - p_gen) * a)
            gold = torch.gather(final, 1, tgt_ext[:, t:t + 1]).squeeze(1)
            cov_loss = torch.minimum(a, coverage).sum(1)
            coverage = coverage + a
            step_losses.append(-torch.log(gold + 1e-12) + cov_loss)
            prev = tgt_ext[:, t].masked_fill(tgt_ext[:, t] >= V, 1)
        loss = torch.stack(step_losses, 1).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        if step == 0:
            res["pg_final_sums"] = final.sum(1)
            res["pg_attn_grad"] = attn.weight.grad
        opt.step()
        pg_losses.append(loss.item())
    res["pg_loss"] = pg_losses
    res["pg_coverage"] = coverage
    # the in-place form on a buffer, with a duplicate source id
    buf = torch.zeros(B, V + n_oov)
    idx = src_ext.clone()
    idx[:, 1] = idx[:, 0]
    buf.scatter_add_(1, idx, a.detach())
    res["pg_buffer"] = buf
    res["pg_index_add"] = torch.zeros(V + n_oov).index_add_(0, idx[0], a[0].detach(), alpha=2.0)
    res["pg_scatter_reduce"] = torch.zeros(B, V + n_oov).scatter_reduce(
        1, idx, a.detach(), reduce="amax", include_self=False)
    return res


PROGRAMS = [word2vec_program, text_classifier_program, pointer_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
