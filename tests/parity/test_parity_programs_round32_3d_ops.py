"""More 3-D programs as their reference repositories write them in torch, run once with `torch`
bound to ember and once to PyTorch from the same NumPy weights: Convolutional Occupancy Networks
(scatter-mean of point features onto planes and a grid, trilinear grid_sample on 5-D volumes),
CenterPoint heads (Gaussian heatmaps drawn with torch.max(..., out=) into views, max-pool NMS,
top-k decoding, Gaussian focal loss, limit_period/atan2), pytorch3d's cotangent Laplacian with
legacy sparse constructors and sparse gradients, an auto-decoder on nn.Embedding(sparse=True)
with SparseAdam, and BEVFormer's temporal alignment by affine_grid. Siblings:
test_parity_programs_round32_3d.py and _driving.py."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _normalize_coordinate(torch, p, padding=0.1, plane="xz"):
    if plane == "xz":
        xy = p[:, :, [0, 2]]
    elif plane == "xy":
        xy = p[:, :, [0, 1]]
    else:
        xy = p[:, :, [1, 2]]
    xy_new = xy / (1 + padding + 10e-6)
    xy_new = xy_new + 0.5
    if xy_new.max() >= 1:
        xy_new[xy_new >= 1] = 1 - 10e-6
    if xy_new.min() < 0:
        xy_new[xy_new < 0] = 0.0
    return xy_new


def _coordinate2index(torch, x, reso, coord_type="2d"):
    x = (x * reso).long()
    if coord_type == "2d":
        index = x[:, :, 0] + reso * x[:, :, 1]
    else:
        index = x[:, :, 0] + reso * (x[:, :, 1] + reso * x[:, :, 2])
    index = index[:, None, :]
    return index


def _scatter_mean(torch, src, index, dim_size):
    # torch_scatter.scatter_mean(src, index, out=zeros) written with scatter_add_
    out = src.new_zeros(src.size(0), src.size(1), dim_size)
    out.scatter_add_(2, index.expand_as(src), src)
    count = src.new_zeros(src.size(0), 1, dim_size)
    count.scatter_add_(2, index, torch.ones_like(index, dtype=src.dtype))
    count.clamp_(min=1)
    return out / count


def convonet_program(torch):
    rng = np.random.default_rng(328)
    nn, F = torch.nn, torch.nn.functional
    res = {"losses": []}
    reso, c_dim, B, T = 4, 6, 2, 12
    fc_pos = nn.Linear(3, c_dim)
    unet = nn.Sequential(nn.Conv2d(c_dim, c_dim, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(c_dim, c_dim, 3, padding=1))
    unet3d = nn.Conv3d(c_dim, c_dim, 3, padding=1)
    fc_c = nn.Linear(c_dim, 8)
    fc_p = nn.Linear(3, 8)
    fc_out = nn.Linear(8, 1)
    mods = [fc_pos, unet, unet3d, fc_c, fc_p, fc_out]
    for m in mods:
        fill_(torch, m, rng, 0.3)
    opt = torch.optim.Adam([p for m in mods for p in m.parameters()], lr=1e-3)
    p_in = torch.from_numpy(rng.uniform(-0.55, 0.55, (B, T, 3)).astype(np.float32))
    p_query = torch.from_numpy(rng.uniform(-0.5, 0.5, (B, 10, 3)).astype(np.float32))
    occ = (p_query.norm(dim=-1) < 0.35).float()
    for step in range(3):
        opt.zero_grad()
        c = fc_pos(p_in)                                   # B, T, C
        fea = {}
        for plane in ("xz", "xy", "yz"):
            xy = _normalize_coordinate(torch, p_in.clone(), plane=plane)
            index = _coordinate2index(torch, xy, reso)
            fea_plane = _scatter_mean(torch, c.permute(0, 2, 1), index, reso ** 2)
            fea_plane = fea_plane.reshape(p_in.size(0), c_dim, reso, reso)
            fea[plane] = unet(fea_plane)
        # the grid: normalise_3d_coordinate + coordinate2index(3d)
        p_nor = p_in / (1 + 0.1 + 10e-4) + 0.5
        p_nor = p_nor.clamp(0, 1 - 10e-4)
        index = _coordinate2index(torch, p_nor, reso, coord_type="3d")
        fea_grid = _scatter_mean(torch, c.permute(0, 2, 1), index, reso ** 3)
        fea_grid = fea_grid.reshape(B, c_dim, reso, reso, reso)
        fea["grid"] = unet3d(fea_grid)
        # decoder: sample_plane_feature + sample_grid_feature
        cq = 0
        for plane in ("xz", "xy", "yz"):
            xy = _normalize_coordinate(torch, p_query.clone(), plane=plane)
            xy = xy[:, :, None].float()
            vgrid = 2.0 * xy - 1.0
            cq = cq + F.grid_sample(fea[plane], vgrid, padding_mode="border", align_corners=True,
                                    mode="bilinear").squeeze(-1)
        p_nor = p_query / (1 + 0.1 + 10e-4) + 0.5
        vgrid = 2.0 * p_nor[:, :, None, None].float() - 1.0
        cq = cq + F.grid_sample(fea["grid"], vgrid, padding_mode="border", align_corners=True,
                                mode="bilinear").squeeze(-1).squeeze(-1)
        cq = cq.transpose(1, 2)
        net = fc_p(p_query) + fc_c(cq)
        logits = fc_out(F.relu(net)).squeeze(-1)
        loss = F.binary_cross_entropy_with_logits(logits, occ, reduction="none").sum(-1).mean()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["logits"] = logits
    res["grid_fea"] = fea["grid"]
    res["pos_grad"] = fc_pos.weight.grad
    res["unet3d_grad"] = unet3d.weight.grad
    # 5-D grid_sample modes, gradients w.r.t. the grid
    vol = normal(torch, rng, 1, 2, 3, 4, 5).requires_grad_()
    g = torch.from_numpy(rng.uniform(-1.1, 1.1, (1, 2, 3, 2, 3)).astype(np.float32))
    g.requires_grad_()
    outs = [F.grid_sample(vol, g, mode=m, padding_mode=p, align_corners=a)
            for m, p, a in (("bilinear", "zeros", False), ("bilinear", "border", True),
                            ("bilinear", "reflection", False), ("nearest", "zeros", True))]
    sum((o * o).sum() for o in outs).backward()
    res["gs3"], res["vol_grad"], res["g_grad"] = outs, vol.grad, g.grad
    return res


def _gaussian_radius(det_size, min_overlap=0.5):
    height, width = det_size
    a1 = 1
    b1 = (height + width)
    c1 = width * height * (1 - min_overlap) / (1 + min_overlap)
    sq1 = math.sqrt(b1 ** 2 - 4 * a1 * c1)
    r1 = (b1 + sq1) / 2
    a2 = 4
    b2 = 2 * (height + width)
    c2 = (1 - min_overlap) * width * height
    sq2 = math.sqrt(b2 ** 2 - 4 * a2 * c2)
    r2 = (b2 + sq2) / 2
    a3 = 4 * min_overlap
    b3 = -2 * min_overlap * (height + width)
    c3 = (min_overlap - 1) * width * height
    sq3 = math.sqrt(b3 ** 2 - 4 * a3 * c3)
    r3 = (b3 + sq3) / 2
    return min(r1, r2, r3)


def _gaussian_2d(torch, shape, sigma=1):
    m, n = [(ss - 1.) / 2. for ss in shape]
    y = torch.arange(-m, m + 1, dtype=torch.float32)[:, None]
    x = torch.arange(-n, n + 1, dtype=torch.float32)[None, :]
    h = torch.exp(-(x * x + y * y) / (2 * sigma * sigma))
    h[h < torch.finfo(h.dtype).eps * h.max()] = 0
    return h


def _draw_heatmap_gaussian(torch, heatmap, center, radius, k=1):
    # mmdet3d draw_heatmap_gaussian: torch.max(..., out=masked_heatmap) writes into the view
    diameter = 2 * radius + 1
    gaussian = _gaussian_2d(torch, (diameter, diameter), sigma=diameter / 6)
    x, y = int(center[0]), int(center[1])
    height, width = heatmap.shape[0:2]
    left, right = min(x, radius), min(width - x, radius + 1)
    top, bottom = min(y, radius), min(height - y, radius + 1)
    masked_heatmap = heatmap[y - top:y + bottom, x - left:x + right]
    masked_gaussian = gaussian[radius - top:radius + bottom, radius - left:radius + right]
    if min(masked_gaussian.shape) > 0 and min(masked_heatmap.shape) > 0:
        torch.max(masked_heatmap, masked_gaussian * k, out=masked_heatmap)
    return heatmap


def _gaussian_focal_loss(torch, pred, gaussian_target, alpha=2.0, gamma=4.0):
    eps = 1e-12
    pos_weights = gaussian_target.eq(1)
    neg_weights = (1 - gaussian_target).pow(gamma)
    pos_loss = -(pred + eps).log() * (1 - pred).pow(alpha) * pos_weights
    neg_loss = -(1 - pred + eps).log() * pred.pow(alpha) * neg_weights
    return pos_loss + neg_loss


def _transpose_and_gather_feat(feat, ind):
    feat = feat.permute(0, 2, 3, 1).contiguous()
    feat = feat.view(feat.size(0), -1, feat.size(3))
    dim = feat.size(2)
    ind = ind.unsqueeze(2).expand(ind.size(0), ind.size(1), dim)
    return feat.gather(1, ind)


def _limit_period(torch, val, offset=0.5, period=np.pi):
    return val - torch.floor(val / period + offset) * period


def centerpoint_program(torch):
    rng = np.random.default_rng(329)
    nn, F = torch.nn, torch.nn.functional
    res = {"losses": []}
    H = W = 12
    boxes = [(2.3, 3.1, 3.0, 2.0, 0.3), (8.6, 7.2, 4.0, 3.0, -2.9), (5.0, 10.4, 2.0, 2.0, 1.2)]
    heatmap = torch.zeros(1, H, W)
    ind = torch.zeros(1, 4, dtype=torch.int64)
    mask = torch.zeros(1, 4, dtype=torch.uint8)
    anno = torch.zeros(1, 4, 4)
    for k, (x, y, l_, w, yaw) in enumerate(boxes):
        radius = _gaussian_radius((l_, w), min_overlap=0.1)
        radius = max(2, int(radius))
        center = torch.tensor([x, y], dtype=torch.float32)
        center_int = center.to(torch.int32)
        _draw_heatmap_gaussian(torch, heatmap[0], center_int, radius)
        ind[0, k] = center_int[1] * W + center_int[0]
        mask[0, k] = 1
        anno[0, k] = torch.cat([center - center_int.float(),
                                torch.tensor([math.sin(yaw), math.cos(yaw)])])
    res["heatmap"] = heatmap
    res["ind"], res["mask_dtype"] = ind, [str(mask.dtype).split(".")[-1]]
    # ConvModule(bias="auto"): no bias before a norm layer
    shared = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                           nn.ReLU())
    hm_head = nn.Conv2d(8, 1, 1)
    reg_head = nn.Conv2d(8, 4, 1)
    for m in (shared, hm_head, reg_head):
        fill_(torch, m, rng, 0.3)
    hm_head.bias.data.fill_(-2.19)
    opt = torch.optim.AdamW([p for m in (shared, hm_head, reg_head) for p in m.parameters()],
                            lr=1e-3, amsgrad=True)
    x = normal(torch, rng, 1, 4, H, W)
    for step in range(3):
        opt.zero_grad()
        f = shared(x)
        hm = torch.clamp(hm_head(f).sigmoid_(), min=1e-4, max=1 - 1e-4)
        num_pos = heatmap.eq(1).float().sum().item()
        hm_loss = _gaussian_focal_loss(torch, hm, heatmap).sum() / max(num_pos, 1)
        pred = _transpose_and_gather_feat(reg_head(f), ind)
        m = mask.unsqueeze(2).expand_as(anno).float()
        isnotnan = (~torch.isnan(anno)).float()
        m *= isnotnan
        loss_reg = F.l1_loss(pred * m, anno * m, reduction="none").sum() / (m.sum() + 1e-4)
        loss = hm_loss + 0.25 * loss_reg
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["hm_bias"] = hm_head.bias
    # decode: max-pool NMS, topk over classes*H*W, atan2 heading, limit_period
    with torch.no_grad():
        shared.eval()
        f = shared(x)
        heat = hm_head(f).sigmoid()
        hmax = F.max_pool2d(heat, (3, 3), stride=1, padding=1)
        keep = (hmax == heat).float()
        heat = heat * keep
        batch, cat, height, width = heat.size()
        topk_scores, topk_inds = torch.topk(heat.view(batch, cat, -1), 3)
        topk_inds = topk_inds % (height * width)
        topk_ys = (topk_inds.float() / torch.tensor(width, dtype=torch.float)).int().float()
        topk_xs = (topk_inds % width).int().float()
        reg = _transpose_and_gather_feat(reg_head(f), topk_inds.view(batch, -1))
        rot = torch.atan2(reg[..., 2], reg[..., 3])
        res["scores"], res["inds"] = topk_scores, topk_inds
        res["xs"], res["ys"], res["rot"] = topk_xs, topk_ys, rot
        res["limit"] = _limit_period(torch, torch.tensor([-4.0, -1.0, 0.2, 1.7, 3.5, 7.0]))
        res["keep_n"] = [int(keep.sum())]
        res["floor_div"] = torch.div(topk_inds, width, rounding_mode="floor")
    return res


def _cot_laplacian(torch, verts, faces, eps=1e-12):
    # pytorch3d ops/laplacian_matrices.py cot_laplacian, with the legacy constructors
    V, F = verts.shape[0], faces.shape[0]
    face_verts = verts[faces]
    v0, v1, v2 = face_verts[:, 0], face_verts[:, 1], face_verts[:, 2]
    A = (v1 - v2).norm(dim=1)
    B = (v0 - v2).norm(dim=1)
    C = (v0 - v1).norm(dim=1)
    s = 0.5 * (A + B + C)
    area = (s * (s - A) * (s - B) * (s - C)).clamp_(min=eps).sqrt()
    A2, B2, C2 = A * A, B * B, C * C
    cota = (B2 + C2 - A2) / area
    cotb = (A2 + C2 - B2) / area
    cotc = (A2 + B2 - C2) / area
    cot = torch.stack([cota, cotb, cotc], dim=1)
    cot /= 4.0
    ii = faces[:, [1, 2, 0]]
    jj = faces[:, [2, 0, 1]]
    idx = torch.stack([ii, jj], dim=0).view(2, F * 3)
    L = torch.sparse_coo_tensor(idx, cot.view(-1), (V, V))
    L = L + L.t()
    idx = faces.view(-1)
    inv_areas = torch.zeros(V, dtype=torch.float32, device=verts.device)
    val = torch.stack([area] * 3, dim=1).view(-1)
    inv_areas.scatter_add_(0, idx, val)
    idx = inv_areas > 0
    inv_areas[idx] = 1.0 / inv_areas[idx]
    inv_areas = inv_areas.view(-1, 1)
    return L, inv_areas


def sparse_mesh_program(torch):
    rng = np.random.default_rng(330)
    res = {"losses": []}
    verts = torch.tensor([[1., 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]])
    verts = verts + normal(torch, rng, 6, 3) * 0.05
    faces = torch.tensor([[0, 2, 4], [2, 1, 4], [1, 3, 4], [3, 0, 4],
                          [2, 0, 5], [1, 2, 5], [3, 1, 5], [0, 3, 5]])
    L, inv_areas = _cot_laplacian(torch, verts, faces)
    res["L"] = L.to_dense()
    res["L_meta"] = [L.is_coalesced(), int(L._nnz()), L.sparse_dim(), L.dense_dim()]
    res["inv_areas"] = inv_areas
    Lc = L.coalesce()
    res["Lc_idx"], res["Lc_val"] = Lc.indices(), Lc.values()
    norm_w = torch.sparse.sum(L, dim=1).to_dense().view(-1, 1)
    idx = norm_w > 0
    norm_w[idx] = 1.0 / norm_w[idx]
    res["norm_w"] = norm_w
    # cot smoothing loss on a deformable mesh (mesh_laplacian_smoothing "cot")
    deform = torch.zeros(6, 3, requires_grad=True)
    with torch.no_grad():
        deform.copy_(normal(torch, rng, 6, 3) * 0.1)
    opt = torch.optim.SGD([deform], lr=0.1)
    for step in range(3):
        opt.zero_grad()
        nv = verts + deform
        with torch.no_grad():
            Ls, _ = _cot_laplacian(torch, nv, faces)
            nw = torch.sparse.sum(Ls, dim=1).to_dense().view(-1, 1)
            nw = torch.where(nw > 0, 1.0 / nw, nw)
        loss_vec = Ls.mm(nv) * nw - nv
        loss = loss_vec.norm(dim=1).mean()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["deform"] = deform
    # gradient w.r.t. the sparse matrix's values: a sparse gradient
    vals = normal(torch, rng, 5).requires_grad_()
    i = torch.tensor([[0, 1, 1, 2, 3], [1, 0, 2, 3, 3]])
    S = torch.sparse_coo_tensor(i, vals, (4, 4))
    dense = normal(torch, rng, 4, 2).requires_grad_()
    out = torch.sparse.mm(S, dense)
    out.pow(2).sum().backward()
    res["vals_grad"], res["dense_grad"] = vals.grad, dense.grad
    res["sp_out_name"] = [type(out.grad_fn).__name__]
    # legacy constructor and sparse sum over all
    T = torch.sparse.FloatTensor(i, vals.detach(), torch.Size([4, 4]))
    res["legacy"] = [str(T.dtype).split(".")[-1], str(T.layout).split(".")[-1]]
    res["legacy_sum"] = torch.sparse.sum(T)
    return res


def sparse_embedding_program(torch):
    rng = np.random.default_rng(331)
    nn = torch.nn
    res = {"losses": []}
    codes = nn.Embedding(5, 4, sparse=True, max_norm=1.0, norm_type=2.0)
    with torch.no_grad():
        codes.weight.copy_(normal(torch, rng, 5, 4) * 0.7)
    decoder = nn.Sequential(nn.Linear(4 + 2, 8), nn.Softplus(beta=10), nn.Linear(8, 1))
    fill_(torch, decoder, rng, 0.4)
    opt_codes = torch.optim.SparseAdam(list(codes.parameters()), lr=1e-2)
    opt_dec = torch.optim.Adam(decoder.parameters(), lr=1e-3)
    xy = normal(torch, rng, 12, 2)
    target = normal(torch, rng, 12, 1) * 0.1
    idx = torch.tensor([0, 2, 2, 3, 0, 2, 3, 3, 0, 0, 2, 3])
    for step in range(3):
        opt_codes.zero_grad()
        opt_dec.zero_grad()
        z = codes(idx)
        pred = decoder(torch.cat([z, xy], 1))
        loss = (pred - target).abs().mean() + 1e-2 * z.pow(2).sum(1).mean()
        loss.backward()
        g = codes.weight.grad
        res[f"grad_meta{step}"] = [g.is_sparse, g.is_coalesced(), int(g._nnz())]
        res[f"grad_dense{step}"] = g.to_dense()
        opt_codes.step()
        opt_dec.step()
        res["losses"].append(loss.item())
    res["codes"] = codes.weight
    res["norms"] = codes.weight.norm(dim=1)
    res["state_keys"] = sorted(opt_codes.state[codes.weight].keys())
    res["exp_avg"] = opt_codes.state[codes.weight]["exp_avg"].to_dense()
    # F.embedding with max_norm renormalises the weight rows it looks up, in place
    w = normal(torch, rng, 4, 3) * 2
    out = torch.nn.functional.embedding(torch.tensor([1, 3, 1]), w, max_norm=1.5, norm_type=1.0)
    res["renormed"], res["emb_out"] = w, out
    return res


def bev_temporal_program(torch):
    rng = np.random.default_rng(332)
    F = torch.nn.functional
    res = {}
    bs, C, bev_h, bev_w = 2, 3, 6, 6
    prev_bev = normal(torch, rng, bs, bev_h * bev_w, C)
    # rotate the previous BEV by the ego rotation (BEVFormer's rotate(prev_bev, angle, center))
    angles = torch.tensor([0.2, -0.5])
    shifts = torch.tensor([[0.1, -0.05], [0.0, 0.2]])
    tmp = prev_bev.reshape(bs, bev_h, bev_w, -1).permute(0, 3, 1, 2)
    cos, sin = torch.cos(angles), torch.sin(angles)
    theta = torch.stack([torch.stack([cos, -sin, shifts[:, 0]], -1),
                         torch.stack([sin, cos, shifts[:, 1]], -1)], 1)
    grid = F.affine_grid(theta, tmp.shape, align_corners=False)
    rotated = F.grid_sample(tmp, grid, mode="bilinear", padding_mode="zeros",
                            align_corners=False)
    prev = rotated.reshape(bs, C, -1).permute(0, 2, 1)
    res["grid"], res["prev"] = grid, prev
    # shift of the reference points from can_bus, stacked prev/current queries
    bev_query = normal(torch, rng, bev_h * bev_w, C)
    bev_query = bev_query.unsqueeze(1).repeat(1, bs, 1)
    bev_query = bev_query.permute(1, 0, 2)
    prev_bev2 = torch.stack([prev, bev_query], 1).reshape(bs * 2, bev_h * bev_w, -1)
    res["stacked"] = prev_bev2
    # affine_grid gradient w.r.t. theta, 3-D affine grid
    th = theta.clone().requires_grad_()
    out = F.grid_sample(tmp, F.affine_grid(th, tmp.shape, align_corners=True),
                        align_corners=True)
    out.sum().backward()
    res["theta_grad"] = th.grad
    th3 = torch.eye(3, 4).unsqueeze(0) + normal(torch, rng, 1, 3, 4) * 0.1
    res["grid3"] = F.affine_grid(th3, (1, 1, 2, 3, 4), align_corners=False)
    # greedy BEV NMS on axis-aligned boxes, written with a Python loop
    boxes = torch.from_numpy(rng.uniform(0, 5, (8, 2)).astype(np.float32))
    boxes = torch.cat([boxes, boxes + torch.from_numpy(rng.uniform(0.5, 2, (8, 2))
                                                       .astype(np.float32))], 1)
    scores = torch.from_numpy(rng.random(8).astype(np.float32))
    order = scores.sort(0, descending=True)[1]
    keep = []
    while order.numel() > 0:
        i = order[0].item()
        keep.append(i)
        if order.numel() == 1:
            break
        rest = boxes[order[1:]]
        xx1 = rest[:, 0].clamp(min=boxes[i, 0].item())
        yy1 = rest[:, 1].clamp(min=boxes[i, 1].item())
        xx2 = rest[:, 2].clamp(max=boxes[i, 2].item())
        yy2 = rest[:, 3].clamp(max=boxes[i, 3].item())
        inter = (xx2 - xx1).clamp(min=0) * (yy2 - yy1).clamp(min=0)
        area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        iou = inter / (area[i] + area[order[1:]] - inter)
        idx = (iou <= 0.2).nonzero().squeeze()
        if idx.numel() == 0:
            break
        order = order[idx + 1]
        if order.dim() == 0:
            order = order.unsqueeze(0)
    res["keep"] = keep
    return res


PROGRAMS = [convonet_program, centerpoint_program, sparse_mesh_program,
            sparse_embedding_program, bev_temporal_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
