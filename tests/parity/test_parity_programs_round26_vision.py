"""Modern detection written as its reference repositories write it in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy data: DETR (set prediction with
Hungarian matching by scipy's linear_sum_assignment on a `.cpu()` cost of class probability, L1
box and generalized-IoU costs, auxiliary decoder losses, the num_boxes normalisation,
nn.MultiheadAttention with query positional embeddings) and a YOLO-style head (grid offsets by
meshgrid, anchor assignment by wh ratio, CIoU loss with a no_grad alpha, BCEWithLogitsLoss with
pos_weight, objectness targets put by index_put_ from a detached IoU.clamp(0))."""

import math

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def box_cxcywh_to_xyxy(torch, x):
    """DETR's box_ops: centre/size to corners by unbind and stack."""
    x_c, y_c, w, h = x.unbind(-1)
    return torch.stack([(x_c - 0.5 * w), (y_c - 0.5 * h), (x_c + 0.5 * w), (y_c + 0.5 * h)],
                       dim=-1)


def box_area(boxes):
    """Area of xyxy boxes."""
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def box_iou(torch, boxes1, boxes2):
    """Pairwise IoU and union, with the None-broadcast max/min of the reference."""
    area1, area2 = box_area(boxes1), box_area(boxes2)
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    union = area1[:, None] + area2 - inter
    return inter / union, union


def generalized_box_iou(torch, boxes1, boxes2):
    """GIoU of every pair of xyxy boxes (asserting they are well formed, as DETR does)."""
    assert (boxes1[:, 2:] >= boxes1[:, :2]).all()
    assert (boxes2[:, 2:] >= boxes2[:, :2]).all()
    iou, union = box_iou(torch, boxes1, boxes2)
    lt = torch.min(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.max(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    area = wh[:, :, 0] * wh[:, :, 1]
    return iou - (area - union) / area


def _detr_targets(rng, batch, n_classes):
    """Per-image label and normalised cxcywh box lists of different lengths."""
    targets = []
    for n in [2, 3, 1][:batch]:
        cxcy = rng.uniform(0.25, 0.75, (n, 2))
        wh = rng.uniform(0.1, 0.4, (n, 2))
        targets.append({"labels": rng.integers(0, n_classes, n),
                        "boxes": np.concatenate([cxcy, wh], 1).astype(np.float32)})
    return targets


def detr_program(torch):
    """A two-layer DETR decoder on flattened features: MultiheadAttention with query_pos added
    to q and k, class/box heads on every layer, a HungarianMatcher under no_grad over the
    concatenated targets, split per image, scipy on `.cpu()`, then focal-free set criterion
    (CE with eos_coef weight, L1 and GIoU normalised by num_boxes, cardinality error) summed
    over the auxiliary outputs; AdamW with gradient clipping for three steps."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2601)
    n_classes, d, n_q, batch, hw = 4, 16, 5, 3, 6

    class DecoderLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attn = nn.MultiheadAttention(d, 2, dropout=0.0)
            self.cross_attn = nn.MultiheadAttention(d, 2, dropout=0.0)
            self.linear1, self.linear2 = nn.Linear(d, 32), nn.Linear(32, d)
            self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)

        def with_pos_embed(self, tensor, pos):
            return tensor if pos is None else tensor + pos

        def forward(self, tgt, memory, pos, query_pos):
            q = k = self.with_pos_embed(tgt, query_pos)
            tgt2 = self.self_attn(q, k, value=tgt)[0]
            tgt = self.norm1(tgt + tgt2)
            tgt2, attn = self.cross_attn(query=self.with_pos_embed(tgt, query_pos),
                                         key=self.with_pos_embed(memory, pos), value=memory)
            tgt = self.norm2(tgt + tgt2)
            tgt2 = self.linear2(F.relu(self.linear1(tgt)))
            return self.norm3(tgt + tgt2), attn

    class MLP(nn.Module):
        def __init__(self, i, h, o, num_layers):
            super().__init__()
            hs = [h] * (num_layers - 1)
            self.layers = nn.ModuleList(nn.Linear(n, k) for n, k in zip([i] + hs, hs + [o]))

        def forward(self, x):
            for i, layer in enumerate(self.layers):
                x = F.relu(layer(x)) if i < len(self.layers) - 1 else layer(x)
            return x

    class DETR(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([DecoderLayer() for _ in range(2)])
            self.norm = nn.LayerNorm(d)
            self.query_embed = nn.Embedding(n_q, d)
            self.class_embed = nn.Linear(d, n_classes + 1)
            self.bbox_embed = MLP(d, d, 4, 3)

        def forward(self, src, pos):
            bs = src.shape[0]
            memory = src.flatten(2).permute(2, 0, 1)
            pos = pos.flatten(2).permute(2, 0, 1)
            query_pos = self.query_embed.weight.unsqueeze(1).repeat(1, bs, 1)
            tgt = torch.zeros_like(query_pos)
            hs = []
            for layer in self.layers:
                tgt, attn = layer(tgt, memory, pos, query_pos)
                hs.append(self.norm(tgt))
            hs = torch.stack(hs).transpose(1, 2)
            outputs_class = self.class_embed(hs)
            outputs_coord = self.bbox_embed(hs).sigmoid()
            out = {"pred_logits": outputs_class[-1], "pred_boxes": outputs_coord[-1]}
            out["aux_outputs"] = [{"pred_logits": a, "pred_boxes": b}
                                  for a, b in zip(outputs_class[:-1], outputs_coord[:-1])]
            return out, attn

    @torch.no_grad()
    def matcher(outputs, targets):
        bs, num_queries = outputs["pred_logits"].shape[:2]
        out_prob = outputs["pred_logits"].flatten(0, 1).softmax(-1)
        out_bbox = outputs["pred_boxes"].flatten(0, 1)
        tgt_ids = torch.cat([v["labels"] for v in targets])
        tgt_bbox = torch.cat([v["boxes"] for v in targets])
        cost_class = -out_prob[:, tgt_ids]
        cost_bbox = torch.cdist(out_bbox, tgt_bbox, p=1)
        cost_giou = -generalized_box_iou(torch, box_cxcywh_to_xyxy(torch, out_bbox),
                                         box_cxcywh_to_xyxy(torch, tgt_bbox))
        C = 5 * cost_bbox + 1 * cost_class + 2 * cost_giou
        C = C.view(bs, num_queries, -1).cpu()
        sizes = [len(v["boxes"]) for v in targets]
        indices = [linear_sum_assignment(c[i]) for i, c in enumerate(C.split(sizes, -1))]
        return [(torch.as_tensor(i, dtype=torch.int64), torch.as_tensor(j, dtype=torch.int64))
                for i, j in indices]

    def _get_src_permutation_idx(indices):
        batch_idx = torch.cat([torch.full_like(src, i) for i, (src, _) in enumerate(indices)])
        src_idx = torch.cat([src for (src, _) in indices])
        return batch_idx, src_idx

    empty_weight = torch.ones(n_classes + 1)
    empty_weight[-1] = 0.1

    def criterion(outputs, targets, num_boxes):
        indices = matcher(outputs, targets)
        idx = _get_src_permutation_idx(indices)
        src_logits = outputs["pred_logits"]
        target_classes_o = torch.cat([t["labels"][J] for t, (_, J) in zip(targets, indices)])
        target_classes = torch.full(src_logits.shape[:2], n_classes, dtype=torch.int64)
        target_classes[idx] = target_classes_o
        loss_ce = F.cross_entropy(src_logits.transpose(1, 2), target_classes, empty_weight)
        with torch.no_grad():
            tgt_lengths = torch.as_tensor([len(v["labels"]) for v in targets])
            card_pred = (src_logits.argmax(-1) != src_logits.shape[-1] - 1).sum(1)
            card_err = F.l1_loss(card_pred.float(), tgt_lengths.float())
        src_boxes = outputs["pred_boxes"][idx]
        target_boxes = torch.cat([t["boxes"][i] for t, (_, i) in zip(targets, indices)], dim=0)
        loss_bbox = F.l1_loss(src_boxes, target_boxes, reduction="none").sum() / num_boxes
        loss_giou = (1 - torch.diag(generalized_box_iou(
            torch, box_cxcywh_to_xyxy(torch, src_boxes),
            box_cxcywh_to_xyxy(torch, target_boxes)))).sum() / num_boxes
        return {"loss_ce": loss_ce, "loss_bbox": loss_bbox, "loss_giou": loss_giou,
                "cardinality_error": card_err}, indices

    model = DETR()
    fill_(torch, model, rng, 0.3)
    src = normal(torch, rng, batch, d, 2, hw // 2)
    pos = normal(torch, rng, batch, d, 2, hw // 2) * 0.1
    targets = [{"labels": torch.from_numpy(t["labels"]), "boxes": torch.from_numpy(t["boxes"])}
               for t in _detr_targets(rng, batch, n_classes)]
    weight_dict = {"loss_ce": 1, "loss_bbox": 5, "loss_giou": 2}
    param_dicts = [
        {"params": [p for n, p in model.named_parameters() if "query" not in n]},
        {"params": [p for n, p in model.named_parameters() if "query" in n], "lr": 1e-3}]
    opt = torch.optim.AdamW(param_dicts, lr=1e-2, weight_decay=1e-4)
    res = {"losses": [], "matches": [], "norms": []}
    for step in range(3):
        outputs, attn = model(src, pos)
        num_boxes = sum(len(t["labels"]) for t in targets)
        num_boxes = torch.as_tensor([num_boxes], dtype=torch.float)
        num_boxes = torch.clamp(num_boxes, min=1).item()
        loss_dict, indices = criterion(outputs, targets, num_boxes)
        for i, aux in enumerate(outputs["aux_outputs"]):
            aux_dict, _ = criterion(aux, targets, num_boxes)
            loss_dict.update({k + f"_{i}": v for k, v in aux_dict.items()})
        losses = sum(loss_dict[k] * weight_dict[k.rsplit("_", 1)[0] if k[-1].isdigit() else k]
                     for k in loss_dict.keys() if "cardinality" not in k)
        opt.zero_grad()
        losses.backward()
        res["norms"].append(nn.utils.clip_grad_norm_(model.parameters(), 0.1))
        if step == 0:
            res["grads"] = [p.grad for p in model.parameters()]
        opt.step()
        res["loss_names"] = sorted(loss_dict)
        res["losses"].append([loss_dict[k].item() for k in sorted(loss_dict)])
        res["matches"] += [v for i, j in indices for v in i.tolist() + j.tolist()]
    res["attn"] = attn
    # the key bias (and, in layer 0 where value is all zeros, all of self-attention's q/k
    # projection) has a gradient of zero but for rounding, which Adam scales up to ~lr
    res["params"] = [p for n, p in model.named_parameters() if "in_proj" not in n]
    return res


def bbox_ciou(torch, box1, box2, eps=1e-7):
    """YOLOv5's bbox_iou(xywh=True, CIoU=True) on matching rows."""
    (x1, y1, w1, h1), (x2, y2, w2, h2) = box1.chunk(4, -1), box2.chunk(4, -1)
    w1_, h1_, w2_, h2_ = w1 / 2, h1 / 2, w2 / 2, h2 / 2
    b1_x1, b1_x2, b1_y1, b1_y2 = x1 - w1_, x1 + w1_, y1 - h1_, y1 + h1_
    b2_x1, b2_x2, b2_y1, b2_y2 = x2 - w2_, x2 + w2_, y2 - h2_, y2 + h2_
    inter = (torch.min(b1_x2, b2_x2) - torch.max(b1_x1, b2_x1)).clamp(0) * \
            (torch.min(b1_y2, b2_y2) - torch.max(b1_y1, b2_y1)).clamp(0)
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union
    cw = torch.max(b1_x2, b2_x2) - torch.min(b1_x1, b2_x1)
    ch = torch.max(b1_y2, b2_y2) - torch.min(b1_y1, b2_y1)
    c2 = cw ** 2 + ch ** 2 + eps
    rho2 = ((b2_x1 + b2_x2 - b1_x1 - b1_x2) ** 2 + (b2_y1 + b2_y2 - b1_y1 - b1_y2) ** 2) / 4
    v = (4 / math.pi ** 2) * torch.pow(torch.atan(w2 / h2) - torch.atan(w1 / h1), 2)
    with torch.no_grad():
        alpha = v / (v - iou + (1 + eps))
    return iou - (rho2 / c2 + v * alpha)


def yolo_program(torch):
    """A YOLOv5-style head and ComputeLoss: a 1x1 conv detect layer reshaped to
    (bs, na, ny, nx, no), grids from meshgrid(indexing='ij'), anchor matching by the max wh
    ratio with neighbour-cell offsets, CIoU box loss, BCEWithLogitsLoss(pos_weight=) for class
    and objectness, objectness targets written by tobj[b, a, gj, gi] = iou.detach().clamp(0),
    SGD with nesterov and a warmup LambdaLR for three steps."""
    nn = torch.nn
    rng = np.random.default_rng(2602)
    nc, na, ny, nx, bs = 3, 3, 4, 4, 2
    no = nc + 5
    anchors = torch.tensor([[1.0, 1.5], [2.0, 1.0], [2.5, 3.0]])
    backbone = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.SiLU(),
                             nn.BatchNorm2d(8))
    detect = nn.Conv2d(8, na * no, 1)
    fill_(torch, backbone, rng, 0.3)
    fill_(torch, detect, rng, 0.1)
    with torch.no_grad():
        b = detect.bias.view(na, -1)
        b.data[:, 4] += math.log(8 / (640 / 8) ** 2)
        b.data[:, 5:] += math.log(0.6 / (nc - 0.99999))
    imgs = normal(torch, rng, bs, 3, 8, 8)
    # targets: (image, class, x, y, w, h) normalised
    t_np = np.concatenate([np.array([[0], [0], [1], [1]]), rng.integers(0, nc, (4, 1)),
                           rng.uniform(0.2, 0.8, (4, 2)), rng.uniform(0.1, 0.6, (4, 2))], 1)
    targets = torch.from_numpy(t_np.astype(np.float32))
    BCEcls = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([1.2]))
    BCEobj = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([0.9]))
    params = list(backbone.parameters()) + list(detect.parameters())
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9, nesterov=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: min(1.0, (e + 1) / 3))

    def build_targets(p, targets):
        nt = targets.shape[0]
        tcls, tbox, indices, anch = [], [], [], []
        gain = torch.ones(7)
        ai = torch.arange(na).float().view(na, 1).repeat(1, nt)
        targets = torch.cat((targets.repeat(na, 1, 1), ai[..., None]), 2)
        g = 0.5
        off = torch.tensor([[0, 0], [1, 0], [0, 1], [-1, 0], [0, -1]]).float() * g
        gain[2:6] = torch.tensor(p.shape)[[3, 2, 3, 2]]
        t = targets * gain
        r = t[..., 4:6] / anchors[:, None]
        j = torch.max(r, 1 / r).max(2)[0] < 4.0
        t = t[j]
        gxy = t[:, 2:4]
        gxi = gain[[2, 3]] - gxy
        j, k = ((gxy % 1 < g) & (gxy > 1)).T
        l, m = ((gxi % 1 < g) & (gxi > 1)).T  # noqa: E741  (the reference's names)
        j = torch.stack((torch.ones_like(j), j, k, l, m))
        t = t.repeat((5, 1, 1))[j]
        offsets = (torch.zeros_like(gxy)[None] + off[:, None])[j]
        bc, gxy, gwh, a = t.chunk(4, 1)
        a, (b, c) = a.long().view(-1), bc.long().T
        gij = (gxy - offsets).long()
        gi, gj = gij.T
        gi, gj = gi.clamp_(0, p.shape[3] - 1), gj.clamp_(0, p.shape[2] - 1)
        indices.append((b, a, gj, gi))
        tbox.append(torch.cat((gxy - gij, gwh), 1))
        anch.append(anchors[a])
        tcls.append(c)
        return tcls, tbox, indices, anch

    res = {"losses": [], "lrs": [], "n_matched": []}
    for step in range(3):
        x = detect(backbone(imgs))
        p = x.view(bs, na, no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
        tcls, tbox, indices, anch = build_targets(p, targets)
        b, a, gj, gi = indices[0]
        tobj = torch.zeros(p.shape[:4], dtype=p.dtype)
        pxy, pwh, _, pcls = p[b, a, gj, gi].split((2, 2, 1, nc), 1)
        pxy = pxy.sigmoid() * 2 - 0.5
        pwh = (pwh.sigmoid() * 2) ** 2 * anch[0]
        pbox = torch.cat((pxy, pwh), 1)
        iou = bbox_ciou(torch, pbox, tbox[0]).squeeze()
        lbox = (1.0 - iou).mean()
        iou = iou.detach().clamp(0).type(tobj.dtype)
        tobj.index_put_((b, a, gj, gi), iou)
        t = torch.full_like(pcls, 0.0)
        t[range(len(b)), tcls[0]] = 1.0
        lcls = BCEcls(pcls, t)
        lobj = BCEobj(p[..., 4], tobj) * 4.0
        loss = (lbox * 0.05 + lobj * 1.0 + lcls * 0.5) * bs
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["losses"].append([lbox.item(), lobj.item(), lcls.item()])
        res["lrs"].append(opt.param_groups[0]["lr"])
        res["n_matched"].append(len(b))
    # inference decode: grid and anchor grid by meshgrid, as Detect._make_grid does
    backbone.eval()
    with torch.inference_mode():
        x = detect(backbone(imgs)).view(bs, na, no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
        yv, xv = torch.meshgrid(torch.arange(ny), torch.arange(nx), indexing="ij")
        grid = torch.stack((xv, yv), 2).expand(1, na, ny, nx, 2).float() - 0.5
        anchor_grid = anchors.view(1, na, 1, 1, 2).expand(1, na, ny, nx, 2)
        xy, wh, conf = x.sigmoid().split((2, 2, nc + 1), 4)
        xy = (xy * 2 + grid) * 2.0
        wh = (wh * 2) ** 2 * anchor_grid
        y = torch.cat((xy, wh, conf), 4).view(bs, -1, no)
        res["decoded"] = y
        res["decoded_flags"] = [y.is_inference(), y.requires_grad, tuple(grid.stride())]
    res["params"] = params
    res["bn_buffers"] = [backbone[2].running_mean, backbone[2].running_var,
                         backbone[2].num_batches_tracked]
    return res


def deformable_detr_program(torch):
    """Deformable DETR's pieces: the sine position embedding from a padding mask (cumsum with
    dtype=, dim_t = T ** (2 * (dim_t // 2) / d)), the mask downsampled by F.interpolate of a
    float cast back to bool, valid ratios, reference points from linspace with 0-dim tensor
    ends and steps, spatial_shapes as a tensor iterated into (H_, W_) 0-dim tensors that size
    split() and reshape(), level_start_index by new_zeros and cumsum, the PyTorch
    ms_deform_attn core (grid_sample per level, align_corners=False), and iterative box
    refinement through inverse_sigmoid with a detached reference; Adam for two steps."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2603)
    bs, d, n_heads, n_levels, n_points, n_q = 2, 8, 2, 2, 2, 3
    masks = torch.zeros(bs, 8, 10, dtype=torch.bool)
    masks[0, :, 7:] = True
    masks[1, 6:] = True

    def pos_sine(mask, num_pos_feats=d // 2, temperature=10000):
        not_mask = ~mask
        y_embed = not_mask.cumsum(1, dtype=torch.float32)
        x_embed = not_mask.cumsum(2, dtype=torch.float32)
        eps, scale = 1e-6, 2 * math.pi
        y_embed = (y_embed - 0.5) / (y_embed[:, -1:, :] + eps) * scale
        x_embed = (x_embed - 0.5) / (x_embed[:, :, -1:] + eps) * scale
        dim_t = torch.arange(num_pos_feats, dtype=torch.float32)
        dim_t = temperature ** (2 * (dim_t // 2) / num_pos_feats)
        pos_x = x_embed[:, :, :, None] / dim_t
        pos_y = y_embed[:, :, :, None] / dim_t
        pos_x = torch.stack((pos_x[:, :, :, 0::2].sin(), pos_x[:, :, :, 1::2].cos()),
                            dim=4).flatten(3)
        pos_y = torch.stack((pos_y[:, :, :, 0::2].sin(), pos_y[:, :, :, 1::2].cos()),
                            dim=4).flatten(3)
        return torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2)

    def inverse_sigmoid(x, eps=1e-5):
        x = x.clamp(min=0, max=1)
        x1 = x.clamp(min=eps)
        x2 = (1 - x).clamp(min=eps)
        return torch.log(x1 / x2)

    def ms_deform_attn_core(value, spatial_shapes, sampling_locations, attention_weights):
        N_, S_, M_, D_ = value.shape
        _, Lq_, M_, L_, P_, _ = sampling_locations.shape
        value_list = value.split([H_ * W_ for H_, W_ in spatial_shapes], dim=1)
        sampling_grids = 2 * sampling_locations - 1
        sampling_value_list = []
        for lid_, (H_, W_) in enumerate(spatial_shapes):
            value_l_ = value_list[lid_].flatten(2).transpose(1, 2).reshape(N_ * M_, D_, H_, W_)
            sampling_grid_l_ = sampling_grids[:, :, :, lid_].transpose(1, 2).flatten(0, 1)
            sampling_value_list.append(F.grid_sample(
                value_l_, sampling_grid_l_, mode="bilinear", padding_mode="zeros",
                align_corners=False))
        attention_weights = attention_weights.transpose(1, 2).reshape(N_ * M_, 1, Lq_, L_ * P_)
        output = (torch.stack(sampling_value_list, dim=-2).flatten(-2) * attention_weights)
        return output.sum(-1).view(N_, M_ * D_, Lq_).transpose(1, 2).contiguous()

    class MSDeformAttn(nn.Module):
        def __init__(self):
            super().__init__()
            self.sampling_offsets = nn.Linear(d, n_heads * n_levels * n_points * 2)
            self.attention_weights = nn.Linear(d, n_heads * n_levels * n_points)
            self.value_proj, self.output_proj = nn.Linear(d, d), nn.Linear(d, d)

        def forward(self, query, reference_points, input_flatten, spatial_shapes,
                    input_padding_mask):
            N, Len_q, _ = query.shape
            value = self.value_proj(input_flatten)
            value = value.masked_fill(input_padding_mask[..., None], float(0))
            value = value.view(N, -1, n_heads, d // n_heads)
            offs = self.sampling_offsets(query).view(N, Len_q, n_heads, n_levels, n_points, 2)
            aw = self.attention_weights(query).view(N, Len_q, n_heads, n_levels * n_points)
            aw = F.softmax(aw, -1).view(N, Len_q, n_heads, n_levels, n_points)
            offset_normalizer = torch.stack([spatial_shapes[..., 1], spatial_shapes[..., 0]], -1)
            loc = reference_points[:, :, None, :, None, :] \
                + offs / offset_normalizer[None, None, None, :, None, :]
            return self.output_proj(ms_deform_attn_core(value, spatial_shapes, loc, aw))

    attn = MSDeformAttn()
    level_embed = nn.Parameter(torch.empty(n_levels, d))
    query_embed, bbox_head = nn.Embedding(n_q, d), nn.Linear(d, 2)
    modules = nn.ModuleList([attn, query_embed, bbox_head])
    fill_(torch, modules, rng, 0.3)
    nn.init.normal_(level_embed)
    with torch.no_grad():
        level_embed.copy_(normal(torch, rng, n_levels, d))
    feats = [normal(torch, rng, bs, d, 8, 10), normal(torch, rng, bs, d, 4, 5)]
    opt = torch.optim.Adam(list(modules.parameters()) + [level_embed], lr=1e-2)
    res = {"losses": []}
    for step in range(2):
        src_flatten, mask_flatten, lvl_pos, shapes = [], [], [], []
        for lvl, src in enumerate(feats):
            m = F.interpolate(masks[None].float(), size=src.shape[-2:]).to(torch.bool)[0]
            pos = pos_sine(m)
            shapes.append((src.shape[2], src.shape[3]))
            src_flatten.append(src.flatten(2).transpose(1, 2))
            mask_flatten.append(m.flatten(1))
            lvl_pos.append(pos.flatten(2).transpose(1, 2) + level_embed[lvl].view(1, 1, -1))
            if lvl == 0:
                res["pos"], res["mask_small"] = pos, masks[:, ::2, ::2]
        src_flatten, mask_flatten = torch.cat(src_flatten, 1), torch.cat(mask_flatten, 1)
        lvl_pos = torch.cat(lvl_pos, 1)
        spatial_shapes = torch.as_tensor(shapes, dtype=torch.long)
        level_start_index = torch.cat((spatial_shapes.new_zeros((1, )),
                                       spatial_shapes.prod(1).cumsum(0)[:-1]))
        valid_ratios = []
        for src in feats:
            m = F.interpolate(masks[None].float(), size=src.shape[-2:]).to(torch.bool)[0]
            _, H, W = m.shape
            valid_H = torch.sum(~m[:, :, 0], 1)
            valid_W = torch.sum(~m[:, 0, :], 1)
            valid_ratios.append(torch.stack([valid_W.float() / W, valid_H.float() / H], -1))
        valid_ratio = torch.stack(valid_ratios, 1)
        ref = []
        for H_, W_ in spatial_shapes:
            ref_y, ref_x = torch.meshgrid(
                torch.linspace(0.5, H_ - 0.5, H_, dtype=torch.float32),
                torch.linspace(0.5, W_ - 0.5, W_, dtype=torch.float32), indexing="ij")
            ref.append(torch.stack((ref_x.reshape(-1)[None] / W_, ref_y.reshape(-1)[None] / H_),
                                   -1).expand(bs, -1, -1))
        res["ref_points"] = torch.cat(ref, 1)
        query = query_embed.weight.unsqueeze(0).expand(bs, -1, -1)
        reference_points = query_embed.weight[:, :2].sigmoid().unsqueeze(0).expand(bs, -1, -1)
        loss = 0
        for layer in range(2):
            ref_input = reference_points[:, :, None] * valid_ratio[:, None]
            out = attn(query + 0.0, ref_input, src_flatten + lvl_pos, spatial_shapes,
                       mask_flatten)
            tmp = bbox_head(out)
            new_reference_points = (tmp + inverse_sigmoid(reference_points)).sigmoid()
            reference_points = new_reference_points.detach()
            query = query + out
            loss = loss + (new_reference_points - 0.5).abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["level_start_index"], res["valid_ratio"] = level_start_index, valid_ratio
    res["params"] = list(modules.parameters()) + [level_embed]
    return res


PROGRAMS = [detr_program, yolo_program, deformable_detr_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
