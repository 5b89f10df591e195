"""Chronos-Bolt and Lag-Llama's rotary decoder with a KV cache written as their reference
repositories write them in torch, run once with `torch` bound to ember and once to PyTorch
from the same NumPy weights: nan-aware instance scaling (nanmean, nan_to_num, a zero scale
replaced by |loc|), left padding with nan then unfold, a residual-block quantile head trained
with the pinball loss, rotary embeddings built with torch.polar and view_as_complex, and greedy
decoding with a growing KV cache checked against uncached decoding."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


class _InstanceNorm:
    """chronos-bolt's InstanceNorm: nanmean/nanstd per series, scale 1 where it is 0."""

    def __init__(self, torch, eps=1e-5):
        self.torch, self.eps = torch, eps

    def __call__(self, x, loc_scale=None):
        torch = self.torch
        if loc_scale is None:
            loc = torch.nan_to_num(torch.nanmean(x, dim=-1, keepdim=True), nan=0.0)
            scale = torch.nan_to_num((x - loc).square().nanmean(dim=-1, keepdim=True).sqrt(),
                                     nan=1.0)
            scale = torch.where(scale == 0, torch.abs(loc) + self.eps, scale)
        else:
            loc, scale = loc_scale
        return (x - loc) / scale, (loc, scale)

    def inverse(self, x, loc_scale):
        """Undo the normalisation of (B, Q, H) predictions."""
        loc, scale = loc_scale
        return x * scale.unsqueeze(1) + loc.unsqueeze(1)


class _ResidualBlock:
    """chronos-bolt's ResidualBlock: a hidden MLP plus a linear skip, optional layer norm."""

    def __init__(self, torch, d_in, d_h, d_out):
        nn = torch.nn
        self.hidden = nn.Linear(d_in, d_h)
        self.output = nn.Linear(d_h, d_out)
        self.residual = nn.Linear(d_in, d_out)
        self.act = nn.ReLU()
        self.modules = nn.ModuleList([self.hidden, self.output, self.residual])

    def __call__(self, x):
        return self.output(self.act(self.hidden(x))) + self.residual(x)


def chronos_bolt_program(torch):
    """Scale with nan, pad-left to a patch multiple, patch, encode, quantile head, 3 steps."""
    rng = np.random.default_rng(5)
    nn, F = torch.nn, torch.nn.functional
    patch, horizon, qs = 4, 4, [0.1, 0.25, 0.5, 0.75, 0.9]
    raw = (rng.standard_normal((3, 10)) * 3 + 2).astype(np.float32)
    raw[0, :4] = np.nan
    raw[1] = 5.0  # a constant series: std 0
    raw[2, 6] = np.nan
    context = torch.from_numpy(raw)
    target = torch.from_numpy(rng.standard_normal((3, horizon)).astype(np.float32) * 3 + 2)
    norm = _InstanceNorm(torch)
    tok = _ResidualBlock(torch, 2 * patch, 16, 16)
    enc = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True, norm_first=True)
    head = _ResidualBlock(torch, 16, 16, len(qs) * horizon)
    reg = nn.Parameter(torch.zeros(16))  # the [REG] token
    mods = nn.ModuleList([tok.modules, enc, head.modules])
    fill_(torch, list(mods.parameters()) + [reg], rng, scale=0.2)
    opt = torch.optim.AdamW(list(mods.parameters()) + [reg], lr=1e-2, eps=1e-6)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
    res = {}
    for _ in range(3):
        ctx = context.clone().requires_grad_(False)
        mask = torch.isnan(ctx).logical_not().to(torch.float32)
        scaled, loc_scale = norm(ctx)
        length = scaled.shape[-1]
        if length % patch != 0:
            pad = patch - length % patch
            scaled = F.pad(scaled, (pad, 0), value=torch.nan)
            mask = F.pad(mask, (pad, 0), value=0.0)
        patched = scaled.unfold(-1, patch, patch)
        pmask = mask.unfold(-1, patch, patch)
        patched = torch.where(pmask > 0.0, patched, torch.zeros(()))
        x = tok(torch.cat([patched, pmask], dim=-1))
        attn_pad = pmask.sum(-1) == 0
        x = torch.cat([x, reg.expand(x.shape[0], 1, -1)], dim=1)
        attn_pad = torch.cat([attn_pad, torch.zeros(3, 1, dtype=torch.bool)], dim=1)
        h = enc(x, src_key_padding_mask=attn_pad)
        q = head(h[:, -1]).view(-1, len(qs), horizon)
        scaled_target, _ = norm(target, loc_scale)
        qt = torch.tensor(qs).view(1, -1, 1)
        loss = 2 * torch.abs((scaled_target.unsqueeze(1) - q)
                             * ((scaled_target.unsqueeze(1) <= q).float() - qt))
        loss = loss.mean(dim=-2).sum(dim=-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res.setdefault("loss", []).append(loss.item())
    res["loc"], res["scale"] = loc_scale
    res["pred"] = norm.inverse(q, loc_scale)
    res["median"] = res["pred"][:, qs.index(0.5)]
    res["crossing"] = int((res["pred"].diff(dim=1) < 0).sum())
    res["reg_grad"] = reg.grad
    res["lr"] = sched.get_last_lr()
    res["params"] = [p for n, p in mods.named_parameters() if "in_proj" not in n]
    res["in_proj_grad"] = enc.self_attn.in_proj_weight.grad
    return res


def _rope(torch, dim, end, theta=10000.0):
    """Lag-Llama / LLaMA precompute_freqs_cis with torch.polar."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    return torch.polar(torch.ones(end, dim // 2), torch.outer(t, freqs).float())


def _apply_rope(torch, xq, xk, freqs_cis):
    """Rotate (B, T, H, D) queries and keys as complex pairs."""
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    f = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    return (torch.view_as_real(xq_ * f).flatten(3).type_as(xq),
            torch.view_as_real(xk_ * f).flatten(3).type_as(xk))


class _CachedAttention:
    """A causal self-attention with rotary embeddings and an in-place filled KV cache."""

    def __init__(self, torch, d, h, max_len):
        nn = torch.nn
        self.torch, self.h, self.hd = torch, h, d // h
        self.q_proj = nn.Linear(d, d, bias=False)
        self.kv_proj = nn.Linear(d, 2 * d, bias=False)
        self.c_proj = nn.Linear(d, d, bias=False)
        self.freqs = _rope(torch, self.hd, max_len)
        self.modules = nn.ModuleList([self.q_proj, self.kv_proj, self.c_proj])
        self.cache_k = self.cache_v = None

    def __call__(self, x, start=0, use_cache=False):
        torch = self.torch
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.h, self.hd)
        k, v = self.kv_proj(x).split(self.h * self.hd, dim=2)
        k, v = k.view(B, T, self.h, self.hd), v.view(B, T, self.h, self.hd)
        q, k = _apply_rope(torch, q, k, self.freqs[start:start + T])
        if use_cache:
            if self.cache_k is None:
                self.cache_k = torch.zeros(B, self.freqs.shape[0], self.h, self.hd)
                self.cache_v = torch.zeros_like(self.cache_k)
            self.cache_k[:, start:start + T] = k
            self.cache_v[:, start:start + T] = v
            k, v = self.cache_k[:, :start + T], self.cache_v[:, :start + T]
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        y = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=not use_cache or T > 1)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, -1))


def lag_llama_decode_program(torch):
    """Train the rotary decoder two steps, then greedy-decode with the cache vs without."""
    rng = np.random.default_rng(6)
    nn, F = torch.nn, torch.nn.functional
    d, max_len = 8, 12
    inp = nn.Linear(3, d)
    attn = _CachedAttention(torch, d, 2, max_len)
    norm = nn.RMSNorm(d, eps=1e-5)
    out = nn.Linear(d, 3)  # Student-t params
    mods = nn.ModuleList([inp, attn.modules, norm, out])
    fill_(torch, mods, rng, scale=0.3)
    series = torch.from_numpy(rng.standard_normal((2, 8)).astype(np.float32))
    lag_idx = torch.tensor([0, 1, 3])

    def feats(s):
        padded = F.pad(s, (3, 0))
        idx = torch.arange(3, padded.shape[1]).unsqueeze(-1) - lag_idx  # (T, lags)
        return padded[:, idx]

    def forward(s, start=0, use_cache=False):
        h = inp(feats(s)[:, start:])
        h = h + attn(norm(h), start, use_cache)
        df, loc, scale = out(h).unbind(-1)
        return torch.distributions.StudentT(2 + F.softplus(df), loc, F.softplus(scale) + 1e-4)

    opt = torch.optim.SGD(mods.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    res = {}
    for _ in range(2):
        distr = forward(series[:, :-1])
        loss = -distr.log_prob(series[:, 1:]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.setdefault("loss", []).append(loss.item())
    with torch.no_grad():
        seq = series[:, :4].clone()
        full = seq.clone()
        forward(seq, 0, use_cache=True)
        for step in range(4):
            nxt = forward(seq, seq.shape[1] - 1, use_cache=True).mean[:, -1:]
            seq = torch.cat([seq, nxt], dim=1)
            nxt_full = forward(full).mean[:, -1:]
            full = torch.cat([full, nxt_full], dim=1)
    res["cached"], res["uncached"] = seq, full
    res["cache_k"] = attn.cache_k
    res["freqs"] = torch.view_as_real(attn.freqs)
    res["params"] = list(mods.parameters())
    return res


PROGRAMS = [chronos_bolt_program, lag_llama_decode_program]
TOLERANCES = {
    # attention softmax and layer norms over Adam steps: float32 reduction order
    "chronos_bolt_program": (1e-4, 1e-5),
    "lag_llama_decode_program": (1e-4, 1e-5),
}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
