"""Memory-access variants written as their reference repositories write them in torch, run once
with `torch` bound to ember and once to PyTorch from the same NumPy weights and data: the
Relational Memory Core (multi-head attention over memory and input, input/forget gating),
Key-Value Memory Networks (EmbeddingBag with offsets and per-sample weights, margin ranking),
Sparse Access Memory (top-k reads, in-place index_add_/index_copy_ writes, gradient clamping
hooks) and an NTM head in float64 whose shift is a grouped circular Conv1d. Siblings:
test_parity_programs_round34_memory.py and _memory_algo."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def relational_memory_program(torch):
    """L0SG/relational-rnn-pytorch's RelationalMemory: initial state from stacked identities
    padded/truncated to mem_size, attend_over_memory with nn.MultiheadAttention on
    cat([memory, input]) then an MLP with LayerNorms, gating with input and forget gates
    (forget bias 1, input bias 0) from tanh(memory) and the input, unrolled over a sequence
    with the next memory cut to mem_slots; a language-model head with cross entropy."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(3500)
    B, slots, heads, head_size, T, V = 2, 3, 2, 4, 4, 9
    mem_size = heads * head_size

    class RelationalMemory(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, mem_size)
            self.attn = nn.MultiheadAttention(mem_size, heads, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(mem_size, mem_size), nn.ReLU(),
                                     nn.Linear(mem_size, mem_size))
            self.ln1 = nn.LayerNorm(mem_size)
            self.ln2 = nn.LayerNorm(mem_size)
            self.input_gate_projector = nn.Linear(mem_size, 2 * mem_size)
            self.memory_gate_projector = nn.Linear(mem_size, 2 * mem_size)
            self.forget_bias = nn.Parameter(torch.tensor(1.0))
            self.input_bias = nn.Parameter(torch.tensor(0.0))
            self.head = nn.Linear(mem_size, V)

        def initial_state(self, batch_size):
            init_state = torch.stack([torch.eye(slots) for _ in range(batch_size)])
            if mem_size > slots:
                diff = mem_size - slots
                pad = torch.zeros((batch_size, slots, diff))
                init_state = torch.cat([init_state, pad], 2)
            elif mem_size < slots:
                init_state = init_state[:, :, :mem_size]
            return init_state

        def attend_over_memory(self, memory):
            attended, weights = self.attn(memory, memory, memory)
            memory = self.ln1(memory + attended)
            memory = self.ln2(memory + self.mlp(memory))
            return memory, weights

        def create_gates(self, inputs, memory):
            memory = torch.tanh(memory)
            inputs = inputs.view(inputs.shape[0], -1)
            gate_inputs = self.input_gate_projector(inputs).unsqueeze(1)
            gate_memory = self.memory_gate_projector(memory)
            gates = gate_memory + gate_inputs
            gates = torch.split(gates, split_size_or_sections=int(gates.shape[2] / 2), dim=2)
            input_gate, forget_gate = gates
            input_gate = torch.sigmoid(input_gate + self.input_bias)
            forget_gate = torch.sigmoid(forget_gate + self.forget_bias)
            return input_gate, forget_gate

        def forward_step(self, inputs, memory):
            inputs_reshape = inputs.unsqueeze(1)
            memory_plus_input = torch.cat([memory, inputs_reshape], dim=1)
            next_memory, weights = self.attend_over_memory(memory_plus_input)
            n = inputs_reshape.shape[1]
            next_memory = next_memory[:, :-n, :]
            input_gate, forget_gate = self.create_gates(inputs_reshape, memory)
            next_memory = input_gate * torch.tanh(next_memory) + forget_gate * memory
            return next_memory.view(inputs.shape[0], -1), next_memory, weights

        def forward(self, tokens):
            memory = self.initial_state(tokens.size(0))
            logits = []
            for t in range(tokens.size(1)):
                out, memory, weights = self.forward_step(self.embed(tokens[:, t]), memory)
                logits.append(self.head(memory.mean(1)))
            return torch.stack(logits, 1), memory, weights

    model = RelationalMemory()
    fill_(torch, model, rng, 0.3)
    tokens = torch.from_numpy(rng.integers(0, V, (B, T + 1)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(2):
        logits, memory, weights = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V), tokens[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        opt.step()
        losses.append(loss.detach())
    return dict(losses=torch.stack(losses), memory=memory.detach(), weights=weights.detach(),
                forget_bias=model.forget_bias.detach(), init=model.initial_state(1))


def kv_memnet_program(torch):
    """Miller et al.'s Key-Value Memory Network: keys and values as bags of words through
    nn.EmbeddingBag (offsets, mode 'sum', per_sample_weights as TF-IDF-like weights, and mode
    'mean' for the question), key hashing by padding the bags, hops with R_j linear maps,
    candidate scoring by dot products and nn.MarginRankingLoss against the best negative,
    Adagrad with lr decay."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(3510)
    V, D, M, hops, n_cand = 15, 6, 4, 2, 5

    class KVMemNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.A = nn.EmbeddingBag(V, D, mode="sum")
            self.Q = nn.EmbeddingBag(V, D, mode="mean")
            self.B = nn.Embedding(V, D)
            self.R = nn.ModuleList([nn.Linear(D, D, bias=False) for _ in range(hops)])

        def forward(self, q_words, key_words, key_offsets, key_w, val_words, val_offsets,
                    cand):
            q = self.Q(q_words.unsqueeze(0)).squeeze(0)
            k = self.A(key_words, key_offsets, per_sample_weights=key_w)
            v = self.A(val_words, val_offsets)
            ps = []
            for R in self.R:
                p = F.softmax(k @ q, 0)
                o = p @ v
                q = R(q + o)
                ps.append(p)
            return self.B(cand) @ q, torch.stack(ps)

    model = KVMemNN()
    fill_(torch, model, rng, 0.4)
    lens = [3, 2, 4, 1]
    key_words = torch.from_numpy(rng.integers(0, V, sum(lens)))
    key_offsets = torch.tensor(np.cumsum([0] + lens[:-1]))
    key_w = torch.from_numpy(rng.uniform(0.1, 1.0, sum(lens)).astype(np.float32))
    val_words = torch.from_numpy(rng.integers(0, V, M))
    val_offsets = torch.arange(M)
    q_words = torch.from_numpy(rng.integers(0, V, 3))
    cand = torch.from_numpy(rng.choice(V, n_cand, replace=False))
    rank = nn.MarginRankingLoss(margin=0.1)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1, lr_decay=0.01)
    losses, grads = [], []
    for _ in range(3):
        scores, ps = model(q_words, key_words, key_offsets, key_w, val_words, val_offsets,
                           cand)
        pos = scores[0:1]
        neg = scores[1:].max().unsqueeze(0)
        loss = rank(pos, neg, torch.ones(1))
        opt.zero_grad()
        loss.backward()
        grads += [model.A.weight.grad.clone(), model.Q.weight.grad.clone()]
        opt.step()
        losses.append(loss.detach())
    return dict(losses=torch.stack(losses), scores=scores.detach(), ps=ps.detach(),
                grads=torch.stack(grads),
                step=opt.state[model.A.weight]["step"])


def sam_program(torch):
    """Sparse Access Memory (Rae et al., ixaxaar's pytorch-dnc SAM): reads from the top-k
    cosine matches only (topk, softmax over the k, weights scattered into a dense vector for
    the usage update), writes by index_add_ on a clone of the memory at the k read slots and at
    the least-recently-used slot (argmin of the last-access time), last-access times updated
    by index_copy_, and gradient clamping hooks registered on every parameter."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(3520)
    N, W, K, X, H, T = 8, 4, 2, 3, 8, 5

    class SAM(nn.Module):
        def __init__(self):
            super().__init__()
            self.ctrl = nn.GRUCell(X + W, H)
            self.iface = nn.Linear(H, 2 * W + 2)
            self.out = nn.Linear(H + W, X)
            for p in self.parameters():
                p.register_hook(lambda grad: torch.clamp(grad, -0.05, 0.05))

        def forward(self, xs):
            memory = torch.full((N, W), 0.01) + torch.arange(N * W).view(N, W) * 1e-3
            last_used = torch.arange(N, dtype=torch.float32)
            r = torch.zeros(W)
            h = torch.zeros(1, H)
            outs, dense_ws = [], []
            for t in range(xs.size(0)):
                h = self.ctrl(torch.cat([xs[t], r]).unsqueeze(0), h)
                key, val, gate = torch.split(self.iface(h).squeeze(0), [W, W, 2])
                beta, alpha = F.softplus(gate[0]) + 1, torch.sigmoid(gate[1])
                sim = F.cosine_similarity(memory, key.unsqueeze(0), dim=1)
                top, idx = torch.topk(sim, K)
                w = F.softmax(beta * top, 0)
                r = w @ memory[idx]
                dense = torch.zeros(N).scatter(0, idx, w)
                dense_ws.append(dense)
                lru = torch.argmin(last_used)
                memory = memory.clone()
                memory.index_add_(0, idx, alpha * w.unsqueeze(1) * val.unsqueeze(0))
                memory.index_add_(0, lru.view(1), ((1 - alpha) * val).unsqueeze(0))
                last_used = last_used.index_copy(0, idx, torch.full((K,), float(T + t)))
                outs.append(self.out(torch.cat([h.squeeze(0), r])))
            return torch.stack(outs), memory, torch.stack(dense_ws), last_used

    model = SAM()
    fill_(torch, model, rng, 0.5)
    xs = normal(torch, rng, T, X)
    target = normal(torch, rng, T, X)
    out, memory, dense_ws, last_used = model(xs)
    loss = F.smooth_l1_loss(out, target, beta=0.5)
    loss.backward()
    return dict(out=out, memory=memory, dense=dense_ws, last_used=last_used, loss=loss,
                g_iface=model.iface.weight.grad, g_ctrl=model.ctrl.weight_hh.grad,
                clamped=model.out.weight.grad.abs().max())


def ntm_double_program(torch):
    """An NTM addressing step in float64 (model.double()): content weights from cosine
    similarity with a broadcast key, interpolation, the shift as one grouped circular Conv1d
    over the batch (padding_mode 'circular', groups=B, the per-sample shift kernels as its
    weight), the same through torch.roll over a shift range of 5, sharpening by pow with a
    per-sample gamma; gradcheck of the whole addressing step in float64."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(3530)
    B, N, M, S = 3, 7, 4, 5

    head = nn.Linear(6, M + 1 + 1 + S + 1).double()
    fill_(torch, head, rng, 0.5)
    memory = torch.from_numpy(rng.standard_normal((B, N, M)))
    w_prev = torch.softmax(torch.from_numpy(rng.standard_normal((B, N))), 1)
    h = torch.from_numpy(rng.standard_normal((B, 6))).requires_grad_()

    def address(h, shift_mode):
        k, beta, g, s, gamma = torch.split(head(h), [M, 1, 1, S, 1], 1)
        beta, g = F.softplus(beta), torch.sigmoid(g)
        s, gamma = F.softmax(s, 1), 1 + F.softplus(gamma)
        wc = F.softmax(beta * F.cosine_similarity(memory, k.unsqueeze(1), dim=-1), 1)
        wg = g * wc + (1 - g) * w_prev
        if shift_mode == "conv":
            conv = F.pad(wg.unsqueeze(0), (S // 2, S // 2), mode="circular")
            w_hat = F.conv1d(conv, s.flip(1).unsqueeze(1), groups=B).squeeze(0)
        else:
            w_hat = sum(torch.roll(wg, sh, 1) * s[:, sh + S // 2:sh + S // 2 + 1]
                        for sh in range(-(S // 2), S // 2 + 1))
        w = w_hat ** gamma
        return w / (w.sum(1, keepdim=True) + 1e-16)

    conv_w = address(h, "conv")
    roll_w = address(h, "roll")
    g_conv, = torch.autograd.grad((conv_w * memory[..., 0]).sum(), h)
    circ = nn.Conv1d(B, B, 3, padding=1, padding_mode="circular", groups=B, bias=False)
    circ = circ.double()
    fill_(torch, circ, rng, 0.5)
    ok = torch.autograd.gradcheck(lambda x: address(x, "conv"), (h,), eps=1e-6, atol=1e-5)
    return dict(conv_w=conv_w, roll_w=roll_w, diff=(conv_w - roll_w).abs().max(),
                g_conv=g_conv, dtype=[str(conv_w.dtype).split(".")[-1]], gradcheck=ok,
                circ=circ(w_prev.unsqueeze(0)), circ_dtype=[str(circ.weight.dtype).split(".")[-1]])


def legacy_dnc_program(torch):
    """A 2017-era memory network as the early pytorch DNC/NTM repos write it: Variable
    wrappers, F.softmax/F.log_softmax without dim (the implicit-dimension warning), F.sigmoid
    and F.tanh, nn.init.xavier_uniform without the underscore, the deprecated clip_grad_norm,
    weight clipping through .data.clamp_, uint8 masks, .data[0] reads, x.type() strings and a
    forward hook recording the read weights for visualisation."""
    nn = torch.nn
    F = nn.functional
    Variable = __import__(torch.__name__ + ".autograd", fromlist=["Variable"]).Variable
    rng = np.random.default_rng(3540)
    B, N, W, X, H = 2, 5, 3, 4, 6

    class ReadHead(nn.Module):
        def __init__(self):
            super().__init__()
            self.key = nn.Linear(H, W)
            self.beta = nn.Linear(H, 1)

        def forward(self, h, memory):
            k = F.tanh(self.key(h))
            sim = torch.bmm(memory, k.unsqueeze(2)).squeeze(2)
            w = F.softmax(sim * F.softplus(self.beta(h)))
            return torch.bmm(w.unsqueeze(1), memory).squeeze(1), w

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.ctrl = nn.Linear(X + W, H)
            self.read = ReadHead()
            self.write = nn.Linear(H, W)
            self.gate = nn.Linear(H, N)
            self.out = nn.Linear(H + W, 3)
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    nn.init.xavier_uniform(m.weight)

        def forward(self, xs, memory):
            r = Variable(torch.zeros(B, W))
            logps = []
            for t in range(xs.size(0)):
                h = F.tanh(self.ctrl(torch.cat([xs[t], r], 1)))
                r, w = self.read(h, memory)
                g = F.sigmoid(self.gate(h)).unsqueeze(2)
                memory = memory * (1 - g) + g * self.write(h).unsqueeze(1)
                logps.append(F.log_softmax(self.out(torch.cat([h, r], 1))))
            return torch.stack(logps), memory

    model = Net()
    fill_(torch, model, rng, 0.4)
    seen = []
    handle = model.read.register_forward_hook(lambda m, i, o: seen.append(o[1].detach()))
    xs = Variable(normal(torch, rng, 3, B, X))
    y = Variable(torch.from_numpy(rng.integers(0, 3, (3, B))))
    mask = torch.from_numpy(np.array([[1, 1], [1, 0], [0, 1]], dtype=np.uint8))
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-2, momentum=0.9)
    losses = []
    for _ in range(2):
        memory = Variable(torch.zeros(B, N, W).fill_(0.1))
        logps, memory = model(xs, memory)
        nll = -logps.gather(2, y.unsqueeze(2)).squeeze(2)
        loss = nll.masked_select(mask.bool()).mean()
        opt.zero_grad()
        loss.backward()
        norm = nn.utils.clip_grad_norm(model.parameters(), 0.5)
        opt.step()
        for p in model.parameters():
            p.data.clamp_(-0.6, 0.6)
        losses.append(loss.data.view(1)[0].item())
    handle.remove()
    model(xs, memory)
    return dict(losses=losses, norm=norm, memory=memory.data, n_seen=len(seen),
                read_w=torch.stack(seen), type=[xs.type().split(".")[-1]],
                masked=torch.zeros(3, 2).masked_fill(mask.bool(), 1.0),
                w=model.out.weight.data)


def product_key_memory_program(torch):
    """Lample et al.'s product-key memory (facebookresearch/XLM's HashingMemory): a query
    network with BatchNorm1d, queries split in halves scored against two sub-key tables,
    topk on each, the k*k cartesian scores by broadcasting, a second topk, slot indices
    i1 * n_keys + i2, softmax weights, values read by EmbeddingBag(mode 'sum',
    per_sample_weights) on the flattened indices; Adam for the keys and query net, SparseAdam
    for the sparse value table, and the memory usage counted by bincount."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(3550)
    B, D, k_dim, n_keys, knn, heads = 4, 6, 4, 4, 3, 2
    size = n_keys ** 2

    class HashingMemory(nn.Module):
        def __init__(self):
            super().__init__()
            self.keys = nn.Parameter(torch.empty(2 * heads * n_keys, k_dim // 2))
            self.values = nn.EmbeddingBag(size, D, mode="sum", sparse=True)
            self.query_proj = nn.Sequential(nn.Linear(D, heads * k_dim, bias=True),
                                            nn.BatchNorm1d(heads * k_dim))

        def get_indices(self, query, knn):
            bs = len(query)
            query = query.view(-1, heads, k_dim)
            half = k_dim // 2
            keys = self.keys.view(heads, 2, -1, half)
            q1 = query[:, :, :half]
            q2 = query[:, :, half:]
            scores1 = torch.einsum("blh, lkh->blk", q1, keys[:, 0])
            scores2 = torch.einsum("blh, lkh->blk", q2, keys[:, 1])
            scores1, indices1 = scores1.topk(knn, dim=2, largest=True)
            scores2, indices2 = scores2.topk(knn, dim=2, largest=True)
            all_scores = (scores1.view(bs, heads, knn, 1).expand(bs, heads, knn, knn)
                          + scores2.view(bs, heads, 1, knn).expand(bs, heads, knn, knn)
                          ).view(bs, heads, -1)
            all_indices = (indices1.view(bs, heads, knn, 1).expand(bs, heads, knn, knn)
                           * n_keys
                           + indices2.view(bs, heads, 1, knn).expand(bs, heads, knn, knn)
                           ).view(bs, heads, -1)
            scores, best = torch.topk(all_scores, k=knn, dim=2, largest=True, sorted=True)
            indices = all_indices.gather(2, best)
            return scores.view(bs * heads, knn), indices.view(bs * heads, knn)

        def forward(self, x):
            query = self.query_proj(x)
            scores, indices = self.get_indices(query, knn)
            scores = F.softmax(scores.float(), dim=-1).type_as(scores)
            indices = indices.view(-1, heads * knn)
            scores = scores.view(-1, heads * knn)
            output = self.values(indices, per_sample_weights=scores)
            return output, indices

    mem = HashingMemory()
    fill_(torch, mem, rng, 0.5)
    x = normal(torch, rng, B, D)
    y = normal(torch, rng, B, D)
    dense = [p for n, p in mem.named_parameters() if not n.startswith("values")]
    opt = torch.optim.Adam(dense, lr=1e-2)
    sparse_opt = torch.optim.SparseAdam(list(mem.values.parameters()), lr=1e-2)
    losses, uses, qgrads = [], [], []
    for _ in range(3):
        out, idx = mem(x)
        loss = F.mse_loss(out, y)
        opt.zero_grad()
        sparse_opt.zero_grad()
        loss.backward()
        is_sparse = mem.values.weight.grad.is_sparse
        qgrads.append(mem.query_proj[0].weight.grad.clone())
        opt.step()
        sparse_opt.step()
        losses.append(loss.detach())
        uses.append(torch.bincount(idx.flatten(), minlength=size))
    return dict(losses=torch.stack(losses), uses=torch.stack(uses), idx=idx,
                values=mem.values.weight.detach(), keys=mem.keys.detach(), sparse=is_sparse,
                # the query Linear's bias feeds BatchNorm, so its gradient is float32 noise
                # around zero that Adam scales to lr-sized steps: compare running_var, which
                # the bias does not move, rather than running_mean
                bn_var=mem.query_proj[1].running_var, qgrads=torch.stack(qgrads),
                qw=mem.query_proj[0].weight.detach(),
                exp_avg=sparse_opt.state[mem.values.weight]["exp_avg"].to_dense())


def transformer_xl_memory_program(torch):
    """Transformer-XL's recurrence (kimiyoung/transformer-xl): hidden states cached as detached
    mems and concatenated to the next segment, relative positional attention with the
    r_w_bias/r_r_bias terms, the _rel_shift trick (zero column cat, view, drop a row,
    view_as), a causal mask from triu with the memory length as diagonal offset filled with
    -inf by masked_fill, mems updated with torch.no_grad and a max length; gradients over two
    segments with truncated backprop."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(3560)
    n_head, d_head, d_model, qlen, mem_len, bsz, V = 2, 3, 6, 3, 4, 2, 7

    def rel_shift(x):
        zero_pad = torch.zeros((x.size(0), 1, *x.size()[2:]), device=x.device, dtype=x.dtype)
        x_padded = torch.cat([zero_pad, x], dim=1)
        x_padded = x_padded.view(x.size(1) + 1, x.size(0), *x.size()[2:])
        return x_padded[1:].view_as(x)

    class RelLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv_net = nn.Linear(d_model, 3 * n_head * d_head, bias=False)
            self.r_net = nn.Linear(d_model, n_head * d_head, bias=False)
            self.o_net = nn.Linear(n_head * d_head, d_model, bias=False)
            self.layer_norm = nn.LayerNorm(d_model)
            self.r_w_bias = nn.Parameter(torch.zeros(n_head, d_head))
            self.r_r_bias = nn.Parameter(torch.zeros(n_head, d_head))
            self.scale = 1 / (d_head ** 0.5)

        def forward(self, w, r, attn_mask, mems):
            qlen, rlen, bsz = w.size(0), r.size(0), w.size(1)
            cat = torch.cat([mems, w], 0) if mems is not None else w
            w_heads = self.qkv_net(cat)
            r_head_k = self.r_net(r)
            w_head_q, w_head_k, w_head_v = torch.chunk(w_heads, 3, dim=-1)
            w_head_q = w_head_q[-qlen:]
            klen = w_head_k.size(0)
            w_head_q = w_head_q.view(qlen, bsz, n_head, d_head)
            w_head_k = w_head_k.view(klen, bsz, n_head, d_head)
            w_head_v = w_head_v.view(klen, bsz, n_head, d_head)
            r_head_k = r_head_k.view(rlen, n_head, d_head)
            AC = torch.einsum("ibnd,jbnd->ijbn", (w_head_q + self.r_w_bias, w_head_k))
            BD = torch.einsum("ibnd,jnd->ijbn", (w_head_q + self.r_r_bias, r_head_k))
            BD = rel_shift(BD)
            attn_score = (AC + BD) * self.scale
            attn_score = attn_score.float().masked_fill(
                attn_mask[:, :, :, None], -float("inf")).type_as(attn_score)
            attn_prob = F.softmax(attn_score, dim=1)
            attn_vec = torch.einsum("ijbn,jbnd->ibnd", (attn_prob, w_head_v))
            attn_vec = attn_vec.contiguous().view(qlen, bsz, n_head * d_head)
            return self.layer_norm(w + self.o_net(attn_vec))

    class MemTransformerLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, d_model)
            self.layers = nn.ModuleList([RelLayer(), RelLayer()])
            self.out = nn.Linear(d_model, V)
            inv_freq = 1 / (10000 ** (torch.arange(0.0, d_model, 2.0) / d_model))
            self.register_buffer("inv_freq", inv_freq)

        def pos_emb(self, pos_seq):
            sinusoid_inp = torch.ger(pos_seq, self.inv_freq)
            return torch.cat([sinusoid_inp.sin(), sinusoid_inp.cos()], dim=-1)[:, None, :]

        def _update_mems(self, hids, mems, mlen):
            with torch.no_grad():
                new_mems = []
                end_idx = mlen + max(0, qlen)
                beg_idx = max(0, end_idx - mem_len)
                for i in range(len(hids)):
                    cat = torch.cat([mems[i], hids[i]], dim=0)
                    new_mems.append(cat[beg_idx:end_idx].detach())
            return new_mems

        def forward(self, data, mems):
            word_emb = self.emb(data)
            mlen = mems[0].size(0)
            klen = mlen + qlen
            dec_attn_mask = torch.triu(word_emb.new_ones(qlen, klen), diagonal=1 + mlen).bool()
            dec_attn_mask = dec_attn_mask[:, :, None]
            pos_seq = torch.arange(klen - 1, -1, -1.0, dtype=word_emb.dtype)
            pos = self.pos_emb(pos_seq)
            core_out = word_emb
            hids = [core_out]
            for i, layer in enumerate(self.layers):
                core_out = layer(core_out, pos, dec_attn_mask, mems[i] if mlen else None)
                hids.append(core_out)
            new_mems = self._update_mems(hids, mems, mlen)
            return self.out(core_out), new_mems

    model = MemTransformerLM()
    fill_(torch, model, rng, 0.4)
    data = torch.from_numpy(rng.integers(0, V, (3 * qlen + 1, bsz)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    mems = [torch.empty(0, bsz, d_model) for _ in range(3)]
    losses, mem_sizes = [], []
    for s in range(3):
        inp = data[s * qlen:(s + 1) * qlen]
        tgt = data[s * qlen + 1:(s + 1) * qlen + 1]
        logits, mems = model(inp, mems)
        loss = F.cross_entropy(logits.view(-1, V), tgt.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        mem_sizes.append(mems[0].size(0))
    x = torch.arange(24.0).view(3, 4, 2)
    return dict(losses=torch.stack(losses), mem_sizes=mem_sizes, mems=torch.stack(mems),
                mem_grad=[m.requires_grad for m in mems], shift=rel_shift(x),
                w_bias=model.layers[0].r_w_bias.detach())


PROGRAMS = [relational_memory_program, kv_memnet_program, sam_program, ntm_double_program,
            legacy_dnc_program, product_key_memory_program, transformer_xl_memory_program]

# recurrent controllers over optimiser steps accumulate float32 reassociation noise
TOLERANCES = {"relational_memory_program": (1e-4, 1e-5), "kv_memnet_program": (1e-4, 1e-5),
              "sam_program": (1e-4, 1e-5), "product_key_memory_program": (1e-4, 1e-5),
              "transformer_xl_memory_program": (1e-4, 1e-5)}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
