"""Discrete diffusion language models and GFlowNets written as their reference repositories write
them in torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy
weights: D3PM with uniform and absorbing transition matrices (one_hot @ Q-bar, posterior logits,
the hybrid loss), MDLM masked diffusion (log-linear schedule, SUBS parametrisation, the
continuous-time ELBO weight, Gumbel sampling and the cached ddpm update), SEDD score entropy
(absorbing graph, log-ratio output with the expm1 scaling, staggered Euler step), and hypergrid
GFlowNets (trajectory balance with a learned logZ, detailed and sub-trajectory balance, -inf
masked logits, a replay buffer of terminal states). Sibling _gen_retrieval covers retrieval,
graph pooling and learned optimisers; _gen_fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _gumbel_argmax(torch, logits, u):
    """Gumbel-max sampling with uniforms drawn from NumPy."""
    g = -torch.log(-torch.log(u.clamp(1e-10, 1.0)))
    return (logits + g).argmax(dim=-1)


def d3pm_program(torch):
    """D3PM (Austin et al.) on tokens: uniform and absorbing Q_t, q(x_t | x_0) by one_hot and
    matmul with the cumulative products, the posterior q(x_{t-1} | x_t, x_0) in logits, and the
    hybrid loss (KL to the posterior plus lambda cross-entropy) trained with Adam."""
    rng = np.random.default_rng(1)
    K, T, B, L, hid = 6, 8, 3, 5, 16
    F = torch.nn.functional
    eps = 1e-6
    res = {}
    betas = torch.linspace(0.02, 0.5, T, dtype=torch.float64)
    for kind in ("uniform", "absorbing"):
        mats = []
        for beta in betas:
            if kind == "uniform":
                m = torch.full((K, K), beta.item() / K, dtype=torch.float64)
                m.fill_diagonal_(1 - (K - 1) * beta.item() / K)
            else:
                m = torch.eye(K, dtype=torch.float64) * (1 - beta)
                m[:, K - 1] += beta
            mats.append(m)
        q_onestep = torch.stack(mats, dim=0)
        q_onestep_t = q_onestep.transpose(1, 2)
        mat = torch.eye(K, dtype=torch.float64)
        cum = []
        for t in range(T):
            mat = mat @ q_onestep[t]
            cum.append(mat)
        q_mats = torch.stack(cum).float()
        q_onestep_t = q_onestep_t.float()
        res[f"{kind}_rowsums"] = q_mats.sum(-1)

        class Denoiser(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = torch.nn.Embedding(K, hid)
                self.temb = torch.nn.Embedding(T, hid)
                self.mix = torch.nn.Conv1d(hid, hid, 3, padding=1)
                self.out = torch.nn.Linear(hid, K)

            def forward(self, x, t):
                h = self.emb(x) + self.temb(t)[:, None, :]
                h = h + F.silu(self.mix(h.transpose(1, 2))).transpose(1, 2)
                return self.out(F.layer_norm(h, (hid,)))

        def at(a, t, x):
            # a[t, x, :] for batched t and token grids, as in the reference `_at`
            return a[t.view(-1, *([1] * (x.dim() - 1))), x, :]

        def q_posterior_logits(x_start_logits, x_t, t, from_logits):
            fact1 = at(q_onestep_t, t, x_t)
            if from_logits:
                fact2 = F.softmax(x_start_logits, dim=-1) @ q_mats[t - 1]
                tzero_logits = x_start_logits
            else:
                fact2 = at(q_mats, t - 1, x_start_logits)
                tzero_logits = torch.log(F.one_hot(x_start_logits, K) + eps)
            out = torch.log(fact1 + eps) + torch.log(fact2 + eps)
            tb = t.view(-1, *([1] * (out.dim() - 1)))
            return torch.where(tb == 0, tzero_logits, out)

        model = Denoiser()
        fill_(torch, model, rng, 0.3)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        losses = []
        for step in range(3):
            x0 = torch.from_numpy(rng.integers(0, K - 1, (B, L)))
            t = torch.from_numpy(rng.integers(1, T, (B,)))
            probs = torch.bmm(F.one_hot(x0, K).float(), q_mats[t])
            u = torch.from_numpy(rng.random((B, L, K)).astype(np.float32))
            xt = _gumbel_argmax(torch, torch.log(probs + eps), u)
            logits = model(xt, t)
            true = q_posterior_logits(x0, xt, t, from_logits=False)
            pred = q_posterior_logits(logits, xt, t, from_logits=True)
            kl = (F.softmax(true + eps, -1) * (F.log_softmax(true + eps, -1)
                                                - F.log_softmax(pred + eps, -1))).sum(-1)
            ce = F.cross_entropy(logits.flatten(0, 1), x0.flatten())
            loss = kl.mean() + 0.01 * ce
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(loss.item())
            res[f"{kind}_xt_{step}"] = xt
        res[f"{kind}_losses"] = losses
        res[f"{kind}_out_w"] = model.out.weight
        with torch.no_grad():
            x = torch.full((B, L), K - 1, dtype=torch.long)
            for t_ in reversed(range(1, T)):
                tt = torch.full((B,), t_, dtype=torch.long)
                pl = q_posterior_logits(model(x, tt), x, tt, from_logits=True)
                u = torch.from_numpy(rng.random((B, L, K)).astype(np.float32))
                x = _gumbel_argmax(torch, pl, u)
            res[f"{kind}_sample"] = x
    return res


def mdlm_program(torch):
    """MDLM (Sahoo et al.): log-linear noise, masking at rate 1 - exp(-sigma), SUBS logits
    (mask logit -inf, carry-over of unmasked tokens), the ELBO weight dsigma / expm1(sigma),
    AdamW with an EMA copy, and the cached ddpm sampler with Gumbel sampling."""
    rng = np.random.default_rng(2)
    V, B, L, d = 7, 4, 6, 16
    mask_index = V - 1
    neg_inf = -1000000.0
    eps = 1e-3

    class LogLinearNoise(torch.nn.Module):
        def __init__(self, eps=1e-3):
            super().__init__()
            self.eps = eps
            self.sigma_max = self.total_noise(torch.tensor(1.0))
            self.sigma_min = self.eps + self.total_noise(torch.tensor(0.0))

        def rate_noise(self, t):
            return (1 - self.eps) / (1 - (1 - self.eps) * t)

        def total_noise(self, t):
            return -torch.log1p(-(1 - self.eps) * t)

        def forward(self, t):
            return self.total_noise(t), self.rate_noise(t)

    class Backbone(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.vocab_embed = torch.nn.Embedding(V, d)
            self.sigma_map = torch.nn.Sequential(torch.nn.Linear(1, d), torch.nn.SiLU())
            self.attn = torch.nn.MultiheadAttention(d, 2, batch_first=True)
            self.norm = torch.nn.LayerNorm(d)
            self.head = torch.nn.Linear(d, V)

        def forward(self, x, sigma):
            h = self.vocab_embed(x) + self.sigma_map(sigma[:, None])[:, None, :]
            a, _ = self.attn(h, h, h, need_weights=False)
            return self.head(self.norm(h + a))

    def subs(logits, xt):
        logits[:, :, mask_index] += neg_inf
        logits = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
        unmasked = xt != mask_index
        logits[unmasked] = neg_inf
        logits[unmasked, xt[unmasked]] = 0
        return logits

    noise = LogLinearNoise()
    net = Backbone()
    fill_(torch, net, rng, 0.25)
    ema = [p.detach().clone() for p in net.parameters()]
    opt = torch.optim.AdamW(net.parameters(), lr=2e-3, weight_decay=0.0, betas=(0.9, 0.999))
    res = {"sigma_min": noise.sigma_min, "sigma_max": noise.sigma_max}
    losses, nlls = [], []
    for step in range(3):
        x0 = torch.from_numpy(rng.integers(0, V - 1, (B, L)))
        u0 = torch.from_numpy(rng.random(1).astype(np.float32))
        offset = torch.arange(B, dtype=torch.float32) / B
        t = (u0 / B + offset) % 1          # antithetic sampling
        t = (1 - eps) * t + eps
        sigma, dsigma = noise(t)
        move_chance = 1 - torch.exp(-sigma[:, None])
        u = torch.from_numpy(rng.random((B, L)).astype(np.float32))
        xt = torch.where(u < move_chance, mask_index, x0)
        model_output = subs(net(xt, sigma), xt)
        log_p_theta = torch.gather(model_output, -1, x0[:, :, None]).squeeze(-1)
        loss = -log_p_theta * (dsigma / torch.expm1(sigma))[:, None]
        nll = loss.sum() / loss.numel()
        opt.zero_grad()
        nll.backward()
        gn = torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            for e, p in zip(ema, net.parameters()):
                e.mul_(0.9).add_(p, alpha=0.1)
        losses.append(nll.item())
        nlls.append(gn)
        res[f"xt_{step}"] = xt
    res["losses"], res["gnorms"], res["ema0"] = losses, nlls, ema[0]

    # cached ddpm sampling (MDLM's _ddpm_caching_update), noise from NumPy
    steps = 4
    x = mask_index * torch.ones(B, L, dtype=torch.int64)
    timesteps = torch.linspace(1, 1e-5, steps + 1)
    dt = (1 - 1e-5) / steps
    p_x0_cache = None
    net.eval()
    with torch.no_grad():
        for i in range(steps):
            t = timesteps[i] * torch.ones(x.shape[0], 1)
            sigma_t, _ = noise(t)
            sigma_s, _ = noise(t - dt)
            move_chance_t = (1 - torch.exp(-sigma_t))[:, :, None]
            move_chance_s = (1 - torch.exp(-sigma_s))[:, :, None]
            if p_x0_cache is None:
                p_x0_cache = subs(net(x, sigma_t.squeeze(-1)), x).exp()
            q_xs = p_x0_cache * (move_chance_t - move_chance_s)
            q_xs[:, :, mask_index] = move_chance_s[:, :, 0]
            gumbel_norm = 1e-10 - (torch.from_numpy(
                rng.random(q_xs.shape).astype(np.float32)) + 1e-10).log()
            _x = (q_xs / gumbel_norm).argmax(dim=-1)
            copy_flag = (x != mask_index).to(x.dtype)
            x_new = copy_flag * x + (1 - copy_flag) * _x
            if not torch.allclose(x_new, x):
                p_x0_cache = None
            x = x_new
            res[f"sample_{i}"] = x
    res["head"] = net.head.weight
    g = torch.Generator().manual_seed(3)
    draws = torch.multinomial(torch.softmax(torch.randn(B, V, generator=g), -1), 3,
                              replacement=True, generator=g)
    res["multinomial_shape"] = list(draws.shape) + [int(draws.min() >= 0), int(draws.max() < V)]
    return res


def sedd_program(torch):
    """SEDD (Lou et al.): absorbing graph, geometric noise, log-score output shifted by
    log(expm1(sigma)) and log(V - 1) with a zero scattered at the current token, the score
    entropy loss with its boolean-index gathers, and an Euler sampling step."""
    rng = np.random.default_rng(3)
    V, B, L, d = 6, 3, 5, 16
    dim = V  # last token is the absorbing state
    sigma_min, sigma_max = 1e-3, 5.0
    F = torch.nn.functional

    def total_noise(t):
        return sigma_min ** (1 - t) * sigma_max ** t

    def rate_noise(t):
        return total_noise(t) * (math.log(sigma_max) - math.log(sigma_min))

    class Score(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Parameter(torch.empty(V, d))
            self.t_map = torch.nn.Linear(1, d)
            self.block = torch.nn.Sequential(torch.nn.Linear(d, d), torch.nn.GELU("tanh"),
                                             torch.nn.Linear(d, V))

        def forward(self, indices, sigma):
            h = self.emb[indices] + self.t_map(sigma.log()[:, None])[:, None]
            x = self.block(h)
            esigm1_log = torch.where(sigma < 0.5, torch.expm1(sigma),
                                     sigma.exp() - 1).log().to(x.dtype)[:, None, None]
            x = x - esigm1_log - np.log(x.shape[-1] - 1)
            return torch.scatter(x, -1, indices[..., None], torch.zeros_like(x[..., :1]))

    def score_entropy(score, sigma, x, x0):
        rel_ind = x == dim - 1
        esigm1 = torch.where(sigma < 0.5, torch.expm1(sigma), torch.exp(sigma) - 1)
        ratio = 1 / esigm1.expand_as(x)[rel_ind]
        other_ind = x0[rel_ind]
        neg_term = ratio * torch.gather(score[rel_ind], -1, other_ind[..., None]).squeeze(-1)
        pos_term = score[rel_ind][:, :-1].exp().sum(dim=-1)
        const = ratio * (ratio.log() - 1)
        entropy = torch.zeros(*x.shape, device=x.device)
        entropy[rel_ind] += pos_term - neg_term + const
        return entropy

    model = Score()
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 2))
    res, losses = {}, []
    for step in range(3):
        x0 = torch.from_numpy(rng.integers(0, V - 1, (B, L)))
        t = (1 - 1e-3) * torch.from_numpy(rng.random(B).astype(np.float32)) + 1e-3
        sigma, dsigma = total_noise(t), rate_noise(t)
        move_chance = 1 - (-sigma).exp()
        u = torch.from_numpy(rng.random((B, L)).astype(np.float32))
        xt = torch.where(u < move_chance[:, None], dim - 1, x0)
        log_score = model(xt, sigma)
        loss = (dsigma[:, None] * score_entropy(log_score, sigma[:, None], xt, x0)).sum(-1)
        loss = loss.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        res[f"xt_{step}"] = xt
    res["losses"], res["lr"] = losses, [g["lr"] for g in opt.param_groups]
    res["emb"] = model.emb

    # one Euler step of the reverse process (absorbing graph), Gumbel categorical sampling
    with torch.no_grad():
        x = (dim - 1) * torch.ones(B, L, dtype=torch.long)
        t = torch.full((B, 1), 0.9)
        curr_sigma, dsigma = total_noise(t), rate_noise(t)
        score = model(x, curr_sigma.squeeze(-1)).exp()
        rev = dsigma[..., None] * 0.1 * score
        rev = rev - F.one_hot(x, V) * rev.sum(-1, keepdim=True)  # rows of a rate matrix
        probs = F.one_hot(x, num_classes=V).to(rev) + rev
        probs = probs.clamp(min=0)
        gumbel_norm = 1e-10 - (torch.from_numpy(
            rng.random(probs.shape).astype(np.float32)) + 1e-10).log()
        res["euler"] = (probs / gumbel_norm).argmax(dim=-1)
        res["probs"] = probs
    return res


def _hypergrid(torch, H, ndim):
    """Hypergrid reward (Bengio et al. 2021) on integer coordinates."""
    def reward(s):
        ax = (s.float() / (H - 1) - 0.5).abs()
        return 1e-3 + 0.5 * ((ax > 0.25) & (ax <= 0.5)).all(-1).float() \
            + 2.0 * ((ax > 0.3) & (ax < 0.4)).all(-1).float()
    return reward


def gflownet_tb_program(torch):
    """Trajectory balance on a hypergrid: one_hot state encoding, forward logits with -inf on
    invalid actions, log_softmax over masked rows, a learned logZ with its own learning rate,
    a uniform backward policy, Categorical.log_prob, and a replay buffer of terminal states."""
    rng = np.random.default_rng(4)
    H, ndim, B, hid = 5, 2, 8, 32
    F = torch.nn.functional
    reward = _hypergrid(torch, H, ndim)

    pf = torch.nn.Sequential(torch.nn.Linear(H * ndim, hid), torch.nn.LeakyReLU(),
                             torch.nn.Linear(hid, hid), torch.nn.LeakyReLU(),
                             torch.nn.Linear(hid, ndim + 1))
    fill_(torch, pf, rng, 0.3)
    logZ = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([{"params": pf.parameters(), "lr": 1e-3},
                            {"params": [logZ], "lr": 1e-1}])
    res = {"losses": [], "logZ": []}
    buffer_x, buffer_r = None, None
    for it in range(3):
        s = torch.zeros(B, ndim, dtype=torch.long)
        done = torch.zeros(B, dtype=torch.bool)
        sum_log_pf = torch.zeros(B)
        sum_log_pb = torch.zeros(B)
        n_steps = torch.zeros(B, dtype=torch.long)
        while not done.all():
            enc = F.one_hot(s, H).view(B, -1).float()
            logits = pf(enc)
            mask = torch.cat([s == H - 1, torch.zeros(B, 1, dtype=torch.bool)], dim=1)
            logits = logits.masked_fill(mask, float("-inf"))
            logp = logits.log_softmax(-1)
            u = torch.from_numpy(rng.random((B, ndim + 1)).astype(np.float32))
            act = _gumbel_argmax(torch, logp.detach(), u)
            dist = torch.distributions.Categorical(logits=logits)
            lp = dist.log_prob(act)
            assert torch.allclose(lp, logp.gather(1, act[:, None]).squeeze(1))
            sum_log_pf = sum_log_pf + torch.where(done, torch.zeros_like(lp), lp)
            stop = act == ndim
            moving = ~done & ~stop
            step = F.one_hot(act.clamp(max=ndim - 1), ndim) * moving[:, None]
            s = s + step
            n_parents = ((s > 0).sum(-1)).clamp(min=1).float()
            sum_log_pb = sum_log_pb + torch.where(moving, -n_parents.log(), torch.zeros(B))
            n_steps += moving.long()
            done = done | stop
        log_r = reward(s).log()
        loss = (logZ + sum_log_pf - log_r - sum_log_pb).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
        res["logZ"].append(logZ.item())
        res[f"terminal_{it}"] = s
        res[f"steps_{it}"] = n_steps
        # replay buffer of unique terminal states, keep the top rewards
        r = reward(s)
        if buffer_x is None:
            buffer_x, buffer_r = s, r
        else:
            buffer_x = torch.cat([buffer_x, s])
            buffer_r = torch.cat([buffer_r, r])
        buffer_x, inv = torch.unique(buffer_x, dim=0, return_inverse=True)
        buffer_r = torch.zeros(len(buffer_x)).scatter_reduce(0, inv, buffer_r, "amax",
                                                              include_self=False)
        k = min(6, len(buffer_x))
        # topk leaves the order of ties unspecified: a stable sort keeps the first ones
        top = buffer_r.sort(descending=True, stable=True).indices[:k]
        res[f"buffer_{it}"] = buffer_x[top.sort().values]
    res["entropy"] = torch.distributions.Categorical(
        logits=torch.tensor([[0.0, float("-inf"), 1.0]])).entropy()
    res["pf_last"] = pf[-1].weight
    return res


def gflownet_db_subtb_program(torch):
    """Detailed balance and sub-trajectory balance (lambda-weighted over all sub-trajectories)
    on stored trajectories: flow head log F(s), terminal flows clamped to log R, backward
    policy logits with -inf masks on impossible parents, SGD with momentum."""
    rng = np.random.default_rng(5)
    H, ndim, B, hid, Tmax = 4, 2, 5, 24, 7
    F = torch.nn.functional
    reward = _hypergrid(torch, H, ndim)
    net = torch.nn.Sequential(torch.nn.Linear(H * ndim, hid), torch.nn.ReLU(),
                              torch.nn.Linear(hid, (ndim + 1) + ndim + 1))
    fill_(torch, net, rng, 0.3)
    opt = torch.optim.SGD(net.parameters(), lr=1e-2, momentum=0.9, nesterov=True)

    def heads(states):
        out = net(F.one_hot(states, H).flatten(-2).float())
        return out[..., :ndim + 1], out[..., ndim + 1:2 * ndim + 1], out[..., -1]

    # roll out trajectories with NumPy noise (no grad), then score them
    with torch.no_grad():
        s = torch.zeros(B, ndim, dtype=torch.long)
        done = torch.zeros(B, dtype=torch.bool)
        states = [s.clone()]
        actions = []
        for _ in range(Tmax):
            fl, _, _ = heads(s)
            fl = fl.masked_fill(torch.cat([s == H - 1, done[:, None]], 1), float("-inf"))
            u = torch.from_numpy(rng.random(fl.shape).astype(np.float32))
            a = _gumbel_argmax(torch, fl, u)
            a = torch.where(done, torch.full_like(a, ndim), a)
            moving = (a < ndim) & ~done
            s = s + F.one_hot(a.clamp(max=ndim - 1), ndim) * moving[:, None]
            done = done | (a == ndim)
            states.append(s.clone())
            actions.append(torch.where(moving, a, torch.full_like(a, -1)))
        states = torch.stack(states, 1)           # (B, Tmax + 1, ndim)
        actions = torch.stack(actions, 1)         # (B, Tmax), -1 after the stop
    lens = (actions >= 0).sum(1)
    res = {"lens": lens, "states": states, "db": [], "subtb": []}
    lam = 0.9
    for it in range(3):
        logits_f, logits_b, log_flow = heads(states)
        mask_f = torch.cat([states == H - 1, torch.zeros_like(states[..., :1], dtype=torch.bool)],
                           -1)
        mask_b = states == 0
        logpf = logits_f.masked_fill(mask_f, -float("inf")).log_softmax(-1)
        logpb = logits_b.masked_fill(mask_b, -float("inf")).log_softmax(-1)
        a = actions.clamp(min=0)
        lpf = logpf[:, :-1].gather(-1, a[..., None]).squeeze(-1)        # (B, Tmax)
        lpb = logpb[:, 1:].gather(-1, a[..., None]).squeeze(-1)
        valid = actions >= 0
        lpf = torch.where(valid, lpf, torch.zeros_like(lpf))
        lpb = torch.where(valid, lpb, torch.zeros_like(lpb))
        final = states[torch.arange(B), lens]
        log_r = reward(final).log()
        idx = torch.arange(Tmax + 1)
        log_flow = torch.where(idx[None] == lens[:, None], log_r[:, None], log_flow)
        # the stop action's probability joins the terminal flow
        lp_stop = logpf[torch.arange(B), lens, ndim]
        db = (log_flow[:, :-1] + lpf - log_flow[:, 1:] - lpb)
        db = (db.pow(2) * valid).sum() / valid.sum()
        # sub-trajectory balance: cumulative sums give every (i, j) pair at once
        cum_f = F.pad(lpf.cumsum(1), (1, 0))
        cum_b = F.pad(lpb.cumsum(1), (1, 0))
        i, j = torch.triu_indices(Tmax + 1, Tmax + 1, offset=1)
        ok = j[None] <= lens[:, None]
        diff = (log_flow[:, i] + cum_f[:, j] - cum_f[:, i]
                - log_flow[:, j] - cum_b[:, j] + cum_b[:, i])
        w = lam ** (j - i).float()
        w = w[None].expand(B, -1) * ok
        subtb = ((diff.pow(2) * w).sum(1) / w.sum(1)).mean()
        loss = db + subtb - 0.01 * lp_stop.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["db"].append(db.item())
        res["subtb"].append(subtb.item())
    res["w_last"] = net[-1].weight
    res["grad_last"] = net[-1].bias.grad
    return res


PROGRAMS = [d3pm_program, mdlm_program, sedd_program, gflownet_tb_program,
            gflownet_db_subtb_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
