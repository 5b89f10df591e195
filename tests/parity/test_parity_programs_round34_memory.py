"""Memory-augmented networks written as their reference repositories write them in torch, run
once with `torch` bound to ember and once to PyTorch from the same NumPy weights and data: a
Differentiable Neural Computer (usage, allocation by stable sort and an exclusive cumprod,
scatter back to slot order, temporal link matrix, read modes) trained on a copy task with
clip_grad_norm_ and RMSprop with momentum; End-to-end Memory Networks (adjacent weight tying,
temporal encoding, position encoding, multi-hop); Grefenstette's differentiable stack, queue and
deque; a pointer-generator's copy distribution by scatter_add into the extended vocabulary and
coverage loss; Santoro's MANN with least-recently-used access. The sibling _algo covers the
algorithmic-reasoning models, _access further memory-access variants."""

import io

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def dnc_program(torch):
    """ixaxaar/pytorch-dnc's memory: interface vector split and squashed (oneplus, sigmoid,
    softmax over read modes), content weighting, usage with retention, allocation weights by a
    stable sort of usage and an exclusive cumprod gathered back by the inverse permutation (and
    equally scattered), write weights, link matrix with zeroed diagonal, precedence, forward and
    backward weightings; a copy task trained with clip_grad_norm_ and RMSprop(momentum)."""
    nn = torch.nn
    F = nn.functional
    B, N, W, R, X, H, T = 2, 6, 5, 2, 4, 12, 4
    delta = 1e-6

    def oneplus(x):
        return 1 + F.softplus(x)

    def content(memory, keys, strengths):
        # memory (B, N, W); keys (B, h, W); strengths (B, h)
        sim = torch.bmm(F.normalize(keys, dim=-1), F.normalize(memory, dim=-1).transpose(1, 2))
        return F.softmax(sim * strengths.unsqueeze(2), dim=2)

    def allocate(usage, via_scatter):
        usage = delta + (1 - delta) * usage
        sorted_usage, phi = torch.sort(usage, dim=1, stable=True)
        v = sorted_usage.new_ones(sorted_usage.size(0), 1)
        prod = torch.cumprod(torch.cat((v, sorted_usage), 1), 1)[:, :-1]
        sorted_alloc = (1 - sorted_usage) * prod
        if via_scatter:
            return torch.zeros_like(sorted_alloc).scatter_(1, phi, sorted_alloc)
        phi_rev = phi.argsort(dim=1)
        return sorted_alloc.gather(1, phi_rev)

    class DNC(nn.Module):
        def __init__(self):
            super().__init__()
            self.controller = nn.LSTMCell(X + R * W, H)
            self.sizes = [R * W, R, W, 1, W, W, R, 1, 1, R * 3]
            self.interface = nn.Linear(H, sum(self.sizes))
            self.output = nn.Linear(H + R * W, X)
            self.register_buffer("eye", torch.eye(N).unsqueeze(0))

        def reset(self, b):
            z = torch.zeros
            return dict(memory=z(b, N, W).fill_(delta), link=z(b, N, N), precedence=z(b, N),
                        read_w=z(b, R, N), write_w=z(b, N), usage=z(b, N),
                        reads=z(b, R * W), hc=(z(b, H), z(b, H)))

        def step(self, x, s, via_scatter):
            h, c = self.controller(torch.cat([x, s["reads"]], 1), s["hc"])
            iv = self.interface(h)
            rk, rs, wk, ws, erase, wv, free, ag, wg, modes = torch.split(iv, self.sizes, 1)
            rk, rs = rk.view(-1, R, W), oneplus(rs)
            wk, ws = wk.view(-1, 1, W), oneplus(ws)
            erase, free = torch.sigmoid(erase), torch.sigmoid(free)
            ag, wg = torch.sigmoid(ag), torch.sigmoid(wg)
            modes = F.softmax(modes.view(-1, R, 3), dim=2)
            # usage and retention
            psi = torch.prod(1 - free.unsqueeze(2) * s["read_w"], 1)
            usage = (s["usage"] + s["write_w"] - s["usage"] * s["write_w"]) * psi
            alloc = allocate(usage, via_scatter)
            cw = content(s["memory"], wk, ws).squeeze(1)
            write_w = wg * (ag * alloc + (1 - ag) * cw)
            memory = s["memory"] * (1 - torch.bmm(write_w.unsqueeze(2), erase.unsqueeze(1)))
            memory = memory + torch.bmm(write_w.unsqueeze(2), wv.unsqueeze(1))
            wi, wj = write_w.unsqueeze(2), write_w.unsqueeze(1)
            link = (1 - wi - wj) * s["link"] + wi * s["precedence"].unsqueeze(1)
            link = (1 - self.eye) * link
            precedence = (1 - write_w.sum(1, keepdim=True)) * s["precedence"] + write_w
            fwd = torch.bmm(s["read_w"], link.transpose(1, 2))
            bwd = torch.bmm(s["read_w"], link)
            rc = content(memory, rk, rs)
            read_w = (modes[:, :, 0:1] * bwd + modes[:, :, 1:2] * rc
                      + modes[:, :, 2:3] * fwd)
            reads = torch.bmm(read_w, memory).view(-1, R * W)
            out = self.output(torch.cat([h, reads], 1))
            return out, dict(memory=memory, link=link, precedence=precedence, read_w=read_w,
                             write_w=write_w, usage=usage, reads=reads, hc=(h, c))

    res = {}
    for via_scatter in (False, True):
        torch.manual_seed(0)
        model = DNC()
        fill_(torch, model, np.random.default_rng(3402), 0.4)
        opt = torch.optim.RMSprop(model.parameters(), lr=1e-2, momentum=0.9, eps=1e-10)
        losses, norms = [], []
        data = np.random.default_rng(3403)
        for it in range(3):
            seq = torch.from_numpy(data.binomial(1, 0.5, (T, B, X)).astype(np.float32))
            s = model.reset(B)
            for t in range(T):
                _, s = model.step(seq[t], s, via_scatter)
            outs = []
            blank = torch.zeros(B, X)
            for t in range(T):
                y, s = model.step(blank, s, via_scatter)
                outs.append(y)
            logits = torch.stack(outs)
            loss = F.binary_cross_entropy_with_logits(logits, seq)
            opt.zero_grad()
            loss.backward()
            norms.append(nn.utils.clip_grad_norm_(model.parameters(), 10.0))
            opt.step()
            losses.append(loss.detach())
        tag = "scatter" if via_scatter else "gather"
        res[f"{tag}_losses"] = torch.stack(losses)
        res[f"{tag}_norms"] = torch.stack(norms)
        res[f"{tag}_usage"] = s["usage"].detach()
        res[f"{tag}_link"] = s["link"].detach()
        res[f"{tag}_read_w"] = s["read_w"].detach()
        # the interface's gate rows get ~1e-6 gradients that RMSprop scales up to lr-sized
        # steps, so float32 noise in them shows: compare the output layer's weights instead
        res[f"{tag}_w"] = model.output.weight.detach()
        res[f"{tag}_g"] = model.interface.weight.grad
        res[f"{tag}_mom"] = opt.state[model.output.weight]["momentum_buffer"]
    u = torch.tensor([[0.3, 0.9, 0.1, 0.5], [1.0, 0.0, 0.2, 0.2]])
    res["alloc_gather"] = allocate(u, False)
    res["alloc_scatter"] = allocate(u, True)
    return res


def memn2n_program(torch):
    """MemN2N (Sukhbaatar et al.) as the domluna/memn2n port writes it: bag-of-words sentence
    embeddings with position encoding, temporal encoding added to A and C, adjacent weight
    tying over three hops (A_{k+1} = C_k), padding_idx 0, answer by the last C's transposed
    weight, cross entropy, clip_grad_norm_ by max norm 40 and SGD with a step LR decay."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(3410)
    V, D, S, L, hops, B = 20, 8, 5, 4, 3, 3

    def position_encoding(sentence_size, embedding_size):
        enc = np.ones((embedding_size, sentence_size), dtype=np.float32)
        ls, le = sentence_size + 1, embedding_size + 1
        for i in range(1, le):
            for j in range(1, ls):
                enc[i - 1, j - 1] = (i - (embedding_size + 1) / 2) * (j - (sentence_size + 1) / 2)
        enc = 1 + 4 * enc / embedding_size / sentence_size
        return np.transpose(enc)

    class MemN2N(nn.Module):
        def __init__(self):
            super().__init__()
            self.C = nn.ModuleList([nn.Embedding(V, D, padding_idx=0) for _ in range(hops + 1)])
            self.TA = nn.Parameter(torch.zeros(S, D))
            self.TC = nn.Parameter(torch.zeros(S, D))
            self.register_buffer("encoding", torch.from_numpy(position_encoding(L, D)))

        def forward(self, story, query):
            u = (self.C[0](query) * self.encoding).sum(1)
            hops_p = []
            for k in range(hops):
                m = (self.C[k](story) * self.encoding).sum(2) + self.TA
                c = (self.C[k + 1](story) * self.encoding).sum(2) + self.TC
                p = F.softmax(torch.bmm(m, u.unsqueeze(2)).squeeze(2), dim=-1)
                o = torch.bmm(p.unsqueeze(1), c).squeeze(1)
                u = u + o
                hops_p.append(p)
            return u @ self.C[hops].weight.t(), torch.stack(hops_p, 1)

    model = MemN2N()
    fill_(torch, model, rng, 0.2)
    with torch.no_grad():
        for emb in model.C:
            emb.weight[0].zero_()
    story = torch.from_numpy(rng.integers(0, V, (B, S, L)))
    story[:, :, -1] = 0                      # padded words
    query = torch.from_numpy(rng.integers(1, V, (B, L)))
    answer = torch.from_numpy(rng.integers(1, V, (B,)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    res, losses, lrs = {}, [], []
    for _ in range(4):
        logits, p = model(story, query)
        loss = F.cross_entropy(logits, answer, reduction="sum")
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 40.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        lrs.append(sched.get_last_lr()[0])
    res.update(losses=losses, lrs=lrs, attn=p.detach(), pad_row=model.C[1].weight[0].detach(),
               TA=model.TA.detach(), pred=logits.argmax(1).tolist())
    return res


def neural_stack_program(torch):
    """Grefenstette et al.'s continuous stack, queue and deque: strength vectors updated by
    relu of the pop strength against reversed cumulative sums, reads by min(s, relu(1 - sum of
    strengths above)), values appended with torch.cat; an LSTM controller driving push/pop and
    the value vector, its gradients into the controller's weights."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(3420)
    B, E, H, T = 2, 3, 8, 5

    def above(s):
        # sum of strengths strictly above each element (later elements are above)
        return torch.flip(torch.cumsum(torch.flip(s, [1]), 1), [1]) - s

    def below(s):
        return torch.cumsum(s, 1) - s

    def stack_step(V, s, d, u, v):
        s_new = F.relu(s - F.relu(u.unsqueeze(1) - above(s)))
        s_new = torch.cat([s_new, d.unsqueeze(1)], 1)
        V = torch.cat([V, v.unsqueeze(1)], 1)
        w = torch.min(s_new, F.relu(1 - above(s_new)))
        return V, s_new, (w.unsqueeze(2) * V).sum(1)

    def queue_step(V, s, d, u, v):
        s_new = F.relu(s - F.relu(u.unsqueeze(1) - below(s)))
        s_new = torch.cat([s_new, d.unsqueeze(1)], 1)
        V = torch.cat([V, v.unsqueeze(1)], 1)
        w = torch.minimum(s_new, (1 - below(s_new)).clamp(min=0))
        return V, s_new, torch.einsum("bn,bne->be", w, V)

    def deque_step(V, s, d_top, d_bot, u_top, u_bot, v_top, v_bot):
        s = F.relu(s - F.relu(u_top.unsqueeze(1) - above(s)))
        s = F.relu(s - F.relu(u_bot.unsqueeze(1) - below(s)))
        s = torch.cat([d_bot.unsqueeze(1), s, d_top.unsqueeze(1)], 1)
        V = torch.cat([v_bot.unsqueeze(1), V, v_top.unsqueeze(1)], 1)
        r_top = (torch.min(s, F.relu(1 - above(s))).unsqueeze(2) * V).sum(1)
        r_bot = (torch.min(s, F.relu(1 - below(s))).unsqueeze(2) * V).sum(1)
        return V, s, r_top, r_bot

    class Controller(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTMCell(E + E, H)
            self.ops = nn.Linear(H, 2)
            self.val = nn.Linear(H, E)
            self.out = nn.Linear(H + E, E)

    ctrl = Controller()
    fill_(torch, ctrl, rng, 0.5)
    xs = normal(torch, rng, T, B, E)
    res = {}
    for name, step in (("stack", stack_step), ("queue", queue_step)):
        V, s = torch.zeros(B, 0, E), torch.zeros(B, 0)
        r = torch.zeros(B, E)
        hc = None
        outs = []
        for t in range(T):
            hc = ctrl.rnn(torch.cat([xs[t], r], 1), hc)
            ops = torch.sigmoid(ctrl.ops(hc[0]))
            V, s, r = step(V, s, ops[:, 0], 0.3 * ops[:, 1], torch.tanh(ctrl.val(hc[0])))
            outs.append(ctrl.out(torch.cat([hc[0], r], 1)))
        loss = torch.stack(outs).pow(2).mean()
        grads = torch.autograd.grad(loss, [ctrl.rnn.weight_ih, ctrl.ops.bias])
        res.update({f"{name}_s": s, f"{name}_r": r, f"{name}_loss": loss,
                    f"{name}_g_ih": grads[0], f"{name}_g_ops": grads[1]})
    # deque on hand-written strengths
    d = torch.tensor([[0.8, 0.3, 1.0], [0.5, 0.9, 0.2]]).requires_grad_()
    V, s = torch.zeros(2, 0, 1), torch.zeros(2, 0)
    tops, bots = [], []
    for t in range(3):
        vt, vb = torch.full((2, 1), t + 1.0), torch.full((2, 1), -t - 1.0)
        V, s, rt, rb = deque_step(V, s, d[:, t], d[:, 2 - t], d[:, t] * 0.4, d[:, 1] * 0.3,
                                  vt * d[:, t:t + 1], vb)
        tops.append(rt)
        bots.append(rb)
    dq = torch.cat(tops + bots, 1)
    res.update(deque=dq, deque_s=s, deque_g=torch.autograd.grad(dq.sum(), d)[0])
    # hard pushes/pops: exact stack semantics
    V, s = torch.zeros(1, 0, 1), torch.zeros(1, 0)
    reads = []
    for d_, u_, v_ in ((1., 0., 1.), (1., 0., 2.), (0., 1., 0.), (1., 0., 3.), (0., 1., 0.)):
        V, s, r = stack_step(V, s, torch.tensor([d_]), torch.tensor([u_]), torch.tensor([[v_]]))
        reads.append(r.item())
    res["hard_reads"] = reads
    return res


def pointer_generator_program(torch):
    """abisee's pointer-generator (atulkum's port): Bahdanau attention with coverage features,
    p_gen from context, state and input, the final distribution as p_gen * vocab_dist
    scatter_add-ed with (1 - p_gen) * attention over extended vocabulary ids (OOV words get ids
    >= V, extra zeros concatenated), gold probabilities gathered, NLL of them masked by the
    decoder padding mask, coverage loss min(attn, coverage), Adagrad with
    initial_accumulator_value and clip_grad_norm_."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(3430)
    B, Ts, Td, V, E, H, n_oov = 2, 6, 4, 12, 6, 8, 3
    eps = 1e-12

    class PGN(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V, E)
            self.encoder = nn.LSTM(E, H, batch_first=True, bidirectional=True)
            self.W_h = nn.Linear(2 * H, 2 * H, bias=False)
            self.decode_proj = nn.Linear(2 * H, 2 * H)
            self.W_c = nn.Linear(1, 2 * H, bias=False)
            self.v = nn.Linear(2 * H, 1, bias=False)
            self.reduce_h = nn.Linear(2 * H, H)
            self.reduce_c = nn.Linear(2 * H, H)
            self.x_context = nn.Linear(2 * H + E, E)
            self.lstm = nn.LSTM(E, H, batch_first=True)
            self.p_gen_linear = nn.Linear(4 * H + E, 1)
            self.out1 = nn.Linear(3 * H, H)
            self.out2 = nn.Linear(H, V)

    model = PGN()
    fill_(torch, model, rng, 0.3)
    enc_ext = rng.integers(0, V + n_oov, (B, Ts))
    enc_ext[1, -2:] = 0
    enc_lens = [Ts, Ts - 2]
    enc_ext_t = torch.from_numpy(enc_ext)
    enc_inp = enc_ext_t.masked_fill(enc_ext_t >= V, 1)          # UNK id 1 for OOV words
    enc_mask = (torch.arange(Ts)[None, :] < torch.tensor(enc_lens)[:, None]).float()
    dec_inp = torch.from_numpy(rng.integers(2, V, (B, Td)))
    target = torch.from_numpy(rng.integers(0, V + n_oov, (B, Td)))
    dec_mask = torch.tensor([[1., 1., 1., 1.], [1., 1., 0., 0.]])
    opt = torch.optim.Adagrad(model.parameters(), lr=0.15, initial_accumulator_value=0.1)
    res, losses = {}, []
    for it in range(2):
        packed = nn.utils.rnn.pack_padded_sequence(model.embedding(enc_inp), enc_lens,
                                                   batch_first=True)
        enc_out, (h, c) = model.encoder(packed)
        enc_out, _ = nn.utils.rnn.pad_packed_sequence(enc_out, batch_first=True,
                                                      total_length=Ts)
        enc_feat = model.W_h(enc_out.contiguous().view(-1, 2 * H))
        h = F.relu(model.reduce_h(h.transpose(0, 1).contiguous().view(-1, 2 * H)))
        c = F.relu(model.reduce_c(c.transpose(0, 1).contiguous().view(-1, 2 * H)))
        state = (h.unsqueeze(0), c.unsqueeze(0))
        ctx = torch.zeros(B, 2 * H)
        coverage = torch.zeros(B, Ts)
        step_losses = []
        for t in range(Td):
            x = model.x_context(torch.cat((ctx, model.embedding(dec_inp[:, t])), 1))
            out, state = model.lstm(x.unsqueeze(1), state)
            s_hat = torch.cat((state[0].view(-1, H), state[1].view(-1, H)), 1)
            dec_fea = model.decode_proj(s_hat).unsqueeze(1).expand(B, Ts, 2 * H)
            dec_fea = dec_fea.contiguous().view(-1, 2 * H)
            att = enc_feat + dec_fea + model.W_c(coverage.view(-1, 1))
            scores = model.v(torch.tanh(att)).view(-1, Ts)
            attn_ = F.softmax(scores, dim=1) * enc_mask
            attn = attn_ / attn_.sum(1, keepdim=True)
            ctx = torch.bmm(attn.unsqueeze(1), enc_out).view(-1, 2 * H)
            p_gen = torch.sigmoid(model.p_gen_linear(torch.cat((ctx, s_hat, x), 1)))
            output = model.out2(model.out1(torch.cat((out.view(-1, H), ctx), 1)))
            vocab_dist = p_gen * F.softmax(output, dim=1)
            attn_dist = (1 - p_gen) * attn
            vocab_dist = torch.cat([vocab_dist, torch.zeros(B, n_oov)], 1)
            final = vocab_dist.scatter_add(1, enc_ext_t, attn_dist)
            gold = torch.gather(final, 1, target[:, t].unsqueeze(1)).squeeze()
            step_loss = -torch.log(gold + eps)
            step_cov = torch.sum(torch.min(attn, coverage), 1)
            step_losses.append((step_loss + step_cov) * dec_mask[:, t])
            coverage = coverage + attn
        loss = torch.mean(torch.sum(torch.stack(step_losses, 1), 1) / dec_mask.sum(1))
        opt.zero_grad()
        loss.backward()
        res[f"norm{it}"] = nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        opt.step()
        losses.append(loss.detach())
    res.update(losses=torch.stack(losses), final=final.detach(), final_sum=final.sum(1),
               coverage=coverage.detach(), p_gen=p_gen.detach(),
               acc=opt.state[model.p_gen_linear.weight]["sum"],
               emb=model.embedding.weight.detach())
    return res


def mann_program(torch):
    """Santoro et al.'s MANN (LRU access): read weights by cosine content, usage decay
    gamma * w_u + w_r + w_w, least-used weights from the n-th smallest usage by topk(largest
    False) and a <= comparison, the least-used slot zeroed with a one-hot from scatter before
    writing, a sigmoid-gated interpolation of previous read and least-used weights; few-shot
    labels fed one step late, trained with RMSprop(centered) and clip_grad_value_; the state
    dict round-trips through torch.save/torch.load into a fresh model."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(3440)
    B, N, W, C, X, H, T, nreads = 2, 6, 4, 3, 5, 10, 6, 1
    gamma = 0.95

    class MANN(nn.Module):
        def __init__(self):
            super().__init__()
            self.ctrl = nn.LSTMCell(X + C + nreads * W, H)
            self.key = nn.Linear(H, W)
            self.alpha = nn.Linear(H, 1)
            self.out = nn.Linear(H + W, C)

        def forward(self, xs, labels_prev):
            mem = torch.full((B, N, W), 1e-6)
            # tie-free usage at the start: a tiny ramp so that topk's order is defined
            w_u = torch.arange(N, dtype=torch.float32).expand(B, N) * 1e-3
            w_r = torch.zeros(B, N)
            r = torch.zeros(B, W)
            hc = None
            outs = []
            for t in range(T):
                hc = self.ctrl(torch.cat([xs[:, t], labels_prev[:, t], r], 1), hc)
                k = torch.tanh(self.key(hc[0]))
                _, idx = torch.topk(w_u, nreads, dim=1, largest=False)
                nth = w_u.gather(1, idx[:, -1:])
                w_lu = (w_u <= nth).float()
                w_lu = w_lu / w_lu.sum(1, keepdim=True)
                a = torch.sigmoid(self.alpha(hc[0]))
                w_w = a * w_r + (1 - a) * w_lu
                lu_onehot = torch.zeros(B, N).scatter(1, idx[:, :1], 1.0)
                mem = mem * (1 - lu_onehot).unsqueeze(2)
                mem = mem + w_w.unsqueeze(2) * k.unsqueeze(1)
                sim = F.cosine_similarity(mem, k.unsqueeze(1), dim=2, eps=1e-8)
                w_r = F.softmax(sim, dim=1)
                w_u = gamma * w_u + w_r + w_w
                r = torch.einsum("bn,bnw->bw", w_r, mem)
                outs.append(self.out(torch.cat([hc[0], r], 1)))
            return torch.stack(outs, 1), w_u

    model = MANN()
    fill_(torch, model, rng, 0.4)
    xs = normal(torch, rng, B, T, X)
    labels = torch.from_numpy(rng.integers(0, C, (B, T)))
    onehot = F.one_hot(labels, C).float()
    labels_prev = torch.cat([torch.zeros(B, 1, C), onehot[:, :-1]], 1)
    opt = torch.optim.RMSprop(model.parameters(), lr=5e-3, alpha=0.95, momentum=0.9,
                              centered=True)
    res, losses = {}, []
    for _ in range(3):
        logits, w_u = model(xs, labels_prev)
        loss = F.cross_entropy(logits.reshape(-1, C), labels.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 0.05)
        opt.step()
        losses.append(loss.detach())
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
    buf.seek(0)
    ckpt = torch.load(buf)
    model2 = MANN()
    model2.load_state_dict(ckpt["model"])
    opt2 = torch.optim.RMSprop(model2.parameters(), lr=1.0)
    opt2.load_state_dict(ckpt["opt"])
    logits2, _ = model2(xs, labels_prev)
    res.update(losses=torch.stack(losses), w_u=w_u.detach(), logits2=logits2.detach(),
               grad_avg=opt2.state[model2.key.weight]["grad_avg"],
               lr2=opt2.param_groups[0]["lr"], centered=opt2.param_groups[0]["centered"],
               acc=(logits.argmax(-1) == labels).float().mean())
    return res


PROGRAMS = [dnc_program, memn2n_program, neural_stack_program, pointer_generator_program,
            mann_program]

# recurrent controllers over several optimiser steps accumulate float32 reassociation noise
TOLERANCES = {"dnc_program": (1e-4, 1e-5), "pointer_generator_program": (1e-4, 1e-5),
              "mann_program": (1e-4, 1e-5), "neural_stack_program": (1e-4, 1e-5),
              "memn2n_program": (1e-4, 1e-5)}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
