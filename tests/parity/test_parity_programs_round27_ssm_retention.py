"""Retention and long-convolution sequence models written as their reference repositories write
them in torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy
data: torchscale's RetNet (decay masks built with masked_fill of inf then exp and nan_to_num,
xPos-style theta_shift with rotate_every_two, the parallel, recurrent and chunkwise forms, a
group-norm output and swish gate) and HazyResearch's Hyena (implicit filters from a
sinusoidal MLP over complex positional features, exponential modulation, depthwise short conv,
fftconv with norm="forward", OptimModule param groups). Siblings: _ssm, _ssm_operators."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _fill_all(torch, model, rng, scale=0.3, skip=()):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.endswith(skip):
                p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32)
                                         * scale))


def _retnet(torch, embed_dim, value_dim, num_heads):
    nn, F = torch.nn, torch.nn.functional

    def rotate_every_two(x):
        x1 = x[:, :, :, ::2]
        x2 = x[:, :, :, 1::2]
        x = torch.stack((-x2, x1), dim=-1)
        return x.flatten(-2)

    def theta_shift(x, sin, cos):
        return (x * cos) + (rotate_every_two(x) * sin)

    class RMSNorm(nn.Module):
        def __init__(self, dim, eps=1e-6, elementwise_affine=True):
            super().__init__()
            self.eps = eps
            if elementwise_affine:
                self.weight = nn.Parameter(torch.ones(dim))
            else:
                self.register_parameter("weight", None)

        def forward(self, x):
            output = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
            if self.weight is not None:
                output = output * self.weight
            return output

    class RetNetRelPos(nn.Module):
        def __init__(self, key_dim, num_heads, chunk_size):
            super().__init__()
            angle = 1.0 / (10000 ** torch.linspace(0, 1, key_dim // 2))
            angle = angle.unsqueeze(-1).repeat(1, 2).flatten()
            decay = torch.log(1 - 2 ** (-5 - torch.arange(num_heads, dtype=torch.float)))
            self.register_buffer("angle", angle)
            self.register_buffer("decay", decay)
            self.recurrent_chunk_size = chunk_size

        def forward(self, slen, activate_recurrent=False, chunkwise_recurrent=False):
            if activate_recurrent:
                sin = torch.sin(self.angle * (slen - 1))
                cos = torch.cos(self.angle * (slen - 1))
                return ((sin, cos), self.decay.exp())
            if chunkwise_recurrent:
                index = torch.arange(slen).to(self.decay)
                sin = torch.sin(index[:, None] * self.angle[None, :])
                cos = torch.cos(index[:, None] * self.angle[None, :])
                block_index = torch.arange(self.recurrent_chunk_size).to(self.decay)
                mask = torch.tril(torch.ones(self.recurrent_chunk_size,
                                             self.recurrent_chunk_size).to(self.decay))
                mask = torch.masked_fill(block_index[:, None] - block_index[None, :],
                                         ~mask.bool(), float("inf"))
                mask = torch.exp(mask * self.decay[:, None, None])
                mask = torch.nan_to_num(mask)
                value_inner_decay = mask[:, -1] / mask[:, -1].sum(dim=-1, keepdim=True)
                value_inner_decay = value_inner_decay.unsqueeze(-1)
                scale = mask.sum(dim=-1, keepdim=True).sqrt()
                inner_mask = mask / scale
                cross_decay = torch.exp(self.decay * self.recurrent_chunk_size)
                query_inner_decay = torch.exp(self.decay[:, None] * (block_index + 1))
                query_inner_decay = query_inner_decay[:, :, None] / (
                    scale / mask[:, -1].sum(dim=-1)[:, None, None])
                cross_decay = cross_decay[:, None, None]
                return ((sin, cos), (inner_mask, cross_decay, query_inner_decay,
                                     value_inner_decay))
            index = torch.arange(slen).to(self.decay)
            sin = torch.sin(index[:, None] * self.angle[None, :])
            cos = torch.cos(index[:, None] * self.angle[None, :])
            mask = torch.tril(torch.ones(slen, slen).to(self.decay))
            mask = torch.masked_fill(index[:, None] - index[None, :], ~mask.bool(),
                                     float("inf"))
            mask = torch.exp(mask * self.decay[:, None, None])
            mask = torch.nan_to_num(mask)
            mask = mask / mask.sum(dim=-1, keepdim=True).sqrt()
            return ((sin, cos), mask)

    class MultiScaleRetention(nn.Module):
        def __init__(self):
            super().__init__()
            self.value_dim, self.embed_dim, self.num_heads = value_dim, embed_dim, num_heads
            self.head_dim = value_dim // num_heads
            self.key_dim = embed_dim // num_heads
            self.scaling = self.key_dim ** -0.5
            self.q_proj = nn.Linear(embed_dim, embed_dim, bias=False)
            self.k_proj = nn.Linear(embed_dim, embed_dim, bias=False)
            self.v_proj = nn.Linear(embed_dim, value_dim, bias=False)
            self.g_proj = nn.Linear(embed_dim, value_dim, bias=False)
            self.out_proj = nn.Linear(value_dim, embed_dim, bias=False)
            self.group_norm = RMSNorm(self.head_dim, eps=1e-6, elementwise_affine=False)

        def parallel_forward(self, qr, kr, v, mask):
            bsz, tgt_len, embed_dim = v.size()
            vr = v.view(bsz, tgt_len, self.num_heads, self.head_dim).transpose(1, 2)
            qk_mat = qr @ kr.transpose(-1, -2)
            qk_mat = qk_mat * mask
            qk_mat = qk_mat / qk_mat.detach().abs().sum(dim=-1, keepdim=True).clamp(min=1,
                                                                                   max=5e4)
            output = torch.matmul(qk_mat, vr)
            return output.transpose(1, 2)

        def recurrent_forward(self, qr, kr, v, decay, incremental_state):
            bsz = v.size(0)
            v = v.view(bsz, self.num_heads, self.head_dim, 1)
            kv = kr * v
            if "prev_key_value" in incremental_state:
                prev_kv = incremental_state["prev_key_value"]
                prev_scale = incremental_state["scale"]
                scale = prev_scale * decay + 1
                kv = prev_kv * (prev_scale.sqrt() * decay / scale.sqrt()).view(
                    self.num_heads, 1, 1) + kv / scale.sqrt().view(self.num_heads, 1, 1)
            else:
                scale = torch.ones_like(decay)
            incremental_state["prev_key_value"] = kv
            incremental_state["scale"] = scale
            output = torch.sum(qr * kv, dim=3)
            return output

        def chunk_recurrent_forward(self, qr, kr, v, inner_mask):
            mask, cross_decay, query_inner_decay, value_inner_decay = inner_mask
            bsz, tgt_len, embed_dim = v.size()
            chunk_len = mask.size(1)
            num_chunks = tgt_len // chunk_len
            assert tgt_len % chunk_len == 0
            qr = qr.view(bsz, self.num_heads, num_chunks, chunk_len,
                         self.key_dim).transpose(1, 2)
            kr = kr.view(bsz, self.num_heads, num_chunks, chunk_len,
                         self.key_dim).transpose(1, 2)
            v = v.view(bsz, num_chunks, chunk_len, self.num_heads,
                       self.head_dim).transpose(2, 3)
            kr_t = kr.transpose(-1, -2)
            qk_mat = qr @ kr_t
            qk_mat = qk_mat * mask
            inner_scale = qk_mat.detach().abs().sum(dim=-1, keepdim=True).clamp(min=1)
            qk_mat = qk_mat / inner_scale
            inner_output = torch.matmul(qk_mat, v)
            kv = kr_t @ (v * value_inner_decay)
            kv_recurrent, cross_scale = [], []
            kv_state = torch.zeros(bsz, self.num_heads, self.key_dim, self.head_dim).to(v)
            kv_scale = torch.ones(bsz, self.num_heads, 1, 1).to(v)
            for i in range(num_chunks):
                kv_recurrent.append(kv_state / kv_scale)
                cross_scale.append(kv_scale)
                kv_state = kv_state * cross_decay + kv[:, i]
                kv_scale = kv_state.detach().abs().sum(dim=-2, keepdim=True).max(
                    dim=-1, keepdim=True).values.clamp(min=1)
            kv_recurrent = torch.stack(kv_recurrent, dim=1)
            cross_scale = torch.stack(cross_scale, dim=1)
            all_scale = torch.maximum(inner_scale, cross_scale)
            align_inner_scale = all_scale / inner_scale
            align_cross_scale = all_scale / cross_scale
            cross_output = (qr * query_inner_decay) @ kv_recurrent
            output = inner_output / align_inner_scale + cross_output / align_cross_scale
            return output.transpose(2, 3)

        def forward(self, x, rel_pos, chunkwise_recurrent=False, incremental_state=None):
            bsz, tgt_len, _ = x.size()
            (sin, cos), inner_mask = rel_pos
            q = self.q_proj(x)
            k = self.k_proj(x)
            v = self.v_proj(x)
            g = self.g_proj(x)
            k *= self.scaling
            q = q.view(bsz, tgt_len, self.num_heads, self.key_dim).transpose(1, 2)
            k = k.view(bsz, tgt_len, self.num_heads, self.key_dim).transpose(1, 2)
            qr = theta_shift(q, sin, cos)
            kr = theta_shift(k, sin, cos)
            if incremental_state is not None:
                output = self.recurrent_forward(qr, kr, v, inner_mask, incremental_state)
            elif chunkwise_recurrent:
                output = self.chunk_recurrent_forward(qr, kr, v, inner_mask)
            else:
                output = self.parallel_forward(qr, kr, v, inner_mask)
            output = self.group_norm(output).reshape(bsz, tgt_len, self.head_dim
                                                     * self.num_heads)
            output = F.silu(g) * output
            return self.out_proj(output)

    return RetNetRelPos, MultiScaleRetention


def retnet_program(torch):
    """A RetNet layer trained in its parallel form, then checked against its recurrent and
    chunkwise forms (equal up to float32 noise: the flags are in the results)."""
    rng = np.random.default_rng(2711)
    E, V, Hh, T, chunk = 8, 16, 2, 8, 4
    RelPos, MSR = _retnet(torch, E, V, Hh)
    retention = MSR()
    _fill_all(torch, retention, rng)
    ln = torch.nn.LayerNorm(E)
    head = torch.nn.Linear(E, 5)
    _fill_all(torch, head, rng)
    relpos = RelPos(E // Hh, Hh, chunk)
    params = list(retention.parameters()) + list(ln.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=5e-3, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.05)
    res = {"buffers": [n for n, _ in relpos.named_buffers()]}
    losses = []
    for step in range(3):
        x = normal(torch, rng, 2, T, E)
        y = torch.tensor(rng.integers(0, 5, (2, T)))
        out = head(ln(x + retention(x, relpos(T))))
        loss = torch.nn.functional.cross_entropy(out.transpose(1, 2), y, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res["losses"] = losses
    res["params"] = params
    x = normal(torch, rng, 2, T, E)
    with torch.no_grad():
        parallel = retention(x, relpos(T))
        chunked = retention(x, relpos(T, chunkwise_recurrent=True), chunkwise_recurrent=True)
        state, steps = {}, []
        for t in range(T):
            steps.append(retention(x[:, t:t + 1], relpos(t + 1, activate_recurrent=True),
                                   incremental_state=state))
        recurrent = torch.cat(steps, dim=1)
    res["parallel"], res["chunked"], res["recurrent"] = parallel, chunked, recurrent
    res["mask"] = relpos(T)[1]
    res["agree"] = [bool(torch.allclose(parallel, recurrent, atol=1e-4)),
                    bool(torch.allclose(parallel, chunked, atol=1e-4))]
    return res


def _hyena(torch, d_model, l_max, order, filter_order, emb_dim):
    nn = torch.nn

    class OptimModule(nn.Module):
        def register(self, name, tensor, lr=None, wd=0.0):
            if lr == 0.0:
                self.register_buffer(name, tensor)
            else:
                self.register_parameter(name, nn.Parameter(tensor))
                optim = {}
                if lr is not None:
                    optim["lr"] = lr
                if wd is not None:
                    optim["weight_decay"] = wd
                setattr(getattr(self, name), "_optim", optim)

    def fftconv(u, k, D):
        seqlen = u.shape[-1]
        fft_size = 2 * seqlen
        k_f = torch.fft.rfft(k, n=fft_size) / fft_size
        u_f = torch.fft.rfft(u.to(dtype=k.dtype), n=fft_size)
        if len(u.shape) > 3:
            k_f = k_f.unsqueeze(1)
        y = torch.fft.irfft(u_f * k_f, n=fft_size, norm="forward")[..., :seqlen]
        out = y + u * D.unsqueeze(-1)
        return out.to(dtype=u.dtype)

    class Sin(nn.Module):
        def __init__(self, dim, w=10, train_freq=True):
            super().__init__()
            self.freq = (nn.Parameter(w * torch.ones(1, dim)) if train_freq
                         else w * torch.ones(1, dim))

        def forward(self, x):
            return torch.sin(self.freq * x)

    class PositionalEmbedding(OptimModule):
        def __init__(self, emb_dim, seq_len, lr_pos_emb=1e-5):
            super().__init__()
            self.seq_len = seq_len
            t = torch.linspace(0, 1, self.seq_len)[None, :, None]
            bands = (emb_dim - 1) // 2
            t_rescaled = torch.linspace(0, seq_len - 1, seq_len)[None, :, None]
            w = 2 * math.pi * t_rescaled / seq_len
            f = torch.linspace(1e-4, bands - 1, bands)[None, None]
            z = torch.exp(-1j * f * w)
            z = torch.cat([t, z.real, z.imag], dim=-1)
            self.register("z", z, lr=lr_pos_emb)
            self.register("t", t, lr=0.0)

        def forward(self, L):
            return self.z[:, :L], self.t[:, :L]

    class ExponentialModulation(OptimModule):
        def __init__(self, d_model, fast_decay_pct=0.3, slow_decay_pct=1.5, target=1e-2,
                     modulation_lr=0.0, shift=0.0):
            super().__init__()
            self.shift = shift
            max_decay = math.log(target) / fast_decay_pct
            min_decay = math.log(target) / slow_decay_pct
            deltas = torch.linspace(min_decay, max_decay, d_model)[None, None]
            self.register("deltas", deltas, lr=modulation_lr)

        def forward(self, t, x):
            decay = torch.exp(-t * self.deltas.abs())
            return x * (decay + self.shift)

    class HyenaFilter(OptimModule):
        def __init__(self, d_model, emb_dim, order, seq_len, lr=1e-3, lr_pos_emb=1e-5, w=1):
            super().__init__()
            self.d_model = d_model
            self.bias = nn.Parameter(torch.randn(self.d_model))
            act = Sin(dim=order, w=w)
            self.pos_emb = PositionalEmbedding(emb_dim, seq_len, lr_pos_emb)
            self.implicit_filter = nn.Sequential(nn.Linear(emb_dim, order), act,
                                                 nn.Linear(order, order), act,
                                                 nn.Linear(order, d_model, bias=False))
            self.modulation = ExponentialModulation(d_model)
            for c in self.implicit_filter.children():
                for name, v in c.state_dict().items():
                    optim = {"weight_decay": 0.0, "lr": lr}
                    setattr(getattr(c, name), "_optim", optim)

        def filter(self, L):
            z, t = self.pos_emb(L)
            h = self.implicit_filter(z)
            return self.modulation(t, h)

        def forward(self, x, L, k=None, bias=None):
            if k is None:
                k = self.filter(L)
            k = k[0] if type(k) is tuple else k
            return fftconv(x, k, bias)

    class HyenaOperator(nn.Module):
        def __init__(self):
            super().__init__()
            self.d_model, self.l_max, self.order = d_model, l_max, order
            inner_width = d_model * (order + 1)
            self.in_proj = nn.Linear(d_model, inner_width)
            self.out_proj = nn.Linear(d_model, d_model)
            self.short_filter = nn.Conv1d(inner_width, inner_width, 3, padding=2,
                                          groups=inner_width)
            self.filter_fn = HyenaFilter(d_model * (order - 1), emb_dim, filter_order, l_max)

        def forward(self, u):
            seqlen = u.size(-2)
            l_filter = min(seqlen, self.l_max)
            u = self.in_proj(u)
            u = u.transpose(1, 2)
            uc = self.short_filter(u)[..., :l_filter]
            *x, v = uc.split(self.d_model, dim=1)
            k = self.filter_fn.filter(l_filter)[0]
            k = k.reshape(l_filter, self.order - 1, self.d_model).permute(1, 2, 0)
            bias = self.filter_fn.bias.reshape(self.order - 1, self.d_model)
            for o, x_i in enumerate(reversed(x[1:])):
                v = v * x_i
                v = self.filter_fn(v, l_filter, k=k[o], bias=bias[o])
            y = (v * x[0]).transpose(1, 2)
            return self.out_proj(y)

    return HyenaOperator


def hyena_program(torch):
    """A Hyena operator (order 3) in a small LM, AdamW with the `_optim` groups as
    safari's optimizer setup builds them, gradients of the implicit filter."""
    rng = np.random.default_rng(2712)
    d_model, L, vocab = 4, 8, 7
    op = _hyena(torch, d_model, L, order=3, filter_order=6, emb_dim=5)()
    _fill_all(torch, op, rng, skip=("z", "deltas"))
    emb = torch.nn.Embedding(vocab, d_model)
    _fill_all(torch, emb, rng)
    model = torch.nn.ModuleDict({"emb": emb, "op": op})
    all_params = list(model.parameters())
    plain = [p for p in all_params if not hasattr(p, "_optim")]
    opt = torch.optim.AdamW(plain, lr=1e-2, weight_decay=0.1)
    hps = [getattr(p, "_optim") for p in all_params if hasattr(p, "_optim")]
    hps = [dict(s) for s in sorted(list(dict.fromkeys(frozenset(hp.items()) for hp in hps)))]
    for hp in hps:
        opt.add_param_group({"params": [p for p in all_params
                                        if getattr(p, "_optim", None) == hp], **hp})
    res = {"groups": [f"{len(g['params'])} {g['lr']} {g['weight_decay']}"
                      for g in opt.param_groups],
           "buffers": [n for n, _ in model.named_buffers()]}
    losses = []
    for step in range(3):
        ids = torch.tensor(rng.integers(0, vocab, (2, L + 1)))
        h = model["op"](model["emb"](ids[:, :-1]))
        logits = h @ model["emb"].weight.t()
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        if step == 0:
            res["filter_grads"] = [p.grad for p in op.filter_fn.parameters()]
            res["z_grad"] = op.filter_fn.pos_emb.z.grad
        opt.step()
        losses.append(loss.item())
    res["losses"], res["params"] = losses, all_params
    with torch.no_grad():
        res["filter"] = op.filter_fn.filter(L)
    return res


PROGRAMS = [retnet_program, hyena_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
