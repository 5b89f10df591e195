"""Classic NLP, third part: fairseq's ConvS2S (weight-normed convolutions, GLU, causal padding,
attention scaled by sqrt(0.5)), Tai et al.'s child-sum Tree-LSTM, GloVe with sparse Adagrad,
QRNN/SRU forget-mult recurrences, and OpenNMT's global attention (sequence_mask, Luong
general/concat scores, input feeding) with its copy generator."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def convs2s_program(torch):
    """Gehring et al. (2017): weight_norm convs, GLU, residuals scaled by sqrt(0.5)."""
    rng = np.random.default_rng(20)
    nn, F = torch.nn, torch.nn.functional
    vocab, d, k, b, ls, lt = 12, 6, 3, 2, 5, 4

    def conv(cin, cout, kernel, padding):
        m = nn.Conv1d(cin, cout * 2, kernel, padding=padding)
        nn.init.normal_(m.weight, mean=0, std=math.sqrt(4 / (kernel * cin)))
        nn.init.constant_(m.bias, 0)
        return nn.utils.weight_norm(m, dim=2)

    emb_s, emb_t = nn.Embedding(vocab, d, padding_idx=1), nn.Embedding(vocab, d, padding_idx=1)
    pos = nn.Embedding(10, d)
    enc_conv = conv(d, d, k, k // 2)
    dec_conv = conv(d, d, k, k - 1)
    attn_in, attn_out = nn.Linear(d, d), nn.Linear(d, d)
    out = nn.utils.weight_norm(nn.Linear(d, vocab))
    mods = nn.ModuleList([emb_s, emb_t, pos, enc_conv, dec_conv, attn_in, attn_out, out])
    fill_(torch, mods, rng)
    opt = torch.optim.SGD(mods.parameters(), lr=0.25, momentum=0.99, nesterov=True)
    src = torch.from_numpy(rng.integers(2, vocab, size=(b, ls)))
    src[1, 3:] = 1
    tgt = torch.from_numpy(rng.integers(2, vocab, size=(b, lt + 1)))
    res = {"losses": [], "names": sorted(n for n, _ in out.named_parameters())}
    for _ in range(2):
        x = emb_s(src) + pos(torch.arange(ls))
        pad = src.eq(1)
        h = x.masked_fill(pad.unsqueeze(-1), 0).transpose(1, 2)
        h = F.glu(enc_conv(h), dim=1)
        enc = (h.transpose(1, 2) + x) * math.sqrt(0.5)
        enc_y = (enc + x) * math.sqrt(0.5)
        y = emb_t(tgt[:, :-1]) + pos(torch.arange(lt))
        g = dec_conv(y.transpose(1, 2))[:, :, :-(k - 1)]
        g = F.glu(g, dim=1).transpose(1, 2)
        q = (attn_in(g) + y) * math.sqrt(0.5)
        scores = torch.bmm(q, enc.transpose(1, 2)).float().masked_fill(
            pad.unsqueeze(1), float("-inf")).type_as(q)
        att = F.softmax(scores, dim=-1)
        ctx = torch.bmm(att, enc_y) * (ls * math.sqrt(1.0 / ls))
        g = (attn_out(ctx) + g) * math.sqrt(0.5)
        logits = out(g)
        loss = F.cross_entropy(logits.reshape(-1, vocab), tgt[:, 1:].reshape(-1),
                               ignore_index=1, reduction="sum") / b
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(mods.parameters(), 0.1)
        opt.step()
        res["losses"].append(loss.item())
    res["g"] = enc_conv.weight_g
    res["v_grad"] = dec_conv.weight_v.grad
    res["out_g"] = out.weight_g
    res["att"] = att
    nn.utils.remove_weight_norm(enc_conv)
    res["removed"] = enc_conv.weight
    res["after_names"] = sorted(n for n, _ in enc_conv.named_parameters())
    return res


def tree_lstm_program(torch):
    """Child-sum Tree-LSTM (Tai et al. 2015) over a small dependency tree, sentiment at nodes."""
    rng = np.random.default_rng(21)
    nn, F = torch.nn, torch.nn.functional
    d, h, classes = 4, 5, 3

    class ChildSumTreeLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.ioux = nn.Linear(d, 3 * h)
            self.iouh = nn.Linear(h, 3 * h)
            self.fx = nn.Linear(d, h)
            self.fh = nn.Linear(h, h)

        def node_forward(self, inputs, child_c, child_h):
            child_h_sum = torch.sum(child_h, dim=0, keepdim=True)
            iou = self.ioux(inputs) + self.iouh(child_h_sum)
            i, o, u = torch.split(iou, iou.size(1) // 3, dim=1)
            i, o, u = torch.sigmoid(i), torch.sigmoid(o), torch.tanh(u)
            f = torch.sigmoid(self.fh(child_h) + self.fx(inputs).repeat(len(child_h), 1))
            fc = torch.mul(f, child_c)
            c = torch.mul(i, u) + torch.sum(fc, dim=0, keepdim=True)
            return c, torch.mul(o, torch.tanh(c))

        def forward(self, tree, inputs, states):
            for child in tree["children"]:
                self.forward(child, inputs, states)
            if not tree["children"]:
                child_c = inputs[0].detach().new(1, h).fill_(0.).requires_grad_()
                child_h = inputs[0].detach().new(1, h).fill_(0.).requires_grad_()
            else:
                child_c, child_h = zip(*(states[id(c)] for c in tree["children"]))
                child_c, child_h = torch.cat(child_c, dim=0), torch.cat(child_h, dim=0)
            states[id(tree)] = self.node_forward(inputs[tree["idx"]], child_c, child_h)
            return states[id(tree)]

    def node(idx, *children):
        return {"idx": idx, "children": list(children)}

    tree = node(2, node(0), node(4, node(1), node(3)), node(5))
    model = ChildSumTreeLSTM()
    clf = nn.Linear(h, classes)
    fill_(torch, model, rng)
    fill_(torch, clf, rng)
    emb = nn.Embedding(10, d)
    fill_(torch, emb, rng)
    opt = torch.optim.Adagrad(list(model.parameters()) + list(clf.parameters())
                              + list(emb.parameters()), lr=0.05, weight_decay=1e-4,
                              lr_decay=0.01)
    words = torch.tensor([3, 1, 4, 1, 5, 9])
    res = {"losses": []}
    for _ in range(3):
        inputs = emb(words).unsqueeze(1)
        states = {}
        c, hh = model(tree, inputs, states)
        logp = F.log_softmax(clf(torch.cat([s[1] for s in states.values()])), dim=1)
        labels = torch.tensor([0, 1, 2, 1, 0, 2])
        loss = F.nll_loss(logp, labels, reduction="sum")
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["root"], res["c"] = hh, c
    res["emb_grad"] = emb.weight.grad
    res["step"] = opt.state[clf.weight]["step"]
    return res


def glove_program(torch):
    """GloVe's weighted least squares on a co-occurrence matrix, sparse Adagrad."""
    rng = np.random.default_rng(22)
    nn = torch.nn
    vocab, d, x_max, alpha = 9, 4, 10.0, 0.75
    cooc = rng.integers(0, 20, size=(vocab, vocab)).astype(np.float32)
    i_idx, j_idx = np.nonzero(cooc)
    i_idx, j_idx = torch.from_numpy(i_idx), torch.from_numpy(j_idx)
    x = torch.from_numpy(cooc)[i_idx, j_idx]
    wi, wj = nn.Embedding(vocab, d, sparse=True), nn.Embedding(vocab, d, sparse=True)
    bi, bj = nn.Embedding(vocab, 1, sparse=True), nn.Embedding(vocab, 1, sparse=True)
    mods = nn.ModuleList([wi, wj, bi, bj])
    fill_(torch, mods, rng, scale=0.1)
    opt = torch.optim.Adagrad(mods.parameters(), lr=0.05)
    res = {"losses": []}
    batches = [slice(0, 20), slice(20, 45), slice(45, None)]
    for sl in batches:
        ii, jj, xx = i_idx[sl], j_idx[sl], x[sl]
        weight = torch.clamp(torch.pow(xx / x_max, alpha), max=1.0)
        pred = (wi(ii) * wj(jj)).sum(1) + bi(ii).squeeze(1) + bj(jj).squeeze(1)
        loss = torch.mean(weight * (pred - torch.log(xx)) ** 2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["wi"], res["bj"] = wi.weight, bj.weight
    res["vectors"] = wi.weight + wj.weight
    res["sum"] = opt.state[wi.weight]["sum"]
    try:
        torch.optim.Adagrad(mods.parameters(), lr=0.05, weight_decay=0.1).step()
    except Exception as e:  # noqa: BLE001
        res["err"] = [type(e).__name__, str(e)]
    return res


def qrnn_sru_program(torch):
    """QRNN fo-pooling (ForgetMult loop) and SRU's highway recurrence, written in torch."""
    rng = np.random.default_rng(23)
    nn = torch.nn
    t, b, d, h = 5, 2, 3, 4
    lin = nn.Linear(d, 3 * h)
    conv = nn.Conv1d(d, 3 * h, 2)
    w_sru = nn.Linear(d, 3 * h, bias=False)
    v = nn.Parameter(torch.zeros(2, h))
    bias = nn.Parameter(torch.zeros(2, h))
    mods = nn.ModuleList([lin, conv, w_sru])
    fill_(torch, list(mods.parameters()) + [v, bias], rng)
    x = normal(torch, rng, t, b, d).requires_grad_()

    def forget_mult(f, z, h0=None):
        result = []
        prev = h0
        for i, (fi, zi) in enumerate(zip(f.split(1, dim=0), z.split(1, dim=0))):
            hi = fi * zi if prev is None else fi * zi + (1 - fi) * prev
            result.append(hi)
            prev = hi
        return torch.cat(result, dim=0)

    res = {}
    y = lin(x)
    z, f, o = y.chunk(3, dim=2)
    z, f, o = torch.tanh(z), torch.sigmoid(f), torch.sigmoid(o)
    c = forget_mult(f, z)
    hq = o * c
    # windowed QRNN: causal conv over time via padding
    xc = torch.nn.functional.pad(x.permute(1, 2, 0), (1, 0))
    zc, fc, oc = conv(xc).permute(2, 0, 1).chunk(3, dim=2)
    cc = forget_mult(torch.sigmoid(fc), torch.tanh(zc), h0=torch.zeros(b, h))
    hc = torch.sigmoid(oc) * cc
    # SRU: c_t = f*c + (1-f)*(Wx); h = r*tanh(c) + (1-r)*x-projection (here highway on Wx)
    u = w_sru(x).view(t, b, 3, h)
    cs, hs = torch.zeros(b, h), []
    for i in range(t):
        ft = torch.sigmoid(u[i, :, 1] + v[0] * cs + bias[0])
        cs = ft * cs + (1 - ft) * u[i, :, 0]
        rt = torch.sigmoid(u[i, :, 2] + v[1] * cs + bias[1])
        hs.append(rt * torch.tanh(cs) + (1 - rt) * u[i, :, 0])
    hsru = torch.stack(hs)
    loss = hq.pow(2).sum() + hc.abs().sum() + hsru.sum()
    loss.backward()
    res.update(hq=hq, hc=hc, hsru=hsru, xg=x.grad, vg=v.grad, convg=conv.weight.grad,
               ling=lin.weight.grad)
    return res


def opennmt_program(torch):
    """OpenNMT-py GlobalAttention (general and mlp), input feeding, CopyGenerator."""
    rng = np.random.default_rng(24)
    nn, F = torch.nn, torch.nn.functional
    d, b, ls, lt, vocab, ext = 4, 2, 5, 3, 8, 2

    def sequence_mask(lengths, max_len=None):
        batch_size = lengths.numel()
        max_len = max_len or lengths.max()
        return (torch.arange(0, max_len, device=lengths.device)
                .type_as(lengths).repeat(batch_size, 1).lt(lengths.unsqueeze(1)))

    linear_in = nn.Linear(d, d, bias=False)
    linear_context, linear_query = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=True)
    v = nn.Linear(d, 1, bias=False)
    linear_out = nn.Linear(2 * d, d, bias=False)
    cell = nn.LSTMCell(2 * d, d)
    gen = nn.Linear(d, vocab)
    copy = nn.Linear(d, 1)
    mods = nn.ModuleList([linear_in, linear_context, linear_query, v, linear_out, cell, gen,
                          copy])
    fill_(torch, mods, rng)
    memory = normal(torch, rng, b, ls, d).requires_grad_()
    lengths = torch.tensor([5, 3])
    src_map = F.one_hot(torch.from_numpy(rng.integers(0, ext, size=(ls, b))), ext).float()
    tgt_emb = normal(torch, rng, lt, b, d)

    def score(h_t, h_s, kind):
        if kind == "general":
            h_t = linear_in(h_t)
            return torch.bmm(h_t, h_s.transpose(1, 2))
        tgt_batch, tgt_len, dim = h_t.size()
        src_len = h_s.size(1)
        wq = linear_query(h_t.view(-1, dim)).view(tgt_batch, tgt_len, 1, dim)
        wq = wq.expand(tgt_batch, tgt_len, src_len, dim)
        uh = linear_context(h_s.contiguous().view(-1, dim)).view(tgt_batch, 1, src_len, dim)
        uh = uh.expand(tgt_batch, tgt_len, src_len, dim)
        return v(torch.tanh(wq + uh)).view(tgt_batch, tgt_len, src_len)

    res = {}
    for kind in ("general", "mlp"):
        hidden = (torch.zeros(b, d), torch.zeros(b, d))
        input_feed = torch.zeros(b, d)
        outs, attns = [], []
        for emb_t in tgt_emb.split(1):
            hidden = cell(torch.cat([emb_t.squeeze(0), input_feed], 1), hidden)
            source = hidden[0].unsqueeze(1)
            align = score(source, memory, kind)
            mask = sequence_mask(lengths, max_len=align.size(-1)).unsqueeze(1)
            align.masked_fill_(~mask, -float("inf"))
            align_vectors = F.softmax(align.view(b, ls), -1).view(b, 1, ls)
            c = torch.bmm(align_vectors, memory)
            attn_h = torch.tanh(linear_out(torch.cat([c, source], 2).view(b, 2 * d)))
            input_feed = attn_h
            outs.append(attn_h)
            attns.append(align_vectors.squeeze(1))
        hid = torch.stack(outs).view(-1, d)
        attn = torch.stack(attns).view(-1, ls)
        logits = gen(hid)
        logits[:, 0] = -float("inf")  # pad
        prob = torch.softmax(logits, 1)
        p_copy = torch.sigmoid(copy(hid))
        out_prob = torch.mul(prob, 1 - p_copy)
        mul_attn = torch.mul(attn, p_copy)
        copy_prob = torch.bmm(mul_attn.view(-1, b, ls).transpose(0, 1),
                              src_map.transpose(0, 1)).transpose(0, 1)
        full = torch.cat([out_prob, copy_prob.contiguous().view(-1, ext)], 1)
        target = torch.from_numpy(rng.integers(1, vocab + ext, size=lt * b))
        loss = -full.gather(1, target.unsqueeze(1)).squeeze(1).clamp_min(1e-20).log().sum()
        loss.backward()
        res[kind + "_loss"] = loss
        res[kind + "_full"] = full
        res[kind + "_mem_grad"] = memory.grad.clone()
        memory.grad = None
    res["lin_in_grad"] = linear_in.weight.grad
    res["v_grad"] = v.weight.grad
    res["mask"] = sequence_mask(lengths)
    return res


def allennlp_utils_program(torch):
    """AllenNLP's nn.util: masked (log-)softmax with finfo bounds, batched_index_select,
    combine_tensors, weighted_sum over 4-D attention, final encoder states, sort by length."""
    rng = np.random.default_rng(25)
    nn, F = torch.nn, torch.nn.functional

    def min_value_of_dtype(dtype):
        return torch.finfo(dtype).min if dtype.is_floating_point else torch.iinfo(dtype).min

    def tiny_value_of_dtype(dtype):
        if dtype in (torch.float, torch.double):
            return 1e-13
        return 1e-4

    def masked_softmax(vector, mask, dim=-1, memory_efficient=False):
        while mask.dim() < vector.dim():
            mask = mask.unsqueeze(1)
        if not memory_efficient:
            result = F.softmax(vector * mask, dim=dim)
            result = result * mask
            return result / (result.sum(dim=dim, keepdim=True)
                             + tiny_value_of_dtype(result.dtype))
        masked = vector.masked_fill(~mask, min_value_of_dtype(vector.dtype))
        return F.softmax(masked, dim=dim)

    def masked_log_softmax(vector, mask, dim=-1):
        while mask.dim() < vector.dim():
            mask = mask.unsqueeze(1)
        vector = vector + (mask + tiny_value_of_dtype(vector.dtype)).log()
        return F.log_softmax(vector, dim=dim)

    def flatten_and_batch_shift_indices(indices, sequence_length):
        offsets = torch.arange(0, indices.size(0), dtype=torch.long) * sequence_length
        for _ in range(indices.dim() - 1):
            offsets = offsets.unsqueeze(1)
        return (indices + offsets).view(-1)

    def batched_index_select(target, indices):
        flat = flatten_and_batch_shift_indices(indices, target.size(1))
        flat_target = target.view(-1, target.size(-1))
        selected = flat_target.index_select(0, flat)
        return selected.view(list(indices.size()) + [target.size(-1)])

    def combine_tensors(combination, tensors):
        def piece(name):
            if name.isdigit():
                return tensors[int(name) - 1]
            first, op, second = tensors[int(name[0]) - 1], name[1], tensors[int(name[2]) - 1]
            return {"*": first * second, "/": first / second, "+": first + second,
                    "-": first - second}[op]
        return torch.cat([piece(c) for c in combination.split(",")], dim=-1)

    def weighted_sum(matrix, attention):
        if attention.dim() == 2 and matrix.dim() == 3:
            return attention.unsqueeze(1).bmm(matrix).squeeze(1)
        if attention.dim() == 3 and matrix.dim() == 3:
            return attention.bmm(matrix)
        if matrix.dim() - 1 < attention.dim():
            expanded_size = list(matrix.size())
            for i in range(attention.dim() - matrix.dim() + 1):
                matrix = matrix.unsqueeze(1)
                expanded_size.insert(i + 1, attention.size(i + 1))
            matrix = matrix.expand(*expanded_size)
        intermediate = attention.unsqueeze(-1).expand_as(matrix) * matrix
        return intermediate.sum(dim=-2)

    def get_final_encoder_states(encoder_outputs, mask, bidirectional=False):
        last_word_indices = mask.sum(1) - 1
        batch_size, _, encoder_output_dim = encoder_outputs.size()
        expanded = last_word_indices.view(-1, 1, 1).expand(batch_size, 1, encoder_output_dim)
        final = encoder_outputs.gather(1, expanded).squeeze(1)
        if bidirectional:
            final_forward = final[:, :(encoder_output_dim // 2)]
            final_backward = encoder_outputs[:, 0, (encoder_output_dim // 2):]
            final = torch.cat([final_forward, final_backward], dim=-1)
        return final

    def sort_batch_by_length(tensor, sequence_lengths):
        sorted_lengths, permutation_index = sequence_lengths.sort(0, descending=True)
        sorted_tensor = tensor.index_select(0, permutation_index)
        index_range = torch.arange(0, len(sequence_lengths))
        _, reverse_mapping = permutation_index.sort(0, descending=False)
        restoration_indices = index_range.index_select(0, reverse_mapping)
        return sorted_tensor, sorted_lengths, restoration_indices, permutation_index

    b, n, d = 3, 5, 4
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]).bool()
    enc = nn.LSTM(d, d // 2, batch_first=True, bidirectional=True)
    proj = nn.Linear(3 * d, 1)
    fill_(torch, enc, rng)
    fill_(torch, proj, rng)
    x = normal(torch, rng, b, n, d).requires_grad_()
    sorted_x, sorted_len, restore, perm = sort_batch_by_length(x, mask.sum(1))
    packed = nn.utils.rnn.pack_padded_sequence(sorted_x, sorted_len, batch_first=True)
    out, _ = enc(packed)
    out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=n)
    h = out.index_select(0, restore)
    res = {"restore": restore, "perm": perm}
    sim = h.bmm(h.transpose(1, 2))
    a1 = masked_softmax(sim, mask)
    a2 = masked_softmax(sim, mask, memory_efficient=True)
    lp = masked_log_softmax(proj(combine_tensors("1,2,1*2", [h, weighted_sum(h, a1)]))
                            .squeeze(-1), mask.float())
    spans = torch.tensor([[0, 2, 1], [4, 3, 3], [1, 1, 0]])
    picked = batched_index_select(h, spans)
    att4 = masked_softmax(normal(torch, rng, b, 2, 3, n), mask)
    ws4 = weighted_sum(h, att4)
    final = get_final_encoder_states(h, mask, bidirectional=True)
    loss = -lp.masked_fill(~mask, 0).sum() + picked.pow(2).sum() + ws4.sum() + final.sum()
    loss = loss + (a1 - a2).abs().sum()
    loss.backward()
    res.update(a1=a1, a2=a2, lp=lp.masked_fill(~mask, 0), picked=picked, ws4=ws4, final=final,
               xg=x.grad, pg=proj.weight.grad, hh=enc.weight_hh_l0_reverse.grad,
               minval=[min_value_of_dtype(torch.float16), min_value_of_dtype(torch.int32)])
    res["lp_masked"] = lp[~mask]
    return res


PROGRAMS = [convs2s_program, tree_lstm_program, glove_program, qrnn_sru_program,
            opennmt_program, allennlp_utils_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
