"""Model-based and replay reinforcement learning programs, run once with `torch` bound to ember
and once to PyTorch from the same NumPy weights, data and noise (see
test_parity_programs_round22_rl.py): a Dreamer-style RSSM world model (GRUCell, straight-through
one-hot latents with unimix, KL balancing with free nats, symlog two-hot reward head, a custom
tanh Transform, imagination with lambda-returns normalised by EMA quantiles) and prioritised
replay plumbing (searchsorted on the priority cumsum and a tensor sum tree, importance weights,
n-step returns by unfold and conv1d, Double-DQN targets, priority updates by
scatter_reduce_/index_put_, a float32 NumPy action buffer); then focused tests for what the
round-22 RL programs found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._compare import dtype_name, outcome
from tests.parity._programs import fill_, normal
from tests.parity.test_parity_programs_round9 import assert_same_results
from tests.parity.test_parity_programs_round22_rl import _name, _uniform

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def world_model_program(torch):
    """Dreamer-style RSSM: GRUCell, straight-through one-hot latents with unimix, KL balancing
    with free nats, symlog two-hot reward head, tanh-normal actor through a custom Transform,
    imagination with lambda-returns normalised by EMA quantiles."""
    nn, F = torch.nn, torch.nn.functional
    torchd = torch.distributions
    rng = np.random.default_rng(2204)
    res = {}
    obs_dim, act_dim, deter, groups, classes = 6, 2, 16, 3, 4
    stoch = groups * classes
    batch, seq, horizon, num_buckets = 3, 5, 4, 41
    free_nats, dyn_scale, rep_scale, unimix = 1.0, 0.5, 0.1, 0.01

    class OneHotDist(torchd.one_hot_categorical.OneHotCategorical):
        """DreamerV3's one-hot latent: unimix probabilities, straight-through samples."""

        def __init__(self, logits=None, probs=None, unimix_ratio=0.0):
            if logits is not None and unimix_ratio > 0.0:
                probs = F.softmax(logits, dim=-1)
                probs = probs * (1.0 - unimix_ratio) + unimix_ratio / probs.shape[-1]
                logits = torch.log(probs)
                super().__init__(logits=logits, probs=None)
            else:
                super().__init__(logits=logits, probs=probs)

        def mode(self):
            _mode = F.one_hot(torch.argmax(super().logits, axis=-1), super().logits.shape[-1])
            return _mode.detach() + super().logits - super().logits.detach()

        def sample_with(self, u):  # ``sample`` with the program's own Gumbel noise
            idx = (super().logits - torch.log(-torch.log(u))).argmax(-1)
            sample = F.one_hot(idx, super().logits.shape[-1]).to(super().logits.dtype)
            probs = super().probs
            sample += probs - probs.detach()
            return sample

    def symlog(x):
        return torch.sign(x) * torch.log(torch.abs(x) + 1.0)

    def symexp(x):
        return torch.sign(x) * (torch.exp(torch.abs(x)) - 1.0)

    class DiscDist:
        """Two-hot categorical over symlog-spaced buckets (DreamerV3's reward/value head)."""

        def __init__(self, logits, low=-20.0, high=20.0):
            self.logits = logits
            self.probs = torch.softmax(logits, -1)
            self.buckets = torch.linspace(low, high, steps=num_buckets)

        def mean(self):
            return symexp(torch.sum(self.probs * self.buckets, dim=-1, keepdim=True))

        def log_prob(self, x):
            x = symlog(x)
            below = torch.sum((self.buckets <= x[..., None]).to(torch.int32), dim=-1) - 1
            above = len(self.buckets) - torch.sum(
                (self.buckets > x[..., None]).to(torch.int32), dim=-1)
            below = torch.clip(below, 0, len(self.buckets) - 1)
            above = torch.clip(above, 0, len(self.buckets) - 1)
            equal = below == above
            dist_to_below = torch.where(equal, 1, torch.abs(self.buckets[below] - x))
            dist_to_above = torch.where(equal, 1, torch.abs(self.buckets[above] - x))
            total = dist_to_below + dist_to_above
            weight_below = dist_to_above / total
            weight_above = dist_to_below / total
            target = (F.one_hot(below, num_classes=len(self.buckets)) * weight_below[..., None]
                      + F.one_hot(above, num_classes=len(self.buckets)) * weight_above[..., None])
            log_pred = self.logits - torch.logsumexp(self.logits, -1, keepdim=True)
            return (target.squeeze(-2) * log_pred).sum(-1)

    class TanhBijector(torchd.Transform):
        domain = torchd.constraints.real
        codomain = torchd.constraints.interval(-1.0, 1.0)
        bijective = True
        sign = +1

        def _call(self, x):
            return torch.tanh(x)

        def _inverse(self, y):
            y = torch.where((torch.abs(y) <= 1.0), torch.clamp(y, -0.99999997, 0.99999997), y)
            return torch.atanh(y)

        def log_abs_det_jacobian(self, x, y):
            log2 = torch.math.log(2.0)
            return 2.0 * (log2 - x - F.softplus(-2.0 * x))

    class RewardEMA(nn.Module):
        def __init__(self, alpha=1e-2):
            super().__init__()
            self.alpha = alpha
            self.register_buffer("ema_vals", torch.zeros((2,)))
            self.range = torch.tensor([0.05, 0.95])

        def forward(self, x):
            x_quantile = torch.quantile(input=torch.flatten(x.detach()), q=self.range)
            self.ema_vals = self.alpha * x_quantile + (1 - self.alpha) * self.ema_vals
            scale = torch.clip(self.ema_vals[1] - self.ema_vals[0], min=1.0)
            return self.ema_vals[0].detach(), scale.detach()

    def dist(logits):
        return torchd.independent.Independent(OneHotDist(logits, unimix_ratio=unimix), 1)

    def noise(*shape):
        return _uniform(torch, rng, *shape).clamp(1e-6, 1 - 1e-6)

    class RSSM(nn.Module):
        def __init__(self):
            super().__init__()
            self.img_in = nn.Sequential(nn.Linear(stoch + act_dim, 24), nn.ELU())
            self.cell = nn.GRUCell(24, deter)
            self.prior_net = nn.Sequential(nn.Linear(deter, 24), nn.LayerNorm(24, eps=1e-3),
                                           nn.SiLU(), nn.Linear(24, stoch))
            self.post_net = nn.Sequential(nn.Linear(deter + 16, 24), nn.ELU(),
                                          nn.Linear(24, stoch))

        def initial(self, n):
            return dict(deter=torch.zeros(n, deter), stoch=torch.zeros(n, groups, classes),
                        logits=torch.zeros(n, groups, classes))

        def img_step(self, state, action, u):
            x = self.img_in(torch.cat([state["stoch"].flatten(1), action], -1))
            h = self.cell(x, state["deter"])
            logits = self.prior_net(h).unflatten(-1, (groups, classes))
            return dict(deter=h, stoch=dist(logits).base_dist.sample_with(u), logits=logits)

        def obs_step(self, state, action, embed, u_prior, u_post):
            prior = self.img_step(state, action, u_prior)
            x = torch.cat([prior["deter"], embed], -1)
            logits = self.post_net(x).view(-1, groups, classes)
            post = dict(deter=prior["deter"], stoch=dist(logits).base_dist.sample_with(u_post),
                        logits=logits)
            return post, prior

    def feat(state):
        return torch.cat([state["stoch"].flatten(-2), state["deter"]], -1)

    encoder = nn.Sequential(nn.Linear(obs_dim, 16), nn.LayerNorm(16), nn.SiLU())
    rssm = RSSM()
    decoder = nn.Sequential(nn.Linear(stoch + deter, 24), nn.ELU(), nn.Linear(24, obs_dim))
    reward_head = nn.Sequential(nn.Linear(stoch + deter, 16), nn.ELU(),
                                nn.Linear(16, num_buckets))
    cont_head = nn.Linear(stoch + deter, 1)
    actor = nn.Sequential(nn.Linear(stoch + deter, 16), nn.ELU(), nn.Linear(16, 2 * act_dim))
    critic = nn.Sequential(nn.Linear(stoch + deter, 16), nn.ELU(), nn.Linear(16, 1))
    world = nn.ModuleList([encoder, rssm, decoder, reward_head, cont_head])
    fill_(torch, world, rng, 0.3)
    fill_(torch, actor, rng, 0.3)
    fill_(torch, critic, rng, 0.3)
    with torch.no_grad():
        reward_head[-1].weight.zero_()  # DreamerV3 zero-initialises its output heads
    model_opt = torch.optim.Adam(world.parameters(), lr=1e-3, eps=1e-5)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-3, eps=1e-5)
    critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-3, eps=1e-5)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    reward_ema = RewardEMA()
    gamma, lam, actor_ent = 0.97, 0.95, 3e-4

    def actor_dist(f):
        mean, std = torch.chunk(actor(f), 2, -1)
        std = 2 * torch.sigmoid((std + 2.0) / 2) + 0.1
        base = torchd.normal.Normal(mean, std)
        return torchd.Independent(torchd.TransformedDistribution(base, TanhBijector()), 1), base

    for key in ("model_loss", "kl", "rep", "dyn", "recon", "reward_loss", "actor_loss",
                "critic_loss", "model_norm", "lambda_ret", "ema", "logp"):
        res[key] = []
    for _ in range(3):
        obs = normal(torch, rng, batch, seq, obs_dim)
        act = normal(torch, rng, batch, seq, act_dim).tanh()
        rew = normal(torch, rng, batch, seq) * 4
        cont = torch.from_numpy((rng.random((batch, seq)) > 0.1).astype(np.float32))
        with torch.autocast(device_type="cpu", enabled=False):
            embed = encoder(obs)
            state = rssm.initial(batch)
            posts, priors = [], []
            for t in range(seq):
                state, prior = rssm.obs_step(state, act[:, t], embed[:, t],
                                             noise(batch, groups, classes),
                                             noise(batch, groups, classes))
                posts.append(state)
                priors.append(prior)
            post = {k: torch.stack([s[k] for s in posts], 1) for k in posts[0]}
            prior = {k: torch.stack([s[k] for s in priors], 1) for k in priors[0]}

            # KL balancing: each side sees the other through a stop-gradient, with free nats
            rep = torchd.kl_divergence(dist(post["logits"]), dist(prior["logits"].detach()))
            dyn = torchd.kl_divergence(dist(post["logits"].detach()), dist(prior["logits"]))
            rep_loss = torch.clamp(rep, min=free_nats).mean()
            dyn_loss = torch.clip(dyn, min=free_nats).mean()
            kl_loss = dyn_scale * dyn_loss + rep_scale * rep_loss
            f = feat(post)
            recon = torchd.Independent(torchd.Normal(decoder(f), 1.0), 1)
            recon_loss = -recon.log_prob(obs).mean()
            reward_loss = -DiscDist(reward_head(f)).log_prob(rew.unsqueeze(-1)).mean()
            cont_dist = torchd.Independent(torchd.Bernoulli(logits=cont_head(f)), 1)
            cont_loss = -cont_dist.log_prob(cont.unsqueeze(-1)).mean()
            model_loss = kl_loss + recon_loss + reward_loss + cont_loss
        model_opt.zero_grad(set_to_none=True)
        scaler.scale(model_loss).backward()
        scaler.unscale_(model_opt)
        res["model_norm"].append(nn.utils.clip_grad_norm_(world.parameters(), 100.0))
        scaler.step(model_opt)
        scaler.update()
        for key, value in (("model_loss", model_loss), ("kl", kl_loss), ("rep", rep_loss),
                           ("dyn", dyn_loss), ("recon", recon_loss),
                           ("reward_loss", reward_loss)):
            res[key].append(value.item())

        # imagination from every posterior state, through the (frozen) world model
        world.requires_grad_(False)
        start = {k: v.detach().flatten(0, 1) for k, v in post.items()}
        states, logps = [start], []
        for _ in range(horizon):
            policy, base = actor_dist(feat(states[-1]).detach())
            a = policy.base_dist.transforms[0](base.loc + base.scale
                                               * normal(torch, rng, batch * seq, act_dim))
            logps.append(policy.log_prob(a))
            states.append(rssm.img_step(states[-1], a, noise(batch * seq, groups, classes)))
        feats = torch.stack([feat(s) for s in states])
        reward = DiscDist(reward_head(feats)).mean().squeeze(-1)[1:]
        discount = gamma * torch.sigmoid(cont_head(feats)).squeeze(-1)[1:]
        value = critic(feats).squeeze(-1)
        # lambda-returns computed backwards from the bootstrap value
        last = value[-1]
        returns = []
        for t in reversed(range(horizon)):
            last = reward[t] + discount[t] * ((1 - lam) * value[t + 1] + lam * last)
            returns.append(last)
        returns = torch.stack(returns[::-1])
        offset, scale = reward_ema(returns)
        normed_returns = (returns - offset) / scale
        weight = torch.cumprod(torch.cat([torch.ones_like(discount[:1]), discount[:-1]]),
                               0).detach()
        logp = torch.stack(logps)
        actor_loss = -(weight * (normed_returns - actor_ent * logp)).mean()
        actor_opt.zero_grad()
        actor_loss.backward()
        actor_opt.step()
        world.requires_grad_(True)
        value_pred = critic(feats[:-1].detach()).squeeze(-1)
        critic_loss = 0.5 * (weight * (value_pred - returns.detach()) ** 2).mean()
        critic_opt.zero_grad()
        critic_loss.backward()
        critic_opt.step()
        res["actor_loss"].append(actor_loss.item())
        res["critic_loss"].append(critic_loss.item())
        res["lambda_ret"].append(returns.detach().mean(1))
        res["ema"].append(reward_ema.ema_vals.clone())
        res["logp"].append(logp.detach().mean(1))

    # the library's straight-through sampler: its gradient does not depend on the draw
    logits = normal(torch, rng, 2, groups, classes).requires_grad_()
    d = torchd.Independent(torchd.OneHotCategoricalStraightThrough(logits=logits), 1)
    torch.manual_seed(0)
    sample = d.rsample()
    w = normal(torch, rng, 2, groups, classes)
    (sample * w).sum().backward()
    res["st_grad"] = logits.grad
    res["st_meta"] = [tuple(sample.shape) == (2, groups, classes),
                      bool((sample.detach().sum(-1) == 1).all()), _name(sample.dtype),
                      list(d.batch_shape) == [2], list(d.event_shape) == [groups, classes]]
    res["entropy"] = d.entropy()
    res["mode_idx"] = d.base_dist.mode.argmax(-1).flatten().tolist()
    unimixed = OneHotDist(logits.detach(), unimix_ratio=unimix)
    res["unimix_mode"] = unimixed.mode()
    res["unimix_probs"] = unimixed.probs
    res["params"] = torch.cat([p.detach().flatten() for p in world.parameters()])
    res["actor"] = torch.cat([p.detach().flatten() for p in actor.parameters()])
    res["critic"] = torch.cat([p.detach().flatten() for p in critic.parameters()])
    return res


def replay_program(torch):
    """Prioritised replay on tensors, n-step returns (unfold and conv1d), Double-DQN targets."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2205)
    res = {}
    capacity, obs_dim, n_act, batch, n_step = 32, 4, 3, 8, 3
    alpha, beta, gamma, prio_eps = 0.6, 0.4, 0.9, 1e-6

    class QNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.network = nn.Sequential(nn.Linear(obs_dim, 32), nn.ReLU(),
                                         nn.Linear(32, n_act))

        def forward(self, x):
            return self.network(x)

    class SumTree:
        """A binary sum tree over `capacity` (a power of two) leaves, updated and searched
        for a whole batch of indices at once."""

        def __init__(self, capacity):
            self.capacity = capacity
            self.depth = int(math.log2(capacity))
            self.tree = torch.zeros(2 * capacity)

        def update(self, idx, value):
            idx, inverse = torch.unique(idx, return_inverse=True)
            first = torch.full(idx.shape, len(inverse), dtype=torch.long)
            first.scatter_reduce_(0, inverse, torch.arange(len(inverse)), reduce="amin")
            node = idx + self.capacity
            self.tree.index_copy_(0, node, value[first])
            for _ in range(self.depth):
                node = torch.unique(node // 2)
                self.tree[node] = self.tree[2 * node] + self.tree[2 * node + 1]

        def total(self):
            return self.tree[1]

        def find(self, mass):
            node = torch.ones_like(mass, dtype=torch.long)
            for _ in range(self.depth):
                left = self.tree[2 * node]
                go_right = mass > left
                mass = torch.where(go_right, mass - left, mass)
                node = 2 * node + go_right.long()
            return node - self.capacity

    q_network = QNetwork()
    fill_(torch, q_network, rng, 0.4)
    target_network = QNetwork()
    target_network.load_state_dict(q_network.state_dict())
    optimizer = torch.optim.Adam(q_network.parameters(), lr=2.5e-3)

    # a filled buffer of one trajectory with episode ends
    length = capacity + n_step - 1
    traj_obs = normal(torch, rng, length + 1, obs_dim)
    traj_act = torch.from_numpy(rng.integers(0, n_act, length))
    traj_rew = normal(torch, rng, length)
    traj_done = torch.from_numpy(rng.random(length) < 0.1)

    # n-step returns two ways: unfold windows dotted with gamma powers, and conv1d
    discounts = gamma ** torch.arange(n_step, dtype=torch.float32)
    windows = traj_rew.unfold(0, n_step, 1)
    done_windows = traj_done.float().unfold(0, n_step, 1)
    alive = torch.cumprod(1 - F.pad(done_windows[:, :-1], (1, 0)), dim=1)
    n_ret = (windows * alive * discounts).sum(-1)
    conv = F.conv1d(traj_rew.view(1, 1, -1), discounts.flip(0).view(1, 1, -1)).view(-1)
    res["unfold_vs_conv"] = n_ret - conv  # differ only where an episode ends in the window
    res["n_ret"] = n_ret
    res["conv"] = conv
    not_done_n = alive[:, -1] * (1 - done_windows[:, -1])
    buf_obs = traj_obs[:capacity]
    buf_next = traj_obs[n_step:n_step + capacity]
    acts_buf = traj_act[:capacity].numpy().astype(np.float32)  # a float32 numpy acts_buf
    buf_ret = n_ret[:capacity]
    buf_nd = not_done_n[:capacity]
    res["shapes"] = [*windows.shape, *windows.stride(), *conv.shape]
    res["as_strided"] = traj_rew.as_strided((capacity, n_step), (1, 1)) - windows[:capacity]

    priorities = torch.ones(capacity)
    priorities[::5] = 3.0
    visits = torch.zeros(capacity, dtype=torch.long)
    tree = SumTree(capacity)
    tree.update(torch.arange(capacity), priorities.pow(alpha))
    res["tree_idx"], res["tree_total"] = [], []
    res["loss"], res["idx"], res["weights"], res["prio_sum"] = [], [], [], []
    for step in range(5):
        scaled = priorities.pow(alpha)
        total = scaled.sum()
        cumsum = torch.cumsum(scaled, dim=0)
        # stratified sampling: one uniform draw in each of `batch` equal segments of the mass
        u = (torch.arange(batch) + _uniform(torch, rng, batch)) / batch * total
        idx = torch.searchsorted(cumsum, u).clamp_(max=capacity - 1)
        probs = scaled / total
        res["tree_idx"].append(tree.find(u))
        res["tree_total"].append(tree.total() - total)
        weights = (capacity * probs[idx]).pow(-beta)
        weights = weights / weights.max()
        res["idx"].append(idx)
        res["weights"].append(weights)

        with torch.no_grad():
            next_actions = q_network(buf_next[idx]).argmax(dim=1, keepdim=True)
            target_max = target_network(buf_next[idx]).gather(1, next_actions).squeeze(1)
            td_target = buf_ret[idx] + (gamma ** n_step) * target_max * buf_nd[idx]
        acts = acts_buf[idx.numpy()]
        q_all = q_network(buf_obs[idx])
        old_val = q_all.gather(1, torch.LongTensor(acts.reshape(-1, 1))).squeeze()
        # the same values subscripted straight with the float array, as PyTorch allows
        res.setdefault("subscript_vs_gather", []).append(q_all[np.arange(batch), acts] - old_val)
        elementwise = F.smooth_l1_loss(old_val, td_target, reduction="none")
        loss = (weights * elementwise).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        res["loss"].append(loss.item())

        new_prio = (old_val - td_target).detach().abs() + prio_eps
        if step % 2 == 0:  # duplicates keep their largest error
            priorities.scatter_reduce_(0, idx, new_prio, reduce="amax", include_self=False)
        else:
            uniq, inverse = torch.unique(idx, sorted=True, return_inverse=True)
            first = torch.full((len(uniq),), batch, dtype=torch.long).scatter_reduce(
                0, inverse, torch.arange(batch), reduce="amin")
            priorities.index_put_((uniq,), new_prio[first])
        visits.index_put_((idx,), torch.ones_like(idx), accumulate=True)
        tree.update(idx, priorities[idx].pow(alpha))
        res["prio_sum"].append(priorities.sum())
        if step % 2 == 1:
            target_network.load_state_dict(q_network.state_dict())

    # multinomial is deterministic when as many samples as non-zero weights are drawn
    # without replacement
    mask = (priorities > priorities.median()).float()
    drawn = torch.multinomial(mask * priorities, int(mask.sum()), replacement=False)
    res["multinomial"] = drawn.sort().values.tolist()
    res["multinomial_meta"] = [_name(drawn.dtype), drawn.dim()]
    res["bucketize"] = torch.bucketize(u, cumsum, right=False)
    res["visits"] = visits.tolist()
    res["priorities"] = priorities
    res["params"] = torch.cat([p.detach().flatten() for p in q_network.parameters()])
    res["meta"] = [_name(idx.dtype), _name(weights.dtype), _name(priorities.dtype),
                   _name(td_target.dtype)]
    return res


PROGRAMS = [world_model_program, replay_program]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    assert_same_results(program(ember), program(torch), rtol=2e-4, atol=2e-5)


# --- what the programs found ----------------------------------------------------------------

_SUBSCRIPTS = {
    "float_array": lambda x: x[np.array([1.0, 2.7])],
    "float32_column": lambda x: x[np.array([[3.0], [0.0]], dtype=np.float32)],
    "float_0d_array": lambda x: x[np.array(2.0)],
    "negative_float": lambda x: x[np.array([-1.0])],
    "float_list": lambda x: x[[0.0, 2.5]],
    "mixed_list": lambda x: x[[True, 1.0]],
    "int8_array": lambda x: x[np.array([1, 3], dtype=np.int8)],
    "row_and_float_column": lambda x: x[np.arange(2), np.array([2.0, 0.0])],
    "slice_and_float": lambda x: x[:, np.array([1.0])],
    "float_out_of_range": lambda x: x[np.array([4.0])],
    "nan_in_list": lambda x: x[[float("nan")]],
    "complex_list": lambda x: x[[1 + 1j]],
    "float_scalar": lambda x: x[1.0],
    "numpy_float_scalar": lambda x: x[np.float64(1.0)],
}


def _set_rows(x):
    x[np.array([1.0, 3.0])] = 0.0
    x[np.arange(2), np.array([2.0, 0.0])] += x.new_tensor([7.0, 8.0])
    return x


@pytest.mark.parametrize("subscript", [*_SUBSCRIPTS.values(), _set_rows], ids=[*_SUBSCRIPTS,
                                                                             "setitem"])
def test_sequence_subscripts_are_read_as_int64_like_torch(subscript):
    # a list or array subscript that is not a mask is converted to int64 as PyTorch converts
    # it (floats truncated toward zero), so a float32 numpy action buffer indexes directly;
    # a lone float (Python or NumPy scalar) is still refused
    def run(lib):
        return outcome(lambda: subscript(lib.arange(12.0).view(4, 3)),
                       describe=lambda t: (dtype_name(t.dtype), t.tolist()))
    assert run(ember) == run(torch)


@pytest.mark.parametrize("data", [1.5, np.float64(1.0), np.float32(2.0), True, np.bool_(True),
                                  None, 1j, np.array(2.0), np.int64(3), [True, 2.5]],
                         ids=lambda d: type(d).__name__)
@pytest.mark.parametrize("constructor", ["Tensor", "FloatTensor", "LongTensor"])
def test_legacy_constructors_take_only_sequences_as_data_like_torch(constructor, data):
    # torch.FloatTensor(reward) with a NumPy scalar reward is a TypeError in PyTorch, not a
    # 0-dim tensor (and True is not the size 1); integers remain sizes
    def run(lib):
        return outcome(lambda: getattr(lib, constructor)(data),
                       describe=lambda t: (dtype_name(t.dtype), list(t.shape)))
    assert run(ember) == run(torch)


def test_math_module_is_reachable_from_the_namespace_like_torch():
    # Dreamer ports write torch.math.log(2.0) in their TanhBijector
    assert ember.math is torch.math
    assert ember.math.log(2.0) == torch.math.log(2.0)


_MIXED_BOUNDS = {
    "function_keywords": lambda lib, t, b: lib.clamp(t, min=-1.0, max=b),
    "function_positional": lambda lib, t, b: lib.clamp(t, -1.0, b),
    "function_tensor_then_keyword": lambda lib, t, b: lib.clamp(t, b, max=3.0),
    "clip_function": lambda lib, t, b: lib.clip(t, -1.0, b),
    "method_positional": lambda lib, t, b: t.clamp(-1.0, b),
    "method_keywords": lambda lib, t, b: t.clamp(min=-1.0, max=b),
    "clip_method_keywords": lambda lib, t, b: t.clip(max=b, min=-1.0),
    "inplace": lambda lib, t, b: t.clamp_(b, 3.0),
}


@pytest.mark.parametrize("call", _MIXED_BOUNDS.values(), ids=_MIXED_BOUNDS)
def test_clamp_with_a_number_and_a_tensor_bound_words_the_call_like_torch(call):
    # action bounds given as one float and one tensor: PyTorch's parser lists the signatures
    # of the form called (function with ``out``, or method), the keywords as passed, and why
    # each signature taking as many arguments refused them
    def run(lib):
        return outcome(call, lib, lib.tensor([1.0, 5.0]), lib.tensor([2.0, 3.0]))
    assert run(ember) == run(torch)
