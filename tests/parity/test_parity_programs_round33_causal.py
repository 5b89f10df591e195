"""Causal discovery, Bayesian optimisation by hand and empirical NTKs written as the reference
repositories write them in torch, run once with `torch` bound to ember and once to PyTorch from
the same NumPy weights: NOTEARS (augmented Lagrangian on h(W) = tr(matrix_exp(W*W)) - d, L1 through
W = W_pos - W_neg with clamped bounds, inner loops by torch.optim.LBFGS), GOLEM (slogdet
likelihood), a DAG-GNN-lite encoder/decoder, an exact GP (Matern-5/2 and RBF via cdist,
cholesky_ex jitter retries, cholesky_solve, log marginal likelihood fitted by Adam), analytic EI
and log EI (special.ndtr / log_ndtr), MC qEI/qNEI/qUCB with fixed base samples optimised by Adam
over raw candidates clamped to the bounds, and the empirical NTK (func.jacrev / vmap /
functional_call, jvp/vjp NTK-vector products, func.linearize Taylor models trained a few steps).
_fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests, warnings_of

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _sem_data(rng, n, d):
    """Linear SEM samples on a chain-with-fork DAG, as NOTEARS' utils.simulate_linear_sem."""
    W = np.zeros((d, d), np.float32)
    for i in range(d - 1):
        W[i, i + 1] = rng.uniform(0.5, 2.0) * rng.choice([-1, 1])
    W[0, d - 1] = 1.3
    X = np.zeros((n, d), np.float32)
    for j in range(d):
        X[:, j] = X @ W[:, j] + rng.standard_normal(n).astype(np.float32)
    return X


def notears_program(torch):
    # notears/linear.py: W = W_pos - W_neg, bounds (0, None) by clamp, LBFGS inner solve
    rng = np.random.default_rng(330)
    d, n = 4, 40
    X = torch.from_numpy(_sem_data(rng, n, d))
    X = X - X.mean(dim=0, keepdim=True)
    w_pos = torch.nn.Parameter(torch.from_numpy(rng.uniform(0, 0.1, (d, d)).astype(np.float32)))
    w_neg = torch.nn.Parameter(torch.from_numpy(rng.uniform(0, 0.1, (d, d)).astype(np.float32)))
    mask = 1.0 - torch.eye(d)
    lambda1, rho, alpha, h_val = 0.05, 1.0, 0.0, math.inf
    res = {}

    def adj():
        return (w_pos - w_neg) * mask

    def h_func(W):
        E = torch.matrix_exp(W * W)
        return torch.trace(E) - d

    for outer in range(3):
        opt = torch.optim.LBFGS([w_pos, w_neg], lr=0.5, max_iter=8, history_size=5,
                                line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            W = adj()
            R = X - X @ W
            loss = 0.5 / n * (R ** 2).sum()
            h = h_func(W)
            obj = loss + 0.5 * rho * h * h + alpha * h + lambda1 * (w_pos + w_neg).sum()
            obj.backward()
            return obj

        obj = opt.step(closure)
        with torch.no_grad():
            w_pos.clamp_(min=0)
            w_neg.clamp_(min=0)
            h_new = h_func(adj()).item()
        res[f"obj{outer}"] = obj
        res[f"h{outer}"] = h_new
        if h_new > 0.25 * h_val:
            rho *= 10
        h_val = h_new
        alpha += rho * h_val
    W_est = adj().detach()
    res["W"] = W_est
    res["edges"] = (W_est.abs() > 0.3).nonzero()
    res["state_keys"] = sorted(opt.state_dict()["state"][0].keys())
    res["func_evals"] = opt.state_dict()["state"][0]["func_evals"]
    return res


def golem_program(torch):
    # GOLEM (Ng et al.): non-equal-variance likelihood with slogdet(I - B) and an h penalty
    rng = np.random.default_rng(331)
    d, n = 4, 30
    X = torch.from_numpy(_sem_data(rng, n, d))
    B = torch.nn.Parameter(torch.from_numpy(rng.standard_normal((d, d)).astype(np.float32) * 0.1))
    opt = torch.optim.Adam([B], lr=1e-2)
    res = {}
    for step in range(4):
        opt.zero_grad()
        Bm = B * (1 - torch.eye(d))
        resid = X - X @ Bm
        lik = 0.5 * torch.sum(torch.log(torch.sum(torch.square(resid), dim=0)))
        sign, logabsdet = torch.linalg.slogdet(torch.eye(d) - Bm)
        lik = lik - logabsdet
        l1 = torch.norm(Bm, p=1)
        h = torch.trace(torch.matrix_exp(Bm * Bm)) - d
        score = lik + 2e-2 * l1 + 5.0 * h
        score.backward()
        res[f"score{step}"] = score
        res[f"sign{step}"] = sign
        opt.step()
    res["B"] = B.detach()
    res["grad"] = B.grad
    _, lad2 = torch.slogdet(torch.eye(d) - B.detach())
    res["slogdet_alias"] = lad2
    return res


def dag_gnn_program(torch):
    # DAG-GNN-lite: encoder/decoder through (I - A^T), h(A) = tr[(I + A*A/d)^d] - d
    nn = torch.nn
    rng = np.random.default_rng(332)
    d, n, hid = 4, 16, 8
    X = torch.from_numpy(_sem_data(rng, n, d)).unsqueeze(-1)

    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            self.adj_A = nn.Parameter(torch.zeros(d, d))
            self.fc1 = nn.Linear(1, hid)
            self.fc2 = nn.Linear(hid, 1)

        def forward(self, x):
            adj = torch.sinh(3.0 * self.adj_A)
            adj_norm = torch.eye(d) - adj.transpose(0, 1)
            h = self.fc2(torch.relu(self.fc1(x)))
            return torch.matmul(adj_norm, h), adj

    class Dec(nn.Module):
        def __init__(self):
            super().__init__()
            self.out = nn.Sequential(nn.Linear(1, hid), nn.ReLU(), nn.Linear(hid, 1))

        def forward(self, z, adj):
            inv = torch.inverse(torch.eye(d) - adj.transpose(0, 1))
            return self.out(torch.matmul(inv, z))

    enc, dec = Enc(), Dec()
    fill_(torch, enc, rng, 0.2)
    fill_(torch, dec, rng, 0.2)
    opt = torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()), lr=3e-3)
    res = {}
    for step in range(3):
        opt.zero_grad()
        z, adj = enc(X)
        x_hat = dec(z, adj)
        nll = torch.sum((x_hat - X) ** 2) / (2 * n)
        kl = 0.5 * torch.sum(z ** 2) / n
        M = torch.eye(d) + torch.div(adj * adj, d)
        h = torch.trace(torch.matrix_power(M, d)) - d
        loss = nll + kl + 0.5 * h * h + 1.0 * h + 0.01 * adj.abs().sum()
        loss.backward()
        nn.utils.clip_grad_norm_(enc.parameters(), 1.0)
        opt.step()
        res[f"loss{step}"] = loss
        res[f"h{step}"] = h
    res["adj_grad"] = enc.adj_A.grad
    res["adj"] = enc.adj_A.detach()
    return res


def _matern52(torch, x1, x2, ls, os_):
    dist = torch.cdist(x1 / ls, x2 / ls)
    s5 = math.sqrt(5) * dist
    return os_ * (1 + s5 + 5.0 / 3.0 * dist ** 2) * torch.exp(-s5)


def _rbf(torch, x1, x2, ls, os_):
    return os_ * torch.exp(-0.5 * torch.cdist(x1 / ls, x2 / ls).pow(2))


def _chol_jitter(torch, K, res, key):
    """gpytorch psd_safe_cholesky: cholesky_ex, add growing jitter while info != 0."""
    L, info = torch.linalg.cholesky_ex(K)
    tries = 0
    jitter = 1e-6
    while info.any() and tries < 4:
        Kj = K + jitter * torch.eye(K.shape[-1], dtype=K.dtype)
        L, info = torch.linalg.cholesky_ex(Kj)
        jitter *= 10
        tries += 1
    res[key] = (int(info), tries)
    return L


def gp_fit_program(torch):
    # exact GP: raw hyperparameters through softplus, LML via cholesky_solve, fit by Adam
    rng = np.random.default_rng(333)
    n, dim = 10, 2
    train_x = torch.from_numpy(rng.uniform(0, 1, (n, dim)).astype(np.float32))
    train_y = torch.sin(6 * train_x[:, 0]) + torch.cos(4 * train_x[:, 1])
    raw_ls = torch.nn.Parameter(torch.zeros(dim))
    raw_os = torch.nn.Parameter(torch.tensor(0.0))
    raw_noise = torch.nn.Parameter(torch.tensor(-3.0))
    opt = torch.optim.Adam([raw_ls, raw_os, raw_noise], lr=0.1)
    sp = torch.nn.functional.softplus
    res = {}
    for step in range(5):
        opt.zero_grad()
        ls, os_, noise = sp(raw_ls) + 1e-3, sp(raw_os), sp(raw_noise) + 1e-4
        K = _matern52(torch, train_x, train_x, ls, os_) + noise * torch.eye(n)
        L = _chol_jitter(torch, K, res, f"chol{step}")
        y = (train_y - train_y.mean()).unsqueeze(-1)
        alpha = torch.cholesky_solve(y, L)
        lml = (-0.5 * (y * alpha).sum() - torch.log(torch.diagonal(L)).sum()
               - 0.5 * n * math.log(2 * math.pi))
        (-lml / n).backward()
        opt.step()
        res[f"lml{step}"] = lml
    res["hypers"] = [raw_ls.detach(), raw_os.detach(), raw_noise.detach()]
    # posterior at test points, RBF kernel for comparison
    test_x = torch.from_numpy(rng.uniform(0, 1, (5, dim)).astype(np.float32))
    with torch.no_grad():
        ls, os_, noise = sp(raw_ls) + 1e-3, sp(raw_os), sp(raw_noise) + 1e-4
        for name, kern in (("matern", _matern52), ("rbf", _rbf)):
            K = kern(torch, train_x, train_x, ls, os_) + noise * torch.eye(n)
            L = torch.linalg.cholesky(K)
            Ks = kern(torch, test_x, train_x, ls, os_)
            mean = Ks @ torch.cholesky_solve(train_y.unsqueeze(-1), L)
            v = torch.linalg.solve_triangular(L, Ks.T, upper=False)
            var = os_ - (v * v).sum(0)
            res[name] = [mean.squeeze(-1), var.clamp_min(1e-9)]
    # a singular kernel matrix: info > 0 and the jitter loop runs
    Z = torch.ones(3, 3)
    _chol_jitter(torch, Z, res, "singular")
    _, info = torch.linalg.cholesky_ex(Z)
    res["info_dtype"] = [str(info.dtype).split(".")[-1], int(info)]
    return res


def analytic_ei_program(torch):
    # BoTorch ExpectedImprovement / LogExpectedImprovement on a posterior mean and std
    rng = np.random.default_rng(334)
    mean = normal(torch, rng, 7).requires_grad_()
    sigma = torch.from_numpy(rng.uniform(0.05, 1.0, 7).astype(np.float32)).requires_grad_()
    best_f = torch.tensor(0.4)
    u = (mean - best_f) / sigma
    ei = sigma * (torch.exp(-0.5 * u ** 2) / math.sqrt(2 * math.pi) + u * torch.special.ndtr(u))
    log_ei = torch.log(ei.clamp_min(1e-30))
    big_neg = torch.tensor([-40.0, -10.0, -3.0, 0.0, 5.0])
    res = {"ei": ei, "ndtr": torch.special.ndtr(big_neg),
           "log_ndtr": torch.special.log_ndtr(big_neg),
           "erfcx": torch.special.erfcx(torch.tensor([-2.0, 0.0, 3.0, 30.0])),
           "ndtri": torch.special.ndtri(torch.tensor([0.01, 0.5, 0.975]))}
    ei.sum().backward(retain_graph=True)
    res["g_mean"], res["g_sigma"] = mean.grad.clone(), sigma.grad.clone()
    mean.grad = None
    sigma.grad = None
    log_ei.sum().backward()
    res["lg_mean"], res["lg_sigma"] = mean.grad, sigma.grad
    ln = torch.special.log_ndtr(big_neg.clone().requires_grad_())
    ln.sum().backward()
    res["log_ndtr_back"] = ln
    x = big_neg.clone().requires_grad_()
    torch.special.log_ndtr(x).sum().backward()
    res["log_ndtr_grad"] = x.grad
    res["normal_dist"] = torch.distributions.Normal(0.0, 1.0).cdf(torch.tensor([-1.0, 0.5]))
    res["icdf"] = torch.distributions.Normal(0.0, 1.0).icdf(torch.tensor([0.1, 0.9]))
    return res


def mc_acquisition_program(torch):
    # BoTorch qEI / qNEI / qUCB with fixed base samples; optimize_acqf by Adam over raw
    # candidates, clamped into the bounds after every step
    rng = np.random.default_rng(335)
    n, dim, q, mc, restarts = 8, 2, 2, 16, 3
    train_x = torch.from_numpy(rng.uniform(0, 1, (n, dim)).astype(np.float32))
    train_y = (train_x - 0.3).pow(2).sum(-1).neg()
    base = torch.from_numpy(rng.standard_normal((mc, 1, q)).astype(np.float32))
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    ls, os_, noise = torch.tensor([0.3, 0.4]), torch.tensor(1.0), 1e-3
    K = _rbf(torch, train_x, train_x, ls, os_) + noise * torch.eye(n)
    L = torch.linalg.cholesky(K)
    alpha = torch.cholesky_solve(train_y.unsqueeze(-1), L)

    def posterior(X):                            # X: b x q x d
        Ks = _rbf(torch, X, train_x.expand(X.shape[0], n, dim), ls, os_)
        mean = (Ks @ alpha).squeeze(-1)
        v = torch.cholesky_solve(Ks.transpose(-1, -2), L)
        cov = _rbf(torch, X, X, ls, os_) - Ks @ v
        cov = cov + 1e-6 * torch.eye(X.shape[-2])
        return mean, torch.linalg.cholesky(cov)

    def samples(X):                              # mc x b x q
        mean, Lc = posterior(X)
        return mean.unsqueeze(0) + (Lc.unsqueeze(0) @ base.unsqueeze(-1).expand(
            mc, X.shape[0], q, 1)).squeeze(-1)

    best_f = train_y.max()

    def qei(X):
        return (samples(X) - best_f).clamp_min(0).max(dim=-1).values.mean(dim=0)

    def qucb(X, beta=2.0):
        mean, _ = posterior(X)
        s = samples(X)
        return (mean + math.sqrt(beta * math.pi / 2) * (s - mean).abs()).max(dim=-1).values.mean(0)

    def qnei(X):
        Xall = torch.cat([X, train_x.unsqueeze(0).expand(X.shape[0], n, dim)], dim=-2)
        mean, Lc = posterior(Xall)
        z = torch.from_numpy(np.random.default_rng(7).standard_normal(
            (mc, 1, q + n)).astype(np.float32))
        s = mean.unsqueeze(0) + (Lc.unsqueeze(0) @ z.unsqueeze(-1)).squeeze(-1)
        obj = s[..., :q].max(dim=-1).values - s[..., q:].max(dim=-1).values
        return obj.clamp_min(0).mean(0)

    res = {}
    for name, acqf in (("qei", qei), ("qucb", qucb), ("qnei", qnei)):
        raw = torch.from_numpy(rng.uniform(0, 1, (restarts, q, dim)).astype(np.float32))
        X = raw.clone().requires_grad_(True)
        opt = torch.optim.Adam([X], lr=0.05)
        for _ in range(4):
            opt.zero_grad()
            loss = -acqf(X).sum()
            loss.backward()
            opt.step()
            with torch.no_grad():
                X.data = torch.max(torch.min(X, bounds[1]), bounds[0])
        with torch.no_grad():
            vals = acqf(X)
        best = torch.argmax(vals.view(-1))
        res[name] = [vals, X.detach(), best, X[best].detach()]
    return res


def _mlp(torch, rng):
    nn = torch.nn
    net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))
    fill_(torch, net, rng, 0.5)
    return net


def ntk_program(torch):
    # the functorch NTK tutorial: jacobian contraction and NTK-vector products
    fc = torch.func
    functional_call, jacrev, jvp, vjp, vmap = (fc.functional_call, fc.jacrev, fc.jvp, fc.vjp,
                                               fc.vmap)
    rng = np.random.default_rng(336)
    net = _mlp(torch, rng)
    params = {k: v.detach() for k, v in net.named_parameters()}
    x1, x2 = normal(torch, rng, 5, 3), normal(torch, rng, 4, 3)

    def fnet_single(params, x):
        return functional_call(net, params, (x.unsqueeze(0),)).squeeze(0)

    jac1 = vmap(jacrev(fnet_single), (None, 0))(params, x1)
    jac2 = vmap(jacrev(fnet_single), (None, 0))(params, x2)
    jac1_l = [j.flatten(2) for j in jac1.values()]
    jac2_l = [j.flatten(2) for j in jac2.values()]
    full = torch.stack([torch.einsum("Naf,Mbf->NMab", j1, j2)
                        for j1, j2 in zip(jac1_l, jac2_l)]).sum(0)
    trace = torch.stack([torch.einsum("Naf,Maf->NM", j1, j2)
                         for j1, j2 in zip(jac1_l, jac2_l)]).sum(0)
    diag = torch.stack([torch.einsum("Naf,Mbf->NMa", j1, j2)
                        for j1, j2 in zip(jac1_l, jac2_l)]).sum(0)

    def ntk_vps(params, x1, x2):
        def fn_x1(p):
            return functional_call(net, p, (x1,))

        def fn_x2(p):
            return functional_call(net, p, (x2,))

        def get_ntk_slice(vec):
            _, vjp_fn = vjp(fn_x2, params)
            vjps = vjp_fn(vec)
            _, jvps = jvp(fn_x1, (params,), vjps)
            return jvps
        basis = torch.eye(2).view(2, 1, 2).expand(2, x2.shape[0], 2)
        return vmap(get_ntk_slice)(basis)

    vps = ntk_vps(params, x1, x2)
    res = {"full": full, "trace": trace, "diag": diag,
           "vps": vps.movedim(0, -1),
           "jac_keys": list(jac1.keys()), "jac_shape": list(jac1["0.weight"].shape)}
    # eigenvalues of the trace NTK on x1 (its condition number governs GD speed)
    K = torch.stack([torch.einsum("Naf,Maf->NM", j, j) for j in jac1_l]).sum(0)
    res["eig"] = torch.linalg.eigvalsh(K)
    return res


def linearized_program(torch):
    # neural-tangents style linearised network f_lin(p) = f(p0) + J(p0)(p - p0), trained by SGD
    functional_call, jvp, linearize = (torch.func.functional_call, torch.func.jvp,
                                       torch.func.linearize)
    rng = np.random.default_rng(337)
    net = _mlp(torch, rng)
    p0 = {k: v.detach().clone() for k, v in net.named_parameters()}
    x, y = normal(torch, rng, 6, 3), normal(torch, rng, 6, 2)

    def f(p):
        return functional_call(net, p, (x,))

    out0, jvp_fn = linearize(f, p0)
    params = {k: v.clone().requires_grad_() for k, v in p0.items()}
    opt = torch.optim.SGD(params.values(), lr=0.1, momentum=0.9)
    res = {"out0": out0}
    for step in range(3):
        opt.zero_grad()
        delta = {k: params[k] - p0[k] for k in p0}
        f_lin = out0 + jvp_fn(delta)
        loss = torch.nn.functional.mse_loss(f_lin, y)
        loss.backward()
        opt.step()
        res[f"loss{step}"] = loss
    # the same model through jvp, and the true network at the trained parameters
    delta = {k: (params[k] - p0[k]).detach() for k in p0}
    out, tang = jvp(f, (p0,), (delta,))
    res["jvp_model"] = out + tang
    res["lin_model"] = out0 + jvp_fn(delta)
    with torch.no_grad():
        res["true"] = functional_call(net, {k: v.detach() for k, v in params.items()}, (x,))
    res["grads"] = [v.grad for v in params.values()]
    return res


def notears_mlp_program(torch):
    # notears/nonlinear.py: NotearsMLP with LocallyConnected layers, h via matrix_power
    nn = torch.nn
    rng = np.random.default_rng(338)
    d, m, n = 3, 4, 20
    X = torch.from_numpy(_sem_data(rng, n, d)).double()

    class LocallyConnected(nn.Module):
        def __init__(self, num_linear, input_features, output_features):
            super().__init__()
            self.weight = nn.Parameter(torch.Tensor(num_linear, input_features,
                                                    output_features))
            self.bias = nn.Parameter(torch.Tensor(num_linear, output_features))

        def forward(self, x):                    # [n, d, 1, m1] @ [1, d, m1, m2]
            out = torch.matmul(x.unsqueeze(dim=2), self.weight.unsqueeze(dim=0))
            return out.squeeze(dim=2) + self.bias

    class NotearsMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1_pos = nn.Linear(d, d * m)
            self.fc1_neg = nn.Linear(d, d * m)
            self.fc2 = nn.ModuleList([LocallyConnected(d, m, 1)])

        def forward(self, x):
            x = self.fc1_pos(x) - self.fc1_neg(x)
            x = x.view(-1, d, m)
            for fc in self.fc2:
                x = torch.sigmoid(x)
                x = fc(x)
            return x.squeeze(dim=2)

        def h_func(self):
            fc1_weight = self.fc1_pos.weight - self.fc1_neg.weight
            fc1_weight = fc1_weight.view(d, -1, d)
            A = torch.sum(fc1_weight * fc1_weight, dim=1).t()
            M = torch.eye(d, dtype=A.dtype) + A / d
            E = torch.matrix_power(M, d - 1)
            return (E.t() * M).sum() - d

        def fc1_to_adj(self):
            W = (self.fc1_pos.weight - self.fc1_neg.weight).view(d, -1, d)
            return torch.sqrt(torch.sum(W * W, dim=1).t()).cpu().detach()

    model = NotearsMLP().double()
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=5, tolerance_change=1e-12)
    rho, alpha = 1.0, 0.0
    res = {}

    def closure():
        opt.zero_grad()
        X_hat = model(X)
        loss = 0.5 / n * torch.sum((X_hat - X) ** 2)
        h_val = model.h_func()
        l2 = sum(torch.sum(fc.weight ** 2) for fc in model.fc2)
        l1 = torch.sum(model.fc1_pos.weight + model.fc1_neg.weight)
        obj = loss + 0.5 * rho * h_val * h_val + alpha * h_val + 0.01 * l2 + 0.01 * l1
        obj.backward()
        return obj
    for it in range(2):
        res[f"obj{it}"] = opt.step(closure)
        with torch.no_grad():
            res[f"h{it}"] = model.h_func()
            for p in (model.fc1_pos.weight, model.fc1_neg.weight):
                p.clamp_(min=0)
    res["adj"] = model.fc1_to_adj()
    res["dtype"] = [str(res["adj"].dtype).split(".")[-1]]
    res["n_iter"] = opt.state[opt._params[0]]["n_iter"]
    return res


def gp_double_program(torch):
    # BoTorch works in float64: fit, posterior, analytic LogEI, and qEI with Sobol base samples
    rng = np.random.default_rng(339)
    n, dim = 9, 2
    tkw = {"dtype": torch.double}
    train_x = torch.from_numpy(rng.uniform(0, 1, (n, dim)))
    train_y = torch.sin(5 * train_x).sum(-1, keepdim=True)
    raw = torch.zeros(dim + 2, **tkw, requires_grad=True)
    opt = torch.optim.Adam([raw], lr=0.1)
    res = {"dtype": [str(train_x.dtype).split(".")[-1]]}
    for step in range(4):
        opt.zero_grad()
        hyp = torch.nn.functional.softplus(raw)
        K = _rbf(torch, train_x, train_x, hyp[:dim], hyp[dim]) + (hyp[dim + 1] * 1e-2 + 1e-6) \
            * torch.eye(n, **tkw)
        mvn = torch.distributions.MultivariateNormal(torch.zeros(n, **tkw), covariance_matrix=K)
        loss = -mvn.log_prob(train_y.squeeze(-1)) / n
        loss.backward()
        opt.step()
        res[f"mll{step}"] = loss
    hyp = torch.nn.functional.softplus(raw.detach())
    K = _rbf(torch, train_x, train_x, hyp[:dim], hyp[dim]) + (hyp[dim + 1] * 1e-2 + 1e-6) \
        * torch.eye(n, **tkw)
    L, info = torch.linalg.cholesky_ex(K)
    X = torch.from_numpy(rng.uniform(0, 1, (4, dim))).requires_grad_()
    Ks = _rbf(torch, X, train_x, hyp[:dim], hyp[dim])
    mean = (Ks @ torch.cholesky_solve(train_y, L)).squeeze(-1)
    v = torch.linalg.solve_triangular(L, Ks.mT, upper=False)
    sigma = (hyp[dim] - v.pow(2).sum(-2)).clamp_min(1e-12).sqrt()
    u = (mean - train_y.max()) / sigma
    pdf = torch.exp(-0.5 * u * u) / math.sqrt(2 * math.pi)
    log_ei = torch.log(sigma) + torch.log((pdf + u * torch.special.ndtr(u)).clamp_min(1e-40)) \
        + 0.01 * torch.special.log_ndtr(u)
    log_ei.sum().backward()
    res.update(info=int(info), log_ei=log_ei, grad_X=X.grad)
    sobol = torch.quasirandom.SobolEngine(dimension=2, scramble=False)
    z = torch.distributions.Normal(0.0, 1.0).icdf(sobol.draw(8, dtype=torch.double)[1:]
                                                  .clamp(1e-6, 1 - 1e-6))
    res["sobol_normal"] = z
    res["qmc_mean"] = (mean.detach()[:2] + sigma.detach()[:2] * z).clamp_min(0).mean(0)
    return res


PROGRAMS = [notears_program, notears_mlp_program, golem_program, dag_gnn_program,
            gp_fit_program, gp_double_program, analytic_ei_program, mc_acquisition_program,
            ntk_program, linearized_program]

_TOLERANCES = {
    # LBFGS line searches and matrix_exp compound float32 rounding over 3 outer solves
    "notears_program": (1e-4, 1e-5),
}
test_program_matches_torch, _ = program_tests(PROGRAMS, ember, torch, _TOLERANCES)
# linearize's warnings are compared below, less those of PyTorch's fx internals
_, test_program_warns_like_torch = program_tests(PROGRAMS[:-1], ember, torch, _TOLERANCES)

_FX_NOISE = ("`torch.jit.script` is deprecated", "Attempted to insert a get_attr Node")


def test_linearized_program_warns_like_torch():
    """PyTorch's linearize traces with fx and constant-folds: its jit.script deprecation and
    const_fold's get_attr warnings are its implementation's, not the API's."""
    theirs = [w for w in warnings_of(linearized_program, torch)
              if not w[1].startswith(_FX_NOISE)]
    assert warnings_of(linearized_program, ember) == theirs
