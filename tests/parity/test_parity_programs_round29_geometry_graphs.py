"""Graph-learning programs (second wave) written as PyG / DGL reference repositories write them
in torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy weights
and graphs: R-GCN with basis decomposition (einsum of bases, per-relation degree norms,
index_add_ messages) and its block-diagonal variant, Graphormer (Floyd-Warshall shortest paths,
spatial / centrality / edge encodings as Embeddings with padding_idx, the attention bias with a
virtual graph token), TGN-lite (GRUCell memory, cosine time encoding, last-message aggregation
by scatter_reduce amax, link prediction with negative destinations), a GAE link predictor over
a normalised sparse adjacency (sparse_coo_tensor, sparse.mm with reduce, CSR, vmap over
sparse.mm), BCE with logits and a ranking AUC."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _graph(rng, n, m, n_rel=None):
    """A random directed graph without self loops: edge_index (2, m) and relation types."""
    src = rng.integers(0, n, m)
    dst = (src + rng.integers(1, n, m)) % n
    ei = np.stack([src, dst]).astype(np.int64)
    if n_rel is None:
        return ei
    return ei, rng.integers(0, n_rel, m).astype(np.int64)


def rgcn_program(torch):
    """Schlichtkrull et al.'s R-GCN as PyG's RGCNConv writes it: W_r = sum_b a_rb V_b by
    einsum, per-relation mean aggregation (index_add_ of messages, degrees by scatter_add_ over
    (dst, rel) pairs, clamp(min=1)), root weight, the block-diagonal decomposition by bmm of
    reshaped blocks, entity classification with cross_entropy on a labelled subset, Adam with
    weight_decay and a few steps; inference under inference_mode."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2921)
    res = {}
    n, n_rel, m, n_cls = 12, 3, 40, 3
    ei, et = _graph(rng, n, m, n_rel)
    edge_index, edge_type = torch.from_numpy(ei), torch.from_numpy(et)

    class RGCNConv(nn.Module):
        def __init__(self, in_c, out_c, num_relations, num_bases=None, num_blocks=None):
            super().__init__()
            self.in_c, self.out_c, self.R = in_c, out_c, num_relations
            self.num_bases, self.num_blocks = num_bases, num_blocks
            if num_bases is not None:
                self.weight = nn.Parameter(torch.empty(num_bases, in_c, out_c))
                self.comp = nn.Parameter(torch.empty(num_relations, num_bases))
            elif num_blocks is not None:
                self.weight = nn.Parameter(torch.empty(num_relations, num_blocks,
                                                       in_c // num_blocks, out_c // num_blocks))
                self.register_parameter("comp", None)
            self.root = nn.Parameter(torch.empty(in_c, out_c))
            self.bias = nn.Parameter(torch.empty(out_c))

        def forward(self, x, edge_index, edge_type):
            src, dst = edge_index
            out = torch.zeros(x.size(0), self.out_c, dtype=x.dtype)
            if self.num_bases is not None:
                weight = torch.einsum("rb,bio->rio", self.comp, self.weight)
            for r in range(self.R):
                mask = edge_type == r
                s, t = src[mask], dst[mask]
                if self.num_blocks is not None:
                    h = x[s].view(-1, self.num_blocks, self.in_c // self.num_blocks)
                    msg = torch.einsum("abi,bio->abo", h, self.weight[r]).contiguous()
                    msg = msg.view(-1, self.out_c)
                else:
                    msg = x[s] @ weight[r]
                deg = torch.zeros(x.size(0), dtype=x.dtype).scatter_add_(
                    0, t, torch.ones_like(t, dtype=x.dtype))
                out.index_add_(0, t, msg / deg.clamp(min=1)[t].unsqueeze(-1))
            return out + x @ self.root + self.bias

    class RGCN(nn.Module):
        def __init__(self, blocks=False):
            super().__init__()
            self.emb = nn.Embedding(n, 8)
            kw = {"num_blocks": 2} if blocks else {"num_bases": 2}
            self.conv1 = RGCNConv(8, 8, n_rel, **kw)
            self.conv2 = RGCNConv(8, n_cls, n_rel, num_bases=2)

        def forward(self):
            h = F.relu(self.conv1(self.emb.weight, edge_index, edge_type))
            return self.conv2(F.dropout(h, p=0.0, training=self.training), edge_index,
                              edge_type)

    labels = torch.from_numpy(rng.integers(0, n_cls, n))
    train_idx = torch.tensor([0, 2, 3, 5, 7, 8, 11])
    for blocks in (False, True):
        model = RGCN(blocks)
        fill_(torch, model, rng)
        opt = torch.optim.Adam(model.parameters(), lr=0.02, weight_decay=5e-4)
        losses = []
        for _ in range(4):
            model.train()
            opt.zero_grad()
            out = model()
            loss = F.cross_entropy(out[train_idx], labels[train_idx])
            loss.backward()
            opt.step()
            losses.append(loss.item())
        key = "blocks" if blocks else "bases"
        res[key + "_losses"] = losses
        res[key + "_comp_grad"] = model.conv2.comp.grad
        model.eval()
        with torch.inference_mode():
            pred = model().argmax(-1)
            res[key + "_acc"] = (pred == labels).float().mean()
            res[key + "_pred"] = pred
            res[key + "_inference"] = [pred.is_inference(), pred.requires_grad]
    # per-example gradients (DP-SGD style) by vmap(grad(functional_call)): RGCNConv's in-place
    # index_add_ into an unbatched zeros buffer is refused by vmap as in PyTorch
    conv = model.conv2
    params = {k: v.detach() for k, v in conv.named_parameters()}
    xs = normal(torch, rng, 3, n, 8)

    def per_example(p, x):
        out = torch.func.functional_call(conv, p, (x, edge_index, edge_type))
        return F.cross_entropy(out, labels)
    try:
        torch.vmap(torch.func.grad(per_example), in_dims=(None, 0))(params, xs)
    except RuntimeError as e:       # (ember adds a line naming the module: by design)
        res["per_example_error"] = [str(e).split("\n")[0]]
    return res


def graphormer_program(torch):
    """Graphormer's encoder on a padded batch of two graphs: all-pairs shortest paths by a
    Floyd-Warshall loop of torch.minimum over broadcast sums, unreachable pairs clipped and
    shifted for an Embedding with padding_idx=0, in/out degree centrality embeddings, the
    spatial bias per head plus mean edge encodings along shortest paths given from NumPy,
    a virtual graph token with its own learned distance, -inf attention bias on padding, a
    pre-LN transformer layer, and a graph-level regression loss with an L1 objective."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2922)
    res = {}
    B, N, H, D, max_dist = 2, 6, 2, 8, 5
    sizes = [6, 4]
    adj = torch.zeros(B, N, N, dtype=torch.bool)
    for b, nb in enumerate(sizes):
        e = _graph(rng, nb, nb + 2)
        adj[b, e[0], e[1]] = True
        adj[b, e[1], e[0]] = True
    pad = torch.arange(N)[None] >= torch.tensor(sizes)[:, None]
    dist = torch.full((B, N, N), float("inf"))
    dist[adj] = 1.0
    dist.diagonal(dim1=1, dim2=2).fill_(0.0)
    for k in range(N):
        dist = torch.minimum(dist, dist[:, :, k:k + 1] + dist[:, k:k + 1, :])
    res["dist"] = dist
    spatial = torch.where(torch.isinf(dist), torch.full_like(dist, max_dist), dist)
    spatial = spatial.clamp(max=max_dist).long() + 1
    spatial = spatial.masked_fill(pad[:, None, :] | pad[:, :, None], 0)
    res["spatial_pos"] = spatial
    deg = adj.sum(-1)
    res["degree"] = deg
    edge_feat_path = torch.from_numpy(rng.normal(size=(B, N, N, 4)).astype(np.float32))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.qkv = nn.Linear(D, 3 * D)
            self.proj = nn.Linear(D, D)
            self.ffn = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))

        def forward(self, x, bias):
            b, n, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, n, 3, H, D // H).permute(2, 0, 3, 1, 4)
            att = (q @ k.transpose(-2, -1)) * (D // H) ** -0.5 + bias
            att = att.softmax(-1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(b, n, D))
            return x + self.ffn(self.ln2(x))

    class Graphormer(nn.Module):
        def __init__(self):
            super().__init__()
            self.atom = nn.Embedding(10, D, padding_idx=0)
            self.in_deg = nn.Embedding(N + 1, D, padding_idx=0)
            self.out_deg = nn.Embedding(N + 1, D, padding_idx=0)
            self.spatial = nn.Embedding(max_dist + 2, H, padding_idx=0)
            self.edge = nn.Linear(4, H, bias=False)
            self.graph_token = nn.Embedding(1, D)
            self.graph_token_dist = nn.Embedding(1, H)
            self.layer = Layer()
            self.head = nn.Linear(D, 1)

        def forward(self, atoms, deg, spatial, pad):
            x = self.atom(atoms) + self.in_deg(deg) + self.out_deg(deg)
            x = torch.cat([self.graph_token.weight.unsqueeze(0).repeat(x.size(0), 1, 1), x], 1)
            bias = torch.zeros(B, H, N + 1, N + 1)
            sp = self.spatial(spatial).permute(0, 3, 1, 2)
            edge_bias = self.edge(edge_feat_path).permute(0, 3, 1, 2) / spatial.clamp(
                min=1)[:, None].float()
            bias[:, :, 1:, 1:] = bias[:, :, 1:, 1:] + sp + edge_bias
            t = self.graph_token_dist.weight.view(1, H, 1)
            bias[:, :, 1:, 0] = bias[:, :, 1:, 0] + t
            bias[:, :, 0, :] = bias[:, :, 0, :] + t
            key_pad = torch.cat([torch.zeros(B, 1, dtype=torch.bool), pad], 1)
            bias = bias.masked_fill(key_pad[:, None, None, :], float("-inf"))
            h = self.layer(x, bias)
            # the token alone would see a constant row bias (softmax-invariant): add a masked
            # mean of the nodes so that the spatial and token-distance biases get gradients
            keep = (~pad)[..., None].float()
            readout = h[:, 0] + (h[:, 1:] * keep).sum(1) / keep.sum(1)
            return self.head(readout).squeeze(-1), bias

    atoms = torch.from_numpy(rng.integers(1, 10, (B, N))).masked_fill(pad, 0)
    deg_in = deg.clamp(max=N).masked_fill(pad, 0)
    model = Graphormer()
    fill_(torch, model, rng)
    with torch.no_grad():
        for emb in (model.atom, model.in_deg, model.out_deg, model.spatial):
            emb.weight[0].zero_()
    y = torch.tensor([0.5, -1.0])
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        pred, bias = model(atoms, deg_in, spatial, pad)
        loss = F.l1_loss(pred, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        losses.append(loss.item())
    res["losses"] = losses
    res["pred"] = pred
    res["bias"] = bias.masked_fill(torch.isinf(bias), -1e4)
    res["spatial_grad"] = model.spatial.weight.grad
    res["atom_pad_row"] = model.atom.weight[0]
    res["sdpa"] = F.scaled_dot_product_attention(
        *(normal(torch, rng, B, H, N + 1, 4) for _ in range(3)), attn_mask=bias.detach())
    return res


def tgn_program(torch):
    """TGN-lite over a stream of timestamped interactions in batches: memory and last_update
    as buffers, a cosine time encoding (Linear then cos), raw messages of the memories, the
    time delta and edge features, the last message per node by scatter_reduce('amax') over
    timestamps and a mask, memory updated by GRUCell for the touched nodes, an embedding from
    memory + time-projected features, link prediction against NumPy negative destinations with
    BCE-with-logits, memory detached between batches as TGN does."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2923)
    res = {}
    n, mem_dim, t_dim, e_dim = 8, 6, 4, 3
    n_ev = 18
    src = torch.from_numpy(rng.integers(0, n, n_ev))
    dst = torch.from_numpy((src.numpy() + rng.integers(1, n, n_ev)) % n)
    ts = torch.from_numpy(np.sort(rng.uniform(0, 10, n_ev)).astype(np.float32))
    feats = normal(torch, rng, n_ev, e_dim)
    neg = torch.from_numpy(rng.integers(0, n, n_ev))

    class TimeEncoder(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.lin = nn.Linear(1, dim)

        def forward(self, t):
            return self.lin(t.view(-1, 1)).cos()

    class TGN(nn.Module):
        def __init__(self):
            super().__init__()
            self.time_enc = TimeEncoder(t_dim)
            self.gru = nn.GRUCell(2 * mem_dim + t_dim + e_dim, mem_dim)
            self.emb = nn.Linear(mem_dim + t_dim, mem_dim)
            self.lin_src, self.lin_dst = nn.Linear(mem_dim, mem_dim), nn.Linear(mem_dim, mem_dim)
            self.lin_final = nn.Linear(mem_dim, 1)
            self.register_buffer("memory", torch.zeros(n, mem_dim))
            self.register_buffer("last_update", torch.zeros(n))

        def update_memory(self, s, d, t, e):
            nodes = torch.cat([s, d])
            other = torch.cat([d, s])
            tt = torch.cat([t, t])
            ee = torch.cat([e, e])
            dt = tt - self.last_update[nodes]
            msg = torch.cat([self.memory[nodes], self.memory[other], self.time_enc(dt), ee], -1)
            t_max = torch.full((n,), float("-inf")).scatter_reduce(
                0, nodes, tt, reduce="amax", include_self=False)
            is_last = tt == t_max[nodes]
            # ties (a node twice in one timestamp) resolved to the largest event position
            pos = torch.arange(nodes.numel()).masked_fill(~is_last, -1)
            best = torch.full((n,), -1).scatter_reduce(0, nodes, pos, reduce="amax")
            touched = torch.unique(nodes)
            agg = msg[best[touched]]
            new_mem = self.gru(agg, self.memory[touched])
            memory = self.memory.clone()
            memory[touched] = new_mem
            last = self.last_update.clone()
            last[touched] = t_max[touched]
            return memory, last

        def embed(self, memory, last, nodes, t):
            te = self.time_enc(t - last[nodes])
            return torch.tanh(self.emb(torch.cat([memory[nodes], te], -1)))

        def link(self, zs, zd):
            return self.lin_final(F.relu(self.lin_src(zs) + self.lin_dst(zd))).squeeze(-1)

    model = TGN()
    fill_(torch, model, rng)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses, aps = [], []
    for start in range(0, n_ev, 6):
        sl = slice(start, start + 6)
        s, d, t, e, ng = src[sl], dst[sl], ts[sl], feats[sl], neg[sl]
        opt.zero_grad()
        memory, last = model.update_memory(s, d, t, e)
        zs, zd, zn = (model.embed(memory, last, v, t) for v in (s, d, ng))
        pos_out, neg_out = model.link(zs, zd), model.link(zs, zn)
        loss = F.binary_cross_entropy_with_logits(pos_out, torch.ones_like(pos_out))
        loss = loss + F.binary_cross_entropy_with_logits(neg_out, torch.zeros_like(neg_out))
        loss.backward()
        opt.step()
        model.memory.copy_(memory.detach())
        model.last_update.copy_(last.detach())
        losses.append(loss.item())
        with torch.no_grad():
            y_pred = torch.cat([pos_out, neg_out]).sigmoid()
            y_true = torch.cat([torch.ones(pos_out.size(0)), torch.zeros(neg_out.size(0))])
            order = y_pred.argsort(descending=True)
            hits = y_true[order]
            prec = hits.cumsum(0) / torch.arange(1, hits.numel() + 1)
            aps.append(((prec * hits).sum() / hits.sum()).item())
    res["losses"], res["ap"] = losses, aps
    res["memory"], res["last_update"] = model.memory, model.last_update
    res["gru_grad"] = model.gru.weight_hh.grad
    res["buffers"] = sorted(name for name, _ in model.named_buffers())
    return res


def gae_link_program(torch):
    """A graph auto-encoder for link prediction: a train/test split of undirected edges from
    NumPy, the symmetric normalised adjacency as sparse_coo_tensor + coalesce, a two-layer GCN
    encoder by torch.sparse.mm, mean aggregation by sparse.mm(reduce='mean') on CSR and by
    index_reduce_, inner-product decoding of positive and NumPy negative edges,
    BCE-with-logits with pos_weight, a ranking AUC by comparisons, Adam for a few steps."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2924)
    res = {}
    n, d_in, d_h = 10, 5, 4
    ei = _graph(rng, n, 20)
    ei = np.unique(np.sort(ei, axis=0), axis=1)
    perm = rng.permutation(ei.shape[1])
    test_e, train_e = ei[:, perm[:3]], ei[:, perm[3:]]
    both = np.concatenate([train_e, train_e[::-1]], 1)
    idx = torch.from_numpy(both)
    loops = torch.arange(n)
    idx = torch.cat([idx, torch.stack([loops, loops])], 1)
    A = torch.sparse_coo_tensor(idx, torch.ones(idx.size(1)), (n, n)).coalesce()
    deg = torch.sparse.sum(A, 1).to_dense()
    dinv = deg.pow(-0.5)
    r, c = A.indices()
    A_hat = torch.sparse_coo_tensor(A.indices(), dinv[r] * A.values() * dinv[c], (n, n))
    A_hat = A_hat.coalesce()
    x = normal(torch, rng, n, d_in)

    w1 = nn.Linear(d_in, d_h * 2)
    w2 = nn.Linear(d_h * 2, d_h)
    fill_(torch, [w1.weight, w1.bias, w2.weight, w2.bias], rng)

    def encode():
        h = F.relu(torch.sparse.mm(A_hat, w1(x)))
        return torch.sparse.mm(A_hat, w2(h))

    pos = torch.from_numpy(train_e)
    neg = torch.from_numpy(_graph(rng, n, train_e.shape[1]))
    opt = torch.optim.Adam(list(w1.parameters()) + list(w2.parameters()), lr=0.01)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        z = encode()
        pos_l = (z[pos[0]] * z[pos[1]]).sum(-1)
        neg_l = (z[neg[0]] * z[neg[1]]).sum(-1)
        logits = torch.cat([pos_l, neg_l])
        labels = torch.cat([torch.ones_like(pos_l), torch.zeros_like(neg_l)])
        loss = F.binary_cross_entropy_with_logits(logits, labels, pos_weight=torch.tensor(1.5))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res["losses"] = losses
    res["w1_grad"] = w1.weight.grad
    with torch.no_grad():
        z = encode()
        tp = torch.from_numpy(test_e)
        s_pos = (z[tp[0]] * z[tp[1]]).sum(-1).sigmoid()
        s_neg = (z[neg[0, :3]] * z[neg[1, :3]]).sum(-1).sigmoid()
        res["auc"] = (s_pos[:, None] > s_neg[None]).float().mean() + 0.5 * (
            s_pos[:, None] == s_neg[None]).float().mean()
        res["scores"] = [s_pos, s_neg]
    # mean aggregation three ways: CSR sparse.mm(reduce='mean'), index_reduce_, dense
    A_csr = A.to_sparse_csr()
    mean_csr = torch.sparse.mm(A_csr, x, "mean")
    res["mean_csr"] = mean_csr
    res["amax_csr"] = torch.sparse.mm(A_csr, x, "amax")
    out = torch.zeros(n, d_in).index_reduce_(0, A.indices()[0], x[A.indices()[1]], "mean",
                                             include_self=False)
    res["mean_index_reduce"] = out
    res["mean_dense"] = (A.to_dense() @ x) / deg[:, None]
    xg = x.clone().requires_grad_(True)
    torch.sparse.mm(A_csr, xg, "sum").pow(2).sum().backward()
    res["csr_sum_grad"] = xg.grad
    # per-example propagation of feature batches over the shared adjacency by vmap (PyTorch
    # runs sparse.mm through its per-example fallback, with its warning)
    fb = normal(torch, rng, 3, n, d_in).requires_grad_(True)
    prop = torch.vmap(lambda f: torch.sparse.mm(A_hat, f))(fb)
    prop.pow(2).sum().backward()
    res["vmap_propagate"], res["vmap_propagate_grad"] = prop, fb.grad
    return res


PROGRAMS = [rgcn_program, graphormer_program, tgn_program, gae_link_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 attention / Adam accumulation order over a few steps
        "graphormer_program": (1e-4, 1e-5),
    })
