"""Quantitative-finance programs written as deep-hedging and option-pricing repositories write
them in torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy
weights and paths: deep hedging with an LSTM policy, P&L by cumsum, proportional transaction
costs through abs, CVaR and entropic risk (logsumexp); Black-Scholes with special.ndtr and erf,
Greeks by autograd.grad(create_graph=True), implied volatility by Newton iterations under
no_grad; Heston Monte Carlo with the full-truncation clamp; a mean-variance portfolio by unrolled
projected gradient onto the simplex (sort/cumsum projection), differentiated end to end."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _gbm_paths(rng, n_paths, n_steps, s0=1.0, sigma=0.2, dt=1 / 50):
    z = rng.standard_normal((n_paths, n_steps))
    log = np.cumsum(-0.5 * sigma ** 2 * dt + sigma * math.sqrt(dt) * z, axis=1)
    return (s0 * np.exp(np.concatenate([np.zeros((n_paths, 1)), log], 1))).astype(np.float32)


def deep_hedging_program(torch):
    """pfhedge-style deep hedging of a European call: an LSTM over (log-moneyness, time left,
    previous hedge) gives hedge ratios, P&L = payoff sold + sum(hedge * dS) - costs; trained on
    the entropic risk and on CVaR for a few steps."""
    rng = np.random.default_rng(10)
    n_paths, n_steps, strike, cost = 16, 8, 1.0, 1e-3
    spot = torch.from_numpy(_gbm_paths(rng, n_paths, n_steps))

    class Policy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(3, 12, num_layers=1, batch_first=True)
            self.head = torch.nn.Sequential(torch.nn.Linear(12, 8), torch.nn.ReLU(),
                                            torch.nn.Linear(8, 1))

        def forward(self, spot):
            time_left = torch.linspace(1.0, 0.0, spot.size(1)).expand_as(spot)
            hedge = torch.zeros(spot.size(0), 1)
            state = None
            out = []
            for i in range(spot.size(1) - 1):
                feat = torch.stack([torch.log(spot[:, i] / strike), time_left[:, i],
                                    hedge.squeeze(-1)], dim=-1).unsqueeze(1)
                h, state = self.lstm(feat, state)
                hedge = self.head(h[:, -1]).clamp(-2, 2)
                out.append(hedge)
            return torch.cat(out, dim=1)

    policy = Policy()
    fill_(torch, policy, rng)
    opt = torch.optim.Adam(policy.parameters(), lr=5e-3)
    res = {"entropic": [], "cvar": [], "premium": []}

    def pnl(hedges):
        ds = torch.diff(spot, dim=1)
        gains = (hedges * ds).cumsum(dim=1)[:, -1]
        trades = torch.diff(torch.nn.functional.pad(hedges, (1, 0)), dim=1)
        costs = (cost * trades.abs() * spot[:, :-1]).sum(1)
        payoff = torch.relu(spot[:, -1] - strike)
        return gains - costs - payoff

    def entropic(x, a=1.0):
        return (torch.logsumexp(-a * x, dim=0) - math.log(x.numel())) / a

    def cvar(x, alpha=0.25):
        k = max(1, int(alpha * x.numel()))
        return -torch.topk(x, k, largest=False, sorted=True).values.mean()

    for step in range(3):
        opt.zero_grad()
        h = policy(spot)
        p = pnl(h)
        loss = entropic(p) if step < 2 else cvar(p)
        loss.backward()
        opt.step()
        res["entropic" if step < 2 else "cvar"].append(loss.item())
        # indifference premium: the cash that makes the entropic risk zero
        with torch.no_grad():
            res["premium"].append(entropic(pnl(policy(spot))))
    with torch.no_grad():
        p = pnl(policy(spot))
        res["pnl_sorted"] = p.sort().values
        res["var"] = torch.quantile(-p, 0.75)
        res["expected_shortfall"] = -p[p <= p.kthvalue(4).values].mean()
    res["lstm_w"] = policy.lstm.weight_hh_l0.detach()
    return res


def _bs_call(torch, s, k, t, r, sigma):
    d1 = (torch.log(s / k) + (r + 0.5 * sigma ** 2) * t) / (sigma * torch.sqrt(t))
    d2 = d1 - sigma * torch.sqrt(t)
    return s * torch.special.ndtr(d1) - k * torch.exp(-r * t) * torch.special.ndtr(d2)


def _norm_cdf_erf(torch, x):
    return 0.5 * (1 + torch.erf(x / math.sqrt(2.0)))


def black_scholes_program(torch):
    """Black-Scholes prices with ndtr and with erf, delta/vega/theta by autograd.grad with
    create_graph, gamma and vanna as second derivatives, put-call parity, and implied vols
    recovered by Newton iterations under no_grad (vega from the closed form)."""
    s = torch.tensor([80.0, 95.0, 100.0, 105.0, 130.0], dtype=torch.float64, requires_grad=True)
    k = torch.tensor(100.0, dtype=torch.float64)
    t = torch.tensor([0.25, 0.5, 1.0, 1.5, 2.0], dtype=torch.float64, requires_grad=True)
    r = torch.tensor(0.03, dtype=torch.float64)
    sigma = torch.full((5,), 0.25, dtype=torch.float64, requires_grad=True)
    price = _bs_call(torch, s, k, t, r, sigma)
    res = {"price": price}
    delta, vega, dt = torch.autograd.grad(price.sum(), (s, sigma, t), create_graph=True)
    res["delta"], res["vega"], res["theta"] = delta, vega, -dt
    gamma, vanna = torch.autograd.grad(delta.sum(), (s, sigma), create_graph=True)
    res["gamma"], res["vanna"] = gamma, vanna
    volga, = torch.autograd.grad(vega.sum(), sigma, retain_graph=True)
    res["volga"] = volga
    d1 = (torch.log(s / k) + (r + 0.5 * sigma ** 2) * t) / (sigma * torch.sqrt(t))
    res["delta_closed"] = (delta - torch.special.ndtr(d1)).abs().max()
    res["gamma_closed"] = (gamma - torch.exp(-0.5 * d1 ** 2) / math.sqrt(2 * math.pi)
                           / (s * sigma * torch.sqrt(t))).abs().max()
    # float32 with erf and the put by parity
    s32, t32 = s.detach().float(), t.detach().float()
    d1f = (torch.log(s32 / 100.0) + (0.03 + 0.5 * 0.25 ** 2) * t32) / (0.25 * t32.sqrt())
    d2f = d1f - 0.25 * t32.sqrt()
    call32 = s32 * _norm_cdf_erf(torch, d1f) - 100.0 * torch.exp(-0.03 * t32) * \
        _norm_cdf_erf(torch, d2f)
    put32 = 100.0 * torch.exp(-0.03 * t32) * torch.special.ndtr(-d2f) - s32 * \
        torch.special.ndtr(-d1f)
    res["call32"], res["put32"] = call32, put32
    res["parity_ok"] = bool((call32 - put32 - (s32 - 100 * torch.exp(-0.03 * t32))).abs().max()
                            < 1e-4)
    res["log_ndtr"] = torch.special.log_ndtr(torch.tensor([-10.0, -1.0, 0.0, 3.0]))
    res["ndtri"] = torch.special.ndtri(torch.tensor([0.01, 0.5, 0.975]))
    res["erfinv"] = torch.erfinv(torch.tensor([-0.5, 0.0, 0.9]))
    # implied vol by Newton from market prices produced at known vols
    true_vol = torch.tensor([0.15, 0.2, 0.3, 0.45, 0.6], dtype=torch.float64)
    market = _bs_call(torch, s.detach(), k, t.detach(), r, true_vol)
    iv = torch.full_like(true_vol, 0.5)
    iters = []
    with torch.no_grad():
        for _ in range(20):
            p = _bs_call(torch, s, k, t, r, iv)
            d1 = (torch.log(s / k) + (r + 0.5 * iv ** 2) * t) / (iv * torch.sqrt(t))
            v = s * torch.exp(-0.5 * d1 ** 2) / math.sqrt(2 * math.pi) * torch.sqrt(t)
            step = (p - market) / v.clamp_min(1e-8)
            iv = (iv - step).clamp(1e-4, 5.0)
            iters.append(step.abs().max().item())
            if step.abs().max() < 1e-10:
                break
    res["iv"] = iv
    res["iv_req_grad"] = [iv.requires_grad, p.requires_grad]
    res["newton_iters"] = len(iters)
    # the same by autograd vega with torch.autograd.functional.jacobian on the diagonal
    jac = torch.autograd.functional.jacobian(
        lambda v: _bs_call(torch, s.detach(), k, t.detach(), r, v), iv)
    res["jac_diag"] = torch.diagonal(jac)
    res["jac_off"] = (jac - torch.diag_embed(torch.diagonal(jac))).abs().max()
    return res


def heston_program(torch):
    """Heston Monte Carlo (log-Euler on S, full-truncation Euler on v), correlated normals from
    NumPy, call prices and pathwise delta/vega-of-v0 by backward, calibration of (kappa, theta,
    xi) to target prices by a few Adam steps on softplus-parametrised parameters."""
    rng = np.random.default_rng(11)
    n_paths, n_steps, T = 256, 20, 1.0
    dt = T / n_steps
    z1 = torch.from_numpy(rng.standard_normal((n_steps, n_paths)).astype(np.float32))
    z2 = torch.from_numpy(rng.standard_normal((n_steps, n_paths)).astype(np.float32))
    strikes = torch.tensor([0.9, 1.0, 1.1])

    def simulate(s0, v0, kappa, theta, xi, rho, eps=0.0):
        log_s = torch.log(s0).expand(n_paths)
        v = v0.expand(n_paths)
        min_v = []
        for i in range(n_steps):
            w2 = rho * z1[i] + torch.sqrt(1 - rho ** 2) * z2[i]
            v_pos = torch.clamp(v, min=0.0)
            log_s = log_s - 0.5 * v_pos * dt + torch.sqrt(v_pos * dt) * z1[i]
            v = v + kappa * (theta - v_pos) * dt + xi * torch.sqrt(v_pos * dt + eps) * w2
            min_v.append(v.min())
        return torch.exp(log_s), torch.stack(min_v)

    s0 = torch.tensor(1.0, requires_grad=True)
    v0 = torch.tensor(0.04, requires_grad=True)
    rho = torch.tensor(-0.7)
    st, min_v = simulate(s0, v0, torch.tensor(1.5), torch.tensor(0.04), torch.tensor(0.9), rho)
    payoff = torch.relu(st.unsqueeze(-1) - strikes).mean(0)
    res = {"prices": payoff, "min_v": min_v, "went_negative": bool((min_v < 0).any())}
    payoff[1].backward()
    res["delta"], res["dv0"] = s0.grad, v0.grad
    target = payoff.detach() * 1.1
    raw = torch.nn.Parameter(torch.tensor([0.5, -3.0, 0.0]))
    opt = torch.optim.Adam([raw], lr=0.05)
    res["calib"] = []
    for _ in range(3):
        kappa, theta, xi = torch.nn.functional.softplus(raw).unbind()
        # calibration codes smooth sqrt at 0: its gradient there turns an ulp into 1e-3
        st, _ = simulate(s0.detach(), v0.detach(), kappa, theta, xi, rho, eps=1e-4)
        model = torch.relu(st[:, None] - strikes).mean(0)
        loss = torch.nn.functional.mse_loss(model, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["calib"].append(loss.item())
    res["raw"] = raw.detach()
    return res


def _project_simplex(torch, v):
    """Euclidean projection of each row onto the probability simplex (sort/cumsum)."""
    n = v.size(-1)
    u, _ = torch.sort(v, dim=-1, descending=True)
    css = torch.cumsum(u, dim=-1) - 1
    ind = torch.arange(1, n + 1, dtype=v.dtype)
    cond = (u - css / ind) > 0
    rho = torch.count_nonzero(cond, dim=-1).unsqueeze(-1) - 1
    tau = css.gather(-1, rho) / (rho + 1).to(v.dtype)
    return torch.clamp(v - tau, min=0)


def portfolio_program(torch):
    """Markowitz mean-variance weights by unrolled projected gradient onto the simplex, the
    risk-aversion and expected returns learned by differentiating through the unroll."""
    rng = np.random.default_rng(12)
    n_assets, n_obs = 6, 40
    rets = torch.from_numpy((rng.standard_normal((n_obs, n_assets)) * 0.02 + 0.001)
                            .astype(np.float32))
    mu_hat = rets.mean(0)
    centred = rets - mu_hat
    cov = centred.T @ centred / (n_obs - 1)
    res = {"cov_ok": (cov - torch.cov(rets.T)).abs().max(), "corr": torch.corrcoef(rets.T)}
    log_gamma = torch.tensor(math.log(5.0), requires_grad=True)
    mu = mu_hat.clone().requires_grad_(True)
    w = torch.full((n_assets,), 1.0 / n_assets)
    lr = 2.0
    for _ in range(30):
        grad = log_gamma.exp() * (cov @ w) - mu
        w = _project_simplex(torch, (w - lr * grad).unsqueeze(0)).squeeze(0)
    res["weights"] = w
    res["sum"] = w.sum()
    res["support"] = (w > 0).sum().item()
    future = torch.from_numpy((rng.standard_normal((20, n_assets)) * 0.02).astype(np.float32))
    realised = future @ w
    sharpe = realised.mean() / realised.std(unbiased=True)
    (-sharpe).backward()
    res["sharpe"] = sharpe
    res["d_gamma"], res["d_mu"] = log_gamma.grad, mu.grad
    # batched projection against the sort-free bisection answer
    v = normal(torch, rng, 5, n_assets)
    proj = _project_simplex(torch, v)
    lo = v.min(-1, keepdim=True).values - 1
    hi = v.max(-1, keepdim=True).values
    for _ in range(60):
        mid = (lo + hi) / 2
        too_big = torch.clamp(v - mid, min=0).sum(-1, keepdim=True) > 1
        lo = torch.where(too_big, mid, lo)
        hi = torch.where(too_big, hi, mid)
    res["proj"], res["bisect_gap"] = proj, (proj - torch.clamp(v - lo, min=0)).abs().max()
    # efficient frontier by the closed form (minimum variance then tangency)
    ones = torch.ones(n_assets, 1)
    inv = torch.linalg.inv(cov)
    w_mv = (inv @ ones) / (ones.T @ inv @ ones)
    w_tan = torch.linalg.solve(cov, mu_hat.unsqueeze(-1))
    res["w_mv"], res["w_tan"] = w_mv.squeeze(), (w_tan / w_tan.sum()).squeeze()
    return res


PROGRAMS = [deep_hedging_program, black_scholes_program, heston_program, portfolio_program]

TOLERANCES = {
    # softplus differs from PyTorch's vectorised log1p/exp by an ulp; three Adam steps through
    # 256 paths x 20 sqrt steps carry it to 2e-5
    "heston_program": (1e-4, 1e-6),
}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
