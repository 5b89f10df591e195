"""Driving perception written as the reference repositories write it in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights: Lift-Splat-Shoot
(frustum, camera geometry, depth distribution outer product, voxel pooling by ranks, argsort and
the cumsum trick as a custom autograd.Function, BEV scatter), PointPillars (pillar feature net,
scatter to a BEV canvas, anchor targets, focal and sin-difference losses), VoxelNet-style
voxelisation (unique(return_inverse), scatter_reduce amax/mean) and BEVFormer's multi-scale
deformable attention by grid_sample. Sibling of test_parity_programs_round32_3d.py."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _gen_dx_bx(torch, xbound, ybound, zbound):
    dx = torch.Tensor([row[2] for row in [xbound, ybound, zbound]])
    bx = torch.Tensor([row[0] + row[2] / 2.0 for row in [xbound, ybound, zbound]])
    nx = torch.LongTensor([(row[1] - row[0]) / row[2] for row in [xbound, ybound, zbound]])
    return dx, bx, nx


def _quick_cumsum(torch):
    class QuickCumsum(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, geom_feats, ranks):
            x = x.cumsum(0)
            kept = torch.ones(x.shape[0], device=x.device, dtype=torch.bool)
            kept[:-1] = (ranks[1:] != ranks[:-1])
            x, geom_feats = x[kept], geom_feats[kept]
            x = torch.cat((x[:1], x[1:] - x[:-1]))
            ctx.save_for_backward(kept)
            ctx.mark_non_differentiable(geom_feats)
            return x, geom_feats

        @staticmethod
        def backward(ctx, gradx, gradgeom):
            kept, = ctx.saved_tensors
            back = torch.cumsum(kept, 0)
            back[kept] -= 1
            val = gradx[back]
            return val, None, None
    return QuickCumsum


def lss_program(torch):
    rng = np.random.default_rng(324)
    nn = torch.nn
    res = {"losses": []}
    B, N, D, C = 1, 2, 4, 3
    fH, fW, ogfH, ogfW = 3, 4, 12, 16
    xbound, ybound, zbound = [-4.0, 4.0, 1.0], [-4.0, 4.0, 1.0], [-10.0, 10.0, 20.0]
    dx, bx, nx = _gen_dx_bx(torch, xbound, ybound, zbound)
    dx, bx, nx = nn.Parameter(dx, requires_grad=False), nn.Parameter(bx, requires_grad=False), \
        nn.Parameter(nx, requires_grad=False)
    res["nx"] = [int(v) for v in nx]
    res["nx_dtype"] = [str(nx.dtype).split(".")[-1], nx.requires_grad]
    # create_frustum
    ds = torch.arange(*[2.0, 6.0, 1.0], dtype=torch.float).view(-1, 1, 1).expand(-1, fH, fW)
    xs = torch.linspace(0, ogfW - 1, fW, dtype=torch.float).view(1, 1, fW).expand(D, fH, fW)
    ys = torch.linspace(0, ogfH - 1, fH, dtype=torch.float).view(1, fH, 1).expand(D, fH, fW)
    frustum = nn.Parameter(torch.stack((xs, ys, ds), -1), requires_grad=False)
    # get_geometry
    ang = rng.uniform(-0.3, 0.3, (B, N))
    rots = torch.from_numpy(np.stack([np.stack([np.cos(ang), np.zeros_like(ang), np.sin(ang)], -1),
                                      np.stack([-np.sin(ang), np.zeros_like(ang), np.cos(ang)],
                                               -1),
                                      np.stack([np.zeros_like(ang), -np.ones_like(ang),
                                                np.zeros_like(ang)], -1)], -2)
                            .astype(np.float32))
    trans = normal(torch, rng, B, N, 3) * 0.3
    intrins = torch.tensor([[8.0, 0, 8.0], [0, 8.0, 6.0], [0, 0, 1]]).expand(B, N, 3, 3)
    post_rots = torch.eye(3).expand(B, N, 3, 3).clone()
    post_rots[..., 0, 0] = 0.9
    post_trans = torch.zeros(B, N, 3)
    post_trans[..., 1] = -0.5
    points = frustum - post_trans.view(B, N, 1, 1, 1, 3)
    points = torch.inverse(post_rots).view(B, N, 1, 1, 1, 3, 3).matmul(points.unsqueeze(-1))
    points = torch.cat((points[:, :, :, :, :, :2] * points[:, :, :, :, :, 2:3],
                        points[:, :, :, :, :, 2:3]), 5)
    combine = rots.matmul(torch.inverse(intrins))
    points = combine.view(B, N, 1, 1, 1, 3, 3).matmul(points).squeeze(-1)
    points += trans.view(B, N, 1, 1, 1, 3)
    geom = points
    res["geom"] = geom
    # camencode: depth logits + features, softmax, outer product
    depthnet = nn.Conv2d(5, D + C, kernel_size=1, padding=0)
    bevnet = nn.Sequential(nn.Conv2d(C, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4),
                           nn.ReLU(inplace=True), nn.Conv2d(4, 1, 1))
    fill_(torch, depthnet, rng, 0.4)
    fill_(torch, bevnet, rng, 0.4)
    QuickCumsum = _quick_cumsum(torch)
    img = normal(torch, rng, B * N, 5, fH, fW)
    binimg = torch.from_numpy((rng.random((B, 1, 8, 8)) < 0.3).astype(np.float32))
    opt = torch.optim.Adam(list(depthnet.parameters()) + list(bevnet.parameters()), lr=1e-2,
                           weight_decay=1e-7)
    loss_fn = nn.BCEWithLogitsLoss(pos_weight=torch.Tensor([2.13]))
    for step in range(3):
        opt.zero_grad()
        x = depthnet(img)
        depth = x[:, :D].softmax(dim=1)
        new_x = depth.unsqueeze(1) * x[:, D:(D + C)].unsqueeze(2)
        x = new_x.view(B, N, C, D, fH, fW)
        x = x.permute(0, 1, 3, 4, 5, 2)
        # voxel_pooling
        Nprime = B * N * D * fH * fW
        x = x.reshape(Nprime, C)
        geom_feats = ((geom - (bx - dx / 2.)) / dx).long()
        geom_feats = geom_feats.view(Nprime, 3)
        batch_ix = torch.cat([torch.full([Nprime // B, 1], ix, device=x.device,
                                         dtype=torch.long) for ix in range(B)])
        geom_feats = torch.cat((geom_feats, batch_ix), 1)
        kept = (geom_feats[:, 0] >= 0) & (geom_feats[:, 0] < nx[0]) \
            & (geom_feats[:, 1] >= 0) & (geom_feats[:, 1] < nx[1]) \
            & (geom_feats[:, 2] >= 0) & (geom_feats[:, 2] < nx[2])
        x = x[kept]
        geom_feats = geom_feats[kept]
        ranks = geom_feats[:, 0] * (nx[1] * nx[2] * B) \
            + geom_feats[:, 1] * (nx[2] * B) \
            + geom_feats[:, 2] * B \
            + geom_feats[:, 3]
        sorts = ranks.argsort()
        x, geom_feats, ranks = x[sorts], geom_feats[sorts], ranks[sorts]
        x, geom_feats = QuickCumsum.apply(x, geom_feats, ranks)
        final = torch.zeros((B, C, nx[2], nx[0], nx[1]), device=x.device)
        final[geom_feats[:, 3], :, geom_feats[:, 2], geom_feats[:, 0], geom_feats[:, 1]] = x
        final = torch.cat(final.unbind(dim=2), 1)
        preds = bevnet(final)
        loss = loss_fn(preds, binimg)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(list(depthnet.parameters())
                                              + list(bevnet.parameters()), 5.0)
        opt.step()
        res["losses"].append(loss.item())
        res[f"norm{step}"] = norm
    res["kept"] = [int(kept.sum()), int(x.shape[0])]
    res["geom_grad"] = [geom_feats.requires_grad, x.requires_grad, x.grad_fn is not None]
    res["final"] = final
    res["depth_w"] = depthnet.weight
    res["bn_var"] = bevnet[1].running_var
    # get_batch_iou
    with torch.no_grad():
        pred = (preds > 0)
        tgt = binimg.bool()
        intersect = (pred & tgt).sum().float().item()
        union = (pred | tgt).sum().float().item()
    res["iou"] = [intersect, union]
    return res


def _pfn(torch, in_c, out_c):
    nn, F = torch.nn, torch.nn.functional

    class PFNLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(in_c, out_c, bias=False)
            self.norm = nn.BatchNorm1d(out_c, eps=1e-3, momentum=0.01)

        def forward(self, inputs):
            x = self.linear(inputs)
            x = self.norm(x.permute(0, 2, 1).contiguous()).permute(0, 2, 1).contiguous()
            x = F.relu(x)
            x_max = torch.max(x, dim=1, keepdim=True)[0]
            return x_max
    return PFNLayer()


def _get_paddings_indicator(torch, actual_num, max_num, axis=0):
    actual_num = torch.unsqueeze(actual_num, axis + 1)
    max_num_shape = [1] * len(actual_num.shape)
    max_num_shape[axis + 1] = -1
    max_num = torch.arange(max_num, dtype=torch.int, device=actual_num.device).view(max_num_shape)
    paddings_indicator = actual_num.int() > max_num
    return paddings_indicator


def _sigmoid_focal(torch, pred, target, gamma=2.0, alpha=0.25):
    F = torch.nn.functional
    pred_sigmoid = pred.sigmoid()
    target = target.type_as(pred)
    pt = (1 - pred_sigmoid) * target + pred_sigmoid * (1 - target)
    focal_weight = (alpha * target + (1 - alpha) * (1 - target)) * pt.pow(gamma)
    return F.binary_cross_entropy_with_logits(pred, target, reduction="none") * focal_weight


def pointpillars_program(torch):
    rng = np.random.default_rng(325)
    F = torch.nn.functional
    res = {"losses": []}
    P, M, nx, ny, vx, vy = 6, 5, 8, 8, 0.5, 0.5
    x_offset, y_offset = vx / 2 + 0.0, vy / 2 + (-2.0)
    num_points = torch.tensor([5, 3, 1, 4, 2, 5], dtype=torch.int32)
    coors = torch.tensor([[0, 0, 1, 2], [0, 0, 3, 3], [0, 0, 7, 0], [1, 0, 2, 5], [1, 0, 4, 4],
                          [1, 0, 6, 1]], dtype=torch.int32)
    features = torch.from_numpy(rng.uniform(0, 4, (P, M, 4)).astype(np.float32))
    mask0 = _get_paddings_indicator(torch, num_points, M, axis=0)
    features = features * mask0.unsqueeze(-1).type_as(features)
    pfn = _pfn(torch, 9 + 1, 8)
    head = torch.nn.Conv2d(8, 2 * (1 + 7), 1)
    fill_(torch, pfn, rng, 0.3)
    fill_(torch, head, rng, 0.1)
    params = list(pfn.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=3e-3, betas=(0.95, 0.99), weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=4)
    # anchors on the BEV grid (2 rotations), axis-aligned BEV IoU with boxes
    xs = (torch.arange(nx, dtype=torch.float32) + 0.5) * vx
    ys = (torch.arange(ny, dtype=torch.float32) + 0.5) * vy - 2.0
    yy, xx = torch.meshgrid(ys, xs, indexing="ij")
    anchors = torch.stack([xx, yy, torch.full_like(xx, -1.0), torch.full_like(xx, 1.6),
                           torch.full_like(xx, 3.9), torch.full_like(xx, 1.56)], -1)
    anchors = torch.stack([torch.cat([anchors, torch.zeros_like(xx)[..., None]], -1),
                           torch.cat([anchors, torch.full_like(xx, np.pi / 2)[..., None]], -1)],
                          2).reshape(-1, 7)
    gt = torch.tensor([[1.0, -1.0, -1.0, 1.6, 3.9, 1.56, 0.1],
                       [3.0, 1.0, -0.8, 1.7, 4.2, 1.5, 1.4]])

    def bev(b):
        w = torch.where(torch.abs(torch.sin(b[:, 6])) > 0.7071, b[:, 4], b[:, 3])
        l_ = torch.where(torch.abs(torch.sin(b[:, 6])) > 0.7071, b[:, 3], b[:, 4])
        return torch.stack([b[:, 0] - l_ / 2, b[:, 1] - w / 2, b[:, 0] + l_ / 2,
                            b[:, 1] + w / 2], 1)
    a_bev, g_bev = bev(anchors), bev(gt)
    lt = torch.max(a_bev[:, None, :2], g_bev[None, :, :2])
    rb = torch.min(a_bev[:, None, 2:], g_bev[None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    area_a = ((a_bev[:, 2] - a_bev[:, 0]) * (a_bev[:, 3] - a_bev[:, 1]))[:, None]
    area_g = ((g_bev[:, 2] - g_bev[:, 0]) * (g_bev[:, 3] - g_bev[:, 1]))[None]
    iou = inter / (area_a + area_g - inter)
    max_iou, argmax = iou.max(1)
    labels = torch.full((anchors.shape[0],), -1, dtype=torch.long)
    labels[max_iou < 0.35] = 0
    labels[max_iou >= 0.5] = 1
    gt_argmax = iou.argmax(0)
    labels[gt_argmax] = 1
    argmax[gt_argmax] = torch.arange(gt.shape[0])
    matched = gt[argmax]
    diag = torch.sqrt(anchors[:, 3] ** 2 + anchors[:, 4] ** 2)
    targets = torch.stack([(matched[:, 0] - anchors[:, 0]) / diag,
                           (matched[:, 1] - anchors[:, 1]) / diag,
                           (matched[:, 2] - anchors[:, 2]) / anchors[:, 5],
                           torch.log(matched[:, 3] / anchors[:, 3]),
                           torch.log(matched[:, 4] / anchors[:, 4]),
                           torch.log(matched[:, 5] / anchors[:, 5]),
                           matched[:, 6] - anchors[:, 6]], 1)
    res["labels"] = labels
    res["npos"] = [int((labels == 1).sum()), int((labels == 0).sum())]
    res["targets"] = targets[labels == 1]
    for step in range(3):
        pfn.train()
        opt.zero_grad()
        # PillarFeatureNet.forward
        points_mean = features[:, :, :3].sum(dim=1, keepdim=True) \
            / num_points.type_as(features).view(-1, 1, 1)
        f_cluster = features[:, :, :3] - points_mean
        f_center = torch.zeros_like(features[:, :, :2])
        f_center[:, :, 0] = features[:, :, 0] - (coors[:, 3].to(features.dtype).unsqueeze(1) * vx
                                                 + x_offset)
        f_center[:, :, 1] = features[:, :, 1] - (coors[:, 2].to(features.dtype).unsqueeze(1) * vy
                                                 + y_offset)
        points_dist = torch.norm(features[:, :, :3], 2, 2, keepdim=True)
        feats = torch.cat([features, f_cluster, f_center, points_dist], dim=-1)
        voxel_count = feats.shape[1]
        mask = _get_paddings_indicator(torch, num_points, voxel_count, axis=0)
        mask = torch.unsqueeze(mask, -1).type_as(feats)
        feats *= mask
        pillar = pfn(feats).squeeze(1)
        # PointPillarsScatter
        batch_canvas = []
        for batch_itt in range(2):
            canvas = torch.zeros(8, nx * ny, dtype=pillar.dtype, device=pillar.device)
            batch_mask = coors[:, 0] == batch_itt
            this_coords = coors[batch_mask, :]
            indices = this_coords[:, 2] * nx + this_coords[:, 3]
            indices = indices.type(torch.long)
            voxels = pillar[batch_mask, :]
            voxels = voxels.t()
            canvas[:, indices] = voxels
            batch_canvas.append(canvas)
        batch_canvas = torch.stack(batch_canvas, 0)
        spatial = batch_canvas.view(2, 8, ny, nx)
        out = head(spatial[:1])
        cls = out[:, :2].permute(0, 2, 3, 1).reshape(-1)
        box = out[:, 2:].permute(0, 2, 3, 1).reshape(-1, 7)
        valid = labels >= 0
        cls_loss = _sigmoid_focal(torch, cls[valid], labels[valid].float()).sum() \
            / (labels == 1).sum().clamp(min=1)
        pos = labels == 1
        bp, bt = box[pos], targets[pos]
        # add_sin_difference
        rad_pred_encoding = torch.sin(bp[..., 6:7]) * torch.cos(bt[..., 6:7])
        rad_tg_encoding = torch.cos(bp[..., 6:7]) * torch.sin(bt[..., 6:7])
        bp = torch.cat([bp[..., :6], rad_pred_encoding], dim=-1)
        bt = torch.cat([bt[..., :6], rad_tg_encoding], dim=-1)
        reg_loss = F.smooth_l1_loss(bp, bt, beta=1 / 9, reduction="sum") / pos.sum()
        loss = cls_loss + 2.0 * reg_loss
        loss.backward()
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
    res["canvas"] = spatial
    res["lr"] = [g["lr"] for g in opt.param_groups]
    res["lin_w"], res["bn_mean"] = pfn.linear.weight, pfn.norm.running_mean
    res["head_grad"] = head.weight.grad
    # inference: top scoring anchors, decoding
    with torch.no_grad():
        scores = cls.sigmoid()
        top = scores.topk(3)
        res["top"] = top.values
        res["top_idx"] = top.indices
        dec = box[top.indices]
        a = anchors[top.indices]
        da = torch.sqrt(a[:, 3] ** 2 + a[:, 4] ** 2)
        res["decoded"] = torch.stack([dec[:, 0] * da + a[:, 0], dec[:, 1] * da + a[:, 1],
                                      torch.exp(dec[:, 3]) * a[:, 3], dec[:, 6] + a[:, 6]], 1)
    return res


def voxel_program(torch):
    rng = np.random.default_rng(326)
    res = {}
    pts = torch.from_numpy(np.concatenate([rng.uniform(0, 2, (40, 3)),
                                           rng.uniform(0, 1, (40, 1))], 1).astype(np.float32))
    pts[5, 0] = 2.5        # out of range, dropped
    voxel_size = torch.tensor([0.5, 0.5, 1.0])
    pc_range = torch.tensor([0.0, 0.0, 0.0, 2.0, 2.0, 2.0])
    grid = torch.round((pc_range[3:] - pc_range[:3]) / voxel_size).long()
    res["grid"] = grid
    # dynamic voxelisation (mmdet3d DynamicScatter with torch ops)
    coords = torch.floor((pts[:, :3] - pc_range[:3]) / voxel_size).int()
    valid = ((coords >= 0) & (coords < grid)).all(1)
    res["n_valid"] = [int(valid.sum())]
    coords, feats = coords[valid], pts[valid].clone().requires_grad_()
    unq, inv, counts = torch.unique(coords, dim=0, return_inverse=True, return_counts=True)
    res["unq"], res["inv"], res["counts"] = unq, inv, counts
    res["dtypes"] = [str(t.dtype).split(".")[-1] for t in (coords, unq, inv, counts)]
    nv, C = unq.shape[0], feats.shape[1]
    idx = inv.unsqueeze(1).expand(-1, C)
    vmax = torch.zeros(nv, C).scatter_reduce(0, idx, feats, reduce="amax", include_self=False)
    vmean = torch.zeros(nv, C).scatter_reduce(0, idx, feats, reduce="mean", include_self=False)
    vsum = torch.zeros(nv, C).index_add(0, inv, feats)
    vmean2 = vsum / counts.unsqueeze(1).float()
    w = normal(torch, rng, nv, C)
    ((vmax * w).sum() + (vmean * w).sum() * 0.5 + vmean2.pow(2).sum() * 0.1).backward()
    res["vmax"], res["vmean"], res["vmean2"], res["fgrad"] = vmax, vmean, vmean2, feats.grad
    # hard voxelisation: first max_points per voxel, points sorted by voxel via argsort
    order = torch.argsort(inv, stable=True)
    sorted_inv = inv[order]
    start = torch.zeros(nv + 1, dtype=torch.long)
    start[1:] = torch.cumsum(counts, 0)
    rank_in_voxel = torch.arange(sorted_inv.shape[0]) - start[sorted_inv]
    keep = rank_in_voxel < 3
    voxels = torch.zeros(nv, 3, 4)
    voxels[sorted_inv[keep], rank_in_voxel[keep]] = pts[valid][order][keep]
    res["voxels"], res["num_pts"] = voxels, counts.clamp(max=3)
    # voxel centres, dense BEV occupancy via index_put_ accumulate
    centres = (unq.float() + 0.5) * voxel_size + pc_range[:3]
    res["centres"] = centres
    occ = torch.zeros(int(grid[0]), int(grid[1]), dtype=torch.long)
    occ.index_put_((unq[:, 0].long(), unq[:, 1].long()), counts, accumulate=True)
    res["occ"] = occ
    # scatter_reduce amin / prod on a second feature, sorted unique without dim
    lin = unq[:, 0] * 16 + unq[:, 1] * 4 + unq[:, 2]
    res["lin_sorted"] = torch.unique(lin, sorted=True)
    res["amin"] = torch.full((nv,), 5.0).scatter_reduce(0, inv, pts[valid][:, 3], "amin")
    res["prod"] = torch.ones(nv).scatter_reduce(0, inv, pts[valid][:, 3] + 0.5, "prod",
                                                include_self=False)
    # unique_consecutive on sorted keys
    uc, uc_inv, uc_cnt = torch.unique_consecutive(sorted_inv, return_inverse=True,
                                                  return_counts=True)
    res["uc"], res["uc_inv"], res["uc_cnt"] = uc, uc_inv, uc_cnt
    return res


def _msda_pytorch(torch, value, value_spatial_shapes, sampling_locations, attention_weights):
    # mmcv multi_scale_deformable_attn_pytorch
    F = torch.nn.functional
    bs, _, num_heads, embed_dims = value.shape
    _, num_queries, num_heads, num_levels, num_points, _ = sampling_locations.shape
    value_list = value.split([H_ * W_ for H_, W_ in value_spatial_shapes], dim=1)
    sampling_grids = 2 * sampling_locations - 1
    sampling_value_list = []
    for level, (H_, W_) in enumerate(value_spatial_shapes):
        value_l_ = value_list[level].flatten(2).transpose(1, 2).reshape(
            bs * num_heads, embed_dims, H_, W_)
        sampling_grid_l_ = sampling_grids[:, :, :, level].transpose(1, 2).flatten(0, 1)
        sampling_value_l_ = F.grid_sample(value_l_, sampling_grid_l_, mode="bilinear",
                                          padding_mode="zeros", align_corners=False)
        sampling_value_list.append(sampling_value_l_)
    attention_weights = attention_weights.transpose(1, 2).reshape(
        bs * num_heads, 1, num_queries, num_levels * num_points)
    output = (torch.stack(sampling_value_list, dim=-2).flatten(-2)
              * attention_weights).sum(-1).view(bs, num_heads * embed_dims, num_queries)
    return output.transpose(1, 2).contiguous()


def bevformer_program(torch):
    rng = np.random.default_rng(327)
    nn = torch.nn
    res = {"losses": []}
    bs, embed, heads, levels, npts = 1, 8, 2, 2, 3
    bev_h = bev_w = 3
    shapes = [(4, 5), (2, 3)]
    spatial_shapes = torch.as_tensor(shapes, dtype=torch.long)
    level_start_index = torch.cat((spatial_shapes.new_zeros((1,)),
                                   spatial_shapes.prod(1).cumsum(0)[:-1]))
    res["lsi"] = level_start_index
    sampling_offsets = nn.Linear(embed, heads * levels * npts * 2)
    attention_weights = nn.Linear(embed, heads * levels * npts)
    value_proj = nn.Linear(embed, embed)
    output_proj = nn.Linear(embed, embed)
    bev_embedding = nn.Embedding(bev_h * bev_w, embed)
    for m in (sampling_offsets, attention_weights, value_proj, output_proj, bev_embedding):
        fill_(torch, m, rng, 0.3)
    # get_reference_points 2d
    ref_y, ref_x = torch.meshgrid(
        torch.linspace(0.5, bev_h - 0.5, bev_h, dtype=torch.float32),
        torch.linspace(0.5, bev_w - 0.5, bev_w, dtype=torch.float32), indexing="ij")
    ref_y = ref_y.reshape(-1)[None] / bev_h
    ref_x = ref_x.reshape(-1)[None] / bev_w
    ref_2d = torch.stack((ref_x, ref_y), -1)
    reference_points = ref_2d.repeat(bs, 1, 1).unsqueeze(2).repeat(1, 1, levels, 1)
    # 3d reference points projected with lidar2img, bev_mask, nan_to_num
    zs = torch.linspace(0.5, 4 - 0.5, 2, dtype=torch.float32).view(-1, 1, 1).expand(2, bev_h,
                                                                                   bev_w) / 4
    xs = torch.linspace(0.5, bev_w - 0.5, bev_w).view(1, 1, bev_w).expand(2, bev_h, bev_w) / bev_w
    ys = torch.linspace(0.5, bev_h - 0.5, bev_h).view(1, bev_h, 1).expand(2, bev_h, bev_w) / bev_h
    ref_3d = torch.stack((xs, ys, zs), -1).permute(0, 3, 1, 2).flatten(2).permute(0, 2, 1)
    ref_3d = ref_3d[None].repeat(bs, 1, 1, 1)
    pc_range = [-5.0, -5.0, -2.0, 5.0, 5.0, 2.0]
    ref = ref_3d.clone()
    ref[..., 0:1] = ref[..., 0:1] * (pc_range[3] - pc_range[0]) + pc_range[0]
    ref[..., 1:2] = ref[..., 1:2] * (pc_range[4] - pc_range[1]) + pc_range[1]
    ref[..., 2:3] = ref[..., 2:3] * (pc_range[5] - pc_range[2]) + pc_range[2]
    ref = torch.cat((ref, torch.ones_like(ref[..., :1])), -1)
    ref = ref.permute(1, 0, 2, 3)
    D, B, num_query = ref.size()[:3]
    lidar2img = torch.from_numpy(np.array([[[20, 0, 0, 80], [0, 0, -20, 10], [0, 1, 0, 5],
                                            [0, 0, 0, 1]]], dtype=np.float32))[None]
    num_cam = lidar2img.size(1)
    ref = ref.view(D, B, 1, num_query, 4).repeat(1, 1, num_cam, 1, 1).unsqueeze(-1)
    lidar2img = lidar2img.view(1, B, num_cam, 1, 4, 4).repeat(D, 1, 1, num_query, 1, 1)
    reference_points_cam = torch.matmul(lidar2img.to(torch.float32),
                                        ref.to(torch.float32)).squeeze(-1)
    eps = 1e-5
    bev_mask = (reference_points_cam[..., 2:3] > eps)
    reference_points_cam = reference_points_cam[..., 0:2] / torch.maximum(
        reference_points_cam[..., 2:3], torch.ones_like(reference_points_cam[..., 2:3]) * eps)
    reference_points_cam[..., 0] /= 40
    reference_points_cam[..., 1] /= 30
    bev_mask = (bev_mask & (reference_points_cam[..., 1:2] > 0.0)
                & (reference_points_cam[..., 1:2] < 1.0)
                & (reference_points_cam[..., 0:1] < 1.0)
                & (reference_points_cam[..., 0:1] > 0.0))
    bev_mask = torch.nan_to_num(bev_mask)
    res["ref_cam"] = reference_points_cam.permute(2, 1, 3, 0, 4)
    res["bev_mask"] = bev_mask.permute(2, 1, 3, 0, 4).squeeze(-1)
    res["hits"] = [int(bev_mask.sum())]
    feats = normal(torch, rng, bs, sum(h * w for h, w in shapes), embed)
    target = normal(torch, rng, bs, bev_h * bev_w, embed)
    params = [p for m in (sampling_offsets, attention_weights, value_proj, output_proj,
                          bev_embedding) for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=2e-3, weight_decay=0.01)
    for step in range(3):
        opt.zero_grad()
        query = bev_embedding.weight.to(torch.float32).unsqueeze(0).repeat(bs, 1, 1)
        value = value_proj(feats).view(bs, -1, heads, embed // heads)
        off = sampling_offsets(query).view(bs, bev_h * bev_w, heads, levels, npts, 2)
        aw = attention_weights(query).view(bs, bev_h * bev_w, heads, levels * npts)
        aw = aw.softmax(-1).view(bs, bev_h * bev_w, heads, levels, npts)
        offset_normalizer = torch.stack([spatial_shapes[..., 1], spatial_shapes[..., 0]], -1)
        sampling_locations = reference_points[:, :, None, :, None, :] \
            + off / offset_normalizer[None, None, None, :, None, :]
        out = _msda_pytorch(torch, value, spatial_shapes, sampling_locations, aw)
        out = output_proj(out) + query
        loss = torch.nn.functional.mse_loss(out, target)
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["out"] = out
    res["off_grad"] = sampling_offsets.weight.grad
    res["emb"] = bev_embedding.weight
    # the value gradient through grid_sample at border locations, padding modes
    v = normal(torch, rng, 1, 2, 4, 5).requires_grad_()
    g = torch.from_numpy(rng.uniform(-1.2, 1.2, (1, 3, 4, 2)).astype(np.float32))
    g.requires_grad_()
    outs = [torch.nn.functional.grid_sample(v, g, mode=m, padding_mode=p, align_corners=a)
            for m, p, a in (("bilinear", "zeros", False), ("bilinear", "border", True),
                            ("nearest", "reflection", False), ("bicubic", "zeros", True))]
    sum(o.pow(2).sum() for o in outs).backward()
    res["gs"], res["gs_vgrad"], res["gs_ggrad"] = outs, v.grad, g.grad
    return res


PROGRAMS = [lss_program, pointpillars_program, voxel_program, bevformer_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
