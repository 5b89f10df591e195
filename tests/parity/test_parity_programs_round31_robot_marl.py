"""Multi-agent RL written as pymarl / MADDPG / on-policy (MAPPO) write it in torch, run with
`torch` bound to ember and to PyTorch from the same NumPy weights and data: QMIX (GRU agents
over an episode batch, hypernetwork mixing weights made monotone with abs, double-Q targets
from target networks, masked TD error, RMSprop), MADDPG (centralised critics, Gumbel-softmax
actions with NumPy Gumbel noise and the straight-through hard sample, soft target updates)
and MAPPO (ValueNorm running mean/var buffers with debiasing, PopArt output rescaling under
no_grad, clipped value loss with Huber, PPO ratio clipping, masks)."""

import copy

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def qmix_program(torch):
    """pymarl's QMIX learner on a fixed episode batch: RNNAgent (Linear, GRUCell, Linear)
    unrolled over time, mac_out stacked, chosen Q by gather, double-Q with the live network's
    argmax over available actions, QMixer with hyper_w_1 / hyper_w_final / V(s), abs weights,
    bmm, masked TD loss, grad-norm clipping and target updates by load_state_dict."""
    rng = np.random.default_rng(6)
    nn, F = torch.nn, torch.nn.functional
    bs, T, n_agents, n_actions, obs_dim, state_dim, hid, embed = 3, 5, 3, 4, 6, 8, 16, 8

    class RNNAgent(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(obs_dim + n_agents, hid)
            self.rnn = nn.GRUCell(hid, hid)
            self.fc2 = nn.Linear(hid, n_actions)

        def init_hidden(self):
            return self.fc1.weight.new(1, hid).zero_()

        def forward(self, inputs, hidden_state):
            x = F.relu(self.fc1(inputs))
            h_in = hidden_state.reshape(-1, hid)
            h = self.rnn(x, h_in)
            return self.fc2(h), h

    class QMixer(nn.Module):
        def __init__(self):
            super().__init__()
            self.hyper_w_1 = nn.Sequential(nn.Linear(state_dim, 16), nn.ReLU(),
                                           nn.Linear(16, embed * n_agents))
            self.hyper_w_final = nn.Linear(state_dim, embed)
            self.hyper_b_1 = nn.Linear(state_dim, embed)
            self.V = nn.Sequential(nn.Linear(state_dim, embed), nn.ReLU(), nn.Linear(embed, 1))

        def forward(self, agent_qs, states):
            b = agent_qs.size(0)
            states = states.reshape(-1, state_dim)
            agent_qs = agent_qs.view(-1, 1, n_agents)
            w1 = torch.abs(self.hyper_w_1(states))
            b1 = self.hyper_b_1(states)
            w1 = w1.view(-1, n_agents, embed)
            b1 = b1.view(-1, 1, embed)
            hidden = F.elu(torch.bmm(agent_qs, w1) + b1)
            w_final = torch.abs(self.hyper_w_final(states)).view(-1, embed, 1)
            v = self.V(states).view(-1, 1, 1)
            y = torch.bmm(hidden, w_final) + v
            return y.view(b, -1, 1)

    agent, mixer = RNNAgent(), QMixer()
    fill_(torch, agent, rng, 0.3)
    fill_(torch, mixer, rng, 0.3)
    target_agent, target_mixer = copy.deepcopy(agent), copy.deepcopy(mixer)
    params = list(agent.parameters()) + list(mixer.parameters())
    opt = torch.optim.RMSprop(params=params, lr=5e-3, alpha=0.99, eps=1e-5)

    def mac_forward(net, obs):
        hidden = net.init_hidden().unsqueeze(0).expand(bs, n_agents, -1)
        outs = []
        agent_ids = torch.eye(n_agents).unsqueeze(0).expand(bs, -1, -1)
        for t in range(T + 1):
            inputs = torch.cat([obs[:, t], agent_ids], dim=-1).reshape(bs * n_agents, -1)
            q, hidden = net(inputs, hidden)
            outs.append(q.view(bs, n_agents, -1))
        return torch.stack(outs, dim=1)

    res = {"losses": [], "grad_norms": [], "q_tot": []}
    for it in range(4):
        obs = normal(torch, rng, bs, T + 1, n_agents, obs_dim)
        state = normal(torch, rng, bs, T + 1, state_dim)
        avail = torch.from_numpy(rng.random((bs, T + 1, n_agents, n_actions)) > 0.3)
        avail[..., 0] = True
        actions = torch.from_numpy(rng.integers(0, n_actions, (bs, T, n_agents, 1)))
        rewards = normal(torch, rng, bs, T, 1)
        terminated = torch.zeros(bs, T, 1)
        terminated[0, 3] = 1
        mask = torch.ones(bs, T, 1)
        mask[1, 4:] = 0
        mask[:, 1:] = mask[:, 1:] * (1 - terminated[:, :-1])

        mac_out = mac_forward(agent, obs)
        chosen = torch.gather(mac_out[:, :-1], dim=3, index=actions).squeeze(3)
        with torch.no_grad():
            target_mac_out = mac_forward(target_agent, obs)[:, 1:]
            target_mac_out[avail[:, 1:] == 0] = -9999999
            mac_out_detach = mac_out.clone().detach()
            mac_out_detach[avail == 0] = -9999999
            cur_max_actions = mac_out_detach[:, 1:].max(dim=3, keepdim=True)[1]
            target_max_qvals = torch.gather(target_mac_out, 3, cur_max_actions).squeeze(3)
            target_max_qvals = target_mixer(target_max_qvals, state[:, 1:])
        chosen_tot = mixer(chosen, state[:, :-1])
        targets = rewards + 0.99 * (1 - terminated) * target_max_qvals
        td_error = chosen_tot - targets.detach()
        mask = mask.expand_as(td_error)
        masked_td = td_error * mask
        loss = (masked_td ** 2).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(params, 10.0)
        opt.step()
        if it % 2 == 1:
            target_agent.load_state_dict(agent.state_dict())
            target_mixer.load_state_dict(mixer.state_dict())
        res["losses"].append(loss.item())
        res["grad_norms"].append(grad_norm)
        res["q_tot"].append((chosen_tot * mask).sum().item() / (mask.sum().item() * n_agents))
    res["w_hyper"] = mixer.hyper_w_1[2].weight
    res["gru_w_hh"] = agent.rnn.weight_hh
    res["target_fc2"] = target_agent.fc2.weight
    res["max_actions"] = cur_max_actions.flatten().tolist()
    # monotonicity: dQ_tot / dQ_a >= 0 everywhere
    qs = normal(torch, rng, 2, 1, n_agents).requires_grad_(True)
    g, = torch.autograd.grad(mixer(qs, normal(torch, rng, 2, 1, state_dim)).sum(), qs)
    res["mono"] = [bool((g >= 0).all())]
    res["mono_grad"] = g
    return res


def maddpg_program(torch):
    """MADDPG with discrete actions: per-agent actors output logits, Gumbel-softmax with NumPy
    Gumbel noise (soft and straight-through hard), centralised critics on all observations and
    actions, target policies' onehot argmax, soft updates by hand and by _foreach_lerp_,
    Adam, grad clipping; F.gumbel_softmax itself checked for shape, one-hotness and
    reproducibility under manual_seed."""
    rng = np.random.default_rng(7)
    nn, F = torch.nn, torch.nn.functional
    n, B, obs_dim, n_act = 2, 8, 5, 3

    def mlp(i, o):
        return nn.Sequential(nn.Linear(i, 32), nn.LeakyReLU(0.01), nn.Linear(32, 32),
                             nn.LeakyReLU(0.01), nn.Linear(32, o))

    def onehot_from_logits(logits):
        return (logits == logits.max(1, keepdim=True)[0]).float()

    def gumbel_softmax(logits, gumbel, temperature=1.0, hard=False):
        y = F.softmax((logits + gumbel) / temperature, dim=1)
        if hard:
            y_hard = onehot_from_logits(y)
            y = (y_hard - y).detach() + y
        return y

    def gumbel(shape, eps=1e-20):
        u = torch.from_numpy(rng.random(shape).astype(np.float32))
        return -torch.log(-torch.log(u + eps) + eps)

    actors = [mlp(obs_dim, n_act) for _ in range(n)]
    critics = [mlp(n * (obs_dim + n_act), 1) for _ in range(n)]
    for m in actors + critics:
        fill_(torch, m, rng, 0.3)
    t_actors, t_critics = copy.deepcopy(actors), copy.deepcopy(critics)
    a_opts = [torch.optim.Adam(a.parameters(), lr=1e-2) for a in actors]
    c_opts = [torch.optim.Adam(c.parameters(), lr=1e-2) for c in critics]
    res = {"vf_loss": [], "pol_loss": []}
    tau, gamma = 0.05, 0.95
    for it in range(2):
        obs = [normal(torch, rng, B, obs_dim) for _ in range(n)]
        nobs = [normal(torch, rng, B, obs_dim) for _ in range(n)]
        acs = [F.one_hot(torch.from_numpy(rng.integers(0, n_act, B)), n_act).float()
               for _ in range(n)]
        rews = normal(torch, rng, n, B)
        dones = torch.from_numpy((rng.random((n, B)) < 0.2).astype(np.float32))
        for i in range(n):
            c_opts[i].zero_grad()
            all_trgt_acs = [onehot_from_logits(pi(nob)) for pi, nob in zip(t_actors, nobs)]
            trgt_vf_in = torch.cat((*nobs, *all_trgt_acs), dim=1)
            target_value = (rews[i].view(-1, 1) + gamma * t_critics[i](trgt_vf_in)
                            * (1 - dones[i].view(-1, 1)))
            actual_value = critics[i](torch.cat((*obs, *acs), dim=1))
            vf_loss = nn.MSELoss()(actual_value, target_value.detach())
            vf_loss.backward()
            torch.nn.utils.clip_grad_norm_(critics[i].parameters(), 0.5)
            c_opts[i].step()

            a_opts[i].zero_grad()
            curr_pol_out = actors[i](obs[i])
            curr_pol_vf_in = gumbel_softmax(curr_pol_out, gumbel(tuple(curr_pol_out.shape)),
                                            hard=True)
            all_pol_acs = []
            for j, (pi, ob) in enumerate(zip(actors, obs)):
                if j == i:
                    all_pol_acs.append(curr_pol_vf_in)
                else:
                    all_pol_acs.append(onehot_from_logits(pi(ob)))
            vf_in = torch.cat((*obs, *all_pol_acs), dim=1)
            pol_loss = -critics[i](vf_in).mean()
            pol_loss = pol_loss + (curr_pol_out ** 2).mean() * 1e-3
            pol_loss.backward()
            torch.nn.utils.clip_grad_norm_(actors[i].parameters(), 0.5)
            a_opts[i].step()
            res["vf_loss"].append(vf_loss.item())
            res["pol_loss"].append(pol_loss.item())
        with torch.no_grad():
            for tgt, src in zip(t_critics, critics):
                for tp, p in zip(tgt.parameters(), src.parameters()):
                    tp.data.copy_(tp.data * (1.0 - tau) + p.data * tau)
            for tgt, src in zip(t_actors, actors):
                torch._foreach_lerp_(list(tgt.parameters()), list(src.parameters()), tau)
    res["actor0"] = actors[0][4].weight
    res["critic1"] = critics[1][0].weight
    res["t_actor1"] = t_actors[1][2].bias
    res["t_critic0"] = t_critics[0][4].weight
    soft = gumbel_softmax(actors[0](obs[0]), gumbel((B, n_act)), temperature=0.5)
    res["soft"] = soft
    logits = actors[1](obs[1]).detach().requires_grad_()
    torch.manual_seed(0)
    y = F.gumbel_softmax(logits, tau=0.7, hard=True)
    torch.manual_seed(0)
    y2 = F.gumbel_softmax(logits, tau=0.7, hard=True)
    res["gs_shape"] = list(y.shape)
    res["gs_onehot"] = [bool((y.sum(-1) == 1).all()), bool(((y == 0) | (y == 1)).all()),
                        bool(torch.equal(y, y2)), y.requires_grad]
    g, = torch.autograd.grad((y * torch.arange(n_act).float()).sum(), logits)
    res["gs_grad_rows_sum_zero"] = [bool(torch.allclose(g.sum(-1), torch.zeros(B),
                                                        atol=1e-6))]
    return res


def mappo_program(torch):
    """on-policy's MAPPO: ValueNorm (running mean / mean-of-squares with debiasing term,
    normalize and denormalize), a PopArt value head that rescales its weights under no_grad
    when its statistics move, clipped value loss with Huber, PPO clipped surrogate with
    active masks, entropy bonus, get_grad_norm, Adam with eps 1e-5."""
    rng = np.random.default_rng(8)
    nn, F = torch.nn, torch.nn.functional
    B, obs_dim, n_act = 16, 6, 4

    class ValueNorm(nn.Module):
        def __init__(self, input_shape, beta=0.99999, epsilon=1e-5):
            super().__init__()
            self.beta, self.epsilon = beta, epsilon
            self.running_mean = nn.Parameter(torch.zeros(input_shape), requires_grad=False)
            self.running_mean_sq = nn.Parameter(torch.zeros(input_shape), requires_grad=False)
            self.debiasing_term = nn.Parameter(torch.tensor(0.0), requires_grad=False)

        def running_mean_var(self):
            debiased_mean = self.running_mean / self.debiasing_term.clamp(min=self.epsilon)
            debiased_mean_sq = self.running_mean_sq / self.debiasing_term.clamp(
                min=self.epsilon)
            debiased_var = (debiased_mean_sq - debiased_mean ** 2).clamp(min=1e-2)
            return debiased_mean, debiased_var

        @torch.no_grad()
        def update(self, input_vector):
            batch_mean = input_vector.mean(dim=(0,))
            batch_sq_mean = (input_vector ** 2).mean(dim=(0,))
            weight = self.beta
            self.running_mean.mul_(weight).add_(batch_mean * (1.0 - weight))
            self.running_mean_sq.mul_(weight).add_(batch_sq_mean * (1.0 - weight))
            self.debiasing_term.mul_(weight).add_(1.0 * (1.0 - weight))

        def normalize(self, input_vector):
            mean, var = self.running_mean_var()
            return (input_vector - mean[(None,) * 1]) / torch.sqrt(var)[(None,) * 1]

        def denormalize(self, input_vector):
            mean, var = self.running_mean_var()
            return input_vector * torch.sqrt(var)[(None,) * 1] + mean[(None,) * 1]

    class PopArt(nn.Module):
        def __init__(self, in_f, out_f, beta=0.999):
            super().__init__()
            self.beta = beta
            self.weight = nn.Parameter(torch.Tensor(out_f, in_f))
            self.bias = nn.Parameter(torch.Tensor(out_f))
            self.stddev = nn.Parameter(torch.ones(out_f), requires_grad=False)
            self.mean = nn.Parameter(torch.zeros(out_f), requires_grad=False)
            self.mean_sq = nn.Parameter(torch.zeros(out_f), requires_grad=False)
            self.debiasing_term = nn.Parameter(torch.tensor(0.0), requires_grad=False)

        def forward(self, x):
            return F.linear(x, self.weight, self.bias)

        @torch.no_grad()
        def update(self, v):
            old_mean, old_stddev = self.mean.data.clone(), self.stddev.data.clone()
            self.mean.mul_(self.beta).add_(v.mean(0) * (1 - self.beta))
            self.mean_sq.mul_(self.beta).add_((v ** 2).mean(0) * (1 - self.beta))
            self.debiasing_term.mul_(self.beta).add_(1.0 * (1.0 - self.beta))
            self.stddev.data = (self.mean_sq - self.mean ** 2).sqrt().clamp(1e-4, 1e6)
            self.weight.data = (self.weight.data * old_stddev.unsqueeze(-1)
                                / self.stddev.unsqueeze(-1))
            self.bias.data = (old_stddev * self.bias + old_mean - self.mean) / self.stddev

    actor = nn.Sequential(nn.LayerNorm(obs_dim), nn.Linear(obs_dim, 32), nn.Tanh(),
                          nn.Linear(32, n_act))
    critic_base = nn.Sequential(nn.LayerNorm(obs_dim), nn.Linear(obs_dim, 32), nn.Tanh())
    v_out, popart = nn.Linear(32, 1), PopArt(32, 1)
    fill_(torch, list(actor.parameters()) + list(critic_base.parameters())
          + list(v_out.parameters()) + [popart.weight, popart.bias], rng, 0.3)
    vnorm = ValueNorm(1)
    a_opt = torch.optim.Adam(actor.parameters(), lr=5e-3, eps=1e-5)
    c_opt = torch.optim.Adam(list(critic_base.parameters()) + list(v_out.parameters())
                             + list(popart.parameters()), lr=5e-3, eps=1e-5)

    def get_grad_norm(it):
        sum_grad = 0
        for x in it:
            if x.grad is None:
                continue
            sum_grad += x.grad.norm() ** 2
        return torch.sqrt(sum_grad)

    res = {"value_loss": [], "policy_loss": [], "ratio_mean": [], "actor_gn": [], "popart_w": []}
    clip, value_clip = 0.2, 0.2
    for _ in range(3):
        obs = normal(torch, rng, B, obs_dim)
        actions = torch.from_numpy(rng.integers(0, n_act, (B, 1)))
        old_logp = normal(torch, rng, B, 1) * 0.1 - 1.4
        value_preds = normal(torch, rng, B, 1)
        returns = normal(torch, rng, B, 1) * 3 + 1
        adv = normal(torch, rng, B, 1)
        active = torch.from_numpy((rng.random((B, 1)) > 0.2).astype(np.float32))
        adv = (adv - adv.mean()) / (adv.std() + 1e-5)

        dist = torch.distributions.Categorical(logits=actor(obs))
        logp = dist.log_prob(actions.squeeze(-1)).unsqueeze(-1)
        entropy = (dist.entropy().unsqueeze(-1) * active).sum() / active.sum()
        imp = torch.exp(logp - old_logp)
        surr1 = imp * adv
        surr2 = torch.clamp(imp, 1.0 - clip, 1.0 + clip) * adv
        policy_loss = (-torch.sum(torch.min(surr1, surr2), dim=-1, keepdim=True)
                       * active).sum() / active.sum()
        a_opt.zero_grad()
        (policy_loss - 0.01 * entropy).backward()
        res["actor_gn"].append(get_grad_norm(actor.parameters()))
        nn.utils.clip_grad_norm_(actor.parameters(), 10.0)
        a_opt.step()

        h = critic_base(obs)
        values = v_out(h)
        value_pred_clipped = value_preds + (values - value_preds).clamp(-value_clip, value_clip)
        vnorm.update(returns)
        error_clipped = vnorm.normalize(returns) - value_pred_clipped
        error_original = vnorm.normalize(returns) - values
        vl_clipped = F.huber_loss(error_clipped, torch.zeros_like(error_clipped), reduction="none",
                                  delta=10.0)
        vl_original = F.huber_loss(error_original, torch.zeros_like(error_original),
                                   reduction="none", delta=10.0)
        value_loss = torch.max(vl_original, vl_clipped)
        value_loss = (value_loss * active).sum() / active.sum()
        popart.update(returns)
        pa_target = (returns - popart.mean) / popart.stddev
        value_loss = value_loss + F.mse_loss(popart(h), pa_target)
        c_opt.zero_grad()
        value_loss.backward()
        c_opt.step()
        res["value_loss"].append(value_loss.item())
        res["policy_loss"].append(policy_loss.item())
        res["ratio_mean"].append(imp.mean().item())
        res["popart_w"].append(popart.weight.clone())
    res["vn_mean_var"] = list(vnorm.running_mean_var())
    res["denorm"] = vnorm.denormalize(values.detach())
    res["popart_stats"] = [popart.mean, popart.stddev, popart.debiasing_term]
    res["buffers_trainable"] = [p.requires_grad for p in vnorm.parameters()]
    res["n_params"] = [len(list(popart.parameters())), len(popart.state_dict())]
    res["actor_w"] = actor[3].weight
    return res


PROGRAMS = [qmix_program, maddpg_program, mappo_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # pymarl's RMSprop divides by the root of tiny squared gradients, amplifying the
        # float32 noise (1e-7 relative in the first step's gradients) over four steps
        "qmix_program": (1e-4, 1e-5),
    })
