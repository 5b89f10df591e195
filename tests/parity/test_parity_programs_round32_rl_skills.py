"""More RL written as its reference repositories write it in torch, run once with `torch`
bound to ember and once to PyTorch from the same NumPy weights: TD-MPC2 (SimNorm latents,
symlog two-hot soft cross entropy, a Q ensemble through torch.func.stack_module_state + vmap,
a percentile RunningScale, MPPI planning with topk elites), Gumbel MuZero's root (Gumbel-top-k,
sequential halving, completed Q-values and the improved-policy KL), DIAYN skill discovery,
URLB's APT particle-entropy reward with a torch running mean/std and NGU-style episodic
novelty, and SimHash count bonuses through unique(return_inverse, return_counts). Sibling of
test_parity_programs_round32_rl.py; _fixes pins what they found."""

import copy
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def tdmpc2_program(torch):
    """TD-MPC2's world model and update: NormedLinear MLPs with Mish, SimNorm, the symlog
    two-hot reward/value heads, a 3-member Q ensemble called through functional_call under
    vmap, rho-discounted consistency/reward/value losses, RunningScale from a sort-based
    percentile, a squashed Gaussian policy, then MPPI planning from NumPy noise."""
    rng = np.random.default_rng(20)
    nn, F = torch.nn, torch.nn.functional
    B, H, Do, A, Z, num_bins, vmin, vmax = 4, 3, 5, 2, 8, 11, -5.0, 5.0
    bin_size = (vmax - vmin) / (num_bins - 1)
    rho, simnorm_dim = 0.5, 4

    def symlog(x):
        return torch.sign(x) * torch.log(1 + torch.abs(x))

    def symexp(x):
        return torch.sign(x) * (torch.exp(torch.abs(x)) - 1)

    def two_hot(x):
        x = torch.clamp(symlog(x), vmin, vmax).squeeze(1)
        bin_idx = torch.floor((x - vmin) / bin_size)
        bin_offset = ((x - vmin) / bin_size - bin_idx).unsqueeze(-1)
        soft_two_hot = torch.zeros(x.shape[0], num_bins, device=x.device, dtype=x.dtype)
        bin_idx = bin_idx.long()
        soft_two_hot = soft_two_hot.scatter(1, bin_idx.unsqueeze(1), 1 - bin_offset)
        soft_two_hot = soft_two_hot.scatter(1, (bin_idx.unsqueeze(1) + 1) % num_bins,
                                            bin_offset)
        return soft_two_hot

    def two_hot_inv(x):
        dreg_bins = torch.linspace(vmin, vmax, num_bins, device=x.device, dtype=x.dtype)
        x = F.softmax(x, dim=-1)
        x = torch.sum(x * dreg_bins, dim=-1, keepdim=True)
        return symexp(x)

    def soft_ce(pred, target):
        pred = F.log_softmax(pred, dim=-1)
        target = two_hot(target)
        return -(target * pred).sum(-1, keepdim=True)

    class SimNorm(nn.Module):
        def forward(self, x):
            shp = x.shape
            x = x.view(*shp[:-1], -1, simnorm_dim)
            x = F.softmax(x, dim=-1)
            return x.view(*shp)

    class NormedLinear(nn.Linear):
        def __init__(self, *args, act=None, **kwargs):
            super().__init__(*args, **kwargs)
            self.ln = nn.LayerNorm(self.out_features)
            self.act = nn.Mish(inplace=False) if act is None else act

        def forward(self, x):
            return self.act(self.ln(super().forward(x)))

    def mlp(in_dim, mlp_dims, out_dim, act=None):
        dims = [in_dim, *mlp_dims, out_dim]
        layers = nn.ModuleList()
        for i in range(len(dims) - 2):
            layers.append(NormedLinear(dims[i], dims[i + 1]))
        layers.append(NormedLinear(dims[-2], dims[-1], act=act) if act
                      else nn.Linear(dims[-2], dims[-1]))
        return nn.Sequential(*layers)

    class Ensemble(nn.Module):
        def __init__(self, modules):
            super().__init__()
            self.params, _ = torch.func.stack_module_state(modules)
            for k, v in self.params.items():
                self.register_parameter("p_" + k.replace(".", "_"), nn.Parameter(v.detach()))
            self.keys = list(self.params)
            self.base = copy.deepcopy(modules[0]).to("meta")

        def forward(self, x):
            params = {k: getattr(self, "p_" + k.replace(".", "_")) for k in self.keys}

            def call(p, x):
                return torch.func.functional_call(self.base, (p,), (x,))
            return torch.vmap(call, in_dims=(0, None), randomness="different")(params, x)

    encoder = mlp(Do, [16], Z, act=SimNorm())
    dynamics = mlp(Z + A, [16], Z, act=SimNorm())
    reward = mlp(Z + A, [16], num_bins)
    pi = mlp(Z, [16], 2 * A)
    qs = Ensemble([mlp(Z + A, [16], num_bins) for _ in range(3)])
    for m in (encoder, dynamics, reward, pi, qs):
        fill_(torch, m, rng, 0.3)
    target_qs = copy.deepcopy(qs).requires_grad_(False)
    optim = torch.optim.Adam([{"params": encoder.parameters(), "lr": 3e-4 * 0.3},
                              {"params": [*dynamics.parameters(), *reward.parameters(),
                                          *qs.parameters()]}], lr=3e-4)
    pi_optim = torch.optim.Adam(pi.parameters(), lr=3e-4, eps=1e-5)

    def pi_forward(z, eps):
        mu, log_std = pi(z).chunk(2, dim=-1)
        log_std = -10 + 0.5 * (2 - -10) * (torch.tanh(log_std) + 1)
        pi_a = mu + eps * log_std.exp()
        residual = (-0.5 * eps.pow(2) - log_std).sum(-1, keepdim=True)
        log_pi = residual - 0.5 * math.log(2 * math.pi) * eps.size(-1)
        mu, pi_a = torch.tanh(mu), torch.tanh(pi_a)
        log_pi = log_pi - torch.log(F.relu(1 - pi_a.pow(2)) + 1e-6).sum(-1, keepdim=True)
        return mu, pi_a, log_pi, log_std

    class RunningScale:
        def __init__(self, tau=0.01):
            self._value = torch.ones(1, dtype=torch.float32)
            self._percentiles = torch.tensor([5, 95], dtype=torch.float32)
            self.tau = tau

        def _percentile(self, x):
            x_dtype, x_shape = x.dtype, x.shape
            x = x.view(x.shape[0], -1)
            in_sorted, _ = torch.sort(x, dim=0)
            positions = self._percentiles * (x.shape[0] - 1) / 100
            floored = torch.floor(positions)
            ceiled = floored + 1
            ceiled[ceiled > x.shape[0] - 1] = x.shape[0] - 1
            weight_ceiled = positions - floored
            weight_floored = 1.0 - weight_ceiled
            d0 = in_sorted[floored.long(), :] * weight_floored[:, None]
            d1 = in_sorted[ceiled.long(), :] * weight_ceiled[:, None]
            return (d0 + d1).view(-1, *x_shape[1:]).type(x_dtype)

        def update(self, x):
            value = self._percentile(x.detach())
            scale = value[1] - value[0]
            self._value.data.lerp_(scale, self.tau)

        def __call__(self, x, update=False):
            if update:
                self.update(x)
            return x * (1 / self.value)

        @property
        def value(self):
            return self._value.cpu().item()

    scale = RunningScale()
    res = {"loss": [], "pi_loss": [], "scale": []}
    for it in range(2):
        obs = normal(torch, rng, H + 1, B, Do)
        action = normal(torch, rng, H, B, A).clamp(-1, 1)
        rew = normal(torch, rng, H, B, 1)
        with torch.no_grad():
            next_z = encoder(obs[1:])
            eps = normal(torch, rng, H, B, A)
            _, pi_a, _, _ = pi_forward(next_z, eps)
            tq = target_qs(torch.cat([next_z, pi_a], -1))
            idx = torch.from_numpy(rng.permutation(3)[:2])
            q1, q2 = tq[idx[0]], tq[idx[1]]
            q = torch.min(two_hot_inv(q1), two_hot_inv(q2))
            td_targets = rew + 0.99 * q
        zs = torch.empty(H + 1, B, Z)
        z = encoder(obs[0])
        zs[0] = z
        consistency_loss = 0
        for t in range(H):
            z = dynamics(torch.cat([z, action[t]], -1))
            consistency_loss = consistency_loss + F.mse_loss(z, next_z[t]) * rho ** t
            zs[t + 1] = z
        _zs = zs[:-1]
        za = torch.cat([_zs, action], -1)
        qs_out = qs(za)
        reward_preds = reward(za)
        reward_loss, value_loss = 0, 0
        for t in range(H):
            reward_loss = reward_loss + soft_ce(reward_preds[t], rew[t]).mean() * rho ** t
            for q_ in range(3):
                value_loss = value_loss + soft_ce(qs_out[q_][t], td_targets[t]).mean() * rho ** t
        consistency_loss = consistency_loss * (1 / H)
        reward_loss = reward_loss * (1 / H)
        value_loss = value_loss * (1 / (H * 3))
        total_loss = 20 * consistency_loss + 0.1 * reward_loss + 0.1 * value_loss
        optim.zero_grad(set_to_none=True)
        total_loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(
            [p for g in optim.param_groups for p in g["params"]], 20)
        optim.step()

        zs = zs.detach()
        eps = normal(torch, rng, H + 1, B, A)
        _, pis, log_pis, _ = pi_forward(zs, eps)
        qv = qs(torch.cat([zs, pis], -1))
        qv = two_hot_inv(qv[:2]).mean(0)
        scale.update(qv[0])
        qv = scale(qv)
        rho_w = torch.pow(rho, torch.arange(len(qv), device=qv.device))
        pi_loss = ((1e-4 * log_pis - qv).mean(dim=(1, 2)) * rho_w).mean()
        pi_optim.zero_grad(set_to_none=True)
        pi_loss.backward()
        pi_optim.step()
        with torch.no_grad():
            for p, tp in zip(qs.parameters(), target_qs.parameters()):
                tp.data.lerp_(p.data, 0.01)
        res["loss"].append([total_loss.item(), consistency_loss.item(), reward_loss.item(),
                            value_loss.item(), grad_norm.item()])
        res["pi_loss"].append(pi_loss.item())
        res["scale"].append(scale.value)
    res["q_w"] = qs.p_1_weight
    res["tq_w"] = target_qs.p_0_weight

    # MPPI from NumPy noise, with pi trajectories mixed in
    num_samples, num_pi, num_elites, iterations = 12, 3, 4, 2
    with torch.no_grad():
        z0 = encoder(normal(torch, rng, 1, Do))
        pi_actions = torch.empty(H, num_pi, A)
        _z = z0.repeat(num_pi, 1)
        for t in range(H):
            pi_actions[t] = pi_forward(_z, normal(torch, rng, num_pi, A))[1]
            _z = dynamics(torch.cat([_z, pi_actions[t]], -1))
        z = z0.repeat(num_samples, 1)
        mean = torch.zeros(H, A)
        std = torch.full((H, A), 2.0, dtype=torch.float)
        actions = torch.empty(H, num_samples, A)
        actions[:, :num_pi] = pi_actions
        for i in range(iterations):
            r = normal(torch, rng, H, num_samples - num_pi, A)
            actions[:, num_pi:] = (mean.unsqueeze(1) + std.unsqueeze(1) * r).clamp(-1, 1)
            G, discount, _z = 0, 1, z
            for t in range(H):
                rr = two_hot_inv(reward(torch.cat([_z, actions[t]], -1)))
                _z = dynamics(torch.cat([_z, actions[t]], -1))
                G = G + discount * rr
                discount = discount * 0.99
            a_last = pi_forward(_z, normal(torch, rng, num_samples, A))[1]
            value = (G + discount * two_hot_inv(qs(torch.cat([_z, a_last], -1))).mean(0))
            value = value.nan_to_num_(0)
            elite_idxs = torch.topk(value.squeeze(1), num_elites, dim=0).indices
            elite_value, elite_actions = value[elite_idxs], actions[:, elite_idxs]
            max_value = elite_value.max(0)[0]
            score = torch.exp(0.5 * (elite_value - max_value))
            score /= score.sum(0)
            mean = torch.sum(score.unsqueeze(0) * elite_actions, dim=1) / (score.sum(0) + 1e-9)
            std = torch.sqrt(torch.sum(score.unsqueeze(0) * (elite_actions - mean.unsqueeze(1))
                                       ** 2, dim=1) / (score.sum(0) + 1e-9)).clamp_(0.05, 2)
            res.setdefault("elites", []).append(elite_idxs)
        score = score.squeeze(1).cpu().numpy()
        choice = int(np.argmax(score))
        res["plan"] = elite_actions[:, choice]
        res["mean"], res["std"] = mean, std
    return res


def gumbel_muzero_program(torch):
    """Gumbel MuZero at the root (Danihelka et al., mctx written in torch): Gumbel-top-k of the
    prior logits, sequential halving on g + logits + sigma(q), completed Q-values with the
    mixed value approximation, the improved policy softmax(logits + sigma(completed q)) and
    its KL to the network policy as the loss."""
    rng = np.random.default_rng(21)
    nn, F = torch.nn, torch.nn.functional
    B, Do, A, m = 3, 5, 8, 4
    net = nn.Sequential(nn.Linear(Do, 16), nn.ReLU(), nn.Linear(16, A + 1))
    q_net = nn.Sequential(nn.Linear(Do + A, 16), nn.Tanh(), nn.Linear(16, 1))
    fill_(torch, net, rng, 0.5)
    fill_(torch, q_net, rng, 0.5)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    c_visit, c_scale = 50.0, 0.1
    res = {"loss": [], "chosen": [], "visits": []}
    for it in range(3):
        obs = normal(torch, rng, B, Do)
        out = net(obs)
        logits, value = out[:, :A], out[:, A]
        gumbel = torch.from_numpy(rng.gumbel(size=(B, A)).astype(np.float32))
        with torch.no_grad():
            all_q = q_net(torch.cat([obs[:, None].expand(-1, A, -1),
                                     torch.eye(A).expand(B, -1, -1)], -1)).squeeze(-1)
            visits = torch.zeros(B, A)
            qsum = torch.zeros(B, A)
            cand = torch.topk(gumbel + logits, m, dim=-1).indices
            k = m
            phases = int(math.ceil(math.log2(m)))
            while k > 1:
                per = max(1, 16 // (phases * k))
                for _ in range(per):
                    noise = torch.from_numpy(rng.normal(0, 0.05, (B, k)).astype(np.float32))
                    qsum.scatter_add_(1, cand, all_q.gather(1, cand) + noise)
                    visits.scatter_add_(1, cand, torch.ones_like(cand, dtype=torch.float32))
                q = torch.where(visits > 0, qsum / visits.clamp(min=1), torch.zeros_like(qsum))
                max_n = visits.max(-1, keepdim=True).values
                sigma = (c_visit + max_n) * c_scale * q
                score = (gumbel + logits + sigma).gather(1, cand)
                k = k // 2
                cand = cand.gather(1, score.topk(k, dim=-1).indices)
            chosen = cand[:, 0]
            probs = F.softmax(logits, -1)
            sum_probs = torch.sum(torch.where(visits > 0, probs, 0.0), -1, keepdim=True)
            weighted_q = torch.sum(torch.where(visits > 0, probs * q, 0.0), -1, keepdim=True)
            total_n = visits.sum(-1, keepdim=True)
            v_mix = (value[:, None] + total_n / sum_probs.clamp(min=torch.finfo(torch.float32)
                                                                   .tiny) * weighted_q) / (
                1 + total_n)
            completed_q = torch.where(visits > 0, q, v_mix)
            # mctx rescales completed values to [0, 1] by their min and max
            lo = completed_q.min(-1, keepdim=True).values
            hi = completed_q.max(-1, keepdim=True).values
            completed_q = (completed_q - lo) / torch.clamp(hi - lo, min=1e-8)
            max_n = visits.max(-1, keepdim=True).values
            improved = F.softmax(logits + (c_visit + max_n) * c_scale * completed_q, -1)
        loss = F.kl_div(F.log_softmax(logits, -1), improved, reduction="batchmean")
        target_value = (all_q.gather(1, chosen[:, None]).squeeze(1)).detach()
        loss = loss + 0.25 * F.mse_loss(value, target_value)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["chosen"].append(chosen)
        res["visits"].append(visits)
        res["improved"] = improved
    res["w"] = net[2].weight
    return res


def diayn_apt_program(torch):
    """DIAYN (a skill discriminator q(z|s'), pseudo-reward log q(z|s') - log p(z), a
    skill-conditioned policy), URLB's APT particle-based entropy reward (pairwise norms by
    broadcasting, k smallest by topk, a torch RMS of the kNN distances, log(c + r)), NGU
    episodic novelty with cdist and an inverse kernel, and SimHash counts."""
    rng = np.random.default_rng(22)
    nn, F = torch.nn, torch.nn.functional
    B, Do, n_skills, A, Fd = 8, 5, 4, 2, 6
    disc = nn.Sequential(nn.Linear(Do, 16), nn.ReLU(), nn.Linear(16, n_skills))
    policy = nn.Sequential(nn.Linear(Do + n_skills, 16), nn.ReLU(), nn.Linear(16, A))
    fill_(torch, disc, rng, 0.5)
    fill_(torch, policy, rng, 0.5)
    d_opt = torch.optim.Adam(disc.parameters(), lr=1e-3)
    p_opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
    p_z = np.full(n_skills, 1.0 / n_skills)
    res = {"diayn_r": [], "disc_loss": [], "acc": []}
    for it in range(2):
        obs, next_obs = normal(torch, rng, B, Do), normal(torch, rng, B, Do)
        skill = torch.from_numpy(rng.integers(0, n_skills, B))
        z = F.one_hot(skill, n_skills).float()
        with torch.no_grad():
            logits = disc(next_obs)
            logq_z_ns = F.log_softmax(logits, -1)
            r = logq_z_ns.gather(-1, skill.unsqueeze(-1)).detach() - math.log(p_z[0] + 1e-6)
        res["diayn_r"].append(r)
        logits = disc(next_obs)
        disc_loss = F.cross_entropy(logits, skill)
        d_opt.zero_grad()
        disc_loss.backward()
        d_opt.step()
        act = torch.tanh(policy(torch.cat([obs, z], dim=1)))
        pol_loss = -(r.squeeze(-1) * act.pow(2).sum(-1)).mean()
        p_opt.zero_grad()
        pol_loss.backward()
        p_opt.step()
        res["disc_loss"].append(disc_loss.item())
        res["acc"].append((logits.argmax(-1) == skill).float().mean().item())
    res["disc_w"], res["pol_w"] = disc[2].weight, policy[0].weight

    class RMS:
        def __init__(self, epsilon=1e-4, shape=(1,)):
            self.M = torch.zeros(shape)
            self.S = torch.ones(shape)
            self.n = epsilon

        def __call__(self, x):
            bs = x.size(0)
            delta = torch.mean(x, dim=0) - self.M
            new_M = self.M + delta * bs / (self.n + bs)
            new_S = (self.S * self.n + torch.var(x, dim=0) * bs
                     + (delta ** 2) * self.n * bs / (self.n + bs)) / (self.n + bs)
            self.M, self.S, self.n = new_M, new_S, self.n + bs
            return self.M, self.S

    rms = RMS()
    proj = nn.Linear(Do, Fd)
    fill_(torch, proj, rng, 0.5)

    def compute_apt_reward(source, target, knn_k=3, knn_clip=0.0005, knn_avg=True):
        b1, b2 = source.size(0), target.size(0)
        sim_matrix = torch.norm(source[:, None, :].view(b1, 1, -1)
                                - target[None, :, :].view(1, b2, -1), dim=-1, p=2)
        reward, _ = sim_matrix.topk(knn_k, dim=1, largest=False, sorted=True)
        if not knn_avg:
            reward = reward[:, -1].reshape(-1, 1)
            moving_mean, _ = rms(reward)
            reward = reward / moving_mean
            reward = torch.max(reward - knn_clip, torch.zeros_like(reward))
        else:
            reward = reward.reshape(-1, 1)
            moving_mean, _ = rms(reward)
            reward = reward / moving_mean
            reward = torch.max(reward - knn_clip, torch.zeros_like(reward).to(reward.device))
            reward = reward.reshape((b1, knn_k))
            reward = reward.mean(dim=1, keepdim=True)
        return torch.log(1.0 + reward)

    memory = []
    for it in range(3):
        obs = normal(torch, rng, B, Do)
        with torch.no_grad():
            feat = proj(obs)
            res.setdefault("apt", []).append(compute_apt_reward(feat, feat, knn_avg=it != 1))
            # NGU episodic novelty against the episode's memory
            memory.append(feat)
            mem = torch.cat(memory, 0)
            d2 = torch.cdist(feat, mem).pow(2)
            knn, _ = torch.topk(d2, k=4, dim=1, largest=False)
            knn = knn / (knn.mean() + 1e-8)
            knn = torch.clamp(knn - 0.008, min=0)
            kernel = 1e-3 / (knn + 1e-3)
            s = torch.sqrt(kernel.sum(1)) + 1e-3
            res.setdefault("ngu", []).append(torch.where(s > 8, torch.zeros_like(s), 1 / s))
    res["rms"] = [rms.M, rms.S, rms.n]

    proj_bits = torch.from_numpy(rng.standard_normal((8, Do)).astype(np.float32))
    counts = {}
    obs = normal(torch, rng, 6, Do)
    obs = torch.cat([obs, obs[:3], obs[:1]])
    bits = (torch.sign(obs @ proj_bits.T) > 0).long()
    keys = (bits * (2 ** torch.arange(8))).sum(-1)
    uniq, inv, cnt = torch.unique(keys, return_inverse=True, return_counts=True)
    for k, c in zip(uniq.tolist(), cnt.tolist()):
        counts[k] = counts.get(k, 0) + c
    res["hash"] = [keys, inv, cnt, 1 / torch.sqrt(cnt[inv].float())]
    res["counts"] = sorted(counts.values())
    return res


PROGRAMS = [tdmpc2_program, gumbel_muzero_program, diayn_apt_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
