"""Conditional computation and meta-models as their reference repositories write them in torch,
run once with `torch` bound to ember and once to PyTorch from the same NumPy weights, data and
noise: pytorch/examples' REINFORCE (saved log-probs, normalised returns, ``torch.cat`` of the
policy loss), BlockDrop (a Bernoulli policy over residual blocks trained by REINFORCE with a
self-critical baseline), BranchyNet early exits (entropy thresholds, masked writes, exit counts
by bincount), PonderNet trained end to end (a Geometric prior, exclusive cumprod of the
continue probabilities), a latent-path neural process (KL between Independent Normals), a
Kumaraswamy stick-breaking VAE (KL to a Beta prior) and a dynamic filter network (kernels per
pixel applied through F.unfold and einsum, hypernetwork weights through vmap of functional_call).
The _discrete sibling holds the Gumbel, straight-through and mixture programs."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def reinforce_examples_program(torch):
    """pytorch/examples' reinforce.py on a toy chain, actions from NumPy instead of m.sample()."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(10)

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.affine1 = nn.Linear(4, 16)
            self.dropout = nn.Dropout(p=0.0)
            self.affine2 = nn.Linear(16, 2)
            self.saved_log_probs, self.rewards = [], []

        def forward(self, x):
            x = F.relu(self.dropout(self.affine1(x)))
            return F.softmax(self.affine2(x), dim=1)

    policy = Policy()
    fill_(torch, policy, rng)
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    eps = np.finfo(np.float32).eps.item()
    res = {"loss": [], "returns": [], "actions": []}
    for _ in range(3):
        state = rng.standard_normal(4).astype(np.float32)
        for _t in range(5):
            s = torch.from_numpy(state).float().unsqueeze(0)
            probs = policy(s)
            m = torch.distributions.Categorical(probs)
            action = torch.tensor([int(rng.integers(0, 2))])
            policy.saved_log_probs.append(m.log_prob(action))
            res["actions"].append(action.item())
            policy.rewards.append(float(action.item() == int(state[0] > 0)))
            state = np.roll(state, 1) * np.float32(0.9)
        R, policy_loss, returns = 0, [], []
        for r in policy.rewards[::-1]:
            R = r + 0.99 * R
            returns.insert(0, R)
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + eps)
        for log_prob, R in zip(policy.saved_log_probs, returns):
            policy_loss.append(-log_prob * R)
        optimizer.zero_grad()
        policy_loss = torch.cat(policy_loss).sum()
        policy_loss.backward()
        optimizer.step()
        del policy.rewards[:]
        del policy.saved_log_probs[:]
        res["loss"].append(policy_loss.item())
        res["returns"].append(returns)
    res["params"] = list(policy.parameters())
    return res


def blockdrop_program(torch):
    """BlockDrop: a policy net emits per-block keep probabilities; the ResNet runs each block
    only where the sampled action keeps it; REINFORCE against the greedy (thresholded) policy."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(11)
    nb = 3
    blocks = nn.ModuleList([nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4),
                                          nn.ReLU()) for _ in range(nb)])
    stem, head = nn.Conv2d(2, 4, 3, padding=1), nn.Linear(4, 3)
    agent = nn.Sequential(nn.Conv2d(2, 3, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(3, nb))
    for m in (blocks, stem, head, agent):
        fill_(torch, m, rng)
    opt = torch.optim.Adam(agent.parameters(), lr=1e-2)

    def resnet(x, policy):
        x = F.relu(stem(x))
        for i, block in enumerate(blocks):
            action = policy[:, i].contiguous()
            action_mask = action.float().view(-1, 1, 1, 1)
            fx = block(x)
            x = fx * action_mask + x * (1 - action_mask)
        return head(F.adaptive_avg_pool2d(x, 1).flatten(1))

    res = {"reward": [], "loss": [], "sparsity": []}
    for _ in range(3):
        x = normal(torch, rng, 4, 2, 6, 6)
        y = torch.from_numpy(rng.integers(0, 3, 4))
        probs = torch.sigmoid(agent(x))
        probs = probs * 0.8 + (1 - probs) * 0.2
        policy_map = probs.data.clone()
        policy_map[policy_map < 0.5] = 0.0
        policy_map[policy_map >= 0.5] = 1.0
        distr = torch.distributions.Bernoulli(probs)
        policy = torch.from_numpy((rng.uniform(size=(4, nb)) < 0.5).astype(np.float32))
        with torch.no_grad():
            preds = resnet(x, policy)
            preds_map = resnet(x, policy_map)
        blocks_used = policy.sum(1)
        sparse = (1 - blocks_used / nb) ** 2
        match = (preds.argmax(1) == y).float()
        reward = sparse * match - 0.5 * (1 - match)
        match_map = (preds_map.argmax(1) == y).float()
        reward_map = ((1 - policy_map.sum(1) / nb) ** 2) * match_map - 0.5 * (1 - match_map)
        advantage = (reward - reward_map).unsqueeze(1).expand_as(policy)
        loss = -distr.log_prob(policy) * advantage.detach()
        loss = loss.sum() - 0.1 * distr.entropy().sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["reward"].append(reward)
        res["loss"].append(loss.item())
        res["sparsity"].append(blocks_used.mean().item())
    res["agent"] = list(agent.parameters())
    res["bn"] = [blocks[0][1].running_mean, blocks[2][1].running_var]
    return res


def branchynet_program(torch):
    """BranchyNet: joint training of every exit, then inference that leaves at the first exit
    whose softmax entropy is under its threshold (masked writes, exit histogram)."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(12)
    trunk = nn.ModuleList([nn.Sequential(nn.Linear(6, 10), nn.ReLU()),
                           nn.Sequential(nn.Linear(10, 10), nn.ReLU()),
                           nn.Sequential(nn.Linear(10, 10), nn.ReLU())])
    exits = nn.ModuleList([nn.Linear(10, 4) for _ in range(3)])
    for m in (trunk, exits):
        fill_(torch, m, rng, 0.5)
    params = [*trunk.parameters(), *exits.parameters()]
    opt = torch.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True)
    weights = [1.0, 0.6, 0.3]
    res = {"loss": []}
    for _ in range(3):
        x, y = normal(torch, rng, 8, 6), torch.from_numpy(rng.integers(0, 4, 8))
        h, loss = x, 0.0
        for w, block, ex in zip(weights, trunk, exits):
            h = block(h)
            loss = loss + w * F.cross_entropy(ex(h), y, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    trunk.eval()
    exits.eval()
    thresholds = [0.9, 1.2, float("inf")]
    x = normal(torch, rng, 10, 6)
    with torch.no_grad():
        out = torch.zeros(10, 4)
        exit_at = torch.full((10,), -1, dtype=torch.long)
        remaining = torch.ones(10, dtype=torch.bool)
        h = x
        for i, (block, ex) in enumerate(zip(trunk, exits)):
            h = block(h)
            p = F.softmax(ex(h), dim=1)
            entropy = -(p * torch.log(p.clamp_min(1e-12))).sum(1)
            take = remaining & (entropy < thresholds[i])
            out[take] = p[take]
            exit_at[take] = i
            remaining &= ~take
            if not remaining.any():
                break
    res["out"] = out
    res["exit_at"] = exit_at
    res["hist"] = torch.bincount(exit_at, minlength=3)
    res["params"] = params
    return res


def pondernet_program(torch):
    """PonderNet (Banino et al.) trained end to end: a GRU step emits y_n and lambda_n, the
    halting distribution by exclusive cumprod, reconstruction weighted by p_n and KL to a
    truncated Geometric prior; the expected number of steps reported."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(13)
    max_steps, lambda_p, beta = 5, 0.4, 0.01

    class PonderGRU(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = nn.GRUCell(4, 12)
            self.out, self.lam = nn.Linear(12, 1), nn.Linear(12, 1)

        def forward(self, x):
            h = x.new_zeros(x.shape[0], 12)
            un_halted = x.new_ones(x.shape[0])
            ys, ps = [], []
            for n in range(1, max_steps + 1):
                h = self.cell(x, h)
                if n == max_steps:
                    lam = x.new_ones(x.shape[0])
                else:
                    lam = torch.sigmoid(self.lam(h))[:, 0]
                ys.append(self.out(h)[:, 0])
                ps.append(un_halted * lam)
                un_halted = un_halted * (1 - lam)
            return torch.stack(ys), torch.stack(ps)

    model = PonderGRU()
    fill_(torch, model, rng)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    prior = torch.distributions.Geometric(probs=torch.tensor(lambda_p))
    p_g = prior.log_prob(torch.arange(max_steps, dtype=torch.float)).exp()
    p_g = p_g / p_g.sum()
    res = {"loss": [], "steps": [], "p_g": p_g}
    for _ in range(3):
        x = torch.from_numpy((rng.uniform(size=(6, 4)) > 0.5).astype(np.float32))
        y = (x.sum(1) % 2)
        ys, ps = model(x)
        rec = (ps * F.binary_cross_entropy_with_logits(
            ys, y.expand_as(ys), reduction="none")).sum(0).mean()
        reg = F.kl_div(p_g.log()[:, None].expand_as(ps).transpose(0, 1), ps.transpose(0, 1),
                       reduction="batchmean")
        loss = rec + beta * reg
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps = (ps * torch.arange(1, max_steps + 1, dtype=ps.dtype)[:, None]).sum(0)
        res["loss"].append(loss.item())
        res["steps"].append(steps.mean().item())
    res["ps"] = ps
    res["params"] = list(model.parameters())
    return res


def latent_np_program(torch):
    """A neural process with a latent path: q(z | context) and q(z | target) as Independent
    Normals, reparameterised with NumPy noise, ELBO with their KL; the deterministic path by a
    masked mean over padded context points."""
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    rng = np.random.default_rng(14)

    class LatentNP(nn.Module):
        def __init__(self):
            super().__init__()
            self.det = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 16))
            self.lat = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 8))
            self.dec = nn.Sequential(nn.Linear(16 + 4 + 1, 16), nn.ReLU(), nn.Linear(16, 2))

        def posterior(self, x, y, mask):
            s = self.lat(torch.cat([x, y], -1)) * mask
            s = s.sum(1) / mask.sum(1)
            mu, raw = s.chunk(2, -1)
            return D.Independent(D.Normal(mu, 0.1 + 0.9 * torch.sigmoid(raw)), 1)

        def forward(self, xc, yc, mc, xt, yt, eps):
            r = (self.det(torch.cat([xc, yc], -1)) * mc).sum(1) / mc.sum(1)
            prior = self.posterior(xc, yc, mc)
            post = self.posterior(xt, yt, torch.ones_like(xt))
            z = post.mean + post.stddev * eps
            n = xt.size(1)
            h = torch.cat([r.unsqueeze(1).repeat(1, n, 1), z.unsqueeze(1).repeat(1, n, 1), xt],
                          -1)
            mu, raw = self.dec(h).unbind(-1)
            lik = D.Normal(mu, 0.1 + 0.9 * F.softplus(raw)).log_prob(yt.squeeze(-1)).sum(-1)
            kl = D.kl_divergence(post, prior)
            return -(lik - kl).mean(), kl

    model = LatentNP()
    fill_(torch, model, rng)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    res = {"loss": [], "kl": []}
    for _ in range(3):
        xt = torch.from_numpy(rng.uniform(-2, 2, (3, 8, 1)).astype(np.float32))
        yt = torch.sin(2 * xt) + 0.05 * normal(torch, rng, 3, 8, 1)
        mc = torch.ones(3, 5, 1)
        mc[0, 3:] = 0
        mc[2, 4:] = 0
        eps = normal(torch, rng, 3, 4)
        loss, kl = model(xt[:, :5], yt[:, :5], mc, xt, yt, eps)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["kl"].append(kl)
    res["params"] = list(model.parameters())
    return res


def stick_breaking_vae_program(torch):
    """Nalisnick and Smyth's stick-breaking VAE: Kumaraswamy(a, b) fractions by the inverse CDF
    of NumPy uniforms, stick-breaking by cumprod, KL to Beta(1, alpha) by the closed-form
    Taylor series, and the library's Kumaraswamy log_prob checked against it."""
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    rng = np.random.default_rng(15)
    K, alpha = 5, 2.0

    class SBVAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(10, 16), nn.Softplus(), nn.Linear(16, 2 * (K - 1)))
            self.dec = nn.Sequential(nn.Linear(K, 16), nn.Softplus(), nn.Linear(16, 10))

        def forward(self, x, u):
            a, b = F.softplus(self.enc(x)).add(1e-3).chunk(2, -1)
            v = (1 - u.pow(1 / b)).pow(1 / a)
            v = v.clamp(1e-6, 1 - 1e-6)
            remaining = torch.cumprod(1 - v, -1)
            pi = torch.cat([v, torch.ones_like(v[:, :1])], -1) * torch.cat(
                [torch.ones_like(v[:, :1]), remaining], -1)
            return self.dec(pi), a, b, v, pi

    def kl_kumar_beta(a, b, prior_alpha, terms=10):
        kl = 1.0 / (1 + a * b) * torch.exp(torch.lgamma(1 / a) + torch.lgamma(b)
                                           - torch.lgamma(1 / a + b)) / a
        for m in range(2, terms + 1):
            kl = kl + 1.0 / (m + a * b) * torch.exp(torch.lgamma(m / a) + torch.lgamma(b)
                                                    - torch.lgamma(m / a + b)) / a
        kl = kl * (prior_alpha - 1) * b
        psi_b = torch.digamma(b)
        kl = kl + (a - 1) / a * (-0.57721 - psi_b - 1 / b)
        kl = kl + torch.log(a * b) + math.lgamma(1.0) + math.lgamma(prior_alpha) \
            - math.lgamma(1.0 + prior_alpha)
        return kl - (b - 1) / b

    model = SBVAE()
    fill_(torch, model, rng)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    res = {"loss": [], "kl": []}
    for _ in range(3):
        x = torch.from_numpy((rng.uniform(size=(6, 10)) > 0.6).astype(np.float32))
        u = torch.from_numpy(rng.uniform(0.01, 0.99, (6, K - 1)).astype(np.float32))
        logits, a, b, v, pi = model(x, u)
        rec = F.binary_cross_entropy_with_logits(logits, x, reduction="sum") / 6
        kl = kl_kumar_beta(a, b, alpha).sum(-1).mean()
        loss = rec + kl
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["kl"].append(kl.item())
    res["pi_rows"] = pi.sum(-1)
    res["kumar_lp"] = D.Kumaraswamy(a.detach(), b.detach()).log_prob(v.detach())
    res["kumar_mean"] = D.Kumaraswamy(a.detach(), b.detach()).mean
    res["beta_lp"] = D.Beta(torch.ones(4), torch.full((4,), alpha)).log_prob(v.detach())
    res["params"] = list(model.parameters())
    return res


def dynamic_filter_program(torch):
    """A dynamic filter network: a filter-generating net emits a softmax-normalised 3x3 kernel
    per pixel, applied by F.unfold and einsum; a hypernetwork's per-sample MLP weights applied
    through vmap of functional_call, and its per-sample gradients by vmap(grad)."""
    nn, F = torch.nn, torch.nn.functional
    func = torch.func
    rng = np.random.default_rng(16)
    gen = nn.Sequential(nn.Conv2d(2, 8, 3, padding=1), nn.LeakyReLU(0.1), nn.Conv2d(8, 9, 1))
    fill_(torch, gen, rng)
    opt = torch.optim.Adam(gen.parameters(), lr=1e-2)
    res = {"loss": []}
    for _ in range(3):
        img, nxt = normal(torch, rng, 2, 2, 6, 6), normal(torch, rng, 2, 2, 6, 6)
        filters = F.softmax(gen(img), dim=1)
        patches = F.unfold(img, kernel_size=3, padding=1).view(2, 2, 9, 6, 6)
        pred = torch.einsum("bckhw,bkhw->bchw", patches, filters)
        loss = F.l1_loss(pred, nxt) + F.smooth_l1_loss(pred, nxt, beta=0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["gen"] = list(gen.parameters())
    target = nn.Sequential(nn.Linear(3, 4), nn.GELU(), nn.Linear(4, 1))
    names = [n for n, _ in target.named_parameters()]
    shapes = [p.shape for p in target.parameters()]
    sizes = [math.prod(s) for s in shapes]
    hyper = nn.Linear(2, sum(sizes))
    fill_(torch, hyper, rng, 0.3)
    codes, xs, ys = normal(torch, rng, 4, 2), normal(torch, rng, 4, 5, 3), normal(torch, rng, 4, 5)

    def task_loss(hw, hb, code, x, y):
        flat = F.linear(code, hw, hb)
        params = {n: c.view(s) for n, c, s in zip(names, flat.split(sizes), shapes)}
        return F.mse_loss(func.functional_call(target, params, (x,)).squeeze(-1), y)

    losses = func.vmap(task_loss, in_dims=(None, None, 0, 0, 0))(
        hyper.weight, hyper.bias, codes, xs, ys)
    losses.mean().backward()
    per_task = func.vmap(func.grad(task_loss, argnums=(0, 1)), in_dims=(None, None, 0, 0, 0))(
        hyper.weight.detach(), hyper.bias.detach(), codes, xs, ys)
    res["task_losses"] = losses
    res["hyper_grad"] = [hyper.weight.grad, hyper.bias.grad]
    res["per_task"] = list(per_task)
    res["mean_per_task"] = [per_task[0].mean(0), per_task[1].mean(0)]
    return res


PROGRAMS = [reinforce_examples_program, blockdrop_program, branchynet_program, pondernet_program,
            latent_np_program, stick_breaking_vae_program, dynamic_filter_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 accumulation order (matmul, conv, lgamma series) over a few optimizer steps
        name.__name__: (1e-4, 1e-5) for name in PROGRAMS})
