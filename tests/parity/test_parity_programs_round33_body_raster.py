"""Differentiable silhouettes, mesh regularisers and 3DMM fitting written as SoftRas,
pytorch3d and DECA write them in torch, run once with `torch` bound to ember and once to
PyTorch from the same NumPy weights: a soft rasteriser (squared distances from pixels to
triangle edges by broadcasting, an inside test from edge functions, sigmoid(+-d / sigma),
1 - prod(1 - D) through log1p/exp sums), IoU loss driving vertex offsets with a sparse uniform
Laplacian, edge-length, normal-consistency and chamfer losses, and a morphable face model
fitted to landmarks (barycentric landmark embedding, Euler rotation, orthographic camera,
spherical-harmonic shading, regularisers, StepLR)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _sphere():
    """An octahedron subdivided once and pushed onto the unit sphere: 18 vertices, 32 faces."""
    verts = [[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]]
    faces = [[0, 2, 4], [2, 1, 4], [1, 3, 4], [3, 0, 4], [2, 0, 5], [1, 2, 5], [3, 1, 5],
             [0, 3, 5]]
    mids, out = {}, []

    def mid(a, b):
        key = (min(a, b), max(a, b))
        if key not in mids:
            mids[key] = len(verts)
            verts.append([(verts[a][i] + verts[b][i]) / 2 for i in range(3)])
        return mids[key]
    for a, b, c in faces:
        ab, bc, ca = mid(a, b), mid(b, c), mid(c, a)
        out += [[a, ab, ca], [ab, b, bc], [ca, bc, c], [ab, bc, ca]]
    v = np.array(verts, dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True), np.array(out, dtype=np.int64)


def _soft_rasterizer(torch):
    def rasterize_silhouette(verts2d, faces, size=12, sigma=1e-2, eps=1e-6):
        b = verts2d.shape[0]
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, size), torch.linspace(-1, 1, size),
                                indexing="ij")
        pix = torch.stack([xs, ys], -1).view(1, 1, -1, 2)            # [1, 1, P, 2]
        tri = verts2d[:, faces]                                       # [B, F, 3, 2]
        a = tri.unsqueeze(2)                                          # [B, F, 1, 3, 2]
        bb = tri.roll(-1, dims=2).unsqueeze(2)
        p = pix.unsqueeze(3)                                          # [1, 1, P, 1, 2]
        ab = bb - a
        t = (((p - a) * ab).sum(-1) / (ab * ab).sum(-1).clamp(min=eps)).clamp(0, 1)
        closest = a + t.unsqueeze(-1) * ab
        dist2 = ((p - closest) ** 2).sum(-1).min(dim=-1).values      # [B, F, P]
        cross = ab[..., 0] * (p - a)[..., 1] - ab[..., 1] * (p - a)[..., 0]
        inside = (cross > 0).all(-1) | (cross < 0).all(-1)
        sign = torch.where(inside, 1.0, -1.0)
        D = torch.sigmoid(sign * dist2 / sigma)
        D = D.clamp(max=1 - eps)
        sil = 1 - torch.exp(torch.log1p(-D).sum(dim=1))             # 1 - prod(1 - D)
        return sil.view(b, size, size)
    return rasterize_silhouette


def _mesh_losses(torch):
    F = torch.nn.functional

    def unique_edges(faces, V):
        edges = torch.cat([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]], dim=0)
        edges, _ = edges.sort(dim=1)
        edges_hash = V * edges[:, 0] + edges[:, 1]
        u, inverse_idxs = torch.unique(edges_hash, return_inverse=True)
        sorted_hash, sort_idx = torch.sort(inverse_idxs, stable=True)
        unique_mask = torch.ones(edges_hash.shape[0], dtype=torch.bool)
        unique_mask[1:] = sorted_hash[1:] != sorted_hash[:-1]
        unique_idx = sort_idx[unique_mask]
        return torch.stack([u // V, u % V], dim=1), inverse_idxs, unique_idx

    def laplacian(verts, edges):
        V = verts.shape[0]
        e0, e1 = edges.unbind(1)
        idx01 = torch.stack([e0, e1], dim=1)
        idx10 = torch.stack([e1, e0], dim=1)
        idx = torch.cat([idx01, idx10], dim=0).t()
        ones = torch.ones(idx.shape[1], dtype=torch.float32)
        A = torch.sparse_coo_tensor(idx, ones, (V, V))
        deg = torch.sparse.sum(A, dim=1).to_dense()
        deg0 = deg[e0]
        deg0 = torch.where(deg0 > 0.0, 1.0 / deg0, deg0)
        deg1 = deg[e1]
        deg1 = torch.where(deg1 > 0.0, 1.0 / deg1, deg1)
        val = torch.cat([deg0, deg1])
        L = torch.sparse_coo_tensor(idx, val, (V, V))
        idx = torch.arange(V)
        idx = torch.stack([idx, idx], dim=0)
        ones = torch.ones(idx.shape[1], dtype=torch.float32)
        L -= torch.sparse_coo_tensor(idx, ones, (V, V))
        return L

    def laplacian_smoothing(verts, L):
        return L.mm(verts).norm(dim=1).mean()

    def edge_loss(verts, edges, target_length=0.0):
        v0, v1 = verts[edges[:, 0]], verts[edges[:, 1]]
        return ((v0 - v1).norm(dim=1, p=2) - target_length).pow(2.0).mean()

    def face_normals(verts, faces):
        v0, v1, v2 = verts[faces].unbind(1)
        return F.normalize(torch.cross(v1 - v0, v2 - v0, dim=1), dim=1, eps=1e-6)

    def vertex_normals(verts, faces):
        n = torch.zeros_like(verts)
        fn = torch.cross(verts[faces[:, 1]] - verts[faces[:, 0]],
                         verts[faces[:, 2]] - verts[faces[:, 0]], dim=1)
        for k in range(3):
            n = n.index_add(0, faces[:, k], fn)
        return F.normalize(n, eps=1e-6, dim=1)

    def chamfer(x, y):
        d = torch.cdist(x, y) ** 2
        return d.min(dim=2).values.mean() + d.min(dim=1).values.mean()

    return unique_edges, laplacian, laplacian_smoothing, edge_loss, face_normals, \
        vertex_normals, chamfer


def soft_silhouette_program(torch):
    rng = np.random.default_rng(0)
    v_np, f_np = _sphere()
    verts0, faces = torch.from_numpy(v_np) * 0.5, torch.from_numpy(f_np)
    raster = _soft_rasterizer(torch)
    unique_edges, laplacian, lap_smooth, edge_loss, face_normals, vnormals, chamfer = \
        _mesh_losses(torch)
    edges, inverse, unique_idx = unique_edges(faces, verts0.shape[0])
    L = laplacian(verts0, edges)

    def project(v, dist=2.5, focal=2.0):
        z = v[..., 2:] + dist
        return focal * v[..., :2] / z

    # a target silhouette from a squashed, shifted sphere
    target_v = verts0 * torch.tensor([1.3, 0.7, 1.0]) + torch.tensor([0.1, -0.05, 0.0])
    with torch.no_grad():
        target = raster(project(target_v).unsqueeze(0), faces)
    deform = torch.nn.Parameter(torch.zeros_like(verts0))
    opt = torch.optim.Adam([deform], lr=0.02)
    res = {"losses": [], "n_edges": [edges.shape[0]], "edges": edges}
    for _ in range(3):
        verts = verts0 + deform
        sil = raster(project(verts).unsqueeze(0), faces)
        inter = (sil * target).sum()
        union = (sil + target - sil * target).sum() + 1e-6
        loss = 1 - inter / union + 0.1 * lap_smooth(verts, L) + 0.5 * edge_loss(verts, edges)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.detach())
    res["sil"], res["target"], res["deform"] = sil.detach(), target, deform.detach()
    res["grad"] = deform.grad
    res["inverse"], res["unique_idx"] = inverse, unique_idx
    res["L_dense"] = L.to_dense()
    res["L_nnz"] = [L._nnz(), int(L.is_coalesced())]
    Lc = L.coalesce()
    res["Lc"] = [Lc.indices(), Lc.values()]
    fn = face_normals(verts.detach(), faces)
    res["fn"], res["vn"] = fn, vnormals(verts.detach(), faces)
    # normal consistency over faces sharing an edge (pairs through the inverse index)
    face_of_edge = torch.arange(faces.shape[0]).repeat(3)
    order = torch.argsort(inverse, stable=True)
    pairs = face_of_edge[order].view(-1, 2)
    res["normal_consistency"] = (1 - F_cos(torch)(fn[pairs[:, 0]], fn[pairs[:, 1]])).mean()
    pts = normal(torch, rng, 1, 30, 3) * 0.5
    res["chamfer"] = chamfer(verts.detach().unsqueeze(0), pts)
    return res


def cot_laplacian_program(torch):
    # pytorch3d's cotangent Laplacian smoothing: weights that depend on the vertices, a sparse
    # matrix built from them (the legacy constructor too), sparse.sum and sparse.mm backward
    v_np, f_np = _sphere()
    res = {"losses": []}
    for legacy in (False, True):
        verts = torch.from_numpy(v_np * np.array([1.0, 0.8, 1.2], dtype=np.float32))
        verts.requires_grad_()
        faces = torch.from_numpy(f_np)
        V, F = verts.shape[0], faces.shape[0]
        face_verts = verts[faces]
        v0, v1, v2 = face_verts[:, 0], face_verts[:, 1], face_verts[:, 2]
        A = (v1 - v2).norm(dim=1)
        B = (v0 - v2).norm(dim=1)
        C = (v0 - v1).norm(dim=1)
        s = 0.5 * (A + B + C)
        area = (s * (s - A) * (s - B) * (s - C)).clamp_(min=1e-12).sqrt()
        A2, B2, C2 = A * A, B * B, C * C
        cot = torch.stack([(B2 + C2 - A2) / area, (A2 + C2 - B2) / area,
                           (A2 + B2 - C2) / area], dim=1)
        cot /= 4.0
        ii, jj = faces[:, [1, 2, 0]], faces[:, [2, 0, 1]]
        idx = torch.stack([ii, jj], dim=0).view(2, F * 3)
        if legacy:
            L = torch.sparse.FloatTensor(idx, cot.view(-1), (V, V))
        else:
            L = torch.sparse_coo_tensor(idx, cot.view(-1), (V, V))
        L = L + L.t()
        inv_areas = torch.zeros(V, dtype=torch.float32)
        inv_areas.scatter_add_(0, faces.view(-1), torch.stack([area] * 3, dim=1).view(-1))
        pos = inv_areas > 0
        inv_areas[pos] = 1.0 / inv_areas[pos]
        norm_w = torch.sparse.sum(L, dim=1).to_dense().view(-1, 1)
        pos = norm_w > 0
        norm_w[pos] = 1.0 / norm_w[pos]
        loss = (torch.sparse.mm(L, verts) * norm_w - verts).norm(dim=1).mean()
        loss.backward()
        res["losses"].append(loss.detach())
        res[f"grad_{legacy}"], res[f"L_{legacy}"] = verts.grad, L.to_dense().detach()
        res[f"inv_areas_{legacy}"] = inv_areas.detach()
    return res


def F_cos(torch):
    """cosine_similarity along the last dim."""
    return lambda a, b: torch.nn.functional.cosine_similarity(a, b, dim=-1)


def _euler_to_rotmat(torch, angles):
    x, y, z = angles[:, 0], angles[:, 1], angles[:, 2]
    cx, sx, cy, sy, cz, sz = torch.cos(x), torch.sin(x), torch.cos(y), torch.sin(y), \
        torch.cos(z), torch.sin(z)
    zeros, ones = torch.zeros_like(z), torch.ones_like(z)
    rx = torch.stack([ones, zeros, zeros, zeros, cx, -sx, zeros, sx, cx], 1).view(-1, 3, 3)
    ry = torch.stack([cy, zeros, sy, zeros, ones, zeros, -sy, zeros, cy], 1).view(-1, 3, 3)
    rz = torch.stack([cz, -sz, zeros, sz, cz, zeros, zeros, zeros, ones], 1).view(-1, 3, 3)
    return rz.bmm(ry).bmm(rx)


def _sh_basis(torch, normals):
    """The nine real spherical harmonics (DECA's constant factors) at unit normals."""
    pi = np.pi
    c = [1 / np.sqrt(4 * pi), ((2 * pi) / 3) * (np.sqrt(3 / (4 * pi))),
         ((2 * pi) / 3) * (np.sqrt(3 / (4 * pi))), ((2 * pi) / 3) * (np.sqrt(3 / (4 * pi))),
         (pi / 4) * (3) * (np.sqrt(5 / (12 * pi))), (pi / 4) * (3) * (np.sqrt(5 / (12 * pi))),
         (pi / 4) * (3) * (np.sqrt(5 / (12 * pi))), (pi / 4) * (3 / 2) * (np.sqrt(5 / (12 * pi))),
         (pi / 4) * (1 / 2) * (np.sqrt(5 / (4 * pi)))]
    N = normals
    sh = torch.stack([
        N[..., 0] * 0. + 1., N[..., 0], N[..., 1], N[..., 2], N[..., 0] * N[..., 1],
        N[..., 0] * N[..., 2], N[..., 1] * N[..., 2], N[..., 0] ** 2 - N[..., 1] ** 2,
        3 * (N[..., 2] ** 2) - 1], -1)
    return sh * torch.tensor(c, dtype=torch.float32)


def morphable_model_program(torch):
    rng = np.random.default_rng(1)
    F = torch.nn.functional
    v_np, f_np = _sphere()
    V, n_shape, n_exp, n_lmk = v_np.shape[0], 5, 3, 6
    faces = torch.from_numpy(f_np)
    mean = torch.from_numpy(v_np * np.float32(0.8))
    shapedirs = normal(torch, rng, V, 3, n_shape + n_exp) * 0.05
    lmk_faces_idx = torch.from_numpy(rng.choice(f_np.shape[0], n_lmk, replace=False))
    bary = rng.uniform(0.05, 1, (n_lmk, 3)).astype(np.float32)
    lmk_bary = torch.from_numpy(bary / bary.sum(1, keepdims=True))
    _, _, _, _, _, vertex_normals, _ = _mesh_losses(torch)

    class Flame(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("v_template", mean)
            self.register_buffer("shapedirs", shapedirs)
            self.register_buffer("lmk_faces_idx", lmk_faces_idx)
            self.register_buffer("lmk_bary_coords", lmk_bary)
            self.register_buffer("faces_tensor", faces)

        def forward(self, shape_params, expression_params, pose):
            b = shape_params.shape[0]
            betas = torch.cat([shape_params, expression_params], dim=1)
            v = self.v_template + torch.einsum('bl,mkl->bmk', [betas, self.shapedirs])
            v = torch.bmm(v, _euler_to_rotmat(torch, pose).transpose(1, 2))
            lmk_faces = torch.index_select(self.faces_tensor, 0, self.lmk_faces_idx.view(-1))
            lmk_vertices = v[:, lmk_faces.view(-1)].view(b, -1, 3, 3)
            landmarks = torch.einsum('blfi,blf->bli',
                                     [lmk_vertices, self.lmk_bary_coords.expand(b, -1, -1)])
            return v, landmarks

    def batch_orth_proj(X, camera):
        camera = camera.clone().view(-1, 1, 3)
        X_trans = X[:, :, :2] + camera[:, :, 1:]
        X_trans = torch.cat([X_trans, X[:, :, 2:]], 2)
        Xn = (camera[:, :, 0:1] * X_trans)
        return Xn

    flame = Flame()
    B = 2
    gt_lmk = normal(torch, rng, B, n_lmk, 2) * 0.3
    gt_color = torch.from_numpy(rng.uniform(0, 1, (B, V, 3)).astype(np.float32))
    shape = torch.nn.Parameter(torch.zeros(B, n_shape))
    exp = torch.nn.Parameter(torch.zeros(B, n_exp))
    pose = torch.nn.Parameter(normal(torch, rng, B, 3) * 0.1)
    cam = torch.nn.Parameter(torch.tensor([[1.0, 0.0, 0.0]]).repeat(B, 1))
    albedo = torch.nn.Parameter(torch.full((B, V, 3), 0.5))
    lights = torch.nn.Parameter(torch.zeros(B, 9, 3))
    with torch.no_grad():
        lights[:, 0, :] = 1.0
    params = [{"params": [shape, exp, pose, cam], "lr": 0.05},
              {"params": [albedo, lights], "lr": 0.02}]
    opt = torch.optim.Adam(params)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    lmk_w = torch.ones(n_lmk)
    lmk_w[:2] = 3.0                               # heavier weights on the face contour
    res = {"losses": [], "lrs": []}
    for _ in range(4):
        verts, lmk3d = flame(shape, exp, pose)
        lmk2d = batch_orth_proj(lmk3d, cam)[:, :, :2]
        lmk2d[:, :, 1:] = -lmk2d[:, :, 1:]        # image y points down
        lmk_loss = (((lmk2d - gt_lmk) ** 2).sum(-1) * lmk_w).mean()
        normals = vertex_normals(verts[0], faces).unsqueeze(0)
        normals = torch.cat([normals, vertex_normals(verts[1], faces).unsqueeze(0)])
        shading = torch.einsum('bvk,bkc->bvc', _sh_basis(torch, normals), lights)
        color = albedo * shading
        photo = F.l1_loss(color, gt_color)
        reg = (shape ** 2).sum() * 1e-4 + (exp ** 2).sum() * 1e-4 \
            + ((albedo - 0.5) ** 2).mean() * 1e-2
        loss = lmk_loss + photo + reg
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["losses"].append(loss.detach())
        res["lrs"].append(sched.get_last_lr()[1])
    res["lmk2d"], res["verts"] = lmk2d.detach(), verts.detach()
    res["params"] = [shape.detach(), exp.detach(), pose.detach(), cam.detach()]
    res["lights"], res["shading"] = lights.detach(), shading.detach()
    res["sh_row"] = _sh_basis(torch, torch.tensor([[0.0, 0.0, 1.0]]))
    res["rot"] = _euler_to_rotmat(torch, pose.detach())
    return res


PROGRAMS = [soft_silhouette_program, cot_laplacian_program, morphable_model_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
