"""Programs from vision geometry, written as such repositories write them by hand (no
torchvision), run once with `torch` bound to ember and once to PyTorch from the same NumPy
weights and data: a RetinaNet-style detection head (meshgrid anchors, box coding, pairwise
IoU with torchvision's prelude of usage logging and upcasts, a hand-written NMS, RoIAlign
through affine_grid and grid_sample, sigmoid focal and smooth-L1 losses, warm-up LambdaLR)
and a PointNet/DGCNN point cloud model (Conv1d k=1, kNN by cdist and topk, farthest point
sampling, ball query, voxel downsampling by unique, Chamfer distance); and the TorchScript
deprecation warnings and torch._C calls such code meets. Graphs and normalizing flows are in
test_parity_programs_round20_vision_graphs.py."""

import io
import math
import re

import numpy as np
import pytest

import ember
from tests.parity._compare import recorded
from tests.parity._programs import fill_, normal
from tests.parity.test_parity_programs_round9 import assert_same_results

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def detection_program(torch):
    """Anchors, matching, focal and box losses, RoIAlign by grid_sample, NMS at inference."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(20)
    res = {}
    feat_h, feat_w, stride, num_classes = 4, 5, 8, 3
    sizes = torch.as_tensor([12.0, 24.0])
    ratios = torch.as_tensor([0.5, 1.0, 2.0])
    h_ratios = torch.sqrt(ratios)
    w_ratios = 1 / h_ratios
    ws = (w_ratios[:, None] * sizes[None, :]).view(-1)
    hs = (h_ratios[:, None] * sizes[None, :]).view(-1)
    cell = (torch.stack([-ws, -hs, ws, hs], dim=1) / 2).round()
    shifts_x = torch.arange(0, feat_w, dtype=torch.int32) * stride
    shifts_y = torch.arange(0, feat_h, dtype=torch.int32) * stride
    shift_y, shift_x = torch.meshgrid(shifts_y, shifts_x, indexing="ij")
    shift_x, shift_y = shift_x.reshape(-1), shift_y.reshape(-1)
    shifts = torch.stack((shift_x, shift_y, shift_x, shift_y), dim=1)
    anchors = (shifts.view(-1, 1, 4) + cell.view(1, -1, 4)).reshape(-1, 4)
    num_anchors = cell.size(0)
    res["anchors"] = anchors
    res["anchor_meta"] = [_name(anchors.dtype), str(tuple(anchors.shape)), _name(shifts.dtype)]

    # torchvision's box ops, copied with their prelude: usage logging outside scripting and
    # tracing, and an upcast that keeps float16 areas from overflowing
    def _log_api_usage_once(obj):
        module = obj.__module__
        if not module.startswith("torchvision"):
            module = f"torchvision.internal.{module}"
        torch._C._log_api_usage_once(f"{module}.{obj.__name__}")

    def _upcast(t):
        if t.is_floating_point():
            return t if t.dtype in (torch.float32, torch.float64) else t.float()
        return t if t.dtype in (torch.int32, torch.int64) else t.int()

    def box_area(boxes):
        if not torch.jit.is_scripting() and not torch.jit.is_tracing():
            _log_api_usage_once(box_area)
        boxes = _upcast(boxes)
        return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])

    def box_iou_union(boxes1, boxes2):
        if torch._C._get_tracing_state() is None:
            _log_api_usage_once(box_iou_union)
        area1, area2 = box_area(boxes1), box_area(boxes2)
        lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
        rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
        wh = (rb - lt).clamp(min=0)
        inter = wh[:, :, 0] * wh[:, :, 1]
        union = area1[:, None] + area2 - inter
        return inter / union, union

    def box_iou(boxes1, boxes2):
        return box_iou_union(boxes1, boxes2)[0]

    def generalized_box_iou(boxes1, boxes2):
        iou, union = box_iou_union(boxes1, boxes2)
        lti = torch.min(boxes1[:, None, :2], boxes2[:, :2])
        rbi = torch.max(boxes1[:, None, 2:], boxes2[:, 2:])
        whi = (rbi - lti).clamp(min=0)
        areai = whi[:, :, 0] * whi[:, :, 1]
        return iou - (areai - union) / areai

    weights = (10.0, 10.0, 5.0, 5.0)
    bbox_xform_clip = math.log(1000.0 / 16)

    def encode(reference_boxes, proposals):
        wx, wy, ww, wh = weights
        ex_w = proposals[:, 2] - proposals[:, 0]
        ex_h = proposals[:, 3] - proposals[:, 1]
        ex_cx = proposals[:, 0] + 0.5 * ex_w
        ex_cy = proposals[:, 1] + 0.5 * ex_h
        gt_w = reference_boxes[:, 2] - reference_boxes[:, 0]
        gt_h = reference_boxes[:, 3] - reference_boxes[:, 1]
        gt_cx = reference_boxes[:, 0] + 0.5 * gt_w
        gt_cy = reference_boxes[:, 1] + 0.5 * gt_h
        dx = wx * (gt_cx - ex_cx) / ex_w
        dy = wy * (gt_cy - ex_cy) / ex_h
        dw = ww * torch.log(gt_w / ex_w)
        dh = wh * torch.log(gt_h / ex_h)
        return torch.stack((dx, dy, dw, dh), dim=1)

    def decode(rel_codes, boxes):
        boxes = boxes.to(rel_codes.dtype)
        widths = boxes[:, 2] - boxes[:, 0]
        heights = boxes[:, 3] - boxes[:, 1]
        ctr_x = boxes[:, 0] + 0.5 * widths
        ctr_y = boxes[:, 1] + 0.5 * heights
        wx, wy, ww, wh = weights
        dx = rel_codes[:, 0::4] / wx
        dy = rel_codes[:, 1::4] / wy
        dw = torch.clamp(rel_codes[:, 2::4] / ww, max=bbox_xform_clip)
        dh = torch.clamp(rel_codes[:, 3::4] / wh, max=bbox_xform_clip)
        pred_ctr_x = dx * widths[:, None] + ctr_x[:, None]
        pred_ctr_y = dy * heights[:, None] + ctr_y[:, None]
        pred_w = torch.exp(dw) * widths[:, None]
        pred_h = torch.exp(dh) * heights[:, None]
        c_to_c_h = torch.tensor(0.5, dtype=pred_ctr_y.dtype, device=pred_h.device) * pred_h
        c_to_c_w = torch.tensor(0.5, dtype=pred_ctr_x.dtype, device=pred_w.device) * pred_w
        x1, y1 = pred_ctr_x - c_to_c_w, pred_ctr_y - c_to_c_h
        x2, y2 = pred_ctr_x + c_to_c_w, pred_ctr_y + c_to_c_h
        return torch.stack((x1, y1, x2, y2), dim=2).flatten(1)

    def clip_boxes_to_image(boxes, size):
        boxes_x, boxes_y = boxes[..., 0::2], boxes[..., 1::2]
        height, width = size
        boxes_x = boxes_x.clamp(min=0, max=width)
        boxes_y = boxes_y.clamp(min=0, max=height)
        return torch.stack((boxes_x, boxes_y), dim=boxes.dim()).reshape(boxes.shape)

    def remove_small_boxes(boxes, min_size):
        ws, hs = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
        keep = (ws >= min_size) & (hs >= min_size)
        return torch.where(keep)[0]

    def nms(boxes, scores, iou_threshold):
        order = scores.argsort(descending=True)
        keep = []
        while order.numel() > 0:
            i = order[0]
            keep.append(i)
            if order.numel() == 1:
                break
            ious = box_iou(boxes[i].unsqueeze(0), boxes[order[1:]]).squeeze(0)
            order = order[1:][ious <= iou_threshold]
        if not keep:
            return torch.empty((0,), dtype=torch.int64)
        return torch.stack(keep)

    def suppressing_nms(boxes, scores, iou_threshold):
        # the mask-matrix form: one IoU matrix, then a loop over sorted rows
        order = torch.sort(scores, descending=True, stable=True).indices
        ious = box_iou(boxes[order], boxes[order])
        suppressed = torch.zeros(len(order), dtype=torch.bool)
        for i in range(len(order)):
            if suppressed[i]:
                continue
            suppressed |= (ious[i] > iou_threshold) & (torch.arange(len(order)) > i)
        return order[~suppressed]

    def batched_nms(boxes, scores, idxs, iou_threshold):
        if boxes.numel() == 0:
            return torch.empty((0,), dtype=torch.int64, device=boxes.device)
        max_coordinate = boxes.max()
        offsets = idxs.to(boxes) * (max_coordinate + torch.tensor(1).to(boxes))
        return nms(boxes + offsets[:, None], scores, iou_threshold)

    def roi_align(features, rois, output_size, spatial_scale):
        # RoIAlign by an affine grid over each box, in normalised coordinates
        n, c, h, w = features.shape
        x1, y1, x2, y2 = (rois[:, 1:] * spatial_scale).unbind(dim=1)
        theta = torch.zeros(rois.size(0), 2, 3, dtype=features.dtype)
        theta[:, 0, 0] = (x2 - x1) / w
        theta[:, 0, 2] = (x1 + x2) / w - 1
        theta[:, 1, 1] = (y2 - y1) / h
        theta[:, 1, 2] = (y1 + y2) / h - 1
        grid = F.affine_grid(theta, [rois.size(0), c, *output_size], align_corners=False)
        picked = features.index_select(0, rois[:, 0].long())
        return F.grid_sample(picked, grid, mode="bilinear", padding_mode="zeros",
                             align_corners=False)

    def sigmoid_focal_loss(inputs, targets, alpha=0.25, gamma=2.0, reduction="none"):
        p = torch.sigmoid(inputs)
        ce_loss = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
        p_t = p * targets + (1 - p) * (1 - targets)
        loss = ce_loss * ((1 - p_t) ** gamma)
        if alpha >= 0:
            alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
            loss = alpha_t * loss
        if reduction == "mean":
            loss = loss.mean()
        elif reduction == "sum":
            loss = loss.sum()
        return loss

    class Head(nn.Module):
        def __init__(self, in_ch, num_anchors, num_classes, prior_probability=0.01):
            super().__init__()
            self.trunk = nn.Sequential(nn.Conv2d(3, in_ch, 3, stride=2, padding=1),
                                       nn.GroupNorm(2, in_ch), nn.ReLU(inplace=True),
                                       nn.Conv2d(in_ch, in_ch, 3, stride=2, padding=1),
                                       nn.ReLU(inplace=True),
                                       nn.Conv2d(in_ch, in_ch, 3, stride=2, padding=1))
            self.cls_logits = nn.Conv2d(in_ch, num_anchors * num_classes, 3, padding=1)
            self.bbox_reg = nn.Conv2d(in_ch, num_anchors * 4, 3, padding=1)
            self.num_classes = num_classes
            for layer in (self.cls_logits, self.bbox_reg):
                nn.init.normal_(layer.weight, std=0.01)
                nn.init.constant_(layer.bias, 0)
            self.cls_logits.bias.data.fill_(-math.log((1 - prior_probability) / prior_probability))

        def forward(self, images):
            feat = self.trunk(images)
            n, _, h, w = feat.shape
            cls = self.cls_logits(feat).view(n, -1, self.num_classes, h, w)
            cls = cls.permute(0, 3, 4, 1, 2).reshape(n, -1, self.num_classes)
            reg = self.bbox_reg(feat).view(n, -1, 4, h, w)
            reg = reg.permute(0, 3, 4, 1, 2).reshape(n, -1, 4)
            return feat, cls, reg

    def match(gt_boxes, anchors, high=0.5, low=0.4):
        quality = box_iou(gt_boxes, anchors)
        matched_vals, matches = quality.max(dim=0)
        all_matches = matches.clone()
        below = matched_vals < low
        between = (matched_vals >= low) & (matched_vals < high)
        matches[below] = -1
        matches[between] = -2
        highest_quality_foreach_gt, _ = quality.max(dim=1)
        gt_pred_pairs = torch.where(quality == highest_quality_foreach_gt[:, None])
        pred_inds_to_update = gt_pred_pairs[1]
        matches[pred_inds_to_update] = all_matches[pred_inds_to_update]
        return matches

    model = Head(6, num_anchors, num_classes)
    fill_(torch, model.trunk, rng, 0.3)
    # the heads' normal_(std=0.01) draws differ between the libraries: redraw from NumPy
    fill_(torch, [model.cls_logits.weight, model.bbox_reg.weight], rng, 0.05)
    res["prior_bias"] = model.cls_logits.bias
    images = normal(torch, rng, 2, 3, 32, 40)
    gts = [torch.tensor([[2.0, 3.0, 20.0, 17.0], [14.0, 6.0, 38.0, 30.0]]),
           torch.tensor([[0.0, 0.0, 11.0, 26.0]])]
    labels = [torch.tensor([0, 2]), torch.tensor([1])]
    res["iou"] = box_iou(gts[0], anchors[:7])
    half_iou = box_iou(gts[0].half() * 100, anchors[:7].half() * 100)
    res["iou_half"] = half_iou
    res["iou_dtypes"] = [_name(half_iou.dtype), _name(box_area(gts[0].half()).dtype),
                         _name(box_area(gts[0].to(torch.int16)).dtype)]
    res["giou"] = generalized_box_iou(gts[0], anchors[:5])
    params = [p for p in model.parameters() if p.requires_grad]
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 else decay).append(p)
    opt = torch.optim.SGD([{"params": decay, "weight_decay": 1e-4},
                           {"params": no_decay, "weight_decay": 0.0}],
                          lr=0.02, momentum=0.9)
    warmup_iters, warmup_factor = 3, 1.0 / 3

    def warmup(it):
        if it >= warmup_iters:
            return 1.0
        alpha = float(it) / warmup_iters
        return warmup_factor * (1 - alpha) + alpha

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda=warmup)
    res["n_params"] = [len(params), len(decay), len(no_decay)]
    res["losses"], res["lrs"], res["num_fg"] = [], [], []
    model.train()
    for step in range(4):
        feat, cls, reg = model(images)
        cls_losses, box_losses = [], []
        for i in range(len(gts)):
            matches = match(gts[i], anchors)
            foreground = matches >= 0
            num_foreground = foreground.sum()
            res["num_fg"].append(int(num_foreground))
            gt_classes_target = torch.zeros_like(cls[i])
            gt_classes_target[foreground, labels[i][matches[foreground]]] = 1.0
            valid = matches != -2
            cls_losses.append(sigmoid_focal_loss(cls[i][valid], gt_classes_target[valid],
                                                 reduction="sum") / max(1, num_foreground))
            target_regression = encode(gts[i][matches[foreground]], anchors[foreground])
            box_losses.append(F.smooth_l1_loss(reg[i][foreground], target_regression,
                                               beta=1.0 / 9, reduction="sum")
                              / max(1, num_foreground))
        rois = torch.cat([torch.cat([torch.full((len(g), 1), float(i)), g], dim=1)
                          for i, g in enumerate(gts)])
        pooled = roi_align(feat, rois, (2, 2), spatial_scale=1.0 / stride)
        aux = pooled.pow(2).mean()
        loss_dict = {"classification": sum(cls_losses) / len(gts),
                     "bbox_regression": sum(box_losses) / len(gts), "aux": 0.1 * aux}
        losses = sum(loss for loss in loss_dict.values())
        opt.zero_grad(set_to_none=True)
        losses.backward()
        res["losses"].append([v.item() for v in loss_dict.values()])
        opt.step()
        res["lrs"].append(sched.get_last_lr()[0])
        sched.step()
    res["pooled"] = pooled
    res["trunk_w"] = model.trunk[0].weight
    res["head_b"] = model.bbox_reg.bias
    res["momentum"] = opt.state[model.cls_logits.weight]["momentum_buffer"]
    # inference: decode, score threshold, top-k, clip, per-class NMS
    model.eval()
    with torch.no_grad():
        _, cls, reg = model(images)
        for i in range(2):
            logits, codes = cls[i], reg[i]
            scores = torch.sigmoid(logits).flatten()
            keep_idxs = scores > 0.02
            scores = scores[keep_idxs]
            topk_idxs = torch.where(keep_idxs)[0]
            num_topk = min(20, topk_idxs.size(0))
            scores, idxs = scores.topk(num_topk)
            topk_idxs = topk_idxs[idxs]
            anchor_idxs = torch.div(topk_idxs, num_classes, rounding_mode="floor")
            labels_i = topk_idxs % num_classes
            boxes = decode(codes[anchor_idxs], anchors[anchor_idxs])
            boxes = clip_boxes_to_image(boxes.view(-1, 4), (32, 40))
            small = remove_small_boxes(boxes, 1.0)
            boxes, scores, labels_i = boxes[small], scores[small], labels_i[small]
            keep = batched_nms(boxes, scores, labels_i, 0.5)
            res[f"det_boxes{i}"] = boxes[keep]
            res[f"det_scores{i}"] = scores[keep]
            res[f"det_labels{i}"] = labels_i[keep].tolist()
            res[f"nms_same{i}"] = [nms(boxes, scores, 0.3).tolist()
                                   == suppressing_nms(boxes, scores, 0.3).tolist()]
    res["empty_nms"] = [tuple(batched_nms(torch.zeros(0, 4), torch.zeros(0),
                                          torch.zeros(0, dtype=torch.int64), 0.5).shape)]
    codes = encode(gts[0], anchors[:2])
    res["roundtrip"] = decode(codes, anchors[:2])
    return res


def point_cloud_program(torch):
    """PointNet with an input transform, DGCNN edge features, PointNet++ sampling and a
    Chamfer-distance autoencoder, trained with Adam."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(21)
    res = {}
    B, N, K = 3, 24, 4

    def square_distance(src, dst):
        b, n, _ = src.shape
        _, m, _ = dst.shape
        dist = -2 * torch.matmul(src, dst.permute(0, 2, 1))
        dist += torch.sum(src ** 2, -1).view(b, n, 1)
        dist += torch.sum(dst ** 2, -1).view(b, 1, m)
        return dist

    def index_points(points, idx):
        b = points.shape[0]
        view_shape = list(idx.shape)
        view_shape[1:] = [1] * (len(view_shape) - 1)
        repeat_shape = list(idx.shape)
        repeat_shape[0] = 1
        batch_indices = torch.arange(b, dtype=torch.long).view(view_shape).repeat(repeat_shape)
        return points[batch_indices, idx, :]

    def farthest_point_sample(xyz, npoint):
        b, n, _ = xyz.shape
        centroids = torch.zeros(b, npoint, dtype=torch.long)
        distance = torch.ones(b, n) * 1e10
        farthest = torch.zeros(b, dtype=torch.long)
        batch_indices = torch.arange(b, dtype=torch.long)
        for i in range(npoint):
            centroids[:, i] = farthest
            centroid = xyz[batch_indices, farthest, :].view(b, 1, 3)
            dist = torch.sum((xyz - centroid) ** 2, -1)
            mask = dist < distance
            distance[mask] = dist[mask]
            farthest = torch.max(distance, -1)[1]
        return centroids

    def query_ball_point(radius, nsample, xyz, new_xyz):
        b, n, _ = xyz.shape
        _, s, _ = new_xyz.shape
        group_idx = torch.arange(n, dtype=torch.long).view(1, 1, n).repeat([b, s, 1])
        sqrdists = square_distance(new_xyz, xyz)
        group_idx[sqrdists > radius ** 2] = n
        group_idx = group_idx.sort(dim=-1)[0][:, :, :nsample]
        group_first = group_idx[:, :, 0].view(b, s, 1).repeat([1, 1, nsample])
        mask = group_idx == n
        group_idx[mask] = group_first[mask]
        return group_idx

    def knn(x, k):
        inner = -2 * torch.matmul(x.transpose(2, 1), x)
        xx = torch.sum(x ** 2, dim=1, keepdim=True)
        pairwise_distance = -xx - inner - xx.transpose(2, 1)
        return pairwise_distance.topk(k=k, dim=-1)[1]

    def get_graph_feature(x, k):
        batch_size, num_dims, num_points = x.size()
        idx = knn(x, k)
        idx_base = torch.arange(0, batch_size).view(-1, 1, 1) * num_points
        idx = (idx + idx_base).view(-1)
        x = x.transpose(2, 1).contiguous()
        feature = x.view(batch_size * num_points, -1)[idx, :]
        feature = feature.view(batch_size, num_points, k, num_dims)
        x = x.view(batch_size, num_points, 1, num_dims).repeat(1, 1, k, 1)
        return torch.cat((feature - x, x), dim=3).permute(0, 3, 1, 2).contiguous()

    class STN3d(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv1d(3, 16, 1)
            self.conv2 = nn.Conv1d(16, 32, 1)
            self.fc = nn.Linear(32, 9)
            self.bn1 = nn.BatchNorm1d(16)

        def forward(self, x):
            batchsize = x.size()[0]
            x = F.relu(self.bn1(self.conv1(x)))
            x = F.relu(self.conv2(x))
            x = torch.max(x, 2, keepdim=True)[0]
            x = x.view(-1, 32)
            x = self.fc(x)
            iden = torch.from_numpy(np.array([1, 0, 0, 0, 1, 0, 0, 0, 1]).astype(np.float32))
            iden = iden.view(1, 9).repeat(batchsize, 1)
            x = x + iden
            return x.view(-1, 3, 3)

    class PointNetCls(nn.Module):
        def __init__(self, k=4, dropout=0.0):
            super().__init__()
            self.stn = STN3d()
            self.conv1 = nn.Conv1d(3, 16, 1)
            self.conv2 = nn.Conv1d(16, 32, 1)
            self.edge = nn.Sequential(nn.Conv2d(6, 8, kernel_size=1, bias=False),
                                      nn.BatchNorm2d(8), nn.LeakyReLU(negative_slope=0.2))
            self.bn1 = nn.BatchNorm1d(16)
            self.fc1 = nn.Linear(32 + 8, 16)
            self.dropout = nn.Dropout(p=dropout)
            self.fc2 = nn.Linear(16, k)

        def forward(self, x):
            n_pts = x.size()[2]
            trans = self.stn(x)
            x = x.transpose(2, 1)
            x = torch.bmm(x, trans)
            x = x.transpose(2, 1)
            e = self.edge(get_graph_feature(x, K)).max(dim=-1, keepdim=False)[0]
            x = F.relu(self.bn1(self.conv1(x)))
            x = self.conv2(x)
            g = torch.max(x, 2, keepdim=True)[0].view(-1, 32)
            e = F.adaptive_max_pool1d(e, 1).squeeze(-1)
            x = F.relu(self.fc1(torch.cat([g, e], 1)))
            x = self.fc2(self.dropout(x))
            return F.log_softmax(x, dim=1), trans, n_pts

    def feature_transform_regularizer(trans):
        d = trans.size()[1]
        eye = torch.eye(d)[None, :, :]
        return torch.mean(torch.norm(torch.bmm(trans, trans.transpose(2, 1)) - eye, dim=(1, 2)))

    pts = normal(torch, rng, B, N, 3)
    target = torch.from_numpy(rng.integers(0, 4, B))
    # PointNet++ sampling and grouping
    fps_idx = farthest_point_sample(pts, 8)
    res["fps"] = fps_idx
    new_xyz = index_points(pts, fps_idx)
    res["new_xyz"] = new_xyz
    group = query_ball_point(1.2, 5, pts, new_xyz)
    res["ball"] = group
    grouped = index_points(pts, group) - new_xyz.view(B, 8, 1, 3)
    res["grouped"] = grouped
    gathered = torch.gather(pts, 1, fps_idx.unsqueeze(-1).expand(-1, -1, pts.size(-1)))
    res["gather_same"] = [bool(torch.equal(gathered, new_xyz))]
    # kNN by cdist and topk against the matmul form
    d = torch.cdist(pts, pts)
    knn_dist, knn_idx = d.topk(K, dim=-1, largest=False)
    res["knn_idx"] = knn_idx
    res["knn_dist"] = knn_dist
    res["knn_same"] = [bool((knn(pts.transpose(1, 2), K) == knn_idx).all())]
    res["sqdist"] = square_distance(pts, pts[:, :5])
    # augmentation by rotation about z, and voxel-grid downsampling by unique coordinates
    theta = torch.tensor([0.3, -1.2, 2.0])
    cos, sin = torch.cos(theta), torch.sin(theta)
    zeros, ones = torch.zeros_like(theta), torch.ones_like(theta)
    rot = torch.stack([cos, -sin, zeros, sin, cos, zeros, zeros, zeros, ones], dim=1).view(-1, 3, 3)
    rotated = torch.einsum("bij,bnj->bni", rot, pts)
    res["rotated"] = rotated
    res["rot_det"] = torch.linalg.det(rot)
    coords = torch.floor(pts[0] / 0.8).int()
    uniq, inverse, counts = torch.unique(coords, dim=0, return_inverse=True, return_counts=True)
    res["voxels"] = [str(tuple(uniq.shape)), _name(uniq.dtype), _name(inverse.dtype),
                     _name(counts.dtype)]
    res["voxel_inverse"] = inverse
    sums = pts.new_zeros(uniq.size(0), 3).index_add_(0, inverse, pts[0])
    res["voxel_mean"] = sums / counts.unsqueeze(1)
    res["voxel_mean_reduce"] = torch.zeros(uniq.size(0), 3).scatter_reduce_(
        0, inverse.unsqueeze(1).expand(-1, 3), pts[0], reduce="mean", include_self=False)
    res["cdist_mm"] = torch.cdist(pts[:, :6], pts[:, 6:10],
                                  compute_mode="use_mm_for_euclid_dist")
    res["cdist_p1"] = torch.cdist(pts[:, :6], pts[:, 6:10], p=1)
    model = PointNetCls()
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, betas=(0.9, 0.999), eps=1e-8,
                           weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.7)
    res["loss"], res["reg"] = [], []
    x = pts.transpose(2, 1)
    for _ in range(3):
        model.train()
        opt.zero_grad()
        pred, trans, n_pts = model(x)
        loss = F.nll_loss(pred, target)
        reg = feature_transform_regularizer(trans)
        (loss + 0.001 * reg).backward()
        opt.step()
        sched.step()
        res["loss"].append(loss.item())
        res["reg"].append(reg.item())
    res["n_pts"] = [n_pts]
    res["stn_fc"] = model.stn.fc.weight
    res["edge_w"] = model.edge[0].weight
    res["bn_running"] = model.bn1.running_var
    res["exp_avg_sq"] = opt.state[model.fc2.weight]["exp_avg_sq"]
    model.eval()
    with torch.no_grad():
        pred, _, _ = model(x)
        res["eval_pred"] = pred
        res["correct"] = [pred.data.max(1)[1].eq(target.data).cpu().sum().item()]

    # a folding-style autoencoder trained on the Chamfer distance
    def chamfer_distance(a, b):
        dist = torch.cdist(a, b, p=2.0) ** 2
        return dist.min(dim=2)[0].mean(dim=1) + dist.min(dim=1)[0].mean(dim=1)

    def chamfer_by_square(a, b):
        dist = square_distance(a, b)
        return torch.mean(torch.min(dist, 2).values, 1) + torch.mean(torch.min(dist, 1).values, 1)

    enc = nn.Sequential(nn.Conv1d(3, 16, 1), nn.ReLU(), nn.Conv1d(16, 16, 1))
    dec = nn.Sequential(nn.Linear(16 + 2, 16), nn.ReLU(), nn.Linear(16, 3))
    fill_(torch, [*enc.parameters(), *dec.parameters()], rng, 0.3)
    side = torch.linspace(-1, 1, 4)
    grid = torch.stack(torch.meshgrid(side, side, indexing="xy"), dim=-1).view(-1, 2)
    ae_opt = torch.optim.Adam([*enc.parameters(), *dec.parameters()], lr=5e-3, amsgrad=True)
    res["chamfer"] = []
    for _ in range(3):
        code = enc(pts.transpose(1, 2)).max(dim=2).values
        inp = torch.cat([code.unsqueeze(1).expand(-1, grid.size(0), -1),
                         grid.unsqueeze(0).expand(B, -1, -1)], dim=2)
        recon = dec(inp)
        cd = chamfer_distance(recon, pts)
        loss = cd.mean()
        ae_opt.zero_grad()
        loss.backward()
        ae_opt.step()
        res["chamfer"].append(loss.item())
    res["chamfer_forms"] = [chamfer_distance(recon, pts), chamfer_by_square(recon, pts)]
    res["grad_norm"] = torch.stack([p.grad.norm() for p in dec.parameters()])
    res["recon"] = recon
    return res


PROGRAMS = [detection_program, point_cloud_program]


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


@pytest.mark.parametrize("call", ["script", "trace_module", "save", "load"])
def test_torchscript_entry_points_warn_they_are_deprecated(call):
    """PyTorch 2.13 deprecates torch.jit.script/trace/save/load: a DeprecationWarning per call
    (trace_module names itself trace_method and, checking its trace, warns twice)."""
    def run(lib):
        def f(x):
            return x * 2
        model = lib.nn.Linear(2, 2)
        if call == "script":
            lib.jit.script(f)
        elif call == "trace_module":
            lib.jit.trace_module(model, {"forward": lib.ones(1, 2)})
        elif call == "save":
            lib.jit.save(model, io.BytesIO())   # ember cannot write the archive: it raises
        else:
            lib.jit.load(io.BytesIO())          # (nothing to read: both raise)

    ours, theirs = _warnings(ember, run), _warnings(torch, run)
    assert theirs and ours == theirs


@pytest.mark.parametrize("check_trace", [True, False])
@pytest.mark.parametrize("traced", ["function", "module"])
def test_torchscript_trace_warns_it_is_deprecated(traced, check_trace):
    """trace warns, a module's trace warns again from trace_module, and checking the trace
    (check_trace) traces and warns once more."""
    def run(lib):
        target = (lambda x: x * 2) if traced == "function" else lib.nn.Linear(2, 2)
        lib.jit.trace(target, lib.ones(2), check_trace=check_trace)
    ours, theirs = _warnings(ember, run), _warnings(torch, run)
    assert theirs and ours == theirs


def test_torchvision_prelude_reaches_into_torch_c():
    """torchvision's ops log their use through torch._C and ask it whether a trace runs."""
    for lib in (ember, torch):
        assert lib._C._log_api_usage_once("torchvision.ops.boxes.nms") is None
        assert lib._C._get_tracing_state() is None
