"""Permutation learning, SAT and graph generation written as their reference repositories write
them in torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy
weights: Gumbel-Sinkhorn (log-space Sinkhorn with logsumexp, fixed Gumbel noise, a greedy hard
matching written in torch), NeuroSAT (literal/clause message passing over a sparse COO
adjacency with torch.sparse.mm, literal-pair flips, LSTM updates, vote readout), GraphRNN (BFS
ordering, graph-level GRU over packed sequences, edge-level GRU), GRAN (block generation with a
mixture of Bernoulli likelihood) and DiGress-lite (discrete diffusion over adjacency with
marginal transitions)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def gumbel_sinkhorn_program(torch):
    """Mena et al.'s sorting network: log_alpha from an MLP, Gumbel noise added, temperature,
    n log-space Sinkhorn iterations, MSE between soft-permuted and sorted sequences; hard
    matching by repeated argmax with row/column masking; inverse permutation via scatter."""
    rng = np.random.default_rng(3)
    nn = torch.nn
    B, N, T = 4, 5, 0.7

    def log_sinkhorn(log_alpha, n_iters=20):
        n = log_alpha.size(1)
        log_alpha = log_alpha.reshape(-1, n, n)
        for _ in range(n_iters):
            log_alpha = log_alpha - torch.logsumexp(log_alpha, dim=2, keepdim=True)
            log_alpha = log_alpha - torch.logsumexp(log_alpha, dim=1, keepdim=True)
        return torch.exp(log_alpha)

    def matching(perm):
        """Greedy assignment: take the global max, strike its row and column, repeat."""
        b, n, _ = perm.shape
        scores = perm.clone()
        out = torch.zeros(b, n, dtype=torch.long)
        for _ in range(n):
            flat = scores.view(b, -1).argmax(dim=1)
            rows = torch.div(flat, n, rounding_mode="floor")
            cols = flat % n
            out[torch.arange(b), rows] = cols
            scores[torch.arange(b), rows, :] = -float("inf")
            scores[torch.arange(b), :, cols] = -float("inf")
        return out

    net = nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Linear(16, N))
    fill_(torch, net, rng, 0.5)
    opt = torch.optim.Adam(net.parameters(), lr=5e-2)
    res = {"loss": [], "hard": [], "inv": []}
    for _ in range(4):
        x = torch.from_numpy(rng.random((B, N)).astype(np.float32))
        ordered, _ = torch.sort(x, dim=1)
        log_alpha = net(x.unsqueeze(-1))  # (B, N, N): row i = where element i goes
        u = torch.from_numpy(rng.random((B, N, N)).astype(np.float32))
        gumbel = -torch.log(-torch.log(u + 1e-20) + 1e-20)
        soft = log_sinkhorn((log_alpha + gumbel) / T)
        pred = torch.matmul(soft.transpose(1, 2), x.unsqueeze(-1)).squeeze(-1)
        loss = nn.functional.mse_loss(pred, ordered)
        opt.zero_grad()
        loss.backward()
        opt.step()
        hard = matching(soft.detach())
        inv = torch.empty_like(hard).scatter_(1, hard, torch.arange(N).expand(B, N))
        res["loss"].append(loss.detach())
        res["hard"] += hard.flatten().tolist()
        res["inv"] += inv.flatten().tolist()
        res["row_sums"] = soft.sum(2)
        res["col_sums"] = soft.sum(1)
    res["prec"] = (torch.gather(x, 1, inv) == ordered).float().mean()
    res["w_grad"] = net[2].weight.grad
    return res


def neurosat_program(torch):
    """NeuroSAT: L_init/C_init broadcast, T rounds of literal->clause and clause->literal
    messages through torch.sparse.mm with a COO adjacency, the flip that swaps each literal
    with its negation, LSTMCell updates, per-variable vote averaged per problem, BCE loss."""
    rng = np.random.default_rng(4)
    nn = torch.nn
    d, n_vars, n_clauses, T = 8, 6, 9, 3
    n_lits = 2 * n_vars
    lits = []
    for _ in range(n_clauses):
        vs = rng.choice(n_vars, 3, replace=False)
        lits.append([int(v + n_vars * rng.integers(2)) for v in vs])
    rows = [lit for clause in lits for lit in clause]
    cols = [c for c, clause in enumerate(lits) for _ in clause]
    idx = torch.tensor([rows, cols], dtype=torch.long)
    L_unpack = torch.sparse_coo_tensor(idx, torch.ones(len(rows)), size=[n_lits, n_clauses])
    L_unpack = L_unpack.coalesce()

    class MLP(nn.Module):
        def __init__(self, i, h, o):
            super().__init__()
            self.l1, self.l2, self.l3 = nn.Linear(i, h), nn.Linear(h, h), nn.Linear(h, o)

        def forward(self, x):
            return self.l3(torch.relu(self.l2(torch.relu(self.l1(x)))))

    class NeuroSAT(nn.Module):
        def __init__(self):
            super().__init__()
            self.init_ts = torch.ones(1)
            self.init_ts.requires_grad = False
            self.L_init = nn.Linear(1, d)
            self.C_init = nn.Linear(1, d)
            self.L_msg = MLP(d, d, d)
            self.C_msg = MLP(d, d, d)
            self.L_update = nn.LSTM(d * 2, d)
            self.C_update = nn.LSTM(d, d)
            self.L_vote = MLP(d, d, 1)
            self.denom = torch.sqrt(torch.Tensor([d]))

        def flip(self, msg):
            return torch.cat([msg[n_vars:2 * n_vars, :], msg[:n_vars, :]], dim=0)

        def forward(self):
            ts_L_unpack_indices = L_unpack
            init_ts = self.init_ts
            L_init = self.L_init(init_ts).view(1, 1, -1)
            L_init = L_init.repeat(1, n_lits, 1)
            C_init = self.C_init(init_ts).view(1, 1, -1).repeat(1, n_clauses, 1)
            L_state = (L_init, torch.zeros(1, n_lits, d))
            C_state = (C_init, torch.zeros(1, n_clauses, d))
            votes = []
            for _ in range(T):
                L_hidden = L_state[0].squeeze(0)
                L_pre_msg = self.L_msg(L_hidden)
                LC_msg = torch.sparse.mm(ts_L_unpack_indices.t(), L_pre_msg)
                _, C_state = self.C_update(LC_msg.unsqueeze(0), C_state)
                C_hidden = C_state[0].squeeze(0)
                C_pre_msg = self.C_msg(C_hidden)
                CL_msg = torch.sparse.mm(ts_L_unpack_indices, C_pre_msg)
                _, L_state = self.L_update(
                    torch.cat([CL_msg, self.flip(L_state[0].squeeze(0))], dim=1).unsqueeze(0),
                    L_state)
                votes.append(self.L_vote(L_state[0].squeeze(0)))
            vote = votes[-1]
            vote_join = torch.cat([vote[:n_vars, :], vote[n_vars:, :]], dim=1)
            return vote_join.mean(dim=1).mean().unsqueeze(0), vote

    model = NeuroSAT()
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, weight_decay=1e-10)
    loss_fn = nn.BCEWithLogitsLoss()
    res = {"loss": [], "pred": []}
    target = torch.Tensor([1.0])
    for _ in range(3):
        out, vote = model()
        loss = loss_fn(out, target)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.65)
        opt.step()
        res["loss"].append(loss.detach())
        res["pred"].append(torch.sigmoid(out).detach())
    res["vote"] = vote.detach()
    res["sparse_dense"] = L_unpack.to_dense()
    res["sparse_nnz"] = L_unpack._nnz()
    res["is_sparse"] = [L_unpack.is_sparse, L_unpack.t().is_sparse, L_unpack.is_coalesced()]
    res["lstm_grad"] = model.L_update.weight_ih_l0.grad
    # decode an assignment by 2-clustering as the paper does: sign of vote per literal pair
    assignment = (vote[:n_vars, 0] > vote[n_vars:, 0]).long()
    res["assignment"] = assignment.tolist()
    return res


def _bfs_seq(adj, start):
    """GraphRNN's bfs_seq over a dense NumPy adjacency."""
    order, seen, queue = [start], {start}, [start]
    while queue:
        nxt = []
        for v in queue:
            for w in np.nonzero(adj[v])[0].tolist():
                if w not in seen:
                    seen.add(w)
                    order.append(w)
                    nxt.append(w)
        queue = nxt
    return order


def _encode_adj(adj, max_prev_node):
    """GraphRNN's encode_adj: lower triangle rows, reversed, cut to max_prev_node."""
    adj = np.tril(adj, k=-1)
    n = adj.shape[0]
    adj = adj[1:n, 0:n - 1]
    out = np.zeros((adj.shape[0], max_prev_node))
    for i in range(adj.shape[0]):
        start = max(0, i - max_prev_node + 1)
        seg = adj[i, start:i + 1]
        out[i, :seg.shape[0]] = seg[::-1]
    return out


def graphrnn_program(torch):
    """GraphRNN: BFS-ordered graphs encoded as adjacency vectors, graph-level GRU over a
    pack_padded_sequence batch (sorted by length), edge-level GRU fed the node state as its
    initial hidden, BCE with sigmoid, MultiStepLR, and a greedy sampling pass with fixed
    NumPy uniforms."""
    rng = np.random.default_rng(5)
    nn = torch.nn
    F = torch.nn.functional
    pack_padded_sequence = torch.nn.utils.rnn.pack_padded_sequence
    pad_packed_sequence = torch.nn.utils.rnn.pad_packed_sequence
    M, H, He = 4, 16, 8

    graphs = []
    for n in (6, 5, 4):
        a = (rng.random((n, n)) < 0.5).astype(np.float32)
        a = np.triu(a, 1)
        a = a + a.T
        for i in range(n - 1):  # keep it connected: a path
            a[i, i + 1] = a[i + 1, i] = 1
        order = _bfs_seq(a, int(rng.integers(n)))
        a = a[np.ix_(order, order)]
        graphs.append(_encode_adj(a, M))
    max_len = max(g.shape[0] for g in graphs) + 1
    x = np.zeros((3, max_len, M), np.float32)
    y = np.zeros((3, max_len, M), np.float32)
    lens = []
    for b, g in enumerate(graphs):
        x[b, 0] = 1
        x[b, 1:g.shape[0] + 1] = g
        y[b, :g.shape[0]] = g
        lens.append(g.shape[0] + 1)

    class GRU_plain(nn.Module):
        def __init__(self, input_size, embedding_size, hidden_size, has_output, output_size):
            super().__init__()
            self.hidden_size = hidden_size
            self.has_output = has_output
            self.input = nn.Linear(input_size, embedding_size)
            self.rnn = nn.GRU(embedding_size, hidden_size, num_layers=2, batch_first=True)
            if has_output:
                self.output = nn.Sequential(nn.Linear(hidden_size, embedding_size), nn.ReLU(),
                                            nn.Linear(embedding_size, output_size))
            self.relu = nn.ReLU()
            self.hidden = None

        def init_hidden(self, batch_size):
            return torch.zeros((2, batch_size, self.hidden_size))

        def forward(self, input_raw, pack=False, input_len=None):
            input = self.relu(self.input(input_raw))
            if pack:
                input = pack_padded_sequence(input, input_len, batch_first=True)
            output_raw, self.hidden = self.rnn(input, self.hidden)
            if pack:
                output_raw = pad_packed_sequence(output_raw, batch_first=True)[0]
            if self.has_output:
                output_raw = self.output(output_raw)
            return output_raw

    rnn = GRU_plain(M, 16, H, True, He)
    output = GRU_plain(1, 8, He, True, 1)
    fill_(torch, list(rnn.parameters()) + list(output.parameters()), rng, 0.3)
    opt_r = torch.optim.Adam(rnn.parameters(), lr=3e-3)
    opt_o = torch.optim.Adam(output.parameters(), lr=3e-3)
    sch_r = torch.optim.lr_scheduler.MultiStepLR(opt_r, milestones=[2], gamma=0.3)
    res = {"loss": []}
    x_t, y_t = torch.from_numpy(x), torch.from_numpy(y)
    y_len_unsorted = torch.tensor(lens)
    y_len, sort_index = torch.sort(y_len_unsorted, 0, descending=True)
    y_len = y_len.numpy().tolist()
    x_t = torch.index_select(x_t, 0, sort_index)
    y_t = torch.index_select(y_t, 0, sort_index)
    for _ in range(3):
        rnn.zero_grad()
        output.zero_grad()
        rnn.hidden = rnn.init_hidden(batch_size=x_t.size(0))
        h = rnn(x_t, pack=True, input_len=y_len)
        h = pack_padded_sequence(h, y_len, batch_first=True).data
        idx = torch.LongTensor([i for i in range(h.size(0) - 1, -1, -1)])
        h = h.index_select(0, idx)
        hidden_null = torch.zeros(1, h.size(0), h.size(1))
        output.hidden = torch.cat((h.view(1, h.size(0), h.size(1)), hidden_null), dim=0)
        y_reshape = pack_padded_sequence(y_t, y_len, batch_first=True).data
        y_reshape = y_reshape.index_select(0, idx)
        y_reshape = y_reshape.view(y_reshape.size(0), y_reshape.size(1), 1)
        output_x = torch.cat((torch.ones(y_reshape.size(0), 1, 1), y_reshape[:, 0:-1, 0:1]),
                             dim=1)
        output_y = y_reshape
        output_y_len = []
        output_y_len_bin = np.bincount(np.array(y_len))
        for i in range(len(output_y_len_bin) - 1, 0, -1):
            count_temp = np.sum(output_y_len_bin[i:])
            output_y_len.extend([min(i, y_t.size(2))] * int(count_temp))
        y_pred = output(output_x, pack=True, input_len=output_y_len)
        y_pred = torch.sigmoid(y_pred)
        y_pred = pack_padded_sequence(y_pred, output_y_len, batch_first=True)
        y_pred = pad_packed_sequence(y_pred, batch_first=True)[0]
        output_y = pack_padded_sequence(output_y, output_y_len, batch_first=True)
        output_y = pad_packed_sequence(output_y, batch_first=True)[0]
        loss = F.binary_cross_entropy(y_pred, output_y)
        loss.backward()
        opt_o.step()
        opt_r.step()
        sch_r.step()
        res["loss"].append(loss.detach())
    res["lens"] = output_y_len
    # sampling with fixed uniforms, as test_rnn_epoch does with sample_sigmoid
    rnn.eval()
    output.eval()
    with torch.no_grad():
        rnn.hidden = rnn.init_hidden(1)
        x_step = torch.ones(1, 1, M)
        sampled = []
        for _ in range(5):
            h = rnn(x_step)
            hidden_null = torch.zeros(1, h.size(0), h.size(2))
            output.hidden = torch.cat((h.permute(1, 0, 2), hidden_null), dim=0)
            x_step = torch.zeros(1, 1, M)
            output_x_step = torch.ones(1, 1, 1)
            for j in range(M):
                o = torch.sigmoid(output(output_x_step))
                u = torch.from_numpy(rng.random((1, 1, 1)).astype(np.float32))
                output_x_step = torch.gt(o, u).float()
                x_step[:, :, j:j + 1] = output_x_step
                output.hidden = output.hidden.data
            sampled.append(x_step.clone())
            rnn.hidden = rnn.hidden.data
    res["sampled"] = torch.cat(sampled, 1)
    res["lr"] = sch_r.get_last_lr()
    return res


def gran_program(torch):
    """GRAN: node states from a GNN over the generated part plus augmented block edges,
    per-edge Bernoulli logits for K mixture components and mixture weights alpha, the
    mixture-of-Bernoulli negative log-likelihood with logsumexp, reduction by scatter_add."""
    rng = np.random.default_rng(6)
    nn = torch.nn
    F = torch.nn.functional
    N, stride, H, K = 6, 2, 12, 3

    class GNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.msg = nn.Sequential(nn.Linear(2 * H + 1, H), nn.ReLU(), nn.Linear(H, H))
            self.att = nn.Sequential(nn.Linear(2 * H + 1, H), nn.ReLU(), nn.Linear(H, H),
                                     nn.Sigmoid())
            self.upd = nn.GRUCell(H, H)

        def forward(self, node_feat, edge, edge_feat):
            for _ in range(2):
                diff = torch.cat([node_feat[edge[:, 0], :] - node_feat[edge[:, 1], :],
                                  node_feat[edge[:, 0], :] * 0 + node_feat[edge[:, 1], :],
                                  edge_feat], dim=1)
                msg = self.msg(diff) * self.att(diff)
                agg = torch.zeros(node_feat.shape[0], H).scatter_add(
                    0, edge[:, [1]].expand(-1, H), msg)
                node_feat = self.upd(agg, node_feat)
            return node_feat

    class GRAN(nn.Module):
        def __init__(self):
            super().__init__()
            self.decoder_input = nn.Sequential(nn.Linear(N, H))
            self.gnn = GNN()
            self.output_theta = nn.Sequential(nn.Linear(H, H), nn.ReLU(), nn.Linear(H, K))
            self.output_alpha = nn.Sequential(nn.Linear(H, H), nn.ReLU(), nn.Linear(H, K))

        def forward(self, A_pad, edges, att_idx, node_idx_gnn, node_idx_feat):
            node_feat = self.decoder_input(A_pad)
            node_feat = F.pad(node_feat, (0, 0, 1, 0), "constant", 0.0)[node_idx_feat]
            att = torch.zeros(edges.shape[0], 1)
            att[att_idx] = 1.0
            state = self.gnn(node_feat, edges, att)
            diff = state[node_idx_gnn[:, 0], :] - state[node_idx_gnn[:, 1], :]
            return self.output_theta(diff), self.output_alpha(diff)

    def mixture_bernoulli_loss(label, log_theta, log_alpha, subgraph_idx):
        num_subgraph = int(subgraph_idx.max()) + 1
        adj_loss = torch.stack([F.binary_cross_entropy_with_logits(
            log_theta[:, kk], label, reduction="none") for kk in range(K)], dim=1)
        const = torch.zeros(num_subgraph).scatter_add(0, subgraph_idx,
                                                      torch.ones_like(subgraph_idx).float())
        reduce_adj_loss = torch.zeros(num_subgraph, K).scatter_add(
            0, subgraph_idx.unsqueeze(1).expand(-1, K), adj_loss)
        reduce_log_alpha = torch.zeros(num_subgraph, K).scatter_add(
            0, subgraph_idx.unsqueeze(1).expand(-1, K), log_alpha)
        reduce_log_alpha = reduce_log_alpha / const.view(-1, 1)
        reduce_log_alpha = F.log_softmax(reduce_log_alpha, -1)
        log_prob = -reduce_adj_loss + reduce_log_alpha
        log_prob = torch.logsumexp(log_prob, dim=1)
        return -log_prob.sum() / float(log_theta.shape[0])

    a = np.triu((rng.random((N, N)) < 0.45).astype(np.float32), 1)
    adj = a + a.T
    # one training subgraph per block: nodes [0, t) known, block [t, t+stride) to generate
    edges, att_idx, pairs, labels, sub_idx, feat_idx = [], [], [], [], [], []
    offset = 0
    for s, t in enumerate(range(stride, N, stride)):
        nodes = list(range(t + stride))
        feat_idx += [(v + 1) if v < t else 0 for v in nodes]
        for i in nodes:
            for j in nodes:
                if i == j:
                    continue
                known = i < t and j < t and adj[i, j] > 0
                block = i >= t or j >= t
                if known or block:
                    if block:
                        att_idx.append(len(edges))
                    edges.append([i + offset, j + offset])
        for i in range(t, t + stride):
            for j in range(i):
                pairs.append([i + offset, j + offset])
                labels.append(adj[i, j])
                sub_idx.append(s)
        offset += len(nodes)
    model = GRAN()
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    A_pad = torch.from_numpy(np.tril(adj, -1).astype(np.float32))
    edges_t = torch.tensor(edges, dtype=torch.long)
    args = (A_pad, edges_t, torch.tensor(att_idx), torch.tensor(pairs),
            torch.tensor(feat_idx))
    label = torch.tensor(labels)
    sub = torch.tensor(sub_idx)
    res = {"loss": []}
    for _ in range(3):
        log_theta, log_alpha = model(*args)
        loss = mixture_bernoulli_loss(label, log_theta, log_alpha, sub)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.detach())
    with torch.no_grad():
        log_theta, log_alpha = model(*args)
        prob_alpha = F.softmax(log_alpha.mean(dim=0), -1)
        u = torch.from_numpy(rng.random(len(labels)).astype(np.float32))
        alpha_idx = torch.searchsorted(prob_alpha.cumsum(0), u[:1]).clamp(max=K - 1)
        prob = torch.sigmoid(log_theta[:, alpha_idx[0]])
        res["sample"] = (prob > u).int().tolist()
        res["prob_alpha"] = prob_alpha
    res["gru_grad"] = model.gnn.upd.weight_hh.grad
    return res


def digress_program(torch):
    """DiGress-lite: edge types one-hot, marginal transition Q_t = a_t I + (1 - a_t) 1 m^T
    with a cosine schedule, forward noising by sampling from X Q_bar_t with fixed uniforms,
    symmetric upper-triangle masking, a graph transformer-lite denoiser predicting clean edge
    types, masked cross-entropy with class weights, and the posterior used in sampling."""
    rng = np.random.default_rng(7)
    nn = torch.nn
    F = torch.nn.functional
    B, N, E, Tn, H = 3, 5, 2, 10, 16

    def cosine_beta_schedule_discrete(timesteps, s=0.008):
        steps = timesteps + 2
        x = np.linspace(0, steps, steps)
        alphas_cumprod = np.cos(0.5 * np.pi * ((x / steps) + s) / (1 + s)) ** 2
        alphas_cumprod = alphas_cumprod / alphas_cumprod[0]
        alphas = alphas_cumprod[1:] / alphas_cumprod[:-1]
        return (1 - alphas).squeeze()

    betas = torch.from_numpy(cosine_beta_schedule_discrete(Tn)).float()
    alphas = 1 - torch.clamp(betas, min=0, max=0.9999)
    log_alpha = torch.log(alphas)
    log_alpha_bar = torch.cumsum(log_alpha, dim=0)
    alphas_bar = torch.exp(log_alpha_bar)

    a = np.triu((rng.random((B, N, N)) < 0.4).astype(np.int64), 1)
    adj = torch.from_numpy(a + a.transpose(0, 2, 1))
    E_clean = F.one_hot(adj, num_classes=E).float()
    node_mask = torch.ones(B, N, dtype=torch.bool)
    node_mask[2, -1] = False
    e_marginals = E_clean.sum(dim=(0, 1, 2)) / E_clean.sum()

    def get_Qt_bar(alpha_bar_t):
        alpha_bar_t = alpha_bar_t[:, None, None]
        u_e = e_marginals.unsqueeze(0).expand(E, -1).unsqueeze(0)
        return alpha_bar_t * torch.eye(E).unsqueeze(0) + (1 - alpha_bar_t) * u_e

    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.e_in = nn.Linear(E + 1, H)
            self.q, self.k = nn.Linear(H, H), nn.Linear(H, H)
            self.e_mul, self.e_add = nn.Linear(H, H), nn.Linear(H, H)
            self.n_in = nn.Parameter(torch.zeros(H))
            self.ln = nn.LayerNorm(H)
            self.out = nn.Linear(H, E)

        def forward(self, noisy_E, t, mask):
            e = self.e_in(torch.cat([noisy_E, t[:, None, None, None].expand(-1, N, N, 1)], -1))
            x = e.mean(dim=2) + self.n_in
            Q, K_ = self.q(x).unsqueeze(2), self.k(x).unsqueeze(1)
            Y = Q * K_ / H ** 0.5
            Y = Y * (self.e_mul(e) + 1) + self.e_add(e)
            e = self.ln(e + Y)
            out = self.out(e)
            out = (out + out.transpose(1, 2)) / 2
            diag = torch.eye(N, dtype=torch.bool).unsqueeze(0).expand(B, -1, -1)
            out = out.masked_fill(diag.unsqueeze(-1), 0.0)
            emask = (mask.unsqueeze(1) & mask.unsqueeze(2)).unsqueeze(-1)
            return out * emask

    model = Denoiser()
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, amsgrad=True, weight_decay=1e-12)
    res = {"loss": [], "t": []}
    for _ in range(3):
        t_int = torch.from_numpy(rng.integers(1, Tn + 1, size=(B,)))
        alpha_t_bar = alphas_bar[t_int]
        Qtb = get_Qt_bar(alpha_t_bar)
        probE = E_clean @ Qtb.unsqueeze(1)
        probE = probE / probE.sum(-1, keepdim=True)
        u = torch.from_numpy(rng.random((B, N, N, 1)).astype(np.float32))
        sampled = (probE.cumsum(-1) < u).sum(-1).clamp(max=E - 1)
        upper = torch.triu(sampled, diagonal=1)
        sampled = upper + torch.transpose(upper, 1, 2)
        noisy_E = F.one_hot(sampled, num_classes=E).float()
        pred = model(noisy_E, t_int.float() / Tn, node_mask)
        emask = (node_mask.unsqueeze(1) & node_mask.unsqueeze(2)) & ~torch.eye(
            N, dtype=torch.bool)
        true_E = torch.reshape(E_clean, (-1, E))[emask.reshape(-1)]
        pred_E = torch.reshape(pred, (-1, E))[emask.reshape(-1)]
        loss = F.cross_entropy(pred_E, torch.argmax(true_E, dim=-1),
                               weight=torch.tensor([1.0, 5.0]), label_smoothing=0.05)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.detach())
        res["t"] += t_int.tolist()
        res["edges"] = sampled.flatten().tolist()
    # posterior p(z_s | z_t, x) proportional to (z_t Q_t^T) * (x Q_bar_s), as in the sampler
    with torch.no_grad():
        s_int = t_int - 1
        Qt = get_Qt_bar(alphas[t_int])
        Qsb = get_Qt_bar(alphas_bar[s_int])
        pred_probs = F.softmax(model(noisy_E, t_int.float() / Tn, node_mask), dim=-1)
        left = noisy_E.flatten(1, 2) @ Qt.transpose(-1, -2)
        right = pred_probs.flatten(1, 2) @ Qsb
        post = left * right
        post = post / post.sum(-1, keepdim=True).clamp_min(1e-12)
    res["posterior"] = post
    res["alphas_bar"] = alphas_bar
    res["amsgrad_state"] = opt.state[model.out.weight]["max_exp_avg_sq"]
    return res


PROGRAMS = [gumbel_sinkhorn_program, neurosat_program, graphrnn_program, gran_program,
            digress_program]

# several Adam/SGD steps through logsumexp/LSTM/GRU chains: float32 reassociation noise
TOLERANCES = {p.__name__: (1e-4, 1e-5) for p in PROGRAMS}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
