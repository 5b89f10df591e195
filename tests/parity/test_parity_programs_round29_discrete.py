"""Discrete latents and conditional computation written as their reference repositories write
them in torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy
weights, data and noise: a Gumbel-softmax categorical VAE (straight-through by hand from NumPy
Gumbel noise, F.gumbel_softmax hard=True checked for one-hotness under manual_seed, temperature
annealing), straight-through estimators (``x + (q - x).detach()``, a custom sign Function, an
argmax Function with ctx.mark_non_differentiable), REINFORCE with a baseline and a RELAX-lite
control variate (autograd.grad with create_graph), adaptive computation time and PonderNet
(halting by cumulative sums and masks, a geometric prior's KL), hypernetworks (F.linear, per-sample
kernels through F.conv2d with groups, functional_call with generated parameters), FiLM, a
conditional and an attentive neural process, a mixture density network (logsumexp and
MixtureSameFamily) and concrete dropout."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _gumbel(lib, rng, *shape):
    """Gumbel(0, 1) noise drawn from `rng`."""
    u = rng.uniform(1e-6, 1.0 - 1e-6, size=shape).astype(np.float32)
    return lib.from_numpy(-np.log(-np.log(u)).astype(np.float32))


def gumbel_vae_program(torch):
    """YongfeiYan/ericjang's categorical VAE: encoder logits, straight-through Gumbel-softmax
    sample by hand, Bernoulli decoder, KL to a uniform categorical, tau annealed by exp decay."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(0)
    N, K = 3, 4  # latent variables, categories

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(12, 16), nn.Linear(16, N * K)
            self.fc3, self.fc4 = nn.Linear(N * K, 16), nn.Linear(16, 12)

        def sample(self, logits, noise, tau, hard):
            y = F.softmax((logits + noise) / tau, dim=-1)
            if not hard:
                return y
            shape = y.size()
            _, ind = y.max(dim=-1)
            y_hard = torch.zeros_like(y).view(-1, shape[-1])
            y_hard.scatter_(1, ind.view(-1, 1), 1)
            y_hard = y_hard.view(*shape)
            return (y_hard - y).detach() + y

        def forward(self, x, noise, tau, hard):
            q = self.fc2(F.relu(self.fc1(x)))
            q_y = q.view(q.size(0), N, K)
            z = self.sample(q_y, noise, tau, hard)
            recon = torch.sigmoid(self.fc4(F.relu(self.fc3(z.view(-1, N * K)))))
            return recon, F.softmax(q_y, dim=-1).reshape(*q.size()), z

    model = VAE()
    fill_(torch, model, rng)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.from_numpy((rng.uniform(size=(5, 12)) > 0.5).astype(np.float32))
    res = {"loss": [], "tau": [], "onehot": []}
    tau0, anneal = 1.0, 3e-1
    for step in range(4):
        tau = max(tau0 * math.exp(-anneal * step), 0.5)
        recon, qy, z = model(x, _gumbel(torch, rng, 5, N, K), tau, hard=step % 2 == 0)
        bce = F.binary_cross_entropy(recon, x, reduction="sum") / x.shape[0]
        log_ratio = torch.log(qy * K + 1e-20)
        kld = torch.sum(qy * log_ratio, dim=-1).mean()
        loss = bce + kld
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["tau"].append(tau)
        res["onehot"].append(bool(((z == 0) | (z == 1)).all()) if step % 2 == 0 else True)
    res["grads"] = [p.grad for p in model.parameters()]
    res["params"] = list(model.parameters())
    # the library's own gumbel_softmax: shapes, one-hotness and reproducibility only
    logits = normal(torch, rng, 6, 5).requires_grad_()
    torch.manual_seed(3)
    a = F.gumbel_softmax(logits, tau=0.7, hard=True)
    torch.manual_seed(3)
    b = F.gumbel_softmax(logits, tau=0.7, hard=True)
    soft = F.gumbel_softmax(logits, tau=0.7, dim=0)
    res["gs_same"] = [bool(torch.equal(a, b))]
    res["gs_rows"] = a.sum(-1)
    res["gs_max"] = a.max(-1).values
    res["gs_soft_cols"] = soft.sum(0)
    res["gs_meta"] = [str(a.dtype).split(".")[-1], str(a.grad_fn is not None), str(tuple(a.shape))]
    (a * torch.arange(5.0)).sum().backward()
    res["gs_grad_shape"] = [str(tuple(logits.grad.shape)),
                            str(bool(torch.isfinite(logits.grad).all()))]
    return res


def straight_through_program(torch):
    """Binarised and quantised nets: sign with a clipped straight-through Function, round by
    ``x + (q - x).detach()``, an argmax Function whose index output is non-differentiable."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(1)

    class SignSTE(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sign()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * (x.abs() <= 1).to(g.dtype)

    class HardMax(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            idx = x.argmax(-1)
            onehot = F.one_hot(idx, x.shape[-1]).to(x.dtype)
            ctx.mark_non_differentiable(idx)
            return onehot, idx

        @staticmethod
        def backward(ctx, g_onehot, g_idx):
            return g_onehot

    class BinaryNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = nn.Linear(6, 8, bias=False), nn.Linear(8, 4)
            self.bn = nn.BatchNorm1d(8)

        def forward(self, x):
            w = SignSTE.apply(self.l1.weight)
            h = self.bn(F.linear(x, w))
            h = SignSTE.apply(h)
            q = torch.round(h * 2) / 2
            h = h + (q - h).detach()
            return self.l2(h)

    net = BinaryNet()
    fill_(torch, net, rng)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    x, y = normal(torch, rng, 7, 6), torch.tensor(rng.integers(0, 4, 7))
    res = {"loss": []}
    for _ in range(3):
        out = net(x)
        onehot, idx = HardMax.apply(out)
        loss = F.cross_entropy(out, y) + 0.1 * (onehot * out).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["idx"] = idx
    res["flags"] = [idx.requires_grad, onehot.requires_grad, idx.dtype == torch.int64,
                    type(onehot.grad_fn).__name__.startswith("HardMax")]
    res["params"] = list(net.parameters())
    res["running"] = [net.bn.running_mean, net.bn.running_var]
    res["tracked"] = [int(net.bn.num_batches_tracked)]
    return res


def reinforce_program(torch):
    """REINFORCE with a learned baseline over Categorical actions (actions from NumPy), then a
    RELAX-lite control variate: a surrogate c(z) whose gradient is taken with create_graph so
    that the variance of the estimator trains it."""
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    rng = np.random.default_rng(2)
    policy = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
    baseline = nn.Linear(4, 1)
    fill_(torch, policy, rng)
    fill_(torch, baseline, rng)
    opt = torch.optim.Adam(list(policy.parameters()) + list(baseline.parameters()), lr=1e-2)
    res = {"loss": [], "ent": [], "logp": []}
    for _ in range(3):
        s = normal(torch, rng, 8, 4)
        dist = D.Categorical(logits=policy(s))
        a = torch.from_numpy(rng.integers(0, 3, 8))
        r = (a == 1).float() - 0.1 * s[:, 0]
        b = baseline(s).squeeze(-1)
        adv = (r - b).detach()
        logp = dist.log_prob(a)
        loss = -(logp * adv).mean() + F.mse_loss(b, r) - 0.01 * dist.entropy().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["ent"].append(dist.entropy().mean().item())
        res["logp"].append(logp.sum().item())
    # RELAX-lite on a single Bernoulli: theta, u from NumPy, surrogate c_phi
    theta_logit = torch.tensor([0.3], requires_grad=True)
    phi = nn.Sequential(nn.Linear(1, 8), nn.ELU(), nn.Linear(8, 1))
    fill_(torch, phi, rng)
    opt_t = torch.optim.SGD([theta_logit], lr=0.1)
    opt_c = torch.optim.Adam(phi.parameters(), lr=1e-2)
    target = 0.45
    for _ in range(3):
        u = torch.from_numpy(rng.uniform(0.01, 0.99, (1,)).astype(np.float32))
        v = torch.from_numpy(rng.uniform(0.01, 0.99, (1,)).astype(np.float32))
        theta = torch.sigmoid(theta_logit)
        z = theta_logit + torch.log(u) - torch.log1p(-u)
        b = (z > 0).float()
        # conditional reparameterisation z~ given b
        vp = torch.where(b > 0, v * theta + (1 - theta), v * (1 - theta))
        zt = theta_logit + torch.log(vp) - torch.log1p(-vp)
        f_b = (b - target) ** 2
        c_z, c_zt = phi(torch.sigmoid(z)), phi(torch.sigmoid(zt))
        logp = b * torch.log(theta) + (1 - b) * torch.log1p(-theta)
        d_logp = torch.autograd.grad(logp.sum(), theta_logit, create_graph=True)[0]
        d_cz = torch.autograd.grad(c_z.sum(), theta_logit, create_graph=True)[0]
        d_czt = torch.autograd.grad(c_zt.sum(), theta_logit, create_graph=True)[0]
        g = (f_b - c_zt.squeeze(-1)) * d_logp + d_cz - d_czt
        opt_c.zero_grad()
        (g ** 2).mean().backward(inputs=list(phi.parameters()))
        opt_c.step()
        opt_t.zero_grad()
        theta_logit.grad = g.detach()
        opt_t.step()
        res.setdefault("relax_g", []).append(g.item())
    res["theta"] = theta_logit
    res["phi"] = list(phi.parameters())
    res["params"] = list(policy.parameters()) + list(baseline.parameters())
    return res


def act_program(torch):
    """Graves' adaptive computation time over an RNN cell (halting probabilities, cumsum,
    remainders, ponder cost), then PonderNet's unrolled halting distribution and geometric
    prior KL."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(3)
    cell, halt, out = nn.GRUCell(5, 8), nn.Linear(8, 1), nn.Linear(8, 2)
    for m in (cell, halt, out):
        fill_(torch, m, rng)
    params = [*cell.parameters(), *halt.parameters(), *out.parameters()]
    opt = torch.optim.RMSprop(params, lr=1e-2)
    x, y = normal(torch, rng, 4, 5), normal(torch, rng, 4, 2)
    eps, max_steps, tau = 0.05, 5, 0.01
    res = {"loss": [], "ponder": [], "steps": []}
    for _ in range(2):
        h = torch.zeros(4, 8)
        halting = torch.zeros(4)
        remainders = torch.zeros(4)
        n_updates = torch.zeros(4)
        acc_h = torch.zeros(4, 8)
        for n in range(max_steps):
            flag = torch.zeros(4, 1)
            flag[:, 0] = 1.0 if n == 0 else 0.0
            h = cell(torch.cat([x[:, :4], flag], 1), h)
            p = torch.sigmoid(halt(h)).squeeze(-1)
            still = (halting < 1.0).float()
            new_halted = ((halting + p * still) > 1 - eps).float() * still
            still = ((halting + p * still) <= 1 - eps).float() * still
            if n == max_steps - 1:
                new_halted, still = new_halted + still, torch.zeros_like(still)
            halting = halting + p * still
            remainders = remainders + new_halted * (1 - halting)
            halting = halting + new_halted * remainders
            n_updates = n_updates + still + new_halted
            w = p * still + new_halted * remainders
            acc_h = acc_h + w.unsqueeze(-1) * h
            if not bool((halting < 1.0).any()):
                break
        ponder = (n_updates + remainders).mean()
        loss = F.mse_loss(out(acc_h), y) + tau * ponder
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["ponder"].append(ponder.item())
        res["steps"].append(n)
    res["n_updates"] = n_updates
    # PonderNet: lambda_n per step, p_n = lambda_n * prod(1 - lambda_j), KL to geometric(0.3)
    h = torch.zeros(4, 8)
    lambdas, ys = [], []
    for n in range(4):
        h = cell(x, h) if n else cell(x, torch.zeros(4, 8))
        lam = torch.sigmoid(halt(h)).squeeze(-1)
        if n == 3:
            lam = torch.ones_like(lam)
        lambdas.append(lam)
        ys.append(out(h))
    lam = torch.stack(lambdas, 1)
    un_halted = torch.cumprod(torch.cat([torch.ones(4, 1), 1 - lam[:, :-1]], 1), 1)
    p = lam * un_halted
    prior = 0.3 * (1 - 0.3) ** torch.arange(4.0)
    prior = prior / prior.sum()
    kl = F.kl_div(prior.log().expand_as(p), p, reduction="batchmean", log_target=False)
    rec = (p * torch.stack([((yy - y) ** 2).mean(-1) for yy in ys], 1)).sum(1).mean()
    total = rec + 0.01 * F.kl_div(p.clamp_min(1e-8).log(), prior.expand_as(p),
                                  reduction="batchmean")
    total.backward()
    res["p"] = p
    res["kl"] = [kl.item(), total.item()]
    res["halt_grad"] = halt.weight.grad
    halted_at = torch.distributions.Geometric(probs=lam[:, 0]).log_prob(torch.zeros(4))
    res["geo"] = halted_at
    return res


def hypernet_program(torch):
    """A hypernetwork emits a target MLP's weights per task (functional_call with generated
    parameters and F.linear), and per-sample conv kernels applied as one grouped F.conv2d."""
    nn, F = torch.nn, torch.nn.functional
    functional_call = torch.func.functional_call
    rng = np.random.default_rng(4)
    target = nn.Sequential(nn.Linear(3, 6), nn.ReLU(), nn.Linear(6, 2))
    shapes = {k: v.shape for k, v in target.named_parameters()}
    sizes = [math.prod(s) for s in shapes.values()]
    hyper = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, sum(sizes)))
    fill_(torch, hyper, rng, 0.2)
    opt = torch.optim.AdamW(hyper.parameters(), lr=5e-3, weight_decay=1e-2)
    res = {"loss": []}
    for _ in range(3):
        tasks = normal(torch, rng, 2, 4)
        x, y = normal(torch, rng, 2, 5, 3), normal(torch, rng, 2, 5, 2)
        flat = hyper(tasks)
        loss = 0
        for t in range(2):
            chunks = torch.split(flat[t], sizes)
            params = {k: c.view(s) for (k, s), c in zip(shapes.items(), chunks)}
            pred = functional_call(target, params, (x[t],))
            w2, b2 = params["2.weight"], params["2.bias"]
            again = F.linear(F.relu(F.linear(x[t], params["0.weight"], params["0.bias"])), w2, b2)
            loss = loss + F.mse_loss(pred, y[t]) + 0 * (again - pred).abs().sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["hyper"] = list(hyper.parameters())
    res["target_untouched"] = [p.grad is None for p in target.parameters()]
    # per-sample dynamic convolution: B kernels generated from a code, grouped conv
    B, C, Co, k = 3, 2, 4, 3
    kgen = nn.Linear(5, Co * C * k * k)
    fill_(torch, kgen, rng, 0.2)
    code, img = normal(torch, rng, B, 5), normal(torch, rng, B, C, 6, 6)
    kernels = kgen(code).view(B * Co, C, k, k)
    out = F.conv2d(img.view(1, B * C, 6, 6), kernels, padding=1, groups=B).view(B, Co, 6, 6)
    ref = torch.stack([F.conv2d(img[i:i + 1], kernels[i * Co:(i + 1) * Co], padding=1)[0]
                       for i in range(B)])
    out.pow(2).mean().backward()
    res["dyn"] = out
    res["dyn_ref"] = [float((out - ref).abs().max())]
    res["kgen_grad"] = kgen.weight.grad
    return res


def film_np_program(torch):
    """FiLM-conditioned conv blocks, a conditional neural process (mean-aggregated context
    encoding, Normal likelihood with softplus scale) and an attentive NP's cross-attention."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(5)

    class FiLMBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 3, padding=1)
            self.bn = nn.BatchNorm2d(3, affine=False)
            self.film = nn.Linear(4, 6)

        def forward(self, x, c):
            gamma, beta = self.film(c).chunk(2, dim=1)
            h = self.bn(self.conv(x))
            return x + F.relu(gamma[:, :, None, None] * h + beta.view(-1, 3, 1, 1))

    block = FiLMBlock()
    fill_(torch, block, rng)
    x, c = normal(torch, rng, 2, 3, 5, 5), normal(torch, rng, 2, 4)
    y = block(x, c)
    y.square().mean().backward()
    res = {"film": y, "film_grad": [p.grad for p in block.parameters()]}

    class CNP(nn.Module):
        def __init__(self, attentive):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 16))
            self.dec = nn.Sequential(nn.Linear(17, 16), nn.ReLU(), nn.Linear(16, 2))
            self.attentive = attentive
            self.qk = nn.Linear(1, 16)
            self.attn = nn.MultiheadAttention(16, 2, batch_first=True)

        def forward(self, xc, yc, xt):
            r = self.enc(torch.cat([xc, yc], -1))
            if self.attentive:
                rep, w = self.attn(self.qk(xt), self.qk(xc), r)
            else:
                rep, w = r.mean(1, keepdim=True).expand(-1, xt.size(1), -1), None
            mu, raw = self.dec(torch.cat([rep, xt], -1)).unbind(-1)
            sigma = 0.1 + 0.9 * F.softplus(raw)
            return torch.distributions.Normal(mu, sigma), w

    for attentive in (False, True):
        model = CNP(attentive)
        fill_(torch, model, rng)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        key = "anp" if attentive else "cnp"
        res[key] = []
        for _ in range(3):
            xs = torch.from_numpy(rng.uniform(-2, 2, (2, 7, 1)).astype(np.float32))
            ys = torch.sin(xs) + 0.1 * normal(torch, rng, 2, 7, 1)
            dist, w = model(xs[:, :4], ys[:, :4], xs)
            loss = -dist.log_prob(ys.squeeze(-1)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            res[key].append(loss.item())
        res[key + "_scale"] = dist.scale
        if w is not None:
            res["attn_w"] = w
    return res


def mdn_program(torch):
    """Bishop's mixture density network by logsumexp, the same likelihood through
    MixtureSameFamily, and Gal's concrete dropout with its relaxed Bernoulli mask."""
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    rng = np.random.default_rng(6)
    K = 3
    net = nn.Sequential(nn.Linear(1, 12), nn.Tanh(), nn.Linear(12, 3 * K))
    fill_(torch, net, rng, 0.5)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    res = {"nll": [], "nll_msf": []}
    for _ in range(3):
        x = torch.from_numpy(rng.uniform(-1, 1, (10, 1)).astype(np.float32))
        y = torch.sin(3 * x) + 0.2 * normal(torch, rng, 10, 1)
        pi_logits, mu, log_sigma = net(x).split(K, dim=-1)
        log_pi = F.log_softmax(pi_logits, -1)
        sigma = log_sigma.exp()
        log_n = -0.5 * ((y - mu) / sigma) ** 2 - log_sigma - 0.5 * math.log(2 * math.pi)
        nll = -torch.logsumexp(log_pi + log_n, dim=-1).mean()
        mix = D.MixtureSameFamily(D.Categorical(logits=pi_logits), D.Normal(mu, sigma))
        nll_msf = -mix.log_prob(y.squeeze(-1)).mean()
        opt.zero_grad()
        (nll + 0 * nll_msf).backward()
        opt.step()
        res["nll"].append(nll.item())
        res["nll_msf"].append(nll_msf.item())
    res["mix_mean"] = mix.mean
    res["mix_var"] = mix.variance
    res["cdf"] = mix.cdf(torch.zeros(10))
    res["batch"] = [str(tuple(mix.batch_shape)), str(tuple(mix.event_shape))]
    res["params"] = list(net.parameters())

    class ConcreteDropout(nn.Module):
        def __init__(self, wr=1e-6, dr=1e-5):
            super().__init__()
            self.p_logit = nn.Parameter(torch.tensor([-2.0]))
            self.wr, self.dr = wr, dr

        def forward(self, x, layer, u):
            p = torch.sigmoid(self.p_logit)
            eps, temp = 1e-7, 0.1
            drop = (torch.log(p + eps) - torch.log(1 - p + eps) + torch.log(u + eps)
                    - torch.log(1 - u + eps))
            drop = torch.sigmoid(drop / temp)
            out = layer(x * (1 - drop) / (1 - p))
            sq = sum(torch.sum(w.pow(2)) for w in layer.parameters())
            wreg = self.wr * sq / (1 - p)
            dreg = p * torch.log(p) + (1.0 - p) * torch.log(1.0 - p)
            dreg = dreg * self.dr * x[0].numel()
            return out, wreg + dreg

    cd, layer = ConcreteDropout(), nn.Linear(6, 1)
    fill_(torch, layer, rng)
    opt = torch.optim.Adam([*cd.parameters(), *layer.parameters()], lr=5e-2)
    for _ in range(3):
        x, y = normal(torch, rng, 8, 6), normal(torch, rng, 8, 1)
        u = torch.from_numpy(rng.uniform(size=(8, 6)).astype(np.float32))
        out, reg = cd(x, layer, u)
        loss = F.mse_loss(out, y) + reg.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.setdefault("cd_loss", []).append(loss.item())
    res["p"] = torch.sigmoid(cd.p_logit)
    return res


PROGRAMS = [gumbel_vae_program, straight_through_program, reinforce_program, act_program,
            hypernet_program, film_np_program, mdn_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 matmul accumulation order over a few optimizer steps
        "gumbel_vae_program": (1e-4, 1e-5),
        "reinforce_program": (1e-4, 1e-5),
        "act_program": (1e-4, 1e-5),
        "hypernet_program": (1e-4, 1e-5),
        "film_np_program": (1e-4, 1e-5),
        "mdn_program": (1e-4, 1e-5),
    })
