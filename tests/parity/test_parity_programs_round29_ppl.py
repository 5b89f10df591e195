"""Probabilistic programs written as pyro writes them on torch.distributions, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights, data and noise: an
effect-handler stack (trace / condition / replay / block as context managers over a global
stack), sample sites with rsample and log_prob, Trace_ELBO and TraceMeanField (analytic
kl_divergence where registered) with AutoNormal / AutoDelta / AutoLowRankMultivariateNormal
guides (softplus scales, constraints through biject_to / transform_to), enumeration of a
discrete site by enumerate_support and logsumexp (an HMM's states contracted by einsum, with
AutoDelta MAP and a Viterbi decode), plates with subsample scaling, Predictive,
HMC (leapfrog by autograd.grad, Metropolis correction from NumPy uniforms), SVGD (RBF kernel,
median heuristic), NPE with a MADE/MAF conditional flow, NRE with shuffled pairs, importance
sampling with ESS, and distributions' corners (shapes, expand, Independent, cached transforms,
validate_args errors, support checks). _fixes pins what they found."""

import functools
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _comparable(program):
    """Strings, flags and shapes in the lists assert_same_results compares exactly."""
    def norm(v):
        if isinstance(v, (str, bool)):
            return [v]
        if isinstance(v, tuple):
            return [str(v)]
        if isinstance(v, list) and v and isinstance(v[0], tuple):
            return [str(t) for t in v]
        return v

    @functools.wraps(program)
    def run(torch):
        return {k: norm(v) for k, v in program(torch).items()}
    return run


def _ppl(torch):
    """A pyro-lite: a global handler stack, sample/param primitives and handlers."""
    dist = torch.distributions
    stack = []
    params = {}

    class Messenger:
        def __enter__(self):
            stack.append(self)
            return self

        def __exit__(self, *exc):
            stack.remove(self)

        def process(self, msg):
            pass

        def postprocess(self, msg):
            pass

    class trace(Messenger):
        def __enter__(self):
            self.nodes = {}
            return super().__enter__()

        def postprocess(self, msg):
            self.nodes[msg["name"]] = dict(msg)

        def log_prob_sum(self):
            total = 0.0
            for site in self.nodes.values():
                if site["type"] == "sample":
                    total = total + site["scale"] * site["fn"].log_prob(site["value"]).sum()
            return total

    class condition(Messenger):
        def __init__(self, data):
            self.data = data

        def process(self, msg):
            if msg["name"] in self.data:
                msg["value"], msg["is_observed"] = self.data[msg["name"]], True

    class replay(Messenger):
        def __init__(self, tr):
            self.tr = tr

        def process(self, msg):
            if msg["name"] in self.tr.nodes and msg["type"] == "sample":
                msg["value"] = self.tr.nodes[msg["name"]]["value"]

    class block(Messenger):
        def __init__(self, hide):
            self.hide = hide

        def process(self, msg):
            if msg["name"] in self.hide:
                msg["stop"] = True

    class scale(Messenger):
        def __init__(self, factor):
            self.factor = factor

        def process(self, msg):
            msg["scale"] = msg["scale"] * self.factor

    class noise(Messenger):
        """Reparameterised draws from NumPy noise (pyro's rsample with a fixed eps)."""

        def __init__(self, eps):
            self.eps = eps

        def process(self, msg):
            if msg["value"] is None and msg["name"] in self.eps:
                fn, e = msg["fn"], self.eps[msg["name"]]
                base = fn.base_dist if isinstance(fn, dist.Independent) else fn
                msg["value"] = base.loc + base.scale * e

    def apply(msg):
        for m in reversed(stack):
            m.process(msg)
            if msg.get("stop"):
                break
        if msg["value"] is None:
            msg["value"] = msg["fn"].rsample()
        for m in stack:
            m.postprocess(msg)
        return msg["value"]

    def sample(name, fn, obs=None):
        msg = {"type": "sample", "name": name, "fn": fn, "value": obs, "scale": 1.0,
               "is_observed": obs is not None}
        if not stack:
            return obs if obs is not None else fn.rsample()
        return apply(msg)

    def param(name, init, constraint=dist.constraints.real, transform=None):
        """pyro.param: an unconstrained leaf, mapped by transform_to (or a given transform)."""
        if name not in params:
            t = transform or dist.transform_to(constraint)
            with torch.no_grad():
                unc = t.inv(init)
            params[name] = (unc.detach().requires_grad_(), t)
        unc, t = params[name]
        return t(unc)

    return dict(trace=trace, condition=condition, replay=replay, block=block, scale=scale,
                noise=noise, sample=sample, param=param, params=params, dist=dist)


def _err(torch, e):
    """An error message with the library's name taken out (torch.Size / ember.Size)."""
    return str(e).replace(torch.__name__ + ".", "")


@_comparable
def effect_handlers_program(torch):
    rng = np.random.default_rng(0)
    p = _ppl(torch)
    dist, sample = p["dist"], p["sample"]
    data = normal(torch, rng, 12) * 0.7 + 1.5

    def model(x):
        mu = sample("mu", dist.Normal(torch.tensor(0.0), torch.tensor(2.0)))
        sigma = sample("sigma", dist.HalfNormal(torch.tensor(1.0)))
        with p["scale"](3.0):
            sample("obs", dist.Independent(dist.Normal(mu, sigma).expand([x.shape[0]]), 1), obs=x)
        return mu

    res = {}
    cond = {"mu": torch.tensor(1.2), "sigma": torch.tensor(0.8)}
    with p["trace"]() as tr, p["condition"](cond):
        model(data)
    res["names"] = list(tr.nodes)
    res["logp"] = tr.log_prob_sum()
    res["observed"] = [tr.nodes[k]["is_observed"] for k in tr.nodes]
    res["obs_shapes"] = [tuple(tr.nodes["obs"]["fn"].batch_shape),
                         tuple(tr.nodes["obs"]["fn"].event_shape)]
    with p["trace"]() as tr2, p["replay"](tr), p["block"](["sigma"]):
        model(data)
    res["replayed_mu"] = tr2.nodes["mu"]["value"]
    res["blocked_in_trace"] = "sigma" in tr2.nodes
    res["replayed_logp_mu"] = tr2.nodes["mu"]["fn"].log_prob(tr2.nodes["mu"]["value"])
    # support and validate_args corners pyro relies on
    hn = dist.HalfNormal(torch.tensor(1.0))
    res["support_check"] = hn.support.check(torch.tensor([-1.0, 0.0, 2.0]))
    try:
        hn.log_prob(torch.tensor(-1.0))
        res["hn_err"] = "none"
    except ValueError as e:
        res["hn_err"] = str(e)
    try:
        dist.Normal(torch.tensor([0.0]), torch.tensor([-1.0]))
        res["scale_err"] = "none"
    except ValueError as e:
        res["scale_err"] = str(e)
    res["no_validate"] = dist.Normal(torch.tensor(0.0), torch.tensor(-1.0),
                                     validate_args=False).log_prob(torch.tensor(0.5))
    return res


def _auto_normal(torch, p, shapes, constraints):
    """pyro's AutoNormal: per site loc and softplus-parameterised scale, mapped by biject_to."""
    dist = p["dist"]

    def guide(eps):
        out, logq = {}, 0.0
        for k, s in shapes.items():
            loc = p["param"](f"{k}_loc", torch.zeros(s))
            # pyro's softplus_positive constraint: scales through a SoftplusTransform
            sc = p["param"](f"{k}_scale", torch.full(s, 0.1),
                            transform=dist.transforms.SoftplusTransform())
            q = dist.Independent(dist.Normal(loc, sc), len(s))
            unc = loc + sc * eps[k]
            t = dist.biject_to(constraints[k])
            z = t(unc)
            logq = logq + q.log_prob(unc) - t.log_abs_det_jacobian(unc, z).sum()
            out[k] = z
        return out, logq
    return guide


@_comparable
def svi_autonormal_program(torch):
    rng = np.random.default_rng(1)
    p = _ppl(torch)
    dist = p["dist"]
    x = normal(torch, rng, 20, 3)
    w_true = torch.tensor([0.5, -1.0, 2.0])
    y = x @ w_true + 0.3 * normal(torch, rng, 20)
    shapes = {"w": (3,), "sigma": ()}
    cons = {"w": dist.constraints.real, "sigma": dist.constraints.positive}
    guide = _auto_normal(torch, p, {k: torch.Size(v) for k, v in shapes.items()}, cons)
    guide({k: torch.zeros(v) for k, v in shapes.items()})
    opt = torch.optim.Adam([v[0] for v in p["params"].values()], lr=0.05)
    res = {"losses": []}
    for step in range(6):
        eps = {"w": normal(torch, rng, 3), "sigma": normal(torch, rng)}
        z, logq = guide(eps)
        prior = (dist.Independent(dist.Normal(torch.zeros(3), torch.ones(3)), 1).log_prob(z["w"])
                 + dist.LogNormal(0.0, 1.0).log_prob(z["sigma"]))
        # subsampled plate: 8 of 20 points, scaled by 20/8
        idx = torch.from_numpy(rng.permutation(20)[:8])
        lik = dist.Normal(x[idx] @ z["w"], z["sigma"]).log_prob(y[idx]).sum() * (20 / 8)
        loss = -(prior + lik - logq)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.detach())
    res["w_loc"] = p["params"]["w_loc"][0].detach()
    res["sigma_scale"] = p["params"]["sigma_scale"][0].detach()
    res["w_scale_grad"] = p["params"]["w_scale"][0].grad
    sp = dist.transforms.SoftplusTransform()
    res["softplus_inv"] = sp.inv(torch.tensor([0.1, 2.0, 30.0]))
    res["softplus_ladj"] = sp.log_abs_det_jacobian(torch.tensor([-3.0, 0.5]), None)
    res["biject_types"] = [type(dist.biject_to(c)).__name__ for c in
                           (dist.constraints.positive, dist.constraints.unit_interval,
                            dist.constraints.simplex, dist.constraints.interval(-1.0, 2.0),
                            dist.constraints.greater_than(1.0))]
    res["transform_to_types"] = [type(dist.transform_to(c)).__name__ for c in
                                 (dist.constraints.simplex, dist.constraints.corr_cholesky,
                                  dist.constraints.lower_cholesky,
                                  dist.constraints.positive_definite)]
    try:
        dist.biject_to(dist.constraints.lower_cholesky)
        res["biject_err"] = "none"
    except NotImplementedError as e:
        res["biject_err"] = str(e)
    raw = normal(torch, rng, 2, 3)
    for name, c in (("simplex", dist.constraints.simplex),
                    ("corr", dist.constraints.corr_cholesky),
                    ("stick", None)):
        t = dist.transforms.StickBreakingTransform() if c is None else dist.transform_to(c)
        y = t(raw)
        res[f"{name}_y"] = y
        if name != "simplex":  # SoftmaxTransform has no log-det (not a bijection)
            res[f"{name}_ladj"] = t.log_abs_det_jacobian(raw, y)
        res[f"{name}_inv"] = t.inv(y)
        res[f"{name}_check"] = t.codomain.check(y)
    return res


@_comparable
def mean_field_kl_program(torch):
    rng = np.random.default_rng(2)
    dist = torch.distributions
    kl = dist.kl_divergence
    loc = normal(torch, rng, 4).requires_grad_()
    raw = normal(torch, rng, 4).requires_grad_()
    q = dist.Normal(loc, torch.nn.functional.softplus(raw))
    pz = dist.Normal(torch.zeros(4), torch.ones(4))
    res = {}
    res["kl_normal"] = kl(q, pz)
    res["kl_indep"] = kl(dist.Independent(q, 1), dist.Independent(pz, 1))
    qg = dist.Gamma(torch.tensor([2.0, 3.0]), torch.tensor([1.5, 0.5]))
    res["kl_gamma"] = kl(qg, dist.Gamma(torch.tensor([1.0, 1.0]), torch.tensor([1.0, 2.0])))
    qb = dist.Beta(torch.tensor([2.0]), torch.tensor([5.0]))
    res["kl_beta"] = kl(qb, dist.Beta(torch.tensor([1.0]), torch.tensor([1.0])))
    qc = dist.Categorical(logits=normal(torch, rng, 3, 5))
    res["kl_cat"] = kl(qc, dist.Categorical(probs=torch.full((5,), 0.2)))
    qd = dist.Dirichlet(torch.tensor([1.5, 2.0, 0.7]))
    res["kl_dir"] = kl(qd, dist.Dirichlet(torch.ones(3)))
    try:
        kl(dist.Gamma(2.0, 1.0), dist.Normal(0.0, 1.0))
        res["kl_missing"] = "none"
    except NotImplementedError as e:
        res["kl_missing"] = str(e)
    # TraceMeanField ELBO: analytic KL minus expected log likelihood
    x = normal(torch, rng, 6)
    eps = normal(torch, rng, 4)
    z = q.loc + q.scale * eps
    elbo = dist.Normal(z.sum(), 1.0).log_prob(x).sum() - kl(q, pz).sum()
    (-elbo).backward()
    res["elbo"] = elbo
    res["g_loc"], res["g_raw"] = loc.grad, raw.grad
    # low-rank MVN guide (AutoLowRankMultivariateNormal)
    factor = (normal(torch, rng, 4, 2) * 0.3).requires_grad_()
    diag = torch.nn.functional.softplus(normal(torch, rng, 4)).detach().requires_grad_()
    lr = dist.LowRankMultivariateNormal(loc, factor, diag)
    mvn = dist.MultivariateNormal(torch.zeros(4), torch.eye(4))
    res["kl_lowrank"] = kl(lr, mvn)
    res["lr_entropy"] = lr.entropy()
    res["lr_logp"] = lr.log_prob(normal(torch, rng, 3, 4))
    res["lr_cov"] = lr.covariance_matrix
    res["lr_prec"] = lr.precision_matrix
    g = torch.autograd.grad(res["kl_lowrank"], [factor, diag])
    res["g_factor"], res["g_diag"] = g
    mvn2 = dist.MultivariateNormal(loc.detach(), scale_tril=torch.linalg.cholesky(
        lr.covariance_matrix.detach()))
    res["kl_mvn_mvn"] = kl(mvn2, mvn)
    res["mvn_shapes"] = [tuple(mvn2.expand((2, 3)).batch_shape), tuple(mvn2.event_shape)]
    return res


@_comparable
def enumeration_program(torch):
    rng = np.random.default_rng(3)
    dist = torch.distributions
    K = 3
    x = normal(torch, rng, 15) * 1.5
    locs = normal(torch, rng, K).requires_grad_()
    logits = torch.zeros(K, requires_grad=True)
    mix = dist.Categorical(logits=logits)
    # pyro's parallel enumeration: the discrete site gets a new dim left of the plate's
    support = mix.enumerate_support(expand=False).unsqueeze(-1)
    res = {"support_shape": tuple(support.shape),
           "support_full": tuple(mix.enumerate_support().shape),
           "support": support}
    lp_z = mix.log_prob(support)  # (K, 1)
    lp_x = dist.Normal(locs[support], 1.0).log_prob(x)  # (K, 15)
    marginal = torch.logsumexp(lp_z + lp_x, dim=0)
    loss = -marginal.sum()
    loss.backward()
    res["marg"] = marginal
    res["g_locs"], res["g_logits"] = locs.grad, logits.grad
    b = dist.Bernoulli(probs=torch.tensor([0.2, 0.7]))
    res["bern_support"] = b.enumerate_support()
    res["bern_support_ne"] = tuple(b.enumerate_support(expand=False).shape)
    oh = dist.OneHotCategorical(probs=torch.tensor([0.2, 0.5, 0.3]))
    res["oh_support"] = oh.enumerate_support()
    res["has_enum"] = [d.has_enumerate_support for d in
                       (mix, b, oh, dist.Normal(0.0, 1.0), dist.Binomial(3, 0.5))]
    res["binom_support"] = dist.Binomial(torch.tensor([3.0, 3.0]),
                                         probs=torch.tensor([0.5, 0.2])).enumerate_support()
    # posterior responsibilities (infer_discrete's marginal mode)
    post = torch.softmax((lp_z + lp_x).detach(), dim=0)
    res["post"] = post
    # mixture-same-family equivalent
    msf = dist.MixtureSameFamily(dist.Categorical(logits=logits.detach()),
                                 dist.Normal(locs.detach(), torch.ones(K)))
    res["msf_logp"] = msf.log_prob(x)
    res["msf_mean"], res["msf_var"] = msf.mean, msf.variance
    res["msf_shapes"] = [tuple(msf.batch_shape), tuple(msf.event_shape)]
    return res


@_comparable
def hmc_program(torch):
    rng = np.random.default_rng(4)
    dist = torch.distributions
    data = normal(torch, rng, 10) + 0.5

    def potential(q):
        prior = dist.Normal(torch.zeros(2), torch.full((2,), 3.0)).log_prob(q).sum()
        sigma = torch.exp(q[1])
        lik = dist.Normal(q[0], sigma).log_prob(data).sum()
        return -(prior + lik)

    def grad_u(q):
        q = q.detach().requires_grad_()
        u = potential(q)
        (g,) = torch.autograd.grad(u, q)
        return u.detach(), g

    q = torch.tensor([0.0, 0.0])
    step, L = 0.05, 5
    res = {"accepts": [], "us": []}
    for it in range(6):
        mom = normal(torch, rng, 2)
        u0, g = grad_u(q)
        k0 = 0.5 * (mom * mom).sum()
        qn, pn = q.clone(), mom.clone()
        pn = pn - 0.5 * step * g
        for i in range(L):
            qn = qn + step * pn
            u, g = grad_u(qn)
            if i < L - 1:
                pn = pn - step * g
        pn = pn - 0.5 * step * g
        k1 = 0.5 * (pn * pn).sum()
        delta = (u0 + k0 - u - k1).item()
        accept = np.log(rng.uniform()) < min(0.0, delta)
        res["accepts"].append(bool(accept))
        if accept:
            q = qn
        res["us"].append(u)
    res["q"] = q
    # potential energy from transformed-distribution log_prob with a cached transform
    t = dist.transforms.ExpTransform(cache_size=1)
    ln = dist.TransformedDistribution(dist.Normal(torch.tensor(0.0), torch.tensor(1.0)), [t])
    y = t(torch.tensor(0.3))
    res["ln_logp"] = ln.log_prob(y)
    res["ln_logp_lognormal"] = dist.LogNormal(0.0, 1.0).log_prob(y)
    res["cached_inv"] = t.inv(y)
    res["inv_is_inv"] = t.inv.inv is t
    return res


@_comparable
def svgd_program(torch):
    rng = np.random.default_rng(5)
    dist = torch.distributions
    target = dist.MixtureSameFamily(
        dist.Categorical(probs=torch.tensor([0.3, 0.7])),
        dist.Independent(dist.Normal(torch.tensor([[-2.0, 0.0], [2.0, 1.0]]),
                                     torch.tensor([[1.0, 0.5], [0.7, 1.0]])), 1))
    x = normal(torch, rng, 12, 2).requires_grad_()
    opt = torch.optim.Adagrad([x], lr=0.2)
    res = {"h": []}
    for step in range(5):
        logp = target.log_prob(x)
        score = torch.autograd.grad(logp.sum(), x)[0]
        xd = x.detach()
        d2 = torch.cdist(xd, xd) ** 2
        h = torch.median(d2) / math.log(xd.shape[0] + 1)
        kxy = torch.exp(-d2 / h)
        dk = -(kxy.sum(1, keepdim=True) * xd - kxy @ xd) * 2 / h
        phi = (kxy @ score + dk) / xd.shape[0]
        opt.zero_grad()
        x.grad = -phi
        opt.step()
        res["h"].append(h)
    res["x"] = x.detach()
    res["target_logp"] = target.log_prob(x.detach())
    res["mix_shapes"] = [tuple(target.batch_shape), tuple(target.event_shape)]
    return res


def _made(torch, D, C, H):
    nn = torch.nn

    class MaskedLinear(nn.Linear):
        def __init__(self, i, o, mask):
            super().__init__(i, o)
            self.register_buffer("mask", mask)

        def forward(self, x):
            return nn.functional.linear(x, self.mask * self.weight, self.bias)

    deg_in = torch.arange(1, D + 1)
    deg_h = torch.arange(H) % (D - 1) + 1
    m1 = (deg_h[:, None] >= deg_in[None, :]).float()
    m2 = (deg_in[:, None] > deg_h[None, :]).float()

    class MADE(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = MaskedLinear(D, H, m1)
            self.ctx = nn.Linear(C, H)
            self.out = MaskedLinear(H, 2 * D, m2.repeat(2, 1))

        def forward(self, x, c):
            h = torch.relu(self.l1(x) + self.ctx(c))
            mu, alpha = self.out(h).chunk(2, dim=-1)
            return mu, torch.tanh(alpha)
    return MADE()


@_comparable
def npe_maf_program(torch):
    rng = np.random.default_rng(6)
    dist = torch.distributions
    D, C = 3, 4
    made = _made(torch, D, C, 8)
    fill_(torch, made, rng, 0.3)
    theta = normal(torch, rng, 16, D)
    xobs = theta @ normal(torch, rng, D, C) + 0.1 * normal(torch, rng, 16, C)
    base = dist.Independent(dist.Normal(torch.zeros(D), torch.ones(D)), 1)
    opt = torch.optim.AdamW(made.parameters(), lr=1e-2, weight_decay=1e-3)
    res = {"losses": []}
    for step in range(4):
        mu, alpha = made(theta, xobs)
        u = (theta - mu) * torch.exp(-alpha)
        logp = base.log_prob(u) - alpha.sum(-1)
        loss = -logp.mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(made.parameters(), 5.0)
        opt.step()
        res["losses"].append(loss.detach())
    res["mask_grad_zero"] = bool((made.l1.weight.grad * (1 - made.l1.mask)).abs().sum() == 0)
    # sampling by inverting the autoregressive map with NumPy base noise
    with torch.no_grad():
        c = xobs[:2]
        z = normal(torch, rng, 2, D)
        x = torch.zeros(2, D)
        for i in range(D):
            mu, alpha = made(x, c)
            x[:, i] = mu[:, i] + z[:, i] * torch.exp(alpha[:, i])
    res["samples"] = x
    # an affine flow as a TransformedDistribution over Independent base
    aff = dist.transforms.AffineTransform(torch.tensor([1.0, -1.0, 0.5]),
                                          torch.tensor([2.0, 0.5, 1.5]), event_dim=1)
    td = dist.TransformedDistribution(base, [aff, dist.transforms.SigmoidTransform()])
    y = td.transforms[1](aff(normal(torch, rng, 5, D)))
    res["td_logp"] = td.log_prob(y)
    res["td_shapes"] = [tuple(td.batch_shape), tuple(td.event_shape)]
    res["td_support"] = type(td.support).__name__
    return res


@_comparable
def nre_program(torch):
    rng = np.random.default_rng(7)
    nn = torch.nn
    clf = nn.Sequential(nn.Linear(4, 16), nn.ELU(), nn.Linear(16, 1))
    fill_(torch, clf, rng, 0.4)
    theta = normal(torch, rng, 24, 2)
    x = theta * 2.0 + 0.3 * normal(torch, rng, 24, 2)
    opt = torch.optim.SGD(clf.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    res = {"losses": []}
    bce = nn.BCEWithLogitsLoss()
    for step in range(4):
        perm = torch.from_numpy(rng.permutation(24))
        joint = torch.cat([theta, x], 1)
        marg = torch.cat([theta[perm], x], 1)
        logits = clf(torch.cat([joint, marg])).squeeze(-1)
        labels = torch.cat([torch.ones(24), torch.zeros(24)])
        loss = bce(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.detach())
    # log-ratio as an unnormalised posterior on a grid + importance sampling with ESS
    with torch.no_grad():
        grid = torch.stack(torch.meshgrid(torch.linspace(-2, 2, 5), torch.linspace(-2, 2, 5),
                                          indexing="ij"), -1).reshape(-1, 2)
        xo = x[:1].expand(grid.shape[0], 2)
        logr = clf(torch.cat([grid, xo], 1)).squeeze(-1)
        prior = torch.distributions.Normal(0.0, 1.0).log_prob(grid).sum(-1)
        logw = logr + prior
        w = torch.softmax(logw, 0)
        res["ess"] = 1.0 / (w ** 2).sum()
        res["ess_log"] = torch.exp(2 * torch.logsumexp(logw, 0) - torch.logsumexp(2 * logw, 0))
        res["post_mean"] = (w[:, None] * grid).sum(0)
        res["log_evidence"] = torch.logsumexp(logw, 0) - math.log(grid.shape[0])
    return res


@_comparable
def importance_predictive_program(torch):
    rng = np.random.default_rng(8)
    dist = torch.distributions
    y = normal(torch, rng, 8) + 1.0
    prop = dist.StudentT(torch.tensor(4.0), torch.tensor(0.5), torch.tensor(1.5))
    z = prop.loc + prop.scale * normal(torch, rng, 200) / torch.sqrt(
        torch.from_numpy(rng.chisquare(4.0, 200).astype(np.float32)) / 4)
    logw = (dist.Normal(0.0, 1.0).log_prob(z)
            + dist.Normal(z[:, None], 1.0).log_prob(y).sum(-1) - prop.log_prob(z))
    lw = logw - torch.logsumexp(logw, 0)
    res = {"ess": 1.0 / torch.exp(torch.logsumexp(2 * lw, 0)),
           "post_mean": (lw.exp() * z).sum(),
           "prop_stats": [prop.mean, prop.variance, prop.entropy()]}
    # Predictive: posterior-predictive with batch shapes from expand
    zs = z[:5]
    pred = dist.Normal(zs[:, None], 1.0).expand((5, 8))
    res["pred_shape"] = [tuple(pred.batch_shape), tuple(pred.event_shape)]
    res["pred_logp"] = pred.log_prob(y)
    ind = dist.Independent(pred, 1)
    res["ind_shape"] = [tuple(ind.batch_shape), tuple(ind.event_shape)]
    res["ind_logp"] = ind.log_prob(y)
    res["ind_expand"] = [tuple(ind.expand((3, 5)).batch_shape)]
    torch.manual_seed(0)
    s = ind.sample((2,))
    res["sample_shape"] = tuple(s.shape)
    res["rsample_grad"] = dist.Normal(zs.requires_grad_(), 1.0).rsample().requires_grad
    res["has_rsample"] = [dist.Normal(0.0, 1.0).has_rsample, dist.Poisson(1.0).has_rsample,
                          dist.Gamma(1.0, 1.0).has_rsample, ind.has_rsample]
    try:
        dist.Poisson(torch.tensor(1.0)).rsample()
        res["poisson_rsample"] = "none"
    except NotImplementedError as e:
        res["poisson_rsample"] = str(e)
    try:
        ind.log_prob(torch.zeros(3))
        res["shape_err"] = "none"
    except ValueError as e:
        res["shape_err"] = _err(torch, e)
    try:
        dist.Independent(pred, 3)
        res["reinterp_err"] = "none"
    except ValueError as e:
        res["reinterp_err"] = str(e)
    try:
        dist.Categorical(probs=torch.tensor([0.2, 0.8])).log_prob(torch.tensor(2))
        res["cat_err"] = "none"
    except ValueError as e:
        res["cat_err"] = _err(torch, e)
    res["repr"] = [_err(torch, repr(d)) for d in (dist.Normal(torch.tensor(0.0), 1.0), ind)]
    return res


@_comparable
def hmm_enum_map_program(torch):
    rng = np.random.default_rng(9)
    dist, nn = torch.distributions, torch.nn
    S, T, N = 3, 6, 4
    obs = torch.from_numpy(rng.integers(0, 5, size=(N, T)))
    mask = torch.ones(N, T, dtype=torch.bool)
    mask[1, 4:] = False
    # AutoDelta-style MAP parameters, constrained through transform_to
    raw_trans = nn.Parameter(normal(torch, rng, S, S) * 0.3)
    raw_emit = nn.Parameter(normal(torch, rng, S, 5) * 0.3)
    raw_init = nn.Parameter(normal(torch, rng, S) * 0.3)
    to_simplex = dist.transform_to(dist.constraints.simplex)
    opt = torch.optim.Adam([raw_trans, raw_emit, raw_init], lr=0.1)
    res = {"losses": []}
    for step in range(4):
        trans, emit, init = to_simplex(raw_trans), to_simplex(raw_emit), to_simplex(raw_init)
        prior = (dist.Dirichlet(torch.full((S, S), 1.5)).log_prob(trans).sum()
                 + dist.Dirichlet(torch.full((S, 5), 1.2)).log_prob(emit).sum())
        # enumerated x_t: a forward pass contracting the enum dim by einsum in log space
        lp_emit = dist.Categorical(probs=emit).log_prob(obs.unsqueeze(-1))  # (N, T, S)
        lp_emit = lp_emit.masked_fill(~mask.unsqueeze(-1), 0.0)
        alpha = init.log() + lp_emit[:, 0]
        for t in range(1, T):
            m = alpha.amax(-1, keepdim=True)
            step_p = torch.einsum("ni,ij->nj", (alpha - m).exp(), trans)
            new = step_p.log() + m + lp_emit[:, t]
            alpha = torch.where(mask[:, t:t + 1], new, alpha)
        marginal = torch.logsumexp(alpha, -1)
        loss = -(marginal.sum() + prior)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.detach())
    res["trans"] = to_simplex(raw_trans).detach()
    res["g_emit"] = raw_emit.grad
    # Viterbi-style MAP of the enumerated sites (infer_discrete temperature 0)
    with torch.no_grad():
        trans, emit, init = to_simplex(raw_trans), to_simplex(raw_emit), to_simplex(raw_init)
        lp_emit = dist.Categorical(probs=emit).log_prob(obs.unsqueeze(-1))
        score, back = init.log() + lp_emit[:, 0], []
        for t in range(1, T):
            cand = score.unsqueeze(-1) + trans.log()
            score, arg = cand.max(-2)
            score = score + lp_emit[:, t]
            back.append(arg)
        path = [score.argmax(-1)]
        for arg in reversed(back):
            path.append(arg.gather(-1, path[-1].unsqueeze(-1)).squeeze(-1))
        res["viterbi"] = torch.stack(path[::-1], -1)
    # Predictive: draws under manual_seed repeat, shapes follow sample_shape + batch_shape
    post = dist.Dirichlet(to_simplex(raw_trans).detach() * 50)
    torch.manual_seed(5)
    a = post.sample((7,))
    torch.manual_seed(5)
    b = post.sample((7,))
    res["repeat"] = bool(torch.equal(a, b))
    res["pred_shape"] = tuple(a.shape)
    res["on_simplex"] = bool(dist.constraints.simplex.check(a).all())
    c = dist.Categorical(probs=a @ emit).sample()
    res["cat_range"] = [int(c.min()) >= 0, int(c.max()) < 5, str(c.dtype)[-5:]]
    return res


PROGRAMS = [effect_handlers_program, svi_autonormal_program, mean_field_kl_program,
            enumeration_program, hmc_program, svgd_program, npe_maf_program, nre_program,
            importance_predictive_program, hmm_enum_map_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 accumulation order over a few optimizer / leapfrog steps
        "svi_autonormal_program": (1e-4, 1e-5),
        "hmc_program": (1e-4, 1e-5),
        "svgd_program": (1e-4, 1e-5),
        "npe_maf_program": (1e-4, 1e-5),
        "nre_program": (1e-4, 1e-5),
        "importance_predictive_program": (1e-4, 1e-5),
        "hmm_enum_map_program": (1e-4, 1e-5),
    })
