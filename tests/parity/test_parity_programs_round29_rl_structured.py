"""Structured prediction written as its reference code writes it in torch, run once with `torch`
bound to ember and once to PyTorch from the same NumPy weights and data: an HMM trained by
forward-backward in log space (logsumexp recursions, emissions by gather, posteriors from
autograd and from the backward pass, a Baum-Welch M-step) with Viterbi decoding by max/argmax
and backpointer gather, a semi-Markov CRF over variable lengths (cumsum segment scores,
-inf-initialised chart, brute-force check), soft-DTW as a custom autograd.Function whose
backward is written in torch ops, differentiable sorting networks and perturbed top-k, and
pytorch-crf's CRF over a ByteTensor mask."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def hmm_program(torch):
    """A neural-parameterised HMM: log_softmax'd start/transition/emission logits, emissions
    gathered from an expanded table, the masked forward recursion with torch.where over
    variable lengths, the backward recursion, posteriors two ways (autograd of the log-
    likelihood and alpha + beta), an Adam step, a Baum-Welch M-step from the expected counts,
    and Viterbi by ``torch.max(..., dim=1)`` with backpointers followed by gather."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2921)
    S, V, B, T = 3, 5, 4, 6
    lengths = torch.tensor([6, 4, 5, 2])
    x = torch.from_numpy(rng.integers(0, V, (B, T)))
    mask = torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)

    class HMM(nn.Module):
        def __init__(self):
            super().__init__()
            self.unnormalized_state_priors = nn.Parameter(torch.randn(S))
            self.unnormalized_transition_matrix = nn.Parameter(torch.randn(S, S))
            self.unnormalized_emission_matrix = nn.Parameter(torch.randn(S, V))

        def emissions(self, x):
            log_b = F.log_softmax(self.unnormalized_emission_matrix, dim=1)
            return log_b.unsqueeze(0).expand(B, S, V).gather(
                2, x.unsqueeze(1).expand(B, S, T)).transpose(1, 2)

        def forward(self, x):
            log_pi = F.log_softmax(self.unnormalized_state_priors, dim=0)
            log_a = F.log_softmax(self.unnormalized_transition_matrix, dim=1)
            emis = self.emissions(x)
            alpha = log_pi + emis[:, 0]
            alphas = [alpha]
            for t in range(1, T):
                new = torch.logsumexp(alpha.unsqueeze(2) + log_a.unsqueeze(0), dim=1) + emis[:, t]
                alpha = torch.where(mask[:, t].unsqueeze(1), new, alpha)
                alphas.append(alpha)
            return torch.logsumexp(alpha, dim=-1), torch.stack(alphas, 1), log_a, emis

    model = HMM()
    fill_(torch, model, rng, scale=1.0)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    res = {"loglik": []}
    for _ in range(2):
        loglik, alphas, log_a, emis = model(x)
        emis.retain_grad()
        loss = -loglik.mean()
        opt.zero_grad()
        loss.backward()
        res["loglik"].append(loglik)
        res["emis_grad"] = emis.grad
        opt.step()
    with torch.no_grad():
        loglik, alphas, log_a, emis = model(x)
        beta = torch.zeros(B, S)
        betas = [beta]
        for t in range(T - 1, 0, -1):
            new = torch.logsumexp(log_a.unsqueeze(0) + (emis[:, t] + beta).unsqueeze(1), dim=2)
            beta = torch.where(mask[:, t].unsqueeze(1), new, beta)
            betas.append(beta)
        betas = torch.stack(betas[::-1], 1)
        posterior = (alphas + betas - loglik.view(B, 1, 1)).exp() * mask.unsqueeze(-1)
        res["posterior"] = posterior
        res["posterior_sums"] = posterior.sum(-1)
        xi = (alphas[:, :-1].unsqueeze(3) + log_a + (emis[:, 1:] + betas[:, 1:]).unsqueeze(2)
              - loglik.view(B, 1, 1, 1)).exp() * mask[:, 1:].view(B, T - 1, 1, 1)
        counts = xi.sum((0, 1))
        res["new_transitions"] = counts / counts.sum(1, keepdim=True)
        emit_counts = torch.zeros(S, V).index_add_(
            1, x.flatten(), posterior.reshape(B * T, S).T.contiguous())
        res["new_emissions"] = emit_counts / emit_counts.sum(1, keepdim=True)
        res["new_prior"] = posterior[:, 0].mean(0)
    # Viterbi
    with torch.no_grad():
        log_pi = F.log_softmax(model.unnormalized_state_priors, dim=0)
        delta = log_pi + emis[:, 0]
        backpointers = []
        for t in range(1, T):
            max_val, argmax_val = torch.max(delta.unsqueeze(2) + log_a, dim=1)
            new = max_val + emis[:, t]
            delta = torch.where(mask[:, t].unsqueeze(1), new, delta)
            keep = torch.arange(S).expand(B, S)
            backpointers.append(torch.where(mask[:, t].unsqueeze(1), argmax_val, keep))
        best_score, best = delta.max(dim=1)
        path = [best]
        for bp in reversed(backpointers):
            best = torch.gather(bp, 1, best.unsqueeze(1)).squeeze(1)
            path.append(best)
        path = torch.stack(path[::-1], dim=1)
        res["viterbi_score"] = best_score
        res["viterbi_path"] = path
        res["path_dtype"] = [str(path.dtype).rsplit(".", 1)[-1]]
    res["params"] = list(model.parameters())
    return res


def semi_crf_program(torch):
    """A semi-Markov CRF: segment scores from a padded cumsum of per-label emissions plus a
    length embedding, the chart of alphas over end positions and segment lengths up to K
    (a list of -inf-initialised columns, logsumexp over lengths and previous labels), the
    partition read at each sequence's length by advanced indexing, the gold segmentation's
    score, NLL with Adam, and the partition checked against brute-force enumeration."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2922)
    B, T, L, K, D = 2, 5, 2, 3, 4
    lengths = torch.tensor([5, 3])
    feats = normal(torch, rng, B, T, D)
    emit = nn.Linear(D, L)
    length_emb = nn.Embedding(K + 1, L)
    trans = nn.Parameter(torch.zeros(L, L))
    start = nn.Parameter(torch.zeros(L))
    fill_(torch, emit, rng)
    fill_(torch, length_emb, rng)
    fill_(torch, [trans, start], rng)
    params = list(emit.parameters()) + list(length_emb.parameters()) + [trans, start]
    opt = torch.optim.Adam(params, lr=0.05)
    # gold segmentations: (start, end, label)
    gold = [[(0, 2, 0), (2, 3, 1), (3, 5, 0)], [(0, 1, 1), (1, 3, 1)]]

    def partition(scores):
        cum = F.pad(scores.cumsum(1), (0, 0, 1, 0))
        neg_inf = torch.full((B, L), -math.inf)
        alphas = [neg_inf]
        for t in range(1, T + 1):
            cands = []
            for k in range(1, K + 1):
                if t - k < 0:
                    continue
                seg = cum[:, t] - cum[:, t - k] + length_emb.weight[k]
                if t - k == 0:
                    prev = start.expand(B, L)
                else:
                    prev = torch.logsumexp(alphas[t - k].unsqueeze(2) + trans, dim=1)
                cands.append(prev + seg)
            alphas.append(torch.logsumexp(torch.stack(cands, 0), dim=0))
        chart = torch.stack(alphas, 1)
        return torch.logsumexp(chart[torch.arange(B), lengths], dim=-1), chart

    def gold_score(scores):
        cum = F.pad(scores.cumsum(1), (0, 0, 1, 0))
        total = []
        for b, segs in enumerate(gold):
            s = start[segs[0][2]]
            for i, (a, e, y) in enumerate(segs):
                s = s + cum[b, e, y] - cum[b, a, y] + length_emb.weight[e - a, y]
                if i:
                    s = s + trans[segs[i - 1][2], y]
            total.append(s)
        return torch.stack(total)

    res = {"nll": [], "logz": []}
    for _ in range(3):
        scores = emit(feats)
        logz, chart = partition(scores)
        nll = (logz - gold_score(scores)).mean()
        opt.zero_grad()
        nll.backward()
        opt.step()
        res["nll"].append(nll.item())
        res["logz"].append(logz.detach())
    res["chart_inf"] = [bool(v) for v in torch.isinf(chart).flatten()]
    # brute force over segmentations of the first sequence
    with torch.no_grad():
        sc = emit(feats).numpy().astype(np.float64)
        lw, tr, st = (length_emb.weight.numpy().astype(np.float64),
                      trans.numpy().astype(np.float64), start.numpy().astype(np.float64))
        total = []

        def walk(pos, prev, acc, n):
            if pos == n:
                total.append(acc)
                return
            for k in range(1, K + 1):
                if pos + k > n:
                    break
                for y in range(L):
                    s = sc[0, pos:pos + k, y].sum() + lw[k, y]
                    s += st[y] if prev is None else tr[prev, y]
                    walk(pos + k, y, acc + s, n)
        walk(0, None, 0.0, T)
        logz, _ = partition(emit(feats))
        np.testing.assert_allclose(logz[0].item(), np.logaddexp.reduce(total), rtol=1e-5)
    res["params"] = params
    return res


def soft_dtw_program(torch):
    """Maghoumi's soft-DTW as a custom autograd.Function on the CPU path, with the loops in torch
    ops: ``torch.Tensor([gamma])`` saved for backward, the R chart from ``torch.ones(...) *
    math.inf`` written cell by cell, a Sakoe-Chiba bandwidth test against a tensor, the E chart
    of the backward pass (R edited in place after ctx.saved_tensors), the normalised soft-DTW
    divergence as a loss on a small encoder, and gradcheck of the Function in float64."""
    nn = torch.nn
    rng = np.random.default_rng(2923)

    class _SoftDTW(torch.autograd.Function):
        @staticmethod
        def forward(ctx, D, gamma, bandwidth):
            dev, dtype = D.device, D.dtype
            gamma = torch.Tensor([gamma]).to(dev).type(dtype)
            bandwidth = torch.Tensor([bandwidth]).to(dev).type(dtype)
            B, N, M = D.shape
            R = torch.ones((B, N + 2, M + 2), device=dev, dtype=dtype) * math.inf
            R[:, 0, 0] = 0
            for j in range(1, M + 1):
                for i in range(1, N + 1):
                    if 0 < bandwidth < abs(i - j):
                        continue
                    r0 = -R[:, i - 1, j - 1] / gamma
                    r1 = -R[:, i - 1, j] / gamma
                    r2 = -R[:, i, j - 1] / gamma
                    rmax = torch.max(torch.max(r0, r1), r2)
                    rsum = torch.exp(r0 - rmax) + torch.exp(r1 - rmax) + torch.exp(r2 - rmax)
                    softmin = -gamma * (torch.log(rsum) + rmax)
                    R[:, i, j] = D[:, i - 1, j - 1] + softmin
            ctx.save_for_backward(D, R.clone(), gamma, bandwidth)
            return R[:, -2, -2]

        @staticmethod
        def backward(ctx, grad_output):
            D, R, gamma, bandwidth = ctx.saved_tensors
            # edited below: a backward that wrote into the saved R itself would fail
            # gradcheck's second pass over the same graph (pinned in _fixes)
            R = R.clone()
            B, N, M = D.shape
            D_ = torch.zeros((B, N + 2, M + 2), dtype=D.dtype, device=D.device)
            D_[:, 1:N + 1, 1:M + 1] = D
            R[:, :, -1] = -math.inf
            R[:, -1, :] = -math.inf
            R[:, -1, -1] = R[:, -2, -2]
            E = torch.zeros((B, N + 2, M + 2), dtype=D.dtype, device=D.device)
            E[:, -1, -1] = 1
            for j in range(M, 0, -1):
                for i in range(N, 0, -1):
                    if torch.isinf(R[:, i, j]).any():
                        R[:, i, j] = -math.inf
                    if 0 < bandwidth < abs(i - j):
                        continue
                    a = torch.exp((R[:, i + 1, j] - R[:, i, j] - D_[:, i + 1, j]) / gamma)
                    b = torch.exp((R[:, i, j + 1] - R[:, i, j] - D_[:, i, j + 1]) / gamma)
                    c = torch.exp((R[:, i + 1, j + 1] - R[:, i, j] - D_[:, i + 1, j + 1]) / gamma)
                    E[:, i, j] = E[:, i + 1, j] * a + E[:, i, j + 1] * b + E[:, i + 1, j + 1] * c
            return grad_output.view(-1, 1, 1).expand_as(E[:, 1:N + 1, 1:M + 1]) * \
                E[:, 1:N + 1, 1:M + 1], None, None

    def dist(x, y):
        n, m, d = x.size(1), y.size(1), x.size(2)
        x = x.unsqueeze(2).expand(-1, n, m, d)
        y = y.unsqueeze(1).expand(-1, n, m, d)
        return torch.pow(x - y, 2).sum(3)

    def sdtw(x, y, gamma=0.5, bandwidth=None):
        return _SoftDTW.apply(dist(x, y), gamma, bandwidth or 0)

    enc = nn.Sequential(nn.Linear(2, 6), nn.Tanh(), nn.Linear(6, 2))
    fill_(torch, enc, rng)
    opt = torch.optim.SGD(enc.parameters(), lr=0.05)
    x, y = normal(torch, rng, 2, 5, 2), normal(torch, rng, 2, 4, 2)
    res = {"loss": [], "banded": []}
    for _ in range(2):
        z = enc(x)
        loss = (sdtw(z, y) - 0.5 * (sdtw(z, z) + sdtw(y, y))).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["banded"].append(sdtw(z, z, bandwidth=1).detach())
    res["params"] = list(enc.parameters())
    D = torch.from_numpy(rng.random((1, 3, 4))).requires_grad_()
    res["gradcheck"] = [torch.autograd.gradcheck(
        lambda d: _SoftDTW.apply(d, 1.0, 0), (D,), eps=1e-6, atol=1e-5)]
    value = _SoftDTW.apply(D, 1.0, 0)
    res["grad_fn"] = [type(value.grad_fn).__name__]
    (g,) = torch.autograd.grad(value.sum(), D)
    res["D_grad"] = g
    return res


def sorting_network_program(torch):
    """Petersen's differentiable sorting networks: odd-even transposition layers as split and
    combine matrices built by index assignment, the relaxed swap with a logistic and a Cauchy
    sigmoid, the soft permutation matrix carried through the layers by matmuls, BCELoss against
    the one_hot of the true argsort, Adam on a scoring net; then the perturbed top-k Function
    (topk with sorted=False, sort of indices, one_hot, einsum backward from NumPy noise)."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2924)
    n, B, D = 5, 3, 4

    def odd_even_network(n):
        layers = []
        for i in range(n):
            pairs = [(j, j + 1) for j in range(i % 2, n - 1, 2)]
            m = len(pairs)
            split_a, split_b = torch.zeros(m, n), torch.zeros(m, n)
            combine_min, combine_max = torch.zeros(n, m), torch.zeros(n, m)
            for k, (a, b) in enumerate(pairs):
                split_a[k, a] = 1
                split_b[k, b] = 1
                combine_min[a, k] = 1
                combine_max[b, k] = 1
            untouched = torch.ones(n, dtype=torch.bool)
            untouched[[p for pair in pairs for p in pair]] = False
            layers.append((split_a, split_b, combine_min, combine_max, untouched.float()))
        return layers

    def s_best(x, steepness, distribution):
        if distribution == "logistic":
            return torch.sigmoid(x * steepness)
        return torch.atan(x * steepness) / math.pi + 0.5

    def execute_sort(network, vectors, steepness, distribution):
        x = vectors
        X = torch.eye(n, dtype=x.dtype).repeat(x.shape[0], 1, 1)
        for split_a, split_b, combine_min, combine_max, untouched in network:
            a, b = x @ split_a.T, x @ split_b.T
            alpha = s_best(b - a, steepness, distribution)
            aX, bX = X @ split_a.T, X @ split_b.T
            w_min = alpha.unsqueeze(-2) * aX + (1 - alpha).unsqueeze(-2) * bX
            w_max = (1 - alpha).unsqueeze(-2) * aX + alpha.unsqueeze(-2) * bX
            X = (w_max @ combine_max.T.unsqueeze(-3)) + (w_min @ combine_min.T.unsqueeze(-3)) \
                + X * untouched
            x = ((alpha * a + (1 - alpha) * b) @ combine_min.T
                 + ((1 - alpha) * a + alpha * b) @ combine_max.T + x * untouched)
        return x, X

    network = odd_even_network(n)
    # no bias at the end: a shift of all scores leaves the permutation unchanged, its zero
    # gradient is float noise that Adam would scale up to lr
    scorer = nn.Sequential(nn.Linear(D, 8), nn.ReLU(), nn.Linear(8, 1, bias=False))
    fill_(torch, scorer, rng)
    opt = torch.optim.Adam(scorer.parameters(), lr=1e-2)
    res = {"loss": [], "sorted": [], "perm": []}
    for step in range(3):
        items = normal(torch, rng, B, n, D)
        true_scores = normal(torch, rng, B, n)
        perm_gt = F.one_hot(torch.argsort(true_scores, dim=-1), n).transpose(-2, -1).float()
        scores = scorer(items).squeeze(-1)
        dist = "logistic" if step % 2 == 0 else "cauchy"
        sorted_x, perm = execute_sort(network, scores, 5.0, dist)
        loss = nn.BCELoss()(perm.clamp(0, 1), perm_gt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["sorted"].append(sorted_x.detach())
        res["perm"].append(perm.detach())
    res["params"] = list(scorer.parameters())

    class PerturbedTopK(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k, num_samples, sigma, noise):
            perturbed_x = x[:, None, :] + noise * sigma
            indices = torch.topk(perturbed_x, k=k, dim=-1, sorted=False).indices
            indices = torch.sort(indices, dim=-1).values
            perturbed_output = F.one_hot(indices, num_classes=x.shape[1]).float()
            ctx.num_samples, ctx.sigma = num_samples, sigma
            ctx.perturbed_output, ctx.noise = perturbed_output, noise
            return perturbed_output.mean(dim=1)

        @staticmethod
        def backward(ctx, grad_output):
            if grad_output is None:
                return tuple([None] * 5)
            expected_gradient = torch.einsum(
                "bnkd,bnd->bkd", ctx.perturbed_output, ctx.noise) / ctx.num_samples / ctx.sigma
            grad_input = torch.einsum("bkd,bkd->bd", grad_output, expected_gradient)
            return (grad_input,) + tuple([None] * 4)

    logits = normal(torch, rng, 2, 7).requires_grad_()
    noise = normal(torch, rng, 2, 50, 7)
    indicators = PerturbedTopK.apply(logits, 3, 50, 0.05, noise)
    features = normal(torch, rng, 2, 7, 3)
    selected = torch.einsum("bkd,bdc->bkc", indicators, features)
    selected.pow(2).sum().backward()
    res["indicators"] = indicators
    res["topk_grad"] = logits.grad
    res["indicator_shape"] = list(indicators.shape)
    return res


def pytorch_crf_program(torch):
    """kmkurn's pytorch-crf as older taggers use it: a ByteTensor mask (``torch.where`` on a
    uint8 condition, with its deprecation warning), emissions transposed to time-major, the
    gold score by advanced indexing and ``mask.long().sum(dim=0) - 1`` sequence ends, the
    normalizer by broadcast logsumexp, reduction="token_mean", and Viterbi decoding with
    ``torch.max`` histories walked back through ``.item()`` indices; uniform_ init from NumPy."""
    nn = torch.nn
    rng = np.random.default_rng(2925)
    T, B, K = 5, 3, 4

    class CRF(nn.Module):
        def __init__(self, num_tags):
            super().__init__()
            self.num_tags = num_tags
            self.start_transitions = nn.Parameter(torch.empty(num_tags))
            self.end_transitions = nn.Parameter(torch.empty(num_tags))
            self.transitions = nn.Parameter(torch.empty(num_tags, num_tags))
            for p in self.parameters():
                p.data.copy_(torch.from_numpy(
                    rng.uniform(-0.1, 0.1, tuple(p.shape)).astype(np.float32)))

        def forward(self, emissions, tags, mask, reduction="sum"):
            emissions, tags, mask = (emissions.transpose(0, 1), tags.transpose(0, 1),
                                     mask.transpose(0, 1))
            numerator = self._compute_score(emissions, tags, mask)
            denominator = self._compute_normalizer(emissions, mask)
            llh = numerator - denominator
            if reduction == "sum":
                return llh.sum()
            return llh.sum() / mask.float().sum()

        def _compute_score(self, emissions, tags, mask):
            seq_length, batch_size = tags.shape
            mask = mask.float()
            score = self.start_transitions[tags[0]]
            score += emissions[0, torch.arange(batch_size), tags[0]]
            for i in range(1, seq_length):
                score += self.transitions[tags[i - 1], tags[i]] * mask[i]
                score += emissions[i, torch.arange(batch_size), tags[i]] * mask[i]
            seq_ends = mask.long().sum(dim=0) - 1
            last_tags = tags[seq_ends, torch.arange(batch_size)]
            score += self.end_transitions[last_tags]
            return score

        def _compute_normalizer(self, emissions, mask):
            seq_length = emissions.size(0)
            score = self.start_transitions + emissions[0]
            for i in range(1, seq_length):
                broadcast_score = score.unsqueeze(2)
                broadcast_emissions = emissions[i].unsqueeze(1)
                next_score = broadcast_score + self.transitions + broadcast_emissions
                next_score = torch.logsumexp(next_score, dim=1)
                score = torch.where(mask[i].unsqueeze(1), next_score, score)
            score += self.end_transitions
            return torch.logsumexp(score, dim=1)

        def decode(self, emissions, mask):
            emissions, mask = emissions.transpose(0, 1), mask.transpose(0, 1)
            seq_length, batch_size = mask.shape
            score = self.start_transitions + emissions[0]
            history = []
            for i in range(1, seq_length):
                next_score = score.unsqueeze(2) + self.transitions + emissions[i].unsqueeze(1)
                next_score, indices = next_score.max(dim=1)
                score = torch.where(mask[i].unsqueeze(1), next_score, score)
                history.append(indices)
            score += self.end_transitions
            seq_ends = mask.long().sum(dim=0) - 1
            best_tags_list = []
            for idx in range(batch_size):
                _, best_last_tag = score[idx].max(dim=0)
                best_tags = [best_last_tag.item()]
                for hist in reversed(history[:seq_ends[idx]]):
                    best_last_tag = hist[idx][best_tags[-1]]
                    best_tags.append(best_last_tag.item())
                best_tags.reverse()
                best_tags_list.append(best_tags)
            return best_tags_list

    crf = CRF(K)
    proj = nn.Linear(6, K)
    fill_(torch, proj, rng)
    opt = torch.optim.SGD(list(crf.parameters()) + list(proj.parameters()), lr=0.1)
    mask = torch.ByteTensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 0, 0, 0]])
    res = {"nll": [], "token_mean": []}
    for _ in range(3):
        feats = normal(torch, rng, B, T, 6)
        tags = torch.from_numpy(rng.integers(0, K, (B, T)))
        emissions = proj(feats)
        nll = -crf(emissions, tags, mask)
        opt.zero_grad()
        nll.backward()
        opt.step()
        res["nll"].append(nll.item())
        with torch.no_grad():
            res["token_mean"].append(crf(emissions, tags, mask, reduction="token_mean").item())
    with torch.no_grad():
        paths = crf.decode(proj(normal(torch, rng, B, T, 6)), mask)
    res["paths"] = [t for path in paths for t in path]
    res["path_lengths"] = [len(path) for path in paths]
    res["params"] = list(crf.parameters()) + list(proj.parameters())
    return res


PROGRAMS = [hmm_program, semi_crf_program, soft_dtw_program, sorting_network_program,
            pytorch_crf_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 logsumexp / matmul accumulation order over a few optimizer steps
        "hmm_program": (1e-4, 1e-5),
        "semi_crf_program": (1e-4, 1e-5),
        "soft_dtw_program": (1e-4, 1e-5),
        "sorting_network_program": (1e-4, 1e-5),
        "pytorch_crf_program": (1e-4, 1e-5),
    })
