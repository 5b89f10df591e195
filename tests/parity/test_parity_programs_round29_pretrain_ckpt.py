"""LLM pretraining mechanics, second part: activation checkpointing as torchtitan and litgpt
apply it (torch.utils.checkpoint with use_reentrant=False and True around decoder blocks,
checkpoint_sequential over an nn.Sequential, preserve_rng_state with dropout inside the
recomputed region, checked against the uncheckpointed run under the same seed), CPU mixed
precision (autocast bfloat16 and float16 with GradScaler("cpu"): unscale_, clipping, inf
skipping, scale growth and backoff), torch.compile(model) as a passthrough, and an OLMo-style
mid-run checkpoint: model + optimizer + LambdaLR scheduler + RNG state saved to a buffer,
resumed in a fresh model, and continued to the same parameters as the uninterrupted run;
and a litgpt/OLMo-style block (RMSNorm, SwiGLU, RoPE) trained under bfloat16 autocast with
chunked cross-entropy and z-loss."""

import io
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _blocks(torch, d=12, n=3, p=0.0):
    """Pre-norm residual MLP blocks, as a decoder's feed-forward half."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.RMSNorm(d, eps=1e-6)
            self.up = nn.Linear(d, 2 * d)
            self.down = nn.Linear(2 * d, d, bias=False)
            self.drop = nn.Dropout(p)

        def forward(self, x):
            return x + self.drop(self.down(torch.nn.functional.silu(self.up(self.norm(x)))))
    return nn.Sequential(*[Block() for _ in range(n)])


def checkpoint_program(torch):
    """Activation checkpointing (both modes, sequential) gives the plain run's gradients."""
    cp = torch.utils.checkpoint
    rng = np.random.default_rng(2911)
    model = _blocks(torch)
    fill_(torch, model, rng, 0.3)
    x = normal(torch, rng, 2, 5, 12)
    res = {}

    def run(mode):
        model.zero_grad()
        h = x.clone().requires_grad_()
        if mode == "plain":
            out = model(h)
        elif mode == "seq":
            out = cp.checkpoint_sequential(model, 2, h, use_reentrant=False)
        else:
            out = h
            for blk in model:
                out = cp.checkpoint(blk, out, use_reentrant=(mode == "reentrant"))
        (out.pow(2).mean() + out[:, -1].sum()).backward()
        return [out.detach(), h.grad] + [p.grad.clone() for p in model.parameters()]
    for mode in ("plain", "reentrant", "nonreentrant", "seq"):
        res[mode] = run(mode)
    res["fn"] = [type(cp.checkpoint(model[0], x.requires_grad_(), use_reentrant=True)
                      .grad_fn).__name__]
    # a checkpointed call with keyword args and a non-tensor argument (non-reentrant only)
    def attn_like(q, k, scale, *, causal):
        s = q @ k.transpose(-1, -2) * scale
        if causal:
            s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
        return s.softmax(-1) @ k
    q = normal(torch, rng, 2, 4, 6).requires_grad_()
    k = normal(torch, rng, 2, 4, 6).requires_grad_()
    o = cp.checkpoint(attn_like, q, k, 0.5, causal=True, use_reentrant=False)
    o.sum().backward()
    res["kw"] = [o.detach(), q.grad, k.grad]
    # a reentrant checkpoint whose inputs do not require grad warns and gives no grads
    w = torch.nn.Linear(3, 3)
    out = cp.checkpoint(w, torch.ones(2, 3), use_reentrant=True)
    res["no_grad_input"] = [out.requires_grad]
    return res


def checkpoint_dropout_program(torch):
    """Dropout inside a recomputed region: preserve_rng_state keeps the plain run's mask."""
    cp = torch.utils.checkpoint
    rng = np.random.default_rng(2912)
    model = _blocks(torch, p=0.5)
    fill_(torch, model, rng, 0.3)
    x = normal(torch, rng, 4, 12).requires_grad_()
    res = {}

    def run(mode, preserve=True):
        model.zero_grad()
        torch.manual_seed(7)
        if mode == "plain":
            out = model(x)
        elif mode == "seq":
            out = cp.checkpoint_sequential(model, 3, x, use_reentrant=False,
                                           preserve_rng_state=preserve)
        else:
            out = x
            for blk in model:
                out = cp.checkpoint(blk, out, use_reentrant=(mode == "reentrant"),
                                    preserve_rng_state=preserve)
        out.pow(2).sum().backward()
        return out.detach(), [p.grad.clone() for p in model.parameters()]
    plain_out, plain_g = run("plain")
    for mode in ("reentrant", "nonreentrant", "seq"):
        out, g = run(mode)
        res[mode] = [torch.equal(out, plain_out)] + [torch.allclose(a, b, atol=1e-6)
                                                    for a, b in zip(g, plain_g)]
    torch.manual_seed(7)
    res["zeros"] = [bool(((model(x) - x) == 0).any())]
    return res


def amp_program(torch):
    """CPU autocast in bfloat16 and float16 with GradScaler('cpu') and clipping."""
    nn = torch.nn
    rng = np.random.default_rng(2913)
    res = {}
    for dtype, name in ((torch.bfloat16, "bf16"), (torch.float16, "fp16")):
        model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 16), nn.Tanh(),
                              nn.Linear(16, 4))
        fill_(torch, model, rng, 0.4)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_interval=2)
        log = []
        for step in range(5):
            x, y = normal(torch, rng, 8, 6), torch.from_numpy(rng.integers(0, 4, 8))
            with torch.autocast("cpu", dtype=dtype):
                logits = model(x)
                loss = nn.functional.cross_entropy(logits, y)
            if step == 2:
                loss = loss * float("inf")
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            log.append([str(logits.dtype)[-8:], str(loss.dtype)[-7:], scaler.get_scale(),
                        bool(torch.isfinite(norm))])
        res[name + "_log"] = [str(v) for v in log]
        res[name + "_params"] = [p.detach() for p in model.parameters()]
        res[name + "_state"] = [str(sorted(scaler.state_dict().items()))]
        res[name + "_step"] = [opt.state[p]["step"] for p in model.parameters()]
    return res


def compile_program(torch):
    """torch.compile(model) trains like the module it wraps; attributes pass through."""
    nn = torch.nn
    rng = np.random.default_rng(2914)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    fill_(torch, model, rng, 0.5)
    cmodel = torch.compile(model, backend="eager")     # (inductor would only add time)
    opt = torch.optim.SGD(cmodel.parameters(), lr=0.1)
    losses = []
    for _ in range(3):
        loss = nn.functional.mse_loss(cmodel(normal(torch, rng, 5, 4)), normal(torch, rng, 5, 2))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    keys = list(cmodel.state_dict().keys())
    return {"losses": losses, "keys": keys, "orig": [cmodel._orig_mod is model],
            "params": [p.detach() for p in model.parameters()],
            "n": [len(list(cmodel.parameters()))]}


def resume_program(torch):
    """Save model+optimizer+scheduler+RNG mid-run, resume in a fresh model, continue."""
    nn = torch.nn
    rng = np.random.default_rng(2915)
    data = [(normal(torch, rng, 6, 5), normal(torch, rng, 6, 3)) for _ in range(6)]
    init = np.random.default_rng(3).standard_normal(200).astype(np.float32)

    def build():
        m = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Dropout(0.25), nn.Linear(8, 3))
        with torch.no_grad():
            off = 0
            for p in m.parameters():
                p.copy_(torch.from_numpy(init[off:off + p.numel()]).view_as(p) * 0.4)
                off += p.numel()
        o = torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1)
        s = torch.optim.lr_scheduler.LambdaLR(
            o, lambda it: min(1.0, (it + 1) / 3) * 0.5 * (1 + math.cos(math.pi * it / 8)))
        return m, o, s

    def train(m, o, s, steps):
        out = []
        for x, y in steps:
            loss = nn.functional.mse_loss(m(x), y)
            o.zero_grad()
            loss.backward()
            o.step()
            s.step()
            out.append(loss.detach())
        return out
    torch.manual_seed(11)
    m, o, s = build()
    full = train(m, o, s, data)
    full_params = [p.detach().clone() for p in m.parameters()]

    torch.manual_seed(11)
    m, o, s = build()
    first = train(m, o, s, data[:3])
    buf = io.BytesIO()
    torch.save({"model": m.state_dict(), "optim": o.state_dict(), "sched": s.state_dict(),
                "rng": torch.get_rng_state(), "step": 3}, buf)
    buf.seek(0)
    torch.manual_seed(999)
    m2, o2, s2 = build()
    ck = torch.load(buf, weights_only=True)
    m2.load_state_dict(ck["model"])
    o2.load_state_dict(ck["optim"])
    s2.load_state_dict(ck["sched"])
    torch.set_rng_state(ck["rng"])
    second = train(m2, o2, s2, data[ck["step"]:])
    # dropout draws from each library's own stream: compare the resumed run with the
    # uninterrupted one inside each library, and only the shapes of what it drew
    return {"same_losses": [torch.equal(a, b) for a, b in zip(full, first + second)],
            "same": [torch.equal(a, b.detach()) for a, b in zip(full_params, m2.parameters())],
            "shapes": [str([list(p.shape) for p in m2.parameters()])],
            "sched": [str(sorted((k, v) for k, v in s2.state_dict().items()
                                 if k != "lr_lambdas"))],
            "optim_keys": [str(sorted(ck["optim"]["param_groups"][0].keys()))],
            "rng": [str(ck["rng"].dtype).split(".")[-1], ck["rng"].dim()],
            "lr": s2.get_last_lr()}


def litgpt_bf16_program(torch):
    """A litgpt/OLMo-style block (RMSNorm, SwiGLU, RoPE, SDPA) trained under bfloat16
    autocast with chunked cross-entropy, z-loss, clipping and AdamW."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2916)
    d, heads, T, vocab = 16, 2, 6, 11

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm_1 = nn.RMSNorm(d, eps=1e-5)
            self.attn = nn.Linear(d, 3 * d, bias=False)
            self.proj = nn.Linear(d, d, bias=False)
            self.norm_2 = nn.RMSNorm(d, eps=1e-5)
            self.fc_1 = nn.Linear(d, 2 * d, bias=False)
            self.fc_2 = nn.Linear(d, 2 * d, bias=False)
            self.mlp_proj = nn.Linear(2 * d, d, bias=False)

        def forward(self, x, cos, sin):
            B = x.size(0)
            q, k, v = self.attn(self.norm_1(x)).view(B, T, 3, heads, d // heads).unbind(2)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))

            def rope(t):
                t1, t2 = t[..., : t.size(-1) // 2], t[..., t.size(-1) // 2:]
                return (t * cos + torch.cat((-t2, t1), -1) * sin).to(dtype=t.dtype)
            y = F.scaled_dot_product_attention(rope(q), rope(k), v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(B, T, d))
            h = self.norm_2(x)
            return x + self.mlp_proj(F.silu(self.fc_1(h)) * self.fc_2(h))

    emb, block = nn.Embedding(vocab, d), Block()
    norm, head = nn.RMSNorm(d), nn.Linear(d, vocab, bias=False)
    params = [*emb.parameters(), *block.parameters(), *norm.parameters(), *head.parameters()]
    fill_(torch, params, rng, 0.3)
    inv = 1.0 / (10000 ** (torch.arange(0, d // heads, 2).float() / (d // heads)))
    ang = torch.outer(torch.arange(T).float(), inv).repeat(1, 2)
    cos, sin = ang.cos(), ang.sin()
    opt = torch.optim.AdamW(params, lr=3e-3, weight_decay=0.1, eps=1e-5)
    out = []
    for step in range(3):
        idx = torch.from_numpy(rng.integers(0, vocab, (2, T + 1)))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = head(norm(block(emb(idx[:, :-1]), cos, sin)))
        chunks = [F.cross_entropy(c.reshape(-1, vocab).float(), t.reshape(-1),
                                  reduction="sum")
                  for c, t in zip(logits.split(2, 1), idx[:, 1:].split(2, 1))]
        ce = torch.stack(chunks).sum() / idx[:, 1:].numel()
        z = 1e-4 * torch.logsumexp(logits.float(), -1).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        (ce + z).backward()
        gn = nn.utils.clip_grad_norm_(params, 0.5, foreach=True)
        opt.step()
        out.append([ce.detach(), z.detach(), gn])
    return {"out": out, "dtype": [str(logits.dtype).split(".")[-1]],
            "params": [p.detach() for p in params]}


PROGRAMS = [checkpoint_program, checkpoint_dropout_program, amp_program, compile_program,
            resume_program, litgpt_bf16_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
