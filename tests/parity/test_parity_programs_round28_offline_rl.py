"""Offline RL written as its reference repositories write it in torch, run once with `torch` bound
to ember and once to PyTorch from the same NumPy weights and data: the Decision Transformer
(kzl's: return-to-go, state and action tokens interleaved by stack/permute/reshape, timestep
embeddings added to each, a causal transformer with a key-padding mask, tanh action head,
MSE over the unpadded positions only, AdamW + LambdaLR warm-up + clip_grad_norm_; get_action
left-pads the context with zeros), IQL (gwthomas's: expectile regression of V on the target Q,
twin-Q TD targets, advantage-weighted regression with a MultivariateNormal(scale_tril=diag)
policy, clamp of exp(beta * adv), Polyak update by _foreach ops, CosineAnnealingLR) and CQL
(young-geng's: a TanhTransform policy with cached inverse, sampled random/current/next actions
from ``extend_and_repeat``, logsumexp over them with importance-sampling densities, clipped
conservative gap, a Lagrange alpha-prime) and TD3+BC with BCQ's action VAE (sfujim's)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _discount_cumsum(torch, rewards, gamma):
    """Return-to-go along the last dim, as a reversed loop of in-place writes."""
    rtg = torch.zeros_like(rewards)
    rtg[..., -1] = rewards[..., -1]
    for t in reversed(range(rewards.shape[-1] - 1)):
        rtg[..., t] = rewards[..., t] + gamma * rtg[..., t + 1]
    return rtg


def decision_transformer_program(torch):
    """A Decision Transformer trained a few steps on padded trajectories, then asked for an
    action from a short context as ``get_action`` does (left padding, an attention mask of
    zeros then ones, the last predicted action). That eval forward under no_grad takes PyTorch's
    encoder-layer fast path, which reads the float padding mask as a boolean one, so a fully
    padded query row comes out NaN and spreads through the next layer's values."""
    nn = torch.nn
    rng = np.random.default_rng(2831)
    B, K, S, A, hdim, max_ep_len = 3, 5, 4, 2, 16, 20

    class DecisionTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_timestep = nn.Embedding(max_ep_len, hdim)
            self.embed_return = nn.Linear(1, hdim)
            self.embed_state = nn.Linear(S, hdim)
            self.embed_action = nn.Linear(A, hdim)
            self.embed_ln = nn.LayerNorm(hdim)
            layer = nn.TransformerEncoderLayer(hdim, 2, 32, dropout=0.0, activation="gelu",
                                               batch_first=True, norm_first=True)
            self.transformer = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.predict_state = nn.Linear(hdim, S)
            self.predict_action = nn.Sequential(nn.Linear(hdim, A), nn.Tanh())
            self.predict_return = nn.Linear(hdim, 1)

        def forward(self, states, actions, returns_to_go, timesteps, attention_mask=None):
            batch_size, seq_length = states.shape[0], states.shape[1]
            if attention_mask is None:
                attention_mask = torch.ones((batch_size, seq_length), dtype=torch.long)
            time_embeddings = self.embed_timestep(timesteps)
            state_embeddings = self.embed_state(states) + time_embeddings
            action_embeddings = self.embed_action(actions) + time_embeddings
            returns_embeddings = self.embed_return(returns_to_go) + time_embeddings
            stacked_inputs = torch.stack(
                (returns_embeddings, state_embeddings, action_embeddings), dim=1
            ).permute(0, 2, 1, 3).reshape(batch_size, 3 * seq_length, hdim)
            stacked_inputs = self.embed_ln(stacked_inputs)
            stacked_attention_mask = torch.stack(
                (attention_mask, attention_mask, attention_mask), dim=1
            ).permute(0, 2, 1).reshape(batch_size, 3 * seq_length)
            causal = nn.Transformer.generate_square_subsequent_mask(3 * seq_length)
            # GPT-2's additive padding mask: a left-padded query still sees finite logits
            padding = (1.0 - stacked_attention_mask.float()) * -10000.0
            x = self.transformer(stacked_inputs, mask=causal, src_key_padding_mask=padding,
                                 is_causal=True)
            x = x.reshape(batch_size, seq_length, 3, hdim).permute(0, 2, 1, 3)
            return_preds = self.predict_return(x[:, 2])
            state_preds = self.predict_state(x[:, 2])
            action_preds = self.predict_action(x[:, 1])
            return state_preds, action_preds, return_preds

        def get_action(self, states, actions, returns_to_go, timesteps):
            states = states.reshape(1, -1, S)[:, -K:]
            actions = actions.reshape(1, -1, A)[:, -K:]
            returns_to_go = returns_to_go.reshape(1, -1, 1)[:, -K:]
            timesteps = timesteps.reshape(1, -1)[:, -K:]
            n = states.shape[1]
            attention_mask = torch.cat([torch.zeros(K - n), torch.ones(n)])
            attention_mask = attention_mask.to(dtype=torch.long).reshape(1, -1)
            states = torch.cat([torch.zeros((1, K - n, S)), states], dim=1).to(dtype=torch.float32)
            actions = torch.cat([torch.ones((1, K - n, A)) * -10., actions],
                                dim=1).to(dtype=torch.float32)
            returns_to_go = torch.cat([torch.zeros((1, K - n, 1)), returns_to_go],
                                      dim=1).to(dtype=torch.float32)
            timesteps = torch.cat([torch.zeros((1, K - n), dtype=torch.long), timesteps], dim=1)
            _, action_preds, _ = self.forward(states, actions, returns_to_go, timesteps,
                                              attention_mask=attention_mask)
            return action_preds[0, -1]

    model = DecisionTransformer()
    fill_(torch, model, rng, 0.2)
    states = normal(torch, rng, B, K, S)
    actions = torch.tanh(normal(torch, rng, B, K, A))
    rewards = normal(torch, rng, B, K)
    rtg = _discount_cumsum(torch, rewards, 1.0).unsqueeze(-1) / 10.0
    timesteps = torch.from_numpy(rng.integers(0, max_ep_len - K, (B, 1))) + torch.arange(K)
    mask = torch.ones(B, K, dtype=torch.long)
    mask[0, :2] = 0
    mask[2, :1] = 0
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    warmup = 2
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda steps: min((steps + 1) / warmup, 1))
    res = {"rtg": rtg, "losses": [], "lrs": []}
    for _ in range(3):
        model.train()
        action_target = torch.clone(actions)
        _, action_preds, _ = model(states, actions, rtg, timesteps, attention_mask=mask)
        act_dim = action_preds.shape[2]
        action_preds = action_preds.reshape(-1, act_dim)[mask.reshape(-1) > 0]
        action_target = action_target.reshape(-1, act_dim)[mask.reshape(-1) > 0]
        loss = torch.mean((action_preds - action_target) ** 2)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
        res["lrs"].append(sched.get_last_lr()[0])
    res["n_kept"] = [int(action_preds.shape[0])]
    res["params"] = list(model.parameters())
    model.eval()
    with torch.no_grad():
        a = model.get_action(states[1, :3], actions[1, :3], rtg[1, :3, 0], timesteps[1, :3])
        a_full = model.get_action(states[1], actions[1], rtg[1, :, 0], timesteps[1])
    res["action"], res["action_full"] = a, a_full
    res["action_is_nan"] = [bool(a.isnan().all()), bool(a_full.isnan().any())]
    model.train()
    a_train = model.get_action(states[1, :3], actions[1, :3], rtg[1, :3, 0], timesteps[1, :3])
    res["action_train_mode"] = a_train
    return res


def _mlp(torch, dims, out_act=None):
    """gwthomas's mlp: Linear-ReLU stacks, an optional final activation."""
    nn = torch.nn
    layers = []
    for i in range(len(dims) - 2):
        layers += [nn.Linear(dims[i], dims[i + 1]), nn.ReLU()]
    layers.append(nn.Linear(dims[-2], dims[-1]))
    if out_act is not None:
        layers.append(out_act)
    return nn.Sequential(*layers)


def iql_program(torch):
    """IQL's update: V by expectile regression against the frozen target twin-Q minimum, the
    twin Q's towards r + gamma (1 - done) V(s'), the target Q's Polyak-averaged with
    torch._foreach_mul_/_foreach_add_, the policy by advantage-weighted log-likelihood of a
    MultivariateNormal(mean, scale_tril=diag(exp(log_std))); cosine-annealed policy lr."""
    nn = torch.nn
    rng = np.random.default_rng(2832)
    B, S, A, tau, beta, gamma, alpha = 8, 3, 2, 0.7, 3.0, 0.99, 0.005

    class TwinQ(nn.Module):
        def __init__(self):
            super().__init__()
            self.q1, self.q2 = _mlp(torch, [S + A, 16, 1]), _mlp(torch, [S + A, 16, 1])

        def both(self, state, action):
            sa = torch.cat([state, action], 1)
            return self.q1(sa).squeeze(-1), self.q2(sa).squeeze(-1)

        def forward(self, state, action):
            return torch.min(*self.both(state, action))

    class GaussianPolicy(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = _mlp(torch, [S, 16, A], out_act=nn.Tanh())
            self.log_std = nn.Parameter(torch.zeros(A, dtype=torch.float32))

        def forward(self, obs):
            mean = self.net(obs)
            std = torch.exp(self.log_std.clamp(-5.0, 2.0))
            scale_tril = torch.diag(std)
            return torch.distributions.MultivariateNormal(mean, scale_tril=scale_tril)

    qf, vf, policy = TwinQ(), _mlp(torch, [S, 16, 1]), GaussianPolicy()
    fill_(torch, nn.ModuleList([qf, vf, policy]), rng, 0.3)
    q_target = TwinQ().requires_grad_(False)
    q_target.load_state_dict(qf.state_dict())
    v_opt = torch.optim.Adam(vf.parameters(), lr=3e-3)
    q_opt = torch.optim.Adam(qf.parameters(), lr=3e-3)
    p_opt = torch.optim.Adam(policy.parameters(), lr=3e-3)
    p_sched = torch.optim.lr_scheduler.CosineAnnealingLR(p_opt, 4)
    obs, next_obs = normal(torch, rng, B, S), normal(torch, rng, B, S)
    actions = torch.tanh(normal(torch, rng, B, A)) * 0.9
    rewards = normal(torch, rng, B)
    terminals = torch.from_numpy(rng.random(B) < 0.25)

    def asymmetric_l2_loss(u, tau):
        return torch.mean(torch.abs(tau - (u < 0).float()) * u ** 2)

    res = {"v": [], "q": [], "pi": [], "lr": []}
    for _ in range(3):
        with torch.no_grad():
            target_q = q_target(obs, actions)
            next_v = vf(next_obs).squeeze(-1)
        v = vf(obs).squeeze(-1)
        adv = target_q - v
        v_loss = asymmetric_l2_loss(adv, tau)
        v_opt.zero_grad(set_to_none=True)
        v_loss.backward()
        v_opt.step()
        targets = rewards + (1. - terminals.float()) * gamma * next_v.detach()
        qs = qf.both(obs, actions)
        q_loss = sum(nn.functional.mse_loss(q, targets) for q in qs) / len(qs)
        q_opt.zero_grad(set_to_none=True)
        q_loss.backward()
        q_opt.step()
        with torch.no_grad():
            tgt, src = list(q_target.parameters()), list(qf.parameters())
            torch._foreach_mul_(tgt, 1. - alpha)
            torch._foreach_add_(tgt, src, alpha=alpha)
        exp_adv = torch.exp(beta * adv.detach()).clamp(max=100.0)
        dist = policy(obs)
        bc_losses = -dist.log_prob(actions)
        policy_loss = torch.mean(exp_adv * bc_losses)
        p_opt.zero_grad(set_to_none=True)
        policy_loss.backward()
        p_opt.step()
        p_sched.step()
        res["v"].append(v_loss.item())
        res["q"].append(q_loss.item())
        res["pi"].append(policy_loss.item())
        res["lr"].append(p_sched.get_last_lr()[0])
    res["params"] = list(qf.parameters()) + list(vf.parameters()) + list(policy.parameters())
    res["target"] = list(q_target.parameters())
    with torch.no_grad():
        dist = policy(obs)
        res["mean"], res["entropy"] = dist.mean, dist.entropy()
        res["cov"] = dist.covariance_matrix
        res["det_act"] = dist.mode
    res["target_requires_grad"] = [p.requires_grad for p in q_target.parameters()][:2]
    return res


def cql_program(torch):
    """CQL(H) on a SAC backbone: a tanh-Gaussian policy (TransformedDistribution with
    TanhTransform(cache_size=1), actions from NumPy noise so the cached inverse is used),
    random actions uniform in [-1, 1] given from NumPy, current/next policy actions for
    ``extend_and_repeat``'d observations, Q's of all of them concatenated with the data Q,
    logsumexp / temperature with importance-sampling corrections, the clipped OOD gap weighted
    by a Lagrange alpha-prime trained towards a target gap, and SAC's alpha; soft target
    update by lerp_."""
    nn = torch.nn
    D = torch.distributions
    rng = np.random.default_rng(2833)
    B, S, A, n_act, gamma, temp, target_gap = 6, 3, 2, 4, 0.99, 1.0, 1.0

    def extend_and_repeat(tensor, dim, repeat):
        ones_shape = [1 for _ in range(tensor.ndim + 1)]
        ones_shape[dim] = repeat
        return torch.unsqueeze(tensor, dim) * tensor.new_ones(ones_shape)

    class TanhGaussianPolicy(nn.Module):
        def __init__(self):
            super().__init__()
            self.base = _mlp(torch, [S, 16, 2 * A])
            self.log_std_multiplier = nn.Parameter(torch.tensor(1.0))
            self.log_std_offset = nn.Parameter(torch.tensor(-1.0))

        def forward(self, observations, noise):
            mean, log_std = torch.split(self.base(observations), A, dim=-1)
            log_std = self.log_std_multiplier * log_std + self.log_std_offset
            log_std = torch.clamp(log_std, -20.0, 2.0)
            std = torch.exp(log_std)
            tanh = D.transforms.TanhTransform(cache_size=1)
            dist = D.TransformedDistribution(D.Normal(mean, std), tanh)
            action = tanh(mean + std * noise)
            return action, torch.sum(dist.log_prob(action), dim=-1)

    def fq(n):
        return _mlp(torch, [S + A, 16, 1])

    policy, qf1, qf2 = TanhGaussianPolicy(), fq(1), fq(2)
    fill_(torch, nn.ModuleList([policy, qf1, qf2]), rng, 0.3)
    tq1, tq2 = fq(1), fq(2)
    tq1.load_state_dict(qf1.state_dict())
    tq2.load_state_dict(qf2.state_dict())
    log_alpha = nn.Parameter(torch.zeros(()))
    log_alpha_prime = nn.Parameter(torch.tensor(0.5))
    p_opt = torch.optim.Adam(list(policy.parameters()), lr=1e-3)
    q_opt = torch.optim.Adam(list(qf1.parameters()) + list(qf2.parameters()), lr=3e-3)
    a_opt = torch.optim.Adam([log_alpha], lr=1e-3)
    ap_opt = torch.optim.Adam([log_alpha_prime], lr=1e-2)
    obs, next_obs = normal(torch, rng, B, S), normal(torch, rng, B, S)
    actions = torch.tanh(normal(torch, rng, B, A)) * 0.95
    rewards = normal(torch, rng, B)
    dones = torch.from_numpy((rng.random(B) < 0.2).astype(np.float32))

    def q(net, o, a):
        if o.ndim == 3:
            o = o.reshape(-1, S)
            a = a.reshape(-1, A)
            return net(torch.cat([o, a], -1)).reshape(B, n_act)
        return net(torch.cat([o, a], -1)).squeeze(-1)

    res = {k: [] for k in ("policy", "q", "alpha", "alpha_prime", "ood", "std")}
    for _ in range(3):
        new_actions, log_pi = policy(obs, normal(torch, rng, B, A))
        alpha_loss = -(log_alpha * (log_pi - A).detach()).mean()
        alpha = log_alpha.exp()
        q_new = torch.min(q(qf1, obs, new_actions), q(qf2, obs, new_actions))
        policy_loss = (alpha * log_pi - q_new).mean()
        q1_pred, q2_pred = q(qf1, obs, actions), q(qf2, obs, actions)
        next_actions, next_log_pi = policy(next_obs, normal(torch, rng, B, A))
        target_q = torch.min(q(tq1, next_obs, next_actions), q(tq2, next_obs, next_actions))
        td_target = (rewards + (1. - dones) * gamma * target_q).detach()
        qf1_loss = nn.functional.mse_loss(q1_pred, td_target)
        qf2_loss = nn.functional.mse_loss(q2_pred, td_target)

        rand = torch.from_numpy(rng.uniform(-1, 1, (B, n_act, A)).astype(np.float32))
        obs_rep = extend_and_repeat(obs, 1, n_act)
        next_rep = extend_and_repeat(next_obs, 1, n_act)
        cur_a, cur_lp = policy(obs_rep, normal(torch, rng, B, n_act, A))
        nxt_a, nxt_lp = policy(next_rep, normal(torch, rng, B, n_act, A))
        cur_a, cur_lp = cur_a.detach(), cur_lp.detach()
        nxt_a, nxt_lp = nxt_a.detach(), nxt_lp.detach()
        random_density = np.log(0.5 ** A)
        gaps = []
        for qnet, q_pred in ((qf1, q1_pred), (qf2, q2_pred)):
            q_rand, q_cur = q(qnet, obs_rep, rand), q(qnet, obs_rep, cur_a)
            q_next = q(qnet, obs_rep, nxt_a)
            cat = torch.cat([q_rand, torch.unsqueeze(q_pred, 1), q_next, q_cur], dim=1)
            res["std"].append(torch.std(cat, dim=1))
            cat = torch.cat([q_rand - random_density, q_next - nxt_lp, q_cur - cur_lp], dim=1)
            ood = torch.logsumexp(cat / temp, dim=1) * temp
            gaps.append(torch.clamp(ood - q_pred, -np.inf, np.inf).mean())
            res["ood"].append(ood)
        alpha_prime = torch.clamp(torch.exp(log_alpha_prime), min=0.0, max=1000000.0)
        cql_min1 = alpha_prime * 5.0 * (gaps[0] - target_gap)
        cql_min2 = alpha_prime * 5.0 * (gaps[1] - target_gap)
        alpha_prime_loss = (-cql_min1 - cql_min2) * 0.5
        ap_opt.zero_grad()
        alpha_prime_loss.backward(retain_graph=True)
        ap_opt.step()
        q_loss = qf1_loss + qf2_loss + cql_min1 + cql_min2
        a_opt.zero_grad()
        alpha_loss.backward()
        a_opt.step()
        p_opt.zero_grad()
        policy_loss.backward(inputs=list(policy.parameters()))
        p_opt.step()
        q_opt.zero_grad()
        q_loss.backward()
        q_opt.step()
        with torch.no_grad():
            for tnet, net in ((tq1, qf1), (tq2, qf2)):
                for tp, p in zip(tnet.parameters(), net.parameters()):
                    tp.data.lerp_(p.data, 5e-3)
        res["policy"].append(policy_loss.item())
        res["q"].append(q_loss.item())
        res["alpha"].append(alpha_loss.item())
        res["alpha_prime"].append(alpha_prime_loss.item())
    res["params"] = (list(policy.parameters()) + list(qf1.parameters())
                     + list(qf2.parameters()) + [log_alpha, log_alpha_prime])
    res["targets"] = list(tq1.parameters()) + list(tq2.parameters())
    res["log_pi"] = log_pi
    res["log_pi_rep_shape"] = list(cur_lp.shape)
    return res


def td3_nets(torch, S, A, max_action):
    """TD3's actor and twin critic as Fujimoto's reference code writes them (state size S,
    action size A; shared with round 29's TD3 program)."""
    nn, F = torch.nn, torch.nn.functional

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2, self.l3 = nn.Linear(S, 16), nn.Linear(16, 16), nn.Linear(16, A)

        def forward(self, state):
            a = F.relu(self.l1(state))
            a = F.relu(self.l2(a))
            return max_action * torch.tanh(self.l3(a))

    class Critic(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2, self.l3 = nn.Linear(S + A, 16), nn.Linear(16, 16), nn.Linear(16, 1)
            self.l4, self.l5, self.l6 = nn.Linear(S + A, 16), nn.Linear(16, 16), nn.Linear(16, 1)

        def forward(self, state, action):
            sa = torch.cat([state, action], 1)
            q1 = self.l3(F.relu(self.l2(F.relu(self.l1(sa)))))
            q2 = self.l6(F.relu(self.l5(F.relu(self.l4(sa)))))
            return q1, q2

        def Q1(self, state, action):
            sa = torch.cat([state, action], 1)
            return self.l3(F.relu(self.l2(F.relu(self.l1(sa)))))

    return Actor, Critic


def td3_bc_bcq_program(torch):
    """TD3+BC (sfujim's: target policy smoothing with clipped NumPy noise, twin critics, delayed
    actor updates with lambda = alpha / |Q|.mean().detach(), Polyak updates by ``mul_``/``add_``
    over zipped parameters, observation normalisation by mean/std + 1e-3) and BCQ's generative
    model (a VAE over actions: log_std clamped to (-4, 15), latent clamped to [-0.5, 0.5] at
    decode, KL of 0.5 * recon weighting) on a fixed batch."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2834)
    B, S, A, L, max_action = 8, 3, 2, 4, 1.0
    gamma, tau, policy_noise, noise_clip, alpha = 0.99, 0.005, 0.2, 0.5, 2.5

    Actor, Critic = td3_nets(torch, S, A, max_action)

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.e1, self.e2 = nn.Linear(S + A, 16), nn.Linear(16, 16)
            self.mean, self.log_std = nn.Linear(16, L), nn.Linear(16, L)
            self.d1, self.d2, self.d3 = nn.Linear(S + L, 16), nn.Linear(16, 16), nn.Linear(16, A)

        def forward(self, state, action, eps):
            z = F.relu(self.e1(torch.cat([state, action], 1)))
            z = F.relu(self.e2(z))
            mean = self.mean(z)
            log_std = self.log_std(z).clamp(-4, 15)
            std = torch.exp(log_std)
            z = mean + std * eps
            return self.decode(state, z), mean, std

        def decode(self, state, z):
            z = z.clamp(-0.5, 0.5)
            a = F.relu(self.d1(torch.cat([state, z], 1)))
            a = F.relu(self.d2(a))
            return max_action * torch.tanh(self.d3(a))

    actor, critic, vae = Actor(), Critic(), VAE()
    fill_(torch, nn.ModuleList([actor, critic, vae]), rng, 0.3)
    actor_target, critic_target = copy_module(torch, actor), copy_module(torch, critic)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=3e-4)
    critic_opt = torch.optim.Adam(critic.parameters(), lr=3e-4)
    vae_opt = torch.optim.Adam(vae.parameters())
    raw_states = normal(torch, rng, B, S) * 2 + 1
    mean, std = raw_states.mean(0, keepdims=True), raw_states.std(0, keepdims=True) + 1e-3
    state = (raw_states - mean) / std
    next_state = (normal(torch, rng, B, S) * 2 + 1 - mean) / std
    action = torch.tanh(normal(torch, rng, B, A))
    reward = normal(torch, rng, B, 1)
    not_done = torch.from_numpy((rng.random((B, 1)) > 0.2).astype(np.float32))
    res = {"critic": [], "actor": [], "lmbda": [], "vae": []}
    for it in range(1, 5):
        with torch.no_grad():
            noise = (torch.from_numpy(rng.standard_normal((B, A)).astype(np.float32))
                     * policy_noise).clamp(-noise_clip, noise_clip)
            next_action = (actor_target(next_state) + noise).clamp(-max_action, max_action)
            target_Q1, target_Q2 = critic_target(next_state, next_action)
            target_Q = torch.min(target_Q1, target_Q2)
            target_Q = reward + not_done * gamma * target_Q
        current_Q1, current_Q2 = critic(state, action)
        critic_loss = F.mse_loss(current_Q1, target_Q) + F.mse_loss(current_Q2, target_Q)
        critic_opt.zero_grad()
        critic_loss.backward()
        critic_opt.step()
        res["critic"].append(critic_loss.item())
        if it % 2 == 0:
            pi = actor(state)
            Q = critic.Q1(state, pi)
            lmbda = alpha / Q.abs().mean().detach()
            actor_loss = -lmbda * Q.mean() + F.mse_loss(pi, action)
            actor_opt.zero_grad()
            actor_loss.backward()
            actor_opt.step()
            for param, target_param in zip(critic.parameters(), critic_target.parameters()):
                target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)
            for param, target_param in zip(actor.parameters(), actor_target.parameters()):
                target_param.data.mul_(1 - tau).add_(param.data, alpha=tau)
            res["actor"].append(actor_loss.item())
            res["lmbda"].append(float(lmbda))
        eps = torch.from_numpy(rng.standard_normal((B, L)).astype(np.float32))
        recon, m, s = vae(state, action, eps)
        recon_loss = F.mse_loss(recon, action)
        kl = -0.5 * (1 + torch.log(s.pow(2)) - m.pow(2) - s.pow(2)).mean()
        vae_loss = recon_loss + 0.5 * kl
        vae_opt.zero_grad()
        vae_loss.backward()
        vae_opt.step()
        res["vae"].append(vae_loss.item())
    res["params"] = (list(actor.parameters()) + list(critic.parameters())
                     + list(vae.parameters()))
    res["targets"] = list(actor_target.parameters()) + list(critic_target.parameters())
    with torch.no_grad():
        z = torch.from_numpy(rng.standard_normal((B, L)).astype(np.float32)).clamp(-0.5, 0.5)
        res["decoded"] = vae.decode(state, z)
        res["target_grad_flags"] = [p.requires_grad for p in actor_target.parameters()]
    return res


def copy_module(torch, module):
    """``copy.deepcopy(module)``, as the TD3 code makes its target networks."""
    import copy
    return copy.deepcopy(module)


PROGRAMS = [decision_transformer_program, iql_program, cql_program, td3_bc_bcq_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 attention / matmul accumulation order over a few Adam steps
        "decision_transformer_program": (1e-4, 1e-5),
        "iql_program": (1e-4, 1e-5),
        "cql_program": (1e-4, 1e-5),
        "td3_bc_bcq_program": (1e-4, 1e-5),
    })
