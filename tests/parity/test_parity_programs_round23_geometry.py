"""Geometry, molecules and physics written as people write them in torch, run once with `torch`
bound to ember and once to PyTorch from the same NumPy data: an E(n)-equivariant GNN (EGNN:
combinations/meshgrid edge lists, index_add_ and scatter_reduce_ coordinate updates, a QR-drawn
rotation to check equivariance), a SchNet-style model (Gaussian RBF with a cosine cutoff,
argwhere neighbour lists, continuous-filter convolutions, forces from autograd.grad and a
force-matching loss through double backward), rotations (quaternions, matrix_exp of skew
matrices, the 6-D representation, geodesic loss, Kabsch alignment through SVD, a rotation fitted
with Adam), Lennard-Jones molecular dynamics with periodic boundaries (velocity Verlet, and
backpropagation through a short trajectory into epsilon and sigma) and a NeRF-lite (positional
encoding, stratified and hierarchical sampling through searchsorted, volume rendering with an
exclusive cumprod, grid_sample on a 5-D feature volume). What they found is pinned in
test_parity_programs_round23_geometry_fixes.py."""


import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def _random_rotation(torch, rng, dim):
    """A Haar-random orthogonal matrix: QR of a Gaussian matrix with the signs of R's diagonal
    folded into Q, then one column flipped if needed to make it a proper rotation."""
    q, r = torch.linalg.qr(normal(torch, rng, dim, dim))
    q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)
    if torch.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


def egnn_program(torch):
    """EGNN layers (Satorras et al.) on a batch of small point clouds: fully connected edges,
    messages from squared distances, mean-aggregated coordinate updates; trained a few steps and
    checked for rotation/translation equivariance."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(230)
    res = {}
    n_nodes, n_graphs, hidden = 5, 3, 16

    # edges of one fully connected graph two ways: combinations (both directions) and a mask
    pairs = torch.combinations(torch.arange(n_nodes), r=2)
    both = torch.cat([pairs, pairs.flip(1)])
    ii, jj = torch.meshgrid(torch.arange(n_nodes), torch.arange(n_nodes), indexing="ij")
    mask = ii != jj
    rows, cols = ii[mask], jj[mask]
    res["edges_agree"] = [sorted(map(tuple, both.tolist())) == sorted(zip(rows.tolist(),
                                                                         cols.tolist()))]
    res["edge_meta"] = [_name(pairs.dtype), tuple(pairs.shape) == (10, 2), _name(mask.dtype)]
    # a batch of graphs: offset the edge list of each copy
    offsets = torch.arange(n_graphs).repeat_interleave(rows.numel()) * n_nodes
    row = rows.repeat(n_graphs) + offsets
    col = cols.repeat(n_graphs) + offsets
    batch = torch.arange(n_graphs).repeat_interleave(n_nodes)

    class EGCL(nn.Module):
        def __init__(self, h, coords_agg):
            super().__init__()
            self.edge_mlp = nn.Sequential(nn.Linear(2 * h + 1, h), nn.SiLU(), nn.Linear(h, h),
                                          nn.SiLU())
            self.node_mlp = nn.Sequential(nn.Linear(2 * h, h), nn.SiLU(), nn.Linear(h, h))
            last = nn.Linear(h, 1, bias=False)
            self.coord_mlp = nn.Sequential(nn.Linear(h, h), nn.SiLU(), last)
            self.att = nn.Sequential(nn.Linear(h, 1), nn.Sigmoid())
            self.coords_agg = coords_agg

        def forward(self, h, x, row, col):
            diff = x[row] - x[col]
            radial = (diff ** 2).sum(dim=1, keepdim=True)
            m = self.edge_mlp(torch.cat([h[row], h[col], radial], dim=1))
            m = m * self.att(m)
            trans = diff / (radial.sqrt() + 1.0) * self.coord_mlp(m)
            if self.coords_agg == "sum":
                agg = torch.zeros_like(x).index_add_(0, row, trans)
            else:
                agg = torch.zeros_like(x).scatter_reduce_(
                    0, row.unsqueeze(1).expand(-1, x.shape[1]), trans, reduce="mean",
                    include_self=False)
            x = x + agg
            m_agg = h.new_zeros(h.shape[0], m.shape[1]).index_add_(0, row, m)
            h = h + self.node_mlp(torch.cat([h, m_agg], dim=1))
            return h, x

    class EGNN(nn.Module):
        def __init__(self, in_nf, h):
            super().__init__()
            self.embed = nn.Linear(in_nf, h)
            self.layers = nn.ModuleList([EGCL(h, "mean"), EGCL(h, "sum")])
            self.head = nn.Sequential(nn.Linear(h, h), nn.SiLU(), nn.Linear(h, 1))

        def forward(self, h, x, row, col, batch):
            h = self.embed(h)
            for layer in self.layers:
                h, x = layer(h, x, row, col)
            pooled = torch.zeros(batch.max() + 1, h.shape[1]).index_add_(0, batch, h)
            return self.head(pooled).squeeze(-1), h, x

    model = EGNN(4, hidden)
    fill_(torch, model, rng, 0.2)
    feats = F.one_hot(torch.from_numpy(rng.integers(0, 4, n_nodes * n_graphs)), 4).float()
    pos = normal(torch, rng, n_nodes * n_graphs, 3)
    target = normal(torch, rng, n_graphs)

    # equivariance: rotate and translate the input, the outputs follow
    Q = _random_rotation(torch, rng, 3)
    shift = normal(torch, rng, 1, 3)
    with torch.no_grad():
        energy, h_out, x_out = model(feats, pos, row, col, batch)
        energy_r, h_r, x_r = model(feats, pos @ Q.T + shift, row, col, batch)
    res["rotation_is_orthogonal"] = [torch.allclose(Q @ Q.T, torch.eye(3), atol=1e-5),
                                     bool(torch.det(Q) > 0)]
    res["energy"] = energy
    res["coords"] = x_out
    res["invariant_err"] = [bool((energy - energy_r).abs().max() < 1e-4),
                            bool((h_out - h_r).abs().max() < 1e-4)]
    res["equivariant_err"] = [bool((x_out @ Q.T + shift - x_r).abs().max() < 1e-4)]

    # per-graph centring with scatter_reduce mean, then training on energies
    centre = torch.zeros(n_graphs, 3).scatter_reduce(
        0, batch[:, None].expand(-1, 3), pos, reduce="mean", include_self=False)
    pos_c = pos - centre[batch]
    res["centred"] = torch.zeros(n_graphs, 3).index_add_(0, batch, pos_c)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=1e-3)
    res["loss"] = []
    for _ in range(4):
        energy, _, x_new = model(feats, pos_c, row, col, batch)
        loss = F.mse_loss(energy, target) + 0.01 * (x_new - pos_c).pow(2).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        res["loss"].append(loss.item())
    res["grad_norm"] = torch.stack([p.grad.norm() for p in model.parameters()]).norm()
    res["embed_weight"] = model.embed.weight
    # scatter_reduce_ with include_self=True keeps the zeros in the mean
    res["mean_with_self"] = torch.zeros(n_graphs, 3).scatter_reduce_(
        0, batch[:, None].expand(-1, 3), pos, reduce="mean")
    res["amax_nodes"] = torch.full((n_graphs,), -torch.inf).scatter_reduce_(
        0, batch, pos.norm(dim=1), reduce="amax")
    return res


def schnet_program(torch):
    """A SchNet-style model on two small molecules: neighbour lists from argwhere within a
    cutoff, Gaussian radial basis with a cosine cutoff, continuous-filter convolutions,
    energies summed per molecule, forces as -dE/dpos with create_graph, and a force-matching
    loss trained through double backward."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(231)
    res = {}
    n_atoms = [5, 4]
    cutoff, n_rbf, hidden = 3.0, 12, 16
    z = torch.from_numpy(rng.integers(1, 6, sum(n_atoms)))
    batch = torch.repeat_interleave(torch.arange(len(n_atoms)), torch.tensor(n_atoms))
    pos0 = normal(torch, rng, sum(n_atoms), 3) * 1.2
    e_ref = normal(torch, rng, len(n_atoms))
    f_ref = normal(torch, rng, sum(n_atoms), 3) * 0.1

    # neighbour list: pairs in one molecule, closer than the cutoff, no self pairs
    with torch.no_grad():
        same = batch.unsqueeze(0) == batch.unsqueeze(1)
        d_all = torch.cdist(pos0, pos0)
        adj = same & (d_all < cutoff) & ~torch.eye(len(z), dtype=torch.bool)
    idx_i, idx_j = torch.argwhere(adj).unbind(-1)
    nz = torch.nonzero(adj, as_tuple=True)
    res["neighbours"] = [idx_i.tolist() == nz[0].tolist(), idx_j.tolist() == nz[1].tolist(),
                         int(adj.sum()), _name(idx_i.dtype)]
    res["count_nonzero"] = torch.count_nonzero(adj, dim=1)

    class GaussianRBF(nn.Module):
        def __init__(self, n, cutoff):
            super().__init__()
            offsets = torch.linspace(0, cutoff, n)
            self.register_buffer("offsets", offsets)
            self.register_buffer("widths", torch.abs(offsets[1] - offsets[0]) *
                                 torch.ones_like(offsets))

        def forward(self, d):
            coeff = -0.5 / torch.pow(self.widths, 2)
            return torch.exp(coeff * torch.pow(d[..., None] - self.offsets, 2))

    def cosine_cutoff(d, rc):
        return 0.5 * (torch.cos(d * torch.pi / rc) + 1.0) * (d < rc).float()

    class ShiftedSoftplus(nn.Module):
        def forward(self, x):
            return F.softplus(x) - np.log(2.0)

    class Interaction(nn.Module):
        def __init__(self, h, n_rbf):
            super().__init__()
            self.filter = nn.Sequential(nn.Linear(n_rbf, h), ShiftedSoftplus(), nn.Linear(h, h))
            self.in2f = nn.Linear(h, h, bias=False)
            self.f2out = nn.Sequential(nn.Linear(h, h), ShiftedSoftplus(), nn.Linear(h, h))

        def forward(self, x, rbf, fcut, idx_i, idx_j):
            W = self.filter(rbf) * fcut[:, None]
            xj = self.in2f(x)[idx_j] * W
            agg = torch.zeros_like(x).index_add(0, idx_i, xj)
            return x + self.f2out(agg)

    class SchNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(10, hidden, padding_idx=0)
            self.rbf = GaussianRBF(n_rbf, cutoff)
            self.interactions = nn.ModuleList([Interaction(hidden, n_rbf) for _ in range(2)])
            self.out = nn.Sequential(nn.Linear(hidden, hidden // 2), ShiftedSoftplus(),
                                     nn.Linear(hidden // 2, 1))
            self.register_buffer("atomref", torch.linspace(-1.0, 1.0, 10).unsqueeze(1))

        def forward(self, z, pos, batch, idx_i, idx_j):
            r_ij = pos[idx_j] - pos[idx_i]
            d_ij = torch.norm(r_ij, dim=-1)
            rbf, fcut = self.rbf(d_ij), cosine_cutoff(d_ij, cutoff)
            x = self.embedding(z)
            for block in self.interactions:
                x = block(x, rbf, fcut, idx_i, idx_j)
            y = self.out(x) + self.atomref[z]
            n_mol = int(batch[-1]) + 1
            return torch.zeros(n_mol, dtype=y.dtype).index_add_(0, batch, y.squeeze(-1))

    model = SchNet()
    fill_(torch, model, rng, 0.2)
    res["padding_row"] = model.embedding.weight[0]
    res["state_keys"] = sorted(model.state_dict().keys())

    # energies two more ways: segment_reduce over sorted molecules and scatter_add
    pos = pos0.clone().requires_grad_(True)
    energy = model(z, pos, batch, idx_i, idx_j)
    res["energy"] = energy
    r_ij = pos[idx_j] - pos[idx_i]
    d_ij = r_ij.norm(dim=-1)
    per_atom = model.out(model.embedding(z)).squeeze(-1)
    res["segment_sum"] = torch.segment_reduce(per_atom, "sum", lengths=torch.tensor(n_atoms))
    res["scatter_sum"] = torch.zeros(2).scatter_add(0, batch, per_atom)
    res["rbf_row"] = model.rbf(d_ij)[0]
    res["fcut"] = cosine_cutoff(d_ij, cutoff)

    # forces, and their invariance to a rigid translation
    forces = -torch.autograd.grad(energy.sum(), pos, create_graph=True)[0]
    res["forces"] = forces
    res["force_meta"] = [forces.requires_grad, forces.grad_fn is not None,
                         tuple(forces.shape) == (9, 3)]
    res["net_force"] = forces.sum(0)

    # force matching: loss on energies and forces, trained through double backward
    opt = torch.optim.Adam(model.parameters(), lr=5e-3, amsgrad=True)
    res["loss"], res["force_loss"] = [], []
    for _ in range(3):
        pos = pos0.clone().requires_grad_(True)
        energy = model(z, pos, batch, idx_i, idx_j)
        forces = -torch.autograd.grad(energy, pos, grad_outputs=torch.ones_like(energy),
                                      create_graph=True, retain_graph=True)[0]
        loss_f = F.mse_loss(forces, f_ref)
        loss = 0.1 * F.mse_loss(energy, e_ref) + 0.9 * loss_f
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["force_loss"].append(loss_f.item())
    res["filter_grad"] = model.interactions[0].filter[0].weight.grad
    res["embedding_grad_pad"] = model.embedding.weight.grad[0]
    res["params"] = torch.cat([p.detach().flatten() for p in model.parameters()])

    # the same model with distances from cdist: forces work, force matching does not (the
    # direct cdist kernel's backward has no derivative); the matrix-product form trains
    def cdist_energy(pos, mode):
        d = torch.cdist(pos, pos, compute_mode=mode)[idx_i, idx_j]
        x = model.embedding(z)
        rbf, fcut = model.rbf(d), cosine_cutoff(d, cutoff)
        for block in model.interactions:
            x = block(x, rbf, fcut, idx_i, idx_j)
        return torch.zeros(2).index_add(0, batch, model.out(x).squeeze(-1))
    pos = pos0.clone().requires_grad_(True)
    forces = -torch.autograd.grad(cdist_energy(pos, "donot_use_mm_for_euclid_dist").sum(), pos,
                                  create_graph=True)[0]
    res["cdist_forces"] = forces
    try:
        F.mse_loss(forces, f_ref).backward()
        res["cdist_force_matching"] = ["trained"]
    except NotImplementedError as e:
        res["cdist_force_matching"] = [str(e), forces.grad_fn.name()]
    model.zero_grad()
    pos = pos0.clone().requires_grad_(True)
    forces = -torch.autograd.grad(cdist_energy(pos, "use_mm_for_euclid_dist").sum(), pos,
                                  create_graph=True)[0]
    F.mse_loss(forces, f_ref).backward()
    res["mm_force_grad"] = model.interactions[1].f2out[2].weight.grad

    # the Hessian of one molecule's energy and its vibrational spectrum
    def energy_of(flat):
        return model(z[:4], flat.view(4, 3), batch[:4], *torch.argwhere(adj[:4, :4]).T).sum()
    hess = torch.autograd.functional.hessian(energy_of, pos0[:4].reshape(-1))
    res["hessian_sym"] = [bool((hess - hess.T).abs().max() < 1e-4)]
    res["hessian_eigs"] = torch.linalg.eigvalsh(0.5 * (hess + hess.T))
    return res


def rotations_program(torch):
    """Rotation utilities as pose-estimation code writes them: quaternion <-> matrix, axis-angle
    through matrix_exp of skew matrices (and back through the matrix logarithm's closed form),
    the continuous 6-D representation with Gram-Schmidt, a geodesic loss, Kabsch alignment with
    a determinant sign fix, and a rotation fitted with Adam."""
    F = torch.nn.functional
    rng = np.random.default_rng(232)
    res = {}

    def quat_to_matrix(q):
        q = F.normalize(q, dim=-1)
        w, x, y, z = q.unbind(-1)
        two_s = 2.0 / (q * q).sum(-1)
        o = torch.stack((1 - two_s * (y * y + z * z), two_s * (x * y - z * w),
                         two_s * (x * z + y * w), two_s * (x * y + z * w),
                         1 - two_s * (x * x + z * z), two_s * (y * z - x * w),
                         two_s * (x * z - y * w), two_s * (y * z + x * w),
                         1 - two_s * (x * x + y * y)), -1)
        return o.reshape(q.shape[:-1] + (3, 3))

    def matrix_to_quat(m):
        m00, m01, m02, m10, m11, m12, m20, m21, m22 = torch.unbind(m.reshape(m.shape[:-2] + (9,)),
                                                                   dim=-1)
        q_abs = torch.sqrt(torch.clamp(torch.stack([1.0 + m00 + m11 + m22, 1.0 + m00 - m11 - m22,
                                                    1.0 - m00 + m11 - m22,
                                                    1.0 - m00 - m11 + m22], -1), min=0))
        cands = torch.stack([
            torch.stack([q_abs[..., 0] ** 2, m21 - m12, m02 - m20, m10 - m01], -1),
            torch.stack([m21 - m12, q_abs[..., 1] ** 2, m10 + m01, m02 + m20], -1),
            torch.stack([m02 - m20, m10 + m01, q_abs[..., 2] ** 2, m12 + m21], -1),
            torch.stack([m10 - m01, m20 + m02, m21 + m12, q_abs[..., 3] ** 2], -1)], -2)
        cands = cands / (2.0 * q_abs[..., None].max(q_abs.new_tensor(0.1)))
        best = F.one_hot(q_abs.argmax(dim=-1), num_classes=4) > 0.5
        q = cands[best, :].reshape(m.shape[:-2] + (4,))
        return torch.where(q[..., :1] < 0, -q, q)          # standardise: w >= 0

    def skew(v):
        zero = torch.zeros_like(v[..., 0])
        return torch.stack([zero, -v[..., 2], v[..., 1], v[..., 2], zero, -v[..., 0],
                            -v[..., 1], v[..., 0], zero], -1).unflatten(-1, (3, 3))

    def rot6d_to_matrix(d6):
        a1, a2 = d6[..., :3], d6[..., 3:]
        b1 = F.normalize(a1, dim=-1)
        b2 = F.normalize(a2 - (b1 * a2).sum(-1, keepdim=True) * b1, dim=-1)
        b3 = torch.cross(b1, b2, dim=-1)
        return torch.stack((b1, b2, b3), dim=-2)

    def geodesic(R1, R2, eps=1e-6):
        m = torch.bmm(R1, R2.transpose(1, 2))
        cos = (m.diagonal(dim1=-2, dim2=-1).sum(-1) - 1) / 2
        return torch.acos(torch.clamp(cos, -1 + eps, 1 - eps))

    quats = normal(torch, rng, 6, 4)
    R = quat_to_matrix(quats)
    res["quat_matrix"] = R
    res["orthonormal"] = (R @ R.mT - torch.eye(3)).abs().amax((-2, -1))
    res["det"] = torch.linalg.det(R)
    q_back = matrix_to_quat(R)
    q_std = F.normalize(quats, dim=-1)
    q_std = torch.where(q_std[..., :1] < 0, -q_std, q_std)
    res["quat_roundtrip"] = (q_back - q_std).abs().max()
    res["quat_back"] = q_back

    # axis-angle: exp of a skew matrix (Rodrigues) both ways, and the angle back from the trace
    aa = normal(torch, rng, 5, 3)
    R_exp = torch.linalg.matrix_exp(skew(aa))
    theta = aa.norm(dim=-1, keepdim=True)[..., None]
    K = skew(aa / aa.norm(dim=-1, keepdim=True))
    R_rod = torch.eye(3) + torch.sin(theta) * K + (1 - torch.cos(theta)) * K @ K
    res["matrix_exp"] = R_exp
    res["rodrigues_agree"] = (R_exp - R_rod).abs().max()
    ang = torch.arccos(((R_exp.diagonal(0, -2, -1).sum(-1) - 1) / 2).clamp(-1, 1))
    res["angle_back"] = ang
    res["matrix_exp_f64"] = torch.matrix_exp(skew(aa.double()))
    skew_f64 = skew(aa.double()).requires_grad_(True)
    g = torch.autograd.grad(torch.linalg.matrix_exp(skew_f64).sum(), skew_f64)[0]
    res["matrix_exp_grad"] = g

    # 6-D representation: Gram-Schmidt, torch.cross against linalg.cross
    d6 = normal(torch, rng, 4, 6)
    R6 = rot6d_to_matrix(d6)
    res["rot6d"] = R6
    res["cross_agree"] = [torch.equal(torch.cross(R6[:, 0], R6[:, 1], dim=-1),
                                      torch.linalg.cross(R6[:, 0], R6[:, 1]))]
    res["to6d"] = R6[..., :2, :].clone().reshape(4, 6)

    # geodesic loss, including identical rotations (clamped acos keeps gradients finite)
    d6_param = d6.clone().requires_grad_(True)
    Rp = rot6d_to_matrix(d6_param)
    target = torch.cat([R6[:1], R_exp[:3]])
    loss = geodesic(Rp, target)
    loss.mean().backward()
    res["geodesic"] = loss
    res["geodesic_grad"] = d6_param.grad

    # Kabsch / Procrustes: best rotation of a point set onto a rotated, shifted, noisy copy
    P = normal(torch, rng, 2, 10, 3)
    Rt = torch.stack([R[0], R[1]])
    Qp = P @ Rt.mT + torch.tensor([1.0, -2.0, 0.5]) + 0.01 * normal(torch, rng, 2, 10, 3)
    Qp[1] = Qp[1] * torch.tensor([1.0, 1.0, -1.0])        # a reflection: needs the sign fix
    Pc, Qc = P - P.mean(-2, keepdim=True), Qp - Qp.mean(-2, keepdim=True)
    H = Pc.mT @ Qc
    U, S, Vh = torch.linalg.svd(H)
    d = torch.sign(torch.linalg.det(Vh.mT @ U.mT))
    D = torch.diag_embed(torch.stack([torch.ones_like(d), torch.ones_like(d), d], -1))
    R_opt = Vh.mT @ D @ U.mT
    res["kabsch"] = R_opt
    res["kabsch_det"] = torch.det(R_opt)
    res["singular"] = S
    res["rmsd"] = ((Pc @ R_opt.mT - Qc) ** 2).sum(-1).mean(-1).sqrt()
    res["recovered"] = geodesic(R_opt[:1], Rt[:1])
    res["error_degrees"] = torch.rad2deg(geodesic(R_opt, Rt))
    res["yaw_radians"] = torch.deg2rad(torch.tensor([0.0, 45.0, 90.0, 180.0, -30.0]))
    res["euler_zyx"] = torch.rad2deg(torch.stack([torch.atan2(R[:, 1, 0], R[:, 0, 0]),
                                                  torch.asin(-R[:, 2, 0].clamp(-1, 1)),
                                                  torch.atan2(R[:, 2, 1], R[:, 2, 2])], -1))

    # fit a rotation (axis-angle parameter) to correspondences with Adam
    omega = torch.zeros(3, requires_grad=True)
    opt = torch.optim.Adam([omega], lr=0.1)
    res["fit_loss"] = []
    for _ in range(6):
        Rw = torch.linalg.matrix_exp(skew(omega))
        loss = F.smooth_l1_loss(Pc[0] @ Rw.mT, Qc[0], beta=0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["fit_loss"].append(loss.item())
    res["omega"] = omega

    # slerp between two unit quaternions
    q0, q1 = F.normalize(quats[:2], dim=-1)
    dot = (q0 * q1).sum()
    q1 = torch.where(dot < 0, -q1, q1)
    om = torch.acos(dot.abs().clamp(max=1.0))
    ts = torch.linspace(0, 1, 5)[:, None]
    res["slerp"] = (torch.sin((1 - ts) * om) * q0 + torch.sin(ts * om) * q1) / torch.sin(om)
    return res


def md_program(torch):
    """Lennard-Jones molecular dynamics in a periodic box: minimum-image distances (remainder
    wrapping, round), forces from autograd, velocity Verlet under no_grad, kinetic energy and
    temperature, a Berendsen thermostat, the radial distribution function, and gradients of
    the final state with respect to epsilon and sigma through a short trajectory."""
    rng = np.random.default_rng(233)
    res = {}
    n, box, dt = 8, 2.6, 0.005
    # a jittered simple-cubic lattice, so that no pair starts too close
    grid = torch.stack(torch.meshgrid(*[torch.arange(2.0)] * 3, indexing="ij"), -1).reshape(-1, 3)
    pos0 = torch.remainder(grid * (box / 2) + 0.3 + 0.12 * normal(torch, rng, n, 3), box)
    vel0 = 0.3 * normal(torch, rng, n, 3)
    vel0 = vel0 - vel0.mean(0, keepdim=True)
    mass = torch.ones(n, 1)
    iu = torch.triu_indices(n, n, offset=1)

    def displacements(pos):
        d = pos[:, None, :] - pos[None, :, :]
        return d - box * torch.round(d / box)              # minimum image

    def lj_energy(pos, eps, sigma, rc=box / 2):
        r2 = displacements(pos)[iu[0], iu[1]].pow(2).sum(-1)
        sr6 = (sigma ** 2 / r2) ** 3
        e = 4 * eps * (sr6 ** 2 - sr6)
        shift = 4 * eps * ((sigma / rc) ** 12 - (sigma / rc) ** 6)
        return torch.where(r2 < rc ** 2, e - shift, torch.zeros_like(e)).sum()

    def forces_of(pos, eps, sigma, create_graph=False):
        with torch.enable_grad():
            p = pos if pos.requires_grad else pos.detach().requires_grad_(True)
            e = lj_energy(p, eps, sigma)
            f, = torch.autograd.grad(e, p, create_graph=create_graph)
        return e, -f

    def kinetic(vel):
        return 0.5 * (mass * vel ** 2).sum()

    eps, sigma = torch.tensor(1.0), torch.tensor(0.9)
    e0, f0 = forces_of(pos0, eps, sigma)
    res["e0"], res["f0"] = e0, f0
    res["newton3"] = f0.sum(0)

    # NVE with velocity Verlet, then a Berendsen thermostat
    pos, vel, f = pos0.clone(), vel0.clone(), f0
    res["etot"], res["temp"] = [], []
    unwrapped, times = [pos0.clone()], [0.0]
    with torch.no_grad():
        for step in range(8):
            vel += 0.5 * dt * f / mass
            unwrapped.append(unwrapped[-1] + dt * vel)
            times.append(times[-1] + dt * (1 + 0.1 * step))     # as if logged unevenly
            pos = torch.remainder(pos + dt * vel, box)
            e, f = forces_of(pos, eps, sigma)
            vel.add_(f / mass, alpha=0.5 * dt)
            ke = kinetic(vel)
            temp = 2 * ke / (3 * (n - 1))
            if step >= 4:                                   # thermostat towards T = 0.5
                vel.mul_(torch.sqrt(1 + 0.5 * (0.5 / temp - 1)))
            res["etot"].append((e + ke).item())
            res["temp"].append(temp.item())
    res["final_pos"], res["final_vel"] = pos, vel
    # finite-difference velocities from the logged trajectory, on its own time axis
    traj = torch.stack(unwrapped)
    res["fd_velocity"] = torch.gradient(traj, spacing=(torch.tensor(times),), dim=0)[0]
    res["fd_velocity_2"] = torch.gradient(traj[:, 0], spacing=(torch.tensor(times),), dim=0,
                                          edge_order=2)
    res["fd_velocity_uniform"] = torch.gradient(traj, spacing=torch.tensor(dt), dim=0)
    res["in_box"] = [bool(((pos >= 0) & (pos < box)).all())]
    res["fmod_wrap"] = torch.fmod(pos0 - 3.0, box)
    res["remainder_wrap"] = (pos0 - 3.0) % box

    # radial distribution function from a histogram of pair distances
    r = displacements(pos)[iu[0], iu[1]].norm(dim=-1)
    counts = torch.histc(r, bins=8, min=0.0, max=box / 2)
    edges = torch.linspace(0, box / 2, 9)
    shell = 4 / 3 * torch.pi * (edges[1:] ** 3 - edges[:-1] ** 3)
    res["rdf"] = counts / shell / (n * (n - 1) / 2 / box ** 3)
    res["bucketize"] = torch.bucketize(r, edges[1:-1], right=True)

    # backpropagation through time: d(final potential energy, positions)/d(eps, sigma)
    eps = torch.tensor(1.0, requires_grad=True)
    sigma = torch.tensor(0.9, requires_grad=True)
    pos, vel = pos0.clone(), vel0.clone()
    _, f = forces_of(pos, eps, sigma, create_graph=True)
    for _ in range(4):
        vel = vel + 0.5 * dt * f / mass
        pos = pos + dt * vel
        pos = pos - box * torch.floor(pos / box)
        _, f = forces_of(pos, eps, sigma, create_graph=True)
        vel = vel + 0.5 * dt * f / mass
    target = pos0 + 0.01
    loss = (pos - target).pow(2).mean() + 0.1 * kinetic(vel)
    g_eps, g_sigma = torch.autograd.grad(loss, (eps, sigma))
    res["bptt_loss"] = loss
    res["d_eps"], res["d_sigma"] = g_eps, g_sigma

    # fit sigma to a reference trajectory with SGD and momentum
    with torch.no_grad():
        ref = pos0 + dt * 4 * vel0 + 0.5 * (4 * dt) ** 2 * forces_of(pos0, 1.0, 1.0)[1]
    log_sigma = torch.nn.Parameter(torch.tensor(0.95).log())
    opt = torch.optim.SGD([log_sigma], lr=1e-4, momentum=0.9, nesterov=True)
    res["fit"] = []
    for _ in range(3):
        s = log_sigma.exp()
        _, f = forces_of(pos0, torch.tensor(1.0), s, create_graph=True)
        guess = pos0 + dt * 4 * vel0 + 0.5 * (4 * dt) ** 2 * f
        loss = torch.nn.functional.mse_loss(guess, ref) * 1e4
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["fit"].append(loss.item())
    res["sigma"] = log_sigma.exp()
    return res


def nerf_program(torch):
    """A NeRF-lite: rays from a pinhole camera (meshgrid indexing='xy'), stratified samples,
    positional encoding, an MLP or a trilinear feature grid (grid_sample on a 5-D volume),
    volume rendering with an exclusive cumprod, hierarchical sampling through searchsorted
    on the weights' CDF, and a few Adam steps on a photometric loss."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(234)
    res = {}
    H, W, focal, n_coarse, n_fine, n_freq = 4, 5, 4.0, 8, 6, 4
    near, far = 2.0, 6.0

    def get_rays(c2w):
        i, j = torch.meshgrid(torch.arange(W, dtype=torch.float32),
                              torch.arange(H, dtype=torch.float32), indexing="xy")
        dirs = torch.stack([(i - W * 0.5) / focal, -(j - H * 0.5) / focal,
                            -torch.ones_like(i)], -1)
        rays_d = torch.sum(dirs[..., None, :] * c2w[:3, :3], -1)
        rays_o = c2w[:3, -1].expand(rays_d.shape)
        return rays_o, rays_d

    angle = torch.tensor(0.3)
    c, s_ = torch.cos(angle), torch.sin(angle)
    c2w = torch.stack([torch.stack([c, torch.zeros(()), s_, 4 * s_]),
                       torch.tensor([0.0, 1.0, 0.0, 0.0]),
                       torch.stack([-s_, torch.zeros(()), c, 4 * c]),
                       torch.tensor([0.0, 0.0, 0.0, 1.0])])
    rays_o, rays_d = get_rays(c2w)
    res["ray_shapes"] = [str(tuple(rays_o.shape)), str(tuple(rays_d.shape)), str(rays_o.stride())]
    rays_o, rays_d = rays_o.reshape(-1, 3), rays_d.reshape(-1, 3)
    viewdirs = rays_d / torch.norm(rays_d, dim=-1, keepdim=True)
    n_rays = rays_o.shape[0]

    def positional_encoding(x, n):
        freqs = 2.0 ** torch.linspace(0.0, n - 1, n)
        xb = (x[..., None, :] * freqs[:, None]).flatten(-2)
        return torch.cat([x, torch.sin(xb), torch.cos(xb)], -1)

    # stratified samples: the uniform jitter comes from NumPy so both runs see the same points
    t_vals = torch.linspace(0.0, 1.0, steps=n_coarse)
    z_vals = (near * (1.0 - t_vals) + far * t_vals).expand(n_rays, n_coarse)
    mids = 0.5 * (z_vals[..., 1:] + z_vals[..., :-1])
    upper = torch.cat([mids, z_vals[..., -1:]], -1)
    lower = torch.cat([z_vals[..., :1], mids], -1)
    t_rand = torch.from_numpy(rng.random((n_rays, n_coarse), dtype=np.float32))
    z_vals = lower + (upper - lower) * t_rand
    drawn = torch.rand(z_vals.shape, generator=torch.Generator().manual_seed(0))
    res["rand_meta"] = [_name(drawn.dtype), bool(((drawn >= 0) & (drawn < 1)).all())]
    pts = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]
    res["encoded"] = positional_encoding(pts[:2, :2], n_freq)

    class TinyNeRF(nn.Module):
        def __init__(self, d_in, d_view, h=32):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(d_in, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU())
            self.sigma = nn.Linear(h, 1)
            self.feat = nn.Linear(h, h)
            self.rgb = nn.Sequential(nn.Linear(h + d_view, h // 2), nn.ReLU(),
                                     nn.Linear(h // 2, 3))

        def forward(self, x, d):
            h = self.trunk(x)
            sigma = self.sigma(h)
            rgb = self.rgb(torch.cat([self.feat(h), d], -1))
            return torch.cat([rgb, sigma], -1)

    def raw2outputs(raw, z_vals, rays_d, noise=None):
        dists = z_vals[..., 1:] - z_vals[..., :-1]
        dists = torch.cat([dists, torch.tensor([1e10]).expand(dists[..., :1].shape)], -1)
        dists = dists * torch.norm(rays_d[..., None, :], dim=-1)
        rgb = torch.sigmoid(raw[..., :3])
        density = raw[..., 3] + (0 if noise is None else noise)
        alpha = 1.0 - torch.exp(-F.relu(density) * dists)
        trans = torch.cumprod(torch.cat([torch.ones((alpha.shape[0], 1)),
                                         1.0 - alpha + 1e-10], -1), -1)[:, :-1]
        weights = alpha * trans
        rgb_map = torch.sum(weights[..., None] * rgb, -2)
        depth_map = torch.sum(weights * z_vals, -1)
        acc_map = torch.sum(weights, -1)
        disp_map = 1.0 / torch.max(1e-10 * torch.ones_like(depth_map), depth_map / acc_map)
        return rgb_map, disp_map, acc_map, weights, depth_map

    def sample_pdf(bins, weights, u):
        weights = weights + 1e-5
        pdf = weights / torch.sum(weights, -1, keepdim=True)
        cdf = torch.cumsum(pdf, -1)
        cdf = torch.cat([torch.zeros_like(cdf[..., :1]), cdf], -1)
        u = u.contiguous()
        inds = torch.searchsorted(cdf, u, right=True)
        below = torch.max(torch.zeros_like(inds - 1), inds - 1)
        above = torch.min((cdf.shape[-1] - 1) * torch.ones_like(inds), inds)
        inds_g = torch.stack([below, above], -1)
        matched = [inds_g.shape[0], inds_g.shape[1], cdf.shape[-1]]
        cdf_g = torch.gather(cdf.unsqueeze(1).expand(matched), 2, inds_g)
        bins_g = torch.gather(bins.unsqueeze(1).expand(matched), 2, inds_g)
        denom = cdf_g[..., 1] - cdf_g[..., 0]
        denom = torch.where(denom < 1e-5, torch.ones_like(denom), denom)
        t = (u - cdf_g[..., 0]) / denom
        return bins_g[..., 0] + t * (bins_g[..., 1] - bins_g[..., 0]), inds

    d_in, d_view = 3 + 6 * n_freq, 3 + 6 * 2
    coarse, fine = TinyNeRF(d_in, d_view), TinyNeRF(d_in, d_view)
    fill_(torch, coarse, rng, 0.3)
    fill_(torch, fine, rng, 0.3)
    target = torch.from_numpy(rng.random((n_rays, 3), dtype=np.float32))
    u_fine = torch.from_numpy(np.sort(rng.random((n_rays, n_fine), dtype=np.float32), -1))
    opt = torch.optim.Adam(list(coarse.parameters()) + list(fine.parameters()), lr=5e-3,
                           betas=(0.9, 0.999), eps=1e-7)
    res["loss"], res["psnr"] = [], []
    for step in range(3):
        enc_d = positional_encoding(viewdirs, 2)[:, None].expand(-1, n_coarse, -1)
        raw = coarse(positional_encoding(pts, n_freq), enc_d)
        rgb_c, disp_c, acc_c, weights, depth_c = raw2outputs(raw, z_vals, rays_d)
        z_mid = 0.5 * (z_vals[..., 1:] + z_vals[..., :-1])
        z_samples, inds = sample_pdf(z_mid, weights[..., 1:-1], u_fine)
        z_samples = z_samples.detach()
        z_all, order = torch.sort(torch.cat([z_vals, z_samples], -1), -1)
        pts_f = rays_o[..., None, :] + rays_d[..., None, :] * z_all[..., :, None]
        enc_f = positional_encoding(viewdirs, 2)[:, None].expand(-1, z_all.shape[-1], -1)
        rgb_f, disp_f, acc_f, _, _ = raw2outputs(fine(positional_encoding(pts_f, n_freq), enc_f),
                                                 z_all, rays_d)
        img_loss = F.mse_loss(rgb_f, target)
        loss = img_loss + F.mse_loss(rgb_c, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["psnr"].append((-10.0 * torch.log10(img_loss)).item())
    res["rgb_fine"], res["disp"], res["acc"] = rgb_f, disp_f, acc_f
    res["depth_coarse"], res["weights"] = depth_c, weights
    res["fine_samples"], res["sort_order"] = z_samples, order
    res["search_inds"] = inds
    res["search_left"] = torch.searchsorted(torch.linspace(0, 1, 6), u_fine[:3])
    res["search_side"] = torch.searchsorted(torch.tensor([0.0, 0.25, 0.25, 1.0]),
                                            torch.tensor([0.25, 0.5]), side="right")

    # the same transmittance as an exclusive cumprod by rolling, and through logcumsumexp
    alpha = 1 - torch.exp(-F.softplus(raw[..., 3].detach()))
    trans_roll = torch.roll(torch.cumprod(1 - alpha, -1), 1, -1)
    trans_roll[:, 0] = 1.0
    res["trans_roll"] = trans_roll
    res["trans_log"] = torch.exp(torch.cat([torch.zeros(n_rays, 1),
                                            torch.cumsum(torch.log1p(-alpha), -1)[:, :-1]], -1))

    # a trilinear feature grid: grid_sample on a 5-D volume, both align_corners settings
    vol = nn.Parameter(normal(torch, rng, 1, 4, 3, 4, 5))
    decoder = nn.Linear(4, 4)
    fill_(torch, decoder, rng, 0.5)
    pts_n = (pts / 2.5).clamp(-1.3, 1.3).reshape(1, n_rays, n_coarse, 1, 3).detach()
    pts_n.requires_grad_(True)
    for align in (True, False):
        for pad in ("zeros", "border"):
            feats = F.grid_sample(vol, pts_n, mode="bilinear", padding_mode=pad,
                                  align_corners=align)
            out = decoder(feats.squeeze(-1).permute(0, 2, 3, 1))      # (1, rays, samples, 4)
            g_vol, g_pts = torch.autograd.grad(out.square().mean(), (vol, pts_n))
            res[f"grid_{align}_{pad}"] = feats
            res[f"grid_grads_{align}_{pad}"] = [g_vol, g_pts]
    res["grid_nearest"] = F.grid_sample(vol, pts_n, mode="nearest", align_corners=False)
    res["grid_reflection"] = F.grid_sample(vol, pts_n, padding_mode="reflection",
                                           align_corners=True)
    tv = (vol[:, :, 1:] - vol[:, :, :-1]).square().mean() + \
        (vol[..., 1:, :] - vol[..., :-1, :]).square().mean() + \
        (vol[..., 1:] - vol[..., :-1]).square().mean()
    res["tv"] = tv
    # the explicit grid trained with a render loss plus TV
    grid_opt = torch.optim.Adam([vol], lr=0.05)
    res["grid_loss"] = []
    for _ in range(3):
        sampled = F.grid_sample(vol, pts_n.detach(), align_corners=True).squeeze(-1)
        raw_g = sampled[0].permute(1, 2, 0)                       # (rays, samples, 4)
        rgb_g = raw2outputs(raw_g, z_vals, rays_d)[0]
        tv = sum((vol.diff(dim=d) ** 2).mean() for d in (2, 3, 4))
        loss = F.mse_loss(rgb_g, target) + 0.01 * tv
        grid_opt.zero_grad()
        loss.backward()
        grid_opt.step()
        res["grid_loss"].append(loss.item())
    res["vol"] = vol
    return res


PROGRAMS = [egnn_program, schnet_program, rotations_program, md_program,
            nerf_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
