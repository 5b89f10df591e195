"""Classic (pre-transformer) NLP models written as their reference repositories write them in
torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy weights:
Kim's TextCNN (pretrained embedding fine-tuned, several widths, max-over-time, renorm_ max-norm
on the classifier, Adadelta), fastText (hashed bigrams, EmbeddingBag with offsets), HAN (packed
word/sentence GRUs, masked attention), pointer-generator (coverage, copy distribution
scatter_add'ed into an extended vocabulary, Adagrad, clip_grad_norm_), ESIM/BiDAF (soft
alignment, masked softmax, highway, char-CNN) and a teacher-forced seq2seq with label smoothing
by hand and gradient accumulation. _fixes pins what they found."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _tokens(rng, *shape, vocab=20, low=1):
    return rng.integers(low, vocab, size=shape).astype(np.int64)


def textcnn_program(torch):
    """Kim (2014), as in Shawn1993/cnn-text-classification-pytorch."""
    rng = np.random.default_rng(0)
    nn, F = torch.nn, torch.nn.functional
    vocab, emb, classes = 20, 6, 3

    class TextCNN(nn.Module):
        def __init__(self, pretrained):
            super().__init__()
            self.embed = nn.Embedding.from_pretrained(pretrained, freeze=False, padding_idx=0)
            self.convs = nn.ModuleList([nn.Conv2d(1, 4, (k, emb)) for k in (2, 3, 4)])
            self.dropout = nn.Dropout(0.5)
            self.fc = nn.Linear(12, classes)

        def forward(self, x):
            x = self.embed(x).unsqueeze(1)
            x = [F.relu(conv(x)).squeeze(3) for conv in self.convs]
            x = [F.max_pool1d(i, i.size(2)).squeeze(2) for i in x]
            return self.fc(self.dropout(torch.cat(x, 1)))

    pretrained = normal(torch, rng, vocab, emb)
    model = TextCNN(pretrained)
    fill_(torch, list(model.parameters())[1:], rng)
    opt = torch.optim.Adadelta(model.parameters(), rho=0.95, eps=1e-6)
    res = {"losses": [], "norms": []}
    x = torch.from_numpy(_tokens(rng, 5, 9))
    x[:, 7:] = 0
    y = torch.from_numpy(rng.integers(0, classes, 5))
    model.train()
    for _ in range(3):
        model.dropout.p = 0.0
        logit = model(x)
        loss = F.cross_entropy(logit, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            model.fc.weight.data.renorm_(2, 0, 0.5)
        res["losses"].append(loss.item())
        res["norms"].append(model.fc.weight.norm(dim=1))
    res["pad_grad"] = model.embed.weight.grad[0]
    res["emb"] = model.embed.weight
    res["fc"] = model.fc.weight
    res["acc"] = (torch.max(logit, 1)[1].view(y.size()).data == y.data).sum().item()
    model.eval()
    with torch.no_grad():
        res["eval"] = F.softmax(model(x), dim=1)
    # Conv1d variant: max-over-time by .max(dim=2)[0] and adaptive pooling agree
    conv = nn.Conv1d(emb, 4, 3, padding=1)
    fill_(torch, conv, rng)
    h = conv(model.embed(x).transpose(1, 2))
    res["c1"] = h.max(dim=2)[0]
    res["c1_adapt"] = F.adaptive_max_pool1d(h, 1).squeeze(-1)
    return res


def fasttext_program(torch):
    """fastText with the hashing trick for bigrams and EmbeddingBag over offsets."""
    rng = np.random.default_rng(1)
    nn, F = torch.nn, torch.nn.functional
    vocab, buckets, dim, classes = 20, 31, 5, 4
    docs = [list(rng.integers(1, vocab, size=n)) for n in (4, 7, 2, 5)]

    def ids(doc):
        grams = [int(t) for t in doc]
        grams += [vocab + (int(a) * 116049371 + int(b)) % buckets for a, b in zip(doc, doc[1:])]
        return grams

    flat = [ids(d) for d in docs]
    text = torch.tensor([t for d in flat for t in d])
    offsets = torch.tensor([0] + [len(d) for d in flat][:-1]).cumsum(dim=0)
    label = torch.from_numpy(rng.integers(0, classes, len(docs)))

    class FastText(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.EmbeddingBag(vocab + buckets, dim, mode="mean")
            self.fc = nn.Linear(dim, classes)
            self.init_weights()

        def init_weights(self):
            self.embedding.weight.data.uniform_(-0.5, 0.5)
            self.fc.weight.data.uniform_(-0.5, 0.5)
            self.fc.bias.data.zero_()

        def forward(self, text, offsets):
            return self.fc(self.embedding(text, offsets))

    model = FastText()
    fill_(torch, model, rng)
    opt = torch.optim.SGD(model.parameters(), lr=4.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.9)
    res = {"losses": [], "lr": []}
    for _ in range(3):
        opt.zero_grad()
        out = model(text, offsets)
        loss = F.cross_entropy(out, label)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
        res["lr"].append(sched.get_last_lr()[0])
    res["emb"], res["fc"] = model.embedding.weight, model.fc.weight
    # sum mode with per-sample weights and a padding index; max mode; 2-D input without offsets
    bag = nn.EmbeddingBag(10, 3, mode="sum", padding_idx=0)
    fill_(torch, bag, rng)
    inp = torch.tensor([1, 0, 4, 5, 0, 9, 2])
    w = normal(torch, rng, 7).requires_grad_()
    o = bag(inp, torch.tensor([0, 3, 3]), per_sample_weights=w)
    o.pow(2).sum().backward()
    res["sum"], res["psw_grad"], res["bag_grad"] = o, w.grad, bag.weight.grad
    mx = nn.EmbeddingBag(10, 3, mode="max")
    fill_(torch, mx, rng)
    o2 = mx(torch.tensor([[1, 2, 3], [4, 4, 0]]))
    o2.sum().backward()
    res["max"], res["max_grad"] = o2, mx.weight.grad
    o3 = F.embedding_bag(inp, bag.weight, torch.tensor([0, 2, 5, 7]), mode="mean",
                         include_last_offset=True)
    res["last_offset"] = o3
    return res


def han_program(torch):
    """Hierarchical attention networks (Yang et al. 2016), packed GRUs and masked attention."""
    rng = np.random.default_rng(2)
    nn, F = torch.nn, torch.nn.functional
    pack_padded_sequence = torch.nn.utils.rnn.pack_padded_sequence
    pad_packed_sequence = torch.nn.utils.rnn.pad_packed_sequence
    vocab, emb, hid, classes = 20, 5, 4, 3

    class AttnPool(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.proj = nn.Linear(d, d)
            self.context = nn.Parameter(torch.empty(d, 1))

        def forward(self, h, mask):
            u = torch.tanh(self.proj(h))
            scores = torch.matmul(u, self.context).squeeze(-1)
            scores = scores.masked_fill(~mask, float("-inf"))
            alpha = F.softmax(scores, dim=-1)
            return torch.bmm(alpha.unsqueeze(1), h).squeeze(1), alpha

    class HAN(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, emb, padding_idx=0)
            self.word_gru = nn.GRU(emb, hid, batch_first=True, bidirectional=True)
            self.word_attn = AttnPool(2 * hid)
            self.sent_gru = nn.GRU(2 * hid, hid, batch_first=True, bidirectional=True)
            self.sent_attn = AttnPool(2 * hid)
            self.fc = nn.Linear(2 * hid, classes)

        def forward(self, docs, word_lens, sent_lens):
            b, s, w = docs.shape
            flat = docs.view(b * s, w)
            flat_lens = word_lens.view(-1)
            keep = flat_lens > 0
            words = self.embed(flat[keep])
            packed = pack_padded_sequence(words, flat_lens[keep].cpu(), batch_first=True,
                                          enforce_sorted=False)
            out, _ = self.word_gru(packed)
            out, lens = pad_packed_sequence(out, batch_first=True, total_length=w)
            mask = torch.arange(w).unsqueeze(0) < lens.unsqueeze(1)
            sent_vecs, word_alpha = self.word_attn(out, mask)
            sents = torch.zeros(b * s, sent_vecs.size(1))
            sents[keep] = sent_vecs
            sents = sents.view(b, s, -1)
            packed = pack_padded_sequence(sents, sent_lens, batch_first=True,
                                          enforce_sorted=False)
            out, h_n = self.sent_gru(packed)
            out, _ = pad_packed_sequence(out, batch_first=True, padding_value=0.0)
            smask = torch.arange(out.size(1)).unsqueeze(0) < sent_lens.unsqueeze(1)
            doc, sent_alpha = self.sent_attn(out, smask)
            return self.fc(doc), word_alpha, sent_alpha, h_n

    word_lens = torch.tensor([[3, 5, 2], [4, 0, 0], [1, 2, 0]])
    sent_lens = (word_lens > 0).sum(1)
    docs = torch.zeros(3, 3, 5, dtype=torch.long)
    toks = torch.from_numpy(_tokens(rng, 3, 3, 5))
    for i in range(3):
        for j in range(3):
            docs[i, j, :word_lens[i, j]] = toks[i, j, :word_lens[i, j]]
    y = torch.tensor([0, 2, 1])
    model = HAN()
    fill_(torch, model, rng)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=1e-4)
    res = {"losses": []}
    for _ in range(2):
        logits, wa, sa, h_n = model(docs, word_lens, sent_lens)
        loss = F.nll_loss(F.log_softmax(logits, dim=1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["wa"], res["sa"], res["h_n"] = wa, sa, h_n
    res["gru_grad"] = model.word_gru.weight_hh_l0_reverse.grad
    res["ctx_grad"] = model.sent_attn.context.grad
    res["emb_pad"] = model.embed.weight.grad[0]
    res["sorted_idx"] = pack_padded_sequence(
        torch.zeros(3, 3, 1), sent_lens, batch_first=True, enforce_sorted=False).sorted_indices
    return res


def pointer_generator_program(torch):
    """See et al. (2017): attention with coverage, p_gen, copy via scatter_add, Adagrad."""
    rng = np.random.default_rng(3)
    nn, F = torch.nn, torch.nn.functional
    vocab, ext, emb, hid, src_len, tgt_len, b = 12, 3, 5, 4, 6, 4, 2

    class PG(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(vocab, emb)
            self.encoder = nn.LSTM(emb, hid, batch_first=True, bidirectional=True)
            self.reduce_h = nn.Linear(2 * hid, hid)
            self.reduce_c = nn.Linear(2 * hid, hid)
            self.W_h = nn.Linear(2 * hid, 2 * hid, bias=False)
            self.W_s = nn.Linear(2 * hid, 2 * hid)
            self.W_c = nn.Linear(1, 2 * hid, bias=False)
            self.v = nn.Linear(2 * hid, 1, bias=False)
            self.cell = nn.LSTMCell(emb + 2 * hid, hid)
            self.p_gen = nn.Linear(4 * hid + emb, 1)
            self.out1 = nn.Linear(3 * hid, hid)
            self.out2 = nn.Linear(hid, vocab)

        def attention(self, s_t, enc_out, enc_feat, mask, coverage):
            b, t, n = enc_out.shape
            dec = self.W_s(s_t).unsqueeze(1).expand(b, t, n).contiguous()
            att = enc_feat + dec.view(-1, n) + self.W_c(coverage.view(-1, 1))
            scores = self.v(torch.tanh(att)).view(-1, t)
            attn_ = F.softmax(scores, dim=1) * mask
            attn = attn_ / attn_.sum(1, keepdim=True)
            c_t = torch.bmm(attn.unsqueeze(1), enc_out).squeeze(1)
            return c_t, attn, coverage + attn

    model = PG()
    fill_(torch, model, rng)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.15, initial_accumulator_value=0.1)
    src_ext = torch.from_numpy(_tokens(rng, b, src_len, vocab=vocab + ext))
    src = src_ext.masked_fill(src_ext >= vocab, 1)
    lens = torch.tensor([6, 4])
    mask = (torch.arange(src_len).unsqueeze(0) < lens.unsqueeze(1)).float()
    tgt = torch.from_numpy(_tokens(rng, b, tgt_len + 1, vocab=vocab + ext))
    dec_in = tgt[:, :-1].masked_fill(tgt[:, :-1] >= vocab, 1)
    extra_zeros = torch.zeros(b, ext)
    res = {"losses": [], "cov": []}
    for _ in range(2):
        x = model.embedding(src)
        packed = nn.utils.rnn.pack_padded_sequence(x, lens, batch_first=True)
        enc, (h, c) = model.encoder(packed)
        enc, _ = nn.utils.rnn.pad_packed_sequence(enc, batch_first=True)
        enc = enc.contiguous()
        enc_feat = model.W_h(enc.view(-1, 2 * hid))
        h = F.relu(model.reduce_h(h.transpose(0, 1).contiguous().view(-1, 2 * hid)))
        c = F.relu(model.reduce_c(c.transpose(0, 1).contiguous().view(-1, 2 * hid)))
        coverage = torch.zeros(b, src_len)
        c_t = torch.zeros(b, 2 * hid)
        step_losses = []
        for di in range(tgt_len):
            y_emb = model.embedding(dec_in[:, di])
            h, c = model.cell(torch.cat((c_t, y_emb), 1), (h, c))
            s_t = torch.cat((h.view(-1, hid), c.view(-1, hid)), 1)
            c_t, attn, next_cov = model.attention(s_t, enc, enc_feat, mask, coverage)
            p_gen = torch.sigmoid(model.p_gen(torch.cat((c_t, s_t, y_emb), 1)))
            vocab_dist = F.softmax(model.out2(model.out1(torch.cat((h, c_t), 1))), dim=1)
            vocab_dist_ = torch.cat([p_gen * vocab_dist, extra_zeros], 1)
            final = vocab_dist_.scatter_add(1, src_ext, (1 - p_gen) * attn)
            gold = torch.gather(final, 1, tgt[:, di + 1].unsqueeze(1)).squeeze()
            step_loss = -torch.log(gold + 1e-12)
            step_loss = step_loss + torch.sum(torch.min(attn, coverage), 1)
            coverage = next_cov
            step_losses.append(step_loss)
        loss = torch.mean(torch.stack(step_losses, 1).sum(1) / tgt_len)
        opt.zero_grad()
        loss.backward()
        res["gnorm"] = nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        opt.step()
        res["losses"].append(loss.item())
        res["cov"].append(coverage)
    res["final"] = final
    res["state_sum"] = opt.state[model.p_gen.weight]["sum"]
    res["w"] = model.out2.weight
    res["enc_grad"] = model.encoder.weight_ih_l0_reverse.grad
    return res


def esim_bidaf_program(torch):
    """ESIM's soft alignment and BiDAF's trilinear attention with highway and a char-CNN."""
    rng = np.random.default_rng(4)
    nn, F = torch.nn, torch.nn.functional
    d, b, la, lb, chars, clen = 4, 2, 5, 4, 15, 6

    def masked_softmax(t, mask):
        # ESIM (coetaeijs/Alan Carpenter's) version: softmax, zero the pads, renormalise
        shape = t.size()
        t = t.view(-1, shape[-1])
        mask = mask.unsqueeze(1).expand_as(t.view(shape)).contiguous().view(-1, shape[-1])
        result = F.softmax(t * mask, dim=-1) * mask
        result = result / (result.sum(dim=-1, keepdim=True) + 1e-13)
        return result.view(*shape)

    def weighted_sum(tensor, weights, mask):
        out = weights.bmm(tensor)
        return out * mask.unsqueeze(1).transpose(-1, -2).float()

    class Highway(nn.Module):
        def __init__(self, dim, layers=2):
            super().__init__()
            self.lin = nn.ModuleList([nn.Linear(dim, 2 * dim) for _ in range(layers)])
            for layer in self.lin:
                layer.bias[dim:].data.fill_(1)

        def forward(self, x):
            for layer in self.lin:
                h, g = layer(x).chunk(2, dim=-1)
                g = torch.sigmoid(g)
                x = g * x + (1 - g) * F.relu(h)
            return x

    char_emb = nn.Embedding(chars, 3, padding_idx=0)
    char_cnn = nn.Conv1d(3, d, 3, padding=1)
    highway = Highway(2 * d)
    word_emb = nn.Embedding(20, d)
    enc = nn.LSTM(2 * d, d // 2, batch_first=True, bidirectional=True)
    att_w = nn.Linear(3 * d, 1)
    proj = nn.Sequential(nn.Linear(4 * d, d), nn.ReLU())
    cls = nn.Linear(4 * d, 3)
    mods = nn.ModuleList([char_emb, char_cnn, highway, word_emb, enc, att_w, proj, cls])
    fill_(torch, mods, rng)
    opt = torch.optim.Adamax(mods.parameters(), lr=0.02)
    wa = torch.from_numpy(_tokens(rng, b, la))
    wb = torch.from_numpy(_tokens(rng, b, lb))
    ca = torch.from_numpy(_tokens(rng, b, la, clen, vocab=chars))
    cb = torch.from_numpy(_tokens(rng, b, lb, clen, vocab=chars))
    ca[..., 4:] = 0
    ma = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]).float()
    mb = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]]).float()
    y = torch.tensor([2, 0])

    def embed(w, ch):
        bb, ll, cl = ch.shape
        x = char_emb(ch.view(-1, cl)).transpose(1, 2)
        x = F.relu(char_cnn(x)).max(dim=-1)[0].view(bb, ll, -1)
        return highway(torch.cat([word_emb(w), x], -1))

    res = {"losses": []}
    for _ in range(2):
        a, _ = enc(embed(wa, ca))
        bq, _ = enc(embed(wb, cb))
        # ESIM: similarity, masked softmax both ways, enhancement [a; a~; a-a~; a*a~]
        sim = a.bmm(bq.transpose(2, 1).contiguous())
        a2b = masked_softmax(sim, mb)
        b2a = masked_softmax(sim.transpose(1, 2).contiguous(), ma)
        a_t = weighted_sum(bq, a2b, ma)
        b_t = weighted_sum(a, b2a, mb)
        ea = proj(torch.cat([a, a_t, a - a_t, a * a_t], dim=-1))
        eb = proj(torch.cat([bq, b_t, bq - b_t, bq * b_t], dim=-1))
        va_avg = torch.sum(ea * ma.unsqueeze(2), 1) / torch.sum(ma, 1, keepdim=True)
        vb_avg = torch.sum(eb * mb.unsqueeze(2), 1) / torch.sum(mb, 1, keepdim=True)
        va_max, _ = ea.masked_fill(ma.unsqueeze(2) == 0, -1e7).max(dim=1)
        vb_max, _ = eb.masked_fill(mb.unsqueeze(2) == 0, -1e7).max(dim=1)
        logits = cls(torch.cat([va_avg, va_max, vb_avg, vb_max], 1))
        # BiDAF: trilinear similarity, context-to-query and query-to-context attention
        c_ = a.unsqueeze(2).expand(b, la, lb, d)
        q_ = bq.unsqueeze(1).expand(b, la, lb, d)
        s = att_w(torch.cat([c_, q_, c_ * q_], -1)).squeeze(-1)
        s = s.masked_fill(mb.unsqueeze(1) == 0, -1e30)
        c2q = torch.bmm(F.softmax(s, dim=-1), bq)
        b_att = F.softmax(torch.max(s, dim=2)[0], dim=1).unsqueeze(1)
        q2c = torch.bmm(b_att, a).repeat(1, la, 1)
        g = torch.cat([a, c2q, a * c2q, a * q2c], -1)
        start = F.log_softmax(g.sum(-1).masked_fill(ma == 0, -1e30), dim=-1)
        loss = F.cross_entropy(logits, y) + F.nll_loss(start, torch.tensor([1, 2]))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(mods.parameters(), 10.0)
        opt.step()
        res["losses"].append(loss.item())
    res["a2b"], res["q2c"], res["start"], res["logits"] = a2b, q2c, start, logits
    res["char_grad"] = char_emb.weight.grad
    res["hw_grad"] = highway.lin[0].weight.grad
    return res


def seq2seq_program(torch):
    """GRU seq2seq with teacher forcing, label smoothing by hand and gradient accumulation."""
    rng = np.random.default_rng(5)
    nn, F = torch.nn, torch.nn.functional
    vocab, emb, hid, pad, eps, accum = 10, 5, 6, 0, 0.1, 2

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.src_emb = nn.Embedding(vocab, emb, padding_idx=pad)
            self.tgt_emb = nn.Embedding(vocab, emb, padding_idx=pad)
            self.encoder = nn.GRU(emb, hid, num_layers=2, dropout=0.0)
            self.decoder = nn.GRU(emb + hid, hid, num_layers=2)
            self.out = nn.Linear(hid, vocab)

        def forward(self, src, tgt, teacher):
            _, hidden = self.encoder(self.src_emb(src))
            context = hidden[-1]
            inp = tgt[0]
            outputs = torch.zeros(tgt.shape[0], tgt.shape[1], vocab)
            for t in range(1, tgt.shape[0]):
                x = torch.cat((self.tgt_emb(inp), context), dim=1).unsqueeze(0)
                o, hidden = self.decoder(x, hidden)
                pred = self.out(o.squeeze(0))
                outputs[t] = pred
                inp = tgt[t] if teacher[t] else pred.argmax(1)
            return outputs

    def smoothed_nll(logits, target):
        logp = F.log_softmax(logits, dim=-1)
        true = torch.zeros_like(logp)
        true.fill_(eps / (vocab - 2))
        true.scatter_(1, target.data.unsqueeze(1), 1 - eps)
        true[:, pad] = 0
        rows = torch.nonzero(target.data == pad, as_tuple=False)
        if rows.dim() > 0 and rows.numel() > 0:
            true.index_fill_(0, rows.squeeze(), 0.0)
        return torch.sum(-true * logp) / (target != pad).sum()

    model = Seq2Seq()
    fill_(torch, model, rng)
    opt = torch.optim.RMSprop(model.parameters(), lr=0.01, momentum=0.5)
    res = {"losses": [], "ref": []}
    teacher = [True, True, False, True, False]
    opt.zero_grad()
    for step in range(4):
        src = torch.from_numpy(_tokens(rng, 6, 3, vocab=vocab))
        tgt = torch.from_numpy(_tokens(rng, 5, 3, vocab=vocab))
        tgt[3:, 1] = pad
        out = model(src, tgt, teacher)
        flat, target = out[1:].view(-1, vocab), tgt[1:].reshape(-1)
        loss = smoothed_nll(flat, target) / accum
        ref = F.cross_entropy(flat, target, ignore_index=pad, label_smoothing=eps)
        loss.backward()
        if (step + 1) % accum == 0:
            res["gnorm_" + str(step)] = nn.utils.clip_grad_norm_(model.parameters(), 1.0,
                                                                 norm_type=2.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
        res["losses"].append(loss.item())
        res["ref"].append(ref.item())
    res["grad_none"] = [p.grad is None for p in model.parameters()]
    res["w"] = model.out.weight
    res["dec"] = model.decoder.weight_hh_l1
    return res


def text_cnn_zoo_program(torch):
    """Chinese-Text-Classification-Pytorch's DPCNN and TextRCNN, Kalchbrenner's DCNN (k-max
    pooling that keeps word order, folding) and Zhang's char-CNN on one-hot characters."""
    rng = np.random.default_rng(6)
    nn, F = torch.nn, torch.nn.functional
    b, seq, emb, nf, classes = 2, 9, 5, 4, 3
    x = torch.from_numpy(_tokens(rng, b, seq))
    embed = nn.Embedding(20, emb, padding_idx=19)
    # DPCNN
    conv_region = nn.Conv2d(1, nf, (3, emb), stride=1)
    conv = nn.Conv2d(nf, nf, (3, 1), stride=1)
    max_pool = nn.MaxPool2d(kernel_size=(3, 1), stride=2)
    padding1 = nn.ZeroPad2d((0, 0, 1, 1))
    padding2 = nn.ZeroPad2d((0, 0, 0, 1))
    fc = nn.Linear(nf, classes)
    # TextRCNN
    lstm = nn.LSTM(emb, 3, 2, bidirectional=True, batch_first=True)
    rcnn_fc = nn.Linear(6 + emb, classes)
    # DCNN: wide conv, k-max, folding
    dconv = nn.Conv1d(emb, 2 * nf, 3, padding=2)
    dfc = nn.Linear(nf * 3, classes)
    # char-CNN
    cconv = nn.Sequential(nn.Conv1d(8, nf, 3), nn.ReLU(), nn.MaxPool1d(3),
                          nn.Conv1d(nf, nf, 2), nn.Threshold(0.1, 0.0), nn.MaxPool1d(2, 2))
    cfc = nn.Linear(nf * 3, classes)
    mods = nn.ModuleList([embed, conv_region, conv, fc, lstm, rcnn_fc, dconv, dfc, cconv, cfc])
    fill_(torch, mods, rng)
    opt = torch.optim.Adam(mods.parameters(), lr=1e-2, eps=1e-7)
    y = torch.tensor([1, 2])
    chars = torch.from_numpy(rng.integers(0, 8, size=(b, 23)))

    def dpcnn(e):
        h = conv_region(e.unsqueeze(1))
        h = conv(F.relu(padding1(h)))
        h = conv(F.relu(padding1(h)))
        while h.size()[2] > 2:
            px = max_pool(padding2(h))
            h = conv(F.relu(padding1(px)))
            h = conv(F.relu(padding1(h)))
            h = h + px
        return fc(h.squeeze())

    def rcnn(e):
        out, _ = lstm(e)
        out = F.relu(torch.cat((e, out), 2)).permute(0, 2, 1)
        return rcnn_fc(F.max_pool1d(out, out.size(2)).squeeze())

    def kmax(h, k, dim):
        index = h.topk(k, dim=dim)[1].sort(dim=dim)[0]
        return h.gather(dim, index)

    def dcnn(e):
        h = dconv(e.transpose(1, 2))
        h = h.view(b, nf, 2, -1).sum(2)                     # folding pairs of rows
        h = torch.tanh(kmax(h, 3, 2))
        return dfc(h.flatten(1))

    def char_cnn(c):
        onehot = F.one_hot(c, 8).float().transpose(1, 2)
        return cfc(cconv(onehot).view(b, -1))

    res = {"losses": []}
    for _ in range(3):
        e = embed(x)
        outs = [dpcnn(e), rcnn(e), dcnn(e), char_cnn(chars)]
        loss = sum(F.cross_entropy(o, y) for o in outs)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["outs"] = outs
    res["region_g"] = conv_region.weight.grad
    res["dconv_g"] = dconv.weight.grad
    res["cconv_g"] = cconv[3].weight.grad
    res["lstm_g"] = lstm.weight_ih_l1_reverse.grad
    res["kmax"] = kmax(torch.tensor([[3., 1., 4., 1., 5., 9., 2., 6.]]), 3, 1)
    return res


PROGRAMS = [textcnn_program, fasttext_program, han_program, pointer_generator_program,
            esim_bidaf_program, seq2seq_program, text_cnn_zoo_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
