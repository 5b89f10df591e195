"""OCR and document AI written as its reference repositories write it in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights: CRNN (conv stack +
BiLSTM + CTC with varied lengths, blank index, zero_infinity, reductions; greedy and prefix-beam
decoding), DBNet (differentiable binarisation, balanced BCE with OHEM via topk/sort, dice and
masked L1), an attention OCR decoder (Bahdanau with teacher forcing, label-smoothed
cross_entropy with ignore_index) and LayoutLM (2D position embeddings from clamped boxes).
The sibling _geometry covers STN handwriting, table matching, rotated boxes, homographies and a
TrOCR-style generate loop."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def crnn_ctc_program(torch):
    """CRNN: VGG-ish conv stack collapsing height, BiLSTM, CTC loss with every reduction,
    a non-zero blank, zero_infinity on an infeasible target, one SGD step, greedy decoding."""
    rng = np.random.default_rng(0)
    nn, F = torch.nn, torch.nn.functional
    C = 6  # classes incl. blank

    class BidirectionalLSTM(nn.Module):
        def __init__(self, nIn, nHidden, nOut):
            super().__init__()
            self.rnn = nn.LSTM(nIn, nHidden, bidirectional=True)
            self.embedding = nn.Linear(nHidden * 2, nOut)

        def forward(self, input):
            recurrent, _ = self.rnn(input)
            T, b, h = recurrent.size()
            t_rec = recurrent.view(T * b, h)
            output = self.embedding(t_rec)
            return output.view(T, b, -1)

    class CRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.cnn = nn.Sequential(
                nn.Conv2d(1, 4, 3, 1, 1), nn.ReLU(True), nn.MaxPool2d(2, 2),
                nn.Conv2d(4, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.ReLU(True),
                nn.MaxPool2d((2, 2), (2, 1), (0, 1)),
                nn.Conv2d(8, 8, (2, 1), 1, 0), nn.LeakyReLU(0.2, True))
            self.rnn = nn.Sequential(BidirectionalLSTM(8, 6, 6), BidirectionalLSTM(6, 6, C))

        def forward(self, input):
            conv = self.cnn(input)
            b, c, h, w = conv.size()
            assert h == 1, "the height of conv must be 1"
            conv = conv.squeeze(2).permute(2, 0, 1)  # [w, b, c]
            return F.log_softmax(self.rnn(conv), dim=2)

    model = CRNN()
    fill_(torch, model, rng, 0.6)
    images = normal(torch, rng, 3, 1, 8, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    res = {}
    log_probs = model(images)  # T=9
    T = log_probs.size(0)
    targets = torch.tensor([1, 2, 2, 3, 4, 1, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5], dtype=torch.int32)
    target_lengths = torch.tensor([3, 3, 10], dtype=torch.int32)
    input_lengths = torch.full((3,), T, dtype=torch.long)
    input_lengths[1] = T - 2
    for red in ("none", "sum", "mean"):
        res["ctc_" + red] = F.ctc_loss(log_probs, targets, input_lengths, target_lengths,
                                       reduction=red, zero_infinity=True)
    # padded 2D targets, blank = C - 1 (as in some repos that put blank last)
    padded = torch.tensor([[1, 2, 3], [4, 1, 0], [2, 2, 2]])
    crit = nn.CTCLoss(blank=C - 1, reduction="mean", zero_infinity=True)
    loss = crit(log_probs, padded, input_lengths, torch.tensor([3, 2, 3]))
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    res["grad_conv"] = model.cnn[0].weight.grad
    res["grad_rnn"] = model.rnn[1].embedding.weight.grad
    opt.step()
    res["loss"] = loss.detach()
    model.eval()
    with torch.no_grad():
        preds = model(images)
    res["eval_lp"] = preds
    _, idx = log_probs.detach().max(2)
    idx = idx.transpose(1, 0).contiguous()
    texts = []
    alphabet = "-abcde"
    for seq in idx.tolist():
        chars = [alphabet[c] for i, c in enumerate(seq)
                 if c != 0 and not (i > 0 and seq[i - 1] == c)]
        texts.append("".join(chars) or "<empty>")
    res["greedy"] = texts
    res["idx"] = idx.flatten().tolist()
    return res


def ctc_beam_program(torch):
    """CTC prefix beam search over a [T, C] softmax (as in the ctcdecode-free repos), plus
    ctc_loss of the best beam checked against the beam's own log-probability."""
    rng = np.random.default_rng(1)
    F = torch.nn.functional
    T, C = 7, 4
    logits = normal(torch, rng, T, C) * 2
    probs = logits.softmax(-1)
    beams = {(): (1.0, 0.0)}  # prefix -> (p_blank, p_non_blank)
    for t in range(T):
        nxt = {}
        p = probs[t].tolist()
        for prefix, (pb, pnb) in beams.items():
            for c in range(C):
                pc = p[c]
                if c == 0:
                    b0, n0 = nxt.get(prefix, (0.0, 0.0))
                    nxt[prefix] = (b0 + (pb + pnb) * pc, n0)
                    continue
                last = prefix[-1] if prefix else None
                ext = prefix + (c,)
                b0, n0 = nxt.get(ext, (0.0, 0.0))
                if c == last:
                    nxt[ext] = (b0, n0 + pb * pc)
                    b1, n1 = nxt.get(prefix, (0.0, 0.0))
                    nxt[prefix] = (b1, n1 + pnb * pc)
                else:
                    nxt[ext] = (b0, n0 + (pb + pnb) * pc)
        beams = dict(sorted(nxt.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))[:4])
    best = list(beams)
    res = {"beams": ["".join(map(str, b)) for b in best]}
    res["beam_p"] = [round(math.log(sum(v)), 4) for v in beams.values()]
    lp = probs.log().unsqueeze(1).requires_grad_()
    tgt = torch.tensor([list(best[0])])
    loss = F.ctc_loss(lp, tgt, torch.tensor([T]), torch.tensor([len(best[0])]), reduction="sum")
    loss.backward()
    res["nll"] = loss.detach()
    res["grad"] = lp.grad
    # batched ctc with empty target and 1D concatenated targets, reduction none
    lp2 = F.log_softmax(normal(torch, rng, 5, 3, C), -1)
    out = F.ctc_loss(lp2, torch.tensor([1, 2, 3, 3]), torch.tensor([5, 4, 5]),
                     torch.tensor([0, 1, 3]), reduction="none")
    res["none"] = out
    return res


def dbnet_program(torch):
    """DBNet head: probability map, threshold map, approximate binary map 1/(1+exp(-k(P-T))),
    balanced BCE with OHEM (negatives by topk and by sort), dice loss on the binary map,
    masked L1 on the threshold map, one Adam step."""
    rng = np.random.default_rng(2)
    nn, F = torch.nn, torch.nn.functional

    class DBHead(nn.Module):
        def __init__(self, c, k=50):
            super().__init__()
            self.k = k
            self.binarize = nn.Sequential(
                nn.Conv2d(c, c // 2, 3, padding=1, bias=False), nn.BatchNorm2d(c // 2),
                nn.ReLU(inplace=True), nn.ConvTranspose2d(c // 2, c // 2, 2, 2),
                nn.BatchNorm2d(c // 2), nn.ReLU(inplace=True),
                nn.ConvTranspose2d(c // 2, 1, 2, 2), nn.Sigmoid())
            self.thresh = nn.Sequential(
                nn.Conv2d(c, c // 2, 3, padding=1, bias=False), nn.BatchNorm2d(c // 2),
                nn.ReLU(inplace=True), nn.Upsample(scale_factor=2, mode="nearest"),
                nn.Conv2d(c // 2, c // 2, 3, padding=1), nn.BatchNorm2d(c // 2),
                nn.ReLU(inplace=True), nn.Upsample(scale_factor=2, mode="bilinear",
                                                   align_corners=False),
                nn.Conv2d(c // 2, 1, 3, padding=1), nn.Sigmoid())

        def step_function(self, x, y):
            return torch.reciprocal(1 + torch.exp(-self.k * (x - y)))

        def forward(self, x):
            shrink_maps = self.binarize(x)
            threshold_maps = self.thresh(x)
            binary_maps = self.step_function(shrink_maps, threshold_maps)
            return torch.cat((shrink_maps, threshold_maps, binary_maps), dim=1)

    def balance_bce(pred, gt, mask, negative_ratio=3.0, eps=1e-6, use_sort=False):
        positive = (gt * mask).byte()
        negative = ((1 - gt) * mask).byte()
        positive_count = int(positive.float().sum())
        negative_count = min(int(negative.float().sum()), int(positive_count * negative_ratio))
        loss = F.binary_cross_entropy(pred, gt, reduction="none")
        positive_loss = loss * positive.float()
        negative_loss = loss * negative.float()
        if use_sort:
            negative_loss, _ = negative_loss.view(-1).sort(descending=True)
            negative_loss = negative_loss[:negative_count]
        else:
            negative_loss, _ = negative_loss.view(-1).topk(negative_count)
        return (positive_loss.sum() + negative_loss.sum()) / (
            positive_count + negative_count + eps)

    def dice_loss(pred, gt, mask, eps=1e-6):
        intersection = (pred * gt * mask).sum()
        union = (pred * mask).sum() + (gt * mask).sum() + eps
        return 1 - 2.0 * intersection / union

    def mask_l1(pred, gt, mask, eps=1e-6):
        return (torch.abs(pred - gt) * mask).sum() / (mask.sum() + eps)

    head = DBHead(8)
    fill_(torch, head, rng, 0.2)
    opt = torch.optim.Adam(head.parameters(), lr=1e-3)
    x = normal(torch, rng, 2, 8, 4, 4)
    gt = torch.zeros(2, 16, 16)
    gt[0, 3:9, 2:12] = 1
    gt[1, 10:14, 4:8] = 1
    mask = torch.ones(2, 16, 16)
    mask[:, :, -1] = 0
    thresh_map = torch.from_numpy(rng.uniform(0.3, 0.7, (2, 16, 16)).astype(np.float32))
    thresh_mask = (gt > 0).float()
    with torch.no_grad():
        p0 = head(x)[:, 0]
    res = {}
    for step in range(2):
        pred = head(x)
        bce = balance_bce(pred[:, 0], gt, mask, use_sort=step == 1)
        l1 = mask_l1(pred[:, 1], thresh_map, thresh_mask)
        dice = dice_loss(pred[:, 2], gt, mask)
        loss = 5 * bce + 10 * l1 + dice
        opt.zero_grad()
        loss.backward()
        opt.step()
        res[f"loss{step}"] = torch.stack([bce, l1, dice]).detach()
    res["g"] = head.thresh[-2].weight.grad
    head.eval()
    with torch.no_grad():
        res["eval_p"] = head(x)[:, 0]
    # threshold the map from before training: Adam's first steps turn float32 noise in
    # near-zero gradients into 1e-5 map differences, too close to any threshold
    p = p0
    seg = p > 0.5
    res["seg_count"] = seg.sum((1, 2)).tolist()
    res["score"] = (p * seg).sum((1, 2)) / seg.sum((1, 2)).clamp(min=1)
    return res


def attention_ocr_program(torch):
    """Bahdanau attention decoder (GRUCell) over a conv feature sequence with teacher forcing
    on a mix of steps, label-smoothed cross_entropy with ignore_index on padding, and a Luong
    (general) scoring variant used for greedy decoding with an EOS stop."""
    rng = np.random.default_rng(3)
    nn, F = torch.nn, torch.nn.functional
    V, Hd, PAD, SOS, EOS = 7, 12, 0, 1, 2

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.i2h = nn.Linear(Hd, Hd, bias=False)
            self.h2h = nn.Linear(Hd, Hd)
            self.score = nn.Linear(Hd, 1, bias=False)
            self.rnn = nn.GRUCell(Hd + V, Hd)
            self.generator = nn.Linear(Hd, V)

        def step(self, prev_hidden, batch_H, char_onehots):
            batch_H_proj = self.i2h(batch_H)
            prev_hidden_proj = self.h2h(prev_hidden).unsqueeze(1)
            e = self.score(torch.tanh(batch_H_proj + prev_hidden_proj))
            alpha = F.softmax(e, dim=1)
            context = torch.bmm(alpha.permute(0, 2, 1), batch_H).squeeze(1)
            concat_context = torch.cat([context, char_onehots], 1)
            return self.rnn(concat_context, prev_hidden), alpha

        def forward(self, batch_H, text, teacher):
            B, steps = text.shape
            hidden = batch_H.new_zeros(B, Hd)
            outs = batch_H.new_zeros(B, steps, Hd)
            prev = text[:, 0]
            for i in range(steps):
                onehot = F.one_hot(prev, V).float()
                hidden, _ = self.step(hidden, batch_H, onehot)
                outs[:, i, :] = hidden
                nxt = self.generator(hidden).argmax(1)
                if i + 1 < steps:
                    prev = torch.where(teacher[:, i], text[:, i + 1], nxt)
            return self.generator(outs)

    enc = nn.Sequential(nn.Conv2d(1, Hd, 3, padding=1), nn.ReLU(),
                        nn.AdaptiveAvgPool2d((1, 5)))
    attn = Attn()
    fill_(torch, enc, rng)
    fill_(torch, attn, rng)
    params = list(enc.parameters()) + list(attn.parameters())
    opt = torch.optim.AdamW(params, lr=1e-2, weight_decay=0.01)
    img = normal(torch, rng, 3, 1, 6, 10)
    text = torch.tensor([[SOS, 3, 4, 5, EOS, PAD], [SOS, 6, EOS, PAD, PAD, PAD],
                         [SOS, 3, 3, 3, 4, EOS]])
    teacher = torch.from_numpy(rng.uniform(size=(3, 6)) < 0.7)
    res = {}
    for it in range(2):
        feats = enc(img).squeeze(2).permute(0, 2, 1)
        logits = attn(feats, text[:, :-1], teacher)
        loss = F.cross_entropy(logits.reshape(-1, V), text[:, 1:].reshape(-1),
                               ignore_index=PAD, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res[f"loss{it}"] = loss.detach()
    res["g"] = attn.score.weight.grad
    # per-sample losses with reduction none keep zeros at the ignored positions
    res["none"] = F.cross_entropy(logits.detach().permute(0, 2, 1), text[:, 1:],
                                  ignore_index=PAD, reduction="none", label_smoothing=0.2)
    # Luong "general" scoring greedy decode
    W = nn.Linear(Hd, Hd, bias=False)
    fill_(torch, W, rng)
    with torch.no_grad():
        feats = enc(img).squeeze(2).permute(0, 2, 1)
        h = feats.mean(1)
        done = torch.zeros(3, dtype=torch.bool)
        seq = []
        for _ in range(5):
            scores = torch.einsum("bth,bh->bt", W(feats), h)
            ctx = (scores.softmax(-1).unsqueeze(-1) * feats).sum(1)
            h = torch.tanh(ctx + h)
            tok = (attn.generator(h)[:, 1:].argmax(-1) + 1).masked_fill(done, PAD)
            seq.append(tok)
            done |= tok == EOS
        res["luong"] = torch.stack(seq, 1).flatten().tolist()
        res["h"] = h
    return res


def layoutlm_program(torch):
    """LayoutLM embeddings: words + 1D positions + x0/y0/x1/y1 + h/w embeddings from boxes
    normalised to 0..1000 (clamp, long), token types, LayerNorm, an encoder layer with an
    extended attention mask, and a token-classification loss with -100 labels."""
    rng = np.random.default_rng(4)
    nn, F = torch.nn, torch.nn.functional
    V, D, MAXP = 20, 16, 1024

    class LayoutLMEmbeddings(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = nn.Embedding(V, D, padding_idx=0)
            self.position_embeddings = nn.Embedding(32, D)
            self.x_position_embeddings = nn.Embedding(MAXP, D)
            self.y_position_embeddings = nn.Embedding(MAXP, D)
            self.h_position_embeddings = nn.Embedding(MAXP, D)
            self.w_position_embeddings = nn.Embedding(MAXP, D)
            self.token_type_embeddings = nn.Embedding(2, D)
            self.LayerNorm = nn.LayerNorm(D, eps=1e-12)
            self.register_buffer("position_ids", torch.arange(32).expand((1, -1)),
                                 persistent=False)

        def forward(self, input_ids, bbox, token_type_ids):
            seq_length = input_ids.size(1)
            position_ids = self.position_ids[:, :seq_length]
            left = self.x_position_embeddings(bbox[:, :, 0])
            upper = self.y_position_embeddings(bbox[:, :, 1])
            right = self.x_position_embeddings(bbox[:, :, 2])
            lower = self.y_position_embeddings(bbox[:, :, 3])
            h = self.h_position_embeddings(bbox[:, :, 3] - bbox[:, :, 1])
            w = self.w_position_embeddings(bbox[:, :, 2] - bbox[:, :, 0])
            emb = (self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
                   + left + upper + right + lower + h + w
                   + self.token_type_embeddings(token_type_ids))
            return self.LayerNorm(emb)

    emb = LayoutLMEmbeddings()
    layer = nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0, batch_first=True)
    cls = nn.Linear(D, 5)
    for m in (emb, layer, cls):
        fill_(torch, m, rng, 0.1)
    page_w, page_h = 612.0, 792.0
    raw = torch.from_numpy(rng.uniform(-20, 800, (2, 6, 4)).astype(np.float32))
    x0, x1 = torch.minimum(raw[..., 0], raw[..., 2]), torch.maximum(raw[..., 0], raw[..., 2])
    y0, y1 = torch.minimum(raw[..., 1], raw[..., 3]), torch.maximum(raw[..., 1], raw[..., 3])
    boxes = torch.stack([x0 / page_w, y0 / page_h, x1 / page_w, y1 / page_h], -1)
    bbox = (boxes * 1000).clamp(0, 1000).long()
    ids = torch.tensor([[2, 5, 7, 9, 3, 0], [2, 11, 4, 0, 0, 0]])
    attention_mask = (ids != 0).long()
    tt = torch.zeros_like(ids)
    tt[:, 3:] = 1
    labels = torch.tensor([[-100, 1, 2, 3, -100, -100], [-100, 4, 0, -100, -100, -100]])
    opt = torch.optim.Adam(list(emb.parameters()) + list(layer.parameters())
                           + list(cls.parameters()), lr=1e-3)
    res = {"bbox": bbox.flatten().tolist()}
    for it in range(2):
        h = emb(ids, bbox, tt)
        ext = (1.0 - attention_mask[:, None, None, :].to(h.dtype)) * torch.finfo(h.dtype).min
        scores = h @ h.transpose(-1, -2) / math.sqrt(D) + ext.squeeze(1)
        h = h + scores.softmax(-1) @ h
        h = layer(h, src_key_padding_mask=attention_mask == 0)
        logits = cls(h)
        loss = F.cross_entropy(logits.view(-1, 5), labels.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        res[f"loss{it}"] = loss.detach()
    res["g_x"] = emb.x_position_embeddings.weight.grad[bbox[..., 0].flatten()]
    res["pred"] = logits.argmax(-1).masked_fill(labels == -100, -1).flatten().tolist()
    return res


PROGRAMS = [crnn_ctc_program, ctc_beam_program, dbnet_program, attention_ocr_program,
            layoutlm_program]

# LSTM/GRU chains and Adam/SGD steps accumulate float32 reassociation noise
TOLERANCES = {name.__name__: (1e-4, 1e-5) for name in PROGRAMS}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
