"""Neural combinatorial optimisation written as its reference repositories write it in torch, run
once with `torch` bound to ember and once to PyTorch from the same NumPy weights: Kool et al.'s
attention model for TSP (MHA encoder with BatchNorm, context embedding with glimpse, tanh*10
logit clipping, -inf masking with masked_fill, greedy decoding by gather, sampling from fixed
NumPy uniforms, REINFORCE against a greedy-rollout baseline), POMO (multi-start with a shared
mean baseline), a pointer network (LSTM encoder/decoder with additive attention) and the
repo's outer loop (rollout baseline with a paired t-test, resume from a checkpoint, beam search).
The sibling _graphs covers Gumbel-Sinkhorn, NeuroSAT, GraphRNN, GRAN and DiGress-lite."""

import copy
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _tour_length(torch, loc, pi):
    """attention-learn-to-route's TSP.get_costs: gather by tour, then closing edge via roll."""
    d = loc.gather(1, pi.unsqueeze(-1).expand_as(loc))
    return (d[:, 1:] - d[:, :-1]).norm(p=2, dim=2).sum(1) + (d[:, 0] - d[:, -1]).norm(p=2, dim=1)


def attention_model_program(torch):
    """AttentionModel with a GraphAttentionEncoder (MHA + BatchNorm1d skip blocks), fixed
    context (graph embedding projection), step context (first and last node), glimpse
    attention, tanh clipping, masked_fill(-inf), greedy rollout baseline and REINFORCE."""
    rng = np.random.default_rng(0)
    nn = torch.nn
    B, N, D, H = 4, 6, 16, 4

    class SkipConnection(nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module

        def forward(self, x):
            return x + self.module(x)

    class MultiHeadAttention(nn.Module):
        def __init__(self, n_heads, input_dim, embed_dim):
            super().__init__()
            self.n_heads = n_heads
            self.key_dim = self.val_dim = embed_dim // n_heads
            self.norm_factor = 1 / math.sqrt(self.key_dim)
            self.W_query = nn.Parameter(torch.Tensor(n_heads, input_dim, self.key_dim))
            self.W_key = nn.Parameter(torch.Tensor(n_heads, input_dim, self.key_dim))
            self.W_val = nn.Parameter(torch.Tensor(n_heads, input_dim, self.val_dim))
            self.W_out = nn.Parameter(torch.Tensor(n_heads, self.key_dim, embed_dim))
            for param in self.parameters():
                stdv = 1. / math.sqrt(param.size(-1))
                param.data.uniform_(-stdv, stdv)

        def forward(self, q):
            h = q
            batch_size, graph_size, input_dim = h.size()
            n_query = q.size(1)
            hflat = h.contiguous().view(-1, input_dim)
            qflat = q.contiguous().view(-1, input_dim)
            shp = (self.n_heads, batch_size, graph_size, -1)
            shp_q = (self.n_heads, batch_size, n_query, -1)
            Q = torch.matmul(qflat, self.W_query).view(shp_q)
            K = torch.matmul(hflat, self.W_key).view(shp)
            V = torch.matmul(hflat, self.W_val).view(shp)
            compatibility = self.norm_factor * torch.matmul(Q, K.transpose(2, 3))
            attn = torch.softmax(compatibility, dim=-1)
            heads = torch.matmul(attn, V)
            out = torch.mm(
                heads.permute(1, 2, 0, 3).contiguous().view(-1, self.n_heads * self.val_dim),
                self.W_out.view(-1, D)).view(batch_size, n_query, D)
            return out

    class Normalization(nn.Module):
        def __init__(self, embed_dim):
            super().__init__()
            self.normalizer = nn.BatchNorm1d(embed_dim, affine=True)

        def forward(self, input):
            return self.normalizer(input.view(-1, input.size(-1))).view(*input.size())

    def layer():
        return nn.Sequential(
            SkipConnection(MultiHeadAttention(H, D, D)), Normalization(D),
            SkipConnection(nn.Sequential(nn.Linear(D, 32), nn.ReLU(), nn.Linear(32, D))),
            Normalization(D))

    class AttentionModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.init_embed = nn.Linear(2, D)
            self.embedder = nn.Sequential(*(layer() for _ in range(2)))
            self.project_node_embeddings = nn.Linear(D, 3 * D, bias=False)
            self.project_fixed_context = nn.Linear(D, D, bias=False)
            self.project_step_context = nn.Linear(2 * D, D, bias=False)
            self.project_out = nn.Linear(D, D, bias=False)
            self.W_placeholder = nn.Parameter(torch.Tensor(2 * D))
            self.tanh_clipping = 10.
            self.decode_type = "greedy"

        def set_decode_type(self, decode_type):
            self.decode_type = decode_type

        def _make_heads(self, v):
            return v.contiguous().view(v.size(0), v.size(1), H, -1).permute(2, 0, 1, 3)

        def forward(self, loc, uniforms=None):
            embeddings = self.embedder(self.init_embed(loc))
            graph_embed = embeddings.mean(1)
            fixed_context = self.project_fixed_context(graph_embed)[:, None, :]
            glimpse_key, glimpse_val, logit_key = \
                self.project_node_embeddings(embeddings[:, None, :, :]).chunk(3, dim=-1)
            glimpse_key = self._make_heads(glimpse_key.squeeze(1))
            glimpse_val = self._make_heads(glimpse_val.squeeze(1))
            logit_key = logit_key.squeeze(1).contiguous()
            visited = torch.zeros(B, 1, N, dtype=torch.uint8)
            first = prev = None
            outputs, sequences = [], []
            for i in range(N):
                if i == 0:
                    step = self.W_placeholder[None, None, :].expand(B, 1, 2 * D)
                else:
                    step = embeddings.gather(
                        1, torch.cat((first, prev), 1)[:, :, None].expand(B, 2, D)
                    ).view(B, 1, -1)
                query = fixed_context + self.project_step_context(step)
                mask = visited > 0
                glimpse_Q = query.view(B, 1, H, 1, D // H).permute(2, 0, 1, 3, 4)
                compat = torch.matmul(glimpse_Q, glimpse_key.unsqueeze(2).transpose(-2, -1)) \
                    / math.sqrt(glimpse_Q.size(-1))
                compat[mask[None, :, :, None, :].expand_as(compat)] = -math.inf
                heads = torch.matmul(torch.softmax(compat, dim=-1), glimpse_val.unsqueeze(2))
                glimpse = self.project_out(
                    heads.permute(1, 2, 3, 0, 4).contiguous().view(B, 1, 1, D))
                logits = torch.matmul(glimpse, logit_key.unsqueeze(1).transpose(-2, -1)).squeeze(-2)
                logits = logits / math.sqrt(glimpse.size(-1))
                logits = torch.tanh(logits) * self.tanh_clipping
                logits[mask] = -math.inf
                log_p = torch.log_softmax(logits, dim=-1)[:, 0, :]
                probs = log_p.exp()
                if self.decode_type == "greedy":
                    _, selected = probs.max(1)
                else:
                    u = torch.from_numpy(uniforms[i]).unsqueeze(1)
                    selected = (probs.cumsum(1) < u).sum(1).clamp(max=N - 1)
                    # resample guard as in the repo: never pick a visited node
                    assert not mask[:, 0].gather(1, selected.unsqueeze(-1)).any()
                outputs.append(log_p)
                sequences.append(selected)
                prev = selected[:, None]
                if first is None:
                    first = prev
                visited = visited.scatter(-1, prev[:, :, None], 1)
            _log_p, pi = torch.stack(outputs, 1), torch.stack(sequences, 1)
            cost = _tour_length(torch, loc, pi)
            ll = _log_p.gather(2, pi.unsqueeze(-1)).squeeze(-1).sum(1)
            return cost, ll, pi

    model = AttentionModel()
    fill_(torch, model, rng, 0.15)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm1d):
            with torch.no_grad():
                m.weight.fill_(1.0)
                m.bias.zero_()
    baseline_model = copy.deepcopy(model)
    baseline_model.eval()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 0.96 ** epoch)
    res = {"costs": [], "lls": [], "bl": [], "tours": [], "grad_norms": []}
    for step in range(3):
        loc = torch.from_numpy(rng.random((B, N, 2)).astype(np.float32))
        uniforms = rng.random((N, B)).astype(np.float32)
        model.train()
        model.set_decode_type("sampling")
        cost, ll, pi = model(loc, uniforms)
        with torch.no_grad():
            baseline_model.set_decode_type("greedy")
            bl_val, _, bl_pi = baseline_model(loc)
        reinforce_loss = ((cost - bl_val) * ll).mean()
        opt.zero_grad()
        reinforce_loss.backward()
        grad_norms = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, norm_type=2)
        opt.step()
        sched.step()
        res["costs"].append(cost.detach())
        res["lls"].append(ll.detach())
        res["bl"].append(bl_val)
        res["tours"] += pi.flatten().tolist() + bl_pi.flatten().tolist()
        res["grad_norms"].append(grad_norms)
    res["bn_running"] = model.embedder[0][1].normalizer.running_mean
    res["bn_batches"] = int(model.embedder[1][3].normalizer.num_batches_tracked)
    res["lr"] = opt.param_groups[0]["lr"]
    res["placeholder"] = model.W_placeholder.detach()
    # one-sided paired t-test style baseline update check from the repo (values only)
    candidate = torch.stack(res["costs"]).mean()
    res["candidate_better"] = bool((candidate - torch.stack(res["bl"]).mean()) < 0)
    return res


def pomo_program(torch):
    """POMO: each of N starts decodes a full tour; shared baseline = mean over starts;
    loss = -(advantage * log_prob).mean(); augmentation by 8 symmetries at inference."""
    rng = np.random.default_rng(1)
    nn = torch.nn
    F = torch.nn.functional
    B, N, D, H = 2, 5, 16, 4

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Linear(2, D)
            self.Wq, self.Wk, self.Wv = (nn.Linear(D, D, bias=False) for _ in range(3))
            self.combine = nn.Linear(D, D)
            self.norm1 = nn.InstanceNorm1d(D, affine=True, track_running_stats=False)
            self.ff = nn.Sequential(nn.Linear(D, 32), nn.ReLU(), nn.Linear(32, D))
            self.norm2 = nn.InstanceNorm1d(D, affine=True, track_running_stats=False)

        def forward(self, data):
            x = self.embedding(data)
            q = self.Wq(x).reshape(B, N, H, -1).transpose(1, 2)
            k = self.Wk(x).reshape(B, N, H, -1).transpose(1, 2)
            v = self.Wv(x).reshape(B, N, H, -1).transpose(1, 2)
            score = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(D // H)
            out = torch.matmul(nn.Softmax(dim=3)(score), v).transpose(1, 2).reshape(B, N, D)
            x = self.norm1((x + self.combine(out)).transpose(1, 2)).transpose(1, 2)
            return self.norm2((x + self.ff(x)).transpose(1, 2)).transpose(1, 2)

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.Wq_first = nn.Linear(D, D, bias=False)
            self.Wq_last = nn.Linear(D, D, bias=False)
            self.Wk = nn.Linear(D, D, bias=False)
            self.Wv = nn.Linear(D, D, bias=False)
            self.combine = nn.Linear(D, D)

        def set_kv(self, enc):
            self.k = self.Wk(enc).reshape(B, N, H, -1).transpose(1, 2)
            self.v = self.Wv(enc).reshape(B, N, H, -1).transpose(1, 2)
            self.single_head_key = enc.transpose(1, 2)

        def set_q1(self, enc_first):
            self.q_first = self.Wq_first(enc_first).reshape(B, N, H, -1).transpose(1, 2)

        def forward(self, enc_last, ninf_mask):
            q = self.q_first + self.Wq_last(enc_last).reshape(B, N, H, -1).transpose(1, 2)
            score = torch.matmul(q, self.k.transpose(2, 3)) / math.sqrt(D // H)
            score = score + ninf_mask[:, None, :, :].expand(B, H, N, N)
            out = torch.matmul(F.softmax(score, dim=3), self.v).transpose(1, 2).reshape(B, N, D)
            mh = self.combine(out)
            score = torch.matmul(mh, self.single_head_key) / math.sqrt(D)
            score_clipped = 10 * torch.tanh(score)
            return F.softmax(score_clipped + ninf_mask, dim=2)

    def get_encoding(enc, idx):
        gathering_index = idx[:, :, None].expand(B, idx.size(1), D)
        return enc.gather(dim=1, index=gathering_index)

    enc, dec = Encoder(), Decoder()
    fill_(torch, list(enc.parameters()) + list(dec.parameters()), rng, 0.3)
    opt = torch.optim.Adam([*enc.parameters(), *dec.parameters()], lr=1e-3, weight_decay=1e-6)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[1, 2], gamma=0.1)
    res = {"loss": [], "score": [], "grads": []}
    BATCH_IDX = torch.arange(B)[:, None].expand(B, N)
    POMO_IDX = torch.arange(N)[None, :].expand(B, N)
    for _ in range(2):
        problems = torch.from_numpy(rng.random((B, N, 2)).astype(np.float32))
        uniforms = rng.random((N, B, N)).astype(np.float32)
        encoded = enc(problems)
        dec.set_kv(encoded)
        ninf_mask = torch.zeros((B, N, N))
        selected = torch.arange(N)[None, :].expand(B, N)
        dec.set_q1(get_encoding(encoded, selected))
        ninf_mask[BATCH_IDX, POMO_IDX, selected] = float("-inf")
        prob_list = torch.zeros(size=(B, N, 0))
        seq = selected[:, :, None]
        for t in range(1, N):
            probs = dec(get_encoding(encoded, selected), ninf_mask)
            u = torch.from_numpy(uniforms[t])[:, :, None]
            selected = (probs.cumsum(2) < u).sum(2).clamp(max=N - 1)
            prob = probs[BATCH_IDX, POMO_IDX, selected].reshape(B, N)
            ninf_mask[BATCH_IDX, POMO_IDX, selected] = float("-inf")
            prob_list = torch.cat((prob_list, prob[:, :, None]), dim=2)
            seq = torch.cat((seq, selected[:, :, None]), dim=2)
        ordered = problems[:, None, :, :].expand(B, N, N, 2).gather(
            2, seq[:, :, :, None].expand(B, N, N, 2))
        rolled = ordered.roll(dims=2, shifts=-1)
        travel = ((ordered - rolled) ** 2).sum(3).sqrt().sum(2)
        reward = -travel
        advantage = reward - reward.float().mean(dim=1, keepdims=True)
        log_prob = prob_list.log().sum(dim=2)
        loss = (-advantage * log_prob).mean()
        max_pomo_reward, _ = reward.max(dim=1)
        score = -max_pomo_reward.float().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["loss"].append(loss.detach())
        res["score"].append(score)
        res["grads"].append(dec.combine.weight.grad.clone())
        res["seq"] = seq.flatten().tolist()
    # x8 augmentation as POMO's augment_xy_data_by_8_fold
    x, y = problems[:, :, [0]], problems[:, :, [1]]
    aug = torch.cat((torch.cat((x, y), 2), torch.cat((1 - x, y), 2), torch.cat((x, 1 - y), 2),
                     torch.cat((1 - x, 1 - y), 2), torch.cat((y, x), 2),
                     torch.cat((1 - y, x), 2), torch.cat((y, 1 - x), 2),
                     torch.cat((1 - y, 1 - x), 2)), dim=0)
    res["aug"] = aug
    res["lr"] = sched.get_last_lr()
    res["mask_isinf"] = torch.isinf(ninf_mask).sum().item()
    return res


def pointer_network_program(torch):
    """Pointer network (Vinyals et al.) as the popular PyTorch ports write it: LSTM encoder,
    LSTMCell decoder, Bahdanau attention with V^T tanh(W1 e + W2 d), masked pointing with
    a large negative, teacher forcing and NLL on the sorted-order targets."""
    rng = np.random.default_rng(2)
    nn = torch.nn
    B, L, E, Hd = 3, 5, 8, 12

    class Attention(nn.Module):
        def __init__(self, hidden_dim):
            super().__init__()
            self.input_linear = nn.Linear(hidden_dim, hidden_dim)
            self.context_linear = nn.Conv1d(hidden_dim, hidden_dim, 1, 1)
            self.V = nn.Parameter(torch.FloatTensor(hidden_dim), requires_grad=True)
            self.tanh = nn.Tanh()
            self.softmax = nn.Softmax(dim=1)
            self._inf = nn.Parameter(torch.FloatTensor([float("-inf")]), requires_grad=False)

        def init_inf(self, mask_size):
            self.inf = self._inf.unsqueeze(1).expand(*mask_size)

        def forward(self, input, context, mask):
            inp = self.input_linear(input).unsqueeze(2).expand(-1, -1, context.size(1))
            context = context.permute(0, 2, 1)
            ctx = self.context_linear(context)
            V = self.V.unsqueeze(0).expand(context.size(0), -1).unsqueeze(1)
            att = torch.bmm(V, self.tanh(inp + ctx)).squeeze(1)
            if len(att[mask]) > 0:
                att[mask] = self.inf[mask]
            alpha = self.softmax(att)
            hidden_state = torch.bmm(ctx, alpha.unsqueeze(2)).squeeze(2)
            return hidden_state, alpha

    class PointerNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Linear(1, E)
            self.encoder = nn.LSTM(E, Hd, 1, batch_first=True)
            self.decoder_cell = nn.LSTMCell(E, Hd)
            self.att = Attention(Hd)
            self.hidden_out = nn.Linear(Hd * 2, Hd)
            self.decoder_input0 = nn.Parameter(torch.FloatTensor(E), requires_grad=False)
            self.register_buffer("mask", torch.ones(1), persistent=False)
            self.register_buffer("runner", torch.zeros(1).long(), persistent=False)

        def forward(self, inputs):
            batch_size, input_length = inputs.size(0), inputs.size(1)
            embedded = self.embedding(inputs.unsqueeze(-1))
            enc_out, (h, c) = self.encoder(embedded)
            mask = self.mask.repeat(input_length).unsqueeze(0).repeat(batch_size, 1)
            self.att.init_inf(mask.size())
            runner = self.runner.repeat(input_length)
            for i in range(input_length):
                runner.data[i] = i
            runner = runner.unsqueeze(0).expand(batch_size, -1).long()
            decoder_input = self.decoder_input0.unsqueeze(0).expand(batch_size, -1)
            hidden = (h[-1], c[-1])
            outputs, pointers = [], []
            for _ in range(input_length):
                h_t, c_t = self.decoder_cell(decoder_input, hidden)
                h_t, outs = self.att(h_t, enc_out, torch.eq(mask, 0))
                h_t = torch.tanh(self.hidden_out(torch.cat((h_t, hidden[0]), 1)))
                hidden = (h_t, c_t)
                masked_outs = outs * mask
                max_probs, indices = masked_outs.max(1)
                one_hot_pointers = (runner == indices.unsqueeze(1).expand(-1, outs.size()[1])
                                    ).float()
                mask = mask * (1 - one_hot_pointers)
                embedding_mask = one_hot_pointers.unsqueeze(2).expand(-1, -1, E).byte()
                decoder_input = embedded[embedding_mask.data.bool()].view(batch_size, E)
                outputs.append(outs.unsqueeze(0))
                pointers.append(indices.unsqueeze(1))
            outputs = torch.cat(outputs).permute(1, 0, 2)
            pointers = torch.cat(pointers, 1)
            return outputs, pointers

    model = PointerNet()
    fill_(torch, model, rng, 0.4)
    opt = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()), lr=1e-2)
    crit = nn.CrossEntropyLoss()
    res = {"loss": [], "pointers": []}
    for _ in range(3):
        x = torch.from_numpy(rng.random((B, L)).astype(np.float32))
        target = torch.argsort(x, dim=1)
        o, p = model(x)
        o = o.contiguous().view(-1, o.size()[-1])
        loss = crit(torch.log(o + 1e-8), target.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.detach())
        res["pointers"] += p.flatten().tolist()
    res["V"] = model.att.V.detach()
    res["V_grad"] = model.att.V.grad
    res["enc_w_grad"] = model.encoder.weight_hh_l0.grad
    res["inf_frozen"] = model.att._inf.grad is None
    res["state_keys"] = sorted(model.state_dict().keys())
    return res


def rollout_resume_program(torch):
    """attention-learn-to-route's outer loop around a small pointer-style policy: a
    DataLoader over a TensorDataset, a RolloutBaseline re-evaluated by a paired t-test
    (scipy.stats.ttest_rel on .cpu().numpy()), an ExponentialBaseline warm-up mixed in by
    WarmupBaseline, clip_grad_norms over param groups with an infinite max norm, a resume
    from a torch.save'd checkpoint (optimizer state moved with .to, rng state restored), and
    beam search by topk over flattened scores with // and %."""
    import io

    from scipy.stats import ttest_rel
    rng = np.random.default_rng(8)
    nn = torch.nn
    B, N, D, W = 4, 5, 8, 3

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(2, D)
            self.q = nn.Linear(2 * D, D, bias=False)

        def step_logits(self, emb, prev, mask):
            ctx = torch.cat((emb.mean(1), emb.gather(
                1, prev[:, None, None].expand(-1, 1, D)).squeeze(1)), -1)
            logits = torch.einsum("bd,bnd->bn", self.q(ctx), emb) / math.sqrt(D)
            return torch.log_softmax((torch.tanh(logits) * 10).masked_fill(mask, -math.inf), -1)

        def forward(self, loc, greedy=True, uniforms=None):
            emb = self.embed(loc)
            b = loc.size(0)
            mask = torch.zeros(b, N, dtype=torch.bool)
            prev = torch.zeros(b, dtype=torch.long)
            mask[torch.arange(b), prev] = True
            pis, lls = [prev], []
            for i in range(N - 1):
                log_p = self.step_logits(emb, prev, mask)
                if greedy:
                    prev = log_p.argmax(-1)
                else:
                    u = torch.from_numpy(uniforms[i])[:, None]
                    prev = (log_p.exp().cumsum(-1) < u).sum(-1).clamp(max=N - 1)
                    prev = torch.where(mask.gather(1, prev[:, None]).squeeze(1),
                                       (~mask).float().argmax(-1), prev)
                lls.append(log_p.gather(1, prev[:, None]).squeeze(1))
                mask = mask.scatter(1, prev[:, None], True)
                pis.append(prev)
            pi = torch.stack(pis, 1)
            return _tour_length(torch, loc, pi), torch.stack(lls, 1).sum(1), pi

        def beam(self, loc):
            """Width-W beam search over one instance, scores kept in log space."""
            emb = self.embed(loc).expand(W, N, D)
            scores = torch.zeros(1)
            mask = torch.zeros(1, N, dtype=torch.bool)
            mask[:, 0] = True
            prev = torch.zeros(1, dtype=torch.long)
            seqs = prev[:, None]
            for _ in range(N - 1):
                k = prev.size(0)
                log_p = self.step_logits(emb[:k], prev, mask)
                flat = (scores[:, None] + log_p).view(-1)
                top, idx = flat.topk(min(W, int(torch.isfinite(flat).sum())))
                parent, prev = idx // N, idx % N
                seqs = torch.cat((seqs[parent], prev[:, None]), 1)
                mask = mask[parent].scatter(1, prev[:, None], True)
                scores = top
            return seqs, scores

    class ExponentialBaseline:
        def __init__(self, beta):
            self.beta, self.v = beta, None

        def eval(self, c):
            v = c.mean() if self.v is None else self.beta * self.v + (1. - self.beta) * c.mean()
            self.v = v.detach()
            return self.v

    def rollout(model, dataset):
        model.eval()
        with torch.no_grad():
            return torch.cat([model(bat[0])[0] for bat in
                              torch.utils.data.DataLoader(dataset, batch_size=B)], 0)

    model = Policy()
    fill_(torch, model, rng, 0.5)
    optimizer = torch.optim.Adam([{"params": model.parameters(), "lr": 1e-2}])
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: 0.9 ** epoch)
    data = torch.utils.data.TensorDataset(torch.from_numpy(rng.random((8, N, 2)).astype(
        np.float32)))
    bl_model, exp_bl = copy.deepcopy(model), ExponentialBaseline(0.8)
    bl_vals = rollout(bl_model, data)
    res = {"loss": [], "alpha": [], "grad_norms": [], "p": []}
    for epoch in range(2):
        alpha = (epoch + 1) / 2.0
        model.train()
        for (loc,) in torch.utils.data.DataLoader(data, batch_size=B, shuffle=False):
            uniforms = rng.random((N, loc.size(0))).astype(np.float32)
            cost, ll, _ = model(loc, greedy=False, uniforms=uniforms)
            with torch.no_grad():
                v_roll = bl_model(loc)[0]
            bl_val = alpha * v_roll + (1 - alpha) * exp_bl.eval(cost)
            loss = ((cost - bl_val) * ll).mean()
            optimizer.zero_grad()
            loss.backward()
            grad_norms = [torch.nn.utils.clip_grad_norm_(group["params"], math.inf, norm_type=2)
                          for group in optimizer.param_groups]
            optimizer.step()
            res["loss"].append(loss.detach())
            res["grad_norms"] += grad_norms
        candidate_vals = rollout(model, data)
        candidate_mean = candidate_vals.mean()
        if candidate_mean - bl_vals.mean() < 0:
            t, p = ttest_rel(candidate_vals.cpu().numpy(), bl_vals.cpu().numpy())
            res["p"].append(round(float(p / 2), 5))
            if p / 2 < 0.5:
                bl_model, bl_vals = copy.deepcopy(model), candidate_vals
        lr_scheduler.step()
        res["alpha"].append(alpha)
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "rng_state": torch.get_rng_state(), "baseline": bl_model.state_dict()}, buf)
    buf.seek(0)
    load_data = torch.load(buf, map_location=lambda storage, loc: storage)
    model2 = Policy()
    model2.load_state_dict({**model2.state_dict(), **load_data.get("model", {})})
    optimizer2 = torch.optim.Adam([{"params": model2.parameters(), "lr": 1e-2}])
    optimizer2.load_state_dict(load_data["optimizer"])
    for state in optimizer2.state.values():
        for k, v in state.items():
            if torch.is_tensor(v):
                state[k] = v.to("cpu")
    torch.set_rng_state(load_data["rng_state"])
    cost, ll, _ = model2(data[0:B][0], greedy=False, uniforms=rng.random((N, B)).astype(
        np.float32))
    ((cost - cost.mean()) * ll).mean().backward()
    optimizer2.step()
    res["resumed_w"] = model2.q.weight.detach()
    res["resumed_step"] = optimizer2.state[model2.q.weight]["step"]
    res["resumed_lr"] = optimizer2.param_groups[0]["lr"]
    seqs, scores = model2.beam(data[0][0])
    res["beam"] = seqs.flatten().tolist()
    res["beam_scores"] = scores.detach()
    res["bl_vals"] = bl_vals
    return res


PROGRAMS = [attention_model_program, pomo_program, pointer_network_program,
            rollout_resume_program]

# sampled tours depend on float32 cumsum against uniforms; softmax/log chains over several
# Adam steps accumulate float32 reassociation noise in the 1e-5 relative range
TOLERANCES = {"attention_model_program": (1e-4, 1e-5), "pomo_program": (1e-4, 1e-5),
              "pointer_network_program": (1e-4, 1e-5), "rollout_resume_program": (1e-4, 1e-5)}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
