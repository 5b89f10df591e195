"""Survival and prediction-set programs of round 26 (see test_parity_programs_round26_recsys.py):
DeepSurv's and pycox's Cox partial likelihoods (risk-set masks, logcumsumexp, Breslow ties),
DeepHit's and the logistic-hazard discrete-time losses, the concordance index by
broadcasting; split conformal prediction (LAC, APS, RAPS, CQR with torch.quantile
interpolation="higher"), and active-learning acquisition (entropy, margin, BALD with fixed
NumPy masks, a greedy core-set)."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def survival_program(torch):
    """DeepSurv and pycox: the DeepSurv repo's risk-set mask loss (mask[(y.T - y) > 0] = 0,
    an L2 Regularization over 'weight' parameters by torch.norm, a 1/(1+epoch*decay) LR set on
    param_groups), pycox's cox_ph_loss (descending sort, max-shifted exp().cumsum().log()),
    Breslow ties through logcumsumexp and unique_consecutive counts, DeepHit's nll_pmf and
    rank loss (pad_col, gather, scatter of ones, a pair rank matrix), the logistic-hazard
    loss, survival curves by cumprod, bucketized durations, and the concordance index by
    broadcasting."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2607)
    n, f = 10, 4

    class Regularization(object):
        def __init__(self, order, weight_decay):
            self.order, self.weight_decay = order, weight_decay

        def __call__(self, model):
            reg_loss = 0
            for name, w in model.named_parameters():
                if "weight" in name:
                    reg_loss = reg_loss + torch.norm(w, p=self.order)
            return self.weight_decay * reg_loss

    class NegativeLogLikelihood(nn.Module):
        def __init__(self):
            super().__init__()
            self.reg = Regularization(order=2, weight_decay=1e-3)

        def forward(self, risk_pred, y, e, model):
            mask = torch.ones(y.shape[0], y.shape[0])
            mask[(y.T - y) > 0] = 0
            log_loss = torch.exp(risk_pred) * mask
            log_loss = torch.sum(log_loss, dim=0) / torch.sum(mask, dim=0)
            log_loss = torch.log(log_loss).reshape(-1, 1)
            neg_log_loss = -torch.sum((risk_pred - log_loss) * e) / torch.sum(e)
            return neg_log_loss + self.reg(model)

    def cox_ph_loss_sorted(log_h, events, eps=1e-7):
        if events.dtype is torch.bool:
            events = events.float()
        events = events.view(-1)
        log_h = log_h.view(-1)
        gamma = log_h.max()
        log_cumsum_h = log_h.sub(gamma).exp().cumsum(0).add(eps).log().add(gamma)
        return - log_h.sub(log_cumsum_h).mul(events).sum().div(events.sum())

    def cox_ph_loss(log_h, durations, events, eps=1e-7):
        idx = durations.sort(descending=True)[1]
        events = events[idx]
        log_h = log_h[idx]
        return cox_ph_loss_sorted(log_h, events, eps)

    def breslow_loss(log_h, durations, events):
        order = torch.argsort(durations, descending=True, stable=True)
        t, e, h = durations[order], events[order], log_h.view(-1)[order]
        lse = torch.logcumsumexp(h, dim=0)
        _, counts = torch.unique_consecutive(t, return_counts=True)
        last = torch.cumsum(counts, 0) - 1
        lse_tied = torch.repeat_interleave(lse[last], counts)
        return -((h - lse_tied) * e).sum() / e.sum()

    def pad_col(input, val=0, where="end"):
        if len(input.shape) != 2:
            raise ValueError("Only works for `phi` tensor that is 2-D.")
        pad = torch.zeros_like(input[:, :1])
        if val != 0:
            pad = pad + val
        if where == "end":
            return torch.cat([input, pad], dim=1)
        return torch.cat([pad, input], dim=1)

    def nll_pmf(phi, idx_durations, events, reduction="mean", epsilon=1e-7):
        if phi.shape[1] <= idx_durations.max():
            raise ValueError("Network output `phi` is too small for `idx_durations`.")
        if events.dtype is torch.bool:
            events = events.float()
        events = events.view(-1)
        idx_durations = idx_durations.view(-1, 1)
        phi = pad_col(phi)
        gamma = phi.max(1)[0]
        cumsum = phi.sub(gamma.view(-1, 1)).exp().cumsum(1)
        sum_ = cumsum[:, -1]
        part1 = phi.gather(1, idx_durations).view(-1).sub(gamma).mul(events)
        part2 = - sum_.relu().add(epsilon).log()
        part3 = sum_.sub(cumsum.gather(1, idx_durations).view(-1)).relu().add(
            epsilon).log().mul(1. - events)
        loss = - part1.add(part2).add(part3)
        return loss.mean() if reduction == "mean" else loss

    def rank_loss_deephit_single(phi, idx_durations, events, rank_mat, sigma):
        idx_durations = idx_durations.view(-1, 1)
        pmf = pad_col(phi).softmax(1)
        y = torch.zeros_like(pmf).scatter(1, idx_durations, 1.)
        n = pmf.shape[0]
        ones = torch.ones((n, 1), device=pmf.device)
        r = pmf.cumsum(1).matmul(y.transpose(0, 1))
        diag_r = r.diag().view(1, -1)
        r = (ones.matmul(diag_r) - r).transpose(0, 1)
        loss = rank_mat * torch.exp(-r / sigma)
        return loss.mean(1, keepdim=True).mean()

    def pair_rank_mat(idx_durations, events):
        n = len(idx_durations)
        mat = np.zeros((n, n), dtype=np.float32)
        for i in range(n):
            dur_i, ev_i = idx_durations[i], events[i]
            if ev_i == 0:
                continue
            for j in range(n):
                dur_j, ev_j = idx_durations[j], events[j]
                if (dur_i < dur_j) or ((dur_i == dur_j) and (ev_j == 0)):
                    mat[i, j] = 1
        return mat

    def nll_logistic_hazard(phi, idx_durations, events):
        events = events.view(-1, 1).float()
        idx_durations = idx_durations.view(-1, 1)
        y_bce = torch.zeros_like(phi).scatter(1, idx_durations, events)
        bce = F.binary_cross_entropy_with_logits(phi, y_bce, reduction="none")
        return bce.cumsum(1).gather(1, idx_durations).view(-1).mean()

    def c_index(risk, T, E):
        comparable = (T[:, None] < T[None, :]) & E[:, None].bool()
        concordant = (risk[:, None] > risk[None, :]).float() + 0.5 * (
            risk[:, None] == risk[None, :]).float()
        return (concordant * comparable).sum() / comparable.sum()

    x = normal(torch, rng, n, f)
    durations = torch.tensor(rng.choice([1.0, 2.5, 4.0, 6.0, 9.0], n).astype(np.float32))
    events = torch.tensor(rng.random(n) < 0.7)
    events[0] = True
    res = {}
    deepsurv = nn.Sequential(nn.Linear(f, 6), nn.BatchNorm1d(6), nn.SELU(), nn.Dropout(0.0),
                             nn.Linear(6, 1))
    fill_(torch, deepsurv, rng, 0.4)
    criterion = NegativeLogLikelihood()
    optimizer = torch.optim.Adam(deepsurv.parameters(), lr=0.05)
    lrs, losses = [], []
    for epoch in range(3):
        for param_group in optimizer.param_groups:
            param_group["lr"] = 0.05 / (1 + epoch * 0.1)
        deepsurv.train()
        risk_pred = deepsurv(x)
        y, e = durations.view(-1, 1), events.view(-1, 1).float()
        train_loss = criterion(risk_pred, y, e, deepsurv)
        cox = cox_ph_loss(risk_pred, durations, events)
        breslow = breslow_loss(risk_pred, durations, events.float())
        optimizer.zero_grad()
        (train_loss + cox + breslow).backward()
        optimizer.step()
        losses.append([train_loss.item(), cox.item(), breslow.item()])
        lrs.append(optimizer.param_groups[0]["lr"])
    deepsurv.eval()
    with torch.no_grad():
        risk = deepsurv(x).view(-1)
    res["deepsurv_losses"], res["lrs"] = losses, lrs
    res["c_index"] = [c_index(-risk, durations, events).item(),
                      c_index(risk.clamp(max=risk.median()), durations, events).item()]

    cuts = torch.tensor([0.0, 2.0, 5.0, 8.0])
    idx_durations = torch.bucketize(durations, cuts, right=True) - 1
    res["idx_durations"] = idx_durations.tolist()
    rank_mat = torch.from_numpy(pair_rank_mat(idx_durations.numpy(), events.numpy()))
    deephit = nn.Sequential(nn.Linear(f, 8), nn.ReLU(), nn.Linear(8, len(cuts)))
    hazard_net = nn.Sequential(nn.Linear(f, 8), nn.ReLU(), nn.Linear(8, len(cuts)))
    fill_(torch, deephit, rng, 0.4)
    fill_(torch, hazard_net, rng, 0.4)
    opt = torch.optim.AdamW(list(deephit.parameters()) + list(hazard_net.parameters()), lr=0.02)
    hit = []
    for _ in range(3):
        phi = deephit(x)
        nll = nll_pmf(phi, idx_durations, events)
        rank = rank_loss_deephit_single(phi, idx_durations, events.float(), rank_mat, 0.1)
        lh = nll_logistic_hazard(hazard_net(x), idx_durations, events)
        loss = 0.2 * nll + 0.8 * rank + lh
        opt.zero_grad()
        loss.backward()
        opt.step()
        hit.append([nll.item(), rank.item(), lh.item()])
    res["deephit_losses"] = hit
    res["nll_none"] = nll_pmf(phi, idx_durations, events, reduction="none")
    with torch.no_grad():
        pmf = pad_col(deephit(x)).softmax(1)[:, :-1]
        res["surv_pmf"] = 1 - pmf.cumsum(1)
        hazard = torch.sigmoid(hazard_net(x))
        res["surv_hazard"] = torch.cumprod(1 - hazard, dim=1)
        res["surv_hazard_log"] = torch.log1p(-hazard).cumsum(1).exp()
    try:
        nll_pmf(phi[:, :2], idx_durations, events)
    except ValueError as err:
        res["too_small"] = [str(err)]
    return res


def conformal_program(torch):
    """Split conformal prediction as the conformal repositories write it: the
    ceil((n+1)(1-alpha))/n level into torch.quantile(interpolation="higher"), LAC sets,
    APS and RAPS scores by sort/cumsum/gather with a uniform U drawn in NumPy, the
    randomised set through scatter back to class order, a conformalised quantile regression
    interval with kthvalue, and coverage / set-size metrics."""
    F = torch.nn.functional
    rng = np.random.default_rng(2608)
    n_cal, n_test, K, alpha = 40, 12, 5, 0.1
    cal_logits = normal(torch, rng, n_cal, K) * 2
    cal_labels = torch.tensor(rng.integers(0, K, n_cal))
    test_logits = normal(torch, rng, n_test, K) * 2
    test_labels = torch.tensor(rng.integers(0, K, n_test))
    U_cal = torch.from_numpy(rng.random(n_cal).astype(np.float32))
    U_test = torch.from_numpy(rng.random((n_test, 1)).astype(np.float32))
    res = {}
    cal_smx = F.softmax(cal_logits, dim=1)
    test_smx = torch.nn.Softmax(dim=-1)(test_logits)
    q_level = math.ceil((n_cal + 1) * (1 - alpha)) / n_cal

    # LAC: 1 - softmax of the true class
    cal_scores = 1 - cal_smx[torch.arange(n_cal), cal_labels]
    qhat = torch.quantile(cal_scores, q_level, interpolation="higher")
    lac_sets = test_smx >= (1 - qhat)
    res["qhat"] = [qhat.item()]
    res["quantiles"] = [torch.quantile(cal_scores, q, interpolation=mode).item()
                        for q in (0.5, q_level, 0.05)
                        for mode in ("linear", "lower", "higher", "midpoint", "nearest")]
    res["lac_sets"] = lac_sets.tolist()

    # APS / RAPS (Angelopoulos et al.)
    lam_reg, k_reg = 0.01, 2
    reg_vec = torch.tensor(k_reg * [0.0] + (K - k_reg) * [lam_reg])[None, :]
    cal_pi = cal_smx.argsort(1, descending=True)
    cal_srt = torch.take_along_dim(cal_smx, cal_pi, dim=1)
    cal_srt_reg = cal_srt + reg_vec
    cal_L = torch.where(cal_pi == cal_labels[:, None])[1]
    cal_scores = cal_srt_reg.cumsum(dim=1)[torch.arange(n_cal), cal_L] \
        - U_cal * cal_srt_reg[torch.arange(n_cal), cal_L]
    qhat_raps = torch.quantile(cal_scores, q_level, interpolation="higher")
    n_val = n_test
    val_pi = test_smx.argsort(1, descending=True)
    val_srt = torch.gather(test_smx, 1, val_pi)
    val_srt_reg = val_srt + reg_vec
    indicators = (val_srt_reg.cumsum(dim=1) - U_test * val_srt_reg) <= qhat_raps
    indicators[:, 0] = True     # never return an empty set
    raps_sets = torch.zeros_like(indicators).scatter(1, val_pi, indicators)
    res["qhat_raps"] = [qhat_raps.item()]
    res["raps_sets"] = raps_sets.tolist()
    res["raps_sizes"] = raps_sets.sum(1).tolist()
    cover = raps_sets[torch.arange(n_val), test_labels]
    res["coverage"] = [cover.float().mean().item(), lac_sets.gather(
        1, test_labels[:, None]).float().mean().item()]

    # APS without randomisation through a cumulative mask and argmax of the crossing point
    cums = val_srt.cumsum(1)
    cut = torch.argmax((cums >= qhat_raps).int(), dim=1)
    res["aps_cut"] = cut.tolist()
    keep = torch.arange(K)[None, :] <= cut[:, None]
    aps_sets = torch.empty_like(keep).scatter_(1, val_pi, keep)
    res["aps_sets"] = aps_sets.tolist()

    # conformalised quantile regression on a 1-D problem
    lo, hi = normal(torch, rng, n_cal) - 1.0, normal(torch, rng, n_cal) + 1.0
    y = normal(torch, rng, n_cal) * 1.5
    scores = torch.maximum(lo - y, y - hi)
    k = math.ceil((n_cal + 1) * (1 - alpha))
    res["cqr_kth"] = [torch.kthvalue(scores, k).values.item(),
                      torch.sort(scores).values[k - 1].item()]
    res["cqr_q"] = [torch.quantile(scores, min(1.0, k / n_cal), interpolation="higher").item()]
    try:
        torch.quantile(scores, 1.2)
    except RuntimeError as err:
        res["bad_q"] = [str(err)]
    try:
        torch.quantile(scores, 0.5, interpolation="upper")
    except (RuntimeError, ValueError) as err:
        res["bad_mode"] = [type(err).__name__, str(err)]
    res["nanquantile"] = torch.nanquantile(torch.where(scores > 1, float("nan"), scores),
                                           torch.tensor([0.1, 0.9]), interpolation="midpoint")
    return res


def active_learning_program(torch):
    """Active-learning acquisition: entropy, least confidence and margin (topk(2)) from
    softmax, BALD from several stochastic passes with fixed NumPy dropout masks (mutual
    information as entropy of the mean minus mean entropy, xlogy), BatchBALD-style top-k
    acquisition with index_select, a core-set greedy k-center step with cdist and
    min/argmax, and a retraining step on the grown labelled set."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2609)
    pool, f, K, T = 16, 5, 4, 6

    class MCNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(f, 12), nn.Linear(12, K)

        def forward(self, x, mask=None):
            h = F.relu(self.fc1(x))
            if mask is not None:
                h = h * mask / 0.5
            return self.fc2(h)

    net = MCNet()
    fill_(torch, net, rng, 0.6)
    X_pool = normal(torch, rng, pool, f)
    masks = torch.from_numpy((rng.random((T, 1, 12)) < 0.5).astype(np.float32))
    res = {}
    net.eval()
    with torch.no_grad():
        probs = F.softmax(net(X_pool), dim=1)
        entropy = -(probs * torch.log(probs + 1e-10)).sum(dim=1)
        least_conf = 1 - probs.max(dim=1).values
        top2 = probs.topk(2, dim=1).values
        margin = top2[:, 0] - top2[:, 1]
        res["entropy"], res["least_conf"], res["margin"] = entropy, least_conf, margin
        res["pick_entropy"] = entropy.argsort(descending=True)[:3].tolist()
        res["pick_margin"] = torch.argsort(margin)[:3].tolist()

        mc = torch.stack([F.softmax(net(X_pool, masks[t]), dim=-1) for t in range(T)])
        mean_p = mc.mean(0)
        H = -torch.special.xlogy(mean_p, mean_p).sum(-1)
        E_H = -torch.special.entr(mc).neg().sum(-1).mean(0).neg()
        bald = H - E_H
        res["bald"], res["mc_var"] = bald, mc.var(0, unbiased=False).sum(-1)
        scores, idx = torch.topk(bald, 3)
        res["bald_pick"] = idx.tolist()
        res["var_ratio"] = 1 - mc.argmax(-1).mode(0).values.eq(
            mc.argmax(-1)).float().mean(0)
        picked = torch.index_select(X_pool, 0, idx)

        # core-set: greedy k-center over penultimate features
        feats = F.relu(net.fc1(X_pool))
        labelled = [0, 1]
        dist = torch.cdist(feats, feats[labelled]).min(dim=1).values
        chosen = []
        for _ in range(3):
            nxt = int(torch.argmax(dist))
            chosen.append(nxt)
            dist = torch.minimum(dist, torch.cdist(feats, feats[nxt:nxt + 1]).squeeze(1))
        res["coreset"] = chosen
        res["coreset_dist"] = dist

    y_new = torch.tensor(rng.integers(0, K, 3))
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    net.train()
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = sum(F.nll_loss(F.log_softmax(net(picked, masks[t]), dim=-1), y_new)
                   for t in range(2)) / 2
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res["retrain"] = losses
    return res


PROGRAMS = [survival_program, conformal_program, active_learning_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
