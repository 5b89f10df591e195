"""Continuous-control reinforcement learning programs, written as CleanRL and SpinningUp-style
repositories write them, run once with `torch` bound to ember and once to PyTorch from the same
NumPy weights, data and noise: SAC (tanh-squashed Normal policy three ways, twin Q networks,
polyak targets, automatic entropy tuning on a float64 temperature), TD3 (target policy
smoothing, delayed actor updates through a frozen critic, an EMA target model, save and resume)
and A2C with GAE over a vectorised rollout (MultiDiscrete actions with invalid-action masking,
centered RMSprop, Huber value loss). The model-based and replay programs are in
test_parity_programs_round22_rl_model_based.py.

Sampling noise comes from NumPy, so both libraries see the same draws; where a program calls a
library sampler (rsample, randn_like, multinomial) only what is independent of the stream (shape,
dtype, bounds, straight-through gradients, deterministic draws) is compared."""

import copy
import io
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal
from tests.parity.test_parity_programs_round9 import assert_same_results

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def _uniform(lib, rng, *shape):
    """A float32 tensor of U[0, 1) values drawn from `rng`."""
    return lib.from_numpy(rng.random(shape).astype(np.float32))


def sac_program(torch):
    """SAC: tanh-squashed Normal actor, twin Qs, polyak targets, learned temperature."""
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    rng = np.random.default_rng(2201)
    res = {}
    obs_dim, act_dim, batch = 5, 2, 16
    log_std_min, log_std_max = -5.0, 2.0

    class SoftQNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(obs_dim + act_dim, 32)
            self.fc2 = nn.Linear(32, 32)
            self.fc3 = nn.Linear(32, 1)

        def forward(self, x, a):
            x = torch.cat([x, a], 1)
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            return self.fc3(x)

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(obs_dim, 32)
            self.fc2 = nn.Linear(32, 32)
            self.fc_mean = nn.Linear(32, act_dim)
            self.fc_logstd = nn.Linear(32, act_dim)
            self.register_buffer("action_scale", torch.tensor([2.0, 0.5], dtype=torch.float32))
            self.register_buffer("action_bias", torch.tensor([0.0, 0.5], dtype=torch.float32))

        def forward(self, x):
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            mean = self.fc_mean(x)
            log_std = torch.tanh(self.fc_logstd(x))
            log_std = log_std_min + 0.5 * (log_std_max - log_std_min) * (log_std + 1)
            return mean, log_std

        def get_action(self, x, eps):
            mean, log_std = self(x)
            std = log_std.exp()
            normal_ = D.Normal(mean, std)
            x_t = mean + std * eps  # rsample with the program's own noise
            y_t = torch.tanh(x_t)
            action = y_t * self.action_scale + self.action_bias
            log_prob = normal_.log_prob(x_t)
            log_prob -= torch.log(self.action_scale * (1 - y_t.pow(2)) + 1e-6)
            log_prob = log_prob.sum(1, keepdim=True)
            mean = torch.tanh(mean) * self.action_scale + self.action_bias
            return action, log_prob, mean, x_t

    class TanhTransform(D.transforms.Transform):
        """pytorch_sac's own tanh bijector (a numerically stable atanh, cached)."""
        domain = D.constraints.real
        codomain = D.constraints.interval(-1.0, 1.0)
        bijective = True
        sign = +1

        def __init__(self, cache_size=1):
            super().__init__(cache_size=cache_size)

        @staticmethod
        def atanh(x):
            return 0.5 * (x.log1p() - (-x).log1p())

        def __eq__(self, other):
            return isinstance(other, TanhTransform)

        def _call(self, x):
            return x.tanh()

        def _inverse(self, y):
            return self.atanh(y)

        def log_abs_det_jacobian(self, x, y):
            return 2. * (math.log(2.) - x - F.softplus(-2. * x))

    class SquashedNormal(D.transformed_distribution.TransformedDistribution):
        def __init__(self, loc, scale):
            self.loc = loc
            self.scale = scale
            self.base_dist = D.Normal(loc, scale)
            super().__init__(self.base_dist, [TanhTransform()])

        @property
        def mean(self):
            mu = self.loc
            for tr in self.transforms:
                mu = tr(mu)
            return mu

    actor, qf1, qf2 = Actor(), SoftQNetwork(), SoftQNetwork()
    for m in (actor, qf1, qf2):
        fill_(torch, m, rng, 0.3)
    qf1_target, qf2_target = copy.deepcopy(qf1), copy.deepcopy(qf2)
    qf1_target.load_state_dict(qf1.state_dict())
    q_optimizer = torch.optim.Adam(list(qf1.parameters()) + list(qf2.parameters()), lr=3e-3)
    actor_optimizer = torch.optim.Adam(list(actor.parameters()), lr=1e-3)
    target_entropy = -torch.prod(torch.Tensor((act_dim,))).item()
    log_alpha = torch.tensor(np.log(1.0))  # a float64 leaf, as pytorch_sac makes it
    log_alpha.requires_grad = True
    alpha = log_alpha.exp().item()
    a_optimizer = torch.optim.Adam([log_alpha], lr=1e-2)
    gamma, tau = 0.99, 0.05

    for key in ("qf_loss", "actor_loss", "alpha", "alpha_loss", "tp_logp", "sp_logp",
                "squashed_logp", "squashed_mean"):
        res[key] = []
    for step in range(4):
        obs = normal(torch, rng, batch, obs_dim)
        actions = normal(torch, rng, batch, act_dim).clamp(-1, 1)
        rewards = normal(torch, rng, batch)
        next_obs = normal(torch, rng, batch, obs_dim)
        dones = torch.from_numpy((rng.random(batch) < 0.2).astype(np.float32))
        eps_next = normal(torch, rng, batch, act_dim)
        eps_pi = normal(torch, rng, batch, act_dim)

        with torch.no_grad():
            next_actions, next_log_pi, _, _ = actor.get_action(next_obs, eps_next)
            qf1_next = qf1_target(next_obs, next_actions)
            qf2_next = qf2_target(next_obs, next_actions)
            min_qf_next = torch.min(qf1_next, qf2_next) - alpha * next_log_pi
            next_q_value = rewards.flatten() + (1 - dones.flatten()) * gamma * min_qf_next.view(-1)
        qf1_a = qf1(obs, actions).view(-1)
        qf2_a = qf2(obs, actions).view(-1)
        qf_loss = F.mse_loss(qf1_a, next_q_value) + F.mse_loss(qf2_a, next_q_value)
        q_optimizer.zero_grad()
        qf_loss.backward()
        q_optimizer.step()
        res["qf_loss"].append(qf_loss.item())

        if step % 2 == 0:
            pi, log_pi, _, x_t = actor.get_action(obs, eps_pi)
        else:  # rlkit-style TanhNormal: the log-probability through the cached inverse
            mean, log_std = actor(obs)
            tanh = D.transforms.TanhTransform(cache_size=1)
            affine = D.transforms.AffineTransform(loc=actor.action_bias, scale=actor.action_scale)
            base = D.Independent(D.Normal(mean, log_std.exp()), 1)
            policy = D.TransformedDistribution(base, [tanh, affine])
            x_t = mean + log_std.exp() * eps_pi
            pi = affine(tanh(x_t))
            log_pi = policy.log_prob(pi).unsqueeze(-1)
        min_qf_pi = torch.min(qf1(obs, pi), qf2(obs, pi))
        actor_loss = ((alpha * log_pi) - min_qf_pi).mean()
        actor_optimizer.zero_grad()
        actor_loss.backward()
        res.setdefault("actor_grad", []).append(actor.fc_logstd.weight.grad.clone())
        actor_optimizer.step()
        res["actor_loss"].append(actor_loss.item())

        # the same log-probability two other ways: a TransformedDistribution whose cached
        # TanhTransform inverts its own output, and SpinningUp's softplus correction
        with torch.no_grad():
            mean, log_std = actor(obs)
            tanh = D.transforms.TanhTransform(cache_size=1)
            squashed = D.TransformedDistribution(D.Normal(mean, log_std.exp()), [tanh])
            u = mean + log_std.exp() * eps_pi
            y = tanh(u)
            res["tp_logp"].append(squashed.log_prob(y).sum(-1))
            sp = D.Normal(mean, log_std.exp()).log_prob(u).sum(axis=-1)
            sp -= (2 * (math.log(2) - u - F.softplus(-2 * u))).sum(axis=1)
            res["sp_logp"].append(sp)
            squashed = SquashedNormal(mean, log_std.exp())
            res["squashed_logp"].append(squashed.log_prob(squashed.transforms[0](u)).sum(-1))
            res["squashed_mean"].append(squashed.mean)

        with torch.no_grad():
            _, log_pi, _, _ = actor.get_action(obs, eps_pi)
        alpha_loss = (log_alpha.exp() * (-log_pi - target_entropy).detach()).mean()
        a_optimizer.zero_grad()
        alpha_loss.backward()
        res["alpha_dtypes"] = [_name(alpha_loss.dtype), _name(log_alpha.grad.dtype),
                               _name(log_alpha.dtype)]
        a_optimizer.step()
        alpha = log_alpha.exp().item()
        res["alpha"].append(alpha)
        res["alpha_loss"].append(alpha_loss.item())

        # polyak averaging, two idioms: CleanRL's data.copy_ and the _foreach / lerp_ form
        for param, target_param in zip(qf1.parameters(), qf1_target.parameters()):
            target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)
        with torch.no_grad():
            tgt, src = list(qf2_target.parameters()), list(qf2.parameters())
            if step % 2 == 0:
                torch._foreach_mul_(tgt, 1 - tau)
                torch._foreach_add_(tgt, src, alpha=tau)
            else:
                for t, s in zip(tgt, src):
                    t.lerp_(s, tau)

    res["x_t_grad_free"] = [x_t.requires_grad, log_alpha.is_leaf, log_alpha.grad is not None]
    res["target_requires_grad"] = [p.requires_grad for p in qf1_target.parameters()]
    res["qf1_target"] = torch.cat([p.flatten() for p in qf1_target.parameters()])
    res["qf2_target"] = torch.cat([p.flatten() for p in qf2_target.parameters()])
    res["actor"] = torch.cat([p.detach().flatten() for p in actor.parameters()])
    # the library's own reparameterised sampler: stream-dependent values, so only its
    # bounds, shape, dtype and gradient wiring are compared
    torch.manual_seed(0)
    mean, log_std = actor(obs)
    squashed = D.TransformedDistribution(D.Normal(mean, log_std.exp()),
                                         [D.transforms.TanhTransform(cache_size=1)])
    sample = squashed.rsample()
    logp = squashed.log_prob(sample)
    res["rsample_meta"] = [tuple(sample.shape) == (batch, act_dim), bool(sample.abs().max() < 1),
                           sample.requires_grad, _name(logp.dtype), sample.grad_fn is not None,
                           bool(torch.isfinite(logp).all())]
    res["batch_shape"] = [int(s) for s in squashed.batch_shape] + [len(squashed.event_shape)]
    return res


def td3_program(torch):
    """TD3: clipped double Q, target policy smoothing, delayed actor updates, frozen critic."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2202)
    res = {}
    obs_dim, act_dim, batch, max_action = 4, 2, 12, 1.5
    policy_noise, noise_clip, policy_freq = 0.2, 0.5, 2

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = nn.Linear(obs_dim, 24)
            self.l2 = nn.Linear(24, 24)
            self.l3 = nn.Linear(24, act_dim)

        def forward(self, state):
            a = F.relu(self.l1(state))
            a = F.relu(self.l2(a))
            return max_action * torch.tanh(self.l3(a))

    class Critic(nn.Module):
        def __init__(self):
            super().__init__()
            self.q1 = nn.Sequential(nn.Linear(obs_dim + act_dim, 24), nn.ReLU(),
                                    nn.Linear(24, 24), nn.ReLU(), nn.Linear(24, 1))
            self.q2 = nn.Sequential(nn.Linear(obs_dim + act_dim, 24), nn.ReLU(),
                                    nn.Linear(24, 24), nn.ReLU(), nn.Linear(24, 1))

        def forward(self, state, action):
            sa = torch.cat([state, action], 1)
            return self.q1(sa), self.q2(sa)

        def Q1(self, state, action):
            return self.q1(torch.cat([state, action], 1))

    actor, critic = Actor(), Critic()
    fill_(torch, actor, rng, 0.4)
    fill_(torch, critic, rng, 0.3)
    swa_utils = torch.optim.swa_utils
    actor_target = copy.deepcopy(actor)
    for p in actor_target.parameters():
        p.requires_grad = False
    actor_optimizer = torch.optim.Adam(actor.parameters(), lr=3e-3)
    critic_optimizer = torch.optim.Adam(critic.parameters(), lr=3e-3, amsgrad=True)
    discount, tau = 0.99, 0.1
    # the critic's target as an EMA model (polyak averaging with decay 1 - tau)
    critic_target = swa_utils.AveragedModel(
        critic, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(1 - tau))

    def select_action(state):
        state = torch.FloatTensor(state.reshape(1, -1))
        return actor(state).cpu().data.numpy().flatten()

    for key in ("critic_loss", "critic_norm", "actor_loss", "actor_norm", "noise_max"):
        res[key] = []
    for it in range(1, 6):
        state = normal(torch, rng, batch, obs_dim)
        action = (normal(torch, rng, batch, act_dim) * 0.5).clamp(-max_action, max_action)
        next_state = normal(torch, rng, batch, obs_dim)
        reward = normal(torch, rng, batch, 1)
        not_done = torch.from_numpy((rng.random((batch, 1)) > 0.1).astype(np.float32))
        eps = normal(torch, rng, batch, act_dim)
        with torch.no_grad():
            noise = (eps * policy_noise).clamp(-noise_clip, noise_clip)
            next_action = (actor_target(next_state) + noise).clamp(-max_action, max_action)
            target_q1, target_q2 = critic_target(next_state, next_action)
            target_q = torch.min(target_q1, target_q2)
            target_q = reward + not_done * discount * target_q
        res["noise_max"].append(noise.abs().max())
        current_q1, current_q2 = critic(state, action)
        critic_loss = F.mse_loss(current_q1, target_q) + F.mse_loss(current_q2, target_q)
        critic_optimizer.zero_grad(set_to_none=True)
        critic_loss.backward()
        res["critic_norm"].append(nn.utils.clip_grad_norm_(critic.parameters(), max_norm=1.0))
        critic_optimizer.step()
        res["critic_loss"].append(critic_loss.item())

        if it == 3:  # save and resume, as the TD3 reference implementation does
            buffer = io.BytesIO()
            torch.save({"critic": critic.state_dict(), "critic_opt": critic_optimizer.state_dict(),
                        "actor": actor.state_dict(), "actor_opt": actor_optimizer.state_dict(),
                        "critic_target": critic_target.state_dict()}, buffer)
            buffer.seek(0)
            ckpt = torch.load(buffer, weights_only=True)
            critic.load_state_dict(ckpt["critic"])
            critic_optimizer = torch.optim.Adam(critic.parameters(), lr=1.0, amsgrad=True)
            critic_optimizer.load_state_dict(ckpt["critic_opt"])
            actor_optimizer.load_state_dict(ckpt["actor_opt"])
            critic_target.load_state_dict(ckpt["critic_target"])
            res["n_averaged"] = critic_target.n_averaged.clone()
        if it % policy_freq == 0:
            critic.requires_grad_(False)
            critic_grads = [p.grad.clone() for p in critic.parameters()]
            actor_loss = -critic.Q1(state, actor(state)).mean()
            actor_optimizer.zero_grad()
            actor_loss.backward()
            res["frozen_critic_grads"] = [bool(torch.equal(p.grad, g))
                                          for p, g in zip(critic.parameters(), critic_grads)]
            res["actor_norm"].append(nn.utils.clip_grad_norm_(
                actor.parameters(), max_norm=0.5, norm_type=2.0, error_if_nonfinite=True))
            actor_optimizer.step()
            critic.requires_grad_(True)
            res["actor_loss"].append(actor_loss.item())
            with torch.no_grad():
                critic_target.update_parameters(critic)
                for param, target_param in zip(actor.parameters(), actor_target.parameters()):
                    target_param.mul_(1 - tau).add_(param, alpha=tau)

    noise = torch.randn_like(action) * policy_noise
    res["randn_like_meta"] = [_name(noise.dtype), tuple(noise.shape) == (batch, act_dim),
                              noise.requires_grad]
    res["params"] = torch.cat([p.detach().flatten() for p in critic.parameters()])
    res["critic_target"] = torch.cat([p.flatten() for p in critic_target.parameters()])
    res["target_q"] = critic_target(state, action)[0]
    res["select_action"] = select_action(np.linspace(-1, 1, obs_dim))
    res["actor_target"] = torch.cat([p.flatten() for p in actor_target.parameters()])
    res["amsgrad_state"] = torch.cat([critic_optimizer.state[p]["max_exp_avg_sq"].flatten()
                                      for p in critic.parameters()])
    res["evaluate"] = actor(normal(torch, rng, 3, obs_dim)).detach().cpu().numpy()
    return res


def a2c_program(torch):
    """A2C with GAE over a vectorised toy environment: MultiDiscrete actions with invalid-action
    masking (gym-microrts' CategoricalMasked), centered RMSprop, Huber value loss, LR annealing."""
    nn, F = torch.nn, torch.nn.functional
    Categorical = torch.distributions.Categorical
    rng = np.random.default_rng(2203)
    res = {}
    num_envs, num_steps, obs_dim, num_updates = 4, 6, 3, 3
    nvec = np.array([3, 2])
    gamma, gae_lambda, ent_coef, vf_coef, lr = 0.95, 0.9, 0.01, 0.5, 7e-3

    def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
        torch.nn.init.orthogonal_(layer.weight, std)
        torch.nn.init.constant_(layer.bias, bias_const)
        return layer

    class CategoricalMasked(Categorical):
        def __init__(self, probs=None, logits=None, validate_args=None, masks=None):
            self.masks = masks
            logits = torch.where(self.masks, logits, torch.tensor(-1e8))
            super(CategoricalMasked, self).__init__(probs, logits, validate_args)

        def entropy(self):
            p_log_p = self.logits * self.probs
            p_log_p = torch.where(self.masks, p_log_p, torch.tensor(0.0))
            return -p_log_p.sum(-1)

    class Agent(nn.Module):
        def __init__(self):
            super().__init__()
            self.critic = nn.Sequential(layer_init(nn.Linear(obs_dim, 16)), nn.Tanh(),
                                        layer_init(nn.Linear(16, 1), std=1.0))
            self.actor = nn.Sequential(layer_init(nn.Linear(obs_dim, 16)), nn.Tanh(),
                                       layer_init(nn.Linear(16, int(nvec.sum())), std=0.01))

        def get_value(self, x):
            return self.critic(x)

        def get_action_and_value(self, x, mask, action=None, gumbel=None):
            logits = self.actor(x)
            split_logits = torch.split(logits, nvec.tolist(), dim=1)
            split_mask = torch.split(mask, nvec.tolist(), dim=1)
            dists = [CategoricalMasked(logits=lg, masks=m)
                     for lg, m in zip(split_logits, split_mask)]
            if action is None:  # the Gumbel-max trick with the program's own noise
                noise = torch.split(-torch.log(-torch.log(gumbel)), nvec.tolist(), dim=1)
                action = torch.stack([(d.logits + g).argmax(dim=-1)
                                      for d, g in zip(dists, noise)])
            else:
                action = action.T
            logprob = torch.stack([d.log_prob(a) for a, d in zip(action, dists)])
            entropy = torch.stack([d.entropy() for d in dists])
            return action.T, logprob.sum(0), entropy.sum(0), self.critic(x)

    agent = Agent()
    # orthogonal init draws from the library's stream: compare only what it guarantees
    w = agent.actor[0].weight.detach()
    res["orthogonal_gram"] = w.T @ w / 2.0
    res["init_bias"] = agent.critic[2].bias.detach()
    fill_(torch, agent, rng, 0.5)
    optimizer = torch.optim.RMSprop(agent.parameters(), lr=lr, alpha=0.99, eps=1e-5,
                                    centered=True)

    env_w = normal(torch, rng, obs_dim, obs_dim) * 0.5
    env_b = normal(torch, rng, int(nvec.sum()), obs_dim) * 0.5

    def env_step(obs, action):
        onehot = torch.cat([F.one_hot(action[:, i], int(n)) for i, n in enumerate(nvec)], 1)
        next_obs = torch.tanh(obs @ env_w + onehot.float() @ env_b)
        reward = next_obs[:, 0] - 0.1 * (action[:, 0] == 2).float() + 0.05 * action[:, 1]
        return next_obs, reward.numpy()

    def action_mask(obs):  # the third choice of the first head is invalid where obs[1] > 0
        mask = torch.ones((obs.shape[0], int(nvec.sum())), dtype=torch.bool)
        mask[:, 2] = obs[:, 1] <= 0
        return mask

    obs_buf = torch.zeros((num_steps, num_envs, obs_dim))
    actions = torch.zeros((num_steps, num_envs) + nvec.shape, dtype=torch.long)
    masks = torch.zeros((num_steps, num_envs, int(nvec.sum())), dtype=torch.bool)
    logprobs = torch.zeros((num_steps, num_envs))
    rewards = torch.zeros((num_steps, num_envs))
    dones = torch.zeros((num_steps, num_envs))
    values = torch.zeros((num_steps, num_envs))
    next_obs = torch.Tensor(rng.standard_normal((num_envs, obs_dim)))
    next_done = torch.zeros(num_envs)
    for key in ("loss", "pg", "v", "ent", "norm", "adv", "lr", "explained_var"):
        res[key] = []
    for update in range(1, num_updates + 1):
        frac = 1.0 - (update - 1.0) / num_updates
        optimizer.param_groups[0]["lr"] = frac * lr
        for step in range(num_steps):
            obs_buf[step] = next_obs
            dones[step] = next_done
            masks[step] = action_mask(next_obs)
            with torch.no_grad():
                gumbel = _uniform(torch, rng, num_envs, int(nvec.sum())).clamp_(1e-6, 1 - 1e-6)
                action, logprob, _, value = agent.get_action_and_value(
                    next_obs, masks[step], gumbel=gumbel)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob
            next_obs, reward = env_step(next_obs, action)
            done = rng.random(num_envs) < 0.15
            rewards[step] = torch.tensor(reward).view(-1)
            reset = torch.Tensor(rng.standard_normal((num_envs, obs_dim)))
            next_obs = torch.where(torch.Tensor(done)[:, None].bool(), reset, next_obs)
            next_done = torch.Tensor(done)

        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0
            for t in reversed(range(num_steps)):
                if t == num_steps - 1:
                    nextnonterminal = 1.0 - next_done
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - dones[t + 1]
                    nextvalues = values[t + 1]
                delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = (
                    delta + gamma * gae_lambda * nextnonterminal * lastgaelam)
            returns = advantages + values

        b_obs = obs_buf.reshape((-1, obs_dim))
        b_actions = actions.reshape((-1,) + nvec.shape)
        b_masks = masks.reshape(-1, masks.shape[-1])
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_advantages = (b_advantages - b_advantages.mean()) / (b_advantages.std() + 1e-8)
        _, newlogprob, entropy, newvalue = agent.get_action_and_value(
            b_obs, b_masks, b_actions.long())
        pg_loss = -(b_advantages * newlogprob).mean()
        if update % 2 == 0:
            v_loss = F.smooth_l1_loss(newvalue.view(-1), b_returns, beta=0.5)
        else:
            v_loss = F.huber_loss(newvalue.view(-1), b_returns, delta=0.5)
        entropy_loss = entropy.mean()
        loss = pg_loss - ent_coef * entropy_loss + v_loss * vf_coef
        optimizer.zero_grad()
        loss.backward()
        res["norm"].append(nn.utils.clip_grad_norm_(agent.parameters(), 0.5))
        optimizer.step()
        res["loss"].append(loss.item())
        res["pg"].append(pg_loss.item())
        res["v"].append(v_loss.item())
        res["ent"].append(entropy_loss.item())
        res["adv"].append(b_advantages.std(unbiased=False))
        res["lr"].append(optimizer.param_groups[0]["lr"])
        y_pred, y_true = newvalue.view(-1).detach().cpu().numpy(), b_returns.cpu().numpy()
        var_y = np.var(y_true)
        res["explained_var"].append(np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y)

    res["actions"] = actions.flatten().tolist()
    res["masked_taken"] = int((masks.logical_not()[..., 2] & (actions[..., 0] == 2)).sum())
    res["dtypes"] = [_name(actions.dtype), _name(newlogprob.dtype), _name(next_done.dtype),
                     _name(rewards.dtype)]
    res["grad_avg"] = torch.cat([optimizer.state[p]["grad_avg"].flatten()
                                 for p in agent.parameters()])
    res["params"] = torch.cat([p.detach().flatten() for p in agent.parameters()])
    return res


PROGRAMS = [sac_program, td3_program, a2c_program]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    assert_same_results(program(ember), program(torch), rtol=2e-4, atol=2e-5)
