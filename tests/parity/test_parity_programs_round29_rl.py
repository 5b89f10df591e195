"""Value-based and actor-critic agents written as their reference repositories write them in
torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy weights, data
and noise: Rainbow (Kaixhin's C51 projection by floor/ceil and index_add_ on flattened offsets,
NoisyLinear with factorised Gaussian noise in registered buffers, a NumPy sum-tree prioritized
replay fed by ``loss.detach().cpu().numpy()``), QR-DQN and IQN (quantile Huber loss, cosine tau
embeddings) and TD3 (target policy smoothing, delayed actor updates, Polyak averaging by lerp_,
by mul_/add_ and by SB3's ``out=`` form), R2D2 (packed sequences after a no_grad burn-in, value
rescaling, sequence priorities) and Munchausen-DQN. Sibling files: _returns (V-trace, Retrace,
n-step, GAE, A3C), _structured (HMM, Viterbi, semi-Markov CRF, soft-DTW, sorting networks);
_fixes pins what they found."""

import copy
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests
from tests.parity.test_parity_programs_round28_offline_rl import td3_nets

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


class SumTree:
    """The sum tree of prioritized replay, in NumPy as the repositories keep it."""

    def __init__(self, capacity):
        self.capacity, self.index, self.full = capacity, 0, False
        self.tree = np.zeros(2 * capacity - 1, dtype=np.float32)
        self.max = 1.0

    def _propagate(self, index):
        parents = (index - 1) // 2
        unique = np.unique(parents)
        children = unique * 2 + np.expand_dims([1, 2], axis=1)
        self.tree[unique] = np.sum(self.tree[children], axis=0)
        if unique[0] != 0:
            self._propagate(unique)

    def update(self, indices, values):
        self.tree[indices] = values
        self._propagate(indices)
        self.max = max(np.max(values), self.max)

    def append(self, value):
        self.update(np.array([self.index + self.capacity - 1]), np.array([value]))
        self.index = (self.index + 1) % self.capacity
        self.full = self.full or self.index == 0

    def find(self, values):
        index = np.zeros(values.shape, dtype=np.int64)
        while True:
            children = index[None] * 2 + np.expand_dims([1, 2], axis=1)
            if children[0, 0] >= self.tree.shape[0]:
                return index - (self.capacity - 1)
            left = self.tree[children[0]]
            go_right = np.greater(values, left).astype(np.int64)
            index = children[go_right, np.arange(index.size)]
            values = values - go_right * left

    def total(self):
        return self.tree[0]


def _noisy_linear(torch, rng):
    """Kaixhin's NoisyLinear, its noise drawn from `rng` instead of torch.randn."""
    nn, F = torch.nn, torch.nn.functional

    class NoisyLinear(nn.Module):
        def __init__(self, in_features, out_features, std_init=0.5):
            super().__init__()
            self.in_features, self.out_features = in_features, out_features
            self.std_init = std_init
            self.weight_mu = nn.Parameter(torch.empty(out_features, in_features))
            self.weight_sigma = nn.Parameter(torch.empty(out_features, in_features))
            self.register_buffer("weight_epsilon", torch.empty(out_features, in_features))
            self.bias_mu = nn.Parameter(torch.empty(out_features))
            self.bias_sigma = nn.Parameter(torch.empty(out_features))
            self.register_buffer("bias_epsilon", torch.empty(out_features))
            self.reset_parameters()
            self.reset_noise()

        def reset_parameters(self):
            mu_range = 1 / math.sqrt(self.in_features)
            shape = self.weight_mu.shape
            self.weight_mu.data.copy_(torch.from_numpy(
                rng.uniform(-mu_range, mu_range, tuple(shape)).astype(np.float32)))
            self.weight_sigma.data.fill_(self.std_init / math.sqrt(self.in_features))
            self.bias_mu.data.copy_(torch.from_numpy(
                rng.uniform(-mu_range, mu_range, self.out_features).astype(np.float32)))
            self.bias_sigma.data.fill_(self.std_init / math.sqrt(self.out_features))

        def _scale_noise(self, size):
            x = torch.from_numpy(rng.standard_normal(size).astype(np.float32))
            return x.sign().mul_(x.abs().sqrt_())

        def reset_noise(self):
            epsilon_in = self._scale_noise(self.in_features)
            epsilon_out = self._scale_noise(self.out_features)
            self.weight_epsilon.copy_(epsilon_out.ger(epsilon_in))
            self.bias_epsilon.copy_(epsilon_out)

        def forward(self, input):
            if self.training:
                return F.linear(input, self.weight_mu + self.weight_sigma * self.weight_epsilon,
                                self.bias_mu + self.bias_sigma * self.bias_epsilon)
            return F.linear(input, self.weight_mu, self.bias_mu)
    return NoisyLinear


def rainbow_program(torch):
    """Kaixhin's Rainbow learn step: a dueling noisy C51 head, double-Q next actions, the
    categorical projection (clamp, floor/ceil, the l == u fix-ups by masked -=/+=, index_add_
    into ``m.view(-1)`` at flattened offsets from linspace), importance-weighted cross entropy,
    clip_grad_norm_, priorities written back into a NumPy sum tree, reset_noise, and the
    eval-mode greedy action."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2901)
    S, A, atoms, B, H = 4, 3, 11, 6, 16
    V_min, V_max, gamma, n = -3.0, 3.0, 0.9, 3
    NoisyLinear = _noisy_linear(torch, rng)

    class DQN(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(S, H)
            self.fc_h_v = NoisyLinear(H, H, std_init=0.1)
            self.fc_h_a = NoisyLinear(H, H, std_init=0.1)
            self.fc_z_v = NoisyLinear(H, atoms, std_init=0.1)
            self.fc_z_a = NoisyLinear(H, A * atoms, std_init=0.1)

        def forward(self, x, log=False):
            x = F.relu(self.fc(x))
            v = self.fc_z_v(F.relu(self.fc_h_v(x)))
            a = self.fc_z_a(F.relu(self.fc_h_a(x)))
            v, a = v.view(-1, 1, atoms), a.view(-1, A, atoms)
            q = v + a - a.mean(1, keepdim=True)
            if log:
                return F.log_softmax(q, dim=2)
            return F.softmax(q, dim=2)

        def reset_noise(self):
            for name, module in self.named_children():
                if "fc_" in name and name != "fc":
                    module.reset_noise()

    online = DQN()
    fill_(torch, online.fc, rng)
    target = DQN()
    target.load_state_dict(online.state_dict())
    target.train()
    for param in target.parameters():
        param.requires_grad = False
    support = torch.linspace(V_min, V_max, atoms)
    delta_z = (V_max - V_min) / (atoms - 1)
    opt = torch.optim.Adam(online.parameters(), lr=1e-3, eps=1.5e-4)
    tree = SumTree(16)
    for _ in range(16):
        tree.append(tree.max)
    res = {"loss": [], "priorities": [], "projected": [], "weights": []}
    for step in range(3):
        segment = tree.total() / B
        samples = rng.uniform(0.0, segment, B) + np.arange(B) * segment
        idxs = tree.find(samples.astype(np.float32))
        probs = tree.tree[idxs + tree.capacity - 1] / tree.total()
        weights = (tree.capacity * probs) ** -0.4
        weights = torch.tensor(weights / weights.max(), dtype=torch.float32)
        states = normal(torch, rng, B, S)
        next_states = normal(torch, rng, B, S)
        actions = torch.from_numpy(rng.integers(0, A, B))
        returns = normal(torch, rng, B)
        nonterminals = torch.from_numpy((rng.random((B, 1)) > 0.3).astype(np.float32))

        log_ps = online(states, log=True)
        log_ps_a = log_ps[range(B), actions]
        with torch.no_grad():
            pns = online(next_states)
            dns = support.expand_as(pns) * pns
            argmax_indices_ns = dns.sum(2).argmax(1)
            target.reset_noise()
            pns = target(next_states)
            pns_a = pns[range(B), argmax_indices_ns]
            Tz = returns.unsqueeze(1) + nonterminals * (gamma ** n) * support.unsqueeze(0)
            Tz = Tz.clamp(min=V_min, max=V_max)
            b = (Tz - V_min) / delta_z
            l, u = b.floor().to(torch.int64), b.ceil().to(torch.int64)  # noqa: E741
            l[(u > 0) * (l == u)] -= 1
            u[(l < (atoms - 1)) * (l == u)] += 1
            m = states.new_zeros(B, atoms)
            offset = torch.linspace(0, ((B - 1) * atoms), B).unsqueeze(1).expand(
                B, atoms).to(actions)
            m.view(-1).index_add_(0, (l + offset).view(-1), (pns_a * (u.float() - b)).view(-1))
            m.view(-1).index_add_(0, (u + offset).view(-1), (pns_a * (b - l.float())).view(-1))
        loss = -torch.sum(m * log_ps_a, 1)
        online.zero_grad()
        (weights * loss).mean().backward()
        nn.utils.clip_grad_norm_(online.parameters(), 10)
        opt.step()
        tree.update(idxs + tree.capacity - 1, loss.detach().cpu().numpy() ** 0.5)
        online.reset_noise()
        res["loss"].append(loss.detach())
        res["projected"].append(m)
        res["weights"].append(weights)
        res["priorities"].append(torch.from_numpy(tree.tree.copy()))
        res["idxs_" + str(step)] = [int(i) for i in idxs]
        res["l_dtype_" + str(step)] = [str(l.dtype).rsplit(".", 1)[-1]]
    online.eval()
    with torch.no_grad():
        q = (online(normal(torch, rng, 5, S)) * support).sum(2)
        res["greedy"] = q.argmax(1)
        res["q"] = q
    res["params"] = list(online.parameters())
    res["buffers"] = [name for name, _ in online.named_buffers()]
    res["epsilons"] = list(target.buffers())
    return res


def quantile_huber_loss(torch, current, target, taus, kappa=1.0):
    """The QR-DQN/IQN loss: pairwise TD errors, Huber, and the |tau - 1{u < 0}| weight."""
    td = target.unsqueeze(1) - current.unsqueeze(2)
    huber = torch.where(td.abs() <= kappa, 0.5 * td.pow(2), kappa * (td.abs() - 0.5 * kappa))
    weight = torch.abs(taus - (td.detach() < 0).float())
    return (weight * huber / kappa).sum(dim=1).mean(dim=1)


def qr_dqn_program(torch):
    """QR-DQN as the quantile-regression repositories write it: N quantiles per action from a
    view, gather of the taken action's quantiles, the Double-DQN target from the mean over
    quantiles, the quantile Huber loss (also as smooth_l1_loss with beta=1), RMSprop, and a
    hard target update by load_state_dict every other step."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2902)
    S, A, N, B = 5, 3, 8, 4
    net = nn.Sequential(nn.Linear(S, 24), nn.ReLU(), nn.Linear(24, A * N))
    fill_(torch, net, rng)
    target_net = copy.deepcopy(net)
    opt = torch.optim.RMSprop(net.parameters(), lr=1e-3, alpha=0.95, eps=0.01, centered=True)
    taus = ((torch.arange(N, dtype=torch.float32) + 0.5) / N).view(1, N, 1)
    res = {"loss": [], "loss_smooth": [], "grads": []}
    for step in range(3):
        states, next_states = normal(torch, rng, B, S), normal(torch, rng, B, S)
        actions = torch.from_numpy(rng.integers(0, A, (B, 1)))
        rewards, dones = normal(torch, rng, B, 1), torch.from_numpy(
            (rng.random((B, 1)) < 0.25).astype(np.float32))
        quantiles = net(states).view(B, A, N)
        current = quantiles.gather(1, actions.unsqueeze(-1).expand(B, 1, N)).squeeze(1)
        with torch.no_grad():
            next_q = net(next_states).view(B, A, N).mean(2)
            best = next_q.max(1, keepdim=True)[1]
            next_quant = target_net(next_states).view(B, A, N)
            next_quant = next_quant[torch.arange(B), best.squeeze(1)]
            target = rewards + 0.99 * (1 - dones) * next_quant
        loss = quantile_huber_loss(torch, current, target, taus).mean()
        td = target.unsqueeze(1) - current.unsqueeze(2)
        huber = F.smooth_l1_loss(current.unsqueeze(2).expand(B, N, N),
                                 target.unsqueeze(1).expand(B, N, N), reduction="none", beta=1.0)
        smooth = ((taus - (td.detach() < 0).float()).abs() * huber).sum(1).mean()
        opt.zero_grad()
        loss.backward(retain_graph=True)
        res["grads"].append(net[2].weight.grad.clone())
        opt.step()
        if step % 2 == 1:
            target_net.load_state_dict(net.state_dict())
        res["loss"].append(loss.item())
        res["loss_smooth"].append(smooth.item())
    res["params"] = list(net.parameters())
    res["target"] = list(target_net.parameters())
    res["state"] = [opt.state[p]["grad_avg"] for p in net.parameters()]
    return res


def iqn_program(torch):
    """IQN's quantile network: taus from NumPy, the cosine embedding cos(pi * i * tau) of
    arange(1, n_cos + 1) through a Linear + ReLU, multiplied into the state embedding, the
    quantile Huber loss against target taus, Adam with gradient clipping by value, and the
    CVaR action choice from taus scaled by eta."""
    nn = torch.nn
    rng = np.random.default_rng(2903)
    S, A, B, N, Np, n_cos, H = 4, 2, 3, 6, 5, 8, 12

    class IQN(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = nn.Linear(S, H)
            self.cos_embedding = nn.Linear(n_cos, H)
            self.ff_1 = nn.Linear(H, H)
            self.ff_2 = nn.Linear(H, A)
            self.register_buffer("pis", torch.FloatTensor(
                [np.pi * i for i in range(1, n_cos + 1)]).view(1, 1, n_cos))

        def calc_cos(self, taus):
            cos = torch.cos(taus.unsqueeze(-1) * self.pis)
            assert cos.shape == (taus.shape[0], taus.shape[1], n_cos), "cos shape is incorrect"
            return cos

        def forward(self, input, taus):
            batch_size, num_tau = taus.shape
            x = torch.relu(self.head(input))
            cos = self.calc_cos(taus)
            cos_x = torch.relu(self.cos_embedding(cos.view(batch_size * num_tau, n_cos))).view(
                batch_size, num_tau, H)
            x = (x.unsqueeze(1) * cos_x).view(batch_size * num_tau, H)
            x = torch.relu(self.ff_1(x))
            return self.ff_2(x).view(batch_size, num_tau, A)

    net, tgt = IQN(), IQN()
    fill_(torch, net, rng)
    tgt.load_state_dict(net.state_dict())
    opt = torch.optim.Adam(net.parameters(), lr=5e-4)
    res = {"loss": [], "cvar_action": []}
    for _ in range(3):
        s, s2 = normal(torch, rng, B, S), normal(torch, rng, B, S)
        a = torch.from_numpy(rng.integers(0, A, (B, 1)))
        r = normal(torch, rng, B, 1)
        taus = torch.from_numpy(rng.random((B, N)).astype(np.float32))
        taus2 = torch.from_numpy(rng.random((B, Np)).astype(np.float32))
        with torch.no_grad():
            q_next = tgt(s2, taus2)
            action_idx = q_next.mean(dim=1).argmax(dim=1, keepdim=True)
            q_next = q_next.gather(2, action_idx.unsqueeze(-1).expand(B, Np, 1)).transpose(1, 2)
            q_target = r.unsqueeze(-1) + 0.99 * q_next
        q_exp = net(s, taus).gather(2, a.unsqueeze(-1).expand(B, N, 1))
        td = q_target - q_exp
        assert td.shape == (B, N, Np), "wrong td error shape"
        huber = torch.where(td.abs() <= 1.0, 0.5 * td.pow(2), 1.0 * (td.abs() - 0.5))
        quantile_l = abs(taus.unsqueeze(-1) - (td.detach() < 0).float()) * huber / 1.0
        loss = quantile_l.sum(dim=1).mean(dim=1).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(net.parameters(), 0.5)
        opt.step()
        res["loss"].append(loss.item())
        with torch.no_grad():
            eta_taus = torch.from_numpy(rng.random((1, 16)).astype(np.float32)) * 0.25
            res["cvar_action"].append(net(s[:1], eta_taus).mean(1).argmax().item())
    res["params"] = list(net.parameters())
    res["pis"] = net.pis
    res["state_keys"] = list(net.state_dict().keys())
    return res


def td3_program(torch):
    """Fujimoto's TD3: twin critics in one module, target policy smoothing with clipped NumPy
    noise, min of the twin targets, delayed actor updates through ``critic.Q1``, and three soft
    target updates that must agree: ``lerp_`` under no_grad, ``.data.mul_().add_()``, and
    SB3's ``torch.mul(..., out=)``/``torch.add(..., alpha=, out=)``; the target nets stay
    requires_grad=False through ``_foreach_lerp_``."""
    F = torch.nn.functional
    rng = np.random.default_rng(2904)
    S, A, B, max_action = 5, 2, 8, 2.0

    Actor, Critic = td3_nets(torch, S, A, max_action)

    actor, critic = Actor(), Critic()
    fill_(torch, actor, rng)
    fill_(torch, critic, rng)
    actor_target, critic_target = copy.deepcopy(actor), copy.deepcopy(critic)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=3e-4)
    critic_opt = torch.optim.Adam(critic.parameters(), lr=3e-4)
    tau, res = 0.005, {"critic": [], "actor": [], "noise": []}
    for it in range(1, 5):
        state, next_state = normal(torch, rng, B, S), normal(torch, rng, B, S)
        action = normal(torch, rng, B, A).clamp(-max_action, max_action)
        reward, not_done = normal(torch, rng, B, 1), torch.from_numpy(
            (rng.random((B, 1)) > 0.1).astype(np.float32))
        with torch.no_grad():
            noise = (normal(torch, rng, B, A) * 0.2).clamp(-0.5, 0.5)
            next_action = (actor_target(next_state) + noise).clamp(-max_action, max_action)
            target_Q1, target_Q2 = critic_target(next_state, next_action)
            target_Q = torch.min(target_Q1, target_Q2)
            target_Q = reward + not_done * 0.99 * target_Q
        current_Q1, current_Q2 = critic(state, action)
        critic_loss = F.mse_loss(current_Q1, target_Q) + F.mse_loss(current_Q2, target_Q)
        critic_opt.zero_grad()
        critic_loss.backward()
        critic_opt.step()
        res["critic"].append(critic_loss.item())
        res["noise"].append(next_action)
        if it % 2 == 0:
            actor_loss = -critic.Q1(state, actor(state)).mean()
            actor_opt.zero_grad()
            actor_loss.backward()
            actor_opt.step()
            res["actor"].append(actor_loss.item())
            with torch.no_grad():
                for param, target_param in zip(critic.parameters(), critic_target.parameters()):
                    target_param.lerp_(param, tau)
            for param, target_param in zip(actor.parameters(), actor_target.parameters()):
                target_param.data.mul_(1 - tau).add_(param.data, alpha=tau)
            with torch.no_grad():
                for param, target_param in zip(actor.parameters(), actor_target.parameters()):
                    torch.mul(target_param.data, 1 - tau, out=target_param.data)
                    torch.add(target_param.data, param.data, alpha=tau, out=target_param.data)
            with torch.no_grad():
                torch._foreach_lerp_(list(critic_target.parameters()),
                                     list(critic.parameters()), tau)
    res["actor_target"] = list(actor_target.parameters())
    res["critic_target"] = list(critic_target.parameters())
    res["target_flags"] = [p.requires_grad for p in critic_target.parameters()]
    res["target_grads"] = [p.grad is None for p in critic_target.parameters()]
    res["params"] = list(actor.parameters()) + list(critic.parameters())
    res["steps"] = [int(actor_opt.state[p]["step"]) for p in actor.parameters()]
    return res


def r2d2_program(torch):
    """R2D2's learner: sequences of unequal length packed by pack_padded_sequence(
    enforce_sorted=False) through an LSTM after a burn-in under no_grad whose hidden state is
    detached, the invertible value rescaling h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x and its
    closed-form inverse on the n-step double-Q target, a masked TD loss, and sequence
    priorities eta * max|td| + (1 - eta) * mean|td| from pad_packed_sequence's output."""
    nn, F = torch.nn, torch.nn.functional
    pack = nn.utils.rnn.pack_padded_sequence
    unpack = nn.utils.rnn.pad_packed_sequence
    rng = np.random.default_rng(2905)
    S, A, H, B, burn, T, n, gamma, eps = 4, 3, 8, 3, 2, 6, 2, 0.97, 1e-3

    def h(x):
        return torch.sign(x) * (torch.sqrt(torch.abs(x) + 1) - 1) + eps * x

    def h_inv(x):
        return torch.sign(x) * (((torch.sqrt(1 + 4 * eps * (torch.abs(x) + 1 + eps)) - 1)
                                 / (2 * eps)) ** 2 - 1)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(S, H)
            self.lstm = nn.LSTM(H, H, batch_first=True)
            self.q = nn.Linear(H, A)

        def forward(self, x, lengths, hidden=None):
            z = F.relu(self.fc(x))
            packed = pack(z, lengths, batch_first=True, enforce_sorted=False)
            out, hidden = self.lstm(packed, hidden)
            out, out_lengths = unpack(out, batch_first=True, total_length=x.shape[1])
            return self.q(out), hidden, out_lengths

    online, target = Net(), Net()
    fill_(torch, online, rng)
    target.load_state_dict(online.state_dict())
    opt = torch.optim.Adam(online.parameters(), lr=1e-3, eps=1e-3)
    res = {"loss": [], "priorities": [], "h_roundtrip": []}
    for _ in range(2):
        burn_obs = normal(torch, rng, B, burn, S)
        obs = normal(torch, rng, B, T + n, S)
        lengths = torch.tensor([T + n, T + n - 2, T + n - 3])
        actions = torch.from_numpy(rng.integers(0, A, (B, T)))
        rewards = normal(torch, rng, B, T)
        with torch.no_grad():
            _, hidden, _ = online(burn_obs, torch.full((B,), burn))
            _, t_hidden, _ = target(burn_obs, torch.full((B,), burn))
        hidden = tuple(x.detach() for x in hidden)
        q, _, out_lengths = online(obs, lengths, hidden)
        with torch.no_grad():
            q_next_online = q.detach()[:, n:n + T]
            q_target, _, _ = target(obs, lengths, t_hidden)
            best = q_next_online.argmax(-1, keepdim=True)
            boot = q_target[:, n:n + T].gather(-1, best).squeeze(-1)
            discounts = gamma ** torch.arange(n, dtype=torch.float32)
            nstep = (rewards.unfold(1, n, 1) * discounts).sum(-1)
            nstep = F.pad(nstep, (0, n - 1))
            y = h(nstep + gamma ** n * h_inv(boot))
        q_taken = q[:, :T].gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        mask = (torch.arange(T).unsqueeze(0) + n < lengths.unsqueeze(1)).float()
        td = (y - q_taken) * mask
        loss = 0.5 * (td ** 2).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(online.parameters(), 40.0)
        opt.step()
        abs_td = td.detach().abs()
        priorities = 0.9 * abs_td.max(dim=1)[0] + 0.1 * abs_td.sum(1) / mask.sum(1)
        res["loss"].append(loss.item())
        res["priorities"].append(priorities)
        res["h_roundtrip"].append(h_inv(h(nstep)) - nstep)
        res["out_lengths"] = out_lengths
    res["params"] = list(online.parameters())
    return res


def munchausen_program(torch):
    """Munchausen-DQN: the soft target tau * logsumexp(q / tau) written by hand with the max
    subtracted, log-policies by log_softmax of q / tau, the Munchausen bonus alpha * clamp(tau *
    log pi(a|s), min=l0), a Huber loss via F.huber_loss, SGD with momentum, and the target net
    refreshed by a parameters_to_vector / vector_to_parameters copy."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2906)
    S, A, B, tau, alpha, l0, gamma = 5, 4, 8, 0.03, 0.9, -1.0, 0.99
    net = nn.Sequential(nn.Linear(S, 16), nn.ReLU(), nn.Linear(16, A))
    fill_(torch, net, rng)
    tgt = copy.deepcopy(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    res = {"loss": [], "bonus": []}
    for step in range(3):
        s, s2 = normal(torch, rng, B, S), normal(torch, rng, B, S)
        a = torch.from_numpy(rng.integers(0, A, (B, 1)))
        r, done = normal(torch, rng, B, 1), torch.from_numpy(
            (rng.random((B, 1)) < 0.2).astype(np.float32))
        with torch.no_grad():
            q_next = tgt(s2)
            v_next = q_next.max(1, keepdim=True)[0]
            logsum = torch.logsumexp((q_next - v_next) / tau, 1, keepdim=True)
            tau_log_pi_next = q_next - v_next - tau * logsum
            pi_next = F.softmax(q_next / tau, dim=1)
            soft = (pi_next * (q_next - tau_log_pi_next) * (1 - done)).sum(1, keepdim=True)
            q_s = tgt(s)
            tau_log_pi = q_s - q_s.max(1, keepdim=True)[0] - tau * torch.logsumexp(
                (q_s - q_s.max(1, keepdim=True)[0]) / tau, 1, keepdim=True)
            bonus = alpha * torch.clamp(tau_log_pi.gather(1, a), min=l0, max=0)
            target = r + bonus + gamma * soft
        q = net(s).gather(1, a)
        loss = F.huber_loss(q, target, delta=1.0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["bonus"].append(bonus)
        if step % 2 == 1:
            nn.utils.vector_to_parameters(nn.utils.parameters_to_vector(net.parameters()),
                                          tgt.parameters())
    res["params"] = list(net.parameters())
    res["target"] = list(tgt.parameters())
    res["target_grad"] = [p.requires_grad for p in tgt.parameters()]
    return res


PROGRAMS = [rainbow_program, qr_dqn_program, iqn_program, td3_program, r2d2_program,
            munchausen_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 matmul accumulation order over a few optimizer steps
        "rainbow_program": (1e-4, 1e-5),
        "qr_dqn_program": (1e-4, 1e-5),
        "iqn_program": (1e-4, 1e-5),
        "td3_program": (1e-4, 1e-5),
        "r2d2_program": (1e-4, 1e-5),
        "munchausen_program": (1e-4, 1e-5),
    })
