"""Knowledge-graph embeddings, optimal transport and differentiable sorting written as their
reference repositories (OpenKE, KnowledgeGraphEmbedding, POT/geomloss, the NeuralSort and
Gumbel-Sinkhorn papers' code) write them in torch, run once with `torch` bound to ember and once
to PyTorch from the same NumPy weights and data: TransE with renormalised entity embeddings and
margin ranking loss, DistMult and ComplEx (real/imaginary halves and complex tensors) with
softplus loss and N3 regularisation, RotatE with torch.polar phases and self-adversarial negative
sampling, log-domain Sinkhorn with logsumexp and its divergence, a Wasserstein barycentre, soft
sort/rank, NeuralSort and Gumbel-Sinkhorn with NumPy-given noise."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _triples(rng, n, n_ent, n_rel):
    """(head, relation, tail) int64 columns and corrupted tails."""
    h = rng.integers(0, n_ent, n)
    r = rng.integers(0, n_rel, n)
    t = rng.integers(0, n_ent, n)
    neg = rng.integers(0, n_ent, (n, 4))
    return h, r, t, neg


def transe_program(torch):
    """OpenKE's TransE: nn.Embedding with xavier_uniform_-sized NumPy weights, entities
    renormalised each batch by F.normalize under no_grad (and by Embedding's max_norm on a second
    model), scores -||h + r - t||_p with p 1 and 2 via torch.norm, MarginRankingLoss against
    corrupted tails, SGD; then filtered ranks of the true tail with a scatter_ of -inf on known
    tails, argsort and nonzero; MRR and Hits@k."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2811)
    n_ent, n_rel, d, n = 10, 3, 6, 8
    h, r, t, neg = (torch.from_numpy(a) for a in _triples(rng, n, n_ent, n_rel))
    res = {}
    for p_norm, max_norm in ((1, None), (2, 1.0)):
        ent = nn.Embedding(n_ent, d, max_norm=max_norm)
        rel = nn.Embedding(n_rel, d)
        bound = 6 / math.sqrt(d)
        with torch.no_grad():
            ent.weight.copy_(torch.from_numpy(rng.uniform(-bound, bound, (n_ent, d))
                                              .astype(np.float32)))
            rel.weight.copy_(torch.from_numpy(rng.uniform(-bound, bound, (n_rel, d))
                                              .astype(np.float32)))
            rel.weight.data = F.normalize(rel.weight.data, p=2, dim=1)
        opt = torch.optim.SGD(list(ent.parameters()) + list(rel.parameters()), lr=0.1)
        crit = nn.MarginRankingLoss(margin=1.0)
        losses = []
        for _ in range(3):
            if max_norm is None:
                with torch.no_grad():
                    ent.weight.data = F.normalize(ent.weight.data, p=2, dim=-1)
            opt.zero_grad()
            pos = -torch.norm(ent(h) + rel(r) - ent(t), p=p_norm, dim=-1)
            negs = -torch.norm((ent(h) + rel(r)).unsqueeze(1) - ent(neg), p=p_norm, dim=-1)
            loss = crit(pos.unsqueeze(1).expand_as(negs), negs, torch.ones_like(negs))
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        res[f"loss{p_norm}"] = losses
        res[f"ent{p_norm}"] = ent.weight.detach().clone()
        res[f"grad{p_norm}"] = [ent.weight.grad, rel.weight.grad]
        with torch.no_grad():
            scores = -torch.cdist(ent(h) + rel(r), ent.weight, p=p_norm)   # (n, n_ent)
            known = torch.zeros(n, n_ent, dtype=torch.bool)
            known[torch.arange(n), t] = True
            known.scatter_(1, neg[:, :1], True)
            target = scores.gather(1, t.view(-1, 1))
            scores = scores.masked_fill(known, float("-inf"))
            scores.scatter_(1, t.view(-1, 1), target)
            ranks = (scores.argsort(dim=1, descending=True, stable=True)
                     == t.view(-1, 1)).nonzero()[:, 1] + 1
            res[f"ranks{p_norm}"] = ranks
            res[f"mrr{p_norm}"] = (1.0 / ranks.float()).mean()
            res[f"hits{p_norm}"] = torch.stack([(ranks <= k).float().mean() for k in (1, 3)])
            res[f"rank_dtype{p_norm}"] = [str(ranks.dtype).rsplit(".", 1)[-1]]
    return res


def distmult_complex_program(torch):
    """DistMult and ComplEx as kbc (facebookresearch) writes them: 1-N scoring against every
    entity with a matmul, CrossEntropyLoss, N3 regularisation (sum of |x|^3 over the real and
    imaginary halves), Adagrad; ComplEx twice, with real/imaginary halves chunked from one
    Embedding and with torch.complex tensors from view_as_complex, their scores compared."""
    nn = torch.nn
    rng = np.random.default_rng(2812)
    n_ent, n_rel, rank, n = 9, 2, 4, 6
    h, r, t, _ = (torch.from_numpy(a) for a in _triples(rng, n, n_ent, n_rel))
    res = {}

    def n3(factors, weight=1e-2):
        return weight * sum(torch.sum(torch.abs(f) ** 3) for f in factors) / factors[0].shape[0]

    ent = nn.Embedding(n_ent, rank, sparse=False)
    rel = nn.Embedding(n_rel, rank)
    with torch.no_grad():
        ent.weight.copy_(normal(torch, rng, n_ent, rank) * 1e-1)
        rel.weight.copy_(normal(torch, rng, n_rel, rank) * 1e-1)
    opt = torch.optim.Adagrad(list(ent.parameters()) + list(rel.parameters()), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        lhs, rl, rhs = ent(h), rel(r), ent(t)
        scores = (lhs * rl) @ ent.weight.t()
        loss = nn.CrossEntropyLoss(reduction="mean")(scores, t) + n3((lhs, rl, rhs))
        loss.backward()
        opt.step()
        res.setdefault("distmult", []).append(loss.detach())
    res["distmult_state"] = opt.state[ent.weight]["sum"]

    ent = nn.Embedding(n_ent, 2 * rank)
    rel = nn.Embedding(n_rel, 2 * rank)
    with torch.no_grad():
        ent.weight.copy_(normal(torch, rng, n_ent, 2 * rank) * 1e-1)
        rel.weight.copy_(normal(torch, rng, n_rel, 2 * rank) * 1e-1)
    opt = torch.optim.Adagrad(list(ent.parameters()) + list(rel.parameters()), lr=0.1,
                              initial_accumulator_value=0.1)
    for _ in range(3):
        opt.zero_grad()
        lhs, rl, rhs = ent(h), rel(r), ent(t)
        lhs = lhs[:, :rank], lhs[:, rank:]
        rl = rl[:, :rank], rl[:, rank:]
        rhs = rhs[:, :rank], rhs[:, rank:]
        to_score = ent.weight
        to_score = to_score[:, :rank], to_score[:, rank:]
        scores = ((lhs[0] * rl[0] - lhs[1] * rl[1]) @ to_score[0].transpose(0, 1)
                  + (lhs[0] * rl[1] + lhs[1] * rl[0]) @ to_score[1].transpose(0, 1))
        factors = (torch.sqrt(lhs[0] ** 2 + lhs[1] ** 2), torch.sqrt(rl[0] ** 2 + rl[1] ** 2),
                   torch.sqrt(rhs[0] ** 2 + rhs[1] ** 2))
        loss = nn.functional.cross_entropy(scores, t) + n3(factors)
        loss.backward()
        opt.step()
        res.setdefault("complex", []).append(loss.detach())
    res["complex_grads"] = [ent.weight.grad, rel.weight.grad]

    # the same scores with complex tensors
    ew = ent.weight.detach().clone().requires_grad_(True)
    rw = rel.weight.detach().clone().requires_grad_(True)
    e_c = torch.complex(ew[:, :rank], ew[:, rank:])
    r_c = torch.view_as_complex(torch.stack([rw[:, :rank], rw[:, rank:]], dim=-1))
    sc = torch.real((e_c[h] * r_c[r]) @ e_c.conj().T)
    loss = torch.nn.functional.cross_entropy(sc, t) + n3((e_c[h].abs(), r_c[r].abs(),
                                                          e_c[t].abs()))
    loss.backward()
    res["complex_tensor"] = [sc, loss]
    res["complex_tensor_grads"] = [ew.grad, rw.grad]
    res["complex_dtype"] = [str(d).rsplit(".", 1)[-1]
                            for d in (e_c.dtype, sc.dtype, e_c.abs().dtype)]
    res["dot"] = torch.view_as_real(torch.vdot(e_c[0], r_c[1]))
    return res


def rotate_program(torch):
    """RotatE (Sun et al.) as KnowledgeGraphEmbedding writes it: entity embeddings split into
    real and imaginary halves by torch.chunk, relation phases scaled by pi / embedding_range,
    cos/sin (and the same by torch.polar and complex multiplication), the distance as the norm
    over the stacked real/imaginary parts, gamma minus the summed distance, self-adversarial
    negative sampling weights softmax(alpha * score).detach(), logsigmoid losses, Adam and the
    uniform_ initialisation range gamma + epsilon over hidden_dim, L3 regularisation."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2813)
    n_ent, n_rel, hidden, n = 8, 3, 4, 5
    gamma, epsilon, alpha = 6.0, 2.0, 1.0
    h, r, t, neg = (torch.from_numpy(a) for a in _triples(rng, n, n_ent, n_rel))

    class KGEModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.gamma = nn.Parameter(torch.Tensor([gamma]), requires_grad=False)
            self.embedding_range = nn.Parameter(
                torch.Tensor([(self.gamma.item() + epsilon) / hidden]), requires_grad=False)
            self.entity_embedding = nn.Parameter(torch.zeros(n_ent, hidden * 2))
            self.relation_embedding = nn.Parameter(torch.zeros(n_rel, hidden))
            b = self.embedding_range.item()
            with torch.no_grad():
                self.entity_embedding.copy_(torch.from_numpy(
                    rng.uniform(-b, b, (n_ent, hidden * 2)).astype(np.float32)))
                self.relation_embedding.copy_(torch.from_numpy(
                    rng.uniform(-b, b, (n_rel, hidden)).astype(np.float32)))

        def forward(self, sample, mode):
            head_part, tail_part = sample
            head = torch.index_select(self.entity_embedding, 0, head_part[:, 0]).unsqueeze(1)
            relation = torch.index_select(self.relation_embedding, 0,
                                          head_part[:, 1]).unsqueeze(1)
            if mode == "single":
                tail = torch.index_select(self.entity_embedding, 0, head_part[:, 2]).unsqueeze(1)
            else:
                b, k = tail_part.size(0), tail_part.size(1)
                tail = torch.index_select(self.entity_embedding, 0,
                                          tail_part.view(-1)).view(b, k, -1)
            pi = 3.14159265358979323846
            re_head, im_head = torch.chunk(head, 2, dim=2)
            re_tail, im_tail = torch.chunk(tail, 2, dim=2)
            phase_relation = relation / (self.embedding_range.item() / pi)
            re_relation, im_relation = torch.cos(phase_relation), torch.sin(phase_relation)
            re_score = re_head * re_relation - im_head * im_relation
            im_score = re_head * im_relation + im_head * re_relation
            re_score = re_score - re_tail
            im_score = im_score - im_tail
            score = torch.stack([re_score, im_score], dim=0)
            score = score.norm(dim=0)
            return self.gamma.item() - score.sum(dim=2)

    model = KGEModel()
    opt = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()), lr=0.01)
    positive = torch.stack([h, r, t], dim=1)
    res = {"loss": []}
    for _ in range(3):
        model.train()
        opt.zero_grad()
        negative_score = model((positive, neg), mode="tail-batch")
        negative_score = (F.softmax(negative_score * alpha, dim=1).detach()
                          * F.logsigmoid(-negative_score)).sum(dim=1)
        positive_score = F.logsigmoid(model((positive, None), "single")).squeeze(dim=1)
        weight = torch.from_numpy(rng.uniform(0.2, 1, n).astype(np.float32))  # subsampling
        positive_sample_loss = -(weight * positive_score).sum() / weight.sum()
        negative_sample_loss = -(weight * negative_score).sum() / weight.sum()
        loss = (positive_sample_loss + negative_sample_loss) / 2
        regularization = 1e-3 * (model.entity_embedding.norm(p=3) ** 3
                                 + model.relation_embedding.norm(p=3).norm(p=3) ** 3)
        loss = loss + regularization
        loss.backward()
        opt.step()
        res["loss"].append(loss.detach())
    res["grads"] = [model.entity_embedding.grad, model.relation_embedding.grad,
                    torch.tensor(model.gamma.grad is None)]
    res["params"] = [p.detach().clone() for p in model.parameters()]
    res["names"] = [n for n, _ in model.named_parameters()]
    # the same rotation with complex tensors
    with torch.no_grad():
        ee = model.entity_embedding
        e_c = torch.complex(*torch.chunk(ee, 2, dim=1))
        phase = model.relation_embedding / (model.embedding_range / math.pi)
        r_c = torch.polar(torch.ones_like(phase), phase)
        dist = (e_c[h] * r_c[r] - e_c[t]).abs().sum(-1)
        res["polar_score"] = gamma - dist
        res["single"] = model((positive, None), "single").squeeze(1)
        res["angle"] = torch.angle(r_c)
        res["polar_dtype"] = [str(r_c.dtype).rsplit(".", 1)[-1]]
    return res


def sinkhorn_program(torch):
    """Entropic OT as POT's sinkhorn_log and geomloss write it: a squared-Euclidean cost by
    cdist ** 2, log-domain Sinkhorn iterations with logsumexp, the plan from the potentials,
    the transport cost, the debiased Sinkhorn divergence whose gradient in the support points is
    taken by autograd and used for a few steps of gradient flow, and a fixed-support Wasserstein
    barycentre by iterated Bregman projections with float64 histograms."""
    rng = np.random.default_rng(2814)
    n, m = 6, 5
    x = torch.from_numpy(rng.standard_normal((n, 2)).astype(np.float32)).requires_grad_()
    y = torch.from_numpy(rng.standard_normal((m, 2)).astype(np.float32) + 1)
    a, b = torch.full((n,), 1.0 / n), torch.full((m,), 1.0 / m)
    eps = 0.1

    def sinkhorn_log(a, b, M, reg, n_iter=30):
        f, g = torch.zeros_like(a), torch.zeros_like(b)
        log_a, log_b = a.log(), b.log()
        for _ in range(n_iter):
            f = -reg * torch.logsumexp((g[None, :] - M) / reg + log_b[None, :], dim=1)
            g = -reg * torch.logsumexp((f[:, None] - M) / reg + log_a[:, None], dim=0)
        P = torch.exp((f[:, None] + g[None, :] - M) / reg + log_a[:, None] + log_b[None, :])
        return f, g, P

    def ot_eps(xa, xb, wa, wb):
        M = torch.cdist(xa, xb) ** 2
        f, g, P = sinkhorn_log(wa, wb, M, eps)
        return (f * wa).sum() + (g * wb).sum(), P

    res = {"div": []}
    xt = x
    for _ in range(3):
        div = (ot_eps(xt, y, a, b)[0] - 0.5 * ot_eps(xt, xt, a, a)[0]
               - 0.5 * ot_eps(y, y, b, b)[0])
        g, = torch.autograd.grad(div, [xt])
        xt = (xt - 0.5 * g / a[:, None]).detach().requires_grad_()
        res["div"].append(div.detach())
        res.setdefault("grad", []).append(g)
    _, P = ot_eps(x, y, a, b)
    res["plan"] = P
    res["marginals"] = [P.sum(1), P.sum(0)]
    res["cost"] = (P * torch.cdist(x, y) ** 2).sum()
    res["argmax"] = P.argmax(dim=1)

    # barycentre of two 1-D histograms on a fixed grid
    grid = torch.linspace(0, 1, 20, dtype=torch.float64)
    M = (grid[:, None] - grid[None, :]) ** 2
    K = torch.exp(-M / 0.05)
    A = torch.stack([torch.exp(-((grid - 0.2) ** 2) / 0.005), torch.exp(-((grid - 0.8) ** 2)
                                                                       / 0.01)], dim=1)
    A = A / A.sum(0, keepdim=True)
    weights = torch.tensor([0.3, 0.7], dtype=torch.float64)
    UKv = torch.mm(K, torch.div(A.T, torch.sum(K, 0)).T)
    u = (torch.exp(torch.sum(weights * torch.log(UKv), dim=1)) / UKv.T).T
    for _ in range(50):
        UKv = u * torch.mm(K.T, torch.div(A, torch.mm(K, u)))
        u = (u.T * torch.exp(torch.sum(weights * torch.log(UKv), dim=1))).T / UKv
    bary = torch.exp(torch.sum(weights * torch.log(UKv), dim=1))
    res["bary"] = bary
    res["bary_dtype"] = [str(bary.dtype).rsplit(".", 1)[-1]]
    return res


def soft_sort_program(torch):
    """Differentiable sorting: NeuralSort's relaxed permutation matrix (|A| 1 scaling, the
    (n + 1 - 2i) weights, softmax over temperature) with the straight-through hard version by
    argmax and scatter_, Gumbel-Sinkhorn (log-domain row/column normalisation with logsumexp,
    Gumbel noise from NumPy), a soft rank by pairwise sigmoids, and a Spearman loss through
    them; gradients in the scores."""
    F = torch.nn.functional
    rng = np.random.default_rng(2815)
    B, n, tau = 2, 5, 0.5
    scores = normal(torch, rng, B, n).requires_grad_()
    target = normal(torch, rng, B, n)

    def neural_sort(s, tau, hard=False):
        s = s.unsqueeze(-1)
        dim = s.size(1)
        one = torch.ones((dim, 1), dtype=s.dtype)
        A_s = torch.abs(s - s.permute(0, 2, 1))
        Bm = torch.matmul(A_s, torch.matmul(one, torch.transpose(one, 0, 1)))
        scaling = (dim + 1 - 2 * (torch.arange(dim) + 1)).type(s.dtype)
        C = torch.matmul(s, scaling.unsqueeze(0))
        P_max = (C - Bm).permute(0, 2, 1)
        P_hat = F.softmax(P_max / tau, dim=-1)
        if hard:
            P = torch.zeros_like(P_hat)
            b_idx = torch.arange(s.size(0)).repeat([1, dim]).view(dim, s.size(0))
            b_idx = b_idx.transpose(dim0=1, dim1=0).flatten().type(torch.long)
            r_idx = torch.arange(dim).repeat([s.size(0), 1]).flatten().type(torch.long)
            c_idx = torch.argmax(P_hat, dim=-1).flatten()
            brc_idx = torch.stack((b_idx, r_idx, c_idx))
            P[brc_idx[0], brc_idx[1], brc_idx[2]] = 1
            P_hat = (P - P_hat).detach() + P_hat
        return P_hat

    res = {}
    P = neural_sort(scores, tau)
    P_hard = neural_sort(scores, tau, hard=True)
    sorted_soft = (P @ scores.unsqueeze(-1)).squeeze(-1)
    loss = F.mse_loss(sorted_soft, torch.sort(target, descending=True).values)
    loss = loss + (P_hard @ target.unsqueeze(-1)).squeeze(-1).sum() * 0.1
    g, = torch.autograd.grad(loss, scores)
    res.update(P=P, P_hard=P_hard, sort_loss=loss, sort_grad=g)

    def gumbel_sinkhorn(log_alpha, tau, noise, n_iters=20):
        log_alpha = (log_alpha + noise) / tau
        for _ in range(n_iters):
            log_alpha = log_alpha - torch.logsumexp(log_alpha, dim=-1, keepdim=True)
            log_alpha = log_alpha - torch.logsumexp(log_alpha, dim=-2, keepdim=True)
        return log_alpha.exp()

    log_alpha = normal(torch, rng, B, n, n).requires_grad_()
    u = torch.from_numpy(rng.uniform(1e-6, 1, (B, n, n)).astype(np.float32))
    gumbel = -torch.log(-torch.log(u + 1e-20) + 1e-20)
    S = gumbel_sinkhorn(log_alpha, 1.0, gumbel)
    perm_loss = (S * torch.eye(n)).sum()
    perm_loss.backward()
    res.update(S=S, S_rows=S.sum(-1), S_grad=log_alpha.grad)

    def soft_rank(x, reg=0.3):
        diff = (x.unsqueeze(-1) - x.unsqueeze(-2)) / reg
        return torch.sigmoid(diff).sum(-1) + 0.5

    def spearman(pred, t):
        pr, tr = soft_rank(pred), soft_rank(t)
        pr = pr - pr.mean(-1, keepdim=True)
        tr = tr - tr.mean(-1, keepdim=True)
        return (F.normalize(pr, dim=-1) * F.normalize(tr, dim=-1)).sum(-1).mean()

    sp = spearman(scores, target)
    sp_g, = torch.autograd.grad(-sp, scores)
    res.update(spearman=sp, spearman_grad=sp_g,
               hard_rank=scores.argsort(-1).argsort(-1),
               rank_cmp=torch.stack([soft_rank(scores).round(), (scores.argsort(-1).argsort(-1)
                                                                 + 1).float()]))
    return res


def sparse_kge_program(torch):
    """Large-table KGE training as PyTorch-BigGraph and kbc run it: nn.Embedding(sparse=True)
    tables stepped by SparseAdam (relations dense, by Adam), sparse gradients coalesced and
    densified, a ComplEx variant whose entity table is one complex Parameter indexed directly
    (its gradient conjugate-Wirtinger, stepped by Adam on complex state), clip_grad_norm_ over
    the dense ones, and a StepLR schedule."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2816)
    n_ent, n_rel, d, n = 12, 3, 4, 6
    h, r, t, neg = (torch.from_numpy(a) for a in _triples(rng, n, n_ent, n_rel))
    ent = nn.Embedding(n_ent, d, sparse=True)
    rel = nn.Embedding(n_rel, d)
    with torch.no_grad():
        ent.weight.copy_(normal(torch, rng, n_ent, d) * 0.3)
        rel.weight.copy_(normal(torch, rng, n_rel, d) * 0.3)
    sparse_opt = torch.optim.SparseAdam(ent.parameters(), lr=0.05)
    dense_opt = torch.optim.Adam(rel.parameters(), lr=0.05)
    sched = torch.optim.lr_scheduler.StepLR(dense_opt, step_size=2, gamma=0.5)
    res = {"loss": []}
    for _ in range(3):
        sparse_opt.zero_grad()
        dense_opt.zero_grad()
        pos = (ent(h) * rel(r) * ent(t)).sum(-1)
        negs = (ent(h)[:, None] * rel(r)[:, None] * ent(neg)).sum(-1)
        loss = F.softplus(-pos).mean() + F.softplus(negs).mean()
        loss.backward()
        res.setdefault("norm", []).append(nn.utils.clip_grad_norm_(rel.parameters(), 0.5))
        sparse_opt.step()
        dense_opt.step()
        sched.step()
        res["loss"].append(loss.detach())
    g = ent.weight.grad
    res["sparse"] = [g.is_sparse, g.is_coalesced()]
    res["grad"] = g.coalesce().to_dense()
    res["grad_rows"] = g.coalesce().indices()
    res["ent"] = ent.weight.detach().clone()
    res["state"] = sparse_opt.state[ent.weight]["exp_avg"]
    res["step"] = [sparse_opt.state[ent.weight]["step"]]
    res["lr"] = [torch.tensor(dense_opt.param_groups[0]["lr"])]

    e_c = nn.Parameter(torch.complex(normal(torch, rng, n_ent, d), normal(torch, rng, n_ent, d))
                       * 0.3)
    r_c = nn.Parameter(torch.complex(normal(torch, rng, n_rel, d), normal(torch, rng, n_rel, d))
                       * 0.3)
    opt = torch.optim.Adam([e_c, r_c], lr=0.05)
    for _ in range(3):
        opt.zero_grad()
        score = torch.real((e_c[h] * r_c[r])[:, None] * e_c.conj()[None]).sum(-1)
        loss = F.cross_entropy(score, t) + 1e-2 * (e_c[h].abs() ** 3).sum()
        loss.backward()
        opt.step()
        res.setdefault("complex_loss", []).append(loss.detach())
    res["complex"] = [torch.view_as_real(e_c.detach()), torch.view_as_real(r_c.grad),
                      torch.view_as_real(opt.state[e_c]["exp_avg"]),
                      torch.view_as_real(opt.state[e_c]["exp_avg_sq"])]
    res["complex_dtypes"] = [str(x.dtype).rsplit(".", 1)[-1]
                             for x in (e_c.grad, opt.state[e_c]["exp_avg_sq"])]
    return res


PROGRAMS = [transe_program, distmult_complex_program, rotate_program, sinkhorn_program,
            soft_sort_program, sparse_kge_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
