"""Molecular and geometric graph networks written the way plain-PyTorch molecular-ML repositories
write them (no torch_geometric), run once with `torch` bound to ember and once to PyTorch from the
same NumPy data: SchNet (radius graph from cdist + mask + nonzero, Gaussian RBF, cosine cutoff,
continuous-filter convolution aggregated with index_add_, shifted softplus) trained on energies
and forces from ``-autograd.grad(energy, pos, create_graph=True)``; DimeNet-lite (triplets built
with repeat_interleave, angles from atan2 of cross and dot); GIN and PNA (scatter_reduce with
sum/mean/amax/amin, include_self=False, log degree scalers); an MPNN with an edge network (bmm of
per-edge matrices) and segment-max pooling; NequIP-lite (real spherical harmonics l<=2 by hand,
tensor products by einsum) with forces. _molecules_fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _molecules(torch, rng, sizes=(5, 4, 6)):
    """A batch of molecules: positions, atomic numbers, batch vector and per-molecule offsets."""
    n = sum(sizes)
    pos = torch.from_numpy((rng.standard_normal((n, 3)) * 1.1).astype(np.float32))
    z = torch.from_numpy(rng.integers(1, 5, size=n).astype(np.int64))
    batch = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    ptr = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(torch.tensor(sizes), 0)])
    return pos, z, batch, ptr


def _radius_graph(torch, pos, batch, cutoff):
    """Edges (row, col) between distinct atoms of one molecule closer than ``cutoff``."""
    dist = torch.cdist(pos, pos)
    same = batch.unsqueeze(0) == batch.unsqueeze(1)
    mask = (dist < cutoff) & same & ~torch.eye(pos.size(0), dtype=torch.bool)
    row, col = mask.nonzero(as_tuple=True)
    return torch.stack([row, col], dim=0)


def schnet_program(torch):
    """SchNet with energy + force training: the radius graph is built under no_grad, distances
    recomputed from pos (which requires grad) by gather + norm, RBF expansion and cosine
    cutoff, cfconv messages index_add_-ed into atoms, energies summed per molecule with
    index_add, forces by autograd.grad with create_graph, Adam on an energy+force loss."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2701)
    pos0, z, batch, ptr = _molecules(torch, rng)
    hidden, n_rbf, cutoff = 8, 6, 2.5
    n_mol = ptr.numel() - 1

    class ShiftedSoftplus(nn.Module):
        def __init__(self):
            super().__init__()
            self.shift = math.log(2.0)

        def forward(self, x):
            return F.softplus(x) - self.shift

    class GaussianSmearing(nn.Module):
        def __init__(self, start, stop, num):
            super().__init__()
            offset = torch.linspace(start, stop, num)
            self.coeff = -0.5 / (offset[1] - offset[0]).item() ** 2
            self.register_buffer("offset", offset)

        def forward(self, dist):
            dist = dist.view(-1, 1) - self.offset.view(1, -1)
            return torch.exp(self.coeff * torch.pow(dist, 2))

    class CFConv(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin1 = nn.Linear(hidden, hidden, bias=False)
            self.lin2 = nn.Linear(hidden, hidden)
            self.mlp = nn.Sequential(nn.Linear(n_rbf, hidden), ShiftedSoftplus(),
                                     nn.Linear(hidden, hidden))

        def forward(self, x, edge_index, edge_weight, edge_attr):
            C = 0.5 * (torch.cos(edge_weight * math.pi / cutoff) + 1.0)
            W = self.mlp(edge_attr) * C.view(-1, 1)
            x = self.lin1(x)
            msg = x[edge_index[1]] * W
            out = torch.zeros_like(x).index_add_(0, edge_index[0], msg)
            return self.lin2(out)

    class SchNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(10, hidden, padding_idx=0)
            self.rbf = GaussianSmearing(0.0, cutoff, n_rbf)
            self.convs = nn.ModuleList([CFConv() for _ in range(2)])
            self.act = ShiftedSoftplus()
            self.lin1 = nn.Linear(hidden, hidden // 2)
            self.lin2 = nn.Linear(hidden // 2, 1)

        def forward(self, z, pos, batch):
            with torch.no_grad():
                edge_index = _radius_graph(torch, pos, batch, cutoff)
            row, col = edge_index
            edge_weight = (pos[row] - pos[col]).norm(dim=-1)
            edge_attr = self.rbf(edge_weight)
            h = self.embedding(z)
            for conv in self.convs:
                h = h + self.act(conv(h, edge_index, edge_weight, edge_attr))
            h = self.lin2(self.act(self.lin1(h)))
            energy = torch.zeros(n_mol, 1).index_add(0, batch, h)
            return energy.squeeze(-1), edge_index

    model = SchNet()
    fill_(torch, model, rng)
    e_ref = torch.from_numpy(rng.standard_normal(n_mol).astype(np.float32))
    f_ref = normal(torch, rng, pos0.size(0), 3)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    res = {"losses": []}
    for _ in range(3):
        pos = pos0.clone().requires_grad_(True)
        energy, edge_index = model(z, pos, batch)
        forces = -torch.autograd.grad(energy, pos, grad_outputs=torch.ones_like(energy),
                                      create_graph=True)[0]
        loss = F.mse_loss(energy, e_ref) + 10.0 * F.mse_loss(forces, f_ref)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["edge_index"] = edge_index
    res["energy"], res["forces"] = energy.detach(), forces.detach()
    res["forces_grad_fn"] = [type(forces.grad_fn).__name__]
    res["params"] = list(model.parameters())
    return res


def dimenet_program(torch):
    """DimeNet-lite: triplets k->j->i built from the radius graph with repeat_interleave over
    in-degrees, angles atan2(|a x b|, a.b), a spherical-Bessel-like basis of sin(n pi d/c)/d
    times cos(l angle), messages scattered with scatter_add_, forces by autograd.grad."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2702)
    pos0, z, batch, ptr = _molecules(torch, rng, sizes=(4, 5))
    cutoff, n_rad, n_ang, hidden = 2.6, 4, 3, 6
    n = pos0.size(0)

    def triplets(edge_index, num_nodes):
        row, col = edge_index  # j -> i as (col, row)
        deg = torch.bincount(row, minlength=num_nodes)
        # for every edge j->i (col=j, row=i), all edges k->j (row=j)
        order = torch.argsort(row, stable=True)
        starts = torch.cumsum(deg, 0) - deg
        n_trip = deg[col]
        idx_ji = torch.arange(row.numel()).repeat_interleave(n_trip)
        first = (torch.cumsum(n_trip, 0) - n_trip).repeat_interleave(n_trip)
        local = torch.arange(int(n_trip.sum())) - first
        idx_kj = order[starts[col].repeat_interleave(n_trip) + local]
        idx_i, idx_j, idx_k = row[idx_ji], col[idx_ji], col[idx_kj]
        keep = idx_i != idx_k
        return idx_i[keep], idx_j[keep], idx_k[keep], idx_kj[keep], idx_ji[keep]

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(6, hidden)
            self.edge_lin = nn.Linear(2 * hidden + n_rad, hidden)
            self.sbf_lin = nn.Linear(n_rad * n_ang, hidden, bias=False)
            self.out = nn.Linear(hidden, 1)
            self.freq = nn.Parameter(torch.arange(1, n_rad + 1).float() * math.pi)

        def forward(self, z, pos, edge_index):
            row, col = edge_index
            i, j, k, idx_kj, idx_ji = triplets(edge_index, pos.size(0))
            dist = (pos[row] - pos[col]).pow(2).sum(dim=-1).sqrt()
            rbf = torch.sin(self.freq * dist.unsqueeze(-1) / cutoff) / dist.unsqueeze(-1)
            pos_ji, pos_kj = pos[j] - pos[i], pos[k] - pos[j]
            a = (pos_ji * pos_kj).sum(dim=-1)
            b = torch.cross(pos_ji, pos_kj, dim=1).norm(dim=-1)
            angle = torch.atan2(b, a)
            cbf = torch.stack([torch.cos(m * angle) for m in range(n_ang)], dim=1)
            sbf = (rbf[idx_kj].unsqueeze(-1) * cbf.unsqueeze(1)).view(-1, n_rad * n_ang)
            h = self.emb(z)
            m = F.silu(self.edge_lin(torch.cat([h[row], h[col], rbf], dim=-1)))
            t = m[idx_kj] * self.sbf_lin(sbf)
            m = m + torch.zeros_like(m).scatter_add_(0, idx_ji.unsqueeze(-1).expand_as(t), t)
            node = torch.zeros(pos.size(0), hidden).index_add_(0, row, m)
            return self.out(node).sum(), angle

    model = Net()
    fill_(torch, model, rng)
    with torch.no_grad():
        model.freq.copy_(torch.arange(1, n_rad + 1).float() * math.pi)
    f_ref = normal(torch, rng, n, 3)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=1e-2)
    edge_index = _radius_graph(torch, pos0, batch, cutoff)
    res = {"losses": [], "edges": edge_index}
    for _ in range(3):
        pos = pos0.clone().requires_grad_()
        energy, angle = model(z, pos, edge_index)
        forces = -torch.autograd.grad(energy, pos, create_graph=True)[0]
        loss = (energy - 1.0) ** 2 + (forces - f_ref).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        res["losses"].append(loss.item())
    res["angle"], res["forces"] = angle.detach(), forces.detach()
    res["params"] = list(model.parameters())
    return res


def gin_pna_program(torch):
    """GIN with eps and sum aggregation by scatter_reduce, then a PNA layer: mean/max/min/std
    aggregators by scatter_reduce(include_self=False), degree scalers with log(deg + 1)
    against the training-set average, global mean pooling by index_add over offsets, SGD
    with momentum and a StepLR."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2703)
    sizes = (5, 3, 6)
    n = sum(sizes)
    batch = torch.repeat_interleave(torch.arange(3), torch.tensor(sizes))
    src, dst = [], []
    start = 0
    for s in sizes:
        for a in range(s):
            for b in range(s):
                if a != b and rng.random() < 0.5:
                    src.append(start + a)
                    dst.append(start + b)
        start += s
    edge_index = torch.tensor([src, dst])
    x0 = normal(torch, rng, n, 4)
    y = torch.tensor([0, 1, 1])
    hidden = 6

    class GINConv(nn.Module):
        def __init__(self, dim_in):
            super().__init__()
            self.eps = nn.Parameter(torch.zeros(1))
            self.mlp = nn.Sequential(nn.Linear(dim_in, hidden), nn.BatchNorm1d(hidden),
                                     nn.ReLU(), nn.Linear(hidden, hidden))

        def forward(self, x, edge_index):
            s, d = edge_index
            agg = x.new_zeros(x.shape).scatter_reduce(
                0, d.view(-1, 1).expand(-1, x.size(1)), x[s], reduce="sum")
            return self.mlp((1 + self.eps) * x + agg)

    class PNAConv(nn.Module):
        def __init__(self, avg_log):
            super().__init__()
            self.avg_log = avg_log
            self.post = nn.Linear(hidden * 4 * 3 + hidden, hidden)

        def forward(self, x, edge_index):
            s, d = edge_index
            idx = d.view(-1, 1).expand(-1, x.size(1))
            msg = x[s]
            outs = []
            for red in ("mean", "amax", "amin"):
                outs.append(torch.zeros_like(x).scatter_reduce(0, idx, msg, reduce=red,
                                                               include_self=False))
            mean_sq = torch.zeros_like(x).scatter_reduce(0, idx, msg * msg, reduce="mean",
                                                         include_self=False)
            std = torch.sqrt(torch.relu(mean_sq - outs[0] ** 2) + 1e-5)
            agg = torch.cat(outs + [std], dim=-1)
            deg = torch.bincount(d, minlength=x.size(0)).clamp(min=1).to(x.dtype)
            log_deg = torch.log(deg + 1).unsqueeze(-1)
            amp, att = log_deg / self.avg_log, self.avg_log / log_deg
            return self.post(torch.cat([x, agg, agg * amp, agg * att], dim=-1))

    class Net(nn.Module):
        def __init__(self, avg_log):
            super().__init__()
            self.gin = GINConv(4)
            self.pna = PNAConv(avg_log)
            self.head = nn.Linear(hidden, 2)

        def forward(self, x, edge_index, batch):
            h = F.relu(self.gin(x, edge_index))
            h = F.relu(self.pna(h, edge_index))
            counts = torch.bincount(batch).unsqueeze(-1).float()
            pooled = torch.zeros(int(batch.max()) + 1, hidden).index_add_(0, batch, h) / counts
            return self.head(pooled)

    deg = torch.bincount(edge_index[1], minlength=n)
    avg_log = torch.log(deg.float() + 1).mean().item()
    model = Net(avg_log)
    fill_(torch, model, rng)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    res = {"losses": [], "lrs": []}
    for _ in range(4):
        model.train()
        loss = F.cross_entropy(model(x0, edge_index, batch), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
        res["lrs"].append(sched.get_last_lr()[0])
    model.eval()
    with torch.no_grad():
        res["eval_logits"] = model(x0, edge_index, batch)
    res["eps_grad"] = model.gin.eps.grad
    res["params"] = list(model.parameters())
    res["buffers"] = [b.float() for b in model.buffers()]
    return res


def mpnn_program(torch):
    """MPNN (Gilmer et al.) with an edge network: per-edge hidden x hidden matrices from an
    MLP over bond features, messages by bmm, index_add aggregation, a GRU update, and
    global pooling by segment max (scatter_reduce amax, include_self=False) plus a
    segment sum; the loss is L1 on a per-molecule target, RMSprop and gradient clipping."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2704)
    pos, z, batch, ptr = _molecules(torch, rng, sizes=(4, 6, 3))
    hidden, n_bond = 5, 3
    edge_index = _radius_graph(torch, pos, batch, 2.4)
    e = edge_index.size(1)
    bond = normal(torch, rng, e, n_bond)
    target = normal(torch, rng, 3, 1)

    class EdgeNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(n_bond, 16), nn.ReLU(),
                                     nn.Linear(16, hidden * hidden))

        def forward(self, h, edge_index, bond):
            W = self.net(bond).view(-1, hidden, hidden)
            msg = torch.bmm(W, h[edge_index[1]].unsqueeze(-1)).squeeze(-1)
            return h.new_zeros(h.shape).index_add(0, edge_index[0], msg)

    class MPNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(6, hidden)
            self.edge = EdgeNetwork()
            self.gru = nn.GRU(hidden, hidden)
            self.readout = nn.Linear(2 * hidden, 1)

        def forward(self, z, edge_index, bond, batch):
            h = self.emb(z)
            hid = h.unsqueeze(0)
            for _ in range(2):
                m = F.relu(self.edge(h, edge_index, bond))
                out, hid = self.gru(m.unsqueeze(0), hid)
                h = out.squeeze(0)
            n_mol = int(batch.max()) + 1
            idx = batch.unsqueeze(-1).expand(-1, hidden)
            h_max = h.new_full((n_mol, hidden), float("-inf")).scatter_reduce(
                0, idx, h, reduce="amax", include_self=False)
            h_sum = h.new_zeros(n_mol, hidden).index_add_(0, batch, h)
            return self.readout(torch.cat([h_max, h_sum], dim=1))

    model = MPNN()
    fill_(torch, model, rng)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-2, alpha=0.9)
    res = {"losses": [], "norms": []}
    for _ in range(3):
        loss = F.l1_loss(model(z, edge_index, bond, batch), target)
        opt.zero_grad()
        loss.backward()
        res["norms"].append(nn.utils.clip_grad_norm_(model.parameters(), 1.0).item())
        opt.step()
        res["losses"].append(loss.item())
    res["params"] = list(model.parameters())
    return res


def _real_sh(torch, vec):
    """Real spherical harmonics l = 0, 1, 2 of unit vectors (component normalisation)."""
    x, y, z = vec.unbind(-1)
    s3, s15, s5 = math.sqrt(3.0), math.sqrt(15.0), math.sqrt(5.0)
    sh0 = torch.ones_like(x).unsqueeze(-1)
    sh1 = s3 * torch.stack([x, y, z], dim=-1)
    sh2 = torch.stack([s15 * x * y, s15 * y * z, s5 / 2 * (3 * z ** 2 - 1),
                       s15 * x * z, s15 / 2 * (x ** 2 - y ** 2)], dim=-1)
    return sh0, sh1, sh2


def nequip_program(torch):
    """NequIP-lite: edge vectors -> real spherical harmonics l<=2 written out by hand, a radial
    MLP of a Bessel basis gating each l, tensor products of scalar features with the
    harmonics by einsum, invariants from the norms of the l=1 and l=2 parts, energies summed
    per molecule, forces from autograd.grad with create_graph, Adam with an energy+force
    loss; also checks the energy is rotation-invariant and forces rotate with the input."""
    nn = torch.nn
    rng = np.random.default_rng(2705)
    pos0, z, batch, ptr = _molecules(torch, rng, sizes=(4, 5))
    cutoff, n_basis, mul = 2.8, 4, 3
    n_mol = ptr.numel() - 1
    edge_index = _radius_graph(torch, pos0, batch, cutoff)
    q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    rot = torch.from_numpy(q.astype(np.float32))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.radial = nn.Sequential(nn.Linear(n_basis, 8), nn.SiLU(), nn.Linear(8, 3 * mul))
            self.w0 = nn.Parameter(torch.empty(mul, mul))
            self.w1 = nn.Parameter(torch.empty(mul, mul))
            self.w2 = nn.Parameter(torch.empty(mul, mul))

        def forward(self, h, pos, edge_index):
            src, dst = edge_index
            vec = pos[src] - pos[dst]
            r = torch.linalg.norm(vec, dim=-1, keepdim=True)
            n = torch.arange(1, n_basis + 1, dtype=pos.dtype)
            basis = math.sqrt(2.0 / cutoff) * torch.sin(n * math.pi * r / cutoff) / r
            env = torch.where(r < cutoff, 0.5 * (torch.cos(math.pi * r / cutoff) + 1),
                              torch.zeros_like(r))
            R = self.radial(basis * env).view(-1, 3, mul)
            sh0, sh1, sh2 = _real_sh(torch, vec / r)
            hs = h[src]
            m0 = torch.einsum("ec,cd,e,ei->edi", hs, self.w0, R[:, 0, 0], sh0)
            m1 = torch.einsum("ec,cd,ed,ei->edi", hs, self.w1, R[:, 1], sh1)
            m2 = torch.einsum("ec,cd,ed,ei->edi", hs, self.w2, R[:, 2], sh2)
            n_nodes = h.size(0)
            a0 = torch.zeros(n_nodes, mul, 1).index_add_(0, dst, m0)
            a1 = torch.zeros(n_nodes, mul, 3).index_add_(0, dst, m1)
            a2 = torch.zeros(n_nodes, mul, 5).index_add_(0, dst, m2)
            inv = torch.cat([a0.squeeze(-1), (a1 * a1).sum(-1), torch.linalg.vector_norm(
                a2 + 1e-9, dim=-1)], dim=-1)
            return inv

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(6, mul)
            self.layer = Layer()
            self.out = nn.Sequential(nn.Linear(3 * mul, 4), nn.SiLU(), nn.Linear(4, 1))

        def forward(self, z, pos, edge_index, batch):
            atom_e = self.out(self.layer(self.emb(z), pos, edge_index)).squeeze(-1)
            return torch.zeros(n_mol).index_add(0, batch, atom_e)

    model = Net()
    fill_(torch, model, rng, scale=0.5)
    e_ref = normal(torch, rng, n_mol)
    f_ref = normal(torch, rng, pos0.size(0), 3)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, amsgrad=True)
    res = {"losses": []}
    for _ in range(3):
        pos = pos0.detach().requires_grad_(True)
        energy = model(z, pos, edge_index, batch)
        forces = -torch.autograd.grad(energy.sum(), pos, create_graph=True)[0]
        loss = (energy - e_ref).pow(2).mean() + (forces - f_ref).pow(2).sum(-1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    pos_r = (pos0 @ rot.T).requires_grad_(True)
    e_r = model(z, pos_r, edge_index, batch)
    f_r = -torch.autograd.grad(e_r.sum(), pos_r)[0]
    pos = pos0.clone().requires_grad_(True)
    e = model(z, pos, edge_index, batch)
    f = -torch.autograd.grad(e.sum(), pos)[0]
    res["energy"], res["energy_rot"], res["forces"] = e.detach(), e_r.detach(), f
    res["equivariant"] = [bool(torch.allclose(f @ rot.T, f_r, atol=1e-4))]
    res["invariant"] = [bool(torch.allclose(e, e_r, atol=1e-4))]
    res["params"] = list(model.parameters())
    return res


def periodic_stress_program(torch):
    """A periodic pair potential trained in float64 (set_default_dtype, as MD codes do):
    positions wrapped through fractional coordinates (linalg.inv, remainder), a neighbour list
    over the 27 image cells from meshgrid(indexing="ij") + nonzero, a learned radial MLP of the
    distances, forces and the virial stress from a symmetric strain ``displacement`` (autograd
    .grad over [pos, displacement] with create_graph, divided by det(cell)), and LBFGS with a
    strong-Wolfe line search on an energy+force+stress loss."""
    nn = torch.nn
    was = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        rng = np.random.default_rng(2706)
        cell0 = torch.from_numpy(np.diag([2.2, 2.6, 2.4]) + 0.1 * rng.standard_normal((3, 3)))
        pos_in = torch.from_numpy(rng.uniform(-1.0, 3.0, size=(5, 3)))
        cutoff = 1.9
        model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        fill_(torch, model, rng, scale=0.5)
        dtypes = [str(p.dtype).rsplit(".", 1)[-1] for p in model.parameters()]
        f_ref = torch.from_numpy(rng.standard_normal((5, 3)) * 0.1)
        s_ref = torch.from_numpy(rng.standard_normal((3, 3)) * 0.01)
        s_ref = 0.5 * (s_ref + s_ref.T)

        def neighbours(pos, cell):
            frac = pos @ torch.linalg.inv(cell)
            wrapped = torch.remainder(frac, 1.0) @ cell
            r = torch.arange(-1, 2)
            off = torch.stack(torch.meshgrid(r, r, r, indexing="ij"), dim=-1).reshape(-1, 3)
            shifts = off.to(pos.dtype) @ cell
            vec = wrapped[None, :, None, :] - wrapped[:, None, None, :] + shifts[None, None]
            d = vec.norm(dim=-1)
            i, j, s = torch.nonzero((d < cutoff) & (d > 1e-8), as_tuple=True)
            return i, j, off[s]

        with torch.no_grad():
            i, j, off = neighbours(pos_in, cell0)
        frac0 = torch.remainder(pos_in @ torch.linalg.inv(cell0), 1.0)

        def energy_forces_stress(create_graph):
            disp = torch.zeros(3, 3, requires_grad=True)
            sym = 0.5 * (disp + disp.transpose(-1, -2))
            cell = cell0 + cell0 @ sym
            pos = (frac0 @ cell0).requires_grad_(True)
            pos_s = pos + pos @ sym
            vec = pos_s[j] - pos_s[i] + off.to(pos.dtype) @ cell
            d = vec.norm(dim=-1, keepdim=True)
            n = torch.arange(1, 4)
            feats = torch.cat([torch.sin(n * math.pi * d / cutoff) / d, d], dim=-1)
            fc = 0.5 * (torch.cos(math.pi * d / cutoff) + 1)
            energy = 0.5 * (model(feats) * fc).sum()
            g_pos, g_disp = torch.autograd.grad(energy, [pos, disp], create_graph=create_graph)
            return energy, -g_pos, g_disp / torch.linalg.det(cell)

        opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4,
                                line_search_fn="strong_wolfe")
        res = {"dtypes": dtypes, "pairs": [i, j, off], "losses": []}

        def closure():
            opt.zero_grad()
            energy, forces, stress = energy_forces_stress(True)
            loss = (energy + 1.0) ** 2 + (forces - f_ref).pow(2).mean() \
                + 100.0 * (stress - s_ref).pow(2).mean()
            loss.backward()
            return loss

        for _ in range(2):
            res["losses"].append(opt.step(closure).item())
        energy, forces, stress = energy_forces_stress(False)
        res["energy"], res["forces"], res["stress"] = energy, forces, stress
        res["forces_sum"] = forces.sum(0)
        res["stress_dtype"] = [str(stress.dtype).rsplit(".", 1)[-1]]
        res["params"] = list(model.parameters())
        res["lbfgs_state"] = [opt.state[opt._params[0]]["n_iter"],
                              opt.state[opt._params[0]]["func_evals"]]
        return res
    finally:
        torch.set_default_dtype(was)


def ensemble_hessian_program(torch):
    """A committee of small atomistic MLPs, stacked with torch.func.stack_module_state and
    run by vmap(functional_call) over the members, its forces by jacrev of the summed energy
    (torch.func) and by autograd.grad of the vmapped energies, uncertainty as the members'
    force std; vibrational analysis of the mean model from autograd.functional.hessian and
    eigvalsh; then each member takes an Adam step on its own stacked parameters."""
    nn, func = torch.nn, torch.func
    rng = np.random.default_rng(2707)
    pos0 = torch.from_numpy((rng.standard_normal((4, 3)) * 0.8).astype(np.float32))

    class PairMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(2, 6), nn.SiLU(), nn.Linear(6, 1))

        def forward(self, pos):
            iu = torch.triu_indices(pos.size(0), pos.size(0), offset=1)
            d = (pos[iu[0]] - pos[iu[1]]).norm(dim=-1, keepdim=True)
            return self.net(torch.cat([d, torch.exp(-d)], dim=-1)).sum()

    members = [PairMLP() for _ in range(3)]
    for m in members:
        fill_(torch, m, rng, scale=0.6)
    params, buffers = func.stack_module_state(members)
    base = PairMLP()

    def energy(p, b, pos):
        return func.functional_call(base, (p, b), (pos,))

    pos = pos0.clone().requires_grad_(True)
    energies = func.vmap(energy, in_dims=(0, 0, None))(params, buffers, pos)
    forces_ag = -torch.autograd.grad(energies.sum(), pos, create_graph=True)[0]
    forces_each = -func.vmap(func.jacrev(energy, argnums=2), in_dims=(0, 0, None))(
        params, buffers, pos0)
    res = {"energies": energies, "forces_ag": forces_ag, "forces_each": forces_each,
           "force_std": forces_each.std(dim=0).mean()}

    def mean_energy(flat):
        return func.vmap(energy, in_dims=(0, 0, None))(params, buffers, flat.view(4, 3)).mean()

    hess = torch.autograd.functional.hessian(mean_energy, pos0.reshape(-1))
    res["hessian"] = hess
    res["hessian_sym"] = [bool(torch.allclose(hess, hess.T, atol=1e-5))]
    res["modes"] = torch.linalg.eigvalsh(0.5 * (hess + hess.T))
    leaves = [p.detach().requires_grad_(True) for p in params.values()]
    opt = torch.optim.Adam(leaves, lr=1e-2)
    f_ref = normal(torch, rng, 4, 3)
    res["losses"] = []
    for _ in range(3):
        p = dict(zip(params.keys(), leaves))
        pos = pos0.clone().requires_grad_(True)
        e = func.vmap(energy, in_dims=(0, 0, None))(p, buffers, pos)
        f = -torch.autograd.grad(e.sum(), pos, create_graph=True)[0]
        loss = (f / 3 - f_ref).pow(2).mean() + 0.1 * e.var()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["params"] = leaves
    return res


def custom_cutoff_program(torch):
    """A smooth cutoff written as a custom autograd.Function whose backward is itself built
    from differentiable ops (so forces train through it), used in a SchNet-style pair energy;
    the same cutoff under @once_differentiable, whose double backward raises; and a GAT-style
    segment softmax over neighbours (scatter_reduce amax with ties, gather, index_add)."""
    F = torch.nn.functional
    rng = np.random.default_rng(2708)
    rc = 2.0

    class PolyCutoff(torch.autograd.Function):
        @staticmethod
        def forward(ctx, r):
            ctx.save_for_backward(r)
            x = r / rc
            return torch.where(x < 1, 1 - 6 * x ** 5 + 15 * x ** 4 - 10 * x ** 3,
                               torch.zeros_like(x))

        @staticmethod
        def backward(ctx, g):
            (r,) = ctx.saved_tensors
            x = r / rc
            d = torch.where(x < 1, (-30 * x ** 4 + 60 * x ** 3 - 30 * x ** 2) / rc,
                            torch.zeros_like(x))
            return g * d

    class OnceCutoff(torch.autograd.Function):
        @staticmethod
        def forward(ctx, r):
            ctx.save_for_backward(r)
            return torch.cos(r)

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, g):
            (r,) = ctx.saved_tensors
            return -g * torch.sin(r)

    pos0 = torch.from_numpy((rng.standard_normal((6, 3)) * 0.9).astype(np.float32))
    w = torch.from_numpy(rng.standard_normal(4).astype(np.float32)).requires_grad_(True)
    f_ref = normal(torch, rng, 6, 3)
    opt = torch.optim.SGD([w], lr=0.05)
    res = {"losses": []}
    for _ in range(3):
        pos = pos0.clone().requires_grad_(True)
        iu = torch.triu_indices(6, 6, 1)
        r = (pos[iu[0]] - pos[iu[1]]).norm(dim=-1)
        basis = torch.stack([torch.exp(-(k + 1) * r) for k in range(4)], dim=-1)
        e = (basis @ w * PolyCutoff.apply(r)).sum()
        f = -torch.autograd.grad(e, pos, create_graph=True)[0]
        loss = F.smooth_l1_loss(f, f_ref, beta=0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["w"], res["forces"] = w, f.detach()
    res["grad_fn"] = [type(e.grad_fn).__name__, type(PolyCutoff.apply(r).grad_fn).__name__]
    r = torch.tensor([0.3, 1.2], requires_grad=True)
    g = torch.autograd.grad((OnceCutoff.apply(r) ** 2).sum(), r, create_graph=True)[0]
    res["once_grad"] = g.detach()
    res["once_flags"] = [g.requires_grad, type(g.grad_fn).__name__]
    try:
        g.sum().backward()
        res["once_error"] = ["no error"]
    except RuntimeError as err:
        res["once_error"] = [str(err)]
    # segment softmax over incoming edges, with tied logits in one segment
    logits = torch.tensor([1.0, 3.0, 3.0, 0.5, 2.0, 2.0, -1.0], requires_grad=True)
    dst = torch.tensor([0, 0, 0, 1, 2, 2, 2])
    mx = torch.full((3,), -math.inf).scatter_reduce(0, dst, logits, "amax", include_self=True)
    ex = (logits - mx.gather(0, dst)).exp()
    alpha = ex / torch.zeros(3).index_add_(0, dst, ex)[dst]
    vals = torch.arange(7.0)
    out = torch.zeros(3).index_add(0, dst, alpha * vals)
    res["alpha"] = alpha
    res["mx_grad"] = torch.autograd.grad(mx.sum(), logits, retain_graph=True)[0]
    res["alpha_grad"] = torch.autograd.grad(out.sum(), logits)[0]
    return res


def torchmd_et_program(torch):
    """A TorchMD-Net equivariant-transformer-lite trained on forces alone: LayerNorm'd atom
    embeddings, distance-biased multi-head attention through scaled_dot_product_attention
    with a padding mask (molecules batched by padding with pad_sequence), vector features
    from unit edge vectors weighted by the attention, forces from autograd.grad with
    create_graph, AdamW. The forces' graph does not reach the energy head's bias: its .grad
    stays None, so AdamW skips it (no decay)."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2709)
    sizes, hidden, heads = (3, 5), 8, 2
    mols = [torch.from_numpy(rng.standard_normal((s, 3)).astype(np.float32)) for s in sizes]
    zs = [torch.from_numpy(rng.integers(1, 5, size=s)) for s in sizes]

    class ET(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(6, hidden)
            self.norm = nn.LayerNorm(hidden)
            # (no biases into the scores: a shift softmax ignores gets gradient noise Adam
            # turns into full steps)
            self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
            self.dist_proj = nn.Linear(1, heads, bias=False)
            self.vec_out = nn.Linear(hidden, hidden, bias=False)
            self.out = nn.Linear(hidden, 1)

        def forward(self, z, pos, mask):
            b, n, _ = pos.shape
            h = self.norm(self.emb(z))
            q, k, v = self.qkv(h).view(b, n, 3, heads, -1).permute(2, 0, 3, 1, 4)
            vec = pos.unsqueeze(2) - pos.unsqueeze(1)
            pair = mask.unsqueeze(1) & mask.unsqueeze(2)
            real = pair & ~torch.eye(n, dtype=torch.bool)
            d = torch.sqrt((vec ** 2).sum(-1) + (~real).float())     # 1 off the real pairs
            bias = self.dist_proj(torch.exp(-d).unsqueeze(-1)).permute(0, 3, 1, 2)
            keep = pair.unsqueeze(1)
            bias = bias.masked_fill(~keep, float("-inf"))
            bias = bias.masked_fill(~keep.any(-1, keepdim=True), 0.0)
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
            o = o.transpose(1, 2).reshape(b, n, hidden)
            unit = vec / d.unsqueeze(-1) * real.unsqueeze(-1)
            vfeat = torch.einsum("bijc,bjh->bihc", unit, o)
            s = self.out(o + self.vec_out((vfeat ** 2).sum(-1)))
            return (s.squeeze(-1) * mask).sum(-1)

    model = ET()
    fill_(torch, model, rng, scale=0.4)
    pos0 = torch.nn.utils.rnn.pad_sequence(mols, batch_first=True)
    z = torch.nn.utils.rnn.pad_sequence(zs, batch_first=True)
    mask = torch.arange(max(sizes))[None] < torch.tensor(sizes)[:, None]
    f_ref = normal(torch, rng, *pos0.shape) * mask.unsqueeze(-1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    res = {"losses": []}
    for _ in range(3):
        pos = pos0.clone().requires_grad_(True)
        energy = model(z, pos, mask)
        forces = -torch.autograd.grad(energy.sum(), pos, create_graph=True)[0]
        loss = ((forces - f_ref) ** 2 * mask.unsqueeze(-1)).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["grad_is_none"] = [p.grad is None for p in model.parameters()]
    res["energy"], res["forces"] = energy.detach(), forces.detach()
    res["params"] = list(model.parameters())
    return res


PROGRAMS = [schnet_program, dimenet_program, gin_pna_program, mpnn_program, nequip_program,
            periodic_stress_program, ensemble_hessian_program, custom_cutoff_program,
            torchmd_et_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, tolerances={
        # forces through two autograd passes over float32 sums: accumulation-order noise
        "schnet_program": (1e-4, 1e-5), "dimenet_program": (1e-4, 1e-5),
        "nequip_program": (1e-4, 1e-5), "torchmd_et_program": (1e-4, 1e-5)})
