"""Population methods written as their reference repositories write them in torch: an ensemble
of MLPs trained together through torch.func.stack_module_state + functional_call + vmap, OpenAI
evolution strategies (antithetic noise, centred ranks via argsort, parameters_to_vector /
vector_to_parameters), CMA-ES in tensor ops (eigh of the covariance, rank-one and rank-mu
updates, step-size path) and population-based training (exploit by copying model and optimizer
state_dicts, explore by perturbing lr in param_groups). Run once with `torch` bound to ember and
once to PyTorch from the same NumPy weights, data and noise."""

import copy
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _mlp(torch, rng):
    nn = torch.nn
    net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    fill_(torch, net, rng, scale=0.5)
    return net


def ensemble_vmap_program(torch):
    """torch.func ensembling tutorial, trained: stacked parameters become leaves of one Adam,
    vmap over (params, buffers) with in_dims=(0, 0, None) for a shared minibatch and (0, 0, 0)
    for per-member minibatches; the 'meta' base model is built with .to('meta')."""
    functional_call, stack_module_state = torch.func.functional_call, torch.func.stack_module_state
    vmap = torch.func.vmap
    rng = np.random.default_rng(10)
    models = [_mlp(torch, rng) for _ in range(4)]
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")

    def fmodel(p, b, x):
        return functional_call(base, (p, b), (x,))

    x = normal(torch, rng, 16, 4)
    y = (x ** 2).sum(1, keepdim=True)
    opt = torch.optim.Adam(params.values(), lr=0.02)
    res = {"keys": sorted(params), "shape": list(params["0.weight"].shape),
           "leaf": [bool(v.is_leaf and v.requires_grad) for v in params.values()]}
    losses = []
    for _ in range(4):
        opt.zero_grad()
        pred = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x)
        loss = ((pred - y) ** 2).mean(dim=(1, 2))
        loss.sum().backward()
        opt.step()
        losses.append(loss.detach())
    res["losses"] = losses
    xs = normal(torch, rng, 4, 5, 4)
    res["per_member"] = vmap(fmodel)(params, buffers, xs).detach()
    res["member0_unchanged"] = models[0][0].weight.detach()
    mean_pred = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x).mean(0)
    res["ens_std"] = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x).std(0).detach()
    res["mean_pred"] = mean_pred.detach()
    return res


def openai_es_program(torch):
    """Salimans et al.'s ES on a small policy: antithetic perturbations eps/-eps (NumPy draws),
    fitness from a batched rollout under no_grad, centred ranks (argsort of argsort), the
    gradient estimate eps^T * ranks, weight decay and an Adam step on the flat vector assigned
    to a Parameter's grad."""
    rng = np.random.default_rng(11)
    to_vec = torch.nn.utils.parameters_to_vector
    from_vec = torch.nn.utils.vector_to_parameters
    policy = _mlp(torch, rng)
    theta = torch.nn.Parameter(to_vec(policy.parameters()).detach().clone())
    opt = torch.optim.Adam([theta], lr=0.03)
    obs = normal(torch, rng, 12, 4)
    target = torch.sin(obs.sum(1, keepdim=True))
    npop, sigma = 6, 0.1

    def fitness(vec):
        with torch.no_grad():
            from_vec(vec, policy.parameters())
            return -((policy(obs) - target) ** 2).mean()

    def centered_ranks(x):
        ranks = torch.empty_like(x)
        ranks[x.argsort()] = torch.arange(len(x), dtype=x.dtype)
        return ranks / (len(x) - 1) - 0.5

    res = {}
    for it in range(3):
        half = torch.from_numpy(rng.standard_normal((npop // 2, theta.numel())).astype(np.float32))
        eps = torch.cat([half, -half])
        fits = torch.stack([fitness(theta.detach() + sigma * e) for e in eps])
        shaped = centered_ranks(fits)
        grad = -(eps.t() @ shaped) / (npop * sigma)
        theta.grad = grad + 0.005 * theta.detach()
        opt.step()
        res[f"fits_{it}"] = fits
        res[f"order_{it}"] = fits.argsort(descending=True).tolist()
        res[f"ranks2_{it}"] = fits.argsort().argsort().tolist()
    res["theta"] = theta.detach()
    res["final"] = fitness(theta.detach()).item()
    return res


def cmaes_program(torch):
    """Hansen's purecma in tensor ops on a rotated ellipsoid: samples x = m + sigma * B D z
    (z from NumPy), log-weights of the mu best, evolution paths, rank-one + rank-mu covariance
    update, step-size control by ||p_sigma||, eigendecomposition with torch.linalg.eigh and
    symmetrisation via triu/tril."""
    rng = np.random.default_rng(12)
    dt = torch.float64
    n, lam = 4, 8
    mu = lam // 2
    w = math.log(mu + 0.5) - torch.log(torch.arange(1, mu + 1, dtype=dt))
    w = w / w.sum()
    mueff = (w.sum() ** 2 / (w ** 2).sum()).item()
    cc = (4 + mueff / n) / (n + 4 + 2 * mueff / n)
    cs = (mueff + 2) / (n + mueff + 5)
    c1 = 2 / ((n + 1.3) ** 2 + mueff)
    cmu = min(1 - c1, 2 * (mueff - 2 + 1 / mueff) / ((n + 2) ** 2 + mueff))
    damps = 1 + 2 * max(0, math.sqrt((mueff - 1) / (n + 1)) - 1) + cs
    chi_n = n ** 0.5 * (1 - 1 / (4 * n) + 1 / (21 * n ** 2))
    R = torch.linalg.qr(torch.from_numpy(rng.standard_normal((n, n))))[0]
    scales = torch.tensor([1.0, 3.0, 10.0, 30.0], dtype=dt)

    def f(x):
        return ((x @ R.T * scales) ** 2).sum(-1)

    m = torch.full((n,), 1.0, dtype=dt)
    sigma = 0.5
    C = torch.eye(n, dtype=dt)
    pc = torch.zeros(n, dtype=dt)
    ps = torch.zeros(n, dtype=dt)
    res = {}
    for g in range(6):
        D2, B = torch.linalg.eigh(C)
        # eigenvectors are unique up to sign: fix each column's largest entry positive
        B = B * torch.sign(B.gather(0, B.abs().argmax(0, keepdim=True)))
        D = D2.clamp_min(1e-20).sqrt()
        z = torch.from_numpy(rng.standard_normal((lam, n)))
        y = (z * D) @ B.T
        x = m + sigma * y
        fit = f(x)
        idx = torch.argsort(fit)[:mu]
        y_sel = y[idx]
        m_old = m
        m = m + sigma * (w @ y_sel)
        invsqrtC = B @ torch.diag(1 / D) @ B.T
        ps = (1 - cs) * ps + math.sqrt(cs * (2 - cs) * mueff) * invsqrtC @ (m - m_old) / sigma
        ps_norm = ps.norm() / math.sqrt(1 - (1 - cs) ** (2 * (g + 1)))
        hsig = float(ps_norm / chi_n < 1.4 + 2 / (n + 1))
        pc = (1 - cc) * pc + hsig * math.sqrt(cc * (2 - cc) * mueff) * (m - m_old) / sigma
        rank_mu = torch.einsum("k,ki,kj->ij", w, y_sel, y_sel)
        C = ((1 - c1 - cmu) * C + c1 * (torch.outer(pc, pc) + (1 - hsig) * cc * (2 - cc) * C)
             + cmu * rank_mu)
        C = torch.triu(C) + torch.triu(C, 1).T
        sigma *= math.exp((cs / damps) * (ps.norm().item() / chi_n - 1))
        res[f"best_{g}"] = fit.min().item()
        res[f"idx_{g}"] = idx.tolist()
    res["m"] = m
    res["C"] = C
    res["sigma"] = sigma
    res["eig"] = torch.linalg.eigvalsh(C)
    return res


def pbt_program(torch):
    """Population-based training: members train with their own SGD; every 'ready' step the
    bottom quantile copies a top member's model and optimizer state_dicts (deepcopied), then
    explores by multiplying lr in param_groups by 0.8 or 1.2 (NumPy choice); hyperparameters
    are read back from the optimizers' state_dicts."""
    rng = np.random.default_rng(13)
    x = normal(torch, rng, 20, 4)
    y = x @ normal(torch, rng, 4, 1) + 0.1
    pop = []
    for lr in (0.01, 0.05, 0.1, 0.2):
        model = _mlp(torch, rng)
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-3)
        pop.append({"model": model, "opt": opt, "score": None})
    res = {}
    for gen in range(3):
        for member in pop:
            for _ in range(3):
                member["opt"].zero_grad()
                loss = torch.nn.functional.mse_loss(member["model"](x), y)
                loss.backward()
                member["opt"].step()
            with torch.no_grad():
                member["score"] = -torch.nn.functional.mse_loss(member["model"](x), y).item()
        order = sorted(range(len(pop)), key=lambda i: pop[i]["score"], reverse=True)
        top, bottom = order[:1], order[-1:]
        for b in bottom:
            src = pop[int(rng.choice(top))]
            pop[b]["model"].load_state_dict(copy.deepcopy(src["model"].state_dict()))
            pop[b]["opt"].load_state_dict(copy.deepcopy(src["opt"].state_dict()))
            for group in pop[b]["opt"].param_groups:
                group["lr"] = group["lr"] * float(rng.choice([0.8, 1.2]))
        res[f"scores_{gen}"] = [m["score"] for m in pop]
        res[f"order_{gen}"] = order
        res[f"lrs_{gen}"] = [m["opt"].state_dict()["param_groups"][0]["lr"] for m in pop]
    b = bottom[0]
    buf = pop[b]["opt"].state[pop[b]["model"][0].weight]["momentum_buffer"]
    res["copied_momentum"] = buf
    res["weights"] = [m["model"][2].weight.detach() for m in pop]
    return res


def ensemble_grad_program(torch):
    """Per-member gradients of an ensemble with BatchNorm buffers: vmap(grad(f)) and
    vmap(grad_and_value) over stacked params/buffers in eval mode, then a train-mode vmapped
    functional_call; an optimizer deepcopied and its state_dict transplanted onto another member
    with an edited lr (PBT's exploit step through state_dict plumbing)."""
    rng = np.random.default_rng(16)
    nn = torch.nn
    ms = [nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 1)) for _ in range(3)]
    for m in ms:
        fill_(torch, m, rng)
    p, b = torch.func.stack_module_state(ms)
    res = {"buffers": sorted(b), "nbt": b["1.num_batches_tracked"].tolist()}
    base = copy.deepcopy(ms[0]).to("meta")
    x = normal(torch, rng, 5, 3)

    def f(pp, bb, xx):
        return torch.func.functional_call(base, (pp, bb), (xx,)).pow(2).mean()

    base.eval()
    g = torch.func.vmap(torch.func.grad(f), in_dims=(0, 0, None))(p, b, x)
    res["grads"] = [g[k] for k in sorted(g)]
    gv, val = torch.func.vmap(torch.func.grad_and_value(f), in_dims=(0, 0, None))(p, b, x)
    res["values"] = val
    res["same_grads"] = all(torch.allclose(gv[k], g[k]) for k in g)
    base.train()
    y = torch.func.vmap(lambda pp, bb, xx: torch.func.functional_call(base, (pp, bb), (xx,)),
                        in_dims=(0, 0, None))(p, b, x)
    res["train_out"] = y.detach()
    m = ms[0]
    opt = torch.optim.Adam(m.parameters(), lr=0.1)
    m(x).pow(2).mean().backward()
    opt.step()
    opt2 = copy.deepcopy(opt)
    res["deepcopy_shares"] = opt2.param_groups[0]["params"][0] is m[0].weight
    sd = opt.state_dict()
    sd["param_groups"][0]["lr"] = 0.5
    opt3 = torch.optim.Adam(ms[1].parameters(), lr=0.01)
    opt3.load_state_dict(sd)
    res["lrs"] = [opt3.param_groups[0]["lr"], opt.param_groups[0]["lr"]]
    res["exp_avg"] = opt3.state[ms[1][0].weight]["exp_avg"]
    res["step_dtype"] = [str(opt3.state[ms[1][0].weight]["step"].dtype).split(".")[-1]]
    ms[1](x).pow(2).mean().backward()
    opt3.step()
    res["after"] = ms[1][0].weight.detach()
    return res


PROGRAMS = [ensemble_vmap_program, ensemble_grad_program, openai_es_program, cmaes_program,
            pbt_program]

# several optimiser steps accumulate float32 reassociation noise
TOLERANCES = {p.__name__: (1e-4, 1e-5) for p in PROGRAMS}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
