"""Programs from graph learning and normalizing flows, written as such repositories write
them by hand (no torch_geometric), run once with `torch` bound to ember and once to PyTorch
from the same NumPy weights and data: a graph attention network (scatter_reduce softmax,
index_add_, bincount degrees, index_reduce pooling, GraphSAGE through sparse.mm with a
reduction, pygcn's legacy sparse constructor) and RealNVP/Glow flows (affine couplings,
LU-parametrised invertible 1x1 convolutions, slogdet, distributions' log_prob, transforms,
Jacobians by autograd, gradient clipping); and what they found: sparse.mm's reductions,
the legacy and beta sparse warnings, log-determinant gradients of singular matrices."""

import contextlib
import math
import re

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_close, assert_same_error, recorded
from tests.parity._programs import fill_, normal
from tests.parity.test_parity_programs_round9 import assert_same_results

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def graph_attention_program(torch):
    """GAT and GCN layers by hand over an edge_index: per-node softmax by scatter_reduce,
    messages by index_add_, symmetric normalisation by bincount, pooling by index_reduce."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(22)
    res = {}
    num_nodes, in_dim, hidden, heads, num_classes = 9, 5, 4, 2, 3
    # two graphs in one batch; node 8 is isolated before self loops
    src = [0, 1, 1, 2, 3, 4, 4, 5, 6, 7, 0]
    dst = [1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 2]
    edge_index = torch.tensor([src, dst], dtype=torch.long)
    batch = torch.tensor([0, 0, 0, 0, 0, 0, 1, 1, 1])
    x = normal(torch, rng, num_nodes, in_dim)
    y = torch.from_numpy(rng.integers(0, num_classes, num_nodes))
    train_mask = torch.zeros(num_nodes, dtype=torch.bool)
    train_mask[torch.tensor([0, 2, 3, 5, 6, 8])] = True
    test_mask = ~train_mask

    def remove_self_loops(edge_index):
        mask = edge_index[0] != edge_index[1]
        return edge_index[:, mask]

    def add_self_loops(edge_index, num_nodes):
        loop_index = torch.arange(0, num_nodes, dtype=torch.long, device=edge_index.device)
        loop_index = loop_index.unsqueeze(0).repeat(2, 1)
        return torch.cat([edge_index, loop_index], dim=1)

    def degree(index, num_nodes, dtype):
        out = torch.zeros((num_nodes,), dtype=dtype, device=index.device)
        one = torch.ones((index.size(0),), dtype=out.dtype, device=out.device)
        return out.scatter_add_(0, index, one)

    def softmax(src, index, num_nodes):
        expanded = index.unsqueeze(-1).expand_as(src)
        src_max = torch.zeros(num_nodes, src.size(1), dtype=src.dtype).scatter_reduce(
            0, expanded, src.detach(), reduce="amax", include_self=False)
        out = (src - src_max.index_select(0, index)).exp()
        out_sum = torch.zeros(num_nodes, src.size(1), dtype=src.dtype).scatter_add_(
            0, expanded, out) + 1e-16
        return out / out_sum.index_select(0, index)

    class GATConv(nn.Module):
        def __init__(self, in_channels, out_channels, heads, concat=True, dropout=0.6,
                     negative_slope=0.2):
            super().__init__()
            self.heads, self.out_channels, self.concat = heads, out_channels, concat
            self.dropout, self.negative_slope = dropout, negative_slope
            self.lin = nn.Linear(in_channels, heads * out_channels, bias=False)
            self.att_src = nn.Parameter(torch.empty(1, heads, out_channels))
            self.att_dst = nn.Parameter(torch.empty(1, heads, out_channels))
            self.bias = nn.Parameter(torch.empty(heads * out_channels if concat
                                                 else out_channels))
            nn.init.xavier_uniform_(self.att_src)
            nn.init.zeros_(self.bias)

        def forward(self, x, edge_index, return_attention_weights=False):
            H, C = self.heads, self.out_channels
            n = x.size(0)
            x = self.lin(x).view(-1, H, C)
            alpha_src = (x * self.att_src).sum(dim=-1)
            alpha_dst = (x * self.att_dst).sum(dim=-1)
            edge_index = add_self_loops(remove_self_loops(edge_index), n)
            j, i = edge_index
            alpha = alpha_src.index_select(0, j) + alpha_dst.index_select(0, i)
            alpha = F.leaky_relu(alpha, self.negative_slope)
            alpha = softmax(alpha, i, n)
            alpha = F.dropout(alpha, p=self.dropout, training=self.training)
            msg = x.index_select(0, j) * alpha.unsqueeze(-1)
            out = torch.zeros(n, H, C, dtype=x.dtype).index_add_(0, i, msg)
            out = out.view(-1, H * C) if self.concat else out.mean(dim=1)
            out = out + self.bias
            if return_attention_weights:
                return out, (edge_index, alpha)
            return out

    class GCNConv(nn.Module):
        def __init__(self, in_channels, out_channels):
            super().__init__()
            self.lin = nn.Linear(in_channels, out_channels, bias=False)
            self.bias = nn.Parameter(torch.zeros(out_channels))

        def forward(self, x, edge_index):
            row, col = edge_index
            deg = torch.bincount(col, minlength=x.size(0)).to(x.dtype)
            deg_inv_sqrt = deg.pow(-0.5)
            deg_inv_sqrt.masked_fill_(deg_inv_sqrt == float("inf"), 0)
            norm = deg_inv_sqrt[row] * deg_inv_sqrt[col]
            h = self.lin(x)
            out = torch.zeros_like(h).index_add_(0, col, norm.view(-1, 1) * h[row])
            return out + self.bias

    class SAGEConv(nn.Module):
        # PyG's sparse path: the transposed adjacency as CSR, neighbours aggregated by
        # torch.sparse.mm(adj_t, x, reduce)
        def __init__(self, in_channels, out_channels, aggr="mean"):
            super().__init__()
            self.aggr = aggr
            self.lin_l = nn.Linear(in_channels, out_channels)
            self.lin_r = nn.Linear(in_channels, out_channels, bias=False)

        def forward(self, x, adj_t):
            out = torch.sparse.mm(adj_t, x, reduce=self.aggr)
            return self.lin_l(out) + self.lin_r(x)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = GATConv(in_dim, hidden, heads=heads, dropout=0.6)
            self.conv2 = GATConv(hidden * heads, num_classes, heads=1, concat=False,
                                 dropout=0.6)
            self.gcn = GCNConv(in_dim, hidden)
            self.sage = SAGEConv(in_dim, hidden)
            self.sage_max = SAGEConv(in_dim, hidden, aggr="max")
            self.graph_head = nn.Linear(hidden, 2)

        def forward(self, x, edge_index, batch):
            h = F.dropout(x, p=0.6, training=self.training)
            h = F.elu(self.conv1(h, edge_index))
            h = F.dropout(h, p=0.6, training=self.training)
            node_out = self.conv2(h, edge_index)
            g = F.relu(self.gcn(x, edge_index))
            g = g + self.sage(x, adj_t) + self.sage_max(x, adj_t)
            pooled = torch.zeros(int(batch.max()) + 1, g.size(1)).index_reduce_(
                0, batch, g, "mean", include_self=False)
            return F.log_softmax(node_out, dim=-1), self.graph_head(pooled)

    deg = degree(edge_index[1], num_nodes, torch.float)
    res["degree"] = deg
    res["bincount"] = torch.bincount(edge_index[1], minlength=num_nodes)
    dis = deg.pow(-0.5)
    res["inf_count"] = [int(torch.isinf(dis).sum())]
    res["masked"] = dis.masked_fill(dis == float("inf"), 0)
    res["loops"] = add_self_loops(remove_self_loops(edge_index), num_nodes)
    adj = torch.zeros(num_nodes, num_nodes)
    adj.index_put_((edge_index[0], edge_index[1]), torch.ones(edge_index.size(1)),
                   accumulate=True)
    res["dense_adj"] = adj
    sp = torch.sparse_coo_tensor(edge_index, torch.ones(edge_index.size(1)),
                                 (num_nodes, num_nodes)).coalesce()
    res["sparse_mm"] = torch.sparse.mm(sp, x)
    res["sparse_nnz"] = [sp._nnz(), sp.is_coalesced()]
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(edge_index.size(1)),
                                    (num_nodes, num_nodes)).coalesce().to_sparse_csr()
    res["adj_t"] = [adj_t.crow_indices(), adj_t.col_indices()]
    # pygcn's normalised adjacency: scipy-style row normalisation, the legacy constructor
    rowsum = adj.sum(1) + 1
    r_inv = rowsum.pow(-1).flatten()
    r_inv[torch.isinf(r_inv)] = 0.0
    norm_adj = torch.diag(r_inv) @ (adj + torch.eye(num_nodes))
    coo = norm_adj.to_sparse()
    legacy = torch.sparse.FloatTensor(coo.indices(), coo.values(), torch.Size(coo.shape))
    res["pygcn_spmm"] = torch.spmm(legacy, x)
    res["legacy_meta"] = [legacy.type().split(".", 1)[1], str(legacy.layout).rsplit(".", 1)[-1]]

    model = Net()
    fill_(torch, model, rng, 0.4)
    opt = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
    graph_y = torch.tensor([1, 0])
    # training with dropout would draw different masks: run the steps with dropout off
    for m in (model.conv1, model.conv2):
        m.dropout = 0.0
    res["loss"], res["acc"] = [], []
    for epoch in range(4):
        model.eval()  # dropout's F.dropout(training=False)
        opt.zero_grad()
        out, graph_logits = model(x, edge_index, batch)
        loss = F.nll_loss(out[train_mask], y[train_mask])
        loss = loss + F.cross_entropy(graph_logits, graph_y)
        loss.backward()
        opt.step()
        pred = out.argmax(dim=1)
        correct = (pred[test_mask] == y[test_mask]).sum()
        res["acc"].append(int(correct) / int(test_mask.sum()))
        res["loss"].append(loss.item())
    res["att_grad"] = model.conv1.att_src.grad
    res["lin_w"] = model.conv1.lin.weight
    res["gcn_w"] = model.gcn.lin.weight
    res["sage_w"] = [model.sage.lin_l.weight, model.sage_max.lin_l.weight]
    for m in (model.conv1, model.conv2):
        m.dropout = 0.6
    model.eval()
    with torch.no_grad():
        out, graph_logits = model(x, edge_index, batch)
        res["eval_out"] = out
        res["graph_logits"] = graph_logits
        _, (ei, alpha) = model.conv1(x, edge_index, return_attention_weights=True)
        res["alpha"] = alpha
        res["alpha_sums"] = torch.zeros(num_nodes, heads).index_add_(0, ei[1], alpha)
    # masked cross entropy written with ignore_index, and the pooling alternatives
    targets = y.masked_fill(~train_mask, -100)
    res["ce_ignore"] = F.cross_entropy(out, targets, ignore_index=-100)
    res["ce_mask"] = F.cross_entropy(out[train_mask], y[train_mask], reduction="none")
    counts = torch.bincount(batch).clamp(min=1).unsqueeze(-1)
    summed = torch.zeros(2, x.size(1)).index_add_(0, batch, x)
    res["mean_pool"] = summed / counts
    res["mean_pool_scatter"] = torch.zeros(2, x.size(1)).scatter_reduce_(
        0, batch.view(-1, 1).expand_as(x), x, reduce="mean", include_self=False)
    res["max_pool"] = torch.full((2, x.size(1)), float("-inf")).scatter_reduce_(
        0, batch.view(-1, 1).expand_as(x), x, reduce="amax")
    res["add_pool"] = torch.zeros(2, x.size(1)).scatter_add(0, batch.view(-1, 1).expand_as(x), x)
    res["index_reduce_prod"] = torch.ones(2, x.size(1)).index_reduce(0, batch, x, "prod")
    res["index_reduce_amin"] = torch.zeros(2, x.size(1)).index_reduce(0, batch, x, "amin")
    return res


def normalizing_flow_program(torch):
    """RealNVP affine couplings on 2-d data and a Glow step (ActNorm, LU-parametrised
    invertible 1x1 convolution, affine coupling) on images, trained by maximum likelihood
    with clipped gradients; inverses, slogdet/inv/lu_factor, log_prob and sampling."""
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    rng = np.random.default_rng(23)
    res = {}

    class Coupling(nn.Module):
        def __init__(self, dim, mask, hidden=16):
            super().__init__()
            self.register_buffer("mask", mask)
            self.net = nn.Sequential(nn.Linear(dim, hidden), nn.LeakyReLU(),
                                     nn.Linear(hidden, hidden), nn.LeakyReLU(),
                                     nn.Linear(hidden, 2 * dim))
            self.scale = nn.Parameter(torch.ones(dim))

        def _st(self, x_masked):
            s, t = self.net(x_masked).chunk(2, dim=1)
            s = self.scale * torch.tanh(s) * (1 - self.mask)
            return s, t * (1 - self.mask)

        def forward(self, x):
            x_masked = x * self.mask
            s, t = self._st(x_masked)
            y = x_masked + (1 - self.mask) * (x * torch.exp(s) + t)
            return y, s.sum(dim=1)

        def inverse(self, y):
            y_masked = y * self.mask
            s, t = self._st(y_masked)
            x = y_masked + (1 - self.mask) * (y - t) * torch.exp(-s)
            return x, -s.sum(dim=1)

    class RealNVP(nn.Module):
        def __init__(self, masks, prior):
            super().__init__()
            self.prior = prior
            self.layers = nn.ModuleList([Coupling(masks.size(1), m) for m in masks])

        def forward(self, x):
            log_det = x.new_zeros(x.shape[0])
            for layer in self.layers:
                x, ld = layer(x)
                log_det = log_det + ld
            return x, log_det

        def inverse(self, z):
            for layer in reversed(self.layers):
                z, _ = layer.inverse(z)
            return z

        def log_prob(self, x):
            z, log_det = self(x)
            return self.prior.log_prob(z) + log_det

    masks = torch.from_numpy(np.array([[0, 1], [1, 0]] * 3).astype(np.float32))
    prior = D.MultivariateNormal(torch.zeros(2), torch.eye(2))
    flow = RealNVP(masks, prior)
    fill_(torch, flow, rng, 0.4)
    # two moons by hand
    n = 32
    t = rng.uniform(0, np.pi, n)
    moons = np.stack([np.concatenate([np.cos(t[:16]), 1 - np.cos(t[16:])]),
                      np.concatenate([np.sin(t[:16]), 0.5 - np.sin(t[16:])])], 1)
    moons = moons + 0.05 * rng.standard_normal(moons.shape)
    data = torch.from_numpy(moons.astype(np.float32))
    opt = torch.optim.Adam([p for p in flow.parameters() if p.requires_grad], lr=1e-3)
    res["nll"], res["total_norm"] = [], []
    for _ in range(4):
        loss = -flow.log_prob(data).mean()
        opt.zero_grad()
        loss.backward()
        total_norm = torch.nn.utils.clip_grad_norm_(flow.parameters(), max_norm=1.0)
        res["total_norm"].append(total_norm)
        opt.step()
        res["nll"].append(loss.item())
    res["clipped_norm"] = torch.norm(torch.stack([p.grad.detach().norm(2)
                                                  for p in flow.parameters()]), 2)
    torch.nn.utils.clip_grad_value_(flow.parameters(), clip_value=0.05)
    res["clipped_value"] = flow.layers[0].net[0].weight.grad
    with torch.no_grad():
        z, log_det = flow(data)
        res["z"], res["log_det"] = z, log_det
        res["recon"] = flow.inverse(z)
        res["recon_err"] = [bool((flow.inverse(z) - data).abs().max() < 1e-4)]
        z_fixed = normal(torch, rng, 5, 2)
        res["samples"] = flow.inverse(z_fixed)
        drawn = prior.sample((7,))
        res["sample_meta"] = [str(tuple(drawn.shape)), _name(drawn.dtype),
                              str(tuple(prior.sample().shape))]
    diag = D.Normal(torch.zeros(2), torch.ones(2))
    res["normal_lp"] = diag.log_prob(z).sum(-1)
    res["mvn_lp"] = prior.log_prob(z)
    ind = D.Independent(D.Normal(torch.zeros(2), torch.ones(2)), 1)
    res["ind_lp"] = ind.log_prob(z)
    tril = torch.tensor([[1.0, 0.0], [0.4, 0.7]])
    mvn = D.MultivariateNormal(torch.tensor([0.3, -0.2]), scale_tril=tril)
    res["mvn_tril_lp"] = mvn.log_prob(z)
    res["mvn_entropy"] = mvn.entropy()
    res["mvn_cov"] = mvn.covariance_matrix
    res["mvn_prec"] = D.MultivariateNormal(torch.zeros(2),
                                           precision_matrix=mvn.precision_matrix).log_prob(z)
    res["bpd"] = (-flow.log_prob(data).mean() / (2 * math.log(2))).detach()
    # the coupling's log-determinant against autograd's Jacobian, per sample and batched
    layer = flow.layers[0]
    x0 = data[0]
    jac = torch.autograd.functional.jacobian(lambda v: layer(v.unsqueeze(0))[0].squeeze(0), x0)
    res["jac_logdet"] = [torch.linalg.slogdet(jac).logabsdet, layer(x0.unsqueeze(0))[1][0]]
    per_sample = torch.func.vmap(torch.func.jacrev(lambda v: layer(v.unsqueeze(0))[0][0]))
    jacs = per_sample(data[:5].detach())
    res["vmap_logdet"] = [torch.logdet(jacs), layer(data[:5])[1]]
    # the same flow as a TransformedDistribution of torch.distributions' own transforms
    T = D.transforms
    squash = D.TransformedDistribution(
        D.Normal(torch.zeros(2), torch.ones(2)),
        [T.AffineTransform(torch.tensor([0.5, -1.0]), torch.tensor([2.0, 0.3])),
         T.SigmoidTransform()])
    inside = data.sigmoid() * 0.9 + 0.05
    res["squash_lp"] = D.Independent(squash, 1).log_prob(inside)
    chain = T.ComposeTransform([T.AffineTransform(0.0, 2.0), T.TanhTransform(cache_size=1)])
    y = chain(data)
    res["chain"] = [y, chain.log_abs_det_jacobian(data, y), chain.inv(y)]
    gmm = D.MixtureSameFamily(D.Categorical(logits=torch.tensor([0.1, -0.3, 0.5])),
                              D.Independent(D.Normal(torch.tensor([[0.0, 0.0], [1.0, 1.0],
                                                                   [-1.0, 2.0]]),
                                                     torch.tensor([[1.0, 0.5], [0.3, 1.0],
                                                                   [2.0, 1.0]])), 1))
    res["gmm_lp"] = gmm.log_prob(z)

    class ActNorm(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.loc = nn.Parameter(torch.zeros(1, c, 1, 1))
            self.scale = nn.Parameter(torch.ones(1, c, 1, 1))
            self.register_buffer("initialized", torch.tensor(0, dtype=torch.uint8))

        def initialize(self, x):
            with torch.no_grad():
                flatten = x.permute(1, 0, 2, 3).contiguous().view(x.shape[1], -1)
                mean = flatten.mean(1).unsqueeze(1).unsqueeze(2).unsqueeze(3).permute(1, 0, 2, 3)
                std = flatten.std(1).unsqueeze(1).unsqueeze(2).unsqueeze(3).permute(1, 0, 2, 3)
                self.loc.data.copy_(-mean)
                self.scale.data.copy_(1 / (std + 1e-6))

        def forward(self, x):
            _, _, h, w = x.shape
            if self.initialized.item() == 0:
                self.initialize(x)
                self.initialized.fill_(1)
            log_abs = torch.log(torch.abs(self.scale))
            return self.scale * (x + self.loc), h * w * torch.sum(log_abs)

        def reverse(self, y):
            return y / self.scale - self.loc

    class InvConv2dLU(nn.Module):
        def __init__(self, c, weight):
            super().__init__()
            q, _ = torch.linalg.qr(weight)
            w_p, w_l, w_u = torch.linalg.lu(q)
            w_s = torch.diag(w_u)
            w_u = torch.triu(w_u, 1)
            u_mask = torch.triu(torch.ones_like(w_u), 1)
            l_mask = u_mask.T
            self.register_buffer("w_p", w_p)
            self.register_buffer("u_mask", u_mask)
            self.register_buffer("l_mask", l_mask)
            self.register_buffer("s_sign", torch.sign(w_s))
            self.register_buffer("l_eye", torch.eye(l_mask.shape[0]))
            self.w_l = nn.Parameter(w_l)
            self.w_s = nn.Parameter(torch.log(torch.abs(w_s)))
            self.w_u = nn.Parameter(w_u)

        def calc_weight(self):
            weight = self.w_p @ (self.w_l * self.l_mask + self.l_eye) @ (
                (self.w_u * self.u_mask) + torch.diag(self.s_sign * torch.exp(self.w_s)))
            return weight.unsqueeze(2).unsqueeze(3)

        def forward(self, x):
            _, _, h, w = x.shape
            weight = self.calc_weight()
            return F.conv2d(x, weight), h * w * torch.sum(self.w_s)

        def reverse(self, y):
            weight = self.calc_weight()
            return F.conv2d(y, weight.squeeze().inverse().unsqueeze(2).unsqueeze(3))

    class InvConv2d(nn.Module):
        def __init__(self, weight):
            super().__init__()
            q, _ = torch.linalg.qr(weight)
            self.weight = nn.Parameter(q.unsqueeze(2).unsqueeze(3))

        def forward(self, x):
            _, _, h, w = x.shape
            logdet = h * w * torch.slogdet(self.weight.squeeze().double())[1].float()
            return F.conv2d(x, self.weight), logdet

        def reverse(self, y):
            w = self.weight.squeeze()
            lu, pivots = torch.linalg.lu_factor(w)
            eye = torch.eye(w.size(0))
            w_inv = torch.linalg.lu_solve(lu, pivots, eye)
            return F.conv2d(y, w_inv.unsqueeze(2).unsqueeze(3))

    class ZeroConv2d(nn.Module):
        def __init__(self, in_ch, out_ch):
            super().__init__()
            self.conv = nn.Conv2d(in_ch, out_ch, 3, padding=0)
            self.scale = nn.Parameter(torch.zeros(1, out_ch, 1, 1))

        def forward(self, x):
            out = F.pad(x, [1, 1, 1, 1], value=1)
            return self.conv(out) * torch.exp(self.scale * 3)

    class AffineCoupling(nn.Module):
        def __init__(self, c, hidden=8):
            super().__init__()
            self.net = nn.Sequential(nn.Conv2d(c // 2, hidden, 3, padding=1),
                                     nn.ReLU(inplace=True), nn.Conv2d(hidden, hidden, 1),
                                     nn.ReLU(inplace=True), ZeroConv2d(hidden, c))

        def forward(self, x):
            in_a, in_b = x.chunk(2, 1)
            log_s, t = self.net(in_a).chunk(2, 1)
            s = torch.sigmoid(log_s + 2)
            out_b = (in_b + t) * s
            logdet = torch.sum(torch.log(s).view(x.shape[0], -1), 1)
            return torch.cat([in_a, out_b], 1), logdet

        def reverse(self, y):
            out_a, out_b = y.chunk(2, 1)
            log_s, t = self.net(out_a).chunk(2, 1)
            s = torch.sigmoid(log_s + 2)
            return torch.cat([out_a, out_b / s - t], 1)

    def squeeze2d(x):
        b, c, h, w = x.shape
        x = x.view(b, c, h // 2, 2, w // 2, 2)
        x = x.permute(0, 1, 3, 5, 2, 4).contiguous()
        return x.view(b, c * 4, h // 2, w // 2)

    def gaussian_log_p(x, mean, log_sd):
        return -0.5 * math.log(2 * math.pi) - log_sd - 0.5 * (x - mean) ** 2 / torch.exp(
            2 * log_sd)

    c = 4
    w0 = normal(torch, rng, c, c)
    actnorm, inv_lu, inv_plain, coupling = (ActNorm(c), InvConv2dLU(c, w0), InvConv2d(w0),
                                           AffineCoupling(c))
    fill_(torch, [*coupling.parameters()], rng, 0.3)
    res["lu_parts"] = [inv_lu.w_p, inv_lu.w_l, inv_lu.w_s, inv_lu.w_u]
    res["weights_equal"] = (inv_lu.calc_weight() - inv_plain.weight).abs().max().detach()
    images = torch.from_numpy(rng.uniform(0, 1, (3, 1, 8, 8)).astype(np.float32))
    n_bins = 2.0 ** 5
    x = squeeze2d(images - 0.5 + torch.from_numpy(
        rng.uniform(0, 1 / n_bins, (3, 1, 8, 8)).astype(np.float32)))
    res["squeezed"] = x
    modules = [actnorm, inv_lu, coupling, inv_plain]
    glow_opt = torch.optim.Adam([p for m in modules for p in m.parameters()], lr=1e-2)
    res["glow_loss"], res["logdets"] = [], []
    n_pixel = 8 * 8
    for _ in range(3):
        out, logdet = x, 0
        for m in modules:
            out, det = m(out)
            logdet = logdet + det
        log_p = gaussian_log_p(out, torch.zeros_like(out), torch.zeros_like(out))
        log_p = log_p.view(3, -1).sum(1)
        loss = -math.log(n_bins) * n_pixel + logdet + log_p
        loss = (-loss / (math.log(2) * n_pixel)).mean()
        glow_opt.zero_grad()
        loss.backward()
        norm = nn.utils.clip_grad_norm_([p for m in modules for p in m.parameters()], 5.0,
                                        norm_type=2.0, error_if_nonfinite=True)
        glow_opt.step()
        res["glow_loss"].append(loss.item())
        res["logdets"].append(logdet.detach())
        res.setdefault("glow_norm", []).append(norm.item())
    res["initialized"] = [int(actnorm.initialized)]
    res["actnorm"] = [actnorm.loc.detach(), actnorm.scale.detach()]
    res["w_s_grad"] = inv_lu.w_s.grad
    res["w_l_grad"] = inv_lu.w_l.grad
    res["plain_grad"] = inv_plain.weight.grad
    with torch.no_grad():
        y, ld_plain = inv_plain(x)
        res["plain_logdet"] = ld_plain
        res["plain_inverse"] = inv_plain.reverse(y)
        sign, logabs = torch.linalg.slogdet(inv_plain.weight.squeeze())
        res["slogdet"] = [sign, logabs]
        res["det_meta"] = [_name(torch.slogdet(inv_plain.weight.squeeze().double())[1].dtype)]
        out = x
        for m in modules:
            out, _ = m(out)
        back = out
        for m in reversed(modules):
            back = m.reverse(back)
        res["glow_inverse_err"] = [bool((back - x).abs().max() < 1e-4)]
        res["glow_out"] = out
    # slogdet's gradient is inv(W).T, as Glow's plain convolution relies on
    w = inv_plain.weight.detach().squeeze().clone().requires_grad_(True)
    torch.linalg.slogdet(w)[1].backward()
    res["slogdet_grad"] = [w.grad, torch.linalg.inv(w.detach()).T]
    return res


PROGRAMS = [graph_attention_program, normalizing_flow_program]


@pytest.mark.filterwarnings("ignore::UserWarning")     # the beta and deprecation notes
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    assert_same_results(program(ember), program(torch), rtol=2e-4, atol=2e-5)


# --- what the programs found ----------------------------------------------------------------

def _warnings(lib, fn):
    """The (category, message) of each warning ``fn(lib)`` raises, PyTorch's C++ source
    location dropped, its errors ignored."""
    _, caught = recorded(fn, lib)
    return [(kind, re.sub(r" \(Triggered internally at .*\)$", "", text))
            for kind, text in caught]


@contextlib.contextmanager
def _warn_always(lib):
    """Warnings PyTorch gives once per process given every time (set_warn_always)."""
    saved = lib.is_warn_always_enabled()
    lib.set_warn_always(True)
    try:
        yield
    finally:
        lib.set_warn_always(saved)


@pytest.mark.parametrize("form", ["indices, values, size", "indices, values", "sizes", "Size",
                                  "nothing"])
def test_legacy_sparse_constructors_warn_as_torch(form):
    """pygcn's torch.sparse.FloatTensor(indices, values, shape) and its other forms warn that
    they are deprecated (once per form and process: every time under set_warn_always)."""
    def run(lib):
        indices, values = lib.tensor([[0, 1, 1], [2, 0, 2]]), lib.tensor([3.0, 4.0, 5.0])
        args = {"indices, values, size": (indices, values, lib.Size([2, 3])),
                "indices, values": (indices, values), "sizes": (2, 3),
                "Size": (lib.Size([2, 3]),), "nothing": ()}[form]
        out = lib.sparse.FloatTensor(*args)
        return tuple(out.shape), str(out.dtype).rsplit(".")[-1], out._nnz()

    with _warn_always(ember), _warn_always(torch):
        ours, theirs = recorded(run, ember), recorded(run, torch)
    strip = [(k, re.sub(r" \(Triggered internally at .*\)$", "", m)) for k, m in theirs[1]]
    assert ours == (theirs[0], strip) and strip


def test_legacy_sparse_constructor_refuses_a_plain_sequence():
    assert_same_error(lambda lib, size: lib.sparse.FloatTensor(size), lambda lib: (2, 3))
    assert_same_error(lambda lib, size: lib.sparse.DoubleTensor(size), lambda lib: [2, 3])


@pytest.mark.parametrize("convert", ["to_sparse_csr", "to_sparse_bsc"])
def test_compressed_sparse_tensors_warn_they_are_beta(convert):
    """PyTorch's first compressed sparse tensor of a process warns that the layout is in beta
    (naming that layout)."""
    def run(lib):
        x = lib.eye(2)
        return getattr(x, convert)() if convert == "to_sparse_csr" else x.to_sparse_bsc((1, 1))

    with _warn_always(ember), _warn_always(torch):
        ours, theirs = _warnings(ember, run), _warnings(torch, run)
    assert theirs and ours == theirs


def _csr_product(lib, reduce, dtype="float32"):
    dense = lib.tensor([[1.0, 1.0, 0.0, 0.5], [2.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0],
                        [0.0, -1.5, 0.0, 3.0]])
    adj = dense.to(getattr(lib, dtype)).to_sparse_csr().requires_grad_()
    x = lib.tensor([[3.0, 1.0], [3.0, 2.0], [6.0, 1.0], [-0.5, 4.0]],
                   dtype=getattr(lib, dtype), requires_grad=True)
    out = lib.sparse.mm(adj, x, reduce)
    out.backward(lib.tensor([[1.0, 10.0], [100.0, 1000.0], [7.0, 7.0], [0.5, -2.0]],
                            dtype=out.dtype))
    return out, x.grad, adj.grad, type(out.grad_fn).__name__


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin", "max", "min"])
def test_sparse_mm_reduces_csr_rows_as_torch(reduce):
    """torch.sparse.mm(csr, dense, reduce): rows without entries give 0, ties send the
    gradient to the row's first entry, a CSR leaf gets a CSR gradient."""
    ours, theirs = _csr_product(ember, reduce), _csr_product(torch, reduce)
    for got, expected in zip(ours[:2], theirs[:2]):
        assert_close(got, expected, rtol=1e-6, same_dtype=True)
    assert ours[2].layout is ember.sparse_csr and theirs[2].layout is torch.sparse_csr
    assert_close(ours[2].values(), theirs[2].values(), rtol=1e-6)
    assert_close(ours[2].col_indices(), theirs[2].col_indices())
    assert ours[3] == theirs[3] == "SparseMmReduceImplBackward0"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
@pytest.mark.parametrize("reduce", ["mean", "amax"])
def test_sparse_mm_reduce_in_other_float_dtypes(dtype, reduce):
    """16-bit products reduce in float32 (PyTorch's kernel rounds its accumulator to the
    dtype after each entry, ember once at the end: one unit in the last place apart)."""
    ulp = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float64": 1e-12}[dtype]
    ours, theirs = _csr_product(ember, reduce, dtype), _csr_product(torch, reduce, dtype)
    for got, expected in [*zip(ours[:2], theirs[:2]), (ours[2].values(), theirs[2].values())]:
        assert str(got.dtype).rsplit(".")[-1] == dtype
        assert_close(got.float(), expected.float(), rtol=ulp, atol=ulp)


@pytest.mark.parametrize("case", ["dense", "coo", "csc", "sparse other", "bad reduce", "prod",
                                  "rows", "vector", "dtypes", "integer"])
def test_sparse_mm_reduce_errors_as_torch(case):
    def call(lib, a):
        d = lib.tensor([[0.0, 1.0, 2.0], [0.0, 0.0, 0.0], [3.0, 0.0, 4.0]])
        x = lib.arange(6.0).view(3, 2)
        csr = d.to_sparse_csr()
        args = {"dense": (d, x, "mean"), "coo": (d.to_sparse(), x, "sum"),
                "csc": (d.to_sparse_csc(), x, "mean"), "sparse other": (csr, csr, "mean"),
                "bad reduce": (csr, x, "median"), "prod": (csr, x, "prod"),
                "rows": (csr, x[:2], "mean"), "vector": (csr, x[:, 0], "amax"),
                "dtypes": (csr, x.double(), "mean"),
                "integer": (d.long().to_sparse_csr(), x.long(), "sum")}[case]
        return lib.sparse.mm(*args)

    def first_sentence(lib):
        return None

    if case in ("dense", "coo"):        # PyTorch's dispatcher error goes on about builds
        def head(text):
            return text.split(" backend")[0]
        ours = recorded(lambda lib: call(lib, None), ember, message=head)
        theirs = recorded(lambda lib: call(lib, None), torch, message=head)
        assert ours[0] == theirs[0] and ours[0][0] == "NotImplementedError"
    else:
        assert_same_error(call, first_sentence)


# (Every elimination multiplier a power of two, of A and of A^T: a matrix such as
# [[1, 2, 3], [2, 4, 6], [1, 0, 1]] leaves PyTorch's LU an exact zero pivot on one CPU and
# a rounding residue on another, so its gradient is infinities on one machine and ~5.6e6 on another)
@pytest.mark.parametrize("matrix", [[[1.0, 2.0], [2.0, 4.0]], [[0.0, 0.0], [0.0, 0.0]],
                                    [[4.0, 2.0, 2.0], [2.0, 1.0, 1.0], [1.0, 0.0, 1.0]],
                                    [[0.0, 1.0], [0.0, 0.0]]])
@pytest.mark.parametrize("fn", ["slogdet", "logdet"])
def test_log_determinant_gradient_of_a_singular_matrix(matrix, fn):
    """A singular matrix's log-determinant has a gradient of infinities and NaNs in PyTorch
    (it solves A^H X = I), where ember raised linalg.inv's singular-matrix error."""
    def grad(lib):
        a = lib.tensor(matrix, requires_grad=True)
        value = lib.linalg.slogdet(a).logabsdet if fn == "slogdet" else lib.logdet(a)
        return lib.autograd.grad(value, a)[0]

    ours, theirs = grad(ember).numpy(), grad(torch).numpy()
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


@pytest.mark.parametrize("case", ["complex", "real transposed", "real sliced", "nan",
                                  "batch"])
def test_log_determinant_gradient_follows_torch_factorization(case):
    """PyTorch takes the gradient from the LU factors its forward keeps: of A^T for a
    C-contiguous real A, else of A (complex, or laid out otherwise), and a singular matrix's
    infinities and NaNs fall where that factorization puts them; a matrix holding a NaN
    gives only NaNs. (Solving A^H X = I instead differs for all but C-contiguous real A.)"""
    wide = [[-2.0, 0.0, 0.0], [-4.0, -4.0, -4.0], [4.0, 4.0, 4.0]]

    def grad(lib):
        if case == "complex":
            a = lib.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]],
                           dtype=lib.complex128) * (1 + 0.5j)
            a.requires_grad_()
            leaf = a
        elif case == "real transposed":
            leaf = lib.tensor(wide, dtype=lib.float64).mT.contiguous().requires_grad_()
            a = leaf.mT
        elif case == "real sliced":
            leaf = lib.zeros(3, 6, dtype=lib.float64)
            leaf[:, ::2] = lib.tensor(wide, dtype=lib.float64)
            leaf.requires_grad_()
            a = leaf[:, ::2]
        elif case == "nan":
            leaf = a = lib.tensor([[float("nan"), 1.0], [1.0, 2.0]], requires_grad=True)
        else:                                   # a batch, with a weight of 0 on the singular
            leaf = a = lib.tensor([[[2.0, 1.0], [0.5, 3.0]], [[1.0, 2.0], [2.0, 4.0]],
                                   [[0.0, 1.0], [0.0, 0.0]]], requires_grad=True)
        logabsdet = lib.linalg.slogdet(a).logabsdet
        weights = lib.tensor([1.0, 0.0, 2.0])[:logabsdet.numel()].reshape(logabsdet.shape)
        return lib.autograd.grad((logabsdet * weights).sum(), leaf)[0].detach().numpy()

    ours, theirs = grad(ember), grad(torch)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


@pytest.mark.parametrize("fn", ["slogdet", "logdet"])
def test_log_determinant_gradient_with_create_graph(fn):
    """Under create_graph PyTorch solves A^H X = g I differentiably: a singular matrix raises
    linalg.solve's error, a nonsingular one has the second derivative of the closed form."""
    def first(lib, a):
        value = lib.linalg.slogdet(a).logabsdet if fn == "slogdet" else lib.logdet(a)
        return lib.autograd.grad(value, a, create_graph=True)[0]

    singular = [recorded(first, lib, lib.tensor([[1.0, 2.0], [2.0, 4.0]], requires_grad=True))[0]
                for lib in (ember, torch)]      # (ember keeps this message's "torch.")
    assert singular[0] == singular[1] == (
        "_LinAlgError", "torch.linalg.solve: The solver failed because the input matrix is "
                        "singular.")
    rows = [[2.0, 1.0, 0.0], [0.5, 3.0, 1.0], [0.0, -1.0, 1.5]]
    results = []
    for lib in (ember, torch):
        a = lib.tensor(rows, dtype=lib.float64, requires_grad=True)
        g = first(lib, a)
        results.append((g.detach().numpy(), lib.autograd.grad((g * g).sum(), a)[0].numpy(),
                        type(g.grad_fn).__name__))
    ours, theirs = results
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-10)
    assert ours[2] == theirs[2] == "LinalgSolveExBackward0"
