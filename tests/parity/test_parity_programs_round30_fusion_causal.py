"""Causal-inference and energy-model programs written as their reference repositories write them
in torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy data:
DragonNet / TARNet with targeted regularisation (an epsilon layer fed ones_like), IPW and
doubly-robust ATE estimates with clamped propensities, a CEVAE-lite through torch.distributions
(rsample from given noise, kl_divergence, Bernoulli log_prob), JEM (logsumexp energies, SGLD by
autograd.grad on a Variable, a replay buffer from NumPy noise), noise-contrastive estimation, and
sliced / Hutchinson score matching through create_graph. Sibling of _fusion; _fixes pins what
they found."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _observational(rng, n=64, d=5):
    """Confounded data: x drives both treatment and outcome."""
    x = rng.standard_normal((n, d)).astype(np.float32)
    logit = x[:, 0] - 0.5 * x[:, 1]
    t = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.float32)
    y = (x @ np.linspace(-1, 1, d) + 2.0 * t + 0.3 * rng.standard_normal(n)).astype(np.float32)
    return x, t[:, None], y[:, None]


def dragonnet_program(torch):
    """DragonNet: shared representation, two outcome heads, a propensity head and the epsilon
    layer of targeted regularisation; TARNet's factual MSE; IPW / AIPW / TMLE-style estimates."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(10)
    xn, tn, yn = _observational(rng)
    x, t, y = torch.from_numpy(xn), torch.from_numpy(tn), torch.from_numpy(yn)

    class EpsilonLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.epsilon = nn.Parameter(torch.abs(torch.randn(1, 1)))

        def forward(self, inputs):
            return self.epsilon * torch.ones_like(inputs)[:, 0:1]

    class DragonNet(nn.Module):
        def __init__(self, d, h=16):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(d, h), nn.Linear(h, h)
            self.treat_out = nn.Linear(h, 1)
            self.y0_fc, self.y0_out = nn.Linear(h, 8), nn.Linear(8, 1)
            self.y1_fc, self.y1_out = nn.Linear(h, 8), nn.Linear(8, 1)
            self.epsilon = EpsilonLayer()

        def forward(self, inputs):
            z = F.elu(self.fc2(F.elu(self.fc1(inputs))))
            t_pred = torch.sigmoid(self.treat_out(z))
            y0 = self.y0_out(F.elu(self.y0_fc(z)))
            y1 = self.y1_out(F.elu(self.y1_fc(z)))
            eps = self.epsilon(t_pred)
            return y0, y1, t_pred, eps

    def dragonnet_loss(y_true, t_true, t_pred, y0_pred, y1_pred, eps, alpha=1.0, beta=1.0):
        t_pred = (t_pred + 0.01) / 1.02
        loss_t = torch.sum(F.binary_cross_entropy(t_pred, t_true, reduction="none"))
        loss0 = torch.sum((1.0 - t_true) * torch.square(y_true - y0_pred))
        loss1 = torch.sum(t_true * torch.square(y_true - y1_pred))
        loss_y = loss0 + loss1
        y_pred = t_true * y1_pred + (1 - t_true) * y0_pred
        h = t_true / t_pred - (1 - t_true) / (1 - t_pred)
        y_pert = y_pred + eps * h
        targeted_regularization = torch.sum((y_true - y_pert) ** 2)
        return loss_y + alpha * loss_t + beta * targeted_regularization

    model = DragonNet(xn.shape[1])
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, nesterov=True,
                          weight_decay=0.01)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=0)
    res = {}
    for step in range(6):
        y0, y1, t_pred, eps = model(x)
        loss = dragonnet_loss(y, t, t_pred, y0, y1, eps)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step(loss.item() + (10.0 if step == 3 else 0.0))
        res[f"loss{step}"] = loss.item()
    res["lr"] = [group["lr"] for group in opt.param_groups]
    res["eps"] = model.epsilon.epsilon.detach()
    model.eval()
    with torch.inference_mode():
        y0, y1, t_pred, eps = model(x)
    res["inference"] = [y0.is_inference(), y0.requires_grad]
    # estimators, as causal-ml notebooks write them
    e = torch.clamp(t_pred, 0.01, 0.99)
    res["ipw_ate"] = torch.mean(t * y / e - (1 - t) * y / (1 - e))
    w = t / e + (1 - t) / (1 - e)
    res["hajek"] = ((t * w * y).sum() / (t * w).sum() - ((1 - t) * w * y).sum()
                    / ((1 - t) * w).sum())
    aipw = y1 - y0 + t * (y - y1) / e - (1 - t) * (y - y0) / (1 - e)
    res["aipw"] = torch.stack([aipw.mean(), aipw.std() / np.sqrt(len(aipw))])
    y_pred = t * y1 + (1 - t) * y0
    h = t / e - (1 - t) / (1 - e)
    eps_hat = torch.linalg.lstsq(h, y - y_pred).solution
    res["tmle"] = (y1 + eps_hat / e - (y0 - eps_hat / (1 - e))).mean()
    idx = torch.from_numpy(rng.integers(0, len(aipw), (20, len(aipw))))
    boot = aipw.squeeze(1)[idx].mean(1)
    res["ci"] = torch.quantile(boot, torch.tensor([0.025, 0.975]))
    res["ate_by_t"] = torch.stack([(y1 - y0)[t.bool().squeeze()].mean(),
                                   (y1 - y0)[~t.bool().squeeze()].mean()])
    return res


def cevae_program(torch):
    """CEVAE-lite: q(t|x), q(y|t,x), q(z|x,t,y) and p(x|z), p(t|z), p(y|t,z) as
    torch.distributions, rsample from given noise, analytic KL, ATE from decoder samples."""
    nn, F = torch.nn, torch.nn.functional
    dist = torch.distributions
    rng = np.random.default_rng(11)
    xn, tn, yn = _observational(rng, n=32, d=4)
    xb = (xn > 0).astype(np.float32)
    x, t, y = torch.from_numpy(xb), torch.from_numpy(tn), torch.from_numpy(yn)
    Z, H = 2, 12

    class TwoHead(nn.Module):
        def __init__(self, d_in, d_out):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(d_in, H), nn.ELU())
            self.head0, self.head1 = nn.Linear(H, d_out), nn.Linear(H, d_out)

        def forward(self, inp, t):
            h = self.body(inp)
            return torch.where(t.bool(), self.head1(h), self.head0(h))

    q_t = nn.Linear(4, 1)
    q_y = TwoHead(4, 1)
    q_z = TwoHead(5, 2 * Z)
    p_x = nn.Sequential(nn.Linear(Z, H), nn.ELU(), nn.Linear(H, 4))
    p_t = nn.Linear(Z, 1)
    p_y = TwoHead(Z, 1)
    mods = nn.ModuleList([q_t, q_y, q_z, p_x, p_t, p_y])
    fill_(torch, mods, rng, 0.3)
    opt = torch.optim.Adam(mods.parameters(), lr=1e-2)
    prior = dist.Normal(torch.zeros(Z), torch.ones(Z))
    res = {}
    for step in range(4):
        qt = dist.Bernoulli(logits=q_t(x))
        qy = dist.Normal(q_y(x, t), 1.0)
        loc, raw = q_z(torch.cat([x, y], 1), t).chunk(2, dim=-1)
        qz = dist.Normal(loc, F.softplus(raw) + 1e-3)
        eps = normal(torch, rng, 32, Z)
        z = qz.loc + qz.scale * eps
        px = dist.Bernoulli(logits=p_x(z))
        pt = dist.Bernoulli(logits=p_t(z))
        py = dist.Normal(p_y(z, t), 1.0)
        elbo = (px.log_prob(x).sum(-1) + pt.log_prob(t).sum(-1) + py.log_prob(y).sum(-1)
                - dist.kl_divergence(qz, prior).sum(-1))
        aux = qt.log_prob(t).sum(-1) + qy.log_prob(y).sum(-1)
        loss = -(elbo + aux).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res[f"loss{step}"] = loss.detach()
        res[f"kl{step}"] = dist.kl_divergence(qz, prior).sum().detach()
    with torch.no_grad():
        t_hat = qt.probs > 0.5
        y_hat = qy.mean
        loc, raw = q_z(torch.cat([x, y_hat], 1), t_hat.float()).chunk(2, dim=-1)
        zq = dist.Normal(loc, F.softplus(raw) + 1e-3).mean
        ite = p_y(zq, torch.ones_like(t)) - p_y(zq, torch.zeros_like(t))
    res["ate"] = ite.mean()
    res["entropy"] = qt.entropy().mean().detach()
    res["shapes"] = [*qz.batch_shape, len(qz.event_shape), *px.sample().shape]
    res["lp"] = pt.log_prob(torch.ones_like(t)).detach()
    return res


def jem_program(torch):
    """JEM: energies as -logsumexp of classifier logits, SGLD by torch.autograd.grad on a
    Variable with .data updates, a replay buffer reinitialised from NumPy uniform noise, p(x)
    and p(y|x) losses with an energy L2 term."""
    nn, F = torch.nn, torch.nn.functional
    Variable = torch.autograd.Variable
    rng = np.random.default_rng(12)
    D, C, B, buffer_size, n_steps = 6, 3, 8, 20, 5
    f = nn.Sequential(nn.Linear(D, 16), nn.LeakyReLU(0.2), nn.Linear(16, 16),
                      nn.LeakyReLU(0.2), nn.Linear(16, C))
    fill_(torch, f, rng, 0.4)
    opt = torch.optim.Adam(f.parameters(), lr=1e-3, betas=(0.0, 0.999))
    replay_buffer = torch.from_numpy(rng.uniform(-1, 1, (buffer_size, D)).astype(np.float32))

    def energy(x, y=None):
        logits = f(x)
        if y is None:
            return logits.logsumexp(1)
        return torch.gather(logits, 1, y[:, None])

    def sample_p_0(bs):
        inds = torch.from_numpy(rng.integers(0, buffer_size, (bs,)))
        buffer_samples = replay_buffer[inds]
        random_samples = torch.from_numpy(rng.uniform(-1, 1, (bs, D)).astype(np.float32))
        choose_random = (torch.from_numpy(rng.random(bs)) < 0.05).float()[:, None]
        samples = choose_random * random_samples + (1 - choose_random) * buffer_samples
        return samples, inds

    def sample_q(bs):
        f.eval()
        init_sample, buffer_inds = sample_p_0(bs)
        x_k = Variable(init_sample, requires_grad=True)
        for _ in range(n_steps):
            f_prime = torch.autograd.grad(energy(x_k).sum(), [x_k], retain_graph=True)[0]
            noise = torch.from_numpy(rng.standard_normal((bs, D)).astype(np.float32))
            x_k.data += 1.0 * f_prime + 0.01 * noise
        f.train()
        final_samples = x_k.detach()
        replay_buffer[buffer_inds] = final_samples.cpu()
        return final_samples

    x_lab = normal(torch, rng, 32, D)
    y_lab = torch.from_numpy(rng.integers(0, C, 32))
    res = {"variable": [type(Variable(x_lab)).__name__]}
    for step in range(3):
        x = x_lab[step * B:(step + 1) * B]
        yy = y_lab[step * B:(step + 1) * B]
        x_q = sample_q(B)
        fp, fq = energy(x).mean(), energy(x_q).mean()
        l_p_x = -(fp - fq)
        l_p_y_given_x = F.cross_entropy(f(x), yy)
        loss = l_p_x + l_p_y_given_x + 0.1 * (fp ** 2 + fq ** 2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res[f"loss{step}"] = [fp.item(), fq.item(), loss.item()]
        res[f"xq{step}"] = x_q
    res["buffer"] = replay_buffer
    res["class_energy"] = energy(x_lab[:4], y_lab[:4]).detach()
    res["training"] = [f.training]
    return res


def nce_program(torch):
    """Noise-contrastive estimation of an unnormalised density (learned log-normaliser) against
    a Gaussian noise distribution, and word-level NCE with sampled negatives by index_select."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(13)
    D, nu = 2, 4
    data = torch.from_numpy((rng.standard_normal((64, D)) * [0.5, 1.5] + [1.0, -0.5])
                            .astype(np.float32))
    energy = nn.Sequential(nn.Linear(D, 16), nn.Softplus(), nn.Linear(16, 1))
    fill_(torch, energy, rng, 0.4)
    log_z = nn.Parameter(torch.tensor(0.0))
    noise_dist = torch.distributions.MultivariateNormal(torch.zeros(D), 4.0 * torch.eye(D))
    opt = torch.optim.Adam(list(energy.parameters()) + [log_z], lr=1e-2)
    res = {}
    for step in range(4):
        noise = torch.from_numpy(rng.standard_normal((64 * nu, D)).astype(np.float32) * 2.0)
        log_p_data = -energy(data).squeeze(-1) - log_z
        log_p_noise_s = -energy(noise).squeeze(-1) - log_z
        logit_data = log_p_data - noise_dist.log_prob(data) - np.log(nu)
        logit_noise = log_p_noise_s - noise_dist.log_prob(noise) - np.log(nu)
        logits = torch.cat([logit_data, logit_noise])
        labels = torch.cat([torch.ones_like(logit_data), torch.zeros_like(logit_noise)])
        loss = F.binary_cross_entropy_with_logits(logits, labels, reduction="sum") / data.shape[0]
        opt.zero_grad()
        loss.backward()
        opt.step()
        res[f"loss{step}"] = loss.detach()
    res["log_z"] = log_z.detach()
    # word-level NCE (Mnih & Teh): unigram noise, sampled negatives from NumPy
    Vw, E, K = 12, 6, 5
    emb_in, emb_out = nn.Embedding(Vw, E), nn.Embedding(Vw, E)
    bias = nn.Embedding(Vw, 1)
    fill_(torch, nn.ModuleList([emb_in, emb_out, bias]), rng, 0.4)
    counts = torch.arange(1, Vw + 1, dtype=torch.float32) ** 0.75
    noise_probs = counts / counts.sum()
    ctx = torch.from_numpy(rng.integers(0, Vw, 10))
    target = torch.from_numpy(rng.integers(0, Vw, 10))
    p_np = noise_probs.numpy().astype(np.float64)
    negs = torch.from_numpy(rng.choice(Vw, (10, K), p=p_np / p_np.sum()))
    h = emb_in(ctx)
    s_true = (h * emb_out(target)).sum(-1) + bias(target).squeeze(-1)
    w_neg = emb_out.weight.index_select(0, negs.view(-1)).view(10, K, E)
    s_neg = torch.bmm(w_neg, h.unsqueeze(2)).squeeze(2) + bias(negs).squeeze(-1)
    log_kq_true = torch.log(K * noise_probs[target])
    log_kq_neg = torch.log(K * noise_probs.gather(0, negs.view(-1)).view(10, K))
    loss_w = -(F.logsigmoid(s_true - log_kq_true)
               + F.logsigmoid(-(s_neg - log_kq_neg)).sum(1)).mean()
    loss_w.backward()
    res["word_loss"] = loss_w.detach()
    res["emb_out_grad"] = emb_out.weight.grad
    res["bias_grad"] = bias.weight.grad
    return res


def score_matching_program(torch):
    """Sliced score matching (SSM and SSM-VR), the Hutchinson trace estimate against the exact
    Jacobian trace (loop of autograd.grad and func.jacrev), denoising score matching."""
    nn = torch.nn
    rng = np.random.default_rng(14)
    D, B, n_particles = 3, 16, 2
    score_net = nn.Sequential(nn.Linear(D, 24), nn.Softplus(), nn.Linear(24, 24), nn.Tanh(),
                              nn.Linear(24, D))
    fill_(torch, score_net, rng, 0.4)
    opt = torch.optim.Adam(score_net.parameters(), lr=1e-3)
    samples = normal(torch, rng, B, D) * torch.tensor([1.0, 0.5, 2.0])

    def sliced_score_estimation(score_net, samples, vectors, vr):
        dup_samples = samples.unsqueeze(0).expand(n_particles, *samples.shape)
        dup_samples = dup_samples.contiguous().view(-1, *samples.shape[1:])
        dup_samples.requires_grad_(True)
        vectors = vectors / torch.norm(vectors, dim=-1, keepdim=True)
        grad1 = score_net(dup_samples)
        gradv = torch.sum(grad1 * vectors)
        grad2 = torch.autograd.grad(gradv, dup_samples, create_graph=True)[0]
        if vr:
            loss1 = torch.sum(grad1 * grad1, dim=-1) / 2.0
        else:
            loss1 = torch.sum(grad1 * vectors, dim=-1) ** 2 * 0.5
        loss2 = torch.sum(vectors * grad2, dim=-1)
        loss1 = loss1.view(n_particles, -1).mean(dim=0)
        loss2 = loss2.view(n_particles, -1).mean(dim=0)
        loss = loss1 + loss2
        return loss.mean(), loss1.mean(), loss2.mean()

    res = {}
    for step in range(3):
        vectors = normal(torch, rng, n_particles * B, D)
        loss, l1, l2 = sliced_score_estimation(score_net, samples, vectors, vr=step % 2 == 1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res[f"ssm{step}"] = torch.stack([loss, l1, l2]).detach()
    res["grad_last"] = score_net[-1].weight.grad
    # Hutchinson trace with Rademacher probes vs the exact trace
    x = samples[:4].clone().requires_grad_(True)
    s = score_net(x)
    exact = torch.zeros(4)
    for i in range(D):
        exact = exact + torch.autograd.grad(s[:, i].sum(), x, retain_graph=True,
                                            create_graph=True)[0][:, i]
    probes = torch.from_numpy(rng.integers(0, 2, (8, 4, D)).astype(np.float32) * 2 - 1)
    hutch = torch.stack([(torch.autograd.grad((s * v).sum(), x, retain_graph=True)[0] * v)
                         .sum(-1) for v in probes]).mean(0)
    jac = torch.func.vmap(torch.func.jacrev(score_net))(x.detach())
    res["exact"] = exact.detach()
    res["hutch"] = hutch
    res["jac_trace"] = torch.diagonal(jac, dim1=-2, dim2=-1).sum(-1)
    (exact.sum() + 0.5 * (s ** 2).sum()).backward()
    res["x_grad"] = x.grad
    # denoising score matching
    sigma = 0.1
    noise = normal(torch, rng, B, D)
    perturbed = samples + sigma * noise
    target = -(perturbed - samples) / sigma ** 2
    dsm = 0.5 * ((score_net(perturbed) - target) ** 2).sum(dim=-1).mean(dim=0) * sigma ** 2
    res["dsm"] = dsm.detach()
    return res


PROGRAMS = [dragonnet_program, cevae_program, jem_program, nce_program, score_matching_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 lstsq and bootstrap quantiles after six SGD steps
        "dragonnet_program": (1e-4, 1e-5),
        # four Adam steps at lr 1e-2 through softplus scales
        "cevae_program": (1e-4, 1e-5),
        # SGLD at step size 1 amplifies float32 gradient noise over 5 steps x 3 iterations
        "jem_program": (1e-4, 1e-5),
        # second-order gradients through softplus / tanh, float32 accumulation order
        "score_matching_program": (1e-4, 1e-5),
    })
