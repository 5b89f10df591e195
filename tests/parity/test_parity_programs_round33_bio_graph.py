"""Molecular graph generators and property fine tuning written as their reference repositories
write them in torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy
weights: JT-VAE's tree GRU (messages kept in a list, padded neighbour gathers by index_select
and torch.stack), a graph VAE decoding a dense adjacency (triu masks, BCE with pos_weight, node
matching by permutation matrices), and property-predictor fine tuning (frozen encoder by
requires_grad_, param groups, NaN-masked multitask loss by torch.where/nan_to_num,
ReduceLROnPlateau, EMA of weights, best state_dict kept by deepcopy). _fixes pins what they
found."""

import copy

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def jtvae_tree_program(torch):
    """icml18-jtnn GraphGRU / tree message passing over directed edges of a junction tree."""
    rng = np.random.default_rng(0)
    nn, F = torch.nn, torch.nn.functional
    hidden, vocab = 8, 7

    class GraphGRU(nn.Module):
        def __init__(self, input_size, hidden_size, depth):
            super().__init__()
            self.hidden_size = hidden_size
            self.depth = depth
            self.W_z = nn.Linear(input_size + hidden_size, hidden_size)
            self.W_r = nn.Linear(input_size, hidden_size, bias=False)
            self.U_r = nn.Linear(hidden_size, hidden_size)
            self.W_h = nn.Linear(input_size + hidden_size, hidden_size)

        def forward(self, h, x, mess_graph):
            mask = torch.ones(h.size(0), 1)
            mask[0] = 0   # first vector is padding
            for _ in range(self.depth):
                h_nei = _index_select_nd(torch, h, 0, mess_graph)
                sum_h = h_nei.sum(dim=1)
                z_input = torch.cat([x, sum_h], dim=1)
                z = torch.sigmoid(self.W_z(z_input))
                r_1 = self.W_r(x).view(-1, 1, self.hidden_size)
                r_2 = self.U_r(h_nei)
                r = torch.sigmoid(r_1 + r_2)
                gated_h = r * h_nei
                sum_gated_h = gated_h.sum(dim=1)
                h_input = torch.cat([x, sum_gated_h], dim=1)
                pre_h = torch.tanh(self.W_h(h_input))
                h = (1.0 - z) * sum_h + z * pre_h
                h = h * mask
            return h

    # a 4-node tree 0-1, 1-2, 1-3; directed messages 1..6 (0 is padding)
    edges = [(0, 1), (1, 0), (1, 2), (2, 1), (1, 3), (3, 1)]
    fnode = torch.tensor([3, 1, 4, 6])
    fmess = torch.tensor([0] + [u for u, _ in edges])
    mess_graph = []
    for u, v in edges:
        mess_graph.append([i + 1 for i, (a, b) in enumerate(edges) if b == u and a != v])
    mess_graph = [[0, 0]] + [m + [0] * (2 - len(m)) for m in mess_graph]
    mess_graph = torch.tensor(mess_graph, dtype=torch.long)
    node_graph = [[i + 1 for i, (_, b) in enumerate(edges) if b == n] for n in range(4)]
    node_graph = torch.tensor([m + [0] * (3 - len(m)) for m in node_graph])

    embedding = nn.Embedding(vocab, hidden)
    gru = GraphGRU(hidden, hidden, depth=3)
    outputNN = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU())
    pred = nn.Linear(hidden, vocab)
    model = nn.ModuleList([embedding, gru, outputNN, pred])
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)
    res = {"loss": [], "lr": []}
    for _ in range(3):
        messages = torch.zeros(fmess.size(0), hidden)
        fnode_e = embedding(fnode)
        fmess_e = _index_select_nd(torch, fnode_e, 0, fmess)
        messages = gru(messages, fmess_e, mess_graph)
        mess_nei = _index_select_nd(torch, messages, 0, node_graph)
        node_vecs = torch.cat([fnode_e, mess_nei.sum(dim=1)], dim=-1)
        node_vecs = outputNN(node_vecs)
        scores = pred(node_vecs)
        loss = F.cross_entropy(scores, fnode, reduction="sum") / 4
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 50.0)
        opt.step()
        sched.step()
        res["loss"].append(loss.item())
        res["lr"].append(opt.param_groups[0]["lr"])
    res["messages"] = messages
    res["acc"] = (scores.max(dim=-1)[1] == fnode).float().sum().item()
    res["emb_g"] = embedding.weight.grad
    res["Wz_g"] = gru.W_z.weight.grad
    # root vectors gathered per tree with a list of scopes, then torch.stack
    scope = [(0, 2), (2, 2)]
    res["roots"] = torch.stack([node_vecs[st] for st, le in scope], dim=0)
    res["tree_mean"] = torch.stack([node_vecs.narrow(0, st, le).mean(0) for st, le in scope])
    return res


def _index_select_nd(torch, source, dim, index):
    index_size = index.size()
    suffix_dim = source.size()[1:]
    final_size = index_size + suffix_dim
    target = source.index_select(dim, index.view(-1))
    return target.view(final_size)


def graph_vae_program(torch):
    """Simonovsky & Komodakis GraphVAE / Kipf GAE: GCN encoder on a normalised dense adjacency,
    inner-product and MLP decoders, BCE with pos_weight over the upper triangle."""
    rng = np.random.default_rng(1)
    nn, F = torch.nn, torch.nn.functional
    n, f, h, z_dim = 6, 4, 8, 3
    a = (rng.random((n, n)) < 0.4).astype(np.float32)
    a = np.triu(a, 1)
    a = a + a.T
    adj = torch.from_numpy(a)
    x = normal(torch, rng, n, f)
    adj_norm = adj + torch.eye(n)
    deg = adj_norm.sum(1)
    d_inv_sqrt = deg.pow(-0.5)
    d_inv_sqrt[torch.isinf(d_inv_sqrt)] = 0.
    adj_norm = d_inv_sqrt.unsqueeze(1) * adj_norm * d_inv_sqrt.unsqueeze(0)

    class GraphConvolution(nn.Module):
        def __init__(self, i, o, act=F.relu):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(i, o))
            nn.init.xavier_uniform_(self.weight)
            self.act = act

        def forward(self, inp, adj):
            support = torch.mm(inp, self.weight)
            return self.act(torch.spmm(adj, support))

    gc1 = GraphConvolution(f, h)
    gc2 = GraphConvolution(h, z_dim, act=lambda t: t)
    gc3 = GraphConvolution(h, z_dim, act=lambda t: t)
    mlp_dec = nn.Sequential(nn.Linear(z_dim, 16), nn.ReLU(), nn.Linear(16, n * (n - 1) // 2))
    model = nn.ModuleList([gc1, gc2, gc3, mlp_dec])
    fill_(torch, model, rng, 0.4)
    pos_weight = (n * n - adj.sum()) / adj.sum()
    norm = n * n / float((n * n - adj.sum()) * 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    iu = torch.triu_indices(n, n, offset=1)
    res = {"loss": [], "kl": []}
    for _ in range(3):
        hidden1 = gc1(x, adj_norm)
        mu, logvar = gc2(hidden1, adj_norm), gc3(hidden1, adj_norm)
        zz = mu + normal(torch, rng, n, z_dim) * torch.exp(logvar)
        recovered = torch.mm(zz, zz.t())
        cost = norm * F.binary_cross_entropy_with_logits(recovered, adj, pos_weight=pos_weight)
        kld = -0.5 / n * torch.mean(torch.sum(1 + 2 * logvar - mu.pow(2) - logvar.exp().pow(2),
                                              1))
        # GraphVAE: one graph embedding decoded to the upper triangle
        graph_z = mu.mean(0, keepdim=True)
        tri_logits = mlp_dec(graph_z).squeeze(0)
        tri_target = adj[iu[0], iu[1]]
        tri = F.binary_cross_entropy_with_logits(tri_logits, tri_target)
        loss = cost + kld + tri
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["kl"].append(kld.item())
    res["adj_norm"] = adj_norm
    res["rec"] = torch.sigmoid(recovered)
    res["g1"] = gc1.weight.grad
    # rebuild a symmetric adjacency from the triangle, and a permutation-matched target
    with torch.no_grad():
        full = torch.zeros(n, n)
        full[iu[0], iu[1]] = torch.sigmoid(tri_logits)
        full = full + full.t()
        res["sym"] = full
        perm = torch.tensor([2, 0, 1, 5, 3, 4])
        P = torch.eye(n)[perm]
        res["permuted"] = P @ adj @ P.t()
        res["permuted_idx"] = adj[perm][:, perm]
        res["triu_mask"] = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
        res["masked_select"] = torch.sigmoid(recovered).masked_select(res["triu_mask"])
        res["auc_like"] = (torch.sigmoid(recovered)[adj.bool()].mean()
                           - torch.sigmoid(recovered)[~adj.bool()].mean())
    return res


def finetune_program(torch):
    """Pretrained encoder + new head: freeze, unfreeze with a smaller lr group, NaN-masked
    multitask regression/classification, ReduceLROnPlateau on a validation loss, EMA weights
    and the best state_dict kept by deepcopy."""
    rng = np.random.default_rng(2)
    nn, F = torch.nn, torch.nn.functional
    encoder = nn.Sequential(nn.Linear(6, 12), nn.LayerNorm(12), nn.SiLU(), nn.Linear(12, 12),
                            nn.SiLU())
    reg_head = nn.Linear(12, 2)
    cls_head = nn.Linear(12, 3)
    for m in (encoder, reg_head, cls_head):
        fill_(torch, m, rng, 0.3)
    ema = copy.deepcopy(encoder)
    for p in ema.parameters():
        p.requires_grad_(False)
    x = normal(torch, rng, 10, 6)
    y_reg = normal(torch, rng, 10, 2)
    y_reg[rng.random((10, 2)) < 0.3] = float("nan")
    y_cls = torch.from_numpy(rng.integers(0, 2, (10, 3)).astype(np.float32))
    y_cls[torch.from_numpy(rng.random((10, 3)) < 0.25)] = float("nan")
    xv, yv = normal(torch, rng, 4, 6), normal(torch, rng, 4, 2)

    def masked_losses():
        hid = encoder(x)
        reg, cls = reg_head(hid), cls_head(hid)
        m_reg = ~torch.isnan(y_reg)
        reg_loss = F.mse_loss(reg[m_reg], y_reg[m_reg])
        m_cls = torch.isfinite(y_cls)
        bce = F.binary_cross_entropy_with_logits(cls, torch.nan_to_num(y_cls), reduction="none")
        cls_loss = torch.where(m_cls, bce, torch.zeros_like(bce)).sum() / m_cls.sum().clamp(min=1)
        return reg_loss, cls_loss

    res = {"loss": [], "lr": [], "val": [], "trainable": []}
    for p in encoder.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW([{"params": reg_head.parameters()},
                             {"params": cls_head.parameters()},
                             {"params": encoder.parameters(), "lr": 1e-4}],
                            lr=1e-2, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=0,
                                                       threshold=1e-1)
    best, best_state = float("inf"), None
    for epoch in range(4):
        if epoch == 2:
            encoder.requires_grad_(True)
        res["trainable"].append(sum(p.numel() for p in encoder.parameters() if p.requires_grad))
        reg_loss, cls_loss = masked_losses()
        loss = reg_loss + 0.5 * cls_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        with torch.no_grad():
            for pe, p in zip(ema.parameters(), encoder.parameters()):
                pe.mul_(0.9).add_(p.detach(), alpha=0.1)
            val = F.l1_loss(reg_head(encoder(xv)), yv).item()
        sched.step(val)
        if val < best:
            best, best_state = val, copy.deepcopy(reg_head.state_dict())
        res["loss"].append(loss.item())
        res["lr"].append([g["lr"] for g in opt.param_groups])
        res["val"].append(val)
    res["enc_grad_none"] = [p.grad is None for p in encoder.parameters()]
    res["ema"] = ema[0].weight
    reg_head.load_state_dict(best_state)
    res["best_w"] = reg_head.weight
    res["nan_mask_count"] = int(torch.isnan(y_reg).sum())
    res["bad_epochs"] = [sched.state_dict()["num_bad_epochs"]]
    res["sched_best"] = sched.state_dict()["best"]
    with torch.no_grad():
        hid = ema(x)
        res["ema_pred"] = torch.sigmoid(cls_head(hid))
        res["nanmean_target"] = torch.nanmean(y_reg, dim=0)
        res["nan_std"] = torch.sqrt(torch.nanmean((y_reg - torch.nanmean(y_reg, 0)) ** 2, 0))
        res["nansum"] = torch.nansum(y_cls, dim=1)
    return res


PROGRAMS = [jtvae_tree_program, graph_vae_program, finetune_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
