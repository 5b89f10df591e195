"""Classic NLP, second part: AWD-LSTM language modelling (weight drop on weight_hh, embedding
dropout, locked dropout, AR/TAR, NT-ASGD, repackaged hidden states, variable BPTT with the lr
rescaled), an adaptive-softmax LM (AdaptiveLogSoftmaxWithLoss), fastText with sparse gradients
(EmbeddingBag(sparse=True) + SparseAdam), embeddings with max_norm / scale_grad_by_freq, and
the packed-sequence plumbing of the reference repos (pack_sequence, PackedSequence.data
ops, unpad/unpack, sort-and-restore, LSTM proj_size)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def awd_lstm_program(torch):
    """salesforce/awd-lstm-lm: WeightDrop, embedded_dropout, LockedDropout, AR/TAR, ASGD."""
    rng = np.random.default_rng(10)
    nn, F = torch.nn, torch.nn.functional
    vocab, emb, hid, bptt, b = 15, 6, 6, 4, 3

    def embedded_dropout(embed, words, mask_np, scale=None):
        mask = torch.from_numpy(mask_np).expand_as(embed.weight)
        masked = mask * embed.weight
        if scale:
            masked = scale.expand_as(masked) * masked
        return F.embedding(words, masked, embed.padding_idx, embed.max_norm,
                           embed.norm_type, embed.scale_grad_by_freq, embed.sparse)

    class LockedDropout(nn.Module):
        def forward(self, x, mask_np):
            mask = torch.from_numpy(mask_np).requires_grad_(False)
            return mask.expand_as(x) * x

    class WeightDrop(nn.Module):
        def __init__(self, module, weights, dropout):
            super().__init__()
            self.module, self.weights, self.dropout = module, weights, dropout
            for name in weights:
                w = getattr(module, name)
                del module._parameters[name]
                module.register_parameter(name + "_raw", nn.Parameter(w.data))

        def forward(self, *args, masks):
            for name in self.weights:
                raw = getattr(self.module, name + "_raw")
                w = raw * torch.from_numpy(masks[name]) / (1 - self.dropout)
                setattr(self.module, name, w)
            return self.module.forward(*args)

    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(vocab, emb)
            self.rnns = nn.ModuleList([
                WeightDrop(nn.LSTM(emb, hid), ["weight_hh_l0"], 0.5),
                WeightDrop(nn.LSTM(hid, emb), ["weight_hh_l0"], 0.5)])
            self.decoder = nn.Linear(emb, vocab)
            self.decoder.weight = self.encoder.weight  # tied
            self.lockdrop = LockedDropout()

        def forward(self, x, hidden, masks):
            e = embedded_dropout(self.encoder, x, masks["emb"]) * 1.0
            out = self.lockdrop(e, masks["in"])
            new_hidden, raw_outputs, outputs = [], [], []
            for i, rnn in enumerate(self.rnns):
                out, h = rnn(out, hidden[i], masks=masks["wd"][i])
                new_hidden.append(h)
                raw_outputs.append(out)
                if i != len(self.rnns) - 1:
                    out = self.lockdrop(out, masks["hid"])
                    outputs.append(out)
            out = self.lockdrop(out, masks["out"])
            outputs.append(out)
            return self.decoder(out.view(-1, out.size(2))), new_hidden, raw_outputs, outputs

    def repackage(h):
        if isinstance(h, torch.Tensor):
            return h.detach()
        return tuple(repackage(v) for v in h)

    def bern(shape, p):
        return (rng.random(shape) > p).astype(np.float32) / (1 - p)

    model = RNNModel()
    fill_(torch, model, rng)
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=2.0, weight_decay=1.2e-6)
    data = torch.from_numpy(rng.integers(0, vocab, size=(14, b)))
    hidden = [(torch.zeros(1, b, hid), torch.zeros(1, b, hid)),
              (torch.zeros(1, b, emb), torch.zeros(1, b, emb))]
    res = {"losses": [], "names": sorted(n for n, _ in model.named_parameters())}
    i, step = 0, 0
    seq_lens = [4, 3, 5]
    while i < data.size(0) - 1 - 1 and step < 3:
        seq_len = min(seq_lens[step], data.size(0) - 1 - i)
        lr2 = opt.param_groups[0]["lr"]
        opt.param_groups[0]["lr"] = lr2 * seq_len / bptt
        x, y = data[i:i + seq_len], data[i + 1:i + 1 + seq_len].reshape(-1)
        masks = {"emb": (rng.random((vocab, 1)) > 0.1).astype(np.float32) / 0.9,
                 "in": bern((1, b, emb), 0.3), "hid": bern((1, b, hid), 0.25),
                 "out": bern((1, b, emb), 0.4),
                 "wd": [{"weight_hh_l0": (rng.random((4 * hid, hid)) > 0.5).astype(np.float32)},
                        {"weight_hh_l0": (rng.random((4 * emb, emb)) > 0.5).astype(np.float32)}]}
        hidden = repackage(hidden)
        opt.zero_grad()
        logits, hidden, raw, dropped = model(x, hidden, masks)
        raw_loss = F.cross_entropy(logits, y)
        loss = raw_loss + 2 * dropped[-1].pow(2).mean()
        loss = loss + 1 * (raw[-1][1:] - raw[-1][:-1]).pow(2).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 0.25)
        opt.step()
        opt.param_groups[0]["lr"] = lr2
        res["losses"].append(raw_loss.item())
        i += seq_len
        step += 1
    res["tied"] = model.decoder.weight is model.encoder.weight
    res["enc"] = model.encoder.weight
    res["raw_hh"] = model.rnns[0].module.weight_hh_l0_raw
    res["raw_hh_grad"] = model.rnns[1].module.weight_hh_l0_raw.grad
    res["hidden"] = hidden[1][0]
    # NT-ASGD: switch to ASGD and evaluate with the averaged weights ('ax')
    opt = torch.optim.ASGD(params, lr=0.5, t0=0, lambd=0.0, weight_decay=1.2e-6)
    for _ in range(3):
        masks = {"emb": np.ones((vocab, 1), np.float32), "in": np.ones((1, b, emb), np.float32),
                 "hid": np.ones((1, b, hid), np.float32), "out": np.ones((1, b, emb), np.float32),
                 "wd": [{"weight_hh_l0": np.full((4 * hid, hid), 0.5, np.float32)},
                        {"weight_hh_l0": np.full((4 * emb, emb), 0.5, np.float32)}]}
        opt.zero_grad()
        logits, _, _, _ = model(data[:4], repackage(hidden), masks)
        loss = F.cross_entropy(logits, data[1:5].reshape(-1))
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    tmp = {}
    for prm in params:
        tmp[prm] = prm.data.clone()
        prm.data = opt.state[prm]["ax"].clone()
    res["ax_enc"] = model.encoder.weight
    res["eta"] = opt.state[params[0]]["eta"]
    res["mu"] = opt.state[params[0]]["mu"]
    for prm in params:
        prm.data = tmp[prm].clone()
    res["restored"] = model.encoder.weight
    return res


def adaptive_softmax_program(torch):
    """A word LM on AdaptiveLogSoftmaxWithLoss: loss, log_prob, predict, head/tail grads."""
    rng = np.random.default_rng(11)
    nn = torch.nn
    vocab, d = 20, 8
    emb = nn.Embedding(vocab, d)
    rnn = nn.GRU(d, d, batch_first=True)
    asm = nn.AdaptiveLogSoftmaxWithLoss(d, vocab, cutoffs=[4, 10], div_value=2.0,
                                        head_bias=True)
    mods = nn.ModuleList([emb, rnn, asm])
    fill_(torch, mods, rng)
    opt = torch.optim.Adam(mods.parameters(), lr=0.01, betas=(0.0, 0.999), amsgrad=True)
    x = torch.from_numpy(rng.integers(0, vocab, size=(3, 5)))
    y = torch.from_numpy(np.concatenate([[0, 3, 5, 9, 10, 19], rng.integers(0, vocab, 9)]))
    res = {"losses": []}
    for _ in range(3):
        h, _ = rnn(emb(x))
        out = asm(h.reshape(-1, d), y)
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        res["losses"].append(out.loss.item())
    res["output"] = out.output
    res["fields"] = list(out._fields)
    with torch.no_grad():
        h, _ = rnn(emb(x))
        flat = h.reshape(-1, d)
        res["log_prob"] = asm.log_prob(flat)
        res["predict"] = asm.predict(flat)
        res["lse"] = asm.log_prob(flat).exp().sum(1)
    res["head_grad"] = asm.head.weight.grad
    res["tail_grad"] = asm.tail[1][0].weight.grad
    res["tail_shapes"] = [str(tuple(m[1].weight.shape)) for m in asm.tail]
    try:
        asm(flat, torch.full((15,), vocab))
    except Exception as e:  # noqa: BLE001
        # ember adds a line naming the failing module (NOTE [Module error context])
        res["err"] = [type(e).__name__, str(e).split("\n  in model")[0]]
    return res


def sparse_fasttext_program(torch):
    """fastText-style training with sparse embedding gradients (SparseAdam + Adam)."""
    rng = np.random.default_rng(12)
    nn, F = torch.nn, torch.nn.functional
    vocab, dim, classes = 25, 4, 3
    bag = nn.EmbeddingBag(vocab, dim, mode="mean", sparse=True)
    fc = nn.Linear(dim, classes)
    fill_(torch, [bag.weight, fc.weight, fc.bias], rng)
    sparse_opt = torch.optim.SparseAdam(list(bag.parameters()), lr=0.1)
    dense_opt = torch.optim.Adam(fc.parameters(), lr=0.1)
    res = {"losses": []}
    for step in range(3):
        text = torch.from_numpy(rng.integers(0, 12, size=9))
        offsets = torch.tensor([0, 2, 6])
        y = torch.from_numpy(rng.integers(0, classes, 3))
        loss = F.cross_entropy(fc(bag(text, offsets)), y)
        sparse_opt.zero_grad()
        dense_opt.zero_grad()
        loss.backward()
        g = bag.weight.grad
        res["sparse_" + str(step)] = [g.is_sparse, g.layout == torch.sparse_coo]
        res["dense_grad_" + str(step)] = g.to_dense()
        res["nnz_" + str(step)] = g.coalesce()._nnz()
        sparse_opt.step()
        dense_opt.step()
        res["losses"].append(loss.item())
    res["w"], res["fc"] = bag.weight, fc.weight
    res["untouched"] = bag.weight[12:]
    # nn.Embedding(sparse=True) with plain SGD
    e = nn.Embedding(10, 3, sparse=True, padding_idx=2)
    fill_(torch, e, rng)
    opt = torch.optim.SGD(e.parameters(), lr=0.5)
    idx = torch.tensor([[1, 2, 3], [3, 3, 9]])
    e(idx).pow(2).sum().backward()
    res["emb_grad"] = e.weight.grad.to_dense()
    res["emb_idx"] = e.weight.grad.coalesce().indices()
    opt.step()
    res["emb_w"] = e.weight
    try:
        torch.optim.Adam(e.parameters()).step()
    except Exception as ex:  # noqa: BLE001
        res["adam_err"] = [type(ex).__name__, str(ex)]
    return res


def embedding_norms_program(torch):
    """Embedding(max_norm=...) renormalises rows in place; scale_grad_by_freq; from_pretrained."""
    rng = np.random.default_rng(13)
    nn, F = torch.nn, torch.nn.functional
    e = nn.Embedding(8, 4, max_norm=1.0, norm_type=2.0, scale_grad_by_freq=True)
    fill_(torch, e, rng, scale=1.0)
    idx = torch.tensor([[0, 1, 1], [5, 1, 7]])
    out = e(idx)
    (out * normal(torch, rng, 2, 3, 4)).sum().backward()
    res = {"out": out, "w": e.weight, "grad": e.weight.grad,
           "row_norms": e.weight.norm(dim=1)}
    w = normal(torch, rng, 6, 3) * 2
    o = F.embedding(torch.tensor([0, 3, 3]), w, max_norm=0.5, norm_type=1.0)
    res["fn_out"], res["fn_w"] = o, w
    pre = nn.Embedding.from_pretrained(normal(torch, rng, 5, 3), max_norm=0.7)
    res["pre_rg"] = [pre.weight.requires_grad]
    res["pre_out"] = pre(torch.tensor([4, 0]))
    res["pre_w"] = pre.weight
    bag = nn.EmbeddingBag.from_pretrained(normal(torch, rng, 5, 3), mode="sum", max_norm=0.9,
                                          freeze=False)
    res["bag"] = bag(torch.tensor([[1, 2], [2, 4]]))
    res["bag_w"] = bag.weight
    # the classic renorm_ max-norm constraint on a classifier (TextCNN's l2 constraint)
    lin = nn.Linear(4, 3)
    fill_(torch, lin, rng, scale=2.0)
    with torch.no_grad():
        lin.weight.renorm_(2, 0, 3.0)
    res["renorm"] = lin.weight
    res["renorm_fn"] = torch.renorm(normal(torch, rng, 3, 4, 2), p=1, dim=1, maxnorm=1.5)
    return res


def packed_plumbing_program(torch):
    """pack_sequence, PackedSequence.data ops, sort/restore, unpad, LSTM proj_size."""
    rng = np.random.default_rng(14)
    nn, F = torch.nn, torch.nn.functional
    rnnu = nn.utils.rnn
    seqs = [normal(torch, rng, n, 3) for n in (2, 5, 3)]
    lstm = nn.LSTM(3, 4, num_layers=2, proj_size=2, batch_first=True, bidirectional=True)
    lin = nn.Linear(3, 3)
    fill_(torch, lstm, rng)
    fill_(torch, lin, rng)
    packed = rnnu.pack_sequence(seqs, enforce_sorted=False)
    res = {"bs": packed.batch_sizes, "sorted": packed.sorted_indices,
           "unsorted": packed.unsorted_indices}
    # elementwise on .data, rewrapped as the repos do
    packed2 = rnnu.PackedSequence(torch.tanh(lin(packed.data)), packed.batch_sizes,
                                  packed.sorted_indices, packed.unsorted_indices)
    out, (h, c) = lstm(packed2)
    padded, lens = rnnu.pad_packed_sequence(out, batch_first=True)
    res["padded"], res["lens"], res["h"], res["c"] = padded, lens, h, c
    res["h_shape"] = [str(tuple(h.shape)), str(tuple(c.shape))]
    (padded.sum() + h.pow(2).sum()).backward()
    res["w_hr"] = lstm.weight_hr_l1_reverse.grad
    res["lin_g"] = lin.weight.grad
    unp = rnnu.unpack_sequence(out)
    res["unpacked"] = [u.detach() for u in unp]
    unpad = rnnu.unpad_sequence(padded, lens, batch_first=True)
    res["unpad"] = [u.detach() for u in unpad]
    left = rnnu.pad_sequence(seqs, batch_first=True, padding_value=-1.0, padding_side="left")
    res["left"] = left
    # the older idiom: sort by length, pack, run, restore the order
    gru = nn.GRU(3, 2, batch_first=True)
    fill_(torch, gru, rng)
    x = rnnu.pad_sequence(seqs, batch_first=True)
    lengths = torch.tensor([2, 5, 3])
    sorted_lens, perm = torch.sort(lengths, descending=True)
    _, inv = torch.sort(perm)
    pk = rnnu.pack_padded_sequence(x.index_select(0, perm), sorted_lens, batch_first=True)
    o, hn = gru(pk, torch.zeros(1, 3, 2))
    o, _ = rnnu.pad_packed_sequence(o, batch_first=True, total_length=6)
    res["restored"] = o.index_select(0, inv)
    res["hn"] = hn[:, inv]
    res["last"] = o.index_select(0, inv).gather(
        1, (lengths - 1).view(-1, 1, 1).expand(-1, 1, 2)).squeeze(1)
    res["packed_to"] = [str(pk.to(torch.float64).data.dtype).split(".")[-1], pk.is_cuda]
    try:
        rnnu.pack_padded_sequence(x, lengths, batch_first=True)
    except Exception as e:  # noqa: BLE001
        res["err"] = [type(e).__name__, str(e)]
    try:
        rnnu.pack_padded_sequence(x, torch.tensor([2, 0, 3]), batch_first=True,
                                  enforce_sorted=False)
    except Exception as e:  # noqa: BLE001
        res["err0"] = [type(e).__name__, str(e)]
    res["cell_out"] = F.pad(packed.data, (1, 0), value=0.5)
    return res


PROGRAMS = [awd_lstm_program, adaptive_softmax_program, sparse_fasttext_program,
            embedding_norms_program, packed_plumbing_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
