"""Ranking and sequential recommendation of round 26 (see test_parity_programs_round26_recsys.py):
allRank's RankNet, ListNet and lambdaLoss on padded slates with NDCG@k, a hand-written
LambdaRank step, SASRec (causal MultiheadAttention, np.where-picked logits) and GRU4Rec
(session-parallel batches, one-hot buffers, BPR/TOP1 losses and their -max variants)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _dtype(t):
    return str(t.dtype).rsplit(".", 1)[-1]


PADDED_Y_VALUE, DEFAULT_EPS = -1, 1e-10


def learning_to_rank_program(torch):
    """allRank's losses on padded slates: RankNet over every document pair indexed by a list
    of tuples, masked with isinf and weighted by |diff|; ListNet with -inf written into
    clones; lambdaLoss with the ndcgLoss2 scheme (sort, gather, pairwise differences whose
    padded pairs are NaN, clamp_ on gathered gains, log2 of a clamped power); a hand-written
    LambdaRank step (|delta NDCG| from argsort ranks, ``y_pred.backward(lambdas)``) and
    NDCG@k from sort/gather."""
    from itertools import product
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2606)
    B, L, f = 3, 5, 4

    def rankNet(y_pred, y_true, weight_by_diff=False, weight_by_diff_powed=False):
        y_pred = y_pred.clone()
        y_true = y_true.clone()
        mask = y_true == PADDED_Y_VALUE
        y_pred[mask] = float("-inf")
        y_true[mask] = float("-inf")
        document_pairs_candidates = list(product(range(y_true.shape[1]), repeat=2))
        pairs_true = y_true[:, document_pairs_candidates]
        selected_pred = y_pred[:, document_pairs_candidates]
        true_diffs = pairs_true[:, :, 0] - pairs_true[:, :, 1]
        pred_diffs = selected_pred[:, :, 0] - selected_pred[:, :, 1]
        the_mask = (true_diffs > 0) & (~torch.isinf(true_diffs))
        pred_diffs = pred_diffs[the_mask]
        weight = None
        if weight_by_diff:
            abs_diff = torch.abs(true_diffs)
            weight = abs_diff[the_mask]
        elif weight_by_diff_powed:
            true_pow_diffs = torch.pow(pairs_true[:, :, 0], 2) - torch.pow(pairs_true[:, :, 1], 2)
            abs_diff = torch.abs(true_pow_diffs)
            weight = abs_diff[the_mask]
        true_diffs = (true_diffs > 0).type(torch.float32)
        true_diffs = true_diffs[the_mask]
        return nn.BCEWithLogitsLoss(weight=weight)(pred_diffs, true_diffs)

    def listNet(y_pred, y_true, eps=DEFAULT_EPS):
        y_pred = y_pred.clone()
        y_true = y_true.clone()
        mask = y_true == PADDED_Y_VALUE
        y_pred[mask] = float("-inf")
        y_true[mask] = float("-inf")
        preds_smax = F.softmax(y_pred, dim=1)
        true_smax = F.softmax(y_true, dim=1)
        preds_smax = preds_smax + eps
        preds_log = torch.log(preds_smax)
        return torch.mean(-torch.sum(true_smax * preds_log, dim=1))

    def ndcgLoss2_scheme(G, D, *args):
        pos_idxs = torch.arange(1, G.shape[1] + 1, device=G.device)
        delta_idxs = torch.abs(pos_idxs[:, None] - pos_idxs[None, :])
        deltas = torch.abs(torch.pow(torch.abs(D[0, delta_idxs - 1]), -1.)
                           - torch.pow(torch.abs(D[0, delta_idxs]), -1.))
        deltas.diagonal().zero_()
        return deltas[None, :, :] * torch.abs(G[:, :, None] - G[:, None, :])

    def lambdaLoss(y_pred, y_true, eps=DEFAULT_EPS, k=None, sigma=1., reduction="sum"):
        device = y_pred.device
        y_pred = y_pred.clone()
        y_true = y_true.clone()
        padded_mask = y_true == PADDED_Y_VALUE
        y_pred[padded_mask] = float("-inf")
        y_true[padded_mask] = float("-inf")
        y_pred_sorted, indices_pred = y_pred.sort(descending=True, dim=-1)
        y_true_sorted, _ = y_true.sort(descending=True, dim=-1)
        true_sorted_by_preds = torch.gather(y_true, dim=1, index=indices_pred)
        true_diffs = true_sorted_by_preds[:, :, None] - true_sorted_by_preds[:, None, :]
        padded_pairs_mask = torch.isfinite(true_diffs)
        padded_pairs_mask = padded_pairs_mask & (true_diffs > 0)
        ndcg_at_k_mask = torch.zeros((y_pred.shape[1], y_pred.shape[1]), dtype=torch.bool,
                                     device=device)
        ndcg_at_k_mask[:k, :k] = 1
        true_sorted_by_preds.clamp_(min=0.)
        y_true_sorted.clamp_(min=0.)
        pos_idxs = torch.arange(1, y_pred.shape[1] + 1).to(device)
        D = torch.log2(1. + pos_idxs.float())[None, :]
        maxDCGs = torch.sum(((torch.pow(2, y_true_sorted) - 1) / D)[:, :k], dim=-1).clamp(
            min=eps)
        G = (torch.pow(2, true_sorted_by_preds) - 1) / maxDCGs[:, None]
        weights = ndcgLoss2_scheme(G, D)
        scores_diffs = (y_pred_sorted[:, :, None] - y_pred_sorted[:, None, :]).clamp(
            min=-1e8, max=1e8)
        scores_diffs.masked_fill(torch.isnan(scores_diffs), 0.)
        weighted_probas = (torch.sigmoid(sigma * scores_diffs).clamp(min=eps) ** weights).clamp(
            min=eps)
        losses = torch.log2(weighted_probas)
        if reduction == "sum":
            loss = -torch.sum(losses[padded_pairs_mask & ndcg_at_k_mask])
        else:
            loss = -torch.mean(losses[padded_pairs_mask & ndcg_at_k_mask])
        return loss

    def ndcg(y_pred, y_true, ats, padding_indicator=PADDED_Y_VALUE):
        y_true = y_true.clone()
        y_pred = y_pred.clone()
        idcg = dcg(y_true, y_true, ats, padding_indicator)
        ndcg_ = dcg(y_pred, y_true, ats, padding_indicator) / idcg
        idcg_mask = idcg == 0
        ndcg_[idcg_mask] = 0.
        return ndcg_

    def dcg(y_pred, y_true, ats, padding_indicator):
        y_true = y_true.clone()
        y_pred = y_pred.clone()
        actual_length = y_true.shape[1]
        ats = [min(at, actual_length) for at in ats]
        padding_mask = y_true == padding_indicator
        y_pred[padding_mask] = float("-inf")
        y_true[padding_mask] = 0.0
        _, indices = y_pred.sort(descending=True, dim=-1)
        true_sorted_by_preds = torch.gather(y_true, dim=1, index=indices)
        discounts = (torch.tensor(1) / torch.log2(torch.arange(
            true_sorted_by_preds.shape[1], dtype=torch.float) + 2.0))
        gains = torch.pow(2, true_sorted_by_preds) - 1
        discounted_gains = (gains * discounts)[:, :max(ats)]
        cum_dcg = torch.cumsum(discounted_gains, dim=1)
        ats_tensor = torch.tensor(ats, dtype=torch.long) - torch.tensor(1)
        return cum_dcg[:, ats_tensor]

    scorer = nn.Sequential(nn.Linear(f, 6), nn.Tanh(), nn.Linear(6, 1))
    fill_(torch, scorer, rng, 0.5)
    opt = torch.optim.Adam(scorer.parameters(), lr=0.02)
    res = {"losses": [], "ndcg": []}
    for step in range(3):
        x = normal(torch, rng, B, L, f)
        y = torch.tensor(rng.integers(0, 4, (B, L)).astype(np.float32))
        y[0, -2:] = PADDED_Y_VALUE
        y[2, -1] = PADDED_Y_VALUE
        y_pred = scorer(x).squeeze(-1)
        parts = [rankNet(y_pred, y), rankNet(y_pred, y, weight_by_diff=True),
                 rankNet(y_pred, y, weight_by_diff_powed=True), listNet(y_pred, y),
                 lambdaLoss(y_pred, y, k=3), lambdaLoss(y_pred, y, reduction="mean")]
        loss = sum(parts)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append([p.item() for p in parts])
        res["ndcg"].append(ndcg(y_pred.detach(), y, ats=[1, 3, 10]))
    res["grads"] = [p.grad for p in scorer.parameters()]

    # LambdaRank by hand: the lambdas are the gradient passed to y_pred.backward
    sigma, N = 1.0, 1.0
    X = normal(torch, rng, 7, f)
    Y = rng.integers(0, 4, 7).astype(np.float32)
    Y[3] = 0.0
    net = nn.Sequential(nn.Linear(f, 5), nn.ReLU(), nn.Linear(5, 1))
    fill_(torch, net, rng, 0.5)
    net.zero_grad()
    y_pred = net(X)
    with torch.no_grad():
        Y_tensor = torch.tensor(Y, dtype=torch.float32).view(-1, 1)
        ideal = torch.sort(Y_tensor.view(-1), descending=True).values
        N = 1.0 / torch.sum((torch.pow(2.0, ideal) - 1) / torch.log2(
            torch.arange(len(Y), dtype=torch.float32) + 2)).item()
        rank_order = torch.argsort(torch.argsort(y_pred.view(-1), descending=True)).view(
            -1, 1).float() + 1
        pos_pairs_score_diff = 1.0 + torch.exp(sigma * (y_pred - y_pred.t()))
        rel_diff = Y_tensor - Y_tensor.t()
        pos_pairs = (rel_diff > 0).type(torch.float32)
        neg_pairs = (rel_diff < 0).type(torch.float32)
        Sij = pos_pairs - neg_pairs
        gain_diff = torch.pow(2.0, Y_tensor) - torch.pow(2.0, Y_tensor.t())
        decay_diff = 1.0 / torch.log2(rank_order + 1.0) - 1.0 / torch.log2(rank_order.t() + 1.0)
        delta_ndcg = torch.abs(N * gain_diff * decay_diff)
        lambda_update = sigma * (0.5 * (1 - Sij) - 1 / pos_pairs_score_diff) * delta_ndcg
        lambda_update = torch.sum(lambda_update, 1, keepdim=True)
        assert lambda_update.shape == y_pred.shape
    y_pred.backward(lambda_update)
    res["lambdas"] = lambda_update
    res["rank_order"] = rank_order.view(-1).long().tolist()
    res["lambda_grads"] = [p.grad for p in net.parameters()]
    return res


def sasrec_program(torch):
    """SASRec as pmixer/SASRec.pytorch writes it: torch.LongTensor of NumPy sequences, an
    in-place ``seqs *= sqrt(d)`` on the embedding output, positions zeroed on padding, a
    causal ~tril bool mask into sequence-first nn.MultiheadAttention, Conv1d(kernel 1)
    feed-forward with ``outputs += inputs``, xavier_normal_ in a try/except over every
    parameter, padding rows zeroed through .data, BCE on logits picked by np.where, an L2 on
    the item embedding by torch.norm, and the argsort().argsort() rank at evaluation."""
    nn = torch.nn
    rng = np.random.default_rng(2610)
    item_num, maxlen, hidden, heads, blocks = 12, 5, 8, 2, 2

    class PointWiseFeedForward(nn.Module):
        def __init__(self, hidden_units, dropout_rate):
            super().__init__()
            self.conv1 = nn.Conv1d(hidden_units, hidden_units, kernel_size=1)
            self.dropout1 = nn.Dropout(p=dropout_rate)
            self.relu = nn.ReLU()
            self.conv2 = nn.Conv1d(hidden_units, hidden_units, kernel_size=1)
            self.dropout2 = nn.Dropout(p=dropout_rate)

        def forward(self, inputs):
            outputs = self.dropout2(self.conv2(self.relu(self.dropout1(self.conv1(
                inputs.transpose(-1, -2))))))
            outputs = outputs.transpose(-1, -2)
            outputs += inputs
            return outputs

    class SASRec(nn.Module):
        def __init__(self, norm_first):
            super().__init__()
            self.norm_first = norm_first
            self.item_emb = nn.Embedding(item_num + 1, hidden, padding_idx=0)
            self.pos_emb = nn.Embedding(maxlen + 1, hidden, padding_idx=0)
            self.emb_dropout = nn.Dropout(p=0.0)
            self.attention_layernorms = nn.ModuleList()
            self.attention_layers = nn.ModuleList()
            self.forward_layernorms = nn.ModuleList()
            self.forward_layers = nn.ModuleList()
            self.last_layernorm = nn.LayerNorm(hidden, eps=1e-8)
            for _ in range(blocks):
                self.attention_layernorms.append(nn.LayerNorm(hidden, eps=1e-8))
                self.attention_layers.append(nn.MultiheadAttention(hidden, heads, 0.0))
                self.forward_layernorms.append(nn.LayerNorm(hidden, eps=1e-8))
                self.forward_layers.append(PointWiseFeedForward(hidden, 0.0))

        def log2feats(self, log_seqs):
            seqs = self.item_emb(torch.LongTensor(log_seqs))
            seqs *= self.item_emb.embedding_dim ** 0.5
            poss = np.tile(np.arange(1, log_seqs.shape[1] + 1), [log_seqs.shape[0], 1])
            poss *= (log_seqs != 0)
            seqs += self.pos_emb(torch.LongTensor(poss))
            seqs = self.emb_dropout(seqs)
            tl = seqs.shape[1]
            attention_mask = ~torch.tril(torch.ones((tl, tl), dtype=torch.bool))
            for i in range(len(self.attention_layers)):
                seqs = torch.transpose(seqs, 0, 1)
                if self.norm_first:
                    x = self.attention_layernorms[i](seqs)
                    mha_outputs, _ = self.attention_layers[i](x, x, x, attn_mask=attention_mask)
                    seqs = seqs + mha_outputs
                    seqs = torch.transpose(seqs, 0, 1)
                    seqs = seqs + self.forward_layers[i](self.forward_layernorms[i](seqs))
                else:
                    Q = self.attention_layernorms[i](seqs)
                    mha_outputs, _ = self.attention_layers[i](Q, seqs, seqs,
                                                              attn_mask=attention_mask)
                    seqs = Q + mha_outputs
                    seqs = torch.transpose(seqs, 0, 1)
                    seqs = self.forward_layernorms[i](seqs)
                    seqs = self.forward_layers[i](seqs)
            return self.last_layernorm(seqs)

        def forward(self, user_ids, log_seqs, pos_seqs, neg_seqs):
            log_feats = self.log2feats(log_seqs)
            pos_embs = self.item_emb(torch.LongTensor(pos_seqs))
            neg_embs = self.item_emb(torch.LongTensor(neg_seqs))
            pos_logits = (log_feats * pos_embs).sum(dim=-1)
            neg_logits = (log_feats * neg_embs).sum(dim=-1)
            return pos_logits, neg_logits

        def predict(self, user_ids, log_seqs, item_indices):
            log_feats = self.log2feats(log_seqs)
            final_feat = log_feats[:, -1, :]
            item_embs = self.item_emb(torch.LongTensor(item_indices))
            return item_embs.matmul(final_feat.unsqueeze(-1)).squeeze(-1)

    res = {}
    for norm_first in (False, True):
        model = SASRec(norm_first)
        errors = set()
        for name, param in model.named_parameters():
            try:
                nn.init.xavier_normal_(param.data)
            except ValueError as err:
                errors.add(str(err))
        fill_(torch, model, rng, 0.3)
        model.pos_emb.weight.data[0, :] = 0
        model.item_emb.weight.data[0, :] = 0
        res["init_errors"] = sorted(errors)
        bce_criterion = nn.BCEWithLogitsLoss()
        adam_optimizer = torch.optim.Adam(model.parameters(), lr=0.01, betas=(0.9, 0.98))
        model.train()
        losses = []
        for step in range(3):
            seq = rng.integers(1, item_num + 1, (3, maxlen))
            seq[0, :2] = 0
            seq[1, :1] = 0
            pos = np.concatenate([seq[:, 1:], rng.integers(1, item_num + 1, (3, 1))], axis=1)
            pos[seq == 0] = 0
            neg = rng.integers(1, item_num + 1, (3, maxlen))
            u = np.arange(3)
            pos_logits, neg_logits = model(u, seq, pos, neg)
            pos_labels = torch.ones(pos_logits.shape)
            neg_labels = torch.zeros(neg_logits.shape)
            adam_optimizer.zero_grad()
            indices = np.where(pos != 0)
            loss = bce_criterion(pos_logits[indices], pos_labels[indices])
            loss += bce_criterion(neg_logits[indices], neg_labels[indices])
            for param in model.item_emb.parameters():
                loss += 0.001 * torch.norm(param)
            loss.backward()
            adam_optimizer.step()
            losses.append(loss.item())
        key = "pre" if norm_first else "post"
        res[key + "_losses"] = losses
        res[key + "_pad_row"] = model.item_emb.weight[0]
        model.eval()
        with torch.no_grad():
            item_idx = [3] + list(rng.permutation(np.arange(1, item_num + 1))[:6])
            predictions = -model.predict(*[np.array(x) for x in [[0], [seq[2]], item_idx]])
            predictions = predictions[0]
            res[key + "_rank"] = [predictions.argsort().argsort()[0].item()]
            res[key + "_pred"] = predictions
    return res


def gru4rec_program(torch):
    """GRU4Rec as its PyTorch port writes it: session-parallel mini-batches, a one-hot buffer
    made by torch.FloatTensor(B, n) then zero_() and scatter_(1, index, 1) each step, the
    hidden state of ended sessions zeroed by ``hidden[:, mask, :] = 0`` before detach(),
    output sampling by logit[:, target.view(-1)], the BPR, TOP1, BPR-max, TOP1-max and
    sampled cross-entropy losses, Adagrad (eps=1e-6), recall@k and MRR from topk/nonzero,
    and the GRU's warning about dropout with a single layer."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2614)
    n_items, hidden_size, B = 9, 6, 4

    class GRU4REC(nn.Module):
        def __init__(self, embedding_dim=-1, num_layers=2, final_act="tanh"):
            super().__init__()
            self.hidden_size, self.num_layers = hidden_size, num_layers
            self.embedding_dim, self.batch_size = embedding_dim, B
            self.h2o = nn.Linear(hidden_size, n_items)
            self.final_activation = nn.Tanh() if final_act == "tanh" else nn.ELU(alpha=0.5)
            if embedding_dim != -1:
                self.look_up = nn.Embedding(n_items, embedding_dim)
                self.gru = nn.GRU(embedding_dim, hidden_size, num_layers, dropout=0.0)
            else:
                self.onehot_buffer = torch.FloatTensor(self.batch_size, n_items)
                self.gru = nn.GRU(n_items, hidden_size, num_layers, dropout=0.0)

        def onehot_encode(self, input):
            self.onehot_buffer.zero_()
            index = input.view(-1, 1)
            return self.onehot_buffer.scatter_(1, index, 1)

        def forward(self, input, hidden):
            if self.embedding_dim == -1:
                embedded = self.onehot_encode(input).unsqueeze(0)
            else:
                embedded = self.look_up(input.unsqueeze(0))
            output, hidden = self.gru(embedded, hidden)
            output = output.view(-1, output.size(-1))
            return self.final_activation(self.h2o(output)), hidden

        def init_hidden(self):
            return torch.zeros(self.num_layers, self.batch_size, self.hidden_size)

    def bpr(logit):
        diff = logit.diag().view(-1, 1).expand_as(logit) - logit
        return -torch.mean(F.logsigmoid(diff))

    def top1(logit):
        diff = -(logit.diag().view(-1, 1).expand_as(logit) - logit)
        return torch.sigmoid(diff).mean() + torch.sigmoid(logit ** 2).mean()

    def bpr_max(logit):
        logit_softmax = F.softmax(logit, dim=1)
        diff = logit.diag().view(-1, 1).expand_as(logit) - logit
        return -torch.log(torch.mean(logit_softmax * torch.sigmoid(diff)))

    def top1_max(logit):
        logit_softmax = F.softmax(logit, dim=1)
        diff = -(logit.diag().view(-1, 1).expand_as(logit) - logit)
        return torch.mean(logit_softmax * (torch.sigmoid(diff) + torch.sigmoid(logit ** 2)))

    def xe(logit):
        return nn.CrossEntropyLoss()(logit, torch.arange(logit.size(0)).long())

    def reset_hidden(hidden, mask):
        if len(mask) != 0:
            hidden[:, mask, :] = 0
        return hidden

    def evaluate(indices, targets):
        targets = targets.view(-1, 1).expand_as(indices)
        hits = (targets == indices).nonzero()
        if len(hits) == 0:
            return 0.0, 0.0
        recall = float(hits.size(0)) / targets.size(0)
        ranks = hits[:, -1] + 1
        rranks = torch.reciprocal(ranks.float())
        return recall, (torch.sum(rranks).data / targets.size(0)).item()

    sessions = [rng.integers(0, n_items, rng.integers(2, 6)) for _ in range(7)]
    res = {}
    for name, loss_func, emb, act in [("bpr", bpr, -1, "tanh"), ("top1", top1, -1, "elu"),
                                      ("bpr_max", bpr_max, 4, "tanh"),
                                      ("top1_max", top1_max, 4, "elu"), ("xe", xe, -1, "tanh")]:
        model = GRU4REC(embedding_dim=emb, final_act=act)
        fill_(torch, model, rng, 0.4)
        optim = torch.optim.Adagrad(model.parameters(), lr=0.05, eps=1e-6)
        hidden = model.init_hidden()
        # session-parallel batches: each lane walks one session, then takes the next
        lanes, pos, nxt = list(range(B)), [0] * B, B
        losses, metrics = [], []
        for step in range(5):
            inp = torch.tensor([int(sessions[s][p]) for s, p in zip(lanes, pos)])
            target = torch.tensor([int(sessions[s][p + 1]) for s, p in zip(lanes, pos)])
            mask = []
            optim.zero_grad()
            logit, hidden_out = model(inp, hidden.detach() if step == 0 else hidden)
            logit_sampled = logit[:, target.view(-1)]
            loss = loss_func(logit_sampled)
            losses.append(loss.item())
            loss.backward()
            optim.step()
            metrics.append(evaluate(torch.topk(logit.detach(), 3, -1)[1], target))
            for lane in range(B):
                pos[lane] += 1
                if pos[lane] + 1 >= len(sessions[lanes[lane]]):
                    lanes[lane], pos[lane] = nxt % len(sessions), 0
                    nxt += 1
                    mask.append(lane)
            hidden = reset_hidden(hidden_out, mask).detach()
        res[name + "_losses"], res[name + "_metrics"] = losses, metrics
        res[name + "_hidden"] = hidden
    res["onehot_dtype"] = [_dtype(model.onehot_buffer)]
    nn.GRU(3, 4, num_layers=1, dropout=0.25)
    return res


PROGRAMS = [learning_to_rank_program, sasrec_program, gru4rec_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
