"""Off-policy return estimators written as their reference repositories write them in torch, run
once with `torch` bound to ember and once to PyTorch from the same NumPy data: IMPALA's V-trace
(torchbeast's reverse loop with clipped rhos, the learner's losses through nll_loss on flattened
logits), ACER's Retrace (truncated importance weights, bias correction), and n-step / discounted
returns by torch.flip + cumsum, by unfold against gamma powers, by a discount-matrix triu, and by
conv1d with a flipped kernel; GAE two ways; A3C's shared model and SharedAdam (a ``torch.zeros(1)``
step count) with gradients linked through ``_grad``."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _from_importance_weights(torch, log_rhos, discounts, rewards, values, bootstrap_value,
                             clip_rho_threshold=1.0, clip_pg_rho_threshold=1.0):
    """torchbeast's vtrace.from_importance_weights."""
    with torch.no_grad():
        rhos = torch.exp(log_rhos)
        if clip_rho_threshold is not None:
            clipped_rhos = torch.clamp(rhos, max=clip_rho_threshold)
        else:
            clipped_rhos = rhos
        cs = torch.clamp(rhos, max=1.0)
        values_t_plus_1 = torch.cat([values[1:], torch.unsqueeze(bootstrap_value, 0)], dim=0)
        deltas = clipped_rhos * (rewards + discounts * values_t_plus_1 - values)
        acc = torch.zeros_like(bootstrap_value)
        result = []
        for t in range(discounts.shape[0] - 1, -1, -1):
            acc = deltas[t] + discounts[t] * cs[t] * acc
            result.append(acc)
        result.reverse()
        vs_minus_v_xs = torch.stack(result)
        vs = torch.add(vs_minus_v_xs, values)
        vs_t_plus_1 = torch.cat([vs[1:], torch.unsqueeze(bootstrap_value, 0)], dim=0)
        if clip_pg_rho_threshold is not None:
            clipped_pg_rhos = torch.clamp(rhos, max=clip_pg_rho_threshold)
        else:
            clipped_pg_rhos = rhos
        pg_advantages = clipped_pg_rhos * (rewards + discounts * vs_t_plus_1 - values)
        return vs, pg_advantages


def vtrace_program(torch):
    """torchbeast's learner: action log-probs by ``-F.nll_loss(F.log_softmax(torch.flatten(
    logits, 0, -2), dim=-1), target=torch.flatten(actions), reduction="none").view_as(actions)``,
    V-trace targets under no_grad, the policy-gradient, baseline and entropy losses, reward
    clipping by clamp, RMSprop with a LambdaLR, clip_grad_norm_, and the vtrace returns and
    advantages compared against a NumPy loop."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2911)
    T, B, S, A = 6, 3, 5, 4

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.core = nn.LSTM(S, 16)
            self.policy = nn.Linear(16, A)
            self.baseline = nn.Linear(16, 1)

        def forward(self, x, core_state):
            out, core_state = self.core(x, core_state)
            logits = self.policy(out)
            return logits, self.baseline(out).view(T, B), core_state

    net = Net()
    fill_(torch, net, rng)
    opt = torch.optim.RMSprop(net.parameters(), lr=4e-4, momentum=0, eps=0.01, alpha=0.99)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 1 - min(epoch * T * B, 100) / 100)
    res = {"total": [], "pg": [], "baseline": [], "entropy": [], "vs": [], "adv": [], "lr": []}
    for _ in range(3):
        obs = normal(torch, rng, T, B, S)
        behaviour_logits = normal(torch, rng, T, B, A)
        actions = torch.from_numpy(rng.integers(0, A, (T, B)))
        rewards = normal(torch, rng, T, B) * 2
        done = torch.from_numpy(rng.random((T, B)) < 0.2)
        core_state = tuple(torch.zeros(1, B, 16) for _ in range(2))
        logits, baseline, _ = net(obs, core_state)
        bootstrap_value = baseline[-1]
        clipped_rewards = torch.clamp(rewards, -1, 1)
        discounts = (~done).float() * 0.99

        def action_log_probs(policy_logits):
            return -F.nll_loss(F.log_softmax(torch.flatten(policy_logits, 0, -2), dim=-1),
                               target=torch.flatten(actions), reduction="none").view_as(actions)
        target_alp = action_log_probs(logits)
        behaviour_alp = action_log_probs(behaviour_logits)
        log_rhos = target_alp - behaviour_alp
        vs, pg_adv = _from_importance_weights(torch, log_rhos, discounts, clipped_rewards,
                                              baseline, bootstrap_value)
        cross_entropy = F.nll_loss(F.log_softmax(torch.flatten(logits, 0, 1), dim=-1),
                                   target=torch.flatten(actions, 0, 1),
                                   reduction="none").view_as(pg_adv)
        pg_loss = torch.sum(cross_entropy * pg_adv.detach())
        baseline_loss = 0.5 * 0.5 * torch.sum((vs - baseline) ** 2)
        policy = F.softmax(logits, dim=-1)
        entropy_loss = 0.0006 * torch.sum(policy * F.log_softmax(logits, dim=-1))
        total = pg_loss + baseline_loss + entropy_loss
        opt.zero_grad()
        total.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 40.0)
        opt.step()
        sched.step()
        for key, value in (("total", total), ("pg", pg_loss), ("baseline", baseline_loss),
                           ("entropy", entropy_loss)):
            res[key].append(value.item())
        res["vs"].append(vs)
        res["adv"].append(pg_adv)
        res["lr"].append(sched.get_last_lr()[0])
        # the NumPy loop the repositories test against
        rh = np.exp(log_rhos.detach().numpy().astype(np.float64))
        v = baseline.detach().numpy().astype(np.float64)
        d = discounts.numpy().astype(np.float64)
        r = clipped_rewards.numpy().astype(np.float64)
        boot = v[-1]
        vnext = np.concatenate([v[1:], boot[None]])
        delta = np.minimum(rh, 1) * (r + d * vnext - v)
        acc, out = np.zeros(B), []
        for t in reversed(range(T)):
            acc = delta[t] + d[t] * np.minimum(rh[t], 1) * acc
            out.append(acc)
        np.testing.assert_allclose(vs.numpy(), np.stack(out[::-1]) + v, rtol=1e-5, atol=1e-5)
        res["vs_grad"] = [vs.requires_grad, pg_adv.requires_grad]
    res["params"] = list(net.parameters())
    return res


def retrace_program(torch):
    """ACER's learner: Q-values and policies over a trajectory, truncated importance weights
    ``rho.clamp(max=c)``, the Retrace target by a reverse loop with masks, the truncated
    policy-gradient and bias-correction terms (``(1 - c / rho).clamp(min=0)``), the critic loss
    against Q_ret, a KL trust region toward an average network updated by lerp_, and Adam."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2912)
    T, B, S, A, c = 5, 4, 6, 3, 10.0

    class ActorCritic(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(S, 16)
            self.fc_actor = nn.Linear(16, A)
            self.fc_critic = nn.Linear(16, A)

        def forward(self, x):
            h = F.relu(self.fc(x))
            policy = F.softmax(self.fc_actor(h), dim=-1).clamp(max=1 - 1e-20)
            Q = self.fc_critic(h)
            V = (Q * policy).sum(-1, keepdim=True)
            return policy, Q, V

    model, average = ActorCritic(), ActorCritic()
    fill_(torch, model, rng)
    average.load_state_dict(model.state_dict())
    for p in average.parameters():
        p.requires_grad_(False)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    res = {"loss": [], "q_ret": [], "kl": []}
    for _ in range(3):
        states = normal(torch, rng, T + 1, B, S)
        actions = torch.from_numpy(rng.integers(0, A, (T, B, 1)))
        rewards = normal(torch, rng, T, B, 1)
        masks = torch.from_numpy((rng.random((T, B, 1)) > 0.2).astype(np.float32))
        mu = F.softmax(normal(torch, rng, T, B, A), dim=-1)
        policies, Qs, Vs = model(states)
        with torch.no_grad():
            avg_policies, _, _ = average(states[:-1])
        Qret = Vs[-1].detach()
        policy_loss, value_loss, kl_total = 0, 0, 0
        for i in reversed(range(T)):
            rho = policies[i].detach() / mu[i]
            Qret = rewards[i] + 0.99 * Qret * masks[i]
            A_t = Qret - Vs[i].detach()
            log_prob = policies[i].gather(1, actions[i]).log()
            single_step_policy_loss = -(
                rho.gather(1, actions[i]).clamp(max=c) * log_prob * A_t).mean(0)
            bias_weight = (1 - c / rho).clamp(min=0) * policies[i]
            single_step_policy_loss -= (bias_weight * policies[i].log() * (
                Qs[i].detach() - Vs[i].expand_as(Qs[i]).detach())).sum(1).mean(0)
            kl = F.kl_div(policies[i].log(), avg_policies[i], reduction="batchmean")
            policy_loss = policy_loss + single_step_policy_loss + 0.1 * kl
            kl_total = kl_total + kl.detach()
            Q = Qs[i].gather(1, actions[i])
            value_loss = value_loss + ((Qret - Q) ** 2 / 2).mean(0)
            truncated_rho = rho.gather(1, actions[i]).clamp(max=1)
            Qret = truncated_rho * (Qret - Q.detach()) + Vs[i].detach()
            res["q_ret"].append(Qret)
        loss = (policy_loss + value_loss).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for p_avg, p in zip(average.parameters(), model.parameters()):
                p_avg.lerp_(p, 0.01)
        res["loss"].append(loss.item())
        res["kl"].append(kl_total.item())
    res["params"] = list(model.parameters()) + list(average.parameters())
    return res


def nstep_program(torch):
    """n-step and discounted returns as RL codebases compute them without loops: flip/cumsum/flip
    over discounted rewards divided back, ``rewards.unfold(1, n, 1) @ gammas``, a discount matrix
    from triu of a power table, conv1d with a flipped gamma kernel, the cumprod of discounts with
    done masks, and the ``torch.flip`` forms' gradients into a learned reward scale."""
    F = torch.nn.functional
    rng = np.random.default_rng(2913)
    B, T, n, gamma = 3, 10, 4, 0.9
    rewards = normal(torch, rng, B, T)
    scale = torch.tensor(1.5, requires_grad=True)
    r = rewards * scale
    res = {}
    disc = gamma ** torch.arange(T, dtype=torch.float32)
    returns = torch.flip(torch.cumsum(torch.flip(r * disc, dims=[1]), dim=1), dims=(1,)) / disc
    res["returns_flip"] = returns
    returns.sum().backward(retain_graph=True)
    res["scale_grad"] = scale.grad.clone()
    # reference: the reverse loop
    ret, acc = np.zeros((B, T)), np.zeros(B)
    rn = (rewards.numpy() * 1.5).astype(np.float64)
    for t in reversed(range(T)):
        acc = rn[:, t] + gamma * acc
        ret[:, t] = acc
    np.testing.assert_allclose(returns.detach().numpy(), ret, rtol=1e-4, atol=1e-4)
    gammas = gamma ** torch.arange(n, dtype=torch.float32)
    padded = F.pad(r, (0, n - 1))
    res["nstep_unfold"] = padded.unfold(1, n, 1) @ gammas
    res["unfold_shape"] = list(padded.unfold(1, n, 1).shape)
    idx = torch.arange(T)
    powers = (idx.view(1, -1) - idx.view(-1, 1)).clamp(min=0).float()
    matrix = torch.triu(gamma ** powers)
    res["returns_matrix"] = r @ matrix.T
    kernel = torch.flip(gammas, [0]).view(1, 1, n)
    res["nstep_conv"] = F.conv1d(F.pad(r.unsqueeze(1), (0, n - 1)), kernel).squeeze(1)
    dones = torch.from_numpy(rng.random((B, T)) < 0.2)
    not_done = (~dones).float()
    res["discount_cumprod"] = torch.cumprod(gamma * not_done, dim=1)
    shifted = torch.cat([torch.ones(B, 1), res["discount_cumprod"][:, :-1]], dim=1)
    res["masked_nstep"] = (r * shifted).unfold(1, n, 1).sum(-1)
    rev = torch.flip(r, dims=(-1,))
    res["flip_neg_dim"] = rev
    res["fliplr"] = torch.fliplr(r)
    res["cumsum_int"] = torch.cumsum(dones, dim=1)
    res["cumsum_dtype"] = [str(torch.cumsum(dones, dim=1).dtype).rsplit(".", 1)[-1],
                           str(torch.flip(dones, [1]).dtype).rsplit(".", 1)[-1]]
    scale.grad = None
    (res["nstep_unfold"].sum() + res["nstep_conv"].pow(2).sum()
     + res["masked_nstep"].sum()).backward()
    res["scale_grad2"] = scale.grad
    return res


def gae_lambda_program(torch):
    """TD(lambda) targets on a value network: GAE by the reverse loop and by the flip/cumsum
    trick with a discount-lambda matrix, lambda-returns as advantages + values.detach(), the
    clipped value loss of PPO-style code against them, SGD with nesterov momentum and a
    StepLR."""
    nn = torch.nn
    rng = np.random.default_rng(2914)
    T, B, S, gamma, lam = 7, 2, 4, 0.99, 0.95
    value_net = nn.Sequential(nn.Linear(S, 8), nn.Tanh(), nn.Linear(8, 1))
    fill_(torch, value_net, rng)
    opt = torch.optim.SGD(value_net.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    res = {"loss": [], "adv_loop": [], "adv_matrix": []}
    for _ in range(3):
        obs = normal(torch, rng, T + 1, B, S)
        rewards = normal(torch, rng, T, B)
        dones = torch.from_numpy((rng.random((T, B)) < 0.2).astype(np.float32))
        values = value_net(obs).squeeze(-1)
        old_values = values.detach() + 0.1 * normal(torch, rng, T + 1, B)
        with torch.no_grad():
            deltas = rewards + gamma * values[1:] * (1 - dones) - values[:-1]
            adv = torch.zeros_like(rewards)
            lastgaelam = 0
            for t in reversed(range(T)):
                lastgaelam = deltas[t] + gamma * lam * (1 - dones[t]) * lastgaelam
                adv[t] = lastgaelam
            w = gamma * lam * (1 - dones)
            logw = torch.log(w.clamp(min=1e-12))
            cum = torch.cumsum(torch.cat([torch.zeros(1, B), logw[:-1]], 0), 0)
            mat = torch.exp(cum.unsqueeze(0) - cum.unsqueeze(1))
            mat = mat * torch.triu(torch.ones(T, T)).unsqueeze(-1)
            # zero the weights that would cross a done
            cross = torch.cumsum(torch.cat([torch.zeros(1, B), (w == 0).float()[:-1]], 0), 0)
            mat = mat * (cross.unsqueeze(0) == cross.unsqueeze(1)).float()
            adv_matrix = torch.einsum("stb,tb->sb", mat, deltas)
            returns = adv + values[:-1].detach()
        v_clipped = old_values[:-1] + (values[:-1] - old_values[:-1]).clamp(-0.2, 0.2)
        loss = 0.5 * torch.max((values[:-1] - returns) ** 2, (v_clipped - returns) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["loss"].append(loss.item())
        res["adv_loop"].append(adv)
        res["adv_matrix"].append(adv_matrix)
        np.testing.assert_allclose(adv_matrix.numpy(), adv.numpy(), rtol=1e-4, atol=1e-5)
    res["params"] = list(value_net.parameters())
    res["lr"] = [sched.get_last_lr()[0]]
    return res


def a3c_program(torch):
    """ikostrikov's pytorch-a3c with its workers run in turn in one process: a SharedAdam that
    fills its state in __init__ (``state["step"] = torch.zeros(1)``, moments from
    ``p.data.new().resize_as_(p.data).zero_()``) and share_memory_()s it, the model's
    share_memory(), weights_init applied by class name, an LSTMCell actor-critic, entropy, GAE
    and n-step returns by the reverse loop, clip_grad_norm_, and ensure_shared_grads linking the
    local gradients into the shared model through ``shared_param._grad``."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2915)
    S, A, H, steps = 6, 3, 8, 4

    class SharedAdam(torch.optim.Adam):
        def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0):
            super(SharedAdam, self).__init__(params, lr, betas, eps, weight_decay)
            for group in self.param_groups:
                for p in group["params"]:
                    state = self.state[p]
                    state["step"] = torch.zeros(1)
                    state["exp_avg"] = p.data.new().resize_as_(p.data).zero_()
                    state["exp_avg_sq"] = p.data.new().resize_as_(p.data).zero_()

        def share_memory(self):
            for group in self.param_groups:
                for p in group["params"]:
                    state = self.state[p]
                    state["step"].share_memory_()
                    state["exp_avg"].share_memory_()
                    state["exp_avg_sq"].share_memory_()

    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find("Linear") != -1:
            weight_shape = list(m.weight.data.size())
            fan_in, fan_out = weight_shape[1], weight_shape[0]
            w_bound = np.sqrt(6. / (fan_in + fan_out))
            m.weight.data.copy_(torch.from_numpy(
                rng.uniform(-w_bound, w_bound, weight_shape).astype(np.float32)))
            m.bias.data.fill_(0)

    class ActorCritic(nn.Module):
        def __init__(self):
            super(ActorCritic, self).__init__()
            self.fc = nn.Linear(S, H)
            self.lstm = nn.LSTMCell(H, H)
            self.critic_linear = nn.Linear(H, 1)
            self.actor_linear = nn.Linear(H, A)
            self.apply(weights_init)
            self.lstm.bias_ih.data.fill_(0)
            self.lstm.bias_hh.data.fill_(0)
            self.train()

        def forward(self, inputs):
            inputs, (hx, cx) = inputs
            x = F.elu(self.fc(inputs))
            hx, cx = self.lstm(x, (hx, cx))
            return self.critic_linear(hx), self.actor_linear(hx), (hx, cx)

    shared_model = ActorCritic()
    fill_(torch, shared_model.lstm, rng)
    shared_model.share_memory()
    optimizer = SharedAdam(shared_model.parameters(), lr=1e-3)
    optimizer.share_memory()

    def ensure_shared_grads(model, shared_model):
        for param, shared_param in zip(model.parameters(), shared_model.parameters()):
            if shared_param.grad is not None:
                return
            shared_param._grad = param.grad

    workers = [ActorCritic() for _ in range(2)]
    res = {"loss": [], "entropy": [], "linked": []}
    for update in range(4):
        model = workers[update % 2]
        model.load_state_dict(shared_model.state_dict())
        cx, hx = torch.zeros(1, H), torch.zeros(1, H)
        values, log_probs, rewards, entropies = [], [], [], []
        for _ in range(steps):
            state = normal(torch, rng, S)
            value, logit, (hx, cx) = model((state.unsqueeze(0), (hx, cx)))
            prob = F.softmax(logit, dim=-1)
            log_prob = F.log_softmax(logit, dim=-1)
            entropy = -(log_prob * prob).sum(1, keepdim=True)
            entropies.append(entropy)
            action = torch.from_numpy(rng.integers(0, A, (1, 1)))
            log_prob = log_prob.gather(1, action)
            values.append(value)
            log_probs.append(log_prob)
            rewards.append(float(rng.standard_normal()))
        R = torch.zeros(1, 1)
        value, _, _ = model((normal(torch, rng, 1, S), (hx, cx)))
        R = value.detach()
        values.append(R)
        policy_loss, value_loss, gae = 0, 0, torch.zeros(1, 1)
        for i in reversed(range(len(rewards))):
            R = 0.99 * R + rewards[i]
            advantage = R - values[i]
            value_loss = value_loss + 0.5 * advantage.pow(2)
            delta_t = rewards[i] + 0.99 * values[i + 1] - values[i]
            gae = gae * 0.99 * 1.00 + delta_t
            policy_loss = policy_loss - log_probs[i] * gae.detach() - 0.01 * entropies[i]
        optimizer.zero_grad()
        (policy_loss + 0.5 * value_loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 50)
        ensure_shared_grads(model, shared_model)
        optimizer.step()
        res["loss"].append((policy_loss + 0.5 * value_loss).item())
        res["entropy"].append(torch.cat(entropies).sum().item())
        res["linked"].append(shared_model.fc.weight.grad is model.fc.weight.grad)
    res["params"] = list(shared_model.parameters())
    res["steps"] = [optimizer.state[p]["step"] for p in shared_model.parameters()]
    res["shared"] = [p.is_shared() for p in shared_model.parameters()] + [
        optimizer.state[shared_model.fc.weight]["exp_avg"].is_shared()]
    return res


PROGRAMS = [vtrace_program, retrace_program, nstep_program, gae_lambda_program, a3c_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 LSTM / matmul accumulation order over a few optimizer steps
        "vtrace_program": (1e-4, 1e-5),
        "retrace_program": (1e-4, 1e-5),
        "gae_lambda_program": (1e-4, 1e-5),
        "a3c_program": (1e-4, 1e-5),
    })
