"""More round-31 generative/retrieval programs, the corners their repositories lean on, run once
with `torch` bound to ember and once to PyTorch from the same NumPy weights: GradCache for DPR
(representations under no_grad, gradients of the detached representations, RNG state saved and
restored so dropout replays, the surrogate dot-product backward), a learned optimiser written
with torch.func (functional_call over a parameter dict, create_graph meta-gradients, an
Optimizer subclass applying the learned update), an MDLM-style denoiser under CPU bfloat16
autocast with rotary SDPA, sparse-COO graphs pooled with to_dense_batch written out, and
GFlowNet sampling through Categorical.sample under manual_seed (shapes, masks, replay)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def gradcache_program(torch):
    """GradCache (Gao et al.): encode sub-batches without grad while recording the CPU RNG
    state, compute the contrastive loss on detached representations that require grad, take
    their gradients, then replay each sub-batch with the saved RNG state and backpropagate
    torch.dot(reps, cached_grads); the parameter gradients must equal a full-batch step's."""
    rng = np.random.default_rng(20)
    d, B, chunk = 12, 6, 2
    F = torch.nn.functional

    class Enc(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = torch.nn.Linear(d, d)
            self.drop = torch.nn.Dropout(0.3)
            self.l2 = torch.nn.Linear(d, d)

        def forward(self, x):
            return self.l2(self.drop(torch.tanh(self.l1(x))))

    q_enc, p_enc = Enc(), Enc()
    fill_(torch, q_enc, rng, 0.4)
    fill_(torch, p_enc, rng, 0.4)
    qs, ps = normal(torch, rng, B, d), normal(torch, rng, B, d)

    def contrastive(q, p):
        scores = q @ p.T / 0.5
        return F.cross_entropy(scores, torch.arange(q.size(0)))

    torch.manual_seed(7)
    # pass 1: representations without grad, RNG states recorded per chunk
    states, q_reps, p_reps = [], [], []
    with torch.no_grad():
        for qc, pc in zip(qs.split(chunk), ps.split(chunk)):
            states.append(torch.get_rng_state())
            q_reps.append(q_enc(qc))
            p_reps.append(p_enc(pc))
    q_all = torch.cat(q_reps).detach().requires_grad_()
    p_all = torch.cat(p_reps).detach().requires_grad_()
    loss = contrastive(q_all, p_all)
    loss.backward()
    q_grads, p_grads = q_all.grad.split(chunk), p_all.grad.split(chunk)
    # pass 2: replay with the same dropout masks, surrogate backward
    for state, qc, pc, gq, gp in zip(states, qs.split(chunk), ps.split(chunk), q_grads, p_grads):
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(state)
            rq = q_enc(qc)
            rp = p_enc(pc)
        surrogate = torch.dot(rq.flatten(), gq.flatten()) + torch.dot(rp.flatten(), gp.flatten())
        surrogate.backward()
    cached = [p.grad.clone() for p in list(q_enc.parameters()) + list(p_enc.parameters())]
    # reference: the full batch with the same masks, chunk by chunk
    for p in list(q_enc.parameters()) + list(p_enc.parameters()):
        p.grad = None
    q_full, p_full = [], []
    for state, qc, pc in zip(states, qs.split(chunk), ps.split(chunk)):
        torch.set_rng_state(state)
        q_full.append(q_enc(qc))
        p_full.append(p_enc(pc))
    full = contrastive(torch.cat(q_full), torch.cat(p_full))
    full.backward()
    direct = [p.grad for p in list(q_enc.parameters()) + list(p_enc.parameters())]
    same = [bool(torch.allclose(a, b, rtol=1e-4, atol=1e-6)) for a, b in zip(cached, direct)]
    # dropout masks are ember's own stream: compare structure, not values
    return {"loss_equal": [abs(loss.item() - full.item()) < 1e-5], "grads_equal": same,
            "rep_shape": list(q_all.shape), "n_states": [len(states)],
            "state_dtype": [str(states[0].dtype).split(".")[-1]],
            "no_dropout_eval": _eval_reps(torch, q_enc, qs)}


def _eval_reps(torch, enc, x):
    enc.eval()
    with torch.no_grad():
        out = enc(x)
    enc.train()
    return out


def l2o_func_program(torch):
    """A learned optimiser over a small MLP written with torch.func: the optimizee's parameters
    are a dict passed to functional_call, the learned update (an MLP on log|g| and sign g) is
    applied out of place so that the meta-loss differentiates through three inner steps with
    create_graph=True; then an Optimizer subclass applies the trained rule in place."""
    rng = np.random.default_rng(21)
    F = torch.nn.functional
    net = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1))
    fill_(torch, net, rng, 0.5)
    rule = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    fill_(torch, rule, rng, 0.3)
    meta_opt = torch.optim.Adam(rule.parameters(), lr=1e-2)
    X, Y = normal(torch, rng, 16, 3), normal(torch, rng, 16, 1)

    def loss_fn(params):
        return F.mse_loss(torch.func.functional_call(net, params, (X,)), Y)

    def update(g):
        feats = torch.stack([torch.log(g.abs() + 1e-8) / 10, torch.sign(g)], dim=-1)
        return 0.05 * rule(feats).squeeze(-1)

    res = {"meta": []}
    init = {k: v.detach().clone() for k, v in net.named_parameters()}
    for _ in range(3):
        params = {k: v.clone().requires_grad_() for k, v in init.items()}
        meta = 0.0
        for _ in range(3):
            loss = loss_fn(params)
            grads = torch.autograd.grad(loss, list(params.values()), create_graph=True)
            params = {k: p - update(g) for (k, p), g in zip(params.items(), grads)}
            meta = meta + loss_fn(params)
        meta_opt.zero_grad()
        meta.backward()
        meta_opt.step()
        res["meta"].append(meta.item())
    res["rule_w"] = rule[0].weight
    res["rule_grad"] = rule[2].weight.grad

    class Learned(torch.optim.Optimizer):
        def __init__(self, params, scale=1.0):
            super().__init__(params, dict(scale=scale))

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    state["step"] = state.get("step", 0) + 1
                    p.sub_(group["scale"] * update(p.grad))
            return loss

    opt = Learned(net.parameters(), scale=2.0)
    losses = []
    for _ in range(3):
        def closure():
            opt.zero_grad()
            out = F.mse_loss(net(X), Y)
            out.backward()
            return out
        losses.append(opt.step(closure).item())
    res["inner"] = losses
    res["net_w"] = net[0].weight
    res["steps"] = [opt.state[p]["step"] for p in net.parameters()]
    res["state_keys"] = sorted(opt.state_dict()["param_groups"][0].keys())
    return res


def mdlm_bf16_program(torch):
    """An MDLM/SEDD DiT block under CPU bfloat16 autocast: rotary embeddings applied in float32,
    SDPA on bfloat16 q/k/v, adaLN modulation from the noise level, the SUBS log-probabilities
    taken in float32 outside autocast, and the ELBO-weighted loss trained with AdamW."""
    rng = np.random.default_rng(22)
    V, d, h, B, L = 9, 16, 2, 2, 6
    mask_index = V - 1
    F = torch.nn.functional

    def rotary(x, cos, sin):
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(V, d)
            self.qkv = torch.nn.Linear(d, 3 * d, bias=False)
            self.o = torch.nn.Linear(d, d, bias=False)
            self.adaLN = torch.nn.Linear(d, 2 * d)
            self.sigma_map = torch.nn.Linear(1, d)
            self.norm = torch.nn.LayerNorm(d, elementwise_affine=False)
            self.out = torch.nn.Linear(d, V)

        def forward(self, x, sigma):
            c = F.silu(self.sigma_map(sigma[:, None]))
            shift, scale = self.adaLN(c)[:, None].chunk(2, dim=-1)
            hdn = self.emb(x)
            z = self.norm(hdn) * (1 + scale) + shift
            q, k, v = self.qkv(z).view(B, L, 3, h, d // h).permute(2, 0, 3, 1, 4).unbind(0)
            pos = torch.arange(L, dtype=torch.float32)
            inv = 1.0 / (10000 ** (torch.arange(0, d // h, 2).float() / (d // h)))
            ang = torch.outer(pos, inv)
            cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
            with torch.autocast("cpu", enabled=False):
                q, k = rotary(q.float(), cos, sin), rotary(k.float(), cos, sin)
            a = F.scaled_dot_product_attention(q.to(v.dtype), k.to(v.dtype), v)
            hdn = hdn + self.o(a.transpose(1, 2).reshape(B, L, d))
            return self.out(self.norm(hdn))

    model = Block()
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    res = {"losses": [], "dtypes": []}
    for step in range(2):
        x0 = torch.from_numpy(rng.integers(0, V - 1, (B, L)))
        t = torch.from_numpy(rng.random(B).astype(np.float32)) * 0.9 + 0.05
        sigma = -torch.log1p(-(1 - 1e-3) * t)
        dsigma = (1 - 1e-3) / (1 - (1 - 1e-3) * t)
        u = torch.from_numpy(rng.random((B, L)).astype(np.float32))
        xt = torch.where(u < (1 - torch.exp(-sigma))[:, None], mask_index, x0)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(xt, sigma)
        res["dtypes"].append(str(logits.dtype).split(".")[-1])
        logits = logits.float()
        logits[..., mask_index] = -1e6
        logp = logits.log_softmax(-1)
        logp = torch.where((xt != mask_index)[..., None],
                           F.one_hot(xt, V).float().log().clamp(min=-1e6), logp)
        nll = -logp.gather(-1, x0[..., None]).squeeze(-1)
        loss = (nll * (dsigma / torch.expm1(sigma))[:, None]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["out_w"] = model.out.weight
    res["qkv_grad_dtype"] = [str(model.qkv.weight.grad.dtype).split(".")[-1]]
    return res


def sparse_pool_program(torch):
    """Graph pooling on sparse-COO adjacency: to_dense_batch and to_dense_adj written as
    torch_geometric writes them (cumsum offsets, new_full fill, index assignment), a sparse.mm
    message pass with its gradient, DiffPool on the dense batch, and the mincut-style
    orthogonality loss with torch.linalg.matrix_norm."""
    rng = np.random.default_rng(23)
    F = torch.nn.functional
    sizes = [3, 5, 2]
    G, Fin, C = len(sizes), 4, 2
    batch = torch.repeat_interleave(torch.arange(G), torch.tensor(sizes))
    N = int(batch.numel())
    src, dst = [], []
    start = 0
    for n in sizes:
        for i in range(n - 1):
            src += [start + i, start + i + 1]
            dst += [start + i + 1, start + i]
        start += n
    ei = torch.tensor([src, dst])
    x = normal(torch, rng, N, Fin)
    lin = torch.nn.Linear(Fin, Fin)
    pool = torch.nn.Linear(Fin, C)
    mods = torch.nn.ModuleList([lin, pool])
    fill_(torch, mods, rng, 0.4)
    opt = torch.optim.Adam(mods.parameters(), lr=1e-2)

    def to_dense_batch(h, batch):
        num = torch.zeros(G, dtype=torch.long).scatter_add_(0, batch, torch.ones_like(batch))
        cum = torch.cat([batch.new_zeros(1), num.cumsum(0)])
        max_n = int(num.max())
        idx = torch.arange(batch.size(0)) - cum[batch] + batch * max_n
        out = h.new_full((G * max_n, h.size(-1)), 0.0)
        out[idx] = h
        mask = torch.zeros(G * max_n, dtype=torch.bool)
        mask[idx] = True
        return out.view(G, max_n, -1), mask.view(G, max_n), cum, max_n

    def to_dense_adj(ei, batch, cum, max_n):
        b = batch[ei[0]]
        r, c = ei[0] - cum[batch][ei[0]], ei[1] - cum[batch][ei[1]]
        adj = torch.zeros(G, max_n, max_n)
        flat = adj.view(-1)
        flat.index_put_((b * max_n * max_n + r * max_n + c,), torch.ones(ei.size(1)),
                        accumulate=True)
        return adj

    A = torch.sparse_coo_tensor(ei, torch.ones(ei.size(1)), (N, N)).coalesce()
    deg = torch.sparse.sum(A, dim=1).to_dense()
    res = {"losses": [], "deg": deg}
    for _ in range(3):
        h = F.relu(lin(torch.sparse.mm(A, x) / deg[:, None].clamp(min=1) + x))
        hd, mask, cum, max_n = to_dense_batch(h, batch)
        adj = to_dense_adj(ei, batch, cum, max_n)
        s = pool(hd).softmax(-1) * mask[..., None]
        out = s.transpose(1, 2) @ hd
        out_adj = s.transpose(1, 2) @ adj @ s
        ss = s.transpose(1, 2) @ s
        i_s = torch.eye(C)
        ortho = torch.linalg.matrix_norm(ss / torch.linalg.matrix_norm(ss, keepdim=True)
                                         - i_s / torch.linalg.matrix_norm(i_s), dim=(-2, -1))
        mincut_num = torch.einsum("bii->b", out_adj)
        d_flat = torch.einsum("ijk->ij", adj)
        mincut_den = torch.einsum("bii->b", s.transpose(1, 2) @ torch.diag_embed(d_flat) @ s)
        mincut = -(mincut_num / mincut_den.clamp(min=1e-9)).mean()
        loss = ortho.mean() + mincut + out.pow(2).mean() * 0.1
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["mask"], res["adj"], res["out_adj"] = mask, adj, out_adj
    res["pool_grad"] = pool.weight.grad
    return res


def gfn_sample_program(torch):
    """GFlowNet rollouts sampled with Categorical.sample under manual_seed (torch's RNG: shapes,
    validity under -inf masks and reproducibility are compared, not values), the log-probs of
    the sampled actions, and a terminal-state replay buffer deduplicated with unique(dim=0)."""
    H, ndim, B = 4, 3, 16
    F = torch.nn.functional
    w = torch.from_numpy(np.random.default_rng(24).standard_normal(
        (H * ndim, ndim + 1)).astype(np.float32))

    def rollout(seed):
        torch.manual_seed(seed)
        s = torch.zeros(B, ndim, dtype=torch.long)
        done = torch.zeros(B, dtype=torch.bool)
        logps, steps = torch.zeros(B), 0
        valid = True
        while not done.all():
            logits = F.one_hot(s, H).flatten(1).float() @ w
            invalid = torch.cat([s == H - 1, torch.zeros(B, 1, dtype=torch.bool)], 1)
            logits = logits.masked_fill(invalid, -float("inf"))
            dist = torch.distributions.Categorical(logits=logits)
            a = dist.sample()
            valid = valid and not bool(invalid.gather(1, a[:, None]).any())
            logps = logps + torch.where(done, 0.0, dist.log_prob(a))
            move = (a < ndim) & ~done
            s = s + F.one_hot(a.clamp(max=ndim - 1), ndim) * move[:, None]
            done |= a == ndim
            steps += 1
        return s, logps, valid, steps

    s1, lp1, ok1, _ = rollout(0)
    s2, lp2, ok2, _ = rollout(0)
    uniq, counts = torch.unique(torch.cat([s1, s2]), dim=0, return_counts=True)
    return {"reproducible": [torch.equal(s1, s2), torch.equal(lp1, lp2)],
            "valid": [ok1, ok2], "in_range": [bool((s1 >= 0).all() and (s1 < H).all())],
            "finite": [bool(torch.isfinite(lp1).all())], "dtype": [str(s1.dtype).split(".")[-1]],
            "counts_even": [bool((counts % 2 == 0).all())], "uniq_cols": [uniq.size(1)],
            "sample_shape": list(torch.distributions.Categorical(
                logits=torch.zeros(2, 3)).sample((5,)).shape)}


PROGRAMS = [gradcache_program, l2o_func_program, mdlm_bf16_program, sparse_pool_program,
            gfn_sample_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
