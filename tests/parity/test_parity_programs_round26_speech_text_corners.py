"""The odd corners of the speech / text / diffusion repositories, run once with `torch` bound to
ember and once to PyTorch from the same NumPy weights and data: Whisper's low-precision module
subclasses (a Conv1d overriding ``_conv_forward``, a Linear casting its weight, a LayerNorm
running in float32) in bfloat16, language detection by a boolean column mask; guided-diffusion's
recompute-in-backward checkpoint Function, learned-range variances, the discretized Gaussian
likelihood and the KL terms, classifier guidance by autograd.grad inside enable_grad under
no_grad; wav2vec 2.0's weight-normed positional conv (dim=2) with SamePad over packed BiLSTM
features; T5 in float16 with HF's _shift_right, extended masks and clamp bounds as tensors."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _name(dtype):
    return str(dtype).split(".")[-1]


def whisper_lowp_program(torch):
    """Whisper's dtype-following modules in bfloat16: the encoder stem through a Conv1d
    subclass overriding _conv_forward, Linear casting its float32 weight to the input's dtype,
    LayerNorm computed in float32 and cast back; language detection masks non-language columns
    by a boolean vector and reads probabilities with softmax + topk."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2621)

    class LayerNorm(nn.LayerNorm):
        def forward(self, x):
            return super().forward(x.float()).type(x.dtype)

    class Linear(nn.Linear):
        def forward(self, x):
            return F.linear(x, self.weight.to(x.dtype),
                            None if self.bias is None else self.bias.to(x.dtype))

    class Conv1d(nn.Conv1d):
        def _conv_forward(self, x, weight, bias):
            return super()._conv_forward(x, weight.to(x.dtype),
                                         None if bias is None else bias.to(x.dtype))

    conv1, conv2 = Conv1d(4, 8, 3, padding=1), Conv1d(8, 8, 3, stride=2, padding=1)
    ln, proj = LayerNorm(8), Linear(8, 10)
    mods = nn.ModuleList([conv1, conv2, ln, proj])
    fill_(torch, mods, rng, 0.5)
    mel = normal(torch, rng, 2, 4, 8)
    res = {}
    for dt in (torch.float32, torch.bfloat16, torch.float16):
        x = F.gelu(conv1(mel.to(dt)))
        x = F.gelu(conv2(x)).permute(0, 2, 1)
        logits = proj(ln(x))[:, 0]
        name = str(dt).split(".")[-1]
        res[f"logits_{name}"] = logits.float()
        res[f"dtypes_{name}"] = [_name(x.dtype), _name(logits.dtype), _name(ln(x).dtype)]
        mask = torch.ones(logits.shape[-1], dtype=torch.bool)
        mask[[3, 5, 6, 8]] = False
        logits = logits.clone()
        logits[:, mask] = -np.inf
        language_tokens = logits.argmax(dim=-1)
        language_token_probs = logits.softmax(dim=-1).cpu()
        res[f"lang_{name}"] = language_tokens
        res[f"probs_{name}"] = language_token_probs[:, [3, 5, 6, 8]].float()
        top = language_token_probs.float().topk(2, dim=-1)
        res[f"top_{name}"] = top.indices
    loss = proj(ln(F.gelu(conv2(F.gelu(conv1(mel.to(torch.bfloat16)))))
                   .permute(0, 2, 1))).float().logsumexp(-1).sum()
    loss.backward()
    res["bf16_grads"] = [conv1.weight.grad, proj.bias.grad, ln.weight.grad]
    res["grad_dtypes"] = [_name(conv1.weight.grad.dtype), _name(proj.weight.grad.dtype)]
    return res


class _CheckpointFunction:
    """guided-diffusion's recompute-in-backward checkpoint, built per library."""

    @staticmethod
    def make(torch):
        class CheckpointFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, run_function, length, *args):
                ctx.run_function = run_function
                ctx.input_tensors = list(args[:length])
                ctx.input_params = list(args[length:])
                with torch.no_grad():
                    return ctx.run_function(*ctx.input_tensors)

            @staticmethod
            def backward(ctx, *output_grads):
                ctx.input_tensors = [x.detach().requires_grad_(True) for x in ctx.input_tensors]
                with torch.enable_grad():
                    copies = [x.view_as(x) for x in ctx.input_tensors]
                    outs = ctx.run_function(*copies)
                grads = torch.autograd.grad(outs, ctx.input_tensors + ctx.input_params,
                                            output_grads, allow_unused=True)
                del ctx.input_tensors
                del ctx.input_params
                return (None, None) + grads
        return CheckpointFunction


def guided_diffusion_program(torch):
    """Improved-DDPM training with learned-range variances (hybrid loss: MSE on eps plus the
    variational bound on a frozen mean), a checkpointed GroupNorm32/QKV-attention block,
    NumPy float64 schedules gathered by _extract_into_tensor, an EMA by mul_/add_(alpha=), and
    one classifier-guided sampling step with autograd.grad inside enable_grad under no_grad."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2622)
    T, C, Lx, B = 20, 4, 6, 3
    CheckpointFunction = _CheckpointFunction.make(torch)

    betas = np.linspace(1e-4, 0.2, T, dtype=np.float64)
    alphas_cumprod = np.cumprod(1.0 - betas, axis=0)
    alphas_cumprod_prev = np.append(1.0, alphas_cumprod[:-1])
    posterior_variance = betas * (1.0 - alphas_cumprod_prev) / (1.0 - alphas_cumprod)
    posterior_log_variance_clipped = np.log(np.append(posterior_variance[1],
                                                      posterior_variance[1:]))
    posterior_mean_coef1 = betas * np.sqrt(alphas_cumprod_prev) / (1.0 - alphas_cumprod)
    posterior_mean_coef2 = (1.0 - alphas_cumprod_prev) * np.sqrt(1.0 - betas) / (
        1.0 - alphas_cumprod)

    def _extract(arr, timesteps, broadcast_shape):
        out = torch.from_numpy(arr).to(device=timesteps.device)[timesteps].float()
        while len(out.shape) < len(broadcast_shape):
            out = out[..., None]
        return out.expand(broadcast_shape)

    def normal_kl(mean1, logvar1, mean2, logvar2):
        logvar1, logvar2 = [x if isinstance(x, torch.Tensor) else torch.tensor(x).to(mean1)
                            for x in (logvar1, logvar2)]
        return 0.5 * (-1.0 + logvar2 - logvar1 + torch.exp(logvar1 - logvar2)
                      + ((mean1 - mean2) ** 2) * torch.exp(-logvar2))

    def approx_standard_normal_cdf(x):
        return 0.5 * (1.0 + torch.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * torch.pow(x, 3))))

    def discretized_gaussian_log_likelihood(x, means, log_scales):
        centered_x = x - means
        inv_stdv = torch.exp(-log_scales)
        cdf_plus = approx_standard_normal_cdf(inv_stdv * (centered_x + 1.0 / 255.0))
        cdf_min = approx_standard_normal_cdf(inv_stdv * (centered_x - 1.0 / 255.0))
        log_cdf_plus = torch.log(cdf_plus.clamp(min=1e-12))
        log_one_minus_cdf_min = torch.log((1.0 - cdf_min).clamp(min=1e-12))
        cdf_delta = cdf_plus - cdf_min
        return torch.where(x < -0.999, log_cdf_plus, torch.where(
            x > 0.999, log_one_minus_cdf_min, torch.log(cdf_delta.clamp(min=1e-12))))

    def mean_flat(t):
        return t.mean(dim=list(range(1, len(t.shape))))

    class GroupNorm32(nn.GroupNorm):
        def forward(self, x):
            return super().forward(x.float()).type(x.dtype)

    class AttentionBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = GroupNorm32(2, C)
            self.qkv = nn.Conv1d(C, 3 * C, 1)
            self.proj_out = nn.Conv1d(C, C, 1)

        def forward(self, x):
            params = tuple(self.parameters())
            return CheckpointFunction.apply(self._forward, 1, x, *params)

        def _forward(self, x):
            b, c, *spatial = x.shape
            x = x.reshape(b, c, -1)
            qkv = self.qkv(self.norm(x))
            bs, width, length = qkv.shape
            ch = width // (3 * 2)
            q, k, v = qkv.reshape(bs * 2, ch * 3, length).split(ch, dim=1)
            scale = 1 / math.sqrt(math.sqrt(ch))
            weight = torch.einsum("bct,bcs->bts", q * scale, k * scale)
            weight = torch.softmax(weight.float(), dim=-1).type(weight.dtype)
            a = torch.einsum("bts,bcs->bct", weight, v).reshape(bs, -1, length)
            return (x + self.proj_out(a)).reshape(b, c, *spatial)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Conv1d(C, C, 3, padding=1)
            self.temb = nn.Linear(8, C)
            self.attn = AttentionBlock()
            self.out = nn.Sequential(GroupNorm32(2, C), nn.SiLU(), nn.Conv1d(C, 2 * C, 3,
                                                                             padding=1))

        def forward(self, x, t):
            half = 4
            freqs = torch.exp(-math.log(10000) * torch.arange(0, half, dtype=torch.float32)
                              / half)
            args = t[:, None].float() * freqs[None]
            emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
            h = self.inp(x) + self.temb(emb)[..., None]
            return self.out(self.attn(h))

    model = Model()
    fill_(torch, model, rng, 0.4)
    ema = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.0)
    res = {"losses": []}
    for step in range(3):
        x_start = torch.tanh(normal(torch, rng, B, C, Lx))
        t = torch.from_numpy(rng.integers(0, T, B))
        noise = normal(torch, rng, B, C, Lx)
        x_t = (_extract(np.sqrt(alphas_cumprod), t, x_start.shape) * x_start
               + _extract(np.sqrt(1.0 - alphas_cumprod), t, x_start.shape) * noise)
        model_output = model(x_t, t)
        model_output, model_var_values = torch.split(model_output, C, dim=1)
        frozen_out = torch.cat([model_output.detach(), model_var_values], dim=1)
        min_log = _extract(posterior_log_variance_clipped, t, x_t.shape)
        max_log = _extract(np.log(betas), t, x_t.shape)
        frac = (frozen_out[:, C:] + 1) / 2
        model_log_variance = frac * max_log + (1 - frac) * min_log
        eps = frozen_out[:, :C]
        pred_xstart = (_extract(np.sqrt(1.0 / alphas_cumprod), t, x_t.shape) * x_t
                       - _extract(np.sqrt(1.0 / alphas_cumprod - 1), t, x_t.shape) * eps)
        model_mean = (_extract(posterior_mean_coef1, t, x_t.shape) * pred_xstart
                      + _extract(posterior_mean_coef2, t, x_t.shape) * x_t)
        true_mean = (_extract(posterior_mean_coef1, t, x_t.shape) * x_start
                     + _extract(posterior_mean_coef2, t, x_t.shape) * x_t)
        kl = mean_flat(normal_kl(true_mean, min_log, model_mean, model_log_variance)) / np.log(2.0)
        nll = -mean_flat(discretized_gaussian_log_likelihood(
            x_start, means=model_mean, log_scales=0.5 * model_log_variance)) / np.log(2.0)
        vb = torch.where((t == 0), nll, kl) * T / 1000.0
        mse = mean_flat((noise - model_output) ** 2)
        loss = (mse + vb).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        for targ, src in zip(ema, model.parameters()):
            targ.detach().mul_(0.99).add_(src, alpha=1 - 0.99)
        res["losses"].append([mse.mean().item(), vb.mean().item()])
    res["attn_qkv_grad"] = model.attn.qkv.weight.grad
    res["norm_grad"] = model.attn.norm.weight.grad
    res["ema"] = ema[0]

    classifier = nn.Sequential(nn.Flatten(), nn.Linear(C * Lx, 3))
    fill_(torch, classifier, rng, 0.3)
    y = torch.tensor([0, 2, 1])

    def cond_fn(x, t, y):
        with torch.enable_grad():
            x_in = x.detach().requires_grad_(True)
            logits = classifier(x_in + 0.0 * t[:, None, None])
            log_probs = F.log_softmax(logits, dim=-1)
            selected = log_probs[range(len(logits)), y.view(-1)]
            return torch.autograd.grad(selected.sum(), x_in)[0] * 2.0

    with torch.no_grad():
        x = normal(torch, rng, B, C, Lx)
        t = torch.tensor([T - 1] * B)
        out, var_v = torch.split(model(x, t), C, dim=1)
        frac = (var_v + 1) / 2
        log_var = (frac * _extract(np.log(betas), t, x.shape)
                   + (1 - frac) * _extract(posterior_log_variance_clipped, t, x.shape))
        g = cond_fn(x, t, y)
        mean = x + torch.exp(log_var) * g.float()
        res["guided_mean"] = mean
        res["guided_grad"] = g
        res["grad_flags"] = [g.requires_grad, mean.requires_grad, torch.is_grad_enabled()]
    return res


def wav2vec2_posconv_program(torch):
    """wav2vec 2.0's context network input: a BiLSTM over pack_padded_sequence features
    (unsorted, enforce_sorted=False), pad_packed_sequence back, then the positional convolution
    as a grouped Conv1d under weight_norm(name='weight', dim=2) with SamePad trimming, GELU and
    a residual LayerNorm; the weight_g/weight_v gradients after a few SGD steps."""
    nn = torch.nn
    rng = np.random.default_rng(2623)
    B, T, D = 3, 7, 8

    class SamePad(nn.Module):
        def __init__(self, kernel_size):
            super().__init__()
            self.remove = 1 if kernel_size % 2 == 0 else 0

        def forward(self, x):
            if self.remove > 0:
                x = x[:, :, : -self.remove]
            return x

    lstm = nn.LSTM(4, D // 2, batch_first=True, bidirectional=True)
    conv = nn.Conv1d(D, D, kernel_size=4, padding=2, groups=2)
    fill_(torch, nn.ModuleList([lstm, conv]), rng, 0.4)
    conv = nn.utils.weight_norm(conv, name="weight", dim=2)     # deprecated: warns
    pos_conv = nn.Sequential(conv, SamePad(4), nn.GELU())
    layer_norm = nn.LayerNorm(D)
    params = list(lstm.parameters()) + list(pos_conv.parameters()) + list(
        layer_norm.parameters())
    opt = torch.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True)
    feats = normal(torch, rng, B, T, 4)
    lengths = torch.tensor([5, 7, 3])
    res = {"losses": [], "g_shape": list(conv.weight_g.shape),
           "names": sorted(n for n, _ in pos_conv.named_parameters())}
    for _ in range(3):
        packed = nn.utils.rnn.pack_padded_sequence(feats, lengths, batch_first=True,
                                                   enforce_sorted=False)
        out, (h, c) = lstm(packed)
        x, out_lens = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=T)
        x_conv = pos_conv(x.transpose(1, 2)).transpose(1, 2)
        x = layer_norm(x + x_conv)
        valid = torch.arange(T)[None] < out_lens[:, None]
        loss = (x.pow(2).sum(-1) * valid).sum() / valid.sum() + h.abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["out_lens"] = out_lens
    res["sorted_indices"] = packed.sorted_indices
    res["batch_sizes"] = packed.batch_sizes
    res["g_grad"] = conv.weight_g.grad
    res["v_grad"] = conv.weight_v.grad
    res["h"] = h
    return res


def t5_fp16_program(torch):
    """T5 blocks as HF transformers runs them in float16: _shift_right building decoder inputs
    from -100 labels, an extended attention mask (1 - mask) * finfo.min, a gated-GELU FF with
    approximate='tanh', and the fp16 overflow clamp whose bound is chosen by torch.where over
    isinf(...).any() and passed to clamp as 0-dim tensors."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2624)
    D, V = 8, 16
    labels = torch.tensor([[5, 6, 7, -100], [8, 9, -100, -100]])
    shifted = labels.new_zeros(labels.shape)
    shifted[..., 1:] = labels[..., :-1].clone()
    shifted[..., 0] = 0
    shifted.masked_fill_(shifted == -100, 0)
    res = {"shifted": shifted}
    attention_mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    for dt in (torch.float16, torch.bfloat16, torch.float32):
        ext = attention_mask[:, None, None, :].to(dtype=dt)
        ext = (1.0 - ext) * torch.finfo(dt).min
        name = str(dt).split(".")[-1]
        res[f"ext_{name}"] = ext.float()
        res[f"ext_dtype_{name}"] = [_name(ext.dtype)]

    wi_0, wi_1, wo = nn.Linear(D, 16, bias=False), nn.Linear(D, 16, bias=False), nn.Linear(
        16, D, bias=False)
    emb = nn.Embedding(V, D)
    mods = nn.ModuleList([wi_0, wi_1, wo, emb]).to(torch.float16)
    fill_(torch, mods, rng, 0.5)
    with torch.no_grad():
        wo.weight.mul_(3000.0)     # overflow float16 inside the FF

    def ff(h):
        hidden_gelu = F.gelu(wi_0(h), approximate="tanh")
        hidden = hidden_gelu * wi_1(h)
        return wo(hidden.to(wo.weight.dtype))

    h = emb(shifted)
    out = h + ff(h)
    res["had_inf"] = [bool(torch.isinf(out).any())]
    if out.dtype == torch.float16:
        clamp_value = torch.where(torch.isinf(out).any(), torch.finfo(out.dtype).max - 1000,
                                  torch.finfo(out.dtype).max)
        out = torch.clamp(out, min=-clamp_value, max=clamp_value)
    res["clamp_value"] = clamp_value.float()
    res["clamp_dtype"] = [_name(clamp_value.dtype)]
    res["clamped"] = out.float()
    res["clamped_dtype"] = [_name(out.dtype)]
    res["finite"] = [bool(torch.isfinite(out).all())]
    return res


def conformer_bf16_program(torch):
    """A Conformer convolution module and an HF-style NewGELU feed-forward run as a bfloat16
    model (``.to(torch.bfloat16)``, so BatchNorm1d's weight and statistics are bfloat16 too):
    pointwise conv, GLU, depthwise conv, BatchNorm1d in training and eval, SiLU, and
    0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * torch.pow(x, 3.0))))."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2625)
    D = 6

    class NewGELUActivation(nn.Module):
        def forward(self, x):
            return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi)
                                               * (x + 0.044715 * torch.pow(x, 3.0))))

    conv = nn.ModuleDict({
        "pointwise_conv1": nn.Conv1d(D, 2 * D, 1), "depthwise": nn.Conv1d(D, D, 3, padding=1,
                                                                          groups=D, bias=False),
        "norm": nn.BatchNorm1d(D), "pointwise_conv2": nn.Conv1d(D, D, 1),
        "ff1": nn.Linear(D, 12), "ff2": nn.Linear(12, D)})
    fill_(torch, conv, rng, 0.5)
    conv = conv.to(torch.bfloat16)
    act = NewGELUActivation()
    x = (normal(torch, rng, 2, 9, D) * 2).to(torch.bfloat16)
    lengths = torch.tensor([9, 6])
    pad = (torch.arange(9)[None] >= lengths[:, None]).unsqueeze(1)
    res = {}
    for mode in ("train", "eval"):
        conv.train(mode == "train")
        if mode == "eval":
            res["running_mean"] = conv["norm"].running_mean.float()
            # evaluate with a checkpoint's variance: the bfloat16 running variance update
            # still differs from PyTorch's in the last bit now and then (see the _fixes file)
            with torch.no_grad():
                conv["norm"].running_var.copy_(torch.linspace(0.5, 2.0, D))
        h = x.transpose(1, 2).masked_fill(pad, 0.0)
        h = F.glu(conv["pointwise_conv1"](h), dim=1)
        h = F.silu(conv["norm"](conv["depthwise"](h)))
        h = conv["pointwise_conv2"](h).masked_fill(pad, 0.0).transpose(1, 2)
        y = x + h + 0.5 * conv["ff2"](act(conv["ff1"](x + h)))
        res[f"out_{mode}"] = y.float()
        res[f"dtype_{mode}"] = [_name(y.dtype), _name(conv["norm"].running_var.dtype)]
    res["gelu_pow"] = act(x).float()
    return res


PROGRAMS = [whisper_lowp_program, guided_diffusion_program, wav2vec2_posconv_program,
            t5_fp16_program, conformer_bf16_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
