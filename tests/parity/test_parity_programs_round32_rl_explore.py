"""Exploration and imitation RL written as its reference repositories write it in torch, run
once with `torch` bound to ember and once to PyTorch from the same NumPy weights: RND (running
mean/std observation normalisation, a frozen target and its predictor, masked predictor loss,
intrinsic-return normalisation and clamp), ICM (inverse-model cross entropy, forward model on
features with the reference's detach choices, residual forward blocks), GAIL (gradient penalty
through autograd.grad(create_graph=True), -log(1 - D) rewards via logsigmoid) and AIRL,
HER relabelling with index tensors under DDPG, and AWR/AWAC (exp-clamped and softmax advantage
weights, a tanh-squashed Gaussian with a cached TanhTransform). Sibling of
test_parity_programs_round32_rl.py; _fixes pins what they found."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


class RunningMeanStd:
    """OpenAI baselines' parallel-moments running mean/var, kept in float64 NumPy."""

    def __init__(self, epsilon=1e-4, shape=()):
        self.mean = np.zeros(shape, "float64")
        self.var = np.ones(shape, "float64")
        self.count = epsilon

    def update(self, x):
        self.update_from_moments(np.mean(x, axis=0), np.var(x, axis=0), x.shape[0])

    def update_from_moments(self, batch_mean, batch_var, batch_count):
        delta = batch_mean - self.mean
        tot_count = self.count + batch_count
        new_mean = self.mean + delta * batch_count / tot_count
        m2 = self.var * self.count + batch_var * batch_count + np.square(delta) * (
            self.count * batch_count / tot_count)
        self.mean, self.var, self.count = new_mean, m2 / tot_count, tot_count


def rnd_program(torch):
    """jcwleo/random-network-distillation-pytorch: observation normalisation by a running
    mean/std clipped to [-5, 5], a frozen random target, the predictor trained on a random
    subset (mask / max(mask.sum(), Tensor([1]))), intrinsic rewards normalised by the running
    std of discounted intrinsic returns, a two-head critic and a combined PPO advantage."""
    rng = np.random.default_rng(10)
    nn, F = torch.nn, torch.nn.functional
    N, T, D, Fd, A = 3, 4, 6, 8, 3

    class RNDModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.predictor = nn.Sequential(nn.Linear(D, 16), nn.LeakyReLU(), nn.Linear(16, 16),
                                           nn.ReLU(), nn.Linear(16, Fd))
            self.target = nn.Sequential(nn.Linear(D, 16), nn.LeakyReLU(), nn.Linear(16, Fd))
            for p in self.modules():
                if isinstance(p, nn.Linear):
                    nn.init.orthogonal_(p.weight, np.sqrt(2))
                    p.bias.data.zero_()
            for param in self.target.parameters():
                param.requires_grad = False

        def forward(self, next_obs):
            return self.predictor(next_obs), self.target(next_obs)

    class ActorCritic(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(D, 16), nn.ReLU())
            self.actor = nn.Linear(16, A)
            self.critic_ext = nn.Linear(16, 1)
            self.critic_int = nn.Linear(16, 1)

        def forward(self, x):
            h = self.body(x)
            return self.actor(h), self.critic_ext(h), self.critic_int(h)

    rnd = RNDModel()
    fill_(torch, rnd, rng, 0.4)
    ac = ActorCritic()
    fill_(torch, ac, rng, 0.3)
    optimizer = torch.optim.Adam(list(ac.parameters()) + list(rnd.predictor.parameters()),
                                 lr=1e-3)
    obs_rms, reward_rms = RunningMeanStd(shape=(1, D)), RunningMeanStd()
    rewems = None
    res = {"int_reward": [], "loss": [], "forward_loss": [], "frozen": []}
    obs_rms.update(rng.standard_normal((N * T, D)) * 2 + 1)
    for update in range(2):
        next_obs = rng.standard_normal((N, T, D)).astype(np.float32) * 2 + 1
        flat = next_obs.reshape(-1, D)
        norm_obs = ((flat - obs_rms.mean) / np.sqrt(obs_rms.var)).clip(-5, 5)
        with torch.no_grad():
            x = torch.FloatTensor(norm_obs)
            predict_next_feature, target_next_feature = rnd(x)
            intrinsic_reward = (target_next_feature - predict_next_feature).pow(2).sum(1) / 2
            intrinsic_reward = intrinsic_reward.data.cpu().numpy().reshape(N, T)
        # RewardForwardFilter over time, then normalise by the running std of returns
        total_int_returns = []
        for t in range(T):
            rews = intrinsic_reward[:, t]
            rewems = rews if rewems is None else rewems * 0.99 + rews
            total_int_returns.append(rewems)
        total_int_returns = np.stack(total_int_returns, 1)
        reward_rms.update_from_moments(np.mean(total_int_returns), np.var(total_int_returns),
                                       total_int_returns.size)
        intrinsic_reward /= np.sqrt(reward_rms.var)
        int_r = torch.from_numpy(intrinsic_reward).clamp(max=5.0)
        res["int_reward"].append(int_r)
        obs_rms.update(flat)

        states = torch.from_numpy(flat)
        logits, v_ext, v_int = ac(states)
        ext_adv = torch.from_numpy(rng.standard_normal(N * T).astype(np.float32))
        int_adv = int_r.reshape(-1) - v_int.squeeze(-1).detach()
        adv = 2 * ext_adv + 1 * int_adv
        actions = torch.from_numpy(rng.integers(0, A, N * T))
        old_logp = F.log_softmax(logits, -1).gather(1, actions[:, None]).squeeze(1).detach()
        old_logp = old_logp + torch.from_numpy(rng.normal(0, 0.1, N * T).astype(np.float32))
        for epoch in range(2):
            logits, v_ext, v_int = ac(states)
            m = torch.distributions.Categorical(F.softmax(logits, dim=-1))
            log_prob = m.log_prob(actions)
            predict_next_state_feature, target_next_state_feature = rnd(
                torch.FloatTensor(norm_obs))
            forward_mse = nn.MSELoss(reduction="none")
            forward_loss = forward_mse(predict_next_state_feature,
                                       target_next_state_feature.detach()).mean(-1)
            mask = torch.from_numpy(rng.uniform(size=len(forward_loss)).astype(np.float32))
            mask = (mask < 0.5).type(torch.FloatTensor)
            forward_loss = torch.sum(forward_loss * mask) / torch.max(mask.sum(),
                                                                      torch.Tensor([1]))
            ratio = torch.exp(log_prob - old_logp)
            surr1 = ratio * adv
            surr2 = torch.clamp(ratio, 1.0 - 0.1, 1.0 + 0.1) * adv
            actor_loss = -torch.min(surr1, surr2).mean()
            critic_ext_loss = F.mse_loss(v_ext.sum(1), ext_adv)
            critic_int_loss = F.mse_loss(v_int.sum(1), int_r.reshape(-1))
            critic_loss = critic_ext_loss + critic_int_loss
            entropy = m.entropy().mean()
            optimizer.zero_grad()
            loss = actor_loss + 0.5 * critic_loss - 0.001 * entropy + forward_loss
            loss.backward()
            nn.utils.clip_grad_norm_(list(ac.parameters()) + list(rnd.predictor.parameters()),
                                     0.5)
            optimizer.step()
            res["loss"].append(loss.item())
            res["forward_loss"].append(forward_loss)
        res["frozen"].append([p.grad is None for p in rnd.target.parameters()])
    res["pred_w"], res["target_w"] = rnd.predictor[4].weight, rnd.target[2].weight
    res["obs_rms"] = [obs_rms.mean, obs_rms.var, reward_rms.var]
    return res


def icm_program(torch):
    """jcwleo/curiosity-driven-exploration-pytorch's ICMModel: features, an inverse model on
    (phi(s), phi(s')) trained by cross entropy, a residual forward model on (phi(s), a)
    trained by MSE against the detached phi(s'), an uninitialised FloatTensor one-hot filled
    by scatter_, and eta-scaled intrinsic rewards."""
    rng = np.random.default_rng(11)
    nn, F = torch.nn, torch.nn.functional
    B, D, Fd, A, eta = 6, 5, 8, 4, 0.01

    class ICMModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.feature = nn.Sequential(nn.Linear(D, 16), nn.LeakyReLU(), nn.Linear(16, Fd))
            self.inverse_net = nn.Sequential(nn.Linear(Fd * 2, 16), nn.ReLU(), nn.Linear(16, A))
            self.residual = [nn.Sequential(nn.Linear(A + Fd, Fd), nn.LeakyReLU(),
                                           nn.Linear(Fd, Fd)).to(self.device_of())
                             for _ in range(2 * 2)]
            self.forward_net_1 = nn.Sequential(nn.Linear(A + Fd, Fd), nn.LeakyReLU())
            self.forward_net_2 = nn.Sequential(nn.Linear(A + Fd, Fd))
            for i, m in enumerate(self.residual):
                self.add_module(f"residual_{i}", m)

        @staticmethod
        def device_of():
            return torch.device("cpu")

        def forward(self, inputs):
            state, next_state, action = inputs
            encode_state = self.feature(state)
            encode_next_state = self.feature(next_state)
            pred_action = torch.cat((encode_state, encode_next_state), 1)
            pred_action = self.inverse_net(pred_action)
            pred_next_state_feature_orig = torch.cat((encode_state, action), 1)
            pred_next_state_feature_orig = self.forward_net_1(pred_next_state_feature_orig)
            for i in range(2):
                pred_next_state_feature = self.residual[i * 2](
                    torch.cat((pred_next_state_feature_orig, action), 1))
                pred_next_state_feature_orig = self.residual[i * 2 + 1](
                    torch.cat((pred_next_state_feature, action), 1)
                ) + pred_next_state_feature_orig
            pred_next_state_feature = self.forward_net_2(
                torch.cat((pred_next_state_feature_orig, action), 1))
            return encode_next_state, pred_next_state_feature, pred_action

    icm = ICMModel()
    fill_(torch, icm, rng, 0.3)
    optimizer = torch.optim.Adam(icm.parameters(), lr=1e-3)
    ce, forward_mse = nn.CrossEntropyLoss(), nn.MSELoss()
    res = {"intrinsic": [], "inverse_loss": [], "forward_loss": [], "acc": []}
    for step in range(3):
        state = normal(torch, rng, B, D)
        next_state = normal(torch, rng, B, D)
        action = torch.LongTensor(rng.integers(0, A, B))
        action_onehot = torch.FloatTensor(len(action), A)
        action_onehot.zero_()
        action_onehot.scatter_(1, action.view(len(action), -1), 1)
        with torch.no_grad():
            real_next_state_feature, pred_next_state_feature, _ = icm(
                [state, next_state, action_onehot])
            intrinsic_reward = eta * F.mse_loss(real_next_state_feature,
                                                pred_next_state_feature,
                                                reduction="none").mean(-1)
        res["intrinsic"].append(intrinsic_reward.data.cpu().numpy())
        real_next_state_feature, pred_next_state_feature, pred_action = icm(
            [state, next_state, action_onehot])
        inverse_loss = ce(pred_action, action)
        forward_loss = forward_mse(pred_next_state_feature, real_next_state_feature.detach())
        loss = 0.8 * inverse_loss + 0.2 * forward_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        res["inverse_loss"].append(inverse_loss.item())
        res["forward_loss"].append(forward_loss.item())
        res["acc"].append((pred_action.argmax(1) == action).float().mean().item())
        res["feature_grad"] = icm.feature[2].weight.grad
    res["names"] = [n for n, _ in icm.named_parameters()][-6:]
    res["fwd_w"] = icm.forward_net_2[0].weight
    return res


def gail_airl_program(torch):
    """ikostrikov's GAIL discriminator (tanh MLP trunk, BCE-with-logits against ones/zeros,
    a WGAN-style gradient penalty on interpolations through autograd.grad with
    create_graph=True, rewards log D - log(1 - D) normalised by a running return std) and the
    AIRL discriminator f = g(s) + gamma h(s') - h(s) with logits f - log pi and the
    -log(1 - D) reward written with logsigmoid."""
    rng = np.random.default_rng(12)
    nn, F, autograd = torch.nn, torch.nn.functional, torch.autograd
    B, S, A, gamma = 5, 4, 2, 0.99

    class Discriminator(nn.Module):
        def __init__(self, input_dim, hidden_dim):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(input_dim, hidden_dim), nn.Tanh(),
                                       nn.Linear(hidden_dim, hidden_dim), nn.Tanh(),
                                       nn.Linear(hidden_dim, 1))
            self.trunk.train()
            self.optimizer = torch.optim.Adam(self.trunk.parameters())
            self.returns = None
            self.ret_rms = RunningMeanStd(shape=())

        def compute_grad_pen(self, expert_state, expert_action, policy_state, policy_action,
                             alpha, lambda_=10):
            expert_data = torch.cat([expert_state, expert_action], dim=1)
            policy_data = torch.cat([policy_state, policy_action], dim=1)
            alpha = alpha.expand_as(expert_data).to(expert_data.device)
            mixup_data = alpha * expert_data + (1 - alpha) * policy_data
            mixup_data.requires_grad = True
            disc = self.trunk(mixup_data)
            ones = torch.ones(disc.size()).to(disc.device)
            grad = autograd.grad(outputs=disc, inputs=mixup_data, grad_outputs=ones,
                                 create_graph=True, retain_graph=True, only_inputs=True)[0]
            return lambda_ * (grad.norm(2, dim=1) - 1).pow(2).mean()

        def update(self, batches):
            self.train()
            loss = 0
            n = 0
            for expert_state, expert_action, policy_state, policy_action, alpha in batches:
                policy_d = self.trunk(torch.cat([policy_state, policy_action], dim=1))
                expert_d = self.trunk(torch.cat([expert_state, expert_action], dim=1))
                expert_loss = F.binary_cross_entropy_with_logits(
                    expert_d, torch.ones(expert_d.size()))
                policy_loss = F.binary_cross_entropy_with_logits(
                    policy_d, torch.zeros(policy_d.size()))
                gail_loss = expert_loss + policy_loss
                grad_pen = self.compute_grad_pen(expert_state, expert_action, policy_state,
                                                 policy_action, alpha)
                loss += (gail_loss + grad_pen).item()
                n += 1
                self.optimizer.zero_grad()
                (gail_loss + grad_pen).backward()
                self.optimizer.step()
            return loss / n

        def predict_reward(self, state, action, gamma, masks, update_rms=True):
            with torch.no_grad():
                self.eval()
                d = self.trunk(torch.cat([state, action], dim=1))
                s = torch.sigmoid(d)
                reward = s.log() - (1 - s).log()
                if self.returns is None:
                    self.returns = reward.clone()
                if update_rms:
                    self.returns = self.returns * masks * gamma + reward
                    self.ret_rms.update(self.returns.cpu().numpy())
                return reward / np.sqrt(self.ret_rms.var[0] + 1e-8)

    disc = Discriminator(S + A, 16)
    fill_(torch, disc, rng, 0.5)
    res = {"gail_loss": [], "reward": [], "gp_grad": []}
    for it in range(2):
        batches = [(normal(torch, rng, B, S) + 1, normal(torch, rng, B, A).tanh(),
                    normal(torch, rng, B, S), normal(torch, rng, B, A).tanh(),
                    torch.from_numpy(rng.uniform(size=(B, 1)).astype(np.float32)))
                   for _ in range(2)]
        res["gail_loss"].append(disc.update(batches))
        masks = torch.from_numpy((rng.uniform(size=(B, 1)) > 0.2).astype(np.float32))
        res["reward"].append(disc.predict_reward(normal(torch, rng, B, S),
                                                 normal(torch, rng, B, A), gamma, masks))
    res["trunk_w"] = disc.trunk[2].weight
    # an on-policy batch still attached to the actor's graph: the leaf-only flag refuses it
    actor = nn.Linear(S, A)
    fill_(torch, actor, rng, 0.3)
    ps = normal(torch, rng, B, S)
    try:
        disc.compute_grad_pen(normal(torch, rng, B, S), normal(torch, rng, B, A), ps,
                              actor(ps), torch.full((B, 1), 0.5))
    except RuntimeError as e:
        res["attached_policy_error"] = [str(e)]
    res["detached_gp"] = disc.compute_grad_pen(normal(torch, rng, B, S),
                                               normal(torch, rng, B, A), ps,
                                               actor(ps).detach(), torch.full((B, 1), 0.5))
    res["adam_steps"] = [float(s["step"]) for s in disc.optimizer.state.values()][:2]

    # AIRL: state-only reward g(s), shaping h(s), logits f - log pi
    g = nn.Sequential(nn.Linear(S, 16), nn.ReLU(), nn.Linear(16, 1))
    h = nn.Sequential(nn.Linear(S, 16), nn.ReLU(), nn.Linear(16, 1))
    fill_(torch, g, rng, 0.4)
    fill_(torch, h, rng, 0.4)
    opt = torch.optim.Adam([*g.parameters(), *h.parameters()], lr=3e-4)

    def airl_logits(states, dones, log_pis, next_states):
        rs = g(states)
        vs, next_vs = h(states), h(next_states)
        f = rs + gamma * (1 - dones) * next_vs - vs
        return f - log_pis

    for it in range(3):
        se, sp = normal(torch, rng, B, S) + 0.5, normal(torch, rng, B, S)
        nse, nsp = normal(torch, rng, B, S), normal(torch, rng, B, S)
        de = torch.from_numpy((rng.uniform(size=(B, 1)) < 0.2).astype(np.float32))
        dp = torch.zeros(B, 1)
        lpe = normal(torch, rng, B, 1) - 1
        lpp = normal(torch, rng, B, 1) - 1
        logits_pi = airl_logits(sp, dp, lpp, nsp)
        logits_exp = airl_logits(se, de, lpe, nse)
        loss_pi = -F.logsigmoid(-logits_pi).mean()
        loss_exp = -F.logsigmoid(logits_exp).mean()
        loss_disc = loss_pi + loss_exp
        opt.zero_grad()
        loss_disc.backward()
        opt.step()
        with torch.no_grad():
            acc_pi = (logits_pi < 0).float().mean().item()
            acc_exp = (logits_exp > 0).float().mean().item()
            reward = -F.logsigmoid(-airl_logits(sp, dp, lpp, nsp))
        res.setdefault("airl", []).append([loss_disc.item(), acc_pi, acc_exp])
        res.setdefault("airl_reward", []).append(reward)
    res["g_w"] = g[2].weight
    return res


def her_ddpg_program(torch):
    """TianhongDai/hindsight-experience-replay: an episode buffer of tensors, 'future'
    relabelling through index tensors (torch.where on a mask, advanced-index reads and an
    index_put_ write), a clipped goal/observation normaliser, DDPG with return clipping,
    the action-L2 actor penalty and polyak updates through .data.copy_."""
    rng = np.random.default_rng(13)
    nn, F = torch.nn, torch.nn.functional
    E, T, Do, G, A, batch = 4, 5, 4, 2, 2, 8
    future_p, clip_return, max_action, gamma, polyak = 1 - 1.0 / (1 + 4), 1 / (1 - 0.98), 1.0, \
        0.98, 0.95

    buffers = {"obs": normal(torch, rng, E, T + 1, Do),
               "ag": normal(torch, rng, E, T + 1, G) * 0.1,
               "g": (normal(torch, rng, E, 1, G) * 0.1).expand(E, T, G).contiguous(),
               "actions": normal(torch, rng, E, T, A).clamp(-1, 1)}

    def reward_func(achieved_goal, goal):
        d = torch.norm(achieved_goal - goal, dim=-1)
        return -(d > 0.05).float()

    def sample_her_transitions(episode_batch, batch_size):
        T = episode_batch["actions"].shape[1]
        rollout_batch_size = episode_batch["actions"].shape[0]
        episode_idxs = torch.from_numpy(rng.integers(0, rollout_batch_size, batch_size))
        t_samples = torch.from_numpy(rng.integers(T, size=batch_size))
        transitions = {"obs": episode_batch["obs"][episode_idxs, t_samples].clone(),
                       "obs_next": episode_batch["obs"][episode_idxs, t_samples + 1].clone(),
                       "ag_next": episode_batch["ag"][episode_idxs, t_samples + 1].clone(),
                       "g": episode_batch["g"][episode_idxs, t_samples].clone(),
                       "actions": episode_batch["actions"][episode_idxs, t_samples].clone()}
        her_indexes = torch.where(
            torch.from_numpy(rng.uniform(size=batch_size)) < future_p)
        future_offset = torch.from_numpy(rng.uniform(size=batch_size)) * (T - t_samples)
        future_offset = future_offset.long()
        future_t = (t_samples + 1 + future_offset)[her_indexes]
        future_ag = episode_batch["ag"][episode_idxs[her_indexes], future_t]
        transitions["g"][her_indexes] = future_ag
        transitions["r"] = reward_func(transitions["ag_next"], transitions["g"]).unsqueeze(1)
        return transitions, her_indexes[0]

    class Normalizer:
        def __init__(self, size, eps=1e-2, default_clip_range=5):
            self.size, self.eps, self.clip = size, eps, default_clip_range
            self.total_sum = torch.zeros(size, dtype=torch.float64)
            self.total_sumsq = torch.zeros(size, dtype=torch.float64)
            self.total_count = torch.ones(1, dtype=torch.float64)

        def update(self, v):
            v = v.reshape(-1, self.size)
            self.total_sum += v.sum(axis=0)
            self.total_sumsq += (torch.square(v)).sum(axis=0)
            self.total_count[0] += v.shape[0]
            self.mean = self.total_sum / self.total_count
            self.std = torch.sqrt(torch.maximum(
                torch.square(torch.tensor(self.eps, dtype=torch.float64)),
                self.total_sumsq / self.total_count - torch.square(self.total_sum
                                                                   / self.total_count)))

        def normalize(self, v, clip_range=None):
            clip_range = self.clip if clip_range is None else clip_range
            return torch.clip((v - self.mean) / self.std, -clip_range, clip_range).float()

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(Do + G, 16), nn.Linear(16, 16)
            self.action_out = nn.Linear(16, A)

        def forward(self, x):
            x = F.relu(self.fc2(F.relu(self.fc1(x))))
            return max_action * torch.tanh(self.action_out(x))

    class Critic(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(Do + G + A, 16), nn.Linear(16, 16)
            self.q_out = nn.Linear(16, 1)

        def forward(self, x, actions):
            x = torch.cat([x, actions / max_action], dim=1)
            return self.q_out(F.relu(self.fc2(F.relu(self.fc1(x)))))

    actor, critic = Actor(), Critic()
    fill_(torch, actor, rng, 0.3)
    fill_(torch, critic, rng, 0.3)
    actor_target, critic_target = Actor(), Critic()
    actor_target.load_state_dict(actor.state_dict())
    critic_target.load_state_dict(critic.state_dict())
    actor_optim = torch.optim.Adam(actor.parameters(), lr=1e-3)
    critic_optim = torch.optim.Adam(critic.parameters(), lr=1e-3)
    o_norm, g_norm = Normalizer(Do), Normalizer(G)
    tr, _ = sample_her_transitions(buffers, E * T)
    o_norm.update(tr["obs"])
    g_norm.update(tr["g"])
    res = {"her_idx": [], "r": [], "critic": [], "actor": []}

    def preproc(o, g):
        return torch.cat([o_norm.normalize(o.clip(-200, 200)),
                          g_norm.normalize(g.clip(-200, 200))], dim=1)

    for _ in range(3):
        transitions, her_idx = sample_her_transitions(buffers, batch)
        res["her_idx"].append(her_idx)
        res["r"].append(transitions["r"])
        inputs_norm_tensor = preproc(transitions["obs"], transitions["g"])
        inputs_next_norm_tensor = preproc(transitions["obs_next"], transitions["g"])
        actions_tensor, r_tensor = transitions["actions"], transitions["r"]
        with torch.no_grad():
            actions_next = actor_target(inputs_next_norm_tensor)
            q_next_value = critic_target(inputs_next_norm_tensor, actions_next).detach()
            target_q_value = r_tensor + gamma * q_next_value
            target_q_value = target_q_value.detach()
            target_q_value = torch.clamp(target_q_value, -clip_return, 0)
        real_q_value = critic(inputs_norm_tensor, actions_tensor)
        critic_loss = (target_q_value - real_q_value).pow(2).mean()
        actions_real = actor(inputs_norm_tensor)
        actor_loss = -critic(inputs_norm_tensor, actions_real).mean()
        actor_loss += 1.0 * (actions_real / max_action).pow(2).mean()
        actor_optim.zero_grad()
        actor_loss.backward()
        actor_optim.step()
        critic_optim.zero_grad()
        critic_loss.backward()
        critic_optim.step()
        for target, source in ((actor_target, actor), (critic_target, critic)):
            for target_param, param in zip(target.parameters(), source.parameters()):
                target_param.data.copy_((1 - polyak) * param.data + polyak * target_param.data)
        res["critic"].append(critic_loss.item())
        res["actor"].append(actor_loss.item())
    res["norm"] = [o_norm.mean, o_norm.std, g_norm.std, o_norm.total_count]
    res["critic_target_w"] = critic_target.q_out.weight
    res["critic_grad"] = critic.fc1.weight.grad
    return res


def awr_awac_program(torch):
    """AWR (exp(A / beta) clamped at 20 as regression weights for a Gaussian policy, TD(lambda)
    value targets by a reversed loop) and rlkit's AWAC (twin Q, a tanh-squashed Gaussian with
    TanhTransform(cache_size=1) whose log_prob reuses the cached pre-tanh value, batch-softmax
    advantage weights, Polyak targets through torch._foreach_lerp_ and torch.no_grad)."""
    rng = np.random.default_rng(14)
    nn, F, D = torch.nn, torch.nn.functional, torch.distributions
    B, S, A, beta = 8, 4, 2, 0.5

    policy = nn.Sequential(nn.Linear(S, 16), nn.ReLU(), nn.Linear(16, 2 * A))
    value = nn.Sequential(nn.Linear(S, 16), nn.ReLU(), nn.Linear(16, 1))
    fill_(torch, policy, rng, 0.3)
    fill_(torch, value, rng, 0.3)
    pi_opt = torch.optim.SGD(policy.parameters(), lr=5e-3, momentum=0.9)
    v_opt = torch.optim.SGD(value.parameters(), lr=1e-2, momentum=0.9)
    res = {"awr_w": [], "awr_loss": [], "v_loss": []}
    for it in range(2):
        obs = normal(torch, rng, B + 1, S)
        act = normal(torch, rng, B, A).clamp(-1, 1)
        rew = normal(torch, rng, B)
        done = torch.zeros(B)
        done[-1] = 1
        with torch.no_grad():
            vals = value(obs).squeeze(-1)
            ret = torch.zeros(B)
            last = vals[-1]
            for t in reversed(range(B)):
                nxt = (1 - 0.95) * vals[t + 1] + 0.95 * last
                last = rew[t] + 0.99 * (1 - done[t]) * nxt
                ret[t] = last
            adv = ret - vals[:-1]
            adv = (adv - adv.mean()) / (adv.std() + 1e-5)
            weights = torch.exp(adv / beta).clamp_(max=20.0)
        v_loss = 0.5 * (value(obs[:-1]).squeeze(-1) - ret).pow(2).mean()
        v_opt.zero_grad()
        v_loss.backward()
        v_opt.step()
        mu, log_std = policy(obs[:-1]).chunk(2, dim=-1)
        dist = D.Independent(D.Normal(mu, log_std.clamp(-5, 2).exp()), 1)
        loss = -(dist.log_prob(act) * weights).mean()
        pi_opt.zero_grad()
        loss.backward()
        pi_opt.step()
        res["awr_w"].append(weights)
        res["awr_loss"].append(loss.item())
        res["v_loss"].append(v_loss.item())

    class TanhGaussianPolicy(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(S, 16), nn.ReLU(), nn.Linear(16, 2 * A))

        def forward(self, obs):
            mean, log_std = self.net(obs).chunk(2, -1)
            std = torch.clamp(log_std, -20, 2).exp()
            return D.TransformedDistribution(D.Normal(mean, std),
                                             [D.TanhTransform(cache_size=1)])

    def make_q():
        return nn.Sequential(nn.Linear(S + A, 16), nn.ReLU(), nn.Linear(16, 1))

    pi = TanhGaussianPolicy()
    qf1, qf2 = make_q(), make_q()
    for m in (pi, qf1, qf2):
        fill_(torch, m, rng, 0.3)
    tq1, tq2 = make_q(), make_q()
    tq1.load_state_dict(qf1.state_dict())
    tq2.load_state_dict(qf2.state_dict())
    popt = torch.optim.Adam(pi.parameters(), lr=3e-4)
    qopt = torch.optim.Adam([*qf1.parameters(), *qf2.parameters()], lr=3e-4)
    for it in range(3):
        obs, nobs = normal(torch, rng, B, S), normal(torch, rng, B, S)
        actions = normal(torch, rng, B, A).tanh() * 0.99
        rewards, terms = normal(torch, rng, B, 1), torch.zeros(B, 1)
        eps = normal(torch, rng, B, A)
        dist = pi(obs)
        base = dist.base_dist
        new_obs_actions = dist.transforms[0](base.loc + base.scale * eps)
        log_pi = dist.log_prob(new_obs_actions).sum(-1, keepdim=True)
        with torch.no_grad():
            ndist = pi(nobs)
            nact = ndist.transforms[0](ndist.base_dist.mean)
            tq = torch.min(tq1(torch.cat([nobs, nact], 1)), tq2(torch.cat([nobs, nact], 1)))
            q_target = rewards + (1.0 - terms) * 0.99 * tq
        q1_pred = qf1(torch.cat([obs, actions], 1))
        q2_pred = qf2(torch.cat([obs, actions], 1))
        qf_loss = F.mse_loss(q1_pred, q_target) + F.mse_loss(q2_pred, q_target)
        qopt.zero_grad()
        qf_loss.backward()
        qopt.step()

        policy_logpp = dist.log_prob(actions).sum(-1)
        q1_pi = qf1(torch.cat([obs, new_obs_actions], 1))
        q2_pi = qf2(torch.cat([obs, new_obs_actions], 1))
        v_pi = torch.min(q1_pi, q2_pi)
        q_adv = torch.min(q1_pred, q2_pred)
        score = q_adv - v_pi
        weights = F.softmax(score.detach() / beta, dim=0)[:, 0]
        policy_loss = 0.0 * log_pi.mean() - (policy_logpp * len(weights) * weights).mean()
        popt.zero_grad()
        policy_loss.backward()
        popt.step()
        with torch.no_grad():
            for t, s in ((tq1, qf1), (tq2, qf2)):
                torch._foreach_lerp_(list(t.parameters()), list(s.parameters()), 0.005)
        res.setdefault("awac", []).append([qf_loss.item(), policy_loss.item()])
        res.setdefault("awac_w", []).append(weights)
        res.setdefault("log_pi", []).append(log_pi)
    res["pi_w"], res["tq_w"] = pi.net[2].weight, tq1[2].weight
    return res


PROGRAMS = [rnd_program, icm_program, gail_airl_program, her_ddpg_program, awr_awac_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
