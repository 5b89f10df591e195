"""Gaussian processes and Bayesian deep learning written as GPyTorch, the Bayes-by-Backprop
tutorials, SWAG and laplace-torch write them in torch, run once with `torch` bound to ember and
once to PyTorch from the same NumPy weights and data: exact GP regression (softplus-constrained
RBF and Matern-5/2 kernels, cholesky, cholesky_solve, solve_triangular, the log marginal
likelihood trained with Adam, predictive mean and variance under no_grad), a sparse variational
GP (whitened inducing points, KL of MultivariateNormals with torch.distributions), Bayes by
Backprop (reparameterised weights, scale-mixture prior, NumPy-given noise), SWAG (running first
and second moments of the flattened parameters, low-rank deviations, sampling), a last-layer
Laplace approximation (autograd.functional.hessian of the loss in the last layer's weights,
GLM predictive) and a deep ensemble scored by Gaussian NLL."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _softplus_inv(torch, y):
    """GPyTorch's inverse of the softplus constraint: ``y + log(-expm1(-y))``."""
    return y + torch.log(-torch.expm1(-y))


def _rbf(torch, x1, x2, lengthscale):
    """GPyTorch's RBFKernel: scaled squared distances by the x1^2 - 2 x1 x2 + x2^2 trick,
    clamped at zero, then exp(-d/2)."""
    a, b = x1.div(lengthscale), x2.div(lengthscale)
    a_n = a.pow(2).sum(dim=-1, keepdim=True)
    b_n = b.pow(2).sum(dim=-1, keepdim=True)
    res = torch.addmm(b_n.transpose(-2, -1), a, b.transpose(-2, -1), alpha=-2).add_(a_n)
    res = res.clamp_min_(1e-30)
    return res.div_(-2).exp_()


def _matern52(torch, x1, x2, lengthscale):
    """GPyTorch's MaternKernel(nu=2.5): mean-centred inputs, cdist distances."""
    mean = x1.reshape(-1, x1.size(-1)).mean(0)[(None,) * (x1.dim() - 1)]
    a, b = (x1 - mean).div(lengthscale), (x2 - mean).div(lengthscale)
    distance = torch.cdist(a, b, p=2)
    exp_component = torch.exp(-math.sqrt(5) * distance)
    constant = (math.sqrt(5) * distance).add(1).add(5.0 / 3.0 * distance ** 2)
    return constant * exp_component


def exact_gp_program(torch):
    """An ExactGP regression as the GPyTorch tutorial trains it, by hand: raw hyperparameters
    behind softplus, a ScaleKernel(RBF) plus a Matern-5/2 on the same inputs, the marginal log
    likelihood through cholesky (jitter retried as psd_safe_cholesky does), cholesky_solve and
    the log-determinant from the diagonal, Adam, then predictive mean and variance in eval under
    no_grad with solve_triangular."""
    F = torch.nn.functional
    rng = np.random.default_rng(2801)
    n, m = 12, 5
    x = torch.from_numpy(np.sort(rng.uniform(0, 1, (n, 1))).astype(np.float32))
    y = torch.sin(x[:, 0] * (2 * math.pi)) + 0.1 * normal(torch, rng, n)
    xs = torch.linspace(0, 1, m).unsqueeze(-1)

    raw = torch.nn.ParameterDict({
        "lengthscale": torch.nn.Parameter(_softplus_inv(torch, torch.tensor([[0.3]]))),
        "matern_lengthscale": torch.nn.Parameter(torch.zeros(1, 1)),
        "outputscale": torch.nn.Parameter(torch.tensor(0.0)),
        "noise": torch.nn.Parameter(_softplus_inv(torch, torch.tensor([0.1]))),
        "mean": torch.nn.Parameter(torch.zeros(1)),
    })
    opt = torch.optim.Adam(raw.parameters(), lr=0.1)

    def covar(a, b):
        ls = F.softplus(raw["lengthscale"])
        ls2 = F.softplus(raw["matern_lengthscale"])
        return (F.softplus(raw["outputscale"]) * _rbf(torch, a, b, ls)
                + 0.5 * _matern52(torch, a, b, ls2))

    def psd_safe_cholesky(A):
        L, info = torch.linalg.cholesky_ex(A)
        jitter = 1e-6
        while bool(info.any()):
            L, info = torch.linalg.cholesky_ex(A + jitter * torch.eye(A.size(-1)))
            jitter *= 10
        return L

    res = {"losses": []}
    for _ in range(4):
        opt.zero_grad()
        K = covar(x, x) + F.softplus(raw["noise"]) * torch.eye(n)
        L = psd_safe_cholesky(K)
        r = (y - raw["mean"]).unsqueeze(-1)
        alpha = torch.cholesky_solve(r, L)
        logdet = 2 * L.diagonal(dim1=-2, dim2=-1).log().sum()
        mll = -0.5 * (r.mT @ alpha).squeeze() - 0.5 * logdet - 0.5 * n * math.log(2 * math.pi)
        loss = -mll / n
        loss.backward()
        opt.step()
        res["losses"].append(loss.detach())
    res["grads"] = [p.grad for p in raw.values()]
    res["params"] = [F.softplus(p.detach()) for k, p in raw.items() if k != "mean"]
    with torch.no_grad():
        K = covar(x, x) + F.softplus(raw["noise"]) * torch.eye(n)
        L = torch.linalg.cholesky(K)
        Ks = covar(xs, x)
        v = torch.linalg.solve_triangular(L, Ks.mT, upper=False)
        alpha = torch.cholesky_solve((y - raw["mean"]).unsqueeze(-1), L)
        res["pred_mean"] = (Ks @ alpha).squeeze(-1) + raw["mean"]
        kss = torch.diagonal(covar(xs, xs))
        res["pred_var"] = (kss - v.pow(2).sum(-2)).clamp_min(1e-10)
        lower = torch.distributions.Normal(res["pred_mean"], res["pred_var"].sqrt())
        res["lower"] = lower.icdf(torch.tensor(0.025))
        res["logdet"] = [torch.logdet(K), 2 * L.diagonal().log().sum()]
        res["slogdet"] = list(torch.linalg.slogdet(K))
    res["requires"] = [res["pred_mean"].requires_grad, torch.is_grad_enabled()]
    return res


def svgp_program(torch):
    """A whitened sparse variational GP (GPyTorch's VariationalStrategy(whiten=True) with a
    CholeskyVariationalDistribution): lower-triangular variational factor by tril, the KL of
    MultivariateNormal(m, S) from N(0, I), the Gaussian-likelihood expected log-likelihood in
    closed form, ELBO with Adam on the inducing points too."""
    F, D = torch.nn.functional, torch.distributions
    rng = np.random.default_rng(2802)
    n, m = 16, 4
    x = torch.from_numpy(rng.uniform(-1, 1, (n, 2)).astype(np.float32))
    y = x[:, 0] * x[:, 1] + 0.05 * normal(torch, rng, n)

    class SVGP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inducing_points = torch.nn.Parameter(torch.from_numpy(
                rng.uniform(-1, 1, (m, 2)).astype(np.float32)))
            self.variational_mean = torch.nn.Parameter(torch.zeros(m))
            self.chol_variational_covar = torch.nn.Parameter(torch.eye(m))
            self.raw_lengthscale = torch.nn.Parameter(torch.zeros(1, 2))
            self.raw_noise = torch.nn.Parameter(torch.tensor(-1.0))

        def kernel(self, a, b):
            return _rbf(torch, a, b, F.softplus(self.raw_lengthscale))

        def forward(self, xb):
            z = self.inducing_points
            Kzz = self.kernel(z, z) + 1e-4 * torch.eye(m)
            Lz = torch.linalg.cholesky(Kzz)
            Kzx = self.kernel(z, xb)
            interp = torch.linalg.solve_triangular(Lz, Kzx, upper=False)   # whitened
            Ls = self.chol_variational_covar.tril()
            mean = interp.mT @ self.variational_mean
            S = Ls @ Ls.mT
            var = (1.0 - interp.pow(2).sum(0)) + (interp * (S @ interp)).sum(0)
            q = D.MultivariateNormal(self.variational_mean, scale_tril=Ls)
            p = D.MultivariateNormal(torch.zeros(m), torch.eye(m))
            return mean, var, D.kl_divergence(q, p)

    torch.manual_seed(0)
    model = SVGP()
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    res = {"elbo": []}
    for _ in range(3):
        opt.zero_grad()
        mean, var, kl = model(x)
        noise = F.softplus(model.raw_noise)
        ell = (-0.5 * math.log(2 * math.pi) - 0.5 * noise.log()
               - 0.5 * ((y - mean) ** 2 + var) / noise).sum()
        loss = -(ell - kl) / n
        loss.backward()
        opt.step()
        res["elbo"].append(-loss.detach())
        res.setdefault("kl", []).append(kl.detach())
    res["grads"] = [p.grad for p in model.parameters()]
    res["z"] = model.inducing_points.detach().clone()
    with torch.no_grad():
        mean, var, _ = model(x[:4])
        pred = D.Normal(mean, (var + F.softplus(model.raw_noise)).sqrt())
        res["pred"] = [mean, var, pred.log_prob(y[:4]), pred.cdf(y[:4])]
        q = D.MultivariateNormal(model.variational_mean,
                                 scale_tril=model.chol_variational_covar.tril())
        res["q"] = [q.covariance_matrix, q.entropy(), q.log_prob(torch.ones(m))]
        ind = D.Independent(D.Normal(mean, var.sqrt()), 1)
        res["ind"] = [ind.log_prob(y[:4]), torch.tensor(ind.event_shape),
                      torch.tensor(ind.batch_shape)]
    return res


def bayes_by_backprop_program(torch):
    """Bayes by Backprop (Blundell et al.) as the common tutorials write it: a BayesianLinear
    with mu and rho, sigma = log1p(exp(rho)), weights mu + sigma * eps with eps from NumPy, the
    scale-mixture prior's log-probability by logsumexp of two Normals' log_prob, the variational
    posterior's log-probability, and the sample-averaged ELBO per minibatch with Adam."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2803)
    PI, S1, S2 = 0.5, math.exp(-0.0), math.exp(-6.0)

    class Gaussian:
        def __init__(self, mu, rho):
            self.mu, self.rho = mu, rho

        @property
        def sigma(self):
            return torch.log1p(torch.exp(self.rho))

        def sample(self, eps):
            return self.mu + self.sigma * eps

        def log_prob(self, w):
            return (-math.log(math.sqrt(2 * math.pi)) - torch.log(self.sigma)
                    - ((w - self.mu) ** 2) / (2 * self.sigma ** 2)).sum()

    class ScaleMixtureGaussian:
        def __init__(self):
            self.gaussian1 = torch.distributions.Normal(0, S1)
            self.gaussian2 = torch.distributions.Normal(0, S2)

        def log_prob(self, w):
            lp = torch.stack([math.log(PI) + self.gaussian1.log_prob(w),
                              math.log(1 - PI) + self.gaussian2.log_prob(w)])
            return torch.logsumexp(lp, dim=0).sum()

    class BayesianLinear(nn.Module):
        def __init__(self, i, o):
            super().__init__()
            self.weight_mu = nn.Parameter(torch.Tensor(o, i).uniform_(-0.2, 0.2))
            self.weight_rho = nn.Parameter(torch.Tensor(o, i).uniform_(-5, -4))
            self.bias_mu = nn.Parameter(torch.Tensor(o).uniform_(-0.2, 0.2))
            self.bias_rho = nn.Parameter(torch.Tensor(o).uniform_(-5, -4))
            self.weight = Gaussian(self.weight_mu, self.weight_rho)
            self.bias = Gaussian(self.bias_mu, self.bias_rho)
            self.prior = ScaleMixtureGaussian()
            self.log_prior = self.log_variational_posterior = 0

        def forward(self, x, eps_w, eps_b):
            w, b = self.weight.sample(eps_w), self.bias.sample(eps_b)
            self.log_prior = self.prior.log_prob(w) + self.prior.log_prob(b)
            self.log_variational_posterior = self.weight.log_prob(w) + self.bias.log_prob(b)
            return F.linear(x, w, b)

    class BayesianNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = BayesianLinear(4, 8), BayesianLinear(8, 3)

        def forward(self, x, eps):
            x = F.relu(self.l1(x, *eps[:2]))
            return F.log_softmax(self.l2(x, *eps[2:]), dim=1)

        def log_prior(self):
            return self.l1.log_prior + self.l2.log_prior

        def log_variational_posterior(self):
            return self.l1.log_variational_posterior + self.l2.log_variational_posterior

    net = BayesianNetwork()
    with torch.no_grad():
        for name, p in net.named_parameters():
            lo, hi = (-5, -4) if "rho" in name else (-0.2, 0.2)
            p.copy_(torch.from_numpy(rng.uniform(lo, hi, tuple(p.shape)).astype(np.float32)))
    x = normal(torch, rng, 6, 4)
    target = torch.from_numpy(rng.integers(0, 3, 6))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    shapes = [(8, 4), (8,), (3, 8), (3,)]
    res = {"loss": []}
    samples, num_batches = 2, 3
    for _ in range(3):
        net.zero_grad()
        outputs = torch.zeros(samples, 6, 3)
        log_priors, log_posts = torch.zeros(samples), torch.zeros(samples)
        for i in range(samples):
            eps = [normal(torch, rng, *s) for s in shapes]
            outputs[i] = net(x, eps)
            log_priors[i] = net.log_prior()
            log_posts[i] = net.log_variational_posterior()
        nll = F.nll_loss(outputs.mean(0), target, reduction="sum")
        loss = (log_posts.mean() - log_priors.mean()) / num_batches + nll
        loss.backward()
        opt.step()
        res["loss"].append(loss.detach())
    res["params"] = list(net.parameters())
    res["grads"] = [p.grad for p in net.parameters()]
    res["sigma"] = net.l2.weight.sigma.detach()
    res["grad_fn"] = [type(outputs.grad_fn).__name__, type(log_priors.grad_fn).__name__]
    return res


def swag_program(torch):
    """SWAG (Maddox et al.) as its repository keeps it: flatten the parameters with
    parameters_to_vector, running mean and mean of squares updated after each SGD epoch, a
    deviation matrix of the last K snapshots, a sample theta = mean + sqrt(var/2) z1 +
    D z2 / sqrt(2(K-1)) with z from NumPy, written back with vector_to_parameters, BatchNorm
    statistics refreshed by a forward in train mode with momentum None."""
    nn, F = torch.nn, torch.nn.functional
    from_vec = torch.nn.utils.vector_to_parameters
    to_vec = torch.nn.utils.parameters_to_vector
    rng = np.random.default_rng(2804)
    # no bias before BatchNorm: its gradient is rounding noise, and so its SWAG variance
    model = nn.Sequential(nn.Linear(3, 6, bias=False), nn.BatchNorm1d(6), nn.ReLU(),
                          nn.Linear(6, 1))
    fill_(torch, model, rng)
    x, y = normal(torch, rng, 10, 3), normal(torch, rng, 10, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6)
    n_params = sum(p.numel() for p in model.parameters())
    mean, sq_mean = torch.zeros(n_params), torch.zeros(n_params)
    cov_mat_sqrt = torch.empty(0, n_params)
    K, n_models = 3, 0
    res = {"loss": []}
    for epoch in range(5):
        model.train()
        for i in range(0, 10, 5):
            opt.zero_grad()
            loss = F.mse_loss(model(x[i:i + 5]), y[i:i + 5])
            loss.backward()
            opt.step()
        sched.step()
        res["loss"].append(loss.detach())
        if epoch >= 1:
            w = to_vec(model.parameters()).detach()
            mean.mul_(n_models / (n_models + 1.0)).add_(w / (n_models + 1.0))
            sq_mean.mul_(n_models / (n_models + 1.0)).add_(w ** 2 / (n_models + 1.0))
            dev = (w - mean).view(-1, 1)
            cov_mat_sqrt = torch.cat((cov_mat_sqrt, dev.view(-1, 1).t()), dim=0)
            if cov_mat_sqrt.size(0) > K:
                cov_mat_sqrt = cov_mat_sqrt[1:, :]
            n_models += 1
    var = torch.clamp(sq_mean - mean ** 2, 1e-30)
    z1 = torch.from_numpy(rng.standard_normal(n_params).astype(np.float32))
    z2 = torch.from_numpy(rng.standard_normal(cov_mat_sqrt.size(0)).astype(np.float32))
    sample = (mean + var.sqrt() / math.sqrt(2.0) * z1
              + cov_mat_sqrt.t().matmul(z2) / math.sqrt(2 * (K - 1)))
    from_vec(sample, model.parameters())
    bn = model[1]
    bn.reset_running_stats()
    bn.momentum = None
    model.train()
    with torch.no_grad():
        model(x[:5])
        model(x[5:])
    model.eval()
    with torch.no_grad():
        out = model(x)
    res.update(mean=mean, var=var, cov=cov_mat_sqrt, sample=sample, out=out,
               bn=[bn.running_mean, bn.running_var, bn.num_batches_tracked],
               lr=[torch.tensor(g["lr"]) for g in opt.param_groups])
    return res


def laplace_program(torch):
    """A last-layer Laplace approximation as laplace-torch's LLLaplace('full') computes it for
    regression: features from a frozen body under no_grad, the Hessian of the summed MSE in the
    flattened last-layer weights by torch.autograd.functional.hessian, the posterior precision
    plus the prior precision, its inverse by cholesky_inverse, the GLM predictive variance from
    the Jacobians, and the marginal likelihood for prior-precision tuning by gradient descent on
    log(prior precision)."""
    nn = torch.nn
    rng = np.random.default_rng(2805)
    body = nn.Sequential(nn.Linear(2, 5), nn.Tanh())
    head = nn.Linear(5, 2)
    fill_(torch, body, rng, 0.5)
    fill_(torch, head, rng, 0.5)
    x, y = normal(torch, rng, 8, 2), normal(torch, rng, 8, 2)
    with torch.no_grad():
        phi = body(x)
    theta_map = torch.cat([head.weight.flatten(), head.bias]).detach()

    def loss_fn(theta):
        W, b = theta[:10].view(2, 5), theta[10:]
        return 0.5 * ((phi @ W.T + b - y) ** 2).sum()

    H = torch.autograd.functional.hessian(loss_fn, theta_map)
    sigma_noise = 0.5
    log_prior_prec = torch.zeros(1, requires_grad=True)
    opt = torch.optim.Adam([log_prior_prec], lr=0.1)
    loss_map = loss_fn(theta_map)
    res = {"H": H, "marglik": []}
    P = theta_map.numel()
    for _ in range(3):
        opt.zero_grad()
        prior_prec = log_prior_prec.exp()
        post_prec = H / sigma_noise ** 2 + prior_prec * torch.eye(P)
        scatter = (theta_map ** 2).sum() * prior_prec
        log_det_ratio = torch.logdet(post_prec) - P * torch.log(prior_prec)
        log_lik = -loss_map / sigma_noise ** 2 - 8 * 2 * (math.log(sigma_noise)
                                                          + 0.5 * math.log(2 * math.pi))
        marglik = log_lik - 0.5 * (log_det_ratio + scatter)
        (-marglik).backward()
        opt.step()
        res["marglik"].append(marglik.detach().squeeze())
    with torch.no_grad():
        prior_prec = log_prior_prec.exp()
        post_prec = H / sigma_noise ** 2 + prior_prec * torch.eye(P)
        post_cov = torch.cholesky_inverse(torch.linalg.cholesky(post_prec))
        xs = normal(torch, rng, 3, 2)
        phis = body(xs)
        # Jacobian of f(x) = W phi + b in theta: (n, out, P)
        J = torch.cat([torch.einsum("ij,nk->nijk", torch.eye(2), phis).reshape(3, 2, 10),
                       torch.eye(2).expand(3, 2, 2)], dim=-1)
        f_var = torch.einsum("ncp,pq,nkq->nck", J, post_cov, J)
        res["f_mu"] = head(phis)
        res["f_var"] = f_var
        res["pred_std"] = (f_var.diagonal(dim1=-2, dim2=-1) + sigma_noise ** 2).sqrt()
    res["post_cov"] = post_cov
    res["prior_prec"] = prior_prec
    jac = torch.autograd.functional.jacobian(lambda t: phi[:2] @ t[:10].view(2, 5).T + t[10:],
                                             theta_map)
    res["jac"] = jac
    return res


def deep_ensemble_program(torch):
    """Deep ensembles (Lakshminarayanan et al.) for regression: each member outputs a mean and a
    softplus variance plus 1e-6, trained with GaussianNLLLoss and adversarial training with the
    FGSM direction of sign(grad x); the mixture's mean and variance, and its NLL checked against
    F.gaussian_nll_loss with full=True."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2806)
    members = [nn.Sequential(nn.Linear(1, 8), nn.ReLU(), nn.Linear(8, 2)) for _ in range(3)]
    for m in members:
        fill_(torch, m, rng, 0.5)
    x = torch.from_numpy(rng.uniform(-2, 2, (12, 1)).astype(np.float32))
    y = x ** 3 / 4 + 0.1 * normal(torch, rng, 12, 1)
    crit = nn.GaussianNLLLoss()
    res = {"loss": []}
    for m in members:
        opt = torch.optim.Adam(m.parameters(), lr=0.01)
        for _ in range(3):
            opt.zero_grad()
            xa = x.clone().requires_grad_(True)
            out = m(xa)
            mu, var = out[:, :1], F.softplus(out[:, 1:]) + 1e-6
            loss = crit(mu, y, var)
            grad_x, = torch.autograd.grad(loss, xa, retain_graph=True)
            x_adv = (x + 0.01 * 4 * grad_x.sign()).detach()
            out_adv = m(x_adv)
            loss_adv = crit(out_adv[:, :1], y, F.softplus(out_adv[:, 1:]) + 1e-6)
            (loss + loss_adv).backward()
            opt.step()
            res["loss"].append(loss.detach())
    with torch.no_grad():
        outs = torch.stack([m(x) for m in members])
        mus, vars_ = outs[..., :1], F.softplus(outs[..., 1:]) + 1e-6
        mean = mus.mean(0)
        var = (vars_ + mus ** 2).mean(0) - mean ** 2
        res["mean"], res["var"] = mean, var
        res["nll_full"] = F.gaussian_nll_loss(mean, y, var, full=True, reduction="sum")
        res["nll_none"] = F.gaussian_nll_loss(mean.squeeze(-1), y.squeeze(-1), var[:1, 0],
                                              reduction="none")
        mix = torch.distributions.MixtureSameFamily(
            torch.distributions.Categorical(torch.ones(3) / 3),
            torch.distributions.Normal(mus.squeeze(-1).T, vars_.squeeze(-1).T.sqrt()))
        res["mix"] = [mix.log_prob(y.squeeze(-1)), mix.mean, mix.variance]
    try:
        F.gaussian_nll_loss(mean, y, -var)
    except ValueError as e:
        res["error"] = [str(e)]
    return res


def swa_utils_program(torch):
    """SWA and EMA with torch.optim.swa_utils as the PyTorch SWA recipe writes them: an
    AveragedModel updated each epoch after swa_start, SWALR's cosine anneal to swa_lr after a
    CosineAnnealingLR, update_bn over a loader of (x, y) tuples refreshing the averaged model's
    BatchNorm statistics, an EMA AveragedModel from get_ema_multi_avg_fn with use_buffers=True,
    and the averaged models' names, n_averaged and outputs."""
    nn, F = torch.nn, torch.nn.functional
    swa_utils = torch.optim.swa_utils
    rng = np.random.default_rng(2807)
    model = nn.Sequential(nn.Linear(3, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))
    fill_(torch, model, rng)
    x, y = normal(torch, rng, 12, 3), normal(torch, rng, 12, 2)
    loader = [(x[i:i + 4], y[i:i + 4]) for i in range(0, 12, 4)]
    swa_model = swa_utils.AveragedModel(model)
    ema_model = swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.9),
                                        use_buffers=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    swa_scheduler = swa_utils.SWALR(opt, swa_lr=0.02, anneal_epochs=2, anneal_strategy="cos")
    swa_start = 2
    res = {"lr": [], "loss": []}
    for epoch in range(5):
        for xb, yb in loader:
            opt.zero_grad()
            loss = F.mse_loss(model(xb), yb)
            loss.backward()
            opt.step()
            ema_model.update_parameters(model)
        if epoch > swa_start:
            swa_model.update_parameters(model)
            swa_scheduler.step()
        else:
            scheduler.step()
        res["lr"].append(torch.tensor(opt.param_groups[0]["lr"]))
        res["loss"].append(loss.detach())
    swa_utils.update_bn(loader, swa_model)
    swa_model.eval()
    ema_model.eval()
    with torch.no_grad():
        res["swa_out"] = swa_model(x)
        res["ema_out"] = ema_model(x)
    res["swa_params"] = list(swa_model.parameters())
    res["swa_bn"] = [swa_model.module[1].running_mean, swa_model.module[1].running_var,
                     swa_model.module[1].num_batches_tracked]
    res["ema_bn"] = [ema_model.module[1].running_mean, ema_model.module[1].running_var]
    res["n_averaged"] = [swa_model.n_averaged, ema_model.n_averaged]
    res["names"] = [n for n, _ in swa_model.named_buffers()]
    res["momentum"] = [torch.tensor(swa_model.module[1].momentum)]
    return res


def laplace_func_program(torch):
    """laplace-torch's backend way for a small MLP classifier: per-sample Jacobians of the
    logits in all parameters by torch.func.vmap(jacrev(functional_call)), the generalised
    Gauss-Newton with the softmax Hessian diag(p) - p p^T built by einsum, a diagonal and a full
    posterior, the probit-approximated predictive (kappa = 1/sqrt(1 + pi/8 var)) and the
    Hessian of the NLL in the last layer by torch.func.hessian, compared with the GGN."""
    nn, F = torch.nn, torch.nn.functional
    functional_call, hessian = torch.func.functional_call, torch.func.hessian
    jacrev, vmap = torch.func.jacrev, torch.func.vmap
    rng = np.random.default_rng(2808)
    model = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 3))
    fill_(torch, model, rng, 0.6)
    x = normal(torch, rng, 5, 2)
    y = torch.from_numpy(rng.integers(0, 3, 5))
    params = {k: v.detach() for k, v in model.named_parameters()}

    def f(p, xi):
        return functional_call(model, p, (xi.unsqueeze(0),)).squeeze(0)

    jac = vmap(jacrev(f), in_dims=(None, 0))(params, x)
    J = torch.cat([j.flatten(2) for j in jac.values()], dim=2)        # (n, C, P)
    with torch.no_grad():
        probs = torch.softmax(model(x), -1)
    H_lik = torch.diag_embed(probs) - torch.einsum("nc,nk->nck", probs, probs)
    ggn = torch.einsum("ncp,nck,nkq->pq", J, H_lik, J)
    P = ggn.shape[0]
    prior_prec = 0.5
    post_prec = ggn + prior_prec * torch.eye(P)
    post_cov = torch.linalg.inv(post_prec)
    diag_cov = 1.0 / (ggn.diagonal() + prior_prec)
    f_var = torch.einsum("ncp,pq,nkq->nck", J, post_cov, J)
    f_var_diag = torch.einsum("ncp,p,nkp->nck", J, diag_cov, J)
    with torch.no_grad():
        f_mu = model(x)
    kappa = 1 / torch.sqrt(1.0 + math.pi / 8 * f_var.diagonal(dim1=1, dim2=2))
    pred = torch.softmax(kappa * f_mu, dim=-1)

    last = {k: v for k, v in params.items() if k.startswith("2.")}
    rest = {k: v for k, v in params.items() if not k.startswith("2.")}

    def nll(p_last):
        return F.cross_entropy(functional_call(model, {**rest, **p_last}, (x,)), y,
                               reduction="sum")

    H = hessian(nll)(last)
    H_w = H["2.weight"]["2.weight"].reshape(12, 12)
    ggn_last = ggn[-15:, -15:][:12, :12]
    return {"J": J, "ggn": ggn, "post_cov": post_cov, "diag_cov": diag_cov, "f_var": f_var,
            "f_var_diag": f_var_diag, "pred": pred, "H_w": H_w, "ggn_last": ggn_last,
            "H_b": H["2.bias"]["2.bias"], "H_wb": H["2.weight"]["2.bias"],
            "logdet": torch.linalg.slogdet(post_prec).logabsdet,
            "keys": sorted(jac.keys())}


PROGRAMS = [exact_gp_program, svgp_program, bayes_by_backprop_program, swag_program,
            laplace_program, deep_ensemble_program, swa_utils_program, laplace_func_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # the prior's narrow component (sigma e^-6) scales float32 exp rounding by 1/sigma^2
        "bayes_by_backprop_program": (1e-4, 1e-5),
    })
