"""Model-based RL written as its reference repositories write it in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights: MuZero (the invertible
value transform h(x) and its inverse, categorical supports built with floor + scatter, an
unrolled dynamics network whose hidden state is scaled by a gradient hook, min-max normalised
value statistics, prioritised-replay importance weights), PETS (a probabilistic ensemble with
learned max/min log-variance bounded by softplus, batched ensemble linear layers, trajectory
sampling with CEM) and option-critic (termination gradient, intra-option policy gradient).
The sibling _explore covers RND, ICM, GAIL/AIRL, HER and AWR/AWAC; _fixes pins what they found."""

import copy
from abc import ABC, abstractmethod

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _scalar_to_support(torch, x, support_size, eps=0.001):
    """muzero-general's h(x) followed by the two-hot projection onto [-S, S]."""
    x = torch.sign(x) * (torch.sqrt(torch.abs(x) + 1) - 1) + eps * x
    x = torch.clamp(x, -support_size, support_size)
    floor = x.floor()
    prob = x - floor
    logits = torch.zeros(x.shape[0], x.shape[1], 2 * support_size + 1)
    logits.scatter_(2, (floor + support_size).long().unsqueeze(-1), (1 - prob).unsqueeze(-1))
    indexes = floor + support_size + 1
    prob = prob.masked_fill_(2 * support_size < indexes, 0.0)
    indexes = indexes.masked_fill_(2 * support_size < indexes, 0.0)
    logits.scatter_(2, indexes.long().unsqueeze(-1), prob.unsqueeze(-1))
    return logits


def _support_to_scalar(torch, logits, support_size, eps=0.001):
    """Expected value under the softmax, then h^-1."""
    probabilities = torch.softmax(logits, dim=1)
    support = (torch.tensor([x for x in range(-support_size, support_size + 1)])
               .expand(probabilities.shape).float().to(device=probabilities.device))
    x = torch.sum(support * probabilities, dim=1, keepdim=True)
    x = torch.sign(x) * (((torch.sqrt(1 + 4 * eps * (torch.abs(x) + 1 + eps)) - 1)
                          / (2 * eps)) ** 2 - 1)
    return x


def muzero_program(torch):
    """muzero-general's MuZeroFullyConnectedNetwork trained by its update_weights: unrolled
    dynamics with scale_gradient via a hook, categorical value/reward losses, priorities from
    |root value - target|, importance-sampling weights, and a MinMaxStats normaliser fed by
    a tiny pUCT selection."""
    rng = np.random.default_rng(0)
    nn = torch.nn
    B, obs_dim, A, H, S, K = 4, 6, 3, 8, 5, 3

    def mlp(i, hidden, o):
        layers, sizes = [], [i, *hidden, o]
        for a, b in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(a, b), nn.ELU()]
        return nn.Sequential(*layers[:-1])

    class AbstractNetwork(ABC, nn.Module):
        def __init__(self):
            super().__init__()

        @abstractmethod
        def initial_inference(self, observation):
            pass

        def get_weights(self):
            return {k: v.cpu() for k, v in self.state_dict().items()}

        def set_weights(self, weights):
            self.load_state_dict(weights)

    class Net(AbstractNetwork):
        def __init__(self):
            super().__init__()
            self.representation_network = mlp(obs_dim, [16], H)
            self.dynamics_encoded_state_network = mlp(H + A, [16], H)
            self.dynamics_reward_network = mlp(H, [16], 2 * S + 1)
            self.prediction_policy_network = mlp(H, [16], A)
            self.prediction_value_network = mlp(H, [16], 2 * S + 1)

        def prediction(self, state):
            return self.prediction_policy_network(state), self.prediction_value_network(state)

        def representation(self, obs):
            s = self.representation_network(obs.view(obs.shape[0], -1))
            min_s = s.min(1, keepdim=True)[0]
            max_s = s.max(1, keepdim=True)[0]
            scale = max_s - min_s
            scale[scale < 1e-5] += 1e-5
            return (s - min_s) / scale

        def dynamics(self, state, action):
            action_one_hot = torch.zeros((action.shape[0], A)).to(action.device).float()
            action_one_hot.scatter_(1, action.long(), 1.0)
            x = torch.cat((state, action_one_hot), dim=1)
            nxt = self.dynamics_encoded_state_network(x)
            reward = self.dynamics_reward_network(nxt)
            min_n = nxt.min(1, keepdim=True)[0]
            max_n = nxt.max(1, keepdim=True)[0]
            scale = max_n - min_n
            scale[scale < 1e-5] += 1e-5
            return (nxt - min_n) / scale, reward

        def initial_inference(self, obs):
            state = self.representation(obs)
            policy, value = self.prediction(state)
            reward = torch.log(torch.zeros(len(obs), 2 * S + 1).scatter(
                1, torch.tensor([[S]]).long().repeat(len(obs), 1), 1.0))
            return value, reward, policy, state

        def recurrent_inference(self, state, action):
            nxt, reward = self.dynamics(state, action)
            policy, value = self.prediction(nxt)
            return value, reward, policy, nxt

    model = Net()
    fill_(torch, model, rng, 0.4)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    res = {"loss": [], "priorities": [], "inits": []}
    for step in range(3):
        obs = normal(torch, rng, B, obs_dim)
        actions = torch.from_numpy(rng.integers(0, A, (B, K + 1))).unsqueeze(-1)
        target_value_scalar = rng.standard_normal((B, K + 1)).astype(np.float32) * 3
        target_value = torch.from_numpy(target_value_scalar)
        target_reward = normal(torch, rng, B, K + 1)
        target_reward[:, 0] = 0
        target_policy = torch.softmax(normal(torch, rng, B, K + 1, A), -1)
        gradient_scale = torch.from_numpy(
            np.full((B, K + 1), 1.0 / K, dtype=np.float32))
        weight_batch = torch.from_numpy(rng.uniform(0.2, 1.0, B).astype(np.float32))
        priorities = np.zeros_like(target_value_scalar)
        target_value = _scalar_to_support(torch, target_value, S)
        target_reward = _scalar_to_support(torch, target_reward, S)

        value, reward, policy_logits, hidden = model.initial_inference(obs)
        predictions = [(value, reward, policy_logits)]
        for i in range(1, actions.shape[1]):
            value, reward, policy_logits, hidden = model.recurrent_inference(
                hidden, actions[:, i])
            hidden.register_hook(lambda grad: grad * 0.5)
            predictions.append((value, reward, policy_logits))

        value_loss, reward_loss, policy_loss = (0, 0, 0)
        value, reward, policy_logits = predictions[0]

        def loss_function(value, reward, policy_logits, tv, tr, tp):
            v = (-tv * torch.nn.LogSoftmax(dim=1)(value)).sum(1)
            r = (-tr * torch.nn.LogSoftmax(dim=1)(reward)).sum(1)
            p = (-tp * torch.nn.LogSoftmax(dim=1)(policy_logits)).sum(1)
            return v, r, p

        current_value_loss, _, current_policy_loss = loss_function(
            value.squeeze(-1), reward.squeeze(-1), policy_logits,
            target_value[:, 0], target_reward[:, 0], target_policy[:, 0])
        value_loss += current_value_loss
        policy_loss += current_policy_loss
        # h^-1 cancels catastrophically in float32 (sqrt(1 + 4 eps x) - 1): priorities in float64
        pred_value_scalar = (_support_to_scalar(torch, value.double(), S)
                             .detach().cpu().numpy().squeeze())
        priorities[:, 0] = np.abs(pred_value_scalar - target_value_scalar[:, 0]) ** 1.0
        for i in range(1, len(predictions)):
            value, reward, policy_logits = predictions[i]
            cv, cr, cp = loss_function(value.squeeze(-1), reward.squeeze(-1), policy_logits,
                                       target_value[:, i], target_reward[:, i],
                                       target_policy[:, i])
            cv.register_hook(lambda grad, i=i: grad / gradient_scale[:, i])
            cr.register_hook(lambda grad, i=i: grad / gradient_scale[:, i])
            cp.register_hook(lambda grad, i=i: grad / gradient_scale[:, i])
            value_loss += cv
            reward_loss += cr
            policy_loss += cp
            pred_value_scalar = _support_to_scalar(torch, value.double(), S).detach().numpy()
            priorities[:, i] = np.abs(pred_value_scalar.squeeze() - target_value_scalar[:, i])
        loss = value_loss * 0.25 + reward_loss + policy_loss
        loss *= weight_batch
        loss = loss.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["priorities"].append(priorities.copy())
    shared = copy.deepcopy(model.get_weights())    # what the replay buffer's reanalyser gets
    res["w_dyn"] = model.dynamics_encoded_state_network[0].weight
    reanalyser = Net()
    reanalyser.set_weights(shared)
    with torch.no_grad():
        res["reanalysed"] = reanalyser.initial_inference(normal(torch, rng, 2, obs_dim))[0]
    res["w_rep"] = model.representation_network[2].weight

    # pUCT over one expanded root, normalised by MinMaxStats
    class MinMaxStats:
        def __init__(self):
            self.maximum, self.minimum = -float("inf"), float("inf")

        def update(self, value):
            self.maximum, self.minimum = max(self.maximum, value), min(self.minimum, value)

        def normalize(self, value):
            if self.maximum > self.minimum:
                return (value - self.minimum) / (self.maximum - self.minimum)
            return value

    stats = MinMaxStats()
    with torch.no_grad():
        obs = normal(torch, rng, 1, obs_dim)
        root_value, _, root_logits, root_hidden = model.initial_inference(obs)
        prior = torch.softmax(root_logits, dim=1)[0].tolist()
        visits, values = [0] * A, [0.0] * A
        picks = []
        for sim in range(6):
            total = sum(visits)
            scores = []
            for a in range(A):
                pb_c = (np.log((total + 19652 + 1) / 19652) + 1.25) * np.sqrt(total) / (
                    visits[a] + 1)
                q = stats.normalize(values[a] / visits[a]) if visits[a] > 0 else 0
                scores.append(pb_c * prior[a] + q)
            a = int(np.argmax(scores))
            picks.append(a)
            v, r, _, _ = model.recurrent_inference(root_hidden, torch.tensor([[a]]))
            g = (_support_to_scalar(torch, r.double(), S).item()
                 + 0.997 * _support_to_scalar(torch, v.double(), S).item())
            visits[a] += 1
            values[a] += g
            stats.update(g)
        res["picks"], res["visits"] = picks, visits
        res["minmax"] = [stats.minimum, stats.maximum]
        res["root_value"] = _support_to_scalar(torch, root_value, S)
    return res


def pets_program(torch):
    """handful-of-trials / mbrl-lib PETS: an ensemble of probabilistic MLPs with weights shaped
    (E, in, out), input normalisation fitted from data, swish, soft max/min log-variance bounds,
    the Gaussian NLL with the bound regulariser and per-layer decay, then CEM over action
    sequences with trajectory-sampling (TS-inf) particles in the ensemble's batch dimension."""
    rng = np.random.default_rng(1)
    nn, F = torch.nn, torch.nn.functional
    E, S, A, Hd, N = 3, 4, 2, 12, 10

    def swish(x):
        return x * torch.sigmoid(x)

    class PtModel(nn.Module):
        def __init__(self, ensemble_size, in_features, out_features):
            super().__init__()
            self.num_nets = ensemble_size
            self.in_features, self.out_features = in_features, out_features
            sizes = [in_features, Hd, Hd, out_features * 2]
            for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
                setattr(self, f"lin{i}_w", nn.Parameter(
                    torch.from_numpy(rng.standard_normal((E, a, b)).astype(np.float32))
                    / (2 * np.sqrt(a))))
                setattr(self, f"lin{i}_b", nn.Parameter(torch.zeros(E, 1, b)))
            self.inputs_mu = nn.Parameter(torch.zeros(in_features), requires_grad=False)
            self.inputs_sigma = nn.Parameter(torch.zeros(in_features), requires_grad=False)
            self.max_logvar = nn.Parameter(torch.ones(1, out_features, dtype=torch.float32) / 2.0)
            self.min_logvar = nn.Parameter(
                -torch.ones(1, out_features, dtype=torch.float32) * 10.0)

        def compute_decays(self):
            decays = [0.000025, 0.00005, 0.000075]
            return sum(d * (getattr(self, f"lin{i}_w") ** 2).sum() / 2.0
                       for i, d in enumerate(decays))

        def fit_input_stats(self, data):
            mu = np.mean(data, axis=0, keepdims=True)
            sigma = np.std(data, axis=0, keepdims=True)
            sigma[sigma < 1e-12] = 1.0
            self.inputs_mu.data = torch.from_numpy(mu).float()
            self.inputs_sigma.data = torch.from_numpy(sigma).float()

        def forward(self, inputs, ret_logvar=False):
            inputs = (inputs - self.inputs_mu) / self.inputs_sigma
            for i in range(3):
                inputs = inputs.matmul(getattr(self, f"lin{i}_w")) + getattr(self, f"lin{i}_b")
                if i < 2:
                    inputs = swish(inputs)
            mean = inputs[:, :, :self.out_features]
            logvar = inputs[:, :, self.out_features:]
            logvar = self.max_logvar - F.softplus(self.max_logvar - logvar)
            logvar = self.min_logvar + F.softplus(logvar - self.min_logvar)
            if ret_logvar:
                return mean, logvar
            return mean, torch.exp(logvar)

    model = PtModel(E, S + A, S)
    optim = torch.optim.Adam(model.parameters(), lr=1e-2)
    obs = rng.standard_normal((40, S)).astype(np.float32)
    acs = rng.uniform(-1, 1, (40, A)).astype(np.float32)
    targets = (obs * 0.9 + 0.1 * np.tanh(acs).sum(1, keepdims=True)).astype(np.float32)
    train_in = np.concatenate([obs, acs], axis=-1)
    model.fit_input_stats(train_in)
    res = {"loss": [], "mse": []}
    idxs = rng.integers(train_in.shape[0], size=[E, train_in.shape[0]])
    for epoch in range(3):
        batch_idxs = idxs[:, epoch * N:(epoch + 1) * N]
        loss = 0.01 * (model.max_logvar.sum() - model.min_logvar.sum())
        loss += model.compute_decays()
        train_inp = torch.from_numpy(train_in[batch_idxs]).float()
        train_targ = torch.from_numpy(targets[batch_idxs]).float()
        mean, logvar = model(train_inp, ret_logvar=True)
        inv_var = torch.exp(-logvar)
        train_losses = ((mean - train_targ) ** 2) * inv_var + logvar
        train_losses = train_losses.mean(-1).mean(-1).sum()
        loss += train_losses
        optim.zero_grad()
        loss.backward()
        optim.step()
        res["loss"].append(loss.item())
        # mbrl-lib's gaussian_nll written with F.gaussian_nll_loss (variance, not log-variance)
        res.setdefault("nll", []).append(F.gaussian_nll_loss(
            mean.detach(), train_targ, logvar.detach().exp(), full=True, reduction="none"))
        with torch.no_grad():
            mse = ((model(torch.from_numpy(train_in[None]).float().expand(E, -1, -1))[0]
                    - torch.from_numpy(targets)) ** 2).mean(-1).mean(-1)
        res["mse"].append(mse)
    res["max_logvar"], res["min_logvar"] = model.max_logvar, model.min_logvar
    res["w0"] = model.lin0_w

    # CEM with TS-inf propagation: npart particles, each bound to one ensemble member
    horizon, npart, popsize, num_elites = 3, 6, 8, 3
    lb, ub = -np.ones(horizon * A, np.float32), np.ones(horizon * A, np.float32)
    mean, var = np.zeros(horizon * A, np.float32), np.full(horizon * A, 0.25, np.float32)
    cur_obs = rng.standard_normal(S).astype(np.float32)

    def expand_to_ts_format(mat):
        dim = mat.shape[-1]
        reshaped = mat.view(-1, E, npart // E, dim)
        reshaped = reshaped.transpose(0, 1)
        return reshaped.contiguous().view(E, -1, dim)

    def flatten_to_matrix(ts_fmt_arr):
        dim = ts_fmt_arr.shape[-1]
        reshaped = ts_fmt_arr.view(E, -1, npart // E, dim)
        reshaped = reshaped.transpose(0, 1)
        return reshaped.contiguous().view(-1, dim)

    def compile_cost(ac_seqs):
        nopt = ac_seqs.shape[0]
        ac_seqs = torch.from_numpy(ac_seqs).float()
        ac_seqs = ac_seqs.view(-1, horizon, A).transpose(0, 1)
        ac_seqs = ac_seqs[:, :, None]
        ac_seqs = ac_seqs.expand(-1, -1, npart, -1).contiguous().view(horizon, -1, A)
        cur = torch.from_numpy(cur_obs).float()[None].expand(nopt * npart, -1)
        costs = torch.zeros(nopt, npart)
        for t in range(horizon):
            cur_acs = ac_seqs[t]
            inputs = torch.cat((expand_to_ts_format(cur), expand_to_ts_format(cur_acs)), -1)
            m, v = model(inputs)
            eps = torch.from_numpy(rng.standard_normal(tuple(m.shape)).astype(np.float32))
            nxt = flatten_to_matrix(m + eps * torch.sqrt(v))
            cost = (nxt ** 2).sum(dim=1) + 0.01 * (cur_acs ** 2).sum(dim=1)
            cost = cost.view(-1, npart)
            costs += cost
            cur = nxt
        costs[costs != costs] = 1e6
        return costs.mean(dim=1).detach().cpu().numpy()

    with torch.no_grad():
        for it in range(2):
            lb_dist, ub_dist = mean - lb, ub - mean
            constrained_var = np.minimum(np.minimum(np.square(lb_dist / 2),
                                                    np.square(ub_dist / 2)), var)
            noise = np.clip(rng.standard_normal((popsize, horizon * A)), -2, 2)
            samples = (noise * np.sqrt(constrained_var) + mean).astype(np.float32)
            costs = compile_cost(samples)
            elites = samples[np.argsort(costs)][:num_elites]
            new_mean, new_var = np.mean(elites, axis=0), np.var(elites, axis=0)
            mean = 0.1 * mean + 0.9 * new_mean
            var = 0.1 * var + 0.9 * new_var
            res.setdefault("costs", []).append(costs)
    res["plan"] = mean
    return res


def option_critic_program(torch):
    """lweitkamp/option-critic-pytorch: shared features, Q over options, sigmoid terminations,
    per-option softmax policies from (options, features, actions) parameters, the critic's
    TD loss with a target network, and the actor's termination gradient plus intra-option
    policy gradient; option/termination/action draws come from NumPy uniforms."""
    rng = np.random.default_rng(2)
    nn = torch.nn
    obs_dim, n_opt, n_act = 5, 3, 4
    gamma, term_reg, ent_reg, temperature = 0.99, 0.01, 0.01, 1.0

    class OptionCriticFeatures(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Linear(obs_dim, 16), nn.ReLU(),
                                          nn.Linear(16, 16), nn.ReLU())
            self.Q = nn.Linear(16, n_opt)
            self.terminations = nn.Linear(16, n_opt)
            self.options_W = nn.Parameter(torch.zeros(n_opt, 16, n_act))
            self.options_b = nn.Parameter(torch.zeros(n_opt, n_act))
            self.temperature = temperature

        def get_state(self, obs):
            if obs.ndim < 2:
                obs = obs.unsqueeze(0)
            return self.features(obs)

        def get_Q(self, state):
            return self.Q(state)

        def get_terminations(self, state):
            return self.terminations(state).sigmoid()

        def predict_option_termination(self, state, current_option, u):
            termination = self.terminations(state)[:, current_option].sigmoid()
            option_termination = (u < termination).float()
            next_option = self.get_Q(state).argmax(dim=-1)
            return bool(option_termination.item()), next_option.item()

        def get_action(self, state, option, u):
            logits = state.data @ self.options_W[option] + self.options_b[option]
            action_dist = (logits / self.temperature).softmax(dim=-1)
            action_dist = torch.distributions.Categorical(action_dist)
            action = (action_dist.probs.cumsum(-1) < u).sum(-1).clamp(max=n_act - 1)
            return action.item(), action_dist.log_prob(action), action_dist.entropy()

    model = OptionCriticFeatures()
    fill_(torch, model, rng, 0.3)
    model_prime = OptionCriticFeatures()
    model_prime.load_state_dict(model.state_dict())
    optim = torch.optim.RMSprop(model.parameters(), lr=0.01)
    res = {"actor": [], "critic": [], "options": [], "actions": []}
    obs = torch.from_numpy(rng.standard_normal(obs_dim).astype(np.float32))
    state = model.get_state(obs)
    current_option, option_termination = 0, True
    buffer = []
    for step in range(8):
        epsilon = 0.3
        if option_termination:
            greedy = model.get_Q(state).argmax(dim=-1).item()
            current_option = int(rng.integers(n_opt)) if rng.uniform() < epsilon else greedy
        action, logp, entropy = model.get_action(state, current_option, rng.uniform())
        next_obs = torch.from_numpy(rng.standard_normal(obs_dim).astype(np.float32))
        reward, done = float(rng.standard_normal()), step == 7
        buffer.append((obs.numpy(), current_option, reward, next_obs.numpy(), done))
        state = model.get_state(next_obs)
        option_termination, greedy_option = model.predict_option_termination(
            state, current_option, float(rng.uniform()))

        o = model.get_state(obs)
        next_state = model.get_state(next_obs)
        next_state_prime = model_prime.get_state(next_obs)
        option_term_prob = model.get_terminations(o)[:, current_option]
        next_option_term_prob = model.get_terminations(next_state)[:, current_option].detach()
        Q = model.get_Q(o).detach().squeeze()
        next_Q_prime = model_prime.get_Q(next_state_prime).detach().squeeze()
        gt = reward + (1 - done) * gamma * (
            (1 - next_option_term_prob) * next_Q_prime[current_option]
            + next_option_term_prob * next_Q_prime.max(dim=-1)[0])
        termination_loss = option_term_prob * (
            Q[current_option].detach() - Q.max(dim=-1)[0].detach() + term_reg) * (1 - done)
        policy_loss = -logp * (gt.detach() - Q[current_option]) - ent_reg * entropy
        loss = termination_loss + policy_loss
        if len(buffer) >= 4 and step % 2 == 1:
            batch = [buffer[i] for i in rng.integers(0, len(buffer), 4)]
            b_obs, options, rewards, b_next, dones = map(np.array, zip(*batch))
            batch_idx = torch.arange(len(options)).long()
            options = torch.LongTensor(options)
            rewards = torch.FloatTensor(rewards)
            masks = 1 - torch.FloatTensor(dones)
            states = model.get_state(torch.from_numpy(b_obs)).squeeze(0)
            Qb = model.get_Q(states)
            next_Q_prime_b = model_prime.get_Q(model_prime.get_state(torch.from_numpy(b_next)))
            next_term = model.get_terminations(model.get_state(torch.from_numpy(b_next))).detach()
            next_options_term_prob = next_term[batch_idx, options]
            gtb = rewards + masks * gamma * (
                (1 - next_options_term_prob) * next_Q_prime_b[batch_idx, options]
                + next_options_term_prob * next_Q_prime_b.max(dim=-1)[0])
            td_err = (Qb[batch_idx, options] - gtb.detach()).pow(2).mul(0.5).mean()
            loss = loss + td_err
            res["critic"].append(td_err.item())
        optim.zero_grad()
        loss.sum().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        if step % 4 == 3:
            model_prime.load_state_dict(model.state_dict())
        obs = next_obs
        state = model.get_state(obs)
        res["actor"].append(loss.item())
        res["options"].append(current_option)
        res["actions"].append(action)
    res["options_W"], res["term_w"] = model.options_W, model.terminations.weight
    res["Q_prime"] = model_prime.Q.weight
    return res


PROGRAMS = [muzero_program, pets_program, option_critic_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
