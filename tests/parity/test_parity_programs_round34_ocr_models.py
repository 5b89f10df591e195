"""More OCR and document AI programs, as their reference repositories write them in torch, run
once with `torch` bound to ember and once to PyTorch: PARSeq (permuted autoregressive training
with permutation-derived attention masks and nn.MultiheadAttention), Pix2Seq-style coordinate
quantisation into tokens, EAST (RBOX IoU + angle loss, dice score map), PSENet progressive scale
expansion with max-pool dilation, elastic distortion / morphology augmentation, LayoutLMv3
relative 2D position buckets, and an ABINet-like iterative language correction with a
checkpoint round-trip through torch.save/torch.load."""

import io
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def parseq_program(torch):
    """PARSeq: permutations (canonical, reverse and fixed random ones), masks from them via
    indexing an eye-like matrix, query stream with nn.MultiheadAttention (float attn_mask,
    bool key_padding_mask), cross_entropy with ignore_index summed over permutations."""
    rng = np.random.default_rng(10)
    nn, F = torch.nn, torch.nn.functional
    D, V, L, BOS, EOS, PAD = 16, 9, 6, 7, 0, 8

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.text_embed = nn.Embedding(V, D)
            self.pos_queries = nn.Parameter(torch.Tensor(1, L, D))
            self.self_attn = nn.MultiheadAttention(D, 2, batch_first=True)
            self.cross_attn = nn.MultiheadAttention(D, 2, batch_first=True)
            self.norm_q, self.norm_c = nn.LayerNorm(D), nn.LayerNorm(D)
            self.head = nn.Linear(D, V - 2)

        def forward(self, tgt, memory, query_mask, padding_mask):
            N, Lt = tgt.shape
            null_ctx = self.text_embed(tgt[:, :1])
            tgt_emb = self.pos_queries[:, :Lt - 1] + self.text_embed(tgt[:, 1:]) * math.sqrt(D)
            content = self.norm_c(torch.cat([null_ctx, tgt_emb], dim=1))
            query = self.pos_queries[:, :Lt].expand(N, -1, -1)
            q = self.norm_q(query)
            h, w = self.self_attn(q, content, content, attn_mask=query_mask,
                                  key_padding_mask=padding_mask)
            query = query + h
            query = query + self.cross_attn(query, memory, memory, need_weights=False)[0]
            return self.head(query), w

    def gen_attn_masks(perm):
        sz = perm.shape[0]
        mask = torch.zeros((sz, sz))
        for i in range(sz):
            query_idx = perm[i]
            masked_keys = perm[i + 1:]
            mask[query_idx, masked_keys] = float("-inf")
        content_mask = mask[:-1, :-1].clone()
        mask[torch.eye(sz, dtype=torch.bool)] = float("-inf")
        query_mask = mask[1:, :-1]
        return content_mask, query_mask

    dec = Decoder()
    fill_(torch, dec, rng, 0.3)
    memory = normal(torch, rng, 2, 6, D)
    tgt = torch.tensor([[BOS, 1, 2, 3, EOS, PAD, PAD], [BOS, 4, 5, 6, 1, 2, EOS]])
    max_num_chars = tgt.shape[1] - 2
    perm = torch.arange(max_num_chars)
    perms = [perm, perm.flip(-1), torch.from_numpy(rng.permutation(max_num_chars))]
    bos_idx = torch.zeros((len(perms), 1), dtype=perm.dtype)
    eos_idx = torch.full((len(perms), 1), max_num_chars + 1, dtype=perm.dtype)
    perms = torch.cat([bos_idx, torch.stack(perms) + 1, eos_idx], dim=1)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    tgt_padding_mask = (tgt_in == PAD) | (tgt_in == EOS)
    opt = torch.optim.Adam(dec.parameters(), lr=1e-3)
    loss, loss_numel = 0, 0
    n = (tgt_out != PAD).sum().item()
    res = {"perms": perms.flatten().tolist()}
    for i, p in enumerate(perms):
        _, query_mask = gen_attn_masks(p)
        out, w = dec(tgt_in, memory, query_mask, tgt_padding_mask)
        logits = out.flatten(end_dim=1)
        target = tgt_out.flatten().clamp(max=V - 3).masked_fill(tgt_out.flatten() == PAD, -100)
        loss += n * F.cross_entropy(logits, target, ignore_index=-100)
        loss_numel += n
        if i == 1:
            tgt_out = torch.where(tgt_out == EOS, PAD, tgt_out)
            n = (tgt_out != PAD).sum().item()
        res[f"w{i}"] = w.detach()
    loss /= loss_numel
    opt.zero_grad()
    loss.backward()
    opt.step()
    res["loss"] = loss.detach()
    res["g_pos"] = dec.pos_queries.grad
    return res


def pix2seq_program(torch):
    """Pix2Seq: boxes quantised into coordinate bins (round, long, clamp), class tokens offset
    after the bins, random box augmentation (jitter, shuffle via argsort of fixed keys), a
    sequence built by interleaving, and dequantisation with division; a tiny decoder trained
    with per-token weights (noise boxes' coordinates ignored)."""
    rng = np.random.default_rng(11)
    nn, F = torch.nn, torch.nn.functional
    NB, NC = 50, 4
    V = NB + NC + 2
    boxes = torch.tensor([[0.1, 0.2, 0.4, 0.5], [0.5, 0.55, 0.95, 0.9], [0.3, 0.0, 0.31, 1.0]])
    labels = torch.tensor([2, 0, 3])
    jitter = torch.from_numpy(rng.normal(0, 0.02, (3, 4)).astype(np.float32))
    aug = (boxes + jitter).clamp(0, 1)
    noise = torch.from_numpy(rng.uniform(0, 1, (2, 4)).astype(np.float32))
    noise = torch.cat([noise[:, :2].minimum(noise[:, 2:]), noise[:, :2].maximum(noise[:, 2:])], 1)
    all_boxes = torch.cat([aug, noise])
    all_labels = torch.cat([labels, torch.full((2,), NC - 1)])
    order = torch.from_numpy(rng.uniform(size=5).astype(np.float32)).argsort()
    all_boxes, all_labels = all_boxes[order], all_labels[order]
    is_real = (order < 3)
    q = (all_boxes * (NB - 1)).round().long().clamp(0, NB - 1)
    tokens = torch.cat([q, (all_labels + NB)[:, None]], 1).flatten()
    seq = torch.cat([torch.tensor([V - 2]), tokens, torch.tensor([V - 1])])
    weights = torch.cat([is_real[:, None].expand(-1, 4).float(),
                         torch.ones(5, 1)], 1).flatten()
    weights = torch.cat([weights, torch.ones(1)])
    deq = q.float() / (NB - 1)
    res = {"seq": seq.tolist(), "deq": deq, "w": weights}
    emb = nn.Embedding(V, 16)
    rnn = nn.GRU(16, 16, batch_first=True)
    head = nn.Linear(16, V)
    for m in (emb, rnn, head):
        fill_(torch, m, rng, 0.3)
    opt = torch.optim.RMSprop(list(emb.parameters()) + list(rnn.parameters())
                              + list(head.parameters()), lr=1e-3, momentum=0.5, centered=True)
    for it in range(2):
        h, _ = rnn(emb(seq[None, :-1]))
        logits = head(h)[0]
        # constrain coordinate positions to the bin range as Pix2Seq's inference does
        pos = torch.arange(logits.size(0)) % 5
        coord = ((pos < 4) & (torch.arange(logits.size(0)) < logits.size(0) - 1))[:, None] \
            & (torch.arange(V) >= NB)[None, :]
        logits = logits.masked_fill(coord, torch.finfo(logits.dtype).min)
        nll = F.cross_entropy(logits, seq[1:], reduction="none")
        loss = (nll * weights).sum() / weights.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res[f"loss{it}"] = loss.detach()
    pred = logits.argmax(-1)
    res["pred"] = pred.tolist()
    pb = pred[:-1].view(-1, 5)
    res["pred_boxes"] = pb[:, :4].float().div(NB - 1)
    res["pred_cls"] = (pb[:, 4] - NB).clamp(min=-1).tolist()
    return res


def east_program(torch):
    """EAST: score map (sigmoid), RBOX geometry (4 distances * 512 via sigmoid, angle in
    [-pi/4, pi/4]), dice score loss, IoU loss -log((inter+1)/(union+1)) and 1-cos(angle)
    restricted to the training mask, two Adam steps, then restoring rectangles from geometry."""
    rng = np.random.default_rng(12)
    nn = torch.nn

    class Output(nn.Module):
        def __init__(self, c, scope=512):
            super().__init__()
            self.conv1 = nn.Conv2d(c, 1, 1)
            self.conv2 = nn.Conv2d(c, 4, 1)
            self.conv3 = nn.Conv2d(c, 1, 1)
            self.scope = scope

        def forward(self, x):
            score = torch.sigmoid(self.conv1(x))
            loc = torch.sigmoid(self.conv2(x)) * self.scope
            angle = (torch.sigmoid(self.conv3(x)) - 0.5) * math.pi / 2
            return score, torch.cat((loc, angle), 1)

    def get_dice_loss(gt_score, pred_score):
        inter = torch.sum(gt_score * pred_score)
        union = torch.sum(gt_score) + torch.sum(pred_score) + 1e-5
        return 1. - (2 * inter / union)

    def get_geo_loss(gt_geo, pred_geo):
        d1_gt, d2_gt, d3_gt, d4_gt, angle_gt = torch.split(gt_geo, 1, 1)
        d1_pred, d2_pred, d3_pred, d4_pred, angle_pred = torch.split(pred_geo, 1, 1)
        area_gt = (d1_gt + d2_gt) * (d3_gt + d4_gt)
        area_pred = (d1_pred + d2_pred) * (d3_pred + d4_pred)
        w_union = torch.min(d3_gt, d3_pred) + torch.min(d4_gt, d4_pred)
        h_union = torch.min(d1_gt, d1_pred) + torch.min(d2_gt, d2_pred)
        area_intersect = w_union * h_union
        area_union = area_gt + area_pred - area_intersect
        iou_loss_map = -torch.log((area_intersect + 1.0) / (area_union + 1.0))
        angle_loss_map = 1 - torch.cos(angle_pred - angle_gt)
        return iou_loss_map, angle_loss_map

    backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
    out = Output(8)
    fill_(torch, backbone, rng, 0.3)
    fill_(torch, out, rng, 0.3)
    params = list(backbone.parameters()) + list(out.parameters())
    opt = torch.optim.Adam(params, lr=1e-3, amsgrad=True)
    img = normal(torch, rng, 2, 3, 8, 8)
    gt_score = torch.zeros(2, 1, 8, 8)
    gt_score[0, :, 2:5, 1:7] = 1
    gt_score[1, :, 4:7, 3:6] = 1
    gt_geo = torch.from_numpy(rng.uniform(1, 200, (2, 5, 8, 8)).astype(np.float32))
    gt_geo[:, 4] = torch.from_numpy(rng.uniform(-0.7, 0.7, (2, 8, 8)).astype(np.float32))
    ignored_map = torch.zeros(2, 1, 8, 8)
    ignored_map[0, :, 0, 0] = 1
    res = {}
    for it in range(2):
        pred_score, pred_geo = out(backbone(img))
        classify_loss = get_dice_loss(gt_score, pred_score * (1 - ignored_map))
        iou_loss_map, angle_loss_map = get_geo_loss(gt_geo, pred_geo)
        angle_loss = torch.sum(angle_loss_map * gt_score) / torch.sum(gt_score)
        iou_loss = torch.sum(iou_loss_map * gt_score) / torch.sum(gt_score)
        geo_loss = 20 * angle_loss + iou_loss
        loss = geo_loss + classify_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        res[f"loss{it}"] = torch.stack([classify_loss, angle_loss, iou_loss]).detach()
    # restore polygons at confident pixels
    with torch.no_grad():
        score = pred_score[0, 0]
        ys, xs = torch.nonzero(score > score.median(), as_tuple=True)
        g = pred_geo[0, :, ys, xs]
        ang = g[4]
        cos, sin = torch.cos(ang), torch.sin(ang)
        x0 = xs.float() * 4 - g[2] * cos + g[0] * sin
        y0 = ys.float() * 4 - g[2] * sin - g[0] * cos
        res["n"] = int(ys.numel())
        res["origin"] = torch.stack([x0, y0], 1)
    return res


def pse_program(torch):
    """PSENet: kernels from sigmoid maps, connected components of the smallest kernel by
    iterative max-pool label propagation, progressive expansion into larger kernels by dilating
    labels (max_pool2d) where unlabelled, and the OHEM dice loss on kernels."""
    rng = np.random.default_rng(13)
    F = torch.nn.functional
    logits = normal(torch, rng, 1, 3, 10, 12) * 2
    logits[0, :, 2:5, 2:6] += 4
    logits[0, :, 6:9, 7:11] += 4
    logits[0, 1:, 1:6, 1:7] += 3
    logits[0, 2:, 0:10, 6:12] += 2
    logits.requires_grad_()
    score = torch.sigmoid(logits)
    kernels = (score > 0.8).float().detach()
    k0 = kernels[0, 0]
    H, W = k0.shape
    ids = torch.arange(1, H * W + 1, dtype=torch.float32).view(H, W) * k0
    while True:
        nxt = F.max_pool2d(ids[None, None], 3, 1, 1)[0, 0] * k0
        if torch.equal(nxt, ids):
            break
        ids = nxt
    uniq = torch.unique(ids)
    uniq = uniq[uniq > 0]
    remap = torch.zeros(int(H * W) + 1, dtype=torch.long)
    remap[uniq.long()] = torch.arange(1, uniq.numel() + 1)
    label = remap[ids.long()]
    res = {"n_cc": uniq.numel(), "label0": label.flatten().tolist()}
    for k in range(1, kernels.shape[1]):
        kernel = kernels[0, k].bool()
        for _ in range(4):
            grown = F.max_pool2d(label[None, None].float(), 3, 1, 1)[0, 0].long()
            label = torch.where((label == 0) & kernel, grown, label)
    res["label"] = label.flatten().tolist()
    res["areas"] = torch.bincount(label.flatten(), minlength=4).tolist()
    # OHEM dice on the text map and kernel dice within text
    gt = (label > 0).float()
    pos = int(gt.sum())
    neg_scores = score[0, 0][gt == 0]
    n_neg = min(int((gt == 0).sum()), pos * 3)
    thr = torch.sort(neg_scores, descending=True).values[n_neg - 1]
    sel = ((score[0, 0] >= thr) | (gt > 0)).float()
    a = (score[0, 0] * sel).flatten()
    b = (gt * sel).flatten()
    dice = 1 - 2 * (a * b).sum() / ((a * a).sum() + (b * b).sum() + 1e-3)
    kdice = 1 - 2 * (score[0, 1:] * kernels[0, 1:] * gt).sum((1, 2)) / (
        (score[0, 1:] ** 2 * gt).sum((1, 2)) + (kernels[0, 1:] * gt).sum((1, 2)) + 1e-3)
    loss = 0.7 * dice + 0.3 * kdice.mean()
    loss.backward()
    res["loss"] = loss.detach()
    res["grad"] = logits.grad
    return res


def augment_program(torch):
    """Text-image augmentation in tensor ops: elastic distortion (random displacement fields
    smoothed by a depthwise Gaussian conv2d, upsampled with interpolate, applied with
    grid_sample), morphological thinning/thickening with max_pool2d, salt-and-pepper noise via
    masked_fill from fixed uniforms, motion blur with a rotated line kernel and a per-image
    gamma/inversion."""
    rng = np.random.default_rng(14)
    F = torch.nn.functional
    B, H, W = 2, 12, 20
    img = torch.from_numpy(rng.uniform(size=(B, 1, H, W)).astype(np.float32))
    disp = torch.from_numpy(rng.uniform(-1, 1, (B, 2, H // 4, W // 4)).astype(np.float32))
    sigma = 1.0
    ks = 5
    ax = torch.arange(ks, dtype=torch.float32) - ks // 2
    g1 = torch.exp(-ax ** 2 / (2 * sigma ** 2))
    g1 = g1 / g1.sum()
    k2 = (g1[:, None] * g1[None, :]).expand(2, 1, ks, ks)
    disp = F.conv2d(F.pad(disp, (2, 2, 2, 2), mode="replicate"), k2, groups=2)
    disp = F.interpolate(disp, size=(H, W), mode="bicubic", align_corners=True) * 0.1
    theta = torch.eye(2, 3).unsqueeze(0).repeat(B, 1, 1)
    base = F.affine_grid(theta, (B, 1, H, W), align_corners=True)
    elastic = F.grid_sample(img, base + disp.permute(0, 2, 3, 1), padding_mode="border",
                            align_corners=True)
    res = {"elastic": elastic}
    ink = (elastic < 0.4).float()
    res["thick"] = F.max_pool2d(ink, (1, 3), 1, (0, 1))
    res["thin"] = 1 - F.max_pool2d(1 - ink, 3, 1, 1)
    u = torch.from_numpy(rng.uniform(size=(B, 1, H, W)).astype(np.float32))
    sp = elastic.masked_fill(u < 0.05, 0.0).masked_fill(u > 0.95, 1.0)
    ang = torch.tensor([0.3, -1.1])
    t = torch.linspace(-1, 1, ks)
    xs = (t[None, :, None] * torch.cos(ang)[:, None, None]).expand(B, ks, ks)
    ys = (t[None, None, :] * 0 + t[None, :, None] * torch.sin(ang)[:, None, None])
    grid_y, grid_x = torch.meshgrid(t, t, indexing="ij")
    dist = ((grid_x[None] * torch.sin(ang)[:, None, None]
             - grid_y[None] * torch.cos(ang)[:, None, None]).abs())
    kern = torch.relu(1 - dist * 2)
    kern = kern / kern.sum((1, 2), keepdim=True)
    blurred = F.conv2d(sp.transpose(0, 1), kern[:, None], padding=ks // 2, groups=B)
    res["blur"] = blurred.transpose(0, 1)
    res["aux"] = (xs + ys).sum((1, 2))
    gamma = torch.tensor([0.7, 1.4]).view(B, 1, 1, 1)
    inv = torch.tensor([True, False]).view(B, 1, 1, 1)
    out = blurred.transpose(0, 1).clamp(1e-6, 1).pow(gamma)
    out = torch.where(inv, 1 - out, out)
    res["final_u8"] = out.mul(255).add_(0.5).floor_().to(torch.uint8).flatten(1).float().mean(1)
    return res


def layoutlmv3_bias_program(torch):
    """LayoutLMv3 relative position bias: T5-style bucketing of 1D and 2D (x, y) relative
    positions (abs, log scaling, torch.where, min with full_like), embedding via one-hot
    matmul of a bias table, added to attention scores scaled by cogview alpha."""
    rng = np.random.default_rng(15)
    nn, F = torch.nn, torch.nn.functional
    H, N = 2, 7

    def relative_position_bucket(relative_position, bidirectional=True, num_buckets=32,
                                 max_distance=128):
        ret = 0
        if bidirectional:
            num_buckets //= 2
            ret += (relative_position > 0).long() * num_buckets
            n = torch.abs(relative_position)
        else:
            n = torch.max(-relative_position, torch.zeros_like(relative_position))
        max_exact = num_buckets // 2
        is_small = n < max_exact
        val_if_large = max_exact + (
            torch.log(n.float() / max_exact) / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)).to(torch.long)
        val_if_large = torch.min(val_if_large, torch.full_like(val_if_large, num_buckets - 1))
        ret += torch.where(is_small, n, val_if_large)
        return ret

    bbox = torch.from_numpy(rng.integers(0, 1000, (2, N, 4)))
    bbox = torch.cat([bbox[..., :2].minimum(bbox[..., 2:]), bbox[..., :2].maximum(bbox[..., 2:])],
                     -1)
    position_ids = torch.arange(N).expand(2, -1)
    rel_pos_mat = position_ids.unsqueeze(-2) - position_ids.unsqueeze(-1)
    rel_pos = relative_position_bucket(rel_pos_mat, num_buckets=32, max_distance=128)
    rel_pos_bias = nn.Linear(32, H, bias=False)
    rel_x_bias = nn.Linear(64, H, bias=False)
    rel_y_bias = nn.Linear(64, H, bias=False)
    for m in (rel_pos_bias, rel_x_bias, rel_y_bias):
        fill_(torch, m, rng, 0.5)
    rel_pos_oh = F.one_hot(rel_pos, num_classes=32).type_as(rel_pos_bias.weight)
    rp = rel_pos_bias(rel_pos_oh).permute(0, 3, 1, 2)
    x = bbox[:, :, 0]
    y = bbox[:, :, 3]
    rel_x = relative_position_bucket(x.unsqueeze(-2) - x.unsqueeze(-1), num_buckets=64,
                                     max_distance=256)
    rel_y = relative_position_bucket(y.unsqueeze(-2) - y.unsqueeze(-1), num_buckets=64,
                                     max_distance=256)
    rx = rel_x_bias(F.one_hot(rel_x, 64).float()).permute(0, 3, 1, 2)
    ry = rel_y_bias(F.one_hot(rel_y, 64).float()).permute(0, 3, 1, 2)
    q = normal(torch, rng, 2, H, N, 8).requires_grad_()
    k = normal(torch, rng, 2, H, N, 8)
    alpha = 32
    scores = torch.matmul(q / math.sqrt(8), k.transpose(-1, -2))
    scores = scores + (rp + rx + ry) / math.sqrt(8)
    mask = torch.tensor([[1] * N, [1] * 5 + [0] * 2]).bool()[:, None, None, :]
    scores = scores.masked_fill(~mask, float("-inf"))
    scaled = scores / alpha
    max_value = scaled.amax(dim=-1).unsqueeze(-1)
    probs = F.softmax((scaled - max_value) * alpha, dim=-1)
    (probs * torch.arange(N, dtype=torch.float32)).sum().backward()
    return {"rel": rel_pos.flatten().tolist(), "rel_x": rel_x.flatten().tolist(),
            "rel_y": rel_y.flatten().tolist(), "probs": probs.detach(), "g": q.grad,
            "gw": rel_x_bias.weight.grad}


def abinet_program(torch):
    """ABINet-style iterative correction: vision logits -> softmax -> a bidirectional cloze
    language model over probability vectors (diagonal-masked self-attention), fusion gate,
    three iterations with detach between them, length from the first EOS via argmax on a
    cumulative mask; then a checkpoint round-trip through torch.save/torch.load (state dict,
    optimizer state and a charset list) into a fresh model that must continue identically."""
    rng = np.random.default_rng(16)
    nn, F = torch.nn, torch.nn.functional
    C, T, D = 6, 5, 12

    class BCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(C, D, bias=False)
            self.pos = nn.Parameter(torch.zeros(T, D))
            self.attn = nn.MultiheadAttention(D, 2)
            self.cls = nn.Linear(D, C)
            self.gate = nn.Linear(2 * D, D)
            self.vproj = nn.Linear(C, D)

        def forward(self, tokens, vision_logits):
            embed = self.proj(tokens).transpose(0, 1)  # (T, N, D)
            q = self.pos[:, None, :].expand_as(embed)
            mask = torch.eye(T, dtype=torch.bool)
            feat, _ = self.attn(q, embed, embed, attn_mask=mask)
            l_feat = feat.transpose(0, 1)
            v_feat = self.vproj(vision_logits.softmax(-1))
            f_att = torch.sigmoid(self.gate(torch.cat((v_feat, l_feat), dim=2)))
            output = f_att * v_feat + (1 - f_att) * l_feat
            return self.cls(l_feat), self.cls(output)

    def pt_length(logit, null=0):
        out = logit.argmax(dim=-1) == null
        abn = out.any(-1)
        out = ((out.cumsum(-1) == 1) & out).max(-1)[1] + 1
        return torch.where(abn, out, out.new_tensor(logit.shape[1]))

    model = BCN()
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    vision = normal(torch, rng, 2, T, C) * 2
    target = torch.tensor([[1, 2, 3, 0, 0], [4, 4, 5, 2, 0]])
    res = {}

    def train_step(m, o):
        a_res = vision
        losses = []
        for _ in range(3):
            tokens = torch.softmax(a_res, dim=-1).detach()
            lengths = pt_length(a_res).clamp_(2, T)
            l_logit, a_res = m(tokens, vision)
            valid = torch.arange(T)[None, :] < lengths[:, None]
            tl = F.cross_entropy(a_res.transpose(1, 2), target, reduction="none")
            losses.append((tl * valid).sum() / valid.sum())
            losses.append(F.cross_entropy(l_logit.reshape(-1, C), target.flatten()))
        loss = sum(losses) / len(losses)
        o.zero_grad()
        loss.backward()
        o.step()
        return loss.detach(), lengths

    for it in range(2):
        loss, lengths = train_step(model, opt)
        res[f"loss{it}"] = loss
        res[f"len{it}"] = lengths.tolist()
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                "charset": ["<null>", "a", "b", "c", "d", "e"], "step": 2}, buf)
    buf.seek(0)
    ckpt = torch.load(buf, weights_only=True)
    model2 = BCN()
    model2.load_state_dict(ckpt["model"])
    opt2 = torch.optim.Adam(model2.parameters(), lr=1e-2)
    opt2.load_state_dict(ckpt["opt"])
    res["charset"] = ckpt["charset"]
    l1, _ = train_step(model, opt)
    l2, _ = train_step(model2, opt2)
    res["cont"] = torch.stack([l1, l2])
    res["same"] = bool(torch.allclose(model.cls.weight, model2.cls.weight))
    res["state_step"] = float(opt2.state_dict()["state"][0]["step"])
    return res


PROGRAMS = [parseq_program, pix2seq_program, east_program, pse_program, augment_program,
            layoutlmv3_bias_program, abinet_program]

# attention/recurrent chains and optimiser steps accumulate float32 reassociation noise
TOLERANCES = {f.__name__: (1e-4, 1e-5) for f in PROGRAMS}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
