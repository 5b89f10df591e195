"""OCR and document AI geometry, as the reference repositories write it in torch, run once with
`torch` bound to ember and once to PyTorch: a spatial-transformer handwriting recogniser
(affine_grid + grid_sample), DETR-style table-structure matching (box_iou/GIoU written by hand,
Hungarian by brute force over permutations), rotated text boxes (atan2, shoelace polygon areas,
rotated corners), random-perspective augmentation (homography from torch.linalg.solve, warping
with grid_sample) and a TrOCR/Donut-style ViT encoder + decoder generate loop (past key values,
repetition penalty, top-k/top-p with fixed uniforms)."""

import itertools
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def stn_handwriting_program(torch):
    """Localisation net regressing an affine theta initialised to identity, affine_grid +
    grid_sample (bilinear/zeros, nearest/border, align_corners both ways), then a conv+GRU
    recogniser with CTC, one step of Adam."""
    rng = np.random.default_rng(5)
    nn, F = torch.nn, torch.nn.functional

    class STN(nn.Module):
        def __init__(self):
            super().__init__()
            self.localization = nn.Sequential(
                nn.Conv2d(1, 4, 3), nn.MaxPool2d(2, stride=2), nn.ReLU(True))
            self.fc_loc = nn.Sequential(nn.Linear(4 * 3 * 7, 8), nn.ReLU(True), nn.Linear(8, 6))

        def forward(self, x, mode="bilinear", padding_mode="zeros", align_corners=False):
            xs = self.localization(x)
            xs = xs.view(-1, 4 * 3 * 7)
            theta = self.fc_loc(xs).view(-1, 2, 3)
            grid = F.affine_grid(theta, x.size(), align_corners=align_corners)
            return F.grid_sample(x, grid, mode=mode, padding_mode=padding_mode,
                                 align_corners=align_corners), theta

    stn = STN()
    fill_(torch, stn, rng, 0.2)
    stn.fc_loc[2].weight.data.zero_()
    stn.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))
    with torch.no_grad():
        stn.fc_loc[2].weight.add_(normal(torch, rng, 6, 8) * 0.05)
    rec = nn.GRU(8, 6, batch_first=True, bidirectional=True)
    head = nn.Linear(12, 5)
    conv = nn.Conv2d(1, 2, 3, padding=1)
    for m in (rec, head, conv):
        fill_(torch, m, rng)
    x = normal(torch, rng, 2, 1, 8, 16)
    res = {}
    for i, (mode, pad, ac) in enumerate([("bilinear", "zeros", False),
                                         ("nearest", "border", True),
                                         ("bilinear", "reflection", True)]):
        with torch.no_grad():
            warped, _ = stn(x, mode, pad, ac)
        res[f"warp{i}"] = warped
    params = list(stn.parameters()) + list(rec.parameters()) + list(head.parameters()) + \
        list(conv.parameters())
    opt = torch.optim.Adam(params, lr=1e-2)
    warped, theta = stn(x)
    f = F.relu(conv(warped))  # [B, 2, 8, 16]
    seq = f.permute(0, 3, 1, 2).flatten(2)[:, ::2]  # [B, 8, 16] -> pick every 2nd column
    seq = seq.reshape(2, 8, 16)[..., :8]
    out, _ = rec(seq)
    lp = head(out).log_softmax(-1).transpose(0, 1)
    loss = F.ctc_loss(lp, torch.tensor([[1, 2, 3], [4, 4, 0]]), torch.tensor([8, 8]),
                      torch.tensor([3, 2]))
    opt.zero_grad()
    loss.backward()
    res["g_theta"] = stn.fc_loc[2].weight.grad
    res["g_conv"] = conv.weight.grad
    opt.step()
    res["loss"] = loss.detach()
    res["theta"] = theta.detach()
    return res


def _box_area(boxes):
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def _box_iou(torch, boxes1, boxes2):
    area1, area2 = _box_area(boxes1), _box_area(boxes2)
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    union = area1[:, None] + area2 - inter
    return inter / union, union


def _giou(torch, boxes1, boxes2):
    iou, union = _box_iou(torch, boxes1, boxes2)
    lt = torch.min(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.max(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    area = wh[:, :, 0] * wh[:, :, 1]
    return iou - (area - union) / area


def _cxcywh_to_xyxy(torch, x):
    x_c, y_c, w, h = x.unbind(-1)
    return torch.stack([(x_c - 0.5 * w), (y_c - 0.5 * h), (x_c + 0.5 * w), (y_c + 0.5 * h)], -1)


def table_matching_program(torch):
    """Table Transformer-style set criterion: cost = class + L1 + GIoU, Hungarian by brute force
    over permutations, loss_ce with eos_coef weights, L1 + GIoU box losses, cardinality error,
    and an NMS written with box_iou and a while loop."""
    rng = np.random.default_rng(6)
    nn, F = torch.nn, torch.nn.functional
    Q, K, D = 5, 3, 8  # queries, classes (row/column/cell), dims
    dec = nn.Sequential(nn.Linear(D, D), nn.ReLU())
    class_embed = nn.Linear(D, K + 1)
    bbox_embed = nn.Sequential(nn.Linear(D, D), nn.ReLU(), nn.Linear(D, 4))
    for m in (dec, class_embed, bbox_embed):
        fill_(torch, m, rng, 0.4)
    queries = normal(torch, rng, 2, Q, D)
    targets = [
        {"labels": torch.tensor([0, 1, 2]),
         "boxes": torch.tensor([[0.5, 0.2, 0.8, 0.1], [0.3, 0.5, 0.2, 0.9],
                                [0.3, 0.2, 0.2, 0.1]])},
        {"labels": torch.tensor([1, 1]),
         "boxes": torch.tensor([[0.25, 0.5, 0.4, 0.9], [0.7, 0.5, 0.4, 0.9]])}]
    empty_weight = torch.ones(K + 1)
    empty_weight[-1] = 0.4
    opt = torch.optim.AdamW(list(dec.parameters()) + list(class_embed.parameters())
                            + list(bbox_embed.parameters()), lr=1e-3)
    res = {}
    for it in range(2):
        hs = dec(queries)
        logits = class_embed(hs)
        boxes = bbox_embed(hs).sigmoid()
        with torch.no_grad():
            out_prob = logits.flatten(0, 1).softmax(-1)
            out_bbox = boxes.flatten(0, 1)
            tgt_ids = torch.cat([v["labels"] for v in targets])
            tgt_bbox = torch.cat([v["boxes"] for v in targets])
            cost_class = -out_prob[:, tgt_ids]
            cost_bbox = torch.cdist(out_bbox, tgt_bbox, p=1)
            cost_giou = -_giou(torch, _cxcywh_to_xyxy(torch, out_bbox),
                               _cxcywh_to_xyxy(torch, tgt_bbox))
            C = (5 * cost_bbox + cost_class + 2 * cost_giou).view(2, Q, -1).cpu()
            sizes = [len(v["boxes"]) for v in targets]
            indices = []
            for i, c in enumerate(C.split(sizes, -1)):
                c = c[i]
                best = min(itertools.permutations(range(Q), c.shape[1]),
                           key=lambda p: float(c[list(p), torch.arange(c.shape[1])].sum()))
                src = torch.as_tensor(best, dtype=torch.int64)
                order = src.argsort()
                indices.append((src[order], torch.arange(c.shape[1])[order]))
        batch_idx = torch.cat([torch.full_like(s, i) for i, (s, _) in enumerate(indices)])
        src_idx = torch.cat([s for s, _ in indices])
        target_classes = torch.full(logits.shape[:2], K, dtype=torch.int64)
        target_classes_o = torch.cat([t["labels"][J] for t, (_, J) in zip(targets, indices)])
        target_classes[(batch_idx, src_idx)] = target_classes_o
        loss_ce = F.cross_entropy(logits.transpose(1, 2), target_classes, empty_weight)
        src_boxes = boxes[(batch_idx, src_idx)]
        target_boxes = torch.cat([t["boxes"][i] for t, (_, i) in zip(targets, indices)], dim=0)
        num_boxes = max(float(len(target_boxes)), 1.0)
        loss_bbox = F.l1_loss(src_boxes, target_boxes, reduction="none").sum() / num_boxes
        loss_giou = (1 - torch.diag(_giou(torch, _cxcywh_to_xyxy(torch, src_boxes),
                                          _cxcywh_to_xyxy(torch, target_boxes)))).sum() / num_boxes
        card_pred = (logits.argmax(-1) != K).sum(1)
        card_err = F.l1_loss(card_pred.float(), torch.as_tensor([3.0, 2.0]))
        loss = loss_ce + 5 * loss_bbox + 2 * loss_giou
        opt.zero_grad()
        loss.backward()
        opt.step()
        res[f"losses{it}"] = torch.stack([loss_ce, loss_bbox, loss_giou]).detach()
        res[f"match{it}"] = src_idx.tolist()
        res[f"card{it}"] = card_err
    # NMS by hand
    xyxy = _cxcywh_to_xyxy(torch, boxes.detach()[0])
    scores = logits.detach()[0].softmax(-1)[:, :-1].max(-1).values
    order = scores.argsort(descending=True)
    keep = []
    while order.numel() > 0:
        i = order[0]
        keep.append(int(i))
        if order.numel() == 1:
            break
        iou, _ = _box_iou(torch, xyxy[i].unsqueeze(0), xyxy[order[1:]])
        order = order[1:][iou[0] <= 0.1]
    res["keep"] = keep
    return res


def rotated_boxes_program(torch):
    """Rotated text boxes: (cx, cy, w, h, angle) -> corners via a rotation matrix, angle back
    with atan2, shoelace polygon areas, minimum-area order of the 4 points (sort by angle around
    the centroid), and a smooth-L1 + angle-periodic loss trained for two SGD steps."""
    rng = np.random.default_rng(7)
    nn, F = torch.nn, torch.nn.functional
    head = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 5))
    fill_(torch, head, rng, 0.4)
    x = normal(torch, rng, 4, 6)
    tgt = torch.tensor([[0.5, 0.5, 0.4, 0.1, 0.3], [0.2, 0.7, 0.3, 0.05, -1.2],
                        [0.8, 0.2, 0.2, 0.2, 3.0], [0.4, 0.4, 0.6, 0.1, -2.9]])

    def corners(b):
        cx, cy, w, h, a = b.unbind(-1)
        cos, sin = torch.cos(a), torch.sin(a)
        R = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], -2)
        half = torch.tensor([[-0.5, -0.5], [0.5, -0.5], [0.5, 0.5], [-0.5, 0.5]])
        pts = half * torch.stack([w, h], -1)[:, None, :]
        return torch.einsum("bij,bkj->bki", R, pts) + torch.stack([cx, cy], -1)[:, None, :]

    def shoelace(p):
        x, y = p[..., 0], p[..., 1]
        return 0.5 * (x * y.roll(-1, -1) - x.roll(-1, -1) * y).sum(-1).abs()

    opt = torch.optim.SGD(head.parameters(), lr=0.1, nesterov=True, momentum=0.9)
    res = {}
    for it in range(2):
        out = head(x)
        pred = torch.cat([out[:, :4].sigmoid(), math.pi * torch.tanh(out[:, 4:])], -1)
        d = pred[:, 4] - tgt[:, 4]
        angle_loss = (1 - torch.cos(d)).mean()
        ang = torch.atan2(torch.sin(d), torch.cos(d))
        box_loss = F.smooth_l1_loss(pred[:, :4], tgt[:, :4], beta=0.05)
        pc, tc = corners(pred), corners(tgt)
        corner_loss = F.huber_loss(pc, tc, delta=0.1)
        area_loss = (shoelace(pc) - pred[:, 2] * pred[:, 3]).abs().mean()
        loss = box_loss + angle_loss + corner_loss + area_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        res[f"loss{it}"] = torch.stack([box_loss, angle_loss, corner_loss]).detach()
        res[f"ang{it}"] = ang.detach()
    pts = corners(tgt)[:, torch.tensor([2, 0, 3, 1])]
    cen = pts.mean(1, keepdim=True)
    theta = torch.atan2(pts[..., 1] - cen[..., 1], pts[..., 0] - cen[..., 0])
    order = theta.argsort(-1)
    sorted_pts = torch.gather(pts, 1, order[..., None].expand(-1, -1, 2))
    res["order"] = order.flatten().tolist()
    res["areas"] = shoelace(sorted_pts)
    res["grad"] = head[2].weight.grad
    # rotated minimum bounding rect via angle-quantised search (as in EAST postprocessing)
    angles = torch.linspace(-math.pi / 2, 0, 7)
    c, s = torch.cos(angles), torch.sin(angles)
    rot = torch.stack([torch.stack([c, s], -1), torch.stack([-s, c], -1)], -2)
    proj = torch.einsum("aij,bkj->abki", rot, pts)
    ext = proj.amax(2) - proj.amin(2)
    areas = ext.prod(-1)
    res["min_rect"] = areas.min(0).values
    res["best_angle"] = areas.argmin(0).tolist()
    return res


def perspective_program(torch):
    """Random perspective augmentation: solve the 8x8 DLT system for the homography with
    torch.linalg.solve (batched), warp via a normalised meshgrid + grid_sample, warp the text
    boxes' corners and take their axis-aligned hull, plus colour jitter in tensor ops."""
    rng = np.random.default_rng(8)
    F = torch.nn.functional
    B, H, W = 2, 12, 16
    img = torch.from_numpy(rng.uniform(size=(B, 3, H, W)).astype(np.float32))
    src = torch.tensor([[0.0, 0.0], [W - 1, 0.0], [W - 1, H - 1], [0.0, H - 1]])
    jitter = torch.from_numpy(rng.uniform(-2, 2, (B, 4, 2)).astype(np.float32))
    dst = src + jitter

    def get_perspective_coeffs(startpoints, endpoints):
        a = torch.zeros(startpoints.shape[0], 8, 8)
        for i, (p1, p2) in enumerate(zip(endpoints.unbind(1), startpoints.unbind(1))):
            one, zero = torch.ones_like(p1[:, 0]), torch.zeros_like(p1[:, 0])
            a[:, 2 * i] = torch.stack([p1[:, 0], p1[:, 1], one, zero, zero, zero,
                                       -p2[:, 0] * p1[:, 0], -p2[:, 0] * p1[:, 1]], -1)
            a[:, 2 * i + 1] = torch.stack([zero, zero, zero, p1[:, 0], p1[:, 1], one,
                                           -p2[:, 1] * p1[:, 0], -p2[:, 1] * p1[:, 1]], -1)
        b = startpoints.reshape(-1, 8, 1)
        return torch.linalg.solve(a.double(), b.double()).squeeze(-1).float()

    coeffs = get_perspective_coeffs(src.expand(B, 4, 2), dst)
    Hm = torch.cat([coeffs, torch.ones(B, 1)], -1).view(B, 3, 3)
    ys, xs = torch.meshgrid(torch.arange(H, dtype=torch.float32),
                            torch.arange(W, dtype=torch.float32), indexing="ij")
    grid = torch.stack([xs, ys, torch.ones_like(xs)], -1).view(1, -1, 3)
    mapped = grid @ Hm.transpose(1, 2)
    mapped = mapped[..., :2] / mapped[..., 2:]
    norm = mapped / torch.tensor([W - 1, H - 1]) * 2 - 1
    out = F.grid_sample(img, norm.view(B, H, W, 2), align_corners=True)
    res = {"coeffs": coeffs, "warped": out}
    Hinv = torch.linalg.inv(Hm)
    boxes = torch.tensor([[2.0, 3.0, 9.0, 6.0], [5.0, 1.0, 14.0, 10.0]])
    bc = torch.stack([boxes[:, [0, 1]], boxes[:, [2, 1]], boxes[:, [2, 3]], boxes[:, [0, 3]]], 1)
    hom = F.pad(bc, (0, 1), value=1.0) @ Hinv.transpose(1, 2)
    warped_pts = hom[..., :2] / hom[..., 2:]
    res["hull"] = torch.cat([warped_pts.amin(1), warped_pts.amax(1)], -1).clamp(
        torch.zeros(4), torch.tensor([W - 1, H - 1, W - 1, H - 1]))
    # colour jitter: brightness / contrast / saturation / hue-free grayscale blend
    f = torch.from_numpy(rng.uniform(0.7, 1.3, (B, 3)).astype(np.float32))
    x = (out * f[:, 0, None, None, None]).clamp(0, 1)
    gray = (0.299 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2]).unsqueeze(1)
    mean = gray.mean((-3, -2, -1), keepdim=True)
    x = (f[:, 1, None, None, None] * x + (1 - f[:, 1, None, None, None]) * mean).clamp(0, 1)
    x = torch.lerp(gray.expand_as(x), x, f[:, 2, None, None, None]).clamp_(0, 1)
    res["jit"] = x
    res["u8"] = (x * 255).round().to(torch.uint8).sum((1, 2, 3)).tolist()
    return res


def trocr_generate_program(torch):
    """ViT encoder (patch conv, cls token, pre-norm blocks) + causal decoder with cross
    attention and a KV cache; greedy, repetition penalty and top-k/top-p sampling driven by
    fixed uniforms, EOS handling with unfinished_sequences, and a teacher-forced loss."""
    rng = np.random.default_rng(9)
    nn, F = torch.nn, torch.nn.functional
    D, V, BOS, EOS, PAD = 16, 11, 1, 2, 0

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))

        def forward(self, x, kv=None, past=None, causal=False):
            B, T, _ = x.shape
            q = self.q(x).view(B, T, 2, D // 2).transpose(1, 2)
            src = x if kv is None else kv
            k = self.k(src).view(B, -1, 2, D // 2).transpose(1, 2)
            v = self.v(src).view(B, -1, 2, D // 2).transpose(1, 2)
            if past is not None:
                k, v = torch.cat([past[0], k], 2), torch.cat([past[1], v], 2)
            mask = None
            if causal and T > 1:
                mask = torch.ones(T, k.size(2), dtype=torch.bool).tril(k.size(2) - T)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            return self.o(y.transpose(1, 2).reshape(B, T, D)), (k, v)

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch = nn.Conv2d(1, D, 4, 4)
            self.cls = nn.Parameter(torch.zeros(1, 1, D))
            self.pos = nn.Parameter(torch.zeros(1, 5, D))
            self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.attn = Attn()
            self.mlp = nn.Sequential(nn.Linear(D, 32), nn.GELU(), nn.Linear(32, D))

        def forward(self, img):
            x = self.patch(img).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.size(0), -1, -1), x], 1) + self.pos
            x = x + self.attn(self.ln1(x))[0]
            return x + self.mlp(self.ln2(x))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.pos = nn.Embedding(12, D)
            self.self_attn, self.cross = Attn(), Attn()
            self.ln = nn.LayerNorm(D)
            self.lm_head = nn.Linear(D, V, bias=False)

        def forward(self, ids, enc, past=None):
            start = 0 if past is None else past[0].size(2)
            x = self.emb(ids) * math.sqrt(D) + self.pos(torch.arange(start, start + ids.size(1)))
            h, new_past = self.self_attn(x, past=past, causal=True)
            x = x + h
            x = x + self.cross(x, kv=enc)[0]
            return self.lm_head(self.ln(x)), new_past

    enc, dec = ViT(), Decoder()
    fill_(torch, enc, rng, 0.3)
    fill_(torch, dec, rng, 0.3)
    img = normal(torch, rng, 2, 1, 8, 8)
    res = {}
    labels = torch.tensor([[3, 4, 5, EOS], [6, EOS, -100, -100]])
    dec_in = torch.cat([torch.full((2, 1), BOS), labels[:, :-1].masked_fill(
        labels[:, :-1] == -100, PAD)], 1)
    logits, _ = dec(dec_in, enc(img))
    loss = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), label_smoothing=0.05)
    loss.backward()
    res["tf_loss"] = loss.detach()
    res["g_cls"] = enc.cls.grad
    uniforms = rng.uniform(size=(8, 2)).astype(np.float32)

    @torch.inference_mode()
    def generate(strategy, penalty=1.0, top_k=0, top_p=1.0):
        memory = enc(img)
        ids = torch.full((2, 1), BOS, dtype=torch.long)
        unfinished = torch.ones(2, dtype=torch.long)
        past, cur = None, ids
        for step in range(7):
            logits, past = dec(cur, memory, past)
            scores = logits[:, -1, :]
            if ids.shape[-1] < 4:  # MinLengthLogitsProcessor
                scores[:, EOS] = -float("inf")
            if penalty != 1.0:
                score = torch.gather(scores, 1, ids)
                score = torch.where(score < 0, score * penalty, score / penalty)
                scores = scores.scatter(1, ids, score)
            if strategy == "greedy":
                nxt = scores.argmax(-1)
            else:
                if top_k:
                    kth = torch.topk(scores, top_k)[0][..., -1, None]
                    scores = scores.masked_fill(scores < kth, -float("inf"))
                if top_p < 1.0:
                    sorted_logits, sorted_indices = torch.sort(scores, descending=False)
                    cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
                    remove = cumulative_probs <= (1 - top_p)
                    remove[..., -1:] = 0
                    remove = remove.scatter(1, sorted_indices, remove)
                    scores = scores.masked_fill(remove, -float("inf"))
                probs = F.softmax(scores, dim=-1)
                u = torch.from_numpy(uniforms[step])[:, None]
                nxt = (probs.cumsum(-1) < u).sum(-1).clamp(max=V - 1)
            nxt = nxt * unfinished + PAD * (1 - unfinished)
            ids = torch.cat([ids, nxt[:, None]], -1)
            cur = nxt[:, None]
            unfinished = unfinished & (nxt != EOS).long()
            if unfinished.max() == 0:
                break
        return ids

    res["greedy"] = generate("greedy").flatten().tolist()
    res["penalty"] = generate("greedy", penalty=1.5).flatten().tolist()
    res["topk"] = generate("sample", top_k=4).flatten().tolist()
    res["topp"] = generate("sample", penalty=1.2, top_p=0.8).flatten().tolist()
    # the cache agrees with recomputing the whole prefix
    with torch.no_grad():
        memory = enc(img)
        full, _ = dec(dec_in, memory)
        _, past = dec(dec_in[:, :2], memory)
        inc, _ = dec(dec_in[:, 2:], memory, past)
    res["cache_gap"] = (full[:, 2:] - inc).abs().max()
    res["inc"] = inc
    return res


def dtrb_program(torch):
    """clovaai deep-text-recognition-benchmark: TPS rectification (GridGenerator matrices built
    in NumPy, inverted with torch.linalg.inv, registered as buffers, bmm + grid_sample border),
    CTCLabelConverter/AttnLabelConverter with legacy IntTensor/LongTensor constructors,
    DataParallel with 'module.' keys, a DataLoader with AlignCollate-style collate_fn,
    Adadelta on requires_grad-filtered parameters, CTC under cudnn.flags(enabled=False),
    and confidence scores by cumprod of max probabilities."""
    rng = np.random.default_rng(17)
    nn, F = torch.nn, torch.nn.functional
    F_pts, H, W = 6, 8, 16
    character = "-abcd"

    class GridGenerator(nn.Module):
        def __init__(self, F, I_r_size):
            super().__init__()
            self.eps = 1e-6
            self.I_r_height, self.I_r_width = I_r_size
            self.F = F
            self.C = self._build_C(self.F)
            self.P = self._build_P(self.I_r_width, self.I_r_height)
            self.register_buffer("inv_delta_C", torch.tensor(
                self._build_inv_delta_C(self.F, self.C)).float())
            self.register_buffer("P_hat", torch.tensor(
                self._build_P_hat(self.F, self.C, self.P)).float())

        def _build_C(self, F):
            ctrl_pts_x = np.linspace(-1.0, 1.0, int(F / 2))
            ctrl_pts_y_top = -1 * np.ones(int(F / 2))
            ctrl_pts_y_bottom = np.ones(int(F / 2))
            top = np.stack([ctrl_pts_x, ctrl_pts_y_top], axis=1)
            bottom = np.stack([ctrl_pts_x, ctrl_pts_y_bottom], axis=1)
            return np.concatenate([top, bottom], axis=0)

        def _build_inv_delta_C(self, F, C):
            hat_C = np.zeros((F, F), dtype=float)
            for i in range(0, F):
                for j in range(i, F):
                    r = np.linalg.norm(C[i] - C[j])
                    hat_C[i, j] = r
                    hat_C[j, i] = r
            np.fill_diagonal(hat_C, 1)
            hat_C = (hat_C ** 2) * np.log(hat_C)
            delta_C = np.concatenate([
                np.concatenate([np.ones((F, 1)), C, hat_C], axis=1),
                np.concatenate([np.zeros((2, 3)), np.transpose(C)], axis=1),
                np.concatenate([np.zeros((1, 3)), np.ones((1, F))], axis=1)], axis=0)
            return torch.linalg.inv(torch.tensor(delta_C)).numpy()

        def _build_P(self, I_r_width, I_r_height):
            grid_x = (np.arange(-I_r_width, I_r_width, 2) + 1.0) / I_r_width
            grid_y = (np.arange(-I_r_height, I_r_height, 2) + 1.0) / I_r_height
            P = np.stack(np.meshgrid(grid_x, grid_y), axis=2)
            return P.reshape([-1, 2])

        def _build_P_hat(self, F, C, P):
            n = P.shape[0]
            P_tile = np.tile(np.expand_dims(P, axis=1), (1, F, 1))
            C_tile = np.expand_dims(C, axis=0)
            P_diff = P_tile - C_tile
            rbf_norm = np.linalg.norm(P_diff, ord=2, axis=2, keepdims=False)
            rbf = np.multiply(np.square(rbf_norm), np.log(rbf_norm + self.eps))
            return np.concatenate([np.ones((n, 1)), P, rbf], axis=1)

        def build_P_prime(self, batch_C_prime):
            batch_size = batch_C_prime.size(0)
            batch_inv_delta_C = self.inv_delta_C.repeat(batch_size, 1, 1)
            batch_P_hat = self.P_hat.repeat(batch_size, 1, 1)
            batch_C_prime_with_zeros = torch.cat((batch_C_prime, torch.zeros(
                batch_size, 3, 2).float()), dim=1)
            batch_T = torch.bmm(batch_inv_delta_C, batch_C_prime_with_zeros)
            return torch.bmm(batch_P_hat, batch_T)

    class TPS(nn.Module):
        def __init__(self):
            super().__init__()
            self.loc = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(True),
                                     nn.AdaptiveAvgPool2d(1))
            self.fc1 = nn.Sequential(nn.Linear(4, 8), nn.ReLU(True))
            self.fc2 = nn.Linear(8, F_pts * 2)
            self.fc2.weight.data.fill_(0)
            ctrl_pts_x = np.linspace(-1.0, 1.0, int(F_pts / 2))
            ctrl_pts_y_top = np.linspace(0.0, -1.0, num=int(F_pts / 2))
            ctrl_pts_y_bottom = np.linspace(1.0, 0.0, num=int(F_pts / 2))
            initial_bias = np.concatenate([np.stack([ctrl_pts_x, ctrl_pts_y_top], axis=1),
                                           np.stack([ctrl_pts_x, ctrl_pts_y_bottom], axis=1)])
            self.fc2.bias.data = torch.from_numpy(initial_bias).float().view(-1)
            self.grid = GridGenerator(F_pts, (H, W))

        def forward(self, batch_I):
            features = self.loc(batch_I).view(batch_I.size(0), -1)
            batch_C_prime = self.fc2(self.fc1(features)).view(batch_I.size(0), F_pts, 2)
            build_P_prime = self.grid.build_P_prime(batch_C_prime)
            build_P_prime_reshape = build_P_prime.reshape([build_P_prime.size(0), H, W, 2])
            return F.grid_sample(batch_I, build_P_prime_reshape, padding_mode="border",
                                 align_corners=True)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.Transformation = TPS()
            self.FeatureExtraction = nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.ReLU(True),
                                                   nn.MaxPool2d(2, 2))
            self.AdaptiveAvgPool = nn.AdaptiveAvgPool2d((None, 1))
            self.SequenceModeling = nn.LSTM(6, 6, bidirectional=True, batch_first=True)
            self.Prediction = nn.Linear(12, len(character))

        def forward(self, input):
            input = self.Transformation(input)
            visual_feature = self.FeatureExtraction(input)
            visual_feature = self.AdaptiveAvgPool(visual_feature.permute(0, 3, 1, 2))
            visual_feature = visual_feature.squeeze(3)
            contextual_feature, _ = self.SequenceModeling(visual_feature)
            return self.Prediction(contextual_feature.contiguous())

    def encode(text, batch_max_length=4):
        dict_ = {char: i + 1 for i, char in enumerate(character[1:])}
        length = [len(s) for s in text]
        batch_text = torch.LongTensor(len(text), batch_max_length).fill_(0)
        for i, t in enumerate(text):
            t = [dict_[char] for char in t]
            batch_text[i][:len(t)] = torch.LongTensor(t)
        return batch_text, torch.IntTensor(length)

    def decode(text_index, length):
        texts = []
        for index, ln in enumerate(length):
            t = text_index[index, :]
            char_list = []
            for i in range(ln):
                if t[i] != 0 and (not (i > 0 and t[i - 1] == t[i])):
                    char_list.append(character[t[i]])
            texts.append("".join(char_list))
        return texts

    class Data(torch.utils.data.Dataset):
        def __init__(self):
            self.images = rng.uniform(size=(5, 1, H, W - 3)).astype(np.float32)
            self.labels = ["ab", "cab", "d", "bb", "dcba"]

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, i):
            return torch.from_numpy(self.images[i]), self.labels[i]

    def align_collate(batch):
        images, labels = zip(*batch)
        images = [F.pad(im, (0, 3), mode="replicate") for im in images]
        image_tensors = torch.cat([t.unsqueeze(0) for t in images], 0)
        return image_tensors.sub(0.5).div(0.5), labels

    model = Model()
    for name, param in model.named_parameters():
        if "Transformation.fc2" in name:
            continue
        with torch.no_grad():
            param.copy_(torch.from_numpy(
                rng.standard_normal(tuple(param.shape)).astype(np.float32) * 0.3))
    model = torch.nn.DataParallel(model)
    model.train()
    filtered_parameters = list(filter(lambda p: p.requires_grad, model.parameters()))
    optimizer = torch.optim.Adadelta(filtered_parameters, lr=1, rho=0.95, eps=1e-8)
    criterion = torch.nn.CTCLoss(zero_infinity=True)
    loader = torch.utils.data.DataLoader(Data(), batch_size=3, shuffle=False,
                                         collate_fn=align_collate)
    res = {"keys": [k for k in model.state_dict() if "grid" in k or "fc2" in k]}
    for it, (image, labels) in enumerate(loader):
        text, length = encode(labels)
        preds = model(image).log_softmax(2)
        preds_size = torch.IntTensor([preds.size(1)] * image.size(0))
        preds = preds.permute(1, 0, 2)
        with torch.backends.cudnn.flags(enabled=False):
            cost = criterion(preds, text, preds_size, length)
        model.zero_grad()
        cost.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5)
        optimizer.step()
        res[f"cost{it}"] = cost.detach()
    res["g_fc2"] = model.module.Transformation.fc2.weight.grad
    res["state"] = optimizer.state[filtered_parameters[0]]["square_avg"]
    model.eval()
    with torch.no_grad():
        preds = model(image)
        preds_prob = F.softmax(preds, dim=2)
        preds_max_prob, preds_index = preds_prob.max(dim=2)
        preds_str = decode(preds_index, [preds.size(1)] * image.size(0))
    res["pred"] = preds_str
    res["conf"] = torch.stack([p.cumprod(dim=0)[-1] for p in preds_max_prob])
    sd = {k.replace("module.", ""): v for k, v in model.state_dict().items()}
    bare = Model()
    missing = bare.load_state_dict(sd, strict=False)
    res["missing"] = [len(missing.missing_keys), len(missing.unexpected_keys)]
    return res


PROGRAMS = [stn_handwriting_program, table_matching_program, rotated_boxes_program,
            perspective_program, trocr_generate_program, dtrb_program]

# grid_sample/attention chains and optimiser steps accumulate float32 reassociation noise
TOLERANCES = {f.__name__: (1e-4, 1e-5) for f in PROGRAMS}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
