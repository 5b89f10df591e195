"""2025-era decoder blocks written as recent model repositories write them in torch, run once
with `torch` bound to ember and once to PyTorch from the same NumPy weights: DeepSeek multi-head
latent attention (low-rank KV compression, decoupled RoPE, the absorbed-weights decode path),
YaRN frequency scaling, Gemma blocks (RMSNorm with 1 + w, GeGLU, QK-norm, tanh soft-capping,
sliding-window and global layers, tied embeddings with float32 logits from bf16 states, z-loss),
differential attention, nGPT normalised weights, aux-loss-free MoE routing with capacity
dropping and multi-token prediction heads. Sibling _llm_optim covers the optimizers; _llm_fixes
pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _rope_tables(torch, dim, seq, base=10000.0, factor=4.0, orig_max=8, beta_fast=32,
                 beta_slow=1, mscale=1.0):
    """YaRN inverse frequencies (DeepSeek-V3's yarn_get_mscale / find_correction_range)."""
    def correction_dim(num_rot):
        return (dim * math.log(orig_max / (num_rot * 2 * math.pi))) / (2 * math.log(base))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
    freq_extra = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    freq_inter = 1.0 / (factor * base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    if low == high:
        high += 0.001
    ramp = (torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)
    inv_freq_mask = 1.0 - torch.clamp(ramp, 0, 1)
    inv_freq = freq_inter * (1 - inv_freq_mask) + freq_extra * inv_freq_mask
    t = torch.arange(seq, device=inv_freq.device, dtype=torch.float32)
    freqs = torch.outer(t, inv_freq)
    m = 0.1 * mscale * math.log(factor) + 1.0
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * m, emb.sin() * m, inv_freq


def mla_program(torch):
    """DeepSeek-V2/V3 MLA: q/kv LoRA, decoupled rope keys, softmax scale with YaRN mscale,
    the naive path trained a step, then the absorbed decode path checked against it."""
    rng = np.random.default_rng(0)
    d, h, q_rank, kv_rank, nope, rope, vdim, T, B = 32, 4, 16, 12, 8, 4, 8, 6, 2

    class RMSNorm(torch.nn.Module):
        def __init__(self, n, eps=1e-6):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(n))
            self.eps = eps

        def forward(self, x):
            dt = x.dtype
            x = x.to(torch.float32)
            x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
            return self.weight * x.to(dt)

    class MLA(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wq_a = torch.nn.Linear(d, q_rank, bias=False)
            self.q_norm = RMSNorm(q_rank)
            self.wq_b = torch.nn.Linear(q_rank, h * (nope + rope), bias=False)
            self.wkv_a = torch.nn.Linear(d, kv_rank + rope, bias=False)
            self.kv_norm = RMSNorm(kv_rank)
            self.wkv_b = torch.nn.Linear(kv_rank, h * (nope + vdim), bias=False)
            self.wo = torch.nn.Linear(h * vdim, d, bias=False)
            mscale = 0.1 * 1.0 * math.log(4.0) + 1.0
            self.softmax_scale = (nope + rope) ** -0.5 * mscale * mscale

        def rope(self, x, freqs_cis):
            # interleaved pairs as DeepSeek writes it: view_as_complex on (.., d/2, 2)
            dtype = x.dtype
            xc = torch.view_as_complex(x.float().view(*x.shape[:-1], -1, 2))
            fc = freqs_cis.view(1, xc.size(1), 1, xc.size(-1))
            return torch.view_as_real(xc * fc).flatten(3).to(dtype)

        def forward(self, x, freqs, mask, absorb=False):
            bsz, seqlen, _ = x.shape
            q = self.wq_b(self.q_norm(self.wq_a(x))).view(bsz, seqlen, h, nope + rope)
            q_nope, q_pe = torch.split(q, [nope, rope], dim=-1)
            q_pe = self.rope(q_pe, freqs)
            kv = self.wkv_a(x)
            kv, k_pe = torch.split(kv, [kv_rank, rope], dim=-1)
            k_pe = self.rope(k_pe.unsqueeze(2), freqs)
            if not absorb:
                q = torch.cat([q_nope, q_pe], dim=-1)
                kv = self.wkv_b(self.kv_norm(kv)).view(bsz, seqlen, h, nope + vdim)
                k_nope, v = torch.split(kv, [nope, vdim], dim=-1)
                k = torch.cat([k_nope, k_pe.expand(-1, -1, h, -1)], dim=-1)
                scores = torch.einsum("bshd,bthd->bsht", q, k) * self.softmax_scale
            else:
                wkv_b = self.wkv_b.weight.view(h, -1, kv_rank)
                q_nope = torch.einsum("bshd,hdc->bshc", q_nope, wkv_b[:, :nope])
                kv_c = self.kv_norm(kv)
                scores = (torch.einsum("bshc,btc->bsht", q_nope, kv_c)
                          + torch.einsum("bshr,btr->bsht", q_pe, k_pe.squeeze(2)))
                scores = scores * self.softmax_scale
            scores = scores + mask.unsqueeze(1)
            scores = scores.softmax(dim=-1, dtype=torch.float32).type_as(x)
            if not absorb:
                out = torch.einsum("bsht,bthd->bshd", scores, v)
            else:
                out = torch.einsum("bsht,btc->bshc", scores, kv_c)
                out = torch.einsum("bshc,hdc->bshd", out, wkv_b[:, -vdim:])
            return self.wo(out.flatten(2))

    res = {}
    _, _, inv_freq = _rope_tables(torch, rope, T)
    freqs = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)
    freqs = torch.polar(torch.ones_like(freqs), freqs)
    mask = torch.full((T, T), float("-inf")).triu_(1)
    m = MLA()
    fill_(torch, m, rng, 0.2)
    x = normal(torch, rng, B, T, d)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)
    losses = []
    for _ in range(3):
        y = m(x, freqs, mask)
        loss = y.pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res["losses"] = losses
    res["grad_wkv_b"] = m.wkv_b.weight.grad
    res["grad_q_norm"] = m.q_norm.weight.grad
    with torch.no_grad():
        naive, absorbed = m(x, freqs, mask), m(x, freqs, mask, absorb=True)
    res["naive"], res["absorbed"] = naive, absorbed
    res["inv_freq"] = inv_freq
    cos, sin, _ = _rope_tables(torch, 16, T, factor=8.0, orig_max=4)
    res["yarn_cos"], res["yarn_sin"] = cos, sin
    res["dtypes"] = [str(naive.dtype).rsplit(".", 1)[-1], str(freqs.dtype).rsplit(".", 1)[-1]]
    res["freqs_cis"] = torch.view_as_real(freqs)
    return res


def _gemma(torch, bf16):
    """A Gemma-2-style two-layer LM: embeddings scaled by sqrt(d) in the hidden dtype, RMSNorm
    (1 + w) in float32, QK-norm, attention logit soft-capping, one sliding-window layer and one
    global layer, GeGLU (tanh gelu), pre/post norms, tied embeddings with float32 logits, final
    soft-cap, cross entropy plus z-loss; a bf16 forward as well."""
    F = torch.nn.functional
    rng = np.random.default_rng(1)
    V, d, h, hd, T, B, window = 40, 16, 2, 8, 7, 2, 3

    class GemmaRMSNorm(torch.nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = torch.nn.Parameter(torch.zeros(dim))

        def _norm(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

        def forward(self, x):
            output = self._norm(x.float())
            output = output * (1.0 + self.weight.float())
            return output.type_as(x)

    class Layer(torch.nn.Module):
        def __init__(self, sliding):
            super().__init__()
            self.sliding = sliding
            self.q = torch.nn.Linear(d, h * hd, bias=False)
            self.k = torch.nn.Linear(d, h * hd, bias=False)
            self.v = torch.nn.Linear(d, h * hd, bias=False)
            self.o = torch.nn.Linear(h * hd, d, bias=False)
            self.q_norm, self.k_norm = GemmaRMSNorm(hd), GemmaRMSNorm(hd)
            self.pre, self.post = GemmaRMSNorm(d), GemmaRMSNorm(d)
            self.pre_ff, self.post_ff = GemmaRMSNorm(d), GemmaRMSNorm(d)
            self.gate = torch.nn.Linear(d, 2 * d, bias=False)
            self.up = torch.nn.Linear(d, 2 * d, bias=False)
            self.down = torch.nn.Linear(2 * d, d, bias=False)

        def forward(self, x, cap=50.0):
            b, t, _ = x.shape
            r = self.pre(x)
            q = self.q_norm(self.q(r).view(b, t, h, hd)).transpose(1, 2)
            k = self.k_norm(self.k(r).view(b, t, h, hd)).transpose(1, 2)
            v = self.v(r).view(b, t, h, hd).transpose(1, 2)
            att = (q @ k.transpose(-1, -2)) * hd ** -0.5
            att = torch.tanh(att / cap) * cap
            i = torch.arange(t, device=x.device)
            causal = i[None, :] <= i[:, None]
            if self.sliding:
                causal = causal & (i[:, None] - i[None, :] < window)
            att = att.masked_fill(~causal, torch.finfo(att.dtype).min)
            att = F.softmax(att, dim=-1, dtype=torch.float32).to(q.dtype)
            y = (att @ v).transpose(1, 2).reshape(b, t, h * hd)
            x = x + self.post(self.o(y))
            r = self.pre_ff(x)
            ff = self.down(F.gelu(self.gate(r), approximate="tanh") * self.up(r))
            return x + self.post_ff(ff)

    class LM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(V, d)
            self.layers = torch.nn.ModuleList([Layer(True), Layer(False)])
            self.norm = GemmaRMSNorm(d)

        def forward(self, idx, final_cap=30.0):
            x = self.embed(idx)
            x = x * torch.tensor(d ** 0.5, dtype=x.dtype)
            for layer in self.layers:
                x = layer(x)
            x = self.norm(x)
            logits = F.linear(x, self.embed.weight).float()
            return torch.tanh(logits / final_cap) * final_cap

    res = {}
    lm = LM()
    fill_(torch, lm, rng, 0.3)
    idx = torch.from_numpy(rng.integers(0, V, (B, T + 1)))
    inp, tgt = idx[:, :-1], idx[:, 1:].contiguous()
    opt = torch.optim.AdamW(lm.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-8)
    losses, zs = [], []
    for _ in range(3):
        logits = lm(inp)
        ce = F.cross_entropy(logits.view(-1, V), tgt.view(-1), ignore_index=-100)
        z = torch.logsumexp(logits, dim=-1).pow(2).mean()
        loss = ce + 1e-4 * z
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(lm.parameters(), 1.0)
        opt.step()
        losses.append(ce.item())
        zs.append(z.item())
    res["losses"], res["z"] = losses, zs
    res["embed"] = lm.embed.weight
    res["norm_w"] = lm.layers[0].q_norm.weight
    if not bf16:
        return res
    res = {}
    with torch.no_grad():
        lm_bf = LM()
        lm_bf.load_state_dict(lm.state_dict())
        lm_bf.to(torch.bfloat16)
        lb = lm_bf(inp)
    res["bf16_logits"] = lb
    res["bf16_dtype"] = [str(t.dtype).rsplit(".", 1)[-1] for t in (lb, lm_bf.embed.weight)]
    return res


def gemma_program(torch):
    """The Gemma-2-style LM trained three steps in float32."""
    return _gemma(torch, False)


def gemma_bf16_program(torch):
    """The trained Gemma-2-style LM cast to bfloat16: logits float32 from bf16 states."""
    return _gemma(torch, True)


def diff_attn_program(torch):
    """Differential Transformer attention: two softmax maps, lambda from four reparametrised
    vectors with lambda_init depending on depth, per-head RMSNorm (sub-layer norm), scale by
    1 - lambda_init, causal by triu with -inf then nan_to_num."""
    F = torch.nn.functional
    rng = np.random.default_rng(2)
    d, h, T, B, depth = 16, 2, 5, 2, 3
    hd = d // h // 2

    class DiffAttn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q = torch.nn.Linear(d, d, bias=False)
            self.k = torch.nn.Linear(d, d, bias=False)
            self.v = torch.nn.Linear(d, d, bias=False)
            self.o = torch.nn.Linear(d, d, bias=False)
            self.lambda_init = 0.8 - 0.6 * math.exp(-0.3 * depth)
            self.lambda_q1 = torch.nn.Parameter(torch.zeros(hd, dtype=torch.float32))
            self.lambda_k1 = torch.nn.Parameter(torch.zeros(hd, dtype=torch.float32))
            self.lambda_q2 = torch.nn.Parameter(torch.zeros(hd, dtype=torch.float32))
            self.lambda_k2 = torch.nn.Parameter(torch.zeros(hd, dtype=torch.float32))
            self.subln = torch.nn.RMSNorm(2 * hd, eps=1e-5, elementwise_affine=True)

        def forward(self, x):
            b, t, _ = x.shape
            q = self.q(x).view(b, t, 2 * h, hd).transpose(1, 2)
            k = self.k(x).view(b, t, 2 * h, hd).transpose(1, 2)
            v = self.v(x).view(b, t, h, 2 * hd).transpose(1, 2)
            w = torch.matmul(q * hd ** -0.5, k.transpose(-1, -2))
            mask = torch.triu(torch.zeros([t, t]).float().fill_(float("-inf")).type_as(w), 1)
            w = torch.nan_to_num(w)
            w = F.softmax(w + mask, dim=-1, dtype=torch.float32).type_as(w)
            l1 = torch.exp(torch.sum(self.lambda_q1 * self.lambda_k1, dim=-1).float()).type_as(q)
            l2 = torch.exp(torch.sum(self.lambda_q2 * self.lambda_k2, dim=-1).float()).type_as(q)
            lam = l1 - l2 + self.lambda_init
            w = w.view(b, h, 2, t, t)
            w = w[:, :, 0] - lam * w[:, :, 1]
            a = torch.matmul(w, v)
            a = self.subln(a) * (1 - self.lambda_init)
            return self.o(a.transpose(1, 2).reshape(b, t, d)), lam

    res = {}
    m = DiffAttn()
    fill_(torch, m, rng, 0.3)
    x = normal(torch, rng, B, T, d)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    losses, lams = [], []
    for _ in range(3):
        y, lam = m(x)
        loss = (y - 0.1).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        lams.append(lam.item())
    res["losses"], res["lams"] = losses, lams
    res["lambda_q1"], res["subln"] = m.lambda_q1, m.subln.weight
    res["grad_k2"] = m.lambda_k2.grad
    return res


def ngpt_program(torch):
    """nGPT: every hidden vector and every weight row on the unit sphere; eigen learning rates
    (alpha) with scale parameters; s_qk scaling; weights re-normalised with F.normalize under
    no_grad after each optimizer step; logits scaled by s_z."""
    F = torch.nn.functional
    rng = np.random.default_rng(3)
    V, d, T, B = 24, 16, 6, 2

    def justnorm(x, dim=-1):
        return x / x.norm(p=2, dim=dim, keepdim=True)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.Linear(d, 3 * d, bias=False)
            self.proj = torch.nn.Linear(d, d, bias=False)
            self.uv = torch.nn.Linear(d, 4 * d, bias=False)
            self.mlp_out = torch.nn.Linear(2 * d, d, bias=False)
            self.attn_alpha_init, self.attn_alpha_scale = 0.05, 1 / d ** 0.5
            self.attn_alpha = torch.nn.Parameter(self.attn_alpha_scale * torch.ones(d))
            self.mlp_alpha = torch.nn.Parameter(self.attn_alpha_scale * torch.ones(d))
            self.sqk = torch.nn.Parameter(1 / d ** 0.5 * torch.ones(d))
            self.suv = torch.nn.Parameter(torch.ones(4 * d))

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(x).split(d, dim=-1)
            sqk = (self.sqk * d ** 0.5).view(1, 1, d)
            q, k = sqk * justnorm(q), sqk * justnorm(k)
            y = F.scaled_dot_product_attention(q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1),
                                               is_causal=True, scale=d ** 0.5).squeeze(1)
            y = self.proj(y)
            lr = torch.abs(self.attn_alpha * (self.attn_alpha_init / self.attn_alpha_scale))
            x = justnorm(justnorm(x) + lr * (justnorm(y) - justnorm(x)))
            uv = self.uv(x) * (self.suv * d ** 0.5)
            u, v = torch.chunk(uv, 2, dim=-1)
            y = self.mlp_out(u * F.silu(v))
            lr = torch.abs(self.mlp_alpha * (self.attn_alpha_init / self.attn_alpha_scale))
            return justnorm(x + lr * (justnorm(y) - x))

    class NGPT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = torch.nn.Embedding(V, d)
            self.block = Block()
            self.lm_head = torch.nn.Linear(d, V, bias=False)
            self.sz = torch.nn.Parameter(torch.ones(V) / d ** 0.5)

        def normalize_matrices(self):
            with torch.no_grad():
                self.wte.weight.copy_(F.normalize(self.wte.weight, p=2.0, dim=1))
                self.lm_head.weight.copy_(F.normalize(self.lm_head.weight, dim=1))
                for lin in (self.block.qkv, self.block.uv):
                    lin.weight.copy_(F.normalize(lin.weight, dim=1))
                for lin in (self.block.proj, self.block.mlp_out):
                    lin.weight.copy_(F.normalize(lin.weight, dim=0))

        def forward(self, idx):
            x = self.block(self.wte(idx))
            return self.lm_head(x) * (self.sz * d ** 0.5)

    res = {}
    m = NGPT()
    fill_(torch, m, rng, 0.4)
    m.normalize_matrices()
    idx = torch.from_numpy(rng.integers(0, V, (B, T + 1)))
    decay = [p for n, p in m.named_parameters() if p.dim() >= 2]
    other = [p for n, p in m.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.0},
                             {"params": other, "weight_decay": 0.0, "lr": 5e-3}],
                            lr=1e-2, betas=(0.9, 0.95), eps=1e-8)
    losses = []
    for _ in range(3):
        logits = m(idx[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        m.normalize_matrices()
        losses.append(loss.item())
    res["losses"] = losses
    res["wte"], res["proj"], res["sz"] = m.wte.weight, m.block.proj.weight, m.sz
    res["row_norms"] = m.block.qkv.weight.norm(dim=1)
    res["lrs"] = [g["lr"] for g in opt.param_groups]
    return res


def moe_mtp_program(torch):
    """DeepSeek-V3-style MoE: sigmoid scores, an expert bias added for selection only and
    updated outside autograd by the sign of the load error, top-k by torch.topk, dispatch by
    scatter into a one-hot, capacity dropping by cumsum, combine by index_add_; then a
    multi-token prediction head sharing the embedding and output head."""
    F = torch.nn.functional
    rng = np.random.default_rng(4)
    V, d, E, k, T, B, cap_factor = 20, 8, 4, 2, 6, 2, 1.0

    class MoE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = torch.nn.Linear(d, E, bias=False)
            self.register_buffer("e_bias", torch.zeros(E))
            self.w1 = torch.nn.Parameter(torch.empty(E, d, 2 * d))
            self.w2 = torch.nn.Parameter(torch.empty(E, 2 * d, d))

        def forward(self, x):
            n = x.shape[0]
            scores = self.gate(x).sigmoid()
            _, topi = torch.topk(scores + self.e_bias, k, dim=-1)
            w = scores.gather(1, topi)
            w = w / w.sum(dim=-1, keepdim=True)
            disp = torch.zeros(n, E, dtype=torch.long).scatter(1, topi, 1)
            capacity = int(math.ceil(cap_factor * n * k / E))
            pos = torch.cumsum(disp, dim=0) * disp - 1
            keep = (pos < capacity) & (disp > 0)
            dropped = int((disp.sum() - keep.sum()).item())
            out = torch.zeros_like(x)
            gates = torch.zeros(n, E, dtype=x.dtype).scatter(1, topi, w) * keep
            for e in range(E):
                rows = torch.nonzero(keep[:, e], as_tuple=True)[0]
                if rows.numel() == 0:
                    continue
                hdn = F.silu(x[rows] @ self.w1[e])
                out.index_add_(0, rows, (hdn @ self.w2[e]) * gates[rows, e, None])
            load = disp.sum(0).float()
            return out, load, dropped

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(V, d)
            self.moe = MoE()
            self.norm = torch.nn.RMSNorm(d)
            self.head = torch.nn.Linear(d, V, bias=False)
            self.mtp_proj = torch.nn.Linear(2 * d, d, bias=False)
            self.mtp_norm_h, self.mtp_norm_e = torch.nn.RMSNorm(d), torch.nn.RMSNorm(d)

        def forward(self, idx):
            b, t = idx.shape
            x = self.emb(idx)
            y, load, dropped = self.moe(x.view(-1, d))
            hdn = self.norm(x + y.view(b, t, d))
            main = self.head(hdn)
            # MTP depth 1: predict t+2 from hidden t and the embedding of token t+1
            nxt = self.emb(idx[:, 1:])
            hm = self.mtp_proj(torch.cat([self.mtp_norm_h(hdn[:, :-1]),
                                          self.mtp_norm_e(nxt)], dim=-1))
            return main, self.head(hm), load, dropped

    res = {}
    model = Model()
    fill_(torch, model, rng, 0.3)
    seq = torch.from_numpy(rng.integers(0, V, (B, T + 2)))
    inp = seq[:, :T]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    losses, biases, drops = [], [], []
    for _ in range(3):
        main, mtp, load, dropped = model(inp)
        l_main = F.cross_entropy(main.flatten(0, 1), seq[:, 1:T + 1].flatten())
        l_mtp = F.cross_entropy(mtp.flatten(0, 1), seq[:, 2:T + 1].flatten())
        loss = l_main + 0.3 * l_mtp
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            err = load.mean() - load
            model.moe.e_bias.add_(1e-2 * torch.sign(err))
        losses.append(loss.item())
        biases.append(model.moe.e_bias.clone())
        drops.append(dropped)
    res["losses"], res["biases"], res["drops"] = losses, biases, drops
    res["w1"], res["gate"] = model.moe.w1, model.moe.gate.weight
    res["bias_requires_grad"] = [model.moe.e_bias.requires_grad]
    return res


PROGRAMS = [mla_program, gemma_program, gemma_bf16_program, diff_attn_program, ngpt_program,
            moe_mtp_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 einsum/matmul accumulation order through three AdamW steps
        "mla_program": (1e-4, 1e-5),
    })
