"""Dense retrieval, graph pooling and learned optimisers written as their reference repositories
write them in torch, run once with `torch` bound to ember and once to PyTorch from the same
NumPy weights: DPR in-batch and hard negatives (EmbeddingBag encoders, cross-entropy over the
similarity matrix, recall@k), ColBERT late interaction (einsum, masked amax, sum), product
quantisation (k-means codebooks by cdist/argmin/index_add_, uint8 codes, ADC lookup tables)
and an IVF index (bincount/argsort inverted lists, nprobe search), DiffPool (soft assignment,
link and entropy losses), SAGPool/TopKPooling (per-graph top-k by the dense sort trick, edge
filtering), global attention pooling (scatter_reduce amax softmax, index_add_), and an LSTM
learned optimiser (coordinate-wise LSTMCell, log/sign gradient preprocessing, truncated
unrolls with meta-gradients through the optimizee steps)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def dpr_program(torch):
    """DPR: EmbeddingBag question/passage encoders, one positive and one hard negative per
    question, in-batch negatives by q @ p.T, cross-entropy and nll over log_softmax, rank of
    the positive, recall@k with topk, Adam with linear warmup."""
    rng = np.random.default_rng(10)
    V, d, B = 30, 16, 4
    F = torch.nn.functional

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = torch.nn.EmbeddingBag(V, d, mode="mean", padding_idx=0)
            self.proj = torch.nn.Linear(d, d)

        def forward(self, tokens, offsets):
            return self.proj(torch.tanh(self.bag(tokens, offsets)))

    q_enc, p_enc = Encoder(), Encoder()
    fill_(torch, q_enc, rng, 0.4)
    fill_(torch, p_enc, rng, 0.4)
    params = list(q_enc.parameters()) + list(p_enc.parameters())
    opt = torch.optim.Adam(params, lr=5e-3)
    sched = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
    res = {"losses": [], "ranks": [], "nll": []}
    for step in range(3):
        q_len = rng.integers(2, 5, B)
        p_len = rng.integers(3, 7, 2 * B)
        q_tok = torch.from_numpy(rng.integers(0, V, q_len.sum()))
        p_tok = torch.from_numpy(rng.integers(0, V, p_len.sum()))
        q_off = torch.from_numpy(np.concatenate([[0], np.cumsum(q_len)[:-1]]))
        p_off = torch.from_numpy(np.concatenate([[0], np.cumsum(p_len)[:-1]]))
        q = q_enc(q_tok, q_off)
        p = p_enc(p_tok, p_off)
        scores = torch.matmul(q, torch.transpose(p, 0, 1))
        positive_idx = torch.arange(B) * 2
        softmax_scores = F.log_softmax(scores, dim=1)
        loss = F.nll_loss(softmax_scores, positive_idx, reduction="mean")
        ce = F.cross_entropy(scores, positive_idx)
        max_score, max_idxs = torch.max(softmax_scores, 1)
        correct = (max_idxs == positive_idx).sum()
        ranks = (scores > scores.gather(1, positive_idx[:, None])).sum(1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
        res["nll"].append(ce.item())
        res["ranks"].append(ranks)
        res[f"correct_{step}"] = [int(correct)]
        res[f"recall_{step}"] = (scores.topk(3, dim=1).indices == positive_idx[:, None]).any(1)
    res["bag_w"] = q_enc.bag.weight
    res["pad_grad"] = p_enc.bag.weight.grad[0]
    return res


def colbert_program(torch):
    """ColBERT: per-token embeddings normalised with F.normalize, query augmentation with
    [MASK] tokens, document padding masks, MaxSim by einsum + masked_fill + amax + sum,
    pairwise softmax cross-entropy with a negative per query, and the late-interaction
    reranking of a small collection by argsort."""
    rng = np.random.default_rng(11)
    V, d, dim, Lq, Ld, B = 25, 16, 8, 4, 6, 3
    F = torch.nn.functional

    class ColBERT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(V, d, padding_idx=0)
            self.enc = torch.nn.GRU(d, d, batch_first=True, bidirectional=True)
            self.linear = torch.nn.Linear(2 * d, dim, bias=False)

        def query(self, ids):
            q, _ = self.enc(self.emb(ids))
            return F.normalize(self.linear(q), p=2, dim=2)

        def doc(self, ids):
            mask = (ids != 0).unsqueeze(2).float()
            D, _ = self.enc(self.emb(ids))
            D = self.linear(D) * mask
            return F.normalize(D, p=2, dim=2), mask.bool().squeeze(-1)

    def maxsim(Q, D, dmask):
        sim = torch.einsum("qid,njd->qnij", Q, D)
        sim = sim.masked_fill(~dmask[None, :, None, :], -9999.0)
        return sim.amax(-1).sum(-1)

    model = ColBERT()
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, eps=1e-8)
    res = {"losses": []}
    mask_id = 1
    for step in range(3):
        q_ids = torch.from_numpy(rng.integers(2, V, (B, Lq)))
        q_ids[:, -1] = mask_id
        lens = rng.integers(2, Ld + 1, 2 * B)
        d_ids = torch.from_numpy(rng.integers(2, V, (2 * B, Ld)))
        d_ids[torch.arange(Ld)[None, :] >= torch.from_numpy(lens)[:, None]] = 0
        Q = model.query(q_ids)
        D, dmask = model.doc(d_ids)
        scores = maxsim(Q, D, dmask)                        # (B, 2B)
        pos_neg = scores.view(B, B, 2)[torch.arange(B), torch.arange(B)]
        loss = F.cross_entropy(pos_neg, torch.zeros(B, dtype=torch.long))
        loss = loss + 0.5 * F.cross_entropy(scores, torch.arange(B) * 2)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0, norm_type=2.0)
        opt.step()
        res["losses"].append(loss.item())
        res[f"scores_{step}"] = scores
    with torch.inference_mode():
        Q = model.query(q_ids)
        D, dmask = model.doc(d_ids)
        s = maxsim(Q, D, dmask)
        res["rerank"] = s.argsort(dim=1, descending=True, stable=True)
        res["inference"] = [s.is_inference(), s.requires_grad]
    res["linear"] = model.linear.weight
    return res


def pq_ivf_program(torch):
    """Product quantisation and an IVF index as faiss-style torch code writes them: k-means by
    cdist/argmin with index_add_ and bincount centroid updates (empty clusters kept), uint8 codes,
    asymmetric distance tables gathered by code, inverted lists from argsort/bincount/cumsum,
    nprobe search with topk and exact re-ranking."""
    rng = np.random.default_rng(12)
    N, D, M, Kc, nlist, nq = 60, 8, 4, 8, 4, 3
    x = normal(torch, rng, N, D)
    queries = normal(torch, rng, nq, D)
    ds = D // M

    def kmeans(data, k, init, iters=4):
        cent = data[init].clone()
        for _ in range(iters):
            assign = torch.cdist(data, cent).argmin(dim=1)
            sums = torch.zeros_like(cent).index_add_(0, assign, data)
            counts = torch.bincount(assign, minlength=k).to(data.dtype)
            nonempty = counts > 0
            cent[nonempty] = sums[nonempty] / counts[nonempty, None]
        return cent, assign

    res = {}
    # coarse quantiser and residuals
    coarse, list_id = kmeans(x, nlist, torch.from_numpy(rng.choice(N, nlist, replace=False)))
    resid = x - coarse[list_id]
    codebooks, codes = [], []
    for m in range(M):
        sub = resid[:, m * ds:(m + 1) * ds].contiguous()
        cb, c = kmeans(sub, Kc, torch.from_numpy(rng.choice(N, Kc, replace=False)))
        codebooks.append(cb)
        codes.append(c.to(torch.uint8))
    codebooks = torch.stack(codebooks)                      # (M, Kc, ds)
    codes = torch.stack(codes, dim=1)                       # (N, M) uint8
    res["codebooks"], res["codes"] = codebooks, codes
    res["codes_dtype"] = [str(codes.dtype).split(".")[-1]]
    recon = coarse[list_id] + torch.cat([codebooks[m][codes[:, m].long()] for m in range(M)], 1)
    res["pq_mse"] = [(recon - x).pow(2).sum(1).mean().item()]

    # inverted lists
    order = torch.argsort(list_id, stable=True)
    sizes = torch.bincount(list_id, minlength=nlist)
    offsets = torch.cat([sizes.new_zeros(1), sizes.cumsum(0)])
    res["order"], res["sizes"], res["offsets"] = order, sizes, offsets

    # search: nprobe nearest lists, ADC tables per query, top-5 then exact re-rank
    nprobe, k = 2, 5
    dq = torch.cdist(queries, coarse)
    probe = (-dq).topk(nprobe, dim=1).indices
    res["probe"] = probe
    found = []
    for qi in range(nq):
        cand = torch.cat([order[offsets[j]:offsets[j + 1]] for j in probe[qi].tolist()])
        r = (queries[qi] - coarse[list_id[cand]]).view(-1, M, ds)
        tables = ((r[:, :, None, :] - codebooks[None]) ** 2).sum(-1)        # (C, M, Kc)
        adc = tables.gather(2, codes[cand].long()[..., None]).squeeze(-1).sum(1)
        top = adc.topk(min(k, len(cand)), largest=False)
        exact = (x[cand[top.indices]] - queries[qi]).norm(dim=1)
        rerank = cand[top.indices][exact.argsort()]
        found.append(rerank)
        res[f"adc_{qi}"] = top.values
    res["found"] = torch.stack(found)
    return res


def diffpool_program(torch):
    """DiffPool (dense, as torch_geometric's dense_diff_pool): GNN embeddings and soft
    assignments with a node mask, X' = S^T Z, A' = S^T A S, the link-prediction loss
    ||A - S S^T||_F / numel, the entropy loss, and a graph classifier trained with Adam."""
    rng = np.random.default_rng(13)
    B, N, Fin, hid, C, n_cls = 3, 6, 4, 8, 3, 2
    F = torch.nn.functional
    EPS = 1e-15

    class DenseSAGE(torch.nn.Module):
        def __init__(self, i, o):
            super().__init__()
            self.lin_rel = torch.nn.Linear(i, o, bias=False)
            self.lin_root = torch.nn.Linear(i, o)

        def forward(self, x, adj, mask):
            out = torch.matmul(adj, x)
            out = out / adj.sum(dim=-1, keepdim=True).clamp(min=1)
            out = self.lin_rel(out) + self.lin_root(x)
            return out * mask.view(B, N, 1).to(x.dtype)

    gnn_embed, gnn_pool = DenseSAGE(Fin, hid), DenseSAGE(Fin, C)
    head = torch.nn.Linear(hid, n_cls)
    mods = torch.nn.ModuleList([gnn_embed, gnn_pool, head])
    fill_(torch, mods, rng, 0.4)
    opt = torch.optim.Adam(mods.parameters(), lr=1e-2)
    x = normal(torch, rng, B, N, Fin)
    a = torch.from_numpy((rng.random((B, N, N)) < 0.4).astype(np.float32))
    adj = ((a + a.transpose(1, 2)) > 0).float()
    n_nodes = torch.tensor([6, 4, 5])
    mask = torch.arange(N)[None] < n_nodes[:, None]
    adj = adj * (mask[:, :, None] & mask[:, None, :])
    y = torch.tensor([0, 1, 1])
    res = {"losses": [], "link": [], "ent": []}
    for _ in range(3):
        z = F.relu(gnn_embed(x, adj, mask))
        s = gnn_pool(x, adj, mask)
        s = torch.softmax(s, dim=-1)
        mk = mask.view(B, N, 1).to(x.dtype)
        z, s = z * mk, s * mk
        out = torch.matmul(s.transpose(1, 2), z)
        out_adj = torch.matmul(torch.matmul(s.transpose(1, 2), adj), s)
        link_loss = adj - torch.matmul(s, s.transpose(1, 2))
        link_loss = torch.norm(link_loss, p=2) / adj.numel()
        ent_loss = (-s * torch.log(s + EPS)).sum(dim=-1).mean()
        logits = head(out.mean(dim=1))
        loss = F.cross_entropy(logits, y) + link_loss + ent_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
        res["link"].append(link_loss.item())
        res["ent"].append(ent_loss.item())
    res["out_adj"] = out_adj
    res["pool_w"] = gnn_pool.lin_rel.weight
    return res


def sagpool_program(torch):
    """SAGPool / TopKPooling on a sparse batch (torch_geometric's topk and filter_adj written
    out): a GCN score by index_add_ with symmetric normalisation, per-graph top ceil(ratio*n)
    by the dense -60000 fill + sort trick, node features gated by tanh(score), edges remapped
    with a -1 lookup table, global mean and max readouts by scatter_reduce, one SGD step."""
    rng = np.random.default_rng(14)
    F = torch.nn.functional
    sizes = [5, 3, 4]
    Fin, hid = 4, 8
    batch = torch.cat([torch.full((n,), i, dtype=torch.long) for i, n in enumerate(sizes)])
    Nt = int(batch.numel())
    edges = []
    start = 0
    for n in sizes:
        for _ in range(2 * n):
            i, j = rng.integers(0, n, 2)
            if i != j:
                edges += [(start + i, start + j), (start + j, start + i)]
        start += n
    edge_index = torch.tensor(edges, dtype=torch.long).t().contiguous()
    x = normal(torch, rng, Nt, Fin)

    conv = torch.nn.Linear(Fin, hid)
    score_lin = torch.nn.Linear(hid, 1)
    cls = torch.nn.Linear(2 * hid, 2)
    mods = torch.nn.ModuleList([conv, score_lin, cls])
    fill_(torch, mods, rng, 0.4)
    opt = torch.optim.SGD(mods.parameters(), lr=0.1)

    def gcn(h, ei):
        loops = torch.arange(h.size(0))
        row = torch.cat([ei[0], loops])
        col = torch.cat([ei[1], loops])
        deg = torch.zeros(h.size(0)).scatter_add_(0, col, torch.ones(col.numel()))
        dis = deg.pow(-0.5)
        dis.masked_fill_(dis == float("inf"), 0)
        norm = dis[row] * dis[col]
        return torch.zeros_like(h).index_add_(0, col, h[row] * norm[:, None])

    def topk(score, ratio, batch):
        num_nodes = torch.zeros(len(sizes), dtype=torch.long).scatter_add_(
            0, batch, torch.ones_like(batch))
        batch_size, max_num_nodes = num_nodes.size(0), int(num_nodes.max())
        cum = torch.cat([num_nodes.new_zeros(1), num_nodes.cumsum(dim=0)[:-1]], dim=0)
        index = torch.arange(batch.size(0)) - cum[batch] + batch * max_num_nodes
        dense = score.new_full((batch_size * max_num_nodes,), -60000.0)
        dense[index] = score
        dense = dense.view(batch_size, max_num_nodes)
        _, perm = dense.sort(dim=-1, descending=True)
        perm = perm + cum.view(-1, 1)
        perm = perm.view(-1)
        k = (ratio * num_nodes.to(torch.float)).ceil().to(torch.long)
        mask = [torch.arange(k[i], dtype=torch.long) + i * max_num_nodes
                for i in range(batch_size)]
        return perm[torch.cat(mask, dim=0)]

    def filter_adj(ei, perm, n):
        lookup = torch.full((n,), -1, dtype=torch.long)
        lookup[perm] = torch.arange(perm.size(0))
        row, col = lookup[ei[0]], lookup[ei[1]]
        keep = (row >= 0) & (col >= 0)
        return torch.stack([row[keep], col[keep]], dim=0)

    res = {"losses": []}
    y = torch.tensor([1, 0, 1])
    for _ in range(2):
        h = F.relu(conv(gcn(x, edge_index)))
        score = score_lin(gcn(h, edge_index)).view(-1)
        perm = topk(score, 0.5, batch)
        hp = h[perm] * torch.tanh(score[perm]).view(-1, 1)
        bp = batch[perm]
        ei = filter_adj(edge_index, perm, Nt)
        hp = hp + gcn(hp, ei) * 0.5
        mean = torch.zeros(len(sizes), hid).scatter_reduce(
            0, bp[:, None].expand(-1, hid), hp, "mean", include_self=False)
        mx = torch.full((len(sizes), hid), float("-inf")).scatter_reduce(
            0, bp[:, None].expand(-1, hid), hp, "amax")
        loss = F.cross_entropy(cls(torch.cat([mean, mx], 1)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["perm"], res["ei"], res["bp"] = perm, ei, bp
    res["score_grad"] = score_lin.weight.grad
    res["conv"] = conv.weight
    return res


def attention_pool_program(torch):
    """Global attention pooling (GlobalAttention / AttentionalAggregation): a gate per node,
    a per-graph softmax by scatter_reduce 'amax' (include_self=False), exp, index_add_ sums and
    a gather back, then the gated sum by index_add_, with a Set2Set-style LSTM readout step."""
    rng = np.random.default_rng(15)
    sizes = [4, 2, 5]
    G, Fd, hid = len(sizes), 6, 6
    batch = torch.repeat_interleave(torch.arange(G), torch.tensor(sizes))
    x = normal(torch, rng, int(batch.numel()), Fd)
    gate_nn = torch.nn.Sequential(torch.nn.Linear(Fd, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    nn_ = torch.nn.Linear(Fd, hid)
    lstm = torch.nn.LSTM(2 * hid, hid, num_layers=1)
    out_lin = torch.nn.Linear(2 * hid, 1)
    mods = torch.nn.ModuleList([gate_nn, nn_, lstm, out_lin])
    fill_(torch, mods, rng, 0.3)
    opt = torch.optim.RMSprop(mods.parameters(), lr=1e-2, alpha=0.9)
    target = torch.tensor([[0.5], [-1.0], [2.0]])

    def softmax(src, index, num):
        src_max = torch.zeros(num, src.size(1)).scatter_reduce(
            0, index[:, None].expand_as(src), src.detach(), "amax", include_self=False)
        out = (src - src_max.index_select(0, index)).exp()
        out_sum = torch.zeros(num, src.size(1)).index_add_(0, index, out) + 1e-16
        return out / out_sum.index_select(0, index)

    res = {"losses": []}
    for _ in range(3):
        gate = softmax(gate_nn(x), batch, G)
        h = nn_(x)
        pooled = torch.zeros(G, hid).index_add_(0, batch, gate * h)
        # one Set2Set processing step with the pooled vector as its first query
        q_star = torch.cat([pooled, torch.zeros(G, hid)], dim=-1)
        hx = (torch.zeros(1, G, hid), torch.zeros(1, G, hid))
        q, hx = lstm(q_star.unsqueeze(0), hx)
        q = q.view(G, hid)
        e = (h * q.index_select(0, batch)).sum(dim=-1, keepdim=True)
        a = softmax(e, batch, G)
        r = torch.zeros(G, hid).index_add_(0, batch, a * h)
        pred = out_lin(torch.cat([q, r], dim=-1))
        loss = torch.nn.functional.smooth_l1_loss(pred, target, beta=0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["gate"], res["pooled"] = gate, pooled
    res["lstm_w"] = lstm.weight_hh_l0
    res["gate_w"] = gate_nn[0].weight
    return res


def l2o_program(torch):
    """Learning to learn by gradient descent by gradient descent: a coordinate-wise two-layer
    LSTMCell optimiser over the flattened parameters of a quadratic optimizee, gradient
    preprocessing (log|g|/p clamped, sign or e^p g), the update added to the parameters with
    the graph kept, meta-loss summed over a truncated unroll, hidden states and parameters
    detached between truncations, and a second-order variant by create_graph=True."""
    rng = np.random.default_rng(16)
    dim, hidden, unroll, n_trunc = 6, 10, 3, 2
    p_pre = 10.0
    W = normal(torch, rng, dim, dim)
    y = normal(torch, rng, dim)

    def f(theta):
        return ((W @ theta - y) ** 2).sum()

    class LSTMOpt(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cell1 = torch.nn.LSTMCell(2, hidden)
            self.cell2 = torch.nn.LSTMCell(hidden, hidden)
            self.out = torch.nn.Linear(hidden, 1)

        def preprocess(self, g):
            g = g.unsqueeze(-1)
            big = (g.abs() >= np.exp(-p_pre)).float()
            x1 = big * (torch.log(g.abs() + 1e-8) / p_pre) + (1 - big) * -1
            x2 = big * torch.sign(g) + (1 - big) * np.exp(p_pre) * g
            return torch.cat([x1.clamp(-1, 1), x2], dim=-1)

        def forward(self, g, state):
            (h1, c1), (h2, c2) = state
            h1, c1 = self.cell1(self.preprocess(g), (h1, c1))
            h2, c2 = self.cell2(h1, (h2, c2))
            return self.out(h2).squeeze(-1) * 0.1, ((h1, c1), (h2, c2))

    res = {}
    for order in ("first", "second"):
        opt_net = LSTMOpt()
        fill_(torch, opt_net, rng, 0.3)
        meta_opt = torch.optim.Adam(opt_net.parameters(), lr=1e-2)
        theta0 = normal(torch, rng, dim)
        metas = []
        for epoch in range(2):
            theta = theta0.clone().requires_grad_(True)
            state = [(torch.zeros(dim, hidden), torch.zeros(dim, hidden)) for _ in range(2)]
            for _ in range(n_trunc):
                meta_loss = 0
                for _ in range(unroll):
                    loss = f(theta)
                    (g,) = torch.autograd.grad(loss, theta, create_graph=order == "second",
                                               retain_graph=True)
                    if order == "first":
                        g = g.detach()
                    update, state = opt_net(g, state)
                    theta = theta + update
                    meta_loss = meta_loss + f(theta)
                meta_opt.zero_grad()
                meta_loss.backward()
                meta_opt.step()
                metas.append(meta_loss.item())
                theta = theta.detach().requires_grad_(True)
                state = [(h.detach(), c.detach()) for h, c in state]
        res[f"{order}_meta"] = metas
        res[f"{order}_theta"] = theta
        res[f"{order}_out"] = opt_net.out.weight
        res[f"{order}_cell"] = opt_net.cell1.weight_ih
    return res


PROGRAMS = [dpr_program, colbert_program, pq_ivf_program, diffpool_program, sagpool_program,
            attention_pool_program, l2o_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
