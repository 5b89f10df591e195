"""Federated learning written as its reference repositories write it in torch (FedAvg's
average_weights over state_dicts with BatchNorm's integer num_batches_tracked, FedProx's proximal
term, SCAFFOLD's control variates, FedNova's normalised averaging, FedAdam's server optimiser on
pseudo-gradients assigned to .grad, secure aggregation with pairwise seeded masks mod 2**32,
FedBN/FedPer personalisation, client sampling with server-side DP), run once with `torch` bound to
ember and once to PyTorch from the same NumPy weights and data. The sibling _population covers
ensembles, evolution strategies, CMA-ES and population-based training."""

import copy
import io

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _net(torch, rng, bn=True):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(6, 8)
            self.bn = nn.BatchNorm1d(8) if bn else nn.Identity()
            self.fc2 = nn.Linear(8, 3)

        def forward(self, x):
            return self.fc2(torch.relu(self.bn(self.fc1(x))))

    net = Net()
    fill_(torch, net, rng)
    return net


def _clients(torch, rng, n=3, sizes=(8, 12, 6)):
    data = []
    for i in range(n):
        x = normal(torch, rng, sizes[i], 6) + 0.5 * i
        y = torch.from_numpy(rng.integers(0, 3, sizes[i]))
        data.append((x, y))
    return data


def _average_weights(torch, w, weights):
    """FedAvg repos' average_weights: a deepcopy of the first state_dict, then weighted sums."""
    w_avg = copy.deepcopy(w[0])
    for key in w_avg.keys():
        w_avg[key] = w_avg[key] * weights[0]
        for i in range(1, len(w)):
            w_avg[key] += w[i][key] * weights[i]
        w_avg[key] = torch.div(w_avg[key], sum(weights))
    return w_avg


def fedavg_program(torch):
    """Clients as deepcopies of the global model, local SGD epochs, size-weighted averaging of
    every state_dict entry (num_batches_tracked becomes float and is copied back into a long
    buffer by load_state_dict), evaluation of the global model in eval mode."""
    rng = np.random.default_rng(0)
    global_model = _net(torch, rng)
    data = _clients(torch, rng)
    res = {}
    for rnd in range(2):
        local_weights, sizes, losses = [], [], []
        for x, y in data:
            model = copy.deepcopy(global_model)
            model.train()
            opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
            for _ in range(2):
                for xb, yb in zip(x.split(4), y.split(4)):
                    if len(xb) < 2:
                        continue
                    opt.zero_grad()
                    loss = torch.nn.functional.cross_entropy(model(xb), yb)
                    loss.backward()
                    opt.step()
                    losses.append(loss.item())
            local_weights.append(copy.deepcopy(model.state_dict()))
            sizes.append(len(x))
        avg = _average_weights(torch, local_weights, sizes)
        res[f"nbt_dtype_{rnd}"] = [str(avg["bn.num_batches_tracked"].dtype).split(".")[-1]]
        global_model.load_state_dict(avg)
        res[f"losses_{rnd}"] = losses
    res["nbt"] = global_model.bn.num_batches_tracked.item()
    res["nbt_type"] = [str(global_model.bn.num_batches_tracked.dtype).split(".")[-1]]
    res["running_mean"] = global_model.bn.running_mean
    global_model.eval()
    with torch.no_grad():
        res["eval"] = global_model(torch.cat([x for x, _ in data]))
    return res


def fedprox_program(torch):
    """FedProx: local loss + mu/2 * ||w - w_global||^2 over detached clones of the global
    parameters; Adam locally; plain mean via torch.stack over state_dict values."""
    rng = np.random.default_rng(1)
    global_model = _net(torch, rng, bn=False)
    data = _clients(torch, rng)
    mu = 0.5
    res = {}
    for rnd in range(2):
        states = []
        for cid, (x, y) in enumerate(data):
            local = copy.deepcopy(global_model)
            global_params = [p.detach().clone() for p in global_model.parameters()]
            opt = torch.optim.Adam(local.parameters(), lr=0.05)
            for _ in range(3):
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(local(x), y)
                prox = 0.0
                for w, w_t in zip(local.parameters(), global_params):
                    prox += (w - w_t).norm(2) ** 2
                loss = loss + mu / 2 * prox
                loss.backward()
                opt.step()
            res[f"prox_{rnd}_{cid}"] = prox.item()
            states.append(local.state_dict())
        new = {k: torch.stack([s[k] for s in states], 0).mean(0) for k in states[0]}
        global_model.load_state_dict(new)
    res["w"] = [p.detach() for p in global_model.parameters()]
    return res


def scaffold_program(torch):
    """SCAFFOLD: server and client control variates; local gradients corrected in place through
    p.grad.data.add_(c - c_i); option II update of c_i from the model delta; server update."""
    rng = np.random.default_rng(2)
    global_model = _net(torch, rng, bn=False)
    data = _clients(torch, rng)
    lr, K = 0.1, 3
    c_global = [torch.zeros_like(p) for p in global_model.parameters()]
    c_local = [[torch.zeros_like(p) for p in global_model.parameters()] for _ in data]
    res = {}
    for rnd in range(2):
        delta_y, delta_c = [], []
        for cid, (x, y) in enumerate(data):
            model = copy.deepcopy(global_model)
            opt = torch.optim.SGD(model.parameters(), lr=lr)
            for _ in range(K):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                for p, c, ci in zip(model.parameters(), c_global, c_local[cid]):
                    p.grad.data.add_(c - ci)
                opt.step()
            with torch.no_grad():
                dy, dc = [], []
                for p, gp, c, ci in zip(model.parameters(), global_model.parameters(), c_global,
                                        c_local[cid]):
                    new_ci = ci - c + (gp - p) / (K * lr)
                    dy.append(p - gp)
                    dc.append(new_ci - ci)
                    ci.copy_(new_ci)
            delta_y.append(dy)
            delta_c.append(dc)
        with torch.no_grad():
            for j, p in enumerate(global_model.parameters()):
                p.add_(sum(d[j] for d in delta_y) / len(data))
                c_global[j] += sum(d[j] for d in delta_c) / len(data)
    res["w"] = [p.detach() for p in global_model.parameters()]
    res["c"] = c_global
    res["ci"] = c_local[1]
    return res


def fednova_program(torch):
    """FedNova: clients run different numbers of momentum-SGD steps; the server averages
    normalised cumulative updates d_i = (w_g - w_i) / a_i scaled by tau_eff, via
    parameters_to_vector / vector_to_parameters."""
    rng = np.random.default_rng(3)
    global_model = _net(torch, rng, bn=False)
    data = _clients(torch, rng)
    from_vec = torch.nn.utils.vector_to_parameters
    to_vec = torch.nn.utils.parameters_to_vector
    rho, lr, taus = 0.9, 0.05, [2, 5, 3]
    res = {}
    for rnd in range(2):
        g_vec = to_vec(global_model.parameters()).detach()
        norm_updates, a_list, p_list = [], [], []
        n_total = sum(len(x) for x, _ in data)
        for (x, y), tau in zip(data, taus):
            model = copy.deepcopy(global_model)
            opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=rho)
            for _ in range(tau):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
            a_i = (tau - rho * (1 - pow(rho, tau)) / (1 - rho)) / (1 - rho)
            d_i = (g_vec - to_vec(model.parameters()).detach()) / a_i
            norm_updates.append(d_i)
            a_list.append(a_i)
            p_list.append(len(x) / n_total)
        tau_eff = sum(p * a for p, a in zip(p_list, a_list))
        agg = torch.zeros_like(g_vec)
        for p, d in zip(p_list, norm_updates):
            agg.add_(d, alpha=p * tau_eff)
        from_vec(g_vec - agg, global_model.parameters())
        res[f"tau_eff_{rnd}"] = tau_eff
        res[f"agg_norm_{rnd}"] = agg.norm().item()
    res["w"] = to_vec(global_model.parameters()).detach()
    return res


def fedadam_program(torch):
    """FedOpt (FedAdam/FedYogi-style): the server assigns the pseudo-gradient (global - mean of
    client models) to p.grad and steps torch.optim.Adam; a second server keeps a scheduler."""
    rng = np.random.default_rng(4)
    global_model = _net(torch, rng)
    data = _clients(torch, rng)
    server_opt = torch.optim.Adam(global_model.parameters(), lr=0.05, betas=(0.9, 0.99),
                                  eps=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(server_opt, step_size=1, gamma=0.5)
    res = {}
    for rnd in range(3):
        client_states = []
        for x, y in data:
            model = copy.deepcopy(global_model)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for _ in range(2):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
            client_states.append({k: v.detach().clone() for k, v in model.named_parameters()})
        server_opt.zero_grad()
        for name, p in global_model.named_parameters():
            mean = torch.stack([s[name] for s in client_states]).mean(dim=0)
            p.grad = p.data - mean
        server_opt.step()
        sched.step()
        # buffers are averaged plainly
        res[f"lr_{rnd}"] = server_opt.param_groups[0]["lr"]
    state = server_opt.state_dict()
    res["exp_avg_sq"] = state["state"][0]["exp_avg_sq"]
    res["step"] = state["state"][2]["step"]
    res["w"] = [p.detach() for p in global_model.parameters()]
    return res


def secure_aggregation_program(torch):
    """Bonawitz-style secure aggregation: updates quantised to fixed point in int64 mod 2**32,
    pairwise masks from torch.Generator().manual_seed(seed_ij) added by i and subtracted by j,
    the server sums mod 2**32 and the masks cancel; dequantisation back to float."""
    rng = np.random.default_rng(5)
    n, dim, mod, scale = 4, 10, 2 ** 32, 2 ** 16
    updates = [normal(torch, rng, dim) * 0.1 for _ in range(n)]
    seeds = rng.integers(0, 2 ** 31, (n, n))
    masked = []
    for i in range(n):
        q = torch.round(updates[i] * scale).to(torch.int64) % mod
        for j in range(n):
            if i == j:
                continue
            a, b = min(i, j), max(i, j)
            g = torch.Generator().manual_seed(int(seeds[a, b]))
            mask = torch.randint(0, mod, (dim,), generator=g, dtype=torch.int64)
            q = (q + mask) % mod if i < j else (q - mask) % mod
        masked.append(q)
    total = torch.zeros(dim, dtype=torch.int64)
    for q in masked:
        total = torch.remainder(total + q, mod)
    signed = torch.where(total >= mod // 2, total - mod, total)
    agg = signed.to(torch.float32) / scale
    plain_sum = torch.stack(updates).sum(0)
    res = {"agg": agg, "dtype": [str(total.dtype).split(".")[-1]],
           "close": bool(torch.allclose(agg, plain_sum, atol=n / scale)),
           "in_range": bool(((total >= 0) & (total < mod)).all()),
           "masked_differs": bool((masked[0] != torch.round(updates[0] * scale).long() % mod)
                                  .any())}
    # the same seed reproduces the same mask stream on a fresh generator
    g1 = torch.Generator().manual_seed(7)
    g2 = torch.Generator().manual_seed(7)
    res["same_stream"] = bool(torch.equal(torch.randint(0, mod, (5,), generator=g1),
                                          torch.randint(0, mod, (5,), generator=g2)))
    g1.manual_seed(7)
    first = torch.randint(0, mod, (3,), generator=g1)
    state = g1.get_state()
    nxt = torch.randint(0, mod, (3,), generator=g1)
    g1.set_state(state)
    res["restored"] = bool(torch.equal(nxt, torch.randint(0, mod, (3,), generator=g1)))
    res["first_dtype"] = [str(first.dtype).split(".")[-1]]
    return res


def fedbn_fedper_program(torch):
    """FedBN keeps every BatchNorm entry local (filtered by key); FedPer keeps the head local;
    the server averages the rest and clients load with strict=False, reading missing/unexpected
    keys from the returned named tuple."""
    rng = np.random.default_rng(6)
    base = _net(torch, rng)
    data = _clients(torch, rng)
    clients = [copy.deepcopy(base) for _ in data]
    res = {}
    for rnd in range(2):
        for model, (x, y) in zip(clients, data):
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            model.train()
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        shared_keys = [k for k in clients[0].state_dict()
                       if "bn" not in k and not k.startswith("fc2")]
        avg = {}
        for k in shared_keys:
            avg[k] = sum(c.state_dict()[k] for c in clients) / len(clients)
        for model in clients:
            out = model.load_state_dict(avg, strict=False)
        res[f"missing_{rnd}"] = sorted(out.missing_keys)
        res[f"unexpected_{rnd}"] = list(out.unexpected_keys)
    res["bn_means"] = [c.bn.running_mean for c in clients]
    res["heads"] = [c.fc2.weight.detach() for c in clients]
    res["shared_equal"] = bool(torch.equal(clients[0].fc1.weight, clients[2].fc1.weight))
    for c in clients:
        c.eval()
    res["outs"] = [c(data[0][0][:3]).detach() for c in clients]
    return res


def sampling_dp_program(torch):
    """Client sampling with a NumPy rng, per-client update clipping by its L2 norm
    (DP-FedAvg: delta * min(1, C / ||delta||)), server-side Gaussian noise (NumPy draws, sigma*C),
    and the update serialised through torch.save/torch.load of a BytesIO."""
    rng = np.random.default_rng(7)
    global_model = _net(torch, rng, bn=False)
    data = _clients(torch, rng, n=5, sizes=(6, 6, 6, 6, 6))
    to_vec = torch.nn.utils.parameters_to_vector
    C, sigma = 0.3, 0.5
    res = {}
    for rnd in range(2):
        chosen = rng.choice(len(data), 3, replace=False)
        g_vec = to_vec(global_model.parameters()).detach()
        clipped = []
        for cid in chosen:
            x, y = data[cid]
            model = copy.deepcopy(global_model)
            opt = torch.optim.SGD(model.parameters(), lr=0.5)
            for _ in range(2):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
            delta = to_vec(model.parameters()).detach() - g_vec
            buf = io.BytesIO()
            torch.save({"delta": delta, "cid": int(cid)}, buf)
            buf.seek(0)
            msg = torch.load(buf)
            norm = msg["delta"].norm(p=2)
            clipped.append(msg["delta"] * torch.clamp(C / (norm + 1e-12), max=1.0))
            res[f"norm_{rnd}_{cid}"] = norm.item()
        noise = torch.from_numpy(rng.standard_normal(g_vec.numel()).astype(np.float32))
        update = torch.stack(clipped).sum(0) + sigma * C * noise
        update = update / len(chosen)
        torch.nn.utils.vector_to_parameters(g_vec + update, global_model.parameters())
        res[f"chosen_{rnd}"] = [int(c) for c in chosen]
    res["w"] = to_vec(global_model.parameters()).detach()
    return res


def robust_aggregation_program(torch):
    """Byzantine-robust aggregation over flattened client updates (one poisoned): coordinate-wise
    median (torch.median's lower median and its indices), trimmed mean over sort().values, Krum
    scores from torch.cdist and topk(largest=False), geometric median by Weiszfeld iterations,
    kthvalue and nanmedian with a dropped client marked NaN."""
    rng = np.random.default_rng(8)
    n, f_byz = 6, 1
    updates = normal(torch, rng, n, 9) * 0.1
    updates[-1] = 5.0
    med = torch.median(updates, dim=0)
    res = {"median": med.values, "median_idx": med.indices.tolist(),
           "median_all": torch.median(updates).item()}
    srt = updates.sort(dim=0).values
    res["trimmed"] = srt[f_byz:n - f_byz].mean(0)
    d = torch.cdist(updates, updates) ** 2
    scores = d.topk(n - f_byz - 1, dim=1, largest=False).values.sum(1)
    res["krum_scores"] = scores
    res["krum"] = updates[scores.argmin()]
    multi = scores.topk(3, largest=False).indices
    res["multi_krum"] = updates[multi].mean(0)
    z = updates.mean(0)
    for _ in range(5):
        wts = 1.0 / torch.clamp((updates - z).norm(dim=1), min=1e-6)
        z = (wts[:, None] * updates).sum(0) / wts.sum()
    res["geomed"] = z
    res["kth"] = updates.kthvalue(2, dim=0).values
    dropped = updates.clone()
    dropped[1] = float("nan")
    nm = dropped.nanmedian(dim=0)
    res["nanmedian"] = nm.values
    res["nanmedian_idx"] = nm.indices.tolist()
    res["median_nan"] = torch.isnan(dropped.median(dim=0).values).tolist()
    return res


def int32_masking_program(torch):
    """Secure aggregation in int32 arithmetic that wraps mod 2**32: fixed-point updates as int32,
    masks drawn as int64 in [0, 2**32) then reinterpreted with .to(torch.int32) (wrapping) and
    also as bitwise-xor one-time pads; sums wrap; the aggregate is exact once masks cancel."""
    rng = np.random.default_rng(9)
    n, dim, scale = 3, 8, 2 ** 12
    updates = [normal(torch, rng, dim) for _ in range(n)]
    raw = rng.integers(0, 2 ** 32, (n, n, dim))
    q = [torch.round(u * scale).to(torch.int32) for u in updates]
    masked = []
    for i in range(n):
        m = q[i].clone()
        for j in range(n):
            if i != j:
                a, b = min(i, j), max(i, j)
                mask = torch.from_numpy(raw[a, b]).to(torch.int32)
                m = m + mask if i < j else m - mask
        masked.append(m)
    total = masked[0] + masked[1] + masked[2]
    res = {"total": total.tolist(), "dtype": [str(total.dtype).split(".")[-1]],
           "agg": total.float() / scale,
           "wrapped": torch.from_numpy(raw[0, 1]).to(torch.int32).tolist(),
           "sum_int32": torch.stack(masked).sum(0, dtype=torch.int32).tolist(),
           "sum_default": [str(torch.stack(masked).sum(0).dtype).split(".")[-1]]}
    pad = torch.from_numpy(raw[0, 2]).to(torch.int32)
    enc = q[0] ^ pad
    res["xor_roundtrip"] = torch.equal(enc ^ pad, q[0])
    res["bits"] = (enc.view(torch.uint8)[:8]).tolist()
    res["shift"] = ((q[0] << 4) >> 4).tolist()
    return res


def state_dict_plumbing_program(torch):
    """Server-side state_dict plumbing in FL codebases: keep_vars=True to reach Parameters,
    averaging integer buffers with true_divide then round/long, load_state_dict(assign=True)
    swapping in fresh tensors, named_buffers/persistent flags, and delta compression by topk on
    the flattened update with scatter back into a zeros vector."""
    rng = np.random.default_rng(14)
    models = [_net(torch, rng) for _ in range(3)]
    for i, m in enumerate(models):
        m.bn.num_batches_tracked += i + 1
        m.register_buffer("rounds_seen", torch.tensor(i), persistent=False)
    sd = models[0].state_dict(keep_vars=True)
    res = {"is_param": [isinstance(v, torch.nn.Parameter) for v in sd.values()],
           "keys": list(sd), "buffers": [k for k, _ in models[0].named_buffers()]}
    avg = {}
    for k in sd:
        vals = [m.state_dict()[k] for m in models]
        if vals[0].dtype == torch.long:
            avg[k] = torch.true_divide(sum(vals), len(vals)).round().long()
        else:
            avg[k] = sum(vals) / len(vals)
    target = _net(torch, np.random.default_rng(15))
    w_before = target.fc1.weight
    target.load_state_dict(avg, assign=True)
    res["assigned_new"] = target.fc1.weight is not w_before
    res["assigned_param"] = isinstance(target.fc1.weight, torch.nn.Parameter)
    res["nbt"] = target.bn.num_batches_tracked.item()
    res["requires_grad"] = target.fc1.weight.requires_grad
    vec = torch.nn.utils.parameters_to_vector(target.parameters())
    base = torch.nn.utils.parameters_to_vector(models[0].parameters()).detach()
    delta = vec.detach() - base
    k = 10
    top = delta.abs().topk(k)
    sparse = torch.zeros_like(delta).scatter_(0, top.indices, delta[top.indices])
    res["sparse"] = sparse
    res["sparse_nnz"] = int((sparse != 0).sum())
    res["residual"] = (delta - sparse).norm().item()
    return res


PROGRAMS = [fedavg_program, fedprox_program, scaffold_program, fednova_program,
            fedadam_program, secure_aggregation_program, fedbn_fedper_program,
            sampling_dp_program, robust_aggregation_program, int32_masking_program,
            state_dict_plumbing_program]

# several rounds of local Adam/momentum steps accumulate float32 reassociation noise
TOLERANCES = {p.__name__: (1e-4, 1e-5) for p in PROGRAMS}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
