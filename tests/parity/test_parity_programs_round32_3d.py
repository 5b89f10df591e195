"""3-D shape learning written as the reference repositories write it in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights: DeepSDF (weight-normed
auto-decoder, nn.Embedding(max_norm=) latent codes, clamped L1 SDF loss, latent regularisation,
per-shape latent optimisation against a frozen decoder), occupancy networks (conditional batch
norm, point encoder, BCE-with-logits on occupancies, IoU), mesh ops (uniform Laplacian with
torch.sparse.mm, edge lengths, normal consistency, face areas, vertex normals by index_add_)
and Chamfer distance (cdist, topk, knn gathers). Sibling _driving runs Lift-Splat-Shoot,
PointPillars, voxelisation and BEVFormer's deformable attention, _ops ConvONet, CenterPoint,
cotangent Laplacians and sparse auto-decoders; _fixes pins what they found."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _deepsdf_decoder(torch, latent, dims, latent_in, dropout=None):
    nn = torch.nn

    class Decoder(nn.Module):
        # DeepSDF networks/deep_sdf_decoder.py, weight_norm on every hidden layer
        def __init__(self):
            super().__init__()
            dims_ = [latent + 3] + dims + [1]
            self.num_layers = len(dims_)
            self.latent_in = latent_in
            for layer in range(0, self.num_layers - 1):
                if layer + 1 in latent_in:
                    out_dim = dims_[layer + 1] - dims_[0]
                else:
                    out_dim = dims_[layer + 1]
                lin = nn.Linear(dims_[layer], out_dim)
                if layer < self.num_layers - 2:
                    lin = nn.utils.weight_norm(lin)
                setattr(self, "lin" + str(layer), lin)
            self.relu = nn.ReLU()
            self.th = nn.Tanh()
            self.dropout = dropout

        def forward(self, input):
            x = input
            for layer in range(0, self.num_layers - 1):
                lin = getattr(self, "lin" + str(layer))
                if layer in self.latent_in:
                    x = torch.cat([x, input], 1)
                x = lin(x)
                if layer < self.num_layers - 2:
                    x = self.relu(x)
                    if self.dropout is not None:
                        x = nn.functional.dropout(x, p=self.dropout, training=self.training)
            return self.th(x)
    return Decoder()


def deepsdf_program(torch):
    rng = np.random.default_rng(320)
    res = {"losses": [], "recon": []}
    latent, nscenes, npts = 6, 4, 16
    decoder = _deepsdf_decoder(torch, latent, [16, 16, 16], latent_in=[2])
    fill_(torch, decoder, rng, 0.4)
    res["names"] = [n for n, _ in decoder.named_parameters()]
    code_bound = 1.0
    lat_vecs = torch.nn.Embedding(nscenes, latent, max_norm=code_bound)
    with torch.no_grad():
        lat_vecs.weight.copy_(normal(torch, rng, nscenes, latent) * 0.8)
    res["init_norms"] = lat_vecs.weight.norm(dim=1)
    loss_l1 = torch.nn.L1Loss(reduction="sum")
    optimizer_all = torch.optim.Adam([
        {"params": decoder.parameters(), "lr": 5e-3},
        {"params": lat_vecs.parameters(), "lr": 1e-2}])
    clamp_dist, code_reg_lambda = 0.1, 1e-4
    samples = torch.from_numpy(
        np.concatenate([rng.uniform(-1, 1, (nscenes, npts, 3)),
                        rng.uniform(-.3, .3, (nscenes, npts, 1))], -1).astype(np.float32))
    indices = torch.arange(nscenes).unsqueeze(-1).repeat(1, npts)
    for epoch in range(1, 4):
        decoder.train()
        for i, g in enumerate(optimizer_all.param_groups):
            g["lr"] = [5e-3, 1e-2][i] * (0.5 ** (epoch // 2))
        sdf_data = samples.reshape(-1, 4)
        num_sdf_samples = sdf_data.shape[0]
        xyz = sdf_data[:, 0:3]
        sdf_gt = sdf_data[:, 3].unsqueeze(1)
        sdf_gt = torch.clamp(sdf_gt, -clamp_dist, clamp_dist)
        xyz = torch.chunk(xyz, 2)
        idx = torch.chunk(indices.view(-1), 2)
        sdf_gt = torch.chunk(sdf_gt, 2)
        batch_loss = 0.0
        optimizer_all.zero_grad()
        for i in range(2):
            batch_vecs = lat_vecs(idx[i])
            inp = torch.cat([batch_vecs, xyz[i]], dim=1)
            pred_sdf = decoder(inp)
            pred_sdf = torch.clamp(pred_sdf, -clamp_dist, clamp_dist)
            chunk_loss = loss_l1(pred_sdf, sdf_gt[i].cuda() if False else sdf_gt[i])
            chunk_loss = chunk_loss / num_sdf_samples
            l2_size_loss = torch.sum(torch.norm(batch_vecs, dim=1))
            reg_loss = (code_reg_lambda * min(1, epoch / 100) * l2_size_loss) / num_sdf_samples
            chunk_loss = chunk_loss + reg_loss
            chunk_loss.backward()
            batch_loss += chunk_loss.item()
        torch.nn.utils.clip_grad_norm_(decoder.parameters(), 1.0)
        optimizer_all.step()
        res["losses"].append(batch_loss)
    res["lat_after"] = lat_vecs.weight
    res["lat_norms"] = lat_vecs.weight.norm(dim=1)
    res["g0"] = decoder.lin0.weight_g
    res["v0"] = decoder.lin0.weight_v
    # reconstruct.py: optimise a fresh latent against the frozen decoder
    decoder.eval()
    for p in decoder.parameters():
        p.requires_grad_(False)
    lat = torch.ones(1, latent).normal_(mean=0, std=0.01)
    with torch.no_grad():
        lat.copy_(normal(torch, rng, 1, latent) * 0.01)
    lat.requires_grad = True
    optimizer = torch.optim.Adam([lat], lr=5e-3)
    test = samples[0]
    xyz, sdf_gt = test[:, 0:3], test[:, 3].unsqueeze(1)
    sdf_gt = torch.clamp(sdf_gt, -clamp_dist, clamp_dist)
    for e in range(4):
        for g in optimizer.param_groups:
            g["lr"] = 5e-3 * (0.1 ** (e // 2))
        optimizer.zero_grad()
        latent_inputs = lat.expand(npts, -1)
        inputs = torch.cat([latent_inputs, xyz], 1)
        pred_sdf = torch.clamp(decoder(inputs), -clamp_dist, clamp_dist)
        loss = loss_l1(pred_sdf, sdf_gt)
        loss += 1e-4 * torch.mean(lat.pow(2))
        loss.backward()
        optimizer.step()
        res["recon"].append(loss.item())
    res["lat"] = lat
    res["dec_grad_none"] = [p.grad is None for p in decoder.parameters()]
    # decode_sdf on a grid with split(), under no_grad
    with torch.no_grad():
        grid = torch.stack(torch.meshgrid(torch.linspace(-1, 1, 4), torch.linspace(-1, 1, 4),
                                          torch.linspace(-1, 1, 4), indexing="ij"), -1)
        grid = grid.reshape(-1, 3)
        outs = []
        for sub in torch.split(grid, 24):
            outs.append(decoder(torch.cat([lat.expand(sub.shape[0], -1), sub], 1)).squeeze(1))
        sdf_values = torch.cat(outs)
    res["grid_sdf"] = sdf_values
    res["grid_flags"] = [sdf_values.requires_grad, sdf_values.is_contiguous()]
    return res


def _cbn_decoder(torch, dim, z_dim, c_dim, hidden):
    nn, F = torch.nn, torch.nn.functional

    class CBatchNorm1d(nn.Module):
        def __init__(self, c_dim, f_dim):
            super().__init__()
            self.conv_gamma = nn.Conv1d(c_dim, f_dim, 1)
            self.conv_beta = nn.Conv1d(c_dim, f_dim, 1)
            self.bn = nn.BatchNorm1d(f_dim, affine=False)
            nn.init.zeros_(self.conv_gamma.weight)
            nn.init.zeros_(self.conv_beta.weight)
            nn.init.ones_(self.conv_gamma.bias)
            nn.init.zeros_(self.conv_beta.bias)

        def forward(self, x, c):
            assert x.size(0) == c.size(0)
            assert c.size(1) == self.conv_gamma.in_channels
            if len(c.size()) == 2:
                c = c.unsqueeze(2)
            gamma = self.conv_gamma(c)
            beta = self.conv_beta(c)
            net = self.bn(x)
            return gamma * net + beta

    class CResnetBlockConv1d(nn.Module):
        def __init__(self, c_dim, size_in):
            super().__init__()
            self.bn_0 = CBatchNorm1d(c_dim, size_in)
            self.bn_1 = CBatchNorm1d(c_dim, size_in)
            self.fc_0 = nn.Conv1d(size_in, size_in, 1)
            self.fc_1 = nn.Conv1d(size_in, size_in, 1)
            self.actvn = nn.ReLU()
            nn.init.zeros_(self.fc_1.weight)

        def forward(self, x, c):
            net = self.fc_0(self.actvn(self.bn_0(x, c)))
            dx = self.fc_1(self.actvn(self.bn_1(net, c)))
            return x + dx

    class DecoderCBatchNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc_p = nn.Conv1d(dim, hidden, 1)
            self.fc_z = nn.Linear(z_dim, hidden)
            self.block0 = CResnetBlockConv1d(c_dim, hidden)
            self.block1 = CResnetBlockConv1d(c_dim, hidden)
            self.bn = CBatchNorm1d(c_dim, hidden)
            self.fc_out = nn.Conv1d(hidden, 1, 1)
            self.actvn = F.relu

        def forward(self, p, z, c, **kwargs):
            p = p.transpose(1, 2)
            net = self.fc_p(p)
            net = net + self.fc_z(z).unsqueeze(2)
            net = self.block0(net, c)
            net = self.block1(net, c)
            out = self.fc_out(self.actvn(self.bn(net, c)))
            return out.squeeze(1)

    class SimplePointnet(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc_pos = nn.Linear(dim, 2 * hidden)
            self.fc_0 = nn.Linear(2 * hidden, hidden)
            self.fc_1 = nn.Linear(2 * hidden, hidden)
            self.fc_c = nn.Linear(hidden, c_dim)
            self.actvn = nn.ReLU()
            self.pool = lambda x, dim=-1, keepdim=False: x.max(dim=dim, keepdim=keepdim)[0]

        def forward(self, p):
            batch_size, T, D = p.size()
            net = self.fc_pos(p)
            net = self.fc_0(self.actvn(net))
            pooled = self.pool(net, dim=1, keepdim=True).expand(net.size())
            net = torch.cat([net, pooled], dim=2)
            net = self.fc_1(self.actvn(net))
            net = self.pool(net, dim=1)
            return self.fc_c(self.actvn(net))
    return DecoderCBatchNorm(), SimplePointnet()


def _iou(torch, occ1, occ2):
    # im2mesh/common.py compute_iou on numpy-like tensors
    occ1 = occ1.reshape(occ1.shape[0], -1) >= 0.5
    occ2 = occ2.reshape(occ2.shape[0], -1) >= 0.5
    area_union = (occ1 | occ2).float().sum(axis=-1)
    area_intersect = (occ1 & occ2).float().sum(axis=-1)
    return area_intersect / area_union


def occupancy_program(torch):
    rng = np.random.default_rng(321)
    F, dist = torch.nn.functional, torch.distributions
    res = {"losses": []}
    decoder, encoder = _cbn_decoder(torch, 3, 0, 8, 12)
    decoder.fc_z = torch.nn.Linear(1, 12)
    fill_(torch, encoder, rng, 0.3)
    for name, p in decoder.named_parameters():
        with torch.no_grad():
            p.copy_(normal(torch, rng, *p.shape) * 0.2 + ("conv_gamma.bias" in name))
    params = list(decoder.parameters()) + list(encoder.parameters())
    # SGD, not the repo's Adam: biases feeding a batch norm get gradients of pure rounding noise,
    # which Adam would blow up to full steps of random sign
    opt = torch.optim.SGD(params, lr=1e-2, momentum=0.9)
    inputs = normal(torch, rng, 3, 10, 3) * 0.5
    p = torch.from_numpy(rng.uniform(-0.55, 0.55, (3, 20, 3)).astype(np.float32))
    occ = (p.norm(dim=-1) < 0.4).float()
    z = torch.empty(3, 0)
    z = torch.zeros(3, 1)
    for step in range(3):
        decoder.train()
        encoder.train()
        opt.zero_grad()
        c = encoder(inputs)
        logits = decoder(p, z, c)
        p_r = dist.Bernoulli(logits=logits)
        loss_i = F.binary_cross_entropy_with_logits(logits, occ, reduction="none")
        loss = loss_i.sum(-1).mean()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
        res[f"probs{step}"] = p_r.probs
    res["running_mean"] = decoder.block0.bn_0.bn.running_mean
    res["running_var"] = decoder.block0.bn_0.bn.running_var
    res["nbt"] = [int(decoder.bn.bn.num_batches_tracked)]
    res["fc_out_grad"] = decoder.fc_out.weight.grad
    decoder.eval()
    encoder.eval()
    with torch.no_grad():
        c = encoder(inputs)
        logits = decoder(p, z, c)
        occ_iou_hat_np = (dist.Bernoulli(logits=logits).probs >= 0.2)
        res["iou"] = _iou(torch, occ, occ_iou_hat_np.float())
        res["iou_mean"] = _iou(torch, occ, occ_iou_hat_np.float()).mean()
        res["eval_logits"] = logits
        threshold = np.log(0.2) - np.log(1. - 0.2)
        res["thr_count"] = [int((logits >= threshold).sum())]
        res["ent"] = dist.Bernoulli(logits=logits).entropy().mean()
        res["lp"] = dist.Bernoulli(logits=logits).log_prob(occ).sum(-1)
    return res


def _faces_to_edges(torch, faces):
    # pytorch3d Meshes.edges_packed: sorted, unique undirected edges and face -> edge map
    F = faces.shape[0]
    v0, v1, v2 = faces.chunk(3, dim=1)
    e01 = torch.cat([v0, v1], dim=1)
    e12 = torch.cat([v1, v2], dim=1)
    e20 = torch.cat([v2, v0], dim=1)
    edges = torch.cat([e12, e20, e01], dim=0)
    edges, _ = edges.sort(dim=1)
    V = int(faces.max()) + 1
    edges_hash = V * edges[:, 0] + edges[:, 1]
    u, inverse_idxs = torch.unique(edges_hash, return_inverse=True)
    edges_packed = torch.stack([u // V, u % V], dim=1)
    faces_packed_to_edges = inverse_idxs.reshape(3, F).t()
    return edges_packed, faces_packed_to_edges


def _laplacian(torch, verts, edges):
    # pytorch3d ops/laplacian_matrices.py laplacian(): uniform weights, sparse COO
    V = verts.shape[0]
    e0, e1 = edges.unbind(1)
    idx01 = torch.stack([e0, e1], dim=1)
    idx10 = torch.stack([e1, e0], dim=1)
    idx = torch.cat([idx01, idx10], dim=0).t()
    ones = torch.ones(idx.shape[1], dtype=torch.float32, device=verts.device)
    A = torch.sparse_coo_tensor(idx, ones, (V, V))
    deg = torch.sparse.sum(A, dim=1).to_dense()
    deg0 = deg[e0]
    deg0 = torch.where(deg0 > 0.0, 1.0 / deg0, deg0)
    deg1 = deg[e1]
    deg1 = torch.where(deg1 > 0.0, 1.0 / deg1, deg1)
    val = torch.cat([deg0, deg1])
    L = torch.sparse_coo_tensor(idx, val, (V, V))
    idx = torch.arange(V, device=verts.device)
    idx = torch.stack([idx, idx], dim=0)
    ones = torch.ones(idx.shape[1], dtype=torch.float32, device=verts.device)
    L -= torch.sparse_coo_tensor(idx, ones, (V, V))
    return L


def _octahedron(torch):
    verts = torch.tensor([[1., 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]])
    faces = torch.tensor([[0, 2, 4], [2, 1, 4], [1, 3, 4], [3, 0, 4],
                          [2, 0, 5], [1, 2, 5], [3, 1, 5], [0, 3, 5]])
    return verts, faces


def mesh_program(torch):
    rng = np.random.default_rng(322)
    F = torch.nn.functional
    res = {"losses": []}
    verts, faces = _octahedron(torch)
    edges, f2e = _faces_to_edges(torch, faces)
    res["edges"], res["f2e"] = edges, f2e
    L = _laplacian(torch, verts, edges)
    res["L_dense"] = L.to_dense()
    res["L_flags"] = [L.is_sparse, L.is_coalesced(), str(L.layout).split(".")[-1]]
    target = normal(torch, rng, 40, 3)
    target = target / target.norm(dim=1, keepdim=True)
    deform = torch.full(verts.shape, 0.0, requires_grad=True)
    with torch.no_grad():
        deform.copy_(normal(torch, rng, *verts.shape) * 0.05)
    optimizer = torch.optim.SGD([deform], lr=0.5, momentum=0.9)
    for it in range(4):
        optimizer.zero_grad()
        new_verts = verts + deform
        # sample points on faces with fixed barycentrics (sample_points_from_meshes)
        v0, v1, v2 = new_verts[faces].unbind(1)
        w = torch.from_numpy(np.random.default_rng(it).dirichlet([1, 1, 1], (8, 5))
                             .astype(np.float32))
        pts = (w[..., 0:1] * v0[:, None] + w[..., 1:2] * v1[:, None]
               + w[..., 2:3] * v2[:, None]).reshape(-1, 3)
        d = torch.cdist(pts[None], target[None])[0] ** 2
        loss_chamfer = d.min(1)[0].mean() + d.min(0)[0].mean()
        # mesh_edge_loss
        v_e = new_verts[edges]
        loss_edge = ((v_e[:, 0] - v_e[:, 1]).norm(dim=1, p=2) - 0.0) ** 2.0
        loss_edge = loss_edge.mean()
        # mesh_laplacian_smoothing uniform: norm of L @ verts
        Lv = torch.sparse.mm(L, new_verts)
        loss_lap = Lv.norm(dim=1).mean()
        # mesh_normal_consistency: faces sharing an edge
        face_normals = torch.cross(v1 - v0, v2 - v0, dim=1)
        fa, fb = [], []
        for e in range(edges.shape[0]):
            adj = (f2e == e).any(1).nonzero().flatten().tolist()
            fa.append(adj[0])
            fb.append(adj[1])
        n0 = face_normals[torch.tensor(fa)]
        n1 = face_normals[torch.tensor(fb)]
        loss_normal = (1 - F.cosine_similarity(n0, n1, dim=1, eps=1e-6)).mean()
        loss = loss_chamfer + 1.0 * loss_edge + 0.1 * loss_normal + 0.1 * loss_lap
        loss.backward()
        optimizer.step()
        res["losses"].append(loss.item())
    res["deform"], res["deform_grad"] = deform, deform.grad
    with torch.no_grad():
        new_verts = verts + deform
        v0, v1, v2 = new_verts[faces].unbind(1)
        face_normals = torch.cross(v1 - v0, v2 - v0, dim=1)
        res["areas"] = face_normals.norm(dim=1) * 0.5
        vn = torch.zeros_like(new_verts)
        vn.index_add_(0, faces[:, 0], face_normals)
        vn.index_add_(0, faces[:, 1], face_normals)
        vn.index_add_(0, faces[:, 2], face_normals)
        res["vert_normals"] = F.normalize(vn, eps=1e-6, dim=1)
        # one smoothing step of Taubin-style uniform Laplacian, in place
        smoothed = new_verts.clone()
        smoothed += 0.5 * torch.sparse.mm(L, smoothed)
        res["smoothed"] = smoothed
        res["lap_mv"] = torch.mv(L.to_dense(), new_verts[:, 0])
    return res


def _knn_points(torch, p1, p2, K, lengths2=None):
    # pytorch3d knn_points done with cdist + topk; padded points masked by lengths2
    d = torch.cdist(p1, p2) ** 2
    if lengths2 is not None:
        mask = torch.arange(p2.shape[1])[None] >= lengths2[:, None]
        d = d.masked_fill(mask[:, None, :], float("inf"))
    dists, idx = d.topk(K, dim=2, largest=False, sorted=True)
    return dists, idx


def _knn_gather(torch, x, idx):
    N, M, U = x.shape
    _N, L, K = idx.shape
    idx_expanded = idx[:, :, :, None].expand(-1, -1, -1, U)
    x_out = x[:, :, None].expand(-1, -1, K, -1).gather(1, idx_expanded)
    return x_out


def chamfer_program(torch):
    rng = np.random.default_rng(323)
    res = {}
    x = normal(torch, rng, 2, 12, 3).requires_grad_()
    y = normal(torch, rng, 2, 9, 3)
    xn = normal(torch, rng, 2, 12, 3)
    yn = normal(torch, rng, 2, 9, 3)
    x_lengths = torch.tensor([12, 10])
    y_lengths = torch.tensor([9, 7])
    # pytorch3d chamfer_distance with lengths, point_reduction="mean", normals
    x_nn = _knn_points(torch, x, y, 1, y_lengths)
    y_nn = _knn_points(torch, y, x, 1, x_lengths)
    cham_x = x_nn[0][..., 0]
    cham_y = y_nn[0][..., 0]
    x_mask = torch.arange(12)[None] >= x_lengths[:, None]
    y_mask = torch.arange(9)[None] >= y_lengths[:, None]
    cham_x[x_mask] = 0.0
    cham_y[y_mask] = 0.0
    x_normals_near = _knn_gather(torch, yn, x_nn[1])[..., 0, :]
    y_normals_near = _knn_gather(torch, xn, y_nn[1])[..., 0, :]
    cham_norm_x = 1 - torch.abs(torch.nn.functional.cosine_similarity(xn, x_normals_near,
                                                                      dim=2, eps=1e-6))
    cham_norm_y = 1 - torch.abs(torch.nn.functional.cosine_similarity(yn, y_normals_near,
                                                                      dim=2, eps=1e-6))
    cham_norm_x[x_mask] = 0.0
    cham_norm_y[y_mask] = 0.0
    cham_x = cham_x.sum(1) / x_lengths
    cham_y = cham_y.sum(1) / y_lengths
    cham_dist = (cham_x + cham_y).sum() / 2
    cham_normals = ((cham_norm_x.sum(1) / x_lengths) + (cham_norm_y.sum(1) / y_lengths)).sum()
    (cham_dist + cham_normals).backward()
    res["cham"], res["cham_n"], res["xgrad"] = cham_dist, cham_normals, x.grad
    res["idx"] = x_nn[1]
    res["dtypes"] = [str(cham_x.dtype).split(".")[-1], str(x_nn[1].dtype).split(".")[-1]]
    # F-score at a threshold, precision/recall from nearest distances
    with torch.no_grad():
        d = torch.cdist(x[0], y[0])
        d1 = d.min(1).values
        d2 = d.min(0).values
        th = 1.0
        precision = (d1 < th).float().mean()
        recall = (d2 < th).float().mean()
        res["fscore"] = 2 * recall * precision / (recall + precision + 1e-8)
        # knn graph (DGCNN-style) with topk on negative pairwise distance
        pts = x[0].detach()
        inner = -2 * torch.matmul(pts, pts.transpose(1, 0))
        xx = torch.sum(pts ** 2, dim=1, keepdim=True)
        pairwise = -xx - inner - xx.transpose(1, 0)
        res["knn_idx"] = pairwise.topk(k=4, dim=-1)[1]
        res["cdist_modes"] = [
            torch.cdist(x[0], y[0], compute_mode="use_mm_for_euclid_dist"),
            torch.cdist(x[0], y[0], compute_mode="donot_use_mm_for_euclid_dist"),
            torch.cdist(x[0], y[0], p=1.0), torch.cdist(x[0], y[0], p=float("inf"))]
    # cdist backward with p=2 through batched shapes
    a = normal(torch, rng, 2, 5, 4).requires_grad_()
    b = normal(torch, rng, 2, 6, 4).requires_grad_()
    dd = torch.cdist(a, b)
    (dd.min(-1).values.sum() + dd.kthvalue(2, dim=1).values.sum()).backward()
    res["agrad"], res["bgrad"] = a.grad, b.grad
    # topk(largest=False) of equal-distance points keeps values sorted
    res["topk_vals"] = dd.detach().topk(3, dim=-1, largest=False).values
    return res


PROGRAMS = [deepsdf_program, occupancy_program, mesh_program, chamfer_program]
TOLERANCES = {
    # fc_out's weight gradient sums 60 point terms of size ~1 that cancel to 0.09
    "occupancy_program": (1e-5, 1e-5),
    # cdist via mm and float32 sums over different orders; Adam normalises small gradients
    "mesh_program": (2e-5, 2e-6),
}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
