"""Graph programs written as research code writes them without torch_geometric, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights and data: a GCN over a
sparse normalised adjacency (COO and CSR, gradients into the dense features and the edge
weights), GraphSAGE with neighbour sampling from CSR, knowledge-graph embeddings (TransE,
DistMult, RotatE with max_norm embeddings and self-adversarial negative sampling), node2vec
skip-gram with sparse embedding gradients (SparseAdam, SGD), and graph-level classification
with segment pooling, segment softmax and a Set2Set readout. What they found is tested in
test_parity_programs_round22_graphs_found.py."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal
from tests.parity.test_parity_programs_round9 import assert_same_results

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def _undirected_edges(rng, num_nodes, num_edges):
    """A random edge list as two int64 NumPy rows (duplicates and self loops kept)."""
    return rng.integers(0, num_nodes, (2, num_edges)).astype(np.int64)


def sparse_gcn_program(torch):
    """Kipf & Welling's GCN over D^-1/2 (A + I) D^-1/2 held as a sparse COO tensor: coalesce,
    sparse.sum degrees, value scaling, sparse.mm and @ in forward and backward, learnable edge
    weights through the sparse values, a CSR copy, edge dropout by a fixed mask."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2201)
    res = {}
    n, in_dim, hidden, num_classes = 10, 6, 8, 3
    edges = torch.from_numpy(_undirected_edges(rng, n, 16))
    edge_index = torch.cat([edges, edges.flip(0)], dim=1)
    adj = torch.sparse_coo_tensor(edge_index, torch.ones(edge_index.size(1)), (n, n))
    res["uncoalesced"] = [adj.is_coalesced(), adj._nnz()]
    adj = adj.coalesce()
    res["coalesced"] = [adj.is_coalesced(), adj._nnz()]
    res["dup_counts"] = adj.values()
    # binarise (duplicates summed by coalesce), then add self loops as a sparse identity
    adj = torch.sparse_coo_tensor(adj.indices(), torch.ones_like(adj.values()), adj.shape)
    loops = torch.arange(n)
    eye = torch.sparse_coo_tensor(torch.stack([loops, loops]), torch.ones(n), (n, n))
    adj = (adj + eye).coalesce()
    res["with_loops"] = adj.to_dense()
    deg = torch.sparse.sum(adj, dim=1).to_dense()
    res["deg"] = deg
    res["deg_full"] = torch.sparse.sum(adj)
    d_inv_sqrt = deg.pow(-0.5)
    d_inv_sqrt[torch.isinf(d_inv_sqrt)] = 0.0
    row, col = adj.indices()
    norm_values = d_inv_sqrt[row] * adj.values() * d_inv_sqrt[col]
    a_hat = torch.sparse_coo_tensor(adj.indices(), norm_values, adj.size()).coalesce()
    res["a_hat_dense"] = a_hat.to_dense()
    res["a_hat_sym"] = (a_hat.to_dense() - a_hat.t().to_dense()).abs().max()
    a_csr = a_hat.to_sparse_csr()
    res["csr"] = [a_csr.crow_indices(), a_csr.col_indices(), a_csr.values()]
    res["layouts"] = [str(a_hat.layout).rsplit(".")[-1], str(a_csr.layout).rsplit(".")[-1]]

    class GraphConvolution(nn.Module):
        def __init__(self, in_features, out_features, bias=True):
            super().__init__()
            self.weight = nn.Parameter(torch.FloatTensor(in_features, out_features))
            self.bias = nn.Parameter(torch.FloatTensor(out_features)) if bias else None
            self.reset_parameters()

        def reset_parameters(self):
            stdv = 1.0 / self.weight.size(1) ** 0.5
            self.weight.data.uniform_(-stdv, stdv)
            if self.bias is not None:
                self.bias.data.uniform_(-stdv, stdv)

        def forward(self, x, adj):
            support = torch.mm(x, self.weight)
            out = torch.spmm(adj, support)
            return out + self.bias if self.bias is not None else out

    class GCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.gc1 = GraphConvolution(in_dim, hidden)
            self.gc2 = GraphConvolution(hidden, num_classes)
            self.edge_weight = nn.Parameter(torch.ones(adj._nnz()))
            self.dropout = 0.5

        def forward(self, x, adj, edge_keep):
            # learnable edge weights scale the sparse values; gradients reach them through
            # sparse_coo_tensor and sparse.mm's sparse gradient
            values = adj._values() * self.edge_weight * edge_keep
            weighted = torch.sparse_coo_tensor(adj._indices(), values, adj.shape)
            x = F.dropout(x, self.dropout, training=False)
            h = F.relu(self.gc1(x, weighted))
            h = h * feat_mask / (1 - self.dropout)     # dropout with a mask drawn in NumPy
            h = torch.sparse.mm(weighted, h @ self.gc2.weight) + self.gc2.bias
            return F.log_softmax(h, dim=1)

    x = normal(torch, rng, n, in_dim)
    labels = torch.from_numpy(rng.integers(0, num_classes, n))
    idx_train, idx_val = torch.arange(0, 6), torch.arange(6, 10)
    feat_mask = torch.from_numpy((rng.random((n, hidden)) > 0.5).astype(np.float32))
    edge_keep = torch.from_numpy((rng.random(adj._nnz()) > 0.2).astype(np.float32))
    model = GCN()
    fill_(torch, [model.gc1.weight, model.gc1.bias, model.gc2.weight, model.gc2.bias], rng, 0.4)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    res["loss"], res["val_acc"] = [], []
    for _ in range(4):
        model.train()
        opt.zero_grad()
        out = model(x, a_hat, edge_keep)
        loss = F.nll_loss(out[idx_train], labels[idx_train])
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        pred = out[idx_val].max(1)[1].type_as(labels[idx_val])
        res["val_acc"].append(pred.eq(labels[idx_val]).double().sum().item() / len(idx_val))
    res["edge_weight_grad"] = model.edge_weight.grad
    res["edge_weight"] = model.edge_weight
    res["w1"] = model.gc1.weight

    # gradient w.r.t. the dense features through COO, CSR and dense @ sparse^T
    feats = x.clone().requires_grad_()
    h = torch.sparse.mm(a_hat, feats)
    h2 = a_csr @ feats
    h3 = feats.t() @ a_hat                  # dense @ sparse
    h4 = torch.mm(a_hat, feats)
    total = h.pow(2).sum() + h2.sin().sum() + h3.tanh().sum() + h4.sigmoid().sum()
    total.backward()
    res["feat_grad"] = feats.grad
    res["grad_fns"] = [type(t.grad_fn).__name__ for t in (h, h2, h3, h4)]
    # a leaf sparse matrix gets a sparse gradient with its own indices
    leaf = a_hat.detach().clone().requires_grad_()
    torch.sparse.mm(leaf, x).sum().backward()
    res["leaf_grad_sparse"] = [leaf.grad.is_sparse]
    res["leaf_grad"] = leaf.grad.coalesce().values()
    # a sparse attention layer (pyGAT's sparse variant): edge scores as a sparse matrix,
    # normalised per row by sparse.softmax, gradients reaching the scores through it
    att = x.new_tensor(rng.standard_normal((2 * in_dim,)).astype(np.float32)).requires_grad_()
    e = F.leaky_relu(torch.cat([x[row], x[col]], dim=1) @ att, 0.2)
    scores = torch.sparse_coo_tensor(torch.stack([row, col]), e, (n, n))
    alpha = torch.sparse.softmax(scores, dim=1)
    h_att = torch.sparse.mm(alpha, x)
    h_att.square().sum().backward()
    res["sparse_softmax"] = alpha.coalesce().values()
    res["sparse_softmax_rows"] = torch.sparse.sum(alpha, dim=1).to_dense()
    res["att_grad"] = att.grad
    res["log_softmax"] = torch.sparse.log_softmax(scores.detach(), 1).coalesce().values()
    # inference: two propagation hops of SGC (A^k X) with sparse.addmm
    with torch.no_grad():
        prop = x
        for _ in range(2):
            prop = torch.sparse.addmm(x, a_hat, prop, beta=0.1, alpha=0.9)
        res["sgc"] = prop
        res["sparse_scaled"] = (a_hat * 2.0).to_dense().sum(0)
        res["sparse_mul_dense"] = a_hat.mul(torch.full((n, n), 3.0)).coalesce().values()
    return res


def graphsage_program(torch):
    """GraphSAGE with neighbour sampling from a CSR adjacency: degrees from crow_indices, row
    ids by repeat_interleave and searchsorted, sampling with and without replacement (uniforms
    drawn in NumPy, turned into picks with torch ops), relabelling by unique, mean and max
    aggregation by scatter_reduce(include_self=False) and index_add_, F.normalize, mini-batches."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2202)
    res = {}
    n, in_dim, hidden, num_classes, fanout = 14, 5, 6, 3, 3
    edges = _undirected_edges(rng, n, 30)
    edge_index = torch.from_numpy(np.concatenate([edges, edges[::-1]], axis=1))
    adj = torch.sparse_coo_tensor(edge_index, torch.ones(edge_index.size(1)), (n, n))
    csr = adj.coalesce().to_sparse_csr()
    rowptr, col = csr.crow_indices(), csr.col_indices()
    deg = rowptr[1:] - rowptr[:-1]
    res["csr"] = [rowptr, col]
    res["deg"] = [deg, torch.diff(rowptr)]
    row = torch.repeat_interleave(torch.arange(n), deg)
    res["row"] = row
    res["row_search"] = torch.searchsorted(rowptr, torch.arange(col.numel()), right=True) - 1
    res["row_from_counts"] = torch.arange(n).repeat_interleave(deg, output_size=col.numel())

    # the RNG calls such code makes (their streams differ between libraries: keep the shapes,
    # dtypes and ranges)
    gen = torch.Generator().manual_seed(0)
    draws = torch.randint(0, 5, (4, 3), generator=gen)
    perm = torch.randperm(9, generator=gen)
    res["rng_meta"] = [_name(draws.dtype), _name(perm.dtype), list(draws.shape),
                       bool((draws >= 0).all() and (draws < 5).all())]
    res["perm_sorted"] = perm.sort().values
    res["randint_like"] = [_name(torch.randint_like(deg, 3).dtype)]

    def sample_with_replacement(batch, k, uniforms):
        start = rowptr[batch].unsqueeze(1)
        count = deg[batch].unsqueeze(1)
        offsets = (uniforms * count).long()
        valid = count.expand(-1, k) > 0
        picked = col[(start + offsets).clamp(max=col.numel() - 1)]
        targets = batch.unsqueeze(1).expand(-1, k)
        return picked[valid], targets[valid]

    def sample_without_replacement(batch, k, keys):
        # shuffle every row at once: sort the edges by (row, random key), keep the first k
        order = torch.argsort(row.to(keys.dtype) + keys, stable=True)
        rank = torch.arange(col.numel()) - rowptr[row[order]]
        keep = rank < k
        chosen_rows, chosen_cols = row[order][keep], col[order][keep]
        in_batch = torch.isin(chosen_rows, batch)
        return chosen_cols[in_batch], chosen_rows[in_batch]

    class SAGEConv(nn.Module):
        def __init__(self, in_channels, out_channels, aggr):
            super().__init__()
            self.aggr = aggr
            self.lin_self = nn.Linear(in_channels, out_channels)
            self.lin_neigh = nn.Linear(in_channels, out_channels, bias=False)

        def forward(self, x_src, x_dst, src, dst):
            msg = x_src[src]
            index = dst.unsqueeze(-1).expand_as(msg)
            out = torch.zeros(x_dst.size(0), x_src.size(1), dtype=x_src.dtype)
            if self.aggr == "mean":
                summed = out.index_add(0, dst, msg)
                count = torch.zeros(x_dst.size(0)).index_add_(0, dst, torch.ones_like(dst,
                                                                                      dtype=torch.float))
                agg = summed / count.clamp(min=1).unsqueeze(-1)
                agg2 = out.scatter_reduce(0, index, msg, reduce="mean", include_self=False)
                agg = (agg + agg2) / 2
            else:
                agg = out.scatter_reduce(0, index, msg, reduce="amax", include_self=False)
            h = self.lin_self(x_dst) + self.lin_neigh(agg)
            return F.normalize(h, p=2.0, dim=-1)

    class GraphSAGE(nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = nn.ModuleList([SAGEConv(in_dim, hidden, "mean"),
                                        SAGEConv(hidden, hidden, "max")])
            self.classifier = nn.Linear(hidden, num_classes)

        def forward(self, x, blocks):
            h = x
            for conv, (n_id_dst, src, dst) in zip(self.convs, blocks):
                h = F.relu(conv(h, h[:n_id_dst], src, dst))
            return self.classifier(h)

    x = normal(torch, rng, n, in_dim)
    y = torch.from_numpy(rng.integers(0, num_classes, n))
    model = GraphSAGE()
    fill_(torch, model, rng, 0.4)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    order = torch.from_numpy(rng.permutation(n))
    res["loss"], res["sizes"], res["relabel"] = [], [], []
    for step, batch in enumerate(order.split(5)):
        # two hops outwards; node ids relabelled so that the batch nodes come first
        u1 = torch.from_numpy(rng.random((batch.numel(), fanout)))
        nbr1, tgt1 = sample_with_replacement(batch, fanout, u1)
        hop1 = torch.cat([batch, nbr1])
        keys = torch.from_numpy(rng.random(col.numel()).astype(np.float32) * 0.5)
        nbr2, tgt2 = sample_without_replacement(hop1.unique(), 2, keys)
        all_nodes = torch.cat([batch, nbr1, nbr2])
        uniq, inverse, counts = torch.unique(all_nodes, return_inverse=True,
                                             return_counts=True)
        # put the batch first: its nodes, then the others in sorted order
        is_batch = torch.isin(uniq, batch)
        n_id = torch.cat([batch, uniq[~is_batch]])
        local = torch.full((n,), -1, dtype=torch.long)
        local[n_id] = torch.arange(n_id.numel())
        res["relabel"].append(local[all_nodes])
        res["sizes"] += [uniq.numel(), int(counts.max()), int(inverse.max())]
        block2 = (n_id.numel(), local[nbr2], local[tgt2])
        block1 = (batch.numel(), local[nbr1], local[tgt1])
        out = model(x[n_id], [block2, block1])
        loss = F.cross_entropy(out[:batch.numel()], y[batch])
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["grad_self"] = model.convs[0].lin_self.weight.grad
    res["params"] = torch.cat([p.detach().flatten() for p in model.parameters()])
    # full-neighbourhood inference, layer by layer
    model.eval()
    with torch.no_grad():
        all_ids = torch.arange(n)
        blocks = [(n, col, row), (n, col, row)]
        logits = model(x[all_ids], blocks)
        res["inference"] = logits
        emb = F.normalize(logits, dim=1)
        res["cos_sim"] = emb @ emb.t()
        res["pred"] = logits.argmax(-1)
    return res


def knowledge_graph_program(torch):
    """TransE (max_norm embeddings renormalised in place by the lookup, margin ranking loss),
    DistMult and RotatE (phases to unit complex numbers by torch.polar, self-adversarial
    negative sampling with logsigmoid and a detached softmax), negatives by corrupting heads
    or tails, filtered ranks by argsort."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2203)
    res = {}
    num_ent, num_rel, dim, num_neg = 12, 3, 4, 5
    triples = np.stack([rng.integers(0, num_ent, 20), rng.integers(0, num_rel, 20),
                        rng.integers(0, num_ent, 20)], axis=1)
    triples = torch.from_numpy(np.unique(triples, axis=0))
    known = {tuple(t) for t in triples.tolist()}

    def corrupt(batch, draws, coin):
        # replace the head (coin) or the tail (not coin) with entities drawn in NumPy
        heads = batch[:, 0:1].repeat(1, num_neg)
        tails = batch[:, 2:3].repeat(1, num_neg)
        heads = torch.where(coin.unsqueeze(1), draws, heads)
        tails = torch.where(coin.unsqueeze(1), tails, draws)
        rels = batch[:, 1:2].expand(-1, num_neg)
        return torch.stack([heads, rels, tails], dim=-1)

    class TransE(nn.Module):
        def __init__(self, margin=1.0, p_norm=1):
            super().__init__()
            self.ent = nn.Embedding(num_ent, dim, max_norm=1.0)
            self.rel = nn.Embedding(num_rel, dim)
            self.p_norm = p_norm
            self.criterion = nn.MarginRankingLoss(margin=margin)

        def score(self, t):
            h, r, tl = self.ent(t[..., 0]), self.rel(t[..., 1]), self.ent(t[..., 2])
            return torch.norm(h + r - tl, p=self.p_norm, dim=-1)

        def forward(self, pos, neg):
            pos_d = self.score(pos)
            neg_d = self.score(neg)
            target = torch.tensor([-1], dtype=torch.long)
            # TransE's reference code: one target broadcast over the flattened pairs
            return self.criterion(pos_d.repeat_interleave(num_neg), neg_d.view(-1), target)

    class DistMult(nn.Module):
        def __init__(self):
            super().__init__()
            self.ent = nn.Embedding(num_ent, dim)
            self.rel = nn.Embedding(num_rel, dim)

        def score(self, t):
            return (self.ent(t[..., 0]) * self.rel(t[..., 1]) * self.ent(t[..., 2])).sum(-1)

    class RotatE(nn.Module):
        def __init__(self, gamma=6.0):
            super().__init__()
            self.gamma = gamma
            self.epsilon = 2.0
            self.embedding_range = (gamma + self.epsilon) / dim
            self.ent = nn.Parameter(torch.zeros(num_ent, dim * 2))
            self.rel = nn.Parameter(torch.zeros(num_rel, dim))
            nn.init.uniform_(self.ent, -self.embedding_range, self.embedding_range)

        def score(self, t):
            head = torch.index_select(self.ent, 0, t[..., 0].reshape(-1))
            tail = torch.index_select(self.ent, 0, t[..., 2].reshape(-1))
            phase = self.rel[t[..., 1].reshape(-1)] / (self.embedding_range / math.pi)
            re_h, im_h = torch.chunk(head, 2, dim=-1)
            re_t, im_t = torch.chunk(tail, 2, dim=-1)
            rot = torch.polar(torch.ones_like(phase), phase)
            h = torch.complex(re_h, im_h) * rot
            diff = h - torch.complex(re_t, im_t)
            dist = diff.abs().sum(-1)
            # the same with cos/sin written out, as the original code does
            re_r, im_r = torch.cos(phase), torch.sin(phase)
            re_s = re_h * re_r - im_h * im_r - re_t
            im_s = re_h * im_r + im_h * re_r - im_t
            dist2 = torch.stack([re_s, im_s], dim=0).norm(dim=0).sum(-1)
            return (self.gamma - dist).view(t.shape[:-1]), (self.gamma - dist2).view(t.shape[:-1])

    def self_adversarial_loss(pos_score, neg_score, temperature=1.0):
        weights = F.softmax(neg_score * temperature, dim=1).detach()
        neg = (weights * F.logsigmoid(-neg_score)).sum(dim=1)
        pos = F.logsigmoid(pos_score)
        return -(pos.mean() + neg.mean()) / 2, weights

    transe, distmult, rotate = TransE(), DistMult(), RotatE()
    fill_(torch, transe, rng, 0.8)           # entity rows with norms above 1
    fill_(torch, distmult, rng, 0.3)
    fill_(torch, [rotate.rel], rng, 0.5)
    with torch.no_grad():
        rotate.ent.uniform_(-1.0, 1.0)
        rotate.ent.copy_(torch.from_numpy(rng.uniform(-1, 1, (num_ent, dim * 2))
                                          .astype(np.float32)))
    res["norms_before"] = transe.ent.weight.norm(dim=1)
    opts = [torch.optim.SGD(transe.parameters(), lr=0.05),
            torch.optim.Adagrad(distmult.parameters(), lr=0.1),
            torch.optim.Adam(rotate.parameters(), lr=0.01)]
    res["transe"], res["distmult"], res["rotate"], res["adv_weights"] = [], [], [], []
    for batch in triples.split(6):
        draws = torch.from_numpy(rng.integers(0, num_ent, (batch.size(0), num_neg)))
        coin = torch.from_numpy(rng.random(batch.size(0)) < 0.5)
        neg = corrupt(batch, draws, coin)
        for opt in opts:
            opt.zero_grad()
        loss_t = transe(batch, neg)
        loss_t.backward()
        # DistMult: binary cross entropy with logits over positives and negatives, L2 reg
        pos_s, neg_s = distmult.score(batch), distmult.score(neg)
        scores = torch.cat([pos_s.unsqueeze(1), neg_s], dim=1)
        labels = torch.zeros_like(scores)
        labels[:, 0] = 1.0
        reg = distmult.ent.weight.pow(2).mean() + distmult.rel.weight.pow(2).mean()
        loss_d = F.binary_cross_entropy_with_logits(scores, labels) + 0.01 * reg
        loss_d.backward()
        (pos_r, pos_r2), (neg_r, neg_r2) = rotate.score(batch), rotate.score(neg)
        loss_r, weights = self_adversarial_loss(pos_r, neg_r)
        loss_r2, _ = self_adversarial_loss(pos_r2, neg_r2)
        (loss_r + loss_r2).backward()
        for opt in opts:
            opt.step()
        res["transe"].append(loss_t.item())
        res["distmult"].append(loss_d.item())
        res["rotate"].append([loss_r.item(), loss_r2.item()])
        res["adv_weights"].append(weights)
    # the lookup renormalised the rows it touched, in place, without a graph
    res["norms_after"] = transe.ent.weight.norm(dim=1)
    res["transe_ent"] = transe.ent.weight
    res["weight_version"] = [transe.ent.weight._version, distmult.ent.weight._version]
    res["rotate_grad"] = rotate.rel.grad
    res["distmult_state"] = opts[1].state[distmult.ent.weight]["sum"]

    # filtered link prediction: rank each true tail among all entities, other known true
    # triples masked out
    with torch.no_grad():
        heads, rels, tails = triples[:, 0], triples[:, 1], triples[:, 2]
        cand = torch.arange(num_ent)
        all_t = torch.stack([heads.unsqueeze(1).expand(-1, num_ent),
                             rels.unsqueeze(1).expand(-1, num_ent),
                             cand.unsqueeze(0).expand(heads.size(0), -1)], dim=-1)
        scores = -transe.score(all_t)
        mask = torch.zeros_like(scores, dtype=torch.bool)
        for i, (h, r, t) in enumerate(triples.tolist()):
            for e in range(num_ent):
                if e != t and (h, r, e) in known:
                    mask[i, e] = True
        scores = scores.masked_fill(mask, float("-inf"))
        argsort = torch.argsort(scores, dim=1, descending=True)
        ranks = (argsort == tails.unsqueeze(1)).nonzero()[:, 1] + 1
        res["ranks"] = ranks
        res["mrr"] = (1.0 / ranks.float()).mean()
        res["hits@3"] = (ranks <= 3).float().mean()
        res["rank_dtype"] = [_name(ranks.dtype)]
        rot_scores, _ = rotate.score(all_t)
        res["rotate_scores"] = rot_scores
        res["polar_dtype"] = [_name(torch.polar(torch.ones(2), torch.zeros(2)).dtype)]
    return res


def node2vec_program(torch):
    """DeepWalk / node2vec skip-gram: biased random walks stepped with torch ops over a CSR
    graph (uniforms from NumPy), context windows by unfold, nn.Embedding(sparse=True) trained
    with SparseAdam and with plain SGD on sparse gradients, the negative-sampling loss with
    logsigmoid, unigram^0.75 negatives, vocabulary by unique and unique_consecutive."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2204)
    res = {}
    n, dim, walk_len, window, num_neg = 10, 4, 6, 2, 3
    edges = _undirected_edges(rng, n, 18)
    edges = edges[:, edges[0] != edges[1]]
    edge_index = torch.from_numpy(np.concatenate([edges, edges[::-1]], axis=1))
    csr = torch.sparse_coo_tensor(edge_index, torch.ones(edge_index.size(1)),
                                  (n, n)).coalesce().to_sparse_csr()
    rowptr, col = csr.crow_indices(), csr.col_indices()
    deg = rowptr.diff()
    p_ret, q_io = 1.0, 0.5

    def step(prev, cur, u):
        # node2vec's second-order step by rejection-free weights: 1/p back to prev, 1 to
        # prev's neighbours, 1/q further away; the pick by cumulative weights and searchsorted
        starts, counts = rowptr[cur], deg[cur]
        picks = []
        for i in range(cur.numel()):
            nbrs = col[starts[i]:starts[i] + counts[i]]
            if nbrs.numel() == 0:
                picks.append(cur[i])
                continue
            prev_nbrs = col[rowptr[prev[i]]:rowptr[prev[i] + 1]]
            w = torch.full((nbrs.numel(),), 1.0 / q_io)
            w[torch.isin(nbrs, prev_nbrs)] = 1.0
            w[nbrs == prev[i]] = 1.0 / p_ret
            cdf = torch.cumsum(w, 0) / w.sum()
            picks.append(nbrs[torch.searchsorted(cdf, u[i:i + 1]).clamp(max=nbrs.numel() - 1)][0])
        return torch.stack(picks)

    starts = torch.arange(n).repeat(2)
    walks = [starts]
    first = torch.from_numpy(rng.random(starts.numel()))
    offs = (first * deg[starts]).long()
    walks.append(torch.where(deg[starts] > 0, col[(rowptr[starts] + offs).clamp(
        max=col.numel() - 1)], starts))
    for _ in range(walk_len - 2):
        u = torch.from_numpy(rng.random(starts.numel()))
        walks.append(step(walks[-2], walks[-1], u))
    walks = torch.stack(walks, dim=1)
    res["walks"] = walks

    # vocabulary statistics
    vocab, inverse, counts = walks.flatten().unique(sorted=True, return_inverse=True,
                                                    return_counts=True)
    res["vocab"] = [vocab, inverse, counts]
    res["vocab_dtypes"] = [_name(inverse.dtype), _name(counts.dtype)]
    runs, run_inverse, run_counts = torch.unique_consecutive(
        walks, return_inverse=True, return_counts=True, dim=1)
    res["unique_consecutive_dim"] = [runs, run_inverse, run_counts]
    flat_runs, flat_counts = walks[0].unique_consecutive(return_counts=True)
    res["unique_consecutive"] = [flat_runs, flat_counts]
    res["unique_dim0"] = torch.unique(walks[:, :2], dim=0)
    freq = torch.zeros(n).index_add_(0, vocab, counts.float())
    noise = freq.pow(0.75)
    noise = noise / noise.sum()
    res["noise"] = noise

    # (center, context) pairs from sliding windows
    windows = walks.unfold(1, 2 * window + 1, 1)        # (walks, positions, 2w+1)
    center = windows[..., window].unsqueeze(-1).expand(-1, -1, 2 * window)
    context = torch.cat([windows[..., :window], windows[..., window + 1:]], dim=-1)
    center, context = center.reshape(-1), context.reshape(-1)
    res["pairs"] = [center.numel(), int(center.sum()), int(context.sum())]

    class SkipGram(nn.Module):
        def __init__(self, sparse):
            super().__init__()
            self.in_embed = nn.Embedding(n, dim, sparse=sparse)
            self.out_embed = nn.Embedding(n, dim, sparse=sparse)

        def forward(self, center, context, negatives):
            v = self.in_embed(center)
            u = self.out_embed(context)
            u_neg = self.out_embed(negatives)
            pos = F.logsigmoid((v * u).sum(-1))
            neg = F.logsigmoid(-torch.bmm(u_neg, v.unsqueeze(2)).squeeze(2)).sum(-1)
            return -(pos + neg).mean()

    models = [SkipGram(True), SkipGram(True), SkipGram(False)]
    for m in models:
        fill_(torch, m, np.random.default_rng(7), 0.5)
    opts = [torch.optim.SparseAdam(list(models[0].parameters()), lr=0.05),
            torch.optim.SGD(models[1].parameters(), lr=0.5, momentum=0.0),
            torch.optim.Adam(models[2].parameters(), lr=0.05)]
    cdf = torch.cumsum(noise, 0)
    res["loss"] = []
    for batch in torch.arange(center.numel()).split(24):
        u = torch.from_numpy(rng.random((batch.numel(), num_neg)))
        negatives = torch.searchsorted(cdf, u.float()).clamp(max=n - 1)
        losses = []
        for model, opt in zip(models, opts):
            opt.zero_grad(set_to_none=False)     # (older code's habit: sparse grads emptied)
            loss = model(center[batch], context[batch], negatives)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        res["loss"].append(losses)
    g = models[0].in_embed.weight.grad
    res["grad_layout"] = [str(g.layout).rsplit(".")[-1], g.is_coalesced(), g._nnz(),
                          str(models[2].in_embed.weight.grad.layout).rsplit(".")[-1]]
    res["sparse_grad_dense"] = g.to_dense()
    res["sparse_grad_coalesced"] = g.coalesce().values()
    res["sparse_adam_state"] = opts[0].state[models[0].in_embed.weight]["exp_avg"]
    res["sparse_adam_step"] = [float(opts[0].state[models[0].in_embed.weight]["step"])]
    for i, m in enumerate(models):
        res[f"emb{i}"] = m.in_embed.weight
    with torch.no_grad():
        emb = F.normalize(models[0].in_embed.weight, dim=1)
        sims = emb @ emb.t()
        sims.fill_diagonal_(-2.0)
        res["nearest"] = sims.topk(2, dim=1).indices
    return res


def graph_classification_program(torch):
    """Graph-level classification over a batch of small graphs: block_diag adjacency, GIN
    layers with BatchNorm1d, global add/mean/max pooling by scatter_reduce, index_add_ and
    segment_reduce, a torch_scatter-style segment softmax for attention pooling, a Set2Set
    readout (LSTMCell), to_dense_batch by scatter into a padded tensor, cross_entropy."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2205)
    res = {}
    in_dim, hidden, num_classes = 3, 6, 2
    sizes = [4, 3, 5, 2, 4, 3]
    adjs = []
    for k in sizes:
        a = np.triu((rng.random((k, k)) < 0.5).astype(np.float32), 1)
        adjs.append(torch.from_numpy(a + a.T))
    adj = torch.block_diag(*adjs)
    edge_index = adj.nonzero().t().contiguous()
    num_graphs, n = len(sizes), adj.size(0)
    counts = torch.tensor(sizes)
    batch = torch.repeat_interleave(torch.arange(num_graphs), counts)
    ptr = torch.cat([counts.new_zeros(1), counts.cumsum(0)])
    res["batch"] = [batch, ptr, edge_index]
    x = normal(torch, rng, n, in_dim)
    y = torch.from_numpy(rng.integers(0, num_classes, num_graphs))

    def scatter(src, index, dim_size, reduce):
        index = index.view(-1, 1).expand_as(src)
        out = torch.zeros(dim_size, src.size(1), dtype=src.dtype)
        return out.scatter_reduce(0, index, src, reduce=reduce, include_self=False)

    def segment_softmax(src, index, num_segments):
        src_max = scatter(src.detach(), index, num_segments, "amax")
        out = (src - src_max[index]).exp()
        out_sum = scatter(out, index, num_segments, "sum") + 1e-16
        return out / out_sum[index]

    def to_dense_batch(h):
        max_nodes = int(counts.max())
        pos = torch.arange(n) - ptr[batch]
        idx = batch * max_nodes + pos
        out = h.new_zeros(num_graphs * max_nodes, h.size(1))
        out = out.index_copy(0, idx, h).view(num_graphs, max_nodes, h.size(1))
        mask = torch.zeros(num_graphs * max_nodes, dtype=torch.bool)
        mask[idx] = True
        return out, mask.view(num_graphs, max_nodes)

    class GINConv(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.eps = nn.Parameter(torch.zeros(1))
            # (no bias before the batch norm: its gradient is rounding noise, which RMSprop
            # would blow up into steps of size lr)
            self.mlp = nn.Sequential(nn.Linear(cin, cout, bias=False), nn.BatchNorm1d(cout),
                                     nn.ReLU(),
                                     nn.Linear(cout, cout))

        def forward(self, x, edge_index):
            src, dst = edge_index
            agg = torch.zeros_like(x).index_add_(0, dst, x[src])
            return self.mlp((1 + self.eps) * x + agg)

    class Set2Set(nn.Module):
        def __init__(self, channels, steps):
            super().__init__()
            self.steps = steps
            self.lstm = nn.LSTM(2 * channels, channels, batch_first=False)

        def forward(self, x, index):
            h = (x.new_zeros((1, num_graphs, x.size(-1))),
                 x.new_zeros((1, num_graphs, x.size(-1))))
            q_star = x.new_zeros(num_graphs, 2 * x.size(-1))
            for _ in range(self.steps):
                q, h = self.lstm(q_star.unsqueeze(0), h)
                q = q.view(num_graphs, x.size(-1))
                e = (x * q[index]).sum(dim=-1, keepdim=True)
                a = segment_softmax(e, index, num_graphs)
                r = scatter(a * x, index, num_graphs, "sum")
                q_star = torch.cat([q, r], dim=-1)
            return q_star

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = GINConv(in_dim, hidden), GINConv(hidden, hidden)
            self.gate = nn.Linear(hidden, 1, bias=False)    # (softmax ignores a bias)
            self.set2set = Set2Set(hidden, steps=2)
            self.head = nn.Sequential(nn.Linear(hidden * 4, hidden), nn.ReLU(),
                                      nn.Linear(hidden, num_classes))

        def forward(self, x, edge_index, batch):
            h = F.relu(self.conv1(x, edge_index))
            h = self.conv2(h, edge_index)
            gate = segment_softmax(self.gate(h), batch, num_graphs)
            att = scatter(gate * h, batch, num_graphs, "sum")
            mean = scatter(h, batch, num_graphs, "mean")
            mx = scatter(h, batch, num_graphs, "amax")
            s2s = self.set2set(h, batch)
            return self.head(torch.cat([att + mean, mx, s2s], dim=-1)), gate

    model = Net()
    fill_(torch, model, rng, 0.4)
    opt = torch.optim.RMSprop(model.parameters(), lr=0.01, alpha=0.9)
    res["loss"], res["acc"] = [], []
    for _ in range(4):
        model.train()
        opt.zero_grad()
        logits, gate = model(x, edge_index, batch)
        loss = F.cross_entropy(logits, y, label_smoothing=0.1)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step()
        res["loss"].append(loss.item())
        res["acc"].append((logits.argmax(1) == y).float().mean().item())
    res["gate_sums"] = torch.zeros(num_graphs).index_add_(0, batch, gate.detach().squeeze(-1))
    res["eps_grad"] = [model.conv1.eps.grad, model.conv2.eps.grad]
    res["running"] = [model.conv1.mlp[1].running_mean, model.conv1.mlp[1].running_var]
    res["params"] = torch.cat([p.detach().flatten() for p in model.parameters()])
    model.eval()
    with torch.no_grad():
        logits, _ = model(x, edge_index, batch)
        res["eval_logits"] = logits
        res["eval_probs"] = logits.softmax(-1)
        # the pooling written other ways
        res["segment_max"] = torch.segment_reduce(x, "max", lengths=counts)
        res["segment_mean"] = torch.segment_reduce(x, "mean", offsets=ptr)
        res["segment_sum"] = torch.segment_reduce(x, "sum", lengths=counts, axis=0)
        res["add_pool"] = torch.zeros(num_graphs, in_dim).index_add_(0, batch, x)
        res["mean_pool"] = res["add_pool"] / counts.unsqueeze(1)
        res["split_max"] = torch.stack([g.max(0).values for g in x.split(sizes)])
        dense, mask = to_dense_batch(x)
        res["dense"] = [dense, mask]
        res["dense_mean"] = dense.sum(1) / mask.sum(1, keepdim=True)
        padded = nn.utils.rnn.pad_sequence(list(x.split(sizes)), batch_first=True,
                                           padding_value=float("-inf"))
        res["padded_max"] = padded.max(1).values
    # a gradient through segment_reduce and the padded form
    xg = x.clone().requires_grad_()
    pooled = torch.segment_reduce(xg, "max", lengths=counts) + \
        torch.segment_reduce(xg, "mean", lengths=counts)
    dense, mask = to_dense_batch(xg)
    (pooled.square().sum() + dense.sum((1, 2)).softmax(0)[0]).backward()
    res["x_grad"] = xg.grad
    return res


PROGRAMS = [sparse_gcn_program, graphsage_program, knowledge_graph_program,
            node2vec_program, graph_classification_program]


@pytest.mark.filterwarnings("ignore::UserWarning")     # sparse CSR is in beta
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    assert_same_results(program(ember), program(torch), rtol=2e-5, atol=2e-6)

