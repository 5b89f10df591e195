"""LLM pretraining mechanics, written the way nanoGPT, litgpt, torchtitan and OLMo write their
training loops by hand, run once with `torch` bound to ember and once to PyTorch from the same
NumPy weights and data: nanoGPT's tied lm_head (state_dict keys, optimizer dedupe through
named_parameters, decay/no-decay groups by ndim), gradient accumulation with the loss divided
by the micro-steps, clip_grad_norm_(foreach=True), warmup+cosine LambdaLR; muP-style per-group
lr multipliers and an output-logit multiplier, z-loss and tanh soft-capping; sequence packing
with block-diagonal causal document masks from cu_seqlens (cumsum/searchsorted, position ids
resetting per document) under RoPE with NTK and YaRN scaling; ZeRO-1 emulated over fake ranks
(flattened grads, sharded AdamW states, all-gather by cat) against the unsharded optimizer;
and loss-spike skipping with error_if_nonfinite. Checkpointing and resume are in _ckpt."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _gpt(torch, vocab=17, d=16, heads=2, layers=2, block=8, softcap=None, mult=1.0):
    """A nanoGPT-style decoder with a tied lm_head; `softcap` tanh-caps the logits."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(d)
            self.c_attn = nn.Linear(d, 3 * d)
            self.c_proj = nn.Linear(d, d)
            self.ln_2 = nn.LayerNorm(d, bias=False)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"),
                                     nn.Linear(4 * d, d))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            q, k, v = (t.view(B, T, heads, C // heads).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(vocab, d), wpe=nn.Embedding(block, d),
                h=nn.ModuleList([Block() for _ in range(layers)]), ln_f=nn.LayerNorm(d)))
            self.lm_head = nn.Linear(d, vocab, bias=False)
            self.transformer.wte.weight = self.lm_head.weight

        def forward(self, idx, targets=None):
            pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
            x = self.transformer.wte(idx) + self.transformer.wpe(pos)
            for blk in self.transformer.h:
                x = blk(x)
            logits = self.lm_head(self.transformer.ln_f(x)) * mult
            if softcap is not None:
                logits = softcap * torch.tanh(logits / softcap)
            if targets is None:
                return logits, None
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)
            return logits, loss
    return GPT()


def nanogpt_program(torch):
    """nanoGPT's configure_optimizers, grad accumulation, clipping and lr schedule."""
    rng = np.random.default_rng(2901)
    model = _gpt(torch)
    fill_(torch, model, rng, 0.2)
    res = {"n_params": sum(p.numel() for p in model.parameters()),
           "keys": list(model.state_dict().keys()),
           "tied": model.lm_head.weight is model.transformer.wte.weight,
           "same_storage": model.state_dict()["lm_head.weight"].data_ptr()
           == model.state_dict()["transformer.wte.weight"].data_ptr()}
    param_dict = {pn: p for pn, p in model.named_parameters() if p.requires_grad}
    res["named"] = list(param_dict)
    decay = [p for n, p in param_dict.items() if p.dim() >= 2]
    nodecay = [p for n, p in param_dict.items() if p.dim() < 2]
    res["groups"] = [len(decay), len(nodecay), sum(p.numel() for p in decay)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": nodecay, "weight_decay": 0.0}],
                            lr=3e-3, betas=(0.9, 0.95), eps=1e-8, foreach=True)
    warmup, total, min_ratio = 2, 8, 0.1

    def lr_lambda(it):
        if it < warmup:
            return (it + 1) / (warmup + 1)
        ratio = (it - warmup) / (total - warmup)
        return min_ratio + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (1 - min_ratio)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    data = rng.integers(0, 17, size=(200,))
    micro, losses, norms, lrs = 3, [], [], []
    for step in range(5):
        for ms in range(micro):
            ix = rng.integers(0, len(data) - 9, size=(2,))
            x = torch.from_numpy(np.stack([data[i:i + 8] for i in ix]).astype(np.int64))
            y = torch.from_numpy(np.stack([data[i + 1:i + 9] for i in ix]).astype(np.int64))
            if ms == 0:
                y[0, :3] = -1
            _, loss = model(x, y)
            loss = loss / micro
            loss.backward()
        losses.append(loss.item() * micro)
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True))
        opt.step()
        sched.step()
        lrs.append([g["lr"] for g in opt.param_groups])
        opt.zero_grad(set_to_none=True)
    res.update(losses=losses, norms=norms, lrs=lrs, last_lr=sched.get_last_lr(),
               wte=model.transformer.wte.weight.detach(),
               state_len=len(opt.state), sd_keys=list(opt.state_dict()["state"].keys()),
               pg=[str([g["params"] for g in opt.state_dict()["param_groups"]])])
    with torch.no_grad():
        logits, _ = model(torch.from_numpy(data[None, :8].astype(np.int64)))
    res["logits"] = logits
    sd = model.state_dict()
    fresh = _gpt(torch)
    res["load"] = [str(fresh.load_state_dict(sd))]
    res["tied_after_load"] = [fresh.lm_head.weight is fresh.transformer.wte.weight,
                              torch.equal(fresh.lm_head.weight, model.lm_head.weight)]
    return res


def mup_zloss_program(torch):
    """muP-style per-group lr and init multipliers, z-loss, tanh soft-capped logits."""
    rng = np.random.default_rng(2902)
    width, base = 32, 16
    m = width / base
    model = _gpt(torch, d=width, heads=4, layers=1, softcap=5.0, mult=1.0 / m)
    fill_(torch, model, rng, 0.2)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("c_proj.weight") or n.endswith("mlp.2.weight"):
                p.mul_(1 / math.sqrt(2 * 1))
            if p.dim() >= 2 and "wpe" not in n and "wte" not in n:
                p.div_(math.sqrt(m))
    hidden, vec, emb = [], [], []
    for n, p in model.named_parameters():
        (emb if "wte" in n or "wpe" in n else hidden if p.ndim == 2 else vec).append(p)
    lr = 1e-2
    opt = torch.optim.Adam([{"params": emb, "lr": lr, "name": "emb"},
                            {"params": hidden, "lr": lr / m, "name": "hidden"},
                            {"params": vec, "lr": lr, "weight_decay": 0.0, "name": "vec"}],
                           lr=lr, eps=1e-5)
    idx = torch.from_numpy(rng.integers(0, 17, size=(3, 8)).astype(np.int64))
    tgt = torch.from_numpy(rng.integers(0, 17, size=(3, 8)).astype(np.int64))
    tgt[1, 5:] = -100
    res = {"names": [g["name"] for g in opt.param_groups],
           "lrs": [g["lr"] for g in opt.param_groups]}
    out = []
    for _ in range(3):
        logits, _ = model(idx)
        flat = logits.float().view(-1, logits.size(-1))
        mask = tgt.view(-1) != -100
        ce = torch.nn.functional.cross_entropy(flat, tgt.view(-1), reduction="sum")
        ce = ce / mask.sum()
        lse = torch.logsumexp(flat, dim=-1)
        z = 1e-4 * (lse[mask] ** 2).mean()
        loss = ce + z
        opt.zero_grad()
        loss.backward()
        out.append([ce.detach(), z.detach(), logits.abs().max().detach()])
        opt.step()
    res["out"] = out
    res["capped"] = bool((logits.abs() < 5.0).all())
    res["params"] = [p.detach().clone() for p in model.parameters()]
    res["exp_avg_sq"] = [opt.state[p]["exp_avg_sq"] for p in hidden]
    res["lse_grad"] = torch.autograd.grad(
        torch.logsumexp(5.0 * torch.tanh(flat.detach().requires_grad_() / 5.0), -1).sum(),
        [model.lm_head.weight], allow_unused=True)
    return res


def _rope(torch, pos, dim, base=10000.0, ntk=1.0, yarn=None):
    """cos/sin tables; NTK scales the base, YaRN ramps between interpolated and raw freqs."""
    if ntk != 1.0:
        base = base * ntk ** (dim / (dim - 2))
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    mscale = 1.0
    if yarn is not None:
        factor, orig, beta_fast, beta_slow = yarn

        def corr(rot):
            return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))
        low = max(math.floor(corr(beta_fast)), 0)
        high = min(math.ceil(corr(beta_slow)), dim - 1)
        ramp = (torch.arange(dim // 2, dtype=torch.float32) - low) / max(high - low, 0.001)
        ramp = torch.clamp(ramp, 0, 1)
        extrap = 1 - ramp
        inv = (inv / factor) * (1 - extrap) + inv * extrap
        mscale = 0.1 * math.log(factor) + 1.0
    freqs = torch.outer(pos.float(), inv) if pos.dim() == 1 else pos.float()[..., None] * inv
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * mscale, emb.sin() * mscale


def _rotate(x, cos, sin, torch):
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def packing_program(torch):
    """Packed documents: cu_seqlens, block-diagonal causal masks, per-document positions."""
    F = torch.nn.functional
    rng = np.random.default_rng(2903)
    lens = torch.tensor([3, 5, 2, 6])
    cu = torch.nn.functional.pad(torch.cumsum(lens, 0, dtype=torch.int32), (1, 0))
    T = int(cu[-1])
    tok = torch.arange(T)
    doc = torch.searchsorted(cu[1:].long(), tok, right=True)
    pos = tok - cu[:-1].long()[doc]
    doc2 = torch.repeat_interleave(torch.arange(len(lens)), lens)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    mask = (doc[:, None] == doc[None, :]) & causal
    res = {"cu": cu, "doc": doc, "pos": pos, "same_doc": torch.equal(doc, doc2),
           "max_len": int(lens.max()), "mask_sum": mask.sum()}
    H, D = 2, 8
    x = normal(torch, rng, 1, T, H * D)
    wq, wk, wv = (normal(torch, rng, H * D, H * D).mul_(0.3).requires_grad_() for _ in range(3))
    for i, kw in enumerate( ({}, {"ntk": 4.0}, {"yarn": (4.0, 8, 32, 1)})):
        cos, sin = _rope(torch, pos, D, **kw)
        q = (x @ wq).view(1, T, H, D).transpose(1, 2)
        k = (x @ wk).view(1, T, H, D).transpose(1, 2)
        v = (x @ wv).view(1, T, H, D).transpose(1, 2)
        q, k = _rotate(q, cos, sin, torch), _rotate(k, cos, sin, torch)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        ref = []
        for s, e in zip(cu[:-1].tolist(), cu[1:].tolist()):
            ref.append(F.scaled_dot_product_attention(q[:, :, s:e], k[:, :, s:e],
                                                      v[:, :, s:e], is_causal=True))
        ref = torch.cat(ref, dim=2)
        bias = torch.zeros(T, T).masked_fill_(~mask, float("-inf"))
        manual = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D) + bias, -1) @ v
        loss = (o ** 2).sum()
        grads = torch.autograd.grad(loss, [wq, wk, wv])
        res[f"out{i}"] = [o.detach(), *grads, cos[:4], sin[-1]]
        res[f"agree{i}"] = [bool((o - ref).abs().max() < 1e-5),
                            bool((o - manual).abs().max() < 1e-5)]
    # labels: next token inside each document, -100 across boundaries
    labels = torch.roll(tok, -1)
    last = cu[1:].long() - 1
    labels[last] = -100
    res["labels"] = labels
    # position ids for a batch of packed rows via a cumsum reset trick
    starts = torch.zeros(T, dtype=torch.long).index_fill_(0, cu[:-1].long(), 1)
    seg = torch.cumsum(starts, 0) - 1
    first = torch.zeros(len(lens), dtype=torch.long).scatter_reduce_(
        0, seg, tok, reduce="amin", include_self=False)
    res["pos2"] = tok - first[seg]
    return res


def zero1_program(torch):
    """ZeRO-1 over 3 fake ranks: flat grads, sharded AdamW states, all-gather by cat."""
    nn = torch.nn
    rng = np.random.default_rng(2904)
    ranks = 3
    model = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.LayerNorm(7), nn.Linear(7, 3))
    ref = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.LayerNorm(7), nn.Linear(7, 3))
    fill_(torch, model, rng, 0.5)
    ref.load_state_dict(model.state_dict())
    params = list(model.parameters())
    numel = sum(p.numel() for p in params)
    padded = math.ceil(numel / ranks) * ranks
    shard = padded // ranks
    flat = torch.zeros(padded)
    with torch.no_grad():
        flat[:numel].copy_(torch.nn.utils.parameters_to_vector(params))
    shards = [flat[r * shard:(r + 1) * shard].clone().requires_grad_() for r in range(ranks)]
    opts = [torch.optim.AdamW([s], lr=1e-2, weight_decay=0.05) for s in shards]
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=0.05)
    res = {"shard": shard, "padded": padded}
    for step in range(3):
        xs = [normal(torch, rng, 4, 5) for _ in range(ranks)]
        ys = [normal(torch, rng, 4, 3) for _ in range(ranks)]
        grads = []
        for r in range(ranks):
            model.zero_grad()
            nn.functional.mse_loss(model(xs[r]), ys[r]).backward()
            g = torch.cat([p.grad.reshape(-1) for p in params])
            grads.append(nn.functional.pad(g, (0, padded - numel)))
        # reduce-scatter emulated: mean over ranks, each rank keeps its slice
        red = torch.stack(grads).mean(0)
        for r in range(ranks):
            shards[r].grad = red[r * shard:(r + 1) * shard].clone()
            opts[r].step()
        gathered = torch.cat([s.detach() for s in shards])[:numel]
        torch.nn.utils.vector_to_parameters(gathered, params)
        ref_opt.zero_grad()
        loss = sum(nn.functional.mse_loss(ref(x), y) for x, y in zip(xs, ys)) / ranks
        loss.backward()
        ref_opt.step()
    res["params"] = [p.detach() for p in model.parameters()]
    res["match"] = [torch.allclose(a, b, atol=1e-6) for a, b in
                    zip(model.parameters(), ref.parameters())]
    res["state_sizes"] = [o.state[s]["exp_avg"].numel() for o, s in zip(opts, shards)]
    res["steps"] = [o.state[s]["step"] for o, s in zip(opts, shards)]
    return res


def spike_skip_program(torch):
    """Skip steps whose loss spikes or whose grad norm is non-finite; count skips."""
    nn = torch.nn
    rng = np.random.default_rng(2905)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    fill_(torch, model, rng, 0.5)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    hist, skipped, errors, norms = [], [], [], []
    for step in range(6):
        x, y = normal(torch, rng, 8, 4), normal(torch, rng, 8, 1)
        if step == 3:
            y = y * 100.0
        if step == 4:
            x[0, 0] = float("inf")
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        mean = sum(hist[-3:]) / max(len(hist[-3:]), 1)
        if hist and loss.item() > 6 * mean:
            skipped.append(step)
            continue
        try:
            norm = nn.utils.clip_grad_norm_(model.parameters(), 0.5, error_if_nonfinite=True)
        except RuntimeError as e:
            errors.append(str(e).split(".")[0])
            skipped.append(step)
            continue
        norms.append(norm)
        if not torch.isfinite(norm):
            skipped.append(step)
            continue
        hist.append(loss.item())
        opt.step()
    total = nn.utils.get_total_norm([p.grad for p in model.parameters()], 2.0)
    res = {"hist": hist, "skipped": skipped, "errors": errors, "norms": norms,
           "params": [p.detach() for p in model.parameters()], "total": total,
           "momentum": [opt.state[p]["momentum_buffer"] for p in model.parameters()]}
    g = [torch.tensor([3.0, 4.0]), torch.tensor([float("nan")])]
    res["nan_norm"] = nn.utils.get_total_norm(g, 2.0)
    res["inf_norm"] = nn.utils.get_total_norm([torch.tensor([1.0, -7.0])], float("inf"))
    return res


PROGRAMS = [nanogpt_program, mup_zloss_program, packing_program, zero1_program,
            spike_skip_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # projection gradients of size ~7 summed over 16 tokens and 2 heads: float32
        # accumulation order leaves ~1e-6 of the largest entry on the small ones
        "packing_program": (1e-5, 1e-5),
    })
