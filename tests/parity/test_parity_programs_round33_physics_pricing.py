"""Pricing and simulation programs with heavier numerics, written as option-pricing, QMC and
particle-simulation repositories write them in torch, run once with `torch` bound to ember and
once to PyTorch from the same NumPy data: Longstaff-Schwartz American puts by linalg.lstsq on
vander bases; unscrambled Sobol QMC prices; the COS method and Gil-Pelaez integration with the
Heston characteristic function in complex arithmetic, differentiated by autograd; Merton
jump-diffusion series with lgamma Poisson weights; cell-list neighbour search by unique,
argsort and repeat_interleave; implicit diffusion by conjugate gradients on a sparse Laplacian;
a checkpointed rollout with gradient-clipping hooks."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def lsm_american_program(torch):
    """Longstaff-Schwartz: backward induction over GBM paths (float64), continuation values by
    least squares on a Laguerre-ish basis built with linalg.vander, exercise where the payoff
    beats the fit, and the lstsq residuals/rank fields."""
    rng = np.random.default_rng(40)
    n_paths, n_steps, s0, k, r, sigma, T = 200, 10, 36.0, 40.0, 0.06, 0.2, 1.0
    dt = T / n_steps
    z = torch.from_numpy(rng.standard_normal((n_paths, n_steps)))
    log_s = torch.cumsum((r - 0.5 * sigma ** 2) * dt + sigma * math.sqrt(dt) * z, dim=1)
    s = s0 * torch.exp(torch.cat([torch.zeros(n_paths, 1, dtype=torch.float64), log_s], 1))
    cash = torch.clamp(k - s[:, -1], min=0)
    res = {"coef": []}
    disc = math.exp(-r * dt)
    for t in range(n_steps - 1, 0, -1):
        cash = cash * disc
        itm = (k - s[:, t]) > 0
        x = s[itm, t] / s0
        basis = torch.linalg.vander(x, N=3)
        sol = torch.linalg.lstsq(basis, cash[itm].unsqueeze(-1))
        cont = (basis @ sol.solution).squeeze(-1)
        exercise = (k - s[itm, t]) > cont
        idx = itm.nonzero(as_tuple=True)[0][exercise]
        cash[idx] = (k - s[idx, t])
        if t % 3 == 0:
            res["coef"].append(sol.solution.squeeze(-1))
    res["price"] = cash.mean() * disc
    res["stderr"] = cash.std() / math.sqrt(n_paths)
    a = torch.from_numpy(rng.standard_normal((6, 3)))
    b = torch.from_numpy(rng.standard_normal((6, 2)))
    full = torch.linalg.lstsq(a, b, driver="gelsd")
    res["gelsd"] = [full.solution, full.residuals, full.singular_values]
    res["gelsd_rank"] = full.rank.item()
    res["gelsy_resid_shape"] = list(torch.linalg.lstsq(a, b).residuals.shape)
    res["pinv_gap"] = (torch.linalg.pinv(a) @ b - full.solution).abs().max()
    return res


def sobol_program(torch):
    """Quasi-Monte Carlo with an unscrambled SobolEngine (draw, draw_base2, fast_forward,
    reset), inverse-normal transform, QMC Asian call prices and the same with a Brownian
    bridge ordering; pathwise delta by autograd."""
    eng = torch.quasirandom.SobolEngine(dimension=4, scramble=False)
    first = eng.draw(8)
    res = {"first": first, "dtype": [str(first.dtype).split(".")[-1]]}
    eng.reset()
    again = eng.draw_base2(3)
    res["base2_same"] = bool(torch.equal(first, again))
    eng.fast_forward(5)
    res["after_ff"] = eng.draw(3)
    res["num_generated"] = eng.num_generated
    eng64 = torch.quasirandom.SobolEngine(dimension=8, scramble=False)
    u = eng64.draw(64, dtype=torch.float64)[1:]
    zq = torch.special.ndtri(u)
    s0 = torch.tensor(100.0, dtype=torch.float64, requires_grad=True)
    dt, sigma = 1 / 8, 0.3
    paths = s0 * torch.exp(torch.cumsum(-0.5 * sigma ** 2 * dt + sigma * math.sqrt(dt) * zq, 1))
    price = torch.relu(paths.mean(1) - 100.0).mean()
    delta, = torch.autograd.grad(price, s0)
    res["asian"], res["delta"] = price, delta
    res["moments"] = [zq.mean(), zq.var(), zq.std(0)[:3]]
    return res


def _heston_cf(torch, u, t, v0, kappa, theta, xi, rho):
    """The Heston characteristic function of log(S_t / S_0) (the 'little trap' form)."""
    iu = 1j * u
    d = torch.sqrt((rho * xi * iu - kappa) ** 2 + xi ** 2 * (iu + u ** 2))
    g = (kappa - rho * xi * iu - d) / (kappa - rho * xi * iu + d)
    e = torch.exp(-d * t)
    c = kappa * theta / xi ** 2 * ((kappa - rho * xi * iu - d) * t
                                   - 2 * torch.log((1 - g * e) / (1 - g)))
    dd = (kappa - rho * xi * iu - d) / xi ** 2 * (1 - e) / (1 - g * e)
    return torch.exp(c + dd * v0)


def heston_fourier_program(torch):
    """Heston call prices by Gil-Pelaez (trapezoid over u, complex division, .real) and by the
    COS method (cosine expansion of the payoff with a complex exponential phase), the
    gradients of the price in the model parameters through complex autograd."""
    params = torch.tensor([0.04, 1.5, 0.04, 0.5, -0.7], dtype=torch.float64,
                          requires_grad=True)
    v0, kappa, theta, xi, rho = params.unbind()
    s0, k, t = 100.0, torch.tensor([90.0, 100.0, 110.0], dtype=torch.float64), 1.0
    u = torch.linspace(1e-4, 60.0, 400, dtype=torch.float64)
    cf = _heston_cf(torch, u, t, v0, kappa, theta, xi, rho)
    cf_shift = _heston_cf(torch, u - 1j, t, v0, kappa, theta, xi, rho)
    logk = torch.log(k / s0).unsqueeze(-1)
    phase = torch.exp(-1j * u * logk)
    p1 = 0.5 + torch.trapezoid((phase * cf_shift / (1j * u * cf_shift.new_tensor(1.0)
                                                    * _heston_cf(torch, torch.tensor(
                                                        -1j, dtype=torch.complex128), t, v0,
                                                        kappa, theta, xi, rho))).real, u) / \
        math.pi
    p2 = 0.5 + torch.trapezoid((phase * cf / (1j * u)).real, u) / math.pi
    call = s0 * p1 - k * p2
    res = {"gp_call": call, "cf_abs": cf.abs()[::50], "cf_angle": cf.angle()[::50]}
    grads, = torch.autograd.grad(call.sum(), params, retain_graph=True)
    res["gp_grad"] = grads
    # COS method
    n = 64
    c1, c2 = (1 - math.exp(-1.5)) * (0.04 - 0.04) / 3.0 - 0.5 * 0.04, 0.04 * 4
    a, b = c1 - 12 * math.sqrt(c2), c1 + 12 * math.sqrt(c2)
    kk = torch.arange(n, dtype=torch.float64)
    w = kk * math.pi / (b - a)

    def chi(c, d):
        return (torch.cos(w * (d - a)) * math.exp(d) - torch.cos(w * (c - a)) * math.exp(c)
                + w * torch.sin(w * (d - a)) * math.exp(d)
                - w * torch.sin(w * (c - a)) * math.exp(c)) / (1 + w ** 2)

    def psi(c, d):
        out = (torch.sin(w[1:] * (d - a)) - torch.sin(w[1:] * (c - a))) / w[1:]
        return torch.cat([torch.tensor([d - c], dtype=torch.float64), out])

    vk = 2 / (b - a) * (chi(0.0, b) - psi(0.0, b))
    cf_cos = _heston_cf(torch, w, t, v0, kappa, theta, xi, rho)
    x = torch.log(s0 / k).unsqueeze(-1)
    terms = (cf_cos * torch.exp(1j * w * (x - a))).real * vk
    terms = torch.cat([terms[:, :1] * 0.5, terms[:, 1:]], dim=1)
    cos_call = k * terms.sum(-1)
    res["cos_call"] = cos_call
    res["cos_grad"], = torch.autograd.grad(cos_call[1], params)
    res["cumtrapz"] = torch.cumulative_trapezoid(cf.real.detach(), u)[::80]
    return res


def merton_program(torch):
    """Merton jump-diffusion prices as a Poisson-weighted Black-Scholes series (lgamma
    weights, logsumexp-stable), vega by autograd, and Poisson/Gamma log_probs from
    torch.distributions on the jump counts."""
    lam = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    mu_j, delta_j, sigma = -0.1, 0.15, torch.tensor(0.2, dtype=torch.float64, requires_grad=True)
    s, k, r, t = 100.0, torch.tensor([80.0, 100.0, 120.0], dtype=torch.float64), 0.05, 1.0
    n = torch.arange(0, 30, dtype=torch.float64).unsqueeze(-1)
    kappa = math.exp(mu_j + 0.5 * delta_j ** 2) - 1
    lam_p = lam * (1 + kappa)
    log_w = -lam_p * t + n * torch.log(lam_p * t) - torch.lgamma(n + 1)
    sig_n = torch.sqrt(sigma ** 2 + n * delta_j ** 2 / t)
    r_n = r - lam * kappa + n * (mu_j + 0.5 * delta_j ** 2) / t
    d1 = (math.log(s) - torch.log(k) + (r_n + 0.5 * sig_n ** 2) * t) / (sig_n * math.sqrt(t))
    d2 = d1 - sig_n * math.sqrt(t)
    bs = s * torch.special.ndtr(d1) - k * torch.exp(-r_n * t) * torch.special.ndtr(d2)
    price = (torch.exp(log_w) * bs).sum(0)
    res = {"price": price, "weights_sum": torch.logsumexp(log_w, 0)}
    vega, dlam = torch.autograd.grad(price.sum(), (sigma, lam))
    res["vega"], res["dlam"] = vega, dlam
    pois = torch.distributions.Poisson(torch.tensor([0.5, 2.0]))
    counts = torch.tensor([[0.0, 1.0], [3.0, 2.0]])
    res["pois"] = pois.log_prob(counts)
    res["pois_mean_var"] = [pois.mean, pois.variance]
    gam = torch.distributions.Gamma(torch.tensor(2.0), torch.tensor(3.0))
    res["gamma"] = [gam.log_prob(torch.tensor([0.1, 1.0])), gam.entropy(), gam.mean]
    res["digamma"] = torch.special.digamma(torch.tensor([0.5, 1.0, 7.5]))
    res["polygamma"] = torch.special.polygamma(1, torch.tensor([0.5, 2.0]))
    res["gammainc"] = [torch.special.gammainc(torch.tensor([2.0]), torch.tensor([1.5])),
                       torch.special.gammaincc(torch.tensor([2.0]), torch.tensor([1.5]))]
    return res


def cell_list_program(torch):
    """jax-md-style cell lists: particles hashed to cells, sorted by a stable argsort, cell
    ranges by searchsorted, candidate pairs by repeat_interleave and unique(dim=0), neighbour
    counts by bincount, and a soft-sphere energy summed over the pairs with its forces."""
    rng = np.random.default_rng(41)
    n, box, cell = 40, 4.0, 1.0
    pos = torch.from_numpy(rng.uniform(0, box, (n, 2))).requires_grad_(True)
    n_cells = int(box / cell)
    cid = (pos.detach() // cell).long().clamp(max=n_cells - 1)
    flat = cid[:, 0] * n_cells + cid[:, 1]
    order = torch.argsort(flat, stable=True)
    sorted_cells = flat[order]
    starts = torch.searchsorted(sorted_cells, torch.arange(n_cells ** 2))
    counts = torch.bincount(flat, minlength=n_cells ** 2)
    res = {"order": order, "starts": starts, "counts": counts}
    uniq, inverse, ucounts = torch.unique(cid, dim=0, return_inverse=True, return_counts=True)
    res["uniq"], res["inverse"], res["ucounts"] = uniq, inverse, ucounts
    # candidate pairs: each particle with every particle of its own and the 8 adjacent cells
    offsets = torch.tensor([[i, j] for i in (-1, 0, 1) for j in (-1, 0, 1)])
    nb = (cid.unsqueeze(1) + offsets) % n_cells
    nb_flat = nb[..., 0] * n_cells + nb[..., 1]
    reps = counts[nb_flat].reshape(-1)
    src = torch.arange(n).repeat_interleave(9).repeat_interleave(reps)
    first = starts[nb_flat].reshape(-1)
    within = torch.arange(reps.sum()) - torch.repeat_interleave(torch.cumsum(reps, 0) - reps,
                                                                reps)
    dst = order[torch.repeat_interleave(first, reps) + within]
    pairs = torch.stack([src, dst], 1)
    pairs = pairs[pairs[:, 0] < pairs[:, 1]]
    pairs = torch.unique(pairs, dim=0)
    d = pos[pairs[:, 0]] - pos[pairs[:, 1]]
    d = d - box * torch.round(d / box)
    r = torch.linalg.norm(d, dim=1)
    close = r < cell
    e = (0.5 * (1 - r / cell) ** 2 * close).sum()
    f, = torch.autograd.grad(-e, pos)
    res["n_pairs"], res["energy"], res["force"] = pairs.shape[0], e, f
    brute = torch.cdist(pos.detach(), pos.detach())
    res["brute_pairs"] = int(torch.triu((brute < cell) & (brute > 0), diagonal=1).sum())
    res["close_pairs"] = int(close.sum())
    return res


def implicit_diffusion_program(torch):
    """Backward-Euler heat equation on a grid: the 5-point Laplacian as a sparse COO matrix
    (coalesced, duplicates summed), (I - dt L) u = u_old by conjugate gradients with
    sparse.mm, and the gradient of the final temperature w.r.t. the initial field."""
    n, dt, alpha = 6, 0.1, 0.5
    N = n * n
    rows, cols, vals = [], [], []
    for i in range(n):
        for j in range(n):
            p = i * n + j
            for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                ii, jj = i + di, j + dj
                if 0 <= ii < n and 0 <= jj < n:
                    rows += [p, p]
                    cols += [ii * n + jj, p]
                    vals += [1.0, -1.0]
    lap = torch.sparse_coo_tensor(torch.tensor([rows, cols]),
                                  torch.tensor(vals, dtype=torch.float64), (N, N)).coalesce()
    res = {"nnz": lap._nnz(), "diag": torch.diagonal(lap.to_dense())[:8]}
    eye = torch.sparse_coo_tensor(torch.arange(N).repeat(2, 1), torch.ones(N, dtype=torch.float64),
                                  (N, N))
    A = (eye - dt * alpha * lap).coalesce()
    rng = np.random.default_rng(42)
    u0 = torch.from_numpy(rng.uniform(0, 1, (N, 1))).requires_grad_(True)

    def cg(b, iters=25):
        x = torch.zeros_like(b)
        r = b - torch.sparse.mm(A, x)
        p = r.clone()
        rs = (r * r).sum()
        for _ in range(iters):
            ap = torch.sparse.mm(A, p)
            step = rs / (p * ap).sum()
            x = x + step * p
            r = r - step * ap
            rs_new = (r * r).sum()
            p = r + rs_new / rs * p
            rs = rs_new
        return x

    u = u0
    for _ in range(3):
        u = cg(u)
    res["u"] = u.view(n, n)
    res["dense_gap"] = (torch.linalg.solve(A.to_dense(), u0.detach()) - cg(u0.detach())).abs().max()
    u[n + 1].sum().backward()
    res["u0_grad"] = u0.grad.view(n, n)
    res["mass"] = [u0.detach().sum(), u.detach().sum()]
    return res


def checkpoint_rollout_program(torch):
    """A long spring rollout as DiffTaichi-in-torch repos write it to save memory:
    utils.checkpoint per chunk of steps (non-reentrant), gradient clipping by tensor hooks on
    the state, retain_grad on an intermediate, and autograd.functional vjp/hvp of the step."""
    rng = np.random.default_rng(43)
    k = torch.tensor(5.0, requires_grad=True)
    x0 = normal(torch, rng, 6).double().requires_grad_(True)
    dt = 0.05
    seen = []

    def chunk(x, v, k):
        for _ in range(10):
            v = v - dt * k * (x - 0.5 * (x.roll(1) + x.roll(-1)))
            x = x + dt * v
        return x, v

    x, v = x0, torch.zeros(6, dtype=torch.float64)
    mids = []
    for c in range(4):
        x, v = torch.utils.checkpoint.checkpoint(chunk, x, v, k, use_reentrant=False)
        x.register_hook(lambda g: (seen.append(g.norm().item()), g.clamp(-0.5, 0.5))[1])
        if c == 1:
            x.retain_grad()
            mids.append(x)
    loss = (x ** 2).sum() + v.abs().sum()
    loss.backward()
    res = {"loss": loss, "x0_grad": x0.grad, "k_grad": k.grad, "hook_norms": seen,
           "mid_grad": mids[0].grad}

    def one(x):
        return chunk(x, torch.zeros_like(x), torch.tensor(5.0, dtype=torch.float64))[0]

    out, vjp = torch.autograd.functional.vjp(one, x0.detach(), torch.ones(6, dtype=torch.float64))
    res["vjp"] = vjp
    _, hvp = torch.autograd.functional.hvp(lambda x: one(x).pow(3).sum(), x0.detach(),
                                           torch.linspace(0, 1, 6, dtype=torch.float64))
    res["hvp"] = hvp
    _, jvp = torch.autograd.functional.jvp(one, x0.detach(), torch.ones(6, dtype=torch.float64))
    res["jvp"] = jvp
    return res


PROGRAMS = [lsm_american_program, sobol_program, heston_fourier_program, merton_program,
            cell_list_program, implicit_diffusion_program, checkpoint_rollout_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
